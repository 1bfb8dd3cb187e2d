/* SPDX-License-Identifier: MIT */
/*
 * lib-scrub: libmendfs's scrub and event calls (mendfs_scrub(3)) against a
 * mount whose file FILE has one latent sector at byte OFF (lib-scrub-test.sh
 * plants it).  Usage: lib-scrub MOUNTPOINT FILE OFF.  Checks, in order:
 *   - bad arguments: EINVAL from the library (NULL, a phase above DONE, an
 *     unknown flag, a wait above the maximum) and from the daemon (a pos
 *     past its zone); a directory outside mendfs: EOPNOTSUPP;
 *   - no events before the scrub (a read without waiting returns 0);
 *   - a child process that made one step owns the scrub: the parent's step
 *     fails with EBUSY; once the child exited, the parent scrubs to the end:
 *     poison_found 1, every data block of FILE read;
 *   - mendfs_events_read then returns the one poison event (cause latent,
 *     FILE's path from the mount's root, byte range [OFF, OFF + 512)), and
 *     from its next seq nothing more.
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mendfs/recovery.h"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "lib-scrub: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int xopen(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	return fd;
}

#define EXPECT_ERR(call, err)                                                                      \
	do {                                                                                       \
		errno = 0;                                                                         \
		if ((call) != -1 || errno != (err))                                                \
			die("%s: expected -1/%s, got errno %s", #call, strerror(err),              \
			    strerror(errno));                                                      \
	} while (0)

int main(int argc, char **argv)
{
	struct mendfs_ioc_event ev[8];
	struct mendfs_scrub st;
	uint64_t next, lost, off;
	const char *mnt, *file, *rel;
	int fd, other, p[2], n, status;
	pid_t child;
	char c;

	if (argc != 4)
		die("usage: lib-scrub MOUNTPOINT FILE OFF");
	mnt = argv[1];
	file = argv[2];
	off = strtoull(argv[3], NULL, 0);
	rel = file + strlen(mnt);
	fd = xopen(mnt, O_RDONLY | O_DIRECTORY);

	/* hostile arguments */
	EXPECT_ERR(mendfs_scrub_step(fd, NULL), EINVAL);
	memset(&st, 0, sizeof(st));
	st.phase = 3;
	EXPECT_ERR(mendfs_scrub_step(fd, &st), EINVAL);
	memset(&st, 0, sizeof(st));
	st.flags = 0x80;
	EXPECT_ERR(mendfs_scrub_step(fd, &st), EINVAL);
	memset(&st, 0, sizeof(st));
	st.pos = UINT64_MAX;
	EXPECT_ERR(mendfs_scrub_step(fd, &st), EINVAL);
	memset(&st, 0, sizeof(st));
	st.data_budget = UINT64_MAX;
	EXPECT_ERR(mendfs_scrub_step(fd, &st), EINVAL);
	EXPECT_ERR(mendfs_events_read(fd, 0, ev, 8, MENDFS_EV_WAIT_MAX + 1, &next, NULL), EINVAL);
	EXPECT_ERR(mendfs_events_read(fd, 0, NULL, 8, 0, &next, NULL), EINVAL);
	other = xopen("/proc", O_RDONLY | O_DIRECTORY);
	memset(&st, 0, sizeof(st));
	EXPECT_ERR(mendfs_scrub_step(other, &st), EOPNOTSUPP);
	EXPECT_ERR(mendfs_events_read(other, 0, ev, 8, 0, &next, NULL), EOPNOTSUPP);
	close(other);

	/* nothing found yet */
	n = mendfs_events_read(fd, 0, ev, 8, 0, &next, &lost);
	if (n != 0 || lost)
		die("events before the scrub: %d (lost %llu)", n, (unsigned long long)lost);

	/* one scrub at a time: the child's, while it lives */
	if (pipe(p))
		die("pipe: %s", strerror(errno));
	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (!child) {
		memset(&st, 0, sizeof(st));
		st.meta_budget = 1;
		if (mendfs_scrub_step(fd, &st) != 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1)
		die("the child's first step failed");
	memset(&st, 0, sizeof(st));
	EXPECT_ERR(mendfs_scrub_step(fd, &st), EBUSY);
	st.flags = MENDFS_SCRUB_RESUME;
	EXPECT_ERR(mendfs_scrub_step(fd, &st), EBUSY);
	if (st.meta_checked || st.data_bytes)
		die("a refused step counted something");
	kill(child, SIGKILL);
	if (waitpid(child, &status, 0) != child)
		die("waitpid: %s", strerror(errno));

	memset(&st, 0, sizeof(st));
	st.data_budget = 1 << 20;
	if (mendfs_scrub(fd, &st))
		die("mendfs_scrub: %s", strerror(errno));
	if (st.phase != MENDFS_SCRUB_DONE || mendfs_scrub_step(fd, &st) != 1)
		die("the scrub did not end: phase %u", st.phase);
	if (st.poison_found != 1 || st.csum_found || st.meta_lost || st.meta_unhealed)
		die("scrub totals: poison %llu csum %llu lost %llu unhealed %llu",
		    (unsigned long long)st.poison_found, (unsigned long long)st.csum_found,
		    (unsigned long long)st.meta_lost, (unsigned long long)st.meta_unhealed);
	if (st.data_bytes < 40000 || st.meta_checked < 10 || !st.meta_total || !st.data_total)
		die("too little scrubbed: %llu data bytes, %llu metadata blocks",
		    (unsigned long long)st.data_bytes, (unsigned long long)st.meta_checked);

	/* the event, once */
	n = mendfs_events_read(fd, 0, ev, 8, MENDFS_EV_WAIT_MAX, &next, &lost);
	if (n != 1)
		die("events after the scrub: %d, expected 1", n);
	if (ev[0].kind != MENDFS_EV_POISON || ev[0].cause != MENDFS_EVC_LATENT ||
	    ev[0].count != 1 || strcmp(ev[0].path, rel) || ev[0].offset != off ||
	    ev[0].length != 512 || next != ev[0].seq + 1 || lost)
		die("event: kind %u cause %u count %llu path '%s' offset %llu length %llu seq %llu "
		    "next %llu",
		    ev[0].kind, ev[0].cause, (unsigned long long)ev[0].count, ev[0].path,
		    (unsigned long long)ev[0].offset, (unsigned long long)ev[0].length,
		    (unsigned long long)ev[0].seq, (unsigned long long)next);
	n = mendfs_events_read(fd, next, ev, 8, 100, &next, &lost);
	if (n != 0)
		die("events past the last: %d", n);
	close(fd);
	printf("lib-scrub: pass\n");
	return 0;
}
