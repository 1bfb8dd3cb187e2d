/* SPDX-License-Identifier: MIT */
/*
 * test_btree_real.c: the B+trees on the real layer (meta.c, journal.c,
 * alloc.c on an image made by mkfs.mendfs): a random workload checked as on
 * the mock, across commits, checkpoint and a remount.  Not in the build by
 * hand against the mock only (MFS_BTREE_MOCK).
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
#include "mkfs_run.h"

/* --- the real layer -------------------------------------------------------------------- */

static const struct layer real_layer = {
        mfs_bt_lookup,  mfs_bt_lookup_le, mfs_bt_insert, mfs_bt_update, mfs_bt_delete,
        mfs_bt_iterate, mfs_bt_destroy,   mfs_meta_read, mfs_buf_put,
};

static char real_dir[64], real_img[128];
static struct mfs *real_fs;

static void real_mkfs(const char *size)
{
	char args[sizeof(real_img) + 64];

	snprintf(args, sizeof(args), "'%s' %s", real_img, size);
	mkfs_run(args);
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

void btree_real_tests(TCase *tc)
{
	tcase_add_checked_fixture(tc, real_setup, real_teardown);
	tcase_add_test(tc, test_real_workload);
	tcase_add_test(tc, test_real_remount);
}
