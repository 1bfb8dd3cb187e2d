/* SPDX-License-Identifier: MIT */
/*
 * Recovery operations (docs/RECOVERY.md): recovery read, poison map, block
 * map and zero-init, all file-relative and built on the extent map
 * (mfs_bmap) and the engine (BLK_BIO_RECOVERY reads, blk_poison_lookup,
 * BLK_OP_WRITE_ZEROES).  Reads and maps take the inode lock shared, zero-init
 * takes it exclusive.  Zero-init works in place: nothing is allocated, freed
 * or remapped, so the file keeps its blocks; it sets mtime and ctime like a
 * write.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "csum.h"
#include "fio.h"
#include "mfs_int.h"
#include "mfs_recovery.h"

#define BS               MFS_BLOCK_SIZE
#define SPB              MFS_SECTORS_PER_BLOCK
#define REC_RANGES       64u
#define ZERO_MAX_SECTORS (1u << 21) /* 1 GiB per WRITE_ZEROES bio */

static uint64_t isize(const struct mfs_ino *ip)
{
	return le64toh(ip->di.size);
}

/* Append [off, off + len) to @r, merging with the previous range.  False: no room. */
static bool range_add(struct mfs_frange *r, unsigned max, unsigned *nr, uint64_t off, uint64_t len)
{
	if (!len)
		return true;
	if (*nr && r[*nr - 1].offset + r[*nr - 1].length == off) {
		r[*nr - 1].length += len;
		return true;
	}
	if (*nr >= max)
		return false;
	r[*nr].offset = off;
	r[*nr].length = len;
	(*nr)++;
	return true;
}

static int cmp_blk_range(const void *a, const void *b)
{
	const struct blk_range *x = a, *y = b;

	return x->sector < y->sector ? -1 : x->sector > y->sector;
}

/*
 * Device sector range [s, s + n) of an extent whose block @pblk holds file
 * block @lblk, as file bytes clipped to [lo, hi).  False when empty.
 */
static bool sect_to_file(uint64_t lblk, uint64_t pblk, uint64_t s, uint64_t n, uint64_t lo,
                         uint64_t hi, uint64_t *off, uint64_t *len)
{
	uint64_t a = lblk * BS + (s - pblk * SPB) * 512, b = a + n * 512;

	if (a < lo)
		a = lo;
	if (b > hi)
		b = hi;
	if (a >= b)
		return false;
	*off = a;
	*len = b - a;
	return true;
}

ssize_t mfs_recovery_read(struct mfs *fs, uint64_t ino, void *buf, size_t len, uint64_t off,
                          struct mfs_frange *zeroed, unsigned max, unsigned *nr, bool *truncated)
{
	struct blk_range *rr;
	struct mfs_ino *ip;
	uint64_t size, end, pos;
	ssize_t ret;

	*nr = 0;
	*truncated = false;
	rr = malloc(REC_RANGES * sizeof(*rr));
	if (!rr)
		return -ENOMEM;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret) {
		free(rr);
		return ret;
	}
	pthread_rwlock_rdlock(&ip->lock);
	size = isize(ip);
	if (off >= size || !len) {
		ret = 0;
		goto out;
	}
	end = len > size - off ? size : off + len;
	for (pos = off; pos < end;) {
		uint64_t lblk = pos / BS, pblk, count, to;
		struct blk_recovery rec = {.ranges = rr, .max = REC_RANGES};
		bool unwritten;
		int err = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);

		if (err) {
			ret = err;
			goto out;
		}
		to = (lblk + count) * BS < end ? (lblk + count) * BS : end;
		if (!pblk || unwritten) {
			memset((uint8_t *)buf + (pos - off), 0, to - pos);
			pos = to;
			continue;
		}
		/*
		 * One block per call: one bio, so the engine never fills @rec from two
		 * completions at once.
		 */
		for (uint64_t b = pos; b < to;) {
			uint64_t be = (b / BS + 1) * BS < to ? (b / BS + 1) * BS : to;

			rec.nr = 0;
			rec.truncated = false;
			ret = mfs_file_read_blocks(fs, ip, (uint8_t *)buf + (b - off), be - b, b,
			                           BLK_BIO_RECOVERY, &rec);
			if (ret < 0)
				goto out;
			if (rec.truncated)
				*truncated = true;
			qsort(rr, rec.nr, sizeof(*rr), cmp_blk_range);
			for (unsigned i = 0; i < rec.nr; i++) {
				uint64_t zo, zl;

				if (sect_to_file(lblk, pblk, rr[i].sector, rr[i].nr, b, be, &zo,
				                 &zl) &&
				    !range_add(zeroed, max, nr, zo, zl))
					*truncated = true;
			}
			b = be;
		}
		pos = to;
	}
	ret = (ssize_t)(end - off);
out:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	free(rr);
	return ret;
}

/*
 * mfs_badranges for data_csum: every block of the run is read and its sectors
 * checked, BIO_MAX_BLOCKS blocks per bio into @buf (as many blocks) with one
 * table lookup per table block (mfs_csum_run_damage); damaged (poisoned or
 * failing their checksum) sectors are added.  Returns 0, 1 (out full: *next
 * set) or -errno.
 */
static int csum_badranges(struct mfs *fs, uint64_t lblk, uint64_t pblk, uint64_t n, uint64_t start,
                          uint64_t size, struct mfs_frange *out, unsigned max, unsigned *nr,
                          uint64_t *next, uint8_t *buf)
{
	uint8_t masks[BIO_MAX_BLOCKS];

	for (uint64_t i = 0; i < n;) {
		uint64_t run = n - i < BIO_MAX_BLOCKS ? n - i : BIO_MAX_BLOCKS;
		int ret = mfs_csum_run_damage(fs, pblk + i, run, buf, masks);

		if (ret)
			return ret;
		for (uint64_t k = 0; k < run; k++, i++) {
			for (unsigned s = 0; s < SPB && masks[k]; s++) {
				uint64_t zo, zl;

				if (!(masks[k] & (1 << s)) ||
				    !sect_to_file(lblk, pblk, (pblk + i) * SPB + s, 1, start, size,
				                  &zo, &zl))
					continue;
				if (!range_add(out, max, nr, zo, zl)) {
					*next = zo;
					return 1;
				}
			}
		}
	}
	return 0;
}

int mfs_badranges(struct mfs *fs, uint64_t ino, uint64_t start, struct mfs_frange *out,
                  unsigned max, unsigned *nr, uint64_t *next, bool *last)
{
	struct blk_range rr[REC_RANGES];
	struct mfs_ino *ip;
	uint64_t size, lblk, nblk;
	uint8_t *cbuf = NULL; /* data_csum: the blocks read for a check */
	int ret;

	*nr = 0;
	*last = false;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	size = isize(ip);
	*next = size > start ? size : start;
	nblk = (size + BS - 1) / BS;
	for (lblk = start / BS; lblk < nblk;) {
		uint64_t pblk, count, n, s, e;
		bool unwritten;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			goto out;
		n = count < nblk - lblk ? count : nblk - lblk;
		if (!pblk || unwritten) {
			lblk += n;
			continue;
		}
		if (fs->data_csum) {
			if (!cbuf && posix_memalign((void **)&cbuf, BS, BIO_MAX_BLOCKS * BS)) {
				cbuf = NULL;
				ret = -ENOMEM;
				goto out;
			}
			ret = csum_badranges(fs, lblk, pblk, n, start, size, out, max, nr, next,
			                     cbuf);
			if (ret) {
				ret = ret > 0 ? 0 : ret;
				goto out;
			}
			lblk += n;
			continue;
		}
		for (s = pblk * SPB, e = (pblk + n) * SPB; s < e;) {
			unsigned got = blk_poison_lookup(fs->dev, s, e - s, rr, REC_RANGES, NULL);

			for (unsigned i = 0; i < got; i++) {
				uint64_t zo, zl;

				if (!sect_to_file(lblk, pblk, rr[i].sector, rr[i].nr, start, size,
				                  &zo, &zl))
					continue;
				if (!range_add(out, max, nr, zo, zl)) {
					*next = zo;
					goto out;
				}
			}
			if (got < REC_RANGES)
				break;
			s = rr[got - 1].sector + rr[got - 1].nr;
		}
		lblk += n;
	}
	*last = true;
out:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	free(cbuf);
	return ret;
}

int mfs_bmap_extents(struct mfs *fs, uint64_t ino, uint64_t start, struct mfs_fextent *out,
                     unsigned max, unsigned *nr, uint64_t *next, bool *last)
{
	struct mfs_ino *ip;
	uint64_t size, lblk, nblk;
	int ret;

	*nr = 0;
	*last = false;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	size = isize(ip);
	*next = size > start ? size : start;
	nblk = (size + BS - 1) / BS;
	for (lblk = start / BS; lblk < nblk;) {
		uint64_t pblk, count, n, a, b;
		bool unwritten;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			goto out;
		n = count < nblk - lblk ? count : nblk - lblk;
		if (pblk) {
			a = lblk * BS > start ? lblk * BS : start;
			b = (lblk + n) * BS < size ? (lblk + n) * BS : size;
			if (*nr >= max) {
				*next = a;
				goto out;
			}
			out[*nr].offset = a;
			out[*nr].length = b - a;
			out[*nr].sector = pblk * SPB + (a - lblk * BS) / 512;
			out[*nr].unwritten = unwritten;
			(*nr)++;
		}
		lblk += n;
	}
	*last = true;
out:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

static int zero_sectors(struct mfs *fs, uint64_t sector, uint64_t nr)
{
	while (nr) {
		uint64_t n = nr < ZERO_MAX_SECTORS ? nr : ZERO_MAX_SECTORS;
		struct blk_bio bio;
		int ret;

		blk_bio_init(&bio, BLK_OP_WRITE_ZEROES, sector, NULL, (uint32_t)(n * 512), NULL,
		             NULL);
		ret = blk_submit_bio_wait(fs->dev, &bio);
		if (ret)
			return ret;
		sector += n;
		nr -= n;
	}
	return 0;
}

/*
 * Zero @n bytes at @off inside the unit of @g bytes at device byte @unit:
 * read-modify-write; -EIO if the unit is poisoned (its other bytes are lost).
 */
static int zero_in_unit(struct mfs *fs, uint64_t unit, unsigned g, uint64_t off, uint64_t n)
{
	void *buf = NULL;
	int ret;

	if (posix_memalign(&buf, g > BS ? g : BS, g))
		return -ENOMEM;
	ret = blk_read(fs->dev, unit / 512, buf, g, 0);
	if (!ret) {
		memset((uint8_t *)buf + off, 0, n);
		ret = blk_write(fs->dev, unit / 512, buf, g, 0);
	}
	free(buf);
	return ret;
}

/*
 * Zero device bytes [pos, pos + len) (both multiples of 512): whole units of
 * @g bytes with WRITE_ZEROES, which clears their poison; a unit covered in
 * part by read-modify-write, so -EIO if it is poisoned.
 */
static int zero_dev_range(struct mfs *fs, uint64_t pos, uint64_t len, unsigned g)
{
	uint64_t m = g - 1, whole;
	int ret;

	if (pos & m) {
		uint64_t u = pos & ~m, n = u + g - pos < len ? u + g - pos : len;

		ret = zero_in_unit(fs, u, g, pos - u, n);
		if (ret)
			return ret;
		pos += n;
		len -= n;
	}
	whole = len & ~m;
	if (whole) {
		ret = zero_sectors(fs, pos / 512, whole / 512);
		if (ret)
			return ret;
		pos += whole;
		len -= whole;
	}
	return len ? zero_in_unit(fs, pos, g, 0, len) : 0;
}

/* mtime and ctime to now, like a write (caller holds ip->lock for writing). */
static int touch(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_txn *txn;
	int64_t t;
	int ret, err;

	t = mfs_now_ns();
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	ip->di.mtime_ns = t;
	ip->di.ctime_ns = t;
	ret = mfs_inode_write(fs, txn, ip);
	err = mfs_txn_end(txn);
	return ret ? ret : err;
}

int mfs_zeroinit(struct mfs *fs, uint64_t ino, uint64_t off, uint64_t len)
{
	struct mfs_ino *ip;
	uint64_t size, end, pos;
	unsigned g;
	int ret;

	if (off % 512 || len % 512 || !len || off + len < off)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	g = poison_unit(fs);
	if (g > BS) {
		mfs_iput(fs, ip);
		return -EINVAL; /* a unit of poison larger than a block: not supported */
	}
	pthread_rwlock_wrlock(&ip->lock);
	/* the tail unit: zeros past EOF anyway (a unit never spans two blocks) */
	size = (isize(ip) + g - 1) / g * g;
	end = off + len < isize(ip) ? off + len : size;
	for (pos = off; pos < end;) {
		uint64_t lblk = pos / BS, pblk, count, to;
		bool unwritten;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		to = (lblk + count) * BS < end ? (lblk + count) * BS : end;
		if (pblk && !unwritten) {
			uint64_t at = pblk * BS + (pos - lblk * BS);

			ret = zero_dev_range(fs, at, to - pos, g);
			if (!ret && fs->data_csum)
				ret = mfs_csum_zeroed(fs, at / 512, (to - pos + 511) / 512);
			if (ret)
				break;
		}
		pos = to;
	}
	if (!ret)
		ret = touch(fs, ip);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

/*
 * Zero-init the unit of poison (@g bytes) of file byte @pos when it sits on a
 * written block and is poisoned (caller holds ip->lock for writing).
 */
static int zero_poisoned_unit(struct mfs *fs, struct mfs_ino *ip, uint64_t pos, unsigned g)
{
	uint64_t lblk = pos / BS, pblk, count, sector;
	struct blk_range r;
	bool unwritten;
	int ret;

	ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
	if (ret || !pblk || unwritten)
		return ret;
	sector = pblk * SPB + (pos - lblk * BS) / g * (g / 512);
	if (fs->data_csum) {
		/* damaged: poisoned or failing its checksum (csum.c) */
		int mask = mfs_csum_block_damage(fs, sector / SPB);
		unsigned s = (unsigned)(sector % SPB), m = ((1u << (g / 512)) - 1) << s;

		if (mask < 0)
			return mask;
		if (!(mask & (int)m))
			return 0;
		ret = zero_sectors(fs, sector, g / 512);
		return ret ? ret : mfs_csum_zeroed(fs, sector, g / 512);
	}
	if (!blk_poison_lookup(fs->dev, sector, g / 512, &r, 1, NULL))
		return 0;
	return zero_sectors(fs, sector, g / 512);
}

ssize_t mfs_recovery_write(struct mfs *fs, uint64_t ino, const void *buf, size_t len, uint64_t off)
{
	uint64_t end = off + len;
	struct mfs_ino *ip;
	unsigned g;
	int ret = 0;

	if (!len || off > (uint64_t)INT64_MAX - len)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	g = poison_unit(fs);
	if (g > BS) {
		mfs_iput(fs, ip);
		return -EINVAL; /* a unit of poison larger than a block: not supported */
	}
	pthread_rwlock_wrlock(&ip->lock);
	if (off % g)
		ret = zero_poisoned_unit(fs, ip, off, g);
	if (!ret && end % g && !(off % g && (end - 1) / g == off / g))
		ret = zero_poisoned_unit(fs, ip, end - 1, g);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	if (ret)
		return ret;
	/*
	 * Not under the same lock hold (mfs_write takes it): a writer of the
	 * edge sectors' other bytes in between keeps its bytes, as it would
	 * after any write; poison injected in between fails the write (EIO).
	 */
	return mfs_write(fs, ino, buf, len, (off_t)off);
}
