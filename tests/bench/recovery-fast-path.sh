#!/bin/bash
# SPDX-License-Identifier: MIT
#
# "The fast path pays nothing" at the FUSE level: 4 KiB random O_DIRECT reads
# (fio, psync, one job) of a file on mendfs, the daemon built with
# -Dpoison_checks=true and with -Dpoison_checks=false, alternating, in one run.
# O_DIRECT sends every read to the daemon (no page cache), so the figure is
# the daemon's read path: FUSE request, extent lookup, engine bio (with or
# without the poison check), copy, reply.  A third configuration runs the
# checked daemon with one poisoned sector elsewhere on the device (the table
# is not empty: every read does a range lookup).
#
# Usage: tests/bench/recovery-fast-path.sh CHECKED_BUILD UNCHECKED_BUILD [ROUNDS] [SECONDS]
#   builds: meson trees (release) set up with -Dpoison_checks=true / false;
#   ROUNDS alternating rounds (default 5), SECONDS per fio run (default 5).
# The daemon is pinned to CPU 0 (threads=1), fio to CPU 1.  Prints each run and
# the medians.  Needs root, /dev/fuse and fio.  Not part of the test suite.
set -euo pipefail

ON=${1:?usage: recovery-fast-path.sh CHECKED_BUILD UNCHECKED_BUILD [ROUNDS] [SECONDS]}
OFF=${2:?usage}
ROUNDS=${3:-5}
SECS=${4:-5}
for b in "$ON" "$OFF"; do
	[ -x "$b/fs/fuse/mendfs" ] && [ -x "$b/mkfs/mkfs.mendfs" ] || { echo "$b: no fs/fuse/mendfs" >&2; exit 1; }
done
grep -q "poison_checks.*true" <(meson introspect "$ON" --buildoptions | tr '{' '\n' | grep '"name": "poison_checks"') ||
	{ echo "$ON is not poison_checks=true" >&2; exit 1; }
grep -q "poison_checks.*false" <(meson introspect "$OFF" --buildoptions | tr '{' '\n' | grep '"name": "poison_checks"') ||
	{ echo "$OFF is not poison_checks=false" >&2; exit 1; }

W=$(mktemp -d /dev/shm/mendfs-fp.XXXXXX)
MNT=$W/m
mkdir "$MNT"
DPID=
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

"$ON/mkfs/mkfs.mendfs" -q "$W/img" 1G
mount_with() {
	taskset -c 0 "$1/fs/fuse/mendfs" -f -o threads=1 "$W/img" "$MNT" 2>>"$W/log" &
	DPID=$!
	for ((i = 0; i < 100; i++)); do mountpoint -q "$MNT" && return; sleep 0.1; done
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
dd if=/dev/urandom of="$MNT/f" bs=1M count=256 conv=fsync status=none
umount_it
NSEC=$((1024 * 1024 * 1024 / 512))

run() { # run BUILD POISON -> IOPS
	if [ "$2" = 1 ]; then echo "$((NSEC - 8)) 1" >"$W/img.badblocks"; else rm -f "$W/img.badblocks"; fi
	mount_with "$1"
	taskset -c 1 fio --name=rr --filename="$MNT/f" --rw=randread --bs=4k --direct=1 \
		--ioengine=psync --numjobs=1 --time_based --runtime="$SECS" --ramp_time=1 \
		--output-format=json 2>/dev/null |
		python3 -c 'import json,sys; print(int(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'
	umount_it
}

declare -a A B C
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	a=$(run "$ON" 0) b=$(run "$OFF" 0) c=$(run "$ON" 1)
	A+=("$a") B+=("$b") C+=("$c")
	echo "round $r: checks=true $a  checks=false $b  checks=true+1 poisoned range $c IOPS"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ma=$(median "${A[@]}") mb=$(median "${B[@]}") mc=$(median "${C[@]}")
echo "median: checks=true $ma, checks=false $mb, checks=true with poison elsewhere $mc IOPS"
awk -v a="$ma" -v b="$mb" -v c="$mc" 'BEGIN { printf "ratio true/false %.3f, poisoned-table/false %.3f\n", a / b, c / b }'
