/* SPDX-License-Identifier: MIT */
/*
 * The damage event ring (mfs_events.h): posting (the engine's poison
 * notifier, meta.c's twin reads), reading with a bounded wait, and the lazy
 * resolution of owners by the first reader.  Calls the engine (to attach the
 * notifier) and the owner lookup (events_resolve.c) only through the
 * ev->resolve hook mount.c sets, outside the ring's lock.
 *
 * Locking: resolve_lock -> lock.  Posting takes only lock (it runs under the
 * engine's poison lock and under metadata buffer locks): it never allocates
 * more than the ring itself, on the first event, and does no I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mfs.h"

void mfs_events_init(struct mfs_events *ev)
{
	pthread_condattr_t ca;

	memset(ev, 0, sizeof(*ev));
	pthread_mutex_init(&ev->lock, NULL);
	pthread_mutex_init(&ev->resolve_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ev->cond, &ca);
	pthread_condattr_destroy(&ca);
	ev->next_seq = 1;
	ev->resolved = 1;
}

void mfs_events_destroy(struct mfs_events *ev)
{
	free(ev->ring);
	ev->ring = NULL;
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->lock);
	pthread_mutex_destroy(&ev->resolve_lock);
}

/* The oldest seq the ring still holds (lock held); next_seq when empty. */
static uint64_t __events_oldest(const struct mfs_events *ev)
{
	return ev->next_seq > MFS_EVENTS_RING + 1 ? ev->next_seq - MFS_EVENTS_RING : 1;
}

/*
 * Was the loss of metadata block @key (MFS_EV_META_LOST), or the checksum
 * failure of data sector @key (MFS_EV_DATA_CSUM), posted already?  Both are
 * met again by every read until repaired: one event each per mount.
 * Remembers it if not (lock held).
 */
static bool events_seen(struct mfs_events *ev, enum mfs_event_kind kind, uint64_t key)
{
	bool lost = kind == MFS_EV_META_LOST;
	uint64_t *seen = lost ? ev->lost_blocks : ev->csum_sectors;
	unsigned i, *nr = lost ? &ev->nr_lost_blocks : &ev->nr_csum_sectors;

	for (i = 0; i < *nr; i++)
		if (seen[i] == key)
			return true;
	if (*nr < sizeof(ev->lost_blocks) / sizeof(ev->lost_blocks[0])) {
		seen[(*nr)++] = key;
		return false;
	}
	/* more than remembered: once while the ring holds its event */
	if (ev->ring)
		for (uint64_t s = __events_oldest(ev); s < ev->next_seq; s++)
			if (ev->ring[s % MFS_EVENTS_RING].kind == kind &&
			    (lost ? ev->ring[s % MFS_EVENTS_RING].block
			          : ev->ring[s % MFS_EVENTS_RING].sector) == key)
				return true;
	return false;
}

bool mfs_event_post(struct mfs *fs, enum mfs_event_kind kind, enum mfs_event_cause cause,
                    uint64_t sector, uint64_t count, uint64_t block)
{
	struct mfs_events *ev = &fs->events;
	struct mfs_event *e;
	struct timespec ts;
	uint64_t oldest;

	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&ev->lock);
	/* a lost block fails every read of it: one event for it per mount */
	if ((kind == MFS_EV_META_LOST && events_seen(ev, kind, block)) ||
	    (kind == MFS_EV_DATA_CSUM && events_seen(ev, kind, sector))) {
		pthread_mutex_unlock(&ev->lock);
		return false;
	}
	if (!ev->ring)
		ev->ring = calloc(MFS_EVENTS_RING, sizeof(*ev->ring));
	if (ev->ring) {
		e = &ev->ring[ev->next_seq % MFS_EVENTS_RING];
		memset(e, 0, sizeof(*e));
		e->seq = ev->next_seq;
		e->time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		e->kind = kind;
		e->cause = cause;
		e->sector = sector;
		e->count = count;
		e->block = block;
	}
	/* without a ring (out of memory) the event is dropped, and counted as lost */
	ev->next_seq++;
	oldest = ev->ring ? __events_oldest(ev) : ev->next_seq;
	if (ev->resolved < oldest)
		ev->resolved = oldest;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	return true;
}

/* The engine's notifier: poison entered the table. */
static void events_poison_notify(void *priv, uint64_t sector, uint64_t nr,
                                 enum blk_poison_cause cause)
{
	enum mfs_event_cause c = cause == BLK_POISON_LATENT     ? MFS_EVC_LATENT
	                         : cause == BLK_POISON_INJECTED ? MFS_EVC_INJECTED
	                         : cause == BLK_POISON_SOURCE   ? MFS_EVC_BADBLOCKS
	                                                        : MFS_EVC_READ_ERROR;

	mfs_event_post(priv, MFS_EV_POISON, c, sector, nr, 0);
}

void mfs_events_attach(struct mfs *fs, bool on)
{
	blk_dev_set_poison_notify(fs->dev, on ? events_poison_notify : NULL, on ? fs : NULL);
}

/*
 * Put the resolved events @out (*m of them, pieces of the events [s0, s1),
 * each with the seq of the event it came from) in the ring in place of those
 * events, numbered on from the first of them still held; the events posted
 * meanwhile ([s1, next_seq), in @tail, room for MFS_EVENTS_RING) move up
 * behind them.  What no longer fits is dropped, oldest first, as posting
 * drops.  Lock held.
 */
static void __events_splice(struct mfs_events *ev, uint64_t s0, uint64_t s1,
                            const struct mfs_event *out, size_t m, struct mfs_event *tail)
{
	uint64_t oldest = __events_oldest(ev), first = s0 > oldest ? s0 : oldest;
	uint64_t t0 = s1 > oldest ? s1 : oldest, nt = ev->next_seq > t0 ? ev->next_seq - t0 : 0;
	uint64_t seq = first, resolved;
	size_t i;

	for (i = 0; i < nt; i++) /* before their slots are written over */
		tail[i] = ev->ring[(t0 + i) % MFS_EVENTS_RING];
	for (i = 0; i < m; i++) {
		if (out[i].seq < first)
			continue; /* its event was dropped while it was resolved */
		ev->ring[seq % MFS_EVENTS_RING] = out[i];
		ev->ring[seq % MFS_EVENTS_RING].seq = seq;
		seq++;
	}
	resolved = seq;
	for (i = 0; i < nt; i++, seq++) {
		ev->ring[seq % MFS_EVENTS_RING] = tail[i];
		ev->ring[seq % MFS_EVENTS_RING].seq = seq;
	}
	ev->next_seq = seq;
	oldest = __events_oldest(ev);
	ev->resolved = resolved > oldest ? resolved : oldest;
}

/*
 * Resolve every event posted and not yet resolved: copy them out, find their
 * owners without the ring's lock (that does I/O, and may post more events),
 * then put the answers back: in the slots that still hold the events when
 * each stayed one event, else through __events_splice (an event split over
 * several files; without the memory for that, each keeps its first piece,
 * over its whole range).
 */
static void events_resolve_pending(struct mfs *fs)
{
	struct mfs_events *ev = &fs->events;
	struct mfs_event *tmp, *out = NULL, *tail = NULL;
	uint64_t s0, s1, s;
	size_t m = 0;
	unsigned n, i;

	pthread_mutex_lock(&ev->resolve_lock);
	pthread_mutex_lock(&ev->lock);
	s0 = ev->resolved;
	s1 = ev->next_seq;
	if (s0 >= s1 || !ev->ring) {
		ev->resolved = s1;
		pthread_mutex_unlock(&ev->lock);
		pthread_mutex_unlock(&ev->resolve_lock);
		return;
	}
	n = (unsigned)(s1 - s0);
	tmp = malloc(n * sizeof(*tmp));
	if (tmp)
		for (i = 0; i < n; i++)
			tmp[i] = ev->ring[(s0 + i) % MFS_EVENTS_RING];
	pthread_mutex_unlock(&ev->lock);

	if (tmp && ev->resolve)
		out = ev->resolve(fs, tmp, n, &m); /* else: shown without owners */
	if (out && m > n && !(tail = malloc(MFS_EVENTS_RING * sizeof(*tail)))) {
		size_t k = 0;

		/* no room to split: the first piece of each, over the event's sectors */
		for (size_t j = 0; j < m; j++)
			if (!k || out[j].seq != out[k - 1].seq) {
				out[k] = out[j];
				out[k].sector = tmp[out[k].seq - s0].sector;
				out[k].count = tmp[out[k].seq - s0].count;
				k++;
			}
		m = k;
	}
	if (out && m == n) { /* one each: nothing moves */
		free(tmp);
		tmp = out;
		out = NULL;
	}

	pthread_mutex_lock(&ev->lock);
	if (out) {
		__events_splice(ev, s0, s1, out, m, tail);
	} else {
		for (i = 0; tmp && i < n; i++) {
			s = s0 + i;
			if (s >= __events_oldest(ev) && ev->ring[s % MFS_EVENTS_RING].seq == s)
				ev->ring[s % MFS_EVENTS_RING] = tmp[i];
		}
		if (ev->resolved < s1)
			ev->resolved = s1;
	}
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	pthread_mutex_unlock(&ev->resolve_lock);
	free(tmp);
	free(out);
	free(tail);
}

int mfs_events_read(struct mfs *fs, uint64_t from, struct mfs_event *out, unsigned max,
                    unsigned timeout_ms, struct mfs_events_pos *pos)
{
	struct mfs_events *ev = &fs->events;
	uint64_t oldest, start, s;
	struct timespec dl;
	unsigned n = 0;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ev->lock);
	/* nothing at or after @from yet: wait (bounded) for one to be posted */
	while (!ev->stop && timeout_ms && ev->next_seq <= (from ? from : 1))
		if (pthread_cond_timedwait(&ev->cond, &ev->lock, &dl) == ETIMEDOUT)
			break;
	if (ev->resolved < ev->next_seq) {
		pthread_mutex_unlock(&ev->lock);
		events_resolve_pending(fs);
		pthread_mutex_lock(&ev->lock);
	}
	oldest = ev->ring ? __events_oldest(ev) : ev->next_seq;
	if (from == 0)
		from = oldest;
	start = from > oldest ? from : oldest;
	for (s = start; s < ev->resolved && n < max; s++)
		out[n++] = ev->ring[s % MFS_EVENTS_RING];
	pos->next = start + n;
	pos->oldest = oldest;
	pos->lost = from < oldest ? oldest - from : 0;
	pos->head = ev->next_seq;
	pthread_mutex_unlock(&ev->lock);
	return (int)n;
}

void mfs_events_stop(struct mfs *fs)
{
	struct mfs_events *ev = &fs->events;

	pthread_mutex_lock(&ev->lock);
	ev->stop = true;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
}

const char *mfs_event_kind_name(uint32_t kind)
{
	switch (kind) {
	case MFS_EV_POISON:
		return "poison";
	case MFS_EV_META_HEALED:
		return "metadata_healed";
	case MFS_EV_META_LOST:
		return "metadata_lost";
	case MFS_EV_DATA_CSUM:
		return "data_csum";
	}
	return "unknown";
}

const char *mfs_event_cause_name(uint32_t cause)
{
	switch (cause) {
	case MFS_EVC_READ_ERROR:
		return "read_error";
	case MFS_EVC_LATENT:
		return "latent";
	case MFS_EVC_INJECTED:
		return "injected";
	case MFS_EVC_MEDIA:
		return "media_error";
	case MFS_EVC_CORRUPT:
		return "corrupt";
	case MFS_EVC_BADBLOCKS:
		return "badblocks";
	}
	return "unknown";
}
