/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the zero-copy read (mfs_read_direct, fs/core/file.c) on an image
 * made by the real mkfs.mendfs ($MKFS_MENDFS) and mounted with mfs_mount on
 * the pmem backend: the bytes it hands out equal mfs_read's for random ranges
 * over data, holes, unwritten extents and EOF; data pieces are addresses in
 * the device mapping (no copy); poison in the range is -EIO, poison beside it
 * in the same page falls back (-EOPNOTSUPP) to the copying read; too
 * fragmented a range falls back too.
 */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fixture.h"

#define BS MFS_BLOCK_SIZE

static char bbfile[sizeof(img) + 16]; /* the image's emulated poison */

static void setup(void)
{
	fixture_create("rdirect", "", "64M");
	snprintf(bbfile, sizeof(bbfile), "%s.badblocks", img);
}

/* What an emit saw: the bytes gathered, and the iovecs themselves. */
struct seen {
	uint8_t *buf;
	size_t len;
	int calls, cnt;
	struct iovec iov[MFS_DIRECT_IOV_MAX];
};

static int gather(void *arg, const struct iovec *iov, int cnt)
{
	struct seen *s = arg;

	s->calls++;
	s->cnt = cnt;
	s->len = 0;
	for (int i = 0; i < cnt; i++) {
		memcpy(s->buf + s->len, iov[i].iov_base, iov[i].iov_len);
		s->len += iov[i].iov_len;
		s->iov[i] = iov[i];
	}
	return 0;
}

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/* Device block of file block @lblk (0 for a hole). */
static uint64_t pblk_of(uint64_t ino, uint64_t lblk)
{
	struct mfs_ino *ip;
	uint64_t pblk, count;
	bool unwritten;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	ck_assert_int_eq(mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten), 0);
	mfs_iput(fs, ip);
	return pblk;
}

START_TEST(test_matches_copying_read)
{
	const size_t fsz = 40 * BS + 1234;
	uint8_t *data = malloc(fsz), *want = malloc(fsz + BS);
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t ino = fixture_file("f");
	unsigned seed = 1;

	ck_assert(fs->direct_reads); /* an image file: a page-cache mapping */
	s->buf = malloc(fsz + 64 * BS);
	pattern(data, fsz, 3);
	/* data, a hole (blocks 8..15), data, an unwritten extent (24..31), data, partial tail */
	ck_assert_int_eq(mfs_write(fs, ino, data, 8 * BS, 0), 8 * BS);
	ck_assert_int_eq(mfs_write(fs, ino, data + 16 * BS, 8 * BS, 16 * BS), 8 * BS);
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 24 * BS, 8 * BS), 0);
	ck_assert_int_eq(mfs_write(fs, ino, data + 32 * BS, fsz - 32 * BS, 32 * BS),
	                 (ssize_t)(fsz - 32 * BS));

	for (int i = 0; i < 400; i++) {
		off_t off = (off_t)(rand_r(&seed) % (fsz + 2 * BS));
		size_t len = (size_t)(rand_r(&seed) % (20 * BS)) + 1;
		ssize_t n = mfs_read(fs, ino, want, len, off);

		ck_assert_int_ge(n, 0);
		s->calls = 0;
		ck_assert_int_eq(mfs_read_direct(fs, ino, len, off, gather, s), 0);
		ck_assert_int_eq(s->calls, 1);
		ck_assert_msg(s->len == (size_t)n, "off %lld len %zu: %zu bytes, read gave %zd",
		              (long long)off, len, s->len, n);
		ck_assert(memcmp(s->buf, want, (size_t)n) == 0);
	}
	/* at or past EOF: one call with nothing */
	s->calls = 0;
	ck_assert_int_eq(mfs_read_direct(fs, ino, 4096, (off_t)fsz, gather, s), 0);
	ck_assert_int_eq(s->calls, 1);
	ck_assert_int_eq(s->cnt, 0);
	ck_assert_int_eq(mfs_read_direct(fs, ino, 4096, -1, gather, s), -EINVAL);
	ck_assert_int_eq(mfs_read_direct(fs, MFS_ROOT_INO, 4096, 0, gather, s), -EISDIR);
	free(s->buf);
	free(s);
	free(data);
	free(want);
}
END_TEST

START_TEST(test_zero_copy_addresses)
{
	uint8_t *data = malloc(4 * BS);
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t ino = fixture_file("z"), pblk;
	void *addr;

	s->buf = malloc(8 * BS);
	pattern(data, 4 * BS, 9);
	ck_assert_int_eq(mfs_write(fs, ino, data, 4 * BS, 0), 4 * BS);
	pblk = pblk_of(ino, 0);
	ck_assert_uint_ne(pblk, 0);
	ck_assert_int_eq(blk_direct_access(fs->dev, pblk * BS, 4 * BS, &addr, NULL), 0);
	/* bytes 100.. of a contiguous 4-block extent: one iovec into the mapping */
	ck_assert_int_eq(mfs_read_direct(fs, ino, 3 * BS, 100, gather, s), 0);
	ck_assert_int_eq(s->cnt, 1);
	ck_assert_ptr_eq(s->iov[0].iov_base, (uint8_t *)addr + 100);
	ck_assert_uint_eq(s->iov[0].iov_len, 3 * BS);
	ck_assert(memcmp(s->buf, data + 100, 3 * BS) == 0);
	free(s->buf);
	free(s);
	free(data);
}
END_TEST

START_TEST(test_poison)
{
	uint8_t *data = malloc(4 * BS), *buf = malloc(4 * BS);
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t ino = fixture_file("p"), pblk, sec;

	s->buf = malloc(8 * BS);
	pattern(data, 4 * BS, 5);
	ck_assert_int_eq(mfs_write(fs, ino, data, 4 * BS, 0), 4 * BS);
	pblk = pblk_of(ino, 2);
	ck_assert_uint_ne(pblk, 0);
	/* the last sector of file block 2 */
	sec = pblk * MFS_SECTORS_PER_BLOCK + MFS_SECTORS_PER_BLOCK - 1;
	ck_assert_int_eq(blk_poison_add(fs->dev, sec, 1), 0);

	/* a range over the poisoned sector: EIO, and emit is never called */
	s->calls = 0;
	ck_assert_int_eq(mfs_read_direct(fs, ino, 2 * BS, BS, gather, s), -EIO);
	ck_assert_int_eq(s->calls, 0);
	/*
	 * Clean sectors in the same page: the page is protected, so the daemon
	 * falls back to the copying read, which applies the page-granular
	 * contract of normal reads (docs/RECOVERY.md): EIO too.
	 */
	ck_assert_int_eq(mfs_read_direct(fs, ino, 512, 2 * BS, gather, s), -EOPNOTSUPP);
	ck_assert_int_eq(s->calls, 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 512, 2 * BS), -EIO);
	/* blocks away from the poison still go zero-copy */
	ck_assert_int_eq(mfs_read_direct(fs, ino, 2 * BS, 0, gather, s), 0);
	ck_assert_int_eq(s->calls, 1);
	ck_assert(memcmp(s->buf, data, 2 * BS) == 0);
	/* an overwrite of the whole sector clears the poison: zero-copy again */
	ck_assert_int_eq(mfs_write(fs, ino, data + 3 * BS - 512, 512, 3 * BS - 512), 512);
	ck_assert_int_eq(mfs_read_direct(fs, ino, 4 * BS, 0, gather, s), 0);
	ck_assert_uint_eq(s->len, 4 * BS);
	ck_assert(memcmp(s->buf, data, 4 * BS) == 0);
	free(s->buf);
	free(s);
	free(buf);
	free(data);
}
END_TEST

START_TEST(test_fragmented_falls_back)
{
	const unsigned nb = 2 * MFS_DIRECT_IOV_MAX + 8;
	uint8_t *blk = malloc(BS);
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t ino = fixture_file("frag");

	s->buf = malloc((size_t)nb * BS);
	/* every other block: data and holes alternate, one piece each */
	for (unsigned i = 0; i < nb; i += 2) {
		pattern(blk, BS, i);
		ck_assert_int_eq(mfs_write(fs, ino, blk, BS, (off_t)i * BS), BS);
	}
	s->calls = 0;
	ck_assert_int_eq(mfs_read_direct(fs, ino, (size_t)nb * BS, 0, gather, s), -EOPNOTSUPP);
	ck_assert_int_eq(s->calls, 0);
	/* half of it fits */
	ck_assert_int_eq(
	        mfs_read_direct(fs, ino, (size_t)MFS_DIRECT_IOV_MAX * BS / 2, 0, gather, s), 0);
	ck_assert_int_eq(s->calls, 1);
	free(s->buf);
	free(s);
	free(blk);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("readdirect");
	TCase *tc = tcase_create("readdirect");
	tcase_add_checked_fixture(tc, setup, fixture_teardown);
	tcase_add_test(tc, test_matches_copying_read);
	tcase_add_test(tc, test_zero_copy_addresses);
	tcase_add_test(tc, test_poison);
	tcase_add_test(tc, test_fragmented_falls_back);
	suite_add_tcase(su, tc);
	return check_run(su);
}
