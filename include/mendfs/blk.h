/* SPDX-License-Identifier: MIT */
/*
 * mendblk: the mendfs userspace block engine.
 *
 * A blk-mq in user space: callers build bios and submit them; the engine turns
 * them into tagged requests, plugs and merges them per thread, dispatches them
 * in batches to a backend (pmem, io_uring, null) and completes them in batches.
 * It also owns the device's poison (badblocks) table and gives every bio exact
 * media-error semantics: see "Poison" below and docs/design/engine.md §2.6.
 *
 * Conventions: functions return 0 or a negative errno unless stated otherwise.
 * Sectors are 512 bytes, counted from the start of the device.
 */
#ifndef MENDFS_BLK_H
#define MENDFS_BLK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BLK_SECTOR_SHIFT 9
#define BLK_SECTOR_SIZE  512u

struct blk_dev;
struct blk_request;

enum blk_op {
	BLK_OP_READ = 0,
	BLK_OP_WRITE = 1,
	BLK_OP_FLUSH = 2,        /* make every completed write durable; len 0 */
	BLK_OP_WRITE_ZEROES = 3, /* zero [sector, sector + len); no data segments */
	BLK_OP_MAX
};

/* The status a bio ends with.  "Busy" is internal and never reaches a bio. */
enum blk_status {
	BLK_STS_OK = 0,
	BLK_STS_MEDIA,   /* poisoned media: bio->bad_sector is the first bad sector */
	BLK_STS_IOERR,   /* any other device error */
	BLK_STS_NOSPC,   /* the backend ran out of space (sparse image on a full disk) */
	BLK_STS_INVAL,   /* out of the device, misaligned, or malformed */
	BLK_STS_NOTSUPP, /* the operation is not supported by this device */
	BLK_STS_ROFS,    /* a write to a device opened read-only */
	BLK_STS_MAX
};

/* bio->flags set by the caller */
#define BLK_BIO_RECOVERY (1u << 0) /* read: zero-fill poison; write: lost bytes become zeros */
#define BLK_BIO_FUA      (1u << 1) /* durable when the bio completes */
#define BLK_BIO_NOMERGE  (1u << 2) /* never merge this bio with another */
/* bio->flags set by the engine */
#define BLK_BIO_TRACKED   (1u << 6) /* a QoS policy saw this bio at submission */
#define BLK_BIO_UNALIGNED (1u << 7) /* byte_off or len not sector aligned */

/* Flags that must be equal for two bios to share a request. */
#define BLK_BIO_MERGE_MASK (BLK_BIO_RECOVERY | BLK_BIO_FUA | BLK_BIO_NOMERGE | BLK_BIO_UNALIGNED)

/* The largest bio (bytes).  Bios above the device's max_sectors are not split: they become
 * one request each, which nothing merges into. */
#define BLK_BIO_MAX_BYTES (1u << 30)

struct blk_range {
	uint64_t sector;
	uint64_t nr; /* sectors */
};

/*
 * Where a BLK_BIO_RECOVERY read reports the sectors it zero-filled.  Optional:
 * with bio->rec NULL only the count is lost, not the data semantics.
 */
struct blk_recovery {
	struct blk_range *ranges; /* caller's array */
	uint32_t max;             /* its capacity */
	uint32_t nr;              /* ranges written */
	uint64_t zeroed;          /* sectors zero-filled in total */
	bool truncated;           /* more ranges than max */
};

struct blk_bio;
typedef void blk_end_io_fn(struct blk_bio *bio);

/*
 * A bio: one contiguous device range and the memory segments it moves.  The
 * caller owns it; the engine owns it from blk_submit_bio() until end_io is
 * called, exactly once, possibly on another thread and possibly before
 * blk_submit_bio() returns.
 */
struct blk_bio {
	struct blk_bio *bi_next; /* engine: chain inside a request */
	uint64_t sector;         /* first sector */
	uint32_t len;            /* bytes */
	uint16_t nr_segs;        /* entries in iov */
	uint8_t op;              /* enum blk_op */
	uint8_t flags;           /* BLK_BIO_* */
	const struct iovec *iov; /* segments; their lengths add up to len */
	blk_end_io_fn *end_io;
	void *private; /* caller's */

	/* Result, valid in end_io. */
	uint8_t status;           /* enum blk_status */
	uint16_t byte_off;        /* start byte inside 'sector' (byte-granular devices only) */
	uint32_t done;            /* bytes completed before status applied */
	uint64_t bad_sector;      /* BLK_STS_MEDIA: first poisoned sector of this bio */
	struct blk_recovery *rec; /* BLK_BIO_RECOVERY reads: zero-filled ranges */
	struct iovec inline_iov;  /* used by blk_bio_init() for one buffer */
};

static inline uint64_t blk_bio_pos(const struct blk_bio *bio)
{
	return (bio->sector << BLK_SECTOR_SHIFT) + bio->byte_off;
}

/* Initialise @bio for one contiguous buffer (NULL and 0 segments for FLUSH / WRITE_ZEROES). */
void blk_bio_init(struct blk_bio *bio, enum blk_op op, uint64_t sector, void *buf, uint32_t len,
                  blk_end_io_fn *end_io, void *private);

/* blk_bio_init, inline: for callers that build a bio per 4 KiB I/O. */
static inline void __blk_bio_init(struct blk_bio *bio, enum blk_op op, uint64_t sector, void *buf,
                                  uint32_t len, blk_end_io_fn *end_io, void *private)
{
	*bio = (struct blk_bio){.sector = sector,
	                        .len = len,
	                        .op = (uint8_t)op,
	                        .end_io = end_io,
	                        .private = private};
	if (buf && (op == BLK_OP_READ || op == BLK_OP_WRITE)) {
		bio->inline_iov.iov_base = buf;
		bio->inline_iov.iov_len = len;
		bio->iov = &bio->inline_iov;
		bio->nr_segs = 1;
	}
}

/*
 * Per-thread plug.  Between blk_start_plug() and blk_finish_plug() the calling
 * thread's bios gather in the plug, merge when contiguous, and go to the
 * backend in batches.  Never sleep on something else while a plug is open: the
 * engine flushes it only when the thread waits for the engine itself.
 */
struct blk_plug {
	struct blk_request *head, *tail; /* FIFO, singly linked through rq_next */
	struct blk_request *cached_rqs;  /* batch-allocated, not yet used */
	struct blk_dev *cached_dev;
	uint16_t rq_count;
	uint16_t nr_ios;
	bool multiple_queues;
	bool has_elevator;
};

void blk_start_plug(struct blk_plug *plug);
/* Like blk_start_plug(), expecting about @nr_ios bios: their tags are allocated in one batch. */
void blk_start_plug_nr_ios(struct blk_plug *plug, unsigned short nr_ios);
void blk_finish_plug(struct blk_plug *plug);
/* Issue what the calling thread's plug holds, keeping the plug open. */
void blk_flush_plug(void);

enum blk_backend_type {
	BLK_BACKEND_AUTO = 0, /* devdax / regular file -> pmem, block device -> uring */
	BLK_BACKEND_PMEM,
	BLK_BACKEND_URING,
	BLK_BACKEND_NULL,
};

/* blk_dev_config.flags */
#define BLK_CFG_READONLY  (1u << 0) /* open the device read-only; writes end with BLK_STS_ROFS */
#define BLK_CFG_NOMERGE   (1u << 1) /* never merge bios */
#define BLK_CFG_POLLED    (1u << 2) /* uring: submitters reap completions (blk_poll) */
#define BLK_CFG_NO_DIRECT (1u << 3) /* uring: buffered I/O instead of O_DIRECT */
#define BLK_CFG_EXCL      (1u << 4) /* take an exclusive lock on the device (flock) */
#define BLK_CFG_NO_POISON (1u << 5) /* do not load any badblocks source */

#define BLK_MAX_HW_QUEUES 64

struct blk_dev_config {
	enum blk_backend_type backend;
	const char *path;           /* device or image; NULL for the null backend */
	uint64_t size;              /* null backend: capacity in bytes (default 1 TiB) */
	unsigned nr_hw_queues;      /* 0: 1, at most BLK_MAX_HW_QUEUES */
	unsigned queue_depth;       /* tags per hardware queue, 0: 128, at most 4096 */
	unsigned max_sectors;       /* largest request, 0: 256 (128 KiB) */
	unsigned max_segments;      /* 0: 128 */
	unsigned flags;             /* BLK_CFG_* */
	const char *badblocks_path; /* emulation file; NULL: "PATH.badblocks" for a regular file */
	/*
	 * Latent poison emulation: sectors that read back as media errors once
	 * touched, in no table until then (the format of the emulation file);
	 * NULL: "PATH.latent" for a regular file.
	 */
	const char *latent_path;
	const char *scheduler; /* NULL or "none", "deadline" */
};

/*
 * Format a message into @err (@errlen bytes; nothing if @err is NULL): the
 * (err, errlen) convention of blk_dev_open and of the filesystem core.
 */
void blk_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Open a device.  On failure returns -errno and, when @err is not NULL, a
 * message naming the device and the cause.
 */
int blk_dev_open(const struct blk_dev_config *cfg, struct blk_dev **devp, char *err, size_t errlen);
/* Wait for in-flight I/O, then release everything.  Does not flush: submit a FLUSH first. */
void blk_dev_close(struct blk_dev *dev);

struct blk_dev_info {
	uint64_t size;               /* bytes */
	uint64_t nr_sectors;         /* size >> 9 */
	unsigned logical_block_size; /* smallest aligned unit for I/O (1 for byte-granular) */
	unsigned nr_hw_queues, queue_depth, max_sectors, max_segments;
	enum blk_backend_type backend;
	const char *backend_name;
	bool direct_access; /* blk_direct_access() works */
	bool byte_granular; /* unaligned bios allowed */
	/*
	 * blk_direct_access() returns page-cache pages of a regular file (an image):
	 * the kernel may copy from them (e.g. a FUSE reply) with no more risk than a
	 * read(2).  False on devdax, where a kernel copy that touches unknown poison
	 * is an unrecoverable machine check: such data must be copied under the
	 * engine's fault guard instead.
	 */
	bool direct_page_cache;
	bool emulated_poison;       /* a badblocks emulation file is in use */
	const char *badblocks_path; /* the emulation file, or NULL */
	bool read_only;
};
void blk_dev_get_info(const struct blk_dev *dev, struct blk_dev_info *info);
/*
 * The file or block device under @dev grew: re-read its size and make the
 * new range addressable (online growth).  Nothing already addressed moves:
 * pointers from blk_direct_access() stay valid, and I/O may go on while it
 * runs, but nothing may address the new range before it returns.  The
 * sizes in bytes before and after in *@old_size and *@new_size (equal when
 * it did not grow).  Returns 0, or with @err saying why:
 *   -EOPNOTSUPP  the backend cannot change its size while open (null,
 *                devdax, or a pmem image with no address space reserved);
 *   -EFBIG       the device shrank, or grew past the pmem reservation
 *                (16 times its size at open, at most 1 TiB more);
 *   -EROFS       opened read-only;
 *   other -errno from stat or the mapping.
 */
int blk_dev_resize(struct blk_dev *dev, uint64_t *old_size, uint64_t *new_size, char *err,
                   size_t errlen);

/*
 * Submit @bio.  Never fails synchronously: every error ends the bio with a
 * status.  Under a plug the bio may wait in the plug until it is flushed.
 */
void blk_submit_bio(struct blk_dev *dev, struct blk_bio *bio);
/* Submit and wait.  Returns 0, or -errno of the bio's status (-EIO for media errors). */
int blk_submit_bio_wait(struct blk_dev *dev, struct blk_bio *bio);
/* Synchronous helpers over blk_submit_bio_wait(). */
int blk_read(struct blk_dev *dev, uint64_t sector, void *buf, uint32_t len, unsigned bio_flags);
int blk_write(struct blk_dev *dev, uint64_t sector, const void *buf, uint32_t len,
              unsigned bio_flags);
int blk_flush(struct blk_dev *dev);
/*
 * Reap completions of the calling thread's hardware queue (BLK_CFG_POLLED
 * devices), waiting for at least @min.  Returns the number of requests
 * completed, or -errno.  Always 0 on synchronous backends.
 */
int blk_poll(struct blk_dev *dev, unsigned min);

/* Map a bio status to an errno (media errors are EIO). */
int blk_status_to_errno(enum blk_status sts);
const char *blk_status_name(enum blk_status sts);

/*
 * Zero-copy read access (pmem): the address of [pos, pos + len) in the
 * device mapping.  Returns 0; -EOPNOTSUPP without a mapping; -EINVAL out of
 * range; -EIO when the range holds poison (then *bad_sector is the first one).
 * The caller must not hold on to the address past blk_dev_close().
 */
int blk_direct_access(struct blk_dev *dev, uint64_t pos, size_t len, void **addr,
                      uint64_t *bad_sector);

/*
 * Run @fn(@addr, @len, @arg), which loads from [@addr, @addr + @len), an
 * address blk_direct_access() returned, under the engine's fault guard: a
 * fault there (poison the table does not know yet, a page of an image its
 * file cannot supply) returns -EFAULT instead of killing the process.
 * Nothing is recorded: read the range through the engine, which finds the
 * poison again and records it.  Otherwise returns what @fn returns.  @fn must
 * not do I/O through the engine (the guard is one per thread).
 */
typedef int blk_direct_load_fn(const void *addr, size_t len, void *arg);
int blk_direct_load(struct blk_dev *dev, const void *addr, size_t len, blk_direct_load_fn *fn,
                    void *arg);

/* Register a buffer for fixed-buffer I/O (uring).  Returns 0 or -errno; a no-op elsewhere. */
int blk_dev_register_buffer(struct blk_dev *dev, void *addr, size_t len);

/*
 * Poison.  The table holds sorted, merged sector ranges.  Changes are
 * persisted to the emulation file when there is one.
 */
int blk_poison_add(struct blk_dev *dev, uint64_t sector, uint64_t nr);
/*
 * Ask the device's badblocks sources again, as blk_dev_open did once: the
 * emulation file (PATH.badblocks or the configured one), libpmem2/libndctl
 * for devdax and fsdax, the sysfs badblocks file of a block device.  Every
 * sector they list that the table does not hold becomes poison (the
 * notifier's cause BLK_POISON_SOURCE), as if a read had met it; nothing is
 * removed.  For a scrub's start: the kernel learns of pmem poison from
 * address range scrubs long after a device was opened.  *@added (may be
 * NULL): sectors new to the table.  0, or -errno (a source unreadable,
 * -EINVAL a malformed emulation file; the table is then unchanged).
 * Not on a device opened with BLK_CFG_NO_POISON (0, nothing done).
 */
int blk_dev_refresh_badblocks(struct blk_dev *dev, uint64_t *added);
/* Clear poison on the media and in the table; the sectors' content is undefined until written. */
int blk_poison_clear(struct blk_dev *dev, uint64_t sector, uint64_t nr);
/* Ranges that intersect [sector, sector + nr), clipped.  Returns how many were written to @out
 * (at most @max); *total (if not NULL) is how many exist. */
unsigned blk_poison_lookup(struct blk_dev *dev, uint64_t sector, uint64_t nr, struct blk_range *out,
                           unsigned max, unsigned *total);
/* Number of poisoned ranges on the device. */
unsigned blk_poison_count(struct blk_dev *dev);
/*
 * The poison table's own search, for callers that keep a copy of the table
 * (from blk_poison_lookup): the index of the first of the @n sorted, disjoint
 * ranges @r that ends after @sector, or @n if none does.
 */
unsigned blk_range_find(const struct blk_range *r, unsigned n, uint64_t sector);

/* Optional scheduler, set while no I/O is in flight: "none" or "deadline".  -EBUSY otherwise. */
int blk_dev_set_scheduler(struct blk_dev *dev, const char *name);

/*
 * Poison notifier (the filesystem's damage events): @fn is called each time
 * sectors enter the poison table, with each range that was not poisoned
 * before (widened to the table's unit) and what found it.  It runs under the
 * table's lock, from I/O paths: it must only record (no I/O, no blk_* call,
 * no lock that I/O may wait on).  NULL detaches; set it while no I/O runs
 * (after open, before close).  Costs nothing on a device without new poison.
 */
enum blk_poison_cause {
	BLK_POISON_FOUND,    /* a media error or a guarded fault (read, or direct access) */
	BLK_POISON_LATENT,   /* emulated latent poison (DEVICE.latent) that a read touched */
	BLK_POISON_INJECTED, /* blk_poison_add (online injection) */
	BLK_POISON_SOURCE, /* a badblocks source listed it after open (blk_dev_refresh_badblocks) */
};
typedef void blk_poison_notify_fn(void *priv, uint64_t sector, uint64_t nr,
                                  enum blk_poison_cause cause);
void blk_dev_set_poison_notify(struct blk_dev *dev, blk_poison_notify_fn *fn, void *priv);

/* Optional QoS policy: throttle() runs at submission, done() at completion, only for bios
 * that were submitted while it was attached (BLK_BIO_TRACKED). */
struct blk_qos_ops {
	void (*throttle)(void *priv, struct blk_bio *bio);
	void (*done)(void *priv, struct blk_bio *bio);
};
void blk_dev_set_qos(struct blk_dev *dev, const struct blk_qos_ops *ops, void *priv);

/*
 * Write tap (crash tests, like dm-log-writes): @fn is called for every WRITE,
 * WRITE_ZEROES and FLUSH bio that completes successfully, in completion order,
 * one call at a time, with the bio's data readable during the call.  NULL
 * detaches.  Only while the device is idle and no other thread submits:
 * -EBUSY otherwise.  Detached, it costs nothing.  Returns 0 or -errno.
 */
int blk_dev_set_write_tap(struct blk_dev *dev, void (*fn)(void *priv, const struct blk_bio *bio),
                          void *priv);

/*
 * Fault injection (tests only, blk/fault.c): count the device's operations
 * (requests handed to the backend: reads, writes, write-zeroes, flushes) and
 * fail operation @nth (1-based) with -EIO, or with @dying every operation
 * from @nth on, without touching the media; @nth 0 only counts.  Attach
 * while the device is idle, not with a write tap (-EBUSY).  Closing the
 * device prints the counts on stderr.  Detached (the default), it costs
 * nothing.  Returns 0 or -errno.
 */
int blk_dev_set_fault(struct blk_dev *dev, uint64_t nth, bool dying);
/* Operations counted and failed so far; -ENOENT without an injector. */
int blk_dev_fault_counts(struct blk_dev *dev, uint64_t *ops, uint64_t *failed);

/* Statistics, summed over threads and queues when read. */
struct blk_stats {
	uint64_t ios[BLK_OP_MAX];   /* bios submitted per op */
	uint64_t bytes[BLK_OP_MAX]; /* bytes submitted per op */
	uint64_t requests;          /* requests dispatched */
	uint64_t merges_back, merges_front;
	uint64_t plug_flushes;
	uint64_t dispatch_batches;
	uint64_t tag_waits;
	uint64_t errors;            /* bios ended with a status other than OK */
	uint64_t poison_hits;       /* requests that met poison */
	uint64_t media_errors;      /* bios ended with BLK_STS_MEDIA */
	uint64_t recovered_sectors; /* sectors zero-filled by recovery reads */
	uint64_t poison_cleared;    /* sectors cleared by overwrite or zeroing */
	uint64_t faults;            /* hardware faults caught by the guard */
};
void blk_dev_get_stats(struct blk_dev *dev, struct blk_stats *st);

/*
 * Counters of one hardware queue: those of the software contexts (threads)
 * mapped to it, summed, and its own completion-side ones.  A snapshot, not
 * atomic as a whole: each counter is read once, while I/O may run.
 */
struct blk_queue_stats {
	uint64_t ios;              /* bios submitted by threads mapped to the queue */
	uint64_t bytes;            /* their bytes, all ops */
	uint64_t requests;         /* requests allocated and dispatched */
	uint64_t merges;           /* bios merged into a plugged request (back + front) */
	uint64_t plug_flushes;     /* plug lists handed to the queue */
	uint64_t dispatch_batches; /* lists dispatched: plug flushes + unplugged requests */
	uint64_t tag_waits;        /* times a submitter slept for a free tag */
	uint64_t errors;           /* bios ended with a status other than OK */
	uint32_t tags_in_use;      /* tags held at the time of the call */
	uint32_t depth;            /* tags in the queue */
	uint32_t nr_ctxs;          /* software contexts mapped to the queue */
	uint32_t pad;
};
/* Returns 0, or -EINVAL if @q is not below the device's number of hardware queues. */
int blk_dev_get_queue_stats(struct blk_dev *dev, unsigned q, struct blk_queue_stats *qs);

#ifdef __cplusplus
}
#endif
#endif /* MENDFS_BLK_H */
