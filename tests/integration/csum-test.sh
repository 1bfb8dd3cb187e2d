#!/bin/bash
# SPDX-License-Identifier: MIT
#
# csum-test.sh: per-sector data checksums (mkfs.mendfs -O data_csum,
# docs/FORMAT.md §15, docs/RECOVERY.md "Data checksums").  A file with a
# known pattern; unmounted, a byte of one of its data sectors is flipped
# with dd (the sector found with `mendctl bmap --json`); mounted again:
#   - a plain read fails with EIO at that sector's page, a recovery read
#     (MENDFS_IOC_RECOVERY_READ) and `mendctl recover` return every other
#     byte and zero-fill exactly that 512-byte sector;
#   - `mendctl badranges` (text and --json) and `mendctl scrub` list exactly it;
#   - one damage event (kind data_csum, `mendctl events`) names it, and the
#     daemon logs it;
#   - fsck.mendfs -n names the file and the byte range (text and --json)
#     and exits 4;
#   - a partial write into the damaged sector fails (EIO), a whole-sector
#     overwrite clears it (badranges empty, the file reads back);
#   - the same with several sectors flipped in one file (two in one block,
#     one in another block, one in the last, partial block);
#   - `mendctl scrub` as the first thing after mounting finds a flipped
#     sector by its own checks (checksum_mismatches 1, one event), with no
#     false alarm from an unwritten extent or a deleted file's blocks;
#   - the feature off: the same flip is not detected (no table), and
#     `mendctl grow` refuses a data_csum filesystem.
# Programs from $MENDFS, $MKFS_MENDFS, $MENDCTL, $RCHECK, $FSCK_MENDFS.
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse).
set -u
. "$(dirname "$0")/lib.sh"

need_progs MENDFS MKFS_MENDFS MENDCTL RCHECK FSCK_MENDFS
need_root_fuse
work_init csum

rcheck() { timeout 60 "$RCHECK" "$@" || fail "recovery-check $*"; }
mendctl() { timeout 60 "$MENDCTL" "$@"; }

# first_sector FILE SIZE: the device sector of FILE's one extent (mendctl bmap --json)
first_sector() {
	local j
	j=$(mendctl bmap --json "$1") || fail "mendctl bmap $1"
	[ "$(grep -o '"offset"' <<<"$j" | wc -l)" = 1 ] || fail "$1 is not one extent: $j"
	grep -q "\"offset\":0,\"length\":$2," <<<"$j" || fail "$1 extent: $j"
	grep -o '"sector":[0-9]*' <<<"$j" | cut -d: -f2
}

# flip SECTOR: invert one byte (byte 100) of device sector SECTOR of the image
flip() {
	local at=$(($1 * 512 + 100)) b
	b=$(dd if="$IMG" bs=1 skip=$at count=1 status=none | od -An -tu1 | tr -d ' ')
	printf "%b" "\\$(printf %03o $((255 - b)))" |
		dd of="$IMG" bs=1 seek=$at conv=notrunc status=none || fail "dd at $at"
}

# ranges_json OFF LEN...: the JSON list badranges and recover print
ranges_json() {
	local out="" sep=""
	while [ $# -gt 0 ]; do
		out+="$sep{\"offset\":$1,\"length\":$2}"
		sep=,
		shift 2
	done
	echo "[$out]"
}

SIZE=65536 # 16 blocks
# damaged FILE FIRST OFF LEN...: every check of a file whose ranges OFF LEN... fail their
# checksums (FIRST: the first damaged byte)
damaged() {
	local f=$1 first=$2 out
	shift 2
	rcheck read "$f" $SIZE "$first"
	rcheck preadv2 "$f" $SIZE "$@"
	out=$(mendctl badranges --json "$f") || fail "mendctl badranges"
	[ "$out" = "{\"ranges\":$(ranges_json "$@")}" ] || fail "badranges: $out"
	out=$(mendctl badranges "$f") || fail "mendctl badranges (text)"
	[ "$out" = "$(printf '%s %s\n' "$@")" ] || fail "badranges text: $out"
	out=$(mendctl recover --json "$f" "$WORK/salvage") || fail "mendctl recover"
	[ "$out" = "{\"bytes\":$SIZE,\"zeroed\":$(ranges_json "$@")}" ] || fail "recover: $out"
	rcheck salvage "$WORK/expected" $SIZE "$@"
	cmp "$WORK/salvage" "$WORK/expected" || fail "the salvage copy differs"
}

step=single
mkfs_mendfs -O data_csum "$IMG" 64M
mount_fg
rcheck pattern "$MNT/f" $SIZE
S=$(first_sector "$MNT/f" $SIZE)
umount_fg
# sector 3 of block 5: bytes [22016, 22528)
flip $((S + 5 * 8 + 3))
mount_fg
damaged "$MNT/f" 22016 22016 512
# the online scrub's report (BADRANGES of every file) names it too
rc=0
out=$(mendctl scrub --json "$MNT" 2>&1) || rc=$?
[ $rc = 4 ] || fail "mendctl scrub: exit $rc, expected 4: $out"
grep -q '"offset":22016,"length":512' <<<"$out" || fail "scrub report: $out"
# exactly one damage event for the sector, however often it was read, naming the file
out=$(mendctl events --json --no-follow "$MNT") || fail "mendctl events"
[ "$(grep -c '"kind":"data_csum"' <<<"$out")" = 1 ] || fail "events: $out"
grep '"kind":"data_csum"' <<<"$out" | grep -q '"cause":"corrupt".*"sector":'$((S + 43))',"count":1.*"path":"/f","offset":22016,"length":512' ||
	fail "the data_csum event: $out"
grep -q "damage #[0-9]*: data checksum (corrupt) on .*: /f (inode [0-9]*) bytes 22016-22527" "$LOG" ||
	fail "the daemon did not log the event: $(cat "$LOG")"
umount_fg
rc=0
"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || rc=$?
[ $rc = 4 ] || fail "fsck -n: exit $rc, expected 4: $(cat "$WORK/fsck")"
grep -q "/f.*22016" "$WORK/fsck" || fail "fsck report: $(cat "$WORK/fsck")"
grep -q "checksum" "$WORK/fsck" || fail "fsck report does not say checksum: $(cat "$WORK/fsck")"
rc=0
"$FSCK_MENDFS" -n --json "$IMG" >"$WORK/fsck.json" 2>/dev/null || rc=$?
[ $rc = 4 ] || fail "fsck -n --json: exit $rc, expected 4"
grep -q '"offset":22016,"length":512' "$WORK/fsck.json" || fail "fsck --json: $(cat "$WORK/fsck.json")"
mount_fg
# a write covering the damaged sector in part: EIO, nothing written
out=$(dd if=/dev/zero of="$MNT/f" bs=100 seek=221 count=1 conv=notrunc oflag=direct 2>&1) &&
	fail "a partial write into the damaged sector succeeded: $out"
grep -q "Input/output error" <<<"$out" || fail "partial write: $out"
# a whole-sector overwrite clears it
rcheck overwrite "$MNT/f" 22016 512
out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
[ "$out" = '{"ranges":[]}' ] || fail "badranges after the overwrite: $out"
rcheck verify "$MNT/f" $SIZE
umount_fg
rc=0
"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || rc=$?
[ $rc = 0 ] || fail "fsck -n after the overwrite: exit $rc: $(cat "$WORK/fsck")"

step=several
mount_fg
rcheck pattern "$MNT/g" $SIZE
S=$(first_sector "$MNT/g" $SIZE)
umount_fg
# block 1 sectors 0 and 7, block 9 sector 4, block 15 sector 7 (the last)
for s in $((S + 8)) $((S + 15)) $((S + 9 * 8 + 4)) $((S + 15 * 8 + 7)); do flip "$s"; done
mount_fg
damaged "$MNT/g" 4096 4096 512 7680 512 38912 512 65024 512
# a recovery read is not fooled twice: the damage stays until overwritten
rcheck preadv2 "$MNT/g" $SIZE 4096 512 7680 512 38912 512 65024 512
# overwrite them all (whole blocks, partial sectors with the rest of their block)
rcheck overwrite "$MNT/g" 4096 4096
rcheck overwrite "$MNT/g" 36864 4096
rcheck overwrite "$MNT/g" 65024 512
out=$(mendctl badranges --json "$MNT/g") || fail "mendctl badranges g"
[ "$out" = '{"ranges":[]}' ] || fail "badranges g after the overwrites: $out"
rcheck verify "$MNT/g" $SIZE
rcheck verify "$MNT/f" $SIZE
umount_fg
rc=0
"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || rc=$?
[ $rc = 0 ] || fail "fsck -n at the end: exit $rc: $(cat "$WORK/fsck")"

step="scrub first"
# the scrub's data pass checks every written sector itself: a flipped sector
# that nothing read yet is found by it (checksum_mismatches, one event), and
# the blocks of an unwritten extent (fallocate: never written, their table
# entries garbage) and of a deleted file are not taken for damage
mount_fg
rcheck pattern "$MNT/h" $SIZE
S=$(first_sector "$MNT/h" $SIZE)
fallocate -l 1M "$MNT/prealloc" || fail "fallocate"
head -c 200000 /dev/urandom >"$MNT/gone" && rm "$MNT/gone" || fail "gone"
E0=$(mendctl events --json --no-follow "$MNT" | grep -c '"kind":"data_csum"')
umount_fg
flip $((S + 2 * 8 + 6)) # block 2 sector 6: bytes [11264, 11776)
mount_fg
rc=0
out=$(mendctl scrub --json "$MNT" 2>&1) || rc=$?
[ $rc = 4 ] || fail "scrub: exit $rc, expected 4: $out"
python3 -c '
import json, sys
j = json.loads(sys.argv[1])
f = [(d["path"], [(r["offset"], r["length"]) for r in d["ranges"]]) for d in j["damaged_files"]]
assert f == [("/h", [(11264, 512)])], f
assert j["checksum_mismatches"] == 1, j["checksum_mismatches"]
' "$out" || fail "scrub before any read: $out"
ev=$(mendctl events --json --no-follow "$MNT") || fail "mendctl events"
[ "$(grep -c '"kind":"data_csum"' <<<"$ev")" = 1 ] || fail "data_csum events (before: $E0): $ev"
grep '"kind":"data_csum"' <<<"$ev" | grep -q '"sector":'$((S + 22))',"count":1.*"path":"/h","offset":11264,"length":512' ||
	fail "the scrub's data_csum event: $ev"
# a second scrub finds it again, and posts no second event
out=$(mendctl scrub --json "$MNT" 2>&1)
grep -q '"checksum_mismatches":1' <<<"$out" || fail "second scrub: $out"
ev=$(mendctl events --json --no-follow "$MNT") || fail "mendctl events"
[ "$(grep -c '"kind":"data_csum"' <<<"$ev")" = 1 ] || fail "a second event: $ev"
rcheck overwrite "$MNT/h" 11264 512
out=$(mendctl scrub --json "$MNT" 2>&1) || fail "scrub after the overwrite: $out"
grep -q '"checksum_mismatches":0' <<<"$out" || fail "scrub after the overwrite: $out"
umount_fg

step=grow
truncate -s 96M "$IMG"
out=$(mendctl grow "$IMG" 2>&1) && fail "mendctl grow of a data_csum filesystem succeeded: $out"
grep -q "data_csum" <<<"$out" || fail "grow's refusal does not say why: $out"

step=off
rm -f "$IMG"
mkfs_mendfs "$IMG" 64M
mount_fg
rcheck pattern "$MNT/f" $SIZE
S=$(first_sector "$MNT/f" $SIZE)
umount_fg
flip $((S + 5 * 8 + 3))
mount_fg
# without the table nothing can tell: the read succeeds (with the flipped byte)
cat "$MNT/f" >/dev/null || fail "a read without data_csum failed"
out=$(mendctl badranges --json "$MNT/f") || fail "mendctl badranges"
[ "$out" = '{"ranges":[]}' ] || fail "badranges without data_csum: $out"
umount_fg
exit 0
