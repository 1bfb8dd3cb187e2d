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
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no loop device);
# with MENDFS_TEST_STRICT=1 a skip fails.
set -u
. "$(dirname "$0")/lib.sh"

name=${1:?usage: grow-test.sh image|loop4k}
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
*)
	fail "unknown test $name"
	;;
esac
echo "ok: $name"
