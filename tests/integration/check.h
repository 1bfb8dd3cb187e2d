/* SPDX-License-Identifier: MIT */
/*
 * check.h: the CHECK macro of the integration test programs that run system
 * calls on a live mount (posix.c, fhandle.c, enospc.c, fsops.c).  Calls only
 * stdio and strerror.
 *
 * CHECK(cond, fmt, ...) counts a check and prints one line on stdout:
 * "ok WHAT", or "FAIL file:line: WHAT [cond] (errno E)" with errno as the
 * condition left it.  A program with many checks in loops sets check_quiet to
 * print the failures only.  Each program ends with
 * `return failures ? 1 : 0;` after printing its tally.  A program of several
 * files (posix) defines CHECK_SHARED_COUNTERS before including this, and one
 * of its files defines failures, checks and check_quiet.
 */
#ifndef MENDFS_TESTS_CHECK_H
#define MENDFS_TESTS_CHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifdef CHECK_SHARED_COUNTERS
/* A program of several files defines these in one of them. */
extern int failures, checks;
extern bool check_quiet;
#else
static int failures, checks;
static bool check_quiet;
#endif

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		bool ok_ = (cond);                                                                 \
		int e_ = errno;                                                                    \
		checks++;                                                                          \
		if (!ok_) {                                                                        \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf(" [%s] (errno %s)\n", #cond, strerror(e_));                         \
			failures++;                                                                \
		} else if (!check_quiet) {                                                         \
			printf("ok ");                                                             \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		}                                                                                  \
		fflush(stdout);                                                                    \
	} while (0)

#endif /* MENDFS_TESTS_CHECK_H */
