/* SPDX-License-Identifier: MIT */
/*
 * The B+tree's nodes (the tree as a whole: btree.c): checked reads (nothing
 * read from a node is used before node_check() accepted it), leaf rebuilds,
 * node blocks from fs->bt_alloc, and paths from the root to a leaf.  It calls
 * the buffer cache (meta.c) and the journal (mfs_txn_dirty).
 */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree_int.h"

/* --- checks ------------------------------------------------------------------------ */

static void __attribute__((format(printf, 3, 4)))
bt_corrupt(const struct mfs_btree *bt, uint64_t blocknr, const char *fmt, ...)
{
	char msg[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "mendfs: btree block %llu (owner %llu, tree %u): %s\n",
	        (unsigned long long)blocknr, (unsigned long long)bt->owner, bt->kind, msg);
}

static bool in_meta_zone(const struct mfs *fs, uint64_t blocknr)
{
	return blocknr >= fs->sb.meta_start && blocknr - fs->sb.meta_start < fs->sb.meta_len;
}

/*
 * The items of a node at @level: children in the meta zone and in key order;
 * leaf values inside the block, after the slots, not overlapping; keys in
 * order.  O(items): done once per fill of the buffer (mfs_bt_node_get).
 */
static int node_check_items(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr,
                            uint8_t *blk, unsigned level)
{
	unsigned nr = node_nr(blk), i;

	if (level) {
		for (i = 0; i < nr; i++) {
			uint64_t child = ptr_child(blk, i);

			if (!in_meta_zone(fs, child) || child == blocknr) {
				bt_corrupt(bt, blocknr, "child %u points to block %llu", i,
				           (unsigned long long)child);
				return -EUCLEAN;
			}
			if (i && ptr_key(blk, i) <= ptr_key(blk, i - 1)) {
				bt_corrupt(bt, blocknr, "key %u out of order", i);
				return -EUCLEAN;
			}
		}
	} else {
		unsigned slot_end = BT_HDR + nr * BT_SLOT, used = 0;

		for (i = 0; i < nr; i++) {
			unsigned off = slot_off(blk, i), len = slot_len(blk, i);

			if (len > MFS_BT_MAX_VALUE || off + len > MFS_BLOCK_SIZE ||
			    (len && off < slot_end)) {
				bt_corrupt(bt, blocknr, "slot %u: value at %u length %u", i, off,
				           len);
				return -EUCLEAN;
			}
			if (i && slot_key(blk, i) <= slot_key(blk, i - 1)) {
				bt_corrupt(bt, blocknr, "key %u out of order", i);
				return -EUCLEAN;
			}
			used += len;
		}
		if (slot_end + used > MFS_BLOCK_SIZE) {
			bt_corrupt(bt, blocknr, "values overlap (%u bytes in %u)", used,
			           MFS_BLOCK_SIZE - slot_end);
			return -EUCLEAN;
		}
	}
	return 0;
}

/*
 * Check a node before anything in it is used.  @level is where the tree says
 * it is, @bd the key range its parent gives it (none for the root).  What
 * depends on the way in (type, level, owner, tree, item count, the key range)
 * is checked on every visit, in O(1); the items (node_check_items) only when
 * @items.
 */
static int node_check(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr, uint8_t *blk,
                      unsigned level, const struct bt_bounds *bd, bool items)
{
	struct mfs_meta_hdr *hdr = node_hdr(blk);
	unsigned nr = node_nr(blk);
	uint16_t type = level ? MFS_T_BTREE_NODE : MFS_T_BTREE_LEAF;
	int ret;

	if (le16toh(hdr->type) != type || le16toh(hdr->level) != level) {
		bt_corrupt(bt, blocknr, "type %u level %u, expected type %u level %u",
		           le16toh(hdr->type), le16toh(hdr->level), type, level);
		return -EUCLEAN;
	}
	if (le64toh(hdr->owner) != bt->owner || le32toh(hdr->tree) != bt->kind) {
		bt_corrupt(bt, blocknr, "belongs to owner %llu tree %u",
		           (unsigned long long)le64toh(hdr->owner), le32toh(hdr->tree));
		return -EUCLEAN;
	}
	if (level && (nr == 0 || nr > BT_NODE_MAX)) {
		bt_corrupt(bt, blocknr, "%u children (1..%u)", nr, BT_NODE_MAX);
		return -EUCLEAN;
	}
	if (!level && (nr > BT_LEAF_MAX || (nr == 0 && bd))) {
		bt_corrupt(bt, blocknr, "%u slots", nr);
		return -EUCLEAN;
	}
	if (items) {
		ret = node_check_items(fs, bt, blocknr, blk, level);
		if (ret)
			return ret;
	}
	if (bd && nr) {
		uint64_t first = node_min(blk, level);
		uint64_t last = level ? ptr_key(blk, nr - 1) : slot_key(blk, nr - 1);

		if ((bd->has_lo && first != bd->lo) || (bd->has_hi && last >= bd->hi)) {
			bt_corrupt(bt, blocknr, "keys %llu..%llu outside the parent's range",
			           (unsigned long long)first, (unsigned long long)last);
			return -EUCLEAN;
		}
	}
	return 0;
}

/*
 * Read node @blocknr at @level and check it.  Returns with a reference and the
 * content lock held.  @bd NULL: the root.
 *
 * The items of a node are checked once per fill of its buffer: b->bt_checked
 * is cleared by the cache whenever the data comes from the device (a miss
 * after eviction, a re-read after a refused transaction, a read healed from
 * the twin, mfs_meta_new) and set here once node_check_items() accepted them.
 * Until the next fill only the tree's own code changes the data, under the
 * content lock, and each of its changes keeps the items valid by
 * construction: a leaf gains or loses a slot at its sorted place, its value
 * placed between the slots and the values after a room check (compacted if
 * need be), or is rewritten whole by mfs_bt_leaf_build() from sorted entries
 * that fit; an interior node gains, loses or moves pointers to blocks from
 * fs->bt_alloc at their sorted place, within 1..BT_NODE_MAX.  A change that fails
 * half way leaves its transaction refused, and the journal marks its buffers
 * for re-reading.  Built with MFS_BT_VERIFY_CHECKED (the unit tests' mock),
 * a checked node is checked again anyway and a failure aborts.
 */
MFS_BT_SHARED int mfs_bt_node_get(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr,
                                  unsigned level, const struct bt_bounds *bd, struct mfs_buf **bp)
{
	struct mfs_buf *b;
	int ret;

	if (!in_meta_zone(fs, blocknr)) {
		bt_corrupt(bt, blocknr, "outside the meta zone");
		return -EUCLEAN;
	}
	ret = mfs_meta_read_locked(fs, blocknr, level ? MFS_T_BTREE_NODE : MFS_T_BTREE_LEAF, &b);
	if (ret)
		return ret;
	ret = node_check(fs, bt, blocknr, b->data, level, bd, !b->bt_checked);
#ifdef MFS_BT_VERIFY_CHECKED
	if (!ret && b->bt_checked && node_check_items(fs, bt, blocknr, b->data, level)) {
		fprintf(stderr, "btree block %llu: changed by the tree into an invalid node\n",
		        (unsigned long long)blocknr);
		abort();
	}
#endif
	if (ret) {
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
		return ret;
	}
	b->bt_checked = true;
	*bp = b;
	return 0;
}

MFS_BT_SHARED int mfs_bt_tree_check(const struct mfs_btree *bt)
{
	if (bt->depth > BT_MAX_DEPTH) {
		bt_corrupt(bt, bt->root, "tree depth %u", bt->depth);
		return -EUCLEAN;
	}
	return 0;
}

/* --- leaf pages -------------------------------------------------------------------- */

/* Rewrite a leaf's items as @e[0..n), packed; the header is kept. */
MFS_BT_SHARED void mfs_bt_leaf_build(uint8_t *blk, const struct bt_ent *e, unsigned n)
{
	struct mfs_bt_slot *s = leaf_slots(blk);
	unsigned end = MFS_BLOCK_SIZE, i;

	for (i = 0; i < n; i++) {
		s[i].key = htole64(e[i].key);
		s[i].len = htole16(e[i].len);
		s[i].__pad = 0;
		if (e[i].len) {
			end -= e[i].len;
			memcpy(blk + end, e[i].val, e[i].len);
		}
		s[i].off = htole16(e[i].len ? end : MFS_BLOCK_SIZE);
	}
	memset(blk + BT_HDR + n * BT_SLOT, 0, end - (BT_HDR + n * BT_SLOT));
	node_set_nr(blk, n);
}

/*
 * Where to cut @n entries (more than one block's worth, at most two) into two
 * leaves: the most even cut by bytes with both sides fitting.
 */
MFS_BT_SHARED unsigned mfs_bt_leaf_split_point(const struct bt_ent *e, unsigned n)
{
	unsigned total = ents_bytes(e, n), left = 0, best = 1, i;
	long best_diff = -1;

	for (i = 1; i < n; i++) {
		long diff;

		left += BT_SLOT + e[i - 1].len;
		if (left > BT_SPACE)
			break;
		if (total - left > BT_SPACE)
			continue;
		diff = labs((long)left - (long)(total - left));
		if (best_diff < 0 || diff < best_diff) {
			best_diff = diff;
			best = i;
		}
	}
	return best;
}

/* --- allocation -------------------------------------------------------------------- */

/* Free a node the tree no longer points to; drops the caller's reference. */
MFS_BT_SHARED int mfs_bt_node_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_buf *b)
{
	uint64_t blocknr = b->blocknr;
	int ret;

	mfs_buf_put(b);
	ret = bt_block_free(fs, txn, blocknr);
	mfs_meta_forget(fs, blocknr);
	return ret;
}

/* Allocate @n empty nodes: nb[0] at @level0, the rest interior (level set on use). */
MFS_BT_SHARED int mfs_bt_nodes_alloc(struct mfs *fs, struct mfs_txn *txn,
                                     const struct mfs_btree *bt, unsigned n, unsigned level0,
                                     struct mfs_buf **nb)
{
	unsigned i;
	int ret = 0;

	for (i = 0; i < n; i++) {
		uint16_t type = (i == 0 && level0 == 0) ? MFS_T_BTREE_LEAF : MFS_T_BTREE_NODE;
		uint64_t blocknr;

		ret = fs->bt_alloc->alloc(fs, txn, &blocknr);
		if (ret)
			break;
		ret = mfs_meta_new(fs, blocknr, type, bt->owner, &nb[i]);
		if (ret) {
			bt_block_free(fs, txn, blocknr);
			break;
		}
	}
	if (ret)
		while (i--)
			mfs_bt_node_free(fs, txn, nb[i]);
	return ret;
}

/* --- paths ------------------------------------------------------------------------- */

MFS_BT_SHARED void mfs_bt_path_release(struct bt_path *path)
{
	unsigned p;

	for (p = 0; p < path->nr; p++)
		if (path->b[p])
			mfs_buf_put(path->b[p]);
	path->nr = 0;
}

/*
 * Walk from the root to the leaf whose range holds @key, checking every node.
 * References stay in @path, locks do not.
 */
MFS_BT_SHARED int mfs_bt_path_find(struct mfs *fs, const struct mfs_btree *bt, uint64_t key,
                                   struct bt_path *path)
{
	uint64_t blocknr = bt->root;
	unsigned p;
	int ret;

	path->depth = bt->depth;
	path->nr = 0;
	ret = mfs_bt_tree_check(bt);
	if (ret)
		return ret;
	for (p = 0; p <= path->depth; p++) {
		unsigned level = path->depth - p;
		struct mfs_buf *b;

		if (p == 0)
			path->bd[0] = (struct bt_bounds){0};
		ret = mfs_bt_node_get(fs, bt, blocknr, level, p ? &path->bd[p] : NULL, &b);
		if (ret) {
			mfs_bt_path_release(path);
			return ret;
		}
		path->b[p] = b;
		path->nr = p + 1;
		if (level) {
			unsigned i = node_child(b->data, key);

			path->idx[p] = i;
			child_bounds(b->data, i, &path->bd[p], &path->bd[p + 1]);
			blocknr = ptr_child(b->data, i);
		} else {
			path->idx[p] = leaf_lower(b->data, key);
		}
		mfs_unlock(&b->lock);
	}
	return 0;
}

/*
 * mfs_bt_path_find() for an existing @key: on success the leaf is locked and
 * @i is its slot; -ENOENT (path released) if the tree does not hold @key.
 */
MFS_BT_SHARED int mfs_bt_path_find_exact(struct mfs *fs, const struct mfs_btree *bt, uint64_t key,
                                         struct bt_path *path, unsigned *i)
{
	struct mfs_buf *leaf;
	int ret;

	if (!bt->root)
		return -ENOENT;
	ret = mfs_bt_path_find(fs, bt, key, path);
	if (ret)
		return ret;
	leaf = path->b[path->depth];
	*i = path->idx[path->depth];
	mfs_lock(&leaf->lock);
	if (*i >= node_nr(leaf->data) || slot_key(leaf->data, *i) != key) {
		mfs_unlock(&leaf->lock);
		mfs_bt_path_release(path);
		return -ENOENT;
	}
	return 0;
}

/*
 * After the lowest key of the node at @p changed, make the separators above
 * it say so, as far up as the change reaches.
 */
MFS_BT_SHARED void mfs_bt_path_fix_keys(struct mfs_txn *txn, struct bt_path *path, unsigned p)
{
	for (; p > 0; p--) {
		struct mfs_buf *b = path->b[p], *pb = path->b[p - 1];
		unsigned level = path->depth - p, i = path->idx[p - 1];
		uint64_t min;

		mfs_lock(&b->lock);
		if (!node_nr(b->data)) {
			mfs_unlock(&b->lock);
			return;
		}
		min = node_min(b->data, level);
		mfs_unlock(&b->lock);

		mfs_lock(&pb->lock);
		if (ptr_key(pb->data, i) == min) {
			mfs_unlock(&pb->lock);
			return;
		}
		node_ptrs(pb->data)[i].key = htole64(min);
		bt_dirty(txn, pb);
		mfs_unlock(&pb->lock);
		if (i)
			return;
	}
}
