#!/usr/bin/env bash
# HTTP/1.1 over TLS, two builds (OLD: 64 KiB writes into the TLS session, NEW: 32
# KiB), over --netns (server core's busy time, both ends steered), five rounds, the
# builds interleaved in each; then linerate stat per size.
#   OLD=... NEW=... benchmarks/tls-write-32k/run.sh [OUT]
set -euo pipefail
out=${1:-benchmarks/tls-write-32k}
rm -f "$out"/*.core_us_per_kb
for round in 1 2 3 4 5; do
  for size in 1M 10M; do
    for b in old new; do
      bin=$OLD; [ $b = new ] && bin=$NEW
      "$bin" bench http --netns --tls -c 8 -d 3 --sizes $size --json > "$out/run.json"
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["server"]["core"]["us_per_kb"])' \
        "$out/run.json" >> "$out/$size-$b.core_us_per_kb"
    done
  done
done
rm -f "$out/run.json"
for size in 1M 10M; do
  "$NEW" stat "$out/$size-old.core_us_per_kb" "$out/$size-new.core_us_per_kb"
done
