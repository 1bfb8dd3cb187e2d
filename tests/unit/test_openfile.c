/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the calls an open file makes (fs/core: the _ip calls on the
 * inode a file handle holds) and of the overwrite fast path: whole allocated
 * blocks inside EOF under the shared inode lock, no journal handle, lazy
 * mtime/ctime made durable by fsync and remount; poison still cleared by an
 * overwrite; concurrent overwriters against truncate and punch; a batch of
 * bios whose completions arrive on another thread (uring).  On images
 * made by the real mkfs.mendfs ($MKFS_MENDFS).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atime.h"
#include "file_util.h"

static void setup(void)
{
	fixture_create("openfile", "", "64M");
}

/* The calls of an open file (_ip: on a referenced inode) behave as those by number */
START_TEST(test_ip_calls)
{
	uint64_t ino = fixture_file("ip");
	uint8_t *data = malloc(4 * BS), *buf = malloc(4 * BS);
	struct mfs_ino *ip, *dir;

	fill(data, 4 * BS, 3);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	ck_assert_int_eq(mfs_write_ip(fs, ip, data, 3 * BS, 0, 0), 3 * BS);
	ck_assert_int_eq(mfs_write_ip(fs, ip, data + 3 * BS, 100, 3 * BS + 10, 0), 100);
	ck_assert_int_eq(mfs_write_ip(fs, ip, data, BS, -1, 0), -EINVAL);
	ck_assert_int_eq(mfs_read_ip(fs, ip, buf, 3 * BS, 0), 3 * BS);
	ck_assert_mem_eq(buf, data, 3 * BS);
	ck_assert_int_eq(mfs_read_ip(fs, ip, buf, 4 * BS, 3 * BS + 10), 100);
	ck_assert_mem_eq(buf, data + 3 * BS, 100);
	ck_assert_int_eq(mfs_read_ip(fs, ip, buf, BS, 8 * BS), 0);
	ck_assert_int_eq(
	        mfs_fallocate_ip(fs, ip, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, BS, BS), 0);
	ck_assert_int_eq(mfs_lseek_ip(fs, ip, BS, SEEK_HOLE), BS);
	ck_assert_int_eq(mfs_lseek_ip(fs, ip, BS, SEEK_DATA), 2 * BS);
	ck_assert_int_eq(mfs_fallocate_ip(fs, ip, 0, 0, 8 * BS), 0);
	ck_assert_uint_eq(fsize(ino), 8 * BS);
	ck_assert_int_eq(mfs_fsync_ip(fs, ip, false), 0);
	mfs_iput(fs, ip);
	/* what the _ip calls wrote is on disk, as by number */
	fixture_remount();
	memset(data + BS, 0, BS);
	check_read(ino, data, 2 * BS, 0);
	/* a directory: the same errors as the calls by number */
	ck_assert_int_eq(mfs_iget(fs, MFS_ROOT_INO, &dir), 0);
	ck_assert_int_eq(mfs_read_ip(fs, dir, buf, BS, 0), -EISDIR);
	ck_assert_int_eq(mfs_write_ip(fs, dir, buf, BS, 0, 0), -EISDIR);
	ck_assert_int_eq(mfs_lseek_ip(fs, dir, 0, SEEK_DATA), -EISDIR);
	ck_assert_int_eq(mfs_fallocate_ip(fs, dir, 0, 0, BS), -EISDIR);
	ck_assert_int_eq(mfs_fsync_ip(fs, dir, true), 0);
	mfs_iput(fs, dir);
	free(data);
	free(buf);
}
END_TEST

/* Nanoseconds of @ino's mtime and ctime, as the filesystem holds them. */
static void file_times(uint64_t ino, int64_t *mtime, int64_t *ctime)
{
	struct stat st;

	ck_assert_int_eq(mfs_getattr(fs, ino, &st), 0);
	*mtime = st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
	*ctime = st.st_ctim.tv_sec * 1000000000ll + st.st_ctim.tv_nsec;
}

/*
 * The overwrite fast path (whole written blocks inside EOF, no transaction):
 * data in place, mtime and ctime moved in memory and durable after fsync and
 * after unmount; an overwrite of poisoned blocks still clears the poison
 */
START_TEST(test_overwrite_fast)
{
	uint64_t ino = fixture_file("ow"), pblk, sec;
	uint8_t *data = malloc(8 * BS), *blk = malloc(2 * BS);
	int64_t m0, c0, m1, c1, m2, c2;
	struct blk_range r;
	unsigned total = 0;
	struct mfs_ino *ip;

	fill(data, 8 * BS, 5);
	write_all(ino, data, 8 * BS, 0);
	ck_assert_int_eq(mfs_fsync(fs, ino, false), 0);
	file_times(ino, &m0, &c0);
	usleep(20000); /* past a tick of the coarse clock */
	fill(blk, 2 * BS, 6);
	memcpy(data + 3 * BS, blk, 2 * BS);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	ck_assert_int_eq(mfs_write_ip(fs, ip, blk, 2 * BS, 3 * BS, 0), 2 * BS);
	file_times(ino, &m1, &c1);
	ck_assert_int_gt(m1, m0);
	ck_assert_int_eq(m1, c1);
	ck_assert_int_eq(fsize(ino), 8 * BS);
	/* in memory only, on the lazy list; fsync writes them (and takes it off) */
	ck_assert_uint_eq(mfs_atime_pending(fs), 1);
	ck_assert_int_eq(mfs_fsync_ip(fs, ip, false), 0);
	ck_assert_uint_eq(mfs_atime_pending(fs), 0);
	mfs_iput(fs, ip);
	/* a second overwrite, left to unmount */
	usleep(20000);
	write_all(ino, blk, BS, 0);
	memcpy(data, blk, BS);
	file_times(ino, &m2, &c2);
	ck_assert_int_gt(m2, m1);
	fixture_remount();
	file_times(ino, &m1, &c1);
	ck_assert_int_eq(m1, m2);
	ck_assert_int_eq(c1, c2);
	check_read(ino, data, 8 * BS, 0);

	/* poison in a block: a whole-block overwrite still clears it */
	bmap(ino, 5, &pblk, NULL, NULL);
	sec = pblk * MFS_SECTORS_PER_BLOCK;
	ck_assert_int_eq(blk_poison_add(fs->dev, sec + 3, 1), 0);
	ck_assert_int_eq(mfs_read(fs, ino, blk, BS, 5 * BS), -EIO);
	fill(blk, BS, 7);
	write_all(ino, blk, BS, 5 * BS);
	memcpy(data + 5 * BS, blk, BS);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 0);
	check_read(ino, data, 8 * BS, 0);
	free(data);
	free(blk);
}
END_TEST

/*
 * An allocating write makes the next write skip the overwrite fast path (a
 * hint: its lookup would find a hole); a write through the slow path that
 * allocates nothing clears it.  The data is right whichever path runs.
 */
START_TEST(test_allocating_hint)
{
	uint64_t ino = fixture_file("hint");
	uint8_t *data = calloc(64, BS), blk[BS];
	struct mfs_ino *ip;

	ck_assert_int_eq(truncate_to(ino, 64 * BS), 0);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	ck_assert(!atomic_load(&ip->allocating));
	fill(blk, BS, 1);
	memcpy(data + 10 * BS, blk, BS);
	ck_assert_int_eq(mfs_write_ip(fs, ip, blk, BS, 10 * BS, 0), BS); /* a hole: allocates */
	ck_assert(atomic_load(&ip->allocating));
	fill(blk, BS, 2);
	memcpy(data + 10 * BS, blk, BS);
	/* the slow path (the hint), allocating nothing */
	ck_assert_int_eq(mfs_write_ip(fs, ip, blk, BS, 10 * BS, 0), BS);
	ck_assert(!atomic_load(&ip->allocating));
	fill(blk, BS, 3);
	memcpy(data + 10 * BS, blk, BS);
	ck_assert_int_eq(mfs_write_ip(fs, ip, blk, BS, 10 * BS, 0), BS); /* fast path */
	ck_assert(!atomic_load(&ip->allocating));
	/* unwritten (fallocated) blocks count as allocating too */
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 30 * BS, BS), 0);
	fill(blk, BS, 4);
	memcpy(data + 30 * BS, blk, BS);
	ck_assert_int_eq(mfs_write_ip(fs, ip, blk, BS, 30 * BS, 0), BS);
	ck_assert(atomic_load(&ip->allocating));
	fill(blk, BS, 5);
	memcpy(data + 20 * BS, blk, BS);
	ck_assert_int_eq(mfs_write_ip(fs, ip, blk, BS, 20 * BS, 0), BS);
	ck_assert(atomic_load(&ip->allocating));
	mfs_iput(fs, ip);
	check_read(ino, data, 64 * BS, 0);
	fixture_remount();
	check_read(ino, data, 64 * BS, 0);
	free(data);
}
END_TEST

struct owctx {
	uint64_t ino;
	unsigned id;
	int err;
};

static void *overwriter(void *arg)
{
	struct owctx *c = arg;
	uint8_t buf[2 * BS];
	unsigned seed = c->id + 1;

	memset(buf, 0x40 + (int)c->id, sizeof(buf));
	for (unsigned i = 0; i < 3000 && !c->err; i++) {
		ssize_t n = mfs_write(fs, c->ino, buf, 2 * BS, (off_t)(rand_r(&seed) % 62) * BS);

		/* short or past EOF after a truncate is fine; an error is not */
		if (n < 0)
			c->err = (int)n;
	}
	return NULL;
}

/* Overwriters under the shared lock against truncate, punch and fallocate (exclusive) */
START_TEST(test_overwrite_vs_truncate)
{
	uint64_t ino = fixture_file("owt");
	uint8_t *data = malloc(64 * BS);
	struct owctx c[2];
	pthread_t th[2];
	unsigned i, j;

	fill(data, 64 * BS, 9);
	write_all(ino, data, 64 * BS, 0);
	for (i = 0; i < 2; i++) {
		c[i] = (struct owctx){.ino = ino, .id = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, overwriter, &c[i]), 0);
	}
	for (j = 0; j < 200; j++) {
		ck_assert_int_eq(truncate_to(ino, (uint64_t)(j % 64) * BS), 0);
		ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		                               0, 2 * BS),
		                 0);
		write_all(ino, data, 64 * BS, 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(c[i].err, 0);
	}
	ck_assert_int_eq(mfs_fsync(fs, ino, false), 0);
	fixture_remount();
	ck_assert_uint_eq(fsize(ino), 64 * BS);
	/* every block holds the reference data or one overwriter's whole block */
	for (j = 0; j < 64; j++) {
		uint8_t b[BS];

		ck_assert_int_eq(mfs_read(fs, ino, b, BS, (off_t)j * BS), BS);
		if (memcmp(b, data + j * BS, BS)) {
			ck_assert(b[0] == 0x40 || b[0] == 0x41);
			for (i = 0; i < BS; i++)
				if (b[i] != b[0])
					break;
			ck_assert_uint_eq(i, BS);
		}
	}
	free(data);
}
END_TEST

/*
 * A batch of bios waited for by its owner (fs/core/fio.h): on the uring
 * backend completions arrive on another thread, so the owner sleeps on its
 * count of bios in flight (fio_sleep) and the last end_io wakes it; on pmem
 * they end inline and it never sleeps.  Single bios (an overwrite of one
 * block), batches (a large write), partial blocks and an allocating write:
 * the data is right after a remount either way.
 */
START_TEST(test_fio_wait_async)
{
	struct mfs_mount_opts o = {.backend = BLK_BACKEND_URING};
	size_t len = 3u << 20;
	uint8_t *data = malloc(len), *blk = malloc(2 * BS);
	char err[256] = "";
	uint64_t ino = fixture_file("async");
	unsigned i;
	int ret;

	fixture_umount();
	ret = mfs_mount(img, &o, &fs, err, sizeof(err));
	if (ret) {
		/* no io_uring here (seccomp, old kernel): the pmem path is covered above */
		fprintf(stderr, "test_fio_wait_async: uring mount failed (%d %s), skipped\n", ret,
		        err);
		fs = NULL;
		fixture_mount(NULL);
		goto out;
	}
	fill(data, len, 11);
	write_all(ino, data, len, 0); /* allocating, batches of bios */
	for (i = 0; i < 64; i++) {
		uint64_t off = (uint64_t)((i * 37) % (len / BS)) * BS;

		fill(blk, BS, 12 + i);
		write_all(ino, blk, BS, off); /* one bio: the overwrite fast path */
		memcpy(data + off, blk, BS);
	}
	fill(blk, 2 * BS, 99);
	write_all(ino, blk + 100, BS + 300, 5 * BS + 700); /* partial edge blocks */
	memcpy(data + 5 * BS + 700, blk + 100, BS + 300);
	check_read(ino, data, len, 0);
	fixture_umount();
	fixture_mount(NULL);
	check_read(ino, data, len, 0);
out:
	free(data);
	free(blk);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("openfile");
	TCase *tc = tcase_create("openfile");

	tcase_add_checked_fixture(tc, setup, fixture_teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_ip_calls);
	tcase_add_test(tc, test_overwrite_fast);
	tcase_add_test(tc, test_overwrite_vs_truncate);
	tcase_add_test(tc, test_allocating_hint);
	tcase_add_test(tc, test_fio_wait_async);
	suite_add_tcase(s, tc);
	return check_run(s);
}
