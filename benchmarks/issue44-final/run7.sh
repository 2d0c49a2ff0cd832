#!/bin/sh
# Issue 44's no-regression bar with 7 rounds (run.sh with ROUNDS=7): this build (NEW)
# against 24d64fc (BASE, a release build).
ROUNDS=7 OUT=${OUT:-benchmarks/issue44-final4} exec sh "$(dirname "$0")/run.sh"
