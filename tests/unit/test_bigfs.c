/* SPDX-License-Identifier: MIT */
/*
 * A big sparse filesystem (16 TiB by default: $BIGFS_SIZE; in $BIGFS_DIR, else
 * /dev/shm when it exists, else /tmp) mounted through mfs_mount(): the data
 * bitmap is read lazily, one group (bitmap block) at a time (fs/core/alloc.c).
 *
 * Allocation at goals in groups far beyond the first; a free into a group
 * that is not loaded, not handed out before its commit even when the group is
 * loaded in between, and persistent across a remount; statfs exact at every
 * step (from the superblock after a clean unmount, recounted after a crash);
 * fsck.mendfs -n clean at the end.
 */
#include <check.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

static uint64_t data_start, data_len;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void do_mount(const char *why)
{
	struct mfs_mount_opts o = {0};
	double t0 = now();

	fixture_mount(&o);
	printf("bigfs: mount (%s): %.3f s\n", why, now() - t0);
	data_start = fs->sb.data_start;
	data_len = fs->sb.data_len;
}

static uint64_t bfree(void)
{
	struct statvfs st;

	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	return st.f_bfree;
}

static int alloc(uint64_t goal, uint64_t want, uint64_t *s, uint64_t *n)
{
	struct mfs_txn *txn;
	int ret;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ret = mfs_alloc_data(fs, txn, goal, want, s, n);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	return ret;
}

/* Free without committing. */
static void dfree(uint64_t s, uint64_t n)
{
	struct mfs_txn *txn;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_free_data(fs, txn, s, n), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
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

static bool bitmap_bit(uint64_t disk, uint64_t i)
{
	struct mfs_buf *b;
	bool set;

	ck_assert_int_eq(mfs_meta_read(fs, disk + i / MFS_BITMAP_BITS, MFS_T_BITMAP, &b), 0);
	i %= MFS_BITMAP_BITS;
	set = b->data[sizeof(struct mfs_meta_hdr) + i / 8] & (1u << (i % 8));
	mfs_buf_put(b);
	return set;
}

/* Clear bits among the first @nbits of the bitmap at @disk. */
static uint64_t recount(uint64_t disk, uint64_t nbits)
{
	uint64_t free_bits = 0;

	for (uint64_t i = 0; i < nbits; i += MFS_BITMAP_BITS) {
		struct mfs_buf *b;
		const uint64_t *w;

		ck_assert_int_eq(mfs_meta_read(fs, disk + i / MFS_BITMAP_BITS, MFS_T_BITMAP, &b),
		                 0);
		w = (const uint64_t *)(b->data + sizeof(struct mfs_meta_hdr));
		for (uint64_t j = 0; j < MFS_BITMAP_BITS && i + j < nbits; j += 64) {
			uint64_t v = w[j / 64];

			if (i + j + 64 > nbits)
				v |= ~0ull << (nbits - i - j);
			free_bits += 64 - (uint64_t)__builtin_popcountll(v);
		}
		mfs_buf_put(b);
	}
	return free_bits;
}

static const char *big_size(void)
{
	const char *size = getenv("BIGFS_SIZE");

	return size && *size ? size : "16T";
}

static void mkfs_size(const char *size)
{
	/* few inodes: the inode table is written whole by mkfs */
	fixture_mkfs("-N 100000", size);
}

static void setup(void)
{
	const char *d = getenv("BIGFS_DIR");
	struct stat st;

	if (!d || !*d)
		d = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
		                                                                : "/tmp";
	fixture_dir(d, "bigfs");
}

static void teardown(void)
{
	if (fs)
		mfs_crash(fs);
	fs = NULL;
	fixture_remove();
}

static void fsck_clean(void)
{
	char fsck[PATH_MAX], cmd[PATH_MAX * 3];

	tool_path(fsck, sizeof(fsck), "FSCK_MENDFS", "fsck/fsck.mendfs");
	snprintf(cmd, sizeof(cmd), "'%s' -n '%s'", fsck, img);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * The meta zone and inode bitmaps are loaded lazily too: allocations after a
 * clean mount, a free into a bitmap block that is not loaded, persistent, the
 * counters exact.
 */
START_TEST(test_lazy_meta_inodes)
{
	uint64_t m, ino, fm, fi;
	struct mfs_txn *txn;
	struct statvfs st;

	mkfs_size(big_size());
	do_mount("fresh");
	fm = fs->sb.free_meta;
	fi = fs->sb.free_inodes;
	ck_assert_uint_eq(recount(fs->sb.meta_bitmap_start, fs->sb.meta_len), fm);
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_alloc_meta(fs, txn, &m), 0);
	ck_assert_int_eq(mfs_alloc_ino(fs, txn, &ino), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_uint_ge(m, fs->sb.inode_table_start + fs->sb.inode_table_blocks);
	ck_assert_uint_eq(fs->sb.free_meta, fm - 1);
	ck_assert_uint_eq(fs->sb.free_inodes, fi - 1);
	fixture_umount();

	do_mount("clean, a meta block and an inode used");
	ck_assert_uint_eq(fs->sb.free_meta, fm - 1);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_ffree, fi - 1);
	/* frees into blocks nobody loaded; a double free is still refused (on disk) */
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_free_meta(fs, txn, m), 0);
	ck_assert_int_eq(mfs_free_ino(fs, txn, ino), 0);
	ck_assert_int_eq(mfs_free_ino(fs, txn, ino), -EUCLEAN);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_uint_eq(fs->sb.free_meta, fm);
	fixture_umount();

	do_mount("clean, freed again");
	ck_assert(!bitmap_bit(fs->sb.meta_bitmap_start, m - fs->sb.meta_start));
	ck_assert(!bitmap_bit(fs->sb.inode_bitmap_start, ino - 1));
	ck_assert_uint_eq(fs->sb.free_meta, fm);
	ck_assert_uint_eq(fs->sb.free_inodes, fi);
	ck_assert_uint_eq(recount(fs->sb.meta_bitmap_start, fs->sb.meta_len), fm);
	ck_assert_uint_eq(recount(fs->sb.inode_bitmap_start, fs->sb.nr_inodes), fi);
	/* the same block and inode again: found free in the bitmaps */
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_alloc_meta(fs, txn, &m), 0);
	ck_assert_int_eq(mfs_alloc_ino(fs, txn, &ino), 0);
	ck_assert_int_eq(mfs_free_meta(fs, txn, m), 0);
	ck_assert_int_eq(mfs_free_ino(fs, txn, ino), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	fixture_umount();
	fsck_clean();
}
END_TEST

START_TEST(test_lazy_groups)
{
	uint64_t ngroups, a, b, c, d, s, n, free0;

	mkfs_size(big_size());
	do_mount("fresh");
	free0 = bfree();
	ck_assert_uint_eq(free0, data_len);
	ngroups = data_len / MFS_BITMAP_BITS;
	ck_assert_uint_gt(ngroups, 1000);
	a = data_start + ngroups / 2 * MFS_BITMAP_BITS + 7;
	b = data_start + (ngroups - 2) * MFS_BITMAP_BITS + 11;
	c = data_start + ngroups / 3 * MFS_BITMAP_BITS - 5; /* the last 5 of a group */

	/* goals far beyond the first group are honoured exactly */
	ck_assert_int_eq(alloc(a, 100, &s, &n), 0);
	ck_assert_uint_eq(s, a);
	ck_assert_uint_eq(n, 100);
	ck_assert_int_eq(alloc(b, 50, &s, &n), 0);
	ck_assert_uint_eq(s, b);
	ck_assert_uint_eq(n, 50);
	ck_assert_int_eq(alloc(c, 5, &s, &n), 0);
	ck_assert_uint_eq(s, c);
	ck_assert_uint_eq(n, 5);
	/* no goal: best fit among the loaded groups */
	ck_assert_int_eq(alloc(0, 10, &d, &n), 0);
	ck_assert_uint_eq(n, 10);
	ck_assert_uint_eq(bfree(), free0 - 165);
	fixture_umount();

	/* clean: counters from the superblock, groups unloaded */
	do_mount("clean, 4 extents used");
	ck_assert_uint_eq(bfree(), free0 - 165);
	ck_assert(data_bit(a) && data_bit(a + 99) && !data_bit(a + 100));

	/* a free into an unloaded group is not handed out before its commit, even when
	 * an allocation loads the group in between */
	dfree(a, 100);
	ck_assert_uint_eq(bfree(), free0 - 65);
	ck_assert_int_eq(mfs_alloc_data_state(fs), MFS_SPACE_PENDING);
	ck_assert_int_eq(alloc(a, 100, &s, &n), 0);
	ck_assert(s >= a + 100 || s + n <= a);
	ck_assert_int_eq(mfs_sync(fs), 0);
	dfree(s, n);
	ck_assert_int_eq(alloc(a, 100, &s, &n), 0);
	ck_assert_uint_eq(s, a); /* committed: usable */
	ck_assert_uint_eq(n, 100);
	dfree(a, 100);

	/* a free into a group nobody loads: only the bitmap and the counter */
	dfree(b, 50);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(bfree(), free0 - 15);
	fixture_umount();

	do_mount("clean, after frees into unloaded groups");
	ck_assert_uint_eq(bfree(), free0 - 15);
	ck_assert(!data_bit(b) && !data_bit(b + 49));
	ck_assert_int_eq(alloc(b, 50, &s, &n), 0); /* persistent: found free on disk */
	ck_assert_uint_eq(s, b);
	ck_assert_uint_eq(n, 50);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(bfree(), free0 - 65);
	/* a crash: the next mount replays and recounts every group */
	mfs_crash(fs);
	fs = NULL;

	do_mount("after a crash: replay and recount");
	ck_assert_uint_eq(bfree(), free0 - 65);
	ck_assert(data_bit(b) && data_bit(b + 49));
	dfree(b, 50);
	dfree(c, 5);
	dfree(d, 10);
	ck_assert_uint_eq(bfree(), free0);
	fixture_umount();

	do_mount("clean, empty again");
	ck_assert_uint_eq(bfree(), free0);
	fixture_umount();
	fsck_clean();
}
END_TEST

#define NTHREADS 4
#define NITER    3000

struct ext {
	uint64_t s, n;
};

struct worker {
	unsigned seed;
	struct ext ext[NITER];
	unsigned nr;
	int err;
	uint64_t ngroups;
};

static unsigned rnd(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return *seed >> 8;
}

/*
 * Allocate at goals in random groups (most not loaded yet), free random
 * held extents, commit now and then: group loads race with frees becoming
 * pending, with commits giving them back, and with each other.
 */
static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	for (unsigned it = 0; it < NITER && !w->err; it++) {
		struct mfs_txn *txn;
		unsigned op = rnd(&w->seed) % 4;
		int r;

		if (op == 0 && w->nr) {
			unsigned k = rnd(&w->seed) % w->nr;

			w->err = mfs_txn_begin(fs, &txn);
			if (!w->err) {
				w->err = mfs_free_data(fs, txn, w->ext[k].s, w->ext[k].n);
				r = mfs_txn_end(txn);
				w->err = w->err ? w->err : r;
			}
			w->ext[k] = w->ext[--w->nr];
		} else {
			uint64_t g = rnd(&w->seed) % w->ngroups, s, n;
			uint64_t goal = data_start + g * MFS_BITMAP_BITS + rnd(&w->seed) % 1000;

			w->err = mfs_txn_begin(fs, &txn);
			if (!w->err) {
				w->err = mfs_alloc_data(fs, txn, goal, 1 + rnd(&w->seed) % 32, &s,
				                        &n);
				r = mfs_txn_end(txn);
				w->err = w->err ? w->err : r;
			}
			if (!w->err) {
				w->ext[w->nr].s = s;
				w->ext[w->nr].n = n;
				w->nr++;
			}
		}
		if (!w->err && it % 97 == 0)
			w->err = mfs_sync(fs);
	}
	return NULL;
}

static int ext_cmp(const void *a, const void *b)
{
	const struct ext *x = a, *y = b;

	return x->s < y->s ? -1 : x->s > y->s;
}

/* 4 threads on a 1 TiB image (8 k groups, most of them loaded on the way). */
START_TEST(test_lazy_threads)
{
	static struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	uint64_t free0, used = 0;
	struct ext *all;
	unsigned total = 0;
	struct mfs_txn *txn;

	mkfs_size("1T");
	do_mount("1 TiB");
	free0 = bfree();
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].seed = 777u + (unsigned)i;
		w[i].ngroups = data_len / MFS_BITMAP_BITS;
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker_fn, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].err, 0);
		total += w[i].nr;
	}
	all = calloc(total ? total : 1, sizeof(*all));
	ck_assert_ptr_nonnull(all);
	total = 0;
	for (int i = 0; i < NTHREADS; i++)
		for (unsigned j = 0; j < w[i].nr; j++) {
			all[total++] = w[i].ext[j];
			used += w[i].ext[j].n;
		}
	qsort(all, total, sizeof(*all), ext_cmp);
	for (unsigned i = 0; i < total; i++) {
		if (i)
			ck_assert_msg(all[i - 1].s + all[i - 1].n <= all[i].s,
			              "extents %llu+%llu and %llu+%llu overlap",
			              (unsigned long long)all[i - 1].s,
			              (unsigned long long)all[i - 1].n,
			              (unsigned long long)all[i].s, (unsigned long long)all[i].n);
		ck_assert(data_bit(all[i].s) && data_bit(all[i].s + all[i].n - 1));
	}
	ck_assert_uint_eq(bfree(), free0 - used);
	ck_assert_uint_eq(recount(fs->sb.data_bitmap_start, data_len), free0 - used);
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	for (unsigned i = 0; i < total; i++)
		ck_assert_int_eq(mfs_free_data(fs, txn, all[i].s, all[i].n), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	free(all);
	ck_assert_uint_eq(bfree(), free0);
	fixture_umount();
	do_mount("1 TiB, clean");
	ck_assert_uint_eq(bfree(), free0);
	ck_assert_uint_eq(recount(fs->sb.data_bitmap_start, data_len), free0);
	fixture_umount();
	fsck_clean();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bigfs");
	TCase *tc = tcase_create("bigfs");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 280);
	tcase_add_test(tc, test_lazy_groups);
	tcase_add_test(tc, test_lazy_meta_inodes);
	tcase_add_test(tc, test_lazy_threads);
	suite_add_tcase(s, tc);
	return check_run(s);
}
