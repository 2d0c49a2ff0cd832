#!/bin/sh
# usage: ab.sh ROUNDS BIN; each round: open then auth, 3 s each, server on CPU 1, client on CPU 0
R=$1; BIN=$2
for i in $(seq 1 $R); do
for v in open auth; do
  taskset -c 1 $BIN serve --config /tmp/auth/$v.toml --listen 127.0.0.1:18090 >/dev/null 2>&1 &
  PID=$!; sleep 0.4
  out=$($BIN bench http http://127.0.0.1:18090/1k.bin -c 32 -d 3 --cpu 0 --server-pid $PID --expect-status 200 -H "Authorization: Basic YWxpY2U6c2VjcmV0" | grep "server \|requests ")
  echo "$v $(echo $out | sed 's/.*CPU), //; s| us/request.*||') $(echo $out | sed 's/.*s: //; s/ requests.s.*//')"
  kill $PID; wait $PID 2>/dev/null
done; done
