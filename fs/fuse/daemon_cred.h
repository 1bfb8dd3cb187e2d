/* SPDX-License-Identifier: MIT */
/*
 * What a FUSE request does not say about its caller: its supplementary groups
 * and whether it holds CAP_FSETID.  Linux needs both to decide whether a
 * setgid bit without group exec goes on a write, truncate, chown or ACL
 * change (setattr_should_drop_sgid, posix_acl_update_mode: it goes when the
 * caller is outside the file's group and lacks CAP_FSETID); the daemon reads
 * them from /proc/PID/status of the calling thread, only in those rare cases.
 */
#ifndef MENDFS_DAEMON_CRED_H
#define MENDFS_DAEMON_CRED_H

#include <stdbool.h>
#include <sys/types.h>

/* Does thread @pid hold CAP_FSETID?  Unreadable (gone): false. */
bool mfsd_cred_fsetid(pid_t pid);

/* Is thread @pid, of filesystem gid @fsgid, a member of group @gid?  Unreadable: false. */
bool mfsd_cred_in_group(pid_t pid, gid_t fsgid, gid_t gid);

#endif
