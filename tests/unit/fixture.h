/* SPDX-License-Identifier: MIT */
/*
 * fixture.h: the set-up of the unit tests that run the whole filesystem on a
 * real image (acl, alloc, atime, bigfs, file, readdirect, space, truncate,
 * xattr): a fresh directory, an image made there by the built mkfs.mendfs
 * (mkfs_run.h), mounted with mfs_mount(); files in its root; and the main of
 * a Check program.  The test sees the directory as `dir`, the image as
 * `img` and the mounted filesystem as `fs` (NULL when unmounted).
 */
#ifndef MENDFS_TESTS_FIXTURE_H
#define MENDFS_TESTS_FIXTURE_H

#include <check.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check_run.h"
#include "mfs_int.h"
#include "mkfs_run.h"

static char dir[PATH_MAX], img[PATH_MAX + 16];
static struct mfs *fs;

/* Make a fresh directory @base/mendfs-@tag-XXXXXX; img names the image fixture_mkfs makes. */
static inline void fixture_dir(const char *base, const char *tag)
{
	snprintf(dir, sizeof(dir), "%s/mendfs-%s-XXXXXX", base, tag);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
}

/* mkfs.mendfs -q -f @opts img @size */
static inline void fixture_mkfs(const char *opts, const char *size)
{
	char args[sizeof(img) + 128];

	snprintf(args, sizeof(args), "%s '%s' %s", opts, img, size);
	mkfs_run(args);
}

/* Mount img with @o (NULL: the defaults) into fs; asserts that it mounts. */
static inline void fixture_mount(const struct mfs_mount_opts *o)
{
	char err[256] = "";
	int ret = mfs_mount(img, o, &fs, err, sizeof(err));

	ck_assert_msg(ret == 0, "mfs_mount: %d %s", ret, err);
}

/* A clean unmount, which must succeed. */
static inline void fixture_umount(void)
{
	ck_assert_int_eq(mfs_unmount(fs), 0);
	fs = NULL;
}

static inline int fixture_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Delete dir and all in it (the test unmounts first, as it sees fit). */
static inline void fixture_remove(void)
{
	if (dir[0])
		ck_assert_int_eq(nftw(dir, fixture_rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
	dir[0] = 0;
}

/*
 * The usual fixture's set-up: a fresh directory under /tmp (mendfs-@tag-XXXXXX),
 * an image of @size made there with mkfs options @opts, mounted with the defaults.
 */
static inline void fixture_create(const char *tag, const char *opts, const char *size)
{
	fixture_dir("/tmp", tag);
	fixture_mkfs(opts, size);
	fixture_mount(NULL);
}

/* Unmount and mount again with the defaults; both must succeed. */
static inline void fixture_remount(void)
{
	fixture_umount();
	fixture_mount(NULL);
}

/*
 * The usual fixture's teardown: unmount if mounted (not checked: a test that
 * cares unmounts itself with fixture_umount()), then delete dir.
 */
static inline void fixture_teardown(void)
{
	if (fs)
		mfs_unmount(fs);
	fs = NULL;
	fixture_remove();
}

/* A new empty regular file @name (mode 0644) in the root; returns its inode number. */
static inline uint64_t fixture_file(const char *name)
{
	struct stat st;
	int ret = mfs_mknod(fs, MFS_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &st);

	ck_assert_msg(ret == 0, "mknod %s: %d", name, ret);
	return st.st_ino;
}

/* A copy of the on-disk inode of @ino, as the inode cache holds it. */
static inline struct mfs_inode fixture_dinode(uint64_t ino)
{
	struct mfs_inode di;
	struct mfs_ino *ip;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	pthread_rwlock_rdlock(&ip->lock);
	di = ip->di;
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return di;
}

#endif /* MENDFS_TESTS_FIXTURE_H */
