/* SPDX-License-Identifier: MIT */
/*
 * btree_check.c: what the B+tree tests check a tree against: values derived
 * from key and version, a sorted reference of the keys present, and the
 * structure checker (key order across nodes, exact separators, levels,
 * minimum fill).  btree_check.h is its interface.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btree_check.h"

/* --- values and the reference -------------------------------------------------------- */

uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t rng_state = 1;

uint64_t rnd(void)
{
	return mix64(rng_state++);
}

/* The value of @key at version @ver: mostly small, some empty, some large. */
uint16_t value_of(uint64_t key, unsigned ver, uint8_t *buf)
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

void ins(struct mfs_btree *bt, uint64_t key, unsigned ver)
{
	uint8_t v[MFS_BT_MAX_VALUE];
	uint16_t len = value_of(key, ver, v);
	int ret = L->insert(fs, txn, bt, key, v, len);

	T_MSG(ret == 0, "insert %llu: %d", (unsigned long long)key, ret);
}

void upd(struct mfs_btree *bt, uint64_t key, unsigned ver)
{
	uint8_t v[MFS_BT_MAX_VALUE];
	uint16_t len = value_of(key, ver, v);
	int ret = L->update(fs, txn, bt, key, v, len);

	T_MSG(ret == 0, "update %llu: %d", (unsigned long long)key, ret);
}

void del(struct mfs_btree *bt, uint64_t key)
{
	int ret = L->delete (fs, txn, bt, key);

	T_MSG(ret == 0, "delete %llu: %d", (unsigned long long)key, ret);
}

void expect(const struct mfs_btree *bt, uint64_t key, unsigned ver)
{
	uint8_t want[MFS_BT_MAX_VALUE], got[MFS_BT_MAX_VALUE];
	uint16_t wlen = value_of(key, ver, want), glen = sizeof(got);
	int ret = L->lookup(fs, bt, key, got, &glen);

	T_MSG(ret == 0, "lookup %llu: %d", (unsigned long long)key, ret);
	T_UEQ(glen, wlen);
	T_ASSERT(memcmp(got, want, wlen) == 0);
}

void expect_absent(const struct mfs_btree *bt, uint64_t key)
{
	uint16_t len = 0;

	T_IEQ(L->lookup(fs, bt, key, NULL, &len), -ENOENT);
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void ref_init(struct ref *r, size_t n, uint64_t seed)
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

void ref_free(struct ref *r)
{
	free(r->keys);
	free(r->present);
	free(r->ver);
}

size_t *perm_new(size_t n)
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

int cmp_cb(void *arg, uint64_t key, const void *val, uint16_t len)
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

void ref_compare(const struct mfs_btree *bt, const struct ref *r)
{
	struct cmp_iter c = {.r = r};

	T_IEQ(L->iterate(fs, bt, 0, cmp_cb, &c), 0);
	T_UEQ(c.seen, r->count);
}

/* --- the structure checker ----------------------------------------------------------- */

int cmp_range(const void *a, const void *b)
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
void check_node(const struct mfs_btree *bt, uint64_t blocknr, unsigned level, bool root,
                bool has_lo, uint64_t lo, bool has_hi, uint64_t hi, struct chk *c)
{
	uint8_t blk[MFS_BLOCK_SIZE];
	struct mfs_meta_hdr *hdr = (struct mfs_meta_hdr *)blk;
	struct mfs_buf *b;
	unsigned nr, i;

	T_UGE(blocknr, fs->sb.meta_start);
	T_ULT(blocknr - fs->sb.meta_start, fs->sb.meta_len);
	T_IEQ(L->meta_read(fs, blocknr, 0, &b), 0);
	mfs_lock(&b->lock);
	memcpy(blk, b->data, MFS_BLOCK_SIZE);
	mfs_unlock(&b->lock);
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
uint64_t check_tree(const struct mfs_btree *bt)
{
	struct chk c = {0};

	if (!bt->root) {
		T_UEQ(bt->depth, 0);
		return 0;
	}
	check_node(bt, bt->root, bt->depth, true, false, 0, false, 0, &c);
	return c.entries;
}

void checkpoint(const struct mfs_btree *bt, const struct ref *r)
{
	T_UEQ(check_tree(bt), r->count);
	ref_compare(bt, r);
}

/* An iterator callback counting the entries into *(unsigned long *)@arg. */
int count_cb(void *arg, uint64_t key, const void *val, uint16_t len)
{
	(void)key;
	(void)val;
	(void)len;
	(*(unsigned long *)arg)++;
	return 0;
}
