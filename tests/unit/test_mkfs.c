/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of mkfs.mendfs: the built program is run (path in $MKFS_MENDFS,
 * set by tests/unit/meson.build, else found beside the test binary) on image
 * files and a loop device, and what it wrote is read back through the engine
 * and the library: superblocks accepted by mfs_super_read(), layout rules,
 * root inode, bitmaps, twins.  Refusals (existing mendfs, poison under fixed
 * areas, too small, bad arguments) exit 1 with a message; -f overrides, -q is
 * silent, -N is respected.  What libblkid finds (other filesystems, partition
 * tables) is tests/integration/mkfs-clobber.sh.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cannot_run.h"
#include "mfs_int.h"
#include "mkfs_run.h"
#include "check_run.h"

static char mkfs_path[PATH_MAX];
static char dir[64];
static char img[128], out_path[160], err_path[160];
static char out[8192], err[8192];

static void find_mkfs(void)
{
	tool_path(mkfs_path, sizeof(mkfs_path), "MKFS_MENDFS", "mkfs/mkfs.mendfs");
}

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = 0;
	if (!f)
		return;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
}

/* Run mkfs.mendfs with @args (shell words); returns its exit status, output in out/err. */
static int run(const char *args)
{
	char cmd[PATH_MAX + 1024];
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' %s >'%s' 2>'%s'", mkfs_path, args, out_path, err_path);
	st = system(cmd);
	ck_assert_int_ne(st, -1);
	slurp(out_path, out, sizeof(out));
	slurp(err_path, err, sizeof(err));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void setup(void)
{
	find_mkfs();
	ck_assert_msg(access(mkfs_path, X_OK) == 0, "no mkfs.mendfs at %s", mkfs_path);
	snprintf(dir, sizeof(dir), "/tmp/mendfs-mkfs-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	snprintf(err_path, sizeof(err_path), "%s/err", dir);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void write_at(const char *path, off_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void make_file(const char *path, off_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
}

static void write_badblocks(const char *text)
{
	char path[192];
	FILE *f;

	snprintf(path, sizeof(path), "%s.badblocks", img);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static struct blk_dev *open_dev(const char *path)
{
	struct blk_dev_config cfg = {.backend = BLK_BACKEND_AUTO, .path = path};
	struct blk_dev *dev;
	char msg[256];
	int ret = blk_dev_open(&cfg, &dev, msg, sizeof(msg));

	ck_assert_msg(ret == 0, "open %s: %s", path, msg);
	return dev;
}

static void *read_block(struct blk_dev *dev, uint64_t blk)
{
	void *b = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(blk_read(dev, blk * MFS_SECTORS_PER_BLOCK, b, MFS_BLOCK_SIZE, 0), 0);
	return b;
}

/* Read and check everything mkfs wrote; returns the superblock. */
static void check_fs(const char *path, uint64_t size, struct mfs_superblock *sb)
{
	struct blk_dev *dev = open_dev(path);
	bool force_ro, other_bad;
	char msg[256] = "";
	uint64_t n = size / MFS_BLOCK_SIZE, jl;
	uint8_t *b, *t;
	struct mfs_inode *root;

	ck_assert_msg(mfs_super_read(dev, sb, &force_ro, &other_bad, msg, sizeof(msg)) == 0,
	              "mfs_super_read: %s", msg);
	ck_assert(!force_ro);
	ck_assert(!other_bad);
	ck_assert_uint_eq(sb->nr_blocks, n);
	ck_assert_uint_eq(sb->state, MFS_STATE_CLEAN);
	ck_assert_uint_eq(sb->version, MFS_FORMAT_VERSION);
	ck_assert_uint_eq(sb->feature_ro_compat, MFS_FEATURE_RO_COMPAT_METADATA_DUP);
	ck_assert_uint_eq(sb->feature_incompat, MFS_FEATURE_INCOMPAT_XATTR_BLOCKS);
	ck_assert_uint_eq(sb->root_ino, MFS_ROOT_INO);

	/* sizing rules */
	jl = n / 64;
	jl = jl < 256 ? 256 : jl > 32768 ? 32768 : jl;
	ck_assert_uint_eq(sb->journal_start, 1);
	ck_assert_uint_eq(sb->journal_len, jl);
	ck_assert_uint_eq(sb->meta_start, 1 + jl);
	ck_assert_uint_ge(sb->meta_len, n / 16);
	ck_assert_uint_eq(sb->data_start, sb->meta_start + sb->meta_len);
	ck_assert_uint_eq(sb->journal_twin, sb->data_start + sb->data_len);
	ck_assert_uint_eq(sb->meta_twin, sb->journal_twin + sb->journal_len);
	ck_assert_uint_eq(sb->meta_twin + sb->meta_len, n - 1);
	ck_assert_uint_eq(sb->nr_inodes, sb->inode_table_blocks * MFS_INODES_PER_BLOCK);
	ck_assert_uint_eq(sb->free_blocks, sb->data_len);
	ck_assert_uint_eq(sb->free_inodes, sb->nr_inodes - 1);
	ck_assert_uint_eq(sb->free_meta, sb->meta_len - (sb->inode_table_start +
	                                                 sb->inode_table_blocks - sb->meta_start));
	ck_assert_uint_ge(sb->data_bitmap_blocks * MFS_BITMAP_BITS, sb->data_len);
	ck_assert_uint_ge(sb->meta_bitmap_blocks * MFS_BITMAP_BITS, sb->meta_len);
	ck_assert_uint_ge(sb->inode_bitmap_blocks * MFS_BITMAP_BITS, sb->nr_inodes);

	/* backup superblock equals the primary */
	b = read_block(dev, 0);
	t = read_block(dev, n - 1);
	ck_assert_mem_eq(b, t, MFS_BLOCK_SIZE);
	free(b);
	free(t);

	/* root inode, and the inode table's twin */
	b = read_block(dev, sb->inode_table_start);
	ck_assert_int_eq(mfs_block_verify(b, sb->csum_seed, MFS_T_INODES, sb->inode_table_start),
	                 0);
	root = (struct mfs_inode *)(b + sizeof(struct mfs_meta_hdr));
	ck_assert_uint_eq(root->mode, 040755);
	ck_assert_uint_eq(root->nlink, 2);
	ck_assert_uint_eq(root->uid, getuid());
	ck_assert_uint_eq(root->parent, MFS_ROOT_INO);
	ck_assert_uint_eq(root[1].mode, 0);
	t = read_block(dev, sb->inode_table_start - sb->meta_start + sb->meta_twin);
	ck_assert_mem_eq(b, t, MFS_BLOCK_SIZE);
	free(b);
	free(t);

	/* bitmaps: ino 1 used, the meta zone's fixed part used, the data zone free */
	b = read_block(dev, sb->inode_bitmap_start);
	ck_assert_int_eq(mfs_block_verify(b, sb->csum_seed, MFS_T_BITMAP, sb->inode_bitmap_start),
	                 0);
	ck_assert_uint_eq(b[48], 1);
	free(b);
	b = read_block(dev, sb->meta_bitmap_start);
	ck_assert_int_eq(mfs_block_verify(b, sb->csum_seed, MFS_T_BITMAP, sb->meta_bitmap_start),
	                 0);
	{
		uint64_t fixed = sb->inode_table_start + sb->inode_table_blocks - sb->meta_start;

		for (uint64_t i = 0; i < fixed + 8 && i < MFS_BITMAP_BITS; i++)
			ck_assert_int_eq(!!(b[48 + i / 8] & (1u << (i % 8))), i < fixed);
	}
	free(b);
	b = read_block(dev, sb->data_bitmap_start);
	ck_assert_int_eq(mfs_block_verify(b, sb->csum_seed, MFS_T_BITMAP, sb->data_bitmap_start),
	                 0);
	ck_assert_uint_eq(b[48], 0);
	free(b);
	blk_dev_close(dev);
}

START_TEST(test_create)
{
	struct mfs_superblock sb;
	struct stat st;
	char args[256];

	snprintf(args, sizeof(args), "-L test-label '%s' 64M", img);
	ck_assert_int_eq(run(args), 0);
	ck_assert_msg(strstr(out, "uuid") && strstr(out, "test-label") && strstr(out, "inodes"),
	              "summary: %s", out);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(stat(img, &st), 0);
	ck_assert_int_eq(st.st_size, 64 << 20);
	check_fs(img, 64 << 20, &sb);
	ck_assert_str_eq(sb.label, "test-label");
	/* default: one inode per 16 KiB */
	ck_assert_uint_ge(sb.nr_inodes, (64u << 20) / 16384);
	ck_assert_uint_lt(sb.nr_inodes, (64u << 20) / 16384 + MFS_INODES_PER_BLOCK);
}
END_TEST

START_TEST(test_sizes)
{
	static const struct {
		const char *arg;
		uint64_t bytes;
	} v[] = {{"16M", 16ull << 20}, {"20971520", 20971520}, {"1G", 1ull << 30}};
	struct mfs_superblock sb;
	char args[256];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unlink(img);
		snprintf(args, sizeof(args), "-q '%s' %s", img, v[i].arg);
		ck_assert_msg(run(args) == 0, "%s: %s", v[i].arg, err);
		check_fs(img, v[i].bytes, &sb);
	}
	/* growing an existing image is fine (with -f: it holds a mendfs) */
	snprintf(args, sizeof(args), "-q -f '%s' 2G", img);
	ck_assert_msg(run(args) == 0, "%s", err);
	check_fs(img, 2ull << 30, &sb);
	ck_assert_uint_eq(sb.journal_len, (2ull << 30) / 64 / 4096);
}
END_TEST

START_TEST(test_refuse_mendfs)
{
	struct mfs_superblock sb1, sb2;
	char args[256];

	snprintf(args, sizeof(args), "-q '%s' 32M", img);
	ck_assert_int_eq(run(args), 0);
	check_fs(img, 32 << 20, &sb1);
	snprintf(args, sizeof(args), "-q '%s'", img);
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "mendfs") && strstr(err, "-f") && strstr(err, img), "message: %s",
	              err);
	/* only the backup left: still recognised */
	write_at(img, 0, (char[4096]){0}, 4096);
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "backup superblock"), "message: %s", err);
	snprintf(args, sizeof(args), "-q -f '%s'", img);
	ck_assert_int_eq(run(args), 0);
	check_fs(img, 32 << 20, &sb2);
	ck_assert(memcmp(sb1.uuid, sb2.uuid, 16) != 0);
	ck_assert_uint_ne(sb1.csum_seed, sb2.csum_seed);
}
END_TEST

START_TEST(test_too_small)
{
	char args[256];

	snprintf(args, sizeof(args), "'%s' 15M", img);
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "16 MiB"), "message: %s", err);
	ck_assert_int_ne(access(img, F_OK), 0); /* not left behind */
	make_file(img, 8 << 20);
	snprintf(args, sizeof(args), "'%s'", img);
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "too small") && strstr(err, img), "message: %s", err);
}
END_TEST

START_TEST(test_bad_args)
{
	static const char *bad[] = {
	        "-L 0123456789012345678901234567890123456789012345678901234567890123 IMG 32M",
	        "IMG 12Q",
	        "IMG -5M",
	        "IMG 0",
	        "IMG 99999999999999999999T",
	        "-z IMG 32M",
	        "-N 8 IMG 32M",
	        "-N abc IMG 32M",
	        "-N 100000000 IMG 32M",
	        "-L",
	        "",
	        "IMG 32M extra",
	};
	char args[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = strstr(bad[i], "IMG");

		if (p)
			snprintf(args, sizeof(args), "%.*s'%s'%s", (int)(p - bad[i]), bad[i], img,
			         p + 3);
		else
			snprintf(args, sizeof(args), "%s", bad[i]);
		ck_assert_msg(run(args) == 1, "'%s' did not exit 1", bad[i]);
		ck_assert_msg(strncmp(err, "mkfs.mendfs: ", 13) == 0, "'%s': message: %s", bad[i],
		              err);
		ck_assert_str_eq(out, "");
		ck_assert_msg(access(img, F_OK) != 0, "'%s' left an image", bad[i]);
	}
	/* a 63-byte label is fine */
	snprintf(args, sizeof(args),
	         "-q -L 012345678901234567890123456789012345678901234567890123456789012 '%s' 32M",
	         img);
	ck_assert_int_eq(run(args), 0);
}
END_TEST

START_TEST(test_quiet_and_inodes)
{
	struct mfs_superblock sb;
	char args[256];

	snprintf(args, sizeof(args), "-q -N 1000 '%s' 64M", img);
	ck_assert_int_eq(run(args), 0);
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(err, "");
	check_fs(img, 64 << 20, &sb);
	ck_assert_uint_eq(sb.nr_inodes, 1005); /* rounded up to whole inode table blocks */
	snprintf(args, sizeof(args), "-q -f -N 100000 '%s' 256M", img);
	ck_assert_msg(run(args) == 0, "%s", err);
	check_fs(img, 256 << 20, &sb);
	ck_assert_uint_ge(sb.nr_inodes, 100000);
	ck_assert_uint_ge(sb.meta_len, sb.inode_table_blocks + 100000 / 16);
}
END_TEST

START_TEST(test_shrink)
{
	char args[256];
	struct stat st;

	snprintf(args, sizeof(args), "-q '%s' 64M", img);
	ck_assert_int_eq(run(args), 0);
	snprintf(args, sizeof(args), "-q '%s' 32M", img);
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "shrink"), "message: %s", err);
	ck_assert_int_eq(stat(img, &st), 0);
	ck_assert_int_eq(st.st_size, 64 << 20);
	snprintf(args, sizeof(args), "-q -f '%s' 32M", img);
	ck_assert_int_eq(run(args), 0);
	ck_assert_int_eq(stat(img, &st), 0);
	ck_assert_int_eq(st.st_size, 32 << 20);
	/* an empty file may be sized freely */
	make_file(img, 0);
	snprintf(args, sizeof(args), "-q '%s' 32M", img);
	ck_assert_int_eq(run(args), 0);
}
END_TEST

START_TEST(test_poison)
{
	struct mfs_superblock sb;
	char args[256], bb[64];
	uint64_t n = (64ull << 20) / 4096;

	snprintf(args, sizeof(args), "-q '%s' 64M", img);
	/* the primary superblock */
	write_badblocks("0 1\n");
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "poison") && strstr(err, "primary superblock"), "message: %s",
	              err);
	/* the backup superblock */
	unlink(img);
	snprintf(bb, sizeof(bb), "%llu 8\n", (unsigned long long)(n - 1) * 8);
	write_badblocks(bb);
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "backup superblock"), "message: %s", err);
	/* the journal */
	unlink(img);
	write_badblocks("100 3\n");
	ck_assert_int_eq(run(args), 1);
	ck_assert_msg(strstr(err, "journal"), "message: %s", err);
	/* the data zone: fine, and the poison persists */
	unlink(img);
	snprintf(bb, sizeof(bb), "%llu 8\n", (unsigned long long)(n / 2) * 8);
	write_badblocks(bb);
	ck_assert_msg(run(args) == 0, "%s", err);
	check_fs(img, 64 << 20, &sb);
	{
		struct blk_dev *dev = open_dev(img);

		ck_assert_uint_eq(blk_poison_count(dev), 1);
		blk_dev_close(dev);
	}
}
END_TEST

/*
 * A primary superblock that is checksummed and newest but out of range: a
 * read-only mount uses the backup and leaves the primary for fsck; a
 * read-write mount uses the backup and rewrites the primary (FORMAT.md §4.2).
 * Both out of range: the mount fails with -EINVAL naming both copies.
 */
START_TEST(test_mount_super_fallback)
{
	struct mfs_mount_opts ro = {.read_only = true}, rw = {0};
	struct mfs_superblock *sb, *bad;
	char msg[512] = "";
	struct blk_dev *dev;
	bool force_ro, other_bad;
	struct mfs *fs;
	uint64_t nb;
	char args[256];

	snprintf(args, sizeof(args), "-q '%s' 64M", img);
	ck_assert_int_eq(run(args), 0);
	dev = open_dev(img);
	bad = read_block(dev, 0);
	nb = bad->nr_blocks;
	bad->journal_tail = bad->journal_len;
	bad->write_time_ns += 1000;
	mfs_block_seal(bad, bad->csum_seed);
	ck_assert_int_eq(blk_write(dev, 0, bad, MFS_BLOCK_SIZE, 0), 0);
	blk_dev_close(dev);

	ck_assert_msg(mfs_mount(img, &ro, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_uint_lt(fs->sb.journal_tail, fs->sb.journal_len);
	ck_assert_int_eq(mfs_unmount(fs), 0);
	dev = open_dev(img);
	sb = read_block(dev, 0);
	ck_assert_uint_eq(sb->journal_tail, sb->journal_len); /* read-only: left as it was */
	free(sb);
	blk_dev_close(dev);

	ck_assert_msg(mfs_mount(img, &rw, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(mfs_unmount(fs), 0);
	dev = open_dev(img);
	sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	ck_assert_int_eq(mfs_super_read(dev, sb, &force_ro, &other_bad, msg, sizeof(msg)), 0);
	ck_assert(!other_bad); /* rewritten: both copies equal and valid */
	ck_assert_uint_lt(sb->journal_tail, sb->journal_len);

	/* both out of range */
	ck_assert_int_eq(blk_write(dev, 0, bad, MFS_BLOCK_SIZE, 0), 0);
	bad->write_time_ns -= 2000;
	bad->journal_tail = 0;
	bad->nr_inodes++;
	mfs_block_seal(bad, bad->csum_seed);
	ck_assert_int_eq(blk_write(dev, (nb - 1) * MFS_SECTORS_PER_BLOCK, bad, MFS_BLOCK_SIZE, 0),
	                 0);
	blk_dev_close(dev);
	ck_assert_int_eq(mfs_mount(img, &rw, &fs, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "both superblock copies are invalid"));
	free(sb);
	free(bad);
}
END_TEST

/*
 * After a clean unmount the free counters are trusted (FORMAT.md §5.1).  One
 * that is wrong there never makes the superblock invalid: it stays within its
 * zone, the error state is set and the next mount recounts.
 */
START_TEST(test_mount_wrong_counter)
{
	struct mfs_mount_opts rw = {0};
	struct mfs_superblock *sb;
	struct statvfs st;
	char msg[512] = "", args[256];
	struct blk_dev *dev;
	struct mfs_txn *txn;
	uint64_t s, n, nb, data_len;
	struct mfs *fs;

	snprintf(args, sizeof(args), "-q '%s' 64M", img);
	ck_assert_int_eq(run(args), 0);
	ck_assert_msg(mfs_mount(img, &rw, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	data_len = fs->sb.data_len;
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_alloc_data(fs, txn, 0, 10, &s, &n), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_int_eq(mfs_unmount(fs), 0);

	/* the counter says everything is free: wrong, but within its zone */
	dev = open_dev(img);
	sb = read_block(dev, 0);
	nb = sb->nr_blocks;
	ck_assert_uint_eq(sb->free_blocks, data_len - 10);
	ck_assert_uint_eq(sb->state, MFS_STATE_CLEAN);
	sb->free_blocks = data_len;
	sb->write_time_ns++;
	mfs_block_seal(sb, sb->csum_seed);
	ck_assert_int_eq(blk_write(dev, 0, sb, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_int_eq(blk_write(dev, (nb - 1) * MFS_SECTORS_PER_BLOCK, sb, MFS_BLOCK_SIZE, 0),
	                 0);
	blk_dev_close(dev);
	free(sb);

	ck_assert_msg(mfs_mount(img, &rw, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, data_len); /* trusted */
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_free_data(fs, txn, s, n), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, data_len); /* held at the zone size */
	ck_assert(fs->sb.state & MFS_STATE_ERROR);
	ck_assert_int_eq(mfs_unmount(fs), 0);

	/* the superblock still validates; the error state makes the next mount recount
	 * (a counter made wrong again is not believed) */
	dev = open_dev(img);
	sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	{
		bool ro, other_bad;

		ck_assert_int_eq(mfs_super_read(dev, sb, &ro, &other_bad, msg, sizeof(msg)), 0);
	}
	ck_assert(sb->state & MFS_STATE_ERROR);
	ck_assert_uint_eq(sb->free_blocks, data_len);
	sb->free_blocks = data_len - 5;
	sb->write_time_ns++;
	mfs_block_seal(sb, sb->csum_seed);
	ck_assert_int_eq(blk_write(dev, 0, sb, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_int_eq(blk_write(dev, (nb - 1) * MFS_SECTORS_PER_BLOCK, sb, MFS_BLOCK_SIZE, 0),
	                 0);
	blk_dev_close(dev);
	free(sb);
	ck_assert_msg(mfs_mount(img, &rw, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert(fs->sb.state & MFS_STATE_ERROR);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, data_len);
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_alloc_data(fs, txn, 0, 3, &s, &n), 0);
	ck_assert_int_eq(mfs_free_data(fs, txn, s, n), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, data_len);
	ck_assert_int_eq(mfs_unmount(fs), 0);
}
END_TEST

/*
 * A mount after a crash recounts the free counters from the bitmaps read
 * straight from the device; a bitmap block that fails its checks there is
 * read from its twin (and repaired), as every metadata read.
 */
START_TEST(test_mount_recount_twin)
{
	struct mfs_mount_opts rw = {0};
	struct mfs_superblock *sb;
	struct statvfs st;
	char msg[512] = "", args[256];
	struct blk_dev *dev;
	struct mfs_txn *txn;
	uint64_t s, n, data_len, bm;
	uint8_t *b;
	struct mfs *fs;

	snprintf(args, sizeof(args), "-q '%s' 64M", img);
	ck_assert_int_eq(run(args), 0);
	ck_assert_msg(mfs_mount(img, &rw, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	data_len = fs->sb.data_len;
	bm = fs->sb.data_bitmap_start;
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_alloc_data(fs, txn, 0, 10, &s, &n), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	ck_assert_int_eq(mfs_checkpoint(fs), 0);
	mfs_crash(fs);

	/* DIRTY, and a counter that is not to be believed */
	dev = open_dev(img);
	sb = read_block(dev, 0);
	ck_assert(sb->state & MFS_STATE_DIRTY);
	ck_assert_uint_eq(sb->free_blocks, data_len - 10);
	sb->free_blocks = data_len;
	sb->write_time_ns++;
	mfs_block_seal(sb, sb->csum_seed);
	ck_assert_int_eq(blk_write(dev, 0, sb, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_int_eq(
	        blk_write(dev, (sb->nr_blocks - 1) * MFS_SECTORS_PER_BLOCK, sb, MFS_BLOCK_SIZE, 0),
	        0);
	free(sb);
	b = read_block(dev, bm);
	b[100] ^= 0x40; /* the primary copy of the data bitmap block fails its checksum */
	ck_assert_int_eq(blk_write(dev, bm * MFS_SECTORS_PER_BLOCK, b, MFS_BLOCK_SIZE, 0), 0);
	blk_dev_close(dev);
	free(b);

	ck_assert_msg(mfs_mount(img, &rw, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_bfree, data_len - 10);
	ck_assert_uint_ge(atomic_load(&fs->stats.meta_repairs), 1);
	ck_assert_int_eq(mfs_unmount(fs), 0);
}
END_TEST

START_TEST(test_loop_device)
{
	struct mfs_superblock sb;
	char cmd[512], loopdev[64] = "", args[256];
	FILE *p;

	make_file(img, 64 << 20);
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>/dev/null", img);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (!fgets(loopdev, sizeof(loopdev), p))
		loopdev[0] = 0;
	pclose(p);
	loopdev[strcspn(loopdev, "\n")] = 0;
	if (!loopdev[0]) {
		cannot_run("test_loop_device: losetup -f failed (no loop device)");
		return;
	}
	snprintf(args, sizeof(args), "-L loop '%s'", loopdev);
	{
		int rc = run(args);

		if (rc == 0)
			check_fs(loopdev, 64 << 20, &sb);
		snprintf(cmd, sizeof(cmd), "losetup -d '%s'", loopdev);
		ck_assert_int_eq(system(cmd), 0);
		ck_assert_msg(rc == 0, "mkfs on %s: %s", loopdev, err);
	}
	ck_assert_msg(strstr(out, "uring"), "summary: %s", out);
	/* and the image behind it holds the same filesystem */
	check_fs(img, 64 << 20, &sb);
	ck_assert_str_eq(sb.label, "loop");
	/* SIZE is for image files only */
	ck_assert_int_eq(run("-q /dev/null 32M"), 1);
}
END_TEST

static Suite *mkfs_suite(void)
{
	Suite *s = suite_create("mkfs");
	TCase *tc = tcase_create("mkfs");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_create);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_refuse_mendfs);
	tcase_add_test(tc, test_too_small);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_quiet_and_inodes);
	tcase_add_test(tc, test_shrink);
	tcase_add_test(tc, test_poison);
	tcase_add_test(tc, test_loop_device);
	tcase_add_test(tc, test_mount_super_fallback);
	tcase_add_test(tc, test_mount_wrong_counter);
	tcase_add_test(tc, test_mount_recount_twin);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(mkfs_suite());
}
