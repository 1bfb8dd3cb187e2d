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
 * fuzzer; lookups of one tree in threads while another is modified; inserts
 * guided by a lookup's hint (one read when it holds, the walk when a block
 * was freed, the leaf is the wrong one or split since).  With
 * the real layer (meta.c, journal.c, alloc.c on an image made by
 * mkfs.mendfs) a random workload is checked the same way, across commits,
 * checkpoint and a remount.
 *
 * This file makes the suite; the tests are in test_btree_ops.c (the mock),
 * test_btree_hint.c (hinted inserts, the mock), test_btree_corrupt.c
 * (corruption, fuzzing) and test_btree_real.c (the real layer), the mock in
 * btree_mock.c/.h, the checker in btree_check.c/.h.
 *
 * Build: meson (the mock is built in: btree_mock.c includes fs/core/btree*.c
 * with their layer calls renamed to the mock's, and the real tests use
 * libmendfs-core), or by hand against the mock only:
 *   gcc -std=gnu11 -D_GNU_SOURCE -DMFS_BTREE_MOCK tests/unit/test_btree.c \
 *       tests/unit/test_btree_ops.c tests/unit/test_btree_hint.c \
 *       tests/unit/test_btree_corrupt.c tests/unit/btree_mock.c \
 *       tests/unit/btree_check.c fs/core/btree*.c \
 *       -Iinclude -Ifs/core -Iblk -lcheck -lsubunit -lm -lpthread -lrt -lxxhash
 * BTREE_KEYS=n sets the size of the scale test (default 1000000), BTREE_FUZZ=n
 * the fuzzer's rounds (default 300).
 */
#include <check.h>
#include <stdlib.h>

#include "btree_check.h"
#include "check_run.h"

static Suite *btree_suite(void)
{
	Suite *s = suite_create("btree");
	TCase *tc = tcase_create("mock");
	TCase *tc_corrupt = tcase_create("corrupt");

	tcase_add_checked_fixture(tc, mock_setup, mock_teardown);
	tcase_set_timeout(tc, 280); /* 1M keys: ~12 s on an idle 2-core machine */
	btree_ops_tests(tc);
	btree_hint_tests(tc);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tc_corrupt, mock_setup, mock_teardown);
	tcase_set_timeout(tc_corrupt, 120);
	btree_corrupt_tests(tc_corrupt);
	suite_add_tcase(s, tc_corrupt);

#ifndef MFS_BTREE_MOCK
	{
		TCase *tc_real = tcase_create("real");

		tcase_set_timeout(tc_real, 120);
		btree_real_tests(tc_real);
		suite_add_tcase(s, tc_real);
	}
#endif
	return s;
}

int main(void)
{
	return check_run(btree_suite());
}
