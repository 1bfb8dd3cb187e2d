/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend's synchronous path: byte-addressed read_sync and
 * write_sync for the poison slow path, block-by-block probes that find the
 * first unreadable block, flush and clear_poison.  Plain pread/pwrite through
 * an aligned bounce buffer where O_DIRECT needs one.  Calls dio.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring.h"

/* pread/pwrite all of [pos, pos + len), retrying EINTR and short transfers. */
int blk_uring_pio(int fd, bool write, void *buf, size_t len, uint64_t pos)
{
	char *p = buf;

	while (len) {
		ssize_t n = write ? pwrite(fd, p, len, (off_t)pos) : pread(fd, p, len, (off_t)pos);

		if (unlikely(n < 0)) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (unlikely(n == 0))
			return write ? -EIO : -ENXIO; /* the file shrank under us */
		p += n;
		pos += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* --- synchronous path (poison slow path, probes) -------------------------- */

/*
 * Read [pos, pos + len) one logical block at a time through an aligned
 * buffer, to find the first block the device cannot read.  Returns 0 (every
 * block read, @buf filled), -EIO with *bad set, or another -errno.
 */
static int uring_read_blocks(struct uring_dev *ud, uint64_t pos, void *buf, size_t len,
                             uint64_t *bad)
{
	uint64_t b, end = pos + len;
	char *blk;
	int ret = 0;

	blk = blk_dio_alloc(ud->mem_align, ud->lbs);
	if (!blk)
		return -ENOMEM;
	for (b = pos & ~(uint64_t)(ud->lbs - 1); b < end; b += ud->lbs) {
		uint64_t s = b > pos ? b : pos, e = b + ud->lbs < end ? b + ud->lbs : end;

		ret = blk_uring_pio(ud->fd, false, blk, ud->lbs, b);
		if (ret) {
			if (uring_media_errno(-ret)) {
				/* the block is the unit the device lost; report its first
				 * sector inside the asked range */
				if (bad)
					*bad = s >> BLK_SECTOR_SHIFT;
				ret = -EIO;
			}
			break;
		}
		memcpy((char *)buf + (s - pos), blk + (s - b), e - s);
	}
	free(blk);
	return ret;
}

int blk_uring_read_sync(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, uint64_t *bad)
{
	struct uring_dev *ud = dev->drv;
	uint64_t mask = ud->lbs - 1, start, end, cur;
	char *bounce;
	int ret = 0;

	if (!len)
		return 0;
	if (!uring_misaligned(ud, pos, buf, len)) {
		ret = blk_uring_pio(ud->fd, false, buf, len, pos);
		if (unlikely(ret) && uring_media_errno(-ret))
			ret = uring_read_blocks(ud, pos, buf, len, bad);
		return ret;
	}
	/* O_DIRECT and an unaligned range or buffer: read whole blocks, copy the middle */
	start = pos & ~mask;
	end = (pos + len + mask) & ~mask;
	bounce = blk_dio_alloc(ud->mem_align, URING_SYNC_CHUNK);
	if (!bounce)
		return -ENOMEM;
	for (cur = start; cur < end; cur += URING_SYNC_CHUNK) {
		size_t n = end - cur < URING_SYNC_CHUNK ? end - cur : URING_SYNC_CHUNK;
		uint64_t s = cur > pos ? cur : pos, e = cur + n < pos + len ? cur + n : pos + len;

		ret = blk_uring_pio(ud->fd, false, bounce, n, cur);
		if (unlikely(ret)) {
			if (uring_media_errno(-ret))
				ret = uring_read_blocks(ud, s, (char *)buf + (s - pos),
				                        pos + len - s, bad);
			break;
		}
		memcpy((char *)buf + (s - pos), bounce + (s - cur), e - s);
	}
	free(bounce);
	return ret;
}

int blk_uring_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len)
{
	struct uring_dev *ud = dev->drv;
	uint64_t mask = ud->lbs - 1, start, end, cur;
	char *bounce;
	int ret = 0;

	if (!len)
		return 0;
	if (!uring_misaligned(ud, pos, buf, len))
		return blk_uring_pio(ud->fd, true, (void *)buf, len, pos);
	/*
	 * O_DIRECT and an unaligned range or buffer: read-modify-write the
	 * partial blocks at the edges.  The slow path that calls this owns the
	 * range; nothing else writes those blocks meanwhile.
	 */
	start = pos & ~mask;
	end = (pos + len + mask) & ~mask;
	bounce = blk_dio_alloc(ud->mem_align, URING_SYNC_CHUNK);
	if (!bounce)
		return -ENOMEM;
	for (cur = start; cur < end && !ret; cur += URING_SYNC_CHUNK) {
		size_t n = end - cur < URING_SYNC_CHUNK ? end - cur : URING_SYNC_CHUNK;
		uint64_t s = cur > pos ? cur : pos, e = cur + n < pos + len ? cur + n : pos + len;

		if (s > cur)
			ret = blk_uring_pio(ud->fd, false, bounce, ud->lbs, cur);
		if (!ret && e < cur + n)
			ret = blk_uring_pio(ud->fd, false, bounce + n - ud->lbs, ud->lbs,
			                    cur + n - ud->lbs);
		if (ret)
			break;
		memcpy(bounce + (s - cur), (const char *)buf + (s - pos), e - s);
		ret = blk_uring_pio(ud->fd, true, bounce, n, cur);
	}
	free(bounce);
	return ret;
}

int blk_uring_flush_sync(struct blk_dev *dev)
{
	struct uring_dev *ud = dev->drv;

	while (fdatasync(ud->fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Block devices: rewriting a bad sector is how the drive remaps it. */
int blk_uring_clear_poison(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	(void)dev;
	(void)sector;
	(void)nr;
	return 0;
}
