/* SPDX-License-Identifier: MIT */
/*
 * uring.c: the io_uring backend, the block-device (NVMe) path.
 *
 * One io_uring per hardware queue, the device registered as fixed file 0,
 * O_DIRECT where the file system or device allows it (buffered otherwise);
 * memory that O_DIRECT must not be given (dio.h: page and block alignment)
 * goes through a per-request aligned bounce buffer.
 * queue_rqs() turns each request into one SQE (READ/WRITE, their FIXED forms
 * for registered buffers, READV/WRITEV for merged requests, FSYNC, FALLOCATE)
 * and rings the doorbell once per batch.  Completions are reaped in batches by
 * a thread per queue, or with BLK_CFG_POLLED by whichever submitter calls
 * blk_poll().  Short transfers are completed partly and the rest re-issued;
 * a read that fails with a media error is probed block by block so the clean
 * prefix completes and the bio that meets the bad block fails with its sector.
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

#include "blk_internal.h"
#include "dio.h"

#define URING_MAX_BUFS     16             /* registered buffer regions */
#define URING_REAP_BATCH   64             /* CQEs consumed per peek */
#define URING_MAX_STALLS   16             /* re-issues in a row that moved nothing */
#define URING_ZERO_LEN     (64u * 1024)   /* the shared zero buffer for WRITE_ZEROES */
#define URING_SYNC_CHUNK   (1024u * 1024) /* bounce size of the synchronous paths */
#define URING_POLL_WAIT_NS 1000000        /* a poller's longest sleep: see uring_poll_wait() */
#define URING_ZERO_MODE    (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)

/*
 * user_data of the NOP that tells a completion thread to exit.  Not -1:
 * liburing reserves that value (LIBURING_UDATA_TIMEOUT) and silently eats
 * such CQEs on rings without IORING_FEAT_EXT_ARG.
 */
static const char uring_exit_token;
#define URING_EXIT_UDATA ((uint64_t)(uintptr_t)&uring_exit_token)

/* The device, shared by all queues.  Immutable after open except where noted. */
struct uring_dev {
	int fd;
	bool direct; /* O_DIRECT: offsets, lengths and buffers must be aligned */
	bool is_bdev;
	_Atomic bool zero_range; /* FALLOCATE ZERO_RANGE works; cleared on EOPNOTSUPP */
	unsigned lbs;            /* logical block size: offset and length unit */
	unsigned mem_align;      /* buffer alignment under O_DIRECT: >= lbs, >= a page (dio.h) */
	void *zeroes;            /* URING_ZERO_LEN zero bytes, aligned */

	pthread_mutex_t reg_lock; /* serialises register_buffer; protects regs */
	struct iovec regs[URING_MAX_BUFS];
	unsigned nr_regs;
};

/* One hardware queue. */
struct uring_queue {
	struct io_uring ring;
	struct blk_hw_queue *hctx;
	pthread_t thread; /* completion thread, when !hctx->polled */
	bool has_thread;
	/* This ring's registered buffers: written with sq_lock held, read under it. */
	struct iovec regs[URING_MAX_BUFS];
	unsigned nr_regs;
};

/* What the SQE of a request does; decides how its CQE is read. */
enum uring_kind {
	URING_K_RW,     /* READ/WRITE(V)(_FIXED), and WRITEV of zeroes */
	URING_K_FLUSH,  /* FSYNC for a FLUSH request */
	URING_K_FALLOC, /* FALLOCATE ZERO_RANGE for WRITE_ZEROES */
	URING_K_SYNC,   /* FSYNC after a FUA WRITE_ZEROES done by FALLOCATE */
};

/* Per tag, in rq->drv.  Touched only by the thread that owns the request. */
struct uring_pdu {
	void *bounce; /* aligned; allocated the first time a request needs it */
	size_t bounce_len;
	uint32_t issued; /* bytes the SQE moves: rq->len except for WRITEV of zeroes */
	uint8_t kind;    /* enum uring_kind */
	bool bounced;    /* the SQE moves pdu->bounce, not the caller's memory */
	bool want_sync;  /* next issue is the FUA fsync of a zeroed range */
	uint8_t stalls;
	unsigned nr_iov;
	struct iovec iov[]; /* the request's memory from its current position */
};

/* --- small helpers ------------------------------------------------------- */

static inline bool uring_media_errno(int err)
{
	return err == EIO || err == ENODATA || err == EBADMSG;
}

/* Does a buffer of the caller need the bounce buffer on this fd? */
static inline bool uring_misaligned(const struct uring_dev *ud, uint64_t pos, const void *buf,
                                    size_t len)
{
	return ud->direct && !blk_dio_buf_ok(buf, pos | len, ud->mem_align, ud->lbs);
}

/* pread/pwrite all of [pos, pos + len), retrying EINTR and short transfers. */
static int uring_pio(int fd, bool write, void *buf, size_t len, uint64_t pos)
{
	char *p = buf;

	while (len) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)pos) : pread(fd, p, len, (off_t)pos);

		if (unlikely(n < 0)) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (unlikely(n == 0))
			return write ? -EIO : -ENXIO; /* the file shrank under us */
		p += n;
		pos += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* --- synchronous path (poison slow path, probes) -------------------------- */

/*
 * Read [pos, pos + len) one logical block at a time through an aligned
 * buffer, to find the first block the device cannot read.  Returns 0 (every
 * block read, @buf filled), -EIO with *bad set, or another -errno.
 */
static int uring_read_blocks(struct uring_dev *ud, uint64_t pos, void *buf, size_t len,
                             uint64_t *bad)
{
	uint64_t b, end = pos + len;
	char *blk;
	int ret = 0;

	blk = blk_dio_alloc(ud->mem_align, ud->lbs);
	if (!blk)
		return -ENOMEM;
	for (b = pos & ~(uint64_t)(ud->lbs - 1); b < end; b += ud->lbs) {
		uint64_t s = b > pos ? b : pos, e = b + ud->lbs < end ? b + ud->lbs : end;

		ret = uring_pio(ud->fd, false, blk, ud->lbs, b);
		if (ret) {
			if (uring_media_errno(-ret)) {
				/* the block is the unit the device lost; report its first
				 * sector inside the asked range */
				if (bad)
					*bad = s >> BLK_SECTOR_SHIFT;
				ret = -EIO;
			}
			break;
		}
		memcpy((char *)buf + (s - pos), blk + (s - b), e - s);
	}
	free(blk);
	return ret;
}

static int uring_read_sync(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, uint64_t *bad)
{
	struct uring_dev *ud = dev->drv;
	uint64_t mask = ud->lbs - 1, start, end, cur;
	char *bounce;
	int ret = 0;

	if (!len)
		return 0;
	if (!uring_misaligned(ud, pos, buf, len)) {
		ret = uring_pio(ud->fd, false, buf, len, pos);
		if (unlikely(ret) && uring_media_errno(-ret))
			ret = uring_read_blocks(ud, pos, buf, len, bad);
		return ret;
	}
	/* O_DIRECT and an unaligned range or buffer: read whole blocks, copy the middle */
	start = pos & ~mask;
	end = (pos + len + mask) & ~mask;
	bounce = blk_dio_alloc(ud->mem_align, URING_SYNC_CHUNK);
	if (!bounce)
		return -ENOMEM;
	for (cur = start; cur < end; cur += URING_SYNC_CHUNK) {
		size_t n = end - cur < URING_SYNC_CHUNK ? end - cur : URING_SYNC_CHUNK;
		uint64_t s = cur > pos ? cur : pos, e = cur + n < pos + len ? cur + n : pos + len;

		ret = uring_pio(ud->fd, false, bounce, n, cur);
		if (unlikely(ret)) {
			if (uring_media_errno(-ret))
				ret = uring_read_blocks(ud, s, (char *)buf + (s - pos),
				                        pos + len - s, bad);
			break;
		}
		memcpy((char *)buf + (s - pos), bounce + (s - cur), e - s);
	}
	free(bounce);
	return ret;
}

static int uring_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len)
{
	struct uring_dev *ud = dev->drv;
	uint64_t mask = ud->lbs - 1, start, end, cur;
	char *bounce;
	int ret = 0;

	if (!len)
		return 0;
	if (!uring_misaligned(ud, pos, buf, len))
		return uring_pio(ud->fd, true, (void *)buf, len, pos);
	/*
	 * O_DIRECT and an unaligned range or buffer: read-modify-write the
	 * partial blocks at the edges.  The slow path that calls this owns the
	 * range; nothing else writes those blocks meanwhile.
	 */
	start = pos & ~mask;
	end = (pos + len + mask) & ~mask;
	bounce = blk_dio_alloc(ud->mem_align, URING_SYNC_CHUNK);
	if (!bounce)
		return -ENOMEM;
	for (cur = start; cur < end && !ret; cur += URING_SYNC_CHUNK) {
		size_t n = end - cur < URING_SYNC_CHUNK ? end - cur : URING_SYNC_CHUNK;
		uint64_t s = cur > pos ? cur : pos, e = cur + n < pos + len ? cur + n : pos + len;

		if (s > cur)
			ret = uring_pio(ud->fd, false, bounce, ud->lbs, cur);
		if (!ret && e < cur + n)
			ret = uring_pio(ud->fd, false, bounce + n - ud->lbs, ud->lbs,
			                cur + n - ud->lbs);
		if (ret)
			break;
		memcpy(bounce + (s - cur), (const char *)buf + (s - pos), e - s);
		ret = uring_pio(ud->fd, true, bounce, n, cur);
	}
	free(bounce);
	return ret;
}

static int uring_flush_sync(struct blk_dev *dev)
{
	struct uring_dev *ud = dev->drv;

	while (fdatasync(ud->fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Block devices: rewriting a bad sector is how the drive remaps it. */
static int uring_clear_poison(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	(void)dev;
	(void)sector;
	(void)nr;
	return 0;
}

/* --- submission ----------------------------------------------------------- */

static void *uring_bounce(struct uring_pdu *pdu, size_t len, const struct uring_dev *ud,
                          const struct blk_dev *dev)
{
	if (unlikely(pdu->bounce_len < len)) {
		size_t want = len > dev->max_bytes ? len : dev->max_bytes;

		free(pdu->bounce);
		pdu->bounce_len = 0;
		pdu->bounce = blk_dio_alloc(ud->mem_align, want);
		if (!pdu->bounce)
			return NULL;
		pdu->bounce_len = want;
	}
	return pdu->bounce;
}

/*
 * Describe the request's memory from its current position: the bios of the
 * chain, skipping what a partial completion already moved of the first one.
 * Returns the number of segments, or -errno.
 */
static int uring_map_rq(const struct blk_request *rq, struct iovec *iov, unsigned max)
{
	const struct blk_bio *bio;
	size_t skip = rq->bio->done;
	uint32_t left = rq->len;
	unsigned n = 0, i;

	blk_rq_for_each_bio (bio, rq) {
		for (i = 0; i < bio->nr_segs && left; i++) {
			char *base = bio->iov[i].iov_base;
			size_t l = bio->iov[i].iov_len;

			if (skip) {
				if (skip >= l) {
					skip -= l;
					continue;
				}
				base += skip;
				l -= skip;
				skip = 0;
			}
			if (l > left)
				l = left;
			if (!l)
				continue;
			if (unlikely(n == max))
				return -E2BIG;
			iov[n].iov_base = base;
			iov[n].iov_len = l;
			n++;
			left -= (uint32_t)l;
		}
		if (!left)
			break;
	}
	return unlikely(left) ? -EINVAL : (int)n;
}

/* Index of the registered buffer holding [buf, buf + len), or -1. */
static inline int uring_fixed_index(const struct uring_queue *uq, const void *buf, size_t len)
{
	uintptr_t b = (uintptr_t)buf;
	unsigned i;

	for (i = 0; i < uq->nr_regs; i++) {
		uintptr_t r = (uintptr_t)uq->regs[i].iov_base;

		if (b >= r && len <= uq->regs[i].iov_len && b - r <= uq->regs[i].iov_len - len)
			return (int)i;
	}
	return -1;
}

static inline void uring_end(struct blk_request *rq, enum blk_status sts, struct blk_comp_batch *cb)
{
	struct uring_pdu *pdu = rq->drv;

	pdu->stalls = 0;
	pdu->want_sync = false;
	rq->status = (uint8_t)sts;
	blk_comp_add(cb, rq);
}

/*
 * Turn @rq into one SQE (caller holds sq_lock).  Returns 0 when queued,
 * -EBUSY when the ring has no free SQE even after a submit, 1 when the
 * request was ended into @cb instead (it cannot be issued).
 */
static int uring_prep_rq(struct uring_queue *uq, struct blk_request *rq, struct blk_comp_batch *cb)
{
	struct blk_dev *dev = uq->hctx->dev;
	struct uring_dev *ud = dev->drv;
	struct uring_pdu *pdu = rq->drv;
	uint64_t off = rq->sector << BLK_SECTOR_SHIFT;
	struct io_uring_sqe *sqe;
	bool write = rq->op != BLK_OP_READ;
	int rw_flags = 0, fixed = -1, nr;
	void *addr = NULL;

	pdu->bounced = false;
	pdu->issued = rq->len;
	switch (rq->op) {
	case BLK_OP_READ:
	case BLK_OP_WRITE:
		pdu->kind = URING_K_RW;
		nr = uring_map_rq(rq, pdu->iov, dev->max_segments);
		if (unlikely(nr <= 0)) {
			uring_end(rq, BLK_STS_INVAL, cb);
			return 1;
		}
		pdu->nr_iov = (unsigned)nr;
		addr = pdu->iov[0].iov_base;
		if (ud->direct &&
		    unlikely(!blk_dio_iov_ok(pdu->iov, pdu->nr_iov, ud->mem_align, ud->lbs))) {
			/* memory O_DIRECT must not be given (EINVAL, or worse: zram reads
			 * whole pages around memory that is not page aligned): move the
			 * request's bytes, and only those, through an aligned copy */
			addr = uring_bounce(pdu, rq->len, ud, dev);
			if (unlikely(!addr)) {
				uring_end(rq, BLK_STS_IOERR, cb);
				return 1;
			}
			if (write)
				blk_dio_copy_from_iov(pdu->iov, pdu->nr_iov, addr, rq->len);
			pdu->bounced = true;
		}
		if (uq->nr_regs && pdu->nr_iov == 1 && !pdu->bounced)
			fixed = uring_fixed_index(uq, addr, rq->len);
		if (write && (rq->bio->flags & BLK_BIO_FUA))
			rw_flags = RWF_DSYNC;
		break;
	case BLK_OP_FLUSH:
		pdu->kind = URING_K_FLUSH;
		break;
	case BLK_OP_WRITE_ZEROES:
		if (unlikely(pdu->want_sync)) {
			pdu->kind = URING_K_SYNC;
			break;
		}
		if (atomic_load_explicit(&ud->zero_range, memory_order_relaxed)) {
			pdu->kind = URING_K_FALLOC;
			break;
		}
		/* no ZERO_RANGE: write zeroes from the shared buffer, as much as one SQE takes */
		pdu->kind = URING_K_RW;
		pdu->issued = 0;
		for (nr = 0; nr < dev->max_segments && pdu->issued < rq->len; nr++) {
			uint32_t l = rq->len - pdu->issued;

			pdu->iov[nr].iov_base = ud->zeroes;
			pdu->iov[nr].iov_len = l < URING_ZERO_LEN ? l : URING_ZERO_LEN;
			pdu->issued += (uint32_t)pdu->iov[nr].iov_len;
		}
		pdu->nr_iov = (unsigned)nr;
		addr = ud->zeroes;
		if (rq->bio->flags & BLK_BIO_FUA)
			rw_flags = RWF_DSYNC;
		break;
	default:
		uring_end(rq, BLK_STS_INVAL, cb);
		return 1;
	}

	sqe = io_uring_get_sqe(&uq->ring);
	if (unlikely(!sqe)) {
		/* full: push what is queued to the kernel and try once more */
		io_uring_submit(&uq->ring);
		sqe = io_uring_get_sqe(&uq->ring);
		if (!sqe)
			return -EBUSY;
	}

	switch (pdu->kind) {
	case URING_K_RW:
		if (fixed >= 0) {
			if (write)
				io_uring_prep_write_fixed(sqe, 0, addr, pdu->issued, off, fixed);
			else
				io_uring_prep_read_fixed(sqe, 0, addr, pdu->issued, off, fixed);
		} else if (pdu->nr_iov == 1 || pdu->bounced) {
			io_uring_prep_rw(write ? IORING_OP_WRITE : IORING_OP_READ, sqe, 0, addr,
			                 pdu->issued, off);
		} else {
			io_uring_prep_rw(write ? IORING_OP_WRITEV : IORING_OP_READV, sqe, 0,
			                 pdu->iov, pdu->nr_iov, off);
		}
		sqe->rw_flags = rw_flags;
		break;
	case URING_K_FLUSH:
	case URING_K_SYNC:
		io_uring_prep_fsync(sqe, 0, IORING_FSYNC_DATASYNC);
		break;
	case URING_K_FALLOC:
		io_uring_prep_fallocate(sqe, 0, URING_ZERO_MODE, (off_t)off, (off_t)rq->len);
		break;
	}
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data(sqe, rq);
	return 0;
}

/* Hand everything queued in the SQ to the kernel. */
static void uring_submit(struct uring_queue *uq)
{
	unsigned spins = 0;

	while (io_uring_sq_ready(&uq->ring)) {
		int ret = io_uring_submit(&uq->ring);

		if (likely(ret > 0))
			continue;
		/* 0 or a transient error (no memory for requests, CQ overflow
		 * being flushed, a signal): the SQEs stay queued, try again */
		if (ret < 0 && ret != -EAGAIN && ret != -EBUSY && ret != -EINTR && ret != -ENOMEM) {
			fprintf(stderr, "mendblk: uring: io_uring_submit: %s\n", strerror(-ret));
			break;
		}
		if (++spins > 1000)
			usleep(100);
		else
			sched_yield();
	}
}

/*
 * The core calls this with sq_lock held (the backend is not concurrent), so
 * the SQ ring has one producer.  One io_uring_submit for the whole list: the
 * doorbell of blk-mq's 'last' request.
 */
static struct blk_request *uring_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                           struct blk_comp_batch *cb)
{
	struct uring_queue *uq = hctx->drv;

	while (list) {
		struct blk_request *next = list->rq_next;

		if (unlikely(uring_prep_rq(uq, list, cb) == -EBUSY))
			break; /* list and what follows are busy: the core retries them */
		list = next;
	}
	uring_submit(uq);
	return list;
}

/* --- completion ----------------------------------------------------------- */

/*
 * A read failed with a media error.  Read the request again block by block
 * to find the first bad block: the clean prefix completes, the block is
 * recorded as poison, and the bio holding it fails with its first sector.
 * A recovery read goes to the poison slow path instead, which zero-fills.
 */
static void uring_media_error(struct uring_queue *uq, struct blk_request *rq,
                              struct blk_comp_batch *cb)
{
	struct blk_dev *dev = uq->hctx->dev;
	struct uring_dev *ud = dev->drv;
	struct uring_pdu *pdu = rq->drv;
	uint64_t pos = rq->sector << BLK_SECTOR_SHIFT;
	uint32_t off = 0;
	char *blk;
	int ret = 0;

	blk = uring_bounce(pdu, ud->lbs, ud, dev);
	if (unlikely(!blk)) {
		uring_end(rq, BLK_STS_IOERR, cb);
		return;
	}
	while (off < rq->len) {
		ret = uring_pio(ud->fd, false, blk, ud->lbs, pos + off);
		if (ret)
			break;
		blk_dio_copy_to_iov(pdu->iov, pdu->nr_iov, off, blk, ud->lbs);
		off += ud->lbs;
	}
	if (!ret) {
		/* the error did not repeat: every block is in the caller's memory */
		uring_end(rq, BLK_STS_OK, cb);
		return;
	}
	if (!uring_media_errno(-ret)) {
		uring_end(rq, blk_errno_to_status(-ret), cb);
		return;
	}
	blk_poison_record(dev, (pos + off) >> BLK_SECTOR_SHIFT, ud->lbs >> BLK_SECTOR_SHIFT);
	if (off)
		blk_update_request(rq, BLK_STS_OK, off);
	if (rq->bio->flags & BLK_BIO_RECOVERY) {
		pdu->stalls = 0;
		rq->rq_next = NULL;
		blk_rq_slowpath(uq->hctx, rq, cb);
		return;
	}
	rq->bad_sector = (pos + off) >> BLK_SECTOR_SHIFT;
	uring_end(rq, BLK_STS_MEDIA, cb);
}

/*
 * One CQE.  Requests that are done go to @cb; those with work left go on
 * *requeue, re-issued by the caller once the batch is consumed.
 */
static void uring_complete(struct uring_queue *uq, struct blk_request *rq, int res,
                           struct blk_comp_batch *cb, struct blk_request **requeue)
{
	struct uring_dev *ud = uq->hctx->dev->drv;
	struct uring_pdu *pdu = rq->drv;
	uint32_t done;

	/* The common case: the whole request moved. */
	if (likely(pdu->kind == URING_K_RW && res >= 0 && (uint32_t)res == rq->len)) {
		if (unlikely(pdu->bounced) && rq->op == BLK_OP_READ)
			blk_dio_copy_to_iov(pdu->iov, pdu->nr_iov, 0, pdu->bounce, rq->len);
		uring_end(rq, BLK_STS_OK, cb);
		return;
	}

	if (res == -EAGAIN || res == -EINTR)
		goto stall;
	switch (pdu->kind) {
	case URING_K_FLUSH:
	case URING_K_SYNC:
		uring_end(rq, res < 0 ? blk_errno_to_status(-res) : BLK_STS_OK, cb);
		return;
	case URING_K_FALLOC:
		if (res == -EOPNOTSUPP) {
			/* the probe at open was wrong (a stacked device?): write zeroes */
			atomic_store_explicit(&ud->zero_range, false, memory_order_relaxed);
			goto again;
		}
		if (res < 0) {
			uring_end(rq, blk_errno_to_status(-res), cb);
			return;
		}
		if (rq->bio->flags & BLK_BIO_FUA) {
			pdu->want_sync = true;
			goto again;
		}
		uring_end(rq, BLK_STS_OK, cb);
		return;
	}

	if (res < 0) {
		if (rq->op == BLK_OP_READ && uring_media_errno(-res)) {
			uring_media_error(uq, rq, cb);
			return;
		}
		uring_end(rq, blk_errno_to_status(-res), cb);
		return;
	}
	/*
	 * Short transfer (or one chunk of zeroes).  Complete what moved, in whole
	 * blocks so the re-issue stays aligned (the sector cursor counts 512-byte
	 * units, O_DIRECT wants blocks), and issue the rest.
	 */
	if (unlikely(pdu->bounced) && rq->op == BLK_OP_READ)
		blk_dio_copy_to_iov(pdu->iov, pdu->nr_iov, 0, pdu->bounce, (uint32_t)res);
	done = (uint32_t)res & ~(ud->lbs - 1);
	if (!done)
		goto stall;
	pdu->stalls = 0;
	if (!blk_update_request(rq, BLK_STS_OK, done)) {
		uring_end(rq, BLK_STS_OK, cb);
		return;
	}
	goto again;
stall:
	if (unlikely(++pdu->stalls > URING_MAX_STALLS)) {
		uring_end(rq, res < 0 ? blk_errno_to_status(-res) : BLK_STS_IOERR, cb);
		return;
	}
again:
	rq->rq_next = *requeue;
	*requeue = rq;
}

/* Process CQEs already copied out of the ring (no lock held). */
static void uring_process(struct uring_queue *uq, const uint64_t *udata, const int *res, unsigned n,
                          struct blk_comp_batch *cb, struct blk_request **requeue, bool *stop)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (unlikely(udata[i] == URING_EXIT_UDATA)) {
			*stop = true;
			continue;
		}
		uring_complete(uq, (struct blk_request *)(uintptr_t)udata[i], res[i], cb, requeue);
	}
}

/* Copy up to URING_REAP_BATCH CQEs out and release their slots.  Returns how many. */
static unsigned uring_consume(struct uring_queue *uq, uint64_t *udata, int *res)
{
	struct io_uring_cqe *cqes[URING_REAP_BATCH];
	unsigned n, i;

	n = io_uring_peek_batch_cqe(&uq->ring, cqes, URING_REAP_BATCH);
	for (i = 0; i < n; i++) {
		udata[i] = cqes[i]->user_data;
		res[i] = cqes[i]->res;
	}
	if (n)
		io_uring_cq_advance(&uq->ring, n);
	return n;
}

/*
 * Re-issue requests with work left.  Through the core, not straight into our
 * ring: it takes sq_lock by its flat-combining protocol (so requests other
 * submitters parked meanwhile are not stranded) and runs the poison filter on
 * what is left.
 */
static inline void uring_requeue(struct uring_queue *uq, struct blk_request *list)
{
	if (unlikely(list))
		blk_mq_issue_list(uq->hctx, list, NULL);
}

static void *uring_cq_thread(void *arg)
{
	struct uring_queue *uq = arg;
	bool stop = false;

	while (!stop) {
		struct blk_comp_batch cb = {0};
		struct blk_request *requeue = NULL;
		struct io_uring_cqe *cqe;
		uint64_t udata[URING_REAP_BATCH];
		int res[URING_REAP_BATCH];
		unsigned n;
		int ret;

		ret = io_uring_wait_cqe(&uq->ring, &cqe);
		if (unlikely(ret < 0)) {
			if (ret != -EINTR && ret != -EAGAIN && ret != -ETIME)
				sched_yield(); /* cannot happen with a sane ring; do not spin hot */
			continue;
		}
		/* Drain what is there, a batch at a time, ending each batch at once. */
		do {
			n = uring_consume(uq, udata, res);
			uring_process(uq, udata, res, n, &cb, &requeue, &stop);
			/* end first: tags free and waiters wake before we may wait
			 * for sq_lock to re-issue the rest */
			if (cb.head)
				blk_mq_end_request_batch(&cb);
			uring_requeue(uq, requeue);
			requeue = NULL;
		} while (n == URING_REAP_BATCH);
	}
	return NULL;
}

/*
 * Sleep until the ring may hold @nr CQEs.  Outside cq_lock, so another poller
 * may consume the completions we were waiting for while we sleep; the kernel
 * would then wait for completions that may never come.  The wait is therefore
 * bounded (a liveness bound, not a result: callers loop on their condition).
 */
static void uring_poll_wait(struct uring_queue *uq, unsigned nr)
{
	struct io_uring_cqe *cqe;

	if (io_uring_cq_ready(&uq->ring) >= nr)
		return;
	if (uq->ring.features & IORING_FEAT_EXT_ARG) {
		struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = URING_POLL_WAIT_NS};

		io_uring_wait_cqes(&uq->ring, &cqe, nr, &ts, NULL);
	} else {
		/* without EXT_ARG a timeout costs an SQE: the SQ is not ours here */
		unsigned spins;

		for (spins = 0; spins < 1000 && io_uring_cq_ready(&uq->ring) < nr; spins++)
			sched_yield();
	}
}

static int uring_poll(struct blk_hw_queue *hctx, unsigned min, struct blk_comp_batch *cb)
{
	struct uring_queue *uq = hctx->drv;
	unsigned before = cb->count, n;
	bool stop = false;

	if (unlikely(!hctx->polled))
		return 0; /* the completion thread owns the CQ */
	if (min)
		uring_poll_wait(uq, min);
	do {
		struct blk_request *requeue = NULL;
		uint64_t udata[URING_REAP_BATCH];
		int res[URING_REAP_BATCH];

		/* consume under the lock so two pollers never take the same CQE */
		pthread_mutex_lock(&hctx->cq_lock);
		n = uring_consume(uq, udata, res);
		pthread_mutex_unlock(&hctx->cq_lock);
		uring_process(uq, udata, res, n, cb, &requeue, &stop);
		uring_requeue(uq, requeue);
	} while (n == URING_REAP_BATCH);
	return (int)(cb->count - before);
}

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
		ret = -pthread_create(&uq->thread, NULL, uring_cq_thread, uq);
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
			uring_submit(uq);
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, URING_EXIT_UDATA);
		uring_submit(uq);
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

const struct blk_backend_ops blk_uring_ops = {
        .name = "uring",
        .concurrent = false, /* one SQ ring per queue: the core serialises with sq_lock */
        .async = true,
        .open = uring_open,
        .close = uring_close,
        .init_hctx = uring_init_hctx,
        .exit_hctx = uring_exit_hctx,
        .queue_rqs = uring_queue_rqs,
        .poll = uring_poll,
        .read_sync = uring_read_sync,
        .write_sync = uring_write_sync,
        .clear_poison = uring_clear_poison,
        .poison_changed = NULL,
        .direct_access = NULL, /* no mapping: FUSE reads copy */
        .register_buffer = uring_register_buffer,
        .flush_sync = uring_flush_sync,
};
