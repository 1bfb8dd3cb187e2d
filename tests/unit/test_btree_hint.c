/* SPDX-License-Identifier: MIT */
/*
 * test_btree_hint.c: inserts guided by a lookup's hint (mfs_bt_lookup_near,
 * mfs_bt_insert_near) on the mock layer.  A current hint costs one node
 * read instead of a walk from the root; a hint that no longer holds (a
 * block freed since, a leaf the key is not strictly inside, a leaf split
 * since) falls back to the walk; either way the tree stays exact.
 */
#include <check.h>
#include <stdlib.h>

#include "btree_check.h"

/* Insert r->keys[i] (version 0) with @h; returns the node reads it took. */
static unsigned long ins_near(struct mfs_btree *bt, struct ref *r, size_t i,
                              const struct mfs_bt_hint *h)
{
	uint8_t v[MFS_BT_MAX_VALUE];
	uint16_t len = value_of(r->keys[i], 0, v);
	unsigned long reads = mock.reads;
	int ret = L->insert_near(fs, txn, bt, r->keys[i], v, len, h);

	T_MSG(ret == 0, "insert_near %llu: %d", (unsigned long long)r->keys[i], ret);
	r->present[i] = 1;
	r->ver[i] = 0;
	r->count++;
	return mock.reads - reads;
}

/* The hint of a lookup of r->keys[i], which is absent. */
static struct mfs_bt_hint hint_of(const struct mfs_btree *bt, const struct ref *r, size_t i)
{
	struct mfs_bt_hint h;
	uint64_t le, ge;
	int found = L->lookup_near(fs, bt, r->keys[i], &le, NULL, NULL, &ge, NULL, NULL, &h);

	T_IGE(found, 0);
	T_ASSERT(!r->present[i]);
	return h;
}

/* A tree holding the even-numbered keys of @r. */
static void even_tree(struct mfs_btree *bt, struct ref *r, size_t n, uint64_t seed)
{
	size_t i;

	ref_init(r, n, seed);
	for (i = 0; i < n; i += 2) {
		ins(bt, r->keys[i], 0);
		r->present[i] = 1;
		r->count++;
	}
	T_UGE(bt->depth, 1);
}

/* From r->keys[from] on, every other key: the first whose lookup ended inside a leaf. */
static size_t inside_from(const struct mfs_btree *bt, const struct ref *r, size_t from,
                          struct mfs_bt_hint *h)
{
	size_t i;

	for (i = from; i < r->n; i += 2) {
		*h = hint_of(bt, r, i);
		if (h->leaf)
			return i;
	}
	ck_abort_msg("no key from %zu on falls inside a leaf", from);
	return 0;
}

/* The end of a case: the tree destroyed, every block and reference returned. */
static void finish(struct mfs_btree *bt, struct ref *r)
{
	T_IEQ(L->destroy(fs, txn, bt), 0);
	T_IEQ(mock.live, 0);
	ref_free(r);
	mock_clean();
}

/* Current hints: one read each whenever the leaf has room, else the walk. */
START_TEST(test_hint_current)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 7};
	unsigned long one = 0, hinted = 0, walk = 0;
	struct ref r;
	size_t k;

	rng_state = 5;
	even_tree(&bt, &r, 20000, 3);
	for (k = 1; k < r.n; k += 2) {
		struct mfs_bt_hint h = hint_of(&bt, &r, k);
		unsigned depth = bt.depth, reads;

		hinted += h.leaf != 0;
		reads = ins_near(&bt, &r, k, &h);
		if (reads == 1) {
			T_UNE(h.leaf, 0);
			one++;
		} else {
			/* the walk (after the hinted leaf had no room, or without a leaf) */
			T_UGE(reads, depth + 1);
			walk++;
		}
	}
	/* most odd keys fall between two even ones in one leaf, most leaves have room */
	T_UGT(hinted, r.n / 2 * 8 / 10);
	T_UGT(one, hinted / 2);
	T_UGT(walk, 0);
	checkpoint(&bt, &r);
	finish(&bt, &r);
}
END_TEST

/* Keys outside every leaf's keys (below the first, above the last) get no leaf. */
START_TEST(test_hint_edges)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 7};
	struct mfs_bt_hint h;
	struct ref r;

	rng_state = 6;
	ref_init(&r, 4000, 9);
	for (size_t i = 1; i + 1 < r.n; i++) {
		ins(&bt, r.keys[i], 0);
		r.present[i] = 1;
		r.count++;
	}
	h = hint_of(&bt, &r, 0);
	T_UEQ(h.leaf, 0);
	h = hint_of(&bt, &r, r.n - 1);
	T_UEQ(h.leaf, 0);
	T_UGE(ins_near(&bt, &r, 0, &h), bt.depth + 1);
	checkpoint(&bt, &r);
	finish(&bt, &r);
}
END_TEST

/* A block freed since the lookup retires every hint: the insert walks. */
START_TEST(test_hint_stale_after_free)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 7};
	struct mfs_bt_hint h;
	uint64_t frees;
	struct ref r;
	size_t i, k;

	rng_state = 7;
	even_tree(&bt, &r, 20000, 4);
	/* an absent key whose lookup ended inside a leaf */
	k = inside_from(&bt, &r, r.n / 2 + 1, &h);
	frees = atomic_load(&fs->bt_frees);
	/* empty the hinted leaf and its neighbours: their blocks are freed */
	for (i = k > 400 ? k - 400 : 0; i < r.n && i < k + 400; i++) {
		if (r.present[i]) {
			del(&bt, r.keys[i]);
			r.present[i] = 0;
			r.count--;
		}
	}
	T_UGT(atomic_load(&fs->bt_frees), frees);
	T_UGE(ins_near(&bt, &r, k, &h), bt.depth + 1);
	expect(&bt, r.keys[k], 0);
	checkpoint(&bt, &r);
	/* a hint older than any free is refused the same way, its leaf alive or not */
	k = inside_from(&bt, &r, k + 402, &h);
	h.frees--;
	T_UGE(ins_near(&bt, &r, k, &h), bt.depth + 1);
	checkpoint(&bt, &r);
	finish(&bt, &r);
}
END_TEST

/* A live leaf the key does not fall strictly inside: the walk puts it where it belongs. */
START_TEST(test_hint_wrong_leaf)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 7};
	struct mfs_bt_hint first, h;
	struct ref r;

	rng_state = 8;
	even_tree(&bt, &r, 20000, 5);
	first = hint_of(&bt, &r, 3); /* a leaf at the low end */
	T_UNE(first.leaf, 0);
	h = hint_of(&bt, &r, r.n - 3); /* a key at the high end */
	T_UNE(h.leaf, first.leaf);
	/* the first leaf read and refused, then the walk */
	T_UGE(ins_near(&bt, &r, r.n - 3, &first), 1 + bt.depth + 1);
	expect(&bt, r.keys[r.n - 3], 0);
	checkpoint(&bt, &r);
	finish(&bt, &r);
}
END_TEST

/*
 * Hints taken, then the tree grows (splits, no frees) before they are used:
 * a leaf that split may no longer hold a hinted key's neighbours, but while
 * the key falls strictly inside the leaf it belongs there.  Then the same
 * with deletes in between (frees: every hint refused).
 */
START_TEST(test_hint_after_splits)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = 7};
	struct mfs_bt_hint hs[256];
	size_t idx[256], round, j, k;
	struct ref r;

	rng_state = 9;
	ref_init(&r, 40000, 6);
	for (k = 0; k < r.n; k += 8) {
		ins(&bt, r.keys[k], 0);
		r.present[k] = 1;
		r.count++;
	}
	for (round = 0; round < 20; round++) {
		uint64_t frees = atomic_load(&fs->bt_frees);
		unsigned long one = 0;

		for (j = 0; j < 256; j++) {
			do
				idx[j] = rnd() % r.n;
			while (r.present[idx[j]]);
			hs[j] = hint_of(&bt, &r, idx[j]);
			r.present[idx[j]] = 2; /* kept for the hinted insert */
		}
		/* splits in between; odd rounds delete as well */
		for (k = 0; k < 2000; k++) {
			size_t i = rnd() % r.n;

			if (r.present[i] == 2)
				continue;
			if (!r.present[i]) {
				ins(&bt, r.keys[i], 0);
				r.present[i] = 1;
				r.count++;
			} else if (round % 2) {
				del(&bt, r.keys[i]);
				r.present[i] = 0;
				r.count--;
			}
		}
		for (j = 0; j < 256; j++) {
			r.present[idx[j]] = 0;
			one += ins_near(&bt, &r, idx[j], &hs[j]) == 1;
		}
		if (atomic_load(&fs->bt_frees) != frees)
			T_UEQ(one, 0);
		else
			T_UGT(one, 0);
		checkpoint(&bt, &r);
	}
	finish(&bt, &r);
}
END_TEST

void btree_hint_tests(TCase *tc)
{
	tcase_add_test(tc, test_hint_current);
	tcase_add_test(tc, test_hint_edges);
	tcase_add_test(tc, test_hint_stale_after_free);
	tcase_add_test(tc, test_hint_wrong_leaf);
	tcase_add_test(tc, test_hint_after_splits);
}
