/* SPDX-License-Identifier: MIT */
/*
 * Damage events in the daemon (see events.h): the log thread and the
 * MENDFS_IOC_EVENTS translator.  Both read the core's ring with
 * mfs_events_read, which waits a bounded time and resolves owners lazily.
 *
 * The log thread sleeps in that wait (a minute at a time, woken by every new
 * event and by mfs_events_stop), so an undamaged mount costs one wakeup a
 * minute.  A dying device cannot flood the log: at most MFSD_EVLOG_PER_SEC
 * lines a second, then one "suppressed K" line per second; events the ring
 * dropped before the thread saw them are counted in one line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "daemon.h"
#include "events.h"
#include "mendfs/ioctl.h"
#include "mfs.h"

#define EVLOG_BATCH 32u

_Static_assert(MFS_EV_POISON == MENDFS_EV_POISON && MFS_EV_META_HEALED == MENDFS_EV_META_HEALED &&
                       MFS_EV_META_LOST == MENDFS_EV_META_LOST &&
                       MFS_EV_DATA_CSUM == MENDFS_EV_DATA_CSUM,
               "event kinds are the ABI's");
_Static_assert(MFS_EVC_READ_ERROR == MENDFS_EVC_READ_ERROR && MFS_EVC_LATENT == MENDFS_EVC_LATENT &&
                       MFS_EVC_INJECTED == MENDFS_EVC_INJECTED &&
                       MFS_EVC_MEDIA == MENDFS_EVC_MEDIA && MFS_EVC_CORRUPT == MENDFS_EVC_CORRUPT,
               "event causes are the ABI's");
_Static_assert(MFS_EVENT_PATH == MENDFS_EV_PATH, "paths fit");

static void log_event(const char *dev, const struct mfs_event *e)
{
	unsigned long long seq = e->seq, s = e->sector, last = e->sector + e->count - 1;
	const char *cause = mfs_event_cause_name(e->cause);
	char who[MFS_EVENT_PATH + 48];

	switch (e->kind) {
	case MFS_EV_POISON:
	case MFS_EV_DATA_CSUM:
		if (!e->ino) {
			mfsd_log(LOG_ERR,
			         "damage #%llu: %s (%s) on %s sectors %llu-%llu: no file's data",
			         seq, e->kind == MFS_EV_POISON ? "poison" : "data checksum", cause,
			         dev, s, last);
			break;
		}
		if (e->path[0])
			snprintf(who, sizeof(who), "%s (inode %llu)", e->path,
			         (unsigned long long)e->ino);
		else
			snprintf(who, sizeof(who), "<inode %llu>", (unsigned long long)e->ino);
		mfsd_log(LOG_ERR,
		         "damage #%llu: %s (%s) on %s sectors %llu-%llu: %s bytes %llu-%llu", seq,
		         e->kind == MFS_EV_POISON ? "poison" : "data checksum", cause, dev, s, last,
		         who, (unsigned long long)e->offset,
		         (unsigned long long)(e->offset + e->length - 1));
		break;
	case MFS_EV_META_HEALED:
		mfsd_log(LOG_WARNING,
		         "damage #%llu: metadata block %llu on %s (sectors %llu-%llu) %s, "
		         "healed from its twin",
		         seq, (unsigned long long)e->block, dev, s, last, cause);
		break;
	case MFS_EV_META_LOST:
		mfsd_log(LOG_CRIT,
		         "damage #%llu: metadata block %llu on %s (sectors %llu-%llu) %s, "
		         "and its twin bad too: lost",
		         seq, (unsigned long long)e->block, dev, s, last, cause);
		break;
	}
}

static time_t mono_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void *evlog_main(void *arg)
{
	struct mfsd_evlog *l = arg;
	struct mfs_event *buf = malloc(EVLOG_BATCH * sizeof(*buf));
	unsigned long long suppressed = 0;
	time_t window = mono_seconds();
	unsigned lines = 0;
	uint64_t next = 1;

	if (!buf) {
		mfsd_log(LOG_WARNING, "damage events will not be logged: out of memory");
		return NULL;
	}
	while (!atomic_load(&l->stop)) {
		struct mfs_events_pos pos;
		int n, i;

		n = mfs_events_read(l->fs, next, buf, EVLOG_BATCH, suppressed ? 1000 : 60000, &pos);
		if (n < 0)
			break;
		if (mono_seconds() != window) {
			if (suppressed)
				mfsd_log(LOG_WARNING, "damage events: suppressed %llu messages",
				         suppressed);
			window = mono_seconds();
			lines = 0;
			suppressed = 0;
		}
		if (pos.lost)
			mfsd_log(LOG_WARNING,
			         "damage events: %llu dropped by the event ring before they were "
			         "logged",
			         (unsigned long long)pos.lost);
		for (i = 0; i < n; i++) {
			if (lines < MFSD_EVLOG_PER_SEC) {
				log_event(l->fs->device, &buf[i]);
				lines++;
			} else {
				suppressed++;
			}
		}
		next = pos.next;
	}
	if (suppressed)
		mfsd_log(LOG_WARNING, "damage events: suppressed %llu messages", suppressed);
	free(buf);
	return NULL;
}

void mfsd_evlog_start(struct mfsd_evlog *l, struct mfs *fs)
{
	int ret;

	l->fs = fs;
	atomic_store(&l->stop, false);
	ret = pthread_create(&l->thread, NULL, evlog_main, l);
	if (ret) {
		mfsd_log(LOG_WARNING, "damage events will not be logged: %s", strerror(ret));
		return;
	}
	l->started = true;
}

void mfsd_evlog_stop(struct mfsd_evlog *l)
{
	if (!l->fs)
		return;
	atomic_store(&l->stop, true);
	mfs_events_stop(l->fs);
	if (l->started)
		pthread_join(l->thread, NULL);
	l->started = false;
}

int mfsd_ioc_events(struct mfs *fs, uid_t uid, struct mendfs_ioc_events *a)
{
	struct mfs_event *buf;
	struct mfs_events_pos pos;
	int n, i;

	if (uid != 0)
		return -EPERM;
	if (a->wait_ms > MENDFS_EV_WAIT_MAX)
		return -EINVAL;
	buf = malloc(MENDFS_EV_MAX * sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	n = mfs_events_read(fs, a->from_seq, buf, MENDFS_EV_MAX, a->wait_ms, &pos);
	if (n < 0) {
		free(buf);
		return n;
	}
	memset(a->ev, 0, sizeof(a->ev));
	for (i = 0; i < n; i++) {
		struct mendfs_ioc_event *o = &a->ev[i];

		o->seq = buf[i].seq;
		o->time_ns = buf[i].time_ns;
		o->kind = buf[i].kind;
		o->cause = buf[i].cause;
		o->sector = buf[i].sector;
		o->count = buf[i].count;
		o->block = buf[i].block;
		o->ino = buf[i].ino;
		o->offset = buf[i].offset;
		o->length = buf[i].length;
		memcpy(o->path, buf[i].path, sizeof(o->path));
	}
	a->nr = (uint32_t)n;
	a->next_seq = pos.next;
	a->oldest_seq = pos.oldest;
	a->head_seq = pos.head;
	a->lost = pos.lost;
	free(buf);
	return 0;
}
