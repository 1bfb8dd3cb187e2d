/* SPDX-License-Identifier: MIT */
/*
 * Allocators: data zone extents, meta zone blocks, inode numbers, and the
 * quarantine of poisoned free data extents (docs/FORMAT.md "Allocation
 * bitmaps" and "Quarantine").
 *
 * The on-disk bitmaps are the persistent truth; they are read into in-memory
 * structures that answer allocations without touching the device, one bitmap
 * block at a time when allocation first needs it (after a clean unmount the
 * superblock's free counters are exact and nothing is read at mount; after a
 * crash, an error or a replay everything is read and recounted):
 *
 *   data   an index of free extents, held twice by the same nodes: a treap by
 *          start (augmented with the largest length in each subtree, so "the
 *          first extent at or after goal with at least want blocks" is
 *          O(log n)) and a treap by (length, start) for best fit.
 *   meta   a copy of the meta zone bitmap, next-fit from a rotating hint.
 *   inodes a copy of the inode bitmap, next-fit from a rotating hint.
 *
 * Free blocks that sit on poison (per blk_poison_lookup) when their bitmap
 * block is loaded are left out of the in-memory structures: they stay free
 * on disk and are never handed out.  A data extent freed while poisoned is
 * not returned at all: it stays marked in the bitmap and goes to the
 * quarantine B+tree (key pblk, value le64 len) until mfs_quarantine_release()
 * sees the poison gone.
 *
 * Locking.  fs->alloc_lock protects the in-memory structures, which blocks
 * are loaded, the pending frees and the free counters in fs->sb; it is never
 * held while a buffer is read or locked (it is taken *inside* a bitmap
 * buffer's content lock: mfs.h's order).  The on-disk bitmap bits change
 * under their buffer's content lock, and in an order that keeps them equal to
 * the in-memory state for any interleaving: allocation takes from memory
 * first (loaded blocks only) and sets the bits after; freeing clears the bits
 * first and gives to memory after (a data free becomes pending inside the
 * content lock).  Loading a block holds its content lock and alloc_lock
 * together, so it sees one of those states, never half of one.  Nothing but
 * alloc_lock is taken while a bitmap buffer's lock is held.  The quarantine
 * tree has its own mutex (qlock), taken before any buffer lock and before
 * alloc_lock; mfs_quarantine_release takes it inside its own handles.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfs.h"

#define BM_WORDS_PER_BLOCK (MFS_BITMAP_BITS / 64)
_Static_assert(MFS_BITMAP_BITS % 64 == 0, "bitmap blocks hold whole 64-bit words");

/* A free data extent, a node of both treaps. */
struct mfs_fext {
	uint64_t start, len;
	uint64_t smax;            /* largest len in this node's by-start subtree */
	struct mfs_fext *sl, *sr; /* by start */
	struct mfs_fext *zl, *zr; /* by (len, start) */
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

struct mfs_alloc {
	struct mfs_fext *by_start, *by_size; /* protected by fs->alloc_lock */
	uint64_t nr_ext;
	uint32_t rnd;
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

/* The frees of a closed transaction, waiting for its commit (alloc_commit_*). */
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

static uint64_t sb64(uint64_t v)
{
	return le64toh(v);
}

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
static struct mfs_fext *s_floor(struct mfs_fext *t, uint64_t key)
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
static struct mfs_fext *s_first_fit(struct mfs_fext *t, uint64_t key, uint64_t want)
{
	struct mfs_fext *r;

	if (!t || t->smax < want)
		return NULL;
	if (t->start < key)
		return s_first_fit(t->sr, key, want);
	r = s_first_fit(t->sl, key, want);
	if (r)
		return r;
	if (t->len >= want)
		return t;
	return s_first_fit(t->sr, key, want);
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
static struct mfs_fext *z_lower_bound(struct mfs_fext *t, uint64_t want)
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

static struct mfs_fext *z_last(struct mfs_fext *t)
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

static int fx_new(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	struct mfs_fext *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->start = start;
	x->len = len;
	x->prio = fx_prio(a);
	fx_link(a, x);
	return 0;
}

/* Does [start, start + len) overlap a free extent? */
static bool fx_overlaps(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	struct mfs_fext *f = s_floor(a->by_start, start + len - 1);

	return f && f->start + f->len > start;
}

/* Add a free range, merging with its neighbours. */
static int fx_add(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	struct mfs_fext *prev = start ? s_floor(a->by_start, start - 1) : NULL;
	struct mfs_fext *next = s_floor(a->by_start, start + len);

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
			free(next);
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

/* Take [start, start + n) out of free extent @f (which holds it). */
static int fx_take(struct mfs_alloc *a, struct mfs_fext *f, uint64_t start, uint64_t n)
{
	uint64_t fend = f->start + f->len, end = start + n;

	fx_unlink(a, f);
	if (start > f->start && end < fend) {
		f->len = start - f->start;
		fx_link(a, f);
		return fx_new(a, end, fend - end);
	}
	if (start > f->start) {
		f->len = start - f->start;
		fx_link(a, f);
	} else if (end < fend) {
		f->start = end;
		f->len = fend - end;
		fx_link(a, f);
	} else {
		free(f);
	}
	return 0;
}

/* Remove [start, start + len) from the index wherever it is free (mount: poison). */
static int fx_carve(struct mfs_alloc *a, uint64_t start, uint64_t len, uint64_t *carved)
{
	uint64_t end = start + len;
	int ret;

	while (start < end) {
		struct mfs_fext *f = s_floor(a->by_start, end - 1);
		uint64_t s, e;

		if (!f || f->start + f->len <= start)
			break;
		s = f->start > start ? f->start : start;
		e = f->start + f->len < end ? f->start + f->len : end;
		*carved += e - s;
		ret = fx_take(a, f, s, e - s);
		if (ret)
			return ret;
		end = s;
	}
	return 0;
}

static void fx_free_all(struct mfs_fext *t)
{
	if (!t)
		return;
	fx_free_all(t->sl);
	fx_free_all(t->sr);
	free(t);
}

/* --- on-disk bitmaps ---------------------------------------------------------------- */

static int pending_add(struct mfs_alloc *a, uint64_t start, uint64_t len);
static void counter_add(struct mfs *fs, uint64_t *le, int64_t d);

/*
 * Set or clear bits [first, first + n) of the on-disk bitmap at @disk, each
 * block under its content lock, recorded in @txn.  The bits must all be in the
 * opposite state: anything else is corruption (-EUCLEAN).
 *
 * @pend_base (data frees only, else 0): the zone start of the bits; each
 * block's cleared range is recorded as a pending free of the running
 * transaction and counted free *before* the block's lock is dropped, so a
 * data group loaded concurrently (group_load, which holds the same lock)
 * sees either the bits still set or the range already pending: never a
 * clear bit it could hand out before the freeing transaction commits.
 */
static int bm_disk_update(struct mfs *fs, struct mfs_txn *txn, uint64_t disk, uint64_t first,
                          uint64_t n, bool set, uint64_t pend_base)
{
	while (n) {
		uint64_t k = first / MFS_BITMAP_BITS, i = first % MFS_BITMAP_BITS;
		uint64_t cnt = MFS_BITMAP_BITS - i < n ? MFS_BITMAP_BITS - i : n;
		struct mfs_buf *b;
		uint8_t *bits;
		int ret;

		ret = mfs_meta_read(fs, disk + k, MFS_T_BITMAP, &b);
		if (ret)
			return ret;
		pthread_mutex_lock(&b->lock);
		bits = b->data + sizeof(struct mfs_meta_hdr);
		for (uint64_t j = i; j < i + cnt; j++) {
			uint8_t m = (uint8_t)(1u << (j % 8));

			if (!!(bits[j / 8] & m) == set) {
				fprintf(stderr, "mendfs: bitmap block %llu: bit %llu already %s\n",
				        (unsigned long long)(disk + k), (unsigned long long)j,
				        set ? "set" : "clear");
				ret = -EUCLEAN;
				break;
			}
		}
		if (!ret) {
			for (uint64_t j = i; j < i + cnt; j++) {
				if (set)
					bits[j / 8] |= (uint8_t)(1u << (j % 8));
				else
					bits[j / 8] &= (uint8_t) ~(1u << (j % 8));
			}
			mfs_txn_dirty(txn, b);
			if (pend_base) {
				pthread_mutex_lock(&fs->alloc_lock);
				ret = pending_add(A(fs), pend_base + first, cnt);
				if (!ret)
					counter_add(fs, &fs->sb.free_blocks, (int64_t)cnt);
				pthread_mutex_unlock(&fs->alloc_lock);
			}
		}
		pthread_mutex_unlock(&b->lock);
		mfs_buf_put(b);
		if (ret)
			return ret;
		first += cnt;
		n -= cnt;
	}
	return 0;
}

static bool bm_test(const struct mfs_bmap *m, uint64_t i)
{
	return m->map[i / 64] >> (i % 64) & 1;
}

static void bm_set(struct mfs_bmap *m, uint64_t i, bool v)
{
	if (v)
		m->map[i / 64] |= 1ull << (i % 64);
	else
		m->map[i / 64] &= ~(1ull << (i % 64));
}

/*
 * First clear bit at or after the hint, wrapping; UINT64_MAX if none.  The
 * scan stops at the first bitmap block that is not loaded: *need = that
 * block (else UINT64_MAX), to be loaded before trying again.
 */
static uint64_t bm_find(const struct mfs_bmap *m, uint64_t *need)
{
	uint64_t words = (m->nbits + 63) / 64, h = m->hint < m->nbits ? m->hint : 0;
	uint64_t w0 = h / 64;

	*need = UINT64_MAX;
	for (uint64_t n = 0; n <= words; n++) {
		uint64_t w = (w0 + n) % words, v;

		if (m->loaded[w / BM_WORDS_PER_BLOCK] == G_UNLOADED) {
			*need = w / BM_WORDS_PER_BLOCK;
			return UINT64_MAX;
		}
		v = ~m->map[w];
		if (n == 0)
			v &= ~0ull << (h % 64);
		if (v) {
			uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(v);

			if (i < m->nbits)
				return i;
		}
	}
	return UINT64_MAX;
}

static int poisoned_blocks(struct mfs *fs, uint64_t start, uint64_t len, struct mfs_brange **out,
                           unsigned *nr);

/*
 * Copy bitmap block @k of @m into memory, once; called with no lock held.
 * As group_load: scanned under the block's content lock and alloc_lock, so
 * that it agrees with bm_alloc (memory first, bits after: never in a block
 * that is not loaded) and bm_free (bits first, memory after if loaded).
 * Then the bits past nbits, the fixed part and poisoned blocks (either copy)
 * are made unavailable.  *nfree (may be NULL): the block's clear bits on
 * disk, if this call loaded it.  A block that cannot be read is left
 * unavailable (logged) unless @strict.
 */
static int bm_block_load(struct mfs *fs, struct mfs_bmap *m, uint64_t k, bool strict,
                         uint64_t *nfree)
{
	uint64_t lo = k * MFS_BITMAP_BITS, hi = lo + MFS_BITMAP_BITS, *dst;
	struct mfs_brange *pz[2] = {NULL, NULL};
	unsigned npz[2] = {0, 0};
	uint64_t zones[2] = {m->zone, m->zone_twin}, free_bits = 0;
	const uint64_t *src;
	struct mfs_buf *b;
	int ret = 0;

	if (nfree)
		*nfree = 0;
	if (hi > m->nbits)
		hi = m->nbits;
	for (int z = 0; z < 2 && !ret; z++)
		if (zones[z] && hi > lo)
			ret = poisoned_blocks(fs, zones[z] + lo, hi - lo, &pz[z], &npz[z]);
	if (!ret)
		ret = mfs_meta_read(fs, m->disk + k, MFS_T_BITMAP, &b);
	if (ret) {
		free(pz[0]);
		free(pz[1]);
		/* a read that turned the filesystem read-only (fserror.c) is its caller's EIO */
		if (ret == -ENOMEM || strict || mfs_fs_errno(fs))
			return ret;
		pthread_mutex_lock(&fs->alloc_lock);
		if (m->loaded[k] == G_UNLOADED) {
			fprintf(stderr,
			        "mendfs: bitmap block %llu: %s: its items are not allocated\n",
			        (unsigned long long)(m->disk + k), strerror(-ret));
			memset(&m->map[k * BM_WORDS_PER_BLOCK], 0xff,
			       BM_WORDS_PER_BLOCK * sizeof(uint64_t));
			m->loaded[k] = G_BROKEN;
		}
		pthread_mutex_unlock(&fs->alloc_lock);
		return 0;
	}
	pthread_mutex_lock(&b->lock);
	pthread_mutex_lock(&fs->alloc_lock);
	if (m->loaded[k] != G_UNLOADED)
		goto out;
	src = (const uint64_t *)(b->data + sizeof(struct mfs_meta_hdr));
	dst = &m->map[k * BM_WORDS_PER_BLOCK];
	for (uint64_t w = 0; w < BM_WORDS_PER_BLOCK; w++) {
		uint64_t base = lo + w * 64, v = le64toh(src[w]);

		if (base >= hi)
			v = ~0ull;
		else if (base + 64 > hi)
			v |= ~0ull << (hi - base);
		dst[w] = v;
		free_bits += 64 - (uint64_t)__builtin_popcountll(v);
	}
	for (uint64_t i = lo; i < hi && i < m->fixed; i++)
		bm_set(m, i, true);
	for (int z = 0; z < 2; z++)
		for (unsigned j = 0; j < npz[z]; j++) {
			uint64_t p0 = pz[z][j].start, p1 = pz[z][j].start + pz[z][j].len;

			p0 = p0 > zones[z] + lo ? p0 - zones[z] : lo;
			p1 = p1 > zones[z] + lo ? p1 - zones[z] : lo;
			for (uint64_t i = p0; i < p1 && i < hi; i++)
				bm_set(m, i, true);
		}
	m->loaded[k] = G_LOADED;
	if (nfree)
		*nfree = free_bits;
out:
	pthread_mutex_unlock(&fs->alloc_lock);
	pthread_mutex_unlock(&b->lock);
	mfs_buf_put(b);
	free(pz[0]);
	free(pz[1]);
	return 0;
}

/* Clear bits among the first @nbits of one bitmap block's @words. */
static uint64_t bm_count_clear(const uint64_t *words, uint64_t nbits)
{
	uint64_t n = 0;

	for (uint64_t w = 0; w < BM_WORDS_PER_BLOCK && w * 64 < nbits; w++) {
		uint64_t v = le64toh(words[w]);

		if (nbits - w * 64 < 64)
			v |= ~0ull << (nbits - w * 64);
		n += 64 - (uint64_t)__builtin_popcountll(v);
	}
	return n;
}

#define RECOUNT_BATCH 256u /* bitmap blocks per read: 1 MiB */

/*
 * The clear bits of an on-disk bitmap (@blocks blocks at @disk, @nbits
 * valid), for the counters of a mount after a crash; nothing is loaded into
 * memory.  Only at mount, before any transaction: the blocks on the device
 * are then the newest (replay wrote in place).  They are read in batches
 * straight from the device and each is verified as mfs_meta_read() does
 * (magic, type, location, checksum); a batch that meets a media error and a
 * block that fails its checks are read through mfs_meta_read() one by one,
 * which falls back to the twin and repairs.  A block lost in both copies
 * fails the count (and the mount).
 */
static int bm_recount(struct mfs *fs, uint64_t disk, uint64_t blocks, uint64_t nbits,
                      uint64_t *nfree)
{
	uint8_t *buf;
	int ret = 0;

	*nfree = 0;
	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, RECOUNT_BATCH * MFS_BLOCK_SIZE))
		return -ENOMEM;
	for (uint64_t k0 = 0; k0 < blocks && !ret; k0 += RECOUNT_BATCH) {
		unsigned n = blocks - k0 < RECOUNT_BATCH ? (unsigned)(blocks - k0) : RECOUNT_BATCH;
		int rd = blk_read(fs->dev, (disk + k0) * MFS_SECTORS_PER_BLOCK, buf,
		                  n * MFS_BLOCK_SIZE, 0);

		for (unsigned j = 0; j < n && !ret; j++) {
			uint64_t k = k0 + j, valid = nbits - k * MFS_BITMAP_BITS;
			const uint8_t *blk = buf + (size_t)j * MFS_BLOCK_SIZE;
			struct mfs_buf *b;

			if (k * MFS_BITMAP_BITS >= nbits)
				break;
			if (valid > MFS_BITMAP_BITS)
				valid = MFS_BITMAP_BITS;
			if (!rd && !mfs_block_verify(blk, fs->seed, MFS_T_BITMAP, disk + k)) {
				*nfree += bm_count_clear(
				        (const uint64_t *)(blk + sizeof(struct mfs_meta_hdr)),
				        valid);
				continue;
			}
			ret = mfs_meta_read(fs, disk + k, MFS_T_BITMAP, &b);
			if (ret)
				break;
			pthread_mutex_lock(&b->lock);
			*nfree += bm_count_clear(
			        (const uint64_t *)(b->data + sizeof(struct mfs_meta_hdr)), valid);
			pthread_mutex_unlock(&b->lock);
			mfs_buf_put(b);
		}
	}
	free(buf);
	return ret;
}

/*
 * Set up an in-memory bitmap; with @nfree (a recount) *nfree gets the clear
 * bits on disk (bm_recount); the blocks are loaded when needed either way.
 */
static int bm_setup(struct mfs *fs, struct mfs_bmap *m, uint64_t disk, uint64_t blocks,
                    uint64_t nbits, uint64_t fixed, uint64_t zone, uint64_t zone_twin,
                    uint64_t *nfree)
{
	if (blocks * MFS_BITMAP_BITS < nbits || !nbits)
		return -EUCLEAN;
	m->map = malloc(blocks * BM_WORDS_PER_BLOCK * sizeof(uint64_t) + 8);
	m->loaded = calloc(blocks, 1);
	if (!m->map || !m->loaded)
		return -ENOMEM;
	m->nbits = nbits;
	m->hint = fixed < nbits ? fixed : 0;
	m->disk = disk;
	m->blocks = blocks;
	m->fixed = fixed;
	m->zone = zone;
	m->zone_twin = zone_twin;
	return nfree ? bm_recount(fs, disk, blocks, nbits, nfree) : 0;
}

/* --- poison of a data range ---------------------------------------------------------- */

/*
 * The poisoned blocks of [start, start + len), as merged block ranges in
 * *out (malloc'ed, *nr entries).  Returns 0 or -ENOMEM.
 */
static int poisoned_blocks(struct mfs *fs, uint64_t start, uint64_t len, struct mfs_brange **out,
                           unsigned *nr)
{
	uint64_t sec = start * MFS_SECTORS_PER_BLOCK, end = (start + len) * MFS_SECTORS_PER_BLOCK;
	struct mfs_brange *v = NULL;
	unsigned n = 0, cap = 0;
	struct blk_range r[32];

	while (sec < end) {
		unsigned got = blk_poison_lookup(fs->dev, sec, end - sec, r, 32, NULL);

		if (!got)
			break;
		for (unsigned i = 0; i < got; i++) {
			uint64_t b0 = r[i].sector / MFS_SECTORS_PER_BLOCK;
			uint64_t b1 = (r[i].sector + r[i].nr - 1) / MFS_SECTORS_PER_BLOCK + 1;

			if (n && v[n - 1].start + v[n - 1].len >= b0) {
				if (b1 > v[n - 1].start + v[n - 1].len)
					v[n - 1].len = b1 - v[n - 1].start;
				continue;
			}
			if (n == cap) {
				struct mfs_brange *nv;

				cap = cap ? cap * 2 : 8;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					return -ENOMEM;
				}
				v = nv;
			}
			v[n].start = b0;
			v[n].len = b1 - b0;
			n++;
		}
		sec = r[got - 1].sector + r[got - 1].nr;
	}
	*out = v;
	*nr = n;
	return 0;
}

/* --- init / destroy -------------------------------------------------------------------- */

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
			int ret = fx_add(a, start, e - start);

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

	return s < e ? fx_carve(a, s, e - s, &carved) : 0;
}

/*
 * Load data group @g into the free extent index, once; called with no lock
 * held.  The bitmap block is read through the buffer cache, so a block the
 * running or a committing transaction changed is seen as changed (dirty
 * buffers stay cached until checkpointed).  The bits are scanned under the
 * block's content lock and alloc_lock together: allocation never takes from
 * an unloaded group, and a free clears its bits and becomes pending under
 * the same content lock (bm_disk_update), so the clear bits seen here are
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
	ret = poisoned_blocks(fs, data_start + lo, hi - lo, &pz, &npz);
	if (ret)
		return ret;
	ret = mfs_meta_read(fs, sb64(fs->sb.data_bitmap_start) + g, MFS_T_BITMAP, &b);
	if (ret) {
		free(pz);
		/* as in bm_block_load: not an ENOSPC later */
		if (ret == -ENOMEM || mfs_fs_errno(fs))
			return ret;
		/* unreadable: nothing is allocated from it (frees into it fail the same way) */
		pthread_mutex_lock(&fs->alloc_lock);
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
		pthread_mutex_unlock(&fs->alloc_lock);
		return 0;
	}
	pthread_mutex_lock(&b->lock);
	pthread_mutex_lock(&fs->alloc_lock);
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
				ret = fx_add(a, data_start + run, base - run);
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
				ret = fx_add(a, data_start + run, base + i - run);
				free_bits += base + i - run;
				run = UINT64_MAX;
			}
		}
	}
	if (!ret && run != UINT64_MAX) {
		ret = fx_add(a, data_start + run, hi - run);
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
	pthread_mutex_unlock(&fs->alloc_lock);
	pthread_mutex_unlock(&b->lock);
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
 * seen, or a replayed journal) the clear bits are recounted (bm_recount), as
 * a crash leaves the counter a hint; the groups are still loaded lazily.
 */
static int load_data(struct mfs *fs, struct mfs_alloc *a, bool recount)
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
	ret = bm_recount(fs, sb64(fs->sb.data_bitmap_start), sb64(fs->sb.data_bitmap_blocks),
	                 data_len, &free_bits);
	if (!ret)
		fs->sb.free_blocks = htole64(free_bits);
	return ret;
}

static void *alloc_commit_begin(struct mfs *fs);
static void alloc_commit_end(struct mfs *fs, void *batch, bool committed);

static const struct mfs_commit_hooks alloc_commit_hooks = {
        .begin = alloc_commit_begin,
        .end = alloc_commit_end,
};

static const struct mfs_bt_alloc alloc_bt_nodes = {
        .alloc = mfs_alloc_meta,
        .free = mfs_free_meta,
};

int mfs_alloc_init(struct mfs *fs)
{
	struct mfs_alloc *a = calloc(1, sizeof(*a));
	uint64_t nfree_meta = 0, nfree_ino = 0;
	uint64_t meta_start = sb64(fs->sb.meta_start);
	/* the counters of a cleanly unmounted filesystem are exact; else they are recounted */
	bool clean = (fs->sb.state & (MFS_STATE_CLEAN | MFS_STATE_ERROR)) == MFS_STATE_CLEAN;
	pthread_condattr_t cattr;
	int ret;

	if (!a)
		return -ENOMEM;
	a->rnd = 0x9e3779b9u;
	pthread_mutex_init(&fs->alloc_lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC); /* space.c waits with a timeout */
	pthread_cond_init(&fs->space_cond, &cattr);
	pthread_condattr_destroy(&cattr);
	fs->space_freeing = fs->space_unlinked = 0;
	pthread_mutex_init(&a->qlock, NULL);
	fs->alloc = a;

	ret = load_data(fs, a, !clean);
	/* The fixed part of the meta zone is never allocatable, whatever the bitmap says;
	 * nor is inode 1, the root. */
	if (!ret)
		ret = bm_setup(fs, &a->meta, sb64(fs->sb.meta_bitmap_start),
		               sb64(fs->sb.meta_bitmap_blocks), sb64(fs->sb.meta_len),
		               sb64(fs->sb.inode_table_start) + sb64(fs->sb.inode_table_blocks) -
		                       meta_start,
		               meta_start, fs->dup ? sb64(fs->sb.meta_twin) : 0,
		               clean ? NULL : &nfree_meta);
	if (!ret)
		ret = bm_setup(fs, &a->ino, sb64(fs->sb.inode_bitmap_start),
		               sb64(fs->sb.inode_bitmap_blocks), sb64(fs->sb.nr_inodes), 1, 0, 0,
		               clean ? NULL : &nfree_ino);
	if (ret) {
		fprintf(stderr, "mendfs: loading the allocation bitmaps: %s\n", strerror(-ret));
		mfs_alloc_destroy(fs);
		return ret;
	}
	if (!clean) {
		fs->sb.free_meta = htole64(nfree_meta);
		fs->sb.free_inodes = htole64(nfree_ino);
	}
	fs->bt_alloc = &alloc_bt_nodes;
	mfs_journal_set_hooks(fs, &alloc_commit_hooks);
	return 0;
}

void mfs_alloc_destroy(struct mfs *fs)
{
	struct mfs_alloc *a = A(fs);

	if (!a)
		return;
	if (fs->commit_hooks == &alloc_commit_hooks)
		mfs_journal_set_hooks(fs, NULL);
	fs->bt_alloc = NULL;
	fx_free_all(a->by_start);
	while (a->inflight) {
		struct mfs_pending_batch *b = a->inflight;

		a->inflight = b->next;
		free(b->v);
		free(b);
	}
	free(a->gloaded);
	free(a->pend);
	free(a->meta.map);
	free(a->meta.loaded);
	free(a->ino.map);
	free(a->ino.loaded);
	pthread_mutex_destroy(&a->qlock);
	pthread_cond_destroy(&fs->space_cond);
	pthread_mutex_destroy(&fs->alloc_lock);
	free(a);
	fs->alloc = NULL;
}

/* --- data ------------------------------------------------------------------------------ */

/*
 * alloc_lock held: change a free counter of fs->sb.  After a clean mount the
 * counters come from the superblock (FORMAT.md §5.1); one that was wrong
 * there would leave its range here.  It stays within [0, zone] (a superblock
 * with a counter past its zone does not validate) and the error state is set
 * (the next mount recounts, fsck fixes it): statfs may be off until then,
 * allocation never is (it follows the bitmaps).
 */
static void counter_add(struct mfs *fs, uint64_t *le, int64_t d)
{
	uint64_t max = le == &fs->sb.free_blocks ? le64toh(fs->sb.data_len)
	               : le == &fs->sb.free_meta ? le64toh(fs->sb.meta_len)
	                                         : le64toh(fs->sb.nr_inodes);
	uint64_t v = le64toh(*le);

	if ((d < 0 && v < (uint64_t)-d) || (d > 0 && max - v < (uint64_t)d) || v > max) {
		if (!(fs->sb.state & MFS_STATE_ERROR))
			fprintf(stderr,
			        "mendfs: a free counter of the superblock was wrong (%llu %+lld, "
			        "at most %llu): error state set, recounted at the next mount\n",
			        (unsigned long long)v, (long long)d, (unsigned long long)max);
		fs->sb.state |= MFS_STATE_ERROR;
		v = d < 0 ? (v < (uint64_t)-d ? 0 : v + (uint64_t)d)
		          : (max - (v < max ? v : max) < (uint64_t)d ? max : v + (uint64_t)d);
	} else {
		v += (uint64_t)d;
	}
	*le = htole64(v);
}

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
	pthread_mutex_lock(&fs->alloc_lock);
	for (;;) {
		if (in_zone && a->gloaded[g = group_of(fs, goal)] == G_UNLOADED)
			goto load;
		if (in_zone) {
			/* At the goal itself (a file growing in place), else the first fit after
			 * it. */
			f = s_floor(a->by_start, goal);
			if (f && f->start + f->len > goal && f->start + f->len - goal >= want) {
				s = goal;
				n = want;
			} else {
				f = s_first_fit(a->by_start, goal, want);
				if (f) {
					s = f->start;
					n = want;
				}
			}
		}
		if (!n) {
			/* Best fit among the loaded groups, else load more (a few while something
			 * smaller is there, all of them before ENOSPC), else the largest extent. */
			f = z_lower_bound(a->by_size, want);
			if (!f && (g = group_next(fs, a, goal)) != UINT64_MAX &&
			    (loads < GROUP_LOADS_PER_ALLOC || !a->by_size))
				goto load;
			if (!f)
				f = z_last(a->by_size);
			if (f) {
				s = f->start;
				n = f->len < want ? f->len : want;
			}
		}
		break;
load:
		pthread_mutex_unlock(&fs->alloc_lock);
		ret = group_load(fs, g, NULL);
		if (ret)
			return ret;
		loads++;
		pthread_mutex_lock(&fs->alloc_lock);
	}
	if (!n) {
		pthread_mutex_unlock(&fs->alloc_lock);
		return -ENOSPC;
	}
	ret = fx_take(a, f, s, n);
	if (!ret)
		counter_add(fs, &fs->sb.free_blocks, -(int64_t)n);
	pthread_mutex_unlock(&fs->alloc_lock);
	if (ret)
		return ret;

	ret = bm_disk_update(fs, txn, sb64(fs->sb.data_bitmap_start), s - data_start, n, true, 0);
	if (ret) {
		pthread_mutex_lock(&fs->alloc_lock);
		if (fx_add(a, s, n) == 0)
			counter_add(fs, &fs->sb.free_blocks, (int64_t)n);
		pthread_mutex_unlock(&fs->alloc_lock);
		return ret;
	}
	*start = s;
	*got = n;
	return 0;
}

/* alloc_lock held: remember blocks freed by the running transaction. */
static int pending_add(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	if (a->npend && a->pend[a->npend - 1].start + a->pend[a->npend - 1].len == start) {
		a->pend[a->npend - 1].len += len;
		return 0;
	}
	if (a->npend == a->cap_pend) {
		size_t cap = a->cap_pend ? a->cap_pend * 2 : 64;
		struct mfs_pending_free *v = realloc(a->pend, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->pend = v;
		a->cap_pend = cap;
	}
	a->pend[a->npend].start = start;
	a->pend[a->npend].len = len;
	a->npend++;
	return 0;
}

/*
 * Return clean blocks: bitmap first, with each piece pending (bm_disk_update),
 * then (after the commit) the index, or nothing more for a group that is not
 * loaded: its bitmap is read when it is needed.
 */
static int free_clean(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	uint64_t data_start = sb64(fs->sb.data_start);

	return bm_disk_update(fs, txn, sb64(fs->sb.data_bitmap_start), start - data_start, len,
	                      false, data_start);
}

int mfs_alloc_data_state(struct mfs *fs)
{
	struct mfs_alloc *a = A(fs);
	int st = MFS_SPACE_NONE;

	pthread_mutex_lock(&fs->alloc_lock);
	if (a->npend || a->inflight)
		st = MFS_SPACE_PENDING;
	else if (a->by_size || a->nloaded < a->ngroups)
		st = MFS_SPACE_FREE;
	pthread_mutex_unlock(&fs->alloc_lock);
	return st;
}

/*
 * The commit hooks (mfs_journal_set_hooks).  begin: the running
 * transaction's frees become the batch of the commit under way; end: once it
 * is durable, they return to the free extent index.
 */
static void *alloc_commit_begin(struct mfs *fs)
{
	struct mfs_alloc *a = A(fs);
	struct mfs_pending_batch *b;

	if (!a)
		return NULL;
	pthread_mutex_lock(&fs->alloc_lock);
	if (!a->npend || !(b = malloc(sizeof(*b)))) {
		/* nothing to release (or no memory: the frees stay pending and are released
		 * by a later commit, which is later than needed, never earlier) */
		pthread_mutex_unlock(&fs->alloc_lock);
		return NULL;
	}
	b->v = a->pend;
	b->n = a->npend;
	b->next = a->inflight;
	a->inflight = b;
	a->pend = NULL;
	a->npend = a->cap_pend = 0;
	pthread_mutex_unlock(&fs->alloc_lock);
	return b;
}

static void alloc_commit_end(struct mfs *fs, void *batch, bool committed)
{
	struct mfs_pending_batch *b = batch;
	size_t i;

	if (!b)
		return;
	pthread_mutex_lock(&fs->alloc_lock);
	for (struct mfs_pending_batch **pp = &A(fs)->inflight; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	/* Only into loaded groups: an unloaded group finds them clear in its bitmap. */
	for (i = 0; committed && i < b->n; i++)
		if (fx_add_loaded(fs, A(fs), b->v[i].start, b->v[i].len))
			break; /* no memory: the rest stays unused until remount */
	pthread_mutex_unlock(&fs->alloc_lock);
	/* not committed: the frees were discarded with the transaction, the blocks are
	 * still in use on disk; leaving them out of the index keeps memory consistent */
	free(b->v);
	free(b);
}

static struct mfs_btree qtree(struct mfs *fs)
{
	struct mfs_btree bt = {.root = sb64(fs->sb.quarantine_root),
	                       .depth = (uint16_t)le32toh(fs->sb.quarantine_depth),
	                       .kind = MFS_TREE_QUARANTINE,
	                       .owner = 0};
	return bt;
}

/* Store a changed root, journaled in @txn (mfs_super_roots_log: the superblock is not). */
static int qtree_store(struct mfs *fs, struct mfs_txn *txn, const struct mfs_btree *bt)
{
	if (fs->sb.quarantine_root == htole64(bt->root) &&
	    fs->sb.quarantine_depth == htole32(bt->depth))
		return 0;
	fs->sb.quarantine_root = htole64(bt->root);
	fs->sb.quarantine_depth = htole32(bt->depth);
	return mfs_super_roots_log(fs, txn);
}

/* qlock held: put [start, start + len) (marked used in the bitmap) in the quarantine tree. */
static int quarantine_insert(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	struct mfs_btree bt = qtree(fs);
	uint64_t v = htole64(len);
	int ret, r;

	ret = mfs_bt_insert(fs, txn, &bt, start, &v, sizeof(v));
	r = qtree_store(fs, txn, &bt);
	ret = ret ? ret : r;
	if (!ret)
		fprintf(stderr, "mendfs: data blocks %llu-%llu are poisoned: quarantined\n",
		        (unsigned long long)start, (unsigned long long)(start + len - 1));
	return ret;
}

int mfs_free_data(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	struct mfs_alloc *a = A(fs);
	uint64_t data_start = sb64(fs->sb.data_start), data_len = sb64(fs->sb.data_len);
	struct mfs_brange *pz;
	unsigned npz;
	uint64_t pos = start;
	bool dup;
	int ret;

	if (!txn || !len || start < data_start || start + len > data_start + data_len ||
	    start + len < start)
		return -EINVAL;
	pthread_mutex_lock(&fs->alloc_lock);
	dup = fx_overlaps(a, start, len);
	pthread_mutex_unlock(&fs->alloc_lock);
	if (dup) {
		fprintf(stderr, "mendfs: freeing data blocks %llu-%llu: some are already free\n",
		        (unsigned long long)start, (unsigned long long)(start + len - 1));
		return -EUCLEAN;
	}

	ret = poisoned_blocks(fs, start, len, &pz, &npz);
	if (ret)
		return ret;
	for (unsigned i = 0; ret == 0 && i <= npz; i++) {
		uint64_t qs = i < npz ? pz[i].start : start + len;
		uint64_t qe = i < npz ? pz[i].start + pz[i].len : start + len;

		if (qs < start)
			qs = start;
		if (qe > start + len)
			qe = start + len;
		if (qs > pos)
			ret = free_clean(fs, txn, pos, qs - pos);
		if (!ret && qe > qs) {
			pthread_mutex_lock(&a->qlock);
			ret = quarantine_insert(fs, txn, qs, qe - qs);
			pthread_mutex_unlock(&a->qlock);
		}
		if (qe > pos)
			pos = qe;
	}
	free(pz);
	return ret;
}

/*
 * Releasing runs in bounded steps (docs/DESIGN.md §3): a unit is one entry, or
 * the first QREL_UNIT_BLOCKS blocks of a longer one and no more than
 * QREL_UNIT_PIECES poisoned pieces (the rest of the entry is put back as an
 * entry of its own).  Its worst case: the entry's delete, a re-insert per
 * poisoned piece and one for the rest, each a path with a split or merge per
 * level and a new root (depth + 3 blocks), the roots record, and the data
 * bitmap blocks of the unit's clean blocks.
 */
#define QREL_UNIT_BLOCKS (4ull * MFS_BITMAP_BITS)
#define QREL_UNIT_PIECES 8u

static unsigned qrel_unit_worst(const struct mfs_btree *bt)
{
	return (QREL_UNIT_PIECES + 2) * (bt->depth + 3u) + 1 + 5;
}

/* The first entry of an iteration. */
struct qfirst {
	uint64_t key, len;
	bool found;
	int err;
};

static int qfirst_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct qfirst *q = arg;
	uint64_t v;

	if (len != sizeof(v)) {
		q->err = -EUCLEAN;
		return 1;
	}
	memcpy(&v, val, sizeof(v));
	q->key = key;
	q->len = le64toh(v);
	q->found = true;
	return 1;
}

/*
 * qlock held, in @txn: release the clean blocks of one unit of the first
 * quarantine entry that intersects [*pos, end) (or the one straddling *pos);
 * *pos moves past what was looked at.  Returns 0, 1 when there is no such
 * entry, or -errno.
 */
static int qrel_unit(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t *pos,
                     uint64_t end)
{
	uint64_t key, v, es, el, ce, at;
	uint16_t vlen = sizeof(v);
	struct mfs_brange *pz;
	unsigned npz;
	int ret;

	ret = mfs_bt_lookup_le(fs, bt, *pos, &key, &v, &vlen);
	if (ret && ret != -ENOENT)
		return ret;
	if (ret == 0 && vlen != sizeof(v))
		return -EUCLEAN;
	if (ret == 0 && key + le64toh(v) > *pos) {
		es = key;
		el = le64toh(v);
	} else {
		struct qfirst q = {0};

		ret = mfs_bt_iterate(fs, bt, *pos, qfirst_fn, &q);
		if (ret < 0)
			return ret;
		if (q.err)
			return q.err;
		if (!q.found || q.key >= end)
			return 1;
		es = q.key;
		el = q.len;
	}
	/* the unit: at most QREL_UNIT_BLOCKS, at most QREL_UNIT_PIECES poisoned pieces */
	ce = el > QREL_UNIT_BLOCKS ? es + QREL_UNIT_BLOCKS : es + el;
	ret = poisoned_blocks(fs, es, ce - es, &pz, &npz);
	if (ret)
		return ret;
	if (npz > QREL_UNIT_PIECES) {
		ce = pz[QREL_UNIT_PIECES].start;
		npz = QREL_UNIT_PIECES;
	}
	for (unsigned j = 0; j < npz; j++) {
		if (pz[j].start < es) {
			pz[j].len -= es - pz[j].start;
			pz[j].start = es;
		}
		if (pz[j].start + pz[j].len > ce)
			pz[j].len = ce - pz[j].start;
	}
	*pos = ce;
	if (ce == es + el && npz == 1 && pz[0].start == es && pz[0].len == el) {
		free(pz); /* still entirely poisoned */
		return 0;
	}
	ret = mfs_bt_delete(fs, txn, bt, es);
	if (!ret && ce < es + el)
		ret = mfs_bt_insert(fs, txn, bt, ce, &(uint64_t){htole64(es + el - ce)},
		                    sizeof(uint64_t));
	if (!ret)
		ret = qtree_store(fs, txn, bt);
	/* Clean pieces go back to the free space, poisoned ones stay quarantined. */
	at = es;
	for (unsigned j = 0; ret == 0 && j <= npz; j++) {
		uint64_t qs = j < npz ? pz[j].start : ce;
		uint64_t qe = j < npz ? pz[j].start + pz[j].len : ce;

		if (qs > at)
			ret = free_clean(fs, txn, at, qs - at);
		if (!ret && qe > qs) {
			ret = mfs_bt_insert(fs, txn, bt, qs, &(uint64_t){htole64(qe - qs)},
			                    sizeof(uint64_t));
			if (!ret)
				ret = qtree_store(fs, txn, bt);
		}
		if (qe > at)
			at = qe;
	}
	free(pz);
	return ret;
}

int mfs_quarantine_release(struct mfs *fs, uint64_t start, uint64_t len)
{
	struct mfs_alloc *a = A(fs);
	uint64_t pos = start, end = start + len;
	int ret = 0;

	if (!len || end < start)
		return -EINVAL;
	while (!ret) {
		struct mfs_txn *txn;
		struct mfs_btree bt;
		unsigned units = 0;
		int r;

		pthread_mutex_lock(&a->qlock);
		bt = qtree(fs);
		pthread_mutex_unlock(&a->qlock);
		if (!bt.root)
			break;
		ret = mfs_txn_begin_step(fs, qrel_unit_worst(&bt), &txn);
		if (ret)
			break;
		pthread_mutex_lock(&a->qlock);
		/* units while the worst case of one more fits the step, always one */
		do {
			bt = qtree(fs);
			ret = bt.root ? qrel_unit(fs, txn, &bt, &pos, end) : 1;
			units++;
		} while (!ret && pos < end && mfs_txn_room(txn) >= qrel_unit_worst(&bt));
		pthread_mutex_unlock(&a->qlock);
		r = mfs_txn_end(txn);
		if (ret == 1 || (!ret && pos >= end)) {
			ret = r;
			break;
		}
		ret = ret ? ret : r;
	}
	return ret;
}

/* --- meta zone and inodes ------------------------------------------------------------ */

static int bm_alloc(struct mfs *fs, struct mfs_txn *txn, struct mfs_bmap *m, uint64_t *le_free,
                    uint64_t *bit)
{
	uint64_t i, need;
	int ret;

	if (!txn)
		return -EINVAL;
	pthread_mutex_lock(&fs->alloc_lock);
	while ((i = bm_find(m, &need)) == UINT64_MAX && need != UINT64_MAX) {
		pthread_mutex_unlock(&fs->alloc_lock);
		ret = bm_block_load(fs, m, need, false, NULL);
		if (ret)
			return ret;
		pthread_mutex_lock(&fs->alloc_lock);
	}
	if (i == UINT64_MAX) {
		pthread_mutex_unlock(&fs->alloc_lock);
		return -ENOSPC;
	}
	bm_set(m, i, true);
	m->hint = i + 1;
	counter_add(fs, le_free, -1);
	pthread_mutex_unlock(&fs->alloc_lock);

	ret = bm_disk_update(fs, txn, m->disk, i, 1, true, 0);
	if (ret) {
		pthread_mutex_lock(&fs->alloc_lock);
		bm_set(m, i, false);
		counter_add(fs, le_free, 1);
		pthread_mutex_unlock(&fs->alloc_lock);
		return ret;
	}
	*bit = i;
	return 0;
}

static int bm_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_bmap *m, uint64_t *le_free,
                   uint64_t i)
{
	bool used;
	int ret;

	if (!txn)
		return -EINVAL;
	pthread_mutex_lock(&fs->alloc_lock);
	/* not loaded: the bit on disk says (bm_disk_update refuses a clear one) */
	used = m->loaded[i / MFS_BITMAP_BITS] != G_LOADED || bm_test(m, i);
	pthread_mutex_unlock(&fs->alloc_lock);
	if (!used)
		return -EUCLEAN;
	ret = bm_disk_update(fs, txn, m->disk, i, 1, false, 0);
	if (ret)
		return ret;
	pthread_mutex_lock(&fs->alloc_lock);
	if (m->loaded[i / MFS_BITMAP_BITS] == G_LOADED)
		bm_set(m, i, false);
	counter_add(fs, le_free, 1);
	pthread_mutex_unlock(&fs->alloc_lock);
	return 0;
}

int mfs_alloc_meta(struct mfs *fs, struct mfs_txn *txn, uint64_t *blocknr)
{
	uint64_t i;
	int ret = bm_alloc(fs, txn, &A(fs)->meta, &fs->sb.free_meta, &i);

	if (!ret)
		*blocknr = sb64(fs->sb.meta_start) + i;
	return ret;
}

int mfs_free_meta(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr)
{
	uint64_t meta_start = sb64(fs->sb.meta_start);
	uint64_t fixed_end = sb64(fs->sb.inode_table_start) + sb64(fs->sb.inode_table_blocks);
	int ret;

	if (blocknr < fixed_end || blocknr >= meta_start + sb64(fs->sb.meta_len))
		return -EINVAL;
	ret = bm_free(fs, txn, &A(fs)->meta, &fs->sb.free_meta, blocknr - meta_start);
	if (ret == -EUCLEAN)
		fprintf(stderr, "mendfs: freeing meta block %llu: already free\n",
		        (unsigned long long)blocknr);
	if (!ret)
		mfs_meta_forget(fs, blocknr);
	return ret;
}

int mfs_alloc_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t *ino)
{
	uint64_t i;
	int ret = bm_alloc(fs, txn, &A(fs)->ino, &fs->sb.free_inodes, &i);

	if (!ret)
		*ino = i + 1;
	return ret;
}

int mfs_free_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t ino)
{
	int ret;

	if (ino <= MFS_ROOT_INO || ino > sb64(fs->sb.nr_inodes))
		return -EINVAL;
	ret = bm_free(fs, txn, &A(fs)->ino, &fs->sb.free_inodes, ino - 1);
	if (ret == -EUCLEAN)
		fprintf(stderr, "mendfs: freeing inode %llu: already free\n",
		        (unsigned long long)ino);
	return ret;
}
