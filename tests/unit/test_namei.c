/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of mount, the inode cache and the namespace operations
 * (fs/core/mount.c, fs/core/inode.c, fs/core/namei.c) on images made by the built
 * mkfs.mendfs ($MKFS_MENDFS) and mounted with mfs_mount().
 *
 * Every operation and its errors; hard-link counts; rename of files and
 * directories with NOREPLACE and EXCHANGE, cycles refused; a directory of
 * 100 000 entries (1 000 000 with MFS_LONG=1): create, look up, list exactly
 * once, delete; readdir cursors stable across inserts and deletes;
 * persistence across unmount/mount; inode exhaustion and recovery; an
 * unlinked open inode freed at its last reference, or after a crash by the
 * orphan list at the next mount; the last unlink of an inode that is only
 * pinned (the daemon's lookups) freed in its own transaction, without the
 * orphan tree (test_namei_unlink.c); read-only mounts refuse changes and
 * write nothing.
 *
 * This file makes the suite; the tests are in test_namei_ops.c,
 * test_namei_readdir.c, test_namei_persist.c and test_namei_unlink.c, their set-up and helpers in
 * namei_util.c / namei_util.h.
 */
#include <check.h>

#include "namei_util.h"
#include "check_run.h"

static Suite *namei_suite(void)
{
	Suite *s = suite_create("namei");
	TCase *tc = tcase_create("namei");
	TCase *big = tcase_create("big");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	namei_ops_tests(tc);
	namei_readdir_tests(tc, big);
	namei_persist_tests(tc);
	namei_unlink_tests(tc);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(big, setup, teardown);
	tcase_set_timeout(big, 3600);
	suite_add_tcase(s, big);
	return s;
}

int main(void)
{
	return check_run(namei_suite());
}
