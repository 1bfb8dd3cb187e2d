#!/bin/bash
# SPDX-License-Identifier: MIT
#
# FUSE over io_uring (mendfs -o io_uring, fs/fuse/transport_uring.c):
#   io         the rings carry the requests (mendctl stats: transport io_uring,
#              ring_requests growing), data written and read back intact, on
#              both CPUs' queues
#   ioctl      a follower of the damage events (an ioctl that waits a second
#              at a time) does not hold up the other requests of its CPU
#   fsync aside an fsync held inside the daemon (the test hook
#              MENDFS_DEBUG_FSYNC_GATE) does not hold up the other requests of
#              its CPU: a LOOKUP, an OPEN, READs and a WRITE from that CPU are
#              answered while it waits, and again for a second one
#   teardown   umount, umount -l, SIGTERM, a connection abort and kill -9 in
#              the middle of writes: the daemon ends, the image is consistent
#              and what was synced is there
#   refused    the kernel refuses every entry's registration (the daemon's
#              test hook MENDFS_DEBUG_URING_BAD_REGISTER=1 makes their header
#              areas too short), then only queue 1's (=queue:1), then only one
#              entry of queue 1 (=entry:1): one message saying which, and the
#              transport is /dev/fuse with no ring request while a queue has
#              no entry, the rings otherwise; data written, fsync'ed and read
#              back intact from both CPUs, the unmount and fsck clean
#   failed     queue 1 fails before it registers (the test hook
#              MENDFS_DEBUG_URING_FAIL_QUEUE=1: submitting its REGISTERs;
#              =1:ring, =1:thread: setting up its ring, starting its thread;
#              =0: queue 0): the mount comes up on /dev/fuse, one message
#              naming the failure, the rest as in refused
#   non-root   the daemon run by an unprivileged user (nobody), mounting
#              through fusermount3: FUSE over io_uring works (Linux 6.18
#              asks for no privilege), or else the daemon says so once and
#              runs on /dev/fuse; data written and read back intact, the
#              unmount by fusermount3 -u and fsck clean (/dev/fuse is made
#              0666 for the step where it is not, as udev's rule would)
#   fallback   enable_uring off: one message, the transport is /dev/fuse, and
#              everything works
# Needs root, /dev/fuse and a kernel with FUSE over io_uring (6.14 or later).
name=uring
. "$(dirname "$0")/lib.sh"
# this test picks the transport of each mount itself (the fallback step runs
# without io_uring): not lib.sh's mount_fg check of CI's io_uring pass
MENDFS_TEST_TRANSPORT=
need_root_fuse
need_progs MENDFS MKFS_MENDFS MENDCTL FSCK_MENDFS
need_cmds setpriv fusermount3 taskset
uring_enable
work_init uring /dev/shm

FUSECTL=/sys/fs/fuse/connections
FUSECTL_MOUNTED=0
FUSE_MODE=""  # /dev/fuse's mode before the non-root step changed it
USER_MNT=""   # the non-root step's mount point
on_cleanup() {
	# a failed "fsync aside" step leaves the daemon's fsync waiting at the gate
	[ ! -p "$WORK/gate" ] || timeout -s KILL 2 sh -c "echo x >'$WORK/gate'" 2>/dev/null || true
	[ "$FUSECTL_MOUNTED" = 1 ] && umount "$FUSECTL" 2>/dev/null
	[ -n "$USER_MNT" ] && grep -q " $USER_MNT " /proc/mounts && umount -l "$USER_MNT"
	[ -n "$FUSE_MODE" ] && chmod "$FUSE_MODE" /dev/fuse
}

stat_of() { # stat_of KEY: a counter of mendctl stats
	"$MENDCTL" stats "$MNT" | awk -v k="$1" '$1 == k { print $2 }'
}

fsck_clean() {
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck.log" 2>&1 ||
		{ cat "$WORK/fsck.log" >&2; fail "fsck.mendfs -n after $step"; }
}

mkfs_mendfs "$IMG" 256M

step=io
mount_fg io_uring
[ "$(transport_of "$MNT")" = io_uring ] || fail "transport $(transport_of "$MNT"), not io_uring"
r0=$(stat_of ring_requests)
head -c 8M /dev/urandom >"$WORK/data"
for cpu in 0 1; do
	taskset -c $cpu dd if="$WORK/data" of="$MNT/f$cpu" bs=4k conv=fsync status=none ||
		fail "writing from CPU $cpu"
done
echo 3 >/proc/sys/vm/drop_caches
for cpu in 0 1; do
	taskset -c $cpu cmp "$WORK/data" "$MNT/f$cpu" || fail "f$cpu read back differs (CPU $cpu)"
done
r1=$(stat_of ring_requests)
# 2 x 2048 writes of 4 KiB, each a request of its own (the reads are readahead's, fewer)
[ "$r1" -ge $((r0 + 4096)) ] || fail "ring_requests $r0 -> $r1: the rings did not carry the I/O"
grep -q "FUSE over io_uring" "$LOG" && fail "unexpected message: $(grep "FUSE over io_uring" "$LOG")"

step=ioctl
# the follower's ioctls arrive on CPU 0's queue and wait up to a second each
taskset -c 0 "$MENDCTL" --json events "$MNT" >"$WORK/events" 2>&1 &
FOLLOWER=$!
sleep 1.5
t0=$SECONDS
for i in $(seq 300); do
	taskset -c 0 sh -c "echo $i > '$MNT/s'; cat '$MNT/s' >/dev/null" || fail "small I/O $i"
done
elapsed=$((SECONDS - t0))
kill -0 $FOLLOWER 2>/dev/null || fail "mendctl events ended: $(cat "$WORK/events")"
kill $FOLLOWER
wait $FOLLOWER 2>/dev/null
# 300 rounds take well under a second; behind a waiting ioctl each would wait for it
[ "$elapsed" -lt 60 ] || fail "300 small I/Os beside an events follower took ${elapsed}s"
[ "$(cat "$MNT/s")" = 300 ] || fail "s holds '$(cat "$MNT/s")'"

# hold_fsync: an fsync of $MNT/held from CPU 0 waiting at the gate ($SYNCER)
hold_fsync() {
	local n i
	n=$(grep -c "an fsync waits at" "$LOG")
	mkfifo "$WORK/gate"
	taskset -c 0 sync "$MNT/held" &
	SYNCER=$!
	for ((i = 0; i < 300; i++)); do
		[ "$(grep -c "an fsync waits at" "$LOG")" -gt "$n" ] && return
		sleep 0.1
	done
	fail "the fsync did not reach the daemon's gate"
}
release_fsync() {
	echo x >"$WORK/gate"
	wait $SYNCER || fail "sync(1) of the held file failed"
	rm "$WORK/gate"
}

step="fsync aside"
# an fsync held inside the daemon (the test hook MENDFS_DEBUG_FSYNC_GATE: it
# waits for a byte from a FIFO while that exists) while the same CPU's queue
# answers a LOOKUP, an OPEN, a READ and a WRITE; on the ring's thread it would
# hold them all
umount_fg
export MENDFS_DEBUG_FSYNC_GATE=$WORK/gate
mount_fg io_uring
unset MENDFS_DEBUG_FSYNC_GATE
echo before >"$MNT/held"
hold_fsync
# dentries and pages dropped: LOOKUP, OPEN and READs reach the daemon
echo 2 >/proc/sys/vm/drop_caches
echo 1 >/proc/sys/vm/drop_caches
# (SIGKILL: a process waiting for a FUSE reply ignores SIGTERM)
timeout -s KILL 30 taskset -c 0 cmp "$WORK/data" "$MNT/f0" ||
	fail "reading f0 beside a held fsync (CPU 0's queue held up?)"
timeout -s KILL 30 taskset -c 0 sh -c "echo beside > '$MNT/beside'" ||
	fail "a write beside a held fsync (CPU 0's queue held up?)"
kill -0 $SYNCER 2>/dev/null || fail "the fsync ended before the gate opened"
release_fsync

step="fsync aside: a second held fsync"
# the first held fsync took seconds: the average is far above 200 us
hold_fsync
echo 1 >/proc/sys/vm/drop_caches
timeout -s KILL 30 taskset -c 0 cmp "$WORK/data" "$MNT/f0" ||
	fail "reading f0 beside a held fsync after a slow one (CPU 0's queue held up?)"
release_fsync
[ "$(cat "$MNT/beside")" = beside ] || fail "beside holds '$(cat "$MNT/beside")'"
grep -q "FUSE over io_uring" "$LOG" && fail "unexpected message: $(grep "FUSE over io_uring" "$LOG")"

step="umount"
umount_fg
fsck_clean

step="umount -l"
mount_fg io_uring
cmp "$WORK/data" "$MNT/f0" || fail "f0 differs after a remount"
pid=$DPID
umount -l "$MNT" || fail "umount -l"
wait_gone "$pid" 30 || fail "the daemon did not exit after umount -l"
reap "$pid" || fail "the daemon exited with status $? after umount -l"
fsck_clean

step=SIGTERM
mount_fg io_uring
pid=$DPID
kill -TERM "$pid"
wait_gone "$pid" 30 || fail "the daemon did not exit on SIGTERM"
reap "$pid" || fail "the daemon exited with status $? on SIGTERM"
mountpoint -q "$MNT" && fail "still mounted after SIGTERM"
fsck_clean

step=abort
if ! mountpoint -q "$FUSECTL"; then
	mount -t fusectl none "$FUSECTL" || fail "mounting fusectl"
	FUSECTL_MOUNTED=1
fi
mount_fg io_uring
pid=$DPID
conn=$FUSECTL/$(($(stat -c '%d' "$MNT")))
[ -e "$conn/abort" ] || fail "no $conn/abort"
echo 1 >"$conn/abort"
wait_gone "$pid" 30 || fail "the daemon did not exit after the connection was aborted"
reap "$pid" || true # an aborted connection may end the loop with an error
undo_mount "$MNT"
if [ "$FUSECTL_MOUNTED" = 1 ]; then
	umount "$FUSECTL" && FUSECTL_MOUNTED=0
fi
mount_fg io_uring # replays the journal if the abort cut it short
cmp "$WORK/data" "$MNT/f1" || fail "f1 differs after the abort"
umount_fg
fsck_clean

step="kill -9"
mount_fg io_uring
dd if="$WORK/data" of="$MNT/synced" bs=64k conv=fsync status=none || fail "writing synced"
(while :; do dd if="$WORK/data" of="$MNT/busy" bs=4k status=none 2>/dev/null || exit 0; done) &
writer=$!
sleep 1
crash
wait $writer 2>/dev/null
mount_fg io_uring
cmp "$WORK/data" "$MNT/synced" || fail "synced differs after kill -9"
umount_fg
fsck_clean

# degraded VAR=VALUE TRANSPORT MESSAGE: mounted with the daemon's test hook
# VAR=VALUE, it says "FUSE over io_uring: MESSAGE" and nothing else about
# io_uring, the transport is TRANSPORT (and the rings carry the I/O or none
# of it), data written from both CPUs is read back intact, the unmount and
# fsck are clean
degraded() {
	local var=${1%%=*} cpu r0 r1 n
	: >"$LOG"
	export "$var=${1#*=}"
	mount_fg io_uring
	unset "$var"
	[ "$(transport_of "$MNT")" = "$2" ] || fail "transport $(transport_of "$MNT"), not $2"
	r0=$(stat_of ring_requests)
	for cpu in 0 1; do
		taskset -c $cpu dd if="$WORK/small" of="$MNT/d$cpu" bs=4k conv=fsync status=none ||
			fail "writing from CPU $cpu"
	done
	echo 3 >/proc/sys/vm/drop_caches
	for cpu in 0 1; do
		taskset -c $cpu cmp "$WORK/small" "$MNT/d$cpu" || fail "d$cpu read back differs (CPU $cpu)"
	done
	cmp "$WORK/data" "$MNT/f0" || fail "f0 differs"
	r1=$(stat_of ring_requests)
	if [ "$2" = io_uring ]; then
		# 2 x 256 writes of 4 KiB
		[ "$r1" -ge $((r0 + 512)) ] || fail "ring_requests $r0 -> $r1: the rings did not carry the I/O"
	else
		[ "$r1" = 0 ] || fail "ring_requests $r1 over /dev/fuse"
	fi
	n=$(grep -c "FUSE over io_uring" "$LOG")
	[ "$n" = 1 ] || fail "$n messages about io_uring, not one: $(cat "$LOG")"
	grep -qF "FUSE over io_uring: $3" "$LOG" || fail "not the message '$3': $(cat "$LOG")"
	umount_fg
	fsck_clean
}

# the kernel's queues, one per possible CPU ("0-N"), 8 entries each
NQ=$(($(sed 's/.*[-,]//' /sys/devices/system/cpu/possible) + 1))
ENTRIES=$((NQ * 8))
EINVAL="Invalid argument"
ENOMEM="Cannot allocate memory"
EAGAIN="Resource temporarily unavailable"
TO_DEV=": requests go through /dev/fuse"
head -c 1M /dev/urandom >"$WORK/small"

step=refused
degraded MENDFS_DEBUG_URING_BAD_REGISTER=1 dev_fuse \
	"the kernel refused the registration of every entry ($EINVAL)$TO_DEV"
step="refused queue 1"
degraded MENDFS_DEBUG_URING_BAD_REGISTER=queue:1 dev_fuse \
	"the kernel refused the registration of 8 of $ENTRIES entries ($EINVAL), which left queue 1 without any$TO_DEV"
step="refused one entry"
degraded MENDFS_DEBUG_URING_BAD_REGISTER=entry:1 io_uring \
	"the kernel refused the registration of 1 of $ENTRIES entries ($EINVAL); every queue has others, and the rings carry the requests"

step=failed
degraded MENDFS_DEBUG_URING_FAIL_QUEUE=1 dev_fuse \
	"queue 1 could not submit its registration ($ENOMEM)$TO_DEV"
step="failed queue 0"
degraded MENDFS_DEBUG_URING_FAIL_QUEUE=0 dev_fuse \
	"queue 0 could not submit its registration ($ENOMEM)$TO_DEV"
step="failed ring"
degraded MENDFS_DEBUG_URING_FAIL_QUEUE=1:ring dev_fuse \
	"cannot set up the ring of queue 1 ($ENOMEM)$TO_DEV"
step="failed thread"
degraded MENDFS_DEBUG_URING_FAIL_QUEUE=1:thread dev_fuse \
	"cannot start the thread of queue 1 ($EAGAIN)$TO_DEV"

# a queue whose ring cannot wait for requests any more, after it carried
# some: the daemon stops with one message (the kernel would keep sending that
# CPU's requests to the dead ring, and its processes would wait for ever); the
# writer on that CPU gets an error instead of hanging, fsync'ed data survives
step="lost queue"
: >"$LOG"
export MENDFS_DEBUG_URING_FAIL_QUEUE=1:wait
mount_fg io_uring
unset MENDFS_DEBUG_URING_FAIL_QUEUE
pid=$DPID
[ "$(transport_of "$MNT")" = io_uring ] || fail "transport $(transport_of "$MNT"), not io_uring"
taskset -c 0 dd if="$WORK/small" of="$MNT/kept" bs=64k conv=fsync status=none ||
	fail "writing kept from CPU 0"
timeout 60 taskset -c 1 dd if="$WORK/small" of="$MNT/lost" bs=4k status=none 2>/dev/null &
writer=$!
wait_gone "$pid" 30 || fail "the daemon did not stop after queue 1's ring failed"
reap "$pid" || fail "the daemon exited with status $? after queue 1's ring failed"
rc=0
wait "$writer" || rc=$?
[ "$rc" != 124 ] || fail "the writer on CPU 1 hung"
[ "$rc" != 0 ] || fail "the writer on CPU 1 succeeded although its queue was lost"
mountpoint -q "$MNT" && fail "still mounted after queue 1's ring failed"
n=$(grep -c "FUSE over io_uring" "$LOG")
[ "$n" = 1 ] || fail "$n messages about io_uring, not one: $(cat "$LOG")"
grep -qF "FUSE over io_uring: queue 1 cannot wait for requests (Input/output error): stopping" "$LOG" ||
	fail "not the expected message: $(cat "$LOG")"
fsck_clean
mount_fg io_uring
cmp "$WORK/small" "$MNT/kept" || fail "kept differs after queue 1's ring failed"
umount_fg
fsck_clean

step=non-root
# an image and a mount point of nobody's, in a directory it can reach
as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
mkdir "$WORK/user"
chmod 711 "$WORK"
USER_IMG=$WORK/user/img
USER_MNT=$WORK/user/m
mkdir "$USER_MNT"
"$MKFS_MENDFS" -q "$USER_IMG" 64M >"$WORK/mkfs.log" 2>&1 || fail "mkfs.mendfs: $(cat "$WORK/mkfs.log")"
MNT_ROOT=$MNT
MNT=$USER_MNT IMG=$USER_IMG
mount_fg # as root, to give the root directory to nobody
chown 65534:65534 "$MNT"
umount_fg
MNT=$MNT_ROOT IMG=$WORK/img
chown -R 65534:65534 "$WORK/user"
if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
	FUSE_MODE=$(stat -c %a /dev/fuse)
	chmod 666 /dev/fuse
fi
: >"$LOG"
as_user "$MENDFS" -f -o io_uring "$USER_IMG" "$USER_MNT" 2>>"$LOG" &
DPID=$!
PIDS+=("$DPID")
for ((i = 0; i < 200; i++)); do
	as_user mountpoint -q "$USER_MNT" && break
	kill -0 "$DPID" 2>/dev/null || fail "the daemon exited before mounting"
	sleep 0.1
done
as_user mountpoint -q "$USER_MNT" || fail "$USER_MNT not mounted after 20 s"
tr=$(as_user "$MENDCTL" --json stats "$USER_MNT" | sed -n 's/.*"transport":"\([a-z_]*\)".*/\1/p')
n=$(grep -c "FUSE over io_uring" "$LOG")
case $tr in
io_uring) [ "$n" = 0 ] || fail "io_uring, but: $(cat "$LOG")" ;;
dev_fuse) [ "$n" = 1 ] || fail "/dev/fuse, with $n messages about io_uring, not one: $(cat "$LOG")" ;;
*) fail "transport '$tr'" ;;
esac
chmod 644 "$WORK/small"
for cpu in 0 1; do
	as_user taskset -c $cpu dd if="$WORK/small" of="$USER_MNT/u$cpu" bs=4k conv=fsync status=none ||
		fail "writing from CPU $cpu"
done
echo 3 >/proc/sys/vm/drop_caches
for cpu in 0 1; do
	as_user taskset -c $cpu cmp "$WORK/small" "$USER_MNT/u$cpu" || fail "u$cpu read back differs"
done
r=$(as_user "$MENDCTL" stats "$USER_MNT" | awk '$1 == "ring_requests" { print $2 }')
if [ "$tr" = io_uring ]; then
	[ "$r" -ge 512 ] || fail "ring_requests $r: the rings did not carry the I/O"
else
	[ "$r" = 0 ] || fail "ring_requests $r over /dev/fuse"
fi
pid=$DPID
as_user fusermount3 -u "$USER_MNT" || fail "fusermount3 -u"
wait_gone "$pid" 30 || fail "the daemon did not exit after fusermount3 -u"
reap "$pid" || fail "the daemon exited with status $?"
"$FSCK_MENDFS" -n "$USER_IMG" >"$WORK/fsck.log" 2>&1 ||
	{ cat "$WORK/fsck.log" >&2; fail "fsck.mendfs -n after $step"; }
if [ -n "$FUSE_MODE" ]; then
	chmod "$FUSE_MODE" /dev/fuse && FUSE_MODE=""
fi
echo "non-root: transport $tr"

step=fallback
echo 0 >"$URING_PARAM"
: >"$LOG"
mount_fg io_uring
[ "$(transport_of "$MNT")" = dev_fuse ] || fail "transport $(transport_of "$MNT") with enable_uring off"
n=$(grep -c "FUSE over io_uring: not offered by the kernel" "$LOG")
[ "$n" = 1 ] || fail "the fallback was said $n times, not once"
cmp "$WORK/data" "$MNT/f0" || fail "f0 differs over /dev/fuse"
echo fallback >"$MNT/fb" && [ "$(cat "$MNT/fb")" = fallback ] || fail "writing over /dev/fuse"
[ "$(stat_of ring_requests)" = 0 ] || fail "ring_requests $(stat_of ring_requests) with no rings"
umount_fg
fsck_clean
echo 1 >"$URING_PARAM"
echo "ok: uring"
