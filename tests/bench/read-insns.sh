#!/usr/bin/env bash
# Instructions the daemon spends per 4 KiB read (callgrind, deterministic):
# each daemon mounts a fresh image (-o threads=1,commit=0 plus OPTS), a 64 MiB
# file is written, then read with O_DIRECT (every 4 KiB block a READ request)
# N times in one run and 2N times in another; (Ir(2N) - Ir(N)) / N is the
# cost of one read, start-up, the write and unmount cancelling out; the
# same for the read handler alone (mfsd_read, inclusive), which is steadier
# than the whole process (libfuse's loop varies by a few dozen instructions
# per request from run to run).  Not part of the test suite; needs root,
# /dev/fuse and valgrind (callgrind_annotate).
#
#   tests/bench/read-insns.sh [--n N] [--opts OPTS] MENDFS [MENDFS...]
#
# Used for the cost of access times (docs/BENCHMARKS.md): with relatime the
# first read moves the atime, every later one is the common case.
set -euo pipefail

N=4000
OPTS=
while [ $# -gt 0 ]; do
	case $1 in
	--n) N=$2; shift 2 ;;
	--opts) OPTS=,$2; shift 2 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--n N] [--opts OPTS] MENDFS..." >&2; exit 2; }
command -v valgrind >/dev/null || { echo "read-insns: needs valgrind" >&2; exit 1; }
W=$(mktemp -d /tmp/mendfs-rinsns.XXXXXX)
mkdir "$W/m"
trap 'mountpoint -q "$W/m" && umount "$W/m"; rm -rf "$W"' EXIT

# ir MENDFS COUNT: the daemon's total instructions for COUNT reads, and mfsd_read's
ir() {
	local mkfs i pid
	mkfs=$(dirname "$1")/../mkfs/mkfs.mendfs
	"$mkfs" -q -f "$W/img" 256M >/dev/null
	valgrind --tool=callgrind --callgrind-out-file="$W/cg" \
		"$1" -f -o "threads=1,commit=0$OPTS" "$W/img" "$W/m" 2>"$W/log" &
	pid=$!
	for ((i = 0; i < 600; i++)); do
		mountpoint -q "$W/m" && break
		sleep 0.1
	done
	dd if=/dev/zero of="$W/m/f" bs=1M count=64 status=none
	dd if="$W/m/f" of=/dev/null bs=4k count="$2" iflag=direct status=none
	umount "$W/m"
	wait "$pid"
	echo "$(awk '/^summary:/ { print $2 }' "$W/cg")" \
		"$(callgrind_annotate --inclusive=yes "$W/cg" | awk '/:mfsd_read / { gsub(",", "", $1); print $1 }')"
}

for d in "$@"; do
	read -r a ha < <(ir "$d" "$N")
	read -r b hb < <(ir "$d" $((2 * N)))
	echo "$d${OPTS:+ (${OPTS#,})}: $(((b - a) / N)) instructions per 4 KiB read," \
		"$(((hb - ha) / N)) in mfsd_read (Ir $a for $N reads, $b for $((2 * N)))"
done
