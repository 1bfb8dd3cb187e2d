/* SPDX-License-Identifier: MIT */
/*
 * The metadata journal: a physical block journal in the style of JBD2.
 *
 * Transactions are compound: handles (mfs_txn_begin .. mfs_txn_end) join the
 * running transaction, and everything they dirty commits atomically.  Commit
 * closes the running transaction (new handles wait while it drains), takes a
 * sealed copy of every buffer it dirtied, and writes, in the journal area
 * (and its twin with metadata_dup: every journal block goes to both):
 *
 *   flush (ordered mode: data written before reaches media first)
 *   descriptor, images..., [descriptor, images...]   (both copies, one
 *                                                     plugged batch)
 *   flush
 *   commit block (both copies)
 *   flush
 *
 * A transaction occupies consecutive journal blocks starting where the
 * previous one ended, wrapping circularly at the end of the area, so replay
 * knows where each one starts.  Descriptors carry gen = transaction id and up
 * to MFS_JOURNAL_TAGS tags (primary block number, XXH3-64 of the image seeded
 * with csum_seed); the commit carries the image count and XXH3-64 (seeded)
 * over the tags of every descriptor in order.  After the images of a
 * descriptor comes either another descriptor of the same transaction or its
 * commit: replay goes by block type (next_desc is informative: offset 0 is a
 * valid offset).  Transaction ids are consecutive; replay skips one id after
 * it stops, so a torn transaction's id is never reused.
 *
 * Checkpoint is lazy: committed images wait in memory (their buffers pinned
 * and dirty) until the journal lacks room for the next commit or
 * mfs_checkpoint() is called; it writes the latest image of each block in
 * place (both copies) as one plugged batch sorted by block, flushes, and
 * persists journal_seq/journal_tail in the superblock.
 * A transaction larger than the whole journal is refused with -ENOSPC before
 * anything is written: its buffers are invalidated (re-read from the device)
 * and the journal is aborted, the filesystem read-only (fserror.c: later
 * handles fail with -EROFS, commits with -EIO): the
 * layers above (cached inodes, allocator state, tree roots) already hold the
 * refused changes and cannot be rolled back, so going on would commit later
 * changes on top of a state the device never had.  Operations whose metadata
 * grows with a file run in bounded steps (mfs_txn_begin_step) and never get
 * there.  An I/O error while committing or checkpointing aborts the journal
 * the same way (mfs_fs_error).
 *
 * Replay, at mount, is in journal_replay.c.
 *
 * Locking: j->commit_mutex serialises commit, checkpoint and the journal
 * space (jhead, jtail, used, the checkpoint list); it is taken before
 * fs->txn_lock.  txn_lock protects fs->running and each txn's updates and
 * locked; txn->list_lock (a leaf) protects the txn's buffer list.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "csum.h"
#include "mfs.h"

struct mfs_txn {
	struct mfs *fs;
	unsigned updates; /* open handles (txn_lock) */
	bool locked;      /* being closed by a commit: new handles wait (txn_lock) */
	pthread_mutex_t list_lock;
	struct mfs_buf *bufs; /* dirtied buffers, linked by txn_next, referenced (list_lock) */
	unsigned nr_bufs;
	unsigned nr_ordered; /* ordered data noted: covered by the commit's first flush */
};

/* A committed transaction whose images are not yet in place. */
struct jrec {
	struct jrec *next;
	uint64_t id;
	unsigned n;
	struct mfs_buf **bufs; /* referenced: pinned until checkpointed */
	uint8_t *jbuf;         /* descriptors and images as written to the journal */
	uint32_t *slot;        /* image i is at jbuf + slot[i] * MFS_BLOCK_SIZE */
};

struct mfs_journal {
	pthread_mutex_t commit_mutex;
	struct jrec *ckpt_head, *ckpt_tail;
	uint64_t used; /* journal blocks between jtail and jhead */
	uint8_t *cbuf; /* the commit block */
};

#define JTAGS ((unsigned)MFS_JOURNAL_TAGS)

static inline struct mfs_journal *J(struct mfs *fs)
{
	return fs->journal;
}

/* Journal blocks a transaction of @n images takes: descriptors, images, commit. */
static uint64_t txn_blocks(uint64_t n)
{
	return (n + JTAGS - 1) / JTAGS + n + 1;
}

/*
 * Write the descriptors and images of a transaction, @nblocks journal blocks
 * at journal offset @off (wrapping), both copies, as one plugged batch.
 */
static int jwrite_batch(struct mfs *fs, uint64_t off, const uint8_t *buf, uint64_t nblocks)
{
	const struct mfs_superblock *sb = &fs->sb;
	uint64_t first = nblocks < sb->journal_len - off ? nblocks : sb->journal_len - off;
	struct mfs_wext ext[2] = {
	        {sb->journal_start + off, buf, first},
	        {sb->journal_start, buf + first * MFS_BLOCK_SIZE, nblocks - first}};

	return mfs_meta_write_batch(fs, ext, nblocks > first ? 2 : 1);
}

/* Write @nblocks journal blocks at journal offset @off (wrapping), both copies. */
static int jwrite(struct mfs *fs, uint64_t off, const uint8_t *buf, uint64_t nblocks)
{
	const struct mfs_superblock *sb = &fs->sb;
	uint64_t first = nblocks < sb->journal_len - off ? nblocks : sb->journal_len - off;
	int ret;

	ret = mfs_meta_write_both(fs, sb->journal_start + off, buf, first);
	if (!ret && nblocks > first)
		ret = mfs_meta_write_both(fs, sb->journal_start, buf + first * MFS_BLOCK_SIZE,
		                          nblocks - first);
	return ret;
}

/* --- handles ------------------------------------------------------------------ */

int mfs_txn_begin(struct mfs *fs, struct mfs_txn **txnp)
{
	struct mfs_txn *t;
	int ret = 0;

	if (fs->read_only)
		return -EROFS;
	mfs_lock(&fs->txn_lock);
	/* online growth: wait, unless this thread holds a handle already (it must finish) */
	while (fs->grow_hold && mfs_txn_depth == 0)
		mfs_cond_wait(&fs->txn_cond, &fs->txn_lock, NULL);
	if (mfs_fs_errno(fs) || fs->read_only) {
		ret = -EROFS; /* after an error (fserror.c), or remounted read-only meanwhile */
		goto out;
	}
	while (fs->running && fs->running->locked)
		mfs_cond_wait(&fs->txn_cond, &fs->txn_lock, NULL);
	t = fs->running;
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t) {
			ret = -ENOMEM;
			goto out;
		}
		t->fs = fs;
		pthread_mutex_init(&t->list_lock, NULL);
		fs->running = t;
	}
	t->updates++;
	mfs_txn_depth++;
	*txnp = t;
out:
	mfs_unlock(&fs->txn_lock);
	return ret;
}

unsigned mfs_txn_step_limit(const struct mfs *fs)
{
	uint64_t lim = fs->sb.journal_len / 4;

	if (fs->txn_step_blocks && fs->txn_step_blocks < lim)
		lim = fs->txn_step_blocks;
	return lim ? (unsigned)lim : 1;
}

unsigned mfs_txn_room(struct mfs_txn *txn)
{
	unsigned lim = mfs_txn_step_limit(txn->fs), n;

	pthread_mutex_lock(&txn->list_lock);
	n = txn->nr_bufs;
	pthread_mutex_unlock(&txn->list_lock);
	return n < lim ? lim - n : 0;
}

int mfs_txn_begin_step(struct mfs *fs, unsigned need, struct mfs_txn **txnp)
{
	int ret, tries;

	/*
	 * Twice at most: after a commit another thread may fill the next
	 * transaction before this handle joins it; the step then runs anyway,
	 * doing at least one unit (mfs_txn_end commits past half the journal).
	 */
	for (tries = 0;; tries++) {
		ret = mfs_txn_begin(fs, txnp);
		if (ret || tries == 2 || mfs_txn_room(*txnp) >= need ||
		    mfs_txn_room(*txnp) == mfs_txn_step_limit(fs))
			return ret;
		ret = mfs_txn_end(*txnp);
		if (!ret)
			ret = mfs_txn_commit(fs);
		if (ret)
			return ret;
	}
}

void mfs_txn_dirty(struct mfs_txn *txn, struct mfs_buf *b)
{
	/* b->lock is held by the caller: b->txn is stable */
	b->dirty = true;
	if (b->txn == txn)
		return;
	b->txn = txn;
	mfs_buf_get(b); /* the journal's reference: held until checkpoint */
	pthread_mutex_lock(&txn->list_lock);
	b->txn_next = txn->bufs;
	txn->bufs = b;
	txn->nr_bufs++;
	pthread_mutex_unlock(&txn->list_lock);
}

void mfs_txn_ordered(struct mfs_txn *txn)
{
	pthread_mutex_lock(&txn->list_lock);
	txn->nr_ordered++;
	pthread_mutex_unlock(&txn->list_lock);
}

int mfs_txn_end(struct mfs_txn *txn)
{
	struct mfs *fs = txn->fs;
	bool big;

	mfs_txn_depth--;
	mfs_lock(&fs->txn_lock);
	if (--txn->updates == 0)
		mfs_cond_broadcast(&fs->txn_cond);
	pthread_mutex_lock(&txn->list_lock);
	/* past half the journal: commit now, so that it fits after a checkpoint */
	big = txn_blocks(txn->nr_bufs) * 2 > fs->sb.journal_len;
	pthread_mutex_unlock(&txn->list_lock);
	mfs_unlock(&fs->txn_lock);
	return big ? mfs_txn_commit(fs) : 0;
}

/* --- checkpoint ---------------------------------------------------------------- */

static void jrec_free(struct jrec *r)
{
	unsigned i;

	for (i = 0; i < r->n; i++)
		if (r->bufs[i])
			mfs_buf_put(r->bufs[i]);
	free(r->bufs);
	free(r->slot);
	free(r->jbuf);
	free(r);
}

/* Release a checkpointed record: its buffers are clean unless journaled again since. */
static void jrec_done(struct jrec *r)
{
	unsigned i;

	for (i = 0; i < r->n; i++) {
		struct mfs_buf *b = r->bufs[i];

		mfs_lock(&b->lock);
		if (!b->txn && b->jgen == r->id)
			b->dirty = false;
		mfs_unlock(&b->lock);
	}
	jrec_free(r);
}

/* A committed image waiting for checkpoint; @seq orders images by commit. */
struct ckpt_img {
	uint64_t blk;
	uint64_t seq;
	const uint8_t *img;
};

/* By block, and for one block the latest commit first. */
static int ckpt_img_cmp(const void *a, const void *b)
{
	const struct ckpt_img *x = a, *y = b;

	if (x->blk != y->blk)
		return x->blk < y->blk ? -1 : 1;
	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

/*
 * Write the committed images in place, both copies (commit_mutex held): only
 * the latest image of each block (a block journaled by several transactions
 * is written once, with its last committed content, which is what the
 * in-order writes of every image would have left), sorted by block and
 * submitted as one plugged batch so that adjacent blocks merge.  The caller
 * flushes before the journal tail moves, so a crash in between replays the
 * whole journal again.  Returns 0 or -errno.
 */
static int ckpt_write(struct mfs *fs)
{
	struct ckpt_img *im;
	struct mfs_wext *ext;
	uint64_t total = 0, seq = 0;
	unsigned i, n = 0;
	struct jrec *r;
	int ret;

	for (r = J(fs)->ckpt_head; r; r = r->next)
		total += r->n;
	if (!total)
		return 0;
	im = malloc(total * sizeof(*im));
	ext = malloc(total * sizeof(*ext));
	if (!im || !ext) {
		/* no memory: every image in commit order, one by one */
		free(im);
		free(ext);
		for (r = J(fs)->ckpt_head; r; r = r->next) {
			for (i = 0; i < r->n; i++) {
				ret = mfs_meta_write_both(
				        fs, r->bufs[i]->blocknr,
				        r->jbuf + (size_t)r->slot[i] * MFS_BLOCK_SIZE, 1);
				if (ret)
					goto fail;
				atomic_fetch_add(&fs->stats.meta_writes, 1);
			}
		}
		return 0;
	}
	for (r = J(fs)->ckpt_head; r; r = r->next) {
		for (i = 0; i < r->n; i++, seq++) {
			im[seq].blk = r->bufs[i]->blocknr;
			im[seq].seq = seq;
			im[seq].img = r->jbuf + (size_t)r->slot[i] * MFS_BLOCK_SIZE;
		}
	}
	qsort(im, total, sizeof(*im), ckpt_img_cmp);
	for (i = 0; i < total; i++)
		if (!n || ext[n - 1].blk != im[i].blk)
			ext[n++] = (struct mfs_wext){im[i].blk, im[i].img, 1};
	ret = mfs_meta_write_batch(fs, ext, n);
	free(im);
	free(ext);
	if (ret) {
		r = NULL;
		goto fail;
	}
	atomic_fetch_add(&fs->stats.meta_writes, n);
	return 0;
fail:
	if (r)
		fprintf(stderr, "mendfs: checkpoint: writing metadata block %llu failed: %s\n",
		        (unsigned long long)r->bufs[i]->blocknr, strerror(-ret));
	else
		fprintf(stderr, "mendfs: checkpoint: writing metadata blocks failed: %s\n",
		        strerror(-ret));
	return ret;
}

/* commit_mutex held */
static int __checkpoint(struct mfs *fs)
{
	struct mfs_journal *j = J(fs);
	struct jrec *r;
	int ret;

	if (!j->ckpt_head && fs->sb.journal_tail == fs->jhead &&
	    fs->sb.journal_seq == fs->next_txid)
		return 0;
	ret = ckpt_write(fs);
	if (ret)
		return ret;
	ret = blk_flush(fs->dev);
	if (ret)
		return ret;
	/* everything up to jhead is in place: the journal is empty */
	fs->sb.journal_seq = fs->next_txid;
	fs->sb.journal_tail = fs->jhead;
	ret = mfs_super_write(fs);
	if (ret)
		return ret;
	fs->jtail = fs->jhead;
	j->used = 0;
	while ((r = j->ckpt_head)) {
		j->ckpt_head = r->next;
		jrec_done(r);
	}
	j->ckpt_tail = NULL;
	mfs_cache_trim(fs); /* eviction happens at lookups: the buffers let go leave now */
	atomic_fetch_add(&fs->stats.checkpoints, 1);
	return 0;
}

int mfs_checkpoint(struct mfs *fs)
{
	int ret;

	if (fs->read_only)
		return mfs_fs_errno(fs);
	pthread_mutex_lock(&J(fs)->commit_mutex);
	ret = __checkpoint(fs);
	if (ret)
		mfs_fs_error(fs, ret, "checkpoint");
	pthread_mutex_unlock(&J(fs)->commit_mutex);
	return ret;
}

/* --- commit -------------------------------------------------------------------- */

/*
 * Refuse a closed transaction (txn_lock held): nothing of it reaches the
 * device, and its buffers are re-read from the device on next use.
 */
static void __txn_discard(struct mfs_txn *t)
{
	struct mfs_buf *b, *next;

	for (b = t->bufs; b; b = next) {
		next = b->txn_next;
		mfs_lock(&b->lock);
		b->txn = NULL;
		b->txn_next = NULL;
		b->uptodate = false;
		b->dirty = false;
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
	}
	t->bufs = NULL;
}

static void txn_free(struct mfs_txn *t)
{
	pthread_mutex_destroy(&t->list_lock);
	free(t);
}

/* Lay out and fill the journal image of @r (@n buffers of closed @t): txn_lock held. */
static void __txn_snapshot(struct mfs *fs, struct mfs_txn *t, struct jrec *r, uint64_t id,
                           uint64_t head)
{
	const struct mfs_superblock *sb = &fs->sb;
	uint64_t jlen = sb->journal_len;
	struct mfs_journal_desc *d = NULL;
	struct mfs_buf *b, *next;
	unsigned i = 0, s = 0;

	for (b = t->bufs; b; b = next, i++) {
		uint8_t *img;
		struct mfs_meta_hdr *hdr;

		next = b->txn_next;
		if (i % JTAGS == 0) {
			/* a descriptor, then up to JTAGS images */
			if (d)
				d->next_desc = (head + s) % jlen;
			d = (struct mfs_journal_desc *)(r->jbuf + (size_t)s * MFS_BLOCK_SIZE);
			/* the images fill their slots whole: only descriptors start zeroed */
			memset(d, 0, MFS_BLOCK_SIZE);
			d->hdr.magic = MFS_META_MAGIC;
			d->hdr.type = MFS_T_JOURNAL_DESC;
			d->hdr.blocknr = sb->journal_start + (head + s) % jlen;
			d->hdr.gen = id;
			s++;
		}
		img = r->jbuf + (size_t)s * MFS_BLOCK_SIZE;
		mfs_lock(&b->lock);
		hdr = (struct mfs_meta_hdr *)b->data;
		hdr->gen = id;
		hdr->blocknr = b->blocknr;
		mfs_csum_meta_seal(b->data, fs->seed);
		memcpy(img, b->data, MFS_BLOCK_SIZE);
		b->txn = NULL;
		b->txn_next = NULL;
		b->jgen = id;
		mfs_unlock(&b->lock);
		r->bufs[i] = b; /* the txn's reference moves to the record */
		r->slot[i] = s;
		d->tags[d->hdr.nr_items].blocknr = b->blocknr;
		d->tags[d->hdr.nr_items].csum = mfs_csum_hash4k(img, fs->seed);
		d->hdr.nr_items++;
		s++;
	}
	t->bufs = NULL;
}

/* Seal the descriptors of @r and fill the commit block.  Returns 0 or -ENOMEM. */
static int build_commit(struct mfs *fs, struct jrec *r, uint64_t head, uint64_t ndesc,
                        uint8_t *cbuf)
{
	struct mfs_journal_commit *c = (struct mfs_journal_commit *)cbuf;
	struct mfs_journal_tag *tags;
	uint64_t k, nt = 0;

	tags = malloc((size_t)r->n * sizeof(*tags));
	if (!tags)
		return -ENOMEM;
	/* descriptor k sits at slot k * (JTAGS + 1), its images after it */
	for (k = 0; k < ndesc; k++) {
		struct mfs_journal_desc *d =
		        (struct mfs_journal_desc *)(r->jbuf +
		                                    (size_t)k * (JTAGS + 1) * MFS_BLOCK_SIZE);

		memcpy(&tags[nt], d->tags, d->hdr.nr_items * sizeof(*tags));
		nt += d->hdr.nr_items;
		mfs_csum_meta_seal(d, fs->seed);
	}
	assert(nt == r->n);
	memset(cbuf, 0, MFS_BLOCK_SIZE);
	c->hdr.magic = MFS_META_MAGIC;
	c->hdr.type = MFS_T_JOURNAL_COMMIT;
	c->hdr.blocknr = fs->sb.journal_start + (head + ndesc + r->n) % fs->sb.journal_len;
	c->hdr.gen = r->id;
	c->nr_blocks = r->n;
	c->txn_csum = XXH3_64bits_withSeed(tags, (size_t)r->n * sizeof(*tags), fs->seed);
	c->commit_time_ns = mfs_now_ns();
	mfs_csum_meta_seal(c, fs->seed);
	free(tags);
	return 0;
}

/* Write @r (prepared at @head) to the journal: the ordered-mode sequence. */
static int commit_write(struct mfs *fs, struct jrec *r, uint64_t head, uint64_t ndesc,
                        const uint8_t *cbuf)
{
	int ret;

	ret = blk_flush(fs->dev); /* ordered data first */
	if (!ret)
		ret = jwrite_batch(fs, head, r->jbuf, ndesc + r->n);
	if (!ret)
		ret = blk_flush(fs->dev);
	if (!ret)
		ret = jwrite(fs, (head + ndesc + r->n) % fs->sb.journal_len, cbuf, 1);
	if (!ret)
		ret = blk_flush(fs->dev);
	return ret;
}

void mfs_journal_set_hooks(struct mfs *fs, const struct mfs_commit_hooks *hooks)
{
	fs->commit_hooks = hooks;
}

static void commit_hooks_end(struct mfs *fs, void *cookie, bool committed)
{
	if (fs->commit_hooks)
		fs->commit_hooks->end(fs, cookie, committed);
}

int mfs_txn_commit(struct mfs *fs)
{
	struct mfs_journal *j = J(fs);
	uint64_t n, ndesc, total, id, head;
	struct mfs_txn *t;
	struct jrec *r = NULL;
	void *freed = NULL;
	const char *what;
	int ret = 0;

	if (fs->read_only)
		return mfs_fs_errno(fs); /* -EIO after an error: nothing more becomes durable */
	pthread_mutex_lock(&j->commit_mutex);
	mfs_lock(&fs->txn_lock);
	t = fs->running;
	if (!t)
		goto unlock_txn;
	/* close it: new handles wait until its content is copied */
	t->locked = true;
	while (t->updates)
		mfs_cond_wait(&fs->txn_cond, &fs->txn_lock, NULL);
	fs->running = NULL;
	/* no handle is open: the data blocks this transaction freed are exactly these */
	freed = fs->commit_hooks ? fs->commit_hooks->begin(fs) : NULL;
	n = t->nr_bufs;
	if (n == 0)
		goto done_txn;
	if (mfs_fs_errno(fs)) {
		ret = -EIO; /* after an error (fserror.c) nothing more reaches the device */
		__txn_discard(t);
		goto done_txn;
	}
	if (fs->commit_fail_after && --fs->commit_fail_after == 0) {
		/* test knob: fail as an I/O error before writing anything */
		ret = -EIO;
		what = "commit (injected failure)";
		__txn_discard(t);
		goto done_txn_error;
	}
	ndesc = (n + JTAGS - 1) / JTAGS;
	total = ndesc + n + 1;
	if (total > fs->sb.journal_len) {
		/* never fits: refuse it whole (splitting would break atomicity) */
		fprintf(stderr,
		        "mendfs: transaction of %llu blocks does not fit the journal (%llu "
		        "blocks): refused\n",
		        (unsigned long long)n, (unsigned long long)fs->sb.journal_len);
		ret = __checkpoint(fs); /* so that re-reads see everything committed */
		__txn_discard(t);
		ret = ret ? ret : -ENOSPC;
		what = "a transaction larger than the journal was refused";
		goto done_txn_error;
	}
	if (j->used + total > fs->sb.journal_len) {
		ret = __checkpoint(fs);
		if (ret) {
			what = "checkpoint";
			__txn_discard(t);
			goto done_txn_error;
		}
	}
	r = calloc(1, sizeof(*r));
	if (r) {
		r->bufs = calloc(n, sizeof(*r->bufs));
		r->slot = calloc(n, sizeof(*r->slot));
		if (posix_memalign((void **)&r->jbuf, MFS_BLOCK_SIZE,
		                   (size_t)(ndesc + n) * MFS_BLOCK_SIZE))
			r->jbuf = NULL;
	}
	if (!r || !r->bufs || !r->slot || !r->jbuf) {
		if (r) {
			r->n = 0;
			jrec_free(r);
			r = NULL;
		}
		ret = -ENOMEM;
		__txn_discard(t);
		goto done_txn;
	}
	id = fs->next_txid;
	head = fs->jhead;
	r->id = id;
	r->n = (unsigned)n;
	__txn_snapshot(fs, t, r, id, head);
done_txn:
	mfs_cond_broadcast(&fs->txn_cond);
	mfs_unlock(&fs->txn_lock);
	txn_free(t);
	if (!r) {
		commit_hooks_end(fs, freed, false);
		goto out;
	}
	goto write;
done_txn_error:
	/* the refused changes are in memory only: nothing more may commit on top of them */
	mfs_cond_broadcast(&fs->txn_cond);
	mfs_unlock(&fs->txn_lock);
	txn_free(t);
	commit_hooks_end(fs, freed, false);
	mfs_fs_error(fs, ret, what);
	goto out;
write:

	/* the I/O, from the copies: new handles already run */
	ret = build_commit(fs, r, head, ndesc, j->cbuf);
	if (!ret)
		ret = commit_write(fs, r, head, ndesc, j->cbuf);
	if (ret) {
		fprintf(stderr, "mendfs: commit of transaction %llu failed\n",
		        (unsigned long long)id);
		jrec_free(r); /* buffers stay dirty in memory; nothing more reaches the device */
		commit_hooks_end(fs, freed, false);
		mfs_fs_error(fs, ret, "journal commit");
		ret = -EIO;
		goto out;
	}
	commit_hooks_end(fs, freed, true);
	fs->next_txid = id + 1;
	fs->jhead = (head + total) % fs->sb.journal_len;
	j->used += total;
	if (j->ckpt_tail)
		j->ckpt_tail->next = r;
	else
		j->ckpt_head = r;
	j->ckpt_tail = r;
	atomic_fetch_add(&fs->stats.commits, 1);
	atomic_fetch_add(&fs->stats.journal_blocks, total);
	goto out;
unlock_txn:
	mfs_unlock(&fs->txn_lock);
out:
	pthread_mutex_unlock(&j->commit_mutex);
	return ret;
}

/* --- remount ---------------------------------------------------------------------- */

/*
 * The read-only switch of a remount (mfs_remount): in one section under the
 * commit and transaction locks, so that no handle begins and no commit runs
 * in between.  Freeze: with no transaction running (-EAGAIN if one began
 * since the caller's commit), write everything committed in place, mark the
 * superblock clean and turn read-only; mfs_txn_begin() checks read_only
 * again under txn_lock, so a handle that raced past its first check fails
 * with EROFS.  Thaw: writable again, the superblock marked dirty (in use).
 */
static int journal_set_state(struct mfs *fs, bool freeze)
{
	struct mfs_journal *j = J(fs);
	int ret = 0;

	pthread_mutex_lock(&j->commit_mutex);
	mfs_lock(&fs->txn_lock);
	if (mfs_fs_errno(fs)) {
		ret = -EROFS;
	} else if (freeze && fs->running) {
		ret = -EAGAIN;
	} else if (freeze != fs->read_only) {
		__atomic_store_n(&fs->read_only, false, __ATOMIC_RELEASE);
		if (freeze)
			ret = __checkpoint(fs);
		if (!ret) {
			fs->sb.state = (fs->sb.state & MFS_STATE_ERROR) |
			               (freeze ? MFS_STATE_CLEAN : MFS_STATE_DIRTY);
			ret = mfs_super_write(fs);
		}
		if (ret)
			mfs_fs_error(fs, ret, freeze ? "remount read-only" : "remount read-write");
		else if (freeze)
			__atomic_store_n(&fs->read_only, true, __ATOMIC_RELEASE);
	}
	mfs_unlock(&fs->txn_lock);
	pthread_mutex_unlock(&j->commit_mutex);
	return ret;
}

int mfs_journal_freeze(struct mfs *fs)
{
	return journal_set_state(fs, true);
}

int mfs_journal_thaw(struct mfs *fs)
{
	return journal_set_state(fs, false);
}

/* --- online growth --------------------------------------------------------------- */

static void hold_clear(struct mfs *fs)
{
	mfs_lock(&fs->txn_lock);
	fs->grow_hold = false;
	mfs_cond_broadcast(&fs->txn_cond);
	mfs_unlock(&fs->txn_lock);
}

/*
 * The flag first, so that no new transaction starts (a handle already open
 * finishes: the commit waits for it), then the commit of what runs; a
 * thread inside a handle may still begin a nested one, hence the check and
 * the retry.  Returns with commit_mutex held: no commit and no checkpoint
 * runs until mfs_journal_release.
 */
int mfs_journal_hold(struct mfs *fs)
{
	struct mfs_journal *j = J(fs);
	int ret, tries;

	mfs_lock(&fs->txn_lock);
	ret = fs->grow_hold ? -EBUSY : fs->read_only || mfs_fs_errno(fs) ? -EROFS : 0;
	if (!ret)
		fs->grow_hold = true;
	mfs_unlock(&fs->txn_lock);
	if (ret)
		return ret;
	for (tries = 0;; tries++) {
		ret = mfs_txn_commit(fs);
		if (ret)
			break;
		pthread_mutex_lock(&j->commit_mutex);
		mfs_lock(&fs->txn_lock);
		if (mfs_fs_errno(fs) || fs->read_only) {
			ret = -EROFS;
		} else if (!fs->running) {
			ret = __checkpoint(fs);
			if (ret)
				mfs_fs_error(fs, ret, "checkpoint before growth");
			mfs_unlock(&fs->txn_lock);
			if (!ret)
				return 0;
			pthread_mutex_unlock(&j->commit_mutex);
			break;
		} else if (tries >= 8) {
			ret = -EBUSY;
		}
		mfs_unlock(&fs->txn_lock);
		pthread_mutex_unlock(&j->commit_mutex);
		if (ret)
			break;
	}
	hold_clear(fs);
	return ret;
}

void mfs_journal_release(struct mfs *fs)
{
	hold_clear(fs);
	pthread_mutex_unlock(&J(fs)->commit_mutex);
}

int mfs_journal_still(struct mfs *fs, int (*fn)(struct mfs *fs, void *arg), void *arg)
{
	int ret;

	pthread_mutex_lock(&J(fs)->commit_mutex);
	ret = fn(fs, arg);
	pthread_mutex_unlock(&J(fs)->commit_mutex);
	return ret;
}

/* --- setup ------------------------------------------------------------------------ */

int mfs_journal_init(struct mfs *fs)
{
	struct mfs_journal *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	if (posix_memalign((void **)&j->cbuf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
		free(j);
		return -ENOMEM;
	}
	pthread_mutex_init(&j->commit_mutex, NULL);
	mfs_lock_init(&fs->txn_lock);
	mfs_cond_init(&fs->txn_cond);
	fs->running = NULL;
	/* the journal was replayed: it is empty from journal_tail on */
	fs->next_txid = fs->sb.journal_seq;
	fs->jhead = fs->jtail = fs->sb.journal_tail;
	fs->journal = j;
	return 0;
}

void mfs_journal_destroy(struct mfs *fs)
{
	struct mfs_journal *j = J(fs);
	struct jrec *r;

	if (!j)
		return;
	/* uncheckpointed transactions are in the journal: replay applies them */
	while ((r = j->ckpt_head)) {
		j->ckpt_head = r->next;
		jrec_free(r);
	}
	if (fs->running) {
		__txn_discard(fs->running);
		txn_free(fs->running);
		fs->running = NULL;
	}
	pthread_mutex_destroy(&j->commit_mutex);
	mfs_lock_destroy(&fs->txn_lock);
	free(j->cbuf);
	free(j);
	fs->journal = NULL;
}
