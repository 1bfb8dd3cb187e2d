#!/bin/bash
# SPDX-License-Identifier: MIT
# Replays the fsck fuzz corpus (tests/fuzz/corpus/: seeds, a coverage-minimised
# corpus from strict runs (cov-*), regression inputs; every crasher
# found so far) against a fresh template image: fsck -n, -y, -y on each
# mutated image must not crash, hang, exit outside fsck(8)'s codes or change
# the image's size, and the second fsck -y must find nothing (strict; see fsck-fuzz.c).
# Needs: MKFS_MENDFS, FSCK_IMG, FUZZ_REPLAY, SRCDIR (set by meson).
set -eu
T=$(mktemp -d /tmp/mendfs-fuzz-XXXXXX)
trap 'rm -rf "$T"' EXIT
"$MKFS_MENDFS" -q "$T/template.img" 16M
"$FSCK_IMG" populate "$T/template.img" 2>/dev/null
rm -f "$T/template.img.badblocks" # poison comes from the inputs
n=$(ls "$SRCDIR/tests/fuzz/corpus" | wc -l)
[ "$n" -gt 0 ] || { echo "empty corpus"; exit 1; }
FSCK_FUZZ_STRICT=1 FSCK_FUZZ_TEMPLATE="$T/template.img" FSCK_FUZZ_DIR="$T" "$FUZZ_REPLAY" "$SRCDIR"/tests/fuzz/corpus/* 2>"$T/log" ||
	{ tail -50 "$T/log"; echo "FAIL: a corpus input crashed fsck"; exit 1; }
echo "ok: $n corpus inputs replayed"
