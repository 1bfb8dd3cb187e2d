#!/bin/bash
# SPDX-License-Identifier: MIT
#
# POSIX behaviour and data-integrity tests on real FUSE mounts:
# `posix-test.sh NAME [SECONDS]` runs one test against the built programs named
# by $MENDFS, $MKFS_MENDFS, $POSIX (posix.c) and $FSX (fsx.c):
#
#   posix   error cases, links, rename, sparse/fallocate, xattrs, concurrent
#           writers and namespace races,
#           permission rules as nobody (setpriv), a file beyond 4 GiB and
#           data that must survive unmount/remount
#   many    100 000 files in one directory
#   seekdir telldir/seekdir at every entry
#   enospc  fill a small filesystem (blocks, then inodes), delete, write
#           again, remount
#   enospc-concurrent  on 256 MiB: writer, fallocate and namespace loops at
#           once near full must never see ENOSPC ($ENOSPC, enospc.c), a genuine
#           fill must; then fsck.mendfs -n ($FSCK_MENDFS) is clean
#   fhandle file handles ($FHANDLE, fhandle.c): reopened after drop_caches
#           and a remount, ESTALE only for deleted files and directories
#   fsx     seeded random operations mirrored on /dev/shm for SECONDS
#           (default 30; $FSX_SEED picks the seed), remounting at intervals
#
# $MENDFS_OPTS adds mount options (e.g. writeback) to every mount.
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse).  Mounts are undone
# on exit whatever happened, and every wait is bounded.
set -eu
. "$(dirname "$0")/lib.sh"

name=${1:?usage: posix-test.sh NAME [SECONDS]}
need_progs MENDFS MKFS_MENDFS POSIX FSX
need_root_fuse
work_init px
chmod 755 "$WORK" # nobody must reach the mount point
SHM=""
# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() { [ -z "$SHM" ] || rm -rf "$SHM"; }

# mkfs SIZE [INODES]
mkfs() {
	mkfs_mendfs -f ${2:+-N "$2"} "$IMG" "$1"
}

mount_fs() {
	mount_fg "allow_other${MENDFS_OPTS:+,$MENDFS_OPTS}"
}

remount() {
	umount_fg
	mount_fs
}

# px CHECK [ARG]: run a posix.c check as root
px() {
	timeout "${PX_TIMEOUT:-120}" "$POSIX" "$1" "$MNT" ${2:+"$2"} >"$WORK/px.out" 2>&1 ||
		{ cat "$WORK/px.out"; fail "posix $1"; }
	tail -1 "$WORK/px.out"
}

case $name in
posix)
	mkfs 256M
	mount_fs
	other=$(mktemp -d /dev/shm/mendfs-px.XXXXXX)
	SHM=$other
	px errors "$other"
	px links
	px rename
	px sparse
	px xattr
	px times
	px readdir
	px concurrent
	px concurrent-ns
	px mmap
	px perm-prep
	timeout 60 setpriv --reuid=nobody --regid=nogroup --clear-groups \
		--inh-caps=-all --bounding-set=-all "$POSIX" perm "$MNT" >"$WORK/px.out" 2>&1 ||
		{ cat "$WORK/px.out"; fail "posix perm (as nobody)"; }
	tail -1 "$WORK/px.out"
	px perm-root
	px large
	px persist
	remount
	px large-verify
	px persist-verify
	px concurrent-ns verify
	umount_fg
	;;
seekdir)
	# regression: cookies with bit 63 set could not be seeked to (check_seekdir)
	mkfs 64M
	mount_fs
	px seekdir
	umount_fg
	;;
many)
	mkfs 1G 120000
	mount_fs
	PX_TIMEOUT=150 px many 100000
	umount_fg
	;;
enospc)
	mkfs 64M
	mount_fs
	px enospc
	remount
	px enospc
	umount_fg
	mkfs 64M 3000
	mount_fs
	px enospc-inodes
	remount
	px enospc-inodes
	umount_fg
	;;
enospc-concurrent)
	need_progs ENOSPC FSCK_MENDFS
	mkfs 256M
	mount_fs
	# with -o writeback a closed file's RELEASE may wait behind queued
	# writeback, so three big files may be in use at once (enospc.c)
	if [[ ",${MENDFS_OPTS:-}," == *,writeback,* ]]; then size="64 3"; else size="80 2"; fi
	# shellcheck disable=SC2086 # two words on purpose
	timeout 100 "$ENOSPC" "$MNT" 15 $size >"$WORK/px.out" 2>&1 ||
		{ cat "$WORK/px.out"; fail "enospc"; }
	cat "$WORK/px.out"
	umount_fg
	rc=0
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck.out" 2>&1 || rc=$?
	[ "$rc" = 0 ] || { cat "$WORK/fsck.out"; fail "fsck.mendfs -n after the run: exit $rc"; }
	;;
fhandle)
	# file handles ($FHANDLE, fhandle.c) across drop_caches and a remount;
	# 64 inodes, so that a freed inode number comes round again soon
	need_progs FHANDLE
	mkfs 64M 64
	mount_fs
	rc=0
	timeout 60 "$FHANDLE" make "$MNT" "$WORK/handles" >"$WORK/px.out" 2>&1 || rc=$?
	[ "$rc" = 77 ] && skip "fhandle: $(cat "$WORK/px.out")"
	[ "$rc" = 0 ] || { cat "$WORK/px.out"; fail "fhandle make"; }
	tail -1 "$WORK/px.out"
	remount
	timeout 60 "$FHANDLE" check "$MNT" "$WORK/handles" >"$WORK/px.out" 2>&1 ||
		{ cat "$WORK/px.out"; fail "fhandle check"; }
	tail -1 "$WORK/px.out"
	umount_fg
	;;
fsx)
	secs=${2:-30}
	mkfs 256M
	mount_fs
	SHM=$(mktemp -d /dev/shm/mendfs-fsx.XXXXXX)
	# fsx calls this to remount between phases (all its files closed)
	cat >"$WORK/remount.sh" <<-EOF2
		#!/bin/bash
		set -eu
		timeout 30 umount "$MNT"
		timeout 30 flock -x "$IMG" true
		"$MENDFS" -o "allow_other${MENDFS_OPTS:+,$MENDFS_OPTS}" "$IMG" "$MNT" 2>>"$WORK/log"
	EOF2
	chmod +x "$WORK/remount.sh"
	# the first daemon runs in the foreground; after the first remount the
	# daemon is a detached one, so cleanup relies on umount (flock waits it out)
	timeout $((secs + 120)) "$FSX" -d "$secs" ${FSX_SEED:+-s "$FSX_SEED"} \
		-r "$WORK/remount.sh" "$MNT" "$SHM" || fail "fsx"
	timeout 30 umount "$MNT" || fail "umount"
	timeout 30 flock -x "$IMG" true || fail "the daemon still holds the image"
	reap "$DPID" || true # the first daemon, long gone
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac
echo "ok $name"
exit 0
