/* SPDX-License-Identifier: MIT */
/*
 * test_core_threads.c: the core under several threads: tag exhaustion
 * with a blocked submitter, several hardware queues, statistics summed over
 * threads.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_capture.h"

/* --- tag exhaustion ------------------------------------------------------- */

struct blocked {
	struct blk_dev *dev;
	struct tbio *t;
	unsigned n;
	bool plug;
	_Atomic unsigned returned;
};

static void *blocked_thread(void *p)
{
	struct blocked *b = p;
	struct blk_plug plug;
	unsigned i;

	if (b->plug)
		blk_start_plug(&plug);
	for (i = 0; i < b->n; i++)
		blk_submit_bio(b->dev, &b->t[i].bio);
	if (b->plug)
		blk_finish_plug(&plug);
	atomic_store(&b->returned, 1);
	return NULL;
}

static bool has_waiter(void *p)
{
	struct blk_dev *dev = p;

	return atomic_load(&dev->hctxs[0].tags.waiters) > 0;
}

START_TEST(test_tag_exhaustion_blocks_then_proceeds)
{
	struct blk_dev *dev = cap_open(NULLCFG(.queue_depth = 2));
	struct blocked b;
	struct blk_stats st;
	struct tbio t[3];
	pthread_t th;

	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 100, 4096);
	tb_init(&t[2], BLK_OP_READ, 200, 4096);
	blk_submit_bio(dev, &t[0].bio);
	blk_submit_bio(dev, &t[1].bio);
	ck_assert_uint_eq(cap_nr(), 2); /* both tags held by the backend */

	b = (struct blocked){.dev = dev, .t = &t[2], .n = 1};
	atomic_init(&b.returned, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, blocked_thread, &b), 0);
	ck_assert_msg(wait_until(has_waiter, dev, 20), "the submitter never waited for a tag");
	ck_assert_uint_eq(atomic_load(&b.returned), 0);
	ck_assert_uint_eq(cap_nr(), 2);
	ck_assert_uint_eq(tb_ends(&t[2]), 0);

	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 2);
	ck_assert_msg(join_within(th, 20) == 0, "the submitter was not woken by freed tags");
	ck_assert_uint_eq(atomic_load(&b.returned), 1);
	ck_assert_uint_eq(cap_nr(), 3);
	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 1);
	ck_assert_uint_eq(tb_ends(&t[2]), 1);
	ck_assert_uint_eq(atomic_load(&dev->hctxs[0].tags.waiters), 0);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_ge(st.tag_waits, 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* A full map while our own plug holds the tags: the plug is flushed before sleeping. */
START_TEST(test_tag_exhaustion_flushes_own_plug)
{
	struct blk_dev *dev = cap_open(NULLCFG(.queue_depth = 4));
	static struct tbio t[6];
	struct blocked b;
	pthread_t th;
	unsigned i;

	for (i = 0; i < 6; i++)
		tb_init(&t[i], BLK_OP_READ, i * 100, 4096);
	b = (struct blocked){.dev = dev, .t = t, .n = 6, .plug = true};
	atomic_init(&b.returned, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, blocked_thread, &b), 0);
	ck_assert_msg(wait_until(has_waiter, dev, 20), "the submitter never waited for a tag");
	ck_assert_uint_eq(cap_nr(), 4); /* its plug went to the backend before it slept */
	ck_assert_uint_eq(atomic_load(&b.returned), 0);
	cap_complete_all(BLK_STS_OK);
	ck_assert_msg(join_within(th, 20) == 0, "the submitter was not woken by freed tags");
	ck_assert_uint_eq(cap_nr(), 6);
	cap_complete_all(BLK_STS_OK);
	for (i = 0; i < 6; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);

	/* the same on the null backend, one thread: must not deadlock against itself */
	dev = dev_open(NULLCFG(.queue_depth = 4));
	{
		static struct tbio u[20];
		struct blk_plug plug;
		struct blk_stats st;

		blk_start_plug(&plug);
		for (i = 0; i < 20; i++) {
			tb_init(&u[i], BLK_OP_WRITE, i * 100, 4096);
			blk_submit_bio(dev, &u[i].bio);
		}
		blk_finish_plug(&plug);
		for (i = 0; i < 20; i++)
			ck_assert_uint_eq(tb_ends(&u[i]), 1);
		blk_dev_get_stats(dev, &st);
		ck_assert_uint_ge(st.tag_waits, 4);
		ck_assert_uint_eq(st.requests, 20);
	}
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* --- several hardware queues ---------------------------------------------- */

#define MQ_BIOS 100000

static _Atomic unsigned long mq_per_hctx[2];

static struct blk_request *count_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                           struct blk_comp_batch *cb)
{
	struct blk_request *rq, *next;
	unsigned long n = 0;

	for (rq = list; rq; rq = next) {
		next = rq->rq_next;
		rq->status = BLK_STS_OK;
		blk_comp_add(cb, rq);
		n++;
	}
	atomic_fetch_add(&mq_per_hctx[hctx->index], n);
	return NULL;
}

static const struct blk_backend_ops count_ops = {
        .name = "count",
        .concurrent = true,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = count_queue_rqs,
};

struct mq_arg {
	struct blk_dev *dev;
	unsigned id;
	pthread_barrier_t *bar;
	_Atomic unsigned long ended, bad;
};

static void mq_end_io(struct blk_bio *bio)
{
	struct mq_arg *a = bio->private;

	if (bio->status != BLK_STS_OK || bio->done != bio->len)
		atomic_fetch_add(&a->bad, 1);
	atomic_fetch_add(&a->ended, 1);
}

static void *mq_thread(void *p)
{
	struct mq_arg *a = p;
	struct blk_bio *bios = calloc(MQ_BIOS, sizeof(*bios));
	struct blk_plug plug;
	unsigned i;

	if (!bios)
		return NULL;
	for (i = 0; i < MQ_BIOS; i++) {
		uint64_t sector = (uint64_t)a->id * 100000000ull + (uint64_t)i * 16;

		blk_bio_init(&bios[i], BLK_OP_READ, sector, test_buf, 4096, mq_end_io, a);
		if (i % 32 == 0) {
			if (a->id)
				blk_start_plug_nr_ios(&plug, 32);
			else
				blk_start_plug(&plug);
		}
		blk_submit_bio(a->dev, &bios[i]);
		if (i == 0)
			pthread_barrier_wait(a->bar); /* both threads hold a context now */
		if (i % 32 == 31 || i == MQ_BIOS - 1)
			blk_finish_plug(&plug);
	}
	free(bios);
	return NULL;
}

START_TEST(test_multiple_hw_queues)
{
	struct blk_dev *dev = dev_open(NULLCFG(.nr_hw_queues = 2, .queue_depth = 64));
	struct mq_arg a[2];
	pthread_barrier_t bar;
	pthread_t th[2];
	struct blk_stats st;
	unsigned i;

	dev_set_ops(dev, &count_ops);
	pthread_barrier_init(&bar, NULL, 2);
	for (i = 0; i < 2; i++) {
		a[i].dev = dev;
		a[i].id = i;
		a[i].bar = &bar;
		atomic_init(&a[i].ended, 0);
		atomic_init(&a[i].bad, 0);
		ck_assert_int_eq(pthread_create(&th[i], NULL, mq_thread, &a[i]), 0);
	}
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(join_within(th[i], 50), 0);
	pthread_barrier_destroy(&bar);
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(atomic_load(&a[i].ended), MQ_BIOS);
		ck_assert_uint_eq(atomic_load(&a[i].bad), 0);
	}
	/* each thread has its own context, on its own queue */
	ck_assert_uint_eq(atomic_load(&mq_per_hctx[0]), MQ_BIOS);
	ck_assert_uint_eq(atomic_load(&mq_per_hctx[1]), MQ_BIOS);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.ios[BLK_OP_READ], 2 * MQ_BIOS);
	ck_assert_uint_eq(st.bytes[BLK_OP_READ], 2ull * MQ_BIOS * 4096);
	ck_assert_uint_eq(st.requests, 2 * MQ_BIOS);
	ck_assert_uint_eq(st.plug_flushes, 2 * ((MQ_BIOS + 31) / 32));
	ck_assert_uint_eq(st.errors, 0);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* Statistics are per thread when written and summed when read. */
START_TEST(test_stats_summed_over_threads)
{
	struct blk_dev *dev = dev_open(NULLCFG());
	static struct tbio t[10];
	struct hctx1_arg arg;
	struct blk_stats st;
	pthread_t th;
	unsigned i;

	for (i = 0; i < 10; i++)
		tb_init(&t[i], BLK_OP_WRITE, i * 100, 512);
	for (i = 0; i < 5; i++)
		blk_submit_bio(dev, &t[i].bio);
	arg = (struct hctx1_arg){dev, &t[5], 5};
	ck_assert_int_eq(pthread_create(&th, NULL, submit_thread, &arg), 0);
	ck_assert_int_eq(join_within(th, 20), 0);
	ck_assert_uint_eq(dev->nr_ctxs, 2);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE], 10);
	ck_assert_uint_eq(st.bytes[BLK_OP_WRITE], 5120);
	ck_assert_uint_eq(st.requests, 10);
	for (i = 0; i < 10; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	blk_dev_close(dev);
}
END_TEST

void core_threads_tests(struct core_tcases *tc)
{
	tcase_add_test(tc->mt, test_tag_exhaustion_blocks_then_proceeds);
	tcase_add_test(tc->mt, test_tag_exhaustion_flushes_own_plug);
	tcase_add_test(tc->mt, test_multiple_hw_queues);
	tcase_add_test(tc->mt, test_stats_summed_over_threads);
}
