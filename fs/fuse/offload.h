/* SPDX-License-Identifier: MIT */
/*
 * Work that may wait, run off the thread that received it (offload.c): the
 * FUSE-over-io_uring transport's requests that must not hold up their
 * queue.  A pool of threads, made when work finds none idle (up to a
 * bound) and kept until the end, for work that waits but ends soon (fsync:
 * a journal commit); a thread of its own for work that may wait for long
 * (an ioctl waiting for a damage event, a scrub).
 */
#ifndef MFSD_OFFLOAD_H
#define MFSD_OFFLOAD_H

#include <pthread.h>
#include <stdbool.h>

struct mfsd_offload_work;

struct mfsd_offload {
	pthread_mutex_t lock;
	pthread_cond_t work;                   /* work queued, or stop */
	pthread_cond_t gone;                   /* a thread ended */
	struct mfsd_offload_work *head, *tail; /* the pool's queue */
	unsigned threads;                      /* running: the pool's and the own ones */
	unsigned pool, idle;                   /* the pool's threads, and those waiting for work */
	unsigned max;                          /* the pool's bound */
	bool stop;
};

/* 0 or -errno; @max (>= 1) bounds the pool. */
int mfsd_offload_init(struct mfsd_offload *o, unsigned max);
/*
 * Run fn(arg) on another thread: one of the pool's (queued in order when
 * every one is busy and the pool is full), or with @own a thread of its
 * own.  0, or a positive errno when no thread could be had (the caller then
 * runs it itself).
 */
int mfsd_offload_run(struct mfsd_offload *o, void (*fn)(void *), void *arg, bool own);
/* Let the queued work run, wait until every thread has ended, free what init made. */
void mfsd_offload_destroy(struct mfsd_offload *o);

#endif
