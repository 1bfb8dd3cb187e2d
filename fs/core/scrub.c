/* SPDX-License-Identifier: MIT */
/*
 * Online scrub (mfs_scrub.h): one bounded step at a time, over the meta zone
 * and then the data zone, in block order.
 *
 * Which blocks: in the meta zone the fixed part (bitmaps, inode table) and
 * every block its bitmap marks in use; in the data zone every block the data
 * bitmap marks in use.  The bitmaps are read through the buffer cache (their
 * latest state, committed or not) and copied under the bitmap block's
 * content lock, so a block allocated or freed during the step is checked or
 * not, never mistaken: a new metadata block is dirty (skipped), a freed one
 * still holds its last valid content, and a data block read needlessly
 * costs only the read.
 *
 * Data is read with blk_read(), the call every file read ends in: the engine
 * moves latent poison it meets into the poison table (and its emulation
 * file) and fails the read, exactly as for a user's read.  The poison table
 * is counted over each chunk before and after, which gives the sectors the
 * chunk found.
 *
 * On data_csum each block read is also checked against the checksum table;
 * a block that differs is confirmed under its file's lock before it counts
 * (csum_confirm): only a sector a file maps as written has a checksum.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "mfs_scrub.h"

#define CHUNK_BYTES  (1u << 20) /* one data read */
#define CHUNK_BLOCKS (CHUNK_BYTES / MFS_BLOCK_SIZE)
#define SCAN_BITMAPS 8u                 /* bitmap blocks a data step may look through */
#define CAND_MAX     (2 * CHUNK_BLOCKS) /* data_csum mismatches a step confirms at most */

static uint64_t sb64(uint64_t v)
{
	return le64toh(v);
}

/* Copy bitmap block @blk's bits (MFS_BITMAP_BITS of them) into @bits.  0 or -errno. */
static int bitmap_copy(struct mfs *fs, uint64_t blk, uint8_t *bits)
{
	struct mfs_buf *b;
	int ret = mfs_meta_read(fs, blk, MFS_T_BITMAP, &b);

	if (ret)
		return ret;
	mfs_lock(&b->lock);
	memcpy(bits, b->data + sizeof(struct mfs_meta_hdr), MFS_BITMAP_BITS / 8);
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	return 0;
}

static inline bool bit_set(const uint8_t *bits, uint64_t i)
{
	return bits[i / 8] & (1u << (i % 8));
}

static int scrub_meta(struct mfs *fs, struct mfs_scrub_cursor *cur, uint64_t budget,
                      struct mfs_scrub_counts *c)
{
	uint64_t meta_start = sb64(fs->sb.meta_start), meta_len = sb64(fs->sb.meta_len);
	uint64_t fixed =
	        sb64(fs->sb.inode_table_start) + sb64(fs->sb.inode_table_blocks) - meta_start;
	uint64_t pos = cur->pos, loaded = UINT64_MAX, scanned = 0;
	uint8_t *bits = NULL, *tmp = NULL;
	int ret = -ENOMEM;

	bits = malloc(MFS_BITMAP_BITS / 8);
	if (!bits || posix_memalign((void **)&tmp, MFS_BLOCK_SIZE, 2 * MFS_BLOCK_SIZE))
		goto out;
	ret = 0;
	/* free blocks cost a bit test: a step may look at 64 times its budget */
	while (pos < meta_len && budget && scanned < budget * 64) {
		uint64_t k = pos / MFS_BITMAP_BITS;
		int st;

		scanned++;
		if (pos >= fixed) {
			if (k != loaded) {
				if (bitmap_copy(fs, sb64(fs->sb.meta_bitmap_start) + k, bits)) {
					/* no bitmap, no knowing which blocks are in use: next one
					 */
					pos = (k + 1) * MFS_BITMAP_BITS;
					continue;
				}
				loaded = k;
			}
			if (!bit_set(bits, pos % MFS_BITMAP_BITS)) {
				pos++;
				continue;
			}
		}
		st = mfs_meta_scrub_block(fs, meta_start + pos, tmp);
		if (st < 0) {
			ret = st;
			break;
		}
		budget--;
		pos++;
		switch (st) {
		case MFS_SCRUB_SKIPPED:
			c->meta_skipped++;
			continue;
		case MFS_SCRUB_HEALED:
			c->meta_healed++;
			break;
		case MFS_SCRUB_BAD:
			c->meta_bad++;
			break;
		case MFS_SCRUB_LOST:
			c->meta_lost++;
			break;
		}
		c->meta_checked++;
	}
	if (pos >= meta_len) {
		cur->phase = MFS_SCRUB_PHASE_DATA;
		cur->pos = 0;
	} else {
		cur->pos = pos;
	}
out:
	free(bits);
	free(tmp);
	return ret;
}

/* Poisoned sectors the table holds in [sector, sector + nr). */
static uint64_t poison_sectors(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	uint64_t end = sector + nr, sum = 0;
	struct blk_range r[32];
	unsigned n;

	while (sector < end && (n = blk_poison_lookup(dev, sector, end - sector, r, 32, NULL))) {
		for (unsigned i = 0; i < n; i++)
			sum += r[i].nr;
		if (n < 32)
			break;
		sector = r[n - 1].sector + r[n - 1].nr;
	}
	return sum;
}

/*
 * data_csum: the blocks of one step whose sectors did not match the table
 * when read.  A mismatch alone is no damage: the entry of a free block, of an
 * unwritten extent's block and of one being overwritten right now is garbage
 * or in flux (docs/FORMAT.md §15), so each is confirmed by csum_confirm().
 */
struct csum_cand {
	struct mfs_event ev[CAND_MAX]; /* kind data_csum, the whole block */
	unsigned n;
};

/* Block @pblk is a candidate (a sector did not match). */
static void csum_cand_add(struct csum_cand *cc, uint64_t pblk)
{
	if (cc->n >= CAND_MAX)
		return;
	memset(&cc->ev[cc->n], 0, sizeof(cc->ev[0]));
	cc->ev[cc->n].kind = MFS_EV_DATA_CSUM;
	cc->ev[cc->n].sector = pblk * MFS_SECTORS_PER_BLOCK;
	cc->ev[cc->n].count = MFS_SECTORS_PER_BLOCK;
	cc->n++;
}

/* Block @pblk (contents @data) against the table: a candidate if a sector differs. */
static void csum_scan(struct mfs *fs, uint64_t pblk, const uint8_t *data, struct csum_cand *cc)
{
	/* an unreadable table block (< 0): metadata, the meta pass reports it */
	if (mfs_csum_bad_mask(fs, pblk, data) > 0)
		csum_cand_add(cc, pblk);
}

/*
 * Confirm the candidates: the ones a regular file maps as written data
 * (mfs_events_owners, one pass over the inode table for all) are read and
 * checked again under that file's lock, which every data_csum writer holds
 * exclusive (its data and checksums change together under it), after making
 * sure the block is still the file's.  A sector that fails then is damage:
 * mfs_csum_block_verify posts its event, the count goes to c->csum_found,
 * and BADRANGES (the report) names it, as a read would.
 */
static void csum_confirm(struct mfs *fs, struct csum_cand *cc, struct mfs_scrub_counts *c)
{
	mfs_events_owners(fs, cc->ev, cc->n);
	for (unsigned i = 0; i < cc->n; i++) {
		uint64_t pblk = cc->ev[i].sector / MFS_SECTORS_PER_BLOCK, pb, count;
		struct mfs_ino *ip;
		bool unwritten;
		int mask;

		if (!cc->ev[i].ino || mfs_file_get(fs, cc->ev[i].ino, &ip))
			continue; /* no file's data: its entry means nothing */
		pthread_rwlock_rdlock(&ip->lock);
		mask = mfs_bmap(fs, ip, cc->ev[i].offset / MFS_BLOCK_SIZE, &pb, &count, &unwritten);
		if (!mask && pb == pblk && !unwritten)
			mask = mfs_csum_block_verify(fs, pblk);
		else
			mask = 0; /* moved, freed or unwritten meanwhile */
		pthread_rwlock_unlock(&ip->lock);
		mfs_iput(fs, ip);
		if (mask > 0)
			c->csum_found += (uint64_t)__builtin_popcount((unsigned)mask);
	}
	cc->n = 0;
}

/*
 * Read data blocks [blk, blk + n) through the engine, chunk by chunk, and on
 * data_csum check them against the table.  Returns the blocks done: fewer
 * than @n when @cc filled up (the step ends there, its candidates confirmed).
 */
static uint64_t read_data(struct mfs *fs, uint64_t blk, uint64_t n, uint8_t *buf,
                          struct csum_cand *cc, struct mfs_scrub_counts *c)
{
	uint8_t masks[CHUNK_BLOCKS];
	uint64_t done = 0;

	while (done < n && (!cc || cc->n + CHUNK_BLOCKS <= CAND_MAX)) {
		uint64_t nb = n - done < CHUNK_BLOCKS ? n - done : CHUNK_BLOCKS;
		uint64_t sec = blk * MFS_SECTORS_PER_BLOCK, nsec = nb * MFS_SECTORS_PER_BLOCK;
		uint64_t before = poison_sectors(fs->dev, sec, nsec), after;
		int ret;

		/* a failure is poison (now in the table) or a media error: both counted below */
		ret = blk_read(fs->dev, sec, buf, (uint32_t)(nb * MFS_BLOCK_SIZE), 0);
		after = poison_sectors(fs->dev, sec, nsec);
		if (after > before)
			c->poison_found += after - before;
		if (cc && !ret && !mfs_csum_bad_masks(fs, blk, buf, nb, masks)) {
			/* the chunk read: checked with a table lookup per table block */
			for (uint64_t i = 0; i < nb; i++)
				if (masks[i])
					csum_cand_add(cc, blk + i);
		} else {
			for (uint64_t i = 0; cc && i < nb; i++) {
				/* after a failed read, the blocks that read alone are checked */
				if (!ret || !blk_read(fs->dev, sec + i * MFS_SECTORS_PER_BLOCK,
				                      buf + i * MFS_BLOCK_SIZE, MFS_BLOCK_SIZE, 0))
					csum_scan(fs, blk + i, buf + i * MFS_BLOCK_SIZE, cc);
			}
		}
		c->data_bytes += nb * MFS_BLOCK_SIZE;
		blk += nb;
		done += nb;
	}
	return done;
}

static int scrub_data(struct mfs *fs, struct mfs_scrub_cursor *cur, uint64_t budget,
                      struct mfs_scrub_counts *c)
{
	uint64_t data_start = sb64(fs->sb.data_start), data_len = sb64(fs->sb.data_len);
	uint64_t pos = cur->pos, blocks = (budget + MFS_BLOCK_SIZE - 1) / MFS_BLOCK_SIZE;
	uint8_t *bits = malloc(MFS_BITMAP_BITS / 8), *buf = NULL;
	struct csum_cand *cc = NULL;
	unsigned looked = 0;

	if (!bits || posix_memalign((void **)&buf, MFS_BLOCK_SIZE, CHUNK_BYTES) ||
	    (fs->data_csum && !(cc = calloc(1, sizeof(*cc))))) {
		free(bits);
		free(buf);
		return -ENOMEM;
	}
	while (pos < data_len && blocks && looked < SCAN_BITMAPS) {
		uint64_t k = pos / MFS_BITMAP_BITS, end = (k + 1) * MFS_BITMAP_BITS;

		looked++;
		if (end > data_len)
			end = data_len;
		if (bitmap_copy(fs, sb64(fs->sb.data_bitmap_start) + k, bits)) {
			pos = end; /* its blocks cannot be told apart: skipped */
			continue;
		}
		while (pos < end && blocks) {
			uint64_t run = pos, did;

			if (!bit_set(bits, pos % MFS_BITMAP_BITS)) {
				pos++;
				continue;
			}
			while (run < end && run - pos < blocks &&
			       bit_set(bits, run % MFS_BITMAP_BITS))
				run++;
			did = read_data(fs, data_start + pos, run - pos, buf, cc, c);
			blocks = did < run - pos ? 0 : blocks - did; /* candidates full: end */
			pos += did;
		}
		if (!blocks)
			break;
	}
	if (cc && cc->n)
		csum_confirm(fs, cc, c);
	if (pos >= data_len) {
		cur->phase = MFS_SCRUB_PHASE_DONE;
		cur->pos = 0;
	} else {
		cur->pos = pos;
	}
	free(cc);
	free(bits);
	free(buf);
	return 0;
}

int mfs_scrub_step(struct mfs *fs, struct mfs_scrub_cursor *cur, uint64_t meta_blocks,
                   uint64_t data_bytes, struct mfs_scrub_counts *c)
{
	switch (cur->phase) {
	case MFS_SCRUB_PHASE_META:
		if (cur->pos > sb64(fs->sb.meta_len))
			return -EINVAL;
		if (cur->pos == 0) {
			/* a scrub's start: poison the device learned since it was opened */
			uint64_t added;
			int ret = blk_dev_refresh_badblocks(fs->dev, &added);

			if (ret) /* the scrub goes on without: its reads find what they meet */
				c->refresh_err = ret;
			else
				c->poison_found += added;
			/* then the superblock copies and the live journal (scrub_fixed.c) */
			ret = mfs_scrub_fixed(fs, c);
			if (ret)
				return ret;
		}
		return scrub_meta(fs, cur, meta_blocks ? meta_blocks : MFS_SCRUB_META_DEFAULT, c);
	case MFS_SCRUB_PHASE_DATA:
		if (cur->pos > sb64(fs->sb.data_len))
			return -EINVAL;
		return scrub_data(fs, cur, data_bytes ? data_bytes : MFS_SCRUB_DATA_DEFAULT, c);
	case MFS_SCRUB_PHASE_DONE:
		return 0;
	default:
		return -EINVAL;
	}
}

int mfs_scrub_owner_claim(struct mfs_scrub_owner *o, pid_t pid, time_t now, bool (*alive)(pid_t),
                          struct mfs_scrub_owner *prev)
{
	if (o->pid && o->pid != pid && now - o->at <= MFS_SCRUB_OWNER_IDLE_S &&
	    (o->pid < 0 || alive(o->pid)))
		return -EBUSY;
	*prev = *o;
	o->pid = pid;
	o->at = now;
	return 0;
}

void mfs_scrub_owner_undo(struct mfs_scrub_owner *o, pid_t pid, const struct mfs_scrub_owner *prev)
{
	if (o->pid == pid)
		*o = *prev;
}

void mfs_scrub_owner_stepped(struct mfs_scrub_owner *o, pid_t pid, bool done, time_t now)
{
	if (done && o->pid == pid)
		o->pid = 0;
	o->at = now;
}
