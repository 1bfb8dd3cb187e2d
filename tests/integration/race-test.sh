#!/bin/bash
# SPDX-License-Identifier: MIT
#
# race-test.sh [SECONDS] [THREADS]: race-stress ($RACE_STRESS) against a mount
# of the daemon $MENDFS for SECONDS (default 20) with THREADS workers (default
# 4) plus an ioctl thread, the commit thread running every second; then the
# daemon must exit 0 at unmount, its log must hold no ThreadSanitizer report
# (a daemon built with -Db_sanitize=thread, as .ci/run builds one, reports
# every data race it sees), and fsck.mendfs -n must find the filesystem clean.
set -eu
. "$(dirname "$0")/lib.sh"

secs=${1:-20}
threads=${2:-4}
need_progs MENDFS MKFS_MENDFS RACE_STRESS FSCK_MENDFS
need_root_fuse
work_init race
# A report makes the daemon exit non-zero at unmount, and stops nothing.
export TSAN_OPTIONS="${TSAN_OPTIONS:-} halt_on_error=0 exitcode=66 second_deadlock_stack=1"
mkfs_mendfs -f "$IMG" 512M
mount_fg "commit=1"
step=stress
timeout $((secs + 120)) "$RACE_STRESS" "$MNT" "$secs" "$threads" >"$WORK/out" 2>&1 ||
	{ cat "$WORK/out"; fail "race-stress"; }
cat "$WORK/out"
step=unmount
grep -q "ThreadSanitizer" "$LOG" && { grep -A40 "WARNING: ThreadSanitizer" "$LOG" | head -200 >&2; fail "ThreadSanitizer reports in the daemon"; }
umount_fg
grep -q "ThreadSanitizer" "$LOG" && { grep -A40 "WARNING: ThreadSanitizer" "$LOG" | head -200 >&2; fail "ThreadSanitizer reports in the daemon"; }
step=fsck
rc=0
"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$WORK/fsck.out"; fail "fsck.mendfs -n after the run: exit $rc"; }
echo "race-test: no race reported, fsck clean"
