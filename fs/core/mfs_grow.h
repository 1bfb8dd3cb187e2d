/* SPDX-License-Identifier: MIT */
/*
 * Offline growth of a filesystem to its grown device (`mendctl grow`,
 * docs/FORMAT.md §2.3).  Calls the block engine, the superblock code and
 * the layout arithmetic (mfs_layout.h) only: the filesystem is not mounted.
 */
#ifndef MENDFS_MFS_GROW_H
#define MENDFS_MFS_GROW_H

#include <stddef.h>
#include <stdint.h>

struct blk_dev;

struct mfs_grow_info {
	uint64_t old_blocks, new_blocks;     /* filesystem size before and after */
	uint64_t old_data_len, new_data_len; /* data zone blocks */
	uint64_t free_blocks;                /* free data blocks after */
	uint64_t meta_bitmap_start, data_bitmap_start, data_bitmap_blocks; /* where they went */
};

/*
 * Grow the filesystem on @dev (opened for writing, with the daemon's lock
 * held: not mounted) to the device's whole size.  A filesystem not
 * unmounted cleanly has its journal replayed first (as a mount would) and
 * keeps its state bits.  Returns 0, or with @err
 * saying why and nothing written:
 *   -EEXIST  the filesystem already fills the device (it did not grow);
 *   -EFBIG   the device is smaller than the filesystem (shrinking is not
 *            supported);
 *   -ENOSPC  the device grew too little for the twins to move past the old
 *            end, or the metadata zone has no room for the new bitmaps;
 *   -EINVAL  no valid superblock, or a layout whose journal or meta zone
 *            lies after the data zone (mkfs never makes one);
 *   -EROFS   features this version cannot write;
 *   -EIO     poison under a new area, or an I/O error (then some new areas
 *            may be written, but the filesystem is still the old one);
 *   -EUCLEAN a metadata block bad in both copies (run fsck.mendfs);
 *   other -errno (superblock unreadable, out of memory).
 * Crash safety: everything is written where the old filesystem does not
 * look, flushed, then the superblock is committed (backup at the new end,
 * flush, primary, flush): any crash leaves the old or the new filesystem.
 */
int mfs_grow(struct blk_dev *dev, struct mfs_grow_info *info, char *err, size_t errlen);

#endif
