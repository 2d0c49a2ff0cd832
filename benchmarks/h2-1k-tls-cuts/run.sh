#!/bin/sh
# usage: ab1k.sh ROUNDS "label|bin|bench-args"...
R=$1; shift
cd /tmp/p
for i in $(seq 1 $R); do
for v in "$@"; do
  label=$(echo "$v"|cut -d'|' -f1); bin=$(echo "$v"|cut -d'|' -f2); bargs=$(echo "$v"|cut -d'|' -f3)
  pkill -f h2site; sleep 0.3
  taskset -c 1 $bin serve /tmp/p --workers 1 --access-log off --tls-listen 127.0.0.1:8443 --tls-cert cert.pem --tls-key key.pem >/dev/null 2>&1 &
  PID=$!; sleep 0.4
  out=$(/tmp/linerate-cur bench http https://127.0.0.1:8443/1k.bin --insecure -c 32 -d 3 --cpu 0 --server-pid $PID $bargs | grep "server \|requests ")
  echo "$label $(echo $out | sed 's/.*CPU), //; s| us/request.*||') $(echo $out | sed 's/.*s: //; s/ requests.s.*//')"
  kill $PID; wait $PID 2>/dev/null
done; done
