/* SPDX-License-Identifier: MIT */
/*
 * test_namei_readdir.c: readdir: listing, cursors stable across inserts and
 * deletes, hash collisions; a directory of 100 000 entries (1 000 000 with
 * MFS_LONG=1): create, look up, list exactly once, delete.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "namei_util.h"

/* --- readdir ------------------------------------------------------------------------- */

START_TEST(test_readdir_basic)
{
	struct listing l = {0};
	uint64_t d, ino;
	char name[32];
	int i;

	d = mkd(ROOT, "d");
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		mk(d, name, S_IFREG | 0644);
	}
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 302);
	ck_assert_str_eq(l.name[0], ".");
	ck_assert_uint_eq(l.ino[0], d);
	ck_assert_uint_eq(l.cookie[0], 1);
	ck_assert_str_eq(l.name[1], "..");
	ck_assert_uint_eq(l.ino[1], ROOT);
	ck_assert_uint_eq(l.cookie[1], 2);
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		ck_assert(listed(&l, name, &ino));
		ck_assert_uint_eq(ino, look(d, name));
	}
	for (size_t k = 2; k + 1 < l.n; k++)
		ck_assert_uint_lt(l.cookie[k], l.cookie[k + 1]);
	ck_assert_uint_ge(l.cookie[2], 65536);
	list_free(&l);
	/* resuming at each cookie gives the rest */
	l.max = 0;
	ck_assert_int_eq(mfs_readdir(fs, d, 2, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 300);
	list_free(&l);
	ck_assert_int_eq(mfs_readdir(fs, look(d, "n000"), 0, list_fn, &l), -ENOTDIR);
	list_free(&l);
}
END_TEST

START_TEST(test_readdir_stable)
{
	enum { N = 3000 };
	static int seen[2 * N];
	struct listing l = {0};
	uint64_t d, pos;
	char name[32];
	size_t i;
	int k;

	memset(seen, 0, sizeof(seen));
	d = mkd(ROOT, "d");
	for (k = 0; k < N; k++) {
		snprintf(name, sizeof(name), "s%05d", k);
		mk(d, name, S_IFREG | 0644);
	}
	/* the first half of the listing */
	l.max = 2 + N / 2;
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 2 + N / 2);
	pos = l.cookie[l.n - 1];
	for (i = 2; i < l.n; i++)
		seen[atoi(l.name[i] + 1)]++;
	list_free(&l);
	/* churn: delete every third entry (seen or not), insert as many new ones */
	for (k = 0; k < N; k += 3) {
		snprintf(name, sizeof(name), "s%05d", k);
		ck_assert_int_eq(mfs_unlink(fs, d, name), 0);
		snprintf(name, sizeof(name), "s%05d", N + k);
		mk(d, name, S_IFREG | 0644);
	}
	/* the rest, in small batches */
	for (;;) {
		l.max = 97;
		ck_assert_int_eq(mfs_readdir(fs, d, pos, list_fn, &l), 0);
		if (!l.n)
			break;
		for (i = 0; i < l.n; i++)
			seen[atoi(l.name[i] + 1)]++;
		pos = l.cookie[l.n - 1];
		list_free(&l);
	}
	list_free(&l);
	for (k = 0; k < 2 * N; k++) {
		ck_assert_msg(seen[k] <= 1, "entry %d returned %d times", k, seen[k]);
		if (k < N && k % 3)
			ck_assert_msg(seen[k] == 1, "entry %d present throughout was skipped", k);
	}
}
END_TEST

/* Put a raw entry named @name at @key in directory @d (a simulated hash collision). */
static void raw_entry(uint64_t d, uint64_t key, const char *name, uint64_t target, bool add)
{
	uint8_t val[10 + 255];
	struct mfs_ino *dp;
	struct mfs_txn *txn;
	struct mfs_btree bt;
	size_t len = strlen(name);

	ck_assert_int_eq(mfs_iget(fs, d, &dp), 0);
	pthread_rwlock_wrlock(&dp->lock);
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	bt = (struct mfs_btree){.root = dp->di.dir_root,
	                        .depth = dp->di.dir_depth,
	                        .kind = MFS_TREE_DIR,
	                        .owner = d};
	if (add) {
		memcpy(val, &target, 8);
		val[8] = DT_REG;
		val[9] = (uint8_t)len;
		memcpy(val + 10, name, len);
		ck_assert_int_eq(mfs_bt_insert(fs, txn, &bt, key, val, (uint16_t)(10 + len)), 0);
		dp->di.dir_entries++;
	} else {
		ck_assert_int_eq(mfs_bt_delete(fs, txn, &bt, key), 0);
		dp->di.dir_entries--;
	}
	dp->di.dir_root = bt.root;
	dp->di.dir_depth = bt.depth;
	ck_assert_int_eq(mfs_inode_write(fs, txn, dp), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	pthread_rwlock_unlock(&dp->lock);
	mfs_iput(fs, dp);
}

static int cookie_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype,
                     uint64_t next)
{
	uint64_t *want = arg;

	(void)ino;
	(void)dtype;
	if (len == 5 && !memcmp(name, "alpha", 5))
		*want = next;
	return 0;
}

START_TEST(test_collisions)
{
	uint64_t d, f, a, base, cookie = 0;
	struct listing l = {0};

	d = mkd(ROOT, "c");
	f = mk(ROOT, "target", S_IFREG | 0644);
	base = XXH3_64bits_withSeed("alpha", 5, fs->sb.dir_hash_seed) & 0x7fffffffffff0000ull;
	if (!base)
		base = 0x10000;
	/* counters 0 and 2 taken by other names with the same 47 hash bits: "alpha" gets 1 */
	raw_entry(d, base, "other0", f, true);
	raw_entry(d, base | 2, "other2", f, true);
	a = mk(d, "alpha", S_IFREG | 0644);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, cookie_fn, &cookie), 0);
	ck_assert_uint_eq(cookie, base | 1);
	ck_assert_uint_eq(look(d, "alpha"), a);
	ck_assert_int_eq(mfs_mknod(fs, d, "alpha", S_IFREG | 0644, 0, 0, 0, NULL), -EEXIST);
	/* the lowest free counter after a delete; lookups scan past the gap */
	ck_assert_int_eq(mfs_unlink(fs, d, "alpha"), 0);
	raw_entry(d, base, "other0", f, false);
	a = mk(d, "alpha", S_IFREG | 0644);
	cookie = 0;
	ck_assert_int_eq(mfs_readdir(fs, d, 0, cookie_fn, &cookie), 0);
	ck_assert_uint_eq(cookie, base);
	raw_entry(d, base | 1, "other1", f, true);
	raw_entry(d, base, "alpha-moved", a, false);
	raw_entry(d, base | 3, "alpha", a, true);
	ck_assert_uint_eq(look(d, "alpha"), a);
	ck_assert_int_eq(mfs_rename(fs, d, "alpha", ROOT, "alpha", 0), 0);
	ck_assert_uint_eq(look(ROOT, "alpha"), a);
	ck_assert_uint_eq(look(d, "alpha"), 0);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 4); /* ".", "..", other1, other2 */
	list_free(&l);
	raw_entry(d, base | 1, "other1", f, false);
	raw_entry(d, base | 2, "other2", f, false);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "c"), 0);
}
END_TEST

/* --- a large directory ------------------------------------------------------------------ */

static int count_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype,
                    uint64_t next)
{
	uint8_t *seen = arg;
	char tmp[32];
	unsigned long k;

	(void)ino;
	(void)next;
	if (len == 1 || (len == 2 && name[1] == '.'))
		return 0;
	ck_assert_uint_eq(dtype, DT_REG);
	memcpy(tmp, name + 1, len - 1);
	tmp[len - 1] = 0;
	k = strtoul(tmp, NULL, 10);
	seen[k]++;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(test_many_entries)
{
	bool long_run = getenv("MFS_LONG") && atoi(getenv("MFS_LONG"));
	unsigned n = long_run ? 1000000u : 100000u, k;
	char args[64], name[32];
	uint8_t *seen;
	uint64_t d, meta0;
	struct stat st;
	double t0 = now_s();

	teardown();
	snprintf(args, sizeof(args), "-N %u", n + 64);
	setup_args(args, long_run ? "4G" : "1G");
	d = mkd(ROOT, "big");
	meta0 = fs->sb.free_meta;
	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%u", k);
		ck_assert_int_eq(mfs_mknod(fs, d, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
	}
	fprintf(stderr, "namei: %u creates in %.1f s\n", n, now_s() - t0);
	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%u", k);
		ck_assert_msg(mfs_lookup(fs, d, name, &st) == 0, "%s missing", name);
	}
	ck_assert_int_eq(mfs_lookup(fs, d, "f-missing", &st), -ENOENT);
	fprintf(stderr, "namei: + lookups %.1f s\n", now_s() - t0);
	seen = calloc(n, 1);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, count_fn, seen), 0);
	for (k = 0; k < n; k++)
		ck_assert_msg(seen[k] == 1, "f%u listed %u times", k, seen[k]);
	free(seen);
	fprintf(stderr, "namei: + readdir %.1f s\n", now_s() - t0);
	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%u", k);
		ck_assert_int_eq(mfs_unlink(fs, d, name), 0);
	}
	fprintf(stderr, "namei: + unlinks %.1f s\n", now_s() - t0);
	st = getattr(d);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "big"), 0);
	ck_assert_uint_eq(ffree(), fs->sb.nr_inodes - 1);
	ck_assert_uint_ge(fs->sb.free_meta, meta0);
	remount();
	ck_assert_uint_eq(ffree(), fs->sb.nr_inodes - 1);
}
END_TEST

void namei_readdir_tests(TCase *tc, TCase *big)
{
	tcase_add_test(tc, test_readdir_basic);
	tcase_add_test(tc, test_readdir_stable);
	tcase_add_test(tc, test_collisions);
	tcase_add_test(big, test_many_entries);
}
