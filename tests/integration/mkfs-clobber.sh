#!/bin/bash
# SPDX-License-Identifier: MIT
#
# mkfs-clobber: mkfs.mendfs refuses, without -f, an image holding anything
# libblkid knows (issue 18 item 3): an ext4 filesystem (its TYPE, LABEL and
# UUID named), a minix filesystem, a DOS and a GPT partition table; and a
# mendfs of its own.  With -f (and -F) each is overwritten.  No mount: only
# $MKFS_MENDFS, mkfs.ext4, mkfs.minix and python3 (to write the tables).
set -u
. "$(dirname "$0")/lib.sh"

need_progs MKFS_MENDFS
need_cmds mkfs.ext4 mkfs.minix python3
work_init clobber

# refused IMG WHAT: mkfs.mendfs IMG fails, naming WHAT, and leaves IMG as it was
refused() {
	local before out
	before=$(md5sum <"$1")
	out=$("$MKFS_MENDFS" -q "$1" 2>&1) && fail "$1 ($2): formatted without -f"
	grep -qF -- "$2" <<<"$out" || fail "$1: the message does not name $2: '$out'"
	grep -q "use -f" <<<"$out" || fail "$1: the message does not offer -f: '$out'"
	[ "$(md5sum <"$1")" = "$before" ] || fail "$1 ($2): changed although refused"
	echo "ok: refused: $out"
}

# forced IMG FLAG: mkfs.mendfs FLAG IMG formats it, and then refuses it as mendfs
forced() {
	"$MKFS_MENDFS" -q "$2" "$1" >"$WORK/out" 2>&1 || fail "$1: $2 refused: $(cat "$WORK/out")"
	refused "$1" "a mendfs filesystem"
}

step=ext4
I=$WORK/ext4.img
truncate -s 64M "$I"
mkfs.ext4 -q -F -L clobberlabel -U 8f2d7b9e-1c3a-4e5f-9a7b-0c1d2e3f4a5b "$I" || fail "mkfs.ext4"
refused "$I" 'TYPE="ext4" LABEL="clobberlabel" UUID="8f2d7b9e-1c3a-4e5f-9a7b-0c1d2e3f4a5b"'
forced "$I" -f

step=minix
I=$WORK/minix.img
truncate -s 64M "$I"
mkfs.minix "$I" >/dev/null || fail "mkfs.minix"
refused "$I" 'TYPE="minix"'
forced "$I" -F

step=dos
I=$WORK/dos.img
truncate -s 64M "$I"
python3 - "$I" <<'PY' || fail "writing the DOS table"
import struct, sys
mbr = bytearray(512)
mbr[440:444] = struct.pack('<I', 0x12345678)  # disk identifier: PTUUID
# one Linux partition: not bootable, type 0x83, LBA 2048, 4096 sectors
mbr[446:462] = struct.pack('<B3sB3sII', 0, b'\0\0\0', 0x83, b'\0\0\0', 2048, 4096)
mbr[510:512] = b'\x55\xaa'
open(sys.argv[1], 'r+b').write(mbr)
PY
refused "$I" 'PTTYPE="dos" PTUUID="12345678"'
forced "$I" -f

step=gpt
I=$WORK/gpt.img
truncate -s 64M "$I"
python3 - "$I" <<'PY' || fail "writing the GPT"
# a protective MBR, then a GPT header with no partitions (libblkid checks its CRCs)
import struct, sys, uuid, zlib
last = (64 << 20) // 512 - 1
mbr = bytearray(512)
mbr[446:462] = struct.pack('<B3sB3sII', 0, b'\0\x02\0', 0xee, b'\xff\xff\xff', 1, last)
mbr[510:512] = b'\x55\xaa'
entries = bytes(128 * 128)
hdr = bytearray(92)
struct.pack_into('<8sIIIIQQQQ16sQIII', hdr, 0, b'EFI PART', 0x10000, 92, 0, 0, 1, last,
                 34, last - 33, uuid.UUID('0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9').bytes_le,
                 2, 128, 128, zlib.crc32(entries))
struct.pack_into('<I', hdr, 16, zlib.crc32(hdr))
with open(sys.argv[1], 'r+b') as f:
    f.write(mbr + bytes(hdr).ljust(512, b'\0') + entries)
PY
refused "$I" 'PTTYPE="gpt" PTUUID="0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9"'
forced "$I" -f

step=empty
I=$WORK/empty.img
truncate -s 64M "$I"
"$MKFS_MENDFS" -q "$I" >"$WORK/out" 2>&1 || fail "a zeroed image refused: $(cat "$WORK/out")"
echo "ok: a zeroed image is formatted without -f"
