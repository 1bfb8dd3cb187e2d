/* SPDX-License-Identifier: MIT */
/*
 * test_namei_unlink.c: the last unlink of an inode nobody uses (fs/core/namei.c
 * mfs_drop_link, fs/core/inode.c): references that are pins (mfs_ipin, the
 * daemon's lookup counts) do not keep the inode, so its blocks, its number and
 * its entry go in the unlink's own transaction, without the orphan tree, and
 * the pinned number answers -ENOENT and is not handed out again until the last
 * pin goes.  An inode with a user (an open file) still takes the orphan path
 * and is freed at its last user's mfs_iput, pins or not.  Hard links, rename
 * over a pinned target, and a crash after the commit.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc_int.h"
#include "namei_util.h"

/* A file @name in the root with @blocks blocks of data; its number. */
static uint64_t mk_data(const char *name, unsigned blocks)
{
	static char buf[MFS_BLOCK_SIZE];
	uint64_t ino = mk(ROOT, name, S_IFREG | 0644);
	unsigned i;

	memset(buf, 'x', sizeof(buf));
	for (i = 0; i < blocks; i++)
		ck_assert_int_eq(mfs_write(fs, ino, buf, sizeof(buf), (off_t)i * MFS_BLOCK_SIZE),
		                 (ssize_t)sizeof(buf));
	return ino;
}

/* A pin on @ino, as the daemon's node table takes for a kernel lookup. */
static struct mfs_ino *pin(uint64_t ino)
{
	struct mfs_ino *ip;

	ck_assert_int_eq(mfs_iget(fs, ino, &ip), 0);
	mfs_ipin(fs, ip);
	return ip;
}

START_TEST(test_unlink_pinned_frees_at_once)
{
	uint64_t ffree0 = ffree(), bfree0 = bfree(), orphan_root, commits, f, g;
	struct mfs_ino *ip, *other;
	struct stat st;
	char err[256];

	f = mk_data("f", 3);
	ck_assert_uint_le(bfree(), bfree0 - 3);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ip = pin(f);
	orphan_root = fs->sb.orphan_root;
	commits = atomic_load(&fs->stats.commits);

	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	/* everything back before any commit, the orphan tree untouched */
	ck_assert_uint_eq(atomic_load(&fs->stats.commits), commits);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_uint_eq(fs->sb.orphan_root, orphan_root);
	ck_assert_uint_eq(ffree(), ffree0);
	ck_assert_uint_eq(bfree(), bfree0);
	/* the pinned number is dead: every call by number answers -ENOENT */
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_int_eq(mfs_iget(fs, f, &other), -ENOENT);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "f", &st), -ENOENT);
	ck_assert_int_eq(mfs_write(fs, f, "x", 1, 0), -ENOENT);

	/* the allocator pointed at it anyway: another number, f's stays free */
	A(fs)->ino.hint = f - 1;
	g = mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_uint_ne(g, f);
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	mfs_iunpin(fs, ip); /* the kernel's FORGET: only the memory goes */
	ck_assert_uint_eq(ffree(), ffree0 - 1);

	/* unpinned, the number comes back, with a new generation */
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "g"), 0);
	A(fs)->ino.hint = f - 1;
	ck_assert_uint_eq(mk(ROOT, "h", S_IFREG | 0644), f);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "h"), 0);

	/* a crash after the commit: nothing for the next mount to finish */
	f = mk_data("f", 2);
	ip = pin(f);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	mfs_iunpin(fs, ip);
	mfs_crash(fs);
	fs = NULL;
	ck_assert_int_eq(mount_opts(false, err, sizeof(err)), 0);
	ck_assert_uint_eq(atomic_load(&fs->stats.orphans_freed), 0);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_uint_eq(ffree(), ffree0);
	ck_assert_uint_eq(bfree(), bfree0);
}
END_TEST

/*
 * mfs_lookup_get hands over a reference taken while the directory names the
 * inode (the daemon's LOOKUP then pins it): an unlink between the lookup and
 * the pin finds a user, not a free number, so a create meanwhile cannot be
 * given the same number and the kernel never learns a name for the wrong file.
 */
START_TEST(test_lookup_get_holds_number)
{
	uint64_t ffree0 = ffree(), f, g;
	struct mfs_ino *ip, *dot;

	f = mk_data("f", 1);
	ck_assert_int_eq(mfs_lookup_get(fs, ROOT, "f", &ip), 0);
	ck_assert_uint_eq(ip->ino, f);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0); /* another thread, before the pin */
	A(fs)->ino.hint = f - 1;
	g = mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_uint_ne(g, f);
	ck_assert_uint_eq(ip->di.nlink, 0);
	mfs_iput(fs, ip); /* the reply failed, or the node already pinned it */
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	ck_assert_int_eq(mfs_lookup_get(fs, ROOT, "f", &ip), -ENOENT);
	ck_assert_int_eq(mfs_lookup_get(fs, ROOT, "a/b", &ip), -EINVAL);
	ck_assert_int_eq(mfs_lookup_get(fs, ROOT, ".", &dot), 0);
	ck_assert_uint_eq(dot->ino, ROOT);
	mfs_iput(fs, dot);
	ck_assert_int_eq(mfs_lookup_get(fs, ROOT, "..", &dot), 0);
	ck_assert_uint_eq(dot->ino, ROOT);
	mfs_iput(fs, dot);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "g"), 0);
	ck_assert_uint_eq(ffree(), ffree0);
}
END_TEST

/* mfs_create_get: the new inode's reference outlives an unlink before the pin. */
START_TEST(test_create_get_holds_number)
{
	struct mfs_new_inode ni = {.mode = S_IFREG | 0640, .uid = 7, .gid = 8};
	uint64_t ffree0 = ffree(), f, g;
	struct mfs_ino *ip;
	struct stat st;

	ck_assert_int_eq(mfs_create_get(fs, ROOT, "f", &ni, &st, &ip), 0);
	f = ip->ino;
	ck_assert_uint_eq(st.st_ino, f);
	ck_assert_uint_eq(st.st_uid, 7);
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0); /* another thread, before the pin */
	A(fs)->ino.hint = f - 1;
	g = mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_uint_ne(g, f); /* f's number is still held */
	ck_assert_uint_eq(ip->di.nlink, 0);
	mfs_iput(fs, ip);
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	/* a failed creation hands over nothing */
	ip = NULL;
	ck_assert_int_eq(mfs_create_get(fs, ROOT, "g", &ni, NULL, &ip), -EEXIST);
	ck_assert_ptr_null(ip);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "g"), 0);
	ck_assert_uint_eq(ffree(), ffree0);
}
END_TEST

START_TEST(test_unlink_open_frees_at_last_user)
{
	uint64_t ffree0 = ffree(), bfree0 = bfree(), f;
	struct mfs_ino *pinned, *open;
	struct stat st;
	char buf[4];

	f = mk_data("f", 2);
	pinned = pin(f);
	ck_assert_int_eq(mfs_iget(fs, f, &open), 0); /* an open file: a user */
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_eq(mfs_orphan_count(fs), 1);
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_nlink, 0);
	ck_assert_int_eq(mfs_read(fs, f, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_int_eq(memcmp(buf, "xxxx", 4), 0);
	/* the last user goes (close): freed then, though the kernel still knows it */
	mfs_iput(fs, open);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_uint_eq(ffree(), ffree0);
	ck_assert_uint_eq(bfree(), bfree0);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	mfs_iunpin(fs, pinned);
	ck_assert_uint_eq(ffree(), ffree0);
}
END_TEST

START_TEST(test_unlink_links_and_rename)
{
	uint64_t ffree0 = ffree(), bfree0 = bfree(), f, a, b;
	struct mfs_ino *pf, *pb;
	struct stat st;

	/* two hard links: the first unlink keeps it, the second frees it */
	f = mk_data("f", 1);
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "f2", &st), 0);
	pf = pin(f);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_nlink, 1);
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f2"), 0);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_uint_eq(ffree(), ffree0);
	ck_assert_uint_eq(bfree(), bfree0);
	mfs_iunpin(fs, pf);

	/* rename over a pinned target: the target goes in the rename's transaction */
	a = mk_data("a", 1);
	b = mk_data("b", 2);
	pb = pin(b);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "a", ROOT, "b", 0), 0);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_int_eq(mfs_getattr(fs, b, &st), -ENOENT);
	ck_assert_uint_eq(look(ROOT, "b"), a);
	ck_assert_uint_eq(ffree(), ffree0 - 1);
	ck_assert_uint_eq(bfree(), bfree0 - 1);
	mfs_iunpin(fs, pb);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "b"), 0);
	ck_assert_uint_eq(ffree(), ffree0);
	ck_assert_uint_eq(bfree(), bfree0);
}
END_TEST

/* --- an unlink racing calls by number (an open, a getattr) on the inode it frees ------ */

static _Atomic uint64_t race_ino;
static atomic_bool race_stop;
static atomic_ulong race_got, race_gone;

/* Take a reference on the current number, read, drop it: what an open and a read do. */
static void *race_user(void *arg)
{
	struct mfs_ino *ip;
	char buf[8];

	(void)arg;
	while (!atomic_load(&race_stop)) {
		uint64_t ino = atomic_load(&race_ino);
		int ret = mfs_iget(fs, ino, &ip);

		if (ret == -ENOENT) {
			atomic_fetch_add(&race_gone, 1);
			continue;
		}
		ck_assert_int_eq(ret, 0);
		ck_assert_uint_eq(ip->ino, ino);
		ck_assert_int_ge(mfs_read(fs, ino, buf, sizeof(buf), 0), 0);
		mfs_iput(fs, ip);
		atomic_fetch_add(&race_got, 1);
	}
	return NULL;
}

START_TEST(test_unlink_races_users)
{
	uint64_t ffree0 = ffree(), bfree0 = bfree(), ino;
	struct mfs_ino *pinned;
	pthread_t th[2];
	unsigned i;

	atomic_store(&race_stop, false);
	atomic_store(&race_ino, mk_data("r", 1));
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_user, NULL), 0);
	for (i = 0; i < 2000; i++) {
		ino = atomic_load(&race_ino);
		pinned = pin(ino); /* the kernel knows it */
		ck_assert_int_eq(mfs_link(fs, ino, ROOT, "r2", NULL), 0);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, i % 2 ? "r" : "r2"), 0);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, i % 2 ? "r2" : "r"), 0);
		/* freed now or by the racing user's mfs_iput: never an orphan left */
		atomic_store(&race_ino, mk_data("r", 1));
		mfs_iunpin(fs, pinned);
	}
	atomic_store(&race_stop, true);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "r"), 0);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_uint_eq(ffree(), ffree0);
	ck_assert_uint_eq(bfree(), bfree0);
	ck_assert_uint_gt(atomic_load(&race_got), 0);
}
END_TEST

void namei_unlink_tests(TCase *tc)
{
	tcase_add_test(tc, test_unlink_pinned_frees_at_once);
	tcase_add_test(tc, test_unlink_open_frees_at_last_user);
	tcase_add_test(tc, test_lookup_get_holds_number);
	tcase_add_test(tc, test_create_get_holds_number);
	tcase_add_test(tc, test_unlink_links_and_rename);
	tcase_add_test(tc, test_unlink_races_users);
}
