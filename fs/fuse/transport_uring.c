/* SPDX-License-Identifier: MIT */
/*
 * The FUSE over io_uring transport (transport.h, -o io_uring): requests
 * arrive in ring entries the daemon registered with the kernel, and replies
 * go back with the COMMIT_AND_FETCH that also hands the entry back for the
 * next request (uring_abi.h has the kernel's ABI).  One ring and one thread
 * per kernel queue, i.e. per possible CPU (the kernel picks the queue of the
 * CPU the calling process runs on, and switches to the rings only once
 * every queue has entries).  The threads are not bound to their CPUs: bound,
 * a thread answering one CPU's stream of small requests kept that CPU's
 * kernel workers from running for tens of seconds (an ext4 fsync beside it
 * took that long, and the kernel reported a workqueue lockup).
 *
 * The headers of a request are copied in front of the payload, where the
 * entry's buffer leaves room for them, so that the request is one
 * contiguous buffer and the payload (a write's data) is not copied.  It is
 * offered to the daemon's fast path first (WRITE and READ, answered straight
 * into the entry), the rest dispatched through libfuse
 * (fuse_session_process_buf) into the same ops as over /dev/fuse; their
 * replies come back through the session's writev hook, which recognises a
 * ring request by its unique id and copies the reply into the entry instead
 * of writing /dev/fuse.  Replies of one batch of completions go to the
 * kernel in one io_uring_enter.
 *
 * What the rings do not carry keeps using /dev/fuse, read by the same
 * worker pool as the classic transport (transport_dev.c): INIT (the rings
 * are registered right after its reply), FORGET, INTERRUPT, notifications.
 * When the kernel does not offer FUSE_OVER_IO_URING, or a queue ends up
 * with no registered entry (the kernel refused them, or the queue could not
 * submit its REGISTERs), the daemon logs it once and /dev/fuse carries
 * everything (registration_outcome).
 *
 * A request that may wait must not hold up its queue, whose other requests
 * (the same CPU's) would wait behind it: FUSE_FSYNC and FUSE_FSYNCDIR (a
 * journal commit and a device flush) run on a small pool of threads while
 * fsyncs take long on average (FSYNC_ASIDE_NS; the hand-over costs about 20
 * us on the development VM, where an fsync of an image on tmpfs takes 50),
 * FUSE_IOCTL (the damage-event ioctl waits up to a second for an event, a
 * scrub for minutes) on a thread of its own (offload.h).  The ring's thread
 * submits their replies (only a ring's own thread submits to it, so that the
 * kernel delivers the entry's next request to a thread that waits for it).
 *
 * Calls libfuse, liburing, killpriv.c, the fast path main gave it and the
 * daemon's log.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon.h"
#include "killpriv.h"
#include "offload.h"
#include "transport.h"
#include "uring_abi.h"
#include "uring_hooks.h"

#define RING_DEPTH 8u    /* entries per queue */
#define HDR_AREA   4096u /* the headers, then room to put them in front of the payload */
#define EVFD_TAG   1u    /* user_data of the eventfd read (entries are pointers) */
#define SLOW_POOL  8u    /* threads for fsyncs (a commit serves every fsync waiting) */
/* fsyncs run aside while their moving average is longer (it starts at 1 ms) */
#define FSYNC_ASIDE_NS 200000u

struct uring_tr;
struct ring;

struct ring_ent {
	struct ring *r;
	struct mfsd_fuse_uring_req_header *hdr; /* the entry's memory starts with it */
	char *payload;                          /* hdr + HDR_AREA */
	struct iovec iov[2];                    /* what REGISTER hands the kernel */
	uint64_t commit_id;
	_Atomic uint64_t unique; /* of the request being handled, 0 when none */
	uint32_t last_cmd;
	struct ring_ent *next_done; /* on the ring's list of replies made elsewhere */
};

struct ring {
	struct uring_tr *tr;
	struct io_uring ring;
	bool ring_ok;
	unsigned qid;
	pthread_t th;   /* as pthread_create gave it (for the join) */
	pthread_t self; /* as the thread sees itself: commit() compares with it */
	bool th_ok;
	_Atomic bool started; /* self is set */
	int evfd;
	uint64_t evbuf;
	pthread_mutex_t done_lock;
	struct ring_ent *done; /* replied by an ioctl thread, to be committed */
	/* requests it carried: written by its thread only, read relaxed (uring_ring_requests) */
	_Atomic uint64_t requests;
	/* its registration, read by the last queue to report it (registration_outcome) */
	_Atomic unsigned refused; /* entries whose REGISTER the kernel refused */
	int refused_err;          /* the first refusal's errno, set before refused grows */
	unsigned unsent;          /* entries whose REGISTER found no submission entry */
	int fail_err;             /* it could not submit its REGISTERs (errno), or 0 */
	struct ring_ent ents[RING_DEPTH];
};

struct uring_tr {
	struct mfsd_transport *t;
	int fuse_fd;
	unsigned nq;
	struct ring *rings;
	size_t payload_sz; /* per entry, set at INIT */
	void *mem;         /* every entry's memory */
	size_t mem_sz;
	sem_t go; /* INIT answered: register (or stop) */
	_Atomic bool stop;
	_Atomic bool granted;      /* FUSE_OVER_IO_URING in the INIT reply */
	_Atomic unsigned reported; /* queues whose registration was submitted (or failed) */
	_Atomic bool live;         /* entries registered: a reply may be a ring request's */
	struct io_uring ctl;       /* for the REGISTER that makes the kernel fall back */
	bool ctl_ok;
	_Atomic bool init_offered;
	struct mfsd_offload slow;  /* the requests that may wait (dispatch) */
	_Atomic uint64_t fsync_ns; /* fsyncs' moving average duration (run_fsync) */
	bool slow_ok;              /* slow is set up, its threads not yet waited for */
};

static struct uring_tr *the_tr;           /* the session hooks have no pointer of their own */
static __thread struct ring_ent *cur_ent; /* the entry whose request this thread runs */
static __thread bool cur_replied;         /* ... and it has had its reply */

static void log_fallback(const char *why)
{
	mfsd_log(LOG_WARNING, "FUSE over io_uring: %s: requests go through /dev/fuse", why);
	if (the_tr && the_tr->t->tstats)
		atomic_store(&the_tr->t->tstats->kind, MFSD_TRANSPORT_DEV_FUSE);
}

/* --- submission (a ring's own thread only) ------------------------------------------------- */

static struct io_uring_sqe *get_sqe(struct ring *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe) {
		io_uring_submit(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	return sqe;
}

static bool queue_cmd(struct ring_ent *e, uint32_t cmd)
{
	struct io_uring_sqe *sqe = get_sqe(e->r);
	struct mfsd_fuse_uring_cmd_req *req;

	if (!sqe) {
		mfsd_log(LOG_ERR, "FUSE over io_uring: submission queue full");
		return false;
	}
	memset(sqe, 0, 2 * sizeof(*sqe)); /* 128-byte entries */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = 0;
	sqe->cmd_op = cmd;
	io_uring_sqe_set_data(sqe, e);
	req = (struct mfsd_fuse_uring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)e->r->qid;
	if (cmd == MFSD_FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	} else {
		req->commit_id = e->commit_id;
	}
	e->last_cmd = cmd;
	return true;
}

static void queue_evfd_read(struct ring *r)
{
	struct io_uring_sqe *sqe = get_sqe(r);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, r->evfd, &r->evbuf, sizeof(r->evbuf), 0);
	io_uring_sqe_set_data64(sqe, EVFD_TAG);
}

/* --- replies ------------------------------------------------------------------------------ */

void *mfsd_transport_reply_area(size_t size)
{
	return cur_ent && size <= cur_ent->r->tr->payload_sz ? cur_ent->payload : NULL;
}

/* The entry handling request @unique, if a ring carries it. */
static struct ring_ent *find_ent(struct uring_tr *tr, uint64_t unique)
{
	unsigned q, i;

	if (cur_ent && atomic_load_explicit(&cur_ent->unique, memory_order_relaxed) == unique)
		return cur_ent;
	for (q = 0; q < tr->nq; q++)
		for (i = 0; i < RING_DEPTH; i++)
			if (atomic_load(&tr->rings[q].ents[i].unique) == unique)
				return &tr->rings[q].ents[i];
	return NULL;
}

/* The reply is in the entry: commit it (from the ring's thread, or through it). */
static void commit(struct ring_ent *e)
{
	struct ring *r = e->r;
	uint64_t one = 1;

	if (e == cur_ent)
		cur_replied = true;
	atomic_store(&e->unique, 0); /* from here on the entry may carry the next request */
	if (atomic_load(&r->started) && pthread_equal(pthread_self(), r->self)) {
		queue_cmd(e, MFSD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
		return;
	}
	pthread_mutex_lock(&r->done_lock);
	e->next_done = r->done;
	r->done = e;
	pthread_mutex_unlock(&r->done_lock);
	if (write(r->evfd, &one, sizeof(one)) != sizeof(one))
		mfsd_log(LOG_ERR, "FUSE over io_uring: waking queue %u: %s", r->qid,
		         strerror(errno));
}

/*
 * Map the pages of a reply's source before copying them.  A read is often
 * answered straight from the image's mapping (the core's direct read), whose
 * pages this process has not touched yet: over /dev/fuse the kernel copies
 * them without faulting, but a copy here takes a page fault per 4 KiB, which
 * costs more than the copy (a first sequential read ran at 221 MB/s instead
 * of 2.1 GB/s).  One madvise(MADV_POPULATE_READ) maps them all; a single page
 * is left to its fault.
 */
static void prefault(const void *p, size_t len)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)4095;
	uintptr_t end = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;

	if (end - start > 4096)
		(void)madvise((void *)start, end - start, MADV_POPULATE_READ);
}

/* A reply libfuse wrote (iov[0] the out header) into the entry of a ring request. */
static ssize_t ring_reply(struct ring_ent *e, const struct iovec *iov, int count)
{
	struct fuse_out_header out;
	size_t len = 0;
	int i;

	if (iov[0].iov_len != sizeof(out)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&out, iov[0].iov_base, sizeof(out));
	for (i = 1; i < count; i++) {
		if (len + iov[i].iov_len > e->r->tr->payload_sz) {
			mfsd_log(LOG_ERR, "FUSE over io_uring: a reply of more than %zu bytes",
			         e->r->tr->payload_sz);
			out.error = -EIO;
			len = 0;
			break;
		}
		if (iov[i].iov_base != e->payload + len) {
			prefault(iov[i].iov_base, iov[i].iov_len);
			memcpy(e->payload + len, iov[i].iov_base, iov[i].iov_len);
		}
		len += iov[i].iov_len;
	}
	out.len = (uint32_t)(sizeof(out) + len);
	memcpy(e->hdr->in_out, &out, sizeof(out));
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)len;
	commit(e);
	return (ssize_t)(sizeof(out) + len);
}

static void reply_error(struct ring_ent *e, uint64_t unique, int error)
{
	struct fuse_out_header out = {.len = sizeof(out), .error = -error, .unique = unique};
	struct iovec iov = {.iov_base = &out, .iov_len = sizeof(out)};

	ring_reply(e, &iov, 1);
}

/* --- the session hooks (struct fuse_custom_io) -------------------------------------------- */

/* The INIT offer (killpriv.c decodes it): does the kernel offer FUSE over io_uring? */
static void uring_init_offer(const struct mfsd_init_offer *offer)
{
	if (the_tr)
		atomic_store(
		        &the_tr->init_offered,
		        offer->major == 7 && offer->minor >= MFSD_FUSE_OVER_IO_URING_MINOR &&
		                (offer->flags & (uint64_t)MFSD_FUSE_OVER_IO_URING_FLAG2 << 32));
}

static int alloc_entries(struct uring_tr *tr, size_t payload);

/* The INIT reply: grant FUSE over io_uring if offered and the entries could be made. */
static void uring_init_reply(void *init_out, size_t len)
{
	struct uring_tr *tr = the_tr;
	struct fuse_init_out *init = init_out;
	size_t payload;

	if (!tr || len < offsetof(struct fuse_init_out, flags2) + sizeof(init->flags2))
		return;
	if (!atomic_load(&tr->init_offered)) {
		log_fallback("not offered by the kernel (the fuse module's enable_uring is off, "
		             "or the kernel predates 6.14)");
		return;
	}
	/* the kernel's own rule for the payload of a ring entry */
	payload = init->max_write;
	if ((init->flags & FUSE_MAX_PAGES) && (size_t)init->max_pages * 4096 > payload)
		payload = (size_t)init->max_pages * 4096;
	if (payload < 8192)
		payload = 8192;
	if (alloc_entries(tr, payload)) {
		log_fallback("no memory for the ring entries");
		return;
	}
	init->flags |= MFSD_FUSE_INIT_EXT;
	init->flags2 |= MFSD_FUSE_OVER_IO_URING_FLAG2;
	atomic_store(&tr->granted, true);
}

static ssize_t uring_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct uring_tr *tr = the_tr;
	const struct fuse_out_header *out = iov[0].iov_base;
	struct ring_ent *e;
	ssize_t n;
	unsigned q;

	if (tr && iov[0].iov_len >= sizeof(*out) && out->unique) {
		e = atomic_load_explicit(&tr->live, memory_order_relaxed)
		            ? find_ent(tr, out->unique)
		            : NULL;
		if (e)
			return ring_reply(e, iov, count);
	}
	n = mfsd_killpriv_writev(fd, iov, count, userdata);
	if (tr && atomic_exchange(&tr->granted, false) && n >= 0) {
		atomic_store(&tr->live, true);
		for (q = 0; q < tr->nq; q++)
			sem_post(&tr->go); /* the kernel took the reply: register */
	}
	return n;
}

static const struct fuse_custom_io uring_io = {
        .read = mfsd_killpriv_read,
        .writev = uring_writev, /* ring replies; the rest through mfsd_killpriv_writev */
};

static const struct mfsd_init_hook uring_init_hook = {
        .offer = uring_init_offer,
        .reply = uring_init_reply,
};

/* --- dispatch ----------------------------------------------------------------------------- */

/* The fast path's replies (struct mfsd_reply_to): into the entry, committed. */
static ssize_t ring_send(void *ctx, const struct iovec *iov, int cnt)
{
	return ring_reply(ctx, iov, cnt);
}

static void run_request(struct ring_ent *e, void *buf, size_t len)
{
	struct mfsd_transport *t = e->r->tr->t;
	const struct mfsd_reply_to to = {.send = ring_send, .ctx = e};
	struct fuse_buf fb = {.size = len, .mem = buf};
	uint64_t unique = ((struct fuse_in_header *)buf)->unique;

	mfsd_killpriv_note(buf, len);
	cur_ent = e;
	cur_replied = false;
	if (!t->fast || !t->fast(t->fast_arg, buf, len, &to))
		fuse_session_process_buf(t->se, &fb);
	if (!cur_replied) {
		mfsd_log(LOG_ERR, "FUSE over io_uring: request %llu (opcode %u) had no reply",
		         (unsigned long long)unique, ((struct fuse_in_header *)buf)->opcode);
		reply_error(e, unique, EIO);
	}
	cur_ent = NULL;
}

struct slow_req {
	struct ring_ent *e;
	void *buf;
	size_t len;
	void (*run)(struct ring_ent *e, void *buf, size_t len); /* run_request, run_fsync */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* FSYNC or FSYNCDIR, its duration into the moving average (1/8 weight; races lose an update). */
static void run_fsync(struct ring_ent *e, void *buf, size_t len)
{
	struct uring_tr *tr = e->r->tr;
	uint64_t t0 = now_ns(), avg;

	run_request(e, buf, len);
	avg = atomic_load_explicit(&tr->fsync_ns, memory_order_relaxed);
	atomic_store_explicit(&tr->fsync_ns, avg - avg / 8 + (now_ns() - t0) / 8,
	                      memory_order_relaxed);
}

static void slow_run(void *arg)
{
	struct slow_req *s = arg;

	s->run(s->e, s->buf, s->len);
	free(s);
}

/*
 * A request that may wait: on another thread, @own one of its own, else the
 * pool's (its reply goes through the ring's thread).
 */
static void run_slow(struct ring_ent *e, void *buf, size_t len, bool own)
{
	struct slow_req *s = malloc(sizeof(*s));
	int ret = ENOMEM;

	if (s) {
		*s = (struct slow_req){
		        .e = e, .buf = buf, .len = len, .run = own ? run_request : run_fsync};
		ret = mfsd_offload_run(&e->r->tr->slow, slow_run, s, own);
		if (!ret)
			return;
		free(s);
	}
	mfsd_log(LOG_WARNING,
	         "FUSE over io_uring: no thread for a request that may wait (opcode %u): %s; "
	         "queue %u waits for it",
	         ((struct fuse_in_header *)buf)->opcode, strerror(ret), e->r->qid);
	run_request(e, buf, len);
}

/* A request arrived in @e: make it one buffer (headers in front of the payload) and run it. */
static void dispatch(struct ring_ent *e)
{
	struct fuse_in_header in;
	uint32_t plen = e->hdr->ring_ent_in_out.payload_sz;
	size_t oplen;
	char *buf;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	e->commit_id = e->hdr->ring_ent_in_out.commit_id;
	if (in.len < sizeof(in) + (size_t)plen || plen > e->r->tr->payload_sz ||
	    in.len - sizeof(in) - plen > MFSD_FUSE_URING_OP_IN_OUT_SZ) {
		mfsd_log(LOG_ERR, "FUSE over io_uring: malformed request (opcode %u, %u bytes)",
		         in.opcode, in.len);
		reply_error(e, in.unique, EIO);
		return;
	}
	oplen = in.len - sizeof(in) - plen;
	buf = e->payload - sizeof(in) - oplen;
	memcpy(buf, &in, sizeof(in));
	memcpy(buf + sizeof(in), e->hdr->op_in, oplen);
	atomic_store(&e->unique, in.unique);
	if (in.opcode == FUSE_IOCTL)
		run_slow(e, buf, in.len, true);
	else if ((in.opcode == FUSE_FSYNC || in.opcode == FUSE_FSYNCDIR) &&
	         atomic_load_explicit(&e->r->tr->fsync_ns, memory_order_relaxed) > FSYNC_ASIDE_NS)
		run_slow(e, buf, in.len, false);
	else if (in.opcode == FUSE_FSYNC || in.opcode == FUSE_FSYNCDIR)
		run_fsync(e, buf, in.len);
	else
		run_request(e, buf, in.len);
}

static void ring_done_list(struct ring *r)
{
	struct ring_ent *e, *next;

	pthread_mutex_lock(&r->done_lock);
	e = r->done;
	r->done = NULL;
	pthread_mutex_unlock(&r->done_lock);
	for (; e; e = next) {
		next = e->next_done;
		queue_cmd(e, MFSD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
	}
}

/* The kernel refused to register an entry (@res): counted for registration_outcome. */
static void register_refused(struct ring *r, int res)
{
	if (!atomic_load_explicit(&r->refused, memory_order_relaxed))
		r->refused_err = -res;
	atomic_fetch_add(&r->refused, 1);
}

/* One completion: a request, an entry ended, or the eventfd.  Returns false to stop. */
static bool completion(struct ring *r, struct io_uring_cqe *cqe)
{
	struct uring_tr *tr = r->tr;
	struct ring_ent *e;
	int res = cqe->res;

	if (cqe->user_data == EVFD_TAG) {
		if (atomic_load(&tr->stop))
			return false;
		queue_evfd_read(r);
		return true;
	}
	e = io_uring_cqe_get_data(cqe);
	if (res == 0) {
		/* once: a store per request would bounce the line between the rings */
		if (tr->t->tstats &&
		    atomic_load_explicit(&tr->t->tstats->kind, memory_order_relaxed) !=
		            MFSD_TRANSPORT_IO_URING)
			atomic_store_explicit(&tr->t->tstats->kind, MFSD_TRANSPORT_IO_URING,
			                      memory_order_relaxed);
		/* the ring's own count, no locked add: only this thread writes it */
		atomic_store_explicit(&r->requests,
		                      atomic_load_explicit(&r->requests, memory_order_relaxed) + 1,
		                      memory_order_relaxed);
		dispatch(e);
		return true;
	}
	if (res == -EAGAIN || res == -EINTR) {
		queue_cmd(e, e->last_cmd);
		return true;
	}
	/* the entry is gone (the connection ended, or the kernel refused it) */
	if (e->last_cmd == MFSD_FUSE_IO_URING_CMD_REGISTER && res != -ENOTCONN &&
	    res != -ECONNABORTED) {
		register_refused(r, res);
	} else if (res != -ENOTCONN && res != -ECONNABORTED && res != -ECANCELED) {
		mfsd_log(LOG_ERR, "FUSE over io_uring: queue %u: %s", r->qid, strerror(-res));
	}
	return true;
}

/* The completions there are; false when the thread is to stop. */
static bool reap(struct ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	bool go = true;

	io_uring_for_each_cqe(&r->ring, head, cqe)
	{
		n++;
		if (!completion(r, cqe)) {
			go = false;
			break;
		}
	}
	io_uring_cq_advance(&r->ring, n);
	ring_done_list(r);
	return go;
}

/*
 * Make the kernel give up on the rings: a REGISTER it refuses (no iovecs)
 * turns io_uring off for the connection (Linux 6.18 fuse_uring_cmd:
 * fc->io_uring = 0) and wakes the requests it held for the rings, which then
 * go through /dev/fuse.  Sent for queue @qid on the control ring: a queue
 * that could not register may have no usable ring of its own.  0 once the
 * kernel refused it.
 */
static int kernel_fall_back(struct uring_tr *tr, unsigned qid)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&tr->ctl);
	struct io_uring_cqe *cqe;
	int ret;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* 128-byte entries; addr 0, len 0 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = tr->fuse_fd;
	sqe->cmd_op = MFSD_FUSE_IO_URING_CMD_REGISTER;
	((struct mfsd_fuse_uring_cmd_req *)sqe->cmd)->qid = (uint16_t)qid;
	ret = io_uring_submit(&tr->ctl);
	if (ret < 0)
		return ret;
	while ((ret = io_uring_wait_cqe(&tr->ctl, &cqe)) == -EINTR)
		;
	if (ret)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(&tr->ctl, cqe);
	return ret < 0 ? 0 : -EPROTO;
}

/*
 * Every queue has submitted its REGISTERs (or failed to): say what came of
 * it, once.  The kernel refuses a REGISTER as it is submitted, so a queue's
 * refusals were among its first completions.  The kernel switches to the
 * rings only once every queue has an entry; a refusal turns io_uring off for
 * the connection, so that the requests held for the rings go through
 * /dev/fuse.  A queue left without an entry (every one refused, or its
 * REGISTERs never submitted) means /dev/fuse for good, and the kernel is made
 * to fall back if no refusal did it already.  Refusals that leave every queue
 * an entry do not stop the switch: the rings carry the requests all the same.
 */
static void registration_outcome(struct uring_tr *tr)
{
	unsigned q, entries = tr->nq * RING_DEPTH, refused = 0, empty = 0, first_empty = 0;
	const struct ring *failed = NULL;
	char why[200], left[64];
	int err = 0, ret;

	for (q = 0; q < tr->nq; q++) {
		const struct ring *r = &tr->rings[q];
		unsigned n = atomic_load(&r->refused);

		if (n && !err)
			err = r->refused_err;
		refused += n;
		if (r->fail_err && !failed)
			failed = r;
		if ((r->fail_err || n + r->unsent >= RING_DEPTH) && !empty++)
			first_empty = q;
	}
	if (!empty) {
		if (refused)
			mfsd_log(LOG_WARNING,
			         "FUSE over io_uring: the kernel refused the registration of %u of "
			         "%u entries (%s); every queue has others, and the rings carry "
			         "the requests",
			         refused, entries, strerror(err));
		return;
	}
	atomic_store(&tr->live, false); /* no ring request will come */
	if (empty == 1)
		snprintf(left, sizeof(left), "queue %u", first_empty);
	else
		snprintf(left, sizeof(left), "%u queues", empty);
	if (failed)
		snprintf(why, sizeof(why), "queue %u could not submit its registration (%s)",
		         failed->qid, strerror(failed->fail_err));
	else if (refused == entries)
		snprintf(why, sizeof(why),
		         "the kernel refused the registration of every entry (%s)", strerror(err));
	else
		snprintf(why, sizeof(why),
		         "the kernel refused the registration of %u of %u entries (%s), "
		         "which left %s without any",
		         refused, entries, strerror(err), left);
	log_fallback(why);
	if (refused)
		return; /* the kernel has fallen back */
	ret = kernel_fall_back(tr, first_empty);
	if (ret) {
		/* the mount would wait for that queue for ever: end it instead */
		mfsd_log(LOG_ERR,
		         "FUSE over io_uring: the kernel would not fall back to /dev/fuse (%s): "
		         "stopping",
		         strerror(-ret));
		kill(getpid(), SIGTERM);
	}
}

/* @r has submitted its REGISTERs, or failed to: the last queue to say so judges. */
static void registration_reported(struct ring *r)
{
	struct uring_tr *tr = r->tr;

	if (atomic_fetch_add(&tr->reported, 1) + 1 == tr->nq && !atomic_load(&tr->stop))
		registration_outcome(tr);
}

/* Hand the kernel the ring's entries.  0, or -errno when none could be submitted. */
static int register_entries(struct ring *r)
{
	unsigned i, tries = 0;
	int ret;

	for (i = 0; i < RING_DEPTH; i++)
		if (!queue_cmd(&r->ents[i], MFSD_FUSE_IO_URING_CMD_REGISTER))
			r->unsent++;
	if (r->unsent == RING_DEPTH)
		return -EBUSY;
	queue_evfd_read(r);
	if (mfsd_uring_fails_at(URING_FAIL_REGISTER, r->qid))
		return -ENOMEM; /* as io_uring_enter may fail; nothing was submitted */
	for (;;) {
		ret = io_uring_submit(&r->ring);
		if (ret == -EINTR)
			continue;
		if ((ret == -EAGAIN || ret == -EBUSY) && ++tries < 100) {
			usleep(1000);
			continue;
		}
		return ret < 0 ? ret : 0;
	}
}

/*
 * After its registration a queue's ring could not wait for requests any more.
 * Its entries stay registered: the kernel keeps sending it the requests of
 * its CPU, which nobody would answer, and every process that made one would
 * wait for ever.  Stop instead (a clean unmount: the journal committed, the
 * data fsync'ed so far safe), loudly.
 */
#define WAIT_RETRIES 1000 /* ENOMEM, 1 ms apart */
static void ring_lost(struct ring *r, int err)
{
	if (atomic_load(&r->tr->stop))
		return;
	mfsd_log(LOG_ERR,
	         "FUSE over io_uring: queue %u cannot wait for requests (%s): stopping, as its "
	         "requests would go unanswered",
	         r->qid, strerror(-err));
	kill(getpid(), SIGTERM);
}

static void *ring_thread(void *arg)
{
	struct ring *r = arg;
	struct uring_tr *tr = r->tr;
	unsigned tries = 0;
	bool go;
	int ret;

	r->self = pthread_self();
	atomic_store(&r->started, true);
	while (sem_wait(&tr->go) && errno == EINTR)
		;
	if (atomic_load(&tr->stop))
		return NULL;
	ret = register_entries(r);
	if (ret) {
		r->fail_err = -ret;
		registration_reported(r);
		return NULL; /* its ring is closed at the teardown */
	}
	go = reap(r); /* the refusals, and maybe a first request */
	registration_reported(r);
	while (go) {
		ret = io_uring_submit_and_wait(&r->ring, 1);
		if (mfsd_uring_fails_at(URING_FAIL_WAIT, r->qid) &&
		    atomic_load_explicit(&r->requests, memory_order_relaxed) >= 64)
			ret = -EIO;
		if (ret == -ENOMEM && ++tries < WAIT_RETRIES) {
			usleep(1000); /* memory for the submission may come back */
			continue;
		}
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			ring_lost(r, ret);
			break;
		}
		tries = 0;
		go = reap(r);
	}
	return NULL;
}

/* --- set-up and teardown ------------------------------------------------------------------ */

static int alloc_entries(struct uring_tr *tr, size_t payload)
{
	size_t per = HDR_AREA + ((payload + 4095) & ~(size_t)4095);
	unsigned q, i;
	char *p;

	tr->mem_sz = per * RING_DEPTH * tr->nq;
	tr->mem =
	        mmap(NULL, tr->mem_sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tr->mem == MAP_FAILED) {
		tr->mem = NULL;
		return -ENOMEM;
	}
	tr->payload_sz = payload;
	p = tr->mem;
	for (q = 0; q < tr->nq; q++)
		for (i = 0; i < RING_DEPTH; i++, p += per) {
			struct ring_ent *e = &tr->rings[q].ents[i];

			e->hdr = (void *)p;
			e->payload = p + HDR_AREA;
			e->iov[0] = (struct iovec){.iov_base = e->hdr, .iov_len = sizeof(*e->hdr)};
			if (mfsd_uring_bad_entry(q, i, RING_DEPTH))
				e->iov[0].iov_len--;
			e->iov[1] = (struct iovec){.iov_base = e->payload, .iov_len = payload};
		}
	return 0;
}

static void uring_teardown(struct uring_tr *tr)
{
	unsigned q;

	for (q = 0; q < tr->nq; q++) {
		struct ring *r = &tr->rings[q];

		if (r->ring_ok)
			io_uring_queue_exit(&r->ring);
		if (r->evfd >= 0)
			close(r->evfd);
		pthread_mutex_destroy(&r->done_lock);
	}
	if (tr->ctl_ok)
		io_uring_queue_exit(&tr->ctl);
	if (tr->mem)
		munmap(tr->mem, tr->mem_sz);
	sem_destroy(&tr->go);
	if (tr->slow_ok)
		mfsd_offload_destroy(&tr->slow);
	free(tr->rings);
	free(tr);
}

static int ring_init(struct uring_tr *tr, struct ring *r, unsigned qid)
{
	struct io_uring_params p = {0};
	unsigned i;
	int ret;

	r->tr = tr;
	r->qid = qid;
	for (i = 0; i < RING_DEPTH; i++)
		r->ents[i].r = r;
	if (mfsd_uring_fails_at(URING_FAIL_RING, qid))
		return -ENOMEM;
	r->evfd = eventfd(0, EFD_CLOEXEC);
	if (r->evfd < 0)
		return -errno;
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
	p.cq_entries = 4 * (RING_DEPTH + 1);
	ret = io_uring_queue_init_params(2 * (RING_DEPTH + 1), &r->ring, &p);
	if (ret)
		return ret;
	r->ring_ok = true;
	ret = io_uring_register_files(&r->ring, &tr->fuse_fd, 1);
	return ret < 0 ? ret : 0;
}

unsigned mfsd_uring_nr_queues(void)
{
	char buf[256];
	ssize_t n = -1;
	int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
	const char *last;

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0)
		return (unsigned)get_nprocs_conf();
	buf[n] = 0;
	last = buf + strcspn(buf, "\n");
	while (last > buf && (last[-1] >= '0' && last[-1] <= '9'))
		last--;
	return (unsigned)strtoul(last, NULL, 10) + 1;
}

static int uring_start(struct mfsd_transport *t)
{
	struct uring_tr *tr = calloc(1, sizeof(*tr));
	char why[128] = "";
	unsigned q;
	int ret;

	if (!tr)
		return -ENOMEM;
	tr->t = t;
	tr->fuse_fd = fuse_session_fd(t->se);
	tr->nq = mfsd_uring_nr_queues();
	mfsd_uring_hooks_read();
	sem_init(&tr->go, 0, 0);
	tr->rings = calloc(tr->nq, sizeof(*tr->rings));
	if (!tr->rings || mfsd_offload_init(&tr->slow, SLOW_POOL)) {
		free(tr->rings);
		free(tr);
		return -ENOMEM;
	}
	tr->slow_ok = true;
	atomic_init(&tr->fsync_ns, 1000000u);
	for (q = 0; q < tr->nq; q++) {
		tr->rings[q].evfd = -1;
		pthread_mutex_init(&tr->rings[q].done_lock, NULL);
	}
	ret = io_uring_queue_init(2, &tr->ctl, IORING_SETUP_SQE128);
	tr->ctl_ok = !ret;
	if (ret)
		snprintf(why, sizeof(why), "cannot set up the control ring (%s)", strerror(-ret));
	for (q = 0; q < tr->nq && !ret; q++)
		if ((ret = ring_init(tr, &tr->rings[q], q)))
			snprintf(why, sizeof(why), "cannot set up the ring of queue %u (%s)", q,
			         strerror(-ret));
	for (q = 0; q < tr->nq && !ret; q++) {
		ret = mfsd_uring_fails_at(URING_FAIL_THREAD, q)
		              ? -EAGAIN
		              : -pthread_create(&tr->rings[q].th, NULL, ring_thread, &tr->rings[q]);
		tr->rings[q].th_ok = !ret;
		if (ret)
			snprintf(why, sizeof(why), "cannot start the thread of queue %u (%s)", q,
			         strerror(-ret));
	}
	if (ret) {
		atomic_store(&tr->stop, true);
		for (q = 0; q < tr->nq; q++)
			sem_post(&tr->go);
		for (q = 0; q < tr->nq; q++)
			if (tr->rings[q].th_ok)
				pthread_join(tr->rings[q].th, NULL);
		uring_teardown(tr);
		log_fallback(why);
		return mfsd_transport_dev.start(t);
	}
	t->priv = tr;
	the_tr = tr;
	mfsd_killpriv_want(t->killpriv_v2);
	mfsd_init_hook_set(&uring_init_hook);
	return fuse_session_custom_io(t->se, &uring_io, tr->fuse_fd);
}

static void uring_stop(struct mfsd_transport *t)
{
	struct uring_tr *tr = t->priv;
	uint64_t one = 1;
	unsigned q;

	if (!tr)
		return;
	atomic_store(&tr->stop, true);
	for (q = 0; q < tr->nq; q++) {
		sem_post(&tr->go);
		if (write(tr->rings[q].evfd, &one, sizeof(one)) != sizeof(one))
			mfsd_log(LOG_ERR, "FUSE over io_uring: stopping queue %u: %s", q,
			         strerror(errno));
	}
	for (q = 0; q < tr->nq; q++)
		pthread_join(tr->rings[q].th, NULL);
	/* the requests still running elsewhere reply through the_tr's hooks */
	mfsd_offload_destroy(&tr->slow);
	tr->slow_ok = false;
	mfsd_init_hook_set(NULL);
	the_tr = NULL;
	uring_teardown(tr);
	t->priv = NULL;
}

/* The rings' counts summed (for mendctl stats, while the transport runs). */
static uint64_t uring_ring_requests(struct mfsd_transport *t)
{
	struct uring_tr *tr = t->priv; /* NULL when start fell back to /dev/fuse */
	uint64_t n = 0;
	unsigned q;

	for (q = 0; tr && q < tr->nq; q++)
		n += atomic_load_explicit(&tr->rings[q].requests, memory_order_relaxed);
	return n;
}

const struct mfsd_transport_ops mfsd_transport_uring = {
        .name = "io_uring",
        .start = uring_start,
        .loop = mfsd_dev_loop, /* /dev/fuse still carries INIT, FORGET, INTERRUPT */
        .stop = uring_stop,
        .ring_requests = uring_ring_requests,
};
