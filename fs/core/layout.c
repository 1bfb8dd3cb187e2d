/* SPDX-License-Identifier: MIT */
/*
 * The device layout arithmetic (mfs_layout.h, docs/FORMAT.md §2.1): mkfs's
 * choice of area sizes, and the tail (twins, backup superblock, data zone
 * length) that mkfs and `mendctl grow` both place with the same function.
 * Calls nothing.
 */
#include <errno.h>
#include <string.h>

#include "mendfs/format.h"
#include "mfs_layout.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

uint64_t mfs_bitmap_blocks(uint64_t items)
{
	return div_up(items, MFS_BITMAP_BITS);
}

int mfs_layout_place_tail(struct mfs_layout *l, uint64_t n)
{
	uint64_t twins = l->dup ? l->journal_len + l->meta_len : 0;

	/* [data_start, +MIN_DATA) + the twins + the backup superblock */
	if (l->data_start + MFS_LAYOUT_MIN_DATA + twins + 1 > n)
		return -EFBIG;
	l->nr_blocks = n;
	l->data_len = n - 1 - twins - l->data_start;
	l->journal_twin = l->dup ? l->data_start + l->data_len : 0;
	l->meta_twin = l->dup ? l->journal_twin + l->journal_len : 0;
	l->data_bitmap_blocks = mfs_bitmap_blocks(l->data_len);
	return 0;
}

int mfs_layout_compute(uint64_t nr_blocks, uint64_t inodes, uint64_t journal_len, bool data_csum,
                       struct mfs_layout *l)
{
	uint64_t n = nr_blocks, want_meta, tree_room, bound;
	int ret;

	memset(l, 0, sizeof(*l));
	l->dup = true;
	l->journal_len = n / 64;
	if (l->journal_len < MFS_LAYOUT_JOURNAL_MIN)
		l->journal_len = MFS_LAYOUT_JOURNAL_MIN;
	if (l->journal_len > MFS_LAYOUT_JOURNAL_MAX)
		l->journal_len = MFS_LAYOUT_JOURNAL_MAX;
	if (journal_len)
		l->journal_len = journal_len;

	if (!inodes)
		inodes = n * MFS_BLOCK_SIZE / MFS_LAYOUT_BYTES_PER_INODE;
	if (inodes < MFS_LAYOUT_MIN_INODES)
		inodes = MFS_LAYOUT_MIN_INODES;
	if (inodes > n * MFS_INODES_PER_BLOCK)
		return -EFBIG;
	l->inode_table_blocks = div_up(inodes, MFS_INODES_PER_BLOCK);
	l->nr_inodes = l->inode_table_blocks * MFS_INODES_PER_BLOCK;
	l->inode_bitmap_blocks = mfs_bitmap_blocks(l->nr_inodes);

	/* Bitmaps of the meta and data zones: bounded by one bit per device block. */
	bound = mfs_bitmap_blocks(n);
	tree_room = div_up(l->nr_inodes, 16) + 64;
	want_meta = l->inode_table_blocks + l->inode_bitmap_blocks + 2 * bound + tree_room;
	if (data_csum) /* the table: bounded by one entry per device block */
		want_meta += div_up(n, MFS_CSUM_BLOCKS_PER_TBLOCK);
	l->meta_len = n / 16 > want_meta ? n / 16 : want_meta;

	l->journal_start = 1;
	l->meta_start = l->journal_start + l->journal_len;
	l->data_start = l->meta_start + l->meta_len;
	ret = mfs_layout_place_tail(l, n);
	if (ret)
		return ret;

	l->meta_bitmap_blocks = mfs_bitmap_blocks(l->meta_len);
	l->meta_bitmap_start = l->meta_start;
	l->inode_bitmap_start = l->meta_bitmap_start + l->meta_bitmap_blocks;
	l->data_bitmap_start = l->inode_bitmap_start + l->inode_bitmap_blocks;
	l->inode_table_start = l->data_bitmap_start + l->data_bitmap_blocks;
	l->meta_fixed = l->meta_bitmap_blocks + l->inode_bitmap_blocks + l->data_bitmap_blocks +
	                l->inode_table_blocks;
	if (data_csum) {
		l->csum_table_start = l->inode_table_start + l->inode_table_blocks;
		l->csum_table_blocks = div_up(l->data_len, MFS_CSUM_BLOCKS_PER_TBLOCK);
		l->meta_fixed += l->csum_table_blocks;
	}
	return 0;
}

void mfs_bitmap_block_init(void *block, uint64_t blocknr, uint64_t k, uint64_t items)
{
	struct mfs_meta_hdr *h = block;
	uint64_t first = k * MFS_BITMAP_BITS;
	uint64_t valid = items - first < MFS_BITMAP_BITS ? items - first : MFS_BITMAP_BITS;

	memset(block, 0, MFS_BLOCK_SIZE);
	h->magic = MFS_META_MAGIC;
	h->type = MFS_T_BITMAP;
	h->blocknr = blocknr;
	h->nr_items = (uint32_t)valid;
	for (uint64_t i = valid; i < MFS_BITMAP_BITS; i++)
		mfs_bitmap_block_set(block, i);
}

void mfs_bitmap_block_set(void *block, uint64_t i)
{
	((uint8_t *)block)[sizeof(struct mfs_meta_hdr) + i / 8] |= (uint8_t)(1u << (i % 8));
}

bool mfs_bitmap_block_test(const void *block, uint64_t i)
{
	return ((const uint8_t *)block)[sizeof(struct mfs_meta_hdr) + i / 8] & (1u << (i % 8));
}
