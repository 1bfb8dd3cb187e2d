/* SPDX-License-Identifier: MIT */
/*
 * The FUSE-over-io_uring transport's test hooks (uring_hooks.c): environment
 * variables read at start (docs/design/testing.md), never set outside tests.
 * MENDFS_DEBUG_URING_BAD_REGISTER=1, queue:N or entry:N registers every
 * entry, queue N's entries or queue N's last entry with a header area one
 * byte shorter than the kernel's struct, which its REGISTER refuses (EINVAL);
 * MENDFS_DEBUG_URING_FAIL_QUEUE=N[:ring|thread|register|wait] makes queue N
 * fail where its ring is set up, its thread started, its REGISTERs submitted
 * (the default), or, once it has carried 64 requests, where it waits for
 * the next (EIO, every time), as if that had failed for real.
 */
#ifndef MFSD_URING_HOOKS_H
#define MFSD_URING_HOOKS_H

#include <stdbool.h>

enum mfsd_uring_fail {
	URING_FAIL_NONE,
	URING_FAIL_RING,
	URING_FAIL_THREAD,
	URING_FAIL_REGISTER,
	URING_FAIL_WAIT,
};

/* Read the variables (at the transport's start). */
void mfsd_uring_hooks_read(void);
/* Does queue @qid fail at @point? */
bool mfsd_uring_fails_at(enum mfsd_uring_fail point, unsigned qid);
/* Does entry @i (of @depth) of queue @q get a header area too short? */
bool mfsd_uring_bad_entry(unsigned q, unsigned i, unsigned depth);

#endif
