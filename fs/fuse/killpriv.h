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
 * Also the one place that decodes the INIT request and finds its reply, for
 * the INIT hook of a transport (struct mfsd_init_hook).
 *
 * Used by the transports (the hooks) and the handlers (the kill flag, one
 * thread-local load); calls libc and the INIT hook only.  Only the kernel's ABI
 * (<linux/fuse.h>) is used in killpriv.c, not libfuse's headers, whose macros
 * would clash with it.
 */
#ifndef MENDFS_KILLPRIV_H
#define MENDFS_KILLPRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/*
 * What the kernel offers in its INIT request, decoded here once (by the read
 * hook, or mfsd_killpriv_note) for each addition to the INIT reply: killpriv.c
 * adds HANDLE_KILLPRIV_V2 itself, and a transport's INIT hook may add its own
 * (transport_uring.c: FUSE_OVER_IO_URING).
 */
struct mfsd_init_offer {
	uint32_t major, minor;
	uint64_t flags; /* fuse_init_in's flags, and flags2 << 32 with FUSE_INIT_EXT */
};

/* A transport's look at INIT: the offer on its way in, the reply on its way out. */
struct mfsd_init_hook {
	/* The INIT request, about to go to libfuse. */
	void (*offer)(const struct mfsd_init_offer *offer);
	/*
	 * Its reply (not an error), about to go to the kernel through the writev
	 * hook: @init_out, a struct fuse_init_out of @len bytes, may be changed.
	 */
	void (*reply)(void *init_out, size_t len);
};

/* Set the INIT hook (NULL: none), before the session reads its first request. */
void mfsd_init_hook_set(const struct mfsd_init_hook *hook);

/* Ask for FUSE_HANDLE_KILLPRIV_V2 in the INIT reply if the kernel offers it. */
void mfsd_killpriv_want(bool on);

/*
 * Note the kill flag (and decode an INIT) of the raw request @buf of @len bytes that
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
