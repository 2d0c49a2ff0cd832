#!/bin/sh
# Full QUIC handshakes (a connection per request), loopback, each server one process
# pinned to CPU 1, the client on CPU 0, 5 rounds interleaved; the server's own CPU.
# CERT and KEY: an RSA 2048 pair (the files without a prefix) or an ECDSA P-256 one
# (ec-*). Caddy: Debian's 2.6.2 with the Caddyfile here.
taskset -c 1 caddy run --config Caddyfile --adapter caddyfile &
taskset -c 1 linerate serve ROOT --tls-listen 127.0.0.1:27443 --tls-cert CERT \
  --tls-key KEY --http3 on --workers 1 --access-log off &
sleep 2
for r in 1 2 3 4 5; do
  linerate bench http --h3 --close --insecure -c 8 -d 3 --cpu 0 --server-pid "$LINERATE_PID" \
    --json https://localhost:27443/1K.bin > linerate-$r.json
  linerate bench http --h3 --close --insecure -c 8 -d 3 --cpu 0 --server-pid "$CADDY_PID" \
    --json https://localhost:26443/1K.bin > caddy-$r.json
done
