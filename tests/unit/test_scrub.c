/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the scrub's metadata check (fs/core/meta.c,
 * mfs_meta_scrub_block): both copies read from the device whatever the cache
 * holds; a corrupt or poisoned copy rewritten from the good one; both bad
 * lost; a dirty buffer skipped; nothing written read-only; and the cache
 * keeps what it held (the scrubbed block passes through, evicting nothing).
 * Images are sparse files under /tmp built by testfs.h.
 */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "testfs.h"

#define NB 4096 /* 16 MiB */

static uint8_t *bufs(unsigned n)
{
	uint8_t *b = aligned_alloc(MFS_BLOCK_SIZE, (size_t)n * MFS_BLOCK_SIZE);

	ck_assert_ptr_nonnull(b);
	return b;
}

/* A mounted test filesystem with block @val written (both copies) at meta0 + 3. */
static uint64_t setup(struct tfs *t, unsigned max_bufs)
{
	uint64_t blk;

	tfs_create(t, NB, 64, 256, true);
	tfs_mount(t, max_bufs);
	blk = tfs_meta0(t) + 3;
	tfs_put_block(t, blk, MFS_T_BTREE_NODE, 7);
	mfs_meta_forget(&t->fs, blk);
	return blk;
}

static void corrupt(struct tfs *t, uint64_t blk)
{
	uint8_t *raw = bufs(1);

	tfs_read_raw(t, blk, raw);
	raw[2000] ^= 0x10;
	tfs_write_raw(t, blk, raw);
	free(raw);
}

static bool copies_equal_and_valid(struct tfs *t, uint64_t blk)
{
	uint8_t *a = bufs(2);
	bool ok;

	tfs_read_raw(t, blk, a);
	tfs_read_raw(t, mfs_twin(&t->fs, blk), a + MFS_BLOCK_SIZE);
	ok = !memcmp(a, a + MFS_BLOCK_SIZE, MFS_BLOCK_SIZE) && tfs_block_is(a, 7) &&
	     !mfs_block_verify(a, t->fs.seed, MFS_T_BTREE_NODE, blk);
	free(a);
	return ok;
}

START_TEST(test_scrub_clean)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_CLEAN);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 0);
	ck_assert(copies_equal_and_valid(&t, blk));
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_heals_primary_and_twin)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	corrupt(&t, blk);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert(copies_equal_and_valid(&t, blk));
	corrupt(&t, mfs_twin(&t.fs, blk));
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert(copies_equal_and_valid(&t, blk));
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 2);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_CLEAN);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

/* The cached copy is good: the scrub looks at the device all the same. */
START_TEST(test_scrub_reads_device_under_cache)
{
	uint8_t *tmp = bufs(2);
	struct mfs_buf *b;
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	corrupt(&t, blk);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert(copies_equal_and_valid(&t, blk));
	ck_assert(tfs_block_is(b->data, 7));
	mfs_buf_put(b);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_poisoned_copy)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	ck_assert_int_eq(blk_poison_add(t.dev, blk * MFS_SECTORS_PER_BLOCK + 5, 1), 0);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert_uint_eq(blk_poison_count(t.dev), 0); /* the whole-block write cleared it */
	ck_assert(copies_equal_and_valid(&t, blk));
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_both_bad_lost)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	corrupt(&t, blk);
	corrupt(&t, mfs_twin(&t.fs, blk));
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_LOST);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_lost), 1);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 0);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_dirty_skipped_readonly_untouched)
{
	uint8_t *tmp = bufs(2), *raw = bufs(1), *before = bufs(1);
	struct mfs_buf *b;
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	/* dirty: the journal will write both copies; nothing read, nothing written */
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	corrupt(&t, blk);
	pthread_mutex_lock(&b->lock);
	b->dirty = true;
	pthread_mutex_unlock(&b->lock);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_SKIPPED);
	pthread_mutex_lock(&b->lock);
	b->dirty = false;
	pthread_mutex_unlock(&b->lock);
	mfs_buf_put(b);
	ck_assert(!copies_equal_and_valid(&t, blk));
	/* read-only: reported, not rewritten */
	tfs_read_raw(&t, blk, before);
	t.fs.read_only = true;
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_BAD);
	tfs_read_raw(&t, blk, raw);
	ck_assert_mem_eq(raw, before, MFS_BLOCK_SIZE);
	t.fs.read_only = false;
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	free(tmp);
	free(raw);
	free(before);
	tfs_destroy(&t);
}
END_TEST

/* A full cache keeps its buffers: the scrubbed blocks pass through it. */
START_TEST(test_scrub_evicts_nothing)
{
	uint8_t *tmp = bufs(2);
	struct mfs_buf *b;
	struct tfs t;
	uint64_t m0, i;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 8);
	m0 = tfs_meta0(&t);
	for (i = 0; i < 16; i++) {
		tfs_put_block(&t, m0 + i, MFS_T_BTREE_NODE, i);
		mfs_meta_forget(&t.fs, m0 + i);
	}
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(mfs_meta_read(&t.fs, m0 + i, MFS_T_BTREE_NODE, &b), 0);
		mfs_buf_put(b);
	}
	ck_assert_uint_eq(t.fs.nr_bufs, 8);
	for (i = 8; i < 16; i++)
		ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, m0 + i, tmp), MFS_SCRUB_CLEAN);
	ck_assert_uint_eq(t.fs.nr_bufs, 8);
	/* blocks 0..7 are still cached: reading them reads nothing from the device */
	i = atomic_load(&t.fs.stats.meta_reads);
	for (uint64_t k = 0; k < 8; k++) {
		ck_assert_int_eq(mfs_meta_read(&t.fs, m0 + k, MFS_T_BTREE_NODE, &b), 0);
		ck_assert(tfs_block_is(b->data, k));
		mfs_buf_put(b);
	}
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_reads), i);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

static Suite *scrub_suite(void)
{
	Suite *s = suite_create("scrub");
	TCase *tc = tcase_create("meta");

	tcase_add_test(tc, test_scrub_clean);
	tcase_add_test(tc, test_scrub_heals_primary_and_twin);
	tcase_add_test(tc, test_scrub_reads_device_under_cache);
	tcase_add_test(tc, test_scrub_poisoned_copy);
	tcase_add_test(tc, test_scrub_both_bad_lost);
	tcase_add_test(tc, test_scrub_dirty_skipped_readonly_untouched);
	tcase_add_test(tc, test_scrub_evicts_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(scrub_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
