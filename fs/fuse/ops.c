/* SPDX-License-Identifier: MIT */
/*
 * The ops table (ops.h) and INIT: what the daemon asks of the kernel.  Read
 * by main (fuse_session_new); calls the daemon's log.
 */
#include <syslog.h>

#include "ops.h"

static void mfsd_init(void *userdata, struct fuse_conn_info *conn)
{
	struct mfsd *d = userdata;

	/*
	 * Correctness first: no writeback cache unless asked for (-o writeback:
	 * the kernel then owns file sizes and times until it writes back), no
	 * splice.  Not HANDLE_KILLPRIV (v1) but v2, added by killpriv.c: the
	 * daemon clears setuid/setgid on write, truncate and open(O_TRUNC) when
	 * the kernel asks (a caller without CAP_FSETID), the kernel on chown, and
	 * the kernel no longer asks for security.capability before every write
	 * (SB_NOSEC: one request per write(2), not two).  No FLUSH handler: writes
	 * reach the device before they are answered, so the first FLUSH gets
	 * ENOSYS and the kernel stops sending them (one request less per close).
	 */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ |
	                          FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
	                          FUSE_CAP_HANDLE_KILLPRIV);
	if (d->writeback) {
		if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
			conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		else
			mfsd_log(LOG_WARNING, "writeback: the kernel offers no writeback cache; "
			                      "writes go through");
	}
	/*
	 * POSIX ACLs: the kernel checks permissions against the access ACL (it
	 * asks with GETXATTR and caches the answer); the core keeps ACL and mode
	 * in step and gives new inodes their ACLs (acl.h).  With DONT_MASK the
	 * kernel passes the umask instead of applying it: a directory's default
	 * ACL replaces it.
	 */
	if ((conn->capable & (FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)) ==
	    (FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		d->dont_mask = true;
	} else {
		mfsd_log(LOG_WARNING,
		         "the kernel offers no POSIX ACLs: ACLs are stored, not enforced");
	}
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	conn->max_write = MFSD_MAX_WRITE;
	conn->time_gran = 1;
}

const struct fuse_lowlevel_ops mfsd_ops = {
        .init = mfsd_init,
        .lookup = mfsd_lookup,
        .forget = mfsd_forget,
        .forget_multi = mfsd_forget_multi,
        .getattr = mfsd_getattr,
        .setattr = mfsd_setattr,
        .readlink = mfsd_readlink,
        .mknod = mfsd_mknod,
        .mkdir = mfsd_mkdir,
        .unlink = mfsd_unlink,
        .rmdir = mfsd_rmdir,
        .symlink = mfsd_symlink,
        .rename = mfsd_rename,
        .link = mfsd_link,
        .open = mfsd_open,
        .read = mfsd_read,
        .write = mfsd_write,
        .write_buf = mfsd_write_buf,
        .release = mfsd_release,
        .fsync = mfsd_fsync,
        .opendir = mfsd_opendir,
        .readdir = mfsd_readdir,
        .readdirplus = mfsd_readdirplus,
        .releasedir = mfsd_release, /* a directory handle is a file handle */
        .fsyncdir = mfsd_fsync,
        .statfs = mfsd_statfs,
        .setxattr = mfsd_setxattr,
        .getxattr = mfsd_getxattr,
        .listxattr = mfsd_listxattr,
        .removexattr = mfsd_removexattr,
        .create = mfsd_create,
        .fallocate = mfsd_fallocate,
        .lseek = mfsd_lseek,
        .ioctl = mfsd_ioctl,
        .copy_file_range = mfsd_copy_file_range,
};
