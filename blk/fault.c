/* SPDX-License-Identifier: MIT */
/*
 * The fault injector, for tests that fail device operations one by one (the
 * fault loop, as SQLite tests its I/O layer).  While attached it counts the
 * device's operations and fails operation N (one-shot) or every operation
 * from N on (a dying device) with BLK_STS_IOERR, without touching the media.
 *
 * An operation is one request the engine hands to the backend's queue_rqs:
 * a READ, WRITE, WRITE_ZEROES or FLUSH, made of one bio or of several
 * contiguous bios the plug merged; failing it ends all of its bios with
 * -EIO, as a device failing the request would.  A request the backend hands
 * back busy is counted once (RQF_FAULT_SEEN, cleared when the request is set
 * up again).  Not counted: the poison slow path (read_sync, write_sync: only
 * requests that meet poison take it), loads and stores straight through a
 * pmem mapping (blk_direct_access: the filesystem's data reads on images and
 * devdax), and flush_sync.
 *
 * It costs nothing when detached, like the write tap (tap.c): attaching
 * swaps dev->ops and every hctx->ops for a per-device copy of the backend's
 * table whose queue_rqs filters the list before forwarding it; nothing in
 * the core checks for it.  Closing the device prints the counts on stderr
 * ("mendblk: fault injection: ...") and frees the injector.  Attach only
 * while the device is idle, never together with a write tap.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "blk_internal.h"

struct blk_fault {
	struct blk_backend_ops ops; /* first: hctx->ops and dev->ops point here */
	const struct blk_backend_ops *orig;
	uint64_t nth; /* the first operation to fail (1-based); 0: count only */
	bool dying;   /* fail every operation from nth on */
	_Atomic uint64_t count, failed;
};

static inline struct blk_fault *fault_of(const struct blk_backend_ops *ops)
{
	return (struct blk_fault *)ops;
}

static bool fault_hit(struct blk_fault *f, uint64_t n)
{
	return f->nth && (n == f->nth || (f->dying && n > f->nth));
}

static struct blk_request *fault_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                           struct blk_comp_batch *cb)
{
	struct blk_fault *f = fault_of(hctx->ops);
	struct blk_request *rq, *next, *head = NULL, **tailp = &head;

	for (rq = list; rq; rq = next) {
		next = rq->rq_next;
		if (!(rq->rq_flags & RQF_FAULT_SEEN)) {
			rq->rq_flags |= RQF_FAULT_SEEN;
			if (fault_hit(f, atomic_fetch_add(&f->count, 1) + 1)) {
				atomic_fetch_add(&f->failed, 1);
				rq->status = BLK_STS_IOERR;
				blk_comp_add(cb, rq);
				continue;
			}
		}
		*tailp = rq;
		tailp = &rq->rq_next;
	}
	*tailp = NULL;
	return head ? f->orig->queue_rqs(hctx, head, cb) : NULL;
}

static void fault_set_ops(struct blk_dev *dev, const struct blk_backend_ops *ops)
{
	unsigned i;

	dev->ops = ops;
	for (i = 0; i < dev->nr_hw_queues; i++)
		dev->hctxs[i].ops = ops;
	atomic_thread_fence(memory_order_seq_cst);
}

static void fault_close(struct blk_dev *dev)
{
	struct blk_fault *f = fault_of(dev->ops);
	const struct blk_backend_ops *orig = f->orig;

	fprintf(stderr, "mendblk: fault injection: %" PRIu64 " operations, %" PRIu64 " failed\n",
	        atomic_load(&f->count), atomic_load(&f->failed));
	dev->ops = orig;
	free(f);
	orig->close(dev);
}

int blk_dev_set_fault(struct blk_dev *dev, uint64_t nth, bool dying)
{
	struct blk_fault *f;
	unsigned i;

	if (dev->ops->queue_rqs == fault_queue_rqs) {
		f = fault_of(dev->ops);
		f->nth = nth;
		f->dying = dying;
		return 0;
	}
	/* over the backend's own table only: a write tap finds its state through hctx->ops */
	if (dev->ops != &blk_pmem_ops && dev->ops != &blk_uring_ops && dev->ops != &blk_null_ops)
		return -EBUSY;
	for (i = 0; i < dev->nr_hw_queues; i++)
		if (!blk_tags_idle(&dev->hctxs[i].tags))
			return -EBUSY;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->ops = *dev->ops;
	f->ops.queue_rqs = fault_queue_rqs;
	f->ops.close = fault_close;
	f->orig = dev->ops;
	f->nth = nth;
	f->dying = dying;
	fault_set_ops(dev, &f->ops);
	return 0;
}

int blk_dev_fault_counts(struct blk_dev *dev, uint64_t *ops, uint64_t *failed)
{
	struct blk_fault *f;

	if (dev->ops->queue_rqs != fault_queue_rqs)
		return -ENOENT;
	f = fault_of(dev->ops);
	*ops = atomic_load(&f->count);
	*failed = atomic_load(&f->failed);
	return 0;
}
