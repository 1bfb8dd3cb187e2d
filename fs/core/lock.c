/* SPDX-License-Identifier: MIT */
/*
 * The slow paths of struct mfs_lock (lock.h): sleeping on a held lock and
 * waking a sleeper; struct mfs_cond's wait and broadcast.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock.h"

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *until)
{
	/* FUTEX_WAIT_BITSET: @until is an absolute CLOCK_MONOTONIC time (NULL: none) */
	return syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val, until, NULL,
	               FUTEX_BITSET_MATCH_ANY);
}

void mfs_lock_slow(struct mfs_lock *l, uint32_t seen)
{
	/*
	 * Say that someone waits (2) before sleeping; whoever takes the lock
	 * from here on takes it as 2, so that its unlock wakes the next sleeper.
	 * The futex sleeps only while the word is still 2: an unlock between
	 * the exchange and the sleep makes it return at once.
	 */
	if (seen != 2)
		seen = atomic_exchange_explicit(&l->state, 2, memory_order_acquire);
	while (seen != 0) {
		futex(&l->state, FUTEX_WAIT, 2, NULL);
		seen = atomic_exchange_explicit(&l->state, 2, memory_order_acquire);
	}
}

void mfs_lock_wake(struct mfs_lock *l)
{
	futex(&l->state, FUTEX_WAKE, 1, NULL);
}

void mfs_cond_broadcast(struct mfs_cond *c)
{
	if (!c->waiters)
		return; /* the usual case: no system call */
	atomic_fetch_add(&c->seq, 1);
	futex(&c->seq, FUTEX_WAKE, INT_MAX, NULL);
}

int mfs_cond_wait(struct mfs_cond *c, struct mfs_lock *l, const struct timespec *until)
{
	uint32_t seq = atomic_load(&c->seq);
	int err = 0;

	c->waiters++;
	mfs_unlock(l);
	if (futex(&c->seq, FUTEX_WAIT_BITSET, seq, until) == -1 && errno == ETIMEDOUT)
		err = ETIMEDOUT;
	mfs_lock(l);
	c->waiters--;
	return err;
}
