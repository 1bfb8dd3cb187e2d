/* SPDX-License-Identifier: MIT */
/*
 * A small mutex for the metadata cache: the cache's lock (mfs.cache_lock) and
 * every buffer's content lock (mfs_buf.lock).  An allocating write takes
 * these about fifteen times; glibc's pthread_mutex_lock() and _unlock() cost
 * about 57 instructions a pair uncontended (type checks, lock elision, owner
 * and count), this one a compare-and-swap and an exchange, inline.
 *
 * It is the classic three-state futex mutex: 0 free, 1 held, 2 held and
 * perhaps waited for.  A locker that finds it held marks it 2 and sleeps on
 * the word; an unlock that finds 2 wakes one sleeper, which takes it as 2 (it
 * cannot know whether others still wait).  No spinning (glibc's default
 * mutex does not spin either: on two CPUs a spinning waiter steals the
 * holder's time), no owner, not recursive.  struct mfs_cond (below) is the
 * condition variable that goes with it.
 *
 * ThreadSanitizer cannot see a lock made of atomics and futexes; under it
 * (-Db_sanitize=thread) the lock tells it what happens through its mutex
 * annotations, so the race-stress test checks what is locked by these as by
 * any other mutex.
 */
#ifndef MENDFS_CORE_LOCK_H
#define MENDFS_CORE_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__SANITIZE_THREAD__)
#define MFS_LOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MFS_LOCK_TSAN 1
#endif
#endif

#ifdef MFS_LOCK_TSAN
#include <sanitizer/tsan_interface.h>
#define MFS_LOCK_NOTE(call) call
#else
#define MFS_LOCK_NOTE(call) ((void)0)
#endif

struct mfs_lock {
	_Atomic uint32_t state; /* 0 free, 1 held, 2 held with possible waiters */
};

/* Sleep until the lock is ours; @seen: the value the fast path found. */
void mfs_lock_slow(struct mfs_lock *l, uint32_t seen);
/* Wake one sleeper of a lock just released from state 2. */
void mfs_lock_wake(struct mfs_lock *l);

static inline void mfs_lock_init(struct mfs_lock *l)
{
	atomic_init(&l->state, 0);
	MFS_LOCK_NOTE(__tsan_mutex_create(l, 0));
}

static inline void mfs_lock_destroy(struct mfs_lock *l)
{
	(void)l;
	MFS_LOCK_NOTE(__tsan_mutex_destroy(l, 0));
}

static inline void mfs_lock(struct mfs_lock *l)
{
	uint32_t seen = 0;

	MFS_LOCK_NOTE(__tsan_mutex_pre_lock(l, 0));
	if (!atomic_compare_exchange_strong_explicit(&l->state, &seen, 1, memory_order_acquire,
	                                             memory_order_relaxed))
		mfs_lock_slow(l, seen);
	MFS_LOCK_NOTE(__tsan_mutex_post_lock(l, 0, 0));
}

static inline bool mfs_trylock(struct mfs_lock *l)
{
	uint32_t seen = 0;
	bool got;

	MFS_LOCK_NOTE(__tsan_mutex_pre_lock(l, __tsan_mutex_try_lock));
	got = atomic_compare_exchange_strong_explicit(&l->state, &seen, 1, memory_order_acquire,
	                                              memory_order_relaxed);
	MFS_LOCK_NOTE(__tsan_mutex_post_lock(
	        l,
	        got ? __tsan_mutex_try_lock : __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed,
	        0));
	return got;
}

static inline void mfs_unlock(struct mfs_lock *l)
{
	MFS_LOCK_NOTE(__tsan_mutex_pre_unlock(l, 0));
	if (atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2)
		mfs_lock_wake(l);
	MFS_LOCK_NOTE(__tsan_mutex_post_unlock(l, 0));
}

/*
 * A condition to wait on with a struct mfs_lock held: a sequence number that
 * every broadcast advances.  A waiter reads it under the lock, unlocks, and
 * sleeps only while it is unchanged (the kernel compares), so a broadcast
 * between the unlock and the sleep is not lost; then it takes the lock
 * again.  Wakeups may be spurious: callers wait in a loop on their predicate,
 * as with pthread_cond_wait.  Broadcast only (every waiter wakes), and with
 * the lock held: it reads the count of waiters, which they keep under the
 * lock, and makes no system call when there is none (a journal handle's end
 * broadcasts every time).
 */
struct mfs_cond {
	_Atomic uint32_t seq;
	unsigned waiters; /* under the lock waited with */
};

static inline void mfs_cond_init(struct mfs_cond *c)
{
	atomic_init(&c->seq, 0);
	c->waiters = 0;
}

/* Wake every waiter of @c.  Call with its lock held, after changing what they wait for. */
void mfs_cond_broadcast(struct mfs_cond *c);
/*
 * Unlock @l, sleep until a broadcast of @c (or, with @until, the
 * CLOCK_MONOTONIC time @until), lock @l again.  0, or ETIMEDOUT.
 */
int mfs_cond_wait(struct mfs_cond *c, struct mfs_lock *l, const struct timespec *until);

#endif
