/* SPDX-License-Identifier: MIT */
/*
 * uring.c: the io_uring backend, the block-device (NVMe) path: submission
 * and completion (set-up in uring_setup.c, the synchronous path in
 * uring_sync.c).
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

#include "uring.h"

const char blk_uring_exit_token;

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
void blk_uring_submit(struct uring_queue *uq)
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
struct blk_request *blk_uring_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                        struct blk_comp_batch *cb)
{
	struct uring_queue *uq = hctx->drv;

	while (list) {
		struct blk_request *next = list->rq_next;

		if (unlikely(uring_prep_rq(uq, list, cb) == -EBUSY))
			break; /* list and what follows are busy: the core retries them */
		list = next;
	}
	blk_uring_submit(uq);
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
		ret = blk_uring_pio(ud->fd, false, blk, ud->lbs, pos + off);
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

void *blk_uring_cq_thread(void *arg)
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

int blk_uring_poll(struct blk_hw_queue *hctx, unsigned min, struct blk_comp_batch *cb)
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
