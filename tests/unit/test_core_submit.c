/* SPDX-License-Identifier: MIT */
/*
 * test_core_submit.c: the engine core (blk/submit.c, device.c) without a
 * plug: opening a device, status names, submission, bio validation
 * (alignment, read-only devices), the synchronous helpers and statistics.
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

void core_submit_tests(struct core_tcases *tc)
{
	tcase_add_test(tc->basic, test_open_config);
	tcase_add_test(tc->basic, test_status_names);
	tcase_add_test(tc->basic, test_submit_noplug_completes);
	tcase_add_test(tc->basic, test_invalid_bios);
	tcase_add_test(tc->basic, test_unaligned_non_byte_granular);
	tcase_add_test(tc->basic, test_unaligned_byte_granular);
	tcase_add_test(tc->basic, test_readonly);
	tcase_add_test(tc->basic, test_sync_helpers_and_stats);
	tcase_add_test(tc->bugs, test_invalid_bios_counted_as_errors);
}
