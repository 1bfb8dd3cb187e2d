/* SPDX-License-Identifier: MIT */
/*
 * Mounting and unmounting: open the device, read the superblock, replay the
 * journal, start the buffer cache, journal and allocators, free the orphans
 * left by a crash, mark the superblock dirty; and the reverse at unmount
 * (commit, checkpoint, mark clean).  Also statfs, sync and the orphan tree.
 *
 * Crash safety of the superblock's tree roots.  The quarantine and orphan
 * trees are rooted in the superblock, which is not journaled (replay only
 * accepts meta zone blocks) and is written at checkpoint with whatever the
 * in-memory copy says at that moment.  A transaction that changes a root
 * therefore also journals the new roots in a small record in the unused
 * tail of the first inode table block (bytes 3888..4095, struct
 * mfs_roots_rec in include/mendfs/format.h): mfs_super_roots_log().  That
 * block is ordinary journaled metadata, so after replay it holds the roots of exactly the
 * last committed transaction.  At mount, once the journal is replayed, a
 * valid record overrides the superblock's roots; the superblock written at
 * mount and at unmount then agrees with it.  A filesystem fresh from mkfs
 * has no record (the tail is zero) and the superblock's roots are used.
 * The free counters need nothing of the kind: after a clean unmount the
 * superblock's are exact and the data bitmap is read lazily, group by group,
 * as allocation needs it (alloc.c); after a crash or a replay they are
 * recounted from the bitmaps.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atime.h"
#include "mfs_int.h"

#define MFS_DEFAULT_CACHE_BLOCKS 32768u

/* --- the roots record and the orphan tree ------------------------------------------ */

int mfs_super_roots_log(struct mfs *fs, struct mfs_txn *txn)
{
	struct mfs_roots_rec *rec;
	struct mfs_buf *b;
	int ret;

	ret = mfs_meta_read(fs, fs->sb.inode_table_start, MFS_T_INODES, &b);
	if (ret)
		return ret;
	pthread_mutex_lock(&b->lock);
	rec = (struct mfs_roots_rec *)(b->data + MFS_ROOTS_OFF);
	rec->magic = MFS_ROOTS_MAGIC;
	rec->quarantine_root = fs->sb.quarantine_root;
	rec->quarantine_depth = fs->sb.quarantine_depth;
	rec->orphan_root = fs->sb.orphan_root;
	rec->orphan_depth = fs->sb.orphan_depth;
	mfs_txn_dirty(txn, b);
	pthread_mutex_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}

/* After replay: take the journaled roots, if any (see the top of this file). */
static int roots_load(struct mfs *fs)
{
	const struct mfs_roots_rec *rec;
	struct mfs_buf *b;
	int ret;

	ret = mfs_meta_read(fs, fs->sb.inode_table_start, MFS_T_INODES, &b);
	if (ret)
		return ret;
	pthread_mutex_lock(&b->lock);
	rec = (const struct mfs_roots_rec *)(b->data + MFS_ROOTS_OFF);
	if (rec->magic == MFS_ROOTS_MAGIC) {
		fs->sb.quarantine_root = rec->quarantine_root;
		fs->sb.quarantine_depth = rec->quarantine_depth;
		fs->sb.orphan_root = rec->orphan_root;
		fs->sb.orphan_depth = rec->orphan_depth;
	}
	pthread_mutex_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}

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

/*
 * Finish the work of every inode on the orphan list (docs/FORMAT.md §10): an
 * inode with nlink 0 (unlinked while open, or freed in steps when a crash
 * came) is freed; a regular file with links (a truncate cut short) has its
 * blocks past EOF freed; both in bounded steps, and leave the list when done.
 */
static int orphans_process(struct mfs *fs)
{
	struct orphan_list l = {0};
	struct mfs_btree bt = orphan_tree(fs);
	size_t i;
	int ret;

	ret = mfs_bt_iterate(fs, &bt, 0, orphan_collect, &l);
	for (i = 0; !ret && i < l.n; i++) {
		struct mfs_ino *ip = NULL;
		struct mfs_txn *txn;
		int r;

		r = mfs_iget(fs, l.v[i], &ip);
		if (!r && ip->di.nlink == 0) {
			mfs_iput(fs, ip); /* the last reference of an unlinked inode: freed */
			atomic_fetch_add(&fs->stats.orphans_freed, 1);
			continue;
		}
		if (r && r != -ENOENT) {
			/* unreadable or corrupt: left on the list for fsck, the mount goes on */
			fprintf(stderr, "mendfs: orphan inode %llu: %s: left for fsck\n",
			        (unsigned long long)l.v[i], strerror(-r));
			continue;
		}
		if (!r && S_ISREG(ip->di.mode) && (ip->di.iflags & MFS_IFL_ORPHAN)) {
			/* a truncate cut short: free past EOF, then off the list */
			pthread_rwlock_wrlock(&ip->lock);
			r = mfs_truncate_finish(fs, ip);
			pthread_rwlock_unlock(&ip->lock);
			mfs_iput(fs, ip);
			if (r)
				fprintf(stderr,
				        "mendfs: orphan inode %llu: finishing its truncate: %s: "
				        "left for fsck\n",
				        (unsigned long long)l.v[i], strerror(-r));
			else
				atomic_fetch_add(&fs->stats.orphans_truncated, 1);
			continue;
		}
		/* a free slot, or an inode linked again: only the entry goes */
		ret = mfs_txn_begin(fs, &txn);
		if (!ret) {
			if (ip) {
				pthread_rwlock_wrlock(&ip->lock);
				ip->di.iflags &= ~MFS_IFL_ORPHAN;
				ret = mfs_inode_write(fs, txn, ip);
				pthread_rwlock_unlock(&ip->lock);
			}
			r = mfs_orphan_del(fs, txn, l.v[i]);
			if (r && r != -ENOENT && !ret)
				ret = r;
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
		}
		mfs_iput(fs, ip);
	}
	free(l.v);
	if (ret)
		fprintf(stderr, "mendfs: orphan processing: %s\n", strerror(-ret));
	return ret;
}

/* --- mount / unmount ----------------------------------------------------------------- */

static void teardown(struct mfs *fs)
{
	mfs_icache_destroy(fs);
	if (fs->alloc)
		mfs_alloc_destroy(fs);
	if (fs->journal)
		mfs_journal_destroy(fs);
	mfs_cache_destroy(fs);
	if (fs->dev)
		blk_dev_close(fs->dev);
	pthread_mutex_destroy(&fs->rename_lock);
	pthread_mutex_destroy(&fs->super_lock);
	pthread_mutex_destroy(&fs->atime_lock);
	free(fs->device);
	free(fs);
}

int mfs_mount(const char *device, const struct mfs_mount_opts *opts, struct mfs **fsp, char *err,
              size_t errlen)
{
	static const struct mfs_mount_opts defaults = {0};
	struct blk_dev_config cfg = {0};
	char msg[256] = "";
	bool force_ro = false, other_bad = false;
	struct mfs *fs;
	int ret, n;

	if (err && errlen)
		err[0] = '\0';
	if (!opts)
		opts = &defaults;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	pthread_mutex_init(&fs->rename_lock, NULL);
	pthread_mutex_init(&fs->super_lock, NULL);
	pthread_mutex_init(&fs->atime_lock, NULL);
	fs->atime_flags = opts->atime;
	fs->device = strdup(device);
	if (!fs->device) {
		teardown(fs);
		return -ENOMEM;
	}
	cfg.backend = opts->backend;
	cfg.path = device;
	cfg.badblocks_path = opts->badblocks;
	cfg.flags = (opts->read_only ? BLK_CFG_READONLY : 0) | (opts->exclusive ? BLK_CFG_EXCL : 0);
	ret = blk_dev_open(&cfg, &fs->dev, msg, sizeof(msg));
	if (ret) {
		fs->dev = NULL;
		mfs_errf(err, errlen, "%s", msg[0] ? msg : strerror(-ret));
		goto fail;
	}
	if (opts->fault_inject) {
		ret = blk_dev_set_fault(fs->dev, opts->fault_nth, opts->fault_dying);
		if (ret) {
			mfs_errf(err, errlen, "%s: fault injection: %s", device, strerror(-ret));
			goto fail;
		}
	}
	ret = mfs_super_read(fs->dev, &fs->sb, &force_ro, &other_bad, msg, sizeof(msg));
	if (ret) {
		mfs_errf(err, errlen, "%s: %s", device, msg);
		goto fail;
	}
	fs->read_only = opts->read_only || force_ro;
	{
		struct blk_dev_info info;

		/* the kernel may copy replies straight from a page-cache mapping (see blk.h) */
		blk_dev_get_info(fs->dev, &info);
		fs->direct_reads = info.direct_access && info.direct_page_cache;
	}

	/* a read-only mount never writes: it refuses a journal that needs replaying */
	n = mfs_journal_replay(fs->dev, &fs->sb, fs->read_only, msg, sizeof(msg));
	if (n < 0) {
		ret = n;
		mfs_errf(err, errlen, "%s: journal replay failed: %s", device,
		         msg[0] ? msg : strerror(-ret));
		goto fail;
	}
	if (fs->read_only && n > 0) {
		ret = -EROFS;
		mfs_errf(err, errlen,
		         "%s: the journal holds %d committed transaction%s to replay: mount "
		         "read-write "
		         "once (or run fsck.mendfs) before mounting read-only",
		         device, n, n == 1 ? "" : "s");
		goto fail;
	}

	/* replayed: the counters are those of before the crash; or asked to: recount them */
	if (n > 0 || opts->recount)
		fs->sb.state = (fs->sb.state & ~MFS_STATE_CLEAN) | MFS_STATE_DIRTY;

	ret = mfs_cache_init(fs,
	                     opts->cache_blocks ? opts->cache_blocks : MFS_DEFAULT_CACHE_BLOCKS);
	if (ret) {
		mfs_errf(err, errlen, "%s: buffer cache: %s", device, strerror(-ret));
		goto fail;
	}
	ret = mfs_journal_init(fs);
	if (ret) {
		fs->journal = NULL;
		mfs_errf(err, errlen, "%s: journal: %s", device, strerror(-ret));
		goto fail;
	}
	ret = roots_load(fs);
	if (!ret)
		ret = mfs_alloc_init(fs);
	if (ret) {
		fs->alloc = NULL;
		mfs_errf(err, errlen, "%s: loading the allocation state: %s", device,
		         strerror(-ret));
		goto fail;
	}
	ret = mfs_icache_init(fs);
	if (ret) {
		mfs_errf(err, errlen, "%s: inode cache: %s", device, strerror(-ret));
		goto fail;
	}
	if (!fs->read_only) {
		ret = orphans_process(fs);
		if (!ret)
			ret = mfs_txn_commit(fs);
		if (ret) {
			mfs_errf(err, errlen, "%s: freeing orphan inodes: %s", device,
			         strerror(-ret));
			goto fail;
		}
		fs->sb.state = (fs->sb.state & MFS_STATE_ERROR) | MFS_STATE_DIRTY;
		fs->sb.mount_time_ns = mfs_now_ns();
		fs->sb.mount_count++;
		ret = mfs_super_write(fs);
		if (ret) {
			mfs_errf(err, errlen, "%s: writing the superblock: %s", device,
			         strerror(-ret));
			goto fail;
		}
	}
	*fsp = fs;
	return 0;
fail:
	teardown(fs);
	return ret;
}

int mfs_unmount(struct mfs *fs)
{
	int ret = 0, r;

	if (!fs)
		return 0;
	if (!fs->read_only) {
		ret = mfs_atime_flush(fs);
		r = mfs_txn_commit(fs);
		ret = ret ? ret : r;
		if (!ret)
			ret = mfs_checkpoint(fs);
		/* clean only when the journal is empty and everything is in place */
		if (!ret) {
			fs->sb.state = (fs->sb.state & MFS_STATE_ERROR) | MFS_STATE_CLEAN;
			ret = mfs_super_write(fs);
		}
		if (ret)
			fprintf(stderr, "mendfs: unmount of %s: %s\n", fs->device, strerror(-ret));
	}
	if (mfs_fs_errno(fs)) {
		/* read-only after an I/O error: nothing was written, replay restores the rest */
		ret = mfs_fs_errno(fs);
		fprintf(stderr,
		        "mendfs: unmount of %s: read-only after an I/O error, nothing written: "
		        "the next mount replays the journal\n",
		        fs->device);
	}
	teardown(fs);
	return ret;
}

void mfs_crash(struct mfs *fs)
{
	teardown(fs);
}

int mfs_sync(struct mfs *fs)
{
	int ret, r;

	if (fs->read_only)
		return mfs_fs_errno(fs);
	ret = mfs_atime_flush(fs);
	r = mfs_txn_commit(fs);
	return ret ? ret : r;
}

int mfs_statfs(struct mfs *fs, struct statvfs *st)
{
	uint64_t fsid[2];

	memset(st, 0, sizeof(*st));
	st->f_bsize = MFS_BLOCK_SIZE;
	st->f_frsize = MFS_BLOCK_SIZE;
	st->f_blocks = fs->sb.data_len;
	pthread_mutex_lock(&fs->alloc_lock);
	st->f_bfree = fs->sb.free_blocks;
	st->f_ffree = fs->sb.free_inodes;
	pthread_mutex_unlock(&fs->alloc_lock);
	st->f_bavail = st->f_bfree;
	st->f_files = fs->sb.nr_inodes;
	st->f_favail = st->f_ffree;
	memcpy(fsid, fs->sb.uuid, sizeof(fsid));
	st->f_fsid = (unsigned long)(fsid[0] ^ fsid[1]);
	st->f_namemax = 255;
	st->f_flag = fs->read_only ? ST_RDONLY : 0;
	return 0;
}
