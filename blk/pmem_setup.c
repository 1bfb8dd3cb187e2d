/* SPDX-License-Identifier: MIT */
/*
 * The pmem backend's set-up and poison handling on the mapping: clearing
 * poison on a devdax device, making poisoned pages of an image inaccessible
 * (PROT_NONE) so that a stray load faults, direct access, open (map the
 * device or image with libpmem2, an image inside an address space
 * reservation), growth while open (the new tail mapped into the
 * reservation), close, and the ops table.  Calls pmem.c
 * (the I/O path), guard.c, status.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pmem.h"

/* ---- poison ---------------------------------------------------------- */

static int pmem_clear_poison(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	struct pmem_dev *pd = dev->drv;
	struct pmem2_badblock_context *bbctx;
	struct pmem2_badblock bb;
	uint64_t lo = sector << BLK_SECTOR_SHIFT, hi = (sector + nr) << BLK_SECTOR_SHIFT;
	int ret;

	/* An image's poison is emulated: there is nothing on the media to clear. */
	if (!pd->devdax)
		return 0;
	ret = pmem2_badblock_context_new(&bbctx, pd->src);
	if (ret)
		return -blk_pmem_errno(ret);
	while ((ret = pmem2_badblock_next(bbctx, &bb)) == 0) {
		uint64_t b0 = bb.offset, b1 = bb.offset + bb.length;

		if (b1 <= lo || b0 >= hi)
			continue;
		/* Clip: clearing outside the range would leave content undefined there. */
		bb.offset = b0 > lo ? b0 : lo;
		bb.length = (b1 < hi ? b1 : hi) - bb.offset;
		ret = pmem2_badblock_clear(bbctx, &bb);
		if (ret)
			break;
	}
	pmem2_badblock_context_delete(&bbctx);
	if (ret == PMEM2_E_NO_BAD_BLOCK_FOUND || ret == 0)
		return 0;
	return -blk_pmem_errno(ret);
}

#if BLK_POISON_CHECKS
/* Protect or unprotect pages [p0, p1) where their state differs.  Caller holds emul_lock. */
static void pmem_set_pages(struct pmem_dev *pd, size_t p0, size_t p1, bool protect)
{
	size_t p = p0;

	/* nothing is protected (every open, and whenever no poison is known): nothing to undo */
	if (!protect && atomic_load_explicit(&pd->nr_prot, memory_order_acquire) == 0)
		return;
	while (p < p1) {
		size_t q, i;

		/* a whole word already in the wanted state: 64 pages at once (an open scans
		 * every page of the device: 16 G pages for 64 TiB) */
		if ((p & 63) == 0 && p1 - p >= 64 &&
		    atomic_load_explicit(&pd->prot[p >> 6], memory_order_acquire) ==
		            (protect ? ~0ull : 0)) {
			p += 64;
			continue;
		}
		if (pmem_page_protected(pd, p) == protect) {
			p++;
			continue;
		}
		for (q = p + 1; q < p1 && pmem_page_protected(pd, q) != protect; q++)
			;
		if (protect) {
			/* bits first: a fault seen after mprotect must find them set */
			for (i = p; i < q; i++)
				atomic_fetch_or(&pd->prot[i >> 6], 1ull << (i & 63));
			atomic_fetch_add(&pd->nr_prot, q - p);
			if (mprotect(pd->addr + (p << pd->page_shift), (q - p) << pd->page_shift,
			             PROT_NONE) < 0) {
				/* Out of VMAs: readable after all; the table still guards it. */
				for (i = p; i < q; i++)
					atomic_fetch_and(&pd->prot[i >> 6], ~(1ull << (i & 63)));
				atomic_fetch_sub(&pd->nr_prot, q - p);
			}
		} else if (mprotect(pd->addr + (p << pd->page_shift), (q - p) << pd->page_shift,
		                    pd->prot_rw) == 0) {
			for (i = p; i < q; i++)
				atomic_fetch_and(&pd->prot[i >> 6], ~(1ull << (i & 63)));
			atomic_fetch_sub(&pd->nr_prot, q - p);
		}
		p = q;
	}
}
#endif

/*
 * The table changed over [sector, sector + nr): make every page touching the
 * range inaccessible iff one of its sectors is poisoned (image files only).
 */
static void pmem_poison_changed(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
#if BLK_POISON_CHECKS
	struct pmem_dev *pd = dev->drv;
	unsigned spp_shift = pd->page_shift - BLK_SECTOR_SHIFT;
	struct blk_range r[64];
	uint64_t s0, s1, cur;
	size_t p0, p1, p;

	if (!pd->emulate || nr == 0 || sector >= dev->nr_sectors)
		return;
	if (nr > dev->nr_sectors - sector)
		nr = dev->nr_sectors - sector;
	p0 = sector >> spp_shift;
	p1 = ((sector + nr - 1) >> spp_shift) + 1;
	s0 = (uint64_t)p0 << spp_shift;
	s1 = (uint64_t)p1 << spp_shift;
	if (s1 > dev->nr_sectors)
		s1 = dev->nr_sectors;

	pthread_mutex_lock(&pd->emul_lock);
	p = p0;
	for (cur = s0; cur < s1;) {
		unsigned n = blk_bb_lookup(&dev->bb, cur, s1 - cur, r, 64, NULL), i;

		for (i = 0; i < n; i++) {
			size_t rp0 = r[i].sector >> spp_shift;
			size_t rp1 = ((r[i].sector + r[i].nr - 1) >> spp_shift) + 1;

			if (rp0 > p)
				pmem_set_pages(pd, p, rp0, false);
			if (rp1 > p) {
				pmem_set_pages(pd, rp0 > p ? rp0 : p, rp1, true);
				p = rp1;
			}
		}
		if (n < 64)
			break;
		cur = r[n - 1].sector + r[n - 1].nr;
	}
	if (p < p1)
		pmem_set_pages(pd, p, p1, false);
	pthread_mutex_unlock(&pd->emul_lock);
#else
	/* No checks compiled in: nothing may fault, so nothing is protected. */
	(void)dev, (void)sector, (void)nr;
#endif
}

static void *pmem_direct_access(struct blk_dev *dev, uint64_t pos, size_t len)
{
	struct pmem_dev *pd = dev->drv;

	if (unlikely(pos > pd->map_size || len > pd->map_size - pos))
		return NULL;
#if BLK_POISON_CHECKS
	if (unlikely(!blk_bb_empty(&dev->bb)) && len) {
		/* A poisoned page faults as a whole (hwpoison on devdax, PROT_NONE on an image). */
		uint64_t page = ((uint64_t)1 << pd->page_shift) - 1;
		uint64_t s0 = (pos & ~page) >> BLK_SECTOR_SHIFT;
		uint64_t s1 = ((pos + len + page) & ~page) >> BLK_SECTOR_SHIFT;

		if (s1 > dev->nr_sectors)
			s1 = dev->nr_sectors;
		if (pd->emulate ? pmem_range_protected(pd, pos, len)
		                : blk_bb_check(&dev->bb, s0, s1 - s0, NULL))
			return NULL;
	}
#endif
	pmem_populate_read(pd, pos, len);
	return pd->addr + pos;
}

/* ---- open / close ---------------------------------------------------- */

static void pmem_free(struct pmem_dev *pd)
{
	while (pd->nr_tails)
		pmem2_map_delete(&pd->tails[--pd->nr_tails]);
	free(pd->tails);
	if (pd->map)
		pmem2_map_delete(&pd->map);
	if (pd->rsv)
		pmem2_vm_reservation_delete(&pd->rsv);
	if (pd->src)
		pmem2_source_delete(&pd->src);
	if (pd->fd >= 0)
		close(pd->fd);
	free(pd->dirty);
	free(pd->populated);
	free(pd->rpopulated);
	free(pd->prot);
	pthread_mutex_destroy(&pd->emul_lock);
	free(pd);
}

static int pmem_err(char *err, size_t errlen, const char *path, int ret, const char *what)
{
	blk_err(err, errlen, "%s: %s: %s", path, what, pmem2_errormsg());
	return -blk_pmem_errno(ret);
}

/*
 * Reserve address space for online growth and point @pcfg's mapping at its
 * start.  Best effort: without a reservation the device keeps its size.
 */
static void pmem_reserve(struct pmem_dev *pd, struct pmem2_config *pcfg, size_t size)
{
	size_t align = 0, extra, len;

	if (pmem2_source_alignment(pd->src, &align) || !align || (align & (align - 1)))
		return;
	extra = size > PMEM_RSV_MAX_EXTRA / (PMEM_RSV_FACTOR - 1) ? PMEM_RSV_MAX_EXTRA
	                                                          : size * (PMEM_RSV_FACTOR - 1);
	len = (size + extra + align - 1) & ~(align - 1);
	if (pmem2_vm_reservation_new(&pd->rsv, NULL, len)) {
		pd->rsv = NULL;
		return;
	}
	if (pmem2_config_set_vm_reservation(pcfg, pd->rsv, 0)) {
		pmem2_vm_reservation_delete(&pd->rsv);
		return;
	}
	pd->rsv_size = len;
}

/*
 * The file grew: map its new tail into the reservation, right after what is
 * mapped, so the mapping's address stays.  Writers of the filesystem are
 * frozen by the caller; readers of the old range are unaffected, and no one
 * addresses the new range before the new size is published.  The bytes are
 * returned in *@size.
 */
static int pmem_resize(struct blk_dev *dev, uint64_t *size, char *err, size_t errlen)
{
	struct pmem_dev *pd = dev->drv;
	struct pmem2_config *pcfg = NULL;
	struct pmem2_map *m = NULL, **tails;
	size_t align = 0, mapped;
	struct stat st;
	int ret;

	*size = dev->size;
	if (pd->devdax) {
		blk_err(err, errlen,
		        "%s: a devdax device's size is fixed while it is open: grow it unmounted",
		        dev->path);
		return -EOPNOTSUPP;
	}
	if (pd->ro) {
		blk_err(err, errlen, "%s: opened read-only: it cannot grow", dev->path);
		return -EROFS;
	}
	if (fstat(pd->fd, &st) < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: cannot stat: %s", dev->path, strerror(-ret));
		return ret;
	}
	if ((uint64_t)st.st_size < pd->map_size) {
		blk_err(err, errlen, "%s: the file shrank (%llu bytes, %zu mapped)", dev->path,
		        (unsigned long long)st.st_size, pd->map_size);
		return -EFBIG;
	}
	/* what is mapped ends at a multiple of the alignment: the first mapping and each tail */
	mapped = pmem2_map_get_size(pd->nr_tails ? pd->tails[pd->nr_tails - 1] : pd->map);
	mapped += (size_t)((char *)pmem2_map_get_address(pd->nr_tails ? pd->tails[pd->nr_tails - 1]
	                                                              : pd->map) -
	                   pd->addr);
	if ((uint64_t)st.st_size <= mapped) {
		/* nothing new to map (a rounded-up last page may hold the new bytes) */
		__atomic_store_n(&pd->map_size, (size_t)st.st_size, __ATOMIC_RELEASE);
		*size = (uint64_t)st.st_size & ~(uint64_t)(BLK_SECTOR_SIZE - 1);
		return 0;
	}
	if (!pd->rsv) {
		blk_err(err, errlen,
		        "%s: no address space was reserved to grow this mapping while it is "
		        "open: grow it unmounted",
		        dev->path);
		return -EOPNOTSUPP;
	}
	if ((uint64_t)st.st_size > pd->rsv_size) {
		blk_err(err, errlen,
		        "%s: grew to %llu bytes, past the %zu bytes reserved for growth while it "
		        "is open (16 times its size at open, at most 1 TiB more): grow it "
		        "unmounted",
		        dev->path, (unsigned long long)st.st_size, pd->rsv_size);
		return -EFBIG;
	}
	if (pmem2_source_alignment(pd->src, &align) || !align)
		align = (size_t)1 << pd->page_shift;
	tails = realloc(pd->tails, sizeof(*tails) * (pd->nr_tails + 1));
	if (!tails) {
		blk_err(err, errlen, "%s: out of memory", dev->path);
		return -ENOMEM;
	}
	pd->tails = tails;
	ret = pmem2_config_new(&pcfg);
	if (!ret)
		ret = pmem2_config_set_required_store_granularity(pcfg, PMEM2_GRANULARITY_PAGE);
	if (!ret)
		ret = pmem2_config_set_offset(pcfg, mapped);
	if (!ret)
		ret = pmem2_config_set_length(pcfg, (((size_t)st.st_size - mapped) + align - 1) &
		                                            ~(align - 1));
	if (!ret)
		ret = pmem2_config_set_vm_reservation(pcfg, pd->rsv, mapped);
	if (!ret)
		ret = pmem2_map_new(&m, pcfg, pd->src);
	if (pcfg)
		pmem2_config_delete(&pcfg);
	if (ret)
		return pmem_err(err, errlen, dev->path, ret, "cannot map the grown tail");
	if ((char *)pmem2_map_get_address(m) != pd->addr + mapped ||
	    pmem2_map_get_store_granularity(m) != pmem2_map_get_store_granularity(pd->map)) {
		pmem2_map_delete(&m);
		blk_err(err, errlen, "%s: the grown tail did not map after the rest", dev->path);
		return -EIO;
	}
	pd->tails[pd->nr_tails++] = m;
	if (pd->page_gran)
		__atomic_store_n(&pd->nr_dirty_words,
		                 (((((size_t)st.st_size - 1) >> PMEM_CHUNK_SHIFT) + 1) + 63) / 64,
		                 __ATOMIC_RELEASE);
	pd->nr_pages = (((size_t)st.st_size - 1) >> pd->page_shift) + 1;
	__atomic_store_n(&pd->map_size, (size_t)st.st_size, __ATOMIC_RELEASE);
	*size = (uint64_t)st.st_size & ~(uint64_t)(BLK_SECTOR_SIZE - 1);
	return 0;
}

static int pmem_open(struct blk_dev *dev, const struct blk_dev_config *cfg, char *err,
                     size_t errlen)
{
	struct pmem_dev *pd;
	struct pmem2_config *pcfg = NULL;
	struct stat st;
	size_t size, span;
	long pagesz = sysconf(_SC_PAGESIZE);
	int ret;

	if (!cfg->path) {
		blk_err(err, errlen, "pmem: no device path");
		return -EINVAL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		blk_err(err, errlen, "%s: out of memory", cfg->path);
		return -ENOMEM;
	}
	pd->fd = -1;
	pthread_mutex_init(&pd->emul_lock, NULL);
	pd->ro = cfg->flags & BLK_CFG_READONLY;
	pd->prot_rw = pd->ro ? PROT_READ : PROT_READ | PROT_WRITE;
	pd->page_shift = (unsigned)__builtin_ctzl((unsigned long)(pagesz > 0 ? pagesz : 4096));

	pd->fd = open(cfg->path, (pd->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (pd->fd < 0 && errno == EISDIR) {
		blk_err(err, errlen,
		        "%s: is a directory; the pmem backend needs a regular file or a devdax "
		        "character device",
		        cfg->path);
		ret = -EINVAL;
		goto out_free;
	}
	if (pd->fd < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: cannot open: %s", cfg->path, strerror(-ret));
		goto out_free;
	}
	if (fstat(pd->fd, &st) < 0) {
		ret = -errno;
		blk_err(err, errlen, "%s: cannot stat: %s", cfg->path, strerror(-ret));
		goto out_free;
	}
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
		blk_err(err, errlen,
		        "%s: the pmem backend needs a regular file or a devdax character device",
		        cfg->path);
		ret = -EINVAL;
		goto out_free;
	}
	pd->devdax = S_ISCHR(st.st_mode);
	pd->emulate = !pd->devdax && BLK_POISON_CHECKS;

	ret = pmem2_source_from_fd(&pd->src, pd->fd);
	if (ret) {
		ret = pmem_err(err, errlen, cfg->path, ret,
		               pd->devdax ? "not a devdax device" : "cannot use as a pmem source");
		goto out_free;
	}
	ret = pmem2_source_size(pd->src, &size);
	if (ret) {
		ret = pmem_err(err, errlen, cfg->path, ret, "cannot get size");
		goto out_free;
	}
	if (size < PMEM_MIN_SIZE) {
		blk_err(err, errlen, "%s: too small for a device (%zu bytes, at least %u)",
		        cfg->path, size, PMEM_MIN_SIZE);
		ret = -EINVAL;
		goto out_free;
	}

	ret = pmem2_config_new(&pcfg);
	if (!ret)
		/* PAGE: the weakest we accept, so that a plain file maps too (msync). */
		ret = pmem2_config_set_required_store_granularity(pcfg, PMEM2_GRANULARITY_PAGE);
	if (!ret && pd->ro)
		ret = pmem2_config_set_protection(pcfg, PMEM2_PROT_READ);
	if (ret) {
		ret = pmem_err(err, errlen, cfg->path, ret, "cannot configure the mapping");
		goto out_free;
	}
	/* room to grow online: an image file opened for writing (not devdax) */
	if (!ret && !pd->devdax && !pd->ro)
		pmem_reserve(pd, pcfg, size);
	ret = pmem2_map_new(&pd->map, pcfg, pd->src);
	pmem2_config_delete(&pcfg);
	if (ret && pd->rsv) {
		/* mapping into the reservation failed: map as before, the size then fixed */
		pmem2_vm_reservation_delete(&pd->rsv);
		pd->rsv_size = 0;
		ret = pmem2_config_new(&pcfg);
		if (!ret)
			ret = pmem2_config_set_required_store_granularity(pcfg,
			                                                  PMEM2_GRANULARITY_PAGE);
		if (!ret)
			ret = pmem2_map_new(&pd->map, pcfg, pd->src);
		pmem2_config_delete(&pcfg);
	}
	if (ret) {
		ret = pmem_err(err, errlen, cfg->path, ret, "cannot map");
		goto out_free;
	}
	pd->addr = pmem2_map_get_address(pd->map);
	pd->map_size = pmem2_map_get_size(pd->map);
	if (pd->map_size > size)
		pd->map_size = size;
	pd->page_gran = pmem2_map_get_store_granularity(pd->map) == PMEM2_GRANULARITY_PAGE;
	pd->memcpy_fn = pmem2_get_memcpy_fn(pd->map);
	pd->memset_fn = pmem2_get_memset_fn(pd->map);
	pd->drain_fn = pmem2_get_drain_fn(pd->map);

	span = pd->rsv_size > pd->map_size ? pd->rsv_size : pd->map_size;
	if (pd->page_gran) {
		size_t chunks = ((span - 1) >> PMEM_CHUNK_SHIFT) + 1;

		/* allocated for the reservation, scanned up to the mapped size */
		pd->dirty = calloc((chunks + 63) / 64, sizeof(*pd->dirty));
		/* same unit as the dirty bitmap; no memory given up if it fails */
		if (!pd->devdax && !pd->ro)
			pd->populated = calloc((chunks + 63) / 64, sizeof(*pd->populated));
		if (!pd->devdax)
			pd->rpopulated = calloc((chunks + 63) / 64, sizeof(*pd->rpopulated));
		pd->nr_dirty_words = ((((pd->map_size - 1) >> PMEM_CHUNK_SHIFT) + 1) + 63) / 64;
	}
	pd->nr_pages = ((pd->map_size - 1) >> pd->page_shift) + 1;
	if (pd->emulate)
		pd->prot =
		        calloc((((span - 1) >> pd->page_shift) + 1 + 63) / 64, sizeof(*pd->prot));
	if ((pd->page_gran && !pd->dirty) || (pd->emulate && !pd->prot)) {
		blk_err(err, errlen, "%s: out of memory", cfg->path);
		ret = -ENOMEM;
		goto out_free;
	}
#if BLK_POISON_CHECKS
	ret = blk_guard_install();
	if (ret) {
		blk_err(err, errlen, "%s: cannot install the fault guard: %s", cfg->path,
		        strerror(-ret));
		goto out_free;
	}
#endif

	dev->drv = pd;
	dev->size = pd->map_size & ~(uint64_t)(BLK_SECTOR_SIZE - 1);
	dev->nr_sectors = dev->size >> BLK_SECTOR_SHIFT;
	dev->byte_granular = true;
	dev->direct_page_cache = pd->page_gran && !pd->devdax;
	dev->lbs_mask = 0;
	return 0;

out_free:
	pmem_free(pd);
	return ret;
}

static void pmem_close(struct blk_dev *dev)
{
	struct pmem_dev *pd = dev->drv;

	if (!pd)
		return;
	pmem_free(pd);
	dev->drv = NULL;
}

/* Each queue reaches the device state in one load on the fast path. */
static int pmem_init_hctx(struct blk_hw_queue *hctx)
{
	hctx->drv = hctx->dev->drv;
	return 0;
}

static void pmem_exit_hctx(struct blk_hw_queue *hctx)
{
	hctx->drv = NULL;
}

const struct blk_backend_ops blk_pmem_ops = {
        .name = "pmem",
        .concurrent = true,
        .async = false,
        .open = pmem_open,
        .close = pmem_close,
        .init_hctx = pmem_init_hctx,
        .exit_hctx = pmem_exit_hctx,
        .queue_rqs = blk_pmem_queue_rqs,
        .read_sync = blk_pmem_read_sync,
        .write_sync = blk_pmem_write_sync,
        .clear_poison = pmem_clear_poison,
        .poison_changed = pmem_poison_changed,
        .direct_access = pmem_direct_access,
        .flush_sync = blk_pmem_flush_sync,
        .resize = pmem_resize,
};
