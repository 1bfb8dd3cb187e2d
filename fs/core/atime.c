/* SPDX-License-Identifier: MIT */
/*
 * Access times.  A read or a directory listing moves the inode's atime as
 * Linux's atime_needs_update() decides for a local filesystem:
 *
 *   relatime (default)  only if atime <= mtime, atime <= ctime, or the atime
 *                       is 24 hours old or more;
 *   strictatime         on every access;
 *   noatime             never;
 *   nodiratime          never for directories (with either of the first two).
 *
 * The new atime is kept in the in-memory inode only, and the inode goes on
 * the mount's list of lazy atimes (fs->atime_head).  It reaches the device
 * with the next transaction that writes the inode for any other reason
 * (mfs_inode_write takes it off the list), at the periodic commit, sync and
 * unmount (mfs_atime_flush), at fsync of the file, and when its last
 * reference goes (mfs_iput writes it while the inode is still cached).  A
 * crash loses what was not written: a read never starts a transaction.
 *
 * The overwrite fast path (write.c) uses the same list for mtime and ctime:
 * it moves them in memory, at most once per tick of the coarse clock, and
 * lists the inode (mfs_times_lazy); they reach the device the same ways.
 *
 * The common case -- relatime, an atime already newer than mtime and ctime
 * and less than a day old -- takes no lock: ip->atime_quiet_until says until
 * when accesses move nothing (atime + 24 h then; forever for a directory
 * under nodiratime; 0 for strictatime), and a read of the coarse clock and
 * one comparison decide.  It is computed under ip->lock from the times it
 * depends on, and every change of those times is written with
 * mfs_inode_write under ip->lock for writing, which resets it (through
 * mfs_atime_clean): a stale bound is never seen after the change.
 *
 * Invariants: an inode is on the list exactly while ip->atime_dirty is set;
 * both change under ip->lock (for writing) and fs->atime_lock together.  An
 * unlinked inode is never on it (mfs_atime_clean at the last unlink), and
 * the last reference of a listed inode is never dropped (mfs_iput writes the
 * atime first), so a listed inode has a reference and the flush may take
 * another without the inode cache's lock.
 *
 * Lock order: ip->lock -> handle -> fs->atime_lock (a leaf).
 *
 * This file holds the policy and the list, and calls nothing of the core
 * (below the inode table, whose mfs_inode_write cleans the list); the
 * write-back, which writes inodes and drops references, is inode.c's
 * (mfs_atime_write, mfs_atime_flush).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "atime.h"
#include "mfs_int.h"

bool mfs_atime_needs_update(unsigned flags, const struct mfs_inode *di, int64_t now_ns)
{
	if (flags & MFS_ATIME_NONE)
		return false;
	if ((flags & MFS_ATIME_NODIRATIME) && S_ISDIR(di->mode))
		return false;
	if (di->atime_ns == now_ns)
		return false;
	if (flags & MFS_ATIME_STRICT)
		return true;
	return di->atime_ns <= di->mtime_ns || di->atime_ns <= di->ctime_ns ||
	       now_ns - di->atime_ns >= MFS_RELATIME_NS;
}

/* Link @ip at the tail of the list (fs->atime_lock held). */
static void __atime_list_add(struct mfs *fs, struct mfs_ino *ip)
{
	ip->atime_next = NULL;
	ip->atime_prev = fs->atime_tail;
	if (fs->atime_tail)
		fs->atime_tail->atime_next = ip;
	else
		fs->atime_head = ip;
	fs->atime_tail = ip;
}

static void __atime_list_del(struct mfs *fs, struct mfs_ino *ip)
{
	if (ip->atime_prev)
		ip->atime_prev->atime_next = ip->atime_next;
	else
		fs->atime_head = ip->atime_next;
	if (ip->atime_next)
		ip->atime_next->atime_prev = ip->atime_prev;
	else
		fs->atime_tail = ip->atime_prev;
	ip->atime_prev = ip->atime_next = NULL;
}

/* Until when accesses to @di move nothing, as far as its times tell (ip->lock held). */
static int64_t quiet_until(unsigned flags, const struct mfs_inode *di)
{
	if ((flags & MFS_ATIME_NODIRATIME) && S_ISDIR(di->mode))
		return INT64_MAX;
	if ((flags & MFS_ATIME_STRICT) || di->atime_ns <= di->mtime_ns ||
	    di->atime_ns <= di->ctime_ns || di->atime_ns > INT64_MAX - MFS_RELATIME_NS)
		return 0;
	return di->atime_ns + MFS_RELATIME_NS;
}

/* List @ip for the lazy write-back, if it is not yet (ip->lock held for writing). */
static void atime_list_mark(struct mfs *fs, struct mfs_ino *ip)
{
	if (atomic_load_explicit(&ip->atime_dirty, memory_order_relaxed))
		return;
	pthread_mutex_lock(&fs->atime_lock);
	atomic_store_explicit(&ip->atime_dirty, true, memory_order_relaxed);
	__atime_list_add(fs, ip);
	fs->atime_nr++;
	pthread_mutex_unlock(&fs->atime_lock);
}

void mfs_times_lazy(struct mfs *fs, struct mfs_ino *ip)
{
	/* mtime and ctime moved: relatime's bound depends on them */
	atomic_store_explicit(&ip->atime_quiet_until, 0, memory_order_release);
	atime_list_mark(fs, ip);
}

void mfs_file_accessed(struct mfs *fs, struct mfs_ino *ip)
{
	unsigned flags = fs->atime_flags;
	struct timespec ts;
	int64_t now;
	bool need;

	if ((flags & MFS_ATIME_NONE) || fs->read_only)
		return;
	/*
	 * The fast path: the coarse clock (a few ns, no system call) is as fine
	 * as the 24-hour rule needs; an atime that moves takes the fine one.
	 */
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	now = mfs_ts_ns(&ts);
	if (now < atomic_load_explicit(&ip->atime_quiet_until, memory_order_acquire))
		return;
	pthread_rwlock_rdlock(&ip->lock);
	need = mfs_atime_needs_update(flags, &ip->di, now);
	if (!need) /* under the lock: a writer's reset comes after it */
		atomic_store_explicit(&ip->atime_quiet_until, quiet_until(flags, &ip->di),
		                      memory_order_release);
	pthread_rwlock_unlock(&ip->lock);
	if (!need)
		return;

	pthread_rwlock_wrlock(&ip->lock);
	now = mfs_now_ns();
	/* unlinked: nobody will see it again; mode 0: freed under us */
	if (!ip->unlinked && ip->di.mode && mfs_atime_needs_update(flags, &ip->di, now)) {
		ip->di.atime_ns = now;
		atomic_store_explicit(&ip->atime_quiet_until, quiet_until(flags, &ip->di),
		                      memory_order_release);
		atime_list_mark(fs, ip);
	}
	pthread_rwlock_unlock(&ip->lock);
}

void mfs_atime_clean(struct mfs *fs, struct mfs_ino *ip)
{
	/* its times may have changed: the next access looks again */
	atomic_store_explicit(&ip->atime_quiet_until, 0, memory_order_release);
	if (!atomic_load_explicit(&ip->atime_dirty, memory_order_relaxed))
		return;
	pthread_mutex_lock(&fs->atime_lock);
	atomic_store_explicit(&ip->atime_dirty, false, memory_order_relaxed);
	__atime_list_del(fs, ip);
	fs->atime_nr--;
	pthread_mutex_unlock(&fs->atime_lock);
}

size_t mfs_atime_pending(struct mfs *fs)
{
	size_t nr;

	pthread_mutex_lock(&fs->atime_lock);
	nr = fs->atime_nr;
	pthread_mutex_unlock(&fs->atime_lock);
	return nr;
}

struct mfs_ino *mfs_atime_first(struct mfs *fs)
{
	struct mfs_ino *ip;

	pthread_mutex_lock(&fs->atime_lock);
	ip = fs->atime_head;
	if (ip)
		atomic_fetch_add(&ip->ref, 1); /* listed: it has a reference already */
	pthread_mutex_unlock(&fs->atime_lock);
	return ip;
}
