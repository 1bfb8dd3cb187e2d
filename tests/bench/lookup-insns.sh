#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per FUSE LOOKUP in the daemon, two builds compared: the daemon
# runs under callgrind (-o threads=1,timeout=0, so that no entry or attribute
# is cached) while stat-loop stats /a/b/f N and then 2N times: three LOOKUPs
# and a GETATTR per stat.  Prints, per build and round, the daemon's
# instructions per stat, (Ir(2N) - Ir(N)) / N, and mfsd_lookup's inclusive
# instructions per LOOKUP; repeatable to a few instructions (mount, unmount
# and set-up cancel out).  System calls and the kernel's side are not counted.
#
# Usage: tests/bench/lookup-insns.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]
# (NEW_BUILD's tests/bench/stat-loop is used for both.)  Needs root,
# /dev/fuse and valgrind.  Not part of the test suite.
set -euo pipefail

OLD=${1:?usage: lookup-insns.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]}
NEW=${2:?usage}
N=${3:-5000}
ROUNDS=${4:-3}
LOOP=$NEW/tests/bench/stat-loop
W=$(mktemp -d /dev/shm/mendfs-lki.XXXXXX)
MNT=$W/m
mkdir "$MNT"
DPID=
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

# run BUILD COUNT OUT: prints the daemon's total Ir, then mfsd_lookup's inclusive Ir
run() {
	local b=$1 n=$2 out=$3 i
	"$b/mkfs/mkfs.mendfs" -q -f "$W/img" 64M
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$b/fs/mendfs" -f -o threads=1,timeout=0 "$W/img" "$MNT" 2>>"$W/log" &
	DPID=$!
	for ((i = 0; i < 600; i++)); do mountpoint -q "$MNT" && break; sleep 0.1; done
	mountpoint -q "$MNT" || { cat "$W/log" >&2; exit 1; }
	mkdir -p "$MNT/a/b"
	echo x >"$MNT/a/b/f"
	"$LOOP" "$MNT/a/b/f" "$n"
	umount "$MNT"
	wait "$DPID"
	DPID=
	awk '/^summary:/ {print $2}' "$out"
	callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
		awk '/mfsd_lookup/ {gsub(",", "", $1); print $1; exit}'
}

for ((r = 1; r <= ROUNDS; r++)); do
	for v in OLD NEW; do
		b=${!v}
		mapfile -t a < <(run "$b" "$N" "$W/cg.a")
		mapfile -t c < <(run "$b" $((2 * N)) "$W/cg.b")
		echo "round $r $v: $(((c[0] - a[0]) / N)) instructions per stat," \
			"mfsd_lookup $(((c[1] - a[1]) / (3 * N))) per LOOKUP"
	done
done
