/* SPDX-License-Identifier: MIT */
/*
 * For a unit test that this machine cannot run (no root, no loop device):
 * under MENDFS_TEST_STRICT=1 (CI) it fails with the reason; otherwise it says
 * "skipped: REASON" on stderr and the caller returns.  A test never passes
 * over a missing device in silence.
 */
#ifndef MENDFS_TESTS_CANNOT_RUN_H
#define MENDFS_TESTS_CANNOT_RUN_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool test_strict(void)
{
	const char *s = getenv("MENDFS_TEST_STRICT");

	return s && !strcmp(s, "1");
}

#define cannot_run(...)                                                                            \
	do {                                                                                       \
		if (test_strict())                                                                 \
			ck_abort_msg("cannot run (MENDFS_TEST_STRICT=1): " __VA_ARGS__);           \
		fprintf(stderr, "skipped: " __VA_ARGS__);                                          \
		fputc('\n', stderr);                                                               \
	} while (0)

#endif
