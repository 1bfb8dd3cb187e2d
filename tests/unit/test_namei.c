/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of mount, the inode cache and the namespace operations
 * (fs/core/mount.c, fs/core/inode.c, fs/core/namei.c) on images made by the built
 * mkfs.mendfs ($MKFS_MENDFS) and mounted with mfs_mount().
 *
 * Every operation and its errors; hard-link counts; rename of files and
 * directories with NOREPLACE and EXCHANGE, cycles refused; a directory of
 * 100 000 entries (1 000 000 with MFS_LONG=1): create, look up, list exactly
 * once, delete; readdir cursors stable across inserts and deletes;
 * persistence across unmount/mount; inode exhaustion and recovery; an
 * unlinked open inode freed at its last reference, or after a crash by the
 * orphan list at the next mount; read-only mounts refuse changes and write
 * nothing.
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

#include "mfs_int.h"
#include "mkfs_run.h"

#define ROOT MFS_ROOT_INO

static char dir[64], img[128];
static struct mfs *fs;

static void mkfs_image(const char *args)
{
	mkfs_run(args);
}

static int mount_opts(bool ro, char *err, size_t errlen)
{
	struct mfs_mount_opts o = {.read_only = ro, .exclusive = true};

	return mfs_mount(img, &o, &fs, err, errlen);
}

static void mount_fs(void)
{
	char err[256] = "";
	int ret = mount_opts(false, err, sizeof(err));

	ck_assert_msg(ret == 0, "mount: %d %s", ret, err);
}

static void umount_fs(void)
{
	ck_assert_int_eq(mfs_unmount(fs), 0);
	fs = NULL;
}

static void remount(void)
{
	umount_fs();
	mount_fs();
}

static void make_dir_img(void)
{
	snprintf(dir, sizeof(dir), "/tmp/mendfs-namei-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
}

static void setup_args(const char *extra, const char *size)
{
	char args[512];

	make_dir_img();
	snprintf(args, sizeof(args), "%s '%s' %s", extra, img, size);
	mkfs_image(args);
	mount_fs();
}

static void setup(void)
{
	setup_args("", "64M");
}

static void teardown(void)
{
	char cmd[128];

	if (fs)
		umount_fs();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* --- helpers ------------------------------------------------------------------------ */

static uint64_t mk(uint64_t d, const char *name, mode_t mode)
{
	struct stat st;
	int ret = mfs_mknod(fs, d, name, mode, 0, 0, 0, &st);

	ck_assert_msg(ret == 0, "mknod %s: %d", name, ret);
	return st.st_ino;
}

static uint64_t mkd(uint64_t d, const char *name)
{
	struct stat st;
	int ret = mfs_mkdir(fs, d, name, 0755, 0, 0, &st);

	ck_assert_msg(ret == 0, "mkdir %s: %d", name, ret);
	ck_assert(S_ISDIR(st.st_mode));
	return st.st_ino;
}

static uint64_t look(uint64_t d, const char *name)
{
	struct stat st;
	int ret = mfs_lookup(fs, d, name, &st);

	return ret ? 0 : st.st_ino;
}

static struct stat getattr(uint64_t ino)
{
	struct stat st;

	ck_assert_int_eq(mfs_getattr(fs, ino, &st), 0);
	return st;
}

static nlink_t nlink(uint64_t ino)
{
	return getattr(ino).st_nlink;
}

static uint64_t ffree(void)
{
	struct statvfs sv;

	ck_assert_int_eq(mfs_statfs(fs, &sv), 0);
	return sv.f_ffree;
}

static uint64_t bfree(void)
{
	struct statvfs sv;

	ck_assert_int_eq(mfs_statfs(fs, &sv), 0);
	return sv.f_bfree;
}

/* readdir into a list of names (with their cookies), optionally stopping after @max. */
struct listing {
	char (*name)[256];
	uint64_t *ino, *cookie;
	size_t n, cap, max;
};

static int list_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype,
                   uint64_t next)
{
	struct listing *l = arg;

	(void)dtype;
	if (l->max && l->n >= l->max)
		return 1;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->name = realloc(l->name, l->cap * sizeof(*l->name));
		l->ino = realloc(l->ino, l->cap * sizeof(*l->ino));
		l->cookie = realloc(l->cookie, l->cap * sizeof(*l->cookie));
	}
	memcpy(l->name[l->n], name, len);
	l->name[l->n][len] = 0;
	l->ino[l->n] = ino;
	l->cookie[l->n] = next;
	l->n++;
	return 0;
}

static void list_free(struct listing *l)
{
	free(l->name);
	free(l->ino);
	free(l->cookie);
	memset(l, 0, sizeof(*l));
}

static bool listed(const struct listing *l, const char *name, uint64_t *ino)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name)) {
			if (ino)
				*ino = l->ino[i];
			return true;
		}
	return false;
}

static uint64_t file_hash(const char *path)
{
	XXH3_state_t *s = XXH3_createState();
	char buf[1 << 16];
	ssize_t n;
	int fd = open(path, O_RDONLY);
	uint64_t h;

	ck_assert_int_ge(fd, 0);
	XXH3_64bits_reset(s);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		XXH3_64bits_update(s, buf, (size_t)n);
	close(fd);
	h = XXH3_64bits_digest(s);
	XXH3_freeState(s);
	return h;
}

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

/* --- readdir ------------------------------------------------------------------------- */

START_TEST(test_readdir_basic)
{
	struct listing l = {0};
	uint64_t d, ino;
	char name[32];
	int i;

	d = mkd(ROOT, "d");
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		mk(d, name, S_IFREG | 0644);
	}
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 302);
	ck_assert_str_eq(l.name[0], ".");
	ck_assert_uint_eq(l.ino[0], d);
	ck_assert_uint_eq(l.cookie[0], 1);
	ck_assert_str_eq(l.name[1], "..");
	ck_assert_uint_eq(l.ino[1], ROOT);
	ck_assert_uint_eq(l.cookie[1], 2);
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		ck_assert(listed(&l, name, &ino));
		ck_assert_uint_eq(ino, look(d, name));
	}
	for (size_t k = 2; k + 1 < l.n; k++)
		ck_assert_uint_lt(l.cookie[k], l.cookie[k + 1]);
	ck_assert_uint_ge(l.cookie[2], 65536);
	list_free(&l);
	/* resuming at each cookie gives the rest */
	l.max = 0;
	ck_assert_int_eq(mfs_readdir(fs, d, 2, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 300);
	list_free(&l);
	ck_assert_int_eq(mfs_readdir(fs, look(d, "n000"), 0, list_fn, &l), -ENOTDIR);
	list_free(&l);
}
END_TEST

START_TEST(test_readdir_stable)
{
	enum { N = 3000 };
	static int seen[2 * N];
	struct listing l = {0};
	uint64_t d, pos;
	char name[32];
	size_t i;
	int k;

	memset(seen, 0, sizeof(seen));
	d = mkd(ROOT, "d");
	for (k = 0; k < N; k++) {
		snprintf(name, sizeof(name), "s%05d", k);
		mk(d, name, S_IFREG | 0644);
	}
	/* the first half of the listing */
	l.max = 2 + N / 2;
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 2 + N / 2);
	pos = l.cookie[l.n - 1];
	for (i = 2; i < l.n; i++)
		seen[atoi(l.name[i] + 1)]++;
	list_free(&l);
	/* churn: delete every third entry (seen or not), insert as many new ones */
	for (k = 0; k < N; k += 3) {
		snprintf(name, sizeof(name), "s%05d", k);
		ck_assert_int_eq(mfs_unlink(fs, d, name), 0);
		snprintf(name, sizeof(name), "s%05d", N + k);
		mk(d, name, S_IFREG | 0644);
	}
	/* the rest, in small batches */
	for (;;) {
		l.max = 97;
		ck_assert_int_eq(mfs_readdir(fs, d, pos, list_fn, &l), 0);
		if (!l.n)
			break;
		for (i = 0; i < l.n; i++)
			seen[atoi(l.name[i] + 1)]++;
		pos = l.cookie[l.n - 1];
		list_free(&l);
	}
	list_free(&l);
	for (k = 0; k < 2 * N; k++) {
		ck_assert_msg(seen[k] <= 1, "entry %d returned %d times", k, seen[k]);
		if (k < N && k % 3)
			ck_assert_msg(seen[k] == 1, "entry %d present throughout was skipped", k);
	}
}
END_TEST

/* Put a raw entry named @name at @key in directory @d (a simulated hash collision). */
static void raw_entry(uint64_t d, uint64_t key, const char *name, uint64_t target, bool add)
{
	uint8_t val[10 + 255];
	struct mfs_ino *dp;
	struct mfs_txn *txn;
	struct mfs_btree bt;
	size_t len = strlen(name);

	ck_assert_int_eq(mfs_iget(fs, d, &dp), 0);
	pthread_rwlock_wrlock(&dp->lock);
	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	bt = (struct mfs_btree){.root = dp->di.dir_root,
	                        .depth = dp->di.dir_depth,
	                        .kind = MFS_TREE_DIR,
	                        .owner = d};
	if (add) {
		memcpy(val, &target, 8);
		val[8] = DT_REG;
		val[9] = (uint8_t)len;
		memcpy(val + 10, name, len);
		ck_assert_int_eq(mfs_bt_insert(fs, txn, &bt, key, val, (uint16_t)(10 + len)), 0);
		dp->di.dir_entries++;
	} else {
		ck_assert_int_eq(mfs_bt_delete(fs, txn, &bt, key), 0);
		dp->di.dir_entries--;
	}
	dp->di.dir_root = bt.root;
	dp->di.dir_depth = bt.depth;
	ck_assert_int_eq(mfs_inode_write(fs, txn, dp), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	pthread_rwlock_unlock(&dp->lock);
	mfs_iput(fs, dp);
}

static int cookie_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype,
                     uint64_t next)
{
	uint64_t *want = arg;

	(void)ino;
	(void)dtype;
	if (len == 5 && !memcmp(name, "alpha", 5))
		*want = next;
	return 0;
}

START_TEST(test_collisions)
{
	uint64_t d, f, a, base, cookie = 0;
	struct listing l = {0};

	d = mkd(ROOT, "c");
	f = mk(ROOT, "target", S_IFREG | 0644);
	base = XXH3_64bits_withSeed("alpha", 5, fs->sb.dir_hash_seed) & 0x7fffffffffff0000ull;
	if (!base)
		base = 0x10000;
	/* counters 0 and 2 taken by other names with the same 47 hash bits: "alpha" gets 1 */
	raw_entry(d, base, "other0", f, true);
	raw_entry(d, base | 2, "other2", f, true);
	a = mk(d, "alpha", S_IFREG | 0644);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, cookie_fn, &cookie), 0);
	ck_assert_uint_eq(cookie, base | 1);
	ck_assert_uint_eq(look(d, "alpha"), a);
	ck_assert_int_eq(mfs_mknod(fs, d, "alpha", S_IFREG | 0644, 0, 0, 0, NULL), -EEXIST);
	/* the lowest free counter after a delete; lookups scan past the gap */
	ck_assert_int_eq(mfs_unlink(fs, d, "alpha"), 0);
	raw_entry(d, base, "other0", f, false);
	a = mk(d, "alpha", S_IFREG | 0644);
	cookie = 0;
	ck_assert_int_eq(mfs_readdir(fs, d, 0, cookie_fn, &cookie), 0);
	ck_assert_uint_eq(cookie, base);
	raw_entry(d, base | 1, "other1", f, true);
	raw_entry(d, base, "alpha-moved", a, false);
	raw_entry(d, base | 3, "alpha", a, true);
	ck_assert_uint_eq(look(d, "alpha"), a);
	ck_assert_int_eq(mfs_rename(fs, d, "alpha", ROOT, "alpha", 0), 0);
	ck_assert_uint_eq(look(ROOT, "alpha"), a);
	ck_assert_uint_eq(look(d, "alpha"), 0);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 4); /* ".", "..", other1, other2 */
	list_free(&l);
	raw_entry(d, base | 1, "other1", f, false);
	raw_entry(d, base | 2, "other2", f, false);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "c"), 0);
}
END_TEST

/* --- persistence, ENOSPC, orphans, read-only ------------------------------------------------ */

START_TEST(test_persistence)
{
	struct listing l = {0};
	uint64_t d, e, f, s;
	struct stat st;
	char buf[64];

	d = mkd(ROOT, "d");
	e = mkd(d, "e");
	f = mk(e, "f", S_IFREG | 0640);
	ck_assert_int_eq(mfs_symlink(fs, d, "s", "../x", 5, 6, &st), 0);
	s = st.st_ino;
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "f2", &st), 0);
	remount();
	remount();
	ck_assert_uint_eq(look(ROOT, "d"), d);
	ck_assert_uint_eq(look(d, "e"), e);
	ck_assert_uint_eq(look(e, "f"), f);
	ck_assert_uint_eq(look(ROOT, "f2"), f);
	ck_assert_uint_eq(look(d, "s"), s);
	ck_assert_uint_eq(look(e, ".."), d);
	ck_assert_int_eq(nlink(f), 2);
	ck_assert_int_eq(nlink(d), 3);
	ck_assert_int_eq(getattr(f).st_mode, S_IFREG | 0640);
	ck_assert_int_eq(mfs_readlink(fs, s, buf, sizeof(buf)), 4);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 4);
	list_free(&l);
	ck_assert_int_eq(fs->sb.mount_count, 3);
	{
		struct statvfs sv;

		ck_assert_int_eq(mfs_statfs(fs, &sv), 0);
		ck_assert_uint_eq(sv.f_bsize, 4096);
		ck_assert_uint_eq(sv.f_namemax, 255);
		ck_assert_uint_eq(sv.f_blocks, fs->sb.data_len);
		ck_assert_uint_eq(sv.f_files, fs->sb.nr_inodes);
		ck_assert_uint_eq(sv.f_ffree, fs->sb.nr_inodes - 5);
		ck_assert_uint_le(sv.f_bfree, sv.f_blocks);
		ck_assert_uint_ne(sv.f_fsid, 0);
	}
	ck_assert_uint_eq(fs->sb.state & MFS_STATE_DIRTY, MFS_STATE_DIRTY);
}
END_TEST

START_TEST(test_enospc_inodes)
{
	struct stat st;
	char name[32];
	uint64_t nr, made = 0, meta;
	int ret, k;

	teardown();
	setup_args("-N 16", "32M");
	nr = fs->sb.nr_inodes;
	ck_assert_uint_eq(ffree(), nr - 1);
	meta = fs->sb.free_meta;
	for (k = 0;; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		ret = k % 4 == 3 ? mfs_mkdir(fs, ROOT, name, 0755, 0, 0, &st)
		                 : mfs_mknod(fs, ROOT, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
		made++;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_uint_eq(made, nr - 1);
	ck_assert_uint_eq(ffree(), 0);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "sl", "t", 0, 0, &st), -ENOSPC);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "dd", 0755, 0, 0, &st), -ENOSPC);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "sl", &st), -ENOENT);
	/* still consistent and usable */
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f0"), 0);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "f3"), 0);
	ck_assert_uint_eq(ffree(), 2);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "sl", "t", 0, 0, &st), 0);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "dd", 0755, 0, 0, &st), 0);
	ck_assert_uint_eq(ffree(), 0);
	remount();
	ck_assert_uint_eq(ffree(), 0);
	ck_assert_uint_ne(look(ROOT, "sl"), 0);
	ck_assert_uint_ne(look(ROOT, "dd"), 0);
	for (k = 1; k < (int)made; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		if (k == 3)
			continue;
		ck_assert_msg(look(ROOT, name) != 0, "%s lost", name);
	}
	for (k = 1; k < (int)made; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		if (k == 3)
			continue;
		ck_assert_int_eq(
		        k % 4 == 3 ? mfs_rmdir(fs, ROOT, name) : mfs_unlink(fs, ROOT, name), 0);
	}
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "sl"), 0);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "dd"), 0);
	ck_assert_uint_eq(ffree(), nr - 1);
	ck_assert_uint_eq(fs->sb.free_meta, meta);
	ck_assert_int_eq(nlink(ROOT), 2);
}
END_TEST

/* The generation of inode @ino (0 if it cannot be read). */
static uint64_t generation(uint64_t ino)
{
	struct mfs_ino *ip;
	uint64_t gen;

	if (mfs_iget(fs, ino, &ip))
		return 0;
	gen = ip->di.generation;
	mfs_iput(fs, ip);
	return gen;
}

/* Set the generation kept in free inode slot @ino, as a delete long ago would have left it. */
static void slot_set_generation(uint64_t ino, uint64_t gen)
{
	uint64_t blk = fs->sb.inode_table_start + (ino - 1) / MFS_INODES_PER_BLOCK;
	size_t off = sizeof(struct mfs_meta_hdr) +
	             (size_t)((ino - 1) % MFS_INODES_PER_BLOCK) * MFS_INODE_SIZE;
	struct mfs_inode *di;
	struct mfs_txn *txn;
	struct mfs_buf *b;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_meta_read(fs, blk, MFS_T_INODES, &b), 0);
	pthread_mutex_lock(&b->lock);
	di = (struct mfs_inode *)(b->data + off);
	ck_assert_uint_eq(di->mode, 0);
	di->generation = gen;
	mfs_txn_dirty(txn, b);
	pthread_mutex_unlock(&b->lock);
	mfs_buf_put(b);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
}

/*
 * A reused inode number gets a generation that differs from its last user's
 * in the low 32 bits: file handles carry no more (the kernel's i_generation),
 * so the old user's handles must not open the new file.
 */
START_TEST(test_generation_reuse)
{
	uint64_t a, b, last = 0, gen_a;
	struct stat st;
	char name[32];
	int k, ret;

	teardown();
	setup_args("-N 16", "32M");
	a = mk(ROOT, "a", S_IFREG | 0644);
	gen_a = generation(a);
	ck_assert_uint_ne(gen_a, 0);
	/* fill the table, so that the next create must take a's slot */
	for (k = 0;; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		ret = mfs_mknod(fs, ROOT, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
		last = generation(st.st_ino);
		ck_assert_uint_gt(last, gen_a);
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "a"), 0);
	ck_assert_uint_eq(generation(a), 0); /* freed */
	/* the slot's last user: same low 32 bits as the generation the next create would take */
	ck_assert_uint_gt(last + 1, 1ull << 32);
	slot_set_generation(a, last + 1 - (1ull << 32));
	b = mk(ROOT, "b", S_IFREG | 0644);
	ck_assert_uint_eq(b, a);
	ck_assert_uint_ne((uint32_t)generation(b), (uint32_t)(last + 1));
	ck_assert_uint_gt(generation(b), last + 1 - (1ull << 32));
	gen_a = generation(b);
	remount();
	ck_assert_uint_eq(look(ROOT, "b"), b);
	ck_assert_uint_eq(generation(b), gen_a);
}
END_TEST

START_TEST(test_orphans)
{
	struct mfs_ino *ip;
	struct stat st;
	uint64_t f, g, before = ffree();
	char err[256];

	/* unlinked while referenced: lives on, freed at the last reference */
	f = mk(ROOT, "f", S_IFREG | 0644);
	ck_assert_int_eq(mfs_write(fs, f, "data", 4, 0), 4);
	ck_assert_int_eq(mfs_iget(fs, f, &ip), 0);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "f", &st), -ENOENT);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_nlink, 0);
	ck_assert_int_eq(mfs_orphan_count(fs), 1);
	ck_assert_int_eq(ffree(), before - 1);
	mfs_iput(fs, ip);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_int_eq(ffree(), before);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);

	/*
	 * The emptied orphan tree keeps its root leaf: the next unlink of a
	 * referenced file allocates no metadata block (and frees none).
	 */
	{
		uint64_t root = fs->sb.orphan_root, meta;

		ck_assert_uint_ne(root, 0);
		mk(ROOT, "keep", S_IFREG | 0644); /* the directory's tree stays */
		f = mk(ROOT, "f2", S_IFREG | 0644);
		ck_assert_int_eq(mfs_iget(fs, f, &ip), 0);
		meta = fs->sb.free_meta;
		ck_assert_int_eq(mfs_unlink(fs, ROOT, "f2"), 0);
		ck_assert_int_eq(mfs_orphan_count(fs), 1);
		ck_assert_uint_eq(fs->sb.orphan_root, root);
		mfs_iput(fs, ip);
		ck_assert_int_eq(mfs_orphan_count(fs), 0);
		ck_assert_uint_eq(fs->sb.orphan_root, root);
		ck_assert_uint_eq(fs->sb.free_meta, meta);
		remount();
		ck_assert_uint_eq(fs->sb.orphan_root, root);
		ck_assert_int_eq(mfs_orphan_count(fs), 0);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, "keep"), 0);
	}

	/* the same, then a crash after the commit: the next mount frees it */
	g = mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_int_eq(mfs_write(fs, g, "data", 4, 0), 4);
	ck_assert_int_eq(mfs_iget(fs, g, &ip), 0);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "g"), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	mfs_crash(fs); /* frees ip with everything else, writes nothing */
	fs = NULL;
	ck_assert_int_eq(mount_opts(false, err, sizeof(err)), 0);
	ck_assert_int_eq(mfs_getattr(fs, g, &st), -ENOENT);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "g", &st), -ENOENT);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_int_eq(ffree(), before);
	remount();
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_int_eq(ffree(), before);
}
END_TEST

START_TEST(test_read_only)
{
	struct listing l = {0};
	struct stat st, in = {0};
	uint64_t f, d, h;
	char err[256] = "";

	f = mk(ROOT, "f", S_IFREG | 0644);
	d = mkd(ROOT, "d");
	umount_fs();
	h = file_hash(img);
	ck_assert_int_eq(mount_opts(true, err, sizeof(err)), 0);
	ck_assert(fs->read_only);
	ck_assert_uint_eq(look(ROOT, "f"), f);
	ck_assert_int_eq(mfs_readdir(fs, ROOT, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 4);
	list_free(&l);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "x", S_IFREG | 0644, 0, 0, 0, &st), -EROFS);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "x", 0755, 0, 0, &st), -EROFS);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "x", "y", 0, 0, &st), -EROFS);
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "x", &st), -EROFS);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), -EROFS);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "d"), -EROFS);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "f", ROOT, "g", 0), -EROFS);
	in.st_mode = 0600;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_MODE, &st), -EROFS);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(look(ROOT, "d"), d);
	umount_fs();
	ck_assert_uint_eq(file_hash(img), h);

	/* a journal that needs replaying: refused read-only, nothing written */
	mount_fs();
	mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_int_eq(mfs_sync(fs), 0);
	mfs_crash(fs);
	fs = NULL;
	h = file_hash(img);
	ck_assert_int_eq(mount_opts(true, err, sizeof(err)), -EROFS);
	ck_assert_ptr_nonnull(strstr(err, "replay"));
	ck_assert_uint_eq(file_hash(img), h);
	mount_fs();
	ck_assert_uint_ne(look(ROOT, "g"), 0);
}
END_TEST

START_TEST(test_enospc_meta)
{
	char name[300];
	struct stat st;
	uint64_t f, meta, links = 0;
	int ret, k;

	teardown();
	setup_args("-N 16", "32M");
	meta = fs->sb.free_meta;
	f = mk(ROOT, "f", S_IFREG | 0644);
	memset(name, 'n', 250);
	/* long names: every leaf holds a dozen entries, the metadata zone fills up */
	for (k = 0;; k++) {
		snprintf(name + 240, 20, "%09d", k);
		ret = mfs_link(fs, f, ROOT, name, &st);
		if (ret)
			break;
		links++;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_uint_gt(links, 1000);
	ck_assert_uint_eq(nlink(f), links + 1);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, name, &st), -ENOENT);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, name, 0755, 0, 0, &st), -ENOSPC);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, name, &st), -ENOENT);
	ck_assert_uint_eq(nlink(f), links + 1);
	/* usable: delete some, create again */
	for (k = 0; k < 100; k++) {
		snprintf(name + 240, 20, "%09d", k);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, name), 0);
	}
	ck_assert_uint_eq(nlink(f), links + 1 - 100);
	ck_assert_uint_ne(mkd(ROOT, "d"), 0);
	remount();
	ck_assert_uint_eq(nlink(f), links + 1 - 100);
	for (k = 100; k < (int)links; k++) {
		snprintf(name + 240, 20, "%09d", k);
		ck_assert_msg(look(ROOT, name) == f, "link %d lost", k);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, name), 0);
	}
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "d"), 0);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_uint_eq(fs->sb.free_meta, meta);
	ck_assert_uint_eq(ffree(), fs->sb.nr_inodes - 1);
}
END_TEST

/* Threads creating, renaming (also across directories) and removing in shared directories. */
struct worker {
	pthread_t th;
	unsigned id;
	uint64_t d[2];
	int err;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	char a[32], b[32];
	struct stat st;
	int ret;

	for (unsigned i = 0; i < 300 && !w->err; i++) {
		uint64_t d0 = w->d[i % 2], d1 = w->d[(i + 1) % 2];

		snprintf(a, sizeof(a), "w%u-%u", w->id, i);
		snprintf(b, sizeof(b), "w%u-%u-r", w->id, i);
		ret = i % 5 == 0 ? mfs_mkdir(fs, d0, a, 0755, 0, 0, &st)
		                 : mfs_mknod(fs, d0, a, S_IFREG | 0644, 0, 0, 0, &st);
		if (!ret)
			ret = mfs_rename(fs, d0, a, d1, b, 0);
		if (!ret)
			ret = mfs_lookup(fs, d1, b, &st);
		if (!ret && i % 3 == 0)
			ret = i % 5 == 0 ? mfs_rmdir(fs, d1, b) : mfs_unlink(fs, d1, b);
		if (!ret && i % 7 == 0)
			ret = mfs_rename(fs, w->d[0], "shared", w->d[1], "shared", RENAME_EXCHANGE);
		if (ret == -ENOENT && i % 7 == 0)
			ret = 0;
		if (ret)
			w->err = ret;
	}
	return NULL;
}

START_TEST(test_threads)
{
	struct worker w[4];
	struct listing l = {0};
	uint64_t d[2];
	unsigned i;

	d[0] = mkd(ROOT, "d0");
	d[1] = mkd(ROOT, "d1");
	mk(d[0], "shared", S_IFREG | 0644);
	mkd(d[1], "shared");
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){.id = i, .d = {d[0], d[1]}};
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, worker_fn, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(w[i].th, NULL);
		ck_assert_msg(w[i].err == 0, "worker %u: %d", i, w[i].err);
	}
	remount();
	ck_assert_int_eq(mfs_readdir(fs, d[0], 0, list_fn, &l), 0);
	ck_assert_int_eq(mfs_readdir(fs, d[1], 0, list_fn, &l), 0);
	/* 4 workers x 200 survivors, 2 "shared", 2 x ("." "..") */
	ck_assert_uint_eq(l.n, 4 * 200 + 2 + 4);
	list_free(&l);
	/* directory link counts: 2 + subdirectories */
	ck_assert_uint_eq(nlink(d[0]) + nlink(d[1]), 4 + 1 + 4 * 40);
}
END_TEST

/* --- a large directory ------------------------------------------------------------------ */

static int count_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype,
                    uint64_t next)
{
	uint8_t *seen = arg;
	char tmp[32];
	unsigned long k;

	(void)ino;
	(void)next;
	if (len == 1 || (len == 2 && name[1] == '.'))
		return 0;
	ck_assert_uint_eq(dtype, DT_REG);
	memcpy(tmp, name + 1, len - 1);
	tmp[len - 1] = 0;
	k = strtoul(tmp, NULL, 10);
	seen[k]++;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(test_many_entries)
{
	bool long_run = getenv("MFS_LONG") && atoi(getenv("MFS_LONG"));
	unsigned n = long_run ? 1000000u : 100000u, k;
	char args[64], name[32];
	uint8_t *seen;
	uint64_t d, meta0;
	struct stat st;
	double t0 = now_s();

	teardown();
	snprintf(args, sizeof(args), "-N %u", n + 64);
	setup_args(args, long_run ? "4G" : "1G");
	d = mkd(ROOT, "big");
	meta0 = fs->sb.free_meta;
	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%u", k);
		ck_assert_int_eq(mfs_mknod(fs, d, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
	}
	fprintf(stderr, "namei: %u creates in %.1f s\n", n, now_s() - t0);
	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%u", k);
		ck_assert_msg(mfs_lookup(fs, d, name, &st) == 0, "%s missing", name);
	}
	ck_assert_int_eq(mfs_lookup(fs, d, "f-missing", &st), -ENOENT);
	fprintf(stderr, "namei: + lookups %.1f s\n", now_s() - t0);
	seen = calloc(n, 1);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, count_fn, seen), 0);
	for (k = 0; k < n; k++)
		ck_assert_msg(seen[k] == 1, "f%u listed %u times", k, seen[k]);
	free(seen);
	fprintf(stderr, "namei: + readdir %.1f s\n", now_s() - t0);
	for (k = 0; k < n; k++) {
		snprintf(name, sizeof(name), "f%u", k);
		ck_assert_int_eq(mfs_unlink(fs, d, name), 0);
	}
	fprintf(stderr, "namei: + unlinks %.1f s\n", now_s() - t0);
	st = getattr(d);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "big"), 0);
	ck_assert_uint_eq(ffree(), fs->sb.nr_inodes - 1);
	ck_assert_uint_ge(fs->sb.free_meta, meta0);
	remount();
	ck_assert_uint_eq(ffree(), fs->sb.nr_inodes - 1);
}
END_TEST

static Suite *namei_suite(void)
{
	Suite *s = suite_create("namei");
	TCase *tc = tcase_create("namei");
	TCase *big = tcase_create("big");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_mknod_lookup);
	tcase_add_test(tc, test_unlink_rmdir);
	tcase_add_test(tc, test_hard_links);
	tcase_add_test(tc, test_symlinks);
	tcase_add_test(tc, test_setattr);
	tcase_add_test(tc, test_rename_files);
	tcase_add_test(tc, test_rename_dirs);
	tcase_add_test(tc, test_readdir_basic);
	tcase_add_test(tc, test_readdir_stable);
	tcase_add_test(tc, test_collisions);
	tcase_add_test(tc, test_persistence);
	tcase_add_test(tc, test_enospc_inodes);
	tcase_add_test(tc, test_generation_reuse);
	tcase_add_test(tc, test_orphans);
	tcase_add_test(tc, test_read_only);
	tcase_add_test(tc, test_enospc_meta);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(big, setup, teardown);
	tcase_set_timeout(big, 3600);
	tcase_add_test(big, test_many_entries);
	suite_add_tcase(s, big);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(namei_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
