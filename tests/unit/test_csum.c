/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the data checksums (fs/core/csum.c, feature data_csum,
 * docs/FORMAT.md §15) on images made by the real mkfs.mendfs -O data_csum and
 * mounted with mfs_mount: the table's place and contents after writes
 * (whole blocks, partial blocks, zeroing in place), a sector corrupted on the
 * device behind the filesystem's back (plain read: EIO only over it;
 * recovery read: zeros exactly there; badranges: exactly it), a partial write
 * into it (EIO, nothing written), an overwrite or a zero-init that clears
 * it, persistence across a remount, and the feature off; zero-copy reads
 * (mfs_read_direct) only of blocks whose checksums match where they lie in
 * the mapping; the hash's values
 * (the secret made once per mount, the AVX-512 and AVX2 loops) against
 * XXH3_64bits_withSeed, and the metadata checksums' inlined hash (seal and
 * verify) against super.c's.
 */
#include <check.h>
#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <xxhash.h>

#include "csum.h"
#include "file_util.h"
#include "mfs_recovery.h"

#define NBLK 16u

static void setup(void)
{
	fixture_create("csum", "-O data_csum", "64M");
}

static void setup_off(void)
{
	fixture_create("csum", "", "64M");
}

/* The stored checksums of device block @pblk, read from the table. */
static void table_entry(uint64_t pblk, uint32_t v[8])
{
	uint64_t i = pblk - fs->sb.data_start;
	struct mfs_buf *b;

	ck_assert_int_eq(mfs_meta_read(fs, fs->sb.csum_table_start + i / MFS_CSUM_BLOCKS_PER_TBLOCK,
	                               MFS_T_DATA_CSUM, &b),
	                 0);
	memcpy(v, b->data + 48 + (i % MFS_CSUM_BLOCKS_PER_TBLOCK) * 32, 32);
	mfs_buf_put(b);
}

/* Every block of @ino's [0, nblk) matches its table entry, computed here independently. */
static void check_table(uint64_t ino, unsigned nblk)
{
	_Alignas(4096) uint8_t blk[BS];

	for (unsigned k = 0; k < nblk; k++) {
		uint64_t pblk;
		uint32_t v[8];

		bmap(ino, k, &pblk, NULL, NULL);
		ck_assert_uint_ne(pblk, 0);
		ck_assert_int_eq(blk_read(fs->dev, pblk * 8, blk, BS, 0), 0);
		table_entry(pblk, v);
		for (unsigned s = 0; s < 8; s++)
			ck_assert_msg((uint32_t)XXH3_64bits_withSeed(blk + s * 512, 512,
			                                             fs->sb.csum_seed) == v[s],
			              "block %u sector %u: stored %#x", k, s, v[s]);
	}
}

/* Flip a byte of sector @s of file block @lblk on the device, behind the filesystem. */
static void corrupt(uint64_t ino, uint64_t lblk, unsigned s)
{
	_Alignas(4096) uint8_t sec[512];
	uint64_t pblk;

	bmap(ino, lblk, &pblk, NULL, NULL);
	ck_assert_int_eq(blk_read(fs->dev, pblk * 8 + s, sec, 512, 0), 0);
	sec[100] ^= 0xff;
	ck_assert_int_eq(blk_write(fs->dev, pblk * 8 + s, sec, 512, 0), 0);
}

static uint64_t make_file(const char *name, uint8_t *ref)
{
	uint64_t ino = fixture_file(name);

	fill(ref, NBLK * BS, 7);
	write_all(ino, ref, NBLK * BS, 0);
	return ino;
}

START_TEST(test_layout)
{
	const struct mfs_superblock *sb = &fs->sb;

	ck_assert(fs->data_csum);
	ck_assert(sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM);
	ck_assert_uint_eq(MFS_CSUM_BLOCKS_PER_TBLOCK, 126);
	ck_assert_uint_eq(sb->csum_table_start, sb->inode_table_start + sb->inode_table_blocks);
	ck_assert_uint_eq(sb->csum_table_blocks, (sb->data_len + 125) / 126);
	ck_assert_uint_le(sb->csum_table_start + sb->csum_table_blocks,
	                  sb->meta_start + sb->meta_len);
	/* direct reads check the checksums in the mapping first (test_direct_checked) */
	ck_assert(fs->direct_reads);
}
END_TEST

/*
 * The hash mfs_csum_sector computes (XXH3 with the secret made once per
 * mount, AVX-512, AVX2 or neither) equals XXH3_64bits_withSeed's, the
 * format's definition, on random sectors at every alignment mod 64; and a
 * write without the vector paths stores what check_table computes.
 */
START_TEST(test_hash_values)
{
	bool avx2 = mfs_csum_avx2, avx512 = mfs_csum_avx512;
	uint8_t *buf = malloc(64 * 512 + 64), *ref = malloc(NBLK * BS);
	uint64_t ino;

	srand(17);
	for (unsigned i = 0; i < 64 * 512 + 64; i++)
		buf[i] = (uint8_t)rand();
	for (int pass = 0; pass < 3; pass++) {
		mfs_csum_avx512 = pass == 0 && avx512;
		mfs_csum_avx2 = pass <= 1 && avx2;
		for (unsigned k = 0; k < 64; k++) {
			const uint8_t *p = buf + k * 512 + k; /* misaligned by k */
			uint32_t want = (uint32_t)XXH3_64bits_withSeed(p, 512, fs->sb.csum_seed);

			ck_assert_msg(mfs_csum_sector(fs, p) == want,
			              "sector %u, avx512 %d avx2 %d", k, mfs_csum_avx512,
			              mfs_csum_avx2);
		}
		memset(buf, 0, 512);
		ck_assert_uint_eq(mfs_csum_sector(fs, buf),
		                  (uint32_t)XXH3_64bits_withSeed(buf, 512, fs->sb.csum_seed));
	}
	ino = make_file("h", ref); /* without AVX-512 or AVX2 (pass 2) */
	check_table(ino, NBLK);
	mfs_csum_avx2 = avx2;
	mfs_csum_avx512 = avx512;
	free(buf);
	free(ref);
}
END_TEST

/*
 * mfs_csum_zeroed over a range crossing two table blocks, starting and
 * ending inside a block: the zero sector's checksum exactly there, every
 * other entry as it was.
 */
START_TEST(test_zeroed_run)
{
	static const uint8_t zero[512];
	uint64_t b0 = fs->sb.data_start + 120, b1 = fs->sb.data_start + 262;
	uint64_t s0 = (b0 + 1) * 8 + 3, s1 = (b1 - 2) * 8 + 5;
	uint32_t z = (uint32_t)XXH3_64bits_withSeed(zero, 512, fs->sb.csum_seed);
	uint32_t(*was)[8] = malloc((b1 - b0) * sizeof(*was));

	for (uint64_t b = b0; b < b1; b++) {
		table_entry(b, was[b - b0]);
		for (unsigned i = 0; i < 8; i++)
			if (was[b - b0][i] == z)
				was[b - b0][i] = ~z; /* so that a change shows */
	}
	for (uint64_t b = b0; b < b1; b++) { /* ~z everywhere a checksum was z */
		uint64_t e = b - fs->sb.data_start;
		struct mfs_buf *bp;
		struct mfs_txn *txn;

		ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
		ck_assert_int_eq(
		        mfs_meta_read(fs, fs->sb.csum_table_start + e / MFS_CSUM_BLOCKS_PER_TBLOCK,
		                      MFS_T_DATA_CSUM, &bp),
		        0);
		memcpy(bp->data + 48 + (e % MFS_CSUM_BLOCKS_PER_TBLOCK) * 32, was[b - b0], 32);
		mfs_txn_dirty(txn, bp);
		mfs_buf_put(bp);
		ck_assert_int_eq(mfs_txn_end(txn), 0);
	}
	ck_assert_int_eq(mfs_csum_zeroed(fs, s0, s1 - s0), 0);
	for (uint64_t b = b0; b < b1; b++) {
		uint32_t v[8];

		table_entry(b, v);
		for (unsigned i = 0; i < 8; i++) {
			uint64_t sec = b * 8 + i;

			ck_assert_msg(v[i] == (sec >= s0 && sec < s1 ? z : was[b - b0][i]),
			              "block %llu sector %u: %#x", (unsigned long long)b, i, v[i]);
		}
	}
	free(was);
}
END_TEST

START_TEST(test_table_writes)
{
	uint8_t *ref = malloc(NBLK * BS), *buf = malloc(NBLK * BS);
	uint64_t ino = make_file("a", ref);

	check_table(ino, NBLK);
	/* overwrites: whole blocks, a partial block, a partial sector */
	fill(buf, NBLK * BS, 9);
	write_all(ino, buf, 2 * BS, 3 * BS);
	write_all(ino, buf, 1000, 5 * BS + 300);
	write_all(ino, buf, 7, 9 * BS + 4000);
	memcpy(ref + 3 * BS, buf, 2 * BS);
	memcpy(ref + 5 * BS + 300, buf, 1000);
	memcpy(ref + 9 * BS + 4000, buf, 7);
	check_table(ino, NBLK);
	check_read(ino, ref, NBLK * BS, 0);
	/* zeroing in place: a shrinking then growing truncate, ZERO_RANGE, a punch's edges */
	ck_assert_int_eq(truncate_to(ino, 15 * BS + 100), 0);
	ck_assert_int_eq(truncate_to(ino, NBLK * BS), 0);
	memset(ref + 15 * BS + 100, 0, BS - 100);
	ck_assert_int_eq(
	        mfs_fallocate(fs, ino, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, BS + 10, 2 * BS),
	        0);
	memset(ref + BS + 10, 0, 2 * BS);
	check_read(ino, ref, NBLK * BS, 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	fixture_remount();
	check_read(ino, ref, NBLK * BS, 0);
	free(ref);
	free(buf);
}
END_TEST

START_TEST(test_mismatch)
{
	uint8_t *ref = malloc(NBLK * BS), *buf = malloc(NBLK * BS);
	uint64_t ino = make_file("b", ref);
	struct mfs_frange r[8];
	unsigned nr;
	bool trunc, last;
	uint64_t next;

	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	corrupt(ino, 5, 3); /* bytes [22016, 22528) */
	/* a plain read fails over the sector, and only there */
	ck_assert_int_eq(mfs_read(fs, ino, buf, NBLK * BS, 0), -EIO);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 512, 22016), -EIO);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 1, 22527), -EIO);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 22016, 0), 22016);
	ck_assert(!memcmp(buf, ref, 22016));
	ck_assert_int_eq(mfs_read(fs, ino, buf, 4096, 22528), 4096);
	ck_assert(!memcmp(buf, ref + 22528, 4096));
	/* a recovery read zero-fills exactly it */
	ck_assert_int_eq(mfs_recovery_read(fs, ino, buf, NBLK * BS, 0, r, 8, &nr, &trunc),
	                 (ssize_t)(NBLK * BS));
	ck_assert_uint_eq(nr, 1);
	ck_assert(!trunc);
	ck_assert_uint_eq(r[0].offset, 22016);
	ck_assert_uint_eq(r[0].length, 512);
	memset(ref + 22016, 0, 512);
	ck_assert(!memcmp(buf, ref, NBLK * BS));
	fill(ref, NBLK * BS, 7);
	/* badranges lists it */
	ck_assert_int_eq(mfs_badranges(fs, ino, 0, r, 8, &nr, &next, &last), 0);
	ck_assert(last);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(r[0].offset, 22016);
	ck_assert_uint_eq(r[0].length, 512);
	/* a partial write into it: EIO, nothing written; then a whole-sector one clears it */
	ck_assert_int_eq(mfs_write(fs, ino, buf, 100, 22100), -EIO);
	ck_assert_int_eq(mfs_read(fs, ino, buf, 512, 22016), -EIO);
	write_all(ino, ref + 22016, 512, 22016);
	check_read(ino, ref, NBLK * BS, 0);
	ck_assert_int_eq(mfs_badranges(fs, ino, 0, r, 8, &nr, &next, &last), 0);
	ck_assert_uint_eq(nr, 0);
	check_table(ino, NBLK);
	/* two sectors in one block and the last sector: zero-init clears them */
	corrupt(ino, 1, 0);
	corrupt(ino, 1, 7);
	corrupt(ino, 15, 7);
	ck_assert_int_eq(mfs_badranges(fs, ino, 0, r, 8, &nr, &next, &last), 0);
	ck_assert_uint_eq(nr, 3);
	ck_assert_uint_eq(r[0].offset, 4096);
	ck_assert_uint_eq(r[1].offset, 7680);
	ck_assert_uint_eq(r[2].offset, 65024);
	ck_assert_int_eq(mfs_zeroinit(fs, ino, 4096, 512), 0);
	ck_assert_int_eq(mfs_zeroinit(fs, ino, 7680, 512), 0);
	ck_assert_int_eq(mfs_zeroinit(fs, ino, 65024, 512), 0);
	memset(ref + 4096, 0, 512);
	memset(ref + 7680, 0, 512);
	memset(ref + 65024, 0, 512);
	check_read(ino, ref, NBLK * BS, 0);
	check_table(ino, NBLK);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	fixture_remount();
	check_read(ino, ref, NBLK * BS, 0);
	free(ref);
	free(buf);
}
END_TEST

struct direct_seen {
	const void *base;
	size_t len;
	int cnt;
	uint8_t buf[NBLK * BS];
};

static int direct_gather(void *arg, const struct iovec *iov, int cnt)
{
	struct direct_seen *d = arg;

	d->cnt = cnt;
	d->len = 0;
	d->base = cnt ? iov[0].iov_base : NULL;
	for (int i = 0; i < cnt; i++) {
		memcpy(d->buf + d->len, iov[i].iov_base, iov[i].iov_len);
		d->len += iov[i].iov_len;
	}
	return 0;
}

static unsigned events_now(void)
{
	struct mfs_event ev[16];
	struct mfs_events_pos pos;
	int n = mfs_events_read(fs, 0, ev, 16, 0, &pos);

	ck_assert_int_ge(n, 0);
	return (unsigned)n;
}

/*
 * Zero-copy reads with data_csum: a clean range is handed out as addresses
 * in the mapping (no copy), checked; a range with a corrupted sector in one
 * of its blocks is refused (-EOPNOTSUPP) without an event, and the copying
 * read then fails over it and posts the event; blocks around it still go
 * zero-copy; an overwrite makes it zero-copy again.
 */
START_TEST(test_direct_checked)
{
	uint8_t *ref = malloc(NBLK * BS), *buf = malloc(NBLK * BS);
	struct direct_seen *d = calloc(1, sizeof(*d));
	uint64_t ino = make_file("d", ref), pblk;
	unsigned ev0;
	void *addr;

	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	bmap(ino, 0, &pblk, NULL, NULL);
	ck_assert_int_eq(blk_direct_access(fs->dev, pblk * BS, BS, &addr, NULL), 0);
	ck_assert_int_eq(mfs_read_direct(fs, ino, 3 * BS, 100, direct_gather, d), 0);
	ck_assert_int_eq(d->cnt, 1);
	ck_assert_ptr_eq(d->base, (uint8_t *)addr + 100);
	ck_assert_uint_eq(d->len, 3 * BS);
	ck_assert(!memcmp(d->buf, ref + 100, 3 * BS));

	ev0 = events_now();
	corrupt(ino, 5, 3);
	/* the block is refused whole, even where the range misses the bad sector */
	ck_assert_int_eq(mfs_read_direct(fs, ino, 2 * BS, 4 * BS, direct_gather, d), -EOPNOTSUPP);
	ck_assert_int_eq(mfs_read_direct(fs, ino, 1, 5 * BS, direct_gather, d), -EOPNOTSUPP);
	ck_assert_uint_eq(events_now(), ev0);
	/* the copying read decides: the sector fails, its neighbours read */
	ck_assert_int_eq(mfs_read(fs, ino, buf, 1, 5 * BS), 1);
	ck_assert_uint_eq(buf[0], ref[5 * BS]);
	ck_assert_int_eq(mfs_read(fs, ino, buf, BS, 5 * BS), -EIO);
	ck_assert_uint_eq(events_now(), ev0 + 1);
	/* blocks 4 and 6..7 are clean: still zero-copy */
	ck_assert_int_eq(mfs_read_direct(fs, ino, BS, 4 * BS, direct_gather, d), 0);
	ck_assert(!memcmp(d->buf, ref + 4 * BS, BS));
	ck_assert_int_eq(mfs_read_direct(fs, ino, 2 * BS, 6 * BS, direct_gather, d), 0);
	ck_assert_ptr_eq(d->base, (uint8_t *)addr + 6 * BS);
	ck_assert(!memcmp(d->buf, ref + 6 * BS, 2 * BS));
	/* an overwrite of the block clears the damage: zero-copy again */
	write_all(ino, ref + 5 * BS, BS, 5 * BS);
	ck_assert_int_eq(mfs_read_direct(fs, ino, NBLK * BS, 0, direct_gather, d), 0);
	ck_assert_uint_eq(d->len, NBLK * BS);
	ck_assert(!memcmp(d->buf, ref, NBLK * BS));
	free(d);
	free(ref);
	free(buf);
}
END_TEST

/*
 * Partial-block writes check only the sectors they do not cover whole
 * (mfs_csum_edge_write) and store the checksums of the sectors they touch
 * only: a damaged sector the write covers whole is cleared, one it does not
 * touch stays damaged, and the table matches everywhere else.
 */
START_TEST(test_edge_sectors)
{
	uint8_t *ref = malloc(NBLK * BS), *buf = malloc(NBLK * BS);
	uint64_t ino = make_file("e", ref), next;
	struct mfs_frange r[8];
	unsigned nr;
	bool last;

	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	fill(buf, BS, 3);
	/* block 2, sector 1 damaged: [400, 1100) covers it whole, sectors 0 and 2 in part */
	corrupt(ino, 2, 1);
	write_all(ino, buf, 700, 2 * BS + 400);
	memcpy(ref + 2 * BS + 400, buf, 700);
	check_read(ino, ref, NBLK * BS, 0);
	check_table(ino, NBLK);
	/* block 4, sector 6 damaged: a write into sectors 1 and 2 leaves it damaged */
	corrupt(ino, 4, 6);
	write_all(ino, buf, 600, 4 * BS + 600);
	memcpy(ref + 4 * BS + 600, buf, 600);
	ck_assert_int_eq(mfs_badranges(fs, ino, 0, r, 8, &nr, &next, &last), 0);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(r[0].offset, 4 * BS + 6 * 512);
	ck_assert_uint_eq(r[0].length, 512);
	ck_assert_int_eq(mfs_read(fs, ino, buf + BS, 3072, 4 * BS), 3072);
	ck_assert(!memcmp(buf + BS, ref + 4 * BS, 3072));
	ck_assert_int_eq(mfs_read(fs, ino, buf + BS, 512, 4 * BS + 3072), -EIO);
	/* the same in the last block of a two-block write, then the sector written whole */
	write_all(ino, buf, BS + 100, 3 * BS);
	memcpy(ref + 3 * BS, buf, BS + 100);
	ck_assert_int_eq(mfs_read(fs, ino, buf + BS, 512, 4 * BS + 3072), -EIO);
	write_all(ino, ref + 4 * BS + 3072, 512, 4 * BS + 3072);
	check_read(ino, ref, NBLK * BS, 0);
	check_table(ino, NBLK);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	fixture_remount();
	check_read(ino, ref, NBLK * BS, 0);
	free(ref);
	free(buf);
}
END_TEST

/*
 * Badranges on data_csum reads a run of blocks in one bio (recovery) and
 * checks it with one table lookup: poisoned sectors and sectors failing their
 * checksum, in several blocks of one run and in one block, all listed once.
 */
START_TEST(test_badranges_run)
{
	uint8_t *ref = malloc(NBLK * BS);
	uint64_t ino = make_file("p", ref), pblk, next;
	struct mfs_frange r[8];
	unsigned nr;
	bool last;

	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	corrupt(ino, 3, 2);
	corrupt(ino, 9, 0);
	bmap(ino, 9, &pblk, NULL, NULL);
	ck_assert_int_eq(blk_poison_add(fs->dev, pblk * 8 + 5, 1), 0);
	bmap(ino, 12, &pblk, NULL, NULL);
	ck_assert_int_eq(blk_poison_add(fs->dev, pblk * 8 + 7, 1), 0);
	ck_assert_int_eq(mfs_badranges(fs, ino, 0, r, 8, &nr, &next, &last), 0);
	ck_assert(last);
	ck_assert_uint_eq(nr, 4);
	ck_assert_uint_eq(r[0].offset, 3 * BS + 2 * 512);
	ck_assert_uint_eq(r[1].offset, 9 * BS);
	ck_assert_uint_eq(r[2].offset, 9 * BS + 5 * 512);
	ck_assert_uint_eq(r[3].offset, 12 * BS + 7 * 512);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(r[i].length, 512);
	/* from an offset inside the run, and with room for one only */
	ck_assert_int_eq(mfs_badranges(fs, ino, 9 * BS + 1024, r, 1, &nr, &next, &last), 0);
	ck_assert(!last);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(r[0].offset, 9 * BS + 5 * 512);
	ck_assert_uint_eq(next, 12 * BS + 7 * 512);
	free(ref);
}
END_TEST

START_TEST(test_off)
{
	uint8_t *ref = malloc(NBLK * BS);
	uint64_t ino = make_file("c", ref);

	ck_assert(!fs->data_csum);
	ck_assert(!(fs->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM));
	ck_assert_uint_eq(fs->sb.csum_table_start, 0);
	ck_assert_uint_eq(fs->sb.csum_table_blocks, 0);
	/* nothing checks: a changed sector reads as it is */
	corrupt(ino, 5, 3);
	ref[22016 + 100] ^= 0xff;
	check_read(ino, ref, NBLK * BS, 0);
	free(ref);
}
END_TEST

/*
 * The metadata checksums' inlined hash (mfs_csum_hash4k, AVX-512, AVX2 or
 * neither) equals XXH3_64bits_withSeed's (seed 0 included, at every
 * alignment mod 64), and mfs_csum_meta_seal / _verify agree with super.c's
 * mfs_block_seal / mfs_block_verify, on good blocks and on corrupt ones.
 */
START_TEST(test_meta_hash)
{
	bool avx2 = mfs_csum_avx2, avx512 = mfs_csum_avx512;
	uint8_t *buf = malloc(2 * BS + 64), *blk;
	const uint64_t seeds[] = {0, 1, fs->sb.csum_seed, ~0ull};

	srand(4096);
	for (unsigned i = 0; i < 2 * BS + 64; i++)
		buf[i] = (uint8_t)rand();
	for (int pass = 0; pass < 3; pass++) {
		mfs_csum_avx512 = pass == 0 && avx512;
		mfs_csum_avx2 = pass <= 1 && avx2;
		for (unsigned k = 0; k < 64; k += 7)
			for (unsigned j = 0; j < sizeof(seeds) / sizeof(seeds[0]); j++)
				ck_assert_msg(mfs_csum_hash4k(buf + k, seeds[j]) ==
				                      XXH3_64bits_withSeed(buf + k, BS, seeds[j]),
				              "offset %u seed %u avx512 %d avx2 %d", k, j,
				              mfs_csum_avx512, mfs_csum_avx2);
		blk = buf + 64 * pass;
		{
			struct mfs_meta_hdr *hdr = (struct mfs_meta_hdr *)blk;
			uint64_t want;

			hdr->magic = MFS_META_MAGIC;
			hdr->type = MFS_T_DATA_CSUM;
			hdr->blocknr = 1234;
			mfs_block_seal(blk, fs->seed);
			want = hdr->csum;
			hdr->csum ^= 1;
			mfs_csum_meta_seal(blk, fs->seed);
			ck_assert_uint_eq(hdr->csum, want);
			ck_assert_int_eq(mfs_csum_meta_verify(blk, fs->seed, MFS_T_DATA_CSUM, 1234),
			                 0);
			ck_assert_int_eq(mfs_csum_meta_verify(blk, fs->seed, 0, 1234), 0);
			ck_assert_int_eq(
			        mfs_csum_meta_verify(blk, fs->seed, MFS_T_BTREE_LEAF, 1234),
			        -EUCLEAN);
			ck_assert_int_eq(mfs_csum_meta_verify(blk, fs->seed, MFS_T_DATA_CSUM, 1235),
			                 -EUCLEAN);
			ck_assert_int_eq(
			        mfs_csum_meta_verify(blk, fs->seed + 1, MFS_T_DATA_CSUM, 1234),
			        -EUCLEAN);
			blk[BS - 1] ^= 0x10; /* a flipped bit anywhere */
			ck_assert_int_eq(mfs_csum_meta_verify(blk, fs->seed, MFS_T_DATA_CSUM, 1234),
			                 -EUCLEAN);
			ck_assert_int_eq(mfs_block_verify(blk, fs->seed, MFS_T_DATA_CSUM, 1234),
			                 -EUCLEAN);
			blk[BS - 1] ^= 0x10;
			ck_assert_int_eq(mfs_block_verify(blk, fs->seed, MFS_T_DATA_CSUM, 1234), 0);
			hdr->magic ^= 1;
			ck_assert_int_eq(mfs_csum_meta_verify(blk, fs->seed, MFS_T_DATA_CSUM, 1234),
			                 -EUCLEAN);
		}
	}
	mfs_csum_avx2 = avx2;
	mfs_csum_avx512 = avx512;
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("csum");
	TCase *tc = tcase_create("csum"), *off = tcase_create("off");

	tcase_add_checked_fixture(tc, setup, fixture_teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_layout);
	tcase_add_test(tc, test_hash_values);
	tcase_add_test(tc, test_zeroed_run);
	tcase_add_test(tc, test_table_writes);
	tcase_add_test(tc, test_mismatch);
	tcase_add_test(tc, test_direct_checked);
	tcase_add_test(tc, test_edge_sectors);
	tcase_add_test(tc, test_badranges_run);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(off, setup_off, fixture_teardown);
	tcase_add_test(off, test_off);
	tcase_add_test(off, test_meta_hash);
	suite_add_tcase(s, off);
	return check_run(s);
}
