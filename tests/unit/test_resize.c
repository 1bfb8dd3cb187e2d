/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of blk_dev_resize() (online growth of the device under an open
 * engine): a pmem image file grows while open, a pointer from
 * blk_direct_access() taken before stays valid (the mapping does not move)
 * and the new tail reads and writes, flushes and persists; growth past the
 * reservation, a shrunk file and a read-only device are refused with their
 * errors; the io_uring backend reads its new size; the null backend refuses.
 * Poison in the grown range is still found (the summary's last chunk stands
 * for the range past the size it was made for).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blk_internal.h"
#include "check_run.h"

/* Loads under the engine's fault guard: as in test_pmem. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_segv=0:handle_sigbus=0";
}

#define MIB (1u << 20)

static char img[64];

static void make_image(off_t size)
{
	int fd;

	strcpy(img, "/tmp/mendfs-resize-XXXXXX");
	fd = mkstemp(img);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
}

static void set_size(off_t size)
{
	ck_assert_int_eq(truncate(img, size), 0);
}

static struct blk_dev *open_dev(enum blk_backend_type type, unsigned flags)
{
	struct blk_dev_config cfg = {0};
	struct blk_dev *dev = NULL;
	char err[256] = "";
	int ret;

	cfg.backend = type;
	cfg.path = type == BLK_BACKEND_NULL ? NULL : img;
	cfg.size = type == BLK_BACKEND_NULL ? MIB : 0;
	cfg.flags = flags;
	ret = blk_dev_open(&cfg, &dev, err, sizeof(err));
	ck_assert_msg(ret == 0, "open %s: %d %s", img, ret, err);
	return dev;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

START_TEST(test_pmem_grows)
{
	static unsigned char a[64 << 10], b[64 << 10];
	struct blk_dev_info info;
	uint64_t before, after, bad;
	struct blk_dev *dev;
	void *addr = NULL, *addr2 = NULL;
	char err[256] = "";
	int fd;

	make_image(4 * MIB);
	dev = open_dev(BLK_BACKEND_PMEM, 0);
	fill(a, sizeof(a), 1);
	ck_assert_int_eq(blk_write(dev, (4 * MIB - sizeof(a)) >> 9, a, sizeof(a), 0), 0);
	ck_assert_int_eq(blk_direct_access(dev, 4 * MIB - sizeof(a), sizeof(a), &addr, &bad), 0);
	/* the old end is the end: I/O past it is refused before growth */
	ck_assert_int_ne(blk_read(dev, (4 * MIB) >> 9, b, 4096, 0), 0);

	/* not grown: nothing changes */
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), 0);
	ck_assert_uint_eq(before, 4 * MIB);
	ck_assert_uint_eq(after, 4 * MIB);

	set_size(10 * MIB + 4096);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), 0);
	ck_assert_uint_eq(before, 4 * MIB);
	ck_assert_uint_eq(after, 10 * MIB + 4096);
	blk_dev_get_info(dev, &info);
	ck_assert_uint_eq(info.size, 10 * MIB + 4096);
	ck_assert_uint_eq(info.nr_sectors, (10 * MIB + 4096) >> 9);
	/* the old pointer still shows the old data: the mapping did not move */
	ck_assert(memcmp(addr, a, sizeof(a)) == 0);
	/* a write spanning the old end and the new tail, read back and direct */
	fill(b, sizeof(b), 2);
	ck_assert_int_eq(blk_write(dev, (4 * MIB - 4096) >> 9, b, sizeof(b), 0), 0);
	ck_assert_int_eq(blk_write(dev, (10 * MIB) >> 9, b, 4096, BLK_BIO_FUA), 0);
	memset(a, 0, sizeof(a));
	ck_assert_int_eq(blk_read(dev, (4 * MIB - 4096) >> 9, a, sizeof(a), 0), 0);
	ck_assert(memcmp(a, b, sizeof(b)) == 0);
	ck_assert_int_eq(blk_direct_access(dev, 4 * MIB - 4096, sizeof(b), &addr2, &bad), 0);
	ck_assert_ptr_eq(addr2, (char *)addr + sizeof(a) - 4096);
	ck_assert(memcmp(addr2, b, sizeof(b)) == 0);
	ck_assert_int_eq(blk_flush(dev), 0);
	/* grown twice */
	set_size(12 * MIB);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), 0);
	ck_assert_uint_eq(after, 12 * MIB);
	ck_assert_int_eq(blk_write(dev, (12 * MIB - 4096) >> 9, b + 4096, 4096, 0), 0);
	ck_assert_int_eq(blk_flush(dev), 0);
	blk_dev_close(dev);

	/* what was written reached the file */
	fd = open(img, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, a, sizeof(b), 4 * MIB - 4096), (ssize_t)sizeof(b));
	ck_assert(memcmp(a, b, sizeof(b)) == 0);
	ck_assert_int_eq(pread(fd, a, 4096, 10 * MIB), 4096);
	ck_assert(memcmp(a, b, 4096) == 0);
	ck_assert_int_eq(pread(fd, a, 4096, 12 * MIB - 4096), 4096);
	ck_assert(memcmp(a, b + 4096, 4096) == 0);
	close(fd);
	unlink(img);
}
END_TEST

START_TEST(test_pmem_refusals)
{
	uint64_t before, after;
	struct blk_dev *dev;
	char err[256] = "";

	/* past the reservation (16 times the size at open) */
	make_image(1 * MIB);
	dev = open_dev(BLK_BACKEND_PMEM, BLK_CFG_NO_POISON);
	set_size(17 * MIB);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), -EFBIG);
	ck_assert_msg(strstr(err, "reserved"), "%s", err);
	ck_assert_uint_eq(after, 1 * MIB);
	/* within it: grows */
	set_size(16 * MIB);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), 0);
	ck_assert_uint_eq(after, 16 * MIB);
	/* shrunk */
	set_size(8 * MIB);
	err[0] = 0;
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), -EFBIG);
	ck_assert_msg(strstr(err, "shrank"), "%s", err);
	blk_dev_close(dev);

	/* read-only */
	dev = open_dev(BLK_BACKEND_PMEM, BLK_CFG_READONLY | BLK_CFG_NO_POISON);
	set_size(9 * MIB);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), -EROFS);
	ck_assert_msg(strstr(err, "read-only"), "%s", err);
	blk_dev_close(dev);
	unlink(img);

	/* null: a fixed size */
	dev = open_dev(BLK_BACKEND_NULL, 0);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), -EOPNOTSUPP);
	ck_assert_msg(strstr(err, "null"), "%s", err);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_pmem_poison_past_old_end)
{
	static unsigned char b[8192];
	uint64_t before, after, bad = 0;
	struct blk_dev *dev;
	void *addr = NULL;
	char err[256] = "";

	make_image(4 * MIB);
	dev = open_dev(BLK_BACKEND_PMEM, BLK_CFG_NO_POISON);
	set_size(64 * MIB);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), 0);
	/* poison far past the summary made for 4 MiB */
	ck_assert_int_eq(blk_poison_add(dev, (40 * MIB) >> 9, 8), 0);
	ck_assert_int_eq(blk_read(dev, (40 * MIB) >> 9, b, 4096, 0), -EIO);
	ck_assert_int_ne(blk_direct_access(dev, 40 * MIB, 4096, &addr, &bad), 0);
	/* clean ranges around it still go */
	ck_assert_int_eq(blk_read(dev, (30 * MIB) >> 9, b, sizeof(b), 0), 0);
	ck_assert_int_eq(blk_direct_access(dev, 50 * MIB, 4096, &addr, &bad), 0);
	blk_dev_close(dev);
	unlink(img);
}
END_TEST

START_TEST(test_uring_grows)
{
	static unsigned char b[8192];
	uint64_t before, after;
	struct blk_dev *dev;
	char err[256] = "";

	make_image(4 * MIB);
	dev = open_dev(BLK_BACKEND_URING, BLK_CFG_NO_POISON);
	set_size(6 * MIB);
	ck_assert_int_eq(blk_dev_resize(dev, &before, &after, err, sizeof(err)), 0);
	ck_assert_uint_eq(before, 4 * MIB);
	ck_assert_uint_eq(after, 6 * MIB);
	fill(b, sizeof(b), 3);
	ck_assert_int_eq(blk_write(dev, (6 * MIB - sizeof(b)) >> 9, b, sizeof(b), 0), 0);
	memset(b, 0, sizeof(b));
	ck_assert_int_eq(blk_read(dev, (6 * MIB - sizeof(b)) >> 9, b, sizeof(b), 0), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		ck_assert_uint_eq(b[i], (unsigned char)(3 * 131 + i * 7 + (i >> 9)));
	blk_dev_close(dev);
	unlink(img);
}
END_TEST

static Suite *resize_suite(void)
{
	Suite *s = suite_create("resize");
	TCase *tc = tcase_create("resize");

	tcase_add_test(tc, test_pmem_grows);
	tcase_add_test(tc, test_pmem_refusals);
	tcase_add_test(tc, test_pmem_poison_past_old_end);
	tcase_add_test(tc, test_uring_grows);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(resize_suite());
}
