# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# lib.sh: what every integration test script does around its test, sourced
# first thing (`. "$(dirname "$0")/lib.sh"`).  It calls only the built
# programs meson names in the environment ($MENDFS, $MKFS_MENDFS, ...) and
# standard tools (mountpoint, umount, fusermount3).
#
#   skip WHY            cannot run here: exit 77, or 1 under MENDFS_TEST_STRICT=1
#   fail WHY            FAIL (NAME[, $step]): WHY, the daemon's log, exit 1
#   need_progs VAR...   each VAR names a built program (a failure otherwise)
#   need_root_fuse      skip unless root with /dev/fuse
#   need_cmds CMD...    skip unless each CMD is installed
#   work_init TAG [DIR] a fresh $WORK (DIR/mendfs-TAG.XXXXXX, DIR /tmp by
#                       default) holding $IMG, $MNT and the daemon's $LOG;
#                       everything is undone on exit, whatever happened
#   mkfs_mendfs ARG...  mkfs.mendfs -q ARG..., its output shown on failure
#   mount_fg [OPTS]     a foreground daemon on ${DEV:-$IMG} at $MNT (-o OPTS),
#                       its pid in $DPID, waited for until mounted; with
#                       MENDFS_TEST_TRANSPORT=io_uring (CI's second pass of the
#                       suite) over FUSE over io_uring, checked with mendctl
#   uring_enable        the fuse module's enable_uring on (restored on exit);
#                       skip if the kernel has no FUSE over io_uring
#   umount_fg           unmount; the daemon must exit 0
#   crash               kill -9 the daemon and remove its dead mount
#   wait_gone PID SECS  true once PID has ended
#   reap PID            wait for an ended daemon; returns its exit status
#
# On exit the cleanup unmounts $MNT and the paths in $UNMOUNT, stops every
# daemon mount_fg started (TERM, then KILL after 10 s), runs the script's
# on_cleanup function if it has one (loop devices and the like), and
# removes $WORK.  Scripts set name (the test, for messages) and may set
# step (the part of it running, for messages).

name=${name:-$(basename "$0" .sh)}
step=""
WORK=""
DPID=""
PIDS=()    # daemons started and not reaped yet
UNMOUNT=() # mount points to undo on exit besides $MNT

skip() {
	if [ "${MENDFS_TEST_STRICT:-0}" = 1 ]; then
		echo "FAIL ($name): cannot run (MENDFS_TEST_STRICT=1): $*" >&2
		exit 1
	fi
	echo "skip: $*"
	exit 77
}

fail() {
	echo "FAIL ($name${step:+, $step}): $*" >&2
	[ -n "$WORK" ] && [ -s "$LOG" ] && tail -100 "$LOG" | sed 's/^/  daemon: /' >&2
	exit 1
}

need_progs() {
	local v
	for v; do
		[ -x "${!v:-}" ] || fail "$v not set or not executable"
	done
}

need_root_fuse() {
	[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || skip "needs root and /dev/fuse"
}

need_cmds() {
	local c
	for c; do
		command -v "$c" >/dev/null || skip "needs $c"
	done
}

wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

reap() {
	local st=0 p keep=()
	wait "$1" || st=$?
	for p in "${PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
	[ "$DPID" = "$1" ] && DPID=""
	return $st
}

# undo_mount DIR: unmount DIR if mounted, lazily if it is busy or dead
undo_mount() {
	mountpoint -q "$1" 2>/dev/null || return 0
	timeout 10 umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null ||
		fusermount3 -u -z "$1" 2>/dev/null
}

lib_cleanup() {
	local p d
	set +e
	for p in "${PIDS[@]}"; do
		kill -CONT "$p" 2>/dev/null # a test may have stopped one
	done
	for d in "$MNT" "${UNMOUNT[@]}"; do
		undo_mount "$d"
	done
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		wait_gone "$p" 10 || kill -9 "$p" 2>/dev/null
	done
	declare -F on_cleanup >/dev/null && on_cleanup
	[ -n "$URING_WAS" ] && echo "$URING_WAS" >"$URING_PARAM"
	rm -rf "$WORK"
}

work_init() {
	WORK=$(mktemp -d "${2:-/tmp}/mendfs-$1.XXXXXX") || fail "mktemp"
	IMG=$WORK/img
	MNT=$WORK/m
	LOG=$WORK/log
	mkdir -p "$MNT"
	trap lib_cleanup EXIT
	trap 'exit 1' INT TERM HUP # meson's timeout: clean up all the same
}

mkfs_mendfs() {
	"$MKFS_MENDFS" -q "$@" >"$WORK/mkfs.log" 2>&1 ||
		{ cat "$WORK/mkfs.log" >&2; fail "mkfs.mendfs $*"; }
}

# wait_mounted [DIR]: DIR ($MNT) mounted within 20 s, while $DPID lives
wait_mounted() {
	local d=${1:-$MNT} i
	for ((i = 0; i < 200; i++)); do
		mountpoint -q "$d" && return 0
		[ -n "$DPID" ] && ! kill -0 "$DPID" 2>/dev/null && fail "the daemon exited before mounting $d"
		sleep 0.1
	done
	fail "$d not mounted after 20 s"
}

URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_WAS="" # enable_uring before uring_enable, restored by lib_cleanup

uring_enable() {
	[ -e "$URING_PARAM" ] || skip "the kernel has no FUSE over io_uring ($URING_PARAM)"
	if [ -z "$URING_WAS" ]; then
		URING_WAS=$(cat "$URING_PARAM")
		echo 1 >"$URING_PARAM" || fail "cannot set $URING_PARAM"
	fi
}

# transport_of DIR: the FUSE transport of the mount at DIR, as mendctl stats says
transport_of() {
	"$MENDCTL" --json stats "$1" | sed -n 's/.*"transport":"\([a-z_]*\)".*/\1/p'
}

mount_fg() {
	local opts=${1:-}
	if [ "${MENDFS_TEST_TRANSPORT:-}" = io_uring ]; then
		uring_enable
		opts=${opts:+$opts,}io_uring
	fi
	"$MENDFS" -f ${opts:+-o "$opts"} "${DEV:-$IMG}" "$MNT" 2>>"$LOG" &
	DPID=$!
	PIDS+=("$DPID")
	wait_mounted "$MNT"
	if [ "${MENDFS_TEST_TRANSPORT:-}" = io_uring ]; then
		local tr
		tr=$(transport_of "$MNT") || fail "mendctl stats $MNT"
		[ "$tr" = io_uring ] || fail "MENDFS_TEST_TRANSPORT=io_uring, but the transport is '$tr'"
	fi
}

umount_fg() {
	local pid=$DPID st=0
	timeout 30 umount "$MNT" || fail "umount"
	wait_gone "$pid" 30 || fail "the daemon did not exit after umount"
	reap "$pid" || st=$?
	[ $st = 0 ] || fail "the daemon exited with status $st"
}

crash() {
	local pid=$DPID
	kill -9 "$pid"
	wait_gone "$pid" 10 || fail "kill -9"
	reap "$pid" 2>/dev/null || true
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" || fail "removing the dead mount"
}
