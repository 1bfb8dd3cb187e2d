#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Permission semantics measured against ext4: `perm-test.sh NAME` runs the
# same operations, as root and as unprivileged users (setpriv), on a
# loop-mounted ext4 image and on a mendfs mount, and requires the same
# outcome on both: every result, every mode (fresh and as the kernel has it
# cached) and every ACL (getfacl).  A few outcomes are also asserted outright,
# so a reference that behaves oddly cannot pass unnoticed.
#
#   suid  setuid/setgid after writes (buffered, O_DIRECT, mmap), truncate
#         (truncate, ftruncate, O_TRUNC), fallocate, copy_file_range and
#         chown, by root, the owner and others, in and out of the file's group
#   acl   POSIX ACLs: access ACLs enforced (allow_other mount, read as
#         nobody), default ACLs inherited by files, directories, nodes,
#         chmod and the ACL mask kept in step, setgid dropped by setfacl
#
# mendfs is mounted with allow_other,suid,timeout=86400 (plus $MENDFS_OPTS,
# e.g. writeback): with a day of attribute caching nothing the kernel caches
# expires during the test, so a stale mode or ACL in the kernel shows.
# Needs root, /dev/fuse, a loop device, mkfs.ext4, setfacl/getfacl and
# setpriv; without them the test is skipped (exit 77), or fails when
# MENDFS_TEST_STRICT=1.  Mounts and loop devices are undone on exit.
# $PERM_TEST_KEEP names a directory to keep both outputs in (ext4.out,
# mendfs.out).
set -eu
. "$(dirname "$0")/lib.sh"

name=${1:?usage: perm-test.sh suid|acl}
need_progs MENDFS MKFS_MENDFS PERM_OP
need_root_fuse
need_cmds mkfs.ext4 losetup setfacl getfacl setpriv
work_init perm
chmod 755 "$WORK" # the unprivileged users must reach both mounts
REF=$WORK/ref
mkdir -p "$REF"
UNMOUNT=("$REF")

mount_mendfs() {
	mount_fg "allow_other,suid,timeout=86400${MENDFS_OPTS:+,$MENDFS_OPTS}"
}

# The reference: ext4 (POSIX ACLs on by default) on a loop device.
truncate -s 64M "$WORK/ext4.img"
mkfs.ext4 -q -F "$WORK/ext4.img" >"$WORK/mkfs-ext4.log" 2>&1 ||
	{ cat "$WORK/mkfs-ext4.log" >&2; fail "mkfs.ext4"; }
mount -o loop "$WORK/ext4.img" "$REF" 2>"$WORK/mount-ext4.log" ||
	skip "cannot loop-mount ext4: $(cat "$WORK/mount-ext4.log")"
mkfs_mendfs -f "$IMG" 64M
mount_mendfs

# Users: the file owner 1001 (group 1001), another user 1002, and group 1003,
# the group of the files; "+g" users also belong to group 1003.
declare -A WHO=([root]="" [owner]="1001 1001 -" [owner+g]="1001 1001 1003"
	[other]="1002 1002 -" [other+g]="1002 1002 1003" [nobody]="65534 65534 -")

# as USER CMD...: run CMD as USER without capabilities
as() {
	local who=$1 u g grp
	shift
	if [ "$who" = root ]; then
		"$@"
		return
	fi
	read -r u g grp <<<"${WHO[$who]}"
	if [ "$grp" = - ]; then
		setpriv --reuid="$u" --regid="$g" --clear-groups --inh-caps=-all \
			--bounding-set=-all "$@"
	else
		setpriv --reuid="$u" --regid="$g" --groups="$grp" --inh-caps=-all \
			--bounding-set=-all "$@"
	fi
}

op() {
	"$PERM_OP" "$@"
}

# fresh FILE MODE [UID GID]: a new 2-byte file (owner 1001:1003 by default)
fresh() {
	op mk "$1" "$2" "${3:-1001}" "${4:-1003}" || fail "cannot make $1"
}

suid_cases() {
	local m who o r f=x
	# a readable source on the same filesystem for copy_file_range
	printf 'cc' >src
	chmod 644 src
	for m in 6757 6755 2757 2747 2745 4646; do
		for who in root owner owner+g other other+g; do
			for o in append dio mmap "ftruncate 1" "truncate 1" otrunc fallocate \
				"copy src"; do
				fresh "$f" "$m"
				# shellcheck disable=SC2086
				r=$(as "$who" "$PERM_OP" ${o%% *} "$f" ${o#* })
				echo "$m $who $r $(op mode "$f")"
			done
		done
	done
	# the case of the report: root's 6757 file appended to by another user
	fresh "$f" 6757 0 0
	echo "root's 6757 other $(as other "$PERM_OP" append "$f") $(op mode "$f")"
	# chown and chgrp: by root (always), by the owner (into a group of its own,
	# or chown(f, -1, -1)).  Not chown(f, -1, -1) by root: ext4 clears setuid
	# there, mendfs cannot tell it from a write by root that drops
	# security.capability (docs/design/daemon.md §4).
	for m in 6757 6755 2757 2747 2745 4646; do
		for o in "1002 -1" "-1 1002" "1001 1003"; do
			fresh "$f" "$m"
			# shellcheck disable=SC2086
			echo "$m root $(op chown "$f" $o) $o: $(op mode "$f")"
		done
		for who in owner owner+g; do
			for o in "-1 1001" "-1 -1"; do
				fresh "$f" "$m"
				# shellcheck disable=SC2086
				echo "$m $who $(as "$who" "$PERM_OP" chown "$f" $o) $o: $(op mode "$f")"
			done
		done
	done
	# directories keep their setgid bit on chown
	mkdir -m 2775 dir
	chown 1001:1003 dir
	chown 1002:1002 dir
	echo "dir 2775 root chown: $(op mode dir)"
	rmdir dir
	rm -f "$f" src
}

show() {
	echo "-- $1: $(stat -c '%A %a %u:%g' "$1") $(op xattrs "$1")"
	getfacl -pn "$1" 2>&1 | grep -v '^$' || true
}

# try USER OP FILE: one line with the result of OP (read/append) as USER
try() {
	echo "$1 $2 $3: $(as "$1" "$PERM_OP" "$2" "$3" | cut -d' ' -f2)"
}

# setfacl as USER (root if none), its status on one line
sfacl() {
	local who=root
	if [ "$1" = -u ]; then
		who=$2
		shift 2
	fi
	echo "setfacl $* as $who: $(as "$who" setfacl "$@" >/dev/null 2>&1 && echo ok || echo fails)"
}

acl_cases() {
	umask 022
	# access ACLs on files of root, read by nobody (a named user entry)
	printf 'secret\n' >a1
	chmod 600 a1
	try nobody read a1
	sfacl -m u:65534:r a1
	show a1
	try nobody read a1
	try other read a1
	printf 'public\n' >a2
	chmod 644 a2
	sfacl -m u:65534:--- a2
	show a2
	try nobody read a2
	try other read a2
	# a named group entry; the mask limits named entries
	printf 'group\n' >a3
	chmod 600 a3
	sfacl -m g:65534:r a3
	try nobody read a3
	printf 'mask\n' >a4
	chmod 666 a4
	sfacl -m u:65534:rw,m::r a4
	show a4
	try nobody read a4
	try nobody append a4
	# chmod moves the mask (the group class), setfacl moves the mode
	chmod 600 a1
	show a1
	try nobody read a1
	chmod 640 a1
	show a1
	try nobody read a1
	sfacl -m m::rwx a1
	show a1
	sfacl -m u::r,o::r a1
	show a1
	chmod 2750 a1
	show a1
	sfacl -x u:65534 a1
	show a1
	sfacl -b a2
	show a2
	try nobody read a2
	# an ACL equal to a mode is no ACL: no xattr, the mode changes
	printf 'equiv\n' >a5
	sfacl --set u::rw,g::r,o::- a5
	show a5
	# ownership and validity: only the owner sets ACLs; no default ACL on a file
	sfacl -u other -m u:1002:rw a2
	sfacl -d -m u:65534:r a2
	echo "raw ACL of version 3: $(op setxattr a2 03000000010006000000000004000400000000002000040000000000)"
	# setfacl drops setgid when the caller is not in the file's group
	fresh a6 2775
	sfacl -u owner -m u:1002:r a6
	show a6
	fresh a7 2775
	sfacl -u owner+g -m u:1002:r a7
	show a7

	# default ACLs: inherited by new files, directories and nodes, umask ignored
	mkdir d1
	sfacl -d -m u:65534:rwx,g::rx,o::- d1
	sfacl -m u:65534:rx d1
	show d1
	touch d1/f
	(umask 077 && touch d1/g && mkdir d1/sub && mknod d1/fifo p)
	ln -s f d1/ln
	show d1/f
	show d1/g
	show d1/sub
	show d1/fifo
	echo "-- d1/ln: $(stat -c '%A' d1/ln) $(op xattrs d1/ln)"
	mkdir -m 700 d1/sub/deep
	touch d1/sub/deep/f
	show d1/sub/deep
	show d1/sub/deep/f
	try nobody read d1/f
	# a default ACL of base entries only: the mode comes from it, no access ACL
	mkdir d2
	sfacl -d --set u::rwx,g::rx,o::r d2
	(umask 077 && touch d2/f && mkdir d2/sub)
	show d2/f
	show d2/sub
	# without a default ACL the umask applies
	mkdir d3
	(umask 027 && touch d3/f && mkdir d3/sub)
	show d3/f
	show d3/sub
	# a setgid directory with a default ACL, written by a user outside its group
	mkdir -m 2777 d4
	chgrp 1003 d4
	sfacl -d -m g:1003:rwx d4
	as other mkdir d4/x
	as other touch d4/y
	show d4/x
	show d4/y
	# removing the default ACL stops inheritance
	sfacl -k d1
	touch d1/h
	show d1
	show d1/h
	# for the remount: readable and unreadable by nobody through their ACLs
	printf 'r1\n' >r1
	chmod 600 r1
	printf 'r2\n' >r2
	sfacl -m u:65534:r r1
	sfacl -m u:65534:- r2
}

run_cases() {
	(
		cd "$1"
		rm -rf t
		mkdir -m 755 t
		cd t
		"${name}_cases"
	) 2>&1
}

case $name in
suid | acl)
	run_cases "$REF" >"$WORK/ext4.out"
	run_cases "$MNT" >"$WORK/mendfs.out"
	# $PERM_TEST_KEEP: a directory to keep both outputs in
	[ -n "${PERM_TEST_KEEP:-}" ] && cp "$WORK/ext4.out" "$WORK/mendfs.out" "$PERM_TEST_KEEP/"
	if ! diff -u "$WORK/ext4.out" "$WORK/mendfs.out" >"$WORK/diff"; then
		cat "$WORK/diff"
		fail "mendfs differs from ext4 (- ext4, + mendfs)"
	fi
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac

# What the reference itself must show.
want() {
	grep -qxF -- "$1" "$WORK/mendfs.out" || { cat "$WORK/mendfs.out"; fail "expected the line '$1'"; }
}
case $name in
suid)
	want "6757 other append ok cached 757 stat 757"
	want "6757 other dio ok cached 757 stat 757"
	want "6757 owner append ok cached 757 stat 757"
	want "6757 root append ok cached 6757 stat 6757"
	want "6757 other ftruncate ok cached 757 stat 757"
	want "6757 other otrunc ok cached 757 stat 757"
	want "6757 other fallocate ok cached 757 stat 757"
	want "root's 6757 other append ok cached 757 stat 757"
	want "6757 root chown ok 1002 -1: cached 757 stat 757"
	;;
acl)
	want "nobody read a1: EACCES"
	want "setfacl -m u:65534:r a1 as root: ok"
	want "-- a1: -rw-r----- 640 0:0 xattrs system.posix_acl_access"
	want "-- a1: -rw------- 600 0:0 xattrs system.posix_acl_access"
	want "mask::---"
	want "nobody read a2: EACCES"
	want "other read a2: ok"
	want "nobody read a3: ok"
	want "nobody append a4: EACCES"
	grep -q '^-- d1/sub: .* system.posix_acl_access system.posix_acl_default$' "$WORK/mendfs.out" ||
		fail "d1/sub did not inherit both ACLs"
	# and the ACLs survive a remount (they are ordinary xattrs on disk)
	umount_fg
	mount_mendfs
	as nobody "$PERM_OP" read "$MNT/t/r1" | grep -qx 'read ok' ||
		fail "r1 (0600, u:nobody:r) unreadable by nobody after a remount"
	as nobody "$PERM_OP" read "$MNT/t/r2" | grep -qx 'read EACCES' ||
		fail "r2 (0644, u:nobody:-) readable by nobody after a remount"
	;;
esac
umount_fg
echo "ok $name ($(wc -l <"$WORK/mendfs.out") lines as on ext4)"
exit 0
