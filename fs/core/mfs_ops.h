/* SPDX-License-Identifier: MIT */
/*
 * The filesystem core API: mount, in-memory inodes, and the namespace and file
 * operations that the FUSE daemon calls one-to-one (and that mkfs/fsck tests
 * use directly).  Built on fs/core/mfs.h.
 *
 *   mount.c   mfs_mount / mfs_unmount / mfs_sync / mfs_remount / mfs_statfs, orphan processing
 *
 * and below it, above the layers of fs/core/mfs.h, lowest first (each file
 * calls only those before it and those layers):
 *
 *   atime.c   access times: the policy and the list of lazy atimes (atime.h)
 *   itable.c  the inode table: reading a slot (checked), mfs_inode_write, clearing a slot
 *   fmap.c    a file's block map: mfs_bmap, freeing mapped blocks in bounded steps
 *   xattr_blocks.c  out-of-line xattr values; releasing an inode's xattrs
 *   inode.c   inode cache: mfs_iget / mfs_iput, allocation and eviction, atime write-back
 *   fio.c     zeroing file bytes in place (fio.h: batches of bios)
 *   read.c    mfs_read, mfs_read_direct
 *   write.c   mfs_write (chunks of one transaction each)
 *   file.c    truncate, fallocate, SEEK_DATA/SEEK_HOLE, fsync
 *   xattr.c   extended attributes of locked inodes (inline in the inode, then a B+tree)
 *   acl.c     POSIX ACLs: validation, mode and ACL in step, default ACLs of new inodes (acl.h)
 *   xattr_ops.c  mfs_setxattr, mfs_getxattr, mfs_listxattr, mfs_removexattr
 *   attr.c    setattr
 *   dir.c     directories (entry B+tree, readdir cursors): lookup, getattr, readdir
 *   namei.c   create, mknod, mkdir, symlink, readlink, link, unlink, rmdir
 *   rename.c  rename
 *   recovery.c  the recovery operations (mfs_recovery.h)
 *
 * Every function returns 0 (or a byte count) or -errno, with errno values as
 * POSIX/Linux specify for the matching system call.  Permission checks are the
 * kernel's (FUSE default_permissions) except where noted.
 *
 * Locking: each inode has an rwlock (struct mfs_ino.lock) protecting its
 * on-disk copy and its trees (extents, directory entries, xattrs).  Operations
 * that touch several inodes lock them in inode-number order.  A rename takes
 * fs->rename_lock first (it serialises the cycle check).  Lock order:
 * rename_lock -> inode locks (ascending ino) -> the layers of fs/core/mfs.h.
 * Reads of file data take their inode's lock shared, writes exclusive (but
 * overwrites of whole allocated blocks inside EOF: shared, no handle); the
 * calls by inode number also take the global icache_lock to get and put the
 * inode (mfs_iget, mfs_iput), the _ip calls of an open file do not; a write
 * takes fs->txn_lock for its transaction handle (docs/design/locks.md §8 lists every
 * lock).
 */
#ifndef MENDFS_FS_MFS_OPS_H
#define MENDFS_FS_MFS_OPS_H

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "mfs.h"

/* Mount options for mfs_mount(). */
struct mfs_mount_opts {
	bool read_only;
	enum blk_backend_type backend; /* BLK_BACKEND_AUTO by default */
	const char *badblocks;         /* emulation file (NULL: DEVICE.badblocks for images) */
	const char *latent;            /* latent poison file (NULL: DEVICE.latent for images) */
	unsigned cache_blocks;         /* metadata cache size, 0: default */
	bool exclusive;                /* lock the device against a second mount (daemon: true) */
	/* recount the free counters from the bitmaps even after a clean unmount (fsck) */
	bool recount;
	unsigned atime; /* MFS_ATIME_* of atime.h; 0: relatime */
	/*
	 * The engine's hardware queues (0: 1; at most BLK_MAX_HW_QUEUES): one per
	 * thread that submits I/O at once, so that threads never share a queue
	 * (the engine gives its n-th live thread queue n modulo this).
	 */
	unsigned hw_queues;
	/*
	 * Test knob (-o fault_inject): fail device operation fault_nth (1-based;
	 * 0: count only), with fault_dying every one from it on (blk_dev_set_fault).
	 */
	bool fault_inject, fault_dying;
	uint64_t fault_nth;
};

struct mfs_ino {
	uint64_t ino;
	struct mfs_inode di;   /* the inode; written back with mfs_inode_write() */
	pthread_rwlock_t lock; /* see the top of this file */
	_Atomic int ref;       /* in-memory references (mfs_iget/mfs_iput) */
	/* nlink reached 0: freed at the last mfs_iput; set and read under icache_lock */
	bool unlinked;
	/*
	 * Freed (or being freed) on disk while still pinned: mfs_iget refuses
	 * it and its number is not handed out again until the last pin goes;
	 * the last mfs_iput only releases the memory.  icache_lock.
	 */
	bool dead;
	/* references that are pins (mfs_ipin), not users of the inode; icache_lock */
	int pins;
	/* di.mode when it was freed (di.mode is then 0): what mfs_getattr_pinned shows */
	uint32_t freed_mode;
	struct mfs_ino *hnext;
	/* a newer atime than the device's: on fs->atime_head's list (atime.c) */
	_Atomic bool atime_dirty;
	/* an access before this time moves no atime; 0 when the inode is written (atime.c) */
	_Atomic int64_t atime_quiet_until;
	struct mfs_ino *atime_prev, *atime_next; /* fs->atime_lock */
	/*
	 * The last write through the slow path allocated (or converted unwritten)
	 * blocks: the next write skips the overwrite fast path, whose map lookup
	 * would likely find a hole and give up.  A hint only (either path is
	 * correct for any write), read and written without a lock (write.c).
	 */
	_Atomic bool allocating;
};

/*
 * Mount: open the device through the engine, read the superblock, replay the
 * journal, start the cache/journal/allocators, process the orphan list (free
 * inodes unlinked while open before a crash), mark the superblock dirty (not
 * for read-only mounts, which never write).  @err gets a clear message.
 */
int mfs_mount(const char *device, const struct mfs_mount_opts *opts, struct mfs **fsp, char *err,
              size_t errlen);
/* Commit, checkpoint, mark clean, close.  Returns the first error seen. */
int mfs_unmount(struct mfs *fs);
/* Commit the running transaction and make everything durable (syncfs). */
int mfs_sync(struct mfs *fs);
/*
 * Remount read-only (@read_only: commit, checkpoint, mark clean, then refuse
 * every change; -EBUSY if changes keep coming) or read-write again (-EROFS if
 * mounted read-only or read-only after an I/O error).
 */
int mfs_remount(struct mfs *fs, bool read_only);
int mfs_statfs(struct mfs *fs, struct statvfs *st);

/* Inode cache. */
int mfs_iget(struct mfs *fs, uint64_t ino, struct mfs_ino **ipp); /* -ENOENT: free inode */
void mfs_iput(struct mfs *fs, struct mfs_ino *ip);
/*
 * Turn the caller's reference into a pin: it keeps the memory of @ip (and its
 * number from reuse), not the inode.  The daemon pins each inode the kernel
 * knows (its lookup count); an unlinked inode whose references are all pins
 * is freed at once (at the unlink, or at the last user's mfs_iput) and
 * becomes dead: mfs_iget answers -ENOENT for its number until the last pin
 * goes (mfs_iunpin).
 */
void mfs_ipin(struct mfs *fs, struct mfs_ino *ip);
/* Drop a pin of mfs_ipin and its reference (the last one releases the memory). */
void mfs_iunpin(struct mfs *fs, struct mfs_ino *ip);
/* Copy ip->di into its inode table block within @txn (caller holds ip->lock for writing). */
int mfs_inode_write(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip);
void mfs_inode_to_stat(const struct mfs_ino *ip, struct stat *st);

/*
 * Namespace (dir.c, namei.c, rename.c, attr.c).  *st receives the attributes
 * of the resulting inode.
 */
int mfs_lookup(struct mfs *fs, uint64_t dir, const char *name, struct stat *st);
/*
 * As mfs_lookup, but hands over a reference to the inode found (mfs_iput it),
 * taken while the directory still names it: a caller that goes on to pin the
 * inode never meets a number freed and reused meanwhile.
 */
int mfs_lookup_get(struct mfs *fs, uint64_t dir, const char *name, struct mfs_ino **ipp);
int mfs_getattr(struct mfs *fs, uint64_t ino, struct stat *st);
/*
 * The attributes of @ip, which the caller holds a reference to (a pin's
 * counts: see mfs_iref), freed or not: for an unlinked inode freed while the
 * kernel still knows it (an O_PATH descriptor, a removed working directory,
 * where mfs_getattr answers -ENOENT), its last attributes with nlink 0, as a
 * local filesystem shows an unlinked inode still referenced.
 */
void mfs_getattr_pinned(struct mfs *fs, struct mfs_ino *ip, struct stat *st);
/*
 * One more reference to @ip for a caller that holds one already, or knows
 * a pin of @ip that cannot go meanwhile (the daemon's node table, under its
 * lock): ref is not zero, so no icache_lock is needed.  mfs_iput it.
 */
static inline void mfs_iref(struct mfs_ino *ip)
{
	atomic_fetch_add_explicit(&ip->ref, 1, memory_order_relaxed);
}
/* @valid: FATTR bits below; size changes truncate/extend; ctime updated. */
#define MFS_SET_MODE      (1u << 0)
#define MFS_SET_UID       (1u << 1)
#define MFS_SET_GID       (1u << 2)
#define MFS_SET_SIZE      (1u << 3)
#define MFS_SET_ATIME     (1u << 4)
#define MFS_SET_MTIME     (1u << 5)
#define MFS_SET_ATIME_NOW (1u << 7)
#define MFS_SET_MTIME_NOW (1u << 8)
#define MFS_SET_CTIME     (1u << 10)
/* clear setuid, and setgid if group-executable (unless MFS_SET_MODE sets the mode) */
#define MFS_SET_KILL_SUIDGID (1u << 11)
/*
 * with MFS_SET_KILL_SUIDGID or a chown: clear setgid even without group exec
 * (the caller is outside the file's group and lacks CAP_FSETID: Linux's
 * setattr_should_drop_sgid)
 */
#define MFS_SET_KILL_SGID (1u << 12)
/* A chmod (MFS_SET_MODE) also rewrites the access ACL's owner, mask and other entries. */
int mfs_setattr(struct mfs *fs, uint64_t ino, const struct stat *attr, unsigned valid,
                struct stat *st);
/*
 * A new inode: @mode gives its type (S_IFREG, S_IFDIR, S_IFLNK with @target,
 * S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK with @rdev) and permissions.  If the
 * directory has a default ACL the new inode inherits it (a directory also as
 * its default ACL) and the ACL masks the mode; if not, @umask does
 * (POSIX.1e; acl.h).  Symlinks are 0777 and get no ACL.
 */
struct mfs_new_inode {
	mode_t mode;
	dev_t rdev;
	uid_t uid;
	gid_t gid;
	mode_t umask;
	const char *target;
};
int mfs_create(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
               struct stat *st);
/*
 * As mfs_create, but hands over a reference to the new inode (mfs_iput it),
 * taken before the directory's lock is released: a caller that goes on to
 * pin it never meets its number unlinked, freed and reused meanwhile.
 */
int mfs_create_get(struct mfs *fs, uint64_t dir, const char *name, const struct mfs_new_inode *ni,
                   struct stat *st, struct mfs_ino **ipp);
/* mfs_create with umask 0, for each type. */
int mfs_mknod(struct mfs *fs, uint64_t dir, const char *name, mode_t mode, dev_t rdev, uid_t uid,
              gid_t gid, struct stat *st);
int mfs_mkdir(struct mfs *fs, uint64_t dir, const char *name, mode_t mode, uid_t uid, gid_t gid,
              struct stat *st);
int mfs_unlink(struct mfs *fs, uint64_t dir, const char *name);
int mfs_rmdir(struct mfs *fs, uint64_t dir, const char *name);
int mfs_symlink(struct mfs *fs, uint64_t dir, const char *name, const char *target, uid_t uid,
                gid_t gid, struct stat *st);
ssize_t mfs_readlink(struct mfs *fs, uint64_t ino, char *buf, size_t size);
int mfs_link(struct mfs *fs, uint64_t ino, uint64_t newdir, const char *newname, struct stat *st);
/* flags: RENAME_NOREPLACE, RENAME_EXCHANGE (<linux/fs.h>); -EINVAL for a cycle. */
int mfs_rename(struct mfs *fs, uint64_t olddir, const char *oldname, uint64_t newdir,
               const char *newname, unsigned flags);
/*
 * Directory listing from cookie @pos (0 = start; "." and ".." come first at
 * cookies 1 and 2; entry cookies are their B+tree keys, stable across inserts
 * and deletes).  @fn returns non-zero to stop (buffer full): that entry is
 * not consumed.
 */
typedef int mfs_filldir_fn(void *arg, const char *name, size_t name_len, uint64_t ino,
                           unsigned dtype, uint64_t next_pos);
int mfs_readdir(struct mfs *fs, uint64_t dir, uint64_t pos, mfs_filldir_fn *fn, void *arg);

/* Files (read.c, write.c, file.c). */
ssize_t mfs_read(struct mfs *fs, uint64_t ino, void *buf, size_t len, off_t off);
/*
 * Zero-copy read: call @emit once with iovecs describing the file's bytes
 * [off, off + len), clipped at EOF (cnt 0 at or past EOF), pointing into the
 * device mapping (holes: a shared zero area).  The inode's read lock is held
 * while @emit runs, so no block of the range is freed, reused or rewritten
 * before @emit returns; @emit must not keep the addresses.  Returns @emit's
 * result or -errno: -EOPNOTSUPP when direct reads are off (fs->direct_reads),
 * a page of the range is protected because of poison beside it, the range
 * needs more than MFS_DIRECT_IOV_MAX pieces, or (data_csum) a block of the
 * range is not as its checksums say or holds poison (the caller then uses
 * mfs_read, which reports it); -EIO when the range holds poison.
 */
struct iovec;
/*
 * Wait until no zero-copy read of @ip is still inside its @emit: the emit
 * replies to the kernel under the inode's lock, and the kernel may answer
 * with a RELEASE (and a FORGET) before that thread has dropped the lock.
 * The daemon calls it before it drops a file handle's reference.
 */
void mfs_read_direct_drain(struct mfs_ino *ip);
#define MFS_DIRECT_IOV_MAX 512
typedef int mfs_direct_emit_fn(void *arg, const struct iovec *iov, int cnt);
int mfs_read_direct(struct mfs *fs, uint64_t ino, size_t len, off_t off, mfs_direct_emit_fn *emit,
                    void *arg);
ssize_t mfs_write(struct mfs *fs, uint64_t ino, const void *buf, size_t len, off_t off);
/*
 * mfs_write, with MFS_WRITE_KILL_SUIDGID: the mode first loses what
 * mfs_mode_kill_suidgid drops, and with MFS_WRITE_KILL_SGID also a setgid bit
 * without group exec (as MFS_SET_KILL_SGID)
 */
#define MFS_WRITE_KILL_SUIDGID 1u
#define MFS_WRITE_KILL_SGID    2u
ssize_t mfs_write_flags(struct mfs *fs, uint64_t ino, const void *buf, size_t len, off_t off,
                        unsigned flags);

/*
 * @mode without setuid, and without setgid if group-executable (a setgid
 * file without group exec is not a setgid program): what Linux drops on
 * chown, and on write and truncate by a caller without CAP_FSETID.
 */
static inline uint32_t mfs_mode_kill_suidgid(uint32_t mode)
{
	mode &= ~(uint32_t)S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}
/*
 * Set the size; shrinking frees the blocks past the new EOF in bounded
 * transactions of their own (docs/design/core.md §3): the caller holds ip->lock
 * for writing and no transaction handle.  On error the inode is as the
 * transactions so far left it (the new size and the orphan entry once the
 * first one went through: the next mount finishes the work).
 */
int mfs_truncate(struct mfs *fs, struct mfs_ino *ip, uint64_t size);
/* mode: 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|KEEP_SIZE, FALLOC_FL_ZERO_RANGE (+KEEP_SIZE)
 */
int mfs_fallocate(struct mfs *fs, uint64_t ino, int mode, off_t off, off_t len);
off_t mfs_lseek(struct mfs *fs, uint64_t ino, off_t off, int whence); /* SEEK_DATA / SEEK_HOLE */
int mfs_fsync(struct mfs *fs, uint64_t ino, bool datasync);
/*
 * The calls of an open file: as those above, on an inode the caller holds a
 * reference to (the daemon's file handle, from open to release), so that no
 * I/O takes the inode cache's lock.  Same results, -EISDIR / -EINVAL
 * (fallocate: -ENODEV) for an inode that is not a regular file.
 */
struct mfs_ino;
ssize_t mfs_read_ip(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len, off_t off);
int mfs_read_direct_ip(struct mfs *fs, struct mfs_ino *ip, size_t len, off_t off,
                       mfs_direct_emit_fn *emit, void *arg);
ssize_t mfs_write_ip(struct mfs *fs, struct mfs_ino *ip, const void *buf, size_t len, off_t off,
                     unsigned flags);
int mfs_fallocate_ip(struct mfs *fs, struct mfs_ino *ip, int mode, off_t off, off_t len);
off_t mfs_lseek_ip(struct mfs *fs, struct mfs_ino *ip, off_t off, int whence);
int mfs_fsync_ip(struct mfs *fs, struct mfs_ino *ip, bool datasync);
/* Map file block @lblk (fmap.c): *pblk = 0 for a hole; *count blocks share the mapping. */
int mfs_bmap(struct mfs *fs, struct mfs_ino *ip, uint64_t lblk, uint64_t *pblk, uint64_t *count,
             bool *unwritten);
/*
 * Free all blocks of an inode being deleted, in @txn: only for an inode
 * mfs_inode_free_is_small() accepts (or already emptied by
 * mfs_file_free_all()).
 */
int mfs_file_release_blocks(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip);

/*
 * Extended attributes (xattr_ops.c): flags XATTR_CREATE / XATTR_REPLACE.  The
 * POSIX ACLs system.posix_acl_access and system.posix_acl_default are
 * validated (-EINVAL) and kept in step with the mode (acl.h); with
 * MFS_XATTR_KILL_SGID setting an access ACL also clears setgid (the caller
 * is outside the file's group and lacks CAP_FSETID).
 */
#define MFS_XATTR_KILL_SGID 0x10000
int mfs_setxattr(struct mfs *fs, uint64_t ino, const char *name, const void *value, size_t size,
                 int flags);
ssize_t mfs_getxattr(struct mfs *fs, uint64_t ino, const char *name, void *value, size_t size);
ssize_t mfs_listxattr(struct mfs *fs, uint64_t ino, char *list, size_t size);
int mfs_removexattr(struct mfs *fs, uint64_t ino, const char *name);
/* Release @ip's whole xattr storage in @txn (freeing an inode; xattr_blocks.c).  0 or -errno. */
int mfs_xattr_release(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip);

#endif /* MENDFS_FS_MFS_OPS_H */
