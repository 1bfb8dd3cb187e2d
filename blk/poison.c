/* SPDX-License-Identifier: MIT */
/*
 * Poison bookkeeping above the table (badblocks.c): recording poison found
 * by a fault or a device error, forgetting it after a full overwrite (table,
 * emulation file, then the backend's poison_changed hook), latent poison
 * found by a read, the notifier told of every new poison (the filesystem's
 * damage events), the public blk_poison_* calls and blk_direct_access(),
 * which refuses poisoned ranges, and blk_dev_refresh_badblocks() (the
 * device's badblocks sources read again, bbsource.c, for a scrub's start);
 * blk_direct_load() runs the caller's loads from such a range under the fault
 * guard (guard.c).
 * Calls badblocks.c and bbsource.c; the backend only through dev->ops.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "blk_internal.h"

static bool blk_range_ok(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	return nr && sector < dev->nr_sectors && nr <= dev->nr_sectors - sector;
}

/*
 * Tell the notifier which parts of [sector, sector + nr), widened to the
 * table's unit, are not in the table yet (poison_lock held, before the add).
 * More than 16 old ranges inside it: the whole range, once.
 */
static void __blk_poison_notify(struct blk_dev *dev, uint64_t sector, uint64_t nr,
                                enum blk_poison_cause cause)
{
	uint64_t unit = dev->bb.unit ? dev->bb.unit : 1, s, e, pos;
	struct blk_range r[16];
	unsigned n, total, i;

	s = sector & ~(unit - 1);
	e = (sector + nr + unit - 1) & ~(unit - 1);
	if (e > dev->nr_sectors)
		e = dev->nr_sectors;
	n = blk_bb_lookup(&dev->bb, s, e - s, r, 16, &total);
	if (total > n) {
		dev->poison_notify(dev->poison_notify_priv, s, e - s, cause);
		return;
	}
	for (pos = s, i = 0; i <= n; i++) {
		uint64_t gap_end = i < n ? r[i].sector : e;

		if (gap_end > pos)
			dev->poison_notify(dev->poison_notify_priv, pos, gap_end - pos, cause);
		if (i < n)
			pos = r[i].sector + r[i].nr;
	}
}

void blk_dev_set_poison_notify(struct blk_dev *dev, blk_poison_notify_fn *fn, void *priv)
{
	pthread_mutex_lock(&dev->poison_lock);
	dev->poison_notify = fn;
	dev->poison_notify_priv = priv;
	pthread_mutex_unlock(&dev->poison_lock);
}

/* Table, then file, then the backend's view (emulation: protect the pages). */
static int blk_poison_change(struct blk_dev *dev, uint64_t sector, uint64_t nr, bool add,
                             enum blk_poison_cause cause)
{
	int ret;

	pthread_mutex_lock(&dev->poison_lock);
	if (add && dev->poison_notify)
		__blk_poison_notify(dev, sector, nr, cause);
	ret = add ? blk_bb_add(&dev->bb, sector, nr) : blk_bb_clear(&dev->bb, sector, nr);
	if (!ret && dev->badblocks_path)
		ret = blk_bb_file_store(&dev->bb, dev->badblocks_path);
	if (dev->ops->poison_changed)
		dev->ops->poison_changed(dev, sector, nr);
	pthread_mutex_unlock(&dev->poison_lock);
	return ret;
}

int blk_poison_record(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	return blk_poison_change(dev, sector, nr, true, BLK_POISON_FOUND);
}

int blk_poison_forget(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	return blk_poison_change(dev, sector, nr, false, BLK_POISON_FOUND);
}

void blk_latent_touch(struct blk_dev *dev, uint64_t sector, uint64_t nr, bool read)
{
	struct blk_range r[16];
	bool changed = false;
	unsigned n, i;

	pthread_mutex_lock(&dev->poison_lock);
	while ((n = blk_bb_lookup(&dev->latent, sector, nr, r, 16, NULL))) {
		for (i = 0; i < n; i++) {
			blk_bb_clear(&dev->latent, r[i].sector, r[i].nr);
			if (read && dev->poison_notify)
				__blk_poison_notify(dev, r[i].sector, r[i].nr, BLK_POISON_LATENT);
			if (read && !blk_bb_add(&dev->bb, r[i].sector, r[i].nr) &&
			    dev->ops->poison_changed)
				dev->ops->poison_changed(dev, r[i].sector, r[i].nr);
		}
		changed = true;
	}
	if (changed) {
		/* the new poison is written down before the latent file forgets it */
		if (read && dev->badblocks_path)
			blk_bb_file_store(&dev->bb, dev->badblocks_path);
		if (dev->latent_path)
			blk_bb_file_store(&dev->latent, dev->latent_path);
	}
	pthread_mutex_unlock(&dev->poison_lock);
}

int blk_poison_add(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	if (!blk_range_ok(dev, sector, nr))
		return -EINVAL;
	return blk_poison_change(dev, sector, nr, true, BLK_POISON_INJECTED);
}

int blk_poison_clear(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	int ret;

	if (!blk_range_ok(dev, sector, nr))
		return -EINVAL;
	if (dev->read_only)
		return -EROFS;
	ret = dev->ops->clear_poison(dev, sector, nr);
	if (ret)
		return ret;
	return blk_poison_forget(dev, sector, nr);
}

unsigned blk_poison_lookup(struct blk_dev *dev, uint64_t sector, uint64_t nr, struct blk_range *out,
                           unsigned max, unsigned *total)
{
	if (blk_bb_empty(&dev->bb)) {
		if (total)
			*total = 0;
		return 0;
	}
	return blk_bb_lookup(&dev->bb, sector, nr, out, max, total);
}

unsigned blk_poison_count(struct blk_dev *dev)
{
	return atomic_load(&dev->bb.nr);
}

int blk_direct_access(struct blk_dev *dev, uint64_t pos, size_t len, void **addr,
                      uint64_t *bad_sector)
{
	uint64_t first;

	if (!dev->ops->direct_access)
		return -EOPNOTSUPP;
	if (!len || pos >= dev->size || len > dev->size - pos)
		return -EINVAL;
#if BLK_POISON_CHECKS
	/* a load from latent poison is a read that finds it */
	if (unlikely(!blk_bb_empty(&dev->latent)))
		blk_latent_touch(dev, pos >> BLK_SECTOR_SHIFT,
		                 ((pos + len + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT) -
		                         (pos >> BLK_SECTOR_SHIFT),
		                 true);
	if (unlikely(!blk_bb_empty(&dev->bb)) &&
	    blk_bb_check(&dev->bb, pos >> BLK_SECTOR_SHIFT,
	                 ((pos + len + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT) -
	                         (pos >> BLK_SECTOR_SHIFT),
	                 &first)) {
		if (bad_sector)
			*bad_sector = first;
		return -EIO;
	}
#else
	(void)first;
	(void)bad_sector;
#endif
	*addr = dev->ops->direct_access(dev, pos, len);
	return *addr ? 0 : -EOPNOTSUPP;
}

int blk_direct_load(struct blk_dev *dev, const void *addr, size_t len, blk_direct_load_fn *fn,
                    void *arg)
{
	(void)dev;
#if BLK_POISON_CHECKS
	struct blk_guard g;
	int ret;

	if (BLK_GUARD_FAULTED(&g))
		return -EFAULT; /* the handler disarmed the guard */
	blk_guard_arm(&g, addr, len);
	ret = fn(addr, len, arg);
	blk_guard_disarm(&g);
	return ret;
#else
	return fn(addr, len, arg);
#endif
}

/* Sectors of [sector, sector + nr) the table @bb holds. */
static uint64_t bb_held(struct blk_badblocks *bb, uint64_t sector, uint64_t nr)
{
	uint64_t end = sector + nr, sum = 0;
	struct blk_range r[32];
	unsigned n;

	while (sector < end && (n = blk_bb_lookup(bb, sector, end - sector, r, 32, NULL))) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t s = r[i].sector > sector ? r[i].sector : sector;
			uint64_t e = r[i].sector + r[i].nr < end ? r[i].sector + r[i].nr : end;

			if (e > s)
				sum += e - s;
		}
		if (n < 32)
			break;
		sector = r[n - 1].sector + r[n - 1].nr;
	}
	return sum;
}

int blk_dev_refresh_badblocks(struct blk_dev *dev, uint64_t *added)
{
	struct blk_badblocks tmp;
	struct blk_range *r = NULL;
	uint64_t n_added = 0;
	char err[256];
	int ret = 0, n, fd;

	if (added)
		*added = 0;
	if (dev->cfg.flags & BLK_CFG_NO_POISON)
		return 0;
	/* every source into a table of its own first: a failing one changes nothing */
	blk_bb_init(&tmp);
	blk_bb_set_unit(&tmp, dev->bb.unit);
	if (dev->badblocks_path)
		ret = blk_bb_file_load(&tmp, dev->badblocks_path, dev->nr_sectors, err,
		                       sizeof(err));
	if (!ret && dev->path) {
		fd = open(dev->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ret = blk_bb_load_sources(&tmp, fd, dev->path, err, sizeof(err));
			close(fd);
		}
	}
	if (ret)
		goto out;
	n = blk_bb_snapshot(&tmp, &r);
	if (n < 0) {
		ret = n;
		goto out;
	}
	for (int i = 0; i < n && !ret; i++) {
		uint64_t s = r[i].sector, nr = r[i].nr, held;

		if (s >= dev->nr_sectors)
			continue;
		if (nr > dev->nr_sectors - s)
			nr = dev->nr_sectors - s;
		held = bb_held(&dev->bb, s, nr);
		if (held == nr)
			continue;
		/* the notifier sees only the sectors new to the table */
		ret = blk_poison_change(dev, s, nr, true, BLK_POISON_SOURCE);
		if (!ret)
			n_added += nr - held;
	}
	free(r);
out:
	blk_bb_destroy(&tmp);
	if (added)
		*added = n_added;
	return ret;
}
