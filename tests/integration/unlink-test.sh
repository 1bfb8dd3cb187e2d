#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Unlink on a real FUSE mount: `unlink-test.sh` with the built programs named
# by $MENDFS, $MKFS_MENDFS and $FSCK_MENDFS.
#
# The kernel has looked every file up (it knows their node ids: the daemon
# pins them), yet an unlink of a file nobody has open gives back its blocks
# and its inode before rm returns: statfs shows the free counts of before the
# file, immediately, for plain files, the last of two hard links, and a file
# renamed over.  Also while an O_PATH descriptor keeps the kernel's inode
# (no FORGET until it is closed, no OPEN either): the file is freed at the
# unlink all the same, fstat of the descriptor shows it with nlink 0 (as a
# local filesystem does), and reopening it through /proc/self/fd answers
# ENOENT or ESTALE, never data.  stat . in a removed working directory
# shows it with nlink 0 too.  A file open while unlinked keeps its blocks and stays
# readable until it is closed, then they come back.  The daemon logs no
# error, and fsck.mendfs -n after the unmount is clean.
#
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse).
set -eu
. "$(dirname "$0")/lib.sh"

name=unlink
need_progs MENDFS MKFS_MENDFS FSCK_MENDFS
need_root_fuse
need_cmds python3
work_init unlink

bfree() { stat -f -c %f "$MNT"; }
ffree() { stat -f -c %d "$MNT"; }
# counts WHAT BLOCKS INODES: statfs shows exactly BLOCKS free blocks and INODES free inodes
counts() {
	local b i
	b=$(bfree)
	i=$(ffree)
	[ "$b" = "$2" ] && [ "$i" = "$3" ] ||
		fail "$1: $b free blocks and $i free inodes, expected $2 and $3"
}
# mkdata FILE BLOCKS: FILE with BLOCKS 4 KiB blocks of data, looked up by the kernel
mkdata() {
	head -c $(($2 * 4096)) /dev/urandom >"$1" || fail "write $1"
	stat "$1" >/dev/null
}

mkfs_mendfs -f "$IMG" 64M
mount_fg

step="plain files"
b0=$(bfree) i0=$(ffree)
for i in $(seq 1 20); do
	mkdata "$MNT/f$i" 4
done
counts "after 20 creates" $((b0 - 80)) $((i0 - 20))
for i in $(seq 1 20); do
	rm "$MNT/f$i" || fail "rm f$i"
	counts "right after rm f$i" $((b0 - 80 + i * 4)) $((i0 - 20 + i))
done

step="hard links"
mkdata "$MNT/h" 3
ln "$MNT/h" "$MNT/h2" || fail "ln"
stat "$MNT/h2" >/dev/null
rm "$MNT/h" || fail "rm h"
counts "one link left" $((b0 - 3)) $((i0 - 1))
cmp -s "$MNT/h2" <(cat "$MNT/h2") || fail "h2 unreadable"
rm "$MNT/h2" || fail "rm h2"
counts "both links gone" "$b0" "$i0"

step="rename over"
mkdata "$MNT/a" 2
mkdata "$MNT/b" 5
counts "a and b" $((b0 - 7)) $((i0 - 2))
mv -f "$MNT/a" "$MNT/b" || fail "mv a b"
counts "b replaced" $((b0 - 2)) $((i0 - 1))
[ "$(stat -c %s "$MNT/b")" = 8192 ] || fail "b is not the old a"
rm "$MNT/b" || fail "rm b"
counts "b gone" "$b0" "$i0"

step="O_PATH held"
mkdata "$MNT/p" 6
python3 - "$MNT/p" "$b0" "$i0" <<'PY' || fail "see above"
import errno, os, sys
path, b0, i0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_PATH)
before = os.fstat(fd)
os.unlink(path)
sv = os.statvfs(os.path.dirname(path))
if (sv.f_bfree, sv.f_ffree) != (b0, i0):
    sys.exit(f"O_PATH held: {sv.f_bfree} free blocks, {sv.f_ffree} free inodes right after the "
             f"unlink, expected {b0} and {i0}")
# fstat of the descriptor still works, as on a local filesystem: nlink 0
st = os.fstat(fd)
if (st.st_nlink, st.st_mode, st.st_uid, st.st_ino) != (0, before.st_mode, before.st_uid,
                                                       before.st_ino):
    sys.exit(f"O_PATH held: fstat after the unlink: nlink {st.st_nlink} mode {st.st_mode:o} "
             f"ino {st.st_ino}, expected 0, {before.st_mode:o}, {before.st_ino}")
try:
    os.close(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY))
    sys.exit("O_PATH held: the freed file opened again")
except OSError as e:
    if e.errno not in (errno.ENOENT, errno.ESTALE):
        sys.exit(f"O_PATH held: reopening the freed file: {e}")
os.close(fd)
PY
counts "O_PATH closed" "$b0" "$i0"

step="removed working directory"
mkdir "$MNT/cwd"
# stat . in a working directory removed from under it: nlink 0, not ENOENT
links=$(cd "$MNT/cwd" && rmdir "$MNT/cwd" && stat -c '%h %F' .) ||
	fail "stat of a removed working directory failed"
[ "$links" = "0 directory" ] || fail "a removed working directory: '$links', expected '0 directory'"
counts "removed working directory" "$b0" "$i0"

step="open while unlinked"
mkdata "$MNT/o" 8
sum=$(sha256sum <"$MNT/o")
exec 3<"$MNT/o"
rm "$MNT/o" || fail "rm o"
counts "o unlinked, open" $((b0 - 8)) $((i0 - 1))
[ "$(sha256sum <&3)" = "$sum" ] || fail "content of the unlinked open file"
[ ! -e "$MNT/o" ] || fail "o still has a name"
exec 3<&-
# the kernel sends RELEASE after close() has returned: a moment
for ((i = 0; i < 100; i++)); do
	[ "$(bfree)" = "$b0" ] && [ "$(ffree)" = "$i0" ] && break
	sleep 0.05
done
counts "o closed" "$b0" "$i0"

step="many at once"
mkdir "$MNT/d"
for i in $(seq 1 200); do
	echo "$i" >"$MNT/d/$i"
done
ls -l "$MNT/d" >/dev/null
rm -r "$MNT/d" || fail "rm -r d"
counts "d removed" "$b0" "$i0"

step="fsck"
umount_fg
if grep -i "error\|orphan" "$LOG"; then
	fail "the daemon logged the lines above"
fi
"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || { cat "$WORK/fsck" >&2; fail "fsck.mendfs -n"; }
echo "unlink: pass"
