#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per create in the daemon, two builds compared: the daemon runs
# under callgrind (-o threads=1) while N and then 2N empty files are created
# in one directory (xargs touch: a LOOKUP, a CREATE, a SETATTR or two and a
# RELEASE each).  Prints, per build and round, the daemon's instructions per
# created file, (Ir(2N) - Ir(N)) / N, and mfsd_create's inclusive
# instructions per CREATE.  System calls and the kernel's side are not
# counted; the whole daemon's figure moves with the periodic commits a slow
# (loaded) run lets in, the handler's repeats to a few per cent.
#
# Usage: tests/bench/create-insns.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]
# Needs root, /dev/fuse and valgrind.  Not part of the test suite.
set -euo pipefail

OLD=${1:?usage: create-insns.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]}
NEW=${2:?usage}
N=${3:-2000}
ROUNDS=${4:-3}
. "$(dirname "$0")/insns-lib.sh"

# run BUILD COUNT: COUNT files created; the daemon's total Ir, mfsd_create's
run() {
	insns_mkfs "$1" 64M
	insns_callgrind "$1" ""
	mkdir "$MNT/d"
	(cd "$MNT/d" && seq -f 'f%.0f' 1 "$2" | xargs touch)
	insns_umount
	insns_total
	insns_fn mfsd_create
}

for ((r = 1; r <= ROUNDS; r++)); do
	for v in OLD NEW; do
		b=${!v}
		mapfile -t a < <(run "$b" "$N")
		mapfile -t c < <(run "$b" $((2 * N)))
		echo "round $r $v: $(((c[0] - a[0]) / N)) instructions per create," \
			"mfsd_create $(((c[1] - a[1]) / N)) per CREATE"
	done
done
