/* SPDX-License-Identifier: MIT */
/*
 * The journaled copy of the superblock's tree roots (the roots record).  It
 * calls the buffer cache (meta.c) and the journal (journal.c) only; the
 * allocator's quarantine, the orphan tree (orphan.c) and the mount use it.
 *
 * The quarantine and orphan trees are rooted in the superblock, which is not
 * journaled (replay only accepts meta zone blocks) and is written at
 * checkpoint with whatever the in-memory copy says at that moment.  A
 * transaction that changes a root therefore also journals the new roots in a
 * small record in the unused tail of the first inode table block (bytes
 * 3888..4095, struct mfs_roots_rec in include/mendfs/format.h):
 * mfs_super_roots_log().  That block is ordinary journaled metadata, so after
 * replay it holds the roots of exactly the last committed transaction.  At
 * mount, once the journal is replayed, a valid record overrides the
 * superblock's roots (mfs_roots_load); the superblock written at mount and at
 * unmount then agrees with it.  A filesystem fresh from mkfs has no record
 * (the tail is zero) and the superblock's roots are used.  The free counters
 * need nothing of the kind: after a clean unmount the superblock's are exact
 * and the data bitmap is read lazily, group by group, as allocation needs it
 * (alloc_data.c); after a crash or a replay they are recounted from the
 * bitmaps.
 */
#include "mfs.h"

int mfs_super_roots_log(struct mfs *fs, struct mfs_txn *txn)
{
	struct mfs_roots_rec *rec;
	struct mfs_buf *b;
	int ret;

	ret = mfs_meta_read_locked(fs, fs->sb.inode_table_start, MFS_T_INODES, &b);
	if (ret)
		return ret;
	rec = (struct mfs_roots_rec *)(b->data + MFS_ROOTS_OFF);
	rec->magic = MFS_ROOTS_MAGIC;
	rec->quarantine_root = fs->sb.quarantine_root;
	rec->quarantine_depth = fs->sb.quarantine_depth;
	rec->orphan_root = fs->sb.orphan_root;
	rec->orphan_depth = fs->sb.orphan_depth;
	mfs_txn_dirty(txn, b);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}

int mfs_roots_load(struct mfs *fs)
{
	const struct mfs_roots_rec *rec;
	struct mfs_buf *b;
	int ret;

	ret = mfs_meta_read_locked(fs, fs->sb.inode_table_start, MFS_T_INODES, &b);
	if (ret)
		return ret;
	rec = (const struct mfs_roots_rec *)(b->data + MFS_ROOTS_OFF);
	if (rec->magic == MFS_ROOTS_MAGIC) {
		fs->sb.quarantine_root = rec->quarantine_root;
		fs->sb.quarantine_depth = rec->quarantine_depth;
		fs->sb.orphan_root = rec->orphan_root;
		fs->sb.orphan_depth = rec->orphan_depth;
	}
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}
