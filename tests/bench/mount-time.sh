#!/bin/sh
# SPDX-License-Identifier: MIT
#
# mount-time.sh BUILD_DIR [DIR] [SIZES] [crash]
#
# Mount and unmount time of freshly made sparse images, through the library
# (tests/bench/mount-time, no FUSE): for each size (default "1T 16T 64T"),
# truncate -s SIZE, mkfs.mendfs -N 100000 (few inodes: mkfs writes the whole
# inode table), then 3 rounds of mount + unmount.  The images live in DIR
# (default /dev/shm: tmpfs holds sparse 64 TiB files; a 64 TiB image takes
# about 4.6 GB of it) and are removed afterwards.  Output: one line per round,
#   SIZE mount SECONDS unmount SECONDS free_blocks N
# With "crash", rounds end in a simulated crash: the rounds after the first
# mount a DIRTY filesystem (the bitmaps are recounted).
set -eu
build=${1:?usage: mount-time.sh BUILD_DIR [DIR] [SIZES]}
dir=${2:-/dev/shm}
sizes=${3:-"1T 16T 64T"}
mode=${4:-}
img="$dir/mendfs-mount-time.$$"
trap 'rm -f "$img"' EXIT INT TERM
for size in $sizes; do
	rm -f "$img"
	truncate -s "$size" "$img"
	"$build/mkfs/mkfs.mendfs" -q -f -N 100000 "$img"
	"$build/tests/bench/mount-time" "$img" 3 $mode | sed "s/^/$size /"
done
