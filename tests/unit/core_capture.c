/* SPDX-License-Identifier: MIT */
/*
 * core_capture.c: the helpers the engine core tests (test_core*.c) share;
 * core_capture.h says what each is for.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_capture.h"

char test_buf[TEST_BUF_SIZE];

/* --- helpers: waiting without timing assertions --------------------------- */

/* Poll @pred for at most @secs seconds (a bound that fails the test, not a measurement). */
bool wait_until(bool (*pred)(void *), void *arg, unsigned secs)
{
	struct timespec end, now;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	for (;;) {
		if (pred(arg))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			return false;
		usleep(500);
	}
}

int join_within(pthread_t th, unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	return pthread_timedjoin_np(th, NULL, &ts);
}

/* --- helpers: bios -------------------------------------------------------- */

_Atomic unsigned end_counter;

void t_end_io(struct blk_bio *bio)
{
	struct tbio *t = (struct tbio *)bio;

	t->end_seq = atomic_fetch_add(&end_counter, 1) + 1;
	atomic_fetch_add(&t->ends, 1);
}

void tb_init(struct tbio *t, enum blk_op op, uint64_t sector, uint32_t len)
{
	void *buf = (op == BLK_OP_READ || op == BLK_OP_WRITE) ? test_buf : NULL;

	memset(t, 0, sizeof(*t));
	blk_bio_init(&t->bio, op, sector, buf, len, t_end_io, NULL);
	atomic_init(&t->ends, 0);
}

/* A bio of @nsegs equal segments. */
void tb_init_segs(struct tbio *t, enum blk_op op, uint64_t sector, uint32_t len, unsigned nsegs)
{
	unsigned i;

	tb_init(t, op, sector, len);
	for (i = 0; i < nsegs; i++) {
		t->iov[i].iov_base = test_buf + i * (len / nsegs);
		t->iov[i].iov_len = len / nsegs;
	}
	t->bio.iov = t->iov;
	t->bio.nr_segs = (uint16_t)nsegs;
}

unsigned tb_ends(struct tbio *t)
{
	return atomic_load(&t->ends);
}

/* --- helpers: devices and the capture backend ----------------------------- */

struct blk_dev *dev_open(struct blk_dev_config cfg)
{
	struct blk_dev *dev = NULL;
	char err[256];
	int ret = blk_dev_open(&cfg, &dev, err, sizeof(err));

	ck_assert_msg(ret == 0, "blk_dev_open: %d (%s)", ret, err);
	ck_assert_ptr_nonnull(dev);
	return dev;
}

struct cap_state cap = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct blk_request *cap_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                  struct blk_comp_batch *cb)
{
	struct blk_request *rq;
	unsigned n = 0;

	(void)hctx;
	(void)cb;
	pthread_mutex_lock(&cap.lock);
	for (rq = list; rq; rq = rq->rq_next) {
		if (cap.nr < CAP_MAX)
			cap.rqs[cap.nr++] = rq;
		n++;
	}
	if (cap.calls < CAP_MAX)
		cap.call_sizes[cap.calls] = n;
	cap.calls++;
	pthread_mutex_unlock(&cap.lock);
	return NULL;
}

int cap_init_hctx(struct blk_hw_queue *hctx)
{
	(void)hctx;
	return 0;
}

void cap_exit_hctx(struct blk_hw_queue *hctx)
{
	(void)hctx;
}

void cap_close(struct blk_dev *dev)
{
	(void)dev;
}

const struct blk_backend_ops cap_ops = {
        .name = "capture",
        .concurrent = true,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = cap_queue_rqs,
};

void dev_set_ops(struct blk_dev *dev, const struct blk_backend_ops *ops)
{
	unsigned i;

	dev->ops = ops;
	for (i = 0; i < dev->nr_hw_queues; i++)
		dev->hctxs[i].ops = ops;
}

/* A null device whose requests are kept by the test instead of completed. */
struct blk_dev *cap_open(struct blk_dev_config cfg)
{
	struct blk_dev *dev = dev_open(cfg);

	pthread_mutex_lock(&cap.lock);
	cap.nr = cap.done = cap.calls = 0;
	pthread_mutex_unlock(&cap.lock);
	dev_set_ops(dev, &cap_ops);
	return dev;
}

unsigned cap_nr(void)
{
	unsigned n;

	pthread_mutex_lock(&cap.lock);
	n = cap.nr;
	pthread_mutex_unlock(&cap.lock);
	return n;
}

unsigned cap_calls(void)
{
	unsigned n;

	pthread_mutex_lock(&cap.lock);
	n = cap.calls;
	pthread_mutex_unlock(&cap.lock);
	return n;
}

struct blk_request *cap_rq(unsigned i)
{
	struct blk_request *rq;

	pthread_mutex_lock(&cap.lock);
	ck_assert_uint_lt(i, cap.nr);
	rq = cap.rqs[i];
	pthread_mutex_unlock(&cap.lock);
	return rq;
}

/* Complete every captured request not yet completed with @sts, in one batch. */
unsigned cap_complete_all(enum blk_status sts)
{
	struct blk_comp_batch cb = {0};
	unsigned n = 0;

	pthread_mutex_lock(&cap.lock);
	while (cap.done < cap.nr) {
		struct blk_request *rq = cap.rqs[cap.done++];

		rq->status = (uint8_t)sts;
		blk_comp_add(&cb, rq);
		n++;
	}
	pthread_mutex_unlock(&cap.lock);
	if (cb.head)
		blk_mq_end_request_batch(&cb);
	return n;
}

bool dev_idle(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++)
		if (!blk_tags_idle(&dev->hctxs[i].tags))
			return false;
	return true;
}

unsigned rq_nr_bios(struct blk_request *rq)
{
	struct blk_bio *bio;
	unsigned n = 0;

	blk_rq_for_each_bio (bio, rq)
		n++;
	return n;
}

/* Submit @n bios under one plug and finish it; returns the requests captured by this call. */
unsigned plug_submit(struct blk_dev *dev, struct tbio *t, unsigned n)
{
	unsigned before = cap_nr(), i;
	struct blk_plug plug;

	blk_start_plug(&plug);
	for (i = 0; i < n; i++)
		blk_submit_bio(dev, &t[i].bio);
	blk_finish_plug(&plug);
	return cap_nr() - before;
}

void *submit_thread(void *p)
{
	struct hctx1_arg *a = p;
	unsigned i;

	for (i = 0; i < a->n; i++)
		blk_submit_bio(a->dev, &a->t[i].bio);
	return NULL;
}
