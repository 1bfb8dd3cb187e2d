/* SPDX-License-Identifier: MIT */
/*
 * What the namespace files share (docs/FORMAT.md §7.3, §7.4): dir.c (the
 * entry B+tree of a directory, lookup, getattr, readdir), namei.c (create,
 * link, unlink, rmdir, readlink) and rename.c.  The small helpers are
 * inline here: lookup takes them on every request.
 *
 * Every operation is one transaction, taken after the inode locks (lock
 * order: rename_lock -> inode locks in ascending inode number -> the
 * journal).  mfs_iput() is never called inside a transaction handle
 * (eviction opens its own).
 */
#ifndef MENDFS_FS_NAMEI_H
#define MENDFS_FS_NAMEI_H

#include <string.h>

#include "mfs_int.h"

#define NAME_MAX_LEN MFS_NAME_MAX
#define SYMLINK_MAX  MFS_SYMLINK_MAX

/* A directory entry found by name. */
struct dent {
	uint64_t key;
	uint64_t ino;
	uint8_t type;
};

static inline uint8_t mode_dtype(uint32_t mode)
{
	return (uint8_t)((mode & S_IFMT) >> 12);
}

/* Validate a name to store or look up: 0, -EINVAL or -ENAMETOOLONG. */
static inline int name_check(const char *name, size_t *lenp)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strnlen(name, NAME_MAX_LEN + 1);
	if (len > NAME_MAX_LEN)
		return -ENAMETOOLONG;
	if (len == 0 || memchr(name, '/', len))
		return -EINVAL;
	*lenp = len;
	return 0;
}

static inline bool is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

static inline void touch_mc(struct mfs_ino *ip, int64_t now)
{
	ip->di.mtime_ns = ip->di.ctime_ns = now;
}

/* The directory @dir, referenced: -ENOTDIR if it is not one. */
static inline int mfs_dir_get(struct mfs *fs, uint64_t dir, struct mfs_ino **dpp)
{
	struct mfs_ino *dp;
	int ret;

	ret = mfs_iget(fs, dir, &dp);
	if (ret)
		return ret;
	if (!S_ISDIR(dp->di.mode)) {
		mfs_iput(fs, dp);
		return -ENOTDIR;
	}
	*dpp = dp;
	return 0;
}

static inline void stat_ino(struct mfs_ino *ip, struct stat *st)
{
	pthread_rwlock_rdlock(&ip->lock);
	mfs_inode_to_stat(ip, st);
	pthread_rwlock_unlock(&ip->lock);
}

/* --- sets of locked inodes ------------------------------------------------------------ */

struct lockset {
	struct mfs_ino *v[4];
	unsigned n;
};

static inline void ls_add(struct lockset *ls, struct mfs_ino *ip)
{
	unsigned i;

	if (!ip)
		return;
	for (i = 0; i < ls->n; i++)
		if (ls->v[i] == ip)
			return;
	ls->v[ls->n++] = ip;
}

/* Write-lock the set in ascending inode number. */
static inline void ls_lock(struct lockset *ls)
{
	unsigned i, j;

	for (i = 1; i < ls->n; i++)
		for (j = i; j > 0 && ls->v[j - 1]->ino > ls->v[j]->ino; j--) {
			struct mfs_ino *t = ls->v[j];

			ls->v[j] = ls->v[j - 1];
			ls->v[j - 1] = t;
		}
	for (i = 0; i < ls->n; i++)
		pthread_rwlock_wrlock(&ls->v[i]->lock);
}

static inline void ls_unlock(struct lockset *ls)
{
	unsigned i = ls->n;

	while (i--)
		pthread_rwlock_unlock(&ls->v[i]->lock);
}

/* --- directory entries (dir.c) ------------------------------------------------------- */

/*
 * Look @name (@len bytes) up in directory @dp (its lock held).  0 and *de,
 * or -ENOENT and (if @free_key) the key an insert of @name would take, or
 * -errno (-ENOSPC: 65536 names share its hash bits).
 */
int mfs_dir_find(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len, struct dent *de,
                 uint64_t *free_key);
/*
 * Find @name in @dp and take a reference on its inode into *ipp (under @dp's
 * shared lock, so that it is the inode the entry names).  0, -ENOENT,
 * -EUCLEAN (the entry names a free inode) or -errno.
 */
int mfs_dir_find_get(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len,
                     struct dent *de, struct mfs_ino **ipp);
/* Insert entry @key (from mfs_dir_find) naming @ip in @dp, in @txn.  0 or -errno. */
int mfs_dir_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key,
                   const struct mfs_ino *ip, const char *name, size_t len);
/* Point the existing entry @key (named @name) at @ip: same length, no allocation. */
int mfs_dir_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key,
                   const struct mfs_ino *ip, const char *name, size_t len);
/* Delete entry @key of @dp in @txn.  0 or -errno. */
int mfs_dir_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key);

/* --- links (namei.c) ------------------------------------------------------------------ */

/*
 * A link of @ip went, in @txn (the caller holds @ip's lock and one
 * reference): nlink and ctime; at zero, freed now or put on the orphan list.
 * Returns 0 or -errno.
 */
int mfs_drop_link(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, int64_t now);

#endif /* MENDFS_FS_NAMEI_H */
