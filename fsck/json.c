/* SPDX-License-Identifier: MIT */
/*
 * The --json output of fsck.mendfs (docs/man/fsck.mendfs.8, JSON): the report
 * object at the end of a run, or, when the run ends in an operational error,
 * a usage error or a cancel, the error object {"error", "exit_code",
 * "device"} and never a report.  fsck_fatal() is how such an end is told: it
 * prints the message and keeps it for the error object.  Strings go through
 * mfs_json.h: paths and the device are names (KEY_hex when not UTF-8),
 * messages are text.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fsck.h"
#include "mfs_json.h"

void fsck_fatal(struct fsck_ctx *ctx, const char *fmt, ...)
{
	char msg[sizeof(ctx->fatal)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mfs_progress_clear(&ctx->bar);
	fprintf(stderr, "fsck.mendfs: %s\n", msg);
	if (!ctx->fatal[0]) /* the first message says why the run ended */
		memcpy(ctx->fatal, msg, sizeof(msg));
}

int fsck_exit_error(struct fsck_ctx *ctx, int exit_code)
{
	struct json_object *extra = NULL;

	if (!ctx->json)
		return exit_code;
	if (ctx->device) {
		extra = json_object_new_object();
		if (extra && mfs_json_add_name(extra, "device", ctx->device)) {
			json_object_put(extra);
			extra = NULL;
		}
	}
	mfs_json_error(stdout, ctx->fatal[0] ? ctx->fatal : "the check failed", exit_code, extra);
	return exit_code;
}

/* [{path, ino, ranges: [{offset, length}]}] of ranges sorted by inode (NULL: ENOMEM). */
static struct json_object *files_json(struct fsck_ctx *ctx, const struct fsck_range *r, size_t n)
{
	struct json_object *arr = json_object_new_array();
	size_t i, j;

	for (i = 0; arr && i < n; i = j) {
		struct json_object *f = json_object_new_object(), *rs = json_object_new_array();
		char *path = fsck_path(ctx, r[i].ino);
		int ret = f && rs && path ? 0 : -ENOMEM;

		for (j = i; j < n && r[j].ino == r[i].ino; j++)
			if (!ret)
				ret = mfs_json_add_range(rs, r[j].off, r[j].len);
		if (!ret)
			ret = mfs_json_add_name(f, "path", path);
		if (!ret)
			ret = mfs_json_add_u64(f, "ino", r[i].ino);
		if (!ret) {
			ret = mfs_json_add(f, "ranges", rs);
			rs = NULL;
		}
		if (!ret && json_object_array_add(arr, f))
			ret = -ENOMEM;
		free(path);
		json_object_put(rs);
		if (ret) {
			json_object_put(f);
			json_object_put(arr);
			arr = NULL;
		}
	}
	return arr;
}

static struct json_object *lines_json(char **v, size_t n)
{
	struct json_object *arr = json_object_new_array();

	for (size_t i = 0; arr && i < n; i++) {
		struct json_object *s = mfs_json_text(v[i]);

		if (!s || json_object_array_add(arr, s)) {
			json_object_put(s);
			json_object_put(arr);
			arr = NULL;
		}
	}
	return arr;
}

static struct json_object *problems_json(struct fsck_ctx *ctx)
{
	struct json_object *arr = json_object_new_array();

	for (size_t i = 0; arr && i < ctx->nproblems; i++) {
		const struct fsck_problem *p = &ctx->problems[i];
		const struct fsck_pr_desc *pd = fsck_pr_desc(p->code);
		struct json_object *o = json_object_new_object();

		if (!o || mfs_json_add_text(o, "id", pd->id) ||
		    mfs_json_add_text(o, "code", pd->name) ||
		    mfs_json_add_u64(o, "round", p->round) ||
		    mfs_json_add_bool(o, "fixed", p->fixed) ||
		    mfs_json_add_text(o, "message", p->msg ? p->msg : "") ||
		    json_object_array_add(arr, o)) {
			json_object_put(o);
			json_object_put(arr);
			arr = NULL;
		}
	}
	return arr;
}

int fsck_json_report(struct fsck_ctx *ctx, unsigned meta_errors, unsigned damaged_files,
                     int exit_code)
{
	struct json_object *o = json_object_new_object();
	int ret = o ? 0 : -ENOMEM;

	if (!ret)
		ret = mfs_json_add_name(o, "device", ctx->device);
	if (!ret)
		ret = mfs_json_add(o, "damaged_files", files_json(ctx, ctx->damage, ctx->ndamage));
	if (!ret)
		ret = mfs_json_add_u64(o, "metadata_errors", meta_errors);
	if (!ret)
		ret = mfs_json_add_u64(o, "repaired", ctx->fixed_total);
	if (!ret)
		ret = mfs_json_add_u64(o, "remaining", ctx->round_unfixed);
	if (!ret)
		ret = mfs_json_add_int(o, "exit_code", exit_code);
	if (!ret)
		ret = mfs_json_add(o, "zeroed", files_json(ctx, ctx->zeroed, ctx->nzeroed));
	if (!ret)
		ret = mfs_json_add(o, "damaged_metadata",
		                   lines_json(ctx->meta_damage, ctx->nmeta_damage));
	if (!ret)
		ret = mfs_json_add(o, "damaged_free_space",
		                   lines_json(ctx->free_damage, ctx->nfree_damage));
	if (!ret)
		ret = mfs_json_add(o, "problems", problems_json(ctx));
	if (!ret)
		ret = mfs_json_add_u64(o, "files", ctx->files);
	if (!ret)
		ret = mfs_json_add_u64(o, "directories", ctx->dirs);
	if (!ret)
		ret = mfs_json_add_u64(o, "blocks_used", ctx->blocks_used);
	if (!ret)
		ret = mfs_json_add_u64(o, "blocks_total", ctx->sb.data_len);
	if (!ret)
		ret = mfs_json_add_u64(o, "meta_blocks_used", ctx->meta_used);
	if (!ret)
		ret = mfs_json_add_u64(o, "damaged_file_count", damaged_files);
	if (ret) {
		json_object_put(o);
		return ret;
	}
	return mfs_json_print(stdout, o);
}
