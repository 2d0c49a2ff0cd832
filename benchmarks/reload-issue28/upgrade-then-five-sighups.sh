#!/bin/bash
# usage: upgrade.sh BIN DRIVER LOADFLAGS -> errors and retried of bench http under 5 SIGHUPs after USR2+QUIT
BIN=$1; DRIVER=$2; shift 2
PORT=$((20000 + RANDOM % 20000))
D=$(mktemp -d)
$BIN serve /tmp/rl --listen 127.0.0.1:$PORT --workers 2 --access-log off --driver $DRIVER > $D/out 2> $D/err &
S=$!
sleep 0.5
kill -USR2 $S; sleep 1
NEW=$(grep -o "as PID [0-9]*" $D/err | awk '{print $3}')
kill -QUIT $S; wait $S
$BIN bench http http://127.0.0.1:$PORT/f.bin -c 16 -d 4 --json "$@" > $D/bench &
B=$!
for i in 1 2 3 4 5; do sleep 0.6; kill -HUP $NEW; done
wait $B
kill -TERM $NEW; sleep 0.5
python3 -c "
import json
v=json.load(open('$D/bench'))
print('$DRIVER', '$*', 'requests', v['requests'], 'errors', sum(v['errors'].values()), 'retried', v['retried'])
"
rm -rf $D
