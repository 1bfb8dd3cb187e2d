/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/space.c (ENOSPC only when the space is truly gone) on a
 * 64 MiB image made by the real mkfs.mendfs ($MKFS_MENDFS), mounted with
 * mfs_mount (no commit timer: frees stay pending until something commits):
 *
 *   - a writer and a preallocator, each taking 3/8 of the free space and
 *     deleting it again, 15 rounds at once: never ENOSPC;
 *   - a full filesystem: write, fallocate and a long symlink fail with ENOSPC
 *     (blocks freed by a delete first are found after a commit), also while
 *     another thread keeps creating and deleting small files (bounded retries:
 *     the writer gives up, it does not hang);
 *   - a write short of space, and a mkdir short of inodes, wait for an inode
 *     being freed (mfs_space_freeing_begin/end, as around the daemon's
 *     eviction of an unlinked file) instead of failing.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fixture.h"

#define MIB (1u << 20)
#define BS  MFS_BLOCK_SIZE

static uint8_t *data; /* MIB bytes */

static void setup(void)
{
	fixture_create("space", "", "64M");
	data = malloc(MIB);
	ck_assert_ptr_nonnull(data);
	memset(data, 0x6b, MIB);
}

static void teardown(void)
{
	if (fs)
		fixture_umount();
	free(data);
	fixture_remove();
}

static uint64_t free_blocks(void)
{
	struct statvfs st;

	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	return st.f_bfree;
}

/* Write @len bytes from offset 0 in 1 MiB calls: the bytes written, up to the first error. */
static int64_t write_upto(uint64_t ino, uint64_t len, int *err)
{
	uint64_t off = 0;

	*err = 0;
	while (off < len) {
		size_t n = len - off < MIB ? (size_t)(len - off) : MIB;
		ssize_t r = mfs_write(fs, ino, data, n, (off_t)off);

		if (r <= 0) {
			*err = r < 0 ? (int)r : -EIO;
			break;
		}
		off += (uint64_t)r;
	}
	return (int64_t)off;
}

/* --- two allocating loops near full ------------------------------------------------------ */

#define ROUNDS 15

struct loop {
	uint64_t bytes; /* per round */
	bool falloc;    /* fallocate instead of write */
	int fails, first;
	unsigned first_round;
};

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	const char *name = l->falloc ? "p" : "w";

	for (unsigned r = 0; r < ROUNDS; r++) {
		struct stat st;
		int ret = mfs_mknod(fs, MFS_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);

		if (!ret && l->falloc) {
			ret = mfs_fallocate(fs, st.st_ino, 0, 0, (off_t)l->bytes);
		} else if (!ret) {
			int64_t n = write_upto(st.st_ino, l->bytes, &ret);

			if (!ret && (uint64_t)n != l->bytes)
				ret = -EIO;
		}
		if (ret && !l->fails++) {
			l->first = ret;
			l->first_round = r;
		}
		if (mfs_unlink(fs, MFS_ROOT_INO, name) && !l->fails++)
			l->first = -EBADF;
	}
	return NULL;
}

START_TEST(test_two_loops_near_full)
{
	uint64_t free0 = free_blocks();
	/* 3/8 of the free space each, in whole MiB: 3/4 in use at most */
	uint64_t bytes = free0 * BS * 3 / 8 / MIB * MIB;
	struct loop w = {.bytes = bytes}, p = {.bytes = bytes, .falloc = true};
	pthread_t tw, tp;

	ck_assert_uint_gt(bytes, 8 * MIB);
	ck_assert_int_eq(pthread_create(&tw, NULL, loop_main, &w), 0);
	ck_assert_int_eq(pthread_create(&tp, NULL, loop_main, &p), 0);
	pthread_join(tw, NULL);
	pthread_join(tp, NULL);
	ck_assert_msg(w.fails == 0, "writer: %d of %u rounds failed, first %d in round %u", w.fails,
	              ROUNDS, w.first, w.first_round);
	ck_assert_msg(p.fails == 0, "fallocate: %d of %u rounds failed, first %d in round %u",
	              p.fails, ROUNDS, p.first, p.first_round);
	/* everything deleted: every block is free again once the frees commit */
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0);
}
END_TEST

/* --- a full filesystem ------------------------------------------------------------------- */

static atomic_bool churn_stop;

/* Create, write 8 KiB into, and delete small files until told to stop (ENOSPC is fine). */
static void *churn_main(void *arg)
{
	unsigned long *rounds = arg;

	while (!atomic_load(&churn_stop)) {
		struct stat st;

		if (mfs_mknod(fs, MFS_ROOT_INO, "churn", S_IFREG | 0644, 0, 0, 0, &st) == 0) {
			(void)mfs_write(fs, st.st_ino, data, 8192, 0);
			if (mfs_unlink(fs, MFS_ROOT_INO, "churn"))
				return NULL; /* the test finds "churn" left over */
		}
		++*rounds;
	}
	return NULL;
}

START_TEST(test_full_is_enospc)
{
	uint64_t fill = fixture_file("fill"), small = fixture_file("small"),
	         other = fixture_file("other");
	uint64_t free0 = free_blocks(), size;
	char target[2048];
	struct stat st;
	int64_t n;
	int err;

	ck_assert_int_eq(write_upto(small, 64 * 1024, &err), 64 * 1024);
	ck_assert_int_eq(err, 0);
	n = write_upto(fill, UINT64_MAX / 2, &err);
	ck_assert_int_eq(err, -ENOSPC);
	ck_assert_uint_ge((uint64_t)n / BS, free0 - 16 - 64); /* all but a few (map) blocks */
	ck_assert_uint_eq(free_blocks(), 0);
	size = (uint64_t)n;

	/* full: every allocating path fails with ENOSPC, and at once */
	ck_assert_int_eq(mfs_write(fs, other, data, MIB, 0), -ENOSPC);
	ck_assert_int_eq(mfs_fallocate(fs, other, 0, 0, MIB), -ENOSPC);
	memset(target, 'x', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	ck_assert_int_eq(mfs_symlink(fs, MFS_ROOT_INO, "long", target, 0, 0, &st), -ENOSPC);

	/* blocks freed by an uncommitted delete are found: the write commits and retries */
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "small"), 0);
	ck_assert_int_eq(mfs_write(fs, fill, data, MIB, (off_t)size), 64 * 1024);
	size += 64 * 1024;
	ck_assert_int_eq(mfs_write(fs, fill, data, MIB, (off_t)size), -ENOSPC);

	/* still full while another thread creates and deletes small files: the writer
	 * may take some of their blocks, but it gives up with ENOSPC, it does not spin */
	{
		unsigned long rounds = 0;
		pthread_t th;
		ssize_t r;
		int enospc = 0;

		atomic_store(&churn_stop, false);
		ck_assert_int_eq(pthread_create(&th, NULL, churn_main, &rounds), 0);
		for (unsigned i = 0; i < 20; i++) {
			r = mfs_write(fs, fill, data, MIB, (off_t)size);
			if (r > 0)
				size += (uint64_t)r;
			else if (r == -ENOSPC)
				enospc++;
			else
				ck_abort_msg("write on a full fs: %zd", r);
		}
		atomic_store(&churn_stop, true);
		pthread_join(th, NULL);
		ck_assert_int_gt(enospc, 0);
		ck_assert_int_eq(mfs_lookup(fs, MFS_ROOT_INO, "churn", &st), -ENOENT);
	}
	/* and the space comes back */
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "fill"), 0);
	ck_assert_int_eq(mfs_write(fs, other, data, MIB, 0), MIB);
}
END_TEST

/* --- an inode being freed ---------------------------------------------------------------- */

struct waiter {
	uint64_t ino;
	ssize_t ret;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = mfs_write(fs, w->ino, data, MIB, 0);
	return NULL;
}

START_TEST(test_waits_for_freeing)
{
	uint64_t a = fixture_file("a"), b = fixture_file("b");
	struct waiter w = {.ino = fixture_file("c")};
	pthread_t th;
	int err;

	ck_assert_int_eq(write_upto(a, 4 * MIB, &err), 4 * MIB);
	write_upto(b, UINT64_MAX / 2, &err);
	ck_assert_int_eq(err, -ENOSPC);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), 0);

	/*
	 * As the daemon's eviction of an unlinked file does: its blocks are on
	 * their way back.  The write runs out of space meanwhile and must wait
	 * for it rather than fail.  (Whether the writer gets there before the
	 * delete below does not decide the outcome: either way it gets the space.)
	 */
	mfs_space_freeing_begin(fs);
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
	usleep(200 * 1000);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "a"), 0);
	mfs_space_freeing_end(fs);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.ret, MIB);
}
END_TEST

struct mkdirer {
	const char *name;
	int ret;
};

static void *mkdir_main(void *arg)
{
	struct mkdirer *m = arg;
	struct stat st;

	m->ret = mfs_mkdir(fs, MFS_ROOT_INO, m->name, 0755, 0, 0, &st);
	return NULL;
}

/* The same for an inode: mkdir with every inode in use waits for one being freed. */
START_TEST(test_mkdir_waits_for_freeing)
{
	struct mkdirer m = {.name = "d"};
	char name[32];
	unsigned n;
	pthread_t th;
	struct stat st;
	int ret = 0;

	ck_assert_int_eq(mfs_unmount(fs), 0);
	fs = NULL;
	fixture_mkfs("-N 40", "64M");
	fixture_mount(NULL);
	for (n = 0; n < 1000; n++) {
		snprintf(name, sizeof(name), "f%u", n);
		ret = mfs_mknod(fs, MFS_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(mfs_mkdir(fs, MFS_ROOT_INO, "full", 0755, 0, 0, &st), -ENOSPC);

	mfs_space_freeing_begin(fs);
	ck_assert_int_eq(pthread_create(&th, NULL, mkdir_main, &m), 0);
	usleep(200 * 1000);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "f0"), 0);
	mfs_space_freeing_end(fs);
	pthread_join(th, NULL);
	ck_assert_int_eq(m.ret, 0);
	ck_assert_int_eq(mfs_lookup(fs, MFS_ROOT_INO, "d", &st), 0);
}
END_TEST

static Suite *space_suite(void)
{
	Suite *s = suite_create("space");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_two_loops_near_full);
	tcase_add_test(tc, test_full_is_enospc);
	tcase_add_test(tc, test_waits_for_freeing);
	tcase_add_test(tc, test_mkdir_waits_for_freeing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(space_suite());
}
