/* SPDX-License-Identifier: MIT */
/*
 * FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 neither offers nor passes on
 * (killpriv.c): the raw requests and the INIT reply, looked at on their way
 * through a transport's reads and writes.
 *
 * HANDLE_KILLPRIV_V2 (kernel 5.11, protocol 7.33) makes the daemon clear
 * setuid/setgid on truncate, open(O_TRUNC) and write by a caller without
 * CAP_FSETID (suid.h).  In return the kernel marks the superblock SB_NOSEC,
 * so a write to a file with no setuid/setgid bit no longer sends a GETXATTR
 * of security.capability first: one request per write(2) instead of two.
 * libfuse 3.14 neither offers the flag nor passes the kill flags of OPEN,
 * CREATE and WRITE on, so the /dev/fuse hooks add the flag to the INIT reply
 * and note the kill flag of the request the calling thread is about to
 * handle (libfuse handles a request on the thread that read it).
 *
 * Used by the transports (the hooks) and the handlers (the kill flag, one
 * thread-local load); calls libc only.  Only the kernel's ABI
 * (<linux/fuse.h>) is used in killpriv.c, not libfuse's headers, whose macros
 * would clash with it.
 */
#ifndef MENDFS_KILLPRIV_H
#define MENDFS_KILLPRIV_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Ask for FUSE_HANDLE_KILLPRIV_V2 in the INIT reply if the kernel offers it. */
void mfsd_killpriv_want(bool on);

/*
 * Note the kill flag (and an INIT) of the raw request @buf of @len bytes that
 * this thread is about to hand to libfuse: what the read hook does, for a
 * transport that receives requests otherwise (transport_uring.c).
 */
void mfsd_killpriv_note(const void *buf, size_t len);

/* The /dev/fuse hooks (struct fuse_custom_io: read and writev on the session fd). */
ssize_t mfsd_killpriv_read(int fd, void *buf, size_t len, void *userdata);
ssize_t mfsd_killpriv_writev(int fd, struct iovec *iov, int count, void *userdata);

/* The kill flag of the request this thread read last (and is now handling). */
extern __thread bool mfsd_killpriv_req;

/*
 * The request this thread is handling (OPEN or CREATE with O_TRUNC, WRITE)
 * asks the filesystem to clear setuid, and setgid if group-executable.
 */
static inline bool mfsd_req_kill_suidgid(void)
{
	return mfsd_killpriv_req;
}

#endif
