#!/bin/sh
# usage: guess.sh BIN MODE(quiet|guess): bench http paced at 2000 req/s for 5 s with good credentials;
# with guess, 200 wrong guesses from 127.0.0.2 run meanwhile (curl --interface).
BIN=$1; MODE=$2
taskset -c 1 $BIN serve --config /tmp/auth/auth.toml --listen 127.0.0.1:18090 >/dev/null 2>&1 &
PID=$!; sleep 0.4
$BIN bench http http://127.0.0.1:18090/1k.bin -c 8 -R 2000 -d 5 --cpu 0 --expect-status 200 -H "Authorization: Basic YWxpY2U6c2VjcmV0" --json > /tmp/auth/lat-$MODE.json &
B=$!
if [ "$MODE" = guess ]; then
  sleep 1
  codes=""
  for i in $(seq 1 200); do
    c=$(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.2 -u "alice:guess$i" http://127.0.0.1:18090/1k.bin)
    codes="$codes $c"
  done
  echo "$codes" | tr ' ' '\n' | sort | uniq -c | sed 's/^/guesses: /'
fi
wait $B
kill $PID; wait $PID 2>/dev/null
python3 -c "
import json; r=json.load(open('/tmp/auth/lat-$MODE.json')); r=r[0] if isinstance(r,list) else r
l=r['latency_us']; print('$MODE', 'requests', r['requests'], 'errors', sum(r['errors'].values()), 'p50', l['p50'], 'p99', l['p99'], 'p999', l['p999'], 'max', l['max'], 'us')"
