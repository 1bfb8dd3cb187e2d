#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per FUSE LOOKUP in the daemon, two builds compared: the daemon
# runs under callgrind (-o threads=1,timeout=0, so that no entry or attribute
# is cached) while stat-loop stats /a/b/f N and then 2N times: three LOOKUPs
# and a GETATTR per stat.  Prints, per build and round, the daemon's
# instructions per stat, (Ir(2N) - Ir(N)) / N, and mfsd_lookup's inclusive
# instructions per LOOKUP; repeatable to a few instructions.  System calls
# and the kernel's side are not counted.
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
. "$(dirname "$0")/insns-lib.sh"

# run BUILD COUNT: prints the daemon's total Ir, then mfsd_lookup's inclusive Ir
run() {
	insns_mkfs "$1" 64M
	insns_callgrind "$1" timeout=0
	mkdir -p "$MNT/a/b"
	echo x >"$MNT/a/b/f"
	"$LOOP" "$MNT/a/b/f" "$2"
	insns_umount
	insns_total
	insns_fn mfsd_lookup
}

for ((r = 1; r <= ROUNDS; r++)); do
	for v in OLD NEW; do
		b=${!v}
		mapfile -t a < <(run "$b" "$N")
		mapfile -t c < <(run "$b" $((2 * N)))
		echo "round $r $v: $(((c[0] - a[0]) / N)) instructions per stat," \
			"mfsd_lookup $(((c[1] - a[1]) / (3 * N))) per LOOKUP"
	done
done
