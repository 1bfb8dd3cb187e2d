/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the allocators (fs/core/alloc.c) on an image made by the built
 * mkfs.mendfs ($MKFS_MENDFS, else beside the test binary), opened the way the
 * daemon does: superblock, buffer cache, journal, allocators.
 *
 * Data: one contiguous extent on an empty fs, the goal honoured (and the
 * first fit after it), best fit among holes, ENOSPC exactly when full and
 * recovery after frees, poisoned frees quarantined and not reallocated until
 * released once clean, 4 threads never handed overlapping blocks.  Meta and
 * inodes: ranges, reuse, double frees refused.  After each test the free
 * counters equal a recount of the bitmaps.  The free extent index alone,
 * against a model: takes from the head, tail and middle and frees keep both
 * treap, the size classes and the largest lengths right.
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

#include "alloc_int.h"
#include "fixture.h"
#include "mfs.h"

static uint64_t data_start, data_len;

static void mount_fs(void)
{
	struct blk_dev_config cfg = {.backend = BLK_BACKEND_AUTO, .path = img};
	bool force_ro, other_bad;
	char msg[256] = "";

	fs = calloc(1, sizeof(*fs));
	ck_assert_ptr_nonnull(fs);
	ck_assert_msg(blk_dev_open(&cfg, &fs->dev, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(mfs_super_read(fs->dev, &fs->sb, &force_ro, &other_bad, msg, sizeof(msg)) ==
	                      0,
	              "%s", msg);
	fs->seed = fs->sb.csum_seed;
	fs->dup = fs->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	ck_assert_int_eq(mfs_cache_init(fs, 4096), 0);
	ck_assert_int_eq(mfs_journal_init(fs), 0);
	ck_assert_int_eq(mfs_alloc_init(fs), 0);
	data_start = fs->sb.data_start;
	data_len = fs->sb.data_len;
}

static void umount_fs(void)
{
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	ck_assert_int_eq(mfs_checkpoint(fs), 0);
	mfs_alloc_destroy(fs);
	mfs_journal_destroy(fs);
	mfs_cache_destroy(fs);
	blk_flush(fs->dev);
	blk_dev_close(fs->dev);
	free(fs);
	fs = NULL;
}

static void setup(void)
{
	fixture_dir("/tmp", "alloc");
	fixture_mkfs("", "64M");
	mount_fs();
}

static void teardown(void)
{
	if (fs)
		umount_fs();
	fixture_remove();
}

/* Clear bits among the first @nbits of the bitmap at @disk, read through the cache. */
static uint64_t recount(uint64_t disk, uint64_t nbits)
{
	uint64_t free_bits = 0;

	for (uint64_t i = 0; i < nbits; i += MFS_BITMAP_BITS) {
		struct mfs_buf *b;
		const uint8_t *bits;

		ck_assert_int_eq(mfs_meta_read(fs, disk + i / MFS_BITMAP_BITS, MFS_T_BITMAP, &b),
		                 0);
		bits = b->data + sizeof(struct mfs_meta_hdr);
		for (uint64_t j = 0; j < MFS_BITMAP_BITS && i + j < nbits; j++)
			free_bits += !(bits[j / 8] & (1u << (j % 8)));
		mfs_buf_put(b);
	}
	return free_bits;
}

static void check_counters(void)
{
	ck_assert_uint_eq(recount(fs->sb.data_bitmap_start, fs->sb.data_len), fs->sb.free_blocks);
	ck_assert_uint_eq(recount(fs->sb.meta_bitmap_start, fs->sb.meta_len), fs->sb.free_meta);
	ck_assert_uint_eq(recount(fs->sb.inode_bitmap_start, fs->sb.nr_inodes), fs->sb.free_inodes);
}

static bool data_bit(uint64_t pblk)
{
	uint64_t i = pblk - data_start;
	struct mfs_buf *b;
	bool set;

	ck_assert_int_eq(
	        mfs_meta_read(fs, fs->sb.data_bitmap_start + i / MFS_BITMAP_BITS, MFS_T_BITMAP, &b),
	        0);
	i %= MFS_BITMAP_BITS;
	set = b->data[sizeof(struct mfs_meta_hdr) + i / 8] & (1u << (i % 8));
	mfs_buf_put(b);
	return set;
}

static int alloc(uint64_t goal, uint64_t want, uint64_t *start, uint64_t *got)
{
	struct mfs_txn *txn;
	int ret;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ret = mfs_alloc_data(fs, txn, goal, want, start, got);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	return ret;
}

static int dfree(uint64_t start, uint64_t len)
{
	struct mfs_txn *txn;
	int ret;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ret = mfs_free_data(fs, txn, start, len);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	/* freed data blocks come back to the allocator when the freeing transaction commits */
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	return ret;
}

/*
 * Blocks freed by a transaction that has not committed are never handed out:
 * new data written into them in place (ordered mode) would show through the
 * old file if the machine crashed before the free committed.
 */
START_TEST(test_free_waits_for_commit)
{
	struct mfs_txn *txn;
	uint64_t x, s, n;

	ck_assert_int_eq(alloc(0, 8, &x, &n), 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_free_data(fs, txn, x, 8), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_int_eq(mfs_alloc_data_state(fs), MFS_SPACE_PENDING);
	ck_assert_int_eq(alloc(x, 8, &s, &n), 0);
	ck_assert(s >= x + 8 || s + n <= x); /* not the freed blocks */
	ck_assert_int_eq(dfree(s, n), 0);    /* commits: both frees become usable */
	ck_assert_int_eq(mfs_alloc_data_state(fs), MFS_SPACE_FREE);
	ck_assert_int_eq(alloc(x, 8, &s, &n), 0);
	ck_assert_uint_eq(s, x);
	ck_assert_uint_eq(n, 8);
	check_counters();
}
END_TEST

START_TEST(test_contiguous)
{
	uint64_t s, n, before = fs->sb.free_blocks;

	ck_assert_uint_eq(before, data_len);
	ck_assert_int_eq(alloc(0, 100, &s, &n), 0);
	ck_assert_uint_eq(n, 100);
	ck_assert_uint_eq(s, data_start);
	ck_assert(data_bit(s) && data_bit(s + 99) && !data_bit(s + 100));
	ck_assert_uint_eq(fs->sb.free_blocks, before - 100);
	check_counters();
	ck_assert_int_eq(dfree(s, 100), 0);
	ck_assert_uint_eq(fs->sb.free_blocks, before);
	ck_assert(!data_bit(s));
	/* double free refused */
	ck_assert_int_eq(dfree(s, 1), -EUCLEAN);
	ck_assert_int_eq(dfree(data_start - 1, 1), -EINVAL);
	ck_assert_int_eq(dfree(data_start + data_len - 1, 2), -EINVAL);
	check_counters();
	/* the state survives a remount */
	ck_assert_int_eq(alloc(0, 7, &s, &n), 0);
	umount_fs();
	mount_fs();
	ck_assert_uint_eq(fs->sb.free_blocks, data_len - 7);
	ck_assert_int_eq(alloc(0, 1, &s, &n), 0);
	ck_assert_uint_eq(s, data_start + 7);
	check_counters();
}
END_TEST

START_TEST(test_goal)
{
	uint64_t s, n, goal = data_start + 5000;

	ck_assert_int_eq(alloc(goal, 10, &s, &n), 0);
	ck_assert_uint_eq(s, goal);
	ck_assert_uint_eq(n, 10);
	/* the goal is taken: the first fit after it */
	ck_assert_int_eq(alloc(goal, 10, &s, &n), 0);
	ck_assert_uint_eq(s, goal + 10);
	/* a goal inside a too-small hole: the first fit after it */
	ck_assert_int_eq(alloc(goal + 30, 1, &s, &n), 0);
	ck_assert_int_eq(alloc(goal + 25, 10, &s, &n), 0);
	ck_assert_uint_eq(s, goal + 31);
	/* a goal out of the zone: best fit */
	ck_assert_int_eq(alloc(3, 10, &s, &n), 0);
	ck_assert_uint_eq(s, goal + 20); /* the 10-block hole: smallest that fits */
	check_counters();
}
END_TEST

START_TEST(test_best_fit)
{
	uint64_t s, n, h[3], sz[3] = {10, 30, 20}, x;

	/* spacer, hole 10, spacer, hole 30, spacer, hole 20, spacer: then free the holes */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(alloc(0, 1, &s, &n), 0);
		ck_assert_int_eq(alloc(0, sz[i], &h[i], &n), 0);
		ck_assert_uint_eq(h[i], s + 1);
	}
	ck_assert_int_eq(alloc(0, 1, &s, &n), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(dfree(h[i], sz[i]), 0);
	ck_assert_int_eq(alloc(0, 15, &s, &n), 0);
	ck_assert_uint_eq(s, h[2]); /* 20 is the best fit for 15 */
	ck_assert_int_eq(alloc(0, 25, &s, &n), 0);
	ck_assert_uint_eq(s, h[1]);
	ck_assert_int_eq(alloc(0, 10, &s, &n), 0);
	ck_assert_uint_eq(s, h[0]);
	ck_assert_int_eq(alloc(0, 5, &s, &n), 0);
	ck_assert_uint_eq(s, h[1] + 25); /* two holes of 5 left: the lower one */

	/* 50 extents of 8, every other one freed: small requests go to the holes */
	ck_assert_int_eq(alloc(0, 400, &x, &n), 0);
	ck_assert_uint_eq(n, 400);
	for (int i = 0; i < 50; i += 2)
		ck_assert_int_eq(dfree(x + 8 * i, 8), 0);
	/* one of the 25 holes of 8 (which one: the lowest of the first few of that
	 * length the index holds, not of all 25) */
	ck_assert_int_eq(alloc(0, 8, &s, &n), 0);
	ck_assert(s >= x && s < x + 400 && (s - x) % 16 == 0);
	ck_assert_int_eq(alloc(0, 100, &s, &n), 0);
	ck_assert_uint_eq(n, 100);
	ck_assert_uint_ge(s, x + 400); /* the big one comes from the free tail */
	check_counters();
}
END_TEST

START_TEST(test_enospc)
{
	uint64_t s, n, total = 0, calls = 0, keep_s = 0, keep_n = 0;

	while (alloc(0, 1000, &s, &n) == 0) {
		total += n;
		if (++calls == 3) {
			keep_s = s;
			keep_n = n;
		}
	}
	ck_assert_uint_eq(total, data_len);
	ck_assert_uint_eq(fs->sb.free_blocks, 0);
	ck_assert_int_eq(alloc(0, 1, &s, &n), -ENOSPC);
	ck_assert_int_eq(alloc(data_start + 10, 1, &s, &n), -ENOSPC);
	check_counters();
	ck_assert_int_eq(dfree(keep_s + 10, 20), 0);
	ck_assert_int_eq(alloc(0, 100, &s, &n), 0);
	ck_assert_uint_eq(s, keep_s + 10);
	ck_assert_uint_eq(n, 20); /* less than wanted: all there is */
	ck_assert_int_eq(alloc(0, 1, &s, &n), -ENOSPC);
	ck_assert_int_eq(dfree(keep_s, keep_n), 0);
	ck_assert_uint_eq(fs->sb.free_blocks, keep_n);
	check_counters();
}
END_TEST

static bool in_quarantine(uint64_t pblk, uint64_t *len)
{
	struct mfs_btree bt = {.root = fs->sb.quarantine_root,
	                       .depth = (uint16_t)fs->sb.quarantine_depth,
	                       .kind = MFS_TREE_QUARANTINE};
	uint64_t key, v;
	uint16_t vlen = sizeof(v);

	if (!bt.root)
		return false;
	if (mfs_bt_lookup_le(fs, &bt, pblk, &key, &v, &vlen))
		return false;
	ck_assert_uint_eq(vlen, sizeof(v));
	if (key + v <= pblk)
		return false;
	*len = v;
	return true;
}

START_TEST(test_quarantine)
{
	uint64_t x, s, n, free0, qlen, bad;

	ck_assert_int_eq(alloc(0, 4, &x, &n), 0);
	bad = x + 1;
	/* one sector of block x + 1 */
	ck_assert_int_eq(blk_poison_add(fs->dev, bad * MFS_SECTORS_PER_BLOCK + 3, 1), 0);
	free0 = fs->sb.free_blocks;
	ck_assert_int_eq(dfree(x, 4), 0);
	ck_assert_uint_eq(fs->sb.free_blocks, free0 + 3);
	ck_assert(in_quarantine(bad, &qlen));
	ck_assert_uint_eq(qlen, 1);
	ck_assert(data_bit(bad));
	ck_assert(!data_bit(x) && !data_bit(x + 2));
	check_counters();

	/* never handed out: not at its goal, not when everything is taken */
	ck_assert_int_eq(alloc(bad, 1, &s, &n), 0);
	ck_assert_uint_ne(s, bad);
	ck_assert_int_eq(dfree(s, 1), 0);
	while (alloc(0, 1000, &s, &n) == 0)
		ck_assert(bad < s || bad >= s + n);
	ck_assert_uint_eq(fs->sb.free_blocks, 0);

	/* release while still poisoned: nothing happens */
	ck_assert_int_eq(mfs_quarantine_release(fs, data_start, data_len), 0);
	ck_assert(in_quarantine(bad, &qlen));
	ck_assert_int_eq(alloc(0, 1, &s, &n), -ENOSPC);

	/* cleared: released and reusable */
	ck_assert_int_eq(blk_poison_clear(fs->dev, bad * MFS_SECTORS_PER_BLOCK, 8), 0);
	ck_assert_int_eq(mfs_quarantine_release(fs, bad, 1), 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0); /* released blocks are usable after the commit */
	ck_assert(!in_quarantine(bad, &qlen));
	ck_assert_uint_eq(fs->sb.free_blocks, 1);
	ck_assert_int_eq(alloc(0, 1, &s, &n), 0);
	ck_assert_uint_eq(s, bad);
	check_counters();
}
END_TEST

/*
 * A release over the whole zone of more quarantine entries than one
 * transaction of the journal can hold (one entry in each of 500 data bitmap
 * blocks, a 256-block journal): it runs in bounded steps, every entry is
 * released, nothing is refused or aborted, and the state survives a remount.
 */
START_TEST(test_quarantine_release_bounded)
{
	uint64_t groups, s, n, free0, qlen, commits0;

	umount_fs();
	fixture_mkfs("-J 1M -N 1000", "64G");
	mount_fs();
	ck_assert_uint_eq(fs->sb.journal_len, 256);
	groups = data_len / MFS_BITMAP_BITS;
	ck_assert_uint_ge(groups, 400);
	for (uint64_t g = 0; g < groups; g++) {
		uint64_t b = data_start + g * MFS_BITMAP_BITS + 5;

		ck_assert_int_eq(alloc(b, 1, &s, &n), 0);
		ck_assert_uint_eq(s, b);
		ck_assert_int_eq(blk_poison_add(fs->dev, b * MFS_SECTORS_PER_BLOCK, 8), 0);
		ck_assert_int_eq(dfree(b, 1), 0); /* quarantined, one commit each */
	}
	free0 = fs->sb.free_blocks;
	ck_assert_uint_eq(free0, data_len - groups);
	for (uint64_t g = 0; g < groups; g++)
		ck_assert_int_eq(blk_poison_clear(fs->dev,
		                                  (data_start + g * MFS_BITMAP_BITS + 5) *
		                                          MFS_SECTORS_PER_BLOCK,
		                                  8),
		                 0);
	commits0 = atomic_load(&fs->stats.commits);
	ck_assert_int_eq(mfs_quarantine_release(fs, data_start, data_len), 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	ck_assert_uint_gt(atomic_load(&fs->stats.commits) - commits0, 4); /* in steps */
	ck_assert_uint_eq(fs->sb.free_blocks, data_len);
	for (uint64_t g = 0; g < groups; g++)
		ck_assert(!in_quarantine(data_start + g * MFS_BITMAP_BITS + 5, &qlen));
	ck_assert_uint_eq(fs->sb.quarantine_root, 0);
	check_counters();
	umount_fs();
	mount_fs();
	ck_assert_uint_eq(recount(fs->sb.data_bitmap_start, fs->sb.data_len), data_len);
	ck_assert_int_eq(alloc(data_start + 7 * MFS_BITMAP_BITS + 5, 1, &s, &n), 0);
	ck_assert_uint_eq(s, data_start + 7 * MFS_BITMAP_BITS + 5);
}
END_TEST

START_TEST(test_poison_at_mount)
{
	uint64_t s, n, bad = data_start + 3;

	/* poison on a free block at mount: left out of the free space */
	ck_assert_int_eq(blk_poison_add(fs->dev, bad * MFS_SECTORS_PER_BLOCK, 8), 0);
	umount_fs();
	mount_fs();
	ck_assert_int_eq(alloc(data_start, 10, &s, &n), 0);
	ck_assert_uint_ge(s, bad + 1);
	ck_assert_int_eq(alloc(0, 3, &s, &n), 0);
	ck_assert_uint_eq(s, data_start);
	check_counters();
}
END_TEST

START_TEST(test_meta_and_inodes)
{
	uint64_t fixed_end = fs->sb.inode_table_start + fs->sb.inode_table_blocks;
	uint64_t b1, b2, i1, i2, free_meta = fs->sb.free_meta, free_ino = fs->sb.free_inodes;
	struct mfs_txn *txn;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_alloc_meta(fs, txn, &b1), 0);
	ck_assert_int_eq(mfs_alloc_meta(fs, txn, &b2), 0);
	ck_assert_uint_ge(b1, fixed_end);
	ck_assert_uint_lt(b2, fs->sb.meta_start + fs->sb.meta_len);
	ck_assert_uint_ne(b1, b2);
	ck_assert_uint_eq(fs->sb.free_meta, free_meta - 2);
	ck_assert_int_eq(mfs_free_meta(fs, txn, b1), 0);
	ck_assert_int_eq(mfs_free_meta(fs, txn, b1), -EUCLEAN);
	ck_assert_int_eq(mfs_free_meta(fs, txn, fs->sb.inode_table_start), -EINVAL);

	ck_assert_int_eq(mfs_alloc_ino(fs, txn, &i1), 0);
	ck_assert_uint_eq(i1, 2); /* 1 is the root */
	ck_assert_int_eq(mfs_alloc_ino(fs, txn, &i2), 0);
	ck_assert_uint_eq(i2, 3);
	ck_assert_uint_eq(fs->sb.free_inodes, free_ino - 2);
	ck_assert_int_eq(mfs_free_ino(fs, txn, i1), 0);
	ck_assert_int_eq(mfs_free_ino(fs, txn, i1), -EUCLEAN);
	ck_assert_int_eq(mfs_free_ino(fs, txn, MFS_ROOT_INO), -EINVAL);
	ck_assert_int_eq(mfs_free_ino(fs, txn, fs->sb.nr_inodes + 1), -EINVAL);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	check_counters();
}
END_TEST

START_TEST(test_inodes_full)
{
	uint64_t ino, count = 0;
	struct mfs_txn *txn;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	while (mfs_alloc_ino(fs, txn, &ino) == 0) {
		ck_assert_uint_ge(ino, 2);
		ck_assert_uint_le(ino, fs->sb.nr_inodes);
		count++;
	}
	ck_assert_uint_eq(count, fs->sb.nr_inodes - 1);
	ck_assert_uint_eq(fs->sb.free_inodes, 0);
	ck_assert_int_eq(mfs_free_ino(fs, txn, 77), 0);
	ck_assert_int_eq(mfs_alloc_ino(fs, txn, &ino), 0);
	ck_assert_uint_eq(ino, 77);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	check_counters();
}
END_TEST

#define NTHREADS 4
#define NALLOCS  300

struct ext {
	uint64_t s, n;
};

struct worker {
	struct ext ext[NALLOCS];
	unsigned nr;
	unsigned seed;
	int err;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	for (unsigned i = 0; i < NALLOCS; i++) {
		uint64_t want = 1 + rand_r(&w->seed) % 16, goal = 0, s, n;
		struct mfs_txn *txn;
		int ret;

		if (w->nr && rand_r(&w->seed) % 2)
			goal = w->ext[w->nr - 1].s + w->ext[w->nr - 1].n;
		ret = mfs_txn_begin(fs, &txn);
		if (ret) {
			w->err = ret;
			break;
		}
		ret = mfs_alloc_data(fs, txn, goal, want, &s, &n);
		if (!ret) {
			w->ext[w->nr].s = s;
			w->ext[w->nr].n = n;
			w->nr++;
			/* free some back, so frees and allocations interleave */
			if (rand_r(&w->seed) % 4 == 0) {
				w->nr--;
				ret = mfs_free_data(fs, txn, s, n);
			}
		}
		mfs_txn_end(txn);
		if (ret) {
			w->err = ret;
			break;
		}
	}
	return NULL;
}

static int ext_cmp(const void *a, const void *b)
{
	const struct ext *x = a, *y = b;

	return x->s < y->s ? -1 : x->s > y->s;
}

START_TEST(test_threads)
{
	static struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	struct ext *all;
	unsigned total = 0;
	uint64_t used = 0;

	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].seed = 1234u + (unsigned)i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker_fn, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].err, 0);
		total += w[i].nr;
	}
	all = calloc(total, sizeof(*all));
	ck_assert_ptr_nonnull(all);
	total = 0;
	for (int i = 0; i < NTHREADS; i++)
		for (unsigned j = 0; j < w[i].nr; j++) {
			all[total++] = w[i].ext[j];
			used += w[i].ext[j].n;
		}
	qsort(all, total, sizeof(*all), ext_cmp);
	for (unsigned i = 0; i < total; i++) {
		ck_assert_uint_ge(all[i].s, data_start);
		ck_assert_uint_le(all[i].s + all[i].n, data_start + data_len);
		if (i)
			ck_assert_msg(all[i - 1].s + all[i - 1].n <= all[i].s,
			              "extents %llu+%llu and %llu+%llu overlap",
			              (unsigned long long)all[i - 1].s,
			              (unsigned long long)all[i - 1].n,
			              (unsigned long long)all[i].s, (unsigned long long)all[i].n);
		ck_assert(data_bit(all[i].s) && data_bit(all[i].s + all[i].n - 1));
	}
	ck_assert_uint_eq(fs->sb.free_blocks, data_len - used);
	check_counters();
	free(all);
}
END_TEST

/* --- the free extent index against a model (alloc_extents.c, memory only) ---------------- */

#define FX_BLOCKS 2048u

static uint64_t fx_walk(const struct mfs_fext *t, const bool *model, uint64_t *prev_end)
{
	uint64_t n, m;

	if (!t)
		return 0;
	n = fx_walk(t->sl, model, prev_end);
	/* in start order, apart (merged when adjacent), every block free in the model */
	ck_assert_uint_gt(t->start, *prev_end);
	for (uint64_t b = t->start; b < t->start + t->len; b++)
		ck_assert(model[b]);
	/* the run is maximal: the blocks around it are not free */
	ck_assert(t->start == 0 || !model[t->start - 1]);
	ck_assert(t->start + t->len >= FX_BLOCKS || !model[t->start + t->len]);
	*prev_end = t->start + t->len;
	m = t->len;
	if (t->sl && t->sl->smax > m)
		m = t->sl->smax;
	if (t->sr && t->sr->smax > m)
		m = t->sr->smax;
	ck_assert_uint_eq(t->smax, m);
	return n + 1 + fx_walk(t->sr, model, prev_end);
}

/* Every size-class list: linked both ways, of its class, its bit set iff not empty. */
static uint64_t fx_walk_classes(const struct mfs_alloc *a)
{
	uint64_t n = 0;

	for (unsigned c = 0; c < MFS_FX_CLASSES; c++) {
		const struct mfs_fext *prev = NULL;

		ck_assert_int_eq(!!(a->zmask[c / 64] & (1ull << (c % 64))), a->zhead[c] != NULL);
		for (const struct mfs_fext *x = a->zhead[c]; x; prev = x, x = x->znext, n++) {
			ck_assert_ptr_eq(x->zprev, prev);
			ck_assert_uint_eq(mfs_fx_class(x->len), c);
		}
	}
	return n;
}

/* Best fit and the largest extent against the model's maximal free runs. */
static void fx_check_fits(struct mfs_alloc *a, const bool *model)
{
	uint64_t wants[] = {1, 2, 3, 5, 8, 13, 64, 65, 100, 300};
	uint64_t max = 0, max_start = 0;

	for (uint64_t b = 1, run = 0; b <= FX_BLOCKS; b++) {
		if (b < FX_BLOCKS && model[b]) {
			run++;
			continue;
		}
		if (run > max) {
			max = run;
			max_start = b - run;
		}
		run = 0;
	}
	if (max) {
		const struct mfs_fext *l = mfs_fx_largest(a);

		ck_assert(l && l->len == max && l->start == max_start);
	} else {
		ck_assert_ptr_null(mfs_fx_largest(a));
	}
	for (unsigned i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		uint64_t want = wants[i], best = 0, best_start = 0;
		const struct mfs_fext *f = mfs_fx_best_fit(a, want);

		for (uint64_t b = 1, run = 0; b <= FX_BLOCKS; b++) {
			if (b < FX_BLOCKS && model[b]) {
				run++;
				continue;
			}
			if (run >= want && (!best || run < best)) {
				best = run;
				best_start = b - run;
			}
			run = 0;
		}
		if (!best) {
			ck_assert_ptr_null(f);
			continue;
		}
		ck_assert(f && f->len >= want);
		/* exact up to MFS_FX_EXACT blocks: the shortest, and with few of that
		 * length (FX_SCAN), the lowest of them */
		if (best <= MFS_FX_EXACT) {
			unsigned same = 0;

			ck_assert_uint_eq(f->len, best);
			for (const struct mfs_fext *x = a->zhead[mfs_fx_class(best)]; x;
			     x = x->znext)
				same++;
			if (same <= 8) /* FX_SCAN */
				ck_assert_uint_eq(f->start, best_start);
		} else if (mfs_fx_class(best) > mfs_fx_class(want)) {
			/* every extent of the classes above want's fits */
			ck_assert_uint_eq(mfs_fx_class(f->len), mfs_fx_class(best));
		} else {
			ck_assert_uint_ge(mfs_fx_class(f->len), mfs_fx_class(best));
		}
	}
}

static void fx_check(struct mfs_alloc *a, const bool *model)
{
	uint64_t end = 0, want;

	/* starts are >= 1 here: end 0 means "nothing before" */
	ck_assert_uint_eq(fx_walk(a->by_start, model, &end), a->nr_ext);
	ck_assert_uint_eq(fx_walk_classes(a), a->nr_ext);
	fx_check_fits(a, model);
	for (want = 1; want <= 64; want *= 4) {
		uint64_t key = (uint64_t)rand() % FX_BLOCKS, b, run = 0, fit = 0;
		const struct mfs_fext *f = mfs_fx_first_fit(a->by_start, key, want);

		/* the first maximal run starting at or after key with want blocks */
		for (b = 1; b <= FX_BLOCKS && !fit; b++) {
			if (b < FX_BLOCKS && model[b]) {
				run++;
				continue;
			}
			if (run >= want && b - run >= key)
				fit = b - run;
			run = 0;
		}
		if (fit)
			ck_assert(f && f->start == fit);
		else
			ck_assert_ptr_null(f);
	}
}

/*
 * Random takes (head, tail, middle, whole) and adds against a model bitmap:
 * after each, the by-start treap holds the maximal free runs in order with
 * the right largest lengths, the size-class lists the same nodes each in its
 * class, and first fit, best fit and the largest extent agree with a scan of
 * the model.
 */
START_TEST(test_extent_index)
{
	struct mfs_alloc a = {.rnd = 12345};
	static bool model[FX_BLOCKS];
	unsigned i;

	srand(7);
	memset(model, 0, sizeof(model));
	for (uint64_t b = 1; b < FX_BLOCKS; b++)
		model[b] = true;
	ck_assert_int_eq(mfs_fx_add(&a, 1, FX_BLOCKS - 1), 0);
	fx_check(&a, model);
	for (i = 0; i < 4000; i++) {
		uint64_t b = 1 + (uint64_t)rand() % (FX_BLOCKS - 1), n = 1 + (uint64_t)rand() % 8,
		         e;
		struct mfs_fext *f = mfs_fx_floor(a.by_start, b);

		if (f && f->start + f->len > b && rand() % 3) {
			/* take [b, b + n) clipped to the free extent: head, tail, middle or all */
			e = b + n < f->start + f->len ? b + n : f->start + f->len;
			if (rand() % 4 == 0)
				b = f->start;
			ck_assert_int_eq(mfs_fx_take(&a, f, b, e - b), 0);
			for (; b < e; b++)
				model[b] = false;
		} else {
			/* free [b, b + n) where it is all in use */
			for (e = b; e < b + n && e < FX_BLOCKS && !model[e]; e++)
				;
			if (e == b)
				continue;
			ck_assert(!mfs_fx_overlaps(&a, b, e - b));
			ck_assert_int_eq(mfs_fx_add(&a, b, e - b), 0);
			for (; b < e; b++)
				model[b] = true;
		}
		fx_check(&a, model);
	}
	mfs_fx_destroy(&a);
}
END_TEST

static Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("alloc");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_contiguous);
	tcase_add_test(tc, test_free_waits_for_commit);
	tcase_add_test(tc, test_goal);
	tcase_add_test(tc, test_best_fit);
	tcase_add_test(tc, test_enospc);
	tcase_add_test(tc, test_quarantine);
	tcase_add_test(tc, test_quarantine_release_bounded);
	tcase_add_test(tc, test_poison_at_mount);
	tcase_add_test(tc, test_meta_and_inodes);
	tcase_add_test(tc, test_inodes_full);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_extent_index);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(alloc_suite());
}
