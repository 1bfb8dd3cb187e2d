/* SPDX-License-Identifier: MIT */
/*
 * Journal replay (the format is described at the top of journal.c): at
 * mount, the committed transactions from sb->journal_seq/journal_tail are
 * written in place (both copies) and the superblock advanced; fsck -n scans
 * the same images without writing.  A transaction is replayed only whole:
 * every descriptor, image and the commit block valid (primary or twin), its
 * tags' checksum matching.  It works on the device before the buffer cache
 * exists; it calls the checksums and the superblock (super.c) and
 * mfs_meta_write_both (meta.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "mfs.h"

#define JTAGS ((unsigned)MFS_JOURNAL_TAGS)

/*
 * [recovery] The primary of journal block @blk met a media error and its twin
 * (@twin, in @buf) is good: rewrite the primary from it (a whole-block write
 * clears poison), unless replay runs read-only.  Logged like metadata repairs.
 */
static void replay_heal(struct mfs *fs, uint64_t blk, uint64_t twin, const void *buf)
{
	int ret;

	if (fs->read_only)
		return;
	ret = blk_write(fs->dev, blk * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0);
	fprintf(stderr, "mendfs: journal block %llu: media error, %s from twin %llu%s%s\n",
	        (unsigned long long)blk, ret ? "repair" : "repaired", (unsigned long long)twin,
	        ret ? " failed: " : "", ret ? strerror(-ret) : "");
}

/*
 * Read journal block @off as a descriptor or commit of transaction @id: the
 * primary, else its twin.  Returns the block's type, or 0 if neither copy is
 * one (not written, torn, stale, poisoned).
 */
static uint16_t replay_read_ctl(struct mfs *fs, uint64_t off, uint64_t id, void *buf, bool *media)
{
	uint64_t blk = fs->sb.journal_start + off, where[2] = {blk, mfs_twin(fs, blk)};
	bool primary_media = false; /* [recovery] */
	unsigned c;

	for (c = 0; c < 2 && where[c]; c++) {
		const struct mfs_meta_hdr *hdr = buf;

		if (blk_read(fs->dev, where[c] * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0)) {
			*media = true;
			primary_media |= c == 0; /* [recovery] */
			continue;
		}
		if (mfs_block_verify(buf, fs->seed, 0, blk) || hdr->gen != id)
			continue;
		if (hdr->type == MFS_T_JOURNAL_DESC &&
		    (hdr->nr_items == 0 || hdr->nr_items > JTAGS))
			continue;
		if (hdr->type == MFS_T_JOURNAL_DESC || hdr->type == MFS_T_JOURNAL_COMMIT) {
			if (c == 1 && primary_media)
				replay_heal(fs, blk, where[1], buf); /* [recovery] */
			return hdr->type;
		}
	}
	return 0;
}

/* Read the image at journal offset @off that must hash to @csum: primary, else twin. */
static bool replay_read_image(struct mfs *fs, uint64_t off, uint64_t csum, void *buf, bool *media)
{
	uint64_t blk = fs->sb.journal_start + off, where[2] = {blk, mfs_twin(fs, blk)};
	bool primary_media = false; /* [recovery] */
	unsigned c;

	for (c = 0; c < 2 && where[c]; c++) {
		if (blk_read(fs->dev, where[c] * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0)) {
			*media = true;
			primary_media |= c == 0; /* [recovery] */
			continue;
		}
		if (XXH3_64bits_withSeed(buf, MFS_BLOCK_SIZE, fs->seed) == csum) {
			if (c == 1 && primary_media)
				replay_heal(fs, blk, where[1], buf); /* [recovery] */
			return true;
		}
	}
	return false;
}

struct replay_txn {
	uint64_t n, cap;              /* images */
	struct mfs_journal_tag *tags; /* n of them, in order */
	uint8_t *imgs;                /* n blocks */
	uint64_t blocks;              /* journal blocks, commit included */
};

static int replay_grow(struct replay_txn *rt, uint64_t need)
{
	uint64_t cap = rt->cap ? rt->cap : 64;
	void *p;

	if (need <= rt->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(rt->tags, cap * sizeof(*rt->tags));
	if (!p)
		return -ENOMEM;
	rt->tags = p;
	p = realloc(rt->imgs, cap * MFS_BLOCK_SIZE);
	if (!p)
		return -ENOMEM;
	rt->imgs = p;
	rt->cap = cap;
	return 0;
}

/*
 * Parse transaction @id starting at journal offset @off, reading at most
 * @room blocks.  Returns 1 if it is complete and intact, 0 if not (the crash
 * point), -ENOMEM.
 */
static int replay_parse(struct mfs *fs, uint64_t off, uint64_t id, uint64_t room,
                        struct replay_txn *rt, uint8_t *blk, bool *media, char *err, size_t errlen)
{
	const struct mfs_superblock *sb = &fs->sb;
	uint64_t jlen = sb->journal_len, pos = 0;
	const struct mfs_journal_commit *c = (const void *)blk;
	const struct mfs_journal_desc *d = (const void *)blk;
	uint16_t type;
	uint32_t i;

	rt->n = 0;
	for (;;) {
		if (pos >= room)
			return 0;
		type = replay_read_ctl(fs, (off + pos) % jlen, id, blk, media);
		pos++;
		if (type == MFS_T_JOURNAL_COMMIT)
			break;
		if (type != MFS_T_JOURNAL_DESC || pos + d->hdr.nr_items > room)
			return 0;
		if (replay_grow(rt, rt->n + d->hdr.nr_items))
			return -ENOMEM;
		for (i = 0; i < d->hdr.nr_items; i++) {
			const struct mfs_journal_tag *tag = &d->tags[i];

			if (tag->blocknr < sb->meta_start ||
			    tag->blocknr - sb->meta_start >= sb->meta_len) {
				blk_err(err, errlen,
				        "journal transaction %llu targets block %llu outside the "
				        "metadata zone: not replayed",
				        (unsigned long long)id, (unsigned long long)tag->blocknr);
				return 0;
			}
			rt->tags[rt->n + i] = *tag;
		}
		/* d lives in blk, which the image reads below do not touch */
		for (i = 0; i < d->hdr.nr_items; i++) {
			if (!replay_read_image(fs, (off + pos) % jlen, rt->tags[rt->n].csum,
			                       rt->imgs + rt->n * MFS_BLOCK_SIZE, media))
				return 0;
			rt->n++;
			pos++;
		}
	}
	if (c->nr_blocks != rt->n || rt->n == 0 ||
	    c->txn_csum != XXH3_64bits_withSeed(rt->tags, rt->n * sizeof(*rt->tags), fs->seed))
		return 0;
	rt->blocks = pos;
	return 1;
}

int mfs_journal_replay(struct blk_dev *dev, struct mfs_superblock *sb, bool dry_run, char *err,
                       size_t errlen)
{
	struct mfs fs = {.dev = dev, .sb = *sb, .seed = sb->csum_seed, .read_only = dry_run};
	struct replay_txn rt = {0};
	uint64_t jlen = sb->journal_len, off = sb->journal_tail, id = sb->journal_seq;
	uint64_t scanned = 0, i;
	bool media = false;
	uint8_t *blk = NULL;
	int count = 0, ret = 0;

	if (err && errlen)
		err[0] = '\0';
	fs.dup = sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	if (jlen < 3 || off >= jlen) {
		blk_err(err, errlen, "journal tail %llu outside the journal (%llu blocks)",
		        (unsigned long long)off, (unsigned long long)jlen);
		return -EUCLEAN;
	}
	if (posix_memalign((void **)&blk, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	while (scanned < jlen) {
		ret = replay_parse(&fs, off, id, jlen - scanned, &rt, blk, &media, err, errlen);
		if (ret <= 0)
			break;
		if (!dry_run) {
			for (i = 0; i < rt.n; i++) {
				ret = mfs_meta_write_both(&fs, rt.tags[i].blocknr,
				                          rt.imgs + i * MFS_BLOCK_SIZE, 1);
				if (ret) {
					blk_err(err, errlen,
					        "journal replay: writing block %llu of transaction "
					        "%llu failed: %s",
					        (unsigned long long)rt.tags[i].blocknr,
					        (unsigned long long)id, strerror(-ret));
					goto out;
				}
			}
		}
		count++;
		id++;
		off = (off + rt.blocks) % jlen;
		scanned += rt.blocks;
	}
	if (ret < 0)
		goto out;
	if (media && err && errlen && !err[0])
		blk_err(err, errlen,
		        "journal replay stopped at transaction %llu (offset %llu): media errors in "
		        "the journal",
		        (unsigned long long)id, (unsigned long long)off);
	ret = 0;
	if (!dry_run && count > 0) {
		ret = blk_flush(dev);
		if (ret)
			goto out;
		/* skip one id: blocks of a torn transaction @id can never be taken for a later one
		 */
		fs.sb.journal_seq = id + 1;
		fs.sb.journal_tail = off;
		ret = mfs_super_write(&fs);
		if (ret) {
			blk_err(err, errlen, "journal replay: writing the superblock failed: %s",
			        strerror(-ret));
			goto out;
		}
		*sb = fs.sb;
	}
out:
	free(blk);
	free(rt.tags);
	free(rt.imgs);
	return ret < 0 ? ret : count;
}

/*
 * fsck -n: the images replay would apply, without writing anything (the
 * checker overlays them in memory).  Same parse as mfs_journal_replay().
 */
int mfs_journal_scan(struct blk_dev *dev, const struct mfs_superblock *sb,
                     int (*fn)(void *arg, uint64_t blocknr, const void *img), void *arg)
{
	struct mfs fs = {.dev = dev, .sb = *sb, .seed = sb->csum_seed, .read_only = true};
	struct replay_txn rt = {0};
	uint64_t jlen = sb->journal_len, off = sb->journal_tail, id = sb->journal_seq;
	uint64_t scanned = 0, i;
	bool media = false;
	uint8_t *blk = NULL;
	int count = 0, ret = 0;

	fs.dup = sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	if (jlen < 3 || off >= jlen)
		return -EUCLEAN;
	if (posix_memalign((void **)&blk, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	while (scanned < jlen) {
		ret = replay_parse(&fs, off, id, jlen - scanned, &rt, blk, &media, NULL, 0);
		if (ret <= 0)
			break;
		for (i = 0, ret = 0; i < rt.n && !ret; i++)
			ret = fn(arg, rt.tags[i].blocknr, rt.imgs + i * MFS_BLOCK_SIZE);
		if (ret)
			break;
		count++;
		id++;
		off = (off + rt.blocks) % jlen;
		scanned += rt.blocks;
	}
	free(blk);
	free(rt.tags);
	free(rt.imgs);
	return ret < 0 ? ret : count;
}
