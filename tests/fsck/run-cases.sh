#!/bin/bash
# SPDX-License-Identifier: MIT
# fsck.mendfs tests (e2fsprogs style: an image, a corruption, the expected
# outcome).  Usage: run-cases.sh GROUP   (cases | poison | cli)
#
#  cases   one case per problem code: corrupt a populated image, then
#          fsck -n (exit 4, image and badblocks file unchanged, the problem id
#          reported), fsck -y (exit 1, id reported), fsck -y again (exit 0),
#          and the populated files compared byte by byte (fsck-img verify).
#  poison  damage report: exact paths and byte ranges (text and JSON) for
#          poison in a file, a file in a subdirectory, free space and a
#          metadata block; --zero-damaged; -p.
#          File names in the JSON report: UTF-8 as the same characters, a
#          name that is not UTF-8 as U+FFFD plus path_hex (its exact bytes);
#          in the text report escaped as `ls -b` does (\n, \t, \\, \ooo), so
#          that a name never breaks a line.
#  cli     clean image, usage errors (16), missing device (8), refusal on a
#          locked (mounted) device, progress output; with --json each error
#          prints the error object {"error", "exit_code"} and no report.
# Needs: MKFS_MENDFS, FSCK_MENDFS, FSCK_IMG (set by meson); python3 for JSON.
set -u
GROUP=${1:-cases}
T=$(mktemp -d /tmp/mendfs-fsck-XXXXXX)
trap 'rm -rf "$T"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
# cannot_run WHY: a part of a group that this machine cannot run (no root, no
# FUSE, no loop device, no script(1)): a failure under MENDFS_TEST_STRICT=1 (CI),
# else said on stdout, so that a run never passes over it in silence.
cannot_run() {
	if [ "${MENDFS_TEST_STRICT:-0}" = 1 ]; then
		fail "cannot run (MENDFS_TEST_STRICT=1): $*"
	else
		echo "skipped: $*"
	fi
}

base() { # base [NAME SIZE]: the populated image fresh copies (base, 64M)
	local b=${1:-base}
	"$MKFS_MENDFS" -q "$T/$b.img" "${2:-64M}" || { echo "mkfs failed"; exit 1; }
	"$FSCK_IMG" populate "$T/$b.img" 2>/dev/null || { echo "populate failed"; exit 1; }
}

fresh() { # fresh NAME: a copy of the base image $BASE (and its badblocks file)
	local b=${BASE:-base}
	cp --sparse=always "$T/$b.img" "$T/$1.img"
	cp "$T/$b.img.badblocks" "$T/$1.img.badblocks"
}

sums() { md5sum "$1" "$1.badblocks" 2>/dev/null | awk '{print $1}' | tr '\n' ' '; }

# fix_twice NAME IDS: fsck -y on $T/NAME.img reports every id of the comma-separated IDS
# (exit 1), and a second fsck -y finds nothing (exit 0).
fix_twice() {
	local name=$1 ids=$2 out rc id
	out=$("$FSCK_MENDFS" -y "$T/$name.img" 2>&1)
	rc=$?
	[ $rc -eq 1 ] || { fail "$name: fsck -y exited $rc, expected 1"; echo "$out"; }
	for id in ${ids//,/ }; do
		grep -q "$id" <<<"$out" || fail "$name: fsck -y did not report $id"
	done
	out=$("$FSCK_MENDFS" -y "$T/$name.img" 2>&1)
	rc=$?
	[ $rc -eq 0 ] || { fail "$name: second fsck -y exited $rc, expected 0"; echo "$out"; }
}

# run_case NAME CORRUPTION IDS [SKIP...]: IDS is a comma-separated list of problem ids that
# the first -y run must report (-n: the first of them).  SKIP: paths whose content may be lost.
run_case() {
	local name=$1 cs=$2 ids=$3 before after out rc
	shift 3
	fresh "$name"
	case $cs in
	orphan | orphan-trunc | journal) "$FSCK_IMG" "$cs" "$T/$name.img" 2>/dev/null ;;
	*) "$FSCK_IMG" corrupt "$T/$name.img" "$cs" 2>/dev/null ;;
	esac || { fail "$name: corrupting failed"; return; }
	before=$(sums "$T/$name.img")
	out=$("$FSCK_MENDFS" -n "$T/$name.img" 2>&1)
	rc=$?
	after=$(sums "$T/$name.img")
	[ $rc -eq 4 ] || fail "$name: fsck -n exited $rc, expected 4"
	[ "$before" = "$after" ] || fail "$name: fsck -n changed the image or its badblocks file"
	# -n fixes nothing, so only the first problem is sure to show (the others follow from its fix)
	grep -q "${ids%%,*}" <<<"$out" || fail "$name: fsck -n did not report ${ids%%,*}"
	fix_twice "$name" "$ids"
	"$FSCK_IMG" verify "$T/$name.img" "$@" || fail "$name: files not intact after repair"
	echo "ok: $name ($ids)"
	rm -f "$T/$name.img" "$T/$name.img.badblocks"
}

# run_preen NAME CORRUPTION SAFE: -p fixes a preen-safe problem (exit 1, then 0), or leaves an
# unsafe one (exit 4, twice: nothing changes between -p runs), which -y then fixes.
run_preen() {
	local name=$1 cs=$2 safe=$3 rc
	fresh "$name"
	"$FSCK_IMG" corrupt "$T/$name.img" "$cs" 2>/dev/null || { fail "$name: corrupting failed"; return; }
	"$FSCK_MENDFS" -p "$T/$name.img" >/dev/null 2>&1; rc=$?
	if [ "$safe" = safe ]; then
		[ $rc -eq 1 ] || fail "$name: fsck -p exited $rc, expected 1"
	else
		[ $rc -eq 4 ] || fail "$name: fsck -p exited $rc, expected 4"
		"$FSCK_MENDFS" -p "$T/$name.img" >/dev/null 2>&1; rc=$?
		[ $rc -eq 4 ] || fail "$name: second fsck -p exited $rc, expected 4"
		"$FSCK_MENDFS" -y "$T/$name.img" >/dev/null 2>&1; rc=$?
		[ $rc -eq 1 ] || fail "$name: fsck -y after -p exited $rc, expected 1"
	fi
	"$FSCK_MENDFS" -p "$T/$name.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 0 ] || fail "$name: final fsck -p exited $rc, expected 0"
	echo "ok: $name (-p, $safe)"
	rm -f "$T/$name.img" "$T/$name.img.badblocks"
}

# run_acl NAME PATH ACL KIND WHERE IDS: fsck-img stores ACL xattr system.posix_acl_ACL of KIND
# on PATH (without the core's ACL rules) and must say it went WHERE (inline, tree, blocks).
# IDS "clean": fsck -n exits 0 and reports no F0114.  Else: -n exits 4 with F0114 and changes
# nothing, -p leaves it (exit 4: not safe under -p), -y reports IDS (exit 1), a second -y
# exits 0, the ACL is gone and the files are intact.
run_acl() {
	local name=$1 path=$2 acl=system.posix_acl_$3 kind=$4 where=$5 ids=$6 out rc before
	fresh "$name"
	out=$("$FSCK_IMG" acl "$T/$name.img" "$path" "$acl" "$kind" 2>&1)
	[ "$out" = "$where" ] || { fail "$name: ACL stored '$out', expected $where"; return; }
	before=$(sums "$T/$name.img")
	out=$("$FSCK_MENDFS" -n "$T/$name.img" 2>&1)
	rc=$?
	[ "$before" = "$(sums "$T/$name.img")" ] || fail "$name: fsck -n changed the image"
	if [ "$ids" = clean ]; then
		[ $rc -eq 0 ] || fail "$name: fsck -n exited $rc, expected 0: $out"
		grep -q F0114 <<<"$out" && fail "$name: a valid ACL reported: $out"
		echo "ok: $name (clean)"
		rm -f "$T/$name.img" "$T/$name.img.badblocks"
		return
	fi
	[ $rc -eq 4 ] || fail "$name: fsck -n exited $rc, expected 4"
	grep -q "F0114: inode [0-9]* ([a-z ]*): $acl" <<<"$out" ||
		fail "$name: fsck -n did not report F0114: $out"
	"$FSCK_MENDFS" -p "$T/$name.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 4 ] || fail "$name: fsck -p exited $rc, expected 4"
	"$FSCK_IMG" getxattr "$T/$name.img" "$path" "$acl" >/dev/null || fail "$name: fsck -p removed the ACL"
	fix_twice "$name" "$ids"
	"$FSCK_IMG" getxattr "$T/$name.img" "$path" "$acl" >/dev/null && fail "$name: the ACL is still there"
	"$FSCK_IMG" verify "$T/$name.img" || fail "$name: files not intact after repair"
	echo "ok: $name ($ids)"
	rm -f "$T/$name.img" "$T/$name.img.badblocks"
}

group_cases() {
	base
	run_preen preen-nlink nlink safe
	run_preen preen-twin meta-copy safe
	run_preen preen-bitmap bitmap-diff safe
	run_preen preen-extent extent-bad unsafe
	run_preen preen-dirent dirent-ino unsafe
	run_case sb-primary sb-primary F0001
	run_case sb-differ sb-differ F0002
	run_case sb-error sb-error F0003
	run_case journal journal F0004
	run_case roots-bad roots-bad F0005
	run_case journal-poison journal-poison F0006
	run_case meta-copy meta-copy F0101
	run_case other-copy other-copy F0101
	run_case meta-poison meta-poison F0101
	run_case meta-lost meta-lost F0102,F0302,F0303 '/many/*'
	run_case meta-dup meta-dup F0103
	run_case itable-hdr itable-hdr F0104
	run_case inode-bad inode-bad F0105,F0202 /lonely
	run_case inode-blocks inode-blocks F0106
	run_case inode-field inode-field F0107
	run_case extent-bad extent-bad F0108,F0106 /lonely
	run_case extent-dup extent-dup F0109 /lonely
	run_case file-size file-size F0113 /lonely
	run_case extent-past-max extent-past-max F0113,F0106,F0502 /dir/other.bin
	run_case symlink-block symlink-block F0105,F0202
	# the second owner got its own copy of the shared data (its first 3000 bytes were hello's)
	fresh dup2
	"$FSCK_IMG" corrupt "$T/dup2.img" extent-dup 2>/dev/null
	"$FSCK_MENDFS" -y "$T/dup2.img" >/dev/null 2>&1
	"$FSCK_IMG" cmp "$T/dup2.img" /hello.txt /lonely 3000 ||
		fail "extent-dup: /lonely does not hold the copy of the shared block"
	"$FSCK_IMG" verify "$T/dup2.img" /lonely || fail "extent-dup: /hello.txt changed"
	run_case tree-bad tree-bad F0110
	run_case xattr-bad xattr-bad F0111 xattr
	run_case xattr-name xattr-name F0111 xattr
	run_case xattr-nul xattr-nul F0111 xattr
	run_case xattr-value-csum xattr-value-csum F0112,F0502 large
	run_case xattr-value-owner xattr-value-owner F0112,F0502 large
	run_case xattr-value-lost xattr-value-lost F0112,F0502 large
	run_case xattr-shared xattr-shared F0112,F0502
	run_case xattr-leak xattr-leak F0502 xattr
	# ACLs (F0114): the core's rules, wherever the value is stored
	run_acl acl-bad-entry /lonely access bad-tag tree F0114
	run_acl acl-large /hello.txt access bad-large blocks F0114,F0502
	run_acl acl-inline /dir/victim2 access short inline F0114
	run_acl acl-default-file /lonely default minimal tree F0114
	run_acl acl-symlink /link access minimal tree F0114
	run_acl acl-valid-dir /dir default named tree clean
	run_acl acl-valid-large /dir/sub/data.bin access large blocks clean
	run_acl acl-valid-minimal /hello.txt access minimal tree clean
	run_case dirent-bad dirent-bad F0201,F0302,F0303 /dir/victim2
	run_case dirent-ino dirent-ino F0202,F0302 /dir/victim2
	run_case dirent-type dirent-type F0203
	run_case dir-hardlink dir-hardlink F0204,F0302 /lonely
	# /hard1 with 65000 links (room for the names: a larger image), /lonely's entry one more
	base big 256M
	BASE=big run_case link-max link-max F0207,F0302 /lonely /dir/hard2
	rm -f "$T/big.img" "$T/big.img.badblocks"
	run_case dir-parent dir-parent F0205
	run_case dir-entries dir-entries F0206
	run_case dir-parent-range dir-parent-range F0205
	run_case mode-bits mode-bits F0107
	run_case root-bad root-bad F0301,F0302 '/*' xattr
	run_case unreachable unreachable F0302,F0303 /lonely
	run_case dir-loop dir-loop F0302,F0303 '/dir/*' xattr
	run_case nlink nlink F0401
	run_case bitmap-hdr bitmap-hdr F0501
	run_case bitmap-diff bitmap-diff F0502
	run_case sb-counters sb-counters F0503
	run_case quar-bad quar-bad F0504
	run_case quar-clean quar-clean F0505
	run_case quar-missing quar-missing F0506
	run_case orphan-flag orphan-flag F0507
	run_case orphan orphan F0004,F0508
	run_case orphan-n orphan F0508
	run_case orphan-trunc orphan-trunc F0004,F0509
}

group_poison() {
	local out rc s1 s2 s3 s4 s5 json
	base
	fresh p
	# mid-block sector of /hello.txt block 1: file bytes 4096 + 3*512 .. +511
	s1=$(("$("$FSCK_IMG" sector "$T/p.img" /hello.txt 1)" + 3))
	# a whole block of a file in a subdirectory: block 10 of /dir/sub/data.bin
	s2=$("$FSCK_IMG" sector "$T/p.img" /dir/sub/data.bin 10)
	# a free data block, a free meta zone block (twin area) and hello's inode table block
	s3=$("$FSCK_IMG" free-sector "$T/p.img")
	s5=$(("$(stat -c %s "$T/p.img")" / 512 - 4000))
	printf '%s 1\n%s 8\n' "$s1" "$s2" >>"$T/p.img.badblocks"
	out=$("$FSCK_MENDFS" -n "$T/p.img" 2>&1)
	rc=$?
	[ $rc -eq 4 ] || fail "poison: fsck -n exited $rc, expected 4"
	grep -q '/hello.txt: bytes 5632-6143 (512 bytes) damaged' <<<"$out" ||
		fail "poison: hello.txt range not reported: $out"
	grep -q '/dir/sub/data.bin: bytes 40960-45055 (4096 bytes) damaged' <<<"$out" ||
		fail "poison: data.bin range not reported"
	grep -q '2 damaged files' <<<"$out" || fail "poison: summary does not count 2 damaged files"
	json=$("$FSCK_MENDFS" -n --json "$T/p.img" 2>/dev/null)
	rc=$?
	[ $rc -eq 4 ] || fail "poison: fsck -n --json exited $rc"
	python3 - "$json" <<'EOF' || fail "poison: JSON report wrong"
import json, sys
j = json.loads(sys.argv[1])
d = {f["path"]: f for f in j["damaged_files"]}
assert d["/hello.txt"]["ranges"] == [{"offset": 5632, "length": 512}], d
assert d["/dir/sub/data.bin"]["ranges"] == [{"offset": 40960, "length": 4096}], d
assert isinstance(d["/hello.txt"]["ino"], int)
assert j["exit_code"] == 4 and isinstance(j["metadata_errors"], int) and isinstance(j["repaired"], int)
EOF
	# free space and metadata
	s4=$("$FSCK_IMG" ino "$T/p.img" /hello.txt)
	printf '%s 1\n%s 1\n' "$s3" "$s5" >>"$T/p.img.badblocks"
	"$FSCK_IMG" corrupt "$T/p.img" meta-poison 2>/dev/null
	out=$("$FSCK_MENDFS" -n "$T/p.img" 2>&1)
	grep -q 'free space: data blocks .* poisoned: not quarantined' <<<"$out" ||
		fail "poison: free block not reported: $out"
	grep -q 'free space: metadata block .* (twin copy, block .*) poisoned' <<<"$out" ||
		fail "poison: free metadata block not reported"
	grep -q "metadata: inode table block .*(inodes .*): primary copy (block .*) poisoned; the other copy is intact" <<<"$out" ||
		fail "poison: metadata block not reported: $out"
	# poison past the end of a file (hello.txt is 10000 bytes: block 2, sector 7 is past it)
	fresh eof
	printf '%s 1\n' "$(("$("$FSCK_IMG" sector "$T/eof.img" /hello.txt 2)" + 7))" >>"$T/eof.img.badblocks"
	out=$("$FSCK_MENDFS" -n "$T/eof.img" 2>&1); rc=$?
	[ $rc -eq 0 ] || fail "poison: poison past the end of a file exited $rc, expected 0"
	grep -q 'poisoned in its blocks past the end of the file (no data lost)' <<<"$out" ||
		fail "poison: poison past the end of a file not listed: $out"
	# -p: fixes the twin and the quarantine, leaves the data (exit 4, and 1 for the fixes)
	cp --sparse=always "$T/p.img" "$T/pp.img"
	cp "$T/p.img.badblocks" "$T/pp.img.badblocks"
	out=$("$FSCK_MENDFS" -p "$T/pp.img" 2>&1)
	rc=$?
	[ $rc -eq 5 ] || fail "poison: fsck -p exited $rc, expected 5 (corrected + left)"
	out=$("$FSCK_MENDFS" -p "$T/pp.img" 2>&1)
	rc=$?
	[ $rc -eq 4 ] || fail "poison: second fsck -p exited $rc, expected 4 (damaged data stays)"
	grep -q 'quarantined$' <<<"$out" || fail "poison: free block not quarantined by -p"
	# -y without --zero-damaged never discards the data
	out=$("$FSCK_MENDFS" -y "$T/pp.img" 2>&1)
	rc=$?
	[ $rc -eq 4 ] || fail "poison: fsck -y exited $rc, expected 4 (data left without --zero-damaged)"
	# --zero-damaged
	out=$("$FSCK_MENDFS" -y --zero-damaged "$T/p.img" 2>&1)
	rc=$?
	[ $rc -eq 1 ] || { fail "poison: --zero-damaged exited $rc, expected 1"; echo "$out"; }
	grep -q '/hello.txt: bytes 5632-6143 zero-initialised' <<<"$out" ||
		fail "poison: --zero-damaged did not list the zeroed range: $out"
	out=$("$FSCK_MENDFS" -y "$T/p.img" 2>&1)
	rc=$?
	[ $rc -eq 0 ] || { fail "poison: fsck after --zero-damaged exited $rc, expected 0"; echo "$out"; }
	out=$("$FSCK_IMG" getxattr "$T/p.img" /hello.txt trusted.mendfs.lost)
	[ "$out" = "5632 512" ] || fail "poison: trusted.mendfs.lost of hello.txt is '$out'"
	out=$("$FSCK_IMG" getxattr "$T/p.img" /dir/sub/data.bin trusted.mendfs.lost)
	[ "$out" = "40960 4096" ] || fail "poison: trusted.mendfs.lost of data.bin is '$out'"
	"$FSCK_IMG" verify "$T/p.img" /hello.txt /dir/sub/data.bin ||
		fail "poison: other files not intact"
	grep -q "^$s1 " "$T/p.img.badblocks" && fail "poison: zeroed sector still poisoned"
	# the quarantined free block is cleared and released too (never reused before that)
	grep -q "^$s3 " "$T/p.img.badblocks" && fail "poison: quarantined free block still poisoned"
	out=$("$FSCK_MENDFS" -n "$T/p.img" 2>&1)
	grep -q 'free space: data blocks' <<<"$out" && fail "poison: free space still listed: $out"
	# an out-of-line xattr value block: the report names the file; one copy is repaired
	# from the other, both copies lost remove the xattr (F0112)
	fresh xv
	read -r b t <<<"$("$FSCK_IMG" xblock "$T/xv.img" /hello.txt 1)"
	printf '%s 1\n' $((b * 8 + 2)) >>"$T/xv.img.badblocks"
	out=$("$FSCK_MENDFS" -n "$T/xv.img" 2>&1); rc=$?
	[ $rc -eq 4 ] || fail "poison: xattr value block: fsck -n exited $rc, expected 4"
	grep -q "metadata: /hello.txt: xattr user.large of inode [0-9]*, value block 2 of 5 (block $b): primary copy (block $b) poisoned; the other copy is intact" <<<"$out" ||
		fail "poison: xattr value block not reported with its file: $out"
	out=$("$FSCK_MENDFS" -y "$T/xv.img" 2>&1); rc=$?
	[ $rc -eq 1 ] || fail "poison: xattr value block: fsck -y exited $rc, expected 1: $out"
	"$FSCK_IMG" verify "$T/xv.img" || fail "poison: xattr value not intact after the twin repair"
	printf '%s 1\n%s 1\n' $((b * 8 + 2)) $((t * 8 + 5)) >>"$T/xv.img.badblocks"
	out=$("$FSCK_MENDFS" -n "$T/xv.img" 2>&1)
	grep -q "metadata: /hello.txt: xattr user.large .*(block $b): twin copy (block $t) poisoned; the other copy is bad too" <<<"$out" ||
		fail "poison: lost xattr value block not reported with its file: $out"
	out=$("$FSCK_MENDFS" -y "$T/xv.img" 2>&1); rc=$?
	[ $rc -eq 1 ] || fail "poison: xattr value lost: fsck -y exited $rc, expected 1: $out"
	grep -q 'F0112.*xattr user.large: value block .* lost' <<<"$out" ||
		fail "poison: lost xattr value block: no F0112: $out"
	out=$("$FSCK_MENDFS" -y "$T/xv.img" 2>&1); rc=$?
	[ $rc -eq 0 ] || fail "poison: fsck after the lost xattr value exited $rc, expected 0: $out"
	"$FSCK_IMG" verify "$T/xv.img" large || fail "poison: files not intact after the xattr loss"
	echo "ok: poison xattr value block"
	# F0601 is the damaged data problem (checked above through its report)
	# names: UTF-8 comes out as the same characters; other bytes as U+FFFD, exact in
	# path_hex; the text report escapes them as ls -b does, one line a name
	fresh names
	odd=$'/nl\nx\ty\x01z\\w\x7f'
	"$FSCK_IMG" file "$T/names.img" /café.txt 5000 &&
		"$FSCK_IMG" file "$T/names.img" $'/bad\xff' 5000 &&
		"$FSCK_IMG" file "$T/names.img" "$odd" 5000 &&
		s1=$("$FSCK_IMG" sector "$T/names.img" /café.txt 0) &&
		s2=$("$FSCK_IMG" sector "$T/names.img" $'/bad\xff' 0) &&
		s3=$("$FSCK_IMG" sector "$T/names.img" "$odd" 0) ||
		fail "poison: making the named files failed"
	printf '%s 1\n%s 1\n%s 1\n' "$s1" "$s2" "$s3" >>"$T/names.img.badblocks"
	out=$("$FSCK_MENDFS" -n "$T/names.img" 2>&1)
	grep -qaF '/café.txt: bytes 0-511 (512 bytes) damaged' <<<"$out" ||
		fail "poison: café.txt not in the text report: $out"
	grep -qaF '/bad\377: bytes 0-511 (512 bytes) damaged' <<<"$out" ||
		fail "poison: the name with byte 0xff not escaped as \\377 in the text report: $out"
	grep -qxaF '  /nl\nx\ty\001z\\w\177: bytes 0-511 (512 bytes) damaged' <<<"$out" ||
		fail "poison: the name with a newline and control bytes not escaped on one line: $out"
	grep -qaF 'F0601: /nl\nx\ty\001z\\w\177 (inode' <<<"$out" ||
		fail "poison: the F0601 problem line does not escape the name: $out"
	LC_ALL=C grep -qa $'[\x01\x7f\xff]' <<<"$out" && fail "poison: a raw control or invalid byte in the text report: $out"
	"$FSCK_MENDFS" -n --json "$T/names.img" >"$T/names.json" 2>/dev/null
	rc=$?
	[ $rc -eq 4 ] || fail "poison: fsck -n --json of the named files exited $rc, expected 4"
	python3 - "$T/names.json" <<'EOF' || fail "poison: names in the JSON report wrong: $(cat "$T/names.json")"
import json, sys
raw = open(sys.argv[1], "rb").read()
j = json.loads(raw.decode("utf-8"))  # strict: the output is valid UTF-8
d = {f["path"]: f for f in j["damaged_files"]}
cafe = d["/caf\u00e9.txt"]
assert "path_hex" not in cafe, cafe
assert cafe["ranges"] == [{"offset": 0, "length": 512}], cafe
bad = d["/bad\ufffd"]
assert bytes.fromhex(bad["path_hex"]) == b"/bad\xff", bad
assert bad["ranges"] == [{"offset": 0, "length": 512}], bad
odd = d["/nl\nx\ty\x01z\\w\x7f"]  # exact, JSON-escaped only
assert "path_hex" not in odd, odd
assert len(d) == 3, d
EOF
	echo "ok: poison ($s4)"
}

# json_error RC CMD...: exits RC and prints one error object {"error", "exit_code": RC}, no report
json_error() {
	local want=$1 out rc
	shift
	out=$("$@" 2>/dev/null)
	rc=$?
	[ $rc -eq "$want" ] || { fail "cli: $* exited $rc, expected $want"; return; }
	python3 -c '
import json, sys
j = json.loads(sys.argv[1])
assert isinstance(j, dict) and isinstance(j["error"], str) and j["error"], j
assert j["exit_code"] == int(sys.argv[2]), j
assert not {"damaged_files", "metadata_errors", "repaired", "problems"} & set(j), j
' "$out" "$want" || fail "cli: $* printed: $out"
}

group_cli() {
	local out rc before
	base
	fresh c
	for m in -n -p -y; do
		out=$("$FSCK_MENDFS" $m "$T/c.img" 2>&1)
		rc=$?
		[ $rc -eq 0 ] || fail "cli: clean image with $m exited $rc"
		grep -q 'c.img: 308 files, 4 directories' <<<"$out" || fail "cli: summary line wrong: $out"
	done
	out=$("$FSCK_MENDFS" -n --json "$T/c.img" 2>/dev/null)
	python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert j["exit_code"]==0 and j["damaged_files"]==[] and j["metadata_errors"]==0' "$out" ||
		fail "cli: clean JSON wrong: $out"
	"$FSCK_MENDFS" -n -y "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 16 ] || fail "cli: -n -y exited $rc, expected 16"
	"$FSCK_MENDFS" >/dev/null 2>&1; rc=$?
	[ $rc -eq 16 ] || fail "cli: no device exited $rc, expected 16"
	"$FSCK_MENDFS" --bogus "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 16 ] || fail "cli: --bogus exited $rc, expected 16"
	"$FSCK_MENDFS" -n --zero-damaged "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 16 ] || fail "cli: --zero-damaged without -y exited $rc, expected 16"
	"$FSCK_MENDFS" -n -C x "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 16 ] || fail "cli: -C x exited $rc, expected 16"
	"$FSCK_MENDFS" -n "$T/c.img" "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 16 ] || fail "cli: two devices exited $rc, expected 16"
	"$FSCK_MENDFS" -n "$T/nonexistent.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 8 ] || fail "cli: nonexistent device exited $rc, expected 8"
	head -c 1M /dev/zero >"$T/zero.img"
	"$FSCK_MENDFS" -n "$T/zero.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 8 ] || fail "cli: a device without mendfs exited $rc, expected 8"
	# --json: every error is the same object, never a report
	json_error 8 "$FSCK_MENDFS" -n --json "$T/nonexistent.img"
	json_error 8 "$FSCK_MENDFS" -n --json "$T/zero.img"
	json_error 16 "$FSCK_MENDFS" --json
	json_error 16 "$FSCK_MENDFS" --json -n -y "$T/c.img"
	json_error 16 "$FSCK_MENDFS" --bogus --json "$T/c.img"
	json_error 16 "$FSCK_MENDFS" -n -C x --json "$T/c.img"
	json_error 16 "$FSCK_MENDFS" -n --json --zero-damaged "$T/c.img"
	json_error 16 "$FSCK_MENDFS" -n --json "$T/c.img" "$T/c.img"
	# progress on a file descriptor
	"$FSCK_MENDFS" -n -C 3 "$T/c.img" >/dev/null 3>"$T/progress"
	for p in 0 1 2 3 4 5; do
		grep -q "^$p [0-9]* [0-9]* $T/c.img\$" "$T/progress" || fail "cli: no progress for pass $p"
	done
	# a mounted filesystem: the daemon's lock (flock on the device, as blk_dev_open takes it)
	"$FSCK_IMG" corrupt "$T/c.img" nlink 2>/dev/null
	before=$(sums "$T/c.img")
	exec 9<"$T/c.img"
	flock -x 9 || fail "cli: could not lock the image"
	out=$("$FSCK_MENDFS" -y "$T/c.img" 2>&1); rc=$?
	[ $rc -eq 8 ] || fail "cli: fsck -y on a locked device exited $rc, expected 8"
	grep -q 'in use' <<<"$out" || fail "cli: no 'in use' message: $out"
	json_error 8 "$FSCK_MENDFS" -y --json "$T/c.img"
	"$FSCK_MENDFS" -n "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 4 ] || fail "cli: fsck -n on a locked device exited $rc, expected 4"
	[ "$before" = "$(sums "$T/c.img")" ] || fail "cli: the locked image was changed"
	exec 9<&-
	"$FSCK_MENDFS" -y "$T/c.img" >/dev/null 2>&1; rc=$?
	[ $rc -eq 1 ] || fail "cli: fsck -y after the lock went exited $rc, expected 1"
	# the real daemon, when FUSE is usable
	if [ -n "${MENDFS:-}" ] && [ -e /dev/fuse ] && [ "$(id -u)" = 0 ]; then
		mkdir -p "$T/mnt"
		if ! "$MENDFS" "$T/c.img" "$T/mnt" 2>"$T/mount.log"; then
			fail "cli: the daemon did not mount: $(cat "$T/mount.log")"
		else
			"$FSCK_MENDFS" -y "$T/c.img" >/dev/null 2>&1; rc=$?
			[ $rc -eq 8 ] || fail "cli: fsck -y on a mounted filesystem exited $rc, expected 8"
			fusermount3 -u "$T/mnt" 2>/dev/null || umount "$T/mnt"
			for _ in $(seq 50); do flock -n "$T/c.img" true && break; sleep 0.1; done
			echo "ok: refused a real mount"
		fi
	else
		cannot_run "cli: refusal on a real mount needs the daemon (MENDFS), /dev/fuse and root"
	fi
	# a block device (the uring backend, O_DIRECT): a loop device over a corrupted copy
	if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null; then
		fresh loop
		"$FSCK_IMG" corrupt "$T/loop.img" nlink 2>/dev/null
		local dev
		if dev=$(losetup -f --show "$T/loop.img" 2>/dev/null); then
			"$FSCK_MENDFS" -n "$dev" >/dev/null 2>&1; rc=$?
			[ $rc -eq 4 ] || fail "cli: fsck -n on $dev exited $rc, expected 4"
			"$FSCK_MENDFS" -y "$dev" >/dev/null 2>&1; rc=$?
			[ $rc -eq 1 ] || fail "cli: fsck -y on $dev exited $rc, expected 1"
			"$FSCK_MENDFS" -y "$dev" >/dev/null 2>&1; rc=$?
			[ $rc -eq 0 ] || fail "cli: second fsck -y on $dev exited $rc, expected 0"
			losetup -d "$dev"
			echo "ok: block device"
		else
			fail "cli: losetup failed on $T/loop.img"
		fi
	else
		cannot_run "cli: the block device case needs root and losetup"
	fi
	# interactive: no terminal is an operational error; on a terminal, 'a' answers yes to all
	fresh ask
	"$FSCK_IMG" corrupt "$T/ask.img" nlink 2>/dev/null
	"$FSCK_MENDFS" "$T/ask.img" </dev/null >/dev/null 2>&1; rc=$?
	[ $rc -eq 8 ] || fail "cli: interactive without a terminal exited $rc, expected 8"
	json_error 8 "$FSCK_MENDFS" --json "$T/ask.img" </dev/null
	if command -v script >/dev/null; then
		printf 'a\n' | timeout 60 script -qec "'$FSCK_MENDFS' '$T/ask.img'" /dev/null >"$T/ask.out" 2>&1
		rc=$?
		[ $rc -eq 1 ] || fail "cli: interactive 'a' exited $rc, expected 1: $(cat "$T/ask.out")"
		grep -q 'F0401' "$T/ask.out" || fail "cli: interactive run did not show F0401"
		"$FSCK_MENDFS" -n "$T/ask.img" >/dev/null 2>&1; rc=$?
		[ $rc -eq 0 ] || fail "cli: fsck -n after the interactive repair exited $rc"
	else
		cannot_run "cli: the interactive case needs script(1) (bsdutils)"
	fi
	# every problem code is documented in the man page and has a test case
	if [ -n "${SRCDIR:-}" ]; then
		local ids id
		ids=$(grep -o '"F0[0-9]*"' "$SRCDIR/fsck/problem.c" | tr -d '"')
		[ "$(wc -w <<<"$ids")" -ge 30 ] || fail "cli: problem ids not found in problem.c"
		for id in $ids; do
			grep -q "^\.B $id PR_" "$SRCDIR/docs/man/fsck.mendfs.8" ||
				fail "cli: $id is not in docs/man/fsck.mendfs.8"
			grep -q "$id" "$SRCDIR/tests/fsck/run-cases.sh" || fail "cli: $id has no test case"
		done
	else
		cannot_run "cli: the problem-code documentation check needs SRCDIR"
	fi
	echo "ok: cli"
}

case $GROUP in
cases) group_cases ;;
poison) group_poison ;;
cli) group_cli ;;
*) echo "unknown group $GROUP"; exit 2 ;;
esac
[ $FAILS -eq 0 ] || { echo "$FAILS failure(s)"; exit 1; }
exit 0
