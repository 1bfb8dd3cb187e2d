/* SPDX-License-Identifier: MIT */
/*
 * ENOSPC only when the space is truly gone (docs/design/core.md §3, the section of
 * that name).
 *
 * Space that is about to come back is not yet allocatable in two ways:
 *
 *   - data blocks freed by a transaction return to the allocator only when
 *     that transaction's commit is durable (alloc_data.c: pending frees of the
 *     running transaction, batches of a commit under way);
 *   - an unlinked inode with users (for the daemon: open files, requests
 *     under way; the kernel's lookups are pins, not users) is freed when its
 *     last user goes (a moment after the close: the kernel's RELEASE), and
 *     until that has run its blocks, meta blocks and inode number are still
 *     in use.  One without users is freed by the unlink itself.
 *
 * An allocation that meets -ENOSPC therefore does not fail at once, as ext4
 * does not (ext4_should_retry_alloc, jbd2's forced commit): its operation ends
 * its handle and calls mfs_space_retry(), which waits for an eviction under
 * way, commits when data frees are pending (mfs_txn_commit waits for a commit
 * already running first, then commits the running transaction), and tells the
 * operation to run again.  When nothing is pending or being freed but an
 * unlinked inode is still referenced, it first waits a short while
 * (MFS_SPACE_UNLINKED_WAIT_MS, on the first MFS_SPACE_UNLINKED_TRIES
 * retries) for that inode to go: the kernel sends RELEASE in the background
 * after close() has returned, so a file closed and unlinked just before may
 * still be open here.  (With -o writeback that RELEASE queues behind the
 * writeback WRITEs already queued, which may be the very writes waiting for
 * its space; the wait then ends without it and they fail: the limit
 * docs/design/core.md §3 states.)  Only when nothing is pending, being freed or free
 * since does the operation fail with -ENOSPC.  The number of retries is
 * bounded (MFS_SPACE_RETRIES, counted per operation and reset by progress):
 * each retry follows a commit that gave blocks back or an eviction that
 * finished, so a filesystem that is really full fails at once, and one where
 * other writers take what every commit gives back fails after a bounded
 * number of commits.
 *
 * Nothing here is on the fast path: an allocation that succeeds never calls
 * into this file.  Waiting for a commit while holding a handle would
 * deadlock (the commit waits for every handle of the running transaction),
 * so callers end theirs first.  Inode locks may be held (lock order: inode
 * locks are taken before any handle, so no handle holder waits for one, and
 * an eviction locks only its own, unreferenced, inode), as fsync does; create
 * and setxattr let go of theirs all the same, so as not to hold a directory
 * while waiting.
 *
 * Locking: fs->alloc_lock protects space_unlinked, space_freeing and
 * space_freed; space_cond (CLOCK_MONOTONIC) is waited on with it.
 */
#include <errno.h>
#include <time.h>

#include "mfs.h"

#define MFS_SPACE_UNLINKED_WAIT_MS 100
#define MFS_SPACE_UNLINKED_TRIES   2

void mfs_space_unlinked(struct mfs *fs)
{
	mfs_lock(&fs->alloc_lock);
	fs->space_unlinked++;
	mfs_unlock(&fs->alloc_lock);
}

void mfs_space_freeing_begin(struct mfs *fs)
{
	mfs_lock(&fs->alloc_lock);
	fs->space_freeing++;
	mfs_unlock(&fs->alloc_lock);
}

void mfs_space_freeing_end(struct mfs *fs)
{
	mfs_lock(&fs->alloc_lock);
	fs->space_freeing--;
	fs->space_unlinked--;
	fs->space_freed++;
	mfs_cond_broadcast(&fs->space_cond);
	mfs_unlock(&fs->alloc_lock);
}

/* Wait until one of the evictions under way (if any) finishes.  Returns whether one did. */
static bool wait_freeing(struct mfs *fs)
{
	uint64_t seen;
	bool done;

	mfs_lock(&fs->alloc_lock);
	seen = fs->space_freed;
	while (fs->space_freeing && fs->space_freed == seen)
		mfs_cond_wait(&fs->space_cond, &fs->alloc_lock, NULL);
	done = fs->space_freed != seen;
	mfs_unlock(&fs->alloc_lock);
	return done;
}

/* Wait a short while for a referenced unlinked inode to be freed; whether one was. */
static bool wait_unlinked(struct mfs *fs)
{
	struct timespec until;
	uint64_t seen;
	bool done;
	int err = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += MFS_SPACE_UNLINKED_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	mfs_lock(&fs->alloc_lock);
	seen = fs->space_freed;
	while (fs->space_unlinked && fs->space_freed == seen && err != ETIMEDOUT)
		err = mfs_cond_wait(&fs->space_cond, &fs->alloc_lock, &until);
	done = fs->space_freed != seen;
	mfs_unlock(&fs->alloc_lock);
	return done;
}

/* Whether data blocks are coming back at a commit, or came back since the failure. */
static bool data_pending(struct mfs *fs, unsigned what)
{
	return (what & MFS_SPACE_DATA) && mfs_alloc_data_state(fs) != MFS_SPACE_NONE;
}

bool mfs_space_retry(struct mfs *fs, unsigned what, unsigned *retries)
{
	bool freed, commit = false, again = false;

	if (!what || *retries >= MFS_SPACE_RETRIES || fs->read_only)
		return false;
	/* an eviction frees inodes and meta blocks at once, data blocks at its commit */
	freed = wait_freeing(fs);
	if (!freed && *retries < MFS_SPACE_UNLINKED_TRIES && !data_pending(fs, what))
		freed = wait_unlinked(fs);
	if (what & MFS_SPACE_DATA) {
		switch (mfs_alloc_data_state(fs)) {
		case MFS_SPACE_PENDING:
			commit = true;
			break;
		case MFS_SPACE_FREE:
			again = true; /* a commit gave blocks back since the allocation failed */
			break;
		}
	}
	if (!freed && !commit && !again)
		return false; /* the space is truly gone */
	++*retries;
	/* a commit that fails aborts the journal: the operation fails as it was */
	return !commit || mfs_txn_commit(fs) == 0;
}
