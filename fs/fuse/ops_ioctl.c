/* SPDX-License-Identifier: MIT */
/*
 * The recovery ioctls (include/mendfs/ioctl.h, docs/RECOVERY.md): each
 * MENDFS_IOC_* struct checked and translated into one call of the core's
 * recovery API (mfs_recovery.h) or the engine's statistics and poison table.
 * Called through the ops table; calls the core, the engine, libfuse and the
 * daemon's log.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "mendfs/ioctl.h"
#include "mfs_recovery.h"
#include "ops.h"

/* The header every MENDFS_IOC_* struct starts with; reserved words must be zero. */
static bool ioc_valid(uint32_t version, uint32_t flags, const uint64_t *reserved, unsigned n)
{
	if (version != MENDFS_IOC_VERSION || flags)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (reserved[i])
			return false;
	return true;
}

static bool can_read(const struct mfsd_file *f)
{
	return (f->flags & O_ACCMODE) == O_RDONLY || (f->flags & O_ACCMODE) == O_RDWR;
}

static bool can_write(const struct mfsd_file *f)
{
	return (f->flags & O_ACCMODE) == O_WRONLY || (f->flags & O_ACCMODE) == O_RDWR;
}

static int ioc_recovery_read(struct mfsd *d, uint64_t ino, struct mfsd_file *f,
                             struct mendfs_ioc_recovery_read *a)
{
	struct mfs_frange r[MENDFS_RR_MAX_RANGES];
	unsigned nr, i;
	bool trunc;
	ssize_t n;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->length ||
	    a->length > MENDFS_RR_CHUNK || a->offset > (uint64_t)INT64_MAX - a->length)
		return -EINVAL;
	if (!can_read(f))
		return -EBADF;
	n = mfs_recovery_read(d->fs, ino, a->data, (size_t)a->length, a->offset, r,
	                      MENDFS_RR_MAX_RANGES, &nr, &trunc);
	if (n < 0)
		return (int)n;
	memset(a->data + n, 0, MENDFS_RR_CHUNK - (size_t)n);
	memset(a->zeroed, 0, sizeof(a->zeroed));
	a->bytes = (uint64_t)n;
	a->nr_zeroed = nr;
	a->truncated = trunc;
	for (i = 0; i < nr; i++) {
		a->zeroed[i].offset = r[i].offset;
		a->zeroed[i].length = r[i].length;
	}
	return 0;
}

static int ioc_badranges(struct mfsd *d, uint64_t ino, struct mendfs_ioc_badranges *a)
{
	struct mfs_frange r[MENDFS_BADRANGES_MAX];
	unsigned nr, i;
	bool last;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || a->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mfs_badranges(d->fs, ino, a->start, r, MENDFS_BADRANGES_MAX, &nr, &a->next, &last);
	if (ret)
		return ret;
	memset(a->ranges, 0, sizeof(a->ranges));
	a->nr = nr;
	a->last = last;
	for (i = 0; i < nr; i++) {
		a->ranges[i].offset = r[i].offset;
		a->ranges[i].length = r[i].length;
	}
	return 0;
}

static int ioc_bmap(struct mfsd *d, uint64_t ino, struct mendfs_ioc_bmap *a)
{
	struct mfs_fextent x[MENDFS_BMAP_MAX];
	unsigned nr, i;
	bool last;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || a->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mfs_bmap_extents(d->fs, ino, a->start, x, MENDFS_BMAP_MAX, &nr, &a->next, &last);
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

static int ioc_zeroinit(struct mfsd *d, uint64_t ino, struct mendfs_ioc_zeroinit *a,
                        struct mfsd_file *f)
{
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->length || a->offset % 512 ||
	    a->length % 512 || a->offset > (uint64_t)INT64_MAX - a->length)
		return -EINVAL;
	if (!can_write(f))
		return -EBADF;
	if (d->read_only)
		return -EROFS;
	ret = mfs_zeroinit(d->fs, ino, a->offset, a->length);
	if (!ret) /* the kernel's cached pages and attributes (mtime) are stale now */
		fuse_lowlevel_notify_inval_inode(d->se, ino, (off_t)a->offset, (off_t)a->length);
	return ret;
}

static int ioc_recovery_write(struct mfsd *d, uint64_t ino, struct mendfs_ioc_recovery_write *a,
                              struct mfsd_file *f)
{
	ssize_t n;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->length ||
	    a->length > MENDFS_RW_CHUNK || a->offset > (uint64_t)INT64_MAX - a->length)
		return -EINVAL;
	if (!can_write(f))
		return -EBADF;
	if (d->read_only)
		return -EROFS;
	n = mfs_recovery_write(d->fs, ino, a->data, (size_t)a->length, a->offset);
	if (n < 0)
		return (int)n;
	a->written = (uint64_t)n;
	/* written behind the kernel's back: its cached pages and size are stale */
	fuse_lowlevel_notify_inval_inode(d->se, ino, (off_t)a->offset, (off_t)a->length);
	return 0;
}

/*
 * Online poison injection: root (the requesting process's uid as FUSE reports
 * it) on a -o poison_inject mount, checked before the struct (EPERM), then
 * the range (EINVAL), then the mount (EROFS: nothing is written on a
 * read-only mount, not even the emulation file).
 */
static int ioc_inject(struct mfsd *d, fuse_req_t req, struct mendfs_ioc_inject *a)
{
	struct blk_dev_info info;
	uint64_t nr_sectors;
	int ret;

	blk_dev_get_info(d->fs->dev, &info);
	nr_sectors = info.nr_sectors;
	if (!d->poison_inject || fuse_req_ctx(req)->uid != 0)
		return -EPERM;
	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->count ||
	    a->sector >= nr_sectors || a->count > nr_sectors - a->sector)
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
		         (int)fuse_req_ctx(req)->pid);
	return ret;
}

static int ioc_stats(struct mfsd *d, struct mendfs_ioc_stats *a)
{
	struct mfs_stats *fst = &d->fs->stats;
	struct blk_stats st;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4))
		return -EINVAL;
	blk_dev_get_stats(d->fs->dev, &st);
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
	a->poison_ranges = blk_poison_count(d->fs->dev);
	a->meta_reads = fst->meta_reads;
	a->meta_writes = fst->meta_writes;
	a->meta_repairs = fst->meta_repairs;
	a->meta_lost = fst->meta_lost;
	a->commits = fst->commits;
	a->journal_blocks = fst->journal_blocks;
	a->checkpoints = fst->checkpoints;
	return 0;
}

/*
 * The recovery ioctls (include/mendfs/ioctl.h, docs/RECOVERY.md): restricted
 * ioctls only, each with its exact struct size in and out.  Recovery read
 * needs the file open for reading, zero-init open for writing.
 */
void mfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
                size_t out_bufsz)
{
	struct mfsd *d = D(req);
	struct mfsd_file *f = mfsd_file_of(fi);
	size_t size;
	void *a;
	int ret;

	(void)arg;
	switch (cmd) {
	case MENDFS_IOC_RECOVERY_READ:
	case MENDFS_IOC_BADRANGES:
	case MENDFS_IOC_BMAP:
	case MENDFS_IOC_ZEROINIT:
	case MENDFS_IOC_STATS:
	case MENDFS_IOC_INJECT:
	case MENDFS_IOC_RECOVERY_WRITE:
		size = _IOC_SIZE(cmd);
		break;
	default:
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (flags & FUSE_IOCTL_UNRESTRICTED || in_bufsz != size || out_bufsz != size || !f) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	a = malloc(size);
	if (!a) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(a, in_buf, size);
	switch (cmd) {
	case MENDFS_IOC_RECOVERY_READ:
		ret = ioc_recovery_read(d, ino, f, a);
		break;
	case MENDFS_IOC_BADRANGES:
		ret = ioc_badranges(d, ino, a);
		break;
	case MENDFS_IOC_BMAP:
		ret = ioc_bmap(d, ino, a);
		break;
	case MENDFS_IOC_ZEROINIT:
		ret = ioc_zeroinit(d, ino, a, f);
		break;
	case MENDFS_IOC_INJECT:
		ret = ioc_inject(d, req, a);
		break;
	case MENDFS_IOC_RECOVERY_WRITE:
		ret = ioc_recovery_write(d, ino, a, f);
		break;
	default:
		ret = ioc_stats(d, a);
		break;
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_ioctl(req, 0, a, size);
	free(a);
}
