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

static void lock_futex(struct mfs_lock *l, int op, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)&l->state, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
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
		lock_futex(l, FUTEX_WAIT, 2);
		seen = atomic_exchange_explicit(&l->state, 2, memory_order_acquire);
	}
}

void mfs_lock_wake(struct mfs_lock *l)
{
	lock_futex(l, FUTEX_WAKE, 1);
}

void mfs_cond_broadcast(struct mfs_cond *c)
{
	atomic_fetch_add(&c->seq, 1);
	syscall(SYS_futex, (uint32_t *)&c->seq, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL,
	        NULL, 0);
}

int mfs_cond_wait(struct mfs_cond *c, struct mfs_lock *l, const struct timespec *until)
{
	uint32_t seq = atomic_load(&c->seq);
	int err = 0;

	mfs_unlock(l);
	/* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC deadline (NULL: none) */
	if (syscall(SYS_futex, (uint32_t *)&c->seq, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seq,
	            until, NULL, FUTEX_BITSET_MATCH_ANY) == -1 &&
	    errno == ETIMEDOUT)
		err = ETIMEDOUT;
	mfs_lock(l);
	return err;
}
