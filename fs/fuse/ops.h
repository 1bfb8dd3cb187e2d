/* SPDX-License-Identifier: MIT */
/*
 * The FUSE handlers, one per request (libfuse's low-level API), and the ops
 * table that names them (ops.c).  Every handler maps one request to one call
 * of the core API (fs/core/mfs_ops.h) and replies exactly once, through a
 * single error exit, as libfuse's example/passthrough_ll.c does.
 *
 *   ops_inode.c  names and attributes: lookup, forget, getattr, setattr,
 *                readlink, mknod, mkdir, symlink, link, unlink, rmdir,
 *                rename, create, statfs, the xattrs
 *   ops_file.c   open files: open, read, write, release, fsync, fallocate,
 *                lseek, copy_file_range (read and write are the hot path)
 *   ops_dir.c    open directories: opendir, readdir, readdirplus
 *                (releasedir and fsyncdir are release and fsync)
 *   ops_ioctl.c  the recovery ioctls
 *
 * The table is main's (fuse_session_new); handlers call the node table,
 * suid.c, fhandle.c, the kill flag of killpriv.h, the core and libfuse, and
 * never one another across files.
 */
#ifndef MENDFS_OPS_H
#define MENDFS_OPS_H

#include <fcntl.h>

#include "atime.h"
#include "daemon.h"

extern const struct fuse_lowlevel_ops mfsd_ops;

/*
 * Over io_uring, a read of this size or more is made through the engine
 * straight into the ring entry (mfsd_transport_reply_area): the pmem backend
 * reads it with pread(2), the kernel copying from the image's page cache.  A
 * direct (zero-copy) reply would be copied by the daemon out of the image's
 * mapping instead, faulting on every page this process has not touched.
 * Smaller reads stay direct: no engine request, and at most a page or two.
 */
#define MFSD_AREA_READ_MIN (64u * 1024)

/*
 * A READ or READDIR reached @ip through a file opened with @open_flags: move
 * its atime unless O_NOATIME (the kernel checked the caller may use it).
 */
static inline void mfsd_accessed(struct mfs *fs, struct mfs_ino *ip, int open_flags)
{
	if (!(open_flags & O_NOATIME))
		mfs_file_accessed(fs, ip);
}

/*
 * ops_file.c: the bytes [@off, @off + @size) of @ip, clipped at EOF, handed to
 * @emit: zero-copy from the mapping (mfs_read_direct_ip), or copied into a
 * buffer where that cannot be.  Returns @emit's result or -errno (@emit not
 * called: the caller replies with the error).
 */
int mfsd_read_data(struct mfs *fs, struct mfs_ino *ip, size_t size, off_t off,
                   mfs_direct_emit_fn *emit, void *arg);

/* fastpath.c: WRITE and READ without libfuse (transport.h's mfsd_fast_fn). */
bool mfsd_fast_request(void *arg, const void *req, size_t len, const struct mfsd_reply_to *to);

/* ops_inode.c */
void mfsd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void mfsd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void mfsd_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void mfsd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mfsd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                  struct fuse_file_info *fi);
void mfsd_readlink(fuse_req_t req, fuse_ino_t ino);
void mfsd_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void mfsd_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void mfsd_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void mfsd_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void mfsd_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void mfsd_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void mfsd_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags);
void mfsd_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                 struct fuse_file_info *fi);
void mfsd_statfs(fuse_req_t req, fuse_ino_t ino);
void mfsd_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                   int flags);
void mfsd_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void mfsd_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void mfsd_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ops_file.c */
void mfsd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mfsd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void mfsd_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi);
void mfsd_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                    struct fuse_file_info *fi);
void mfsd_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mfsd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void mfsd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                    struct fuse_file_info *fi);
void mfsd_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void mfsd_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                          struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                          struct fuse_file_info *fi_out, size_t len, int flags);

/* ops_dir.c */
void mfsd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void mfsd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  struct fuse_file_info *fi);
void mfsd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi);

/* ops_ioctl.c */
void mfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
                size_t out_bufsz);

#endif
