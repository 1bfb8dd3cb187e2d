#!/bin/bash
# SPDX-License-Identifier: MIT
#
# lib-scrub-test.sh: libmendfs's mendfs_scrub_step, mendfs_scrub and
# mendfs_events_read (mendfs_scrub(3)) through lib-scrub.c: a 40000-byte
# file with one latent sector (IMG.latent, planted while unmounted) at byte
# 8192; lib-scrub checks the refusals (EINVAL, EOPNOTSUPP, EBUSY beside
# another process's scrub), the scrub's totals and the one poison event.
# Then a sector added to IMG.badblocks while mounted is found by the next
# scrub's start (blk_dev_refresh_badblocks): one event, cause badblocks.
# Programs from $MENDFS, $MKFS_MENDFS, $MENDCTL, $LIBSCRUB.
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no python3).
set -u
. "$(dirname "$0")/lib.sh"

need_progs MENDFS MKFS_MENDFS MENDCTL LIBSCRUB
need_root_fuse
need_cmds python3
work_init libscrub

mkfs_mendfs "$IMG" 32M
mount_fg
head -c 40000 /dev/urandom >"$MNT/f" || fail "write"
sync
m=$(timeout 60 "$MENDCTL" bmap --json "$MNT/f") || fail "bmap"
S=$(python3 -c '
import json, sys
e = json.loads(sys.argv[1])["extents"][0]
assert e["offset"] == 0 and e["length"] >= 8704, e
print(e["sector"] + 16)' "$m") || fail "bmap: $m"
umount_fg
printf '%s 1\n' "$S" >"$IMG.latent"
mount_fg
timeout 120 "$LIBSCRUB" "$MNT" "$MNT/f" 8192 || fail "lib-scrub"
[ -z "$(grep -v '^#' "$IMG.latent")" ] || fail "the latent sector is still latent"

step="badblocks refresh"
# a sector the device's badblocks list gains while mounted (the emulation
# file, as the kernel's list of a devdax device gains one after an address
# range scrub): unknown to the daemon until a scrub starts, which asks the
# sources again (blk_dev_refresh_badblocks): counted once, one event
# (cause badblocks), the report names it, a read fails there
B=$((S + 24)) # byte 20480 of f
# rd20480: f's page at byte 20480, O_DIRECT (no readahead into the poison at 8192)
rd20480() { dd if="$MNT/f" of=/dev/null bs=4096 skip=5 count=1 iflag=direct status=none 2>/dev/null; }
rd20480 || fail "f's page at 20480 unreadable before the refresh"
printf '%s 1\n' "$B" >>"$IMG.badblocks"
rd20480 || fail "f's page at 20480 unreadable before any scrub (the daemon knew of $B already)"
out=$(timeout 120 "$MENDCTL" scrub --json "$MNT")
st=$?
[ $st = 4 ] || fail "scrub after the refresh exited $st: $out"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
f = [(d["path"], [(r["offset"], r["length"]) for r in d["ranges"]]) for d in j["damaged_files"]]
assert f == [("/f", [(8192, 512), (20480, 512)])], f
assert j["poison_found"] == 1, j["poison_found"]
' "$out" || fail "scrub after the refresh: $out"
rd20480 && fail "f's page at 20480 reads without error after the refresh"
ev=$(timeout 60 "$MENDCTL" events --json --no-follow "$MNT") || fail "events"
[ "$(grep -c '"cause":"badblocks"' <<<"$ev")" = 1 ] || fail "badblocks events: $ev"
grep '"cause":"badblocks"' <<<"$ev" | grep -q '"sector":'"$B"',"count":1.*"path":"/f","offset":20480,"length":512' ||
	fail "the badblocks event: $ev"
# a second scrub adds nothing
out=$(timeout 120 "$MENDCTL" scrub --json "$MNT")
grep -q '"poison_found":0' <<<"$out" || fail "second scrub: $out"
# a malformed emulation file: the scrub warns and goes on
echo "not a sector" >>"$IMG.badblocks"
out=$(timeout 120 "$MENDCTL" scrub --json "$MNT")
st=$?
[ $st = 4 ] || fail "scrub beside a malformed badblocks file exited $st: $out"
grep -q "scrub: re-reading the badblocks sources: .*(going on)" "$LOG" ||
	fail "no warning about the malformed file: $(tail -5 "$LOG")"
umount_fg
echo "pass: lib-scrub"
