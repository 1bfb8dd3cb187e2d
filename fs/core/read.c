/* SPDX-License-Identifier: MIT */
/*
 * The read path: mfs_read (bios into the caller's buffer), mfs_read_direct
 * (iovecs into the device mapping; with data_csum only once the checksums
 * have matched there, csum.c) and mfs_file_read_blocks, which the recovery
 * read shares.  Calls the inode cache, the block map (mfs_bmap), csum.c and
 * the block engine (fio.h).
 *
 * Holes and unwritten extents read as zeros.  Locking: ip->lock shared, for
 * the whole read: no block of the range is freed or reused meanwhile.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "csum.h"
#include "fio.h"
#include "mfs_recovery.h"

/* --- read ------------------------------------------------------------------------------ */

/*
 * Read file bytes [off, off + len) into @buf: holes and unwritten extents as
 * zeros, data with bios flagged @bio_flags (BLK_BIO_RECOVERY reports
 * zero-filled sectors in @rec).  The caller holds ip->lock and has clipped
 * the range to the file size.  Returns @len or -errno (-EIO: media error).
 */
ssize_t mfs_file_read_blocks(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len,
                             uint64_t off, unsigned bio_flags, struct blk_recovery *rec)
{
	uint64_t end = off + len, first = off / BS, last = (end + BS - 1) / BS, lblk;
	struct bounce edge[2];
	uint8_t *out = buf;
	uint64_t edge_lblk[2] = {0, 0};
	bool edge_read[2] = {false, false};
	struct fio io;
	int ret = 0, err;
	unsigned e;

	if (!len)
		return 0;
	if (fs->data_csum) /* checked reads (csum.c) */
		return mfs_csum_read_blocks(fs, ip, buf, len, off, bio_flags, rec);
	fio_init(&io, fs);
	for (lblk = first; lblk < last && !ret;) {
		uint64_t pblk, count, n, i;
		bool unwritten;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		n = count < last - lblk ? count : last - lblk;
		for (i = 0; i < n;) {
			uint64_t b = lblk + i, bstart = b * BS;
			uint64_t from = bstart > off ? bstart : off;
			bool partial = bstart < off || bstart + BS > end;
			uint64_t run;

			if (!pblk || unwritten) {
				uint64_t to = (lblk + n) * BS < end ? (lblk + n) * BS : end;

				memset(out + (from - off), 0, to - from);
				break;
			}
			if (partial) {
				e = b == first ? 0 : 1;
				edge_lblk[e] = b;
				edge_read[e] = true;
				fio_submit(&io, BLK_OP_READ, pblk + i, edge[e].b, 1, bio_flags,
				           rec);
				i++;
				continue;
			}
			/* whole blocks straight into the caller's buffer, up to a partial one */
			run = n - i;
			if ((b + run) * BS > end)
				run = (end - bstart) / BS;
			fio_submit(&io, BLK_OP_READ, pblk + i, out + (bstart - off), run, bio_flags,
			           rec);
			i += run;
		}
		lblk += n;
	}
	err = fio_done(&io);
	if (!ret)
		ret = err;
	for (e = 0; e < 2; e++) {
		if (!ret && edge_read[e]) {
			uint64_t bstart = edge_lblk[e] * BS;
			uint64_t from = bstart > off ? bstart : off;
			uint64_t to = bstart + BS < end ? bstart + BS : end;

			memcpy(out + (from - off), edge[e].b + (from - bstart), to - from);
		}
	}
	return ret ? ret : (ssize_t)len;
}

ssize_t mfs_read_ip(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len, off_t off)
{
	ssize_t ret;
	uint64_t size;

	if (off < 0)
		return -EINVAL;
	pthread_rwlock_rdlock(&ip->lock);
	size = di_size(ip);
	ret = mfs_file_type(ip);
	if (!ret && (uint64_t)off < size) {
		if (len > size - (uint64_t)off)
			len = (size_t)(size - (uint64_t)off);
		ret = mfs_file_read_blocks(fs, ip, buf, len, (uint64_t)off, 0, NULL);
	}
	pthread_rwlock_unlock(&ip->lock);
	return ret;
}

ssize_t mfs_read(struct mfs *fs, uint64_t ino, void *buf, size_t len, off_t off)
{
	struct mfs_ino *ip;
	ssize_t ret;

	if (off < 0)
		return -EINVAL;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	ret = mfs_read_ip(fs, ip, buf, len, off);
	mfs_iput(fs, ip);
	return ret;
}

/*
 * Zero-copy read (see mfs_ops.h).  The iovecs point into the device mapping,
 * holes and unwritten extents at a static zero area; adjacent pieces that are
 * contiguous in memory share one iovec.
 */
#define DIRECT_ZERO_LEN (64u * 1024)
static const uint8_t direct_zeros[DIRECT_ZERO_LEN]; /* .bss: never written */

static int direct_add(struct iovec *iov, int *cnt, const void *base, size_t len)
{
	while (len) {
		size_t n = len;

		if (base == direct_zeros && n > DIRECT_ZERO_LEN)
			n = DIRECT_ZERO_LEN;
		if (*cnt && base != direct_zeros &&
		    (const uint8_t *)iov[*cnt - 1].iov_base + iov[*cnt - 1].iov_len == base) {
			iov[*cnt - 1].iov_len += n;
		} else {
			if (*cnt == MFS_DIRECT_IOV_MAX)
				return -EOPNOTSUPP; /* too fragmented: the caller copies */
			iov[*cnt].iov_base = (void *)base;
			iov[*cnt].iov_len = n;
			(*cnt)++;
		}
		len -= n;
		if (base != direct_zeros)
			base = (const uint8_t *)base + n;
	}
	return 0;
}

/*
 * data_csum: the address of file bytes [pos, pos + n), in blocks from @pblk
 * on, once every sector of those whole blocks has matched its checksum where
 * it lies in the mapping.  Anything short of that (poison, a mismatch, a
 * fault, a table that cannot be read) is -EOPNOTSUPP: the copying read
 * (mfs_csum_read_blocks) then reads, reports and fails exactly as it should.
 * The caller holds ip->lock shared, and every data_csum writer holds it
 * exclusive: what was checked is what the reply copies.
 */
static int direct_checked(struct mfs *fs, uint64_t pblk, uint64_t pos, uint64_t n, void **addr)
{
	uint64_t skip = pos % BS, nblk = (skip + n + BS - 1) / BS;
	void *base;

	if (blk_direct_access(fs->dev, pblk * BS, nblk * BS, &base, NULL) ||
	    mfs_csum_check_mapped(fs, pblk, base, nblk))
		return -EOPNOTSUPP;
	*addr = (uint8_t *)base + skip;
	return 0;
}

int mfs_read_direct_ip(struct mfs *fs, struct mfs_ino *ip, size_t len, off_t off,
                       mfs_direct_emit_fn *emit, void *arg)
{
	struct iovec iov[MFS_DIRECT_IOV_MAX];
	uint64_t size, pos, end;
	int cnt = 0, ret;

	if (off < 0)
		return -EINVAL;
	if (!fs->direct_reads)
		return -EOPNOTSUPP;
	pthread_rwlock_rdlock(&ip->lock);
	ret = mfs_file_type(ip);
	size = di_size(ip);
	pos = (uint64_t)off;
	end = pos < size ? (len < size - pos ? pos + len : size) : pos;
	while (pos < end && !ret) {
		uint64_t lblk = pos / BS, pblk, count, n;
		bool unwritten;
		void *addr;

		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		/* bytes of this mapping run from pos */
		n = (lblk + count) * BS - pos;
		if (n > end - pos)
			n = end - pos;
		if (!pblk || unwritten) {
			ret = direct_add(iov, &cnt, direct_zeros, (size_t)n);
		} else if (fs->data_csum) {
			ret = direct_checked(fs, pblk, pos, n, &addr);
			if (!ret)
				ret = direct_add(iov, &cnt, addr, (size_t)n);
		} else {
			ret = blk_direct_access(fs->dev, pblk * BS + pos % BS, (size_t)n, &addr,
			                        NULL);
			if (!ret)
				ret = direct_add(iov, &cnt, addr, (size_t)n);
		}
		pos += n;
	}
	/* the data is consumed (copied into the reply) before the lock is dropped */
	if (!ret)
		ret = emit(arg, iov, cnt);
	pthread_rwlock_unlock(&ip->lock);
	return ret;
}

void mfs_read_direct_drain(struct mfs_ino *ip)
{
	pthread_rwlock_wrlock(&ip->lock);
	pthread_rwlock_unlock(&ip->lock);
}

int mfs_read_direct(struct mfs *fs, uint64_t ino, size_t len, off_t off, mfs_direct_emit_fn *emit,
                    void *arg)
{
	struct mfs_ino *ip;
	int ret;

	if (off < 0)
		return -EINVAL;
	if (!fs->direct_reads)
		return -EOPNOTSUPP;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	ret = mfs_read_direct_ip(fs, ip, len, off, emit, arg);
	mfs_iput(fs, ip);
	return ret;
}
