#!/usr/bin/env bash
# 10 MiB over --netns as HTTP/2 in clear with 16 KiB DATA frames: two builds A and B
# (each `bench http --netns` starts its own build's server), five rounds interleaved,
# then linerate stat on the server core's busy time per KB and the process's.
set -euo pipefail
a=${1:?build A}; b=${2:?build B}
out=${3:-benchmarks/h2-issue30/framed-ab}
mkdir -p "$out"
rm -f "$out"/*.core_us_per_kb "$out"/*.proc_us_per_kb
for round in 1 2 3 4 5; do
  for v in a b; do
    bin=$a; [ $v = b ] && bin=$b
    "$bin" bench http --netns --sizes 10M -c 4 -d 5 --h2 --json > "$out/$v.$round.json"
    python3 - "$out/$v.$round.json" "$out/$v" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["errors"] == {k: 0 for k in r["errors"]}, r["errors"]
open(sys.argv[2] + ".core_us_per_kb", "a").write(f"{r['server']['core']['us_per_kb']}\n")
open(sys.argv[2] + ".proc_us_per_kb", "a").write(f"{r['server']['us_per_kb']}\n")
PY
  done
done
for m in core_us_per_kb proc_us_per_kb; do
  echo "== $m"
  "$b" stat "$out/a.$m" "$out/b.$m"
done
