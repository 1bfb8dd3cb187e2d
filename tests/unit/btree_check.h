/* SPDX-License-Identifier: MIT */
/*
 * btree_check.h: what the B+tree tests check a tree against (btree_check.c):
 * values derived from key and version, a sorted reference of the keys
 * present, and the structure checker; and the test cases each
 * test_btree_<part>.c adds to the suite.
 */
#ifndef MENDFS_TESTS_BTREE_CHECK_H
#define MENDFS_TESTS_BTREE_CHECK_H

#include "btree_mock.h"

void btree_ops_tests(TCase *tc);
void btree_corrupt_tests(TCase *tc);
void btree_real_tests(TCase *tc);
void btree_hint_tests(TCase *tc);

/*
 * Insert, look up, probe, update, delete @n keys in random order, checking
 * the tree at checkpoints; calls @cycle (if any) now and then
 * (test_btree_ops.c, also run on the real layer).
 */
void workload(struct mfs_btree *bt, size_t n, void (*cycle)(void));

/* --- values and the reference -------------------------------------------------------- */

extern uint64_t rng_state;

/* A set of distinct keys, sorted, with per-key presence and value version. */
struct ref {
	size_t n;
	uint64_t *keys;
	uint8_t *present, *ver;
	size_t count;
};

/* Iteration matches the reference exactly (order, keys, values, count). */
struct cmp_iter {
	const struct ref *r;
	size_t pos, seen;
};

struct chk {
	uint64_t entries, leaves, nodes, prev;
	bool have_prev;
};

/* --- the structure checker ----------------------------------------------------------- */

#define T_HDR        ((unsigned)sizeof(struct mfs_meta_hdr))
#define T_SPACE      (MFS_BLOCK_SIZE - T_HDR)
#define T_LEAF_MIN   (T_SPACE / 4)
#define T_NODE_MAX   ((unsigned)MFS_BT_NODE_MAX)
#define T_NODE_MIN   (T_NODE_MAX / 4)
#define T_LEAF_SLOTS (T_SPACE / (unsigned)sizeof(struct mfs_bt_slot))

uint64_t mix64(uint64_t x);
uint64_t rnd(void);
uint16_t value_of(uint64_t key, unsigned ver, uint8_t *buf);
void ins(struct mfs_btree *bt, uint64_t key, unsigned ver);
void upd(struct mfs_btree *bt, uint64_t key, unsigned ver);
void del(struct mfs_btree *bt, uint64_t key);
void expect(const struct mfs_btree *bt, uint64_t key, unsigned ver);
void expect_absent(const struct mfs_btree *bt, uint64_t key);
int cmp_u64(const void *a, const void *b);
void ref_init(struct ref *r, size_t n, uint64_t seed);
void ref_free(struct ref *r);
size_t *perm_new(size_t n);
int cmp_cb(void *arg, uint64_t key, const void *val, uint16_t len);
void ref_compare(const struct mfs_btree *bt, const struct ref *r);
int cmp_range(const void *a, const void *b);
void check_node(const struct mfs_btree *bt, uint64_t blocknr, unsigned level, bool root,
                bool has_lo, uint64_t lo, bool has_hi, uint64_t hi, struct chk *c);
uint64_t check_tree(const struct mfs_btree *bt);
void checkpoint(const struct mfs_btree *bt, const struct ref *r);
/* An iterator callback counting the entries into *(unsigned long *)@arg. */
int count_cb(void *arg, uint64_t key, const void *val, uint16_t len);

#endif /* MENDFS_TESTS_BTREE_CHECK_H */
