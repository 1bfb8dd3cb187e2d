/* SPDX-License-Identifier: MIT */
/*
 * Private to the B+tree (btree*.c; the overview is at the top of btree.c):
 * the node layout, the in-memory types of its files, and what they share.
 * Its files, lowest first, each calling only those before it (and the
 * buffer cache, the journal, and fs->bt_alloc for node blocks):
 *
 *   btree_node.c    checked reads of nodes, leaf rebuilds, node blocks, paths
 *   btree.c         lookups and iteration
 *   btree_delete.c  delete, merge and redistribution, destroy
 *   btree_insert.c  insert and update, splits (a shrinking update rebalances
 *                   like a delete)
 */
#ifndef MENDFS_FS_BTREE_INT_H
#define MENDFS_FS_BTREE_INT_H

#include <endian.h>
#include <string.h>

#include "mfs.h"

/*
 * The functions the tree's files share.  Extern in the library;
 * tests/unit/test_btree.c compiles the files into itself against a mock of
 * the layers below, and defines this as static so that its copies stay its own.
 */
#ifndef MFS_BT_SHARED
#define MFS_BT_SHARED
#endif

#define BT_HDR       ((unsigned)sizeof(struct mfs_meta_hdr))
#define BT_SPACE     (MFS_BLOCK_SIZE - BT_HDR) /* bytes after the header */
#define BT_SLOT      ((unsigned)sizeof(struct mfs_bt_slot))
#define BT_LEAF_MAX  (BT_SPACE / BT_SLOT) /* slots in a leaf */
#define BT_LEAF_MIN  (BT_SPACE / 4)       /* bytes used, non-root leaf */
#define BT_NODE_MAX  ((unsigned)MFS_BT_NODE_MAX)
#define BT_NODE_MIN  (BT_NODE_MAX / 4)       /* children, non-root node */
#define BT_MAX_DEPTH ((int)MFS_BT_MAX_DEPTH) /* far beyond any meta zone: 63^12 leaves */

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

/* --- searching inside a node ------------------------------------------------------- */

/* First slot with key >= @key (nr if none). */
static inline unsigned leaf_lower(uint8_t *blk, uint64_t key)
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
static inline unsigned node_child(uint8_t *blk, uint64_t key)
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
static inline void child_bounds(uint8_t *blk, unsigned i, const struct bt_bounds *bd,
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

/* --- leaf entries ------------------------------------------------------------------ */

/* Bytes taken after the header: slots and values. */
static inline unsigned leaf_used(uint8_t *blk)
{
	unsigned nr = node_nr(blk), used = nr * BT_SLOT, i;

	for (i = 0; i < nr; i++)
		used += slot_len(blk, i);
	return used;
}

static inline unsigned ents_bytes(const struct bt_ent *e, unsigned n)
{
	unsigned bytes = 0, i;

	for (i = 0; i < n; i++)
		bytes += BT_SLOT + e[i].len;
	return bytes;
}

/* Entries of a (private copy of a) leaf. */
static inline unsigned leaf_gather(uint8_t *blk, struct bt_ent *e)
{
	unsigned nr = node_nr(blk), i;

	for (i = 0; i < nr; i++) {
		e[i].key = slot_key(blk, i);
		e[i].len = slot_len(blk, i);
		e[i].val = blk + slot_off(blk, i);
	}
	return nr;
}

static inline void node_init(const struct mfs_btree *bt, uint8_t *blk, unsigned level)
{
	struct mfs_meta_hdr *hdr = node_hdr(blk);

	hdr->level = htole16(level);
	hdr->owner = htole64(bt->owner);
	hdr->tree = htole32(bt->kind);
	hdr->nr_items = 0;
}

/* --- shared by the tree's files (btree_node.c unless said otherwise) --------------- */

/*
 * Read node @blocknr at @level and check it.  Returns with a reference and the
 * content lock held.  @bd NULL: the root.
 */
MFS_BT_SHARED int mfs_bt_node_get(struct mfs *fs, const struct mfs_btree *bt, uint64_t blocknr,
                                  unsigned level, const struct bt_bounds *bd, struct mfs_buf **bp);
/* A tree deeper than BT_MAX_DEPTH is corrupt: -EUCLEAN, else 0. */
MFS_BT_SHARED int mfs_bt_tree_check(const struct mfs_btree *bt);
/* Rewrite a leaf's items as @e[0..n), packed; the header is kept. */
MFS_BT_SHARED void mfs_bt_leaf_build(uint8_t *blk, const struct bt_ent *e, unsigned n);
/* Where to cut @n entries (more than a block's worth, at most two) into two leaves. */
MFS_BT_SHARED unsigned mfs_bt_leaf_split_point(const struct bt_ent *e, unsigned n);
/* Free a node the tree no longer points to; drops the caller's reference. */
MFS_BT_SHARED int mfs_bt_node_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_buf *b);
/* Allocate @n empty nodes: nb[0] at @level0, the rest interior (level set on use). */
MFS_BT_SHARED int mfs_bt_nodes_alloc(struct mfs *fs, struct mfs_txn *txn,
                                     const struct mfs_btree *bt, unsigned n, unsigned level0,
                                     struct mfs_buf **nb);
/*
 * Every change of a node goes into the transaction through here: it forgets
 * the leaf's cached scan (struct mfs_buf.bt_start), which only the insert
 * that made the change sets again.
 */
static inline void bt_dirty(struct mfs_txn *txn, struct mfs_buf *b)
{
	b->bt_start = 0;
	mfs_txn_dirty(txn, b);
}

/*
 * Give a node block back to fs->bt_alloc.  Every B+tree block freed goes
 * through here: it counts the free, which retires every struct mfs_bt_hint
 * taken before it (mfs.h).
 */
static inline int bt_block_free(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr)
{
	atomic_fetch_add_explicit(&fs->bt_frees, 1, memory_order_release);
	return fs->bt_alloc->free(fs, txn, blocknr);
}
MFS_BT_SHARED void mfs_bt_path_release(struct bt_path *path);
/*
 * Walk from the root to the leaf whose range holds @key, checking every node.
 * References stay in @path, locks do not.
 */
MFS_BT_SHARED int mfs_bt_path_find(struct mfs *fs, const struct mfs_btree *bt, uint64_t key,
                                   struct bt_path *path);
/*
 * mfs_bt_path_find() for an existing @key: on success the leaf is locked and
 * @i is its slot; -ENOENT (path released) if the tree does not hold @key.
 */
MFS_BT_SHARED int mfs_bt_path_find_exact(struct mfs *fs, const struct mfs_btree *bt, uint64_t key,
                                         struct bt_path *path, unsigned *i);
/* After the lowest key of the node at @p changed, fix the separators above it. */
MFS_BT_SHARED void mfs_bt_path_fix_keys(struct mfs_txn *txn, struct bt_path *path, unsigned p);
/*
 * (btree_delete.c) After a leaf lost bytes: from the leaf up, keep separators
 * exact, merge or redistribute underfull nodes, shrink the root.
 */
MFS_BT_SHARED int mfs_bt_path_rebalance(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt,
                                        struct bt_path *path);

#endif /* MENDFS_FS_BTREE_INT_H */
