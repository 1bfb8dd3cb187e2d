/* SPDX-License-Identifier: MIT */
/*
 * The pmem backend's private header: its device state and the functions its
 * two files share (pmem.c: durability, the I/O path and the synchronous
 * path; pmem_setup.c: poison on the mapping, open and close, the ops table).
 */
#ifndef MENDFS_BLK_PMEM_H
#define MENDFS_BLK_PMEM_H

#include <libpmem2.h>

#include "blk_internal.h"

#define PMEM_CHUNK_SHIFT 16 /* dirty tracking unit on page-granular mappings: 64 KiB */
#define PMEM_MIN_SIZE    4096u
#define PMEM_MAX_RETRY   8 /* a fault that keeps changing its mind is treated as poison */
/* Address space reserved for online growth: 16 times the size, at most 1 TiB more. */
#define PMEM_RSV_FACTOR    16u
#define PMEM_RSV_MAX_EXTRA (1ull << 40)

struct pmem_dev {
	char *addr;      /* the mapping */
	size_t map_size; /* bytes mapped (>= dev->size) */
	int fd;
	bool devdax;
	bool page_gran; /* persistence is msync */
	bool emulate;   /* image file: poisoned pages are PROT_NONE */
	bool ro;
	struct pmem2_source *src;
	struct pmem2_map *map;
	/*
	 * Online growth (blk_dev_resize) of a writable image file: the mapping
	 * lies at the start of an address-space reservation of rsv_size bytes
	 * (the rest PROT_NONE), and each growth maps the file's new tail right
	 * after it, so pd->addr never moves and lock-free readers keep their
	 * pointers.  The per-chunk and per-page arrays below are sized for the
	 * whole reservation.  NULL, 0: no reservation (devdax, read-only, or
	 * none could be had): the size is fixed.
	 */
	struct pmem2_vm_reservation *rsv;
	size_t rsv_size;
	struct pmem2_map **tails; /* the growths' mappings, in order */
	unsigned nr_tails;
	pmem2_memcpy_fn memcpy_fn;
	pmem2_memset_fn memset_fn;
	pmem2_drain_fn drain_fn;

	/* page granularity: 64 KiB chunks written through the mapping since their last msync */
	_Atomic uint64_t *dirty;
	size_t nr_dirty_words;
	/* a pwrite() to the fd since the last fdatasync() */
	atomic_bool fd_dirty;
	/*
	 * An image file (page granularity, not devdax, writable): 64 KiB chunks of
	 * the mapping populated writable by madvise(MADV_POPULATE_WRITE) at the
	 * first store of less than a page into them (larger ones are pwrite(2)s:
	 * PMEM_FD_STORE_MIN) (pmem_populate), so that a store takes no page
	 * fault per page.  NULL when not used (or the kernel lacks it).
	 */
	_Atomic uint64_t *populated;
	/*
	 * An image file (page granularity, not devdax): 64 KiB chunks populated
	 * readable by madvise(MADV_POPULATE_READ) at the first direct access
	 * (blk_direct_access, the filesystem's zero-copy reads) or load through
	 * the mapping (pmem_load), so that no copy out of the mapping faults in
	 * a page (pmem_populate_read).
	 * NULL when not used.
	 */
	_Atomic uint64_t *rpopulated;

	/* emulation: bit per page, set while the page is PROT_NONE because of poison */
	pthread_mutex_t emul_lock; /* serialises protection changes and fault classification */
	_Atomic uint64_t *prot;
	_Atomic uint64_t nr_prot; /* pages protected: the fast path reads only this */
	size_t nr_pages;
	unsigned page_shift;
	int prot_rw; /* protection of an accessible page */
};

static inline bool pmem_page_protected(struct pmem_dev *pd, size_t page)
{
	return (atomic_load_explicit(&pd->prot[page >> 6], memory_order_acquire) >> (page & 63)) &
	       1;
}

#if BLK_POISON_CHECKS
/* Any page of [pos, pos + len) protected?  Only called when nr_prot != 0. */
static inline bool pmem_range_protected(struct pmem_dev *pd, uint64_t pos, uint64_t len)
{
	size_t p, last;

	if (len == 0)
		return false;
	last = (pos + len - 1) >> pd->page_shift;
	for (p = pos >> pd->page_shift; p <= last; p++)
		if (pmem_page_protected(pd, p))
			return true;
	return false;
}
#endif

/* libpmem2's errors as an errno (pmem.c). */
int blk_pmem_errno(int ret);

/* The I/O path (pmem.c). */
struct blk_request *blk_pmem_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                       struct blk_comp_batch *cb);
int blk_pmem_read_sync(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, uint64_t *bad);
int blk_pmem_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len);
int blk_pmem_flush_sync(struct blk_dev *dev);
/* Populate the chunks of [@pos, @pos + @len) for reading, once each (pmem.c). */
void pmem_populate_read(struct pmem_dev *pd, uint64_t pos, size_t len);

#endif /* MENDFS_BLK_PMEM_H */
