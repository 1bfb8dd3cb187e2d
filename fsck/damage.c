/* SPDX-License-Identifier: MIT */
/*
 * The damage report: every poisoned sector mapped to its owner from metadata
 * alone (the engine's poison table against the extent maps and the layout),
 * never by reading poisoned media.
 *
 *  - file data: the exact byte ranges of the file (clipped to its size),
 *    with data_csum also its sectors failing their checksum (the data is
 *    read for that: csum_extent; poisoned sectors never are), named by path from the root or <inode
 * N> (F0601; only --zero-damaged with -y changes them: zero-init in place, poison cleared, the loss
 *    recorded in the file's trusted.mendfs.lost xattr);
 *  - metadata: the structure and whether its twin is intact (the lines come
 *    from fsck_meta_read, which also repairs from the twin); a block of an
 *    out-of-line xattr value also names its file, by path;
 *  - the journal: rewritten from its twin once replay no longer needs it
 *    (F0006);
 *  - free space: quarantined (pass 5), or free metadata blocks, which the
 *    allocator never hands out while poisoned.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fsck.h"
#include "mfs_json.h"

/*
 * data_csum: the sectors of the extent's blocks (inside the file's size) that
 * fail their checksum, read from the media (poisoned sectors are left to the
 * poison table), as damaged ranges.  A table block that cannot be read is
 * reported by fsck_meta_read; its blocks are not checked.
 */
static void csum_extent(struct fsck_ctx *ctx, uint64_t ino, uint64_t size, uint64_t lblk,
                        uint64_t pblk, uint64_t len)
{
	_Alignas(MFS_BLOCK_SIZE) uint8_t blk[MFS_BLOCK_SIZE];

	if (!ctx->csum_tbuf &&
	    posix_memalign((void **)&ctx->csum_tbuf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return;
	for (uint64_t k = 0; k < len && (lblk + k) * MFS_BLOCK_SIZE < size; k++) {
		uint64_t b = pblk + k, i = b - ctx->sb.data_start;
		uint64_t tblk = ctx->sb.csum_table_start + i / MFS_CSUM_BLOCKS_PER_TBLOCK;
		const uint32_t *v;

		if (b < ctx->sb.data_start || i >= ctx->sb.data_len)
			return;
		if (ctx->csum_tblk != tblk) {
			ctx->csum_tblk = 0;
			if (fsck_meta_read(ctx, tblk, MFS_T_DATA_CSUM, ctx->csum_tbuf,
			                   "data checksum table"))
				continue;
			ctx->csum_tblk = tblk;
		}
		v = (const uint32_t *)(ctx->csum_tbuf + sizeof(struct mfs_meta_hdr) +
		                       (i % MFS_CSUM_BLOCKS_PER_TBLOCK) * MFS_CSUM_ENTRY_SIZE);
		if (blk_read(ctx->dev, b * SPB, blk, MFS_BLOCK_SIZE, BLK_BIO_RECOVERY))
			continue;
		for (unsigned s = 0; s < SPB; s++) {
			struct fsck_range r = {.ino = ino};
			unsigned p = fsck_poison_after(ctx, b * SPB + s);

			if ((uint32_t)XXH3_64bits_withSeed(blk + s * BLK_SECTOR_SIZE,
			                                   BLK_SECTOR_SIZE, ctx->seed) == v[s])
				continue;
			if (p < ctx->npoison && ctx->poison[p].sector <= b * SPB + s)
				continue; /* poisoned: reported from the table */
			r.off = (lblk + k) * MFS_BLOCK_SIZE + s * BLK_SECTOR_SIZE;
			if (r.off >= size)
				break;
			r.len = size - r.off < BLK_SECTOR_SIZE ? size - r.off : BLK_SECTOR_SIZE;
			if (VEC_PUSH(ctx->damage, ctx->ndamage, ctx->cap_damage, r))
				return;
			ctx->ncsum_damage++;
		}
	}
}

void fsck_damage_extent(struct fsck_ctx *ctx, uint64_t ino, uint64_t size, uint64_t lblk,
                        uint64_t pblk, uint64_t len)
{
	uint64_t s = pblk * SPB, e = (pblk + len) * SPB;
	unsigned lo;

	if (ctx->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM)
		csum_extent(ctx, ino, size, lblk, pblk, len);

	for (lo = fsck_poison_after(ctx, s); lo < ctx->npoison && ctx->poison[lo].sector < e;
	     lo++) {
		uint64_t ps = ctx->poison[lo].sector, pe = ps + ctx->poison[lo].nr;
		struct fsck_range r = {.ino = ino};

		if (ps < s)
			ps = s;
		if (pe > e)
			pe = e;
		r.off = lblk * MFS_BLOCK_SIZE + (ps - s) * BLK_SECTOR_SIZE;
		r.len = (pe - ps) * BLK_SECTOR_SIZE;
		if (r.off >= size) {
			/* past the end of the file: no data there, but say where the poison is */
			char *line = NULL;

			if (asprintf(&line,
			             "inode %llu: sectors %llu-%llu poisoned in its blocks past "
			             "the end of the file (no data lost)",
			             (unsigned long long)ino, (unsigned long long)ps,
			             (unsigned long long)(pe - 1)) >= 0 &&
			    VEC_PUSH(ctx->free_damage, ctx->nfree_damage, ctx->cap_free_damage,
			             line))
				free(line);
			continue;
		}
		if (r.len > size - r.off)
			r.len = size - r.off;
		if (VEC_PUSH(ctx->damage, ctx->ndamage, ctx->cap_damage, r))
			return;
	}
}

static int range_cmp(const void *a, const void *b)
{
	const struct fsck_range *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* The entry naming @ino in a reachable directory (its keeper for directories). */
static const struct fsck_dirent *entry_of(struct fsck_ctx *ctx, uint64_t ino)
{
	uint64_t i = ctx->ino[ino].name_dent;

	return i ? &ctx->dents[i - 1] : NULL;
}

char *fsck_path(struct fsck_ctx *ctx, uint64_t ino)
{
	struct fsck_inode *fi = &ctx->ino[ino];
	size_t cap = 4096, pos = cap - 1;
	char *buf, *out = NULL;
	uint64_t cur = ino, steps = 0;

	if (ino == MFS_ROOT_INO)
		return strdup("/");
	buf = malloc(cap);
	if (!buf)
		return NULL;
	buf[pos] = '\0';
	if (!fi->reachable || fi->unattached || fi->reconnect)
		goto unreachable;
	while (cur != MFS_ROOT_INO) {
		const struct fsck_dirent *d = entry_of(ctx, cur);

		if (!d || ++steps > ctx->sb.nr_inodes || pos < (size_t)d->name_len + 2)
			goto unreachable;
		pos -= d->name_len;
		memcpy(buf + pos, ctx->names + d->name_off, d->name_len);
		buf[--pos] = '/';
		cur = d->dir;
	}
	out = strdup(buf + pos);
	free(buf);
	return out;
unreachable:
	free(buf);
	if (asprintf(&out, "<inode %llu>", (unsigned long long)ino) < 0)
		out = NULL;
	return out;
}

char *fsck_path_shown(struct fsck_ctx *ctx, uint64_t ino)
{
	char *path = fsck_path(ctx, ino), *shown = path ? mfs_name_escape(path) : NULL;

	free(path);
	return shown;
}

/* "  @what@line\n" with @line escaped: a line of the report names files. */
static void report_line(FILE *out, const char *what, const char *line)
{
	char *shown = mfs_name_escape(line);

	fprintf(out, "  %s%s\n", what, shown ? shown : "?");
	free(shown);
}

static void add_meta_line(struct fsck_ctx *ctx, char *line)
{
	if (!line)
		return;
	if (VEC_PUSH(ctx->meta_damage, ctx->nmeta_damage, ctx->cap_meta_damage, line))
		free(line);
}

/* The journal, the superblocks and free meta zone blocks on poison. */
static void scan_layout(struct fsck_ctx *ctx, bool replay_pending)
{
	const struct mfs_superblock *sb = &ctx->sb;
	uint64_t last = ctx->dev_blocks - 1;
	uint8_t *buf = NULL;

	for (unsigned p = 0; p < ctx->npoison; p++) {
		uint64_t b0 = ctx->poison[p].sector / SPB;
		uint64_t b1 = (ctx->poison[p].sector + ctx->poison[p].nr + SPB - 1) / SPB;

		for (uint64_t b = b0; b < b1 && b <= last; b++) {
			char *line = NULL;
			bool twin_area = false;
			uint64_t off;

			if (b == 0 || b == last) {
				if (asprintf(&line,
				             "superblock %s copy (block %llu) poisoned; the other "
				             "copy %s",
				             b ? "backup" : "primary", (unsigned long long)b,
				             fsck_poisoned(ctx, b ? 0 : last, 1) ? "is poisoned too"
				                                                 : "is intact") < 0)
					line = NULL;
				add_meta_line(ctx, line);
				continue;
			}
			if ((b >= sb->journal_start && b - sb->journal_start < sb->journal_len) ||
			    (ctx->dup && b >= sb->journal_twin &&
			     b - sb->journal_twin < sb->journal_len)) {
				bool primary = b >= sb->journal_start &&
				               b - sb->journal_start < sb->journal_len;
				uint64_t pb, tb;
				bool other_ok;

				off = primary ? b - sb->journal_start : b - sb->journal_twin;
				pb = sb->journal_start + off;
				tb = ctx->dup ? sb->journal_twin + off : 0;
				other_ok = ctx->dup && !fsck_poisoned(ctx, primary ? tb : pb, 1);
				if (asprintf(
				            &line,
				            "journal block %llu: %s copy (block %llu) poisoned; %s",
				            (unsigned long long)off, primary ? "primary" : "twin",
				            (unsigned long long)b,
				            !ctx->dup  ? "no twin"
				            : other_ok ? "the other copy is intact"
				                       : "the other copy is poisoned too") < 0)
					line = NULL;
				add_meta_line(ctx, line);
				if (replay_pending)
					continue;
				if (fsck_fix_problem(ctx, PR_JOURNAL_POISON,
				                     "journal block %llu (block %llu) is poisoned: "
				                     "rewrite it",
				                     (unsigned long long)off,
				                     (unsigned long long)b)) {
					int r = 0;

					if (!buf && posix_memalign((void **)&buf, MFS_BLOCK_SIZE,
					                           MFS_BLOCK_SIZE))
						r = -ENOMEM;
					if (!r) {
						memset(buf, 0, MFS_BLOCK_SIZE);
						/* the twin's content when it is clean, zeros
						 * otherwise */
						if (other_ok)
							r = blk_read(ctx->dev,
							             (primary ? tb : pb) * SPB, buf,
							             MFS_BLOCK_SIZE, 0);
						if (r)
							memset(buf, 0, MFS_BLOCK_SIZE);
						r = blk_write(ctx->dev, b * SPB, buf,
						              MFS_BLOCK_SIZE, 0);
					}
					if (r)
						fsck_fix_failed(ctx, PR_JOURNAL_POISON, r);
				}
				continue;
			}
			if (fsck_in_meta_zone(ctx, b) ||
			    (ctx->dup && b >= sb->meta_twin && b - sb->meta_twin < sb->meta_len)) {
				twin_area = !fsck_in_meta_zone(ctx, b);
				off = twin_area ? b - sb->meta_twin : b - sb->meta_start;
				if (ctx->meta_owner[off] != OWN_NONE)
					continue; /* reported by the read that met it */
				if (asprintf(
				            &line,
				            "free space: metadata block %llu (%s copy, block %llu) "
				            "poisoned: not allocated while poisoned",
				            (unsigned long long)(sb->meta_start + off),
				            twin_area ? "twin" : "primary",
				            (unsigned long long)b) < 0)
					line = NULL;
				if (line && VEC_PUSH(ctx->free_damage, ctx->nfree_damage,
				                     ctx->cap_free_damage, line))
					free(line);
			}
			/* data zone: files (fsck_damage_extent) and free space (pass 5) */
		}
	}
	free(buf);
}

int fsck_damage_scan(struct fsck_ctx *ctx, bool replay_pending)
{
	size_t i, j, n = 0;

	scan_layout(ctx, replay_pending);
	/* xattr value blocks: the file they belong to, by path (known now, after pass 3) */
	for (i = 0; i < ctx->nxdamage; i++) {
		char *path = fsck_path(ctx, ctx->xdamage[i].ino), *line = NULL;
		char **old = &ctx->meta_damage[ctx->xdamage[i].off];

		if (path && asprintf(&line, "%s: %s", path, *old) >= 0) {
			free(*old);
			*old = line;
		}
		free(path);
	}
	if (!ctx->ndamage)
		return 0;
	qsort(ctx->damage, ctx->ndamage, sizeof(*ctx->damage), range_cmp);
	/* merge touching ranges of a file */
	for (i = 0; i < ctx->ndamage; i++) {
		if (n && ctx->damage[n - 1].ino == ctx->damage[i].ino &&
		    ctx->damage[n - 1].off + ctx->damage[n - 1].len >= ctx->damage[i].off) {
			uint64_t end = ctx->damage[i].off + ctx->damage[i].len;

			if (end > ctx->damage[n - 1].off + ctx->damage[n - 1].len)
				ctx->damage[n - 1].len = end - ctx->damage[n - 1].off;
			continue;
		}
		ctx->damage[n++] = ctx->damage[i];
	}
	ctx->ndamage = n;

	for (i = 0; i < ctx->ndamage; i = j) {
		uint64_t ino = ctx->damage[i].ino, bytes = 0;
		char *path = fsck_path(ctx, ino);

		for (j = i; j < ctx->ndamage && ctx->damage[j].ino == ino; j++)
			bytes += ctx->damage[j].len;
		ctx->ino[ino].damaged = true;
		if (fsck_fix_problem(
		            ctx, PR_DAMAGED_DATA,
		            "%s (inode %llu): %zu damaged range%s, %llu bytes of file data on "
		            "poisoned media%s",
		            path ? path : "?", (unsigned long long)ino, j - i,
		            j - i == 1 ? "" : "s", (unsigned long long)bytes,
		            ctx->ncsum_damage ? " or failing its data checksum" : "")) {
			for (size_t k = i; k < j; k++) {
				struct fsck_range z = ctx->damage[k];

				/* whole sectors: the clipped tail sector is zeroed entirely */
				z.len = (z.len + BLK_SECTOR_SIZE - 1) &
				        ~(uint64_t)(BLK_SECTOR_SIZE - 1);
				if (VEC_PUSH(ctx->zero, ctx->nzero, ctx->cap_zero, z)) {
					fsck_fix_failed(ctx, PR_DAMAGED_DATA, -ENOMEM);
					break;
				}
			}
			ctx->need_library = true;
		}
		free(path);
	}
	return 0;
}

void fsck_damage_report(struct fsck_ctx *ctx, FILE *out)
{
	size_t i;

	if (!ctx->ndamage && !ctx->nmeta_damage && !ctx->nfree_damage)
		return;
	fprintf(out, "Damage report (%u poisoned range%s", ctx->npoison,
	        ctx->npoison == 1 ? "" : "s");
	if (ctx->ncsum_damage)
		fprintf(out, ", %zu sector%s failing the data checksum", ctx->ncsum_damage,
		        ctx->ncsum_damage == 1 ? "" : "s");
	fputs("):\n", out);
	for (i = 0; i < ctx->ndamage; i++) {
		const struct fsck_range *r = &ctx->damage[i];
		char *path = fsck_path_shown(ctx, r->ino);

		fprintf(out, "  %s: bytes %llu-%llu (%llu bytes) damaged\n", path ? path : "?",
		        (unsigned long long)r->off, (unsigned long long)(r->off + r->len - 1),
		        (unsigned long long)r->len);
		free(path);
	}
	for (i = 0; i < ctx->nmeta_damage; i++)
		report_line(out, "metadata: ", ctx->meta_damage[i]);
	for (i = 0; i < ctx->nfree_damage; i++)
		report_line(out, "", ctx->free_damage[i]);
}
