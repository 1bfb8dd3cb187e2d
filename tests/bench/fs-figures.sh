#!/bin/bash
# SPDX-License-Identifier: MIT
#
# FUSE-level figures for mendfs and three peers, all over images (or a
# directory) on tmpfs (/dev/shm), in one run (not part of the test suite):
#
#   mendfs          this tree's daemon over a mkfs.mendfs image
#   mendfs_uring    the same with -o io_uring (FUSE over io_uring; the fuse
#                   module's enable_uring is set for it and restored after),
#                   only when --only names it; a table of its own compares it
#   passthrough_ll  libfuse's example over a tmpfs directory: FUSE itself
#                   with nothing behind it (built here from the shipped source)
#   fuse2fs         another FUSE filesystem, over an ext4 image
#   ext4            the kernel's ext4 over a loop device of an image
#
# Workloads (fio, --ioengine=psync --direct=0, one file of --file-size):
#   seq write 1 MiB, seq read 1 MiB (MiB/s), 4 KiB random write and read
#   with numjobs 1 and 2 on the same file (IOPS); caches are dropped
#   (echo 3 > /proc/sys/vm/drop_caches) before every read phase; write phases
#   end with fsync (--end_fsync=1), inside the timing.  Each fio job stops after
#   one pass over the file or --runtime seconds, whichever comes first, so no
#   block is read twice (fio's random map) and reads miss the page cache.
#   Then create / stat / unlink of --files empty files in one directory
#   (fs-meta-rates.c; fsync of the directory and syncfs at the end of create
#   and unlink, timed: syncfs alone does not reach a FUSE daemon; dentry
#   and inode caches dropped before stat), in files per second.
#
# Usage: tests/bench/fs-figures.sh [options]
#   --build DIR        meson build tree with fs/fuse/mendfs and mkfs/mkfs.mendfs
#                      (default: build-fsbench beside tests/; it is re-built with
#                      ninja if it exists, else the setup command is printed).
#                      The commit printed is that of the tree DIR was set up from.
#   --no-rebuild       use the programs in DIR as they are
#   --size SIZE        image size (default 2G)
#   --file-size SIZE   fio file size (default 1G; must fit in the image)
#   --runtime SECONDS  upper bound per fio job (default 5)
#   --files N          files for the metadata phases (default 100000)
#   --meta-limit S     upper bound per metadata phase (default 60; a phase that
#                      hits it is marked '*' with the count it reached)
#   --only LIST        comma-separated subset of mendfs,passthrough_ll,fuse2fs,ext4
#                      and mendfs_uring
#   --mendfs-opts OPTS extra -o options for mendfs (e.g. writeback)
#   --mkfs-opts OPTS   extra options for mkfs.mendfs (e.g. '-O data_csum'), split on blanks
#   --pt-opts OPTS     extra -o options for passthrough_ll (e.g. default_permissions,
#                      the setting mendfs always runs with; or writeback)
#   --rounds N         run every filesystem N times (default 1), the order of the
#                      filesystems rotating from round to round, and report each
#                      cell's median (the single values are listed under the
#                      table): the machine's speed drifts over minutes, and a
#                      peer measured at another moment is not a fair peer
#   --meta-only        only the create / stat / unlink phases (no fio)
#   --json             print the results as JSON after the table
# Needs root, /dev/fuse, loop devices; installs nothing.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$SRCROOT/build-fsbench
SIZE=2G
FSIZE=1G
RUNTIME=5
NFILES=100000
META_LIMIT=60
ONLY=mendfs,passthrough_ll,fuse2fs,ext4
JSON=0
REBUILD=1
ROUNDS=1
META_ONLY=0
MENDFS_OPTS=
MKFS_OPTS=
PT_OPTS=

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit "${1:-0}"
}

while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$(cd "$2" && pwd); shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--file-size) FSIZE=$2; shift 2 ;;
	--runtime) RUNTIME=$2; shift 2 ;;
	--files) NFILES=$2; shift 2 ;;
	--meta-limit) META_LIMIT=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--mendfs-opts) MENDFS_OPTS=$2; shift 2 ;;
	--mkfs-opts) MKFS_OPTS=$2; shift 2 ;;
	--pt-opts) PT_OPTS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--json) JSON=1; shift ;;
	--meta-only) META_ONLY=1; shift ;;
	--no-rebuild) REBUILD=0; shift ;;
	-h | --help) usage 0 ;;
	*) echo "unknown option: $1" >&2; usage 2 >&2 ;;
	esac
done

die() {
	echo "fs-figures: $*" >&2
	exit 1
}

# ---- prerequisites (nothing is installed here) ----------------------------
[ "$(id -u)" = 0 ] || die "needs root (mounts, loop devices, drop_caches)"
[ -c /dev/fuse ] || die "/dev/fuse is missing"
missing=()
command -v fio >/dev/null || missing+=(fio)
# fuse2fs and ext4 only when they are measured
[[ ",$ONLY," != *,fuse2fs,* ]] || command -v fuse2fs >/dev/null || missing+=(fuse2fs)
[[ ",$ONLY," != *,ext4,* && ",$ONLY," != *,fuse2fs,* ]] || command -v mkfs.ext4 >/dev/null ||
	missing+=(e2fsprogs)
command -v losetup >/dev/null || missing+=(mount)
command -v gcc >/dev/null || missing+=(gcc)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists fuse3 2>/dev/null || missing+=(libfuse3-dev)
command -v fusermount3 >/dev/null || missing+=(fuse3)
EXDIR=/usr/share/doc/libfuse3-dev/examples
if [ -f "$EXDIR/passthrough_ll.c" ]; then
	PTSRC=$EXDIR/passthrough_ll.c
elif [ -f "$EXDIR/passthrough_ll.c.gz" ]; then
	PTSRC=$EXDIR/passthrough_ll.c.gz
else
	PTSRC=
	[[ " ${missing[*]} " == *" libfuse3-dev "* ]] || missing+=(libfuse3-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "fs-figures: missing: ${missing[*]}" >&2
	echo "install with: apt-get install ${missing[*]}" >&2
	exit 1
fi
if [ "$REBUILD" = 1 ] && [ -f "$BUILD/build.ninja" ]; then
	ninja -C "$BUILD" >/dev/null || die "ninja -C $BUILD failed (or use --no-rebuild)"
fi
# the source tree the build was set up from (for the commit shown)
BSRC=$(sed -n 's/.*"source": *"\([^"]*\)".*/\1/p' "$BUILD/meson-info/meson-info.json" 2>/dev/null || true)
[ -d "$BSRC" ] || BSRC=$SRCROOT
MENDFS=$BUILD/fs/fuse/mendfs
MKFS_MENDFS=$BUILD/mkfs/mkfs.mendfs
MENDCTL=$BUILD/fs/mendctl/mendctl
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_WAS=
if [ ! -x "$MENDFS" ] || [ ! -x "$MKFS_MENDFS" ]; then
	die "no mendfs build in $BUILD; make one with:
  cd $SRCROOT && meson setup build-fsbench --buildtype=release && ninja -C build-fsbench"
fi

# ---- work area and cleanup -------------------------------------------------
WORK=$(mktemp -d /dev/shm/fs-figures.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT" "$WORK/bin"
DPID=
LOOPDEV=

cleanup() {
	set +e
	if mountpoint -q "$MNT" 2>/dev/null; then
		timeout 30 umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null ||
			fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	if [ -n "$DPID" ]; then
		kill "$DPID" 2>/dev/null
		wait_gone "$DPID" 10 || kill -9 "$DPID" 2>/dev/null
	fi
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV" 2>/dev/null
	[ -n "$URING_WAS" ] && echo "$URING_WAS" >"$URING_PARAM"
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# wait_gone PID SECONDS: true once the process has ended
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# wait_mounted DIR: the mount is live within 30 s, and its daemon still runs
wait_mounted() {
	local i
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$1" && return 0
		if [ -n "$DPID" ] && ! kill -0 "$DPID" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
	return 1
}

# logtail FILE...: the last lines of whichever of the files exist, on one line
logtail() {
	cat "$@" 2>/dev/null | tail -n 5 | tr '\n' ' ' || true
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# ---- helpers built into the temp dir (never committed) ---------------------
if [[ $PTSRC == *.gz ]]; then
	gunzip -c "$PTSRC" >"$WORK/bin/passthrough_ll.c"
else
	cp "$PTSRC" "$WORK/bin/passthrough_ll.c"
fi
cp "$EXDIR/passthrough_helpers.h" "$WORK/bin/" 2>/dev/null ||
	gunzip -c "$EXDIR/passthrough_helpers.h.gz" >"$WORK/bin/passthrough_helpers.h" 2>/dev/null || true
# shellcheck disable=SC2046 # pkg-config's flags are meant to be split
gcc -O2 -Wall -o "$WORK/bin/passthrough_ll" "$WORK/bin/passthrough_ll.c" \
	$(pkg-config --cflags --libs fuse3) 2>"$WORK/bin/cc.log" ||
	{ cat "$WORK/bin/cc.log" >&2; die "building passthrough_ll failed"; }
gcc -O2 -Wall -o "$WORK/bin/fs-meta-rates" "$SRCROOT/tests/bench/fs-meta-rates.c" ||
	die "building fs-meta-rates failed"

# ---- mount / unmount each filesystem -----------------------------------------
# fs_up FS: make the filesystem and mount it on $MNT (daemon pid in $DPID)
fs_up() {
	local img=$WORK/img
	DPID=
	: >"$WORK/daemon.log"
	case $1 in
	mendfs | mendfs_uring)
		local o=$MENDFS_OPTS
		if [ "$1" = mendfs_uring ]; then
			[ -e "$URING_PARAM" ] || { echo "no $URING_PARAM" >>"$WORK/daemon.log"; return 1; }
			[ -n "$URING_WAS" ] || URING_WAS=$(cat "$URING_PARAM")
			echo 1 >"$URING_PARAM" || return 1
			o=${o:+$o,}io_uring
		fi
		# shellcheck disable=SC2086 # MKFS_OPTS is a list of options
		"$MKFS_MENDFS" -q $MKFS_OPTS "$img" "$SIZE" >"$WORK/mkfs.log" 2>&1 || return 1
		"$MENDFS" -f ${o:+-o "$o"} "$img" "$MNT" 2>>"$WORK/daemon.log" &
		DPID=$!
		if [ "$1" = mendfs_uring ]; then
			wait_mounted "$MNT" || return 1
			"$MENDCTL" --json stats "$MNT" | grep -q '"transport":"io_uring"' ||
				{ echo "mendfs_uring: not running over io_uring" >>"$WORK/daemon.log"; return 1; }
		fi
		;;
	passthrough_ll)
		mkdir -p "$WORK/ptdir"
		# passthrough_ll holds an O_PATH descriptor for every inode the
		# kernel knows: give it room for the metadata phase's files
		(
			ulimit -n "$PT_NOFILE" || exit 1
			exec "$WORK/bin/passthrough_ll" -f -o source="$WORK/ptdir${PT_OPTS:+,$PT_OPTS}" "$MNT"
		) 2>>"$WORK/daemon.log" &
		DPID=$!
		;;
	fuse2fs)
		mkfs.ext4 -q -F "$img" "$SIZE" >"$WORK/mkfs.log" 2>&1 || return 1
		fuse2fs "$img" "$MNT" -f 2>>"$WORK/daemon.log" &
		DPID=$!
		;;
	ext4)
		mkfs.ext4 -q -F "$img" "$SIZE" >"$WORK/mkfs.log" 2>&1 || return 1
		LOOPDEV=$(losetup -f --show "$img") || return 1
		timeout 30 mount -t ext4 "$LOOPDEV" "$MNT" 2>>"$WORK/daemon.log" || return 1
		;;
	esac
	wait_mounted "$MNT"
}

# fs_down FS: unmount, wait for the daemon to finish, free the image
fs_down() {
	local rc=0
	if mountpoint -q "$MNT"; then
		timeout 60 umount "$MNT" || rc=1
	fi
	if [ -n "$DPID" ]; then
		wait_gone "$DPID" 60 || { kill -9 "$DPID" 2>/dev/null; rc=1; }
		wait "$DPID" 2>/dev/null || rc=1
		DPID=
	fi
	if [ -n "$LOOPDEV" ]; then
		losetup -d "$LOOPDEV" || rc=1
		LOOPDEV=
	fi
	rm -rf "$WORK/img" "$WORK/ptdir"
	return $rc
}

# ---- workloads ---------------------------------------------------------------
WORKLOADS=(seqwrite seqread randwrite1 randwrite2 randread1 randread2 create stat unlink)
[ "$META_ONLY" = 0 ] || WORKLOADS=(create stat unlink)
declare -A LABEL=(
	[seqwrite]="seq write 1 MiB (MiB/s)"
	[seqread]="seq read 1 MiB (MiB/s)"
	[randwrite1]="rand write 4 KiB, 1 job (IOPS)"
	[randwrite2]="rand write 4 KiB, 2 jobs (IOPS)"
	[randread1]="rand read 4 KiB, 1 job (IOPS)"
	[randread2]="rand read 4 KiB, 2 jobs (IOPS)"
	[create]="create (files/s)"
	[stat]="stat (files/s)"
	[unlink]="unlink (files/s)"
)
declare -A RES=()  # RES[fs,workload] = number, or FAIL (a round's, then the median)
declare -A RAW=()  # RAW[fs,workload] = the rounds' values, space-separated
declare -A NOTE=() # NOTE[fs,workload] = why it failed / how far it got
FAILURES=()

# run_fio FS WORKLOAD RW BS NUMJOBS: one fio job group on $MNT/data
run_fio() {
	local fs=$1 w=$2 rw=$3 bs=$4 nj=$5 out f
	local -a extra=()
	case $rw in
	*read*) drop_caches ;;
	*) extra+=(--end_fsync=1) ;;
	esac
	out=$WORK/fio-$fs-$w.txt
	if timeout $((RUNTIME * 3 + 120)) fio --name="$w" --filename="$MNT/data" \
		--rw="$rw" --bs="$bs" --size="$FSIZE" --numjobs="$nj" --group_reporting \
		--ioengine=psync --direct=0 --fallocate=none --runtime="$RUNTIME" \
		--time_based=0 "${extra[@]}" --minimal >"$out" 2>"$out.err"; then
		# terse v3: field 5 error, 7/8 read KiB/s and IOPS, 48/49 write
		f=$(awk -F';' -v rw="$rw" -v bs="$bs" 'END {
			if ($5 != 0) { print "err" $5; exit }
			if (rw ~ /read/) { bw = $7; iops = $8 } else { bw = $48; iops = $49 }
			if (bs == "1M") printf "%.0f\n", bw / 1024; else printf "%.0f\n", iops
		}' "$out")
		if [[ $f == err* ]]; then
			RES[$fs,$w]=FAIL
			NOTE[$fs,$w]="fio error ${f#err}: $(logtail "$out.err")"
		else
			RES[$fs,$w]=$f
		fi
	else
		f=$?
		RES[$fs,$w]=FAIL
		NOTE[$fs,$w]="fio exited $f: $(logtail "$out.err")"
	fi
}

run_meta() { # run_meta FS NFILES
	local fs=$1 nfiles=$2 out phase n secs rate complete
	mkdir -p "$MNT/meta"
	out=$WORK/meta-$fs.txt
	if ! timeout $((META_LIMIT * 3 + 300)) "$WORK/bin/fs-meta-rates" "$MNT/meta" \
		"$nfiles" "$META_LIMIT" >"$out" 2>"$out.err"; then
		for phase in create stat unlink; do
			RES[$fs,$phase]=FAIL
			NOTE[$fs,$phase]="fs-meta-rates: $(tr '\n' ' ' <"$out.err")"
		done
	fi
	while read -r phase n secs rate complete; do
		RES[$fs,$phase]=$rate
		[ "$nfiles" = "$NFILES" ] || NOTE[$fs,$phase]="+ $n files"
		[ "$complete" = 1 ] || NOTE[$fs,$phase]="* stopped at the ${META_LIMIT}s limit: $n files in ${secs}s"
	done <"$out"
}

# run_io FS: the fio workloads
run_io() {
	local fs=$1
	run_fio "$fs" seqwrite write 1M 1
	run_fio "$fs" seqread read 1M 1
	run_fio "$fs" randwrite1 randwrite 4k 1
	run_fio "$fs" randwrite2 randwrite 4k 2
	run_fio "$fs" randread1 randread 4k 1
	run_fio "$fs" randread2 randread 4k 2
	rm -f "$MNT/data"
}

run_all() {
	local fs=$1
	if [ "$META_ONLY" = 0 ]; then
		run_io "$fs"
	fi
	if [ "$fs" = passthrough_ll ] && [ "$PT_NOFILE" -lt $((NFILES + 4096)) ]; then
		# passthrough_ll keeps an O_PATH descriptor for every inode the
		# kernel caches: it cannot hold NFILES files under this limit
		PT_NOTE="passthrough_ll's metadata phases (marked +) ran over $((PT_NOFILE - 4096)) files, not $NFILES: it keeps a descriptor per cached inode and RLIMIT_NOFILE cannot be raised above $PT_NOFILE here (no CAP_SYS_RESOURCE)"
		run_meta "$fs" $((PT_NOFILE - 4096))
	else
		run_meta "$fs" "$NFILES"
	fi
}

# passthrough_ll needs a descriptor per inode the kernel caches
PT_NOFILE=$((NFILES + 4096))
PT_NOTE=
if ! (ulimit -n "$PT_NOFILE") 2>/dev/null; then
	PT_NOFILE=$(ulimit -Hn)
fi

# ---- machine -----------------------------------------------------------------
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
KERNEL=$(uname -r)
NPROC=$(nproc)
COMMIT=$(git -C "$BSRC" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && ! git -C "$BSRC" diff --quiet HEAD -- fs mkfs include blk 2>/dev/null; then
	COMMIT="$COMMIT (+ uncommitted changes in the filesystem's sources)"
fi
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS

IFS=, read -r -a FSLIST <<<"$ONLY"
for fs in "${FSLIST[@]}"; do
	case $fs in
	mendfs | mendfs_uring | passthrough_ll | fuse2fs | ext4) ;;
	*) die "--only: unknown filesystem '$fs'" ;;
	esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds: a positive number, not '$ROUNDS'"
for ((round = 0; round < ROUNDS; round++)); do
	for ((k = 0; k < ${#FSLIST[@]}; k++)); do
		fs=${FSLIST[$(((k + round) % ${#FSLIST[@]}))]}
		echo "fs-figures: round $((round + 1))/$ROUNDS: $fs ..." >&2
		for w in "${WORKLOADS[@]}"; do RES[$fs,$w]=FAIL; done
		if fs_up "$fs"; then
			run_all "$fs"
			fs_down "$fs" || FAILURES+=("$fs: unmount or daemon exit failed: $(logtail "$WORK/daemon.log")")
		else
			FAILURES+=("$fs: mount failed: $(logtail "$WORK/mkfs.log" "$WORK/daemon.log")")
			fs_down "$fs" || true
		fi
		for w in "${WORKLOADS[@]}"; do RAW[$fs,$w]="${RAW[$fs,$w]:-}${RAW[$fs,$w]:+ }${RES[$fs,$w]}"; done
	done
done
# median of the rounds; a round that failed fails the cell
for key in "${!RAW[@]}"; do
	if [[ " ${RAW[$key]} " == *" FAIL "* ]]; then
		RES[$key]=FAIL
	else
		RES[$key]=$(tr ' ' '\n' <<<"${RAW[$key]}" | sort -n | awk '{ v[NR] = $1 } END {
			if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	fi
done
ELAPSED=$((SECONDS - T0))
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- table -------------------------------------------------------------------
ratio() { # ratio A B: A/B to 2 decimals, or "-"
	if [[ $1 =~ ^[0-9]+$ ]] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ]; then
		awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
	else
		echo -
	fi
}
cell() { # cell FS WORKLOAD
	local v=${RES[$1,$2]:--}
	case ${NOTE[$1,$2]:-} in
	\**) v="$v*" ;;
	+*) v="$v+" ;;
	esac
	echo "$v"
}
unit_of() { # unit_of WORKLOAD: the unit in its label's parentheses
	local u=${LABEL[$1]##*(}
	echo "${u%)}"
}
has() { [[ ",$ONLY," == *",$1,"* ]]; }

echo
echo "mendfs FUSE-level figures (tests/bench/fs-figures.sh)"
echo "commit:   $COMMIT (source $BSRC, build $BUILD)"
echo "machine:  $NPROC CPUs ($CPU), kernel $KERNEL, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "started:  $START, ${ELAPSED}s; load average before $LOAD0, after $LOAD1"
echo "setup:    images ${SIZE} on /dev/shm (tmpfs); fio $(fio --version) psync, direct=0, file ${FSIZE}, <= ${RUNTIME}s per job; ${NFILES} files"
echo "options:  mkfs.mendfs ${MKFS_OPTS:-(none)}; mendfs -o ${MENDFS_OPTS:-(none)}; passthrough_ll -o ${PT_OPTS:-(none)}"
[ "$ROUNDS" -gt 1 ] && echo "rounds:   $ROUNDS, filesystems in rotating order; medians below"
echo
printf '| %-34s | %10s | %14s | %10s | %10s | %11s | %11s |\n' workload mendfs passthrough_ll fuse2fs ext4 "mendfs/pt" "mendfs/f2fs"
printf '|%s|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..36})" "$(printf -- '-%.0s' {1..12})" \
	"$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..12})" "$(printf -- '-%.0s' {1..12})" \
	"$(printf -- '-%.0s' {1..13})" "$(printf -- '-%.0s' {1..13})"
BELOW=()
for w in "${WORKLOADS[@]}"; do
	rp=$(ratio "${RES[mendfs,$w]:-}" "${RES[passthrough_ll,$w]:-}")
	rf=$(ratio "${RES[mendfs,$w]:-}" "${RES[fuse2fs,$w]:-}")
	if [ "$rp" != - ] && awk -v r="$rp" 'BEGIN { exit !(r < 1.0) }'; then BELOW+=("$w: mendfs/passthrough_ll $rp < 1.0"); fi
	if [ "$rf" != - ] && awk -v r="$rf" 'BEGIN { exit !(r < 2.0) }'; then BELOW+=("$w: mendfs/fuse2fs $rf < 2.0"); fi
	printf '| %-34s | %10s | %14s | %10s | %10s | %11s | %11s |\n' "${LABEL[$w]}" \
		"$(cell mendfs "$w")" "$(cell passthrough_ll "$w")" "$(cell fuse2fs "$w")" \
		"$(cell ext4 "$w")" "$rp" "$rf"
done
if has mendfs_uring; then
	echo
	echo "FUSE over io_uring (mendfs -o io_uring) against the same runs:"
	printf '| %-34s | %10s | %10s | %14s | %10s | %10s | %9s | %10s |\n' workload "mendfs" \
		"io_uring" passthrough_ll fuse2fs "uring/classic" "uring/pt" "uring/f2fs"
	printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..36})" "$(printf -- '-%.0s' {1..12})" \
		"$(printf -- '-%.0s' {1..12})" "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..12})" \
		"$(printf -- '-%.0s' {1..12})" "$(printf -- '-%.0s' {1..11})" "$(printf -- '-%.0s' {1..12})"
	for w in "${WORKLOADS[@]}"; do
		printf '| %-34s | %10s | %10s | %14s | %10s | %10s | %9s | %10s |\n' "${LABEL[$w]}" \
			"$(cell mendfs "$w")" "$(cell mendfs_uring "$w")" "$(cell passthrough_ll "$w")" \
			"$(cell fuse2fs "$w")" "$(ratio "${RES[mendfs_uring,$w]:-}" "${RES[mendfs,$w]:-}")" \
			"$(ratio "${RES[mendfs_uring,$w]:-}" "${RES[passthrough_ll,$w]:-}")" \
			"$(ratio "${RES[mendfs_uring,$w]:-}" "${RES[fuse2fs,$w]:-}")"
	done
fi
echo
has mendfs && has passthrough_ll && has fuse2fs &&
	echo "aim: mendfs >= 1.0x passthrough_ll and >= 2x fuse2fs on every workload"
for b in "${BELOW[@]}"; do echo "  below aim: $b"; done
for k in "${!NOTE[@]}"; do echo "  note ${k/,/ }: ${NOTE[$k]}"; done | sort
[ -n "$PT_NOTE" ] && echo "  note: $PT_NOTE"
for f in "${FAILURES[@]}"; do echo "  FAILED $f"; done
if [ "$ROUNDS" -gt 1 ]; then
	echo "rounds (each cell above is the median of these, in round order):"
	for w in "${WORKLOADS[@]}"; do
		line="  $w:"
		for fs in "${FSLIST[@]}"; do line="$line $fs ${RAW[$fs,$w]// /, };"; done
		echo "${line%;}"
	done
fi

if [ "$JSON" = 1 ]; then
	{
		printf '{"commit":"%s","nproc":%s,"cpu":"%s","kernel":"%s","start":"%s",' \
			"$COMMIT" "$NPROC" "$CPU" "$KERNEL" "$START"
		printf '"load_before":"%s","load_after":"%s","image_size":"%s","file_size":"%s",' \
			"$LOAD0" "$LOAD1" "$SIZE" "$FSIZE"
		printf '"runtime_s":%s,"files":%s,"results":{' "$RUNTIME" "$NFILES"
		sep=
		for w in "${WORKLOADS[@]}"; do
			printf '%s"%s":{"unit":"%s"' "$sep" "$w" "$(unit_of "$w")"
			for fs in mendfs mendfs_uring passthrough_ll fuse2fs ext4; do
				v=${RES[$fs,$w]:-}
				if [[ $v =~ ^[0-9]+$ ]]; then printf ',"%s":%s' "$fs" "$v"
				elif [ -n "$v" ]; then printf ',"%s":"%s"' "$fs" "$v"; fi
			done
			printf ',"mendfs/passthrough_ll":"%s","mendfs/fuse2fs":"%s"}' \
				"$(ratio "${RES[mendfs,$w]:-}" "${RES[passthrough_ll,$w]:-}")" \
				"$(ratio "${RES[mendfs,$w]:-}" "${RES[fuse2fs,$w]:-}")"
			sep=,
		done
		printf '}}\n'
	}
fi
[ ${#FAILURES[@]} = 0 ]
