#!/bin/bash
# SPDX-License-Identifier: MIT
#
# progress-test: the human progress bar (issue 18 item 7).  On a terminal
# (a pty from script(1)) `fsck.mendfs -C 0` and mkfs.mendfs on a device of
# 1 GiB or more draw a bar "DEVICE: |====   | 42.0%" rewritten with '\r', that
# reaches 100.0% and is erased before the report; into a pipe or a file they
# draw nothing; `fsck -C FD` (FD > 0) keeps its machine lines.  No mount.
set -u
. "$(dirname "$0")/lib.sh"

need_progs MKFS_MENDFS FSCK_MENDFS
need_cmds script od
work_init progress

# on_tty OUT CMD...: run CMD on a pseudo-terminal, its output in OUT
on_tty() {
	local out=$1
	shift
	timeout 120 script -qec "$(printf '%q ' "$@")" /dev/null >"$out" 2>&1 ||
		fail "on a terminal: $* failed: $(tr '\r' '\n' <"$out" | tail -5)"
}

# has_bar FILE WHAT: FILE holds the bar of DEVICE $IMG, up to 100.0%, then the erase
has_bar() {
	grep -qa $'\r'"$IMG: |=* *|  *[0-9]*\\.[0-9]%" "$1" || fail "$2: no progress bar: $(od -c "$1" | head)"
	grep -qa "|=*| 100\\.0%" "$1" || fail "$2: the bar does not reach 100.0%"
	grep -qa $'\r\e\\[K' "$1" || fail "$2: the bar is not erased before the report"
}

# no_bar FILE WHAT: no bar, no carriage return but at a line end, no escape in FILE
no_bar() {
	# a terminal ends lines with \r\n: a \r elsewhere, or an escape, is drawing
	grep -qaP '\r(?!$)|\x1b' "$1" && fail "$2: drawn although not on a terminal: $(od -c "$1" | head)"
	grep -qa '|=' "$1" && fail "$2: a bar although not on a terminal"
	return 0
}

truncate -s 1G "$IMG"
step=mkfs
on_tty "$WORK/mkfs.tty" "$MKFS_MENDFS" "$IMG"
has_bar "$WORK/mkfs.tty" "mkfs.mendfs on a terminal"
grep -qa "^inodes:" "$WORK/mkfs.tty" || fail "mkfs.mendfs: no summary after the bar"
"$MKFS_MENDFS" -f "$IMG" >"$WORK/mkfs.out" 2>&1 || fail "mkfs.mendfs -f into a file"
no_bar "$WORK/mkfs.out" "mkfs.mendfs into a file"
on_tty "$WORK/mkfs-q.tty" "$MKFS_MENDFS" -q -f "$IMG"
no_bar "$WORK/mkfs-q.tty" "mkfs.mendfs -q on a terminal"

step=fsck
on_tty "$WORK/fsck.tty" "$FSCK_MENDFS" -n -C 0 "$IMG"
has_bar "$WORK/fsck.tty" "fsck.mendfs -C 0 on a terminal"
grep -qa $'\e\\[K'"$IMG: 0 files, 1 directories" "$WORK/fsck.tty" ||
	fail "fsck.mendfs -C 0: the summary does not start on the erased line: $(od -c "$WORK/fsck.tty" | tail -5)"
"$FSCK_MENDFS" -n -C 0 "$IMG" >"$WORK/fsck.out" 2>&1 || fail "fsck.mendfs -n -C 0 into a file"
no_bar "$WORK/fsck.out" "fsck.mendfs -C 0 into a file"
"$FSCK_MENDFS" -n -C 0 "$IMG" 2>&1 | cat >"$WORK/fsck.pipe"
no_bar "$WORK/fsck.pipe" "fsck.mendfs -C 0 into a pipe"
# -C FD: the machine lines, unchanged, also from a terminal
on_tty "$WORK/fsck3.tty" bash -c '"$0" -n -C 3 "$1" 3>"$2"' "$FSCK_MENDFS" "$IMG" "$WORK/fd3"
no_bar "$WORK/fsck3.tty" "fsck.mendfs -C 3"
for p in 0 1 2 3 4 5; do
	grep -q "^$p [0-9]* [0-9]* $IMG\$" "$WORK/fd3" || fail "-C 3: no machine line for pass $p"
done
echo "ok: progress bars"
