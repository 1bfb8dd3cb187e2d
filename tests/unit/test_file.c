/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/file.c on images made by the real mkfs.mendfs
 * ($MKFS_MENDFS), mounted with mfs_mount: random writes/reads/truncates/
 * fallocates against a reference buffer (fsx-like), holes, inline -> tree
 * extent maps, contiguity of sequential writes, a write at 5 TiB, truncate
 * both ways, every fallocate mode, SEEK_DATA/SEEK_HOLE, ENOSPC and recovery,
 * persistence across remounts, the poison contract of writes, and 4
 * concurrent writers.
 */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atime.h"
#include "file_util.h"

static char bbfile[sizeof(img) + 16]; /* the image's emulated poison */

static void make_image(const char *size)
{
	fixture_create("file", "", size);
	snprintf(bbfile, sizeof(bbfile), "%s.badblocks", img);
}

static void setup(void)
{
	make_image("64M");
}

/* --- fsx ------------------------------------------------------------------------------ */

#define FSX_MAX (3u << 20)

START_TEST(test_fsx)
{
	uint64_t ino = fixture_file("fsx");
	uint8_t *ref = calloc(1, FSX_MAX), *buf = malloc(FSX_MAX), *data = malloc(FSX_MAX);
	uint64_t size = 0;
	unsigned seed = 12345;

	srand(seed);
	for (unsigned op = 0; op < 3000; op++) {
		unsigned kind = (unsigned)rand() % 11;
		uint64_t off = (uint64_t)rand() % FSX_MAX;
		uint64_t len = 1 + (uint64_t)rand() % (rand() % 4 ? 9000 : 200000);

		if (off + len > FSX_MAX)
			len = FSX_MAX - off;
		if (kind < 4) {
			fill(data, len, op);
			write_all(ino, data, len, off);
			memcpy(ref + off, data, len);
			if (off + len > size)
				size = off + len;
		} else if (kind < 7) {
			ssize_t n = mfs_read(fs, ino, buf, len, (off_t)off);
			uint64_t want = off >= size ? 0 : (off + len > size ? size - off : len);

			ck_assert_int_eq(n, (ssize_t)want);
			ck_assert_msg(!memcmp(buf, ref + off, want), "op %u: read at %llu differs",
			              op, (unsigned long long)off);
		} else if (kind == 7) {
			uint64_t ns = (uint64_t)rand() % FSX_MAX;

			ck_assert_int_eq(truncate_to(ino, ns), 0);
			if (ns < size)
				memset(ref + ns, 0, size - ns);
			size = ns;
		} else if (kind == 8) {
			ck_assert_int_eq(mfs_fallocate(fs, ino,
			                               FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			                               (off_t)off, (off_t)len),
			                 0);
			if (off < size)
				memset(ref + off, 0, (off + len > size ? size : off + len) - off);
		} else if (kind == 9) {
			int mode = rand() % 2 ? 0 : FALLOC_FL_KEEP_SIZE;

			/* unwritten extents: read as zeros, converted (split) by writes */
			ck_assert_int_eq(mfs_fallocate(fs, ino, mode, (off_t)off, (off_t)len), 0);
			if (!mode && off + len > size)
				size = off + len;
		} else {
			int mode = rand() % 2 ? FALLOC_FL_ZERO_RANGE
			                      : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

			ck_assert_int_eq(mfs_fallocate(fs, ino, mode, (off_t)off, (off_t)len), 0);
			memset(ref + off, 0, len);
			if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > size)
				size = off + len;
			if (off + len > size)
				memset(ref + size, 0, FSX_MAX - size);
		}
		ck_assert_uint_eq(fsize(ino), size);
		if (op % 500 == 499) {
			fixture_remount();
			ck_assert_uint_eq(fsize(ino), size);
			if (size)
				check_read(ino, ref, size, 0);
		}
	}
	if (size)
		check_read(ino, ref, size, 0);
	free(ref);
	free(buf);
	free(data);
}
END_TEST

/* --- holes, extents ---------------------------------------------------------------------- */

START_TEST(test_sparse)
{
	uint64_t ino = fixture_file("sparse"), pblk;
	uint8_t *buf = malloc(1 << 20), data[100];
	bool unwritten;

	fill(data, sizeof(data), 1);
	write_all(ino, data, sizeof(data), (1 << 20) + 50);
	ck_assert_uint_eq(fsize(ino), (1 << 20) + 150);
	ck_assert_uint_eq(fblocks(ino), 1);
	memset(buf, 0xff, 1 << 20);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 1 << 20, 0), 1 << 20);
	ck_assert(all_zero(buf, 1 << 20));
	ck_assert_int_eq(mfs_read(fs, ino, buf, 4096, 1 << 20), 150);
	ck_assert(all_zero(buf, 50));
	ck_assert(!memcmp(buf + 50, data, 100));
	bmap(ino, 0, &pblk, NULL, NULL);
	ck_assert_uint_eq(pblk, 0);
	bmap(ino, 256, &pblk, NULL, &unwritten);
	ck_assert_uint_ne(pblk, 0);
	ck_assert(!unwritten);
	/* past EOF: short and empty reads */
	ck_assert_int_eq(mfs_read(fs, ino, buf, 10, (1 << 20) + 150), 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 10, 1 << 30), 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 10, -1), -EINVAL);
	free(buf);
}
END_TEST

START_TEST(test_inline_to_tree)
{
	uint64_t ino = fixture_file("frag"), i, pblk;
	uint8_t data[BS], buf[BS];
	struct mfs_ino *ip;

	for (i = 0; i < 300; i++) {
		fill(data, BS, (unsigned)i);
		write_all(ino, data, BS, i * 2 * BS);
		if (i == 3) {
			ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
			ck_assert(!(le32toh(ip->di.iflags) & MFS_IFL_EXTENT_TREE));
			ck_assert_uint_eq(le16toh(ip->di.nr_inline), 4);
			mfs_iput(fs, ip);
		}
	}
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	ck_assert(le32toh(ip->di.iflags) & MFS_IFL_EXTENT_TREE);
	ck_assert_uint_ne(le64toh(ip->di.ext_root), 0);
	mfs_iput(fs, ip);
	ck_assert_uint_eq(extents(ino, 600), 300);
	ck_assert_uint_eq(fblocks(ino), 300);
	fixture_remount();
	for (i = 0; i < 300; i++) {
		fill(data, BS, (unsigned)i);
		ck_assert_int_eq(mfs_read(fs, ino, buf, BS, (off_t)(i * 2 * BS)), BS);
		ck_assert(!memcmp(buf, data, BS));
		bmap(ino, i * 2 + 1, &pblk, NULL, NULL);
		ck_assert_uint_eq(pblk, 0);
	}
	/* fill the gaps: neighbours merge as far as the physical layout allows */
	for (i = 0; i < 300; i++) {
		fill(data, BS, 1000 + (unsigned)i);
		write_all(ino, data, BS, (i * 2 + 1) * BS);
	}
	ck_assert_uint_eq(fblocks(ino), 600);
	/* truncate to 0: back to an empty inline map */
	ck_assert_int_eq(truncate_to(ino, 0), 0);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	ck_assert(!(le32toh(ip->di.iflags) & MFS_IFL_EXTENT_TREE));
	ck_assert_uint_eq(le16toh(ip->di.nr_inline), 0);
	ck_assert_uint_eq(le64toh(ip->di.blocks), 0);
	mfs_iput(fs, ip);
}
END_TEST

/*
 * Holes filled in a tree-mapped file: the plan's lookup of the hole gives the
 * goal and the neighbours to merge with (write.c, mfs_fmap_add_hole); left,
 * right and both-sided merges come out as the full path makes them.
 */
START_TEST(test_hole_merge)
{
	static const unsigned order[] = {0, 2, 1, 5, 4, 3};
	static const unsigned after[] = {50, 100, 50, 100, 100, 50};
	uint64_t ino = fixture_file("holes"), i, pblk, count;
	uint8_t data[BS];
	unsigned k;

	for (k = 0; k < 6; k++) {
		for (i = 0; i < 50; i++) {
			fill(data, BS, (unsigned)(i * 10 + order[k]));
			write_all(ino, data, BS, (i * 10 + order[k]) * BS);
		}
		ck_assert_uint_eq(extents(ino, 500), after[k]);
	}
	for (i = 0; i < 50; i++) {
		bmap(ino, i * 10, &pblk, &count, NULL);
		ck_assert_uint_ne(pblk, 0);
		ck_assert_uint_eq(count, 6);
	}
	fixture_remount();
	ck_assert_uint_eq(fblocks(ino), 300);
	for (i = 0; i < 500; i++) {
		if (i % 10 >= 6) {
			bmap(ino, i, &pblk, NULL, NULL);
			ck_assert_uint_eq(pblk, 0);
			continue;
		}
		fill(data, BS, (unsigned)i);
		check_read(ino, data, BS, i * BS);
	}
}
END_TEST

START_TEST(test_sequential)
{
	uint64_t ino = fixture_file("seq"), ino2 = fixture_file("seq2");
	uint8_t *data = malloc(64 << 10);
	unsigned i;

	for (i = 0; i < 256; i++) {
		fill(data, 64 << 10, i);
		write_all(ino, data, 64 << 10, (uint64_t)i << 16);
		write_all(ino2, data, 1000, (uint64_t)i * 1000);
	}
	ck_assert_uint_eq(fsize(ino), 16 << 20);
	ck_assert_uint_le(extents(ino, 4096), 2);
	ck_assert_uint_le(extents(ino2, 63), 2);
	for (i = 0; i < 256; i += 17) {
		fill(data, 64 << 10, i);
		check_read(ino, data, 64 << 10, (uint64_t)i << 16);
		check_read(ino2, data, 1000, (uint64_t)i * 1000);
	}
	free(data);
}
END_TEST

START_TEST(test_huge_offset)
{
	uint64_t ino = fixture_file("huge"), off = 5ull << 40, pblk, count;
	uint8_t data[6000], buf[6000];

	fill(data, sizeof(data), 5);
	write_all(ino, data, sizeof(data), off - 1000);
	ck_assert_uint_eq(fsize(ino), off + 5000);
	ck_assert_uint_eq(fblocks(ino), 3);
	check_read(ino, data, sizeof(data), off - 1000);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 100, 1ll << 40), 100);
	ck_assert(all_zero(buf, 100));
	ck_assert_int_eq(mfs_lseek(fs, ino, 0, SEEK_DATA), (off_t)((off - 1000) & ~(uint64_t)4095));
	bmap(ino, 0, &pblk, &count, NULL);
	ck_assert_uint_eq(pblk, 0);
	ck_assert_uint_eq(count, (off - 1000) / BS);
	fixture_remount();
	check_read(ino, data, sizeof(data), off - 1000);
	/* the maximum file size */
	ck_assert_int_eq(mfs_write(fs, ino, data, 1, (off_t)(1ull << 60)), -EFBIG);
	ck_assert_int_eq(truncate_to(ino, 1ull << 60), -EFBIG);
	ck_assert_int_eq(truncate_to(ino, 16ull << 40), 0);
	ck_assert_uint_eq(fsize(ino), 16ull << 40);
	ck_assert_int_eq(truncate_to(ino, 0), 0);
	ck_assert_uint_eq(fblocks(ino), 0);
}
END_TEST

/* --- truncate, fallocate, seek -------------------------------------------------------- */

START_TEST(test_truncate)
{
	uint64_t ino = fixture_file("trunc"), pblk;
	uint8_t data[10000], buf[12000];

	memset(data, 0xaa, sizeof(data));
	write_all(ino, data, sizeof(data), 0);
	ck_assert_uint_eq(fblocks(ino), 3);
	ck_assert_int_eq(truncate_to(ino, 5000), 0);
	ck_assert_uint_eq(fsize(ino), 5000);
	ck_assert_uint_eq(fblocks(ino), 2);
	bmap(ino, 2, &pblk, NULL, NULL);
	ck_assert_uint_eq(pblk, 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 5000);
	/* grow: sparse, and the old tail of block 1 reads as zeros */
	ck_assert_int_eq(truncate_to(ino, 12000), 0);
	ck_assert_uint_eq(fsize(ino), 12000);
	ck_assert_uint_eq(fblocks(ino), 2);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 12000);
	ck_assert(!memcmp(buf, data, 5000));
	ck_assert(all_zero(buf + 5000, 7000));
	/* the zeroed tail is on the device, not just hidden */
	fixture_remount();
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 12000);
	ck_assert(all_zero(buf + 5000, 7000));
	/* a write past EOF after a shrink */
	ck_assert_int_eq(truncate_to(ino, 4500), 0);
	write_all(ino, data, 10, 8000);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 8010);
	ck_assert(all_zero(buf + 4500, 3500));
	/* a write in a later block, and fallocate, past a shrunk EOF */
	ck_assert_int_eq(truncate_to(ino, 4600), 0);
	write_all(ino, data, 10, 2 * BS + 100);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 2 * BS + 110);
	ck_assert(all_zero(buf + 4600, 2 * BS + 100 - 4600));
	ck_assert_int_eq(truncate_to(ino, 4700), 0);
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 3 * BS, BS), 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), sizeof(buf));
	ck_assert(all_zero(buf + 4700, sizeof(buf) - 4700));
	ck_assert_int_eq(truncate_to(ino, 4800), 0);
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_ZERO_RANGE, 2 * BS, 10), 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 2 * BS + 10);
	ck_assert(all_zero(buf + 4800, 2 * BS + 10 - 4800));
}
END_TEST

START_TEST(test_fallocate)
{
	uint64_t ino = fixture_file("falloc"), pblk, pblk2, count;
	uint8_t data[5 * BS], buf[5 * BS];
	bool unwritten;

	/* mode 0: unwritten blocks, size grows, reads zeros */
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 1000, 3 * BS), 0);
	ck_assert_uint_eq(fsize(ino), 1000 + 3 * BS);
	ck_assert_uint_eq(fblocks(ino), 4);
	bmap(ino, 0, &pblk, &count, &unwritten);
	ck_assert_uint_ne(pblk, 0);
	ck_assert(unwritten);
	ck_assert_uint_eq(count, 4);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 1000 + 3 * BS);
	ck_assert(all_zero(buf, 1000 + 3 * BS));
	/* writing into it converts the blocks written, splitting the extent, in place */
	fill(data, sizeof(data), 7);
	write_all(ino, data, 100, BS + 10);
	bmap(ino, 1, &pblk2, &count, &unwritten);
	ck_assert_uint_eq(pblk2, pblk + 1);
	ck_assert(!unwritten);
	ck_assert_uint_eq(count, 1);
	bmap(ino, 2, &pblk2, NULL, &unwritten);
	ck_assert(unwritten);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 2 * BS, 0), 2 * BS);
	ck_assert(all_zero(buf, BS + 10));
	ck_assert(!memcmp(buf + BS + 10, data, 100));
	ck_assert(all_zero(buf + BS + 110, BS - 110));
	ck_assert_uint_eq(fblocks(ino), 4);

	/* KEEP_SIZE: allocated past EOF, size unchanged */
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 10 * BS, 2 * BS), 0);
	ck_assert_uint_eq(fsize(ino), 1000 + 3 * BS);
	ck_assert_uint_eq(fblocks(ino), 6);
	bmap(ino, 10, &pblk, NULL, &unwritten);
	ck_assert(pblk && unwritten);

	/* PUNCH_HOLE: whole blocks freed, partial ones zeroed */
	ck_assert_int_eq(truncate_to(ino, 0), 0);
	ck_assert_uint_eq(fblocks(ino), 0);
	write_all(ino, data, sizeof(data), 0);
	ck_assert_int_eq(
	        mfs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 3 * BS), 0);
	ck_assert_uint_eq(fsize(ino), 5 * BS);
	ck_assert_uint_eq(fblocks(ino), 3);
	bmap(ino, 1, &pblk, &count, NULL);
	ck_assert_uint_eq(pblk, 0);
	ck_assert_uint_eq(count, 2);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 5 * BS);
	ck_assert(!memcmp(buf, data, 100));
	ck_assert(all_zero(buf + 100, 3 * BS));
	ck_assert(!memcmp(buf + 100 + 3 * BS, data + 100 + 3 * BS, 5 * BS - 100 - 3 * BS));
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE, 0, BS), -EOPNOTSUPP);

	/* ZERO_RANGE: zeros in place over data, unwritten over holes, size grows */
	write_all(ino, data, sizeof(data), 0);
	bmap(ino, 2, &pblk, NULL, NULL);
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_ZERO_RANGE, 50, 3 * BS), 0);
	bmap(ino, 2, &pblk2, NULL, &unwritten);
	ck_assert_uint_eq(pblk2, pblk);
	ck_assert(!unwritten);
	ck_assert_int_eq(mfs_read(fs, ino, buf, sizeof(buf), 0), 5 * BS);
	ck_assert(!memcmp(buf, data, 50));
	ck_assert(all_zero(buf + 50, 3 * BS));
	ck_assert(!memcmp(buf + 50 + 3 * BS, data + 50 + 3 * BS, 5 * BS - 50 - 3 * BS));
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_ZERO_RANGE, 8 * BS, BS), 0);
	ck_assert_uint_eq(fsize(ino), 9 * BS);
	bmap(ino, 8, &pblk, NULL, &unwritten);
	ck_assert(pblk && unwritten);
	ck_assert_int_eq(
	        mfs_fallocate(fs, ino, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 20 * BS, BS), 0);
	ck_assert_uint_eq(fsize(ino), 9 * BS);

	/* bad arguments */
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_COLLAPSE_RANGE, 0, BS), -EOPNOTSUPP);
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 0, 0), -EINVAL);
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, -1, BS), -EINVAL);
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 1ll << 61, BS), -EFBIG);
	ck_assert_int_eq(mfs_fallocate(fs, MFS_ROOT_INO, 0, 0, BS), -EISDIR);
	fixture_remount();
	bmap(ino, 8, &pblk, NULL, &unwritten);
	ck_assert(pblk && unwritten);
}
END_TEST

START_TEST(test_seek)
{
	uint64_t ino = fixture_file("seek");
	uint8_t data[BS];

	fill(data, BS, 3);
	ck_assert_int_eq(mfs_lseek(fs, ino, 0, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(mfs_lseek(fs, ino, 0, SEEK_HOLE), -ENXIO);
	/* [hole 0..4) data 4..6 [hole 6..10) unwritten 10..12 data 12..13, size 14 blocks - 5 */
	write_all(ino, data, BS, 4 * BS);
	write_all(ino, data, BS, 5 * BS);
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 10 * BS, 2 * BS), 0);
	write_all(ino, data, BS, 12 * BS);
	ck_assert_int_eq(truncate_to(ino, 14 * BS - 5), 0);
	ck_assert_int_eq(mfs_lseek(fs, ino, 0, SEEK_DATA), 4 * BS);
	ck_assert_int_eq(mfs_lseek(fs, ino, 0, SEEK_HOLE), 0);
	ck_assert_int_eq(mfs_lseek(fs, ino, 4 * BS + 7, SEEK_DATA), 4 * BS + 7);
	ck_assert_int_eq(mfs_lseek(fs, ino, 4 * BS + 7, SEEK_HOLE), 6 * BS);
	ck_assert_int_eq(mfs_lseek(fs, ino, 6 * BS, SEEK_DATA), 12 * BS);
	ck_assert_int_eq(mfs_lseek(fs, ino, 10 * BS + 1, SEEK_HOLE), 10 * BS + 1);
	ck_assert_int_eq(mfs_lseek(fs, ino, 12 * BS, SEEK_HOLE), 13 * BS);
	ck_assert_int_eq(mfs_lseek(fs, ino, 13 * BS, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(mfs_lseek(fs, ino, 13 * BS + 1, SEEK_HOLE), 13 * BS + 1);
	ck_assert_int_eq(mfs_lseek(fs, ino, 14 * BS - 5, SEEK_HOLE), -ENXIO);
	ck_assert_int_eq(mfs_lseek(fs, ino, -1, SEEK_DATA), -ENXIO);
	ck_assert_int_eq(mfs_lseek(fs, ino, 0, SEEK_SET), -EINVAL);
	/* a file ending in data: the hole is at EOF */
	ck_assert_int_eq(truncate_to(ino, 13 * BS), 0);
	ck_assert_int_eq(mfs_lseek(fs, ino, 12 * BS, SEEK_HOLE), 13 * BS);
}
END_TEST

/* --- ENOSPC -------------------------------------------------------------------------------- */

START_TEST(test_enospc)
{
	uint64_t ino, ino2, total = 0;
	uint8_t *data = malloc(1 << 20), *buf = malloc(1 << 20);
	struct statvfs st, st0;
	ssize_t n;

	fixture_teardown();
	make_image("16M");
	ino = fixture_file("big");
	ino2 = fixture_file("small");
	write_all(ino2, "hello", 5, 0);
	ck_assert_int_eq(mfs_statfs(fs, &st0), 0);
	fill(data, 1 << 20, 9);
	for (;;) {
		n = mfs_write(fs, ino, data, 1 << 20, (off_t)total);
		if (n <= 0) {
			ck_assert_int_eq(n, -ENOSPC);
			break;
		}
		total += (uint64_t)n;
		if (n < 1 << 20) {
			ck_assert_int_eq(n % BS, 0);
			ck_assert_int_eq(mfs_write(fs, ino, data, 1 << 20, (off_t)total), -ENOSPC);
			break;
		}
	}
	ck_assert_uint_gt(total, 4 << 20);
	ck_assert_uint_eq(fsize(ino), total);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, 0);
	/* a partial block write into a hole has nowhere to go either */
	ck_assert_int_eq(mfs_write(fs, ino2, "x", 1, 100 * BS), -ENOSPC);
	ck_assert_uint_eq(fsize(ino2), 5);
	/* overwrites in place still work */
	write_all(ino2, "HELLO", 5, 0);
	for (uint64_t off = 0; off < total; off += 1 << 20) {
		size_t len = total - off < (1 << 20) ? total - off : 1 << 20;

		ck_assert_int_eq(mfs_read(fs, ino, buf, len, (off_t)off), (ssize_t)len);
		ck_assert(!memcmp(buf, data + (off % (1 << 20)), len));
	}
	fixture_remount();
	ck_assert_uint_eq(fsize(ino), total);
	ck_assert_int_eq(truncate_to(ino, total / 2), 0);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_ge(st.f_bfree, (total / 2) / BS - 1);
	write_all(ino2, data, 1 << 20, 4096);
	check_read(ino2, data, 1 << 20, 4096);
	check_read(ino2, (const uint8_t *)"HELLO", 5, 0);
	/* everything back: the counters (recounted from the bitmap at mount) agree */
	ck_assert_int_eq(truncate_to(ino, 0), 0);
	ck_assert_int_eq(truncate_to(ino2, 5), 0);
	fixture_remount();
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, st0.f_bfree);
	check_read(ino2, (const uint8_t *)"HELLO", 5, 0);
	free(data);
	free(buf);
}
END_TEST

/* --- persistence, poison -------------------------------------------------------------------- */

START_TEST(test_persist)
{
	uint64_t ino = fixture_file("persist"), pblk, pblk2;
	uint8_t *data = malloc(300000);

	fill(data, 300000, 11);
	write_all(ino, data, 300000, 12345);
	bmap(ino, 10, &pblk, NULL, NULL);
	ck_assert_int_eq(mfs_fsync(fs, ino, false), 0);
	ck_assert_int_eq(mfs_fsync(fs, ino, true), 0);
	fixture_remount();
	ck_assert_uint_eq(fsize(ino), 312345);
	check_read(ino, data, 300000, 12345);
	bmap(ino, 10, &pblk2, NULL, NULL);
	ck_assert_uint_eq(pblk, pblk2);
	/* read-only: reads work, changes are -EROFS */
	{
		struct mfs_mount_opts ro = {.read_only = true};

		fixture_umount();
		fixture_mount(&ro);
		check_read(ino, data, 300000, 12345);
		ck_assert_int_eq(mfs_write(fs, ino, data, 10, 0), -EROFS);
		ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 0, BS), -EROFS);
		ck_assert_int_eq(mfs_fsync(fs, ino, false), 0);
		ck_assert_uint_eq(fsize(ino), 312345);
	}
	free(data);
}
END_TEST

START_TEST(test_poison)
{
	uint64_t ino = fixture_file("poison"), pblk, pblk2, sec;
	uint8_t data[3 * BS], blk[BS], buf[3 * BS], raw[BS], junk[200];
	struct blk_range r;
	unsigned total = 0;

	fill(data, sizeof(data), 21);
	write_all(ino, data, sizeof(data), 0);
	ck_assert_int_eq(mfs_fsync(fs, ino, false), 0);
	bmap(ino, 1, &pblk, NULL, NULL);
	sec = pblk * MFS_SECTORS_PER_BLOCK;
	ck_assert_int_eq(blk_poison_add(fs->dev, sec + 2, 1), 0);

	/* a write covering the poisoned sector in part fails, and nothing changes */
	memset(junk, 0x5a, sizeof(junk));
	ck_assert_int_eq(mfs_write(fs, ino, junk, sizeof(junk), BS + 2 * 512 + 10), -EIO);
	ck_assert_int_eq(mfs_write(fs, ino, junk, sizeof(junk), BS + 2 * 512 - 100), -EIO);
	ck_assert_int_eq(mfs_write(fs, ino, junk, 2, BS + 3 * 512 - 1), -EIO);
	ck_assert_int_eq(mfs_read(fs, ino, buf, BS, BS), -EIO);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 1);
	for (unsigned s = 0; s < 8; s++) {
		if (s == 2)
			continue;
		ck_assert_int_eq(blk_read(fs->dev, sec + s, raw, 512, 0), 0);
		ck_assert(!memcmp(raw, data + BS + s * 512, 512));
	}
	/* sector granularity: a partial write of clean sectors works, the poison stays */
	ck_assert_int_eq(mfs_write(fs, ino, junk, sizeof(junk), BS + 10), (ssize_t)sizeof(junk));
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 1);
	ck_assert_int_eq(blk_read(fs->dev, sec, raw, 512, 0), 0);
	ck_assert(!memcmp(raw, data + BS, 10));
	ck_assert(!memcmp(raw + 10, junk, sizeof(junk)));
	ck_assert(!memcmp(raw + 210, data + BS + 210, 512 - 210));
	for (unsigned s = 1; s < 8; s++) {
		if (s == 2)
			continue;
		ck_assert_int_eq(blk_read(fs->dev, sec + s, raw, 512, 0), 0);
		ck_assert(!memcmp(raw, data + BS + s * 512, 512));
	}
	/* a write covering the poisoned sector whole clears it in place */
	ck_assert_int_eq(mfs_write(fs, ino, junk, 200, BS + 2 * 512 - 100), -EIO);
	memset(raw, 0x77, 512);
	ck_assert_int_eq(mfs_write(fs, ino, raw, 512, BS + 2 * 512), 512);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 0);
	bmap(ino, 1, &pblk2, NULL, NULL);
	ck_assert_uint_eq(pblk2, pblk);
	memcpy(data + BS + 10, junk, sizeof(junk));
	memset(data + BS + 2 * 512, 0x77, 512);
	check_read(ino, data + BS, BS, BS);
	ck_assert_int_eq(blk_poison_add(fs->dev, sec + 2, 1), 0);

	/* the neighbouring blocks are fine */
	check_read(ino, data, BS, 0);
	check_read(ino, data + 2 * BS, BS, 2 * BS);

	/* a whole-block overwrite goes in place and clears the poison */
	fill(blk, BS, 22);
	write_all(ino, blk, BS, BS);
	bmap(ino, 1, &pblk2, NULL, NULL);
	ck_assert_uint_eq(pblk2, pblk);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 0);
	check_read(ino, blk, BS, BS);
	/* now partial writes work again */
	write_all(ino, junk, sizeof(junk), BS + 10);
	memcpy(blk + 10, junk, sizeof(junk));
	check_read(ino, blk, BS, BS);

	/* ZERO_RANGE over poison zeroes in place and clears it */
	ck_assert_int_eq(blk_poison_add(fs->dev, sec + 5, 2), 0);
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_ZERO_RANGE, BS, BS), 0);
	bmap(ino, 1, &pblk2, NULL, NULL);
	ck_assert_uint_eq(pblk2, pblk);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 0);
	ck_assert_int_eq(mfs_read(fs, ino, buf, BS, BS), BS);
	ck_assert(all_zero(buf, BS));

	/* partial-block PUNCH_HOLE over poison: whole sectors zeroed in place, cleared */
	write_all(ino, blk, BS, BS);
	ck_assert_int_eq(blk_poison_add(fs->dev, sec + 5, 1), 0);
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                               BS + 5 * 512 + 1, 100),
	                 -EIO);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 1);
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                               BS + 4 * 512 + 100, 3 * 512),
	                 0);
	ck_assert_uint_eq(blk_poison_lookup(fs->dev, sec, 8, &r, 1, &total), 0);
	bmap(ino, 1, &pblk2, NULL, NULL);
	ck_assert_uint_eq(pblk2, pblk);
	memset(blk + 4 * 512 + 100, 0, 3 * 512);
	check_read(ino, blk, BS, BS);

	/* truncating a poisoned block away quarantines it: never handed out again */
	ck_assert_int_eq(blk_poison_add(fs->dev, sec + 1, 1), 0);
	ck_assert_int_eq(truncate_to(ino, BS), 0);
	ck_assert_uint_eq(fblocks(ino), 1);
	fixture_remount();
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, BS, 64 * BS), 0);
	for (uint64_t l = 1; l < 65; l++) {
		bmap(ino, l, &pblk2, NULL, NULL);
		ck_assert_uint_ne(pblk2, pblk);
	}
}
END_TEST

/* --- concurrency -------------------------------------------------------------------------- */

struct wctx {
	uint64_t ino;
	uint64_t base;
	unsigned id;
};

#define TREGION (1u << 20)

static void *writer(void *arg)
{
	struct wctx *c = arg;
	uint8_t *data = malloc(TREGION);
	unsigned seed = c->id * 7919 + 1;

	fill(data, TREGION, c->id);
	for (unsigned i = 0; i < 200; i++) {
		uint64_t off = rand_r(&seed) % TREGION, len = 1 + rand_r(&seed) % 20000;

		if (off + len > TREGION)
			len = TREGION - off;
		if (mfs_write(fs, c->ino, data + off, len, (off_t)(c->base + off)) != (ssize_t)len)
			break;
	}
	/* finally the whole region, so that it is fully defined */
	if (mfs_write(fs, c->ino, data, TREGION, (off_t)c->base) != TREGION)
		c->id = ~0u;
	free(data);
	return NULL;
}

START_TEST(test_concurrent)
{
	struct wctx c[4];
	pthread_t th[4];
	uint8_t *data = malloc(TREGION);
	unsigned i;

	/* four files */
	for (i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%u", i);
		c[i] = (struct wctx){.ino = fixture_file(name), .base = 0, .id = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer, &c[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_ne(c[i].id, ~0u);
		fill(data, TREGION, i);
		check_read(c[i].ino, data, TREGION, 0);
	}
	/* one file, disjoint regions */
	uint64_t ino = fixture_file("shared");

	for (i = 0; i < 4; i++) {
		c[i] = (struct wctx){.ino = ino, .base = (uint64_t)i * TREGION, .id = 10 + i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer, &c[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	fixture_remount();
	ck_assert_uint_eq(fsize(ino), 4 * TREGION);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_ne(c[i].id, ~0u);
		fill(data, TREGION, 10 + i);
		check_read(ino, data, TREGION, (uint64_t)i * TREGION);
	}
	free(data);
}
END_TEST

/* fsync'd data survives a crash; whatever was committed after maps written data only */
START_TEST(test_crash)
{
	uint64_t ino = fixture_file("crash"), size, i;
	uint8_t *data = malloc(8 << 20), *buf = malloc(8 << 20);

	fill(data, 8 << 20, 31);
	write_all(ino, data, 1 << 20, 0);
	ck_assert_int_eq(mfs_fsync(fs, ino, true), 0);
	for (i = 1; i < 8; i++)
		write_all(ino, data + (i << 20), 1 << 20, i << 20);
	ck_assert_int_eq(truncate_to(ino, 100), 0);
	mfs_crash(fs);
	fs = NULL;
	fixture_mount(NULL);
	size = fsize(ino);
	ck_assert_uint_ge(size, 100);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 8 << 20, 0), (ssize_t)size);
	/*
	 * The fsync'd megabyte is there whatever became of the unsynced
	 * truncate (it zeroes nothing in place); later blocks are the data
	 * written or holes.
	 */
	ck_assert(!memcmp(buf, data, size < BS ? size : BS));
	if (size > 1 << 20) {
		for (i = BS; i < size; i += BS) {
			size_t n = size - i < BS ? size - i : BS;

			ck_assert(!memcmp(buf + i, data + i, n) || all_zero(buf + i, n));
		}
	} else if (size > BS) {
		ck_assert(!memcmp(buf + BS, data + BS, size - BS));
	}
	free(data);
	free(buf);
}
END_TEST

/*
 * Regression (fsx seed 1974690369): ZERO_RANGE or PUNCH_HOLE over a range
 * that ends at EOF, not on a sector boundary, and whose end rounded up to a
 * sector is a block boundary: the bytes of the range in the last block must
 * be zero too (the rounding made that block "whole" for the edge step while
 * the whole-block step still stopped before it).
 */
START_TEST(test_fallocate_eof_edge)
{
	static const int modes[] = {FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
	                            FALLOC_FL_ZERO_RANGE,
	                            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE};
	const uint64_t size = BS + 3700; /* 3700 rounds up to 4096 */
	uint8_t *data = malloc(2 * BS), *back = malloc(2 * BS);

	for (unsigned m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		char name[16];
		uint64_t ino;

		snprintf(name, sizeof(name), "eof%u", m);
		ino = fixture_file(name);
		fill(data, 2 * BS, m + 1);
		ck_assert_int_eq(mfs_write(fs, ino, data, size, 0), (ssize_t)size);
		ck_assert_int_eq(mfs_fallocate(fs, ino, modes[m], 100, (off_t)(size - 100)), 0);
		ck_assert_uint_eq(fsize(ino), size);
		ck_assert_int_eq(mfs_read(fs, ino, back, 2 * BS, 0), (ssize_t)size);
		ck_assert(memcmp(back, data, 100) == 0);
		for (uint64_t i = 100; i < size; i++)
			ck_assert_msg(back[i] == 0, "mode %#x: byte %llu is %u", modes[m],
			              (unsigned long long)i, back[i]);
	}
	free(data);
	free(back);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("file");
	TCase *tc = tcase_create("file");

	tcase_add_checked_fixture(tc, setup, fixture_teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_sparse);
	tcase_add_test(tc, test_inline_to_tree);
	tcase_add_test(tc, test_hole_merge);
	tcase_add_test(tc, test_sequential);
	tcase_add_test(tc, test_huge_offset);
	tcase_add_test(tc, test_truncate);
	tcase_add_test(tc, test_fallocate);
	tcase_add_test(tc, test_fallocate_eof_edge);
	tcase_add_test(tc, test_seek);
	tcase_add_test(tc, test_persist);
	tcase_add_test(tc, test_crash);
	tcase_add_test(tc, test_poison);
	tcase_add_test(tc, test_enospc);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_fsx);
	suite_add_tcase(s, tc);
	return check_run(s);
}
