/* SPDX-License-Identifier: MIT */
/*
 * In-memory inodes: a hash of struct mfs_ino keyed by inode number, counted
 * by references (mfs_iget / mfs_iput), loaded from the inode table
 * (itable.c, docs/FORMAT.md §6), the allocation and freeing of inodes, and
 * the write-back of lazy access times (the policy and the list: atime.c).
 * Calls itable.c, atime.c, the block map (fmap.c) and xattr_blocks.c to
 * release an evicted inode's blocks, the orphan tree, the allocator, the
 * journal and space.c; everything that works on inodes sits above it.
 *
 * An inode lives in the cache exactly while it is referenced.  Some
 * references are pins (mfs_ipin: the daemon's, one per inode the kernel
 * knows), which keep the memory and the number but are not users.  An
 * unlinked inode (nlink 0) is freed when its last user goes: by the unlink's
 * own transaction when it had none then (mfs_inode_unlinked), else by the
 * mfs_iput that drops the last user, or by the eviction at its last
 * reference.  Freed while pinned, it is dead: mfs_iget refuses its number
 * and mfs_inode_new skips it until the last pin goes.  Freeing releases its
 * data blocks, xattrs and directory tree, removes its orphan entry, clears
 * its slot and frees its number.  A small inode (a few extents, no
 * trees: mfs_inode_free_is_small) goes in one transaction; a larger one is
 * on the orphan list first, then its blocks go in bounded steps
 * (mfs_file_free_all, docs/design/core.md §3), then the rest in a last
 * transaction: a crash in between leaves an orphan that the next mount
 * finishes freeing.  While that runs the entry stays in the hash with ref 0
 * so that mfs_iget refuses it (-ENOENT) instead of loading a second copy; an
 * inode created meanwhile with the same (just freed) number is inserted in
 * front of it.
 *
 * Locking: fs->icache_lock protects the hash, every transition of ref to
 * or from zero, unlinked, dead and pins, and the decision that an unlinked
 * inode has no user left; ip->lock (see fs/core/mfs_ops.h) protects ip->di and the inode's
 * trees.  icache_lock is a leaf: nothing is read or locked while it is held.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atime.h"
#include "mfs_int.h"

#define ICACHE_BUCKETS 65536u

struct mfs_icache {
	struct mfs_ino **hash;
	/*
	 * Per bucket, how many entries have left it (icache_lock): mfs_iget
	 * copies a slot outside the lock, and an inode that was loaded, changed
	 * and dropped meanwhile makes that copy stale (see mfs_iget).
	 */
	uint32_t *removed;
	uint64_t gen; /* next generation (protected by icache_lock) */
};

static inline struct mfs_icache *IC(struct mfs *fs)
{
	return fs->icache;
}

static inline unsigned ihash(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 40) & (ICACHE_BUCKETS - 1);
}

int mfs_icache_init(struct mfs *fs)
{
	struct mfs_icache *ic = calloc(1, sizeof(*ic));

	if (!ic)
		return -ENOMEM;
	ic->hash = calloc(ICACHE_BUCKETS, sizeof(*ic->hash));
	ic->removed = calloc(ICACHE_BUCKETS, sizeof(*ic->removed));
	if (!ic->hash || !ic->removed) {
		free(ic->hash);
		free(ic->removed);
		free(ic);
		return -ENOMEM;
	}
	/* generations differ from any earlier user of a slot: time-based start */
	ic->gen = (uint64_t)mfs_now_ns();
	pthread_mutex_init(&fs->icache_lock, NULL);
	fs->icache = ic;
	return 0;
}

static void ino_free(struct mfs_ino *ip)
{
	pthread_rwlock_destroy(&ip->lock);
	free(ip);
}

void mfs_icache_destroy(struct mfs *fs)
{
	struct mfs_icache *ic = IC(fs);
	unsigned i;

	if (!ic)
		return;
	for (i = 0; i < ICACHE_BUCKETS; i++) {
		struct mfs_ino *ip, *next;

		for (ip = ic->hash[i]; ip; ip = next) {
			next = ip->hnext;
			ino_free(ip);
		}
	}
	free(ic->hash);
	free(ic->removed);
	free(ic);
	fs->icache = NULL;
	pthread_mutex_destroy(&fs->icache_lock);
}

/* icache_lock held.  *evicting: only an entry being freed was found. */
static struct mfs_ino *__ifind(struct mfs *fs, uint64_t ino, bool *evicting)
{
	struct mfs_ino *ip;

	*evicting = false;
	for (ip = IC(fs)->hash[ihash(ino)]; ip; ip = ip->hnext) {
		if (ip->ino != ino)
			continue;
		if (atomic_load(&ip->ref) > 0 && !ip->dead)
			return ip;
		*evicting = true; /* or dead: freed, still pinned */
	}
	return NULL;
}

static void __iinsert(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_ino **head = &IC(fs)->hash[ihash(ip->ino)];

	ip->hnext = *head;
	*head = ip;
}

static void __iremove(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_ino **pp = &IC(fs)->hash[ihash(ip->ino)];

	IC(fs)->removed[ihash(ip->ino)]++;

	while (*pp && *pp != ip)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = ip->hnext;
	ip->hnext = NULL;
}

static struct mfs_ino *ino_alloc(uint64_t ino)
{
	struct mfs_ino *ip = calloc(1, sizeof(*ip));

	if (!ip)
		return NULL;
	ip->ino = ino;
	pthread_rwlock_init(&ip->lock, NULL);
	atomic_init(&ip->ref, 1);
	return ip;
}

int mfs_iget(struct mfs *fs, uint64_t ino, struct mfs_ino **ipp)
{
	struct mfs_ino *ip, *fresh = NULL;
	bool evicting, orphan = false;
	uint32_t removed;
	int ret;

	pthread_mutex_lock(&fs->icache_lock);
	for (;;) {
		ip = __ifind(fs, ino, &evicting);
		if (ip) {
			atomic_fetch_add(&ip->ref, 1);
			break;
		}
		if (evicting)
			break;
		/*
		 * Copy the slot outside the lock.  Whoever loads, changes and
		 * drops the inode meanwhile writes its slot before it leaves the
		 * cache: if anything left this bucket since, the copy may predate
		 * that write, and is made again.
		 */
		removed = IC(fs)->removed[ihash(ino)];
		pthread_mutex_unlock(&fs->icache_lock);
		if (!fresh)
			fresh = ino_alloc(ino);
		if (!fresh)
			return -ENOMEM;
		ret = mfs_inode_read(fs, ino, &fresh->di);
		if (ret) {
			ino_free(fresh);
			return ret;
		}
		fresh->unlinked = fresh->di.nlink == 0;
		pthread_mutex_lock(&fs->icache_lock);
		if (IC(fs)->removed[ihash(ino)] != removed)
			continue;
		/* someone may have loaded it meanwhile: theirs wins */
		ip = __ifind(fs, ino, &evicting);
		if (ip) {
			atomic_fetch_add(&ip->ref, 1);
		} else if (!evicting) {
			__iinsert(fs, fresh);
			ip = fresh;
			fresh = NULL;
			orphan = ip->unlinked;
		}
		break;
	}
	pthread_mutex_unlock(&fs->icache_lock);
	if (fresh)
		ino_free(fresh);
	if (orphan)
		mfs_space_unlinked(fs); /* an orphan loaded: freed at its last reference */
	if (!ip)
		return -ENOENT;
	*ipp = ip;
	return 0;
}

/* Is @ino the number of a dead inode still pinned (the kernel still knows it)? */
static bool ino_pinned_dead(struct mfs *fs, uint64_t ino)
{
	struct mfs_ino *ip;
	bool held = false;

	pthread_mutex_lock(&fs->icache_lock);
	for (ip = IC(fs)->hash[ihash(ino)]; ip && !held; ip = ip->hnext)
		held = ip->ino == ino && ip->dead;
	pthread_mutex_unlock(&fs->icache_lock);
	return held;
}

/*
 * A free inode number, never one of a dead inode still pinned: the kernel
 * would see a node id it knows come back before its FORGET.  The numbers
 * skipped are given back in the same transaction (next-fit: the allocator's
 * hint has moved past them).
 */
static int alloc_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t *inop)
{
	uint64_t ino, *skip = NULL, *v;
	size_t nskip = 0;
	int ret;

	for (;;) {
		ret = mfs_alloc_ino(fs, txn, &ino);
		if (ret || !ino_pinned_dead(fs, ino))
			break;
		v = realloc(skip, (nskip + 1) * sizeof(*skip));
		if (!v) {
			mfs_free_ino(fs, txn, ino);
			ret = -ENOMEM;
			break;
		}
		skip = v;
		skip[nskip++] = ino;
	}
	while (nskip--)
		mfs_free_ino(fs, txn, skip[nskip]);
	free(skip);
	if (!ret)
		*inop = ino;
	return ret;
}

int mfs_inode_new(struct mfs *fs, struct mfs_txn *txn, mode_t mode, uid_t uid, gid_t gid,
                  struct mfs_ino **ipp)
{
	struct mfs_inode old;
	struct mfs_ino *ip;
	uint64_t ino, gen;
	int64_t now = mfs_now_ns();
	int ret;

	ret = alloc_ino(fs, txn, &ino);
	if (ret)
		return ret;
	ip = ino_alloc(ino);
	if (!ip) {
		mfs_free_ino(fs, txn, ino);
		return -ENOMEM;
	}
	ret = mfs_inode_read(fs, ino, &old);
	if (ret != -ENOENT) {
		if (!ret) {
			fprintf(stderr, "mendfs: inode %llu is free in the bitmap but in use\n",
			        (unsigned long long)ino);
			ret = -EUCLEAN;
		}
		/* the number stays allocated: a used or unreadable slot must not be handed out */
		ino_free(ip);
		return ret;
	}
	pthread_mutex_lock(&fs->icache_lock);
	gen = IC(fs)->gen++;
	pthread_mutex_unlock(&fs->icache_lock);
	if (gen <= old.generation)
		gen = old.generation + 1;
	/* file handles carry the low 32 bits (the kernel's i_generation) */
	if ((uint32_t)gen == (uint32_t)old.generation)
		gen++;
	ip->di.mode = (uint32_t)mode;
	ip->di.nlink = 1;
	ip->di.uid = (uint32_t)uid;
	ip->di.gid = (uint32_t)gid;
	ip->di.atime_ns = ip->di.mtime_ns = ip->di.ctime_ns = ip->di.btime_ns = now;
	ip->di.generation = gen;
	if (S_ISDIR(mode)) {
		ip->di.nlink = 2;
		ip->di.parent = MFS_ROOT_INO;
	}
	ret = mfs_inode_write(fs, txn, ip);
	if (ret) {
		mfs_free_ino(fs, txn, ino);
		ino_free(ip);
		return ret;
	}
	pthread_mutex_lock(&fs->icache_lock);
	__iinsert(fs, ip);
	pthread_mutex_unlock(&fs->icache_lock);
	*ipp = ip;
	return 0;
}

void mfs_inode_discard(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	mfs_inode_clear_slot(fs, txn, ip->ino, ip->di.generation);
	mfs_free_ino(fs, txn, ip->ino);
	pthread_mutex_lock(&fs->icache_lock);
	__iremove(fs, ip);
	pthread_mutex_unlock(&fs->icache_lock);
	ino_free(ip);
}

int mfs_inode_free(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	struct mfs_inode *di = &ip->di;
	int ret = 0, r;

	if (S_ISREG(di->mode) || (S_ISLNK(di->mode) && !(di->iflags & MFS_IFL_INLINE_DATA)))
		ret = mfs_file_release_blocks(fs, txn, ip);
	if (di->xattr_root || di->inline_xattr_len) {
		r = mfs_xattr_release(fs, txn, ip);
		ret = ret ? ret : r;
	}
	if (S_ISDIR(di->mode) && di->dir_root) {
		struct mfs_btree bt = {.root = di->dir_root,
		                       .depth = di->dir_depth,
		                       .kind = MFS_TREE_DIR,
		                       .owner = ip->ino};

		r = mfs_bt_destroy(fs, txn, &bt);
		ret = ret ? ret : r;
		di->dir_root = bt.root;
		di->dir_depth = bt.depth;
	}
	if (ret) {
		/*
		 * Keep the slot and the orphan entry: fsck (or the next mount)
		 * finishes it.  What was released is released in @txn too: the
		 * inode goes with it, so that no freed block stays mapped.
		 */
		fprintf(stderr, "mendfs: freeing inode %llu: %s\n", (unsigned long long)ip->ino,
		        strerror(-ret));
		mfs_inode_write(fs, txn, ip);
		return ret;
	}
	if (di->iflags & MFS_IFL_ORPHAN) {
		ret = mfs_orphan_del(fs, txn, ip->ino);
		if (ret && ret != -ENOENT)
			return ret;
		di->iflags &= ~MFS_IFL_ORPHAN;
	}
	ret = mfs_inode_clear_slot(fs, txn, ip->ino, di->generation);
	if (!ret)
		ret = mfs_free_ino(fs, txn, ip->ino);
	if (!ret) {
		ip->freed_mode = di->mode;
		di->mode = 0;
	}
	return ret;
}

bool mfs_inode_free_is_small(const struct mfs_ino *ip)
{
	const struct mfs_inode *di = &ip->di;

	/* at most 4 inline extents of at most MFS_BITMAP_BITS blocks in all: 8 bitmap blocks */
	return !(di->iflags & MFS_IFL_EXTENT_TREE) && di->blocks <= MFS_BITMAP_BITS &&
	       di->xattr_depth == 0 && di->dir_depth == 0;
}

/* Worst case of mfs_inode_free() of a small inode (or of an orphan insert), in blocks. */
#define SMALL_FREE_COST 40u

/* Free unlinked @ip (lock held for writing): in steps unless it is small. */
static int free_steps(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_txn *txn;
	int ret, r;

	if (!mfs_inode_free_is_small(ip)) {
		if (!(ip->di.iflags & MFS_IFL_ORPHAN)) {
			/* the restart point first (an orphan entry failed at unlink time) */
			ret = mfs_txn_begin_step(fs, SMALL_FREE_COST, &txn);
			if (ret)
				return ret;
			ret = mfs_orphan_add(fs, txn, ip->ino);
			if (!ret) {
				ip->di.iflags |= MFS_IFL_ORPHAN;
				ret = mfs_inode_write(fs, txn, ip);
			}
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
			if (ret)
				return ret;
		}
		if (S_ISREG(ip->di.mode) || S_ISLNK(ip->di.mode)) {
			ret = mfs_file_free_all(fs, ip);
			if (ret)
				return ret;
		}
	}
	/* bounded now: a plain handle, like any namespace operation */
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	ret = mfs_inode_free(fs, txn, ip);
	r = mfs_txn_end(txn);
	return ret ? ret : r;
}

/* The last user of unlinked @ip is gone (pins may remain): free it on disk. */
static void free_on_disk(struct mfs *fs, struct mfs_ino *ip)
{
	int ret;

	mfs_space_freeing_begin(fs); /* an allocation short of space waits for it */
	if (!fs->read_only && ip->di.mode) {
		pthread_rwlock_wrlock(&ip->lock);
		ret = free_steps(fs, ip);
		if (ret)
			fprintf(stderr,
			        "mendfs: inode %llu stays an orphan until the next mount: %s\n",
			        (unsigned long long)ip->ino, strerror(-ret));
		pthread_rwlock_unlock(&ip->lock);
	}
	mfs_space_freeing_end(fs);
}

/*
 * The last reference of an unlinked inode is gone: free it on disk (unless
 * it is @dead: freed already, by its unlink or its last user), then in memory.
 */
static void evict(struct mfs *fs, struct mfs_ino *ip, bool dead)
{
	if (!dead)
		free_on_disk(fs, ip);
	pthread_mutex_lock(&fs->icache_lock);
	__iremove(fs, ip);
	pthread_mutex_unlock(&fs->icache_lock);
	ino_free(ip);
}

bool mfs_inode_unlinked(struct mfs *fs, struct mfs_ino *ip, bool can_free)
{
	bool alone;

	pthread_mutex_lock(&fs->icache_lock);
	ip->unlinked = true; /* mfs_iput reads it under icache_lock */
	/* the caller's reference and pins (the kernel's lookups) only: nobody uses it */
	alone = can_free && atomic_load(&ip->ref) - ip->pins == 1;
	if (alone)
		ip->dead = true; /* mfs_iget refuses it from now on */
	pthread_mutex_unlock(&fs->icache_lock);
	return alone;
}

void mfs_inode_undead(struct mfs *fs, struct mfs_ino *ip)
{
	pthread_mutex_lock(&fs->icache_lock);
	ip->dead = false;
	pthread_mutex_unlock(&fs->icache_lock);
}

void mfs_ipin(struct mfs *fs, struct mfs_ino *ip)
{
	pthread_mutex_lock(&fs->icache_lock);
	ip->pins++;
	pthread_mutex_unlock(&fs->icache_lock);
}

void mfs_iunpin(struct mfs *fs, struct mfs_ino *ip)
{
	pthread_mutex_lock(&fs->icache_lock);
	assert(ip->pins > 0);
	ip->pins--;
	pthread_mutex_unlock(&fs->icache_lock);
	mfs_iput(fs, ip);
}

void mfs_iput(struct mfs *fs, struct mfs_ino *ip)
{
	bool last, unlinked, dead, users_gone = false;
	int left;

	if (!ip)
		return;
again:
	pthread_mutex_lock(&fs->icache_lock);
	if (atomic_load(&ip->ref) == 1 &&
	    atomic_load_explicit(&ip->atime_dirty, memory_order_relaxed)) {
		/*
		 * The last reference of an inode with a lazy atime (never an
		 * unlinked one): write it while the inode is still cached, so
		 * that nobody loads the older copy from the device meanwhile.
		 */
		pthread_mutex_unlock(&fs->icache_lock);
		mfs_atime_write(fs, ip);
		goto again;
	}
	left = atomic_fetch_sub(&ip->ref, 1) - 1;
	last = left == 0;
	unlinked = ip->unlinked;
	dead = ip->dead;
	if (last && !unlinked) {
		__iremove(fs, ip);
	} else if (!last && unlinked && !dead && left == ip->pins) {
		/*
		 * The last user of an unlinked inode (an open file closed, an
		 * operation done) and only pins left: free it now rather than
		 * at the kernel's FORGET, under a reference of our own.
		 */
		ip->dead = true;
		atomic_fetch_add(&ip->ref, 1);
		users_gone = true;
	}
	pthread_mutex_unlock(&fs->icache_lock);
	if (users_gone) {
		free_on_disk(fs, ip);
		mfs_iput(fs, ip); /* dead now: at most the memory goes */
		return;
	}
	if (!last)
		return;
	/* an unlinked one stays in the hash with ref 0 meanwhile: mfs_iget refuses it */
	if (unlinked)
		evict(fs, ip, dead);
	else
		ino_free(ip);
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

/* --- lazy access times: write-back (the policy and the list: atime.c) ------------------ */

int mfs_atime_write(struct mfs *fs, struct mfs_ino *ip)
{
	struct mfs_txn *txn;
	int ret = 0, r;

	if (!atomic_load_explicit(&ip->atime_dirty, memory_order_relaxed))
		return 0;
	pthread_rwlock_wrlock(&ip->lock);
	if (atomic_load_explicit(&ip->atime_dirty, memory_order_relaxed)) {
		ret = mfs_txn_begin(fs, &txn);
		if (!ret) {
			ret = mfs_inode_write(fs, txn, ip); /* takes it off the list */
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
		}
		if (ret) {
			fprintf(stderr, "mendfs: inode %llu: access time not written: %s\n",
			        (unsigned long long)ip->ino, strerror(-ret));
			mfs_atime_clean(fs, ip);
		}
	}
	pthread_rwlock_unlock(&ip->lock);
	return ret;
}

int mfs_atime_flush(struct mfs *fs)
{
	size_t todo = mfs_atime_pending(fs);
	struct mfs_ino *ip;
	int ret = 0, r;

	/* only those listed now: readers that keep moving atimes cannot hold us here */
	while (todo--) {
		ip = mfs_atime_first(fs);
		if (!ip)
			break;
		r = mfs_atime_write(fs, ip);
		ret = ret ? ret : r;
		mfs_iput(fs, ip);
	}
	return ret;
}

static struct timespec ns_to_ts(int64_t ns)
{
	struct timespec ts;

	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

void mfs_inode_to_stat(const struct mfs_ino *ip, struct stat *st)
{
	const struct mfs_inode *di = &ip->di;

	memset(st, 0, sizeof(*st));
	st->st_ino = ip->ino;
	st->st_mode = di->mode;
	st->st_nlink = di->nlink;
	st->st_uid = di->uid;
	st->st_gid = di->gid;
	st->st_rdev = di->rdev;
	st->st_size = (off_t)di->size;
	st->st_blksize = MFS_BLOCK_SIZE;
	st->st_blocks = (blkcnt_t)(di->blocks * (MFS_BLOCK_SIZE / 512));
	st->st_atim = ns_to_ts(di->atime_ns);
	st->st_mtim = ns_to_ts(di->mtime_ns);
	st->st_ctim = ns_to_ts(di->ctime_ns);
}
