#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Access times on real FUSE mounts: `atime-test.sh NAME` with the built
# programs named by $MENDFS and $MKFS_MENDFS.
#
#   modes    relatime (default), strictatime, noatime, nodiratime: what a read
#            (cat, and dd iflag=noatime) and a listing (ls) do to atime, and
#            the mount flags the kernel shows
#   persist  a moved atime survives unmount and remount, fsync, and a crash
#            after the periodic commit; without any commit a crash loses it
#            (a read starts no transaction)
#
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse).
set -eu

name=${1:?usage: atime-test.sh NAME}
for v in MENDFS MKFS_MENDFS; do
	[ -x "${!v:-}" ] || { echo "$v not set or not executable" >&2; exit 1; }
done
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	echo "skip: needs root and /dev/fuse"
	[ "${MENDFS_TEST_STRICT:-0}" = 1 ] && exit 1
	exit 77
fi

WORK=$(mktemp -d /tmp/mendfs-atime.XXXXXX)
IMG=$WORK/img
MNT=$WORK/m
mkdir -p "$MNT"
DPID=""
OLD="2020-01-02 03:04:05"

cleanup() {
	set +e
	if mountpoint -q "$MNT" 2>/dev/null; then
		timeout 10 umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null ||
			fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
		kill "$DPID" 2>/dev/null
		sleep 1
		kill -9 "$DPID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
	echo "FAIL ($name${mode:+, $mode}): $*" >&2
	[ -s "$WORK/log" ] && tail -20 "$WORK/log" | sed 's/^/  daemon: /' >&2
	exit 1
}

# mount_fs [OPTS]: a foreground daemon
mount_fs() {
	local i
	"$MENDFS" -f ${1:+-o "$1"} "$IMG" "$MNT" 2>>"$WORK/log" &
	DPID=$!
	for ((i = 0; i < 200; i++)); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$DPID" 2>/dev/null || fail "mendfs -o '${1:-}' exited"
		sleep 0.1
	done
	fail "not mounted after 20 s"
}

umount_fs() {
	local i
	timeout 30 umount "$MNT" || fail "umount"
	for ((i = 0; i < 300; i++)); do
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$DPID" || fail "the daemon exited with status $?"
	DPID=""
}

# crash: kill -9 the daemon and remove its dead mount
crash() {
	kill -9 "$DPID"
	wait "$DPID" 2>/dev/null || true
	DPID=""
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" || fail "removing the dead mount"
}

at() { stat -c %x "$1"; }
old() { touch -a -d "$OLD" "$1" && [[ $(at "$1") == 2020-01-02* ]] || fail "touch -a $1"; }
moved() { [[ $(at "$1") != 2020-01-02* ]] || fail "$2: atime of $1 did not move"; }
kept() { [[ $(at "$1") == 2020-01-02* ]] || fail "$2: atime of $1 moved to $(at "$1")"; }
flags() { awk -v m="$MNT" '$5 == m { print $6 }' /proc/self/mountinfo; }

"$MKFS_MENDFS" -q -f "$IMG" 64M >"$WORK/mkfs.log" 2>&1 || { cat "$WORK/mkfs.log"; fail mkfs; }

case $name in
modes)
	for mode in relatime strictatime noatime nodiratime; do
		mount_fs "$mode"
		f=$MNT/f-$mode
		d=$MNT/d-$mode
		echo data >"$f"
		mkdir "$d"
		touch "$d/e"
		case $mode in
		relatime) [[ ,$(flags), == *,relatime,* ]] || fail "mount flags $(flags)" ;;
		strictatime) [[ ,$(flags), != *atime,* ]] || fail "mount flags $(flags)" ;;
		*) [[ ,$(flags), == *,$mode,* ]] || fail "mount flags $(flags)" ;;
		esac

		old "$f"
		cat "$f" >/dev/null
		if [ $mode = noatime ]; then kept "$f" "cat"; else moved "$f" "cat"; fi

		# O_NOATIME: never moves it
		old "$f"
		dd if="$f" of=/dev/null iflag=noatime status=none
		kept "$f" "dd iflag=noatime"

		# a second read: relatime keeps an atime newer than mtime and ctime
		if [ $mode != noatime ]; then
			cat "$f" >/dev/null
			a1=$(at "$f")
			sleep 0.05
			cat "$f" >/dev/null
			a2=$(at "$f")
			if [ $mode = strictatime ]; then
				[ "$a1" != "$a2" ] || fail "second read: atime stayed $a1"
			else
				[ "$a1" = "$a2" ] || fail "second read: atime $a1 -> $a2"
			fi
			# a write since the last access: the next read moves it
			sleep 0.05
			echo more >>"$f"
			cat "$f" >/dev/null
			[ "$(at "$f")" != "$a2" ] || fail "read after a write: atime stayed $a2"
		fi

		old "$d"
		ls "$d" >/dev/null
		case $mode in
		noatime | nodiratime) kept "$d" "ls" ;;
		*) moved "$d" "ls" ;;
		esac
		umount_fs
	done
	mode=""
	# the last of atime, relatime, strictatime and noatime wins, as with mount(8)
	mount_fs noatime,strictatime
	[[ ,$(flags), != *atime,* ]] || fail "noatime,strictatime: mount flags $(flags)"
	echo x >"$MNT/g"
	old "$MNT/g"
	cat "$MNT/g" >/dev/null
	moved "$MNT/g" "noatime,strictatime"
	umount_fs
	;;
persist)
	# unmount writes what is in memory only
	mount_fs
	echo data >"$MNT/f"
	old "$MNT/f"
	cat "$MNT/f" >/dev/null
	a=$(at "$MNT/f")
	umount_fs
	mount_fs
	[ "$(at "$MNT/f")" = "$a" ] || fail "after remount: atime $(at "$MNT/f"), was $a"

	# no periodic commit: a read's atime is lost in a crash (no transaction)...
	mode=commit=0
	old "$MNT/f"
	umount_fs
	mount_fs commit=0
	cat "$MNT/f" >/dev/null
	moved "$MNT/f" "cat"
	crash
	mount_fs commit=0
	kept "$MNT/f" "crash without a commit"
	# ...and fsync writes it
	cat "$MNT/f" >/dev/null
	a=$(at "$MNT/f")
	sync "$MNT/f"
	crash
	mount_fs
	[ "$(at "$MNT/f")" = "$a" ] || fail "after fsync and a crash: atime $(at "$MNT/f"), was $a"

	# the periodic commit writes it
	mode=commit=1
	old "$MNT/f"
	umount_fs
	mount_fs commit=1
	cat "$MNT/f" >/dev/null
	a=$(at "$MNT/f")
	sleep 2.5
	crash
	mount_fs
	[ "$(at "$MNT/f")" = "$a" ] || fail "after a commit and a crash: atime $(at "$MNT/f"), was $a"
	umount_fs
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac
echo "ok $name"
exit 0
