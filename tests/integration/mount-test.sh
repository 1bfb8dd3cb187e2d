#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Integration tests on real FUSE mounts: `mount-test.sh NAME` runs one test
# (basic, errors, kill9, unlinked, poison, readonly, helper, syslog, commit,
# fsck-mounted, relpath, umount-wait, umount-helper, umount-elsewhere, exit-wait,
# remount) against
# the built programs named by $MENDFS, $MOUNT_MENDFS, $MKFS_MENDFS and $FSOPS
# (the syscall checks); some tests also need $FSCK_MENDFS, $MENDCTL and
# $UMOUNT_MENDFS (umount.fuse.mendfs).
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no private mount
# namespace); with MENDFS_TEST_STRICT=1 a test that cannot run fails instead.
# Every mount made here is undone on exit, whatever happened, and every wait
# is bounded.
set -u
. "$(dirname "$0")/lib.sh"

name=${1:?usage: mount-test.sh NAME}
need_progs MENDFS MOUNT_MENDFS MKFS_MENDFS FSOPS
need_root_fuse
work_init it
UNMOUNT=("$WORK/m2")
STRAY=() # files a test may create outside $WORK (only if the code under test is wrong)
# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() {
	local p
	for p in "${STRAY[@]}"; do
		rm -f "$p"
	done
}

# wait_unlocked IMAGE: the daemon (whatever its pid) holds an exclusive flock on
# the image until it has finished mfs_unmount; wait for it to go.
wait_unlocked() {
	timeout 20 flock -x "$1" true || fail "the daemon still holds $1 after 20 s"
}

mkfs() {
	mkfs_mendfs "$IMG" 64M
}

# need_mount_ns [WHAT FOR]: skip without a private mount namespace (unshare -m)
need_mount_ns() {
	unshare -m --propagation private true 2>/dev/null ||
		skip "no private mount namespace (unshare -m)${1:+ $1}"
}

fsops() {
	timeout 60 "$FSOPS" "$1" "$2" || fail "fsops $1"
}

case $name in
basic)
	mkfs
	# without -f, mendfs returns only once the mount is live
	timeout 20 "$MENDFS" "$IMG" "$MNT" 2>>"$WORK/log" || fail "mendfs exited $?"
	mountpoint -q "$MNT" || fail "not mounted when mendfs returned"
	[ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.mendfs ] || fail "fstype"
	fsops basic "$MNT"
	fsops populate "$MNT"
	df "$MNT" >/dev/null || fail "statfs"
	umount "$MNT" || fail "umount"
	wait_unlocked "$IMG"
	# data survives unmount and remount (and the options reach the kernel)
	mount_fg timeout=0,threads=2,allow_other,noexec
	grep -q " $MNT fuse.mendfs rw,nosuid,nodev,noexec,.*allow_other" /proc/mounts ||
		fail "mount options: $(grep " $MNT " /proc/mounts)"
	fsops verify "$MNT"
	umount_fg
	;;
errors)
	mkfs
	mount_fg
	out=$(timeout 20 "$MENDFS" "$IMG" "$WORK/m2" 2>&1) && fail "a second daemon mounted"
	mkdir -p "$WORK/m2"
	out=$(timeout 20 "$MENDFS" "$IMG" "$WORK/m2" 2>&1)
	[ $? = 1 ] || fail "second daemon: status"
	grep -q "in use" <<<"$out" || fail "second daemon: message '$out'"
	umount_fg
	head -c 1M /dev/zero >"$WORK/zero"
	out=$(timeout 20 "$MENDFS" "$WORK/zero" "$MNT" 2>&1)
	[ $? = 1 ] && grep -q "not a mendfs" <<<"$out" || fail "non-mendfs device: '$out'"
	out=$(timeout 20 "$MENDFS" "$IMG" "$WORK/nowhere" 2>&1)
	[ $? = 1 ] && grep -q "mount point" <<<"$out" || fail "missing mount point: '$out'"
	out=$(timeout 20 "$MENDFS" -o ro,frobnicate "$IMG" "$MNT" 2>&1)
	[ $? = 1 ] && grep -q "unknown mount option 'frobnicate'" <<<"$out" ||
		fail "unknown option: '$out'"
	out=$(timeout 20 "$MENDFS" -o threads=0 "$IMG" "$MNT" 2>&1)
	[ $? = 1 ] || fail "threads=0 accepted"
	mountpoint -q "$MNT" && fail "a failed start left a mount"
	# mount.mendfs reports a failure as 32
	timeout 20 "$MOUNT_MENDFS" "$WORK/zero" "$MNT" -o rw 2>/dev/null
	[ $? = 32 ] || fail "mount.mendfs failure status"
	;;
kill9)
	mkfs
	mount_fg
	fsops fsynced "$MNT"
	crash
	mount_fg
	fsops fsynced-verify "$MNT"
	# SIGTERM ends the daemon cleanly (exit 0) and removes the mount
	kill -TERM "$DPID"
	wait_gone "$DPID" 20 || fail "SIGTERM did not end the daemon"
	reap "$DPID" || fail "the daemon exited with status $? after SIGTERM"
	mountpoint -q "$MNT" && fail "still mounted after SIGTERM"
	mount_fg
	fsops fsynced-verify "$MNT"
	umount_fg
	;;
unlinked)
	# an unlinked open file keeps its blocks until closed, then they are freed
	mkfs
	mount_fg
	free0=$(stat -f -c %f "$MNT")
	head -c 8M /dev/urandom >"$MNT/f" || fail "write 8M"
	sum=$(sha256sum <"$MNT/f")
	exec 3<"$MNT/f"
	rm "$MNT/f" || fail "rm"
	[ "$(sha256sum <&3)" = "$sum" ] || fail "content of the unlinked open file"
	free1=$(stat -f -c %f "$MNT")
	((free0 - free1 >= 2048)) || fail "blocks freed while open ($free0 -> $free1)"
	exec 3<&-
	for ((i = 0; i < 100; i++)); do
		free2=$(stat -f -c %f "$MNT")
		((free2 >= free0)) && break
		sleep 0.1
	done
	((free2 >= free0)) || fail "blocks not freed after close ($free0 -> $free2)"
	umount_fg
	;;
poison)
	# emulated poison (-o badblocks=PATH) under one sector of a file's block 5:
	# that page reads EIO, a read of the whole file stops short before it
	mkfs
	mount_fg
	for ((i = 0; i < 16; i++)); do
		printf 'MENDPOISONBLK%04d' "$i"
		head -c $((4096 - 17)) /dev/zero | tr '\0' .
	done >"$MNT/p"
	umount_fg
	off=$(grep -obUa MENDPOISONBLK0005 "$IMG" | head -1 | cut -d: -f1)
	[ -n "$off" ] || fail "block 5 not found in the image"
	echo "$((off / 512 + 3)) 1" >"$WORK/bb"
	mount_fg badblocks="$WORK/bb"
	dd if="$MNT/p" of=/dev/null bs=4096 skip=4 count=1 status=none || fail "clean page"
	out=$(dd if="$MNT/p" of=/dev/null bs=4096 skip=5 count=1 status=none 2>&1) &&
		fail "a poisoned page was read"
	grep -q "Input/output error" <<<"$out" || fail "poisoned page: '$out'"
	n=$(cat "$MNT/p" 2>/dev/null | wc -c)
	[ "$n" = 20480 ] || fail "read of the whole file returned $n bytes, not 20480"
	umount_fg
	;;
readonly)
	mkfs
	mount_fg
	fsops populate "$MNT"
	umount_fg
	sum=$(sha256sum <"$IMG")
	mount_fg ro
	grep -q " $MNT fuse.mendfs ro," /proc/mounts || fail "not mounted ro"
	fsops rofs "$MNT"
	fsops verify "$MNT"
	umount_fg
	[ "$(sha256sum <"$IMG")" = "$sum" ] || fail "the image changed under -o ro"
	;;
helper)
	# mount(8) runs /sbin/mount.TYPE only.  Rather than touch the real /sbin,
	# run mount(8) in a private mount namespace where a tmpfs holding a link to
	# the built helper is mounted over /sbin (and a test fstab over
	# /etc/fstab); the daemon is found beside the helper.
	need_mount_ns "for mount(8)'s helper lookup"
	mkfs
	mkdir -p "$WORK/sbin"
	cat >"$WORK/fstab" <<-EOF
		$IMG $MNT mendfs defaults,noauto,nofail,x-test=1,threads=4 0 0
	EOF
	cat >"$WORK/inner.sh" <<-'EOF'
		set -u
		fail() { echo "FAIL (helper): $*" >&2; exit 1; }
		trap 'mountpoint -q "$MNT" && umount -l "$MNT"' EXIT
		mount -t tmpfs tmpfs "$WORK/sbin" || fail "tmpfs"
		ln -s "$MOUNT_MENDFS" "$WORK/sbin/mount.mendfs"
		mount --bind "$WORK/sbin" /sbin || fail "bind over /sbin"
		mount --bind "$WORK/fstab" /etc/fstab || fail "bind fstab"
		timeout 20 mount -t mendfs "$IMG" "$MNT" || fail "mount -t mendfs: $?"
		mountpoint -q "$MNT" || fail "not live when mount returned"
		[ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.mendfs ] || fail "fstype"
		echo via-helper >"$MNT/h" || fail "write"
		umount "$MNT" || fail "umount"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount"
		timeout 20 mount "$MNT" || fail "mount from fstab: $?"
		[ "$(cat "$MNT/h")" = via-helper ] || fail "content after fstab mount"
		umount "$MNT" || fail "umount (fstab)"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount (fstab)"
		timeout 20 mount -t mendfs -o ro "$IMG" "$MNT" || fail "mount -o ro: $?"
		echo x 2>/dev/null >"$MNT/h" && fail "wrote on a read-only mount"
		[ "$(cat "$MNT/h")" = via-helper ] || fail "content on the ro mount"
		umount "$MNT" || fail "umount (ro)"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount (ro)"
		# suid and dev work through mount(8), which drops them (its defaults) before
		# the helper runs; nosuid and nodev still win
		timeout 20 mount -t mendfs -o suid,dev "$IMG" "$MNT" || fail "mount -o suid,dev: $?"
		o=",$(findmnt -n -o OPTIONS "$MNT"),"
		case $o in *,nosuid,* | *,nodev,*) fail "mount -o suid,dev shows $o" ;; esac
		umount "$MNT" || fail "umount (suid,dev)"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount (suid,dev)"
		timeout 20 mount -t mendfs -o nosuid,dev,noexec "$IMG" "$MNT" || fail "mount -o nosuid: $?"
		o=",$(findmnt -n -o OPTIONS "$MNT"),"
		case $o in *,nosuid,*noexec,*) ;; *) fail "mount -o nosuid,dev,noexec shows $o" ;; esac
		case $o in *,nodev,*) fail "mount -o nosuid,dev,noexec shows $o" ;; esac
		umount "$MNT" || fail "umount (nosuid)"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount (nosuid)"
		head -c 1M /dev/zero >"$WORK/zero"
		timeout 20 mount -t mendfs "$WORK/zero" "$MNT" 2>/dev/null
		[ $? = 32 ] || fail "mount of a non-mendfs device: not 32"
		exit 0
	EOF
	WORK=$WORK IMG=$IMG MNT=$MNT MOUNT_MENDFS=$MOUNT_MENDFS \
		timeout 90 unshare -m --propagation private bash "$WORK/inner.sh" ||
		fail "helper tests"
	;;
commit)
	# -o commit=1: a file written without fsync is committed within about a
	# second and survives kill -9; with commit=0 nothing commits it, and it
	# is gone after kill -9 (the journal is the only way metadata reaches
	# the image before a checkpoint)
	mkfs
	for c in 1 0; do
		mount_fg commit=$c
		printf 'committed by the timer %s\n' $c >"$MNT/c$c" || fail "write c$c"
		sleep 2.5
		crash
		mount_fg
		if [ $c = 1 ]; then
			[ "$(cat "$MNT/c1" 2>&1)" = "committed by the timer 1" ] ||
				fail "commit=1: c1 lost after kill -9: $(ls -la "$MNT")"
		else
			[ -e "$MNT/c0" ] && fail "commit=0: c0 survived kill -9 (something else committed it)"
		fi
		umount_fg
	done
	;;
syslog)
	# Detached, the daemon logs to syslog (facility daemon, identifier mendfs),
	# and -o debug traces requests there at priority debug.  A private mount
	# namespace gets a /dev of its own whose /dev/log is a datagram socket
	# read by this test (this machine need not run a syslog daemon).
	command -v python3 >/dev/null || skip "no python3"
	mkfs
	cat >"$WORK/inner.sh" <<-'EOF'
		set -u
		mount -t tmpfs -o mode=755 none /dev || exit 10
		mknod -m 666 /dev/fuse c 10 229 && mknod -m 666 /dev/null c 1 3 &&
			mknod -m 666 /dev/zero c 1 5 && mknod -m 444 /dev/urandom c 1 9 || exit 11
		python3 -c '
		import socket, sys
		s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
		s.bind("/dev/log")
		with open(sys.argv[1], "a") as f:
		    while True:
		        f.write(s.recv(65536).decode(errors="replace").rstrip("\n") + "\n")
		        f.flush()
		' "$WORK/syslog.txt" &
		LPID=$!
		for _ in $(seq 100); do [ -S /dev/log ] && break; sleep 0.1; done
		[ -S /dev/log ] || exit 12
		timeout 20 "$MENDFS" -o debug "$IMG" "$MNT" || exit 13
		ls "$MNT" >/dev/null || exit 14
		timeout 20 umount "$MNT" || exit 15
		timeout 20 flock -x "$IMG" true || exit 16
		sleep 0.5
		kill $LPID
		exit 0
	EOF
	MENDFS=$MENDFS WORK=$WORK IMG=$IMG MNT=$MNT \
		timeout 90 unshare -m --propagation private bash "$WORK/inner.sh" ||
		fail "syslog test in its namespace: exit $?"
	log=$WORK/syslog.txt
	[ -s "$log" ] || fail "nothing reached /dev/log"
	# <30> = daemon.info, <31> = daemon.debug; the identifier carries the pid
	grep -q "^<30>.*mendfs\[[0-9]*\]: $IMG mounted on $MNT" "$log" ||
		fail "no 'mounted on' at daemon.info: $(head -c 600 "$log")"
	grep -q "^<30>.*mendfs\[[0-9]*\]: $IMG unmounted cleanly" "$log" ||
		fail "no 'unmounted cleanly' at daemon.info: $(tail -c 600 "$log")"
	grep -q "^<31>.*mendfs\[[0-9]*\]: .*opcode: LOOKUP\|^<31>.*mendfs\[[0-9]*\]: .*opcode: GETATTR" "$log" ||
		fail "no request trace at daemon.debug: $(head -c 600 "$log")"
	;;
fsck-mounted)
	# fsck.mendfs -n on a mounted filesystem checks it but warns on stderr, as
	# e2fsck does, that the results may be inaccurate; -y still refuses; once
	# unmounted, -n says nothing of the kind.
	need_progs FSCK_MENDFS
	mkfs
	mount_fg
	echo data >"$MNT/f" || fail "write"
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/out" 2>"$WORK/err"
	st=$?
	[ $st -le 4 ] || fail "fsck.mendfs -n on the mounted image exited $st: $(cat "$WORK/err")"
	grep -q "warning: $IMG is mounted.*results may be inaccurate" "$WORK/err" ||
		fail "no warning on stderr: '$(cat "$WORK/err")'"
	grep -q "mounted" "$WORK/out" && fail "the warning went to stdout: $(cat "$WORK/out")"
	"$FSCK_MENDFS" -n --json "$IMG" >"$WORK/out" 2>"$WORK/err"
	python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$WORK/out" ||
		fail "--json output is not one JSON object: $(cat "$WORK/out")"
	grep -q "results may be inaccurate" "$WORK/err" || fail "no warning with --json"
	out=$("$FSCK_MENDFS" -y "$IMG" 2>&1) && fail "fsck.mendfs -y repaired a mounted image: $out"
	grep -q "refusing to repair" <<<"$out" || fail "fsck.mendfs -y on a mounted image: '$out'"
	umount_fg
	out=$("$FSCK_MENDFS" -n "$IMG" 2>&1) || fail "fsck.mendfs -n after the unmount: $out"
	grep -q "mounted" <<<"$out" && fail "warned on an unmounted image: $out"
	;;
relpath)
	# DEVICE and badblocks=PATH given relative to the caller's directory: the
	# detached daemon works in /, yet the poison it records lands beside the
	# image (and at PATH), where fsck.mendfs and the next mount find it.  The
	# image has a name of its own so that a stray /NAME.badblocks is ours.
	need_progs FSCK_MENDFS MENDCTL
	rel=$(basename "$WORK").img
	IMG=$WORK/$rel
	STRAY=("/$rel.badblocks" "/$rel.bb2")
	mkfs
	(cd "$WORK" && timeout 20 "$MENDFS" -o poison_inject "$rel" m) 2>>"$WORK/log" ||
		fail "mendfs by a relative path"
	src=$(findmnt -n -o SOURCE "$MNT")
	head -c 40000 /dev/urandom >"$MNT/f" || fail "write"
	sector() { "$MENDCTL" bmap --json "$1" | grep -o '"sector":[0-9]*' | head -1 | cut -d: -f2; }
	S=$(sector "$MNT/f")
	[ -n "$S" ] || fail "no sector for f"
	"$MENDCTL" inject "$MNT" "$S" 1 || fail "mendctl inject"
	umount "$MNT" || fail "umount"
	wait_unlocked "$IMG"
	[ -e "/$rel.badblocks" ] && fail "the poison went to /$rel.badblocks"
	grep -q "^$S 1\$" "$IMG.badblocks" || fail "no '$S 1' in $IMG.badblocks"
	out=$("$FSCK_MENDFS" -n "$IMG" 2>&1)
	st=$?
	[ $st = 4 ] || fail "fsck.mendfs -n exited $st, not 4: $out"
	grep -q "1 damaged file" <<<"$out" && grep -q "/f: bytes 0-511" <<<"$out" ||
		fail "fsck.mendfs -n does not report f: $out"
	# the mount source is the absolute path too (for tools reading mountinfo)
	[ "$src" = "$IMG" ] || fail "mount source $src, not $IMG"
	mount_fg
	out=$(cat "$MNT/f" 2>&1 >/dev/null) && fail "the poisoned f read after a remount"
	grep -q "Input/output error" <<<"$out" || fail "read of f: '$out'"
	umount_fg
	# badblocks=PATH relative, through mount.mendfs with a relative DEVICE
	(cd "$WORK" && timeout 20 "$MOUNT_MENDFS" "$rel" m -o poison_inject,badblocks="$rel.bb2") ||
		fail "mount.mendfs by a relative path"
	[ "$(findmnt -n -o SOURCE "$MNT")" = "$IMG" ] || fail "mount.mendfs: mount source"
	echo g >"$MNT/g" || fail "write g"
	"$MENDCTL" inject "$MNT" $((S + 1)) 1 || fail "mendctl inject (badblocks=$rel.bb2)"
	umount "$MNT" || fail "umount (badblocks=$rel.bb2)"
	wait_unlocked "$IMG"
	[ -e "/$rel.bb2" ] && fail "the poison went to /$rel.bb2"
	grep -q "^$((S + 1)) 1\$" "$WORK/$rel.bb2" || fail "no '$((S + 1)) 1' in $WORK/$rel.bb2"
	# a relative badblocks=PATH whose directory does not exist: refused at once
	out=$(cd "$WORK" && timeout 20 "$MENDFS" -o badblocks=nodir/bb "$rel" m 2>&1)
	[ $? = 1 ] && grep -q "badblocks=nodir/bb: its directory: No such file" <<<"$out" ||
		fail "badblocks in a missing directory: '$out'"
	mountpoint -q "$MNT" && fail "mounted with badblocks in a missing directory"
	;;
umount-wait)
	# umount(8) runs /sbin/umount.fuse.mendfs for a mendfs mount (the daemon
	# records it in utab with helper=fuse.mendfs), and returns only when the
	# daemon has finished: at once after `umount /abs/dir` the image is
	# unlocked and clean (fsck.mendfs finds nothing, waits for nothing), round
	# after round, for mounts by mount(8) and by the daemon alone.  As in
	# 'helper', /sbin is a tmpfs holding links to the built helpers, in a
	# private mount namespace, and so is /run/mount (utab).
	need_progs FSCK_MENDFS UMOUNT_MENDFS
	need_mount_ns "for umount(8)'s helper lookup"
	mkfs
	mkdir -p "$WORK/sbin"
	cat >"$WORK/inner.sh" <<-'EOF'
		set -u
		fail() { echo "FAIL (umount-wait): $*" >&2; exit 1; }
		trap 'mountpoint -q "$MNT" && umount -l "$MNT"' EXIT
		mount -t tmpfs tmpfs "$WORK/sbin" || fail "tmpfs"
		ln -s "$MOUNT_MENDFS" "$WORK/sbin/mount.mendfs"
		ln -s "$UMOUNT_MENDFS" "$WORK/sbin/umount.fuse.mendfs"
		mount --bind "$WORK/sbin" /sbin || fail "bind over /sbin"
		mkdir -p /run/mount && mount -t tmpfs tmpfs /run/mount || fail "tmpfs on /run/mount"
		for ((i = 1; i <= 12; i++)); do
			# the previous round's daemon is gone: the image mounts at once
			if ((i % 3)); then
				timeout 20 mount -t mendfs "$IMG" "$MNT" || fail "round $i: mount -t mendfs: $?"
			else
				timeout 20 "$MENDFS" "$IMG" "$MNT" || fail "round $i: mendfs: $?"
			fi
			grep -q "TARGET=$MNT .*helper=fuse.mendfs" /run/mount/utab ||
				fail "round $i: no utab record: $(cat /run/mount/utab 2>&1)"
			for ((j = 1; j < i; j++)); do
				[ "$(cat "$MNT/r$j")" = "round $j" ] || fail "round $i: r$j lost"
			done
			printf 'round %s\n' $i >"$MNT/r$i" || fail "round $i: write"
			head -c 1M /dev/urandom >"$MNT/big" || fail "round $i: write big"
			out=$(timeout 90 umount -v "$MNT") || fail "round $i: umount: $?"
			flock -n -x "$IMG" true ||
				fail "round $i: the daemon still held $IMG when umount returned"
			grep -q "the mendfs daemon has finished with $IMG" <<<"$out" ||
				fail "round $i: umount(8) did not run umount.fuse.mendfs: '$out'"
			((i % 2)) && mode=-n || mode=-y
			out=$("$FSCK_MENDFS" $mode "$IMG" 2>&1) ||
				fail "round $i: fsck.mendfs $mode right after umount: exit $?: $out"
			grep -q "F0[0-9]\|waiting" <<<"$out" &&
				fail "round $i: fsck.mendfs $mode right after umount: $out"
			grep -q "TARGET=$MNT " /run/mount/utab && fail "round $i: utab record left"
		done
		# unmounted another way (fusermount3 -u runs no helper): the daemon
		# drops its utab record itself before it lets go of the image
		timeout 20 "$MENDFS" "$IMG" "$MNT" || fail "mendfs (fusermount3)"
		grep -q "TARGET=$MNT .*helper=fuse.mendfs" /run/mount/utab || fail "no utab record"
		fusermount3 -u "$MNT" || fail "fusermount3 -u"
		timeout 20 flock -x "$IMG" true || fail "the daemon did not finish after fusermount3 -u"
		grep -q "TARGET=$MNT " /run/mount/utab && fail "utab record left after fusermount3 -u"
		exit 0
	EOF
	WORK=$WORK IMG=$IMG MNT=$MNT MENDFS=$MENDFS MOUNT_MENDFS=$MOUNT_MENDFS UMOUNT_MENDFS=$UMOUNT_MENDFS \
		FSCK_MENDFS=$FSCK_MENDFS timeout 600 unshare -m --propagation private bash "$WORK/inner.sh" ||
		fail "umount-wait rounds"
	;;
umount-helper)
	# umount.fuse.mendfs run directly: what umount(8) passes (-v, -l, -f, -r,
	# a relative DIR by hand) and its exit codes (1 usage, 32 failed)
	need_progs UMOUNT_MENDFS
	mkfs
	"$UMOUNT_MENDFS" 2>/dev/null
	[ $? = 1 ] || fail "no DIR: not exit 1"
	out=$("$UMOUNT_MENDFS" "$MNT" 2>&1)
	[ $? = 32 ] && grep -q "not mounted" <<<"$out" || fail "not mounted: '$out'"
	timeout 20 "$MENDFS" "$IMG" "$MNT" 2>>"$WORK/log" || fail "mendfs"
	echo a >"$MNT/a" || fail "write a"
	out=$(cd "$WORK" && timeout 90 "$UMOUNT_MENDFS" m -v) || fail "umount.fuse.mendfs m: $?"
	flock -n -x "$IMG" true || fail "the daemon still held $IMG when the helper returned"
	grep -q "$MNT unmounted; the mendfs daemon has finished with $IMG" <<<"$out" ||
		fail "-v: '$out'"
	mountpoint -q "$MNT" && fail "still mounted"
	# busy: refused with 32, still mounted; -l detaches at once and does not
	# wait: the daemon serves the open file until it is closed
	timeout 20 "$MENDFS" "$IMG" "$MNT" 2>>"$WORK/log" || fail "mendfs (busy)"
	exec 3<"$MNT/a"
	out=$(timeout 90 "$UMOUNT_MENDFS" "$MNT" 2>&1)
	[ $? = 32 ] && grep -q "target is busy" <<<"$out" || fail "busy: '$out'"
	mountpoint -q "$MNT" || fail "unmounted although busy"
	# -r: busy, so remounted read-only instead
	out=$(timeout 90 "$UMOUNT_MENDFS" "$MNT" -r 2>&1) || fail "-r: exit $?: $out"
	grep -q "busy; remounted read-only" <<<"$out" || fail "-r: '$out'"
	grep -q " $MNT fuse.mendfs ro," /proc/mounts || fail "-r: $(grep " $MNT " /proc/mounts)"
	timeout 90 "$UMOUNT_MENDFS" "$MNT" -l || fail "-l: $?"
	mountpoint -q "$MNT" && fail "-l: still mounted"
	flock -n -x "$IMG" true && fail "-l: the daemon let go of $IMG while a file was open"
	[ "$(cat <&3)" = a ] || fail "-l: the open file no longer reads"
	exec 3<&-
	wait_unlocked "$IMG"
	# -f (MNT_FORCE: the connection is aborted): the daemon still writes out
	# what it has, and the helper waits for it
	timeout 20 "$MENDFS" "$IMG" "$MNT" 2>>"$WORK/log" || fail "mendfs (force)"
	echo b >"$MNT/b" || fail "write b"
	timeout 90 "$UMOUNT_MENDFS" "$MNT" -f || fail "-f: $?"
	flock -n -x "$IMG" true || fail "-f: the daemon still held $IMG when the helper returned"
	mount_fg
	[ "$(cat "$MNT/a" "$MNT/b")" = "$(printf 'a\nb')" ] || fail "content after -f"
	umount_fg
	;;
umount-elsewhere)
	# The filesystem also mounted in another mount namespace (a private copy):
	# unmounting it here does not end the daemon.  Where fusectl shows the
	# FUSE connections, umount.fuse.mendfs sees the connection outlive the
	# unmount, says so and returns at once instead of waiting in vain.
	need_progs UMOUNT_MENDFS
	need_mount_ns
	mkfs
	cat >"$WORK/inner.sh" <<-'EOF'
		set -u
		fail() { echo "FAIL (umount-elsewhere): $*" >&2; exit 1; }
		trap 'mountpoint -q "$MNT" && umount -l "$MNT"; [ -n "${SPID:-}" ] && kill $SPID' EXIT
		# fusectl may already be mounted with no connection in it yet (the
		# kernel refuses a second mount of it on the same point: EBUSY)
		if ! mountpoint -q /sys/fs/fuse/connections; then
			mount -t fusectl none /sys/fs/fuse/connections || { echo "no fusectl" >&2; exit 77; }
		fi
		mkdir -p /run/mount && mount -t tmpfs tmpfs /run/mount || fail "tmpfs on /run/mount"
		timeout 20 "$MENDFS" "$IMG" "$MNT" || fail "mendfs"
		echo e >"$MNT/e" || fail "write"
		mkfifo "$WORK/ready"
		unshare -m --propagation private sh -c 'echo >"$1"; exec sleep 300' sh "$WORK/ready" &
		SPID=$!
		read -r _ <"$WORK/ready"
		out=$(timeout 90 "$UMOUNT_MENDFS" "$MNT" 2>&1) || fail "helper: exit $?: $out"
		grep -q "still mounted elsewhere" <<<"$out" || fail "helper: '$out'"
		mountpoint -q "$MNT" && fail "still mounted here"
		flock -n -x "$IMG" true && fail "the daemon let go while mounted elsewhere"
		kill $SPID
		wait $SPID
		SPID=
		timeout 20 flock -x "$IMG" true || fail "the daemon did not finish after the copy went"
		exit 0
	EOF
	MENDFS=$MENDFS UMOUNT_MENDFS=$UMOUNT_MENDFS WORK=$WORK IMG=$IMG MNT=$MNT \
		timeout 120 unshare -m --propagation private bash "$WORK/inner.sh"
	st=$?
	[ $st = 77 ] && skip "cannot mount fusectl on /sys/fs/fuse/connections"
	[ $st = 0 ] || fail "umount-elsewhere in its namespace: exit $st"
	;;
remount)
	# mount -o remount,ro and remount,rw through mount(8), which runs
	# /sbin/mount.fuse.mendfs (the type the kernel shows; set up as in the
	# helper test): a file open for writing makes ro fail with 32; with a
	# writer that reopens its file, ro succeeds and the writer meets EROFS;
	# while read-only the superblock says clean (state 1 at byte 76) and
	# fsck.mendfs -n finds nothing; rw makes it writable and in use (2)
	# again; a filesystem mounted -o ro cannot be remounted rw.
	need_mount_ns "for mount(8)'s helper lookup"
	need_progs FSCK_MENDFS
	mkfs
	mkdir -p "$WORK/sbin"
	cat >"$WORK/inner.sh" <<-'EOF'
		set -u
		fail() { echo "FAIL (remount): $*" >&2; exit 1; }
		state() { od -An -tu4 -j76 -N4 "$IMG" | tr -d ' '; }
		opts() { findmnt -n -o VFS-OPTIONS "$MNT" | cut -d, -f1; }
		trap 'kill $W 2>/dev/null; mountpoint -q "$MNT" && umount -l "$MNT"' EXIT
		W=
		mount -t tmpfs tmpfs "$WORK/sbin" || fail "tmpfs"
		ln -s "$MOUNT_MENDFS" "$WORK/sbin/mount.mendfs"
		ln -s "$MOUNT_MENDFS" "$WORK/sbin/mount.fuse.mendfs"
		mount --bind "$WORK/sbin" /sbin || fail "bind over /sbin"
		timeout 20 mount -t mendfs -o commit=0 "$IMG" "$MNT" || fail "mount: $?"
		head -c 300000 /dev/urandom >"$WORK/data"
		cp "$WORK/data" "$MNT/data" || fail "cp"
		[ "$(state)" = 2 ] || fail "state $(state) while mounted, not 2"
		# a file open for writing: busy, and nothing changes
		exec 3>"$MNT/held"
		out=$(timeout 20 mount -o remount,ro "$MNT" 2>&1)
		[ $? = 32 ] || fail "remount,ro with a file open for writing: not 32: $out"
		grep -q "open for writing" <<<"$out" || fail "remount,ro busy: $out"
		echo still >&3 || fail "the held file is no longer writable"
		exec 3>&-
		[ "$(opts)" = rw ] || fail "$(opts) after a failed remount,ro"
		# a writer that reopens its file for every line
		(while echo line 2>/dev/null >>"$MNT/log"; do :; done; echo stopped >"$WORK/w") &
		W=$!
		sleep 0.3
		ok=
		for i in $(seq 50); do
			timeout 20 mount -o remount,ro "$MNT" 2>"$WORK/err" && { ok=1; break; }
			sleep 0.1
		done
		[ -n "$ok" ] || fail "remount,ro never succeeded beside the writer: $(cat "$WORK/err")"
		for i in $(seq 50); do [ -e "$WORK/w" ] && break; sleep 0.1; done
		[ -e "$WORK/w" ] || fail "the writer still writes on a read-only mount"
		wait $W; W=
		[ "$(opts)" = ro ] || fail "$(opts) after remount,ro"
		echo x 2>/dev/null >"$MNT/new" && fail "created a file after remount,ro"
		[ "$(state)" = 1 ] || fail "state $(state) after remount,ro, not 1 (clean)"
		timeout 60 "$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 ||
			fail "fsck -n after remount,ro: $? $(cat "$WORK/fsck")"
		cmp "$WORK/data" "$MNT/data" || fail "data after remount,ro"
		lines=$(wc -l <"$MNT/log")
		# back to read-write
		timeout 20 mount -o remount,rw "$MNT" || fail "remount,rw: $?"
		[ "$(opts)" = rw ] || fail "$(opts) after remount,rw"
		[ "$(state)" = 2 ] || fail "state $(state) after remount,rw, not 2"
		echo more >>"$MNT/log" || fail "append after remount,rw"
		[ "$(wc -l <"$MNT/log")" = $((lines + 1)) ] || fail "the log lost lines"
		umount "$MNT" || fail "umount"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount"
		timeout 60 "$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 ||
			fail "fsck -n after umount: $? $(cat "$WORK/fsck")"
		# mounted read-only: it stays so
		timeout 20 mount -t mendfs -o ro "$IMG" "$MNT" || fail "mount -o ro: $?"
		out=$(timeout 20 mount -o remount,rw "$MNT" 2>&1)
		[ $? = 32 ] || fail "remount,rw of a -o ro mount: not 32: $out"
		grep -q "mounted read-only" <<<"$out" || fail "remount,rw of a -o ro mount: $out"
		[ "$(opts)" = ro ] || fail "$(opts) after a refused remount,rw"
		cmp "$WORK/data" "$MNT/data" || fail "data on the ro mount"
		umount "$MNT" || fail "umount (ro)"
		timeout 20 flock -x "$IMG" true || fail "daemon did not exit after umount (ro)"
		exit 0
	EOF
	WORK=$WORK IMG=$IMG MNT=$MNT MOUNT_MENDFS=$MOUNT_MENDFS FSCK_MENDFS=$FSCK_MENDFS \
		timeout 150 unshare -m --propagation private bash "$WORK/inner.sh" ||
		fail "remount tests"
	;;
exit-wait)
	# A daemon that was unmounted but has not finished (stopped here, after
	# `umount -i -l`, which runs no helper) still holds the image: fsck.mendfs
	# (-y and -n), mkfs.mendfs and a new daemon wait for it, say so, and go
	# on once it is done.  A mounted image is refused at once, no waiting.
	need_progs FSCK_MENDFS
	mkfs
	mount_fg
	out=$("$FSCK_MENDFS" -y "$IMG" 2>&1)
	[ $? = 8 ] && grep -q "in use" <<<"$out" || fail "fsck -y on a mounted image: '$out'"
	grep -q waiting <<<"$out" && fail "fsck -y waited for a mounted image: '$out'"
	out=$("$MKFS_MENDFS" -q -f "$IMG" 2>&1)
	[ $? = 1 ] && grep -q "in use" <<<"$out" || fail "mkfs on a mounted image: '$out'"
	grep -q waiting <<<"$out" && fail "mkfs waited for a mounted image: '$out'"
	umount_fg
	mkdir -p "$WORK/m2"
	msg="waiting for the mendfs daemon that still holds $IMG to exit"
	for prog in fsck-y fsck-n mkfs mendfs; do
		mount_fg
		echo "$prog" >"$MNT/$prog" || fail "$prog: write"
		kill -STOP "$DPID"
		# -i: no helper; -l: no statfs(2) of DIR, which the stopped daemon would not answer
		umount -i -l "$MNT" || fail "$prog: umount -i -l"
		case $prog in
		fsck-y) cmd=("$FSCK_MENDFS" -y "$IMG") ;;
		fsck-n) cmd=("$FSCK_MENDFS" -n "$IMG") ;;
		mkfs) cmd=("$MKFS_MENDFS" -q -f "$IMG") ;;
		mendfs) cmd=("$MENDFS" "$IMG" "$WORK/m2") ;;
		esac
		"${cmd[@]}" >"$WORK/out" 2>&1 &
		CPID=$!
		# let the daemon go on once the waiting is announced (or given up)
		for ((k = 0; k < 300; k++)); do
			grep -q "waiting" "$WORK/out" && break
			kill -0 $CPID 2>/dev/null || break
			sleep 0.1
		done
		kill -CONT "$DPID"
		wait $CPID
		st=$?
		[ $st = 0 ] || fail "$prog after an exiting daemon: exit $st: $(cat "$WORK/out")"
		grep -q "$msg" "$WORK/out" || fail "$prog: no '$msg': $(cat "$WORK/out")"
		reap "$DPID" || fail "$prog: the stopped daemon exited with status $?"
		[ $prog = fsck-n ] && grep -q "F0[0-9]" "$WORK/out" &&
			fail "fsck -n found problems after waiting: $(cat "$WORK/out")"
		if [ $prog = mendfs ]; then
			[ "$(cat "$WORK/m2/mendfs")" = mendfs ] || fail "mendfs: the last write is lost"
			umount "$WORK/m2" || fail "umount m2"
			wait_unlocked "$IMG"
		fi
	done
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac
echo "ok $name"
exit 0
