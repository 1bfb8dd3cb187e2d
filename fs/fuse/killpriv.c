/* SPDX-License-Identifier: MIT */
/*
 * FUSE_HANDLE_KILLPRIV_V2 for libfuse 3.14 (see killpriv.h): the /dev/fuse
 * read and writev hooks, which also decode INIT for a transport's INIT hook.
 * Only the kernel's ABI (<linux/fuse.h>) is used here, not libfuse's headers,
 * whose macros would clash with it.  Calls libc and the INIT hook only.
 */
#include "killpriv.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

static bool want_v2;
static const struct mfsd_init_hook *init_hook; /* set before the session starts */
/* the unique id of the INIT request while its reply is pending, else 0 */
static _Atomic uint64_t init_unique;
static _Atomic bool init_kp; /* ... and HANDLE_KILLPRIV_V2 goes in it */

__thread bool mfsd_killpriv_req;

void mfsd_killpriv_want(bool on)
{
	want_v2 = on;
}

void mfsd_init_hook_set(const struct mfsd_init_hook *hook)
{
	init_hook = hook;
}

/* The argument of a request, if the request is long enough to hold @size bytes of it. */
static const void *req_arg(const void *buf, size_t len, size_t size)
{
	if (len < sizeof(struct fuse_in_header) + size)
		return NULL;
	return (const char *)buf + sizeof(struct fuse_in_header);
}

void mfsd_killpriv_note(const void *buf, size_t n)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_write_in *w;
	const struct fuse_open_in *o;
	const struct fuse_create_in *c;
	const struct fuse_init_in *init;
	struct mfsd_init_offer offer;

	mfsd_killpriv_req = false;
	if (n < sizeof(*in))
		return;
	switch (in->opcode) {
	case FUSE_WRITE:
		w = req_arg(buf, n, sizeof(*w));
		mfsd_killpriv_req = w && (w->write_flags & FUSE_WRITE_KILL_SUIDGID);
		break;
	case FUSE_OPEN:
		o = req_arg(buf, n, sizeof(*o));
		mfsd_killpriv_req = o && (o->open_flags & FUSE_OPEN_KILL_SUIDGID);
		break;
	case FUSE_CREATE:
		c = req_arg(buf, n, sizeof(*c));
		mfsd_killpriv_req = c && (c->open_flags & FUSE_OPEN_KILL_SUIDGID);
		break;
	case FUSE_INIT:
		init = req_arg(buf, n, offsetof(struct fuse_init_in, flags2));
		if (!init)
			break;
		offer = (struct mfsd_init_offer){
		        .major = init->major, .minor = init->minor, .flags = init->flags};
		/* flags2 is there from protocol 7.36 on, valid with FUSE_INIT_EXT */
		if ((init->flags & FUSE_INIT_EXT) &&
		    req_arg(buf, n, offsetof(struct fuse_init_in, flags2) + sizeof(init->flags2)))
			offer.flags |= (uint64_t)init->flags2 << 32;
		/* protocol 7.33 has the flag */
		atomic_store(&init_kp, want_v2 && offer.major == 7 && offer.minor >= 33 &&
		                               (offer.flags & FUSE_HANDLE_KILLPRIV_V2));
		atomic_store(&init_unique, in->unique);
		if (init_hook && init_hook->offer)
			init_hook->offer(&offer);
		break;
	default:
		break;
	}
}

ssize_t mfsd_killpriv_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n;

	(void)userdata;
	mfsd_killpriv_req = false;
	n = read(fd, buf, len);
	if (n > 0)
		mfsd_killpriv_note(buf, (size_t)n);
	return n;
}

ssize_t mfsd_killpriv_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *out;
	struct fuse_init_out *init;
	uint64_t unique = atomic_load(&init_unique);

	(void)userdata;
	if (unique && count >= 2 && iov[0].iov_len >= sizeof(*out)) {
		out = iov[0].iov_base;
		if (out->unique == unique) {
			atomic_store(&init_unique, 0);
			init = iov[1].iov_base;
			if (out->error == 0 && atomic_load(&init_kp) &&
			    iov[1].iov_len >= offsetof(struct fuse_init_out, max_background))
				init->flags |= FUSE_HANDLE_KILLPRIV_V2;
			if (out->error == 0 && init_hook && init_hook->reply)
				init_hook->reply(iov[1].iov_base, iov[1].iov_len);
		}
	}
	return writev(fd, iov, count);
}
