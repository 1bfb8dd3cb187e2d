/* SPDX-License-Identifier: MIT */
/*
 * The engine core: bio -> request, per-thread plugging and merging, dispatch
 * to the backend in batches, batched completion.  The fast path is
 *
 *   blk_submit_bio -> blk_attempt_plug_merge | blk_plug_get_rq -> plug list
 *   blk_flush_plug_list -> blk_mq_issue_list -> ops->queue_rqs
 *   ops (inline or on completion) -> blk_mq_end_request_batch
 *
 * and everything else (poison, scheduler, QoS, tag waits, busy backends) is a
 * branch on a flag or a count that is false when the feature is idle.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "blk_internal.h"

#define BLK_MAX_HW_QUEUES 64

/* --- small helpers ------------------------------------------------------ */

void blk_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const struct {
	int err;
	const char *name;
} blk_status_table[BLK_STS_MAX] = {
        [BLK_STS_OK] = {0, "ok"},
        [BLK_STS_MEDIA] = {EIO, "media error"},
        [BLK_STS_IOERR] = {EIO, "I/O error"},
        [BLK_STS_NOSPC] = {ENOSPC, "no space"},
        [BLK_STS_INVAL] = {EINVAL, "invalid request"},
        [BLK_STS_NOTSUPP] = {EOPNOTSUPP, "not supported"},
        [BLK_STS_ROFS] = {EROFS, "read-only device"},
};

int blk_status_to_errno(enum blk_status sts)
{
	if ((unsigned)sts >= BLK_STS_MAX)
		return EIO;
	return blk_status_table[sts].err;
}

const char *blk_status_name(enum blk_status sts)
{
	if ((unsigned)sts >= BLK_STS_MAX)
		return "unknown";
	return blk_status_table[sts].name;
}

int blk_errno_to_status(int err)
{
	switch (err) {
	case 0:
		return BLK_STS_OK;
	case ENOSPC:
	case EDQUOT:
		return BLK_STS_NOSPC;
	case EINVAL:
		return BLK_STS_INVAL;
	case EOPNOTSUPP:
		return BLK_STS_NOTSUPP;
	case EROFS:
		return BLK_STS_ROFS;
	default:
		return BLK_STS_IOERR;
	}
}

static long blk_futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)uaddr, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

void blk_bio_init(struct blk_bio *bio, enum blk_op op, uint64_t sector, void *buf, uint32_t len,
                  blk_end_io_fn *end_io, void *private)
{
	memset(bio, 0, sizeof(*bio));
	bio->op = (uint8_t)op;
	bio->sector = sector;
	bio->len = len;
	bio->end_io = end_io;
	bio->private = private;
	if (buf && (op == BLK_OP_READ || op == BLK_OP_WRITE)) {
		bio->inline_iov.iov_base = buf;
		bio->inline_iov.iov_len = len;
		bio->iov = &bio->inline_iov;
		bio->nr_segs = 1;
	}
}

/* Walk @bio's segments from byte @skip, calling @fn on each piece. */
#define BLK_BIO_WALK(bio, skip, len, seg_base, seg_len, body)                                      \
	do {                                                                                       \
		size_t __skip = (skip), __left = (len);                                            \
		for (unsigned __i = 0; __i < (bio)->nr_segs && __left; __i++) {                    \
			size_t __l = (bio)->iov[__i].iov_len;                                      \
			if (__skip >= __l) {                                                       \
				__skip -= __l;                                                     \
				continue;                                                          \
			}                                                                          \
			char *seg_base = (char *)(bio)->iov[__i].iov_base + __skip;                \
			size_t seg_len = __l - __skip < __left ? __l - __skip : __left;            \
			__skip = 0;                                                                \
			body;                                                                      \
			__left -= seg_len;                                                         \
		}                                                                                  \
	} while (0)

void blk_bio_copy_to(struct blk_bio *bio, size_t skip, const void *src, size_t len)
{
	const char *s = src;

	BLK_BIO_WALK(bio, skip, len, base, l, {
		memcpy(base, s, l);
		s += l;
	});
}

void blk_bio_copy_from(const struct blk_bio *bio, size_t skip, void *dst, size_t len)
{
	char *d = dst;

	BLK_BIO_WALK(bio, skip, len, base, l, {
		memcpy(d, base, l);
		d += l;
	});
}

void blk_bio_zero(struct blk_bio *bio, size_t skip, size_t len)
{
	BLK_BIO_WALK(bio, skip, len, base, l, memset(base, 0, l));
}

/* --- devices and per-thread contexts ------------------------------------ */

static pthread_mutex_t blk_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blk_dev *blk_registry[256];
static _Atomic uint64_t blk_next_dev_id = 1;

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

/* --- completion --------------------------------------------------------- */

static inline void blk_bio_endio(struct blk_hw_queue *hctx, struct blk_bio *bio)
{
	if (unlikely(bio->flags & BLK_BIO_TRACKED)) {
		/* the policy may have been detached while the bio was in flight */
		const struct blk_qos_ops *qos = __atomic_load_n(&hctx->dev->qos, __ATOMIC_ACQUIRE);

		if (qos)
			qos->done(hctx->dev->qos_priv, bio);
	}
	bio->end_io(bio);
}

static void blk_count_error(struct blk_hw_queue *hctx, enum blk_status sts)
{
	atomic_fetch_add_explicit(&hctx->cq_stats.errors, 1, memory_order_relaxed);
	if (sts == BLK_STS_MEDIA)
		atomic_fetch_add_explicit(&hctx->cq_stats.media_errors, 1, memory_order_relaxed);
}

void blk_end_bio(struct blk_hw_queue *hctx, struct blk_bio *bio, enum blk_status sts)
{
	if (sts == BLK_STS_OK && !bio->status)
		bio->done = bio->len;
	else if (!bio->status)
		bio->status = (uint8_t)sts;
	if (unlikely(bio->status))
		blk_count_error(hctx, bio->status);
	blk_bio_endio(hctx, bio);
}

bool blk_update_request(struct blk_request *rq, enum blk_status sts, uint32_t nbytes)
{
	struct blk_bio *bio;

	while (nbytes && (bio = rq->bio)) {
		uint32_t left = bio->len - bio->done;

		if (sts != BLK_STS_OK && !bio->status)
			bio->status = (uint8_t)sts;
		if (nbytes >= left) {
			rq->bio = bio->bi_next;
			rq->len -= left;
			nbytes -= left;
			bio->bi_next = NULL;
			blk_end_bio(rq->hctx, bio, sts);
		} else {
			bio->done += nbytes;
			rq->len -= nbytes;
			nbytes = 0;
		}
	}
	if (!rq->bio) {
		rq->biotail = NULL;
		return false;
	}
	rq->sector = rq->bio->sector + (rq->bio->done >> BLK_SECTOR_SHIFT);
	return true;
}

/* End the bios still attached to a request with the request's status. */
static inline void blk_end_bio_chain(struct blk_hw_queue *hctx, struct blk_bio *bio, uint8_t status,
                                     uint64_t bad_sector)
{
	struct blk_bio *next;

	if (likely(status == BLK_STS_OK)) {
		for (; bio; bio = next) {
			next = bio->bi_next;
			if (likely(!bio->status))
				bio->done = bio->len;
			else
				blk_count_error(hctx, bio->status);
			blk_bio_endio(hctx, bio);
		}
		return;
	}
	for (; bio; bio = next) {
		next = bio->bi_next;
		if (!bio->status) {
			bio->status = status;
			if (status == BLK_STS_MEDIA) {
				uint64_t end = bio->sector +
				               ((bio->byte_off + bio->len + BLK_SECTOR_SIZE - 1) >>
				                BLK_SECTOR_SHIFT);
				bio->bad_sector = bad_sector >= bio->sector && bad_sector < end
				                          ? bad_sector
				                          : bio->sector;
			}
		}
		blk_count_error(hctx, bio->status);
		blk_bio_endio(hctx, bio);
	}
}

#define BLK_END_CHUNK 32

/*
 * End a batch of requests.  Tags are freed before the bios end (in chunks),
 * so an end_io that submits new I/O finds the tags it needs even when the
 * batch held all of them; the bio chains are detached first, so a request
 * reused at once by another thread is never read again here.
 */
void blk_mq_end_request_batch(struct blk_comp_batch *cb)
{
	struct blk_request *rq = cb->head, *next;

	while (rq) {
		struct {
			struct blk_bio *bio;
			uint64_t bad_sector;
			uint8_t status;
		} done[BLK_END_CHUNK];
		struct blk_hw_queue *cur = rq->hctx;
		uint64_t masks[64]; /* nr_words <= 64: see blk_tags_bits_per_word() */
		uint64_t touched = 0;
		unsigned n = 0, i;

		for (; rq && n < BLK_END_CHUNK && rq->hctx == cur; rq = next, n++) {
			struct blk_tags *tags = &cur->tags;
			unsigned w = rq->tag >> tags->shift;
			uint64_t bit = 1ull << (rq->tag & (tags->bits_per_word - 1));

			next = rq->rq_next;
			done[n].bio = rq->bio;
			done[n].status = rq->status;
			done[n].bad_sector = rq->bad_sector;
			if (!(touched & (1ull << w))) {
				touched |= 1ull << w;
				masks[w] = 0;
			}
			masks[w] |= bit;
		}
		while (touched) {
			unsigned w = __builtin_ctzll(touched);

			touched &= touched - 1;
			blk_tags_put_mask(&cur->tags, w, masks[w]);
		}
		for (i = 0; i < n; i++)
			blk_end_bio_chain(cur, done[i].bio, done[i].status, done[i].bad_sector);
	}
	cb->head = cb->tail = NULL;
	cb->count = 0;
}

/* --- dispatch ----------------------------------------------------------- */

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

static void __blk_mq_issue_list(struct blk_hw_queue *hctx, struct blk_request *list,
                                struct blk_ctx *ctx)
{
	struct blk_comp_batch cb = {0};

#if BLK_POISON_CHECKS
	/* The only question the fast path asks about poison: is there any? */
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

void blk_mq_issue_list(struct blk_hw_queue *hctx, struct blk_request *list)
{
	__blk_mq_issue_list(hctx, list, NULL);
}

/* Issue a list that may mix queues and scheduled requests. */
static __attribute__((noinline)) void blk_issue_mixed(struct blk_request *list, struct blk_ctx *ctx)
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
			blk_elv_insert_and_run(hctx, mine);
		else
			__blk_mq_issue_list(hctx, mine, ctx && ctx->hctx == hctx ? ctx : NULL);
		list = rest;
	}
}

static void blk_flush_plug_list(struct blk_plug *plug)
{
	struct blk_request *list = plug->head;
	struct blk_ctx *ctx;

	if (!list)
		return;
	ctx = blk_get_ctx(list->hctx->dev);
	ctx->stats.plug_flushes++;
	ctx->stats.dispatch_batches++;
	plug->head = plug->tail = NULL;
	plug->rq_count = 0;
	if (likely(!plug->multiple_queues && !plug->has_elevator)) {
		/* one queue, no scheduler: straight to the backend in one batch */
		__blk_mq_issue_list(list->hctx, list, ctx);
	} else {
		plug->multiple_queues = false;
		plug->has_elevator = false;
		blk_issue_mixed(list, ctx);
	}
}

/* --- plugging ----------------------------------------------------------- */

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

static void blk_poll_hctx(struct blk_hw_queue *hctx, unsigned min)
{
	struct blk_comp_batch cb = {0};

	hctx->ops->poll(hctx, min, &cb);
	if (cb.head)
		blk_mq_end_request_batch(&cb);
}

/* The map is full: flush our plug (its requests hold tags) and sleep until a tag frees. */
static __attribute__((noinline)) int blk_mq_wait_tag(struct blk_ctx *ctx)
{
	struct blk_hw_queue *hctx = ctx->hctx;
	struct blk_tags *tags = &hctx->tags;
	int tag;

	ctx->stats.tag_waits++;
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
	} else {
		bio->bi_next = rq->bio;
		rq->bio = bio;
		rq->sector = bio->sector;
		ctx->stats.merges_front++;
		ctx->stats.merges_back--;
	}
	ctx->stats.merges_back++;
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
	ctx->stats.ios[bio->op]++;
	ctx->stats.bytes[bio->op] += bio->len;
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
		ctx->stats.requests++;
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
	ctx->stats.requests++;
	ctx->stats.dispatch_batches++;
	if (unlikely(rq->rq_flags & RQF_ELV))
		blk_elv_insert_and_run(rq->hctx, rq);
	else
		__blk_mq_issue_list(rq->hctx, rq, ctx);
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

/* --- poison ------------------------------------------------------------- */

static bool blk_range_ok(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	return nr && sector < dev->nr_sectors && nr <= dev->nr_sectors - sector;
}

/* Table, then file, then the backend's view (emulation: protect the pages). */
int blk_poison_record(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	int ret;

	pthread_mutex_lock(&dev->poison_lock);
	ret = blk_bb_add(&dev->bb, sector, nr);
	if (!ret && dev->badblocks_path)
		ret = blk_bb_file_store(&dev->bb, dev->badblocks_path);
	if (dev->ops->poison_changed)
		dev->ops->poison_changed(dev, sector, nr);
	pthread_mutex_unlock(&dev->poison_lock);
	return ret;
}

int blk_poison_forget(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	int ret;

	pthread_mutex_lock(&dev->poison_lock);
	ret = blk_bb_clear(&dev->bb, sector, nr);
	if (!ret && dev->badblocks_path)
		ret = blk_bb_file_store(&dev->bb, dev->badblocks_path);
	if (dev->ops->poison_changed)
		dev->ops->poison_changed(dev, sector, nr);
	pthread_mutex_unlock(&dev->poison_lock);
	return ret;
}

int blk_poison_add(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	if (!blk_range_ok(dev, sector, nr))
		return -EINVAL;
	return blk_poison_record(dev, sector, nr);
}

int blk_poison_clear(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	int ret;

	if (!blk_range_ok(dev, sector, nr))
		return -EINVAL;
	if (dev->read_only)
		return -EROFS;
	ret = dev->ops->clear_poison(dev, sector, nr);
	if (ret)
		return ret;
	return blk_poison_forget(dev, sector, nr);
}

unsigned blk_poison_lookup(struct blk_dev *dev, uint64_t sector, uint64_t nr, struct blk_range *out,
                           unsigned max, unsigned *total)
{
	if (blk_bb_empty(&dev->bb)) {
		if (total)
			*total = 0;
		return 0;
	}
	return blk_bb_lookup(&dev->bb, sector, nr, out, max, total);
}

unsigned blk_poison_count(struct blk_dev *dev)
{
	return atomic_load(&dev->bb.nr);
}

int blk_direct_access(struct blk_dev *dev, uint64_t pos, size_t len, void **addr,
                      uint64_t *bad_sector)
{
	uint64_t first;

	if (!dev->ops->direct_access)
		return -EOPNOTSUPP;
	if (!len || pos >= dev->size || len > dev->size - pos)
		return -EINVAL;
#if BLK_POISON_CHECKS
	if (unlikely(!blk_bb_empty(&dev->bb)) &&
	    blk_bb_check(&dev->bb, pos >> BLK_SECTOR_SHIFT,
	                 ((pos + len + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT) -
	                         (pos >> BLK_SECTOR_SHIFT),
	                 &first)) {
		if (bad_sector)
			*bad_sector = first;
		return -EIO;
	}
#else
	(void)first;
	(void)bad_sector;
#endif
	*addr = dev->ops->direct_access(dev, pos, len);
	return *addr ? 0 : -EOPNOTSUPP;
}

int blk_dev_register_buffer(struct blk_dev *dev, void *addr, size_t len)
{
	if (!dev->ops->register_buffer)
		return 0;
	return dev->ops->register_buffer(dev, addr, len);
}

/* --- scheduler and QoS --------------------------------------------------- */

static bool blk_dev_idle(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++)
		if (!blk_tags_idle(&dev->hctxs[i].tags))
			return false;
	return true;
}

int blk_dev_set_scheduler(struct blk_dev *dev, const char *name)
{
	bool none = !name || !strcmp(name, "none");
	unsigned i, t;

	if (!none && strcmp(name, "deadline"))
		return -EINVAL;
	if (!blk_dev_idle(dev))
		return -EBUSY;
	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];

		if (none) {
			blk_elv_free(hctx->elv);
			hctx->elv = NULL;
		} else if (!hctx->elv) {
			hctx->elv = blk_elv_alloc(name);
			if (!hctx->elv)
				return -ENOMEM;
		}
		/* the flag lives in the request so the fast path never looks at hctx->elv */
		for (t = 0; t < hctx->tags.depth; t++) {
			if (none)
				hctx->tags.rqs[t].rq_flags &= (uint8_t)~RQF_ELV;
			else
				hctx->tags.rqs[t].rq_flags |= RQF_ELV;
		}
	}
	return 0;
}

void blk_dev_set_qos(struct blk_dev *dev, const struct blk_qos_ops *ops, void *priv)
{
	dev->qos_priv = priv;
	__atomic_store_n(&dev->qos, ops, __ATOMIC_RELEASE);
}

/* --- statistics and info -------------------------------------------------- */

#define BLK_RD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

void blk_dev_get_stats(struct blk_dev *dev, struct blk_stats *st)
{
	unsigned i, op;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&dev->ctx_lock);
	for (i = 0; i < dev->nr_ctxs; i++) {
		struct blk_ctx_stats *cs = &dev->ctxs[i]->stats;

		for (op = 0; op < BLK_OP_MAX; op++) {
			st->ios[op] += BLK_RD(cs->ios[op]);
			st->bytes[op] += BLK_RD(cs->bytes[op]);
		}
		st->requests += BLK_RD(cs->requests);
		st->merges_back += BLK_RD(cs->merges_back);
		st->merges_front += BLK_RD(cs->merges_front);
		st->plug_flushes += BLK_RD(cs->plug_flushes);
		st->dispatch_batches += BLK_RD(cs->dispatch_batches);
		st->tag_waits += BLK_RD(cs->tag_waits);
	}
	pthread_mutex_unlock(&dev->ctx_lock);
	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_cq_stats *cq = &dev->hctxs[i].cq_stats;

		st->errors += atomic_load(&cq->errors);
		st->media_errors += atomic_load(&cq->media_errors);
		st->poison_hits += atomic_load(&cq->poison_hits);
		st->recovered_sectors += atomic_load(&cq->recovered_sectors);
		st->poison_cleared += atomic_load(&cq->poison_cleared);
		st->faults += atomic_load(&cq->faults);
	}
}

void blk_dev_get_info(const struct blk_dev *dev, struct blk_dev_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = dev->size;
	info->nr_sectors = dev->nr_sectors;
	info->logical_block_size = dev->byte_granular ? 1 : (unsigned)dev->lbs_mask + 1;
	info->nr_hw_queues = dev->nr_hw_queues;
	info->queue_depth = dev->queue_depth;
	info->max_sectors = dev->max_bytes >> BLK_SECTOR_SHIFT;
	info->max_segments = dev->max_segments;
	info->backend = dev->cfg.backend;
	info->backend_name = dev->ops->name;
	info->direct_access = dev->ops->direct_access != NULL;
	info->byte_granular = dev->byte_granular;
	info->direct_page_cache = dev->direct_page_cache;
	info->emulated_poison = dev->badblocks_path != NULL;
	info->badblocks_path = dev->badblocks_path;
	info->read_only = dev->read_only;
}

/* --- open and close --------------------------------------------------------- */

static const struct blk_backend_ops *blk_pick_backend(const struct blk_dev_config *cfg,
                                                      enum blk_backend_type *type, char *err,
                                                      size_t errlen)
{
	struct stat st;

	*type = cfg->backend;
	if (cfg->backend == BLK_BACKEND_NULL)
		return &blk_null_ops;
	if (!cfg->path) {
		blk_err(err, errlen, "no device given");
		return NULL;
	}
	if (cfg->backend == BLK_BACKEND_AUTO) {
		if (stat(cfg->path, &st) < 0) {
			blk_err(err, errlen, "%s: %s", cfg->path, strerror(errno));
			errno = errno ? errno : ENOENT;
			return NULL;
		}
		if (S_ISBLK(st.st_mode))
			*type = BLK_BACKEND_URING;
		else if (S_ISCHR(st.st_mode) || S_ISREG(st.st_mode))
			*type = BLK_BACKEND_PMEM;
		else {
			blk_err(err, errlen,
			        "%s: not a devdax device, block device or regular file", cfg->path);
			errno = EINVAL;
			return NULL;
		}
	}
	return *type == BLK_BACKEND_URING ? &blk_uring_ops : &blk_pmem_ops;
}

static int blk_dev_load_poison(struct blk_dev *dev, const struct blk_dev_config *cfg, char *err,
                               size_t errlen)
{
	struct stat st;
	int ret = 0, fd;

	/* the unit of poison is the logical block: a device cannot lose less */
	if (!dev->byte_granular)
		blk_bb_set_unit(&dev->bb, ((uint32_t)dev->lbs_mask + 1) >> BLK_SECTOR_SHIFT);
	if (cfg->flags & BLK_CFG_NO_POISON)
		return 0;
	if (cfg->badblocks_path) {
		dev->badblocks_path = strdup(cfg->badblocks_path);
	} else if (dev->path && stat(dev->path, &st) == 0 && S_ISREG(st.st_mode)) {
		if (asprintf(&dev->badblocks_path, "%s.badblocks", dev->path) < 0)
			dev->badblocks_path = NULL;
		if (!dev->badblocks_path)
			return -ENOMEM;
	}
	if (dev->badblocks_path) {
		ret = blk_bb_file_load(&dev->bb, dev->badblocks_path, dev->nr_sectors, err, errlen);
		if (ret)
			return ret;
	}
	if (dev->path) {
		fd = open(dev->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ret = blk_bb_load_sources(&dev->bb, fd, dev->path, err, errlen);
			close(fd);
			if (ret)
				return ret;
		}
	}
	if (dev->ops->poison_changed)
		dev->ops->poison_changed(dev, 0, dev->nr_sectors);
	return 0;
}

static int blk_dev_registry_add(struct blk_dev *dev)
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

static void blk_dev_registry_del(struct blk_dev *dev)
{
	unsigned i;

	pthread_mutex_lock(&blk_registry_lock);
	for (i = 0; i < sizeof(blk_registry) / sizeof(blk_registry[0]); i++)
		if (blk_registry[i] == dev)
			blk_registry[i] = NULL;
	pthread_mutex_unlock(&blk_registry_lock);
}

static void blk_dev_free(struct blk_dev *dev, unsigned hctx_inited, bool backend_open)
{
	unsigned i;

	for (i = 0; i < hctx_inited; i++)
		dev->ops->exit_hctx(&dev->hctxs[i]);
	if (dev->hctxs) {
		for (i = 0; i < dev->nr_hw_queues; i++) {
			blk_elv_free(dev->hctxs[i].elv);
			if (dev->hctxs[i].tags.rqs)
				blk_tags_exit(&dev->hctxs[i].tags);
			pthread_mutex_destroy(&dev->hctxs[i].sq_lock);
			pthread_mutex_destroy(&dev->hctxs[i].cq_lock);
		}
	}
	if (backend_open)
		dev->ops->close(dev);
	for (i = 0; i < dev->nr_ctxs; i++) {
		pthread_mutex_destroy(&dev->ctxs[i]->swq_lock);
		free(dev->ctxs[i]);
	}
	blk_bb_destroy(&dev->bb);
	if (dev->lock_fd >= 0)
		close(dev->lock_fd);
	pthread_mutex_destroy(&dev->poison_lock);
	pthread_mutex_destroy(&dev->ctx_lock);
	free(dev->hctxs);
	free(dev->path);
	free(dev->badblocks_path);
	free(dev);
}

int blk_dev_open(const struct blk_dev_config *cfg, struct blk_dev **devp, char *err, size_t errlen)
{
	const struct blk_backend_ops *ops;
	enum blk_backend_type type;
	unsigned depth, nr_hw, max_sectors, max_segs, i, inited = 0;
	struct blk_dev *dev;
	int ret;

	*devp = NULL;
	if (err && errlen)
		err[0] = '\0';
	depth = cfg->queue_depth ? cfg->queue_depth : 128;
	nr_hw = cfg->nr_hw_queues ? cfg->nr_hw_queues : 1;
	max_sectors = cfg->max_sectors ? cfg->max_sectors : 256;
	max_segs = cfg->max_segments ? cfg->max_segments : 128;
	if (depth > BLK_MAX_DEPTH || nr_hw > BLK_MAX_HW_QUEUES || max_sectors < 8 ||
	    max_sectors > (1u << 22) || max_segs > 1024) {
		blk_err(err, errlen,
		        "invalid configuration: depth %u (max %u), queues %u (max %u), "
		        "max_sectors %u (8..4194304), max_segments %u (max 1024)",
		        depth, BLK_MAX_DEPTH, nr_hw, BLK_MAX_HW_QUEUES, max_sectors, max_segs);
		return -EINVAL;
	}
	errno = 0;
	ops = blk_pick_backend(cfg, &type, err, errlen);
	if (!ops)
		return -(errno ? errno : EINVAL);

	dev = aligned_alloc(BLK_CACHELINE, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	memset(dev, 0, sizeof(*dev));
	dev->ops = ops;
	dev->id = atomic_fetch_add(&blk_next_dev_id, 1);
	dev->cfg = *cfg;
	dev->cfg.backend = type;
	dev->cfg.path = NULL;
	dev->cfg.badblocks_path = NULL;
	dev->cfg.scheduler = NULL;
	dev->lock_fd = -1;
	dev->queue_depth = depth;
	dev->nr_hw_queues = nr_hw;
	dev->max_bytes = max_sectors << BLK_SECTOR_SHIFT;
	dev->max_segments = (uint16_t)max_segs;
	dev->read_only = cfg->flags & BLK_CFG_READONLY;
	dev->rq_flags_init = (cfg->flags & BLK_CFG_NOMERGE) ? RQF_NOMERGE : 0;
	pthread_mutex_init(&dev->poison_lock, NULL);
	pthread_mutex_init(&dev->ctx_lock, NULL);
	blk_bb_init(&dev->bb);
	if (cfg->path && !(dev->path = strdup(cfg->path))) {
		blk_dev_free(dev, 0, false);
		return -ENOMEM;
	}

	if (cfg->path && (cfg->flags & BLK_CFG_EXCL)) {
		dev->lock_fd = open(cfg->path, O_RDONLY | O_CLOEXEC);
		if (dev->lock_fd < 0 || flock(dev->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			blk_err(err, errlen, "%s: %s", cfg->path,
			        ret == -EBUSY ? "device is in use by another process"
			                      : strerror(-ret));
			blk_dev_free(dev, 0, false);
			return ret;
		}
	}

	ret = ops->open(dev, cfg, err, errlen);
	if (ret) {
		blk_dev_free(dev, 0, false);
		return ret;
	}

	dev->hctxs = aligned_alloc(BLK_CACHELINE, sizeof(*dev->hctxs) * nr_hw);
	if (!dev->hctxs) {
		blk_dev_free(dev, 0, true);
		return -ENOMEM;
	}
	memset(dev->hctxs, 0, sizeof(*dev->hctxs) * nr_hw);
	for (i = 0; i < nr_hw; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];
		unsigned t;

		hctx->dev = dev;
		hctx->ops = ops;
		hctx->index = i;
		hctx->polled = ops->async && (cfg->flags & BLK_CFG_POLLED);
		pthread_mutex_init(&hctx->sq_lock, NULL);
		pthread_mutex_init(&hctx->cq_lock, NULL);
		ret = blk_tags_init(&hctx->tags, depth);
		if (ret) {
			blk_err(err, errlen, "cannot allocate %u tags", depth);
			blk_dev_free(dev, inited, true);
			return ret;
		}
		for (t = 0; t < depth; t++)
			hctx->tags.rqs[t].hctx = hctx;
	}
	for (i = 0; i < nr_hw; i++) {
		ret = ops->init_hctx(&dev->hctxs[i]);
		if (ret) {
			blk_err(err, errlen, "%s: cannot set up hardware queue %u: %s",
			        cfg->path ? cfg->path : ops->name, i, strerror(-ret));
			blk_dev_free(dev, inited, true);
			return ret;
		}
		inited++;
	}

#if BLK_POISON_CHECKS
	ret = blk_guard_install();
	if (ret) {
		blk_err(err, errlen, "cannot install the fault guard: %s", strerror(-ret));
		blk_dev_free(dev, inited, true);
		return ret;
	}
#endif
	ret = blk_dev_load_poison(dev, cfg, err, errlen);
	if (ret) {
		blk_dev_free(dev, inited, true);
		return ret;
	}
	if (cfg->scheduler && (ret = blk_dev_set_scheduler(dev, cfg->scheduler))) {
		blk_err(err, errlen, "unknown scheduler '%s' (none, deadline)", cfg->scheduler);
		blk_dev_free(dev, inited, true);
		return ret;
	}
	ret = blk_dev_registry_add(dev);
	if (ret) {
		blk_err(err, errlen, "too many open devices");
		blk_dev_free(dev, inited, true);
		return ret;
	}
	*devp = dev;
	return 0;
}

/* Wait for every tag of every queue to come back. */
static void blk_dev_drain(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];
		struct blk_tags *tags = &hctx->tags;

		while (!blk_tags_idle(tags)) {
			struct timespec ts = {0, 1000 * 1000};
			uint32_t seq = atomic_load(&tags->wake_seq);

			if (hctx->polled) {
				blk_poll_hctx(hctx, 0);
				ts.tv_nsec = 100 * 1000;
			}
			atomic_fetch_add(&tags->waiters, 1);
			if (!blk_tags_idle(tags))
				blk_futex(&tags->wake_seq, FUTEX_WAIT, seq, &ts);
			atomic_fetch_sub(&tags->waiters, 1);
		}
	}
}

void blk_dev_close(struct blk_dev *dev)
{
	unsigned i;

	if (!dev)
		return;
	if (blk_current_plug) {
		struct blk_plug *plug = blk_current_plug;

		blk_flush_plug_all(plug);
		if (plug->cached_dev == dev)
			blk_plug_free_cached(plug);
	}
	blk_dev_registry_del(dev);
	for (i = 0; i < BLK_TLS_SLOTS; i++)
		if (blk_tls[i].dev_id == dev->id)
			blk_tls[i].dev_id = 0;
	blk_dev_drain(dev);
	blk_dev_free(dev, dev->nr_hw_queues, true);
}
