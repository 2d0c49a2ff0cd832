#!/usr/bin/env bash
# 1 KiB over TLS with HTTP/2: h2load (32 connections x 10 streams, 5 s) on CPU 0
# against linerate and h2o, each one worker pinned to CPU 1 with the same certificate
# (a self-signed ECDSA P-256 one made here) and file, five rounds interleaved. Counts
# only runs whose h2load line says "Application protocol: h2". Server CPU is its
# processes' user+system time from /proc over the run. Only runs whose answers were
# all 2xx are counted.
set -euo pipefail
bin=$(realpath "${LINERATE:-target/release/linerate}")
out=$(realpath -m "${1:-benchmarks/h2-issue30/1k-tls}")
mkdir -p "$out"
work=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT
# h2o started as root serves as nobody: the tree must be readable to all.
chmod 755 "$work"
mkdir "$work/root"
head -c 1024 /dev/urandom > "$work/root/1k.bin"
chmod 644 "$work/root/1k.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$work/key.pem" -out "$work/cert.pem" -subj /CN=localhost 2>/dev/null
cat > "$work/h2o.yaml" <<YAML
listen:
  port: 9444
  host: 127.0.0.1
  ssl:
    certificate-file: $work/cert.pem
    key-file: $work/key.pem
num-threads: 1
hosts:
  default:
    paths:
      /:
        file.dir: $work/root
access-log: /dev/null
YAML
rm -f "$out"/*.rps "$out"/*.us_per_req
ticks() { local s=0 t; for p in "$@"; do t=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0); s=$((s + t)); done; echo $s; }
hz=$(getconf CLK_TCK)
for round in 1 2 3 4 5; do
  for server in linerate h2o; do
    if [ $server = linerate ]; then
      taskset -c 1 "$bin" serve "$work/root" --workers 1 --access-log off \
        --listen 127.0.0.1:0 --tls-listen 127.0.0.1:9443 \
        --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" > "$work/log" 2>&1 &
      port=9443
      main=$!
    else
      taskset -c 1 h2o -c "$work/h2o.yaml" > "$work/log" 2>&1 &
      port=9444
      main=$!
    fi
    sleep 1.5
    pids="$main $( (pgrep -P "$main" || true) | tr "\n" " ")"
    t0=$(ticks $pids)
    r=$(taskset -c 0 h2load -c 32 -m 10 -D 5 "https://127.0.0.1:$port/1k.bin" 2>&1)
    t1=$(ticks $pids)
    kill "$main"; wait "$main" 2>/dev/null || true
    sleep 0.5
    echo "$r" | grep -q "Application protocol: h2" || { echo "$server: not h2" >&2; continue; }
    # Requests that succeeded (2xx); a run with any other answer is not counted.
    n=$(echo "$r" | awk '/^requests:/ {print $8}')
    echo "$r" | grep -q "^status codes: $n 2xx" || { echo "$server: not all 2xx" >&2; continue; }
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "$server: no requests: $r" >&2; continue; }
    rps=$(echo "$r" | grep -o '[0-9.]* req/s' | awk '{print $1}')
    echo "$rps" >> "$out/$server.rps"
    echo "scale=4; ($t1 - $t0) * 1000000 / $hz / $n" | bc >> "$out/$server.us_per_req"
    echo "round $round $server: $rps req/s, $(tail -1 "$out/$server.us_per_req") us/request"
  done
done
for m in rps us_per_req; do
  echo "== $m"
  "$bin" stat "$out/h2o.$m" "$out/linerate.$m"
done
