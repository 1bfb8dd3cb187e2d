/* SPDX-License-Identifier: MIT */
/*
 * File data I/O below the read and write paths: batches of bios submitted
 * under one plug (inline here: the read and write paths call them for every
 * request), bounce blocks for partial edge blocks, the device's unit of
 * poison, and the zeroing of file bytes in place (fio.c).  Calls the block
 * engine and, in fio.c, the block map.
 *
 * Data moves in bios through the block engine, straight between the device
 * and the caller's buffer; only partial edge blocks go through a bounce
 * block.  Each call submits its bios under one plug (in batches of
 * FIO_BATCH) so that contiguous blocks merge.  No plug is open while
 * metadata is read or locks are taken.
 */
#ifndef MENDFS_FS_FIO_H
#define MENDFS_FS_FIO_H

#include <stdlib.h>

#include "fmap.h"

/*
 * Bios and requests: the data path cuts its I/O into bios of at most
 * BIO_MAX_BLOCKS (128 KiB) and opens the engine with a request limit of
 * RQ_MAX_BLOCKS (1 MiB, the largest FUSE write), so that the bios of one
 * contiguous extent merge in the plug into requests of up to 1 MiB.  With a
 * bio as large as the request limit nothing could ever merge.
 */
#define BIO_MAX_BLOCKS 32u  /* 128 KiB per bio */
#define RQ_MAX_BLOCKS  256u /* 1 MiB per request: mfs_mount's cfg.max_sectors */
#define FIO_BATCH      128u
_Static_assert(BIO_MAX_BLOCKS < RQ_MAX_BLOCKS, "bios must be able to merge into a request");

/*
 * A batch of bios, queued by fio_submit and submitted under one plug by
 * fio_wait.  It lives on its caller's stack (fio_init ... fio_done): no
 * allocation per I/O, and no lock: the bios' end_io count @pending down with
 * one atomic each, and the owner sleeps on it (a futex) only if a bio is
 * still in flight when it looks (a backend that completes inline, pmem,
 * never makes it sleep).
 */
#define FIO_WAITER 0x80000000u /* in pending: the owner sleeps, the last end_io wakes it */

struct fio {
	struct blk_dev *dev;
	_Atomic uint32_t pending; /* bios in flight, | FIO_WAITER */
	_Atomic int err;          /* first error */
	unsigned nr;              /* owner only: bios queued, not submitted */
	struct blk_bio bio[FIO_BATCH];
};

static inline void fio_init(struct fio *io, struct mfs *fs)
{
	io->dev = fs->dev;
	atomic_init(&io->pending, 0);
	atomic_init(&io->err, 0);
	io->nr = 0;
}

/* Sleep until every bio in flight has ended (fio.c). */
void fio_sleep(struct fio *io);
/* Wake the owner of @io sleeping in fio_sleep (fio.c). */
void fio_wake(struct fio *io);

static inline void fio_end_io(struct blk_bio *bio)
{
	struct fio *io = bio->private;

	if (bio->status != BLK_STS_OK) {
		int none = 0;

		atomic_compare_exchange_strong(&io->err, &none,
		                               -blk_status_to_errno((enum blk_status)bio->status));
	}
	/*
	 * The last touch of @io unless the owner sleeps: once pending reaches
	 * zero the owner may return and its stack be reused, so the wake
	 * (a futex on an address that may be stale by then) is all that may
	 * follow, as in blk_submit_bio_wait.
	 */
	if (atomic_fetch_sub_explicit(&io->pending, 1, memory_order_acq_rel) == (FIO_WAITER | 1))
		fio_wake(io);
}

/* Submit the queued bios under one plug and wait for them.  Returns the first error seen. */
static inline int fio_wait(struct fio *io)
{
	struct blk_plug plug;
	unsigned i;

	/*
	 * The batch is submitted here, under one plug, with nothing else done
	 * meanwhile: the map lookups that built it (metadata reads, buffer
	 * locks) ran before, outside any plug.  A single bio needs no plug:
	 * it goes to the backend at once, as the plug would send it.
	 */
	if (io->nr) {
		/* nothing is in flight between fio_waits: a plain store */
		atomic_store_explicit(&io->pending, io->nr, memory_order_relaxed);
		if (io->nr == 1) {
			blk_submit_bio(io->dev, &io->bio[0]);
		} else {
			blk_start_plug_nr_ios(&plug, (unsigned short)io->nr);
			for (i = 0; i < io->nr; i++)
				blk_submit_bio(io->dev, &io->bio[i]);
			blk_finish_plug(&plug);
		}
		io->nr = 0;
		if (atomic_load_explicit(&io->pending, memory_order_acquire))
			fio_sleep(io); /* a backend completing elsewhere (uring) */
	}
	return atomic_load_explicit(&io->err, memory_order_relaxed);
}

/* Submit and wait for what is queued, and end @io.  Returns the first error seen. */
static inline int fio_done(struct fio *io)
{
	return fio_wait(io);
}

/* Queue one op over @nblk device blocks from @pblk (@buf NULL for WRITE_ZEROES): fio_wait submits.
 */
static inline void fio_submit(struct fio *io, enum blk_op op, uint64_t pblk, void *buf,
                              uint64_t nblk, unsigned flags, struct blk_recovery *rec)
{
	while (nblk) {
		uint64_t n = nblk < BIO_MAX_BLOCKS ? nblk : BIO_MAX_BLOCKS;
		struct blk_bio *bio;

		if (io->nr == FIO_BATCH)
			fio_wait(io); /* keeps io->err */
		bio = &io->bio[io->nr++];
		__blk_bio_init(bio, op, pblk * MFS_SECTORS_PER_BLOCK, buf, (uint32_t)(n * BS),
		               fio_end_io, io);
		bio->flags = (uint8_t)flags;
		bio->rec = rec;
		pblk += n;
		if (buf)
			buf = (uint8_t *)buf + n * BS;
		nblk -= n;
	}
}

/* A bounce block for a partial edge block, aligned for the device; callers keep it on the stack. */
struct bounce {
	_Alignas(BS) uint8_t b[BS];
};

/*
 * The unit of poison on the device, in bytes: the 512-byte sector on pmem and
 * on devices with 512-byte logical blocks, the logical block otherwise (a
 * device cannot lose less, nor be written in less).  Asked only once poison
 * was met.
 */
static inline unsigned poison_unit(struct mfs *fs)
{
	struct blk_dev_info info;

	blk_dev_get_info(fs->dev, &info);
	return info.logical_block_size > BLK_SECTOR_SIZE ? info.logical_block_size
	                                                 : BLK_SECTOR_SIZE;
}

/* --- zeroing in place (fio.c) -------------------------------------------------------- */

/* Zero bytes [from, to) of file block @lblk where it holds written data.  Returns 0 or -errno. */
int mfs_file_zero_partial(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, unsigned from,
                          unsigned to);
/*
 * The size grows from @old to @new: zero the bytes past the old EOF in its
 * last block, before the new size is set.  Returns 0 or -errno.
 */
int mfs_file_zero_past_eof(struct mfs *fs, struct mfs_ino *ip, uint64_t old, uint64_t new);

#endif /* MENDFS_FS_FIO_H */
