/* SPDX-License-Identifier: MIT */
/*
 * The submission fast path, in one file so that it inlines into
 * blk_submit_bio(): the per-(thread, device) software contexts and their
 * thread-local cache, the per-thread plug, merging into the plug, request
 * (tag) allocation, and the synchronous wrappers.  The path is
 *
 *   blk_submit_bio -> blk_attempt_plug_merge | blk_plug_get_rq -> plug list
 *   blk_flush_plug_list -> blk_mq_issue_list (dispatch.c) -> ops->queue_rqs
 *   ops (inline or on completion) -> blk_mq_end_request_batch (complete.c)
 *
 * and everything else (poison, scheduler, QoS, tag waits, busy backends) is a
 * branch on a flag or a count that is false when the feature is idle.
 * Calls dispatch.c, complete.c, tags.c, bio.c, status.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "blk_internal.h"

/* --- devices and per-thread contexts ------------------------------------ */

/* Open devices: a thread exiting hands its contexts back only to those still open. */
static pthread_mutex_t blk_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blk_dev *blk_registry[256];

#define BLK_TLS_SLOTS 4
struct blk_tls_slot {
	uint64_t dev_id;
	struct blk_ctx *ctx;
};
static __thread struct blk_tls_slot blk_tls[BLK_TLS_SLOTS];
static __thread struct blk_plug *blk_current_plug;
static pthread_key_t blk_tls_key;
static pthread_once_t blk_tls_once = PTHREAD_ONCE_INIT;

/*
 * Hand a cached context back for reuse by other threads.  The device may have
 * been closed since (by another thread), so only touch the context if the
 * device is still registered.
 */
static void blk_tls_put_slot(struct blk_tls_slot *slot)
{
	unsigned j;

	pthread_mutex_lock(&blk_registry_lock);
	for (j = 0; j < sizeof(blk_registry) / sizeof(blk_registry[0]); j++) {
		if (blk_registry[j] && blk_registry[j]->id == slot->dev_id) {
			atomic_store(&slot->ctx->owner, 0);
			break;
		}
	}
	pthread_mutex_unlock(&blk_registry_lock);
	slot->dev_id = 0;
	slot->ctx = NULL;
}

/* Thread exit: hand this thread's contexts back so new threads reuse them. */
static void blk_tls_release(void *unused)
{
	unsigned i;

	(void)unused;
	for (i = 0; i < BLK_TLS_SLOTS; i++)
		if (blk_tls[i].dev_id)
			blk_tls_put_slot(&blk_tls[i]);
}

static void blk_tls_key_init(void)
{
	pthread_key_create(&blk_tls_key, blk_tls_release);
}

static struct blk_ctx *blk_ctx_alloc(struct blk_dev *dev, pid_t tid)
{
	struct blk_ctx *ctx = NULL;
	unsigned i;

	pthread_mutex_lock(&dev->ctx_lock);
	for (i = 0; i < dev->nr_ctxs; i++) {
		pid_t expected = 0;

		if (atomic_compare_exchange_strong(&dev->ctxs[i]->owner, &expected, tid)) {
			ctx = dev->ctxs[i];
			break;
		}
	}
	if (!ctx && dev->nr_ctxs < BLK_MAX_CTX) {
		ctx = aligned_alloc(BLK_CACHELINE, sizeof(*ctx));
		if (ctx) {
			memset(ctx, 0, sizeof(*ctx));
			ctx->index = dev->nr_ctxs;
			ctx->hctx = &dev->hctxs[ctx->index % dev->nr_hw_queues];
			atomic_init(&ctx->owner, tid);
			pthread_mutex_init(&ctx->swq_lock, NULL);
			dev->ctxs[dev->nr_ctxs++] = ctx;
		}
	}
	if (!ctx) {
		/* More threads than contexts (or no memory): share one.  Only
		 * statistics and the tag hint are then shared, both benign. */
		ctx = dev->ctxs[tid % dev->nr_ctxs];
	}
	pthread_mutex_unlock(&dev->ctx_lock);
	return ctx;
}

static __attribute__((noinline)) struct blk_ctx *blk_get_ctx_slow(struct blk_dev *dev)
{
	struct blk_tls_slot slot = {0, NULL};
	unsigned i;

	for (i = 1; i < BLK_TLS_SLOTS; i++) {
		if (blk_tls[i].dev_id == dev->id) {
			slot = blk_tls[i];
			break;
		}
	}
	if (!slot.ctx) {
		pthread_once(&blk_tls_once, blk_tls_key_init);
		pthread_setspecific(blk_tls_key, (void *)1);
		slot.dev_id = dev->id;
		slot.ctx = blk_ctx_alloc(dev, (pid_t)syscall(SYS_gettid));
		if (blk_tls[BLK_TLS_SLOTS - 1].dev_id)
			blk_tls_put_slot(&blk_tls[BLK_TLS_SLOTS - 1]);
		i = BLK_TLS_SLOTS - 1;
	}
	memmove(&blk_tls[1], &blk_tls[0], sizeof(blk_tls[0]) * i);
	blk_tls[0] = slot;
	return slot.ctx;
}

static inline struct blk_ctx *blk_get_ctx(struct blk_dev *dev)
{
	if (likely(blk_tls[0].dev_id == dev->id))
		return blk_tls[0].ctx;
	return blk_get_ctx_slow(dev);
}

/* --- plugging ----------------------------------------------------------- */

static void blk_flush_plug_list(struct blk_plug *plug)
{
	struct blk_request *list = plug->head;
	struct blk_ctx *ctx;

	if (!list)
		return;
	ctx = blk_get_ctx(list->hctx->dev);
	BLK_STAT_INC(ctx->stats.plug_flushes);
	BLK_STAT_INC(ctx->stats.dispatch_batches);
	plug->head = plug->tail = NULL;
	plug->rq_count = 0;
	if (likely(!plug->multiple_queues && !plug->has_elevator)) {
		/* one queue, no scheduler: straight to the backend in one batch */
		blk_mq_issue_list(list->hctx, list, ctx);
	} else {
		plug->multiple_queues = false;
		plug->has_elevator = false;
		blk_mq_issue_mixed(list, ctx);
	}
}

void blk_start_plug_nr_ios(struct blk_plug *plug, unsigned short nr_ios)
{
	if (blk_current_plug)
		return; /* nested plugs: the outermost one collects */
	plug->head = plug->tail = NULL;
	plug->cached_rqs = NULL;
	plug->cached_dev = NULL;
	plug->rq_count = 0;
	plug->nr_ios = nr_ios > BLK_PLUG_MAX_RQS_MULTI ? BLK_PLUG_MAX_RQS_MULTI : nr_ios;
	plug->multiple_queues = false;
	plug->has_elevator = false;
	blk_current_plug = plug;
}

void blk_start_plug(struct blk_plug *plug)
{
	blk_start_plug_nr_ios(plug, 1);
}

static void blk_plug_free_cached(struct blk_plug *plug)
{
	struct blk_request *rq = plug->cached_rqs, *next;

	for (; rq; rq = next) {
		next = rq->rq_next;
		blk_tag_put(&rq->hctx->tags, rq->tag);
	}
	plug->cached_rqs = NULL;
}

/*
 * Flush until the plug stays empty: end_io callbacks that run during a flush
 * (synchronous backends complete inline) may plug new bios, and a thread that
 * is about to wait must not keep them.
 */
static void blk_flush_plug_all(struct blk_plug *plug)
{
	while (plug->head)
		blk_flush_plug_list(plug);
}

void blk_flush_plug(void)
{
	if (blk_current_plug)
		blk_flush_plug_all(blk_current_plug);
}

void blk_finish_plug(struct blk_plug *plug)
{
	if (plug != blk_current_plug)
		return;
	blk_flush_plug_all(plug);
	if (unlikely(plug->cached_rqs))
		blk_plug_free_cached(plug);
	blk_current_plug = NULL;
}

/* --- request allocation ------------------------------------------------- */

/* The map is full: flush our plug (its requests hold tags) and sleep until a tag frees. */
static __attribute__((noinline)) int blk_mq_wait_tag(struct blk_ctx *ctx)
{
	struct blk_hw_queue *hctx = ctx->hctx;
	struct blk_tags *tags = &hctx->tags;
	int tag;

	BLK_STAT_INC(ctx->stats.tag_waits);
	if (blk_current_plug)
		blk_flush_plug_all(blk_current_plug);
	for (;;) {
		uint32_t seq;

		tag = blk_tag_get(tags, &ctx->tag_hint);
		if (tag >= 0)
			return tag;
		if (blk_current_plug && blk_current_plug->head) {
			/* completions during the flush plugged new bios: they hold tags */
			blk_flush_plug_all(blk_current_plug);
			continue;
		}
		seq = atomic_load(&tags->wake_seq);
		atomic_fetch_add(&tags->waiters, 1);
		atomic_thread_fence(
		        memory_order_seq_cst); /* order the retry after the announcement */
		tag = blk_tag_get(tags, &ctx->tag_hint);
		if (tag >= 0) {
			atomic_fetch_sub(&tags->waiters, 1);
			return tag;
		}
		if (hctx->polled) {
			/* Nobody else may be reaping: wait briefly, then reap ourselves. */
			struct timespec ts = {0, 200 * 1000};

			blk_futex(&tags->wake_seq, FUTEX_WAIT, seq, &ts);
			atomic_fetch_sub(&tags->waiters, 1);
			blk_poll_hctx(hctx, 0);
			continue;
		}
		blk_tags_wait(tags, seq);
		atomic_fetch_sub(&tags->waiters, 1);
	}
}

static inline struct blk_request *blk_mq_get_rq(struct blk_ctx *ctx)
{
	struct blk_hw_queue *hctx = ctx->hctx;
	int tag = blk_tag_get(&hctx->tags, &ctx->tag_hint);

	if (unlikely(tag < 0))
		tag = blk_mq_wait_tag(ctx);
	return blk_tag_to_rq(&hctx->tags, (unsigned)tag);
}

/* Allocate a plug's expected requests in one batch (one atomic per bitmap word). */
static __attribute__((noinline)) struct blk_request *blk_plug_alloc_batch(struct blk_plug *plug,
                                                                          struct blk_ctx *ctx)
{
	struct blk_tags *tags = &ctx->hctx->tags;
	unsigned nr = plug->nr_ios, offset;
	uint64_t mask;

	plug->nr_ios = 1;
	mask = blk_tag_get_batch(tags, &ctx->tag_hint, nr, &offset);
	if (!mask)
		return blk_mq_get_rq(ctx);
	while (mask) {
		unsigned bit = 63 - __builtin_clzll(mask);
		struct blk_request *rq = blk_tag_to_rq(tags, offset + bit);

		mask &= ~(1ull << bit);
		rq->rq_next = plug->cached_rqs;
		plug->cached_rqs = rq;
	}
	plug->cached_dev = ctx->hctx->dev;
	return NULL;
}

static inline struct blk_request *blk_plug_get_rq(struct blk_plug *plug, struct blk_ctx *ctx)
{
	struct blk_request *rq = plug->cached_rqs;

	if (likely(rq && rq->hctx == ctx->hctx)) {
		plug->cached_rqs = rq->rq_next;
		return rq;
	}
	if (plug->nr_ios > 1 && !rq) {
		rq = blk_plug_alloc_batch(plug, ctx);
		if (rq)
			return rq;
		rq = plug->cached_rqs;
		plug->cached_rqs = rq->rq_next;
		return rq;
	}
	return blk_mq_get_rq(ctx);
}

static inline void blk_rq_init(struct blk_request *rq, struct blk_bio *bio, struct blk_dev *dev)
{
	rq->rq_next = NULL;
	rq->bio = rq->biotail = bio;
	rq->sector = bio->sector;
	rq->len = bio->len;
	rq->nr_segs = bio->nr_segs;
	rq->op = bio->op;
	rq->status = BLK_STS_OK;
	rq->rq_flags = (uint8_t)((rq->rq_flags & RQF_ELV) | dev->rq_flags_init);
	if (unlikely((bio->flags & (BLK_BIO_NOMERGE | BLK_BIO_UNALIGNED)) ||
	             bio->op == BLK_OP_FLUSH))
		rq->rq_flags |= RQF_NOMERGE;
}

/* --- submission --------------------------------------------------------- */

/* Try to add @bio to the request most recently plugged.  Front and back merges. */
static inline bool blk_attempt_plug_merge(struct blk_dev *dev, struct blk_ctx *ctx,
                                          struct blk_request *rq, struct blk_bio *bio)
{
	bool back = rq->sector + (rq->len >> BLK_SECTOR_SHIFT) == bio->sector;

	/* contiguity first: it is what rejects random I/O, in one compare */
	if (!back && bio->sector + (bio->len >> BLK_SECTOR_SHIFT) != rq->sector)
		return false;
	if (rq->hctx != ctx->hctx || (rq->rq_flags & RQF_NOMERGE) ||
	    (bio->flags & (BLK_BIO_NOMERGE | BLK_BIO_UNALIGNED)) || rq->op != bio->op ||
	    ((rq->bio->flags ^ bio->flags) & BLK_BIO_MERGE_MASK))
		return false;
	if ((uint64_t)rq->len + bio->len > dev->max_bytes ||
	    rq->nr_segs + bio->nr_segs > dev->max_segments)
		return false;
	if (back) {
		rq->biotail->bi_next = bio;
		rq->biotail = bio;
		BLK_STAT_INC(ctx->stats.merges_back);
	} else {
		bio->bi_next = rq->bio;
		rq->bio = bio;
		rq->sector = bio->sector;
		BLK_STAT_INC(ctx->stats.merges_front);
	}
	rq->len += bio->len;
	rq->nr_segs = (uint16_t)(rq->nr_segs + bio->nr_segs);
	return true;
}

/* Validate a bio; on failure end it and return false. */
static inline bool blk_bio_check(struct blk_dev *dev, struct blk_bio *bio)
{
	enum blk_status sts = BLK_STS_INVAL;

	bio->flags &= (uint8_t) ~(BLK_BIO_TRACKED | BLK_BIO_UNALIGNED);
	if (unlikely(bio->op >= BLK_OP_FLUSH)) {
		if (bio->op == BLK_OP_FLUSH) {
			if (bio->len)
				goto fail;
			bio->sector = 0;
			bio->byte_off = 0;
			return true;
		}
		if (bio->op != BLK_OP_WRITE_ZEROES)
			goto fail;
	} else if (unlikely(!bio->nr_segs || !bio->iov || bio->nr_segs > dev->max_segments)) {
		goto fail;
	}
	/* A bio above max_sectors is legal: it becomes one request that nothing merges into. */
	if (unlikely(!bio->len || bio->len > BLK_BIO_MAX_BYTES ||
	             bio->byte_off >= BLK_SECTOR_SIZE || bio->sector >= dev->nr_sectors ||
	             (dev->nr_sectors - bio->sector) * BLK_SECTOR_SIZE <
	                     (uint64_t)bio->byte_off + bio->len))
		goto fail;
	if (unlikely((bio->byte_off | bio->len) & (BLK_SECTOR_SIZE - 1))) {
		if (!dev->byte_granular)
			goto fail;
		bio->flags |= BLK_BIO_UNALIGNED;
	} else if (unlikely(((bio->sector << BLK_SECTOR_SHIFT) | bio->len) & dev->lbs_mask)) {
		goto fail;
	}
	if (unlikely(dev->read_only && bio->op != BLK_OP_READ)) {
		sts = BLK_STS_ROFS;
		goto fail;
	}
	return true;
fail:
	bio->status = (uint8_t)sts;
	blk_count_error(blk_get_ctx(dev)->hctx, sts);
	bio->end_io(bio);
	return false;
}

void blk_submit_bio(struct blk_dev *dev, struct blk_bio *bio)
{
	struct blk_plug *plug = blk_current_plug;
	struct blk_request *rq;
	struct blk_ctx *ctx;

	bio->bi_next = NULL;
	bio->status = BLK_STS_OK;
	bio->done = 0;
	if (unlikely(!blk_bio_check(dev, bio)))
		return;
	ctx = blk_get_ctx(dev);
	BLK_STAT_INC(ctx->stats.ios[bio->op]);
	BLK_STAT_ADD(ctx->stats.bytes[bio->op], bio->len);
	if (unlikely(dev->qos)) {
		/* only bios that a policy saw are tracked: completion checks the bio, not dev */
		bio->flags |= BLK_BIO_TRACKED;
		dev->qos->throttle(dev->qos_priv, bio);
	}

	if (likely(plug)) {
		struct blk_request *last = plug->tail;

		if (last) {
			if (blk_attempt_plug_merge(dev, ctx, last, bio))
				return;
			if (plug->rq_count >= (plug->multiple_queues ? BLK_PLUG_MAX_RQS_MULTI
			                                             : BLK_PLUG_MAX_RQS) ||
			    last->len >= BLK_PLUG_FLUSH_SIZE)
				blk_flush_plug_list(plug);
		}
		rq = blk_plug_get_rq(plug, ctx);
		blk_rq_init(rq, bio, dev);
		BLK_STAT_INC(ctx->stats.requests);
		if (plug->tail) {
			if (plug->head->hctx != rq->hctx)
				plug->multiple_queues = true;
			plug->tail->rq_next = rq;
		} else {
			plug->head = rq;
		}
		plug->tail = rq;
		plug->rq_count++;
		if (unlikely(rq->rq_flags & RQF_ELV))
			plug->has_elevator = true;
		return;
	}

	rq = blk_mq_get_rq(ctx);
	blk_rq_init(rq, bio, dev);
	BLK_STAT_INC(ctx->stats.requests);
	BLK_STAT_INC(ctx->stats.dispatch_batches);
	if (unlikely(rq->rq_flags & RQF_ELV))
		blk_mq_sched_insert(rq->hctx, rq);
	else
		blk_mq_issue_list(rq->hctx, rq, ctx);
}

struct blk_waiter {
	_Atomic uint32_t done;
};

static void blk_wait_end_io(struct blk_bio *bio)
{
	struct blk_waiter *w = bio->private;

	atomic_store_explicit(&w->done, 1, memory_order_release);
	blk_futex(&w->done, FUTEX_WAKE, 1, NULL);
}

int blk_submit_bio_wait(struct blk_dev *dev, struct blk_bio *bio)
{
	struct blk_waiter w;
	struct blk_ctx *ctx;

	atomic_init(&w.done, 0);
	bio->end_io = blk_wait_end_io;
	bio->private = &w;
	blk_submit_bio(dev, bio);
	if (atomic_load_explicit(&w.done, memory_order_acquire))
		goto out;
	blk_flush_plug(); /* we are about to sleep: our plug must not hold the bio */
	ctx = blk_get_ctx(dev);
	while (!atomic_load_explicit(&w.done, memory_order_acquire)) {
		if (ctx->hctx->polled) {
			struct timespec ts = {0, 100 * 1000};

			blk_poll_hctx(ctx->hctx, 0);
			if (!atomic_load_explicit(&w.done, memory_order_acquire))
				blk_futex(&w.done, FUTEX_WAIT, 0, &ts);
		} else {
			blk_futex(&w.done, FUTEX_WAIT, 0, NULL);
		}
	}
out:
	return -blk_status_to_errno(bio->status);
}

static int blk_rw_sync(struct blk_dev *dev, enum blk_op op, uint64_t sector, void *buf,
                       uint32_t len, unsigned bio_flags)
{
	struct blk_bio bio;

	blk_bio_init(&bio, op, sector, buf, len, NULL, NULL);
	bio.flags = (uint8_t)bio_flags;
	return blk_submit_bio_wait(dev, &bio);
}

int blk_read(struct blk_dev *dev, uint64_t sector, void *buf, uint32_t len, unsigned bio_flags)
{
	return blk_rw_sync(dev, BLK_OP_READ, sector, buf, len, bio_flags);
}

int blk_write(struct blk_dev *dev, uint64_t sector, const void *buf, uint32_t len,
              unsigned bio_flags)
{
	return blk_rw_sync(dev, BLK_OP_WRITE, sector, (void *)buf, len, bio_flags);
}

int blk_flush(struct blk_dev *dev)
{
	return blk_rw_sync(dev, BLK_OP_FLUSH, 0, NULL, 0, 0);
}

int blk_poll(struct blk_dev *dev, unsigned min)
{
	struct blk_ctx *ctx = blk_get_ctx(dev);
	struct blk_comp_batch cb = {0};
	int ret;

	if (!ctx->hctx->polled)
		return 0;
	if (blk_current_plug && min)
		blk_flush_plug_all(blk_current_plug);
	ret = ctx->hctx->ops->poll(ctx->hctx, min, &cb);
	if (cb.head)
		blk_mq_end_request_batch(&cb);
	return ret;
}

/* --- device registry ------------------------------------------------------ */

int blk_dev_registry_add(struct blk_dev *dev)
{
	unsigned i;

	pthread_mutex_lock(&blk_registry_lock);
	for (i = 0; i < sizeof(blk_registry) / sizeof(blk_registry[0]); i++) {
		if (!blk_registry[i]) {
			blk_registry[i] = dev;
			pthread_mutex_unlock(&blk_registry_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&blk_registry_lock);
	return -EMFILE;
}

void blk_mq_unregister_dev(struct blk_dev *dev)
{
	unsigned i;

	if (blk_current_plug) {
		struct blk_plug *plug = blk_current_plug;

		blk_flush_plug_all(plug);
		if (plug->cached_dev == dev)
			blk_plug_free_cached(plug);
	}
	pthread_mutex_lock(&blk_registry_lock);
	for (i = 0; i < sizeof(blk_registry) / sizeof(blk_registry[0]); i++)
		if (blk_registry[i] == dev)
			blk_registry[i] = NULL;
	pthread_mutex_unlock(&blk_registry_lock);
	for (i = 0; i < BLK_TLS_SLOTS; i++)
		if (blk_tls[i].dev_id == dev->id)
			blk_tls[i].dev_id = 0;
}
