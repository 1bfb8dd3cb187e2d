/* SPDX-License-Identifier: MIT */
/*
 * The free extent index of the data allocator: every free extent of the
 * loaded data groups, held twice by the same nodes: a treap by start
 * (augmented with the largest length in each subtree, so "the first extent
 * at or after goal with at least want blocks" is O(log n)) and a treap by
 * (length, start) for best fit.  Memory only, under fs->alloc_lock held by
 * the caller (alloc_data.c, alloc_quarantine.c); it calls nothing of mendfs.
 */
#include <errno.h>
#include <stdlib.h>

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

/* --- treap by (len, start) ---------------------------------------------------------- */

static bool z_less(const struct mfs_fext *a, const struct mfs_fext *b)
{
	return a->len < b->len || (a->len == b->len && a->start < b->start);
}

static void z_split(struct mfs_fext *t, const struct mfs_fext *x, struct mfs_fext **l,
                    struct mfs_fext **r)
{
	if (!t) {
		*l = *r = NULL;
	} else if (z_less(t, x)) {
		z_split(t->zr, x, &t->zr, r);
		*l = t;
	} else {
		z_split(t->zl, x, l, &t->zl);
		*r = t;
	}
}

static struct mfs_fext *z_merge(struct mfs_fext *l, struct mfs_fext *r)
{
	if (!l || !r)
		return l ? l : r;
	if (l->prio > r->prio) {
		l->zr = z_merge(l->zr, r);
		return l;
	}
	r->zl = z_merge(l, r->zl);
	return r;
}

static struct mfs_fext *z_insert(struct mfs_fext *t, struct mfs_fext *x)
{
	if (!t) {
		x->zl = x->zr = NULL;
		return x;
	}
	if (x->prio > t->prio) {
		z_split(t, x, &x->zl, &x->zr);
		return x;
	}
	if (z_less(x, t))
		t->zl = z_insert(t->zl, x);
	else
		t->zr = z_insert(t->zr, x);
	return t;
}

static struct mfs_fext *z_erase(struct mfs_fext *t, const struct mfs_fext *x)
{
	if (t == x)
		return z_merge(t->zl, t->zr);
	if (z_less(x, t))
		t->zl = z_erase(t->zl, x);
	else
		t->zr = z_erase(t->zr, x);
	return t;
}

/* The smallest extent with len >= want (best fit). */
struct mfs_fext *mfs_fx_best_fit(struct mfs_fext *t, uint64_t want)
{
	struct mfs_fext *best = NULL;

	while (t) {
		if (t->len >= want) {
			best = t;
			t = t->zl;
		} else {
			t = t->zr;
		}
	}
	return best;
}

struct mfs_fext *mfs_fx_largest(struct mfs_fext *t)
{
	while (t && t->zr)
		t = t->zr;
	return t;
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
	a->by_size = z_insert(a->by_size, x);
	a->nr_ext++;
}

static void fx_unlink(struct mfs_alloc *a, struct mfs_fext *x)
{
	a->by_start = s_erase(a->by_start, x);
	a->by_size = z_erase(a->by_size, x);
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
	bool head = start > f->start, tail = end < fend;

	a->by_size = z_erase(a->by_size, f);
	if (!head && !tail) {
		a->by_start = s_erase(a->by_start, f);
		a->nr_ext--;
		fx_put(a, f);
		return 0;
	}
	if (head) {
		f->len = start - f->start;
	} else {
		f->start = end;
		f->len = fend - end;
	}
	s_fix(a->by_start, f);
	a->by_size = z_insert(a->by_size, f);
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
	a->by_start = a->by_size = a->spare = NULL;
	a->nr_ext = 0;
}
