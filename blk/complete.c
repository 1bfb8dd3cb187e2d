/* SPDX-License-Identifier: MIT */
/*
 * Completion: ending bios and requests.  Backends complete a request either
 * into a struct blk_comp_batch that blk_mq_end_request_batch() ends in bulk
 * (tags freed a word at a time), or piecewise with blk_update_request() and
 * blk_end_bio().  Calls tags.c only.
 */

#include "blk_internal.h"

static inline void blk_bio_endio(struct blk_hw_queue *hctx, struct blk_bio *bio)
{
	if (unlikely(bio->flags & BLK_BIO_TRACKED)) {
		/* the policy may have been detached while the bio was in flight */
		const struct blk_qos_ops *qos = __atomic_load_n(&hctx->dev->qos, __ATOMIC_ACQUIRE);

		if (qos)
			qos->done(hctx->dev->qos_priv, bio);
	}
	bio->end_io(bio);
}

void blk_end_bio(struct blk_hw_queue *hctx, struct blk_bio *bio, enum blk_status sts)
{
	if (sts == BLK_STS_OK && !bio->status)
		bio->done = bio->len;
	else if (!bio->status)
		bio->status = (uint8_t)sts;
	if (unlikely(bio->status))
		blk_count_error(hctx, bio->status);
	blk_bio_endio(hctx, bio);
}

bool blk_update_request(struct blk_request *rq, enum blk_status sts, uint32_t nbytes)
{
	struct blk_bio *bio;

	while (nbytes && (bio = rq->bio)) {
		uint32_t left = bio->len - bio->done;

		if (sts != BLK_STS_OK && !bio->status)
			bio->status = (uint8_t)sts;
		if (nbytes >= left) {
			rq->bio = bio->bi_next;
			rq->len -= left;
			nbytes -= left;
			bio->bi_next = NULL;
			blk_end_bio(rq->hctx, bio, sts);
		} else {
			bio->done += nbytes;
			rq->len -= nbytes;
			nbytes = 0;
		}
	}
	if (!rq->bio) {
		rq->biotail = NULL;
		return false;
	}
	rq->sector = rq->bio->sector + (rq->bio->done >> BLK_SECTOR_SHIFT);
	return true;
}

/* End the bios still attached to a request with the request's status. */
static inline void blk_end_bio_chain(struct blk_hw_queue *hctx, struct blk_bio *bio, uint8_t status,
                                     uint64_t bad_sector)
{
	struct blk_bio *next;

	if (likely(status == BLK_STS_OK)) {
		for (; bio; bio = next) {
			next = bio->bi_next;
			if (likely(!bio->status))
				bio->done = bio->len;
			else
				blk_count_error(hctx, bio->status);
			blk_bio_endio(hctx, bio);
		}
		return;
	}
	for (; bio; bio = next) {
		next = bio->bi_next;
		if (!bio->status) {
			bio->status = status;
			if (status == BLK_STS_MEDIA) {
				uint64_t end = bio->sector +
				               ((bio->byte_off + bio->len + BLK_SECTOR_SIZE - 1) >>
				                BLK_SECTOR_SHIFT);
				bio->bad_sector = bad_sector >= bio->sector && bad_sector < end
				                          ? bad_sector
				                          : bio->sector;
			}
		}
		blk_count_error(hctx, bio->status);
		blk_bio_endio(hctx, bio);
	}
}

#define BLK_END_CHUNK 32

/*
 * End a batch of requests.  Tags are freed before the bios end (in chunks),
 * so an end_io that submits new I/O finds the tags it needs even when the
 * batch held all of them; the bio chains are detached first, so a request
 * reused at once by another thread is never read again here.
 */
void blk_mq_end_request_batch(struct blk_comp_batch *cb)
{
	struct blk_request *rq = cb->head, *next;

	cb->head = cb->tail = NULL;
	cb->count = 0;
	if (likely(rq && !rq->rq_next)) {
		/* one request (a synchronous 4 KiB I/O): no arrays of chunks, the same order */
		struct blk_hw_queue *hctx = rq->hctx;
		struct blk_bio *bio = rq->bio;
		uint64_t bad_sector = rq->bad_sector;
		uint8_t status = rq->status;

		blk_tag_put(&hctx->tags, rq->tag);
		blk_end_bio_chain(hctx, bio, status, bad_sector);
		return;
	}
	while (rq) {
		struct {
			struct blk_bio *bio;
			uint64_t bad_sector;
			uint8_t status;
		} done[BLK_END_CHUNK];
		struct blk_hw_queue *cur = rq->hctx;
		uint64_t masks[64]; /* nr_words <= 64: see blk_tags_bits_per_word() */
		uint64_t touched = 0;
		unsigned n = 0, i;

		for (; rq && n < BLK_END_CHUNK && rq->hctx == cur; rq = next, n++) {
			struct blk_tags *tags = &cur->tags;
			unsigned w = rq->tag >> tags->shift;
			uint64_t bit = 1ull << (rq->tag & (tags->bits_per_word - 1));

			next = rq->rq_next;
			done[n].bio = rq->bio;
			done[n].status = rq->status;
			done[n].bad_sector = rq->bad_sector;
			if (!(touched & (1ull << w))) {
				touched |= 1ull << w;
				masks[w] = 0;
			}
			masks[w] |= bit;
		}
		while (touched) {
			unsigned w = __builtin_ctzll(touched);

			touched &= touched - 1;
			blk_tags_put_mask(&cur->tags, w, masks[w]);
		}
		for (i = 0; i < n; i++)
			blk_end_bio_chain(cur, done[i].bio, done[i].status, done[i].bad_sector);
	}
}
