#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Where the daemon's CPU time goes with and without data checksums
# (mkfs.mendfs -O data_csum, docs/FORMAT.md §15): `perf record -g` with
# cpu-clock sampling on the daemon (default options: pmem over a 2 GiB image
# on /dev/shm) while fio writes, buffered and with psync as csum-fio.sh does:
# 512 MiB in 1 MiB sequential writes, then 4 KiB random writes for 5 s, each
# ending with fsync.  Then prints, per workload, the shares of the samples
# in the checksum code (XXH3, csum.c), in the kernel and in user-space
# memcpy, and the top symbols.  Shares, not throughput: on a shared machine
# only they mean something (see docs/benchmarks/data-path.md).
#
# Usage: tests/bench/csum-perf.sh BUILD off|data_csum OUTPREFIX
# (OUTPREFIX.seqw.data, OUTPREFIX.randw.data: the perf files, kept).
# Needs root, /dev/fuse, fio and perf.  Not part of the test suite.
set -euo pipefail

B=${1:?usage: csum-perf.sh BUILD off|data_csum OUTPREFIX}
FEAT=${2:?usage: csum-perf.sh BUILD off|data_csum OUTPREFIX}
O=${3:?usage: csum-perf.sh BUILD off|data_csum OUTPREFIX}
command -v perf >/dev/null || { echo "${0##*/}: needs perf" >&2; exit 1; }
. "$(dirname "$0")/insns-lib.sh"

opts=()
[ "$FEAT" = data_csum ] && opts=(-O data_csum)
"$(insns_bin "$B" mkfs.mendfs)" -q -f "${opts[@]}" "$W/img" 2G >/dev/null
"$(insns_bin "$B" mendfs)" -f "$W/img" "$MNT" 2>>"$W/log" &
DPID=$!
for ((i = 0; i < 600; i++)); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$W/log" >&2; exit 1; }

rec() { # NAME FIO-ARGS...: perf record of the daemon while fio runs
	local name=$1
	shift
	perf record -q -e cpu-clock -F 2000 -g -p "$DPID" -o "$O.$name.data" -- \
		fio --name="$name" --filename="$MNT/f" --ioengine=psync --end_fsync=1 \
		--output=/dev/null "$@" >/dev/null 2>&1
}
rec seqw --rw=write --bs=1M --size=512M
rec randw --rw=randwrite --bs=4k --size=512M --time_based --runtime=5
insns_umount

for k in seqw randw; do
	echo "== $FEAT $k"
	perf report -i "$O.$k.data" --no-children --sort sym --stdio 2>/dev/null |
		grep -E '^ +[0-9.]+%' | awk '
			{ s = $1; sub("%", "", s) }
			/XXH3|hash_sectors|mfs_csum|check_run/ { c += s }
			/\[k\]/ { k += s }
			/__memmove|__memcpy/ { m += s }
			NR <= 8 { top = top "\n  " $0 }
			END { printf "checksum code %.1f%%, kernel %.1f%%, user memcpy %.1f%%%s\n",
			      c, k, m, top }'
done
