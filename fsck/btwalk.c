/* SPDX-License-Identifier: MIT */
/*
 * The checking B+tree walker (FORMAT.md §7): every node of a tree is read
 * once (both copies compared by fsck_meta_read), claimed in the meta zone
 * owner map (a block in two places is PR_META_DUP), and checked like
 * fs/core/btree_node.c's node_check: type and level, owner and kind, item counts, key
 * order, keys inside the parent's range, children in the meta zone, slot and
 * value bounds.  Entries of sound leaves go to the caller's callback.  A
 * damaged tree is rebuilt from its good entries (repair.c), never patched.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsck.h"

#define BT_HDR      ((unsigned)sizeof(struct mfs_meta_hdr))
#define BT_SLOT     ((unsigned)sizeof(struct mfs_bt_slot))
#define BT_LEAF_MAX ((MFS_BLOCK_SIZE - BT_HDR) / BT_SLOT)

struct walk {
	struct fsck_ctx *ctx;
	uint16_t kind;
	uint64_t owner, own;
	const char *what;
	fsck_ent_fn *fn;
	void *arg;
	struct fsck_rebuild *keep;
	bool bad, fix;
	uint8_t *bufs[MFS_BT_MAX_DEPTH + 1];
};

static void walk_problem(struct walk *w, bool fix)
{
	w->bad = true;
	w->fix = w->fix || fix;
}

const char *fsck_own_kind(uint64_t own)
{
	static const char *const k[] = {"xattr value", "extent tree", "directory", "xattr tree"};

	if (own == OWN_FIXED)
		return "fixed metadata";
	if (own == OWN_QUARANTINE)
		return "quarantine tree";
	if (own == OWN_ORPHAN)
		return "orphan tree";
	return k[own & 3];
}

static int slot_cmp(const void *a, const void *b)
{
	const struct mfs_bt_slot *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

static void walk_node(struct walk *w, uint64_t blk, unsigned level, bool has_lo, uint64_t lo,
                      bool has_hi, uint64_t hi, bool root)
{
	struct fsck_ctx *ctx = w->ctx;
	uint8_t *buf = w->bufs[level];
	const struct mfs_meta_hdr *hdr = (const void *)buf;
	uint16_t type = level ? MFS_T_BTREE_NODE : MFS_T_BTREE_LEAF;
	uint64_t idx;
	unsigned nr, i;
	int ret;

	if (!fsck_in_meta_zone(ctx, blk)) {
		walk_problem(w,
		             fsck_fix_problem(ctx, PR_TREE_BAD,
		                              "%s: a pointer to block %llu, outside the meta zone",
		                              w->what, (unsigned long long)blk));
		return;
	}
	idx = blk - ctx->sb.meta_start;
	if (ctx->meta_owner[idx] != OWN_NONE) {
		uint64_t o = ctx->meta_owner[idx];

		walk_problem(w,
		             fsck_fix_problem(ctx, PR_META_DUP,
		                              "%s: block %llu is also claimed by the %s of %s %llu",
		                              w->what, (unsigned long long)blk, fsck_own_kind(o),
		                              OWN_IS_INODE(o) ? "inode" : "owner",
		                              (unsigned long long)(OWN_IS_INODE(o) ? o >> 2 : 0)));
		return;
	}
	ctx->meta_owner[idx] = w->own;
	ret = fsck_meta_read(ctx, blk, type, buf, w->what);
	if (ret) {
		walk_problem(w, fsck_fix_problem(
		                        ctx, PR_META_LOST,
		                        "%s: %s block %llu (level %u) lost: both copies %s",
		                        w->what, level ? "node" : "leaf", (unsigned long long)blk,
		                        level, ret == -EIO ? "unreadable or poisoned" : "corrupt"));
		return;
	}
	nr = hdr->nr_items;
	if (hdr->level != level || hdr->owner != w->owner || hdr->tree != w->kind) {
		walk_problem(w,
		             fsck_fix_problem(
		                     ctx, PR_TREE_BAD,
		                     "%s: block %llu is level %u of tree %u owner %llu, expected "
		                     "level %u of tree %u owner %llu",
		                     w->what, (unsigned long long)blk, hdr->level, hdr->tree,
		                     (unsigned long long)hdr->owner, level, w->kind,
		                     (unsigned long long)w->owner));
		return;
	}
	if (level ? (nr == 0 || nr > MFS_BT_NODE_MAX) : (nr > BT_LEAF_MAX || (nr == 0 && !root))) {
		walk_problem(w, fsck_fix_problem(ctx, PR_TREE_BAD, "%s: block %llu holds %u items",
		                                 w->what, (unsigned long long)blk, nr));
		return;
	}
	if (level) {
		const struct mfs_bt_ptr *p = (const void *)(buf + BT_HDR);
		struct mfs_bt_ptr *ptrs = malloc(nr * sizeof(*ptrs));

		if (!ptrs) {
			walk_problem(w, false);
			return;
		}
		memcpy(ptrs, p, nr * sizeof(*ptrs));
		for (i = 0; i < nr; i++) {
			if ((i && ptrs[i].key <= ptrs[i - 1].key) ||
			    (i == 0 && has_lo && ptrs[0].key != lo) ||
			    (has_hi && ptrs[i].key >= hi)) {
				walk_problem(w,
				             fsck_fix_problem(
				                     ctx, PR_TREE_BAD,
				                     "%s: node %llu: key %u (%llu) out of order or "
				                     "outside the parent's range",
				                     w->what, (unsigned long long)blk, i,
				                     (unsigned long long)ptrs[i].key));
				free(ptrs);
				return;
			}
		}
		for (i = 0; i < nr && !ctx->cancelled; i++)
			walk_node(w, ptrs[i].child, level - 1, true, ptrs[i].key,
			          i + 1 < nr || has_hi, i + 1 < nr ? ptrs[i + 1].key : hi, false);
		free(ptrs);
		return;
	}

	/*
	 * A leaf.  A slot whose value lies out of bounds is dropped; keys out of
	 * order or outside the parent's range (or values overlapping) make the
	 * tree be rebuilt, but the entries themselves are salvaged: taken in key
	 * order (the first of equal keys), each still checked by the callback.
	 */
	{
		const struct mfs_bt_slot *s = (const void *)(buf + BT_HDR);
		unsigned slot_end = BT_HDR + nr * BT_SLOT, used = 0, n = 0;
		struct mfs_bt_slot *v = malloc((nr ? nr : 1) * sizeof(*v));
		bool disorder = false, dfix = false;

		if (!v) {
			walk_problem(w, false);
			return;
		}
		for (i = 0; i < nr; i++) {
			unsigned off = s[i].off, len = s[i].len;

			if (len > MFS_BT_MAX_VALUE || off + len > MFS_BLOCK_SIZE ||
			    (len && off < slot_end)) {
				walk_problem(
				        w,
				        fsck_fix_problem(
				                ctx, PR_TREE_BAD,
				                "%s: leaf %llu: slot %u (key %llu) has its value "
				                "at %u, %u bytes, out of bounds: drop it",
				                w->what, (unsigned long long)blk, i,
				                (unsigned long long)s[i].key, off, len));
				continue;
			}
			if ((n && s[i].key <= v[n - 1].key) ||
			    (n == 0 && has_lo && s[i].key != lo) || (has_hi && s[i].key >= hi))
				disorder = true;
			used += len;
			v[n++] = s[i];
		}
		if (slot_end + used > MFS_BLOCK_SIZE)
			disorder = true;
		if (disorder) {
			dfix = fsck_fix_problem(
			        ctx, PR_TREE_BAD,
			        "%s: leaf %llu: keys out of order or outside the parent's "
			        "range, or values overlapping: rebuild the tree from its "
			        "entries",
			        w->what, (unsigned long long)blk);
			walk_problem(w, dfix);
			qsort(v, n, sizeof(*v), slot_cmp);
		}
		for (i = 0; i < n; i++) {
			int r;

			if (i && v[i].key == v[i - 1].key) {
				walk_problem(
				        w,
				        true); /* reported above: the first of equal keys stays */
				continue;
			}
			r = w->fn ? w->fn(ctx, w->arg, v[i].key, buf + v[i].off, v[i].len) : ENT_OK;
			if (r == ENT_OK) {
				if (w->keep &&
				    fsck_keep_ent(w->keep, v[i].key, buf + v[i].off, v[i].len))
					walk_problem(w, false);
			} else {
				walk_problem(w, r == ENT_DROP);
			}
		}
		free(v);
	}
}

int fsck_bt_walk(struct fsck_ctx *ctx, uint64_t root, unsigned depth, uint16_t kind, uint64_t owner,
                 uint64_t own, const char *what, fsck_ent_fn *fn, void *arg,
                 struct fsck_rebuild *keep)
{
	struct walk w = {.ctx = ctx,
	                 .kind = kind,
	                 .owner = owner,
	                 .own = own,
	                 .what = what,
	                 .fn = fn,
	                 .arg = arg,
	                 .keep = keep};
	unsigned i;

	if (keep) {
		keep->owner = owner;
		keep->kind = kind;
	}
	if (!root)
		return WALK_OK;
	if (depth > MFS_BT_MAX_DEPTH) {
		walk_problem(&w, fsck_fix_problem(ctx, PR_TREE_BAD, "%s: depth %u (at most %u)",
		                                  what, depth, MFS_BT_MAX_DEPTH));
		goto out;
	}
	for (i = 0; i <= depth; i++)
		if (posix_memalign((void **)&w.bufs[i], MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
			walk_problem(&w, false);
			goto out;
		}
	walk_node(&w, root, depth, false, 0, false, 0, true);
out:
	for (i = 0; i <= MFS_BT_MAX_DEPTH; i++)
		free(w.bufs[i]);
	if (!w.bad)
		return WALK_OK;
	return w.fix ? WALK_FIX : WALK_BAD;
}

int fsck_keep_ent(struct fsck_rebuild *rb, uint64_t key, const uint8_t *val, uint16_t len)
{
	size_t cap = rb->n;
	struct fsck_ent e = {.key = key, .len = len};

	/* capacity doubles at powers of two */
	if (rb->n == 0 || (rb->n & (rb->n - 1)) == 0) {
		struct fsck_ent *v = realloc(rb->ents, (cap ? cap * 2 : 1) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		rb->ents = v;
	}
	e.val = malloc(len ? len : 1);
	if (!e.val)
		return -ENOMEM;
	memcpy(e.val, val, len);
	rb->ents[rb->n++] = e;
	return 0;
}

void fsck_rebuild_free(struct fsck_rebuild *rb)
{
	for (size_t i = 0; i < rb->n; i++)
		free(rb->ents[i].val);
	free(rb->ents);
	rb->ents = NULL;
	rb->n = 0;
}

void fsck_queue_rebuild(struct fsck_ctx *ctx, struct fsck_rebuild *rb)
{
	if (VEC_PUSH(ctx->rebuilds, ctx->nrebuilds, ctx->cap_rebuilds, *rb)) {
		fsck_rebuild_free(rb);
		fsck_fix_failed(ctx, PR_TREE_BAD, -ENOMEM);
		return;
	}
	ctx->need_library = true;
	memset(rb, 0, sizeof(*rb));
}
