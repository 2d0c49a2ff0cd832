#!/bin/sh
export LINERATE_EXP_ACK=9,1000
exec /work/main/target/profiling/linerate "$@"
