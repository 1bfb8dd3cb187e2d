#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The cost of data checksums (mkfs.mendfs -O data_csum, docs/FORMAT.md §15):
# the daemon's user-space instructions per operation on one build, on an
# image made without and one made with data_csum.  For each, a 64 MiB file
# is written, then the daemon runs under callgrind (threads=1) while fio does
# n and then 2n O_DIRECT operations of each kind: 4 KiB random overwrite and
# 4 KiB random read (n = N), 128 KiB sequential overwrite and read (n = N / 5,
# so that 2n stay inside the file); (Ir(2n) - Ir(n)) / n is the figure
# (insns-lib.sh).  Rounds repeat the whole.
#
# Usage: tests/bench/csum-insns.sh BUILD [N] [ROUNDS]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

B=${1:?usage: csum-insns.sh BUILD [N] [ROUNDS]}
N=${2:-1000}
ROUNDS=${3:-1}
. "$(dirname "$0")/insns-lib.sh"

ir() { # RW BS IOS -> Ir of the daemon
	insns_callgrind "$B" ""
	fio --name=x --filename="$MNT/f" --rw="$1" --bs="$2" --direct=1 --ioengine=psync \
		--number_ios="$3" --randrepeat=1 --output=/dev/null
	insns_umount
	insns_total
}

for ((r = 1; r <= ROUNDS; r++)); do
	for feat in off data_csum; do
		opts=()
		[ $feat = data_csum ] && opts=(-O data_csum)
		"$(insns_bin "$B" mkfs.mendfs)" -q -f "${opts[@]}" "$W/img" 256M >/dev/null
		insns_mount "$B" ""
		dd if=/dev/urandom of="$MNT/f" bs=1M count=64 conv=fsync status=none
		insns_umount
		for k in "randwrite 4k $N" "randread 4k $N" "write 128k $((N / 5))" \
			"read 128k $((N / 5))"; do
			read -r rw bs n <<<"$k"
			a=$(ir "$rw" "$bs" "$n")
			b=$(ir "$rw" "$bs" $((2 * n)))
			echo "round $r $feat $rw $bs: per op $(((b - a) / n))"
		done
	done
done
