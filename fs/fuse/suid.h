/* SPDX-License-Identifier: MIT */
/*
 * Setuid and setgid: what the daemon clears and when (suid.c).  With
 * FUSE_HANDLE_KILLPRIV_V2 the daemon, not the kernel, clears setuid/setgid on
 * write, truncate and open(O_TRUNC) by a caller without CAP_FSETID, and the
 * kernel asks through kill flags (killpriv.h) and empty SETATTRs.  Linux also
 * drops a setgid bit without group exec when the caller is outside the
 * file's group and lacks CAP_FSETID (setattr_should_drop_sgid,
 * posix_acl_update_mode); a FUSE request says neither, so the daemon reads
 * the caller's groups and capabilities from /proc/PID/status of the calling
 * thread, only in those rare cases.
 *
 * Called by the handlers; calls the core (mfs_getattr) and libfuse.
 */
#ifndef MENDFS_SUID_H
#define MENDFS_SUID_H

#include <stdbool.h>
#include <sys/stat.h>

#include "daemon.h"

/* A setgid bit without group exec (the one only outsiders lose)? */
static inline bool mfsd_sgid_noexec(mode_t mode)
{
	return (mode & (S_ISGID | S_IXGRP)) == S_ISGID;
}

/*
 * Does the caller of @req lose a setgid bit of a file of group @gid as Linux
 * decides: outside the group and without CAP_FSETID?  @no_fsetid: the kernel
 * said it lacks it.  A caller whose thread has gone counts as outside every
 * group and without the capability.
 */
bool mfsd_drops_sgid(fuse_req_t req, gid_t gid, bool no_fsetid);

/*
 * The setuid/setgid part of a SETATTR of @ino setting @to_set (FUSE_SET_ATTR_*):
 * adds MFS_SET_KILL_SUIDGID and MFS_SET_KILL_SGID to *@valid where the bits
 * go.  Returns 0 or -errno.
 */
int mfsd_setattr_kill(fuse_req_t req, fuse_ino_t ino, int to_set, unsigned *valid);

#endif
