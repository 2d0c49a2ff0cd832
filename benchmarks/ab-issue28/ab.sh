#!/bin/bash
# A/B requests/s for 1 KiB, old vs new, interleaved, pinned: server CPU 1, client CPU 0.
DRIVER=$1; OUT=$2; mkdir -p $OUT; rm -f $OUT/*
for i in $(seq ${ROUNDS:-5}); do
  for v in old new; do
    if [ $v = old ]; then BIN=${OLD:-/tmp/old-target/release/linerate}; else BIN=${NEW:-/work/main/target/release/linerate}; fi
    PORT=$((30000 + RANDOM % 10000))
    env $ENVX taskset -c 1 $BIN serve /tmp/www --listen 127.0.0.1:$PORT --workers 1 --access-log off --driver $DRIVER >/dev/null 2>/tmp/ab-server.err &
    S=$!; sleep 0.4
    taskset -c 0 /work/main/target/release/linerate bench http http://127.0.0.1:$PORT/1k.bin -c 64 -d 5 --json > /tmp/ab.json 2>/dev/null
    python3 -c "import json; v=json.load(open('/tmp/ab.json')); print(v['requests_per_second'])" >> $OUT/$v.rps
    kill $S; wait $S 2>/dev/null
  done
done
/work/main/target/release/linerate stat $OUT/old.rps $OUT/new.rps
