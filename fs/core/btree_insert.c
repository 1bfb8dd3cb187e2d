/* SPDX-License-Identifier: MIT */
/*
 * B+tree insert and update: a value placed in its leaf's free gap (compacted
 * when needed), or the leaf split by bytes and every full parent above it by
 * count, a new root on top when the split reaches the root.  Every block a
 * split needs is allocated first, so a failed allocation changes nothing.
 * It calls btree_node.c and, for an update that shrinks a value,
 * btree_delete.c's rebalance.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree_int.h"

/* --- leaf pages -------------------------------------------------------------------- */

/*
 * One pass over a leaf's slots: the bytes they take after the header
 * (leaf_used()), and in *start the lowest offset of a value (the end of the
 * gap after the slot array).
 */
static unsigned leaf_scan(uint8_t *blk, unsigned *start)
{
	unsigned nr = node_nr(blk), used = nr * BT_SLOT, st = MFS_BLOCK_SIZE, i;

	for (i = 0; i < nr; i++) {
		unsigned len = slot_len(blk, i);

		used += len;
		if (len && slot_off(blk, i) < st)
			st = slot_off(blk, i);
	}
	*start = st;
	return used;
}

/*
 * leaf_scan() of leaf @b (content lock held), from the cache in the buffer
 * when an insert left it there: an insert into a full leaf's neighbourhood
 * scans once per leaf fill or other change, not once per insert.
 */
static unsigned leaf_scan_cached(struct mfs_buf *b, unsigned *start)
{
	unsigned used;

	if (b->bt_start) {
#ifdef MFS_BT_VERIFY_CHECKED
		unsigned st;

		if (leaf_scan(b->data, &st) != b->bt_used || st != b->bt_start) {
			fprintf(stderr,
			        "btree block %llu: cached scan %u/%u, the leaf says %u/%u\n",
			        (unsigned long long)b->blocknr, b->bt_used, b->bt_start,
			        leaf_scan(b->data, &st), st);
			abort();
		}
#endif
		*start = b->bt_start;
		return b->bt_used;
	}
	used = leaf_scan(b->data, start);
	b->bt_used = (uint16_t)used;
	b->bt_start = (uint16_t)*start;
	return used;
}

/* Pack the values against the end of the block and zero the gap.  Returns the new data start. */
static unsigned leaf_compact(uint8_t *blk)
{
	uint8_t tmp[MFS_BLOCK_SIZE];
	unsigned nr = node_nr(blk), end = MFS_BLOCK_SIZE, i;
	struct mfs_bt_slot *s = leaf_slots(blk);

	for (i = 0; i < nr; i++) {
		unsigned len = slot_len(blk, i);

		if (!len) {
			s[i].off = htole16(MFS_BLOCK_SIZE);
			continue;
		}
		end -= len;
		memcpy(tmp + end, blk + slot_off(blk, i), len);
		s[i].off = htole16(end);
	}
	memcpy(blk + end, tmp + end, MFS_BLOCK_SIZE - end);
	memset(blk + BT_HDR + nr * BT_SLOT, 0, end - (BT_HDR + nr * BT_SLOT));
	return end;
}

/*
 * Store a value of @len (> 0) for slot @i, which holds none, given the data
 * start of the other slots: compacts if the gap is too small.  Returns the
 * new data start.
 */
static unsigned leaf_place_from(uint8_t *blk, unsigned i, const void *val, unsigned len,
                                unsigned start)
{
	struct mfs_bt_slot *s = leaf_slots(blk);

	if (start - (BT_HDR + node_nr(blk) * BT_SLOT) < len)
		start = leaf_compact(blk);
	memcpy(blk + start - len, val, len);
	s[i].off = htole16(start - len);
	s[i].len = htole16(len);
	return start - len;
}

/* Store a value of @len for slot @i, compacting if the gap is too small. */
static void leaf_place(uint8_t *blk, unsigned i, const void *val, unsigned len)
{
	struct mfs_bt_slot *s = leaf_slots(blk);
	unsigned start;

	s[i].len = 0;
	s[i].off = htole16(MFS_BLOCK_SIZE);
	if (!len)
		return;
	leaf_scan(blk, &start);
	leaf_place_from(blk, i, val, len, start);
}

/*
 * Insert at slot @i; the caller checked that leaf_used() + slot + len fits
 * and passes the data start (leaf_scan()).  Returns the new data start.
 */
static unsigned leaf_insert_at(uint8_t *blk, unsigned i, uint64_t key, const void *val,
                               unsigned len, unsigned start)
{
	struct mfs_bt_slot *s = leaf_slots(blk);
	unsigned nr = node_nr(blk);

	/* the slot array grows into the gap: make room for it first */
	if (start - (BT_HDR + nr * BT_SLOT) < BT_SLOT + len)
		start = leaf_compact(blk);
	memmove(&s[i + 1], &s[i], (nr - i) * BT_SLOT);
	s[i].key = htole64(key);
	s[i].len = 0;
	s[i].off = htole16(MFS_BLOCK_SIZE);
	s[i].__pad = 0;
	node_set_nr(blk, nr + 1);
	return len ? leaf_place_from(blk, i, val, len, start) : start;
}

/*
 * Insert into leaf @b at slot @i, known to fit: @used and @start are its
 * leaf_scan() before; the scan after is left in the buffer.
 */
static void leaf_insert_cached(struct mfs_txn *txn, struct mfs_buf *b, unsigned i, uint64_t key,
                               const void *val, unsigned len, unsigned used, unsigned start)
{
	start = leaf_insert_at(b->data, i, key, val, len, start);
	bt_dirty(txn, b);
	b->bt_used = (uint16_t)(used + BT_SLOT + len);
	b->bt_start = (uint16_t)start;
}

/* --- split ------------------------------------------------------------------------- */

/*
 * The leaf at the end of @path must hold @e[0..n), which does not fit one
 * block: split it in two, and every full parent above it; a split root gets a
 * new root above it.
 */
static int path_split(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt,
                      struct bt_path *path, const struct bt_ent *e, unsigned n)
{
	struct mfs_buf *nb[BT_MAX_DEPTH + 2];
	struct mfs_bt_ptr tmp[BT_NODE_MAX + 1];
	unsigned depth = path->depth, need = 1, k = 1, m, p;
	uint64_t sep, right, left_min;
	struct mfs_buf *leaf = path->b[depth];
	int ret;

	/* plan: the leaf, each full parent, and a new root if the split reaches it */
	for (p = depth; p > 0 && node_nr(path->b[p - 1]->data) == BT_NODE_MAX; p--)
		need++;
	if (p == 0) {
		if (depth + 1 > BT_MAX_DEPTH)
			return -ENOSPC;
		need++;
	}
	ret = mfs_bt_nodes_alloc(fs, txn, bt, need, 0, nb);
	if (ret)
		return ret;

	m = mfs_bt_leaf_split_point(e, n);
	mfs_lock(&leaf->lock);
	mfs_bt_leaf_build(leaf->data, e, m);
	bt_dirty(txn, leaf);
	mfs_unlock(&leaf->lock);
	mfs_lock(&nb[0]->lock);
	node_init(bt, nb[0]->data, 0);
	mfs_bt_leaf_build(nb[0]->data, e + m, n - m);
	bt_dirty(txn, nb[0]);
	mfs_unlock(&nb[0]->lock);
	left_min = e[0].key;
	sep = e[m].key;
	right = nb[0]->blocknr;

	for (p = depth; p > 0; p--) {
		struct mfs_buf *pb = path->b[p - 1], *rb;
		unsigned i = path->idx[p - 1], nr, h, level = depth - p + 1;

		mfs_lock(&pb->lock);
		nr = node_nr(pb->data);
		if (nr < BT_NODE_MAX) {
			struct mfs_bt_ptr *ptr = node_ptrs(pb->data);

			ptr[i].key = htole64(left_min);
			memmove(&ptr[i + 2], &ptr[i + 1], (nr - i - 1) * sizeof(*ptr));
			ptr_set(pb->data, i + 1, sep, right);
			node_set_nr(pb->data, nr + 1);
			bt_dirty(txn, pb);
			mfs_unlock(&pb->lock);
			if (i == 0)
				mfs_bt_path_fix_keys(txn, path, p - 1);
			goto out;
		}
		/* full: the node and the new pointer, halved */
		memcpy(tmp, node_ptrs(pb->data), nr * sizeof(*tmp));
		tmp[i].key = htole64(left_min);
		memmove(&tmp[i + 2], &tmp[i + 1], (nr - i - 1) * sizeof(*tmp));
		tmp[i + 1].key = htole64(sep);
		tmp[i + 1].child = htole64(right);
		h = (nr + 1) / 2;
		memcpy(node_ptrs(pb->data), tmp, h * sizeof(*tmp));
		memset(node_ptrs(pb->data) + h, 0, (BT_NODE_MAX - h) * sizeof(*tmp));
		node_set_nr(pb->data, h);
		bt_dirty(txn, pb);
		mfs_unlock(&pb->lock);

		rb = nb[k++];
		mfs_lock(&rb->lock);
		node_init(bt, rb->data, level);
		memcpy(node_ptrs(rb->data), tmp + h, (nr + 1 - h) * sizeof(*tmp));
		node_set_nr(rb->data, nr + 1 - h);
		bt_dirty(txn, rb);
		mfs_unlock(&rb->lock);
		left_min = le64toh(tmp[0].key);
		sep = le64toh(tmp[h].key);
		right = rb->blocknr;
	}

	/* the root split: a new root above the two halves */
	{
		struct mfs_buf *rb = nb[k++];

		mfs_lock(&rb->lock);
		node_init(bt, rb->data, depth + 1);
		ptr_set(rb->data, 0, left_min, bt->root);
		ptr_set(rb->data, 1, sep, right);
		node_set_nr(rb->data, 2);
		bt_dirty(txn, rb);
		mfs_unlock(&rb->lock);
		bt->root = rb->blocknr;
		bt->depth = depth + 1;
	}
out:
	for (p = 0; p < k; p++)
		mfs_buf_put(nb[p]);
	return 0;
}

/* --- modifications ----------------------------------------------------------------- */

int mfs_bt_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                  const void *val, uint16_t len)
{
	uint8_t copy[MFS_BLOCK_SIZE];
	struct bt_ent e[BT_LEAF_MAX + 1];
	struct bt_path path;
	struct mfs_buf *leaf;
	unsigned i, n, start, used = 0;
	int ret;

	if (len > MFS_BT_MAX_VALUE || (len && !val))
		return -EINVAL;
	if (!bt->root) {
		struct bt_ent one = {.key = key, .val = val, .len = len};

		ret = mfs_bt_nodes_alloc(fs, txn, bt, 1, 0, &leaf);
		if (ret)
			return ret;
		mfs_lock(&leaf->lock);
		node_init(bt, leaf->data, 0);
		mfs_bt_leaf_build(leaf->data, &one, 1);
		bt_dirty(txn, leaf);
		mfs_unlock(&leaf->lock);
		bt->root = leaf->blocknr;
		bt->depth = 0;
		mfs_buf_put(leaf);
		return 0;
	}

	ret = mfs_bt_path_find(fs, bt, key, &path);
	if (ret)
		return ret;
	leaf = path.b[path.depth];
	i = path.idx[path.depth];
	mfs_lock(&leaf->lock);
	if (i < node_nr(leaf->data) && slot_key(leaf->data, i) == key) {
		ret = -EEXIST;
	} else if ((used = leaf_scan_cached(leaf, &start)) + BT_SLOT + len <= BT_SPACE) {
		leaf_insert_cached(txn, leaf, i, key, val, len, used, start);
		mfs_unlock(&leaf->lock);
		if (i == 0)
			mfs_bt_path_fix_keys(txn, &path, path.depth);
		goto out;
	} else {
		memcpy(copy, leaf->data, MFS_BLOCK_SIZE);
		mfs_unlock(&leaf->lock);
		n = leaf_gather(copy, e);
		memmove(&e[i + 1], &e[i], (n - i) * sizeof(*e));
		e[i] = (struct bt_ent){.key = key, .val = val, .len = len};
		ret = path_split(fs, txn, bt, &path, e, n + 1);
		goto out;
	}
	mfs_unlock(&leaf->lock);
out:
	mfs_bt_path_release(&path);
	return ret;
}

/*
 * The insert into a hinted leaf: 1 done, 0 when the leaf does not take it
 * (the key not strictly inside its keys, no room), or -errno.  The hint is
 * current (mfs_bt_insert_near), so the block is a live node of @bt: the
 * checks of mfs_bt_node_get() hold, and a failure is real damage.
 */
static int insert_in_leaf(struct mfs *fs, struct mfs_txn *txn, const struct mfs_btree *bt,
                          uint64_t blocknr, uint64_t key, const void *val, uint16_t len)
{
	struct mfs_buf *leaf;
	unsigned nr, i, start, used = 0;
	int ret = mfs_bt_node_get(fs, bt, blocknr, 0, NULL, &leaf);

	if (ret)
		return ret;
	nr = node_nr(leaf->data);
	i = leaf_lower(leaf->data, key);
	ret = i > 0 && i < nr && slot_key(leaf->data, i) != key &&
	      (used = leaf_scan_cached(leaf, &start)) + BT_SLOT + len <= BT_SPACE;
	if (ret)
		leaf_insert_cached(txn, leaf, i, key, val, len, used, start);
	mfs_unlock(&leaf->lock);
	mfs_buf_put(leaf);
	return ret;
}

int mfs_bt_insert_near(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                       const void *val, uint16_t len, const struct mfs_bt_hint *hint)
{
	int ret;

	if (hint && hint->leaf && bt->root && len <= MFS_BT_MAX_VALUE && (val || !len) &&
	    hint->frees == atomic_load_explicit(&fs->bt_frees, memory_order_acquire)) {
		ret = insert_in_leaf(fs, txn, bt, hint->leaf, key, val, len);
		if (ret)
			return ret < 0 ? ret : 0;
	}
	return mfs_bt_insert(fs, txn, bt, key, val, len);
}

int mfs_bt_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                  const void *val, uint16_t len)
{
	uint8_t copy[MFS_BLOCK_SIZE];
	struct bt_ent e[BT_LEAF_MAX];
	struct bt_path path;
	struct mfs_buf *leaf;
	unsigned i, n, oldlen;
	int ret = 0;

	if (len > MFS_BT_MAX_VALUE || (len && !val))
		return -EINVAL;
	ret = mfs_bt_path_find_exact(fs, bt, key, &path, &i);
	if (ret)
		return ret;
	leaf = path.b[path.depth];
	oldlen = slot_len(leaf->data, i);
	if (len == oldlen) {
		if (len)
			memcpy(leaf->data + slot_off(leaf->data, i), val, len);
		bt_dirty(txn, leaf);
		mfs_unlock(&leaf->lock);
		goto out;
	}
	if (leaf_used(leaf->data) - oldlen + len <= BT_SPACE) {
		/* the old value becomes a hole (or compaction reclaims it) */
		leaf_place(leaf->data, i, val, len);
		bt_dirty(txn, leaf);
		mfs_unlock(&leaf->lock);
		if (len < oldlen)
			ret = mfs_bt_path_rebalance(fs, txn, bt, &path);
		goto out;
	}
	memcpy(copy, leaf->data, MFS_BLOCK_SIZE);
	mfs_unlock(&leaf->lock);
	n = leaf_gather(copy, e);
	e[i].val = val;
	e[i].len = len;
	ret = path_split(fs, txn, bt, &path, e, n);
out:
	mfs_bt_path_release(&path);
	return ret;
}
