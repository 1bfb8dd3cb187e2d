/* SPDX-License-Identifier: MIT */
/*
 * Pass 4: link counts (FORMAT.md §6.2, §13).  A directory has 2 + its
 * subdirectories; anything else has one link per entry naming it, counting
 * the /lost+found entry pass 3 decided to add.  Orphans (nlink 0, on the
 * orphan list, named by no entry) are left to orphan processing; an inode on
 * the orphan list that entries do name is taken off it.
 */
#include <stdlib.h>
#include <sys/stat.h>

#include "fsck.h"

int fsck_pass4_links(struct fsck_ctx *ctx)
{
	uint64_t nr = ctx->sb.nr_inodes, ino, lpf_subdirs = 0;

	for (ino = 1; ino <= nr; ino++)
		if (ctx->ino[ino].reconnect && S_ISDIR(ctx->ino[ino].mode))
			lpf_subdirs++;
	if (ctx->lpf)
		ctx->ino[ctx->lpf].subdirs += (uint32_t)lpf_subdirs;

	for (ino = 1; ino <= nr && !ctx->cancelled; ino++) {
		struct fsck_inode *fi = &ctx->ino[ino];
		uint64_t want;

		if (fi->state != IST_OK || fi->unattached)
			continue;
		if (fi->orphan && fi->refs == 0 && fi->nlink == 0)
			continue;
		if (S_ISDIR(fi->mode))
			want = 2 + (uint64_t)fi->subdirs;
		else
			want = (uint64_t)fi->refs + (fi->reconnect ? 1 : 0);
		if (want == 0)
			continue;                       /* not reached: pass 3 reported it */
		if (fi->orphan && !S_ISREG(fi->mode)) { /* regular: a truncate (pass 1) */
			if (fsck_fix_problem(
			            ctx, PR_ORPHAN_BAD,
			            "inode %llu is on the orphan list but has %llu link%s: take it "
			            "off the list",
			            (unsigned long long)ino, (unsigned long long)want,
			            want == 1 ? "" : "s"))
				ctx->need_library =
				        true; /* orphan processing drops linked inodes */
		}
		if (fi->nlink != want &&
		    fsck_fix_problem(ctx, PR_NLINK, "inode %llu: link count is %u, should be %llu",
		                     (unsigned long long)ino, fi->nlink,
		                     (unsigned long long)want)) {
			struct mfs_inode di;
			int r = fsck_inode_read(ctx, ino, &di);

			if (!r) {
				di.nlink = (uint32_t)want;
				if (di.nlink)
					di.iflags &= ~(fi->orphan ? 0u : MFS_IFL_ORPHAN);
				r = fsck_inode_write(ctx, ino, &di);
			}
			if (r)
				fsck_fix_failed(ctx, PR_NLINK, r);
			else
				fi->nlink = (uint32_t)want;
		}
	}
	fsck_progress(ctx, 4, 1, 1);
	return 0;
}
