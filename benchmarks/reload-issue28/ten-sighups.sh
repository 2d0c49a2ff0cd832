#!/bin/bash
# usage: run.sh BIN DRIVER -> prints the bench json's errors sum and retried
BIN=$1; DRIVER=$2
PORT=$((20000 + RANDOM % 20000))
$BIN serve /tmp/rl --listen 127.0.0.1:$PORT --workers 2 --access-log off --driver $DRIVER > /tmp/rl/out.$$ 2>/tmp/rl/err.$$ &
S=$!
sleep 0.5
$BIN bench http http://127.0.0.1:$PORT/f.bin -c 32 -d 14 --json > /tmp/rl/bench.$$ &
B=$!
for i in $(seq 10); do sleep 1.2; kill -HUP $S; done
wait $B
kill -TERM $S; wait $S
python3 -c "
import json,sys
v=json.load(open('/tmp/rl/bench.$$'))
print('$DRIVER', 'requests', v['requests'], 'errors', sum(v['errors'].values()), 'retried', v['retried'])
"
rm -f /tmp/rl/*.$$
