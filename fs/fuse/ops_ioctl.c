/* SPDX-License-Identifier: MIT */
/*
 * The ioctls (include/mendfs/ioctl.h, docs/RECOVERY.md, ioctl_mendfs(2)):
 * restricted ioctls only, each with its exact struct size in and out,
 * checked and translated into one call of the core's recovery API
 * (mfs_recovery.h), of mfs_remount(), or of the engine's statistics and
 * poison table.  Recovery read needs the file open for reading, zero-init
 * and recovery write open for writing.  Called through the ops table; calls
 * the core, the engine, libfuse and the daemon's log.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "ioctl_scrub.h"
#include "events.h"
#include "mendfs/ioctl.h"
#include "mfs_grow.h"
#include "mfs_recovery.h"
#include "ops.h"

/* One ioctl: what a translator may need besides its struct. */
struct ioc_call {
	struct mfsd *d;
	fuse_req_t req;
	fuse_ino_t ino;
	struct mfsd_file *f; /* the open file or directory it came through */
};

/* The header every MENDFS_IOC_* struct starts with; reserved words must be zero. */
static bool ioc_valid(uint32_t version, uint32_t flags, const uint64_t reserved[4])
{
	if (version != MENDFS_IOC_VERSION || flags)
		return false;
	for (unsigned i = 0; i < 4; i++)
		if (reserved[i])
			return false;
	return true;
}

/* A byte range of a file: not empty, at most @max bytes, ending by INT64_MAX. */
static bool ioc_range_valid(uint64_t offset, uint64_t length, uint64_t max)
{
	return length && length <= max && offset <= (uint64_t)INT64_MAX - length;
}

static bool can_read(const struct mfsd_file *f)
{
	return (f->flags & O_ACCMODE) == O_RDONLY || (f->flags & O_ACCMODE) == O_RDWR;
}

/* A write through the ioctl's file: open for writing (EBADF) on a writable mount (EROFS). */
static int ioc_may_write(const struct ioc_call *c)
{
	if ((c->f->flags & O_ACCMODE) != O_WRONLY && (c->f->flags & O_ACCMODE) != O_RDWR)
		return -EBADF;
	if (c->d->read_only)
		return -EROFS;
	return 0;
}

/* Written behind the kernel's back: its cached pages and attributes are stale. */
static void ioc_written(const struct ioc_call *c, uint64_t offset, uint64_t length)
{
	fuse_lowlevel_notify_inval_inode(c->d->se, c->ino, (off_t)offset, (off_t)length);
}

/* The core's @nr ranges into @out, of @cap entries: the rest zeroed. */
static void ioc_ranges(struct mendfs_ioc_range *out, unsigned cap, const struct mfs_frange *r,
                       unsigned nr)
{
	memset(out, 0, cap * sizeof(*out));
	for (unsigned i = 0; i < nr; i++) {
		out[i].offset = r[i].offset;
		out[i].length = r[i].length;
	}
}

static int ioc_recovery_read(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_recovery_read *a = arg;
	struct mfs_frange r[MENDFS_RR_MAX_RANGES];
	unsigned nr;
	bool trunc;
	ssize_t n;

	if (!ioc_valid(a->version, a->flags, a->reserved) ||
	    !ioc_range_valid(a->offset, a->length, MENDFS_RR_CHUNK))
		return -EINVAL;
	if (!can_read(c->f))
		return -EBADF;
	n = mfs_recovery_read(c->d->fs, c->ino, a->data, (size_t)a->length, a->offset, r,
	                      MENDFS_RR_MAX_RANGES, &nr, &trunc);
	if (n < 0)
		return (int)n;
	memset(a->data + n, 0, MENDFS_RR_CHUNK - (size_t)n);
	a->bytes = (uint64_t)n;
	a->nr_zeroed = nr;
	a->truncated = trunc;
	ioc_ranges(a->zeroed, MENDFS_RR_MAX_RANGES, r, nr);
	return 0;
}

static int ioc_badranges(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_badranges *a = arg;
	struct mfs_frange r[MENDFS_BADRANGES_MAX];
	unsigned nr;
	bool last;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved) || a->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mfs_badranges(c->d->fs, c->ino, a->start, r, MENDFS_BADRANGES_MAX, &nr, &a->next,
	                    &last);
	if (ret)
		return ret;
	a->nr = nr;
	a->last = last;
	ioc_ranges(a->ranges, MENDFS_BADRANGES_MAX, r, nr);
	return 0;
}

static int ioc_bmap(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_bmap *a = arg;
	struct mfs_fextent x[MENDFS_BMAP_MAX];
	unsigned nr, i;
	bool last;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved) || a->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mfs_bmap_extents(c->d->fs, c->ino, a->start, x, MENDFS_BMAP_MAX, &nr, &a->next,
	                       &last);
	if (ret)
		return ret;
	memset(a->extents, 0, sizeof(a->extents));
	a->nr = nr;
	a->last = last;
	for (i = 0; i < nr; i++) {
		a->extents[i].offset = x[i].offset;
		a->extents[i].length = x[i].length;
		a->extents[i].sector = x[i].sector;
		a->extents[i].flags = x[i].unwritten ? MENDFS_EXTENT_UNWRITTEN : 0;
	}
	return 0;
}

static int ioc_zeroinit(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_zeroinit *a = arg;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved) ||
	    !ioc_range_valid(a->offset, a->length, UINT64_MAX) || a->offset % 512 ||
	    a->length % 512)
		return -EINVAL;
	ret = ioc_may_write(c);
	if (!ret)
		ret = mfs_zeroinit(c->d->fs, c->ino, a->offset, a->length);
	if (!ret) /* the kernel's cached pages and attributes (mtime) are stale now */
		ioc_written(c, a->offset, a->length);
	return ret;
}

static int ioc_recovery_write(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_recovery_write *a = arg;
	ssize_t n;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved) ||
	    !ioc_range_valid(a->offset, a->length, MENDFS_RW_CHUNK))
		return -EINVAL;
	ret = ioc_may_write(c);
	if (ret)
		return ret;
	n = mfs_recovery_write(c->d->fs, c->ino, a->data, (size_t)a->length, a->offset);
	if (n < 0)
		return (int)n;
	a->written = (uint64_t)n;
	ioc_written(c, a->offset, a->length); /* its cached pages and size */
	return 0;
}

/*
 * Online poison injection: root (the requesting process's uid as FUSE reports
 * it) on a -o poison_inject mount, checked before the struct (EPERM), then
 * the range (EINVAL), then the mount (EROFS: nothing is written on a
 * read-only mount, not even the emulation file).
 */
static int ioc_inject(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_inject *a = arg;
	struct mfsd *d = c->d;
	struct blk_dev_info info;
	uint64_t nr_sectors;
	int ret;

	blk_dev_get_info(d->fs->dev, &info);
	nr_sectors = info.nr_sectors;
	if (!d->poison_inject || fuse_req_ctx(c->req)->uid != 0)
		return -EPERM;
	if (!ioc_valid(a->version, a->flags, a->reserved) || !a->count || a->sector >= nr_sectors ||
	    a->count > nr_sectors - a->sector)
		return -EINVAL;
	if (d->read_only)
		return -EROFS;
	ret = blk_poison_add(d->fs->dev, a->sector, a->count);
	if (ret)
		mfsd_log(LOG_ERR, "inject poison at sector %llu count %llu: %s",
		         (unsigned long long)a->sector, (unsigned long long)a->count,
		         strerror(-ret));
	else
		mfsd_log(LOG_NOTICE, "injected poison at sector %llu count %llu (pid %d)",
		         (unsigned long long)a->sector, (unsigned long long)a->count,
		         (int)fuse_req_ctx(c->req)->pid);
	return ret;
}

static int ioc_stats(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_stats *a = arg;
	struct mfs_stats *fst = &c->d->fs->stats;
	struct blk_dev *dev = c->d->fs->dev;
	struct blk_stats st;

	if (!ioc_valid(a->version, a->flags, a->reserved))
		return -EINVAL;
	blk_dev_get_stats(dev, &st);
	memset((uint8_t *)a + offsetof(struct mendfs_ioc_stats, reads), 0,
	       sizeof(*a) - offsetof(struct mendfs_ioc_stats, reads));
	a->reads = st.ios[BLK_OP_READ];
	a->writes = st.ios[BLK_OP_WRITE];
	a->write_zeroes = st.ios[BLK_OP_WRITE_ZEROES];
	a->read_bytes = st.bytes[BLK_OP_READ];
	a->write_bytes = st.bytes[BLK_OP_WRITE];
	a->requests = st.requests;
	a->errors = st.errors;
	a->poison_hits = st.poison_hits;
	a->media_errors = st.media_errors;
	a->recovered_sectors = st.recovered_sectors;
	a->poison_cleared = st.poison_cleared;
	a->faults = st.faults;
	a->poison_ranges = blk_poison_count(dev);
	a->meta_reads = fst->meta_reads;
	a->meta_writes = fst->meta_writes;
	a->meta_repairs = fst->meta_repairs;
	a->meta_lost = fst->meta_lost;
	a->commits = fst->commits;
	a->journal_blocks = fst->journal_blocks;
	a->checkpoints = fst->checkpoints;
	a->transport = atomic_load(&c->d->tstats.kind);
	a->ring_requests = mfsd_transport_ring_requests(&c->d->tstats);
	return 0;
}

static int ioc_queue_stats(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_queue_stats *a = arg;
	struct blk_dev *dev = c->d->fs->dev;
	struct blk_dev_info info;
	unsigned i;

	if (!ioc_valid(a->version, a->flags, a->reserved) || a->nr_queues || a->count ||
	    a->entry_size || a->pad)
		return -EINVAL;
	blk_dev_get_info(dev, &info);
	memset(a->q, 0, sizeof(a->q));
	a->nr_queues = info.nr_hw_queues;
	a->count =
	        info.nr_hw_queues < MENDFS_QS_MAX_QUEUES ? info.nr_hw_queues : MENDFS_QS_MAX_QUEUES;
	a->entry_size = sizeof(a->q[0]);
	for (i = 0; i < a->count; i++) {
		struct mendfs_ioc_queue_stat *q = &a->q[i];
		struct blk_queue_stats qs;

		if (blk_dev_get_queue_stats(dev, i, &qs))
			return -EIO; /* i < nr_hw_queues: cannot happen */
		q->ios = qs.ios;
		q->bytes = qs.bytes;
		q->requests = qs.requests;
		q->merges = qs.merges;
		q->plug_flushes = qs.plug_flushes;
		q->dispatch_batches = qs.dispatch_batches;
		q->tag_waits = qs.tag_waits;
		q->errors = qs.errors;
		q->tags_in_use = qs.tags_in_use;
		q->depth = qs.depth;
		q->nr_ctxs = qs.nr_ctxs;
	}
	return 0;
}

/*
 * mount -o remount,ro|rw (mount.mendfs): the daemon refuses writes before
 * the core freezes, and takes them again only once the core is writable.
 */
static int ioc_remount(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_remount *a = arg;
	struct mfsd *d = c->d;
	int ret;

	if (fuse_req_ctx(c->req)->uid != 0)
		return -EPERM;
	if (!ioc_valid(a->version, a->flags, a->reserved) || a->read_only > 1 || a->pad)
		return -EINVAL;
	if (a->read_only) {
		d->read_only = true;
		ret = mfs_remount(d->fs, true);
	} else {
		ret = mfs_remount(d->fs, false);
		if (!ret)
			d->read_only = false;
	}
	if (ret)
		mfsd_log(LOG_ERR, "remount %s: %s", a->read_only ? "read-only" : "read-write",
		         strerror(-ret));
	else
		mfsd_log(LOG_INFO, "remounted %s",
		         a->read_only ? "read-only (clean)" : "read-write");
	return ret;
}

/*
 * A scrub step and an online growth exclude each other: a step reads the
 * bitmaps' places and the metadata twins' from the superblock, which a
 * growth moves (one daemon, one filesystem: a static lock).
 */
static pthread_mutex_t maint_lock = PTHREAD_MUTEX_INITIALIZER;

/* mendctl grow MOUNTPOINT: the core grows the filesystem online (mfs_grow_online). */
static int ioc_grow(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_grow *a = arg;
	struct mfs_grow_info g;
	struct mfsd *d = c->d;
	char err[512] = "";
	int ret;

	if (fuse_req_ctx(c->req)->uid != 0)
		return -EPERM;
	if (!ioc_valid(a->version, a->flags, a->reserved))
		return -EINVAL;
	if (d->read_only)
		return -EROFS;
	pthread_mutex_lock(&maint_lock);
	ret = mfs_grow_online(d->fs, &g, err, sizeof(err));
	pthread_mutex_unlock(&maint_lock);
	if (ret) {
		mfsd_log(ret == -EEXIST ? LOG_NOTICE : LOG_ERR, "grow: %s",
		         err[0] ? err : strerror(-ret));
		return ret;
	}
	mfsd_log(LOG_INFO, "grown online from %llu to %llu blocks; %llu data blocks free",
	         (unsigned long long)g.old_blocks, (unsigned long long)g.new_blocks,
	         (unsigned long long)g.free_blocks);
	a->old_blocks = g.old_blocks;
	a->new_blocks = g.new_blocks;
	a->old_data_blocks = g.old_data_len;
	a->data_blocks = g.new_data_len;
	a->free_blocks = g.free_blocks;
	return 0;
}

static int ioc_scrub(const struct ioc_call *c, void *arg)
{
	int ret;

	pthread_mutex_lock(&maint_lock);
	ret = mfsd_ioc_scrub(c->d, c->req, arg);
	pthread_mutex_unlock(&maint_lock);
	return ret;
}

/* Damage events (events.c): may wait up to MENDFS_EV_WAIT_MAX for one. */
static int ioc_events(const struct ioc_call *c, void *arg)
{
	struct mendfs_ioc_events *a = arg;

	if (!ioc_valid(a->version, a->flags, a->reserved))
		return -EINVAL;
	return mfsd_ioc_events(c->d->fs, fuse_req_ctx(c->req)->uid, a);
}

/* Every ioctl the daemon knows; its struct's size is in the number (_IOC_SIZE). */
static const struct {
	unsigned cmd;
	int (*fn)(const struct ioc_call *c, void *arg);
} ioc_table[] = {
        {MENDFS_IOC_RECOVERY_READ, ioc_recovery_read},
        {MENDFS_IOC_BADRANGES, ioc_badranges},
        {MENDFS_IOC_BMAP, ioc_bmap},
        {MENDFS_IOC_ZEROINIT, ioc_zeroinit},
        {MENDFS_IOC_STATS, ioc_stats},
        {MENDFS_IOC_INJECT, ioc_inject},
        {MENDFS_IOC_RECOVERY_WRITE, ioc_recovery_write},
        {MENDFS_IOC_QUEUE_STATS, ioc_queue_stats},
        {MENDFS_IOC_REMOUNT, ioc_remount},
        {MENDFS_IOC_SCRUB, ioc_scrub},
        {MENDFS_IOC_EVENTS, ioc_events},
        {MENDFS_IOC_GROW, ioc_grow},
};

void mfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
                size_t out_bufsz)
{
	struct ioc_call c = {.d = D(req), .req = req, .ino = ino, .f = mfsd_file_of(fi)};
	size_t size = _IOC_SIZE(cmd);
	unsigned i;
	void *a;
	int ret;

	(void)arg;
	for (i = 0; i < sizeof(ioc_table) / sizeof(ioc_table[0]); i++)
		if (ioc_table[i].cmd == cmd)
			break;
	if (i == sizeof(ioc_table) / sizeof(ioc_table[0])) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (flags & FUSE_IOCTL_UNRESTRICTED || in_bufsz != size || out_bufsz != size || !c.f) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	a = malloc(size);
	if (!a) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(a, in_buf, size);
	ret = ioc_table[i].fn(&c, a);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_ioctl(req, 0, a, size);
	free(a);
}
