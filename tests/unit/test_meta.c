/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/super.c and fs/core/meta.c: block checksums (every kind of
 * corruption is caught), the superblock (newest valid copy, features,
 * geometry, clear messages), and the metadata buffer cache (twin fallback and
 * healing of corrupt and poisoned copies, both copies bad, threads, eviction).
 * Images are sparse files under /tmp built by testfs.h, not by mkfs.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testfs.h"
#include "check_run.h"

#define NB   4096 /* 16 MiB */
#define SEED 0x1234abcdull

static uint8_t *blkbuf(void)
{
	uint8_t *b = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);

	ck_assert_ptr_nonnull(b);
	return b;
}

/* --- checksums ------------------------------------------------------------ */

static void make_raw(uint8_t *b, uint64_t blk, uint16_t type)
{
	struct mfs_meta_hdr *hdr = (struct mfs_meta_hdr *)b;
	size_t i;

	for (i = 0; i < MFS_BLOCK_SIZE; i++)
		b[i] = (uint8_t)(i * 7 + 3);
	hdr->magic = MFS_META_MAGIC;
	hdr->type = type;
	hdr->blocknr = blk;
	mfs_block_seal(b, SEED);
}

START_TEST(test_csum_seal_verify)
{
	uint8_t *b = blkbuf();
	struct mfs_meta_hdr *hdr = (struct mfs_meta_hdr *)b;
	uint64_t c;

	make_raw(b, 77, MFS_T_BTREE_LEAF);
	ck_assert_int_eq(mfs_block_verify(b, SEED, MFS_T_BTREE_LEAF, 77), 0);
	ck_assert_int_eq(mfs_block_verify(b, SEED, 0, 77), 0); /* any type */
	/* the csum field does not count: same value whatever it holds */
	c = hdr->csum;
	hdr->csum = 0xdeadbeef;
	ck_assert_uint_eq(mfs_block_csum(b, SEED), c);
	hdr->csum = c;
	ck_assert_uint_ne(mfs_block_csum(b, SEED + 1), c);
	ck_assert_int_eq(mfs_block_verify(b, SEED + 1, 0, 77), -EUCLEAN); /* another fs */
	free(b);
}
END_TEST

START_TEST(test_csum_every_bit_flip)
{
	uint8_t *b = blkbuf();
	unsigned byte, bit;

	make_raw(b, 5, MFS_T_INODES);
	for (byte = 0; byte < MFS_BLOCK_SIZE; byte++) {
		bit = (byte * 5) % 8;
		b[byte] ^= (uint8_t)(1u << bit);
		ck_assert_msg(mfs_block_verify(b, SEED, MFS_T_INODES, 5) == -EUCLEAN,
		              "flip of bit %u of byte %u not detected", bit, byte);
		b[byte] ^= (uint8_t)(1u << bit);
	}
	ck_assert_int_eq(mfs_block_verify(b, SEED, MFS_T_INODES, 5), 0);
	free(b);
}
END_TEST

START_TEST(test_csum_type_location_zero)
{
	uint8_t *b = blkbuf();

	make_raw(b, 9, MFS_T_BITMAP);
	ck_assert_int_eq(mfs_block_verify(b, SEED, MFS_T_INODES, 9), -EUCLEAN);  /* wrong type */
	ck_assert_int_eq(mfs_block_verify(b, SEED, MFS_T_BITMAP, 10), -EUCLEAN); /* misdirected */
	memset(b, 0, MFS_BLOCK_SIZE);
	ck_assert_int_eq(mfs_block_verify(b, SEED, 0, 0), -EUCLEAN); /* zeroed block */
	mfs_block_seal(b, SEED); /* a checksum alone is not enough: no magic */
	ck_assert_int_eq(mfs_block_verify(b, SEED, 0, 0), -EUCLEAN);
	free(b);
}
END_TEST

/* --- superblock ------------------------------------------------------------- */

static int read_sb(struct tfs *t, struct mfs_superblock *sb, bool *ro, bool *other_bad, char *err)
{
	return mfs_super_read(t->dev, sb, ro, other_bad, err, 256);
}

START_TEST(test_super_roundtrip)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	bool ro = true, other_bad = true;
	char err[256];
	struct tfs t;

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
	ck_assert(!ro);
	ck_assert(!other_bad);
	ck_assert_str_eq(sb->label, "unit");
	ck_assert_uint_eq(sb->nr_blocks, NB);
	ck_assert_int_gt(sb->write_time_ns, 0);
	free(sb);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_super_primary_corrupt_backup_used)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	uint8_t *b = blkbuf();
	bool ro, other_bad;
	char err[256];
	struct tfs t;

	tfs_create(&t, NB, 64, 256, true);
	tfs_read_raw(&t, 0, b);
	b[1000] ^= 0x10;
	tfs_write_raw(&t, 0, b);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
	ck_assert(other_bad);
	ck_assert_str_eq(sb->label, "unit");

	/* poison on the primary: the same */
	ck_assert_int_eq(blk_poison_add(t.dev, 0, 8), 0);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
	ck_assert(other_bad);

	/* both bad: corrupt (magic seen) is -EUCLEAN, with both states named */
	tfs_read_raw(&t, NB - 1, b);
	b[2000] ^= 1;
	tfs_write_raw(&t, NB - 1, b);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "corrupt"));
	ck_assert_ptr_nonnull(strstr(err, "media error"));
	ck_assert_ptr_nonnull(strstr(err, "checksum mismatch"));
	free(b);
	free(sb);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_super_backup_newer_chosen)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	bool ro, other_bad;
	char err[256];
	struct tfs t;

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
	snprintf(sb->label, sizeof(sb->label), "newer");
	sb->write_time_ns += 1000;
	mfs_block_seal(sb, sb->csum_seed);
	tfs_write_raw(&t, NB - 1, sb); /* only the backup (a torn super write) */
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
	ck_assert_str_eq(sb->label, "newer");
	ck_assert(other_bad);

	/* the primary wins a tie */
	snprintf(sb->label, sizeof(sb->label), "tie");
	mfs_block_seal(sb, sb->csum_seed);
	tfs_write_raw(&t, 0, sb);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
	ck_assert_str_eq(sb->label, "tie");
	free(sb);
	tfs_destroy(&t);
}
END_TEST

/*
 * The newest copy is checksummed but out of range (FORMAT.md §4.2): the
 * other copy is used when it passes validation; both out of range: -EINVAL
 * naming both.
 */
START_TEST(test_super_newest_invalid_falls_back)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	struct mfs_superblock *bad = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*bad));
	bool ro, other_bad;
	char err[256];
	struct tfs t;

	for (int which = 0; which < 2; which++) {
		uint64_t at = which ? NB - 1 : 0;

		tfs_create(&t, NB, 64, 256, true);
		ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
		memcpy(bad, sb, sizeof(*bad));
		bad->journal_tail = bad->journal_len; /* out of range */
		bad->write_time_ns += 1000;           /* and the newest */
		mfs_block_seal(bad, bad->csum_seed);
		tfs_write_raw(&t, at, bad);
		ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), 0);
		ck_assert(other_bad);
		ck_assert_uint_lt(sb->journal_tail, sb->journal_len);
		ck_assert_int_lt(sb->write_time_ns, bad->write_time_ns);

		/* both out of range: the newest copy's error, both named */
		bad->write_time_ns -= 500;
		bad->nr_inodes = bad->inode_table_blocks * MFS_INODES_PER_BLOCK + 1;
		mfs_block_seal(bad, bad->csum_seed);
		tfs_write_raw(&t, at ? 0 : NB - 1, bad);
		ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "both superblock copies are invalid"));
		ck_assert_ptr_nonnull(strstr(err, "journal tail"));
		ck_assert_ptr_nonnull(strstr(err, "inode table"));
		tfs_destroy(&t);
	}
	free(bad);
	free(sb);
}
END_TEST

/* Rewrite the superblock (both copies) after @fn changes it; return mfs_super_read's result. */
static int sb_mutate(struct tfs *t, void (*fn)(struct mfs_superblock *), bool *ro, char *err)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	bool other_bad;
	int ret;

	ck_assert_int_eq(read_sb(t, sb, ro, &other_bad, err), 0);
	fn(sb);
	sb->write_time_ns++;
	mfs_block_seal(sb, sb->csum_seed);
	tfs_write_raw(t, 0, sb);
	tfs_write_raw(t, t->nb - 1, sb);
	ret = read_sb(t, sb, ro, &other_bad, err);
	free(sb);
	return ret;
}

static void set_incompat(struct mfs_superblock *sb)
{
	sb->feature_incompat |= 1u << 5;
}
static void set_rocompat(struct mfs_superblock *sb)
{
	sb->feature_ro_compat |= 1u << 9;
}
static void set_overlap(struct mfs_superblock *sb)
{
	sb->data_start = sb->meta_start + 10;
}
static void set_size(struct mfs_superblock *sb)
{
	sb->nr_blocks += 8;
}
static void set_small_itable(struct mfs_superblock *sb)
{
	sb->nr_inodes = sb->inode_table_blocks * MFS_INODES_PER_BLOCK + 1;
}
static void set_outside(struct mfs_superblock *sb)
{
	sb->meta_twin = sb->nr_blocks - 10;
}
static void set_version(struct mfs_superblock *sb)
{
	sb->version = 2;
}

START_TEST(test_super_features_geometry)
{
	char err[256];
	bool ro;
	struct tfs t;

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(sb_mutate(&t, set_rocompat, &ro, err), 0);
	ck_assert(ro);
	tfs_close_dev(&t);
	tfs_open_dev(&t);
	ck_assert_int_eq(sb_mutate(&t, set_incompat, &ro, err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "bit 5"));
	tfs_destroy(&t);

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(sb_mutate(&t, set_overlap, &ro, err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "overlap"));
	tfs_destroy(&t);

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(sb_mutate(&t, set_size, &ro, err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "the device has 4096"));
	tfs_destroy(&t);

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(sb_mutate(&t, set_small_itable, &ro, err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "inode table"));
	tfs_destroy(&t);

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(sb_mutate(&t, set_outside, &ro, err), -EINVAL);
	tfs_destroy(&t);

	tfs_create(&t, NB, 64, 256, true);
	ck_assert_int_eq(sb_mutate(&t, set_version, &ro, err), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(err, "version 2"));
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_super_not_mendfs)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	uint8_t *b = blkbuf();
	bool ro, other_bad;
	char err[256];
	struct tfs t;

	tfs_create(&t, NB, 64, 256, true);
	memset(b, 0, MFS_BLOCK_SIZE);
	tfs_write_raw(&t, 0, b);
	tfs_write_raw(&t, NB - 1, b);
	ck_assert_int_eq(read_sb(&t, sb, &ro, &other_bad, err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a mendfs filesystem"));
	free(b);
	free(sb);
	tfs_destroy(&t);
}
END_TEST

/* --- buffer cache ---------------------------------------------------------------- */

START_TEST(test_meta_read_write)
{
	struct mfs_buf *b;
	uint8_t *raw = blkbuf();
	struct tfs t;
	uint64_t blk;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 64);
	blk = tfs_meta0(&t);
	tfs_put_block(&t, blk, MFS_T_BTREE_LEAF, 42);
	/* both copies on the device */
	tfs_read_raw(&t, blk, raw);
	ck_assert(tfs_block_is(raw, 42));
	ck_assert_uint_eq(mfs_twin(&t.fs, blk), blk - t.fs.sb.meta_start + t.fs.sb.meta_twin);
	tfs_read_raw(&t, mfs_twin(&t.fs, blk), raw);
	ck_assert(tfs_block_is(raw, 42));
	/* from the cache, and after forgetting it, from the device */
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_LEAF, &b), 0);
	ck_assert(tfs_block_is(b->data, 42));
	mfs_buf_put(b);
	mfs_meta_forget(&t.fs, blk);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_LEAF, &b), 0);
	ck_assert(tfs_block_is(b->data, 42));
	mfs_buf_put(b);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 0);
	/* the wrong type is refused, cached or not */
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_INODES, &b), -EUCLEAN);
	mfs_meta_forget(&t.fs, blk);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_INODES, &b), -EUCLEAN);
	free(raw);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_meta_twin_heals_corrupt_primary)
{
	struct mfs_buf *b;
	uint8_t *raw = blkbuf(), *twin = blkbuf();
	struct tfs t;
	uint64_t blk;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 64);
	blk = tfs_meta0(&t) + 3;
	tfs_put_block(&t, blk, MFS_T_BTREE_NODE, 7);
	mfs_meta_forget(&t.fs, blk);
	tfs_read_raw(&t, blk, raw);
	raw[3000] ^= 0x40;
	tfs_write_raw(&t, blk, raw);

	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	ck_assert(tfs_block_is(b->data, 7));
	mfs_buf_put(b);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 1);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_lost), 0);
	/* the primary was rewritten from the twin */
	tfs_read_raw(&t, blk, raw);
	tfs_read_raw(&t, mfs_twin(&t.fs, blk), twin);
	ck_assert_mem_eq(raw, twin, MFS_BLOCK_SIZE);
	ck_assert_int_eq(mfs_block_verify(raw, t.fs.seed, MFS_T_BTREE_NODE, blk), 0);

	/* a misdirected write (another block's image here) is caught and healed too */
	mfs_meta_forget(&t.fs, blk);
	tfs_make_block(&t, raw, blk + 1, MFS_T_BTREE_NODE, 99);
	tfs_write_raw(&t, blk, raw);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	ck_assert(tfs_block_is(b->data, 7));
	mfs_buf_put(b);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 2);

	/* and a zeroed one */
	mfs_meta_forget(&t.fs, blk);
	memset(raw, 0, MFS_BLOCK_SIZE);
	tfs_write_raw(&t, blk, raw);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	ck_assert(tfs_block_is(b->data, 7));
	mfs_buf_put(b);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 3);
	free(raw);
	free(twin);
	tfs_destroy(&t);
}
END_TEST

/* Does the emulation file mention a range intersecting [s, s + n)? */
static bool bbfile_has(const char *path, uint64_t s, uint64_t n)
{
	unsigned long long a, c;
	char line[128];
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llu %llu", &a, &c) == 2 && a < s + n && s < a + c)
			found = true;
	fclose(f);
	return found;
}

static void heal_poisoned_primary(bool via_file)
{
	struct blk_range r;
	struct mfs_buf *b;
	uint8_t *raw = blkbuf();
	struct tfs t;
	uint64_t blk, sec;
	FILE *f;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 64);
	blk = tfs_meta0(&t) + 5;
	sec = blk * MFS_SECTORS_PER_BLOCK;
	tfs_put_block(&t, blk, MFS_T_INODES, 11);
	tfs_umount(&t);
	if (via_file) {
		/* poison known before the device opens: the emulation file */
		tfs_close_dev(&t);
		f = fopen(t.bb, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "# unit test\n%llu 2\n", (unsigned long long)sec + 3);
		fclose(f);
		ck_assert_int_eq(tfs_open_dev(&t), 0);
	} else {
		ck_assert_int_eq(blk_poison_add(t.dev, sec + 3, 2), 0);
	}
	ck_assert_uint_eq(blk_poison_lookup(t.dev, sec, 8, &r, 1, NULL), 1);
	ck_assert(bbfile_has(t.bb, sec, 8));
	ck_assert_int_eq(blk_read(t.dev, sec, raw, MFS_BLOCK_SIZE, 0), -EIO);

	tfs_mount(&t, 64);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_INODES, &b), 0);
	ck_assert(tfs_block_is(b->data, 11));
	mfs_buf_put(b);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 1);
	/* the rewrite cleared the poison: table, file, media */
	ck_assert_uint_eq(blk_poison_lookup(t.dev, sec, 8, &r, 1, NULL), 0);
	ck_assert(!bbfile_has(t.bb, sec, 8));
	tfs_read_raw(&t, blk, raw);
	ck_assert(tfs_block_is(raw, 11));
	free(raw);
	tfs_destroy(&t);
}

START_TEST(test_meta_poisoned_primary_file)
{
	heal_poisoned_primary(true);
}
END_TEST

START_TEST(test_meta_poisoned_primary_online)
{
	heal_poisoned_primary(false);
}
END_TEST

START_TEST(test_meta_both_bad)
{
	struct mfs_buf *b;
	uint8_t *raw = blkbuf();
	struct tfs t;
	uint64_t blk, twin;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 64);
	blk = tfs_meta0(&t) + 8;
	twin = mfs_twin(&t.fs, blk);
	tfs_put_block(&t, blk, MFS_T_BITMAP, 1);
	tfs_put_block(&t, blk + 1, MFS_T_BITMAP, 2);
	mfs_meta_forget(&t.fs, blk);
	mfs_meta_forget(&t.fs, blk + 1);

	/* both corrupt: -EUCLEAN, lost, nothing "repaired" */
	tfs_read_raw(&t, blk, raw);
	raw[100] ^= 1;
	tfs_write_raw(&t, blk, raw);
	tfs_write_raw(&t, twin, raw);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BITMAP, &b), -EUCLEAN);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_lost), 1);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 0);
	/* not left in the cache as if valid: a second read fails again */
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BITMAP, &b), -EUCLEAN);

	/* both poisoned: -EIO */
	ck_assert_int_eq(blk_poison_add(t.dev, (blk + 1) * MFS_SECTORS_PER_BLOCK, 1), 0);
	ck_assert_int_eq(blk_poison_add(t.dev, (twin + 1) * MFS_SECTORS_PER_BLOCK + 7, 1), 0);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk + 1, MFS_T_BITMAP, &b), -EIO);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_lost), 3);
	free(raw);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_meta_no_dup)
{
	struct mfs_buf *b;
	uint8_t *raw = blkbuf();
	struct tfs t;
	uint64_t blk;

	tfs_create(&t, NB, 64, 256, false);
	tfs_mount(&t, 64);
	ck_assert(!t.fs.dup);
	blk = tfs_meta0(&t);
	ck_assert_uint_eq(mfs_twin(&t.fs, blk), 0);
	tfs_put_block(&t, blk, MFS_T_INODES, 3);
	mfs_meta_forget(&t.fs, blk);
	tfs_read_raw(&t, blk, raw);
	raw[4095] ^= 0x80;
	tfs_write_raw(&t, blk, raw);
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_INODES, &b), -EUCLEAN);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_lost), 1);
	free(raw);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_meta_eviction_bounded)
{
	struct mfs_buf *b, *held[4];
	struct tfs t;
	uint64_t blk0, i;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 16);
	blk0 = tfs_meta0(&t);
	for (i = 0; i < 200; i++)
		tfs_put_block(&t, blk0 + i, MFS_T_BTREE_LEAF, i);
	ck_assert_uint_le(t.fs.nr_bufs, 16);
	/* referenced buffers are never evicted, even past max_bufs */
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(mfs_meta_read(&t.fs, blk0 + i, MFS_T_BTREE_LEAF, &held[i]), 0);
	for (i = 0; i < 200; i++) {
		ck_assert_int_eq(mfs_meta_read(&t.fs, blk0 + i, MFS_T_BTREE_LEAF, &b), 0);
		ck_assert(tfs_block_is(b->data, i));
		mfs_buf_put(b);
		ck_assert_uint_le(t.fs.nr_bufs, 16);
	}
	for (i = 0; i < 4; i++) {
		ck_assert(tfs_block_is(held[i]->data, i));
		mfs_buf_put(held[i]);
	}
	ck_assert_uint_le(t.fs.nr_bufs, 16);
	tfs_destroy(&t);
}
END_TEST

#define THR_BLOCKS 24
#define THR_ITERS  400

struct thr_arg {
	struct tfs *t;
	unsigned id;
	unsigned adds[THR_BLOCKS];
};

/* Each word 6..: a per-block counter in the payload (word 6). */
static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	struct mfs *fs = &a->t->fs;
	uint64_t blk0 = tfs_meta0(a->t);
	unsigned i, seed = a->id * 7919 + 1;

	for (i = 0; i < THR_ITERS; i++) {
		unsigned k = (seed = seed * 1103515245 + 12345) % THR_BLOCKS;
		struct mfs_txn *txn;
		struct mfs_buf *b;

		if (mfs_meta_read(fs, blk0 + k, MFS_T_BTREE_LEAF, &b))
			return (void *)1;
		if (i % 3 == 0) {
			/* read only: the header must always be consistent */
			mfs_lock(&b->lock);
			if (((struct mfs_meta_hdr *)b->data)->blocknr != blk0 + k)
				return (void *)2;
			mfs_unlock(&b->lock);
		} else {
			if (mfs_txn_begin(fs, &txn))
				return (void *)3;
			mfs_lock(&b->lock);
			((uint64_t *)b->data)[6]++;
			mfs_txn_dirty(txn, b);
			mfs_unlock(&b->lock);
			if (mfs_txn_end(txn))
				return (void *)4;
			a->adds[k]++;
			if (i % 50 == 0 && mfs_txn_commit(fs))
				return (void *)5;
		}
		mfs_buf_put(b);
	}
	return NULL;
}

START_TEST(test_meta_threads)
{
	struct thr_arg args[4];
	pthread_t th[4];
	struct mfs_buf *b;
	struct tfs t;
	uint64_t blk0, k, expect;
	unsigned i;
	void *rv;

	tfs_create(&t, NB, 128, 256, true);
	tfs_mount(&t, 8); /* fewer buffers than blocks: eviction under the threads */
	blk0 = tfs_meta0(&t);
	for (k = 0; k < THR_BLOCKS; k++) {
		ck_assert_int_eq(mfs_meta_new(&t.fs, blk0 + k, MFS_T_BTREE_LEAF, 0, &b), 0);
		mfs_block_seal(b->data, t.fs.seed);
		ck_assert_int_eq(mfs_meta_write_inplace(&t.fs, b), 0);
		mfs_buf_put(b);
	}
	memset(args, 0, sizeof(args));
	for (i = 0; i < 4; i++) {
		args[i].t = &t;
		args[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(th[i], &rv), 0);
		ck_assert_ptr_null(rv);
	}
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	ck_assert_int_eq(mfs_checkpoint(&t.fs), 0);
	ck_assert_uint_le(t.fs.nr_bufs, 8);
	/* remount: every increment is on the device */
	tfs_umount(&t);
	ck_assert_int_eq(tfs_mount(&t, 8), 0);
	for (k = 0; k < THR_BLOCKS; k++) {
		for (expect = 0, i = 0; i < 4; i++)
			expect += args[i].adds[k];
		ck_assert_int_eq(mfs_meta_read(&t.fs, blk0 + k, MFS_T_BTREE_LEAF, &b), 0);
		ck_assert_uint_eq(((uint64_t *)b->data)[6], expect);
		mfs_buf_put(b);
	}
	tfs_destroy(&t);
}
END_TEST

static Suite *meta_suite(void)
{
	Suite *s = suite_create("meta");
	TCase *tc = tcase_create("csum");

	tcase_add_test(tc, test_csum_seal_verify);
	tcase_add_test(tc, test_csum_every_bit_flip);
	tcase_add_test(tc, test_csum_type_location_zero);
	suite_add_tcase(s, tc);

	tc = tcase_create("super");
	tcase_add_test(tc, test_super_roundtrip);
	tcase_add_test(tc, test_super_primary_corrupt_backup_used);
	tcase_add_test(tc, test_super_backup_newer_chosen);
	tcase_add_test(tc, test_super_newest_invalid_falls_back);
	tcase_add_test(tc, test_super_features_geometry);
	tcase_add_test(tc, test_super_not_mendfs);
	suite_add_tcase(s, tc);

	tc = tcase_create("cache");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_meta_read_write);
	tcase_add_test(tc, test_meta_twin_heals_corrupt_primary);
	tcase_add_test(tc, test_meta_poisoned_primary_file);
	tcase_add_test(tc, test_meta_poisoned_primary_online);
	tcase_add_test(tc, test_meta_both_bad);
	tcase_add_test(tc, test_meta_no_dup);
	tcase_add_test(tc, test_meta_eviction_bounded);
	tcase_add_test(tc, test_meta_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(meta_suite());
}
