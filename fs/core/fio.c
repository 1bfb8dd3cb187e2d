/* SPDX-License-Identifier: MIT */
/*
 * Waiting for a batch of bios (fio_sleep, fio_wake: the slow half of fio.h),
 * and zeroing file bytes in place, poison-aware (docs/RECOVERY.md): the tail of
 * the old last block when a file grows, the partial edge blocks of a range.
 * Used by the write path, truncate and fallocate; calls the block map
 * (mfs_bmap) and the block engine.
 *
 * Bytes past EOF in the last block are not zeroed when a truncate shrinks
 * the file (a truncate lost in a crash must not have destroyed data) but
 * when the size grows past them again (write, truncate, fallocate), before
 * the new size is set.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "csum.h"
#include "fio.h"

/* --- waiting for a batch (fio.h) ----------------------------------------------------- */

static long fio_futex(_Atomic uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)uaddr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/*
 * Bios of @io are in flight: announce a sleeper (FIO_WAITER) and sleep until
 * the last end_io takes pending to zero.  Flushes this thread's plug first:
 * a plug opened around the caller must not hold the bios we wait for.
 */
void fio_sleep(struct fio *io)
{
	uint32_t v;

	blk_flush_plug();
	v = atomic_load_explicit(&io->pending, memory_order_acquire);
	while (v & ~FIO_WAITER) {
		if (!(v & FIO_WAITER)) {
			if (!atomic_compare_exchange_weak_explicit(&io->pending, &v, v | FIO_WAITER,
			                                           memory_order_acquire,
			                                           memory_order_acquire))
				continue;
			v |= FIO_WAITER;
		}
		fio_futex(&io->pending, FUTEX_WAIT, v);
		v = atomic_load_explicit(&io->pending, memory_order_acquire);
	}
	atomic_store_explicit(&io->pending, 0, memory_order_relaxed);
}

/* The last bio of @io ended and its owner sleeps (@io's memory may be reused by now). */
void fio_wake(struct fio *io)
{
	fio_futex(&io->pending, FUTEX_WAKE, INT_MAX);
}

/*
 * Zero bytes [from, to) of device block @pblk in place: read-modify-write of
 * the block; if the read meets poison, whole units of poison (poison_unit())
 * of the range are zeroed with WRITE_ZEROES (which clears their poison) and
 * only partial units are read back, so -EIO means a partial unit of the range
 * is poisoned.
 */
static int zero_in_block(struct mfs *fs, uint64_t pblk, unsigned from, unsigned to)
{
	uint64_t sec = pblk * MFS_SECTORS_PER_BLOCK;
	struct bounce bounce;
	uint8_t *buf = bounce.b;
	unsigned u, g;
	int ret;

	if (from >= to)
		return 0;
	ret = blk_read(fs->dev, sec, buf, BS, 0);
	if (!ret && fs->data_csum) /* by sectors, checked, checksums stored */
		return mfs_csum_zero_in_block(fs, pblk, buf, from, to);
	if (!ret) {
		memset(buf + from, 0, to - from);
		ret = blk_write(fs->dev, sec, buf, BS, 0);
		return ret;
	}
	if (ret != -EIO)
		return ret;
	g = poison_unit(fs);
	if (g > BS)
		return ret; /* the block is part of one unit: its lost bytes stay lost (-EIO) */
	ret = 0;
	for (u = from / g * g; u < to && !ret; u += g) {
		unsigned zf = from > u ? from : u, zt = to < u + g ? to : u + g;
		uint64_t us = sec + u / BLK_SECTOR_SIZE;
		struct blk_bio bio;

		if (zf == u && zt == u + g) {
			blk_bio_init(&bio, BLK_OP_WRITE_ZEROES, us, NULL, g, NULL, NULL);
			ret = blk_submit_bio_wait(fs->dev, &bio);
			continue;
		}
		ret = blk_read(fs->dev, us, buf, g, 0);
		if (!ret) {
			memset(buf + (zf - u), 0, zt - zf);
			ret = blk_write(fs->dev, us, buf, g, 0);
		}
	}
	if (!ret && fs->data_csum) { /* the units written, as they now are */
		unsigned s0 = from / g * g / BLK_SECTOR_SIZE;

		ret = mfs_csum_refresh(fs, pblk, s0, (to + g - 1) / g * g / BLK_SECTOR_SIZE - s0);
	}
	return ret;
}

/* Zero bytes [from, to) of file block @lblk where it holds written data. */
int mfs_file_zero_partial(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, unsigned from,
                          unsigned to)
{
	uint64_t pblk, count;
	bool unwritten;
	int ret;

	if (from >= to)
		return 0;
	ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
	if (ret || !pblk || unwritten)
		return ret;
	return zero_in_block(fs, pblk, from, to);
}

/*
 * The size grows from @old to @new: zero the bytes past the old EOF in its
 * last block.  Truncate does not zero them when it shrinks the file, so
 * that a truncate lost in a crash never takes data with it; they are
 * zeroed here, in place, before any size that exposes them is set.
 */
int mfs_file_zero_past_eof(struct mfs *fs, struct mfs_ino *ip, uint64_t old, uint64_t new)
{
	uint64_t lblk = old / BS, to = (lblk + 1) * BS;

	if (new <= old || old % BS == 0)
		return 0;
	if (new < to)
		to = new;
	return mfs_file_zero_partial(fs, ip, lblk, (unsigned)(old % BS),
	                             (unsigned)(to - lblk * BS));
}
