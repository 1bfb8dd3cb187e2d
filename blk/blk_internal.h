/* SPDX-License-Identifier: MIT */
/*
 * Engine internals shared by every file of blk/ (README.md lists the files
 * and the layers they form).  Nothing here is public.
 *
 * Lock order (outer first):
 *   blk_dev.poison_lock -> blk_badblocks.lock
 *   blk_elevator.lock is a leaf: taken to insert or take a batch, released
 *   before the batch is dispatched
 *   blk_hw_queue.cq_lock is a leaf: uring consumes CQEs under it and requeues
 *   (sq_lock) only after releasing it
 */
#ifndef MENDFS_BLK_INTERNAL_H
#define MENDFS_BLK_INTERNAL_H

#include <assert.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mendfs/blk.h"

#define likely(x)           __builtin_expect(!!(x), 1)
#define unlikely(x)         __builtin_expect(!!(x), 0)
#define BLK_CACHELINE       64
#define __cacheline_aligned __attribute__((aligned(BLK_CACHELINE)))

#ifndef BLK_POISON_CHECKS
#define BLK_POISON_CHECKS 1
#endif

#define BLK_MAX_DEPTH          4096
#define BLK_PLUG_MAX_RQS       32 /* flush a single-queue plug at this many requests */
#define BLK_PLUG_MAX_RQS_MULTI 64 /* ... and a plug spanning several queues at this many */
#define BLK_PLUG_FLUSH_SIZE    (128u * 1024) /* flush when the last request is this big */

/* rq->rq_flags */
#define RQF_ELV        (1u << 0) /* a scheduler owns ordering: set when it is attached */
#define RQF_NOMERGE    (1u << 1) /* nothing may merge into this request */
#define RQF_FAULT_SEEN (1u << 2) /* counted by the fault injector (fault.c) */

/*
 * A request: one tag, a chain of contiguous bios.  The first cache line holds
 * everything the submit -> dispatch -> complete path touches; the second what
 * only the scheduler, the requeue and the backends' slow paths need.
 */
struct blk_request {
	/* hot: written at allocation, read at dispatch and completion */
	struct blk_hw_queue *hctx;
	struct blk_request *rq_next; /* plug, dispatch, completion lists */
	struct blk_bio *bio, *biotail;
	uint64_t sector; /* cursor: advances on partial completion */
	uint32_t len;    /* bytes left */
	uint16_t tag;
	uint16_t nr_segs;
	uint8_t op;
	uint8_t rq_flags;
	uint8_t status; /* applied to every bio still attached when the request ends */
	uint8_t __pad0[5];
	uint64_t __pad1;

	/* cold */
	struct blk_request *elv_next; /* scheduler: sector-sorted list */
	struct blk_request *fifo_next;
	uint64_t deadline_ns;
	void *drv;           /* backend per-tag data (uring: its iovec array) */
	uint64_t bad_sector; /* first poisoned sector, when status is MEDIA */
	uint64_t __pad2[3];
};
_Static_assert(offsetof(struct blk_request, elv_next) == BLK_CACHELINE,
               "hot request fields must fill exactly the first cache line");
_Static_assert(sizeof(struct blk_request) == 2 * BLK_CACHELINE, "struct blk_request is 128 bytes");

#define blk_rq_for_each_bio(bio, rq) for ((bio) = (rq)->bio; (bio); (bio) = (bio)->bi_next)

static inline uint64_t blk_rq_pos(const struct blk_request *rq)
{
	return (rq->sector << BLK_SECTOR_SHIFT) + rq->bio->byte_off;
}

/* A tag bitmap word on its own cache line, so that threads allocating from
 * different words do not bounce lines. */
struct blk_tag_word {
	_Atomic uint64_t busy;
	uint64_t valid; /* bits that are real tags */
} __cacheline_aligned;

struct blk_tags {
	struct blk_tag_word *words;
	struct blk_request *rqs; /* static requests, indexed by tag */
	unsigned depth;
	unsigned nr_words;
	unsigned bits_per_word; /* power of two */
	unsigned shift;         /* log2(bits_per_word) */
	/* waiters: touched only when the map was full */
	_Atomic uint32_t waiters __cacheline_aligned;
	_Atomic uint32_t wake_seq;
};

/* FUTEX_WAIT (until @ts, or for ever if NULL) or FUTEX_WAKE on a process-private word. */
static inline long blk_futex(_Atomic uint32_t *uaddr, int op, uint32_t val,
                             const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)uaddr, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

static inline struct blk_request *blk_tag_to_rq(const struct blk_tags *tags, unsigned tag)
{
	return &tags->rqs[tag];
}

int blk_tags_init(struct blk_tags *tags, unsigned depth);
void blk_tags_exit(struct blk_tags *tags);
/* One tag, starting the search at *hint.  Returns the tag or -1. */
int blk_tag_get(struct blk_tags *tags, unsigned *hint);
/* Up to @nr tags from one word; bit i of the result set means tag (*offset + i).  0 if none. */
uint64_t blk_tag_get_batch(struct blk_tags *tags, unsigned *hint, unsigned nr, unsigned *offset);
/* Free the tags set in @mask of word @w, and wake waiters. */
void blk_tags_put_mask(struct blk_tags *tags, unsigned w, uint64_t mask);
void blk_tag_put(struct blk_tags *tags, unsigned tag);
/* True when no tag is in use. */
bool blk_tags_idle(const struct blk_tags *tags);
/* Tags held now (a snapshot, for statistics). */
unsigned blk_tags_busy(const struct blk_tags *tags);
/* Sleep until a tag may have been freed since @seq was read. */
void blk_tags_wait(struct blk_tags *tags, uint32_t seq);
void blk_tags_wake(struct blk_tags *tags);

/* Requests completed by a backend, ended together (bios ended, tags freed in bulk). */
struct blk_comp_batch {
	struct blk_request *head, *tail;
	unsigned count;
};

static inline void blk_comp_add(struct blk_comp_batch *cb, struct blk_request *rq)
{
	rq->rq_next = NULL;
	if (cb->tail)
		cb->tail->rq_next = rq;
	else
		cb->head = rq;
	cb->tail = rq;
	cb->count++;
}

/* Completion-side counters of one hardware queue (the side that ends requests). */
struct blk_cq_stats {
	_Atomic uint64_t errors;
	_Atomic uint64_t media_errors;
	_Atomic uint64_t poison_hits;
	_Atomic uint64_t recovered_sectors;
	_Atomic uint64_t poison_cleared;
	_Atomic uint64_t faults;
};

struct blk_elevator;

struct blk_hw_queue {
	struct blk_dev *dev;
	const struct blk_backend_ops *ops;
	void *drv; /* backend per-queue state */
	unsigned index;
	bool polled; /* completions are reaped by submitters through blk_poll() */
	struct blk_tags tags;
	struct blk_elevator *elv; /* NULL without a scheduler */

	/*
	 * Serialises queue_rqs() for backends that are not concurrent (uring's
	 * submission ring).  A submitter that finds it taken parks its list on
	 * its software queue (blk_ctx) and the holder dispatches it.
	 */
	pthread_mutex_t sq_lock __cacheline_aligned;
	_Atomic uint64_t swq_pending; /* bit i: ctx with index i (mod 64) has parked requests */
	pthread_mutex_t cq_lock __cacheline_aligned; /* polled reaping */
	struct blk_cq_stats cq_stats __cacheline_aligned;
};

/* Count a failed bio on the completion side. */
static inline void blk_count_error(struct blk_hw_queue *hctx, enum blk_status sts)
{
	atomic_fetch_add_explicit(&hctx->cq_stats.errors, 1, memory_order_relaxed);
	if (sts == BLK_STS_MEDIA)
		atomic_fetch_add_explicit(&hctx->cq_stats.media_errors, 1, memory_order_relaxed);
}

/*
 * Submission-side counters of a ctx.  One writer (the thread that owns the
 * ctx) and any number of readers (blk_dev_get_stats() and
 * blk_dev_get_queue_stats() from another thread), so both sides go through
 * relaxed atomic accesses: the writer a relaxed load and store, not a locked
 * read-modify-write, since no other thread ever writes the counter.  On x86
 * and arm64 that compiles to the same plain load, add and store as "++".
 */
#define BLK_STAT_ADD(x, n)                                                                         \
	__atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define BLK_STAT_INC(x)  BLK_STAT_ADD(x, 1)
#define BLK_STAT_READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Submission-side counters, written only by the thread that owns the ctx (BLK_STAT_ADD). */
struct blk_ctx_stats {
	uint64_t ios[BLK_OP_MAX];
	uint64_t bytes[BLK_OP_MAX];
	uint64_t requests;
	uint64_t merges_back, merges_front;
	uint64_t plug_flushes;
	uint64_t dispatch_batches;
	uint64_t tag_waits;
};

/* Per (thread, device) software context. */
struct blk_ctx {
	struct blk_hw_queue *hctx;
	unsigned tag_hint;
	unsigned index;
	_Atomic pid_t owner; /* tid, 0 when free for reuse */
	pthread_mutex_t swq_lock;
	struct blk_request *swq_head, *swq_tail; /* software queue: parked while hctx busy */
	struct blk_ctx_stats stats __cacheline_aligned;
};

/* Poison table: sorted, merged sector ranges. */
struct blk_badblocks {
	_Atomic uint32_t nr; /* the fast path reads only this */
	/* [lo, hi): the span of all poison, so a lookup far from it takes no lock */
	_Atomic uint64_t lo, hi;
	pthread_rwlock_t lock;
	struct blk_range *ranges;
	uint32_t cap;
	/*
	 * Sectors per unit of poison (a power of two; 1 until blk_bb_set_unit):
	 * every range is widened to whole units, as a device cannot lose less
	 * than its logical block.
	 */
	uint32_t unit;
	/*
	 * The summary that answers most lookups without the lock once the table
	 * is not empty (blk_bb_set_size; NULL: every lookup takes the lock): bit
	 * c is set while a range may touch chunk c (1 << summary_shift sectors,
	 * at most 65536 chunks).  A writer sets bits before a range goes in and
	 * clears them after the last range of their chunk went.
	 */
	_Atomic uint64_t *summary;
	uint32_t summary_shift;
	uint64_t summary_chunks;
};

static inline bool blk_bb_empty(struct blk_badblocks *bb)
{
	return atomic_load_explicit(&bb->nr, memory_order_acquire) == 0;
}
void blk_bb_init(struct blk_badblocks *bb);
void blk_bb_destroy(struct blk_badblocks *bb);
void blk_bb_set_unit(struct blk_badblocks *bb, uint32_t unit);
/* Size the lock-free summary for a device of @nr_sectors (at open).  0 or -ENOMEM. */
int blk_bb_set_size(struct blk_badblocks *bb, uint64_t nr_sectors);
int blk_bb_add(struct blk_badblocks *bb, uint64_t sector, uint64_t nr);
int blk_bb_clear(struct blk_badblocks *bb, uint64_t sector, uint64_t nr);
/* True if [sector, sector + nr) holds poison; *first is the first poisoned sector. */
bool blk_bb_check(struct blk_badblocks *bb, uint64_t sector, uint64_t nr, uint64_t *first);
unsigned blk_bb_lookup(struct blk_badblocks *bb, uint64_t sector, uint64_t nr,
                       struct blk_range *out, unsigned max, unsigned *total);
/* Copy the whole table (malloc'ed, caller frees).  Returns the count or -ENOMEM. */
int blk_bb_snapshot(struct blk_badblocks *bb, struct blk_range **out);
/*
 * Emulation file (kernel sysfs badblocks format: "SECTOR COUNT" per line,
 * blank lines and '#' comments).  A missing file is an empty table.  Parse
 * errors return -EINVAL with "PATH:LINE: what" in @err.
 */
int blk_bb_file_load(struct blk_badblocks *bb, const char *path, uint64_t nr_sectors, char *err,
                     size_t errlen);
/* Rewrite the file atomically (temporary file, fsync, rename, fsync of the directory). */
int blk_bb_file_store(struct blk_badblocks *bb, const char *path);
/* Real sources: libpmem2/libndctl badblocks of a devdax/fsdax device, sysfs badblocks of a
 * block device.  Missing sources are not errors. */
int blk_bb_load_sources(struct blk_badblocks *bb, int fd, const char *path, char *err,
                        size_t errlen);
/* The sysfs part of blk_bb_load_sources(): @devdir is the block device's sysfs directory
 * (/sys/dev/block/MAJ:MIN resolved; a disk or a partition).  Separate so tests can feed it. */
int blk_bb_load_sysfs(struct blk_badblocks *bb, const char *devdir, char *err, size_t errlen);

/* Backend operations. */
struct blk_backend_ops {
	const char *name;
	bool concurrent; /* queue_rqs() may run on several threads at once */
	bool async;      /* completions arrive later (poll or completion thread) */
	int (*open)(struct blk_dev *dev, const struct blk_dev_config *cfg, char *err,
	            size_t errlen);
	void (*close)(struct blk_dev *dev);
	int (*init_hctx)(struct blk_hw_queue *hctx);
	void (*exit_hctx)(struct blk_hw_queue *hctx);
	/*
	 * Issue @list (linked by rq_next, all of this hctx).  Synchronous
	 * backends complete every request into @cb.  Returns the requests it
	 * could not take (busy: retried later), or NULL.
	 */
	struct blk_request *(*queue_rqs)(struct blk_hw_queue *hctx, struct blk_request *list,
	                                 struct blk_comp_batch *cb);
	/* Async backends: reap completions into @cb, waiting for @min. Returns count or -errno. */
	int (*poll)(struct blk_hw_queue *hctx, unsigned min, struct blk_comp_batch *cb);
	/* Slow path, synchronous, byte addressed.  read_sync returns -EIO on media
	 * it cannot read (and sets *bad to the first bad sector). */
	int (*read_sync)(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, uint64_t *bad);
	int (*write_sync)(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len);
	/* Clear poison on the media before the sectors are rewritten. */
	int (*clear_poison)(struct blk_dev *dev, uint64_t sector, uint64_t nr);
	/* The table changed over [sector, sector + nr) (emulation: protect pages). */
	void (*poison_changed)(struct blk_dev *dev, uint64_t sector, uint64_t nr);
	/* Address of [pos, pos + len) in the mapping, or NULL when the range shares a
	 * page with poison (a load there would fault: copy through read_sync instead). */
	void *(*direct_access)(struct blk_dev *dev, uint64_t pos, size_t len);
	int (*register_buffer)(struct blk_dev *dev, void *addr, size_t len);
	int (*flush_sync)(struct blk_dev *dev);
	/*
	 * Re-read the size of the underlying file or device (it grew) and make
	 * the new range addressable without moving anything already in use:
	 * the new byte size in *@size.  NULL: the size is fixed while open.
	 */
	int (*resize)(struct blk_dev *dev, uint64_t *size, char *err, size_t errlen);
};

extern const struct blk_backend_ops blk_null_ops;
extern const struct blk_backend_ops blk_pmem_ops;
extern const struct blk_backend_ops blk_uring_ops;

#define BLK_MAX_CTX 1024

struct blk_dev {
	/* read on every I/O */
	const struct blk_backend_ops *ops;
	uint64_t id; /* unique for the life of the process: keys the TLS ctx cache */
	uint64_t nr_sectors;
	uint64_t size;
	uint32_t max_bytes; /* max_sectors << 9 */
	uint16_t max_segments;
	uint16_t lbs_mask;     /* logical block size - 1 */
	uint8_t rq_flags_init; /* RQF_NOMERGE when merging is off */
	bool read_only;
	bool byte_granular;
	bool direct_page_cache; /* direct_access addresses are page-cache pages of a file */
	unsigned nr_hw_queues;
	struct blk_hw_queue *hctxs;
	const struct blk_qos_ops *qos;
	void *qos_priv;
	struct blk_badblocks bb __cacheline_aligned;
	/* latent poison (emulation): found, and moved to bb, when a read touches it */
	struct blk_badblocks latent;

	/* cold */
	struct blk_dev_config cfg;
	char *path;
	char *badblocks_path; /* emulation file or NULL */
	char *latent_path;    /* latent poison file or NULL */
	void *drv;            /* backend device state */
	unsigned queue_depth;
	pthread_mutex_t poison_lock; /* serialises poison writers and emulation file rewrites */
	/* blk_dev_set_poison_notify: told of every new poison, under poison_lock */
	blk_poison_notify_fn *poison_notify;
	void *poison_notify_priv;
	pthread_mutex_t ctx_lock;
	struct blk_ctx *ctxs[BLK_MAX_CTX];
	unsigned nr_ctxs;
	int lock_fd; /* flock()ed for BLK_CFG_EXCL */
};

/* Completion (complete.c): used by backends and the slow path. */
void blk_mq_end_request_batch(struct blk_comp_batch *cb);
/*
 * Complete @nbytes of @rq with @sts, walking its bio chain: bios entirely
 * covered end now, a partly covered one advances.  Returns true if bytes remain.
 */
bool blk_update_request(struct blk_request *rq, enum blk_status sts, uint32_t nbytes);
/* End one bio of a request now with its own status (the request keeps the others). */
void blk_end_bio(struct blk_hw_queue *hctx, struct blk_bio *bio, enum blk_status sts);

/* Dispatch (dispatch.c). */
/*
 * Issue @list (all of @hctx, none scheduled) after the poison filter; @ctx is
 * the submitter's software context when it belongs to @hctx (serialised
 * backends park the list there when the ring is taken), else NULL.  Used by
 * plug flush, the scheduler run and uring's requeue.
 */
void blk_mq_issue_list(struct blk_hw_queue *hctx, struct blk_request *list, struct blk_ctx *ctx);
/* Issue a list that may mix queues and scheduled requests. */
void blk_mq_issue_mixed(struct blk_request *list, struct blk_ctx *ctx);
/* Insert @list (all RQF_ELV, of @hctx) into the scheduler and dispatch what the policy allows. */
void blk_mq_sched_insert(struct blk_hw_queue *hctx, struct blk_request *list);
/* Reap the completions of a polled @hctx (waiting for @min) and end them. */
void blk_poll_hctx(struct blk_hw_queue *hctx, unsigned min);

/* Poison slow path (slowpath.c): run a request that meets poison synchronously, sector range by
 * sector range; completes it into @cb. */
void blk_rq_slowpath(struct blk_hw_queue *hctx, struct blk_request *rq, struct blk_comp_batch *cb);
/* Poison bookkeeping (poison.c). */
/* Record poison found by a fault or a device error (table, emulation file, backend hook). */
int blk_poison_record(struct blk_dev *dev, uint64_t sector, uint64_t nr);
/* Clear after a full overwrite: backend clear, then (caller writes), then table + file. */
int blk_poison_forget(struct blk_dev *dev, uint64_t sector, uint64_t nr);
/*
 * Latent poison in [sector, sector + nr) was touched (dev->latent not
 * empty): by a read, it becomes poison (recorded as a media error found by
 * the backend is); by a write, the sectors are good again.  Both files are
 * rewritten.  Called by dispatch for every request, and by direct access.
 */
void blk_latent_touch(struct blk_dev *dev, uint64_t sector, uint64_t nr, bool read);

/* Scheduler (sched.c), a pull model: dispatch.c inserts requests and takes batches. */
struct blk_elevator *blk_elv_alloc(const char *name);
void blk_elv_free(struct blk_elevator *elv);
/* The clock the scheduler dates requests with (CLOCK_MONOTONIC, ns). */
uint64_t blk_elv_now(void);
/* Insert @list (all RQF_ELV, of one hctx) dated @now; returns the first batch to dispatch. */
struct blk_request *blk_elv_insert(struct blk_elevator *elv, struct blk_request *list,
                                   uint64_t now);
/* The next batch the policy lets go at @now (linked by rq_next), or NULL. */
struct blk_request *blk_elv_next(struct blk_elevator *elv, uint64_t now);

/* Software contexts and the device registry (submit.c), for device.c. */
int blk_dev_registry_add(struct blk_dev *dev);
/* Before a device is freed: flush this thread's plug, drop its cached requests and
 * context slots of @dev, and remove @dev from the registry. */
void blk_mq_unregister_dev(struct blk_dev *dev);

/*
 * Fault guard (guard.c).  Loads from a pmem mapping that may touch unknown
 * poison run between blk_guard_arm() and blk_guard_disarm(); a SIGBUS or
 * SIGSEGV whose address lies in [lo, hi) jumps back to the sigsetjmp() with
 * the faulting address in g->fault_addr.  Any other fault is re-raised.
 */
#include <setjmp.h>
struct blk_guard {
	sigjmp_buf jb;
	const char *lo, *hi;
	void *fault_addr;
	int fault_signo;
	unsigned fault_lsb; /* log2 of the poisoned granule the kernel reported */
	int fault_code;     /* si_code: BUS_MCEERR_AR (poison), SEGV_ACCERR, BUS_ADRERR, ... */
};
int blk_guard_install(void);
void blk_guard_arm(struct blk_guard *g, const void *lo, size_t len);
void blk_guard_disarm(struct blk_guard *g);
/* if (BLK_GUARD_FAULTED(g)) { fault path } — must be a macro: sigsetjmp's frame must stay live. */
#define BLK_GUARD_FAULTED(g) (sigsetjmp((g)->jb, 0) != 0)

/* Helpers shared by backends. */
/* Copy between a bio's segments (from byte @skip on) and linear memory. */
void blk_bio_copy_to(struct blk_bio *bio, size_t skip, const void *src, size_t len);
void blk_bio_copy_from(const struct blk_bio *bio, size_t skip, void *dst, size_t len);
void blk_bio_zero(struct blk_bio *bio, size_t skip, size_t len);

int blk_errno_to_status(int err);

#endif /* MENDFS_BLK_INTERNAL_H */
