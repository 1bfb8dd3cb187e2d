/* SPDX-License-Identifier: MIT */
/*
 * Damage events: the core's ring (fs/core/events.c) without a filesystem -
 * sequence numbers, reading from a seq, the bounded wait and its wake-up at
 * stop, the newest winning with the dropped counted, split events numbered
 * consecutively (past the ring's size too), one metadata_lost per
 * block - and the engine's poison notifier (blk/poison.c) on the null
 * backend: only the part of a range not poisoned before is reported, with
 * its cause (injected, found by a read, latent poison read).  On a real
 * image (fixture.h): a poisoned run over the tail of one file and the head of
 * the next is one event per file, each with its own sectors and byte range,
 * numbered in sector order; events posted later (before or while it is
 * resolved) move up behind the pieces, and a reader resuming from any seq
 * sees every piece once; one file's two ranges with another's data between
 * are two events.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "blk_internal.h"
#include "file_util.h"
#include "mfs.h"
#include "check_run.h"

static struct mfs *fs_new(void)
{
	struct mfs *fs = calloc(1, sizeof(*fs));

	ck_assert_ptr_nonnull(fs);
	mfs_events_init(&fs->events);
	return fs;
}

static void fs_free(struct mfs *fs)
{
	mfs_events_destroy(&fs->events);
	free(fs);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(test_seq_and_from)
{
	struct mfs *fs = fs_new();
	struct mfs_event ev[8];
	struct mfs_events_pos pos;

	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 8, 0, &pos), 0);
	ck_assert_uint_eq(pos.head, 1);
	for (unsigned i = 0; i < 3; i++)
		mfs_event_post(fs, MFS_EV_POISON, MFS_EVC_INJECTED, 100 + i, 1, 0);
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 8, 0, &pos), 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_uint_eq(ev[i].seq, i + 1);
		ck_assert_uint_eq(ev[i].sector, 100 + i);
		ck_assert(ev[i].resolved == false); /* no resolve hook: no owner */
	}
	ck_assert_uint_eq(pos.next, 4);
	ck_assert_uint_eq(pos.oldest, 1);
	ck_assert_uint_eq(pos.lost, 0);
	ck_assert_uint_eq(pos.head, 4);
	ck_assert_int_eq(mfs_events_read(fs, 2, ev, 8, 0, &pos), 2);
	ck_assert_uint_eq(ev[0].seq, 2);
	ck_assert_int_eq(mfs_events_read(fs, 2, ev, 1, 0, &pos), 1);
	ck_assert_uint_eq(pos.next, 3);
	ck_assert_int_eq(mfs_events_read(fs, 4, ev, 8, 0, &pos), 0);
	ck_assert_uint_eq(pos.next, 4);
	fs_free(fs);
}
END_TEST

START_TEST(test_ring_drops_oldest)
{
	struct mfs *fs = fs_new();
	struct mfs_event ev[32];
	struct mfs_events_pos pos;
	uint64_t n = 2003;

	for (uint64_t i = 0; i < n; i++)
		mfs_event_post(fs, MFS_EV_POISON, MFS_EVC_READ_ERROR, i, 1, 0);
	ck_assert_int_eq(mfs_events_read(fs, 1, ev, 32, 0, &pos), 32);
	ck_assert_uint_eq(pos.oldest, n + 1 - MFS_EVENTS_RING);
	ck_assert_uint_eq(pos.lost, n - MFS_EVENTS_RING);
	ck_assert_uint_eq(ev[0].seq, pos.oldest);
	ck_assert_uint_eq(ev[0].sector, pos.oldest - 1);
	/* from 0: the oldest held, nothing lost */
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 32, 0, &pos), 32);
	ck_assert_uint_eq(pos.lost, 0);
	ck_assert_uint_eq(ev[0].seq, n + 1 - MFS_EVENTS_RING);
	/* the newest */
	ck_assert_int_eq(mfs_events_read(fs, n, ev, 32, 0, &pos), 1);
	ck_assert_uint_eq(ev[0].seq, n);
	ck_assert_uint_eq(pos.next, n + 1);
	fs_free(fs);
}
END_TEST

START_TEST(test_lost_once)
{
	struct mfs *fs = fs_new();
	struct mfs_event ev[8];
	struct mfs_events_pos pos;

	ck_assert(mfs_event_post(fs, MFS_EV_META_LOST, MFS_EVC_CORRUPT, 80, 8, 10));
	ck_assert(!mfs_event_post(fs, MFS_EV_META_LOST, MFS_EVC_CORRUPT, 80, 8, 10));
	ck_assert(mfs_event_post(fs, MFS_EV_META_HEALED, MFS_EVC_MEDIA, 88, 8, 11));
	ck_assert(mfs_event_post(fs, MFS_EV_META_LOST, MFS_EVC_MEDIA, 96, 8, 12));
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 8, 0, &pos), 3);
	ck_assert_uint_eq(ev[0].block, 10);
	ck_assert_uint_eq(ev[1].kind, MFS_EV_META_HEALED);
	ck_assert_uint_eq(ev[2].block, 12);
	fs_free(fs);
}
END_TEST

/* An owner lookup that makes two pieces of every event: its first sector, and the rest. */
static struct mfs_event *split_two(struct mfs *f, const struct mfs_event *evs, unsigned n,
                                   size_t *nout)
{
	struct mfs_event *out = malloc(2 * n * sizeof(*out));

	(void)f;
	ck_assert_ptr_nonnull(out);
	for (unsigned i = 0; i < n; i++) {
		out[2 * i] = out[2 * i + 1] = evs[i];
		out[2 * i].count = 1;
		out[2 * i + 1].sector++;
		out[2 * i + 1].count--;
		out[2 * i].resolved = out[2 * i + 1].resolved = true;
	}
	*nout = 2 * n;
	return out;
}

/*
 * Split events take seqs of their own, consecutive; more pieces than the ring
 * holds drop the oldest, counted as lost like any dropped event.
 */
START_TEST(test_split_seqs_and_ring)
{
	struct mfs *fs = fs_new();
	struct mfs_event ev[32];
	struct mfs_events_pos pos;
	uint64_t n = 600, next, seen = 0;

	fs->events.resolve = split_two;
	for (uint64_t i = 0; i < n; i++)
		mfs_event_post(fs, MFS_EV_POISON, MFS_EVC_INJECTED, 10 * i, 2, 0);
	ck_assert_int_eq(mfs_events_read(fs, 1, ev, 32, 0, &pos), 32);
	ck_assert_uint_eq(pos.head, 2 * n + 1);
	ck_assert_uint_eq(pos.oldest, 2 * n + 1 - MFS_EVENTS_RING);
	ck_assert_uint_eq(pos.lost, 2 * n - MFS_EVENTS_RING);
	ck_assert_uint_eq(ev[0].seq, pos.oldest);
	/* every piece held, in order: seq s is piece (s - 1) % 2 of event (s - 1) / 2 */
	for (next = 0;; next = pos.next) {
		int got = mfs_events_read(fs, next, ev, 32, 0, &pos);

		ck_assert_int_ge(got, 0);
		if (!got)
			break;
		for (int i = 0; i < got; i++, seen++) {
			uint64_t s = ev[i].seq - 1;

			ck_assert_uint_eq(ev[i].seq, 2 * n + 1 - MFS_EVENTS_RING + seen);
			ck_assert_uint_eq(ev[i].sector, 10 * (s / 2) + s % 2);
			ck_assert_uint_eq(ev[i].count, 1);
			ck_assert(ev[i].resolved);
		}
	}
	ck_assert_uint_eq(seen, MFS_EVENTS_RING);
	ck_assert_uint_eq(pos.next, 2 * n + 1);
	/* the next event goes on from there */
	mfs_event_post(fs, MFS_EV_POISON, MFS_EVC_INJECTED, 77, 2, 0);
	ck_assert_int_eq(mfs_events_read(fs, pos.next, ev, 32, 0, &pos), 2);
	ck_assert_uint_eq(ev[0].seq, 2 * n + 1);
	ck_assert_uint_eq(ev[0].sector, 77);
	ck_assert_uint_eq(ev[1].seq, 2 * n + 2);
	ck_assert_uint_eq(ev[1].sector, 78);
	ck_assert_uint_eq(pos.head, 2 * n + 3);
	fs_free(fs);
}
END_TEST

struct later {
	struct mfs *fs;
	bool stop; /* stop instead of posting */
};

static void *post_later(void *arg)
{
	struct later *l = arg;

	usleep(100 * 1000);
	if (l->stop)
		mfs_events_stop(l->fs);
	else
		mfs_event_post(l->fs, MFS_EV_POISON, MFS_EVC_LATENT, 7, 1, 0);
	return NULL;
}

START_TEST(test_wait)
{
	struct mfs *fs = fs_new();
	struct later l = {.fs = fs};
	struct mfs_event ev[4];
	struct mfs_events_pos pos;
	pthread_t t;
	double t0;

	/* nothing comes: the wait ends at the timeout */
	t0 = now_s();
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 4, 200, &pos), 0);
	ck_assert(now_s() - t0 >= 0.19);
	/* an event wakes the reader */
	ck_assert_int_eq(pthread_create(&t, NULL, post_later, &l), 0);
	t0 = now_s();
	ck_assert_int_eq(mfs_events_read(fs, 1, ev, 4, 5000, &pos), 1);
	ck_assert(now_s() - t0 < 2.5);
	ck_assert_uint_eq(ev[0].seq, 1);
	pthread_join(t, NULL);
	/* stop wakes it, and later reads do not wait */
	l.stop = true;
	ck_assert_int_eq(pthread_create(&t, NULL, post_later, &l), 0);
	t0 = now_s();
	ck_assert_int_eq(mfs_events_read(fs, 2, ev, 4, 5000, &pos), 0);
	ck_assert(now_s() - t0 < 2.5);
	pthread_join(t, NULL);
	t0 = now_s();
	ck_assert_int_eq(mfs_events_read(fs, 2, ev, 4, 5000, &pos), 0);
	ck_assert(now_s() - t0 < 0.5);
	fs_free(fs);
}
END_TEST

struct seen {
	uint64_t sector[8], nr[8];
	enum blk_poison_cause cause[8];
	unsigned n;
};

static void notify(void *priv, uint64_t sector, uint64_t nr, enum blk_poison_cause cause)
{
	struct seen *s = priv;

	ck_assert_uint_lt(s->n, 8);
	s->sector[s->n] = sector;
	s->nr[s->n] = nr;
	s->cause[s->n++] = cause;
}

START_TEST(test_notifier_new_part_only)
{
	struct blk_dev_config cfg = {.backend = BLK_BACKEND_NULL, .size = 1u << 20};
	struct blk_dev *dev;
	struct seen s = {0};

	ck_assert_int_eq(blk_dev_open(&cfg, &dev, NULL, 0), 0);
	blk_dev_set_poison_notify(dev, notify, &s);
	ck_assert_int_eq(blk_poison_add(dev, 10, 4), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_uint_eq(s.sector[0], 10);
	ck_assert_uint_eq(s.nr[0], 4);
	ck_assert_int_eq(s.cause[0], BLK_POISON_INJECTED);
	/* [8, 18) over [10, 14): only [8, 10) and [14, 18) are new */
	ck_assert_int_eq(blk_poison_add(dev, 8, 10), 0);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_uint_eq(s.sector[1], 8);
	ck_assert_uint_eq(s.nr[1], 2);
	ck_assert_uint_eq(s.sector[2], 14);
	ck_assert_uint_eq(s.nr[2], 4);
	/* all known: nothing */
	ck_assert_int_eq(blk_poison_add(dev, 9, 5), 0);
	ck_assert_uint_eq(s.n, 3);
	/* found by a read (a media error, a guarded fault) */
	ck_assert_int_eq(blk_poison_record(dev, 200, 2), 0);
	ck_assert_uint_eq(s.n, 4);
	ck_assert_uint_eq(s.sector[3], 200);
	ck_assert_int_eq(s.cause[3], BLK_POISON_FOUND);
	/* latent poison: a write makes it good (nothing), a read finds it */
	ck_assert_int_eq(blk_bb_add(&dev->latent, 300, 1), 0);
	ck_assert_int_eq(blk_bb_add(&dev->latent, 310, 1), 0);
	blk_latent_touch(dev, 300, 1, false);
	ck_assert_uint_eq(s.n, 4);
	blk_latent_touch(dev, 305, 10, true);
	ck_assert_uint_eq(s.n, 5);
	ck_assert_uint_eq(s.sector[4], 310);
	ck_assert_uint_eq(s.nr[4], 1);
	ck_assert_int_eq(s.cause[4], BLK_POISON_LATENT);
	/* detached: nothing */
	blk_dev_set_poison_notify(dev, NULL, NULL);
	ck_assert_int_eq(blk_poison_add(dev, 100, 1), 0);
	ck_assert_uint_eq(s.n, 5);
	blk_dev_close(dev);
}
END_TEST

/*
 * Two files whose data lie next to each other on the device: "a" of
 * A_SIZE bytes (its last block only partly used) and "b" of 3 blocks right
 * after it.  Sets the first device sector of a's block 2 and of b's block 0.
 */
#define A_SIZE (2 * BS + 3096) /* a's block 2: bytes 8192..11287, sectors 0-6 (7: past the end) */

/* The slot where the allocator starts a file's first block (fs/core/fmap.c goal_spread). */
static uint64_t first_goal(uint64_t ino)
{
	return ((ino * 0x9e3779b97f4a7c15ull) >> 20) % (fs->sb.data_len / 256);
}

static void two_files(uint64_t *ia, uint64_t *ib, uint64_t *sa2, uint64_t *sb0)
{
	uint8_t *buf = malloc(3 * BS);
	uint64_t pa[3], pb;
	char pad[32];

	ck_assert_ptr_nonnull(buf);
	fill(buf, 3 * BS, 3);
	*ia = fixture_file("a");
	write_all(*ia, buf, A_SIZE, 0);
	/* b starts at the same goal, taken by a: the first fit after it is right behind a */
	for (unsigned i = 0;; i++) {
		ck_assert_uint_lt(i, 10000);
		*ib = fixture_file("b");
		if (first_goal(*ib) == first_goal(*ia))
			break;
		snprintf(pad, sizeof(pad), "pad-%u", i); /* kept: its number is not reused */
		ck_assert_int_eq(mfs_rename(fs, MFS_ROOT_INO, "b", MFS_ROOT_INO, pad, 0), 0);
	}
	write_all(*ib, buf, 3 * BS, 0);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	for (unsigned k = 0; k < 3; k++)
		bmap(*ia, k, &pa[k], NULL, NULL);
	bmap(*ib, 0, &pb, NULL, NULL);
	/* the test needs them adjacent: a's three blocks, then b's first */
	ck_assert_uint_eq(pa[1], pa[0] + 1);
	ck_assert_uint_eq(pa[2], pa[0] + 2);
	ck_assert_uint_eq(pb, pa[2] + 1);
	*sa2 = pa[2] * MFS_SECTORS_PER_BLOCK;
	*sb0 = pb * MFS_SECTORS_PER_BLOCK;
	free(buf);
}

static void setup_fs(void)
{
	fixture_create("events", "", "64M");
}

static void expect(const struct mfs_event *e, uint64_t seq, uint64_t sector, uint64_t count,
                   uint64_t ino, const char *path, uint64_t offset, uint64_t length)
{
	ck_assert_uint_eq(e->seq, seq);
	ck_assert_uint_eq(e->kind, MFS_EV_POISON);
	ck_assert_uint_eq(e->cause, MFS_EVC_INJECTED);
	ck_assert(e->resolved);
	ck_assert_uint_eq(e->sector, sector);
	ck_assert_uint_eq(e->count, count);
	ck_assert_uint_eq(e->ino, ino);
	ck_assert_str_eq(e->path, path);
	ck_assert_uint_eq(e->offset, offset);
	ck_assert_uint_eq(e->length, length);
}

/*
 * Sectors 4-7 of a's block 2 and 0-2 of b's block 0 in one run: a's bytes
 * [10240, 11288) (sector 7 lies past its end and stays with a's piece) and
 * b's bytes [0, 1536), two events; a later event on b's block 2 comes third.
 */
START_TEST(test_range_over_two_files)
{
	struct mfs_event ev[8];
	struct mfs_events_pos pos;
	uint64_t ia, ib, sa2, sb0, sb2;

	two_files(&ia, &ib, &sa2, &sb0);
	sb2 = sb0 + 2 * MFS_SECTORS_PER_BLOCK;
	ck_assert_int_eq(blk_poison_add(fs->dev, sa2 + 4, 7), 0);
	ck_assert_int_eq(blk_poison_add(fs->dev, sb2 + 1, 1), 0);
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 8, 0, &pos), 3);
	expect(&ev[0], 1, sa2 + 4, 4, ia, "/a", 10240, A_SIZE - 10240);
	expect(&ev[1], 2, sb0, 3, ib, "/b", 0, 1536);
	expect(&ev[2], 3, sb2 + 1, 1, ib, "/b", 2 * BS + 512, 512);
	ck_assert_uint_eq(pos.next, 4);
	ck_assert_uint_eq(pos.head, 4);
	ck_assert_uint_eq(pos.oldest, 1);
	ck_assert_uint_eq(pos.lost, 0);
	/* resuming from each seq: every piece once, in order */
	ck_assert_int_eq(mfs_events_read(fs, 1, ev, 1, 0, &pos), 1);
	expect(&ev[0], 1, sa2 + 4, 4, ia, "/a", 10240, A_SIZE - 10240);
	ck_assert_uint_eq(pos.next, 2);
	ck_assert_int_eq(mfs_events_read(fs, pos.next, ev, 8, 0, &pos), 2);
	expect(&ev[0], 2, sb0, 3, ib, "/b", 0, 1536);
	expect(&ev[1], 3, sb2 + 1, 1, ib, "/b", 2 * BS + 512, 512);
	ck_assert_int_eq(mfs_events_read(fs, pos.next, ev, 8, 0, &pos), 0);
	ck_assert_uint_eq(pos.next, 4);
}
END_TEST

/*
 * One file's data on both sides of another's: a's blocks 0-1, b's block 0,
 * a's block 2 (a grows after b took the block behind it).  Poison over all
 * four blocks is three events: a bytes [0, 8192), b [0, 4096), a [8192,
 * 12288) - a's two ranges continue each other in the file but not on the
 * device, so each keeps its own sectors.
 */
START_TEST(test_one_file_on_both_sides)
{
	uint8_t buf[3 * BS];
	struct mfs_event ev[8];
	struct mfs_events_pos pos;
	uint64_t ia, ib, pa[3], pb;
	char pad[32];

	fill(buf, sizeof(buf), 9);
	ia = fixture_file("a");
	write_all(ia, buf, 2 * BS, 0);
	for (unsigned i = 0;; i++) {
		ck_assert_uint_lt(i, 10000);
		ib = fixture_file("b");
		if (first_goal(ib) == first_goal(ia))
			break;
		snprintf(pad, sizeof(pad), "pad-%u", i);
		ck_assert_int_eq(mfs_rename(fs, MFS_ROOT_INO, "b", MFS_ROOT_INO, pad, 0), 0);
	}
	write_all(ib, buf, BS, 0);
	write_all(ia, buf + 2 * BS, BS, 2 * BS);
	ck_assert_int_eq(mfs_txn_commit(fs), 0);
	for (unsigned k = 0; k < 3; k++)
		bmap(ia, k, &pa[k], NULL, NULL);
	bmap(ib, 0, &pb, NULL, NULL);
	/* the layout the test needs: a a b a */
	ck_assert_uint_eq(pa[1], pa[0] + 1);
	ck_assert_uint_eq(pb, pa[0] + 2);
	ck_assert_uint_eq(pa[2], pa[0] + 3);
	ck_assert_int_eq(blk_poison_add(fs->dev, pa[0] * MFS_SECTORS_PER_BLOCK, 32), 0);
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 8, 0, &pos), 3);
	expect(&ev[0], 1, pa[0] * MFS_SECTORS_PER_BLOCK, 16, ia, "/a", 0, 2 * BS);
	expect(&ev[1], 2, pb * MFS_SECTORS_PER_BLOCK, 8, ib, "/b", 0, BS);
	expect(&ev[2], 3, pa[2] * MFS_SECTORS_PER_BLOCK, 8, ia, "/a", 2 * BS, BS);
	ck_assert_uint_eq(pos.next, 4);
}
END_TEST

/* The owner lookup, posting one more event while it runs (the ring unlocked). */
static struct mfs_event *resolve_and_post(struct mfs *f, const struct mfs_event *evs, unsigned n,
                                          size_t *nout)
{
	static bool posted;

	if (!posted) {
		posted = true;
		ck_assert(mfs_event_post(f, MFS_EV_POISON, MFS_EVC_INJECTED, 9, 2, 0));
	}
	return mfs_events_resolve(f, evs, n, nout);
}

/*
 * An event posted while a split one is resolved moves up behind its pieces
 * and is resolved by the next read; one wholly in free space names no file.
 */
START_TEST(test_split_moves_later_events)
{
	struct mfs_event ev[8];
	struct mfs_events_pos pos;
	uint64_t ia, ib, sa2, sb0;

	two_files(&ia, &ib, &sa2, &sb0);
	fs->events.resolve = resolve_and_post;
	/* a's last sector (its last 24 bytes), the one past its end, b's first */
	ck_assert_int_eq(blk_poison_add(fs->dev, sa2 + 6, 3), 0);
	ck_assert_int_eq(mfs_events_read(fs, 1, ev, 8, 0, &pos), 2);
	expect(&ev[0], 1, sa2 + 6, 2, ia, "/a", 2 * BS + 3072, 24);
	expect(&ev[1], 2, sb0, 1, ib, "/b", 0, 512);
	ck_assert_uint_eq(pos.next, 3);
	ck_assert_uint_eq(pos.head, 4); /* the one posted meanwhile, now seq 3 */
	ck_assert_int_eq(mfs_events_read(fs, 3, ev, 8, 0, &pos), 1);
	ck_assert_uint_eq(ev[0].seq, 3);
	ck_assert(ev[0].resolved);
	ck_assert_uint_eq(ev[0].sector, 9);
	ck_assert_uint_eq(ev[0].count, 2);
	ck_assert_uint_eq(ev[0].ino, 0); /* the superblock's sectors: no file's data */
	ck_assert_uint_eq(pos.next, 4);
	ck_assert_uint_eq(pos.head, 4);
}
END_TEST

static Suite *events_suite(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("ring");

	tcase_add_test(tc, test_seq_and_from);
	tcase_add_test(tc, test_ring_drops_oldest);
	tcase_add_test(tc, test_lost_once);
	tcase_add_test(tc, test_wait);
	tcase_add_test(tc, test_notifier_new_part_only);
	tcase_add_test(tc, test_split_seqs_and_ring);
	suite_add_tcase(s, tc);
	tc = tcase_create("owners");
	tcase_add_checked_fixture(tc, setup_fs, fixture_teardown);
	tcase_add_test(tc, test_range_over_two_files);
	tcase_add_test(tc, test_split_moves_later_events);
	tcase_add_test(tc, test_one_file_on_both_sides);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(events_suite());
}
