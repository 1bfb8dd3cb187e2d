/* SPDX-License-Identifier: MIT */
/*
 * Resolving file handles: the kernel's LOOKUP of "." and ".." (see
 * fhandle.h).  The kernel's export operations (fs/fuse, with
 * FUSE_EXPORT_SUPPORT set at INIT) turn a handle of an inode it no longer
 * holds into LOOKUP(nodeid, "."), then compare the reply's generation with
 * the handle's; a directory's dentry is reconnected to the tree through
 * LOOKUP(nodeid, "..") up to the root and a readdir of each parent.  The
 * daemon's node table needs nothing special: node ids are inode numbers and
 * the reply takes a lookup reference as any other.
 *
 * A handle may name any number (an NFS client can send anything), so the
 * number is checked like every other: free, out of range, or unlinked is
 * ESTALE.  An unlinked inode that is still open answers through the
 * kernel's own inode cache (the kernel holds it, so it sends no lookup);
 * one the kernel has forgotten is on its way out, or an orphan left by a
 * crash, and must not come back.  Called by the LOOKUP handler; calls the
 * core only.
 */
#include "fhandle.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mfs_ops.h"

/* Take a reference on live inode @ino: -ESTALE if it is free or unlinked. */
static int get_live(struct mfs *fs, uint64_t ino, struct mfs_ino **ipp)
{
	struct mfs_ino *ip;
	bool dead;
	int ret;

	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret == -ENOENT ? -ESTALE : ret;
	pthread_rwlock_rdlock(&ip->lock);
	dead = ip->di.nlink == 0;
	pthread_rwlock_unlock(&ip->lock);
	if (dead) {
		mfs_iput(fs, ip);
		return -ESTALE;
	}
	*ipp = ip;
	return 0;
}

int mfsd_export_lookup(struct mfs *fs, uint64_t ino, const char *name, struct stat *st)
{
	struct mfs_ino *ip, *pp;
	uint64_t parent = 0;
	int ret;

	ret = get_live(fs, ino, &ip);
	if (ret)
		return ret;
	if (!strcmp(name, ".")) {
		pthread_rwlock_rdlock(&ip->lock);
		mfs_inode_to_stat(ip, st);
		pthread_rwlock_unlock(&ip->lock);
		mfs_iput(fs, ip);
		return 0;
	}
	pthread_rwlock_rdlock(&ip->lock);
	if (S_ISDIR(ip->di.mode))
		parent = ip->di.parent;
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	if (!parent)
		return -ENOTDIR;
	ret = get_live(fs, parent, &pp);
	if (ret)
		return ret;
	pthread_rwlock_rdlock(&pp->lock);
	if (S_ISDIR(pp->di.mode))
		mfs_inode_to_stat(pp, st);
	else
		ret = -EUCLEAN; /* a live directory's parent is a directory */
	pthread_rwlock_unlock(&pp->lock);
	if (ret)
		fprintf(stderr, "mendfs: inode %llu: parent %llu is not a directory\n",
		        (unsigned long long)ino, (unsigned long long)parent);
	mfs_iput(fs, pp);
	return ret;
}
