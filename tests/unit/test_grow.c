/* SPDX-License-Identifier: MIT */
/*
 * mfs_grow (fs/core/grow.c) on images made by the built mkfs.mendfs: the
 * grown layout (the tail placed as mkfs places it, the bitmaps covering the
 * new data zone, fsck.mendfs -n clean), a filesystem without metadata_dup,
 * and each refusal with its documented error and nothing written.  Online
 * (mfs_grow_online on a filesystem mounted in this process): the new size in
 * statfs at once, more than the old free space written, the old file intact,
 * fsck.mendfs -n clean after the unmount; the refusals (did not grow,
 * read-only); the journal hold makes a change wait, not fail.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "mendfs/blk.h"
#include "mfs.h"
#include "mfs_grow.h"
#include "mfs_layout.h"
#include "mfs_ops.h"
#include "mkfs_run.h"
#include "check_run.h"

#define MIB (1ull << 20)

static char dir[64], img[128];

static void setup(void)
{
	char args[256];

	snprintf(dir, sizeof(dir), "/tmp/mfs-grow-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(args, sizeof(args), "'%s' %llu", img, 32 * MIB);
	mkfs_run(args);
}

static void teardown(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void set_size(uint64_t bytes)
{
	ck_assert_int_eq(truncate(img, (off_t)bytes), 0);
}

static int grow(struct mfs_grow_info *info, char *err, size_t len)
{
	struct blk_dev_config cfg = {.path = img, .flags = BLK_CFG_EXCL};
	struct blk_dev *dev;
	int ret;

	err[0] = '\0';
	ck_assert_int_eq(blk_dev_open(&cfg, &dev, err, len), 0);
	ret = mfs_grow(dev, info, err, len);
	blk_dev_close(dev);
	return ret;
}

/* The superblock a mount would use; asserts there is one. */
static void read_sb(struct mfs_superblock *sb)
{
	struct blk_dev_config cfg = {.path = img, .flags = BLK_CFG_READONLY};
	struct blk_dev *dev;
	bool ro, other_bad;
	char err[512];
	int ret;

	ck_assert_int_eq(blk_dev_open(&cfg, &dev, err, sizeof(err)), 0);
	ret = mfs_super_read(dev, sb, &ro, &other_bad, err, sizeof(err));
	blk_dev_close(dev);
	ck_assert_msg(ret == 0, "superblock: %s", err);
	ck_assert(!other_bad);
}

static void raw(bool write, uint64_t blk, void *buf)
{
	int fd = open(img, O_RDWR);

	ck_assert_int_ge(fd, 0);
	if (write)
		ck_assert_int_eq(pwrite(fd, buf, MFS_BLOCK_SIZE, (off_t)(blk * MFS_BLOCK_SIZE)),
		                 MFS_BLOCK_SIZE);
	else
		ck_assert_int_eq(pread(fd, buf, MFS_BLOCK_SIZE, (off_t)(blk * MFS_BLOCK_SIZE)),
		                 MFS_BLOCK_SIZE);
	close(fd);
}

static uint64_t image_hash(void)
{
	int fd = open(img, O_RDONLY);
	static uint8_t buf[1 << 20];
	XXH64_state_t *st = XXH64_createState();
	ssize_t n;
	uint64_t h;

	ck_assert_int_ge(fd, 0);
	XXH64_reset(st, 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		XXH64_update(st, buf, (size_t)n);
	close(fd);
	h = XXH64_digest(st);
	XXH64_freeState(st);
	return h;
}

static void fsck_clean(void)
{
	char fsck[PATH_MAX], cmd[PATH_MAX * 2];

	tool_path(fsck, sizeof(fsck), "FSCK_MENDFS", "fsck/fsck.mendfs");
	snprintf(cmd, sizeof(cmd), "'%s' -n '%s' >/dev/null", fsck, img);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_grow_layout)
{
	struct mfs_superblock *o = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE),
	                      *n = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	struct mfs_grow_info info;
	char err[512];
	uint64_t nb = 200 * MIB / MFS_BLOCK_SIZE;

	read_sb(o);
	set_size(200 * MIB);
	ck_assert_msg(grow(&info, err, sizeof(err)) == 0, "grow: %s", err);
	read_sb(n);
	ck_assert_uint_eq(n->nr_blocks, nb);
	ck_assert_uint_eq(info.new_blocks, nb);
	ck_assert_uint_eq(info.old_blocks, o->nr_blocks);
	/* the tail at the end, as mkfs puts it; the rest where it was */
	ck_assert_uint_eq(n->meta_twin + n->meta_len, nb - 1);
	ck_assert_uint_eq(n->journal_twin + n->journal_len, n->meta_twin);
	ck_assert_uint_eq(n->data_start + n->data_len, n->journal_twin);
	ck_assert_uint_ge(n->journal_twin, o->nr_blocks);
	ck_assert_uint_eq(n->data_start, o->data_start);
	ck_assert_uint_eq(n->inode_table_start, o->inode_table_start);
	ck_assert_uint_eq(n->nr_inodes, o->nr_inodes);
	/* a data bitmap of two blocks now, both bitmaps moved into free meta blocks */
	ck_assert_uint_eq(n->data_bitmap_blocks, mfs_bitmap_blocks(n->data_len));
	ck_assert_uint_eq(n->data_bitmap_blocks, 2);
	ck_assert_uint_ne(n->data_bitmap_start, o->data_bitmap_start);
	ck_assert_uint_ne(n->meta_bitmap_start, o->meta_bitmap_start);
	ck_assert_uint_eq(n->free_blocks, n->data_len - (o->data_len - o->free_blocks));
	ck_assert_uint_eq(n->free_meta, o->free_meta + o->meta_bitmap_blocks +
	                                        o->data_bitmap_blocks - n->meta_bitmap_blocks -
	                                        n->data_bitmap_blocks);
	fsck_clean();
	/* a second grow moves them again */
	set_size(300 * MIB);
	ck_assert_msg(grow(&info, err, sizeof(err)) == 0, "second grow: %s", err);
	read_sb(o);
	ck_assert_uint_eq(o->nr_blocks, 300 * MIB / MFS_BLOCK_SIZE);
	ck_assert_uint_eq(o->data_bitmap_blocks, 3);
	fsck_clean();
	free(o);
	free(n);
}
END_TEST

START_TEST(test_grow_no_dup)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	struct mfs_grow_info info;
	char err[512];
	uint64_t nb = 64 * MIB / MFS_BLOCK_SIZE;

	/* the same filesystem without twins (a reader accepts it: FORMAT.md §2.2) */
	read_sb(sb);
	sb->feature_ro_compat &= ~MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	sb->journal_twin = sb->meta_twin = 0;
	mfs_block_seal(sb, sb->csum_seed);
	raw(true, 0, sb);
	raw(true, sb->nr_blocks - 1, sb);
	fsck_clean();
	set_size(64 * MIB);
	ck_assert_msg(grow(&info, err, sizeof(err)) == 0, "grow: %s", err);
	read_sb(sb);
	ck_assert_uint_eq(sb->nr_blocks, nb);
	ck_assert_uint_eq(sb->journal_twin, 0);
	ck_assert_uint_eq(sb->meta_twin, 0);
	ck_assert_uint_eq(sb->data_start + sb->data_len, nb - 1);
	fsck_clean();
	free(sb);
}
END_TEST

START_TEST(test_grow_refused)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	uint8_t *b = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	struct mfs_grow_info info;
	char err[512];
	uint64_t h;

	read_sb(sb);
	/* did not grow */
	h = image_hash();
	ck_assert_int_eq(grow(&info, err, sizeof(err)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "did not grow"));
	ck_assert_uint_eq(image_hash(), h);
	/* too little: the twins cannot move past the old end */
	set_size(32 * MIB + (sb->journal_len + sb->meta_len) * MFS_BLOCK_SIZE);
	h = image_hash();
	ck_assert_int_eq(grow(&info, err, sizeof(err)), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err, "too little"));
	ck_assert_uint_eq(image_hash(), h);
	/* shrunk */
	set_size(24 * MIB);
	h = image_hash();
	ck_assert_int_eq(grow(&info, err, sizeof(err)), -EFBIG);
	ck_assert_ptr_nonnull(strstr(err, "shrinking is not supported"));
	ck_assert_uint_eq(image_hash(), h);
	free(sb);
	free(b);
}
END_TEST

START_TEST(test_grow_meta_full)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	uint8_t *b = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	struct mfs_grow_info info;
	char err[512];
	uint64_t h;

	/* every meta zone block used: no room for the new bitmaps */
	read_sb(sb);
	ck_assert_uint_eq(sb->meta_bitmap_blocks, 1);
	raw(false, sb->meta_bitmap_start, b);
	memset(b + sizeof(struct mfs_meta_hdr), 0xff, MFS_BLOCK_SIZE - sizeof(struct mfs_meta_hdr));
	mfs_block_seal(b, sb->csum_seed);
	raw(true, sb->meta_bitmap_start, b);
	raw(true, sb->meta_twin + (sb->meta_bitmap_start - sb->meta_start), b);
	set_size(128 * MIB);
	h = image_hash();
	ck_assert_int_eq(grow(&info, err, sizeof(err)), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err, "no free run"));
	ck_assert_uint_eq(image_hash(), h);
	free(sb);
	free(b);
}
END_TEST

/* --- online --------------------------------------------------------------------- */

static struct mfs *mount_img(bool ro)
{
	struct mfs_mount_opts o = {.read_only = ro};
	struct mfs *fs = NULL;
	char err[512] = "";

	ck_assert_msg(mfs_mount(img, &o, &fs, err, sizeof(err)) == 0, "mount: %s", err);
	return fs;
}

static uint64_t new_file(struct mfs *fs, const char *name)
{
	struct mfs_new_inode ni = {.mode = S_IFREG | 0644};
	struct stat st;

	ck_assert_int_eq(mfs_create(fs, MFS_ROOT_INO, name, &ni, &st), 0);
	return st.st_ino;
}

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 151 + i * 13 + (i >> 12));
}

START_TEST(test_grow_online)
{
	static unsigned char buf[MIB], back[MIB];
	struct mfs_grow_info info;
	struct statvfs st;
	uint64_t a, b, chunks;
	struct mfs *fs;
	char err[512] = "";

	fs = mount_img(false);
	a = new_file(fs, "a");
	pattern(buf, MIB, 1);
	ck_assert_int_eq(mfs_write(fs, a, buf, MIB, 0), (ssize_t)MIB);
	ck_assert_int_eq(mfs_grow_online(fs, &info, err, sizeof(err)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "did not grow"));
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	chunks = st.f_bavail * st.f_frsize / MIB + 8; /* 8 MiB more than was free */

	set_size(96 * MIB);
	err[0] = '\0';
	ck_assert_msg(mfs_grow_online(fs, &info, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(info.old_blocks, 32 * MIB / MFS_BLOCK_SIZE);
	ck_assert_uint_eq(info.new_blocks, 96 * MIB / MFS_BLOCK_SIZE);
	ck_assert_uint_gt(info.new_data_len, info.old_data_len + 64 * MIB / MFS_BLOCK_SIZE - 1);
	ck_assert_int_eq(mfs_statfs(fs, &st), 0);
	ck_assert_uint_eq(st.f_blocks, info.new_data_len);
	ck_assert_uint_ge(st.f_bfree * st.f_frsize, (chunks + 8) * MIB);
	b = new_file(fs, "b");
	for (uint64_t i = 0; i < chunks; i++) {
		pattern(buf, MIB, (unsigned)i + 2);
		ck_assert_int_eq(mfs_write(fs, b, buf, MIB, (off_t)(i * MIB)), (ssize_t)MIB);
	}
	ck_assert_int_eq(mfs_unmount(fs), 0);
	fsck_clean();

	fs = mount_img(false);
	pattern(buf, MIB, 1);
	ck_assert_int_eq(mfs_read(fs, a, back, MIB, 0), (ssize_t)MIB);
	ck_assert(memcmp(buf, back, MIB) == 0);
	pattern(buf, MIB, (unsigned)chunks + 1);
	ck_assert_int_eq(mfs_read(fs, b, back, MIB, (off_t)((chunks - 1) * MIB)), (ssize_t)MIB);
	ck_assert(memcmp(buf, back, MIB) == 0);
	ck_assert_int_eq(mfs_unmount(fs), 0);
}
END_TEST

START_TEST(test_grow_online_read_only)
{
	struct mfs_grow_info info;
	struct mfs *fs = mount_img(true);
	char err[512] = "";

	set_size(96 * MIB);
	ck_assert_int_eq(mfs_grow_online(fs, &info, err, sizeof(err)), -EROFS);
	ck_assert_ptr_nonnull(strstr(err, "read-only"));
	ck_assert_int_eq(mfs_unmount(fs), 0);
}
END_TEST

struct creator {
	struct mfs *fs;
	int ret;
	atomic_bool done;
};

static void *create_one(void *p)
{
	struct creator *c = p;
	struct mfs_new_inode ni = {.mode = S_IFREG | 0644};
	struct stat st;

	c->ret = mfs_create(c->fs, MFS_ROOT_INO, "held", &ni, &st);
	atomic_store(&c->done, true);
	return NULL;
}

START_TEST(test_grow_hold_waits)
{
	struct creator c = {.fs = mount_img(false)};
	pthread_t t;

	ck_assert_int_eq(mfs_journal_hold(c.fs), 0);
	ck_assert_int_eq(mfs_journal_hold(c.fs), -EBUSY); /* one at a time */
	ck_assert_int_eq(pthread_create(&t, NULL, create_one, &c), 0);
	usleep(200 * 1000);
	ck_assert_msg(!atomic_load(&c.done), "a change ran (ret %d) while the journal was held",
	              c.ret);
	mfs_journal_release(c.fs);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(c.ret, 0); /* it waited, it did not fail */
	ck_assert_int_eq(mfs_unmount(c.fs), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("grow");
	TCase *tc = tcase_create("grow");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_grow_layout);
	tcase_add_test(tc, test_grow_no_dup);
	tcase_add_test(tc, test_grow_refused);
	tcase_add_test(tc, test_grow_meta_full);
	tcase_add_test(tc, test_grow_online);
	tcase_add_test(tc, test_grow_online_read_only);
	tcase_add_test(tc, test_grow_hold_waits);
	suite_add_tcase(s, tc);
	return check_run(s);
}
