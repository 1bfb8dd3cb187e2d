/* SPDX-License-Identifier: MIT */
/*
 * Out-of-line xattr values (docs/FORMAT.md §7.5, feature xattr_blocks): a
 * value too large for a tree leaf is cut into pieces of MFS_XATTR_BLOCK_BYTES
 * stored in metadata blocks of type MFS_T_XATTR_VALUE (journaled,
 * checksummed, twinned like every metadata block), and the xattr's tree
 * record holds a struct mfs_xattr_ref naming them, with a checksum of the
 * whole value.  Used by xattr.c only; the caller holds the inode's lock.
 */
#ifndef MENDFS_FS_XATTR_BLOCKS_H
#define MENDFS_FS_XATTR_BLOCKS_H

#include "mfs.h"

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

#endif /* MENDFS_FS_XATTR_BLOCKS_H */
