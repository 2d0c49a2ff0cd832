#!/usr/bin/env bash
# 10 MiB over --netns (server core's busy time, both ends steered): HTTP/1.1 against
# HTTP/2 in clear with 16 KiB DATA frames (what browsers and h2load take) and with the
# largest frames (a client that advertises SETTINGS_MAX_FRAME_SIZE 16777215).
# Five rounds, the variants interleaved in each; then linerate stat per metric.
set -euo pipefail
bin=${LINERATE:-target/release/linerate}
out=${1:-benchmarks/h2-issue30/10m-netns}
mkdir -p "$out"
rm -f "$out"/*.core_us_per_kb "$out"/*.proc_us_per_kb
for round in 1 2 3 4 5; do
  for v in h1 h2-16k h2-16m; do
    case $v in
      h1) flags=() ;;
      h2-16k) flags=(--h2) ;;
      h2-16m) flags=(--h2 --h2-frame-size 16777215) ;;
    esac
    "$bin" bench http --netns --sizes 10M -c 4 -d 5 "${flags[@]}" --json > "$out/$v.$round.json"
    python3 - "$out/$v.$round.json" "$out/$v" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
open(sys.argv[2] + ".core_us_per_kb", "a").write(f"{r['server']['core']['us_per_kb']}\n")
open(sys.argv[2] + ".proc_us_per_kb", "a").write(f"{r['server']['us_per_kb']}\n")
PY
  done
done
for m in core_us_per_kb proc_us_per_kb; do
  echo "== $m"
  "$bin" stat "$out/h1.$m" "$out/h2-16k.$m" "$out/h2-16m.$m"
done
