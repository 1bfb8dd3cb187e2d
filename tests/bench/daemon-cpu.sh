#!/usr/bin/env bash
# What one fio job costs the mendfs daemon: throughput, and the daemon's CPU
# time, page faults and context switches for the job (perf stat on the daemon).
# CPU time and faults say much more than throughput on a busy machine.
# Not part of the test suite; needs root, /dev/fuse, fio and perf.
#
#   tests/bench/daemon-cpu.sh [options]
#     --build DIR     meson build tree with fs/fuse/mendfs and mkfs/mkfs.mendfs (default build)
#     --rw RW         fio --rw: read, write, randread, randwrite (default read)
#     --bs BS         fio --bs (default 1M)
#     --size SIZE     file size (default 1G; the image is 3 times as large)
#     --fresh         measure the first write of a new file (default: the file is
#                     written first, in the same mount, and the job rewrites it)
#     --remount       unmount and mount again between writing the file and the
#                     job (the daemon's mapping of the image starts empty, as when
#                     a file written in an earlier mount is read)
#     --opts OPTS     mendfs -o OPTS (e.g. writeback)
#     --mkfs-opts O   extra mkfs.mendfs options, split on blanks (e.g. '-O data_csum')
#     --rounds N      repeat N times, a new image each time (default 1)
#
# Reads drop the page cache first (the daemon must serve them).  Write jobs end
# with fsync, inside the measurement.  The image lives on /dev/shm.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build
RW=read
BS=1M
SIZE=1G
FRESH=0
REMOUNT=0
OPTS=
MKFS_OPTS=
ROUNDS=1
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift 2 ;;
	--rw) RW=$2; shift 2 ;;
	--bs) BS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--fresh) FRESH=1; shift ;;
	--remount) REMOUNT=1; shift ;;
	--opts) OPTS=$2; shift 2 ;;
	--mkfs-opts) MKFS_OPTS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done
for c in fio perf; do
	command -v $c >/dev/null || { echo "daemon-cpu: needs $c" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "daemon-cpu: needs root" >&2; exit 1; }

WORK=$(mktemp -d /dev/shm/daemon-cpu.XXXXXX)
IMG=$WORK/img
MNT=$WORK/mnt
mkdir -p "$MNT"
DPID=
cleanup() {
	set +e
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && { kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }
	rm -rf "$WORK"
}
trap cleanup EXIT

mount_it() {
	"$BUILD/fs/fuse/mendfs" -f ${OPTS:+-o "$OPTS"} "$IMG" "$MNT" 2>"$WORK/log" &
	DPID=$!
	for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
	mountpoint -q "$MNT" || { cat "$WORK/log" >&2; exit 1; }
}

bytes=$(numfmt --from=iec "$SIZE")
echo "daemon-cpu: $RW bs=$BS size=$SIZE fresh=$FRESH remount=$REMOUNT opts=${OPTS:-none} mkfs=${MKFS_OPTS:-none} build=$BUILD"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
	rm -f "$IMG" "$IMG.badblocks"
	# shellcheck disable=SC2086 # split on blanks, as documented
	"$BUILD/mkfs/mkfs.mendfs" -q -f $MKFS_OPTS "$IMG" $((bytes * 3 / 1048576))M
	mount_it
	if [ "$FRESH" = 0 ]; then
		fio --name=prep --filename="$MNT/f" --rw=write --bs=1M --size="$SIZE" \
			--ioengine=psync --end_fsync=1 >/dev/null
		if [ "$REMOUNT" = 1 ]; then
			umount "$MNT"
			wait "$DPID"
			mount_it
		fi
	fi
	case $RW in *read*) sync; echo 3 >/proc/sys/vm/drop_caches ;; esac
	perf stat -e task-clock,page-faults,context-switches -p "$DPID" -o "$WORK/stat" &
	PPID_=$!
	sleep 0.2
	out=$(fio --name=job --filename="$MNT/f" --rw="$RW" --bs="$BS" --size="$SIZE" \
		--ioengine=psync --end_fsync=1 --output-format=terse)
	kill -INT $PPID_
	wait $PPID_ 2>/dev/null || true
	echo "$out" | awk -F';' -v rw="$RW" '{
		if (rw ~ /read/) { bw = $7; iops = $8 } else { bw = $48; iops = $49 }
		printf "round: %.0f MiB/s, %d IOPS; ", bw / 1024, iops }'
	awk '/task-clock/ { printf "daemon %s ms CPU, ", $1 }
	     /page-faults/ { printf "%s page faults, ", $1 }
	     /context-switches/ { printf "%s context switches\n", $1 }' "$WORK/stat"
	umount "$MNT"
	wait "$DPID"
	DPID=
done
