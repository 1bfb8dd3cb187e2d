/* SPDX-License-Identifier: MIT */
/*
 * POSIX access control lists (POSIX.1e draft 17, as Linux implements them).
 *
 * ACLs are ordinary extended attributes, system.posix_acl_access and
 * system.posix_acl_default, whose values are Linux's posix_acl_xattr format:
 * a little-endian header (version 2) and 8-byte entries (tag, permissions,
 * id), exactly what the kernel hands a FUSE filesystem and reads back from it.
 * The kernel checks permissions against the access ACL itself (FUSE's
 * POSIX_ACL capability); the filesystem keeps mode and ACL in step and
 * creates the ACLs of new inodes:
 *
 *   - setting an access ACL sets the mode's permission bits from it, and an
 *     ACL that says no more than the mode is not stored at all;
 *   - chmod rewrites the access ACL: owner and other entries follow the
 *     mode, and the mask entry (the group entry if there is no mask) follows
 *     the group bits;
 *   - a new inode in a directory with a default ACL gets that ACL as its
 *     access ACL, masked by the mode asked for (the umask does not apply),
 *     and a new directory also gets it as its default ACL; without a default
 *     ACL the umask applies.  Symlinks have no ACLs.
 *
 * The first part works on xattr values only (no inodes, unit-tested alone);
 * the second reads and writes the ACL xattrs of locked inodes in a
 * transaction.
 */
#ifndef MENDFS_FS_ACL_H
#define MENDFS_FS_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mfs.h"

/* The names, the format constants, mfs_acl_type, mfs_acl_valid and mfs_acl_check: mfs.h. */

/*
 * The permission bits a valid ACL gives the mode (owner, mask or else group,
 * other) into *mode, its other bits kept.  Returns 1 if the ACL says more
 * than the mode (named entries or a mask: it must be stored), 0 if not.
 */
int mfs_acl_equiv_mode(const void *value, size_t size, uint32_t *mode);

/* chmod: the owner, other and mask (or else group) entries of a valid ACL follow @mode. */
void mfs_acl_chmod(void *value, size_t size, uint32_t mode);

/*
 * A new inode's access ACL from a copy of the directory's default ACL
 * (valid), and its mode: each class of the ACL and of *mode keeps only what
 * both allow (owner, other, and the mask or else the group entry against the
 * group bits).  Returns 1 if the result must be stored as the access ACL, 0
 * if the mode alone says it all.
 */
int mfs_acl_create_masq(void *value, size_t size, uint32_t *mode);

/* --- ACLs of inodes --------------------------------------------------------------- */

struct mfs;
struct mfs_txn;
struct mfs_ino;

/*
 * The ACLs and the mode of new inode @ip (its mode set, not yet written) in
 * directory @dp (locked), in @txn: inherit @dp's default ACL, or apply
 * @umask when it has none.  Symlinks are left alone.  Returns 0 or -errno
 * (-EUCLEAN if the directory's default ACL is malformed).
 */
int mfs_acl_inherit(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, struct mfs_ino *ip,
                    mode_t umask);

/* After a chmod of @ip (locked for writing): its access ACL, if any, follows the mode. */
int mfs_acl_update_chmod(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip);

/*
 * Set ACL @type of @ip (locked for writing) to @value in @txn: validate it,
 * and for the access ACL set the mode from it and store the ACL only if it
 * says more than the mode (else remove it); @kill_sgid also clears setgid
 * (the caller is outside the file's group and lacks CAP_FSETID).  @flags:
 * XATTR_CREATE / XATTR_REPLACE.  Returns 0, -EINVAL (malformed), -EACCES (a
 * default ACL on a non-directory), -EOPNOTSUPP (a symlink) or -errno.
 */
int mfs_acl_set(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, int type,
                const void *value, size_t size, int flags, bool kill_sgid);

#endif /* MENDFS_FS_ACL_H */
