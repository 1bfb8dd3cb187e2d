#!/bin/bash
# SPDX-License-Identifier: MIT
#
# offline-test.sh: mendctl's commands on an unmounted device, the habits of
# dumpe2fs -h, e2label and tune2fs -L / -U ($MENDCTL, $MKFS_MENDFS, $MENDFS,
# $FSCK_MENDFS): show prints what mkfs set and the state; label and uuid read
# and change it, both superblock copies (the backup alone still has the new
# values), and survive a mount; a mounted filesystem is refused for changes
# (exit 1, nothing written) but shown; bad arguments are usage errors (2)
# and a file that is not mendfs an error (1), as JSON error objects with
# --json.
set -u
. "$(dirname "$0")/lib.sh"

need_progs MENDCTL MKFS_MENDFS MENDFS FSCK_MENDFS
need_root_fuse
work_init offline
mendctl() { timeout 60 "$MENDCTL" "$@"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

mkfs_mendfs -L first "$IMG" 64M
out=$(mendctl show "$IMG") || fail "show"
grep -q '^label: *first$' <<<"$out" || fail "show: label: $out"
grep -q '^state: *clean$' <<<"$out" || fail "show: state: $out"
grep -q '^features: *metadata_dup xattr_blocks$' <<<"$out" || fail "show: features: $out"
grep -q '^blocks: *16384$' <<<"$out" || fail "show: blocks: $out"
js=$(mendctl --json show "$IMG") || fail "show --json"
[ "$(field label <<<"$js")" = first ] || fail "show --json label: $js"
[ "$(field clean <<<"$js")" = True ] || fail "show --json clean: $js"
[ "$(field mount_count <<<"$js")" = 0 ] || fail "show --json mount_count: $js"
uuid0=$(field uuid <<<"$js")
[ "$(mendctl uuid "$IMG")" = "$uuid0" ] || fail "uuid read"
[ "$(mendctl label "$IMG")" = first ] || fail "label read"

# change both; an odd label (spaces, UTF-8) comes back exactly
mendctl label "$IMG" "données 2" || fail "label set"
[ "$(mendctl label "$IMG")" = "données 2" ] || fail "label after set: $(mendctl label "$IMG")"
mendctl uuid "$IMG" random || fail "uuid random"
u1=$(mendctl uuid "$IMG")
[ "$u1" != "$uuid0" ] || fail "uuid random did not change it"
[[ $u1 =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]] ||
	fail "uuid random: not a version 4 UUID: $u1"
js=$(mendctl --json uuid "$IMG" 12345678-9abc-4def-8123-456789abcdef) || fail "uuid set"
[ "$(field uuid <<<"$js")" = 12345678-9abc-4def-8123-456789abcdef ] || fail "uuid --json: $js"
"$FSCK_MENDFS" -n "$IMG" >"$WORK/fsck" 2>&1 || fail "fsck -n after the changes: $(cat "$WORK/fsck")"

# both copies: with the primary zeroed, the backup holds the new values
cp "$IMG" "$WORK/copy"
dd if=/dev/zero of="$WORK/copy" bs=4096 count=1 conv=notrunc status=none
[ "$(mendctl label "$WORK/copy")" = "données 2" ] || fail "the backup copy has the old label"
[ "$(mendctl uuid "$WORK/copy")" = 12345678-9abc-4def-8123-456789abcdef ] ||
	fail "the backup copy has the old uuid"

# mounted: shown (in use), not changed
mount_fg
out=$(mendctl show "$IMG") || fail "show while mounted"
grep -q '^state: *not clean$' <<<"$out" || fail "show while mounted: $out"
sum=$(sha256sum <"$IMG")
out=$(mendctl label "$IMG" other 2>&1)
[ $? = 1 ] || fail "label set while mounted: not exit 1: $out"
grep -q "in use" <<<"$out" || fail "label set while mounted: $out"
mendctl uuid "$IMG" random 2>/dev/null && fail "uuid set while mounted succeeded"
umount_fg
[ "$(mendctl label "$IMG")" = "données 2" ] || fail "label after a refused change and a mount"
js=$(mendctl --json show "$IMG") || fail "show --json after umount"
[ "$(field mount_count <<<"$js")" = 1 ] || fail "mount_count after a mount: $js"
[ "$(field uuid <<<"$js")" = 12345678-9abc-4def-8123-456789abcdef ] || fail "uuid after a mount"

# bad input
out=$(mendctl uuid "$IMG" 12345678-9abc-4def-8123-45678 2>&1)
[ $? = 2 ] || fail "a short uuid: not exit 2: $out"
out=$(mendctl label "$IMG" "$(printf 'x%.0s' {1..64})" 2>&1)
[ $? = 2 ] || fail "a 64-byte label: not exit 2: $out"
head -c 1M /dev/zero >"$WORK/zero"
out=$(mendctl --json show "$WORK/zero" 2>/dev/null)
[ $? = 1 ] || fail "show of a zero file: not exit 1"
[ "$(field exit_code <<<"$out")" = 1 ] || fail "show --json of a zero file: $out"
cmp -s "$WORK/zero" <(head -c 1M /dev/zero) || fail "show changed a file that is not mendfs"
out=$(mendctl label "$WORK/missing" x 2>&1)
[ $? = 1 ] || fail "label of a missing file: not exit 1: $out"
echo "ok offline"
