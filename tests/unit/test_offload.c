/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the daemon's offload pool (fs/fuse/offload.c), which runs the
 * FUSE-over-io_uring requests that may wait off their ring's thread: the
 * pool grows to its bound and no further, work beyond it waits (and runs in
 * order), an idle thread is reused rather than a new one made, a thread of
 * its own runs beside a full pool, and destroy waits for every piece of work.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "offload.h"
#include "check_run.h"

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	unsigned inside; /* work items waiting at the gate */
};

static struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
static _Atomic unsigned done;
static unsigned order[64], norder;
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;

static void gate_reset(void)
{
	g.open = false;
	g.inside = 0;
	atomic_store(&done, 0);
	norder = 0;
}

static void gate_open(void)
{
	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

/* Wait until @n work items wait at the gate (10 s at most). */
static bool gate_inside(unsigned n)
{
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&g.lock);
		bool ok = g.inside == n;
		pthread_mutex_unlock(&g.lock);
		if (ok)
			return true;
		usleep(10000);
	}
	return false;
}

/* Work: note its number, wait at the gate, count itself done. */
static void held(void *arg)
{
	pthread_mutex_lock(&order_lock);
	order[norder++] = (unsigned)(uintptr_t)arg;
	pthread_mutex_unlock(&order_lock);
	pthread_mutex_lock(&g.lock);
	g.inside++;
	pthread_cond_broadcast(&g.cond);
	while (!g.open)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
	atomic_fetch_add(&done, 1);
}

START_TEST(test_pool_bound_and_order)
{
	struct mfsd_offload o;

	gate_reset();
	ck_assert_int_eq(mfsd_offload_init(&o, 3), 0);
	for (uintptr_t i = 0; i < 8; i++)
		ck_assert_int_eq(mfsd_offload_run(&o, held, (void *)i, false), 0);
	/* three run, five wait: the pool stops at its bound */
	ck_assert(gate_inside(3));
	usleep(100000);
	pthread_mutex_lock(&o.lock);
	ck_assert_uint_eq(o.pool, 3);
	ck_assert_uint_eq(o.threads, 3);
	pthread_mutex_unlock(&o.lock);
	ck_assert_uint_eq(g.inside, 3);
	/* a thread of its own runs beside the full pool */
	ck_assert_int_eq(mfsd_offload_run(&o, held, (void *)100, true), 0);
	ck_assert(gate_inside(4));
	gate_open();
	mfsd_offload_destroy(&o);
	ck_assert_uint_eq(atomic_load(&done), 9);
}
END_TEST

static void quick(void *arg)
{
	(void)arg;
	atomic_fetch_add(&done, 1);
}

START_TEST(test_idle_thread_reused)
{
	struct mfsd_offload o;

	gate_reset();
	ck_assert_int_eq(mfsd_offload_init(&o, 8), 0);
	for (int i = 0; i < 50; i++) {
		ck_assert_int_eq(mfsd_offload_run(&o, quick, NULL, false), 0);
		/* wait for it to end: the thread is idle again for the next */
		for (int k = 0; k < 1000 && atomic_load(&done) != (unsigned)i + 1; k++)
			usleep(1000);
		ck_assert_uint_eq(atomic_load(&done), (unsigned)i + 1);
		for (int k = 0; k < 1000; k++) {
			pthread_mutex_lock(&o.lock);
			bool idle = o.idle == o.pool;
			pthread_mutex_unlock(&o.lock);
			if (idle)
				break;
			usleep(1000);
		}
	}
	pthread_mutex_lock(&o.lock);
	ck_assert_uint_eq(o.pool, 1); /* one thread served all fifty */
	pthread_mutex_unlock(&o.lock);
	mfsd_offload_destroy(&o);
	ck_assert_uint_eq(atomic_load(&done), 50);
}
END_TEST

START_TEST(test_destroy_runs_queued)
{
	struct mfsd_offload o;

	gate_reset();
	ck_assert_int_eq(mfsd_offload_init(&o, 1), 0);
	for (uintptr_t i = 0; i < 5; i++)
		ck_assert_int_eq(mfsd_offload_run(&o, held, (void *)i, false), 0);
	ck_assert(gate_inside(1));
	gate_open();
	/* destroy lets the four queued behind the first run before it returns */
	mfsd_offload_destroy(&o);
	ck_assert_uint_eq(atomic_load(&done), 5);
	for (unsigned i = 0; i < 5; i++)
		ck_assert_uint_eq(order[i], i);
}
END_TEST

static Suite *offload_suite(void)
{
	Suite *s = suite_create("offload");
	TCase *tc = tcase_create("offload");

	tcase_add_test(tc, test_pool_bound_and_order);
	tcase_add_test(tc, test_idle_thread_reused);
	tcase_add_test(tc, test_destroy_runs_queued);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(offload_suite());
}
