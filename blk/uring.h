/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend's private header: its device, queue and per-request
 * state, and the functions its three files share (uring_sync.c: the
 * synchronous path; uring.c: submission and completion; uring_setup.c:
 * queues, open and close, the ops table).
 */
#ifndef MENDFS_BLK_URING_H
#define MENDFS_BLK_URING_H

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sys/uio.h>

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
extern const char blk_uring_exit_token;
#define URING_EXIT_UDATA ((uint64_t)(uintptr_t)&blk_uring_exit_token)

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

/* Synchronous path (uring_sync.c). */
int blk_uring_pio(int fd, bool write, void *buf, size_t len, uint64_t pos);
int blk_uring_read_sync(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, uint64_t *bad);
int blk_uring_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len);
int blk_uring_flush_sync(struct blk_dev *dev);
int blk_uring_clear_poison(struct blk_dev *dev, uint64_t sector, uint64_t nr);

/* Submission and completion (uring.c). */
struct blk_request *blk_uring_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                        struct blk_comp_batch *cb);
int blk_uring_poll(struct blk_hw_queue *hctx, unsigned min, struct blk_comp_batch *cb);
void *blk_uring_cq_thread(void *arg);
/* Submit every prepared SQE, retrying transient errors. */
void blk_uring_submit(struct uring_queue *uq);

#endif /* MENDFS_BLK_URING_H */
