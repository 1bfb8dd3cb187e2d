/* SPDX-License-Identifier: MIT */
/*
 * uring_io.c: test_uring's data paths on every target: round trips (thread
 * and polled completion, aligned and unaligned memory), write zeroes, several
 * threads on one and two queues, queue depth exhaustion, fixed buffers, the
 * direct and buffered modes, read-only opens, open errors, short reads at
 * the end of a device, the synchronous calls and sub-page memory.
 */
#include "uring.h"
/* --- round trips -------------------------------------------------------- */

/*
 * Fill the region, then rounds of random writes (several contiguous bios
 * per slot under a plug: merged multi-segment requests), then read it all
 * back with other segmentations, then again after a reopen.
 */
static void roundtrip(int t, unsigned flags, bool aligned)
{
	bool polled = flags & BLK_CFG_POLLED;
	struct blk_dev *dev = xopen(t, flags, 1, 64);
	unsigned lbs = dev_lbs(dev), nslots = REGION / (64 * 1024), round, i;
	char *shadow = xalloc(REGION), *src = xalloc(REGION + 64), *dst = xalloc(REGION + 64);
	struct tbio *tbs = calloc(REGION / 4096, sizeof(*tbs));
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)t, polled_sum = 0;
	unsigned *slots = calloc(nslots, sizeof(*slots));
	struct blk_stats st;
	struct blk_plug plug;
	struct waiter w;
	unsigned nb, ndone;

	/* misaligned memory for the bounce path: a few bytes off */
	char *s = aligned ? src : src + 1, *dd = aligned ? dst : dst + 3;

	ck_assert_ptr_nonnull(tbs);
	ck_assert_ptr_nonnull(slots);
	rng_state = seed;

	/* initial fill: 64 KiB bios, contiguous, under one plug */
	fill_random(shadow, REGION, &seed);
	memcpy(s, shadow, REGION);
	waiter_init(&w);
	nb = 0;
	blk_start_plug(&plug);
	for (i = 0; i < REGION / (64 * 1024); i++, nb++) {
		tbio_setup(&tbs[nb], BLK_OP_WRITE, (uint64_t)i * 64 * 1024, s + i * 64 * 1024,
		           64 * 1024, lbs, aligned, &w);
		blk_submit_bio(dev, &tbs[nb].bio);
	}
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, nb, polled, &polled_sum), 0);
	ck_assert_msg(w.errors == 0, "initial fill: %u errors, first status %u", w.errors,
	              w.first_err);
	ndone = nb;

	for (round = 0; round < 4; round++) {
		unsigned used = 0;

		/* distinct slots: no two writes of a round overlap */
		for (i = 0; i < nslots; i++)
			slots[i] = i;
		for (i = nslots - 1; i > 0; i--) {
			unsigned j = (unsigned)(rnd() % (i + 1)), x = slots[i];

			slots[i] = slots[j];
			slots[j] = x;
		}
		nb = 0;
		blk_start_plug(&plug);
		for (i = 0; i < 48; i++) {
			uint64_t base = (uint64_t)slots[i] * 64 * 1024;
			uint32_t len = (uint32_t)(1 + rnd() % (64 * 1024 / lbs)) * lbs;
			uint64_t pos = base + (rnd() % ((64 * 1024 - len) / lbs + 1)) * lbs;
			unsigned parts = 1 + (unsigned)(rnd() % 4), k;
			uint32_t left = len;
			char *m = s + used;

			fill_random(m, len, &seed);
			memcpy(shadow + pos, m, len);
			for (k = 0; k < parts && left; k++) {
				uint32_t l = k == parts - 1
				                     ? left
				                     : (uint32_t)(1 + rnd() % (left / lbs)) * lbs;

				if (l > left)
					l = left;
				tbio_setup(&tbs[nb], BLK_OP_WRITE, pos, m, l, lbs, aligned, &w);
				blk_submit_bio(dev, &tbs[nb].bio);
				nb++;
				pos += l;
				m += l;
				left -= l;
			}
			used += len;
		}
		blk_finish_plug(&plug);
		ck_assert_int_eq(waiter_wait(dev, &w, ndone + nb, polled, &polled_sum), 0);
		ndone += nb;
		ck_assert_msg(w.errors == 0, "round %u: %u errors, first status %u", round,
		              w.errors, w.first_err);
	}
	ck_assert_int_eq(blk_flush(dev), 0);

	/* read back: 96 KiB bios under a plug (they merge up to 128 KiB) */
	memset(dd, 0xa5, REGION);
	nb = 0;
	blk_start_plug(&plug);
	for (i = 0; i < REGION; i += 96 * 1024, nb++) {
		uint32_t len = REGION - i < 96 * 1024 ? REGION - i : 96 * 1024;

		tbio_setup(&tbs[nb], BLK_OP_READ, i, dd + i, len, lbs, aligned, &w);
		blk_submit_bio(dev, &tbs[nb].bio);
	}
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, ndone + nb, polled, &polled_sum), 0);
	ndone += nb;
	ck_assert_msg(w.errors == 0, "read back: %u errors, first status %u", w.errors,
	              w.first_err);
	check_equal(dd, shadow, REGION, "read back");

	blk_dev_get_stats(dev, &st);
	ck_assert_msg(st.merges_back + st.merges_front > 0,
	              "no bio merged: multi-bio path untested");
	ck_assert_uint_lt(st.requests, st.ios[BLK_OP_READ] + st.ios[BLK_OP_WRITE]);
	ck_assert_uint_eq(st.errors, 0);
	if (polled) {
		/* our blk_poll() calls reaped requests (the core polls too while
		 * it waits for tags or for blk_flush) */
		ck_assert_uint_gt(polled_sum, 0);
		ck_assert_uint_le(polled_sum, st.requests);
	}
	blk_dev_close(dev);

	/* and once more from a fresh open */
	dev = xopen(t, flags, 1, 64);
	memset(dst, 0, REGION);
	rw_range(dev, BLK_OP_READ, 0, dst, REGION);
	check_equal(dst, shadow, REGION, "read after reopen");
	blk_dev_close(dev);
	free(shadow);
	free(src);
	free(dst);
	free(tbs);
	free(slots);
}

START_TEST(test_roundtrip_thread)
{
	roundtrip(_i, 0, true);
}
END_TEST

START_TEST(test_roundtrip_polled)
{
	roundtrip(_i, BLK_CFG_POLLED, true);
}
END_TEST

START_TEST(test_roundtrip_unaligned)
{
	/* user memory one byte off and odd segment sizes: the bounce buffer */
	roundtrip(_i, _i & 1 ? BLK_CFG_POLLED : 0, false);
}
END_TEST

/* --- flush and write zeroes --------------------------------------------- */

static void zeroes(int t, unsigned flags)
{
	bool polled = flags & BLK_CFG_POLLED;
	struct blk_dev *dev = xopen(t, flags, 1, 32);
	const size_t span = ZERO_LEN + 2 * MiB; /* 1 MiB of context each side */
	const uint64_t at = ZERO_AT - MiB;
	char *pat = xalloc(span), *got = xalloc(span);
	uint64_t seed = 77 + (uint64_t)t;
	struct blk_bio zb, fb, fz;
	struct waiter w;

	fill_random(pat, span, &seed);
	rw_range(dev, BLK_OP_WRITE, at, pat, span);
	ck_assert_int_eq(blk_flush(dev), 0);

	/* 12 MiB of zeroes in one bio (more than one SQE moves without FALLOCATE),
	 * a FUA zeroing of 64 KiB near the end, then a FLUSH */
	waiter_init(&w);
	blk_bio_init(&zb, BLK_OP_WRITE_ZEROES, ZERO_AT >> 9, NULL, ZERO_LEN - 2 * MiB,
	             waiter_end_io, &w);
	blk_bio_init(&fz, BLK_OP_WRITE_ZEROES, (ZERO_AT + ZERO_LEN - MiB) >> 9, NULL, 64 * 1024,
	             waiter_end_io, &w);
	fz.flags = BLK_BIO_FUA;
	blk_submit_bio(dev, &zb);
	blk_submit_bio(dev, &fz);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_msg(w.errors == 0, "write zeroes: status %u", w.first_err);
	blk_bio_init(&fb, BLK_OP_FLUSH, 0, NULL, 0, waiter_end_io, &w);
	blk_submit_bio(dev, &fb);
	ck_assert_int_eq(waiter_wait(dev, &w, 3, polled, NULL), 0);
	ck_assert_msg(w.errors == 0, "flush: status %u", w.first_err);
	ck_assert_uint_eq(zb.done, zb.len);
	ck_assert_uint_eq(fz.done, fz.len);

	/* a FUA write lands too */
	memset(pat + (ZERO_AT + ZERO_LEN - 2 * MiB - at), 0x5a, 4096);
	ck_assert_int_eq(blk_write(dev, (ZERO_AT + ZERO_LEN - 2 * MiB) >> 9,
	                           pat + (ZERO_AT + ZERO_LEN - 2 * MiB - at), 4096, BLK_BIO_FUA),
	                 0);

	memset(pat + (ZERO_AT - at), 0, ZERO_LEN - 2 * MiB);
	memset(pat + (ZERO_AT + ZERO_LEN - MiB - at), 0, 64 * 1024);
	blk_dev_close(dev);

	dev = xopen(t, flags, 1, 32);
	rw_range(dev, BLK_OP_READ, at, got, span);
	check_equal(got, pat, span, "after write zeroes");
	blk_dev_close(dev);
	free(pat);
	free(got);
}

START_TEST(test_zeroes_thread)
{
	zeroes(_i, 0);
}
END_TEST

START_TEST(test_zeroes_polled)
{
	zeroes(_i, BLK_CFG_POLLED);
}
END_TEST

/* --- several threads ---------------------------------------------------- */

struct worker {
	struct blk_dev *dev;
	pthread_t th;
	unsigned id;
	unsigned lbs;
	bool polled;
	unsigned rounds, per_round; /* bios in flight per round */
	uint64_t region;            /* device offset of its 2 MiB */
	int failed;                 /* 0 ok; else a line number */
	char msg[160];
	pthread_barrier_t *start;
};

#define WFAIL(wk, ...)                                                                             \
	do {                                                                                       \
		snprintf((wk)->msg, sizeof((wk)->msg), __VA_ARGS__);                               \
		(wk)->failed = __LINE__;                                                           \
		goto out;                                                                          \
	} while (0)

/* Rounds of per_round bios to distinct 32 KiB slots of its region, then a read-back. */
static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	const unsigned nslots = THREAD_REGION / (32 * 1024);
	char *shadow = NULL, *mem = NULL, *rd = NULL;
	struct tbio *tbs = NULL;
	uint64_t s = 0x1234567ull * (wk->id + 1);
	unsigned r, i, total = 0;
	struct waiter w;

	waiter_init(&w);
	if (posix_memalign((void **)&shadow, 4096, THREAD_REGION) ||
	    posix_memalign((void **)&mem, 4096, (size_t)wk->per_round * 32 * 1024) ||
	    posix_memalign((void **)&rd, 4096, THREAD_REGION) ||
	    !(tbs = calloc(wk->per_round > 64 ? wk->per_round : 64, sizeof(*tbs))))
		WFAIL(wk, "out of memory");
	pthread_barrier_wait(wk->start);

	/* known content first */
	fill_random(shadow, THREAD_REGION, &s);
	for (i = 0; i < THREAD_REGION; i += 128 * 1024) {
		int ret = blk_write(wk->dev, (wk->region + i) >> 9, shadow + i, 128 * 1024, 0);

		if (ret)
			WFAIL(wk, "thread %u: initial write: %d", wk->id, ret);
	}
	for (r = 0; r < wk->rounds; r++) {
		/* an odd step (>= 3) over a power-of-two slot count: distinct slots, never
		 * adjacent, so no two bios merge and a plugged round holds per_round tags */
		unsigned slot0 = (unsigned)(rnd_r(&s) % nslots),
		         step = 3 + 2 * (unsigned)(rnd_r(&s) % 7);
		struct blk_plug plug;

		if (r & 1)
			blk_start_plug(&plug);
		for (i = 0; i < wk->per_round; i++) {
			uint64_t off = (uint64_t)((slot0 + i * step) % nslots) * 32 * 1024;
			uint32_t len = (uint32_t)(1 + rnd_r(&s) % (32 * 1024 / wk->lbs)) * wk->lbs;
			char *m = mem + (size_t)i * 32 * 1024;

			fill_random(m, len, &s);
			memcpy(shadow + off, m, len);
			memset(&tbs[i], 0, sizeof(tbs[i]));
			blk_bio_init(&tbs[i].bio, BLK_OP_WRITE, (wk->region + off) >> 9, m, len,
			             waiter_end_io, &w);
			blk_submit_bio(wk->dev, &tbs[i].bio);
		}
		if (r & 1)
			blk_finish_plug(&plug);
		total += wk->per_round;
		if (waiter_wait(wk->dev, &w, total, wk->polled, NULL) < 0)
			WFAIL(wk, "thread %u: blk_poll failed", wk->id);
		if (w.errors)
			WFAIL(wk, "thread %u: round %u: %u errors, status %u", wk->id, r, w.errors,
			      w.first_err);
	}
	/* read back in 64 KiB bios, all in flight at once */
	memset(rd, 0, THREAD_REGION);
	for (i = 0; i < THREAD_REGION / (64 * 1024); i++) {
		memset(&tbs[i], 0, sizeof(tbs[i]));
		blk_bio_init(&tbs[i].bio, BLK_OP_READ, (wk->region + (uint64_t)i * 64 * 1024) >> 9,
		             rd + (size_t)i * 64 * 1024, 64 * 1024, waiter_end_io, &w);
		blk_submit_bio(wk->dev, &tbs[i].bio);
	}
	total += THREAD_REGION / (64 * 1024);
	if (waiter_wait(wk->dev, &w, total, wk->polled, NULL) < 0)
		WFAIL(wk, "thread %u: blk_poll failed", wk->id);
	if (w.errors)
		WFAIL(wk, "thread %u: read back: %u errors", wk->id, w.errors);
	if (memcmp(rd, shadow, THREAD_REGION)) {
		for (i = 0; i < THREAD_REGION && rd[i] == shadow[i]; i++)
			;
		WFAIL(wk, "thread %u: data differs at byte %u of its region", wk->id, i);
	}
out:
	free(shadow);
	free(mem);
	free(rd);
	free(tbs);
	return NULL;
}

static void run_workers(int t, unsigned flags, unsigned nr_hw, unsigned depth, unsigned nthreads,
                        unsigned rounds, unsigned per_round)
{
	struct blk_dev *dev = xopen(t, flags, nr_hw, depth);
	struct worker wk[8];
	pthread_barrier_t start;
	struct blk_stats st;
	unsigned i;

	ck_assert_uint_le(nthreads, 8);
	pthread_barrier_init(&start, NULL, nthreads);
	for (i = 0; i < nthreads; i++) {
		memset(&wk[i], 0, sizeof(wk[i]));
		wk[i].dev = dev;
		wk[i].id = i;
		wk[i].lbs = dev_lbs(dev);
		wk[i].polled = flags & BLK_CFG_POLLED;
		wk[i].rounds = rounds;
		wk[i].per_round = per_round;
		wk[i].region = THREAD_AT + (uint64_t)i * THREAD_REGION;
		wk[i].start = &start;
		ck_assert_int_eq(pthread_create(&wk[i].th, NULL, worker_main, &wk[i]), 0);
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(wk[i].th, NULL);
	for (i = 0; i < nthreads; i++)
		ck_assert_msg(!wk[i].failed, "%s (%s): %s", target_names[t],
		              flags & BLK_CFG_POLLED ? "polled" : "thread", wk[i].msg);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE],
	                  nthreads * (rounds * per_round + THREAD_REGION / (128 * 1024)));
	if (depth < per_round)
		ck_assert_msg(st.tag_waits > 0, "depth %u never ran out",
		              depth); /* plugged rounds */
	pthread_barrier_destroy(&start);
	blk_dev_close(dev);
}

START_TEST(test_threads_one_queue)
{
	/* _i: target * 2 + polled */
	run_workers(_i / 2, _i & 1 ? BLK_CFG_POLLED : 0, 1, 64, 2, 24, 16);
}
END_TEST

START_TEST(test_threads_two_queues)
{
	run_workers(_i / 2, _i & 1 ? BLK_CFG_POLLED : 0, 2, 64, 2, 24, 16);
}
END_TEST

START_TEST(test_depth_exhaustion)
{
	/* 4 tags, 4 threads with 16 bios each in flight: 64 wanted at once */
	run_workers(_i / 2, _i & 1 ? BLK_CFG_POLLED : 0, 1, 4, 4, 8, 16);
}
END_TEST

/* --- fixed buffers ------------------------------------------------------ */

START_TEST(test_fixed_buffers)
{
	bool polled = _i & 1;
	struct blk_dev *dev = xopen(_i / 2, polled ? BLK_CFG_POLLED : 0, 2, 32);
	char *reg = xalloc(4 * MiB), *small = xalloc(16 * 4096);
	uint64_t seed = 99;
	int before = uring_user_bufs(), ret, i;

	ck_assert_int_eq(blk_dev_register_buffer(dev, reg, 4 * MiB), 0);
	if (before >= 0)
		ck_assert_int_eq(uring_user_bufs(), before + 2); /* one per ring */
	/* write from the registered buffer, read into it elsewhere */
	fill_random(reg, 2 * MiB, &seed);
	rw_range(dev, BLK_OP_WRITE, 0, reg, 2 * MiB);
	rw_range(dev, BLK_OP_READ, 0, reg + 2 * MiB, 2 * MiB);
	check_equal(reg + 2 * MiB, reg, 2 * MiB, "fixed buffers");
	/* a range straddling the end of the region falls back to plain I/O */
	ck_assert_int_eq(blk_read(dev, 0, reg + 4 * MiB - 64 * 1024, 64 * 1024, 0), 0);

	/* up to 16 regions, re-registered as a set each time; the 17th is refused */
	for (i = 1; i < 16; i++)
		ck_assert_int_eq(blk_dev_register_buffer(dev, small + (size_t)(i - 1) * 4096, 4096),
		                 0);
	if (before >= 0)
		ck_assert_int_eq(uring_user_bufs(), before + 32);
	ret = blk_dev_register_buffer(dev, small + 15 * 4096, 4096);
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_int_eq(blk_dev_register_buffer(dev, NULL, 4096), -EINVAL);
	/* still working, and still right */
	memset(reg + 2 * MiB, 0, 2 * MiB);
	rw_range(dev, BLK_OP_READ, 0, reg + 2 * MiB, 2 * MiB);
	check_equal(reg + 2 * MiB, reg, 2 * MiB, "fixed buffers after re-registration");
	blk_dev_close(dev);
	free(reg);
	free(small);
}
END_TEST

/* --- modes, read-only, errors ------------------------------------------- */

START_TEST(test_direct_mode)
{
	struct blk_dev *dev;
	int direct;

	dev = xopen(_i, 0, 1, 8);
	direct = fd_is_direct(target_paths[_i]);
	ck_assert_msg(direct >= 0, "%s: the device fd was not found", target_names[_i]);
	switch (_i) {
	case T_RAMFS:
		/* ramfs refuses O_DIRECT: the backend must have fallen back */
		ck_assert_msg(direct == 0, "ramfs: O_DIRECT should have been refused");
		break;
	case T_SHM:
		/* tmpfs takes O_DIRECT since Linux 6.6, refuses it before: both are fine */
		break;
	default:
		ck_assert_msg(direct == 1, "%s: not opened with O_DIRECT", target_names[_i]);
	}
	blk_dev_close(dev);

	dev = xopen(_i, BLK_CFG_NO_DIRECT, 1, 8);
	ck_assert_int_eq(fd_is_direct(target_paths[_i]), 0);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_buffered_roundtrip)
{
	/* BLK_CFG_NO_DIRECT on every target, thread and polled */
	roundtrip(_i / 2, BLK_CFG_NO_DIRECT | (_i & 1 ? BLK_CFG_POLLED : 0), true);
}
END_TEST

START_TEST(test_read_only)
{
	struct blk_dev *dev = xopen(_i, 0, 1, 8);
	char *buf = xalloc(64 * 1024), *got = xalloc(64 * 1024);
	struct blk_dev_info info;
	uint64_t seed = 5;
	struct blk_bio zb;
	struct waiter w;

	fill_random(buf, 64 * 1024, &seed);
	ck_assert_int_eq(blk_write(dev, 2048, buf, 64 * 1024, 0), 0);
	ck_assert_int_eq(blk_flush(dev), 0);
	blk_dev_close(dev);

	dev = xopen(_i, BLK_CFG_READONLY, 1, 8);
	blk_dev_get_info(dev, &info);
	ck_assert(info.read_only);
	ck_assert_int_eq(blk_read(dev, 2048, got, 64 * 1024, 0), 0);
	check_equal(got, buf, 64 * 1024, "read-only read");
	ck_assert_int_eq(blk_write(dev, 2048, got, 4096, 0), -EROFS);
	waiter_init(&w);
	blk_bio_init(&zb, BLK_OP_WRITE_ZEROES, 2048, NULL, 4096, waiter_end_io, &w);
	blk_submit_bio(dev, &zb);
	ck_assert_int_eq(waiter_wait(dev, &w, 1, false, NULL), 0);
	ck_assert_uint_eq(zb.status, BLK_STS_ROFS);
	blk_dev_close(dev);

	/* nothing changed */
	dev = xopen(_i, 0, 1, 8);
	ck_assert_int_eq(blk_read(dev, 2048, got, 64 * 1024, 0), 0);
	check_equal(got, buf, 64 * 1024, "after read-only open");
	blk_dev_close(dev);
	free(buf);
	free(got);
}
END_TEST

START_TEST(test_open_errors)
{
	char path[300], err[512];
	struct blk_dev *dev = NULL;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/no-such-device", workdir);
	err[0] = '\0';
	ret = open_dev(path, 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -ENOENT);
	ck_assert_ptr_null(dev);
	ck_assert_msg(strstr(err, path) && strstr(err, "no such"), "message: '%s'", err);

	err[0] = '\0';
	ret = open_dev(workdir, 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -EISDIR);
	ck_assert_msg(strstr(err, "directory"), "message: '%s'", err);

	err[0] = '\0';
	ret = open_dev("/dev/null", 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -ENOTBLK);
	ck_assert_msg(strstr(err, "character device"), "message: '%s'", err);

	snprintf(path, sizeof(path), "%s/tiny.img", workdir);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 3000), 0);
	close(fd);
	err[0] = '\0';
	ret = open_dev(path, 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_msg(strstr(err, "too small") && strstr(err, "3000"), "message: '%s'", err);
	unlink(path);
	ck_assert_ptr_null(dev);
}
END_TEST

/* --- short transfers ---------------------------------------------------- */

/*
 * Shrink the image under an open device: a read across the new end returns
 * short, the backend completes the prefix and re-issues the rest, which then
 * reads nothing and fails.  The bio before the end completes; the one across
 * it fails with exactly the bytes that were read counted in bio->done.
 */
START_TEST(test_short_read)
{
	bool unaligned = _i & 1, polled = _i & 2;
	char path[300];
	struct blk_dev *dev = NULL;
	char err[512], *pat = xalloc(256 * 1024), *mem = xalloc(256 * 1024 + 8);
	char *got = unaligned ? mem + 1 : mem;
	uint64_t seed = 3, end = 4 * MiB;
	struct blk_bio a, b;
	struct blk_plug plug;
	struct waiter w;
	int fd;

	snprintf(path, sizeof(path), "%s/short.img", workdir);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8 * MiB), 0);
	ck_assert_int_eq(open_dev(path, polled ? BLK_CFG_POLLED : 0, 1, 8, &dev, err, sizeof(err)),
	                 0);
	fill_random(pat, 256 * 1024, &seed);
	ck_assert_int_eq(blk_write(dev, (end - 64 * 1024) >> 9, pat, 128 * 1024, 0), 0);
	/* the file now ends 8 KiB into the second bio */
	ck_assert_int_eq(ftruncate(fd, (off_t)end + 8192), 0);

	waiter_init(&w);
	/* contiguous under a plug: one request of 128 KiB, 72 KiB of it readable */
	blk_bio_init(&a, BLK_OP_READ, (end - 64 * 1024) >> 9, got, 64 * 1024, waiter_end_io, &w);
	blk_bio_init(&b, BLK_OP_READ, end >> 9, got + 64 * 1024, 64 * 1024, waiter_end_io, &w);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a);
	blk_submit_bio(dev, &b);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_uint_eq(a.status, BLK_STS_OK);
	ck_assert_uint_eq(a.done, a.len);
	ck_assert_uint_eq(b.status, BLK_STS_IOERR);
	ck_assert_uint_eq(b.done, 8192);
	check_equal(got, pat, 64 * 1024 + 8192, "short read prefix");
	blk_dev_close(dev);
	close(fd);
	unlink(path);
	free(pat);
	free(mem);
}
END_TEST

/* read_sync/write_sync on every target: unaligned ranges and memory. */
START_TEST(test_sync_io)
{
	struct blk_dev *dev = xopen(_i, 0, 1, 8);
	char *pat = xalloc(64 * 1024), *got = xalloc(64 * 1024 + 16), *b = got + 9;
	uint64_t seed = 21 + (uint64_t)_i, bad = 0;

	fill_random(pat, 64 * 1024, &seed);
	rw_range(dev, BLK_OP_WRITE, 1 * MiB, pat, 64 * 1024);
	ck_assert_int_eq(dev->ops->read_sync(dev, 1 * MiB + 777, b, 20000, &bad), 0);
	check_equal(b, pat + 777, 20000, "read_sync");
	memset(b, 0x3c, 5000);
	memset(pat + 4096 + 513, 0x3c, 5000);
	ck_assert_int_eq(dev->ops->write_sync(dev, 1 * MiB + 4096 + 513, b, 5000), 0);
	ck_assert_int_eq(dev->ops->flush_sync(dev), 0);
	memset(got, 0, 64 * 1024);
	rw_range(dev, BLK_OP_READ, 1 * MiB, got, 64 * 1024);
	check_equal(got, pat, 64 * 1024, "after write_sync");
	blk_dev_close(dev);
	free(pat);
	free(got);
}
END_TEST

/*
 * Memory that is 512-byte aligned (and lbs-multiple segments) but not page
 * aligned, which zram (4 KiB blocks, dma alignment 512) must not be given:
 * it reads whole pages into the pages of such a buffer, before and past it.
 * Async bios (one and several segments), read_sync and writes from such
 * memory must move exactly the asked bytes: guard bytes on both sides.
 */
#define SUB_LEN   (64u * 1024)
#define SUB_AT    (1 * MiB)
#define SUB_GUARD 0xa7

/* Every byte of [big, big + total) outside the @n segments still holds the guard. */
static void check_guards(const unsigned char *big, size_t total, const struct iovec *seg,
                         unsigned n, const char *what, unsigned moff)
{
	size_t i;
	unsigned j;

	for (i = 0; i < total; i++) {
		for (j = 0; j < n; j++) {
			size_t s0 = (size_t)((const unsigned char *)seg[j].iov_base - big);

			if (i >= s0 && i < s0 + seg[j].iov_len)
				break;
		}
		if (j < n)
			continue;
		ck_assert_msg(big[i] == SUB_GUARD,
		              "%s (memory at page offset %u): byte %zu of the area, outside the "
		              "buffer, overwritten",
		              what, moff, i);
	}
}

START_TEST(test_subpage_memory)
{
	static const unsigned offs[] = {512, 1024, 2048, 3584, 8};
	bool polled = _i & 1;
	int t = _i / 2;
	struct blk_dev *dev = xopen(t, polled ? BLK_CFG_POLLED : 0, 1, 16);
	unsigned lbs = dev_lbs(dev), k;
	size_t total = SUB_LEN + 3 * 4096;
	unsigned char *pat = xalloc(SUB_LEN), *got = xalloc(SUB_LEN), *big = xalloc(total);
	uint64_t seed = 77 + (uint64_t)_i, bad = 0;

	fill_random(pat, SUB_LEN, &seed);
	rw_range(dev, BLK_OP_WRITE, SUB_AT, pat, SUB_LEN);
	for (k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		unsigned off = offs[k];
		unsigned char *buf = big + off;
		struct tbio tb;
		struct waiter w;
		uint32_t cut = (SUB_LEN / 4 / lbs) * lbs;

		/* one bio, one segment */
		memset(big, SUB_GUARD, total);
		ck_assert_int_eq(blk_read(dev, SUB_AT >> 9, buf, SUB_LEN, 0), 0);
		check_guards(big, total, &(struct iovec){buf, SUB_LEN}, 1, "read", off);
		check_equal(buf, pat, SUB_LEN, "read into sub-page memory");

		/* one bio, three segments of whole blocks, most starting off a page */
		memset(big, SUB_GUARD, total);
		memset(&tb, 0, sizeof(tb));
		waiter_init(&w);
		tb.bio.op = BLK_OP_READ;
		tb.bio.sector = SUB_AT >> 9;
		tb.bio.len = SUB_LEN;
		tb.bio.end_io = waiter_end_io;
		tb.bio.private = &w;
		tb.bio.iov = tb.iov;
		tb.bio.nr_segs = 3;
		tb.iov[0] = (struct iovec){buf, cut};
		tb.iov[1] = (struct iovec){buf + cut + 512, cut};
		tb.iov[2] = (struct iovec){buf + 2 * cut + 1024, SUB_LEN - 2 * cut};
		blk_submit_bio(dev, &tb.bio);
		ck_assert_int_eq(waiter_wait(dev, &w, 1, polled, NULL), 0);
		ck_assert_msg(w.errors == 0, "3-segment read: status %u", w.first_err);
		check_equal(tb.iov[0].iov_base, pat, cut, "segment 0");
		check_equal(tb.iov[1].iov_base, pat + cut, cut, "segment 1");
		check_equal(tb.iov[2].iov_base, pat + 2 * cut, SUB_LEN - 2 * cut, "segment 2");
		check_guards(big, total, tb.iov, 3, "3-segment read", off);

		/* the synchronous path */
		memset(big, SUB_GUARD, total);
		ck_assert_int_eq(dev->ops->read_sync(dev, SUB_AT, buf, SUB_LEN, &bad), 0);
		check_guards(big, total, &(struct iovec){buf, SUB_LEN}, 1, "read_sync", off);
		check_equal(buf, pat, SUB_LEN, "read_sync into sub-page memory");

		/* a write from such memory stores exactly its bytes */
		fill_random(pat, SUB_LEN, &seed);
		memset(big, SUB_GUARD, total);
		memcpy(buf, pat, SUB_LEN);
		ck_assert_int_eq(blk_write(dev, SUB_AT >> 9, buf, SUB_LEN, 0), 0);
		check_guards(big, total, &(struct iovec){buf, SUB_LEN}, 1, "write", off);
		memset(got, 0, SUB_LEN);
		rw_range(dev, BLK_OP_READ, SUB_AT, got, SUB_LEN);
		check_equal(got, pat, SUB_LEN, "written from sub-page memory");
	}
	blk_dev_close(dev);
	free(pat);
	free(got);
	free(big);
}
END_TEST

void uring_io_add(TCase *open, TCase *roundtrip, TCase *threads)
{
	tcase_add_test(open, test_open_errors);
	tcase_add_loop_test(open, test_direct_mode, 0, T_MAX);

	tcase_add_loop_test(roundtrip, test_roundtrip_thread, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_roundtrip_polled, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_roundtrip_unaligned, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_buffered_roundtrip, 0, 2 * T_MAX);
	tcase_add_loop_test(roundtrip, test_zeroes_thread, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_zeroes_polled, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_read_only, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_fixed_buffers, 0, 2 * T_MAX);
	tcase_add_loop_test(roundtrip, test_short_read, 0, 4);
	tcase_add_loop_test(roundtrip, test_sync_io, 0, T_MAX);
	tcase_add_loop_test(roundtrip, test_subpage_memory, 0, 2 * T_MAX);

	tcase_add_loop_test(threads, test_threads_one_queue, 0, 2 * T_MAX);
	tcase_add_loop_test(threads, test_threads_two_queues, 0, 2 * T_MAX);
	tcase_add_loop_test(threads, test_depth_exhaustion, 0, 2 * T_MAX);
}
