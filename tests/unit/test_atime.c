/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/atime.c on a real mkfs.mendfs image ($MKFS_MENDFS): the
 * policy (relatime's three rules, strictatime, noatime, nodiratime), and the
 * lazy write-back -- an access starts no transaction, a crash loses its
 * atime, and it reaches the device with the inode's next write, the last
 * reference, fsync, the flush of the periodic commit and sync, and unmount;
 * an unlinked inode leaves the list; the lock-free bound of the common case
 * is reset by every change of the inode's times.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atime.h"
#include "fixture.h"

#define ROOT MFS_ROOT_INO
#define SEC  1000000000ll
#define OLD  (1577934245ll * SEC) /* 2020-01-02 03:04:05 */

static void mount_flags(unsigned flags)
{
	struct mfs_mount_opts o = {.exclusive = true, .atime = flags};

	fixture_mount(&o);
}

static void setup(void)
{
	fixture_dir("/tmp", "atime");
	fixture_mkfs("", "64M");
	mount_flags(0);
}

static void teardown(void)
{
	if (fs)
		fixture_umount();
	fixture_remove();
}

/* A crash now: nothing after the last commit reaches the device. */
static void crash_remount(void)
{
	mfs_crash(fs);
	mount_flags(0);
}

static uint64_t mkfile(const char *name)
{
	struct stat st;

	ck_assert_int_eq(mfs_mknod(fs, ROOT, name, S_IFREG | 0644, 0, 0, 0, &st), 0);
	return st.st_ino;
}

/* Set @ino's atime to OLD and make it durable. */
static void set_old(uint64_t ino)
{
	struct stat in = {0}, st;

	in.st_atim.tv_sec = OLD / SEC;
	ck_assert_int_eq(mfs_setattr(fs, ino, &in, MFS_SET_ATIME, &st), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
}

static int64_t atime_of(uint64_t ino)
{
	struct stat st;

	ck_assert_int_eq(mfs_getattr(fs, ino, &st), 0);
	return (int64_t)st.st_atim.tv_sec * SEC + st.st_atim.tv_nsec;
}

static bool txn_running(void)
{
	bool r;

	mfs_lock(&fs->txn_lock);
	r = fs->running != NULL;
	mfs_unlock(&fs->txn_lock);
	return r;
}

START_TEST(test_policy)
{
	int64_t now = 1700000000ll * SEC;
	struct mfs_inode di = {.mode = S_IFREG | 0644};

	/* relatime: atime <= mtime, atime <= ctime, or a day old */
	di.mtime_ns = di.ctime_ns = now - 3600 * SEC;
	di.atime_ns = di.mtime_ns;
	ck_assert(mfs_atime_needs_update(0, &di, now));
	di.atime_ns = di.mtime_ns + 1;
	ck_assert(!mfs_atime_needs_update(0, &di, now));
	di.ctime_ns = di.atime_ns;
	ck_assert(mfs_atime_needs_update(0, &di, now));
	di.mtime_ns = di.ctime_ns = now - 2 * MFS_RELATIME_NS;
	di.atime_ns = now - MFS_RELATIME_NS + 1;
	ck_assert(!mfs_atime_needs_update(0, &di, now));
	di.atime_ns = now - MFS_RELATIME_NS;
	ck_assert(mfs_atime_needs_update(0, &di, now));
	/* strictatime: every access, unless the atime is already now */
	di.atime_ns = now - 1;
	ck_assert(!mfs_atime_needs_update(0, &di, now));
	ck_assert(mfs_atime_needs_update(MFS_ATIME_STRICT, &di, now));
	di.atime_ns = now;
	ck_assert(!mfs_atime_needs_update(MFS_ATIME_STRICT, &di, now));
	/* noatime; nodiratime for directories only */
	di.atime_ns = 0;
	ck_assert(!mfs_atime_needs_update(MFS_ATIME_NONE, &di, now));
	ck_assert(mfs_atime_needs_update(MFS_ATIME_NODIRATIME, &di, now));
	di.mode = S_IFDIR | 0755;
	ck_assert(!mfs_atime_needs_update(MFS_ATIME_NODIRATIME, &di, now));
	ck_assert(!mfs_atime_needs_update(MFS_ATIME_NODIRATIME | MFS_ATIME_STRICT, &di, now));
	ck_assert(mfs_atime_needs_update(MFS_ATIME_STRICT, &di, now));
}
END_TEST

/* An access starts no transaction; a crash loses its atime; the last reference writes it. */
START_TEST(test_lazy)
{
	uint64_t ino = mkfile("f");
	uint64_t commits;
	struct mfs_ino *ip;
	int64_t a;
	int i;

	set_old(ino);
	ck_assert(!txn_running());
	commits = atomic_load(&fs->stats.commits);
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	for (i = 0; i < 1000; i++)
		mfs_file_accessed(fs, ip);
	a = atime_of(ino);
	ck_assert_int_gt(a, OLD);
	ck_assert(!txn_running());
	ck_assert_uint_eq(atomic_load(&fs->stats.commits), commits);
	ck_assert_uint_eq(fs->atime_nr, 1);
	/* relatime: the second access found a new atime and left it */
	ck_assert_int_eq(atime_of(ino), a);
	mfs_txn_commit(fs);
	crash_remount(); /* ip went with the crash */
	ck_assert_int_eq(atime_of(ino), OLD);

	/* the last reference writes it into the running transaction */
	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	mfs_file_accessed(fs, ip);
	a = atime_of(ino);
	ck_assert(!txn_running());
	mfs_iput(fs, ip);
	ck_assert(txn_running());
	ck_assert_uint_eq(fs->atime_nr, 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	crash_remount();
	ck_assert_int_eq(atime_of(ino), a);
}
END_TEST

/* The lock-free "nothing moves until" bound goes with any change of the times. */
START_TEST(test_quiet_bound)
{
	uint64_t ino = mkfile("f");
	struct mfs_ino *ip;
	int64_t a;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	mfs_file_accessed(fs, ip); /* atime <= mtime: moves */
	a = atime_of(ino);
	mfs_file_accessed(fs, ip); /* newer than mtime and ctime: the bound is set */
	ck_assert_int_gt(atomic_load(&ip->atime_quiet_until), a);
	ck_assert_int_eq(atime_of(ino), a);
	/* a write moves mtime: the next access moves atime again */
	ck_assert_int_eq(mfs_write(fs, ino, "x", 1, 0), 1);
	ck_assert_int_eq(atomic_load(&ip->atime_quiet_until), 0);
	mfs_file_accessed(fs, ip);
	ck_assert_int_gt(atime_of(ino), a);
	/* so does a utimes into the past (it moves ctime too) */
	set_old(ino);
	mfs_file_accessed(fs, ip);
	ck_assert_int_gt(atime_of(ino), OLD);
	mfs_iput(fs, ip);
}
END_TEST

/* fsync, the flush (periodic commit, sync), unmount and any write of the inode take it. */
START_TEST(test_writeback)
{
	uint64_t f = mkfile("f"), g = mkfile("g"), h = mkfile("h");
	struct mfs_ino *fi, *gi, *hi;
	struct stat in = {0}, st;
	int64_t af, ag, ah;

	set_old(f);
	set_old(g);
	set_old(h);
	ck_assert_int_eq(mfs_iget(fs, f, &fi), 0);
	ck_assert_int_eq(mfs_iget(fs, g, &gi), 0);
	ck_assert_int_eq(mfs_iget(fs, h, &hi), 0);
	mfs_file_accessed(fs, fi);
	mfs_file_accessed(fs, gi);
	mfs_file_accessed(fs, hi);
	ck_assert_uint_eq(fs->atime_nr, 3);
	af = atime_of(f);
	ag = atime_of(g);
	/* fsync of f; fdatasync of g does not */
	ck_assert_int_eq(mfs_fsync(fs, g, true), 0);
	ck_assert_uint_eq(fs->atime_nr, 3);
	ck_assert_int_eq(mfs_fsync(fs, f, false), 0);
	ck_assert_uint_eq(fs->atime_nr, 2);
	/* a chmod of g writes its inode, new atime included */
	in.st_mode = 0600;
	ck_assert_int_eq(mfs_setattr(fs, g, &in, MFS_SET_MODE, &st), 0);
	ck_assert_uint_eq(fs->atime_nr, 1);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	ah = atime_of(h);
	mfs_crash(fs); /* drops the references with everything else */
	mount_flags(0);
	ck_assert_int_eq(atime_of(f), af);
	ck_assert_int_eq(atime_of(g), ag);
	ck_assert_int_eq(atime_of(h), OLD);

	/* the flush writes them all; then unmount */
	ck_assert_int_eq(mfs_iget(fs, h, &hi), 0);
	ck_assert_int_eq(mfs_iget(fs, f, &fi), 0);
	set_old(f);
	mfs_file_accessed(fs, hi);
	mfs_file_accessed(fs, fi);
	ah = atime_of(h);
	af = atime_of(f);
	ck_assert_uint_eq(fs->atime_nr, 2);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(fs->atime_nr, 0);
	set_old(g);
	ck_assert_int_eq(mfs_iget(fs, g, &gi), 0);
	mfs_file_accessed(fs, gi);
	ag = atime_of(g);
	mfs_iput(fs, fi);
	mfs_iput(fs, hi);
	ck_assert_int_eq(mfs_unmount(fs), 0); /* gi still referenced: the flush takes it */
	mount_flags(0);
	ck_assert_int_eq(atime_of(f), af);
	ck_assert_int_eq(atime_of(g), ag);
	ck_assert_int_eq(atime_of(h), ah);
}
END_TEST

/* noatime, nodiratime; unlinked and read-only inodes never go on the list. */
START_TEST(test_modes)
{
	struct mfs_mount_opts ro = {.read_only = true, .exclusive = true};
	uint64_t f = mkfile("f"), d;
	struct mfs_ino *fi, *di;
	struct stat st;

	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "d", 0755, 0, 0, &st), 0);
	d = st.st_ino;
	set_old(f);
	set_old(d);
	fixture_umount();

	mount_flags(MFS_ATIME_NONE);
	ck_assert_int_eq(mfs_iget(fs, f, &fi), 0);
	mfs_file_accessed(fs, fi);
	ck_assert_int_eq(atime_of(f), OLD);
	mfs_iput(fs, fi);
	fixture_umount();

	mount_flags(MFS_ATIME_NODIRATIME);
	ck_assert_int_eq(mfs_iget(fs, f, &fi), 0);
	ck_assert_int_eq(mfs_iget(fs, d, &di), 0);
	mfs_file_accessed(fs, di);
	ck_assert_int_eq(atime_of(d), OLD);
	mfs_file_accessed(fs, fi);
	ck_assert_int_gt(atime_of(f), OLD);
	mfs_iput(fs, di);
	/* unlinked while on the list: off it, and freed at its last reference */
	ck_assert_uint_eq(fs->atime_nr, 1);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_uint_eq(fs->atime_nr, 0);
	mfs_file_accessed(fs, fi);
	ck_assert_uint_eq(fs->atime_nr, 0);
	mfs_iput(fs, fi);
	fixture_umount();

	fixture_mount(&ro);
	ck_assert_int_eq(mfs_iget(fs, d, &di), 0);
	mfs_file_accessed(fs, di);
	ck_assert_int_eq(atime_of(d), OLD);
	ck_assert_uint_eq(fs->atime_nr, 0);
	mfs_iput(fs, di);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("atime");
	TCase *tc = tcase_create("atime");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_policy);
	tcase_add_test(tc, test_lazy);
	tcase_add_test(tc, test_quiet_bound);
	tcase_add_test(tc, test_writeback);
	tcase_add_test(tc, test_modes);
	suite_add_tcase(s, tc);
	return check_run(s);
}
