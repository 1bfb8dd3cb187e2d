/* SPDX-License-Identifier: MIT */
/*
 * check_run: the main() of a Check test program.  Runs suite @s (each test
 * in a child process, as Check does by default) and returns the program's
 * exit status: 0 when every test passed, 1 otherwise.
 */
#ifndef MENDFS_TESTS_CHECK_RUN_H
#define MENDFS_TESTS_CHECK_RUN_H

#include <check.h>

static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif /* MENDFS_TESTS_CHECK_RUN_H */
