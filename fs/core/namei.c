/* SPDX-License-Identifier: MIT */
/*
 * Directories and the namespace operations (docs/FORMAT.md §7.3, §7.4).
 *
 * A directory's entries live in its entry B+tree (MFS_TREE_DIR, root in
 * di.dir_root/dir_depth), keyed by the name key: bits 16..62 of
 * XXH3-64(name, dir_hash_seed) and a 16-bit collision counter.  Lookup scans
 * the keys sharing the 47 hash bits (usually one) comparing names; insert takes the
 * lowest free counter.  "." and ".." are not stored.  readdir cookies are the
 * keys themselves (1 and 2 for "." and ".."), so a listing resumed at a
 * cookie continues with the next greater key whatever was inserted or
 * deleted meanwhile: no entry present throughout is skipped or repeated.
 *
 * Every operation is one transaction, taken after the inode locks (lock
 * order: rename_lock -> inode locks in ascending inode number -> the
 * journal).  An operation that needs a second inode whose number it only
 * learns from a directory entry (unlink, rmdir, rename) finds it under a
 * shared lock, takes its reference, drops the lock, locks everything in
 * order and looks the entry up again; if it changed meanwhile it starts over.
 * mfs_iput() is never called inside a transaction handle (eviction opens its
 * own).
 *
 * Failure leaves the filesystem as it was: allocations happen before the
 * entry tree changes (the B+tree leaves itself unchanged when it cannot
 * allocate), and a new inode whose entry could not be inserted is given back
 * in the same transaction.  An inode whose last link goes is freed in the
 * same transaction, or, if still referenced (open), put on the orphan list
 * and freed at its last mfs_iput().
 */
#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "acl.h"
#include "atime.h"
#include "mfs_int.h"

#define NAME_MAX_LEN 255u
#define DIRENT_HDR   offsetof(struct mfs_dirent, name) /* 10 bytes */
/* bits 16..62 of the hash: bit 63 stays clear so every readdir cookie is a
 * non-negative off_t (the kernel's seekdir rejects negative directory offsets) */
#define KEY_HASH_MASK 0x7fffffffffff0000ull
#define SYMLINK_MAX   4095u

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
static int name_check(const char *name, size_t *lenp)
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

static bool is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

static uint64_t name_base(struct mfs *fs, const char *name, size_t len)
{
	uint64_t h = XXH3_64bits_withSeed(name, len, fs->sb.dir_hash_seed) & KEY_HASH_MASK;

	return h ? h : 0x10000ull;
}

static struct mfs_btree dir_tree(const struct mfs_ino *dp)
{
	struct mfs_btree bt = {.root = dp->di.dir_root,
	                       .depth = dp->di.dir_depth,
	                       .kind = MFS_TREE_DIR,
	                       .owner = dp->ino};
	return bt;
}

static void dir_tree_store(struct mfs_ino *dp, const struct mfs_btree *bt)
{
	dp->di.dir_root = bt->root;
	dp->di.dir_depth = bt->depth;
}

struct find_ctx {
	const char *name;
	size_t len;
	uint64_t base;
	uint64_t next_c; /* the counter expected next if there were no gap */
	uint64_t free_key;
	bool have_free, found;
	struct dent de;
	int err;
};

/*
 * Decode a directory entry value (leaf values are not aligned: no struct
 * access).  Returns 0 or -EUCLEAN.
 */
static int dirent_parse(uint64_t key, const void *val, uint16_t vlen, struct dent *de,
                        const uint8_t **name, unsigned *name_len)
{
	const uint8_t *v = val;

	if (vlen < DIRENT_HDR + 1 ||
	    v[offsetof(struct mfs_dirent, name_len)] != vlen - DIRENT_HDR) {
		fprintf(stderr, "mendfs: directory entry %#llx: value of %u bytes, name of %u\n",
		        (unsigned long long)key, vlen,
		        vlen >= DIRENT_HDR ? v[offsetof(struct mfs_dirent, name_len)] : 0);
		return -EUCLEAN;
	}
	de->key = key;
	memcpy(&de->ino, v + offsetof(struct mfs_dirent, ino), sizeof(de->ino));
	de->type = v[offsetof(struct mfs_dirent, type)];
	*name = v + DIRENT_HDR;
	*name_len = vlen - DIRENT_HDR;
	return 0;
}

static int find_fn(void *arg, uint64_t key, const void *val, uint16_t vlen)
{
	struct find_ctx *c = arg;
	uint64_t ctr = key & 0xffff;
	const uint8_t *name;
	unsigned name_len;
	struct dent de;

	if ((key & KEY_HASH_MASK) != c->base)
		return 1;
	if (!c->have_free && ctr != c->next_c) {
		c->free_key = c->base | c->next_c;
		c->have_free = true;
	}
	c->next_c = ctr + 1;
	c->err = dirent_parse(key, val, vlen, &de, &name, &name_len);
	if (c->err)
		return 1;
	if (name_len == c->len && !memcmp(name, c->name, c->len)) {
		c->found = true;
		c->de = de;
		return 1;
	}
	return 0;
}

/*
 * Look @name up in directory @dp (its lock held).  0 and *de, or -ENOENT and
 * (if @free_key) the key an insert of @name would take, or -errno.
 */
static int dir_find(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len,
                    struct dent *de, uint64_t *free_key)
{
	struct mfs_btree bt = dir_tree(dp);
	struct find_ctx c = {.name = name, .len = len, .base = name_base(fs, name, len)};
	int ret;

	ret = mfs_bt_iterate(fs, &bt, c.base, find_fn, &c);
	if (ret < 0)
		return ret;
	if (c.err)
		return c.err;
	if (c.found) {
		if (de)
			*de = c.de;
		return 0;
	}
	if (free_key) {
		if (!c.have_free) {
			if (c.next_c > 0xffff)
				return -ENOSPC; /* 65536 names sharing 47 hash bits */
			c.free_key = c.base | c.next_c;
		}
		*free_key = c.free_key;
	}
	return -ENOENT;
}

static uint16_t dirent_make(uint8_t *buf, uint64_t ino, uint8_t type, const char *name, size_t len)
{
	memcpy(buf + offsetof(struct mfs_dirent, ino), &ino, sizeof(ino));
	buf[offsetof(struct mfs_dirent, type)] = type;
	buf[offsetof(struct mfs_dirent, name_len)] = (uint8_t)len;
	memcpy(buf + DIRENT_HDR, name, len);
	return (uint16_t)(DIRENT_HDR + len);
}

static int dir_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key,
                      const struct mfs_ino *ip, const char *name, size_t len)
{
	uint8_t buf[DIRENT_HDR + NAME_MAX_LEN];
	uint16_t vlen = dirent_make(buf, ip->ino, mode_dtype(ip->di.mode), name, len);
	struct mfs_btree bt = dir_tree(dp);
	int ret;

	ret = mfs_bt_insert(fs, txn, &bt, key, buf, vlen);
	dir_tree_store(dp, &bt);
	if (!ret)
		dp->di.dir_entries++;
	return ret;
}

/* Point the existing entry @key (named @name) at @ip: same length, no allocation. */
static int dir_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key,
                      const struct mfs_ino *ip, const char *name, size_t len)
{
	uint8_t buf[DIRENT_HDR + NAME_MAX_LEN];
	uint16_t vlen = dirent_make(buf, ip->ino, mode_dtype(ip->di.mode), name, len);
	struct mfs_btree bt = dir_tree(dp);
	int ret;

	ret = mfs_bt_update(fs, txn, &bt, key, buf, vlen);
	dir_tree_store(dp, &bt);
	return ret;
}

static int dir_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key)
{
	struct mfs_btree bt = dir_tree(dp);
	int ret;

	ret = mfs_bt_delete(fs, txn, &bt, key);
	dir_tree_store(dp, &bt);
	if (!ret && dp->di.dir_entries)
		dp->di.dir_entries--;
	return ret;
}

static void touch_mc(struct mfs_ino *ip, int64_t now)
{
	ip->di.mtime_ns = ip->di.ctime_ns = now;
}

/* --- sets of locked inodes ------------------------------------------------------------ */

struct lockset {
	struct mfs_ino *v[4];
	unsigned n;
};

static void ls_add(struct lockset *ls, struct mfs_ino *ip)
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
static void ls_lock(struct lockset *ls)
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

static void ls_unlock(struct lockset *ls)
{
	unsigned i = ls->n;

	while (i--)
		pthread_rwlock_unlock(&ls->v[i]->lock);
}

/* The directory @dir, referenced: -ENOTDIR if it is not one. */
static int get_dir(struct mfs *fs, uint64_t dir, struct mfs_ino **dpp)
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

/*
 * Find @name in @dp and take a reference on its inode (under @dp's shared
 * lock, so that it is the inode the entry names).
 */
static int find_get(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len,
                    struct dent *de, struct mfs_ino **ipp)
{
	bool bad = false;
	int ret;

	pthread_rwlock_rdlock(&dp->lock);
	ret = dir_find(fs, dp, name, len, de, NULL);
	if (!ret) {
		ret = mfs_iget(fs, de->ino, ipp);
		bad = ret == -ENOENT;
	}
	pthread_rwlock_unlock(&dp->lock);
	if (bad) {
		fprintf(stderr, "mendfs: directory %llu: entry names free inode %llu\n",
		        (unsigned long long)dp->ino, (unsigned long long)de->ino);
		ret = -EUCLEAN;
	}
	return ret;
}

/*
 * A link of @ip went (the caller holds @ip's lock and one reference).  At
 * nlink zero a small inode nobody else references is freed in this
 * transaction; any other (open files: the daemon holds references; files too
 * large for one transaction) joins the orphan list and is freed at its last
 * mfs_iput().  Nobody can take a new reference meanwhile: its last entry is
 * gone under the directory's lock, and any other user of the number already
 * holds one.
 */
static int drop_link(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, int64_t now)
{
	bool alone;
	int ret;

	if (S_ISDIR(ip->di.mode) || ip->di.nlink <= 1)
		ip->di.nlink = 0;
	else
		ip->di.nlink--;
	ip->di.ctime_ns = now;
	if (ip->di.nlink == 0) {
		ip->unlinked = true;
		mfs_atime_clean(fs, ip); /* nobody will read it through a name again */
		mfs_space_unlinked(fs);
		pthread_mutex_lock(&fs->icache_lock);
		alone = atomic_load(&ip->ref) == 1;
		pthread_mutex_unlock(&fs->icache_lock);
		/*
		 * Freed: the caller's mfs_iput() finds mode 0 and only drops it.
		 * Only a small inode is freed in this transaction; a larger one
		 * goes on the orphan list and the caller's mfs_iput() frees it
		 * in bounded steps.
		 */
		if (alone && mfs_inode_free_is_small(ip) && mfs_inode_free(fs, txn, ip) == 0)
			return 0;
		if (ip->di.iflags & MFS_IFL_ORPHAN) /* already: a truncate was cut short */
			return mfs_inode_write(fs, txn, ip);
		ret = mfs_orphan_add(fs, txn, ip->ino);
		if (!ret)
			ip->di.iflags |= MFS_IFL_ORPHAN;
		else
			/* freed at its last mfs_iput all the same; only a crash would leak it */
			fprintf(stderr, "mendfs: inode %llu: orphan list: %s\n",
			        (unsigned long long)ip->ino, strerror(-ret));
	}
	return mfs_inode_write(fs, txn, ip);
}

/* --- lookup and attributes ------------------------------------------------------------ */

static void stat_ino(struct mfs_ino *ip, struct stat *st)
{
	pthread_rwlock_rdlock(&ip->lock);
	mfs_inode_to_stat(ip, st);
	pthread_rwlock_unlock(&ip->lock);
}

int mfs_getattr(struct mfs *fs, uint64_t ino, struct stat *st)
{
	struct mfs_ino *ip;
	int ret;

	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	stat_ino(ip, st);
	mfs_iput(fs, ip);
	return 0;
}

int mfs_lookup(struct mfs *fs, uint64_t dir, const char *name, struct stat *st)
{
	struct mfs_ino *dp, *ip = NULL;
	struct dent de = {0};
	uint64_t parent;
	size_t len;
	int ret;

	ret = get_dir(fs, dir, &dp);
	if (ret)
		return ret;
	if (name && !strcmp(name, ".")) {
		stat_ino(dp, st);
		mfs_iput(fs, dp);
		return 0;
	}
	if (name && !strcmp(name, "..")) {
		pthread_rwlock_rdlock(&dp->lock);
		parent = dp->di.parent;
		pthread_rwlock_unlock(&dp->lock);
		mfs_iput(fs, dp);
		return mfs_getattr(fs, parent, st);
	}
	ret = name_check(name, &len);
	if (!ret)
		ret = find_get(fs, dp, name, len, &de, &ip);
	if (!ret) {
		stat_ino(ip, st);
		mfs_iput(fs, ip);
	}
	mfs_iput(fs, dp);
	return ret;
}

int mfs_setattr(struct mfs *fs, uint64_t ino, const struct stat *attr, unsigned valid,
                struct stat *st)
{
	struct mfs_inode *di;
	struct mfs_ino *ip;
	struct mfs_txn *txn;
	int64_t now = mfs_now_ns();
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	di = &ip->di;
	pthread_rwlock_wrlock(&ip->lock);
	if ((valid & MFS_SET_SIZE) && !S_ISREG(di->mode)) {
		ret = S_ISDIR(di->mode) ? -EISDIR : -EINVAL;
		goto unlock;
	}
	if (valid & MFS_SET_SIZE) {
		/* its own bounded transactions (frees past the new EOF), before the rest */
		ret = mfs_truncate(fs, ip, (uint64_t)attr->st_size);
		if (ret)
			goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	if (valid & MFS_SET_SIZE)
		di->mtime_ns = now;
	if (valid & MFS_SET_MODE) {
		uint32_t old = di->mode;

		di->mode = (di->mode & S_IFMT) | ((uint32_t)attr->st_mode & 07777);
		ret = mfs_acl_update_chmod(fs, txn, ip); /* the ACL's classes follow */
		if (ret) {
			di->mode = old;
			goto end;
		}
	} else if ((valid & MFS_SET_KILL_SUIDGID) && !S_ISDIR(di->mode)) {
		di->mode = mfs_mode_kill_suidgid(di->mode);
	}
	if (valid & (MFS_SET_UID | MFS_SET_GID)) {
		if (valid & MFS_SET_UID)
			di->uid = (uint32_t)attr->st_uid;
		if (valid & MFS_SET_GID)
			di->gid = (uint32_t)attr->st_gid;
		/*
		 * As Linux: chown of a non-directory drops setuid, and setgid if
		 * group-exec (unless the caller sets the mode in the same call).
		 */
		if (!S_ISDIR(di->mode) && !(valid & MFS_SET_MODE))
			di->mode = mfs_mode_kill_suidgid(di->mode);
	}
	/* setgid without group exec, by a caller outside the group (setattr_should_drop_sgid) */
	if ((valid & MFS_SET_KILL_SGID) &&
	    (valid & (MFS_SET_KILL_SUIDGID | MFS_SET_UID | MFS_SET_GID)) &&
	    !(valid & MFS_SET_MODE) && !S_ISDIR(di->mode))
		di->mode &= ~(uint32_t)S_ISGID;
	if (valid & MFS_SET_ATIME_NOW)
		di->atime_ns = now;
	else if (valid & MFS_SET_ATIME)
		di->atime_ns = mfs_ts_ns(&attr->st_atim);
	if (valid & MFS_SET_MTIME_NOW)
		di->mtime_ns = now;
	else if (valid & MFS_SET_MTIME)
		di->mtime_ns = mfs_ts_ns(&attr->st_mtim);
	if (valid & MFS_SET_CTIME)
		di->ctime_ns = mfs_ts_ns(&attr->st_ctim);
	else
		di->ctime_ns = now;
	ret = mfs_inode_write(fs, txn, ip);
end:
	r = mfs_txn_end(txn);
	ret = ret ? ret : r;
unlock:
	if (!ret && st)
		mfs_inode_to_stat(ip, st);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

/* --- creation --------------------------------------------------------------------------- */

/* A long symlink target in a data block of its own (inode fields set by the caller). */
static int symlink_block(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip,
                         const char *target, size_t len)
{
	uint64_t pblk, got;
	uint8_t *buf;
	int ret;

	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	memset(buf, 0, MFS_BLOCK_SIZE);
	memcpy(buf, target, len);
	ret = mfs_alloc_data(fs, txn, 0, 1, &pblk, &got);
	if (!ret) {
		ret = blk_write(fs->dev, pblk * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0);
		if (ret) {
			mfs_free_data(fs, txn, pblk, 1);
		} else {
			mfs_txn_ordered(txn); /* the block reaches the device before the commit */
			ip->di.u.ext[0] = (struct mfs_extent){.lblk = 0, .pblk = pblk, .len = 1};
			ip->di.nr_inline = 1;
			ip->di.blocks = 1;
		}
	}
	free(buf);
	return ret;
}

/* mknod, mkdir and symlink: a new inode @ni (type checked) named @name in @dir. */
static int create(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
                  struct stat *st)
{
	const char *target = ni->target;
	mode_t mode = ni->mode;
	struct mfs_ino *dp, *ip = NULL;
	struct mfs_txn *txn;
	uint64_t key;
	size_t len, tlen = 0;
	unsigned retries = 0, short_of = 0;
	int64_t now;
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = name_check(name, &len);
	if (ret)
		return ret;
	if (is_dot(name))
		return -EEXIST;
	if (target) {
		tlen = strnlen(target, SYMLINK_MAX + 1);
		if (tlen > SYMLINK_MAX)
			return -ENAMETOOLONG;
		if (tlen == 0)
			return -ENOENT;
	}
again:
	ret = get_dir(fs, dir, &dp);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&dp->lock);
	if (dp->di.nlink == 0) {
		ret = -ENOENT; /* removed while we held it */
		goto unlock;
	}
	if (S_ISDIR(mode) && dp->di.nlink >= UINT32_MAX - 1) {
		ret = -EMLINK;
		goto unlock;
	}
	ret = dir_find(fs, dp, name, len, NULL, &key);
	if (ret != -ENOENT) {
		ret = ret ? ret : -EEXIST;
		goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	ret = mfs_inode_new(fs, txn, mode, ni->uid, ni->gid, &ip);
	short_of = MFS_SPACE_META; /* the inode, or below the directory's tree */
	if (ret)
		goto end;
	now = ip->di.ctime_ns;
	if (S_ISCHR(mode) || S_ISBLK(mode))
		ip->di.rdev = (uint32_t)ni->rdev;
	if (S_ISDIR(mode))
		ip->di.parent = dp->ino;
	if (target) {
		ip->di.size = tlen;
		if (tlen <= MFS_INLINE_DATA) {
			memcpy(ip->di.u.data, target, tlen);
			ip->di.nr_inline = (uint16_t)tlen;
			ip->di.iflags |= MFS_IFL_INLINE_DATA;
		} else {
			ret = symlink_block(fs, txn, ip, target, tlen);
			if (ret == -ENOSPC)
				short_of = MFS_SPACE_DATA;
		}
	}
	if (!ret)
		ret = mfs_acl_inherit(fs, txn, dp, ip, ni->umask); /* mode and ACLs (acl.h) */
	if (!ret)
		ret = mfs_inode_write(fs, txn, ip);
	if (!ret)
		ret = dir_insert(fs, txn, dp, key, ip, name, len);
	if (ret) {
		/* give back what this operation took, in the same transaction */
		if (target && !(ip->di.iflags & MFS_IFL_INLINE_DATA) && ip->di.nr_inline)
			mfs_free_data(fs, txn, ip->di.u.ext[0].pblk, 1);
		if (ip->di.xattr_root)
			mfs_xattr_release(fs, txn, ip);
		mfs_inode_discard(fs, txn, ip);
		ip = NULL;
		goto end;
	}
	if (S_ISDIR(mode))
		dp->di.nlink++;
	touch_mc(dp, now);
	ret = mfs_inode_write(fs, txn, dp);
end:
	r = mfs_txn_end(txn);
	ret = ret ? ret : r;
	if (ip)
		short_of = 0; /* made: not to be made again */
unlock:
	pthread_rwlock_unlock(&dp->lock);
	if (ip) {
		if (!ret && st)
			mfs_inode_to_stat(ip, st);
		mfs_iput(fs, ip);
	}
	mfs_iput(fs, dp);
	/*
	 * An allocation short of space (everything it took given back): wait for
	 * frees under way, commit data frees, and start again, the name looked
	 * up anew (the directory is not held meanwhile).
	 */
	if (ret == -ENOSPC && short_of && mfs_space_retry(fs, short_of, &retries)) {
		short_of = 0;
		goto again;
	}
	return ret;
}

int mfs_create(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
               struct stat *st)
{
	struct mfs_new_inode n = *ni;

	switch (n.mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		n.target = NULL;
		break;
	case S_IFLNK:
		if (!n.target)
			return -EINVAL;
		n.mode = S_IFLNK | 0777;
		break;
	default:
		return -EINVAL;
	}
	n.mode &= S_IFMT | 07777;
	return create(fs, dir, name, &n, st);
}

int mfs_mknod(struct mfs *fs, uint64_t dir, const char *name, mode_t mode, dev_t rdev, uid_t uid,
              gid_t gid, struct stat *st)
{
	struct mfs_new_inode ni = {.mode = mode, .rdev = rdev, .uid = uid, .gid = gid};

	if ((mode & S_IFMT) == 0)
		ni.mode |= S_IFREG;
	else if (S_ISDIR(mode) || S_ISLNK(mode))
		return -EINVAL;
	return mfs_create(fs, dir, name, &ni, st);
}

int mfs_mkdir(struct mfs *fs, uint64_t dir, const char *name, mode_t mode, uid_t uid, gid_t gid,
              struct stat *st)
{
	struct mfs_new_inode ni = {.mode = S_IFDIR | (mode & 07777), .uid = uid, .gid = gid};

	return mfs_create(fs, dir, name, &ni, st);
}

int mfs_symlink(struct mfs *fs, uint64_t dir, const char *name, const char *target, uid_t uid,
                gid_t gid, struct stat *st)
{
	struct mfs_new_inode ni = {.mode = S_IFLNK, .uid = uid, .gid = gid, .target = target};

	return mfs_create(fs, dir, name, &ni, st);
}

ssize_t mfs_readlink(struct mfs *fs, uint64_t ino, char *buf, size_t size)
{
	struct mfs_ino *ip;
	uint64_t pblk = 0, count = 0;
	bool unwritten = false;
	uint8_t *blk = NULL;
	size_t len;
	ssize_t ret;

	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	if (!S_ISLNK(ip->di.mode)) {
		ret = -EINVAL;
		goto out;
	}
	len = ip->di.size < size ? ip->di.size : size;
	if (ip->di.iflags & MFS_IFL_INLINE_DATA) {
		memcpy(buf, ip->di.u.data, len);
		ret = (ssize_t)len;
		goto out;
	}
	if (!(ip->di.iflags & MFS_IFL_EXTENT_TREE) && ip->di.nr_inline >= 1 &&
	    ip->di.u.ext[0].lblk == 0 && !(ip->di.u.ext[0].flags & MFS_EXT_UNWRITTEN)) {
		pblk = ip->di.u.ext[0].pblk;
	} else {
		ret = mfs_bmap(fs, ip, 0, &pblk, &count, &unwritten);
		if (ret)
			goto out;
	}
	if (!pblk || unwritten || pblk < fs->sb.data_start ||
	    pblk - fs->sb.data_start >= fs->sb.data_len) {
		fprintf(stderr, "mendfs: symlink %llu: target block %llu invalid\n",
		        (unsigned long long)ino, (unsigned long long)pblk);
		ret = -EUCLEAN;
		goto out;
	}
	if (posix_memalign((void **)&blk, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
		ret = -ENOMEM;
		goto out;
	}
	ret = blk_read(fs->dev, pblk * MFS_SECTORS_PER_BLOCK, blk, MFS_BLOCK_SIZE, 0);
	if (!ret) {
		memcpy(buf, blk, len);
		ret = (ssize_t)len;
	}
	free(blk);
out:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

int mfs_link(struct mfs *fs, uint64_t ino, uint64_t newdir, const char *newname, struct stat *st)
{
	struct lockset ls = {0};
	struct mfs_ino *ip, *dp;
	struct mfs_txn *txn;
	uint64_t key;
	int64_t now = mfs_now_ns();
	size_t len;
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = name_check(newname, &len);
	if (ret)
		return ret;
	if (is_dot(newname))
		return -EEXIST;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	if (S_ISDIR(ip->di.mode)) {
		mfs_iput(fs, ip);
		return -EPERM;
	}
	ret = get_dir(fs, newdir, &dp);
	if (ret) {
		mfs_iput(fs, ip);
		return ret;
	}
	ls_add(&ls, dp);
	ls_add(&ls, ip);
	ls_lock(&ls);
	if (ip->di.nlink == 0 || dp->di.nlink == 0) {
		ret = -ENOENT;
		goto unlock;
	}
	if (ip->di.nlink >= MFS_LINK_MAX) {
		ret = -EMLINK;
		goto unlock;
	}
	ret = dir_find(fs, dp, newname, len, NULL, &key);
	if (ret != -ENOENT) {
		ret = ret ? ret : -EEXIST;
		goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	ret = dir_insert(fs, txn, dp, key, ip, newname, len);
	if (!ret) {
		ip->di.nlink++;
		ip->di.ctime_ns = now;
		touch_mc(dp, now);
		ret = mfs_inode_write(fs, txn, ip);
		if (!ret)
			ret = mfs_inode_write(fs, txn, dp);
	}
	r = mfs_txn_end(txn);
	ret = ret ? ret : r;
	if (!ret && st)
		mfs_inode_to_stat(ip, st);
unlock:
	ls_unlock(&ls);
	mfs_iput(fs, dp);
	mfs_iput(fs, ip);
	return ret;
}

/* --- removal ---------------------------------------------------------------------------- */

static int remove_entry(struct mfs *fs, uint64_t dir, const char *name, bool rmdir)
{
	struct mfs_ino *dp, *ip;
	struct mfs_txn *txn;
	struct dent de, again;
	int64_t now;
	size_t len;
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = name_check(name, &len);
	if (ret)
		return ret;
	if (!strcmp(name, "."))
		return rmdir ? -EINVAL : -EISDIR;
	if (!strcmp(name, ".."))
		return rmdir ? -ENOTEMPTY : -EISDIR;
	ret = get_dir(fs, dir, &dp);
	if (ret)
		return ret;
	for (;;) {
		struct lockset ls = {0};

		ret = find_get(fs, dp, name, len, &de, &ip);
		if (ret)
			break;
		ls_add(&ls, dp);
		ls_add(&ls, ip);
		ls_lock(&ls);
		ret = dir_find(fs, dp, name, len, &again, NULL);
		if (ret || again.ino != de.ino) {
			/* changed while unlocked: start over */
			ls_unlock(&ls);
			mfs_iput(fs, ip);
			if (ret && ret != -ENOENT)
				break;
			continue;
		}
		if (rmdir && !S_ISDIR(ip->di.mode))
			ret = -ENOTDIR;
		else if (!rmdir && S_ISDIR(ip->di.mode))
			ret = -EISDIR;
		else if (rmdir && ip->di.dir_entries)
			ret = -ENOTEMPTY;
		if (!ret)
			ret = mfs_txn_begin(fs, &txn);
		if (!ret) {
			now = mfs_now_ns();
			ret = dir_delete(fs, txn, dp, de.key);
			if (!ret) {
				if (rmdir && dp->di.nlink > 2)
					dp->di.nlink--;
				touch_mc(dp, now);
				ret = mfs_inode_write(fs, txn, dp);
				r = drop_link(fs, txn, ip, now);
				ret = ret ? ret : r;
			}
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
		}
		ls_unlock(&ls);
		mfs_iput(fs, ip); /* outside the handle: may free the inode */
		break;
	}
	mfs_iput(fs, dp);
	return ret;
}

int mfs_unlink(struct mfs *fs, uint64_t dir, const char *name)
{
	return remove_entry(fs, dir, name, false);
}

int mfs_rmdir(struct mfs *fs, uint64_t dir, const char *name)
{
	return remove_entry(fs, dir, name, true);
}

/* --- rename ------------------------------------------------------------------------------ */

/* Is @anc the directory @ino or one of its ancestors?  1, 0 or -errno.  rename_lock held. */
static int is_ancestor(struct mfs *fs, uint64_t anc, uint64_t ino)
{
	uint64_t steps;

	for (steps = 0; steps <= fs->sb.nr_inodes; steps++) {
		struct mfs_ino *ip;
		uint64_t parent;
		int ret;

		if (ino == anc)
			return 1;
		if (ino == MFS_ROOT_INO)
			return 0;
		ret = mfs_iget(fs, ino, &ip);
		if (ret)
			return ret;
		pthread_rwlock_rdlock(&ip->lock);
		parent = ip->di.parent;
		pthread_rwlock_unlock(&ip->lock);
		mfs_iput(fs, ip);
		ino = parent;
	}
	fprintf(stderr, "mendfs: directory parent chain loops\n");
	return -EUCLEAN;
}

/* Move directory @ip from @from to @to: "..", and the parents' link counts. */
static void move_dir(struct mfs_ino *ip, struct mfs_ino *from, struct mfs_ino *to)
{
	if (!S_ISDIR(ip->di.mode) || from == to)
		return;
	ip->di.parent = to->ino;
	if (from->di.nlink > 2)
		from->di.nlink--;
	to->di.nlink++;
}

int mfs_rename(struct mfs *fs, uint64_t olddir, const char *oldname, uint64_t newdir,
               const char *newname, unsigned flags)
{
	struct mfs_ino *odp = NULL, *ndp = NULL, *src = NULL, *dst = NULL;
	bool exchange = flags & RENAME_EXCHANGE;
	struct dent sde, dde, chk;
	struct mfs_txn *txn;
	uint64_t nkey = 0;
	size_t olen, nlen;
	int64_t now;
	int ret, r;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && exchange)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	ret = name_check(oldname, &olen);
	if (!ret)
		ret = name_check(newname, &nlen);
	if (ret)
		return ret;
	if (is_dot(oldname) || is_dot(newname))
		return -EINVAL;
	ret = get_dir(fs, olddir, &odp);
	if (ret)
		return ret;
	ret = get_dir(fs, newdir, &ndp);
	if (ret) {
		mfs_iput(fs, odp);
		return ret;
	}
	pthread_mutex_lock(&fs->rename_lock);
	for (;;) {
		struct lockset ls = {0};

		ret = find_get(fs, odp, oldname, olen, &sde, &src);
		if (ret)
			break;
		dde = (struct dent){0};
		ret = find_get(fs, ndp, newname, nlen, &dde, &dst);
		if (ret == -ENOENT) {
			dst = NULL;
			ret = exchange ? -ENOENT : 0;
		} else if (!ret && (flags & RENAME_NOREPLACE)) {
			ret = -EEXIST;
		}
		if (ret)
			break;
		if (dst == src) {
			ret = 0; /* two links of one inode (or the same name): nothing to do */
			break;
		}
		if (dst && !exchange) {
			if (S_ISDIR(src->di.mode) && !S_ISDIR(dst->di.mode))
				ret = -ENOTDIR;
			else if (!S_ISDIR(src->di.mode) && S_ISDIR(dst->di.mode))
				ret = -EISDIR;
			if (ret)
				break;
		}
		/* a directory must not move below itself */
		if (odp != ndp && S_ISDIR(src->di.mode)) {
			ret = is_ancestor(fs, src->ino, ndp->ino);
			if (ret)
				ret = ret > 0 ? -EINVAL : ret;
		}
		if (!ret && exchange && odp != ndp && S_ISDIR(dst->di.mode)) {
			ret = is_ancestor(fs, dst->ino, odp->ino);
			if (ret)
				ret = ret > 0 ? -EINVAL : ret;
		}
		if (ret)
			break;

		ls_add(&ls, odp);
		ls_add(&ls, ndp);
		ls_add(&ls, src);
		ls_add(&ls, dst);
		ls_lock(&ls);
		/* the entries may have changed while nothing was locked */
		ret = dir_find(fs, odp, oldname, olen, &chk, NULL);
		if (!ret && chk.ino == src->ino) {
			ret = dir_find(fs, ndp, newname, nlen, &chk, &nkey);
			if (dst ? (ret == 0 && chk.ino == dst->ino) : ret == -ENOENT)
				ret = 0;
			else if (ret == 0 || ret == -ENOENT)
				ret = -EAGAIN;
		} else if (!ret) {
			ret = -EAGAIN;
		}
		if (ret == -EAGAIN || ret == -ENOENT) {
			ls_unlock(&ls);
			mfs_iput(fs, src);
			mfs_iput(fs, dst);
			src = dst = NULL;
			continue;
		}
		if (!ret && (ndp->di.nlink == 0 || odp->di.nlink == 0))
			ret = -ENOENT;
		if (!ret && dst && !exchange && S_ISDIR(dst->di.mode) && dst->di.dir_entries)
			ret = -ENOTEMPTY;
		if (!ret)
			ret = mfs_txn_begin(fs, &txn);
		if (ret) {
			ls_unlock(&ls);
			break;
		}
		now = mfs_now_ns();
		if (exchange) {
			ret = dir_update(fs, txn, ndp, dde.key, src, newname, nlen);
			if (!ret)
				ret = dir_update(fs, txn, odp, sde.key, dst, oldname, olen);
			if (!ret) {
				move_dir(src, odp, ndp);
				move_dir(dst, ndp, odp);
				dst->di.ctime_ns = now;
			}
		} else if (dst) {
			ret = dir_update(fs, txn, ndp, dde.key, src, newname, nlen);
			if (!ret)
				ret = dir_delete(fs, txn, odp, sde.key);
			if (!ret) {
				move_dir(src, odp, ndp);
				if (S_ISDIR(dst->di.mode) && ndp->di.nlink > 2)
					ndp->di.nlink--;
				ret = drop_link(fs, txn, dst, now);
			}
		} else {
			/* insert first: it is the step that can fail (ENOSPC) */
			ret = dir_insert(fs, txn, ndp, nkey, src, newname, nlen);
			if (!ret)
				ret = dir_delete(fs, txn, odp, sde.key);
			if (!ret)
				move_dir(src, odp, ndp);
		}
		if (!ret) {
			src->di.ctime_ns = now;
			touch_mc(odp, now);
			touch_mc(ndp, now);
			ret = mfs_inode_write(fs, txn, src);
			if (!ret)
				ret = mfs_inode_write(fs, txn, odp);
			if (!ret && ndp != odp)
				ret = mfs_inode_write(fs, txn, ndp);
			if (!ret && dst && exchange)
				ret = mfs_inode_write(fs, txn, dst);
		}
		r = mfs_txn_end(txn);
		ret = ret ? ret : r;
		ls_unlock(&ls);
		break;
	}
	pthread_mutex_unlock(&fs->rename_lock);
	mfs_iput(fs, dst);
	mfs_iput(fs, src);
	mfs_iput(fs, ndp);
	mfs_iput(fs, odp);
	return ret;
}

/* --- readdir ------------------------------------------------------------------------------ */

struct readdir_ctx {
	mfs_filldir_fn *fn;
	void *arg;
	int err;
};

static int readdir_fn(void *arg, uint64_t key, const void *val, uint16_t vlen)
{
	struct readdir_ctx *c = arg;
	const uint8_t *name;
	unsigned name_len;
	struct dent de;

	c->err = dirent_parse(key, val, vlen, &de, &name, &name_len);
	if (c->err)
		return 1;
	return c->fn(c->arg, (const char *)name, name_len, de.ino, de.type, key) ? 1 : 0;
}

int mfs_readdir(struct mfs *fs, uint64_t dir, uint64_t pos, mfs_filldir_fn *fn, void *arg)
{
	struct readdir_ctx c = {.fn = fn, .arg = arg};
	struct mfs_btree bt;
	struct mfs_ino *dp;
	int ret;

	ret = get_dir(fs, dir, &dp);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&dp->lock);
	if (pos == 0) {
		if (fn(arg, ".", 1, dp->ino, DT_DIR, 1))
			goto out;
		pos = 1;
	}
	if (pos == 1) {
		if (fn(arg, "..", 2, dp->di.parent, DT_DIR, 2))
			goto out;
		pos = 2;
	}
	if (pos == UINT64_MAX)
		goto out;
	bt = dir_tree(dp);
	ret = mfs_bt_iterate(fs, &bt, pos + 1, readdir_fn, &c);
	if (ret > 0)
		ret = 0;
	if (!ret)
		ret = c.err;
out:
	pthread_rwlock_unlock(&dp->lock);
	mfs_iput(fs, dp);
	return ret;
}
