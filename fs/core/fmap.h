/* SPDX-License-Identifier: MIT */
/*
 * The block map of a regular file or symlink (fmap.c), and what the file
 * data files (read.c, write.c, file.c, fio.c) share: the size limits, the
 * inode fields they change (the on-disk copy is little-endian) and the
 * worst cases that bound a transaction.  Every function here expects the
 * caller to hold ip->lock (shared for lookups, exclusive for changes).
 */
#ifndef MENDFS_FS_FMAP_H
#define MENDFS_FS_FMAP_H

#include <endian.h>

#include "mfs_int.h"

#define BS              MFS_BLOCK_SIZE
#define MAX_FILE_SIZE   MFS_FILE_SIZE_MAX
#define MAX_FILE_BLOCKS (MAX_FILE_SIZE / BS)
#define CHUNK_BLOCKS    1024u /* blocks per write transaction */
#define CHUNK_SEGS      64u   /* mapping segments per write transaction */

/* --- inode fields ------------------------------------------------------------------ */

static inline uint64_t di_size(const struct mfs_ino *ip)
{
	return le64toh(ip->di.size);
}

static inline void di_set_size(struct mfs_ino *ip, uint64_t size)
{
	ip->di.size = htole64(size);
}

static inline void di_add_blocks(struct mfs_ino *ip, int64_t d)
{
	ip->di.blocks = htole64(le64toh(ip->di.blocks) + (uint64_t)d);
}

static inline void di_touch(struct mfs_ino *ip, bool mtime)
{
	int64_t t = (int64_t)htole64((uint64_t)mfs_now_ns());

	ip->di.ctime_ns = t;
	if (mtime)
		ip->di.mtime_ns = t;
}

/* Is the map an extent B+tree (else up to MFS_INLINE_EXTENTS extents in the inode)? */
static inline bool is_tree(const struct mfs_ino *ip)
{
	return le32toh(ip->di.iflags) & MFS_IFL_EXTENT_TREE;
}

/* --- worst cases (docs/design/core.md §3) ------------------------------------------------ */

/*
 * Worst case of metadata blocks one change of the extent map dirties: the
 * path from the root, a split at every level and a new root, or a merged
 * sibling at every level, and the meta bitmap block of an allocated or freed
 * node.
 */
static inline unsigned map_cost(const struct mfs_ino *ip)
{
	unsigned d = is_tree(ip) ? le16toh(ip->di.ext_depth) : 0;

	return 2 * (d + 3);
}

/* Worst case of one write or fallocate segment: two map changes, its data bitmap blocks. */
static inline unsigned seg_cost(const struct mfs_ino *ip)
{
	return 2 * map_cost(ip) + 2;
}

/* --- the map (fmap.c) ----------------------------------------------------------------- */

/* An extent in host order. */
struct mfs_fx {
	uint64_t lblk, pblk, len;
	uint32_t flags;
};

/*
 * A hole as mfs_fmap_lookup() found it: [lblk, lblk + len) unmapped, and its
 * neighbours, the extent before it (has_left) and the first after it
 * (has_right).  Good while the map does not change: the caller holds
 * ip->lock exclusively and changes nothing in between.
 */
struct mfs_fmap_hole {
	bool found;
	bool has_left, has_right;
	uint64_t lblk, len;
	struct mfs_fx left, right;
	struct mfs_bt_hint hint; /* a tree map's leaf around the hole (mfs.h) */
};

/*
 * mfs_bmap (mfs_ops.h) looks a block up; mfs_file_release_blocks (mfs_ops.h)
 * and mfs_file_free_all (mfs_int.h) free a whole inode's blocks.
 */

/*
 * Map the empty range [lblk, lblk + len) to @pblk (extent flags @flags),
 * merging with neighbours.  Returns 0 or -errno (-ENOSPC: no meta block).
 */
int mfs_fmap_add(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                 uint64_t len, uint64_t pblk, uint32_t flags);
/*
 * Unmap [lblk, end) without freeing the blocks (a write converting
 * unwritten blocks it has just written), splitting extents that straddle its
 * edges.  Returns 0 or -errno.
 */
int mfs_fmap_punch(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                   uint64_t end);
/*
 * Unmap and free [first, last) in bounded steps, each a handle of its own
 * that writes the inode back.  The caller holds no handle.  Returns 0 or -errno.
 */
int mfs_fmap_free(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last);
/*
 * Free data blocks [start, start + len) of a file in @txn (poisoned ones go
 * to the quarantine tree, its new root journaled).  Returns 0 or -errno.
 */
int mfs_fmap_free_data(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len);
/*
 * mfs_fmap_add() into a hole @h found (NULL or not found: mfs_fmap_add()):
 * the neighbours come from @h instead of two more walks of the map.
 */
int mfs_fmap_add_hole(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                      uint64_t len, uint64_t pblk, uint32_t flags, const struct mfs_fmap_hole *h);
/*
 * mfs_bmap(), and for a hole at @lblk its range and neighbours in *@h (NULL:
 * not wanted; h->found false when @lblk is mapped).
 */
int mfs_fmap_lookup(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, uint64_t *pblk,
                    uint64_t *count, bool *unwritten, struct mfs_fmap_hole *h);
/* Where to allocate file block @lblk: after the block mapping @lblk - 1, else spread by inode. */
uint64_t mfs_fmap_goal(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk);
/* mfs_fmap_goal() from the hole @h found, without a walk (@lblk outside it: a walk). */
uint64_t mfs_fmap_hole_goal(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk,
                            const struct mfs_fmap_hole *h);
/* Does the map hold a block at or past @lblk?  Returns 1, 0 or -errno. */
int mfs_fmap_maps_from(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk);

#endif /* MENDFS_FS_FMAP_H */
