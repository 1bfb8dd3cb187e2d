#!/bin/bash
# SPDX-License-Identifier: MIT
#
# What a first sequential read costs the daemon: the image's pages are in
# the page cache (tmpfs) but this daemon has not touched them through its
# mapping since the mount.  For each build given and each configuration
# (transport classic or io_uring, image with or without -O data_csum), in
# ROUNDS interleaved rounds: format a 2 GiB image on /dev/shm, mount it,
# write a 512 MiB file (dd bs=1M conv=fsync), drop caches, read it with
# dd bs=1M; then drop caches and read it again (the mapping now touched).
# Prints, per run, the daemon's CPU time (utime + stime from /proc/PID/stat,
# in clock ticks) and the throughput of both reads, then the medians per
# build and configuration.  CPU time is the steadier figure (throughput
# moves with the machine's load).  Not part of the test suite.
#
# Usage: tests/bench/cold-read.sh [--rounds N] [--configs LIST] BUILD...
#   BUILD        meson build trees (fs/fuse/mendfs, mkfs/mkfs.mendfs), used as
#                they are, e.g. one of the commit before a change and one after
#   --rounds N   default 3
#   --configs L  comma-separated subset of classic, uring, classic_csum and
#                uring_csum (default all four)
# Needs root, /dev/fuse; for uring the fuse module's enable_uring (set here
# and restored at the end).
set -euo pipefail

ROUNDS=3
CONFIGS=classic,uring,classic_csum,uring_csum
BUILDS=()
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift 2 ;;
	--configs) CONFIGS=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "cold-read: unknown option $1" >&2; exit 2 ;;
	*) BUILDS+=("$(cd "$1" && pwd)"); shift ;;
	esac
done
[ ${#BUILDS[@]} -gt 0 ] || { echo "cold-read: no build given" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "cold-read: needs root" >&2; exit 1; }

URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_WAS=$(cat "$URING_PARAM" 2>/dev/null || true)
WORK=$(mktemp -d /dev/shm/cold-read.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
DPID=
cleanup() {
	mountpoint -q "$MNT" && umount "$MNT"
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	[ -n "$URING_WAS" ] && echo "$URING_WAS" >"$URING_PARAM"
	rm -rf "$WORK"
}
trap cleanup EXIT

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run BUILD CONFIG: prints "cold_ticks cold_MBps warm_ticks warm_MBps"
run() {
	local b=$1 cfg=$2 o='' mk='' t0 t1 s0 s1 out='' _
	case $cfg in *uring*) o="-o io_uring" ;; esac
	case $cfg in *csum) mk="-O data_csum" ;; esac
	# shellcheck disable=SC2086 # option lists
	"$b/mkfs/mkfs.mendfs" -q $mk "$WORK/img" 2G >/dev/null
	case $cfg in *uring*) echo 1 >"$URING_PARAM" ;; esac
	# shellcheck disable=SC2086
	"$b/fs/fuse/mendfs" -f $o "$WORK/img" "$MNT" 2>>"$WORK/daemon.log" &
	DPID=$!
	for _ in $(seq 100); do
		mountpoint -q "$MNT" && break
		sleep 0.1
	done
	mountpoint -q "$MNT" || { cat "$WORK/daemon.log" >&2; exit 1; }
	dd if=/dev/zero of="$MNT/f" bs=1M count=512 conv=fsync status=none
	for _ in 1 2; do
		sync
		echo 3 >/proc/sys/vm/drop_caches
		t0=$(ticks $DPID)
		s0=$(date +%s.%N)
		dd if="$MNT/f" of=/dev/null bs=1M status=none
		s1=$(date +%s.%N)
		t1=$(ticks $DPID)
		out="$out $((t1 - t0)) $(echo "512 / ($s1 - $s0)" | bc)"
	done
	umount "$MNT"
	wait $DPID
	DPID=
	rm -f "$WORK/img"
	echo "$out"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -A RES
echo "# $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# build config round: cold read (daemon ticks, MB/s), second read (ticks, MB/s)"
for ((r = 1; r <= ROUNDS; r++)); do
	for b in "${BUILDS[@]}"; do
		for cfg in ${CONFIGS//,/ }; do
			v=$(run "$b" "$cfg")
			RES[$b,$cfg]+="$v;"
			echo "$b $cfg $r:$v"
		done
	done
done
echo "# medians of $ROUNDS rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-40s %-13s %10s %10s %10s %10s\n' build config cold_ticks cold_MB/s warm_ticks warm_MB/s
for b in "${BUILDS[@]}"; do
	for cfg in ${CONFIGS//,/ }; do
		m=()
		for f in 1 2 3 4; do
			m+=("$(tr ';' '\n' <<<"${RES[$b,$cfg]}" | awk -v f=$f 'NF { print $f }' | median)")
		done
		printf '%-40s %-13s %10s %10s %10s %10s\n' "$(basename "$(dirname "$b")")/$(basename "$b")" \
			"$cfg" "${m[@]}"
	done
done
