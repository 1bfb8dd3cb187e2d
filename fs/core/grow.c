/* SPDX-License-Identifier: MIT */
/*
 * Offline growth (mfs_grow.h, docs/FORMAT.md §2.3).  The layout has the data
 * zone between the meta zone and the twins, and the backup superblock last:
 * growing moves the journal and meta twins (and the backup superblock) to
 * the new end, so the data zone extends over the old twins and the new
 * space.  The data bitmap must cover the longer zone, and its bits change,
 * so a new one is written in free meta zone blocks; the meta bitmap must
 * then say those blocks are used, so a new meta bitmap is written beside
 * it.  Every block written before the commit is one the old filesystem does
 * not reference (free in its meta bitmap, or past its end), so the old
 * filesystem stays intact until the superblock names the new layout; the
 * commit writes the backup copy at the new end first (a reader of the grown
 * device sees it there, newer than the old primary), flushes, then the
 * primary.  The inode table, the inode bitmap, the journal and the meta
 * zone keep their place and size.  A filesystem that was not unmounted
 * cleanly has its journal replayed first and keeps its state (DIRTY, and
 * ERROR if set), so the next mount or fsck, at the new size, does the rest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mendfs/blk.h"
#include "mfs.h"
#include "mfs_grow.h"
#include "mfs_layout.h"

#define CHUNK 256u /* blocks per copy */
#define SPB   MFS_SECTORS_PER_BLOCK

struct grow {
	struct blk_dev *dev;
	const struct mfs_superblock *sb; /* the old one */
	bool dup;
	uint8_t *meta_bm; /* old meta bitmap blocks, then the new ones */
	uint8_t *data_bm; /* the new data bitmap blocks */
	char *err;
	size_t errlen;
};

static void *balloc(uint64_t blocks)
{
	void *p = aligned_alloc(MFS_BLOCK_SIZE, (size_t)(blocks ? blocks : 1) * MFS_BLOCK_SIZE);

	if (p)
		memset(p, 0, (size_t)(blocks ? blocks : 1) * MFS_BLOCK_SIZE);
	return p;
}

static bool poisoned(struct blk_dev *dev, uint64_t blk, uint64_t n)
{
	struct blk_range r;
	unsigned total;

	return n && blk_poison_lookup(dev, blk * SPB, n * SPB, &r, 1, &total) > 0;
}

/* Meta zone block @blk into @buf: the primary, else its twin, verified (@type 0: any). */
static int read_meta(struct grow *g, uint64_t blk, uint16_t type, void *buf)
{
	uint64_t seed = g->sb->csum_seed;

	if (!blk_read(g->dev, blk * SPB, buf, MFS_BLOCK_SIZE, 0) &&
	    !mfs_block_verify(buf, seed, type, blk))
		return 0;
	if (g->dup) {
		uint64_t twin = g->sb->meta_twin + (blk - g->sb->meta_start);

		if (!blk_read(g->dev, twin * SPB, buf, MFS_BLOCK_SIZE, 0) &&
		    !mfs_block_verify(buf, seed, type, blk))
			return 0;
	}
	blk_err(g->err, g->errlen,
	        "metadata block %llu is damaged or unreadable in every copy: run fsck.mendfs "
	        "on the device at its old size first",
	        (unsigned long long)blk);
	return -EUCLEAN;
}

static bool bit(const uint8_t *bm, uint64_t i)
{
	return mfs_bitmap_block_test(bm + i / MFS_BITMAP_BITS * MFS_BLOCK_SIZE,
	                             i % MFS_BITMAP_BITS);
}

static void bit_put(uint8_t *bm, uint64_t i, bool on)
{
	uint8_t *b = bm + i / MFS_BITMAP_BITS * MFS_BLOCK_SIZE + sizeof(struct mfs_meta_hdr);
	uint64_t j = i % MFS_BITMAP_BITS;

	if (on)
		b[j / 8] |= (uint8_t)(1u << (j % 8));
	else
		b[j / 8] &= (uint8_t) ~(1u << (j % 8));
}

/*
 * A run of @len meta zone blocks free in the old meta bitmap, not on poison
 * and not overlapping [@avoid, +@alen) (zone-relative).  Returns its first
 * block (zone-relative) or UINT64_MAX.
 */
static uint64_t find_run(struct grow *g, uint64_t len, uint64_t avoid, uint64_t alen)
{
	uint64_t n = g->sb->meta_len, run = 0;

	for (uint64_t i = 0; i < n; i++) {
		bool ok = !bit(g->meta_bm, i) && !(alen && i >= avoid && i < avoid + alen) &&
		          !poisoned(g->dev, g->sb->meta_start + i, 1);

		run = ok ? run + 1 : 0;
		if (run == len)
			return i + 1 - len;
	}
	return UINT64_MAX;
}

/* Write @n blocks at primary @blk and, with twins, at @twin. */
static int write_both(struct grow *g, uint64_t blk, uint64_t twin, const void *buf, uint64_t n)
{
	int ret = blk_write(g->dev, blk * SPB, buf, (uint32_t)(n * MFS_BLOCK_SIZE), 0);

	if (!ret && twin)
		ret = blk_write(g->dev, twin * SPB, buf, (uint32_t)(n * MFS_BLOCK_SIZE), 0);
	if (ret)
		blk_err(g->err, g->errlen, "writing block %llu: %s", (unsigned long long)blk,
		        strerror(-ret));
	return ret;
}

/* The journal, copied to its new twin (raw: the old twin where the primary is unreadable). */
static int copy_journal(struct grow *g, uint64_t new_twin, uint8_t *buf)
{
	const struct mfs_superblock *sb = g->sb;

	for (uint64_t k = 0; k < sb->journal_len;) {
		uint64_t n = sb->journal_len - k > CHUNK ? CHUNK : sb->journal_len - k;
		uint32_t bytes = (uint32_t)(n * MFS_BLOCK_SIZE);
		int ret = blk_read(g->dev, (sb->journal_start + k) * SPB, buf, bytes, 0);

		if (ret)
			ret = blk_read(g->dev, (sb->journal_twin + k) * SPB, buf, bytes, 0);
		if (ret) {
			blk_err(g->err, g->errlen, "reading journal blocks %llu-%llu: %s",
			        (unsigned long long)(sb->journal_start + k),
			        (unsigned long long)(sb->journal_start + k + n - 1),
			        strerror(-ret));
			return ret;
		}
		ret = blk_write(g->dev, (new_twin + k) * SPB, buf, bytes, 0);
		if (ret) {
			blk_err(g->err, g->errlen, "writing the journal twin: %s", strerror(-ret));
			return ret;
		}
		k += n;
	}
	return 0;
}

/*
 * Every block the new meta bitmap marks used, but the new bitmaps
 * themselves (written after), copied to the new meta twin: verified, from
 * the primary or the old twin.
 */
static int copy_meta(struct grow *g, uint64_t new_twin, uint64_t mb, uint64_t db,
                     const struct mfs_layout *nl, uint8_t *buf)
{
	const struct mfs_superblock *sb = g->sb;

	for (uint64_t i = 0; i < sb->meta_len;) {
		uint64_t n = 0;
		int ret;

		while (i + n < sb->meta_len && n < CHUNK && bit(g->meta_bm, i + n) &&
		       !(i + n >= mb && i + n < mb + nl->meta_bitmap_blocks) &&
		       !(i + n >= db && i + n < db + nl->data_bitmap_blocks))
			n++;
		if (!n) {
			i++;
			continue;
		}
		for (uint64_t j = 0; j < n; j++) {
			ret = read_meta(g, sb->meta_start + i + j, 0, buf + j * MFS_BLOCK_SIZE);
			if (ret)
				return ret;
		}
		ret = blk_write(g->dev, (new_twin + i) * SPB, buf, (uint32_t)(n * MFS_BLOCK_SIZE),
		                0);
		if (ret) {
			blk_err(g->err, g->errlen, "writing the metadata twin: %s", strerror(-ret));
			return ret;
		}
		i += n;
	}
	return 0;
}

/* The old superblock: the filesystem must be smaller than the device, and clean. */
static int read_old(struct grow *g, uint64_t dev_blocks, struct mfs_superblock *sb)
{
	bool ro = false, other_bad = false;
	char why[512];
	int ret;

	ret = mfs_super_read(g->dev, sb, &ro, &other_bad, why, sizeof(why));
	if (!ret) {
		blk_err(g->err, g->errlen,
		        "the filesystem already fills the device (%llu blocks): the device did "
		        "not grow, nothing to do",
		        (unsigned long long)sb->nr_blocks);
		return -EEXIST;
	}
	/* the size comes from the primary copy; its backup is then at that size's end */
	if (blk_read(g->dev, 0, sb, MFS_BLOCK_SIZE, 0) || sb->magic != MFS_SB_MAGIC ||
	    mfs_block_verify(sb, sb->csum_seed, MFS_T_SUPER, 0)) {
		blk_err(g->err, g->errlen, "%s", why);
		return -EINVAL;
	}
	if (sb->nr_blocks > dev_blocks) {
		blk_err(g->err, g->errlen,
		        "the device (%llu blocks) is smaller than the filesystem (%llu): "
		        "shrinking is not supported",
		        (unsigned long long)dev_blocks, (unsigned long long)sb->nr_blocks);
		return -EFBIG;
	}
	ret = mfs_super_read_size(g->dev, sb->nr_blocks, sb, &ro, &other_bad, g->err, g->errlen);
	if (ret)
		return ret;
	if (ro) {
		blk_err(g->err, g->errlen, "the filesystem has features this version cannot write");
		return -EROFS;
	}
	return 0;
}

/* The new data bitmap: the old bits, the new zone's blocks free. */
static int build_data_bitmap(struct grow *g, const struct mfs_layout *nl, uint64_t *nfree)
{
	const struct mfs_superblock *sb = g->sb;
	uint8_t *old = balloc(1);
	uint64_t loaded = UINT64_MAX;

	if (!old)
		return -ENOMEM;
	*nfree = 0;
	for (uint64_t k = 0; k < nl->data_bitmap_blocks; k++)
		mfs_bitmap_block_init(g->data_bm + k * MFS_BLOCK_SIZE, nl->data_bitmap_start + k, k,
		                      nl->data_len);
	for (uint64_t i = 0; i < nl->data_len; i++) {
		if (i < sb->data_len && i / MFS_BITMAP_BITS != loaded) {
			int ret;

			loaded = i / MFS_BITMAP_BITS;
			ret = read_meta(g, sb->data_bitmap_start + loaded, MFS_T_BITMAP, old);
			if (ret) {
				free(old);
				return ret;
			}
		}
		if (i < sb->data_len && mfs_bitmap_block_test(old, i % MFS_BITMAP_BITS))
			bit_put(g->data_bm, i, true);
		else
			(*nfree)++;
	}
	free(old);
	return 0;
}

int mfs_grow(struct blk_dev *dev, struct mfs_grow_info *info, char *err, size_t errlen)
{
	struct grow g = {.dev = dev, .err = err, .errlen = errlen};
	struct mfs_superblock *sb = balloc(1), *nsb = balloc(1);
	struct blk_dev_info di;
	struct mfs_layout nl;
	uint64_t dev_blocks, mb, db, nfree_data, nfree_meta = 0, twins;
	uint8_t *buf = balloc(CHUNK);
	int ret;

	memset(info, 0, sizeof(*info));
	if (!sb || !nsb || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	blk_dev_get_info(dev, &di);
	dev_blocks = di.size / MFS_BLOCK_SIZE;
	g.sb = sb;
	ret = read_old(&g, dev_blocks, sb);
	if (ret)
		goto out;
	g.dup = sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	if (sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM) {
		/* the table covers data_len blocks and sits in the fixed meta zone */
		blk_err(err, errlen,
		        "this filesystem has data checksums (data_csum): growing it is not "
		        "supported (its checksum table cannot grow)");
		ret = -EOPNOTSUPP;
		goto out;
	}

	/* the data zone grows up to the new tail: the journal and meta zone must precede it */
	if (sb->journal_start + sb->journal_len > sb->data_start ||
	    sb->meta_start + sb->meta_len > sb->data_start) {
		blk_err(err, errlen,
		        "the journal or metadata zone lies after the data zone (not mkfs.mendfs's "
		        "layout): this filesystem cannot be grown");
		ret = -EINVAL;
		goto out;
	}
	/* the new layout: the tail placed by mkfs's code, the rest kept */
	memset(&nl, 0, sizeof(nl));
	nl.dup = g.dup;
	nl.journal_start = sb->journal_start;
	nl.journal_len = sb->journal_len;
	nl.meta_start = sb->meta_start;
	nl.meta_len = sb->meta_len;
	nl.data_start = sb->data_start;
	nl.meta_bitmap_blocks = sb->meta_bitmap_blocks;
	twins = g.dup ? sb->journal_len + sb->meta_len : 0;
	ret = mfs_layout_place_tail(&nl, dev_blocks);
	if (!ret && g.dup && nl.journal_twin < sb->nr_blocks)
		ret = -ENOSPC;
	if (ret || sb->data_start + sb->data_len > nl.data_start + nl.data_len) {
		blk_err(err, errlen,
		        "the device grew by %llu blocks, too little: growing needs at least %llu "
		        "more blocks (%llu MiB), the journal and metadata twins and the backup "
		        "superblock moving past the old end",
		        (unsigned long long)(dev_blocks - sb->nr_blocks),
		        (unsigned long long)(twins + 1),
		        (unsigned long long)((twins + 1) * MFS_BLOCK_SIZE >> 20));
		ret = -ENOSPC;
		goto out;
	}
	if (poisoned(dev, g.dup ? nl.journal_twin : dev_blocks - 1,
	             dev_blocks - (g.dup ? nl.journal_twin : dev_blocks - 1))) {
		blk_err(err, errlen,
		        "poisoned sectors lie under the new twin areas or backup superblock "
		        "(blocks %llu-%llu): clear the poison first",
		        (unsigned long long)(g.dup ? nl.journal_twin : dev_blocks - 1),
		        (unsigned long long)(dev_blocks - 1));
		ret = -EIO;
		goto out;
	}

	if (!(sb->state & MFS_STATE_CLEAN)) {
		/*
		 * Crashed or killed while mounted: its journal is replayed now, as a
		 * mount would (crash-safe on its own); the state stays DIRTY, so the
		 * next mount still recounts the free counters and processes the
		 * orphans.  A mount cannot do it first: it refuses the grown device.
		 */
		ret = mfs_journal_replay(dev, sb, false, err, errlen);
		if (ret < 0)
			goto out;
		ret = 0;
	}
	/* the old meta bitmap; room for the new bitmaps in its free blocks */
	g.meta_bm = balloc(sb->meta_bitmap_blocks);
	g.data_bm = balloc(nl.data_bitmap_blocks);
	if (!g.meta_bm || !g.data_bm) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t k = 0; k < sb->meta_bitmap_blocks; k++) {
		ret = read_meta(&g, sb->meta_bitmap_start + k, MFS_T_BITMAP,
		                g.meta_bm + k * MFS_BLOCK_SIZE);
		if (ret)
			goto out;
	}
	mb = find_run(&g, nl.meta_bitmap_blocks, 0, 0);
	db = mb == UINT64_MAX ? mb : find_run(&g, nl.data_bitmap_blocks, mb, nl.meta_bitmap_blocks);
	if (db == UINT64_MAX) {
		blk_err(err, errlen,
		        "the metadata zone has no free run of %llu and %llu blocks for the new "
		        "bitmaps",
		        (unsigned long long)nl.meta_bitmap_blocks,
		        (unsigned long long)nl.data_bitmap_blocks);
		ret = -ENOSPC;
		goto out;
	}
	nl.meta_bitmap_start = sb->meta_start + mb;
	nl.data_bitmap_start = sb->meta_start + db;
	ret = build_data_bitmap(&g, &nl, &nfree_data);
	if (ret)
		goto out;

	/* the new meta bitmap: the old bitmaps' blocks free, the new ones used */
	for (uint64_t k = 0; k < sb->meta_bitmap_blocks; k++)
		bit_put(g.meta_bm, sb->meta_bitmap_start - sb->meta_start + k, false);
	for (uint64_t k = 0; k < sb->data_bitmap_blocks; k++)
		bit_put(g.meta_bm, sb->data_bitmap_start - sb->meta_start + k, false);
	for (uint64_t k = 0; k < nl.meta_bitmap_blocks; k++)
		bit_put(g.meta_bm, mb + k, true);
	for (uint64_t k = 0; k < nl.data_bitmap_blocks; k++)
		bit_put(g.meta_bm, db + k, true);
	for (uint64_t i = 0; i < sb->meta_len; i++)
		nfree_meta += !bit(g.meta_bm, i);

	/* 1. new structures, where the old filesystem does not look */
	if (g.dup) {
		ret = copy_journal(&g, nl.journal_twin, buf);
		if (!ret)
			ret = copy_meta(&g, nl.meta_twin, mb, db, &nl, buf);
		if (ret)
			goto out;
	}
	for (uint64_t k = 0; k < nl.meta_bitmap_blocks; k++) {
		struct mfs_meta_hdr *h = (struct mfs_meta_hdr *)(g.meta_bm + k * MFS_BLOCK_SIZE);

		h->blocknr = nl.meta_bitmap_start + k;
		mfs_block_seal(h, sb->csum_seed);
	}
	for (uint64_t k = 0; k < nl.data_bitmap_blocks; k++)
		mfs_block_seal(g.data_bm + k * MFS_BLOCK_SIZE, sb->csum_seed);
	ret = write_both(&g, nl.meta_bitmap_start, g.dup ? nl.meta_twin + mb : 0, g.meta_bm,
	                 nl.meta_bitmap_blocks);
	for (uint64_t k = 0; !ret && k < nl.data_bitmap_blocks; k += CHUNK) {
		uint64_t n = nl.data_bitmap_blocks - k > CHUNK ? CHUNK : nl.data_bitmap_blocks - k;

		ret = write_both(&g, nl.data_bitmap_start + k, g.dup ? nl.meta_twin + db + k : 0,
		                 g.data_bm + k * MFS_BLOCK_SIZE, n);
	}
	if (!ret)
		ret = blk_flush(dev);
	if (ret) {
		if (ret != -EIO || !err || !err[0])
			blk_err(err, errlen, "writing the new areas: %s", strerror(-ret));
		goto out;
	}

	/* 2. the commit: the backup at the new end (a reader sees it, newer), then the primary */
	memcpy(nsb, sb, MFS_BLOCK_SIZE);
	nsb->nr_blocks = nl.nr_blocks;
	nsb->journal_twin = nl.journal_twin;
	nsb->meta_twin = nl.meta_twin;
	nsb->data_len = nl.data_len;
	nsb->meta_bitmap_start = nl.meta_bitmap_start;
	nsb->data_bitmap_start = nl.data_bitmap_start;
	nsb->data_bitmap_blocks = nl.data_bitmap_blocks;
	nsb->free_blocks = nfree_data;
	nsb->free_meta = nfree_meta;
	nsb->write_time_ns = mfs_now_ns();
	if (nsb->write_time_ns <= sb->write_time_ns)
		nsb->write_time_ns = sb->write_time_ns + 1;
	mfs_block_seal(nsb, nsb->csum_seed);
	ret = blk_write(dev, (nl.nr_blocks - 1) * SPB, nsb, MFS_BLOCK_SIZE, 0);
	if (!ret)
		ret = blk_flush(dev);
	if (!ret)
		ret = blk_write(dev, 0, nsb, MFS_BLOCK_SIZE, 0);
	if (!ret)
		ret = blk_flush(dev);
	if (ret) {
		blk_err(err, errlen, "writing the superblock: %s", strerror(-ret));
		goto out;
	}
	info->old_blocks = sb->nr_blocks;
	info->new_blocks = nl.nr_blocks;
	info->old_data_len = sb->data_len;
	info->new_data_len = nl.data_len;
	info->free_blocks = nfree_data;
	info->meta_bitmap_start = nl.meta_bitmap_start;
	info->data_bitmap_start = nl.data_bitmap_start;
	info->data_bitmap_blocks = nl.data_bitmap_blocks;
out:
	if (ret == -ENOMEM)
		blk_err(err, errlen, "out of memory");
	free(g.meta_bm);
	free(g.data_bm);
	free(buf);
	free(sb);
	free(nsb);
	return ret;
}
