#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per FUSE 4 KiB write in the daemon, build A against build B
# (e.g. before and after a change to the write path): the daemon runs under
# callgrind (threads=1) while fio does N and then 2N 4 KiB random O_DIRECT
# overwrites of a 64 MiB file; (Ir(2N) - Ir(N)) / N is the daemon's
# user-space instructions per write.  Rounds alternate A and B; each line is
# one round.
#
# Usage: tests/bench/write-insns.sh BUILD_A BUILD_B [N] [ROUNDS]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

A=${1:?usage: write-insns.sh BUILD_A BUILD_B [N] [ROUNDS]}
B=${2:?usage}
N=${3:-3000}
ROUNDS=${4:-3}
. "$(dirname "$0")/insns-lib.sh"

insns_mkfs "$A" 256M
insns_mount "$A" ""
dd if=/dev/urandom of="$MNT/f" bs=1M count=64 conv=fsync status=none
insns_umount

ir() { # BUILD IOS -> Ir of the daemon
	insns_callgrind "$1" ""
	fio --name=rw --filename="$MNT/f" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
		--number_ios="$2" --randrepeat=1 --output=/dev/null
	insns_umount
	insns_total
}

for ((r = 1; r <= ROUNDS; r++)); do
	for build in "$A" "$B"; do
		a=$(ir "$build" "$N")
		b=$(ir "$build" $((2 * N)))
		echo "round $r $build: per write $(((b - a) / N))"
	done
done
