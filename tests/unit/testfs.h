/* SPDX-License-Identifier: MIT */
/*
 * A tiny hand-made mendfs for the unit tests of the storage layer (super.c,
 * meta.c, journal.c), independent of mkfs: a sparse image under /tmp, a
 * superblock with zones laid out for its size, and mount/unmount helpers that
 * run the same steps as the daemon (read the superblock, replay, cache,
 * journal).
 *
 * Layout of an image of NB blocks, journal J, metadata zone M:
 *   0 super | 1.. journal | meta (inode table, 3 bitmaps, free) | data |
 *   journal twin | meta twin | NB-1 backup      (twins only with dup)
 */
#ifndef MENDFS_TESTS_TESTFS_H
#define MENDFS_TESTS_TESTFS_H

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blk_internal.h"
#include "mfs.h"

struct tfs {
	char dir[64];
	char img[128];
	char bb[160];
	uint64_t nb;
	struct blk_dev *dev;
	struct mfs fs;
	bool mounted;
};

#define TFS_INODES 150

/* Fill @sb for an image of @nb blocks. */
static inline void tfs_layout(struct mfs_superblock *sb, uint64_t nb, uint64_t jlen, uint64_t mlen,
                              bool dup)
{
	uint64_t data_len;

	memset(sb, 0, sizeof(*sb));
	sb->hdr.magic = MFS_META_MAGIC;
	sb->hdr.type = MFS_T_SUPER;
	sb->magic = MFS_SB_MAGIC;
	sb->version = MFS_FORMAT_VERSION;
	sb->block_size = MFS_BLOCK_SIZE;
	sb->feature_ro_compat = dup ? MFS_FEATURE_RO_COMPAT_METADATA_DUP : 0;
	sb->state = MFS_STATE_CLEAN;
	snprintf(sb->label, sizeof(sb->label), "unit");
	sb->csum_seed = 0x5eed0123456789abull;
	sb->nr_blocks = nb;
	sb->journal_start = 1;
	sb->journal_len = jlen;
	sb->meta_start = 1 + jlen;
	sb->meta_len = mlen;
	sb->data_start = sb->meta_start + mlen;
	data_len = nb - 2 - (dup ? 2 : 1) * (jlen + mlen);
	sb->data_len = data_len;
	if (dup) {
		sb->journal_twin = sb->data_start + data_len;
		sb->meta_twin = sb->journal_twin + jlen;
	}
	sb->inode_table_start = sb->meta_start;
	sb->inode_table_blocks = (TFS_INODES + MFS_INODES_PER_BLOCK - 1) / MFS_INODES_PER_BLOCK;
	sb->inode_bitmap_start = sb->inode_table_start + sb->inode_table_blocks;
	sb->inode_bitmap_blocks = 1;
	sb->meta_bitmap_start = sb->inode_bitmap_start + 1;
	sb->meta_bitmap_blocks = 1;
	sb->data_bitmap_start = sb->meta_bitmap_start + 1;
	sb->data_bitmap_blocks = 1;
	sb->nr_inodes = TFS_INODES;
	sb->root_ino = MFS_ROOT_INO;
	sb->free_blocks = data_len;
	sb->free_inodes = TFS_INODES - 1;
	sb->free_meta = mlen - sb->inode_table_blocks - 3;
	sb->journal_seq = 1;
	sb->journal_tail = 0;
}

/* First metadata block free for tests (after the inode table and bitmaps). */
static inline uint64_t tfs_meta0(const struct tfs *t)
{
	return t->fs.sb.data_bitmap_start + 1;
}

static inline int tfs_open_dev(struct tfs *t)
{
	struct blk_dev_config cfg = {.backend = BLK_BACKEND_PMEM, .path = t->img};
	char err[256];
	int ret = blk_dev_open(&cfg, &t->dev, err, sizeof(err));

	if (ret)
		fprintf(stderr, "blk_dev_open: %s\n", err);
	return ret;
}

static inline void tfs_close_dev(struct tfs *t)
{
	blk_dev_close(t->dev);
	t->dev = NULL;
}

/* Write a superblock (both copies) straight to the device. */
static inline int tfs_write_sb(struct blk_dev *dev, const struct mfs_superblock *sb)
{
	struct mfs *tmp = calloc(1, sizeof(*tmp));
	int ret;

	tmp->dev = dev;
	memcpy(&tmp->sb, sb, sizeof(*sb));
	ret = mfs_super_write(tmp);
	free(tmp);
	return ret;
}

/* Create the image (sparse) and its superblock; the device stays open. */
static inline void tfs_create(struct tfs *t, uint64_t nb, uint64_t jlen, uint64_t mlen, bool dup)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	int fd;

	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/mfs-unit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(t->img, sizeof(t->img), "%s/img", t->dir);
	snprintf(t->bb, sizeof(t->bb), "%s.badblocks", t->img);
	fd = open(t->img, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(nb * MFS_BLOCK_SIZE)), 0);
	close(fd);
	t->nb = nb;
	ck_assert_int_eq(tfs_open_dev(t), 0);
	tfs_layout(sb, nb, jlen, mlen, dup);
	ck_assert_int_eq(tfs_write_sb(t->dev, sb), 0);
	memcpy(&t->fs.sb, sb, sizeof(*sb));
	free(sb);
}

/* Mount: superblock, journal replay, cache, journal.  Returns replayed count. */
static inline int tfs_mount(struct tfs *t, unsigned max_bufs)
{
	bool ro, other_bad;
	char err[256];
	int ret, n;

	memset(&t->fs, 0, sizeof(t->fs));
	mfs_events_init(&t->fs.events); /* meta.c posts healed/lost blocks there */
	t->fs.dev = t->dev;
	ret = mfs_super_read(t->dev, &t->fs.sb, &ro, &other_bad, err, sizeof(err));
	ck_assert_msg(ret == 0, "mfs_super_read: %d %s", ret, err);
	n = mfs_journal_replay(t->dev, &t->fs.sb, false, err, sizeof(err));
	ck_assert_msg(n >= 0, "replay: %d %s", n, err);
	ck_assert_int_eq(mfs_cache_init(&t->fs, max_bufs), 0);
	ck_assert_int_eq(mfs_journal_init(&t->fs), 0);
	t->mounted = true;
	return n;
}

/* Unmount without checkpointing (like a crash after the last commit). */
static inline void tfs_umount(struct tfs *t)
{
	if (!t->mounted)
		return;
	mfs_journal_destroy(&t->fs);
	mfs_cache_destroy(&t->fs);
	mfs_events_destroy(&t->fs.events);
	t->mounted = false;
}

static inline void tfs_destroy(struct tfs *t)
{
	tfs_umount(t);
	if (t->dev)
		tfs_close_dev(t);
	unlink(t->img);
	unlink(t->bb);
	rmdir(t->dir);
}

/* Raw block I/O on the open device, bypassing the cache. */
static inline void tfs_read_raw(struct tfs *t, uint64_t blk, void *buf)
{
	ck_assert_int_eq(blk_read(t->dev, blk * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0), 0);
}

static inline void tfs_write_raw(struct tfs *t, uint64_t blk, const void *buf)
{
	ck_assert_int_eq(blk_write(t->dev, blk * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0), 0);
}

/* A sealed metadata block of @type at @blk, payload filled from @val. */
static inline void tfs_make_block(const struct tfs *t, void *buf, uint64_t blk, uint16_t type,
                                  uint64_t val)
{
	struct mfs_meta_hdr *hdr = buf;
	uint64_t *p = buf;
	size_t i;

	memset(buf, 0, MFS_BLOCK_SIZE);
	for (i = sizeof(*hdr) / 8; i < MFS_BLOCK_SIZE / 8; i++)
		p[i] = val * 0x100000001b3ull + i;
	hdr->magic = MFS_META_MAGIC;
	hdr->type = type;
	hdr->blocknr = blk;
	mfs_block_seal(buf, t->fs.sb.csum_seed);
}

/* Write a sealed block through the cache API to both copies. */
static inline void tfs_put_block(struct tfs *t, uint64_t blk, uint16_t type, uint64_t val)
{
	struct mfs_buf *b;

	ck_assert_int_eq(mfs_meta_new(&t->fs, blk, type, 0, &b), 0);
	tfs_make_block(t, b->data, blk, type, val);
	ck_assert_int_eq(mfs_meta_write_inplace(&t->fs, b), 0);
	mfs_buf_put(b);
}

/* The payload value of a block made by tfs_make_block (checks every word). */
static inline bool tfs_block_is(const void *buf, uint64_t val)
{
	const uint64_t *p = buf;
	size_t i;

	for (i = sizeof(struct mfs_meta_hdr) / 8; i < MFS_BLOCK_SIZE / 8; i++)
		if (p[i] != val * 0x100000001b3ull + i)
			return false;
	return true;
}

#endif /* MENDFS_TESTS_TESTFS_H */
