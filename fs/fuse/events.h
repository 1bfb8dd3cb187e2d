/* SPDX-License-Identifier: MIT */
/*
 * Damage events in the daemon (events.c; docs/RECOVERY.md): a thread that
 * writes each new event of the core's ring (mfs_events.h) to the daemon's
 * log once, rate-limited, and the MENDFS_IOC_EVENTS translator.  Started and
 * stopped by main; calls the core and the daemon's log.
 */
#ifndef MENDFS_FUSE_EVENTS_H
#define MENDFS_FUSE_EVENTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

struct mfs;
struct mendfs_ioc_events;

/* Log lines per second for damage; more are counted and summed up once a second. */
#define MFSD_EVLOG_PER_SEC 20u

struct mfsd_evlog {
	struct mfs *fs;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
};

/* Log every damage event of @fs from now on; a thread that cannot start is a warning. */
void mfsd_evlog_start(struct mfsd_evlog *l, struct mfs *fs);

/* Wake every reader of the ring (a waiting ioctl returns), stop the thread, wait for it. */
void mfsd_evlog_stop(struct mfsd_evlog *l);

/*
 * MENDFS_IOC_EVENTS, its header already checked: root only (@uid), waits at
 * most a->wait_ms (EINVAL above MENDFS_EV_WAIT_MAX).  Returns 0 or -errno.
 */
int mfsd_ioc_events(struct mfs *fs, uid_t uid, struct mendfs_ioc_events *a);

#endif
