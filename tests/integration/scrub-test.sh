#!/bin/bash
# SPDX-License-Identifier: MIT
#
# scrub-test.sh: `mendctl scrub` on a mounted, busy filesystem (mendctl(8),
# docs/RECOVERY.md).  A populated filesystem (files of several sizes in a
# tree, xattrs) gets latent poison (IMG.latent) in three files' data and
# one corrupted copy of a directory's tree block, written on the image while
# unmounted.  Mounted, with a writer running (and going on throughout),
# `mendctl scrub --json` must name exactly the three files and byte ranges
# (as fsck.mendfs --json does after umount), heal the metadata copy (both
# copies equal on the image, fsck clean of metadata errors), find the three
# latent sectors, and leave the writer's data intact; on a terminal it draws
# the progress bar (none into a pipe).  Then: --rate 2 (MB/s) over ~13 MB
# takes >= 3 s; a second scrub while one runs is refused (exit 16);
# SIGINT stops a scrub (exit 32, where it stopped), --resume reads the rest.
# Last, mounted: the backup superblock and the primary journal overwritten
# with garbage; a scrub rewrites both from the good copies (logged, events).
# Programs from $MENDFS, $MKFS_MENDFS, $MENDCTL, $FSCK_MENDFS, $METACHECK.
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no python3, script or od).
set -u
. "$(dirname "$0")/lib.sh"

need_progs MENDFS MKFS_MENDFS MENDCTL FSCK_MENDFS METACHECK
need_root_fuse
need_cmds python3 script od
work_init scrub
WPID=""
# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() {
	[ -n "$WPID" ] && kill "$WPID" 2>/dev/null
}

mendctl() { timeout 120 "$MENDCTL" "$@"; }
# jget JSON EXPR: a Python expression over j, the parsed JSON
jget() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }
# sector_of FILE OFFSET: the device sector holding byte OFFSET of FILE (mendctl bmap --json)
sector_of() {
	local m
	m=$(mendctl bmap --json "$1") || fail "bmap $1"
	python3 -c '
import json, sys
off = int(sys.argv[2])
for e in json.loads(sys.argv[1])["extents"]:
    if e["offset"] <= off < e["offset"] + e["length"]:
        print(e["sector"] + (off - e["offset"]) // 512); break
else:
    sys.exit("offset not mapped")' "$m" "$2" || fail "no sector for $1 at $2: $m"
}

step=populate
mkfs_mendfs "$IMG" 128M
mount_fg
mkdir -p "$MNT/a/b/c" "$MNT/d" "$MNT/w" || fail "mkdir"
head -c 3000 /dev/urandom >"$MNT/a/small" || fail "small"
head -c 100000 /dev/urandom >"$MNT/a/b/medium" || fail "medium"
head -c $((8 << 20)) /dev/urandom >"$MNT/a/b/c/big" || fail "big"
head -c 70000 /dev/urandom >"$MNT/clean" || fail "clean"
timeout 60 "$METACHECK" setx "$MNT/a/b/medium" user.tag 300 || fail "setx medium"
timeout 60 "$METACHECK" setx "$MNT/a/small" user.big 6000 || fail "setx small"
for i in $(seq 1 200); do : >"$MNT/d/an-entry-with-a-longish-name-$i"; done
sync
# the planted sectors: small bytes [512, 1024), medium [42496, 43008), big [5 MiB + 3584, +512)
S1=$(sector_of "$MNT/a/small" 512)
S2=$(sector_of "$MNT/a/b/medium" 42496)
S3=$(sector_of "$MNT/a/b/c/big" $(((5 << 20) + 3584)))
ID=$(stat -c %i "$MNT/d")
L=$(ls -a "$MNT/d" | md5sum)
umount_fg

step=plant
printf '%s 1\n%s 1\n%s 1\n' "$S1" "$S2" "$S3" >"$IMG.latent"
loc=$(timeout 60 "$METACHECK" locate "$IMG" "$ID") || fail "meta-check locate"
read -r _ _ _ _ _ _ _ _ _ _ MS _ MT <<<"$(grep ^sb <<<"$loc")"
DR=$(awk -v i="$ID" '$2 == i { print $8 }' <<<"$loc")
[ "${DR:-0}" -gt 0 ] || fail "no directory tree block: $loc"
TW=$((DR - MS + MT))
printf 'scrub-test garbage' | dd of="$IMG" bs=1 seek=$((DR * 4096 + 1000)) conv=notrunc status=none ||
	fail "corrupting block $DR"
blk() { dd if="$IMG" bs=4096 skip="$1" count=1 status=none | md5sum; }
[ "$(blk "$DR")" != "$(blk "$TW")" ] || fail "the corruption did not change block $DR"

step="scrub under load"
mount_fg
head -c $((1 << 20)) /dev/urandom >"$WORK/ref"
(
	# the writer: rewrites w/f0..f3 from ref, fsyncing, until told to stop
	i=0
	while [ ! -e "$WORK/stop" ]; do
		dd if="$WORK/ref" of="$MNT/w/f$((i % 4))" bs=64k conv=fsync status=none || exit 1
		i=$((i + 1))
		echo $i >>"$WORK/wlog"
	done
	echo $i >"$WORK/writes"
) &
WPID=$!
sleep 0.5
# --rate 4: ~13 MB take >= 3 s, all of them beside the writer
w0=$(wc -l <"$WORK/wlog")
out=$(mendctl scrub --json --rate 4 "$MNT")
st=$?
w1=$(wc -l <"$WORK/wlog")
[ "$w1" -gt "$w0" ] || fail "the writer made no progress during the scrub ($w0 -> $w1 writes)"
[ $st = 4 ] || fail "scrub exited $st, expected 4 (damaged files): $out"
touch "$WORK/stop"
wait "$WPID" || fail "the writer failed"
WPID=""
[ "$(cat "$WORK/writes")" -ge 1 ] || fail "the writer wrote nothing"
for f in "$MNT"/w/f*; do cmp -s "$WORK/ref" "$f" || fail "writer file $f differs"; done
exp='[{"path": "/a/small", "ranges": [[512, 512]]}, {"path": "/a/b/medium", "ranges": [[42496, 512]]}, {"path": "/a/b/c/big", "ranges": [[5246464, 512]]}]'
files() { python3 -c '
import json, sys
j = json.loads(sys.argv[1])
print(sorted([{"path": f["path"], "ranges": [[r["offset"], r["length"]] for r in f["ranges"]]}
              for f in j["damaged_files"]], key=lambda f: f["path"]))' "$1"; }
[ "$(files "$out")" = "$(python3 -c "print(sorted($exp, key=lambda f: f['path']))")" ] ||
	fail "damaged files: $out"
[ "$(jget "$out" 'j["poison_found"]')" = 3 ] || fail "poison_found: $out"
[ "$(jget "$out" 'j["metadata_healed"]')" = 1 ] || fail "metadata_healed: $out"
[ "$(jget "$out" 'j["repaired"]')" = 1 ] || fail "repaired: $out"
[ "$(jget "$out" 'j["metadata_errors"]')" = 0 ] || fail "metadata_errors: $out"
[ "$(jget "$out" 'j["exit_code"]')" = 4 ] || fail "exit_code: $out"
[ "$(jget "$out" 'j["metadata_checked"] > 100 and j["data_bytes"] >= 8 << 20')" = True ] ||
	fail "too little checked: $out"
grep -q "scrub: metadata block $DR: copy at $DR corrupt, rewritten from the good copy" "$LOG" ||
	fail "no heal of block $DR logged"
[ -z "$(grep -v '^#' "$IMG.latent")" ] || fail "latent sectors left: $(cat "$IMG.latent")"
# ino as fsck and stat name it
[ "$(jget "$out" '[f["ino"] for f in j["damaged_files"] if f["path"] == "/a/small"][0]')" = \
	"$(stat -c %i "$MNT/a/small")" ] || fail "ino of /a/small: $out"
# the human report: fsck.mendfs's lines
txt=$(mendctl scrub "$MNT")
st=$?
[ $st = 4 ] || fail "scrub (text) exited $st"
grep -qx '  /a/b/medium: bytes 42496-43007 (512 bytes) damaged' <<<"$txt" || fail "text report: $txt"
grep -q '^Damage report (3 poisoned ranges):$' <<<"$txt" || fail "text report: $txt"
[ "$(ls -a "$MNT/d" | md5sum)" = "$L" ] || fail "the directory listing changed"
# a terminal gets fsck -C 0's progress bar, reaching 100.0% (script(1) gives a pty); a pipe none
timeout 120 script -qec "$(printf '%q ' "$MENDCTL" scrub "$MNT")" /dev/null >"$WORK/tty" 2>&1
grep -qa $'\r'"$MNT: |=* *|  *[0-9]*\\.[0-9]%" "$WORK/tty" || fail "no progress bar: $(od -c "$WORK/tty" | head)"
grep -qa "|=*| 100\\.0%" "$WORK/tty" || fail "the bar does not reach 100.0%"
grep -qa $'\r\e\\[K' "$WORK/tty" || fail "the bar is not erased before the report"
grep -qa 'Damage report (3 poisoned ranges):' "$WORK/tty" || fail "no report on the terminal"
mendctl scrub "$MNT" >/dev/null 2>"$WORK/pipe.err"
grep -qa $'\r' "$WORK/pipe.err" && fail "a bar drawn into a pipe: $(od -c "$WORK/pipe.err" | head)"

step="rate"
t0=$(date +%s.%N)
mendctl scrub --rate 2 "$MNT" >/dev/null
st=$?
t1=$(date +%s.%N)
[ $st = 4 ] || fail "scrub --rate 2 exited $st"
python3 -c "import sys; sys.exit(0 if $t1 - $t0 >= 3 else 1)" ||
	fail "scrub --rate 2 of ~13 MB took $(python3 -c "print(round($t1 - $t0, 2))") s"
t0=$(date +%s.%N)
full=$(mendctl scrub --json "$MNT")
t1=$(date +%s.%N)
echo "unthrottled scrub: $(python3 -c "print(round($t1 - $t0, 2))") s; --rate 2: slower" >&2

step="interrupt and resume"
"$MENDCTL" scrub --json --rate 1 "$MNT" >"$WORK/int.json" &
SPID=$!
sleep 2
# one scrub at a time: a second one, fresh or --resume, is refused (exit 16)
# and moves no cursor (checked below: interrupted + resumed == whole)
for args in "" --resume; do
	st=0
	busy=$(mendctl scrub --json $args "$MNT" 2>"$WORK/busy.err") || st=$?
	[ $st = 16 ] || fail "a second scrub ($args) beside a running one exited $st: $busy"
	[ "$(jget "$busy" 'j["exit_code"]')" = 16 ] || fail "second scrub's JSON: $busy"
	grep -q "another scrub of this filesystem is running" "$WORK/busy.err" ||
		fail "second scrub's message: $(cat "$WORK/busy.err")"
done
sleep 3 # ~2.3 MB of metadata (two copies) at 1 MB/s, then data
kill -INT $SPID
st=0
wait $SPID || st=$?
int=$(cat "$WORK/int.json")
[ $st = 32 ] || fail "interrupted scrub exited $st: $int"
[ "$(jget "$int" 'j["done"]')" = False ] || fail "interrupted: $int"
[ "$(jget "$int" 'j["exit_code"]')" = 32 ] || fail "interrupted: $int"
grep -Eq 'interrupted in the (metadata|data) phase at block [0-9]+ of' <<<"$int" ||
	fail "where it stopped: $int"
res=$(mendctl scrub --resume --json "$MNT")
st=$?
[ $st = 4 ] || fail "resumed scrub exited $st: $res"
[ "$(files "$res")" = "$(files "$out")" ] || fail "resumed report: $res"
[ "$(jget "$int" 'j["data_bytes"]') $(jget "$res" 'j["data_bytes"]')" != "0 0" ] || fail "nothing read"
# the two parts together are one whole scrub: every block once
sum() { jget "$1" "j['data_bytes']"; jget "$1" "j['metadata_checked'] + j['metadata_skipped']"; }
[ "$(paste -d+ <(sum "$int") <(sum "$res") | python3 -c 'import sys; [print(eval(l)) for l in sys.stdin]' | tr '\n' ' ')" = "$(sum "$full" | tr '\n' ' ')" ] ||
	fail "interrupted + resumed != whole: $int / $res / $full"
umount_fg

step=fsck
fo=$(timeout 120 "$FSCK_MENDFS" -n --json "$IMG")
st=$?
[ $st = 4 ] || fail "fsck -n exited $st, expected 4 (damaged data only): $fo"
[ "$(jget "$fo" 'j["metadata_errors"]')" = 0 ] || fail "fsck metadata errors: $fo"
[ "$(files "$fo")" = "$(files "$out")" ] || fail "fsck's damaged files differ from scrub's: $fo"
[ "$(jget "$fo" 'sorted(f["ino"] for f in j["damaged_files"])')" = \
	"$(jget "$out" 'sorted(f["ino"] for f in j["damaged_files"])')" ] || fail "inode numbers: $fo"
[ "$(blk "$DR")" = "$(blk "$TW")" ] || fail "block $DR and its twin $TW still differ"

step="superblock and journal"
# mounted, with committed transactions in the journal (checkpoints are lazy):
# the backup superblock and every primary journal block overwritten with
# garbage; the scrub's start rewrites the superblock copy and each live
# journal block's bad copy from the good one, logged, events posted
read -r _ _ JS _ JL _ JT _ <<<"$(grep ^sb <<<"$loc")"
mount_fg
for i in $(seq 1 20); do
	echo "$i" | dd of="$MNT/j$i" conv=fsync status=none || fail "j$i" # fsync: a commit each
done
NB=$(($(stat -c %s "$IMG") / 4096))
head -c 4096 /dev/urandom | dd of="$IMG" bs=4096 seek=$((NB - 1)) conv=notrunc status=none ||
	fail "corrupting the backup superblock"
dd if=/dev/urandom of="$IMG" bs=4096 seek="$JS" count="$JL" conv=notrunc status=none ||
	fail "corrupting the journal"
nlog=$(wc -l <"$LOG")
out=$(mendctl scrub --json "$MNT")
[ "$(jget "$out" 'j["metadata_errors"]')" = 0 ] || fail "metadata errors after the heal: $out"
new=$(tail -n +$((nlog + 1)) "$LOG")
grep -q "scrub: superblock copy at block $((NB - 1)) corrupt, rewritten from the mounted filesystem's superblock" <<<"$new" ||
	fail "no superblock heal logged: $new"
nj=$(grep -c "scrub: journal block [0-9]*: copy at [0-9]* corrupt, rewritten from the good copy" <<<"$new")
[ "$nj" -ge 1 ] || fail "no journal block healed: $new"
[ "$(jget "$out" 'j["metadata_healed"]')" -ge $((nj + 1)) ] || fail "metadata_healed: $out"
[ "$(blk 0)" = "$(blk $((NB - 1)))" ] || fail "the superblock copies differ after the scrub"
for b in $(grep -o "scrub: journal block [0-9]*: copy at [0-9]*" <<<"$new" | awk '{print $NF}'); do
	[ "$(blk "$b")" = "$(blk $((b - JS + JT)))" ] || fail "journal block $b and its twin differ"
done
ev=$(mendctl events --json --no-follow "$MNT")
[ "$(grep -c '"kind":"metadata_healed"' <<<"$ev")" -ge $((nj + 1)) ] || fail "events: $ev"
grep -q '"kind":"metadata_healed".*"sector":'$(((NB - 1) * 8))',' <<<"$ev" ||
	fail "no event for the superblock copy: $ev"
for i in $(seq 1 20); do [ "$(cat "$MNT/j$i")" = "$i" ] || fail "j$i"; done
# both copies of the journal garbage: no copy to heal from, so the scrub
# checkpoints (every committed block in place, the tail past them)
for i in $(seq 21 30); do
	echo "$i" | dd of="$MNT/j$i" conv=fsync status=none || fail "j$i"
done
dd if=/dev/urandom of="$IMG" bs=4096 seek="$JS" count="$JL" conv=notrunc status=none &&
	dd if=/dev/urandom of="$IMG" bs=4096 seek="$JT" count="$JL" conv=notrunc status=none ||
	fail "corrupting both journal copies"
nlog=$(wc -l <"$LOG")
out=$(mendctl scrub --json "$MNT")
[ "$(jget "$out" 'j["metadata_errors"]')" = 0 ] || fail "metadata errors after the checkpoint: $out"
grep -q "scrub: [0-9]* journal block(s) with no good copy: checkpointed, replay no longer needs them" \
	<<<"$(tail -n +$((nlog + 1)) "$LOG")" || fail "no checkpoint logged: $(tail -n +$((nlog + 1)) "$LOG")"
for i in $(seq 1 30); do [ "$(cat "$MNT/j$i")" = "$i" ] || fail "j$i"; done
umount_fg
fo=$(timeout 120 "$FSCK_MENDFS" -n --json "$IMG")
[ "$(jget "$fo" 'j["metadata_errors"]')" = 0 ] || fail "fsck after the heal: $fo"
echo "pass: $name"
