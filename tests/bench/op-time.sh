#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Where the time of one synchronous 4 KiB FUSE operation goes: mendfs over
# /dev/fuse, mendfs over io_uring (-o io_uring) and libfuse's passthrough_ll
# (the example of libfuse3-dev, built here, over a tmpfs directory, -o
# default_permissions as mendfs always has).  With one fio job doing psync
# I/O, the application and the daemon take turns: one op's wall time is the
# application's CPU (fio and the kernel's FUSE client on its behalf), the
# daemon's CPU, and the rest, in which neither runs: the two wake-ups per op
# (scheduler, inter-processor interrupt, a CPU leaving idle) and run-queue
# waits.  The figures, per op:
#   wall      fio's runtime / its operations
#   app CPU   fio's user + system time (its job process included: /usr/bin/time)
#   daemon    the daemon's user + system time, all threads (/proc/PID/stat)
#   rest      wall - app CPU - daemon
#   wait      the daemon's threads' time runnable but not running, summed
#             over its threads (/proc/PID/task/*/schedstat): a wait that
#             overlaps another thread's work is counted as well, so it can
#             exceed the rest
#   switches  the daemon's voluntary context switches (its threads' sleeps)
# Not part of the test suite; needs root, /dev/fuse, fio, gcc, libfuse3-dev
# and a kernel with FUSE over io_uring (enable_uring is set for the run and
# restored after).
#
#   tests/bench/op-time.sh [options]
#     --build DIR      meson build tree (default build-rel)
#     --rounds N       rounds, the subjects' order rotating (default 3); each
#                      figure is the median of the rounds
#     --runtime S      seconds per fio job (default 5)
#     --file-size SIZE the fio file (default 512M)
#     --files N        files for create1 and unlink1 (default 10000; libfuse's
#                      passthrough_ll fails near 20000, an fd per inode)
#     --busy           a CPU-bound process (a shell loop) beside the whole run
#     --only LIST      comma-separated subset of mendfs,mendfs_uring,
#                      passthrough_ll and mendfs_csum (mendfs on an image made
#                      with mkfs.mendfs -O data_csum; not in the default set)
#
# Workloads (fio --ioengine=psync --direct=0 --bs=4k, one job, as
# tests/bench/fs-figures.sh: one pass over the file or --runtime seconds;
# write phases end with fsync inside the timing, fio --end_fsync=1, so the
# journal commit that makes them durable, with data_csum of the checksum
# blocks they changed, is part of their cost):
#   seqwrite1   the fio file laid out: 1 MiB sequential writes of a new file
#               (one op = 1 MiB, the whole file, not bounded by --runtime)
#   overwrite1  random writes over a laid-out file
#   freshwrite1 random writes into a fresh sparse file (every write allocates)
#   randread1   random reads of the laid-out file, page cache dropped first
# and metadata, one process in one directory (fs-meta-rates.c, built here):
#   create1     --files empty files made (open O_CREAT|O_EXCL, close), then
#               fsync of the directory, inside the timing
#   unlink1     the same files unlinked, then fsync of the directory; the
#               daemon's CPU is read 1 s after the last, so that work the
#               kernel sends later (FORGET, the commit) is counted
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build-rel
ROUNDS=3
RUNTIME=5
FSIZE=512M
NFILES=10000
BUSY=0
ONLY=mendfs,mendfs_uring,passthrough_ll
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--runtime) RUNTIME=$2; shift 2 ;;
	--file-size) FSIZE=$2; shift 2 ;;
	--files) NFILES=$2; shift 2 ;;
	--busy) BUSY=1; shift ;;
	--only) ONLY=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done

MENDFS=$BUILD/fs/fuse/mendfs
MKFS_MENDFS=$BUILD/mkfs/mkfs.mendfs
MENDCTL=$BUILD/fs/mendctl/mendctl
name=op-time
# shellcheck source=SCRIPTDIR/../integration/lib.sh
. "$SRCROOT/tests/integration/lib.sh"
MENDFS_TEST_TRANSPORT= # mount_fg mounts what it is told
need_progs MENDFS MKFS_MENDFS MENDCTL
need_root_fuse
need_cmds fio gcc pkg-config /usr/bin/time
uring_enable
work_init op-time /dev/shm
HOG=
on_cleanup() { [ -z "$HOG" ] || kill "$HOG" 2>/dev/null; }

EX=/usr/share/doc/libfuse3-dev/examples
for f in passthrough_ll.c passthrough_helpers.h; do
	if [ -f "$EX/$f" ]; then cp "$EX/$f" "$WORK/"; else gunzip -c "$EX/$f.gz" >"$WORK/$f"; fi
done
# shellcheck disable=SC2046 # pkg-config's flags are meant to be split
gcc -O2 -o "$WORK/passthrough_ll" "$WORK/passthrough_ll.c" $(pkg-config --cflags --libs fuse3) ||
	fail "building passthrough_ll"
gcc -O2 -o "$WORK/fs-meta-rates" "$SRCROOT/tests/bench/fs-meta-rates.c" ||
	fail "building fs-meta-rates"

TICK=$(getconf CLK_TCK)
IFS=, read -ra SUBJECTS <<<"$ONLY"
for s in "${SUBJECTS[@]}"; do
	case $s in
	mendfs | mendfs_uring | mendfs_csum | passthrough_ll) ;;
	*) fail "--only: unknown subject $s" ;;
	esac
done
WORKLOADS=(seqwrite1 overwrite1 freshwrite1 randread1 create1 unlink1)
declare -A V=() # V[subject,workload,figure]: the rounds' values

up() { # up SUBJECT: mount it on $MNT, the daemon's pid in $DPID
	case $1 in
	mendfs | mendfs_uring | mendfs_csum)
		rm -f "$IMG"
		# shellcheck disable=SC2046 # -O data_csum or nothing
		mkfs_mendfs $([ "$1" = mendfs_csum ] && echo -O data_csum) \
			"$IMG" "$(($(numfmt --from=iec "$FSIZE") * 3 / 1048576))M"
		mount_fg "$([ "$1" = mendfs_uring ] && echo io_uring)"
		[ "$1" != mendfs_uring ] || [ "$(transport_of "$MNT")" = io_uring ] ||
			fail "mendfs_uring: the transport is $(transport_of "$MNT")"
		;;
	passthrough_ll)
		rm -rf "$WORK/src"
		mkdir "$WORK/src"
		"$WORK/passthrough_ll" -f -o source="$WORK/src",default_permissions "$MNT" 2>>"$LOG" &
		DPID=$!
		PIDS+=("$DPID")
		wait_mounted "$MNT"
		;;
	esac
}

down() {
	if [ "$1" = passthrough_ll ]; then
		timeout 30 umount "$MNT" || fail "umount"
		wait_gone "$DPID" 30 || fail "passthrough_ll did not exit"
	else
		umount_fg
	fi
}

ticks() { # utime + stime of process $1
	awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

sched() { # "WAIT_NS VOLUNTARY_SWITCHES" summed over the threads of $1
	local t w=0 s=0 a
	for t in /proc/"$1"/task/*; do
		read -r _ a _ <"$t/schedstat" 2>/dev/null || continue
		w=$((w + a))
		s=$((s + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null || echo 0)))
	done
	echo "$w $s"
}

# measure SUBJECT WORKLOAD RW FILE [BS_KIB]: one fio job of BS_KIB KiB ops
# (default 4), its figures into V
measure() {
	local s=$1 w=$2 out=$WORK/fio.txt t0 t1 w0 w1 s0 s1 ops secs app bs=${5:-4}
	local limit=(--runtime="$RUNTIME")
	[ "$bs" = 4 ] || limit=() # a laying-out pass: the whole file
	t0=$(ticks "$DPID")
	read -r w0 s0 < <(sched "$DPID")
	/usr/bin/time -f '%U %S' -o "$WORK/time.txt" \
		fio --name=j --filename="$MNT/$4" --rw="$3" --bs="${bs}k" --size="$FSIZE" \
		--ioengine=psync --direct=0 --fallocate=none "${limit[@]}" --minimal \
		--end_fsync="$([[ $3 == *write ]] && echo 1 || echo 0)" \
		>"$out" 2>"$out.err" || { cat "$out.err" >&2; fail "fio $3 on $s"; }
	t1=$(ticks "$DPID")
	read -r w1 s1 < <(sched "$DPID")
	# terse v3: 6/9 read KiB and ms, 47/50 write
	read -r ops secs < <(awk -F';' -v rw="$3" -v bs="$bs" 'END {
		if (rw ~ /read/) { kb = $6; ms = $9 } else { kb = $47; ms = $50 }
		printf "%d %.3f\n", kb / bs, ms / 1000 }' "$out")
	[ "${ops:-0}" -gt 0 ] || fail "fio $3 on $s: no operations"
	app=$(awk '{ print $1 + $2 }' "$WORK/time.txt")
	record "$s" "$w" "$ops" "$secs" "$app" $((t1 - t0)) $((w1 - w0)) $((s1 - s0))
}

# record SUBJECT WORKLOAD OPS SECONDS APP_CPU DAEMON_TICKS WAIT_NS SWITCHES: into V
record() {
	local s=$1 w=$2
	eval "$(awk -v n="$3" -v sec="$4" -v app="$5" -v dt="$6" -v hz="$TICK" \
		-v dw="$7" -v ds="$8" 'BEGIN {
		wall = sec * 1e6 / n; a = app * 1e6 / n; d = dt * 1e6 / hz / n
		printf "r_iops=%.0f r_wall=%.2f r_app=%.2f r_daemon=%.2f r_rest=%.2f r_wait=%.2f r_sw=%.2f\n",
			n / sec, wall, a, d, wall - a - d, dw / 1e3 / n, ds / n }')"
	local f
	for f in iops wall app daemon rest wait sw; do
		local v="r_$f"
		V[$s,$w,$f]+=" ${!v}"
	done
}

# measure_meta SUBJECT WORKLOAD PHASE: fs-meta-rates's PHASE on $MNT/meta
measure_meta() {
	local s=$1 w=$2 out=$WORK/meta.txt t0 t1 w0 w1 s0 s1 ops secs app
	t0=$(ticks "$DPID")
	read -r w0 s0 < <(sched "$DPID")
	/usr/bin/time -f '%U %S' -o "$WORK/time.txt" \
		"$WORK/fs-meta-rates" "$MNT/meta" "$NFILES" 600 "$3" >"$out" 2>"$out.err" ||
		{ cat "$out.err" >&2; fail "fs-meta-rates $3 on $s"; }
	[ "$3" != unlink ] || sleep 1
	t1=$(ticks "$DPID")
	read -r w1 s1 < <(sched "$DPID")
	read -r _ ops secs _ <"$out"
	[ "${ops:-0}" -eq "$NFILES" ] || fail "fs-meta-rates $3 on $s: ${ops:-no} files of $NFILES"
	app=$(awk '{ print $1 + $2 }' "$WORK/time.txt")
	record "$s" "$w" "$ops" "$secs" "$app" $((t1 - t0)) $((w1 - w0)) $((s1 - s0))
}

run_subject() {
	local s=$1
	up "$s"
	measure "$s" seqwrite1 write data 1024
	measure "$s" overwrite1 randwrite data
	truncate -s "$FSIZE" "$MNT/fresh"
	measure "$s" freshwrite1 randwrite fresh
	sync
	echo 3 >/proc/sys/vm/drop_caches
	measure "$s" randread1 randread data
	mkdir "$MNT/meta"
	measure_meta "$s" create1 create
	measure_meta "$s" unlink1 unlink
	down "$s"
}

median() {
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

if [ "$BUSY" = 1 ]; then
	sh -c 'while :; do :; done' &
	HOG=$!
fi
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < ${#SUBJECTS[@]}; i++)); do
		s=${SUBJECTS[(i + r) % ${#SUBJECTS[@]}]}
		echo "op-time: round $((r + 1))/$ROUNDS: $s ..." >&2
		run_subject "$s"
	done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

echo "where one synchronous operation's time goes (tests/bench/op-time.sh$([ "$BUSY" = 1 ] && echo ' --busy')), median of $ROUNDS rounds"
echo "commit:  $(git -C "$SRCROOT" rev-parse --short=12 HEAD) (build $BUILD)"
echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), kernel $(uname -r)"
echo "started: $START; load average before $LOAD0, after $LOAD1"
echo
echo "| workload | subject | ops/s | wall µs | app CPU µs | daemon CPU µs | rest µs | daemon run-queue wait µs | daemon switches |"
echo "|---|---|---|---|---|---|---|---|---|"
for w in "${WORKLOADS[@]}"; do
	for s in "${SUBJECTS[@]}"; do
		row="| $w | $s"
		for f in iops wall app daemon rest wait sw; do
			# shellcheck disable=SC2086 # the rounds' values, blank-separated
			row+=" | $(median ${V[$s,$w,$f]})"
		done
		echo "$row |"
	done
done
echo
echo "rounds (wall µs per op):"
for w in "${WORKLOADS[@]}"; do
	for s in "${SUBJECTS[@]}"; do
		echo "  $w $s:${V[$s,$w,wall]}"
	done
done
