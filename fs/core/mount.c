/* SPDX-License-Identifier: MIT */
/*
 * Mounting and unmounting, on top of every other file of the core: open the
 * device, read the superblock, replay the journal, start the buffer cache,
 * journal and allocators, take the journaled tree roots (roots.c), free the
 * orphans left by a crash (orphan.c's list, inode.c and file.c's freeing),
 * mark the superblock dirty; and the reverse at unmount (commit, checkpoint,
 * mark clean).  Also statfs and sync.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atime.h"
#include "csum.h"
#include "fio.h"
#include "mfs_int.h"

#define MFS_DEFAULT_CACHE_BLOCKS 32768u

/*
 * Finish the work of every inode on the orphan list (docs/FORMAT.md §10): an
 * inode with nlink 0 (unlinked while open, or freed in steps when a crash
 * came) is freed; a regular file with links (a truncate cut short) has its
 * blocks past EOF freed; both in bounded steps, and leave the list when done.
 */
static int orphans_process(struct mfs *fs)
{
	uint64_t *inos = NULL;
	size_t nr = 0, i;
	int ret;

	ret = mfs_orphan_list(fs, &inos, &nr);
	for (i = 0; !ret && i < nr; i++) {
		struct mfs_ino *ip = NULL;
		struct mfs_txn *txn;
		int r;

		r = mfs_iget(fs, inos[i], &ip);
		if (!r && ip->di.nlink == 0) {
			mfs_iput(fs, ip); /* the last reference of an unlinked inode: freed */
			atomic_fetch_add(&fs->stats.orphans_freed, 1);
			continue;
		}
		if (r && r != -ENOENT) {
			/* unreadable or corrupt: left on the list for fsck, the mount goes on */
			fprintf(stderr, "mendfs: orphan inode %llu: %s: left for fsck\n",
			        (unsigned long long)inos[i], strerror(-r));
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
				        (unsigned long long)inos[i], strerror(-r));
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
			r = mfs_orphan_del(fs, txn, inos[i]);
			if (r && r != -ENOENT && !ret)
				ret = r;
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
		}
		mfs_iput(fs, ip);
	}
	free(inos);
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
	if (fs->dev) {
		mfs_events_attach(fs, false);
		blk_dev_close(fs->dev);
	}
	mfs_events_destroy(&fs->events);
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
	mfs_events_init(&fs->events);
	fs->events.resolve = mfs_events_resolve;
	fs->atime_flags = opts->atime;
	fs->device = strdup(device);
	if (!fs->device) {
		teardown(fs);
		return -ENOMEM;
	}
	cfg.backend = opts->backend;
	cfg.path = device;
	cfg.badblocks_path = opts->badblocks;
	cfg.latent_path = opts->latent;
	cfg.flags = (opts->read_only ? BLK_CFG_READONLY : 0) | (opts->exclusive ? BLK_CFG_EXCL : 0);
	/* requests larger than the data path's bios, so that they merge (fio.h) */
	cfg.max_sectors = RQ_MAX_BLOCKS * MFS_SECTORS_PER_BLOCK;
	cfg.nr_hw_queues = opts->hw_queues;
	ret = blk_dev_open(&cfg, &fs->dev, msg, sizeof(msg));
	if (ret) {
		fs->dev = NULL;
		blk_err(err, errlen, "%s", msg[0] ? msg : strerror(-ret));
		goto fail;
	}
	mfs_events_attach(fs, true); /* damage found from now on is an event */
	if (opts->fault_inject) {
		ret = blk_dev_set_fault(fs->dev, opts->fault_nth, opts->fault_dying);
		if (ret) {
			blk_err(err, errlen, "%s: fault injection: %s", device, strerror(-ret));
			goto fail;
		}
	}
	ret = mfs_super_read(fs->dev, &fs->sb, &force_ro, &other_bad, msg, sizeof(msg));
	if (ret) {
		blk_err(err, errlen, "%s: %s", device, msg);
		goto fail;
	}
	fs->read_only = opts->read_only || force_ro;
	fs->ro_at_mount = fs->read_only;
	{
		struct blk_dev_info info;

		/* the kernel may copy replies straight from a page-cache mapping (see blk.h) */
		blk_dev_get_info(fs->dev, &info);
		fs->direct_reads = info.direct_access && info.direct_page_cache;
		fs->data_csum = fs->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM;
		/* direct reads check the checksums in the mapping first (read.c) */
		if (fs->data_csum)
			mfs_csum_init(fs);
	}

	/* a read-only mount never writes: it refuses a journal that needs replaying */
	n = mfs_journal_replay(fs->dev, &fs->sb, fs->read_only, msg, sizeof(msg));
	if (n < 0) {
		ret = n;
		blk_err(err, errlen, "%s: journal replay failed: %s", device,
		        msg[0] ? msg : strerror(-ret));
		goto fail;
	}
	if (fs->read_only && n > 0) {
		ret = -EROFS;
		blk_err(err, errlen,
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
		blk_err(err, errlen, "%s: buffer cache: %s", device, strerror(-ret));
		goto fail;
	}
	ret = mfs_journal_init(fs);
	if (ret) {
		fs->journal = NULL;
		blk_err(err, errlen, "%s: journal: %s", device, strerror(-ret));
		goto fail;
	}
	ret = mfs_roots_load(fs);
	if (!ret)
		ret = mfs_alloc_init(fs);
	if (ret) {
		fs->alloc = NULL;
		blk_err(err, errlen, "%s: loading the allocation state: %s", device,
		        strerror(-ret));
		goto fail;
	}
	ret = mfs_icache_init(fs);
	if (ret) {
		blk_err(err, errlen, "%s: inode cache: %s", device, strerror(-ret));
		goto fail;
	}
	if (!fs->read_only) {
		ret = orphans_process(fs);
		if (!ret)
			ret = mfs_txn_commit(fs);
		if (ret) {
			blk_err(err, errlen, "%s: freeing orphan inodes: %s", device,
			        strerror(-ret));
			goto fail;
		}
		fs->sb.state = (fs->sb.state & MFS_STATE_ERROR) | MFS_STATE_DIRTY;
		fs->sb.mount_time_ns = mfs_now_ns();
		fs->sb.mount_count++;
		ret = mfs_super_write(fs);
		if (ret) {
			blk_err(err, errlen, "%s: writing the superblock: %s", device,
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

/*
 * Read-only: make everything durable, write it in place and mark the
 * filesystem clean, as an unmount does, then refuse every change; an inode
 * whose last reference goes meanwhile stays an orphan until the next mount.
 * Read-write: writable again, marked in use.
 */
int mfs_remount(struct mfs *fs, bool read_only)
{
	int ret, tries;

	if (!read_only) {
		if (fs->ro_at_mount || mfs_fs_errno(fs))
			return -EROFS;
		return mfs_journal_thaw(fs);
	}
	for (tries = 0; tries < 5; tries++) {
		if (fs->read_only)
			return mfs_fs_errno(fs) ? -EROFS : 0;
		ret = mfs_sync(fs);
		if (!ret)
			ret = mfs_journal_freeze(fs);
		if (ret != -EAGAIN)
			return ret;
	}
	return -EBUSY; /* changes keep coming: the caller did not stop them */
}

int mfs_statfs(struct mfs *fs, struct statvfs *st)
{
	uint64_t fsid[2];

	memset(st, 0, sizeof(*st));
	st->f_bsize = MFS_BLOCK_SIZE;
	st->f_frsize = MFS_BLOCK_SIZE;
	st->f_blocks = fs->sb.data_len;
	mfs_lock(&fs->alloc_lock);
	st->f_bfree = fs->sb.free_blocks;
	st->f_ffree = fs->sb.free_inodes;
	mfs_unlock(&fs->alloc_lock);
	st->f_bavail = st->f_bfree;
	st->f_files = fs->sb.nr_inodes;
	st->f_favail = st->f_ffree;
	memcpy(fsid, fs->sb.uuid, sizeof(fsid));
	st->f_fsid = (unsigned long)(fsid[0] ^ fsid[1]);
	st->f_namemax = 255;
	st->f_flag = fs->read_only ? ST_RDONLY : 0;
	return 0;
}
