/* SPDX-License-Identifier: MIT */
/*
 * The daemon's one logging helper (daemon.h): stderr in the foreground and
 * until the daemon detaches, syslog after; libfuse's own messages follow it
 * to syslog.  Calls libc and libfuse only.
 */
#include <stdio.h>
#include <syslog.h>

#include "daemon.h"

static bool use_syslog;

void mfsd_vlog(int prio, const char *fmt, va_list ap)
{
	if (use_syslog) {
		vsyslog(prio, fmt, ap);
	} else {
		fputs("mendfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
}

void mfsd_log(int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mfsd_vlog(prio, fmt, ap);
	va_end(ap);
}

static void fuse_log_syslog(enum fuse_log_level level, const char *fmt, va_list ap)
{
	mfsd_vlog((int)level, fmt, ap);
}

void mfsd_log_to_syslog(void)
{
	openlog("mendfs", LOG_PID, LOG_DAEMON);
	use_syslog = true;
	fuse_set_log_func(fuse_log_syslog);
}
