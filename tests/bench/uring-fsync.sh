#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What an fsync costs over FUSE over io_uring (-o io_uring), and what it
# costs the other requests of its CPU, two builds compared: on a fresh image
# on /dev/shm, with every process on CPU 0 (one kernel queue, one ring):
#   fsync      fio, 4 KiB random writes each followed by fsync, alone: ops/s
#   beside     the same fsync job, and beside it 4 KiB O_DIRECT random reads
#              of another file (each reaches the daemon): the reads' IOPS and
#              their 99th percentile latency, and the fsync job's ops/s
# Medians of ROUNDS interleaved rounds.  The image lives in DIR (default
# /dev/shm, where an fsync is a journal commit and nothing more; a directory
# on a disk makes it wait for the disk's flush).  Needs root, /dev/fuse, fio and a
# kernel with FUSE over io_uring.  Not part of the test suite.
#
#   tests/bench/uring-fsync.sh OLD_BUILD NEW_BUILD [ROUNDS [SECONDS [DIR]]]
set -euo pipefail

A=$(cd "${1:?usage: uring-fsync.sh OLD_BUILD NEW_BUILD [ROUNDS [SECONDS]]}" && pwd)
B=$(cd "${2:?usage}" && pwd)
ROUNDS=${3:-3}
SECS=${4:-5}
DIR=${5:-/dev/shm}
command -v fio >/dev/null || { echo "uring-fsync.sh: needs fio" >&2; exit 1; }
echo 1 >/sys/module/fuse/parameters/enable_uring
W=$(mktemp -d "$DIR/mendfs-uring-fsync.XXXXXX")
MNT=$W/m
mkdir "$MNT"
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	rm -rf "$W"
}
trap cleanup EXIT

declare -A V=()
run() { # BUILD: one round
	local b=$1 out=$W/fio.json
	rm -f "$W/img"
	"$b/mkfs/mkfs.mendfs" -q -f "$W/img" 1G >/dev/null
	"$b/fs/fuse/mendfs" -o io_uring "$W/img" "$MNT"
	fio --name=lay --filename="$MNT/r" --rw=write --bs=1M --size=256M --end_fsync=1 \
		--output=/dev/null
	local fs=(--name=fs --filename="$MNT/w" --rw=randwrite --bs=4k --size=64M --fsync=1
		--ioengine=psync --time_based --runtime="$SECS" --cpus_allowed=0)
	fio "${fs[@]}" --output-format=json --output="$out" >/dev/null
	V[$b,fsync]+=" $(jq '.jobs[0].write.iops' "$out")"
	fio "${fs[@]}" --name=rd --filename="$MNT/r" --rw=randread --bs=4k --size=256M \
		--direct=1 --ioengine=psync --time_based --runtime="$SECS" --cpus_allowed=0 \
		--output-format=json --output="$out" >/dev/null
	V[$b,bfsync]+=" $(jq '.jobs[0].write.iops' "$out")"
	V[$b,rd]+=" $(jq '.jobs[1].read.iops' "$out")"
	V[$b,p99]+=" $(jq '.jobs[1].read.clat_ns.percentile."99.000000" / 1000' "$out")"
	umount "$MNT"
	sleep 1
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then run "$A"; run "$B"; else run "$B"; run "$A"; fi
done
echo "uring-fsync.sh: image in $DIR, $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), medians of $ROUNDS rounds, ${SECS} s each"
echo "| build | fsync'ed writes/s alone | fsync'ed writes/s beside reads | O_DIRECT reads/s beside fsyncs | read p99 µs |"
echo "|---|---|---|---|---|"
for b in "$A" "$B"; do
	# shellcheck disable=SC2086 # the rounds' values
	printf '| %s | %.0f | %.0f | %.0f | %.0f |\n' "$b" "$(median ${V[$b,fsync]})" \
		"$(median ${V[$b,bfsync]})" "$(median ${V[$b,rd]})" "$(median ${V[$b,p99]})"
	for k in fsync bfsync rd p99; do echo "  rounds $k:${V[$b,$k]}"; done
done
