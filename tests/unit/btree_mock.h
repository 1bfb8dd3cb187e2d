/* SPDX-License-Identifier: MIT */
/*
 * btree_mock.h: what the B+tree tests (test_btree*.c) run on: assertions
 * cheap enough for millions of checks, the in-memory mock of the metadata
 * layer (btree_mock.c) and "the layer", a table of the tree's calls that
 * points at the mock or at the real layer (test_btree_real.c).
 */
#ifndef MENDFS_TESTS_BTREE_MOCK_H
#define MENDFS_TESTS_BTREE_MOCK_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

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

struct mock_blk;

struct mock_state {
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
	unsigned long reads; /* meta_read calls */
};

extern struct mock_state mock;
extern struct mfs mock_fs;

void mock_init(struct mfs *fs);
void mock_fini(void);
/* The fixture of the mock test cases: a fresh mock, the layer pointing at it. */
void mock_setup(void);
void mock_teardown(void);
/* Every reference returned, no contract violation. */
void mock_clean(void);

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
	int (*lookup_ge)(struct mfs *, const struct mfs_btree *, uint64_t, uint64_t *, void *,
	                 uint16_t *);
	int (*lookup_around)(struct mfs *, const struct mfs_btree *, uint64_t, uint64_t *, void *,
	                     uint16_t *, uint64_t *, void *, uint16_t *);
	int (*lookup_near)(struct mfs *, const struct mfs_btree *, uint64_t, uint64_t *, void *,
	                   uint16_t *, uint64_t *, void *, uint16_t *, struct mfs_bt_hint *);
	int (*insert_near)(struct mfs *, struct mfs_txn *, struct mfs_btree *, uint64_t,
	                   const void *, uint16_t, const struct mfs_bt_hint *);
};

extern const struct layer mock_layer;
extern const struct layer *L; /* the layer of the running test */
extern struct mfs *fs;
extern struct mfs_txn *txn;

#endif /* MENDFS_TESTS_BTREE_MOCK_H */
