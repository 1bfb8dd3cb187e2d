#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The daemon's user-space instructions per 4 KiB operation on an open file,
# build A against build B, in one run: overwrite (write-insns.sh), O_DIRECT
# read (read-insns.sh) and random allocating write into a sparse file
# (MODE=rand alloc-write-insns.sh).  Each figure is (Ir(2N) - Ir(N)) / N under
# callgrind with one worker thread (insns-lib.sh); this script only runs the
# three with the same builds and counts, so that docs/benchmarks/data-path.md can quote
# one command.
#
# Usage: tests/bench/io-insns.sh BUILD_A BUILD_B [N] [ROUNDS]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

A=${1:?usage: io-insns.sh BUILD_A BUILD_B [N] [ROUNDS]}
B=${2:?usage}
N=${3:-2000}
ROUNDS=${4:-1}
here=$(dirname "$0")

echo "== 4 KiB random overwrite (write-insns.sh $N $ROUNDS)"
"$here/write-insns.sh" "$A" "$B" "$N" "$ROUNDS"
echo "== 4 KiB O_DIRECT read (read-insns.sh --n $N)"
for ((r = 1; r <= ROUNDS; r++)); do
	"$here/read-insns.sh" --n "$N" "$A" "$B"
done
echo "== 4 KiB random allocating write (MODE=rand alloc-write-insns.sh $((N / 2)) $ROUNDS)"
MODE=rand "$here/alloc-write-insns.sh" "$A" "$B" $((N / 2)) "$ROUNDS"
