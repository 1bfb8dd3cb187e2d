/* SPDX-License-Identifier: MIT */
/*
 * What fsck-img.c (commands through the fs library) and fsck-img-raw.c (raw
 * changes to an image: the corruptions) share.  fsck-img links the fs
 * library, and its private header: it checks and corrupts internals.
 */
#ifndef MENDFS_TESTS_FSCK_IMG_H
#define MENDFS_TESTS_FSCK_IMG_H

#include <stdbool.h>
#include <stdint.h>

#include "mfs_int.h"

#define SPB MFS_SECTORS_PER_BLOCK

/* The image (argv[2]). */
extern const char *img;

/* "fsck-img: " @fmt (with @a) [": strerror(@err)"] on stderr, exit 2. */
void die(const char *fmt, const char *a, int err) __attribute__((noreturn));
/* Mount the image (read-only: @ro); dies on failure. */
struct mfs *mnt(bool ro);
/* Inode of @path in the mounted @fs, 0 if none. */
uint64_t lookup_path(struct mfs *fs, const char *path);
/* Inode of @path (mounts and unmounts); dies if none. */
uint64_t path_ino(const char *path);

/* fsck-img-raw.c: the commands corrupt, free-sector and xblock. */
int cmd_corrupt(const char *cs);
int cmd_free_sector(void);
int cmd_xblock(const char *path, unsigned i);

#endif /* MENDFS_TESTS_FSCK_IMG_H */
