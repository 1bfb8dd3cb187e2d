/* SPDX-License-Identifier: MIT */
/*
 * Data blocks: the data groups (group g is data bitmap block g, read into the
 * free extent index when allocation first needs it), mfs_alloc_data, and the
 * frees that wait for their transaction's commit (pending, then a batch of
 * the commit under way: the journal's commit hooks, registered by
 * mfs_alloc_init).  It calls the free extent index (alloc_extents.c), the
 * bitmaps (alloc_bitmap.c) and the buffer cache.  Locking: alloc.c.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"

/* --- data groups (fs->alloc_lock held unless said otherwise) ---------------------------- */

/* While no extent fits, an allocation loads at most this many groups before taking less. */
#define GROUP_LOADS_PER_ALLOC 8

static uint64_t group_of(struct mfs *fs, uint64_t blk)
{
	return (blk - sb64(fs->sb.data_start)) / MFS_BITMAP_BITS;
}

/* Add [start, start + len) to the index where its groups are loaded. */
static int fx_add_loaded(struct mfs *fs, struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	uint64_t data_start = sb64(fs->sb.data_start), end = start + len;

	while (start < end) {
		uint64_t g = group_of(fs, start);
		uint64_t gend = data_start + (g + 1) * MFS_BITMAP_BITS;
		uint64_t e = gend < end ? gend : end;

		if (a->gloaded[g] == G_LOADED) {
			int ret = mfs_fx_add(a, start, e - start);

			if (ret)
				return ret;
		}
		start = e;
	}
	return 0;
}

/* Carve the part of [start, start + len) inside [lo, hi) out of the index. */
static int fx_carve_in(struct mfs_alloc *a, uint64_t start, uint64_t len, uint64_t lo, uint64_t hi)
{
	uint64_t s = start > lo ? start : lo, e = start + len < hi ? start + len : hi, carved = 0;

	return s < e ? mfs_fx_carve(a, s, e - s, &carved) : 0;
}

/*
 * Load data group @g into the free extent index, once; called with no lock
 * held.  The bitmap block is read through the buffer cache, so a block the
 * running or a committing transaction changed is seen as changed (dirty
 * buffers stay cached until checkpointed).  The bits are scanned under the
 * block's content lock and alloc_lock together: allocation never takes from
 * an unloaded group, and a free clears its bits and becomes pending under
 * the same content lock (mfs_bm_disk_update), so the clear bits seen here are
 * either committed frees or pending ones, which are carved out again (they
 * return to the index at their commit).  Poisoned blocks are carved out
 * too.  *nfree (may be NULL) gets the group's clear bits if this call
 * loaded it, else 0.
 */
static int group_load(struct mfs *fs, uint64_t g, uint64_t *nfree)
{
	struct mfs_alloc *a = A(fs);
	uint64_t data_start = sb64(fs->sb.data_start), data_len = sb64(fs->sb.data_len);
	uint64_t lo = g * MFS_BITMAP_BITS; /* zone-relative */
	uint64_t hi = lo + MFS_BITMAP_BITS < data_len ? lo + MFS_BITMAP_BITS : data_len;
	uint64_t run = UINT64_MAX, free_bits = 0;
	struct mfs_brange *pz = NULL;
	const uint64_t *src;
	struct mfs_buf *b;
	unsigned npz = 0;
	int ret;

	if (nfree)
		*nfree = 0;
	ret = mfs_alloc_poisoned(fs, data_start + lo, hi - lo, &pz, &npz);
	if (ret)
		return ret;
	ret = mfs_meta_read(fs, sb64(fs->sb.data_bitmap_start) + g, MFS_T_BITMAP, &b);
	if (ret) {
		free(pz);
		/* as in bm_block_load: not an ENOSPC later */
		if (ret == -ENOMEM || mfs_fs_errno(fs))
			return ret;
		/* unreadable: nothing is allocated from it (frees into it fail the same way) */
		mfs_lock(&fs->alloc_lock);
		if (a->gloaded[g] == G_UNLOADED) {
			fprintf(stderr,
			        "mendfs: data bitmap block %llu: %s: blocks %llu-%llu are not "
			        "allocated from\n",
			        (unsigned long long)(sb64(fs->sb.data_bitmap_start) + g),
			        strerror(-ret), (unsigned long long)(data_start + lo),
			        (unsigned long long)(data_start + hi - 1));
			a->gloaded[g] = G_BROKEN;
			a->nloaded++;
		}
		mfs_unlock(&fs->alloc_lock);
		return 0;
	}
	mfs_lock(&b->lock);
	mfs_lock(&fs->alloc_lock);
	if (a->gloaded[g] != G_UNLOADED)
		goto out;
	src = (const uint64_t *)(b->data + sizeof(struct mfs_meta_hdr));
	for (uint64_t w = 0; w < BM_WORDS_PER_BLOCK && ret == 0; w++) {
		uint64_t base = lo + w * 64, v = le64toh(src[w]);

		if (base >= hi)
			break;
		if (base + 64 > hi)
			v |= ~0ull << (hi - base);
		if (v == ~0ull || v == 0) { /* the common cases, a word at a time */
			if (v == 0 && run == UINT64_MAX)
				run = base;
			if (v == ~0ull && run != UINT64_MAX) {
				ret = mfs_fx_add(a, data_start + run, base - run);
				free_bits += base - run;
				run = UINT64_MAX;
			}
			continue;
		}
		for (unsigned i = 0; i < 64 && ret == 0; i++) {
			bool used = v >> i & 1;

			if (!used && run == UINT64_MAX) {
				run = base + i;
			} else if (used && run != UINT64_MAX) {
				ret = mfs_fx_add(a, data_start + run, base + i - run);
				free_bits += base + i - run;
				run = UINT64_MAX;
			}
		}
	}
	if (!ret && run != UINT64_MAX) {
		ret = mfs_fx_add(a, data_start + run, hi - run);
		free_bits += hi - run;
	}
	/* Frees not yet committed, and poisoned free blocks, are not handed out. */
	for (size_t i = 0; !ret && i < a->npend; i++)
		ret = fx_carve_in(a, a->pend[i].start, a->pend[i].len, data_start + lo,
		                  data_start + hi);
	for (struct mfs_pending_batch *pb = a->inflight; pb; pb = pb->next)
		for (size_t i = 0; !ret && i < pb->n; i++)
			ret = fx_carve_in(a, pb->v[i].start, pb->v[i].len, data_start + lo,
			                  data_start + hi);
	for (unsigned i = 0; !ret && i < npz; i++)
		ret = fx_carve_in(a, pz[i].start, pz[i].len, data_start + lo, data_start + hi);
	if (ret) {
		/* no memory: take the group out again so that nothing half-loaded is used */
		(void)fx_carve_in(a, data_start + lo, hi - lo, data_start + lo, data_start + hi);
		goto out;
	}
	a->gloaded[g] = G_LOADED;
	a->nloaded++;
	if (nfree)
		*nfree = free_bits;
out:
	mfs_unlock(&fs->alloc_lock);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	free(pz);
	return ret;
}

/*
 * An unloaded group to load next: the first at or after @goal's group within
 * 64 groups, else the lowest; UINT64_MAX when every group is loaded.
 */
static uint64_t group_next(struct mfs *fs, struct mfs_alloc *a, uint64_t goal)
{
	uint64_t data_start = sb64(fs->sb.data_start), data_len = sb64(fs->sb.data_len);

	if (a->nloaded == a->ngroups)
		return UINT64_MAX;
	if (goal >= data_start && goal < data_start + data_len)
		for (uint64_t g = group_of(fs, goal), i = 0; i < 64 && g < a->ngroups; i++, g++)
			if (a->gloaded[g] == G_UNLOADED)
				return g;
	while (a->gcursor < a->ngroups && a->gloaded[a->gcursor] != G_UNLOADED)
		a->gcursor++;
	return a->gcursor < a->ngroups ? a->gcursor : UINT64_MAX;
}

/*
 * At mount.  After a clean unmount the superblock's free_blocks is exact
 * (FORMAT.md §5.1) and no group is read now.  Otherwise (a crash, an error
 * seen, or a replayed journal) the clear bits are recounted (mfs_bm_recount), as
 * a crash leaves the counter a hint; the groups are still loaded lazily.
 */
int mfs_alloc_load_data(struct mfs *fs, struct mfs_alloc *a, bool recount)
{
	uint64_t data_len = sb64(fs->sb.data_len), free_bits = 0;
	int ret;

	if (sb64(fs->sb.data_bitmap_blocks) * MFS_BITMAP_BITS < data_len)
		return -EUCLEAN;
	a->ngroups = (data_len + MFS_BITMAP_BITS - 1) / MFS_BITMAP_BITS;
	a->gloaded = calloc(a->ngroups ? a->ngroups : 1, 1);
	if (!a->gloaded)
		return -ENOMEM;
	if (!recount)
		return 0;
	ret = mfs_bm_recount(fs, sb64(fs->sb.data_bitmap_start), sb64(fs->sb.data_bitmap_blocks),
	                     data_len, &free_bits);
	if (!ret)
		fs->sb.free_blocks = htole64(free_bits);
	return ret;
}

/* --- data ------------------------------------------------------------------------------ */

int mfs_alloc_data(struct mfs *fs, struct mfs_txn *txn, uint64_t goal, uint64_t want,
                   uint64_t *start, uint64_t *got)
{
	struct mfs_alloc *a = A(fs);
	uint64_t data_start = sb64(fs->sb.data_start), data_len = sb64(fs->sb.data_len);
	bool in_zone = goal >= data_start && goal < data_start + data_len;
	uint64_t s = 0, n = 0, g;
	struct mfs_fext *f = NULL;
	unsigned loads = 0;
	int ret;

	if (!txn || !want)
		return -EINVAL;
	mfs_lock(&fs->alloc_lock);
	for (;;) {
		if (in_zone && a->gloaded[g = group_of(fs, goal)] == G_UNLOADED)
			goto load;
		if (in_zone) {
			/* At the goal itself (a file growing in place), else the first fit after
			 * it. */
			f = mfs_fx_floor(a->by_start, goal);
			if (f && f->start + f->len > goal && f->start + f->len - goal >= want) {
				s = goal;
				n = want;
			} else {
				f = mfs_fx_first_fit(a->by_start, goal, want);
				if (f) {
					s = f->start;
					n = want;
				}
			}
		}
		if (!n) {
			/* Best fit among the loaded groups, else load more (a few while something
			 * smaller is there, all of them before ENOSPC), else the largest extent. */
			f = mfs_fx_best_fit(a, want);
			if (!f && (g = group_next(fs, a, goal)) != UINT64_MAX &&
			    (loads < GROUP_LOADS_PER_ALLOC || !a->nr_ext))
				goto load;
			if (!f)
				f = mfs_fx_largest(a);
			if (f) {
				s = f->start;
				n = f->len < want ? f->len : want;
			}
		}
		break;
load:
		mfs_unlock(&fs->alloc_lock);
		ret = group_load(fs, g, NULL);
		if (ret)
			return ret;
		loads++;
		mfs_lock(&fs->alloc_lock);
	}
	if (!n) {
		mfs_unlock(&fs->alloc_lock);
		return -ENOSPC;
	}
	ret = mfs_fx_take(a, f, s, n);
	if (!ret)
		mfs_alloc_counter_add(fs, &fs->sb.free_blocks, -(int64_t)n);
	mfs_unlock(&fs->alloc_lock);
	if (ret)
		return ret;

	ret = mfs_bm_disk_update(fs, txn, sb64(fs->sb.data_bitmap_start), s - data_start, n, true,
	                         0);
	if (ret) {
		mfs_lock(&fs->alloc_lock);
		if (mfs_fx_add(a, s, n) == 0)
			mfs_alloc_counter_add(fs, &fs->sb.free_blocks, (int64_t)n);
		mfs_unlock(&fs->alloc_lock);
		return ret;
	}
	*start = s;
	*got = n;
	return 0;
}

/*
 * Return clean blocks: bitmap first, with each piece pending (mfs_bm_disk_update),
 * then (after the commit) the index, or nothing more for a group that is not
 * loaded: its bitmap is read when it is needed.
 */
int mfs_alloc_free_clean(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	uint64_t data_start = sb64(fs->sb.data_start);

	return mfs_bm_disk_update(fs, txn, sb64(fs->sb.data_bitmap_start), start - data_start, len,
	                          false, data_start);
}

int mfs_alloc_data_state(struct mfs *fs)
{
	struct mfs_alloc *a = A(fs);
	int st = MFS_SPACE_NONE;

	mfs_lock(&fs->alloc_lock);
	if (a->npend || a->inflight)
		st = MFS_SPACE_PENDING;
	else if (a->nr_ext || a->nloaded < a->ngroups)
		st = MFS_SPACE_FREE;
	mfs_unlock(&fs->alloc_lock);
	return st;
}

/*
 * The commit hooks (mfs_alloc_commit_hooks).  begin: the running
 * transaction's frees become the batch of the commit under way; end: once it
 * is durable, they return to the free extent index.
 */
static void *alloc_commit_begin(struct mfs *fs)
{
	struct mfs_alloc *a = A(fs);
	struct mfs_pending_batch *b;

	if (!a)
		return NULL;
	mfs_lock(&fs->alloc_lock);
	if (!a->npend || !(b = malloc(sizeof(*b)))) {
		/* nothing to release (or no memory: the frees stay pending and are released
		 * by a later commit, which is later than needed, never earlier) */
		mfs_unlock(&fs->alloc_lock);
		return NULL;
	}
	b->v = a->pend;
	b->n = a->npend;
	b->next = a->inflight;
	a->inflight = b;
	a->pend = NULL;
	a->npend = a->cap_pend = 0;
	mfs_unlock(&fs->alloc_lock);
	return b;
}

static void alloc_commit_end(struct mfs *fs, void *batch, bool committed)
{
	struct mfs_pending_batch *b = batch;
	size_t i;

	if (!b)
		return;
	mfs_lock(&fs->alloc_lock);
	for (struct mfs_pending_batch **pp = &A(fs)->inflight; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	/* Only into loaded groups: an unloaded group finds them clear in its bitmap. */
	for (i = 0; committed && i < b->n; i++)
		if (fx_add_loaded(fs, A(fs), b->v[i].start, b->v[i].len))
			break; /* no memory: the rest stays unused until remount */
	mfs_unlock(&fs->alloc_lock);
	/* not committed: the frees were discarded with the transaction, the blocks are
	 * still in use on disk; leaving them out of the index keeps memory consistent */
	free(b->v);
	free(b);
}

const struct mfs_commit_hooks mfs_alloc_commit_hooks = {
        .begin = alloc_commit_begin,
        .end = alloc_commit_end,
};
