#!/usr/bin/env bash
# The uring backend against fio's own io_uring engine on the same zram device
# (issue 15, item 3; docs/benchmarks/engine.md "uring backend on zram vs fio").
# Not part of the test suite: it needs root, zram and fio, and takes a minute.
#
#   tests/bench/uring-vs-fio.sh [--build DIR] [--dev /dev/zramN] [--rounds N]
#                               [--seconds S] [--cpus LIST] [--rt] [--syscalls]
#                               [--completion-thread]
#
# 4 KiB random reads over 256 MiB of random data, depth 128, submitted 32 at a
# time, one thread.  ROUNDS interleaved rounds (mendblk-bench, fio,
# mendblk-bench, fio, ...), both under the same `taskset -c LIST` and nothing
# else: mendblk-bench runs with --no-pin so that neither program pins threads
# of its own (the io-wq worker that does zram's reads inherits its submitter's
# affinity, so a self-pinned bench would hold it on one CPU while fio's may use
# them all).  Prints every round, the medians, their ratio, and a JSON line.
# --rt runs both at real-time round-robin priority 50 (chrt -r 50), so that other
# work on the machine does not sit on the measured CPU; use it with one CPU only
# (it would take both CPUs from everyone else otherwise).
# --completion-thread runs the engine as the filesystem opens it (a completion
# thread per queue reaps) instead of the submitting thread polling (BLK_CFG_POLLED).
# --syscalls adds a round of each under `perf stat` counting io_uring_enter
# calls and context switches per I/O.
#
# Without --dev a 1 GiB zram device is created (zramctl -f) and removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=build-bench-rel
DEV=
ROUNDS=5
SECS=3
CPUS=1
SYSCALLS=0
RT=
MODE=
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--dev) DEV=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--seconds) SECS=$2; shift 2 ;;
	--cpus) CPUS=$2; shift 2 ;;
	--rt) RT="chrt -r 50"; shift ;;
	--syscalls) SYSCALLS=1; shift ;;
	--completion-thread) MODE=" --completion-thread"; shift ;;
	-h | --help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "uring-vs-fio.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
case "$RT,$CPUS" in
?*,*[,-]*) echo "uring-vs-fio.sh: --rt only with one CPU (--cpus N)" >&2; exit 2 ;;
esac
for t in fio taskset python3; do
	command -v $t >/dev/null || { echo "uring-vs-fio.sh: $t not installed" >&2; exit 1; }
done
[ -d "$BUILD" ] || meson setup "$BUILD" -Dbuildtype=release >/dev/null
ninja -C "$BUILD" tests/bench/mendblk-bench >/dev/null
BENCH=$BUILD/tests/bench/mendblk-bench

CREATED=
cleanup() { [ -z "$CREATED" ] || zramctl -r "$CREATED"; }
trap cleanup EXIT
if [ -z "$DEV" ]; then
	[ -e /sys/class/zram-control ] || modprobe zram 2>/dev/null || true
	DEV=$(zramctl -f -s 1G)
	CREATED=$DEV
	dd if=/dev/urandom of="$DEV" bs=1M count=256 oflag=direct status=none
fi

PIN="${RT:+$RT }taskset -c $CPUS"
BENCH_CMD="$BENCH --backend uring --path $DEV --size 256M --rw randread --bs 4096 --depth 128 --batch 32 --seconds $SECS --no-pin$MODE"
FIO_CMD="fio --name=r --filename=$DEV --ioengine=io_uring --direct=1 --rw=randread --bs=4k --size=256M --iodepth=128 --iodepth_batch_submit=32 --iodepth_batch_complete_min=1 --iodepth_batch_complete_max=128 --norandommap --randrepeat=0 --runtime=$SECS --time_based --output-format=json"

bench_iops() { $PIN $BENCH_CMD --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["iops"]))'; }
fio_iops() { $PIN $FIO_CMD | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'; }
median() { python3 -c 'import sys,statistics; print(round(statistics.median(int(x) for x in sys.argv[1:])))' "$@"; }

echo "machine: $(nproc) CPUs, kernel $(uname -r), device $DEV, ${RT:+$RT, }taskset -c $CPUS"
echo "load before: $(cat /proc/loadavg)"
echo "engine: $PIN $BENCH_CMD"
echo "fio:    $PIN $FIO_CMD"
b=(); f=()
for r in $(seq "$ROUNDS"); do
	b+=("$(bench_iops)")
	f+=("$(fio_iops)")
	echo "round $r: engine ${b[-1]} IOPS, fio ${f[-1]} IOPS"
done
LOAD_AFTER=$(cat /proc/loadavg)
mb=$(median "${b[@]}"); mf=$(median "${f[@]}")
ratio=$(python3 -c "print('%.2f' % ($mb / $mf))")
echo "load after: $LOAD_AFTER"
echo "median: engine $mb IOPS, fio $mf IOPS, engine/fio $ratio"

sys_json=null
if [ "$SYSCALLS" = 1 ] && command -v perf >/dev/null; then
	# io_uring_enter calls and context switches per I/O, one round each (the
	# whole process: the submitter and its io-wq workers)
	per_io() { # EVENTS_FILE IOS
		python3 - "$1" "$2" <<'EOF'
import sys
ev = {}
for line in open(sys.argv[1]):
    parts = line.split(',')
    if len(parts) > 2 and parts[0].strip().replace('.', '').isdigit():
        ev[parts[2]] = float(parts[0])
ios = float(sys.argv[2])
print('{"enter_per_io": %.3f, "cswitch_per_io": %.3f}' % (
    ev.get('syscalls:sys_enter_io_uring_enter', 0) / ios, ev.get('context-switches', 0) / ios))
EOF
	}
	ev=$(mktemp)
	ios=$(perf stat -x, -o "$ev" -e syscalls:sys_enter_io_uring_enter,context-switches -- \
		$PIN $BENCH_CMD --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ios"])')
	se=$(per_io "$ev" "$ios")
	ios=$(perf stat -x, -o "$ev" -e syscalls:sys_enter_io_uring_enter,context-switches -- \
		$PIN $FIO_CMD | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["total_ios"])')
	sf=$(per_io "$ev" "$ios")
	rm -f "$ev"
	echo "per I/O: engine $se, fio $sf"
	sys_json="{\"engine\": $se, \"fio\": $sf}"
fi

python3 - "$CPUS" "${RT:+1}" "${MODE:+1}" "$mb" "$mf" "$LOAD_AFTER" "$sys_json" "${b[*]}" "${f[*]}" <<'EOF'
import json, sys
cpus, rt, mode, mb, mf, load, sysj, b, f = sys.argv[1:]
print(json.dumps({"cpus": cpus, "rt": rt == "1", "completion_thread": mode == "1", "engine_iops": [int(x) for x in b.split()],
                  "fio_iops": [int(x) for x in f.split()], "engine_median": int(mb),
                  "fio_median": int(mf), "ratio": round(int(mb) / int(mf), 3),
                  "loadavg_after": load, "per_io": json.loads(sysj)}))
EOF
