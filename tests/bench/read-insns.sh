#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Instructions the daemon spends per 4 KiB read (callgrind, deterministic):
# each daemon mounts a fresh image (-o threads=1,commit=0 plus OPTS), a 64 MiB
# file is written, then read with O_DIRECT (every 4 KiB block a READ request)
# N times in one run and 2N times in another; (Ir(2N) - Ir(N)) / N is the
# cost of one read; the same for the read handler alone (mfsd_read, or the
# fast path's mfsd_fast_request that answers READs without libfuse since
# fs/fuse/fastpath.c: inclusive, the two summed), which is steadier than the
# whole process (the loop varies by a few dozen instructions per request from
# run to run).  Not part
# of the test suite; needs root, /dev/fuse and valgrind.
#
#   tests/bench/read-insns.sh [--n N] [--opts OPTS] BUILD [BUILD...]
#
# Used for the cost of access times (docs/benchmarks/data-path.md): with relatime the
# first read moves the atime, every later one is the common case.
set -euo pipefail

N=4000
OPTS=
while [ $# -gt 0 ]; do
	case $1 in
	--n) N=$2; shift 2 ;;
	--opts) OPTS=,$2; shift 2 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--n N] [--opts OPTS] BUILD..." >&2; exit 2; }
. "$(dirname "$0")/insns-lib.sh"

# ir BUILD COUNT: the daemon's total instructions for COUNT reads, and the handler's
ir() {
	insns_mkfs "$1" 256M
	insns_callgrind "$1" "commit=0$OPTS"
	dd if=/dev/zero of="$MNT/f" bs=1M count=64 status=none
	dd if="$MNT/f" of=/dev/null bs=4k count="$2" iflag=direct status=none
	insns_umount
	echo "$(insns_total) $(($(insns_fn mfsd_read) + $(insns_fn mfsd_fast_request)))"
}

for d in "$@"; do
	read -r a ha < <(ir "$d" "$N")
	read -r b hb < <(ir "$d" $((2 * N)))
	echo "$d${OPTS:+ (${OPTS#,})}: $(((b - a) / N)) instructions per 4 KiB read," \
		"$(((hb - ha) / N)) in the handler (Ir $a for $N reads, $b for $((2 * N)))"
done
