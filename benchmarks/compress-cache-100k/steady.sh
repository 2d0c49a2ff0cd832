#!/bin/sh
# usage: [COLD=1] steady.sh ROUNDS BIN: one server (CPU 1), the cache warmed first; then rounds of
# cache.js and pre.js, 3 s each, Accept-Encoding: gzip, client on CPU 0.
R=$1; BIN=$2
rm -rf /tmp/zc/cache
# COLD=1: pre.js.gz's pages dropped first (POSIX_FADV_DONTNEED), as DAMON may leave them.
[ "${COLD:-0}" = 1 ] && python3 /tmp/zc/drop.py /tmp/zc/www/pre.js.gz
taskset -c 1 $BIN serve --config /tmp/zc/zc.toml --listen 127.0.0.1:18092 >/dev/null 2>&1 &
PID=$!; sleep 0.4
until curl -s -H "Accept-Encoding: gzip" -D - -o /dev/null http://127.0.0.1:18092/cache.js | grep -qi "content-encoding: gzip"; do sleep 0.05; done
for i in $(seq 1 $R); do
for f in cache pre; do
  out=$($BIN bench http http://127.0.0.1:18092/$f.js -c 32 -d 3 --cpu 0 --server-pid $PID --expect-status 200 -H "Accept-Encoding: gzip" | grep "server \|requests ")
  echo "$f $(echo $out | sed 's/.*CPU), //; s| us/request.*||') $(echo $out | sed 's/.*s: //; s/ requests.s.*//')"
done; done
curl -s http://127.0.0.1:18092/.status | python3 -c "import json,sys; print(json.load(sys.stdin)['compress_cache'])"
kill $PID; wait $PID 2>/dev/null
