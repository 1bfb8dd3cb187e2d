/* SPDX-License-Identifier: MIT */
/*
 * libmendfs: the client library of mendfs recovery (docs/RECOVERY.md,
 * docs/man/mendfs_preadv2.3, docs/man/mendfs_scrub.3).  Link with `pkg-config --libs mendfs`.
 * Every function returns -1 with errno set on error, like the system calls it
 * mirrors; with flags 0, mendfs_preadv2/mendfs_pwritev2 are preadv/pwritev.
 */
#ifndef MENDFS_RECOVERY_H
#define MENDFS_RECOVERY_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <mendfs/ioctl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Recovery I/O: poisoned sectors read as zeros; partial sectors of a write replace lost data. */
#define MENDFS_RWF_RECOVERY_DATA 0x1

/* A file-relative byte range. */
struct mendfs_range {
	uint64_t offset, length;
};

/*
 * With MENDFS_RWF_RECOVERY_DATA: read the full length (up to end of file),
 * poisoned sectors zero-filled.  EOPNOTSUPP when @fd is not on mendfs; EBADF
 * when it is not open for reading.
 */
ssize_t mendfs_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags);
/*
 * With MENDFS_RWF_RECOVERY_DATA: a poisoned sector the write covers only in
 * part gets zeros for its lost bytes instead of failing with EIO (the daemon
 * zero-initialises it under the inode lock, then writes; MENDFS_IOC_RECOVERY_WRITE
 * in chunks of 12 KiB); a write on whole sectors is a plain pwritev, which
 * clears whole poisoned sectors in place.  @fd must be open for writing
 * (EBADF).  EOPNOTSUPP when @fd is not on mendfs.
 */
ssize_t mendfs_pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags);
/*
 * Poisoned byte ranges of the file from @start on: up to @max in @out, *n
 * set to how many were stored.  Returns 0 or -1.  Call again from the end of
 * the last range to go on (*n < @max: the end of the file was reached).
 */
int mendfs_badranges(int fd, off_t start, struct mendfs_range *out, unsigned max, unsigned *n);
/* Reset [off, off + len) to zeros in place, clearing poison; whole 512-byte sectors (EINVAL). */
int mendfs_zeroinit(int fd, off_t off, off_t len);
/*
 * Recovery read into one buffer, also reporting the zero-filled ranges: up to
 * @max in @zeroed (merged, ascending), *n the number that exist (more than
 * @max: the rest were not stored).  Returns bytes read (short only at end of
 * file) or -1.
 */
ssize_t mendfs_recover(int fd, void *buf, size_t len, off_t off, struct mendfs_range *zeroed,
                       unsigned max, unsigned *n);

/*
 * An online scrub in steps (mendfs_scrub(3), MENDFS_IOC_SCRUB): the cursor
 * and budgets in, each step's counts added to the totals.  Zero it to start
 * from the beginning.
 */
struct mendfs_scrub {
	uint32_t phase;       /* in/out: MENDFS_SCRUB_META (0), _DATA, _DONE */
	uint32_t flags;       /* in: MENDFS_SCRUB_RESUME for the next step (then cleared) */
	uint64_t pos;         /* in/out: block within the phase's zone */
	uint64_t meta_budget; /* in: blocks a step checks, 0: 256 */
	uint64_t data_budget; /* in: bytes a step reads, 0: 4 MiB */
	/* out: totals of the steps made with this struct */
	uint64_t meta_checked, meta_healed, meta_lost, meta_unhealed, meta_skipped;
	uint64_t data_bytes, poison_found, csum_found;
	uint64_t meta_total, data_total; /* out: blocks of the meta and data zones */
};

/*
 * One step of an online scrub of the filesystem @fd (any file or directory
 * of the mount; root) is on, from @st's cursor.  Returns 1 when the scrub
 * reached its end, 0 when there is more (call again with @st), or -1 with
 * errno: EBUSY another process's scrub is running, EPERM not root,
 * EOPNOTSUPP not on mendfs, EINVAL a cursor or budget out of range.
 */
int mendfs_scrub_step(int fd, struct mendfs_scrub *st);
/* Steps until the end: 0, or -1 with errno as mendfs_scrub_step (@st says where it stopped). */
int mendfs_scrub(int fd, struct mendfs_scrub *st);

/*
 * Damage events (mendfs_events_read(3), MENDFS_IOC_EVENTS) from seq @from on
 * (0: the oldest held): up to @max into @out, seq ascending.  When none are
 * there, waits up to @wait_ms (at most MENDFS_EV_WAIT_MAX) for one.  *@next
 * is where to go on; *@lost (may be NULL) counts the events from @from on
 * that were dropped before this call.  Returns the number stored (0: none
 * came) or -1 with errno (EPERM not root, EOPNOTSUPP not on mendfs, EINVAL).
 */
int mendfs_events_read(int fd, uint64_t from, struct mendfs_ioc_event *out, unsigned max,
                       unsigned wait_ms, uint64_t *next, uint64_t *lost);

#ifdef __cplusplus
}
#endif

#endif /* MENDFS_RECOVERY_H */
