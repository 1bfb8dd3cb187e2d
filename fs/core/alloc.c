/* SPDX-License-Identifier: MIT */
/*
 * Allocators: data zone extents, meta zone blocks, inode numbers, and the
 * quarantine of poisoned free data extents (docs/FORMAT.md "Allocation
 * bitmaps" and "Quarantine").  This file sets them up and tears them down;
 * the work is in alloc_extents.c, alloc_bitmap.c, alloc_data.c and
 * alloc_quarantine.c (alloc_int.h says which calls which).  The allocator
 * sits above the B+trees (the quarantine is one), which get their node
 * blocks from it through fs->bt_alloc, and above the journal, which tells it
 * about commits through the hooks it registers here.
 *
 * The on-disk bitmaps are the persistent truth; they are read into in-memory
 * structures that answer allocations without touching the device, one bitmap
 * block at a time when allocation first needs it (after a clean unmount the
 * superblock's free counters are exact and nothing is read at mount; after a
 * crash, an error or a replay everything is read and recounted):
 *
 *   data   an index of free extents, held twice by the same nodes: a treap by
 *          start (augmented with the largest length in each subtree, so "the
 *          first extent at or after goal with at least want blocks" is
 *          O(log n)) and a list per size class for best fit.
 *   meta   a copy of the meta zone bitmap, next-fit from a rotating hint.
 *   inodes a copy of the inode bitmap, next-fit from a rotating hint.
 *
 * Free blocks that sit on poison (per blk_poison_lookup) when their bitmap
 * block is loaded are left out of the in-memory structures: they stay free
 * on disk and are never handed out.  A data extent freed while poisoned is
 * not returned at all: it stays marked in the bitmap and goes to the
 * quarantine B+tree (key pblk, value le64 len) until mfs_quarantine_release()
 * sees the poison gone.
 *
 * Locking.  fs->alloc_lock protects the in-memory structures, which blocks
 * are loaded, the pending frees and the free counters in fs->sb; it is never
 * held while a buffer is read or locked (it is taken *inside* a bitmap
 * buffer's content lock: mfs.h's order).  The on-disk bitmap bits change
 * under their buffer's content lock, and in an order that keeps them equal to
 * the in-memory state for any interleaving: allocation takes from memory
 * first (loaded blocks only) and sets the bits after; freeing clears the bits
 * first and gives to memory after (a data free becomes pending inside the
 * content lock).  Loading a block holds its content lock and alloc_lock
 * together, so it sees one of those states, never half of one.  Nothing but
 * alloc_lock is taken while a bitmap buffer's lock is held.  The quarantine
 * tree has its own mutex (qlock), taken before any buffer lock and before
 * alloc_lock; mfs_quarantine_release takes it inside its own handles.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"

/* The B+trees' node blocks come from the meta zone allocator. */
static const struct mfs_bt_alloc alloc_bt_nodes = {
        .alloc = mfs_alloc_meta,
        .free = mfs_free_meta,
};

int mfs_alloc_init(struct mfs *fs)
{
	struct mfs_alloc *a = calloc(1, sizeof(*a));
	uint64_t nfree_meta = 0, nfree_ino = 0;
	uint64_t meta_start = sb64(fs->sb.meta_start);
	/* the counters of a cleanly unmounted filesystem are exact; else they are recounted */
	bool clean = (fs->sb.state & (MFS_STATE_CLEAN | MFS_STATE_ERROR)) == MFS_STATE_CLEAN;
	int ret;

	if (!a)
		return -ENOMEM;
	a->rnd = 0x9e3779b9u;
	mfs_lock_init(&fs->alloc_lock);
	mfs_cond_init(&fs->space_cond); /* space.c waits with a CLOCK_MONOTONIC deadline */
	fs->space_freeing = fs->space_unlinked = 0;
	pthread_mutex_init(&a->qlock, NULL);
	fs->alloc = a;

	ret = mfs_alloc_load_data(fs, a, !clean);
	/* The fixed part of the meta zone is never allocatable, whatever the bitmap says;
	 * nor is inode 1, the root. */
	if (!ret)
		ret = mfs_bm_setup(fs, &a->meta, sb64(fs->sb.meta_bitmap_start),
		                   sb64(fs->sb.meta_bitmap_blocks), sb64(fs->sb.meta_len),
		                   sb64(fs->sb.inode_table_start) +
		                           sb64(fs->sb.inode_table_blocks) - meta_start,
		                   meta_start, fs->dup ? sb64(fs->sb.meta_twin) : 0,
		                   clean ? NULL : &nfree_meta);
	if (!ret)
		ret = mfs_bm_setup(fs, &a->ino, sb64(fs->sb.inode_bitmap_start),
		                   sb64(fs->sb.inode_bitmap_blocks), sb64(fs->sb.nr_inodes), 1, 0,
		                   0, clean ? NULL : &nfree_ino);
	if (ret) {
		fprintf(stderr, "mendfs: loading the allocation bitmaps: %s\n", strerror(-ret));
		mfs_alloc_destroy(fs);
		return ret;
	}
	if (!clean) {
		fs->sb.free_meta = htole64(nfree_meta);
		fs->sb.free_inodes = htole64(nfree_ino);
	}
	fs->bt_alloc = &alloc_bt_nodes;
	mfs_journal_set_hooks(fs, &mfs_alloc_commit_hooks);
	return 0;
}

/*
 * Online growth: no handle is open (the journal is held), so nothing
 * allocates or frees; alloc_lock keeps statfs and the counters' readers
 * consistent.  The meta bitmap moved: every block of it is read again from
 * its new place when next needed (the caller dropped the cached copies).
 * The data zone grew: new groups start unloaded (read from the new data
 * bitmap when needed); if the old last group is loaded, the free run past
 * the old end up to that group's end joins the free extent index now, less
 * its poisoned blocks, as a load would have done.
 */
int mfs_alloc_grow(struct mfs *fs, const struct mfs_superblock *nsb)
{
	struct mfs_alloc *a = A(fs);
	uint64_t old_len = sb64(fs->sb.data_len), new_len = sb64(nsb->data_len);
	uint64_t data_start = sb64(fs->sb.data_start);
	uint64_t ngroups = (new_len + MFS_BITMAP_BITS - 1) / MFS_BITMAP_BITS;
	uint64_t last = old_len ? (old_len - 1) / MFS_BITMAP_BITS : 0, tail_end;
	struct mfs_brange *pz = NULL;
	unsigned npz = 0;
	uint8_t *gl;
	int ret = 0;

	tail_end = (last + 1) * MFS_BITMAP_BITS < new_len ? (last + 1) * MFS_BITMAP_BITS : new_len;
	if (tail_end > old_len) {
		ret = mfs_alloc_poisoned(fs, data_start + old_len, tail_end - old_len, &pz, &npz);
		if (ret)
			return ret;
	}
	gl = calloc(ngroups ? ngroups : 1, 1);
	if (!gl) {
		free(pz);
		return -ENOMEM;
	}
	mfs_lock(&fs->alloc_lock);
	memcpy(gl, a->gloaded, a->ngroups);
	if (old_len && tail_end > old_len && a->gloaded[last] == G_LOADED) {
		uint64_t pos = data_start + old_len;

		for (unsigned i = 0; i <= npz && !ret; i++) {
			uint64_t end = i < npz ? pz[i].start : data_start + tail_end;

			if (end > pos)
				ret = mfs_fx_add(a, pos, end - pos);
			if (i < npz)
				pos = pz[i].start + pz[i].len;
		}
	}
	if (ret) {
		mfs_unlock(&fs->alloc_lock);
		free(gl);
		free(pz);
		return ret;
	}
	free(a->gloaded);
	a->gloaded = gl;
	a->ngroups = ngroups;
	a->meta.disk = sb64(nsb->meta_bitmap_start);
	a->meta.zone_twin = fs->dup ? sb64(nsb->meta_twin) : 0;
	memset(a->meta.loaded, G_UNLOADED, a->meta.blocks);
	fs->sb.nr_blocks = nsb->nr_blocks;
	fs->sb.journal_twin = nsb->journal_twin;
	fs->sb.meta_twin = nsb->meta_twin;
	fs->sb.meta_bitmap_start = nsb->meta_bitmap_start;
	fs->sb.data_bitmap_start = nsb->data_bitmap_start;
	fs->sb.data_bitmap_blocks = nsb->data_bitmap_blocks;
	fs->sb.free_blocks = nsb->free_blocks;
	fs->sb.free_meta = nsb->free_meta;
	fs->sb.write_time_ns = nsb->write_time_ns;
	/* last: a reader that sees the longer zone sees the rest */
	__atomic_store_n(&fs->sb.data_len, nsb->data_len, __ATOMIC_RELEASE);
	mfs_unlock(&fs->alloc_lock);
	free(pz);
	return 0;
}

void mfs_alloc_destroy(struct mfs *fs)
{
	struct mfs_alloc *a = A(fs);

	if (!a)
		return;
	if (fs->commit_hooks == &mfs_alloc_commit_hooks)
		mfs_journal_set_hooks(fs, NULL);
	fs->bt_alloc = NULL;
	mfs_fx_destroy(a);
	while (a->inflight) {
		struct mfs_pending_batch *b = a->inflight;

		a->inflight = b->next;
		free(b->v);
		free(b);
	}
	free(a->gloaded);
	free(a->pend);
	free(a->meta.map);
	free(a->meta.loaded);
	free(a->ino.map);
	free(a->ino.loaded);
	pthread_mutex_destroy(&a->qlock);
	mfs_lock_destroy(&fs->alloc_lock);
	free(a);
	fs->alloc = NULL;
}
