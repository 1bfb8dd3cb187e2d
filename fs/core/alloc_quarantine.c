/* SPDX-License-Identifier: MIT */
/*
 * Freeing data blocks, and the quarantine of poisoned ones (docs/FORMAT.md
 * "Quarantine").  mfs_free_data gives clean blocks back through the data
 * allocator (pending until the commit); a freed extent that sits on poison
 * is not given back: it stays marked in the bitmap and goes to the
 * quarantine B+tree (key pblk, value le64 len, rooted in the superblock and
 * journaled through the roots record, roots.c) until
 * mfs_quarantine_release() sees the poison gone.  It calls alloc_data.c,
 * alloc_bitmap.c, alloc_extents.c, the B+tree, the roots record and the
 * journal.  The tree is under A(fs)->qlock (locking: alloc.c).
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"

static struct mfs_btree qtree(struct mfs *fs)
{
	struct mfs_btree bt = {.root = sb64(fs->sb.quarantine_root),
	                       .depth = (uint16_t)le32toh(fs->sb.quarantine_depth),
	                       .kind = MFS_TREE_QUARANTINE,
	                       .owner = 0};
	return bt;
}

/* Store a changed root, journaled in @txn (mfs_super_roots_log: the superblock is not). */
static int qtree_store(struct mfs *fs, struct mfs_txn *txn, const struct mfs_btree *bt)
{
	if (fs->sb.quarantine_root == htole64(bt->root) &&
	    fs->sb.quarantine_depth == htole32(bt->depth))
		return 0;
	fs->sb.quarantine_root = htole64(bt->root);
	fs->sb.quarantine_depth = htole32(bt->depth);
	return mfs_super_roots_log(fs, txn);
}

/* qlock held: put [start, start + len) (marked used in the bitmap) in the quarantine tree. */
static int quarantine_insert(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	struct mfs_btree bt = qtree(fs);
	uint64_t v = htole64(len);
	int ret, r;

	ret = mfs_bt_insert(fs, txn, &bt, start, &v, sizeof(v));
	r = qtree_store(fs, txn, &bt);
	ret = ret ? ret : r;
	if (!ret)
		fprintf(stderr, "mendfs: data blocks %llu-%llu are poisoned: quarantined\n",
		        (unsigned long long)start, (unsigned long long)(start + len - 1));
	return ret;
}

int mfs_free_data(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len)
{
	struct mfs_alloc *a = A(fs);
	uint64_t data_start = sb64(fs->sb.data_start), data_len = sb64(fs->sb.data_len);
	struct mfs_brange *pz;
	unsigned npz;
	uint64_t pos = start;
	bool dup;
	int ret;

	if (!txn || !len || start < data_start || start + len > data_start + data_len ||
	    start + len < start)
		return -EINVAL;
	mfs_lock(&fs->alloc_lock);
	dup = mfs_fx_overlaps(a, start, len);
	mfs_unlock(&fs->alloc_lock);
	if (dup) {
		fprintf(stderr, "mendfs: freeing data blocks %llu-%llu: some are already free\n",
		        (unsigned long long)start, (unsigned long long)(start + len - 1));
		return -EUCLEAN;
	}

	ret = mfs_alloc_poisoned(fs, start, len, &pz, &npz);
	if (ret)
		return ret;
	for (unsigned i = 0; ret == 0 && i <= npz; i++) {
		uint64_t qs = i < npz ? pz[i].start : start + len;
		uint64_t qe = i < npz ? pz[i].start + pz[i].len : start + len;

		if (qs < start)
			qs = start;
		if (qe > start + len)
			qe = start + len;
		if (qs > pos)
			ret = mfs_alloc_free_clean(fs, txn, pos, qs - pos);
		if (!ret && qe > qs) {
			pthread_mutex_lock(&a->qlock);
			ret = quarantine_insert(fs, txn, qs, qe - qs);
			pthread_mutex_unlock(&a->qlock);
		}
		if (qe > pos)
			pos = qe;
	}
	free(pz);
	return ret;
}

/*
 * Releasing runs in bounded steps (docs/design/core.md §3): a unit is one entry, or
 * the first QREL_UNIT_BLOCKS blocks of a longer one and no more than
 * QREL_UNIT_PIECES poisoned pieces (the rest of the entry is put back as an
 * entry of its own).  Its worst case: the entry's delete, a re-insert per
 * poisoned piece and one for the rest, each a path with a split or merge per
 * level and a new root (depth + 3 blocks), the roots record, and the data
 * bitmap blocks of the unit's clean blocks.
 */
#define QREL_UNIT_BLOCKS (4ull * MFS_BITMAP_BITS)
#define QREL_UNIT_PIECES 8u

static unsigned qrel_unit_worst(const struct mfs_btree *bt)
{
	return (QREL_UNIT_PIECES + 2) * (bt->depth + 3u) + 1 + 5;
}

/* The first entry of an iteration. */
struct qfirst {
	uint64_t key, len;
	bool found;
	int err;
};

static int qfirst_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct qfirst *q = arg;
	uint64_t v;

	if (len != sizeof(v)) {
		q->err = -EUCLEAN;
		return 1;
	}
	memcpy(&v, val, sizeof(v));
	q->key = key;
	q->len = le64toh(v);
	q->found = true;
	return 1;
}

/*
 * qlock held, in @txn: release the clean blocks of one unit of the first
 * quarantine entry that intersects [*pos, end) (or the one straddling *pos);
 * *pos moves past what was looked at.  Returns 0, 1 when there is no such
 * entry, or -errno.
 */
static int qrel_unit(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t *pos,
                     uint64_t end)
{
	uint64_t key, v, es, el, ce, at;
	uint16_t vlen = sizeof(v);
	struct mfs_brange *pz;
	unsigned npz;
	int ret;

	ret = mfs_bt_lookup_le(fs, bt, *pos, &key, &v, &vlen);
	if (ret && ret != -ENOENT)
		return ret;
	if (ret == 0 && vlen != sizeof(v))
		return -EUCLEAN;
	if (ret == 0 && key + le64toh(v) > *pos) {
		es = key;
		el = le64toh(v);
	} else {
		struct qfirst q = {0};

		ret = mfs_bt_iterate(fs, bt, *pos, qfirst_fn, &q);
		if (ret < 0)
			return ret;
		if (q.err)
			return q.err;
		if (!q.found || q.key >= end)
			return 1;
		es = q.key;
		el = q.len;
	}
	/* the unit: at most QREL_UNIT_BLOCKS, at most QREL_UNIT_PIECES poisoned pieces */
	ce = el > QREL_UNIT_BLOCKS ? es + QREL_UNIT_BLOCKS : es + el;
	ret = mfs_alloc_poisoned(fs, es, ce - es, &pz, &npz);
	if (ret)
		return ret;
	if (npz > QREL_UNIT_PIECES) {
		ce = pz[QREL_UNIT_PIECES].start;
		npz = QREL_UNIT_PIECES;
	}
	for (unsigned j = 0; j < npz; j++) {
		if (pz[j].start < es) {
			pz[j].len -= es - pz[j].start;
			pz[j].start = es;
		}
		if (pz[j].start + pz[j].len > ce)
			pz[j].len = ce - pz[j].start;
	}
	*pos = ce;
	if (ce == es + el && npz == 1 && pz[0].start == es && pz[0].len == el) {
		free(pz); /* still entirely poisoned */
		return 0;
	}
	ret = mfs_bt_delete(fs, txn, bt, es);
	if (!ret && ce < es + el)
		ret = mfs_bt_insert(fs, txn, bt, ce, &(uint64_t){htole64(es + el - ce)},
		                    sizeof(uint64_t));
	if (!ret)
		ret = qtree_store(fs, txn, bt);
	/* Clean pieces go back to the free space, poisoned ones stay quarantined. */
	at = es;
	for (unsigned j = 0; ret == 0 && j <= npz; j++) {
		uint64_t qs = j < npz ? pz[j].start : ce;
		uint64_t qe = j < npz ? pz[j].start + pz[j].len : ce;

		if (qs > at)
			ret = mfs_alloc_free_clean(fs, txn, at, qs - at);
		if (!ret && qe > qs) {
			ret = mfs_bt_insert(fs, txn, bt, qs, &(uint64_t){htole64(qe - qs)},
			                    sizeof(uint64_t));
			if (!ret)
				ret = qtree_store(fs, txn, bt);
		}
		if (qe > at)
			at = qe;
	}
	free(pz);
	return ret;
}

int mfs_quarantine_release(struct mfs *fs, uint64_t start, uint64_t len)
{
	struct mfs_alloc *a = A(fs);
	uint64_t pos = start, end = start + len;
	int ret = 0;

	if (!len || end < start)
		return -EINVAL;
	while (!ret) {
		struct mfs_txn *txn;
		struct mfs_btree bt;
		unsigned units = 0;
		int r;

		pthread_mutex_lock(&a->qlock);
		bt = qtree(fs);
		pthread_mutex_unlock(&a->qlock);
		if (!bt.root)
			break;
		ret = mfs_txn_begin_step(fs, qrel_unit_worst(&bt), &txn);
		if (ret)
			break;
		pthread_mutex_lock(&a->qlock);
		/* units while the worst case of one more fits the step, always one */
		do {
			bt = qtree(fs);
			ret = bt.root ? qrel_unit(fs, txn, &bt, &pos, end) : 1;
			units++;
		} while (!ret && pos < end && mfs_txn_room(txn) >= qrel_unit_worst(&bt));
		pthread_mutex_unlock(&a->qlock);
		r = mfs_txn_end(txn);
		if (ret == 1 || (!ret && pos >= end)) {
			ret = r;
			break;
		}
		ret = ret ? ret : r;
	}
	return ret;
}
