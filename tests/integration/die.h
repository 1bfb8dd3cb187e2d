/* SPDX-License-Identifier: MIT */
/*
 * die.h: the way out of the recovery test programs (recovery-check.c,
 * recovery-matrix.c) when a step they rely on fails: die() prints
 * "PROGRAM: message" on stderr and exits 1; xopen() and xmalloc() die
 * rather than return a failure.  Calls only libc.
 */
#ifndef MENDFS_TESTS_DIE_H
#define MENDFS_TESTS_DIE_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", program_invocation_short_name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* open(@path, @flags, 0644), or die */
static int xopen(const char *path, int flags)
{
	int fd = open(path, flags, 0644);

	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	return fd;
}

/* @n zeroed bytes (at least one), or die */
static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p)
		die("out of memory");
	return p;
}

#endif /* MENDFS_TESTS_DIE_H */
