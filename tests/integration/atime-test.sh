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
. "$(dirname "$0")/lib.sh"

name=${1:?usage: atime-test.sh NAME}
need_progs MENDFS MKFS_MENDFS
need_root_fuse
work_init atime
OLD="2020-01-02 03:04:05"

at() { stat -c %x "$1"; }
old() { touch -a -d "$OLD" "$1" && [[ $(at "$1") == 2020-01-02* ]] || fail "touch -a $1"; }
moved() { [[ $(at "$1") != 2020-01-02* ]] || fail "$2: atime of $1 did not move"; }
kept() { [[ $(at "$1") == 2020-01-02* ]] || fail "$2: atime of $1 moved to $(at "$1")"; }
# still FILE ATIME WHEN: FILE's atime is still ATIME
still() { [ "$(at "$1")" = "$2" ] || fail "$3: atime $(at "$1"), was $2"; }
flags() { awk -v m="$MNT" '$5 == m { print $6 }' /proc/self/mountinfo; }

mkfs_mendfs -f "$IMG" 64M

case $name in
modes)
	for mode in relatime strictatime noatime nodiratime; do
		step=$mode # for messages
		mount_fg "$mode"
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
		umount_fg
	done
	step=""
	# the last of atime, relatime, strictatime and noatime wins, as with mount(8)
	mount_fg noatime,strictatime
	[[ ,$(flags), != *atime,* ]] || fail "noatime,strictatime: mount flags $(flags)"
	echo x >"$MNT/g"
	old "$MNT/g"
	cat "$MNT/g" >/dev/null
	moved "$MNT/g" "noatime,strictatime"
	umount_fg
	;;
persist)
	# unmount writes what is in memory only
	mount_fg
	echo data >"$MNT/f"
	old "$MNT/f"
	cat "$MNT/f" >/dev/null
	a=$(at "$MNT/f")
	umount_fg
	mount_fg
	still "$MNT/f" "$a" "after remount"

	# no periodic commit: a read's atime is lost in a crash (no transaction)...
	step=commit=0
	old "$MNT/f"
	umount_fg
	mount_fg commit=0
	cat "$MNT/f" >/dev/null
	moved "$MNT/f" "cat"
	crash
	mount_fg commit=0
	kept "$MNT/f" "crash without a commit"
	# ...and fsync writes it
	cat "$MNT/f" >/dev/null
	a=$(at "$MNT/f")
	sync "$MNT/f"
	crash
	mount_fg
	still "$MNT/f" "$a" "after fsync and a crash"

	# the periodic commit writes it
	step=commit=1
	old "$MNT/f"
	umount_fg
	mount_fg commit=1
	cat "$MNT/f" >/dev/null
	a=$(at "$MNT/f")
	sleep 2.5
	crash
	mount_fg
	still "$MNT/f" "$a" "after a commit and a crash"
	umount_fg
	;;
*)
	echo "unknown test $name" >&2
	exit 1
	;;
esac
echo "ok $name"
exit 0
