/* SPDX-License-Identifier: MIT */
/*
 * The poison slow path: a request that meets poison (the dispatch filter saw
 * it intersect the table, or the backend faulted on it) is executed here,
 * synchronously, bio by bio, through the backend's byte-addressed read_sync /
 * write_sync, and each bio ends with its own status (docs/RECOVERY.md):
 *
 *  - read: the clean bytes before the first poisoned sector, then
 *    BLK_STS_MEDIA naming that sector; never a byte of a poisoned sector.
 *  - read with BLK_BIO_RECOVERY: every clean byte; poisoned sectors read as
 *    zeros and are reported in bio->rec.
 *  - write / write-zeroes: a poisoned sector covered whole is cleared
 *    (backend clear, write, then table: a crash in between leaves it marked
 *    poisoned, never falsely clean); one covered in part fails the bio with
 *    BLK_STS_MEDIA, unless BLK_BIO_RECOVERY, which makes its lost bytes zeros.
 *
 * Granularity is the 512-byte sector; on a device whose logical block is
 * larger, the table holds whole logical blocks only (blk_bb_set_unit) and the
 * core admits only whole-block bios, so these rules act on whole logical
 * blocks there.  Nothing here is on the fast path.
 */
#include <errno.h>
#include <string.h>

#include "blk_internal.h"

#define SLOW_RANGES 16

static const char slow_zeros[64 * 1024];

static inline void slow_stat_add(_Atomic uint64_t *ctr, uint64_t n)
{
	atomic_fetch_add_explicit(ctr, n, memory_order_relaxed);
}

/* Report zero-filled sectors [sector, sector + nr) in the bio's recovery record. */
static void slow_rec_add(struct blk_bio *bio, uint64_t sector, uint64_t nr)
{
	struct blk_recovery *rec = bio->rec;

	if (!rec || nr == 0)
		return;
	rec->zeroed += nr;
	if (rec->nr && rec->ranges[rec->nr - 1].sector + rec->ranges[rec->nr - 1].nr == sector) {
		rec->ranges[rec->nr - 1].nr += nr;
	} else if (rec->nr < rec->max) {
		rec->ranges[rec->nr].sector = sector;
		rec->ranges[rec->nr].nr = nr;
		rec->nr++;
	} else {
		rec->truncated = true;
	}
}

/*
 * read_sync [pos, pos + len) of the device into the bio's segments at byte
 * @skip.  Returns 0 or the backend's error (-EIO with *bad: new poison).
 */
static int slow_read_into(struct blk_dev *dev, struct blk_bio *bio, size_t skip, uint64_t pos,
                          size_t len, uint64_t *bad)
{
	unsigned i;

	for (i = 0; i < bio->nr_segs && len; i++) {
		size_t seg = bio->iov[i].iov_len, n;
		int ret;

		if (skip >= seg) {
			skip -= seg;
			continue;
		}
		n = seg - skip < len ? seg - skip : len;
		ret = dev->ops->read_sync(dev, pos, (char *)bio->iov[i].iov_base + skip, n, bad);
		if (ret)
			return ret;
		pos += n;
		len -= n;
		skip = 0;
	}
	return 0;
}

/* write_sync the bio's data (zeros for WRITE_ZEROES) to [pos, pos + bio->len). */
static int slow_write_from(struct blk_dev *dev, struct blk_bio *bio, uint64_t pos)
{
	size_t len = bio->len;
	unsigned i;
	int ret;

	if (bio->op == BLK_OP_WRITE_ZEROES) {
		while (len) {
			size_t n = len < sizeof(slow_zeros) ? len : sizeof(slow_zeros);

			ret = dev->ops->write_sync(dev, pos, slow_zeros, n);
			if (ret)
				return ret;
			pos += n;
			len -= n;
		}
		return 0;
	}
	for (i = 0; i < bio->nr_segs && len; i++) {
		size_t n = bio->iov[i].iov_len < len ? bio->iov[i].iov_len : len;

		ret = dev->ops->write_sync(dev, pos, bio->iov[i].iov_base, n);
		if (ret)
			return ret;
		pos += n;
		len -= n;
	}
	return 0;
}

static int slow_write_zeros(struct blk_dev *dev, uint64_t pos, size_t len)
{
	/* Only the partial sectors of a recovery write: less than a sector each. */
	return len ? dev->ops->write_sync(dev, pos, slow_zeros, len) : 0;
}

/*
 * read_sync found poison the table did not know: make sure it is recorded
 * (pmem's read_sync records it itself; other backends may not).  Returns
 * true if the table now holds @bad.
 */
static bool slow_note_new_poison(struct blk_dev *dev, uint64_t bad)
{
	if (blk_bb_check(&dev->bb, bad, 1, NULL))
		return true;
	blk_poison_record(dev, bad, 1);
	return blk_bb_check(&dev->bb, bad, 1, NULL);
}

static enum blk_status slow_read(struct blk_hw_queue *hctx, struct blk_bio *bio, bool *met)
{
	struct blk_dev *dev = hctx->dev;
	bool recovery = bio->flags & BLK_BIO_RECOVERY;
	uint64_t pos = blk_bio_pos(bio), end = pos + bio->len, c = pos;
	uint64_t s1 = (end + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT;

	bio->done = 0;
	while (c < end) {
		uint64_t cs = c >> BLK_SECTOR_SHIFT, clean_end = end, bad;
		struct blk_range r;
		int ret;

		if (blk_bb_lookup(&dev->bb, cs, s1 - cs, &r, 1, NULL))
			clean_end =
			        r.sector << BLK_SECTOR_SHIFT > c ? r.sector << BLK_SECTOR_SHIFT : c;
		if (clean_end > c) {
			ret = slow_read_into(dev, bio, c - pos, c, clean_end - c, &bad);
			if (ret == -EIO) {
				/* New poison: once it is in the table, redo from c knowing it. */
				if (bad < cs || bad << BLK_SECTOR_SHIFT >= clean_end)
					bad = cs;
				if (slow_note_new_poison(dev, bad))
					continue;
				*met = true;
				bio->bad_sector = bad;
				bio->done = (uint32_t)(c - pos);
				return BLK_STS_MEDIA;
			}
			if (ret) {
				bio->done = (uint32_t)(c - pos);
				return blk_errno_to_status(-ret); /* takes a positive errno */
			}
			c = clean_end;
			if (c == end)
				break;
		}
		/* c is where poisoned sector r.sector starts (or inside it: the bio's start) */
		*met = true;
		if (!recovery) {
			bio->bad_sector = c >> BLK_SECTOR_SHIFT;
			bio->done = (uint32_t)(c - pos);
			return BLK_STS_MEDIA;
		} else {
			uint64_t zend = (r.sector + r.nr) << BLK_SECTOR_SHIFT, zs, nz;

			if (zend > end)
				zend = end;
			zs = c >> BLK_SECTOR_SHIFT; /* clipped to the bio */
			nz = ((zend + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT) - zs;
			blk_bio_zero(bio, c - pos, zend - c);
			slow_rec_add(bio, zs, nz);
			slow_stat_add(&hctx->cq_stats.recovered_sectors, nz);
			c = zend;
		}
	}
	bio->done = bio->len;
	return BLK_STS_OK;
}

/* Visit the poisoned ranges of [s0, s1), clipped, SLOW_RANGES at a time. */
#define slow_for_each_poison(dev, s0, s1, r, n, i, cur)                                            \
	for ((cur) = (s0); (cur) < (s1) && ((n) = blk_bb_lookup(&(dev)->bb, (cur), (s1) - (cur),   \
	                                                        (r), SLOW_RANGES, NULL)) != 0;     \
	     (cur) = (n) < SLOW_RANGES ? (s1) : (r)[(n)-1].sector + (r)[(n)-1].nr)                 \
		for ((i) = 0; (i) < (n); (i)++)

static enum blk_status slow_write(struct blk_hw_queue *hctx, struct blk_bio *bio, bool *met)
{
	struct blk_dev *dev = hctx->dev;
	bool recovery = bio->flags & BLK_BIO_RECOVERY;
	uint64_t pos = blk_bio_pos(bio), end = pos + bio->len;
	uint64_t s0 = pos >> BLK_SECTOR_SHIFT, s1 = (end + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT;
	bool head_lost = false, tail_lost = false;
	struct blk_range r[SLOW_RANGES];
	unsigned n, i;
	uint64_t cur, cleared = 0;
	int ret;

	bio->done = 0;
	if (unlikely(!dev->ops->write_sync))
		return BLK_STS_NOTSUPP;
	if (dev->read_only)
		return BLK_STS_ROFS;
	if (bio->len == 0)
		return BLK_STS_OK;

	/* Decide before touching anything: a poisoned sector covered only in part? */
	if ((pos & (BLK_SECTOR_SIZE - 1)) && blk_bb_check(&dev->bb, s0, 1, NULL))
		head_lost = true;
	if ((end & (BLK_SECTOR_SIZE - 1)) && blk_bb_check(&dev->bb, s1 - 1, 1, NULL))
		tail_lost = true;
	if (head_lost || tail_lost) {
		*met = true;
		if (!recovery) {
			bio->bad_sector = head_lost ? s0 : s1 - 1;
			return BLK_STS_MEDIA;
		}
	}

	/* Clear the media under every poisoned sector we now overwrite whole. */
	if (dev->ops->clear_poison) {
		slow_for_each_poison(dev, s0, s1, r, n, i, cur)
		{
			*met = true;
			ret = dev->ops->clear_poison(dev, r[i].sector, r[i].nr);
			if (unlikely(ret)) {
				/* Still poisoned in the table: nothing was written. */
				bio->bad_sector = r[i].sector;
				return BLK_STS_MEDIA;
			}
		}
	}

	/* The data; with recovery, zeros over the lost part of a partial poisoned sector. */
	ret = 0;
	if (head_lost)
		ret = slow_write_zeros(dev, s0 << BLK_SECTOR_SHIFT, pos - (s0 << BLK_SECTOR_SHIFT));
	if (!ret)
		ret = slow_write_from(dev, bio, pos);
	if (!ret && tail_lost)
		ret = slow_write_zeros(dev, end, (s1 << BLK_SECTOR_SHIFT) - end);
	if (unlikely(ret)) {
		uint64_t first;

		/* Poison we cleared is still in the table: the range stays marked. */
		if (ret == -EIO && blk_bb_check(&dev->bb, s0, s1 - s0, &first)) {
			*met = true;
			bio->bad_sector = first;
			return BLK_STS_MEDIA;
		}
		return blk_errno_to_status(-ret); /* takes a positive errno */
	}

	/* Only now is the data in place: forget the poison. */
	slow_for_each_poison(dev, s0, s1, r, n, i, cur)
	{
		*met = true;
		if (blk_poison_forget(dev, r[i].sector, r[i].nr) == 0)
			cleared += r[i].nr;
	}
	if (cleared)
		slow_stat_add(&hctx->cq_stats.poison_cleared, cleared);

	if ((bio->flags & BLK_BIO_FUA) && dev->ops->flush_sync && dev->ops->flush_sync(dev))
		return BLK_STS_IOERR;
	bio->done = bio->len;
	return BLK_STS_OK;
}

static enum blk_status slow_bio(struct blk_hw_queue *hctx, struct blk_bio *bio, bool *met)
{
	struct blk_dev *dev = hctx->dev;

	switch (bio->op) {
	case BLK_OP_READ:
		if (unlikely(!dev->ops->read_sync))
			return BLK_STS_NOTSUPP;
		return slow_read(hctx, bio, met);
	case BLK_OP_WRITE:
	case BLK_OP_WRITE_ZEROES:
		return slow_write(hctx, bio, met);
	case BLK_OP_FLUSH:
		if (dev->ops->flush_sync && dev->ops->flush_sync(dev))
			return BLK_STS_IOERR;
		return BLK_STS_OK;
	default:
		return BLK_STS_NOTSUPP;
	}
}

/*
 * Execute @rq synchronously, ending each bio with its own status, then
 * complete the emptied request into @cb (status OK, no bios left).
 */
void blk_rq_slowpath(struct blk_hw_queue *hctx, struct blk_request *rq, struct blk_comp_batch *cb)
{
	struct blk_bio *bio;
	bool met = false;

	while ((bio = rq->bio) != NULL) {
		enum blk_status sts = slow_bio(hctx, bio, &met);

		/* Detach before ending: end_io may free or reuse the bio. */
		rq->bio = bio->bi_next;
		if (!rq->bio)
			rq->biotail = NULL;
		rq->len = rq->len > bio->len ? rq->len - bio->len : 0;
		if (rq->bio)
			rq->sector = rq->bio->sector;
		bio->bi_next = NULL;
		blk_end_bio(hctx, bio, sts); /* counts errors and media_errors */
	}
	if (met)
		slow_stat_add(&hctx->cq_stats.poison_hits, 1);
	rq->status = BLK_STS_OK;
	blk_comp_add(cb, rq);
}
