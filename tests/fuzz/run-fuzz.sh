#!/bin/bash
# SPDX-License-Identifier: MIT
# Run the fsck.mendfs libFuzzer target for a bounded time (CI):
#   tests/fuzz/run-fuzz.sh [SECONDS=60] [BUILDDIR=build-fuzz]
# Makes a clang build with -Dfuzzer=true -Db_sanitize=address (every object
# instrumented), a template image (mkfs.mendfs 16M + fsck-img populate), and
# runs the fuzzer from the regression corpus.  A crasher is copied into
# tests/fuzz/corpus/ (replayed by the default suite from then on) and the
# script fails.
set -eu
SECS=${1:-60}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=${2:-$SRC/build-fuzz}
if [ ! -d "$B" ]; then
	CC=clang meson setup "$B" "$SRC" -Dfuzzer=true -Db_sanitize=address -Db_lundef=false \
		-Dbuildtype=debugoptimized -Dtests=disabled
fi
ninja -C "$B" -j2 tests/fuzz/fsck-fuzz mkfs/mkfs.mendfs tests/fsck/fsck-img
# on tmpfs: a template write-back (msync) must not wait for a busy disk (libFuzzer -timeout)
W=$(mktemp -d /dev/shm/mendfs-fuzz-XXXXXX 2>/dev/null || mktemp -d /tmp/mendfs-fuzz-XXXXXX)
trap 'rm -rf "$W"' EXIT
ASAN_OPTIONS=detect_leaks=0 "$B/mkfs/mkfs.mendfs" -q "$W/template.img" 16M
ASAN_OPTIONS=detect_leaks=0 "$B/tests/fsck/fsck-img" populate "$W/template.img" 2>/dev/null
rm -f "$W/template.img.badblocks"
mkdir -p "$W/corpus" "$W/crash"
cp "$SRC"/tests/fuzz/corpus/* "$W/corpus/"
set +e
FSCK_FUZZ_TEMPLATE="$W/template.img" FSCK_FUZZ_DIR="$W" \
	"$B/tests/fuzz/fsck-fuzz" -max_total_time="$SECS" -timeout=30 -rss_limit_mb=4096 \
	-max_len=512 -artifact_prefix="$W/crash/" "$W/corpus" 2>"$W/log"
rc=$?
set -e
grep -E '^#[0-9]+ *DONE|stat::|cov:' "$W/log" | tail -3
if ls "$W/crash"/* >/dev/null 2>&1; then
	for f in "$W/crash"/*; do
		cp "$f" "$SRC/tests/fuzz/corpus/crash-$(sha1sum "$f" | cut -c1-12)"
	done
	grep -A30 'ERROR\|==ERROR\|deadly\|Timeout' "$W/log" | head -60
	echo "FAIL: crashers saved in tests/fuzz/corpus/"
	exit 1
fi
[ $rc -eq 0 ] || { tail -30 "$W/log"; exit 1; }
echo "ok: fuzzed for $SECS s"
