/* SPDX-License-Identifier: MIT */
/*
 * The write tap: a write log like dm-log-writes, for crash tests.  While a
 * tap is attached, every WRITE, WRITE_ZEROES and FLUSH bio that completes
 * successfully is passed to the tap's function, in completion order (the
 * calls are serialised), with the bio's segments readable during the call.
 *
 * It costs nothing when detached: attaching swaps dev->ops and every
 * hctx->ops for a per-device copy of the backend's table whose queue_rqs
 * wraps the end_io of each write/flush bio before forwarding the list to the
 * backend (the wrapper logs, restores the bio's own end_io and private, and
 * calls it); detaching puts the original table back.  No core code changes:
 *
 *  - requests that meet poison are run by the slow path before queue_rqs,
 *    through dev->ops->write_sync: the tap's write_sync logs those writes
 *    (as a WRITE bio over the bytes written; zeros for a WRITE_ZEROES) when
 *    they succeed, except inside its own queue_rqs (a backend that hands a
 *    faulting request to the slow path), where the bio's wrapper logs it;
 *  - a request the backend hands back busy keeps its wrapped bios: they are
 *    recognised by their end_io and not wrapped twice;
 *  - closing the device with a tap attached frees the tap (its close hook).
 *
 * Attach and detach only while the device is idle (no tag in use) and no
 * other thread submits: -EBUSY otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "blk_internal.h"

typedef void blk_write_tap_fn(void *priv, const struct blk_bio *bio);

struct blk_tap_rec {
	struct blk_tap *tap;
	blk_end_io_fn *end_io;
	void *private;
	struct blk_tap_rec *next; /* free list */
};

struct blk_tap {
	struct blk_backend_ops ops; /* first: hctx->ops and dev->ops point here */
	const struct blk_backend_ops *orig;
	blk_write_tap_fn *fn;
	void *priv;
	pthread_mutex_t lock; /* serialises fn; protects free */
	struct blk_tap_rec *free;
};

static __thread unsigned tap_in_queue; /* inside the tap's queue_rqs on this thread */

static inline struct blk_tap *tap_of(const struct blk_backend_ops *ops)
{
	return (struct blk_tap *)ops;
}

static bool tap_logged_op(uint8_t op)
{
	return op == BLK_OP_WRITE || op == BLK_OP_WRITE_ZEROES || op == BLK_OP_FLUSH;
}

static void tap_end_io(struct blk_bio *bio)
{
	struct blk_tap_rec *rec = bio->private;
	struct blk_tap *tap = rec->tap;

	bio->end_io = rec->end_io;
	bio->private = rec->private;
	pthread_mutex_lock(&tap->lock);
	if (bio->status == BLK_STS_OK)
		tap->fn(tap->priv, bio);
	rec->next = tap->free;
	tap->free = rec;
	pthread_mutex_unlock(&tap->lock);
	bio->end_io(bio);
}

static struct blk_tap_rec *tap_rec_get(struct blk_tap *tap)
{
	struct blk_tap_rec *rec;

	pthread_mutex_lock(&tap->lock);
	rec = tap->free;
	if (rec)
		tap->free = rec->next;
	pthread_mutex_unlock(&tap->lock);
	if (!rec)
		rec = malloc(sizeof(*rec));
	return rec;
}

static struct blk_request *tap_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                         struct blk_comp_batch *cb)
{
	struct blk_tap *tap = tap_of(hctx->ops);
	struct blk_request *rq, *left;
	struct blk_bio *bio;

	for (rq = list; rq; rq = rq->rq_next) {
		blk_rq_for_each_bio (bio, rq) {
			struct blk_tap_rec *rec;

			if (!tap_logged_op(bio->op) || bio->end_io == tap_end_io)
				continue;
			rec = tap_rec_get(tap);
			if (!rec) {
				fprintf(stderr,
				        "mendblk: write tap: out of memory, a %s bio at "
				        "sector %llu is not logged\n",
				        bio->op == BLK_OP_FLUSH ? "flush" : "write",
				        (unsigned long long)bio->sector);
				continue;
			}
			rec->tap = tap;
			rec->end_io = bio->end_io;
			rec->private = bio->private;
			bio->end_io = tap_end_io;
			bio->private = rec;
		}
	}
	tap_in_queue++;
	left = tap->orig->queue_rqs(hctx, list, cb);
	tap_in_queue--;
	return left;
}

static int tap_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len)
{
	struct blk_tap *tap = tap_of(dev->ops);
	int ret = tap->orig->write_sync(dev, pos, buf, len);

	if (!ret && !tap_in_queue) {
		struct blk_bio bio;

		/* the slow path's write, described as the bio that makes it */
		blk_bio_init(&bio, BLK_OP_WRITE, pos >> BLK_SECTOR_SHIFT, (void *)buf,
		             (uint32_t)len, NULL, NULL);
		bio.byte_off = (uint16_t)(pos & (BLK_SECTOR_SIZE - 1));
		bio.done = bio.len;
		pthread_mutex_lock(&tap->lock);
		tap->fn(tap->priv, &bio);
		pthread_mutex_unlock(&tap->lock);
	}
	return ret;
}

static void tap_free(struct blk_tap *tap)
{
	struct blk_tap_rec *rec;

	while ((rec = tap->free)) {
		tap->free = rec->next;
		free(rec);
	}
	pthread_mutex_destroy(&tap->lock);
	free(tap);
}

static void tap_close(struct blk_dev *dev)
{
	struct blk_tap *tap = tap_of(dev->ops);
	const struct blk_backend_ops *orig = tap->orig;

	dev->ops = orig;
	tap_free(tap);
	orig->close(dev);
}

static bool tap_dev_idle(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++)
		if (!blk_tags_idle(&dev->hctxs[i].tags))
			return false;
	return true;
}

static void tap_set_ops(struct blk_dev *dev, const struct blk_backend_ops *ops)
{
	unsigned i;

	dev->ops = ops;
	for (i = 0; i < dev->nr_hw_queues; i++)
		dev->hctxs[i].ops = ops;
	atomic_thread_fence(memory_order_seq_cst);
}

int blk_dev_set_write_tap(struct blk_dev *dev, void (*fn)(void *priv, const struct blk_bio *bio),
                          void *priv)
{
	struct blk_tap *tap, *cur = NULL;

	if (dev->ops->queue_rqs == tap_queue_rqs)
		cur = tap_of(dev->ops);
	if (!fn && !cur)
		return 0;
	if (!tap_dev_idle(dev))
		return -EBUSY;
	if (!fn) {
		tap_set_ops(dev, cur->orig);
		tap_free(cur);
		return 0;
	}
	if (cur) {
		/* replace the function: idle, so no wrapped bio is in flight */
		cur->fn = fn;
		cur->priv = priv;
		return 0;
	}
	tap = calloc(1, sizeof(*tap));
	if (!tap)
		return -ENOMEM;
	tap->ops = *dev->ops;
	tap->ops.queue_rqs = tap_queue_rqs;
	if (tap->ops.write_sync)
		tap->ops.write_sync = tap_write_sync;
	tap->ops.close = tap_close;
	tap->orig = dev->ops;
	tap->fn = fn;
	tap->priv = priv;
	pthread_mutex_init(&tap->lock, NULL);
	tap_set_ops(dev, &tap->ops);
	return 0;
}
