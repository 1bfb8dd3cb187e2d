#!/bin/bash
# SPDX-License-Identifier: MIT
# The fsck.mendfs speed figures (docs/benchmarks/recovery.md, the chart in
# docs/BENCHMARKS.md): seconds per GiB of
# metadata on images of FILES files each, made through the fs library (no FUSE).
#   tests/fsck/bench-fsck.sh BUILD [FILES=1000000] [DIR=/dev/shm] [JSON]
# FILES may be a comma-separated list (e.g. 100000,300000,1000000): one image
# per count, fsck -n and -y timed three times on each.  With JSON, the figures
# are also written to that file (the input of tests/bench/charts.py, which
# draws docs/charts/fsck-time.svg from it).
set -eu
B=${1:?usage: bench-fsck.sh BUILD [FILES] [DIR] [JSON]}
COUNTS=${2:-1000000}
D=${3:-/dev/shm}
JSON_OUT=${4:-}
IMG=$D/mendfs-fsck-bench.img
trap 'rm -f "$IMG" "$IMG.badblocks" "$IMG.t"' EXIT
points=()
for N in ${COUNTS//,/ }; do
	rm -f "$IMG" "$IMG.badblocks"
	"$B/mkfs/mkfs.mendfs" -q -N $((N + N / 10)) "$IMG" 8G
	/usr/bin/time -f "create $N files: %e s" "$B/tests/fsck/fsck-img" many "$IMG" "$N"
	meta=$("$B/fsck/fsck.mendfs" -n --json "$IMG" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["meta_blocks_used"])')
	times=
	for mode in -n -y; do
		for i in 1 2 3; do
			/usr/bin/time -f "%e" -o "$IMG.t" "$B/fsck/fsck.mendfs" $mode "$IMG" >/dev/null
			t=$(cat "$IMG.t")
			times="$times $mode=$t"
			python3 -c "m=$meta*4096/2**30; print('%d files, fsck %s: %.2f s, %.3f GiB of metadata (one copy; both are read): %.2f s/GiB' % ($N, '$mode', $t, m, $t/m))"
		done
	done
	points+=("$N:$meta:${times# }")
done
uptime
[ -n "$JSON_OUT" ] || exit 0
python3 - "$JSON_OUT" "$(git -C "$(dirname "$0")" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
	"$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
	"$(cut -d' ' -f1-3 /proc/loadavg)" "${points[@]}" <<'EOF'
import json, sys
out, commit, nproc, cpu, load = sys.argv[1:6]
pts = []
for p in sys.argv[6:]:
    files, meta, times = p.split(":", 2)
    t = {"-n": [], "-y": []}
    for x in times.split():
        mode, sec = x.split("=")
        t[mode].append(float(sec))
    pts.append({"files": int(files), "meta_blocks": int(meta),
                "meta_gib": int(meta) * 4096 / 2**30,
                "seconds_n": t["-n"], "seconds_y": t["-y"]})
r = {"commit": commit, "nproc": int(nproc), "cpu": cpu, "load_after": load, "points": pts}
with open(out, "w") as fp:
    json.dump(r, fp, indent=1, sort_keys=True)
    fp.write("\n")
EOF
echo "figures written to $JSON_OUT"
