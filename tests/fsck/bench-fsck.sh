#!/bin/bash
# SPDX-License-Identifier: MIT
# The fsck.mendfs speed figure (docs/BENCHMARKS.md): seconds per GiB of
# metadata on an image with 1 M files, made through the fs library (no FUSE).
#   tests/fsck/bench-fsck.sh BUILD [FILES=1000000] [DIR=/dev/shm]
set -eu
B=${1:?usage: bench-fsck.sh BUILD [FILES] [DIR]}
N=${2:-1000000}
D=${3:-/dev/shm}
IMG=$D/mendfs-fsck-bench.img
trap 'rm -f "$IMG" "$IMG.badblocks"' EXIT
rm -f "$IMG" "$IMG.badblocks"
"$B/mkfs/mkfs.mendfs" -q -N $((N + N / 10)) "$IMG" 8G
/usr/bin/time -f "create $N files: %e s" "$B/tests/fsck/fsck-img" many "$IMG" "$N"
meta=$("$B/fsck/fsck.mendfs" -n --json "$IMG" | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta_blocks_used"])')
for mode in -n -y; do
	for i in 1 2 3; do
		/usr/bin/time -f "%e" -o "$IMG.t" "$B/fsck/fsck.mendfs" $mode "$IMG" >/dev/null
		t=$(cat "$IMG.t")
		python3 -c "import sys; m=$meta*4096/2**30; print('fsck %s: %.2f s, %.3f GiB of metadata (one copy; both are read): %.2f s/GiB' % ('$mode', $t, m, $t/m))"
	done
done
rm -f "$IMG.t"
uptime
