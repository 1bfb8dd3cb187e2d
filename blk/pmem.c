/* SPDX-License-Identifier: MIT */
/*
 * pmem backend, the I/O path (set-up and poison on the mapping in
 * pmem_setup.c): the device is mapped with libpmem2 (a devdax character device,
 * or a regular file: an image) and every request is a copy to or from the
 * mapping, done synchronously on the submitting thread.  No syscalls on the
 * data path, with these exceptions on a page-cache mapping (an image file):
 * a store of a page or more is a pwrite(2) and a load of 64 KiB or more a
 * pread(2) (pmem_store, pmem_load; a request of several such segments is one
 * pwritev or preadv, pmem_rq_fd_io), and the first smaller store into a
 * 64 KiB chunk, or the first direct access to it, populates it with one
 * madvise(2) (pmem_populate, pmem_populate_read).
 *
 * Durability follows the mapping's store granularity (docs/design/engine.md §2.7):
 *  - byte / cache line (real pmem): writes use pmem2's memcpy with NODRAIN
 *    (flushes issued, not waited for) and each batch drains once before its
 *    requests complete, so a completed write is durable;
 *  - page (a file in the page cache): persistence is msync, done only where it
 *    is promised (FLUSH, FUA).  Writes mark 64 KiB chunks dirty in a bitmap;
 *    FLUSH msyncs the dirty runs.  pmem2's memcpy on such a mapping msyncs on
 *    every call unless given PMEM2_F_MEM_NOFLUSH, and then it is only a slower
 *    memcpy (measured), so plain memcpy is used.
 *
 * Poison: the batch runs under one armed fault guard (guard.c); a fault
 * records the poison it reveals and hands the request to the slow path.  For
 * an image file, poisoned pages are made inaccessible (mprotect PROT_NONE) so
 * that a stray load really faults; the slow path reads and writes the clean
 * sectors of such pages through the file descriptor (same page cache, coherent).
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

/*
 * libpmem2's errors as an errno: system errors come back negated, its own
 * codes (PMEM2_E_*) mean an unusable source or configuration.  (The library
 * declares pmem2_err_to_errno() but 1.12 does not export it.)
 */
int blk_pmem_errno(int ret)
{
	if (ret >= 0)
		return EIO;
	if (ret == PMEM2_E_NOSUPP)
		return EOPNOTSUPP;
	if (ret <= PMEM2_E_UNKNOWN)
		return EINVAL;
	return -ret;
}

/* ---- durability ------------------------------------------------------ */

static void pmem_mark_chunks(struct pmem_dev *pd, uint64_t c, uint64_t last)
{
	for (; c <= last; c++) {
		_Atomic uint64_t *w = &pd->dirty[c >> 6];
		uint64_t bit = 1ull << (c & 63);

		/* Set only when clear: rewriting a set bit would bounce its line. */
		if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
			atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
	}
}

/*
 * Record that [off, off + len) was stored through a page-granular mapping.
 * The fence orders the data stores before the bit loads: otherwise a flusher
 * could clear a bit we saw set and msync before our stores are visible, and
 * the next FLUSH would not know about them.
 */
static inline void pmem_mark_dirty(struct pmem_dev *pd, uint64_t off, uint64_t len)
{
	if (len == 0)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	pmem_mark_chunks(pd, off >> PMEM_CHUNK_SHIFT, (off + len - 1) >> PMEM_CHUNK_SHIFT);
}

static int pmem_msync(struct pmem_dev *pd, uint64_t off, uint64_t len)
{
	uint64_t start = off & ~(((uint64_t)1 << pd->page_shift) - 1);

	if (off + len > pd->map_size)
		len = pd->map_size - off;
	/* Called directly, not through pmem2's persist fn: that one cannot report msync errors. */
	if (unlikely(msync(pd->addr + start, off + len - start, MS_SYNC) < 0))
		return -errno;
	return 0;
}

/* msync chunks [c0, c1); on failure they stay dirty so that the next FLUSH retries. */
static void pmem_msync_chunks(struct pmem_dev *pd, uint64_t c0, uint64_t c1, int *ret)
{
	int r;

	if (c1 <= c0)
		return;
	r = pmem_msync(pd, c0 << PMEM_CHUNK_SHIFT, (c1 - c0) << PMEM_CHUNK_SHIFT);
	if (unlikely(r)) {
		pmem_mark_chunks(pd, c0, c1 - 1);
		if (!*ret)
			*ret = r;
	}
}

/* Persist the dirty chunks (page granularity) and the fd's writes.  Returns 0 or -errno. */
static int pmem_persist_all(struct pmem_dev *pd)
{
	int ret = 0;

	if (pd->page_gran) {
		/* the pending run of chunks [run0, run1), merged across words */
		uint64_t run0 = 0, run1 = 0;
		size_t i;

		for (i = 0; i < pd->nr_dirty_words; i++) {
			uint64_t w;

			if (!atomic_load_explicit(&pd->dirty[i], memory_order_relaxed))
				continue;
			/* Clear before msync: a store landing after this sets the bit again. */
			w = atomic_exchange_explicit(&pd->dirty[i], 0, memory_order_seq_cst);
			while (w) {
				unsigned b = (unsigned)__builtin_ctzll(w);
				uint64_t x = w >> b;
				unsigned n = ~x ? (unsigned)__builtin_ctzll(~x) : 64;
				uint64_t c0 = ((uint64_t)i << 6) + b;

				w = n + b >= 64 ? 0 : w & ~(((1ull << n) - 1) << b);
				if (c0 != run1) {
					pmem_msync_chunks(pd, run0, run1, &ret);
					run0 = c0;
				}
				run1 = c0 + n;
			}
		}
		pmem_msync_chunks(pd, run0, run1, &ret);
	} else {
		pd->drain_fn();
	}
	if (atomic_load_explicit(&pd->fd_dirty, memory_order_relaxed) &&
	    atomic_exchange(&pd->fd_dirty, false)) {
		if (unlikely(fdatasync(pd->fd) < 0)) {
			if (!ret)
				ret = -errno;
			atomic_store(&pd->fd_dirty, true);
		}
	}
	return ret;
}

int blk_pmem_flush_sync(struct blk_dev *dev)
{
	return pmem_persist_all(dev->drv);
}

/*
 * A store of a page or more into a page-cache mapping (an image file) goes
 * through pwrite(2) instead of the mapping: the kernel copies straight into
 * the page cache, through its own linear mapping.  A store through the
 * process's mapping touches a page of it per 4 KiB: a write fault on a fresh
 * mapping (every mount; on tmpfs each new page is also zeroed first), and a
 * TLB miss on every random 4 KiB store after that, which under this
 * machine's shadow-paged VM cost the daemon a quarter of its CPU time per
 * 4 KiB overwrite in the copy alone (docs/design/engine.md §2.7), more than
 * the syscall.  The same pages either way, so the mapping stays coherent;
 * pmem_fd_io sets fd_dirty, so the next FLUSH fdatasyncs them (and no msync
 * of the range is needed).  Smaller stores (sector-sized pieces) stay in the
 * mapping.  A load is a pread(2) from PMEM_FD_IO_MIN on (pmem_load); a
 * smaller one, and the filesystem's zero-copy reads, use the mapping, whose
 * chunks they populate readable first (pmem_populate_read): stores no longer
 * do it for them.
 */
#define PMEM_FD_STORE_MIN 4096u
#define PMEM_FD_IO_MIN    (64u * 1024)

static int pmem_fd_iov(struct pmem_dev *pd, uint64_t pos, struct iovec *v, int cnt, bool write,
                       uint64_t *failed_at);
static int pmem_fd_io(struct pmem_dev *pd, uint64_t pos, void *buf, size_t len, bool write,
                      uint64_t *failed_at);

/*
 * The first store (of less than a page: PMEM_FD_STORE_MIN) into a 64 KiB
 * chunk of an image's mapping populates the
 * chunk's page tables writable (madvise MADV_POPULATE_WRITE: on tmpfs the
 * pages are allocated, on a disk file their blocks reserved), so that the
 * stores into its 16 pages take one syscall instead of a page fault each (a
 * fault per fresh page is also a trip through the process's mm, which
 * serialises the submitting threads).  Lazy and bounded: a mount populates
 * nothing, and a store makes resident at most the rest of its chunk (a sparse
 * image stays sparse in 64 KiB units), whatever the image's size.  A failure
 * (a page protected for poison, a full tmpfs) marks the chunk all the same:
 * its stores then fault page by page as without this.  Returns nothing.
 */
static __attribute__((noinline)) void pmem_populate(struct pmem_dev *pd, _Atomic uint64_t *bits,
                                                    uint64_t c, uint64_t last, int advice)
{
	for (; c <= last; c++) {
		_Atomic uint64_t *w = &bits[c >> 6];
		uint64_t bit = 1ull << (c & 63), off = c << PMEM_CHUNK_SHIFT;
		size_t len = (size_t)1 << PMEM_CHUNK_SHIFT;

		if (atomic_load_explicit(w, memory_order_relaxed) & bit)
			continue;
		if (off + len > pd->map_size)
			len = pd->map_size - off; /* madvise rounds up to the page */
		/* before Linux 5.14, EINVAL: one failed call per chunk, then faults */
		(void)madvise(pd->addr + off, len, advice);
		atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
	}
}

/* The fast path's check: populate [@off, @off + @len) unless its one chunk is done. */
static inline void pmem_prepare(struct pmem_dev *pd, _Atomic uint64_t *bits, uint64_t off,
                                size_t len, int advice)
{
	uint64_t c = off >> PMEM_CHUNK_SHIFT, last = (off + len - 1) >> PMEM_CHUNK_SHIFT;

	if (bits && len &&
	    (c != last ||
	     !(atomic_load_explicit(&bits[c >> 6], memory_order_relaxed) & (1ull << (c & 63)))))
		pmem_populate(pd, bits, c, last, advice);
}

/*
 * The first direct access to a 64 KiB chunk of an image's mapping, or load
 * of less than PMEM_FD_IO_MIN from it, populates it readable (madvise
 * MADV_POPULATE_READ, the same way as pmem_populate), so that the copy out
 * of the mapping (the kernel's, of a zero-copy read reply; or the engine's)
 * takes no read fault per page: one syscall per chunk instead (stores of a
 * page or more go through pwrite and no longer populate the chunks they
 * write).  Readable only, so the pages of a disk file are not dirtied.
 */
void pmem_populate_read(struct pmem_dev *pd, uint64_t pos, size_t len)
{
	pmem_prepare(pd, pd->rpopulated, pos, len, MADV_POPULATE_READ);
}

static inline void pmem_prepare_store(struct pmem_dev *pd, uint64_t off, size_t len)
{
	pmem_prepare(pd, pd->populated, off, len, MADV_POPULATE_WRITE);
}

/*
 * Store on the fast path; durability as described at the top.  Returns 1
 * when the bytes went through the mapping, 0 through the file descriptor,
 * or -errno.
 */
static inline int pmem_store(struct pmem_dev *pd, uint64_t off, const void *src, size_t len)
{
	uint64_t failed_at;

	if (pd->page_gran) {
		if (len >= PMEM_FD_STORE_MIN && !pd->devdax)
			return pmem_fd_io(pd, off, (void *)src, len, true, &failed_at);
		pmem_prepare_store(pd, off, len);
		memcpy(pd->addr + off, src, len);
	} else {
		pd->memcpy_fn(pd->addr + off, src, len, PMEM2_F_MEM_NODRAIN);
	}
	return 1;
}

/*
 * Load on the fast path.  A large load from a page-cache mapping is a
 * pread(2), for the same reason as a large store is a pwrite: the pages of a
 * fresh mapping (every mount; and stores of 64 KiB or more leave it
 * untouched) cost a read fault per 4 KiB, where the kernel copies straight
 * from the page cache (a cold 1 MiB-block read of a 512 MiB file: see
 * docs/design/engine.md §2.7).  Same pages, so the bytes are the same: the
 * emulation's protected pages are never asked for (the dispatch check sends
 * a request touching known poison to the slow path, latent poison is
 * filtered before that).  A pread that fails (an I/O error of the file's own
 * filesystem) falls back to the mapping, under the batch's guard, which
 * reports the fault.
 */
static inline void pmem_load(struct pmem_dev *pd, void *dst, uint64_t off, size_t len)
{
	uint64_t failed_at;

	if (pd->page_gran && !pd->devdax && len >= PMEM_FD_IO_MIN &&
	    !pmem_fd_io(pd, off, dst, len, false, &failed_at))
		return;
	pmem_prepare(pd, pd->rpopulated, off, len, MADV_POPULATE_READ);
	memcpy(dst, pd->addr + off, len);
}

static inline void pmem_zero(struct pmem_dev *pd, uint64_t off, size_t len)
{
	if (pd->page_gran) {
		pmem_prepare_store(pd, off, len);
		memset(pd->addr + off, 0, len);
	} else {
		pd->memset_fn(pd->addr + off, 0, len, PMEM2_F_MEM_NODRAIN);
	}
}

/* ---- the fast path ---------------------------------------------------- */

#define PMEM_RQ_IOV_MAX 64 /* segments pmem_rq_fd_io gathers (a 1 MiB FUSE write: 8) */

/*
 * A request of two segments or more, each of @min bytes or more (the size
 * from which pmem_store or pmem_load would take the file descriptor), as one
 * pwritev/preadv: the 128 KiB bios of a 1 MiB FUSE write, merged into one
 * request, then cost one system call instead of one each, and the kernel's
 * per-call work on the image file (its inode lock, the time stamps) is done
 * once.  Returns 0 when done, 1 when the request does not qualify (the
 * caller goes segment by segment, as before), or -errno (a write that failed
 * part way: some of its bytes may be written, as segment by segment).
 */
static int pmem_rq_fd_io(struct pmem_dev *pd, struct blk_request *rq, bool write, size_t min)
{
	struct iovec iov[PMEM_RQ_IOV_MAX];
	uint64_t pos = blk_rq_pos(rq), next = pos, failed_at;
	struct blk_bio *bio;
	int cnt = 0;

	blk_rq_for_each_bio (bio, rq) {
		if (blk_bio_pos(bio) != next || cnt + bio->nr_segs > PMEM_RQ_IOV_MAX)
			return 1;
		for (unsigned i = 0; i < bio->nr_segs; i++) {
			if (bio->iov[i].iov_len < min)
				return 1;
			iov[cnt++] = bio->iov[i];
		}
		next += bio->len;
	}
	if (cnt < 2)
		return 1;
	return pmem_fd_iov(pd, pos, iov, cnt, write, &failed_at);
}

/* A failed store's status: a full file system or quota is ENOSPC, the rest EIO. */
static inline enum blk_status pmem_store_status(int err)
{
	return err == -ENOSPC || err == -EDQUOT ? BLK_STS_NOSPC : BLK_STS_IOERR;
}

/* Execute @rq against the mapping.  May fault (the caller's guard catches it). */
static void pmem_rq_execute(struct pmem_dev *pd, struct blk_request *rq)
{
	struct blk_bio *bio;
	bool mapped = false;
	unsigned i;

	rq->status = BLK_STS_OK;
	switch (rq->op) {
	case BLK_OP_READ:
		/* failed: segment by segment, each falling back to the mapping */
		if (pd->page_gran && !pd->devdax && !pmem_rq_fd_io(pd, rq, false, PMEM_FD_IO_MIN))
			return;
		blk_rq_for_each_bio (bio, rq) {
			uint64_t off = blk_bio_pos(bio);

			for (i = 0; i < bio->nr_segs; i++) {
				pmem_load(pd, bio->iov[i].iov_base, off, bio->iov[i].iov_len);
				off += bio->iov[i].iov_len;
			}
		}
		return;
	case BLK_OP_WRITE:
	case BLK_OP_WRITE_ZEROES:
		if (unlikely(pd->ro)) {
			rq->status = BLK_STS_ROFS;
			return;
		}
		if (pd->page_gran && !pd->devdax && rq->op == BLK_OP_WRITE) {
			int ret = pmem_rq_fd_io(pd, rq, true, PMEM_FD_STORE_MIN);

			if (unlikely(ret < 0)) {
				rq->status = pmem_store_status(ret);
				return;
			}
			if (!ret)
				goto written;
		}
		blk_rq_for_each_bio (bio, rq) {
			uint64_t off = blk_bio_pos(bio);

			if (rq->op == BLK_OP_WRITE_ZEROES) {
				pmem_zero(pd, off, bio->len);
				mapped = true;
				continue;
			}
			for (i = 0; i < bio->nr_segs; i++) {
				int ret = pmem_store(pd, off, bio->iov[i].iov_base,
				                     bio->iov[i].iov_len);

				if (unlikely(ret < 0)) {
					rq->status = pmem_store_status(ret);
					return;
				}
				mapped |= ret;
				off += bio->iov[i].iov_len;
			}
		}
written:
		if (pd->page_gran) {
			/* only stores through the mapping need the msync at FLUSH */
			if (mapped)
				pmem_mark_dirty(pd, blk_rq_pos(rq), rq->len);
			/* FUA on a page mapping: this request's pages now, not the whole device. */
			if (unlikely(rq->bio->flags & BLK_BIO_FUA) &&
			    pmem_msync(pd, blk_rq_pos(rq), rq->len))
				rq->status = BLK_STS_IOERR;
		}
		return;
	case BLK_OP_FLUSH:
		if (unlikely(pmem_persist_all(pd)))
			rq->status = BLK_STS_IOERR;
		return;
	default:
		rq->status = BLK_STS_NOTSUPP;
		return;
	}
}

#if BLK_POISON_CHECKS
/*
 * Is the fault described by @g news about the media, to be recorded as
 * poison?  A machine check always is.  On an image file a SIGSEGV may instead
 * come from our own emulation (a page protected because the table says it is
 * poisoned, perhaps after this request passed the dispatch check), and a
 * SIGBUS without MCEERR is a file problem (a hole on a full disk, an I/O error,
 * a truncated image) that the slow path's pread/pwrite will report properly.
 */
static bool pmem_fault_is_poison(struct pmem_dev *pd, const struct blk_guard *g, bool write)
{
	size_t page;
	bool poison;

	if (!pd->emulate)
		return true;
	if (g->fault_signo == SIGBUS)
		return g->fault_code == BUS_MCEERR_AR || g->fault_code == BUS_MCEERR_AO;

	page = (size_t)((const char *)g->fault_addr - pd->addr) >> pd->page_shift;
	pthread_mutex_lock(&pd->emul_lock);
	if (pmem_page_protected(pd, page)) {
		poison = false;
	} else {
		/*
		 * Not ours.  With protections stable (we hold the lock) probe the
		 * page again: if it still faults, something outside the engine
		 * made it inaccessible and it is lost to us; if not, the fault
		 * came from a protection that has been lifted since.
		 */
		struct blk_guard probe;
		volatile char *p = pd->addr + ((size_t)page << pd->page_shift);
		char v;

		if (BLK_GUARD_FAULTED(&probe)) {
			poison = true;
		} else {
			blk_guard_arm(&probe, (const void *)p, (size_t)1 << pd->page_shift);
			v = *p;
			/*
			 * A write probe that cannot lose a concurrent store: compare
			 * and exchange the byte with itself.  Not an idempotent RMW
			 * (fetch_or 0), which compilers may lower to a plain load.
			 */
			if (write && !pd->ro)
				__atomic_compare_exchange_n(p, &v, v, false, __ATOMIC_RELAXED,
				                            __ATOMIC_RELAXED);
			blk_guard_disarm(&probe);
			poison = false;
		}
	}
	pthread_mutex_unlock(&pd->emul_lock);
	return poison;
}

/* The sectors of the granule @g faulted on, clipped to the device.  Returns false if none. */
static bool pmem_fault_sectors(struct blk_dev *dev, const struct blk_guard *g, uint64_t *sector,
                               uint64_t *nr)
{
	struct pmem_dev *pd = dev->drv;
	unsigned lsb = g->fault_lsb < 9 ? 9 : g->fault_lsb > 40 ? 40 : g->fault_lsb;
	uint64_t off = (uint64_t)((const char *)g->fault_addr - pd->addr);
	uint64_t start = off & ~(((uint64_t)1 << lsb) - 1);
	uint64_t end = start + ((uint64_t)1 << lsb);

	if (end > dev->size)
		end = dev->size;
	if (start >= end)
		return false;
	*sector = start >> BLK_SECTOR_SHIFT;
	*nr = ((end + BLK_SECTOR_SIZE - 1) >> BLK_SECTOR_SHIFT) - *sector;
	return true;
}

static void pmem_rq_fault(struct blk_hw_queue *hctx, struct blk_request *rq,
                          const struct blk_guard *g, struct blk_comp_batch *cb)
{
	struct blk_dev *dev = hctx->dev;
	uint64_t sector, nr;
	bool write = rq->op == BLK_OP_WRITE || rq->op == BLK_OP_WRITE_ZEROES;

	atomic_fetch_add_explicit(&hctx->cq_stats.faults, 1, memory_order_relaxed);
	if (pmem_fault_is_poison(dev->drv, g, write) && pmem_fault_sectors(dev, g, &sector, &nr))
		blk_poison_record(dev, sector, nr);
	/* The request may be half done: the slow path redoes it from its start. */
	blk_rq_slowpath(hctx, rq, cb);
}
#endif

struct blk_request *blk_pmem_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                       struct blk_comp_batch *cb)
{
	struct pmem_dev *pd = hctx->drv;
	struct blk_request *rq, *next;
#if BLK_POISON_CHECKS
	/* volatile: they change between sigsetjmp() and a siglongjmp() back to it */
	struct blk_request *volatile cur = list;
	volatile bool wrote = false;
	struct blk_guard g;

	/* One guard for the whole batch; after a fault, resume with the next request. */
	if (BLK_GUARD_FAULTED(&g)) {
		rq = cur;
		cur = rq->rq_next;
		pmem_rq_fault(hctx, rq, &g, cb);
	}
	blk_guard_arm(&g, pd->addr, pd->map_size);
	while ((rq = cur) != NULL) {
		next = rq->rq_next;
		/*
		 * A request sharing a page with emulated poison would fault on
		 * its clean sectors: send it to the slow path, which reads those
		 * through the fd.  One load when there is no emulated poison.
		 */
		if (unlikely(atomic_load_explicit(&pd->nr_prot, memory_order_relaxed)) &&
		    rq->op != BLK_OP_FLUSH && pmem_range_protected(pd, blk_rq_pos(rq), rq->len)) {
			blk_guard_disarm(&g);
			cur = next;
			blk_rq_slowpath(hctx, rq, cb);
			blk_guard_arm(&g, pd->addr, pd->map_size);
			continue;
		}
		if (rq->op != BLK_OP_READ)
			wrote = true;
		pmem_rq_execute(pd, rq);
		cur = next;
		blk_comp_add(cb, rq);
	}
	blk_guard_disarm(&g);
	if (!pd->page_gran && wrote)
		pd->drain_fn(); /* one fence makes the whole batch durable before it completes */
#else
	bool wrote = false;

	for (rq = list; rq; rq = next) {
		next = rq->rq_next;
		if (rq->op != BLK_OP_READ)
			wrote = true;
		pmem_rq_execute(pd, rq);
		blk_comp_add(cb, rq);
	}
	if (!pd->page_gran && wrote)
		pd->drain_fn();
#endif
	return NULL;
}

/* ---- synchronous byte-addressed I/O for the slow path ---------------- */

/*
 * Read or write all of @v (@cnt segments, file position @pos on): one
 * pread/pwrite for one segment, preadv/pwritev for more, again after a short
 * transfer.  A read hitting EOF is -ENODATA (a truncated image); *@failed_at
 * is where a failure happened.  A write sets fd_dirty (the next FLUSH
 * fdatasyncs).
 */
static int pmem_fd_iov(struct pmem_dev *pd, uint64_t pos, struct iovec *v, int cnt, bool write,
                       uint64_t *failed_at)
{
	for (; cnt && !v->iov_len; v++, cnt--) /* nothing to move: no call */
		;
	while (cnt) {
		ssize_t n;

		if (cnt == 1)
			n = write ? pwrite(pd->fd, v->iov_base, v->iov_len, (off_t)pos)
			          : pread(pd->fd, v->iov_base, v->iov_len, (off_t)pos);
		else
			n = write ? pwritev(pd->fd, v, cnt, (off_t)pos)
			          : preadv(pd->fd, v, cnt, (off_t)pos);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			*failed_at = pos;
			return -errno;
		}
		if (n == 0) {
			*failed_at = pos;
			return write ? -EIO : -ENODATA;
		}
		pos += (uint64_t)n;
		for (; cnt && (size_t)n >= v->iov_len; v++, cnt--)
			n -= (ssize_t)v->iov_len;
		if (cnt) {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= (size_t)n;
		}
	}
	if (write)
		atomic_store_explicit(&pd->fd_dirty, true, memory_order_release);
	return 0;
}

/* pmem_fd_iov of one buffer. */
static int pmem_fd_io(struct pmem_dev *pd, uint64_t pos, void *buf, size_t len, bool write,
                      uint64_t *failed_at)
{
	struct iovec one = {.iov_base = buf, .iov_len = len};

	return pmem_fd_iov(pd, pos, &one, 1, write, failed_at);
}

/* Copy through the mapping.  Returns 0, or 1 with @g describing the fault. */
static int pmem_map_io(struct pmem_dev *pd, uint64_t pos, void *buf, size_t len, bool write,
                       struct blk_guard *g)
{
#if BLK_POISON_CHECKS
	if (BLK_GUARD_FAULTED(g))
		return 1;
	blk_guard_arm(g, pd->addr, pd->map_size);
#else
	(void)g;
#endif
	if (!write)
		memcpy(buf, pd->addr + pos, len);
	else if (pd->page_gran)
		memcpy(pd->addr + pos, buf, len);
	else
		pd->memcpy_fn(pd->addr + pos, buf, len, 0); /* flush and drain: durable now */
#if BLK_POISON_CHECKS
	blk_guard_disarm(g);
#endif
	if (write && pd->page_gran)
		pmem_mark_dirty(pd, pos, len);
	return 0;
}

/*
 * Read or write [pos, pos + len).  Pages protected by the emulation go
 * through the fd.  A fault that reveals poison records it and returns -EIO
 * with *bad the first bad sector at or after @pos.
 */
static int pmem_sync_io(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, bool write,
                        uint64_t *bad)
{
	struct pmem_dev *pd = dev->drv;
	bool via_fd_once = false;
#if BLK_POISON_CHECKS
	unsigned retries = 0;
#endif
	int ret;

	if (unlikely(pos > dev->size || len > dev->size - pos))
		return -EINVAL;
	if (unlikely(write && pd->ro))
		return -EROFS;
	while (len) {
		size_t n = len;
		bool via_fd = via_fd_once;
		struct blk_guard g;
		uint64_t failed_at;

		if (pd->emulate) {
			size_t page_end = (size_t)(((pos >> pd->page_shift) + 1) << pd->page_shift);

			if (n > page_end - pos)
				n = page_end - pos;
			if (atomic_load_explicit(&pd->nr_prot, memory_order_relaxed) &&
			    pmem_page_protected(pd, pos >> pd->page_shift))
				via_fd = true;
		}
		if (via_fd) {
			ret = pmem_fd_io(pd, pos, buf, n, write, &failed_at);
			if (unlikely(ret == -EIO && !write)) {
				/* The image's storage cannot read it: lost media, like poison. */
				uint64_t s = failed_at >> BLK_SECTOR_SHIFT;

				blk_poison_record(dev, s, 1);
				*bad = s;
				return -EIO;
			}
			if (unlikely(ret))
				return ret;
		} else if (unlikely(pmem_map_io(pd, pos, buf, n, write, &g))) {
#if BLK_POISON_CHECKS
			uint64_t sector, nr;

			if (++retries > PMEM_MAX_RETRY || pmem_fault_is_poison(pd, &g, write)) {
				if (!pmem_fault_sectors(dev, &g, &sector, &nr))
					return -EIO;
				blk_poison_record(dev, sector, nr);
				*bad = sector > (pos >> BLK_SECTOR_SHIFT) ? sector
				                                          : pos >> BLK_SECTOR_SHIFT;
				return -EIO;
			}
			/*
			 * Not poison: our own protection (the retry goes through
			 * the fd) or a file error (SIGBUS: a hole on a full disk,
			 * an I/O error) that the fd reports with its real errno.
			 */
			via_fd_once = g.fault_signo == SIGBUS;
			continue;
#endif
		}
		via_fd_once = false;
		pos += n;
		buf = (char *)buf + n;
		len -= n;
	}
	return 0;
}

int blk_pmem_read_sync(struct blk_dev *dev, uint64_t pos, void *buf, size_t len, uint64_t *bad)
{
	return pmem_sync_io(dev, pos, buf, len, false, bad);
}

int blk_pmem_write_sync(struct blk_dev *dev, uint64_t pos, const void *buf, size_t len)
{
	uint64_t bad;

	return pmem_sync_io(dev, pos, (void *)buf, len, true, &bad);
}
