/* SPDX-License-Identifier: MIT */
/*
 * badblocks.h: what the two files of test_badblocks share: the includes, the
 * table assertions (R, EXPECT, expect_table), the test's random numbers and
 * the "files" test case of badblocks_files.c.
 */
#ifndef MENDFS_TESTS_BADBLOCKS_H
#define MENDFS_TESTS_BADBLOCKS_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/blkpg.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#include "blk_internal.h"
#include "cannot_run.h"

#define R(s, n) ((struct blk_range){(s), (n)})

/* The table must hold exactly want[0, n), and nr must agree. */
void expect_table(struct blk_badblocks *bb, const struct blk_range *want, unsigned n);

#define EXPECT(bb, ...)                                                                            \
	do {                                                                                       \
		const struct blk_range want_[] = {__VA_ARGS__};                                    \
		expect_table((bb), want_, sizeof(want_) / sizeof(want_[0]));                       \
	} while (0)

/* xorshift64 with a fixed seed: the same sequence on every run. */
uint64_t rng(void);

/* badblocks_files.c: the emulation file and the real badblocks sources. */
TCase *badblocks_files_tcase(void);

#endif /* MENDFS_TESTS_BADBLOCKS_H */
