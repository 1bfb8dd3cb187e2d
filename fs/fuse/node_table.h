/* SPDX-License-Identifier: MIT */
/*
 * The node table and the open files (node_table.c).  Node ids are inode
 * numbers (FUSE_ROOT_ID == MFS_ROOT_INO == 1).  The kernel counts the lookups
 * it was given per node; the daemon mirrors that count here and holds one
 * core pin (mfs_iget, then mfs_ipin) per node while its count is non-zero,
 * dropped (mfs_iunpin) when forget brings it to zero.  A pin is not a user:
 * open files hold a reference of their own (fi->fh), and every request holds
 * one while the core works on the inode.  An unlinked inode is therefore
 * freed as soon as no file is open on it and no request is under way on it
 * (in the unlink's own transaction when it is small and unused), whether the
 * kernel still knows it or not; from then on the core answers -ENOENT for
 * its number (open, setattr, xattrs, ioctls: every handler goes through
 * mfs_iget; getattr falls back to the pinned memory, mfsd_node_getattr), and
 * the number is not handed out again until the
 * kernel's FORGET drops the pin.  Numbers cannot be reused while the kernel
 * knows them, so a node id never names two inodes.
 *
 * Called by the handlers and main; calls the core only.
 */
#ifndef MENDFS_NODE_TABLE_H
#define MENDFS_NODE_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define MFSD_NODE_BUCKETS 4096u

struct fuse_entry_param;
struct fuse_file_info;
struct mfsd;
struct stat;

/* A node the kernel knows: its lookup count and the reference it pins. */
struct mfsd_node {
	uint64_t ino;
	uint64_t nlookup;
	struct mfs_ino *ip; /* one core pin (mfs_ipin) while nlookup > 0 */
	struct mfsd_node *next;
};

/* An open file or directory handle (fi->fh). */
struct mfsd_file {
	struct mfs_ino *ip; /* a core reference of its own */
	int flags;          /* open(2) flags: the recovery ioctls check O_ACCMODE */
	struct mfsd_file *prev, *next;
	_Atomic unsigned long uses; /* fast-path requests: the handoffs below */
};

/*
 * The inode of a handle, for the fast path (the fh of a WRITE or READ,
 * fastpath.c), which touches the handle nowhere else.  The kernel orders an
 * OPEN's reply before any request carrying its handle, and every such
 * request's reply before the RELEASE, but neither the C memory model nor
 * ThreadSanitizer sees the kernel: mfsd_file_open publishes the handle with
 * a release store of uses, this loads it with acquire before reading the
 * handle and increments it with release after (one locked add), and
 * mfsd_file_close loads it with acquire before freeing the handle.
 */
static inline struct mfs_ino *mfsd_file_ip(struct mfsd_file *f)
{
	struct mfs_ino *ip;

	(void)atomic_load_explicit(&f->uses, memory_order_acquire);
	ip = f->ip;
	(void)atomic_fetch_add_explicit(&f->uses, 1, memory_order_release);
	return ip;
}

/* lock is a leaf: no core call under it */
struct mfsd_nodes {
	pthread_mutex_t lock;
	struct mfsd_node *buckets[MFSD_NODE_BUCKETS];
	struct mfsd_file files; /* list head */
};

void mfsd_nodes_init(struct mfsd_nodes *nt);
void mfsd_nodes_destroy(struct mfsd_nodes *nt);

/*
 * Take one lookup reference on @ino for a reply: pin the inode (one core
 * reference per known node) and fill @e from the pinned inode, so that the
 * attributes and generation are those of the inode the kernel will know.
 * Returns 0 or -errno.
 */
int mfsd_node_get(struct mfsd *d, uint64_t ino, struct fuse_entry_param *e);
/*
 * The same for an inode the caller holds a core reference to (mfs_lookup_get):
 * the reference is the node's, or dropped; on error too.
 */
int mfsd_node_attach(struct mfsd *d, struct mfs_ino *ip, struct fuse_entry_param *e);

/*
 * The attributes of a node the core no longer answers for (mfs_getattr:
 * -ENOENT): an unlinked inode freed while the kernel still holds it without
 * an open file (an O_PATH descriptor, a removed working directory), shown
 * with nlink 0 as a local filesystem shows it (mfs_getattr_pinned).  Returns
 * 0, or -ENOENT when the kernel does not know @ino either.
 */
int mfsd_node_getattr(struct mfsd *d, uint64_t ino, struct stat *st);

/* The kernel forgets @nlookup lookups of @ino; the last one unpins it. */
void mfsd_node_forget(struct mfsd *d, uint64_t ino, uint64_t nlookup);

/* Open @ino for @fi (fi->fh): a core reference of its own.  Returns 0 or -errno. */
int mfsd_file_open(struct mfsd *d, uint64_t ino, struct fuse_file_info *fi);

/* Close the handle of @fi (none: nothing to do). */
void mfsd_file_close(struct mfsd *d, struct fuse_file_info *fi);

/*
 * After the session: drop what the kernel did not forget or release (the
 * forgets it queues while unmounting are not read once the connection is
 * gone).  Returns the number of nodes and open handles dropped.
 */
unsigned long mfsd_drop_all(struct mfsd *d);

#endif
