#!/bin/bash
# SPDX-License-Identifier: MIT
#
# fault-loop.sh: I/O error handling, tested the way SQLite tests its I/O
# layer.  A workload (mount; $FAULTLOAD run: create, write, fsync, setxattr,
# rename, unlink; unmount) first runs once with -o fault_inject=0, which
# counts its device operations K (requests the engine hands to the backend:
# reads, writes, write-zeroes, flushes; the daemon prints the count when it
# closes the device).  Then for N = 1..K, in two modes: operation N fails
# with EIO (fault_inject=N), and every operation from N on fails, a device
# that dies (fault_inject=N+).  Each run, on a fresh copy of an image made
# once by mkfs.mendfs (on tmpfs):
#
#   - the daemon must neither hang (every step is under a timeout) nor crash
#     (exit status 0 or 1, no sanitizer report or assertion in its log);
#     a mount that fails (a fault while mounting) is allowed;
#   - every failing call of the workload fails with EIO or EROFS
#     (faultload.c);
#   - after the run, fsck.mendfs -n finds nothing wrong, but what a crash
#     at that point would leave and the next mount repairs: committed
#     transactions to replay (F0004: a filesystem that turned read-only
#     left its journal as it was) and superblock copies that differ (F0002:
#     a superblock write failed between its two copies); the check replays
#     the journal in memory, so the state after replay is checked too;
#   - mounted again without faults, every file whose fsync succeeded is
#     intact ($FAULTLOAD verify), and fsck.mendfs -n is still clean after
#     that mount's replay and unmount.
#
# A daemon that does not exit within 20 s of its unmount fails its point;
# its threads' states and kernel stacks go to the failure report, and after
# three such daemons the loop stops (the rest would only wait as long).
#
# Prints "fault points: N" (runs made).  $FAULT_LOOP_MAX caps K (a quick
# look); $FAULT_LOOP_ONLY="MODE N" runs one point (MODE once or dying) and
# keeps its files in $FAULT_LOOP_KEEP if set.  Exit 0 pass, 1 fail, 77 skip
# (not root, no /dev/fuse; fail with MENDFS_TEST_STRICT=1).
set -eu
. "$(dirname "$0")/lib.sh"

name=fault-loop
need_progs MENDFS MKFS_MENDFS FSCK_MENDFS FAULTLOAD
need_root_fuse
base=/dev/shm
[ -d "$base" ] && [ -w "$base" ] || base=/tmp
work_init fl "$base"
TPL=$WORK/template

failures=0
failed_points=""
hangs=0 # daemons that did not unmount or exit in time
# bad POINT WHY: one failed point (details of the first few)
bad() {
	failures=$((failures + 1))
	failed_points="$failed_points [$1]"
	if [ "$failures" -le 5 ]; then
		echo "FAIL (fault-loop) at $1: $2" >&2
		[ -s "$LOG" ] && tail -25 "$LOG" | sed 's/^/  daemon: /' >&2
		[ -s "$WORK/out" ] && tail -5 "$WORK/out" | sed 's/^/  workload: /' >&2
	fi
	return 0
}

# Waits without a process per poll: the loop runs 300+ points.
# (The FIFO is opened for each wait, never held open: a descriptor kept by
# the shell would be inherited by every daemon and workload it starts, and
# anything written to it would end the waits early.)
mkfifo "$WORK/nap"
nap() { read -r -t "$1" <>"$WORK/nap" || true; }
# usecs_since T0: microseconds since $EPOCHREALTIME was T0
usecs_since() {
	local now=$EPOCHREALTIME
	echo $((${now/./} - ${1/./}))
}
# is_mounted: $MNT in the mount table.  The table is read whole, front to
# back: bash's `while read` reads 128 bytes at a time and seeks back after
# each line, and a seek in /proc/self/mountinfo counts bytes from the start
# again, so while other mounts come and go (tests running beside this one)
# it can skip the line it is looking for.
is_mounted() {
	local table
	table=$(</proc/self/mountinfo)
	[[ $table == *" $MNT "* ]]
}

# start OPTS: start the daemon; 0 once mounted, 1 if it exited first (or hung: killed)
start() {
	local i
	"$MENDFS" -f -o "commit=0$1" "$IMG" "$MNT" 2>>"$LOG" &
	DPID=$!
	PIDS+=("$DPID")
	for ((i = 0; i < 2000; i++)); do
		is_mounted && return 0
		kill -0 "$DPID" 2>/dev/null || return 1
		nap 0.002
	done
	echo "fault-loop: not mounted after 4 s" >>"$LOG"
	stop_daemon
	return 1
}

# elapsed_since T0: seconds since $EPOCHREALTIME was T0
elapsed_since() {
	echo $(($(usecs_since "$1") / 1000000))
}

# show_hung PID: what a daemon that does not exit is doing: each thread's
# state and kernel wait channel, and the kernel stack of the first thread
# not running or sleeping interruptibly (D: waiting in the kernel, Z: exited)
show_hung() {
	local t st stack=""
	for t in /proc/"$1"/task/*; do
		st=$(cut -d' ' -f2-3 "$t/stat" 2>/dev/null) || continue
		echo "  thread ${t##*/}: $st wchan $(cat "$t/wchan" 2>/dev/null)"
		[[ -z $stack && $st != *" S" && $st != *" R" ]] && stack=$t
	done
	[ -n "$stack" ] && sed 's/^/    /' "$stack/stack" 2>/dev/null | head -8
	return 0
}

# stop_daemon: unmount if mounted and reap the daemon (bounded); sets $dstatus
stop_daemon() {
	local i s t0
	dstatus=0
	if is_mounted; then
		if ! timeout 20 umount "$MNT" 2>>"$LOG"; then
			echo "fault-loop: umount hung or failed" >>"$LOG"
			umount -l "$MNT" 2>/dev/null
			dstatus=hang
			hangs=$((hangs + 1))
		fi
	fi
	t0=$EPOCHREALTIME
	# 20 s by the clock, however the waits go
	for ((i = 0; $(usecs_since "$t0") < 20000000; i++)); do
		kill -0 "$DPID" 2>/dev/null || break
		nap 0.002
	done
	if kill -0 "$DPID" 2>/dev/null; then
		echo "fault-loop: the daemon did not exit within 20 s" \
			"(waited $(elapsed_since "$t0") s, $i polls)" >>"$LOG"
		show_hung "$DPID" >>"$LOG"
		kill -9 "$DPID" 2>/dev/null || true # it may have ended just now
		dstatus=hang
		hangs=$((hangs + 1))
		# its mount is dead now: gone before the next point mounts there
		for ((i = 0; i < 10; i++)); do
			is_mounted || break
			umount -l "$MNT" 2>/dev/null || nap 0.1
		done
	fi
	reap "$DPID" 2>/dev/null && s=0 || s=$?
	[ "$dstatus" = hang ] || dstatus=$s
}

daemon_ok() {
	[ "$dstatus" = 0 ] || [ "$dstatus" = 1 ] || return 1
	! grep -qE 'Sanitizer|runtime error|Assertion .* failed|double free|corrupted' "$LOG"
}

# point MODE N: one run; MODE once or dying
point() {
	local what="$1 $2" opt mounted=1 rc
	[ "$1" = dying ] && opt=",fault_inject=$2+" || opt=",fault_inject=$2"
	cp "$TPL" "$IMG"
	: >"$LOG"
	: >"$WORK/out"
	: >"$WORK/manifest"
	start "$opt" || mounted=0
	if [ $mounted = 1 ]; then
		timeout 30 "$FAULTLOAD" run "$MNT" "$WORK/manifest" >"$WORK/out" 2>&1 && rc=0 || rc=$?
		case $rc in
		0) ;;
		124) bad "$what" "the workload hung"; stop_daemon; return ;;
		*) bad "$what" "the workload failed (status $rc)" ;;
		esac
	fi
	stop_daemon
	daemon_ok || { bad "$what" "daemon crashed or hung (status $dstatus)"; return; }
	timeout 60 "$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 && rc=0 || rc=$?
	if [ $rc != 0 ] && { [ $rc != 4 ] || grep -E '^F[0-9]{4}' "$WORK/fsck" |
		grep -qvE '^F000[24]:'; }; then
		cat "$WORK/fsck" >>"$LOG"
		bad "$what" "fsck.mendfs -n after the faults (status $rc)"
		return
	fi
	: >"$LOG"
	start "" || { bad "$what" "remount without faults failed"; stop_daemon; return; }
	timeout 30 "$FAULTLOAD" verify "$MNT" "$WORK/manifest" >"$WORK/out" 2>&1 ||
		bad "$what" "fsync'ed files damaged"
	stop_daemon
	[ "$dstatus" = 0 ] || { bad "$what" "clean remount: daemon status $dstatus"; return; }
	if ! timeout 60 "$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1; then
		cat "$WORK/fsck" >>"$LOG"
		bad "$what" "fsck.mendfs -n after the remount"
	fi
}

mkfs_mendfs -f -N 1024 "$TPL" 16M

if [ -n "${FAULT_LOOP_ONLY:-}" ]; then
	point $FAULT_LOOP_ONLY
	[ -n "${FAULT_LOOP_KEEP:-}" ] && cp -r "$WORK/." "$FAULT_LOOP_KEEP/"
	[ "$failures" = 0 ] && echo "fault point $FAULT_LOOP_ONLY: ok"
	[ "$failures" = 0 ]
	exit
fi

# the dry run: no fault, count the operations
cp "$TPL" "$IMG"
: >"$LOG"
start ",fault_inject=0" || fail "mount without faults"
"$FAULTLOAD" run "$MNT" "$WORK/manifest" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out" >&2; fail "the workload without faults"; }
stop_daemon
[ "$dstatus" = 0 ] || fail "daemon status $dstatus without faults"
K=$(sed -n 's/^mendblk: fault injection: \([0-9]*\) operations.*/\1/p' "$LOG")
[ -n "$K" ] && [ "$K" -gt 0 ] || fail "no operation count"
echo "workload: $K device operations"
[ -n "${FAULT_LOOP_MAX:-}" ] && [ "$K" -gt "$FAULT_LOOP_MAX" ] && K=$FAULT_LOOP_MAX

points=0
for mode in once dying; do
	for ((n = 1; n <= K; n++)); do
		point "$mode" "$n"
		points=$((points + 1))
		if [ "$hangs" -ge 3 ]; then
			echo "fault-loop: stopped after $hangs daemons that did not exit" \
				"(what their threads were doing is above)" >&2
			break 2
		fi
	done
done
echo "fault points: $points"
if [ "$failures" -gt 0 ]; then
	echo "FAIL (fault-loop): $failures of $points points:$failed_points" >&2
	exit 1
fi
echo "fault-loop: all $points points passed"
