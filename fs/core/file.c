/* SPDX-License-Identifier: MIT */
/*
 * File operations other than read and write: truncate (and its completion
 * from the orphan list), fallocate, SEEK_DATA/SEEK_HOLE and fsync.  Calls
 * the inode cache and table, the block map, the orphan tree, the allocator,
 * the journal, space.c and the block engine (fio.h).
 *
 * A shrinking truncate first sets the new size and puts the inode on the
 * orphan list (the restart point that mount and fsck complete,
 * docs/FORMAT.md §10), then frees past EOF in bounded steps
 * (mfs_fmap_free), then leaves the list.  fallocate stops a handle's
 * map-changing segments at a step's limit by their worst case;
 * ZERO_RANGE zeroes in place with BLK_OP_WRITE_ZEROES.
 *
 * Unwritten extents read as zeros and count as holes for SEEK_DATA and
 * SEEK_HOLE (ext4 without page-cache checks reports them as data; mendfs has
 * no page cache, and "unwritten = hole" lets cp --sparse skip them).
 *
 * Locking: ip->lock shared for lseek, exclusive for truncate and fallocate.
 * mfs_truncate and mfs_truncate_finish expect the caller to hold it, and no
 * handle (they open their own).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include "atime.h"
#include "csum.h"
#include "fio.h"

/* --- truncate ------------------------------------------------------------------------------ */

/* Worst case of an orphan tree insert or delete, the roots record and the inode. */
static unsigned orphan_cost(struct mfs *fs)
{
	return 2 * ((unsigned)le32toh(fs->sb.orphan_depth) + 3) + 2;
}

int mfs_truncate_finish(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_txn *txn;
	int ret, err;

	ret = mfs_fmap_free(fs, ip, (di_size(ip) + BS - 1) / BS, MAX_FILE_BLOCKS);
	if (ret || le32toh(ip->di.nlink) == 0)
		return ret; /* an unlinked inode stays an orphan until it is freed */
	ret = mfs_txn_begin_step(fs, orphan_cost(fs), &txn);
	if (ret)
		return ret;
	ret = mfs_orphan_del(fs, txn, ip->ino);
	if (ret == -ENOENT)
		ret = 0;
	if (!ret)
		ip->di.iflags = htole32(le32toh(ip->di.iflags) & ~MFS_IFL_ORPHAN);
	err = mfs_inode_write(fs, txn, ip);
	ret = ret ? ret : err;
	err = mfs_txn_end(txn);
	return ret ? ret : err;
}

int mfs_truncate(struct mfs *fs, struct mfs_ino *ip, uint64_t size)
{
	uint64_t old = di_size(ip);
	struct mfs_txn *txn;
	int ret, err, steps = 0;

	if (size > MAX_FILE_SIZE)
		return -EFBIG;
	if (size > old) {
		ret = mfs_file_zero_past_eof(fs, ip, old, size);
		if (ret)
			return ret;
	}
	if (size < old) {
		/* the tail of the new last block is zeroed when the file grows again */
		steps = mfs_fmap_maps_from(fs, ip, (size + BS - 1) / BS);
		if (steps < 0)
			return steps;
	}
	/*
	 * First the new size, and with blocks to free the orphan entry: the
	 * restart point that the next mount (or fsck) completes after a crash.
	 */
	ret = mfs_txn_begin_step(fs, orphan_cost(fs), &txn);
	if (ret)
		return ret;
	if (steps && !(le32toh(ip->di.iflags) & MFS_IFL_ORPHAN)) {
		ret = mfs_orphan_add(fs, txn, ip->ino);
		if (!ret)
			ip->di.iflags = htole32(le32toh(ip->di.iflags) | MFS_IFL_ORPHAN);
	}
	if (!ret && size != old) {
		di_set_size(ip, size);
		di_touch(ip, true);
	}
	err = mfs_inode_write(fs, txn, ip);
	ret = ret ? ret : err;
	err = mfs_txn_end(txn);
	ret = ret ? ret : err;
	if (ret || !steps)
		return ret;
	return mfs_truncate_finish(fs, ip);
}

/* --- fallocate ------------------------------------------------------------------------- */

/*
 * Unwritten extents over the holes of [first, last), one handle per chunk of
 * at most CHUNK_BLOCKS blocks and of allocations whose worst case fits a
 * step's limit (at least one).
 */
static int falloc_unwritten(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last)
{
	uint64_t lblk = first, seen = first;
	unsigned retries = 0, short_of = 0;
	int ret = 0;

	while (lblk < last && !ret) {
		uint64_t stop = last - lblk > CHUNK_BLOCKS ? lblk + CHUNK_BLOCKS : last;
		struct mfs_txn *txn;
		unsigned nseg = 0;
		int err;

		short_of = 0;
		ret = mfs_txn_begin(fs, &txn);
		if (ret)
			return ret;
		while (lblk < stop && !ret) {
			uint64_t pblk, count, n, start, got;
			bool unwritten;

			ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
			if (ret)
				break;
			n = count < stop - lblk ? count : stop - lblk;
			if (!pblk) {
				/* worst cases within a step's limit, as in write_chunk */
				if (nseg && (nseg + 1) * seg_cost(ip) + 1 > mfs_txn_step_limit(fs))
					break;
				nseg++;
				ret = mfs_alloc_data(fs, txn, mfs_fmap_goal(fs, ip, lblk), n,
				                     &start, &got);
				if (ret) {
					short_of = MFS_SPACE_DATA;
					break;
				}
				n = got;
				ret = mfs_fmap_add(fs, txn, ip, lblk, n, start, MFS_EXT_UNWRITTEN);
				if (ret) {
					short_of = MFS_SPACE_META;
					mfs_fmap_free_data(fs, txn, start, n);
					break;
				}
				di_add_blocks(ip, (int64_t)n);
			}
			lblk += n;
		}
		err = mfs_inode_write(fs, txn, ip);
		if (!ret)
			ret = err;
		err = mfs_txn_end(txn);
		if (!ret)
			ret = err;
		if (lblk > seen) {
			seen = lblk;
			retries = 0;
		}
		/* short of space: commit what is pending, wait for frees under way, retry */
		if (ret == -ENOSPC && mfs_space_retry(fs, short_of, &retries))
			ret = 0;
	}
	return ret;
}

/* Zero whole written blocks of [first, last) in place (WRITE_ZEROES clears poison). */
static int zero_blocks(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last)
{
	struct fio io;
	uint64_t lblk = first;
	int ret = 0, err;

	fio_init(&io, fs);
	while (lblk < last) {
		uint64_t pblk, count, n;
		bool unwritten;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		n = count < last - lblk ? count : last - lblk;
		if (pblk && !unwritten)
			fio_submit(&io, BLK_OP_WRITE_ZEROES, pblk, NULL, n, 0, NULL);
		if (pblk && !unwritten && fs->data_csum) {
			ret = mfs_csum_zeroed(fs, pblk * MFS_SECTORS_PER_BLOCK,
			                      n * MFS_SECTORS_PER_BLOCK);
			if (ret)
				break;
		}
		lblk += n;
	}
	err = fio_done(&io);
	return ret ? ret : err;
}

/* Zero the partial edge blocks of byte range [off, end). */
static int zero_edges(struct mfs *fs, struct mfs_ino *ip, uint64_t off, uint64_t end)
{
	uint64_t fb = off / BS, lb = (end - 1) / BS;
	int ret;

	if (fb == lb) {
		if (off % BS == 0 && end % BS == 0)
			return 0;
		return mfs_file_zero_partial(fs, ip, fb, (unsigned)(off % BS),
		                             (unsigned)(end - fb * BS));
	}
	ret = mfs_file_zero_partial(fs, ip, fb, (unsigned)(off % BS), off % BS ? BS : 0);
	if (!ret && end % BS)
		ret = mfs_file_zero_partial(fs, ip, lb, 0, (unsigned)(end % BS));
	return ret;
}

/*
 * Set the size (unless KEEP_SIZE) and ctime/mtime after a fallocate: a size
 * change always sets mtime too (as ftruncate does, and as ext4 and tmpfs do).
 */
static int falloc_finish(struct mfs *fs, struct mfs_ino *ip, uint64_t end, bool keep, bool mtime)
{
	struct mfs_txn *txn;
	int ret, err;

	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	if (!keep && end > di_size(ip)) {
		ret = mfs_file_zero_past_eof(fs, ip, di_size(ip), end);
		if (ret) {
			mfs_txn_end(txn);
			return ret;
		}
		di_set_size(ip, end);
		mtime = true;
	}
	di_touch(ip, mtime);
	ret = mfs_inode_write(fs, txn, ip);
	err = mfs_txn_end(txn);
	return ret ? ret : err;
}

int mfs_fallocate(struct mfs *fs, uint64_t ino, int mode, off_t off, off_t len)
{
	struct mfs_ino *ip;
	int ret = mfs_iget(fs, ino, &ip);

	if (ret)
		return ret;
	ret = mfs_fallocate_ip(fs, ip, mode, off, len);
	mfs_iput(fs, ip);
	return ret;
}

int mfs_fallocate_ip(struct mfs *fs, struct mfs_ino *ip, int mode, off_t off, off_t len)
{
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t start, end, zend, first, last;
	int ret, m = mode & ~FALLOC_FL_KEEP_SIZE;

	if (m != 0 && m != FALLOC_FL_PUNCH_HOLE && m != FALLOC_FL_ZERO_RANGE)
		return -EOPNOTSUPP;
	if (m == FALLOC_FL_PUNCH_HOLE && !keep)
		return -EOPNOTSUPP; /* as Linux: PUNCH_HOLE needs KEEP_SIZE */
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	if ((uint64_t)off > MAX_FILE_SIZE || (uint64_t)len > MAX_FILE_SIZE - (uint64_t)off)
		return -EFBIG;
	start = (uint64_t)off;
	end = start + (uint64_t)len;
	first = (start + BS - 1) / BS; /* whole blocks inside the range */
	last = end / BS;
	pthread_rwlock_wrlock(&ip->lock);
	if (!S_ISREG(le32toh(ip->di.mode))) {
		ret = S_ISDIR(le32toh(ip->di.mode)) ? -EISDIR : -ENODEV;
		pthread_rwlock_unlock(&ip->lock);
		return ret;
	}
	/* [recovery] a range ending at or past EOF zeroes its last sector whole (only bytes
	 * past EOF are added), so a poisoned EOF sector is cleared, not a partial-sector EIO */
	zend = end % 512 && end >= di_size(ip) ? (end + 511) / 512 * 512 : end;
	/*
	 * Rounded up to a block boundary, the last block is whole: zero_edges
	 * leaves it to the whole-block step, so that step must include it (it
	 * lost the bytes of the range in that block otherwise: fsx, seed
	 * 1974690369).
	 */
	last = zend / BS;
	switch (m) {
	case 0:
		ret = falloc_unwritten(fs, ip, start / BS, (end + BS - 1) / BS);
		if (!ret)
			ret = falloc_finish(fs, ip, end, keep, false);
		break;
	case FALLOC_FL_PUNCH_HOLE:
		ret = zero_edges(fs, ip, start, zend);
		if (!ret && first < last)
			ret = mfs_fmap_free(fs, ip, first, last);
		if (!ret)
			ret = falloc_finish(fs, ip, end, true, true);
		break;
	default: /* FALLOC_FL_ZERO_RANGE */
		ret = zero_edges(fs, ip, start, zend);
		if (!ret && first < last)
			ret = zero_blocks(fs, ip, first, last);
		if (!ret)
			ret = falloc_unwritten(fs, ip, start / BS, (end + BS - 1) / BS);
		if (!ret)
			ret = falloc_finish(fs, ip, end, keep, true);
		break;
	}
	pthread_rwlock_unlock(&ip->lock);
	return ret;
}

/* --- lseek, fsync ---------------------------------------------------------------------- */

off_t mfs_lseek(struct mfs *fs, uint64_t ino, off_t off, int whence)
{
	struct mfs_ino *ip;
	off_t ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	ret = mfs_lseek_ip(fs, ip, off, whence);
	mfs_iput(fs, ip);
	return ret;
}

off_t mfs_lseek_ip(struct mfs *fs, struct mfs_ino *ip, off_t off, int whence)
{
	uint64_t size, lblk;
	off_t ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	pthread_rwlock_rdlock(&ip->lock);
	size = di_size(ip);
	ret = mfs_file_type(ip);
	if (ret)
		goto out;
	if (off < 0 || (uint64_t)off >= size) {
		ret = -ENXIO;
		goto out;
	}
	for (lblk = (uint64_t)off / BS;;) {
		uint64_t pblk, count, at = lblk * BS > (uint64_t)off ? lblk * BS : (uint64_t)off;
		bool unwritten, data;
		int err;

		if (at >= size) {
			ret = whence == SEEK_DATA ? -ENXIO : (off_t)size;
			break;
		}
		err = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (err) {
			ret = err;
			break;
		}
		data = pblk && !unwritten;
		if (data == (whence == SEEK_DATA)) {
			ret = (off_t)at;
			break;
		}
		lblk += count;
	}
out:
	pthread_rwlock_unlock(&ip->lock);
	return ret;
}

int mfs_fsync(struct mfs *fs, uint64_t ino, bool datasync)
{
	struct mfs_ino *ip;
	int ret = mfs_iget(fs, ino, &ip);

	if (ret)
		return ret;
	ret = mfs_fsync_ip(fs, ip, datasync);
	mfs_iput(fs, ip);
	return ret;
}

int mfs_fsync_ip(struct mfs *fs, struct mfs_ino *ip, bool datasync)
{
	int ret;

	/*
	 * Data is written to the device by mfs_write itself; what remains is
	 * the metadata in the running transaction and the device's cache.
	 * fdatasync could skip the commit when only timestamps changed, but
	 * the transaction is shared by every inode, so one commit serves both.
	 * A lazy atime joins it on fsync, not on fdatasync (as on ext4).
	 */
	if (!datasync)
		mfs_atime_write(fs, ip); /* a failure drops the atime, not the fsync */
	if (fs->read_only)
		return mfs_fs_errno(fs);
	ret = mfs_txn_commit(fs);
	if (!ret) {
		ret = blk_flush(fs->dev);
		/* writes since the last flush may be lost, whose is unknown: fail from now on */
		if (ret)
			mfs_fs_error(fs, ret, "flush");
	}
	return ret;
}
