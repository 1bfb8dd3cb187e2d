#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Recovery integration tests (docs/RECOVERY.md) on real
# FUSE mounts: `recovery-test.sh NAME` with NAME one of
#   read     a poisoned sector mid-block: plain read, recovery read, badranges,
#            mendctl recover, in-place overwrite, hostile ioctls, a non-mendfs file
#   zeroinit zero-init in place, recovery writes over part of a poisoned sector,
#            a fully poisoned block, poison at end of file
#   inject   online poison injection: permissions (root, -o poison_inject), hostile
#            ranges, the poison reaching reads, BADRANGES and the emulation file,
#            surviving a remount
#   writeback  -o writeback: writes into a page with poison fail with EIO; a
#            whole-page overwrite clears it in place
#   matrix   recovery-matrix.c: five poison shapes x read/mmap/recovery read/badranges
#            x four repairs, verified again after a remount; injection under
#            readers; ioctl fuzzing
#   quarantine  recovery-matrix.c: an unlinked poisoned file's block is never reused
#   cli      mendctl's failures: recover refuses OUT that is FILE (by name, hard
#            link or symbolic link) and leaves FILE intact; a failed recover (FILE
#            off mendfs, OUT a directory, ENOSPC midway) leaves an existing OUT as
#            it was and no new or temporary file; every command's --json error is
#            one {"error", "exit_code"} object and no result
#   4k       a loop device with 4 KiB logical blocks (losetup -b 4096), uring
#            backend: the unit of poison is the logical block.  A poisoned sector
#            (injected online, or a line of the emulation file) loses its whole
#            4 KiB block: badranges, plain and recovery reads, mendctl recover; a
#            partial overwrite -> EIO, a recovery write zeroes the lost bytes, a
#            whole-block overwrite clears; growing from inside it and punching part
#            of it -> EIO; zeroinit of a partial unit: EIO if poisoned, in place if
#            clean.  Skip (77) when no
#            loop device can be made (FAIL under MENDFS_TEST_STRICT=1)
#   latent   latent poison (DEVICE.latent, -o latent=PATH): sectors nobody knows
#            of until a read touches them: badranges and the tables empty before,
#            the read fails with EIO at the sector and records it (badblocks file,
#            badranges, recovery read zero-fills exactly it, fsck.mendfs names the
#            file), the latent file forgets it; an overwrite before any read makes
#            a latent sector good; an overwrite after clears the poison
#   meta     metadata self-healing: one copy of an inode table block, a directory
#            tree block, an extent tree block, an xattr tree block and two journal
#            blocks poisoned; operations work, the bad copies are rewritten from their
#            twins (meta_repairs, the emulation file empties); both copies: EIO
# Programs from $MENDFS, $MKFS_MENDFS, $MENDCTL, $RCHECK.  Exit 0 pass, 1 fail,
# 77 skip (not root, no /dev/fuse).  Every mount is undone on exit.
set -u
. "$(dirname "$0")/lib.sh"

name=${1:?usage: recovery-test.sh NAME}
need_progs MENDFS MKFS_MENDFS MENDCTL RCHECK RMATRIX METACHECK SALVAGE FSCK_MENDFS
need_root_fuse
work_init rec
UNMOUNT=("$WORK/small")
DEV=  # the device to mount: $IMG unless set
LOOP= # a loop device made here (detached on exit)
# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() {
	if [ -n "$LOOP" ]; then
		losetup -d "$LOOP" 2>/dev/null || echo "warning: losetup -d $LOOP failed" >&2
	fi
}

rcheck() { timeout 60 "$RCHECK" "$@" || fail "recovery-check $*"; }
mendctl() { timeout 60 "$MENDCTL" "$@"; }

# first_sector FILE SIZE: the device sector of FILE's one extent (from mendctl bmap --json)
first_sector() {
	local j
	j=$(mendctl bmap --json "$1") || fail "mendctl bmap $1"
	[ "$(grep -o '"offset"' <<<"$j" | wc -l)" = 1 ] || fail "$1 is not one extent: $j"
	grep -q "\"offset\":0,\"length\":$2," <<<"$j" || fail "$1 extent: $j"
	grep -o '"sector":[0-9]*' <<<"$j" | cut -d: -f2
}

# make_f [OPTS]: mounted (with OPTS), f gets the pattern ($SIZE bytes), its
# first sector in $S and its map in $map; unmounted again
make_f() {
	mount_fg "${1:-}"
	rcheck pattern "$MNT/f" $SIZE
	S=$(first_sector "$MNT/f" $SIZE)
	map=$(mendctl bmap --json "$MNT/f")
	umount_fg
}

mkfs_mendfs "$IMG" 64M
SIZE=65536

case $name in
read)
	make_f
	# one sector mid-block: sector 3 of block 5, bytes [22016, 22528)
	echo "$((S + 5 * 8 + 3)) 1" >"$IMG.badblocks"
	mount_fg
	rcheck read "$MNT/f" $SIZE 22016
	rcheck preadv2 "$MNT/f" $SIZE 22016 512
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":22016,"length":512}]}' ] || fail "badranges: $out"
	out=$(mendctl badranges "$MNT/f") || fail "mendctl badranges (text)"
	[ "$out" = "22016 512" ] || fail "badranges text: $out"
	out=$(mendctl recover --json "$MNT/f" "$WORK/salvage") || fail "mendctl recover"
	[ "$out" = '{"bytes":65536,"zeroed":[{"offset":22016,"length":512}]}' ] ||
		fail "recover: $out"
	rcheck salvage "$WORK/expected" $SIZE 22016 512
	cmp "$WORK/salvage" "$WORK/expected" || fail "the salvage copy differs"
	# the example program of docs/examples/salvage.c does the same
	out=$(timeout 60 "$SALVAGE" "$MNT/f" "$WORK/salvage2") || fail "docs/examples/salvage"
	[ "$out" = "zero-filled 22016 512
salvaged 65536 bytes of $MNT/f, 512 zero-filled" ] || fail "salvage printed: $out"
	cmp "$WORK/salvage2" "$WORK/expected" || fail "the example's salvage copy differs"
	"$SALVAGE" "$WORK/expected" "$WORK/x" 2>/dev/null && fail "salvage of a file off mendfs succeeded"
	[ -e "$WORK/x" ] && fail "a failed salvage left its partial OUT behind"
	# the example never writes over anything: not FILE itself, not an existing OUT
	"$SALVAGE" "$MNT/f" "$MNT/f" 2>/dev/null && fail "salvage FILE FILE succeeded"
	[ "$(stat -c %s "$MNT/f")" = $SIZE ] || fail "salvage FILE FILE changed FILE's size"
	echo keep >"$WORK/keep"
	"$SALVAGE" "$MNT/f" "$WORK/keep" 2>/dev/null && fail "salvage over an existing OUT succeeded"
	[ "$(cat "$WORK/keep")" = keep ] || fail "salvage wrote over an existing OUT"
	out=$(mendctl stats --json "$MNT") || fail "mendctl stats"
	grep -q '"recovered_sectors":[1-9]' <<<"$out" || fail "stats: $out"
	grep -q '"meta_repairs":[0-9]' <<<"$out" || fail "stats: $out"
	grep -q '"poison_ranges":1' <<<"$out" || fail "stats: $out"
	# per-queue engine counters after the reads and writes above: every bio became a
	# request or merged into one, and something was dispatched
	! command -v python3 >/dev/null || python3 - "$out" <<'EOF' || fail "stats queues: $out"
import json, sys
j = json.loads(sys.argv[1])
qs = j["queues"]
assert qs and [q["queue"] for q in qs] == list(range(len(qs))), qs
for q in qs:
    assert q["ios"] == q["requests"] + q["merges"], q
    assert q["dispatch_batches"] <= q["requests"], q
    assert q["plug_flushes"] <= q["dispatch_batches"], q
    assert q["depth"] > 0 and q["tags_in_use"] <= q["depth"], q
assert sum(q["requests"] for q in qs) == j["requests"], (qs, j["requests"])
assert sum(q["ios"] for q in qs) >= j["reads"] + j["writes"] > 0, j
EOF
	mendctl stats "$MNT" | grep -q '^q0\.requests *[1-9]' || fail "stats: no q0.requests line"
	rcheck hostile "$MNT/f"
	kill -0 "$DPID" || fail "the daemon died"
	rcheck notmendfs "$WORK/plain"
	# a whole-block overwrite clears the poison in place
	rcheck overwrite "$MNT/f" 20480 4096
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[]}' ] || fail "badranges after the overwrite: $out"
	[ "$(mendctl bmap --json "$MNT/f")" = "$map" ] || fail "the overwrite moved the block"
	rcheck verify "$MNT/f" $SIZE
	umount_fg
	grep -q '^[0-9]' "$IMG.badblocks" && fail "poison left in $IMG.badblocks: $(cat "$IMG.badblocks")"
	mount_fg
	rcheck verify "$MNT/f" $SIZE
	umount_fg
	;;
latent)
	make_f
	mount_fg
	rcheck pattern "$MNT/g" $SIZE
	SG=$(first_sector "$MNT/g" $SIZE)
	umount_fg
	# f: sector 3 of block 5, bytes [22016, 22528); g: sector 1 of block 2
	printf '%s 1\n%s 1\n' $((S + 5 * 8 + 3)) $((SG + 2 * 8 + 1)) >"$IMG.latent"
	mount_fg
	for x in f g; do
		out=$(mendctl badranges --json "$MNT/$x") || fail "mendctl badranges $x"
		[ "$out" = '{"ranges":[]}' ] || fail "latent poison known before a read: $x: $out"
	done
	grep -q '^[0-9]' "$IMG.badblocks" 2>/dev/null && fail "latent poison in the table at mount"
	rcheck read "$MNT/f" $SIZE 22016
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":22016,"length":512}]}' ] || fail "badranges after the read: $out"
	grep -qx "$((S + 5 * 8 + 3)) 1" "$IMG.badblocks" || fail "not recorded: $(cat "$IMG.badblocks")"
	[ "$(grep -v '^#' "$IMG.latent")" = "$((SG + 2 * 8 + 1)) 1" ] ||
		fail "latent file after the read: $(cat "$IMG.latent")"
	out=$(mendctl badranges --json "$MNT/g") || fail "mendctl badranges g"
	[ "$out" = '{"ranges":[]}' ] || fail "g's latent sector found without a read: $out"
	rcheck preadv2 "$MNT/f" $SIZE 22016 512
	# g: overwritten before anything read it: good again, never poison
	rcheck overwrite "$MNT/g" 8192 4096
	[ -z "$(grep -v '^#' "$IMG.latent")" ] || fail "latent file after the overwrite: $(cat "$IMG.latent")"
	rcheck verify "$MNT/g" $SIZE
	out=$(mendctl badranges --json "$MNT/g") || fail "mendctl badranges g"
	[ "$out" = '{"ranges":[]}' ] || fail "g after the overwrite: $out"
	umount_fg
	# found poison outlives the mount, and fsck names the file
	rc=0
	"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || rc=$?
	[ $rc = 4 ] || fail "fsck -n: exit $rc, expected 4: $(cat "$WORK/fsck")"
	grep -q "/f" "$WORK/fsck" && grep -q "22016" "$WORK/fsck" || fail "fsck report: $(cat "$WORK/fsck")"
	# -o latent=PATH: block 7 of f, sector 0; the overwrite of block 5 clears its poison
	echo "$((S + 7 * 8)) 1" >"$WORK/lat"
	mount_fg "latent=$WORK/lat"
	rcheck overwrite "$MNT/f" 20480 4096
	rcheck read "$MNT/f" $SIZE 28672
	[ -z "$(grep -v '^#' "$WORK/lat")" ] || fail "latent=PATH file after the read: $(cat "$WORK/lat")"
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":28672,"length":512}]}' ] || fail "badranges (latent=PATH): $out"
	umount_fg
	;;
zeroinit)
	mount_fg
	rcheck pattern "$MNT/f" $SIZE
	rcheck pattern "$MNT/h" 10000
	S=$(first_sector "$MNT/f" $SIZE)
	H=$(first_sector "$MNT/h" 10000)
	map=$(mendctl bmap --json "$MNT/f")
	umount_fg
	# block 7 sector 0 [28672, 29184); block 9 sector 2 [37888, 38400);
	# all of block 11 [45056, 49152); h: the sector holding its last byte [9728, 10000)
	printf '%s\n' "$((S + 7 * 8)) 1" "$((S + 9 * 8 + 2)) 1" "$((S + 11 * 8)) 8" \
		"$((H + 2 * 8 + 3)) 1" >"$IMG.badblocks"
	mount_fg
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":28672,"length":512},{"offset":37888,"length":512},{"offset":45056,"length":4096}]}' ] ||
		fail "badranges: $out"
	rcheck preadv2 "$MNT/f" $SIZE 28672 512 37888 512 45056 4096
	out=$(mendctl badranges --json "$MNT/h") || fail "mendctl badranges h"
	[ "$out" = '{"ranges":[{"offset":9728,"length":272}]}' ] || fail "badranges h: $out"
	rcheck preadv2 "$MNT/h" 10000 9728 272
	rcheck read "$MNT/h" 10000 9728
	# a recovery write into the poisoned last sector, up to the end of file
	rcheck rwrite "$MNT/h" 9800 100
	[ "$(mendctl badranges --json "$MNT/h")" = '{"ranges":[]}' ] || fail "h still poisoned"
	rcheck verify "$MNT/h" 10000 9728 72 9900 100
	rcheck overwrite "$MNT/h" 9728 272
	[ "$(first_sector "$MNT/h" 10000)" = "$H" ] || fail "h moved"
	umount_fg
	echo "$((H + 2 * 8 + 3)) 1" >>"$IMG.badblocks"
	mount_fg
	rcheck preadv2 "$MNT/h" 10000 9728 272
	# zero-init: in place, poison cleared, the rest untouched, mtime set
	touch -d '2001-01-01' "$MNT/f"
	dd if="$MNT/f" of=/dev/null bs=4096 count=2 status=none || fail "read of clean blocks"
	mendctl zeroinit "$MNT/f" 4096 512 || fail "mendctl zeroinit (clean, cached sector)"
	mendctl zeroinit "$MNT/f" 28672 512 || fail "mendctl zeroinit"
	mendctl zeroinit "$MNT/f" 45056 4096 || fail "mendctl zeroinit (whole block)"
	mendctl zeroinit "$MNT/h" 9728 512 || fail "mendctl zeroinit at end of file"
	mendctl zeroinit "$MNT/f" 100 512 2>/dev/null && fail "zeroinit of a partial sector succeeded"
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":37888,"length":512}]}' ] || fail "badranges after zeroinit: $out"
	[ "$(mendctl badranges --json "$MNT/h")" = '{"ranges":[]}' ] || fail "h still poisoned"
	[ "$(stat -c %Y "$MNT/f")" -gt 1000000000 ] || fail "zeroinit left mtime $(stat -c %y "$MNT/f")"
	[ "$(mendctl bmap --json "$MNT/f")" = "$map" ] || fail "zeroinit moved blocks"
	# a recovery write over part of the poisoned sector of block 9
	rcheck rwrite "$MNT/f" 37900 100
	[ "$(mendctl badranges --json "$MNT/f")" = '{"ranges":[]}' ] || fail "f still poisoned"
	[ "$(mendctl bmap --json "$MNT/f")" = "$map" ] || fail "the recovery write moved blocks"
	zeros="4096 512 28672 512 37888 12 38000 400 45056 4096"
	rcheck verify "$MNT/f" $SIZE $zeros
	rcheck verify "$MNT/h" 10000 9728 272
	umount_fg
	mount_fg
	rcheck verify "$MNT/f" $SIZE $zeros
	out=$(mendctl stats "$MNT") || fail "mendctl stats"
	grep -q '^poison_ranges *0$' <<<"$out" || fail "stats: $out"
	umount_fg
	;;
inject)
	NSEC=$((64 * 1024 * 1024 / 512))
	# nobody must reach the mount point (allow_other) and run recovery-check
	chmod 755 "$WORK"
	cp "$RCHECK" "$WORK/rcheck"
	asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	mount_fg allow_other
	rcheck pattern "$MNT/f" $SIZE
	S=$(first_sector "$MNT/f" $SIZE)
	map=$(mendctl bmap --json "$MNT/f")
	# without -o poison_inject: EPERM, even for root; nothing recorded
	rcheck inject "$MNT" $((S + 8)) 1 EPERM
	out=$(mendctl inject "$MNT" $((S + 8)) 1 2>&1) && fail "mendctl inject without the option: $out"
	grep -q "Operation not permitted" <<<"$out" || fail "mendctl inject message: $out"
	[ -e "$IMG.badblocks" ] && grep -q '^[0-9]' "$IMG.badblocks" && fail "poison recorded: $(cat "$IMG.badblocks")"
	umount_fg
	mount_fg allow_other,poison_inject
	# not root: EPERM (the uid FUSE reports for the caller)
	asnobody "$WORK/rcheck" inject "$MNT" $((S + 8)) 1 EPERM || fail "inject as nobody"
	rcheck injhostile "$MNT" $NSEC
	[ -e "$IMG.badblocks" ] && grep -q '^[0-9]' "$IMG.badblocks" && fail "poison recorded: $(cat "$IMG.badblocks")"
	kill -0 "$DPID" || fail "the daemon died"
	# the last sector of the device is a valid target
	rcheck inject "$MNT" $((NSEC - 1)) 1 0
	# sectors 3..4 of block 2 of f: bytes [9728, 10752)
	out=$(mendctl --json inject "$MNT" $((S + 2 * 8 + 3)) 2) || fail "mendctl inject"
	[ "$out" = "{\"sector\":$((S + 2 * 8 + 3)),\"count\":2}" ] || fail "mendctl inject --json: $out"
	grep -qx "$((S + 2 * 8 + 3)) 2" "$IMG.badblocks" || fail "not in $IMG.badblocks: $(cat "$IMG.badblocks")"
	grep -qx "$((NSEC - 1)) 1" "$IMG.badblocks" || fail "not in $IMG.badblocks: $(cat "$IMG.badblocks")"
	[ "$(mendctl badranges --json "$MNT/f")" = '{"ranges":[{"offset":9728,"length":1024}]}' ] ||
		fail "badranges: $(mendctl badranges --json "$MNT/f")"
	rcheck read "$MNT/f" $SIZE 9728
	rcheck preadv2 "$MNT/f" $SIZE 9728 1024
	out=$(mendctl stats --json "$MNT") || fail "mendctl stats"
	grep -q '"poison_ranges":2' <<<"$out" || fail "stats: $out"
	umount_fg
	# it survives a remount (no option needed to keep poison)
	mount_fg
	[ "$(mendctl badranges --json "$MNT/f")" = '{"ranges":[{"offset":9728,"length":1024}]}' ] ||
		fail "badranges after the remount: $(mendctl badranges --json "$MNT/f")"
	rcheck read "$MNT/f" $SIZE 9728
	rcheck preadv2 "$MNT/f" $SIZE 9728 1024
	[ "$(mendctl bmap --json "$MNT/f")" = "$map" ] || fail "blocks moved"
	umount_fg
	# a read-only mount writes nothing, not even the emulation file: EROFS
	mount_fg ro,poison_inject
	rcheck inject "$MNT" $((S + 40)) 1 EROFS
	umount_fg
	grep -q "^$((S + 40)) " "$IMG.badblocks" && fail "read-only mount recorded poison"
	;;
writeback)
	# -o writeback: the kernel reads a page before a partial write into it, so
	# a write into a page holding poison fails with EIO (never zeros written),
	# even one covering whole poisoned sectors; a whole-page overwrite needs
	# no read and clears the poison in place when written back
	make_f
	# poisoned before the mount, so that no page of f is cached:
	# sector 2 of block 1 (bytes [5120, 5632)) and sector 0 of block 3 ([12288, 12800))
	printf '%s 1\n%s 1\n' $((S + 8 + 2)) $((S + 3 * 8)) >"$IMG.badblocks"
	mount_fg writeback
	grep -q " $MNT fuse.mendfs " /proc/mounts || fail "not mounted"
	wdd() { dd of="$MNT/f" oflag=seek_bytes conv=notrunc status=none "$@" 2>"$WORK/dd.err"; }
	wdd if=/dev/zero bs=100 count=1 seek=5000 &&
		fail "a partial-page write into a poisoned page succeeded"
	grep -q 'Input/output error' "$WORK/dd.err" || fail "partial-page write: $(cat "$WORK/dd.err")"
	wdd if=/dev/zero bs=512 count=1 seek=5120 &&
		fail "a whole-sector write inside a poisoned page succeeded under writeback"
	grep -q 'Input/output error' "$WORK/dd.err" || fail "whole-sector write: $(cat "$WORK/dd.err")"
	# the same bytes the pattern had (so the whole file can be checked below)
	rcheck overwrite "$MNT/f" 12288 4096
	sync -d "$MNT/f" # writeback, then fsync
	[ "$(mendctl badranges --json "$MNT/f")" = '{"ranges":[{"offset":5120,"length":512}]}' ] ||
		fail "badranges after the overwrite: $(mendctl badranges --json "$MNT/f")"
	[ "$(mendctl bmap --json "$MNT/f")" = "$map" ] || fail "blocks moved"
	umount_fg
	grep -q "^$((S + 3 * 8)) " "$IMG.badblocks" && fail "poison of block 3 left: $(cat "$IMG.badblocks")"
	mount_fg
	# every byte is the pattern but the poisoned sector of block 1 (zero-filled)
	rcheck preadv2 "$MNT/f" $SIZE 5120 512
	umount_fg
	;;
matrix)
	mkdir "$WORK/exp"
	mount_fg poison_inject
	timeout 120 "$RMATRIX" matrix "$MNT" "$WORK/exp" || fail "recovery-matrix matrix"
	umount_fg
	grep -q '^[0-9]' "$IMG.badblocks" && fail "poison left in $IMG.badblocks: $(cat "$IMG.badblocks")"
	mount_fg poison_inject
	timeout 60 "$RMATRIX" verify "$MNT" "$WORK/exp" || fail "recovery-matrix verify"
	timeout 60 "$RMATRIX" race "$MNT" 3 || fail "recovery-matrix race"
	timeout 120 "$RMATRIX" fuzz "$MNT" 4000 || fail "recovery-matrix fuzz"
	kill -0 "$DPID" || fail "the daemon died"
	umount_fg
	;;
quarantine)
	mkdir "$WORK/exp"
	mount_fg poison_inject
	timeout 60 "$RMATRIX" quarantine "$MNT" "$WORK/exp" || fail "recovery-matrix quarantine"
	umount_fg
	mount_fg
	timeout 60 "$RMATRIX" requarantine "$MNT" "$WORK/exp" || fail "recovery-matrix requarantine"
	umount_fg
	;;
cli)
	need_cmds python3 # the JSON checks
	# no temporary file of recover left in DIR...
	no_tmp() { ! ls -A "$@" | grep -q 'mendctl-recover' || fail "temporary file left: $(ls -A "$@")"; }
	# json_error RC ARGS...: mendctl --json ARGS exits RC and prints one error object, no result
	json_error() {
		local want=$1 rc
		shift
		mendctl --json "$@" >"$WORK/json" 2>/dev/null
		rc=$?
		[ "$rc" = "$want" ] || fail "mendctl --json $* exited $rc, expected $want: $(cat "$WORK/json")"
		python3 - "$WORK/json" "$want" <<'EOF' || fail "mendctl --json $* printed: $(cat "$WORK/json")"
import json, sys
j = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert isinstance(j, dict) and isinstance(j["error"], str) and j["error"], j
assert j["exit_code"] == int(sys.argv[2]), j
result = {"ranges", "extents", "bytes", "zeroed", "offset", "length", "sector", "count", "reads"}
assert not result & set(j), j
EOF
	}
	mount_fg
	rcheck pattern "$MNT/f" $SIZE
	S=$(first_sector "$MNT/f" $SIZE)
	umount_fg
	echo "$((S + 5 * 8 + 3)) 1" >"$IMG.badblocks"
	mount_fg
	rcheck salvage "$WORK/expected" $SIZE 22016 512
	printf 'not on mendfs\n' >"$WORK/plain"
	# OUT is FILE: by its name, through a hard link, through a symbolic link
	ln "$MNT/f" "$MNT/f.link" || fail "ln"
	ln -s "$MNT/f" "$WORK/f.sym"
	for out in "$MNT/f" "$MNT/f.link" "$WORK/f.sym"; do
		msg=$(mendctl recover "$MNT/f" "$out" 2>&1 >/dev/null)
		rc=$?
		[ $rc = 1 ] || fail "recover $MNT/f $out exited $rc, expected 1"
		grep -q 'are the same file' <<<"$msg" || fail "recover $MNT/f $out: $msg"
		[ "$(stat -c %s "$MNT/f")" = $SIZE ] || fail "recover F F ($out) left F $(stat -c %s "$MNT/f") bytes"
		mendctl recover "$MNT/f" "$WORK/after" >/dev/null || fail "mendctl recover"
		cmp "$WORK/after" "$WORK/expected" || fail "F changed by recover F $out"
	done
	[ -L "$WORK/f.sym" ] || fail "the symbolic link was replaced"
	[ "$(mendctl badranges "$MNT/f")" = "22016 512" ] || fail "badranges: $(mendctl badranges "$MNT/f")"
	no_tmp "$MNT" "$WORK"
	# failures leave an existing OUT as it was, and create nothing
	printf 'keep me\n' >"$WORK/out"
	chmod 640 "$WORK/out"
	mendctl recover "$WORK/plain" "$WORK/out" 2>/dev/null && fail "recover of a file off mendfs succeeded"
	[ "$(cat "$WORK/out")" = "keep me" ] || fail "a failed recover changed OUT: $(head -c 100 "$WORK/out")"
	mendctl recover "$WORK/plain" "$WORK/new" 2>/dev/null && fail "recover of a file off mendfs succeeded"
	[ -e "$WORK/new" ] && fail "a failed recover created OUT"
	mendctl recover "$WORK/missing" "$WORK/out" 2>/dev/null && fail "recover of a missing file succeeded"
	[ "$(cat "$WORK/out")" = "keep me" ] || fail "a failed recover changed OUT"
	mkdir "$WORK/dir"
	mendctl recover "$MNT/f" "$WORK/dir" 2>/dev/null && fail "recover into a directory succeeded"
	[ -z "$(ls -A "$WORK/dir")" ] || fail "recover wrote into the directory: $(ls -A "$WORK/dir")"
	mendctl recover "$MNT/f" "$WORK/nodir/out" 2>/dev/null && fail "recover into a missing directory succeeded"
	ln -s "$WORK/nowhere" "$WORK/dangling"
	mendctl recover "$MNT/f" "$WORK/dangling" 2>/dev/null && fail "recover through a dangling link succeeded"
	[ -e "$WORK/nowhere" ] && fail "recover wrote through a dangling link"
	no_tmp "$MNT" "$WORK"
	# ENOSPC midway (OUT on a small tmpfs): the old OUT stays whole
	mkdir "$WORK/small"
	if mount -t tmpfs -o size=64k tmpfs "$WORK/small" 2>/dev/null; then
		head -c 40000 /dev/urandom >"$WORK/small/out"
		cp "$WORK/small/out" "$WORK/small.keep"
		mendctl recover "$MNT/f" "$WORK/small/out" 2>"$WORK/err" && fail "recover into a full tmpfs succeeded"
		grep -q 'No space left' "$WORK/err" || fail "recover into a full tmpfs: $(cat "$WORK/err")"
		cmp "$WORK/small/out" "$WORK/small.keep" || fail "a recover that failed midway changed OUT"
		[ "$(ls -A "$WORK/small")" = out ] || fail "left in the tmpfs: $(ls -A "$WORK/small")"
		umount "$WORK/small"
	elif [ "${MENDFS_TEST_STRICT:-}" = 1 ]; then
		fail "cannot mount a tmpfs for the ENOSPC case"
	else
		echo "note: no tmpfs, the ENOSPC case was not run"
	fi
	# success over an existing OUT: replaced whole, its permissions kept; through a link, the target
	mendctl recover "$MNT/f" "$WORK/out" >/dev/null || fail "mendctl recover over OUT"
	cmp "$WORK/out" "$WORK/expected" || fail "recover over OUT: wrong content"
	[ "$(stat -c %a "$WORK/out")" = 640 ] || fail "recover changed OUT's mode to $(stat -c %a "$WORK/out")"
	printf 'old\n' >"$WORK/target"
	ln -s "$WORK/target" "$WORK/out.sym"
	mendctl recover "$MNT/f" "$WORK/out.sym" >/dev/null || fail "mendctl recover through a link"
	[ -L "$WORK/out.sym" ] || fail "recover replaced the symbolic link"
	cmp "$WORK/target" "$WORK/expected" || fail "recover through a link: wrong content"
	no_tmp "$MNT" "$WORK"
	# --json: errors are {"error", "exit_code"}, never a result (badranges off mendfs said {"ranges":[]})
	json_error 1 badranges "$WORK/plain"
	json_error 1 badranges "$WORK/missing"
	json_error 1 badranges "$WORK/"$'bad\xff'
	json_error 2 badranges
	json_error 2 badranges "$MNT/f" "$MNT/f"
	json_error 2 frobnicate "$MNT/f"
	json_error 2
	json_error 1 recover "$MNT/f" "$MNT/f"
	json_error 1 recover "$WORK/plain" "$WORK/out"
	json_error 2 recover "$MNT/f"
	json_error 1 bmap "$WORK/plain"
	json_error 1 bmap "$WORK/missing"
	json_error 2 zeroinit "$MNT/f" x 512
	json_error 2 zeroinit "$MNT/f" -512 512
	json_error 1 zeroinit "$MNT/f" 100 512
	json_error 1 zeroinit "$WORK/plain" 0 512
	json_error 2 inject "$MNT" 0 0
	json_error 1 inject "$MNT" $((S + 8)) 1
	json_error 1 stats "$WORK"
	json_error 1 stats "$WORK/missing"
	cmp "$WORK/out" "$WORK/expected" || fail "a failed recover --json changed OUT"
	# and the results are unchanged
	[ "$(mendctl --json badranges "$MNT/f")" = '{"ranges":[{"offset":22016,"length":512}]}' ] ||
		fail "badranges --json: $(mendctl --json badranges "$MNT/f")"
	out=$(mendctl --json recover "$MNT/f" "$WORK/out") || fail "mendctl --json recover"
	[ "$out" = '{"bytes":65536,"zeroed":[{"offset":22016,"length":512}]}' ] || fail "recover --json: $out"
	umount_fg
	;;
4k)
	need_cmds losetup
	LOOP=$(losetup -f --show -b 4096 "$IMG" 2>"$WORK/losetup.log") ||
		{ LOOP=; skip "losetup -b 4096: $(cat "$WORK/losetup.log")"; }
	[ "$(blockdev --getss "$LOOP")" = 4096 ] || fail "$LOOP: logical block $(blockdev --getss "$LOOP")"
	DEV=$LOOP
	BB=$WORK/bb
	OPTS="backend=uring,poison_inject,badblocks=$BB"
	mkfs_mendfs -f "$DEV"
	make_f "$OPTS"
	# the emulation file names one sector of block 13: its whole logical block is lost
	echo "$((S + 13 * 8 + 5)) 1" >"$BB"
	mount_fg "$OPTS"
	# online: one sector mid-block 5, bytes [22016, 22528): all of [20480, 24576) is lost
	mendctl inject "$MNT" $((S + 5 * 8 + 3)) 1 || fail "mendctl inject"
	out=$(grep -v '^#' "$BB")
	[ "$out" = "$((S + 5 * 8)) 8
$((S + 13 * 8)) 8" ] || fail "emulation file: $out"
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":20480,"length":4096},{"offset":53248,"length":4096}]}' ] ||
		fail "badranges: $out"
	rcheck read "$MNT/f" $SIZE 20480
	rcheck preadv2 "$MNT/f" $SIZE 20480 4096 53248 4096
	out=$(mendctl recover --json "$MNT/f" "$WORK/salvage") || fail "mendctl recover"
	[ "$out" = '{"bytes":65536,"zeroed":[{"offset":20480,"length":4096},{"offset":53248,"length":4096}]}' ] ||
		fail "recover: $out"
	rcheck salvage "$WORK/expected" $SIZE 20480 4096 53248 4096
	cmp "$WORK/salvage" "$WORK/expected" || fail "the salvage copy differs"
	# a partial overwrite into the poisoned block: EIO (not EINVAL); then a
	# recovery write, which zeroes the block's lost bytes around its data
	rcheck rwrite "$MNT/f" 20580 100
	# a recovery write on 512-byte boundaries inside a poisoned 4 KiB block
	# (bytes [29696, 30208) of block 7) is still a partial write of the unit
	mendctl inject "$MNT" $((S + 7 * 8 + 2)) 1 || fail "mendctl inject block 7"
	rcheck rwrite "$MNT/f" 29696 512
	# a whole-block overwrite clears in place
	rcheck overwrite "$MNT/f" 53248 4096
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[]}' ] || fail "badranges after the overwrites: $out"
	[ "$(mendctl bmap --json "$MNT/f")" = "$map" ] || fail "the overwrites moved blocks"
	# zeroinit: a partial unit that is poisoned -> EIO; a whole unit clears it;
	# a partial unit that is clean is zeroed in place
	mendctl inject "$MNT" $((S + 11 * 8 + 2)) 1 || fail "mendctl inject block 11"
	out=$(mendctl zeroinit "$MNT/f" 45568 512 2>&1) && fail "zeroinit of part of a poisoned unit succeeded"
	grep -q 'Input/output error' <<<"$out" || fail "zeroinit of part of a poisoned unit: $out"
	mendctl zeroinit "$MNT/f" 45056 4096 || fail "mendctl zeroinit (whole unit)"
	mendctl zeroinit "$MNT/f" 4608 1024 || fail "mendctl zeroinit (part of a clean unit)"
	# fallocate: punching part of a poisoned block -> EIO; zeroing it whole clears it
	mendctl inject "$MNT" $((S + 12 * 8 + 4)) 1 || fail "mendctl inject block 12"
	out=$(fallocate -p -o 50176 -l 1024 "$MNT/f" 2>&1) && fail "punching part of a poisoned block succeeded"
	grep -q 'Input/output error' <<<"$out" || fail "punching part of a poisoned block: $out"
	fallocate -z -o 49152 -l 4096 "$MNT/f" || fail "fallocate -z of a poisoned block"
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[]}' ] || fail "badranges after zeroinit: $out"
	rcheck verify "$MNT/f" $SIZE 4608 1024 20480 100 20680 3896 28672 1024 30208 2560 45056 8192
	# truncate into a poisoned block: shrinking drops the tail (nothing is
	# zeroed); growing again must zero past the old EOF inside the lost unit: EIO
	mendctl inject "$MNT" $((S + 9 * 8 + 1)) 1 || fail "mendctl inject block 9"
	truncate -s 37864 "$MNT/f" || fail "truncate into a poisoned block (shrink)"
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[{"offset":36864,"length":1000}]}' ] || fail "badranges after truncate: $out"
	out=$(truncate -s 40000 "$MNT/f" 2>&1) && fail "growing from inside a poisoned block succeeded"
	grep -q 'Input/output error' <<<"$out" || fail "growing from inside a poisoned block: $out"
	[ "$(stat -c %s "$MNT/f")" = 37864 ] || fail "a failed truncate changed the size"
	# zeroinit up to EOF covers the unit whole (zeros past EOF anyway): clears it
	mendctl zeroinit "$MNT/f" 36864 1024 || fail "mendctl zeroinit (block 9 up to EOF)"
	out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
	[ "$out" = '{"ranges":[]}' ] || fail "badranges after zeroinit of block 9: $out"
	truncate -s 40000 "$MNT/f" || fail "truncate (grow)"
	zeros="4608 1024 20480 100 20680 3896 28672 1024 30208 2560 36864 3136"
	rcheck verify "$MNT/f" 40000 $zeros
	umount_fg
	[ -z "$(grep -v '^#' "$BB")" ] || fail "emulation file not empty: $(cat "$BB")"
	mount_fg "$OPTS"
	rcheck verify "$MNT/f" 40000 $zeros
	out=$(mendctl stats "$MNT") || fail "mendctl stats"
	grep -q '^poison_ranges *0$' <<<"$out" || fail "stats: $out"
	umount_fg
	;;
meta)
	mc() { timeout 60 "$METACHECK" "$@" || fail "meta-check $*"; }
	stat_of() { mendctl stats --json "$MNT" | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
	no_poison() { ! grep -q '^[0-9]' "$IMG.badblocks" || fail "$1: poison left: $(cat "$IMG.badblocks")"; }
	mount_fg
	mkdir "$MNT/d" || fail "mkdir"
	# frag: 11 one-block extents (holes between): an extent tree, not inline extents
	for b in $(seq 0 2 20); do
		dd if=/dev/urandom of="$MNT/d/frag" bs=4096 seek=$b count=1 conv=notrunc status=none ||
			fail "dd"
	done
	: >"$MNT/d/x"
	mc setx "$MNT/d/x" user.big 600
	for i in $(seq 1 200); do : >"$MNT/d/an-entry-with-a-longish-name-$i"; done
	F=$(md5sum <"$MNT/d/frag")
	L=$(ls -a "$MNT/d" | md5sum)
	ID=$(stat -c %i "$MNT/d") IF=$(stat -c %i "$MNT/d/frag") IX=$(stat -c %i "$MNT/d/x")
	umount_fg
	loc=$(mc locate "$IMG" "$ID" "$IF" "$IX")
	read -r _ _ JS _ JL _ JT _ _ _ MS _ MT <<<"$(grep ^sb <<<"$loc")"
	DR=$(awk -v i="$ID" '$2 == i { print $8 }' <<<"$loc")
	ITB=$(awk -v i="$IF" '$2 == i { print $4 }' <<<"$loc")
	ER=$(awk -v i="$IF" '$2 == i { print $6 }' <<<"$loc")
	XR=$(awk -v i="$IX" '$2 == i { print $10 }' <<<"$loc")
	for v in DR ITB ER XR; do [ "${!v:-0}" -gt 0 ] || fail "no $v block: $loc"; done
	[ "$(printf '%s\n' $DR $ITB $ER $XR | sort -u | wc -l)" = 4 ] || fail "blocks not distinct: $loc"
	twin() { echo $(($1 - MS + MT)); }
	# one sector of each primary copy
	printf '%s\n' "$((DR * 8 + 3)) 1" "$((ITB * 8 + 5)) 1" "$((ER * 8)) 1" "$((XR * 8 + 7)) 1" \
		>"$IMG.badblocks"
	mount_fg
	[ "$(ls -a "$MNT/d" | md5sum)" = "$L" ] || fail "the directory listing changed"
	[ "$(md5sum <"$MNT/d/frag")" = "$F" ] || fail "frag changed"
	mc getx "$MNT/d/x" user.big 600 0
	stat "$MNT/d/frag" >/dev/null || fail "stat"
	[ "$(stat_of meta_repairs)" = 4 ] || fail "meta_repairs $(stat_of meta_repairs), expected 4"
	[ "$(stat_of meta_lost)" = 0 ] || fail "meta_lost $(stat_of meta_lost)"
	for b in $DR $ITB $ER $XR; do
		grep -q "metadata block $b: media error, repaired from twin $(twin $b)" "$WORK/log" ||
			fail "no repair of block $b logged"
	done
	no_poison "after the repairs"
	umount_fg
	# the twin poisoned: reads never need it; the next write of the block (both copies) clears it
	echo "$(($(twin $ER) * 8 + 1)) 1" >"$IMG.badblocks"
	mount_fg
	[ "$(md5sum <"$MNT/d/frag")" = "$F" ] || fail "frag changed (twin poisoned)"
	dd if=/dev/zero of="$MNT/d/frag" bs=4096 seek=30 count=1 conv=notrunc,fsync status=none ||
		fail "extending frag"
	F=$(md5sum <"$MNT/d/frag")
	[ "$(stat_of meta_lost)" = 0 ] || fail "meta_lost $(stat_of meta_lost)"
	umount_fg
	no_poison "after rewriting the extent tree"
	# journal: committed transactions left by a crash, one copy of two journal blocks poisoned
	mount_fg
	dd if=/dev/urandom of="$MNT/j" bs=4096 count=3 conv=fsync status=none || fail "dd j"
	J=$(md5sum <"$MNT/j")
	crash
	read -r _ _ JS _ JL _ JT _ JO _ _ _ _ <<<"$(mc locate "$IMG" | grep ^sb)"
	D0=$((JS + JO)) I0=$((JS + (JO + 1) % JL))
	printf '%s\n' "$((D0 * 8 + 2)) 1" "$((I0 * 8 + 5)) 1" >"$IMG.badblocks"
	mount_fg
	[ "$(md5sum <"$MNT/j")" = "$J" ] || fail "j lost in the replay"
	for b in $D0 $I0; do
		grep -q "journal block $b: media error, repaired from twin $((b - JS + JT))" "$WORK/log" ||
			fail "no repair of journal block $b logged"
	done
	no_poison "after the replay"
	umount_fg
	# both copies poisoned: EIO, logged with the block, the daemon lives
	printf '%s\n' "$((XR * 8 + 2)) 1" "$(($(twin $XR) * 8 + 4)) 1" >"$IMG.badblocks"
	mount_fg
	mc getx "$MNT/d/x" user.big 600 EIO
	stat "$MNT/d/x" >/dev/null || fail "stat of x"
	[ "$(md5sum <"$MNT/d/frag")" = "$F" ] || fail "frag changed"
	kill -0 "$DPID" || fail "the daemon died"
	grep -q "metadata block $XR lost: primary media error, twin (block $(twin $XR)) media error" \
		"$WORK/log" || fail "the loss of block $XR is not logged"
	[ "$(stat_of meta_lost)" -ge 1 ] || fail "meta_lost $(stat_of meta_lost)"
	# every read of it fails again (counted), but it is logged once per mount
	mc getx "$MNT/d/x" user.big 600 EIO
	mc getx "$MNT/d/x" user.big 600 EIO
	[ "$(stat_of meta_lost)" -ge 3 ] || fail "meta_lost $(stat_of meta_lost) after 3 reads"
	n=$(grep -c "metadata block $XR lost" "$WORK/log")
	[ "$n" = 1 ] || fail "the loss of block $XR logged $n times"
	umount_fg
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac
exit 0
