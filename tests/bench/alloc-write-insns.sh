#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per allocating 4 KiB write in the daemon, build A against
# build B: as write-insns.sh, but each measurement writes N (then 2N) 4 KiB
# O_DIRECT blocks into a fresh file: sequential appends, or with MODE=rand
# random writes into a sparse 256 MiB file.  (Ir(2N) - Ir(N)) / N per round.
#
# Usage: [MODE=seq|rand] tests/bench/alloc-write-insns.sh BUILD_A BUILD_B [N] [ROUNDS]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

A=${1:?usage: alloc-write-insns.sh BUILD_A BUILD_B [N] [ROUNDS]}
B=${2:?usage}
N=${3:-2000}
ROUNDS=${4:-3}
MODE=${MODE:-seq}
. "$(dirname "$0")/insns-lib.sh"

# Each measurement writes its own fresh file, named by its I/O count (ir runs
# in a command substitution, a subshell: a counter kept here would not count,
# and the 2N run would overwrite the N run's blocks before allocating).
ir() { # BUILD IOS -> Ir of the daemon
	local f=$MNT/f$2
	insns_callgrind "$1" ""
	[ ! -e "$f" ] || { echo "$f exists: not a fresh file" >&2; exit 1; }
	if [ "$MODE" = rand ]; then
		truncate -s 256M "$f"
		fio --name=w --filename="$f" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
			--size=256M --number_ios="$2" --randrepeat=1 --norandommap --output=/dev/null
	else
		fio --name=w --filename="$f" --rw=write --bs=4k --direct=1 --ioengine=psync \
			--size=$((4 * $2))k --output=/dev/null
	fi
	insns_umount
	insns_total
}

for ((r = 1; r <= ROUNDS; r++)); do
	for build in "$A" "$B"; do
		insns_mkfs "$build" 1G
		a=$(ir "$build" "$N")
		b=$(ir "$build" $((2 * N)))
		echo "round $r $build: per allocating write ($MODE) $(((b - a) / N))"
	done
done
