#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The block engine at work under the filesystem, read from its per-queue
# counters (`mendctl stats --json`): `engine-test.sh NAME` with the built
# programs named by $MENDFS, $MKFS_MENDFS and $MENDCTL.
#
#   merge    a sequential write of 1 MiB writes: its bios (128 KiB) merge
#            into requests (up to 1 MiB): merges > 0, more bios than plug
#            flushes, and every bio accounted as a request or a merge
#   faults   4 KiB writes in random order into a fresh sparse file (every one
#            a fresh page of the image's mapping) cost the daemon fewer than
#            0.25 page faults each (perf stat -e page-faults; about 1 when the
#            first store into every page faults)
#   queues   two writer threads (random 4 KiB writes to two files at once)
#            are served by two FUSE worker threads, each with its own
#            hardware queue: no queue carries more than 3/4 of the write
#            bios and a second one at least 1/10 (all go to one queue when the
#            threads share it), and the daemon has one queue per worker thread
#            plus two (-o threads=4: 6)
#
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no python3, no perf).
set -eu
. "$(dirname "$0")/lib.sh"

name=${1:?usage: engine-test.sh NAME}
need_progs MENDFS MKFS_MENDFS MENDCTL
need_root_fuse
need_cmds python3
work_init engine /dev/shm

mkfs_mendfs -f "$IMG" 256M
snap() { "$MENDCTL" stats --json "$MNT" || fail "mendctl stats"; }
# delta BEFORE AFTER PYTHON-ASSERTS: run the asserts with d(key) (summed over
# the queues) and q (the queues after)
delta() {
	python3 - "$1" "$2" "$3" <<'PY' || fail "$step: counters: $2"
import json, os, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def s(j, k): return sum(q[k] for q in j["queues"])
def d(k): return s(b, k) - s(a, k)
q = b["queues"]
print(f"{sys.argv[0]}: " + " ".join(f"{k}={d(k)}" for k in
      ("ios", "requests", "merges", "plug_flushes", "dispatch_batches")))
exec(sys.argv[3])
PY
}

case $name in
merge)
	step=seqwrite
	mount_fg
	a=$(snap)
	dd if=/dev/zero of="$MNT/seq" bs=1M count=32 conv=fsync status=none || fail "dd"
	b=$(snap)
	delta "$a" "$b" '
assert d("merges") >= 32 * 4, "a 1 MiB write of contiguous blocks must merge"
assert d("ios") >= 32 * 8, "1 MiB writes are cut into 128 KiB bios"
assert d("ios") > 4 * d("plug_flushes"), "several bios per plug"
for x in q:
    assert x["ios"] == x["requests"] + x["merges"], x
'
	umount_fg
	;;
faults)
	step=randwrite-fresh
	need_cmds perf
	mount_fg
	# warm the daemon's threads and allocator on another file first
	dd if=/dev/zero of="$MNT/warm" bs=4k count=256 status=none || fail "dd"
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644); os.ftruncate(fd, 32 << 20)' "$MNT/f" ||
		fail "truncate"
	# page faults taken by the daemon's threads (perf's software event: not the
	# pages populated by madvise, which /proc/PID/stat counts as minor faults)
	perf stat -x, -e page-faults -p "$DPID" -o "$WORK/stat" &
	ppid=$!
	sleep 0.5
	python3 - "$MNT/f" <<'PY' || fail "writes"
import os, random, sys
buf = b"x" * 4096
fd = os.open(sys.argv[1], os.O_WRONLY)
for o in random.Random(15).sample(range(8192), 8192):
    os.pwrite(fd, buf, o * 4096)
os.close(fd)
PY
	kill -INT $ppid
	wait $ppid || true
	f=$(awk -F, '/page-faults/ { printf "%.3f", $1 / 8192 }' "$WORK/stat")
	echo "page faults per fresh 4 KiB write: $f"
	[ -n "$f" ] || fail "no perf figure: $(cat "$WORK/stat")"
	awk -v f="$f" 'BEGIN { exit !(f < 0.25) }' || fail "$f page faults per write (at most 0.25)"
	umount_fg
	;;
queues)
	step=two-writers
	mount_fg threads=4
	a=$(snap)
	python3 - "$MNT" <<'PY' || fail "writes"
import os, random, sys, threading
def writer(i):
    # each on a CPU of its own: over io_uring a request is served by its CPU's ring thread
    os.sched_setaffinity(0, {i % os.cpu_count()})
    buf = b"x" * 4096
    fd = os.open(f"{sys.argv[1]}/w{i}", os.O_CREAT | os.O_WRONLY, 0o644)
    os.ftruncate(fd, 16 << 20)
    r = random.Random(i)
    for _ in range(3000):
        os.pwrite(fd, buf, r.randrange(4096) * 4096)
    os.close(fd)
ts = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
PY
	b=$(snap)
	# threads=4: 4 workers, the main and the commit thread; over io_uring a ring thread per CPU
	nq=6
	[ "${MENDFS_TEST_TRANSPORT:-}" = io_uring ] && nq=$((6 + $(getconf _NPROCESSORS_CONF)))
	NQ=$nq delta "$a" "$b" '
nq = int(os.environ["NQ"])
assert len(q) == nq, f"{len(q)} hardware queues with threads=4, not {nq}"
w = [x["ios"] for x in q]
w0 = [x["ios"] for x in json.loads(sys.argv[1])["queues"]]
dw = sorted((y - x for x, y in zip(w0, w)), reverse=True)
print("write bios per queue:", dw)
assert dw[0] <= sum(dw) * 3 // 4 and dw[1] >= sum(dw) // 10, f"the writers share a queue: {dw}"
'
	umount_fg
	;;
*)
	fail "unknown test $name"
	;;
esac
