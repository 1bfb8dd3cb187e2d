/* SPDX-License-Identifier: MIT */
/*
 * Damage events: the core's ring (fs/core/events.c) without a filesystem -
 * sequence numbers, reading from a seq, the bounded wait and its wake-up at
 * stop, the newest winning with the dropped counted, one metadata_lost per
 * block - and the engine's poison notifier (blk/poison.c) on the null
 * backend: only the part of a range not poisoned before is reported, with
 * its cause (injected, found by a read, latent poison read).
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "blk_internal.h"
#include "mfs.h"

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

static Suite *events_suite(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("ring");

	tcase_add_test(tc, test_seq_and_from);
	tcase_add_test(tc, test_ring_drops_oldest);
	tcase_add_test(tc, test_lost_once);
	tcase_add_test(tc, test_wait);
	tcase_add_test(tc, test_notifier_new_part_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(events_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
