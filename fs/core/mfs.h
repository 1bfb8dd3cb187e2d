/* SPDX-License-Identifier: MIT */
/*
 * mendfs filesystem library internals: the layers under the namespace
 * operations, shared by the daemon, mkfs.mendfs and fsck.mendfs.  Lowest
 * first; each calls only the layers before it (and the block engine):
 *
 *   fserror.c  the error state: an I/O error turns the filesystem read-only
 *   super.c    superblock: read (primary or backup, newest valid), validate, write both
 *   meta.c     metadata buffer cache: verified reads with twin fallback and healing,
 *              writes of both copies
 *   journal.c  transactions, commit (ordered mode), checkpoint; tells the
 *              allocator about commits through the hooks it registers
 *   journal_replay.c  replay at mount, and the scan fsck -n makes
 *   layout.c   the layout arithmetic mkfs and grow share (mfs_layout.h)
 *   grow.c     offline growth to a grown device, `mendctl grow` (mfs_grow.h)
 *   btree*.c   B+trees of 64-bit keys (extents, directories, xattrs, quarantine,
 *              orphans); node blocks come from fs->bt_alloc (btree_int.h)
 *   roots.c    the journaled copy of the superblock's tree roots
 *   alloc*.c   data/meta/inode allocators, quarantine of poisoned free extents
 *              (alloc_int.h)
 *   space.c    ENOSPC only when the space is truly gone: commit and retry
 *   orphan.c   the orphan tree (mfs_int.h)
 *
 * Above them: inodes, namespace, file data, xattrs (mfs_ops.h), and mount.c,
 * which sets everything up, on top.
 *
 * All device I/O goes through the block engine (include/mendfs/blk.h).
 * Functions return 0 or -errno; a metadata block that fails its checks is
 * -EUCLEAN, logged with its block number, and never trusted.
 *
 * Lock order (outer first): inode locks (by inode number, lower first) ->
 * mfs.txn_lock (transaction membership) -> mfs_buf.lock -> mfs.alloc_lock ->
 * mfs.cache_lock.
 */
#ifndef MENDFS_FS_MFS_H
#define MENDFS_FS_MFS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "mendfs/blk.h"
#include "mendfs/format.h"
#include "lock.h"
#include "mfs_events.h"

struct mfs_txn;
struct mfs_ino;
struct mfs_commit_hooks;
struct mfs_bt_alloc;

/* --- small helpers ------------------------------------------------------------- */

/* A timespec as the format's nanoseconds since the epoch. */
static inline int64_t mfs_ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* The wall clock in nanoseconds (inode times, superblock times). */
static inline int64_t mfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return mfs_ts_ns(&ts);
}

/* --- checksums (super.c) --------------------------------------------------- */

/* XXH3-64 of a 4096-byte block with its header's csum field taken as zero. */
uint64_t mfs_block_csum(const void *block, uint64_t seed);
/* Fill hdr->csum. */
void mfs_block_seal(void *block, uint64_t seed);
/*
 * Check a metadata block read from @where (the location it was read from:
 * primary or twin): magic, type (@type, or any if 0), self-location (@blocknr),
 * checksum.  Returns 0 or -EUCLEAN.
 */
int mfs_block_verify(const void *block, uint64_t seed, uint16_t type, uint64_t blocknr);

/* --- the mounted filesystem --------------------------------------------------- */

struct mfs_stats {
	_Atomic uint64_t meta_reads, meta_writes;
	_Atomic uint64_t meta_repairs; /* bad copies rewritten from their twin */
	_Atomic uint64_t meta_lost;    /* blocks whose both copies were bad */
	_Atomic uint64_t commits, journal_blocks, checkpoints;
	/* orphans finished by the mount: inodes freed, truncates completed */
	_Atomic uint64_t orphans_freed, orphans_truncated;
};

struct mfs_buf;

struct mfs {
	struct blk_dev *dev;
	struct mfs_superblock sb; /* in-memory copy; written by mfs_super_write() */
	uint64_t seed;            /* sb.csum_seed */
	bool read_only;
	bool ro_at_mount;  /* mounted read-only (-o ro, unwritable features): never writable */
	_Atomic int error; /* -EIO after an I/O error: read-only, journal aborted (fserror.c) */
	bool dup;          /* metadata_dup */
	bool direct_reads; /* mfs_read_direct() may hand out mapping addresses */
	bool data_csum;    /* data_csum: data sectors checked against the table (csum.c) */
	/* data_csum: XXH3's secret from csum_seed, for the sector checksums (mfs_csum_init) */
	uint8_t csum_secret[192];

	/* buffer cache (meta.c) */
	struct mfs_lock cache_lock; /* lock.h */
	struct mfs_buf **hash;
	unsigned hash_size;
	unsigned nr_bufs, max_bufs;
	struct mfs_buf *lru_head, *lru_tail; /* every buffer, in the clock's order (meta.c) */

	/* journal (journal.c) */
	struct mfs_lock txn_lock; /* lock.h */
	struct mfs_cond txn_cond;
	struct mfs_txn *running; /* the transaction new handles join */
	bool grow_hold;          /* txn_lock: online growth holds new handles (mfs_journal_hold) */
	uint64_t next_txid;
	uint64_t jhead; /* next free block offset in the journal */
	uint64_t jtail; /* oldest block offset still needed by replay */
	void *journal;  /* journal.c private */
	const struct mfs_commit_hooks *commit_hooks; /* mfs_journal_set_hooks() */
	/*
	 * Test knobs (0: off).  txn_step_blocks lowers the bound of a step of
	 * a multi-transaction operation below mfs_txn_step_limit()'s default;
	 * commit_fail_after makes the commit that many commits from now fail
	 * before writing anything, as an I/O error would (journal aborted):
	 * a crash after the commits before it.
	 */
	unsigned txn_step_blocks;
	unsigned commit_fail_after;

	/* allocators (alloc*.c) */
	struct mfs_lock alloc_lock;          /* lock.h */
	void *alloc;                         /* struct mfs_alloc (alloc_int.h) */
	const struct mfs_bt_alloc *bt_alloc; /* the B+trees' node blocks (mfs_alloc_init) */
	_Atomic uint64_t bt_frees;           /* B+tree blocks freed, ever (struct mfs_bt_hint) */
	/* unlinked inodes not yet evicted and those being freed (space.c), under alloc_lock */
	unsigned space_unlinked;
	unsigned space_freeing;
	uint64_t space_freed;       /* frees finished, ever */
	struct mfs_cond space_cond; /* broadcast when one finishes */

	/* inodes and namespace (inode.c, namei.c: see fs/core/mfs_ops.h) */
	pthread_mutex_t icache_lock;
	void *icache;                /* inode.c private */
	pthread_mutex_t rename_lock; /* serialises renames (cycle checks) */
	pthread_mutex_t super_lock;  /* in-memory sb fields changed outside transactions */
	char *device;

	/* access times (atime.c): the policy, and the inodes whose new atime is in memory only */
	unsigned atime_flags; /* MFS_ATIME_* (atime.h) */
	pthread_mutex_t atime_lock;
	struct mfs_ino *atime_head, *atime_tail; /* atime_lock */
	size_t atime_nr;                         /* atime_lock */

	struct mfs_stats stats;
	struct mfs_events events; /* damage events (events.c) */
};

/* --- I/O errors (fserror.c) ------------------------------------------------------ */

/*
 * An I/O error (@err, logged with @what) the filesystem cannot go on from:
 * set fs->error, which aborts the journal (no handle begins, nothing more
 * commits), and turn read-only (see fserror.c).  Once only.
 */
void mfs_fs_error(struct mfs *fs, int err, const char *what);
/*
 * Transaction handles the calling thread holds open (mfs_txn_begin counts
 * up, mfs_txn_end down): mfs_meta_read asks whether an operation is half done.
 */
extern __thread unsigned mfs_txn_depth;
/* The error fsync and sync report: fs->error, or 0. */
static inline int mfs_fs_errno(struct mfs *fs)
{
	return atomic_load(&fs->error);
}

/* --- superblock (super.c) ------------------------------------------------------- */

/*
 * Read the superblock: the primary at block 0 and the backup at the last
 * block; take the valid one with the newest write_time (primary on a tie) and
 * report in *repaired whether the other needs rewriting.  Checks magic,
 * version, block size, feature bits (unknown incompat: -EOPNOTSUPP; unknown
 * ro_compat: *force_ro = true), geometry against the device size.  @err gets
 * a message naming the problem.
 */
int mfs_super_read(struct blk_dev *dev, struct mfs_superblock *sb, bool *force_ro, bool *other_bad,
                   char *err, size_t errlen);
/*
 * The checks mfs_super_read() makes on the copy it chose (everything but the
 * checksum: version, features, geometry against @dev_blocks), for a caller
 * that weighs both copies itself (fsck).  0, -EOPNOTSUPP or -EINVAL.
 */
/*
 * mfs_super_read() as if the device had @fs_blocks blocks (at most its
 * size): the backup copy is read at @fs_blocks - 1 and nr_blocks must equal
 * @fs_blocks.  For `mendctl grow`, which reads a filesystem smaller than its
 * (grown) device.
 */
int mfs_super_read_size(struct blk_dev *dev, uint64_t fs_blocks, struct mfs_superblock *sb,
                        bool *force_ro, bool *other_bad, char *err, size_t errlen);
int mfs_super_validate(const struct mfs_superblock *sb, uint64_t dev_blocks, bool *force_ro,
                       char *err, size_t errlen);
/* Seal and write both copies, then flush.  */
int mfs_super_write(struct mfs *fs);

/* --- metadata buffers (meta.c) ----------------------------------------------------- */

struct mfs_buf {
	struct mfs *fs;   /* the cache it belongs to (for mfs_buf_put) */
	uint64_t blocknr; /* primary location */
	uint8_t *data;    /* MFS_BLOCK_SIZE bytes, aligned */
	_Atomic int ref;
	struct mfs_lock lock; /* content lock: held while reading or changing data (lock.h) */
	uint16_t type;
	bool uptodate;
	bool dirty;          /* changed since written in place */
	struct mfs_txn *txn; /* transaction it belongs to, if dirty */
	uint64_t jgen;       /* last transaction that journaled it */
	bool referenced;     /* looked up since the clock last passed it (cache_lock) */
	struct mfs_buf *hnext, *lru_prev, *lru_next, *txn_next;
	/*
	 * A B+tree node whose items btree_node.c checked since the data last
	 * came from the device (cleared at every fill: a read, a read healed
	 * from the twin, mfs_meta_new); only the tree changes a node meanwhile.
	 */
	bool bt_checked;
	/*
	 * A leaf's bytes in use and lowest value offset (btree_insert.c's
	 * leaf_scan()), kept by the insert that changes them; 0: not known.
	 * Zeroed at every fill and by every other change of the node (bt_dirty).
	 */
	uint16_t bt_used, bt_start;
};

/* Where the twin of metadata/journal block @blk lives (0 without metadata_dup). */
uint64_t mfs_twin(const struct mfs *fs, uint64_t blk);

int mfs_cache_init(struct mfs *fs, unsigned max_bufs);
void mfs_cache_destroy(struct mfs *fs);
/* Evict down to the cache's size (a checkpoint, which lets the journal's buffers go). */
void mfs_cache_trim(struct mfs *fs);
/*
 * Get a verified metadata block (type checked unless 0).  A copy that fails
 * its checks or sits on poison is read from the twin, and the bad copy is
 * rewritten from the good one (counted in stats.meta_repairs).  Both bad:
 * -EIO (poison) or -EUCLEAN (corrupt), logged with the block number.
 */
int mfs_meta_read(struct mfs *fs, uint64_t blocknr, uint16_t type, struct mfs_buf **bp);
/* mfs_meta_read(), the buffer returned with its content lock held: one lock less. */
int mfs_meta_read_locked(struct mfs *fs, uint64_t blocknr, uint16_t type, struct mfs_buf **bp);
/* A zeroed buffer for a freshly allocated metadata block (header filled in). */
int mfs_meta_new(struct mfs *fs, uint64_t blocknr, uint16_t type, uint64_t owner,
                 struct mfs_buf **bp);
void mfs_buf_get(struct mfs_buf *b);
void mfs_buf_put(struct mfs_buf *b);
/* Write a sealed buffer in place: primary and twin.  Used by checkpoint and mkfs. */
int mfs_meta_write_inplace(struct mfs *fs, struct mfs_buf *b);
/*
 * Write @nblocks blocks from @buf at @blk and then at their twin (the
 * journal, checkpoint, replay): the twin only if the first write succeeded.
 * Returns 0 or -errno.
 */
int mfs_meta_write_both(struct mfs *fs, uint64_t blk, const void *buf, uint64_t nblocks);
/* An extent for mfs_meta_write_batch(): @nblocks blocks from @buf at block @blk. */
struct mfs_wext {
	uint64_t blk;
	const void *buf;
	uint64_t nblocks;
};
/*
 * Write @n extents, each at its block and at its twin, as one plugged batch
 * submitted in device order, so that adjacent blocks merge into few requests;
 * then wait for all of them.  Unlike mfs_meta_write_both() the twin is
 * written even when the primary fails (in the same batch); no flush.  Without
 * memory for the batch it falls back to mfs_meta_write_both() per extent.
 * Returns 0 or the first -errno.
 */
int mfs_meta_write_batch(struct mfs *fs, const struct mfs_wext *ext, unsigned n);
/* Forget a block (freed): drop it from the cache. */
void mfs_meta_forget(struct mfs *fs, uint64_t blocknr);
/*
 * Scrub one metadata block (scrub.c): read both copies from the device and
 * verify them (any type, or the cached one); rewrite a bad copy from the good
 * one on a writable filesystem.  A block changed in memory (dirty: the
 * journal will write both copies) is skipped.  @tmp: two blocks of scratch.
 * Returns one of MFS_SCRUB_* (>= 0) or -errno (-ENOMEM).
 */
enum {
	MFS_SCRUB_CLEAN,   /* both copies valid */
	MFS_SCRUB_SKIPPED, /* dirty in the cache: not checked */
	MFS_SCRUB_HEALED,  /* one copy bad, rewritten from the other */
	MFS_SCRUB_BAD,     /* one copy bad, left so (read-only or the rewrite failed) */
	MFS_SCRUB_LOST,    /* no valid copy */
};
int mfs_meta_scrub_block(struct mfs *fs, uint64_t blocknr, void *tmp);

/* --- transactions (journal.c), replay (journal_replay.c) --------------------------- */

/*
 * A handle joins the running transaction; everything dirtied between
 * mfs_txn_begin() and mfs_txn_end() commits atomically with it.  Commit
 * happens when a caller asks (mfs_txn_commit, fsync), when the transaction
 * grows large, or from the commit timer.  Ordered mode: data blocks a
 * transaction points at reach the device before its commit record.
 */
int mfs_txn_begin(struct mfs *fs, struct mfs_txn **txnp);
/* Record that @b (content lock held by the caller) changed in @txn. */
void mfs_txn_dirty(struct mfs_txn *txn, struct mfs_buf *b);
/* Note a data range whose write must be durable before @txn commits. */
void mfs_txn_ordered(struct mfs_txn *txn);
int mfs_txn_end(struct mfs_txn *txn);
/*
 * Bounded steps (docs/design/core.md §3).  An operation whose metadata grows with
 * the size of a file (truncate, punch, the freeing of an inode) runs as a
 * series of handles, each a consistent state, none dirtying more than
 * mfs_txn_step_limit() blocks with the rest of its transaction: journal_len
 * / 4 (64 blocks for the smallest, 1 MiB journal), so that a transaction
 * stays far below the journal's size (mfs_txn_end commits past half of it)
 * whatever else joined it.  mfs_txn_begin_step() starts such a handle: if
 * the running transaction lacks @need blocks of room below the limit, it is
 * committed first (the caller must hold no handle).  mfs_txn_room() says
 * how many more blocks the transaction may dirty before the step should
 * end: a step does one more unit of work only while its worst case fits.
 */
unsigned mfs_txn_step_limit(const struct mfs *fs);
int mfs_txn_begin_step(struct mfs *fs, unsigned need, struct mfs_txn **txnp);
unsigned mfs_txn_room(struct mfs_txn *txn);
/* Commit everything up to now and wait until it is durable. */
int mfs_txn_commit(struct mfs *fs);
/* Write committed blocks in place and free journal space. */
int mfs_checkpoint(struct mfs *fs);
/*
 * Remount (mfs_remount): freeze checkpoints, marks the filesystem clean and
 * makes it read-only at once, -EAGAIN if a transaction is running (commit
 * and try again); thaw makes it writable and marks it dirty.  -EROFS after
 * an I/O error.
 */
int mfs_journal_freeze(struct mfs *fs);
int mfs_journal_thaw(struct mfs *fs);
/*
 * Online growth (grow.c): hold makes every new handle outside a handle wait
 * (it does not fail), commits what runs, checkpoints, and returns with no
 * transaction running and the commit mutex held, so nothing changes the
 * metadata until release.  0, -EROFS (read-only or after an error), -EBUSY
 * (another hold, or a transaction kept coming back) or a checkpoint error.
 */
int mfs_journal_hold(struct mfs *fs);
void mfs_journal_release(struct mfs *fs);
/*
 * Run @fn with the journal still (commit_mutex): no commit, no checkpoint
 * and no superblock write meanwhile, so fs->jtail..fs->jhead and both
 * superblock copies are as they will stay until @fn returns.  @fn must not
 * begin or commit a transaction.  For the scrub (scrub.c).  Returns @fn's.
 */
int mfs_journal_still(struct mfs *fs, int (*fn)(struct mfs *fs, void *arg), void *arg);

int mfs_journal_init(struct mfs *fs);
void mfs_journal_destroy(struct mfs *fs);
/*
 * What the journal tells a layer above it about each commit (the allocator:
 * data blocks a transaction freed become allocatable only once its commit is
 * durable).  begin runs when a commit has closed the running transaction (no
 * handle open; txn_lock held) and returns what end gets back; end runs after
 * the commit, @committed true when it is durable, false when nothing of it
 * reached the device.
 */
struct mfs_commit_hooks {
	void *(*begin)(struct mfs *fs);
	void (*end)(struct mfs *fs, void *cookie, bool committed);
};
/* Register @hooks (NULL: none) for every later commit; no commit may be running. */
void mfs_journal_set_hooks(struct mfs *fs, const struct mfs_commit_hooks *hooks);
/*
 * Replay committed transactions from sb->journal_seq/journal_tail onto the
 * device (both copies), advance the superblock.  Returns the number of
 * transactions replayed or -errno.  With @dry_run nothing is written and the
 * count says whether replay is needed.
 */
int mfs_journal_replay(struct blk_dev *dev, struct mfs_superblock *sb, bool dry_run, char *err,
                       size_t errlen);
/*
 * Call @fn(arg, blocknr, image) for every image replay would write, in replay
 * order, writing nothing (fsck -n checks the state after replay in memory).
 * A non-zero return of @fn stops the scan and is returned.  Returns the
 * number of transactions or -errno.
 */
int mfs_journal_scan(struct blk_dev *dev, const struct mfs_superblock *sb,
                     int (*fn)(void *arg, uint64_t blocknr, const void *img), void *arg);

/* --- the roots record (roots.c) ------------------------------------------------------ */

/*
 * Journal the superblock's tree roots (quarantine_root/depth, orphan_root/
 * depth) in @txn, in a record in the tail of the first inode table block:
 * the superblock itself is not journaled.  Call in the transaction that
 * changed them; at mount the replayed record wins.
 */
int mfs_super_roots_log(struct mfs *fs, struct mfs_txn *txn);
/* At mount, after replay: a valid roots record overrides fs->sb's roots.  0 or -errno. */
int mfs_roots_load(struct mfs *fs);

/* --- allocation (alloc*.c) ----------------------------------------------------------- */

int mfs_alloc_init(struct mfs *fs);
void mfs_alloc_destroy(struct mfs *fs);
/*
 * Online growth (grow.c, under mfs_journal_hold): the on-disk superblock is
 * now @nsb (same zones, longer data zone, bitmaps and twins moved); the
 * allocator takes its bitmaps' new places and the new data blocks, and the
 * new layout and counters are copied into fs->sb.  0 or -ENOMEM.
 */
int mfs_alloc_grow(struct mfs *fs, const struct mfs_superblock *nsb);
/* Up to @want contiguous data blocks near @goal; *got may be less.  -ENOSPC when none. */
int mfs_alloc_data(struct mfs *fs, struct mfs_txn *txn, uint64_t goal, uint64_t want,
                   uint64_t *start, uint64_t *got);
/* Free data blocks; poisoned ones go to the quarantine tree instead. */
int mfs_free_data(struct mfs *fs, struct mfs_txn *txn, uint64_t start, uint64_t len);
int mfs_alloc_meta(struct mfs *fs, struct mfs_txn *txn, uint64_t *blocknr);
int mfs_free_meta(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr);
int mfs_alloc_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t *ino);
int mfs_free_ino(struct mfs *fs, struct mfs_txn *txn, uint64_t ino);
/*
 * Freed data blocks become allocatable only once the freeing transaction has
 * committed: mfs_alloc_init registers commit hooks with the journal
 * (mfs_journal_set_hooks) that move them from pending to free.
 * mfs_alloc_data_state() tells mfs_space_retry() what a data allocation that
 * got -ENOSPC may find now: MFS_SPACE_PENDING, frees of the running or a
 * committing transaction (a commit gives them back); else MFS_SPACE_FREE,
 * free extents (given back since); else MFS_SPACE_NONE.
 */
enum { MFS_SPACE_NONE, MFS_SPACE_PENDING, MFS_SPACE_FREE };
int mfs_alloc_data_state(struct mfs *fs);
/*
 * ENOSPC only when the space is truly gone (space.c; docs/design/core.md §3).  An
 * operation whose allocation failed with -ENOSPC ends its handle (a commit
 * waits for every open handle), then asks mfs_space_retry() whether to run
 * again: @what says what it was short of (MFS_SPACE_DATA: data blocks, whose
 * frees come back at their commit; MFS_SPACE_META: meta blocks or inodes,
 * whose frees come back at once).  It waits for an unlinked inode being freed
 * (mfs_space_freeing_begin/end, around the eviction), for a short while for
 * one still referenced (mfs_space_unlinked(), when nlink reaches 0: the
 * kernel's RELEASE or FORGET may be on its way), commits when data frees
 * are pending, and says true when the retry may find space; false (give up
 * with -ENOSPC) when nothing is coming back, or after MFS_SPACE_RETRIES
 * retries (*retries counts them; reset it when the operation makes progress).
 * The caller may hold inode locks, never a handle.
 */
#define MFS_SPACE_DATA    1u
#define MFS_SPACE_META    2u
#define MFS_SPACE_RETRIES 16u
bool mfs_space_retry(struct mfs *fs, unsigned what, unsigned *retries);
void mfs_space_unlinked(struct mfs *fs);
void mfs_space_freeing_begin(struct mfs *fs);
void mfs_space_freeing_end(struct mfs *fs);
/*
 * Release quarantined blocks whose poison is gone (zero-init, fsck): the
 * entries intersecting [start, start + len), in bounded steps of their own
 * handles (the caller must hold no handle).
 */
int mfs_quarantine_release(struct mfs *fs, uint64_t start, uint64_t len);

/* --- B+trees (btree*.c) -------------------------------------------------------------- */

/* A tree's root lives in its owner (inode or superblock); the caller stores it back. */
struct mfs_btree {
	uint64_t root;  /* 0: empty tree */
	uint16_t depth; /* 0: root is a leaf */
	uint16_t kind;  /* enum mfs_tree_kind */
	uint16_t flags; /* MFS_BT_* */
	uint64_t owner; /* inode number or 0 */
};

/*
 * A delete that empties the tree keeps its root leaf (empty) instead of
 * freeing it: for a tree that empties and fills again all the time (the
 * orphan tree: one entry from unlink to forget), so that each insert does not
 * allocate a block the delete frees again.
 */
#define MFS_BT_KEEP_ROOT 1u

/*
 * Where the B+trees get and give back their node blocks: the meta zone
 * allocator (mfs_alloc_meta, mfs_free_meta), which sits above the trees (its
 * quarantine is one) and hands them these in fs->bt_alloc at mfs_alloc_init.
 */
struct mfs_bt_alloc {
	int (*alloc)(struct mfs *fs, struct mfs_txn *txn, uint64_t *blocknr);
	int (*free)(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr);
};

/* Value of @key into @val (at most *len bytes; *len becomes its size).  -ENOENT if absent. */
int mfs_bt_lookup(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, void *val,
                  uint16_t *len);
/* The entry with the greatest key <= @key.  -ENOENT if none. */
int mfs_bt_lookup_le(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *found,
                     void *val, uint16_t *len);
/* The entry with the smallest key >= @key (one descent, no copy of a leaf).  -ENOENT if none. */
int mfs_bt_lookup_ge(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *found,
                     void *val, uint16_t *len);
/*
 * Both neighbours of @key, mostly in one descent: the entry with the greatest
 * key <= @key into @le_key/@le_val, the smallest >= @key into @ge_key/@ge_val
 * (at most *len bytes each; *len becomes the value's size).  Returns the ones
 * found (MFS_BT_LE | MFS_BT_GE) or -errno.
 */
#define MFS_BT_LE 1
#define MFS_BT_GE 2
int mfs_bt_lookup_around(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *le_key,
                         void *le_val, uint16_t *le_len, uint64_t *ge_key, void *ge_val,
                         uint16_t *ge_len);
/*
 * Where a lookup of a key that is not in the tree ended, for an insert of a
 * key near it (mfs_bt_lookup_near, mfs_bt_insert_near): the leaf holding
 * entries on both sides of the key (0: none), and fs->bt_frees before the
 * lookup.  While no B+tree block has been freed since, the leaf is still a
 * leaf of the same tree (a live node keeps its tree and level), and a key
 * that falls strictly between two of its keys belongs in it.  The caller
 * keeps the tree from changing otherwise (the inode lock for a file's map).
 */
struct mfs_bt_hint {
	uint64_t leaf;
	uint64_t frees;
};
/* mfs_bt_lookup_around(), filling *@hint (NULL: not wanted). */
int mfs_bt_lookup_near(struct mfs *fs, const struct mfs_btree *bt, uint64_t key, uint64_t *le_key,
                       void *le_val, uint16_t *le_len, uint64_t *ge_key, void *ge_val,
                       uint16_t *ge_len, struct mfs_bt_hint *hint);
int mfs_bt_insert(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                  const void *val, uint16_t len); /* -EEXIST */
/*
 * mfs_bt_insert() into the leaf @hint names, without a walk from the root,
 * when the hint still holds and the entry fits there; else mfs_bt_insert().
 */
int mfs_bt_insert_near(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                       const void *val, uint16_t len, const struct mfs_bt_hint *hint);
int mfs_bt_update(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key,
                  const void *val, uint16_t len); /* -ENOENT */
int mfs_bt_delete(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt, uint64_t key);
/*
 * Call @fn for each entry with key >= @start in key order until it returns
 * non-zero (which is returned) or the tree ends (0).
 */
typedef int mfs_bt_iter_fn(void *arg, uint64_t key, const void *val, uint16_t len);
int mfs_bt_iterate(struct mfs *fs, const struct mfs_btree *bt, uint64_t start, mfs_bt_iter_fn *fn,
                   void *arg);
/* Free every block of the tree. */
int mfs_bt_destroy(struct mfs *fs, struct mfs_txn *txn, struct mfs_btree *bt);

/* --- POSIX ACL values (acl.c) ------------------------------------------------------ */

/*
 * The ACL xattrs and their values, Linux's posix_acl_xattr format
 * (<linux/posix_acl_xattr.h>): a little-endian header (version 2) and
 * 8-byte entries (tag, permissions, id).  These are the rules a reader of the
 * format checks (FORMAT.md, xattrs); the core enforces them when it sets or
 * uses an ACL, fsck.mendfs on every ACL xattr it finds (F0114).
 */
#define MFS_ACL_ACCESS  "system.posix_acl_access"
#define MFS_ACL_DEFAULT "system.posix_acl_default"

#define MFS_ACL_VERSION      2u
#define MFS_ACL_HDR_SIZE     4u
#define MFS_ACL_ENTRY_SIZE   8u
#define MFS_ACL_USER_OBJ     0x01u
#define MFS_ACL_USER         0x02u
#define MFS_ACL_GROUP_OBJ    0x04u
#define MFS_ACL_GROUP        0x08u
#define MFS_ACL_MASK         0x10u
#define MFS_ACL_OTHER        0x20u
#define MFS_ACL_UNDEFINED_ID 0xffffffffu
/* Which ACL @name is: MFS_ACL_TYPE_ACCESS, MFS_ACL_TYPE_DEFAULT, or 0 (not an ACL). */
#define MFS_ACL_TYPE_ACCESS  1
#define MFS_ACL_TYPE_DEFAULT 2
int mfs_acl_type(const char *name);

/*
 * Is @value a well-formed ACL?  Version 2, a whole number of entries, at
 * least one, permissions within rwx, and the entries in the order and
 * number posix_acl_valid() demands: one owner entry, named users, one group
 * entry, named groups, a mask (required when there are named entries), one
 * other entry; named entries need an id.  Returns 0 or -EINVAL.
 */
int mfs_acl_valid(const void *value, size_t size);

/*
 * May ACL @value (of @type, MFS_ACL_TYPE_ACCESS or MFS_ACL_TYPE_DEFAULT) be
 * stored on an inode of @mode?  Symlinks have no ACLs, a default ACL needs a
 * directory, and the value must be well formed (mfs_acl_valid).  *why (when
 * @why is not NULL) gets the rule broken, a constant string.  Returns 0,
 * -EOPNOTSUPP (a symlink), -EINVAL (malformed) or -EACCES (a default ACL on a
 * non-directory).
 */
int mfs_acl_check(const void *value, size_t size, int type, uint32_t mode, const char **why);

#endif /* MENDFS_FS_MFS_H */
