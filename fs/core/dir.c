/* SPDX-License-Identifier: MIT */
/*
 * Directory entries and the operations that only read them: lookup,
 * getattr and readdir.  Calls the inode cache and the B+tree only; namei.c, rename.c
 * and attr.c build on it.
 *
 * A directory's entries live in its entry B+tree (MFS_TREE_DIR, root in
 * di.dir_root/dir_depth), keyed by the name key: bits 16..62 of
 * XXH3-64(name, dir_hash_seed) and a 16-bit collision counter.  Lookup scans
 * the keys sharing the 47 hash bits (usually one) comparing names; insert takes the
 * lowest free counter.  "." and ".." are not stored.  readdir cookies are the
 * keys themselves (1 and 2 for "." and ".."), so a listing resumed at a
 * cookie continues with the next greater key whatever was inserted or
 * deleted meanwhile: no entry present throughout is skipped or repeated.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <xxhash.h>

#include "namei.h"

#define DIRENT_HDR offsetof(struct mfs_dirent, name) /* 10 bytes */
/* bits 16..62 of the hash: bit 63 stays clear so every readdir cookie is a
 * non-negative off_t (the kernel's seekdir rejects negative directory offsets) */
#define KEY_HASH_MASK 0x7fffffffffff0000ull

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

int mfs_dir_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key,
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
int mfs_dir_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key,
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

int mfs_dir_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, uint64_t key)
{
	struct mfs_btree bt = dir_tree(dp);
	int ret;

	ret = mfs_bt_delete(fs, txn, &bt, key);
	dir_tree_store(dp, &bt);
	if (!ret && dp->di.dir_entries)
		dp->di.dir_entries--;
	return ret;
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
 * The exported names of dir_find and find_get: the static ones stay open to
 * inlining into mfs_lookup (the core is built -fPIC, where a global function
 * is not inlined).
 */
int mfs_dir_find(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len, struct dent *de,
                 uint64_t *free_key)
{
	return dir_find(fs, dp, name, len, de, free_key);
}

int mfs_dir_find_get(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len,
                     struct dent *de, struct mfs_ino **ipp)
{
	return find_get(fs, dp, name, len, de, ipp);
}

/* --- lookup, getattr ---------------------------------------------------------------------- */

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

void mfs_getattr_pinned(struct mfs *fs, struct mfs_ino *ip, struct stat *st)
{
	(void)fs;
	pthread_rwlock_rdlock(&ip->lock);
	mfs_inode_to_stat(ip, st);
	if (!ip->di.mode) {
		/* freed: its type and permissions from before, no blocks */
		st->st_mode = ip->freed_mode;
		st->st_nlink = 0;
		st->st_blocks = 0;
	}
	pthread_rwlock_unlock(&ip->lock);
}

int mfs_lookup_get(struct mfs *fs, uint64_t dir, const char *name, struct mfs_ino **ipp)
{
	struct mfs_ino *dp;
	struct dent de = {0};
	uint64_t parent;
	size_t len;
	int ret;

	ret = mfs_dir_get(fs, dir, &dp);
	if (ret)
		return ret;
	if (name && !strcmp(name, ".")) {
		*ipp = dp;
		return 0;
	}
	if (name && !strcmp(name, "..")) {
		pthread_rwlock_rdlock(&dp->lock);
		parent = dp->di.parent;
		pthread_rwlock_unlock(&dp->lock);
		mfs_iput(fs, dp);
		return mfs_iget(fs, parent, ipp);
	}
	ret = name_check(name, &len);
	if (!ret)
		ret = find_get(fs, dp, name, len, &de, ipp);
	mfs_iput(fs, dp);
	return ret;
}

int mfs_lookup(struct mfs *fs, uint64_t dir, const char *name, struct stat *st)
{
	struct mfs_ino *ip;
	int ret;

	ret = mfs_lookup_get(fs, dir, name, &ip);
	if (ret)
		return ret;
	stat_ino(ip, st);
	mfs_iput(fs, ip);
	return 0;
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

	ret = mfs_dir_get(fs, dir, &dp);
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
