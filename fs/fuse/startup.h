/* SPDX-License-Identifier: MIT */
/*
 * The daemon's start-up chores that concern the system rather than the
 * filesystem (startup.c): absolute paths for a daemon that leaves its
 * working directory, the mount source in libfuse's option list, the mount
 * flags libfuse cannot set, the fork whose parent waits until the mount is
 * live, the detach from the terminal, and the mount's record in libmount's
 * utab that makes umount(8) run umount.fuse.mendfs for it.
 *
 * Called by main; calls libc, mount(8) and the daemon's log.
 */
#ifndef MENDFS_STARTUP_H
#define MENDFS_STARTUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * @path as an absolute path: @path itself if absolute, else the working
 * directory joined with it, leading "./" dropped.  Symbolic links are kept
 * (DEVICE.badblocks stays beside the name given).  Returns a malloc'd
 * string, or NULL with errno set.
 */
char *mfsd_abs_path(const char *path);

/* The directory a file @path (absolute) would be created in exists: 0, or -errno. */
int mfsd_parent_dir_exists(const char *path);

/* @s for a libfuse -o list: ',' and '\' escaped with '\'.  Returns 0, or -1 if too long. */
int mfsd_opt_escape(const char *s, char *out, size_t len);

/*
 * Record the mount of @source on @target in libmount's utab with the
 * helper=fuse.mendfs marker, so that umount(8) runs /sbin/umount.fuse.mendfs
 * (which waits for the daemon) for it.  Done by root only, once per source
 * and target.  Returns 0 (done, already recorded, or not root) or -errno
 * with a reason in @err.
 */
int mfsd_utab_register(const char *source, const char *target, char *err, size_t errlen);

/*
 * Drop that record once the mount is gone, if an unmount that bypassed
 * umount(8) left it.  Returns 0 (dropped, or nothing to drop) or -errno.
 */
int mfsd_utab_unregister(const char *source, const char *target);

/*
 * Show strictatime and nodiratime (MFS_ATIME_* in @flags) on the mount at
 * @mnt (mount_setattr): libfuse passes noatime to mount(2) but knows neither
 * of these.  The daemon applies the policy itself either way: the kernel
 * never updates atime on FUSE inodes.  Returns 0 or -errno (the caller warns).
 */
int mfsd_atime_show(const char *mnt, unsigned flags);

/*
 * Fork before anything is opened (the core starts threads, and fork keeps
 * only one).  The parent waits until the child reports the mount live
 * (mfsd_detach) and exits 0; if the child exits first, the parent exits with
 * its status.  Returns, in the child, the descriptor to pass to mfsd_detach.
 */
int mfsd_fork_and_wait(void);

/*
 * The mount is live: tell the waiting parent through @status_fd, leave the
 * terminal and the session, work in /, and forward stderr, where the core
 * logs, to syslog.
 */
void mfsd_detach(int status_fd);

#endif
