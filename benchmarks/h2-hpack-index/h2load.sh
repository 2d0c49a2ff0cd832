#!/bin/sh
# /tmp/p holds 1k.bin, cert.pem and key.pem (as for ../h2-1k-tls-cuts/run.sh); h2load on CPU 0,
# one worker on CPU 1, the server's CPU from /proc/PID/stat over the run.
# usage: h2l.sh ROUNDS label|bin ...  -> label server-us/request requests/s
R=$1; shift
cd /tmp/p
for i in $(seq 1 $R); do
for v in "$@"; do
  label=${v%%|*}; bin=${v#*|}
  taskset -c 1 $bin serve /tmp/p --workers 1 --access-log off --tls-listen 127.0.0.1:8443 --tls-cert cert.pem --tls-key key.pem >/dev/null 2>&1 &
  PID=$!; sleep 0.4
  t0=$(awk '{print $14+$15}' /proc/$PID/stat)
  out=$(taskset -c 0 h2load -c 32 -m 10 -D 3 https://127.0.0.1:8443/1k.bin 2>&1)
  t1=$(awk '{print $14+$15}' /proc/$PID/stat)
  proto=$(echo "$out" | grep -o "Application protocol: [a-z0-9/.]*")
  done_=$(echo "$out" | grep -o "[0-9]* succeeded" | head -1 | cut -d' ' -f1)
  rps=$(echo "$out" | grep -o "finished in [0-9.]*s, [0-9.]* req/s" | sed 's/.*, //; s/ req.s//')
  echo "$label $(echo "($t1-$t0)*10000/$done_" | bc -l | cut -c1-5) $rps $proto"
  kill $PID; wait $PID 2>/dev/null
done; done
