#!/bin/bash
# SPDX-License-Identifier: MIT
#
# events-test.sh: damage events (docs/RECOVERY.md "Damage events",
# MENDFS_IOC_EVENTS, mendctl events).  On one mount with poison_inject and a
# latent poison file, with `mendctl events --json` following from the start:
#   - injected poison in a file, latent poison a read touches, a metadata
#     block with one corrupt copy (healed) and one with both copies corrupt
#     (lost) each arrive exactly once, in seq order, with the file's inode,
#     path and byte range, and each is logged once with the same facts;
#   - --from SEQ --no-follow prints exactly the events from SEQ on; the
#     ioctl's positions are right, a bad header or wait_ms is EINVAL;
#   - a flood of 1500 injections: the log is rate-limited (damage lines +
#     "suppressed K" + "dropped K" account for every event), a late reader
#     is told how many the ring dropped ("lost") and gets the 1024 newest;
#   - SIGTERM ends a follower with exit 0; a lazy unmount ends the follower
#     (exit 0) and then the daemon (exit 0).
# Programs from $MENDFS, $MKFS_MENDFS, $MENDCTL, $METACHECK.  Exit 0 pass,
# 1 fail, 77 skip (not root, no /dev/fuse, no python3).
set -u
. "$(dirname "$0")/lib.sh"

need_progs MENDFS MKFS_MENDFS MENDCTL METACHECK
need_root_fuse
need_cmds python3
work_init ev
FPID="" # the follower
# shellcheck disable=SC2317 # run by lib.sh on exit
on_cleanup() {
	[ -z "$FPID" ] || kill "$FPID" 2>/dev/null
}

mendctl() { timeout 60 "$MENDCTL" "$@"; }
mc() { timeout 60 "$METACHECK" "$@" || fail "meta-check $*"; }
# first_extent FILE: "SECTOR LENGTH" of FILE's first extent
first_extent() {
	mendctl bmap --json "$1" | python3 -c '
import json, sys
e = json.load(sys.stdin)["extents"][0]
assert e["offset"] == 0, e
print(e["sector"], e["length"])' || fail "bmap $1"
}
# wait_lines FILE N: FILE has at least N lines within 30 s
wait_lines() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "$1: $(wc -l <"$1") lines after 30 s, expected $2: $(tail -3 "$1")"
}

step=setup
mkfs_mendfs "$IMG" 64M
mount_fg
mkdir "$MNT/d" "$MNT/e" "$MNT/e2" || fail "mkdir"
for x in f g; do
	dd if=/dev/urandom of="$MNT/d/$x" bs=4096 count=16 status=none || fail "dd $x"
done
dd if=/dev/urandom of="$MNT/flood" bs=1M count=4 status=none || fail "dd flood"
# directories with an entry tree (a block of their own)
for i in $(seq 1 200); do : >"$MNT/e/an-entry-with-a-longish-name-$i"; done
for i in $(seq 1 200); do : >"$MNT/e2/an-entry-with-a-longish-name-$i"; done
read -r SF _ <<<"$(first_extent "$MNT/d/f")"
read -r SG _ <<<"$(first_extent "$MNT/d/g")"
read -r SL LL <<<"$(first_extent "$MNT/flood")"
IF=$(stat -c %i "$MNT/d/f") IG=$(stat -c %i "$MNT/d/g") IL=$(stat -c %i "$MNT/flood")
IE=$(stat -c %i "$MNT/e") IE2=$(stat -c %i "$MNT/e2")
umount_fg
loc=$(mc locate "$IMG" "$IE" "$IE2")
read -r _ _ _ _ _ _ _ _ _ _ MS _ MT <<<"$(grep ^sb <<<"$loc")"
DE=$(awk -v i="$IE" '$2 == i { print $8 }' <<<"$loc")
DE2=$(awk -v i="$IE2" '$2 == i { print $8 }' <<<"$loc")
[ "${DE:-0}" -gt 0 ] || fail "no directory block for e: $loc"
[ "${DE2:-0}" -gt 0 ] || fail "no directory block for e2: $loc"
# e: its primary copy corrupt; e2: both copies
for b in "$DE" "$DE2" $((DE2 - MS + MT)); do
	printf 'garbage!' | dd of="$IMG" bs=1 seek=$((b * 4096 + 100)) conv=notrunc status=none ||
		fail "corrupting block $b"
done
# g: sector 1 of its block 2 is latent poison, found by the first read
echo "$((SG + 2 * 8 + 1)) 1" >"$IMG.latent"

step=kinds
mount_fg poison_inject
# not under mendctl()'s timeout: it follows until the unmount at the end
"$MENDCTL" events --json "$MNT" >"$WORK/ev" 2>"$WORK/ev.err" &
FPID=$!
mendctl inject "$MNT" $((SF + 3 * 8)) 2 || fail "inject"
cat "$MNT/d/g" >/dev/null 2>&1 && fail "reading g over latent poison succeeded"
ls "$MNT/e" >/dev/null || fail "ls e (one copy corrupt)"
ls "$MNT/e2" >/dev/null 2>&1 && fail "ls e2 (both copies corrupt) succeeded"
wait_lines "$WORK/ev" 4
sleep 1 # nothing more may come
python3 - "$WORK/ev" "$IMG" <<PYEOF || fail "events: $(cat "$WORK/ev")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
want = [
    dict(kind="poison", cause="injected", sector=$SF + 24, count=2, ino=$IF, path="/d/f",
         offset=3 * 4096, length=1024),
    dict(kind="poison", cause="latent", sector=$SG + 17, count=1, ino=$IG, path="/d/g",
         offset=2 * 4096 + 512, length=512),
    dict(kind="metadata_healed", cause="corrupt", block=$DE, sector=$DE * 8, count=8),
    dict(kind="metadata_lost", cause="corrupt", block=$DE2, sector=$DE2 * 8, count=8),
]
# the metadata events may come first: finding the path of the poisoned file
# reads every directory (events_resolve.c), e and e2 with them
assert [e["seq"] for e in ev] == [1, 2, 3, 4], ev
for w in want:
    m = [e for e in ev if (e["kind"], e["cause"]) == (w["kind"], w["cause"])]
    assert len(m) == 1, (w, ev)
    e = m[0]
    assert e["device"] == sys.argv[2], e
    assert e["time"].endswith("Z"), e
    for k, v in w.items():
        assert e[k] == v, (k, e, w)
    if e["kind"] != "poison":
        assert "ino" not in e and "path" not in e, e
PYEOF
for l in "poison (injected) on $IMG sectors $((SF + 24))-$((SF + 25)): /d/f (inode $IF) bytes 12288-13311" \
	"poison (latent) on $IMG sectors $((SG + 17))-$((SG + 17)): /d/g (inode $IG) bytes 8704-9215" \
	"metadata block $DE on $IMG (sectors $((DE * 8))-$((DE * 8 + 7))) corrupt, healed from its twin" \
	"metadata block $DE2 on $IMG (sectors $((DE2 * 8))-$((DE2 * 8 + 7))) corrupt, and its twin bad too: lost"; do
	[ "$(grep -F ": $l" "$LOG" | grep -c "damage #[1-4]: ")" = 1 ] || fail "not logged once: $l"
done
ls "$MNT/e2" >/dev/null 2>&1   # lost again: no new event
cat "$MNT/d/g" >/dev/null 2>&1 # poison known: no new event

step=from
out=$(mendctl events --json --no-follow --from 3 "$MNT") || fail "events --from 3"
[ "$out" = "$(sed -n 3,4p "$WORK/ev")" ] || fail "--from 3: $out"
out=$(mendctl events --json --no-follow "$MNT") || fail "events --no-follow"
[ "$out" = "$(cat "$WORK/ev")" ] || fail "--no-follow: $out"
out=$(mendctl events --no-follow "$MNT") || fail "events (text)"
grep -q "^[1-4] .* poison (latent) $IMG sectors $((SG + 17))-$((SG + 17)): /d/g (inode $IG) bytes 8704+512\$" <<<"$out" ||
	fail "text: $out"
[ "$(wc -l <<<"$out")" = 4 ] || fail "text: $out"
out=$(mendctl events --no-follow --from 2 "$MNT") || fail "events --from 2 (text)"
[ "$(cut -d' ' -f1 <<<"$out" | tr '\n' ' ')" = "2 3 4 " ] || fail "text --from 2: $out"
# the ioctl itself: the header and wait_ms checked, the positions right
python3 - "$MNT" <<'PYEOF' || fail "MENDFS_IOC_EVENTS structs"
import errno, fcntl, os, struct, sys
size = 10584
nr = (3 << 30) | (size << 16) | (0xF5 << 8) | 10
fd = os.open(sys.argv[1], os.O_RDONLY)
def call(version=1, flags=0, from_seq=0, wait_ms=0, reserved0=0):
    buf = bytearray(size)
    struct.pack_into("<IIQI", buf, 0, version, flags, from_seq, wait_ms)
    struct.pack_into("<Q", buf, 56, reserved0)
    fcntl.ioctl(fd, nr, buf)
    return buf
b = call(from_seq=2)
got = struct.unpack_from("<IQQQQ", b, 20)
assert got == (3, 5, 1, 5, 0), got  # nr, next_seq, oldest_seq, head_seq, lost
assert [struct.unpack_from("<Q", b, 88 + 328 * i)[0] for i in range(4)] == [2, 3, 4, 0]
for kw in (dict(version=2), dict(flags=1), dict(wait_ms=1001), dict(reserved0=1)):
    try:
        call(**kw)
    except OSError as e:
        assert e.errno == errno.EINVAL, (kw, e)
    else:
        raise AssertionError(kw)
try:
    fcntl.ioctl(fd, (3 << 30) | (1000 << 16) | (0xF5 << 8) | 10, bytearray(1000))
except OSError as e:
    assert e.errno == errno.ENOTTY, e
else:
    raise AssertionError("a wrong size was taken")
PYEOF

step=flood
N=1500
[ "$LL" -ge $((N * 2 * 512)) ] || fail "flood's first extent is too short: $LL"
t0=$(date +%s)
for ((i = 0; i < N; i++)); do
	"$MENDCTL" inject "$MNT" $((SL + 2 * i)) 1 || fail "inject $i"
done
t1=$(date +%s)
wait_lines "$WORK/ev" $((4 + N))
sleep 2.5 # the log's summary of the last second
python3 - "$WORK/ev" "$SL" "$IL" "$N" <<'PYEOF' || fail "flood events"
import json, sys
sl, il, n = map(int, sys.argv[2:])
ev = [json.loads(l) for l in open(sys.argv[1])]
seqs = [e["seq"] for e in ev if "seq" in e]
lost = sum(e["lost"] for e in ev if "lost" in e)
assert seqs == sorted(set(seqs)), "seqs not increasing or repeated"
assert len(seqs) + lost == 4 + n and seqs[-1] == 4 + n, (len(seqs), lost)
for e in ev[4:]:
    if "seq" in e:
        i = e["seq"] - 5
        assert e["sector"] == sl + 2 * i and e["ino"] == il and e["path"] == "/flood", e
        assert e["offset"] == 1024 * i and e["length"] == 512, e
PYEOF
python3 - "$LOG" "$N" "$t0" "$t1" <<'PYEOF' || fail "flood log: $(grep -c 'damage' "$LOG") damage lines"
import re, sys
log = open(sys.argv[1]).read()
n, t0, t1 = map(int, sys.argv[2:])
lines = len(re.findall(r"damage #\d+:", log))
supp = sum(map(int, re.findall(r"damage events: suppressed (\d+) messages", log)))
drop = sum(map(int, re.findall(r"damage events: (\d+) dropped", log)))
assert lines + supp + drop == 4 + n, (lines, supp, drop)
assert supp > 0, "nothing suppressed"
# at most 20 a second: the flood took t1 - t0 seconds, plus the seconds around it
assert lines <= 4 + 20 * (t1 - t0 + 6), (lines, t1 - t0)
print(f"flood: {n} injections in {t1 - t0} s: {lines} damage lines logged, "
      f"{supp} suppressed, {drop} dropped before logging")
PYEOF
mendctl events --json --no-follow --from 1 "$MNT" >"$WORK/late" || fail "events after the flood"
python3 - "$WORK/late" "$N" <<'PYEOF' || fail "late reader: $(head -2 "$WORK/late")"
import json, sys
n = int(sys.argv[2])
ev = [json.loads(l) for l in open(sys.argv[1])]
oldest = 4 + n + 1 - 1024
assert ev[0] == {"lost": oldest - 1, "oldest_seq": oldest}, ev[0]
assert [e["seq"] for e in ev[1:]] == list(range(oldest, 4 + n + 1)), "seqs"
PYEOF
out=$(mendctl events --json --no-follow --from $((4 + N + 1)) "$MNT") || fail "events at the head"
[ -z "$out" ] || fail "events past the last: $out"

step=end
"$MENDCTL" events "$MNT" >/dev/null 2>&1 &
P2=$!
sleep 0.5
kill -TERM $P2
wait_gone $P2 5 || fail "a follower outlived SIGTERM by 5 s"
wait $P2 || fail "a follower ended by SIGTERM: exit $?"
kill -0 "$FPID" || fail "the follower died"
umount -l "$MNT" || fail "umount -l"
wait_gone "$FPID" 10 || fail "the follower outlived the unmount by 10 s"
wait "$FPID" || fail "the follower: exit $?"
FPID=""
grep -q "was unmounted" "$WORK/ev.err" || fail "follower: $(cat "$WORK/ev.err")"
wait_gone "$DPID" 30 || fail "the daemon did not exit after the unmount"
reap "$DPID" || fail "the daemon exited with status $?"
exit 0
