/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the bounded, restartable frees of fs/core/file.c and fs/core/inode.c
 * (docs/design/core.md §3 "Bounded transactions"), on a real mkfs.mendfs image
 * ($MKFS_MENDFS, 52 GiB sparse) with a 1 MiB journal (-J 1M: 256 blocks).
 *
 * The file: 300 "far" one-block extents 33000 blocks apart (each in its own
 * data bitmap block: freeing them dirties 300 bitmap blocks, more than the
 * whole journal) followed by 20000 "dense" one-block extents at every other
 * block (an extent B+tree of at least 200 leaves under one interior node);
 * every 16th extent holds written data, the others are unwritten
 * (fallocate).  It is truncated to 0 and to the middle, punched, unlinked
 * while open and at the unlink itself, and replaced by a rename; a truncate
 * and a last close are cut short by a simulated crash and finished by the
 * next mount.  Each operation must succeed, the file must read back exactly
 * (data, unwritten blocks, holes), its block and extent counts must be what
 * is left, the orphan list must be empty afterwards, statfs must give the
 * blocks back once the frees are durable, and a remount must show the same.
 * The old code (one transaction per truncate, per free, per 256 punched
 * extents) failed each of the five tests before the crash one: the journal
 * refused the transaction (-ENOSPC) while the cached inode already held the
 * new state.
 *
 * TRUNC_EXTENTS=N sets the dense extent count (the image grows with it);
 * TRUNC_BENCH=1 runs only the timing test, which prints how long the
 * truncate to 0 took.
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
#include <time.h>
#include <unistd.h>

#include "fixture.h"

#define BS          MFS_BLOCK_SIZE
#define DATA_EVERY  16u    /* every 16th extent holds written data, the others are unwritten */
#define JOURNAL_BLK 256u   /* -J 1M */
#define NFAR        300u   /* far extents, one per data bitmap block */
#define FAR_STRIDE  33000u /* > MFS_BITMAP_BITS (32384) blocks apart */

static char bbfile[sizeof(img) + 16]; /* the image's emulated poison */
static unsigned ndense = 20000, next; /* next = NFAR + ndense extents */

/* File block of extent @i. */
static uint64_t ext_lblk(unsigned i)
{
	if (i < NFAR)
		return (uint64_t)i * FAR_STRIDE;
	return (uint64_t)NFAR * FAR_STRIDE + 2ull * (i - NFAR);
}

static void mkfs_image(uint64_t bytes)
{
	char size[32];

	snprintf(size, sizeof(size), "%llu", (unsigned long long)bytes);
	fixture_mkfs("-N 1000 -J 1M", size);
}

static void mount_fs(void)
{
	fixture_mount(NULL);
	ck_assert_uint_eq(fs->sb.journal_len, JOURNAL_BLK);
}

static void remount(void)
{
	fixture_umount();
	mount_fs();
}

static void setup(void)
{
	const char *env = getenv("TRUNC_EXTENTS");
	uint64_t blocks;

	if (env && *env)
		ndense = (unsigned)strtoul(env, NULL, 0);
	next = NFAR + ndense;
	/* the file spans ext_lblk(next) blocks physically; the data zone gets 1/8 more */
	blocks = ext_lblk(next) + ext_lblk(next) / 8 + (1u << 16);
	fixture_dir("/tmp", "trunc");
	snprintf(bbfile, sizeof(bbfile), "%s.badblocks", img);
	mkfs_image(blocks * 17 / 16 * BS); /* the meta zone takes 1/16 */
	mount_fs();
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((seed * 131 + i * 7 + (i >> 9)) ^ (i >> 13) ^ 0x5a);
}

static uint64_t free_blocks(void)
{
	struct statvfs st;

	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	return st.f_bfree;
}

/* Mapped extents of the file over [0, nblk) (every extent is one block here). */
static unsigned count_extents(uint64_t ino, uint64_t nblk)
{
	struct mfs_ino *ip;
	uint64_t lblk = 0, pblk, count;
	unsigned n = 0;
	bool unwritten;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	pthread_rwlock_rdlock(&ip->lock);
	while (lblk < nblk) {
		ck_assert_int_eq(mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten), 0);
		if (pblk)
			n++;
		lblk += count;
	}
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return n;
}

/* Where the allocator starts a file's first block (fs/core/file.c alloc_goal). */
static uint64_t first_goal(uint64_t ino)
{
	uint64_t slots = fs->sb.data_len / 256;

	return ((ino * 0x9e3779b97f4a7c15ull) >> 20) % slots * 256;
}

/* Data bitmap blocks holding the file's blocks. */
static unsigned bitmap_blocks_used(uint64_t ino)
{
	uint64_t last = UINT64_MAX, pblk, count;
	struct mfs_ino *ip;
	unsigned i, n = 0;
	bool unwritten;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	pthread_rwlock_rdlock(&ip->lock);
	for (i = 0; i < next; i++) {
		ck_assert_int_eq(mfs_bmap(fs, ip, ext_lblk(i), &pblk, &count, &unwritten), 0);
		ck_assert_uint_ne(pblk, 0);
		pblk = (pblk - fs->sb.data_start) / MFS_BITMAP_BITS;
		n += pblk != last;
		last = pblk;
	}
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return n;
}

/*
 * The fragmented file (see the top): extent i is file block ext_lblk(i),
 * written with fill(seed i) when i % DATA_EVERY == 0, else unwritten.  Its
 * inode is one whose first block goes to the start of the data zone, so that
 * the far extents fit after it 33000 blocks apart.
 */
static uint64_t make_fragmented(const char *name)
{
	uint8_t data[BS];
	char pad[32];
	uint64_t ino;
	unsigned i;

	for (i = 0;; i++) {
		ino = fixture_file(name);
		if (first_goal(ino) < fs->sb.data_len / 16)
			break;
		snprintf(pad, sizeof(pad), "pad-%s-%u", name, i);
		ck_assert_int_eq(mfs_rename(fs, MFS_ROOT_INO, name, MFS_ROOT_INO, pad, 0), 0);
	}
	for (i = 0; i < next; i++) {
		if (i % DATA_EVERY == 0) {
			fill(data, BS, i);
			ck_assert_int_eq(mfs_write(fs, ino, data, BS, (off_t)(ext_lblk(i) * BS)),
			                 BS);
		} else {
			ck_assert_int_eq(mfs_fallocate(fs, ino, 0, (off_t)(ext_lblk(i) * BS), BS),
			                 0);
		}
	}
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), next);
	ck_assert(le32toh(fixture_dinode(ino).iflags) & MFS_IFL_EXTENT_TREE);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).size), (ext_lblk(next - 1) + 1) * BS);
	/* what makes the file hard: more bitmap blocks to change than the journal holds */
	ck_assert_uint_ge(bitmap_blocks_used(ino), NFAR);
	return ino;
}

/*
 * Check the file against the pattern: extents below @nkeep hold their
 * content up to @cut (the smallest size the file had: bytes past it read
 * zeros after it grows again), the others are gone; the block after each
 * extent reads zeros.  Reading all of a 40 GiB sparse file would only test
 * memset.
 */
static void check_content_cut(uint64_t ino, uint64_t size, unsigned nkeep, uint64_t cut)
{
	uint8_t *buf = malloc(2 * BS), *want = malloc(2 * BS);
	unsigned i;

	ck_assert_uint_eq(le64toh(fixture_dinode(ino).size), size);
	for (i = 0; i < next; i++) {
		uint64_t off = ext_lblk(i) * BS;
		size_t len;
		ssize_t n;

		if (off >= size)
			break;
		len = size - off < 2 * BS ? (size_t)(size - off) : 2 * BS;
		n = mfs_read(fs, ino, buf, len, (off_t)off);
		ck_assert_int_eq(n, (ssize_t)len);
		memset(want, 0, 2 * BS);
		if (i < nkeep && i % DATA_EVERY == 0)
			fill(want, BS, i);
		if (cut < off + BS)
			memset(want + (cut > off ? cut - off : 0), 0,
			       off + BS - (cut > off ? cut : off));
		if (memcmp(buf, want, len))
			ck_abort_msg("extent %u (file block %llu) differs", i,
			             (unsigned long long)ext_lblk(i));
	}
	free(buf);
	free(want);
}

static void check_content(uint64_t ino, uint64_t size, unsigned nkeep)
{
	check_content_cut(ino, size, nkeep, UINT64_MAX);
}

static void check_no_orphans(void)
{
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
}

/* ftruncate through the namespace API (as the daemon does). */
static int set_size(uint64_t ino, uint64_t size)
{
	struct stat st = {.st_size = (off_t)size};

	return mfs_setattr(fs, ino, &st, MFS_SET_SIZE, &st);
}

/* The mapping of extent @i of the file. */
static uint64_t ext_pblk(uint64_t ino, unsigned i)
{
	struct mfs_ino *ip;
	uint64_t pblk, count;
	bool unwritten;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	pthread_rwlock_rdlock(&ip->lock);
	ck_assert_int_eq(mfs_bmap(fs, ip, ext_lblk(i), &pblk, &count, &unwritten), 0);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	ck_assert_uint_ne(pblk, 0);
	return pblk;
}

START_TEST(test_truncate_zero)
{
	uint64_t free0 = free_blocks(), ino, commits, bad, bad2;

	ino = make_fragmented("frag");
	ck_assert_uint_eq(free_blocks(), free0 - next);
	/* a far block and a dense one are poisoned: freed, they go to the quarantine */
	bad = ext_pblk(ino, 150);
	bad2 = ext_pblk(ino, NFAR + 777);
	ck_assert_int_eq(blk_poison_add(fs->dev, bad * MFS_SECTORS_PER_BLOCK + 3, 1), 0);
	ck_assert_int_eq(blk_poison_add(fs->dev, bad2 * MFS_SECTORS_PER_BLOCK, 8), 0);
	commits = atomic_load(&fs->stats.commits);
	ck_assert_int_eq(set_size(ino, 0), 0);
	/* the free took several transactions */
	ck_assert_uint_gt(atomic_load(&fs->stats.commits) - commits, 2);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).size), 0);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), 0);
	ck_assert(!(le32toh(fixture_dinode(ino).iflags) & (MFS_IFL_EXTENT_TREE | MFS_IFL_ORPHAN)));
	ck_assert_uint_eq(le16toh(fixture_dinode(ino).nr_inline), 0);
	check_no_orphans();
	ck_assert_uint_ne(fs->sb.quarantine_root, 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0 - 2);
	remount();
	ck_assert_uint_eq(free_blocks(), free0 - 2);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).size), 0);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), 0);
	check_no_orphans();
	ck_assert_uint_ne(fs->sb.quarantine_root, 0);
	/* exactly the two poisoned blocks are quarantined */
	{
		struct mfs_btree qt = {.root = fs->sb.quarantine_root,
		                       .depth = (uint16_t)fs->sb.quarantine_depth,
		                       .kind = MFS_TREE_QUARANTINE};
		uint64_t v = 0;
		uint16_t vlen = sizeof(v);

		ck_assert_int_eq(mfs_bt_lookup(fs, &qt, bad, &v, &vlen), 0);
		ck_assert_uint_eq(le64toh(v), 1);
		ck_assert_int_eq(mfs_bt_lookup(fs, &qt, bad2, &v, &vlen), 0);
		ck_assert_uint_eq(le64toh(v), 1);
	}
	/* the other blocks are usable again: the file grows back */
	ck_assert_int_eq(mfs_fallocate(fs, ino, 0, 0, (off_t)next * BS), 0);
	ck_assert_uint_eq(free_blocks(), free0 - 2 - next);
}
END_TEST

START_TEST(test_truncate_middle)
{
	uint64_t free0 = free_blocks(), ino, size;
	unsigned keep = 17; /* extents 0 .. 16 stay: 283 far ones and the dense ones go */

	ino = make_fragmented("frag");
	size = ext_lblk(keep - 1) * BS + 100; /* 100 bytes into the last kept extent */
	ck_assert_int_eq(set_size(ino, size), 0);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), keep);
	ck_assert(!(le32toh(fixture_dinode(ino).iflags) & MFS_IFL_ORPHAN));
	check_no_orphans();
	ck_assert_uint_eq(count_extents(ino, ext_lblk(next)), keep);
	check_content(ino, size, keep);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0 - keep);
	remount();
	ck_assert_uint_eq(free_blocks(), free0 - keep);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), keep);
	ck_assert_uint_eq(count_extents(ino, ext_lblk(next)), keep);
	check_content(ino, size, keep);
	check_no_orphans();
	/* growing again: the tail of the last block past the old size reads zeros */
	ck_assert_int_eq(set_size(ino, size + 3 * BS), 0);
	check_content_cut(ino, size + 3 * BS, keep, size);
	/* and a truncate inside the dense part of a fresh file */
	ino = make_fragmented("frag2");
	keep = NFAR + ndense / 2;
	size = ext_lblk(keep - 1) * BS + BS;
	ck_assert_int_eq(set_size(ino, size), 0);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), keep);
	ck_assert_uint_eq(count_extents(ino, ext_lblk(next)), keep);
	check_content(ino, size, keep);
	remount();
	check_content(ino, size, keep);
	check_no_orphans();
}
END_TEST

START_TEST(test_punch_huge)
{
	uint64_t free0 = free_blocks(), ino, size, lo, hi;
	unsigned i, punched = next - 21; /* extents 11 .. next - 11 */
	uint8_t *buf = malloc(BS), *want = malloc(BS);

	ino = make_fragmented("frag");
	size = (ext_lblk(next - 1) + 1) * BS;
	/* punch [extent 10 + 1000 bytes, extent next - 10): whole blocks go, the edge is zeroed */
	lo = ext_lblk(10) * BS + 1000;
	hi = ext_lblk(next - 10) * BS;
	ck_assert_int_eq(mfs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                               (off_t)lo, (off_t)(hi - lo)),
	                 0);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).size), size);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), next - punched);
	ck_assert_uint_eq(count_extents(ino, ext_lblk(next)), next - punched);
	check_no_orphans();
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0 - (next - punched));
	remount();
	ck_assert_uint_eq(free_blocks(), free0 - (next - punched));
	ck_assert_uint_eq(count_extents(ino, ext_lblk(next)), next - punched);
	/* extent 10 keeps its first 1000 bytes; extents 11 .. next - 11 read zeros */
	for (i = 0; i < next; i++) {
		ck_assert_int_eq(mfs_read(fs, ino, buf, BS, (off_t)(ext_lblk(i) * BS)), BS);
		if (i % DATA_EVERY == 0)
			fill(want, BS, i);
		else
			memset(want, 0, BS);
		if (i == 10)
			memset(want + 1000, 0, BS - 1000);
		else if (i > 10 && i < next - 10)
			memset(want, 0, BS);
		if (memcmp(buf, want, BS))
			ck_abort_msg("extent %u differs", i);
	}
	free(buf);
	free(want);
}
END_TEST

START_TEST(test_unlink_open)
{
	uint64_t free0 = free_blocks(), ino;
	struct mfs_ino *ip;

	ino = make_fragmented("frag");
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0); /* an open file */
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "frag"), 0);
	ck_assert(le32toh(ip->di.iflags) & MFS_IFL_ORPHAN);
	ck_assert_int_eq(mfs_orphan_count(fs), 1);
	ck_assert_uint_eq(free_blocks(), free0 - next);
	/* still readable while open */
	ck_assert_int_eq(mfs_read(fs, ino, (uint8_t[16]){0}, 16, 0), 16);
	mfs_iput(fs, ip); /* the last close frees it, in steps */
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), -ENOENT);
	check_no_orphans();
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0);
	remount();
	ck_assert_uint_eq(free_blocks(), free0);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), -ENOENT);
	check_no_orphans();
}
END_TEST

START_TEST(test_unlink_and_rename_over)
{
	uint64_t free0 = free_blocks(), ino, ino2;
	struct mfs_ino *ip;
	struct stat st;

	/* unlinked with no other reference: freed at the unlink's own last reference */
	ino = make_fragmented("frag");
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "frag"), 0);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), -ENOENT);
	check_no_orphans();
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0);

	/* replaced by a rename */
	ino = make_fragmented("frag2");
	ino2 = fixture_file("small");
	ck_assert_int_eq(mfs_write(fs, ino2, "hello", 5, 0), 5);
	ck_assert_int_eq(mfs_rename(fs, MFS_ROOT_INO, "small", MFS_ROOT_INO, "frag2", 0), 0);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), -ENOENT);
	check_no_orphans();
	ck_assert_int_eq(mfs_lookup(fs, MFS_ROOT_INO, "frag2", &st), 0);
	ck_assert_uint_eq(st.st_ino, ino2);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0 - 1);
	remount();
	ck_assert_uint_eq(free_blocks(), free0 - 1);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), -ENOENT);
	check_no_orphans();
}
END_TEST

/*
 * One write over the whole dense part: every hole gets a block, every
 * unwritten extent is converted: thousands of map changes, in handles
 * bounded by the step limit.
 */
START_TEST(test_write_over)
{
	uint64_t free0 = free_blocks(), ino, lo = ext_lblk(NFAR), hi = ext_lblk(next - 1) + 1;
	size_t len = (size_t)(hi - lo) * BS;
	uint8_t *data = malloc(len), *buf = malloc(len);

	ino = make_fragmented("frag");
	fill(data, len, 4242);
	ck_assert_int_eq(mfs_write(fs, ino, data, len, (off_t)(lo * BS)), (ssize_t)len);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), NFAR + (hi - lo));
	ck_assert_uint_eq(free_blocks(), free0 - NFAR - (hi - lo));
	remount();
	ck_assert_int_eq(mfs_read(fs, ino, buf, len, (off_t)(lo * BS)), (ssize_t)len);
	ck_assert(!memcmp(buf, data, len));
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), NFAR + (hi - lo));
	/* and freed again */
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "frag"), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(free_blocks(), free0);
	free(data);
	free(buf);
}
END_TEST

/* A writer making its own file fragmented while the big free runs. */
struct wr {
	uint64_t ino;
	unsigned id, n;
	int err;
};

static void *writer(void *arg)
{
	struct wr *w = arg;
	uint8_t data[BS];

	for (unsigned j = 0; j < w->n && !w->err; j++) {
		ssize_t r;

		fill(data, BS, w->id * 100000 + j);
		r = mfs_write(fs, w->ino, data, BS, (off_t)j * 2 * BS);
		if (r != BS)
			w->err = r < 0 ? (int)r : -EIO;
	}
	return NULL;
}

/*
 * The steps share their transactions with whatever else runs: writers
 * making fragmented files of their own while the big file is truncated to 0
 * and another is unlinked.  Nothing may be refused (the journal would
 * abort), and everything must be there after a remount.
 */
START_TEST(test_concurrent)
{
	uint64_t free0 = free_blocks(), ino, ino2;
	struct wr w[3];
	pthread_t th[3];
	uint8_t want[BS], buf[BS];
	unsigned i, j;
	char name[16];

	ino = make_fragmented("frag");
	ino2 = make_fragmented("frag2");
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "w%u", i);
		w[i] = (struct wr){.ino = fixture_file(name), .id = i + 1, .n = 3000};
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer, &w[i]), 0);
	}
	ck_assert_int_eq(set_size(ino, 0), 0);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "frag2"), 0);
	for (i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].err, 0);
	}
	ck_assert_int_eq(mfs_sync(fs), 0); /* the journal is not aborted */
	check_no_orphans();
	ck_assert_uint_eq(free_blocks(), free0 - 3 * 3000);
	remount();
	ck_assert_uint_eq(free_blocks(), free0 - 3 * 3000);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), 0);
	for (i = 0; i < 3; i++) {
		ck_assert_uint_eq(le64toh(fixture_dinode(w[i].ino).blocks), 3000);
		for (j = 0; j < 3000; j += 37) {
			fill(want, BS, w[i].id * 100000 + j);
			ck_assert_int_eq(mfs_read(fs, w[i].ino, buf, BS, (off_t)j * 2 * BS), BS);
			ck_assert(!memcmp(buf, want, BS));
		}
	}
	(void)ino2;
}
END_TEST

/*
 * Restart points: a truncate and a last close cut short by a crash (the
 * journal is made to fail the commit after a few steps: the device keeps
 * exactly the committed steps) are finished by the next mount's orphan
 * processing.
 */
START_TEST(test_orphan_restart)
{
	uint64_t free0 = free_blocks(), ino, ino2, size;
	unsigned keep = 5;
	struct mfs_ino *ip;
	char err[256];

	ino = make_fragmented("frag");
	ino2 = make_fragmented("frag2");
	ck_assert_int_eq(mfs_sync(fs), 0);
	/* small steps, and only the first few are committed */
	fs->txn_step_blocks = 16;
	fs->commit_fail_after = 6;
	size = ext_lblk(keep - 1) * BS + 1;
	ck_assert_int_eq(set_size(ino, size), -EIO);
	mfs_crash(fs);
	fs = NULL;
	ck_assert_int_eq(mfs_mount(img, NULL, &fs, err, sizeof(err)), 0);
	/* the first step (size and orphan entry) was committed: the mount finished the work */
	ck_assert_uint_eq(atomic_load(&fs->stats.orphans_truncated), 1);
	check_no_orphans();
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), keep);
	ck_assert_uint_eq(count_extents(ino, ext_lblk(next)), keep);
	check_content(ino, size, keep);
	ck_assert_uint_eq(free_blocks(), free0 - keep - next);

	/* the last close of an unlinked file, cut short */
	ck_assert_int_eq(mfs_iget(fs, ino2, &ip), 0);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "frag2"), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	fs->txn_step_blocks = 16;
	fs->commit_fail_after = 5;
	mfs_iput(fs, ip);
	mfs_crash(fs);
	fs = NULL;
	ck_assert_int_eq(mfs_mount(img, NULL, &fs, err, sizeof(err)), 0);
	ck_assert_uint_eq(atomic_load(&fs->stats.orphans_freed), 1);
	check_no_orphans();
	ck_assert_int_eq(mfs_iget(fs, ino2, &ip), -ENOENT);
	ck_assert_uint_eq(free_blocks(), free0 - keep);
	remount();
	ck_assert_uint_eq(free_blocks(), free0 - keep);
	check_content(ino, size, keep);
}
END_TEST

/* Timing (TRUNC_BENCH=1): creating and truncating to 0 a file of next extents. */
START_TEST(test_bench)
{
	struct timespec t0, t1, t2;
	uint64_t ino, c0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ino = make_fragmented("frag");
	ck_assert_int_eq(mfs_sync(fs), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	c0 = atomic_load(&fs->stats.commits);
	ck_assert_int_eq(set_size(ino, 0), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	printf("truncate bench: %u extents made in %.2fs; truncated to 0 in %.2fs, %llu "
	       "commits\n",
	       next, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) / 1e9,
	       (unsigned long long)(atomic_load(&fs->stats.commits) - c0));
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).blocks), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("truncate");
	TCase *tc = tcase_create("truncate");
	const char *bench = getenv("TRUNC_BENCH");
	tcase_add_checked_fixture(tc, setup, fixture_teardown);
	tcase_set_timeout(tc, 600);
	if (bench && *bench == '1') {
		tcase_add_test(tc, test_bench);
	} else {
		tcase_add_test(tc, test_truncate_zero);
		tcase_add_test(tc, test_truncate_middle);
		tcase_add_test(tc, test_punch_huge);
		tcase_add_test(tc, test_unlink_open);
		tcase_add_test(tc, test_unlink_and_rename_over);
		tcase_add_test(tc, test_write_over);
		tcase_add_test(tc, test_concurrent);
		tcase_add_test(tc, test_orphan_restart);
	}
	suite_add_tcase(s, tc);
	return check_run(s);
}
