/* SPDX-License-Identifier: MIT */
/*
 * test_core_dispatch.c: dispatch (blk/dispatch.c, sched.c): the deadline
 * scheduler and RQF_ELV, the QoS hook and BLK_BIO_TRACKED, serialised
 * (flat-combining), busy and polled backends, mixed-device plugs, direct
 * access, closing a device under an open plug, the per-thread context cache,
 * and poison through the core (which needs blk/slowpath.c).
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

/* --- scheduler ------------------------------------------------------------ */

START_TEST(test_scheduler_set)
{
	struct blk_dev *dev = cap_open(NULLCFG(.nr_hw_queues = 2, .queue_depth = 16));
	struct tbio t;
	unsigned q, i;

	ck_assert_int_eq(blk_dev_set_scheduler(dev, "deadline"), 0);
	for (q = 0; q < 2; q++) {
		ck_assert_ptr_nonnull(dev->hctxs[q].elv);
		for (i = 0; i < 16; i++)
			ck_assert(dev->hctxs[q].tags.rqs[i].rq_flags & RQF_ELV);
	}
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "deadline"), 0); /* again: no change */
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "bfq"), -EINVAL);
	ck_assert_int_eq(blk_dev_set_scheduler(dev, ""), -EINVAL);

	tb_init(&t, BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(cap_nr(), 1);
	ck_assert(cap_rq(0)->rq_flags & RQF_ELV);
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "none"), -EBUSY);
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "deadline"), -EBUSY);
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "nope"), -EINVAL);
	cap_complete_all(BLK_STS_OK);
	ck_assert_uint_eq(tb_ends(&t), 1);

	ck_assert_int_eq(blk_dev_set_scheduler(dev, "none"), 0);
	for (q = 0; q < 2; q++) {
		ck_assert_ptr_null(dev->hctxs[q].elv);
		for (i = 0; i < 16; i++)
			ck_assert(!(dev->hctxs[q].tags.rqs[i].rq_flags & RQF_ELV));
	}
	tb_init(&t, BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert(!(cap_rq(1)->rq_flags & RQF_ELV));
	cap_complete_all(BLK_STS_OK);
	ck_assert_int_eq(blk_dev_set_scheduler(dev, NULL), 0);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_scheduler_sorts)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	static struct tbio t[20];
	unsigned i;

	/* without a scheduler: submission order (descending) */
	for (i = 0; i < 20; i++)
		tb_init(&t[i], BLK_OP_WRITE, (19 - i) * 16, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 20), 20);
	for (i = 0; i < 20; i++)
		ck_assert_uint_eq(cap_rq(i)->sector, (19 - i) * 16);
	cap_complete_all(BLK_STS_OK);

	/* deadline: the backend receives ascending sectors (two batches of at most 16) */
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "deadline"), 0);
	for (i = 0; i < 20; i++)
		tb_init(&t[i], BLK_OP_WRITE, (19 - i) * 16, 4096);
	cap.calls = 0;
	ck_assert_uint_eq(plug_submit(dev, t, 20), 20);
	for (i = 0; i < 20; i++) {
		ck_assert_uint_eq(cap_rq(20 + i)->sector, i * 16);
		ck_assert(cap_rq(20 + i)->rq_flags & RQF_ELV);
	}
	ck_assert_uint_ge(cap_calls(), 2);
	for (i = 0; i < cap_calls(); i++)
		ck_assert_uint_le(cap.call_sizes[i], 16);
	cap_complete_all(BLK_STS_OK);
	for (i = 0; i < 20; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);

	/* merging still happens before the scheduler sees the requests */
	tb_init(&t[0], BLK_OP_READ, 1000, 4096);
	tb_init(&t[1], BLK_OP_READ, 1008, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 2), 1);
	cap_complete_all(BLK_STS_OK);

	/* back to none: RQF_ELV gone, submission order again */
	ck_assert_int_eq(blk_dev_set_scheduler(dev, "none"), 0);
	for (i = 0; i < 3; i++)
		tb_init(&t[i], BLK_OP_WRITE, (2 - i) * 16, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 3);
	for (i = 0; i < 3; i++) {
		ck_assert_uint_eq(cap_rq(41 + i)->sector, (2 - i) * 16);
		ck_assert(!(cap_rq(41 + i)->rq_flags & RQF_ELV));
	}
	cap_complete_all(BLK_STS_OK);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* --- QoS ------------------------------------------------------------------ */

struct qos_count {
	_Atomic unsigned throttled, done, tracked_at_throttle, untracked_done;
};

static void qos_throttle(void *priv, struct blk_bio *bio)
{
	struct qos_count *q = priv;

	atomic_fetch_add(&q->throttled, 1);
	if (bio->flags & BLK_BIO_TRACKED)
		atomic_fetch_add(&q->tracked_at_throttle, 1);
}

static void qos_done(void *priv, struct blk_bio *bio)
{
	struct qos_count *q = priv;

	atomic_fetch_add(&q->done, 1);
	if (!(bio->flags & BLK_BIO_TRACKED))
		atomic_fetch_add(&q->untracked_done, 1);
}

static const struct blk_qos_ops counting_qos = {qos_throttle, qos_done};

START_TEST(test_qos)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct qos_count q = {0};
	struct tbio t[4];
	unsigned i;

	blk_dev_set_qos(dev, &counting_qos, &q);
	/* three merged bios and one alone: each is throttled and done once */
	for (i = 0; i < 3; i++)
		tb_init(&t[i], BLK_OP_WRITE, i * 8, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	tb_init(&t[3], BLK_OP_READ, 500, 4096);
	blk_submit_bio(dev, &t[3].bio);
	ck_assert_uint_eq(atomic_load(&q.throttled), 4);
	ck_assert_uint_eq(atomic_load(&q.tracked_at_throttle), 4);
	ck_assert_uint_eq(atomic_load(&q.done), 0);
	for (i = 0; i < 4; i++)
		ck_assert(t[i].bio.flags & BLK_BIO_TRACKED);
	cap_complete_all(BLK_STS_OK);
	ck_assert_uint_eq(atomic_load(&q.done), 4);
	ck_assert_uint_eq(atomic_load(&q.untracked_done), 0);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);

	/* errors are reported to done() too */
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t[0].bio);
	cap_complete_all(BLK_STS_IOERR);
	ck_assert_uint_eq(atomic_load(&q.throttled), 5);
	ck_assert_uint_eq(atomic_load(&q.done), 5);

	/* detached: bios are not tracked, the hooks are not called */
	blk_dev_set_qos(dev, NULL, NULL);
	for (i = 0; i < 3; i++) {
		tb_init(&t[i], BLK_OP_WRITE, 100 + i * 8, 4096);
		t[i].bio.flags = BLK_BIO_TRACKED; /* a stale flag from the caller is cleared */
	}
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	for (i = 0; i < 3; i++)
		ck_assert(!(t[i].bio.flags & BLK_BIO_TRACKED));
	cap_complete_all(BLK_STS_OK);
	ck_assert_uint_eq(atomic_load(&q.throttled), 5);
	ck_assert_uint_eq(atomic_load(&q.done), 5);
	for (i = 0; i < 3; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/*
 * Regression (was a core bug): blk_bio_endio()  calls hctx->dev->qos->done() for
 * a TRACKED bio, re-reading dev->qos at completion.  If the policy was detached
 * (blk_dev_set_qos(dev, NULL, NULL)) while the bio was in flight, dev->qos is
 * NULL and the completion dereferences it (SIGSEGV); if another policy was
 * attached, its done() gets a bio it never throttled.  Fix: have
 * blk_dev_set_qos() wait until no tracked bio is in flight (as
 * blk_dev_set_scheduler() requires idle queues), or at least load dev->qos once
 * and skip done() when it is NULL.
 */
START_TEST(test_qos_detach_in_flight)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct qos_count q = {0};
	struct tbio t;

	blk_dev_set_qos(dev, &counting_qos, &q);
	tb_init(&t, BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert(t.bio.flags & BLK_BIO_TRACKED);
	blk_dev_set_qos(dev, NULL, NULL);
	cap_complete_all(BLK_STS_OK); /* crashes today */
	ck_assert_uint_eq(tb_ends(&t), 1);
	ck_assert_uint_le(atomic_load(&q.done), 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* --- dispatch: serialised, busy and polled backends, mixed plugs ---------- */

/* A non-concurrent capture backend whose first queue_rqs() call waits at a gate. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool armed, inside, open;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false};

static struct blk_request *gated_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                           struct blk_comp_batch *cb)
{
	struct blk_request *ret = cap_queue_rqs(hctx, list, cb);

	pthread_mutex_lock(&gate.lock);
	if (gate.armed) {
		gate.armed = false;
		gate.inside = true;
		pthread_cond_broadcast(&gate.cond);
		while (!gate.open)
			pthread_cond_wait(&gate.cond, &gate.lock);
	}
	pthread_mutex_unlock(&gate.lock);
	return ret;
}

static const struct blk_backend_ops serial_ops = {
        .name = "capture-serial",
        .concurrent = false,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = gated_queue_rqs,
};

static bool gate_inside(void *unused)
{
	bool in;

	(void)unused;
	pthread_mutex_lock(&gate.lock);
	in = gate.inside;
	pthread_mutex_unlock(&gate.lock);
	return in;
}

/* A thread that finds the submission ring taken parks its list; the holder dispatches it. */
START_TEST(test_serial_backend_combining)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct hctx1_arg arg_a, arg_b;
	struct tbio t[2];
	pthread_t ta, tb;

	dev_set_ops(dev, &serial_ops);
	tb_init(&t[0], BLK_OP_WRITE, 0, 4096);
	tb_init(&t[1], BLK_OP_WRITE, 100, 4096);
	pthread_mutex_lock(&gate.lock);
	gate.armed = true;
	pthread_mutex_unlock(&gate.lock);

	arg_a = (struct hctx1_arg){dev, &t[0], 1};
	ck_assert_int_eq(pthread_create(&ta, NULL, submit_thread, &arg_a), 0);
	ck_assert_msg(wait_until(gate_inside, NULL, 20), "the first dispatch never started");

	/* the ring is held: this submission parks and returns without waiting */
	arg_b = (struct hctx1_arg){dev, &t[1], 1};
	ck_assert_int_eq(pthread_create(&tb, NULL, submit_thread, &arg_b), 0);
	ck_assert_msg(join_within(tb, 20) == 0, "a submitter waited for another submitter");
	ck_assert_uint_eq(cap_nr(), 1);
	ck_assert_uint_ne(atomic_load(&dev->hctxs[0].swq_pending), 0);

	/* the holder drains the parked list before letting go */
	pthread_mutex_lock(&gate.lock);
	gate.open = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
	ck_assert_int_eq(join_within(ta, 20), 0);
	ck_assert_uint_eq(cap_nr(), 2);
	ck_assert_ptr_eq(cap_rq(1)->bio, &t[1].bio);
	ck_assert_uint_eq(atomic_load(&dev->hctxs[0].swq_pending), 0);
	cap_complete_all(BLK_STS_OK);
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_uint_eq(tb_ends(&t[1]), 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* A backend that takes one request per call and hands the rest back as busy. */
static struct blk_request *busy_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                          struct blk_comp_batch *cb)
{
	struct blk_request *rest = list->rq_next;

	list->rq_next = NULL;
	cap_queue_rqs(hctx, list, cb);
	return rest;
}

static const struct blk_backend_ops busy_ops = {
        .name = "busy",
        .concurrent = true,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = busy_queue_rqs,
};

static const struct blk_backend_ops busy_serial_ops = {
        .name = "busy-serial",
        .concurrent = false,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = busy_queue_rqs,
};

START_TEST(test_busy_backend_retried)
{
	const struct blk_backend_ops *ops[] = {&busy_ops, &busy_serial_ops};
	unsigned k, i;

	for (k = 0; k < 2; k++) {
		struct blk_dev *dev = cap_open(NULLCFG());
		struct tbio t[5];

		dev_set_ops(dev, ops[k]);
		for (i = 0; i < 5; i++)
			tb_init(&t[i], BLK_OP_READ, i * 100, 4096);
		ck_assert_uint_eq(plug_submit(dev, t, 5), 5);
		ck_assert_uint_eq(cap_calls(), 5);
		for (i = 0; i < 5; i++)
			ck_assert_ptr_eq(cap_rq(i)->bio, &t[i].bio); /* each once, in order */
		cap_complete_all(BLK_STS_OK);
		for (i = 0; i < 5; i++)
			ck_assert_uint_eq(tb_ends(&t[i]), 1);
		ck_assert(dev_idle(dev));
		blk_dev_close(dev);
	}
}
END_TEST

/* A polled backend: completions only happen when someone reaps them. */
static int cap_poll(struct blk_hw_queue *hctx, unsigned min, struct blk_comp_batch *cb)
{
	int n = 0;

	(void)hctx;
	(void)min;
	pthread_mutex_lock(&cap.lock);
	while (cap.done < cap.nr) {
		struct blk_request *rq = cap.rqs[cap.done++];

		rq->status = BLK_STS_OK;
		blk_comp_add(cb, rq);
		n++;
	}
	pthread_mutex_unlock(&cap.lock);
	return n;
}

static const struct blk_backend_ops polled_ops = {
        .name = "capture-polled",
        .concurrent = true,
        .async = true,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = cap_queue_rqs,
        .poll = cap_poll,
};

static struct blk_dev *polled_open(unsigned depth)
{
	struct blk_dev *dev = cap_open(NULLCFG(.queue_depth = depth));

	dev_set_ops(dev, &polled_ops);
	dev->hctxs[0].polled = true;
	return dev;
}

START_TEST(test_polled_backend)
{
	struct blk_dev *dev = polled_open(2);
	char buf[4096] = {0};
	struct blk_stats st;
	struct tbio t[3];
	unsigned i;

	/* a synchronous helper reaps its own completion */
	ck_assert_int_eq(blk_read(dev, 0, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(blk_write(dev, 8, buf, sizeof(buf), 0), 0);

	/* nothing completes until blk_poll() */
	tb_init(&t[0], BLK_OP_READ, 100, 4096);
	tb_init(&t[1], BLK_OP_READ, 200, 4096);
	blk_submit_bio(dev, &t[0].bio);
	blk_submit_bio(dev, &t[1].bio);
	ck_assert_uint_eq(tb_ends(&t[0]) + tb_ends(&t[1]), 0);
	ck_assert_int_eq(blk_poll(dev, 0), 2);
	ck_assert_uint_eq(tb_ends(&t[0]) + tb_ends(&t[1]), 2);
	ck_assert_int_eq(blk_poll(dev, 0), 0);

	/* a full map on a polled queue: the submitter reaps instead of sleeping forever */
	for (i = 0; i < 3; i++) {
		tb_init(&t[i], BLK_OP_WRITE, 300 + i * 100, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	ck_assert_uint_eq(tb_ends(&t[0]) + tb_ends(&t[1]), 2);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_ge(st.tag_waits, 1);

	/* close reaps what is still in flight */
	ck_assert_uint_eq(tb_ends(&t[2]), 0);
	blk_dev_close(dev);
	ck_assert_uint_eq(tb_ends(&t[2]), 1);
}
END_TEST

/* One plug, two devices: no merge across them, split per queue, 64 requests before a flush. */
START_TEST(test_plug_two_devices)
{
	struct blk_dev *a = cap_open(NULLCFG());
	struct blk_dev *b = cap_open(NULLCFG());
	static struct tbio t[70];
	struct blk_plug plug;
	unsigned i, on_a = 0;

	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 8, 4096); /* contiguous numbers, other device */
	tb_init(&t[2], BLK_OP_READ, 16, 4096);
	blk_start_plug(&plug);
	blk_submit_bio(a, &t[0].bio);
	blk_submit_bio(b, &t[1].bio);
	blk_submit_bio(a, &t[2].bio);
	ck_assert_uint_eq(plug.rq_count, 3);
	ck_assert(plug.multiple_queues);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 3);
	ck_assert_uint_eq(cap_calls(), 2); /* one batch per queue */
	ck_assert_ptr_eq(cap_rq(0)->bio, &t[0].bio);
	ck_assert_ptr_eq(cap_rq(1)->bio, &t[2].bio);
	ck_assert_ptr_eq(cap_rq(2)->bio, &t[1].bio);
	ck_assert_ptr_eq(cap_rq(2)->hctx->dev, b);
	cap_complete_all(BLK_STS_OK);

	blk_start_plug(&plug);
	for (i = 0; i < 65; i++) {
		tb_init(&t[i], BLK_OP_WRITE, i * 16, 4096);
		blk_submit_bio(i % 2 ? b : a, &t[i].bio);
		if (i < 64)
			ck_assert_msg(cap_nr() == 3, "flushed after %u requests", i + 1);
	}
	ck_assert_uint_eq(cap_nr(), 3 + 64);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 3 + 65);
	for (i = 3; i < 3 + 65; i++)
		on_a += cap_rq(i)->hctx->dev == a;
	ck_assert_uint_eq(on_a, 33);
	cap_complete_all(BLK_STS_OK);
	for (i = 0; i < 65; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	ck_assert(dev_idle(a));
	ck_assert(dev_idle(b));
	blk_dev_close(a);
	blk_dev_close(b);
}
END_TEST

static void *da_direct_access(struct blk_dev *dev, uint64_t pos, size_t len)
{
	(void)dev;
	if (pos + len > sizeof(test_buf))
		return NULL;
	return test_buf + pos;
}

static int da_clear_poison(struct blk_dev *dev, uint64_t sector, uint64_t nr)
{
	(void)dev;
	(void)sector;
	(void)nr;
	return 0;
}

static const struct blk_backend_ops da_ops = {
        .name = "capture-dax",
        .concurrent = true,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = cap_queue_rqs,
        .direct_access = da_direct_access,
        .clear_poison = da_clear_poison,
};

START_TEST(test_direct_access)
{
	struct blk_dev *dev = dev_open(NULLCFG(.size = 1 << 20));
	uint64_t bad = 0;
	void *addr = NULL;

	ck_assert_int_eq(blk_direct_access(dev, 0, 4096, &addr, &bad), -EOPNOTSUPP);
	ck_assert_int_eq(blk_dev_register_buffer(dev, test_buf, sizeof(test_buf)), 0);
	dev_set_ops(dev, &da_ops);
	ck_assert_int_eq(blk_direct_access(dev, 4096, 4096, &addr, &bad), 0);
	ck_assert_ptr_eq(addr, test_buf + 4096);
	ck_assert_int_eq(blk_direct_access(dev, 1 << 20, 1, &addr, &bad), -EINVAL);
	ck_assert_int_eq(blk_direct_access(dev, 0, 0, &addr, &bad), -EINVAL);
	ck_assert_int_eq(blk_direct_access(dev, (1 << 20) - 512, 1024, &addr, &bad), -EINVAL);
	ck_assert_int_eq(blk_direct_access(dev, 512 * 1024, 512, &addr, &bad), -EOPNOTSUPP);
#if BLK_POISON_CHECKS
	ck_assert_int_eq(blk_poison_add(dev, 100, 8), 0);
	ck_assert_int_eq(blk_direct_access(dev, 100 * 512 - 100, 200, &addr, &bad), -EIO);
	ck_assert_uint_eq(bad, 100);
	ck_assert_int_eq(blk_direct_access(dev, 104 * 512 + 7, 1, &addr, NULL), -EIO);
	ck_assert_int_eq(blk_direct_access(dev, 104 * 512 + 7, 1, &addr, &bad), -EIO);
	ck_assert_uint_eq(bad, 104);
	ck_assert_int_eq(blk_direct_access(dev, 108 * 512, 4096, &addr, &bad), 0);
	ck_assert_int_eq(blk_direct_access(dev, 0, 100 * 512, &addr, &bad), 0);
	ck_assert_int_eq(blk_poison_clear(dev, 100, 8), 0);
	ck_assert_uint_eq(blk_poison_count(dev), 0);
	ck_assert_int_eq(blk_direct_access(dev, 100 * 512, 4096, &addr, &bad), 0);
#endif
	blk_dev_close(dev);
}
END_TEST

/* --- closing a device under an open plug ----------------------------------- */

struct close_arg {
	struct blk_dev_config cfg;
	unsigned short nr_ios;
	struct tbio t[2];
	_Atomic unsigned closed;
};

static void *close_in_plug_thread(void *p)
{
	struct close_arg *c = p;
	struct blk_dev *dev = NULL;
	struct blk_plug plug;

	if (blk_dev_open(&c->cfg, &dev, NULL, 0))
		return NULL;
	blk_start_plug_nr_ios(&plug, c->nr_ios);
	tb_init(&c->t[0], BLK_OP_READ, 0, 4096);
	tb_init(&c->t[1], BLK_OP_READ, 100, 4096);
	blk_submit_bio(dev, &c->t[0].bio);
	blk_submit_bio(dev, &c->t[1].bio);
	blk_dev_close(dev); /* flushes this thread's plug first */
	atomic_store(&c->closed, 1);
	blk_finish_plug(&plug);
	return NULL;
}

START_TEST(test_close_under_plug)
{
	static struct close_arg c;
	pthread_t th;

	memset(&c, 0, sizeof(c));
	c.cfg = NULLCFG();
	c.nr_ios = 1;
	ck_assert_int_eq(pthread_create(&th, NULL, close_in_plug_thread, &c), 0);
	ck_assert_int_eq(join_within(th, 20), 0);
	ck_assert_uint_eq(atomic_load(&c.closed), 1);
	ck_assert_uint_eq(tb_ends(&c.t[0]), 1);
	ck_assert_uint_eq(tb_ends(&c.t[1]), 1);
}
END_TEST

/*
 * Regression (was a core bug): blk_dev_close()  flushes the caller's plug but
 * leaves the plug's batch-allocated requests (plug->cached_rqs, from
 * blk_start_plug_nr_ios()) holding their tags, so blk_dev_drain() waits
 * forever for tags that only blk_finish_plug() of this same thread would give
 * back; and blk_finish_plug() afterwards would blk_tag_put() into the freed
 * queue.  Fix: in blk_dev_close(), after flushing, release the cached requests
 * that belong to @dev (blk_plug_free_cached() filtered on rq->hctx->dev).
 * The close runs on a helper thread so that the test fails after 5 s instead
 * of hanging.
 */
START_TEST(test_close_under_batch_plug)
{
	static struct close_arg c;
	pthread_t th;

	memset(&c, 0, sizeof(c));
	c.cfg = NULLCFG();
	c.nr_ios = 8;
	ck_assert_int_eq(pthread_create(&th, NULL, close_in_plug_thread, &c), 0);
	ck_assert_msg(join_within(th, 5) == 0, "blk_dev_close() under a plug with cached tags "
	                                       "never returned");
	ck_assert_uint_eq(tb_ends(&c.t[0]), 1);
	ck_assert_uint_eq(tb_ends(&c.t[1]), 1);
}
END_TEST

/* --- per-thread context cache --------------------------------------------- */

struct tls_arg {
	struct blk_dev *first;
	struct blk_dev *more[4];
	pthread_barrier_t bar;
};

static void *tls_thread(void *p)
{
	struct tls_arg *a = p;
	char buf[512] = {0};
	unsigned i;

	blk_write(a->first, 0, buf, sizeof(buf), 0); /* caches a context of 'first' */
	pthread_barrier_wait(&a->bar);               /* main closes 'first' */
	pthread_barrier_wait(&a->bar);
	for (i = 0; i < 4; i++) /* the fourth new device evicts the stale slot */
		blk_write(a->more[i], 0, buf, sizeof(buf), 0);
	return NULL;
}

/*
 * Regression (was a core bug, seen under AddressSanitizer): blk_dev_close() forgets the closed
 * device only in the calling thread's TLS context cache .
 * Another thread that used the device keeps a slot pointing at the freed
 * blk_ctx; when that slot is evicted, blk_get_ctx_slow()
 * stores to the freed context's owner: a use-after-free write (and, if the
 * memory was reused for another device's context, that context is marked free
 * while still in use).  Fix: check the registry before touching an evicted
 * slot's context, as blk_tls_release() does, or give contexts a generation.
 */
#define TLS_PROBES 16

START_TEST(test_tls_slot_of_closed_device)
{
	void *probe[TLS_PROBES];
	struct tls_arg a;
	pthread_t th;
	unsigned i;

	a.first = dev_open(NULLCFG());
	for (i = 0; i < 4; i++)
		a.more[i] = dev_open(NULLCFG());
	pthread_barrier_init(&a.bar, NULL, 2);
	ck_assert_int_eq(pthread_create(&th, NULL, tls_thread, &a), 0);
	pthread_barrier_wait(&a.bar);
	blk_dev_close(a.first);
	/*
	 * Without a sanitizer, make the write visible: the freed context's memory
	 * is likely handed back by the next allocations of its size; fill them
	 * with a pattern that nothing may change.
	 */
	for (i = 0; i < TLS_PROBES; i++) {
		probe[i] = malloc(sizeof(struct blk_ctx));
		ck_assert_ptr_nonnull(probe[i]);
		memset(probe[i], 0xa5, sizeof(struct blk_ctx));
	}
	pthread_barrier_wait(&a.bar);
	ck_assert_int_eq(join_within(th, 20), 0);
	pthread_barrier_destroy(&a.bar);
	for (i = 0; i < TLS_PROBES; i++) {
		const unsigned char *p = probe[i];
		size_t k;

		for (k = 0; k < sizeof(struct blk_ctx); k++)
			ck_assert_msg(p[k] == 0xa5,
			              "freed memory written at byte %zu: a closed device's context "
			              "was used after blk_dev_close()",
			              k);
		free(probe[i]);
	}
	for (i = 0; i < 4; i++)
		blk_dev_close(a.more[i]);
}
END_TEST

/* --- poison through the core ---------------------------------------------- */

#if BLK_POISON_CHECKS
START_TEST(test_poison_read)
{
	/* Needs blk_rq_slowpath() (blk/slowpath.c): the null backend's read_sync reads nothing. */
	struct blk_dev *dev = dev_open(NULLCFG());
	struct blk_range r;
	struct blk_stats st;
	struct tbio t[2];
	char buf[4096];

	ck_assert_int_eq(blk_poison_add(dev, 100, 8), 0);
	ck_assert_uint_eq(blk_poison_count(dev), 1);
	ck_assert_uint_eq(blk_poison_lookup(dev, 0, 1000, &r, 1, NULL), 1);
	ck_assert_uint_eq(r.sector, 100);
	ck_assert_uint_eq(r.nr, 8);
	ck_assert_int_eq(blk_poison_add(dev, dev->nr_sectors, 1), -EINVAL);

	/* over the whole range: the first bad sector is 100 */
	tb_init(&t[0], BLK_OP_READ, 96, 8192);
	blk_submit_bio(dev, &t[0].bio);
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(t[0].bio.bad_sector, 100);

	/* starting at 104, inside the poison: 104 */
	tb_init(&t[0], BLK_OP_READ, 104, 4096);
	blk_submit_bio(dev, &t[0].bio);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(t[0].bio.bad_sector, 104);

	/* clean ranges around it read fine */
	tb_init(&t[0], BLK_OP_READ, 108, 4096);
	blk_submit_bio(dev, &t[0].bio);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_OK);
	ck_assert_uint_eq(t[0].bio.done, 4096);
	ck_assert_int_eq(blk_read(dev, 92, buf, 4096, 0), 0);
	ck_assert_int_eq(blk_read(dev, 100, buf, 512, 0), -EIO);

	/* a merged request: each bio gets its own status */
	tb_init(&t[0], BLK_OP_READ, 92, 4096);
	tb_init(&t[1], BLK_OP_READ, 100, 4096);
	{
		struct blk_plug plug;

		blk_start_plug(&plug);
		blk_submit_bio(dev, &t[0].bio);
		blk_submit_bio(dev, &t[1].bio);
		ck_assert_uint_eq(plug.rq_count, 1);
		blk_finish_plug(&plug);
	}
	ck_assert_uint_eq(tb_ends(&t[0]), 1);
	ck_assert_uint_eq(tb_ends(&t[1]), 1);
	ck_assert_uint_eq(t[0].bio.status, BLK_STS_OK);
	ck_assert_uint_eq(t[1].bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(t[1].bio.bad_sector, 100);

	blk_dev_get_stats(dev, &st);
	ck_assert_uint_ge(st.media_errors, 4);
	ck_assert_uint_ge(st.poison_hits, 4);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST
#endif

void core_dispatch_tests(struct core_tcases *tc)
{
	tcase_add_test(tc->plug, test_plug_two_devices);
	tcase_add_test(tc->mt, test_serial_backend_combining);
	tcase_add_test(tc->mt, test_close_under_plug);
	tcase_add_test(tc->feat, test_scheduler_set);
	tcase_add_test(tc->feat, test_scheduler_sorts);
	tcase_add_test(tc->feat, test_qos);
	tcase_add_test(tc->feat, test_busy_backend_retried);
	tcase_add_test(tc->feat, test_polled_backend);
	tcase_add_test(tc->feat, test_direct_access);
#if BLK_POISON_CHECKS
	tcase_add_test(tc->feat, test_poison_read);
#endif
	tcase_add_test(tc->bugs, test_qos_detach_in_flight);
	tcase_add_test(tc->bugs, test_tls_slot_of_closed_device);
	tcase_add_test(tc->bugs, test_close_under_batch_plug);
}
