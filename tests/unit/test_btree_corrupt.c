/* SPDX-License-Identifier: MIT */
/*
 * test_btree_corrupt.c: corrupt nodes (slot offsets, key order, levels,
 * counts, child pointers, owners, separators) reported as -EUCLEAN without a
 * crash, and a random bit-flip fuzzer; on the mock layer.
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

/* --- corruption ---------------------------------------------------------------------- */

static void patch_block(uint64_t blocknr, void (*fn)(uint8_t *blk, void *arg), void *arg,
                        uint8_t *saved)
{
	struct mfs_buf *b;

	T_IEQ(L->meta_read(fs, blocknr, 0, &b), 0);
	mfs_lock(&b->lock);
	if (saved)
		memcpy(saved, b->data, MFS_BLOCK_SIZE);
	fn(b->data, arg);
	b->bt_checked = false; /* as a fill from the (mock) device would leave it */
	mfs_unlock(&b->lock);
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

void btree_corrupt_tests(TCase *tc)
{
	tcase_add_loop_test(tc, test_corrupt, 0,
	                    (int)(sizeof(corruptions) / sizeof(corruptions[0])));
	tcase_add_test(tc, test_corrupt_tree_fields);
	tcase_add_test(tc, test_fuzz);
}
