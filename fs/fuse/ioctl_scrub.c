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
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <syslog.h>

#include "ioctl_scrub.h"
#include "mendfs/ioctl.h"
#include "mfs_scrub.h"

static pthread_mutex_t saved_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mfs_scrub_cursor saved = {MFS_SCRUB_PHASE_DONE, 0}; /* saved_lock */

_Static_assert(MENDFS_SCRUB_META == MFS_SCRUB_PHASE_META &&
                       MENDFS_SCRUB_DATA == MFS_SCRUB_PHASE_DATA &&
                       MENDFS_SCRUB_DONE == MFS_SCRUB_PHASE_DONE,
               "the ioctl's phases are the core's");

int mfsd_ioc_scrub(struct mfsd *d, fuse_req_t req, void *arg)
{
	struct mendfs_ioc_scrub *a = arg;
	struct mfs_scrub_counts c;
	struct mfs_scrub_cursor cur;
	int ret;

	if (fuse_req_ctx(req)->uid != 0)
		return -EPERM;
	if (a->version != MENDFS_IOC_VERSION || (a->flags & ~MENDFS_SCRUB_RESUME) ||
	    a->reserved[0] || a->reserved[1] || a->reserved[2] || a->phase > MENDFS_SCRUB_DONE ||
	    a->meta_budget > MENDFS_SCRUB_META_MAX || a->data_budget > MENDFS_SCRUB_DATA_MAX)
		return -EINVAL;
	cur.phase = a->phase;
	cur.pos = a->pos;
	if (a->flags & MENDFS_SCRUB_RESUME) {
		pthread_mutex_lock(&saved_lock);
		cur = saved;
		pthread_mutex_unlock(&saved_lock);
		if (cur.phase == MFS_SCRUB_PHASE_DONE)
			cur = (struct mfs_scrub_cursor){MFS_SCRUB_PHASE_META, 0};
	}
	memset(&c, 0, sizeof(c));
	ret = mfs_scrub_step(d->fs, &cur, a->meta_budget, a->data_budget, &c);
	if (ret) {
		if (ret != -EINVAL)
			mfsd_log(LOG_ERR, "scrub: %s", strerror(-ret));
		return ret;
	}
	pthread_mutex_lock(&saved_lock);
	saved = cur;
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
