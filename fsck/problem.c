/* SPDX-License-Identifier: MIT */
/*
 * The problem table: every inconsistency fsck.mendfs knows, with a stable id
 * (F<pass><nn>, listed in docs/man/fsck.mendfs.8), whether -p may fix it
 * without asking, and what the fix does.  fsck_fix_problem() is the one place
 * where -n, -p, -y (or an interactive answer) decide whether a fix is made.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsck.h"
#include "mfs_json.h"

static const struct fsck_pr_desc pr_table[PR_MAX] = {
        /* pass 0: superblock and journal */
        [PR_SB_COPY_BAD] = {PR_SB_COPY_BAD, "F0001", "PR_SB_COPY_BAD", PRF_PREEN,
                            "rewrite the bad superblock copy from the valid one"},
        [PR_SB_COPIES_DIFFER] = {PR_SB_COPIES_DIFFER, "F0002", "PR_SB_COPIES_DIFFER", PRF_PREEN,
                                 "rewrite both copies from the newest valid one"},
        [PR_SB_ERROR_STATE] = {PR_SB_ERROR_STATE, "F0003", "PR_SB_ERROR_STATE", PRF_PREEN,
                               "clear the error state (only when nothing is left unfixed)"},
        [PR_JOURNAL_REPLAY] = {PR_JOURNAL_REPLAY, "F0004", "PR_JOURNAL_REPLAY",
                               PRF_PREEN | PRF_LATENT, "replay the committed transactions"},
        [PR_ROOTS_BAD] =
                {PR_ROOTS_BAD, "F0005", "PR_ROOTS_BAD", 0,
                 "empty the broken tree root in the roots record and superblock; its good entries "
                 "are reinserted"},
        [PR_JOURNAL_POISON] = {PR_JOURNAL_POISON, "F0006", "PR_JOURNAL_POISON", PRF_PREEN,
                               "rewrite the poisoned journal block from its twin (zeros when "
                               "replay does not need "
                               "it)"},
        /* pass 1: metadata blocks and inodes */
        [PR_META_COPY_BAD] = {PR_META_COPY_BAD, "F0101", "PR_META_COPY_BAD", PRF_PREEN,
                              "rewrite the bad copy from its intact twin"},
        [PR_META_LOST] =
                {PR_META_LOST, "F0102", "PR_META_LOST", 0,
                 "drop the block from its structure (tree rebuilt from what is readable, inodes of "
                 "a lost inode table block cleared, bitmaps rebuilt)"},
        [PR_META_DUP] = {PR_META_DUP, "F0103", "PR_META_DUP", 0,
                         "drop the second reference: that tree is rebuilt from its other blocks"},
        [PR_ITABLE_HDR] = {PR_ITABLE_HDR, "F0104", "PR_ITABLE_HDR", PRF_PREEN,
                           "set the item count to 15"},
        [PR_INODE_BAD] = {PR_INODE_BAD, "F0105", "PR_INODE_BAD", 0,
                          "clear the inode (its entries are removed, its blocks freed)"},
        [PR_INODE_BLOCKS] = {PR_INODE_BLOCKS, "F0106", "PR_INODE_BLOCKS", PRF_PREEN,
                             "set the block count to the sum of the extent lengths"},
        [PR_INODE_FIELD] = {PR_INODE_FIELD, "F0107", "PR_INODE_FIELD", PRF_PREEN,
                            "reset the field to its consistent value"},
        [PR_EXTENT_BAD] = {PR_EXTENT_BAD, "F0108", "PR_EXTENT_BAD", 0,
                           "remove the extent from the file"},
        [PR_EXTENT_DUP] =
                {PR_EXTENT_DUP, "F0109", "PR_EXTENT_DUP", 0,
                 "copy the shared data into new blocks of the second owner (the first keeps the "
                 "originals)"},
        [PR_TREE_BAD] = {PR_TREE_BAD, "F0110", "PR_TREE_BAD", 0,
                         "rebuild the tree from its readable entries"},
        [PR_XATTR_BAD] = {PR_XATTR_BAD, "F0111", "PR_XATTR_BAD", 0,
                          "remove the malformed xattr(s)"},
        [PR_XATTR_VALUE] = {PR_XATTR_VALUE, "F0112", "PR_XATTR_VALUE", 0,
                            "remove the xattr; its blocks that nothing else uses are freed"},
        [PR_FILE_SIZE] = {PR_FILE_SIZE, "F0113", "PR_FILE_SIZE", 0,
                          "cut the file at the largest file size (1 PiB): an extent reaching "
                          "past it is shortened (removed if it starts there), the size lowered"},
        [PR_ACL_BAD] = {PR_ACL_BAD, "F0114", "PR_ACL_BAD", 0,
                        "remove the ACL xattr (the mode alone then decides access; not under -p: "
                        "that can give the owning group more than its ACL entry did)"},
        /* pass 2: directory entries */
        [PR_DIRENT_BAD] = {PR_DIRENT_BAD, "F0201", "PR_DIRENT_BAD", 0, "remove the entry"},
        [PR_DIRENT_INO] = {PR_DIRENT_INO, "F0202", "PR_DIRENT_INO", 0, "remove the entry"},
        [PR_DIRENT_TYPE] = {PR_DIRENT_TYPE, "F0203", "PR_DIRENT_TYPE", PRF_PREEN,
                            "rewrite the entry with the inode's type"},
        [PR_DIR_HARDLINK] = {PR_DIR_HARDLINK, "F0204", "PR_DIR_HARDLINK", 0,
                             "remove the extra entry"},
        [PR_DIR_PARENT] = {PR_DIR_PARENT, "F0205", "PR_DIR_PARENT", PRF_PREEN,
                           "set the parent to the directory holding its entry"},
        [PR_DIR_ENTRIES] = {PR_DIR_ENTRIES, "F0206", "PR_DIR_ENTRIES", PRF_PREEN,
                            "set the count to the entries found"},
        [PR_LINK_MAX] = {PR_LINK_MAX, "F0207", "PR_LINK_MAX", 0,
                         "remove the entries past the 65000th (the inode keeps its other names)"},
        /* pass 3: connectivity */
        [PR_ROOT_BAD] = {PR_ROOT_BAD, "F0301", "PR_ROOT_BAD", 0,
                         "recreate an empty root directory (everything else goes to /lost+found)"},
        [PR_UNREACHABLE] = {PR_UNREACHABLE, "F0302", "PR_UNREACHABLE", 0,
                            "link it into /lost+found as #INODE"},
        [PR_NO_LPF] = {PR_NO_LPF, "F0303", "PR_NO_LPF", 0, "create /lost+found"},
        /* pass 4: link counts */
        [PR_NLINK] = {PR_NLINK, "F0401", "PR_NLINK", PRF_PREEN,
                      "set the link count to the entries found"},
        /* pass 5: space */
        [PR_BITMAP_HDR] = {PR_BITMAP_HDR, "F0501", "PR_BITMAP_HDR", PRF_PREEN,
                           "rewrite the bitmap block's item count and padding bits"},
        [PR_BITMAP_DIFF] = {PR_BITMAP_DIFF, "F0502", "PR_BITMAP_DIFF", PRF_PREEN,
                            "rewrite the bitmap from the structures that use blocks and inodes"},
        [PR_SB_COUNTERS] = {PR_SB_COUNTERS, "F0503", "PR_SB_COUNTERS", PRF_PREEN,
                            "set the free counters to the bitmap recount"},
        [PR_QUAR_BAD] = {PR_QUAR_BAD, "F0504", "PR_QUAR_BAD", 0,
                         "remove the entry from the quarantine"},
        [PR_QUAR_CLEAN] = {PR_QUAR_CLEAN, "F0505", "PR_QUAR_CLEAN", PRF_PREEN,
                           "release the entry's clean blocks to the free space"},
        [PR_QUAR_MISSING] = {PR_QUAR_MISSING, "F0506", "PR_QUAR_MISSING", PRF_PREEN,
                             "add the poisoned free blocks to the quarantine (used in the bitmap)"},
        [PR_ORPHAN_BAD] = {PR_ORPHAN_BAD, "F0507", "PR_ORPHAN_BAD", PRF_PREEN,
                           "remove the orphan entry (and the inode's orphan flag)"},
        [PR_ORPHAN_PENDING] = {PR_ORPHAN_PENDING, "F0508", "PR_ORPHAN_PENDING",
                               PRF_PREEN | PRF_LATENT,
                               "free the inode (unlinked while open before an unclean unmount)"},
        [PR_ORPHAN_TRUNCATE] =
                {PR_ORPHAN_TRUNCATE, "F0509", "PR_ORPHAN_TRUNCATE", PRF_PREEN | PRF_LATENT,
                 "finish the truncate: free the blocks past EOF (orphan processing)"},
        /* pass 6: damage */
        [PR_DAMAGED_DATA] = {PR_DAMAGED_DATA, "F0601", "PR_DAMAGED_DATA", PRF_NOFIX | PRF_DATA,
                             "only with --zero-damaged (and -y): zero-init the range in place, "
                             "clear its poison "
                             "and record it in the file's trusted.mendfs.lost xattr"},
};

const struct fsck_pr_desc *fsck_pr_desc(enum pr_code code)
{
	return &pr_table[code];
}

static FILE *msg_out(struct fsck_ctx *ctx)
{
	return ctx->json ? stderr : stdout;
}

void fsck_log(struct fsck_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	mfs_progress_clear(&ctx->bar);
	va_start(ap, fmt);
	vfprintf(msg_out(ctx), fmt, ap);
	va_end(ap);
}

static bool ask(struct fsck_ctx *ctx)
{
	char line[64];

	for (;;) {
		fprintf(stderr, "Fix<y>/no/all? ");
		fflush(stderr);
		if (!fgets(line, sizeof(line), stdin)) {
			ctx->cancelled = true;
			ctx->mode = MODE_NO;
			return false;
		}
		if (line[0] == '\n' || line[0] == 'y' || line[0] == 'Y')
			return true;
		if (line[0] == 'n' || line[0] == 'N')
			return false;
		if (line[0] == 'a' || line[0] == 'A') {
			ctx->mode = MODE_YES;
			return true;
		}
	}
}

bool fsck_fix_problem(struct fsck_ctx *ctx, enum pr_code code, const char *fmt, ...)
{
	const struct fsck_pr_desc *pd = &pr_table[code];
	struct fsck_problem p = {.code = code, .round = ctx->round};
	const char *answer;
	bool fix;
	va_list ap;
	char *msg = NULL, *shown;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	/* the report line shows names escaped (ls -b); JSON and the record keep them exact */
	shown = msg ? mfs_name_escape(msg) : NULL;

	if (pd->flags & PRF_NOFIX) {
		fix = ctx->zero_damaged && ctx->mode == MODE_YES;
		answer = fix ? "zeroed" : "left (see --zero-damaged)";
	} else if (ctx->read_only || ctx->mode == MODE_NO) {
		fix = false;
		answer = "no";
	} else if (ctx->mode == MODE_PREEN) {
		fix = !ctx->preen_stopped && (pd->flags & PRF_PREEN);
		if (!fix && !ctx->preen_stopped)
			ctx->preen_stopped = true;
		answer = fix ? "fixed" : "UNEXPECTED INCONSISTENCY: run fsck.mendfs manually (-y)";
	} else if (ctx->mode == MODE_YES) {
		fix = true;
		answer = "yes";
	} else {
		fsck_log(ctx, "%s: %s\n", pd->id, shown ? shown : pd->name);
		fix = ask(ctx);
		answer = fix ? "yes" : "no";
	}
	if (ctx->mode != MODE_ASK || (pd->flags & PRF_NOFIX) || ctx->read_only)
		fsck_log(ctx, "%s: %s  %s%s\n", pd->id, shown ? shown : pd->name,
		         (pd->flags & PRF_NOFIX) ? "" : "Fix? ", answer);
	free(shown);
	if (fix) {
		ctx->round_fixes++;
	} else {
		ctx->round_unfixed++;
		if (!(pd->flags & (PRF_NOFIX | PRF_LATENT)))
			ctx->declined++;
	}
	p.fixed = fix;
	p.msg = msg;
	if (VEC_PUSH(ctx->problems, ctx->nproblems, ctx->cap_problems, p))
		free(msg);
	return fix;
}

void fsck_fix_failed(struct fsck_ctx *ctx, enum pr_code code, int err)
{
	fsck_log(ctx, "%s: the fix failed: %s\n", pr_table[code].id,
	         strerror(err < 0 ? -err : err));
	if (ctx->round_fixes)
		ctx->round_fixes--;
	ctx->round_unfixed++;
	for (size_t i = ctx->nproblems; i-- > 0;)
		if (ctx->problems[i].code == code && ctx->problems[i].fixed) {
			ctx->problems[i].fixed = false;
			break;
		}
}

volatile sig_atomic_t fsck_cancel;

void fsck_progress(struct fsck_ctx *ctx, int pass, uint64_t cur, uint64_t max)
{
	if (fsck_cancel)
		ctx->cancelled = true;
	/* where each pass starts, in tenths of a percent of the whole check (as e2fsck weighs them)
	 */
	static const unsigned start[] = {0, 20, 700, 800, 850, 900, 1000};

	if (ctx->progress_fd < 0)
		return;
	if (ctx->progress_fd == 0) {
		if (pass >= 0 && pass <= 5 && max)
			mfs_progress_update(&ctx->bar,
			                    start[pass] * 1000ull +
			                            (start[pass + 1] - start[pass]) * 1000ull *
			                                    (cur < max ? cur : max) / max,
			                    1000000);
		return;
	}
	dprintf(ctx->progress_fd, "%d %llu %llu %s\n", pass, (unsigned long long)cur,
	        (unsigned long long)max, ctx->device);
}

int fsck_vec_grow(void **v, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *nv;

	if (n <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < n)
		ncap *= 2;
	nv = realloc(*v, ncap * size);
	if (!nv)
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}
