/* SPDX-License-Identifier: MIT */
/*
 * test_badblocks: the poison table (merge, clear, check, lookup, scale,
 * concurrent readers) here; its emulation file (parse errors, store/load
 * round trip, atomic replacement) and the real badblocks sources (libpmem2 on
 * a plain file, sysfs trees, loop devices) in badblocks_files.c.  Exits 0
 * when every test passes.
 */
#include "badblocks.h"
#include "check_run.h"

void expect_table(struct blk_badblocks *bb, const struct blk_range *want, unsigned n)
{
	struct blk_range *got;
	int cnt = blk_bb_snapshot(bb, &got);

	ck_assert_int_eq(cnt, (int)n);
	ck_assert_uint_eq(atomic_load(&bb->nr), n);
	ck_assert(blk_bb_empty(bb) == (n == 0));
	for (unsigned i = 0; i < n; i++)
		ck_assert_msg(got[i].sector == want[i].sector && got[i].nr == want[i].nr,
		              "range %u: got %" PRIu64 "+%" PRIu64 ", want %" PRIu64 "+%" PRIu64, i,
		              got[i].sector, got[i].nr, want[i].sector, want[i].nr);
	free(got);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* ------------------------------------------------------------------ table */

START_TEST(test_add_disjoint)
{
	struct blk_badblocks bb;

	blk_bb_init(&bb);
	ck_assert(blk_bb_empty(&bb));
	expect_table(&bb, NULL, 0);
	ck_assert_int_eq(blk_bb_add(&bb, 100, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 10, 5), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 1000, 1), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 200, 50), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 0, 1), 0);
	EXPECT(&bb, R(0, 1), R(10, 5), R(100, 10), R(200, 50), R(1000, 1));
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_add_overlap)
{
	struct blk_badblocks bb;

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 100, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 105, 10), 0); /* tail overlap */
	EXPECT(&bb, R(100, 15));
	ck_assert_int_eq(blk_bb_add(&bb, 95, 10), 0); /* head overlap */
	EXPECT(&bb, R(95, 20));
	ck_assert_int_eq(blk_bb_add(&bb, 100, 2), 0); /* contained */
	EXPECT(&bb, R(95, 20));
	ck_assert_int_eq(blk_bb_add(&bb, 95, 20), 0); /* identical */
	EXPECT(&bb, R(95, 20));
	ck_assert_int_eq(blk_bb_add(&bb, 200, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 300, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 400, 10), 0);
	/* covers several ranges and spills past both ends */
	ck_assert_int_eq(blk_bb_add(&bb, 150, 255), 0);
	EXPECT(&bb, R(95, 20), R(150, 260));
	ck_assert_int_eq(blk_bb_add(&bb, 0, 1000), 0); /* swallows everything */
	EXPECT(&bb, R(0, 1000));
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_add_adjacent)
{
	struct blk_badblocks bb;

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 100, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 110, 5), 0); /* touches the end */
	EXPECT(&bb, R(100, 15));
	ck_assert_int_eq(blk_bb_add(&bb, 90, 10), 0); /* touches the start */
	EXPECT(&bb, R(90, 25));
	ck_assert_int_eq(blk_bb_add(&bb, 120, 5), 0); /* one sector gap: stays apart */
	EXPECT(&bb, R(90, 25), R(120, 5));
	ck_assert_int_eq(blk_bb_add(&bb, 115, 5), 0); /* fills the gap: bridges both */
	EXPECT(&bb, R(90, 35));
	ck_assert_int_eq(blk_bb_add(&bb, 0, 1), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 1, 1), 0);
	EXPECT(&bb, R(0, 2), R(90, 35));
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_add_invalid)
{
	struct blk_badblocks bb;

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 5, 0), 0);
	expect_table(&bb, NULL, 0);
	ck_assert_int_eq(blk_bb_add(&bb, UINT64_MAX, 1), -EINVAL);
	ck_assert_int_eq(blk_bb_add(&bb, 10, UINT64_MAX), -EINVAL);
	ck_assert_int_eq(blk_bb_add(&bb, UINT64_MAX - 5, 6), -EINVAL);
	expect_table(&bb, NULL, 0);
	/* ending exactly at the top of the sector space is fine */
	ck_assert_int_eq(blk_bb_add(&bb, UINT64_MAX - 5, 5), 0);
	ck_assert_int_eq(blk_bb_add(&bb, UINT64_MAX - 10, 5), 0);
	EXPECT(&bb, R(UINT64_MAX - 10, 10));
	ck_assert_int_eq(blk_bb_clear(&bb, UINT64_MAX - 1, 2), -EINVAL);
	ck_assert_int_eq(blk_bb_clear(&bb, 3, 0), 0);
	EXPECT(&bb, R(UINT64_MAX - 10, 10));
	ck_assert_int_eq(blk_bb_clear(&bb, UINT64_MAX - 1, 1), 0);
	EXPECT(&bb, R(UINT64_MAX - 10, 9));
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_clear)
{
	struct blk_badblocks bb;

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 100, 100), 0);
	ck_assert_int_eq(blk_bb_clear(&bb, 0, 100), 0); /* touches, clears nothing */
	ck_assert_int_eq(blk_bb_clear(&bb, 200, 50), 0);
	EXPECT(&bb, R(100, 100));
	ck_assert_int_eq(blk_bb_clear(&bb, 150, 10), 0); /* split in the middle */
	EXPECT(&bb, R(100, 50), R(160, 40));
	ck_assert_int_eq(blk_bb_clear(&bb, 90, 15), 0); /* trim the head */
	EXPECT(&bb, R(105, 45), R(160, 40));
	ck_assert_int_eq(blk_bb_clear(&bb, 199, 10), 0); /* trim the tail */
	EXPECT(&bb, R(105, 45), R(160, 39));
	ck_assert_int_eq(blk_bb_clear(&bb, 150, 10), 0); /* exactly the hole */
	EXPECT(&bb, R(105, 45), R(160, 39));
	ck_assert_int_eq(blk_bb_clear(&bb, 105, 1), 0); /* first sector */
	ck_assert_int_eq(blk_bb_clear(&bb, 198, 1), 0); /* last sector */
	EXPECT(&bb, R(106, 44), R(160, 38));

	ck_assert_int_eq(blk_bb_add(&bb, 300, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 400, 10), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 500, 10), 0);
	/* across several: trims 160+38 and 500+10, drops the three between */
	ck_assert_int_eq(blk_bb_clear(&bb, 170, 335), 0);
	EXPECT(&bb, R(106, 44), R(160, 10), R(505, 5));
	ck_assert_int_eq(blk_bb_clear(&bb, 160, 10), 0); /* exactly one whole range */
	EXPECT(&bb, R(106, 44), R(505, 5));
	ck_assert_int_eq(blk_bb_clear(&bb, 0, UINT64_MAX), 0);
	expect_table(&bb, NULL, 0);
	ck_assert_int_eq(blk_bb_clear(&bb, 0, 10), 0); /* empty table */
	expect_table(&bb, NULL, 0);
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_check_edges)
{
	struct blk_badblocks bb;
	uint64_t first = 0;

	blk_bb_init(&bb);
	ck_assert(!blk_bb_check(&bb, 0, UINT64_MAX, &first));
	ck_assert_int_eq(blk_bb_add(&bb, 100, 10), 0); /* [100, 110) */
	ck_assert_int_eq(blk_bb_add(&bb, 200, 1), 0);

	ck_assert(!blk_bb_check(&bb, 90, 10, &first)); /* [90, 100): ends right before */
	ck_assert(blk_bb_check(&bb, 90, 11, &first));  /* [90, 101) */
	ck_assert_uint_eq(first, 100);
	ck_assert(blk_bb_check(&bb, 99, 2, &first));
	ck_assert_uint_eq(first, 100);
	ck_assert(blk_bb_check(&bb, 100, 1, &first));
	ck_assert_uint_eq(first, 100);
	ck_assert(blk_bb_check(&bb, 105, 1, &first));
	ck_assert_uint_eq(first, 105);
	ck_assert(blk_bb_check(&bb, 109, 1, &first)); /* last bad sector */
	ck_assert_uint_eq(first, 109);
	ck_assert(blk_bb_check(&bb, 109, 100, &first));
	ck_assert_uint_eq(first, 109);
	ck_assert(!blk_bb_check(&bb, 110, 90, &first)); /* [110, 200): the gap */
	ck_assert(blk_bb_check(&bb, 110, 91, &first));
	ck_assert_uint_eq(first, 200);
	ck_assert(!blk_bb_check(&bb, 201, 1000, &first));
	ck_assert(!blk_bb_check(&bb, 100, 0, &first)); /* empty query */
	ck_assert(blk_bb_check(&bb, 0, UINT64_MAX, &first));
	ck_assert_uint_eq(first, 100);
	ck_assert(blk_bb_check(&bb, 150, UINT64_MAX, &first)); /* wraps: clipped */
	ck_assert_uint_eq(first, 200);
	ck_assert(blk_bb_check(&bb, 105, 1, NULL));
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_lookup)
{
	struct blk_badblocks bb;
	struct blk_range out[8];
	unsigned total = 99;

	blk_bb_init(&bb);
	ck_assert_uint_eq(blk_bb_lookup(&bb, 0, 1000, out, 8, &total), 0);
	ck_assert_uint_eq(total, 0);
	for (unsigned i = 0; i < 6; i++)
		ck_assert_int_eq(blk_bb_add(&bb, 100 * (i + 1), 10), 0); /* 100..600 */

	/* clipped at both ends */
	ck_assert_uint_eq(blk_bb_lookup(&bb, 105, 100, out, 8, &total), 2);
	ck_assert_uint_eq(total, 2);
	ck_assert(out[0].sector == 105 && out[0].nr == 5);
	ck_assert(out[1].sector == 200 && out[1].nr == 5);
	/* inside one range */
	ck_assert_uint_eq(blk_bb_lookup(&bb, 302, 3, out, 8, &total), 1);
	ck_assert(out[0].sector == 302 && out[0].nr == 3);
	/* nothing in a gap; edges exclusive */
	ck_assert_uint_eq(blk_bb_lookup(&bb, 110, 90, out, 8, &total), 0);
	ck_assert_uint_eq(total, 0);
	/* max smaller than total */
	ck_assert_uint_eq(blk_bb_lookup(&bb, 0, 10000, out, 4, &total), 4);
	ck_assert_uint_eq(total, 6);
	for (unsigned i = 0; i < 4; i++)
		ck_assert(out[i].sector == 100 * (i + 1) && out[i].nr == 10);
	/* counting only */
	ck_assert_uint_eq(blk_bb_lookup(&bb, 0, UINT64_MAX, NULL, 0, &total), 0);
	ck_assert_uint_eq(total, 6);
	ck_assert_uint_eq(blk_bb_lookup(&bb, 250, UINT64_MAX, out, 8, NULL), 4);
	ck_assert(out[0].sector == 300 && out[3].sector == 600);
	ck_assert_uint_eq(blk_bb_lookup(&bb, 100, 0, out, 8, &total), 0);
	ck_assert_uint_eq(total, 0);
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_snapshot)
{
	struct blk_badblocks bb;
	struct blk_range *snap = (struct blk_range *)&bb;

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_snapshot(&bb, &snap), 0);
	ck_assert_ptr_null(snap);
	ck_assert_int_eq(blk_bb_add(&bb, 7, 3), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 1, 1), 0);
	ck_assert_int_eq(blk_bb_snapshot(&bb, &snap), 2);
	ck_assert(snap[0].sector == 1 && snap[0].nr == 1 && snap[1].sector == 7 && snap[1].nr == 3);
	/* a copy: changing the table leaves it alone */
	ck_assert_int_eq(blk_bb_clear(&bb, 0, 100), 0);
	ck_assert(snap[1].sector == 7 && snap[1].nr == 3);
	free(snap);
	blk_bb_destroy(&bb);
}
END_TEST

/* blk_range_find(): the search a caller runs over its own copy of the table (fsck). */
START_TEST(test_range_find)
{
	const struct blk_range r[] = {{10, 2}, {20, 5}, {100, 1}};

	ck_assert_uint_eq(blk_range_find(r, 0, 0), 0);
	ck_assert_uint_eq(blk_range_find(r, 3, 0), 0);
	ck_assert_uint_eq(blk_range_find(r, 3, 11), 0); /* inside the first */
	ck_assert_uint_eq(blk_range_find(r, 3, 12), 1); /* just past it */
	ck_assert_uint_eq(blk_range_find(r, 3, 24), 1);
	ck_assert_uint_eq(blk_range_find(r, 3, 25), 2);
	ck_assert_uint_eq(blk_range_find(r, 3, 100), 2);
	ck_assert_uint_eq(blk_range_find(r, 3, 101), 3);
	ck_assert_uint_eq(blk_range_find(r, 3, UINT64_MAX), 3);
}
END_TEST

/* ------------------------------------------------------------------ scale */

#define SCALE_N 100000u

/* Range i: [i * 8, i * 8 + 1 + i % 4): never adjacent to its neighbours. */
static inline uint64_t scale_len(unsigned i)
{
	return 1 + i % 4;
}

static void shuffle(unsigned *v, unsigned n)
{
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j = (unsigned)(rng() % (i + 1)), t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
}

START_TEST(test_scale_100k)
{
	struct blk_badblocks bb;
	struct blk_range *snap, out[4];
	unsigned *order = malloc(SCALE_N * sizeof(*order)), total;
	uint64_t first;
	int n;

	ck_assert_ptr_nonnull(order);
	for (unsigned i = 0; i < SCALE_N; i++)
		order[i] = i;
	shuffle(order, SCALE_N);
	blk_bb_init(&bb);
	for (unsigned k = 0; k < SCALE_N; k++)
		ck_assert_int_eq(blk_bb_add(&bb, order[k] * 8ull, scale_len(order[k])), 0);

	n = blk_bb_snapshot(&bb, &snap);
	ck_assert_int_eq(n, (int)SCALE_N);
	for (unsigned i = 0; i < SCALE_N; i++)
		ck_assert(snap[i].sector == i * 8ull && snap[i].nr == scale_len(i));
	free(snap);

	shuffle(order, SCALE_N);
	for (unsigned k = 0; k < SCALE_N; k++) {
		unsigned i = order[k];
		uint64_t s = i * 8ull, len = scale_len(i);

		ck_assert(blk_bb_check(&bb, s, 8, &first) && first == s);
		ck_assert(blk_bb_check(&bb, s + len - 1, 1, &first) && first == s + len - 1);
		ck_assert(!blk_bb_check(&bb, s + len, 8 - len, NULL)); /* the gap after it */
		ck_assert_uint_eq(blk_bb_lookup(&bb, s, 8, out, 4, &total), 1);
		ck_assert(out[0].sector == s && out[0].nr == len && total == 1);
	}
	ck_assert_uint_eq(blk_bb_lookup(&bb, 0, UINT64_MAX, NULL, 0, &total), 0);
	ck_assert_uint_eq(total, SCALE_N);

	/*
	 * Clear every odd range: 5000 in random order, the rest from the top
	 * down (which moves little: memmove is slow under AddressSanitizer).
	 */
	for (unsigned k = 0, done = 0; k < SCALE_N && done < 5000; k++) {
		if (order[k] & 1) {
			ck_assert_int_eq(blk_bb_clear(&bb, order[k] * 8ull, 8), 0);
			order[k] = 0; /* cleared */
			done++;
		}
	}
	for (unsigned i = SCALE_N - 1; i > 0; i--)
		if (i & 1)
			ck_assert_int_eq(blk_bb_clear(&bb, i * 8ull, 8), 0);
	n = blk_bb_snapshot(&bb, &snap);
	ck_assert_int_eq(n, (int)SCALE_N / 2);
	for (unsigned i = 0; i < SCALE_N / 2; i++)
		ck_assert(snap[i].sector == 16ull * i && snap[i].nr == scale_len(2 * i));
	free(snap);

	/* one range over everything merges the lot */
	ck_assert_int_eq(blk_bb_add(&bb, 0, SCALE_N * 8ull), 0);
	EXPECT(&bb, R(0, SCALE_N * 8ull));
	blk_bb_destroy(&bb);
	free(order);
}
END_TEST

/* ------------------------------------------------------------ concurrency */

/*
 * Stable ranges [k * 1024, k * 1024 + 16) never change and [k * 1024 + 16,
 * k * 1024 + 100) and [k * 1024 + 500, k * 1024 + 1024) stay clean; the writer
 * adds and clears inside [k * 1024 + 100, k * 1024 + 400), moving the stable
 * ranges around the array (and reallocating it) under the readers.
 */
#define CONC_SLOTS   64u
#define CONC_READERS 4
#define CONC_OPS     20000u

struct conc {
	struct blk_badblocks bb;
	atomic_bool stop;
	atomic_ulong errors;
	atomic_ulong passes;
};

static void *conc_reader(void *arg)
{
	struct conc *c = arg;
	struct blk_range out[4];
	unsigned long errors = 0;
	unsigned total;
	uint64_t first;

	do {
		for (unsigned k = 0; k < CONC_SLOTS; k++) {
			uint64_t base = k * 1024ull;

			if (!blk_bb_check(&c->bb, base, 16, &first) || first != base)
				errors++;
			if (!blk_bb_check(&c->bb, base + 10, 100, &first) || first != base + 10)
				errors++;
			if (blk_bb_check(&c->bb, base + 16, 84, NULL))
				errors++;
			if (blk_bb_check(&c->bb, base + 500, 524, NULL))
				errors++;
			if (blk_bb_lookup(&c->bb, base, 16, out, 4, &total) != 1 || total != 1 ||
			    out[0].sector != base || out[0].nr != 16)
				errors++;
		}
		atomic_fetch_add(&c->passes, 1);
	} while (!atomic_load(&c->stop));
	atomic_fetch_add(&c->errors, errors);
	return NULL;
}

static void *conc_writer(void *arg)
{
	struct conc *c = arg;
	unsigned long errors = 0;

	for (unsigned op = 0; op < CONC_OPS; op++) {
		uint64_t k = rng() % CONC_SLOTS, off = 100 + rng() % 290, len = 1 + rng() % 10;

		if (rng() % 3 == 0) {
			if (blk_bb_clear(&c->bb, k * 1024 + off, len))
				errors++;
		} else if (blk_bb_add(&c->bb, k * 1024 + off, len)) {
			errors++;
		}
	}
	atomic_fetch_add(&c->errors, errors);
	atomic_store(&c->stop, true);
	return NULL;
}

START_TEST(test_concurrent)
{
	pthread_t readers[CONC_READERS], writer;
	struct conc c;
	unsigned total;

	blk_bb_init(&c.bb);
	atomic_init(&c.stop, false);
	atomic_init(&c.errors, 0);
	atomic_init(&c.passes, 0);
	for (unsigned k = 0; k < CONC_SLOTS; k++)
		ck_assert_int_eq(blk_bb_add(&c.bb, k * 1024ull, 16), 0);
	for (int i = 0; i < CONC_READERS; i++)
		ck_assert_int_eq(pthread_create(&readers[i], NULL, conc_reader, &c), 0);
	ck_assert_int_eq(pthread_create(&writer, NULL, conc_writer, &c), 0);
	pthread_join(writer, NULL);
	for (int i = 0; i < CONC_READERS; i++)
		pthread_join(readers[i], NULL);

	ck_assert_uint_eq(atomic_load(&c.errors), 0);
	ck_assert_uint_ge(atomic_load(&c.passes), CONC_READERS);
	/* the writer did change the table: more than the stable ranges remain */
	blk_bb_lookup(&c.bb, 0, UINT64_MAX, NULL, 0, &total);
	ck_assert_uint_gt(total, CONC_SLOTS);
	for (unsigned k = 0; k < CONC_SLOTS; k++) {
		struct blk_range out[2];

		ck_assert_uint_eq(blk_bb_lookup(&c.bb, k * 1024ull, 100, out, 2, &total), 1);
		ck_assert(out[0].sector == k * 1024ull && out[0].nr == 16);
	}
	blk_bb_destroy(&c.bb);
}
END_TEST

static Suite *badblocks_suite(void)
{
	Suite *s = suite_create("badblocks");
	TCase *tc;

	tc = tcase_create("table");
	tcase_add_test(tc, test_add_disjoint);
	tcase_add_test(tc, test_add_overlap);
	tcase_add_test(tc, test_add_adjacent);
	tcase_add_test(tc, test_add_invalid);
	tcase_add_test(tc, test_clear);
	tcase_add_test(tc, test_check_edges);
	tcase_add_test(tc, test_lookup);
	tcase_add_test(tc, test_snapshot);
	tcase_add_test(tc, test_range_find);
	suite_add_tcase(s, tc);

	tc = tcase_create("scale");
	tcase_add_test(tc, test_scale_100k);
	tcase_add_test(tc, test_concurrent);
	suite_add_tcase(s, tc);

	suite_add_tcase(s, badblocks_files_tcase());
	return s;
}

int main(void)
{
	return check_run(badblocks_suite());
}
