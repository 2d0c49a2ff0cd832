#!/bin/sh
export LINERATE_EXP_ACK=31,1000
exec /work/main/target/profiling/linerate "$@"
