/* SPDX-License-Identifier: MIT */
/*
 * Out-of-line xattr values (docs/FORMAT.md §7.5, feature xattr_blocks): a
 * value too large for a tree leaf is cut into pieces of MFS_XATTR_BLOCK_BYTES
 * stored in metadata blocks of type MFS_T_XATTR_VALUE (journaled,
 * checksummed, twinned like every metadata block), and the xattr's tree
 * record holds a struct mfs_xattr_ref naming them, with a checksum of the
 * whole value.  Also the framing of xattr records that both xattr.c and
 * this file read, and the release of an inode's whole xattr storage, which
 * the inode cache calls when it frees an inode: below the inode cache, this
 * calls only the allocator, the metadata cache, the journal and the B+tree.
 * The caller holds the inode's lock.
 */
#ifndef MENDFS_FS_XATTR_BLOCKS_H
#define MENDFS_FS_XATTR_BLOCKS_H

#include <endian.h>
#include <string.h>

#include "mfs_int.h"

/* --- xattr records (struct mfs_xattr, FORMAT.md §7.4) ------------------------------- */

#define XHDR ((unsigned)sizeof(struct mfs_xattr))

/* Fields of a struct mfs_xattr record at any alignment. */
static inline unsigned rec_name_len(const uint8_t *rec)
{
	return rec[0];
}

static inline unsigned rec_value_len(const uint8_t *rec)
{
	uint16_t v;

	memcpy(&v, rec + 2, sizeof(v));
	return le16toh(v);
}

static inline unsigned rec_flags(const uint8_t *rec)
{
	return rec[1];
}

/* The inode's xattr B+tree (MFS_TREE_XATTR); xtree_store() writes its root back. */
static inline struct mfs_btree xtree(const struct mfs_ino *ip)
{
	struct mfs_btree bt = {.root = le64toh(ip->di.xattr_root),
	                       .depth = le16toh(ip->di.xattr_depth),
	                       .kind = MFS_TREE_XATTR,
	                       .owner = ip->ino};
	return bt;
}

static inline void xtree_store(struct mfs_ino *ip, const struct mfs_btree *bt)
{
	ip->di.xattr_root = htole64(bt->root);
	ip->di.xattr_depth = htole16(bt->depth);
}

/* A tree record's framing: lengths add up, known flags, a reference long enough. */
static inline bool tree_rec_ok(const uint8_t *rec, uint16_t len)
{
	if (len < XHDR || rec_name_len(rec) == 0 ||
	    XHDR + rec_name_len(rec) + rec_value_len(rec) != len)
		return false;
	if (rec_flags(rec) & ~MFS_XATTR_F_BLOCKS)
		return false;
	return !(rec_flags(rec) & MFS_XATTR_F_BLOCKS) ||
	       rec_value_len(rec) >= sizeof(struct mfs_xattr_ref);
}

/* --- out-of-line values ------------------------------------------------------------- */

/* Bytes of the reference to a value of @size bytes (in a tree record). */
unsigned mfs_xref_len(size_t size);

/*
 * Check reference @ref of @len bytes (a tree record's value, any alignment):
 * sizes agree, blocks inside the meta zone.  Fills *size and *nr.  Returns 0
 * or -EUCLEAN (logged, naming inode @ino).
 */
int mfs_xref_check(struct mfs *fs, uint64_t ino, const uint8_t *ref, size_t len, uint32_t *size,
                   unsigned *nr);
/* Block @i of a checked reference. */
uint64_t mfs_xref_block(const uint8_t *ref, unsigned i);

/*
 * A value being written: its blocks allocated and filled, not yet part of a
 * transaction.  mfs_xval_finish() either adds them to @txn (the tree record
 * naming them went in) or frees them (it did not).
 */
struct mfs_xval {
	unsigned nr;
	struct mfs_buf *b[MFS_XATTR_REF_BLOCKS];
};

/*
 * Allocate and fill the blocks of @value (@size bytes) for inode @ino and
 * write its reference into @ref (mfs_xref_len(size) bytes).  Returns 0
 * (finish with mfs_xval_finish) or -errno, nothing allocated (-ENOSPC: the
 * meta zone is full).
 */
int mfs_xval_prepare(struct mfs *fs, struct mfs_txn *txn, uint64_t ino, const void *value,
                     size_t size, uint8_t *ref, struct mfs_xval *xv);
void mfs_xval_finish(struct mfs *fs, struct mfs_txn *txn, struct mfs_xval *xv, bool keep);

/*
 * Read the value named by @ref (@len bytes) of inode @ino into @value (at
 * least the value's size): every block verified (type, owner, piece size)
 * and the whole value against the reference's checksum.  Returns the size,
 * -EUCLEAN (corrupt) or -EIO (a block lost in both copies).
 */
ssize_t mfs_xval_read(struct mfs *fs, uint64_t ino, const uint8_t *ref, size_t len, void *value);

/* Free the blocks of a checked reference in @txn.  Returns 0 or the first error. */
int mfs_xval_free(struct mfs *fs, struct mfs_txn *txn, const uint8_t *ref, unsigned nr);

/* --- an inode's whole xattr storage --------------------------------------------------- */

/*
 * mfs_xattr_release (mfs_ops.h: the xattr tree, its out-of-line values and
 * the inline area of @ip, in @txn) and mfs_xattr_blocks (mfs_int.h) are
 * defined in xattr_blocks.c.
 */

#endif /* MENDFS_FS_XATTR_BLOCKS_H */
