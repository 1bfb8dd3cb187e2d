/* SPDX-License-Identifier: MIT */
/*
 * The node table and the open files (see node_table.h): a hash of the nodes
 * the kernel knows, each pinning its inode (mfs_ipin: a reference that keeps
 * the memory and the number, not the inode), and a list of open handles, each
 * with a reference of its own.  Calls the core (mfs_iget, mfs_iput) only,
 * never under the table's lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "mfs_ops.h"

static inline unsigned node_hash(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 52) & (MFSD_NODE_BUCKETS - 1);
}

void mfsd_nodes_init(struct mfsd_nodes *nt)
{
	pthread_mutex_init(&nt->lock, NULL);
	nt->files.next = nt->files.prev = &nt->files;
}

void mfsd_nodes_destroy(struct mfsd_nodes *nt)
{
	pthread_mutex_destroy(&nt->lock);
}

int mfsd_node_get(struct mfsd *d, uint64_t ino, struct fuse_entry_param *e)
{
	struct mfs_ino *ip;
	int ret;

	ret = mfs_iget(d->fs, ino, &ip);
	return ret ? ret : mfsd_node_attach(d, ip, e);
}

int mfsd_node_attach(struct mfsd *d, struct mfs_ino *ip, struct fuse_entry_param *e)
{
	struct mfsd_nodes *nt = &d->nodes;
	struct mfsd_node *n, *fresh;
	struct mfs_ino *extra = NULL, *pin = NULL;
	uint64_t ino = ip->ino;
	unsigned h = node_hash(ino);

	fresh = malloc(sizeof(*fresh));
	if (!fresh) {
		mfs_iput(d->fs, ip);
		return -ENOMEM;
	}
	*e = (struct fuse_entry_param){0};
	pthread_rwlock_rdlock(&ip->lock);
	mfs_inode_to_stat(ip, &e->attr);
	e->generation = ip->di.generation;
	pthread_rwlock_unlock(&ip->lock);
	e->ino = ino;
	e->attr_timeout = d->timeout;
	e->entry_timeout = d->timeout;

	pthread_mutex_lock(&nt->lock);
	for (n = nt->buckets[h]; n; n = n->next)
		if (n->ino == ino)
			break;
	if (n) {
		n->nlookup++;
		extra = ip; /* the node already pins it */
	} else {
		fresh->ino = ino;
		fresh->nlookup = 1;
		fresh->ip = ip;
		pin = ip;
		fresh->next = nt->buckets[h];
		nt->buckets[h] = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&nt->lock);
	free(fresh);
	/*
	 * The node's reference becomes a pin (the kernel knows the inode; that
	 * makes it no user), outside the leaf lock.  No FORGET can unpin it
	 * first: it would need the count of this reply, not yet sent.
	 */
	if (pin)
		mfs_ipin(d->fs, pin);
	if (extra)
		mfs_iput(d->fs, extra);
	return 0;
}

int mfsd_node_getattr(struct mfsd *d, uint64_t ino, struct stat *st)
{
	struct mfsd_nodes *nt = &d->nodes;
	struct mfs_ino *ip = NULL;
	struct mfsd_node *n;

	pthread_mutex_lock(&nt->lock);
	for (n = nt->buckets[node_hash(ino)]; n; n = n->next)
		if (n->ino == ino) {
			ip = n->ip;
			mfs_iref(ip); /* the node's pin holds it: no core lock taken */
			break;
		}
	pthread_mutex_unlock(&nt->lock);
	if (!ip)
		return -ENOENT;
	mfs_getattr_pinned(d->fs, ip, st);
	mfs_iput(d->fs, ip);
	return 0;
}

void mfsd_node_forget(struct mfsd *d, uint64_t ino, uint64_t nlookup)
{
	struct mfsd_nodes *nt = &d->nodes;
	struct mfsd_node **pp, *n;
	struct mfs_ino *ip = NULL;

	pthread_mutex_lock(&nt->lock);
	for (pp = &nt->buckets[node_hash(ino)]; (n = *pp); pp = &n->next)
		if (n->ino == ino)
			break;
	if (n) {
		n->nlookup = nlookup < n->nlookup ? n->nlookup - nlookup : 0;
		if (!n->nlookup) {
			*pp = n->next;
			ip = n->ip;
		} else {
			n = NULL;
		}
	}
	pthread_mutex_unlock(&nt->lock);
	if (ip) {
		mfs_iunpin(d->fs, ip); /* may free an unlinked inode: outside the lock */
		free(n);
	}
}

int mfsd_file_open(struct mfsd *d, uint64_t ino, struct fuse_file_info *fi)
{
	struct mfsd_nodes *nt = &d->nodes;
	struct mfsd_file *f = malloc(sizeof(*f));
	int ret;

	if (!f)
		return -ENOMEM;
	ret = mfs_iget(d->fs, ino, &f->ip);
	if (ret) {
		free(f);
		return ret;
	}
	f->flags = fi->flags;
	pthread_mutex_lock(&nt->lock);
	f->next = nt->files.next;
	f->prev = &nt->files;
	f->next->prev = f;
	nt->files.next = f;
	pthread_mutex_unlock(&nt->lock);
	atomic_store_explicit(&f->uses, 0, memory_order_release); /* mfsd_file_ip */
	fi->fh = (uint64_t)(uintptr_t)f;
	return 0;
}

void mfsd_file_close(struct mfsd *d, struct fuse_file_info *fi)
{
	struct mfsd_file *f = mfsd_file_of(fi);

	if (!f)
		return;
	pthread_mutex_lock(&d->nodes.lock);
	f->prev->next = f->next;
	f->next->prev = f->prev;
	pthread_mutex_unlock(&d->nodes.lock);
	(void)atomic_load_explicit(&f->uses, memory_order_acquire); /* mfsd_file_ip */
	/* a read's reply went out under the inode's lock: its thread may hold it still */
	mfs_read_direct_drain(f->ip);
	mfs_iput(d->fs, f->ip);
	free(f);
}

unsigned long mfsd_drop_all(struct mfsd *d)
{
	struct mfsd_nodes *nt = &d->nodes;
	unsigned long dropped = 0;
	unsigned i;

	while (nt->files.next != &nt->files) {
		struct mfsd_file *f = nt->files.next;

		f->prev->next = f->next;
		f->next->prev = f->prev;
		mfs_iput(d->fs, f->ip);
		free(f);
		dropped++;
	}
	for (i = 0; i < MFSD_NODE_BUCKETS; i++) {
		struct mfsd_node *n, *next;

		for (n = nt->buckets[i]; n; n = next) {
			next = n->next;
			mfs_iunpin(d->fs, n->ip);
			free(n);
			dropped++;
		}
		nt->buckets[i] = NULL;
	}
	return dropped;
}
