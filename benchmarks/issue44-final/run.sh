#!/bin/sh
# Issue 44's no-regression bar: this build (NEW) against 24d64fc (BASE, a release build),
# ROUNDS (6) interleaved paired rounds of 3 s, one worker pinned: HTTP/1.1 1 KiB and the
# SpecWeb99 mix on loopback, HTTP/2 1 KiB over TLS over --netns (32 connections x 10
# streams), 10 MiB over --netns --tso on.
set -e
BASE=${BASE:-/tmp/base/target/release/linerate}
NEW=${NEW:-target/release/linerate}
OUT=${OUT:-benchmarks/issue44-final}
ROUNDS=${ROUNDS:-6}
"$NEW" bench compare --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --sizes 1K --mix specweb99 -c 32 -i "$ROUNDS" -d 3 --out "$OUT/loopback" | tee "$OUT/loopback.txt"
"$NEW" bench compare --h2 --tls --netns -m 10 --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --sizes 1K -c 32 -i "$ROUNDS" -d 3 --out "$OUT/h2-tls-netns" | tee "$OUT/h2-tls-netns.txt"
"$NEW" bench compare --netns --tso on --servers linerate --bin base="$BASE" --bin new="$NEW" \
  --sizes 10M -i "$ROUNDS" -d 3 --out "$OUT/10m-netns" | tee "$OUT/10m-netns.txt"
