#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Wall-clock cost of data checksums (mkfs.mendfs -O data_csum, docs/FORMAT.md
# §15): fio against a real mount of this tree's daemon, on an image made
# without and one made with data_csum, in one run: ROUNDS rounds, each
# formatting and mounting both (the order alternating from round to round,
# so a drift of the machine's speed hits both alike), the table the median
# of the rounds.  Images on tmpfs (/dev/shm).  Not part of the test suite.
#
# Workloads, as tests/bench/fs-figures.sh runs them (fio --ioengine=psync
# --direct=0 on one file of --file-size; caches dropped before every read
# phase; write phases end with fsync, inside the timing; each job stops
# after one pass over the file or --runtime seconds):
#   seq write 1 MiB, seq read 1 MiB (MiB/s), rand write 4 KiB, rand read
#   4 KiB (IOPS), one job each.
#
# With --busy, a CPU-bound process (sh -c 'while :; do :; done') runs beside
# the whole measurement, as on a machine that has other work to do.
#
# Usage: tests/bench/csum-fio.sh [--build DIR] [--rounds N] [--size SIZE]
#                                [--file-size SIZE] [--runtime S] [--busy]
#   --build DIR   meson build tree with fs/fuse/mendfs and mkfs/mkfs.mendfs
#                 (default: build-rel; used as it is, not rebuilt)
#   --rounds N    default 3
#   --size SIZE   image size (default 2G); --file-size the fio file (default 1G)
#   --runtime S   upper bound per fio job (default 5)
# Needs root, /dev/fuse and fio.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build-rel
ROUNDS=3
SIZE=2G
FSIZE=1G
RUNTIME=5
BUSY=0

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit "${1:-0}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--file-size) FSIZE=$2; shift 2 ;;
	--runtime) RUNTIME=$2; shift 2 ;;
	--busy) BUSY=1; shift ;;
	-h | --help) usage 0 ;;
	*) echo "unknown option: $1" >&2; usage 2 >&2 ;;
	esac
done

die() {
	echo "csum-fio: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "needs root (mounts, drop_caches)"
[ -c /dev/fuse ] || die "/dev/fuse is missing"
command -v fio >/dev/null || die "fio is missing (apt-get install fio)"
MENDFS=$BUILD/fs/fuse/mendfs
MKFS_MENDFS=$BUILD/mkfs/mkfs.mendfs
if [ ! -x "$MENDFS" ] || [ ! -x "$MKFS_MENDFS" ]; then
	die "no mendfs build in $BUILD"
fi

WORK=$(mktemp -d /dev/shm/csum-fio.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
DPID=
HOG=

wait_gone() { # PID SECONDS
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

cleanup() {
	set +e
	if mountpoint -q "$MNT" 2>/dev/null; then
		timeout 30 umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	if [ -n "$DPID" ]; then
		kill "$DPID" 2>/dev/null
		wait_gone "$DPID" 10 || kill -9 "$DPID" 2>/dev/null
	fi
	[ -n "$HOG" ] && kill "$HOG" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

fs_up() { # FEATURE: off | data_csum
	local -a opts=()
	[ "$1" = data_csum ] && opts=(-O data_csum)
	"$MKFS_MENDFS" -q -f "${opts[@]}" "$WORK/img" "$SIZE" >"$WORK/mkfs.log" 2>&1 ||
		die "mkfs.mendfs ${opts[*]}: $(cat "$WORK/mkfs.log")"
	"$MENDFS" -f "$WORK/img" "$MNT" 2>>"$WORK/daemon.log" &
	DPID=$!
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.1
	done
	die "mount failed: $(tail -5 "$WORK/daemon.log")"
}

fs_down() {
	timeout 60 umount "$MNT" || die "umount failed"
	wait_gone "$DPID" 60 || die "the daemon did not exit"
	wait "$DPID" || die "the daemon exited $?"
	DPID=
	rm -f "$WORK/img"
}

# run_fio RW BS: one job on $MNT/data; prints MiB/s (1M) or IOPS (4k)
run_fio() {
	local rw=$1 bs=$2 out=$WORK/fio.txt
	local -a extra=()
	case $rw in
	*read*) drop_caches ;;
	*) extra+=(--end_fsync=1) ;;
	esac
	fio --name=x --filename="$MNT/data" --rw="$rw" --bs="$bs" --size="$FSIZE" \
		--ioengine=psync --direct=0 --fallocate=none --runtime="$RUNTIME" \
		--time_based=0 "${extra[@]}" --minimal >"$out" 2>"$out.err" ||
		die "fio $rw $bs: $(tail -3 "$out.err")"
	# terse v3: field 5 error, 7/8 read KiB/s and IOPS, 48/49 write
	awk -F';' -v rw="$rw" -v bs="$bs" 'END {
		if ($5 != 0) { print "error " $5 > "/dev/stderr"; exit 1 }
		if (rw ~ /read/) { bw = $7; iops = $8 } else { bw = $48; iops = $49 }
		if (bs == "1M") printf "%.0f\n", bw / 1024; else printf "%.0f\n", iops
	}' "$out"
}

WL=("write 1M" "read 1M" "randwrite 4k" "randread 4k")
LABEL=("seq write 1 MiB (MiB/s)" "seq read 1 MiB (MiB/s)" "rand write 4 KiB (IOPS)"
	"rand read 4 KiB (IOPS)")
declare -A RAW=()

if [ "$BUSY" = 1 ]; then
	sh -c 'while :; do :; done' &
	HOG=$!
fi
echo "csum-fio: $(git -C "$SRCROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), build $BUILD," \
	"image $SIZE on /dev/shm, file $FSIZE, runtime ${RUNTIME}s, $ROUNDS rounds," \
	"$([ "$BUSY" = 1 ] && echo "a CPU hog beside" || echo "no hog")," \
	"$(nproc) CPUs, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	order=(off data_csum)
	[ $((r % 2)) = 0 ] && order=(data_csum off)
	for feat in "${order[@]}"; do
		fs_up "$feat"
		line="round $r $feat:"
		for i in "${!WL[@]}"; do
			read -r rw bs <<<"${WL[$i]}"
			v=$(run_fio "$rw" "$bs")
			RAW[$feat,$i]="${RAW[$feat,$i]:-} $v"
			line+=" $rw $bs $v;"
		done
		fs_down
		echo "$line"
	done
done

median() {
	tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END {
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

printf '\n%-26s %12s %12s %9s\n' "median of $ROUNDS" "without" "data_csum" "change"
for i in "${!WL[@]}"; do
	a=$(median "${RAW[off,$i]}")
	b=$(median "${RAW[data_csum,$i]}")
	printf '%-26s %12s %12s %8s%%\n' "${LABEL[$i]}" "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.1f", (b - a) * 100 / a }')"
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
