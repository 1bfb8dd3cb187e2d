/* SPDX-License-Identifier: MIT */
/*
 * The daemon's reads and writes of /dev/fuse (libfuse's custom I/O hooks):
 * they look at the raw requests for what libfuse 3.14 does not pass on.
 *
 * FUSE_HANDLE_KILLPRIV_V2 (kernel 5.11, protocol 7.33) makes the daemon clear
 * setuid/setgid on truncate, open(O_TRUNC) and write by a caller without
 * CAP_FSETID.  In return the kernel marks the superblock SB_NOSEC, so a write
 * to a file with no setuid/setgid bit no longer sends a GETXATTR of
 * security.capability first: one request per write(2) instead of two.
 * libfuse 3.14 neither offers the flag nor passes the kill flags of OPEN,
 * CREATE and WRITE on, so the hooks add the flag to the INIT reply and note
 * the kill flag of the request the calling thread is about to handle (libfuse
 * handles a request on the thread that read it).
 */
#ifndef MENDFS_DAEMON_IO_H
#define MENDFS_DAEMON_IO_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Ask for FUSE_HANDLE_KILLPRIV_V2 in the INIT reply if the kernel offers it. */
void mfsd_io_want_killpriv_v2(bool on);
/* The flag was granted (known once INIT has been answered). */
bool mfsd_io_killpriv_v2(void);

/* The hooks (struct fuse_custom_io: read and writev on the session fd). */
ssize_t mfsd_io_read(int fd, void *buf, size_t len, void *userdata);
ssize_t mfsd_io_writev(int fd, struct iovec *iov, int count, void *userdata);

/*
 * The request this thread is handling (OPEN or CREATE with O_TRUNC, WRITE)
 * asks the filesystem to clear setuid, and setgid if group-executable.
 */
bool mfsd_io_kill_suidgid(void);

#endif
