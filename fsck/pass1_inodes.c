/* SPDX-License-Identifier: MIT */
/*
 * Pass 1: the inode table and everything hanging off inodes (FORMAT.md §6,
 * §7), in one linear scan of the table.
 *
 *  - Inode table blocks: both copies verified (twin repairs), nr_items 15; a
 *    block lost in both copies is recreated empty (its inodes cleared).
 *  - Inodes: type, flags (INLINE_DATA only for symlinks, nr_inline bounds),
 *    tree roots in the meta zone, fields that only directories have; an
 *    inode that cannot be trusted is cleared (F0105), a stray field reset.
 *  - Extent maps (inline or tree): inside the data zone, len >= 1, sorted and
 *    not overlapping in lblk, no block claimed twice (both owners named,
 *    F0109); `blocks` = the sum of the lengths (F0106).  Extents on poison
 *    become damaged ranges (damage.c) from the map alone.
 *  - Xattrs (inline records; tree entries and out-of-line values in
 *    pass1_xattr.c) and directory trees: every node checked by the walker,
 *    every entry parsed; directory entries are collected for passes 2-4.
 *  - The orphan tree (§10), once every inode is known.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"

struct ext_state {
	uint64_t ino, size;
	uint64_t next_lblk; /* extents must start at or after it */
	uint64_t blocks;    /* accepted */
	bool first;
};

/* An extent left in place though bad: its blocks stay used (never handed out twice). */
static void claim_unowned(struct fsck_ctx *ctx, uint64_t ino, const struct mfs_extent *e)
{
	uint64_t idx = e->pblk - ctx->sb.data_start;

	/* blocks claimed already keep their first owner (fsck_data_owner() finds it first) */
	fsck_data_claim(ctx, idx, e->len, ino);
}

#define CLONE_MAX (256ull << 20) /* bytes of shared data copied per round */

/*
 * The second owner of shared blocks gets a copy of their data (repair.c
 * writes it into new blocks once the extent is gone): nothing is lost from
 * either file.  Poisoned sectors read as zeros (a recovery read).
 */
static void clone_queue(struct fsck_ctx *ctx, struct ext_state *st, const struct mfs_extent *e)
{
	struct fsck_clone c = {.ino = st->ino, .off = e->lblk * MFS_BLOCK_SIZE};
	size_t total = 0;

	if ((e->flags & MFS_EXT_UNWRITTEN) || c.off >= st->size ||
	    !fsck_in_data_zone(ctx, e->pblk, e->len))
		return; /* reads as zeros either way */
	c.len = (uint64_t)e->len * MFS_BLOCK_SIZE;
	if (c.len > st->size - c.off)
		c.len = st->size - c.off;
	for (size_t i = 0; i < ctx->nclones; i++)
		total += ctx->clones[i].len;
	if (total + c.len > CLONE_MAX ||
	    posix_memalign((void **)&c.data, MFS_BLOCK_SIZE,
	                   (c.len + MFS_BLOCK_SIZE - 1) & ~(uint64_t)(MFS_BLOCK_SIZE - 1))) {
		fsck_log(ctx,
		         "inode %llu: too much shared data to copy: file bytes %llu-%llu become "
		         "a hole\n",
		         (unsigned long long)st->ino, (unsigned long long)c.off,
		         (unsigned long long)(c.off + c.len - 1));
		return;
	}
	if (blk_read(ctx->dev, e->pblk * MFS_SECTORS_PER_BLOCK, c.data,
	             (uint32_t)((c.len + MFS_BLOCK_SIZE - 1) & ~(uint64_t)(MFS_BLOCK_SIZE - 1)),
	             BLK_BIO_RECOVERY) ||
	    VEC_PUSH(ctx->clones, ctx->nclones, ctx->cap_clones, c)) {
		free(c.data);
		fsck_log(ctx,
		         "inode %llu: reading the shared blocks failed: file bytes %llu-%llu "
		         "become a hole\n",
		         (unsigned long long)st->ino, (unsigned long long)c.off,
		         (unsigned long long)(c.off + c.len - 1));
		return;
	}
	ctx->need_library = true;
}

/* Check one extent, claim its blocks.  Returns ENT_OK / ENT_DROP / ENT_BAD. */
static int ext_accept(struct fsck_ctx *ctx, struct ext_state *st, const struct mfs_extent *e,
                      uint64_t key, bool check_key)
{
	uint64_t ds = ctx->sb.data_start, i;

	if ((check_key && e->lblk != key) || e->len == 0 ||
	    !fsck_in_data_zone(ctx, e->pblk, e->len) || e->lblk + e->len < e->lblk ||
	    (e->flags & ~MFS_EXT_UNWRITTEN) || (!st->first && e->lblk < st->next_lblk)) {
		bool fix = fsck_fix_problem(
		        ctx, PR_EXTENT_BAD,
		        "inode %llu: extent lblk %llu -> block %llu, %u blocks, flags "
		        "%#x is invalid (outside the data zone [%llu, %llu), empty, "
		        "overlapping or out of order)",
		        (unsigned long long)st->ino, (unsigned long long)e->lblk,
		        (unsigned long long)e->pblk, e->len, e->flags, (unsigned long long)ds,
		        (unsigned long long)(ds + ctx->sb.data_len));
		if (!fix && fsck_in_data_zone(ctx, e->pblk, e->len))
			claim_unowned(ctx, st->ino, e);
		return fix ? ENT_DROP : ENT_BAD;
	}
	for (i = 0; i < e->len; i++) {
		uint64_t o = fsck_data_is_used(ctx, e->pblk - ds + i)
		                     ? fsck_data_owner(ctx, e->pblk - ds + i)
		                     : 0;

		if (o) {
			bool fix = fsck_fix_problem(
			        ctx, PR_EXTENT_DUP,
			        "inode %llu: extent lblk %llu -> blocks %llu-%llu: block "
			        "%llu is also claimed by %s %llu",
			        (unsigned long long)st->ino, (unsigned long long)e->lblk,
			        (unsigned long long)e->pblk,
			        (unsigned long long)(e->pblk + e->len - 1),
			        (unsigned long long)(e->pblk + i),
			        o == DOWN_QUARANTINE ? "the quarantine, entry at" : "inode",
			        (unsigned long long)(o == DOWN_QUARANTINE ? e->pblk + i : o));
			if (!fix)
				claim_unowned(ctx, st->ino, e);
			else
				clone_queue(ctx, st, e);
			return fix ? ENT_DROP : ENT_BAD;
		}
	}
	fsck_data_claim(ctx, e->pblk - ds, e->len, st->ino);
	st->blocks += e->len;
	st->next_lblk = e->lblk + e->len;
	st->first = false;
	if (!(e->flags & MFS_EXT_UNWRITTEN) &&
	    (ctx->npoison || (ctx->sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM)))
		fsck_damage_extent(ctx, st->ino, st->size, e->lblk, e->pblk, e->len);
	return ENT_OK;
}

/* An extent with the key it was found under (tree), gathered before any check. */
struct ext_col {
	struct mfs_extent e;
	uint64_t key;
};

struct ext_list {
	uint64_t ino;
	struct ext_col *v;
	size_t n, cap;
};

/* Extent tree entries are gathered first and checked in lblk order (check_extents). */
static int ext_tree_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val,
                       uint16_t len)
{
	struct ext_list *l = arg;
	struct ext_col c = {.key = key};

	if (len != sizeof(c.e)) {
		bool fix = fsck_fix_problem(
		        ctx, PR_EXTENT_BAD, "inode %llu: extent tree entry %llu has %u bytes (24)",
		        (unsigned long long)l->ino, (unsigned long long)key, len);
		return fix ? ENT_DROP : ENT_BAD;
	}
	memcpy(&c.e, val, sizeof(c.e));
	if (VEC_PUSH(l->v, l->n, l->cap, c))
		return ENT_BAD;
	return ENT_OK;
}

static int ext_col_cmp(const void *a, const void *b)
{
	const struct ext_col *x = a, *y = b;

	if (x->e.lblk != y->e.lblk)
		return x->e.lblk < y->e.lblk ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/*
 * Does extent @e reach past the largest file size (the core refuses such a
 * file: EUCLEAN)?  Returns true when the fix (cut the file there) was decided.
 */
static bool past_size_max(struct fsck_ctx *ctx, uint64_t ino, const struct mfs_extent *e)
{
	if (e->lblk < MFS_FILE_BLOCKS_MAX && e->len <= MFS_FILE_BLOCKS_MAX - e->lblk)
		return false;
	return fsck_fix_problem(ctx, PR_FILE_SIZE,
	                        "inode %llu: extent lblk %llu, %u blocks, ends past the largest "
	                        "file size (block %llu): cut it there",
	                        (unsigned long long)ino, (unsigned long long)e->lblk, e->len,
	                        (unsigned long long)MFS_FILE_BLOCKS_MAX);
}

/*
 * Check a file's extents in lblk order, whatever order the tree or the
 * inline array held them in.  Accepted extents stay in l->v (n updated).
 * Returns true when a fix was decided that changes the map (an extent
 * dropped, re-keyed or reordered).
 */
static bool check_extents(struct fsck_ctx *ctx, struct ext_state *st, struct ext_list *l, bool tree)
{
	size_t i, kept = 0;
	bool changed = false, sorted = true;

	for (i = 1; i < l->n; i++)
		if (ext_col_cmp(&l->v[i - 1], &l->v[i]) > 0)
			sorted = false;
	if (!sorted) {
		qsort(l->v, l->n, sizeof(*l->v), ext_col_cmp);
		if (!tree && fsck_fix_problem(ctx, PR_INODE_FIELD,
		                              "inode %llu: inline extents out of order: sort them",
		                              (unsigned long long)l->ino))
			changed = true;
	}
	for (i = 0; i < l->n; i++) {
		struct ext_col *c = &l->v[i];
		int r;

		if (tree && c->key != c->e.lblk &&
		    fsck_fix_problem(
		            ctx, PR_TREE_BAD,
		            "extent tree of inode %llu: key %llu holds the extent of lblk %llu: "
		            "key it by its extent",
		            (unsigned long long)l->ino, (unsigned long long)c->key,
		            (unsigned long long)c->e.lblk)) {
			c->key = c->e.lblk;
			changed = true;
		}
		if (past_size_max(ctx, l->ino, &c->e)) {
			changed = true;
			if (c->e.lblk >= MFS_FILE_BLOCKS_MAX)
				continue;
			c->e.len = (uint32_t)(MFS_FILE_BLOCKS_MAX - c->e.lblk);
		}
		r = ext_accept(ctx, st, &c->e, 0, false);
		if (r == ENT_DROP) {
			changed = true;
			continue;
		}
		l->v[kept++] = *c; /* ENT_BAD: left as it is */
	}
	l->n = kept;
	return changed;
}

static int dir_tree_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val,
                       uint16_t len)
{
	uint64_t dir = *(uint64_t *)arg;
	struct fsck_dirent d = {.dir = dir, .key = key};
	const char *why = NULL;
	unsigned nl;

	if (len < DIRENT_HDR + 1 || val[9] != len - DIRENT_HDR) {
		why = "malformed";
	} else {
		const uint8_t *name = val + DIRENT_HDR;

		nl = val[9];
		memcpy(&d.ino, val, 8);
		d.type = val[8];
		if (memchr(name, '/', nl) || memchr(name, 0, nl) || (nl == 1 && name[0] == '.') ||
		    (nl == 2 && name[0] == '.' && name[1] == '.'))
			why = "an invalid name";
		else if ((key & MFS_NAME_KEY_MASK) != fsck_name_key(ctx, name, nl))
			why = "a key that does not match its name";
		else if (d.ino == 0 || d.ino > ctx->sb.nr_inodes)
			why = "an inode number out of range";
		if (!why) {
			if (fsck_vec_grow((void **)&ctx->names, &ctx->names_cap,
			                  ctx->names_len + nl, 1) ||
			    VEC_PUSH(ctx->dents, ctx->ndents, ctx->cap_dents, d))
				return ENT_BAD;
			d.name_off = (uint32_t)ctx->names_len;
			d.name_len = (uint8_t)nl;
			ctx->dents[ctx->ndents - 1] = d;
			memcpy(ctx->names + ctx->names_len, name, nl);
			ctx->names_len += nl;
			return ENT_OK;
		}
	}
	if (fsck_fix_problem(ctx, PR_DIRENT_BAD,
	                     "directory inode %llu: entry %#llx has %s: remove it",
	                     (unsigned long long)dir, (unsigned long long)key, why)) {
		ctx->ino[dir].dir_rebuild = true;
		return ENT_DROP;
	}
	return ENT_BAD;
}

/* Why the inode cannot be trusted at all (it is cleared), or NULL. */
static const char *inode_unusable(const struct mfs_inode *di)
{
	uint32_t fl = di->iflags;

	if (!mfs_mode_type_valid(di->mode))
		return "invalid file type";
	if (fl & ~(MFS_IFL_EXTENT_TREE | MFS_IFL_INLINE_DATA | MFS_IFL_ORPHAN))
		return "unknown flags";
	if ((fl & MFS_IFL_INLINE_DATA) && (!S_ISLNK(di->mode) || di->nr_inline > MFS_INLINE_DATA ||
	                                   di->size != di->nr_inline || (fl & MFS_IFL_EXTENT_TREE)))
		return "inconsistent inline data";
	if (!(fl & (MFS_IFL_INLINE_DATA | MFS_IFL_EXTENT_TREE)) &&
	    di->nr_inline > MFS_INLINE_EXTENTS)
		return "too many inline extents";
	if (S_ISLNK(di->mode) && (di->size == 0 || di->size > MFS_SYMLINK_MAX))
		return "symlink target length out of range";
	/* a long target is in file block 0, which readlink reads as it is mapped inline */
	if (S_ISLNK(di->mode) && !(fl & (MFS_IFL_INLINE_DATA | MFS_IFL_EXTENT_TREE)) &&
	    (di->nr_inline == 0 || di->u.ext[0].lblk != 0 ||
	     (di->u.ext[0].flags & MFS_EXT_UNWRITTEN)))
		return "symlink target not in a written block 0";
	return NULL;
}

struct p1 {
	uint8_t *buf;
	bool dirty;
	uint64_t blk;
};

/* Fields that are reset without clearing the inode.  Returns true when @di changed. */
static bool inode_fields(struct fsck_ctx *ctx, uint64_t ino, struct mfs_inode *di)
{
	bool changed = false;

	if (S_ISDIR(di->mode) &&
	    ((di->iflags & MFS_IFL_EXTENT_TREE) || di->nr_inline || di->blocks || di->ext_root)) {
		if (fsck_fix_problem(ctx, PR_INODE_FIELD,
		                     "directory inode %llu has data blocks or extents: drop them",
		                     (unsigned long long)ino)) {
			di->iflags &= ~MFS_IFL_EXTENT_TREE;
			di->nr_inline = 0;
			di->blocks = 0;
			di->ext_root = 0;
			di->ext_depth = 0;
			memset(&di->u, 0, sizeof(di->u));
			changed = true;
		}
	}
	if (!S_ISDIR(di->mode) && (di->iflags & MFS_IFL_EXTENT_TREE) &&
	    (!di->ext_root || !fsck_in_meta_zone(ctx, di->ext_root))) {
		if (fsck_fix_problem(
		            ctx, PR_TREE_BAD,
		            "inode %llu: extent tree root %llu is outside the meta zone: drop the "
		            "tree (the file keeps its size, its data becomes a hole)",
		            (unsigned long long)ino, (unsigned long long)di->ext_root)) {
			di->iflags &= ~MFS_IFL_EXTENT_TREE;
			di->ext_root = 0;
			di->ext_depth = 0;
			di->nr_inline = 0;
			memset(&di->u, 0, sizeof(di->u));
			changed = true;
		}
	}
	if (!S_ISDIR(di->mode) && (di->dir_root || di->dir_entries || di->dir_depth)) {
		if (fsck_fix_problem(
		            ctx, PR_INODE_FIELD,
		            "inode %llu is not a directory but has a directory tree: drop it",
		            (unsigned long long)ino)) {
			di->dir_root = 0;
			di->dir_entries = 0;
			di->dir_depth = 0;
			changed = true;
		}
	}
	if (di->mode & ~(uint32_t)(S_IFMT | 07777)) {
		if (fsck_fix_problem(ctx, PR_INODE_FIELD,
		                     "inode %llu: mode %#o has unknown bits: clear them",
		                     (unsigned long long)ino, di->mode)) {
			di->mode &= S_IFMT | 07777;
			changed = true;
		}
	}
	if (S_ISREG(di->mode) && di->size > MFS_FILE_SIZE_MAX) {
		if (fsck_fix_problem(ctx, PR_FILE_SIZE,
		                     "inode %llu: size %llu is past the largest file size (%llu): "
		                     "lower it to that",
		                     (unsigned long long)ino, (unsigned long long)di->size,
		                     (unsigned long long)MFS_FILE_SIZE_MAX)) {
			di->size = MFS_FILE_SIZE_MAX;
			changed = true;
		}
	}
	if (S_ISDIR(di->mode) && (di->parent == 0 || di->parent > ctx->sb.nr_inodes)) {
		/* pass 2 sets the directory that holds its entry, pass 3 /lost+found */
		if (fsck_fix_problem(
		            ctx, PR_DIR_PARENT,
		            "directory inode %llu: parent %llu is out of range: set it to the root "
		            "for now",
		            (unsigned long long)ino, (unsigned long long)di->parent)) {
			di->parent = MFS_ROOT_INO;
			changed = true;
		}
	}
	if (!S_ISDIR(di->mode) && di->parent) {
		if (fsck_fix_problem(
		            ctx, PR_INODE_FIELD,
		            "inode %llu is not a directory but has a parent field (%llu): clear it",
		            (unsigned long long)ino, (unsigned long long)di->parent)) {
			di->parent = 0;
			changed = true;
		}
	}
	if (di->dir_root && !fsck_in_meta_zone(ctx, di->dir_root)) {
		if (fsck_fix_problem(
		            ctx, PR_TREE_BAD,
		            "directory inode %llu: tree root %llu is outside the meta zone: empty "
		            "the directory (its entries are lost; their inodes go to /lost+found)",
		            (unsigned long long)ino, (unsigned long long)di->dir_root)) {
			di->dir_root = 0;
			di->dir_depth = 0;
			changed = true;
		}
	}
	if (di->xattr_root && !fsck_in_meta_zone(ctx, di->xattr_root)) {
		if (fsck_fix_problem(
		            ctx, PR_XATTR_BAD,
		            "inode %llu: xattr tree root %llu is outside the meta zone: drop the "
		            "tree",
		            (unsigned long long)ino, (unsigned long long)di->xattr_root)) {
			di->xattr_root = 0;
			di->xattr_depth = 0;
			changed = true;
		}
	}
	/* inline xattrs: packed records inside inline_xattr_len bytes */
	{
		unsigned used = di->inline_xattr_len, off = 0;

		if (used > sizeof(di->inline_xattr))
			used = sizeof(di->inline_xattr) + 1; /* forces the error below */
		while (off < used && used <= sizeof(di->inline_xattr)) {
			const uint8_t *r = di->inline_xattr + off;
			unsigned len;

			if (used - off < XHDR)
				break;
			len = XHDR + r[0] + (unsigned)(r[2] | r[3] << 8);
			if (r[0] == 0 || r[1] != 0 || len > used - off || /* inline: no flags */
			    !fsck_xattr_name_ok(r + XHDR, r[0]))
				break;
			if (fsck_xattr_acl_bad(ctx, ino, di->mode, r + XHDR, r[0], r + XHDR + r[0],
			                       len - XHDR - r[0])) {
				/* remove the record: the ones after it move down */
				memmove(di->inline_xattr + off, r + len, used - off - len);
				used -= len;
				memset(di->inline_xattr + used, 0, sizeof(di->inline_xattr) - used);
				di->inline_xattr_len = (uint16_t)used;
				changed = true;
				continue;
			}
			off += len;
		}
		if (off != di->inline_xattr_len) {
			if (fsck_fix_problem(
			            ctx, PR_XATTR_BAD,
			            "inode %llu: inline xattrs malformed after byte %u of %u: "
			            "truncate them there",
			            (unsigned long long)ino, off, di->inline_xattr_len)) {
				memset(di->inline_xattr + off, 0, sizeof(di->inline_xattr) - off);
				di->inline_xattr_len = (uint16_t)off;
				changed = true;
			}
		}
	}
	/* a regular file with links on the orphan list is a truncate in progress (§10) */
	if ((di->iflags & MFS_IFL_ORPHAN) && di->nlink && !S_ISREG(di->mode)) {
		if (fsck_fix_problem(ctx, PR_ORPHAN_BAD,
		                     "inode %llu has the orphan flag but %u links: clear the flag",
		                     (unsigned long long)ino, di->nlink)) {
			di->iflags &= ~MFS_IFL_ORPHAN;
			changed = true;
		}
	}
	return changed;
}

static void check_inode(struct fsck_ctx *ctx, struct p1 *p, uint64_t ino, struct mfs_inode *di)
{
	struct fsck_inode *fi = &ctx->ino[ino];
	const char *why = inode_unusable(di);
	struct ext_state st = {.ino = ino, .size = di->size, .first = true};
	char what[96];
	int r;

	if (why) {
		if (fsck_fix_problem(ctx, PR_INODE_BAD,
		                     "inode %llu: %s (mode %#o, flags %#x): clear it",
		                     (unsigned long long)ino, why, di->mode, di->iflags)) {
			uint64_t gen = di->generation;

			memset(di, 0, sizeof(*di));
			di->generation = gen;
			p->dirty = true;
		}
		fi->state = IST_BAD;
		return;
	}
	if (inode_fields(ctx, ino, di))
		p->dirty = true;
	st.size = di->size;

	fi->state = IST_OK;
	fi->mode = di->mode;
	fi->nlink = di->nlink;
	fi->parent = di->parent;
	fi->size = di->size;
	fi->orphan_flag = (di->iflags & MFS_IFL_ORPHAN) != 0;
	if (S_ISDIR(di->mode))
		ctx->dirs++;
	else
		ctx->files++;

	/* the extent map */
	if (di->iflags & MFS_IFL_EXTENT_TREE) {
		struct ext_list l = {.ino = ino};
		bool changed;

		snprintf(what, sizeof(what), "extent tree of inode %llu", (unsigned long long)ino);
		r = fsck_bt_walk(ctx, di->ext_root, di->ext_depth, MFS_TREE_EXTENTS, ino,
		                 OWN_INODE(ino, 1), what, ext_tree_fn, &l, NULL);
		changed = check_extents(ctx, &st, &l, true);
		if (r == WALK_FIX || (r == WALK_OK && changed)) {
			struct fsck_rebuild keep = {.owner = ino, .kind = MFS_TREE_EXTENTS};
			size_t i;

			for (i = 0; i < l.n; i++)
				if (fsck_keep_ent(&keep, l.v[i].key, (const uint8_t *)&l.v[i].e,
				                  sizeof(l.v[i].e)))
					break;
			if (i == l.n)
				fsck_queue_rebuild(ctx, &keep);
			else
				fsck_rebuild_free(&keep);
			free(l.v);
			goto xattrs; /* blocks is set by the rebuild */
		}
		free(l.v);
		if (r != WALK_OK)
			goto xattrs;
	} else if (!(di->iflags & MFS_IFL_INLINE_DATA)) {
		struct ext_list l = {.ino = ino};
		unsigned i, n = di->nr_inline;

		for (i = 0; i < n; i++) {
			struct ext_col c = {.e = di->u.ext[i], .key = di->u.ext[i].lblk};

			if (VEC_PUSH(l.v, l.n, l.cap, c))
				break;
		}
		if (check_extents(ctx, &st, &l, false)) {
			memset(&di->u.ext, 0, sizeof(di->u.ext));
			for (i = 0; i < l.n; i++)
				di->u.ext[i] = l.v[i].e;
			di->nr_inline = (uint16_t)l.n;
			p->dirty = true;
		}
		free(l.v);
	}
	if (st.blocks != di->blocks &&
	    fsck_fix_problem(ctx, PR_INODE_BLOCKS,
	                     "inode %llu: blocks is %llu, the extents hold %llu",
	                     (unsigned long long)ino, (unsigned long long)di->blocks,
	                     (unsigned long long)st.blocks)) {
		di->blocks = st.blocks;
		p->dirty = true;
	}
xattrs:
	if (di->xattr_root) {
		struct fsck_rebuild keep = {0};

		snprintf(what, sizeof(what), "xattr tree of inode %llu", (unsigned long long)ino);
		r = fsck_bt_walk(ctx, di->xattr_root, di->xattr_depth, MFS_TREE_XATTR, ino,
		                 OWN_INODE(ino, 3), what, fsck_xattr_tree_fn, &ino, &keep);
		if (r == WALK_FIX)
			fsck_queue_rebuild(ctx, &keep);
		else
			fsck_rebuild_free(&keep);
	}
	fi->dir_entries = di->dir_entries;
	fi->dent_first = ctx->ndents;
	if (S_ISDIR(di->mode) && di->dir_root) {
		snprintf(what, sizeof(what), "directory tree of inode %llu",
		         (unsigned long long)ino);
		r = fsck_bt_walk(ctx, di->dir_root, di->dir_depth, MFS_TREE_DIR, ino,
		                 OWN_INODE(ino, 2), what, dir_tree_fn, &ino, NULL);
		if (r == WALK_FIX)
			fi->dir_rebuild = true;
	}
	fi->dent_count = ctx->ndents - fi->dent_first;
}

/* A fresh, empty inode table block (both copies of the old one were lost). */
static void itable_block_init(struct fsck_ctx *ctx, uint8_t *buf, uint64_t blk)
{
	struct mfs_meta_hdr *hdr = (void *)buf;

	memset(buf, 0, MFS_BLOCK_SIZE);
	hdr->magic = MFS_META_MAGIC;
	hdr->type = MFS_T_INODES;
	hdr->blocknr = blk;
	hdr->nr_items = MFS_INODES_PER_BLOCK;
	(void)ctx;
}

static int orphan_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val,
                     uint16_t len)
{
	(void)arg;
	(void)val;
	if (key == 0 || key > ctx->sb.nr_inodes || len != 0 || ctx->ino[key].state != IST_OK) {
		return fsck_fix_problem(
		               ctx, PR_ORPHAN_BAD, "orphan list: entry %llu names %s: remove it",
		               (unsigned long long)key,
		               key == 0 || key > ctx->sb.nr_inodes ? "no inode" : "a free inode")
		               ? ENT_DROP
		               : ENT_BAD;
	}
	ctx->ino[key].orphan = true;
	return ENT_OK;
}

/*
 * The orphan flag against the orphan list (FORMAT.md §10): a regular file with
 * links that is on the list is a truncate cut short, finished by orphan
 * processing (the library mount); a flag without an entry is cleared.
 */
static void orphan_states(struct fsck_ctx *ctx)
{
	for (uint64_t ino = 1; ino <= ctx->sb.nr_inodes; ino++) {
		struct fsck_inode *fi = &ctx->ino[ino];
		struct mfs_inode di;
		int r;

		if (fi->state != IST_OK)
			continue;
		if (fi->orphan && fi->nlink && S_ISREG(fi->mode)) {
			if (fsck_fix_problem(
			            ctx, PR_ORPHAN_TRUNCATE,
			            "inode %llu: a truncate to %llu bytes was cut short: free its "
			            "blocks past EOF",
			            (unsigned long long)ino, (unsigned long long)fi->size))
				ctx->need_library = true;
			continue;
		}
		if (!fi->orphan_flag || fi->orphan || !fi->nlink || !S_ISREG(fi->mode))
			continue;
		if (!fsck_fix_problem(
		            ctx, PR_ORPHAN_BAD,
		            "inode %llu has the orphan flag but is not on the orphan list: "
		            "clear the flag",
		            (unsigned long long)ino))
			continue;
		r = fsck_inode_read(ctx, ino, &di);
		if (!r) {
			di.iflags &= ~MFS_IFL_ORPHAN;
			r = fsck_inode_write(ctx, ino, &di);
		}
		if (r)
			fsck_fix_failed(ctx, PR_ORPHAN_BAD, r);
		else
			fi->orphan_flag = false;
	}
}

int fsck_pass1_inodes(struct fsck_ctx *ctx)
{
	uint64_t nblk = ctx->sb.inode_table_blocks, k, step = nblk / 100 + 1;
	struct p1 p = {0};
	int ret = 0, r;

	if (posix_memalign((void **)&p.buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	for (k = 0; k < ctx->sb.inode_table_blocks; k++)
		ctx->meta_owner[ctx->sb.inode_table_start - ctx->sb.meta_start + k] = OWN_FIXED;

	for (k = 0; k < nblk && !ctx->cancelled; k++) {
		uint64_t blk = ctx->sb.inode_table_start + k, first = k * MFS_INODES_PER_BLOCK + 1;
		struct mfs_meta_hdr *hdr = (void *)p.buf;
		char what[96];
		unsigned i;

		if (k % step == 0)
			fsck_progress(ctx, 1, k, nblk);
		p.dirty = false;
		p.blk = blk;
		snprintf(what, sizeof(what), "inode table block %llu (inodes %llu-%llu)",
		         (unsigned long long)k, (unsigned long long)first,
		         (unsigned long long)(first + MFS_INODES_PER_BLOCK - 1));
		r = fsck_meta_read(ctx, blk, MFS_T_INODES, p.buf, what);
		if (r) {
			if (fsck_fix_problem(
			            ctx, PR_META_LOST,
			            "%s (block %llu): both copies %s: recreate it empty, clearing "
			            "its inodes",
			            what, (unsigned long long)blk,
			            r == -EIO ? "unreadable or poisoned" : "corrupt")) {
				itable_block_init(ctx, p.buf, blk);
				r = fsck_meta_write(ctx, blk, p.buf);
				if (r)
					fsck_fix_failed(ctx, PR_META_LOST, r);
				if (k == 0)
					fsck_pass0_roots_store(ctx); /* the record lived here */
			}
			for (i = 0; i < MFS_INODES_PER_BLOCK; i++)
				ctx->ino[first + i].state = IST_BAD;
			continue;
		}
		if (hdr->nr_items != MFS_INODES_PER_BLOCK &&
		    fsck_fix_problem(ctx, PR_ITABLE_HDR, "%s: nr_items is %u, should be %u", what,
		                     hdr->nr_items, (unsigned)MFS_INODES_PER_BLOCK)) {
			hdr->nr_items = MFS_INODES_PER_BLOCK;
			p.dirty = true;
		}
		for (i = 0; i < MFS_INODES_PER_BLOCK; i++) {
			uint64_t ino = first + i;
			struct mfs_inode di;

			memcpy(&di, p.buf + sizeof(struct mfs_meta_hdr) + i * MFS_INODE_SIZE,
			       sizeof(di));
			if (di.mode == 0) {
				if (ino == MFS_ROOT_INO)
					ctx->ino[ino].state = IST_BAD; /* pass 3 recreates it */
				continue;
			}
			check_inode(ctx, &p, ino, &di);
			memcpy(p.buf + sizeof(struct mfs_meta_hdr) + i * MFS_INODE_SIZE, &di,
			       sizeof(di));
		}
		if (p.dirty && !ctx->read_only) {
			r = fsck_meta_write(ctx, blk, p.buf);
			if (r) {
				fsck_log(ctx, "%s: writing the fixed block failed: %s\n", what,
				         strerror(-r));
				ret = r;
			}
		}
	}
	fsck_progress(ctx, 1, nblk, nblk);

	/* the orphan tree, now that every inode is known */
	if (ctx->o_root) {
		struct fsck_rebuild keep = {0};

		r = fsck_bt_walk(ctx, ctx->o_root, ctx->o_depth, MFS_TREE_ORPHAN, 0, OWN_ORPHAN,
		                 "orphan tree", orphan_fn, NULL, &keep);
		if (r == WALK_FIX) {
			/* emptied now (the mount walks it), refilled from @keep by repair.c */
			ctx->o_root = 0;
			ctx->o_depth = 0;
			r = fsck_pass0_roots_store(ctx);
			if (r) {
				fsck_fix_failed(ctx, PR_ORPHAN_BAD, r);
				fsck_rebuild_free(&keep);
			} else {
				fsck_queue_rebuild(ctx, &keep);
			}
		} else {
			fsck_rebuild_free(&keep);
		}
	}
	orphan_states(ctx);
	free(p.buf);
	return ret;
}
