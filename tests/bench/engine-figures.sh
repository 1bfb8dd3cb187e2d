#!/usr/bin/env bash
# Reproduce the engine figures of docs/benchmarks/engine.md and the engine charts
# of docs/BENCHMARKS.md (issue: block engine).
# Not part of the test suite: it takes a few minutes and needs root (zram).
#
#   tests/bench/engine-figures.sh [SECONDS] [ROUNDS] [JSON]
#
# With JSON, the figures are also written to that file (the input of
# tests/bench/charts.py, which draws docs/charts/engine-*.svg from it).
#
# Builds two release trees (poison_checks=true and false), then runs, in this order:
#  1. null backend, 1 thread pinned, randread 4 KiB, depth 128, batch 32:
#     ROUNDS alternating runs of each build -> median IOPS/core and the ratio;
#     callgrind instructions per I/O of each build (noise-free);
#  2. knobs on the null backend: --nomerge, --sched deadline, --qos, --poison;
#  3. scaling: 2 threads vs 1 thread on the null backend;
#  4. pmem backend over an image on tmpfs: randread and randwrite vs the plain
#     memcpy loop over the same mapping (--baseline memcpy);
#  5. uring backend on /dev/zram0 vs fio --ioengine=io_uring --direct=1, same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-3}
ROUNDS=${2:-5}
JSON_OUT=${3:-}
ON=build-bench-checks
OFF=build-bench-nochecks

[ -d $ON ] || meson setup $ON -Dbuildtype=release -Dpoison_checks=true >/dev/null
[ -d $OFF ] || meson setup $OFF -Dbuildtype=release -Dpoison_checks=false >/dev/null
ninja -C $ON tests/bench/mendblk-bench >/dev/null
ninja -C $OFF tests/bench/mendblk-bench >/dev/null
B_ON=$ON/tests/bench/mendblk-bench
B_OFF=$OFF/tests/bench/mendblk-bench
# Single-threaded runs go to CPU 1 at real-time priority so that whatever else the
# machine runs does not sit on the measured core (never for multi-threaded runs).
# Round-robin, not FIFO: the main thread, which ends the run, shares CPU 1 with
# the spinning worker at the same priority; under SCHED_FIFO it never runs again
# and the benchmark never stops.
RT="chrt -r 50 taskset -c 1"
$RT true 2>/dev/null || RT=""

field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }
median() { python3 -c "import sys,statistics; print(int(statistics.median(float(x) for x in sys.argv[1:])))" "$@"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
echo
echo "== 1. null backend, poison_checks on vs off (randread 4k, depth 128, batch 32, 1 thread pinned)"
on=(); off=()
for r in $(seq "$ROUNDS"); do
	on+=("$($RT $B_ON --backend null --no-pin --seconds "$SECS" --json | field iops_per_core)")
	off+=("$($RT $B_OFF --backend null --no-pin --seconds "$SECS" --json | field iops_per_core)")
done
m_on=$(median "${on[@]}"); m_off=$(median "${off[@]}")
insns=()
echo "checks on : IOPS/core runs ${on[*]} -> median $m_on"
echo "checks off: IOPS/core runs ${off[*]} -> median $m_off"
python3 -c "print('ratio on/off: %.4f' % ($m_on / $m_off))"
if command -v valgrind >/dev/null; then
	for b in $B_ON $B_OFF; do
		ir=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null $b --backend null \
			--ios 1000000 --no-pin 2>&1 | sed -n 's/.*Collected : //p')
		echo "instructions per I/O ($b, whole program incl. benchmark loop): $(python3 -c "print('%.1f' % ($ir / 1e6))")"
		insns+=("$ir")
	done
fi

echo
echo "== 2. knobs (null backend, checks on)"
knobs=()
for k in "" "--nomerge" "--sched deadline" "--qos" "--poison"; do
	# shellcheck disable=SC2086
	v=$($RT $B_ON --backend null --no-pin --seconds "$SECS" --json $k | field iops_per_core)
	echo "knob '${k:-default}': IOPS/core $v"
	kn=${k:-default}
	knobs+=("${kn// /_}=$v")
done

echo
echo "== 3. scaling on the null backend (needs an otherwise idle machine: both cores)"
one=$($B_ON --backend null --seconds "$SECS" --threads 1 --json | field iops)
two=$($B_ON --backend null --seconds "$SECS" --threads 2 --json | field iops)
echo "1 thread: $one IOPS; 2 threads: $two IOPS"
python3 -c "print('scaling 2T/1T: %.2fx' % ($two / $one))"

echo
echo "== 4. pmem backend on a tmpfs image vs memcpy over the same mapping"
pmem=()
IMG=/dev/shm/mendblk-bench.img
rm -f $IMG $IMG.badblocks
truncate -s 1G $IMG
dd if=/dev/zero of=$IMG bs=1M count=1024 conv=notrunc status=none
for rw in randread randwrite; do
	e=$($RT $B_ON --backend pmem --no-pin --path $IMG --rw $rw --seconds "$SECS" --json | field iops)
	m=$($RT $B_ON --backend pmem --no-pin --path $IMG --rw $rw --seconds "$SECS" --baseline memcpy --json | field iops)
	echo "$rw: engine $e IOPS, memcpy $m IOPS"
	pmem+=("$rw=$e,$m")
	python3 -c "print('  engine/memcpy: %.3f' % ($e / $m))"
done
rm -f $IMG $IMG.badblocks

echo
echo "== 5. uring backend on zram vs fio io_uring (randread 4k, depth 128)"
uring=
if [ -e /sys/block/zram0 ]; then
	if [ "$(cat /sys/block/zram0/disksize)" = 0 ]; then
		echo 1G >/sys/block/zram0/disksize
	fi
	dd if=/dev/urandom of=/dev/zram0 bs=1M count=256 oflag=direct status=none || true
	if command -v fio >/dev/null; then
		f=$($RT fio --name=r --filename=/dev/zram0 --ioengine=io_uring --direct=1 --rw=randread \
			--bs=4k --iodepth=128 --iodepth_batch_submit=32 --iodepth_batch_complete_min=1 \
			--size=256M --runtime="$SECS" --time_based --output-format=json |
			python3 -c "import json,sys; print(int(json.load(sys.stdin)['jobs'][0]['read']['iops']))")
	else
		f=0
		echo "fio not installed (apt-get install fio)"
	fi
	e=$($RT $B_ON --backend uring --no-pin --path /dev/zram0 --size 256M --rw randread --seconds "$SECS" --json | field iops)
	echo "engine $e IOPS, fio $f IOPS"
	uring="$e,$f"
	[ "$f" != 0 ] && python3 -c "print('  engine/fio: %.3f' % ($e / $f))"
else
	echo "no /dev/zram0"
fi

[ -n "$JSON_OUT" ] || exit 0
python3 - "$JSON_OUT" "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
	"$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
	"$(uname -r)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$SECS" \
	"${on[*]}" "${off[*]}" "${insns[*]}" "${knobs[*]}" "$one" "$two" "${pmem[*]}" "$uring" <<'EOF'
import json, sys
(out, commit, nproc, cpu, kernel, load, secs, on, off, insns, knobs, one, two, pmem,
 uring) = sys.argv[1:]
def nums(s):
    return [float(x) for x in s.split()]
def pairs(s):
    return (x.split("=", 1) for x in s.split())
r = {"commit": commit, "nproc": int(nproc), "cpu": cpu, "kernel": kernel,
     "load_after": load, "seconds_per_run": float(secs),
     "null": {"checks_on_iops_per_core": nums(on), "checks_off_iops_per_core": nums(off)},
     "knobs_iops_per_core": {k: float(v) for k, v in pairs(knobs)},
     "scaling_iops": {"1": float(one), "2": float(two)},
     "pmem_iops": {k: dict(zip(("engine", "memcpy"), map(float, v.split(","))))
                   for k, v in pairs(pmem)}}
if insns:
    on_i, off_i = nums(insns)
    r["null"]["insns_per_io"] = {"checks_on": on_i / 1e6, "checks_off": off_i / 1e6}
if uring:
    e, f = uring.split(",")
    r["uring_iops"] = {"engine": float(e), "fio": float(f)}
with open(out, "w") as fp:
    json.dump(r, fp, indent=1, sort_keys=True)
    fp.write("\n")
EOF
echo "figures written to $JSON_OUT"
