#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per unlink in the daemon, two builds compared: the daemon runs
# under callgrind (-o threads=1) while 2N empty files are created (xargs
# touch), then N and then 2N of them are unlinked (xargs rm: an UNLINK each,
# a LOOKUP too when callgrind is slow enough for the entry to expire, and the
# FORGET that follows, given 2 s to arrive before the unmount: a FORGET still
# queued then is dropped, and the old daemon freed the inode at the unmount).  Prints, per build and round, the daemon's instructions per
# unlink, (Ir(2N unlinks) - Ir(N unlinks)) / N, mfsd_unlink's inclusive
# instructions per UNLINK, and those of UNLINK and FORGET together
# (mfsd_unlink + mfsd_node_forget: before the pins, the inode was freed at the
# FORGET).  The handlers' figures repeat to a few per cent; the whole daemon's
# moves with the periodic commits a slow (loaded) run lets in.  System calls
# and the kernel's side are not counted.
#
# Usage: tests/bench/unlink-insns.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]
# Needs root, /dev/fuse and valgrind.  Not part of the test suite.
set -euo pipefail

OLD=${1:?usage: unlink-insns.sh OLD_BUILD NEW_BUILD [N [ROUNDS]]}
NEW=${2:?usage}
N=${3:-2000}
ROUNDS=${4:-3}
. "$(dirname "$0")/insns-lib.sh"

# run BUILD COUNT: 2N files, COUNT unlinked; the daemon's total Ir, mfsd_unlink's, mfsd_node_forget's
run() {
	insns_mkfs "$1" 64M
	insns_callgrind "$1" ""
	mkdir "$MNT/d"
	(cd "$MNT/d" && seq -f 'f%.0f' 1 $((2 * N)) | xargs touch)
	(cd "$MNT/d" && seq -f 'f%.0f' 1 "$2" | xargs rm)
	sleep 2
	stat -f "$MNT" >/dev/null
	insns_umount
	insns_total
	insns_fn mfsd_unlink
	insns_fn mfsd_node_forget
}

for ((r = 1; r <= ROUNDS; r++)); do
	for v in OLD NEW; do
		b=${!v}
		mapfile -t a < <(run "$b" "$N")
		mapfile -t c < <(run "$b" $((2 * N)))
		echo "round $r $v: $(((c[0] - a[0]) / N)) instructions per unlink," \
			"mfsd_unlink $(((c[1] - a[1]) / N)) per UNLINK," \
			"with mfsd_node_forget $(((c[1] + c[2] - a[1] - a[2]) / N))"
	done
done
