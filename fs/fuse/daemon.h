/* SPDX-License-Identifier: MIT */
/*
 * The daemon's shared state (struct mfsd, one per mount), its limits, and its
 * one logging helper (log.c): what every piece of fs/fuse that speaks libfuse
 * includes.  The pieces and what each may call:
 *
 *   main.c          start-up, the session, shutdown: calls every piece
 *   options.c       -o and the command line               (calls log)
 *   startup.c       paths, fork and detach, utab, mount flags (calls log)
 *   transport.h     how requests reach the ops: transport_dev.c reads
 *                   /dev/fuse through libfuse's session loop, with the
 *                   hooks of killpriv.c; transport_uring.c adds FUSE over
 *                   io_uring (-o io_uring), its requests that may wait on
 *                   offload.c's threads                   (calls log)
 *   ops.c           the ops table and INIT; ops_inode.c, ops_file.c,
 *                   ops_dir.c and ops_ioctl.c the handlers: they call the
 *                   node table, suid.c, fhandle.c, the core and libfuse,
 *                   never main, options or a transport
 *   node_table.c    the nodes the kernel knows and the open files (calls the core)
 *   commit_thread.c the periodic commit                   (calls the core, log)
 *   suid.c, fhandle.c, log.c: leaves beside the core
 */
#ifndef MENDFS_DAEMON_H
#define MENDFS_DAEMON_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdarg.h>
#include <stdbool.h>

#include "commit_thread.h"
#include "events.h"
#include "node_table.h"
#include "transport.h"

#define MFSD_MAX_WRITE       (1u << 20) /* bytes per write request (FUSE_MAX_PAGES) */
#define MFSD_DEFAULT_THREADS 10         /* worker threads without -o threads: libfuse's default */
#define MFSD_DEFAULT_TIMEOUT 1.0
#define MFSD_DEFAULT_COMMIT  5u /* seconds between periodic journal commits */

struct mfsd {
	struct mfs *fs;
	struct fuse_session *se;
	double timeout; /* attribute and entry timeout, seconds */
	/* -o ro, or remounted read-only (MENDFS_IOC_REMOUNT, ops_ioctl.c): writes refused */
	_Atomic bool read_only;
	bool poison_inject; /* -o poison_inject: MENDFS_IOC_INJECT allowed (root only) */
	bool writeback;     /* -o writeback: the kernel's writeback cache */
	bool dont_mask;     /* POSIX ACLs: the kernel leaves the umask to us (set at INIT) */

	struct mfsd_commit commit;          /* -o commit=SECONDS */
	struct mfsd_evlog evlog;            /* damage events to the log (events.c) */
	struct mfsd_nodes nodes;            /* node table and open files */
	struct mfsd_transport_stats tstats; /* the transport's (transport.h), for mendctl stats */
};

/* The mount a request is for. */
static inline struct mfsd *D(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The open handle of @fi (set by mfsd_file_open). */
static inline struct mfsd_file *mfsd_file_of(const struct fuse_file_info *fi)
{
	return (struct mfsd_file *)(uintptr_t)fi->fh;
}

/*
 * Log a message: "mendfs: MESSAGE" on stderr until mfsd_log_to_syslog, then
 * to syslog at priority @prio.
 */
void mfsd_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mfsd_vlog(int prio, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* From now on, ours and libfuse's messages go to syslog (the daemon detaches). */
void mfsd_log_to_syslog(void);

#endif
