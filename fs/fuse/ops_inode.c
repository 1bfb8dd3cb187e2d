/* SPDX-License-Identifier: MIT */
/*
 * The handlers of names and attributes (ops.h): lookup and forget, which
 * give and take the kernel's lookup references (node_table.h), the
 * attributes, making and removing names, create (a name and an open file),
 * statfs and the extended attributes.  New inodes get the caller's fsuid,
 * its fsgid or the setgid parent's group, and the creator's umask when the
 * kernel leaves it to us (DONT_MASK; the core applies a default ACL instead).
 * LOOKUPs of "." and ".." resolve file handles (fhandle.h).  Calls the node
 * table, suid.c, fhandle.c, the core and libfuse.
 */
#include <errno.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl.h"
#include "fhandle.h"
#include "ops.h"
#include "suid.h"

/*
 * Owner of a new inode: the caller's fsuid, and its fsgid unless the parent
 * directory is setgid (then the directory's group, and a new directory
 * inherits the setgid bit), as on Linux local filesystems.
 */
static int new_owner(fuse_req_t req, uint64_t parent, mode_t *mode, uid_t *uid, gid_t *gid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat pst;
	int ret;

	*uid = ctx->uid;
	*gid = ctx->gid;
	ret = mfs_getattr(D(req)->fs, parent, &pst);
	if (ret)
		return ret;
	if (pst.st_mode & S_ISGID) {
		*gid = pst.st_gid;
		if (S_ISDIR(*mode))
			*mode |= S_ISGID;
	}
	return 0;
}

/* The umask of a create, mknod or mkdir: with DONT_MASK the kernel leaves it to us. */
static mode_t req_umask(fuse_req_t req)
{
	return D(req)->dont_mask ? fuse_req_ctx(req)->umask : 0;
}

/* A negative entry: every change goes through this kernel, so it may be cached. */
static void reply_negative(fuse_req_t req, const struct mfsd *d)
{
	struct fuse_entry_param e = {.entry_timeout = d->timeout};

	fuse_reply_entry(req, &e);
}

void mfsd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mfsd *d = D(req);
	struct fuse_entry_param e;
	struct mfs_ino *ip;
	struct stat st;
	int ret;

	if (mfsd_export_dots(name)) { /* resolving a file handle */
		ret = mfsd_export_lookup(d->fs, parent, name, &st);
		if (ret == -ENOENT) {
			reply_negative(req, d);
			return;
		}
		if (!ret)
			ret = mfsd_node_get(d, st.st_ino, &e);
		if (ret)
			goto fail;
		fuse_reply_entry(req, &e);
		return;
	}
	/* the inode referenced while the directory names it: never a reused number */
	ret = mfs_lookup_get(d->fs, parent, name, &ip);
	if (ret == -ENOENT) {
		reply_negative(req, d);
		return;
	}
	if (!ret)
		ret = mfsd_node_attach(d, ip, &e);
	if (ret)
		goto fail;
	fuse_reply_entry(req, &e);
	return;
fail:
	fuse_reply_err(req, -ret);
}

void mfsd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	mfsd_node_forget(D(req), ino, nlookup);
	fuse_reply_none(req);
}

void mfsd_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	size_t i;

	for (i = 0; i < count; i++)
		mfsd_node_forget(D(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

void mfsd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret;

	(void)fi;
	ret = mfs_getattr(D(req)->fs, ino, &st);
	if (ret == -ENOENT) /* unlinked and freed, the kernel still holding it */
		ret = mfsd_node_getattr(D(req), ino, &st);
	if (ret)
		goto fail;
	fuse_reply_attr(req, &st, D(req)->timeout);
	return;
fail:
	fuse_reply_err(req, -ret);
}

/*
 * Times set on an inode unlinked and freed while the kernel still holds it
 * (no handle was open, so the unlink freed it at once): with -o writeback
 * the kernel keeps mtime and ctime itself and flushes them with a SETATTR
 * when it writes the inode back, after the unlink.  Nothing is left to
 * store them in; the reply carries them (an error here would reach the
 * superblock's writeback error, and a later syncfs(2) would fail with it).
 * Any other change of such an inode stays ENOENT.
 */
#define DEAD_TIMES                                                                                 \
	(MFS_SET_ATIME | MFS_SET_MTIME | MFS_SET_ATIME_NOW | MFS_SET_MTIME_NOW | MFS_SET_CTIME)

static void dead_times(struct stat *st, const struct stat *attr, unsigned valid)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (valid & MFS_SET_ATIME_NOW)
		st->st_atim = now;
	else if (valid & MFS_SET_ATIME)
		st->st_atim = attr->st_atim;
	if (valid & MFS_SET_MTIME_NOW)
		st->st_mtim = now;
	else if (valid & MFS_SET_MTIME)
		st->st_mtim = attr->st_mtim;
	st->st_ctim = valid & MFS_SET_CTIME ? attr->st_ctim : now;
}

void mfsd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                  struct fuse_file_info *fi)
{
	static const struct {
		int fuse;
		unsigned mfs;
	} map[] = {
	        {FUSE_SET_ATTR_MODE, MFS_SET_MODE},
	        {FUSE_SET_ATTR_UID, MFS_SET_UID},
	        {FUSE_SET_ATTR_GID, MFS_SET_GID},
	        {FUSE_SET_ATTR_SIZE, MFS_SET_SIZE},
	        {FUSE_SET_ATTR_ATIME, MFS_SET_ATIME},
	        {FUSE_SET_ATTR_MTIME, MFS_SET_MTIME},
	        {FUSE_SET_ATTR_ATIME_NOW, MFS_SET_ATIME_NOW},
	        {FUSE_SET_ATTR_MTIME_NOW, MFS_SET_MTIME_NOW},
	        {FUSE_SET_ATTR_CTIME, MFS_SET_CTIME},
	        /* FATTR_KILL_SUIDGID (HANDLE_KILLPRIV_V2: truncate and chown) */
	        {FUSE_SET_ATTR_KILL_SUID, MFS_SET_KILL_SUIDGID},
	};
	struct stat st;
	unsigned valid = 0, i;
	int ret;

	/* ftruncate (fi set) acts on the same inode: the open handle keeps it alive */
	(void)fi;
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (to_set & map[i].fuse)
			valid |= map[i].mfs;
	ret = mfsd_setattr_kill(req, ino, to_set, &valid);
	if (ret)
		goto fail;
	ret = mfs_setattr(D(req)->fs, ino, attr, valid, &st);
	if (ret == -ENOENT && !(valid & ~DEAD_TIMES) && !mfsd_node_getattr(D(req), ino, &st)) {
		dead_times(&st, attr, valid);
		ret = 0;
	}
	if (ret)
		goto fail;
	fuse_reply_attr(req, &st, D(req)->timeout);
	return;
fail:
	fuse_reply_err(req, -ret);
}

void mfsd_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n;

	n = mfs_readlink(D(req)->fs, ino, buf, sizeof(buf) - 1);
	if (n < 0)
		goto fail;
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
	return;
fail:
	fuse_reply_err(req, (int)-n);
}

/*
 * The common tail of mknod, mkdir, symlink: one lookup reference for the
 * reply, the node pinned from the reference the creation handed over (never
 * by number: the name may be gone and the number reused by now).
 */
static void reply_new(fuse_req_t req, int ret, struct mfs_ino *ip)
{
	struct fuse_entry_param e;

	if (!ret)
		ret = mfsd_node_attach(D(req), ip, &e);
	if (ret)
		goto fail;
	fuse_reply_entry(req, &e);
	return;
fail:
	fuse_reply_err(req, -ret);
}

/*
 * mknod, mkdir, symlink and create: owner, umask or default ACL
 * (mfs_create_get); on success *@ipp holds a reference to the new inode.
 */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
                     const char *target, struct mfs_ino **ipp)
{
	struct mfs_new_inode ni = {.rdev = rdev, .umask = req_umask(req), .target = target};
	int ret;

	ret = new_owner(req, parent, &mode, &ni.uid, &ni.gid);
	ni.mode = mode;
	if (!ret)
		ret = mfs_create_get(D(req)->fs, parent, name, &ni, NULL, ipp);
	return ret;
}

void mfsd_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct mfs_ino *ip = NULL;
	int ret = -EINVAL;

	if ((mode & S_IFMT) == 0)
		mode |= S_IFREG;
	if (!S_ISDIR(mode) && !S_ISLNK(mode))
		ret = make_node(req, parent, name, mode, rdev, NULL, &ip);
	reply_new(req, ret, ip);
}

void mfsd_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct mfs_ino *ip = NULL;
	int ret;

	ret = make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &ip);
	reply_new(req, ret, ip);
}

void mfsd_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct mfs_ino *ip = NULL;
	int ret = -EINVAL;

	if (target)
		ret = make_node(req, parent, name, S_IFLNK | 0777, 0, target, &ip);
	reply_new(req, ret, ip);
}

/* The kernel holds a node of @ino for the request: its number cannot be reused. */
void mfsd_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	struct stat st;
	int ret;

	ret = mfs_link(D(req)->fs, ino, newparent, newname, &st);
	if (!ret)
		ret = mfsd_node_get(D(req), st.st_ino, &e);
	if (ret)
		goto fail;
	fuse_reply_entry(req, &e);
	return;
fail:
	fuse_reply_err(req, -ret);
}

void mfsd_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -mfs_unlink(D(req)->fs, parent, name));
}

void mfsd_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -mfs_rmdir(D(req)->fs, parent, name));
}

void mfsd_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags)
{
	int ret = -EINVAL;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		goto out; /* RENAME_WHITEOUT: no whiteouts here */
	ret = mfs_rename(D(req)->fs, parent, name, newparent, newname, flags);
out:
	fuse_reply_err(req, -ret);
}

void mfsd_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                 struct fuse_file_info *fi)
{
	struct mfsd *d = D(req);
	struct fuse_entry_param e;
	struct mfs_ino *ip;
	uint64_t ino;
	int ret;

	ret = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &ip);
	if (ret)
		goto fail;
	ino = ip->ino;
	ret = mfsd_node_attach(d, ip, &e); /* the node now pins the inode */
	if (ret)
		goto fail;
	ret = mfsd_file_open(d, ino, fi);
	if (ret) {
		mfsd_node_forget(d, ino, 1);
		goto fail;
	}
	fuse_reply_create(req, &e, fi);
	return;
fail:
	fuse_reply_err(req, -ret);
}

void mfsd_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;
	int ret;

	(void)ino;
	ret = mfs_statfs(D(req)->fs, &st);
	if (ret)
		goto fail;
	fuse_reply_statfs(req, &st);
	return;
fail:
	fuse_reply_err(req, -ret);
}

void mfsd_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                   int flags)
{
	struct stat st;
	int ret = 0;

	/*
	 * A new access ACL sets the mode (the core) and drops setgid if the
	 * caller is outside the file's group and lacks CAP_FSETID (Linux's
	 * posix_acl_update_mode; the kernel's FUSE_SETXATTR_ACL_KILL_SGID needs
	 * the extended SETXATTR, which libfuse 3.14 does not negotiate).
	 */
	flags &= ~MFS_XATTR_KILL_SGID;
	if (mfs_acl_type(name) == MFS_ACL_TYPE_ACCESS) {
		ret = mfs_getattr(D(req)->fs, ino, &st);
		if (!ret && (st.st_mode & S_ISGID) && mfsd_drops_sgid(req, st.st_gid, false))
			flags |= MFS_XATTR_KILL_SGID;
	}
	if (!ret)
		ret = mfs_setxattr(D(req)->fs, ino, name, value, size, flags);
	fuse_reply_err(req, -ret);
}

/*
 * The tail of getxattr and listxattr: @n bytes of @buf (malloc'd, @size
 * bytes), or with @size 0 the size the caller needs, or the error -@n.
 */
static void reply_xattr(fuse_req_t req, char *buf, size_t size, ssize_t n)
{
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size)
		fuse_reply_buf(req, buf, (size_t)n);
	else
		fuse_reply_xattr(req, (size_t)n);
	free(buf);
}

void mfsd_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	ssize_t n = -ENOMEM;

	if (buf || !size)
		n = mfs_getxattr(D(req)->fs, ino, name, buf, size);
	reply_xattr(req, buf, size, n);
}

void mfsd_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	ssize_t n = -ENOMEM;

	if (buf || !size)
		n = mfs_listxattr(D(req)->fs, ino, buf, size);
	reply_xattr(req, buf, size, n);
}

void mfsd_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, -mfs_removexattr(D(req)->fs, ino, name));
}
