#!/bin/sh
# Issue 48's flood bar: 100,000 IPv6 clients of one /48 (X-Forwarded-For from a trusted
# loopback proxy) flood a path under `limit-requests = { rate = "10/s", burst = 20 }`
# for 35 s, while one client of another prefix asks at 8 requests/s (within its own
# limit; open loop) for 30 s: every answer it gets must be 200, and its latency
# percentiles are the bar's; what the flood got, and the server's memory before and
# after.
#   benchmarks/issue48-flood/run.sh [LINERATE] [OUT_DIR]
set -eu
L=${1:-target/release/linerate}
OUT=${2:-benchmarks/issue48-flood}
HERE=$(dirname "$0")
D=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$D"' EXIT
mkdir -p "$D/www" "$OUT"
printf 'hello\n' > "$D/www/a.txt"
PORT=18480
cat > "$D/flood.toml" <<CONF
root = "$D/www"
listen = "127.0.0.1:$PORT"
access-log = "off"
workers = 2
status-path = "/.s"
trusted-proxies = ["127.0.0.1/32"]
limit-requests-memory = "16M"
[[rule]]
path = "/"
limit-requests = { rate = "10/s", burst = 20 }
CONF
"$L" serve --config "$D/flood.toml" > "$D/serve.log" 2>&1 &
PID=$!
sleep 1
rss() { awk '/VmRSS/ {print $2}' /proc/$PID/status; }
echo "rss_kib_before $(rss)" | tee "$OUT/memory.txt"
python3 "$HERE/flood.py" $PORT 100000 35 4 > "$OUT/flood.json" &
FLOOD=$!
sleep 3
"$L" bench http "http://127.0.0.1:$PORT/a.txt" -H "X-Forwarded-For: 198.51.100.7" \
    -R 8 -d 30 -c 1 --json > "$OUT/other-client.json"
wait $FLOOD
echo "rss_kib_after $(rss)" | tee -a "$OUT/memory.txt"
curl -s "http://127.0.0.1:$PORT/.s" > "$OUT/status.json"
cat "$OUT/flood.json"
python3 - "$OUT/other-client.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r = r[0] if isinstance(r, list) else r
print("other client:", r.get("statuses"), "latency_us:", r.get("latency_us") or r.get("latency"))
PY
