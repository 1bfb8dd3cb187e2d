/* SPDX-License-Identifier: MIT */
/*
 * Per-thread fault guard: turns a SIGBUS / SIGSEGV raised by a load or store
 * into a pmem mapping (unknown poison on devdax, an emulated poisoned page in
 * an image mapping) into a jump back to the code that armed the guard, so the
 * engine can record the poison and fail one request instead of dying.
 *
 * One process-wide handler per signal, installed once.  Each thread has at
 * most one armed guard, reached through an initial-exec TLS pointer (no TLS
 * allocation can happen inside the handler).  A fault that is not ours is
 * passed on: to the previous handler if there was one, else the default action
 * is restored and the faulting instruction re-executes and kills the process.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "blk_internal.h"

static __thread struct blk_guard *blk_cur_guard __attribute__((tls_model("initial-exec")));

static struct sigaction blk_prev_bus, blk_prev_segv;
static pthread_once_t blk_guard_once = PTHREAD_ONCE_INIT;
static int blk_guard_err;

/* A page unless the kernel told us the size of the poisoned granule. */
#define BLK_GUARD_DEFAULT_LSB 12

static void blk_guard_chain(int signo, siginfo_t *si, void *uctx)
{
	const struct sigaction *prev = signo == SIGBUS ? &blk_prev_bus : &blk_prev_segv;
	struct sigaction dfl;

	if (prev->sa_flags & SA_SIGINFO) {
		if (prev->sa_sigaction) {
			prev->sa_sigaction(signo, si, uctx);
			return;
		}
	} else if (prev->sa_handler == SIG_IGN) {
		/* A sent signal was ignored before us; a fault cannot be (the kernel forces it). */
		if (si && si->si_code <= 0)
			return;
	} else if (prev->sa_handler != SIG_DFL) {
		prev->sa_handler(signo);
		return;
	}

	/*
	 * Nobody else wants it: die the way we would have without the guard.
	 * A fault re-executes the instruction on return and is delivered again
	 * to the default action; a signal sent by someone (si_code <= 0) would
	 * not recur, so it is raised again (SA_NODEFER: not blocked here).
	 */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(signo, &dfl, NULL);
	if (si == NULL || si->si_code <= 0)
		raise(signo);
}

static void blk_guard_handler(int signo, siginfo_t *si, void *uctx)
{
	struct blk_guard *g = blk_cur_guard;

	/* Only a kernel-generated fault (si_code > 0) has a meaningful si_addr. */
	if (g && si && si->si_code > 0 && (const char *)si->si_addr >= g->lo &&
	    (const char *)si->si_addr < g->hi) {
		g->fault_addr = si->si_addr;
		g->fault_signo = signo;
		g->fault_code = si->si_code;
		if (signo == SIGBUS &&
		    (si->si_code == BUS_MCEERR_AR || si->si_code == BUS_MCEERR_AO) &&
		    si->si_addr_lsb > 0)
			g->fault_lsb = (unsigned)si->si_addr_lsb;
		else
			g->fault_lsb = BLK_GUARD_DEFAULT_LSB;
		blk_cur_guard = NULL;
		siglongjmp(g->jb, 1);
	}
	blk_guard_chain(signo, si, uctx);
}

static void blk_guard_do_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = blk_guard_handler;
	/*
	 * NODEFER: the handler leaves by siglongjmp() without restoring a
	 * mask, so the signal must not be blocked while it runs.  ONSTACK: use
	 * the thread's alternate stack when it has one.
	 */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &blk_prev_bus) < 0 ||
	    sigaction(SIGSEGV, &sa, &blk_prev_segv) < 0)
		blk_guard_err = -errno;
}

/* Install the SIGBUS and SIGSEGV handlers (once per process).  Returns 0 or -errno. */
int blk_guard_install(void)
{
	int ret = pthread_once(&blk_guard_once, blk_guard_do_install);

	if (unlikely(ret))
		return -ret;
	return blk_guard_err;
}

/* Arm @g for [lo, lo + len) on the calling thread.  The caller did BLK_GUARD_FAULTED(g) first. */
void blk_guard_arm(struct blk_guard *g, const void *lo, size_t len)
{
	g->lo = lo;
	g->hi = (const char *)lo + len;
	g->fault_addr = NULL;
	g->fault_signo = 0;
	g->fault_lsb = 0;
	g->fault_code = 0;
	/* The handler must see lo/hi before it can see the pointer. */
	atomic_signal_fence(memory_order_seq_cst);
	blk_cur_guard = g;
	atomic_signal_fence(memory_order_seq_cst);
}

void blk_guard_disarm(struct blk_guard *g)
{
	(void)g;
	atomic_signal_fence(memory_order_seq_cst);
	blk_cur_guard = NULL;
	atomic_signal_fence(memory_order_seq_cst);
}
