/* SPDX-License-Identifier: MIT */
/*
 * The orphan tree (docs/FORMAT.md §10): inodes unlinked while still in use,
 * being freed in steps, or with a truncate under way, keyed by inode number,
 * rooted in the superblock (orphan_root/depth) under fs->super_lock.  It
 * calls the B+tree and the roots record (roots.c: a changed root is journaled
 * with the transaction that changed it); inode.c, file.c and namei.c add and
 * remove entries, and the mount (mount.c) finishes the work of those a crash
 * left.
 */
#include <errno.h>
#include <stdlib.h>

#include "mfs_int.h"

static struct mfs_btree orphan_tree(struct mfs *fs)
{
	struct mfs_btree bt = {.root = fs->sb.orphan_root,
	                       .depth = (uint16_t)fs->sb.orphan_depth,
	                       .kind = MFS_TREE_ORPHAN,
	                       .flags = MFS_BT_KEEP_ROOT,
	                       .owner = 0};
	return bt;
}

static int orphan_change(struct mfs *fs, struct mfs_txn *txn, uint64_t ino, bool add)
{
	struct mfs_btree bt;
	int ret, r;

	pthread_mutex_lock(&fs->super_lock);
	bt = orphan_tree(fs);
	ret = add ? mfs_bt_insert(fs, txn, &bt, ino, NULL, 0) : mfs_bt_delete(fs, txn, &bt, ino);
	if (bt.root != fs->sb.orphan_root || bt.depth != fs->sb.orphan_depth) {
		fs->sb.orphan_root = bt.root;
		fs->sb.orphan_depth = bt.depth;
		r = mfs_super_roots_log(fs, txn);
		ret = ret ? ret : r;
	}
	pthread_mutex_unlock(&fs->super_lock);
	return ret;
}

int mfs_orphan_add(struct mfs *fs, struct mfs_txn *txn, uint64_t ino)
{
	return orphan_change(fs, txn, ino, true);
}

int mfs_orphan_del(struct mfs *fs, struct mfs_txn *txn, uint64_t ino)
{
	return orphan_change(fs, txn, ino, false);
}

static int orphan_count_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	(void)key;
	(void)val;
	(void)len;
	++*(int64_t *)arg;
	return 0;
}

int64_t mfs_orphan_count(struct mfs *fs)
{
	struct mfs_btree bt;
	int64_t n = 0;
	int ret;

	pthread_mutex_lock(&fs->super_lock);
	bt = orphan_tree(fs);
	ret = bt.root ? mfs_bt_iterate(fs, &bt, 0, orphan_count_fn, &n) : 0;
	pthread_mutex_unlock(&fs->super_lock);
	return ret ? ret : n;
}

struct orphan_list {
	uint64_t *v;
	size_t n, cap;
};

static int orphan_collect(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct orphan_list *l = arg;

	(void)val;
	(void)len;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = key;
	return 0;
}

int mfs_orphan_list(struct mfs *fs, uint64_t **inos, size_t *nr)
{
	struct orphan_list l = {0};
	struct mfs_btree bt = orphan_tree(fs);
	int ret;

	ret = mfs_bt_iterate(fs, &bt, 0, orphan_collect, &l);
	*inos = l.v;
	*nr = l.n;
	return ret;
}
