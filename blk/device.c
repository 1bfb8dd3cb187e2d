/* SPDX-License-Identifier: MIT */
/*
 * Devices: open (validate the configuration, pick the backend, set up the
 * hardware queues and tags, load the poison table), close (drain, free),
 * scheduler and QoS attachment, statistics and information.  The top of the
 * engine: the only file besides fault.c that names the backends' ops tables.
 * Calls every lower file (see README.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blk_internal.h"

static _Atomic uint64_t blk_next_dev_id = 1; /* keys the thread-local context cache */

int blk_dev_register_buffer(struct blk_dev *dev, void *addr, size_t len)
{
	if (!dev->ops->register_buffer)
		return 0;
	return dev->ops->register_buffer(dev, addr, len);
}

/* --- scheduler and QoS --------------------------------------------------- */

static bool blk_dev_idle(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++)
		if (!blk_tags_idle(&dev->hctxs[i].tags))
			return false;
	return true;
}

int blk_dev_set_scheduler(struct blk_dev *dev, const char *name)
{
	bool none = !name || !strcmp(name, "none");
	unsigned i, t;

	if (!none && strcmp(name, "deadline"))
		return -EINVAL;
	if (!blk_dev_idle(dev))
		return -EBUSY;
	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];

		if (none) {
			blk_elv_free(hctx->elv);
			hctx->elv = NULL;
		} else if (!hctx->elv) {
			hctx->elv = blk_elv_alloc(name);
			if (!hctx->elv)
				return -ENOMEM;
		}
		/* the flag lives in the request so the fast path never looks at hctx->elv */
		for (t = 0; t < hctx->tags.depth; t++) {
			if (none)
				hctx->tags.rqs[t].rq_flags &= (uint8_t)~RQF_ELV;
			else
				hctx->tags.rqs[t].rq_flags |= RQF_ELV;
		}
	}
	return 0;
}

void blk_dev_set_qos(struct blk_dev *dev, const struct blk_qos_ops *ops, void *priv)
{
	dev->qos_priv = priv;
	__atomic_store_n(&dev->qos, ops, __ATOMIC_RELEASE);
}

/* --- statistics and info -------------------------------------------------- */

void blk_dev_get_stats(struct blk_dev *dev, struct blk_stats *st)
{
	unsigned i, op;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&dev->ctx_lock);
	for (i = 0; i < dev->nr_ctxs; i++) {
		struct blk_ctx_stats *cs = &dev->ctxs[i]->stats;

		for (op = 0; op < BLK_OP_MAX; op++) {
			st->ios[op] += BLK_STAT_READ(cs->ios[op]);
			st->bytes[op] += BLK_STAT_READ(cs->bytes[op]);
		}
		st->requests += BLK_STAT_READ(cs->requests);
		st->merges_back += BLK_STAT_READ(cs->merges_back);
		st->merges_front += BLK_STAT_READ(cs->merges_front);
		st->plug_flushes += BLK_STAT_READ(cs->plug_flushes);
		st->dispatch_batches += BLK_STAT_READ(cs->dispatch_batches);
		st->tag_waits += BLK_STAT_READ(cs->tag_waits);
	}
	pthread_mutex_unlock(&dev->ctx_lock);
	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_cq_stats *cq = &dev->hctxs[i].cq_stats;

		st->errors += atomic_load(&cq->errors);
		st->media_errors += atomic_load(&cq->media_errors);
		st->poison_hits += atomic_load(&cq->poison_hits);
		st->recovered_sectors += atomic_load(&cq->recovered_sectors);
		st->poison_cleared += atomic_load(&cq->poison_cleared);
		st->faults += atomic_load(&cq->faults);
	}
}

int blk_dev_get_queue_stats(struct blk_dev *dev, unsigned q, struct blk_queue_stats *qs)
{
	struct blk_hw_queue *hctx;
	unsigned i, op;

	if (q >= dev->nr_hw_queues)
		return -EINVAL;
	hctx = &dev->hctxs[q];
	memset(qs, 0, sizeof(*qs));
	pthread_mutex_lock(&dev->ctx_lock);
	for (i = 0; i < dev->nr_ctxs; i++) {
		struct blk_ctx_stats *cs = &dev->ctxs[i]->stats;

		if (dev->ctxs[i]->hctx != hctx) /* fixed when the ctx is made */
			continue;
		qs->nr_ctxs++;
		for (op = 0; op < BLK_OP_MAX; op++) {
			qs->ios += BLK_STAT_READ(cs->ios[op]);
			qs->bytes += BLK_STAT_READ(cs->bytes[op]);
		}
		qs->requests += BLK_STAT_READ(cs->requests);
		qs->merges += BLK_STAT_READ(cs->merges_back) + BLK_STAT_READ(cs->merges_front);
		qs->plug_flushes += BLK_STAT_READ(cs->plug_flushes);
		qs->dispatch_batches += BLK_STAT_READ(cs->dispatch_batches);
		qs->tag_waits += BLK_STAT_READ(cs->tag_waits);
	}
	pthread_mutex_unlock(&dev->ctx_lock);
	qs->errors = atomic_load_explicit(&hctx->cq_stats.errors, memory_order_relaxed);
	qs->tags_in_use = blk_tags_busy(&hctx->tags);
	qs->depth = hctx->tags.depth;
	return 0;
}

void blk_dev_get_info(const struct blk_dev *dev, struct blk_dev_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = dev->size;
	info->nr_sectors = dev->nr_sectors;
	info->logical_block_size = dev->byte_granular ? 1 : (unsigned)dev->lbs_mask + 1;
	info->nr_hw_queues = dev->nr_hw_queues;
	info->queue_depth = dev->queue_depth;
	info->max_sectors = dev->max_bytes >> BLK_SECTOR_SHIFT;
	info->max_segments = dev->max_segments;
	info->backend = dev->cfg.backend;
	info->backend_name = dev->ops->name;
	info->direct_access = dev->ops->direct_access != NULL;
	info->byte_granular = dev->byte_granular;
	info->direct_page_cache = dev->direct_page_cache;
	info->emulated_poison = dev->badblocks_path != NULL;
	info->badblocks_path = dev->badblocks_path;
	info->read_only = dev->read_only;
}

int blk_dev_resize(struct blk_dev *dev, uint64_t *old_size, uint64_t *new_size, char *err,
                   size_t errlen)
{
	uint64_t size = dev->size;
	int ret;

	*old_size = *new_size = dev->size;
	if (dev->read_only) {
		blk_err(err, errlen, "%s: opened read-only: it cannot grow", dev->path);
		return -EROFS;
	}
	if (!dev->ops->resize) {
		blk_err(err, errlen, "%s: the %s backend cannot change its size while open",
		        dev->path ? dev->path : "device", dev->ops->name);
		return -EOPNOTSUPP;
	}
	ret = dev->ops->resize(dev, &size, err, errlen);
	if (ret)
		return ret;
	if (size < dev->size) {
		blk_err(err, errlen, "%s: the device shrank (%llu bytes, was %llu)", dev->path,
		        (unsigned long long)size, (unsigned long long)dev->size);
		return -EFBIG;
	}
	/*
	 * Published after the backend can serve the new range.  The poison
	 * summary needs no change: its last chunk stands for everything past
	 * the size it was made for.
	 */
	__atomic_store_n(&dev->nr_sectors, size >> BLK_SECTOR_SHIFT, __ATOMIC_RELEASE);
	__atomic_store_n(&dev->size, size, __ATOMIC_RELEASE);
	*new_size = size;
	return 0;
}

/* --- open and close --------------------------------------------------------- */

static const struct blk_backend_ops *blk_pick_backend(const struct blk_dev_config *cfg,
                                                      enum blk_backend_type *type, char *err,
                                                      size_t errlen)
{
	struct stat st;

	*type = cfg->backend;
	if (cfg->backend == BLK_BACKEND_NULL)
		return &blk_null_ops;
	if (!cfg->path) {
		blk_err(err, errlen, "no device given");
		return NULL;
	}
	if (cfg->backend == BLK_BACKEND_AUTO) {
		if (stat(cfg->path, &st) < 0) {
			blk_err(err, errlen, "%s: %s", cfg->path, strerror(errno));
			errno = errno ? errno : ENOENT;
			return NULL;
		}
		if (S_ISBLK(st.st_mode))
			*type = BLK_BACKEND_URING;
		else if (S_ISCHR(st.st_mode) || S_ISREG(st.st_mode))
			*type = BLK_BACKEND_PMEM;
		else {
			blk_err(err, errlen,
			        "%s: not a devdax device, block device or regular file", cfg->path);
			errno = EINVAL;
			return NULL;
		}
	}
	return *type == BLK_BACKEND_URING ? &blk_uring_ops : &blk_pmem_ops;
}

static int blk_dev_load_poison(struct blk_dev *dev, const struct blk_dev_config *cfg, char *err,
                               size_t errlen)
{
	struct stat st;
	int ret = 0, fd;

	/* lock-free lookups; without the summary (no memory) every lookup locks */
	blk_bb_set_size(&dev->bb, dev->nr_sectors);
	blk_bb_set_size(&dev->latent, dev->nr_sectors);
	/* the unit of poison is the logical block: a device cannot lose less */
	if (!dev->byte_granular)
		blk_bb_set_unit(&dev->bb, ((uint32_t)dev->lbs_mask + 1) >> BLK_SECTOR_SHIFT);
	if (cfg->flags & BLK_CFG_NO_POISON)
		return 0;
	if (cfg->badblocks_path) {
		dev->badblocks_path = strdup(cfg->badblocks_path);
	} else if (dev->path && stat(dev->path, &st) == 0 && S_ISREG(st.st_mode)) {
		if (asprintf(&dev->badblocks_path, "%s.badblocks", dev->path) < 0)
			dev->badblocks_path = NULL;
		if (!dev->badblocks_path)
			return -ENOMEM;
	}
	if (dev->badblocks_path) {
		ret = blk_bb_file_load(&dev->bb, dev->badblocks_path, dev->nr_sectors, err, errlen);
		if (ret)
			return ret;
	}
	/* latent poison: the same rules and format, a file of its own */
	if (!dev->byte_granular)
		blk_bb_set_unit(&dev->latent, ((uint32_t)dev->lbs_mask + 1) >> BLK_SECTOR_SHIFT);
	if (cfg->latent_path) {
		dev->latent_path = strdup(cfg->latent_path);
		if (!dev->latent_path)
			return -ENOMEM;
	} else if (dev->path && stat(dev->path, &st) == 0 && S_ISREG(st.st_mode)) {
		if (asprintf(&dev->latent_path, "%s.latent", dev->path) < 0) {
			dev->latent_path = NULL;
			return -ENOMEM;
		}
	}
	if (dev->latent_path) {
		ret = blk_bb_file_load(&dev->latent, dev->latent_path, dev->nr_sectors, err,
		                       errlen);
		if (ret)
			return ret;
	}
	if (dev->path) {
		fd = open(dev->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ret = blk_bb_load_sources(&dev->bb, fd, dev->path, err, errlen);
			close(fd);
			if (ret)
				return ret;
		}
	}
	if (dev->ops->poison_changed)
		dev->ops->poison_changed(dev, 0, dev->nr_sectors);
	return 0;
}

static void blk_dev_free(struct blk_dev *dev, unsigned hctx_inited, bool backend_open)
{
	unsigned i;

	for (i = 0; i < hctx_inited; i++)
		dev->ops->exit_hctx(&dev->hctxs[i]);
	if (dev->hctxs) {
		for (i = 0; i < dev->nr_hw_queues; i++) {
			blk_elv_free(dev->hctxs[i].elv);
			if (dev->hctxs[i].tags.rqs)
				blk_tags_exit(&dev->hctxs[i].tags);
			pthread_mutex_destroy(&dev->hctxs[i].sq_lock);
			pthread_mutex_destroy(&dev->hctxs[i].cq_lock);
		}
	}
	if (backend_open)
		dev->ops->close(dev);
	for (i = 0; i < dev->nr_ctxs; i++) {
		pthread_mutex_destroy(&dev->ctxs[i]->swq_lock);
		free(dev->ctxs[i]);
	}
	blk_bb_destroy(&dev->bb);
	blk_bb_destroy(&dev->latent);
	if (dev->lock_fd >= 0)
		close(dev->lock_fd);
	pthread_mutex_destroy(&dev->poison_lock);
	pthread_mutex_destroy(&dev->ctx_lock);
	free(dev->hctxs);
	free(dev->path);
	free(dev->badblocks_path);
	free(dev->latent_path);
	free(dev);
}

int blk_dev_open(const struct blk_dev_config *cfg, struct blk_dev **devp, char *err, size_t errlen)
{
	const struct blk_backend_ops *ops;
	enum blk_backend_type type;
	unsigned depth, nr_hw, max_sectors, max_segs, i, inited = 0;
	struct blk_dev *dev;
	int ret;

	*devp = NULL;
	if (err && errlen)
		err[0] = '\0';
	depth = cfg->queue_depth ? cfg->queue_depth : 128;
	nr_hw = cfg->nr_hw_queues ? cfg->nr_hw_queues : 1;
	max_sectors = cfg->max_sectors ? cfg->max_sectors : 256;
	max_segs = cfg->max_segments ? cfg->max_segments : 128;
	if (depth > BLK_MAX_DEPTH || nr_hw > BLK_MAX_HW_QUEUES || max_sectors < 8 ||
	    max_sectors > (1u << 22) || max_segs > 1024) {
		blk_err(err, errlen,
		        "invalid configuration: depth %u (max %u), queues %u (max %u), "
		        "max_sectors %u (8..4194304), max_segments %u (max 1024)",
		        depth, BLK_MAX_DEPTH, nr_hw, BLK_MAX_HW_QUEUES, max_sectors, max_segs);
		return -EINVAL;
	}
	errno = 0;
	ops = blk_pick_backend(cfg, &type, err, errlen);
	if (!ops)
		return -(errno ? errno : EINVAL);

	dev = aligned_alloc(BLK_CACHELINE, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	memset(dev, 0, sizeof(*dev));
	dev->ops = ops;
	dev->id = atomic_fetch_add(&blk_next_dev_id, 1);
	dev->cfg = *cfg;
	dev->cfg.backend = type;
	dev->cfg.path = NULL;
	dev->cfg.badblocks_path = NULL;
	dev->cfg.latent_path = NULL;
	dev->cfg.scheduler = NULL;
	dev->lock_fd = -1;
	dev->queue_depth = depth;
	dev->nr_hw_queues = nr_hw;
	dev->max_bytes = max_sectors << BLK_SECTOR_SHIFT;
	dev->max_segments = (uint16_t)max_segs;
	dev->read_only = cfg->flags & BLK_CFG_READONLY;
	dev->rq_flags_init = (cfg->flags & BLK_CFG_NOMERGE) ? RQF_NOMERGE : 0;
	pthread_mutex_init(&dev->poison_lock, NULL);
	pthread_mutex_init(&dev->ctx_lock, NULL);
	blk_bb_init(&dev->bb);
	blk_bb_init(&dev->latent);
	if (cfg->path && !(dev->path = strdup(cfg->path))) {
		blk_dev_free(dev, 0, false);
		return -ENOMEM;
	}

	if (cfg->path && (cfg->flags & BLK_CFG_EXCL)) {
		dev->lock_fd = open(cfg->path, O_RDONLY | O_CLOEXEC);
		if (dev->lock_fd < 0 || flock(dev->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			blk_err(err, errlen, "%s: %s", cfg->path,
			        ret == -EBUSY ? "device is in use by another process"
			                      : strerror(-ret));
			blk_dev_free(dev, 0, false);
			return ret;
		}
	}

	ret = ops->open(dev, cfg, err, errlen);
	if (ret) {
		blk_dev_free(dev, 0, false);
		return ret;
	}

	dev->hctxs = aligned_alloc(BLK_CACHELINE, sizeof(*dev->hctxs) * nr_hw);
	if (!dev->hctxs) {
		blk_dev_free(dev, 0, true);
		return -ENOMEM;
	}
	memset(dev->hctxs, 0, sizeof(*dev->hctxs) * nr_hw);
	for (i = 0; i < nr_hw; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];
		unsigned t;

		hctx->dev = dev;
		hctx->ops = ops;
		hctx->index = i;
		hctx->polled = ops->async && (cfg->flags & BLK_CFG_POLLED);
		pthread_mutex_init(&hctx->sq_lock, NULL);
		pthread_mutex_init(&hctx->cq_lock, NULL);
		ret = blk_tags_init(&hctx->tags, depth);
		if (ret) {
			blk_err(err, errlen, "cannot allocate %u tags", depth);
			blk_dev_free(dev, inited, true);
			return ret;
		}
		for (t = 0; t < depth; t++)
			hctx->tags.rqs[t].hctx = hctx;
	}
	for (i = 0; i < nr_hw; i++) {
		ret = ops->init_hctx(&dev->hctxs[i]);
		if (ret) {
			blk_err(err, errlen, "%s: cannot set up hardware queue %u: %s",
			        cfg->path ? cfg->path : ops->name, i, strerror(-ret));
			blk_dev_free(dev, inited, true);
			return ret;
		}
		inited++;
	}

#if BLK_POISON_CHECKS
	ret = blk_guard_install();
	if (ret) {
		blk_err(err, errlen, "cannot install the fault guard: %s", strerror(-ret));
		blk_dev_free(dev, inited, true);
		return ret;
	}
#endif
	ret = blk_dev_load_poison(dev, cfg, err, errlen);
	if (ret) {
		blk_dev_free(dev, inited, true);
		return ret;
	}
	if (cfg->scheduler && (ret = blk_dev_set_scheduler(dev, cfg->scheduler))) {
		blk_err(err, errlen, "unknown scheduler '%s' (none, deadline)", cfg->scheduler);
		blk_dev_free(dev, inited, true);
		return ret;
	}
	ret = blk_dev_registry_add(dev);
	if (ret) {
		blk_err(err, errlen, "too many open devices");
		blk_dev_free(dev, inited, true);
		return ret;
	}
	*devp = dev;
	return 0;
}

/* Wait for every tag of every queue to come back. */
static void blk_dev_drain(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++) {
		struct blk_hw_queue *hctx = &dev->hctxs[i];
		struct blk_tags *tags = &hctx->tags;

		while (!blk_tags_idle(tags)) {
			struct timespec ts = {0, 1000 * 1000};
			uint32_t seq = atomic_load(&tags->wake_seq);

			if (hctx->polled) {
				blk_poll_hctx(hctx, 0);
				ts.tv_nsec = 100 * 1000;
			}
			atomic_fetch_add(&tags->waiters, 1);
			if (!blk_tags_idle(tags))
				blk_futex(&tags->wake_seq, FUTEX_WAIT, seq, &ts);
			atomic_fetch_sub(&tags->waiters, 1);
		}
	}
}

void blk_dev_close(struct blk_dev *dev)
{
	if (!dev)
		return;
	blk_mq_unregister_dev(dev);
	blk_dev_drain(dev);
	blk_dev_free(dev, dev->nr_hw_queues, true);
}
