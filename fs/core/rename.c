/* SPDX-License-Identifier: MIT */
/*
 * Rename (RENAME_NOREPLACE, RENAME_EXCHANGE), the one namespace operation
 * that locks up to four inodes and checks for cycles (under
 * fs->rename_lock).  Calls the inode cache and table, dir.c, namei.c
 * (mfs_drop_link for a replaced target) and the journal.
 */
#include <errno.h>
#include <linux/fs.h>
#include <stdio.h>

#include "namei.h"

/* --- rename ------------------------------------------------------------------------------ */

/* Is @anc the directory @ino or one of its ancestors?  1, 0 or -errno.  rename_lock held. */
static int is_ancestor(struct mfs *fs, uint64_t anc, uint64_t ino)
{
	uint64_t steps;

	for (steps = 0; steps <= fs->sb.nr_inodes; steps++) {
		struct mfs_ino *ip;
		uint64_t parent;
		int ret;

		if (ino == anc)
			return 1;
		if (ino == MFS_ROOT_INO)
			return 0;
		ret = mfs_iget(fs, ino, &ip);
		if (ret)
			return ret;
		pthread_rwlock_rdlock(&ip->lock);
		parent = ip->di.parent;
		pthread_rwlock_unlock(&ip->lock);
		mfs_iput(fs, ip);
		ino = parent;
	}
	fprintf(stderr, "mendfs: directory parent chain loops\n");
	return -EUCLEAN;
}

/* Move directory @ip from @from to @to: "..", and the parents' link counts. */
static void move_dir(struct mfs_ino *ip, struct mfs_ino *from, struct mfs_ino *to)
{
	if (!S_ISDIR(ip->di.mode) || from == to)
		return;
	ip->di.parent = to->ino;
	if (from->di.nlink > 2)
		from->di.nlink--;
	to->di.nlink++;
}

int mfs_rename(struct mfs *fs, uint64_t olddir, const char *oldname, uint64_t newdir,
               const char *newname, unsigned flags)
{
	struct mfs_ino *odp = NULL, *ndp = NULL, *src = NULL, *dst = NULL;
	bool exchange = flags & RENAME_EXCHANGE;
	struct dent sde, dde, chk;
	struct mfs_txn *txn;
	uint64_t nkey = 0;
	size_t olen, nlen;
	int64_t now;
	int ret, r;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && exchange)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	ret = name_check(oldname, &olen);
	if (!ret)
		ret = name_check(newname, &nlen);
	if (ret)
		return ret;
	if (is_dot(oldname) || is_dot(newname))
		return -EINVAL;
	ret = mfs_dir_get(fs, olddir, &odp);
	if (ret)
		return ret;
	ret = mfs_dir_get(fs, newdir, &ndp);
	if (ret) {
		mfs_iput(fs, odp);
		return ret;
	}
	pthread_mutex_lock(&fs->rename_lock);
	for (;;) {
		struct lockset ls = {0};

		ret = mfs_dir_find_get(fs, odp, oldname, olen, &sde, &src);
		if (ret)
			break;
		dde = (struct dent){0};
		ret = mfs_dir_find_get(fs, ndp, newname, nlen, &dde, &dst);
		if (ret == -ENOENT) {
			dst = NULL;
			ret = exchange ? -ENOENT : 0;
		} else if (!ret && (flags & RENAME_NOREPLACE)) {
			ret = -EEXIST;
		}
		if (ret)
			break;
		if (dst == src) {
			ret = 0; /* two links of one inode (or the same name): nothing to do */
			break;
		}
		if (dst && !exchange) {
			if (S_ISDIR(src->di.mode) && !S_ISDIR(dst->di.mode))
				ret = -ENOTDIR;
			else if (!S_ISDIR(src->di.mode) && S_ISDIR(dst->di.mode))
				ret = -EISDIR;
			if (ret)
				break;
		}
		/* a directory must not move below itself */
		if (odp != ndp && S_ISDIR(src->di.mode)) {
			ret = is_ancestor(fs, src->ino, ndp->ino);
			if (ret)
				ret = ret > 0 ? -EINVAL : ret;
		}
		if (!ret && exchange && odp != ndp && S_ISDIR(dst->di.mode)) {
			ret = is_ancestor(fs, dst->ino, odp->ino);
			if (ret)
				ret = ret > 0 ? -EINVAL : ret;
		}
		if (ret)
			break;

		ls_add(&ls, odp);
		ls_add(&ls, ndp);
		ls_add(&ls, src);
		ls_add(&ls, dst);
		ls_lock(&ls);
		/* the entries may have changed while nothing was locked */
		ret = mfs_dir_find(fs, odp, oldname, olen, &chk, NULL);
		if (!ret && chk.ino == src->ino) {
			ret = mfs_dir_find(fs, ndp, newname, nlen, &chk, &nkey);
			if (dst ? (ret == 0 && chk.ino == dst->ino) : ret == -ENOENT)
				ret = 0;
			else if (ret == 0 || ret == -ENOENT)
				ret = -EAGAIN;
		} else if (!ret) {
			ret = -EAGAIN;
		}
		if (ret == -EAGAIN || ret == -ENOENT) {
			ls_unlock(&ls);
			mfs_iput(fs, src);
			mfs_iput(fs, dst);
			src = dst = NULL;
			continue;
		}
		if (!ret && (ndp->di.nlink == 0 || odp->di.nlink == 0))
			ret = -ENOENT;
		if (!ret && dst && !exchange && S_ISDIR(dst->di.mode) && dst->di.dir_entries)
			ret = -ENOTEMPTY;
		if (!ret)
			ret = mfs_txn_begin(fs, &txn);
		if (ret) {
			ls_unlock(&ls);
			break;
		}
		now = mfs_now_ns();
		if (exchange) {
			ret = mfs_dir_update(fs, txn, ndp, dde.key, src, newname, nlen);
			if (!ret)
				ret = mfs_dir_update(fs, txn, odp, sde.key, dst, oldname, olen);
			if (!ret) {
				move_dir(src, odp, ndp);
				move_dir(dst, ndp, odp);
				dst->di.ctime_ns = now;
			}
		} else if (dst) {
			ret = mfs_dir_update(fs, txn, ndp, dde.key, src, newname, nlen);
			if (!ret)
				ret = mfs_dir_delete(fs, txn, odp, sde.key);
			if (!ret) {
				move_dir(src, odp, ndp);
				if (S_ISDIR(dst->di.mode) && ndp->di.nlink > 2)
					ndp->di.nlink--;
				ret = mfs_drop_link(fs, txn, dst, now);
			}
		} else {
			/* insert first: it is the step that can fail (ENOSPC) */
			ret = mfs_dir_insert(fs, txn, ndp, nkey, src, newname, nlen);
			if (!ret)
				ret = mfs_dir_delete(fs, txn, odp, sde.key);
			if (!ret)
				move_dir(src, odp, ndp);
		}
		if (!ret) {
			src->di.ctime_ns = now;
			touch_mc(odp, now);
			touch_mc(ndp, now);
			ret = mfs_inode_write(fs, txn, src);
			if (!ret)
				ret = mfs_inode_write(fs, txn, odp);
			if (!ret && ndp != odp)
				ret = mfs_inode_write(fs, txn, ndp);
			if (!ret && dst && exchange)
				ret = mfs_inode_write(fs, txn, dst);
		}
		r = mfs_txn_end(txn);
		ret = ret ? ret : r;
		ls_unlock(&ls);
		break;
	}
	pthread_mutex_unlock(&fs->rename_lock);
	mfs_iput(fs, dst);
	mfs_iput(fs, src);
	mfs_iput(fs, ndp);
	mfs_iput(fs, odp);
	return ret;
}
