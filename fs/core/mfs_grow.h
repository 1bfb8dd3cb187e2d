/* SPDX-License-Identifier: MIT */
/*
 * Growth of a filesystem to its grown device (`mendctl grow`,
 * docs/FORMAT.md §2.3), offline (the block engine, the superblock code and
 * the layout arithmetic, mfs_layout.h) or online (also the journal's hold
 * and the allocator's mfs_alloc_grow).
 */
#ifndef MENDFS_MFS_GROW_H
#define MENDFS_MFS_GROW_H

#include <stddef.h>
#include <stdint.h>

struct blk_dev;
struct mfs;

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

/*
 * Online growth of the mounted @fs to its grown device: the engine re-reads
 * the device's size (blk_dev_resize), the journal is held (no transaction
 * runs, writers wait: mfs_journal_hold), the same writes as mfs_grow are
 * made in the same order, and the allocator takes the new layout
 * (mfs_alloc_grow) before the hold ends.  Returns 0, or with @err saying why:
 *   -EROFS       mounted read-only (or read-only after an error);
 *   -EEXIST      the device did not grow;
 *   -EOPNOTSUPP  the device cannot change its size while open (devdax,
 *                a pmem image with no room reserved): grow it unmounted;
 *   -EFBIG       the device grew past what its mapping can follow, or shrank;
 *   -ENOSPC, -EINVAL, -EIO, -EUCLEAN as mfs_grow;
 *   -EBUSY       another growth runs, or transactions kept coming.
 * A failure after the superblock commit (out of memory in the allocator)
 * leaves the grown filesystem on the device and this mount read-only.
 * MENDFS_DEBUG_GROW_EXIT_AFTER=N in the environment ends the process after
 * the Nth write of a growth (either kind), for crash tests.
 */
int mfs_grow_online(struct mfs *fs, struct mfs_grow_info *info, char *err, size_t errlen);

#endif
