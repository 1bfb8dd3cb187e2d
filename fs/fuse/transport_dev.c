/* SPDX-License-Identifier: MIT */
/*
 * The /dev/fuse transport (transport.h): a pool of worker threads reading
 * the session's /dev/fuse descriptor through the hooks of killpriv.c (custom
 * I/O), one descriptor shared by every worker (no clone_fd).  Each request
 * goes to the daemon's fast path first (WRITE and READ of an open file,
 * fastpath.c), which answers it with one writev(2) of its own; the rest to
 * libfuse's request processing (fuse_session_process_buf).
 *
 * The pool is libfuse's multithreaded loop (fuse_loop_mt.c) done again, so
 * that the fast path can run in it: libfuse's loop hands every request to
 * libfuse.  It grows the same way: one worker at first, and a new one
 * whenever the last idle worker takes a request (FORGETs excepted), up to
 * -o threads; workers never exit before the session ends.  Signals (SIGTERM,
 * SIGINT, SIGHUP, SIGQUIT) are blocked in the workers, so that the handlers
 * fuse_set_signal_handlers installed run on the main thread and wake it from
 * its wait.  The session ends when a worker reads ENODEV (unmount, an
 * aborted connection) or an error, or a signal handler calls
 * fuse_session_exit; the main thread then cancels the workers, which accept
 * cancellation only while they wait in read(2), never while they handle a
 * request, and joins them.
 *
 * Calls libfuse, killpriv.c, the fast path and the daemon's log.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <syslog.h>

#include "daemon.h"
#include "killpriv.h"
#include "transport.h"

static const struct fuse_custom_io dev_io = {
        .read = mfsd_killpriv_read,
        .writev = mfsd_killpriv_writev,
};

static int dev_start(struct mfsd_transport *t)
{
	if (t->tstats)
		atomic_store(&t->tstats->kind, MFSD_TRANSPORT_DEV_FUSE);
	mfsd_killpriv_want(t->killpriv_v2);
	return fuse_session_custom_io(t->se, &dev_io, fuse_session_fd(t->se));
}

struct dev_pool;

struct dev_worker {
	struct dev_pool *pool;
	pthread_t thread;
	struct fuse_buf fb; /* the request buffer, made by the first receive */
	/*
	 * Here, not on dev_worker's stack: a worker blocked in its receive is
	 * cancelled at the end (mfsd_dev_loop), and the unwinding skips the
	 * epilogue that would clear an addressable local's AddressSanitizer
	 * redzones; the stale ones then fail the thread's own teardown under
	 * ASan.  dev_worker keeps no local whose address it takes.
	 */
	struct mfsd_reply_to to;
	struct dev_worker *next;
};

struct dev_pool {
	struct mfsd_transport *t;
	pthread_mutex_t lock;       /* workers, nworkers, ending */
	struct dev_worker *workers; /* every worker started, until joined */
	_Atomic unsigned nworkers;  /* written under the lock */
	unsigned max;
	bool ending;       /* the main thread is cancelling the workers */
	_Atomic int idle;  /* workers waiting for a request */
	sem_t finish;      /* posted by a worker that saw the session end */
	_Atomic int error; /* -errno of a failed read, else 0 */
};

/* The fast path's replies: one writev(2) of /dev/fuse, as libfuse sends its own. */
static ssize_t dev_send(void *ctx, const struct iovec *iov, int cnt)
{
	struct dev_pool *pool = ctx;
	ssize_t n = writev(fuse_session_fd(pool->t->se), iov, cnt);

	/* ENOENT: the request was interrupted or aborted, nobody waits for the reply */
	if (n < 0 && errno != ENOENT && !fuse_session_exited(pool->t->se))
		mfsd_log(LOG_ERR, "writing /dev/fuse: %s", strerror(errno));
	return n;
}

static bool is_forget(const struct fuse_buf *fb)
{
	const struct fuse_in_header *in = fb->mem;

	return in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET;
}

static void start_worker(struct dev_pool *pool);

static void *dev_worker(void *arg)
{
	struct dev_worker *w = arg;
	struct dev_pool *pool = w->pool;
	struct mfsd_transport *t = pool->t;
	bool forget;
	int res;

	while (!fuse_session_exited(t->se)) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		res = fuse_session_receive_buf(t->se, &w->fb);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR)
			continue;
		if (res <= 0) {
			if (res < 0) { /* 0: unmounted, aborted or exited */
				atomic_store(&pool->error, res);
				fuse_session_exit(t->se);
			}
			break;
		}
		/* a burst of FORGETs must not make a worker each (libfuse's rule) */
		forget = is_forget(&w->fb);
		if (!forget && atomic_fetch_sub(&pool->idle, 1) == 1)
			start_worker(pool);
		if (!t->fast || !t->fast(t->fast_arg, w->fb.mem, w->fb.size, &w->to))
			fuse_session_process_buf(t->se, &w->fb);
		if (!forget)
			atomic_fetch_add(&pool->idle, 1);
	}
	sem_post(&pool->finish);
	return NULL;
}

/* One more worker, if the pool may grow (errors only logged: the others go on). */
static void start_worker(struct dev_pool *pool)
{
	struct dev_worker *w;
	sigset_t block, old;
	int ret;

	if (atomic_load_explicit(&pool->nworkers, memory_order_relaxed) >= pool->max)
		return; /* the usual answer once the pool is full: no lock */
	pthread_mutex_lock(&pool->lock);
	if (pool->ending || pool->nworkers >= pool->max) {
		pthread_mutex_unlock(&pool->lock);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		ret = ENOMEM;
		goto fail;
	}
	w->pool = pool;
	w->to = (struct mfsd_reply_to){.send = dev_send, .ctx = pool};
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	atomic_fetch_add(&pool->idle, 1); /* before it runs: no second start for the same need */
	ret = pthread_create(&w->thread, NULL, dev_worker, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		atomic_fetch_sub(&pool->idle, 1);
		free(w);
		goto fail;
	}
	w->next = pool->workers;
	pool->workers = w;
	pool->nworkers++;
	pthread_mutex_unlock(&pool->lock);
	return;
fail:
	pthread_mutex_unlock(&pool->lock);
	mfsd_log(LOG_WARNING, "cannot start a worker thread: %s", strerror(ret));
}

int mfsd_dev_loop(struct mfsd_transport *t)
{
	struct dev_pool pool = {.t = t, .max = t->threads ? t->threads : MFSD_DEFAULT_THREADS};
	struct dev_worker *w;
	int ret;

	pthread_mutex_init(&pool.lock, NULL);
	sem_init(&pool.finish, 0, 0);
	start_worker(&pool);
	if (!pool.nworkers) {
		ret = -EAGAIN;
		goto out;
	}
	/* sem_wait returns EINTR when a signal handler ran on this thread */
	while (!fuse_session_exited(t->se))
		sem_wait(&pool.finish);

	pthread_mutex_lock(&pool.lock);
	pool.ending = true;
	for (w = pool.workers; w; w = w->next)
		pthread_cancel(w->thread);
	pthread_mutex_unlock(&pool.lock);
	while ((w = pool.workers)) {
		pool.workers = w->next;
		pthread_join(w->thread, NULL);
		free(w->fb.mem);
		free(w);
	}
	ret = atomic_load(&pool.error);
out:
	sem_destroy(&pool.finish);
	pthread_mutex_destroy(&pool.lock);
	fuse_session_reset(t->se);
	if (ret < 0)
		mfsd_log(LOG_ERR, "session loop: %s", strerror(-ret));
	return ret < 0 ? ret : 0;
}

static void dev_stop(struct mfsd_transport *t)
{
	(void)t; /* the session owns the hooks and the descriptor */
}

const struct mfsd_transport_ops mfsd_transport_dev = {
        .name = "dev",
        .start = dev_start,
        .loop = mfsd_dev_loop,
        .stop = dev_stop,
};
