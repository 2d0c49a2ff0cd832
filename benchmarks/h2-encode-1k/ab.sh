#!/bin/sh
# usage: ab1k.sh ROUNDS "label|bin|bench-args"...
# Loopback, one worker on CPU 1 over TLS, the load on CPU 0 (32 connections, 3 s);
# each round runs every variant once, a fresh server each run. The runs of
# BENCHMARKS.md: DIR=... ab.sh 5 "base|OLD|--h2 -m 10" "enc|NEW|--h2 -m 10" "h1|NEW|--pipeline 10"
R=$1; shift
cd "${DIR:?the directory with 1k.bin, cert.pem and key.pem}"
for i in $(seq 1 $R); do
for v in "$@"; do
  label=$(echo "$v"|cut -d'|' -f1); bin=$(echo "$v"|cut -d'|' -f2); bargs=$(echo "$v"|cut -d'|' -f3)
  sleep 0.3
  taskset -c 1 $bin serve "$DIR" --workers 1 --access-log off --tls-listen 127.0.0.1:8443 --tls-cert cert.pem --tls-key key.pem >/dev/null 2>&1 &
  PID=$!; sleep 0.4
  out=$(${CLIENT:-linerate} bench http https://127.0.0.1:8443/1k.bin --insecure -c 32 -d 3 --cpu 0 --server-pid $PID $bargs | grep "server \|requests ")
  echo "$label $(echo $out | sed 's/.*CPU), //; s| us/request.*||') $(echo $out | sed 's/.*s: //; s/ requests.s.*//')"
  kill $PID; wait $PID 2>/dev/null
done; done
