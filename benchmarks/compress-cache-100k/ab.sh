#!/bin/sh
# usage: ab.sh ROUNDS BIN: each round, a fresh server (empty cache) per file, cache.js then pre.js,
# 10,000 requests with Accept-Encoding: gzip; server on CPU 1, client on CPU 0.
R=$1; BIN=$2
for i in $(seq 1 $R); do
for f in cache pre; do
  rm -rf /tmp/zc/cache
  taskset -c 1 $BIN serve --config /tmp/zc/zc.toml --listen 127.0.0.1:18091 >/dev/null 2>&1 &
  PID=$!; sleep 0.4
  out=$($BIN bench http http://127.0.0.1:18091/$f.js -c 32 -n 10000 --cpu 0 --server-pid $PID --expect-status 200 -H "Accept-Encoding: gzip" | grep "server \|requests ")
  st=$(curl -s http://127.0.0.1:18091/.status | python3 -c "import json,sys; c=json.load(sys.stdin)['compress_cache']; print('hits=%d waits=%d written=%d' % (c['hits'], c['waits'], c['written']))")
  echo "$f $(echo $out | sed 's/.*CPU), //; s| us/request.*||') $(echo $out | sed 's/.*s: //; s/ requests.s.*//') $st"
  kill $PID; wait $PID 2>/dev/null
done; done
