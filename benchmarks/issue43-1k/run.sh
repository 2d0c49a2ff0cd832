#!/bin/sh
# Issue 43's bar: no regression at 1 KiB against 24d64fc within 3%, with and without
# etag = "content". BASE is a release build of 24d64fc, NEW this commit's.
#   HTTP/1.1 on loopback, then HTTP/2 over TLS over --netns (the server core's busy time).
set -e
BASE=${BASE:-/tmp/base/target/release/linerate}
NEW=${NEW:-target/release/linerate}
OUT=${OUT:-benchmarks/issue43-1k}
"$NEW" bench compare --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --variant new= --variant content="--etag content" --bin content="$NEW" \
  --sizes 1K -c 32 -d 3 -i 7 --out "$OUT/h1-loopback" | tee "$OUT/h1-loopback.txt"
"$NEW" bench compare --h2 --tls --netns -m 10 --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --variant new= --variant content="--etag content" --bin content="$NEW" \
  --sizes 1K -c 32 -d 3 -i 7 --out "$OUT/h2-tls-netns" | tee "$OUT/h2-tls-netns.txt"
