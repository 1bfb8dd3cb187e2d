/* SPDX-License-Identifier: MIT */
/*
 * test_namei_persist.c: persistence across unmount/mount; inode and
 * metadata exhaustion and recovery; generation numbers of reused inodes; an
 * unlinked open inode freed at its last reference, or after a crash by the
 * orphan list at the next mount; read-only mounts refuse changes and write
 * nothing; operations from several threads.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "namei_util.h"

/* --- persistence, ENOSPC, orphans, read-only ------------------------------------------------ */

START_TEST(test_persistence)
{
	struct listing l = {0};
	uint64_t d, e, f, s;
	struct stat st;
	char buf[64];

	d = mkd(ROOT, "d");
	e = mkd(d, "e");
	f = mk(e, "f", S_IFREG | 0640);
	ck_assert_int_eq(mfs_symlink(fs, d, "s", "../x", 5, 6, &st), 0);
	s = st.st_ino;
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "f2", &st), 0);
	remount();
	remount();
	ck_assert_uint_eq(look(ROOT, "d"), d);
	ck_assert_uint_eq(look(d, "e"), e);
	ck_assert_uint_eq(look(e, "f"), f);
	ck_assert_uint_eq(look(ROOT, "f2"), f);
	ck_assert_uint_eq(look(d, "s"), s);
	ck_assert_uint_eq(look(e, ".."), d);
	ck_assert_int_eq(nlink(f), 2);
	ck_assert_int_eq(nlink(d), 3);
	ck_assert_int_eq(getattr(f).st_mode, S_IFREG | 0640);
	ck_assert_int_eq(mfs_readlink(fs, s, buf, sizeof(buf)), 4);
	ck_assert_int_eq(mfs_readdir(fs, d, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 4);
	list_free(&l);
	ck_assert_int_eq(fs->sb.mount_count, 3);
	{
		struct statvfs sv;

		ck_assert_int_eq(mfs_statfs(fs, &sv), 0);
		ck_assert_uint_eq(sv.f_bsize, 4096);
		ck_assert_uint_eq(sv.f_namemax, 255);
		ck_assert_uint_eq(sv.f_blocks, fs->sb.data_len);
		ck_assert_uint_eq(sv.f_files, fs->sb.nr_inodes);
		ck_assert_uint_eq(sv.f_ffree, fs->sb.nr_inodes - 5);
		ck_assert_uint_le(sv.f_bfree, sv.f_blocks);
		ck_assert_uint_ne(sv.f_fsid, 0);
	}
	ck_assert_uint_eq(fs->sb.state & MFS_STATE_DIRTY, MFS_STATE_DIRTY);
}
END_TEST

START_TEST(test_enospc_inodes)
{
	struct stat st;
	char name[32];
	uint64_t nr, made = 0, meta;
	int ret, k;

	teardown();
	setup_args("-N 16", "32M");
	nr = fs->sb.nr_inodes;
	ck_assert_uint_eq(ffree(), nr - 1);
	meta = fs->sb.free_meta;
	for (k = 0;; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		ret = k % 4 == 3 ? mfs_mkdir(fs, ROOT, name, 0755, 0, 0, &st)
		                 : mfs_mknod(fs, ROOT, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
		made++;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_uint_eq(made, nr - 1);
	ck_assert_uint_eq(ffree(), 0);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "sl", "t", 0, 0, &st), -ENOSPC);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "dd", 0755, 0, 0, &st), -ENOSPC);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "sl", &st), -ENOENT);
	/* still consistent and usable */
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f0"), 0);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "f3"), 0);
	ck_assert_uint_eq(ffree(), 2);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "sl", "t", 0, 0, &st), 0);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "dd", 0755, 0, 0, &st), 0);
	ck_assert_uint_eq(ffree(), 0);
	remount();
	ck_assert_uint_eq(ffree(), 0);
	ck_assert_uint_ne(look(ROOT, "sl"), 0);
	ck_assert_uint_ne(look(ROOT, "dd"), 0);
	for (k = 1; k < (int)made; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		if (k == 3)
			continue;
		ck_assert_msg(look(ROOT, name) != 0, "%s lost", name);
	}
	for (k = 1; k < (int)made; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		if (k == 3)
			continue;
		ck_assert_int_eq(
		        k % 4 == 3 ? mfs_rmdir(fs, ROOT, name) : mfs_unlink(fs, ROOT, name), 0);
	}
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "sl"), 0);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "dd"), 0);
	ck_assert_uint_eq(ffree(), nr - 1);
	ck_assert_uint_eq(fs->sb.free_meta, meta);
	ck_assert_int_eq(nlink(ROOT), 2);
}
END_TEST

/* The generation of inode @ino (0 if it cannot be read). */
static uint64_t generation(uint64_t ino)
{
	struct mfs_ino *ip;
	uint64_t gen;

	if (mfs_iget(fs, ino, &ip))
		return 0;
	gen = ip->di.generation;
	mfs_iput(fs, ip);
	return gen;
}

/* Set the generation kept in free inode slot @ino, as a delete long ago would have left it. */
static void slot_set_generation(uint64_t ino, uint64_t gen)
{
	uint64_t blk = fs->sb.inode_table_start + (ino - 1) / MFS_INODES_PER_BLOCK;
	size_t off = sizeof(struct mfs_meta_hdr) +
	             (size_t)((ino - 1) % MFS_INODES_PER_BLOCK) * MFS_INODE_SIZE;
	struct mfs_inode *di;
	struct mfs_txn *txn;
	struct mfs_buf *b;

	ck_assert_int_eq(mfs_txn_begin(fs, &txn), 0);
	ck_assert_int_eq(mfs_meta_read(fs, blk, MFS_T_INODES, &b), 0);
	mfs_lock(&b->lock);
	di = (struct mfs_inode *)(b->data + off);
	ck_assert_uint_eq(di->mode, 0);
	di->generation = gen;
	mfs_txn_dirty(txn, b);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
}

/*
 * A reused inode number gets a generation that differs from its last user's
 * in the low 32 bits: file handles carry no more (the kernel's i_generation),
 * so the old user's handles must not open the new file.
 */
START_TEST(test_generation_reuse)
{
	uint64_t a, b, last = 0, gen_a;
	struct stat st;
	char name[32];
	int k, ret;

	teardown();
	setup_args("-N 16", "32M");
	a = mk(ROOT, "a", S_IFREG | 0644);
	gen_a = generation(a);
	ck_assert_uint_ne(gen_a, 0);
	/* fill the table, so that the next create must take a's slot */
	for (k = 0;; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		ret = mfs_mknod(fs, ROOT, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (ret)
			break;
		last = generation(st.st_ino);
		ck_assert_uint_gt(last, gen_a);
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "a"), 0);
	ck_assert_uint_eq(generation(a), 0); /* freed */
	/* the slot's last user: same low 32 bits as the generation the next create would take */
	ck_assert_uint_gt(last + 1, 1ull << 32);
	slot_set_generation(a, last + 1 - (1ull << 32));
	b = mk(ROOT, "b", S_IFREG | 0644);
	ck_assert_uint_eq(b, a);
	ck_assert_uint_ne((uint32_t)generation(b), (uint32_t)(last + 1));
	ck_assert_uint_gt(generation(b), last + 1 - (1ull << 32));
	gen_a = generation(b);
	remount();
	ck_assert_uint_eq(look(ROOT, "b"), b);
	ck_assert_uint_eq(generation(b), gen_a);
}
END_TEST

START_TEST(test_orphans)
{
	struct mfs_ino *ip;
	struct stat st;
	uint64_t f, g, before = ffree();
	char err[256];

	/* unlinked while referenced: lives on, freed at the last reference */
	f = mk(ROOT, "f", S_IFREG | 0644);
	ck_assert_int_eq(mfs_write(fs, f, "data", 4, 0), 4);
	ck_assert_int_eq(mfs_iget(fs, f, &ip), 0);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "f", &st), -ENOENT);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_nlink, 0);
	ck_assert_int_eq(mfs_orphan_count(fs), 1);
	ck_assert_int_eq(ffree(), before - 1);
	mfs_iput(fs, ip);
	ck_assert_int_eq(mfs_getattr(fs, f, &st), -ENOENT);
	ck_assert_int_eq(ffree(), before);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);

	/*
	 * The emptied orphan tree keeps its root leaf: the next unlink of a
	 * referenced file allocates no metadata block (and frees none).
	 */
	{
		uint64_t root = fs->sb.orphan_root, meta;

		ck_assert_uint_ne(root, 0);
		mk(ROOT, "keep", S_IFREG | 0644); /* the directory's tree stays */
		f = mk(ROOT, "f2", S_IFREG | 0644);
		ck_assert_int_eq(mfs_iget(fs, f, &ip), 0);
		meta = fs->sb.free_meta;
		ck_assert_int_eq(mfs_unlink(fs, ROOT, "f2"), 0);
		ck_assert_int_eq(mfs_orphan_count(fs), 1);
		ck_assert_uint_eq(fs->sb.orphan_root, root);
		mfs_iput(fs, ip);
		ck_assert_int_eq(mfs_orphan_count(fs), 0);
		ck_assert_uint_eq(fs->sb.orphan_root, root);
		ck_assert_uint_eq(fs->sb.free_meta, meta);
		remount();
		ck_assert_uint_eq(fs->sb.orphan_root, root);
		ck_assert_int_eq(mfs_orphan_count(fs), 0);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, "keep"), 0);
	}

	/* the same, then a crash after the commit: the next mount frees it */
	g = mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_int_eq(mfs_write(fs, g, "data", 4, 0), 4);
	ck_assert_int_eq(mfs_iget(fs, g, &ip), 0);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "g"), 0);
	ck_assert_int_eq(mfs_sync(fs), 0);
	mfs_crash(fs); /* frees ip with everything else, writes nothing */
	fs = NULL;
	ck_assert_int_eq(mount_opts(false, err, sizeof(err)), 0);
	ck_assert_int_eq(mfs_getattr(fs, g, &st), -ENOENT);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, "g", &st), -ENOENT);
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_int_eq(ffree(), before);
	remount();
	ck_assert_int_eq(mfs_orphan_count(fs), 0);
	ck_assert_int_eq(ffree(), before);
}
END_TEST

START_TEST(test_read_only)
{
	struct listing l = {0};
	struct stat st, in = {0};
	uint64_t f, d, h;
	char err[256] = "";

	f = mk(ROOT, "f", S_IFREG | 0644);
	d = mkd(ROOT, "d");
	umount_fs();
	h = file_hash(img);
	ck_assert_int_eq(mount_opts(true, err, sizeof(err)), 0);
	ck_assert(fs->read_only);
	ck_assert_uint_eq(look(ROOT, "f"), f);
	ck_assert_int_eq(mfs_readdir(fs, ROOT, 0, list_fn, &l), 0);
	ck_assert_uint_eq(l.n, 4);
	list_free(&l);
	ck_assert_int_eq(mfs_mknod(fs, ROOT, "x", S_IFREG | 0644, 0, 0, 0, &st), -EROFS);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, "x", 0755, 0, 0, &st), -EROFS);
	ck_assert_int_eq(mfs_symlink(fs, ROOT, "x", "y", 0, 0, &st), -EROFS);
	ck_assert_int_eq(mfs_link(fs, f, ROOT, "x", &st), -EROFS);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), -EROFS);
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "d"), -EROFS);
	ck_assert_int_eq(mfs_rename(fs, ROOT, "f", ROOT, "g", 0), -EROFS);
	in.st_mode = 0600;
	ck_assert_int_eq(mfs_setattr(fs, f, &in, MFS_SET_MODE, &st), -EROFS);
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_uint_eq(look(ROOT, "d"), d);
	umount_fs();
	ck_assert_uint_eq(file_hash(img), h);

	/* a journal that needs replaying: refused read-only, nothing written */
	mount_fs();
	mk(ROOT, "g", S_IFREG | 0644);
	ck_assert_int_eq(mfs_sync(fs), 0);
	mfs_crash(fs);
	fs = NULL;
	h = file_hash(img);
	ck_assert_int_eq(mount_opts(true, err, sizeof(err)), -EROFS);
	ck_assert_ptr_nonnull(strstr(err, "replay"));
	ck_assert_uint_eq(file_hash(img), h);
	mount_fs();
	ck_assert_uint_ne(look(ROOT, "g"), 0);
}
END_TEST

START_TEST(test_enospc_meta)
{
	char name[300];
	struct stat st;
	uint64_t f, meta, links = 0;
	int ret, k;

	teardown();
	setup_args("-N 16", "32M");
	meta = fs->sb.free_meta;
	f = mk(ROOT, "f", S_IFREG | 0644);
	memset(name, 'n', 250);
	/* long names: every leaf holds a dozen entries, the metadata zone fills up */
	for (k = 0;; k++) {
		snprintf(name + 240, 20, "%09d", k);
		ret = mfs_link(fs, f, ROOT, name, &st);
		if (ret)
			break;
		links++;
	}
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_uint_gt(links, 1000);
	ck_assert_uint_eq(nlink(f), links + 1);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, name, &st), -ENOENT);
	ck_assert_int_eq(mfs_mkdir(fs, ROOT, name, 0755, 0, 0, &st), -ENOSPC);
	ck_assert_int_eq(mfs_lookup(fs, ROOT, name, &st), -ENOENT);
	ck_assert_uint_eq(nlink(f), links + 1);
	/* usable: delete some, create again */
	for (k = 0; k < 100; k++) {
		snprintf(name + 240, 20, "%09d", k);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, name), 0);
	}
	ck_assert_uint_eq(nlink(f), links + 1 - 100);
	ck_assert_uint_ne(mkd(ROOT, "d"), 0);
	remount();
	ck_assert_uint_eq(nlink(f), links + 1 - 100);
	for (k = 100; k < (int)links; k++) {
		snprintf(name + 240, 20, "%09d", k);
		ck_assert_msg(look(ROOT, name) == f, "link %d lost", k);
		ck_assert_int_eq(mfs_unlink(fs, ROOT, name), 0);
	}
	ck_assert_int_eq(mfs_rmdir(fs, ROOT, "d"), 0);
	ck_assert_int_eq(mfs_unlink(fs, ROOT, "f"), 0);
	ck_assert_uint_eq(fs->sb.free_meta, meta);
	ck_assert_uint_eq(ffree(), fs->sb.nr_inodes - 1);
}
END_TEST

/* Threads creating, renaming (also across directories) and removing in shared directories. */
struct worker {
	pthread_t th;
	unsigned id;
	uint64_t d[2];
	int err;
};

static void *worker_fn(void *arg)
{
	struct worker *w = arg;
	char a[32], b[32];
	struct stat st;
	int ret;

	for (unsigned i = 0; i < 300 && !w->err; i++) {
		uint64_t d0 = w->d[i % 2], d1 = w->d[(i + 1) % 2];

		snprintf(a, sizeof(a), "w%u-%u", w->id, i);
		snprintf(b, sizeof(b), "w%u-%u-r", w->id, i);
		ret = i % 5 == 0 ? mfs_mkdir(fs, d0, a, 0755, 0, 0, &st)
		                 : mfs_mknod(fs, d0, a, S_IFREG | 0644, 0, 0, 0, &st);
		if (!ret)
			ret = mfs_rename(fs, d0, a, d1, b, 0);
		if (!ret)
			ret = mfs_lookup(fs, d1, b, &st);
		if (!ret && i % 3 == 0)
			ret = i % 5 == 0 ? mfs_rmdir(fs, d1, b) : mfs_unlink(fs, d1, b);
		if (!ret && i % 7 == 0)
			ret = mfs_rename(fs, w->d[0], "shared", w->d[1], "shared", RENAME_EXCHANGE);
		if (ret == -ENOENT && i % 7 == 0)
			ret = 0;
		if (ret)
			w->err = ret;
	}
	return NULL;
}

START_TEST(test_threads)
{
	struct worker w[4];
	struct listing l = {0};
	uint64_t d[2];
	unsigned i;

	d[0] = mkd(ROOT, "d0");
	d[1] = mkd(ROOT, "d1");
	mk(d[0], "shared", S_IFREG | 0644);
	mkd(d[1], "shared");
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){.id = i, .d = {d[0], d[1]}};
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, worker_fn, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(w[i].th, NULL);
		ck_assert_msg(w[i].err == 0, "worker %u: %d", i, w[i].err);
	}
	remount();
	ck_assert_int_eq(mfs_readdir(fs, d[0], 0, list_fn, &l), 0);
	ck_assert_int_eq(mfs_readdir(fs, d[1], 0, list_fn, &l), 0);
	/* 4 workers x 200 survivors, 2 "shared", 2 x ("." "..") */
	ck_assert_uint_eq(l.n, 4 * 200 + 2 + 4);
	list_free(&l);
	/* directory link counts: 2 + subdirectories */
	ck_assert_uint_eq(nlink(d[0]) + nlink(d[1]), 4 + 1 + 4 * 40);
}
END_TEST

/*
 * An inode nobody holds is copied from its slot by each operation.  A copy
 * made just before another thread loaded the inode, changed it and dropped it
 * must not be installed: the copy is stopped right after it is made (the
 * test binary is linked with --wrap=mfs_inode_read), another mkdir runs to
 * completion meanwhile, and neither link is lost.
 */
int __real_mfs_inode_read(struct mfs *fs, uint64_t ino, struct mfs_inode *di);
int __wrap_mfs_inode_read(struct mfs *fs, uint64_t ino, struct mfs_inode *di);

static struct {
	atomic_bool armed;
	pthread_t thread;
	sem_t copied, go;
} stall;

int __wrap_mfs_inode_read(struct mfs *fs, uint64_t ino, struct mfs_inode *di)
{
	int ret = __real_mfs_inode_read(fs, ino, di);

	if (atomic_load(&stall.armed) && pthread_equal(pthread_self(), stall.thread)) {
		atomic_store(&stall.armed, false);
		sem_post(&stall.copied);
		sem_wait(&stall.go);
	}
	return ret;
}

static void *stalled_mkdir(void *arg)
{
	struct stat st;

	stall.thread = pthread_self();
	atomic_store(&stall.armed, true);
	return (void *)(intptr_t)mfs_mkdir(fs, *(uint64_t *)arg, "stalled", 0755, 0, 0, &st);
}

START_TEST(test_stale_inode_copy)
{
	uint64_t d = mkd(ROOT, "d");
	struct stat st;
	pthread_t th;
	void *ret;

	ck_assert_int_eq(sem_init(&stall.copied, 0, 0), 0);
	ck_assert_int_eq(sem_init(&stall.go, 0, 0), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, stalled_mkdir, &d), 0);
	sem_wait(&stall.copied); /* it holds a copy of d with 2 links */
	ck_assert_int_eq(mfs_mkdir(fs, d, "meanwhile", 0755, 0, 0, &st), 0);
	sem_post(&stall.go);
	pthread_join(th, &ret);
	ck_assert_int_eq((int)(intptr_t)ret, 0);
	ck_assert_uint_eq(nlink(d), 4);
	remount();
	ck_assert_uint_eq(nlink(d), 4);
	ck_assert_uint_ne(look(d, "meanwhile"), 0);
	sem_destroy(&stall.copied);
	sem_destroy(&stall.go);
}
END_TEST

void namei_persist_tests(TCase *tc)
{
	tcase_add_test(tc, test_stale_inode_copy);
	tcase_add_test(tc, test_persistence);
	tcase_add_test(tc, test_enospc_inodes);
	tcase_add_test(tc, test_generation_reuse);
	tcase_add_test(tc, test_orphans);
	tcase_add_test(tc, test_read_only);
	tcase_add_test(tc, test_enospc_meta);
	tcase_add_test(tc, test_threads);
}
