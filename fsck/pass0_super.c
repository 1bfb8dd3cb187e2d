/* SPDX-License-Identifier: MIT */
/*
 * Pass 0: the superblock and the journal (FORMAT.md §4, §8, §6.4).
 *
 *  - Both superblock copies are read; the valid newest one is used
 *    (mfs_super_read, the mount's rule: the other checksummed copy when the
 *    newest fails validation) and the other is rewritten when it is bad or
 *    differs (F0001/F0002).
 *  - The journal: committed transactions are replayed (F0004) with the fs
 *    library's replay; with -n nothing is written and fsck says that
 *    replay is needed (the rest of the check then sees the pre-replay state).
 *  - The roots record in the first inode table block (§6.4): its quarantine
 *    and orphan roots override the superblock's; roots outside the meta zone
 *    are emptied (F0005).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsck.h"

/*
 * The copy mfs_super_read() chose (the newest checksummed one) failed its
 * validation: a checksummed copy that passes, if any, is used instead (the
 * bad one is rewritten by F0001).  Returns 0 or the first error.
 */
static int sb_fallback(struct fsck_ctx *ctx, bool *force_ro, bool *other_bad, char *msg, size_t len)
{
	struct mfs_superblock *copy;
	uint64_t where[2] = {0, ctx->dev_blocks - 1};
	int ret = -EINVAL;

	if (ctx->dev_blocks < 8 || posix_memalign((void **)&copy, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -EINVAL;
	for (int i = 0; i < 2; i++) {
		char m[256];

		if (fsck_poisoned(ctx, where[i], 1) ||
		    blk_read(ctx->dev, where[i] * MFS_SECTORS_PER_BLOCK, copy, MFS_BLOCK_SIZE, 0) ||
		    copy->magic != MFS_SB_MAGIC ||
		    mfs_block_verify(copy, copy->csum_seed, MFS_T_SUPER, 0) ||
		    mfs_super_validate(copy, ctx->dev_blocks, force_ro, m, sizeof(m)))
			continue;
		memcpy(&ctx->sb, copy, sizeof(*copy));
		*other_bad = true;
		fsck_log(ctx, "superblock: the newest copy is invalid (%s); using the %s copy\n",
		         msg, i ? "backup" : "primary");
		ret = 0;
		break;
	}
	free(copy);
	(void)len;
	return ret;
}

static const char *copy_state(struct fsck_ctx *ctx, uint64_t blk, struct mfs_superblock *buf)
{
	if (fsck_poisoned(ctx, blk, 1))
		return "poisoned";
	if (blk_read(ctx->dev, blk * SPB, buf, MFS_BLOCK_SIZE, 0))
		return "unreadable";
	if (buf->magic != MFS_SB_MAGIC)
		return "not a superblock (no magic)";
	if (mfs_block_verify(buf, buf->csum_seed, MFS_T_SUPER, 0))
		return "corrupt (checksum or header)";
	return NULL;
}

static int ovl_add(void *arg, uint64_t blocknr, const void *img)
{
	struct fsck_ctx *ctx = arg;
	struct fsck_ovl o = {.blk = blocknr, .seq = ctx->novl};

	o.img = malloc(MFS_BLOCK_SIZE);
	if (!o.img)
		return -ENOMEM;
	memcpy(o.img, img, MFS_BLOCK_SIZE);
	if (VEC_PUSH(ctx->ovl, ctx->novl, ctx->cap_ovl, o)) {
		free(o.img);
		return -ENOMEM;
	}
	return 0;
}

static int ovl_cmp(const void *a, const void *b)
{
	const struct fsck_ovl *x = a, *y = b;

	if (x->blk != y->blk)
		return x->blk < y->blk ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void fsck_ovl_free(struct fsck_ctx *ctx)
{
	for (size_t i = 0; i < ctx->novl; i++)
		free(ctx->ovl[i].img);
	free(ctx->ovl);
	ctx->ovl = NULL;
	ctx->novl = ctx->cap_ovl = 0;
}

/* -n: the committed transactions, applied in memory only (the last image of a block wins). */
static void ovl_build(struct fsck_ctx *ctx)
{
	size_t i, n = 0;
	int ret;

	fsck_ovl_free(ctx);
	ret = mfs_journal_scan(ctx->dev, &ctx->sb, ovl_add, ctx);
	if (ret < 0) {
		fsck_log(ctx, "journal: reading it for an in-memory replay failed: %s\n",
		         strerror(-ret));
		fsck_ovl_free(ctx);
		return;
	}
	if (!ctx->novl)
		return; /* nothing committed (and no array: qsort may not be given NULL) */
	qsort(ctx->ovl, ctx->novl, sizeof(*ctx->ovl), ovl_cmp);
	for (i = 0; i < ctx->novl; i++) {
		if (i + 1 < ctx->novl && ctx->ovl[i + 1].blk == ctx->ovl[i].blk) {
			free(ctx->ovl[i].img);
			continue;
		}
		ctx->ovl[n++] = ctx->ovl[i];
	}
	ctx->novl = n;
}

int fsck_pass0_super(struct fsck_ctx *ctx)
{
	struct mfs_superblock *copy = NULL;
	bool force_ro = false, other_bad = false;
	char msg[512] = "";
	int ret, n;

	ret = mfs_super_read(ctx->dev, &ctx->sb, &force_ro, &other_bad, msg, sizeof(msg));
	if (ret && ret != -ENOMEM && ret != -EOPNOTSUPP)
		ret = sb_fallback(ctx, &force_ro, &other_bad, msg, sizeof(msg));
	if (ret) {
		fsck_fatal(ctx, "%s: %s", ctx->device, msg[0] ? msg : strerror(-ret));
		return FSCK_ERROR;
	}
	ctx->seed = ctx->sb.csum_seed;
	ctx->dup = ctx->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	if (force_ro && !ctx->read_only) {
		fsck_fatal(ctx,
		           "%s: unknown read-only-compatible features %#x: only -n is possible",
		           ctx->device, ctx->sb.feature_ro_compat & ~MFS_FEATURE_RO_COMPAT_SUPP);
		return FSCK_ERROR;
	}
	fsck_progress(ctx, 0, 0, 1);

	if (other_bad) {
		const char *s0, *s1;

		if (posix_memalign((void **)&copy, MFS_BLOCK_SIZE, 2 * MFS_BLOCK_SIZE))
			return FSCK_ERROR;
		s0 = copy_state(ctx, 0, &copy[0]);
		s1 = copy_state(ctx, ctx->dev_blocks - 1, &copy[1]);
		/* mfs_super_read() or sb_fallback() took the other copy: this one is
		 * checksummed but invalid */
		if (!s0 && !s1) {
			char m[256];
			bool r;

			if (mfs_super_validate(&copy[0], ctx->dev_blocks, &r, m, sizeof(m)))
				s0 = "invalid (geometry, version or features)";
			else if (mfs_super_validate(&copy[1], ctx->dev_blocks, &r, m, sizeof(m)))
				s1 = "invalid (geometry, version or features)";
		}
		if (s0 || s1) {
			if (fsck_fix_problem(
			            ctx, PR_SB_COPY_BAD,
			            "superblock: %s copy (block %llu) is %s; the %s copy is valid",
			            s0 ? "primary" : "backup",
			            (unsigned long long)(s0 ? 0 : ctx->dev_blocks - 1),
			            s0 ? s0 : s1, s0 ? "backup" : "primary")) {
				ret = fsck_sb_write(ctx);
				if (ret)
					fsck_fix_failed(ctx, PR_SB_COPY_BAD, ret);
			}
		} else if (fsck_fix_problem(
		                   ctx, PR_SB_COPIES_DIFFER,
		                   "superblock: the primary and backup copies differ (written at "
		                   "%lld and %lld ns)",
		                   (long long)copy[0].write_time_ns,
		                   (long long)copy[1].write_time_ns)) {
			ret = fsck_sb_write(ctx);
			if (ret)
				fsck_fix_failed(ctx, PR_SB_COPIES_DIFFER, ret);
		}
		free(copy);
	}

	n = mfs_journal_replay(ctx->dev, &ctx->sb, true, msg, sizeof(msg));
	if (n < 0) {
		/* the chain is broken before any committed transaction: nothing to apply */
		fsck_log(ctx, "journal: %s\n", msg[0] ? msg : strerror(-n));
	} else if (n > 0) {
		ctx->replay_pending = true;
		if (fsck_fix_problem(ctx, PR_JOURNAL_REPLAY,
		                     "journal: %d committed transaction%s not yet in place%s", n,
		                     n == 1 ? "" : "s",
		                     ctx->read_only ? " (the check below replays them in memory)"
		                                    : "")) {
			msg[0] = '\0';
			n = mfs_journal_replay(ctx->dev, &ctx->sb, false, msg, sizeof(msg));
			ctx->replay_pending = n < 0;
			if (n < 0) {
				fsck_log(ctx, "journal replay: %s\n", msg[0] ? msg : strerror(-n));
				fsck_fix_failed(ctx, PR_JOURNAL_REPLAY, n);
			}
		}
		if (ctx->replay_pending)
			ovl_build(ctx);
	}
	return 0;
}

/* The roots record (FORMAT.md §6.4): where the quarantine and orphan trees are. */
int fsck_pass0_roots(struct fsck_ctx *ctx)
{
	struct mfs_roots_rec *rec;
	uint8_t *buf;
	bool dirty = false;
	int ret;

	ctx->q_root = ctx->sb.quarantine_root;
	ctx->q_depth = ctx->sb.quarantine_depth;
	ctx->o_root = ctx->sb.orphan_root;
	ctx->o_depth = ctx->sb.orphan_depth;
	ctx->roots_rec = false;
	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	ret = fsck_meta_read(ctx, ctx->sb.inode_table_start, MFS_T_INODES, buf, NULL);
	if (ret) {
		/* pass 1 reports and recreates the block; the superblock's roots stand */
		free(buf);
		return 0;
	}
	rec = (struct mfs_roots_rec *)(buf + MFS_ROOTS_OFF);
	if (rec->magic == MFS_ROOTS_MAGIC) {
		ctx->roots_rec = true;
		ctx->q_root = rec->quarantine_root;
		ctx->q_depth = rec->quarantine_depth;
		ctx->o_root = rec->orphan_root;
		ctx->o_depth = rec->orphan_depth;
	}
	for (unsigned i = 0; i < 2; i++) {
		uint64_t *root = i ? &ctx->o_root : &ctx->q_root;
		uint32_t *depth = i ? &ctx->o_depth : &ctx->q_depth;

		if (*root && !fsck_in_meta_zone(ctx, *root) &&
		    fsck_fix_problem(ctx, PR_ROOTS_BAD,
		                     "%s tree root %llu is outside the meta zone: empty it",
		                     i ? "orphan" : "quarantine", (unsigned long long)*root)) {
			*root = 0;
			*depth = 0;
			dirty = true;
		}
	}
	if (dirty) {
		ret = fsck_pass0_roots_store(ctx);
		if (ret)
			fsck_fix_failed(ctx, PR_ROOTS_BAD, ret);
	}
	free(buf);
	return 0;
}

/* Write ctx's roots to the record and the superblock (both copies of each). */
int fsck_pass0_roots_store(struct fsck_ctx *ctx)
{
	struct mfs_roots_rec *rec;
	uint8_t *buf;
	int ret;

	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	ret = fsck_meta_read(ctx, ctx->sb.inode_table_start, MFS_T_INODES, buf, NULL);
	if (!ret) {
		rec = (struct mfs_roots_rec *)(buf + MFS_ROOTS_OFF);
		rec->magic = MFS_ROOTS_MAGIC;
		rec->quarantine_root = ctx->q_root;
		rec->quarantine_depth = ctx->q_depth;
		rec->orphan_root = ctx->o_root;
		rec->orphan_depth = ctx->o_depth;
		rec->__pad0 = rec->__pad1 = 0;
		ret = fsck_meta_write(ctx, ctx->sb.inode_table_start, buf);
	}
	free(buf);
	if (ret)
		return ret;
	ctx->roots_rec = true;
	ctx->sb.quarantine_root = ctx->q_root;
	ctx->sb.quarantine_depth = ctx->q_depth;
	ctx->sb.orphan_root = ctx->o_root;
	ctx->sb.orphan_depth = ctx->o_depth;
	return fsck_sb_write(ctx);
}
