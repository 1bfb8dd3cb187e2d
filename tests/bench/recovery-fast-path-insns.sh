#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Instructions per FUSE read in the daemon, poison_checks=true vs false: the
# daemon runs under callgrind (threads=1) while fio does N and then 2N 4 KiB
# random O_DIRECT reads of a 64 MiB file; (Ir(2N) - Ir(N)) / N is the daemon's
# user-space instructions per read, repeatable to a few instructions.  System
# calls and the kernel's FUSE side are not counted.  Also: the checked daemon
# with one poisoned sector elsewhere on the device (non-empty table).
#
# Usage: tests/bench/recovery-fast-path-insns.sh CHECKED_BUILD UNCHECKED_BUILD [N]
# Needs root, /dev/fuse, fio and valgrind.  Not part of the test suite.
set -euo pipefail

ON=${1:?usage: recovery-fast-path-insns.sh CHECKED_BUILD UNCHECKED_BUILD [N]}
OFF=${2:?usage}
N=${3:-5000}
. "$(dirname "$0")/insns-lib.sh"

insns_mkfs "$ON" 256M
insns_mount "$ON" ""
dd if=/dev/urandom of="$MNT/f" bs=1M count=64 conv=fsync status=none
insns_umount
NSEC=$((256 * 1024 * 1024 / 512))

ir() { # BUILD POISON IOS -> Ir of the daemon
	if [ "$2" = 1 ]; then echo "$((NSEC - 8)) 1" >"$W/img.badblocks"; else rm -f "$W/img.badblocks"; fi
	insns_callgrind "$1" ""
	fio --name=rr --filename="$MNT/f" --rw=randread --bs=4k --direct=1 --ioengine=psync \
		--number_ios="$3" --randrepeat=1 --output=/dev/null
	insns_umount
	insns_total
}

for cfg in "true $ON 0" "false $OFF 0" "true+poisoned-table $ON 1"; do
	set -- $cfg
	a=$(ir "$2" "$3" "$N")
	b=$(ir "$2" "$3" $((2 * N)))
	echo "poison_checks=$1: Ir($N)=$a Ir($((2 * N)))=$b per read $(((b - a) / N))"
done
