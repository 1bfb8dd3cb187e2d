/* SPDX-License-Identifier: MIT */
/*
 * The metadata buffer cache: one buffer per metadata block, found by block
 * number in a hash table, counted by references.  Every cached buffer is on
 * one list, in the order of a clock: past max_bufs the oldest that nobody
 * holds, is not dirty and was not used since the clock last passed it is
 * evicted (one used meanwhile gets a second pass at the tail); buffers the
 * journal holds (dirty: in a transaction or awaiting checkpoint) keep a
 * reference and are never evicted.  A lookup takes cache_lock; a put is one
 * atomic decrement: the buffer stays where it is.
 *
 * Reads are verified (magic, type, self-location, checksum).  With
 * metadata_dup a copy that is corrupt or sits on poison is read from its twin,
 * and the bad copy is rewritten in place from the good one: a whole-block
 * write clears poison (the engine's slow path).  Both copies bad: -EIO if
 * poison was met, else -EUCLEAN, logged with the block number.
 *
 * Locking: fs->cache_lock protects the hash, the list, nr_bufs, b->referenced
 * and every reference count transition from zero (a lookup); a transition to
 * zero (mfs_buf_put) needs no lock, since a buffer nobody holds is freed only
 * under cache_lock after it saw the count at zero, and the last holder no
 * longer touches it.  b->lock (the content lock) protects data, uptodate,
 * dirty and txn; dirty is read under cache_lock only of a buffer nobody
 * holds (only a holder changes it).  Order: b->lock -> cache_lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "mfs.h"

uint64_t mfs_twin(const struct mfs *fs, uint64_t blk)
{
	return fs->dup ? mfs_sb_twin(&fs->sb, blk) : 0;
}

static inline unsigned hash_slot(const struct mfs *fs, uint64_t blocknr)
{
	return (unsigned)((blocknr * 0x9e3779b97f4a7c15ull) >> 32) & (fs->hash_size - 1);
}

int mfs_cache_init(struct mfs *fs, unsigned max_bufs)
{
	unsigned size = 64;

	if (max_bufs == 0)
		return -EINVAL;
	while (size < max_bufs && size < (1u << 24))
		size <<= 1;
	fs->hash = calloc(size, sizeof(*fs->hash));
	if (!fs->hash)
		return -ENOMEM;
	fs->hash_size = size;
	fs->nr_bufs = 0;
	fs->max_bufs = max_bufs;
	fs->lru_head = fs->lru_tail = NULL;
	/* the cache is set up once the superblock is known */
	fs->seed = fs->sb.csum_seed;
	fs->dup = fs->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	mfs_lock_init(&fs->cache_lock);
	return 0;
}

static void buf_free(struct mfs_buf *b)
{
	mfs_lock_destroy(&b->lock);
	free(b->data);
	free(b);
}

void mfs_cache_destroy(struct mfs *fs)
{
	unsigned i;

	if (!fs->hash)
		return;
	for (i = 0; i < fs->hash_size; i++) {
		struct mfs_buf *b, *next;

		for (b = fs->hash[i]; b; b = next) {
			next = b->hnext;
			buf_free(b);
		}
	}
	free(fs->hash);
	fs->hash = NULL;
	fs->nr_bufs = 0;
	fs->lru_head = fs->lru_tail = NULL;
	mfs_lock_destroy(&fs->cache_lock);
}

/* --- hash and LRU, cache_lock held --------------------------------------------- */

static struct mfs_buf *__hash_find(struct mfs *fs, uint64_t blocknr)
{
	struct mfs_buf *b;

	for (b = fs->hash[hash_slot(fs, blocknr)]; b; b = b->hnext)
		if (b->blocknr == blocknr)
			return b;
	return NULL;
}

static void __hash_del(struct mfs *fs, struct mfs_buf *b)
{
	struct mfs_buf **pp = &fs->hash[hash_slot(fs, b->blocknr)];

	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	b->hnext = NULL;
	fs->nr_bufs--;
}

/* Every cached buffer is on the list (buffers join it at their lookup's insert). */
static void __lru_del(struct mfs *fs, struct mfs_buf *b)
{
	if (b->lru_prev)
		b->lru_prev->lru_next = b->lru_next;
	else
		fs->lru_head = b->lru_next;
	if (b->lru_next)
		b->lru_next->lru_prev = b->lru_prev;
	else
		fs->lru_tail = b->lru_prev;
	b->lru_prev = b->lru_next = NULL;
}

static void __lru_add_tail(struct mfs *fs, struct mfs_buf *b)
{
	b->lru_next = NULL;
	b->lru_prev = fs->lru_tail;
	if (fs->lru_tail)
		fs->lru_tail->lru_next = b;
	else
		fs->lru_head = b;
	fs->lru_tail = b;
}

/* Take @b out of the cache (the caller frees it after dropping cache_lock). */
static void __uncache(struct mfs *fs, struct mfs_buf *b)
{
	__lru_del(fs, b);
	__hash_del(fs, b);
}

/*
 * Evict buffers nobody holds, clean, oldest first, until within max_bufs; one
 * used since the clock last passed it gets a second pass.  Bounded: with
 * every buffer held or dirty (a big transaction) the cache stays over its size
 * until the journal lets them go, as before.
 */
static struct mfs_buf *__evict(struct mfs *fs)
{
	struct mfs_buf *victims = NULL;
	unsigned budget = fs->nr_bufs > fs->max_bufs ? 2 * (fs->nr_bufs - fs->max_bufs) + 64 : 0;

	while (fs->nr_bufs > fs->max_bufs && fs->lru_head && budget--) {
		struct mfs_buf *b = fs->lru_head;

		__lru_del(fs, b);
		if (atomic_load(&b->ref) || b->dirty || b->referenced) {
			b->referenced = false;
			__lru_add_tail(fs, b);
			continue;
		}
		__hash_del(fs, b);
		b->hnext = victims;
		victims = b;
	}
	return victims;
}

static void free_list(struct mfs_buf *b)
{
	struct mfs_buf *next;

	for (; b; b = next) {
		next = b->hnext;
		buf_free(b);
	}
}

static struct mfs_buf *buf_alloc(struct mfs *fs, uint64_t blocknr)
{
	struct mfs_buf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	if (posix_memalign((void **)&b->data, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
		free(b);
		return NULL;
	}
	b->fs = fs;
	b->blocknr = blocknr;
	atomic_init(&b->ref, 1);
	mfs_lock_init(&b->lock);
	return b;
}

/*
 * Find or insert the buffer of @blocknr, referenced.  Not necessarily
 * uptodate.  @evict: make room for an inserted buffer by evicting (not for
 * the scrub's passing buffers, which leave at their put: buf_put_unread).
 */
static int __buf_lookup(struct mfs *fs, uint64_t blocknr, bool evict, struct mfs_buf **bp)
{
	struct mfs_buf *b, *fresh = NULL, *victims;

	mfs_lock(&fs->cache_lock);
	b = __hash_find(fs, blocknr);
	if (!b) {
		/* allocate outside the lock, then look again */
		mfs_unlock(&fs->cache_lock);
		fresh = buf_alloc(fs, blocknr);
		if (!fresh)
			return -ENOMEM;
		mfs_lock(&fs->cache_lock);
		b = __hash_find(fs, blocknr);
	}
	if (b) {
		atomic_fetch_add(&b->ref, 1);
		b->referenced = true;
		victims = NULL;
	} else {
		b = fresh;
		fresh = NULL;
		b->hnext = fs->hash[hash_slot(fs, blocknr)];
		fs->hash[hash_slot(fs, blocknr)] = b;
		__lru_add_tail(fs, b);
		fs->nr_bufs++;
		victims = evict ? __evict(fs) : NULL;
	}
	mfs_unlock(&fs->cache_lock);
	if (fresh)
		buf_free(fresh);
	free_list(victims);
	*bp = b;
	return 0;
}

void mfs_cache_trim(struct mfs *fs)
{
	struct mfs_buf *victims;

	mfs_lock(&fs->cache_lock);
	victims = __evict(fs);
	mfs_unlock(&fs->cache_lock);
	free_list(victims);
}

static int buf_lookup(struct mfs *fs, uint64_t blocknr, struct mfs_buf **bp)
{
	return __buf_lookup(fs, blocknr, true, bp);
}

void mfs_buf_get(struct mfs_buf *b)
{
	atomic_fetch_add(&b->ref, 1);
}

/*
 * Drop a reference.  The buffer stays on the clock's list: eviction takes it
 * once nobody holds it.  No lock: after the decrement the buffer is not
 * touched.  (One that is not uptodate, as after a refused transaction, is
 * read again by the next mfs_meta_read.)
 */
void mfs_buf_put(struct mfs_buf *b)
{
	atomic_fetch_sub(&b->ref, 1);
}

/*
 * mfs_buf_put() of a buffer that may hold no data: a failed read, or a block
 * the scrub passed through (it reads into its own memory).  The last holder
 * takes it out of the cache if it is still not uptodate, so that neither
 * pushes a cached block out.
 */
static void buf_put_unread(struct mfs *fs, struct mfs_buf *b)
{
	struct mfs_buf *victim = NULL;

	mfs_lock(&fs->cache_lock);
	/* the count at zero under the lock: nobody holds it or can look it up */
	if (atomic_fetch_sub(&b->ref, 1) == 1 && !b->uptodate && !b->dirty) {
		__uncache(fs, b);
		victim = b;
	}
	mfs_unlock(&fs->cache_lock);
	if (victim)
		buf_free(victim);
}

/* --- verified reads with twin fallback ------------------------------------------ */

enum copy_state {
	COPY_OK,
	COPY_MEDIA,   /* poison or another read error */
	COPY_CORRUPT, /* read, but failed its checks */
};

static enum copy_state read_copy(struct mfs *fs, uint64_t where, uint64_t blocknr, uint16_t type,
                                 void *buf)
{
	if (blk_read(fs->dev, where * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0))
		return COPY_MEDIA;
	if (mfs_csum_meta_verify(buf, fs->seed, type, blocknr))
		return COPY_CORRUPT;
	return COPY_OK;
}

static const char *copy_state_name(enum copy_state st)
{
	return st == COPY_MEDIA ? "media error" : st == COPY_CORRUPT ? "corrupt" : "valid";
}

/* A damage event for the primary copy of block @blocknr (events.c); false: a repeat. */
static bool meta_event(struct mfs *fs, enum mfs_event_kind kind, enum copy_state st,
                       uint64_t blocknr)
{
	return mfs_event_post(fs, kind, st == COPY_MEDIA ? MFS_EVC_MEDIA : MFS_EVC_CORRUPT,
	                      blocknr * MFS_SECTORS_PER_BLOCK, MFS_SECTORS_PER_BLOCK, blocknr);
}

/* Read @b's block into b->data (b->lock held).  Returns 0, -EIO or -EUCLEAN. */
static int __buf_read(struct mfs *fs, struct mfs_buf *b, uint16_t type)
{
	uint64_t twin = mfs_twin(fs, b->blocknr);
	enum copy_state p, t;

	atomic_fetch_add(&fs->stats.meta_reads, 1);
	p = read_copy(fs, b->blocknr, b->blocknr, type, b->data);
	if (p == COPY_OK)
		return 0;
	/*
	 * A lost block fails every read of it (its buffer never becomes
	 * uptodate): it is logged once per mount, with its event, so a
	 * dying device's reads cannot flood the log.
	 */
	if (!twin) {
		atomic_fetch_add(&fs->stats.meta_lost, 1);
		if (meta_event(fs, MFS_EV_META_LOST, p, b->blocknr))
			fprintf(stderr,
			        "mendfs: metadata block %llu: %s, no twin (metadata_dup off)\n",
			        (unsigned long long)b->blocknr, copy_state_name(p));
		return p == COPY_MEDIA ? -EIO : -EUCLEAN;
	}
	t = read_copy(fs, twin, b->blocknr, type, b->data);
	if (t != COPY_OK) {
		atomic_fetch_add(&fs->stats.meta_lost, 1);
		if (meta_event(fs, MFS_EV_META_LOST, p, b->blocknr))
			fprintf(stderr,
			        "mendfs: metadata block %llu lost: primary %s, twin (block %llu) "
			        "%s\n",
			        (unsigned long long)b->blocknr, copy_state_name(p),
			        (unsigned long long)twin, copy_state_name(t));
		return p == COPY_MEDIA || t == COPY_MEDIA ? -EIO : -EUCLEAN;
	}
	/* heal: a whole-block write of the good copy replaces (and un-poisons) the bad one */
	if (!fs->read_only) {
		int ret = blk_write(fs->dev, b->blocknr * MFS_SECTORS_PER_BLOCK, b->data,
		                    MFS_BLOCK_SIZE, 0);

		if (ret) {
			fprintf(stderr,
			        "mendfs: metadata block %llu: %s, repair from twin %llu "
			        "failed: %s\n",
			        (unsigned long long)b->blocknr, copy_state_name(p),
			        (unsigned long long)twin, strerror(-ret));
		} else {
			atomic_fetch_add(&fs->stats.meta_repairs, 1);
			meta_event(fs, MFS_EV_META_HEALED, p, b->blocknr);
			fprintf(stderr,
			        "mendfs: metadata block %llu: %s, repaired from twin %llu\n",
			        (unsigned long long)b->blocknr, copy_state_name(p),
			        (unsigned long long)twin);
		}
	}
	return 0;
}

int mfs_meta_read_locked(struct mfs *fs, uint64_t blocknr, uint16_t type, struct mfs_buf **bp)
{
	struct mfs_buf *b;
	int ret;

	ret = buf_lookup(fs, blocknr, &b);
	if (ret)
		return ret;
	mfs_lock(&b->lock);
	if (!b->uptodate) {
		b->bt_checked = false; /* the data comes from the device again */
		b->bt_start = 0;
		ret = __buf_read(fs, b, type);
		if (!ret) {
			b->uptodate = true;
			b->type = ((struct mfs_meta_hdr *)b->data)->type;
		}
	} else if (type && b->type != type) {
		fprintf(stderr, "mendfs: metadata block %llu is of type %u, expected %u\n",
		        (unsigned long long)blocknr, b->type, type);
		ret = -EUCLEAN;
	}
	if (ret) {
		mfs_unlock(&b->lock);
		buf_put_unread(fs, b);
		/* inside a handle the operation may be half done in memory: stop (fserror.c) */
		if (ret == -EIO && mfs_txn_depth && !fs->read_only)
			mfs_fs_error(fs, ret, "metadata read in a transaction");
		return ret;
	}
	*bp = b;
	return 0;
}

int mfs_meta_read(struct mfs *fs, uint64_t blocknr, uint16_t type, struct mfs_buf **bp)
{
	int ret = mfs_meta_read_locked(fs, blocknr, type, bp);

	if (!ret)
		mfs_unlock(&(*bp)->lock);
	return ret;
}

int mfs_meta_new(struct mfs *fs, uint64_t blocknr, uint16_t type, uint64_t owner,
                 struct mfs_buf **bp)
{
	struct mfs_meta_hdr *hdr;
	struct mfs_buf *b;
	int ret;

	ret = buf_lookup(fs, blocknr, &b);
	if (ret)
		return ret;
	mfs_lock(&b->lock);
	memset(b->data, 0, MFS_BLOCK_SIZE);
	hdr = (struct mfs_meta_hdr *)b->data;
	hdr->magic = MFS_META_MAGIC;
	hdr->type = type;
	hdr->blocknr = blocknr;
	hdr->owner = owner;
	b->type = type;
	b->uptodate = true;
	b->bt_checked = false;
	b->bt_start = 0;
	mfs_unlock(&b->lock);
	*bp = b;
	return 0;
}

int mfs_meta_write_inplace(struct mfs *fs, struct mfs_buf *b)
{
	uint64_t twin = mfs_twin(fs, b->blocknr);
	int ret, ret2 = 0;

	if (fs->read_only)
		return -EROFS;
	ret = blk_write(fs->dev, b->blocknr * MFS_SECTORS_PER_BLOCK, b->data, MFS_BLOCK_SIZE, 0);
	if (twin)
		ret2 = blk_write(fs->dev, twin * MFS_SECTORS_PER_BLOCK, b->data, MFS_BLOCK_SIZE, 0);
	atomic_fetch_add(&fs->stats.meta_writes, 1);
	if (ret || ret2) {
		fprintf(stderr, "mendfs: writing metadata block %llu (twin %llu) failed: %s\n",
		        (unsigned long long)b->blocknr, (unsigned long long)twin,
		        strerror(-(ret ? ret : ret2)));
		return ret ? ret : ret2;
	}
	if (!b->txn)
		b->dirty = false;
	return 0;
}

int mfs_meta_write_both(struct mfs *fs, uint64_t blk, const void *buf, uint64_t nblocks)
{
	uint64_t twin = mfs_twin(fs, blk);
	int ret;

	ret = blk_write(fs->dev, blk * MFS_SECTORS_PER_BLOCK, buf,
	                (uint32_t)(nblocks * MFS_BLOCK_SIZE), 0);
	if (!ret && twin)
		ret = blk_write(fs->dev, twin * MFS_SECTORS_PER_BLOCK, buf,
		                (uint32_t)(nblocks * MFS_BLOCK_SIZE), 0);
	return ret;
}

/* The bios of one mfs_meta_write_batch() and their count down. */
struct wbatch {
	pthread_mutex_t lock;
	pthread_cond_t done;
	unsigned pending;
	int err; /* the first error */
};

struct wseg {
	uint64_t sector;
	const void *buf;
	uint32_t len;
};

static int wseg_cmp(const void *a, const void *b)
{
	const struct wseg *x = a, *y = b;

	return x->sector < y->sector ? -1 : x->sector > y->sector;
}

static void wbatch_end_io(struct blk_bio *bio)
{
	struct wbatch *wb = bio->private;
	int err = -blk_status_to_errno(bio->status);

	pthread_mutex_lock(&wb->lock);
	if (err && !wb->err)
		wb->err = err;
	if (--wb->pending == 0)
		pthread_cond_signal(&wb->done);
	pthread_mutex_unlock(&wb->lock);
}

int mfs_meta_write_batch(struct mfs *fs, const struct mfs_wext *ext, unsigned n)
{
	struct wbatch wb = {.pending = 0, .err = 0};
	struct blk_bio *bios;
	struct blk_plug plug;
	struct wseg *seg;
	unsigned i, nseg = 0;
	int ret = 0;

	seg = malloc((size_t)n * 2 * sizeof(*seg));
	bios = malloc((size_t)n * 2 * sizeof(*bios));
	if (!seg || !bios) {
		/* no memory for a batch: one extent at a time, as before batching */
		free(seg);
		free(bios);
		for (i = 0; !ret && i < n; i++)
			ret = mfs_meta_write_both(fs, ext[i].blk, ext[i].buf, ext[i].nblocks);
		return ret;
	}
	for (i = 0; i < n; i++) {
		uint64_t twin = mfs_twin(fs, ext[i].blk);
		uint32_t len = (uint32_t)(ext[i].nblocks * MFS_BLOCK_SIZE);

		seg[nseg++] = (struct wseg){ext[i].blk * MFS_SECTORS_PER_BLOCK, ext[i].buf, len};
		if (twin)
			seg[nseg++] = (struct wseg){twin * MFS_SECTORS_PER_BLOCK, ext[i].buf, len};
	}
	/* device order: a block next to the previous one merges into its request */
	qsort(seg, nseg, sizeof(*seg), wseg_cmp);
	pthread_mutex_init(&wb.lock, NULL);
	pthread_cond_init(&wb.done, NULL);
	wb.pending = nseg;
	blk_start_plug(&plug);
	for (i = 0; i < nseg; i++) {
		blk_bio_init(&bios[i], BLK_OP_WRITE, seg[i].sector, (void *)seg[i].buf, seg[i].len,
		             wbatch_end_io, &wb);
		blk_submit_bio(fs->dev, &bios[i]);
	}
	blk_finish_plug(&plug);
	/* a caller's outer plug would still hold our bios: issue them before sleeping */
	blk_flush_plug();
	pthread_mutex_lock(&wb.lock);
	while (wb.pending)
		pthread_cond_wait(&wb.done, &wb.lock);
	ret = wb.err;
	pthread_mutex_unlock(&wb.lock);
	pthread_mutex_destroy(&wb.lock);
	pthread_cond_destroy(&wb.done);
	free(bios);
	free(seg);
	return ret;
}

void mfs_meta_forget(struct mfs *fs, uint64_t blocknr)
{
	struct mfs_buf *b, *victim = NULL;

	mfs_lock(&fs->cache_lock);
	b = __hash_find(fs, blocknr);
	/* a referenced buffer stays: its holder (or the journal) still uses it */
	if (b && atomic_load(&b->ref) == 0) {
		__uncache(fs, b);
		victim = b;
	}
	mfs_unlock(&fs->cache_lock);
	if (victim)
		buf_free(victim);
}

/* --- scrub: both copies of one block checked from the device ---------------------- */

int mfs_meta_scrub_block(struct mfs *fs, uint64_t blocknr, void *tmp)
{
	uint64_t twin = mfs_twin(fs, blocknr);
	uint8_t *pbuf = tmp, *tbuf = (uint8_t *)tmp + MFS_BLOCK_SIZE;
	enum copy_state p, t = COPY_OK;
	struct mfs_buf *b;
	int ret;

	/* the block passes through the cache without pushing anything out of it */
	ret = __buf_lookup(fs, blocknr, false, &b);
	if (ret)
		return ret;
	/*
	 * b->lock keeps the block's copies still: a clean buffer has no
	 * checkpoint write pending (dirty lasts until the checkpoint is done),
	 * a read heals under this lock, and a new block (mfs_meta_new) waits.
	 */
	mfs_lock(&b->lock);
	if (b->dirty) {
		ret = MFS_SCRUB_SKIPPED; /* the journal rewrites both copies */
		goto out;
	}
	p = read_copy(fs, blocknr, blocknr, b->uptodate ? b->type : 0, pbuf);
	if (twin)
		t = read_copy(fs, twin, blocknr, b->uptodate ? b->type : 0, tbuf);
	if (p == COPY_OK && t == COPY_OK) {
		ret = MFS_SCRUB_CLEAN;
		goto out;
	}
	if (!twin || (p != COPY_OK && t != COPY_OK)) {
		fprintf(stderr, "mendfs: scrub: metadata block %llu lost: primary %s, twin %s\n",
		        (unsigned long long)blocknr, copy_state_name(p),
		        twin ? copy_state_name(t) : "none (metadata_dup off)");
		atomic_fetch_add(&fs->stats.meta_lost, 1);
		ret = MFS_SCRUB_LOST;
		goto out;
	}
	ret = MFS_SCRUB_BAD;
	if (!fs->read_only) {
		uint64_t bad = p == COPY_OK ? twin : blocknr;
		int err = blk_write(fs->dev, bad * MFS_SECTORS_PER_BLOCK,
		                    p == COPY_OK ? pbuf : tbuf, MFS_BLOCK_SIZE, 0);

		fprintf(stderr, "mendfs: scrub: metadata block %llu: copy at %llu %s, %s\n",
		        (unsigned long long)blocknr, (unsigned long long)bad,
		        copy_state_name(p == COPY_OK ? t : p),
		        err ? "rewrite from the good copy failed" : "rewritten from the good copy");
		if (!err) {
			atomic_fetch_add(&fs->stats.meta_repairs, 1);
			ret = MFS_SCRUB_HEALED;
		}
	}
out:
	mfs_unlock(&b->lock);
	buf_put_unread(fs, b);
	return ret;
}
