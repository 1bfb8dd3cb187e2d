/* SPDX-License-Identifier: MIT */
/*
 * The extended attribute operations of the core API (mfs_setxattr,
 * mfs_getxattr, mfs_listxattr, mfs_removexattr): each takes the inode and
 * its lock, and for a change a transaction, and calls the storage of
 * xattr.c; the POSIX ACL names go to acl.c, which keeps the mode in step.
 * Calls the inode cache and table, xattr.c, acl.c, the journal and space.c.
 *
 * Locking: ip->lock shared for get and list, exclusive for set and remove.
 */
#include <errno.h>
#include <sys/xattr.h>

#include "acl.h"
#include "mfs_int.h"

/*
 * End an xattr change of @ip made in @txn with result @ret: a new ctime if it
 * succeeded, the inode written, the handle ended.  The first error wins.
 */
static int change_end(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, int ret)
{
	int err;

	if (!ret)
		ip->di.ctime_ns = mfs_now_ns();
	err = mfs_inode_write(fs, txn, ip);
	if (!ret)
		ret = err;
	err = mfs_txn_end(txn);
	return ret ? ret : err;
}

int mfs_setxattr(struct mfs *fs, uint64_t ino, const char *name, const void *value, size_t size,
                 int flags)
{
	struct mfs_txn *txn;
	struct mfs_ino *ip;
	unsigned retries = 0;
	bool tree = false;
	int ret, type;

	ret = mfs_xattr_check_set(fs, name, value, size);
	if (ret)
		return ret;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE | MFS_XATTR_KILL_SGID))
		return -EINVAL;
	type = mfs_acl_type(name);
	if (type && mfs_acl_valid(value, size))
		return -EINVAL;
again:
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&ip->lock);
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	if (type)
		ret = mfs_acl_set(fs, txn, ip, type, value, size, flags & ~MFS_XATTR_KILL_SGID,
		                  flags & MFS_XATTR_KILL_SGID);
	else
		ret = mfs_xattr_set_locked(fs, txn, ip, name, value, size, flags);
	ret = change_end(fs, txn, ip, ret);
	tree = true;
unlock:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	/* no meta block for the tree (the failed change left nothing): wait for an inode
	 * being freed and start again, the attribute looked up anew */
	if (ret == -ENOSPC && tree && mfs_space_retry(fs, MFS_SPACE_META, &retries)) {
		tree = false;
		goto again;
	}
	return ret;
}

ssize_t mfs_getxattr(struct mfs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	struct mfs_ino *ip;
	ssize_t ret;

	ret = mfs_xattr_check_name(name);
	if (ret)
		return ret == -EINVAL ? -ENODATA : ret;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	ret = mfs_xattr_get_locked(fs, ip, name, value, size);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

ssize_t mfs_listxattr(struct mfs *fs, uint64_t ino, char *list, size_t size)
{
	struct mfs_ino *ip;
	ssize_t ret;

	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	ret = mfs_xattr_list_locked(fs, ip, list, size);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

int mfs_removexattr(struct mfs *fs, uint64_t ino, const char *name)
{
	struct mfs_txn *txn;
	struct mfs_ino *ip;
	ssize_t found;
	int ret;

	ret = mfs_xattr_check_name(name);
	if (ret)
		return ret == -EINVAL ? -ENODATA : ret;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&ip->lock);
	/* absent: nothing to write, no transaction */
	found = mfs_xattr_get_locked(fs, ip, name, NULL, 0);
	if (found < 0) {
		ret = (int)found;
		goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	ret = mfs_xattr_remove_locked(fs, txn, ip, name);
	ret = change_end(fs, txn, ip, ret);
unlock:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}
