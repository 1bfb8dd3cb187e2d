/* SPDX-License-Identifier: MIT */
/*
 * poison.h: what the two files of test_poison share: the includes, the
 * fixture (a 1 MiB image holding a known pattern, an emulation file, the
 * opened device), the I/O and inspection helpers, the count of fdatasync
 * calls, and the "emulation" and "guard" test cases of poison_fault.c.
 */
#ifndef MENDFS_TESTS_POISON_H
#define MENDFS_TESTS_POISON_H

#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blk_internal.h"

#define IMG_SIZE (1u << 20)
#define PAGE     4096u
#define SECT     BLK_SECTOR_SIZE

struct fix {
	char dir[64];
	char img[128];
	char bb[160];
	unsigned char *pat; /* the image's content at open */
	struct blk_dev *dev;
};

/* Calls of the interposed fdatasync (test_poison.c). */
extern _Atomic unsigned nr_fdatasyncs;

/* A 1 MiB image holding the pattern; @bbtext the emulation file (NULL: none). */
void fix_setup(struct fix *f, const char *bbtext);
void fix_teardown(struct fix *f);
/* One bio, byte addressed, waited for.  Returns what the bio ended with. */
int bio_io(struct blk_dev *dev, struct blk_bio *bio, enum blk_op op, uint64_t pos, void *buf,
           uint32_t len, unsigned flags);
/* The emulation file as it is on disk now: its ranges into @out, their number. */
unsigned read_bb_file(const char *path, struct blk_range *out, unsigned max);
void pread_image(const struct fix *f, void *buf, size_t len, off_t pos);
bool all_bytes(const unsigned char *p, size_t len, unsigned char v);
void get_stats(struct fix *f, struct blk_stats *st);

#if BLK_POISON_CHECKS
/* poison_fault.c: adds the "emulation" and "guard" test cases to @s. */
void poison_fault_add(Suite *s, bool forking);
#endif

#endif /* MENDFS_TESTS_POISON_H */
