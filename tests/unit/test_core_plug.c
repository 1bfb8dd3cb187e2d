/* SPDX-License-Identifier: MIT */
/*
 * test_core_plug.c: plugging (flush at 32 requests and at 128 KiB, on
 * finish, nesting, batch-allocated tags) and merging (back, front, the
 * limits, and every reason to refuse a merge).
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

void core_plug_tests(struct core_tcases *tc)
{
	tcase_add_test(tc->plug, test_plug_flush_at_32);
	tcase_add_test(tc->plug, test_plug_flush_at_128k);
	tcase_add_test(tc->plug, test_finish_plug_flushes_one_batch);
	tcase_add_test(tc->plug, test_nested_plug);
	tcase_add_test(tc->plug, test_plug_batch_tags);
	tcase_add_test(tc->merge, test_merge_back);
	tcase_add_test(tc->merge, test_merge_front);
	tcase_add_test(tc->merge, test_merge_limits);
	tcase_add_test(tc->merge, test_merge_refused);
	tcase_add_test(tc->bugs, test_merge_len_overflow);
}
