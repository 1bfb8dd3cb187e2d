/* SPDX-License-Identifier: MIT */
/*
 * The device layout (docs/FORMAT.md §2): where mkfs.mendfs puts the areas,
 * and where `mendctl grow` puts them when the device grows.  One copy of the
 * arithmetic, shared by mkfs, grow and their tests: the twins and the backup
 * superblock always sit at the end of the device, the data zone runs from
 * data_start up to the journal twin.
 */
#ifndef MENDFS_MFS_LAYOUT_H
#define MENDFS_MFS_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#define MFS_LAYOUT_MIN_BYTES       (16ull << 20) /* smallest device mkfs accepts */
#define MFS_LAYOUT_JOURNAL_MIN     ((1ull << 20) / 4096)
#define MFS_LAYOUT_JOURNAL_MAX     ((128ull << 20) / 4096)
#define MFS_LAYOUT_BYTES_PER_INODE (16ull << 10)
#define MFS_LAYOUT_MIN_INODES      16ull
#define MFS_LAYOUT_MIN_DATA        256ull /* data zone blocks at the least */

struct mfs_layout {
	uint64_t nr_blocks;
	bool dup; /* metadata_dup: the journal and meta zone have twins */
	uint64_t journal_start, journal_len, journal_twin;
	uint64_t meta_start, meta_len, meta_twin;
	uint64_t data_start, data_len;
	uint64_t meta_bitmap_start, meta_bitmap_blocks;
	uint64_t inode_bitmap_start, inode_bitmap_blocks;
	uint64_t data_bitmap_start, data_bitmap_blocks;
	uint64_t inode_table_start, inode_table_blocks;
	uint64_t nr_inodes;
	uint64_t csum_table_start, csum_table_blocks; /* data_csum only, else 0 */
	uint64_t meta_fixed; /* bitmaps, inode table, csum table: blocks used in the meta zone */
};

/* Bitmap blocks for @items bits (FORMAT.md §5). */
uint64_t mfs_bitmap_blocks(uint64_t items);

/*
 * mkfs's layout of a device of @nr_blocks (FORMAT.md §2.1), with metadata_dup;
 * @inodes and @journal_len 0 mean the defaults.  With @data_csum, the data
 * checksum table (feature data_csum, FORMAT.md §15): the meta zone has room
 * for it, and it follows the inode table (csum_table_start,
 * csum_table_blocks, counted in meta_fixed).  -EFBIG when the inodes do not
 * fit.
 */
int mfs_layout_compute(uint64_t nr_blocks, uint64_t inodes, uint64_t journal_len, bool data_csum,
                       struct mfs_layout *l);

/*
 * The tail of the layout for a device of @nr_blocks, given l->dup,
 * journal_len, meta_len and data_start: the journal twin, the meta twin and
 * the backup superblock at the end, the data zone up to them (data_len and
 * data_bitmap_blocks).  mkfs calls it for a new filesystem and grow for a
 * grown one.  -EFBIG when fewer than MFS_LAYOUT_MIN_DATA data blocks remain.
 */
int mfs_layout_place_tail(struct mfs_layout *l, uint64_t nr_blocks);

/*
 * Initialise bitmap block @k (of a bitmap of @items bits) for primary
 * location @blocknr: the header (type 3, nr_items the valid bits), every bit
 * clear but the padding past the last valid one (set).  The caller sets the
 * used bits and seals it.
 */
void mfs_bitmap_block_init(void *block, uint64_t blocknr, uint64_t k, uint64_t items);
/* Set or test bit @i (0 .. MFS_BITMAP_BITS - 1) of a bitmap block. */
void mfs_bitmap_block_set(void *block, uint64_t i);
bool mfs_bitmap_block_test(const void *block, uint64_t i);

#endif
