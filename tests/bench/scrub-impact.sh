#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Foreground throughput while `mendctl scrub` runs, against none running (not
# part of the test suite; docs/benchmarks/recovery.md).  One mendfs mount over an image
# on tmpfs (/dev/shm) holding a fio file and --fill MiB of other data, so that
# a scrub has something to read.  fio 4 KiB random read and random write
# (psync, one job, --direct=1, time based, --runtime seconds) on the fio file
# under three conditions, in interleaved rounds (the order rotating from round
# to round): no scrub; scrubs back to back, unthrottled; scrubs back to back
# at --rate R MB/s.  Reports each cell's median IOPS and the scrub's own
# read rate (MiB/s of data read by the scrubs during the fio run).
#
# Usage: tests/bench/scrub-impact.sh [--build DIR] [--rounds N] [--runtime S]
#                                    [--fill MIB] [--rate R]
# Defaults: build (beside tests/), 3 rounds, 10 s, 512 MiB, 20 MB/s.
# Needs root, /dev/fuse and fio; installs nothing.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build
ROUNDS=3
RUNTIME=10
FILL=512
RATE=20
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--runtime) RUNTIME=$2; shift 2 ;;
	--fill) FILL=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--rounds N] [--runtime S] [--fill MIB] [--rate R]" >&2; exit 2 ;;
	esac
done
MENDFS=$BUILD/fs/fuse/mendfs MKFS=$BUILD/mkfs/mkfs.mendfs MENDCTL=$BUILD/fs/mendctl/mendctl
for p in "$MENDFS" "$MKFS" "$MENDCTL"; do [ -x "$p" ] || { echo "no $p" >&2; exit 1; }; done
command -v fio >/dev/null || { echo "needs fio" >&2; exit 1; }

WORK=$(mktemp -d /dev/shm/scrub-impact.XXXXXX)
MNT=$WORK/m
DPID=""
cleanup() {
	touch "$WORK/stop" 2>/dev/null || true
	mountpoint -q "$MNT" && umount "$MNT"
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
mkdir "$MNT"
"$MKFS" -q "$WORK/img" $((FILL + 512))M
"$MENDFS" -f "$WORK/img" "$MNT" 2>"$WORK/log" &
DPID=$!
for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { echo "not mounted" >&2; exit 1; }
dd if=/dev/urandom of="$MNT/fill" bs=1M count="$FILL" conv=fsync status=none
dd if=/dev/urandom of="$MNT/fio" bs=1M count=256 conv=fsync status=none

# scrubs RATE: scrubs back to back until $WORK/stop (the one running is
# interrupted: run() sends it SIGINT); data bytes read into $WORK/scrubbed
scrubs() {
	local total=0 out cpid
	while [ ! -e "$WORK/stop" ]; do
		"$MENDCTL" scrub --json ${1:+--rate "$1"} "$MNT" >"$WORK/scrub.json" &
		cpid=$!
		echo "$cpid" >"$WORK/cpid"
		wait "$cpid" || true
		out=$(cat "$WORK/scrub.json")
		total=$((total + $(grep -o '"data_bytes":[0-9]*' <<<"$out" | cut -d: -f2 || echo 0)))
	done
	echo "$total" >"$WORK/scrubbed"
}

declare -A R
run() { # run MODE WORKLOAD
	local mode=$1 rw=$2 spid="" iops mib="-" t0
	rm -f "$WORK/stop" "$WORK/scrubbed"
	case $mode in
	full) scrubs "" & spid=$! ;;
	rate) scrubs "$RATE" & spid=$! ;;
	esac
	sleep 0.5
	t0=$(date +%s.%N)
	iops=$(fio --name=fg --filename="$MNT/fio" --rw="$rw" --bs=4k --ioengine=psync \
		--direct=1 --numjobs=1 --time_based --runtime="$RUNTIME" --size=256M \
		--output-format=terse --terse-version=3 | awk -F';' -v rw="$rw" \
		'{ print (rw == "randread") ? $8 : $49 }')
	touch "$WORK/stop"
	if [ -n "$spid" ]; then
		kill -INT "$(cat "$WORK/cpid")" 2>/dev/null || true
		wait "$spid"
		mib=$(awk -v b="$(cat "$WORK/scrubbed")" -v s="$(date +%s.%N)" -v t="$t0" \
			'BEGIN { printf "%.0f", b / 1048576 / (s - t + 0.5) }')
	fi
	R[$mode,$rw]+="$iops "
	R[$mode,$rw,mib]+="$mib "
	echo "round $r: $mode $rw: $iops IOPS (scrub ${mib} MiB/s)" >&2
}

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "load before: $(cat /proc/loadavg)"
modes=(none full rate)
for ((r = 1; r <= ROUNDS; r++)); do
	for ((k = 0; k < 3; k++)); do
		m=${modes[$(((k + r - 1) % 3))]}
		run "$m" randread
		run "$m" randwrite
	done
done
echo "load after:  $(cat /proc/loadavg)"
echo "commit $(git -C "$SRCROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); fio $(fio --version); $ROUNDS rounds, ${RUNTIME} s each, 4 KiB psync direct=1, fill ${FILL} MiB"
printf '%-34s %12s %12s %14s\n' "condition" "randread" "randwrite" "scrub MiB/s"
for m in none full rate; do
	case $m in none) label="no scrub" ;; full) label="scrub, unthrottled" ;; rate) label="scrub --rate $RATE" ;; esac
	printf '%-34s %12s %12s %14s\n' "$label" "$(median "${R[$m,randread]}")" \
		"$(median "${R[$m,randwrite]}")" "$(median "${R[$m,randread,mib]}")"
done
for m in none full rate; do
	echo "  $m: randread ${R[$m,randread]}| randwrite ${R[$m,randwrite]}"
done
