/* SPDX-License-Identifier: MIT */
/*
 * The periodic commit (-o commit=SECONDS, commit_thread.c): a thread that
 * commits the running transaction every interval, like ext4's commit=, so
 * that what was written without fsync is durable within about that long.
 * Started and stopped by main; calls the core.
 */
#ifndef MENDFS_COMMIT_THREAD_H
#define MENDFS_COMMIT_THREAD_H

#include <pthread.h>
#include <stdbool.h>

struct mfs;

struct mfsd_commit {
	struct mfs *fs;
	unsigned interval; /* seconds */
	pthread_t thread;
	bool started, stop;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
};

/*
 * Commit @fs every @interval seconds from now on; 0: never (only fsync,
 * sync, a full journal and unmount commit).  A thread that cannot start is
 * a warning, not an error.
 */
void mfsd_commit_start(struct mfsd_commit *c, struct mfs *fs, unsigned interval);

/* Stop the thread, if started, and wait for it. */
void mfsd_commit_stop(struct mfsd_commit *c);

#endif
