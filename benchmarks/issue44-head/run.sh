#!/bin/sh
# Issue 44's bar for the structured head (fields.rs, hpack::encode_head): no regression
# against 24d64fc within 3%. BASE is a release build of 24d64fc, NEW of this change.
#   HTTP/1.1 1 KiB on loopback, HTTP/2 1 KiB over TLS over --netns (server core's busy time).
set -e
BASE=${BASE:-/tmp/base/target/release/linerate}
NEW=${NEW:-target/release/linerate}
OUT=${OUT:-benchmarks/issue44-head}
"$NEW" bench compare --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --sizes 1K -c 32 -d 3 -i 7 --out "$OUT/h1-loopback" | tee "$OUT/h1-loopback.txt"
"$NEW" bench compare --h2 --tls --netns -m 10 --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --sizes 1K -c 32 -d 3 -i 7 --out "$OUT/h2-tls-netns" | tee "$OUT/h2-tls-netns.txt"
