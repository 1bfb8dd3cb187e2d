/* SPDX-License-Identifier: MIT */
/*
 * The fast path (transport.h's mfsd_fast_fn): WRITE and READ of an open
 * file, decoded from the kernel's ABI and answered with one send of the
 * transport, without libfuse.  libfuse's request processing costs a 4 KiB
 * write about as much as mendfs's own work on it: a calloc'd request and its
 * mutex, the session's request list under a lock, the reply composed in a
 * second allocation, the loop's mutexes: ~1 000 of a 4 KiB overwrite's
 * ~2 750 user-space instructions (docs/benchmarks/data-path.md).  These two
 * requests need none of it: no interrupt callback, no credentials, no reply
 * data but the count or the bytes.
 *
 * The calls are those of ops_file.c's mfsd_write and mfsd_read, on the inode
 * the file handle pins.  What the fast path leaves to libfuse: a WRITE with
 * FUSE_WRITE_KILL_SUIDGID (the kill needs the caller's credentials,
 * killpriv.h), a READ the transport wants made in its ring entry
 * (mfsd_transport_reply_area), and anything malformed (libfuse answers it
 * as it always did).  The daemon's debug mode (-o debug) turns the fast path
 * off, so that libfuse prints every request.
 *
 * Calls the core, ops_file.c's mfsd_read_data, the transport's reply area
 * and the reply path it is given.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ops.h"

/* The reply's header in front of @cnt iovecs (at most MFS_DIRECT_IOV_MAX). */
struct fast_reply {
	const struct mfsd_reply_to *to;
	uint64_t unique;
};

static void send_error(const struct fast_reply *r, int err)
{
	struct fuse_out_header out = {.len = sizeof(out), .error = -err, .unique = r->unique};
	struct iovec iov = {.iov_base = &out, .iov_len = sizeof(out)};

	r->to->send(r->to->ctx, &iov, 1);
}

/* mfs_direct_emit_fn: the data of a READ, behind its header. */
static int send_data(void *arg, const struct iovec *iov, int cnt)
{
	const struct fast_reply *r = arg;
	struct iovec v[MFS_DIRECT_IOV_MAX + 1];
	struct fuse_out_header out = {.len = sizeof(out), .unique = r->unique};
	int i;

	if (cnt > MFS_DIRECT_IOV_MAX)
		return -EINVAL; /* the core never passes more */
	v[0] = (struct iovec){.iov_base = &out, .iov_len = sizeof(out)};
	for (i = 0; i < cnt; i++) {
		v[i + 1] = iov[i];
		out.len += (uint32_t)iov[i].iov_len;
	}
	/*
	 * Whatever the send says, the request is answered: if the kernel's
	 * copy from the mapping faults (poison protected after the check) it
	 * ends the request with EIO, as for libfuse's reply (mfsd_read).
	 */
	r->to->send(r->to->ctx, v, cnt + 1);
	return 0;
}

static bool fast_write(struct mfsd *d, const struct fuse_in_header *in,
                       const struct mfsd_reply_to *to)
{
	const struct fuse_write_in *w = (const void *)(in + 1);
	struct fast_reply r = {.to = to, .unique = in->unique};
	struct fuse_out_header out = {.len = sizeof(out), .unique = in->unique};
	struct fuse_write_out wo = {0};
	struct iovec iov[2];
	ssize_t n;

	/*
	 * The layout of protocol 7.9 on (the kernel speaks no older one to a
	 * daemon that answered INIT with libfuse's minor); the data follows.
	 */
	if (in->len < sizeof(*in) + sizeof(*w) || w->size != in->len - sizeof(*in) - sizeof(*w))
		return false;
	if (w->write_flags & FUSE_WRITE_KILL_SUIDGID)
		return false;
	n = mfs_write_ip(d->fs, mfsd_file_ip((struct mfsd_file *)(uintptr_t)w->fh), w + 1, w->size,
	                 (off_t)w->offset, 0);
	if (n < 0) {
		send_error(&r, (int)-n);
		return true;
	}
	wo.size = (uint32_t)n;
	out.len += sizeof(wo);
	iov[0] = (struct iovec){.iov_base = &out, .iov_len = sizeof(out)};
	iov[1] = (struct iovec){.iov_base = &wo, .iov_len = sizeof(wo)};
	to->send(to->ctx, iov, 2);
	return true;
}

static bool fast_read(struct mfsd *d, const struct fuse_in_header *in,
                      const struct mfsd_reply_to *to)
{
	const struct fuse_read_in *rd = (const void *)(in + 1);
	struct fast_reply r = {.to = to, .unique = in->unique};
	struct mfs_ino *ip;
	int ret;

	if (in->len < sizeof(*in) + sizeof(*rd))
		return false;
	if (rd->size >= MFSD_AREA_READ_MIN && mfsd_transport_reply_area(rd->size))
		return false; /* made in the ring entry (mfsd_read) */
	ip = mfsd_file_ip((struct mfsd_file *)(uintptr_t)rd->fh);
	mfsd_accessed(d->fs, ip, (int)rd->flags);
	ret = mfsd_read_data(d->fs, ip, rd->size, (off_t)rd->offset, send_data, &r);
	if (ret)
		send_error(&r, -ret);
	return true;
}

bool mfsd_fast_request(void *arg, const void *req, size_t len, const struct mfsd_reply_to *to)
{
	const struct fuse_in_header *in = req;

	if (len < sizeof(*in) || in->len != len)
		return false;
	switch (in->opcode) {
	case FUSE_WRITE:
		return fast_write(arg, in, to);
	case FUSE_READ:
		return fast_read(arg, in, to);
	default:
		return false;
	}
}
