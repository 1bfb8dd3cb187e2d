/* SPDX-License-Identifier: MIT */
/*
 * Dispatch: hands a list of requests to the backend's queue_rqs.  Requests
 * that meet poison go to the slow path first; serialised backends (one
 * submission ring per hctx) are fed through flat combining on the software
 * queues; a busy backend is backed off and retried; scheduled requests pass
 * through the elevator (sched.c).  Backends are reached only through
 * hctx->ops.  Calls complete.c, slowpath.c, sched.c.
 */
#include <sched.h>
#include <string.h>

#include "blk_internal.h"

static inline uint64_t blk_rq_nr_sectors_span(const struct blk_request *rq)
{
	uint64_t pos = blk_rq_pos(rq);

	return ((pos + rq->len + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT) - rq->sector;
}

#if BLK_POISON_CHECKS
/*
 * The poison filter: runs only when the table is non-empty, once per batch.
 * Requests that meet poison leave the list for the synchronous slow path.
 */
static __attribute__((noinline)) struct blk_request *
blk_poison_filter(struct blk_hw_queue *hctx, struct blk_request *list, struct blk_comp_batch *cb)
{
	struct blk_request *head = NULL, **tailp = &head, *rq, *next;
	struct blk_dev *dev = hctx->dev;
	uint64_t lo = atomic_load_explicit(&dev->bb.lo, memory_order_relaxed);
	uint64_t hi = atomic_load_explicit(&dev->bb.hi, memory_order_relaxed);

	/* First pass: is any request of the batch inside the span of the poison at all? */
	for (rq = list; rq; rq = rq->rq_next)
		if (rq->sector < hi && rq->sector + blk_rq_nr_sectors_span(rq) > lo)
			break;
	if (likely(!rq))
		return list;

	for (rq = list; rq; rq = next) {
		uint64_t first;

		next = rq->rq_next;
		if (rq->op != BLK_OP_FLUSH && rq->bio &&
		    blk_bb_check(&dev->bb, rq->sector, blk_rq_nr_sectors_span(rq), &first)) {
			rq->rq_next = NULL;
			blk_rq_slowpath(hctx, rq, cb);
			continue;
		}
		*tailp = rq;
		tailp = &rq->rq_next;
	}
	*tailp = NULL;
	return head;
}
#endif

#if BLK_POISON_CHECKS
/*
 * Latent poison (emulation), before the poison filter: a read touching it
 * finds it (it becomes poison, and the poison filter sends the read to the
 * slow path, which fails it as a media error); a write makes it good.
 */
static __attribute__((noinline)) void blk_latent_filter(struct blk_dev *dev,
                                                        struct blk_request *list)
{
	uint64_t lo = atomic_load_explicit(&dev->latent.lo, memory_order_relaxed);
	uint64_t hi = atomic_load_explicit(&dev->latent.hi, memory_order_relaxed);

	for (struct blk_request *rq = list; rq; rq = rq->rq_next) {
		uint64_t nr = blk_rq_nr_sectors_span(rq);

		if (rq->op == BLK_OP_FLUSH || !rq->bio || rq->sector >= hi || rq->sector + nr <= lo)
			continue;
		blk_latent_touch(dev, rq->sector, nr, rq->op == BLK_OP_READ);
	}
}
#endif

static void blk_backoff(struct blk_hw_queue *hctx)
{
	if (hctx->polled) {
		struct blk_comp_batch cb = {0};

		if (hctx->ops->poll(hctx, 0, &cb) > 0 || cb.head) {
			blk_mq_end_request_batch(&cb);
			return;
		}
	}
	sched_yield();
}

/* Dispatch under sq_lock, retrying what a busy backend hands back. */
static void __blk_dispatch_locked(struct blk_hw_queue *hctx, struct blk_request *list,
                                  struct blk_comp_batch *cb)
{
	while (list) {
		list = hctx->ops->queue_rqs(hctx, list, cb);
		if (unlikely(list)) {
			pthread_mutex_unlock(&hctx->sq_lock);
			if (cb->head)
				blk_mq_end_request_batch(cb);
			blk_backoff(hctx);
			pthread_mutex_lock(&hctx->sq_lock);
		}
	}
}

/* Take every software queue flagged pending on @hctx and dispatch it. */
static void blk_drain_swqs(struct blk_hw_queue *hctx, struct blk_comp_batch *cb)
{
	struct blk_dev *dev = hctx->dev;
	uint64_t pending;

	while ((pending = atomic_exchange(&hctx->swq_pending, 0))) {
		unsigned i;

		for (i = 0; i < dev->nr_ctxs; i++) {
			struct blk_ctx *ctx = dev->ctxs[i];
			struct blk_request *list;

			if (ctx->hctx != hctx || !(pending & (1ull << (i & 63))))
				continue;
			pthread_mutex_lock(&ctx->swq_lock);
			list = ctx->swq_head;
			ctx->swq_head = ctx->swq_tail = NULL;
			pthread_mutex_unlock(&ctx->swq_lock);
			if (list)
				__blk_dispatch_locked(hctx, list, cb);
		}
	}
}

/*
 * Serialised backends (one submission ring per hctx).  A thread that finds
 * the ring taken does not wait: it parks its list on its own software queue
 * and the holder dispatches it before letting go (flat combining).
 */
static void blk_dispatch_serial(struct blk_hw_queue *hctx, struct blk_request *list,
                                struct blk_ctx *ctx, struct blk_comp_batch *cb)
{
	if (pthread_mutex_trylock(&hctx->sq_lock) != 0) {
		if (!ctx) {
			pthread_mutex_lock(&hctx->sq_lock);
			goto locked;
		}
		pthread_mutex_lock(&ctx->swq_lock);
		if (ctx->swq_tail)
			ctx->swq_tail->rq_next = list;
		else
			ctx->swq_head = list;
		while (list->rq_next)
			list = list->rq_next;
		ctx->swq_tail = list;
		pthread_mutex_unlock(&ctx->swq_lock);
		atomic_fetch_or(&hctx->swq_pending, 1ull << (ctx->index & 63));
		/* Dekker with the holder's unlock-then-check below. */
		if (pthread_mutex_trylock(&hctx->sq_lock) != 0)
			return;
		list = NULL;
	}
locked:
	for (;;) {
		if (list)
			__blk_dispatch_locked(hctx, list, cb);
		list = NULL;
		blk_drain_swqs(hctx, cb);
		pthread_mutex_unlock(&hctx->sq_lock);
		atomic_thread_fence(memory_order_seq_cst);
		if (likely(!atomic_load(&hctx->swq_pending)))
			break;
		if (pthread_mutex_trylock(&hctx->sq_lock) != 0)
			break;
	}
}

void blk_mq_issue_list(struct blk_hw_queue *hctx, struct blk_request *list, struct blk_ctx *ctx)
{
	struct blk_comp_batch cb = {0};

#if BLK_POISON_CHECKS
	/* The only questions the fast path asks about poison: is there any, known or latent? */
	if (unlikely(!blk_bb_empty(&hctx->dev->latent)))
		blk_latent_filter(hctx->dev, list);
	if (unlikely(!blk_bb_empty(&hctx->dev->bb)))
		list = blk_poison_filter(hctx, list, &cb);
#endif
	if (likely(list)) {
		if (likely(hctx->ops->concurrent)) {
			while ((list = hctx->ops->queue_rqs(hctx, list, &cb)))
				blk_backoff(hctx);
		} else {
			blk_dispatch_serial(hctx, list, ctx, &cb);
		}
	}
	if (cb.head)
		blk_mq_end_request_batch(&cb);
}

void blk_mq_sched_insert(struct blk_hw_queue *hctx, struct blk_request *list)
{
	struct blk_elevator *elv = hctx->elv;
	uint64_t now;

	if (unlikely(!elv)) {
		/* detached while requests were in a plug: plain dispatch */
		blk_mq_issue_list(hctx, list, NULL);
		return;
	}
	now = blk_elv_now();
	for (list = blk_elv_insert(elv, list, now); list; list = blk_elv_next(elv, now))
		blk_mq_issue_list(hctx, list, NULL);
}

void blk_mq_issue_mixed(struct blk_request *list, struct blk_ctx *ctx)
{
	while (list) {
		struct blk_hw_queue *hctx = list->hctx;
		struct blk_request *mine = NULL, **mtail = &mine, *rest = NULL, **rtail = &rest;
		struct blk_request *rq, *next;

		for (rq = list; rq; rq = next) {
			next = rq->rq_next;
			rq->rq_next = NULL;
			if (rq->hctx == hctx) {
				*mtail = rq;
				mtail = &rq->rq_next;
			} else {
				*rtail = rq;
				rtail = &rq->rq_next;
			}
		}
		if (mine->rq_flags & RQF_ELV)
			blk_mq_sched_insert(hctx, mine);
		else
			blk_mq_issue_list(hctx, mine, ctx && ctx->hctx == hctx ? ctx : NULL);
		list = rest;
	}
}

void blk_poll_hctx(struct blk_hw_queue *hctx, unsigned min)
{
	struct blk_comp_batch cb = {0};

	hctx->ops->poll(hctx, min, &cb);
	if (cb.head)
		blk_mq_end_request_batch(&cb);
}
