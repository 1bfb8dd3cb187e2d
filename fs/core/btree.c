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
 * -EUCLEAN, logged with its block number.
 *
 * Locking: the caller serializes modifications of one tree (the owning
 * inode's lock, or the superblock's for shared trees) against each other and
 * against lookups of the same tree; lookups of different trees run
 * concurrently.  A node's content lock (mfs_buf.lock) is held while it is
 * read or changed, never two at a time, and never across mfs_meta_read(),
 * mfs_meta_new() or the allocator.
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfs.h"

#define BT_HDR       ((unsigned)sizeof(struct mfs_meta_hdr))
#define BT_SPACE     (MFS_BLOCK_SIZE - BT_HDR) /* bytes after the header */
#define BT_SLOT      ((unsigned)sizeof(struct mfs_bt_slot))
#define BT_LEAF_MAX  (BT_SPACE / BT_SLOT) /* slots in a leaf */
#define BT_LEAF_MIN  (BT_SPACE / 4)       /* bytes used, non-root leaf */
#define BT_NODE_MAX  ((unsigned)MFS_BT_NODE_MAX)
#define BT_NODE_MIN  (BT_NODE_MAX / 4) /* children, non-root node */
#define BT_MAX_DEPTH 12                /* far beyond any meta zone: 63^12 leaves */

_Static_assert(BT_SLOT + MFS_BT_MAX_VALUE <= BT_SPACE / 3, "a split leaf halves fit one block");
_Static_assert(BT_LEAF_MAX <= 0xffff && MFS_BLOCK_SIZE <= 0xffff, "slot fields are 16-bit");

/* A leaf entry while a leaf is rebuilt; val points into a private copy. */
struct bt_ent {
	uint64_t key;
	const uint8_t *val;
	uint16_t len;
};

/* Key range a node must hold: lo is its exact lowest key; hi is exclusive. */
struct bt_bounds {
	uint64_t lo, hi;
	bool has_lo, has_hi;
};

/* The nodes from the root (position 0) down to a leaf (position depth). */
struct bt_path {
	unsigned depth;
	unsigned nr; /* positions holding a reference */
	struct mfs_buf *b[BT_MAX_DEPTH + 1];
	unsigned idx[BT_MAX_DEPTH + 1]; /* child taken, or the leaf's slot */
	struct bt_bounds bd[BT_MAX_DEPTH + 1];
};

/* --- raw node access (little-endian on disk) -------------------------------------- */

static inline struct mfs_meta_hdr *node_hdr(uint8_t *blk)
{
	return (struct mfs_meta_hdr *)blk;
}

static inline unsigned node_nr(const uint8_t *blk)
{
	return le32toh(((const struct mfs_meta_hdr *)blk)->nr_items);
}

static inline void node_set_nr(uint8_t *blk, unsigned nr)
{
	node_hdr(blk)->nr_items = htole32(nr);
}

static inline struct mfs_bt_slot *leaf_slots(uint8_t *blk)
{
	return (struct mfs_bt_slot *)(blk + BT_HDR);
}

static inline struct mfs_bt_ptr *node_ptrs(uint8_t *blk)
{
	return (struct mfs_bt_ptr *)(blk + BT_HDR);
}

static inline uint64_t slot_key(uint8_t *blk, unsigned i)
{
	return le64toh(leaf_slots(blk)[i].key);
}

static inline unsigned slot_off(uint8_t *blk, unsigned i)
{
	return le16toh(leaf_slots(blk)[i].off);
}

static inline unsigned slot_len(uint8_t *blk, unsigned i)
{
	return le16toh(leaf_slots(blk)[i].len);
}

static inline uint64_t ptr_key(uint8_t *blk, unsigned i)
{
	return le64toh(node_ptrs(blk)[i].key);
}

static inline uint64_t ptr_child(uint8_t *blk, unsigned i)
{
	return le64toh(node_ptrs(blk)[i].child);
}

static inline void ptr_set(uint8_t *blk, unsigned i, uint64_t key, uint64_t child)
{
	node_ptrs(blk)[i].key = htole64(key);
	node_ptrs(blk)[i].child = htole64(child);
}

/* Lowest key of a checked, non-empty node of either kind. */
static inline uint64_t node_min(uint8_t *blk, unsigned level)
{
	return level ? ptr_key(blk, 0) : slot_key(blk, 0);
}

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
 * Check a node before anything in it is used.  @level is where the tree says
 * it is, @bd the key range its parent gives it (none for the root).
 */
static int node_check(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr, uint8_t *blk,
                      unsigned level, const struct bt_bounds *bd)
{
	struct mfs_meta_hdr *hdr = node_hdr(blk);
	unsigned nr = node_nr(blk), i;
	uint16_t type = level ? MFS_T_BTREE_NODE : MFS_T_BTREE_LEAF;

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
	if (level) {
		if (nr == 0 || nr > BT_NODE_MAX) {
			bt_corrupt(bt, blocknr, "%u children (1..%u)", nr, BT_NODE_MAX);
			return -EUCLEAN;
		}
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

		if (nr > BT_LEAF_MAX || (nr == 0 && bd)) {
			bt_corrupt(bt, blocknr, "%u slots", nr);
			return -EUCLEAN;
		}
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
 */
static int node_get(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr, unsigned level,
                    const struct bt_bounds *bd, struct mfs_buf **bp)
{
	struct mfs_buf *b;
	int ret;

	if (!in_meta_zone(fs, blocknr)) {
		bt_corrupt(bt, blocknr, "outside the meta zone");
		return -EUCLEAN;
	}
	ret = mfs_meta_read(fs, blocknr, level ? MFS_T_BTREE_NODE : MFS_T_BTREE_LEAF, &b);
	if (ret)
		return ret;
	pthread_mutex_lock(&b->lock);
	ret = node_check(fs, bt, blocknr, b->data, level, bd);
	if (ret) {
		pthread_mutex_unlock(&b->lock);
		mfs_buf_put(b);
		return ret;
	}
	*bp = b;
	return 0;
}

static int tree_check(const struct mfs_btree *bt)
{
	if (bt->depth > BT_MAX_DEPTH) {
		bt_corrupt(bt, bt->root, "tree depth %u", bt->depth);
		return -EUCLEAN;
	}
	return 0;
}

/* --- searching inside a node ------------------------------------------------------- */

/* First slot with key >= @key (nr if none). */
static unsigned leaf_lower(uint8_t *blk, uint64_t key)
{
	unsigned lo = 0, hi = node_nr(blk);

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (slot_key(blk, mid) < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Child whose range holds @key: the last with ptr.key <= key, or 0. */
static unsigned node_child(uint8_t *blk, uint64_t key)
{
	unsigned lo = 1, hi = node_nr(blk);

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (ptr_key(blk, mid) <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

/* Range of child @i of @blk, a node whose own range is @bd. */
static void child_bounds(uint8_t *blk, unsigned i, const struct bt_bounds *bd,
                         struct bt_bounds *cbd)
{
	cbd->lo = ptr_key(blk, i);
	cbd->has_lo = true;
	if (i + 1 < node_nr(blk)) {
		cbd->hi = ptr_key(blk, i + 1);
		cbd->has_hi = true;
	} else {
		cbd->hi = bd ? bd->hi : 0;
		cbd->has_hi = bd && bd->has_hi;
	}
}

/* --- leaf pages -------------------------------------------------------------------- */

/* Bytes taken after the header: slots and values. */
static unsigned leaf_used(uint8_t *blk)
{
	unsigned nr = node_nr(blk), used = nr * BT_SLOT, i;

	for (i = 0; i < nr; i++)
		used += slot_len(blk, i);
	return used;
}

/* Lowest value offset: the end of the free gap after the slot array. */
static unsigned leaf_data_start(uint8_t *blk)
{
	unsigned nr = node_nr(blk), start = MFS_BLOCK_SIZE, i;

	for (i = 0; i < nr; i++)
		if (slot_len(blk, i) && slot_off(blk, i) < start)
			start = slot_off(blk, i);
	return start;
}

/* Pack the values against the end of the block and zero the gap. */
static void leaf_compact(uint8_t *blk)
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
	start = leaf_data_start(blk);
	if (start - (BT_HDR + node_nr(blk) * BT_SLOT) < len) {
		leaf_compact(blk);
		start = leaf_data_start(blk);
	}
	memcpy(blk + start - len, val, len);
	s[i].off = htole16(start - len);
	s[i].len = htole16(len);
}

/* Insert at slot @i; the caller checked that leaf_used() + slot + len fits. */
static void leaf_insert_at(uint8_t *blk, unsigned i, uint64_t key, const void *val, unsigned len)
{
	struct mfs_bt_slot *s = leaf_slots(blk);
	unsigned nr = node_nr(blk);

	/* the slot array grows into the gap: make room for it first */
	if (leaf_data_start(blk) - (BT_HDR + nr * BT_SLOT) < BT_SLOT + len)
		leaf_compact(blk);
	memmove(&s[i + 1], &s[i], (nr - i) * BT_SLOT);
	s[i].key = htole64(key);
	s[i].len = 0;
	s[i].off = htole16(MFS_BLOCK_SIZE);
	s[i].__pad = 0;
	node_set_nr(blk, nr + 1);
	leaf_place(blk, i, val, len);
}

static void leaf_remove_at(uint8_t *blk, unsigned i)
{
	struct mfs_bt_slot *s = leaf_slots(blk);
	unsigned nr = node_nr(blk);

	memmove(&s[i], &s[i + 1], (nr - i - 1) * BT_SLOT);
	memset(&s[nr - 1], 0, BT_SLOT);
	node_set_nr(blk, nr - 1);
}

/* Entries of a (private copy of a) leaf. */
static unsigned leaf_gather(uint8_t *blk, struct bt_ent *e)
{
	unsigned nr = node_nr(blk), i;

	for (i = 0; i < nr; i++) {
		e[i].key = slot_key(blk, i);
		e[i].len = slot_len(blk, i);
		e[i].val = blk + slot_off(blk, i);
	}
	return nr;
}

/* Rewrite a leaf's items as @e[0..n), packed; the header is kept. */
static void leaf_build(uint8_t *blk, const struct bt_ent *e, unsigned n)
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

static unsigned ents_bytes(const struct bt_ent *e, unsigned n)
{
	unsigned bytes = 0, i;

	for (i = 0; i < n; i++)
		bytes += BT_SLOT + e[i].len;
	return bytes;
}

/*
 * Where to cut @n entries (more than one block's worth, at most two) into two
 * leaves: the most even cut by bytes with both sides fitting.
 */
static unsigned leaf_split_point(const struct bt_ent *e, unsigned n)
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

static void node_init(const struct mfs_btree *bt, uint8_t *blk, unsigned level)
{
	struct mfs_meta_hdr *hdr = node_hdr(blk);

	hdr->level = htole16(level);
	hdr->owner = htole64(bt->owner);
	hdr->tree = htole32(bt->kind);
	hdr->nr_items = 0;
}

/* Free a node the tree no longer points to; drops the caller's reference. */
static int node_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_buf *b)
{
	uint64_t blocknr = b->blocknr;
	int ret;

	mfs_buf_put(b);
	ret = fs->bt_alloc->free(fs, txn, blocknr);
	mfs_meta_forget(fs, blocknr);
	return ret;
}

/* Allocate @n empty nodes: nb[0] at @level0, the rest interior (level set on use). */
static int nodes_alloc(struct mfs *fs, struct mfs_txn *txn, const struct mfs_btree *bt, unsigned n,
                       unsigned level0, struct mfs_buf **nb)
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
			fs->bt_alloc->free(fs, txn, blocknr);
			break;
		}
	}
	if (ret)
		while (i--)
			node_free(fs, txn, nb[i]);
	return ret;
}

/* --- paths ------------------------------------------------------------------------- */

static void path_release(struct bt_path *path)
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
static int path_find(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, struct bt_path *path)
{
	uint64_t blocknr = bt->root;
	unsigned p;
	int ret;

	path->depth = bt->depth;
	path->nr = 0;
	ret = tree_check(bt);
	if (ret)
		return ret;
	for (p = 0; p <= path->depth; p++) {
		unsigned level = path->depth - p;
		struct mfs_buf *b;

		if (p == 0)
			path->bd[0] = (struct bt_bounds){0};
		ret = node_get(fs, bt, blocknr, level, p ? &path->bd[p] : NULL, &b);
		if (ret) {
			path_release(path);
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
		pthread_mutex_unlock(&b->lock);
	}
	return 0;
}

/*
 * After the lowest key of the node at @p changed, make the separators above
 * it say so, as far up as the change reaches.
 */
static void path_fix_keys(struct mfs_txn *txn, struct bt_path *path, unsigned p)
{
	for (; p > 0; p--) {
		struct mfs_buf *b = path->b[p], *pb = path->b[p - 1];
		unsigned level = path->depth - p, i = path->idx[p - 1];
		uint64_t min;

		pthread_mutex_lock(&b->lock);
		if (!node_nr(b->data)) {
			pthread_mutex_unlock(&b->lock);
			return;
		}
		min = node_min(b->data, level);
		pthread_mutex_unlock(&b->lock);

		pthread_mutex_lock(&pb->lock);
		if (ptr_key(pb->data, i) == min) {
			pthread_mutex_unlock(&pb->lock);
			return;
		}
		node_ptrs(pb->data)[i].key = htole64(min);
		mfs_txn_dirty(txn, pb);
		pthread_mutex_unlock(&pb->lock);
		if (i)
			return;
	}
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
	ret = nodes_alloc(fs, txn, bt, need, 0, nb);
	if (ret)
		return ret;

	m = leaf_split_point(e, n);
	pthread_mutex_lock(&leaf->lock);
	leaf_build(leaf->data, e, m);
	mfs_txn_dirty(txn, leaf);
	pthread_mutex_unlock(&leaf->lock);
	pthread_mutex_lock(&nb[0]->lock);
	node_init(bt, nb[0]->data, 0);
	leaf_build(nb[0]->data, e + m, n - m);
	mfs_txn_dirty(txn, nb[0]);
	pthread_mutex_unlock(&nb[0]->lock);
	left_min = e[0].key;
	sep = e[m].key;
	right = nb[0]->blocknr;

	for (p = depth; p > 0; p--) {
		struct mfs_buf *pb = path->b[p - 1], *rb;
		unsigned i = path->idx[p - 1], nr, h, level = depth - p + 1;

		pthread_mutex_lock(&pb->lock);
		nr = node_nr(pb->data);
		if (nr < BT_NODE_MAX) {
			struct mfs_bt_ptr *ptr = node_ptrs(pb->data);

			ptr[i].key = htole64(left_min);
			memmove(&ptr[i + 2], &ptr[i + 1], (nr - i - 1) * sizeof(*ptr));
			ptr_set(pb->data, i + 1, sep, right);
			node_set_nr(pb->data, nr + 1);
			mfs_txn_dirty(txn, pb);
			pthread_mutex_unlock(&pb->lock);
			if (i == 0)
				path_fix_keys(txn, path, p - 1);
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
		mfs_txn_dirty(txn, pb);
		pthread_mutex_unlock(&pb->lock);

		rb = nb[k++];
		pthread_mutex_lock(&rb->lock);
		node_init(bt, rb->data, level);
		memcpy(node_ptrs(rb->data), tmp + h, (nr + 1 - h) * sizeof(*tmp));
		node_set_nr(rb->data, nr + 1 - h);
		mfs_txn_dirty(txn, rb);
		pthread_mutex_unlock(&rb->lock);
		left_min = le64toh(tmp[0].key);
		sep = le64toh(tmp[h].key);
		right = rb->blocknr;
	}

	/* the root split: a new root above the two halves */
	{
		struct mfs_buf *rb = nb[k++];

		pthread_mutex_lock(&rb->lock);
		node_init(bt, rb->data, depth + 1);
		ptr_set(rb->data, 0, left_min, bt->root);
		ptr_set(rb->data, 1, sep, right);
		node_set_nr(rb->data, 2);
		mfs_txn_dirty(txn, rb);
		pthread_mutex_unlock(&rb->lock);
		bt->root = rb->blocknr;
		bt->depth = depth + 1;
	}
out:
	for (p = 0; p < k; p++)
		mfs_buf_put(nb[p]);
	return 0;
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

	pthread_mutex_lock(&lb->lock);
	memcpy(lcopy, lb->data, MFS_BLOCK_SIZE);
	pthread_mutex_unlock(&lb->lock);
	pthread_mutex_lock(&rb->lock);
	memcpy(rcopy, rb->data, MFS_BLOCK_SIZE);
	pthread_mutex_unlock(&rb->lock);

	if (level == 0) {
		struct bt_ent e[2 * BT_LEAF_MAX];
		unsigned n = leaf_gather(lcopy, e), m;

		n += leaf_gather(rcopy, e + n);
		*merged = ents_bytes(e, n) <= BT_SPACE;
		m = *merged ? n : leaf_split_point(e, n);
		pthread_mutex_lock(&lb->lock);
		leaf_build(lb->data, e, m);
		mfs_txn_dirty(txn, lb);
		pthread_mutex_unlock(&lb->lock);
		if (!*merged) {
			pthread_mutex_lock(&rb->lock);
			leaf_build(rb->data, e + m, n - m);
			mfs_txn_dirty(txn, rb);
			pthread_mutex_unlock(&rb->lock);
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
		pthread_mutex_lock(&lb->lock);
		memcpy(node_ptrs(lb->data), tmp, m * sizeof(*tmp));
		memset(node_ptrs(lb->data) + m, 0, (BT_NODE_MAX - m) * sizeof(*tmp));
		node_set_nr(lb->data, m);
		mfs_txn_dirty(txn, lb);
		pthread_mutex_unlock(&lb->lock);
		if (!*merged) {
			pthread_mutex_lock(&rb->lock);
			memcpy(node_ptrs(rb->data), tmp + m, (n - m) * sizeof(*tmp));
			memset(node_ptrs(rb->data) + (n - m), 0,
			       (BT_NODE_MAX - (n - m)) * sizeof(*tmp));
			node_set_nr(rb->data, n - m);
			mfs_txn_dirty(txn, rb);
			pthread_mutex_unlock(&rb->lock);
			rmin = le64toh(tmp[m].key);
		}
		lmin = le64toh(tmp[0].key);
	}

	pthread_mutex_lock(&pb->lock);
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
	mfs_txn_dirty(txn, pb);
	pthread_mutex_unlock(&pb->lock);
}

/*
 * After a leaf lost bytes: from the leaf up, keep separators exact, merge or
 * redistribute underfull nodes, shrink the root.
 */
static int path_rebalance(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt,
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

		pthread_mutex_lock(&b->lock);
		under = node_underfull(b->data, level);
		pthread_mutex_unlock(&b->lock);
		pthread_mutex_lock(&pb->lock);
		pnr = node_nr(pb->data);
		if (!under || pnr < 2) {
			pthread_mutex_unlock(&pb->lock);
			path_fix_keys(txn, path, p);
			continue;
		}
		j = i + 1 < pnr ? i + 1 : i - 1;
		child_bounds(pb->data, j, &path->bd[p - 1], &sbd);
		sibling = ptr_child(pb->data, j);
		pthread_mutex_unlock(&pb->lock);

		ret = node_get(fs, bt, sibling, level, &sbd, &sb);
		if (ret)
			break;
		pthread_mutex_unlock(&sb->lock);
		lb = j < i ? sb : b;
		rb = j < i ? b : sb;
		siblings_balance(txn, pb, j < i ? j : i, lb, rb, level, &merged);
		if (merged) {
			/* the right node goes; the reference to the left one is dropped */
			if (rb == b) {
				path->b[p] = NULL;
				mfs_buf_put(sb);
			}
			ret2 = node_free(fs, txn, rb);
			if (ret2 && !ret)
				ret = ret2;
		} else {
			mfs_buf_put(sb);
		}
		/* the parent's lowest key may have moved with the left node's */
		path_fix_keys(txn, path, p - 1);
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
			pthread_mutex_lock(&rootb->lock);
		} else {
			ret = node_get(fs, bt, bt->root, bt->depth, NULL, &rootb);
			if (ret)
				return ret;
		}
		if (node_nr(rootb->data) != 1) {
			pthread_mutex_unlock(&rootb->lock);
			mfs_buf_put(rootb);
			return 0;
		}
		child = ptr_child(rootb->data, 0);
		pthread_mutex_unlock(&rootb->lock);
		ret = node_free(fs, txn, rootb);
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
			pthread_mutex_lock(&rootb->lock);
		} else {
			ret = node_get(fs, bt, bt->root, 0, NULL, &rootb);
			if (ret)
				return ret;
		}
		empty = node_nr(rootb->data) == 0;
		pthread_mutex_unlock(&rootb->lock);
		if (!empty || (bt->flags & MFS_BT_KEEP_ROOT)) {
			mfs_buf_put(rootb);
			return 0;
		}
		bt->root = 0;
		return node_free(fs, txn, rootb);
	}
}

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

/*
 * Descend to the leaf for @key and look it up: exactly (@le false) or the
 * greatest key <= @key.
 */
static int bt_find(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, bool le,
                   uint64_t *found, void *val, uint16_t *len)
{
	struct bt_bounds bd = {0}, cbd;
	uint64_t blocknr = bt->root;
	unsigned level;
	int ret;

	if (!bt->root)
		return -ENOENT;
	ret = tree_check(bt);
	if (ret)
		return ret;
	for (level = bt->depth;; level--) {
		struct mfs_buf *b;
		unsigned i;

		ret = node_get(fs, bt, blocknr, level, level == bt->depth ? NULL : &bd, &b);
		if (ret)
			return ret;
		if (level) {
			/* separators are exact: below the first one there is nothing */
			if (key < ptr_key(b->data, 0)) {
				pthread_mutex_unlock(&b->lock);
				mfs_buf_put(b);
				return -ENOENT;
			}
			i = node_child(b->data, key);
			child_bounds(b->data, i, level == bt->depth ? NULL : &bd, &cbd);
			blocknr = ptr_child(b->data, i);
			bd = cbd;
			pthread_mutex_unlock(&b->lock);
			mfs_buf_put(b);
			continue;
		}
		i = leaf_lower(b->data, key);
		ret = 0;
		if (i < node_nr(b->data) && slot_key(b->data, i) == key) {
			/* exact hit */
		} else if (le && i > 0) {
			i--;
		} else {
			ret = -ENOENT;
		}
		if (!ret) {
			if (found)
				*found = slot_key(b->data, i);
			leaf_copy_out(b->data, i, val, len);
		}
		pthread_mutex_unlock(&b->lock);
		mfs_buf_put(b);
		return ret;
	}
}

int mfs_bt_lookup(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, void *val,
                  uint16_t *len)
{
	return bt_find(fs, bt, key, false, NULL, val, len);
}

int mfs_bt_lookup_le(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *found,
                     void *val, uint16_t *len)
{
	return bt_find(fs, bt, key, true, found, val, len);
}

/* --- modifications ----------------------------------------------------------------- */

int mfs_bt_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                  const void *val, uint16_t len)
{
	uint8_t copy[MFS_BLOCK_SIZE];
	struct bt_ent e[BT_LEAF_MAX + 1];
	struct bt_path path;
	struct mfs_buf *leaf;
	unsigned i, n;
	int ret;

	if (len > MFS_BT_MAX_VALUE || (len && !val))
		return -EINVAL;
	if (!bt->root) {
		struct bt_ent one = {.key = key, .val = val, .len = len};

		ret = nodes_alloc(fs, txn, bt, 1, 0, &leaf);
		if (ret)
			return ret;
		pthread_mutex_lock(&leaf->lock);
		node_init(bt, leaf->data, 0);
		leaf_build(leaf->data, &one, 1);
		mfs_txn_dirty(txn, leaf);
		pthread_mutex_unlock(&leaf->lock);
		bt->root = leaf->blocknr;
		bt->depth = 0;
		mfs_buf_put(leaf);
		return 0;
	}

	ret = path_find(fs, bt, key, &path);
	if (ret)
		return ret;
	leaf = path.b[path.depth];
	i = path.idx[path.depth];
	pthread_mutex_lock(&leaf->lock);
	if (i < node_nr(leaf->data) && slot_key(leaf->data, i) == key) {
		ret = -EEXIST;
	} else if (leaf_used(leaf->data) + BT_SLOT + len <= BT_SPACE) {
		leaf_insert_at(leaf->data, i, key, val, len);
		mfs_txn_dirty(txn, leaf);
		pthread_mutex_unlock(&leaf->lock);
		if (i == 0)
			path_fix_keys(txn, &path, path.depth);
		goto out;
	} else {
		memcpy(copy, leaf->data, MFS_BLOCK_SIZE);
		pthread_mutex_unlock(&leaf->lock);
		n = leaf_gather(copy, e);
		memmove(&e[i + 1], &e[i], (n - i) * sizeof(*e));
		e[i] = (struct bt_ent){.key = key, .val = val, .len = len};
		ret = path_split(fs, txn, bt, &path, e, n + 1);
		goto out;
	}
	pthread_mutex_unlock(&leaf->lock);
out:
	path_release(&path);
	return ret;
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
	if (!bt->root)
		return -ENOENT;
	ret = path_find(fs, bt, key, &path);
	if (ret)
		return ret;
	leaf = path.b[path.depth];
	i = path.idx[path.depth];
	pthread_mutex_lock(&leaf->lock);
	if (i >= node_nr(leaf->data) || slot_key(leaf->data, i) != key) {
		pthread_mutex_unlock(&leaf->lock);
		ret = -ENOENT;
		goto out;
	}
	oldlen = slot_len(leaf->data, i);
	if (len == oldlen) {
		if (len)
			memcpy(leaf->data + slot_off(leaf->data, i), val, len);
		mfs_txn_dirty(txn, leaf);
		pthread_mutex_unlock(&leaf->lock);
		goto out;
	}
	if (leaf_used(leaf->data) - oldlen + len <= BT_SPACE) {
		/* the old value becomes a hole (or compaction reclaims it) */
		leaf_place(leaf->data, i, val, len);
		mfs_txn_dirty(txn, leaf);
		pthread_mutex_unlock(&leaf->lock);
		if (len < oldlen)
			ret = path_rebalance(fs, txn, bt, &path);
		goto out;
	}
	memcpy(copy, leaf->data, MFS_BLOCK_SIZE);
	pthread_mutex_unlock(&leaf->lock);
	n = leaf_gather(copy, e);
	e[i].val = val;
	e[i].len = len;
	ret = path_split(fs, txn, bt, &path, e, n);
out:
	path_release(&path);
	return ret;
}

int mfs_bt_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key)
{
	struct bt_path path;
	struct mfs_buf *leaf;
	unsigned i;
	int ret;

	if (!bt->root)
		return -ENOENT;
	ret = path_find(fs, bt, key, &path);
	if (ret)
		return ret;
	leaf = path.b[path.depth];
	i = path.idx[path.depth];
	pthread_mutex_lock(&leaf->lock);
	if (i >= node_nr(leaf->data) || slot_key(leaf->data, i) != key) {
		pthread_mutex_unlock(&leaf->lock);
		ret = -ENOENT;
		goto out;
	}
	leaf_remove_at(leaf->data, i);
	mfs_txn_dirty(txn, leaf);
	pthread_mutex_unlock(&leaf->lock);
	ret = path_rebalance(fs, txn, bt, &path);
out:
	path_release(&path);
	return ret;
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
		ret = path_find(fs, bt, start, &path);
		if (ret)
			return ret;
		leaf = path.b[path.depth];
		bd = &path.bd[path.depth];
		more = path.depth > 0 && bd->has_hi;
		next = bd->hi;
		pthread_mutex_lock(&leaf->lock);
		memcpy(copy, leaf->data, MFS_BLOCK_SIZE);
		pthread_mutex_unlock(&leaf->lock);
		i = path.idx[path.depth];
		path_release(&path);

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

	ret = node_get(fs, bt, blocknr, level, bd, &b);
	if (ret)
		return ret;
	if (level) {
		nr = node_nr(b->data);
		ptrs = malloc(nr * sizeof(*ptrs));
		if (!ptrs) {
			pthread_mutex_unlock(&b->lock);
			mfs_buf_put(b);
			return -ENOMEM;
		}
		memcpy(ptrs, node_ptrs(b->data), nr * sizeof(*ptrs));
		if (bd)
			self = *bd;
	}
	pthread_mutex_unlock(&b->lock);
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
	ret = tree_check(bt);
	if (ret)
		return ret;
	/* check the whole tree first: a corrupt tree frees nothing */
	ret = subtree_collect(fs, bt, bt->root, bt->depth, NULL, &list);
	if (!ret) {
		for (i = 0; i < list.nr; i++) {
			int r = fs->bt_alloc->free(fs, txn, list.v[i]);

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
