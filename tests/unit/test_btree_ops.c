/* SPDX-License-Identifier: MIT */
/*
 * test_btree_ops.c: the B+trees on the mock layer: an empty tree; 1 000 000
 * keys inserted, looked up, updated and deleted in random order, checked
 * against the reference and the structure checker; lookup_le and lookup_ge; values grown
 * until a split; iteration; split/merge under churn; allocation failures at
 * every step; lookups of one tree in threads while another is modified.
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

#include "btree_check.h"

/* --- basic behaviour ----------------------------------------------------------------- */

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
void workload(struct mfs_btree *bt, size_t n, void (*cycle)(void))
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
	/* lookup_ge at and just past keys (a quarter of them), past the last */
	for (k = 1; k < n; k += 4) {
		size_t i = perm[k];
		uint64_t found = 0;

		T_IEQ(L->lookup_ge(fs, bt, r.keys[i], &found, NULL, NULL), 0);
		T_UEQ(found, r.keys[i]);
		if (r.keys[i] + 1 == 0)
			continue;
		if (i + 1 < n) {
			T_IEQ(L->lookup_ge(fs, bt, r.keys[i] + 1, &found, NULL, NULL), 0);
			T_UEQ(found, r.keys[i + 1]);
		} else {
			T_IEQ(L->lookup_ge(fs, bt, r.keys[i] + 1, &found, NULL, NULL), -ENOENT);
		}
	}

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
	/* lookup_ge: every key at and between, across every leaf boundary, below and past */
	for (k = 0; k < 100 + 10 * 60000 + 50; k += 1) {
		uint64_t want = k <= 100 ? 100 : k + (10 - (k - 100) % 10) % 10;

		len = sizeof(v);
		if (want > 100 + 10 * 59999) {
			T_IEQ(L->lookup_ge(fs, &bt, k, &found, v, &len), -ENOENT);
			continue;
		}
		T_IEQ(L->lookup_ge(fs, &bt, k, &found, v, &len), 0);
		T_UEQ(found, want);
		T_UEQ(len, value_of(want, 0, w));
		T_ASSERT(memcmp(v, w, len) == 0);
	}
	/* lookup_around: both neighbours, at and between keys, at every leaf's edges */
	for (k = 0; k < 100 + 10 * 60000 + 50; k += 1) {
		uint64_t last = 100 + 10 * 59999, lo = 0, hi = 0;
		uint64_t want_ge = k <= 100 ? 100 : k + (10 - (k - 100) % 10) % 10;
		uint64_t want_le = k >= last ? last : k - (k - 100) % 10;
		uint8_t ref[MFS_BT_MAX_VALUE];
		uint16_t len2 = sizeof(w);
		int want = (k >= 100 ? MFS_BT_LE : 0) | (want_ge <= last ? MFS_BT_GE : 0);

		len = sizeof(v);
		T_IEQ(L->lookup_around(fs, &bt, k, &lo, v, &len, &hi, w, &len2), want);
		if (want & MFS_BT_LE) {
			T_UEQ(lo, want_le);
			T_UEQ(len, value_of(want_le, 0, ref));
			T_ASSERT(memcmp(v, ref, len) == 0);
		}
		if (want & MFS_BT_GE) {
			T_UEQ(hi, want_ge);
			T_UEQ(len2, value_of(want_ge, 0, ref));
			T_ASSERT(memcmp(w, ref, len2) == 0);
		}
	}
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

void btree_ops_tests(TCase *tc)
{
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_basic);
	tcase_add_test(tc, test_scale_random);
	tcase_add_test(tc, test_lookup_le);
	tcase_add_test(tc, test_update_grow);
	tcase_add_test(tc, test_iterate);
	tcase_add_test(tc, test_split_merge);
	tcase_add_test(tc, test_alloc_failure);
	tcase_add_test(tc, test_concurrent_lookups);
}
