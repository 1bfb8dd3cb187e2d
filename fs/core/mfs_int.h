/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the files of fs/core above the B+tree (not part of the
 * core API of fs/core/mfs_ops.h): the inode table, inode cache setup, inode
 * allocation and freeing, xattrs of locked inodes, the orphan tree, and the
 * journaled copy of the superblock's tree roots.
 */
#ifndef MENDFS_FS_MFS_INT_H
#define MENDFS_FS_MFS_INT_H

#include <errno.h>

#include "mfs_ops.h"

/* Hard links a non-directory may have: MFS_LINK_MAX (format.h), -EMLINK beyond. */

/* --- itable.c (mfs_inode_write: mfs_ops.h) --------------------------------------------- */

/* Load inode @ino without caching it (orphan processing at mount); checked. */
int mfs_inode_read(struct mfs *fs, uint64_t ino, struct mfs_inode *di);
/* Clear slot @ino in @txn, keeping @generation (the next user's must differ).  0 or -errno. */
int mfs_inode_clear_slot(struct mfs *fs, struct mfs_txn *txn, uint64_t ino, uint64_t generation);

/* --- inode.c ----------------------------------------------------------------------- */

int mfs_icache_init(struct mfs *fs);
/* Drop every cached inode (unmount, or a simulated crash): nothing is written. */
void mfs_icache_destroy(struct mfs *fs);
/*
 * A new inode in @txn: number from the inode allocator, fields initialised
 * (times now, generation new), slot written.  Returned referenced, unlocked.
 */
int mfs_inode_new(struct mfs *fs, struct mfs_txn *txn, mode_t mode, uid_t uid, gid_t gid,
                  struct mfs_ino **ipp);
/* Give back a new inode whose creation failed, in the same @txn, and drop it. */
void mfs_inode_discard(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip);
/*
 * Free an inode with nlink 0 in @txn: data blocks, xattrs, directory tree,
 * its orphan entry, the slot and the inode number.  Caller holds ip->lock.
 * Bounded only for an inode mfs_inode_free_is_small() accepts; any other is
 * freed in steps by its last mfs_iput() (on the orphan list meanwhile).
 */
int mfs_inode_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip);
/* Can mfs_inode_free() free @ip within one bounded step (a few extents, no trees)? */
bool mfs_inode_free_is_small(const struct mfs_ino *ip);
/*
 * @ip (its lock held, one reference of the caller's) lost its last link: mark
 * it unlinked.  If @can_free and every other reference is a pin, mark it dead
 * too (mfs_iget refuses it, its number stays unused while pinned) and return
 * true: the caller frees it in its transaction (mfs_inode_free), or calls
 * mfs_inode_undead() if that fails.
 */
bool mfs_inode_unlinked(struct mfs *fs, struct mfs_ino *ip, bool can_free);
void mfs_inode_undead(struct mfs *fs, struct mfs_ino *ip);
/* Get a regular file's inode (referenced): -EISDIR for a directory, -EINVAL otherwise. */
int mfs_file_get(struct mfs *fs, uint64_t ino, struct mfs_ino **ipp);
/* 0 for a regular file, -EISDIR for a directory, -EINVAL otherwise (caller holds ip->lock). */
static inline int mfs_file_type(const struct mfs_ino *ip)
{
	uint32_t mode = le32toh(ip->di.mode);

	return S_ISREG(mode) ? 0 : S_ISDIR(mode) ? -EISDIR : -EINVAL;
}

/* --- fmap.c (the block map: fmap.h) ------------------------------------------------- */

/*
 * Free every block of @ip in bounded steps (an unlinked inode on the orphan
 * list, before mfs_inode_free).  Caller holds ip->lock for writing, no handle.
 */
int mfs_file_free_all(struct mfs *fs, struct mfs_ino *ip);

/* --- file.c ------------------------------------------------------------------------ */

/*
 * Finish a truncate recorded by the orphan list: free the blocks past EOF in
 * bounded steps, then (nlink > 0) take @ip off the list.  Caller holds
 * ip->lock for writing and no handle.
 */
int mfs_truncate_finish(struct mfs *fs, struct mfs_ino *ip);

/* --- xattr.c ----------------------------------------------------------------------- */

/*
 * Get, set (@flags XATTR_CREATE / XATTR_REPLACE) and remove an xattr of @ip,
 * whose lock the caller holds (shared for get, exclusive otherwise), within
 * the caller's @txn; neither touches ctime nor writes the inode.  Returns as
 * mfs_getxattr, mfs_setxattr and mfs_removexattr; no ACL rules (acl.c).
 */
ssize_t mfs_xattr_get_locked(struct mfs *fs, struct mfs_ino *ip, const char *name, void *value,
                             size_t size);
int mfs_xattr_set_locked(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, const char *name,
                         const void *value, size_t size, int flags);
int mfs_xattr_remove_locked(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip,
                            const char *name);
/* The names of @ip's xattrs into @list, as mfs_listxattr.  Caller holds ip->lock. */
ssize_t mfs_xattr_list_locked(struct mfs *fs, struct mfs_ino *ip, char *list, size_t size);
/*
 * The checks mfs_getxattr and mfs_removexattr make on @name before anything
 * else (0, -EINVAL, -ERANGE or -EOPNOTSUPP), and mfs_setxattr on @name and
 * the value (also -E2BIG, -EINVAL for a value missing, -ENOSPC for one too
 * large without the xattr_blocks feature).
 */
int mfs_xattr_check_name(const char *name);
int mfs_xattr_check_set(struct mfs *fs, const char *name, const void *value, size_t size);

/* --- xattr_blocks.c (xattr_blocks.h; mfs_xattr_release: mfs_ops.h) ---------------------- */

/*
 * The blocks of @ip's out-of-line xattr values (FORMAT.md §7.5), every
 * reference checked: *blocks (malloc'ed, the caller frees it) gets *nr block
 * numbers.  Caller holds ip->lock.  Returns 0 or -errno.
 */
int mfs_xattr_blocks(struct mfs *fs, struct mfs_ino *ip, uint64_t **blocks, size_t *nr);

/* --- orphan.c ---------------------------------------------------------------------- */

/* Orphan tree (fs->super_lock): insert / remove @ino in @txn. */
int mfs_orphan_add(struct mfs *fs, struct mfs_txn *txn, uint64_t ino);
int mfs_orphan_del(struct mfs *fs, struct mfs_txn *txn, uint64_t ino);
/* Entries on the orphan tree (an empty tree may keep its root leaf), or -errno. */
int64_t mfs_orphan_count(struct mfs *fs);
/*
 * The inode numbers on the orphan tree in order, into *inos (malloc'ed, *nr
 * of them; the caller frees it, also on error).  At mount, no other thread
 * running.  Returns 0 or -errno.
 */
int mfs_orphan_list(struct mfs *fs, uint64_t **inos, size_t *nr);

/* --- mount.c ----------------------------------------------------------------------- */

/* Tear down without writing anything: a crash after the last commit (tests). */
void mfs_crash(struct mfs *fs);

#endif /* MENDFS_FS_MFS_INT_H */
