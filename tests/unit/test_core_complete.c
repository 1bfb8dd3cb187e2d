/* SPDX-License-Identifier: MIT */
/*
 * test_core_complete.c: completion (blk/complete.c): partial and batched
 * completion, per-bio status and bad_sector, tags freed before end_io, a
 * batch over two hardware queues, and end_io that resubmits.
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

/* --- completion ----------------------------------------------------------- */

START_TEST(test_partial_completion)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_comp_batch cb = {0};
	struct blk_request *rq;
	struct blk_stats st;
	struct tbio t[3];
	bool more;

	tb_init(&t[0], BLK_OP_READ, 0, 8192);
	tb_init(&t[1], BLK_OP_READ, 16, 8192);
	tb_init(&t[2], BLK_OP_READ, 32, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	rq = cap_rq(0);
	ck_assert_uint_eq(rq->len, 20480);

	/* the first bio and half of the second */
	more = blk_update_request(rq, BLK_STS_OK, 8192 + 4096);
	ck_assert(more);
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_OK);
	ck_assert_uint_eq(t[0].bio.done, 8192);
	ck_assert_uint_eq(tb_ends(&t[1]), 0);
	ck_assert_uint_eq(t[1].bio.done, 4096);
	ck_assert_uint_eq(tb_ends(&t[2]), 0);
	ck_assert_ptr_eq(rq->bio, &t[1].bio);
	ck_assert_uint_eq(rq->sector, 24);
	ck_assert_uint_eq(rq->len, 8192);
	ck_assert(!dev_idle(dev)); /* the request still holds its tag */

	/* the rest fails */
	rq->status = BLK_STS_IOERR;
	blk_comp_add(&cb, rq);
	blk_mq_end_request_batch(&cb);
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_uint_eq(tb_ends(&t[1]), 1);
	ck_assert_uint_eq(tb_ends(&t[2]), 1);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_OK);
	ck_assert_uint_eq(t[1].bio.status, BLK_STS_IOERR);
	ck_assert_uint_eq(t[1].bio.done, 4096);
	ck_assert_uint_eq(t[2].bio.status, BLK_STS_IOERR);
	ck_assert_uint_eq(t[2].bio.done, 0);
	ck_assert_ptr_null(cb.head);
	ck_assert_uint_eq(cb.count, 0);
	ck_assert(dev_idle(dev));
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.errors, 2);
	ck_assert_uint_eq(st.media_errors, 0);

	/* an error while updating sticks to the bio it hit, even if the request ends OK */
	tb_init(&t[0], BLK_OP_WRITE, 0, 4096);
	tb_init(&t[1], BLK_OP_WRITE, 8, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 2), 1);
	rq = cap_rq(1);
	ck_assert(blk_update_request(rq, BLK_STS_NOSPC, 1024));
	ck_assert_uint_eq(tb_ends(&t[0]), 0);
	ck_assert(blk_update_request(rq, BLK_STS_OK, 3072));
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_NOSPC);
	ck_assert(!blk_update_request(rq, BLK_STS_OK, 4096));
	ck_assert_uint_eq(t[1].bio.status, BLK_STS_OK);
	ck_assert_ptr_null(rq->bio);
	ck_assert_uint_eq(rq->len, 0);
	cap.done = cap.nr; /* ended by hand: free the tag the way a backend would */
	blk_tag_put(&rq->hctx->tags, rq->tag);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_media_bad_sector)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_request *rq;
	struct blk_stats st;
	struct tbio t[3];

	tb_init(&t[0], BLK_OP_READ, 100, 4096);
	tb_init(&t[1], BLK_OP_READ, 108, 4096);
	tb_init(&t[2], BLK_OP_READ, 116, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	rq = cap_rq(0);
	rq->bad_sector = 111; /* inside the second bio */
	cap_complete_all(BLK_STS_MEDIA);
	ck_assert_uint_eq(t[1].bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(t[1].bio.bad_sector, 111);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(t[2].bio.status, BLK_STS_MEDIA);
	/* the others name a sector of their own, never one outside the bio */
	ck_assert_uint_ge(t[0].bio.bad_sector, 100);
	ck_assert_uint_lt(t[0].bio.bad_sector, 108);
	ck_assert_uint_ge(t[2].bio.bad_sector, 116);
	ck_assert_uint_lt(t[2].bio.bad_sector, 124);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.media_errors, 3);
	ck_assert_uint_eq(st.errors, 3);

	/* after a partial completion the bad sector lands in the bio that holds it */
	tb_init(&t[0], BLK_OP_READ, 200, 4096);
	tb_init(&t[1], BLK_OP_READ, 208, 4096);
	tb_init(&t[2], BLK_OP_READ, 216, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	rq = cap_rq(1);
	ck_assert(blk_update_request(rq, BLK_STS_OK, 4096));
	rq->bad_sector = 223;
	cap_complete_all(BLK_STS_MEDIA);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_OK);
	ck_assert_uint_eq(t[2].bio.bad_sector, 223);
	ck_assert_uint_eq(t[1].bio.status, BLK_STS_MEDIA);
	ck_assert_uint_ge(t[1].bio.bad_sector, 208);
	ck_assert_uint_lt(t[1].bio.bad_sector, 216);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_batch_frees_tags)
{
	struct blk_dev *dev = cap_open(NULLCFG(.queue_depth = 64));
	static struct tbio t[64];
	unsigned i;

	/* 64 requests over 2 words, ended in one batch (two chunks) */
	for (i = 0; i < 64; i++) {
		tb_init(&t[i], BLK_OP_WRITE, i * 100, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	ck_assert_uint_eq(cap_nr(), 64);
	ck_assert_uint_eq(dev->hctxs[0].tags.nr_words, 2);
	ck_assert_uint_eq(atomic_load(&dev->hctxs[0].tags.words[0].busy),
	                  dev->hctxs[0].tags.words[0].valid);
	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 64);
	for (i = 0; i < 64; i++) {
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
		ck_assert_uint_eq(t[i].bio.status, BLK_STS_OK);
	}
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* One completion batch mixing two hardware queues: each tag goes back to its own map. */
START_TEST(test_batch_two_queues)
{
	struct blk_dev *dev = cap_open(NULLCFG(.nr_hw_queues = 2, .queue_depth = 40));
	static struct tbio t[80];
	struct blk_comp_batch cb = {0};
	struct hctx1_arg arg;
	unsigned i, on[2] = {0, 0};
	pthread_t th;

	for (i = 0; i < 40; i++) {
		tb_init(&t[i], BLK_OP_READ, i * 100, 4096);
		blk_submit_bio(dev, &t[i].bio); /* this thread: context 0, queue 0 */
	}
	for (i = 40; i < 80; i++)
		tb_init(&t[i], BLK_OP_READ, i * 100, 4096);
	arg = (struct hctx1_arg){dev, &t[40], 40}; /* a new thread: context 1, queue 1 */
	ck_assert_int_eq(pthread_create(&th, NULL, submit_thread, &arg), 0);
	ck_assert_int_eq(join_within(th, 20), 0);
	ck_assert_uint_eq(cap_nr(), 80);
	for (i = 0; i < 80; i++)
		on[cap_rq(i)->hctx->index]++;
	ck_assert_uint_eq(on[0], 40);
	ck_assert_uint_eq(on[1], 40);
	/* interleave: q0, q1, q0, q1, ... */
	for (i = 0; i < 40; i++) {
		blk_comp_add(&cb, cap_rq(i));
		blk_comp_add(&cb, cap_rq(40 + i));
	}
	cap.done = cap.nr;
	blk_mq_end_request_batch(&cb);
	for (i = 0; i < 80; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	ck_assert(blk_tags_idle(&dev->hctxs[0].tags));
	ck_assert(blk_tags_idle(&dev->hctxs[1].tags));
	blk_dev_close(dev);
}
END_TEST

/* end_io that submits the next bio of a chain, from inside the completion. */
struct chain {
	struct blk_dev *dev;
	struct tbio *t;
	unsigned n;
	_Atomic unsigned ended;
};

static struct chain *chain_cur;

static void chain_end_io(struct blk_bio *bio)
{
	struct tbio *tb = (struct tbio *)bio;
	struct chain *c = chain_cur;
	unsigned i = (unsigned)(tb - c->t);

	atomic_fetch_add(&tb->ends, 1);
	atomic_fetch_add(&c->ended, 1);
	if (i + 1 < c->n)
		blk_submit_bio(c->dev, &c->t[i + 1].bio);
}

static void chain_init(struct chain *c, struct blk_dev *dev, struct tbio *t, unsigned n)
{
	unsigned i;

	c->dev = dev;
	c->t = t;
	c->n = n;
	atomic_init(&c->ended, 0);
	for (i = 0; i < n; i++) {
		tb_init(&t[i], BLK_OP_WRITE, i * 16, 4096);
		t[i].bio.end_io = chain_end_io;
	}
	chain_cur = c;
}

START_TEST(test_resubmit_from_end_io_depth1)
{
	struct blk_dev *dev = dev_open(NULLCFG(.queue_depth = 1));
	static struct tbio t[50];
	struct chain c;
	unsigned i;

	/* null backend, no plug: each completion frees the only tag, then submits */
	chain_init(&c, dev, t, 50);
	blk_submit_bio(dev, &t[0].bio);
	ck_assert_uint_eq(atomic_load(&c.ended), 50);
	for (i = 0; i < 50; i++) {
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
		ck_assert_uint_eq(t[i].bio.status, BLK_STS_OK);
	}
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);

	/* capture backend: the batch that ends the only request lets end_io reuse its tag */
	dev = cap_open(NULLCFG(.queue_depth = 1));
	chain_init(&c, dev, t, 3);
	blk_submit_bio(dev, &t[0].bio);
	ck_assert_uint_eq(cap_nr(), 1);
	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 1);
	ck_assert_uint_eq(cap_nr(), 2); /* t[1] was dispatched from t[0]'s end_io */
	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 1);
	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 1);
	ck_assert_uint_eq(atomic_load(&c.ended), 3);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/*
 * Regression (was a core bug): blk_finish_plug()  flushes while blk_current_plug
 * still points at the plug, and clears it afterwards.  A bio submitted from an
 * end_io that runs during that final flush (synchronous backends complete
 * inside it) is added to the dying plug and never dispatched: its end_io is
 * never called and its tag leaks (blk_dev_close() would then wait forever).
 * Fix (covers the next test too): blk_flush_plug_list() sets
 * blk_current_plug = NULL while it issues and restores it afterwards, so bios
 * submitted by completions inside a flush are dispatched directly.
 */
START_TEST(test_resubmit_from_end_io_in_plug)
{
	struct blk_dev *dev = dev_open(NULLCFG(.queue_depth = 4));
	static struct tbio t[2];
	struct blk_plug plug;
	struct chain c;

	chain_init(&c, dev, t, 2);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &t[0].bio);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_msg(tb_ends(&t[1]) == 1, "bio submitted from end_io during blk_finish_plug() "
	                                   "was never dispatched");
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

struct wait_resubmit_arg {
	struct tbio t[3];
	struct chain c;
	_Atomic unsigned finished;
};

static void *wait_resubmit_thread(void *p)
{
	struct wait_resubmit_arg *w = p;
	struct blk_dev *dev = NULL;
	struct blk_dev_config cfg = NULLCFG(.queue_depth = 1);
	struct blk_plug plug;

	if (blk_dev_open(&cfg, &dev, NULL, 0))
		return NULL;
	chain_init(&w->c, dev, w->t, 2); /* t[0]'s end_io submits t[1] */
	tb_init(&w->t[2], BLK_OP_WRITE, 5000, 4096);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &w->t[0].bio);
	blk_submit_bio(dev, &w->t[2].bio); /* no tag left: flushes the plug and waits */
	blk_finish_plug(&plug);
	atomic_store(&w->finished, 1);
	return NULL; /* the device is left open: a failed run would hang in close */
}

/*
 * Regression (was a core bug, same root as the previous test): blk_mq_wait_tag()
 * flushes the plug before sleeping; the flush completes t[0], whose end_io
 * submits t[1] into the still-installed plug, where it takes the tag that was
 * just freed.  The waiter then sleeps for a tag that only its own plug holds:
 * a self-deadlock.  Fix: have blk_flush_plug_list() detach the plug
 * (blk_current_plug = NULL) while it issues and restore it afterwards, so
 * submissions from completions that run inside a flush are dispatched
 * directly.  Runs on a helper thread; fails after 5 s instead of hanging.
 */
START_TEST(test_resubmit_from_end_io_in_tag_wait)
{
	static struct wait_resubmit_arg w;
	pthread_t th;

	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(pthread_create(&th, NULL, wait_resubmit_thread, &w), 0);
	ck_assert_msg(join_within(th, 5) == 0,
	              "a submitter waiting for a tag deadlocked against its own plug");
	ck_assert_uint_eq(atomic_load(&w.finished), 1);
	ck_assert_uint_eq(tb_ends(&w.t[0]), 1);
	ck_assert_uint_eq(tb_ends(&w.t[1]), 1);
	ck_assert_uint_eq(tb_ends(&w.t[2]), 1);
}
END_TEST

void core_complete_tests(struct core_tcases *tc)
{
	tcase_add_test(tc->comp, test_partial_completion);
	tcase_add_test(tc->comp, test_media_bad_sector);
	tcase_add_test(tc->comp, test_batch_frees_tags);
	tcase_add_test(tc->comp, test_resubmit_from_end_io_depth1);
	tcase_add_test(tc->mt, test_batch_two_queues);
	tcase_add_test(tc->bugs, test_resubmit_from_end_io_in_plug);
	tcase_add_test(tc->bugs, test_resubmit_from_end_io_in_tag_wait);
}
