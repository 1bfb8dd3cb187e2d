/* SPDX-License-Identifier: MIT */
/*
 * setattr: an inode's mode, owner, times, and its size through truncate.
 * Calls the inode cache and table, file.c (mfs_truncate), acl.c (a chmod
 * rewrites the access ACL) and the journal.
 */
#include <errno.h>

#include "acl.h"
#include "mfs_int.h"

int mfs_setattr(struct mfs *fs, uint64_t ino, const struct stat *attr, unsigned valid,
                struct stat *st)
{
	struct mfs_inode *di;
	struct mfs_ino *ip;
	struct mfs_txn *txn;
	int64_t now = mfs_now_ns();
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	di = &ip->di;
	pthread_rwlock_wrlock(&ip->lock);
	if ((valid & MFS_SET_SIZE) && !S_ISREG(di->mode)) {
		ret = S_ISDIR(di->mode) ? -EISDIR : -EINVAL;
		goto unlock;
	}
	if (valid & MFS_SET_SIZE) {
		/* its own bounded transactions (frees past the new EOF), before the rest */
		ret = mfs_truncate(fs, ip, (uint64_t)attr->st_size);
		if (ret)
			goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	if (valid & MFS_SET_SIZE)
		di->mtime_ns = now;
	if (valid & MFS_SET_MODE) {
		uint32_t old = di->mode;

		di->mode = (di->mode & S_IFMT) | ((uint32_t)attr->st_mode & 07777);
		ret = mfs_acl_update_chmod(fs, txn, ip); /* the ACL's classes follow */
		if (ret) {
			di->mode = old;
			goto end;
		}
	} else if ((valid & MFS_SET_KILL_SUIDGID) && !S_ISDIR(di->mode)) {
		di->mode = mfs_mode_kill_suidgid(di->mode);
	}
	if (valid & (MFS_SET_UID | MFS_SET_GID)) {
		if (valid & MFS_SET_UID)
			di->uid = (uint32_t)attr->st_uid;
		if (valid & MFS_SET_GID)
			di->gid = (uint32_t)attr->st_gid;
		/*
		 * As Linux: chown of a non-directory drops setuid, and setgid if
		 * group-exec (unless the caller sets the mode in the same call).
		 */
		if (!S_ISDIR(di->mode) && !(valid & MFS_SET_MODE))
			di->mode = mfs_mode_kill_suidgid(di->mode);
	}
	/* setgid without group exec, by a caller outside the group (setattr_should_drop_sgid) */
	if ((valid & MFS_SET_KILL_SGID) &&
	    (valid & (MFS_SET_KILL_SUIDGID | MFS_SET_UID | MFS_SET_GID)) &&
	    !(valid & MFS_SET_MODE) && !S_ISDIR(di->mode))
		di->mode &= ~(uint32_t)S_ISGID;
	if (valid & MFS_SET_ATIME_NOW)
		di->atime_ns = now;
	else if (valid & MFS_SET_ATIME)
		di->atime_ns = mfs_ts_ns(&attr->st_atim);
	if (valid & MFS_SET_MTIME_NOW)
		di->mtime_ns = now;
	else if (valid & MFS_SET_MTIME)
		di->mtime_ns = mfs_ts_ns(&attr->st_mtim);
	if (valid & MFS_SET_CTIME)
		di->ctime_ns = mfs_ts_ns(&attr->st_ctim);
	else
		di->ctime_ns = now;
	ret = mfs_inode_write(fs, txn, ip);
end:
	r = mfs_txn_end(txn);
	ret = ret ? ret : r;
unlock:
	if (!ret && st)
		mfs_inode_to_stat(ip, st);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}
