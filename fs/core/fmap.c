/* SPDX-License-Identifier: MIT */
/*
 * The block map of a file (docs/FORMAT.md §6.2, §6.3): lookups, changes, and
 * the freeing of mapped blocks, in bounded steps or all at once.  It sits
 * below the inode cache (which frees an evicted inode's blocks through it)
 * and calls only the inode table (mfs_inode_write), the B+tree, the
 * allocator, the roots record and the journal.
 *
 * Up to MFS_INLINE_EXTENTS extents live in the inode (di.u.ext[0 ..
 * nr_inline), sorted by lblk); the fifth converts the map to an extent
 * B+tree (MFS_TREE_EXTENTS, key lblk, value struct mfs_extent, root
 * di.ext_root/ext_depth, flag MFS_IFL_EXTENT_TREE).  A tree whose root leaf
 * is back to at most four extents after a punch returns inline.  Adjacent
 * extents (contiguous in lblk and pblk, same flags) are merged.  Everything
 * goes through five primitives (map_find_le, map_find_ge, map_insert,
 * map_update, map_delete) and the range operations built on them:
 * mfs_fmap_punch (unmap a range), mfs_fmap_add (map an empty range, merging
 * with its neighbours) and free_unit/mfs_fmap_free (unmap and free a range).
 *
 * Bounded transactions (docs/design/core.md §3).  Nothing here builds a
 * transaction that grows with the file: truncate, punch hole and the final
 * free of an inode (mfs_fmap_free) run in handles opened with
 * mfs_txn_begin_step, each doing units of known worst-case cost while
 * mfs_txn_room allows, each a consistent file.
 *
 * Locking: the caller holds ip->lock, shared for mfs_bmap, exclusive for
 * the rest; mfs_fmap_free and mfs_file_free_all open their own handles (the
 * caller holds none).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmap.h"

#define EXT_MAX_LEN (1u << 30) /* blocks in one extent */
/* blocks freed by one unit of a bounded free: at most 5 data bitmap blocks change */
#define PIECE_BLOCKS (4u * (unsigned)MFS_BITMAP_BITS)
#define GOAL_SPREAD  256u /* first-block goals are multiples of this (1 MiB) */

static struct mfs_btree ext_tree(const struct mfs_ino *ip)
{
	struct mfs_btree bt = {.root = le64toh(ip->di.ext_root),
	                       .depth = le16toh(ip->di.ext_depth),
	                       .kind = MFS_TREE_EXTENTS,
	                       .owner = ip->ino};
	return bt;
}

static void ext_tree_store(struct mfs_ino *ip, const struct mfs_btree *bt)
{
	ip->di.ext_root = htole64(bt->root);
	ip->di.ext_depth = htole16(bt->depth);
}

static void fx_load(struct mfs_fx *x, const struct mfs_extent *e)
{
	x->lblk = le64toh(e->lblk);
	x->pblk = le64toh(e->pblk);
	x->len = le32toh(e->len);
	x->flags = le32toh(e->flags);
}

static void fx_store(struct mfs_extent *e, const struct mfs_fx *x)
{
	e->lblk = htole64(x->lblk);
	e->pblk = htole64(x->pblk);
	e->len = htole32((uint32_t)x->len);
	e->flags = htole32(x->flags);
}

/* An extent read from the inode or its tree must lie in the data zone. */
static int fx_check(struct mfs *fs, const struct mfs_ino *ip, const struct mfs_fx *x)
{
	uint64_t ds = le64toh(fs->sb.data_start), dl = le64toh(fs->sb.data_len);

	if (x->len == 0 || x->pblk < ds || x->pblk + x->len > ds + dl ||
	    x->lblk + x->len > MAX_FILE_BLOCKS || (x->flags & ~MFS_EXT_UNWRITTEN)) {
		fprintf(stderr,
		        "mendfs: inode %llu: bad extent lblk %llu pblk %llu len %llu flags %#x\n",
		        (unsigned long long)ip->ino, (unsigned long long)x->lblk,
		        (unsigned long long)x->pblk, (unsigned long long)x->len, x->flags);
		return -EUCLEAN;
	}
	return 0;
}

static unsigned nr_inline(const struct mfs_ino *ip)
{
	return le16toh(ip->di.nr_inline);
}

/*
 * Free data blocks of a file.  Poisoned ones go to the quarantine tree, whose
 * root lives in the superblock: journal the new root with the transaction.
 */
int mfs_fmap_free_data(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	uint64_t root = fs->sb.quarantine_root;
	uint32_t depth = fs->sb.quarantine_depth;
	int ret = mfs_free_data(fs, txn, start, len);

	if (fs->sb.quarantine_root != root || fs->sb.quarantine_depth != depth) {
		int err = mfs_super_roots_log(fs, txn);

		if (!ret)
			ret = err;
	}
	return ret;
}

/* --- the five map primitives ------------------------------------------------------- */

/* The extent with the greatest lblk <= @lblk.  -ENOENT if none. */
static int map_find_le(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, struct mfs_fx *x)
{
	if (!is_tree(ip)) {
		unsigned n = nr_inline(ip), i;

		if (n > MFS_INLINE_EXTENTS)
			return -EUCLEAN;
		for (i = n; i-- > 0;) {
			fx_load(x, &ip->di.u.ext[i]);
			if (x->lblk <= lblk)
				return fx_check(fs, ip, x);
		}
		return -ENOENT;
	}
	struct mfs_btree bt = ext_tree(ip);
	struct mfs_extent e;
	uint16_t len = sizeof(e);
	uint64_t key;
	int ret = mfs_bt_lookup_le(fs, &bt, lblk, &key, &e, &len);

	if (ret)
		return ret;
	fx_load(x, &e);
	if (len != sizeof(e) || x->lblk != key)
		return -EUCLEAN;
	return fx_check(fs, ip, x);
}

/* The extent with the smallest lblk >= @lblk.  -ENOENT if none. */
static int map_find_ge(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, struct mfs_fx *x)
{
	if (!is_tree(ip)) {
		unsigned n = nr_inline(ip), i;

		if (n > MFS_INLINE_EXTENTS)
			return -EUCLEAN;
		for (i = 0; i < n; i++) {
			fx_load(x, &ip->di.u.ext[i]);
			if (x->lblk >= lblk)
				return fx_check(fs, ip, x);
		}
		return -ENOENT;
	}
	struct mfs_btree bt = ext_tree(ip);
	struct mfs_extent e;
	uint16_t len = sizeof(e);
	uint64_t key;
	int ret = mfs_bt_lookup_ge(fs, &bt, lblk, &key, &e, &len);

	if (ret)
		return ret;
	fx_load(x, &e);
	if (len != sizeof(e) || x->lblk != key)
		return -EUCLEAN;
	return fx_check(fs, ip, x);
}

/*
 * A tree map's map_find_le and map_find_ge of @lblk in one call (one descent
 * mostly): the first's result is returned and left in @x, the second's in @r
 * and *has_right (0 or 1); where it ended in *@hint (NULL: not wanted).
 */
static int map_find_around(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, struct mfs_fx *x,
                           struct mfs_fx *r, int *has_right, struct mfs_bt_hint *hint)
{
	struct mfs_btree bt = ext_tree(ip);
	struct mfs_extent le, ge;
	uint16_t le_len = sizeof(le), ge_len = sizeof(ge);
	uint64_t le_key, ge_key;
	int found = mfs_bt_lookup_near(fs, &bt, lblk, &le_key, &le, &le_len, &ge_key, &ge, &ge_len,
	                               hint);
	int ret;

	if (found < 0)
		return found;
	*has_right = !!(found & MFS_BT_GE);
	if (*has_right) {
		fx_load(r, &ge);
		if (ge_len != sizeof(ge) || r->lblk != ge_key)
			return -EUCLEAN;
		ret = fx_check(fs, ip, r);
		if (ret)
			return ret;
	}
	if (!(found & MFS_BT_LE))
		return -ENOENT;
	fx_load(x, &le);
	if (le_len != sizeof(le) || x->lblk != le_key)
		return -EUCLEAN;
	return fx_check(fs, ip, x);
}

/* Move the inline extents into a new B+tree.  On failure the inline map is unchanged. */
static int map_to_tree(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	struct mfs_btree bt = {.kind = MFS_TREE_EXTENTS, .owner = ip->ino};
	unsigned n = nr_inline(ip), i;
	int ret = 0;

	for (i = 0; i < n && !ret; i++)
		ret = mfs_bt_insert(fs, txn, &bt, le64toh(ip->di.u.ext[i].lblk), &ip->di.u.ext[i],
		                    sizeof(struct mfs_extent));
	if (ret) {
		mfs_bt_destroy(fs, txn, &bt);
		return ret;
	}
	memset(&ip->di.u, 0, sizeof(ip->di.u));
	ip->di.nr_inline = 0;
	ip->di.iflags = htole32(le32toh(ip->di.iflags) | MFS_IFL_EXTENT_TREE);
	ext_tree_store(ip, &bt);
	return 0;
}

/* @hint: from the lookup that found the empty range x falls in (NULL: none) */
static int map_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip,
                      const struct mfs_fx *x, const struct mfs_bt_hint *hint)
{
	struct mfs_extent e;
	int ret;

	fx_store(&e, x);
	if (!is_tree(ip)) {
		unsigned n = nr_inline(ip), i;

		if (n < MFS_INLINE_EXTENTS) {
			for (i = n; i > 0 && le64toh(ip->di.u.ext[i - 1].lblk) > x->lblk; i--)
				ip->di.u.ext[i] = ip->di.u.ext[i - 1];
			ip->di.u.ext[i] = e;
			ip->di.nr_inline = htole16((uint16_t)(n + 1));
			return 0;
		}
		ret = map_to_tree(fs, txn, ip);
		if (ret)
			return ret;
	}
	struct mfs_btree bt = ext_tree(ip);

	ret = mfs_bt_insert_near(fs, txn, &bt, x->lblk, &e, sizeof(e), hint);
	ext_tree_store(ip, &bt);
	return ret;
}

/* Replace the extent keyed x->lblk. */
static int map_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip,
                      const struct mfs_fx *x)
{
	struct mfs_extent e;
	int ret;

	fx_store(&e, x);
	if (!is_tree(ip)) {
		unsigned n = nr_inline(ip), i;

		for (i = 0; i < n; i++) {
			if (le64toh(ip->di.u.ext[i].lblk) == x->lblk) {
				ip->di.u.ext[i] = e;
				return 0;
			}
		}
		return -ENOENT;
	}
	struct mfs_btree bt = ext_tree(ip);

	ret = mfs_bt_update(fs, txn, &bt, x->lblk, &e, sizeof(e));
	ext_tree_store(ip, &bt);
	return ret;
}

static int map_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk)
{
	int ret;

	if (!is_tree(ip)) {
		unsigned n = nr_inline(ip), i;

		for (i = 0; i < n; i++) {
			if (le64toh(ip->di.u.ext[i].lblk) == lblk) {
				memmove(&ip->di.u.ext[i], &ip->di.u.ext[i + 1],
				        (n - i - 1) * sizeof(struct mfs_extent));
				memset(&ip->di.u.ext[n - 1], 0, sizeof(struct mfs_extent));
				ip->di.nr_inline = htole16((uint16_t)(n - 1));
				return 0;
			}
		}
		return -ENOENT;
	}
	struct mfs_btree bt = ext_tree(ip);

	ret = mfs_bt_delete(fs, txn, &bt, lblk);
	ext_tree_store(ip, &bt);
	return ret;
}

struct collect_arg {
	struct mfs_extent e[MFS_INLINE_EXTENTS];
	unsigned n;
	bool too_many;
};

static int collect_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct collect_arg *a = arg;

	(void)key;
	if (a->n == MFS_INLINE_EXTENTS || len != sizeof(struct mfs_extent)) {
		a->too_many = true;
		return 1;
	}
	memcpy(&a->e[a->n++], val, sizeof(struct mfs_extent));
	return 0;
}

/* A tree that is a single leaf of at most MFS_INLINE_EXTENTS extents goes back inline. */
static int map_maybe_inline(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	struct mfs_btree bt = ext_tree(ip);
	struct collect_arg a = {.n = 0};
	int ret;

	if (!is_tree(ip) || bt.depth > 0)
		return 0;
	ret = mfs_bt_iterate(fs, &bt, 0, collect_fn, &a);
	if (ret < 0)
		return ret;
	if (a.too_many)
		return 0;
	ret = mfs_bt_destroy(fs, txn, &bt);
	if (ret)
		return ret;
	memset(&ip->di.u, 0, sizeof(ip->di.u));
	memcpy(ip->di.u.ext, a.e, a.n * sizeof(struct mfs_extent));
	ip->di.nr_inline = htole16((uint16_t)a.n);
	ip->di.iflags = htole32(le32toh(ip->di.iflags) & ~MFS_IFL_EXTENT_TREE);
	ext_tree_store(ip, &bt);
	return 0;
}

/* --- range operations -------------------------------------------------------------- */

/* The mapping of @lblk: *pblk 0 for a hole; *count blocks share it. */
int mfs_fmap_lookup(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, uint64_t *pblk,
                    uint64_t *count, bool *unwritten, struct mfs_fmap_hole *h)
{
	struct mfs_fx x, r;
	int has_right = -1; /* -1: not looked up yet */
	bool has_left;
	int ret;

	*pblk = 0;
	*unwritten = false;
	if (h) {
		h->found = false;
		h->hint = (struct mfs_bt_hint){0};
	}
	if (lblk >= MAX_FILE_BLOCKS) {
		*count = 1;
		return 0;
	}
	if (is_tree(ip))
		ret = map_find_around(fs, ip, lblk, &x, &r, &has_right, h ? &h->hint : NULL);
	else
		ret = map_find_le(fs, ip, lblk, &x);
	if (ret && ret != -ENOENT)
		return ret;
	if (!ret && x.lblk + x.len > lblk) {
		*pblk = x.pblk + (lblk - x.lblk);
		*count = x.lblk + x.len - lblk;
		*unwritten = x.flags & MFS_EXT_UNWRITTEN;
		return 0;
	}
	has_left = !ret;
	if (h) {
		h->has_left = has_left;
		if (has_left)
			h->left = x;
	}
	if (has_right < 0) {
		ret = map_find_ge(fs, ip, lblk, &x);
	} else {
		/* the tree's lookup brought the next extent along */
		ret = has_right ? 0 : -ENOENT;
		if (has_right)
			x = r;
	}
	if (ret == -ENOENT) {
		*count = MAX_FILE_BLOCKS - lblk;
	} else if (ret) {
		return ret;
	} else {
		*count = x.lblk - lblk;
	}
	if (h) {
		h->has_right = !ret;
		if (!ret)
			h->right = x;
		h->lblk = lblk;
		h->len = *count;
		h->found = true;
	}
	return 0;
}

int mfs_bmap(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, uint64_t *pblk, uint64_t *count,
             bool *unwritten)
{
	/* the read and overwrite paths' case: an inline map whose extent holds @lblk */
	if (!is_tree(ip) && nr_inline(ip) <= MFS_INLINE_EXTENTS) {
		struct mfs_fx x;

		for (unsigned i = nr_inline(ip); i-- > 0;) {
			fx_load(&x, &ip->di.u.ext[i]);
			if (x.lblk > lblk)
				continue;
			if (x.lblk + x.len <= lblk)
				break; /* a hole: the full lookup measures it */
			if (fx_check(fs, ip, &x))
				return -EUCLEAN; /* as the full lookup would */
			*pblk = x.pblk + (lblk - x.lblk);
			*count = x.lblk + x.len - lblk;
			*unwritten = x.flags & MFS_EXT_UNWRITTEN;
			return 0;
		}
	}
	return mfs_fmap_lookup(fs, ip, lblk, pblk, count, unwritten, NULL);
}

/*
 * Cut [from, to) (inside it) out of extent @x: its head [x.lblk, from) stays
 * under the extent's key (or the entry goes), its tail [to, x end) becomes an
 * extent of its own.  Frees nothing.
 */
static int map_cut(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, const struct mfs_fx *x,
                   uint64_t from, uint64_t to)
{
	struct mfs_fx piece;
	int ret;

	if (from > x->lblk) {
		piece = *x;
		piece.len = from - x->lblk;
		ret = map_update(fs, txn, ip, &piece);
	} else {
		ret = map_delete(fs, txn, ip, x->lblk);
	}
	if (!ret && to < x->lblk + x->len) {
		piece = *x;
		piece.lblk = to;
		piece.pblk = x->pblk + (to - x->lblk);
		piece.len = x->lblk + x->len - to;
		ret = map_insert(fs, txn, ip, &piece, NULL);
	}
	return ret;
}

/*
 * Unmap [lblk, end) without freeing the blocks (a write converting
 * unwritten blocks it has just written), splitting extents that straddle its
 * edges.  Returns 0 or -errno.
 */
int mfs_fmap_punch(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                   uint64_t end)
{
	int ret;

	while (lblk < end) {
		struct mfs_fx x;
		uint64_t oe;

		ret = map_find_le(fs, ip, lblk, &x);
		if (ret && ret != -ENOENT)
			return ret;
		if (ret || x.lblk + x.len <= lblk) {
			ret = map_find_ge(fs, ip, lblk, &x);
			if (ret == -ENOENT)
				break;
			if (ret)
				return ret;
			if (x.lblk >= end)
				break;
		}
		oe = x.lblk + x.len < end ? x.lblk + x.len : end;
		ret = map_cut(fs, txn, ip, &x, lblk > x.lblk ? lblk : x.lblk, oe);
		if (ret)
			return ret;
		lblk = oe;
	}
	return map_maybe_inline(fs, txn, ip);
}

/* --- bounded steps ----------------------------------------------------------------- */

/*
 * Worst case of one free_unit(): two map changes (the piece's extent
 * updated or deleted, a tail inserted), the data bitmap blocks of
 * PIECE_BLOCKS blocks, a quarantine insert with the roots record, the inode
 * table block.
 */
static unsigned unit_cost(struct mfs *fs, const struct mfs_ino *ip)
{
	unsigned qd = (unsigned)le32toh(fs->sb.quarantine_depth);

	return 2 * map_cost(ip) + (PIECE_BLOCKS / (unsigned)MFS_BITMAP_BITS + 1) + 2 * (qd + 3) + 2;
}

/*
 * One unit of a bounded free: unmap and free the first piece of the first
 * extent met in [*lblk, end): the whole overlap, or its last PIECE_BLOCKS
 * blocks when it is longer (the extent keeps its key and shrinks: a huge
 * extent goes in pieces, from its end).  Unmapping comes first: a failure
 * after it leaks blocks (fsck finds them), never leaves a freed block
 * mapped.  *lblk advances past what is done.  Returns 1 when a piece was
 * freed, 0 when the range maps nothing, or -errno.
 */
static int free_unit(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t *lblk,
                     uint64_t end)
{
	struct mfs_fx x;
	uint64_t os, oe, ps;
	int ret;

	if (*lblk >= end)
		return 0;
	ret = map_find_le(fs, ip, *lblk, &x);
	if (ret && ret != -ENOENT)
		return ret;
	if (ret || x.lblk + x.len <= *lblk) {
		ret = map_find_ge(fs, ip, *lblk, &x);
		if (ret == -ENOENT)
			return 0;
		if (ret)
			return ret;
		if (x.lblk >= end)
			return 0;
	}
	os = x.lblk > *lblk ? x.lblk : *lblk;
	oe = x.lblk + x.len < end ? x.lblk + x.len : end;
	ps = oe - os > PIECE_BLOCKS ? oe - PIECE_BLOCKS : os;
	ret = map_cut(fs, txn, ip, &x, ps, oe);
	if (ret)
		return ret;
	ret = mfs_fmap_free_data(fs, txn, x.pblk + (ps - x.lblk), oe - ps);
	di_add_blocks(ip, -(int64_t)(oe - ps));
	if (ret)
		return ret;
	if (ps == os)
		*lblk = oe;
	return 1;
}

/*
 * Unmap and free [first, last) in bounded steps (docs/design/core.md §3): each
 * step is a handle of its own (mfs_txn_begin_step) doing units while their
 * worst case fits mfs_txn_room(), at least one, and writing the inode back,
 * so every transaction is a consistent file (extents and di.blocks agree) and
 * the cached inode is always what the handles so far hold, failed ones
 * included.  Lowest blocks first: the B+tree merges an underfull leaf into
 * its left neighbour, so deleting in key order keeps changing the same leaf
 * and frees the right ones without journaling them (measured on the 20000
 * dense extents of tests/unit/test_truncate.c: 11 journal blocks in key
 * order, 497 from the end).  The caller holds ip->lock for writing and no
 * handle.  Returns 0 or -errno.
 */
int mfs_fmap_free(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last)
{
	uint64_t lblk = first;
	int ret = 1, err;

	while (ret == 1) {
		struct mfs_txn *txn;

		ret = mfs_txn_begin_step(fs, unit_cost(fs, ip), &txn);
		if (ret)
			return ret;
		do
			ret = free_unit(fs, txn, ip, &lblk, last);
		while (ret == 1 && mfs_txn_room(txn) >= unit_cost(fs, ip));
		if (ret == 0)
			ret = map_maybe_inline(fs, txn, ip);
		err = mfs_inode_write(fs, txn, ip);
		if (ret >= 0 && err)
			ret = err;
		err = mfs_txn_end(txn);
		if (ret >= 0 && err)
			ret = err;
	}
	return ret;
}

/* Map the empty range [lblk, lblk + len) to @pblk, merging with neighbours. */
/*
 * Map @nx into the empty range it names, given its neighbours: @lp the
 * extent with the greatest lblk below nx->lblk, @rp the first at or past its
 * end (NULL: none), @hint where the lookup that found them ended (NULL:
 * none).  Merges with either when they touch it on the disk too.
 */
static int add_between(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, struct mfs_fx nx,
                       const struct mfs_fx *lp, const struct mfs_fx *rp,
                       const struct mfs_bt_hint *hint)
{
	uint64_t lblk = nx.lblk, len = nx.len, pblk = nx.pblk;
	uint32_t flags = nx.flags;
	struct mfs_fx l = lp ? *lp : (struct mfs_fx){0}, r = rp ? *rp : (struct mfs_fx){0};
	bool left, right;
	int ret;

	left = lp && l.lblk + l.len == lblk && l.pblk + l.len == pblk && l.flags == flags &&
	       l.len + len <= EXT_MAX_LEN;
	right = rp && r.lblk == lblk + len && r.pblk == pblk + len && r.flags == flags &&
	        (left ? l.len : 0) + len + r.len <= EXT_MAX_LEN;
	if (left) {
		l.len += len + (right ? r.len : 0);
		ret = map_update(fs, txn, ip, &l);
		if (!ret && right)
			ret = map_delete(fs, txn, ip, r.lblk);
		return ret;
	}
	if (right) {
		nx.len += r.len;
		if (!is_tree(ip)) {
			/* inline: make room first, nothing there can fail */
			ret = map_delete(fs, txn, ip, r.lblk);
			if (!ret)
				ret = map_insert(fs, txn, ip, &nx, NULL);
			return ret;
		}
		ret = map_insert(fs, txn, ip, &nx, hint);
		if (!ret)
			ret = map_delete(fs, txn, ip, r.lblk);
		return ret;
	}
	return map_insert(fs, txn, ip, &nx, hint);
}

int mfs_fmap_add(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                 uint64_t len, uint64_t pblk, uint32_t flags)
{
	struct mfs_fx nx = {.lblk = lblk, .pblk = pblk, .len = len, .flags = flags}, l, r;
	bool left = false;
	int ret;

	while (len > EXT_MAX_LEN) {
		/* only allocations of up to a chunk reach here; stay general anyway */
		ret = mfs_fmap_add(fs, txn, ip, lblk, EXT_MAX_LEN, pblk, flags);
		if (ret)
			return ret;
		lblk += EXT_MAX_LEN;
		pblk += EXT_MAX_LEN;
		len -= EXT_MAX_LEN;
		nx = (struct mfs_fx){.lblk = lblk, .pblk = pblk, .len = len, .flags = flags};
	}
	if (lblk > 0) {
		ret = map_find_le(fs, ip, lblk - 1, &l);
		if (ret && ret != -ENOENT)
			return ret;
		left = !ret;
	}
	ret = map_find_ge(fs, ip, lblk + len, &r);
	if (ret && ret != -ENOENT)
		return ret;
	return add_between(fs, txn, ip, nx, left ? &l : NULL, ret ? NULL : &r, NULL);
}

int mfs_fmap_add_hole(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                      uint64_t len, uint64_t pblk, uint32_t flags, const struct mfs_fmap_hole *h)
{
	struct mfs_fx nx = {.lblk = lblk, .pblk = pblk, .len = len, .flags = flags};

	/*
	 * Inside the hole @h found, its neighbours are [lblk, lblk + len)'s:
	 * no extent starts in the hole, so the greatest below lblk is h->left
	 * and the first at or past lblk + len is h->right.
	 */
	if (!h || !h->found || len > EXT_MAX_LEN || lblk < h->lblk || lblk + len > h->lblk + h->len)
		return mfs_fmap_add(fs, txn, ip, lblk, len, pblk, flags);
	return add_between(fs, txn, ip, nx, h->has_left ? &h->left : NULL,
	                   h->has_right ? &h->right : NULL, &h->hint);
}

/* Where a file's first blocks go. */
static uint64_t goal_spread(struct mfs *fs, struct mfs_ino *ip)
{
	uint64_t ds = le64toh(fs->sb.data_start), dl = le64toh(fs->sb.data_len);
	uint64_t slots = dl / GOAL_SPREAD;

	/*
	 * A file's first blocks: start files at spread-out places (by inode
	 * number) so that files growing at the same time do not take each
	 * other's next blocks and interleave.
	 */
	if (slots < 2)
		return 0;
	return ds + ((ip->ino * 0x9e3779b97f4a7c15ull) >> 20) % slots * GOAL_SPREAD;
}

/* Where to allocate file block @lblk: after the block mapping @lblk - 1's extent. */
uint64_t mfs_fmap_goal(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk)
{
	struct mfs_fx x;

	if (lblk > 0 && !map_find_le(fs, ip, lblk - 1, &x))
		return x.pblk + (lblk - x.lblk);
	return goal_spread(fs, ip);
}

uint64_t mfs_fmap_hole_goal(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk,
                            const struct mfs_fmap_hole *h)
{
	/* in the hole, the extent mapping lblk - 1 (or the last before it) is h->left */
	if (!h || !h->found || lblk < h->lblk || lblk >= h->lblk + h->len)
		return mfs_fmap_goal(fs, ip, lblk);
	if (lblk > 0 && h->has_left)
		return h->left.pblk + (lblk - h->left.lblk);
	return goal_spread(fs, ip);
}

/* Does the map hold a block at or past @lblk?  Returns 1, 0 or -errno. */
int mfs_fmap_maps_from(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk)
{
	struct mfs_fx x;
	int ret = map_find_le(fs, ip, MAX_FILE_BLOCKS - 1, &x);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	return x.lblk + x.len > lblk;
}

int mfs_file_free_all(struct mfs *fs, struct mfs_ino *ip)
{
	if (le32toh(ip->di.iflags) & MFS_IFL_INLINE_DATA)
		return 0; /* a symlink's target, not extents */
	return mfs_fmap_free(fs, ip, 0, MAX_FILE_BLOCKS);
}

struct release_arg {
	struct mfs_extent *v;
	size_t nr, cap;
	int err;
};

static int release_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct release_arg *a = arg;

	(void)key;
	if (len != sizeof(struct mfs_extent)) {
		a->err = -EUCLEAN;
		return 1;
	}
	if (a->nr == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct mfs_extent *v = realloc(a->v, cap * sizeof(*v));

		if (!v) {
			a->err = -ENOMEM;
			return 1;
		}
		a->v = v;
		a->cap = cap;
	}
	memcpy(&a->v[a->nr++], val, sizeof(struct mfs_extent));
	return 0;
}

int mfs_file_release_blocks(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	struct release_arg a = {0};
	struct mfs_btree bt;
	struct mfs_fx x;
	size_t i;
	int ret = 0;

	if (le32toh(ip->di.iflags) & MFS_IFL_INLINE_DATA)
		return 0; /* a symlink's target, not extents */
	if (!is_tree(ip)) {
		unsigned n = nr_inline(ip);

		if (n > MFS_INLINE_EXTENTS)
			return -EUCLEAN;
		for (i = 0; i < n; i++) {
			fx_load(&x, &ip->di.u.ext[i]);
			ret = fx_check(fs, ip, &x);
			if (!ret)
				ret = mfs_fmap_free_data(fs, txn, x.pblk, x.len);
			if (ret)
				return ret;
		}
		memset(&ip->di.u, 0, sizeof(ip->di.u));
		ip->di.nr_inline = 0;
		ip->di.blocks = 0;
		return 0;
	}
	bt = ext_tree(ip);
	ret = mfs_bt_iterate(fs, &bt, 0, release_fn, &a);
	if (!ret)
		ret = a.err;
	for (i = 0; i < a.nr && !ret; i++) {
		fx_load(&x, &a.v[i]);
		ret = fx_check(fs, ip, &x);
		if (!ret)
			ret = mfs_fmap_free_data(fs, txn, x.pblk, x.len);
	}
	free(a.v);
	if (ret)
		return ret;
	ret = mfs_bt_destroy(fs, txn, &bt);
	if (ret)
		return ret;
	ext_tree_store(ip, &bt);
	ip->di.iflags = htole32(le32toh(ip->di.iflags) & ~MFS_IFL_EXTENT_TREE);
	memset(&ip->di.u, 0, sizeof(ip->di.u));
	ip->di.nr_inline = 0;
	ip->di.blocks = 0;
	return 0;
}
