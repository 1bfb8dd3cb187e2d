/* SPDX-License-Identifier: MIT */
/*
 * Access times: when a read or a directory listing moves an inode's atime
 * (relatime, strictatime, noatime, nodiratime, as Linux decides for ext4),
 * and the lazy write-back of the new value, which never costs a journal
 * transaction per read (docs/design/core.md §3.12, "Access times").  The policy and the
 * list of lazy atimes are atime.c, below the inode table and cache; their
 * write-back (mfs_atime_write, mfs_atime_flush) is inode.c, which writes the
 * atime of an inode whose last reference goes.
 */
#ifndef MENDFS_FS_ATIME_H
#define MENDFS_FS_ATIME_H

#include "mfs_ops.h"

/* fs->atime_flags (struct mfs_mount_opts.atime): relatime unless one of these */
#define MFS_ATIME_STRICT     1u /* every access moves atime */
#define MFS_ATIME_NONE       2u /* no access moves atime (noatime) */
#define MFS_ATIME_NODIRATIME 4u /* directory listings do not move atime */

/* relatime: an atime older than this moves even if newer than mtime and ctime */
#define MFS_RELATIME_NS (24 * 3600 * 1000000000ll)

/*
 * @ip (referenced by the caller, no lock held) was read or listed: move its
 * atime as the mount's policy says, in memory only, and put it on the list
 * of inodes whose atime the device does not have yet.  No transaction.
 */
void mfs_file_accessed(struct mfs *fs, struct mfs_ino *ip);

/*
 * The policy alone: does an access at @now_ns move the atime of @di?
 * (Caller holds ip->lock; exposed for the unit tests.)
 */
bool mfs_atime_needs_update(unsigned flags, const struct mfs_inode *di, int64_t now_ns);

/*
 * @ip's inode goes to the running transaction (mfs_inode_write, under
 * ip->lock for writing), or it lost its last link: its atime needs no
 * write of its own any more, and its times may have changed.
 */
void mfs_atime_clean(struct mfs *fs, struct mfs_ino *ip);

/*
 * @ip's mtime and ctime were moved in memory only (the overwrite fast path):
 * list it for the lazy write-back, as a moved atime.  Caller holds ip->lock
 * for writing; @ip is not unlinked.
 */
void mfs_times_lazy(struct mfs *fs, struct mfs_ino *ip);

/* Inodes on the list of lazy atimes now. */
size_t mfs_atime_pending(struct mfs *fs);
/* The first inode on the list, with a reference of the caller's (mfs_iput it), or NULL. */
struct mfs_ino *mfs_atime_first(struct mfs *fs);

/* --- write-back (inode.c) ---------------------------------------------------------- */

/*
 * Write @ip's lazy atime in a handle of its own, if it has one (fsync, the
 * last mfs_iput).  The caller holds a reference, no inode lock and no handle.
 * On failure the lazy atime is dropped (logged): it is lost as in a crash.
 */
int mfs_atime_write(struct mfs *fs, struct mfs_ino *ip);

/*
 * Write every lazy atime into the running transaction (the periodic commit,
 * sync, unmount): one handle per inode, so the transaction stays bounded.
 * The caller holds no inode lock and no handle.  Returns the first error.
 */
int mfs_atime_flush(struct mfs *fs);

#endif /* MENDFS_FS_ATIME_H */
