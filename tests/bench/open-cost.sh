#!/usr/bin/env bash
# What an open+close costs on mendfs, as root and as `nobody` (who owns
# nothing on the mount: with POSIX ACLs the kernel asks the daemon for the
# root directory's ACL on each path walk, see docs/benchmarks/metadata.md), for one
# or two daemons in interleaved rounds.  Prints, per round and daemon, the
# wall time of one open+close and the daemon's CPU time per open (utime +
# stime from /proc, 10 ms ticks over N opens).  Not part of the test suite;
# needs root and /dev/fuse.
#
#   tests/bench/open-cost.sh [--build DIR] [--rounds R] [--n N] MENDFS [MENDFS...]
#
# Each daemon mounts a fresh 256 MiB image (allow_other) with a file /d/g
# (mode 644, owned by root), opened N times (default 20000) by each user.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build
ROUNDS=5
N=20000
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--n) N=$2; shift 2 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || set -- "$BUILD/fs/fuse/mendfs"
MKFS=$BUILD/mkfs/mkfs.mendfs
LOOP=$BUILD/tests/bench/open-loop
W=$(mktemp -d /tmp/mendfs-open.XXXXXX)
chmod 755 "$W"
mkdir "$W/m"
trap 'mountpoint -q "$W/m" && umount "$W/m"; rm -rf "$W"' EXIT

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for r in $(seq "$ROUNDS"); do
	for d in "$@"; do
		"$MKFS" -q -f "$W/img" 256M >/dev/null
		"$d" -o allow_other "$W/img" "$W/m"
		mkdir "$W/m/d" && echo x >"$W/m/d/g" && chmod 644 "$W/m/d/g"
		pid=$(pgrep -n -f "^$d .*$W/img")
		t0=$(ticks "$pid")
		a=$("$LOOP" "$W/m/d/g" "$N")
		t1=$(ticks "$pid")
		b=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$LOOP" "$W/m/d/g" "$N")
		t2=$(ticks "$pid")
		echo "round $r $d: root $a ns (daemon $(((t1 - t0) * 10000000 / N)) ns)," \
			"nobody $b ns (daemon $(((t2 - t1) * 10000000 / N)) ns)"
		umount "$W/m"
		timeout 20 flock -x "$W/img" true
	done
done
