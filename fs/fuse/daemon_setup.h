/* SPDX-License-Identifier: MIT */
/*
 * The daemon's start-up chores that concern the system rather than the
 * filesystem (daemon_setup.c): absolute paths for a daemon that leaves its
 * working directory, the mount source in libfuse's option list, and the
 * mount's record in libmount's utab that makes umount(8) run
 * umount.fuse.mendfs for it.
 */
#ifndef MENDFS_DAEMON_SETUP_H
#define MENDFS_DAEMON_SETUP_H

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

/*
 * The value of -o fault_inject (a test knob, mendfs(8)): "N" fails device
 * operation N once, "N+" every operation from N on, "0" only counts.
 * Returns 0, or -1 if it is anything else.
 */
int mfsd_parse_fault(const char *val, uint64_t *nth, bool *dying);

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

#endif /* MENDFS_DAEMON_SETUP_H */
