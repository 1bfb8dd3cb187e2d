/* SPDX-License-Identifier: MIT */
/*
 * File data: the extent map, read/write, truncate, fallocate,
 * SEEK_DATA/SEEK_HOLE and fsync (docs/FORMAT.md §6.2, §6.3).
 *
 * Extent map.  Up to MFS_INLINE_EXTENTS extents live in the inode
 * (di.u.ext[0 .. nr_inline), sorted by lblk); the fifth converts the map to
 * an extent B+tree (MFS_TREE_EXTENTS, key lblk, value struct mfs_extent,
 * root di.ext_root/ext_depth, flag MFS_IFL_EXTENT_TREE).  A tree whose root
 * leaf is back to at most four extents after a punch returns inline.
 * Adjacent extents (contiguous in lblk and pblk, same flags) are merged.
 * Everything goes through five primitives (map_find_le, map_find_ge,
 * map_insert, map_update, map_delete) and the range operations built on
 * them: map_punch (unmap a range), map_add (map an empty range, merging with
 * its neighbours) and free_unit/free_steps (unmap and free a range).
 *
 * Bounded transactions (docs/DESIGN.md §3).  Nothing here builds a
 * transaction that grows with the file: truncate, punch hole and the final
 * free of an inode (free_steps) run in handles opened with
 * mfs_txn_begin_step, each doing units of known worst-case cost while
 * mfs_txn_room allows, each a consistent file; writes and fallocate stop a
 * handle's map-changing segments at a step's limit by their worst case.  A shrinking truncate first
 * sets the new size and puts the inode on the orphan list (the restart
 * point that mount and fsck complete, docs/FORMAT.md §10), then frees past
 * EOF in steps, then leaves the list.
 *
 * Data moves in bios through the block engine, straight between the device
 * and the caller's buffer; only partial edge blocks go through a bounce
 * block.  Each call submits its bios under one plug (in batches of
 * FIO_BATCH) so that contiguous blocks merge.
 *
 * Ordered mode: a write allocates blocks inside a transaction handle, writes
 * the data, waits for it, and only then maps the blocks and ends the handle;
 * the journal's commit flushes before its commit record, so a committed
 * mapping never points at unwritten data.  Writes are cut into chunks of at
 * most CHUNK_BLOCKS (and of map changes whose worst case fits a step's
 * limit), one handle each, to bound the transaction.
 *
 * Recovery contract (docs/RECOVERY.md, sector granularity): a partial-block
 * write is a read-modify-write of the block; when that read meets poison the
 * write goes by sectors: sectors it covers whole are overwritten in place
 * (the engine clears their poison), and if it covers a poisoned sector only
 * in part it fails with -EIO before writing anything (lost bytes are never
 * silently replaced by zeros).  Whole blocks are overwritten in place;
 * ZERO_RANGE zeroes in place with BLK_OP_WRITE_ZEROES.
 *
 * Bytes past EOF in the last block are not zeroed when a truncate shrinks
 * the file (a truncate lost in a crash must not have destroyed data) but
 * when the size grows past them again (write, truncate, fallocate), before
 * the new size is set.
 *
 * Unwritten extents read as zeros and count as holes for SEEK_DATA and
 * SEEK_HOLE (ext4 without page-cache checks reports them as data; mendfs has
 * no page cache, and "unwritten = hole" lets cp --sparse skip them).
 *
 * Locking: ip->lock shared for reads, lseek and bmap; exclusive for writes,
 * truncate and fallocate (a write updates size and timestamps and may change
 * the map, and partial-block read-modify-write must not interleave).
 * mfs_truncate, mfs_truncate_finish, mfs_file_free_all, mfs_bmap and
 * mfs_file_release_blocks expect the caller to hold the lock (the first
 * three, which open their own handles, no handle).  No plug is open while
 * metadata is read or locks are taken.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "atime.h"
#include "mfs_int.h"

#define BS              MFS_BLOCK_SIZE
#define MAX_FILE_SIZE   (1ull << 50) /* 1 PiB */
#define MAX_FILE_BLOCKS (MAX_FILE_SIZE / BS)
#define EXT_MAX_LEN     (1u << 30) /* blocks in one extent */
#define CHUNK_BLOCKS    1024u      /* blocks per write transaction */
#define CHUNK_SEGS      64u        /* mapping segments per write transaction */
/* blocks freed by one unit of a bounded free: at most 5 data bitmap blocks change */
#define PIECE_BLOCKS   (4u * (unsigned)MFS_BITMAP_BITS)
#define BIO_MAX_BLOCKS 256u /* 1 MiB per bio */
#define GOAL_SPREAD    256u /* first-block goals are multiples of this (1 MiB) */
#define FIO_BATCH      128u

/* An extent in host order. */
struct fx {
	uint64_t lblk, pblk, len;
	uint32_t flags;
};

/* --- inode fields (the on-disk copy is little-endian) -------------------------------- */

static uint64_t di_size(const struct mfs_ino *ip)
{
	return le64toh(ip->di.size);
}

static void di_set_size(struct mfs_ino *ip, uint64_t size)
{
	ip->di.size = htole64(size);
}

static void di_add_blocks(struct mfs_ino *ip, int64_t d)
{
	ip->di.blocks = htole64(le64toh(ip->di.blocks) + (uint64_t)d);
}

static void di_touch(struct mfs_ino *ip, bool mtime)
{
	int64_t t = (int64_t)htole64((uint64_t)mfs_now_ns());

	ip->di.ctime_ns = t;
	if (mtime)
		ip->di.mtime_ns = t;
}

static bool is_tree(const struct mfs_ino *ip)
{
	return le32toh(ip->di.iflags) & MFS_IFL_EXTENT_TREE;
}

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

static void fx_load(struct fx *x, const struct mfs_extent *e)
{
	x->lblk = le64toh(e->lblk);
	x->pblk = le64toh(e->pblk);
	x->len = le32toh(e->len);
	x->flags = le32toh(e->flags);
}

static void fx_store(struct mfs_extent *e, const struct fx *x)
{
	e->lblk = htole64(x->lblk);
	e->pblk = htole64(x->pblk);
	e->len = htole32((uint32_t)x->len);
	e->flags = htole32(x->flags);
}

/* An extent read from the inode or its tree must lie in the data zone. */
static int fx_check(struct mfs *fs, const struct mfs_ino *ip, const struct fx *x)
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
static int file_free(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
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
static int map_find_le(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, struct fx *x)
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

struct ge_arg {
	struct fx *x;
	bool found;
	bool bad;
};

static int ge_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct ge_arg *a = arg;
	struct mfs_extent e;

	if (len != sizeof(e)) {
		a->bad = true;
		return 1;
	}
	memcpy(&e, val, sizeof(e));
	fx_load(a->x, &e);
	a->bad = a->x->lblk != key;
	a->found = true;
	return 1;
}

/* The extent with the smallest lblk >= @lblk.  -ENOENT if none. */
static int map_find_ge(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, struct fx *x)
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
	struct ge_arg a = {.x = x};
	int ret = mfs_bt_iterate(fs, &bt, lblk, ge_fn, &a);

	if (ret < 0)
		return ret;
	if (!a.found)
		return -ENOENT;
	if (a.bad)
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

static int map_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, const struct fx *x)
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

	ret = mfs_bt_insert(fs, txn, &bt, x->lblk, &e, sizeof(e));
	ext_tree_store(ip, &bt);
	return ret;
}

/* Replace the extent keyed x->lblk. */
static int map_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, const struct fx *x)
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
static int map_lookup(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, uint64_t *pblk,
                      uint64_t *count, bool *unwritten)
{
	struct fx x;
	int ret;

	*pblk = 0;
	*unwritten = false;
	if (lblk >= MAX_FILE_BLOCKS) {
		*count = 1;
		return 0;
	}
	ret = map_find_le(fs, ip, lblk, &x);
	if (ret && ret != -ENOENT)
		return ret;
	if (!ret && x.lblk + x.len > lblk) {
		*pblk = x.pblk + (lblk - x.lblk);
		*count = x.lblk + x.len - lblk;
		*unwritten = x.flags & MFS_EXT_UNWRITTEN;
		return 0;
	}
	ret = map_find_ge(fs, ip, lblk, &x);
	if (ret == -ENOENT) {
		*count = MAX_FILE_BLOCKS - lblk;
		return 0;
	}
	if (ret)
		return ret;
	*count = x.lblk - lblk;
	return 0;
}

/*
 * Cut [from, to) (inside it) out of extent @x: its head [x.lblk, from) stays
 * under the extent's key (or the entry goes), its tail [to, x end) becomes an
 * extent of its own.  Frees nothing.
 */
static int map_cut(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, const struct fx *x,
                   uint64_t from, uint64_t to)
{
	struct fx piece;
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
		ret = map_insert(fs, txn, ip, &piece);
	}
	return ret;
}

/*
 * Unmap [lblk, end) without freeing the blocks (a write converting
 * unwritten blocks it has just written), splitting extents that straddle its
 * edges.  Returns 0 or -errno.
 */
static int map_punch(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                     uint64_t end)
{
	int ret;

	while (lblk < end) {
		struct fx x;
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
 * Worst case of metadata blocks one change of the extent map dirties: the
 * path from the root, a split at every level and a new root, or a merged
 * sibling at every level, and the meta bitmap block of an allocated or freed
 * node.
 */
static unsigned map_cost(const struct mfs_ino *ip)
{
	unsigned d = is_tree(ip) ? le16toh(ip->di.ext_depth) : 0;

	return 2 * (d + 3);
}

/* Worst case of one write or fallocate segment: two map changes, its data bitmap blocks. */
static unsigned seg_cost(const struct mfs_ino *ip)
{
	return 2 * map_cost(ip) + 2;
}

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

/* Worst case of an orphan tree insert or delete, the roots record and the inode. */
static unsigned orphan_cost(struct mfs *fs)
{
	return 2 * ((unsigned)le32toh(fs->sb.orphan_depth) + 3) + 2;
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
	struct fx x;
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
	ret = file_free(fs, txn, x.pblk + (ps - x.lblk), oe - ps);
	di_add_blocks(ip, -(int64_t)(oe - ps));
	if (ret)
		return ret;
	if (ps == os)
		*lblk = oe;
	return 1;
}

/*
 * Unmap and free [first, last) in bounded steps (docs/DESIGN.md §3): each
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
static int free_steps(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last)
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
static int map_add(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, uint64_t lblk,
                   uint64_t len, uint64_t pblk, uint32_t flags)
{
	struct fx nx = {.lblk = lblk, .pblk = pblk, .len = len, .flags = flags}, l, r;
	bool left = false, right = false;
	int ret;

	while (len > EXT_MAX_LEN) {
		/* only allocations of up to a chunk reach here; stay general anyway */
		ret = map_add(fs, txn, ip, lblk, EXT_MAX_LEN, pblk, flags);
		if (ret)
			return ret;
		lblk += EXT_MAX_LEN;
		pblk += EXT_MAX_LEN;
		len -= EXT_MAX_LEN;
		nx = (struct fx){.lblk = lblk, .pblk = pblk, .len = len, .flags = flags};
	}
	if (lblk > 0) {
		ret = map_find_le(fs, ip, lblk - 1, &l);
		if (ret && ret != -ENOENT)
			return ret;
		left = !ret && l.lblk + l.len == lblk && l.pblk + l.len == pblk &&
		       l.flags == flags && l.len + len <= EXT_MAX_LEN;
	}
	ret = map_find_ge(fs, ip, lblk + len, &r);
	if (ret && ret != -ENOENT)
		return ret;
	right = !ret && r.lblk == lblk + len && r.pblk == pblk + len && r.flags == flags &&
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
				ret = map_insert(fs, txn, ip, &nx);
			return ret;
		}
		ret = map_insert(fs, txn, ip, &nx);
		if (!ret)
			ret = map_delete(fs, txn, ip, r.lblk);
		return ret;
	}
	return map_insert(fs, txn, ip, &nx);
}

/* Where to allocate file block @lblk: after the block mapping @lblk - 1's extent. */
static uint64_t alloc_goal(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk)
{
	uint64_t ds = le64toh(fs->sb.data_start), dl = le64toh(fs->sb.data_len);
	uint64_t slots = dl / GOAL_SPREAD;
	struct fx x;

	if (lblk > 0 && !map_find_le(fs, ip, lblk - 1, &x))
		return x.pblk + (lblk - x.lblk);
	/*
	 * A file's first blocks: start files at spread-out places (by inode
	 * number) so that files growing at the same time do not take each
	 * other's next blocks and interleave.
	 */
	if (slots < 2)
		return 0;
	return ds + ((ip->ino * 0x9e3779b97f4a7c15ull) >> 20) % slots * GOAL_SPREAD;
}

int mfs_bmap(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, uint64_t *pblk, uint64_t *count,
             bool *unwritten)
{
	return map_lookup(fs, ip, lblk, pblk, count, unwritten);
}

/* --- bios ------------------------------------------------------------------------------ */

/* A batch of bios, queued by fio_submit and submitted under one plug by fio_wait. */
struct fio {
	struct blk_dev *dev;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned pending; /* lock */
	int err;          /* lock: first error */
	unsigned nr;
	struct blk_bio bio[FIO_BATCH];
};

static struct fio *fio_new(struct mfs *fs)
{
	struct fio *io = malloc(sizeof(*io));

	if (!io)
		return NULL;
	io->dev = fs->dev;
	pthread_mutex_init(&io->lock, NULL);
	pthread_cond_init(&io->cond, NULL);
	io->pending = 0;
	io->err = 0;
	io->nr = 0;
	return io;
}

static void fio_end_io(struct blk_bio *bio)
{
	struct fio *io = bio->private;

	pthread_mutex_lock(&io->lock);
	if (bio->status != BLK_STS_OK && !io->err)
		io->err = -blk_status_to_errno((enum blk_status)bio->status);
	if (--io->pending == 0)
		pthread_cond_broadcast(&io->cond);
	pthread_mutex_unlock(&io->lock);
}

/* Submit the queued bios under one plug and wait for them.  Returns the first error seen. */
static int fio_wait(struct fio *io)
{
	struct blk_plug plug;
	unsigned i;
	int err;

	/*
	 * The batch is submitted here, under one plug, with nothing else done
	 * meanwhile: the map lookups that built it (metadata reads, buffer
	 * locks) ran before, outside any plug.
	 */
	if (io->nr) {
		pthread_mutex_lock(&io->lock);
		io->pending += io->nr;
		pthread_mutex_unlock(&io->lock);
		blk_start_plug_nr_ios(&plug, (unsigned short)io->nr);
		for (i = 0; i < io->nr; i++)
			blk_submit_bio(io->dev, &io->bio[i]);
		blk_finish_plug(&plug);
	}
	pthread_mutex_lock(&io->lock);
	while (io->pending)
		pthread_cond_wait(&io->cond, &io->lock);
	err = io->err;
	pthread_mutex_unlock(&io->lock);
	io->nr = 0;
	return err;
}

static int fio_free(struct fio *io)
{
	int err = fio_wait(io);

	pthread_mutex_destroy(&io->lock);
	pthread_cond_destroy(&io->cond);
	free(io);
	return err;
}

/* Queue one op over @nblk device blocks from @pblk (@buf NULL for WRITE_ZEROES): fio_wait submits.
 */
static void fio_submit(struct fio *io, enum blk_op op, uint64_t pblk, void *buf, uint64_t nblk,
                       unsigned flags, struct blk_recovery *rec)
{
	while (nblk) {
		uint64_t n = nblk < BIO_MAX_BLOCKS ? nblk : BIO_MAX_BLOCKS;
		struct blk_bio *bio;

		if (io->nr == FIO_BATCH)
			fio_wait(io); /* keeps io->err */
		bio = &io->bio[io->nr++];
		blk_bio_init(bio, op, pblk * MFS_SECTORS_PER_BLOCK, buf, (uint32_t)(n * BS),
		             fio_end_io, io);
		bio->flags = (uint8_t)flags;
		bio->rec = rec;
		pblk += n;
		if (buf)
			buf = (uint8_t *)buf + n * BS;
		nblk -= n;
	}
}

static void *bounce_alloc(void)
{
	void *p = NULL;

	if (posix_memalign(&p, BS, BS))
		return NULL;
	return p;
}

/*
 * The unit of poison on the device, in bytes: the 512-byte sector on pmem and
 * on devices with 512-byte logical blocks, the logical block otherwise (a
 * device cannot lose less, nor be written in less).  Asked only once poison
 * was met.
 */
static unsigned poison_unit(struct mfs *fs)
{
	struct blk_dev_info info;

	blk_dev_get_info(fs->dev, &info);
	return info.logical_block_size > BLK_SECTOR_SIZE ? info.logical_block_size
	                                                 : BLK_SECTOR_SIZE;
}

/*
 * Zero bytes [from, to) of device block @pblk in place: read-modify-write of
 * the block; if the read meets poison, whole units of poison (poison_unit())
 * of the range are zeroed with WRITE_ZEROES (which clears their poison) and
 * only partial units are read back, so -EIO means a partial unit of the range
 * is poisoned.
 */
static int zero_in_block(struct mfs *fs, uint64_t pblk, unsigned from, unsigned to)
{
	uint64_t sec = pblk * MFS_SECTORS_PER_BLOCK;
	uint8_t *buf;
	unsigned u, g;
	int ret;

	if (from >= to)
		return 0;
	buf = bounce_alloc();
	if (!buf)
		return -ENOMEM;
	ret = blk_read(fs->dev, sec, buf, BS, 0);
	if (!ret) {
		memset(buf + from, 0, to - from);
		ret = blk_write(fs->dev, sec, buf, BS, 0);
		goto out;
	}
	if (ret != -EIO)
		goto out;
	g = poison_unit(fs);
	if (g > BS)
		goto out; /* the block is part of one unit: its lost bytes stay lost (-EIO) */
	ret = 0;
	for (u = from / g * g; u < to && !ret; u += g) {
		unsigned zf = from > u ? from : u, zt = to < u + g ? to : u + g;
		uint64_t us = sec + u / BLK_SECTOR_SIZE;
		struct blk_bio bio;

		if (zf == u && zt == u + g) {
			blk_bio_init(&bio, BLK_OP_WRITE_ZEROES, us, NULL, g, NULL, NULL);
			ret = blk_submit_bio_wait(fs->dev, &bio);
			continue;
		}
		ret = blk_read(fs->dev, us, buf, g, 0);
		if (!ret) {
			memset(buf + (zf - u), 0, zt - zf);
			ret = blk_write(fs->dev, us, buf, g, 0);
		}
	}
out:
	free(buf);
	return ret;
}

/* Zero bytes [from, to) of file block @lblk where it holds written data. */
static int zero_file_partial(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, unsigned from,
                             unsigned to)
{
	uint64_t pblk, count;
	bool unwritten;
	int ret;

	if (from >= to)
		return 0;
	ret = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
	if (ret || !pblk || unwritten)
		return ret;
	return zero_in_block(fs, pblk, from, to);
}

/*
 * The size grows from @old to @new: zero the bytes past the old EOF in its
 * last block.  Truncate does not zero them when it shrinks the file, so
 * that a truncate lost in a crash never takes data with it; they are
 * zeroed here, in place, before any size that exposes them is set.
 */
static int zero_past_eof(struct mfs *fs, struct mfs_ino *ip, uint64_t old, uint64_t new)
{
	uint64_t lblk = old / BS, to = (lblk + 1) * BS;

	if (new <= old || old % BS == 0)
		return 0;
	if (new < to)
		to = new;
	return zero_file_partial(fs, ip, lblk, (unsigned)(old % BS), (unsigned)(to - lblk * BS));
}

/* --- read ------------------------------------------------------------------------------ */

/*
 * Read file bytes [off, off + len) into @buf: holes and unwritten extents as
 * zeros, data with bios flagged @bio_flags (BLK_BIO_RECOVERY reports
 * zero-filled sectors in @rec).  The caller holds ip->lock and has clipped
 * the range to the file size.  Returns @len or -errno (-EIO: media error).
 */
ssize_t mfs_file_read_blocks(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len,
                             uint64_t off, unsigned bio_flags, struct blk_recovery *rec);

ssize_t mfs_file_read_blocks(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len,
                             uint64_t off, unsigned bio_flags, struct blk_recovery *rec)
{
	uint64_t end = off + len, first = off / BS, last = (end + BS - 1) / BS, lblk;
	uint8_t *edge[2] = {NULL, NULL}, *out = buf;
	uint64_t edge_lblk[2] = {0, 0};
	bool edge_read[2] = {false, false};
	struct fio *io;
	int ret = 0, err;
	unsigned e;

	if (!len)
		return 0;
	io = fio_new(fs);
	if (!io)
		return -ENOMEM;
	for (lblk = first; lblk < last && !ret;) {
		uint64_t pblk, count, n, i;
		bool unwritten;

		ret = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		n = count < last - lblk ? count : last - lblk;
		for (i = 0; i < n;) {
			uint64_t b = lblk + i, bstart = b * BS;
			uint64_t from = bstart > off ? bstart : off;
			bool partial = bstart < off || bstart + BS > end;
			uint64_t run;

			if (!pblk || unwritten) {
				uint64_t to = (lblk + n) * BS < end ? (lblk + n) * BS : end;

				memset(out + (from - off), 0, to - from);
				break;
			}
			if (partial) {
				e = b == first ? 0 : 1;
				edge[e] = bounce_alloc();
				if (!edge[e]) {
					ret = -ENOMEM;
					break;
				}
				edge_lblk[e] = b;
				edge_read[e] = true;
				fio_submit(io, BLK_OP_READ, pblk + i, edge[e], 1, bio_flags, rec);
				i++;
				continue;
			}
			/* whole blocks straight into the caller's buffer, up to a partial one */
			run = n - i;
			if ((b + run) * BS > end)
				run = (end - bstart) / BS;
			fio_submit(io, BLK_OP_READ, pblk + i, out + (bstart - off), run, bio_flags,
			           rec);
			i += run;
		}
		lblk += n;
	}
	err = fio_free(io);
	if (!ret)
		ret = err;
	for (e = 0; e < 2; e++) {
		if (edge[e] && !ret && edge_read[e]) {
			uint64_t bstart = edge_lblk[e] * BS;
			uint64_t from = bstart > off ? bstart : off;
			uint64_t to = bstart + BS < end ? bstart + BS : end;

			memcpy(out + (from - off), edge[e] + (from - bstart), to - from);
		}
		free(edge[e]);
	}
	return ret ? ret : (ssize_t)len;
}

int mfs_file_get(struct mfs *fs, uint64_t ino, struct mfs_ino **ipp)
{
	uint32_t mode;
	int ret = mfs_iget(fs, ino, ipp);

	if (ret)
		return ret;
	mode = le32toh((*ipp)->di.mode);
	if (S_ISREG(mode))
		return 0;
	mfs_iput(fs, *ipp);
	return S_ISDIR(mode) ? -EISDIR : -EINVAL;
}

ssize_t mfs_read(struct mfs *fs, uint64_t ino, void *buf, size_t len, off_t off)
{
	struct mfs_ino *ip;
	ssize_t ret;
	uint64_t size;

	if (off < 0)
		return -EINVAL;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	size = di_size(ip);
	if ((uint64_t)off >= size) {
		ret = 0;
	} else {
		if (len > size - (uint64_t)off)
			len = (size_t)(size - (uint64_t)off);
		ret = mfs_file_read_blocks(fs, ip, buf, len, (uint64_t)off, 0, NULL);
	}
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

/*
 * Zero-copy read (see mfs_ops.h).  The iovecs point into the device mapping,
 * holes and unwritten extents at a static zero area; adjacent pieces that are
 * contiguous in memory share one iovec.
 */
#define DIRECT_ZERO_LEN (64u * 1024)
static const uint8_t direct_zeros[DIRECT_ZERO_LEN]; /* .bss: never written */

static int direct_add(struct iovec *iov, int *cnt, const void *base, size_t len)
{
	while (len) {
		size_t n = len;

		if (base == direct_zeros && n > DIRECT_ZERO_LEN)
			n = DIRECT_ZERO_LEN;
		if (*cnt && base != direct_zeros &&
		    (const uint8_t *)iov[*cnt - 1].iov_base + iov[*cnt - 1].iov_len == base) {
			iov[*cnt - 1].iov_len += n;
		} else {
			if (*cnt == MFS_DIRECT_IOV_MAX)
				return -EOPNOTSUPP; /* too fragmented: the caller copies */
			iov[*cnt].iov_base = (void *)base;
			iov[*cnt].iov_len = n;
			(*cnt)++;
		}
		len -= n;
		if (base != direct_zeros)
			base = (const uint8_t *)base + n;
	}
	return 0;
}

int mfs_read_direct(struct mfs *fs, uint64_t ino, size_t len, off_t off, mfs_direct_emit_fn *emit,
                    void *arg)
{
	struct iovec iov[MFS_DIRECT_IOV_MAX];
	struct mfs_ino *ip;
	uint64_t size, pos, end;
	int cnt = 0, ret;

	if (off < 0)
		return -EINVAL;
	if (!fs->direct_reads)
		return -EOPNOTSUPP;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	size = di_size(ip);
	pos = (uint64_t)off;
	end = pos < size ? (len < size - pos ? pos + len : size) : pos;
	while (pos < end && !ret) {
		uint64_t lblk = pos / BS, pblk, count, n;
		bool unwritten;
		void *addr;

		ret = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		/* bytes of this mapping run from pos */
		n = (lblk + count) * BS - pos;
		if (n > end - pos)
			n = end - pos;
		if (!pblk || unwritten) {
			ret = direct_add(iov, &cnt, direct_zeros, (size_t)n);
		} else {
			ret = blk_direct_access(fs->dev, pblk * BS + pos % BS, (size_t)n, &addr,
			                        NULL);
			if (!ret)
				ret = direct_add(iov, &cnt, addr, (size_t)n);
		}
		pos += n;
	}
	/* the data is consumed (copied into the reply) before the lock is dropped */
	if (!ret)
		ret = emit(arg, iov, cnt);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

/* --- write ----------------------------------------------------------------------------- */

enum seg_kind { SEG_MAPPED, SEG_UNWRITTEN, SEG_NEW };

struct wseg {
	uint64_t lblk, pblk, len;
	enum seg_kind kind;
};

/* Free the blocks of the SEG_NEW segments from @from on (not mapped). */
static void free_new_segs(struct mfs *fs, struct mfs_txn *txn, struct wseg *seg, unsigned from,
                          unsigned nseg)
{
	for (unsigned i = from; i < nseg; i++)
		if (seg[i].kind == SEG_NEW)
			file_free(fs, txn, seg[i].pblk, seg[i].len);
}

static struct wseg *seg_of(struct wseg *seg, unsigned nseg, uint64_t lblk)
{
	for (unsigned i = 0; i < nseg; i++)
		if (lblk >= seg[i].lblk && lblk < seg[i].lblk + seg[i].len)
			return &seg[i];
	return NULL;
}

/*
 * Write bytes [from, to) of device block @pblk from @data when reading the
 * block met poison: only the units of poison (poison_unit()) the range
 * touches are written, through the bounce block @buf.  A unit the range
 * covers in part is read first; if it is poisoned the write fails with -EIO
 * before anything is written (lost bytes are never replaced by zeros).
 * Whole units are overwritten in place, which clears their poison.
 */
static int write_sectors(struct mfs *fs, uint64_t pblk, uint8_t *buf, unsigned from, unsigned to,
                         const uint8_t *data)
{
	uint64_t sec = pblk * MFS_SECTORS_PER_BLOCK;
	unsigned g = poison_unit(fs), u0, u1;
	int ret;

	if (g > BS)
		return -EIO; /* the block is part of one unit, which is poisoned */
	u0 = from / g;
	u1 = (to + g - 1) / g;
	if (from % g) {
		ret = blk_read(fs->dev, sec + u0 * (g / BLK_SECTOR_SIZE), buf + u0 * g, g, 0);
		if (ret)
			return ret;
	}
	if (to % g && !(u1 - 1 == u0 && from % g)) {
		ret = blk_read(fs->dev, sec + (u1 - 1) * (g / BLK_SECTOR_SIZE), buf + (u1 - 1) * g,
		               g, 0);
		if (ret)
			return ret;
	}
	memcpy(buf + from, data, to - from);
	return blk_write(fs->dev, sec + u0 * (g / BLK_SECTOR_SIZE), buf + u0 * g, (u1 - u0) * g, 0);
}

/* Why write_chunk() stopped a write: an error, or MFS_SPACE_DATA / MFS_SPACE_META (ENOSPC). */
#define WSTOP_ERROR 0x100u

/*
 * One transaction of a write: bytes [pos, end) of the file, at most
 * CHUNK_BLOCKS blocks.  Returns the bytes written (maybe fewer on ENOSPC) or
 * -errno; *stop (0: go on) says why not to go on: WSTOP_ERROR, or the space
 * it ran out of (mfs_space_retry's @what).
 */
static ssize_t write_chunk(struct mfs *fs, struct mfs_ino *ip, const uint8_t *src, uint64_t pos,
                           uint64_t end, unsigned *stop)
{
	uint64_t b0 = pos / BS, b1 = (end + BS - 1) / BS, lblk, goal = 0;
	struct wseg seg[CHUNK_SEGS];
	uint8_t *edge[2] = {NULL, NULL};
	uint64_t edge_lblk[2];
	bool edge_done[2] = {false, false};
	unsigned nseg = 0, i, e, nedge = 0, room, used = 1 /* the inode */;
	struct mfs_txn *txn;
	struct fio *io = NULL;
	ssize_t ret;
	int err;

	if (b1 - b0 > CHUNK_BLOCKS) {
		b1 = b0 + CHUNK_BLOCKS;
		end = b1 * BS;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	room = mfs_txn_step_limit(fs);

	/*
	 * plan: existing mappings, and fresh blocks for the holes; segments
	 * that change the map stop when their worst case would pass a step's
	 * limit (the first always goes): the handle stays bounded, and the
	 * transaction commits past half the journal as usual
	 */
	for (lblk = b0; lblk < b1 && nseg < CHUNK_SEGS;) {
		uint64_t pblk, count, n, got, start;
		bool unwritten;

		ret = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			goto fail_free;
		n = count < b1 - lblk ? count : b1 - lblk;
		if (!(pblk && !unwritten)) {
			if (nseg && used + seg_cost(ip) > room)
				break;
			used += seg_cost(ip);
		}
		if (pblk) {
			seg[nseg++] = (struct wseg){lblk, pblk, n,
			                            unwritten ? SEG_UNWRITTEN : SEG_MAPPED};
		} else {
			if (!goal)
				goal = alloc_goal(fs, ip, lblk);
			ret = mfs_alloc_data(fs, txn, goal, n, &start, &got);
			if (ret == -ENOSPC) {
				*stop = MFS_SPACE_DATA;
				break;
			}
			if (ret)
				goto fail_free;
			n = got;
			seg[nseg++] = (struct wseg){lblk, start, n, SEG_NEW};
		}
		goal = seg[nseg - 1].pblk + n;
		lblk += n;
	}
	if (lblk < b1) {
		b1 = lblk;
		if (end > b1 * BS)
			end = b1 * BS;
	}
	if (nseg == 0 || end <= pos) {
		ret = -ENOSPC; /* the first allocation failed */
		*stop = MFS_SPACE_DATA;
		goto out;
	}

	/* partial edge blocks: read-modify-write, or zeros around the data for fresh ones */
	for (e = 0; e < 2; e++) {
		uint64_t b = e == 0 ? b0 : b1 - 1, bstart = b * BS;
		uint64_t from = bstart > pos ? bstart : pos,
		         to = bstart + BS < end ? bstart + BS : end;
		struct wseg *s;

		if (e == 1 && b1 - 1 == b0)
			break;
		if (from == bstart && to == bstart + BS)
			continue;
		s = seg_of(seg, nseg, b);
		edge[nedge] = bounce_alloc();
		if (!edge[nedge]) {
			ret = -ENOMEM;
			goto fail_free;
		}
		edge_lblk[nedge] = b;
		edge_done[nedge] = false;
		if (s->kind == SEG_MAPPED) {
			uint64_t pb = s->pblk + (b - s->lblk);

			ret = blk_read(fs->dev, pb * MFS_SECTORS_PER_BLOCK, edge[nedge], BS, 0);
			if (ret == -EIO) {
				/* poison in the block: go by units of poison (docs/RECOVERY.md) */
				ret = write_sectors(fs, pb, edge[nedge], (unsigned)(from - bstart),
				                    (unsigned)(to - bstart), src + (from - pos));
				edge_done[nedge] = true;
			}
			if (ret) {
				nedge++;
				goto fail_free;
			}
		} else {
			memset(edge[nedge], 0, BS);
		}
		memcpy(edge[nedge] + (from - bstart), src + (from - pos), to - from);
		nedge++;
	}

	/* the data, under one plug */
	io = fio_new(fs);
	if (!io) {
		ret = -ENOMEM;
		goto fail_free;
	}
	for (i = 0; i < nseg; i++) {
		uint64_t j = 0;

		while (j < seg[i].len) {
			uint64_t b = seg[i].lblk + j, run;

			for (e = 0; e < nedge && edge_lblk[e] != b; e++)
				;
			if (e < nedge) {
				if (!edge_done[e])
					fio_submit(io, BLK_OP_WRITE, seg[i].pblk + j, edge[e], 1, 0,
					           NULL);
				j++;
				continue;
			}
			for (run = 1; j + run < seg[i].len; run++) {
				for (e = 0; e < nedge && edge_lblk[e] != b + run; e++)
					;
				if (e < nedge)
					break;
			}
			fio_submit(io, BLK_OP_WRITE, seg[i].pblk + j,
			           (void *)(src + (b * BS - pos)), run, 0, NULL);
			j += run;
		}
	}
	err = fio_free(io);
	if (err) {
		ret = err;
		goto fail_free;
	}

	/* map what was written (data is on the device: ordered mode) */
	for (i = 0; i < nseg; i++) {
		if (seg[i].kind == SEG_NEW) {
			err = map_add(fs, txn, ip, seg[i].lblk, seg[i].len, seg[i].pblk, 0);
			if (!err)
				di_add_blocks(ip, (int64_t)seg[i].len);
		} else if (seg[i].kind == SEG_UNWRITTEN) {
			err = map_punch(fs, txn, ip, seg[i].lblk, seg[i].lblk + seg[i].len);
			if (!err)
				err = map_add(fs, txn, ip, seg[i].lblk, seg[i].len, seg[i].pblk, 0);
		} else {
			err = 0;
		}
		if (err) {
			free_new_segs(fs, txn, seg, seg[i].kind == SEG_NEW ? i : i + 1, nseg);
			*stop = err == -ENOSPC ? MFS_SPACE_META : WSTOP_ERROR;
			if (seg[i].lblk * BS <= pos) {
				ret = err;
				goto fail_inode;
			}
			end = seg[i].lblk * BS;
			break;
		}
	}
	if (end > di_size(ip))
		di_set_size(ip, end);
	di_touch(ip, true);
	ret = (ssize_t)(end - pos);
	err = mfs_inode_write(fs, txn, ip);
	if (err)
		ret = err;
	goto out;

fail_free:
	free_new_segs(fs, txn, seg, 0, nseg);
fail_inode:
	*stop = ret == -ENOSPC ? MFS_SPACE_META : WSTOP_ERROR;
	mfs_inode_write(fs, txn, ip);
out:
	err = mfs_txn_end(txn);
	if (err && ret >= 0)
		ret = err;
	for (e = 0; e < nedge; e++)
		free(edge[e]);
	return ret;
}

ssize_t mfs_write(struct mfs *fs, uint64_t ino, const void *buf, size_t len, off_t off)
{
	return mfs_write_flags(fs, ino, buf, len, off, 0);
}

ssize_t mfs_write_flags(struct mfs *fs, uint64_t ino, const void *buf, size_t len, off_t off,
                        unsigned flags)
{
	const uint8_t *src = buf;
	struct mfs_ino *ip;
	uint64_t pos, end;
	ssize_t done = 0, ret;
	unsigned stop = 0, retries = 0;

	if (off < 0)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	if (!len)
		return 0;
	if ((uint64_t)off >= MAX_FILE_SIZE)
		return -EFBIG;
	if (len > MAX_FILE_SIZE - (uint64_t)off)
		len = (size_t)(MAX_FILE_SIZE - (uint64_t)off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&ip->lock);
	/* before the data, as the VFS does; the first chunk's transaction writes the inode */
	if (flags & MFS_WRITE_KILL_SUIDGID)
		ip->di.mode = htole32(mfs_mode_kill_suidgid(le32toh(ip->di.mode)));
	if (flags & MFS_WRITE_KILL_SGID)
		ip->di.mode &= htole32(~(uint32_t)S_ISGID);
	pos = (uint64_t)off;
	end = pos + len;
	if (pos > di_size(ip)) {
		ret = zero_past_eof(fs, ip, di_size(ip), pos);
		if (ret)
			stop = WSTOP_ERROR;
	}
	while (pos < end && !stop) {
		ret = write_chunk(fs, ip, src + (pos - (uint64_t)off), pos, end, &stop);
		if (ret > 0) {
			pos += (uint64_t)ret;
			done += ret;
			retries = 0;
		}
		/* short of space: commit what is pending, wait for frees under way, retry */
		if (stop && stop != WSTOP_ERROR && pos < end &&
		    mfs_space_retry(fs, stop, &retries)) {
			stop = 0;
			continue;
		}
		if (ret < 0)
			break;
	}
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return done ? done : ret;
}

/* --- truncate, release ----------------------------------------------------------------- */

/* Does the map hold a block at or past @lblk?  Returns 1, 0 or -errno. */
static int maps_from(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk)
{
	struct fx x;
	int ret = map_find_le(fs, ip, MAX_FILE_BLOCKS - 1, &x);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	return x.lblk + x.len > lblk;
}

int mfs_truncate_finish(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_txn *txn;
	int ret, err;

	ret = free_steps(fs, ip, (di_size(ip) + BS - 1) / BS, MAX_FILE_BLOCKS);
	if (ret || le32toh(ip->di.nlink) == 0)
		return ret; /* an unlinked inode stays an orphan until it is freed */
	ret = mfs_txn_begin_step(fs, orphan_cost(fs), &txn);
	if (ret)
		return ret;
	ret = mfs_orphan_del(fs, txn, ip->ino);
	if (ret == -ENOENT)
		ret = 0;
	if (!ret)
		ip->di.iflags = htole32(le32toh(ip->di.iflags) & ~MFS_IFL_ORPHAN);
	err = mfs_inode_write(fs, txn, ip);
	ret = ret ? ret : err;
	err = mfs_txn_end(txn);
	return ret ? ret : err;
}

int mfs_truncate(struct mfs *fs, struct mfs_ino *ip, uint64_t size)
{
	uint64_t old = di_size(ip);
	struct mfs_txn *txn;
	int ret, err, steps = 0;

	if (size > MAX_FILE_SIZE)
		return -EFBIG;
	if (size > old) {
		ret = zero_past_eof(fs, ip, old, size);
		if (ret)
			return ret;
	}
	if (size < old) {
		/* the tail of the new last block is zeroed when the file grows again */
		steps = maps_from(fs, ip, (size + BS - 1) / BS);
		if (steps < 0)
			return steps;
	}
	/*
	 * First the new size, and with blocks to free the orphan entry: the
	 * restart point that the next mount (or fsck) completes after a crash.
	 */
	ret = mfs_txn_begin_step(fs, orphan_cost(fs), &txn);
	if (ret)
		return ret;
	if (steps && !(le32toh(ip->di.iflags) & MFS_IFL_ORPHAN)) {
		ret = mfs_orphan_add(fs, txn, ip->ino);
		if (!ret)
			ip->di.iflags = htole32(le32toh(ip->di.iflags) | MFS_IFL_ORPHAN);
	}
	if (!ret && size != old) {
		di_set_size(ip, size);
		di_touch(ip, true);
	}
	err = mfs_inode_write(fs, txn, ip);
	ret = ret ? ret : err;
	err = mfs_txn_end(txn);
	ret = ret ? ret : err;
	if (ret || !steps)
		return ret;
	return mfs_truncate_finish(fs, ip);
}

int mfs_file_free_all(struct mfs *fs, struct mfs_ino *ip)
{
	if (le32toh(ip->di.iflags) & MFS_IFL_INLINE_DATA)
		return 0; /* a symlink's target, not extents */
	return free_steps(fs, ip, 0, MAX_FILE_BLOCKS);
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
	struct fx x;
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
				ret = file_free(fs, txn, x.pblk, x.len);
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
			ret = file_free(fs, txn, x.pblk, x.len);
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

/* --- fallocate ------------------------------------------------------------------------- */

/*
 * Unwritten extents over the holes of [first, last), one handle per chunk of
 * at most CHUNK_BLOCKS blocks and of allocations whose worst case fits a
 * step's limit (at least one).
 */
static int falloc_unwritten(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last)
{
	uint64_t lblk = first, seen = first;
	unsigned retries = 0, short_of = 0;
	int ret = 0;

	while (lblk < last && !ret) {
		uint64_t stop = last - lblk > CHUNK_BLOCKS ? lblk + CHUNK_BLOCKS : last;
		struct mfs_txn *txn;
		unsigned nseg = 0;
		int err;

		short_of = 0;
		ret = mfs_txn_begin(fs, &txn);
		if (ret)
			return ret;
		while (lblk < stop && !ret) {
			uint64_t pblk, count, n, start, got;
			bool unwritten;

			ret = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
			if (ret)
				break;
			n = count < stop - lblk ? count : stop - lblk;
			if (!pblk) {
				/* worst cases within a step's limit, as in write_chunk */
				if (nseg && (nseg + 1) * seg_cost(ip) + 1 > mfs_txn_step_limit(fs))
					break;
				nseg++;
				ret = mfs_alloc_data(fs, txn, alloc_goal(fs, ip, lblk), n, &start,
				                     &got);
				if (ret) {
					short_of = MFS_SPACE_DATA;
					break;
				}
				n = got;
				ret = map_add(fs, txn, ip, lblk, n, start, MFS_EXT_UNWRITTEN);
				if (ret) {
					short_of = MFS_SPACE_META;
					file_free(fs, txn, start, n);
					break;
				}
				di_add_blocks(ip, (int64_t)n);
			}
			lblk += n;
		}
		err = mfs_inode_write(fs, txn, ip);
		if (!ret)
			ret = err;
		err = mfs_txn_end(txn);
		if (!ret)
			ret = err;
		if (lblk > seen) {
			seen = lblk;
			retries = 0;
		}
		/* short of space: commit what is pending, wait for frees under way, retry */
		if (ret == -ENOSPC && mfs_space_retry(fs, short_of, &retries))
			ret = 0;
	}
	return ret;
}

/* Zero whole written blocks of [first, last) in place (WRITE_ZEROES clears poison). */
static int zero_blocks(struct mfs *fs, struct mfs_ino *ip, uint64_t first, uint64_t last)
{
	struct fio *io = fio_new(fs);
	uint64_t lblk = first;
	int ret = 0, err;

	if (!io)
		return -ENOMEM;
	while (lblk < last) {
		uint64_t pblk, count, n;
		bool unwritten;

		ret = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
		if (ret)
			break;
		n = count < last - lblk ? count : last - lblk;
		if (pblk && !unwritten)
			fio_submit(io, BLK_OP_WRITE_ZEROES, pblk, NULL, n, 0, NULL);
		lblk += n;
	}
	err = fio_free(io);
	return ret ? ret : err;
}

/* Zero the partial edge blocks of byte range [off, end). */
static int zero_edges(struct mfs *fs, struct mfs_ino *ip, uint64_t off, uint64_t end)
{
	uint64_t fb = off / BS, lb = (end - 1) / BS;
	int ret;

	if (fb == lb) {
		if (off % BS == 0 && end % BS == 0)
			return 0;
		return zero_file_partial(fs, ip, fb, (unsigned)(off % BS),
		                         (unsigned)(end - fb * BS));
	}
	ret = zero_file_partial(fs, ip, fb, (unsigned)(off % BS), off % BS ? BS : 0);
	if (!ret && end % BS)
		ret = zero_file_partial(fs, ip, lb, 0, (unsigned)(end % BS));
	return ret;
}

/*
 * Set the size (unless KEEP_SIZE) and ctime/mtime after a fallocate: a size
 * change always sets mtime too (as ftruncate does, and as ext4 and tmpfs do).
 */
static int falloc_finish(struct mfs *fs, struct mfs_ino *ip, uint64_t end, bool keep, bool mtime)
{
	struct mfs_txn *txn;
	int ret, err;

	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	if (!keep && end > di_size(ip)) {
		ret = zero_past_eof(fs, ip, di_size(ip), end);
		if (ret) {
			mfs_txn_end(txn);
			return ret;
		}
		di_set_size(ip, end);
		mtime = true;
	}
	di_touch(ip, mtime);
	ret = mfs_inode_write(fs, txn, ip);
	err = mfs_txn_end(txn);
	return ret ? ret : err;
}

int mfs_fallocate(struct mfs *fs, uint64_t ino, int mode, off_t off, off_t len)
{
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t start, end, zend, first, last;
	struct mfs_ino *ip;
	int ret, m = mode & ~FALLOC_FL_KEEP_SIZE;

	if (m != 0 && m != FALLOC_FL_PUNCH_HOLE && m != FALLOC_FL_ZERO_RANGE)
		return -EOPNOTSUPP;
	if (m == FALLOC_FL_PUNCH_HOLE && !keep)
		return -EOPNOTSUPP; /* as Linux: PUNCH_HOLE needs KEEP_SIZE */
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	if ((uint64_t)off > MAX_FILE_SIZE || (uint64_t)len > MAX_FILE_SIZE - (uint64_t)off)
		return -EFBIG;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	if (!S_ISREG(le32toh(ip->di.mode))) {
		ret = S_ISDIR(le32toh(ip->di.mode)) ? -EISDIR : -ENODEV;
		mfs_iput(fs, ip);
		return ret;
	}
	start = (uint64_t)off;
	end = start + (uint64_t)len;
	first = (start + BS - 1) / BS; /* whole blocks inside the range */
	last = end / BS;
	pthread_rwlock_wrlock(&ip->lock);
	/* [recovery] a range ending at or past EOF zeroes its last sector whole (only bytes
	 * past EOF are added), so a poisoned EOF sector is cleared, not a partial-sector EIO */
	zend = end % 512 && end >= di_size(ip) ? (end + 511) / 512 * 512 : end;
	/*
	 * Rounded up to a block boundary, the last block is whole: zero_edges
	 * leaves it to the whole-block step, so that step must include it (it
	 * lost the bytes of the range in that block otherwise: fsx, seed
	 * 1974690369).
	 */
	last = zend / BS;
	switch (m) {
	case 0:
		ret = falloc_unwritten(fs, ip, start / BS, (end + BS - 1) / BS);
		if (!ret)
			ret = falloc_finish(fs, ip, end, keep, false);
		break;
	case FALLOC_FL_PUNCH_HOLE:
		ret = zero_edges(fs, ip, start, zend);
		if (!ret && first < last)
			ret = free_steps(fs, ip, first, last);
		if (!ret)
			ret = falloc_finish(fs, ip, end, true, true);
		break;
	default: /* FALLOC_FL_ZERO_RANGE */
		ret = zero_edges(fs, ip, start, zend);
		if (!ret && first < last)
			ret = zero_blocks(fs, ip, first, last);
		if (!ret)
			ret = falloc_unwritten(fs, ip, start / BS, (end + BS - 1) / BS);
		if (!ret)
			ret = falloc_finish(fs, ip, end, keep, true);
		break;
	}
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

/* --- lseek, fsync ---------------------------------------------------------------------- */

off_t mfs_lseek(struct mfs *fs, uint64_t ino, off_t off, int whence)
{
	struct mfs_ino *ip;
	uint64_t size, lblk;
	off_t ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	ret = mfs_file_get(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	size = di_size(ip);
	if (off < 0 || (uint64_t)off >= size) {
		ret = -ENXIO;
		goto out;
	}
	for (lblk = (uint64_t)off / BS;;) {
		uint64_t pblk, count, at = lblk * BS > (uint64_t)off ? lblk * BS : (uint64_t)off;
		bool unwritten, data;
		int err;

		if (at >= size) {
			ret = whence == SEEK_DATA ? -ENXIO : (off_t)size;
			break;
		}
		err = map_lookup(fs, ip, lblk, &pblk, &count, &unwritten);
		if (err) {
			ret = err;
			break;
		}
		data = pblk && !unwritten;
		if (data == (whence == SEEK_DATA)) {
			ret = (off_t)at;
			break;
		}
		lblk += count;
	}
out:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

int mfs_fsync(struct mfs *fs, uint64_t ino, bool datasync)
{
	struct mfs_ino *ip;
	int ret;

	/*
	 * Data is written to the device by mfs_write itself; what remains is
	 * the metadata in the running transaction and the device's cache.
	 * fdatasync could skip the commit when only timestamps changed, but
	 * the transaction is shared by every inode, so one commit serves both.
	 * A lazy atime joins it on fsync, not on fdatasync (as on ext4).
	 */
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	if (!datasync)
		mfs_atime_write(fs, ip); /* a failure drops the atime, not the fsync */
	mfs_iput(fs, ip);
	if (fs->read_only)
		return mfs_fs_errno(fs);
	ret = mfs_txn_commit(fs);
	if (!ret) {
		ret = blk_flush(fs->dev);
		/* writes since the last flush may be lost, whose is unknown: fail from now on */
		if (ret)
			mfs_fs_error(fs, ret, "flush");
	}
	return ret;
}
