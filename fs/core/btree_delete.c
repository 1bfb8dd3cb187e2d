/* SPDX-License-Identifier: MIT */
/*
 * B+tree delete and destroy: after a leaf loses bytes, a non-root node
 * under a quarter full is merged with a sibling, or the pair redistributed
 * when the merge would not fit; the root collapses into its only child, an
 * empty root leaf is freed (kept with MFS_BT_KEEP_ROOT).  Destroy checks the
 * whole tree before freeing any block.  It calls btree_node.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree_int.h"

static void leaf_remove_at(uint8_t *blk, unsigned i)
{
	struct mfs_bt_slot *s = leaf_slots(blk);
	unsigned nr = node_nr(blk);

	memmove(&s[i], &s[i + 1], (nr - i - 1) * BT_SLOT);
	memset(&s[nr - 1], 0, BT_SLOT);
	node_set_nr(blk, nr - 1);
}

/* --- merge and redistribution ------------------------------------------------------ */

static bool node_underfull(uint8_t *blk, unsigned level)
{
	return level ? node_nr(blk) < BT_NODE_MIN : leaf_used(blk) < BT_LEAF_MIN;
}

/*
 * Siblings @lb and @rb, children @li and @li + 1 of @pb at @level: merge them
 * into @lb when they fit one block (freeing @rb, *merged = true), else share
 * their items evenly.
 */
static void siblings_balance(struct mfs_txn *txn, struct mfs_buf *pb, unsigned li,
                             struct mfs_buf *lb, struct mfs_buf *rb, unsigned level, bool *merged)
{
	uint8_t lcopy[MFS_BLOCK_SIZE], rcopy[MFS_BLOCK_SIZE];
	uint64_t lmin, rmin = 0;
	unsigned pnr;

	mfs_lock(&lb->lock);
	memcpy(lcopy, lb->data, MFS_BLOCK_SIZE);
	mfs_unlock(&lb->lock);
	mfs_lock(&rb->lock);
	memcpy(rcopy, rb->data, MFS_BLOCK_SIZE);
	mfs_unlock(&rb->lock);

	if (level == 0) {
		struct bt_ent e[2 * BT_LEAF_MAX];
		unsigned n = leaf_gather(lcopy, e), m;

		n += leaf_gather(rcopy, e + n);
		*merged = ents_bytes(e, n) <= BT_SPACE;
		m = *merged ? n : mfs_bt_leaf_split_point(e, n);
		mfs_lock(&lb->lock);
		mfs_bt_leaf_build(lb->data, e, m);
		bt_dirty(txn, lb);
		mfs_unlock(&lb->lock);
		if (!*merged) {
			mfs_lock(&rb->lock);
			mfs_bt_leaf_build(rb->data, e + m, n - m);
			bt_dirty(txn, rb);
			mfs_unlock(&rb->lock);
			rmin = e[m].key;
		}
		lmin = e[0].key;
	} else {
		struct mfs_bt_ptr tmp[2 * BT_NODE_MAX];
		unsigned ln = node_nr(lcopy), n = ln + node_nr(rcopy), m;

		memcpy(tmp, node_ptrs(lcopy), ln * sizeof(*tmp));
		memcpy(tmp + ln, node_ptrs(rcopy), (n - ln) * sizeof(*tmp));
		*merged = n <= BT_NODE_MAX;
		m = *merged ? n : n / 2;
		mfs_lock(&lb->lock);
		memcpy(node_ptrs(lb->data), tmp, m * sizeof(*tmp));
		memset(node_ptrs(lb->data) + m, 0, (BT_NODE_MAX - m) * sizeof(*tmp));
		node_set_nr(lb->data, m);
		bt_dirty(txn, lb);
		mfs_unlock(&lb->lock);
		if (!*merged) {
			mfs_lock(&rb->lock);
			memcpy(node_ptrs(rb->data), tmp + m, (n - m) * sizeof(*tmp));
			memset(node_ptrs(rb->data) + (n - m), 0,
			       (BT_NODE_MAX - (n - m)) * sizeof(*tmp));
			node_set_nr(rb->data, n - m);
			bt_dirty(txn, rb);
			mfs_unlock(&rb->lock);
			rmin = le64toh(tmp[m].key);
		}
		lmin = le64toh(tmp[0].key);
	}

	mfs_lock(&pb->lock);
	pnr = node_nr(pb->data);
	node_ptrs(pb->data)[li].key = htole64(lmin);
	if (*merged) {
		struct mfs_bt_ptr *ptr = node_ptrs(pb->data);

		memmove(&ptr[li + 1], &ptr[li + 2], (pnr - li - 2) * sizeof(*ptr));
		memset(&ptr[pnr - 1], 0, sizeof(*ptr));
		node_set_nr(pb->data, pnr - 1);
	} else {
		node_ptrs(pb->data)[li + 1].key = htole64(rmin);
	}
	bt_dirty(txn, pb);
	mfs_unlock(&pb->lock);
}

/*
 * After a leaf lost bytes: from the leaf up, keep separators exact, merge or
 * redistribute underfull nodes, shrink the root.
 */
MFS_BT_SHARED int mfs_bt_path_rebalance(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt,
                                        struct bt_path *path)
{
	unsigned depth = path->depth, p;
	int ret = 0, ret2;

	for (p = depth; p > 0; p--) {
		struct mfs_buf *b = path->b[p], *pb = path->b[p - 1], *sb, *lb, *rb;
		unsigned level = depth - p, i = path->idx[p - 1], pnr, j;
		struct bt_bounds sbd;
		uint64_t sibling;
		bool under, merged;

		mfs_lock(&b->lock);
		under = node_underfull(b->data, level);
		mfs_unlock(&b->lock);
		mfs_lock(&pb->lock);
		pnr = node_nr(pb->data);
		if (!under || pnr < 2) {
			mfs_unlock(&pb->lock);
			mfs_bt_path_fix_keys(txn, path, p);
			continue;
		}
		j = i + 1 < pnr ? i + 1 : i - 1;
		child_bounds(pb->data, j, &path->bd[p - 1], &sbd);
		sibling = ptr_child(pb->data, j);
		mfs_unlock(&pb->lock);

		ret = mfs_bt_node_get(fs, bt, sibling, level, &sbd, &sb);
		if (ret)
			break;
		mfs_unlock(&sb->lock);
		lb = j < i ? sb : b;
		rb = j < i ? b : sb;
		siblings_balance(txn, pb, j < i ? j : i, lb, rb, level, &merged);
		if (merged) {
			/* the right node goes; the reference to the left one is dropped */
			if (rb == b) {
				path->b[p] = NULL;
				mfs_buf_put(sb);
			}
			ret2 = mfs_bt_node_free(fs, txn, rb);
			if (ret2 && !ret)
				ret = ret2;
		} else {
			mfs_buf_put(sb);
		}
		/* the parent's lowest key may have moved with the left node's */
		mfs_bt_path_fix_keys(txn, path, p - 1);
	}
	if (ret)
		return ret;

	/* the root: collapse a single child, free an empty leaf */
	while (bt->depth > 0) {
		struct mfs_buf *rootb;
		uint64_t child;

		if (path->b[0] && path->b[0]->blocknr == bt->root) {
			rootb = path->b[0];
			path->b[0] = NULL;
			mfs_lock(&rootb->lock);
		} else {
			ret = mfs_bt_node_get(fs, bt, bt->root, bt->depth, NULL, &rootb);
			if (ret)
				return ret;
		}
		if (node_nr(rootb->data) != 1) {
			mfs_unlock(&rootb->lock);
			mfs_buf_put(rootb);
			return 0;
		}
		child = ptr_child(rootb->data, 0);
		mfs_unlock(&rootb->lock);
		ret = mfs_bt_node_free(fs, txn, rootb);
		bt->root = child;
		bt->depth--;
		if (ret)
			return ret;
	}
	{
		struct mfs_buf *rootb;
		bool empty;

		if (path->b[0] && path->b[0]->blocknr == bt->root) {
			rootb = path->b[0];
			path->b[0] = NULL;
			mfs_lock(&rootb->lock);
		} else {
			ret = mfs_bt_node_get(fs, bt, bt->root, 0, NULL, &rootb);
			if (ret)
				return ret;
		}
		empty = node_nr(rootb->data) == 0;
		mfs_unlock(&rootb->lock);
		if (!empty || (bt->flags & MFS_BT_KEEP_ROOT)) {
			mfs_buf_put(rootb);
			return 0;
		}
		bt->root = 0;
		return mfs_bt_node_free(fs, txn, rootb);
	}
}

/* --- delete ------------------------------------------------------------------------ */

int mfs_bt_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key)
{
	struct bt_path path;
	struct mfs_buf *leaf;
	unsigned i;
	int ret;

	ret = mfs_bt_path_find_exact(fs, bt, key, &path, &i);
	if (ret)
		return ret;
	leaf = path.b[path.depth];
	leaf_remove_at(leaf->data, i);
	bt_dirty(txn, leaf);
	mfs_unlock(&leaf->lock);
	ret = mfs_bt_path_rebalance(fs, txn, bt, &path);
	mfs_bt_path_release(&path);
	return ret;
}

/* --- destroy ----------------------------------------------------------------------- */

struct bt_blocks {
	uint64_t *v;
	size_t nr, cap;
};

/* Check the subtree at @blocknr and list its blocks (children first). */
static int subtree_collect(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr,
                           unsigned level, const struct bt_bounds *bd, struct bt_blocks *list)
{
	struct mfs_bt_ptr *ptrs = NULL;
	struct bt_bounds self = {0};
	struct mfs_buf *b;
	unsigned nr = 0, i;
	int ret;

	ret = mfs_bt_node_get(fs, bt, blocknr, level, bd, &b);
	if (ret)
		return ret;
	if (level) {
		nr = node_nr(b->data);
		ptrs = malloc(nr * sizeof(*ptrs));
		if (!ptrs) {
			mfs_unlock(&b->lock);
			mfs_buf_put(b);
			return -ENOMEM;
		}
		memcpy(ptrs, node_ptrs(b->data), nr * sizeof(*ptrs));
		if (bd)
			self = *bd;
	}
	mfs_unlock(&b->lock);
	mfs_buf_put(b);

	for (i = 0; i < nr && !ret; i++) {
		struct bt_bounds cbd = {.lo = le64toh(ptrs[i].key), .has_lo = true};

		if (i + 1 < nr) {
			cbd.hi = le64toh(ptrs[i + 1].key);
			cbd.has_hi = true;
		} else {
			cbd.hi = self.hi;
			cbd.has_hi = self.has_hi;
		}
		ret = subtree_collect(fs, bt, le64toh(ptrs[i].child), level - 1, &cbd, list);
	}
	free(ptrs);
	if (ret)
		return ret;
	if (list->nr == list->cap) {
		size_t cap = list->cap ? list->cap * 2 : 64;
		uint64_t *v = realloc(list->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		list->v = v;
		list->cap = cap;
	}
	list->v[list->nr++] = blocknr;
	return 0;
}

int mfs_bt_destroy(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt)
{
	struct bt_blocks list = {0};
	size_t i;
	int ret;

	if (!bt->root) {
		bt->depth = 0;
		return 0;
	}
	ret = mfs_bt_tree_check(bt);
	if (ret)
		return ret;
	/* check the whole tree first: a corrupt tree frees nothing */
	ret = subtree_collect(fs, bt, bt->root, bt->depth, NULL, &list);
	if (!ret) {
		for (i = 0; i < list.nr; i++) {
			int r = bt_block_free(fs, txn, list.v[i]);

			mfs_meta_forget(fs, list.v[i]);
			if (r && !ret)
				ret = r;
		}
		bt->root = 0;
		bt->depth = 0;
	}
	free(list.v);
	return ret;
}
