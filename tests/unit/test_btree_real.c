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
        mfs_bt_lookup,      mfs_bt_lookup_le, mfs_bt_insert,        mfs_bt_update,
        mfs_bt_delete,      mfs_bt_iterate,   mfs_bt_destroy,       mfs_meta_read,
        mfs_buf_put,        mfs_bt_lookup_ge, mfs_bt_lookup_around, mfs_bt_lookup_near,
        mfs_bt_insert_near,
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

/*
 * A leaf checked and cached, evicted, then corrupted on the device (both
 * copies, checksums valid, keys out of order): the re-read is checked again
 * and refused; the good copy written back, the tree is whole.
 */
START_TEST(test_real_corrupt_after_evict)
{
	struct mfs_btree bt = {.kind = MFS_TREE_DIR, .owner = MFS_ROOT_INO};
	uint8_t *good, *bad;
	struct mfs_meta_hdr *h;
	struct mfs_bt_slot *s;
	struct mfs_bt_ptr *p;
	uint64_t k, leaf, lo, reads;
	struct mfs_buf *b;

	for (k = 0; k < 3000; k++)
		ins(&bt, k * 4, 0);
	T_UEQ(bt.depth, 1);
	T_IEQ(mfs_txn_end(txn), 0);
	txn = NULL;
	T_IEQ(mfs_txn_commit(fs), 0);
	T_IEQ(mfs_checkpoint(fs), 0);
	T_IEQ(mfs_meta_read(fs, bt.root, 0, &b), 0);
	p = (struct mfs_bt_ptr *)(b->data + T_HDR);
	leaf = p[1].child;
	lo = p[1].key;
	mfs_buf_put(b);
	T_IEQ(L->lookup(fs, &bt, lo + 4, NULL, NULL), 0); /* the leaf cached and checked */
	T_IEQ(L->lookup(fs, &bt, lo + 4, NULL, NULL), 0);

	good = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	bad = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	T_ASSERT(good && bad);
	T_IEQ(blk_read(fs->dev, leaf * MFS_SECTORS_PER_BLOCK, good, MFS_BLOCK_SIZE, 0), 0);
	memcpy(bad, good, MFS_BLOCK_SIZE);
	h = (struct mfs_meta_hdr *)bad;
	T_ASSERT(h->nr_items > 6);
	s = (struct mfs_bt_slot *)(bad + T_HDR);
	s[5].key = s[4].key;
	mfs_block_seal(bad, fs->seed);
	T_IEQ(mfs_meta_write_both(fs, leaf, bad, 1), 0);

	/* still cached: the cache is the truth, nothing is read */
	reads = atomic_load(&fs->stats.meta_reads);
	T_IEQ(L->lookup(fs, &bt, lo + 4, NULL, NULL), 0);
	T_UEQ(atomic_load(&fs->stats.meta_reads), reads);
	/* evicted: read again, checked again, refused every time */
	mfs_meta_forget(fs, leaf);
	T_IEQ(L->lookup(fs, &bt, lo + 4, NULL, NULL), -EUCLEAN);
	T_ASSERT(atomic_load(&fs->stats.meta_reads) > reads);
	T_IEQ(L->lookup(fs, &bt, lo + 8, NULL, NULL), -EUCLEAN);

	/* the good copy back on the device and read in: whole again */
	T_IEQ(mfs_meta_write_both(fs, leaf, good, 1), 0);
	mfs_meta_forget(fs, leaf);
	T_IEQ(L->lookup(fs, &bt, lo + 4, NULL, NULL), 0);
	T_UEQ(check_tree(&bt), 3000);
	free(good);
	free(bad);
	T_IEQ(mfs_txn_begin(fs, &txn), 0);
}
END_TEST

void btree_real_tests(TCase *tc)
{
	tcase_add_checked_fixture(tc, real_setup, real_teardown);
	tcase_add_test(tc, test_real_workload);
	tcase_add_test(tc, test_real_remount);
	tcase_add_test(tc, test_real_corrupt_after_evict);
}
