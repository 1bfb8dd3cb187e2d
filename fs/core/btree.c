/* SPDX-License-Identifier: MIT */
/*
 * B+trees of 64-bit keys with values of 0..MFS_BT_MAX_VALUE bytes: extents,
 * directory entries, xattrs, the quarantine and the orphan list.
 *
 * Nodes are metadata blocks.  An interior node (MFS_T_BTREE_NODE, level >= 1)
 * is the header and hdr.nr_items struct mfs_bt_ptr sorted by key, where
 * ptr[i].key is exactly the lowest key of child i's subtree.  A leaf
 * (MFS_T_BTREE_LEAF, level 0) is a slotted page: struct mfs_bt_slot sorted by
 * key after the header, values stored from the end of the block downwards in
 * any order, holes left by deletes reclaimed by compaction when an insert
 * needs contiguous room.  Every leaf of a tree is at level 0, so the root is
 * at level bt->depth.
 *
 * Balance: a leaf is split by bytes when an insert or update does not fit,
 * an interior node by count when it is full.  After a delete or a shrinking
 * update a non-root leaf using less than a quarter of its space, or a
 * non-root interior node with less than a quarter of MFS_BT_NODE_MAX
 * children, is merged with a sibling, or the pair is redistributed when the
 * merge would not fit.  The root collapses into its only child; an empty root
 * leaf is freed (kept with MFS_BT_KEEP_ROOT).  Every block a modification
 * needs is allocated before the tree changes, so a failed allocation leaves
 * the tree as it was.
 *
 * Nothing read from a node is trusted before node_check() accepted it: type,
 * level, owner, tree kind, item count, slot bounds, key order, key range
 * given by the parent, child pointers inside the meta zone.  A bad node is
 * -EUCLEAN, logged with its block number.  The per-item checks (slots, key
 * order, children) run once per fill of a node's buffer from the device and
 * are remembered in it (mfs_buf.bt_checked); the rest on every visit
 * (mfs_bt_node_get() says why that is enough).
 *
 * This file holds lookups and iteration; btree_int.h lists the others and
 * what each may call.  Node blocks come from fs->bt_alloc (the meta zone
 * allocator, which sits above the trees and sets it at mount).
 *
 * Locking: the caller serializes modifications of one tree (the owning
 * inode's lock, or the superblock's for shared trees) against each other and
 * against lookups of the same tree; lookups of different trees run
 * concurrently.  A node's content lock (mfs_buf.lock) is held while it is
 * read or changed, never two at a time, and never across mfs_meta_read(),
 * mfs_meta_new() or the allocator.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree_int.h"

/* --- lookups ----------------------------------------------------------------------- */

/* Copy a checked leaf's slot @i out. */
static void leaf_copy_out(uint8_t *blk, unsigned i, void *val, uint16_t *len)
{
	unsigned vlen = slot_len(blk, i);

	if (len) {
		if (val)
			memcpy(val, blk + slot_off(blk, i), vlen < *len ? vlen : *len);
		*len = vlen;
	}
}

enum bt_find_mode { BT_EXACT, BT_LE, BT_GE };

/*
 * One step down from internal node @b (locked and referenced; released
 * here): the child whose subtree holds @key, its block into *@blocknr and its
 * key bounds into *@bd (which held @b's; @root: @b is the root, unbounded).
 */
static void bt_step_down(struct mfs_buf *b, uint64_t key, bool root, struct bt_bounds *bd,
                         uint64_t *blocknr)
{
	unsigned i = node_child(b->data, key); /* 0 below the first separator */
	struct bt_bounds cbd;

	child_bounds(b->data, i, root ? NULL : bd, &cbd);
	*blocknr = ptr_child(b->data, i);
	*bd = cbd;
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
}

/*
 * Descend to the leaf for @key and look it up: exactly, the greatest key <=
 * @key (BT_LE) or the smallest >= @key (BT_GE: past the end of its leaf, the
 * next leaf, whose lowest key is the leaf's upper bound, as separators are
 * exact).  One node's lock at a time, no copy of the leaf.
 */
static int bt_find(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, enum bt_find_mode mode,
                   uint64_t *found, void *val, uint16_t *len)
{
	struct bt_bounds bd = {0};
	uint64_t blocknr = bt->root;
	unsigned level;
	int ret;

	if (!bt->root)
		return -ENOENT;
	ret = mfs_bt_tree_check(bt);
	if (ret)
		return ret;
	for (level = bt->depth;; level--) {
		struct mfs_buf *b;
		unsigned i;

		ret = mfs_bt_node_get(fs, bt, blocknr, level, level == bt->depth ? NULL : &bd, &b);
		if (ret)
			return ret;
		if (level) {
			/* separators are exact: below the first one there is nothing */
			if (key < ptr_key(b->data, 0) && mode != BT_GE) {
				mfs_unlock(&b->lock);
				mfs_buf_put(b);
				return -ENOENT;
			}
			bt_step_down(b, key, level == bt->depth, &bd, &blocknr);
			continue;
		}
		i = leaf_lower(b->data, key);
		ret = 0;
		if (i < node_nr(b->data) && (mode == BT_GE || slot_key(b->data, i) == key)) {
			/* exact hit, or the first key past @key */
		} else if (mode == BT_LE && i > 0) {
			i--;
		} else if (mode == BT_GE && bt->depth > 0 && bd.has_hi && bd.hi > key) {
			/* past this leaf's end: descend again to the next leaf */
			mfs_unlock(&b->lock);
			mfs_buf_put(b);
			key = bd.hi;
			blocknr = bt->root;
			bd = (struct bt_bounds){0};
			level = bt->depth + 1;
			continue;
		} else {
			ret = -ENOENT;
		}
		if (!ret) {
			if (found)
				*found = slot_key(b->data, i);
			leaf_copy_out(b->data, i, val, len);
		}
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		return ret;
	}
}

int mfs_bt_lookup(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, void *val,
                  uint16_t *len)
{
	return bt_find(fs, bt, key, BT_EXACT, NULL, val, len);
}

int mfs_bt_lookup_le(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *found,
                     void *val, uint16_t *len)
{
	return bt_find(fs, bt, key, BT_LE, found, val, len);
}

int mfs_bt_lookup_ge(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *found,
                     void *val, uint16_t *len)
{
	return bt_find(fs, bt, key, BT_GE, found, val, len);
}

/*
 * One descent for both neighbours of @key.  Only when one lies in another
 * leaf (@key at a leaf's edge) does that one cost a second descent.
 */
int mfs_bt_lookup_near(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *le_key,
                       void *le_val, uint16_t *le_len, uint64_t *ge_key, void *ge_val,
                       uint16_t *ge_len, struct mfs_bt_hint *hint)
{
	struct bt_bounds bd = {0};
	uint64_t blocknr = bt->root;
	bool le_other = false, ge_other = false;
	unsigned level;
	int ret, found = 0;

	if (hint)
		*hint = (struct mfs_bt_hint){
		        .frees = atomic_load_explicit(&fs->bt_frees, memory_order_acquire)};
	if (!bt->root)
		return 0;
	ret = mfs_bt_tree_check(bt);
	if (ret)
		return ret;
	for (level = bt->depth;; level--) {
		struct mfs_buf *b;
		unsigned i, nr;

		ret = mfs_bt_node_get(fs, bt, blocknr, level, level == bt->depth ? NULL : &bd, &b);
		if (ret)
			return ret;
		if (level) {
			bt_step_down(b, key, level == bt->depth, &bd, &blocknr);
			continue;
		}
		nr = node_nr(b->data);
		i = leaf_lower(b->data, key);
		if (hint && i > 0 && i < nr && slot_key(b->data, i) != key)
			hint->leaf = blocknr; /* entries on both sides of @key */
		if (i < nr) {
			*ge_key = slot_key(b->data, i);
			leaf_copy_out(b->data, i, ge_val, ge_len);
			found |= MFS_BT_GE;
		} else {
			/* the next leaf starts at this one's upper bound (exact separators) */
			ge_other = bt->depth > 0 && bd.has_hi && bd.hi > key;
		}
		if (i < nr && slot_key(b->data, i) == key) {
			*le_key = key;
			leaf_copy_out(b->data, i, le_val, le_len);
			found |= MFS_BT_LE;
		} else if (i > 0) {
			*le_key = slot_key(b->data, i - 1);
			leaf_copy_out(b->data, i - 1, le_val, le_len);
			found |= MFS_BT_LE;
		} else {
			/* keys below this leaf's lower bound are in an earlier leaf */
			le_other = bt->depth > 0 && bd.has_lo;
		}
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		break;
	}
	if (le_other) {
		ret = bt_find(fs, bt, key, BT_LE, le_key, le_val, le_len);
		if (!ret)
			found |= MFS_BT_LE;
		else if (ret != -ENOENT)
			return ret;
	}
	if (ge_other) {
		ret = bt_find(fs, bt, key, BT_GE, ge_key, ge_val, ge_len);
		if (!ret)
			found |= MFS_BT_GE;
		else if (ret != -ENOENT)
			return ret;
	}
	return found;
}

int mfs_bt_lookup_around(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *le_key,
                         void *le_val, uint16_t *le_len, uint64_t *ge_key, void *ge_val,
                         uint16_t *ge_len)
{
	return mfs_bt_lookup_near(fs, bt, key, le_key, le_val, le_len, ge_key, ge_val, ge_len,
	                          NULL);
}

/* --- iteration --------------------------------------------------------------------- */

int mfs_bt_iterate(struct mfs *fs, const struct mfs_btree *bt, uint64_t start, mfs_bt_iter_fn *fn,
                   void *arg)
{
	uint8_t copy[MFS_BLOCK_SIZE];
	struct bt_path path;
	int ret;

	/*
	 * One descent per leaf, from the key where the last leaf's range ended:
	 * no lock or reference is held while @fn runs, so it may use the tree.
	 */
	for (;;) {
		struct mfs_buf *leaf;
		struct bt_bounds *bd;
		unsigned i, nr;
		uint64_t next;
		bool more;

		if (!bt->root)
			return 0;
		ret = mfs_bt_path_find(fs, bt, start, &path);
		if (ret)
			return ret;
		leaf = path.b[path.depth];
		bd = &path.bd[path.depth];
		more = path.depth > 0 && bd->has_hi;
		next = bd->hi;
		mfs_lock(&leaf->lock);
		memcpy(copy, leaf->data, MFS_BLOCK_SIZE);
		mfs_unlock(&leaf->lock);
		i = path.idx[path.depth];
		mfs_bt_path_release(&path);

		nr = node_nr(copy);
		for (; i < nr; i++) {
			ret = fn(arg, slot_key(copy, i), copy + slot_off(copy, i),
			         slot_len(copy, i));
			if (ret)
				return ret;
		}
		if (!more)
			return 0;
		start = next;
	}
}
