#!/bin/sh
export LINERATE_EXP_ACK=31,1000 LINERATE_EXP_MTU=1472
exec /work/main/target/profiling/linerate "$@"
