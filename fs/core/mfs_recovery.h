/* SPDX-License-Identifier: MIT */
/*
 * Recovery operations of the filesystem core (fs/core/recovery.c), behind the
 * MENDFS_IOC_* ioctls of include/mendfs/ioctl.h: recovery read, poison map,
 * block map and zero-init, file-relative, each under the inode's lock.
 * Every function returns 0 (or a byte count) or -errno.
 */
#ifndef MENDFS_FS_MFS_RECOVERY_H
#define MENDFS_FS_MFS_RECOVERY_H

#include "mfs_ops.h"

/* A file-relative byte range. */
struct mfs_frange {
	uint64_t offset, length;
};

/* A mapped extent: file bytes [offset, offset + length) at device sector @sector. */
struct mfs_fextent {
	uint64_t offset, length, sector;
	bool unwritten;
};

/*
 * Read file bytes [off, off + len) (clipped to the size) with poisoned
 * sectors zero-filled; holes and unwritten extents read as zeros.  The
 * zero-filled byte ranges go to @zeroed (ascending, merged, at most @max;
 * *truncated when more existed).  Returns the bytes read or -errno.
 */
ssize_t mfs_recovery_read(struct mfs *fs, uint64_t ino, void *buf, size_t len, uint64_t off,
                          struct mfs_frange *zeroed, unsigned max, unsigned *nr, bool *truncated);
/*
 * Poisoned byte ranges of the file's written extents from @start on, at most
 * @max.  *next: where to continue; *last: the end of the file was reached.
 */
int mfs_badranges(struct mfs *fs, uint64_t ino, uint64_t start, struct mfs_frange *out,
                  unsigned max, unsigned *nr, uint64_t *next, bool *last);
/* Mapped extents (written and unwritten; holes omitted) from @start on, like mfs_badranges. */
int mfs_bmap_extents(struct mfs *fs, uint64_t ino, uint64_t start, struct mfs_fextent *out,
                     unsigned max, unsigned *nr, uint64_t *next, bool *last);
/*
 * Reset file bytes [off, off + len) to zeros in place and clear their poison:
 * WRITE_ZEROES on the written blocks' sectors; holes and unwritten extents
 * are left as they are; nothing is allocated or freed.  @off and @len must be
 * multiples of 512 (-EINVAL).  The part past the size is ignored.  mtime and
 * ctime are set as by a write.
 */
int mfs_zeroinit(struct mfs *fs, uint64_t ino, uint64_t off, uint64_t len);

/*
 * Write @len bytes at @off; a poisoned sector the range covers only in part
 * is zero-initialised first (its lost bytes become zeros), whole poisoned
 * sectors are overwritten in place by the write.  Returns bytes written
 * (short on ENOSPC) or -errno.
 */
ssize_t mfs_recovery_write(struct mfs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off);

/*
 * read.c: file bytes [off, off + len) into @buf, holes and unwritten extents
 * as zeros, data with bios flagged @bio_flags (BLK_BIO_RECOVERY reports
 * zero-filled sectors in @rec).  The caller holds ip->lock and has clipped
 * the range to the file size.  Returns @len or -errno (-EIO: media error).
 */
ssize_t mfs_file_read_blocks(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len,
                             uint64_t off, unsigned bio_flags, struct blk_recovery *rec);

#endif /* MENDFS_FS_MFS_RECOVERY_H */
