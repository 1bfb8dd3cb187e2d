/* SPDX-License-Identifier: MIT */
/*
 * namei_util.h: what the namespace tests (test_namei*.c) share: an image made
 * by the built mkfs.mendfs in a fresh directory and mounted (the fixture),
 * and short forms of the operations on it (namei_util.c); and the test cases
 * each test_namei_<part>.c adds to the suite.
 */
#ifndef MENDFS_TESTS_NAMEI_UTIL_H
#define MENDFS_TESTS_NAMEI_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "mfs_int.h"

#define ROOT MFS_ROOT_INO

/* The test directory, the image in it, the mounted filesystem (NULL when unmounted). */
extern char dir[64], img[128];
extern struct mfs *fs;

void namei_ops_tests(TCase *tc);
void namei_readdir_tests(TCase *tc, TCase *big);
void namei_persist_tests(TCase *tc);
void namei_unlink_tests(TCase *tc);

/* readdir into a list of names (with their cookies), optionally stopping after @max. */
struct listing {
	char (*name)[256];
	uint64_t *ino, *cookie;
	size_t n, cap, max;
};

void mkfs_image(const char *args);
int mount_opts(bool ro, char *err, size_t errlen);
void mount_fs(void);
void umount_fs(void);
void remount(void);
void make_dir_img(void);
void setup_args(const char *extra, const char *size);
void setup(void);
void teardown(void);
uint64_t mk(uint64_t d, const char *name, mode_t mode);
uint64_t mkd(uint64_t d, const char *name);
uint64_t look(uint64_t d, const char *name);
struct stat getattr(uint64_t ino);
nlink_t nlink(uint64_t ino);
uint64_t ffree(void);
uint64_t bfree(void);
int list_fn(void *arg, const char *name, size_t len, uint64_t ino, unsigned dtype, uint64_t next);
void list_free(struct listing *l);
bool listed(const struct listing *l, const char *name, uint64_t *ino);
uint64_t file_hash(const char *path);

#endif /* MENDFS_TESTS_NAMEI_UTIL_H */
