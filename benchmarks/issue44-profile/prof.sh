#!/bin/sh
# A flat CPU profile of one linerate build under load, as BENCHMARKS.md's issue 44
# section measured it: prof.sh NAME BIN PORT [URL-PATH-AND-OPTIONS]
#   the server: `BIN serve /tmp/www --workers 1 --access-log off` pinned to CPU 0
#   the load:   `linerate bench http ... -c 32 -d 5 --cpu 1 --server-pid PID`
#   the profile: 3 s of `perf record -e cpu-clock` of the server, written to
#   /tmp/prof-NAME.data, the load's report to /tmp/prof-NAME.load.
# Make the files first: `linerate bench files --sizes 1K --mix specweb99 /tmp/www`.
# Add `LOG=on` to the environment to keep the default access log.
NAME=$1; BIN=$2; PORT=$3; WHAT=${4:-/1K.bin}
LINERATE=${LINERATE:-target/release/linerate}
if [ "${LOG:-off}" = on ]; then LOGARGS=""; else LOGARGS="--access-log off"; fi
taskset -c 0 "$BIN" serve /tmp/www --workers 1 $LOGARGS --listen 127.0.0.1:$PORT >/dev/null 2>&1 &
SP=$!
sleep 1
PID=$(pgrep -f "listen 127.0.0.1:$PORT" | head -1)
"$LINERATE" bench http http://127.0.0.1:$PORT$WHAT -c 32 -d 5 --cpu 1 --server-pid "$PID" \
  > /tmp/prof-$NAME.load 2>&1 &
LP=$!
sleep 1
perf record -e cpu-clock -F 2999 -p "$PID" -o /tmp/prof-$NAME.data -- sleep 3 >/dev/null 2>&1
wait $LP
kill $SP; wait $SP 2>/dev/null
grep "us/request" /tmp/prof-$NAME.load | head -1
