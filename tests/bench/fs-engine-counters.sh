#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The block engine's counters under filesystem workloads (docs/benchmarks/engine.md,
# "Engine counters under the filesystem").  Mounts a fresh image on tmpfs
# with the daemon of BUILD, runs each workload, and prints the change of the
# engine counters of `mendctl stats --json` across it (workload and sync):
# bios (reads, writes, zeroing; not flushes), requests (flushes included),
# and, when the daemon has MENDFS_IOC_QUEUE_STATS, merges, plug flushes and
# the average dispatch batch (requests / dispatch batches), with the
# filesystem's commits, checkpoints and metadata blocks written in place.
#
#   tests/bench/fs-engine-counters.sh BUILD [MENDCTL]
#
# MENDCTL defaults to BUILD's; give a newer one to read an older daemon.
# Workloads: create (3000 empty files, an fsync of the directory every 10:
# commit-heavy), seqwrite (64 MiB, 1 MiB writes, fsync), randwrite (4000 x
# 4 KiB at random block offsets of a 64 MiB file, fsync), randwrite2 (the
# same by two threads at once, each on its own file: bios_per_queue shows
# which hardware queues served them).
set -euo pipefail
B=${1:?usage: fs-engine-counters.sh BUILD [MENDCTL]}
MC=${2:-$B/fs/mendctl/mendctl}
W=$(mktemp -d /dev/shm/mendfs-engine.XXXXXX)
MNT=$W/m
DPID=
cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
mkdir "$MNT"
# a 1 MiB journal (the smallest), so that the workloads checkpoint
"$B/mkfs/mkfs.mendfs" -q -f -J 1M "$W/img" 1G >/dev/null
"$B/fs/fuse/mendfs" -f "$W/img" "$MNT" 2>>"$W/log" &
DPID=$!
for ((i = 0; i < 600; i++)); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$W/log" >&2; exit 1; }

snap() { "$MC" stats --json "$MNT"; }
# report NAME BEFORE AFTER
report() {
	python3 - "$1" "$2" "$3" <<'PY'
import json, sys
name, a, b = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
d = lambda k: b[k] - a[k]
req = d("requests")
# bios of data ops (reads, writes, write_zeroes); requests count flushes too
line = f"{name:10} bios={d('reads') + d('writes') + d('write_zeroes')} requests={req}"
if "queues" in a and "queues" in b:
    s = lambda k, j: sum(q[k] for q in j["queues"])
    line += f" merges={s('merges', b) - s('merges', a)}"
    pf = s("plug_flushes", b) - s("plug_flushes", a)
    db = s("dispatch_batches", b) - s("dispatch_batches", a)
    line += f" plug_flushes={pf} dispatch_batches={db}"
    line += f" avg_batch={req / db:.2f}" if db else " avg_batch=-"
    if len(b["queues"]) == len(a["queues"]):
        per = [y["ios"] - x["ios"] for x, y in zip(a["queues"], b["queues"])]
        line += " bios_per_queue=" + ",".join(map(str, per))
line += f" commits={d('commits')} checkpoints={d('checkpoints')}"
line += f" meta_writes={d('meta_writes')}"
print(line)
PY
}

a=$(snap)
python3 - "$MNT/d" <<'PY'
import os, sys
os.mkdir(sys.argv[1])
dfd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
for i in range(3000):
    os.close(os.open(f"{sys.argv[1]}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    if i % 10 == 9:
        os.fsync(dfd)  # a commit every 10 creates
os.close(dfd)
PY
b=$(snap)
report create "$a" "$b"

a=$(snap)
dd if=/dev/zero of="$MNT/seq" bs=1M count=64 conv=fsync status=none
b=$(snap)
report seqwrite "$a" "$b"

a=$(snap)
python3 - "$MNT/rand" <<'PY'
import os, random, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.ftruncate(fd, 64 << 20)
r = random.Random(15)
buf = b"x" * 4096
for _ in range(4000):
    os.pwrite(fd, buf, r.randrange(16384) * 4096)
os.fsync(fd)
os.close(fd)
PY
b=$(snap)
report randwrite "$a" "$b"

a=$(snap)
python3 - "$MNT" <<'PY'
import os, random, sys, threading
def writer(i):
    fd = os.open(f"{sys.argv[1]}/rand2-{i}", os.O_CREAT | os.O_WRONLY, 0o644)
    os.ftruncate(fd, 64 << 20)
    r = random.Random(15 + i)
    buf = b"x" * 4096
    for _ in range(4000):
        os.pwrite(fd, buf, r.randrange(16384) * 4096)
    os.fsync(fd)
    os.close(fd)
ts = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
PY
b=$(snap)
report randwrite2 "$a" "$b"
