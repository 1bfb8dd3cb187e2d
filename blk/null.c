/* SPDX-License-Identifier: MIT */
/*
 * The null backend: requests complete as soon as they are dispatched, moving
 * no data.  It exists to measure the engine itself (submit, tag, plug, merge,
 * dispatch, complete) with nothing behind it.
 */
#include <errno.h>

#include "blk_internal.h"

#define BLK_NULL_DEFAULT_SIZE (1ull << 40)

static int blk_null_open(struct blk_dev *dev, const struct blk_dev_config *cfg, char *err,
                         size_t errlen)
{
	uint64_t size = cfg->size ? cfg->size : BLK_NULL_DEFAULT_SIZE;

	if (size < 4096) {
		blk_err(err, errlen, "null device: size %llu is below 4 KiB",
		        (unsigned long long)size);
		return -EINVAL;
	}
	dev->nr_sectors = size >> BLK_SECTOR_SHIFT;
	dev->size = dev->nr_sectors << BLK_SECTOR_SHIFT;
	dev->byte_granular = true;
	dev->lbs_mask = 0;
	return 0;
}

static void blk_null_close(struct blk_dev *dev)
{
	(void)dev;
}

static int blk_null_init_hctx(struct blk_hw_queue *hctx)
{
	(void)hctx;
	return 0;
}

static void blk_null_exit_hctx(struct blk_hw_queue *hctx)
{
	(void)hctx;
}

static struct blk_request *blk_null_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                              struct blk_comp_batch *cb)
{
	struct blk_request *rq, *next;

	(void)hctx;
	for (rq = list; rq; rq = next) {
		next = rq->rq_next;
		rq->status = BLK_STS_OK;
		blk_comp_add(cb, rq);
	}
	return NULL;
}

static int blk_null_read_sync(struct blk_dev *dev, uint64_t pos, void *buf, size_t len,
                              uint64_t *bad)
{
	(void)dev, (void)pos, (void)buf, (void)len, (void)bad;
	return 0;
}

static int blk_null_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len)
{
	(void)dev, (void)pos, (void)buf, (void)len;
	return 0;
}

static int blk_null_clear_poison(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	(void)dev, (void)sector, (void)nr;
	return 0;
}

static int blk_null_flush_sync(struct blk_dev *dev)
{
	(void)dev;
	return 0;
}

const struct blk_backend_ops blk_null_ops = {
        .name = "null",
        .concurrent = true,
        .async = false,
        .open = blk_null_open,
        .close = blk_null_close,
        .init_hctx = blk_null_init_hctx,
        .exit_hctx = blk_null_exit_hctx,
        .queue_rqs = blk_null_queue_rqs,
        .read_sync = blk_null_read_sync,
        .write_sync = blk_null_write_sync,
        .clear_poison = blk_null_clear_poison,
        .flush_sync = blk_null_flush_sync,
};
