/* SPDX-License-Identifier: MIT */
/*
 * Out-of-line xattr values, and the release of an inode's xattr storage:
 * see xattr_blocks.h and docs/FORMAT.md §7.5.
 *
 * A value of up to 65536 bytes takes up to 17 blocks.  They are allocated
 * and filled before the tree record that names them changes, so a failed
 * allocation or tree change leaves nothing behind; they join the
 * transaction only with the record (mfs_xval_finish), and the blocks of a
 * replaced or removed value are freed in the transaction that drops its
 * record.  A block is trusted only after mfs_meta_read verified it (both
 * copies, checksum, location) and it names its inode and piece size; the
 * value as a whole must match the reference's checksum, which catches a
 * stale block of an older value of the same inode.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "xattr_blocks.h"

#define REF_HDR ((unsigned)sizeof(struct mfs_xattr_ref))
#define PIECE   ((size_t)MFS_XATTR_BLOCK_BYTES)
#define BHDR    sizeof(struct mfs_meta_hdr)

static unsigned blocks_for(size_t size)
{
	return (unsigned)((size + PIECE - 1) / PIECE);
}

unsigned mfs_xref_len(size_t size)
{
	return REF_HDR + 8u * blocks_for(size);
}

uint64_t mfs_xref_block(const uint8_t *ref, unsigned i)
{
	uint64_t b;

	memcpy(&b, ref + REF_HDR + 8u * i, sizeof(b));
	return le64toh(b);
}

static int xref_corrupt(uint64_t ino, const char *why)
{
	fprintf(stderr, "mendfs: inode %llu: xattr value reference %s\n", (unsigned long long)ino,
	        why);
	return -EUCLEAN;
}

int mfs_xref_check(struct mfs *fs, uint64_t ino, const uint8_t *ref, size_t len, uint32_t *size,
                   unsigned *nr)
{
	uint64_t ms = fs->sb.meta_start, ml = fs->sb.meta_len;
	struct mfs_xattr_ref r;
	unsigned i;

	if (len < REF_HDR)
		return xref_corrupt(ino, "too short");
	memcpy(&r, ref, REF_HDR);
	r.size = le32toh(r.size);
	r.nr_blocks = le16toh(r.nr_blocks);
	if (r.size == 0 || r.size > MFS_XATTR_SIZE_MAX || r.nr_blocks != blocks_for(r.size) ||
	    len != mfs_xref_len(r.size))
		return xref_corrupt(ino, "has inconsistent sizes");
	for (i = 0; i < r.nr_blocks; i++) {
		uint64_t b = mfs_xref_block(ref, i);

		if (b < ms || b - ms >= ml)
			return xref_corrupt(ino, "names a block outside the meta zone");
	}
	*size = r.size;
	*nr = r.nr_blocks;
	return 0;
}

static void free_block(struct mfs *fs, struct mfs_txn *txn, struct mfs_buf *b)
{
	uint64_t blocknr = b->blocknr;

	mfs_buf_put(b);
	mfs_free_meta(fs, txn, blocknr);
	mfs_meta_forget(fs, blocknr);
}

int mfs_xval_prepare(struct mfs *fs, struct mfs_txn *txn, uint64_t ino, const void *value,
                     size_t size, uint8_t *ref, struct mfs_xval *xv)
{
	struct mfs_xattr_ref r = {.size = htole32((uint32_t)size),
	                          .nr_blocks = htole16((uint16_t)blocks_for(size)),
	                          .csum = htole64(XXH3_64bits_withSeed(value, size, fs->seed))};
	const uint8_t *src = value;
	int ret = 0;

	if (size == 0 || size > MFS_XATTR_SIZE_MAX)
		return -EINVAL;
	memcpy(ref, &r, REF_HDR);
	for (xv->nr = 0; xv->nr < blocks_for(size); xv->nr++) {
		size_t off = xv->nr * PIECE, n = size - off < PIECE ? size - off : PIECE;
		struct mfs_meta_hdr *hdr;
		struct mfs_buf *b;
		uint64_t blocknr, le;

		ret = mfs_alloc_meta(fs, txn, &blocknr);
		if (ret)
			break;
		ret = mfs_meta_new(fs, blocknr, MFS_T_XATTR_VALUE, ino, &b);
		if (ret) {
			mfs_free_meta(fs, txn, blocknr);
			break;
		}
		mfs_lock(&b->lock);
		hdr = (struct mfs_meta_hdr *)b->data;
		hdr->nr_items = htole32((uint32_t)n);
		memcpy(b->data + BHDR, src + off, n);
		mfs_unlock(&b->lock);
		xv->b[xv->nr] = b;
		le = htole64(blocknr);
		memcpy(ref + REF_HDR + 8u * xv->nr, &le, sizeof(le));
	}
	if (ret) {
		while (xv->nr)
			free_block(fs, txn, xv->b[--xv->nr]);
	}
	return ret;
}

void mfs_xval_finish(struct mfs *fs, struct mfs_txn *txn, struct mfs_xval *xv, bool keep)
{
	unsigned i;

	for (i = 0; i < xv->nr; i++) {
		struct mfs_buf *b = xv->b[i];

		if (!keep) {
			free_block(fs, txn, b);
			continue;
		}
		mfs_lock(&b->lock);
		mfs_txn_dirty(txn, b);
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
	}
	xv->nr = 0;
}

ssize_t mfs_xval_read(struct mfs *fs, uint64_t ino, const uint8_t *ref, size_t len, void *value)
{
	uint8_t *dst = value;
	struct mfs_xattr_ref r;
	uint32_t size;
	unsigned nr, i;
	int ret;

	ret = mfs_xref_check(fs, ino, ref, len, &size, &nr);
	if (ret)
		return ret;
	memcpy(&r, ref, REF_HDR);
	for (i = 0; i < nr; i++) {
		size_t off = i * PIECE, n = size - off < PIECE ? size - off : PIECE;
		const struct mfs_meta_hdr *hdr;
		uint64_t blocknr = mfs_xref_block(ref, i);
		struct mfs_buf *b;

		ret = mfs_meta_read_locked(fs, blocknr, MFS_T_XATTR_VALUE, &b);
		if (ret)
			return ret;
		hdr = (const struct mfs_meta_hdr *)b->data;
		if (le64toh(hdr->owner) != ino || le32toh(hdr->nr_items) != n) {
			fprintf(stderr,
			        "mendfs: xattr value block %llu: owner %llu, %u bytes; expected "
			        "inode %llu, %zu bytes\n",
			        (unsigned long long)blocknr,
			        (unsigned long long)le64toh(hdr->owner), le32toh(hdr->nr_items),
			        (unsigned long long)ino, n);
			ret = -EUCLEAN;
		} else {
			memcpy(dst + off, b->data + BHDR, n);
		}
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		if (ret)
			return ret;
	}
	if (XXH3_64bits_withSeed(value, size, fs->seed) != le64toh(r.csum)) {
		fprintf(stderr, "mendfs: inode %llu: xattr value of %u bytes fails its checksum\n",
		        (unsigned long long)ino, size);
		return -EUCLEAN;
	}
	return size;
}

int mfs_xval_free(struct mfs *fs, struct mfs_txn *txn, const uint8_t *ref, unsigned nr)
{
	int ret = 0;
	unsigned i;

	for (i = 0; i < nr; i++) {
		uint64_t blocknr = mfs_xref_block(ref, i);
		int r = mfs_free_meta(fs, txn, blocknr);

		mfs_meta_forget(fs, blocknr);
		if (r && !ret)
			ret = r;
	}
	return ret;
}

/* Every block of the out-of-line values of a tree, checked, in a growing array. */
struct blocks_arg {
	struct mfs *fs;
	uint64_t ino;
	uint64_t *v;
	size_t nr, cap;
};

static int blocks_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct blocks_arg *a = arg;
	const uint8_t *rec = val;
	uint32_t size;
	unsigned nr, i;
	int ret;

	(void)key;
	if (!tree_rec_ok(rec, len))
		return -EUCLEAN;
	if (!(rec_flags(rec) & MFS_XATTR_F_BLOCKS))
		return 0;
	ret = mfs_xref_check(a->fs, a->ino, rec + XHDR + rec_name_len(rec), rec_value_len(rec),
	                     &size, &nr);
	if (ret)
		return ret;
	if (a->nr + nr > a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		uint64_t *v;

		while (cap < a->nr + nr)
			cap *= 2;
		v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = cap;
	}
	for (i = 0; i < nr; i++)
		a->v[a->nr++] = mfs_xref_block(rec + XHDR + rec_name_len(rec), i);
	return 0;
}

int mfs_xattr_blocks(struct mfs *fs, struct mfs_ino *ip, uint64_t **blocks, size_t *nr)
{
	struct blocks_arg a = {.fs = fs, .ino = ip->ino};
	struct mfs_btree bt = xtree(ip);
	int ret = 0;

	if (bt.root)
		ret = mfs_bt_iterate(fs, &bt, 0, blocks_fn, &a);
	if (ret) {
		free(a.v);
		return ret;
	}
	*blocks = a.v;
	*nr = a.nr;
	return 0;
}

int mfs_xattr_release(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	struct mfs_btree bt = xtree(ip);
	uint64_t *blocks = NULL;
	size_t nr = 0, i;
	int ret;

	/* every reference checked before anything is freed: a corrupt tree frees nothing */
	ret = mfs_xattr_blocks(fs, ip, &blocks, &nr);
	if (ret)
		return ret;
	ret = mfs_bt_destroy(fs, txn, &bt);
	if (ret) {
		free(blocks);
		return ret;
	}
	xtree_store(ip, &bt);
	for (i = 0; i < nr; i++) {
		int r = mfs_free_meta(fs, txn, blocks[i]);

		mfs_meta_forget(fs, blocks[i]);
		if (r && !ret)
			ret = r;
	}
	free(blocks);
	if (ret)
		return ret;
	memset(ip->di.inline_xattr, 0, sizeof(ip->di.inline_xattr));
	ip->di.inline_xattr_len = 0;
	return 0;
}
