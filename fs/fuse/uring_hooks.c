/* SPDX-License-Identifier: MIT */
/*
 * The FUSE-over-io_uring transport's test hooks (uring_hooks.h).  Calls libc
 * only.
 */
#include <stdlib.h>
#include <string.h>

#include "uring_hooks.h"

enum { BAD_NONE, BAD_ALL, BAD_QUEUE, BAD_ENTRY };
static unsigned bad_register, bad_qid, fail_qid;
static enum mfsd_uring_fail fail_point;

void mfsd_uring_hooks_read(void)
{
	const char *v = getenv("MENDFS_DEBUG_URING_BAD_REGISTER");
	char *end;

	bad_register = BAD_NONE;
	if (v && !strcmp(v, "1"))
		bad_register = BAD_ALL;
	else if (v && !strncmp(v, "queue:", 6))
		bad_register = BAD_QUEUE, bad_qid = (unsigned)strtoul(v + 6, NULL, 10);
	else if (v && !strncmp(v, "entry:", 6))
		bad_register = BAD_ENTRY, bad_qid = (unsigned)strtoul(v + 6, NULL, 10);
	fail_point = URING_FAIL_NONE;
	v = getenv("MENDFS_DEBUG_URING_FAIL_QUEUE");
	if (!v || !*v)
		return;
	fail_qid = (unsigned)strtoul(v, &end, 10);
	if (!*end || !strcmp(end, ":register"))
		fail_point = URING_FAIL_REGISTER;
	else if (!strcmp(end, ":ring"))
		fail_point = URING_FAIL_RING;
	else if (!strcmp(end, ":thread"))
		fail_point = URING_FAIL_THREAD;
	else if (!strcmp(end, ":wait"))
		fail_point = URING_FAIL_WAIT;
}

bool mfsd_uring_fails_at(enum mfsd_uring_fail point, unsigned qid)
{
	return fail_point == point && fail_qid == qid;
}

bool mfsd_uring_bad_entry(unsigned q, unsigned i, unsigned depth)
{
	return bad_register == BAD_ALL || (bad_register == BAD_QUEUE && q == bad_qid) ||
	       (bad_register == BAD_ENTRY && q == bad_qid && i == depth - 1);
}
