/* SPDX-License-Identifier: MIT */
/*
 * MENDFS_IOC_SCRUB: check the struct, run one step of the core's scrub
 * (mfs_scrub_step) and answer with the new cursor and the step's counts.
 *
 * The daemon keeps the cursor of the last step it answered (one daemon, one
 * filesystem): MENDFS_SCRUB_RESUME continues from there, so that an
 * interrupted `mendctl scrub` can be resumed by `mendctl scrub --resume`.
 * It lives as long as the mount (a remount keeps it, an unmount forgets it):
 * a scrub is cheap to start over, and a cursor on disk would outlive the
 * layout it points into only if the filesystem grew, which it may.
 *
 * One scrub at a time: the cursor belongs to the process whose step the
 * daemon answered last (its thread group, from the request's pid), from its
 * first step until it reaches the end.  A step from another process while
 * that one lives and stepped within MFS_SCRUB_OWNER_IDLE_S answers -EBUSY
 * (mendctl: exit 16), instead of two scrubs moving one cursor and each
 * reporting half a scrub.  An owner that exited (an interrupted `mendctl
 * scrub`) or went idle gives the cursor up: the next scrub, or --resume,
 * takes it.  The rule is the core's (mfs_scrub_owner_claim, unit-tested in
 * tests/unit/test_scrub.c); the daemon names the processes.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "ioctl_scrub.h"
#include "mendfs/ioctl.h"
#include "mfs_scrub.h"

static pthread_mutex_t saved_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mfs_scrub_cursor saved = {MFS_SCRUB_PHASE_DONE, 0}; /* saved_lock */
static struct mfs_scrub_owner owner;                              /* saved_lock */

/* The thread group of thread @tid (the request's pid is the caller's thread). */
static pid_t tgid_of(pid_t tid)
{
	char path[64], line[128];
	pid_t tgid = tid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return tid;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Tgid:", 5)) {
			tgid = (pid_t)atoi(line + 5);
			break;
		}
	fclose(f);
	return tgid > 0 ? tgid : tid;
}

static time_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* Does process @pid live?  (one of another user's: EPERM) */
static bool pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

_Static_assert(MENDFS_SCRUB_META == MFS_SCRUB_PHASE_META &&
                       MENDFS_SCRUB_DATA == MFS_SCRUB_PHASE_DATA &&
                       MENDFS_SCRUB_DONE == MFS_SCRUB_PHASE_DONE,
               "the ioctl's phases are the core's");

int mfsd_ioc_scrub(struct mfsd *d, fuse_req_t req, void *arg)
{
	struct mendfs_ioc_scrub *a = arg;
	struct mfs_scrub_counts c;
	struct mfs_scrub_cursor cur;
	struct mfs_scrub_owner prev;
	pid_t pid;
	int ret;

	if (fuse_req_ctx(req)->uid != 0)
		return -EPERM;
	if (a->version != MENDFS_IOC_VERSION || (a->flags & ~MENDFS_SCRUB_RESUME) ||
	    a->reserved[0] || a->reserved[1] || a->reserved[2] || a->phase > MENDFS_SCRUB_DONE ||
	    a->meta_budget > MENDFS_SCRUB_META_MAX || a->data_budget > MENDFS_SCRUB_DATA_MAX)
		return -EINVAL;
	/* -1: a caller outside the daemon's pid namespace, only the idle time tells */
	pid = fuse_req_ctx(req)->pid > 0 ? tgid_of(fuse_req_ctx(req)->pid) : -1;
	cur.phase = a->phase;
	cur.pos = a->pos;
	pthread_mutex_lock(&saved_lock);
	if (mfs_scrub_owner_claim(&owner, pid, mono_s(), pid_alive, &prev)) {
		pthread_mutex_unlock(&saved_lock);
		return -EBUSY;
	}
	if (a->flags & MENDFS_SCRUB_RESUME) {
		cur = saved;
		if (cur.phase == MFS_SCRUB_PHASE_DONE)
			cur = (struct mfs_scrub_cursor){MFS_SCRUB_PHASE_META, 0};
	}
	pthread_mutex_unlock(&saved_lock);
	memset(&c, 0, sizeof(c));
	ret = mfs_scrub_step(d->fs, &cur, a->meta_budget, a->data_budget, &c);
	if (c.refresh_err)
		mfsd_log(LOG_WARNING, "scrub: re-reading the badblocks sources: %s (going on)",
		         strerror(-c.refresh_err));
	if (ret) {
		if (ret != -EINVAL)
			mfsd_log(LOG_ERR, "scrub: %s", strerror(-ret));
		pthread_mutex_lock(&saved_lock);
		mfs_scrub_owner_undo(&owner, pid, &prev); /* a failed step claims nothing */
		pthread_mutex_unlock(&saved_lock);
		return ret;
	}
	pthread_mutex_lock(&saved_lock);
	saved = cur;
	/* finished: the next scrub may start */
	mfs_scrub_owner_stepped(&owner, pid, cur.phase == MFS_SCRUB_PHASE_DONE, mono_s());
	pthread_mutex_unlock(&saved_lock);
	if (c.meta_healed || c.meta_lost || c.poison_found || c.csum_found)
		mfsd_log(LOG_NOTICE,
		         "scrub: %llu metadata block(s) healed, %llu lost, %llu new poison "
		         "sector(s), %llu sector(s) failing their checksum",
		         (unsigned long long)c.meta_healed, (unsigned long long)c.meta_lost,
		         (unsigned long long)c.poison_found, (unsigned long long)c.csum_found);
	a->phase = cur.phase;
	a->pos = cur.pos;
	a->done = cur.phase == MFS_SCRUB_PHASE_DONE;
	a->meta_checked = c.meta_checked;
	a->meta_healed = c.meta_healed;
	a->meta_lost = c.meta_lost;
	a->meta_bad = c.meta_bad;
	a->meta_skipped = c.meta_skipped;
	a->data_bytes = c.data_bytes;
	a->poison_found = c.poison_found;
	a->csum_found = c.csum_found;
	a->meta_total = le64toh(d->fs->sb.meta_len);
	a->data_total = le64toh(d->fs->sb.data_len);
	return 0;
}
