/* SPDX-License-Identifier: MIT */
/*
 * test_namei_ops.c: every namespace operation and its errors: mknod,
 * lookup, unlink, rmdir, hard-link counts, symlinks, setattr; rename of files
 * and directories with NOREPLACE and EXCHANGE, cycles refused.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "namei_util.h"

/* --- basic operations -------------------------------------------------------------- */

START_TEST(test_mknod_lookup)
{
	struct stat st;
	char longname[300];
	uint64_t f, p, s, c, b, d;

	f = mk(ROOT, "file", S_IFREG | 0644);
	p = mk(ROOT, "fifo", S_IFIFO | 0600);
	s = mk(ROOT, "sock", S_IFSOCK | 0600);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "chr", S_IFCHR | 0600, makedev(1, 3), 7, 8, &st), 0);
	c = st.st_ino;
	ck_assert_int_eq(st.st_rdev, makedev(1, 3));
	ck_assert_int_eq(st.st_uid, 7);
	ck_assert_int_eq(st.st_gid, 8);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "blk", S_IFBLK | 0600, makedev(8, 1), 0, 0, &st), 0);
	b = st.st_ino;
	d = mkd(ROOT, "dir");
	ck_assert(f && p && s && c && b && d);

	ck_assert_uint_eq(look(ROOT, "file"), f);
	ck_assert(S_ISREG(getattr(f).st_mode));
	ck_assert_int_eq(getattr(f).st_mode & 07777, 0644);
	ck_assert(S_ISFIFO(getattr(p).st_mode));
	ck_assert(S_ISSOCK(getattr(s).st_mode));
	ck_assert(S_ISCHR(getattr(c).st_mode));
	ck_assert(S_ISBLK(getattr(b).st_mode));
	ck_assert_int_eq(getattr(b).st_rdev, makedev(8, 1));
	ck_assert_int_eq(getattr(f).st_nlink, 1);
	ck_assert_int_eq(getattr(f).st_blksize, 4096);
	ck_assert_uint_eq(getattr(f).st_ino, f);

	/* directories: nlink 2, parent +1, "." and ".." */
	ck_assert_int_eq(nlink(d), 2);
	ck_assert_int_eq(nlink(ROOT), 3);
	ck_assert_uint_eq(look(d, "."), d);
	ck_assert_uint_eq(look(d, ".."), ROOT);
	ck_assert_uint_eq(look(ROOT, ".."), ROOT);
	ck_assert_uint_eq(look(ROOT, "."), ROOT);

	/* errors */
	memset(longname, 'x', 256);
	longname[256] = 0;
	ck_assert_int_eq(mfs_mknod(fs, ROOT, longname, S_IFREG | 0644, 0, 0, 0, &st),
	                 -ENAMETOOLONG);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, longname, &st), -ENAMETOOLONG);
	longname[255] = 0;
	ck_assert_uint_ne(mk(ROOT, longname, S_IFREG | 0644), 0);
	ck_assert_uint_ne(look(ROOT, longname), 0);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "a/b", S_IFREG | 0644, 0, 0, 0, &st), -EINVAL);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "", S_IFREG | 0644, 0, 0, 0, &st), -EINVAL);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "a/b", &st), -EINVAL);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "file", S_IFREG | 0644, 0, 0, 0, &st), -EEXIST);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "file", 0755, 0, 0, &st), -EEXIST);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, ".", 0755, 0, 0, &st), -EEXIST);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "x", S_IFDIR | 0755, 0, 0, 0, &st), -EINVAL);
	ck_assert_int_eq(mfs_mknod(fs, f, "x", S_IFREG | 0644, 0, 0, 0, &st), -ENOTDIR);
	ck_assert_int_eq(mfs_mkdir(fs, f, "x", 0755, 0, 0, &st), -ENOTDIR);
	ck_assert_int_eq(mfs_lookup(fs, f, "x", &st), -ENOTDIR);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "missing", &st), -ENOENT);
	ck_assert_int_eq(mfs_getattr(fs, 999, &st), -ENOENT);

	/* nested */
	ck_assert_uint_ne(mk(d, "inner", S_IFREG | 0600), 0);
	ck_assert_uint_ne(look(d, "inner"), 0);
	ck_assert_uint_eq(look(ROOT, "inner"), 0);
}
END_TEST

START_TEST(test_unlink_rmdir)
{
	struct stat st;
	uint64_t f, d, e, before = ffree();
	int64_t mt;

	f = mk(ROOT, "f", S_IFREG | 0644);
	d = mkd(ROOT, "d");
	e = mkd(d, "e");
	ck_assert_int_eq(nlink(d), 3);
	ck_assert_int_eq(ffree(), before - 3);

	ck_assert_int_eq(mfs_unlink(fs, ROOT, "d"), -EISDIR);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "f"), -ENOTDIR);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "d"), -ENOTEMPTY);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "nope"), -ENOENT);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "nope"), -ENOENT);
	ck_assert_int_eq(mfs_rmdir(fs, d, "."), -EINVAL);
	ck_assert_int_eq(mfs_rmdir(fs, d, ".."), -ENOTEMPTY);
	ck_assert_int_eq(mfs_unlink(fs, f, "x"), -ENOTDIR);

	mt = getattr(ROOT).st_mtim.tv_sec * 1000000000ll + getattr(ROOT).st_mtim.tv_nsec;
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_ge(
	        getattr(ROOT).st_mtim.tv_sec * 1000000000ll + getattr(ROOT).st_mtim.tv_nsec, mt);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_int_eq(mfs_rmdir(fs, d, "e"), 0);
	ck_assert_int_eq(mfs_getattr(fs, e, &st), -ENOENT);
	ck_assert_int_eq(nlink(d), 2);
	ck_assert_int_eq(nlink(ROOT), 3);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "d"), 0);
	ck_assert_int_eq(nlink(ROOT), 2);
	ck_assert_int_eq(ffree(), before);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "d", &st), -ENOENT);
}
END_TEST

START_TEST(test_hard_links)
{
	struct stat st;
	uint64_t f, d, before;

	f = mk(ROOT, "f", S_IFREG | 0644);
	d = mkd(ROOT, "d");
	before = ffree();
	ck_assert_int_eq(mfs_link(fs, f, d, "g", &st), 0);
	ck_assert_uint_eq(st.st_ino, f);
	ck_assert_int_eq(st.st_nlink, 2);
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "h", &st), 0);
	ck_assert_int_eq(nlink(f), 3);
	ck_assert_uint_eq(look(d, "g"), f);
	ck_assert_uint_eq(look(ROOT, "h"), f);
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "h", &st), -EEXIST);
	ck_assert_int_eq(mfs_link(fs, d, ROOT, "dd", &st), -EPERM);
	ck_assert_int_eq(mfs_link(fs, f, f, "x", &st), -ENOTDIR);
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "a/b", &st), -EINVAL);
	ck_assert_int_eq(ffree(), before);

	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_eq(nlink(f), 2);
	ck_assert_int_eq(mfs_unlink(fs, d, "g"), 0);
	ck_assert_int_eq(nlink(f), 1);
	remount();
	ck_assert_int_eq(nlink(f), 1);
	ck_assert_uint_eq(look(ROOT, "h"), f);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "h"), 0);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_int_eq(ffree(), before + 1);
}
END_TEST

START_TEST(test_symlinks)
{
	char target[4200], buf[4200];
	struct stat st;
	uint64_t s1, s2, s3, f, blocks = bfree();

	ck_assert_int_eq(mfs_symlink(fs, ROOT, "short", "a/b/c", 0, 0, &st), 0);
	s1 = st.st_ino;
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(st.st_size, 5);
	memset(target, 'y', sizeof(target));
	target[96] = 0;
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "inline96", target, 0, 0, &st), 0);
	s2 = st.st_ino;
	target[96] = 'y';
	target[4095] = 0;
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "long", target, 0, 0, &st), 0);
	s3 = st.st_ino;
	ck_assert_int_eq(st.st_size, 4095);
	ck_assert_int_eq(bfree(), blocks - 1);
	target[4095] = 'y';
	target[4096] = 0;
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "toolong", target, 0, 0, &st), -ENAMETOOLONG);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "empty", "", 0, 0, &st), -ENOENT);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "short", "x", 0, 0, &st), -EEXIST);

	remount();
	ck_assert_int_eq(mfs_readlink(fs, s1, buf, sizeof(buf)), 5);
	ck_assert_int_eq(memcmp(buf, "a/b/c", 5), 0);
	ck_assert_int_eq(mfs_readlink(fs, s1, buf, 3), 3);
	ck_assert_int_eq(mfs_readlink(fs, s2, buf, sizeof(buf)), 96);
	ck_assert_int_eq(mfs_readlink(fs, s3, buf, sizeof(buf)), 4095);
	for (int i = 0; i < 4095; i++)
		ck_assert_int_eq(buf[i], 'y');
	f = mk(ROOT, "f", S_IFREG | 0644);
	ck_assert_int_eq(mfs_readlink(fs, f, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "long"), 0);
	ck_assert_int_eq(bfree(), blocks);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "short"), 0);
	ck_assert_int_eq(mfs_readlink(fs, s1, buf, sizeof(buf)), -ENOENT);
}
END_TEST

START_TEST(test_setattr)
{
	struct stat in = {0}, st;
	uint64_t f, d;
	int64_t c0;

	f = mk(ROOT, "f", S_IFREG | 06755);
	d = mkd(ROOT, "d");
	c0 = getattr(f).st_ctim.tv_sec * 1000000000ll + getattr(f).st_ctim.tv_nsec;

	in.st_mode = 0600;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_MODE, &st), 0);
	ck_assert_int_eq(st.st_mode, S_IFREG | 0600);
	ck_assert_int_ge(st.st_ctim.tv_sec * 1000000000ll + st.st_ctim.tv_nsec, c0);

	/* chown drops setuid, and setgid when group-exec */
	in.st_mode = 06755;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_MODE, &st), 0);
	in.st_uid = 42;
	in.st_gid = 43;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_UID | MFS_SET_GID, &st), 0);
	ck_assert_int_eq(st.st_uid, 42);
	ck_assert_int_eq(st.st_gid, 43);
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	in.st_mode = 02745; /* setgid without group-exec stays */
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_MODE, &st), 0);
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_UID, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 02745);
	in.st_mode = 06755;
	ck_assert_int_eq(mfs_setattr(fs, d, &in, MFS_SET_MODE, &st), 0);
	ck_assert_int_eq(mfs_setattr(fs, d, &in, MFS_SET_UID, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 06755);

	/* times */
	in.st_atim.tv_sec = 1000;
	in.st_atim.tv_nsec = 5;
	in.st_mtim.tv_sec = 2000;
	in.st_mtim.tv_nsec = 7;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_ATIME | MFS_SET_MTIME, &st), 0);
	ck_assert_int_eq(st.st_atim.tv_sec, 1000);
	ck_assert_int_eq(st.st_atim.tv_nsec, 5);
	ck_assert_int_eq(st.st_mtim.tv_sec, 2000);
	ck_assert_int_eq(st.st_mtim.tv_nsec, 7);
	ck_assert_int_gt(st.st_ctim.tv_sec, 2000);
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_ATIME_NOW | MFS_SET_MTIME_NOW, &st), 0);
	ck_assert_int_gt(st.st_atim.tv_sec, 1000000);
	ck_assert_int_gt(st.st_mtim.tv_sec, 1000000);

	/* size */
	in.st_size = 10000;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_SIZE, &st), 0);
	ck_assert_int_eq(st.st_size, 10000);
	ck_assert_int_eq(mfs_write(fs, f, "hello", 5, 0), 5);
	in.st_size = 2;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_SIZE, &st), 0);
	ck_assert_int_eq(st.st_size, 2);
	ck_assert_int_eq(mfs_setattr(fs, d, &in, MFS_SET_SIZE, &st), -EISDIR);
	ck_assert_int_eq(mfs_setattr(fs, 4000, &in, MFS_SET_MODE, &st), -ENOENT);
	remount();
	st = getattr(f);
	ck_assert_int_eq(st.st_size, 2);
	ck_assert_int_eq(st.st_uid, 42);
	ck_assert_int_eq(st.st_mode & 07777, 02745);
}
END_TEST

/* --- rename -------------------------------------------------------------------------- */

START_TEST(test_rename_files)
{
	struct stat st;
	uint64_t a, b, c, d, before;

	a = mk(ROOT, "a", S_IFREG | 0644);
	b = mk(ROOT, "b", S_IFREG | 0644);
	d = mkd(ROOT, "d");
	before = ffree();

	ck_assert_int_eq(mfs_rename(fs, ROOT, "a", ROOT, "a2", 0), 0);
	ck_assert_uint_eq(look(ROOT, "a2"), a);
	ck_assert_uint_eq(look(ROOT, "a"), 0);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "a2", d, "a3", 0), 0);
	ck_assert_uint_eq(look(d, "a3"), a);
	ck_assert_uint_eq(look(ROOT, "a2"), 0);
	ck_assert_int_eq(nlink(d), 2);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "nope", ROOT, "x", 0), -ENOENT);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "b", 0), 0);
	ck_assert_uint_eq(look(ROOT, "b"), b);

	/* over an existing file: the victim is freed */
	ck_assert_int_eq(mfs_rename(fs, d, "a3", ROOT, "b", RENAME_NOREPLACE), -EEXIST);
	ck_assert_int_eq(mfs_rename(fs, d, "a3", ROOT, "b", 0), 0);
	ck_assert_uint_eq(look(ROOT, "b"), a);
	ck_assert_int_eq(mfs_getattr(fs, b, &st), -ENOENT);
	ck_assert_int_eq(ffree(), before + 1);

	/* exchange */
	c = mk(ROOT, "c", S_IFREG | 0644);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "c", RENAME_EXCHANGE), 0);
	ck_assert_uint_eq(look(ROOT, "b"), c);
	ck_assert_uint_eq(look(ROOT, "c"), a);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "zz", RENAME_EXCHANGE), -ENOENT);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "zz", ROOT, "b", RENAME_EXCHANGE), -ENOENT);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "c", RENAME_EXCHANGE | RENAME_NOREPLACE),
	                 -EINVAL);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "c", 1u << 7), -EINVAL);

	/* hard links of one inode: rename is a no-op */
	ck_assert_int_eq(mfs_link(fs, c, ROOT, "c2", &st), 0);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "c2", 0), 0);
	ck_assert_uint_eq(look(ROOT, "b"), c);
	ck_assert_uint_eq(look(ROOT, "c2"), c);
	ck_assert_int_eq(nlink(c), 2);

	/* name errors */
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "x/y", 0), -EINVAL);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", ROOT, "..", 0), -EINVAL);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "b", c, "x", 0), -ENOTDIR);
	remount();
	ck_assert_uint_eq(look(ROOT, "b"), c);
	ck_assert_uint_eq(look(ROOT, "c"), a);
}
END_TEST

START_TEST(test_rename_dirs)
{
	struct stat st;
	uint64_t a, b, c, e, f, g, x;

	a = mkd(ROOT, "a");
	b = mkd(a, "b");
	c = mkd(ROOT, "c");
	f = mk(ROOT, "f", S_IFREG | 0644);
	ck_assert_int_eq(nlink(ROOT), 4);
	ck_assert_int_eq(nlink(a), 3);

	/* move a directory: "..", link counts */
	ck_assert_int_eq(mfs_rename(fs, a, "b", c, "b", 0), 0);
	ck_assert_uint_eq(look(c, "b"), b);
	ck_assert_uint_eq(look(b, ".."), c);
	ck_assert_int_eq(nlink(a), 2);
	ck_assert_int_eq(nlink(c), 3);

	/* cycles */
	ck_assert_int_eq(mfs_rename(fs, ROOT, "c", b, "c", 0), -EINVAL);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "c", c, "c", 0), -EINVAL);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "c", b, "x", RENAME_NOREPLACE), -EINVAL);
	x = mk(b, "x", S_IFREG | 0644);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "c", b, "x", RENAME_EXCHANGE), -EINVAL);
	ck_assert_uint_eq(look(b, "x"), x);

	/* type rules */
	ck_assert_int_eq(mfs_rename(fs, ROOT, "f", ROOT, "a", 0), -EISDIR);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "a", ROOT, "f", 0), -ENOTDIR);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "a", ROOT, "c", 0), -ENOTEMPTY);

	/* over an empty directory */
	e = mkd(ROOT, "e");
	ck_assert_int_eq(nlink(ROOT), 5);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "a", ROOT, "e", 0), 0);
	ck_assert_uint_eq(look(ROOT, "e"), a);
	ck_assert_int_eq(mfs_getattr(fs, e, &st), -ENOENT);
	ck_assert_int_eq(nlink(ROOT), 4);
	/* a directory over an empty directory in another parent */
	g = mkd(b, "g");
	ck_assert_int_eq(nlink(b), 3);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "e", b, "g", 0), 0);
	ck_assert_uint_eq(look(b, "g"), a);
	ck_assert_uint_eq(look(a, ".."), b);
	ck_assert_int_eq(mfs_getattr(fs, g, &st), -ENOENT);
	ck_assert_int_eq(nlink(b), 3);
	ck_assert_int_eq(nlink(ROOT), 3);

	/* exchange directories across parents */
	e = mkd(ROOT, "e");
	ck_assert_int_eq(mfs_rename(fs, ROOT, "e", b, "g", RENAME_EXCHANGE), 0);
	ck_assert_uint_eq(look(ROOT, "e"), a);
	ck_assert_uint_eq(look(b, "g"), e);
	ck_assert_uint_eq(look(a, ".."), ROOT);
	ck_assert_uint_eq(look(e, ".."), b);
	ck_assert_int_eq(nlink(ROOT), 4);
	ck_assert_int_eq(nlink(b), 3);

	/* exchange a file and a directory across parents */
	ck_assert_int_eq(mfs_rename(fs, ROOT, "f", b, "g", RENAME_EXCHANGE), 0);
	ck_assert_uint_eq(look(ROOT, "f"), e);
	ck_assert_uint_eq(look(b, "g"), f);
	ck_assert_uint_eq(look(e, ".."), ROOT);
	ck_assert_int_eq(nlink(ROOT), 5);
	ck_assert_int_eq(nlink(b), 2);
	ck_assert(S_ISDIR(getattr(look(ROOT, "f")).st_mode));

	remount();
	ck_assert_uint_eq(look(ROOT, "f"), e);
	ck_assert_uint_eq(look(b, "g"), f);
	ck_assert_uint_eq(look(e, ".."), ROOT);
	ck_assert_int_eq(nlink(ROOT), 5);
	ck_assert_int_eq(nlink(b), 2);
	ck_assert_int_eq(nlink(c), 3);
}
END_TEST

void namei_ops_tests(TCase *tc)
{
	tcase_add_test(tc, test_mknod_lookup);
	tcase_add_test(tc, test_unlink_rmdir);
	tcase_add_test(tc, test_hard_links);
	tcase_add_test(tc, test_symlinks);
	tcase_add_test(tc, test_setattr);
	tcase_add_test(tc, test_rename_files);
	tcase_add_test(tc, test_rename_dirs);
}
