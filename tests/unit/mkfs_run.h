/* SPDX-License-Identifier: MIT */
/*
 * For the unit tests that format real images: run the built mkfs.mendfs
 * ($MKFS_MENDFS, else ../../mkfs/mkfs.mendfs beside the test binary) with
 * "-q -f" and @args (already quoted as needed); asserts that it succeeds.
 */
#ifndef MENDFS_TESTS_MKFS_RUN_H
#define MENDFS_TESTS_MKFS_RUN_H

#include <check.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void mkfs_run(const char *args)
{
	const char *env = getenv("MKFS_MENDFS");
	char mkfs[PATH_MAX], self[PATH_MAX], cmd[PATH_MAX * 2];
	ssize_t n;

	if (env && *env) {
		snprintf(mkfs, sizeof(mkfs), "%s", env);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		ck_assert_int_gt(n, 0);
		self[n] = 0;
		snprintf(mkfs, sizeof(mkfs), "%s/../../mkfs/mkfs.mendfs", dirname(self));
	}
	n = snprintf(cmd, sizeof(cmd), "'%s' -q -f %s", mkfs, args);
	ck_assert(n > 0 && (size_t)n < sizeof(cmd));
	ck_assert_int_eq(system(cmd), 0);
}

#endif /* MENDFS_TESTS_MKFS_RUN_H */
