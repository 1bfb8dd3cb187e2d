/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend's set-up: one ring per hardware queue (with its
 * completion thread unless polled), buffer registration, probing the device
 * (O_DIRECT, logical block size, ZERO_RANGE), open and close, and the ops
 * table the engine reaches the backend through.  Calls uring.c (the cq
 * thread, queue_rqs, poll), uring_sync.c, dio.c, status.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring.h"

/* --- queues --------------------------------------------------------------- */

static void uring_free_pdus(struct blk_hw_queue *hctx)
{
	unsigned t;

	for (t = 0; t < hctx->tags.depth; t++) {
		struct uring_pdu *pdu = hctx->tags.rqs[t].drv;

		if (pdu) {
			free(pdu->bounce);
			free(pdu);
			hctx->tags.rqs[t].drv = NULL;
		}
	}
}

static int uring_init_hctx(struct blk_hw_queue *hctx)
{
	struct blk_dev *dev = hctx->dev;
	struct uring_dev *ud = dev->drv;
	struct io_uring_params p;
	struct uring_queue *uq;
	sigset_t all, old;
	unsigned entries = 1, t;
	int ret;

	uq = calloc(1, sizeof(*uq));
	if (!uq)
		return -ENOMEM;
	uq->hctx = hctx;
	/* SQ >= depth: a request holds at most one SQE, so a free SQE always exists
	 * for a request that holds a tag.  CQ twice that: it can never overflow. */
	while (entries < hctx->tags.depth)
		entries <<= 1;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = entries * 2;
	ret = io_uring_queue_init_params(entries, &uq->ring, &p);
	if (ret < 0)
		goto err_free;
	ret = io_uring_register_files(&uq->ring, &ud->fd, 1);
	if (ret < 0)
		goto err_ring;

	for (t = 0; t < hctx->tags.depth; t++) {
		struct uring_pdu *pdu;

		pdu = calloc(1, sizeof(*pdu) + sizeof(struct iovec) * dev->max_segments);
		if (!pdu) {
			ret = -ENOMEM;
			goto err_pdus;
		}
		hctx->tags.rqs[t].drv = pdu;
	}

	pthread_mutex_lock(&ud->reg_lock);
	if (ud->nr_regs) {
		ret = io_uring_register_buffers(&uq->ring, ud->regs, ud->nr_regs);
		if (!ret) {
			memcpy(uq->regs, ud->regs, sizeof(ud->regs));
			uq->nr_regs = ud->nr_regs;
		}
	}
	pthread_mutex_unlock(&ud->reg_lock);
	if (ret < 0)
		goto err_pdus;

	hctx->drv = uq;
	if (!hctx->polled) {
		/* the thread takes no signals: they belong to the application's threads */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		ret = -pthread_create(&uq->thread, NULL, blk_uring_cq_thread, uq);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (ret)
			goto err_drv;
		uq->has_thread = true;
		{
			char name[16];

			snprintf(name, sizeof(name), "mendblk-cq%u", hctx->index);
			pthread_setname_np(uq->thread, name);
		}
	}
	return 0;

err_drv:
	hctx->drv = NULL;
err_pdus:
	uring_free_pdus(hctx);
err_ring:
	io_uring_queue_exit(&uq->ring);
err_free:
	free(uq);
	return ret;
}

/* Called once every tag of the queue is idle. */
static void uring_exit_hctx(struct blk_hw_queue *hctx)
{
	struct uring_queue *uq = hctx->drv;

	if (!uq)
		return;
	if (uq->has_thread) {
		struct io_uring_sqe *sqe;

		pthread_mutex_lock(&hctx->sq_lock);
		while (!(sqe = io_uring_get_sqe(&uq->ring)))
			blk_uring_submit(uq);
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, URING_EXIT_UDATA);
		blk_uring_submit(uq);
		pthread_mutex_unlock(&hctx->sq_lock);
		pthread_join(uq->thread, NULL);
	}
	uring_free_pdus(hctx);
	/* Drop the ring's reference to the device now: ring teardown is
	 * asynchronous, and the device must be closed when blk_dev_close()
	 * returns (a zram reset or an exclusive open right after must work). */
	io_uring_unregister_files(&uq->ring);
	io_uring_queue_exit(&uq->ring);
	free(uq);
	hctx->drv = NULL;
}

/*
 * Register one more buffer region for READ_FIXED/WRITE_FIXED.  The kernel
 * takes a whole table at once, so every ring drops its table and takes the
 * new one, under its sq_lock: no SQE is prepared against a half-changed
 * table.  On failure every ring keeps the old table.
 */
static int uring_register_buffer(struct blk_dev *dev, void *addr, size_t len)
{
	struct uring_dev *ud = dev->drv;
	struct iovec set[URING_MAX_BUFS];
	unsigned i, nr;
	int ret = 0;

	if (!addr || !len)
		return -EINVAL;
	pthread_mutex_lock(&ud->reg_lock);
	if (ud->nr_regs == URING_MAX_BUFS) {
		ret = -ENOSPC;
		goto out;
	}
	memcpy(set, ud->regs, sizeof(set));
	nr = ud->nr_regs;
	set[nr].iov_base = addr;
	set[nr].iov_len = len;
	nr++;
	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];
		struct uring_queue *uq = hctx->drv;

		if (!uq)
			continue;
		pthread_mutex_lock(&hctx->sq_lock);
		if (uq->nr_regs) {
			io_uring_unregister_buffers(&uq->ring);
			uq->nr_regs = 0;
		}
		ret = io_uring_register_buffers(&uq->ring, set, nr);
		if (!ret) {
			memcpy(uq->regs, set, sizeof(set));
			uq->nr_regs = nr;
		} else if (ud->nr_regs &&
		           !io_uring_register_buffers(&uq->ring, ud->regs, ud->nr_regs)) {
			memcpy(uq->regs, ud->regs, sizeof(ud->regs));
			uq->nr_regs = ud->nr_regs;
		}
		pthread_mutex_unlock(&hctx->sq_lock);
		if (ret)
			break;
	}
	if (ret) {
		/* roll the rings already switched back to the old table */
		while (i--) {
			struct blk_hw_queue *hctx = &dev->hctxs[i];
			struct uring_queue *uq = hctx->drv;

			if (!uq)
				continue;
			pthread_mutex_lock(&hctx->sq_lock);
			io_uring_unregister_buffers(&uq->ring);
			uq->nr_regs = 0;
			if (ud->nr_regs &&
			    !io_uring_register_buffers(&uq->ring, ud->regs, ud->nr_regs)) {
				memcpy(uq->regs, ud->regs, sizeof(ud->regs));
				uq->nr_regs = ud->nr_regs;
			}
			pthread_mutex_unlock(&hctx->sq_lock);
		}
		goto out;
	}
	memcpy(ud->regs, set, sizeof(set));
	ud->nr_regs = nr;
out:
	pthread_mutex_unlock(&ud->reg_lock);
	return ret;
}

/* --- device --------------------------------------------------------------- */

/* Can FALLOCATE zero a range here?  Asked without touching data. */
static bool uring_probe_zero_range(const struct uring_dev *ud, uint64_t raw_size)
{
	uint64_t off;

	if (ud->is_bdev) {
		/* Block devices check the mode before the range: past the end,
		 * EOPNOTSUPP means no, anything else (EINVAL) means yes. */
		return fallocate(ud->fd, URING_ZERO_MODE, (off_t)raw_size, ud->lbs) == 0 ||
		       (errno != EOPNOTSUPP && errno != ENOSYS);
	}
	/* Files: zero one block past EOF (KEEP_SIZE: the size does not change),
	 * then give the block back. */
	off = (raw_size + 4095) & ~(uint64_t)4095;
	if (fallocate(ud->fd, URING_ZERO_MODE, (off_t)off, 4096) != 0)
		return false;
	fallocate(ud->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, 4096);
	return true;
}

/*
 * Direct I/O really works with this alignment?  Some file systems accept
 * O_DIRECT at open and refuse it at the first read; some do not report their
 * alignment.  Returns 0, -EINVAL (refused), or another -errno (ignored: a bad
 * first block must not stop the open).
 */
static int uring_probe_direct(struct uring_dev *ud)
{
	void *buf = blk_dio_alloc(ud->mem_align, ud->lbs > 4096 ? ud->lbs : 4096);
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	do {
		n = pread(ud->fd, buf, ud->lbs, 0);
	} while (n < 0 && errno == EINTR);
	free(buf);
	return n < 0 ? -errno : 0;
}

static int uring_open(struct blk_dev *dev, const struct blk_dev_config *cfg, char *err,
                      size_t errlen)
{
	const char *path = cfg->path;
	bool ro = cfg->flags & BLK_CFG_READONLY;
	int oflags = (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct uring_dev *ud;
	struct statx stx;
	struct stat st;
	uint64_t raw_size;
	bool dioalign = false;
	int ret;

	if (!path || !*path) {
		blk_err(err, errlen, "uring: no device path given");
		return -EINVAL;
	}
	if (stat(path, &st) < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: %s", path,
		        ret == -ENOENT ? "no such device or file" : strerror(-ret));
		return ret;
	}
	if (S_ISDIR(st.st_mode)) {
		blk_err(err, errlen, "%s: is a directory, not a block device or image file", path);
		return -EISDIR;
	}
	if (S_ISCHR(st.st_mode)) {
		blk_err(err, errlen,
		        "%s: is a character device; the uring backend needs a block device or "
		        "an image file (devdax: use the pmem backend)",
		        path);
		return -ENOTBLK;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		blk_err(err, errlen, "%s: not a block device or regular file", path);
		return -EINVAL;
	}

	ud = calloc(1, sizeof(*ud));
	if (!ud)
		return -ENOMEM;
	ud->fd = -1;
	pthread_mutex_init(&ud->reg_lock, NULL);
	ud->direct = !(cfg->flags & BLK_CFG_NO_DIRECT);
	ud->fd = open(path, oflags | (ud->direct ? O_DIRECT : 0));
	if (ud->fd < 0 && errno == EINVAL && ud->direct) {
		/* the file system refuses O_DIRECT (ramfs, some FUSE): buffered */
		ud->direct = false;
		ud->fd = open(path, oflags);
	}
	if (ud->fd < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: cannot open%s: %s", path, ro ? " read-only" : "",
		        strerror(-ret));
		goto err_free;
	}
	if (fstat(ud->fd, &st) < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: %s", path, strerror(-ret));
		goto err_close;
	}
	ud->is_bdev = S_ISBLK(st.st_mode);
	if (!ud->is_bdev && !S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		blk_err(err, errlen, "%s: changed under us: not a block device or regular file",
		        path);
		goto err_close;
	}
	if (statx(ud->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align)
		dioalign = true;

	if (ud->is_bdev) {
		int ssz = 0;

		if (ioctl(ud->fd, BLKGETSIZE64, &raw_size) < 0 ||
		    ioctl(ud->fd, BLKSSZGET, &ssz) < 0) {
			ret = -errno;
			blk_err(err, errlen, "%s: cannot read the device geometry: %s", path,
			        strerror(-ret));
			goto err_close;
		}
		ud->lbs = (unsigned)ssz;
	} else {
		raw_size = (uint64_t)st.st_size;
		ud->lbs = ud->direct && dioalign ? stx.stx_dio_offset_align : BLK_SECTOR_SIZE;
	}
	if (ud->lbs < BLK_SECTOR_SIZE || ud->lbs > 65536 || (ud->lbs & (ud->lbs - 1))) {
		ret = -EINVAL;
		blk_err(err, errlen, "%s: unsupported logical block size %u", path, ud->lbs);
		goto err_close;
	}
	if (ud->is_bdev && ud->lbs > BLK_DIO_MAX_LBS) {
		/* (a file with such a direct I/O alignment goes buffered below) */
		ret = -EINVAL;
		blk_err(err, errlen,
		        "%s: logical block size %u is larger than %u bytes, the largest supported "
		        "(mendfs writes %u-byte blocks, each on its own)",
		        path, ud->lbs, BLK_DIO_MAX_LBS, BLK_DIO_MAX_LBS);
		goto err_close;
	}
	/*
	 * memory: at least a page and a block, whatever the kernel reports (zram
	 * reports 512 bytes and corrupts memory around buffers that are not page
	 * aligned; see dio.h)
	 */
	ud->mem_align = blk_dio_mem_align(dioalign ? stx.stx_dio_mem_align : 0, ud->lbs);
	if ((raw_size & ~(uint64_t)(ud->lbs - 1)) < 4096) {
		ret = -EINVAL;
		blk_err(err, errlen, "%s: too small: %llu bytes, the minimum is 4096", path,
		        (unsigned long long)raw_size);
		goto err_close;
	}

	if (ud->direct) {
		ret = ud->lbs > BLK_DIO_MAX_LBS ? -EINVAL : uring_probe_direct(ud);
		if (ret == -EINVAL && !dioalign && !ud->is_bdev && ud->lbs < 4096) {
			/* no alignment reported: 4 KiB sectors underneath? */
			ud->lbs = 4096;
			ud->mem_align = blk_dio_mem_align(ud->mem_align, ud->lbs);
			ret = uring_probe_direct(ud);
		}
		if (ret == -EINVAL) {
			/* accepted at open, refused at I/O: go buffered */
			int fd = open(path, oflags);

			if (fd < 0) {
				ret = -errno;
				blk_err(err, errlen, "%s: cannot open: %s", path, strerror(-ret));
				goto err_close;
			}
			close(ud->fd);
			ud->fd = fd;
			ud->direct = false;
			if (!ud->is_bdev)
				ud->lbs = BLK_SECTOR_SIZE;
		}
	}

	ud->zeroes = blk_dio_alloc(ud->mem_align, URING_ZERO_LEN);
	if (!ud->zeroes) {
		ret = -ENOMEM;
		goto err_close;
	}
	memset(ud->zeroes, 0, URING_ZERO_LEN);
	atomic_init(&ud->zero_range, !ro && uring_probe_zero_range(ud, raw_size));

	dev->size = raw_size & ~(uint64_t)(ud->lbs - 1);
	dev->nr_sectors = dev->size >> BLK_SECTOR_SHIFT;
	dev->lbs_mask = (uint16_t)(ud->lbs - 1);
	dev->byte_granular = false;
	dev->drv = ud;
	return 0;

err_close:
	close(ud->fd);
err_free:
	pthread_mutex_destroy(&ud->reg_lock);
	free(ud);
	return ret;
}

static void uring_close(struct blk_dev *dev)
{
	struct uring_dev *ud = dev->drv;

	if (!ud)
		return;
	close(ud->fd);
	free(ud->zeroes);
	pthread_mutex_destroy(&ud->reg_lock);
	free(ud);
	dev->drv = NULL;
}

/* The file or block device grew: its new size, whole logical blocks. */
static int uring_resize(struct blk_dev *dev, uint64_t *size, char *err, size_t errlen)
{
	struct uring_dev *ud = dev->drv;
	uint64_t raw;
	struct stat st;
	int ret;

	if (ud->is_bdev ? ioctl(ud->fd, BLKGETSIZE64, &raw) < 0 : fstat(ud->fd, &st) < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: cannot read the size: %s", dev->path, strerror(-ret));
		return ret;
	}
	if (!ud->is_bdev)
		raw = (uint64_t)st.st_size;
	*size = raw & ~(uint64_t)(ud->lbs - 1);
	return 0;
}

const struct blk_backend_ops blk_uring_ops = {
        .name = "uring",
        .concurrent = false, /* one SQ ring per queue: the core serialises with sq_lock */
        .async = true,
        .open = uring_open,
        .close = uring_close,
        .init_hctx = uring_init_hctx,
        .exit_hctx = uring_exit_hctx,
        .queue_rqs = blk_uring_queue_rqs,
        .poll = blk_uring_poll,
        .read_sync = blk_uring_read_sync,
        .write_sync = blk_uring_write_sync,
        .clear_poison = blk_uring_clear_poison,
        .poison_changed = NULL,
        .direct_access = NULL, /* no mapping: FUSE reads copy */
        .register_buffer = uring_register_buffer,
        .flush_sync = blk_uring_flush_sync,
        .resize = uring_resize,
};
