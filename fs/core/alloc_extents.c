/* SPDX-License-Identifier: MIT */
/*
 * The free extent index of the data allocator: every free extent of the
 * loaded data groups, held twice by the same nodes: a treap by start
 * (augmented with the largest length in each subtree, so "the first extent
 * at or after goal with at least want blocks" and the largest extent are
 * O(log n)) and a list per size class for best fit.  Memory only, under
 * fs->alloc_lock held by the caller (alloc_data.c, alloc_quarantine.c); it
 * calls nothing of mendfs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"

/* --- treap by start ------------------------------------------------------------------ */

static uint64_t s_max(const struct mfs_fext *t)
{
	return t ? t->smax : 0;
}

static void s_upd(struct mfs_fext *t)
{
	uint64_t m = t->len;

	if (s_max(t->sl) > m)
		m = s_max(t->sl);
	if (s_max(t->sr) > m)
		m = s_max(t->sr);
	t->smax = m;
}

/* Split @t into start < key (@l) and start >= key (@r). */
static void s_split(struct mfs_fext *t, uint64_t key, struct mfs_fext **l, struct mfs_fext **r)
{
	if (!t) {
		*l = *r = NULL;
	} else if (t->start < key) {
		s_split(t->sr, key, &t->sr, r);
		s_upd(t);
		*l = t;
	} else {
		s_split(t->sl, key, l, &t->sl);
		s_upd(t);
		*r = t;
	}
}

static struct mfs_fext *s_merge(struct mfs_fext *l, struct mfs_fext *r)
{
	if (!l || !r)
		return l ? l : r;
	if (l->prio > r->prio) {
		l->sr = s_merge(l->sr, r);
		s_upd(l);
		return l;
	}
	r->sl = s_merge(l, r->sl);
	s_upd(r);
	return r;
}

static struct mfs_fext *s_insert(struct mfs_fext *t, struct mfs_fext *x)
{
	if (!t) {
		x->sl = x->sr = NULL;
		s_upd(x);
		return x;
	}
	if (x->prio > t->prio) {
		s_split(t, x->start, &x->sl, &x->sr);
		s_upd(x);
		return x;
	}
	if (x->start < t->start)
		t->sl = s_insert(t->sl, x);
	else
		t->sr = s_insert(t->sr, x);
	s_upd(t);
	return t;
}

static struct mfs_fext *s_erase(struct mfs_fext *t, const struct mfs_fext *x)
{
	if (t == x)
		return s_merge(t->sl, t->sr);
	if (x->start < t->start)
		t->sl = s_erase(t->sl, x);
	else
		t->sr = s_erase(t->sr, x);
	s_upd(t);
	return t;
}

/* The extent with the greatest start <= key. */
struct mfs_fext *mfs_fx_floor(struct mfs_fext *t, uint64_t key)
{
	struct mfs_fext *best = NULL;

	while (t) {
		if (t->start <= key) {
			best = t;
			t = t->sr;
		} else {
			t = t->sl;
		}
	}
	return best;
}

/* The first extent (by start) with start >= key and len >= want. */
struct mfs_fext *mfs_fx_first_fit(struct mfs_fext *t, uint64_t key, uint64_t want)
{
	struct mfs_fext *r;

	if (!t || t->smax < want)
		return NULL;
	if (t->start < key)
		return mfs_fx_first_fit(t->sr, key, want);
	r = mfs_fx_first_fit(t->sl, key, want);
	if (r)
		return r;
	if (t->len >= want)
		return t;
	return mfs_fx_first_fit(t->sr, key, want);
}

/* --- size classes ------------------------------------------------------------------ */

/*
 * The by-size side of the index is a list per size class (alloc_int.h): a
 * length change moves a node between two lists in O(1), where a second tree
 * cost a walk from the root (a cache miss per level once the index outgrows
 * the cache: random writes into a sparse file split a free extent per
 * write).  Best fit is exact up to MFS_FX_EXACT blocks and looks at the first
 * FX_SCAN extents of a class above.
 */
#define FX_SCAN 8u

unsigned mfs_fx_class(uint64_t len)
{
	if (len <= MFS_FX_EXACT)
		return (unsigned)len - 1;
	return MFS_FX_EXACT + (unsigned)(63 - __builtin_clzll(len)) - 6;
}

static void z_link(struct mfs_alloc *a, struct mfs_fext *x)
{
	unsigned c = mfs_fx_class(x->len);

	x->zprev = NULL;
	x->znext = a->zhead[c];
	if (x->znext)
		x->znext->zprev = x;
	a->zhead[c] = x;
	a->zmask[c / 64] |= 1ull << (c % 64);
}

/* Unlink @x, whose len is still the one it was linked with. */
static void z_unlink(struct mfs_alloc *a, struct mfs_fext *x)
{
	unsigned c = mfs_fx_class(x->len);

	if (x->zprev)
		x->zprev->znext = x->znext;
	else
		a->zhead[c] = x->znext;
	if (x->znext)
		x->znext->zprev = x->zprev;
	if (!a->zhead[c])
		a->zmask[c / 64] &= ~(1ull << (c % 64));
}

/* The first class at or after @c with extents in it, or MFS_FX_CLASSES. */
static unsigned z_next_class(const struct mfs_alloc *a, unsigned c)
{
	while (c < MFS_FX_CLASSES) {
		uint64_t m = a->zmask[c / 64] & (~0ull << (c % 64));

		if (m)
			return (c / 64) * 64 + (unsigned)__builtin_ctzll(m);
		c = (c / 64 + 1) * 64;
	}
	return MFS_FX_CLASSES;
}

/* Is @x a better fit than @best: shorter, or as long and lower? */
static bool z_better(const struct mfs_fext *x, const struct mfs_fext *best)
{
	return !best || x->len < best->len || (x->len == best->len && x->start < best->start);
}

struct mfs_fext *mfs_fx_best_fit(struct mfs_alloc *a, uint64_t want)
{
	struct mfs_fext *best = NULL, *x;
	unsigned c, next, n;

	if (!want)
		want = 1;
	for (c = z_next_class(a, mfs_fx_class(want)); c < MFS_FX_CLASSES; c = next) {
		/* the first FX_SCAN of the class; when no class above has extents, on
		 * until one fits (in @want's own class they may all be shorter) */
		next = z_next_class(a, c + 1);
		for (x = a->zhead[c], n = 0;
		     x && (n < FX_SCAN || (next == MFS_FX_CLASSES && !best)); x = x->znext, n++)
			if (x->len >= want && z_better(x, best))
				best = x;
		if (best)
			return best;
	}
	return NULL;
}

/*
 * The largest extent: where the by-start treap's largest lengths lead, the
 * leftmost branch holding it.
 */
struct mfs_fext *mfs_fx_largest(struct mfs_alloc *a)
{
	struct mfs_fext *t = a->by_start;
	uint64_t m = s_max(t);

	while (t) {
		if (s_max(t->sl) == m)
			t = t->sl;
		else if (t->len == m)
			return t;
		else
			t = t->sr;
	}
	return NULL;
}

/* --- the free extent index (fs->alloc_lock held) ------------------------------------- */

static uint32_t fx_prio(struct mfs_alloc *a)
{
	/* xorshift32: priorities need to be spread, not unpredictable */
	uint32_t x = a->rnd;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return a->rnd = x;
}

static void fx_link(struct mfs_alloc *a, struct mfs_fext *x)
{
	a->by_start = s_insert(a->by_start, x);
	z_link(a, x);
	a->nr_ext++;
}

static void fx_unlink(struct mfs_alloc *a, struct mfs_fext *x)
{
	a->by_start = s_erase(a->by_start, x);
	z_unlink(a, x);
	a->nr_ext--;
}

/* A node for the index: from the spares, a new slab's when there are none. */
static int fx_new(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	struct mfs_fext *x = a->spare;

	if (!x) {
		struct mfs_fext_slab *sl = malloc(sizeof(*sl));
		unsigned i;

		if (!sl)
			return -ENOMEM;
		sl->next = a->slabs;
		a->slabs = sl;
		for (i = 1; i < MFS_FX_SLAB; i++)
			sl->node[i].sl = i + 1 < MFS_FX_SLAB ? &sl->node[i + 1] : NULL;
		a->spare = &sl->node[1];
		x = &sl->node[0];
	} else {
		a->spare = x->sl;
	}
	/* the treaps set every link on insert */
	x->start = start;
	x->len = len;
	x->prio = fx_prio(a);
	fx_link(a, x);
	return 0;
}

/* A node leaves the index: back to the spares. */
static void fx_put(struct mfs_alloc *a, struct mfs_fext *x)
{
	x->sl = a->spare;
	a->spare = x;
}

/* Does [start, start + len) overlap a free extent? */
bool mfs_fx_overlaps(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	struct mfs_fext *f = mfs_fx_floor(a->by_start, start + len - 1);

	return f && f->start + f->len > start;
}

/* Add a free range, merging with its neighbours. */
int mfs_fx_add(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	struct mfs_fext *prev = start ? mfs_fx_floor(a->by_start, start - 1) : NULL;
	struct mfs_fext *next = mfs_fx_floor(a->by_start, start + len);

	if (next && next->start != start + len)
		next = NULL;
	if (prev && prev->start + prev->len != start)
		prev = NULL;
	if (prev) {
		fx_unlink(a, prev);
		prev->len += len;
		if (next) {
			fx_unlink(a, next);
			prev->len += next->len;
			fx_put(a, next);
		}
		fx_link(a, prev);
		return 0;
	}
	if (next) {
		fx_unlink(a, next);
		next->start = start;
		next->len += len;
		fx_link(a, next);
		return 0;
	}
	return fx_new(a, start, len);
}

/* Recompute smax on the by-start path from @t down to @x, after x->len changed. */
static void s_fix(struct mfs_fext *t, const struct mfs_fext *x)
{
	if (t != x)
		s_fix(x->start < t->start ? t->sl : t->sr, x);
	s_upd(t);
}

/*
 * Take [start, start + n) out of free extent @f (which holds it).  What stays
 * of @f (its head, or else its tail) keeps its place in the by-start treap:
 * it lies inside the old extent, and no other free extent does, so only the
 * largest lengths on its path change (s_fix); only the by-size treap moves it.
 * A take from the middle adds the tail as a new extent.
 */
int mfs_fx_take(struct mfs_alloc *a, struct mfs_fext *f, uint64_t start, uint64_t n)
{
	uint64_t fend = f->start + f->len, end = start + n;
	bool head = start > f->start, tail = end < fend, moves;

	if (!head && !tail) {
		fx_unlink(a, f);
		fx_put(a, f);
		return 0;
	}
	/* it changes list only if what stays of it is of another class */
	moves = mfs_fx_class(head ? start - f->start : fend - end) != mfs_fx_class(f->len);
	if (moves)
		z_unlink(a, f);
	if (head) {
		f->len = start - f->start;
	} else {
		f->start = end;
		f->len = fend - end;
	}
	s_fix(a->by_start, f);
	if (moves)
		z_link(a, f);
	return head && tail ? fx_new(a, end, fend - end) : 0;
}

/* Remove [start, start + len) from the index wherever it is free (mount: poison). */
int mfs_fx_carve(struct mfs_alloc *a, uint64_t start, uint64_t len, uint64_t *carved)
{
	uint64_t end = start + len;
	int ret;

	while (start < end) {
		struct mfs_fext *f = mfs_fx_floor(a->by_start, end - 1);
		uint64_t s, e;

		if (!f || f->start + f->len <= start)
			break;
		s = f->start > start ? f->start : start;
		e = f->start + f->len < end ? f->start + f->len : end;
		*carved += e - s;
		ret = mfs_fx_take(a, f, s, e - s);
		if (ret)
			return ret;
		end = s;
	}
	return 0;
}

void mfs_fx_destroy(struct mfs_alloc *a)
{
	while (a->slabs) {
		struct mfs_fext_slab *sl = a->slabs;

		a->slabs = sl->next;
		free(sl);
	}
	a->by_start = a->spare = NULL;
	memset(a->zhead, 0, sizeof(a->zhead));
	memset(a->zmask, 0, sizeof(a->zmask));
	a->nr_ext = 0;
}
