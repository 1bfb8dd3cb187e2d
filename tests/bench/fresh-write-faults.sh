#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Page faults of the daemon per 4 KiB write into fresh space (docs/benchmarks/engine.md,
# "No page fault per write"): mounts a fresh 1 GiB image on tmpfs with BUILD's
# daemon, runs fio (4 KiB random write, psync, NJOBS jobs of one fresh 256 MiB
# file each, end_fsync) and prints its IOPS and the page faults the daemon's
# threads took (perf stat -e page-faults: exceptions only, not the pages
# madvise populates).  Needs root, fio and perf.
#
#   tests/bench/fresh-write-faults.sh BUILD NJOBS
set -u
B=${1:?usage: fresh-write-faults.sh BUILD NJOBS}; NJ=${2:?usage: fresh-write-faults.sh BUILD NJOBS}
W=$(mktemp -d /dev/shm/mendfs-faults.XXXXXX); mkdir "$W/m"
trap 'mountpoint -q "$W/m" && umount "$W/m"; rm -rf "$W"' EXIT
$B/mkfs/mkfs.mendfs -q -f $W/img 1G
$B/fs/fuse/mendfs -f $W/img $W/m 2>$W/log & DP=$!
for i in $(seq 50); do mountpoint -q $W/m && break; sleep 0.1; done
perf stat -e page-faults,task-clock -p $DP -o $W/stat &
PP=$!; sleep 0.3
fio --name=rw --directory=$W/m --rw=randwrite --bs=4k --size=256M --numjobs=$NJ --group_reporting --ioengine=psync --direct=0 --fallocate=none --runtime=10 --end_fsync=1 --minimal > $W/out 2>$W/err
kill -INT $PP; wait $PP
iops=$(awk -F';' '{print $49}' $W/out)
pf=$(awk '/page-faults/ {gsub(",","",$1); print $1}' $W/stat)
echo "jobs=$NJ iops=$iops page-faults=$pf"
umount "$W/m"; wait $DP
