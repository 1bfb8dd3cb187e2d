/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the tag allocator (blk/tags.c, internal API of blk_internal.h):
 * map geometry and valid masks for depths 1..4096, every tag obtainable exactly
 * once, batch allocation (distinct, one word, never more than asked), freeing
 * by mask, the per-thread hint, ownership under contention (4 threads on a
 * depth-32 map, single and batch allocation), and the waiters/wake_seq
 * protocol that puts a submitter to sleep on a full map and wakes it when a
 * tag is freed.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blk_internal.h"
#include "check_run.h"

static const unsigned test_depths[] = {1, 7, 64, 128, 1000, 4096};
#define NR_DEPTHS (sizeof(test_depths) / sizeof(test_depths[0]))

static unsigned popcount64(uint64_t x)
{
	return (unsigned)__builtin_popcountll(x);
}

/* Geometry invariants every map must satisfy. */
static void check_geometry(const struct blk_tags *tags, unsigned depth)
{
	unsigned w, total = 0;

	ck_assert_uint_eq(tags->depth, depth);
	ck_assert_uint_ge(tags->bits_per_word, 32);
	ck_assert_uint_le(tags->bits_per_word, 64);
	ck_assert_uint_eq(tags->bits_per_word & (tags->bits_per_word - 1), 0);
	ck_assert_uint_eq(1u << tags->shift, tags->bits_per_word);
	ck_assert_uint_eq(tags->nr_words, (depth + tags->bits_per_word - 1) / tags->bits_per_word);
	ck_assert_uint_le(tags->nr_words, 64); /* the completion path keeps one bit per word */
	ck_assert_uint_eq((uintptr_t)tags->words % BLK_CACHELINE, 0);
	for (w = 0; w < tags->nr_words; w++) {
		uint64_t valid = tags->words[w].valid;

		/* contiguous low bits, no bit beyond the word size */
		ck_assert_uint_ne(valid, 0);
		ck_assert_uint_eq(valid & (valid + 1), 0);
		ck_assert_uint_le(popcount64(valid), tags->bits_per_word);
		if (w + 1 < tags->nr_words)
			ck_assert_uint_eq(popcount64(valid), tags->bits_per_word);
		ck_assert_uint_eq(atomic_load(&tags->words[w].busy), 0);
		total += popcount64(valid);
	}
	ck_assert_uint_eq(total, depth);
	for (w = 0; w < depth; w++)
		ck_assert_uint_eq(tags->rqs[w].tag, w);
}

START_TEST(test_init_invalid)
{
	struct blk_tags tags;

	ck_assert_int_eq(blk_tags_init(&tags, 0), -EINVAL);
	ck_assert_int_eq(blk_tags_init(&tags, BLK_MAX_DEPTH + 1), -EINVAL);
}
END_TEST

/* Every tag obtainable exactly once, then -1; putting them all back makes the map idle. */
START_TEST(test_init_and_drain)
{
	unsigned depth = test_depths[_i];
	struct blk_tags tags;
	unsigned char *seen;
	unsigned hint = 0, n, t;
	int tag;

	ck_assert_int_eq(blk_tags_init(&tags, depth), 0);
	check_geometry(&tags, depth);
	ck_assert(blk_tags_idle(&tags));

	seen = calloc(depth, 1);
	ck_assert_ptr_nonnull(seen);
	for (n = 0; n < depth; n++) {
		tag = blk_tag_get(&tags, &hint);
		ck_assert_int_ge(tag, 0);
		ck_assert_int_lt(tag, (int)depth);
		ck_assert_msg(!seen[tag], "depth %u: tag %d handed out twice", depth, tag);
		seen[tag] = 1;
		ck_assert_uint_lt(hint, tags.nr_words);
		ck_assert(!blk_tags_idle(&tags));
	}
	ck_assert_int_eq(blk_tag_get(&tags, &hint), -1);
	hint = tags.nr_words - 1;
	ck_assert_int_eq(blk_tag_get(&tags, &hint), -1);
	ck_assert_uint_eq(blk_tag_get_batch(&tags, &hint, 8, &t), 0);

	/* one tag back: exactly that one comes out again */
	blk_tag_put(&tags, depth / 2);
	ck_assert_int_eq(blk_tag_get(&tags, &hint), (int)(depth / 2));
	ck_assert_int_eq(blk_tag_get(&tags, &hint), -1);

	for (t = 0; t < depth; t++)
		blk_tag_put(&tags, t);
	ck_assert(blk_tags_idle(&tags));
	free(seen);
	blk_tags_exit(&tags);
	ck_assert_ptr_null(tags.words);
	ck_assert_ptr_null(tags.rqs);
}
END_TEST

/* Whatever the starting hint, the search covers every word once. */
START_TEST(test_every_hint_drains)
{
	unsigned depth = test_depths[_i];
	struct blk_tags tags;
	unsigned start, n, t;

	ck_assert_int_eq(blk_tags_init(&tags, depth), 0);
	for (start = 0; start <= tags.nr_words; start++) { /* nr_words itself: out of range */
		uint64_t *seen = calloc((depth + 63) / 64, sizeof(uint64_t));

		ck_assert_ptr_nonnull(seen);
		for (n = 0; n < depth; n++) {
			unsigned hint = start;
			int tag = blk_tag_get(&tags, &hint);

			ck_assert_int_ge(tag, 0);
			ck_assert(!(seen[tag / 64] & (1ull << (tag % 64))));
			seen[tag / 64] |= 1ull << (tag % 64);
		}
		{
			unsigned hint = start;

			ck_assert_int_eq(blk_tag_get(&tags, &hint), -1);
		}
		for (t = 0; t < depth; t++)
			blk_tag_put(&tags, t);
		ck_assert(blk_tags_idle(&tags));
		free(seen);
	}
	blk_tags_exit(&tags);
}
END_TEST

START_TEST(test_batch_basic)
{
	struct blk_tags tags;
	unsigned hint = 0, offset = ~0u, offset2;
	uint64_t mask, mask2, mask3;

	/* 128 tags: four 32-bit words */
	ck_assert_int_eq(blk_tags_init(&tags, 128), 0);
	ck_assert_uint_eq(tags.nr_words, 4);
	ck_assert_uint_eq(tags.bits_per_word, 32);

	mask = blk_tag_get_batch(&tags, &hint, 10, &offset);
	ck_assert_uint_eq(popcount64(mask), 10);
	ck_assert_uint_eq(offset, 0);
	ck_assert_uint_eq(mask & ~tags.words[0].valid, 0);
	ck_assert_uint_eq(hint, 0);

	/* 30 asked, only 22 left in word 0: never more than the word has, never more than asked */
	mask2 = blk_tag_get_batch(&tags, &hint, 30, &offset2);
	ck_assert_uint_eq(offset2, 0);
	ck_assert_uint_eq(popcount64(mask2), 22);
	ck_assert_uint_eq(mask & mask2, 0);
	ck_assert_uint_eq(mask | mask2, tags.words[0].valid);

	/* word 0 full: the next batch comes from word 1 and the hint follows */
	mask3 = blk_tag_get_batch(&tags, &hint, 64, &offset);
	ck_assert_uint_eq(offset, 32);
	ck_assert_uint_eq(hint, 1);
	ck_assert_uint_eq(popcount64(mask3), 32); /* a batch never spans words */

	/* single gets never hand out a batch-owned tag */
	{
		unsigned h = 0;
		int tag = blk_tag_get(&tags, &h);

		ck_assert_int_eq(tag, 64);
		ck_assert_uint_eq(h, 2);
		blk_tag_put(&tags, (unsigned)tag);
	}

	/* put_mask frees exactly the bits given */
	blk_tags_put_mask(&tags, 0, mask);
	ck_assert_uint_eq(atomic_load(&tags.words[0].busy), mask2);
	hint = 0;
	mask = blk_tag_get_batch(&tags, &hint, 64, &offset);
	ck_assert_uint_eq(offset, 0);
	ck_assert_uint_eq(popcount64(mask), 10);
	blk_tags_put_mask(&tags, 0, mask | mask2);
	blk_tags_put_mask(&tags, 1, mask3);
	ck_assert(blk_tags_idle(&tags));

	/* asking for nothing takes nothing */
	hint = 0;
	ck_assert_uint_eq(blk_tag_get_batch(&tags, &hint, 0, &offset), 0);
	ck_assert(blk_tags_idle(&tags));
	blk_tags_exit(&tags);
}
END_TEST

/* For every depth: batches of every size drain the map with distinct tags. */
START_TEST(test_batch_drain)
{
	unsigned depth = test_depths[_i];
	struct blk_tags tags;
	uint64_t *seen;
	unsigned hint = 0, got = 0, nr = 1, t;

	ck_assert_int_eq(blk_tags_init(&tags, depth), 0);
	seen = calloc((depth + 63) / 64, sizeof(uint64_t));
	ck_assert_ptr_nonnull(seen);
	for (;;) {
		unsigned offset = ~0u;
		uint64_t mask = blk_tag_get_batch(&tags, &hint, nr, &offset);

		if (!mask)
			break;
		ck_assert_uint_le(popcount64(mask), nr);
		ck_assert_uint_eq(offset % tags.bits_per_word, 0);
		ck_assert_uint_eq(mask & ~tags.words[offset >> tags.shift].valid, 0);
		while (mask) {
			unsigned tag = offset + (unsigned)__builtin_ctzll(mask);

			mask &= mask - 1;
			ck_assert_uint_lt(tag, depth);
			ck_assert(!(seen[tag / 64] & (1ull << (tag % 64))));
			seen[tag / 64] |= 1ull << (tag % 64);
			got++;
		}
		nr = nr % 70 + 1;
	}
	ck_assert_uint_eq(got, depth);
	ck_assert_int_eq(blk_tag_get(&tags, &hint), -1);
	for (t = 0; t < depth; t++)
		blk_tag_put(&tags, t);
	ck_assert(blk_tags_idle(&tags));
	free(seen);
	blk_tags_exit(&tags);
}
END_TEST

START_TEST(test_hint)
{
	struct blk_tags tags;
	unsigned hint, i;
	int tag;

	ck_assert_int_eq(blk_tags_init(&tags, 128), 0); /* 4 words of 32 */

	/* the search starts at the hinted word */
	hint = 2;
	ck_assert_int_eq(blk_tag_get(&tags, &hint), 64);
	ck_assert_uint_eq(hint, 2);
	hint = 3;
	ck_assert_int_eq(blk_tag_get(&tags, &hint), 96);
	ck_assert_uint_eq(hint, 3);

	/* an out-of-range hint means word 0 */
	hint = 99;
	ck_assert_int_eq(blk_tag_get(&tags, &hint), 0);
	ck_assert_uint_eq(hint, 0);

	/* fill word 2: the hint moves on to the next word with room */
	hint = 2;
	for (i = 1; i < 32; i++)
		ck_assert_int_eq(blk_tag_get(&tags, &hint), (int)(64 + i));
	ck_assert_uint_eq(hint, 2);
	tag = blk_tag_get(&tags, &hint);
	ck_assert_int_eq(tag, 97);
	ck_assert_uint_eq(hint, 3);

	/* fill word 3: the search wraps to word 0 */
	for (i = 2; i < 32; i++)
		ck_assert_int_eq(blk_tag_get(&tags, &hint), (int)(96 + i));
	tag = blk_tag_get(&tags, &hint);
	ck_assert_int_eq(tag, 1);
	ck_assert_uint_eq(hint, 0);

	/* a freed tag in the hinted word is found first, lowest bit first */
	blk_tag_put(&tags, 70);
	blk_tag_put(&tags, 67);
	hint = 2;
	ck_assert_int_eq(blk_tag_get(&tags, &hint), 67);
	ck_assert_int_eq(blk_tag_get(&tags, &hint), 70);
	ck_assert_uint_eq(hint, 2);
	blk_tags_exit(&tags);
}
END_TEST

/* Freeing pays one load when nobody waits; with a waiter it bumps wake_seq. */
START_TEST(test_wake_only_with_waiters)
{
	struct blk_tags tags;
	unsigned hint = 0;
	uint32_t seq;
	int tag;

	ck_assert_int_eq(blk_tags_init(&tags, 8), 0);
	tag = blk_tag_get(&tags, &hint);
	seq = atomic_load(&tags.wake_seq);
	blk_tag_put(&tags, (unsigned)tag);
	ck_assert_uint_eq(atomic_load(&tags.wake_seq), seq);

	tag = blk_tag_get(&tags, &hint);
	atomic_store(&tags.waiters, 1);
	blk_tag_put(&tags, (unsigned)tag);
	ck_assert_uint_eq(atomic_load(&tags.wake_seq), seq + 1);
	atomic_store(&tags.waiters, 0);

	/* waiting on a sequence number that already moved returns at once */
	blk_tags_wake(&tags);
	ck_assert_uint_eq(atomic_load(&tags.wake_seq), seq + 2);
	blk_tags_wait(&tags, seq);
	blk_tags_exit(&tags);
}
END_TEST

/* --- contention ----------------------------------------------------------- */

#define CONT_THREADS 4
#define CONT_ITERS   200000
#define CONT_DEPTH   32

struct cont_state {
	struct blk_tags tags;
	_Atomic unsigned owner[CONT_DEPTH]; /* 0 free, else thread id + 1 */
	_Atomic unsigned long violations;
	_Atomic unsigned long gets;
	_Atomic unsigned long single_fails; /* single gets that found no tag */
	_Atomic unsigned go;
};

struct cont_arg {
	struct cont_state *st;
	unsigned id;
};

static void cont_claim(struct cont_state *st, unsigned tag, unsigned me)
{
	if (tag >= CONT_DEPTH || atomic_exchange(&st->owner[tag], me) != 0)
		atomic_fetch_add(&st->violations, 1);
}

static void cont_release(struct cont_state *st, unsigned tag, unsigned me)
{
	if (atomic_exchange(&st->owner[tag], 0) != me)
		atomic_fetch_add(&st->violations, 1);
}

static void *cont_thread(void *p)
{
	struct cont_arg *a = p;
	struct cont_state *st = a->st;
	unsigned me = a->id + 1, hint = a->id, i;
	unsigned long gets = 0;

	while (!atomic_load(&st->go))
		sched_yield();
	for (i = 0; i < CONT_ITERS; i++) {
		if (a->id & 1) {
			/* odd threads: batches of up to 3, freed with one put_mask */
			unsigned offset, w;
			uint64_t mask = blk_tag_get_batch(&st->tags, &hint, 3, &offset), m;

			if (!mask)
				continue;
			if (__builtin_popcountll(mask) > 3)
				atomic_fetch_add(&st->violations, 1);
			for (m = mask; m; m &= m - 1)
				cont_claim(st, offset + (unsigned)__builtin_ctzll(m), me);
			for (m = mask; m; m &= m - 1)
				cont_release(st, offset + (unsigned)__builtin_ctzll(m), me);
			w = offset >> st->tags.shift;
			blk_tags_put_mask(&st->tags, w, mask);
			gets += (unsigned long)__builtin_popcountll(mask);
		} else {
			int tag = blk_tag_get(&st->tags, &hint);

			if (tag < 0) {
				atomic_fetch_add(&st->single_fails, 1);
				continue;
			}
			cont_claim(st, (unsigned)tag, me);
			cont_release(st, (unsigned)tag, me);
			blk_tag_put(&st->tags, (unsigned)tag);
			gets++;
		}
	}
	atomic_fetch_add(&st->gets, gets);
	return NULL;
}

START_TEST(test_contention)
{
	static struct cont_state st; /* large and aligned: keep it off the stack */
	struct cont_arg args[CONT_THREADS];
	pthread_t th[CONT_THREADS];
	unsigned i;

	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(blk_tags_init(&st.tags, CONT_DEPTH), 0);
	for (i = 0; i < CONT_THREADS; i++) {
		args[i].st = &st;
		args[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, cont_thread, &args[i]), 0);
	}
	atomic_store(&st.go, 1);
	for (i = 0; i < CONT_THREADS; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(atomic_load(&st.violations), 0);
	/*
	 * At most 2 * 1 + 2 * 3 of the 32 tags are ever in use, so a single get
	 * (which retries lost races within the word) never comes back empty.  A
	 * batch may lose every bit it wanted to a racer and return 0: not counted.
	 */
	ck_assert_uint_eq(atomic_load(&st.single_fails), 0);
	ck_assert_uint_ge(atomic_load(&st.gets), (unsigned long)(CONT_THREADS / 2) * CONT_ITERS);
	ck_assert(blk_tags_idle(&st.tags));
	for (i = 0; i < CONT_DEPTH; i++)
		ck_assert_uint_eq(atomic_load(&st.owner[i]), 0);
	blk_tags_exit(&st.tags);
}
END_TEST

/* --- exhaustion and wake-up ----------------------------------------------- */

struct waiter_state {
	struct blk_tags *tags;
	_Atomic int tag;         /* the tag it finally got, -1 before */
	_Atomic unsigned sleeps; /* times it went to sleep */
};

/* The engine's protocol (blk_mq_wait_tag): announce, retry once, sleep on wake_seq. */
static void *waiter_thread(void *p)
{
	struct waiter_state *ws = p;
	struct blk_tags *tags = ws->tags;
	unsigned hint = 0;
	int tag;

	for (;;) {
		uint32_t seq;

		tag = blk_tag_get(tags, &hint);
		if (tag >= 0)
			break;
		seq = atomic_load(&tags->wake_seq);
		atomic_fetch_add(&tags->waiters, 1);
		tag = blk_tag_get(tags, &hint);
		if (tag >= 0) {
			atomic_fetch_sub(&tags->waiters, 1);
			break;
		}
		atomic_fetch_add(&ws->sleeps, 1);
		blk_tags_wait(tags, seq);
		atomic_fetch_sub(&tags->waiters, 1);
	}
	atomic_store(&ws->tag, tag);
	return NULL;
}

/* Poll @flag until it is non-zero, for at most @secs seconds.  Returns its value. */
static unsigned wait_for(_Atomic unsigned *flag, unsigned secs)
{
	struct timespec end, now;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	for (;;) {
		unsigned v = atomic_load(flag);

		if (v)
			return v;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			return 0;
		usleep(1000);
	}
}

static int join_within(pthread_t th, unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	return pthread_timedjoin_np(th, NULL, &ts);
}

START_TEST(test_exhaustion_wakeup)
{
	struct blk_tags tags;
	struct waiter_state ws;
	unsigned hint = 0, t;
	pthread_t th;

	ck_assert_int_eq(blk_tags_init(&tags, 4), 0);
	for (t = 0; t < 4; t++)
		ck_assert_int_eq(blk_tag_get(&tags, &hint), (int)t);
	ws.tags = &tags;
	atomic_init(&ws.tag, -1);
	atomic_init(&ws.sleeps, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, waiter_thread, &ws), 0);

	/* the map is full: the waiter must go to sleep, announced in 'waiters' */
	ck_assert_msg(wait_for(&ws.sleeps, 20), "the waiter never went to sleep");
	ck_assert_int_eq(atomic_load(&ws.tag), -1);

	/* freeing one tag wakes it and it gets exactly that tag */
	blk_tag_put(&tags, 2);
	ck_assert_msg(join_within(th, 20) == 0, "the waiter was not woken by a freed tag");
	ck_assert_int_eq(atomic_load(&ws.tag), 2);
	ck_assert_uint_eq(atomic_load(&tags.waiters), 0);
	ck_assert_uint_ge(atomic_load(&tags.wake_seq), 1);

	for (t = 0; t < 4; t++)
		blk_tag_put(&tags, t);
	ck_assert(blk_tags_idle(&tags));
	blk_tags_exit(&tags);
}
END_TEST

/* Several waiters, tags freed one by one with put_mask: every waiter ends up with a tag. */
START_TEST(test_exhaustion_many_waiters)
{
	enum { NW = 3 };
	struct blk_tags tags;
	struct waiter_state ws[NW];
	pthread_t th[NW];
	unsigned hint = 0, t, i, seen = 0;

	ck_assert_int_eq(blk_tags_init(&tags, 3), 0);
	for (t = 0; t < 3; t++)
		ck_assert_int_eq(blk_tag_get(&tags, &hint), (int)t);
	for (i = 0; i < NW; i++) {
		ws[i].tags = &tags;
		atomic_init(&ws[i].tag, -1);
		atomic_init(&ws[i].sleeps, 0);
		ck_assert_int_eq(pthread_create(&th[i], NULL, waiter_thread, &ws[i]), 0);
	}
	for (i = 0; i < NW; i++)
		ck_assert_msg(wait_for(&ws[i].sleeps, 20), "waiter %u never slept", i);
	blk_tags_put_mask(&tags, 0, 0x7);
	for (i = 0; i < NW; i++) {
		int tag;

		ck_assert_msg(join_within(th[i], 20) == 0, "waiter %u not woken", i);
		tag = atomic_load(&ws[i].tag);
		ck_assert_int_ge(tag, 0);
		ck_assert_int_lt(tag, 3);
		ck_assert(!(seen & (1u << tag)));
		seen |= 1u << tag;
	}
	ck_assert_uint_eq(seen, 0x7);
	ck_assert_int_eq(blk_tag_get(&tags, &hint), -1);
	blk_tags_put_mask(&tags, 0, 0x7);
	ck_assert(blk_tags_idle(&tags));
	blk_tags_exit(&tags);
}
END_TEST

static Suite *tags_suite(void)
{
	Suite *s = suite_create("tags");
	TCase *tc = tcase_create("map");
	TCase *tc_mt = tcase_create("threads");

	tcase_add_test(tc, test_init_invalid);
	tcase_add_loop_test(tc, test_init_and_drain, 0, NR_DEPTHS);
	tcase_add_loop_test(tc, test_every_hint_drains, 0, NR_DEPTHS);
	tcase_add_test(tc, test_batch_basic);
	tcase_add_loop_test(tc, test_batch_drain, 0, NR_DEPTHS);
	tcase_add_test(tc, test_hint);
	tcase_add_test(tc, test_wake_only_with_waiters);
	suite_add_tcase(s, tc);

	tcase_add_test(tc_mt, test_contention);
	tcase_add_test(tc_mt, test_exhaustion_wakeup);
	tcase_add_test(tc_mt, test_exhaustion_many_waiters);
	suite_add_tcase(s, tc_mt);
	return s;
}

int main(void)
{
	setenv("CK_DEFAULT_TIMEOUT", "60", 0); /* meson sets 120; keep a generous default */
	return check_run(tags_suite());
}
