#!/bin/bash
# SPDX-License-Identifier: MIT
#
# grow-test.sh NAME: `mendctl grow` ($MENDCTL) after the device grew.
#   image    an image file grown with truncate -s: mount and fsck.mendfs
#            refuse it and name `mendctl grow`; grow refuses (exit 1, the
#            image unchanged) a device that did not grow, grew too little,
#            or shrank, and a mounted one; grown from 64 MiB to 256 MiB
#            (then to 320 MiB: a second grow), fsck -n is clean (and finds
#            and rewrites a backup superblock zeroed at the new end), df shows
#            the new data zone, the files written before read back the same
#            (sha256sum), and a file 16 MiB larger than the old filesystem's
#            free space is written and read back (also after a remount).
#            Last, a filesystem killed while mounted (kill -9, after an
#            fsync) is grown: its journal is replayed, the fsynced file and
#            the others are intact, fsck -n is clean.
#   loop4k   the same growth on a loop device with 4 KiB logical blocks
#            (losetup -b 4096): its backing file grown, `losetup -c`, grow.
#   online   `mendctl grow MOUNTPOINT` (MENDFS_IOC_GROW): refused (exit 1,
#            with its message) when the device did not grow or grew too
#            little, as a user other than root, on a read-only mount and
#            past the daemon's reserved mapping (16 times the size at mount);
#            grown from 64 MiB to 256 MiB while a writer runs (it sees no
#            error), df shows the new size at once, a file 16 MiB larger
#            than the old free space is written, the old files are intact;
#            after umount fsck -n is clean, and a remount reads it all back.
#   online-kill  the daemon ends (_exit, as kill -9) after its Nth write of an
#            online growth (MENDFS_DEBUG_GROW_EXIT_AFTER=N), for N = 1, 2, ...
#            until a growth completes, each from the same image: each time
#            fsck -n accepts the image at the new size (clean, or with only
#            the new superblock's backup copy written: F0001) or, cut back,
#            at the old size; a mount of it reads the files back, and fsck -n
#            is clean after its umount at that size.
#   online-loop  online growth of a loop device (uring backend): its backing
#            file grown, `losetup -c`, `mendctl grow MOUNTPOINT`, more than the
#            old free space written, fsck -n clean, read back after a remount.
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no loop device);
# with MENDFS_TEST_STRICT=1 a skip fails.
set -u
. "$(dirname "$0")/lib.sh"

name=${1:?usage: grow-test.sh image|loop4k|online|online-kill|online-loop}
need_progs MENDFS MKFS_MENDFS MENDCTL FSCK_MENDFS
need_root_fuse
work_init grow
LOOP=
DEV=
mendctl() { timeout 120 "$MENDCTL" "$@"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() {
	[ -n "$LOOP" ] && { losetup -d "$LOOP" 2>/dev/null || echo "warning: losetup -d $LOOP failed" >&2; }
}

# fill: files of random data in $MNT (about 24 MiB), their sums in $WORK/sums
fill() {
	local i
	mkdir "$MNT/d" || fail "mkdir"
	for i in 1 2 3 4 5 6; do
		head -c $((i * 1100 * 1024 + 77)) /dev/urandom >"$MNT/d/f$i" || fail "write f$i"
	done
	for i in $(seq 1 200); do
		echo "small $i" >"$MNT/s$i" || fail "write s$i"
	done
	(cd "$MNT" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$WORK/sums" ||
		fail "sha256sum"
}

check_files() {
	(cd "$MNT" && sha256sum --quiet -c "$WORK/sums") || fail "files changed ($1)"
}

# oldfree DEVICE: free bytes of the (clean) filesystem, before a grow
oldfree() {
	echo $(($(mendctl --json show "$1" | field free_blocks) * 4096))
}

# grown DEVICE OLD_FREE_BYTES: after a grow, fsck clean, df the new size, files
# intact, 16 MiB more than the old filesystem had free written and read back
grown() {
	local dev=$1 old=$2 js blocks total
	"$FSCK_MENDFS" -n "$dev" >"$WORK/fsck" 2>&1 || fail "fsck -n after grow: $(cat "$WORK/fsck")"
	js=$(mendctl --json show "$dev") || fail "show after grow"
	blocks=$(field data_blocks <<<"$js")
	mount_fg
	total=$(stat -f -c %b "$MNT")
	[ "$total" = "$blocks" ] || fail "df: $total blocks, the superblock says $blocks"
	(($(stat -f -c %f "$MNT") * 4096 > old + (16 << 20))) ||
		fail "df: $(stat -f -c %f "$MNT") free blocks, not more than the old $old bytes"
	df -B1 "$MNT" | tail -1
	check_files "after grow"
	head -c $((old + (16 << 20))) /dev/urandom >"$WORK/big" || fail "random data"
	cp "$WORK/big" "$MNT/big" || fail "writing $((old + (16 << 20))) bytes after the grow"
	sync
	cmp "$WORK/big" "$MNT/big" || fail "the big file differs"
	umount_fg
	"$FSCK_MENDFS" -n "$dev" >"$WORK/fsck" 2>&1 || fail "fsck -n after writing: $(cat "$WORK/fsck")"
	mount_fg
	cmp "$WORK/big" "$MNT/big" || fail "the big file differs after a remount"
	check_files "after a remount"
	rm "$MNT/big"
	umount_fg
	rm -f "$WORK/big"
}

# refused WHAT PATTERN ARGS...: mendctl ARGS exits 1 with PATTERN on stderr, $IMG unchanged
refused() {
	local what=$1 pat=$2 sum out st
	shift 2
	sum=$(sha256sum <"$IMG")
	out=$(mendctl "$@" 2>&1)
	st=$?
	[ $st = 1 ] || fail "$what: exit $st, not 1: $out"
	grep -q "$pat" <<<"$out" || fail "$what: message: $out"
	[ "$(sha256sum <"$IMG")" = "$sum" ] || fail "$what: the image was written"
	echo "refused ($what): $out"
}

# online_refused WHAT PATTERN ARGS...: mendctl ARGS exits 1 with PATTERN on stderr
online_refused() {
	local what=$1 pat=$2 out st
	shift 2
	out=$(mendctl "$@" 2>&1)
	st=$?
	[ $st = 1 ] || fail "$what: exit $st, not 1: $out"
	grep -q "$pat" <<<"$out" || fail "$what: message: $out"
	echo "refused ($what): $out"
}

case $name in
image)
	mkfs_mendfs "$IMG" 64M
	mount_fg
	fill
	umount_fg
	step="refusals"
	refused "did not grow" "did not grow" grow "$IMG"
	out=$(mendctl --json grow "$IMG" 2>/dev/null)
	[ "$(field exit_code <<<"$out")" = 1 ] || fail "grow --json of a device that did not grow: $out"
	truncate -s $((64 + 2))M "$IMG"
	refused "grew too little" "too little" grow "$IMG"
	cp "$IMG" "$WORK/small" && truncate -s 48M "$WORK/small"
	out=$(mendctl grow "$WORK/small" 2>&1)
	[ $? = 1 ] || fail "shrunk: not exit 1: $out"
	grep -q "shrinking is not supported" <<<"$out" || fail "shrunk: $out"
	rm "$WORK/small"
	free0=$(oldfree "$IMG")
	truncate -s 256M "$IMG"
	out=$(timeout 30 "$MENDFS" -f "$IMG" "$MNT" 2>&1) && fail "mendfs mounted a grown device"
	grep -q "mendctl grow" <<<"$out" || fail "the mount's message does not name mendctl grow: $out"
	out=$("$FSCK_MENDFS" -n "$IMG" 2>&1) && fail "fsck passed a grown device"
	grep -q "mendctl grow" <<<"$out" || fail "fsck's message does not name mendctl grow: $out"
	step="grow"
	js=$(mendctl --json grow "$IMG") || fail "grow: $js"
	[ "$(field new_blocks <<<"$js")" = 65536 ] || fail "grow --json: $js"
	[ "$(field old_blocks <<<"$js")" = 16384 ] || fail "grow --json: $js"
	refused "grown already" "did not grow" grow "$IMG"
	grown "$IMG" "$free0"
	step="fsck of the grown layout"
	# the backup superblock belongs at the grown device's end: fsck finds it missing there
	dd if=/dev/zero of="$IMG" bs=4096 seek=65535 count=1 conv=notrunc status=none
	out=$("$FSCK_MENDFS" -n "$IMG" 2>&1)
	[ $? = 4 ] || fail "fsck -n of a grown image without its backup superblock: $out"
	grep -q "F0001" <<<"$out" || fail "fsck -n did not name the backup copy: $out"
	out=$("$FSCK_MENDFS" -y "$IMG" 2>&1)
	[ $? = 1 ] || fail "fsck -y: $out"
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || fail "fsck -n after -y: $(cat "$WORK/fsck")"
	cmp -s <(dd if="$IMG" bs=4096 count=1 status=none) \
		<(dd if="$IMG" bs=4096 skip=65535 count=1 status=none) ||
		fail "fsck -y did not rewrite the backup at the grown end"
	step="mounted"
	mount_fg
	truncate -s 320M "$IMG"
	refused "mounted" "in use" grow "$IMG"
	umount_fg
	step="second grow"
	free0=$(oldfree "$IMG")
	out=$(mendctl grow "$IMG") || fail "second grow: $out"
	echo "$out"
	grep -q "from 65536 to 81920 blocks" <<<"$out" || fail "second grow: $out"
	grown "$IMG" "$free0"
	step="after a crash"
	mount_fg
	head -c 3M /dev/urandom >"$MNT/late" || fail "write late"
	python3 -c "import os; os.fsync(os.open('$MNT/late', os.O_RDONLY))" || fail "fsync late"
	(cd "$MNT" && sha256sum late) >>"$WORK/sums"
	crash
	mendctl show "$IMG" | grep -q '^state: *not clean$' || fail "not dirty after kill -9"
	truncate -s 400M "$IMG"
	out=$(mendctl grow "$IMG") || fail "grow after a crash: $out"
	echo "$out"
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 ||
		fail "fsck -n after growing a crashed filesystem: $(cat "$WORK/fsck")"
	mount_fg
	check_files "grown after a crash"
	umount_fg
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || fail "fsck -n: $(cat "$WORK/fsck")"
	;;
loop4k)
	truncate -s 64M "$IMG"
	LOOP=$(losetup -f --show -b 4096 "$IMG" 2>"$WORK/losetup.log") ||
		skip "losetup -b 4096: $(cat "$WORK/losetup.log")"
	DEV=$LOOP
	[ "$(blockdev --getss "$DEV")" = 4096 ] || fail "$DEV: logical block size is not 4096"
	mkfs_mendfs "$DEV"
	mount_fg
	fill
	umount_fg
	step="refusal"
	out=$(mendctl grow "$DEV" 2>&1)
	[ $? = 1 ] || fail "grow of a loop device that did not grow: $out"
	step="grow"
	free0=$(oldfree "$DEV")
	truncate -s 256M "$IMG"
	losetup -c "$DEV" || fail "losetup -c"
	[ "$(blockdev --getsize64 "$DEV")" = $((256 << 20)) ] || fail "$DEV did not grow"
	out=$(mendctl grow "$DEV") || fail "grow $DEV: $out"
	echo "$out"
	grown "$DEV" "$free0"
	;;
online)
	mkfs_mendfs "$IMG" 64M
	chmod 755 "$WORK" # the unprivileged user's refusal goes through the mount
	mount_fg allow_other
	fill
	step="online refusals"
	online_refused "did not grow" "did not grow" grow "$MNT"
	truncate -s $((64 + 2))M "$IMG"
	online_refused "grew too little" "grew too little" grow "$MNT"
	out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$MENDCTL" grow "$MNT" 2>&1)
	st=$?
	[ $st = 1 ] || fail "grow as an unprivileged user: exit $st: $out"
	grep -q "only root" <<<"$out" || fail "grow as an unprivileged user: $out"
	echo "refused (not root): $out"
	out=$(mendctl grow "$WORK" 2>&1)
	[ $? = 1 ] && grep -q "not the mount point of a mendfs" <<<"$out" ||
		fail "grow of a directory not on mendfs: $out"
	echo "refused (not mendfs): $out"
	step="online grow under a writer"
	old=$(($(stat -f -c %f "$MNT") * 4096))
	truncate -s 256M "$IMG"
	(
		mkdir "$MNT/w" || exit 1
		for i in $(seq 1 100); do
			head -c 64K /dev/urandom >"$MNT/w/$i" || exit 1
			echo "line $i" >>"$MNT/w/log" || exit 1
			sleep 0.02
		done
	) &
	writer=$!
	sleep 0.3
	kill -0 "$writer" 2>/dev/null || fail "the writer ended before the grow began"
	js=$(mendctl --json grow "$MNT") || fail "online grow: $js"
	echo "$js"
	total=$(stat -f -c %b "$MNT")
	[ "$total" = "$(field data_blocks <<<"$js")" ] ||
		fail "df: $total blocks right after the grow, the grow says $(field data_blocks <<<"$js")"
	[ "$(field new_blocks <<<"$js")" = 65536 ] && [ "$(field old_blocks <<<"$js")" = 16384 ] &&
		[ "$(field mountpoint <<<"$js")" = "$MNT" ] || fail "grow --json: $js"
	wait "$writer" || fail "the writer failed during the online grow"
	[ "$(wc -l <"$MNT/w/log")" = 100 ] || fail "the writer's log has $(wc -l <"$MNT/w/log") lines"
	(($(stat -f -c %f "$MNT") * 4096 > old + (16 << 20))) ||
		fail "df: $(stat -f -c %f "$MNT") free blocks after the grow, old free $old bytes"
	df -B1 "$MNT" | tail -1
	head -c $((old + (16 << 20))) /dev/urandom >"$WORK/big" || fail "random data"
	cp "$WORK/big" "$MNT/big" || fail "writing $((old + (16 << 20))) bytes after the online grow"
	sync
	cmp "$WORK/big" "$MNT/big" || fail "the big file differs"
	check_files "after the online grow"
	(cd "$MNT" && sha256sum big w/*) >>"$WORK/sums"
	umount_fg
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || fail "fsck -n after the online grow: $(cat "$WORK/fsck")"
	mount_fg
	check_files "after a remount"
	rm -f "$MNT/big" "$WORK/big"
	umount_fg
	step="read-only mount"
	mount_fg ro
	truncate -s 300M "$IMG"
	online_refused "read-only" "read-only" grow "$MNT"
	umount_fg
	truncate -s 256M "$IMG"
	step="past the reservation"
	mount_fg
	truncate -s $((256 * 16 + 64))M "$IMG"
	online_refused "past the reservation" "room reserved at mount" grow "$MNT"
	truncate -s 256M "$IMG"
	umount_fg
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || fail "fsck -n at the end: $(cat "$WORK/fsck")"
	;;
online-kill)
	mkfs_mendfs "$IMG" 64M
	mount_fg
	fill
	umount_fg
	cp "$IMG" "$WORK/orig" || fail "copy"
	for ((n = 1; n <= 400; n++)); do
		step="killed after write $n"
		cp "$WORK/orig" "$IMG" || fail "copy"
		MENDFS_DEBUG_GROW_EXIT_AFTER=$n mount_fg
		truncate -s 128M "$IMG"
		out=$(mendctl grow "$MNT" 2>&1)
		if [ $? = 0 ]; then
			echo "grow completed with the exit set at write $n: $out"
			umount_fg
			break
		fi
		wait_gone "$DPID" 10 || fail "the daemon did not end after write $n ($out)"
		reap "$DPID" 2>/dev/null
		umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" || fail "removing the dead mount"
		# at the new size: clean, or the new superblock in its backup copy only (F0001)
		"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1
		st=$?
		if [ $st = 0 ]; then
			size=new
		elif [ $st = 4 ] && [ "$(grep -c '^F[0-9]' "$WORK/fsck")" = 1 ] &&
			grep -q '^F0001:.*backup copy is valid' "$WORK/fsck"; then
			size="new (backup superblock only)"
		else
			truncate -s 64M "$IMG"
			"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 ||
				fail "killed after write $n: neither the new nor the old filesystem: $(cat "$WORK/fsck")"
			size=old
		fi
		echo "killed after write $n: the $size filesystem"
		mount_fg
		check_files "killed after write $n"
		umount_fg
		"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 ||
			fail "killed after write $n, mounted: fsck -n: $(cat "$WORK/fsck")"
		[ "$size" = old ] && [ "$(mendctl --json show "$IMG" | field blocks)" != 16384 ] &&
			fail "killed after write $n: not the old size"
		[ "$size" != old ] && [ "$(mendctl --json show "$IMG" | field blocks)" != 32768 ] &&
			fail "killed after write $n: not the new size"
	done
	[ $n -gt 3 ] || fail "the growth completed after $n writes: the kill points were not reached"
	[ "$size" != old ] || fail "no kill point left the new filesystem"
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || fail "fsck -n at the end: $(cat "$WORK/fsck")"
	[ "$(mendctl --json show "$IMG" | field blocks)" = 32768 ] || fail "not grown at the end"
	;;
online-loop)
	truncate -s 64M "$IMG"
	LOOP=$(losetup -f --show "$IMG" 2>"$WORK/losetup.log") ||
		skip "losetup: $(cat "$WORK/losetup.log")"
	DEV=$LOOP
	mkfs_mendfs "$DEV"
	mount_fg
	fill
	step="online grow of a loop device"
	old=$(($(stat -f -c %f "$MNT") * 4096))
	online_refused "did not grow" "did not grow" grow "$MNT"
	truncate -s 256M "$IMG"
	losetup -c "$DEV" || fail "losetup -c"
	[ "$(blockdev --getsize64 "$DEV")" = $((256 << 20)) ] || fail "$DEV did not grow"
	out=$(mendctl grow "$MNT") || fail "grow $MNT: $out"
	echo "$out"
	grep -q "from 16384 to 65536 blocks" <<<"$out" || fail "grow: $out"
	(($(stat -f -c %f "$MNT") * 4096 > old + (16 << 20))) ||
		fail "df: $(stat -f -c %f "$MNT") free blocks after the grow, old free $old bytes"
	head -c $((old + (16 << 20))) /dev/urandom >"$WORK/big" || fail "random data"
	cp "$WORK/big" "$MNT/big" || fail "writing $((old + (16 << 20))) bytes after the online grow"
	sync
	cmp "$WORK/big" "$MNT/big" || fail "the big file differs"
	check_files "after the online grow"
	umount_fg
	"$FSCK_MENDFS" -n "$DEV" >"$WORK/fsck" 2>&1 || fail "fsck -n after the online grow: $(cat "$WORK/fsck")"
	mount_fg
	cmp "$WORK/big" "$MNT/big" || fail "the big file differs after a remount"
	check_files "after a remount"
	umount_fg
	;;
*)
	fail "unknown test $name"
	;;
esac
echo "ok: $name"
