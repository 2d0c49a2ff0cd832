#!/bin/sh
# The same linerate binary with its file bodies' splices on the io_uring ring
# (LINERATE_RING_SPLICE=1), for `bench compare --bin ring=THIS`; LINERATE names the
# binary (default: linerate on PATH).
LINERATE_RING_SPLICE=1 exec "${LINERATE:-linerate}" "$@"
