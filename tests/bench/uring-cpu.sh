#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The daemon's CPU per operation, FUSE over io_uring (-o io_uring) against
# the classic /dev/fuse transport: for each workload, the daemon's user +
# system time (/proc/PID/stat, every thread's) over the workload divided by
# its operations.  Not part of the test suite; needs root, /dev/fuse, fio and
# a kernel with FUSE over io_uring (the fuse module's enable_uring is set for
# the run and restored after).
#
#   tests/bench/uring-cpu.sh [options]
#     --build DIR      meson build tree (default build-rel: meson setup build-rel
#                      -Dbuildtype=release -Dtests=enabled)
#     --rounds N       rounds, the two transports in alternating order (default 3);
#                      each figure is the median of the rounds
#     --runtime S      upper bound per fio job (default 8)
#     --file-size SIZE fio's file (default 1G; the image is twice as large)
#     --files N        files of the create loop (default 20000)
#
# Each round and transport mounts a fresh image on /dev/shm, lays out the fio
# file (not measured), then measures:
#   randwrite1  fio psync 4 KiB random write, 1 job, ending with fsync
#   randread2   fio psync 4 KiB random read, 2 jobs, each over its own half of
#               the file (no block read twice), page cache dropped first
#   create      fs-meta-rates' create loop (open O_CREAT|O_EXCL + close), ending
#               with fsync of the directory
# An operation is one fio I/O or one file created.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build-rel
ROUNDS=3
RUNTIME=8
FSIZE=1G
NFILES=20000
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--runtime) RUNTIME=$2; shift 2 ;;
	--file-size) FSIZE=$2; shift 2 ;;
	--files) NFILES=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done

# the integration tests' helpers: work area, mkfs, mount, unmount, enable_uring
MENDFS=$BUILD/fs/fuse/mendfs
MKFS_MENDFS=$BUILD/mkfs/mkfs.mendfs
MENDCTL=$BUILD/fs/mendctl/mendctl
META_RATES=$BUILD/tests/bench/fs-meta-rates
name=uring-cpu
# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$SRCROOT/tests/integration/lib.sh"
MENDFS_TEST_TRANSPORT= # mount_fg mounts what it is told
need_progs MENDFS MKFS_MENDFS MENDCTL META_RATES
need_root_fuse
need_cmds fio
uring_enable
work_init uring-cpu /dev/shm

TICK=$(getconf CLK_TCK)
WORKLOADS=(randwrite1 randread2 create)
declare -A LABEL=(
	[randwrite1]="4 KiB random write, 1 job"
	[randread2]="4 KiB random read, 2 jobs"
	[create]="create"
)
declare -A US=()   # US[transport,workload]: the rounds' µs per op
declare -A RATE=() # RATE[transport,workload]: the rounds' ops per second

cpu_ticks() { # cpu_ticks PID: utime + stime of the process, in clock ticks
	awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# measure TRANSPORT WORKLOAD CMD...: run CMD, which prints "OPS SECONDS", and
# record the daemon's µs of CPU per op and the ops per second
measure() {
	local tr=$1 w=$2 c0 c1 ops secs
	shift 2
	c0=$(cpu_ticks "$DPID")
	read -r ops secs < <("$@") || fail "$w over $tr"
	c1=$(cpu_ticks "$DPID")
	[ "${ops:-0}" -gt 0 ] || fail "$w over $tr: no operations"
	US[$tr,$w]+=" $(awk -v t=$((c1 - c0)) -v hz="$TICK" -v n="$ops" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
	RATE[$tr,$w]+=" $(awk -v n="$ops" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
}

fio_job() { # fio_job RW NUMJOBS SIZE_PER_JOB: prints "IOS SECONDS"
	local out=$WORK/fio.txt
	fio --name=j --filename="$MNT/data" --rw="$1" --bs=4k --numjobs="$2" --size="$3" \
		--offset_increment="$3" --group_reporting --ioengine=psync --direct=0 \
		--fallocate=none --runtime="$RUNTIME" --end_fsync=1 --minimal >"$out" 2>"$out.err" ||
		{ cat "$out.err" >&2; return 1; }
	# terse v3: 6/9 read KiB and ms, 47/50 write
	awk -F';' -v rw="$1" 'END {
		if (rw ~ /read/) { kb = $6; ms = $9 } else { kb = $47; ms = $50 }
		printf "%d %.3f\n", kb / 4, ms / 1000 }' "$out"
}

create_loop() { # prints "FILES SECONDS"
	mkdir "$MNT/meta"
	"$META_RATES" "$MNT/meta" "$NFILES" 60 create | awk '{ print $2, $3 }'
}

run_transport() { # run_transport dev_fuse|io_uring
	local tr=$1 half
	rm -f "$IMG"
	mkfs_mendfs "$IMG" "$(($(numfmt --from=iec "$FSIZE") * 2 / 1048576))M"
	mount_fg "$([ "$tr" = io_uring ] && echo io_uring)"
	[ "$(transport_of "$MNT")" = "$tr" ] || fail "transport $(transport_of "$MNT"), not $tr"
	fio --name=layout --filename="$MNT/data" --rw=write --bs=1M --size="$FSIZE" \
		--ioengine=psync --end_fsync=1 >/dev/null || fail "laying out the fio file"
	measure "$tr" randwrite1 fio_job randwrite 1 "$FSIZE"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	half=$(($(numfmt --from=iec "$FSIZE") / 2))
	measure "$tr" randread2 fio_job randread 2 "$half"
	measure "$tr" create create_loop
	umount_fg
}

median() { # median VALUES...
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for ((r = 0; r < ROUNDS; r++)); do
	if ((r % 2)); then order=(io_uring dev_fuse); else order=(dev_fuse io_uring); fi
	for tr in "${order[@]}"; do
		echo "uring-cpu: round $((r + 1))/$ROUNDS: $tr ..." >&2
		run_transport "$tr"
	done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

echo "daemon CPU per operation (tests/bench/uring-cpu.sh), median of $ROUNDS interleaved rounds"
echo "commit:  $(git -C "$SRCROOT" rev-parse --short=12 HEAD) (build $BUILD)"
echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), kernel $(uname -r)"
echo "started: $START; load average before $LOAD0, after $LOAD1"
echo
echo "| workload | daemon µs/op, /dev/fuse | daemon µs/op, io_uring | io_uring/dev_fuse | ops/s, /dev/fuse | ops/s, io_uring |"
echo "|---|---|---|---|---|---|"
for w in "${WORKLOADS[@]}"; do
	# shellcheck disable=SC2086 # the rounds' values, blank-separated
	{
		cd=$(median ${US[dev_fuse,$w]})
		cu=$(median ${US[io_uring,$w]})
		rd=$(median ${RATE[dev_fuse,$w]})
		ru=$(median ${RATE[io_uring,$w]})
	}
	echo "| ${LABEL[$w]} | $cd | $cu | $(awk -v a="$cu" -v b="$cd" 'BEGIN { printf "%.2f", a / b }') | $rd | $ru |"
done
echo
echo "rounds (µs/op; ops/s):"
for w in "${WORKLOADS[@]}"; do
	echo "  $w: dev_fuse${US[dev_fuse,$w]}; io_uring${US[io_uring,$w]}; ops/s dev_fuse${RATE[dev_fuse,$w]}; io_uring${RATE[io_uring,$w]}"
done
