/* SPDX-License-Identifier: MIT */
/*
 * Lookups in the poison table without its lock (blk/badblocks.c): the span
 * test and the chunk summary must never answer "no poison" for a range that
 * holds some.  A model (one byte per sector) is checked against
 * blk_bb_check after every one of thousands of random adds and clears, with
 * and without a unit of poison; and the case that once left the span stale:
 * a range grown at the front of the table by an add that touches it.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "blk_internal.h"
#include "check_run.h"

#define NR_SECTORS (1ull << 22) /* 2 GiB: 128 chunks of 16 MiB */

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

/* Does the model hold poison in [s, s + n)?  The first such sector in *first. */
static bool model_hit(const unsigned char *m, uint64_t s, uint64_t n, uint64_t *first)
{
	for (uint64_t i = s; i < s + n && i < NR_SECTORS; i++)
		if (m[i]) {
			*first = i;
			return true;
		}
	return false;
}

static void model_set(unsigned char *m, uint64_t s, uint64_t n, uint32_t unit, bool on)
{
	uint64_t e = s + n;

	s &= ~(uint64_t)(unit - 1);
	e = (e + unit - 1) & ~(uint64_t)(unit - 1);
	memset(m + s, on, e > NR_SECTORS ? NR_SECTORS - s : e - s);
}

START_TEST(test_random_model)
{
	uint32_t unit = _i ? 8 : 1;
	unsigned char *m = calloc(NR_SECTORS, 1);
	struct blk_badblocks bb;

	ck_assert_ptr_nonnull(m);
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_set_size(&bb, NR_SECTORS), 0);
	blk_bb_set_unit(&bb, unit);
	for (unsigned op = 0; op < 3000; op++) {
		/* clustered so that ranges touch, merge and split */
		uint64_t s = rnd(64) * (NR_SECTORS / 64) + rnd(200000);
		uint64_t n = 1 + rnd(op % 3 ? 64 : 100000);
		bool add = rnd(3) != 0;

		if (s >= NR_SECTORS)
			continue;
		if (n > NR_SECTORS - s)
			n = NR_SECTORS - s;
		ck_assert_int_eq(add ? blk_bb_add(&bb, s, n) : blk_bb_clear(&bb, s, n), 0);
		model_set(m, s, n, unit, add);
		for (unsigned q = 0; q < 50; q++) {
			uint64_t qs = q % 2 ? s + rnd(n + 64) - rnd(64) : rnd(NR_SECTORS);
			uint64_t qn = 1 + rnd(256), want_first = 0, got_first = 0;
			bool want, got;

			if (qs >= NR_SECTORS)
				qs = rnd(NR_SECTORS);
			want = model_hit(m, qs, qn, &want_first);
			got = blk_bb_check(&bb, qs, qn, &got_first);
			ck_assert_msg(want == got, "op %u: [%llu, +%llu): model %d, table %d", op,
			              (unsigned long long)qs, (unsigned long long)qn, want, got);
			if (want)
				ck_assert_uint_eq(got_first, want_first);
		}
	}
	blk_bb_destroy(&bb);
	free(m);
}
END_TEST

START_TEST(test_grown_at_the_front)
{
	struct blk_badblocks bb;
	uint64_t first;

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_set_size(&bb, NR_SECTORS), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 100, 8), 0);
	/* touches the first range from below: one range [92, 108) */
	ck_assert_int_eq(blk_bb_add(&bb, 92, 8), 0);
	ck_assert(blk_bb_check(&bb, 95, 1, &first));
	ck_assert_uint_eq(first, 95);
	/* and from above at the last range */
	ck_assert_int_eq(blk_bb_add(&bb, 108, 4), 0);
	ck_assert(blk_bb_check(&bb, 110, 1, &first));
	blk_bb_destroy(&bb);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bb_lookup");
	TCase *tc = tcase_create("bb_lookup");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_random_model, 0, 2);
	tcase_add_test(tc, test_grown_at_the_front);
	suite_add_tcase(s, tc);
	return check_run(s);
}
