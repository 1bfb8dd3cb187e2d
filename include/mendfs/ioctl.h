/* SPDX-License-Identifier: MIT */
/*
 * mendfs recovery ioctls (docs/RECOVERY.md): the ABI
 * between applications (libmendfs, mendctl) and the mendfs daemon.
 *
 * FUSE passes only "restricted" ioctls: every argument is one fixed-size
 * struct, copied in and out whole (_IOWR), with no user pointers, below 16 KiB.
 * Every struct starts with a version (MENDFS_IOC_VERSION) and a flags word
 * (no flag is defined: must be 0); reserved fields must be 0.  Anything else
 * is EINVAL.  Offsets and lengths are file-relative bytes, sectors are
 * 512-byte device sectors.
 */
#ifndef MENDFS_IOCTL_H
#define MENDFS_IOCTL_H

#include <linux/ioctl.h>
#include <stdint.h>

#define MENDFS_IOC_VERSION 1
#define MENDFS_IOC_MAGIC   0xF5

/* A file-relative byte range. */
struct mendfs_ioc_range {
	uint64_t offset;
	uint64_t length;
};

/* Recovery read: data bytes per call, zero-filled ranges reported per call. */
#define MENDFS_RR_CHUNK      12288u
#define MENDFS_RR_MAX_RANGES 16u

struct mendfs_ioc_recovery_read {
	uint32_t version;     /* in: MENDFS_IOC_VERSION */
	uint32_t flags;       /* in: 0 */
	uint64_t offset;      /* in: file offset */
	uint64_t length;      /* in: bytes wanted, 1..MENDFS_RR_CHUNK */
	uint64_t bytes;       /* out: bytes returned in data (short only at end of file) */
	uint32_t nr_zeroed;   /* out: entries of zeroed[] used */
	uint32_t truncated;   /* out: 1 if more zero-filled ranges existed than fit */
	uint64_t reserved[4]; /* in: 0 */
	struct mendfs_ioc_range zeroed[MENDFS_RR_MAX_RANGES]; /* out: zero-filled ranges */
	uint8_t data[MENDFS_RR_CHUNK];                        /* out */
};

/* Poison map, like FIEMAP: ranges from @start on, resume at @next. */
#define MENDFS_BADRANGES_MAX 64u

struct mendfs_ioc_badranges {
	uint32_t version; /* in */
	uint32_t flags;   /* in: 0 */
	uint64_t start;   /* in: file offset to look from */
	uint64_t next;    /* out: where to resume */
	uint32_t nr;      /* out: entries of ranges[] used */
	uint32_t last;    /* out: 1 when the end of the file was reached */
	uint64_t reserved[4];
	struct mendfs_ioc_range ranges[MENDFS_BADRANGES_MAX]; /* out, ascending */
};

/* Block map: mapped extents from @start on (holes omitted), resume at @next. */
#define MENDFS_BMAP_MAX         64u
#define MENDFS_EXTENT_UNWRITTEN 0x1u /* allocated, reads as zeros */

struct mendfs_ioc_extent {
	uint64_t offset; /* file bytes */
	uint64_t length; /* bytes */
	uint64_t sector; /* first device sector */
	uint32_t flags;  /* MENDFS_EXTENT_* */
	uint32_t reserved;
};

struct mendfs_ioc_bmap {
	uint32_t version; /* in */
	uint32_t flags;   /* in: 0 */
	uint64_t start;   /* in */
	uint64_t next;    /* out */
	uint32_t nr;      /* out */
	uint32_t last;    /* out */
	uint64_t reserved[4];
	struct mendfs_ioc_extent extents[MENDFS_BMAP_MAX]; /* out, ascending */
};

/* Zero-init: whole 512-byte sectors reset to zeros in place, poison cleared. */
struct mendfs_ioc_zeroinit {
	uint32_t version; /* in */
	uint32_t flags;   /* in: 0 */
	uint64_t offset;  /* in: multiple of 512 */
	uint64_t length;  /* in: multiple of 512, > 0 */
	uint64_t reserved[4];
};

/* Counters: the engine's (blk_dev_get_stats) and the filesystem's. */
struct mendfs_ioc_stats {
	uint32_t version; /* in */
	uint32_t flags;   /* in: 0 */
	uint64_t reserved[4];
	/* out: engine */
	uint64_t reads, writes, write_zeroes, read_bytes, write_bytes;
	uint64_t requests, errors, poison_hits, media_errors;
	uint64_t recovered_sectors, poison_cleared, faults, poison_ranges;
	/* out: filesystem */
	uint64_t meta_reads, meta_writes, meta_repairs, meta_lost;
	uint64_t commits, journal_blocks, checkpoints;
	/* out: the daemon's FUSE transport (MENDFS_TRANSPORT_*; 0 from a daemon before it) */
	uint64_t transport;
	uint64_t ring_requests; /* requests carried by FUSE over io_uring */
	uint64_t spare[14];     /* out: 0, room for more counters */
};

#define MENDFS_TRANSPORT_DEV_FUSE 1 /* read(2) and writev(2) on /dev/fuse */
#define MENDFS_TRANSPORT_IO_URING 2 /* FUSE over io_uring (mendfs -o io_uring) */

/*
 * Per hardware queue engine counters (blk_dev_get_queue_stats).  The daemon
 * fills q[0 .. count - 1], count = min(nr_queues, MENDFS_QS_MAX_QUEUES), and
 * sets entry_size to the size of the entry it knows; a later version may
 * append fields to struct mendfs_ioc_queue_stat (and so change the ioctl
 * number through its size), never move them.  Any open file or directory of
 * the mount, any user.
 */
#define MENDFS_QS_MAX_QUEUES 64u

struct mendfs_ioc_queue_stat {
	uint64_t ios;              /* bios submitted by the threads mapped to the queue */
	uint64_t bytes;            /* their bytes */
	uint64_t requests;         /* requests dispatched */
	uint64_t merges;           /* bios merged into a plugged request */
	uint64_t plug_flushes;     /* plug lists flushed to the queue */
	uint64_t dispatch_batches; /* lists dispatched (a plug flush or one unplugged request) */
	uint64_t tag_waits;        /* submitter slept for a free tag */
	uint64_t errors;           /* bios ended with an error */
	uint32_t tags_in_use;      /* tags held at the time of the call */
	uint32_t depth;            /* tags of the queue */
	uint32_t nr_ctxs;          /* threads' software contexts mapped to the queue */
	uint32_t pad;              /* 0 */
	uint64_t spare[4];         /* 0 */
};

struct mendfs_ioc_queue_stats {
	uint32_t version;     /* in */
	uint32_t flags;       /* in: 0 */
	uint64_t reserved[4]; /* in: 0 */
	uint32_t nr_queues;   /* in: 0; out: hardware queues of the device */
	uint32_t count;       /* in: 0; out: entries of q[] filled */
	uint32_t entry_size;  /* in: 0; out: sizeof(struct mendfs_ioc_queue_stat) */
	uint32_t pad;         /* in: 0 */
	struct mendfs_ioc_queue_stat q[MENDFS_QS_MAX_QUEUES]; /* out */
};

/*
 * Online poison injection (testing): device sectors [sector, sector + count)
 * become poisoned exactly as real poison is (table, emulation file, and in
 * emulation the pages of the pmem mapping).  Root only, and only on a mount
 * with -o poison_inject: EPERM otherwise.  Any open file or directory of the
 * mount (mendctl opens the mount point).
 */
struct mendfs_ioc_inject {
	uint32_t version; /* in */
	uint32_t flags;   /* in: 0 */
	uint64_t sector;  /* in: first 512-byte device sector */
	uint64_t count;   /* in: sectors, > 0, within the device */
	uint64_t reserved[4];
};

/*
 * Recovery write: @length bytes of @data at file @offset.  A poisoned sector
 * the write covers only in part has its lost bytes replaced by zeros (it is
 * zero-initialised, then written); whole poisoned sectors are overwritten in
 * place.  Needs the file open for writing (EBADF).
 */
#define MENDFS_RW_CHUNK 12288u

struct mendfs_ioc_recovery_write {
	uint32_t version;              /* in */
	uint32_t flags;                /* in: 0 */
	uint64_t offset;               /* in: file offset */
	uint64_t length;               /* in: bytes in data, 1..MENDFS_RW_CHUNK */
	uint64_t written;              /* out: bytes written (short only on ENOSPC / EFBIG) */
	uint64_t reserved[4];          /* in: 0 */
	uint8_t data[MENDFS_RW_CHUNK]; /* in */
};

/*
 * Remount (mount.mendfs runs it for `mount -o remount,ro|rw`): @read_only 1
 * makes everything durable, marks the filesystem clean and refuses every
 * change from then on; 0 makes it writable again (EROFS if it was mounted
 * read-only, or is read-only after an I/O error).  The kernel's own read-only
 * flag is mount(2)'s business: mount.mendfs sets it first for ro, last for
 * rw.  Root only (EPERM); through any open file or directory of the mount.
 */
struct mendfs_ioc_remount {
	uint32_t version;   /* in */
	uint32_t flags;     /* in: 0 */
	uint32_t read_only; /* in: 1 read-only, 0 read-write */
	uint32_t pad;       /* in: 0 */
	uint64_t reserved[4];
};

#define MENDFS_IOC_RECOVERY_READ  _IOWR(MENDFS_IOC_MAGIC, 1, struct mendfs_ioc_recovery_read)
#define MENDFS_IOC_BADRANGES      _IOWR(MENDFS_IOC_MAGIC, 2, struct mendfs_ioc_badranges)
#define MENDFS_IOC_BMAP           _IOWR(MENDFS_IOC_MAGIC, 3, struct mendfs_ioc_bmap)
#define MENDFS_IOC_ZEROINIT       _IOWR(MENDFS_IOC_MAGIC, 4, struct mendfs_ioc_zeroinit)
#define MENDFS_IOC_STATS          _IOWR(MENDFS_IOC_MAGIC, 5, struct mendfs_ioc_stats)
#define MENDFS_IOC_INJECT         _IOWR(MENDFS_IOC_MAGIC, 6, struct mendfs_ioc_inject)
#define MENDFS_IOC_RECOVERY_WRITE _IOWR(MENDFS_IOC_MAGIC, 7, struct mendfs_ioc_recovery_write)
#define MENDFS_IOC_QUEUE_STATS    _IOWR(MENDFS_IOC_MAGIC, 8, struct mendfs_ioc_queue_stats)
#define MENDFS_IOC_REMOUNT        _IOWR(MENDFS_IOC_MAGIC, 9, struct mendfs_ioc_remount)

/*
 * Online growth (`mendctl grow MOUNTPOINT`): grow the mounted filesystem to
 * the whole of its grown device, as `mendctl grow DEVICE` does unmounted.
 * Writers wait (they do not fail) while it runs.  Root only (EPERM);
 * through any open file or directory of the mount.  Errors: EROFS (mounted
 * read-only, or read-only after an error), EEXIST (the device did not
 * grow), EOPNOTSUPP (the device cannot change its size while mounted: a
 * devdax device, or an image the daemon mapped with no room to grow),
 * EFBIG (the device grew past the room reserved at mount, 16 times its size
 * then and at most 1 TiB more, or shrank), ENOSPC (it grew too little for
 * the journal and metadata twins to move, or the metadata zone has no room
 * for the new bitmaps), EBUSY (another growth runs, or transactions kept
 * coming), EIO, EUCLEAN; the daemon's log says why.
 */
struct mendfs_ioc_grow {
	uint32_t version;         /* in */
	uint32_t flags;           /* in: 0 */
	uint64_t old_blocks;      /* out: filesystem blocks (4096 bytes) before */
	uint64_t new_blocks;      /* out: and after */
	uint64_t old_data_blocks; /* out: data zone blocks before */
	uint64_t data_blocks;     /* out: and after */
	uint64_t free_blocks;     /* out: free data blocks after */
	uint64_t reserved[4];     /* in: 0 */
};
#define MENDFS_IOC_GROW _IOWR(MENDFS_IOC_MAGIC, 12, struct mendfs_ioc_grow)

#ifndef __cplusplus
/* The ABI: these sizes are part of the ioctl numbers. */
_Static_assert(sizeof(struct mendfs_ioc_recovery_read) == 12616, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_badranges) == 1088, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_bmap) == 2112, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_zeroinit) == 56, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_stats) == 328, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_inject) == 56, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_recovery_write) == 12352, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_queue_stat) == 112, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_queue_stats) == 7224, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_remount) == 48, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_grow) == 80, "ABI");
#endif

/*
 * Online scrub (MENDFS_IOC_SCRUB, mendctl scrub): one bounded step of a check
 * of the mounted filesystem, from the cursor (@phase, @pos) on.  The metadata
 * phase verifies both copies of every in-use meta zone block (checksum,
 * self-location) and rewrites a bad copy from the good one; the data phase
 * reads every allocated data block through the engine, so that latent poison
 * is found and recorded as a user read would record it, and on a data_csum
 * filesystem checks every sector a file maps against its checksum (a
 * mismatch is damage: an event, and BADRANGES names it).  A step checks at
 * most @meta_budget metadata blocks or reads at most @data_budget bytes, and
 * returns the cursor to continue from; @done is 1 once the data phase ended.
 * MENDFS_SCRUB_RESUME in @flags ignores the cursor given and continues from
 * the one the daemon last returned (the start when it has none, or when that
 * scrub finished).  Root only (EPERM); through any open file or directory of
 * the mount.  Counts are of this step only.
 */
#define MENDFS_SCRUB_META     0u          /* phase: pos = block of the meta zone (0 = meta_start) */
#define MENDFS_SCRUB_DATA     1u          /* phase: pos = block of the data zone (0 = data_start) */
#define MENDFS_SCRUB_DONE     2u          /* phase: nothing left */
#define MENDFS_SCRUB_RESUME   0x1u        /* flags: continue from the daemon's cursor */
#define MENDFS_SCRUB_META_MAX 4096u       /* metadata blocks per step at most */
#define MENDFS_SCRUB_DATA_MAX (64u << 20) /* data bytes per step at most */

struct mendfs_ioc_scrub {
	uint32_t version;      /* in */
	uint32_t flags;        /* in: 0 or MENDFS_SCRUB_RESUME */
	uint32_t phase;        /* in/out: MENDFS_SCRUB_* */
	uint32_t done;         /* out: 1 when phase is MENDFS_SCRUB_DONE */
	uint64_t pos;          /* in/out: block within the phase's zone */
	uint64_t meta_budget;  /* in: blocks, 1..MENDFS_SCRUB_META_MAX (0: 256) */
	uint64_t data_budget;  /* in: bytes, 1..MENDFS_SCRUB_DATA_MAX (0: 4 MiB) */
	uint64_t meta_checked; /* out: metadata blocks whose copies were verified */
	uint64_t meta_healed;  /* out: bad copies rewritten from their twin */
	uint64_t meta_lost;    /* out: blocks with no good copy */
	uint64_t meta_bad;     /* out: a bad copy left so (read-only mount, rewrite failed) */
	uint64_t meta_skipped; /* out: blocks skipped: changed in memory, written soon */
	uint64_t data_bytes;   /* out: data bytes read */
	uint64_t poison_found; /* out: sectors that became poison during the step */
	uint64_t meta_total;   /* out: blocks of the meta zone */
	uint64_t data_total;   /* out: blocks of the data zone */
	uint64_t csum_found;   /* out: data_csum: file sectors found failing their checksum */
	uint64_t reserved[3];  /* in: 0 */
};

#define MENDFS_IOC_SCRUB _IOWR(MENDFS_IOC_MAGIC, 11, struct mendfs_ioc_scrub)

#ifndef __cplusplus
_Static_assert(sizeof(struct mendfs_ioc_scrub) == 144, "ABI");
#endif

/*
 * Damage events (docs/RECOVERY.md "Damage events"): the daemon numbers every
 * newly found damage with a sequence that only grows (the first is 1, per
 * mount) and keeps the newest in a fixed ring.  The call returns up to
 * MENDFS_EV_MAX events from @from_seq on (0: from the oldest held); with none
 * there it waits up to @wait_ms (at most MENDFS_EV_WAIT_MAX) for one.  Go on
 * from @next_seq; @lost counts the events from @from_seq on that the ring
 * dropped before this call (then the first returned is @oldest_seq).  Root
 * only (EPERM: events name files anywhere in the mount); through any open
 * file or directory of the mount.
 */
#define MENDFS_EV_MAX      32u
#define MENDFS_EV_PATH     240u
#define MENDFS_EV_WAIT_MAX 1000u /* milliseconds */

/* kind */
#define MENDFS_EV_POISON      1u /* sectors entered the poison table */
#define MENDFS_EV_META_HEALED 2u /* a metadata copy was bad, rewritten from its twin */
#define MENDFS_EV_META_LOST   3u /* both copies of a metadata block were bad */
#define MENDFS_EV_DATA_CSUM   4u /* data_csum: a data sector failed its checksum (cause CORRUPT) */
/* cause */
#define MENDFS_EVC_READ_ERROR 1u /* poison: a media error or a guarded fault */
#define MENDFS_EVC_LATENT     2u /* poison: latent poison a read touched */
#define MENDFS_EVC_INJECTED   3u /* poison: MENDFS_IOC_INJECT */
#define MENDFS_EVC_MEDIA      4u /* metadata: the bad copy sat on poison */
#define MENDFS_EVC_CORRUPT    5u /* metadata: the bad copy failed its checks */
#define MENDFS_EVC_BADBLOCKS  6u /* poison: the device's badblocks list had it (scrub start) */

struct mendfs_ioc_event {
	uint64_t seq;
	int64_t time_ns;           /* CLOCK_REALTIME, when found */
	uint32_t kind;             /* MENDFS_EV_* */
	uint32_t cause;            /* MENDFS_EVC_* */
	uint64_t sector, count;    /* device sectors (metadata: the bad primary copy) */
	uint64_t block;            /* metadata: the block number; else 0 */
	uint64_t ino;              /* poison in a file's data: the file; 0 unknown */
	uint64_t offset, length;   /* ino != 0: the file's bytes, clipped to its size */
	uint64_t spare[2];         /* 0 */
	char path[MENDFS_EV_PATH]; /* ino != 0: from the mount's root; "" unknown */
};

struct mendfs_ioc_events {
	uint32_t version;     /* in */
	uint32_t flags;       /* in: 0 */
	uint64_t from_seq;    /* in: first seq wanted, 0: the oldest held */
	uint32_t wait_ms;     /* in: wait this long for an event, at most MENDFS_EV_WAIT_MAX */
	uint32_t nr;          /* out: entries of ev[] used */
	uint64_t next_seq;    /* out: from_seq of the next call */
	uint64_t oldest_seq;  /* out: the oldest event held */
	uint64_t head_seq;    /* out: the seq the next event will get */
	uint64_t lost;        /* out: events from from_seq on dropped before this call */
	uint64_t reserved[4]; /* in: 0 */
	struct mendfs_ioc_event ev[MENDFS_EV_MAX]; /* out, seq ascending, no gaps */
};

/* 11 is taken (scrub). */
#define MENDFS_IOC_EVENTS _IOWR(MENDFS_IOC_MAGIC, 10, struct mendfs_ioc_events)

#ifndef __cplusplus
_Static_assert(sizeof(struct mendfs_ioc_event) == 328, "ABI");
_Static_assert(sizeof(struct mendfs_ioc_events) == 10584, "ABI");
#endif

#endif /* MENDFS_IOCTL_H */
