/* SPDX-License-Identifier: MIT */
/*
 * The helpers of the file data tests (test_file.c, test_openfile.c) over the
 * mounted image of fixture.h: an inode's copy, size and blocks, its block
 * map, truncate, a pattern, a write that must be whole, a read that must
 * match.  Static inline: each program has its own fixture.
 */
#ifndef MENDFS_TESTS_FILE_UTIL_H
#define MENDFS_TESTS_FILE_UTIL_H

#include <endian.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

#define BS MFS_BLOCK_SIZE

/* A copy of @ino's inode as the filesystem holds it. */
static inline struct mfs_inode dinode(uint64_t ino)
{
	struct mfs_ino *ip;
	struct mfs_inode di;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	di = ip->di;
	mfs_iput(fs, ip);
	return di;
}

static inline uint64_t fsize(uint64_t ino)
{
	return le64toh(dinode(ino).size);
}

static inline uint64_t fblocks(uint64_t ino)
{
	return le64toh(dinode(ino).blocks);
}

static inline void bmap(uint64_t ino, uint64_t lblk, uint64_t *pblk, uint64_t *count,
                        bool *unwritten)
{
	struct mfs_ino *ip;
	uint64_t c;
	bool u;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	pthread_rwlock_rdlock(&ip->lock);
	ck_assert_int_eq(
	        mfs_bmap(fs, ip, lblk, pblk, count ? count : &c, unwritten ? unwritten : &u), 0);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
}

/* Number of extents mapping [0, nblk). */
static inline unsigned extents(uint64_t ino, uint64_t nblk)
{
	uint64_t lblk = 0, pblk, count;
	unsigned n = 0;

	while (lblk < nblk) {
		bmap(ino, lblk, &pblk, &count, NULL);
		if (pblk)
			n++;
		lblk += count;
	}
	return n;
}

static inline int truncate_to(uint64_t ino, uint64_t size)
{
	struct mfs_ino *ip;
	int ret;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	pthread_rwlock_wrlock(&ip->lock);
	ret = mfs_truncate(fs, ip, size);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

static inline void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((seed * 131 + i * 7 + (i >> 9)) ^ (i >> 13));
}

static inline void write_all(uint64_t ino, const void *buf, size_t len, uint64_t off)
{
	ssize_t n = mfs_write(fs, ino, buf, len, (off_t)off);

	ck_assert_msg(n == (ssize_t)len, "write %zu at %llu: %zd", len, (unsigned long long)off, n);
}

static inline void check_read(uint64_t ino, const uint8_t *ref, size_t len, uint64_t off)
{
	uint8_t *buf = malloc(len + 1);
	ssize_t n = mfs_read(fs, ino, buf, len, (off_t)off);

	ck_assert_msg(n == (ssize_t)len, "read %zu at %llu: %zd", len, (unsigned long long)off, n);
	/* one assertion per call, not per byte: Check records every assertion it passes */
	if (memcmp(buf, ref, len)) {
		size_t i = 0;

		while (buf[i] == ref[i])
			i++;
		ck_assert_msg(0, "byte %llu: %#x, expected %#x", (unsigned long long)(off + i),
		              buf[i], ref[i]);
	}
	free(buf);
}

static inline bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

#endif
