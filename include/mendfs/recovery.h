/* SPDX-License-Identifier: MIT */
/*
 * libmendfs: the client library of mendfs recovery (docs/RECOVERY.md,
 * docs/man/mendfs_preadv2.3).  Link with `pkg-config --libs mendfs`.
 * Every function returns -1 with errno set on error, like the system calls it
 * mirrors; with flags 0, mendfs_preadv2/mendfs_pwritev2 are preadv/pwritev.
 */
#ifndef MENDFS_RECOVERY_H
#define MENDFS_RECOVERY_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

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

#ifdef __cplusplus
}
#endif

#endif /* MENDFS_RECOVERY_H */
