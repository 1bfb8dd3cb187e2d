#!/bin/bash
# SPDX-License-Identifier: MIT
#
# lib-scrub-test.sh: libmendfs's mendfs_scrub_step, mendfs_scrub and
# mendfs_events_read (mendfs_scrub(3)) through lib-scrub.c: a 40000-byte
# file with one latent sector (IMG.latent, planted while unmounted) at byte
# 8192; lib-scrub checks the refusals (EINVAL, EOPNOTSUPP, EBUSY beside
# another process's scrub), the scrub's totals and the one poison event.
# Programs from $MENDFS, $MKFS_MENDFS, $MENDCTL, $LIBSCRUB.
# Exit 0 pass, 1 fail, 77 skip (not root, no /dev/fuse, no python3).
set -u
. "$(dirname "$0")/lib.sh"

need_progs MENDFS MKFS_MENDFS MENDCTL LIBSCRUB
need_root_fuse
need_cmds python3
work_init libscrub

mkfs_mendfs "$IMG" 32M
mount_fg
head -c 40000 /dev/urandom >"$MNT/f" || fail "write"
sync
m=$(timeout 60 "$MENDCTL" bmap --json "$MNT/f") || fail "bmap"
S=$(python3 -c '
import json, sys
e = json.loads(sys.argv[1])["extents"][0]
assert e["offset"] == 0 and e["length"] >= 8704, e
print(e["sector"] + 16)' "$m") || fail "bmap: $m"
umount_fg
printf '%s 1\n' "$S" >"$IMG.latent"
mount_fg
timeout 120 "$LIBSCRUB" "$MNT" "$MNT/f" 8192 || fail "lib-scrub"
[ -z "$(grep -v '^#' "$IMG.latent")" ] || fail "the latent sector is still latent"
umount_fg
echo "pass: lib-scrub"
