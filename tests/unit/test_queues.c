/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the per-hardware-queue counters (blk_dev_get_queue_stats,
 * blk/device.c, with blk_tags_busy from blk/tags.c) on the null backend,
 * which completes every request as it is dispatched: a plugged sequential
 * run on queue 0 (one request, merges), unplugged random bios from a second
 * thread on queue 1 (one request and one dispatch batch each), tags held by
 * an open plug, the queue sums equal to blk_dev_get_stats, and an out of
 * range queue index refused; the counters read by one thread while another
 * submits (under ThreadSanitizer, no report: the counters are atomics).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "blk_internal.h"
#include "check_run.h"

static char test_buf[64 * 1024]; /* the null backend never touches data */
static _Atomic unsigned ends;

static void q_end_io(struct blk_bio *bio)
{
	(void)bio;
	atomic_fetch_add(&ends, 1);
}

static struct blk_dev *q_open(unsigned nr_hw_queues)
{
	struct blk_dev_config cfg = {.backend = BLK_BACKEND_NULL,
	                             .size = 1ull << 30,
	                             .nr_hw_queues = nr_hw_queues,
	                             .queue_depth = 64};
	struct blk_dev *dev = NULL;
	char err[256];

	ck_assert_msg(blk_dev_open(&cfg, &dev, err, sizeof(err)) == 0, "%s", err);
	return dev;
}

/* Three unplugged 4 KiB writes far apart, from a thread of its own (so queue 1). */
static void *q_random_writer(void *arg)
{
	struct blk_dev *dev = arg;
	struct blk_bio bio[3];
	unsigned i;

	for (i = 0; i < 3; i++) {
		blk_bio_init(&bio[i], BLK_OP_WRITE, 1000 + i * 800, test_buf, 4096, q_end_io, NULL);
		blk_submit_bio(dev, &bio[i]);
	}
	return NULL;
}

START_TEST(test_queue_counters)
{
	struct blk_dev *dev = q_open(2);
	struct blk_queue_stats q0, q1;
	struct blk_stats st;
	struct blk_bio bio[8];
	struct blk_plug plug;
	pthread_t th;
	unsigned i;

	atomic_store(&ends, 0);
	/* this thread's context is the device's first: queue 0 */
	blk_start_plug(&plug);
	for (i = 0; i < 8; i++) {
		blk_bio_init(&bio[i], BLK_OP_WRITE, i * 8, test_buf, 4096, q_end_io, NULL);
		blk_submit_bio(dev, &bio[i]);
	}
	ck_assert_int_eq(blk_dev_get_queue_stats(dev, 0, &q0), 0);
	ck_assert_uint_ge(q0.tags_in_use, 1); /* the plugged request holds its tag */
	blk_finish_plug(&plug);
	ck_assert_int_eq(pthread_create(&th, NULL, q_random_writer, dev), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_eq(atomic_load(&ends), 11);

	ck_assert_int_eq(blk_dev_get_queue_stats(dev, 0, &q0), 0);
	ck_assert_uint_eq(q0.ios, 8);
	ck_assert_uint_eq(q0.bytes, 8 * 4096);
	ck_assert_uint_eq(q0.requests, 1);
	ck_assert_uint_eq(q0.merges, 7);
	ck_assert_uint_eq(q0.plug_flushes, 1);
	ck_assert_uint_eq(q0.dispatch_batches, 1);
	ck_assert_uint_eq(q0.tag_waits, 0);
	ck_assert_uint_eq(q0.errors, 0);
	ck_assert_uint_eq(q0.tags_in_use, 0);
	ck_assert_uint_eq(q0.depth, 64);
	ck_assert_uint_eq(q0.nr_ctxs, 1);

	ck_assert_int_eq(blk_dev_get_queue_stats(dev, 1, &q1), 0);
	ck_assert_uint_eq(q1.ios, 3);
	ck_assert_uint_eq(q1.requests, 3);
	ck_assert_uint_eq(q1.merges, 0);
	ck_assert_uint_eq(q1.plug_flushes, 0);
	ck_assert_uint_eq(q1.dispatch_batches, 3);
	ck_assert_uint_eq(q1.tags_in_use, 0);
	ck_assert_uint_eq(q1.nr_ctxs, 1);

	/* the queues add up to the device */
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(q0.ios + q1.ios, st.ios[BLK_OP_WRITE]);
	ck_assert_uint_eq(q0.requests + q1.requests, st.requests);
	ck_assert_uint_eq(q0.merges + q1.merges, st.merges_back + st.merges_front);
	ck_assert_uint_eq(q0.dispatch_batches + q1.dispatch_batches, st.dispatch_batches);
	blk_dev_close(dev);
}
END_TEST

static _Atomic bool reading;

/* Read the counters in a loop while another thread submits (run under TSan: no report). */
static void *q_reader(void *arg)
{
	struct blk_dev *dev = arg;
	struct blk_queue_stats qs;
	struct blk_stats st;

	while (atomic_load(&reading)) {
		ck_assert_int_eq(blk_dev_get_queue_stats(dev, 0, &qs), 0);
		ck_assert_uint_eq(qs.requests <= qs.ios, true);
		blk_dev_get_stats(dev, &st);
	}
	return NULL;
}

START_TEST(test_queue_counters_read_while_written)
{
	struct blk_dev *dev = q_open(1);
	struct blk_queue_stats qs;
	struct blk_bio bio[4];
	struct blk_plug plug;
	pthread_t th;
	unsigned i, k;

	atomic_store(&ends, 0);
	atomic_store(&reading, true);
	ck_assert_int_eq(pthread_create(&th, NULL, q_reader, dev), 0);
	for (i = 0; i < 20000; i++) {
		blk_start_plug(&plug);
		for (k = 0; k < 4; k++) {
			blk_bio_init(&bio[k], BLK_OP_WRITE, (uint64_t)i * 64 + k * 8, test_buf,
			             4096, q_end_io, NULL);
			blk_submit_bio(dev, &bio[k]);
		}
		blk_finish_plug(&plug);
	}
	atomic_store(&reading, false);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(blk_dev_get_queue_stats(dev, 0, &qs), 0);
	ck_assert_uint_eq(qs.ios, 80000);
	ck_assert_uint_eq(qs.requests, 20000);
	ck_assert_uint_eq(qs.merges, 60000);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_queue_index_checked)
{
	struct blk_dev *dev = q_open(1);
	struct blk_queue_stats qs;

	memset(&qs, 0xa5, sizeof(qs));
	ck_assert_int_eq(blk_dev_get_queue_stats(dev, 0, &qs), 0);
	ck_assert_uint_eq(qs.ios, 0); /* no thread has submitted: zeros, no context */
	ck_assert_uint_eq(qs.nr_ctxs, 0);
	ck_assert_int_eq(blk_dev_get_queue_stats(dev, 1, &qs), -EINVAL);
	ck_assert_int_eq(blk_dev_get_queue_stats(dev, ~0u, &qs), -EINVAL);
	blk_dev_close(dev);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("queues");
	TCase *tc = tcase_create("counters");

	tcase_add_test(tc, test_queue_counters);
	tcase_add_test(tc, test_queue_counters_read_while_written);
	tcase_add_test(tc, test_queue_index_checked);
	suite_add_tcase(s, tc);
	return check_run(s);
}
