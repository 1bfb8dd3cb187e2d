/* SPDX-License-Identifier: MIT */
/*
 * Pass 2: directory entries against the inodes they name (FORMAT.md §7.4,
 * §13).  Every entry collected in pass 1 must name a live inode (F0202) with
 * the inode's type (F0203); a directory has exactly one entry (the one in
 * its `parent`, else the first found) and the root none (F0204); any other
 * inode at most MFS_LINK_MAX (F0207).  Then per directory: `dir_entries`
 * equals the entries (F0206) and `parent` names the directory holding its
 * entry (F0205).  Directories whose trees lost entries
 * or need entries changed are rebuilt from their good entries (repair.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"

static uint8_t mode_dtype(uint32_t mode)
{
	return (uint8_t)((mode & S_IFMT) >> 12);
}

static const char *dname(struct fsck_ctx *ctx, const struct fsck_dirent *d, char *buf, size_t n)
{
	size_t l = d->name_len < n - 1 ? d->name_len : n - 1;

	memcpy(buf, ctx->names + d->name_off, l);
	buf[l] = '\0';
	return buf;
}

static int queue_dir_rebuild(struct fsck_ctx *ctx, uint64_t dir)
{
	struct fsck_inode *fi = &ctx->ino[dir];
	struct fsck_rebuild rb = {.owner = dir, .kind = MFS_TREE_DIR};
	uint8_t val[DIRENT_HDR + 255];

	for (uint64_t i = fi->dent_first; i < fi->dent_first + fi->dent_count; i++) {
		const struct fsck_dirent *d = &ctx->dents[i];

		if (d->bad)
			continue;
		memcpy(val, &d->ino, 8);
		val[8] = d->type;
		val[9] = d->name_len;
		memcpy(val + DIRENT_HDR, ctx->names + d->name_off, d->name_len);
		if (fsck_keep_ent(&rb, d->key, val, (uint16_t)(DIRENT_HDR + d->name_len))) {
			fsck_rebuild_free(&rb);
			return -ENOMEM;
		}
	}
	fsck_queue_rebuild(ctx, &rb);
	return 0;
}

int fsck_pass2_dirs(struct fsck_ctx *ctx)
{
	uint64_t nr = ctx->sb.nr_inodes, ino;
	char name[256];
	size_t i;

	/* entries naming free inodes; types; the entry in a directory's parent is its keeper */
	for (i = 0; i < ctx->ndents; i++) {
		struct fsck_dirent *d = &ctx->dents[i];
		struct fsck_inode *t = &ctx->ino[d->ino];

		if (t->state != IST_OK) {
			if (fsck_fix_problem(
			            ctx, PR_DIRENT_INO,
			            "directory inode %llu: entry '%s' names inode %llu, which "
			            "is %s: remove it",
			            (unsigned long long)d->dir, dname(ctx, d, name, sizeof(name)),
			            (unsigned long long)d->ino,
			            t->state == IST_FREE ? "free" : "cleared"))
				ctx->ino[d->dir].dir_rebuild = true;
			d->bad = true;
			continue;
		}
		if (d->type != mode_dtype(t->mode)) {
			if (fsck_fix_problem(
			            ctx, PR_DIRENT_TYPE,
			            "directory inode %llu: entry '%s' has type %u, inode %llu "
			            "is type %u",
			            (unsigned long long)d->dir, dname(ctx, d, name, sizeof(name)),
			            d->type, (unsigned long long)d->ino, mode_dtype(t->mode))) {
				d->type = mode_dtype(t->mode);
				ctx->ino[d->dir].dir_rebuild = true;
			}
		}
		if (S_ISDIR(t->mode) && d->ino != MFS_ROOT_INO && d->ino != d->dir &&
		    t->parent == d->dir && !t->found_in) {
			t->found_in = d->dir;
			d->keeper = true;
		}
	}
	/* directories with no entry in their parent: the first entry found keeps them */
	for (i = 0; i < ctx->ndents; i++) {
		struct fsck_dirent *d = &ctx->dents[i];
		struct fsck_inode *t = &ctx->ino[d->ino];

		if (d->bad || !S_ISDIR(t->mode) || d->keeper)
			continue;
		if (d->ino != MFS_ROOT_INO && d->ino != d->dir && !t->found_in) {
			t->found_in = d->dir;
			d->keeper = true;
			continue;
		}
		if (fsck_fix_problem(
		            ctx, PR_DIR_HARDLINK,
		            "directory inode %llu: entry '%s' names directory %llu, which %s: "
		            "remove it",
		            (unsigned long long)d->dir, dname(ctx, d, name, sizeof(name)),
		            (unsigned long long)d->ino,
		            d->ino == MFS_ROOT_INO ? "is the root"
		            : d->ino == d->dir     ? "is the directory itself"
		                                   : "already has an entry elsewhere"))
			ctx->ino[d->dir].dir_rebuild = true;
		d->bad = true;
	}
	/* counts; a non-directory keeps its first MFS_LINK_MAX entries (no more is valid) */
	for (i = 0; i < ctx->ndents; i++) {
		struct fsck_dirent *d = &ctx->dents[i];
		struct fsck_inode *t = &ctx->ino[d->ino];

		if (d->bad)
			continue;
		if (!S_ISDIR(t->mode) && t->refs >= MFS_LINK_MAX &&
		    fsck_fix_problem(
		            ctx, PR_LINK_MAX,
		            "directory inode %llu: entry '%s' is a link of inode %llu past "
		            "the most a file may have (%u): remove it",
		            (unsigned long long)d->dir, dname(ctx, d, name, sizeof(name)),
		            (unsigned long long)d->ino, MFS_LINK_MAX)) {
			ctx->ino[d->dir].dir_rebuild = true;
			d->bad = true;
			continue;
		}
		t->refs++;
		if (d->keeper)
			ctx->ino[d->dir].subdirs++;
	}

	for (ino = 1; ino <= nr && !ctx->cancelled; ino++) {
		struct fsck_inode *fi = &ctx->ino[ino];
		uint64_t good = 0, want_parent;

		if (fi->state != IST_OK || !S_ISDIR(fi->mode))
			continue;
		for (uint64_t j = fi->dent_first; j < fi->dent_first + fi->dent_count; j++)
			good += !ctx->dents[j].bad;
		if (fi->dir_rebuild) {
			/* queued at the end of pass 3 (which may drop more entries) */
		} else if (good != fi->dir_entries) {
			if (fsck_fix_problem(
			            ctx, PR_DIR_ENTRIES,
			            "directory inode %llu: dir_entries is %llu, it holds %llu",
			            (unsigned long long)ino, (unsigned long long)fi->dir_entries,
			            (unsigned long long)good)) {
				struct mfs_inode di;
				int r = fsck_inode_read(ctx, ino, &di);

				if (!r) {
					di.dir_entries = good;
					r = fsck_inode_write(ctx, ino, &di);
				}
				if (r)
					fsck_fix_failed(ctx, PR_DIR_ENTRIES, r);
			}
		}
		want_parent = ino == MFS_ROOT_INO ? MFS_ROOT_INO : fi->found_in;
		if (want_parent && fi->parent != want_parent) {
			if (fsck_fix_problem(
			            ctx, PR_DIR_PARENT,
			            "directory inode %llu: parent is %llu, its entry is in %llu",
			            (unsigned long long)ino, (unsigned long long)fi->parent,
			            (unsigned long long)want_parent)) {
				struct mfs_inode di;
				int r = fsck_inode_read(ctx, ino, &di);

				if (!r) {
					di.parent = want_parent;
					r = fsck_inode_write(ctx, ino, &di);
				}
				if (r)
					fsck_fix_failed(ctx, PR_DIR_PARENT, r);
				else
					fi->parent = want_parent;
			}
		}
	}
	fsck_progress(ctx, 2, 1, 1);
	return 0;
}

/* Queue a rebuild of every directory whose tree lost or changed entries. */
void fsck_queue_dir_rebuilds(struct fsck_ctx *ctx)
{
	for (uint64_t ino = 1; ino <= ctx->sb.nr_inodes; ino++)
		if (ctx->ino[ino].state == IST_OK && ctx->ino[ino].dir_rebuild &&
		    queue_dir_rebuild(ctx, ino))
			fsck_fix_failed(ctx, PR_DIRENT_BAD, -ENOMEM);
}
