/* SPDX-License-Identifier: MIT */
/*
 * Per-sector data checksums (csum.h, docs/FORMAT.md §15): the table in the
 * meta zone, read and changed through the metadata buffer cache (meta.c) and
 * the journal, and the checked read path.  Calls the block map (mfs_bmap),
 * the journal and the block engine; called by read.c, write.c, fio.c,
 * file.c and recovery.c only when fs->data_csum is set.  Also the inlined
 * hash of the metadata checksums (mfs_csum_hash4k, mfs_csum_meta_*), for the
 * journal and the buffer cache whatever the features.
 */
#include <errno.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/*
 * x86-64: XXH3's AVX2 and AVX-512 loops compiled here too, for CPUs that
 * have them (chosen once at load, csum_cpu): 216 (AVX2) instead of 477
 * instructions per sector in a standalone loop, and the AVX-512 loop takes
 * one instruction per step where AVX2 takes two.  The accumulator loads need
 * 64-byte alignment (XXH_ACC_ALIGN: 64, as xxHash's own dispatching build
 * sets it); the secret's are unaligned loads.
 */
#include <immintrin.h>
#define CSUM_AVX2           1
#define XXH_DISPATCH_AVX2   1
#define XXH_TARGET_AVX2     __attribute__((target("avx2")))
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX512   __attribute__((target("avx512f")))
#define XXH_ACC_ALIGN       64
#else
#define CSUM_AVX2 0
#endif
#define XXH_INLINE_ALL /* the hash compiled here, with our flags: vectorised (SSE2) */
#include <xxhash.h>

#include "csum.h"
#include "fio.h"

#define SPB     MFS_SECTORS_PER_BLOCK
#define SS      BLK_SECTOR_SIZE
#define RUN_MAX 256u /* blocks read and checked in one batch (1 MiB) */

_Static_assert(sizeof(((struct mfs *)0)->csum_secret) == XXH3_SECRET_DEFAULT_SIZE,
               "struct mfs holds XXH3's default-size secret");

bool mfs_csum_avx2, mfs_csum_avx512;

/*
 * Sectors are hashed in address order, but the 4 KiB pages of a mapping lie
 * anywhere in memory and the CPU's prefetchers stop at a page's end, so on
 * data not in the cache (a first read of file data) every block began with
 * a wait for memory.  The loops below ask for the sector one block ahead
 * while hashing the current one (within the @n sectors they were given):
 * 70-78 ns per cold sector went to 47-49 in a standalone loop on this
 * machine (docs/benchmarks/data-path.md).  A 4 KiB block alone prefetches
 * nothing.
 */
static inline __attribute__((always_inline)) void prefetch_ahead(const uint8_t *d, size_t i,
                                                                 size_t n)
{
	if (i + SPB < n)
		for (unsigned k = 0; k < SS; k += 64)
			__builtin_prefetch(d + (i + SPB) * SS + k, 0, 3);
}

#if CSUM_AVX2
__attribute__((constructor)) static void csum_cpu(void)
{
	__builtin_cpu_init(); /* a constructor may run before libgcc's */
	mfs_csum_avx2 = __builtin_cpu_supports("avx2");
	mfs_csum_avx512 = __builtin_cpu_supports("avx512f");
}

/* hash_sectors() with the AVX-512 loop: the same values. */
__attribute__((target("avx512f"))) static void
hash_sectors_avx512(const uint8_t *secret, const uint8_t *d, size_t n, uint32_t *v)
{
	for (size_t i = 0; i < n; i++) {
		prefetch_ahead(d, i, n);
		v[i] = (uint32_t)XXH3_hashLong_64b_internal(
		        d + i * SS, SS, secret, XXH3_SECRET_DEFAULT_SIZE,
		        XXH3_accumulate_512_avx512, XXH3_scrambleAcc_avx512);
	}
}

/* hash_sectors() with the AVX2 loop: the same values. */
__attribute__((target("avx2"))) static void
hash_sectors_avx2(const uint8_t *secret, const uint8_t *d, size_t n, uint32_t *v)
{
	for (size_t i = 0; i < n; i++) {
		prefetch_ahead(d, i, n);
		v[i] = (uint32_t)XXH3_hashLong_64b_internal(
		        d + i * SS, SS, secret, XXH3_SECRET_DEFAULT_SIZE, XXH3_accumulate_512_avx2,
		        XXH3_scrambleAcc_avx2);
	}
}

/* mfs_csum_hash4k() with the AVX-512 loop. */
__attribute__((target("avx512f"))) static uint64_t hash4k_avx512(const void *block, uint64_t seed)
{
	return XXH3_hashLong_64b_withSeed_internal(
	        block, MFS_BLOCK_SIZE, seed, XXH3_accumulate_512_avx512, XXH3_scrambleAcc_avx512,
	        XXH3_initCustomSecret_avx512);
}

/* mfs_csum_hash4k() with the AVX2 loop. */
__attribute__((target("avx2"))) static uint64_t hash4k_avx2(const void *block, uint64_t seed)
{
	return XXH3_hashLong_64b_withSeed_internal(block, MFS_BLOCK_SIZE, seed,
	                                           XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2,
	                                           XXH3_initCustomSecret_avx2);
}
#endif

/*
 * The metadata checksums (FORMAT.md §3, §8) with the hash compiled here:
 * XXH3_64bits_withSeed's values, without the shared library's call and with
 * the vector loop the CPU has.  Used whatever the features.
 */
uint64_t mfs_csum_hash4k(const void *block, uint64_t seed)
{
	_Static_assert(MFS_BLOCK_SIZE > XXH3_MIDSIZE_MAX, "a block takes XXH3's long-input path");
#if CSUM_AVX2
	if (mfs_csum_avx512)
		return hash4k_avx512(block, seed);
	if (mfs_csum_avx2)
		return hash4k_avx2(block, seed);
#endif
	return XXH3_64bits_withSeed(block, MFS_BLOCK_SIZE, seed);
}

void mfs_csum_meta_seal(void *block, uint64_t seed)
{
	struct mfs_meta_hdr *hdr = block;

	/* mfs_block_csum's value: the hash of the block with its csum field zero */
	hdr->csum = 0;
	hdr->csum = mfs_csum_hash4k(block, seed);
}

int mfs_csum_meta_verify(const void *block, uint64_t seed, uint16_t type, uint64_t blocknr)
{
	const struct mfs_meta_hdr *hdr = block;
	uint64_t tmp[MFS_BLOCK_SIZE / sizeof(uint64_t)];

	if (hdr->magic != MFS_META_MAGIC || (type && hdr->type != type) || hdr->blocknr != blocknr)
		return -EUCLEAN;
	/* a copy with the csum zeroed, as mfs_block_csum: the block stays const */
	memcpy(tmp, block, MFS_BLOCK_SIZE);
	((struct mfs_meta_hdr *)tmp)->csum = 0;
	return hdr->csum == mfs_csum_hash4k(tmp, seed) ? 0 : -EUCLEAN;
}

void mfs_csum_init(struct mfs *fs)
{
	XXH3_generateSecret_fromSeed(fs->csum_secret, fs->sb.csum_seed);
}

/*
 * The checksums of the @n sectors at @d into @v.  A sector is longer than
 * 240 bytes, so XXH3 with a seed hashes it with a secret derived from the
 * seed; made once per mount (mfs_csum_init), not once per sector as
 * XXH3_64bits_withSeed does: the same values (test_csum checks).
 */
static inline __attribute__((always_inline)) void
hash_sectors(const struct mfs *fs, const uint8_t *d, size_t n, uint32_t *v)
{
	_Static_assert(SS > XXH3_MIDSIZE_MAX, "a sector takes XXH3's long-input path");
#if CSUM_AVX2
	if (mfs_csum_avx512) {
		hash_sectors_avx512(fs->csum_secret, d, n, v);
		return;
	}
	if (mfs_csum_avx2) {
		hash_sectors_avx2(fs->csum_secret, d, n, v);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++) {
		prefetch_ahead(d, i, n);
		v[i] = (uint32_t)XXH3_64bits_withSecretandSeed(d + i * SS, SS, fs->csum_secret,
		                                               sizeof(fs->csum_secret), fs->seed);
	}
}

uint32_t mfs_csum_sector(const struct mfs *fs, const void *sector)
{
	uint32_t v;

	hash_sectors(fs, sector, 1, &v);
	return v;
}

/*
 * The table block holding data zone block @pblk's entry, read into *@bp
 * (a reference the caller puts), the entry's offset in it and how many
 * entries from it on the block holds (@room, may be NULL); -EUCLEAN if
 * @pblk is not in the data zone.
 */
static int table_get(struct mfs *fs, uint64_t pblk, struct mfs_buf **bp, unsigned *off,
                     uint64_t *room)
{
	uint64_t i;

	if (pblk < fs->sb.data_start || pblk - fs->sb.data_start >= fs->sb.data_len)
		return -EUCLEAN;
	i = pblk - fs->sb.data_start;
	*off = (unsigned)(sizeof(struct mfs_meta_hdr) +
	                  (i % MFS_CSUM_BLOCKS_PER_TBLOCK) * MFS_CSUM_ENTRY_SIZE);
	if (room)
		*room = (MFS_BLOCK_SIZE - *off) / MFS_CSUM_ENTRY_SIZE;
	return mfs_meta_read(fs, fs->sb.csum_table_start + i / MFS_CSUM_BLOCKS_PER_TBLOCK,
	                     MFS_T_DATA_CSUM, bp);
}

/* Store @nsect checksums from sector @s of @pblk (values in @v) in @txn. */
static int store(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, unsigned s, unsigned nsect,
                 const uint32_t *v)
{
	struct mfs_buf *b;
	unsigned off;
	int ret;

	ret = table_get(fs, pblk, &b, &off, NULL);
	if (ret)
		return ret;
	mfs_lock(&b->lock);
	memcpy(b->data + off + s * 4u, v, nsect * 4u);
	mfs_txn_dirty(txn, b);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}

int mfs_csum_set_sectors(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, unsigned s,
                         unsigned nsect, const void *data)
{
	uint32_t v[SPB];

	hash_sectors(fs, data, nsect, v);
	return store(fs, txn, pblk, s, nsect, v);
}

int mfs_csum_set(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, const void *data,
                 uint64_t nblk)
{
	uint32_t v[MFS_CSUM_BLOCKS_PER_TBLOCK * SPB];
	const uint8_t *d = data;

	/*
	 * one table block at a time: one lookup, one lock, one dirtying for up
	 * to 126 blocks; hashed before the lock (readers of the block wait less)
	 */
	while (nblk) {
		struct mfs_buf *b;
		unsigned off;
		uint64_t n;
		int ret;

		ret = table_get(fs, pblk, &b, &off, &n);
		if (ret)
			return ret;
		if (n > nblk)
			n = nblk;
		hash_sectors(fs, d, n * SPB, v);
		mfs_lock(&b->lock);
		memcpy(b->data + off, v, n * MFS_CSUM_ENTRY_SIZE);
		mfs_txn_dirty(txn, b);
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		pblk += n;
		d += n * MFS_BLOCK_SIZE;
		nblk -= n;
	}
	return 0;
}

/*
 * Copy the stored entries of up to @nblk blocks from @pblk, as far as one
 * table block holds them, into @v; *@n gets how many blocks.  0 or -errno.
 */
static inline __attribute__((always_inline)) int
table_entries(struct mfs *fs, uint64_t pblk, uint64_t nblk, uint32_t *v, uint64_t *n)
{
	struct mfs_buf *b;
	unsigned off;
	int ret;

	ret = table_get(fs, pblk, &b, &off, n);
	if (ret)
		return ret;
	if (*n > nblk)
		*n = nblk;
	mfs_lock(&b->lock);
	memcpy(v, b->data + off, *n * MFS_CSUM_ENTRY_SIZE);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}

/*
 * Does any of the @n checksums @h differ from @v?  A few blocks' worth: a loop
 * the compiler vectorises; more: memcmp, cheaper per entry past its call.
 */
static inline bool differ(const uint32_t *h, const uint32_t *v, uint64_t n)
{
	uint32_t x = 0;

	if (n >= 8 * SPB)
		return memcmp(h, v, n * sizeof(*h)) != 0;
	for (uint64_t i = 0; i < n; i++)
		x |= h[i] ^ v[i];
	return x != 0;
}

struct mapped_hash {
	struct mfs *fs;
	uint32_t *h;
};

static int mapped_hash(const void *addr, size_t len, void *arg)
{
	struct mapped_hash *a = arg;

	hash_sectors(a->fs, addr, len / SS, a->h);
	return 0;
}

/*
 * Do the @nblk whole blocks from @pblk, whose contents are @data, all match
 * the table?  0 yes; 1 no, *@bad the first sector that does not; -errno
 * when the table cannot be read.  @mapped: @data lies in the device mapping
 * and is hashed under the engine's fault guard (blk_direct_load: -EFAULT if
 * a load faulted); the table entries are read first, outside it, as a table
 * block read goes through the engine.
 */
static inline __attribute__((always_inline)) int run_matches(struct mfs *fs, uint64_t pblk,
                                                             const uint8_t *data, uint64_t nblk,
                                                             bool mapped, uint64_t *bad)
{
	uint32_t v[MFS_CSUM_BLOCKS_PER_TBLOCK * SPB], h[MFS_CSUM_BLOCKS_PER_TBLOCK * SPB];
	struct mapped_hash a = {fs, h};

	while (nblk) {
		uint64_t n;
		int ret = table_entries(fs, pblk, nblk, v, &n);

		if (ret)
			return ret;
		if (mapped) {
			ret = blk_direct_load(fs->dev, data, n * MFS_BLOCK_SIZE, mapped_hash, &a);
			if (ret)
				return ret;
		} else {
			hash_sectors(fs, data, n * SPB, h);
		}
		/* all equal, the usual case: one vectorised pass; the search only if not */
		if (differ(h, v, n * SPB))
			for (uint64_t i = 0; i < n * SPB; i++)
				if (h[i] != v[i]) {
					*bad = pblk * SPB + i;
					return 1;
				}
		pblk += n;
		data += n * MFS_BLOCK_SIZE;
		nblk -= n;
	}
	return 0;
}

/* run_matches on a buffer: 0, or -EIO with the first mismatch posted as an event. */
static int check_run(struct mfs *fs, uint64_t pblk, const uint8_t *data, uint64_t nblk)
{
	uint64_t bad = 0;
	int ret = run_matches(fs, pblk, data, nblk, false, &bad);

	if (ret != 1)
		return ret;
	mfs_event_post(fs, MFS_EV_DATA_CSUM, MFS_EVC_CORRUPT, bad, 1, 0);
	return -EIO;
}

int mfs_csum_check_mapped(struct mfs *fs, uint64_t pblk, const void *addr, uint64_t nblk)
{
	uint64_t bad = 0;

	return run_matches(fs, pblk, addr, nblk, true, &bad);
}

/*
 * The transaction to store checksums in outside the write path: the running
 * one if this thread holds a handle (it cannot commit meanwhile), else a
 * handle of its own (*own set: end it with mfs_txn_end).
 */
static int txn_get(struct mfs *fs, struct mfs_txn **txn, bool *own)
{
	*own = !mfs_txn_depth;
	if (*own)
		return mfs_txn_begin(fs, txn);
	mfs_lock(&fs->txn_lock);
	*txn = fs->running;
	mfs_unlock(&fs->txn_lock);
	return *txn ? 0 : -EIO;
}

static int txn_put(struct mfs_txn *txn, bool own, int ret)
{
	int err = own ? mfs_txn_end(txn) : 0;

	return ret ? ret : err;
}

int mfs_csum_zeroed(struct mfs *fs, uint64_t sector, uint64_t nr)
{
	static const uint8_t zero[SS];
	uint32_t z = mfs_csum_sector(fs, zero);
	struct mfs_txn *txn;
	bool own;
	int ret;

	ret = txn_get(fs, &txn, &own);
	if (ret)
		return ret;
	/* one table block at a time (its entries' sectors are consecutive) */
	while (!ret && nr) {
		uint64_t room, n;
		struct mfs_buf *b;
		unsigned off, s = (unsigned)(sector % SPB);
		uint32_t *v;

		ret = table_get(fs, sector / SPB, &b, &off, &room);
		if (ret)
			break;
		n = room * SPB - s < nr ? room * SPB - s : nr;
		mfs_lock(&b->lock);
		v = (uint32_t *)(b->data + off) + s;
		for (uint64_t i = 0; i < n; i++)
			v[i] = z;
		mfs_txn_dirty(txn, b);
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		sector += n;
		nr -= n;
	}
	return txn_put(txn, own, ret);
}

int mfs_csum_refresh(struct mfs *fs, uint64_t pblk, unsigned s, unsigned nsect)
{
	struct mfs_txn *txn;
	struct bounce bb;
	bool own;
	int ret;

	if (!nsect)
		return 0;
	ret = blk_read(fs->dev, pblk * SPB + s, bb.b, nsect * SS, 0);
	if (ret)
		return ret;
	ret = txn_get(fs, &txn, &own);
	if (ret)
		return ret;
	ret = mfs_csum_set_sectors(fs, txn, pblk, s, nsect, bb.b);
	return txn_put(txn, own, ret);
}

int mfs_csum_zero_in_block(struct mfs *fs, uint64_t pblk, uint8_t *blk, unsigned from, unsigned to)
{
	unsigned s0 = from / SS, s1 = (to + SS - 1) / SS;
	int mask, ret;

	mask = mfs_csum_bad_mask(fs, pblk, blk);
	if (mask < 0)
		return mask;
	if ((from % SS && (mask & (1 << s0))) || (to % SS && (mask & (1 << (s1 - 1)))))
		return -EIO; /* the other bytes of a damaged sector stay lost */
	memset(blk + from, 0, to - from);
	ret = blk_write(fs->dev, pblk * SPB + s0, blk + s0 * SS, (s1 - s0) * SS, 0);
	if (ret)
		return ret;
	{
		struct mfs_txn *txn;
		bool own;

		ret = txn_get(fs, &txn, &own);
		if (ret)
			return ret;
		ret = mfs_csum_set_sectors(fs, txn, pblk, s0, s1 - s0, blk + s0 * SS);
		return txn_put(txn, own, ret);
	}
}

int mfs_csum_bad_masks(struct mfs *fs, uint64_t pblk, const void *data, uint64_t nblk,
                       uint8_t *masks)
{
	uint32_t v[MFS_CSUM_BLOCKS_PER_TBLOCK * SPB], h[MFS_CSUM_BLOCKS_PER_TBLOCK * SPB];
	const uint8_t *d = data;

	while (nblk) {
		uint64_t n;
		int ret = table_entries(fs, pblk, nblk, v, &n);

		if (ret)
			return ret;
		hash_sectors(fs, d, n * SPB, h);
		if (!differ(h, v, n * SPB)) { /* all equal, the usual case */
			memset(masks, 0, n);
			pblk += n;
			d += n * MFS_BLOCK_SIZE;
			masks += n;
			nblk -= n;
			continue;
		}
		for (uint64_t k = 0; k < n; k++) {
			masks[k] = 0;
			for (unsigned i = 0; i < SPB; i++)
				if (h[k * SPB + i] != v[k * SPB + i])
					masks[k] |= (uint8_t)(1u << i);
		}
		pblk += n;
		d += n * MFS_BLOCK_SIZE;
		masks += n;
		nblk -= n;
	}
	return 0;
}

int mfs_csum_bad_mask(struct mfs *fs, uint64_t pblk, const void *data)
{
	uint8_t mask;
	int ret = mfs_csum_bad_masks(fs, pblk, data, 1, &mask);

	return ret ? ret : mask;
}

/* Add device sectors [s, s + n) to @rec as the engine does for poison. */
static void rec_add(struct blk_recovery *rec, uint64_t s, uint64_t n)
{
	if (!rec)
		return;
	rec->zeroed += n;
	if (rec->nr && rec->ranges[rec->nr - 1].sector + rec->ranges[rec->nr - 1].nr == s) {
		rec->ranges[rec->nr - 1].nr += n;
		return;
	}
	if (rec->nr >= rec->max) {
		rec->truncated = true;
		return;
	}
	rec->ranges[rec->nr].sector = s;
	rec->ranges[rec->nr].nr = n;
	rec->nr++;
}

/* Sectors of block @pblk the engine zero-filled (poison) in a recovery read: a bitmask. */
static int poisoned_mask(const struct blk_recovery *rec, unsigned from, uint64_t pblk)
{
	uint64_t s0 = pblk * SPB, s1 = s0 + SPB;
	int mask = 0;

	for (unsigned i = from; rec && i < rec->nr; i++) {
		uint64_t a = rec->ranges[i].sector, e = a + rec->ranges[i].nr;

		for (uint64_t s = a > s0 ? a : s0; s < e && s < s1; s++)
			mask |= 1 << (s - s0);
	}
	return mask;
}

/*
 * Read device block @pblk into @blk (one bio, @bio_flags, @rec) and check
 * it.  Returns the bitmask of sectors failing their checksum (poisoned
 * sectors zero-filled by a recovery read excluded) or -errno.
 */
static int read_check(struct mfs *fs, uint64_t pblk, uint8_t *blk, unsigned bio_flags,
                      struct blk_recovery *rec)
{
	unsigned first = rec ? rec->nr : 0;
	struct fio io;
	int ret, mask;

	fio_init(&io, fs);
	fio_submit(&io, BLK_OP_READ, pblk, blk, 1, bio_flags, rec);
	ret = fio_done(&io);
	if (ret)
		return ret;
	mask = mfs_csum_bad_mask(fs, pblk, blk);
	if (mask > 0 && rec)
		mask &= ~poisoned_mask(rec, first, pblk);
	/* a damage event per sector (the ring posts each sector once per mount) */
	for (unsigned s = 0; mask > 0 && s < SPB; s++)
		if (mask & (1 << s))
			mfs_event_post(fs, MFS_EV_DATA_CSUM, MFS_EVC_CORRUPT, pblk * SPB + s, 1, 0);
	return mask;
}

ssize_t mfs_csum_read_blocks(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len,
                             uint64_t off, unsigned bio_flags, struct blk_recovery *rec)
{
	uint64_t end = off + len, lblk = off / MFS_BLOCK_SIZE;
	uint64_t last = (end + MFS_BLOCK_SIZE - 1) / MFS_BLOCK_SIZE;
	struct bounce bb;
	uint8_t *out = buf;
	int ret = 0;

	while (lblk < last && !ret) {
		uint64_t pblk, count, n;
		bool unwritten;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		n = count < last - lblk ? count : last - lblk;
		for (uint64_t i = 0; i < n && !ret; i++) {
			uint64_t b = lblk + i, bstart = b * MFS_BLOCK_SIZE;
			uint64_t from = bstart > off ? bstart : off;
			uint64_t to = bstart + MFS_BLOCK_SIZE < end ? bstart + MFS_BLOCK_SIZE : end;
			int mask;

			if (!pblk || unwritten) {
				memset(out + (from - off), 0, to - from);
				continue;
			}
			if (!(bio_flags & BLK_BIO_RECOVERY) && from == bstart &&
			    to == bstart + MFS_BLOCK_SIZE) {
				/* whole blocks of a plain read: one batch, into the buffer */
				uint64_t run = 1;
				struct fio io;

				while (i + run < n && run < RUN_MAX &&
				       (b + run + 1) * MFS_BLOCK_SIZE <= end)
					run++;
				fio_init(&io, fs);
				fio_submit(&io, BLK_OP_READ, pblk + i, out + (bstart - off), run,
				           bio_flags, rec);
				ret = fio_done(&io);
				if (!ret)
					ret = check_run(fs, pblk + i, out + (bstart - off), run);
				i += run - 1;
				continue;
			}
			mask = read_check(fs, pblk + i, bb.b, bio_flags, rec);
			if (mask < 0) {
				ret = mask;
				break;
			}
			for (unsigned s = 0; s < SPB && mask; s++) {
				uint64_t ss = bstart + s * SS;

				if (!(mask & (1 << s)))
					continue;
				/* a sector outside the range asked for does not matter */
				if (ss + SS <= from || ss >= to)
					continue;
				if (!(bio_flags & BLK_BIO_RECOVERY)) {
					ret = -EIO;
					break;
				}
				memset(bb.b + s * SS, 0, SS);
				rec_add(rec, (pblk + i) * SPB + s, 1);
			}
			if (!ret)
				memcpy(out + (from - off), bb.b + (from - bstart), to - from);
		}
		lblk += n;
	}
	return ret ? ret : (ssize_t)len;
}

int mfs_csum_run_damage(struct mfs *fs, uint64_t pblk, uint64_t nblk, uint8_t *buf, uint8_t *masks)
{
	struct blk_range r[4 * SPB];
	struct blk_recovery rec = {.ranges = r, .max = 4 * SPB};
	struct fio io;
	int ret;

	if (!nblk || nblk > BIO_MAX_BLOCKS)
		return -EINVAL;
	/* one bio: the engine fills @rec from one completion */
	fio_init(&io, fs);
	fio_submit(&io, BLK_OP_READ, pblk, buf, nblk, BLK_BIO_RECOVERY, &rec);
	ret = fio_done(&io);
	if (ret)
		return ret;
	if (rec.truncated) {
		/* poison in more pieces than @rec holds: block by block */
		for (uint64_t k = 0; k < nblk; k++) {
			int mask = mfs_csum_block_damage(fs, pblk + k);

			if (mask < 0)
				return mask;
			masks[k] = (uint8_t)mask;
		}
		return 0;
	}
	ret = mfs_csum_bad_masks(fs, pblk, buf, nblk, masks);
	if (ret)
		return ret;
	for (uint64_t k = 0; k < nblk; k++) {
		int poison = rec.nr ? poisoned_mask(&rec, 0, pblk + k) : 0;
		int bad = masks[k] & ~poison;

		/* a damage event per sector failing its checksum, as read_check posts */
		for (unsigned s = 0; bad && s < SPB; s++)
			if (bad & (1 << s))
				mfs_event_post(fs, MFS_EV_DATA_CSUM, MFS_EVC_CORRUPT,
				               (pblk + k) * SPB + s, 1, 0);
		masks[k] = (uint8_t)(bad | poison);
	}
	return 0;
}

int mfs_csum_block_damage(struct mfs *fs, uint64_t pblk)
{
	struct blk_range r[SPB];
	struct blk_recovery rec = {.ranges = r, .max = SPB};
	struct bounce bb;
	int mask;

	mask = read_check(fs, pblk, bb.b, BLK_BIO_RECOVERY, &rec);
	if (mask < 0)
		return mask;
	return mask | poisoned_mask(&rec, 0, pblk);
}

int mfs_csum_block_verify(struct mfs *fs, uint64_t pblk)
{
	struct blk_range r[SPB];
	struct blk_recovery rec = {.ranges = r, .max = SPB};
	struct bounce bb;

	return read_check(fs, pblk, bb.b, BLK_BIO_RECOVERY, &rec);
}

int mfs_csum_edge_write(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, uint8_t *blk,
                        unsigned from, unsigned to, const void *data)
{
	/* [c0, c1): the sectors the write covers whole; their old contents do not matter */
	unsigned s0 = from / SS, s1 = (to + SS - 1) / SS, c0 = s0 + !!(from % SS), c1 = to / SS;
	uint32_t v[SPB], h[SPB];
	uint64_t n;
	int mask = 0, ret;

	if (c1 < c0)
		c1 = c0; /* inside one sector */
	/* the other sectors' checks: hashed once, here (the caller stores only [s0, s1)) */
	ret = table_entries(fs, pblk, 1, v, &n);
	if (ret)
		return ret;
	hash_sectors(fs, blk, c0, h);
	hash_sectors(fs, blk + c1 * SS, SPB - c1, h + c1);
	for (unsigned i = 0; i < SPB; i++)
		if ((i < c0 || i >= c1) && h[i] != v[i])
			mask |= 1 << i;
	if (!mask)
		return 0;
	/* a damaged sector the write covers only in part: its other bytes are lost */
	if ((from % SS && (mask & (1 << s0))) || (to % SS && (mask & (1 << (s1 - 1)))))
		return -EIO;
	memcpy(blk + from, data, to - from);
	ret = blk_write(fs->dev, pblk * SPB + s0, blk + s0 * SS, (s1 - s0) * SS, 0);
	if (!ret)
		ret = mfs_csum_set_sectors(fs, txn, pblk, s0, s1 - s0, blk + s0 * SS);
	return ret ? ret : 1;
}
