/* SPDX-License-Identifier: MIT */
/*
 * Pass 3: connectivity (FORMAT.md §13).  The root must be a live directory
 * (recreated empty otherwise, F0301).  Everything is walked from the root
 * through the kept entries; a live inode nothing reaches is linked into
 * /lost+found as #INODE (F0302), except orphans (unlinked while open,
 * freed by orphan processing).  For an unreachable subtree only its top is
 * reconnected; a directory loop (directories reachable only from each other)
 * is broken by reconnecting one of its directories and dropping the entry
 * that closed the loop.  /lost+found is created when needed (F0303).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsck.h"

/* Mark everything under @top reachable (iterative, through keeper entries). */
static int mark_tree(struct fsck_ctx *ctx, uint64_t top)
{
	uint64_t *stack = NULL;
	size_t n = 0, cap = 0;

	ctx->ino[top].reachable = true;
	if (!S_ISDIR(ctx->ino[top].mode))
		return 0;
	if (VEC_PUSH(stack, n, cap, top))
		return -ENOMEM;
	while (n) {
		uint64_t dir = stack[--n];
		struct fsck_inode *fi = &ctx->ino[dir];

		for (uint64_t i = fi->dent_first; i < fi->dent_first + fi->dent_count; i++) {
			struct fsck_dirent *d = &ctx->dents[i];
			struct fsck_inode *t = &ctx->ino[d->ino];

			if (d->bad)
				continue;
			if (S_ISDIR(t->mode)) {
				if (!d->keeper || t->reachable)
					continue;
				t->reachable = true;
				if (VEC_PUSH(stack, n, cap, d->ino)) {
					free(stack);
					return -ENOMEM;
				}
			} else {
				t->reachable = true;
			}
		}
	}
	free(stack);
	return 0;
}

static int root_recreate(struct fsck_ctx *ctx)
{
	struct mfs_inode di;
	int64_t now = mfs_now_ns();
	int ret = fsck_inode_read(ctx, MFS_ROOT_INO, &di);
	uint64_t gen = ret ? 0 : di.generation;

	memset(&di, 0, sizeof(di));
	di.mode = S_IFDIR | 0755;
	di.nlink = 2;
	di.parent = MFS_ROOT_INO;
	di.atime_ns = di.mtime_ns = di.ctime_ns = di.btime_ns = now;
	di.generation = gen + 1;
	ret = fsck_inode_write(ctx, MFS_ROOT_INO, &di);
	if (ret)
		return ret;
	memset(&ctx->ino[MFS_ROOT_INO], 0, sizeof(ctx->ino[MFS_ROOT_INO]));
	ctx->ino[MFS_ROOT_INO].state = IST_OK;
	ctx->ino[MFS_ROOT_INO].mode = di.mode;
	ctx->ino[MFS_ROOT_INO].nlink = 2;
	ctx->ino[MFS_ROOT_INO].parent = MFS_ROOT_INO;
	ctx->ino[MFS_ROOT_INO].dent_first = ctx->ndents;
	ctx->dirs++;
	return 0;
}

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symlink";
	default:
		return "special file";
	}
}

int fsck_pass3_connect(struct fsck_ctx *ctx)
{
	struct fsck_inode *root = &ctx->ino[MFS_ROOT_INO];
	uint64_t nr = ctx->sb.nr_inodes, ino;
	int ret;

	if (root->state != IST_OK || !S_ISDIR(root->mode)) {
		if (root->state == IST_OK)
			ctx->files--; /* a non-directory at the root's number is dropped */
		if (fsck_fix_problem(ctx, PR_ROOT_BAD,
		                     "the root directory (inode 1) is %s: recreate it empty",
		                     root->state == IST_OK ? "not a directory"
		                                           : "missing or cleared")) {
			ret = root_recreate(ctx);
			if (ret) {
				fsck_fix_failed(ctx, PR_ROOT_BAD, ret);
				return 0; /* nothing is reachable: connectivity cannot be judged */
			}
		} else {
			return 0;
		}
	}
	ret = mark_tree(ctx, MFS_ROOT_INO);
	if (ret)
		return ret;

	/* /lost+found */
	ctx->lpf = 0;
	for (uint64_t i = root->dent_first; i < root->dent_first + root->dent_count; i++) {
		struct fsck_dirent *d = &ctx->dents[i];

		if (!d->bad && d->keeper && d->name_len == 10 &&
		    !memcmp(ctx->names + d->name_off, "lost+found", 10))
			ctx->lpf = d->ino;
	}

	for (ino = 1; ino <= nr && !ctx->cancelled; ino++) {
		struct fsck_inode *fi = &ctx->ino[ino];
		uint64_t top = ino, steps = 0;
		bool loop = false;

		if (fi->state != IST_OK || fi->reachable)
			continue;
		if (fi->orphan && fi->refs == 0 && fi->nlink == 0)
			continue; /* pass 5: freed by orphan processing */
		if (S_ISDIR(fi->mode)) {
			/* climb to the top of the unreachable subtree; a loop has none */
			while (ctx->ino[top].found_in && steps <= nr) {
				top = ctx->ino[top].found_in;
				steps++;
				if (top == ino) {
					loop = true;
					break;
				}
			}
			if (!loop && top != ino)
				continue; /* reconnected with its top */
		} else if (fi->refs) {
			continue; /* in an unreachable directory: reconnected with it */
		}
		if (fsck_fix_problem(
		            ctx, PR_UNREACHABLE,
		            "%s inode %llu (%llu bytes) is %s: link it into /lost+found as #%llu",
		            type_name(fi->mode), (unsigned long long)ino,
		            (unsigned long long)fi->size,
		            loop ? "in a directory loop" : "not in any directory",
		            (unsigned long long)ino)) {
			if (loop) {
				/* drop the entry that closes the loop (in found_in) */
				struct fsck_inode *p = &ctx->ino[fi->found_in];

				for (uint64_t i = p->dent_first; i < p->dent_first + p->dent_count;
				     i++)
					if (ctx->dents[i].ino == ino && ctx->dents[i].keeper) {
						ctx->dents[i].bad = true;
						ctx->dents[i].keeper = false;
					}
				p->subdirs--;
				fi->refs--;
				p->dir_rebuild = true;
				fi->found_in = 0;
			}
			fi->reconnect = true;
			ctx->need_lpf = true;
			ctx->need_library = true;
		} else {
			fi->unattached = true;
		}
		ret = mark_tree(ctx, ino);
		if (ret)
			return ret;
	}
	if (ctx->need_lpf && !ctx->lpf) {
		if (!fsck_fix_problem(ctx, PR_NO_LPF, "/lost+found does not exist: create it")) {
			/* nowhere to put them: they stay unattached */
			for (ino = 1; ino <= nr; ino++)
				if (ctx->ino[ino].reconnect) {
					ctx->ino[ino].reconnect = false;
					ctx->ino[ino].unattached = true;
				}
			ctx->need_lpf = false;
		}
	}
	/* the entry that names each inode in the tree, for paths (damage.c) */
	for (size_t i = 0; i < ctx->ndents; i++) {
		const struct fsck_dirent *d = &ctx->dents[i];
		struct fsck_inode *t = &ctx->ino[d->ino];

		if (d->bad || t->name_dent || !ctx->ino[d->dir].reachable)
			continue;
		if (S_ISDIR(t->mode) ? d->keeper : true)
			t->name_dent = i + 1;
	}
	fsck_queue_dir_rebuilds(ctx);
	fsck_progress(ctx, 3, 1, 1);
	return 0;
}
