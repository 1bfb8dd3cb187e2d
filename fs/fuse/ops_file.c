/* SPDX-License-Identifier: MIT */
/*
 * The handlers of open files (ops.h), with the hot path: READ and WRITE.
 * Reads of an image file are answered straight from its page-cache mapping
 * (mfs_read_direct_ip, the kernel copies from it), except large reads over
 * io_uring, made in the ring entry (MFSD_AREA_READ_MIN); other reads are
 * copied into a buffer first (mfsd_read_data, which the fast path shares).  Every call on an open
 * file passes the inode its handle pins (mfsd_file_open, from OPEN to RELEASE) to the core's _ip
 * calls: no I/O takes the inode cache's lock.  A WRITE with the kill flag (killpriv.h) clears
 * setuid/setgid under the write's own inode lock.  Calls the node table, suid.c, the kill flag, the
 * core and libfuse.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "killpriv.h"
#include "ops.h"
#include "suid.h"
#include "transport.h"

#define MFSD_COPY_CHUNK (1u << 20)

/*
 * The daemon cleared setuid/setgid on its own (a write or open(O_TRUNC)
 * whose reply carries no attributes): the kernel's cached mode is stale, and
 * with it what `ls -l` shows and what the kernel checks, until the attribute
 * timeout.  Invalidate the attributes (offset -1: not the page cache).
 */
static void mode_changed(struct mfsd *d, fuse_ino_t ino)
{
	fuse_lowlevel_notify_inval_inode(d->se, ino, -1, 0);
}

void mfsd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mfsd *d = D(req);
	struct stat attr = {0};
	int ret;

	if (d->read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
		ret = -EROFS;
		goto fail;
	}
	/* FUSE_CAP_ATOMIC_O_TRUNC: the truncation of open(O_TRUNC) comes here */
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		unsigned valid = MFS_SET_SIZE;
		struct stat before, after;

		/* HANDLE_KILLPRIV_V2: FUSE_OPEN_KILL_SUIDGID (a caller without CAP_FSETID) */
		if (mfsd_req_kill_suidgid()) {
			valid |= MFS_SET_KILL_SUIDGID;
			ret = mfs_getattr(d->fs, ino, &before);
			if (ret)
				goto fail;
			if (mfsd_sgid_noexec(before.st_mode) &&
			    mfsd_drops_sgid(req, before.st_gid, true))
				valid |= MFS_SET_KILL_SGID;
		}
		ret = mfs_setattr(d->fs, ino, &attr, valid, &after);
		if (ret)
			goto fail;
		if ((valid & MFS_SET_KILL_SUIDGID) && after.st_mode != before.st_mode)
			mode_changed(d, ino); /* the reply to OPEN has no attributes */
	}
	ret = mfsd_file_open(d, ino, fi);
	if (ret)
		goto fail;
	fuse_reply_open(req, fi);
	return;
fail:
	fuse_reply_err(req, -ret);
}

/* The reply of a read: zero-copy, the kernel copies straight from the mapping. */
static int reply_direct(void *arg, const struct iovec *iov, int cnt)
{
	/*
	 * Whatever writev says, the request is answered: if the copy faults
	 * (poison protected after the check) the kernel ends it with EIO.
	 */
	fuse_reply_iov(arg, iov, cnt);
	return 0;
}

int mfsd_read_data(struct mfs *fs, struct mfs_ino *ip, size_t size, off_t off,
                   mfs_direct_emit_fn *emit, void *arg)
{
	struct iovec iov;
	ssize_t n;
	char *buf;
	int ret;

	ret = mfs_read_direct_ip(fs, ip, size, off, emit, arg);
	if (ret != -EOPNOTSUPP)
		return ret;
	/* no mapping the kernel may copy from, poison beside the range, or too fragmented */
	buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	/* a range touching poison is -EIO as a whole: the kernel retries page by page */
	n = mfs_read_ip(fs, ip, buf, size, off);
	if (n >= 0) {
		iov = (struct iovec){.iov_base = buf, .iov_len = (size_t)n};
		ret = emit(arg, &iov, 1);
	} else {
		ret = (int)n;
	}
	free(buf);
	return ret;
}

void mfsd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct mfs_ino *ip = mfsd_file_of(fi)->ip;
	ssize_t n;
	char *area;
	int ret;

	/* before the reply: a stat right after the read must see the new atime */
	(void)ino;
	mfsd_accessed(D(req)->fs, ip, fi->flags);
	/* over io_uring a large read is made in the ring entry: one copy, by the kernel */
	area = size >= MFSD_AREA_READ_MIN ? mfsd_transport_reply_area(size) : NULL;
	if (area) {
		n = mfs_read_ip(D(req)->fs, ip, area, size, off);
		if (n < 0)
			fuse_reply_err(req, (int)-n);
		else
			fuse_reply_buf(req, area, (size_t)n);
		return;
	}
	ret = mfsd_read_data(D(req)->fs, ip, size, off, reply_direct, req);
	if (ret)
		fuse_reply_err(req, -ret);
}

/* The mode of an open file (its handle pins the inode). */
static uint32_t file_mode(struct fuse_file_info *fi, gid_t *gid)
{
	struct mfsd_file *f = mfsd_file_of(fi);
	uint32_t mode;

	pthread_rwlock_rdlock(&f->ip->lock);
	mode = f->ip->di.mode;
	if (gid)
		*gid = f->ip->di.gid;
	pthread_rwlock_unlock(&f->ip->lock);
	return mode;
}

/*
 * A write by a caller without CAP_FSETID (HANDLE_KILLPRIV_V2) clears setuid,
 * setgid if group-executable, and setgid without group exec if the caller is
 * outside the file's group, under the write's own inode lock.  Usually the
 * kernel's empty SETATTR before the write (mfsd_setattr_kill) has done it
 * and the file has no bit left: one shared lock to see that.  *mode: the
 * mode before.
 */
static unsigned write_flags(fuse_req_t req, struct fuse_file_info *fi, uint32_t *mode)
{
	unsigned flags = MFS_WRITE_KILL_SUIDGID;
	gid_t gid;

	if (!mfsd_req_kill_suidgid())
		return 0;
	*mode = file_mode(fi, &gid);
	if (!(*mode & (S_ISUID | S_ISGID)))
		return 0;
	if (mfsd_sgid_noexec(*mode) && mfsd_drops_sgid(req, gid, true))
		flags |= MFS_WRITE_KILL_SGID;
	return flags;
}

/* mfs_write_ip, and the kernel told if the write cleared a bit (the reply has no attributes). */
static ssize_t write_kill(fuse_req_t req, fuse_ino_t ino, const void *buf, size_t size, off_t off,
                          struct fuse_file_info *fi)
{
	uint32_t mode = 0;
	unsigned flags = write_flags(req, fi, &mode);
	ssize_t n;

	n = mfs_write_ip(D(req)->fs, mfsd_file_of(fi)->ip, buf, size, off, flags);
	if (flags && file_mode(fi, NULL) != mode)
		mode_changed(D(req), ino);
	return n;
}

void mfsd_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi)
{
	ssize_t n;

	n = write_kill(req, ino, buf, size, off, fi);
	if (n < 0)
		goto fail;
	fuse_reply_write(req, (size_t)n);
	return;
fail:
	fuse_reply_err(req, (int)-n);
}

void mfsd_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                    struct fuse_file_info *fi)
{
	size_t size = fuse_buf_size(in_buf);
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(size);
	const struct fuse_buf *b = &in_buf->buf[in_buf->idx];
	ssize_t n = -ENOMEM;
	void *copy = NULL;

	if (in_buf->count - in_buf->idx == 1 && !(b->flags & FUSE_BUF_IS_FD)) {
		/* the usual case (no splice): the data is in the request buffer */
		mfsd_write(req, ino, (const char *)b->mem + in_buf->off, size, off, fi);
		return;
	}
	copy = malloc(size ? size : 1);
	if (!copy)
		goto fail;
	mem.buf[0].mem = copy;
	n = fuse_buf_copy(&mem, in_buf, 0);
	if (n < 0)
		goto fail;
	n = write_kill(req, ino, copy, (size_t)n, off, fi);
	if (n < 0)
		goto fail;
	free(copy);
	fuse_reply_write(req, (size_t)n);
	return;
fail:
	free(copy);
	fuse_reply_err(req, (int)-n);
}

void mfsd_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	mfsd_file_close(D(req), fi);
	fuse_reply_err(req, 0);
}

/*
 * Test hook (docs/design/testing.md): with MENDFS_DEBUG_FSYNC_GATE=FIFO, an
 * fsync first waits for a byte from the FIFO while that exists, so that a
 * test can hold one inside the daemon for as long as it needs, and let others
 * run freely by removing it (uring-test.sh, step "fsync aside").  Never set
 * outside tests.
 */
static const char *gate; /* read once: an fsync pays no getenv */

static void gate_read(void)
{
	gate = getenv("MENDFS_DEBUG_FSYNC_GATE");
}

static void fsync_gate(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	char c;
	int fd;

	pthread_once(&once, gate_read);
	if (!gate || !*gate || access(gate, F_OK))
		return;
	mfsd_log(LOG_NOTICE, "MENDFS_DEBUG_FSYNC_GATE: an fsync waits at %s", gate);
	fd = open(gate, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (read(fd, &c, 1) < 0)
		mfsd_log(LOG_WARNING, "MENDFS_DEBUG_FSYNC_GATE: %s", strerror(errno));
	close(fd);
}

void mfsd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	fsync_gate();
	fuse_reply_err(req, -mfs_fsync_ip(D(req)->fs, mfsd_file_of(fi)->ip, datasync != 0));
}

void mfsd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                    struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, -mfs_fallocate_ip(D(req)->fs, mfsd_file_of(fi)->ip, mode, off, len));
}

void mfsd_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	off_t ret;

	(void)ino;
	if (D(req)->writeback) {
		/*
		 * The kernel's writeback cache holds data and sizes the daemon
		 * does not see yet, and it does not write back before asking:
		 * ENOSYS makes it answer itself (all data, a hole at EOF).
		 */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	ret = mfs_lseek_ip(D(req)->fs, mfsd_file_of(fi)->ip, off, whence);
	if (ret < 0)
		goto fail;
	fuse_reply_lseek(req, ret);
	return;
fail:
	fuse_reply_err(req, (int)-ret);
}

void mfsd_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                          struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                          struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct mfs *fs = D(req)->fs;
	size_t done = 0;
	ssize_t n = -EINVAL;
	char *buf = NULL;

	(void)ino_in;
	(void)ino_out;
	if (flags)
		goto fail;
	n = -ENOMEM;
	buf = malloc(MFSD_COPY_CHUNK);
	if (!buf)
		goto fail;
	while (done < len) {
		size_t want = len - done < MFSD_COPY_CHUNK ? len - done : MFSD_COPY_CHUNK;
		ssize_t got, put;

		got = mfs_read_ip(fs, mfsd_file_of(fi_in)->ip, buf, want, off_in + (off_t)done);
		if (got <= 0) {
			n = got;
			break;
		}
		put = mfs_write_ip(fs, mfsd_file_of(fi_out)->ip, buf, (size_t)got,
		                   off_out + (off_t)done, 0);
		if (put <= 0) {
			n = put;
			break;
		}
		done += (size_t)put;
		if (put < got)
			break;
	}
	if (!done && n < 0)
		goto fail;
	free(buf);
	fuse_reply_write(req, done);
	return;
fail:
	free(buf);
	fuse_reply_err(req, (int)-n);
}
