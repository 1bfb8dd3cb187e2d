#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli-check BUILD: every program `meson install` puts in bin/ or sbin/
# answers as e2fsprogs and util-linux programs do (issue 18 item 1):
#   - `-V` and `--version` print "NAME VERSION" (the meson project version)
#     on stdout, nothing on stderr, exit 0;
#   - `--help` prints a usage on stdout, exit 0;
#   - an unknown option fails (non-zero) and the message names it;
#   - mendctl names an unknown command before its usage;
#   - mkfs.mendfs takes -F as -f.
set -euo pipefail
name=cli-check
fail() {
	echo "FAIL ($name): $*" >&2
	exit 1
}
BUILD=$1
for c in meson python3; do
	command -v "$c" >/dev/null || fail "needs $c"
done
W=$(mktemp -d /tmp/mendfs-cli.XXXXXX)
trap 'rm -rf "$W"' EXIT
D=$W/root
meson install -C "$BUILD" --destdir "$D" --no-rebuild --quiet >"$W/install.log" 2>&1 ||
	{ cat "$W/install.log" >&2; fail "meson install"; }
VERSION=$(meson introspect "$BUILD" --projectinfo | python3 -c \
	'import json, sys; print(json.load(sys.stdin)["version"])')
[ -n "$VERSION" ] || fail "no project version"

mapfile -t PROGS < <(find "$D" -type f -perm -u+x \( -path '*/bin/*' -o -path '*/sbin/*' \) | sort)
[ "${#PROGS[@]}" -ge 6 ] || fail "only ${#PROGS[@]} installed programs: ${PROGS[*]}"
for p in "${PROGS[@]}"; do
	n=$(basename "$p")
	for v in -V --version; do
		out=$("$p" "$v" 2>"$W/err") || fail "$n $v: exit $?"
		[ "$out" = "$n $VERSION" ] || fail "$n $v printed '$out', not '$n $VERSION'"
		[ ! -s "$W/err" ] || fail "$n $v wrote on stderr: $(cat "$W/err")"
	done
	"$p" --help >"$W/out" 2>"$W/err" || fail "$n --help: exit $?"
	grep -qi usage "$W/out" || fail "$n --help: no usage on stdout"
	[ ! -s "$W/err" ] || fail "$n --help wrote on stderr: $(cat "$W/err")"
	if "$p" --bogus-option >"$W/out" 2>"$W/err"; then
		fail "$n --bogus-option: exit 0"
	fi
	grep -q -- "--bogus-option" "$W/err" || fail "$n --bogus-option: option not named: $(cat "$W/err")"
	if "$p" -Q >"$W/out" 2>"$W/err"; then
		fail "$n -Q: exit 0"
	fi
	grep -q "'Q'\|-Q" "$W/err" || fail "$n -Q: option not named: $(cat "$W/err")"
	echo "ok: $n"
done

# mendctl: the unknown command is named, then the usage
M=$(printf '%s\n' "${PROGS[@]}" | grep '/mendctl$') || fail "mendctl not installed"
if "$M" frobnicate >"$W/out" 2>"$W/err"; then
	fail "mendctl frobnicate: exit 0"
fi
head -n1 "$W/err" | grep -q "unknown command 'frobnicate'" ||
	fail "mendctl: unknown command not named first: $(cat "$W/err")"
grep -q usage "$W/err" || fail "mendctl: no usage after the unknown command"

# mkfs.mendfs -F is -f: it formats over an existing mendfs without asking
K=$(printf '%s\n' "${PROGS[@]}" | grep '/mkfs.mendfs$') || fail "mkfs.mendfs not installed"
truncate -s 64M "$W/img"
"$K" -q "$W/img" >"$W/out" 2>&1 || { cat "$W/out" >&2; fail "mkfs.mendfs on a new image"; }
if "$K" -q "$W/img" >"$W/out" 2>&1; then
	fail "mkfs.mendfs over an existing mendfs without -f: exit 0"
fi
"$K" -q -F "$W/img" >"$W/out" 2>&1 || { cat "$W/out" >&2; fail "mkfs.mendfs -F refused"; }
echo "ok: mendctl unknown command, mkfs.mendfs -F"
