#!/usr/bin/env bash
# HTTP/2 against HTTP/1.1 over --netns (server core's busy time, both ends steered),
# five rounds, the variants interleaved in each; then linerate stat per comparison.
#   10 MiB in clear: HTTP/1.1, HTTP/2 with 16 KiB DATA frames, with 16 MiB frames.
#   1 MiB over TLS: HTTP/1.1, HTTP/2 with 16 KiB frames.
set -euo pipefail
bin=${LINERATE:-target/release/linerate}
out=${1:-benchmarks/h2-fill}
rm -f "$out"/*.core_us_per_kb
one() { # name, then bench http flags
  local name=$1; shift
  "$bin" bench http --netns -c 8 -d 3 "$@" --json > "$out/$name.json"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["server"]["core"]["us_per_kb"])' \
    "$out/$name.json" >> "$out/$name.core_us_per_kb"
}
for round in 1 2 3 4 5; do
  one 10m-h1 --sizes 10M
  one 10m-h2-16k --sizes 10M --h2
  one 10m-h2-16m --sizes 10M --h2 --h2-frame-size 16777215
  one 1m-tls-h1 --sizes 1M --tls
  one 1m-tls-h2 --sizes 1M --tls --h2
done
rm -f "$out"/*.json
"$bin" stat "$out/10m-h1.core_us_per_kb" "$out/10m-h2-16k.core_us_per_kb" "$out/10m-h2-16m.core_us_per_kb"
"$bin" stat "$out/1m-tls-h1.core_us_per_kb" "$out/1m-tls-h2.core_us_per_kb"
