/* SPDX-License-Identifier: MIT */
/*
 * The namespace operations that add and drop links: create (mknod, mkdir,
 * symlink), link, unlink, rmdir, and readlink beside the symlink's target
 * block.  Calls the inode cache and table, dir.c, acl.c (the ACLs of new
 * inodes), the block map (mfs_bmap), xattr_blocks.c, the orphan tree, the
 * allocator, the journal and space.c.
 *
 * unlink and rmdir look the name up once, under the directory's lock, and
 * lock the inode after it when its number is higher or its lock is free
 * (lock_victim).  Otherwise an operation that needs a second inode whose
 * number it only learns from a directory entry (unlink, rmdir, rename) finds
 * it under a shared lock, takes its reference, drops the lock, locks
 * everything in order and looks the entry up again; if it changed meanwhile
 * it starts over.
 *
 * Failure leaves the filesystem as it was: allocations happen before the
 * entry tree changes (the B+tree leaves itself unchanged when it cannot
 * allocate), and a new inode whose entry could not be inserted is given back
 * in the same transaction.  An inode whose last link goes is freed in the
 * same transaction when it has no user (pins, the daemon's lookups, do not
 * count), or else put on the orphan list and freed by its last user's
 * mfs_iput().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "acl.h"
#include "atime.h"
#include "namei.h"

/*
 * A link of @ip went (the caller holds @ip's lock and one reference).  At
 * nlink zero a small inode nobody else uses (its other references, if any,
 * are pins: the kernel's lookups, mfs_ipin) is freed in this transaction and
 * marked dead, so that mfs_iget refuses its number from then on; any other
 * (open files, operations under way on it, files too large for one
 * transaction) joins the orphan list and is freed when its last user goes
 * (mfs_iput).  No new user can appear meanwhile: its last entry is gone under
 * the directory's lock, and mfs_iget takes references under icache_lock,
 * where mfs_inode_unlinked decides.
 */
int mfs_drop_link(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, int64_t now)
{
	int ret;

	if (S_ISDIR(ip->di.mode) || ip->di.nlink <= 1)
		ip->di.nlink = 0;
	else
		ip->di.nlink--;
	ip->di.ctime_ns = now;
	if (ip->di.nlink == 0) {
		mfs_atime_clean(fs, ip); /* nobody will read it through a name again */
		/*
		 * Freed (dead): the caller's mfs_iput() and the last pin's only
		 * drop the memory.  Only a small inode is freed in this
		 * transaction; a larger one goes on the orphan list and the last
		 * user's mfs_iput() frees it in bounded steps.
		 */
		if (mfs_inode_unlinked(fs, ip, mfs_inode_free_is_small(ip))) {
			if (mfs_inode_free(fs, txn, ip) == 0)
				return 0;
			mfs_inode_undead(fs, ip); /* an orphan after all */
		}
		mfs_space_unlinked(fs); /* freed by a later mfs_iput: space.c waits for it */
		if (ip->di.iflags & MFS_IFL_ORPHAN) /* already: a truncate was cut short */
			return mfs_inode_write(fs, txn, ip);
		ret = mfs_orphan_add(fs, txn, ip->ino);
		if (!ret)
			ip->di.iflags |= MFS_IFL_ORPHAN;
		else
			/* freed at its last mfs_iput all the same; only a crash would leak it */
			fprintf(stderr, "mendfs: inode %llu: orphan list: %s\n",
			        (unsigned long long)ip->ino, strerror(-ret));
	}
	return mfs_inode_write(fs, txn, ip);
}

/* --- creation --------------------------------------------------------------------------- */

/* A long symlink target in a data block of its own (inode fields set by the caller). */
static int symlink_block(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip,
                         const char *target, size_t len)
{
	uint64_t pblk, got;
	uint8_t *buf;
	int ret;

	if (posix_memalign((void **)&buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	memset(buf, 0, MFS_BLOCK_SIZE);
	memcpy(buf, target, len);
	ret = mfs_alloc_data(fs, txn, 0, 1, &pblk, &got);
	if (!ret) {
		ret = blk_write(fs->dev, pblk * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE, 0);
		if (ret) {
			mfs_free_data(fs, txn, pblk, 1);
		} else {
			mfs_txn_ordered(txn); /* the block reaches the device before the commit */
			ip->di.u.ext[0] = (struct mfs_extent){.lblk = 0, .pblk = pblk, .len = 1};
			ip->di.nr_inline = 1;
			ip->di.blocks = 1;
		}
	}
	free(buf);
	return ret;
}

/*
 * mknod, mkdir and symlink: a new inode @ni (type checked) named @name in @dir.
 * With @ipp, its reference is handed over instead of dropped.
 */
static int create(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
                  struct stat *st, struct mfs_ino **ipp)
{
	const char *target = ni->target;
	mode_t mode = ni->mode;
	struct mfs_ino *dp, *ip = NULL;
	struct mfs_txn *txn;
	uint64_t key;
	size_t len, tlen = 0;
	unsigned retries = 0, short_of = 0;
	int64_t now;
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = name_check(name, &len);
	if (ret)
		return ret;
	if (is_dot(name))
		return -EEXIST;
	if (target) {
		tlen = strnlen(target, SYMLINK_MAX + 1);
		if (tlen > SYMLINK_MAX)
			return -ENAMETOOLONG;
		if (tlen == 0)
			return -ENOENT;
	}
again:
	ret = mfs_dir_get(fs, dir, &dp);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&dp->lock);
	if (dp->di.nlink == 0) {
		ret = -ENOENT; /* removed while we held it */
		goto unlock;
	}
	if (S_ISDIR(mode) && dp->di.nlink >= UINT32_MAX - 1) {
		ret = -EMLINK;
		goto unlock;
	}
	ret = mfs_dir_find(fs, dp, name, len, NULL, &key);
	if (ret != -ENOENT) {
		ret = ret ? ret : -EEXIST;
		goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	ret = mfs_inode_new(fs, txn, mode, ni->uid, ni->gid, &ip);
	short_of = MFS_SPACE_META; /* the inode, or below the directory's tree */
	if (ret)
		goto end;
	now = ip->di.ctime_ns;
	if (S_ISCHR(mode) || S_ISBLK(mode))
		ip->di.rdev = (uint32_t)ni->rdev;
	if (S_ISDIR(mode))
		ip->di.parent = dp->ino;
	if (target) {
		ip->di.size = tlen;
		if (tlen <= MFS_INLINE_DATA) {
			memcpy(ip->di.u.data, target, tlen);
			ip->di.nr_inline = (uint16_t)tlen;
			ip->di.iflags |= MFS_IFL_INLINE_DATA;
		} else {
			ret = symlink_block(fs, txn, ip, target, tlen);
			if (ret == -ENOSPC)
				short_of = MFS_SPACE_DATA;
		}
	}
	if (!ret)
		ret = mfs_acl_inherit(fs, txn, dp, ip, ni->umask); /* mode and ACLs (acl.h) */
	if (!ret)
		ret = mfs_inode_write(fs, txn, ip);
	if (!ret)
		ret = mfs_dir_insert(fs, txn, dp, key, ip, name, len);
	if (ret) {
		/* give back what this operation took, in the same transaction */
		if (target && !(ip->di.iflags & MFS_IFL_INLINE_DATA) && ip->di.nr_inline)
			mfs_free_data(fs, txn, ip->di.u.ext[0].pblk, 1);
		if (ip->di.xattr_root)
			mfs_xattr_release(fs, txn, ip);
		mfs_inode_discard(fs, txn, ip);
		ip = NULL;
		goto end;
	}
	if (S_ISDIR(mode))
		dp->di.nlink++;
	touch_mc(dp, now);
	ret = mfs_inode_write(fs, txn, dp);
end:
	r = mfs_txn_end(txn);
	ret = ret ? ret : r;
	if (ip)
		short_of = 0; /* made: not to be made again */
unlock:
	pthread_rwlock_unlock(&dp->lock);
	if (ip) {
		if (!ret && st)
			mfs_inode_to_stat(ip, st);
		if (!ret && ipp)
			*ipp = ip;
		else
			mfs_iput(fs, ip);
	}
	mfs_iput(fs, dp);
	/*
	 * An allocation short of space (everything it took given back): wait for
	 * frees under way, commit data frees, and start again, the name looked
	 * up anew (the directory is not held meanwhile).
	 */
	if (ret == -ENOSPC && short_of && mfs_space_retry(fs, short_of, &retries)) {
		short_of = 0;
		goto again;
	}
	return ret;
}

int mfs_create_get(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
                   struct stat *st, struct mfs_ino **ipp)
{
	struct mfs_new_inode n = *ni;

	switch (n.mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		n.target = NULL;
		break;
	case S_IFLNK:
		if (!n.target)
			return -EINVAL;
		n.mode = S_IFLNK | 0777;
		break;
	default:
		return -EINVAL;
	}
	n.mode &= S_IFMT | 07777;
	return create(fs, dir, name, &n, st, ipp);
}

int mfs_create(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
               struct stat *st)
{
	return mfs_create_get(fs, dir, name, ni, st, NULL);
}

int mfs_mknod(struct mfs *fs, uint64_t dir, const char *name, mode_t mode, dev_t rdev, uid_t uid,
              gid_t gid, struct stat *st)
{
	struct mfs_new_inode ni = {.mode = mode, .rdev = rdev, .uid = uid, .gid = gid};

	if ((mode & S_IFMT) == 0)
		ni.mode |= S_IFREG;
	else if (S_ISDIR(mode) || S_ISLNK(mode))
		return -EINVAL;
	return mfs_create(fs, dir, name, &ni, st);
}

int mfs_mkdir(struct mfs *fs, uint64_t dir, const char *name, mode_t mode, uid_t uid, gid_t gid,
              struct stat *st)
{
	struct mfs_new_inode ni = {.mode = S_IFDIR | (mode & 07777), .uid = uid, .gid = gid};

	return mfs_create(fs, dir, name, &ni, st);
}

int mfs_symlink(struct mfs *fs, uint64_t dir, const char *name, const char *target, uid_t uid,
                gid_t gid, struct stat *st)
{
	struct mfs_new_inode ni = {.mode = S_IFLNK, .uid = uid, .gid = gid, .target = target};

	return mfs_create(fs, dir, name, &ni, st);
}

ssize_t mfs_readlink(struct mfs *fs, uint64_t ino, char *buf, size_t size)
{
	struct mfs_ino *ip;
	uint64_t pblk = 0, count = 0;
	bool unwritten = false;
	uint8_t *blk = NULL;
	size_t len;
	ssize_t ret;

	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ip->lock);
	if (!S_ISLNK(ip->di.mode)) {
		ret = -EINVAL;
		goto out;
	}
	len = ip->di.size < size ? ip->di.size : size;
	if (ip->di.iflags & MFS_IFL_INLINE_DATA) {
		memcpy(buf, ip->di.u.data, len);
		ret = (ssize_t)len;
		goto out;
	}
	if (!(ip->di.iflags & MFS_IFL_EXTENT_TREE) && ip->di.nr_inline >= 1 &&
	    ip->di.u.ext[0].lblk == 0 && !(ip->di.u.ext[0].flags & MFS_EXT_UNWRITTEN)) {
		pblk = ip->di.u.ext[0].pblk;
	} else {
		ret = mfs_bmap(fs, ip, 0, &pblk, &count, &unwritten);
		if (ret)
			goto out;
	}
	if (!pblk || unwritten || pblk < fs->sb.data_start ||
	    pblk - fs->sb.data_start >= fs->sb.data_len) {
		fprintf(stderr, "mendfs: symlink %llu: target block %llu invalid\n",
		        (unsigned long long)ino, (unsigned long long)pblk);
		ret = -EUCLEAN;
		goto out;
	}
	if (posix_memalign((void **)&blk, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
		ret = -ENOMEM;
		goto out;
	}
	ret = blk_read(fs->dev, pblk * MFS_SECTORS_PER_BLOCK, blk, MFS_BLOCK_SIZE, 0);
	if (!ret) {
		memcpy(buf, blk, len);
		ret = (ssize_t)len;
	}
	free(blk);
out:
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

int mfs_link(struct mfs *fs, uint64_t ino, uint64_t newdir, const char *newname, struct stat *st)
{
	struct lockset ls = {0};
	struct mfs_ino *ip, *dp;
	struct mfs_txn *txn;
	uint64_t key;
	int64_t now = mfs_now_ns();
	size_t len;
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = name_check(newname, &len);
	if (ret)
		return ret;
	if (is_dot(newname))
		return -EEXIST;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	if (S_ISDIR(ip->di.mode)) {
		mfs_iput(fs, ip);
		return -EPERM;
	}
	ret = mfs_dir_get(fs, newdir, &dp);
	if (ret) {
		mfs_iput(fs, ip);
		return ret;
	}
	ls_add(&ls, dp);
	ls_add(&ls, ip);
	ls_lock(&ls);
	if (ip->di.nlink == 0 || dp->di.nlink == 0) {
		ret = -ENOENT;
		goto unlock;
	}
	if (ip->di.nlink >= MFS_LINK_MAX) {
		ret = -EMLINK;
		goto unlock;
	}
	ret = mfs_dir_find(fs, dp, newname, len, NULL, &key);
	if (ret != -ENOENT) {
		ret = ret ? ret : -EEXIST;
		goto unlock;
	}
	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		goto unlock;
	ret = mfs_dir_insert(fs, txn, dp, key, ip, newname, len);
	if (!ret) {
		ip->di.nlink++;
		ip->di.ctime_ns = now;
		touch_mc(dp, now);
		ret = mfs_inode_write(fs, txn, ip);
		if (!ret)
			ret = mfs_inode_write(fs, txn, dp);
	}
	r = mfs_txn_end(txn);
	ret = ret ? ret : r;
	if (!ret && st)
		mfs_inode_to_stat(ip, st);
unlock:
	ls_unlock(&ls);
	mfs_iput(fs, dp);
	mfs_iput(fs, ip);
	return ret;
}

/* --- removal ---------------------------------------------------------------------------- */

/*
 * Find @name in @dp, take a reference on its inode into *ipp and lock both
 * (@ls) for writing.  The name is looked up once, under @dp's lock, when the
 * inode's lock can be taken in order (a higher number) or without waiting
 * (trylock); otherwise both are locked in ascending order and the name is
 * looked up again, starting over if it changed meanwhile.  0, -ENOENT,
 * -EUCLEAN (the entry names a free inode) or -errno.
 */
static int lock_victim(struct mfs *fs, struct mfs_ino *dp, const char *name, size_t len,
                       struct dent *de, struct mfs_ino **ipp, struct lockset *ls)
{
	struct mfs_ino *ip;
	struct dent again;
	int ret;

	pthread_rwlock_wrlock(&dp->lock);
	ret = mfs_dir_find(fs, dp, name, len, de, NULL);
	if (!ret) {
		ret = mfs_iget(fs, de->ino, &ip);
		if (ret == -ENOENT) {
			fprintf(stderr, "mendfs: directory %llu: entry names free inode %llu\n",
			        (unsigned long long)dp->ino, (unsigned long long)de->ino);
			ret = -EUCLEAN;
		}
	}
	if (ret) {
		pthread_rwlock_unlock(&dp->lock);
		return ret;
	}
	*ls = (struct lockset){.v = {dp, ip}, .n = 2};
	if (ip != dp && (ip->ino > dp->ino || !pthread_rwlock_trywrlock(&ip->lock))) {
		if (ip->ino > dp->ino)
			pthread_rwlock_wrlock(&ip->lock);
		*ipp = ip;
		return 0; /* the common case: one lookup */
	}
	pthread_rwlock_unlock(&dp->lock);
	for (;;) {
		*ls = (struct lockset){0};
		ls_add(ls, dp);
		ls_add(ls, ip);
		ls_lock(ls);
		ret = mfs_dir_find(fs, dp, name, len, &again, NULL);
		if (!ret && again.ino == de->ino) {
			*de = again;
			*ipp = ip;
			return 0;
		}
		/* changed while unlocked: start over */
		ls_unlock(ls);
		mfs_iput(fs, ip);
		if (ret && ret != -ENOENT)
			return ret;
		ret = mfs_dir_find_get(fs, dp, name, len, de, &ip);
		if (ret)
			return ret;
	}
}

static int remove_entry(struct mfs *fs, uint64_t dir, const char *name, bool rmdir)
{
	struct lockset ls;
	struct mfs_ino *dp, *ip = NULL;
	struct mfs_txn *txn;
	struct dent de;
	int64_t now;
	size_t len;
	int ret, r;

	if (fs->read_only)
		return -EROFS;
	ret = name_check(name, &len);
	if (ret)
		return ret;
	if (!strcmp(name, "."))
		return rmdir ? -EINVAL : -EISDIR;
	if (!strcmp(name, ".."))
		return rmdir ? -ENOTEMPTY : -EISDIR;
	ret = mfs_dir_get(fs, dir, &dp);
	if (ret)
		return ret;
	ret = lock_victim(fs, dp, name, len, &de, &ip, &ls);
	if (!ret) {
		if (rmdir && !S_ISDIR(ip->di.mode))
			ret = -ENOTDIR;
		else if (!rmdir && S_ISDIR(ip->di.mode))
			ret = -EISDIR;
		else if (rmdir && ip->di.dir_entries)
			ret = -ENOTEMPTY;
		if (!ret)
			ret = mfs_txn_begin(fs, &txn);
		if (!ret) {
			now = mfs_now_ns();
			ret = mfs_dir_delete(fs, txn, dp, de.key);
			if (!ret) {
				if (rmdir && dp->di.nlink > 2)
					dp->di.nlink--;
				touch_mc(dp, now);
				ret = mfs_inode_write(fs, txn, dp);
				r = mfs_drop_link(fs, txn, ip, now);
				ret = ret ? ret : r;
			}
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
		}
		ls_unlock(&ls);
		mfs_iput(fs, ip); /* outside the handle: may free the inode */
	}
	mfs_iput(fs, dp);
	return ret;
}

int mfs_unlink(struct mfs *fs, uint64_t dir, const char *name)
{
	return remove_entry(fs, dir, name, false);
}

int mfs_rmdir(struct mfs *fs, uint64_t dir, const char *name)
{
	return remove_entry(fs, dir, name, true);
}
