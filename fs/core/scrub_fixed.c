/* SPDX-License-Identifier: MIT */
/*
 * The scrub of what the meta zone pass does not cover (mfs_scrub.h,
 * docs/RECOVERY.md "Online scrub"): the two superblock copies and the live
 * part of the journal (offsets jtail .. jhead, the transactions replay would
 * apply after a crash), both copies of each block.  Run once at a scrub's
 * start, with the journal still (mfs_journal_still: no commit, checkpoint or
 * superblock write meanwhile), so every copy read is complete and final.
 *
 * Superblock: a copy that is unreadable, fails its checks, or differs from
 * the other is rewritten, both copies, from the mounted filesystem's own
 * superblock (mfs_super_write, what a checkpoint writes; the mount rule of
 * FORMAT.md §4.2 would pick the same state).  Journal: a block whose copy is
 * bad (unreadable, no magic, checksum) or stale (valid, but an older
 * transaction's: lower gen) is rewritten from the good copy, as the read
 * path heals a metadata block; a block with no good copy cannot be healed
 * in the journal, so a checkpoint afterwards writes every committed block in
 * place and moves the tail past it: replay no longer needs it.
 * Calls super.c, meta.c (the twin), journal.c, events.c and the engine.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfs_scrub.h"

#define BS  MFS_BLOCK_SIZE
#define SPB MFS_SECTORS_PER_BLOCK

enum { C_OK, C_MEDIA, C_CORRUPT };

static const char *const c_name[] = {"valid", "unreadable (poison)", "corrupt"};

struct fixed {
	uint8_t *a, *b; /* one block each */
	struct mfs_scrub_counts *c;
	uint64_t unhealable; /* journal blocks with no good copy */
};

/* Read copy @blk into @buf and check it: the superblock's rules or any sealed block's. */
static int copy_check(struct mfs *fs, uint64_t blk, uint8_t *buf, bool super)
{
	const struct mfs_meta_hdr *hdr = (const void *)buf;

	if (blk_read(fs->dev, blk * SPB, buf, BS, 0))
		return C_MEDIA;
	if (super)
		return mfs_block_verify(buf, fs->sb.csum_seed, MFS_T_SUPER, 0) ? C_CORRUPT : C_OK;
	if (hdr->magic != MFS_META_MAGIC || hdr->csum != mfs_block_csum(buf, fs->sb.csum_seed))
		return C_CORRUPT;
	return C_OK;
}

static void healed_event(struct mfs *fs, int st, uint64_t bad, uint64_t block)
{
	mfs_event_post(fs, MFS_EV_META_HEALED, st == C_MEDIA ? MFS_EVC_MEDIA : MFS_EVC_CORRUPT,
	               bad * SPB, SPB, block);
}

static void scrub_super(struct mfs *fs, struct fixed *x)
{
	uint64_t where[2] = {0, fs->sb.nr_blocks - 1};
	int st[2], bad;

	st[0] = copy_check(fs, where[0], x->a, true);
	st[1] = copy_check(fs, where[1], x->b, true);
	x->c->meta_checked++;
	if (st[0] == C_OK && st[1] == C_OK && !memcmp(x->a, x->b, BS))
		return;
	if (st[0] == C_OK && st[1] == C_OK) {
		/* both valid, different: the older is a write that was lost */
		const struct mfs_superblock *s0 = (const void *)x->a, *s1 = (const void *)x->b;

		bad = s1->write_time_ns < s0->write_time_ns;
		st[bad] = C_CORRUPT;
	} else {
		bad = st[0] == C_OK;
	}
	if (fs->read_only || mfs_super_write(fs)) {
		fprintf(stderr, "mendfs: scrub: superblock copy at block %llu %s, %s\n",
		        (unsigned long long)where[bad], c_name[st[bad]],
		        fs->read_only ? "left so (read-only)" : "rewrite failed");
		x->c->meta_bad++;
		return;
	}
	for (int i = 0; i < 2; i++) {
		if (st[i] == C_OK)
			continue;
		fprintf(stderr,
		        "mendfs: scrub: superblock copy at block %llu %s, rewritten from the "
		        "mounted filesystem's superblock\n",
		        (unsigned long long)where[i], c_name[st[i]]);
		healed_event(fs, st[i], where[i], 0);
		x->c->meta_healed++;
		atomic_fetch_add(&fs->stats.meta_repairs, 1);
	}
}

static void scrub_journal(struct mfs *fs, struct fixed *x)
{
	uint64_t len = fs->sb.journal_len, o = fs->jtail, n;

	for (n = 0; o != fs->jhead && n < len; n++, o = (o + 1) % len) {
		uint64_t blk = fs->sb.journal_start + o, twin = mfs_twin(fs, blk), bad;
		int p = copy_check(fs, blk, x->a, false), t = C_OK, err;
		const uint8_t *good;

		x->c->meta_checked++;
		if (twin)
			t = copy_check(fs, twin, x->b, false);
		if (p == C_OK && t == C_OK && twin && memcmp(x->a, x->b, BS)) {
			/* both valid, different: the older transaction's is a lost write */
			uint64_t ga = ((const struct mfs_meta_hdr *)(const void *)x->a)->gen;
			uint64_t gb = ((const struct mfs_meta_hdr *)(const void *)x->b)->gen;

			if (ga == gb) {
				fprintf(stderr,
				        "mendfs: scrub: journal block %llu: its copies differ, "
				        "both valid, same transaction: left so\n",
				        (unsigned long long)blk);
				x->c->meta_bad++;
				continue;
			}
			*(ga < gb ? &p : &t) = C_CORRUPT;
		}
		if (p == C_OK && t == C_OK)
			continue;
		if (!twin || (p != C_OK && t != C_OK)) {
			fprintf(stderr,
			        "mendfs: scrub: journal block %llu (offset %llu): primary %s, twin "
			        "%s: no good copy\n",
			        (unsigned long long)blk, (unsigned long long)o, c_name[p],
			        twin ? c_name[t] : "none (metadata_dup off)");
			x->unhealable++;
			continue;
		}
		bad = p == C_OK ? twin : blk;
		good = p == C_OK ? x->a : x->b;
		err = fs->read_only ? -EROFS : blk_write(fs->dev, bad * SPB, good, BS, 0);
		fprintf(stderr, "mendfs: scrub: journal block %llu: copy at %llu %s, %s\n",
		        (unsigned long long)blk, (unsigned long long)bad, c_name[p == C_OK ? t : p],
		        err == -EROFS ? "left so (read-only)"
		        : err         ? "rewrite from the good copy failed"
		                      : "rewritten from the good copy");
		if (err) {
			x->c->meta_bad++;
			continue;
		}
		healed_event(fs, p == C_OK ? t : p, bad, blk);
		x->c->meta_healed++;
		atomic_fetch_add(&fs->stats.meta_repairs, 1);
	}
}

static int fixed_still(struct mfs *fs, void *arg)
{
	scrub_super(fs, arg);
	scrub_journal(fs, arg);
	return 0;
}

int mfs_scrub_fixed(struct mfs *fs, struct mfs_scrub_counts *c)
{
	struct fixed x = {.c = c};

	if (posix_memalign((void **)&x.a, BS, BS) || posix_memalign((void **)&x.b, BS, BS)) {
		free(x.a);
		return -ENOMEM;
	}
	mfs_journal_still(fs, fixed_still, &x);
	if (x.unhealable) {
		/* in place, both copies, and the tail moved past them: replay needs none */
		int ret = fs->read_only ? -EROFS : mfs_checkpoint(fs);

		fprintf(stderr, "mendfs: scrub: %llu journal block(s) with no good copy: %s\n",
		        (unsigned long long)x.unhealable,
		        ret ? "left so (read-only, or the checkpoint failed): a crash now loses "
		              "the transactions they hold"
		            : "checkpointed, replay no longer needs them");
		if (ret)
			c->meta_lost += x.unhealable;
		else
			c->meta_healed += x.unhealable;
	}
	free(x.a);
	free(x.b);
	return 0;
}
