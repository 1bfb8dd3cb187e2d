/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the B+trees (fs/core/btree.c).
 *
 * Most tests run on an in-memory mock of the metadata layer (blocks in a hash
 * table, a meta allocator counting live blocks, a transaction that checks the
 * content lock is held on every mfs_txn_dirty): an empty tree; 1 000 000 keys
 * inserted, looked up, updated and deleted in random order with values of
 * 0..1024 bytes, checked against a sorted reference array and by a structure
 * checker (key order across nodes, exact separators, levels, minimum fill) at
 * checkpoints; lookup_le at and between keys; values grown until a split;
 * iteration from mid-range and early stop; split/merge under ascending,
 * descending and random churn; allocation failures at every step; corrupt
 * nodes (slot offsets, key order, levels, counts, child pointers, owners,
 * separators) reported as -EUCLEAN without a crash, and a random bit-flip
 * fuzzer; lookups of one tree in threads while another is modified.  With
 * the real layer (meta.c, journal.c, alloc.c on an image made by
 * mkfs.mendfs) a random workload is checked the same way, across commits,
 * checkpoint and a remount.
 *
 * Build: meson (the mock is built in: fs/core/btree*.c are included with their
 * layer calls renamed to the mock's, and the real tests use libmendfs-core), or
 * by hand against the mock only:
 *   gcc -std=gnu11 -D_GNU_SOURCE -DMFS_BTREE_MOCK tests/unit/test_btree.c fs/core/btree*.c \
 *       -Iinclude -Ifs/core -Iblk -lcheck -lsubunit -lm -lpthread -lrt -lxxhash
 * BTREE_KEYS=n sets the size of the scale test (default 1000000), BTREE_FUZZ=n
 * the fuzzer's rounds (default 300).
 */
#include <check.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mfs.h"

/*
 * Check's ck_assert_* records every passing assertion through its message
 * channel (a write per call): far too slow for millions of checks, so the hot
 * paths use these, which only talk to Check on failure.
 */
#define T_CMP(a, op, b, fmt, type)                                                                 \
	do {                                                                                       \
		type _a = (type)(a), _b = (type)(b);                                               \
		if (!(_a op _b))                                                                   \
			ck_abort_msg("%s %s %s: " fmt " vs " fmt, #a, #op, #b, _a, _b);            \
	} while (0)
#define T_UEQ(a, b) T_CMP(a, ==, b, "%llu", unsigned long long)
#define T_UNE(a, b) T_CMP(a, !=, b, "%llu", unsigned long long)
#define T_ULT(a, b) T_CMP(a, <, b, "%llu", unsigned long long)
#define T_ULE(a, b) T_CMP(a, <=, b, "%llu", unsigned long long)
#define T_UGT(a, b) T_CMP(a, >, b, "%llu", unsigned long long)
#define T_UGE(a, b) T_CMP(a, >=, b, "%llu", unsigned long long)
#define T_IEQ(a, b) T_CMP(a, ==, b, "%lld", long long)
#define T_IGT(a, b) T_CMP(a, >, b, "%lld", long long)
#define T_IGE(a, b) T_CMP(a, >=, b, "%lld", long long)
#define T_ASSERT(e)                                                                                \
	do {                                                                                       \
		if (!(e))                                                                          \
			ck_abort_msg("%s", #e);                                                    \
	} while (0)
#define T_MSG(e, ...)                                                                              \
	do {                                                                                       \
		if (!(e))                                                                          \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/* --- the mock metadata layer --------------------------------------------------------- */

#ifdef MFS_BTREE_MOCK
#define MOCK(name)   mfs_##name
#define MOCK_LINKAGE /* the real names, linked with fs/core/btree.c */
#else
#define MOCK(name)   mock_##name
#define MOCK_LINKAGE static
#endif

#define MOCK_META_START 64ull
#define MOCK_META_LEN   (1ull << 22)
#define MOCK_HASH       (1u << 18)

struct mock_blk {
	struct mfs_buf buf;
	struct mock_blk *next;
	uint8_t data[MFS_BLOCK_SIZE] __attribute__((aligned(64)));
};

static struct {
	pthread_mutex_t lock;
	struct mock_blk **tab;
	uint8_t *inuse; /* per meta zone block */
	uint64_t *freelist;
	size_t nfree;
	uint64_t next; /* next never-used block */
	long live;     /* allocated meta blocks */
	long refs;     /* buffer references held */
	long errors;   /* contract violations seen */
	long fail_in;  /* > 0: that many allocations from now, the last fails */
	unsigned long dirties;
} mock = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int mock_txn_obj;
#define MOCK_TXN ((struct mfs_txn *)&mock_txn_obj)

static void mock_error(const char *what, uint64_t blocknr)
{
	fprintf(stderr, "mock: %s (block %llu)\n", what, (unsigned long long)blocknr);
	mock.errors++;
}

static struct mock_blk **mock_slot(uint64_t blocknr)
{
	struct mock_blk **pp = &mock.tab[(blocknr * 0x9e3779b97f4a7c15ull) >> 46];

	while (*pp && (*pp)->buf.blocknr != blocknr)
		pp = &(*pp)->next;
	return pp;
}

static const struct mfs_bt_alloc mock_bt_alloc;

static void mock_init(struct mfs *fs)
{
	memset(fs, 0, sizeof(*fs));
	fs->bt_alloc = &mock_bt_alloc;
	fs->sb.meta_start = MOCK_META_START;
	fs->sb.meta_len = MOCK_META_LEN;
	mock.tab = calloc(MOCK_HASH, sizeof(*mock.tab));
	mock.inuse = calloc(MOCK_META_LEN, 1);
	mock.freelist = malloc(MOCK_META_LEN * sizeof(*mock.freelist));
	T_ASSERT(mock.tab && mock.inuse && mock.freelist);
	mock.nfree = 0;
	mock.next = MOCK_META_START;
	mock.live = mock.refs = mock.errors = mock.fail_in = 0;
	mock.dirties = 0;
}

static void mock_fini(void)
{
	unsigned i;

	for (i = 0; i < MOCK_HASH; i++) {
		while (mock.tab[i]) {
			struct mock_blk *mb = mock.tab[i];

			mock.tab[i] = mb->next;
			pthread_mutex_destroy(&mb->buf.lock);
			free(mb);
		}
	}
	free(mock.tab);
	free(mock.inuse);
	free(mock.freelist);
	mock.tab = NULL;
}

MOCK_LINKAGE int MOCK(meta_read)(struct mfs *fs, uint64_t blocknr, uint16_t type,
                                 struct mfs_buf **bp)
{
	struct mock_blk *mb;
	struct mfs_meta_hdr *hdr;
	int ret = 0;

	(void)fs;
	pthread_mutex_lock(&mock.lock);
	mb = *mock_slot(blocknr);
	if (!mb) {
		/* never written: what a device would return is not a metadata block */
		ret = -EUCLEAN;
	} else {
		hdr = (struct mfs_meta_hdr *)mb->data;
		if (hdr->magic != MFS_META_MAGIC || hdr->blocknr != blocknr ||
		    (type && hdr->type != type))
			ret = -EUCLEAN;
	}
	if (!ret) {
		atomic_fetch_add(&mb->buf.ref, 1);
		mock.refs++;
		*bp = &mb->buf;
	}
	pthread_mutex_unlock(&mock.lock);
	return ret;
}

MOCK_LINKAGE int MOCK(meta_new)(struct mfs *fs, uint64_t blocknr, uint16_t type, uint64_t owner,
                                struct mfs_buf **bp)
{
	struct mock_blk **pp, *mb;
	struct mfs_meta_hdr *hdr;

	(void)fs;
	pthread_mutex_lock(&mock.lock);
	pp = mock_slot(blocknr);
	mb = *pp;
	if (!mb) {
		mb = aligned_alloc(64, sizeof(*mb));
		T_ASSERT(mb);
		memset(&mb->buf, 0, sizeof(mb->buf));
		pthread_mutex_init(&mb->buf.lock, NULL);
		mb->buf.blocknr = blocknr;
		mb->buf.data = mb->data;
		mb->next = NULL;
		*pp = mb;
	}
	if (blocknr < MOCK_META_START || !mock.inuse[blocknr - MOCK_META_START])
		mock_error("meta_new of an unallocated block", blocknr);
	memset(mb->data, 0, MFS_BLOCK_SIZE);
	hdr = (struct mfs_meta_hdr *)mb->data;
	hdr->magic = MFS_META_MAGIC;
	hdr->type = type;
	hdr->blocknr = blocknr;
	hdr->owner = owner;
	mb->buf.type = type;
	mb->buf.uptodate = true;
	atomic_fetch_add(&mb->buf.ref, 1);
	mock.refs++;
	*bp = &mb->buf;
	pthread_mutex_unlock(&mock.lock);
	return 0;
}

MOCK_LINKAGE void MOCK(buf_put)(struct mfs_buf *b)
{
	pthread_mutex_lock(&mock.lock);
	if (atomic_fetch_sub(&b->ref, 1) <= 0)
		mock_error("reference count below zero", b->blocknr);
	mock.refs--;
	pthread_mutex_unlock(&mock.lock);
}

MOCK_LINKAGE void MOCK(meta_forget)(struct mfs *fs, uint64_t blocknr)
{
	struct mock_blk **pp, *mb;

	(void)fs;
	pthread_mutex_lock(&mock.lock);
	pp = mock_slot(blocknr);
	mb = *pp;
	if (mb && atomic_load(&mb->buf.ref) != 0)
		mock_error("forget of a referenced block", blocknr);
	if (mb) {
		*pp = mb->next;
		pthread_mutex_destroy(&mb->buf.lock);
		free(mb);
	}
	pthread_mutex_unlock(&mock.lock);
}

MOCK_LINKAGE void MOCK(txn_dirty)(struct mfs_txn *txn, struct mfs_buf *b)
{
	if (pthread_mutex_trylock(&b->lock) == 0) {
		pthread_mutex_unlock(&b->lock);
		mock_error("txn_dirty without the content lock", b->blocknr);
	}
	pthread_mutex_lock(&mock.lock);
	if (txn != MOCK_TXN)
		mock_error("dirty in a foreign transaction", b->blocknr);
	if (!mock.inuse[b->blocknr - MOCK_META_START])
		mock_error("dirty of a free block", b->blocknr);
	b->dirty = true;
	mock.dirties++;
	pthread_mutex_unlock(&mock.lock);
}

MOCK_LINKAGE int MOCK(alloc_meta)(struct mfs *fs, struct mfs_txn *txn, uint64_t *blocknr)
{
	int ret = 0;

	(void)fs;
	(void)txn;
	pthread_mutex_lock(&mock.lock);
	if (mock.fail_in > 0 && --mock.fail_in == 0)
		ret = -ENOSPC;
	else if (mock.nfree)
		*blocknr = mock.freelist[--mock.nfree];
	else if (mock.next < MOCK_META_START + MOCK_META_LEN)
		*blocknr = mock.next++;
	else
		ret = -ENOSPC;
	if (!ret) {
		mock.inuse[*blocknr - MOCK_META_START] = 1;
		mock.live++;
	}
	pthread_mutex_unlock(&mock.lock);
	return ret;
}

MOCK_LINKAGE int MOCK(free_meta)(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr)
{
	int ret = 0;

	(void)fs;
	(void)txn;
	pthread_mutex_lock(&mock.lock);
	if (blocknr < MOCK_META_START || blocknr - MOCK_META_START >= MOCK_META_LEN ||
	    !mock.inuse[blocknr - MOCK_META_START]) {
		mock_error("free of a free block", blocknr);
		ret = -EINVAL;
	} else {
		mock.inuse[blocknr - MOCK_META_START] = 0;
		mock.freelist[mock.nfree++] = blocknr;
		mock.live--;
	}
	pthread_mutex_unlock(&mock.lock);
	return ret;
}

/* The trees get their node blocks through fs->bt_alloc. */
static const struct mfs_bt_alloc mock_bt_alloc = {.alloc = MOCK(alloc_meta),
                                                  .free = MOCK(free_meta)};

/*
 * Under meson the test also links the real layer, so the code under test is
 * compiled a second time here, calling the mock and renamed mock_bt_*.
 */
#ifndef MFS_BTREE_MOCK
#define mfs_meta_read    mock_meta_read
#define mfs_meta_new     mock_meta_new
#define mfs_buf_put      mock_buf_put
#define mfs_meta_forget  mock_meta_forget
#define mfs_txn_dirty    mock_txn_dirty
#define mfs_bt_lookup    mock_bt_lookup
#define mfs_bt_lookup_le mock_bt_lookup_le
#define mfs_bt_insert    mock_bt_insert
#define mfs_bt_update    mock_bt_update
#define mfs_bt_delete    mock_bt_delete
#define mfs_bt_iterate   mock_bt_iterate
#define mfs_bt_destroy   mock_bt_destroy
#define MFS_BT_SHARED    static /* the tree's shared helpers: this unit's own copies */
#include "btree_node.c"
#include "btree.c"
#include "btree_delete.c"
#include "btree_insert.c"
#undef mfs_meta_read
#undef mfs_meta_new
#undef mfs_buf_put
#undef mfs_meta_forget
#undef mfs_txn_dirty
#undef mfs_bt_lookup
#undef mfs_bt_lookup_le
#undef mfs_bt_insert
#undef mfs_bt_update
#undef mfs_bt_delete
#undef mfs_bt_iterate
#undef mfs_bt_destroy
#define BT(name) mock_bt_##name
#else
#define BT(name) mfs_bt_##name
#endif

/* --- the layer a test runs on ------------------------------------------------------------ */

struct layer {
	int (*lookup)(struct mfs *, const struct mfs_btree *, uint64_t, void *, uint16_t *);
	int (*lookup_le)(struct mfs *, const struct mfs_btree *, uint64_t, uint64_t *, void *,
	                 uint16_t *);
	int (*insert)(struct mfs *, struct mfs_txn *, struct mfs_btree *, uint64_t, const void *,
	              uint16_t);
	int (*update)(struct mfs *, struct mfs_txn *, struct mfs_btree *, uint64_t, const void *,
	              uint16_t);
	int (*delete)(struct mfs *, struct mfs_txn *, struct mfs_btree *, uint64_t);
	int (*iterate)(struct mfs *, const struct mfs_btree *, uint64_t, mfs_bt_iter_fn *, void *);
	int (*destroy)(struct mfs *, struct mfs_txn *, struct mfs_btree *);
	int (*meta_read)(struct mfs *, uint64_t, uint16_t, struct mfs_buf **);
	void (*buf_put)(struct mfs_buf *);
};

static const struct layer mock_layer = {
        BT(lookup),  BT(lookup_le), BT(insert),      BT(update),    BT(delete),
        BT(iterate), BT(destroy),   MOCK(meta_read), MOCK(buf_put),
};

static const struct layer *L = &mock_layer;
static struct mfs mock_fs;
static struct mfs *fs;
static struct mfs_txn *txn;

static void mock_setup(void)
{
	mock_init(&mock_fs);
	fs = &mock_fs;
	txn = MOCK_TXN;
	L = &mock_layer;
}

static void mock_teardown(void)
{
	mock_fini();
}

/* Every reference returned, no contract violation. */
static void mock_clean(void)
{
	T_IEQ(mock.refs, 0);
	T_IEQ(mock.errors, 0);
}

/* --- values and the reference -------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rng_state = 1;

static uint64_t rnd(void)
{
	return mix64(rng_state++);
}

/* The value of @key at version @ver: mostly small, some empty, some large. */
static uint16_t value_of(uint64_t key, unsigned ver, uint8_t *buf)
{
	uint64_t h = mix64(key * 31 + ver);
	unsigned r = h % 100, len, i;

	if (r < 8)
		len = 0;
	else if (r < 10)
		len = 200 + (unsigned)((h >> 8) % (MFS_BT_MAX_VALUE - 199));
	else
		len = 1 + (unsigned)((h >> 8) % 48);
	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)((h >> (i % 57)) ^ i);
	return (uint16_t)len;
}

static void ins(struct mfs_btree *bt, uint64_t key, unsigned ver)
{
	uint8_t v[MFS_BT_MAX_VALUE];
	uint16_t len = value_of(key, ver, v);
	int ret = L->insert(fs, txn, bt, key, v, len);

	T_MSG(ret == 0, "insert %llu: %d", (unsigned long long)key, ret);
}

static void upd(struct mfs_btree *bt, uint64_t key, unsigned ver)
{
	uint8_t v[MFS_BT_MAX_VALUE];
	uint16_t len = value_of(key, ver, v);
	int ret = L->update(fs, txn, bt, key, v, len);

	T_MSG(ret == 0, "update %llu: %d", (unsigned long long)key, ret);
}

static void del(struct mfs_btree *bt, uint64_t key)
{
	int ret = L->delete (fs, txn, bt, key);

	T_MSG(ret == 0, "delete %llu: %d", (unsigned long long)key, ret);
}

static void expect(const struct mfs_btree *bt, uint64_t key, unsigned ver)
{
	uint8_t want[MFS_BT_MAX_VALUE], got[MFS_BT_MAX_VALUE];
	uint16_t wlen = value_of(key, ver, want), glen = sizeof(got);
	int ret = L->lookup(fs, bt, key, got, &glen);

	T_MSG(ret == 0, "lookup %llu: %d", (unsigned long long)key, ret);
	T_UEQ(glen, wlen);
	T_ASSERT(memcmp(got, want, wlen) == 0);
}

static void expect_absent(const struct mfs_btree *bt, uint64_t key)
{
	uint16_t len = 0;

	T_IEQ(L->lookup(fs, bt, key, NULL, &len), -ENOENT);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A set of distinct keys, sorted, with per-key presence and value version. */
struct ref {
	size_t n;
	uint64_t *keys;
	uint8_t *present, *ver;
	size_t count;
};

static void ref_init(struct ref *r, size_t n, uint64_t seed)
{
	size_t i;

	r->n = n;
	r->keys = malloc(n * sizeof(*r->keys));
	r->present = calloc(n, 1);
	r->ver = calloc(n, 1);
	T_ASSERT(r->keys && r->present && r->ver);
	/* mix64 is a bijection: distinct inputs, distinct keys */
	for (i = 0; i < n; i++)
		r->keys[i] = mix64(seed + i);
	qsort(r->keys, n, sizeof(*r->keys), cmp_u64);
	r->count = 0;
}

static void ref_free(struct ref *r)
{
	free(r->keys);
	free(r->present);
	free(r->ver);
}

static size_t *perm_new(size_t n)
{
	size_t *p = malloc(n * sizeof(*p)), i;

	T_ASSERT(p);
	for (i = 0; i < n; i++)
		p[i] = i;
	for (i = n; i > 1; i--) {
		size_t j = rnd() % i, t = p[i - 1];

		p[i - 1] = p[j];
		p[j] = t;
	}
	return p;
}

/* Iteration matches the reference exactly (order, keys, values, count). */
struct cmp_iter {
	const struct ref *r;
	size_t pos, seen;
};

static int cmp_cb(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct cmp_iter *c = arg;
	const struct ref *r = c->r;
	uint8_t want[MFS_BT_MAX_VALUE];

	while (c->pos < r->n && !r->present[c->pos])
		c->pos++;
	T_MSG(c->pos < r->n, "extra key %llu", (unsigned long long)key);
	T_MSG(r->keys[c->pos] == key, "key %llu, expected %llu", (unsigned long long)key,
	      (unsigned long long)r->keys[c->pos]);
	T_UEQ(len, value_of(key, r->ver[c->pos], want));
	T_ASSERT(memcmp(val, want, len) == 0);
	c->pos++;
	c->seen++;
	return 0;
}

static void ref_compare(const struct mfs_btree *bt, const struct ref *r)
{
	struct cmp_iter c = {.r = r};

	T_IEQ(L->iterate(fs, bt, 0, cmp_cb, &c), 0);
	T_UEQ(c.seen, r->count);
}

/* --- the structure checker ----------------------------------------------------------- */

#define T_HDR        ((unsigned)sizeof(struct mfs_meta_hdr))
#define T_SPACE      (MFS_BLOCK_SIZE - T_HDR)
#define T_LEAF_MIN   (T_SPACE / 4)
#define T_NODE_MAX   ((unsigned)MFS_BT_NODE_MAX)
#define T_NODE_MIN   (T_NODE_MAX / 4)
#define T_LEAF_SLOTS (T_SPACE / (unsigned)sizeof(struct mfs_bt_slot))

struct chk {
	uint64_t entries, leaves, nodes, prev;
	bool have_prev;
};

static int cmp_range(const void *a, const void *b)
{
	const unsigned *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/*
 * Check the subtree at @blocknr: header, level, owner, kind; keys strictly
 * increasing across the whole tree; the node's first key equal to its
 * separator (@lo) and its last below @hi; values inside the block, not over
 * the slots or each other; minimum fill below the root.
 */
static void check_node(const struct mfs_btree *bt, uint64_t blocknr, unsigned level, bool root,
                       bool has_lo, uint64_t lo, bool has_hi, uint64_t hi, struct chk *c)
{
	uint8_t blk[MFS_BLOCK_SIZE];
	struct mfs_meta_hdr *hdr = (struct mfs_meta_hdr *)blk;
	struct mfs_buf *b;
	unsigned nr, i;

	T_UGE(blocknr, fs->sb.meta_start);
	T_ULT(blocknr - fs->sb.meta_start, fs->sb.meta_len);
	T_IEQ(L->meta_read(fs, blocknr, 0, &b), 0);
	pthread_mutex_lock(&b->lock);
	memcpy(blk, b->data, MFS_BLOCK_SIZE);
	pthread_mutex_unlock(&b->lock);
	L->buf_put(b);

	T_UEQ(hdr->magic, MFS_META_MAGIC);
	T_UEQ(hdr->blocknr, blocknr);
	T_UEQ(hdr->type, level ? MFS_T_BTREE_NODE : MFS_T_BTREE_LEAF);
	T_UEQ(hdr->level, level);
	T_UEQ(hdr->owner, bt->owner);
	T_UEQ(hdr->tree, bt->kind);
	nr = hdr->nr_items;
	T_UGE(nr, 1);

	if (level) {
		struct mfs_bt_ptr *p = (struct mfs_bt_ptr *)(blk + T_HDR);

		c->nodes++;
		T_ULE(nr, T_NODE_MAX);
		T_UGE(nr, root ? 2 : T_NODE_MIN);
		if (has_lo)
			T_UEQ(p[0].key, lo);
		for (i = 1; i < nr; i++)
			T_UGT(p[i].key, p[i - 1].key);
		if (has_hi)
			T_ULT(p[nr - 1].key, hi);
		for (i = 0; i < nr; i++)
			check_node(bt, p[i].child, level - 1, false, true, p[i].key,
			           i + 1 < nr ? true : has_hi, i + 1 < nr ? p[i + 1].key : hi, c);
	} else {
		struct mfs_bt_slot *s = (struct mfs_bt_slot *)(blk + T_HDR);
		unsigned ranges[T_LEAF_SLOTS][2], nrange = 0, used = nr * sizeof(*s);
		unsigned slot_end = T_HDR + nr * (unsigned)sizeof(*s);

		c->leaves++;
		T_ULE(nr, T_LEAF_SLOTS);
		if (has_lo)
			T_UEQ(s[0].key, lo);
		for (i = 0; i < nr; i++) {
			if (c->have_prev)
				T_UGT(s[i].key, c->prev);
			c->prev = s[i].key;
			c->have_prev = true;
			if (has_hi)
				T_ULT(s[i].key, hi);
			T_ULE(s[i].len, MFS_BT_MAX_VALUE);
			T_ULE(s[i].off + s[i].len, MFS_BLOCK_SIZE);
			used += s[i].len;
			if (s[i].len) {
				T_UGE(s[i].off, slot_end);
				ranges[nrange][0] = s[i].off;
				ranges[nrange++][1] = s[i].off + s[i].len;
			}
		}
		qsort(ranges, nrange, sizeof(ranges[0]), cmp_range);
		for (i = 1; i < nrange; i++)
			T_ULE(ranges[i - 1][1], ranges[i][0]);
		if (!root)
			T_MSG(used >= T_LEAF_MIN, "leaf %llu uses %u bytes",
			      (unsigned long long)blocknr, used);
		c->entries += nr;
	}
}

/* Check the whole tree; returns its number of entries. */
static uint64_t check_tree(const struct mfs_btree *bt)
{
	struct chk c = {0};

	if (!bt->root) {
		T_UEQ(bt->depth, 0);
		return 0;
	}
	check_node(bt, bt->root, bt->depth, true, false, 0, false, 0, &c);
	return c.entries;
}

static void checkpoint(const struct mfs_btree *bt, const struct ref *r)
{
	T_UEQ(check_tree(bt), r->count);
	ref_compare(bt, r);
}

/* --- basic behaviour ----------------------------------------------------------------- */

static int count_cb(void *arg, uint64_t key, const void *val, uint16_t len)
{
	(void)key;
	(void)val;
	(void)len;
	(*(unsigned long *)arg)++;
	return 0;
}

START_TEST(test_empty)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = 7};
	unsigned long n = 0;
	uint64_t found = 1;
	uint16_t len = 8;
	uint8_t v[8];

	T_IEQ(L->lookup(fs, &bt, 0, v, &len), -ENOENT);
	T_IEQ(L->lookup_le(fs, &bt, UINT64_MAX, &found, v, &len), -ENOENT);
	T_IEQ(L->update(fs, txn, &bt, 5, v, 1), -ENOENT);
	T_IEQ(L->delete (fs, txn, &bt, 5), -ENOENT);
	T_IEQ(L->iterate(fs, &bt, 0, count_cb, &n), 0);
	T_UEQ(n, 0);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_UEQ(bt.root, 0);
	T_UEQ(bt.depth, 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

START_TEST(test_basic)
{
	struct mfs_btree bt = {.kind = MFS_TREE_ORPHAN, .owner = 0};
	uint8_t big[MFS_BT_MAX_VALUE + 1], out[MFS_BT_MAX_VALUE];
	uint16_t len;
	unsigned i;

	memset(big, 0xab, sizeof(big));
	/* a set: empty values */
	T_IEQ(L->insert(fs, txn, &bt, 42, NULL, 0), 0);
	T_UNE(bt.root, 0);
	T_UEQ(bt.depth, 0);
	T_IEQ(L->insert(fs, txn, &bt, 42, NULL, 0), -EEXIST);
	T_IEQ(L->insert(fs, txn, &bt, 0, NULL, 0), 0);
	T_IEQ(L->insert(fs, txn, &bt, UINT64_MAX, NULL, 0), 0);
	len = 5;
	T_IEQ(L->lookup(fs, &bt, 42, out, &len), 0);
	T_UEQ(len, 0);
	T_IEQ(L->lookup(fs, &bt, UINT64_MAX, NULL, NULL), 0);
	T_IEQ(L->lookup(fs, &bt, 41, NULL, NULL), -ENOENT);
	/* bad arguments */
	T_IEQ(L->insert(fs, txn, &bt, 7, big, MFS_BT_MAX_VALUE + 1), -EINVAL);
	T_IEQ(L->insert(fs, txn, &bt, 7, NULL, 3), -EINVAL);
	T_IEQ(L->update(fs, txn, &bt, 42, big, MFS_BT_MAX_VALUE + 1), -EINVAL);
	/* the largest value, and truncated reads report the full size */
	T_IEQ(L->insert(fs, txn, &bt, 7, big, MFS_BT_MAX_VALUE), 0);
	len = 10;
	memset(out, 0, sizeof(out));
	T_IEQ(L->lookup(fs, &bt, 7, out, &len), 0);
	T_UEQ(len, MFS_BT_MAX_VALUE);
	T_UEQ(out[9], 0xab);
	T_UEQ(out[10], 0);
	/* same-size and resized updates */
	T_IEQ(L->update(fs, txn, &bt, 42, "x", 1), 0);
	T_IEQ(L->update(fs, txn, &bt, 42, "abcdef", 6), 0);
	len = sizeof(out);
	T_IEQ(L->lookup(fs, &bt, 42, out, &len), 0);
	T_UEQ(len, 6);
	T_ASSERT(memcmp(out, "abcdef", 6) == 0);
	T_IEQ(L->update(fs, txn, &bt, 43, "x", 1), -ENOENT);
	T_IEQ(L->delete (fs, txn, &bt, 43), -ENOENT);
	T_UEQ(check_tree(&bt), 4);
	for (i = 0; i < 4; i++) {
		uint64_t k[] = {0, 7, 42, UINT64_MAX};

		del(&bt, k[i]);
	}
	T_UEQ(bt.root, 0);
	T_UEQ(bt.depth, 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

/* --- scale ----------------------------------------------------------------------------- */

static size_t scale_keys(void)
{
	const char *env = getenv("BTREE_KEYS");

	return env && *env ? strtoull(env, NULL, 0) : 1000000;
}

/* Insert, look up, probe, update, delete @n keys in random order against @r. */
static void workload(struct mfs_btree *bt, size_t n, void (*cycle)(void))
{
	struct ref r;
	size_t *perm, k, step = n / 4 ? n / 4 : 1;

	ref_init(&r, n, rnd());
	perm = perm_new(n);
	for (k = 0; k < n; k++) {
		size_t i = perm[k];

		ins(bt, r.keys[i], 0);
		r.present[i] = 1;
		r.count++;
		if ((k + 1) % step == 0)
			checkpoint(bt, &r);
		if (cycle && k % 1024 == 0)
			cycle();
	}
	checkpoint(bt, &r);
	T_IEQ(L->insert(fs, txn, bt, r.keys[n / 2], NULL, 0), -EEXIST);

	/* every key, and keys that are not there */
	for (k = 0; k < n; k++) {
		size_t i = perm[k];
		uint64_t probe = r.keys[i] + 1;

		expect(bt, r.keys[i], 0);
		if (!bsearch(&probe, r.keys, n, sizeof(*r.keys), cmp_u64))
			expect_absent(bt, probe);
	}
	/* lookup_le at and between keys (a quarter of them), below the first */
	for (k = 0; k < n; k += 4) {
		size_t i = perm[k];
		uint64_t at = r.keys[i], between = at + (rnd() % 1000), found = 0;
		uint16_t len = 0;

		T_IEQ(L->lookup_le(fs, bt, at, &found, NULL, &len), 0);
		T_UEQ(found, at);
		if (i + 1 < n && between >= r.keys[i + 1])
			continue;
		if (between < at)
			continue;
		T_IEQ(L->lookup_le(fs, bt, between, &found, NULL, &len), 0);
		T_UEQ(found, at);
	}
	if (r.keys[0] > 0)
		T_IEQ(L->lookup_le(fs, bt, r.keys[0] - 1, NULL, NULL, NULL), -ENOENT);

	/* a tenth of the values change size */
	for (k = 0; k < n; k += 10) {
		size_t i = perm[k];

		upd(bt, r.keys[i], 1);
		r.ver[i] = 1;
		if (cycle && k % 10240 == 0)
			cycle();
	}
	checkpoint(bt, &r);

	/* delete in another order; checkpoints on the way down */
	free(perm);
	perm = perm_new(n);
	for (k = 0; k < n; k++) {
		size_t i = perm[k];

		del(bt, r.keys[i]);
		r.present[i] = 0;
		r.count--;
		if ((k + 1) % step == 0) {
			checkpoint(bt, &r);
			expect_absent(bt, r.keys[i]);
			T_IEQ(L->delete (fs, txn, bt, r.keys[i]), -ENOENT);
		}
		if (cycle && k % 1024 == 0)
			cycle();
	}
	T_UEQ(bt->root, 0);
	T_UEQ(bt->depth, 0);
	free(perm);
	ref_free(&r);
}

START_TEST(test_scale_random)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = 1234};

	rng_state = 11;
	workload(&bt, scale_keys(), NULL);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

START_TEST(test_lookup_le)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 3};
	uint64_t k, found;
	uint8_t v[MFS_BT_MAX_VALUE], w[MFS_BT_MAX_VALUE];
	uint16_t len;

	/* keys 100, 110, ..., enough for a three-level tree of small values */
	for (k = 0; k < 60000; k++)
		ins(&bt, 100 + 10 * k, 0);
	T_UGE(bt.depth, 2);
	T_UEQ(check_tree(&bt), 60000);
	T_IEQ(L->lookup_le(fs, &bt, 99, &found, NULL, NULL), -ENOENT);
	T_IEQ(L->lookup_le(fs, &bt, 0, &found, NULL, NULL), -ENOENT);
	for (k = 100; k < 100 + 10 * 60000 + 50; k += 1) {
		uint64_t want = k >= 100 + 10 * 59999 ? 100 + 10 * 59999 : k - (k - 100) % 10;

		len = sizeof(v);
		T_IEQ(L->lookup_le(fs, &bt, k, &found, v, &len), 0);
		T_UEQ(found, want);
		T_UEQ(len, value_of(want, 0, w));
		T_ASSERT(memcmp(v, w, len) == 0);
	}
	T_IEQ(L->lookup_le(fs, &bt, UINT64_MAX, &found, NULL, NULL), 0);
	T_UEQ(found, 100 + 10 * 59999);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

START_TEST(test_update_grow)
{
	struct mfs_btree bt = {.kind = MFS_TREE_XATTR, .owner = 9};
	uint8_t v[MFS_BT_MAX_VALUE], out[MFS_BT_MAX_VALUE];
	uint16_t len, l;
	uint64_t k;

	memset(v, 0x5a, sizeof(v));
	for (k = 1; k <= 40; k++)
		T_IEQ(L->insert(fs, txn, &bt, k, v, 8), 0);
	T_UEQ(bt.depth, 0);
	/* grow the values one by one until the leaf splits */
	for (l = 9; bt.depth == 0; l++) {
		T_ULE(l, MFS_BT_MAX_VALUE);
		for (k = 1; k <= 40 && bt.depth == 0; k++) {
			v[0] = (uint8_t)k;
			T_IEQ(L->update(fs, txn, &bt, k, v, l), 0);
		}
	}
	T_UEQ(bt.depth, 1);
	T_UEQ(check_tree(&bt), 40);
	/* every value is what the last update wrote */
	for (k = 1; k <= 40; k++) {
		len = sizeof(out);
		T_IEQ(L->lookup(fs, &bt, k, out, &len), 0);
		T_UGE(len, 8);
		T_UEQ(out[len - 1], 0x5a);
	}
	/* one value to the maximum, everything else back to 1 byte: merges to one leaf */
	T_IEQ(L->update(fs, txn, &bt, 20, v, MFS_BT_MAX_VALUE), 0);
	T_UEQ(check_tree(&bt), 40);
	for (k = 1; k <= 40; k++)
		if (k != 20)
			T_IEQ(L->update(fs, txn, &bt, k, v, 1), 0);
	T_UEQ(bt.depth, 0);
	T_UEQ(check_tree(&bt), 40);
	len = sizeof(out);
	T_IEQ(L->lookup(fs, &bt, 20, out, &len), 0);
	T_UEQ(len, MFS_BT_MAX_VALUE);
	/* a leaf full of maximum values: updates that force splits of a full leaf */
	for (k = 1; k <= 40; k++)
		T_IEQ(L->update(fs, txn, &bt, k, v, MFS_BT_MAX_VALUE), 0);
	T_UEQ(check_tree(&bt), 40);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

/* --- iteration ----------------------------------------------------------------------- */

struct stop_iter {
	uint64_t first, last;
	unsigned long n, stop_after;
};

static int stop_cb(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct stop_iter *s = arg;
	uint8_t want[MFS_BT_MAX_VALUE];

	T_UEQ(len, value_of(key, 0, want));
	T_ASSERT(memcmp(val, want, len) == 0);
	if (s->n == 0)
		s->first = key;
	else
		T_UGT(key, s->last);
	s->last = key;
	s->n++;
	return s->n == s->stop_after ? 77 : 0;
}

/* The callback deletes every entry it sees: the tree it walks changes under it. */
static int delete_cb(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct mfs_btree *bt = arg;

	(void)val;
	(void)len;
	del(bt, key);
	return 0;
}

START_TEST(test_iterate)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = 5};
	struct stop_iter s;
	uint64_t k;
	unsigned long n = 0;

	for (k = 0; k < 20000; k++)
		ins(&bt, 1000 + 2 * k, 0);
	/* from mid-range, at a key and between keys */
	s = (struct stop_iter){.stop_after = 0};
	T_IEQ(L->iterate(fs, &bt, 1000 + 2 * 12345, stop_cb, &s), 0);
	T_UEQ(s.first, 1000 + 2 * 12345);
	T_UEQ(s.n, 20000 - 12345);
	s = (struct stop_iter){.stop_after = 0};
	T_IEQ(L->iterate(fs, &bt, 1000 + 2 * 777 + 1, stop_cb, &s), 0);
	T_UEQ(s.first, 1000 + 2 * 778);
	T_UEQ(s.n, 20000 - 778);
	/* stopping early returns the callback's value */
	s = (struct stop_iter){.stop_after = 500};
	T_IEQ(L->iterate(fs, &bt, 5001, stop_cb, &s), 77);
	T_UEQ(s.first, 5002);
	T_UEQ(s.last, 5002 + 2 * 499);
	s = (struct stop_iter){.stop_after = 1};
	T_IEQ(L->iterate(fs, &bt, 0, stop_cb, &s), 77);
	T_UEQ(s.first, 1000);
	/* past the end, and the very end */
	T_IEQ(L->iterate(fs, &bt, 1000 + 2 * 20000, count_cb, &n), 0);
	T_IEQ(L->iterate(fs, &bt, UINT64_MAX, count_cb, &n), 0);
	T_UEQ(n, 0);
	T_IEQ(L->iterate(fs, &bt, 0, count_cb, &n), 0);
	T_UEQ(n, 20000);
	/* a callback that deletes what it is given empties the tree */
	T_IEQ(L->iterate(fs, &bt, 0, delete_cb, &bt), 0);
	T_UEQ(bt.root, 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

/* --- split and merge ----------------------------------------------------------------- */

START_TEST(test_split_merge)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 77};
	const uint64_t n = 150000;
	struct ref r;
	uint64_t k;
	size_t i, round;

	/* ascending, then deleting the front half and the back half */
	for (k = 0; k < n; k++) {
		ins(&bt, k, 0);
		if (k % 25000 == 0)
			T_UEQ(check_tree(&bt), k + 1);
	}
	T_UEQ(check_tree(&bt), n);
	for (k = 0; k < n / 2; k++) {
		del(&bt, k);
		if (k % 10000 == 0)
			T_UEQ(check_tree(&bt), n - k - 1);
	}
	for (k = n; k-- > n / 2;) {
		del(&bt, k);
		if (k % 10000 == 0)
			T_UEQ(check_tree(&bt), k - n / 2);
	}
	T_UEQ(bt.root, 0);
	T_IEQ(mock.live, 0);

	/* descending, then every other key, then the rest */
	for (k = n; k-- > 0;)
		ins(&bt, k * 3, 0);
	T_UEQ(check_tree(&bt), n);
	for (k = 0; k < n; k += 2)
		del(&bt, k * 3);
	T_UEQ(check_tree(&bt), n / 2);
	for (k = 1; k < n; k += 2)
		del(&bt, k * 3);
	T_UEQ(bt.root, 0);
	T_IEQ(mock.live, 0);

	/* random churn around a steady size, checked often */
	rng_state = 99;
	ref_init(&r, 40000, 5);
	for (round = 0; round < 200000; round++) {
		i = rnd() % r.n;
		if (r.present[i] && rnd() % 3 == 0) {
			r.ver[i] = (uint8_t)(r.ver[i] + 1);
			upd(&bt, r.keys[i], r.ver[i]);
		} else if (r.present[i]) {
			del(&bt, r.keys[i]);
			r.present[i] = 0;
			r.count--;
		} else {
			ins(&bt, r.keys[i], r.ver[i]);
			r.present[i] = 1;
			r.count++;
		}
		if (round % 20000 == 0)
			checkpoint(&bt, &r);
	}
	checkpoint(&bt, &r);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_UEQ(bt.root, 0);
	T_UEQ(bt.depth, 0);
	T_IEQ(mock.live, 0);
	ref_free(&r);
	mock_clean();
}
END_TEST

/* Fail the 1st, 2nd, ... allocation of an insert that splits up to a new root. */
START_TEST(test_alloc_failure)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 4}, before;
	uint8_t v[MFS_BT_MAX_VALUE];
	uint64_t k = 0, key;
	long live, fails = 0;
	int ret;

	memset(v, 1, sizeof(v));
	/* fill until the root is full: the next leaf split makes a new root */
	for (;;) {
		struct mfs_buf *b;
		unsigned nr;

		T_IEQ(L->insert(fs, txn, &bt, k++ * 16, v, 300), 0);
		if (!bt.depth)
			continue;
		T_IEQ(L->meta_read(fs, bt.root, 0, &b), 0);
		nr = ((struct mfs_meta_hdr *)b->data)->nr_items;
		L->buf_put(b);
		if (bt.depth == 1 && nr == T_NODE_MAX)
			break;
	}
	/* the next key lands in the last leaf; insert until it is the one that splits */
	for (key = k * 16;; key += 16) {
		before = bt;
		live = mock.live;
		mock.fail_in = 1;
		ret = L->insert(fs, txn, &bt, key, v, 300);
		mock.fail_in = 0;
		if (ret == 0)
			continue;
		/* nothing changed */
		T_IEQ(ret, -ENOSPC);
		T_UEQ(bt.root, before.root);
		T_UEQ(bt.depth, before.depth);
		T_IEQ(mock.live, live);
		expect_absent(&bt, key);
		mock_clean();
		break;
	}
	/* now each of the three allocations fails in turn, then none */
	for (fails = 1;; fails++) {
		live = mock.live;
		before = bt;
		mock.fail_in = fails;
		ret = L->insert(fs, txn, &bt, key, v, 300);
		mock.fail_in = 0;
		if (ret == 0)
			break;
		T_IEQ(ret, -ENOSPC);
		T_UEQ(bt.root, before.root);
		T_IEQ(mock.live, live);
		T_UEQ(check_tree(&bt), (uint64_t)k + (key - k * 16) / 16);
		mock_clean();
	}
	T_IEQ(fails, 4);
	T_UEQ(bt.depth, 2);
	T_UEQ(check_tree(&bt), (uint64_t)k + (key - k * 16) / 16 + 1);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

/* --- corruption ---------------------------------------------------------------------- */

static void patch_block(uint64_t blocknr, void (*fn)(uint8_t *blk, void *arg), void *arg,
                        uint8_t *saved)
{
	struct mfs_buf *b;

	T_IEQ(L->meta_read(fs, blocknr, 0, &b), 0);
	pthread_mutex_lock(&b->lock);
	if (saved)
		memcpy(saved, b->data, MFS_BLOCK_SIZE);
	fn(b->data, arg);
	pthread_mutex_unlock(&b->lock);
	L->buf_put(b);
}

static void restore_fn(uint8_t *blk, void *arg)
{
	memcpy(blk, arg, MFS_BLOCK_SIZE);
}

static struct mfs_bt_slot *slots(uint8_t *blk)
{
	return (struct mfs_bt_slot *)(blk + T_HDR);
}

static struct mfs_bt_ptr *ptrs(uint8_t *blk)
{
	return (struct mfs_bt_ptr *)(blk + T_HDR);
}

static struct mfs_meta_hdr *hdr(uint8_t *blk)
{
	return (struct mfs_meta_hdr *)blk;
}

static void c_slot_off_in_slots(uint8_t *blk, void *a)
{
	unsigned i;

	(void)a;
	for (i = 0; !slots(blk)[i].len; i++)
		;
	slots(blk)[i].off = T_HDR + 8;
}
static void c_slot_off_past_end(uint8_t *blk, void *a)
{
	(void)a;
	slots(blk)[2].off = MFS_BLOCK_SIZE - 2;
	slots(blk)[2].len = 40;
}
static void c_slot_len_huge(uint8_t *blk, void *a)
{
	(void)a;
	slots(blk)[3].len = 0xffff;
}
static void c_slot_order(uint8_t *blk, void *a)
{
	(void)a;
	slots(blk)[5].key = slots(blk)[4].key;
}
static void c_leaf_level(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->level = 1;
}
static void c_leaf_nr(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->nr_items = 300;
}
static void c_leaf_empty(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->nr_items = 0;
}
static void c_leaf_owner(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->owner = 1;
}
static void c_leaf_overlap(uint8_t *blk, void *a)
{
	unsigned i, nr = hdr(blk)->nr_items;

	(void)a;
	/* lengths adding up to more than the block */
	for (i = 0; i < nr; i++) {
		slots(blk)[i].off = MFS_BLOCK_SIZE - 1000;
		slots(blk)[i].len = 1000;
	}
}
static void c_root_child_out(uint8_t *blk, void *a)
{
	(void)a;
	ptrs(blk)[1].child = 3;
}
static void c_root_child_dup(uint8_t *blk, void *a)
{
	(void)a;
	ptrs(blk)[1].child = ptrs(blk)[2].child;
}
static void c_root_child_self(uint8_t *blk, void *a)
{
	(void)a;
	ptrs(blk)[1].child = hdr(blk)->blocknr;
}
static void c_root_order(uint8_t *blk, void *a)
{
	(void)a;
	ptrs(blk)[2].key = ptrs(blk)[1].key;
}
static void c_root_nr_zero(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->nr_items = 0;
}
static void c_root_nr_huge(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->nr_items = 100000;
}
static void c_root_level(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->level = 3;
}
static void c_root_sep(uint8_t *blk, void *a)
{
	(void)a;
	ptrs(blk)[1].key++;
}
static void c_root_tree(uint8_t *blk, void *a)
{
	(void)a;
	hdr(blk)->tree = MFS_TREE_ORPHAN;
}

struct corruption {
	const char *name;
	bool root; /* else the second leaf */
	void (*fn)(uint8_t *blk, void *arg);
};

static const struct corruption corruptions[] = {
        {"slot offset inside the slot array", false, c_slot_off_in_slots},
        {"slot value past the block", false, c_slot_off_past_end},
        {"slot length too large", false, c_slot_len_huge},
        {"leaf keys out of order", false, c_slot_order},
        {"leaf at the wrong level", false, c_leaf_level},
        {"leaf slot count too large", false, c_leaf_nr},
        {"empty non-root leaf", false, c_leaf_empty},
        {"leaf of another owner", false, c_leaf_owner},
        {"leaf values larger than the block", false, c_leaf_overlap},
        {"child outside the meta zone", true, c_root_child_out},
        {"two pointers to one child", true, c_root_child_dup},
        {"child pointing to its parent", true, c_root_child_self},
        {"interior keys out of order", true, c_root_order},
        {"interior node without children", true, c_root_nr_zero},
        {"interior count too large", true, c_root_nr_huge},
        {"root at the wrong level", true, c_root_level},
        {"separator not the child's lowest key", true, c_root_sep},
        {"root of another tree kind", true, c_root_tree},
};

START_TEST(test_corrupt)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = 21}, copy;
	uint8_t saved[MFS_BLOCK_SIZE], v[16] = {0};
	uint64_t leaf, lo, hi, k, found;
	const struct corruption *c = &corruptions[_i];
	struct mfs_buf *b;
	unsigned long n;
	long live;

	for (k = 0; k < 3000; k++)
		ins(&bt, k * 4, 0);
	T_UEQ(bt.depth, 1);
	T_IEQ(L->meta_read(fs, bt.root, 0, &b), 0);
	leaf = ptrs(b->data)[1].child;
	lo = ptrs(b->data)[1].key;
	hi = ptrs(b->data)[2].key;
	L->buf_put(b);
	live = mock.live;

	patch_block(c->root ? bt.root : leaf, c->fn, NULL, saved);
	/* every operation reaching the bad node: -EUCLEAN, nothing freed */
	copy = bt;
	T_MSG(L->lookup(fs, &bt, lo + 4, NULL, NULL) == -EUCLEAN, "%s", c->name);
	T_IEQ(L->lookup_le(fs, &bt, hi - 1, &found, NULL, NULL), -EUCLEAN);
	T_IEQ(L->insert(fs, txn, &bt, lo + 1, v, 16), -EUCLEAN);
	T_IEQ(L->update(fs, txn, &bt, lo + 4, v, 3), -EUCLEAN);
	T_IEQ(L->delete (fs, txn, &bt, lo + 4), -EUCLEAN);
	n = 0;
	T_IEQ(L->iterate(fs, &bt, 0, count_cb, &n), -EUCLEAN);
	T_IEQ(L->destroy(fs, txn, &bt), -EUCLEAN);
	T_UEQ(bt.root, copy.root);
	T_UEQ(bt.depth, copy.depth);
	T_IEQ(mock.live, live);
	mock_clean();

	/* repaired, the tree is whole again */
	patch_block(c->root ? bt.root : leaf, restore_fn, saved, NULL);
	T_UEQ(check_tree(&bt), 3000);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

START_TEST(test_corrupt_tree_fields)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = 21}, bad;
	uint64_t k;

	for (k = 0; k < 3000; k++)
		ins(&bt, k, 0);
	bad = bt;
	bad.depth = 40;
	T_IEQ(L->lookup(fs, &bad, 5, NULL, NULL), -EUCLEAN);
	T_IEQ(L->insert(fs, txn, &bad, 1 << 20, NULL, 0), -EUCLEAN);
	T_IEQ(L->destroy(fs, txn, &bad), -EUCLEAN);
	bad.depth = bt.depth + 1;
	T_IEQ(L->lookup(fs, &bad, 5, NULL, NULL), -EUCLEAN);
	bad = bt;
	bad.root = 1;
	T_IEQ(L->lookup(fs, &bad, 5, NULL, NULL), -EUCLEAN);
	T_IEQ(L->delete (fs, txn, &bad, 5), -EUCLEAN);
	bad = bt;
	bad.owner = 22;
	T_IEQ(L->iterate(fs, &bad, 0, count_cb, &k), -EUCLEAN);
	bad = bt;
	bad.root = fs->sb.meta_start + fs->sb.meta_len - 1; /* never written */
	T_IEQ(L->lookup(fs, &bad, 5, NULL, NULL), -EUCLEAN);
	T_UEQ(check_tree(&bt), 3000);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

static void flip_fn(uint8_t *blk, void *arg)
{
	unsigned flips = 1 + (unsigned)(rnd() % 4), i;
	bool anywhere = *(bool *)arg;

	for (i = 0; i < flips; i++) {
		/* mostly the header and the item array, where the structure is */
		unsigned span = anywhere ? MFS_BLOCK_SIZE : T_HDR + 64 * 16;
		unsigned off = 8 + (unsigned)(rnd() % (span - 8)); /* keep the magic */

		if (off >= 8 && off < 16)
			off += 8; /* and the self-location: the cache checks those */
		blk[off] ^= (uint8_t)(1u << (rnd() % 8));
	}
}

static int any_cb(void *arg, uint64_t key, const void *val, uint16_t len)
{
	(void)key;
	if (len)
		*(uint8_t *)arg ^= ((const uint8_t *)val)[len - 1];
	return 0;
}

/* Random bit flips in random nodes, then every operation: an error or a result, never a crash. */
START_TEST(test_fuzz)
{
	const char *env = getenv("BTREE_FUZZ");
	unsigned round, rounds = env && *env ? (unsigned)strtoul(env, NULL, 0) : 300;
	uint8_t sink = 0, v[64] = {0};

	rng_state = 4242;
	for (round = 0; round < rounds; round++) {
		struct mfs_btree bt = {.kind = MFS_TREE_XATTR, .owner = 2};
		uint64_t blocks[64], k;
		unsigned nb = 0, i;
		bool anywhere = round % 4 == 0;
		struct mfs_buf *b;

		for (k = 0; k < 1200; k++)
			ins(&bt, k * 8, (unsigned)round);
		blocks[nb++] = bt.root;
		if (bt.depth) {
			T_IEQ(L->meta_read(fs, bt.root, 0, &b), 0);
			for (i = 0; i < hdr(b->data)->nr_items && nb < 64; i++)
				blocks[nb++] = ptrs(b->data)[i].child;
			L->buf_put(b);
		}
		for (i = 0; i < 1 + round % 3; i++)
			patch_block(blocks[rnd() % nb], flip_fn, &anywhere, NULL);
		for (i = 0; i < 200; i++) {
			uint64_t key = rnd() % (1200 * 8 + 100), found;
			uint16_t len = sizeof(v);
			int ret;

			switch (rnd() % 7) {
			case 0:
				ret = L->lookup(fs, &bt, key, v, &len);
				break;
			case 1:
				ret = L->lookup_le(fs, &bt, key, &found, v, &len);
				break;
			case 2:
				ret = L->insert(fs, txn, &bt, key, v, (uint16_t)(rnd() % 64));
				break;
			case 3:
				ret = L->update(fs, txn, &bt, key, v, (uint16_t)(rnd() % 64));
				break;
			case 4:
				ret = L->delete (fs, txn, &bt, key);
				break;
			case 5:
				ret = L->iterate(fs, &bt, key, any_cb, &sink);
				break;
			default:
				ret = L->destroy(fs, txn, &bt);
				break;
			}
			T_MSG(ret == 0 || ret == -ENOENT || ret == -EEXIST || ret == -EUCLEAN,
			      "round %u: %d", round, ret);
		}
		T_IEQ(mock.refs, 0);
		/* start the next round on a fresh mock */
		mock_fini();
		mock_init(&mock_fs);
	}
	(void)sink;
}
END_TEST

/* --- concurrency --------------------------------------------------------------------- */

struct reader {
	const struct mfs_btree *bt;
	uint64_t n;
	_Atomic bool *stop;
	unsigned long lookups;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint8_t want[MFS_BT_MAX_VALUE], got[MFS_BT_MAX_VALUE];
	uint64_t i = 0;

	while (!atomic_load(r->stop)) {
		uint64_t key = mix64(i++) % r->n * 2, found;
		uint16_t len = sizeof(got), wlen = value_of(key, 0, want);

		if (L->lookup(fs, r->bt, key, got, &len) || len != wlen || memcmp(got, want, len))
			return (void *)1;
		if (L->lookup_le(fs, r->bt, key + 1, &found, NULL, NULL) || found != key)
			return (void *)1;
		r->lookups++;
	}
	return NULL;
}

START_TEST(test_concurrent_lookups)
{
	struct mfs_btree a = {.kind = MFS_TREE_DIR, .owner = 100};
	struct mfs_btree b = {.kind = MFS_TREE_DIR, .owner = 101};
	_Atomic bool stop = false;
	struct reader r[2];
	pthread_t th[2];
	uint64_t k;
	unsigned i;
	void *res;

	for (k = 0; k < 50000; k++)
		ins(&b, k * 2, 0);
	for (i = 0; i < 2; i++) {
		r[i] = (struct reader){.bt = &b, .n = 50000, .stop = &stop};
		T_IEQ(pthread_create(&th[i], NULL, reader_main, &r[i]), 0);
	}
	/* tree a grows and shrinks while the readers walk tree b */
	for (k = 0; k < 100000; k++)
		ins(&a, mix64(k), 0);
	for (k = 0; k < 100000; k++)
		del(&a, mix64(k));
	atomic_store(&stop, true);
	for (i = 0; i < 2; i++) {
		T_IEQ(pthread_join(th[i], &res), 0);
		T_ASSERT(!res);
		T_UGT(r[i].lookups, 0);
	}
	T_UEQ(a.root, 0);
	T_IEQ(L->destroy(fs, txn, &b), 0);
	T_IEQ(mock.live, 0);
	mock_clean();
}
END_TEST

/* --- the real layer -------------------------------------------------------------------- */

#ifndef MFS_BTREE_MOCK
static const struct layer real_layer = {
        mfs_bt_lookup,  mfs_bt_lookup_le, mfs_bt_insert, mfs_bt_update, mfs_bt_delete,
        mfs_bt_iterate, mfs_bt_destroy,   mfs_meta_read, mfs_buf_put,
};

static char real_dir[64], real_img[128];
static struct mfs *real_fs;

static void real_mkfs(const char *size)
{
	const char *env = getenv("MKFS_MENDFS");
	char mkfs[PATH_MAX], self[PATH_MAX], cmd[PATH_MAX * 2 + 64];
	ssize_t n;

	if (env && *env) {
		snprintf(mkfs, sizeof(mkfs), "%s", env);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		T_IGT(n, 0);
		self[n] = 0;
		snprintf(mkfs, sizeof(mkfs), "%s/../../mkfs/mkfs.mendfs", dirname(self));
	}
	snprintf(cmd, sizeof(cmd), "'%s' -q -f '%s' %s", mkfs, real_img, size);
	T_IEQ(system(cmd), 0);
}

static void real_mount(void)
{
	struct blk_dev_config cfg = {.backend = BLK_BACKEND_AUTO, .path = real_img};
	bool force_ro, other_bad;
	char msg[256] = "";
	int n;

	real_fs = calloc(1, sizeof(*real_fs));
	T_ASSERT(real_fs);
	T_MSG(blk_dev_open(&cfg, &real_fs->dev, msg, sizeof(msg)) == 0, "%s", msg);
	T_MSG(mfs_super_read(real_fs->dev, &real_fs->sb, &force_ro, &other_bad, msg, sizeof(msg)) ==
	              0,
	      "%s", msg);
	n = mfs_journal_replay(real_fs->dev, &real_fs->sb, false, msg, sizeof(msg));
	T_MSG(n >= 0, "replay: %s", msg);
	real_fs->seed = real_fs->sb.csum_seed;
	real_fs->dup = real_fs->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	T_IEQ(mfs_cache_init(real_fs, 4096), 0);
	T_IEQ(mfs_journal_init(real_fs), 0);
	T_IEQ(mfs_alloc_init(real_fs), 0);
	fs = real_fs;
	L = &real_layer;
}

static void real_umount(void)
{
	T_IEQ(mfs_txn_commit(real_fs), 0);
	T_IEQ(mfs_checkpoint(real_fs), 0);
	mfs_alloc_destroy(real_fs);
	mfs_journal_destroy(real_fs);
	mfs_cache_destroy(real_fs);
	blk_flush(real_fs->dev);
	blk_dev_close(real_fs->dev);
	free(real_fs);
	real_fs = NULL;
}

static void real_setup(void)
{
	snprintf(real_dir, sizeof(real_dir), "/tmp/mendfs-btree-XXXXXX");
	T_ASSERT(mkdtemp(real_dir));
	snprintf(real_img, sizeof(real_img), "%s/img", real_dir);
	real_mkfs("256M");
	real_mount();
	T_IEQ(mfs_txn_begin(fs, &txn), 0);
}

static void real_teardown(void)
{
	char cmd[160];

	if (real_fs) {
		if (txn)
			mfs_txn_end(txn);
		txn = NULL;
		real_umount();
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", real_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", real_dir);
}

/* End the handle, commit now and then, start a new one. */
static unsigned long real_cycles;

static void real_cycle(void)
{
	T_IEQ(mfs_txn_end(txn), 0);
	if (++real_cycles % 8 == 0) {
		T_IEQ(mfs_txn_commit(fs), 0);
		T_IEQ(mfs_checkpoint(fs), 0);
	}
	T_IEQ(mfs_txn_begin(fs, &txn), 0);
}

START_TEST(test_real_workload)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = MFS_ROOT_INO};
	uint64_t free_meta = fs->sb.free_meta;

	rng_state = 7;
	workload(&bt, 30000, real_cycle);
	T_UEQ(fs->sb.free_meta, free_meta);
}
END_TEST

/* A tree built, committed, checkpointed and read back after a remount. */
START_TEST(test_real_remount)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 5};
	uint64_t k, free_meta = fs->sb.free_meta;

	for (k = 0; k < 20000; k++) {
		ins(&bt, k * 8, 0);
		if (k % 512 == 0)
			real_cycle();
	}
	T_UEQ(check_tree(&bt), 20000);
	T_IEQ(mfs_txn_end(txn), 0);
	txn = NULL;
	real_umount();
	real_mount();
	T_UEQ(check_tree(&bt), 20000);
	for (k = 0; k < 20000; k += 7)
		expect(&bt, k * 8, 0);
	T_IEQ(mfs_txn_begin(fs, &txn), 0);
	T_IEQ(L->destroy(fs, txn, &bt), 0);
	T_UEQ(bt.root, 0);
	T_UEQ(fs->sb.free_meta, free_meta);
}
END_TEST
#endif

static Suite *btree_suite(void)
{
	Suite *s = suite_create("btree");
	TCase *tc = tcase_create("mock");
	TCase *tc_corrupt = tcase_create("corrupt");

	tcase_add_checked_fixture(tc, mock_setup, mock_teardown);
	tcase_set_timeout(tc, 280); /* 1M keys: ~12 s on an idle 2-core machine */
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_basic);
	tcase_add_test(tc, test_scale_random);
	tcase_add_test(tc, test_lookup_le);
	tcase_add_test(tc, test_update_grow);
	tcase_add_test(tc, test_iterate);
	tcase_add_test(tc, test_split_merge);
	tcase_add_test(tc, test_alloc_failure);
	tcase_add_test(tc, test_concurrent_lookups);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tc_corrupt, mock_setup, mock_teardown);
	tcase_set_timeout(tc_corrupt, 120);
	tcase_add_loop_test(tc_corrupt, test_corrupt, 0,
	                    (int)(sizeof(corruptions) / sizeof(corruptions[0])));
	tcase_add_test(tc_corrupt, test_corrupt_tree_fields);
	tcase_add_test(tc_corrupt, test_fuzz);
	suite_add_tcase(s, tc_corrupt);

#ifndef MFS_BTREE_MOCK
	{
		TCase *tc_real = tcase_create("real");

		tcase_add_checked_fixture(tc_real, real_setup, real_teardown);
		tcase_set_timeout(tc_real, 120);
		tcase_add_test(tc_real, test_real_workload);
		tcase_add_test(tc_real, test_real_remount);
		suite_add_tcase(s, tc_real);
	}
#endif
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(btree_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
