/* SPDX-License-Identifier: MIT */
/*
 * Damage events (fs/core/events.c, events_resolve.c; docs/RECOVERY.md):
 * every newly found damage - poison entering the engine's table (a media
 * error, a guarded fault, latent poison read, an injection), a metadata copy
 * healed from its twin, a metadata block lost with both copies - is one event
 * in a fixed ring of the mount, numbered by a sequence that only grows.
 *
 * Posting is cheap and takes only the ring's lock (the engine's notifier runs
 * under its poison lock, meta.c under a buffer lock): no I/O.  Who owns the
 * damaged bytes (inode, file offset, path) is found lazily, by the first
 * reader that sees the event, with one scan of the inode table and the
 * directory tree for all events pending at that time; only then is an event
 * visible to readers.  Nothing runs while nothing is damaged.
 *
 * An event over the data of more than one file (or over two separate byte
 * ranges of one) becomes, when resolved, one event per file and byte range,
 * with consecutive seqs in sector order; the events posted after it and not
 * yet resolved move up by as many.  So a seq is final once the event is
 * visible: a reader that goes on from the last seq it saw plus one (or from
 * pos->next) sees every piece once.  head and next_seq count seqs given so
 * far, not damage found.
 *
 * The ring keeps the newest MFS_EVENTS_RING events; older ones are dropped
 * and counted.  Every function returns 0 or -errno.
 */
#ifndef MENDFS_FS_MFS_EVENTS_H
#define MENDFS_FS_MFS_EVENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mfs;

#define MFS_EVENTS_RING 1024u
#define MFS_EVENT_PATH  240u /* bytes of path kept, NUL included; longer: no path */

enum mfs_event_kind {
	MFS_EV_POISON = 1,      /* sectors entered the poison table */
	MFS_EV_META_HEALED = 2, /* a metadata copy was bad, rewritten from its twin */
	MFS_EV_META_LOST = 3,   /* both copies of a metadata block were bad */
	MFS_EV_DATA_CSUM = 4,   /* data sectors failed their checksum (data_csum; cause corrupt) */
};

enum mfs_event_cause {
	MFS_EVC_READ_ERROR = 1, /* poison: a media error or a guarded fault */
	MFS_EVC_LATENT = 2,     /* poison: latent poison a read touched */
	MFS_EVC_INJECTED = 3,   /* poison: online injection */
	MFS_EVC_MEDIA = 4,      /* metadata: the bad copy sat on poison */
	MFS_EVC_CORRUPT = 5,    /* metadata: the bad copy failed its checks */
	MFS_EVC_BADBLOCKS = 6,  /* poison: a badblocks source listed it (a scrub's refresh) */
};

struct mfs_event {
	uint64_t seq;
	int64_t time_ns;           /* CLOCK_REALTIME */
	uint32_t kind;             /* enum mfs_event_kind */
	uint32_t cause;            /* enum mfs_event_cause */
	uint64_t sector, count;    /* device sectors (metadata: the bad copy's block) */
	uint64_t block;            /* metadata: the block number (its primary location) */
	uint64_t ino;              /* owner, 0: not a file's data, or not found */
	uint64_t offset, length;   /* file bytes (ino != 0), clipped to the file's size */
	bool resolved;             /* the owner was looked for (events_resolve.c) */
	char path[MFS_EVENT_PATH]; /* "" unless known */
};

struct mfs_events {
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* CLOCK_MONOTONIC; broadcast on post and stop */
	struct mfs_event *ring; /* MFS_EVENTS_RING, allocated with the first event */
	uint64_t next_seq;      /* lock: the next event's seq (the first is 1) */
	uint64_t resolved;      /* lock: events below this seq are resolved (visible) */
	bool stop;              /* lock: mfs_events_stop() was called */
	/* lock: blocks with a metadata_lost event (one each per mount, the first 64) */
	uint64_t lost_blocks[64];
	unsigned nr_lost_blocks;
	/* lock: sectors with a data_csum event (one each per mount, the first 64) */
	uint64_t csum_sectors[64];
	unsigned nr_csum_sectors;
	pthread_mutex_t resolve_lock; /* one resolver at a time; before lock */
	/*
	 * The owner lookup (mfs_events_resolve, set by mount.c): a hook, as it
	 * sits above the files that post events.  NULL: events have no owners.
	 */
	struct mfs_event *(*resolve)(struct mfs *fs, const struct mfs_event *evs, unsigned n,
	                             size_t *nout);
};

/* Where a read left off. */
struct mfs_events_pos {
	uint64_t next;   /* the seq to ask for next */
	uint64_t oldest; /* the oldest seq still held (next_seq when empty) */
	uint64_t lost;   /* events from @from on that were dropped before this read */
	uint64_t head;   /* the seq the next event will get */
};

void mfs_events_init(struct mfs_events *ev);
void mfs_events_destroy(struct mfs_events *ev);

/* Attach (@on) or detach the engine's poison notifier (mount, unmount). */
void mfs_events_attach(struct mfs *fs, bool on);

/*
 * Post one event (seq and time filled in); owner unknown until resolved.
 * Returns false when it was not recorded: a repeat of a lost metadata block
 * or a failed checksum sector already reported this mount (so a caller logs
 * only what is new).
 */
bool mfs_event_post(struct mfs *fs, enum mfs_event_kind kind, enum mfs_event_cause cause,
                    uint64_t sector, uint64_t count, uint64_t block);

/*
 * Events from seq @from on (the oldest held if older; from 0: the oldest),
 * at most @max into @out, owners resolved.  With none there, waits up to
 * @timeout_ms for one (never after mfs_events_stop).  Returns the number
 * copied (0 on timeout) or -errno; *pos says where to go on.
 */
int mfs_events_read(struct mfs *fs, uint64_t from, struct mfs_event *out, unsigned max,
                    unsigned timeout_ms, struct mfs_events_pos *pos);

/* Wake every waiting reader; from now on reads do not wait (unmount). */
void mfs_events_stop(struct mfs *fs);

/*
 * The owners of @n events (events_resolve.c): inode, file range, path.  An
 * event of kind poison or data_csum whose sectors hold written data of more
 * than one file, or two byte ranges of one file that do not continue each
 * other, is split into one event per file and byte range (its "pieces", in
 * sector order, dividing its sectors among them: each from the first sector
 * of its range, the first from the event's start, to where the next begins,
 * the last to the event's end).  Returns a malloc'd array of *nout events,
 * each marked resolved, the pieces of evs[0] first, each keeping the seq of
 * the event it came from (events.c numbers them); NULL when out of memory.
 */
struct mfs_event *mfs_events_resolve(struct mfs *fs, const struct mfs_event *evs, unsigned n,
                                     size_t *nout);

/*
 * Pass 1 of mfs_events_resolve alone, in place and with no split: the inode
 * and file range of each of the @n events (kind poison or data_csum, ino 0)
 * that a regular file maps as written data (the first file found, for an
 * event over several); no path.  The scrub's data pass uses it, one event
 * per block, to tell a file's sector from a free or unwritten block's (whose
 * table entry is garbage).
 */
void mfs_events_owners(struct mfs *fs, struct mfs_event *evs, unsigned n);

/* Names for logs and JSON: "poison", "metadata_healed", ...; "read_error", ... */
const char *mfs_event_kind_name(uint32_t kind);
const char *mfs_event_cause_name(uint32_t cause);

#endif
