/* SPDX-License-Identifier: MIT */
/*
 * The inode table (docs/FORMAT.md §6): where inode N lives, reading a slot
 * (checked before it is trusted), writing an in-memory inode back into its
 * slot within a transaction, clearing a slot.  Below the inode cache and the
 * block map; calls the metadata cache, the journal (mfs_txn_dirty) and
 * atime.c (a written inode carries its lazy atime with it).
 *
 * Locking: the caller of mfs_inode_write holds ip->lock for writing; the
 * slot's buffer lock covers the copy.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "atime.h"
#include "mfs_int.h"

/* Where inode @ino lives in the inode table. */
static void ino_location(const struct mfs *fs, uint64_t ino, uint64_t *blk, size_t *off)
{
	*blk = fs->sb.inode_table_start + (ino - 1) / MFS_INODES_PER_BLOCK;
	*off = sizeof(struct mfs_meta_hdr) +
	       (size_t)((ino - 1) % MFS_INODES_PER_BLOCK) * MFS_INODE_SIZE;
}

/* Is the slot a valid inode?  Returns 0, -ENOENT (free slot) or -EUCLEAN. */
static int inode_check(const struct mfs *fs, uint64_t ino, const struct mfs_inode *di)
{
	const char *why = NULL;

	if (di->mode == 0)
		return -ENOENT;
	if (!mfs_mode_type_valid(di->mode)) {
		why = "invalid file type";
		goto bad;
	}
	if (S_ISDIR(di->mode) ? di->nlink > fs->sb.nr_inodes + 2 : di->nlink > MFS_LINK_MAX)
		why = "link count out of range";
	else if (di->nlink == 0 && !(di->iflags & MFS_IFL_ORPHAN))
		why = "no links and not an orphan";
	else if (S_ISDIR(di->mode) && di->nlink != 0 && di->nlink < 2)
		why = "directory with fewer than 2 links";
	else if ((di->iflags & MFS_IFL_INLINE_DATA) &&
	         (!S_ISLNK(di->mode) || di->nr_inline > MFS_INLINE_DATA ||
	          di->size != di->nr_inline || (di->iflags & MFS_IFL_EXTENT_TREE)))
		why = "inconsistent inline data";
	else if (!(di->iflags & MFS_IFL_INLINE_DATA) && !(di->iflags & MFS_IFL_EXTENT_TREE) &&
	         di->nr_inline > MFS_INLINE_EXTENTS)
		why = "too many inline extents";
	else if (!S_ISDIR(di->mode) && (di->dir_root || di->dir_entries))
		why = "directory tree on a non-directory";
	else if (S_ISDIR(di->mode) && (di->blocks || (di->iflags & MFS_IFL_EXTENT_TREE)))
		why = "data blocks on a directory";
	else if (S_ISDIR(di->mode) && (di->parent == 0 || di->parent > fs->sb.nr_inodes))
		why = "directory parent out of range";
	else if (S_ISLNK(di->mode) && (di->size == 0 || di->size >= 4096))
		why = "symlink target length out of range";
	else if (di->inline_xattr_len > sizeof(di->inline_xattr))
		why = "inline xattr length out of range";
	if (!why)
		return 0;
bad:
	fprintf(stderr, "mendfs: inode %llu: %s (mode %#o, nlink %u, flags %#x)\n",
	        (unsigned long long)ino, why, di->mode, di->nlink, di->iflags);
	return -EUCLEAN;
}

int mfs_inode_read(struct mfs *fs, uint64_t ino, struct mfs_inode *di)
{
	struct mfs_buf *b;
	uint64_t blk;
	size_t off;
	int ret;

	if (ino == 0 || ino > fs->sb.nr_inodes)
		return -ENOENT;
	ino_location(fs, ino, &blk, &off);
	ret = mfs_meta_read_locked(fs, blk, MFS_T_INODES, &b);
	if (ret)
		return ret;
	memcpy(di, b->data + off, sizeof(*di));
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return inode_check(fs, ino, di);
}

int mfs_inode_write(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	struct mfs_buf *b;
	uint64_t blk;
	size_t off;
	int ret;

	ino_location(fs, ip->ino, &blk, &off);
	ret = mfs_meta_read_locked(fs, blk, MFS_T_INODES, &b);
	if (ret)
		return ret;
	memcpy(b->data + off, &ip->di, sizeof(ip->di));
	mfs_txn_dirty(txn, b);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	mfs_atime_clean(fs, ip); /* a lazy atime goes with it */
	return 0;
}

/* Clear slot @ino, keeping its generation (the next user's must differ). */
int mfs_inode_clear_slot(struct mfs *fs, struct mfs_txn *txn, uint64_t ino, uint64_t generation)
{
	struct mfs_buf *b;
	struct mfs_inode *di;
	uint64_t blk;
	size_t off;
	int ret;

	ino_location(fs, ino, &blk, &off);
	ret = mfs_meta_read_locked(fs, blk, MFS_T_INODES, &b);
	if (ret)
		return ret;
	di = (struct mfs_inode *)(b->data + off);
	memset(di, 0, sizeof(*di));
	di->generation = generation;
	mfs_txn_dirty(txn, b);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}
