#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per FUSE read in the daemon, poison_checks=true vs false: the
# daemon runs under callgrind (threads=1) while fio does N and then 2N 4 KiB
# random O_DIRECT reads of a 64 MiB file; (Ir(2N) - Ir(N)) / N is the daemon's
# user-space instructions per read, repeatable to a few instructions (mount,
# unmount and fio's set-up cancel out).  System calls and the kernel's FUSE
# side are not counted.  Also: the checked daemon with one poisoned sector
# elsewhere on the device (non-empty table).
#
# Usage: tests/bench/recovery-fast-path-insns.sh CHECKED_BUILD UNCHECKED_BUILD [N]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

ON=${1:?usage: recovery-fast-path-insns.sh CHECKED_BUILD UNCHECKED_BUILD [N]}
OFF=${2:?usage}
N=${3:-5000}
W=$(mktemp -d /dev/shm/mendfs-fpi.XXXXXX)
MNT=$W/m
mkdir "$MNT"
DPID=
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

"$ON/mkfs/mkfs.mendfs" -q "$W/img" 256M
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
mount_with "$ON"
dd if=/dev/urandom of="$MNT/f" bs=1M count=64 conv=fsync status=none
umount_it
NSEC=$((256 * 1024 * 1024 / 512))

ir() { # BUILD POISON IOS -> Ir of the daemon
	if [ "$2" = 1 ]; then echo "$((NSEC - 8)) 1" >"$W/img.badblocks"; else rm -f "$W/img.badblocks"; fi
	rm -f "$W/cg.out"
	mount_with "$1" valgrind --tool=callgrind --callgrind-out-file="$W/cg.out" -q
	fio --name=rr --filename="$MNT/f" --rw=randread --bs=4k --direct=1 --ioengine=psync \
		--number_ios="$3" --randrepeat=1 --output=/dev/null
	umount_it
	callgrind_annotate "$W/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

for cfg in "true $ON 0" "false $OFF 0" "true+poisoned-table $ON 1"; do
	set -- $cfg
	a=$(ir "$2" "$3" "$N")
	b=$(ir "$2" "$3" $((2 * N)))
	echo "poison_checks=$1: Ir($N)=$a Ir($((2 * N)))=$b per read $(((b - a) / N))"
done
