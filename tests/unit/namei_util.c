/* SPDX-License-Identifier: MIT */
/*
 * namei_util.c: the set-up and helpers of the namespace tests
 * (test_namei*.c); namei_util.h is their interface.
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
#include "namei_util.h"

char dir[64], img[128];
struct mfs *fs;

void mkfs_image(const char *args)
{
	mkfs_run(args);
}

int mount_opts(bool ro, char *err, size_t errlen)
{
	struct mfs_mount_opts o = {.read_only = ro, .exclusive = true};

	return mfs_mount(img, &o, &fs, err, errlen);
}

void mount_fs(void)
{
	char err[256] = "";
	int ret = mount_opts(false, err, sizeof(err));

	ck_assert_msg(ret == 0, "mount: %d %s", ret, err);
}

void umount_fs(void)
{
	ck_assert_int_eq(mfs_unmount(fs), 0);
	fs = NULL;
}

void remount(void)
{
	umount_fs();
	mount_fs();
}

void make_dir_img(void)
{
	snprintf(dir, sizeof(dir), "/tmp/mendfs-namei-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
}

void setup_args(const char *extra, const char *size)
{
	char args[512];

	make_dir_img();
	snprintf(args, sizeof(args), "%s '%s' %s", extra, img, size);
	mkfs_image(args);
	mount_fs();
}

void setup(void)
{
	setup_args("", "64M");
}

void teardown(void)
{
	char cmd[128];

	if (fs)
		umount_fs();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* --- helpers ------------------------------------------------------------------------ */

uint64_t mk(uint64_t d, const char *name, mode_t mode)
{
	struct stat st;
	int ret = mfs_mknod(fs, d, name, mode, 0, 0, 0, &st);

	ck_assert_msg(ret == 0, "mknod %s: %d", name, ret);
	return st.st_ino;
}

uint64_t mkd(uint64_t d, const char *name)
{
	struct stat st;
	int ret = mfs_mkdir(fs, d, name, 0755, 0, 0, &st);

	ck_assert_msg(ret == 0, "mkdir %s: %d", name, ret);
	ck_assert(S_ISDIR(st.st_mode));
	return st.st_ino;
}

uint64_t look(uint64_t d, const char *name)
{
	struct stat st;
	int ret = mfs_lookup(fs, d, name, &st);

	return ret ? 0 : st.st_ino;
}

struct stat getattr(uint64_t ino)
{
	struct stat st;

	ck_assert_int_eq(mfs_getattr(fs, ino, &st), 0);
	return st;
}

nlink_t nlink(uint64_t ino)
{
	return getattr(ino).st_nlink;
}

uint64_t ffree(void)
{
	struct statvfs sv;

	ck_assert_int_eq(mfs_statfs(fs, &sv), 0);
	return sv.f_ffree;
}

uint64_t bfree(void)
{
	struct statvfs sv;

	ck_assert_int_eq(mfs_statfs(fs, &sv), 0);
	return sv.f_bfree;
}

int list_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype, uint64_t next)
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

void list_free(struct listing *l)
{
	free(l->name);
	free(l->ino);
	free(l->cookie);
	memset(l, 0, sizeof(*l));
}

bool listed(const struct listing *l, const char *name, uint64_t *ino)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name)) {
			if (ino)
				*ino = l->ino[i];
			return true;
		}
	return false;
}

uint64_t file_hash(const char *path)
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
