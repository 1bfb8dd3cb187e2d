/* SPDX-License-Identifier: MIT */
/*
 * The periodic commit thread (see commit_thread.h).  Calls the core
 * (mfs_atime_flush, mfs_txn_commit) and the daemon's log.
 */
#include <errno.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "daemon.h"
#include "atime.h"

/* A commit with nothing to do costs two uncontended locks. */
static void *commit_main(void *arg)
{
	struct mfsd_commit *c = arg;
	int last_err = 0;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		struct timespec ts;
		int ret;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += c->interval;
		while (!c->stop && pthread_cond_timedwait(&c->cond, &c->lock, &ts) != ETIMEDOUT)
			;
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->lock);
		mfs_atime_flush(c->fs); /* lazy atimes join the commit (failures are logged) */
		ret = mfs_txn_commit(c->fs);
		if (ret && ret != last_err)
			mfsd_log(LOG_ERR, "periodic journal commit failed: %s", strerror(-ret));
		last_err = ret;
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

void mfsd_commit_start(struct mfsd_commit *c, struct mfs *fs, unsigned interval)
{
	pthread_condattr_t ca;
	int ret;

	if (!interval)
		return;
	c->fs = fs;
	c->interval = interval;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&c->thread, NULL, commit_main, c);
	if (ret) {
		mfsd_log(LOG_WARNING, "no periodic commit: %s", strerror(ret));
		return;
	}
	c->started = true;
}

void mfsd_commit_stop(struct mfsd_commit *c)
{
	if (!c->started)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	c->started = false;
}
