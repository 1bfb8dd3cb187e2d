#!/bin/bash
# SPDX-License-Identifier: MIT
#
# install-check BUILD: `meson install` into a scratch directory installs
# exactly what a user can use, and it works:
#   - the file list is the expected one (no engine header, no benchmark);
#   - every installed program has its man page in section 8;
#   - every man page has an indexable NAME line that mentions mendfs, and
#     `apropos mendfs` over a man database of the tree lists every page;
#   - every installed header compiles alone;
#   - the example of libmendfs(3) compiles and links against the installed
#     libmendfs through pkg-config, runs, and fails with EOPNOTSUPP on a file
#     that is not on mendfs;
#   - the user documents are in share/doc/mendfs.
set -euo pipefail
name=install-check
fail() {
	echo "FAIL ($name): $*" >&2
	exit 1
}
BUILD=$1
for c in meson pkg-config cc mandb apropos lexgrog python3; do
	command -v "$c" >/dev/null || fail "needs $c"
done
W=$(mktemp -d /tmp/mendfs-install.XXXXXX)
trap 'rm -rf "$W"' EXIT
D=$W/root
meson install -C "$BUILD" --destdir "$D" --no-rebuild --quiet >"$W/install.log" 2>&1 ||
	{ cat "$W/install.log" >&2; fail "meson install"; }

read -r PREFIX LIBDIR MANDIR < <(meson introspect "$BUILD" --buildoptions | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["libdir"], o["mandir"])')
P=$D$PREFIX
case $LIBDIR in /*) L=$D$LIBDIR ;; *) L=$P/$LIBDIR ;; esac
case $MANDIR in /*) M=$D$MANDIR ;; *) M=$P/$MANDIR ;; esac
SBIN=(mendfs mount.mendfs mount.fuse.mendfs umount.fuse.mendfs mkfs.mendfs fsck.mendfs mendctl)
MAN=(man8/mendfs.8 man8/mount.mendfs.8 man8/umount.fuse.mendfs.8 man8/mkfs.mendfs.8
	man8/fsck.mendfs.8 man8/mendctl.8 man3/libmendfs.3 man3/mendfs_preadv2.3
	man3/mendfs_scrub.3 man2/ioctl_mendfs.2)
ALIASES=(mendfs_pwritev2 mendfs_badranges mendfs_zeroinit mendfs_recover)
SCRUB_ALIASES=(mendfs_scrub_step mendfs_events_read)
HEADERS=(recovery.h ioctl.h format.h)
DOCS=(README.md RECOVERY.md FORMAT.md)

# The expected list, relative to the destdir, against what is there.
{
	for f in "${SBIN[@]}"; do echo "$P/sbin/$f"; done
	for f in "${MAN[@]}"; do echo "$M/$f"; done
	for f in "${ALIASES[@]}" "${SCRUB_ALIASES[@]}"; do echo "$M/man3/$f.3"; done
	for f in "${HEADERS[@]}"; do echo "$P/include/mendfs/$f"; done
	for f in "${DOCS[@]}"; do echo "$P/share/doc/mendfs/$f"; done
	for f in libmendfs.a libmendfs.so libmendfs.so.0 libmendfs.so.0.1.0 pkgconfig/mendfs.pc; do
		echo "$L/$f"
	done
} | sed "s|^$D||" | sort >"$W/expected"
(cd "$D" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort) >"$W/installed"
diff -u "$W/expected" "$W/installed" >"$W/diff" ||
	{ cat "$W/diff" >&2; fail "installed files differ from the expected list (- missing, + unexpected)"; }

# Man pages: NAME lines, aliases resolve, apropos finds every page.
for f in "${MAN[@]}"; do
	l=$(lexgrog "$M/$f") || fail "$f: no indexable NAME line"
	case $l in *mendfs*) ;; *) fail "$f: NAME does not mention mendfs: $l" ;; esac
done
for f in "${ALIASES[@]}"; do
	[ "$(readlink -f "$M/man3/$f.3")" = "$(readlink -f "$M/man3/mendfs_preadv2.3")" ] ||
		fail "man3/$f.3 does not lead to mendfs_preadv2.3"
done
for f in "${SCRUB_ALIASES[@]}"; do
	[ "$(readlink -f "$M/man3/$f.3")" = "$(readlink -f "$M/man3/mendfs_scrub.3")" ] ||
		fail "man3/$f.3 does not lead to mendfs_scrub.3"
done
mandb -q -c "$M" >/dev/null 2>&1 || fail "mandb on the installed pages"
apropos -M "$M" mendfs >"$W/apropos" || fail "apropos mendfs found nothing"
for f in "${MAN[@]}"; do
	p=${f#man?/}
	grep -q "^${p%.*} (${p##*.})" "$W/apropos" || { cat "$W/apropos" >&2; fail "apropos mendfs misses ${p%.*}(${p##*.})"; }
done

# Headers alone.
for h in "${HEADERS[@]}"; do
	echo "#include <mendfs/$h>" | cc -std=gnu11 -Wall -Werror -fsyntax-only -I "$P/include" -x c - ||
		fail "<mendfs/$h> does not compile alone"
done

# libmendfs(3)'s example, through pkg-config, against the installed library.
sed -n '/^\.SH EXAMPLES/,/^\.SH/p' "$M/man3/libmendfs.3" | sed -n '/^\.nf/,/^\.fi/p' |
	sed -e '/^\.nf/d' -e '/^\.fi/d' -e 's/\\e/\\/g' -e 's/\\-/-/g' >"$W/example.c"
grep -q mendfs_recover "$W/example.c" || fail "no example in libmendfs(3)"
cat >>"$W/example.c" <<'EOC'
#include <errno.h>
#include <fcntl.h>
int main(int argc, char **argv)
{
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0 || argc < 2)
		return 2;
	return salvage(fd, 1) == -1 && errno == EOPNOTSUPP ? 0 : 1;
}
EOC
export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D
flags=$(pkg-config --cflags --libs mendfs) || fail "pkg-config mendfs"
# shellcheck disable=SC2086
cc -std=gnu11 -Wall -Werror -o "$W/example" "$W/example.c" $flags >"$W/cc.log" 2>&1 ||
	{ cat "$W/cc.log" >&2; fail "libmendfs(3) example does not build: cc ... $flags"; }
echo data >"$W/plain"
LD_LIBRARY_PATH=$L "$W/example" "$W/plain" ||
	fail "libmendfs(3) example on a plain file: expected EOPNOTSUPP (exit $?)"
echo "install-check: ${#SBIN[@]} programs, ${#MAN[@]} pages (+${#ALIASES[@]} aliases), ${#HEADERS[@]} headers, libmendfs linked through pkg-config"
