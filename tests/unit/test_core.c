/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the engine core (blk/submit.c, dispatch.c, complete.c,
 * device.c, sched.c, with blk/tags.c and the null backend): bio validation,
 * submission without a plug, plug flush rules (32 requests, 128 KiB, finish,
 * nesting, batch-allocated tags), back and front merging and every reason
 * to refuse a merge, partial and batched completion (per-bio status,
 * bad_sector, tags freed before end_io, end_io that resubmits), tag
 * exhaustion with a blocked submitter, several hardware queues, serialised
 * (flat-combining), busy and polled backends, mixed-device plugs, the
 * deadline scheduler and RQF_ELV, the QoS hook and BLK_BIO_TRACKED, the
 * synchronous helpers, statistics, direct access, and poison through the
 * core (which needs blk/slowpath.c).
 *
 * Most tests replace the null backend by a "capture" backend that keeps the
 * requests it is given in a test-owned list; the test then completes them
 * itself through blk_update_request() / blk_mq_end_request_batch(), exactly
 * as a backend would.  Internal headers are fair game here.
 *
 * The tests of the "regressions" case each reproduce a core defect found
 * while the engine was written (the comment above each says what it was and
 * where); they now pass.  Two of them run the once-hanging path on a helper
 * thread and give up after 5 s rather than hang.
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

#include "blk_internal.h"

#define KIB 1024u

static char test_buf[256 * 1024]; /* the null and capture backends never touch data */

/* --- helpers: waiting without timing assertions --------------------------- */

/* Poll @pred for at most @secs seconds (a bound that fails the test, not a measurement). */
static bool wait_until(bool (*pred)(void *), void *arg, unsigned secs)
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

static int join_within(pthread_t th, unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	return pthread_timedjoin_np(th, NULL, &ts);
}

/* --- helpers: bios -------------------------------------------------------- */

struct tbio {
	struct blk_bio bio; /* first: end_io casts back */
	_Atomic unsigned ends;
	unsigned end_seq; /* global completion order, from 1 */
	struct iovec iov[8];
};

static _Atomic unsigned end_counter;

static void t_end_io(struct blk_bio *bio)
{
	struct tbio *t = (struct tbio *)bio;

	t->end_seq = atomic_fetch_add(&end_counter, 1) + 1;
	atomic_fetch_add(&t->ends, 1);
}

static void tb_init(struct tbio *t, enum blk_op op, uint64_t sector, uint32_t len)
{
	void *buf = (op == BLK_OP_READ || op == BLK_OP_WRITE) ? test_buf : NULL;

	memset(t, 0, sizeof(*t));
	blk_bio_init(&t->bio, op, sector, buf, len, t_end_io, NULL);
	atomic_init(&t->ends, 0);
}

/* A bio of @nsegs equal segments. */
static void tb_init_segs(struct tbio *t, enum blk_op op, uint64_t sector, uint32_t len,
                         unsigned nsegs)
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

static unsigned tb_ends(struct tbio *t)
{
	return atomic_load(&t->ends);
}

/* --- helpers: devices and the capture backend ----------------------------- */

#define NULLCFG(...) ((struct blk_dev_config){.backend = BLK_BACKEND_NULL, __VA_ARGS__})

static struct blk_dev *dev_open(struct blk_dev_config cfg)
{
	struct blk_dev *dev = NULL;
	char err[256];
	int ret = blk_dev_open(&cfg, &dev, err, sizeof(err));

	ck_assert_msg(ret == 0, "blk_dev_open: %d (%s)", ret, err);
	ck_assert_ptr_nonnull(dev);
	return dev;
}

#define CAP_MAX 4096

static struct {
	pthread_mutex_t lock;
	struct blk_request *rqs[CAP_MAX]; /* every request received, in order */
	unsigned nr;                      /* received */
	unsigned done;                    /* rqs[0..done) completed by the test */
	unsigned calls;                   /* queue_rqs() calls */
	unsigned call_sizes[CAP_MAX];     /* requests per call */
} cap = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct blk_request *cap_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
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

static int cap_init_hctx(struct blk_hw_queue *hctx)
{
	(void)hctx;
	return 0;
}

static void cap_exit_hctx(struct blk_hw_queue *hctx)
{
	(void)hctx;
}

static void cap_close(struct blk_dev *dev)
{
	(void)dev;
}

static const struct blk_backend_ops cap_ops = {
        .name = "capture",
        .concurrent = true,
        .close = cap_close,
        .init_hctx = cap_init_hctx,
        .exit_hctx = cap_exit_hctx,
        .queue_rqs = cap_queue_rqs,
};

static void dev_set_ops(struct blk_dev *dev, const struct blk_backend_ops *ops)
{
	unsigned i;

	dev->ops = ops;
	for (i = 0; i < dev->nr_hw_queues; i++)
		dev->hctxs[i].ops = ops;
}

/* A null device whose requests are kept by the test instead of completed. */
static struct blk_dev *cap_open(struct blk_dev_config cfg)
{
	struct blk_dev *dev = dev_open(cfg);

	pthread_mutex_lock(&cap.lock);
	cap.nr = cap.done = cap.calls = 0;
	pthread_mutex_unlock(&cap.lock);
	dev_set_ops(dev, &cap_ops);
	return dev;
}

static unsigned cap_nr(void)
{
	unsigned n;

	pthread_mutex_lock(&cap.lock);
	n = cap.nr;
	pthread_mutex_unlock(&cap.lock);
	return n;
}

static unsigned cap_calls(void)
{
	unsigned n;

	pthread_mutex_lock(&cap.lock);
	n = cap.calls;
	pthread_mutex_unlock(&cap.lock);
	return n;
}

static struct blk_request *cap_rq(unsigned i)
{
	struct blk_request *rq;

	pthread_mutex_lock(&cap.lock);
	ck_assert_uint_lt(i, cap.nr);
	rq = cap.rqs[i];
	pthread_mutex_unlock(&cap.lock);
	return rq;
}

/* Complete every captured request not yet completed with @sts, in one batch. */
static unsigned cap_complete_all(enum blk_status sts)
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

static bool dev_idle(struct blk_dev *dev)
{
	unsigned i;

	for (i = 0; i < dev->nr_hw_queues; i++)
		if (!blk_tags_idle(&dev->hctxs[i].tags))
			return false;
	return true;
}

static unsigned rq_nr_bios(struct blk_request *rq)
{
	struct blk_bio *bio;
	unsigned n = 0;

	blk_rq_for_each_bio (bio, rq)
		n++;
	return n;
}

/* --- open, info, status names --------------------------------------------- */

START_TEST(test_open_config)
{
	struct blk_dev_info info;
	struct blk_dev *dev = NULL;
	struct blk_dev_config bad[] = {
	        NULLCFG(.queue_depth = BLK_MAX_DEPTH + 1),
	        NULLCFG(.nr_hw_queues = 65),
	        NULLCFG(.max_sectors = 4),
	        NULLCFG(.max_segments = 2000),
	        NULLCFG(.size = 2048),
	        NULLCFG(.scheduler = "cfq"),
	};
	char err[256];
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_int_eq(blk_dev_open(&bad[i], &dev, err, sizeof(err)), -EINVAL);
		ck_assert_ptr_null(dev);
		ck_assert_msg(err[0], "config %u: no message", i);
	}

	dev = dev_open(NULLCFG());
	blk_dev_get_info(dev, &info);
	ck_assert_uint_eq(info.size, 1ull << 40);
	ck_assert_uint_eq(info.nr_sectors, (1ull << 40) >> 9);
	ck_assert_uint_eq(info.logical_block_size, 1);
	ck_assert(info.byte_granular);
	ck_assert_uint_eq(info.nr_hw_queues, 1);
	ck_assert_uint_eq(info.queue_depth, 128);
	ck_assert_uint_eq(info.max_sectors, 256);
	ck_assert_uint_eq(info.max_segments, 128);
	ck_assert_str_eq(info.backend_name, "null");
	ck_assert(!info.direct_access);
	ck_assert(!info.read_only);
	ck_assert(!info.emulated_poison);
	ck_assert_ptr_eq(dev->hctxs[0].tags.rqs[5].hctx, &dev->hctxs[0]);
	blk_dev_close(dev);

	dev = dev_open(NULLCFG(.size = 1 << 20, .queue_depth = 7, .nr_hw_queues = 3,
	                       .flags = BLK_CFG_READONLY, .scheduler = "deadline"));
	blk_dev_get_info(dev, &info);
	ck_assert_uint_eq(info.nr_sectors, 2048);
	ck_assert_uint_eq(info.queue_depth, 7);
	ck_assert_uint_eq(info.nr_hw_queues, 3);
	ck_assert(info.read_only);
	ck_assert(dev->hctxs[2].tags.rqs[6].rq_flags & RQF_ELV);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_status_names)
{
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_OK), 0);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_MEDIA), EIO);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_IOERR), EIO);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_NOSPC), ENOSPC);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_INVAL), EINVAL);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_NOTSUPP), EOPNOTSUPP);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_ROFS), EROFS);
	ck_assert_int_eq(blk_status_to_errno(BLK_STS_MAX), EIO);
	ck_assert_str_eq(blk_status_name(BLK_STS_MEDIA), "media error");
	ck_assert_str_eq(blk_status_name((enum blk_status)200), "unknown");
	ck_assert_int_eq(blk_errno_to_status(0), BLK_STS_OK);
	ck_assert_int_eq(blk_errno_to_status(EDQUOT), BLK_STS_NOSPC);
	ck_assert_int_eq(blk_errno_to_status(EROFS), BLK_STS_ROFS);
	ck_assert_int_eq(blk_errno_to_status(EIO), BLK_STS_IOERR);
}
END_TEST

/* --- submission without a plug, validation -------------------------------- */

START_TEST(test_submit_noplug_completes)
{
	struct blk_dev *dev = dev_open(NULLCFG());
	const enum blk_op ops[] = {BLK_OP_READ, BLK_OP_WRITE, BLK_OP_WRITE_ZEROES, BLK_OP_FLUSH};
	struct tbio t;
	unsigned i;

	for (i = 0; i < 4; i++) {
		uint32_t len = ops[i] == BLK_OP_FLUSH ? 0 : 8 * KIB;

		tb_init(&t, ops[i], ops[i] == BLK_OP_FLUSH ? 0 : 1000, len);
		blk_submit_bio(dev, &t.bio);
		/* synchronous backend, no plug: ended before blk_submit_bio returns */
		ck_assert_uint_eq(tb_ends(&t), 1);
		ck_assert_uint_eq(t.bio.status, BLK_STS_OK);
		ck_assert_uint_eq(t.bio.done, len);
		ck_assert(!(t.bio.flags & (BLK_BIO_TRACKED | BLK_BIO_UNALIGNED)));
		ck_assert(dev_idle(dev));
	}
	blk_dev_close(dev);
}
END_TEST

static void expect_invalid(struct blk_dev *dev, struct tbio *t, const char *what)
{
	blk_submit_bio(dev, &t->bio);
	ck_assert_msg(tb_ends(t) == 1, "%s: ended %u times", what, tb_ends(t));
	ck_assert_msg(t->bio.status == BLK_STS_INVAL, "%s: status %u", what, t->bio.status);
	ck_assert_uint_eq(t->bio.done, 0);
}

START_TEST(test_invalid_bios)
{
	struct blk_dev *dev = dev_open(NULLCFG(.size = 1 << 20)); /* 2048 sectors */
	struct blk_stats st;
	struct tbio t;

	tb_init(&t, BLK_OP_READ, 2048, 512);
	expect_invalid(dev, &t, "first sector past the end");
	tb_init(&t, BLK_OP_READ, 2047, 1024);
	expect_invalid(dev, &t, "crosses the end");
	tb_init(&t, BLK_OP_WRITE_ZEROES, 2040, 8 * KIB);
	expect_invalid(dev, &t, "write zeroes crosses the end");
	tb_init(&t, BLK_OP_READ, UINT64_MAX - 1, 4096);
	expect_invalid(dev, &t, "huge sector");
	tb_init(&t, BLK_OP_READ, 0, 0);
	t.bio.iov = t.iov;
	t.bio.nr_segs = 1;
	expect_invalid(dev, &t, "len 0");
	tb_init(&t, BLK_OP_WRITE_ZEROES, 0, 0);
	expect_invalid(dev, &t, "write zeroes len 0");
	tb_init(&t, BLK_OP_READ, 0, 4096);
	t.bio.nr_segs = 0;
	expect_invalid(dev, &t, "no segments");
	tb_init(&t, BLK_OP_READ, 0, 4096);
	t.bio.iov = NULL;
	expect_invalid(dev, &t, "no iov");
	tb_init(&t, BLK_OP_READ, 0, 129 * 512);
	t.bio.nr_segs = 129; /* default max_segments 128 (iov is never walked) */
	expect_invalid(dev, &t, "too many segments");
	tb_init(&t, BLK_OP_READ, 0, 512);
	t.bio.byte_off = 512;
	expect_invalid(dev, &t, "byte_off 512");
	tb_init(&t, BLK_OP_FLUSH, 0, 0);
	t.bio.len = 512;
	expect_invalid(dev, &t, "flush with a length");
	tb_init(&t, BLK_OP_READ, 0, 512);
	t.bio.op = BLK_OP_MAX;
	expect_invalid(dev, &t, "unknown op");

	/* nothing reached a queue */
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.requests, 0);
	ck_assert(dev_idle(dev));

	/* the limits themselves are fine */
	tb_init(&t, BLK_OP_READ, 2047, 512);
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(t.bio.status, BLK_STS_OK);
	tb_init(&t, BLK_OP_READ, 0, 128 * 512);
	t.bio.nr_segs = 128;
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(t.bio.status, BLK_STS_OK);
	blk_dev_close(dev);
}
END_TEST

/* Header contract: stats.errors counts "bios ended with a status other than OK". */
START_TEST(test_invalid_bios_counted_as_errors)
{
	/*
	 * Regression (was a core bug): blk_bio_check()  ends a rejected bio by calling
	 * end_io directly, without blk_count_error(), so BLK_STS_INVAL / BLK_STS_ROFS
	 * endings never reach stats.errors.
	 */
	struct blk_dev *dev = dev_open(NULLCFG(.flags = BLK_CFG_READONLY));
	struct blk_stats st;
	struct tbio t;

	tb_init(&t, BLK_OP_READ, 0, 0);
	t.bio.iov = t.iov;
	t.bio.nr_segs = 1;
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(t.bio.status, BLK_STS_INVAL);
	tb_init(&t, BLK_OP_WRITE, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(t.bio.status, BLK_STS_ROFS);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.errors, 2);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_unaligned_non_byte_granular)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct tbio t[6];

	dev->byte_granular = false;
	dev->lbs_mask = 511;

	tb_init(&t[0], BLK_OP_READ, 0, 100);
	expect_invalid(dev, &t[0], "len 100 on a 512-byte device");
	tb_init(&t[1], BLK_OP_WRITE, 0, 512);
	t[1].bio.byte_off = 8;
	expect_invalid(dev, &t[1], "byte_off 8 on a 512-byte device");
	tb_init(&t[2], BLK_OP_READ, 3, 512);
	blk_submit_bio(dev, &t[2].bio);
	ck_assert_uint_eq(tb_ends(&t[2]), 0);
	ck_assert_uint_eq(cap_nr(), 1);

	/* a 4 KiB logical block: sector and length must both be multiples of 8 sectors */
	dev->lbs_mask = 4095;
	tb_init(&t[3], BLK_OP_READ, 1, 4096);
	expect_invalid(dev, &t[3], "sector 1 on a 4 KiB device");
	tb_init(&t[4], BLK_OP_READ, 8, 2048);
	expect_invalid(dev, &t[4], "2 KiB on a 4 KiB device");
	tb_init(&t[5], BLK_OP_READ, 16, 8192);
	blk_submit_bio(dev, &t[5].bio);
	ck_assert_uint_eq(cap_nr(), 2);

	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 2);
	ck_assert_uint_eq(t[2].bio.status, BLK_STS_OK);
	ck_assert_uint_eq(t[2].bio.done, 512);
	ck_assert_uint_eq(t[5].bio.done, 8192);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_unaligned_byte_granular)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_plug plug;
	struct tbio t[3];

	/* byte-granular (null): accepted, flagged, and never merged */
	tb_init(&t[0], BLK_OP_WRITE, 0, 512);
	tb_init(&t[1], BLK_OP_WRITE, 1, 100);
	tb_init(&t[2], BLK_OP_WRITE, 1, 412);
	t[2].bio.byte_off = 100;
	blk_start_plug(&plug);
	blk_submit_bio(dev, &t[0].bio);
	blk_submit_bio(dev, &t[1].bio);
	blk_submit_bio(dev, &t[2].bio);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 3);
	ck_assert(!(t[0].bio.flags & BLK_BIO_UNALIGNED));
	ck_assert(t[1].bio.flags & BLK_BIO_UNALIGNED);
	ck_assert(t[2].bio.flags & BLK_BIO_UNALIGNED);
	ck_assert(cap_rq(1)->rq_flags & RQF_NOMERGE);
	ck_assert_uint_eq(blk_rq_pos(cap_rq(2)), 512 + 100);
	cap_complete_all(BLK_STS_OK);
	ck_assert_uint_eq(t[1].bio.done, 100);
	ck_assert_uint_eq(t[2].bio.status, BLK_STS_OK);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_readonly)
{
	struct blk_dev *dev = dev_open(NULLCFG(.flags = BLK_CFG_READONLY));
	char buf[4096];
	struct tbio t;

	tb_init(&t, BLK_OP_WRITE, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(tb_ends(&t), 1);
	ck_assert_uint_eq(t.bio.status, BLK_STS_ROFS);
	ck_assert_uint_eq(t.bio.done, 0);
	tb_init(&t, BLK_OP_WRITE_ZEROES, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(t.bio.status, BLK_STS_ROFS);
	tb_init(&t, BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t.bio);
	ck_assert_uint_eq(t.bio.status, BLK_STS_OK);
	ck_assert_int_eq(blk_write(dev, 0, buf, sizeof(buf), 0), -EROFS);
	ck_assert_int_eq(blk_read(dev, 0, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(blk_poison_clear(dev, 0, 1), -EROFS);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* --- plugging ------------------------------------------------------------- */

START_TEST(test_plug_flush_at_32)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	static struct tbio t[40];
	struct blk_plug plug;
	struct blk_stats st;
	unsigned i;

	blk_start_plug(&plug);
	for (i = 0; i < 32; i++) {
		tb_init(&t[i], BLK_OP_READ, i * 16, 4096); /* gaps: never contiguous */
		blk_submit_bio(dev, &t[i].bio);
		ck_assert_msg(cap_nr() == 0, "flushed after %u requests", i + 1);
	}
	ck_assert_uint_eq(plug.rq_count, 32);
	tb_init(&t[32], BLK_OP_READ, 32 * 16, 4096);
	blk_submit_bio(dev, &t[32].bio);
	/* the 33rd bio flushed the 32 before it, in one batch, in order */
	ck_assert_uint_eq(cap_nr(), 32);
	ck_assert_uint_eq(cap_calls(), 1);
	ck_assert_uint_eq(cap.call_sizes[0], 32);
	for (i = 0; i < 32; i++)
		ck_assert_ptr_eq(cap_rq(i)->bio, &t[i].bio);
	ck_assert_uint_eq(plug.rq_count, 1);
	ck_assert_ptr_eq(plug.head->bio, &t[32].bio);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 33);
	ck_assert_uint_eq(cap_calls(), 2);
	ck_assert_uint_eq(cap_complete_all(BLK_STS_OK), 33);
	for (i = 0; i < 33; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.plug_flushes, 2);
	ck_assert_uint_eq(st.requests, 33);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_plug_flush_at_128k)
{
	struct blk_dev *dev = cap_open(NULLCFG()); /* max_sectors 256 = 128 KiB */
	static struct tbio t[40];
	struct blk_plug plug;
	unsigned i;

	/* 31 contiguous 4 KiB bios: one 124 KiB request, then a far one: no flush */
	blk_start_plug(&plug);
	for (i = 0; i < 31; i++) {
		tb_init(&t[i], BLK_OP_WRITE, i * 8, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	tb_init(&t[31], BLK_OP_WRITE, 10000, 4096);
	blk_submit_bio(dev, &t[31].bio);
	ck_assert_uint_eq(cap_nr(), 0);
	ck_assert_uint_eq(plug.rq_count, 2);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 2);
	ck_assert_uint_eq(cap_rq(0)->len, 31 * 4096);
	cap_complete_all(BLK_STS_OK);

	/* 32 contiguous: the request reaches 128 KiB; the next bio flushes it */
	blk_start_plug(&plug);
	for (i = 0; i < 32; i++) {
		tb_init(&t[i], BLK_OP_WRITE, i * 8, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	ck_assert_uint_eq(cap_nr(), 2);
	ck_assert_uint_eq(plug.rq_count, 1);
	ck_assert_uint_eq(plug.head->len, 128 * KIB);
	tb_init(&t[32], BLK_OP_WRITE, 32 * 8, 4096); /* contiguous, but the request is full */
	blk_submit_bio(dev, &t[32].bio);
	ck_assert_uint_eq(cap_nr(), 3);
	ck_assert_uint_eq(cap_rq(2)->len, 128 * KIB);
	ck_assert_uint_eq(rq_nr_bios(cap_rq(2)), 32);
	ck_assert_uint_eq(plug.rq_count, 1);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 4);
	ck_assert_uint_eq(cap_rq(3)->sector, 256);
	cap_complete_all(BLK_STS_OK);
	for (i = 0; i < 33; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);

	/* a single 128 KiB bio on a device with larger requests: the next bio flushes it */
	dev = cap_open(NULLCFG(.max_sectors = 1024));
	blk_start_plug(&plug);
	tb_init(&t[0], BLK_OP_READ, 0, 128 * KIB);
	blk_submit_bio(dev, &t[0].bio);
	tb_init(&t[1], BLK_OP_READ, 5000, 4096);
	blk_submit_bio(dev, &t[1].bio);
	ck_assert_uint_eq(cap_nr(), 1);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 2);
	cap_complete_all(BLK_STS_OK);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_finish_plug_flushes_one_batch)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_plug plug;
	struct tbio t[5];
	unsigned i;

	blk_start_plug(&plug);
	for (i = 0; i < 5; i++) {
		tb_init(&t[i], BLK_OP_READ, 100 * (5 - i), 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	ck_assert_uint_eq(cap_nr(), 0);
	ck_assert_uint_eq(tb_ends(&t[0]), 0);
	blk_finish_plug(&plug);
	/* one queue, no scheduler: one queue_rqs() call, in submission order */
	ck_assert_uint_eq(cap_calls(), 1);
	ck_assert_uint_eq(cap_nr(), 5);
	for (i = 0; i < 5; i++)
		ck_assert_ptr_eq(cap_rq(i)->bio, &t[i].bio);
	cap_complete_all(BLK_STS_OK);

	/* the plug is gone: the next bio is dispatched at once */
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t[0].bio);
	ck_assert_uint_eq(cap_nr(), 6);
	cap_complete_all(BLK_STS_OK);

	/* blk_flush_plug() issues but keeps the plug open */
	blk_start_plug(&plug);
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	blk_submit_bio(dev, &t[0].bio);
	blk_flush_plug();
	ck_assert_uint_eq(cap_nr(), 7);
	tb_init(&t[1], BLK_OP_READ, 100, 4096);
	blk_submit_bio(dev, &t[1].bio);
	ck_assert_uint_eq(cap_nr(), 7);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 8);
	cap_complete_all(BLK_STS_OK);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_nested_plug)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_plug outer, inner;
	struct tbio t[4];
	unsigned i;

	blk_start_plug(&outer);
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 100, 4096);
	blk_submit_bio(dev, &t[0].bio);
	blk_submit_bio(dev, &t[1].bio);
	blk_start_plug(&inner); /* no-op: the outermost plug collects */
	tb_init(&t[2], BLK_OP_READ, 200, 4096);
	tb_init(&t[3], BLK_OP_READ, 300, 4096);
	blk_submit_bio(dev, &t[2].bio);
	blk_submit_bio(dev, &t[3].bio);
	blk_finish_plug(&inner); /* no-op */
	ck_assert_uint_eq(cap_nr(), 0);
	ck_assert_uint_eq(outer.rq_count, 4);
	blk_finish_plug(&outer);
	ck_assert_uint_eq(cap_nr(), 4);
	ck_assert_uint_eq(cap_calls(), 1);
	cap_complete_all(BLK_STS_OK);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* blk_start_plug_nr_ios(): tags come from one batch; unused ones are given back. */
START_TEST(test_plug_batch_tags)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_plug plug;
	struct tbio t[8];
	uint64_t seen = 0;
	unsigned i;

	blk_start_plug_nr_ios(&plug, 8);
	for (i = 0; i < 8; i++) {
		tb_init(&t[i], BLK_OP_READ, i * 100, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	ck_assert_ptr_null(plug.cached_rqs);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 8);
	for (i = 0; i < 8; i++) {
		unsigned tag = cap_rq(i)->tag;

		ck_assert_uint_lt(tag, 64);
		ck_assert(!(seen & (1ull << tag)));
		seen |= 1ull << tag;
	}
	cap_complete_all(BLK_STS_OK);
	ck_assert(dev_idle(dev));

	/* 4 contiguous bios merge into one request: 15 cached tags must come back */
	blk_start_plug_nr_ios(&plug, 16);
	for (i = 0; i < 4; i++) {
		tb_init(&t[i], BLK_OP_READ, i * 8, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	ck_assert_ptr_nonnull(plug.cached_rqs);
	blk_finish_plug(&plug);
	ck_assert_uint_eq(cap_nr(), 9);
	ck_assert_uint_eq(rq_nr_bios(cap_rq(8)), 4);
	cap_complete_all(BLK_STS_OK);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* --- merging -------------------------------------------------------------- */

/* Submit @n bios under one plug and finish it; returns the requests captured by this call. */
static unsigned plug_submit(struct blk_dev *dev, struct tbio *t, unsigned n)
{
	unsigned before = cap_nr(), i;
	struct blk_plug plug;

	blk_start_plug(&plug);
	for (i = 0; i < n; i++)
		blk_submit_bio(dev, &t[i].bio);
	blk_finish_plug(&plug);
	return cap_nr() - before;
}

START_TEST(test_merge_back)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_request *rq;
	struct blk_stats st;
	struct tbio t[3];
	struct blk_bio *bio;
	unsigned i = 0;

	tb_init(&t[0], BLK_OP_WRITE, 64, 4096);
	tb_init_segs(&t[1], BLK_OP_WRITE, 72, 8192, 2);
	tb_init(&t[2], BLK_OP_WRITE, 88, 512);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	rq = cap_rq(0);
	ck_assert_uint_eq(rq->sector, 64);
	ck_assert_uint_eq(rq->len, 4096 + 8192 + 512);
	ck_assert_uint_eq(rq->nr_segs, 4);
	ck_assert_uint_eq(rq->op, BLK_OP_WRITE);
	ck_assert_ptr_eq(rq->biotail, &t[2].bio);
	blk_rq_for_each_bio (bio, rq)
		ck_assert_ptr_eq(bio, &t[i++].bio);
	ck_assert_uint_eq(i, 3);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.merges_back, 2);
	ck_assert_uint_eq(st.merges_front, 0);
	ck_assert_uint_eq(st.requests, 1);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE], 3);
	cap_complete_all(BLK_STS_OK);
	for (i = 0; i < 3; i++) {
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
		ck_assert_uint_eq(t[i].bio.done, t[i].bio.len);
	}
	/* bios end in device order */
	ck_assert_uint_lt(t[0].end_seq, t[1].end_seq);
	ck_assert_uint_lt(t[1].end_seq, t[2].end_seq);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_merge_front)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	struct blk_request *rq;
	struct blk_stats st;
	struct tbio t[3];

	tb_init(&t[0], BLK_OP_READ, 80, 4096);
	tb_init(&t[1], BLK_OP_READ, 72, 4096);
	tb_init(&t[2], BLK_OP_READ, 64, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	rq = cap_rq(0);
	ck_assert_uint_eq(rq->sector, 64); /* the request's start moved down */
	ck_assert_uint_eq(rq->len, 3 * 4096);
	ck_assert_ptr_eq(rq->bio, &t[2].bio);
	ck_assert_ptr_eq(rq->bio->bi_next, &t[1].bio);
	ck_assert_ptr_eq(rq->bio->bi_next->bi_next, &t[0].bio);
	ck_assert_ptr_eq(rq->biotail, &t[0].bio);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.merges_front, 2);
	ck_assert_uint_eq(st.merges_back, 0);

	/* back then front on the same request */
	cap_complete_all(BLK_STS_OK);
	tb_init(&t[0], BLK_OP_READ, 200, 4096);
	tb_init(&t[1], BLK_OP_READ, 208, 4096);
	tb_init(&t[2], BLK_OP_READ, 192, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 1);
	rq = cap_rq(1);
	ck_assert_uint_eq(rq->sector, 192);
	ck_assert_uint_eq(rq->len, 3 * 4096);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.merges_front, 3);
	ck_assert_uint_eq(st.merges_back, 1);
	cap_complete_all(BLK_STS_OK);
	ck_assert_uint_eq(t[2].bio.status, BLK_STS_OK);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_merge_limits)
{
	struct blk_dev *dev = cap_open(NULLCFG(.max_sectors = 16, .max_segments = 4));
	struct tbio t[3];

	/* 8 KiB requests: the third 4 KiB bio does not fit */
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 8, 4096);
	tb_init(&t[2], BLK_OP_READ, 16, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 2);
	ck_assert_uint_eq(cap_rq(0)->len, 8192);
	ck_assert_uint_eq(cap_rq(1)->sector, 16);
	/* front merges are bounded too */
	tb_init(&t[0], BLK_OP_READ, 116, 2048);
	tb_init(&t[1], BLK_OP_READ, 108, 4096);
	tb_init(&t[2], BLK_OP_READ, 100, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 2);
	ck_assert_uint_eq(cap_rq(2)->len, 6144);
	ck_assert_uint_eq(cap_rq(3)->sector, 100);
	cap_complete_all(BLK_STS_OK);

	/* 4 segments: two 2-segment bios fit, a third does not */
	tb_init_segs(&t[0], BLK_OP_READ, 200, 2048, 2);
	tb_init_segs(&t[1], BLK_OP_READ, 204, 2048, 2);
	tb_init_segs(&t[2], BLK_OP_READ, 208, 1024, 2);
	ck_assert_uint_eq(plug_submit(dev, t, 3), 2);
	ck_assert_uint_eq(cap_rq(4)->nr_segs, 4);
	ck_assert_uint_eq(rq_nr_bios(cap_rq(4)), 2);
	ck_assert_uint_eq(cap_rq(5)->nr_segs, 2);
	cap_complete_all(BLK_STS_OK);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);
}
END_TEST

/* Two contiguous bios differing in @what end up in two requests. */
static void expect_no_merge(struct blk_dev *dev, struct tbio *t, const char *what)
{
	unsigned n = plug_submit(dev, t, 2);

	ck_assert_msg(n == 2, "%s: %u request(s), expected 2", what, n);
	cap_complete_all(BLK_STS_OK);
	ck_assert_msg(t[0].bio.status == BLK_STS_OK && t[1].bio.status == BLK_STS_OK, "%s", what);
}

START_TEST(test_merge_refused)
{
	struct blk_dev *dev = cap_open(NULLCFG());
	static const uint8_t flag_pairs[][2] = {
	        {0, BLK_BIO_RECOVERY},
	        {BLK_BIO_RECOVERY, 0},
	        {0, BLK_BIO_FUA},
	        {BLK_BIO_FUA, 0},
	        {BLK_BIO_FUA, BLK_BIO_FUA | BLK_BIO_RECOVERY},
	        {0, BLK_BIO_NOMERGE},
	        {BLK_BIO_NOMERGE, 0},
	        {BLK_BIO_NOMERGE, BLK_BIO_NOMERGE},
	};
	struct blk_stats st;
	struct tbio t[2];
	unsigned i;

	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_WRITE, 8, 4096);
	expect_no_merge(dev, t, "read then write");
	tb_init(&t[0], BLK_OP_WRITE, 0, 4096);
	tb_init(&t[1], BLK_OP_WRITE_ZEROES, 8, 4096);
	expect_no_merge(dev, t, "write then write zeroes");

	for (i = 0; i < sizeof(flag_pairs) / sizeof(flag_pairs[0]); i++) {
		char what[64];

		snprintf(what, sizeof(what), "flags %#x then %#x", flag_pairs[i][0],
		         flag_pairs[i][1]);
		tb_init(&t[0], BLK_OP_WRITE, 0, 4096);
		tb_init(&t[1], BLK_OP_WRITE, 8, 4096);
		t[0].bio.flags = flag_pairs[i][0];
		t[1].bio.flags = flag_pairs[i][1];
		expect_no_merge(dev, t, what);
		/* the same pair in front-merge order */
		tb_init(&t[0], BLK_OP_WRITE, 8, 4096);
		tb_init(&t[1], BLK_OP_WRITE, 0, 4096);
		t[0].bio.flags = flag_pairs[i][0];
		t[1].bio.flags = flag_pairs[i][1];
		expect_no_merge(dev, t, what);
	}

	/* FLUSH never merges, with anything */
	tb_init(&t[0], BLK_OP_FLUSH, 0, 0);
	tb_init(&t[1], BLK_OP_FLUSH, 0, 0);
	expect_no_merge(dev, t, "flush, flush");
	ck_assert(cap_rq(cap_nr() - 1)->rq_flags & RQF_NOMERGE);
	ck_assert(cap_rq(cap_nr() - 2)->rq_flags & RQF_NOMERGE);

	/* not contiguous (a gap, an overlap) */
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 9, 4096);
	expect_no_merge(dev, t, "gap");
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 4, 4096);
	expect_no_merge(dev, t, "overlap");

	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.merges_back, 0);
	ck_assert_uint_eq(st.merges_front, 0);

	/* positive controls: equal flags merge, write zeroes merge */
	tb_init(&t[0], BLK_OP_WRITE, 0, 4096);
	tb_init(&t[1], BLK_OP_WRITE, 8, 4096);
	t[0].bio.flags = t[1].bio.flags = BLK_BIO_FUA | BLK_BIO_RECOVERY;
	ck_assert_uint_eq(plug_submit(dev, t, 2), 1);
	tb_init(&t[0], BLK_OP_WRITE_ZEROES, 0, 4096);
	tb_init(&t[1], BLK_OP_WRITE_ZEROES, 8, 4096);
	ck_assert_uint_eq(plug_submit(dev, t, 2), 1);
	cap_complete_all(BLK_STS_OK);
	ck_assert(dev_idle(dev));
	blk_dev_close(dev);

	/* BLK_CFG_NOMERGE: nothing merges on this device */
	dev = cap_open(NULLCFG(.flags = BLK_CFG_NOMERGE));
	tb_init(&t[0], BLK_OP_READ, 0, 4096);
	tb_init(&t[1], BLK_OP_READ, 8, 4096);
	expect_no_merge(dev, t, "BLK_CFG_NOMERGE back");
	tb_init(&t[0], BLK_OP_READ, 8, 4096);
	tb_init(&t[1], BLK_OP_READ, 0, 4096);
	expect_no_merge(dev, t, "BLK_CFG_NOMERGE front");
	ck_assert(cap_rq(0)->rq_flags & RQF_NOMERGE);
	blk_dev_close(dev);
}
END_TEST

/*
 * Regression (was a core bug): the merge size check ran in 32-bit arithmetic,
 * so a bio near 4 GiB wrapped the sum, merged, and left rq->len wrapped.  Now
 * the sum is compared in 64 bits, a bio above max_sectors (here 1 GiB, the
 * largest allowed) becomes a request of its own, and a bio above
 * BLK_BIO_MAX_BYTES is refused with BLK_STS_INVAL.
 */
START_TEST(test_merge_len_overflow)
{
	struct blk_dev *dev = cap_open(NULLCFG()); /* 1 TiB, max 128 KiB requests */
	struct tbio t[2];

	tb_init(&t[0], BLK_OP_READ, 0, 8192);
	tb_init(&t[1], BLK_OP_READ, 16, BLK_BIO_MAX_BYTES); /* never touched by the capture */
	ck_assert_uint_eq(plug_submit(dev, t, 2), 2);
	ck_assert_uint_eq(cap_rq(0)->len, 8192);
	ck_assert_uint_eq(cap_rq(1)->len, BLK_BIO_MAX_BYTES);
	cap_complete_all(BLK_STS_OK);

	tb_init(&t[0], BLK_OP_READ, 0, 8192);
	tb_init(&t[1], BLK_OP_READ, 16, 0xFFFFE000u); /* 4 GiB - 8 KiB: above the limit */
	ck_assert_uint_eq(plug_submit(dev, t, 2), 1);
	ck_assert_uint_eq(t[1].ends, 1);
	ck_assert_uint_eq(t[1].bio.status, BLK_STS_INVAL);
	ck_assert_uint_eq(cap_rq(cap_nr() - 1)->len, 8192);
	cap_complete_all(BLK_STS_OK);
	blk_dev_close(dev);
}
END_TEST

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

struct hctx1_arg {
	struct blk_dev *dev;
	struct tbio *t;
	unsigned n;
};

static void *submit_thread(void *p)
{
	struct hctx1_arg *a = p;
	unsigned i;

	for (i = 0; i < a->n; i++)
		blk_submit_bio(a->dev, &a->t[i].bio);
	return NULL;
}

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

/* --- synchronous helpers and statistics ----------------------------------- */

START_TEST(test_sync_helpers_and_stats)
{
	struct blk_dev *dev = dev_open(NULLCFG(.size = 1 << 30));
	static struct tbio t[40];
	struct blk_plug plug;
	struct blk_stats st;
	char buf[8192];
	struct tbio z;
	unsigned i;

	ck_assert_int_eq(blk_read(dev, 0, buf, 4096, 0), 0);
	ck_assert_int_eq(blk_read(dev, 8, buf, 4096, 0), 0);
	ck_assert_int_eq(blk_read(dev, 16, buf, 4096, BLK_BIO_FUA), 0);
	ck_assert_int_eq(blk_write(dev, 100, buf, 8192, 0), 0);
	ck_assert_int_eq(blk_write(dev, 200, buf, 8192, BLK_BIO_FUA), 0);
	ck_assert_int_eq(blk_flush(dev), 0);
	tb_init(&z, BLK_OP_WRITE_ZEROES, 300, 4096);
	ck_assert_int_eq(blk_submit_bio_wait(dev, &z.bio), 0);
	ck_assert_uint_eq(z.bio.done, 4096);
	ck_assert_int_eq(blk_poll(dev, 1), 0); /* synchronous backend */

	/* failures come back as -errno */
	ck_assert_int_eq(blk_read(dev, 1ull << 30, buf, 4096, 0), -EINVAL);
	ck_assert_int_eq(blk_read(dev, 0, buf, 0, 0), -EINVAL);

	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.ios[BLK_OP_READ], 3);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE], 2);
	ck_assert_uint_eq(st.ios[BLK_OP_FLUSH], 1);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE_ZEROES], 1);
	ck_assert_uint_eq(st.bytes[BLK_OP_READ], 3 * 4096);
	ck_assert_uint_eq(st.bytes[BLK_OP_WRITE], 2 * 8192);
	ck_assert_uint_eq(st.bytes[BLK_OP_FLUSH], 0);
	ck_assert_uint_eq(st.bytes[BLK_OP_WRITE_ZEROES], 4096);
	ck_assert_uint_eq(st.requests, 7);
	ck_assert_uint_eq(st.dispatch_batches, 7);
	ck_assert_uint_eq(st.plug_flushes, 0);
	ck_assert_uint_eq(st.merges_back + st.merges_front, 0);
	ck_assert_uint_eq(st.tag_waits, 0);
	ck_assert_uint_eq(st.media_errors, 0);

	/* a plug of 40 separate reads: flushed at 32 and at finish */
	blk_start_plug(&plug);
	for (i = 0; i < 40; i++) {
		tb_init(&t[i], BLK_OP_READ, 1000 + i * 16, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	blk_finish_plug(&plug);
	/* a plug of 4 contiguous writes: one request */
	blk_start_plug(&plug);
	for (i = 0; i < 4; i++) {
		tb_init(&t[i], BLK_OP_WRITE, 5000 + i * 8, 4096);
		blk_submit_bio(dev, &t[i].bio);
	}
	/* a synchronous helper inside a plug flushes it rather than sleeping on it */
	ck_assert_int_eq(blk_write(dev, 9000, buf, 4096, 0), 0);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(tb_ends(&t[i]), 1);
	blk_finish_plug(&plug);

	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.ios[BLK_OP_READ], 3 + 40);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE], 2 + 4 + 1);
	ck_assert_uint_eq(st.bytes[BLK_OP_READ], 43 * 4096);
	ck_assert_uint_eq(st.bytes[BLK_OP_WRITE], 2 * 8192 + 5 * 4096);
	ck_assert_uint_eq(st.requests, 7 + 40 + 1 + 1);
	ck_assert_uint_eq(st.merges_back, 3);
	ck_assert_uint_eq(st.plug_flushes, 2 + 1);
	ck_assert_uint_eq(st.dispatch_batches, 7 + 2 + 1);
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

static Suite *core_suite(void)
{
	Suite *s = suite_create("core");
	TCase *tc_basic = tcase_create("submit");
	TCase *tc_plug = tcase_create("plug");
	TCase *tc_merge = tcase_create("merge");
	TCase *tc_comp = tcase_create("completion");
	TCase *tc_mt = tcase_create("threads");
	TCase *tc_feat = tcase_create("features");
	TCase *tc_bugs = tcase_create("regressions");

	tcase_add_test(tc_basic, test_open_config);
	tcase_add_test(tc_basic, test_status_names);
	tcase_add_test(tc_basic, test_submit_noplug_completes);
	tcase_add_test(tc_basic, test_invalid_bios);
	tcase_add_test(tc_basic, test_unaligned_non_byte_granular);
	tcase_add_test(tc_basic, test_unaligned_byte_granular);
	tcase_add_test(tc_basic, test_readonly);
	tcase_add_test(tc_basic, test_sync_helpers_and_stats);
	suite_add_tcase(s, tc_basic);

	tcase_add_test(tc_plug, test_plug_flush_at_32);
	tcase_add_test(tc_plug, test_plug_flush_at_128k);
	tcase_add_test(tc_plug, test_finish_plug_flushes_one_batch);
	tcase_add_test(tc_plug, test_nested_plug);
	tcase_add_test(tc_plug, test_plug_batch_tags);
	tcase_add_test(tc_plug, test_plug_two_devices);
	suite_add_tcase(s, tc_plug);

	tcase_add_test(tc_merge, test_merge_back);
	tcase_add_test(tc_merge, test_merge_front);
	tcase_add_test(tc_merge, test_merge_limits);
	tcase_add_test(tc_merge, test_merge_refused);
	suite_add_tcase(s, tc_merge);

	tcase_add_test(tc_comp, test_partial_completion);
	tcase_add_test(tc_comp, test_media_bad_sector);
	tcase_add_test(tc_comp, test_batch_frees_tags);
	tcase_add_test(tc_comp, test_resubmit_from_end_io_depth1);
	suite_add_tcase(s, tc_comp);

	tcase_add_test(tc_mt, test_batch_two_queues);
	tcase_add_test(tc_mt, test_tag_exhaustion_blocks_then_proceeds);
	tcase_add_test(tc_mt, test_tag_exhaustion_flushes_own_plug);
	tcase_add_test(tc_mt, test_multiple_hw_queues);
	tcase_add_test(tc_mt, test_stats_summed_over_threads);
	tcase_add_test(tc_mt, test_serial_backend_combining);
	tcase_add_test(tc_mt, test_close_under_plug);
	suite_add_tcase(s, tc_mt);

	tcase_add_test(tc_feat, test_scheduler_set);
	tcase_add_test(tc_feat, test_scheduler_sorts);
	tcase_add_test(tc_feat, test_qos);
	tcase_add_test(tc_feat, test_busy_backend_retried);
	tcase_add_test(tc_feat, test_polled_backend);
	tcase_add_test(tc_feat, test_direct_access);
#if BLK_POISON_CHECKS
	tcase_add_test(tc_feat, test_poison_read);
#endif
	suite_add_tcase(s, tc_feat);

	/* Each of these shows a defect of the core described above the test. */
	tcase_add_test(tc_bugs, test_invalid_bios_counted_as_errors);
	tcase_add_test(tc_bugs, test_merge_len_overflow);
	tcase_add_test(tc_bugs, test_resubmit_from_end_io_in_plug);
	tcase_add_test(tc_bugs, test_resubmit_from_end_io_in_tag_wait);
	tcase_add_test(tc_bugs, test_qos_detach_in_flight);
	tcase_add_test(tc_bugs, test_tls_slot_of_closed_device);
	tcase_add_test(tc_bugs, test_close_under_batch_plug);
	suite_add_tcase(s, tc_bugs);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	setenv("CK_DEFAULT_TIMEOUT", "60", 0); /* meson sets 120; keep a generous default */
	sr = srunner_create(core_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
