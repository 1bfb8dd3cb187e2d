#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The filesystem on real block devices through the uring backend (O_DIRECT):
# `blockdev-test.sh NAME` runs one test against the built $MENDFS and
# $MKFS_MENDFS.
#   zram-uring     a zram device (4 KiB logical blocks; it must only ever be
#                  given page-aligned memory)
#   loop4k-uring   a loop device with 4 KiB logical blocks (losetup -b 4096)
#   loop8k-refused a loop device with 8 KiB logical blocks: mkfs.mendfs and
#                  mendfs refuse it with a message naming the block size
# The first two: mkfs, mount -o backend=uring, write 64 MiB of random data
# (and a file of an odd size), sync, drop the page cache, compare; unmount,
# mount again, compare; the daemon must live through it all and exit 0.
#
# The zram device is a fresh one from /sys/class/zram-control/hot_add (so a
# test using /dev/zram0 meanwhile is not disturbed), else /dev/zram0 when it
# is unused (disksize 0).  Exit 0 pass, 1 fail, 77 skip when a device cannot
# be set up (not root, no /dev/fuse, no zram, no loop device, a kernel
# without 8 KiB loop blocks); with MENDFS_TEST_STRICT=1 those fail instead.
# Every mount, daemon, zram device and loop device made here is undone on
# exit, whatever happened, and every wait is bounded.
set -u
. "$(dirname "$0")/lib.sh"

name=${1:?usage: blockdev-test.sh zram-uring|loop4k-uring|loop8k-refused}
need_progs MENDFS MKFS_MENDFS
need_root_fuse
work_init bdev
LOOPS=()
ZRAM_ID=       # the zram device number we set up
ZRAM_ADDED=0   # 1: made by hot_add (removed on exit), 0: /dev/zram0 (reset on exit)
DEV=

# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() {
	local l i
	for l in "${LOOPS[@]}"; do
		losetup -d "$l" 2>/dev/null || echo "warning: losetup -d $l failed" >&2
	done
	if [ -n "$ZRAM_ID" ]; then
		# the device may stay busy for a moment after the daemon's exit
		for ((i = 0; i < 50; i++)); do
			echo 1 >"/sys/block/zram$ZRAM_ID/reset" 2>/dev/null && break
			sleep 0.1
		done
		((i < 50)) || echo "warning: cannot reset zram$ZRAM_ID" >&2
		if [ "$ZRAM_ADDED" = 1 ]; then
			echo "$ZRAM_ID" >/sys/class/zram-control/hot_remove 2>/dev/null ||
				echo "warning: cannot remove zram$ZRAM_ID" >&2
		fi
	fi
}

# setup_zram: a 256 MiB zram device in $DEV
setup_zram() {
	local id
	if [ -r /sys/class/zram-control/hot_add ]; then
		id=$(cat /sys/class/zram-control/hot_add 2>/dev/null) && [ -n "$id" ] && {
			ZRAM_ID=$id
			ZRAM_ADDED=1
		}
	fi
	if [ -z "$ZRAM_ID" ]; then
		[ -e /sys/block/zram0/disksize ] || skip "no zram device (modprobe zram)"
		[ "$(cat /sys/block/zram0/disksize)" = 0 ] || skip "/dev/zram0 is in use"
		ZRAM_ID=0
	fi
	[ -b "/dev/zram$ZRAM_ID" ] || skip "/dev/zram$ZRAM_ID did not appear"
	echo 256M >"/sys/block/zram$ZRAM_ID/disksize" 2>/dev/null ||
		skip "cannot size zram$ZRAM_ID"
	DEV=/dev/zram$ZRAM_ID
}

# setup_loop BLOCKSIZE: a loop device over a 256 MiB sparse image in $DEV
setup_loop() {
	truncate -s 256M "$IMG" || fail "cannot create the image"
	DEV=$(losetup -f --show -b "$1" "$IMG" 2>"$WORK/losetup.log") ||
		skip "losetup -b $1: $(cat "$WORK/losetup.log")"
	LOOPS+=("$DEV")
}

# check_lbs SIZE: the device really has SIZE-byte logical blocks
check_lbs() {
	local lbs
	lbs=$(cat "/sys/block/$(basename "$DEV")/queue/logical_block_size")
	[ "$lbs" = "$1" ] || skip "$DEV has $lbs-byte logical blocks, not $1"
}

mount_uring() {
	mount_fg backend=uring
}

alive() {
	kill -0 "$DPID" 2>/dev/null || fail "the daemon died ($1)"
	mountpoint -q "$MNT" || fail "the mount is gone ($1)"
}

# compare WHAT: the files read back equal what was written
compare() {
	cmp "$WORK/src" "$MNT/big" || fail "64 MiB file differs ($1)"
	cmp "$WORK/odd" "$MNT/odd" || fail "odd-sized file differs ($1)"
	alive "$1"
}

roundtrip() {
	mkfs_mendfs "$DEV"
	head -c 64M /dev/urandom >"$WORK/src" || fail "random data"
	head -c 1234567 /dev/urandom >"$WORK/odd" || fail "random data"
	mount_uring
	cp "$WORK/src" "$MNT/big" || fail "write 64 MiB"
	cp "$WORK/odd" "$MNT/odd" || fail "write the odd-sized file"
	sync || fail "sync"
	alive "after the writes"
	echo 3 >/proc/sys/vm/drop_caches
	compare "after drop_caches"
	# read again in small pieces at odd offsets (other request sizes and buffers)
	dd if="$MNT/big" bs=12k skip=3 count=700 status=none >"$WORK/part" ||
		fail "dd of a part"
	dd if="$WORK/src" bs=12k skip=3 count=700 status=none | cmp - "$WORK/part" ||
		fail "a part read with 12 KiB reads differs"
	alive "after the partial reads"
	umount_fg
	mount_uring
	compare "after umount and mount"
	umount_fg
}

case $name in
zram-uring)
	setup_zram
	check_lbs 4096
	roundtrip
	;;
loop4k-uring)
	setup_loop 4096
	check_lbs 4096
	roundtrip
	;;
loop8k-refused)
	setup_loop 8192
	check_lbs 8192
	out=$("$MKFS_MENDFS" -q "$DEV" 2>&1)
	st=$?
	[ $st = 1 ] || fail "mkfs.mendfs on 8 KiB blocks: status $st, not 1 ($out)"
	grep -q "logical block size 8192" <<<"$out" || fail "mkfs.mendfs message: '$out'"
	out=$(timeout 20 "$MENDFS" -o backend=uring "$DEV" "$MNT" 2>&1)
	st=$?
	[ $st = 1 ] || fail "mendfs on 8 KiB blocks: status $st, not 1 ($out)"
	grep -q "logical block size 8192" <<<"$out" || fail "mendfs message: '$out'"
	mountpoint -q "$MNT" && fail "mounted a device with 8 KiB blocks"
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac
exit 0
