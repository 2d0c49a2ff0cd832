#!/bin/sh

exec /work/main/target/profiling/linerate "$@"
