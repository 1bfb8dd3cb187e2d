#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per FUSE 4 KiB write in the daemon, build A against build B
# (e.g. before and after a change to the write path): the daemon runs under
# callgrind (threads=1) while fio does N and then 2N 4 KiB random O_DIRECT
# overwrites of a 64 MiB file; (Ir(2N) - Ir(N)) / N is the daemon's
# user-space instructions per write (mount, unmount and fio's set-up cancel
# out).  Rounds alternate A and B; each line is one round.
#
# Usage: tests/bench/write-insns.sh BUILD_A BUILD_B [N] [ROUNDS]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

A=${1:?usage: write-insns.sh BUILD_A BUILD_B [N] [ROUNDS]}
B=${2:?usage}
N=${3:-3000}
ROUNDS=${4:-3}
W=$(mktemp -d /dev/shm/mendfs-wi.XXXXXX)
MNT=$W/m
mkdir "$MNT"
DPID=
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

"$A/mkfs/mkfs.mendfs" -q "$W/img" 256M
mount_with() { # BUILD [valgrind args...]
	local b=$1
	shift
	"$@" "$b/fs/mendfs" -f -o threads=1 "$W/img" "$MNT" 2>>"$W/log" &
	DPID=$!
	for ((i = 0; i < 600; i++)); do mountpoint -q "$MNT" && return; sleep 0.1; done
	echo "mount failed" >&2
	cat "$W/log" >&2
	exit 1
}
umount_it() {
	umount "$MNT"
	wait "$DPID"
	DPID=
}
mount_with "$A"
dd if=/dev/urandom of="$MNT/f" bs=1M count=64 conv=fsync status=none
umount_it

ir() { # BUILD IOS -> Ir of the daemon
	rm -f "$W/cg.out"
	mount_with "$1" valgrind --tool=callgrind --callgrind-out-file="$W/cg.out" -q
	fio --name=rw --filename="$MNT/f" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
		--number_ios="$2" --randrepeat=1 --output=/dev/null
	umount_it
	callgrind_annotate "$W/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

for ((r = 1; r <= ROUNDS; r++)); do
	for build in "$A" "$B"; do
		a=$(ir "$build" "$N")
		b=$(ir "$build" $((2 * N)))
		echo "round $r $build: per write $(((b - a) / N))"
	done
done
