/* SPDX-License-Identifier: MIT */
/*
 * How requests reach the ops: a transport reads the requests of a mounted
 * FUSE session, offers each to the daemon's fast path (the hot requests,
 * decoded and answered without libfuse: fastpath.c), hands the rest to
 * libfuse (which decodes them and calls the ops table, ops.c) and carries
 * the replies back.  The ops never know which transport carried a request.
 * There are two: /dev/fuse read by a pool of worker threads
 * (transport_dev.c), and FUSE over io_uring (transport_uring.c,
 * -o io_uring), which keeps that pool for what the rings do not carry.
 *
 * main sets up the session (ops table, signal handlers, mount) and the fast
 * path, then calls start, loop (until unmount or a signal) and stop.  A
 * transport calls libfuse, killpriv.c, the daemon's log and the fast path
 * main gave it (struct mfsd_transport's fast); never the ops or main.
 */
#ifndef MENDFS_TRANSPORT_H
#define MENDFS_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct fuse_session;
struct mfsd_transport;
struct iovec;

/*
 * Where the fast path sends a reply it makes itself: @send takes the whole
 * reply, the kernel's struct fuse_out_header first, as libfuse's writev hook
 * would (/dev/fuse, or the ring entry the request came in).
 */
struct mfsd_reply_to {
	ssize_t (*send)(void *ctx, const struct iovec *iov, int cnt);
	void *ctx;
};

/*
 * The daemon's fast path: offered every request (@req, @len bytes, the
 * kernel's struct fuse_in_header first) before libfuse sees it.  Returns
 * true when it answered the request through @to; false leaves the request
 * untouched, for libfuse.
 */
typedef bool mfsd_fast_fn(void *arg, const void *req, size_t len, const struct mfsd_reply_to *to);

struct mfsd_transport_ops {
	const char *name;
	/*
	 * Take over the I/O of the session, mounted and not read from yet
	 * (INIT is the first request).  Returns 0 or -errno.
	 */
	int (*start)(struct mfsd_transport *t);
	/*
	 * Serve requests until the session ends (unmount, or a signal that
	 * fuse_set_signal_handlers caught).  Returns 0, or -errno after logging
	 * why.
	 */
	int (*loop)(struct mfsd_transport *t);
	/* After the loop, before the session is unmounted: undo start. */
	void (*stop)(struct mfsd_transport *t);
	/*
	 * The requests that arrived in a ring entry so far, summed over the
	 * rings (each counts its own); NULL for a transport without rings.
	 */
	uint64_t (*ring_requests)(struct mfsd_transport *t);
};

/* What `mendctl stats` shows of the transport (MENDFS_TRANSPORT_* in mendfs/ioctl.h). */
enum { MFSD_TRANSPORT_DEV_FUSE = 1, MFSD_TRANSPORT_IO_URING = 2 };

struct mfsd_transport_stats {
	_Atomic unsigned kind;    /* the transport carrying requests now */
	struct mfsd_transport *t; /* set by main before start: for ring_requests */
};

struct mfsd_transport {
	const struct mfsd_transport_ops *ops;
	struct fuse_session *se; /* mounted, with the ops table */
	unsigned threads;        /* worker threads at most; 0: the transport's default */
	bool killpriv_v2;        /* grant FUSE_HANDLE_KILLPRIV_V2 if offered (killpriv.h) */
	mfsd_fast_fn *fast;      /* NULL: every request through libfuse */
	void *fast_arg;
	void *priv;                          /* the transport's own */
	struct mfsd_transport_stats *tstats; /* the daemon's, updated by the transport */
};

/* Requests that arrived in a ring entry (mendctl stats): 0 without rings. */
static inline uint64_t mfsd_transport_ring_requests(const struct mfsd_transport_stats *ts)
{
	struct mfsd_transport *t = ts->t;

	return t && t->ops->ring_requests ? t->ops->ring_requests(t) : 0;
}

/* /dev/fuse, read by a pool of workers through our read/writev hooks. */
extern const struct mfsd_transport_ops mfsd_transport_dev;

/* FUSE over io_uring, /dev/fuse beside it (or alone if the kernel refuses). */
extern const struct mfsd_transport_ops mfsd_transport_uring;

/*
 * The kernel's FUSE-over-io_uring queues, and so the io_uring transport's
 * rings and threads: one per possible CPU (/sys/devices/system/cpu/possible,
 * "0-N"; the configured CPUs if it cannot be read).
 */
unsigned mfsd_uring_nr_queues(void);

/* The /dev/fuse worker pool (the loop of both transports). */
int mfsd_dev_loop(struct mfsd_transport *t);

/*
 * A buffer of at least @size bytes where the handler of the request this
 * thread runs may build its reply data in place: the payload of the ring
 * entry carrying the request (FUSE over io_uring), which a reply made from it
 * with fuse_reply_buf() is not copied out of again.  NULL when there is none
 * (a request that came through /dev/fuse, or @size larger than the entry).
 * For handlers whose request has no payload of its own (READ): the buffer is
 * the one the request arrived in.
 */
void *mfsd_transport_reply_area(size_t size);

#endif
