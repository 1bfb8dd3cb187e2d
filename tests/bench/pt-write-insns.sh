#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The peer's side of alloc-write-insns.sh and write-insns.sh: instructions per
# 4 KiB O_DIRECT random write in libfuse's passthrough_ll (the example shipped
# with libfuse3-dev, built here, run -s: one thread, as mendfs's -o threads=1)
# over a tmpfs directory, measured the same way: callgrind, each run a fresh
# mount and a fresh file, (Ir(2N) - Ir(N)) / N.  MODE=rand writes into a fresh
# sparse 256 MiB file; MODE=over into one written in full first.
#
# Usage: [MODE=rand|over] tests/bench/pt-write-insns.sh [N] [ROUNDS]
# Needs root, /dev/fuse, fio, valgrind, gcc and libfuse3-dev.  Not part of
# the test suite.
set -euo pipefail

N=${1:-1000}
ROUNDS=${2:-1}
MODE=${MODE:-rand}
EX=/usr/share/doc/libfuse3-dev/examples
W=$(mktemp -d /tmp/pt-insns.XXXXXX)
mkdir -p "$W/src" "$W/m"
trap 'mountpoint -q "$W/m" && umount "$W/m"; mountpoint -q "$W/src" && umount "$W/src"; rm -rf "$W"' EXIT

for f in passthrough_ll.c passthrough_helpers.h; do
	if [ -f "$EX/$f" ]; then cp "$EX/$f" "$W/"; else gunzip -c "$EX/$f.gz" >"$W/$f"; fi
done
# shellcheck disable=SC2046 # pkg-config's flags are meant to be split
gcc -O2 -o "$W/passthrough_ll" "$W/passthrough_ll.c" $(pkg-config --cflags --libs fuse3)
mount -t tmpfs tmpfs "$W/src"

ir() { # IOS -> Ir of passthrough_ll
	local f=$W/m/f$1 i
	rm -f "$W/cg"
	valgrind --tool=callgrind --callgrind-out-file="$W/cg" -q "$W/passthrough_ll" -f -s \
		-o source="$W/src",cache=never "$W/m" 2>>"$W/log" &
	local pid=$!
	for ((i = 0; i < 600; i++)); do mountpoint -q "$W/m" && break; sleep 0.1; done
	mountpoint -q "$W/m" || { cat "$W/log" >&2; exit 1; }
	[ ! -e "$f" ] || { echo "$f exists: not a fresh file" >&2; exit 1; }
	if [ "$MODE" = over ]; then
		fio --name=p --filename="$f" --rw=write --bs=1M --size=256M --direct=1 --output=/dev/null
	else
		truncate -s 256M "$f"
	fi
	fio --name=w --filename="$f" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
		--size=256M --number_ios="$1" --randrepeat=1 --norandommap --output=/dev/null
	umount "$W/m"
	wait "$pid"
	awk '/^summary:/ { print $2 }' "$W/cg"
}

for ((r = 1; r <= ROUNDS; r++)); do
	a=$(ir "$N")
	b=$(ir $((2 * N)))
	echo "round $r passthrough_ll: per 4 KiB write ($MODE) $(((b - a) / N))"
done
