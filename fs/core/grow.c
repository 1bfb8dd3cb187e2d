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
#include <unistd.h>

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
	/* the plan (grow_place, grow_bitmaps) */
	struct mfs_layout nl;
	uint64_t mb, db; /* the new bitmaps' first blocks, meta zone relative */
	uint64_t nfree_data, nfree_meta;
	/* MENDFS_DEBUG_GROW_EXIT_AFTER=N: the process ends after its Nth write (crash tests) */
	unsigned long writes, exit_after;
};

/* Every write of a growth goes through here, so a test can stop the process after any. */
static int gwrite(struct grow *g, uint64_t sector, const void *buf, uint32_t len)
{
	int ret = blk_write(g->dev, sector, buf, len, 0);

	if (g->exit_after && ++g->writes >= g->exit_after) {
		blk_flush(g->dev); /* what a power cut would keep at most: the page cache's */
		_exit(137);
	}
	return ret;
}

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
	int ret = gwrite(g, blk * SPB, buf, (uint32_t)(n * MFS_BLOCK_SIZE));

	if (!ret && twin)
		ret = gwrite(g, twin * SPB, buf, (uint32_t)(n * MFS_BLOCK_SIZE));
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
		ret = gwrite(g, (new_twin + k) * SPB, buf, bytes);
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
		ret = gwrite(g, (new_twin + i) * SPB, buf, (uint32_t)(n * MFS_BLOCK_SIZE));
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

/*
 * The new layout: the tail placed by mkfs's code, the rest kept; refused if
 * the device grew too little or poison lies under the new tail.
 */
static int grow_place(struct grow *g, uint64_t dev_blocks)
{
	const struct mfs_superblock *sb = g->sb;
	struct mfs_layout *nl = &g->nl;
	uint64_t twins, from;
	int ret;

	if (sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM) {
		/* the table covers data_len blocks and sits in the fixed meta zone */
		blk_err(g->err, g->errlen,
		        "this filesystem has data checksums (data_csum): growing it is not "
		        "supported (its checksum table cannot grow)");
		return -EOPNOTSUPP;
	}
	/* the data zone grows up to the new tail: the journal and meta zone must precede it */
	if (sb->journal_start + sb->journal_len > sb->data_start ||
	    sb->meta_start + sb->meta_len > sb->data_start) {
		blk_err(g->err, g->errlen,
		        "the journal or metadata zone lies after the data zone (not mkfs.mendfs's "
		        "layout): this filesystem cannot be grown");
		return -EINVAL;
	}
	memset(nl, 0, sizeof(*nl));
	nl->dup = g->dup;
	nl->journal_start = sb->journal_start;
	nl->journal_len = sb->journal_len;
	nl->meta_start = sb->meta_start;
	nl->meta_len = sb->meta_len;
	nl->data_start = sb->data_start;
	nl->meta_bitmap_blocks = sb->meta_bitmap_blocks;
	twins = g->dup ? sb->journal_len + sb->meta_len : 0;
	ret = mfs_layout_place_tail(nl, dev_blocks);
	if (!ret && g->dup && nl->journal_twin < sb->nr_blocks)
		ret = -ENOSPC;
	if (ret || sb->data_start + sb->data_len > nl->data_start + nl->data_len) {
		blk_err(g->err, g->errlen,
		        "the device grew by %llu blocks, too little: growing needs at least %llu "
		        "more blocks (%llu MiB), the journal and metadata twins and the backup "
		        "superblock moving past the old end",
		        (unsigned long long)(dev_blocks - sb->nr_blocks),
		        (unsigned long long)(twins + 1),
		        (unsigned long long)((twins + 1) * MFS_BLOCK_SIZE >> 20));
		return -ENOSPC;
	}
	from = g->dup ? nl->journal_twin : dev_blocks - 1;
	if (poisoned(g->dev, from, dev_blocks - from)) {
		blk_err(g->err, g->errlen,
		        "poisoned sectors lie under the new twin areas or backup superblock "
		        "(blocks %llu-%llu): clear the poison first",
		        (unsigned long long)from, (unsigned long long)(dev_blocks - 1));
		return -EIO;
	}
	return 0;
}

/* The new bitmaps, in free meta zone blocks of the old meta bitmap, and the free counts. */
static int grow_bitmaps(struct grow *g)
{
	const struct mfs_superblock *sb = g->sb;
	struct mfs_layout *nl = &g->nl;
	int ret;

	g->meta_bm = balloc(sb->meta_bitmap_blocks);
	g->data_bm = balloc(nl->data_bitmap_blocks);
	if (!g->meta_bm || !g->data_bm)
		return -ENOMEM;
	for (uint64_t k = 0; k < sb->meta_bitmap_blocks; k++) {
		ret = read_meta(g, sb->meta_bitmap_start + k, MFS_T_BITMAP,
		                g->meta_bm + k * MFS_BLOCK_SIZE);
		if (ret)
			return ret;
	}
	g->mb = find_run(g, nl->meta_bitmap_blocks, 0, 0);
	g->db = g->mb == UINT64_MAX
	                ? g->mb
	                : find_run(g, nl->data_bitmap_blocks, g->mb, nl->meta_bitmap_blocks);
	if (g->db == UINT64_MAX) {
		blk_err(g->err, g->errlen,
		        "the metadata zone has no free run of %llu and %llu blocks for the new "
		        "bitmaps",
		        (unsigned long long)nl->meta_bitmap_blocks,
		        (unsigned long long)nl->data_bitmap_blocks);
		return -ENOSPC;
	}
	nl->meta_bitmap_start = sb->meta_start + g->mb;
	nl->data_bitmap_start = sb->meta_start + g->db;
	ret = build_data_bitmap(g, nl, &g->nfree_data);
	if (ret)
		return ret;

	/* the new meta bitmap: the old bitmaps' blocks free, the new ones used */
	for (uint64_t k = 0; k < sb->meta_bitmap_blocks; k++)
		bit_put(g->meta_bm, sb->meta_bitmap_start - sb->meta_start + k, false);
	for (uint64_t k = 0; k < sb->data_bitmap_blocks; k++)
		bit_put(g->meta_bm, sb->data_bitmap_start - sb->meta_start + k, false);
	for (uint64_t k = 0; k < nl->meta_bitmap_blocks; k++)
		bit_put(g->meta_bm, g->mb + k, true);
	for (uint64_t k = 0; k < nl->data_bitmap_blocks; k++)
		bit_put(g->meta_bm, g->db + k, true);
	g->nfree_meta = 0;
	for (uint64_t i = 0; i < sb->meta_len; i++)
		g->nfree_meta += !bit(g->meta_bm, i);
	return 0;
}

/* 1. The new structures, where the old filesystem does not look, flushed. */
static int grow_write_new(struct grow *g, uint8_t *buf)
{
	const struct mfs_superblock *sb = g->sb;
	const struct mfs_layout *nl = &g->nl;
	int ret = 0;

	if (g->dup) {
		ret = copy_journal(g, nl->journal_twin, buf);
		if (!ret)
			ret = copy_meta(g, nl->meta_twin, g->mb, g->db, nl, buf);
		if (ret)
			return ret;
	}
	for (uint64_t k = 0; k < nl->meta_bitmap_blocks; k++) {
		struct mfs_meta_hdr *h = (struct mfs_meta_hdr *)(g->meta_bm + k * MFS_BLOCK_SIZE);

		h->blocknr = nl->meta_bitmap_start + k;
		mfs_block_seal(h, sb->csum_seed);
	}
	for (uint64_t k = 0; k < nl->data_bitmap_blocks; k++)
		mfs_block_seal(g->data_bm + k * MFS_BLOCK_SIZE, sb->csum_seed);
	ret = write_both(g, nl->meta_bitmap_start, g->dup ? nl->meta_twin + g->mb : 0, g->meta_bm,
	                 nl->meta_bitmap_blocks);
	for (uint64_t k = 0; !ret && k < nl->data_bitmap_blocks; k += CHUNK) {
		uint64_t n =
		        nl->data_bitmap_blocks - k > CHUNK ? CHUNK : nl->data_bitmap_blocks - k;

		ret = write_both(g, nl->data_bitmap_start + k,
		                 g->dup ? nl->meta_twin + g->db + k : 0,
		                 g->data_bm + k * MFS_BLOCK_SIZE, n);
	}
	if (!ret)
		ret = blk_flush(g->dev);
	if (ret && (ret != -EIO || !g->err || !g->err[0]))
		blk_err(g->err, g->errlen, "writing the new areas: %s", strerror(-ret));
	return ret;
}

/*
 * 2. The commit: @nsb (a copy of the old superblock, its counters set by
 * the caller) gets the new layout and is written, the backup at the new end
 * first (a reader of the grown device sees it there, newer), then the primary.
 */
static int grow_commit(struct grow *g, struct mfs_superblock *nsb)
{
	const struct mfs_layout *nl = &g->nl;
	int ret;

	nsb->nr_blocks = nl->nr_blocks;
	nsb->journal_twin = nl->journal_twin;
	nsb->meta_twin = nl->meta_twin;
	nsb->data_len = nl->data_len;
	nsb->meta_bitmap_start = nl->meta_bitmap_start;
	nsb->data_bitmap_start = nl->data_bitmap_start;
	nsb->data_bitmap_blocks = nl->data_bitmap_blocks;
	nsb->write_time_ns = mfs_now_ns();
	if (nsb->write_time_ns <= g->sb->write_time_ns)
		nsb->write_time_ns = g->sb->write_time_ns + 1;
	mfs_block_seal(nsb, nsb->csum_seed);
	ret = gwrite(g, (nl->nr_blocks - 1) * SPB, nsb, MFS_BLOCK_SIZE);
	if (!ret)
		ret = blk_flush(g->dev);
	if (!ret)
		ret = gwrite(g, 0, nsb, MFS_BLOCK_SIZE);
	if (!ret)
		ret = blk_flush(g->dev);
	if (ret)
		blk_err(g->err, g->errlen, "writing the superblock: %s", strerror(-ret));
	return ret;
}

static void grow_info(const struct grow *g, const struct mfs_superblock *nsb,
                      struct mfs_grow_info *info)
{
	info->old_blocks = g->sb->nr_blocks;
	info->new_blocks = g->nl.nr_blocks;
	info->old_data_len = g->sb->data_len;
	info->new_data_len = g->nl.data_len;
	info->free_blocks = nsb->free_blocks;
	info->meta_bitmap_start = g->nl.meta_bitmap_start;
	info->data_bitmap_start = g->nl.data_bitmap_start;
	info->data_bitmap_blocks = g->nl.data_bitmap_blocks;
}

static void grow_init(struct grow *g, struct blk_dev *dev, char *err, size_t errlen)
{
	const char *e = getenv("MENDFS_DEBUG_GROW_EXIT_AFTER");

	memset(g, 0, sizeof(*g));
	g->dev = dev;
	g->err = err;
	g->errlen = errlen;
	g->exit_after = e ? strtoul(e, NULL, 10) : 0;
}

int mfs_grow(struct blk_dev *dev, struct mfs_grow_info *info, char *err, size_t errlen)
{
	struct grow g;
	struct mfs_superblock *sb = balloc(1), *nsb = balloc(1);
	struct blk_dev_info di;
	uint64_t dev_blocks;
	uint8_t *buf = balloc(CHUNK);
	int ret;

	grow_init(&g, dev, err, errlen);
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
	ret = grow_place(&g, dev_blocks);
	if (ret)
		goto out;
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
	ret = grow_bitmaps(&g);
	if (!ret)
		ret = grow_write_new(&g, buf);
	if (ret)
		goto out;
	memcpy(nsb, sb, MFS_BLOCK_SIZE);
	nsb->free_blocks = g.nfree_data;
	nsb->free_meta = g.nfree_meta;
	ret = grow_commit(&g, nsb);
	if (!ret)
		grow_info(&g, nsb, info);
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

int mfs_grow_online(struct mfs *fs, struct mfs_grow_info *info, char *err, size_t errlen)
{
	struct grow g;
	struct mfs_superblock *sb = NULL, *nsb = NULL;
	uint64_t old_size, new_size, dev_blocks;
	uint8_t *buf = NULL;
	int ret;

	grow_init(&g, fs->dev, err, errlen);
	memset(info, 0, sizeof(*info));
	if (fs->read_only) {
		blk_err(err, errlen, "the filesystem is mounted read-only");
		return -EROFS;
	}
	sb = balloc(1);
	nsb = balloc(1);
	buf = balloc(CHUNK);
	if (!sb || !nsb || !buf) {
		ret = -ENOMEM;
		goto out_free;
	}
	/*
	 * No transaction from here to release, and what was committed is in
	 * place; the hold also keeps a second growth out (-EBUSY) before the
	 * engine is asked for the new size.
	 */
	ret = mfs_journal_hold(fs);
	if (ret) {
		if (ret == -EBUSY)
			blk_err(err, errlen, "another growth is running, or changes kept coming");
		else
			blk_err(err, errlen, "cannot hold the journal: %s", strerror(-ret));
		goto out_free;
	}
	ret = blk_dev_resize(fs->dev, &old_size, &new_size, err, errlen);
	if (ret)
		goto out_release;
	dev_blocks = new_size / MFS_BLOCK_SIZE;
	if (dev_blocks <= fs->sb.nr_blocks) {
		blk_err(err, errlen,
		        "the filesystem already fills the device (%llu blocks): the device did "
		        "not grow, nothing to do",
		        (unsigned long long)fs->sb.nr_blocks);
		ret = -EEXIST;
		goto out_release;
	}
	memcpy(sb, &fs->sb, MFS_BLOCK_SIZE);
	g.sb = sb;
	g.dup = fs->dup;
	ret = grow_place(&g, dev_blocks);
	if (!ret)
		ret = grow_bitmaps(&g);
	if (!ret)
		ret = grow_write_new(&g, buf);
	if (ret)
		goto out_release;
	/* the counters the allocator keeps, with the new blocks free */
	memcpy(nsb, sb, MFS_BLOCK_SIZE);
	nsb->free_blocks = sb->free_blocks + (g.nl.data_len - sb->data_len);
	nsb->free_meta = g.nfree_meta;
	ret = grow_commit(&g, nsb);
	if (ret)
		goto out_release;
	/* the device holds the new filesystem: the cache must not hold old bitmap copies */
	for (uint64_t k = 0; k < sb->meta_bitmap_blocks; k++) {
		mfs_meta_forget(fs, sb->meta_bitmap_start + k);
		mfs_meta_forget(fs, g.nl.meta_bitmap_start + k);
	}
	for (uint64_t k = 0; k < sb->data_bitmap_blocks; k++)
		mfs_meta_forget(fs, sb->data_bitmap_start + k);
	for (uint64_t k = 0; k < g.nl.data_bitmap_blocks; k++)
		mfs_meta_forget(fs, g.nl.data_bitmap_start + k);
	ret = mfs_alloc_grow(fs, nsb);
	if (ret) {
		/* the device is grown, memory is not: nothing more may be written */
		mfs_fs_error(fs, ret, "online growth");
		blk_err(err, errlen,
		        "grown on the device, but the allocator could not follow (%s): the "
		        "filesystem is read-only now; unmount and mount it again",
		        strerror(-ret));
		goto out_release;
	}
	grow_info(&g, nsb, info);
out_release:
	mfs_journal_release(fs);
out_free:
	if (ret == -ENOMEM && err && !err[0])
		blk_err(err, errlen, "out of memory");
	free(g.meta_bm);
	free(g.data_bm);
	free(buf);
	free(sb);
	free(nsb);
	return ret;
}
