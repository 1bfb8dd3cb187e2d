/* SPDX-License-Identifier: MIT */
/*
 * Pass 5: space (FORMAT.md §5, §9, §10, §13).
 *
 *  - The quarantine tree: entries inside the data zone, not overlapping each
 *    other or any file (F0504); entries whose blocks are no longer all
 *    poisoned are released (F0505); poisoned free data blocks missing from
 *    it are added (F0506).
 *  - Orphans waiting to be freed (F0508): freed by the fs library's orphan
 *    processing.
 *  - The three bitmaps against what the passes found in use: header item
 *    counts and padding bits (F0501), then every bit (F0502).  When a
 *    structural problem was left unfixed the bitmaps only gain bits, so that
 *    nothing still referenced is ever handed out.
 *  - The superblock's free counters after a clean unmount (F0503).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsck.h"

enum bm_kind { BM_META, BM_INODE, BM_DATA };
static const char *const bm_name[] = {"meta zone", "inode", "data zone"};

static bool expected(struct fsck_ctx *ctx, enum bm_kind k, uint64_t i)
{
	switch (k) {
	case BM_META:
		return ctx->meta_owner[i] != OWN_NONE;
	case BM_INODE:
		return i == 0 || ctx->ino[i + 1].state == IST_OK;
	case BM_DATA:
		return fsck_data_is_used(ctx, i);
	}
	return true;
}

static bool bit(const uint8_t *buf, uint64_t i)
{
	return buf[sizeof(struct mfs_meta_hdr) + i / 8] >> (i % 8) & 1;
}

static void bit_set(uint8_t *buf, uint64_t i, bool v)
{
	uint8_t *p = &buf[sizeof(struct mfs_meta_hdr) + i / 8];

	*p = (uint8_t)(v ? *p | 1u << (i % 8) : *p & ~(1u << (i % 8)));
}

static void bm_block_init(uint8_t *buf, uint64_t blk)
{
	struct mfs_meta_hdr *hdr = (void *)buf;

	memset(buf, 0, MFS_BLOCK_SIZE);
	hdr->magic = MFS_META_MAGIC;
	hdr->type = MFS_T_BITMAP;
	hdr->blocknr = blk;
}

/* Check (and with @fix rebuild) one bitmap.  Returns the used count it settles on. */
static uint64_t bitmap_check(struct fsck_ctx *ctx, enum bm_kind k, uint64_t start, uint64_t nblk,
                             uint64_t items)
{
	uint64_t leaked = 0, missing = 0, first_leak = 0, first_miss = 0, used_disk = 0,
	         used_exp = 0;
	bool hdr_bad = false, lost = false, fix = false, only_set = ctx->declined > 0;
	uint8_t *buf;
	char what[64];
	int pass;

	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return 0;
	for (pass = 0; pass < 2; pass++) {
		for (uint64_t b = 0; b < nblk; b++) {
			uint64_t base = b * MFS_BITMAP_BITS, valid;
			struct mfs_meta_hdr *hdr = (void *)buf;
			bool dirty = false;
			int r;

			valid = base >= items ? 0 : items - base;
			if (valid > MFS_BITMAP_BITS)
				valid = MFS_BITMAP_BITS;
			snprintf(what, sizeof(what), "%s bitmap block %llu", bm_name[k],
			         (unsigned long long)b);
			r = fsck_meta_read(ctx, start + b, MFS_T_BITMAP, buf, pass ? NULL : what);
			if (r) {
				if (pass == 0) {
					lost = true;
					if (fsck_fix_problem(
					            ctx, PR_META_LOST,
					            "%s (block %llu): both copies %s: rebuild it",
					            what, (unsigned long long)(start + b),
					            r == -EIO ? "unreadable or poisoned"
					                      : "corrupt"))
						fix = true;
					continue;
				}
				if (!fix)
					continue;
				bm_block_init(buf, start + b);
				for (uint64_t i = 0; i < valid; i++)
					bit_set(buf, i,
					        true); /* nothing known: all used, then below */
				dirty = true;
			}
			if (hdr->nr_items != valid) {
				hdr_bad = true;
				if (pass && fix) {
					hdr->nr_items = (uint32_t)valid;
					dirty = true;
				}
			}
			for (uint64_t i = valid; i < MFS_BITMAP_BITS; i++)
				if (!bit(buf, i)) {
					hdr_bad = true;
					if (pass && fix) {
						bit_set(buf, i, true);
						dirty = true;
					}
				}
			for (uint64_t i = 0; i < valid; i++) {
				bool d = bit(buf, i), e = expected(ctx, k, base + i);

				if (pass == 0) {
					used_disk += d;
					used_exp += e;
					if (d && !e && !leaked++)
						first_leak = base + i;
					if (!d && e && !missing++)
						first_miss = base + i;
				} else if (fix && d != e && (e || !only_set)) {
					bit_set(buf, i, e);
					dirty = true;
				}
			}
			if (dirty) {
				r = fsck_meta_write(ctx, start + b, buf);
				if (r)
					fsck_fix_failed(ctx, PR_BITMAP_DIFF, r);
			}
		}
		if (pass == 0) {
			if (hdr_bad &&
			    fsck_fix_problem(ctx, PR_BITMAP_HDR,
			                     "%s bitmap: item counts or padding bits wrong",
			                     bm_name[k]))
				fix = true;
			if ((leaked || missing) &&
			    fsck_fix_problem(
			            ctx, PR_BITMAP_DIFF,
			            "%s bitmap: %llu marked used but free (first %llu), %llu "
			            "in use but marked free (first %llu)%s",
			            bm_name[k], (unsigned long long)leaked,
			            (unsigned long long)first_leak, (unsigned long long)missing,
			            (unsigned long long)first_miss,
			            only_set && leaked ? "; problems were left: only the missing "
			                                 "bits are set"
			                               : ""))
				fix = true;
			if (!fix)
				break;
			(void)lost;
		}
	}
	free(buf);
	if (fix)
		return only_set ? used_disk + missing : used_exp;
	return used_disk;
}

static int quar_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val, uint16_t len)
{
	uint64_t n = 0, ds = ctx->sb.data_start, i, clean = 0, owner = 0;

	(void)arg;
	if (len == sizeof(n))
		memcpy(&n, val, sizeof(n));
	if (len != sizeof(n) || !fsck_in_data_zone(ctx, key, n)) {
		return fsck_fix_problem(
		               ctx, PR_QUAR_BAD,
		               "quarantine: entry at block %llu (%llu blocks) is outside the data "
		               "zone: remove it",
		               (unsigned long long)key, (unsigned long long)n)
		               ? ENT_DROP
		               : ENT_BAD;
	}
	for (i = 0; i < n && !owner; i++)
		if (fsck_data_is_used(ctx, key - ds + i))
			owner = fsck_data_owner(ctx, key - ds + i);
	if (owner) {
		return fsck_fix_problem(
		               ctx, PR_QUAR_BAD,
		               "quarantine: entry at block %llu (%llu blocks) overlaps %s %llu: "
		               "remove it",
		               (unsigned long long)key, (unsigned long long)n,
		               owner == DOWN_QUARANTINE ? "another entry at block" : "inode",
		               (unsigned long long)(owner == DOWN_QUARANTINE ? key + i - 1 : owner))
		               ? ENT_DROP
		               : ENT_BAD;
	}
	fsck_data_claim(ctx, key - ds, n, DOWN_QUARANTINE);
	for (i = 0; i < n; i++)
		clean += !fsck_poisoned(ctx, key + i, 1);
	if (clean) {
		struct fsck_range r = {.off = key, .len = n};

		if (fsck_fix_problem(ctx, PR_QUAR_CLEAN,
		                     "quarantine: entry at block %llu (%llu blocks) has %llu clean "
		                     "block%s: release %s",
		                     (unsigned long long)key, (unsigned long long)n,
		                     (unsigned long long)clean, clean == 1 ? "" : "s",
		                     clean == n ? "it" : "them")) {
			if (VEC_PUSH(ctx->quar_rel, ctx->nquar_rel, ctx->cap_quar_rel, r))
				fsck_fix_failed(ctx, PR_QUAR_CLEAN, -ENOMEM);
			else
				ctx->need_library = true;
		}
	}
	/*
	 * --zero-damaged clears quarantined blocks too (docs/RECOVERY.md: never
	 * allocated again until cleared): a whole-block write of zeros clears
	 * their poison, then the entry is released.
	 */
	if (clean < n && ctx->zero_damaged) {
		struct fsck_range r = {.off = key, .len = n};

		if (fsck_fix_problem(
		            ctx, PR_QUAR_CLEAN,
		            "quarantine: entry at block %llu (%llu blocks) has %llu poisoned "
		            "block%s: zero-init and release (--zero-damaged)",
		            (unsigned long long)key, (unsigned long long)n,
		            (unsigned long long)(n - clean), n - clean == 1 ? "" : "s")) {
			if (VEC_PUSH(ctx->quar_zero, ctx->nquar_zero, ctx->cap_quar_zero, r))
				fsck_fix_failed(ctx, PR_QUAR_CLEAN, -ENOMEM);
			else
				ctx->need_library = true;
		}
	}
	return ENT_OK;
}

static void free_line(struct fsck_ctx *ctx, uint64_t s, uint64_t e, const char *state)
{
	char *line = NULL;

	if (asprintf(&line, "free space: data blocks %llu-%llu (sectors %llu-%llu) poisoned: %s",
	             (unsigned long long)s, (unsigned long long)(e - 1),
	             (unsigned long long)(s * SPB), (unsigned long long)(e * SPB - 1), state) < 0)
		return;
	if (VEC_PUSH(ctx->free_damage, ctx->nfree_damage, ctx->cap_free_damage, line))
		free(line);
}

static int kind(const struct fsck_ctx *ctx, uint64_t idx)
{
	return fsck_data_is_quarantined(ctx, idx) ? 2 : fsck_data_is_used(ctx, idx) ? 1 : 0;
}

/* Poisoned data blocks nobody owns: quarantined, or to be. */
static void quarantine_missing(struct fsck_ctx *ctx)
{
	uint64_t ds = ctx->sb.data_start, de = ds + ctx->sb.data_len;

	for (unsigned p = 0; p < ctx->npoison; p++) {
		uint64_t sb = ctx->poison[p].sector / SPB;
		uint64_t eb = (ctx->poison[p].sector + ctx->poison[p].nr + SPB - 1) / SPB;

		if (sb < ds)
			sb = ds;
		if (eb > de)
			eb = de;
		for (uint64_t b = sb; b < eb;) {
			/* 0 free, 1 a file's, 2 quarantined: runs of one kind */
			int k = kind(ctx, b - ds);
			uint64_t e = b + 1;

			while (e < eb && kind(ctx, e - ds) == k)
				e++;
			if (k == 2) {
				free_line(ctx, b, e, "quarantined");
			} else if (k == 0) {
				struct fsck_range r = {.off = b, .len = e - b};
				bool fix = fsck_fix_problem(
				        ctx, PR_QUAR_MISSING,
				        "data blocks %llu-%llu are free and poisoned but not "
				        "quarantined: quarantine them",
				        (unsigned long long)b, (unsigned long long)(e - 1));

				if (fix && !VEC_PUSH(ctx->quar_add, ctx->nquar_add,
				                     ctx->cap_quar_add, r)) {
					fsck_data_claim(ctx, b - ds, e - b, DOWN_QUARANTINE);
					ctx->need_library = true;
					free_line(ctx, b, e, "quarantined now");
				} else {
					free_line(
					        ctx, b, e,
					        "not quarantined (never allocated while poisoned)");
				}
			}
			b = e;
		}
	}
}

int fsck_pass5_space(struct fsck_ctx *ctx)
{
	struct mfs_superblock *sb = &ctx->sb;
	uint64_t used_meta, used_ino, used_data;
	int r;

	if (ctx->q_root) {
		struct fsck_rebuild keep = {0};

		r = fsck_bt_walk(ctx, ctx->q_root, ctx->q_depth, MFS_TREE_QUARANTINE, 0,
		                 OWN_QUARANTINE, "quarantine tree", quar_fn, NULL, &keep);
		if (r == WALK_FIX) {
			ctx->q_root = 0;
			ctx->q_depth = 0;
			r = fsck_pass0_roots_store(ctx);
			if (r) {
				fsck_fix_failed(ctx, PR_QUAR_BAD, r);
				fsck_rebuild_free(&keep);
			} else {
				fsck_queue_rebuild(ctx, &keep);
			}
		} else {
			fsck_rebuild_free(&keep);
		}
	}
	quarantine_missing(ctx);

	for (uint64_t ino = 1; ino <= sb->nr_inodes; ino++) {
		struct fsck_inode *fi = &ctx->ino[ino];

		if (fi->state == IST_OK && fi->orphan && fi->refs == 0 && fi->nlink == 0 &&
		    fsck_fix_problem(ctx, PR_ORPHAN_PENDING,
		                     "inode %llu (%llu bytes) was unlinked while open: free it",
		                     (unsigned long long)ino, (unsigned long long)fi->size))
			ctx->need_library = true;
	}

	fsck_progress(ctx, 5, 0, 3);
	used_meta = bitmap_check(ctx, BM_META, sb->meta_bitmap_start, sb->meta_bitmap_blocks,
	                         sb->meta_len);
	fsck_progress(ctx, 5, 1, 3);
	used_ino = bitmap_check(ctx, BM_INODE, sb->inode_bitmap_start, sb->inode_bitmap_blocks,
	                        sb->nr_inodes);
	fsck_progress(ctx, 5, 2, 3);
	used_data = bitmap_check(ctx, BM_DATA, sb->data_bitmap_start, sb->data_bitmap_blocks,
	                         sb->data_len);
	fsck_progress(ctx, 5, 3, 3);
	ctx->blocks_used = used_data;
	ctx->inodes_used = used_ino;
	ctx->meta_used = used_meta;

	if ((sb->state & MFS_STATE_CLEAN) &&
	    (sb->free_blocks != sb->data_len - used_data ||
	     sb->free_inodes != sb->nr_inodes - used_ino ||
	     sb->free_meta != sb->meta_len - used_meta) &&
	    fsck_fix_problem(
	            ctx, PR_SB_COUNTERS,
	            "superblock: free counters (blocks %llu, inodes %llu, meta %llu) differ from "
	            "the bitmaps (%llu, %llu, %llu)",
	            (unsigned long long)sb->free_blocks, (unsigned long long)sb->free_inodes,
	            (unsigned long long)sb->free_meta,
	            (unsigned long long)(sb->data_len - used_data),
	            (unsigned long long)(sb->nr_inodes - used_ino),
	            (unsigned long long)(sb->meta_len - used_meta))) {
		sb->free_blocks = sb->data_len - used_data;
		sb->free_inodes = sb->nr_inodes - used_ino;
		sb->free_meta = sb->meta_len - used_meta;
		r = fsck_sb_write(ctx);
		if (r)
			fsck_fix_failed(ctx, PR_SB_COUNTERS, r);
	}
	return 0;
}
