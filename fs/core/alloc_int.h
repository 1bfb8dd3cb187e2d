/* SPDX-License-Identifier: MIT */
/*
 * Private to the allocator (alloc*.c; the overview is at the top of
 * alloc.c): its in-memory state and the functions its files share.  Its
 * files, lowest first, each calling only those before it:
 *
 *   alloc_extents.c     the free extent index (two treaps); calls nothing of mendfs
 *   alloc_bitmap.c      on-disk bitmaps, free counters, poison lookup; the meta
 *                       zone and inode allocators
 *   alloc_data.c        data groups and the data allocator; frees pending until
 *                       their commit (the journal's commit hooks)
 *   alloc_quarantine.c  freeing data blocks: clean ones to the bitmap, poisoned
 *                       ones to the quarantine tree; releasing them
 *   alloc.c             setup and teardown
 */
#ifndef MENDFS_FS_ALLOC_INT_H
#define MENDFS_FS_ALLOC_INT_H

#include <endian.h>

#include "mfs.h"

#define BM_WORDS_PER_BLOCK (MFS_BITMAP_BITS / 64)
_Static_assert(MFS_BITMAP_BITS % 64 == 0, "bitmap blocks hold whole 64-bit words");

/* A free data extent: a node of the by-start treap and of one size-class list. */
struct mfs_fext {
	uint64_t start, len;
	uint64_t smax;                  /* largest len in this node's by-start subtree */
	struct mfs_fext *sl, *sr;       /* by start */
	struct mfs_fext *zprev, *znext; /* its size class's list (alloc_extents.c) */
	uint32_t prio;
};

/*
 * An in-memory copy of a bitmap (meta zone or inodes); bit set = unavailable.
 * Like the data groups, its blocks are copied in when first needed
 * (bm_block_load) after a clean unmount; map words of a block not loaded are
 * meaningless.
 */
struct mfs_bmap {
	uint64_t *map;
	uint64_t nbits;
	uint64_t hint;            /* next bit to try */
	uint64_t disk;            /* first on-disk bitmap block */
	uint64_t blocks;          /* on-disk bitmap blocks */
	uint8_t *loaded;          /* per bitmap block: G_UNLOADED, G_LOADED, G_BROKEN */
	uint64_t fixed;           /* bits [0, fixed) are never available (meta: the fixed part) */
	uint64_t zone, zone_twin; /* poison is looked up here (0: not at all) */
};

/* Index nodes come in slabs of this many: no malloc per split extent. */
#define MFS_FX_SLAB 126u
/*
 * Size classes of free extents: one per length 1 .. MFS_FX_EXACT, then one
 * per power of two above (65-127, 128-255, ... 2^63-).
 */
#define MFS_FX_EXACT   64u
#define MFS_FX_CLASSES (MFS_FX_EXACT + 58u)

struct mfs_fext_slab {
	struct mfs_fext_slab *next;
	struct mfs_fext node[MFS_FX_SLAB];
};

struct mfs_alloc {
	/* protected by fs->alloc_lock: the free extent index (alloc_extents.c) */
	struct mfs_fext *by_start;                  /* treap by start */
	struct mfs_fext *zhead[MFS_FX_CLASSES];     /* size-class lists */
	uint64_t zmask[(MFS_FX_CLASSES + 63) / 64]; /* the classes that are not empty */
	uint64_t nr_ext;
	uint32_t rnd;
	struct mfs_fext *spare;      /* alloc_lock: unused index nodes, linked by sl */
	struct mfs_fext_slab *slabs; /* alloc_lock: every node's slab, freed by mfs_fx_destroy */
	/*
	 * Data groups: group g is data bitmap block g (MFS_BITMAP_BITS blocks
	 * from data_start + g * MFS_BITMAP_BITS).  Only loaded groups are in the
	 * free extent index; the others are read on demand (group_load).  A
	 * group is loaded once and stays loaded.  Protected by fs->alloc_lock.
	 */
	uint8_t *gloaded;
	uint64_t ngroups, nloaded;
	uint64_t gcursor;                   /* every group below it is loaded */
	struct mfs_pending_batch *inflight; /* closed transactions' frees, commit running */
	struct mfs_bmap meta, ino;
	pthread_mutex_t qlock; /* the quarantine tree and fs->sb.quarantine_root/depth */
	/*
	 * Data blocks freed by the running transaction.  They are not handed
	 * out again until that transaction's commit is durable: ordered mode
	 * writes new data in place before its commit, so a block reused early
	 * could receive another file's data while the committed state (after a
	 * crash) still maps it to the old file.  Protected by fs->alloc_lock.
	 */
	struct mfs_pending_free *pend;
	size_t npend, cap_pend;
};

struct mfs_pending_free {
	uint64_t start, len;
};

/* The frees of a closed transaction, waiting for its commit (the commit hooks). */
struct mfs_pending_batch {
	struct mfs_pending_free *v;
	size_t n;
	struct mfs_pending_batch *next; /* on mfs_alloc.inflight */
};

/* A range of blocks. */
struct mfs_brange {
	uint64_t start, len;
};

/* State of a data group or of a meta/inode bitmap block in memory. */
#define G_UNLOADED 0
#define G_LOADED   1
#define G_BROKEN   2 /* its bitmap block could not be read: nothing allocated from it */

static inline struct mfs_alloc *A(struct mfs *fs)
{
	return fs->alloc;
}

static inline uint64_t sb64(uint64_t v)
{
	return le64toh(v);
}

/* --- the free extent index (alloc_extents.c; fs->alloc_lock held) ---------------------- */

/* The extent with the greatest start <= @key in by-start tree @t, or NULL. */
struct mfs_fext *mfs_fx_floor(struct mfs_fext *t, uint64_t key);
/* The first extent (by start) with start >= @key and len >= @want, or NULL. */
struct mfs_fext *mfs_fx_first_fit(struct mfs_fext *t, uint64_t key, uint64_t want);
/*
 * An extent with len >= @want: up to MFS_FX_EXACT blocks the shortest there
 * is (the lowest start among the first few of that length), above it the
 * shortest of the first few of the smallest size class that holds one; NULL
 * when none is that long.
 */
struct mfs_fext *mfs_fx_best_fit(struct mfs_alloc *a, uint64_t want);
/* The size class of a free extent of @len blocks (>= 1). */
unsigned mfs_fx_class(uint64_t len);
/* The largest extent (lowest start among equals), or NULL when there is none. */
struct mfs_fext *mfs_fx_largest(struct mfs_alloc *a);
/* Does [start, start + len) overlap a free extent? */
bool mfs_fx_overlaps(struct mfs_alloc *a, uint64_t start, uint64_t len);
/* Add a free range, merging with its neighbours.  0 or -ENOMEM. */
int mfs_fx_add(struct mfs_alloc *a, uint64_t start, uint64_t len);
/* Take [start, start + n) out of free extent @f (which holds it).  0 or -ENOMEM. */
int mfs_fx_take(struct mfs_alloc *a, struct mfs_fext *f, uint64_t start, uint64_t n);
/* Remove [start, start + len) wherever it is free; *carved += blocks removed. */
int mfs_fx_carve(struct mfs_alloc *a, uint64_t start, uint64_t len, uint64_t *carved);
/* Free the whole index, every node's slab (unmount). */
void mfs_fx_destroy(struct mfs_alloc *a);

/* --- bitmaps, counters, poison (alloc_bitmap.c) ----------------------------------------- */

/*
 * Set or clear bits [first, first + n) of the on-disk bitmap at @disk in
 * @txn; with @pend_base (data frees) the cleared ranges become pending frees
 * of the running transaction.  0, -EUCLEAN (a bit already so) or -errno.
 */
int mfs_bm_disk_update(struct mfs *fs, struct mfs_txn *txn, uint64_t disk, uint64_t first,
                       uint64_t n, bool set, uint64_t pend_base);
/* Clear bits of an on-disk bitmap, read at mount (after a crash).  0 or -errno. */
int mfs_bm_recount(struct mfs *fs, uint64_t disk, uint64_t blocks, uint64_t nbits, uint64_t *nfree);
/* Set up an in-memory bitmap (loaded lazily); with @nfree, recount it.  0 or -errno. */
int mfs_bm_setup(struct mfs *fs, struct mfs_bmap *m, uint64_t disk, uint64_t blocks, uint64_t nbits,
                 uint64_t fixed, uint64_t zone, uint64_t zone_twin, uint64_t *nfree);
/* alloc_lock held: change free counter @le of fs->sb by @d, kept within its zone. */
void mfs_alloc_counter_add(struct mfs *fs, uint64_t *le, int64_t d);
/* The poisoned blocks of [start, start + len) as merged ranges (malloc'ed).  0 or -ENOMEM. */
int mfs_alloc_poisoned(struct mfs *fs, uint64_t start, uint64_t len, struct mfs_brange **out,
                       unsigned *nr);

/* --- data blocks (alloc_data.c) -------------------------------------------------------- */

/* At mount: the data groups (none loaded); with @recount, the free counter recounted. */
int mfs_alloc_load_data(struct mfs *fs, struct mfs_alloc *a, bool recount);
/* Free clean data blocks in @txn: bitmap cleared, pending until the commit. */
int mfs_alloc_free_clean(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len);
/* Registered with the journal: pending frees become free once their commit is durable. */
extern const struct mfs_commit_hooks mfs_alloc_commit_hooks;

#endif /* MENDFS_FS_ALLOC_INT_H */
