/* SPDX-License-Identifier: MIT */
/*
 * For the unit tests that format real images: where the built tools are
 * (tool_path), and mkfs_run(), which runs the built mkfs.mendfs.
 */
#ifndef MENDFS_TESTS_MKFS_RUN_H
#define MENDFS_TESTS_MKFS_RUN_H

#include <check.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * Put in @path (of @len bytes) the path of a built tool: $@env when set (meson
 * sets it), else @rel (such as "mkfs/mkfs.mendfs") in the build directory, two
 * levels above the test binary.
 */
static inline void tool_path(char *path, size_t len, const char *env, const char *rel)
{
	const char *val = getenv(env);
	char self[PATH_MAX];
	ssize_t n;

	if (val && *val) {
		snprintf(path, len, "%s", val);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ck_assert_int_gt(n, 0);
	self[n] = 0;
	snprintf(path, len, "%s/../../%s", dirname(self), rel);
}

/*
 * Run the built mkfs.mendfs ($MKFS_MENDFS, else ../../mkfs/mkfs.mendfs beside
 * the test binary) with "-q -f" and @args (already quoted as needed); asserts
 * that it succeeds.
 */
static inline void mkfs_run(const char *args)
{
	char mkfs[PATH_MAX], cmd[PATH_MAX * 2];
	int n;

	tool_path(mkfs, sizeof(mkfs), "MKFS_MENDFS", "mkfs/mkfs.mendfs");
	n = snprintf(cmd, sizeof(cmd), "'%s' -q -f %s", mkfs, args);
	ck_assert(n > 0 && (size_t)n < sizeof(cmd));
	ck_assert_int_eq(system(cmd), 0);
}

#endif /* MENDFS_TESTS_MKFS_RUN_H */
