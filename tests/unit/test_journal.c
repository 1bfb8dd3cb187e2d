/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/journal.c and blk/tap.c: commit then replay applies
 * exactly; replay is idempotent; a transaction torn after every journal block
 * write (recorded with the write tap, images rebuilt from prefixes) is applied
 * whole or not at all while earlier ones always are; wrap-around over many
 * transactions with checkpoints; checkpoint writing the latest image of each
 * block once, in one merged batch; the twin of a damaged journal block; dry run
 * writes nothing; a transaction larger than the journal is refused cleanly
 * and aborts the journal (nothing more is committed over the refused state);
 * the bound of a step (mfs_txn_step_limit) and mfs_txn_begin_step committing
 * a transaction that lacks the room asked for.
 * The tap: every write of a workload seen in order, poisoned writes too,
 * -EBUSY while busy, the original ops back when detached.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "mfs_ops.h"
#include "testfs.h"
#include "check_run.h"

#define NB 2048 /* 8 MiB */

static uint8_t *blkbuf(void)
{
	uint8_t *b = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);

	ck_assert_ptr_nonnull(b);
	return b;
}

/* One transaction setting blocks blk[i] to value val[i] (new or existing). */
static void txn_set(struct tfs *t, const uint64_t *blk, const uint64_t *val, unsigned n, bool fresh)
{
	struct mfs_txn *txn;
	unsigned i;

	ck_assert_int_eq(mfs_txn_begin(&t->fs, &txn), 0);
	for (i = 0; i < n; i++) {
		struct mfs_buf *b;

		if (fresh)
			ck_assert_int_eq(mfs_meta_new(&t->fs, blk[i], MFS_T_BTREE_LEAF, 0, &b), 0);
		else
			ck_assert_int_eq(mfs_meta_read(&t->fs, blk[i], MFS_T_BTREE_LEAF, &b), 0);
		mfs_lock(&b->lock);
		tfs_make_block(t, b->data, blk[i], MFS_T_BTREE_LEAF, val[i]);
		mfs_txn_dirty(txn, b);
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
	}
	ck_assert_int_eq(mfs_txn_end(txn), 0);
}

/* Both copies of @blk hold value @val (a valid block). */
static bool on_disk_is(struct tfs *t, uint64_t blk, uint64_t val)
{
	uint8_t *b = blkbuf();
	uint64_t twin = blk - t->fs.sb.meta_start + t->fs.sb.meta_twin;
	bool ok;

	tfs_read_raw(t, blk, b);
	ok = !mfs_block_verify(b, t->fs.sb.csum_seed, MFS_T_BTREE_LEAF, blk) &&
	     tfs_block_is(b, val);
	if (t->fs.sb.meta_twin) {
		tfs_read_raw(t, twin, b);
		ok = ok && !mfs_block_verify(b, t->fs.sb.csum_seed, MFS_T_BTREE_LEAF, blk) &&
		     tfs_block_is(b, val);
	}
	free(b);
	return ok;
}

static bool on_disk_zero(struct tfs *t, uint64_t blk)
{
	uint8_t *b = blkbuf(), *z = calloc(1, MFS_BLOCK_SIZE);
	bool ok;

	tfs_read_raw(t, blk, b);
	ok = !memcmp(b, z, MFS_BLOCK_SIZE);
	free(b);
	free(z);
	return ok;
}

static int replay(struct tfs *t, bool dry)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	bool ro, other_bad;
	char err[256];
	int ret;

	ck_assert_int_eq(mfs_super_read(t->dev, sb, &ro, &other_bad, err, sizeof(err)), 0);
	ret = mfs_journal_replay(t->dev, sb, dry, err, sizeof(err));
	free(sb);
	return ret;
}

START_TEST(test_commit_replay_exact)
{
	uint64_t blk[5], val[5] = {10, 11, 12, 13, 14};
	struct tfs t;
	unsigned i;

	tfs_create(&t, NB, 64, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	for (i = 0; i < 5; i++)
		blk[i] = tfs_meta0(&t) + 3 * i;
	txn_set(&t, blk, val, 5, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.commits), 1);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.journal_blocks), 7);
	/* crash now: committed, not checkpointed */
	tfs_umount(&t);
	for (i = 0; i < 5; i++)
		ck_assert(on_disk_zero(&t, blk[i]));
	ck_assert_int_eq(replay(&t, true), 1); /* dry run: counts, writes nothing */
	for (i = 0; i < 5; i++)
		ck_assert(on_disk_zero(&t, blk[i]));
	ck_assert_int_eq(replay(&t, false), 1);
	for (i = 0; i < 5; i++)
		ck_assert(on_disk_is(&t, blk[i], val[i]));
	/* idempotent: nothing left to replay, nothing changes */
	ck_assert_int_eq(replay(&t, false), 0);
	ck_assert_int_eq(replay(&t, true), 0);
	for (i = 0; i < 5; i++)
		ck_assert(on_disk_is(&t, blk[i], val[i]));
	/* the mount goes on from there: a new commit replays after the old one */
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	val[2] = 99;
	txn_set(&t, &blk[2], &val[2], 1, false);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	tfs_umount(&t);
	ck_assert_int_eq(replay(&t, false), 1);
	ck_assert(on_disk_is(&t, blk[2], 99));
	ck_assert(on_disk_is(&t, blk[1], 11));
	tfs_destroy(&t);
}
END_TEST

/* --- write tap recording ---------------------------------------------------------- */

struct rec_write {
	uint8_t op;
	uint64_t sector;
	uint32_t len;
	uint8_t *data;
};

struct recorder {
	struct rec_write *w;
	unsigned n, cap;
};

static void rec_fn(void *priv, const struct blk_bio *bio)
{
	struct recorder *r = priv;
	struct rec_write *w;
	size_t off = 0;
	unsigned i;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 64;
		r->w = realloc(r->w, r->cap * sizeof(*r->w));
	}
	w = &r->w[r->n++];
	w->op = bio->op;
	w->sector = bio->sector;
	w->len = bio->len;
	w->data = NULL;
	if (bio->op == BLK_OP_WRITE) {
		w->data = malloc(bio->len);
		for (i = 0; i < bio->nr_segs; i++) {
			memcpy(w->data + off, bio->iov[i].iov_base, bio->iov[i].iov_len);
			off += bio->iov[i].iov_len;
		}
	}
}

static void rec_free(struct recorder *r)
{
	unsigned i;

	for (i = 0; i < r->n; i++)
		free(r->w[i].data);
	free(r->w);
	memset(r, 0, sizeof(*r));
}

static uint8_t *file_read(const char *path, size_t len)
{
	uint8_t *buf = malloc(len);
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, 0), (ssize_t)len);
	close(fd);
	return buf;
}

static void file_write(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, 0), (ssize_t)len);
	close(fd);
}

/* A journal block write: block number and data. */
struct jw {
	uint64_t blk;
	const uint8_t *data;
};

/*
 * The torn transaction: A (3 blocks) committed, then B (N = 4 blocks, two of
 * them A's) committed with the tap recording.  For every prefix, the image is
 * rebuilt from the state before B plus the prefix; replay must give A + B or
 * A alone, both copies, never a mix.
 */
START_TEST(test_torn_every_block)
{
	uint64_t ablk[3], aval[3] = {1, 2, 3}, bblk[4], bval[4] = {21, 22, 23, 24};
	size_t imglen = (size_t)NB * MFS_BLOCK_SIZE;
	struct recorder rec = {0};
	struct jw *jws = NULL;
	unsigned njw = 0, i, k, variant, nflush = 0;
	uint8_t *base, *img;
	struct tfs t;
	uint64_t jstart, jtwin, jlen;

	tfs_create(&t, NB, 32, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	for (i = 0; i < 3; i++)
		ablk[i] = tfs_meta0(&t) + i;
	bblk[0] = ablk[0];
	bblk[1] = ablk[2];
	bblk[2] = tfs_meta0(&t) + 10;
	bblk[3] = tfs_meta0(&t) + 11;
	/* a first commit so that B starts mid-journal, then A */
	txn_set(&t, &bblk[3], &aval[0], 1, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	ck_assert_int_eq(mfs_checkpoint(&t.fs), 0);
	txn_set(&t, ablk, aval, 3, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	ck_assert_int_eq(blk_flush(t.dev), 0);
	base = file_read(t.img, imglen);

	txn_set(&t, bblk, bval, 2, false);
	txn_set(&t, &bblk[2], &bval[2], 2, true); /* compound: two handles, one transaction */
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, rec_fn, &rec), 0);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, NULL, NULL), 0);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.commits), 3);
	jstart = t.fs.sb.journal_start;
	jtwin = t.fs.sb.journal_twin;
	jlen = t.fs.sb.journal_len;
	tfs_umount(&t);
	tfs_close_dev(&t);

	/* the commit's writes: only journal blocks (both copies) and three flushes */
	jws = calloc(64, sizeof(*jws));
	for (i = 0; i < rec.n; i++) {
		struct rec_write *w = &rec.w[i];
		uint64_t b0 = w->sector / MFS_SECTORS_PER_BLOCK, b;

		if (w->op == BLK_OP_FLUSH) {
			nflush++;
			continue;
		}
		ck_assert_int_eq(w->op, BLK_OP_WRITE);
		for (b = 0; b < w->len / MFS_BLOCK_SIZE; b++) {
			uint64_t blk = b0 + b;

			ck_assert((blk >= jstart && blk < jstart + jlen) ||
			          (blk >= jtwin && blk < jtwin + jlen));
			ck_assert_uint_lt(njw, 64);
			jws[njw].blk = blk;
			jws[njw].data = w->data + b * MFS_BLOCK_SIZE;
			njw++;
		}
	}
	ck_assert_uint_eq(nflush, 3);
	ck_assert_uint_eq(njw, 2 * (4 + 2)); /* desc + 4 images + commit, twice */

	img = malloc(imglen);
	/*
	 * variant 0: the first k block writes in the order they were made (k = 0..12);
	 * variant 1: the first k journal blocks, both copies (k = 0..N+2);
	 * variant 2: the first k journal blocks, primary only (twin as before).
	 */
	for (variant = 0; variant < 3; variant++) {
		unsigned kmax = variant == 0 ? njw : 6;

		for (k = 0; k <= kmax; k++) {
			bool applied;
			int n;

			memcpy(img, base, imglen);
			for (i = 0; i < njw; i++) {
				bool prim = jws[i].blk < jtwin;
				uint64_t pos = (prim ? jws[i].blk - jstart : jws[i].blk - jtwin);
				/* journal position in transaction order: 4 + 2 blocks from the
				 * start */
				unsigned idx =
				        (unsigned)((pos + jlen - (jws[0].blk - jstart)) % jlen);
				bool take = variant == 0   ? i < k
				            : variant == 1 ? idx < k
				                           : prim && idx < k;

				if (take)
					memcpy(img + jws[i].blk * MFS_BLOCK_SIZE, jws[i].data,
					       MFS_BLOCK_SIZE);
			}
			file_write(t.img, img, imglen);
			ck_assert_int_eq(tfs_open_dev(&t), 0);
			n = replay(&t, false);
			ck_assert_int_ge(n, 1);
			ck_assert_int_le(n, 2);
			applied = n == 2;
			/* A always; B whole or not at all, both copies */
			ck_assert(on_disk_is(&t, ablk[1], 2));
			if (applied) {
				for (i = 0; i < 4; i++)
					ck_assert_msg(on_disk_is(&t, bblk[i], bval[i]),
					              "variant %u k %u: B block %u", variant, k, i);
			} else {
				ck_assert(on_disk_is(&t, ablk[0], 1));
				ck_assert(on_disk_is(&t, ablk[2], 3));
				ck_assert(on_disk_zero(&t, bblk[2]));
				ck_assert(on_disk_is(&t, bblk[3], 1));
			}
			/* the commit block decides: complete iff its first copy is there */
			if (variant == 0)
				ck_assert_int_eq(applied, k >= 11);
			else
				ck_assert_int_eq(applied, k == 6);
			/* and a second replay changes nothing */
			ck_assert_int_eq(replay(&t, false), 0);
			tfs_close_dev(&t);
		}
	}
	free(img);
	free(base);
	free(jws);
	rec_free(&rec);
	t.dev = NULL;
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_wraparound)
{
	uint64_t cur[16] = {0}, blk0;
	struct tfs t;
	unsigned i, j;

	tfs_create(&t, NB, 16, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 32), 0);
	blk0 = tfs_meta0(&t);
	for (j = 0; j < 16; j++) {
		uint64_t b = blk0 + j, v = 0;

		txn_set(&t, &b, &v, 1, true);
	}
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	for (i = 1; i <= 150; i++) {
		uint64_t blk[5], val[5];
		unsigned n = 1 + i % 5;

		for (j = 0; j < n; j++) {
			unsigned k = (i * 7 + j * 3) % 16; /* distinct for j < 5 */

			blk[j] = blk0 + k;
			val[j] = i * 100 + j;
		}
		txn_set(&t, blk, val, n, false);
		ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
		for (j = 0; j < n; j++)
			cur[blk[j] - blk0] = val[j];
	}
	/* far more journal blocks than the journal holds: checkpoints made room */
	ck_assert_uint_gt(atomic_load(&t.fs.stats.journal_blocks), 10 * 16);
	ck_assert_uint_gt(atomic_load(&t.fs.stats.checkpoints), 10);
	/* crash without a final checkpoint: replay finishes the job */
	tfs_umount(&t);
	ck_assert_int_ge(replay(&t, false), 0);
	for (j = 0; j < 16; j++)
		ck_assert_msg(on_disk_is(&t, blk0 + j, cur[j]), "block %u", j);
	tfs_destroy(&t);
}
END_TEST

/*
 * Checkpoint writes the latest image of each block once (several
 * transactions journaled the same blocks), as one sorted batch: adjacent
 * blocks merge in the engine, and what lands in place is the last commit.
 */
START_TEST(test_checkpoint_latest_image)
{
	uint64_t blk[8], val[8];
	uint64_t writes0, merges0;
	struct blk_stats st;
	struct tfs t;
	unsigned i, j;

	tfs_create(&t, NB, 64, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	/* written in reverse order: the batch sorts them */
	for (j = 0; j < 8; j++) {
		blk[j] = tfs_meta0(&t) + 7 - j;
		val[j] = 1;
	}
	txn_set(&t, blk, val, 8, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	for (i = 2; i <= 4; i++) {
		for (j = 0; j < 8; j++)
			val[j] = i * 10 + j;
		txn_set(&t, blk, val, 8, false);
		ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	}
	writes0 = atomic_load(&t.fs.stats.meta_writes);
	blk_dev_get_stats(t.fs.dev, &st);
	merges0 = st.merges_back + st.merges_front;
	ck_assert_int_eq(mfs_checkpoint(&t.fs), 0);
	/* 4 commits of the same 8 blocks: 8 blocks written in place, not 32 */
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_writes) - writes0, 8);
	blk_dev_get_stats(t.fs.dev, &st);
	/* 8 adjacent blocks and their 8 adjacent twins: 2 requests, 14 merges */
	ck_assert_uint_ge(st.merges_back + st.merges_front - merges0, 14);
	for (j = 0; j < 8; j++)
		ck_assert_msg(on_disk_is(&t, blk[j], 40 + j), "block %u", j);
	tfs_umount(&t);
	/* nothing left to replay: the checkpoint moved the tail */
	ck_assert_int_eq(replay(&t, false), 0);
	for (j = 0; j < 8; j++)
		ck_assert_msg(on_disk_is(&t, blk[j], 40 + j), "block %u", j);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_replay_uses_twin)
{
	uint64_t blk[3], val[3] = {5, 6, 7};
	uint8_t *b = blkbuf();
	struct tfs t;
	uint64_t js, jt;
	unsigned i;

	tfs_create(&t, NB, 32, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	for (i = 0; i < 3; i++)
		blk[i] = tfs_meta0(&t) + i;
	js = t.fs.sb.journal_start + t.fs.jhead;
	jt = t.fs.sb.journal_twin + t.fs.jhead;
	txn_set(&t, blk, val, 3, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	tfs_umount(&t);
	/* corrupt the descriptor's and an image's primary, poison the commit's primary */
	tfs_read_raw(&t, js, b);
	b[200] ^= 4;
	tfs_write_raw(&t, js, b);
	tfs_read_raw(&t, js + 2, b);
	b[4000] ^= 4;
	tfs_write_raw(&t, js + 2, b);
	ck_assert_int_eq(blk_poison_add(t.dev, (js + 4) * MFS_SECTORS_PER_BLOCK + 1, 1), 0);
	tfs_read_raw(&t, jt, b); /* the twins are intact */
	ck_assert_int_eq(mfs_block_verify(b, t.fs.sb.csum_seed, MFS_T_JOURNAL_DESC, js), 0);
	ck_assert_int_eq(replay(&t, false), 1);
	for (i = 0; i < 3; i++)
		ck_assert(on_disk_is(&t, blk[i], val[i]));

	/* without the twin too: the transaction is not replayed (nothing partial) */
	tfs_destroy(&t);
	tfs_create(&t, NB, 32, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	js = t.fs.sb.journal_start + t.fs.jhead;
	jt = t.fs.sb.journal_twin + t.fs.jhead;
	txn_set(&t, blk, val, 3, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	tfs_umount(&t);
	tfs_read_raw(&t, js + 2, b);
	b[4000] ^= 4;
	tfs_write_raw(&t, js + 2, b);
	tfs_write_raw(&t, jt + 2, b);
	ck_assert_int_eq(replay(&t, false), 0);
	for (i = 0; i < 3; i++)
		ck_assert(on_disk_zero(&t, blk[i]));
	free(b);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_dry_run_writes_nothing)
{
	uint64_t blk[4], val[4] = {1, 2, 3, 4};
	size_t imglen = (size_t)NB * MFS_BLOCK_SIZE;
	struct recorder rec = {0};
	uint64_t h0, h1;
	uint8_t *img;
	struct tfs t;
	unsigned i;

	tfs_create(&t, NB, 32, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	for (i = 0; i < 4; i++)
		blk[i] = tfs_meta0(&t) + i;
	txn_set(&t, blk, val, 2, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	txn_set(&t, blk + 2, val + 2, 2, true);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	tfs_umount(&t);
	ck_assert_int_eq(blk_flush(t.dev), 0);
	img = file_read(t.img, imglen);
	h0 = XXH3_64bits(img, imglen);
	free(img);
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, rec_fn, &rec), 0);
	ck_assert_int_eq(replay(&t, true), 2);
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, NULL, NULL), 0);
	ck_assert_uint_eq(rec.n, 0); /* not one write, not even a flush */
	img = file_read(t.img, imglen);
	h1 = XXH3_64bits(img, imglen);
	free(img);
	ck_assert_uint_eq(h0, h1);
	ck_assert_int_eq(replay(&t, false), 2);
	rec_free(&rec);
	tfs_destroy(&t);
}
END_TEST

/* The superblock's state word on the device. */
static uint32_t sb_state_on_disk(struct tfs *t)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	uint32_t state;

	ck_assert_ptr_nonnull(sb);
	tfs_read_raw(t, 0, sb);
	state = sb->state;
	free(sb);
	return state;
}

/*
 * Remount: freeze refuses while a transaction runs, then writes everything in
 * place, marks the superblock clean and makes every handle fail with EROFS;
 * thaw marks it dirty and takes handles again; a filesystem mounted
 * read-only is never made writable.
 */
START_TEST(test_freeze_thaw)
{
	uint64_t blk[2], val[2] = {7, 8};
	struct mfs_txn *txn;
	struct tfs t;

	tfs_create(&t, NB, 32, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	blk[0] = tfs_meta0(&t);
	blk[1] = blk[0] + 1;
	t.fs.sb.state = MFS_STATE_DIRTY; /* in use, as mfs_mount leaves it */
	txn_set(&t, blk, val, 2, true);
	ck_assert_int_eq(mfs_journal_freeze(&t.fs), -EAGAIN); /* a transaction runs */
	ck_assert(!t.fs.read_only);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	ck_assert(!on_disk_is(&t, blk[0], 7)); /* committed, in the journal only */
	ck_assert_int_eq(mfs_journal_freeze(&t.fs), 0);
	ck_assert(t.fs.read_only);
	ck_assert(on_disk_is(&t, blk[0], 7) && on_disk_is(&t, blk[1], 8)); /* in place */
	ck_assert_uint_eq(sb_state_on_disk(&t), MFS_STATE_CLEAN);
	ck_assert_int_eq(replay(&t, true), 0); /* nothing left to replay */
	ck_assert_int_eq(mfs_txn_begin(&t.fs, &txn), -EROFS);
	ck_assert_int_eq(mfs_remount(&t.fs, true), 0); /* already read-only */
	ck_assert_int_eq(mfs_journal_thaw(&t.fs), 0);
	ck_assert(!t.fs.read_only);
	ck_assert_uint_eq(sb_state_on_disk(&t), MFS_STATE_DIRTY);
	ck_assert_int_eq(mfs_txn_begin(&t.fs, &txn), 0);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	t.fs.ro_at_mount = true;
	ck_assert_int_eq(mfs_remount(&t.fs, false), -EROFS);
	t.fs.ro_at_mount = false;
	tfs_umount(&t);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_txn_too_large_refused)
{
	uint64_t blk[20], val[20], one = 77;
	struct mfs_txn *txn;
	struct mfs_buf *b;
	struct tfs t;
	unsigned i;

	tfs_create(&t, NB, 16, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	for (i = 0; i < 20; i++) {
		blk[i] = tfs_meta0(&t) + i;
		val[i] = 500 + i;
		tfs_put_block(&t, blk[i], MFS_T_BTREE_LEAF, i);
	}
	/* one handle dirtying 20 blocks: 22 journal blocks > 16 */
	ck_assert_int_eq(mfs_txn_begin(&t.fs, &txn), 0);
	for (i = 0; i < 20; i++) {
		ck_assert_int_eq(mfs_meta_read(&t.fs, blk[i], MFS_T_BTREE_LEAF, &b), 0);
		mfs_lock(&b->lock);
		tfs_make_block(&t, b->data, blk[i], MFS_T_BTREE_LEAF, val[i]);
		mfs_txn_dirty(txn, b);
		mfs_unlock(&b->lock);
		mfs_buf_put(b);
	}
	ck_assert_int_eq(mfs_txn_end(txn), -ENOSPC);
	/* the filesystem is read-only now: commits (fsync, sync) report the error */
	ck_assert_int_eq(mfs_txn_commit(&t.fs), -EIO);
	/* nothing reached the device; the cache re-reads the device's content */
	for (i = 0; i < 20; i++) {
		ck_assert(on_disk_is(&t, blk[i], i));
		ck_assert_int_eq(mfs_meta_read(&t.fs, blk[i], MFS_T_BTREE_LEAF, &b), 0);
		ck_assert(tfs_block_is(b->data, i));
		mfs_buf_put(b);
	}
	ck_assert_int_eq(replay(&t, true), 0);
	/*
	 * The journal is aborted and the filesystem read-only: the layers
	 * above hold the refused changes in memory, so nothing more may be
	 * committed on top of them.
	 */
	ck_assert(t.fs.read_only);
	ck_assert_int_eq(mfs_txn_begin(&t.fs, &txn), -EROFS);
	ck_assert_int_eq(mfs_txn_begin_step(&t.fs, 1, &txn), -EROFS);
	tfs_umount(&t);
	for (i = 0; i < 20; i++)
		ck_assert(on_disk_is(&t, blk[i], i));
	/* a new mount works */
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	txn_set(&t, &blk[3], &one, 1, false);
	ck_assert_int_eq(mfs_txn_commit(&t.fs), 0);
	tfs_umount(&t);
	ck_assert_int_eq(replay(&t, false), 1);
	ck_assert(on_disk_is(&t, blk[3], 77));
	tfs_destroy(&t);
}
END_TEST

/* The bound of a step, and mfs_txn_begin_step committing when the room asked for lacks. */
START_TEST(test_txn_step)
{
	uint64_t blk[8], val[8], commits;
	struct mfs_txn *txn;
	struct tfs t;
	unsigned i;

	tfs_create(&t, NB, 16, 128, true);
	ck_assert_int_eq(tfs_mount(&t, 64), 0);
	ck_assert_uint_eq(mfs_txn_step_limit(&t.fs), 4); /* journal_len / 4 */
	t.fs.txn_step_blocks = 2;
	ck_assert_uint_eq(mfs_txn_step_limit(&t.fs), 2);
	t.fs.txn_step_blocks = 100; /* a knob only lowers it */
	ck_assert_uint_eq(mfs_txn_step_limit(&t.fs), 4);
	t.fs.txn_step_blocks = 0;
	for (i = 0; i < 8; i++) {
		blk[i] = tfs_meta0(&t) + i;
		val[i] = 900 + i;
	}
	txn_set(&t, blk, val, 3, true); /* 3 of the 4 blocks of a step */
	commits = atomic_load(&t.fs.stats.commits);
	/* room for one more: a handle asking for one joins the running transaction */
	ck_assert_int_eq(mfs_txn_begin_step(&t.fs, 1, &txn), 0);
	ck_assert_uint_eq(mfs_txn_room(txn), 1);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.commits), commits);
	/* asking for two commits it first: the handle starts an empty transaction */
	ck_assert_int_eq(mfs_txn_begin_step(&t.fs, 2, &txn), 0);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.commits), commits + 1);
	ck_assert_uint_eq(mfs_txn_room(txn), 4);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	/* more than a whole step: an empty transaction is the best there is, no commit loop */
	ck_assert_int_eq(mfs_txn_begin_step(&t.fs, 10, &txn), 0);
	ck_assert_uint_eq(mfs_txn_room(txn), 4);
	ck_assert_int_eq(mfs_txn_end(txn), 0);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.commits), commits + 1);
	for (i = 0; i < 3; i++)
		ck_assert(!on_disk_is(&t, blk[i], val[i]));
	tfs_umount(&t);
	ck_assert_int_eq(replay(&t, false), 1);
	for (i = 0; i < 3; i++)
		ck_assert(on_disk_is(&t, blk[i], val[i]));
	tfs_destroy(&t);
}
END_TEST

/* --- the tap on its own --------------------------------------------------------------- */

START_TEST(test_tap_workload_in_order)
{
	const struct blk_backend_ops *orig;
	struct recorder rec = {0};
	struct blk_bio zb;
	uint8_t *buf = blkbuf();
	struct tfs t;
	unsigned i;

	tfs_create(&t, NB, 16, 64, true);
	orig = t.dev->ops;
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, rec_fn, &rec), 0);
	ck_assert_ptr_ne(t.dev->ops, orig);
	for (i = 0; i < t.dev->nr_hw_queues; i++)
		ck_assert_ptr_eq(t.dev->hctxs[i].ops, t.dev->ops);
	for (i = 0; i < 20; i++) {
		memset(buf, (int)i + 1, MFS_BLOCK_SIZE);
		ck_assert_int_eq(blk_write(t.dev, (100 + i * 3) * 8ull, buf, MFS_BLOCK_SIZE, 0), 0);
		ck_assert_int_eq(blk_read(t.dev, 8, buf, MFS_BLOCK_SIZE, 0), 0); /* not logged */
		if (i % 5 == 4)
			ck_assert_int_eq(blk_flush(t.dev), 0);
	}
	blk_bio_init(&zb, BLK_OP_WRITE_ZEROES, 4000, NULL, 8192, NULL, NULL);
	ck_assert_int_eq(blk_submit_bio_wait(t.dev, &zb), 0);
	/* a write over poison goes through the slow path: logged too */
	ck_assert_int_eq(blk_poison_add(t.dev, 5000, 8), 0);
	memset(buf, 0xee, MFS_BLOCK_SIZE);
	ck_assert_int_eq(blk_write(t.dev, 5000, buf, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_uint_eq(blk_poison_count(t.dev), 0);
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, NULL, NULL), 0);
	ck_assert_ptr_eq(t.dev->ops, orig);
	for (i = 0; i < t.dev->nr_hw_queues; i++)
		ck_assert_ptr_eq(t.dev->hctxs[i].ops, orig);

	/* 20 writes + 4 flushes, write-zeroes, the poisoned write, in order */
	ck_assert_uint_eq(rec.n, 20 + 4 + 1 + 1);
	{
		unsigned w = 0;

		for (i = 0; i < 20; i++) {
			ck_assert_int_eq(rec.w[w].op, BLK_OP_WRITE);
			ck_assert_uint_eq(rec.w[w].sector, (100 + i * 3) * 8ull);
			ck_assert_uint_eq(rec.w[w].len, MFS_BLOCK_SIZE);
			ck_assert_uint_eq(rec.w[w].data[0], i + 1);
			ck_assert_uint_eq(rec.w[w].data[MFS_BLOCK_SIZE - 1], i + 1);
			w++;
			if (i % 5 == 4)
				ck_assert_int_eq(rec.w[w++].op, BLK_OP_FLUSH);
		}
		ck_assert_int_eq(rec.w[w].op, BLK_OP_WRITE_ZEROES);
		ck_assert_uint_eq(rec.w[w].sector, 4000);
		ck_assert_uint_eq(rec.w[w++].len, 8192);
		ck_assert_int_eq(rec.w[w].op, BLK_OP_WRITE);
		ck_assert_uint_eq(rec.w[w].sector, 5000);
		ck_assert_uint_eq(rec.w[w].data[17], 0xee);
	}
	/* detached: nothing more is seen */
	ck_assert_int_eq(blk_write(t.dev, 800, buf, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_uint_eq(rec.n, 26);
	free(buf);
	rec_free(&rec);
	tfs_destroy(&t);
}
END_TEST

static void noop_end_io(struct blk_bio *bio)
{
	(void)bio;
}

START_TEST(test_tap_busy_and_close)
{
	struct recorder rec = {0};
	struct blk_plug plug;
	struct blk_bio bio;
	uint8_t *buf = blkbuf();
	struct tfs t;

	tfs_create(&t, NB, 16, 64, true);
	/* a request held in this thread's plug holds a tag: the device is busy */
	blk_start_plug(&plug);
	blk_bio_init(&bio, BLK_OP_WRITE, 6000, buf, MFS_BLOCK_SIZE, noop_end_io, NULL);
	blk_submit_bio(t.dev, &bio);
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, rec_fn, &rec), -EBUSY);
	blk_finish_plug(&plug);
	ck_assert_int_eq(blk_dev_set_write_tap(t.dev, rec_fn, &rec), 0);
	ck_assert_int_eq(blk_write(t.dev, 800, buf, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_uint_eq(rec.n, 1);
	/* closing with the tap attached frees it (ASan checks) */
	tfs_close_dev(&t);
	free(buf);
	rec_free(&rec);
	tfs_destroy(&t);
}
END_TEST

static Suite *journal_suite(void)
{
	Suite *s = suite_create("journal");
	TCase *tc = tcase_create("journal");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_commit_replay_exact);
	tcase_add_test(tc, test_torn_every_block);
	tcase_add_test(tc, test_wraparound);
	tcase_add_test(tc, test_checkpoint_latest_image);
	tcase_add_test(tc, test_replay_uses_twin);
	tcase_add_test(tc, test_dry_run_writes_nothing);
	tcase_add_test(tc, test_freeze_thaw);
	tcase_add_test(tc, test_txn_too_large_refused);
	tcase_add_test(tc, test_txn_step);
	suite_add_tcase(s, tc);

	tc = tcase_create("tap");
	tcase_add_test(tc, test_tap_workload_in_order);
	tcase_add_test(tc, test_tap_busy_and_close);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(journal_suite());
}
