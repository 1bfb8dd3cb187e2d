# SPDX-License-Identifier: MIT
#
# Shared by the *-insns.sh benchmarks: run a mendfs daemon under callgrind
# (one worker thread) while a workload runs against its mount, and read the
# daemon's instruction counts back.  The figures are differences,
# (Ir(2N) - Ir(N)) / N, so that mount, unmount and set-up cancel out.
# Source it after `set -euo pipefail`; it makes the work directory $W with
# the mount point $MNT and removes both on exit.

command -v valgrind >/dev/null || { echo "${0##*/}: needs valgrind" >&2; exit 1; }
W=$(mktemp -d /dev/shm/mendfs-insns.XXXXXX)
MNT=$W/m
mkdir "$MNT"
DPID=
insns_cleanup() {
	mountpoint -q "$MNT" && { umount "$MNT" || umount -l "$MNT"; }
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap insns_cleanup EXIT

# insns_bin BUILD PROGRAM: the path of mendfs or mkfs.mendfs in a build tree
insns_bin() {
	local p
	for p in "$1/fs/fuse/$2" "$1/fs/$2" "$1/mkfs/$2"; do
		[ -x "$p" ] && { echo "$p"; return; }
	done
	echo "${0##*/}: no $2 in $1" >&2
	exit 1
}

# insns_mkfs BUILD SIZE: a fresh image $W/img
insns_mkfs() {
	"$(insns_bin "$1" mkfs.mendfs)" -q -f "$W/img" "$2" >/dev/null
}

# insns_mount BUILD OPTS [WRAPPER...]: mount $W/img on $MNT with
# -o threads=1,OPTS, the daemon run under WRAPPER (e.g. valgrind ...)
insns_mount() {
	local b=$1 opts=$2 i
	shift 2
	"$@" "$(insns_bin "$b" mendfs)" -f -o "threads=1${opts:+,$opts}" "$W/img" "$MNT" 2>>"$W/log" &
	DPID=$!
	for ((i = 0; i < 600; i++)); do mountpoint -q "$MNT" && return; sleep 0.1; done
	echo "mount failed" >&2
	cat "$W/log" >&2
	exit 1
}

insns_umount() {
	umount "$MNT"
	wait "$DPID"
	DPID=
}

# insns_callgrind BUILD OPTS: insns_mount under callgrind, output in $W/cg
insns_callgrind() {
	rm -f "$W/cg"
	insns_mount "$1" "$2" valgrind --tool=callgrind --callgrind-out-file="$W/cg" -q
}

# insns_total: the daemon's instructions in $W/cg
insns_total() {
	awk '/^summary:/ { print $2 }' "$W/cg"
}

# insns_fn FUNCTION: FUNCTION's inclusive instructions in $W/cg (0 if never run)
insns_fn() {
	callgrind_annotate --inclusive=yes "$W/cg" 2>/dev/null |
		awk -v f="$1" '$0 ~ ":" f " " { gsub(",", "", $1); print $1; found = 1; exit }
			END { if (!found) print 0 }'
}
