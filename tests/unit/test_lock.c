/* SPDX-License-Identifier: MIT */
/*
 * test_lock: struct mfs_lock (fs/core/lock.h), the metadata cache's mutex.
 * trylock on a free and a held lock; a locker that finds the lock held
 * sleeps until the unlock and leaves it free; four threads adding to a plain
 * counter under the lock lose no addition (an unlock that forgot to wake a
 * sleeper hangs here, one that let two in loses counts).  struct mfs_cond:
 * three waiters all woken by one broadcast, each seeing the state changed
 * under the lock; a wait with a deadline and no broadcast returns ETIMEDOUT
 * once the deadline has passed.  Exits 0 when every test passes.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"
#include "check_run.h"

START_TEST(test_trylock)
{
	struct mfs_lock l;

	mfs_lock_init(&l);
	ck_assert(mfs_trylock(&l));
	ck_assert(!mfs_trylock(&l));
	mfs_unlock(&l);
	ck_assert_uint_eq(atomic_load(&l.state), 0);
	mfs_lock(&l);
	ck_assert(!mfs_trylock(&l));
	mfs_unlock(&l);
	ck_assert(mfs_trylock(&l));
	mfs_unlock(&l);
	mfs_lock_destroy(&l);
}
END_TEST

struct sleeper {
	struct mfs_lock *l;
	_Atomic int stage; /* 1: about to lock, 2: has it */
	int seen_by_sleeper;
	int value;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;

	atomic_store(&s->stage, 1);
	mfs_lock(s->l);
	s->seen_by_sleeper = s->value;
	atomic_store(&s->stage, 2);
	mfs_unlock(s->l);
	return NULL;
}

/* Wait until the lock word says a locker sleeps on it (2), at most 10 s. */
static int wait_for_waiter(struct mfs_lock *l)
{
	for (int i = 0; i < 10000; i++) {
		if (atomic_load(&l->state) == 2)
			return 1;
		usleep(1000);
	}
	return 0;
}

START_TEST(test_sleeper_woken)
{
	struct mfs_lock l;
	struct sleeper s = {.l = &l};
	pthread_t t;

	mfs_lock_init(&l);
	mfs_lock(&l);
	ck_assert_int_eq(pthread_create(&t, NULL, sleeper_main, &s), 0);
	ck_assert_msg(wait_for_waiter(&l), "the second locker never marked the lock waited for");
	ck_assert_int_eq(atomic_load(&s.stage), 1); /* it did not get in */
	s.value = 42;                               /* written under the lock */
	mfs_unlock(&l);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(atomic_load(&s.stage), 2);
	ck_assert_int_eq(s.seen_by_sleeper, 42);
	ck_assert_uint_eq(atomic_load(&l.state), 0);
	mfs_lock_destroy(&l);
}
END_TEST

#define THREADS 4
#define ROUNDS  200000

struct counter {
	struct mfs_lock l;
	uint64_t n; /* plain: only the lock keeps additions apart */
};

static void *adder_main(void *arg)
{
	struct counter *c = arg;

	for (int i = 0; i < ROUNDS; i++) {
		mfs_lock(&c->l);
		uint64_t v = c->n;
		if ((i & 1023) == 0)
			sched_yield(); /* give others a chance to find it held */
		c->n = v + 1;
		mfs_unlock(&c->l);
	}
	return NULL;
}

START_TEST(test_contended_count)
{
	struct counter c = {.n = 0};
	pthread_t t[THREADS];

	mfs_lock_init(&c.l);
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, adder_main, &c), 0);
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	ck_assert_uint_eq(c.n, (uint64_t)THREADS * ROUNDS);
	ck_assert_uint_eq(atomic_load(&c.l.state), 0);
	mfs_lock_destroy(&c.l);
}
END_TEST

struct gate {
	struct mfs_lock l;
	struct mfs_cond c;
	int open;    /* under l */
	int waiting; /* under l */
	int through; /* under l */
};

static void *gate_waiter(void *arg)
{
	struct gate *g = arg;

	mfs_lock(&g->l);
	g->waiting++;
	while (!g->open)
		mfs_cond_wait(&g->c, &g->l, NULL);
	g->through++;
	mfs_unlock(&g->l);
	return NULL;
}

START_TEST(test_cond_broadcast)
{
	struct gate g = {.open = 0};
	pthread_t t[3];
	int waiting = 0;

	mfs_lock_init(&g.l);
	mfs_cond_init(&g.c);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, gate_waiter, &g), 0);
	/* all three inside the wait (they count themselves before it), at most 10 s */
	for (int i = 0; i < 10000 && waiting < 3; i++) {
		usleep(1000);
		mfs_lock(&g.l);
		waiting = g.waiting;
		mfs_unlock(&g.l);
	}
	ck_assert_int_eq(waiting, 3);
	mfs_lock(&g.l);
	ck_assert_int_eq(g.through, 0);
	g.open = 1;
	mfs_cond_broadcast(&g.c);
	mfs_unlock(&g.l);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	ck_assert_int_eq(g.through, 3);
	ck_assert_uint_eq(atomic_load(&g.l.state), 0);
}
END_TEST

START_TEST(test_cond_deadline)
{
	struct mfs_lock l;
	struct mfs_cond c;
	struct timespec until, now;
	int err;

	mfs_lock_init(&l);
	mfs_cond_init(&c);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += 20 * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	mfs_lock(&l);
	do
		err = mfs_cond_wait(&c, &l, &until);
	while (err == 0); /* a spurious wakeup may come first */
	ck_assert_int_eq(err, ETIMEDOUT);
	ck_assert(!mfs_trylock(&l)); /* held again on return */
	clock_gettime(CLOCK_MONOTONIC, &now);
	ck_assert(now.tv_sec > until.tv_sec ||
	          (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec));
	mfs_unlock(&l);
}
END_TEST

static Suite *lock_suite(void)
{
	Suite *s = suite_create("lock");
	TCase *tc = tcase_create("lock");

	tcase_add_test(tc, test_trylock);
	tcase_add_test(tc, test_sleeper_woken);
	tcase_add_test(tc, test_contended_count);
	tcase_add_test(tc, test_cond_broadcast);
	tcase_add_test(tc, test_cond_deadline);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(lock_suite());
}
