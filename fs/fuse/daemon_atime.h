/* SPDX-License-Identifier: MIT */
/*
 * The daemon's share of access times (daemon_atime.c): the atime mount
 * options, the mount flags the kernel shows for them, and the call that
 * moves an inode's atime after a READ or READDIR (the core decides, atime.h).
 */
#ifndef MENDFS_DAEMON_ATIME_H
#define MENDFS_DAEMON_ATIME_H

#include <fcntl.h>
#include <stdbool.h>

#include "atime.h"

/*
 * Is @opt an atime option (atime, relatime, strictatime, noatime,
 * nodiratime, diratime)?  If so, apply it to *@flags (MFS_ATIME_*: the last
 * of atime, relatime, strictatime and noatime wins, as with mount(8)).
 */
bool mfsd_atime_opt(const char *opt, unsigned *flags);

/*
 * Show strictatime and nodiratime on the mount at @mnt (mount_setattr):
 * libfuse passes noatime to mount(2) but knows neither of these.  The
 * daemon applies the policy itself either way: the kernel never updates
 * atime on FUSE inodes.  Returns 0 or -errno (the caller warns).
 */
int mfsd_atime_show(const char *mnt, unsigned flags);

/*
 * A READ or READDIR reached @ip through a file opened with @open_flags: move
 * its atime unless O_NOATIME (the kernel checked the caller may use it).
 */
static inline void mfsd_accessed(struct mfs *fs, struct mfs_ino *ip, int open_flags)
{
	if (!(open_flags & O_NOATIME))
		mfs_file_accessed(fs, ip);
}

#endif
