/* SPDX-License-Identifier: MIT */
/*
 * The write path: mfs_write and mfs_write_flags, cut into chunks of one
 * transaction each.  Calls the inode cache and table, the block map, the
 * allocator, the journal, space.c (retry on ENOSPC) and the block engine
 * (fio.h).
 *
 * Ordered mode: a write allocates blocks inside a transaction handle, writes
 * the data, waits for it, and only then maps the blocks and ends the handle;
 * the journal's commit flushes before its commit record, so a committed
 * mapping never points at unwritten data.  Writes are cut into chunks of at
 * most CHUNK_BLOCKS (and of map changes whose worst case fits a step's
 * limit), one handle each, to bound the transaction.
 *
 * Recovery contract (docs/RECOVERY.md, sector granularity): a partial-block
 * write is a read-modify-write of the block; when that read meets poison the
 * write goes by sectors: sectors it covers whole are overwritten in place
 * (the engine clears their poison), and if it covers a poisoned sector only
 * in part it fails with -EIO before writing anything (lost bytes are never
 * silently replaced by zeros).  Whole blocks are overwritten in place.
 *
 * Locking: ip->lock shared for the overwrite fast path (overwrite_fast:
 * whole allocated blocks inside EOF, no handle; with data_csum exclusive and
 * a handle for the checksums), exclusive for every other write (it updates
 * size and timestamps and may change the map, and partial-block
 * read-modify-write must not interleave).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "atime.h"
#include "csum.h"
#include "fio.h"

/* --- write ----------------------------------------------------------------------------- */

enum seg_kind { SEG_MAPPED, SEG_UNWRITTEN, SEG_NEW };

struct wseg {
	uint64_t lblk, pblk, len;
	enum seg_kind kind;
};

/* Free the blocks of the SEG_NEW segments from @from on (not mapped). */
static void free_new_segs(struct mfs *fs, struct mfs_txn *txn, struct wseg *seg, unsigned from,
                          unsigned nseg)
{
	for (unsigned i = from; i < nseg; i++)
		if (seg[i].kind == SEG_NEW)
			mfs_fmap_free_data(fs, txn, seg[i].pblk, seg[i].len);
}

static struct wseg *seg_of(struct wseg *seg, unsigned nseg, uint64_t lblk)
{
	for (unsigned i = 0; i < nseg; i++)
		if (lblk >= seg[i].lblk && lblk < seg[i].lblk + seg[i].len)
			return &seg[i];
	return NULL;
}

/*
 * Write bytes [from, to) of device block @pblk from @data when reading the
 * block met poison: only the units of poison (poison_unit()) the range
 * touches are written, through the bounce block @buf.  A unit the range
 * covers in part is read first; if it is poisoned the write fails with -EIO
 * before anything is written (lost bytes are never replaced by zeros).
 * Whole units are overwritten in place, which clears their poison.
 */
static int write_sectors(struct mfs *fs, uint64_t pblk, uint8_t *buf, unsigned from, unsigned to,
                         const uint8_t *data)
{
	uint64_t sec = pblk * MFS_SECTORS_PER_BLOCK;
	unsigned g = poison_unit(fs), u0, u1;
	int ret;

	if (g > BS)
		return -EIO; /* the block is part of one unit, which is poisoned */
	u0 = from / g;
	u1 = (to + g - 1) / g;
	if (from % g) {
		ret = blk_read(fs->dev, sec + u0 * (g / BLK_SECTOR_SIZE), buf + u0 * g, g, 0);
		if (ret)
			return ret;
	}
	if (to % g && !(u1 - 1 == u0 && from % g)) {
		ret = blk_read(fs->dev, sec + (u1 - 1) * (g / BLK_SECTOR_SIZE), buf + (u1 - 1) * g,
		               g, 0);
		if (ret)
			return ret;
	}
	memcpy(buf + from, data, to - from);
	return blk_write(fs->dev, sec + u0 * (g / BLK_SECTOR_SIZE), buf + u0 * g, (u1 - u0) * g, 0);
}

/*
 * data_csum: store the checksums of the units of poison write_sectors() wrote
 * for bytes [from, to) of block @pblk, from the bounce block @buf.
 */
static int csum_units(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, const uint8_t *buf,
                      unsigned from, unsigned to)
{
	unsigned g = poison_unit(fs), s0 = from / g * g / BLK_SECTOR_SIZE;
	unsigned s1 = (to + g - 1) / g * g / BLK_SECTOR_SIZE;

	return mfs_csum_set_sectors(fs, txn, pblk, s0, s1 - s0, buf + s0 * BLK_SECTOR_SIZE);
}

/* Why write_chunk() stopped a write: an error, or MFS_SPACE_DATA / MFS_SPACE_META (ENOSPC). */
#define WSTOP_ERROR 0x100u

/*
 * One transaction of a write: bytes [pos, end) of the file, at most
 * CHUNK_BLOCKS blocks.  Returns the bytes written (maybe fewer on ENOSPC) or
 * -errno; *stop (0: go on) says why not to go on: WSTOP_ERROR, or the space
 * it ran out of (mfs_space_retry's @what).
 */
static ssize_t write_chunk(struct mfs *fs, struct mfs_ino *ip, const uint8_t *src, uint64_t pos,
                           uint64_t end, unsigned *stop)
{
	uint64_t b0 = pos / BS, b1 = (end + BS - 1) / BS, lblk, goal = 0;
	struct wseg seg[CHUNK_SEGS];
	struct mfs_fmap_hole hole = {.found = false}; /* at b0: seg[0]'s neighbours */
	struct bounce edge[2];
	uint64_t edge_lblk[2];
	bool edge_done[2] = {false, false};
	/* data_csum: the sectors of an edge block whose checksums change (the others checked) */
	unsigned edge_s0[2], edge_s1[2];
	unsigned nseg = 0, i, e, nedge = 0, room, used = 1 /* the inode */;
	struct mfs_txn *txn;
	struct fio io;
	ssize_t ret;
	int err, cerr = 0;

	if (b1 - b0 > CHUNK_BLOCKS) {
		b1 = b0 + CHUNK_BLOCKS;
		end = b1 * BS;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	room = mfs_txn_step_limit(fs);

	/*
	 * plan: existing mappings, and fresh blocks for the holes; segments
	 * that change the map stop when their worst case would pass a step's
	 * limit (the first always goes): the handle stays bounded, and the
	 * transaction commits past half the journal as usual
	 */
	for (lblk = b0; lblk < b1 && nseg < CHUNK_SEGS;) {
		uint64_t pblk, count, n, got, start;
		bool unwritten;

		ret = mfs_fmap_lookup(fs, ip, lblk, &pblk, &count, &unwritten,
		                      lblk == b0 ? &hole : NULL);
		if (ret)
			goto fail_free;
		n = count < b1 - lblk ? count : b1 - lblk;
		if (!(pblk && !unwritten)) {
			if (nseg && used + seg_cost(ip) > room)
				break;
			used += seg_cost(ip);
		}
		if (pblk) {
			seg[nseg++] = (struct wseg){lblk, pblk, n,
			                            unwritten ? SEG_UNWRITTEN : SEG_MAPPED};
		} else {
			if (!goal)
				goal = mfs_fmap_hole_goal(fs, ip, lblk, lblk == b0 ? &hole : NULL);
			ret = mfs_alloc_data(fs, txn, goal, n, &start, &got);
			if (ret == -ENOSPC) {
				*stop = MFS_SPACE_DATA;
				break;
			}
			if (ret)
				goto fail_free;
			n = got;
			seg[nseg++] = (struct wseg){lblk, start, n, SEG_NEW};
		}
		goal = seg[nseg - 1].pblk + n;
		lblk += n;
	}
	if (lblk < b1) {
		b1 = lblk;
		if (end > b1 * BS)
			end = b1 * BS;
	}
	{
		bool alloc = false;

		for (i = 0; i < nseg; i++)
			alloc |= seg[i].kind != SEG_MAPPED;
		/* written only when it changes: writers of one file share its line */
		if (atomic_load_explicit(&ip->allocating, memory_order_relaxed) != alloc)
			atomic_store_explicit(&ip->allocating, alloc, memory_order_relaxed);
	}
	if (nseg == 0 || end <= pos) {
		ret = -ENOSPC; /* the first allocation failed */
		*stop = MFS_SPACE_DATA;
		goto out;
	}

	/* partial edge blocks: read-modify-write, or zeros around the data for fresh ones */
	for (e = 0; e < 2; e++) {
		uint64_t b = e == 0 ? b0 : b1 - 1, bstart = b * BS;
		uint64_t from = bstart > pos ? bstart : pos,
		         to = bstart + BS < end ? bstart + BS : end;
		struct wseg *s;

		if (e == 1 && b1 - 1 == b0)
			break;
		if (from == bstart && to == bstart + BS)
			continue;
		s = seg_of(seg, nseg, b);
		edge_lblk[nedge] = b;
		edge_done[nedge] = false;
		edge_s0[nedge] = 0;
		edge_s1[nedge] = MFS_SECTORS_PER_BLOCK;
		if (s->kind == SEG_MAPPED) {
			uint64_t pb = s->pblk + (b - s->lblk);

			ret = blk_read(fs->dev, pb * MFS_SECTORS_PER_BLOCK, edge[nedge].b, BS, 0);
			if (ret == -EIO) {
				/* poison in the block: go by units of poison (docs/RECOVERY.md) */
				ret = write_sectors(fs, pb, edge[nedge].b,
				                    (unsigned)(from - bstart),
				                    (unsigned)(to - bstart), src + (from - pos));
				edge_done[nedge] = true;
				if (!ret && fs->data_csum) /* data_csum: the units written */
					ret = csum_units(fs, txn, pb, edge[nedge].b,
					                 (unsigned)(from - bstart),
					                 (unsigned)(to - bstart));
			} else if (!ret && fs->data_csum) {
				/* data_csum: a damaged sector in the block goes like poison */
				ret = mfs_csum_edge_write(
				        fs, txn, pb, edge[nedge].b, (unsigned)(from - bstart),
				        (unsigned)(to - bstart), src + (from - pos));
				edge_done[nedge] = ret == 1;
				if (!ret) { /* the sectors outside the range match the table */
					edge_s0[nedge] =
					        (unsigned)(from - bstart) / BLK_SECTOR_SIZE;
					edge_s1[nedge] =
					        (unsigned)(to - bstart + BLK_SECTOR_SIZE - 1) /
					        BLK_SECTOR_SIZE;
				}
				ret = ret == 1 ? 0 : ret;
			}
			if (ret) {
				nedge++;
				goto fail_free;
			}
		} else {
			memset(edge[nedge].b, 0, BS);
		}
		memcpy(edge[nedge].b + (from - bstart), src + (from - pos), to - from);
		nedge++;
	}

	/* the data, under one plug */
	fio_init(&io, fs);
	for (i = 0; i < nseg; i++) {
		uint64_t j = 0;

		while (j < seg[i].len) {
			uint64_t b = seg[i].lblk + j, run;

			for (e = 0; e < nedge && edge_lblk[e] != b; e++)
				;
			if (e < nedge) {
				if (!edge_done[e])
					fio_submit(&io, BLK_OP_WRITE, seg[i].pblk + j, edge[e].b, 1,
					           0, NULL);
				if (!edge_done[e] && fs->data_csum && !cerr)
					cerr = mfs_csum_set_sectors(
					        fs, txn, seg[i].pblk + j, edge_s0[e],
					        edge_s1[e] - edge_s0[e],
					        edge[e].b + edge_s0[e] * BLK_SECTOR_SIZE);
				j++;
				continue;
			}
			for (run = 1; j + run < seg[i].len; run++) {
				for (e = 0; e < nedge && edge_lblk[e] != b + run; e++)
					;
				if (e < nedge)
					break;
			}
			fio_submit(&io, BLK_OP_WRITE, seg[i].pblk + j,
			           (void *)(src + (b * BS - pos)), run, 0, NULL);
			if (fs->data_csum && !cerr)
				cerr = mfs_csum_set(fs, txn, seg[i].pblk + j, src + (b * BS - pos),
				                    run);
			j += run;
		}
	}
	err = fio_done(&io);
	if (!err)
		err = cerr; /* data_csum: the checksums did not make it into the transaction */
	if (err) {
		ret = err;
		goto fail_free;
	}

	/* map what was written (data is on the device: ordered mode) */
	for (i = 0; i < nseg; i++) {
		if (seg[i].kind == SEG_NEW) {
			/* the map is as the plan found it until the first change */
			err = mfs_fmap_add_hole(fs, txn, ip, seg[i].lblk, seg[i].len, seg[i].pblk,
			                        0, i == 0 ? &hole : NULL);
			if (!err)
				di_add_blocks(ip, (int64_t)seg[i].len);
		} else if (seg[i].kind == SEG_UNWRITTEN) {
			err = mfs_fmap_punch(fs, txn, ip, seg[i].lblk, seg[i].lblk + seg[i].len);
			if (!err)
				err = mfs_fmap_add(fs, txn, ip, seg[i].lblk, seg[i].len,
				                   seg[i].pblk, 0);
		} else {
			err = 0;
		}
		if (err) {
			free_new_segs(fs, txn, seg, seg[i].kind == SEG_NEW ? i : i + 1, nseg);
			*stop = err == -ENOSPC ? MFS_SPACE_META : WSTOP_ERROR;
			if (seg[i].lblk * BS <= pos) {
				ret = err;
				goto fail_inode;
			}
			end = seg[i].lblk * BS;
			break;
		}
	}
	if (end > di_size(ip))
		di_set_size(ip, end);
	di_touch(ip, true);
	ret = (ssize_t)(end - pos);
	err = mfs_inode_write(fs, txn, ip);
	if (err)
		ret = err;
	goto out;

fail_free:
	free_new_segs(fs, txn, seg, 0, nseg);
fail_inode:
	*stop = ret == -ENOSPC ? MFS_SPACE_META : WSTOP_ERROR;
	mfs_inode_write(fs, txn, ip);
out:
	err = mfs_txn_end(txn);
	if (err && ret >= 0)
		ret = err;
	return ret;
}

/*
 * The overwrite fast path: a write of whole blocks, inside EOF, all already
 * allocated and written, on a device without poison, needs no change of the
 * map or size: the data goes in place (as the slow path writes mapped
 * blocks) and only mtime and ctime change.  It takes ip->lock shared, so
 * truncate, fallocate and punch (exclusive) cannot free or remap a block of
 * the range meanwhile, and overwriters of whole blocks need no mutual
 * exclusion.  mtime and ctime move in memory, at most once per tick of the
 * coarse clock (ip->lock taken exclusive for that moment), and the inode
 * goes on the lazy list of atime.c: written by the next transaction that
 * writes the inode, the periodic commit, fsync (not fdatasync), the last
 * mfs_iput and unmount.  A crash may lose such a time, never data or the map.
 *
 * With data_csum the checksums change with the data: the fast path then
 * takes ip->lock exclusive (two writers of a block must not interleave their
 * data writes and checksum stores, and the scrub counts on every data_csum
 * writer holding it exclusive) and opens a handle, which gets the checksums
 * of the whole range once every block of it is known to be mapped, before
 * the data is waited for and the handle ended, as in write_chunk: the same
 * transaction contract as the slow path (docs/FORMAT.md §15), without its
 * plan, edge handling and inode write.  Returns the bytes written, -errno,
 * or 0: take the slow path (nothing was written).
 */
static bool fast_ok(struct mfs_ino *ip, uint64_t end)
{
	return !mfs_file_type(ip) && !ip->unlinked && end <= di_size(ip);
}

/* The extents of an overwrite, for its checksums (data_csum). */
struct fast_ext {
	uint64_t pblk, n;
	const uint8_t *src;
};

static ssize_t overwrite_fast(struct mfs *fs, struct mfs_ino *ip, const uint8_t *src, uint64_t pos,
                              size_t len)
{
	uint64_t b0 = pos / BS, b1 = (pos + len) / BS, lblk;
	struct fast_ext ext[FIO_BATCH];
	struct mfs_txn *txn = NULL;
	unsigned next = 0;
	struct timespec ts;
	int64_t now;
	struct fio io;
	int err = 0;

	/* poison anywhere: the slow path, which clears it by its rules */
	if (pos % BS || len % BS || b1 - b0 > CHUNK_BLOCKS || blk_poison_count(fs->dev) ||
	    mfs_fs_errno(fs))
		return 0;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	now = mfs_ts_ns(&ts);
	if (fs->data_csum) {
		pthread_rwlock_wrlock(&ip->lock);
		if (!fast_ok(ip, pos + len))
			goto slow;
		if (mfs_txn_begin(fs, &txn)) {
			txn = NULL;
			goto slow; /* which reports the error */
		}
		if ((int64_t)le64toh((uint64_t)ip->di.mtime_ns) < now ||
		    (int64_t)le64toh((uint64_t)ip->di.ctime_ns) < now) {
			di_touch(ip, true);
			mfs_times_lazy(fs, ip);
		}
		goto write;
	}
	pthread_rwlock_rdlock(&ip->lock);
	if (!fast_ok(ip, pos + len))
		goto slow;
	if ((int64_t)le64toh((uint64_t)ip->di.mtime_ns) < now ||
	    (int64_t)le64toh((uint64_t)ip->di.ctime_ns) < now) {
		/* the times move: once per tick, exclusive for that moment */
		pthread_rwlock_unlock(&ip->lock);
		pthread_rwlock_wrlock(&ip->lock);
		if (fast_ok(ip, pos + len)) {
			di_touch(ip, true);
			mfs_times_lazy(fs, ip);
		}
		pthread_rwlock_unlock(&ip->lock);
		pthread_rwlock_rdlock(&ip->lock);
		if (!fast_ok(ip, pos + len))
			goto slow;
	}
write:
	fio_init(&io, fs);
	for (lblk = b0; lblk < b1;) {
		uint64_t pblk, count, n;
		bool unwritten;

		err = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		n = err ? 0 : count < b1 - lblk ? count : b1 - lblk;
		if (err || !pblk || unwritten ||
		    io.nr + (n + BIO_MAX_BLOCKS - 1) / BIO_MAX_BLOCKS > FIO_BATCH) {
			io.nr = 0; /* nothing was submitted: drop the batch */
			fio_done(&io);
			goto slow;
		}
		fio_submit(&io, BLK_OP_WRITE, pblk, (void *)(src + (lblk - b0) * BS), n, 0, NULL);
		if (txn) /* data_csum */
			ext[next++] = (struct fast_ext){pblk, n, src + (lblk - b0) * BS};
		lblk += n;
	}
	/* data_csum: every block is mapped, the write goes on; one extent per bio at least */
	for (unsigned i = 0; txn && i < next && !err; i++)
		err = mfs_csum_set(fs, txn, ext[i].pblk, ext[i].src, ext[i].n);
	{
		int ioerr = fio_done(&io);

		if (ioerr)
			err = ioerr;
	}
	if (txn) {
		int terr = mfs_txn_end(txn);

		if (!err)
			err = terr;
	}
	pthread_rwlock_unlock(&ip->lock);
	return err ? err : (ssize_t)len;
slow:
	if (txn)
		mfs_txn_end(txn);
	pthread_rwlock_unlock(&ip->lock);
	return 0;
}

ssize_t mfs_write(struct mfs *fs, uint64_t ino, const void *buf, size_t len, off_t off)
{
	return mfs_write_flags(fs, ino, buf, len, off, 0);
}

ssize_t mfs_write_flags(struct mfs *fs, uint64_t ino, const void *buf, size_t len, off_t off,
                        unsigned flags)
{
	struct mfs_ino *ip;
	ssize_t ret;

	if (off < 0)
		return -EINVAL;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	ret = mfs_write_ip(fs, ip, buf, len, off, flags);
	mfs_iput(fs, ip);
	return ret;
}

ssize_t mfs_write_ip(struct mfs *fs, struct mfs_ino *ip, const void *buf, size_t len, off_t off,
                     unsigned flags)
{
	const uint8_t *src = buf;
	uint64_t pos, end;
	ssize_t done = 0, ret;
	unsigned stop = 0, retries = 0;

	if (off < 0)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	if (!len)
		return 0;
	if ((uint64_t)off >= MAX_FILE_SIZE)
		return -EFBIG;
	if (len > MAX_FILE_SIZE - (uint64_t)off)
		len = (size_t)(MAX_FILE_SIZE - (uint64_t)off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	/* not after an allocating write: a write into a sparse file likely allocates too */
	if (!flags && !atomic_load_explicit(&ip->allocating, memory_order_relaxed)) {
		ret = overwrite_fast(fs, ip, src, (uint64_t)off, len);
		if (ret)
			return ret;
	}
	pthread_rwlock_wrlock(&ip->lock);
	ret = mfs_file_type(ip);
	if (ret) {
		pthread_rwlock_unlock(&ip->lock);
		return ret;
	}
	/* before the data, as the VFS does; the first chunk's transaction writes the inode */
	if (flags & MFS_WRITE_KILL_SUIDGID)
		ip->di.mode = htole32(mfs_mode_kill_suidgid(le32toh(ip->di.mode)));
	if (flags & MFS_WRITE_KILL_SGID)
		ip->di.mode &= htole32(~(uint32_t)S_ISGID);
	pos = (uint64_t)off;
	end = pos + len;
	if (pos > di_size(ip)) {
		ret = mfs_file_zero_past_eof(fs, ip, di_size(ip), pos);
		if (ret)
			stop = WSTOP_ERROR;
	}
	while (pos < end && !stop) {
		ret = write_chunk(fs, ip, src + (pos - (uint64_t)off), pos, end, &stop);
		if (ret > 0) {
			pos += (uint64_t)ret;
			done += ret;
			retries = 0;
		}
		/* short of space: commit what is pending, wait for frees under way, retry */
		if (stop && stop != WSTOP_ERROR && pos < end &&
		    mfs_space_retry(fs, stop, &retries)) {
			stop = 0;
			continue;
		}
		if (ret < 0)
			break;
	}
	pthread_rwlock_unlock(&ip->lock);
	return done ? done : ret;
}
