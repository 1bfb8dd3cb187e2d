/* SPDX-License-Identifier: MIT */
/*
 * The allocation bitmaps (docs/FORMAT.md "Allocation bitmaps"): the on-disk
 * bits, changed in a transaction under each block's content lock; in-memory
 * copies of the meta zone and inode bitmaps, loaded a block at a time, and
 * the meta block and inode number allocators that use them (next-fit from a
 * rotating hint); the superblock's free counters; the running transaction's
 * pending data frees (recorded here, under the bitmap block's lock: see
 * mfs_bm_disk_update); the poisoned blocks of a range (blk_poison_lookup).
 * It calls the buffer cache, the journal and the
 * checksums (super.c); the data allocator (alloc_data.c) and the quarantine
 * use it.  Locking: alloc.c.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"

/* --- free counters and pending data frees (fs->alloc_lock held) ----------------------- */

/*
 * alloc_lock held: change a free counter of fs->sb.  After a clean mount the
 * counters come from the superblock (FORMAT.md §5.1); one that was wrong
 * there would leave its range here.  It stays within [0, zone] (a superblock
 * with a counter past its zone does not validate) and the error state is set
 * (the next mount recounts, fsck fixes it): statfs may be off until then,
 * allocation never is (it follows the bitmaps).
 */
void mfs_alloc_counter_add(struct mfs *fs, uint64_t *le, int64_t d)
{
	uint64_t max = le == &fs->sb.free_blocks ? le64toh(fs->sb.data_len)
	               : le == &fs->sb.free_meta ? le64toh(fs->sb.meta_len)
	                                         : le64toh(fs->sb.nr_inodes);
	uint64_t v = le64toh(*le);

	if ((d < 0 && v < (uint64_t)-d) || (d > 0 && max - v < (uint64_t)d) || v > max) {
		if (!(fs->sb.state & MFS_STATE_ERROR))
			fprintf(stderr,
			        "mendfs: a free counter of the superblock was wrong (%llu %+lld, "
			        "at most %llu): error state set, recounted at the next mount\n",
			        (unsigned long long)v, (long long)d, (unsigned long long)max);
		fs->sb.state |= MFS_STATE_ERROR;
		v = d < 0 ? (v < (uint64_t)-d ? 0 : v + (uint64_t)d)
		          : (max - (v < max ? v : max) < (uint64_t)d ? max : v + (uint64_t)d);
	} else {
		v += (uint64_t)d;
	}
	*le = htole64(v);
}

/* alloc_lock held: remember blocks freed by the running transaction. */
static int pending_add(struct mfs_alloc *a, uint64_t start, uint64_t len)
{
	if (a->npend && a->pend[a->npend - 1].start + a->pend[a->npend - 1].len == start) {
		a->pend[a->npend - 1].len += len;
		return 0;
	}
	if (a->npend == a->cap_pend) {
		size_t cap = a->cap_pend ? a->cap_pend * 2 : 64;
		struct mfs_pending_free *v = realloc(a->pend, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->pend = v;
		a->cap_pend = cap;
	}
	a->pend[a->npend].start = start;
	a->pend[a->npend].len = len;
	a->npend++;
	return 0;
}

/* --- on-disk bitmaps ---------------------------------------------------------------- */

/*
 * Set or clear bits [first, first + n) of the on-disk bitmap at @disk, each
 * block under its content lock, recorded in @txn.  The bits must all be in the
 * opposite state: anything else is corruption (-EUCLEAN).
 *
 * @pend_base (data frees only, else 0): the zone start of the bits; each
 * block's cleared range is recorded as a pending free of the running
 * transaction and counted free *before* the block's lock is dropped, so a
 * data group loaded concurrently (group_load, which holds the same lock)
 * sees either the bits still set or the range already pending: never a
 * clear bit it could hand out before the freeing transaction commits.
 */
int mfs_bm_disk_update(struct mfs *fs, struct mfs_txn *txn, uint64_t disk, uint64_t first,
                       uint64_t n, bool set, uint64_t pend_base)
{
	while (n) {
		uint64_t k = first / MFS_BITMAP_BITS, i = first % MFS_BITMAP_BITS;
		uint64_t cnt = MFS_BITMAP_BITS - i < n ? MFS_BITMAP_BITS - i : n;
		struct mfs_buf *b;
		uint8_t *bits;
		int ret;

		ret = mfs_meta_read_locked(fs, disk + k, MFS_T_BITMAP, &b);
		if (ret)
			return ret;
		bits = b->data + sizeof(struct mfs_meta_hdr);
		for (uint64_t j = i; j < i + cnt; j++) {
			uint8_t m = (uint8_t)(1u << (j % 8));

			if (!!(bits[j / 8] & m) == set) {
				fprintf(stderr, "mendfs: bitmap block %llu: bit %llu already %s\n",
				        (unsigned long long)(disk + k), (unsigned long long)j,
				        set ? "set" : "clear");
				ret = -EUCLEAN;
				break;
			}
		}
		if (!ret) {
			for (uint64_t j = i; j < i + cnt; j++) {
				if (set)
					bits[j / 8] |= (uint8_t)(1u << (j % 8));
				else
					bits[j / 8] &= (uint8_t) ~(1u << (j % 8));
			}
			mfs_txn_dirty(txn, b);
			if (pend_base) {
				mfs_lock(&fs->alloc_lock);
				ret = pending_add(A(fs), pend_base + first, cnt);
				if (!ret)
					mfs_alloc_counter_add(fs, &fs->sb.free_blocks,
					                      (int64_t)cnt);
				mfs_unlock(&fs->alloc_lock);
			}
		}
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		if (ret)
			return ret;
		first += cnt;
		n -= cnt;
	}
	return 0;
}

static bool bm_test(const struct mfs_bmap *m, uint64_t i)
{
	return m->map[i / 64] >> (i % 64) & 1;
}

static void bm_set(struct mfs_bmap *m, uint64_t i, bool v)
{
	if (v)
		m->map[i / 64] |= 1ull << (i % 64);
	else
		m->map[i / 64] &= ~(1ull << (i % 64));
}

/*
 * First clear bit at or after the hint, wrapping; UINT64_MAX if none.  The
 * scan stops at the first bitmap block that is not loaded: *need = that
 * block (else UINT64_MAX), to be loaded before trying again.
 */
static uint64_t bm_find(const struct mfs_bmap *m, uint64_t *need)
{
	uint64_t words = (m->nbits + 63) / 64, h = m->hint < m->nbits ? m->hint : 0;
	uint64_t w0 = h / 64;

	*need = UINT64_MAX;
	for (uint64_t n = 0; n <= words; n++) {
		uint64_t w = (w0 + n) % words, v;

		if (m->loaded[w / BM_WORDS_PER_BLOCK] == G_UNLOADED) {
			*need = w / BM_WORDS_PER_BLOCK;
			return UINT64_MAX;
		}
		v = ~m->map[w];
		if (n == 0)
			v &= ~0ull << (h % 64);
		if (v) {
			uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(v);

			if (i < m->nbits)
				return i;
		}
	}
	return UINT64_MAX;
}

/*
 * Copy bitmap block @k of @m into memory, once; called with no lock held.
 * As group_load: scanned under the block's content lock and alloc_lock, so
 * that it agrees with bm_alloc (memory first, bits after: never in a block
 * that is not loaded) and bm_free (bits first, memory after if loaded).
 * Then the bits past nbits, the fixed part and poisoned blocks (either copy)
 * are made unavailable.  *nfree (may be NULL): the block's clear bits on
 * disk, if this call loaded it.  A block that cannot be read is left
 * unavailable (logged) unless @strict.
 */
static int bm_block_load(struct mfs *fs, struct mfs_bmap *m, uint64_t k, bool strict,
                         uint64_t *nfree)
{
	uint64_t lo = k * MFS_BITMAP_BITS, hi = lo + MFS_BITMAP_BITS, *dst;
	struct mfs_brange *pz[2] = {NULL, NULL};
	unsigned npz[2] = {0, 0};
	uint64_t zones[2] = {m->zone, m->zone_twin}, free_bits = 0;
	const uint64_t *src;
	struct mfs_buf *b;
	int ret = 0;

	if (nfree)
		*nfree = 0;
	if (hi > m->nbits)
		hi = m->nbits;
	for (int z = 0; z < 2 && !ret; z++)
		if (zones[z] && hi > lo)
			ret = mfs_alloc_poisoned(fs, zones[z] + lo, hi - lo, &pz[z], &npz[z]);
	if (!ret)
		ret = mfs_meta_read(fs, m->disk + k, MFS_T_BITMAP, &b);
	if (ret) {
		free(pz[0]);
		free(pz[1]);
		/* a read that turned the filesystem read-only (fserror.c) is its caller's EIO */
		if (ret == -ENOMEM || strict || mfs_fs_errno(fs))
			return ret;
		mfs_lock(&fs->alloc_lock);
		if (m->loaded[k] == G_UNLOADED) {
			fprintf(stderr,
			        "mendfs: bitmap block %llu: %s: its items are not allocated\n",
			        (unsigned long long)(m->disk + k), strerror(-ret));
			memset(&m->map[k * BM_WORDS_PER_BLOCK], 0xff,
			       BM_WORDS_PER_BLOCK * sizeof(uint64_t));
			m->loaded[k] = G_BROKEN;
		}
		mfs_unlock(&fs->alloc_lock);
		return 0;
	}
	mfs_lock(&b->lock);
	mfs_lock(&fs->alloc_lock);
	if (m->loaded[k] != G_UNLOADED)
		goto out;
	src = (const uint64_t *)(b->data + sizeof(struct mfs_meta_hdr));
	dst = &m->map[k * BM_WORDS_PER_BLOCK];
	for (uint64_t w = 0; w < BM_WORDS_PER_BLOCK; w++) {
		uint64_t base = lo + w * 64, v = le64toh(src[w]);

		if (base >= hi)
			v = ~0ull;
		else if (base + 64 > hi)
			v |= ~0ull << (hi - base);
		dst[w] = v;
		free_bits += 64 - (uint64_t)__builtin_popcountll(v);
	}
	for (uint64_t i = lo; i < hi && i < m->fixed; i++)
		bm_set(m, i, true);
	for (int z = 0; z < 2; z++)
		for (unsigned j = 0; j < npz[z]; j++) {
			uint64_t p0 = pz[z][j].start, p1 = pz[z][j].start + pz[z][j].len;

			p0 = p0 > zones[z] + lo ? p0 - zones[z] : lo;
			p1 = p1 > zones[z] + lo ? p1 - zones[z] : lo;
			for (uint64_t i = p0; i < p1 && i < hi; i++)
				bm_set(m, i, true);
		}
	m->loaded[k] = G_LOADED;
	if (nfree)
		*nfree = free_bits;
out:
	mfs_unlock(&fs->alloc_lock);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	free(pz[0]);
	free(pz[1]);
	return 0;
}

/* Clear bits among the first @nbits of one bitmap block's @words. */
static uint64_t bm_count_clear(const uint64_t *words, uint64_t nbits)
{
	uint64_t n = 0;

	for (uint64_t w = 0; w < BM_WORDS_PER_BLOCK && w * 64 < nbits; w++) {
		uint64_t v = le64toh(words[w]);

		if (nbits - w * 64 < 64)
			v |= ~0ull << (nbits - w * 64);
		n += 64 - (uint64_t)__builtin_popcountll(v);
	}
	return n;
}

#define RECOUNT_BATCH 256u /* bitmap blocks per read: 1 MiB */

/*
 * The clear bits of an on-disk bitmap (@blocks blocks at @disk, @nbits
 * valid), for the counters of a mount after a crash; nothing is loaded into
 * memory.  Only at mount, before any transaction: the blocks on the device
 * are then the newest (replay wrote in place).  They are read in batches
 * straight from the device and each is verified as mfs_meta_read() does
 * (magic, type, location, checksum); a batch that meets a media error and a
 * block that fails its checks are read through mfs_meta_read() one by one,
 * which falls back to the twin and repairs.  A block lost in both copies
 * fails the count (and the mount).
 */
int mfs_bm_recount(struct mfs *fs, uint64_t disk, uint64_t blocks, uint64_t nbits, uint64_t *nfree)
{
	uint8_t *buf;
	int ret = 0;

	*nfree = 0;
	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, RECOUNT_BATCH * MFS_BLOCK_SIZE))
		return -ENOMEM;
	for (uint64_t k0 = 0; k0 < blocks && !ret; k0 += RECOUNT_BATCH) {
		unsigned n = blocks - k0 < RECOUNT_BATCH ? (unsigned)(blocks - k0) : RECOUNT_BATCH;
		int rd = blk_read(fs->dev, (disk + k0) * MFS_SECTORS_PER_BLOCK, buf,
		                  n * MFS_BLOCK_SIZE, 0);

		for (unsigned j = 0; j < n && !ret; j++) {
			uint64_t k = k0 + j, valid = nbits - k * MFS_BITMAP_BITS;
			const uint8_t *blk = buf + (size_t)j * MFS_BLOCK_SIZE;
			struct mfs_buf *b;

			if (k * MFS_BITMAP_BITS >= nbits)
				break;
			if (valid > MFS_BITMAP_BITS)
				valid = MFS_BITMAP_BITS;
			if (!rd && !mfs_block_verify(blk, fs->seed, MFS_T_BITMAP, disk + k)) {
				*nfree += bm_count_clear(
				        (const uint64_t *)(blk + sizeof(struct mfs_meta_hdr)),
				        valid);
				continue;
			}
			ret = mfs_meta_read_locked(fs, disk + k, MFS_T_BITMAP, &b);
			if (ret)
				break;
			*nfree += bm_count_clear(
			        (const uint64_t *)(b->data + sizeof(struct mfs_meta_hdr)), valid);
			mfs_unlock(&b->lock);
			mfs_buf_put(b);
		}
	}
	free(buf);
	return ret;
}

/*
 * Set up an in-memory bitmap; with @nfree (a recount) *nfree gets the clear
 * bits on disk (mfs_bm_recount); the blocks are loaded when needed either way.
 */
int mfs_bm_setup(struct mfs *fs, struct mfs_bmap *m, uint64_t disk, uint64_t blocks, uint64_t nbits,
                 uint64_t fixed, uint64_t zone, uint64_t zone_twin, uint64_t *nfree)
{
	if (blocks * MFS_BITMAP_BITS < nbits || !nbits)
		return -EUCLEAN;
	m->map = malloc(blocks * BM_WORDS_PER_BLOCK * sizeof(uint64_t) + 8);
	m->loaded = calloc(blocks, 1);
	if (!m->map || !m->loaded)
		return -ENOMEM;
	m->nbits = nbits;
	m->hint = fixed < nbits ? fixed : 0;
	m->disk = disk;
	m->blocks = blocks;
	m->fixed = fixed;
	m->zone = zone;
	m->zone_twin = zone_twin;
	return nfree ? mfs_bm_recount(fs, disk, blocks, nbits, nfree) : 0;
}

/* --- poison of a data range ---------------------------------------------------------- */

/*
 * The poisoned blocks of [start, start + len), as merged block ranges in
 * *out (malloc'ed, *nr entries).  Returns 0 or -ENOMEM.
 */
int mfs_alloc_poisoned(struct mfs *fs, uint64_t start, uint64_t len, struct mfs_brange **out,
                       unsigned *nr)
{
	uint64_t sec = start * MFS_SECTORS_PER_BLOCK, end = (start + len) * MFS_SECTORS_PER_BLOCK;
	struct mfs_brange *v = NULL;
	unsigned n = 0, cap = 0;
	struct blk_range r[32];

	while (sec < end) {
		unsigned got = blk_poison_lookup(fs->dev, sec, end - sec, r, 32, NULL);

		if (!got)
			break;
		for (unsigned i = 0; i < got; i++) {
			uint64_t b0 = r[i].sector / MFS_SECTORS_PER_BLOCK;
			uint64_t b1 = (r[i].sector + r[i].nr - 1) / MFS_SECTORS_PER_BLOCK + 1;

			if (n && v[n - 1].start + v[n - 1].len >= b0) {
				if (b1 > v[n - 1].start + v[n - 1].len)
					v[n - 1].len = b1 - v[n - 1].start;
				continue;
			}
			if (n == cap) {
				struct mfs_brange *nv;

				cap = cap ? cap * 2 : 8;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					return -ENOMEM;
				}
				v = nv;
			}
			v[n].start = b0;
			v[n].len = b1 - b0;
			n++;
		}
		sec = r[got - 1].sector + r[got - 1].nr;
	}
	*out = v;
	*nr = n;
	return 0;
}

/* --- meta zone and inodes ------------------------------------------------------------ */

static int bm_alloc(struct mfs *fs, struct mfs_txn *txn, struct mfs_bmap *m, uint64_t *le_free,
                    uint64_t *bit)
{
	uint64_t i, need;
	int ret;

	if (!txn)
		return -EINVAL;
	mfs_lock(&fs->alloc_lock);
	while ((i = bm_find(m, &need)) == UINT64_MAX && need != UINT64_MAX) {
		mfs_unlock(&fs->alloc_lock);
		ret = bm_block_load(fs, m, need, false, NULL);
		if (ret)
			return ret;
		mfs_lock(&fs->alloc_lock);
	}
	if (i == UINT64_MAX) {
		mfs_unlock(&fs->alloc_lock);
		return -ENOSPC;
	}
	bm_set(m, i, true);
	m->hint = i + 1;
	mfs_alloc_counter_add(fs, le_free, -1);
	mfs_unlock(&fs->alloc_lock);

	ret = mfs_bm_disk_update(fs, txn, m->disk, i, 1, true, 0);
	if (ret) {
		mfs_lock(&fs->alloc_lock);
		bm_set(m, i, false);
		mfs_alloc_counter_add(fs, le_free, 1);
		mfs_unlock(&fs->alloc_lock);
		return ret;
	}
	*bit = i;
	return 0;
}

static int bm_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_bmap *m, uint64_t *le_free,
                   uint64_t i)
{
	bool used;
	int ret;

	if (!txn)
		return -EINVAL;
	mfs_lock(&fs->alloc_lock);
	/* not loaded: the bit on disk says (mfs_bm_disk_update refuses a clear one) */
	used = m->loaded[i / MFS_BITMAP_BITS] != G_LOADED || bm_test(m, i);
	mfs_unlock(&fs->alloc_lock);
	if (!used)
		return -EUCLEAN;
	ret = mfs_bm_disk_update(fs, txn, m->disk, i, 1, false, 0);
	if (ret)
		return ret;
	mfs_lock(&fs->alloc_lock);
	if (m->loaded[i / MFS_BITMAP_BITS] == G_LOADED)
		bm_set(m, i, false);
	mfs_alloc_counter_add(fs, le_free, 1);
	mfs_unlock(&fs->alloc_lock);
	return 0;
}

int mfs_alloc_meta(struct mfs *fs, struct mfs_txn *txn, uint64_t *blocknr)
{
	uint64_t i;
	int ret = bm_alloc(fs, txn, &A(fs)->meta, &fs->sb.free_meta, &i);

	if (!ret)
		*blocknr = sb64(fs->sb.meta_start) + i;
	return ret;
}

int mfs_free_meta(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr)
{
	uint64_t meta_start = sb64(fs->sb.meta_start);
	uint64_t fixed_end = sb64(fs->sb.inode_table_start) + sb64(fs->sb.inode_table_blocks);
	int ret;

	if (blocknr < fixed_end || blocknr >= meta_start + sb64(fs->sb.meta_len))
		return -EINVAL;
	ret = bm_free(fs, txn, &A(fs)->meta, &fs->sb.free_meta, blocknr - meta_start);
	if (ret == -EUCLEAN)
		fprintf(stderr, "mendfs: freeing meta block %llu: already free\n",
		        (unsigned long long)blocknr);
	if (!ret)
		mfs_meta_forget(fs, blocknr);
	return ret;
}

int mfs_alloc_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t *ino)
{
	uint64_t i;
	int ret = bm_alloc(fs, txn, &A(fs)->ino, &fs->sb.free_inodes, &i);

	if (!ret)
		*ino = i + 1;
	return ret;
}

int mfs_free_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t ino)
{
	int ret;

	if (ino <= MFS_ROOT_INO || ino > sb64(fs->sb.nr_inodes))
		return -EINVAL;
	ret = bm_free(fs, txn, &A(fs)->ino, &fs->sb.free_inodes, ino - 1);
	if (ret == -EUCLEAN)
		fprintf(stderr, "mendfs: freeing inode %llu: already free\n",
		        (unsigned long long)ino);
	return ret;
}
