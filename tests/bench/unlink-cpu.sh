#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What unlinks cost the mendfs daemon in CPU time, two builds compared: a
# fresh image on /dev/shm, N empty files created and looked up, then all N
# unlinked; the daemon's user and system CPU time (/proc/PID/stat utime,
# stime) from before the unlinks to 2 s after the last (so that the FORGETs,
# where the old daemon freed the inodes, are inside), per unlink, in
# microseconds.  CPU time moves far less with the machine's load than a rate
# does, though not nothing.  Builds interleaved round by round.
#
# Usage: tests/bench/unlink-cpu.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]
# Needs root and /dev/fuse.  Not part of the test suite.
set -euo pipefail

OLD=${1:?usage: unlink-cpu.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]}
NEW=${2:?usage}
N=${3:-20000}
ROUNDS=${4:-3}
W=$(mktemp -d /dev/shm/mendfs-ucpu.XXXXXX)
MNT=$W/m
mkdir "$MNT"
DPID=
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

utime() { awk '{ print $14 }' "/proc/$DPID/stat"; }
stime() { awk '{ print $15 }' "/proc/$DPID/stat"; }

# run BUILD: microseconds of daemon user and system CPU per unlink
run() {
	local u0 s0 u1 s1 i hz
	"$1/mkfs/mkfs.mendfs" -q -f "$W/img" 1G >/dev/null
	"$1/fs/fuse/mendfs" -f "$W/img" "$MNT" 2>>"$W/log" &
	DPID=$!
	for ((i = 0; i < 200; i++)); do mountpoint -q "$MNT" && break; sleep 0.1; done
	mountpoint -q "$MNT" || { cat "$W/log" >&2; exit 1; }
	mkdir "$MNT/d"
	(cd "$MNT/d" && seq -f 'f%.0f' 1 "$N" | xargs touch && ls -l >/dev/null)
	sleep 2
	u0=$(utime) s0=$(stime)
	(cd "$MNT/d" && seq -f 'f%.0f' 1 "$N" | xargs rm)
	sleep 2
	u1=$(utime) s1=$(stime)
	umount "$MNT"
	wait "$DPID"
	DPID=
	hz=$(getconf CLK_TCK)
	echo "user $(((u1 - u0) * 1000000 / hz / N)) sys $(((s1 - s0) * 1000000 / hz / N))"
}

for ((r = 1; r <= ROUNDS; r++)); do
	echo "round $r: OLD $(run "$OLD"), NEW $(run "$NEW") us of daemon CPU per unlink" \
		"($N files, load $(cut -d' ' -f1 /proc/loadavg))"
done
