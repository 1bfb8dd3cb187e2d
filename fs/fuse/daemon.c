/* SPDX-License-Identifier: MIT */
/*
 * mendfs: the FUSE daemon.  `mendfs [-f] [-o OPTS] DEVICE MOUNTPOINT` mounts
 * the filesystem on DEVICE with the libfuse3 low-level API and serves it with
 * a multithreaded session loop.  Every handler maps one request to one call of
 * the core API (fs/core/mfs_ops.h) and replies exactly once, through a single error
 * exit, as libfuse's example/passthrough_ll.c does.
 *
 * Node ids are inode numbers (FUSE_ROOT_ID == MFS_ROOT_INO == 1).  The kernel
 * counts the lookups it was given per node; the daemon mirrors that count in
 * a node table and holds one core reference (mfs_iget) per node while its
 * count is non-zero, dropped when forget brings it to zero.  Open files hold
 * a reference of their own (fi->fh).  An unlinked inode therefore lives while
 * the kernel knows it or a file is open on it, and the core frees it at the
 * last mfs_iput.  Numbers cannot be reused while the kernel knows them.
 * LOOKUPs of "." and ".." resolve file handles (daemon_export.c).
 *
 * Start-up and errors: without -f the daemon forks first (before the device
 * is opened, because the core starts threads and fork keeps only one), and
 * the parent waits on a pipe until the child has mounted the filesystem and
 * the FUSE session; it then exits 0, or with the child's status after the
 * child printed its error on the caller's stderr.  So `mendfs` (and
 * mount.mendfs, which waits for it) returns only once the mount is live.
 * DEVICE and badblocks=PATH are made absolute first (the detached daemon
 * works in /), and the live mount is recorded in utab with
 * helper=fuse.mendfs, so that umount(8) runs umount.fuse.mendfs, which waits
 * for this daemon to finish (daemon_setup.c).  Once live the child detaches
 * (setsid, stdio to /dev/null) and its stderr, where the core logs, is
 * forwarded to syslog.
 *
 * Shutdown: unmount (umount, fusermount3 -u), SIGTERM, SIGINT or SIGHUP end
 * the session loop; the daemon then unmounts the FUSE session if still
 * mounted, drops every reference it holds (freeing unlinked inodes) and calls
 * mfs_unmount, which commits, checkpoints and marks the filesystem clean, and
 * closes the device: its lock goes, which is what umount.fuse.mendfs waits
 * for.
 *
 * Reads of an image file are answered straight from its page-cache mapping
 * (mfs_read_direct, the kernel copies from it); other reads are copied into
 * a buffer first.  /dev/fuse is read and written through our own hooks
 * (daemon_io.c) for HANDLE_KILLPRIV_V2, which libfuse 3.14 does not offer.
 *
 * Permissions are the kernel's (default_permissions), POSIX ACLs included
 * (FUSE_CAP_POSIX_ACL; the core keeps them, fs/core/acl.h).  The daemon's share
 * is to clear setuid/setgid as ext4 does when the kernel asks (the
 * "setuid and setgid" section; the caller's groups and CAP_FSETID come from
 * daemon_cred.c) and to pass the creator's umask to the core (DONT_MASK).
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "acl.h"
#include "daemon_atime.h"
#include "daemon_cred.h"
#include "daemon_export.h"
#include "daemon_io.h"
#include "daemon_setup.h"
#include "mendfs/ioctl.h"
#include "mfs_devlock.h"
#include "mfs_ops.h"
#include "mfs_recovery.h"

#define MFSD_MAX_WRITE       (1u << 20) /* bytes per write request (FUSE_MAX_PAGES) */
#define MFSD_NODE_BUCKETS    4096u
#define MFSD_COPY_CHUNK      (1u << 20)
#define MFSD_DEFAULT_TIMEOUT 1.0
#define MFSD_DEFAULT_COMMIT  5u /* seconds between periodic journal commits */

/* A node the kernel knows: its lookup count and the reference it pins. */
struct mfsd_node {
	uint64_t ino;
	uint64_t nlookup;
	struct mfs_ino *ip; /* one core reference while nlookup > 0 */
	struct mfsd_node *next;
};

/* An open file or directory handle (fi->fh). */
struct mfsd_file {
	struct mfs_ino *ip; /* a core reference of its own */
	int flags;          /* open(2) flags: the recovery ioctls check O_ACCMODE */
	struct mfsd_file *prev, *next;
};

struct mfsd {
	struct mfs *fs;
	struct fuse_session *se;
	double timeout; /* attribute and entry timeout, seconds */
	bool read_only;
	bool poison_inject; /* -o poison_inject: MENDFS_IOC_INJECT allowed (root only) */
	bool writeback;     /* -o writeback: the kernel's writeback cache */
	bool dont_mask;     /* POSIX ACLs: the kernel leaves the umask to us (set at INIT) */

	/* periodic commit (-o commit=SECONDS) */
	unsigned commit_interval; /* 0: only fsync, sync, a full journal and unmount commit */
	pthread_t commit_thread;
	bool commit_started, commit_stop;
	pthread_mutex_t commit_lock;
	pthread_cond_t commit_cond; /* CLOCK_MONOTONIC */

	/* node table and open files: nodes_lock is a leaf (no core call under it) */
	pthread_mutex_t nodes_lock;
	struct mfsd_node *nodes[MFSD_NODE_BUCKETS];
	struct mfsd_file files; /* list head */
};

static const struct fuse_custom_io mfsd_fuse_io = {
        .read = mfsd_io_read,
        .writev = mfsd_io_writev,
};

/* Options of -o. */
struct mfsd_opts {
	bool foreground, debug, read_only, allow_other, poison_inject, writeback;
	unsigned atime;                 /* MFS_ATIME_* */
	bool fault_inject, fault_dying; /* -o fault_inject=N[+] (a test knob) */
	uint64_t fault_nth;
	enum blk_backend_type backend;
	const char *badblocks;
	unsigned threads;
	double timeout;
	unsigned commit;
	char kernel_opts[1024]; /* generic mount flags passed on to libfuse */
};

static bool use_syslog;

static void logmsg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logmsg(int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (use_syslog) {
		vsyslog(prio, fmt, ap);
	} else {
		fputs("mendfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

static inline struct mfsd *D(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* --- node table ------------------------------------------------------------------------ */

static inline unsigned node_hash(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 52) & (MFSD_NODE_BUCKETS - 1);
}

/*
 * Take one lookup reference on @ino for a reply: pin the inode (one core
 * reference per known node) and fill @e from the pinned inode, so that the
 * attributes and generation are those of the inode the kernel will know.
 */
static int node_get(struct mfsd *d, uint64_t ino, struct fuse_entry_param *e)
{
	struct mfsd_node *n, *fresh;
	struct mfs_ino *ip, *extra = NULL;
	unsigned h = node_hash(ino);
	int ret;

	ret = mfs_iget(d->fs, ino, &ip);
	if (ret)
		return ret;
	fresh = malloc(sizeof(*fresh));
	if (!fresh) {
		mfs_iput(d->fs, ip);
		return -ENOMEM;
	}
	memset(e, 0, sizeof(*e));
	pthread_rwlock_rdlock(&ip->lock);
	mfs_inode_to_stat(ip, &e->attr);
	e->generation = ip->di.generation;
	pthread_rwlock_unlock(&ip->lock);
	e->ino = ino;
	e->attr_timeout = d->timeout;
	e->entry_timeout = d->timeout;

	pthread_mutex_lock(&d->nodes_lock);
	for (n = d->nodes[h]; n; n = n->next)
		if (n->ino == ino)
			break;
	if (n) {
		n->nlookup++;
		extra = ip; /* the node already pins it */
	} else {
		fresh->ino = ino;
		fresh->nlookup = 1;
		fresh->ip = ip;
		fresh->next = d->nodes[h];
		d->nodes[h] = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&d->nodes_lock);
	free(fresh);
	if (extra)
		mfs_iput(d->fs, extra);
	return 0;
}

/* The kernel forgets @nlookup lookups of @ino; the last one unpins it. */
static void node_forget(struct mfsd *d, uint64_t ino, uint64_t nlookup)
{
	struct mfsd_node **pp, *n;
	struct mfs_ino *ip = NULL;

	pthread_mutex_lock(&d->nodes_lock);
	for (pp = &d->nodes[node_hash(ino)]; (n = *pp); pp = &n->next)
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
	pthread_mutex_unlock(&d->nodes_lock);
	if (ip) {
		mfs_iput(d->fs, ip); /* may free an unlinked inode: outside nodes_lock */
		free(n);
	}
}

/* Open handles: one core reference each, so an unlinked open file lives on. */
static int file_open(struct mfsd *d, uint64_t ino, struct fuse_file_info *fi)
{
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
	pthread_mutex_lock(&d->nodes_lock);
	f->next = d->files.next;
	f->prev = &d->files;
	f->next->prev = f;
	d->files.next = f;
	pthread_mutex_unlock(&d->nodes_lock);
	fi->fh = (uint64_t)(uintptr_t)f;
	return 0;
}

static void file_close(struct mfsd *d, struct fuse_file_info *fi)
{
	struct mfsd_file *f = (struct mfsd_file *)(uintptr_t)fi->fh;

	if (!f)
		return;
	pthread_mutex_lock(&d->nodes_lock);
	f->prev->next = f->next;
	f->next->prev = f->prev;
	pthread_mutex_unlock(&d->nodes_lock);
	mfs_iput(d->fs, f->ip);
	free(f);
}

/*
 * After the session: drop what the kernel did not forget or release (the
 * forgets it queues while unmounting are not read once the connection is
 * gone).  Returns the number of nodes and open handles dropped.
 */
static unsigned long drop_all(struct mfsd *d)
{
	unsigned long dropped = 0;
	unsigned i;

	while (d->files.next != &d->files) {
		struct mfsd_file *f = d->files.next;

		f->prev->next = f->next;
		f->next->prev = f->prev;
		mfs_iput(d->fs, f->ip);
		free(f);
		dropped++;
	}
	for (i = 0; i < MFSD_NODE_BUCKETS; i++) {
		struct mfsd_node *n, *next;

		for (n = d->nodes[i]; n; n = next) {
			next = n->next;
			mfs_iput(d->fs, n->ip);
			free(n);
			dropped++;
		}
		d->nodes[i] = NULL;
	}
	return dropped;
}

/* --- credentials --------------------------------------------------------------------------- */

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

/* --- setuid and setgid --------------------------------------------------------------------- */

static bool sgid_noexec(mode_t mode)
{
	return (mode & (S_ISGID | S_IXGRP)) == S_ISGID;
}

/*
 * Does the caller of @req lose a setgid bit of a file of group @gid as Linux
 * decides (setattr_should_drop_sgid, posix_acl_update_mode): outside the
 * group and without CAP_FSETID?  @no_fsetid: the kernel said it lacks it.
 */
static bool drops_sgid(fuse_req_t req, gid_t gid, bool no_fsetid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (mfsd_cred_in_group(ctx->pid, ctx->gid, gid))
		return false;
	return no_fsetid || !mfsd_cred_fsetid(ctx->pid);
}

/*
 * The daemon cleared setuid/setgid on its own (a write or open(O_TRUNC)
 * whose reply carries no attributes): the kernel's cached mode is stale, and
 * with it what `ls -l` shows and what the kernel checks, until the attribute
 * timeout.  Invalidate the attributes (offset -1: not the page cache).
 */
static void mode_changed(struct mfsd *d, fuse_ino_t ino)
{
	fuse_lowlevel_notify_inval_inode(d->se, ino, -1, 0);
}

/*
 * The setuid/setgid part of a SETATTR (HANDLE_KILLPRIV_V2).  The kernel sends
 * FATTR_KILL_SUIDGID with every chown of a non-directory and with a truncate
 * by a caller without CAP_FSETID.  Before a write, fallocate or
 * copy_file_range by such a caller to a file with a bit to clear, its
 * file_remove_privs() sends a SETATTR that sets nothing (FUSE drops its kill
 * bits), and takes the mode of the reply.  Each clears setuid, and setgid if
 * group-executable (the core), and setgid without group exec if the caller is
 * outside the file's group and lacks CAP_FSETID (MFS_SET_KILL_SGID here).  An
 * empty SETATTR from a caller with CAP_FSETID comes of a write that drops
 * security.capability, or of chown(f, -1, -1): both leave the mode alone
 * here, though ext4 clears setuid on the second.
 */
static int setattr_kill(fuse_req_t req, fuse_ino_t ino, int to_set, unsigned *valid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat st;
	int ret;

	/* "nothing": with -o writeback the kernel sends the ctime of a chown(f, -1, -1) */
	to_set &= ~FUSE_SET_ATTR_CTIME;
	if (to_set && !(to_set & FUSE_SET_ATTR_KILL_SUID))
		return 0;
	ret = mfs_getattr(D(req)->fs, ino, &st);
	if (ret || !(st.st_mode & (S_ISUID | S_ISGID)) || S_ISDIR(st.st_mode))
		return ret;
	if (!to_set) {
		if (!S_ISREG(st.st_mode) || mfsd_cred_fsetid(ctx->pid))
			return 0;
		*valid |= MFS_SET_KILL_SUIDGID;
	}
	/* a chown says nothing of the caller's capabilities, a truncate does */
	if (sgid_noexec(st.st_mode) &&
	    drops_sgid(req, st.st_gid, !(to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))))
		*valid |= MFS_SET_KILL_SGID;
	return 0;
}

/* --- handlers ------------------------------------------------------------------------------ */

static void mfsd_init(void *userdata, struct fuse_conn_info *conn)
{
	struct mfsd *d = userdata;

	/*
	 * Correctness first: no writeback cache unless asked for (-o writeback:
	 * the kernel then owns file sizes and times until it writes back), no
	 * splice.  Not HANDLE_KILLPRIV (v1) but v2, added by daemon_io.c: the
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
			logmsg(LOG_WARNING, "writeback: the kernel offers no writeback cache; "
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
		logmsg(LOG_WARNING,
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

static void mfsd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mfsd *d = D(req);
	struct fuse_entry_param e;
	struct stat st;
	int ret;

	if (mfsd_export_dots(name)) /* resolving a file handle */
		ret = mfsd_export_lookup(d->fs, parent, name, &st);
	else
		ret = mfs_lookup(d->fs, parent, name, &st);
	if (ret == -ENOENT) {
		/* negative entry: every change goes through this kernel, so it may be cached */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = d->timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (!ret)
		ret = node_get(d, st.st_ino, &e);
	if (ret)
		goto fail;
	fuse_reply_entry(req, &e);
	return;
fail:
	fuse_reply_err(req, -ret);
}

static void mfsd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(D(req), ino, nlookup);
	fuse_reply_none(req);
}

static void mfsd_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	size_t i;

	for (i = 0; i < count; i++)
		node_forget(D(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void mfsd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret;

	(void)fi;
	ret = mfs_getattr(D(req)->fs, ino, &st);
	if (ret)
		goto fail;
	fuse_reply_attr(req, &st, D(req)->timeout);
	return;
fail:
	fuse_reply_err(req, -ret);
}

static void mfsd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
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
	ret = setattr_kill(req, ino, to_set, &valid);
	if (ret)
		goto fail;
	ret = mfs_setattr(D(req)->fs, ino, attr, valid, &st);
	if (ret)
		goto fail;
	fuse_reply_attr(req, &st, D(req)->timeout);
	return;
fail:
	fuse_reply_err(req, -ret);
}

static void mfsd_readlink(fuse_req_t req, fuse_ino_t ino)
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

/* The common tail of mknod, mkdir, symlink, link: one lookup reference for the reply. */
static void reply_new(fuse_req_t req, int ret, const struct stat *st)
{
	struct fuse_entry_param e;

	if (!ret)
		ret = node_get(D(req), st->st_ino, &e);
	if (ret)
		goto fail;
	fuse_reply_entry(req, &e);
	return;
fail:
	fuse_reply_err(req, -ret);
}

/* mknod, mkdir, symlink and create: owner, umask or default ACL (mfs_create). */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
                     const char *target, struct stat *st)
{
	struct mfs_new_inode ni = {.rdev = rdev, .umask = req_umask(req), .target = target};
	int ret;

	ret = new_owner(req, parent, &mode, &ni.uid, &ni.gid);
	ni.mode = mode;
	if (!ret)
		ret = mfs_create(D(req)->fs, parent, name, &ni, st);
	return ret;
}

static void mfsd_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct stat st;
	int ret = -EINVAL;

	if ((mode & S_IFMT) == 0)
		mode |= S_IFREG;
	if (!S_ISDIR(mode) && !S_ISLNK(mode))
		ret = make_node(req, parent, name, mode, rdev, NULL, &st);
	reply_new(req, ret, &st);
}

static void mfsd_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct stat st;

	reply_new(req, make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &st), &st);
}

static void mfsd_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int ret = -EINVAL;

	if (target)
		ret = make_node(req, parent, name, S_IFLNK | 0777, 0, target, &st);
	reply_new(req, ret, &st);
}

static void mfsd_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct stat st;
	int ret;

	ret = mfs_link(D(req)->fs, ino, newparent, newname, &st);
	reply_new(req, ret, &st);
}

static void mfsd_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -mfs_unlink(D(req)->fs, parent, name));
}

static void mfsd_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -mfs_rmdir(D(req)->fs, parent, name));
}

static void mfsd_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                        const char *newname, unsigned int flags)
{
	int ret = -EINVAL;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		goto out; /* RENAME_WHITEOUT: no whiteouts here */
	ret = mfs_rename(D(req)->fs, parent, name, newparent, newname, flags);
out:
	fuse_reply_err(req, -ret);
}

static void mfsd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mfsd *d = D(req);
	struct stat attr = {0};
	int ret;

	if (d->read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
		ret = -EROFS;
		goto fail;
	}
	/* FUSE_CAP_ATOMIC_O_TRUNC: the truncation of open(O_TRUNC) comes here */
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		unsigned valid = MFS_SET_SIZE;
		struct stat before, after;

		/* HANDLE_KILLPRIV_V2: FUSE_OPEN_KILL_SUIDGID (a caller without CAP_FSETID) */
		if (mfsd_io_kill_suidgid()) {
			valid |= MFS_SET_KILL_SUIDGID;
			ret = mfs_getattr(d->fs, ino, &before);
			if (ret)
				goto fail;
			if (sgid_noexec(before.st_mode) && drops_sgid(req, before.st_gid, true))
				valid |= MFS_SET_KILL_SGID;
		}
		ret = mfs_setattr(d->fs, ino, &attr, valid, &after);
		if (ret)
			goto fail;
		if ((valid & MFS_SET_KILL_SUIDGID) && after.st_mode != before.st_mode)
			mode_changed(d, ino); /* the reply to OPEN has no attributes */
	}
	ret = file_open(d, ino, fi);
	if (ret)
		goto fail;
	fuse_reply_open(req, fi);
	return;
fail:
	fuse_reply_err(req, -ret);
}

static void mfsd_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                        struct fuse_file_info *fi)
{
	struct mfsd *d = D(req);
	struct fuse_entry_param e;
	struct stat st;
	int ret;

	ret = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &st);
	if (!ret)
		ret = node_get(d, st.st_ino, &e);
	if (ret)
		goto fail;
	ret = file_open(d, st.st_ino, fi);
	if (ret) {
		node_forget(d, st.st_ino, 1);
		goto fail;
	}
	fuse_reply_create(req, &e, fi);
	return;
fail:
	fuse_reply_err(req, -ret);
}

/* The reply of a zero-copy read: the kernel copies straight from the mapping. */
static int reply_direct(void *arg, const struct iovec *iov, int cnt)
{
	/*
	 * Whatever writev says, the request is answered: if the copy faults
	 * (poison protected after the check) the kernel ends it with EIO.
	 */
	fuse_reply_iov(arg, iov, cnt);
	return 0;
}

static void mfsd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
	ssize_t n = -ENOMEM;
	char *buf;
	int ret;

	/* before the reply: a stat right after the read must see the new atime */
	mfsd_accessed(D(req)->fs, ((struct mfsd_file *)(uintptr_t)fi->fh)->ip, fi->flags);
	ret = mfs_read_direct(D(req)->fs, ino, size, off, reply_direct, req);
	if (ret != -EOPNOTSUPP) {
		if (ret)
			fuse_reply_err(req, -ret);
		return;
	}
	/* no mapping the kernel may copy from, poison beside the range, or too fragmented */
	buf = malloc(size ? size : 1);
	if (!buf)
		goto fail;
	/* a range touching poison is -EIO as a whole: the kernel retries page by page */
	n = mfs_read(D(req)->fs, ino, buf, size, off);
	if (n < 0)
		goto fail;
	fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
	return;
fail:
	free(buf);
	fuse_reply_err(req, (int)-n);
}

/* The mode of an open file (its handle pins the inode). */
static uint32_t file_mode(struct fuse_file_info *fi, gid_t *gid)
{
	struct mfsd_file *f = (struct mfsd_file *)(uintptr_t)fi->fh;
	uint32_t mode;

	pthread_rwlock_rdlock(&f->ip->lock);
	mode = f->ip->di.mode;
	if (gid)
		*gid = f->ip->di.gid;
	pthread_rwlock_unlock(&f->ip->lock);
	return mode;
}

/*
 * A write by a caller without CAP_FSETID (HANDLE_KILLPRIV_V2) clears setuid,
 * setgid if group-executable, and setgid without group exec if the caller is
 * outside the file's group, under the write's own inode lock.  Usually the
 * kernel's empty SETATTR before the write (setattr_kill) has done it and the
 * file has no bit left: one shared lock to see that.  *mode: the mode before.
 */
static unsigned write_flags(fuse_req_t req, struct fuse_file_info *fi, uint32_t *mode)
{
	unsigned flags = MFS_WRITE_KILL_SUIDGID;
	gid_t gid;

	if (!mfsd_io_kill_suidgid())
		return 0;
	*mode = file_mode(fi, &gid);
	if (!(*mode & (S_ISUID | S_ISGID)))
		return 0;
	if (sgid_noexec(*mode) && drops_sgid(req, gid, true))
		flags |= MFS_WRITE_KILL_SGID;
	return flags;
}

/* mfs_write_flags, and the kernel told if the write cleared a bit (the reply has no attributes). */
static ssize_t write_kill(fuse_req_t req, fuse_ino_t ino, const void *buf, size_t size, off_t off,
                          struct fuse_file_info *fi)
{
	uint32_t mode = 0;
	unsigned flags = write_flags(req, fi, &mode);
	ssize_t n;

	n = mfs_write_flags(D(req)->fs, ino, buf, size, off, flags);
	if (flags && file_mode(fi, NULL) != mode)
		mode_changed(D(req), ino);
	return n;
}

static void mfsd_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	ssize_t n;

	n = write_kill(req, ino, buf, size, off, fi);
	if (n < 0)
		goto fail;
	fuse_reply_write(req, (size_t)n);
	return;
fail:
	fuse_reply_err(req, (int)-n);
}

static void mfsd_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf, off_t off,
                           struct fuse_file_info *fi)
{
	size_t size = fuse_buf_size(in_buf);
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(size);
	const struct fuse_buf *b = &in_buf->buf[in_buf->idx];
	ssize_t n = -ENOMEM;
	void *copy = NULL;

	if (in_buf->count - in_buf->idx == 1 && !(b->flags & FUSE_BUF_IS_FD)) {
		/* the usual case (no splice): the data is in the request buffer */
		mfsd_write(req, ino, (const char *)b->mem + in_buf->off, size, off, fi);
		return;
	}
	copy = malloc(size ? size : 1);
	if (!copy)
		goto fail;
	mem.buf[0].mem = copy;
	n = fuse_buf_copy(&mem, in_buf, 0);
	if (n < 0)
		goto fail;
	n = write_kill(req, ino, copy, (size_t)n, off, fi);
	if (n < 0)
		goto fail;
	free(copy);
	fuse_reply_write(req, (size_t)n);
	return;
fail:
	free(copy);
	fuse_reply_err(req, (int)-n);
}

static void mfsd_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	file_close(D(req), fi);
	fuse_reply_err(req, 0);
}

static void mfsd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, -mfs_fsync(D(req)->fs, ino, datasync != 0));
}

static void mfsd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret;

	ret = mfs_getattr(D(req)->fs, ino, &st);
	if (!ret && !S_ISDIR(st.st_mode))
		ret = -ENOTDIR;
	if (!ret)
		ret = file_open(D(req), ino, fi);
	if (ret)
		goto fail;
	fuse_reply_open(req, fi);
	return;
fail:
	fuse_reply_err(req, -ret);
}

static void mfsd_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	file_close(D(req), fi);
	fuse_reply_err(req, 0);
}

static void mfsd_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, -mfs_fsync(D(req)->fs, ino, datasync != 0));
}

/* readdir: entries straight into the reply buffer. */
struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
};

static int fill_dir(void *arg, const char *name, size_t name_len, uint64_t ino, unsigned dtype,
                    uint64_t next_pos)
{
	struct dirbuf *db = arg;
	struct stat st = {.st_ino = ino, .st_mode = (mode_t)(dtype << 12)};
	char nm[NAME_MAX + 1];
	size_t n;

	if (name_len > NAME_MAX)
		name_len = NAME_MAX;
	memcpy(nm, name, name_len);
	nm[name_len] = '\0';
	n = fuse_add_direntry(db->req, db->buf + db->used, db->size - db->used, nm, &st,
	                      (off_t)next_pos);
	if (n > db->size - db->used)
		return 1; /* full: this entry comes first next time */
	db->used += n;
	return 0;
}

static void mfsd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                         struct fuse_file_info *fi)
{
	struct dirbuf db = {.req = req, .size = size};
	struct mfsd_file *f = (struct mfsd_file *)(uintptr_t)fi->fh;
	int ret = -ENOMEM;

	mfsd_accessed(D(req)->fs, f->ip, f->flags);
	db.buf = malloc(size ? size : 1);
	if (!db.buf)
		goto fail;
	ret = mfs_readdir(D(req)->fs, ino, (uint64_t)off, fill_dir, &db);
	if (ret && !db.used)
		goto fail;
	fuse_reply_buf(req, db.buf, db.used);
	free(db.buf);
	return;
fail:
	free(db.buf);
	fuse_reply_err(req, -ret);
}

/*
 * readdirplus: entries are collected under the directory's lock (as many as
 * the reply can hold), then each is pinned and its attributes read outside
 * it: every entry returned, except "." and "..", takes a lookup reference.
 */
struct plus_ent {
	uint64_t ino, next_pos;
	char name[NAME_MAX + 1];
};

struct plusbuf {
	fuse_req_t req;
	size_t size, used;
	struct plus_ent *ents;
	size_t n, cap;
	int err;
};

static int collect_plus(void *arg, const char *name, size_t name_len, uint64_t ino, unsigned dtype,
                        uint64_t next_pos)
{
	struct plusbuf *pb = arg;
	struct plus_ent *pe;
	size_t need;

	(void)dtype;
	if (name_len > NAME_MAX)
		name_len = NAME_MAX;
	if (pb->n == pb->cap) {
		size_t cap = pb->cap ? pb->cap * 2 : 64;
		struct plus_ent *v = realloc(pb->ents, cap * sizeof(*v));

		if (!v) {
			pb->err = -ENOMEM;
			return 1;
		}
		pb->ents = v;
		pb->cap = cap;
	}
	pe = &pb->ents[pb->n];
	memcpy(pe->name, name, name_len);
	pe->name[name_len] = '\0';
	need = fuse_add_direntry_plus(pb->req, NULL, 0, pe->name, NULL, 0);
	if (need > pb->size - pb->used)
		return 1;
	pe->ino = ino;
	pe->next_pos = next_pos;
	pb->used += need;
	pb->n++;
	return 0;
}

static void mfsd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                             struct fuse_file_info *fi)
{
	struct mfsd *d = D(req);
	struct plusbuf pb = {.req = req, .size = size};
	size_t i, used = 0;
	struct mfsd_file *f = (struct mfsd_file *)(uintptr_t)fi->fh;
	char *buf = NULL;
	int ret;

	mfsd_accessed(d->fs, f->ip, f->flags);
	ret = mfs_readdir(d->fs, ino, (uint64_t)off, collect_plus, &pb);
	if (!ret)
		ret = pb.err;
	if (ret && !pb.n)
		goto fail;
	ret = -ENOMEM;
	buf = malloc(size ? size : 1);
	if (!buf)
		goto fail;
	for (i = 0; i < pb.n; i++) {
		struct plus_ent *pe = &pb.ents[i];
		struct fuse_entry_param e;
		bool dots = !strcmp(pe->name, ".") || !strcmp(pe->name, "..");

		ret = dots ? -ENOENT : node_get(d, pe->ino, &e);
		if (ret == -ENOENT) {
			/*
			 * "." and "..", or an entry removed since it was listed
			 * (skipping it could leave an empty reply, read as the
			 * end of the directory): a name without attributes,
			 * which takes no lookup reference (node id 0).
			 */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = pe->ino;
			e.attr.st_mode = dots ? S_IFDIR : 0;
		} else if (ret) {
			if (!used)
				goto fail;
			break;
		}
		used += fuse_add_direntry_plus(req, buf + used, size - used, pe->name, &e,
		                               (off_t)pe->next_pos);
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
	free(pb.ents);
	return;
fail:
	free(buf);
	free(pb.ents);
	fuse_reply_err(req, -ret);
}

static void mfsd_statfs(fuse_req_t req, fuse_ino_t ino)
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

static void mfsd_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                          size_t size, int flags)
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
		if (!ret && (st.st_mode & S_ISGID) && drops_sgid(req, st.st_gid, false))
			flags |= MFS_XATTR_KILL_SGID;
	}
	if (!ret)
		ret = mfs_setxattr(D(req)->fs, ino, name, value, size, flags);
	fuse_reply_err(req, -ret);
}

static void mfsd_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	ssize_t n = -ENOMEM;
	char *buf = NULL;

	if (size) {
		buf = malloc(size);
		if (!buf)
			goto fail;
	}
	n = mfs_getxattr(D(req)->fs, ino, name, buf, size);
	if (n < 0)
		goto fail;
	if (size)
		fuse_reply_buf(req, buf, (size_t)n);
	else
		fuse_reply_xattr(req, (size_t)n);
	free(buf);
	return;
fail:
	free(buf);
	fuse_reply_err(req, (int)-n);
}

static void mfsd_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	ssize_t n = -ENOMEM;
	char *buf = NULL;

	if (size) {
		buf = malloc(size);
		if (!buf)
			goto fail;
	}
	n = mfs_listxattr(D(req)->fs, ino, buf, size);
	if (n < 0)
		goto fail;
	if (size)
		fuse_reply_buf(req, buf, (size_t)n);
	else
		fuse_reply_xattr(req, (size_t)n);
	free(buf);
	return;
fail:
	free(buf);
	fuse_reply_err(req, (int)-n);
}

static void mfsd_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, -mfs_removexattr(D(req)->fs, ino, name));
}

static void mfsd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                           struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, -mfs_fallocate(D(req)->fs, ino, mode, off, len));
}

static void mfsd_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                       struct fuse_file_info *fi)
{
	off_t ret;

	(void)fi;
	if (D(req)->writeback) {
		/*
		 * The kernel's writeback cache holds data and sizes the daemon
		 * does not see yet, and it does not write back before asking:
		 * ENOSYS makes it answer itself (all data, a hole at EOF).
		 */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	ret = mfs_lseek(D(req)->fs, ino, off, whence);
	if (ret < 0)
		goto fail;
	fuse_reply_lseek(req, ret);
	return;
fail:
	fuse_reply_err(req, (int)-ret);
}

/* The header every MENDFS_IOC_* struct starts with; reserved words must be zero. */
static bool ioc_valid(uint32_t version, uint32_t flags, const uint64_t *reserved, unsigned n)
{
	if (version != MENDFS_IOC_VERSION || flags)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (reserved[i])
			return false;
	return true;
}

static bool can_read(const struct mfsd_file *f)
{
	return (f->flags & O_ACCMODE) == O_RDONLY || (f->flags & O_ACCMODE) == O_RDWR;
}

static bool can_write(const struct mfsd_file *f)
{
	return (f->flags & O_ACCMODE) == O_WRONLY || (f->flags & O_ACCMODE) == O_RDWR;
}

static int ioc_recovery_read(struct mfsd *d, uint64_t ino, struct mfsd_file *f,
                             struct mendfs_ioc_recovery_read *a)
{
	struct mfs_frange r[MENDFS_RR_MAX_RANGES];
	unsigned nr, i;
	bool trunc;
	ssize_t n;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->length ||
	    a->length > MENDFS_RR_CHUNK || a->offset > (uint64_t)INT64_MAX - a->length)
		return -EINVAL;
	if (!can_read(f))
		return -EBADF;
	n = mfs_recovery_read(d->fs, ino, a->data, (size_t)a->length, a->offset, r,
	                      MENDFS_RR_MAX_RANGES, &nr, &trunc);
	if (n < 0)
		return (int)n;
	memset(a->data + n, 0, MENDFS_RR_CHUNK - (size_t)n);
	memset(a->zeroed, 0, sizeof(a->zeroed));
	a->bytes = (uint64_t)n;
	a->nr_zeroed = nr;
	a->truncated = trunc;
	for (i = 0; i < nr; i++) {
		a->zeroed[i].offset = r[i].offset;
		a->zeroed[i].length = r[i].length;
	}
	return 0;
}

static int ioc_badranges(struct mfsd *d, uint64_t ino, struct mendfs_ioc_badranges *a)
{
	struct mfs_frange r[MENDFS_BADRANGES_MAX];
	unsigned nr, i;
	bool last;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || a->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mfs_badranges(d->fs, ino, a->start, r, MENDFS_BADRANGES_MAX, &nr, &a->next, &last);
	if (ret)
		return ret;
	memset(a->ranges, 0, sizeof(a->ranges));
	a->nr = nr;
	a->last = last;
	for (i = 0; i < nr; i++) {
		a->ranges[i].offset = r[i].offset;
		a->ranges[i].length = r[i].length;
	}
	return 0;
}

static int ioc_bmap(struct mfsd *d, uint64_t ino, struct mendfs_ioc_bmap *a)
{
	struct mfs_fextent x[MENDFS_BMAP_MAX];
	unsigned nr, i;
	bool last;
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || a->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	ret = mfs_bmap_extents(d->fs, ino, a->start, x, MENDFS_BMAP_MAX, &nr, &a->next, &last);
	if (ret)
		return ret;
	memset(a->extents, 0, sizeof(a->extents));
	a->nr = nr;
	a->last = last;
	for (i = 0; i < nr; i++) {
		a->extents[i].offset = x[i].offset;
		a->extents[i].length = x[i].length;
		a->extents[i].sector = x[i].sector;
		a->extents[i].flags = x[i].unwritten ? MENDFS_EXTENT_UNWRITTEN : 0;
	}
	return 0;
}

static int ioc_zeroinit(struct mfsd *d, uint64_t ino, struct mendfs_ioc_zeroinit *a,
                        struct mfsd_file *f)
{
	int ret;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->length || a->offset % 512 ||
	    a->length % 512 || a->offset > (uint64_t)INT64_MAX - a->length)
		return -EINVAL;
	if (!can_write(f))
		return -EBADF;
	if (d->read_only)
		return -EROFS;
	ret = mfs_zeroinit(d->fs, ino, a->offset, a->length);
	if (!ret) /* the kernel's cached pages and attributes (mtime) are stale now */
		fuse_lowlevel_notify_inval_inode(d->se, ino, (off_t)a->offset, (off_t)a->length);
	return ret;
}

static int ioc_recovery_write(struct mfsd *d, uint64_t ino, struct mendfs_ioc_recovery_write *a,
                              struct mfsd_file *f)
{
	ssize_t n;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->length ||
	    a->length > MENDFS_RW_CHUNK || a->offset > (uint64_t)INT64_MAX - a->length)
		return -EINVAL;
	if (!can_write(f))
		return -EBADF;
	if (d->read_only)
		return -EROFS;
	n = mfs_recovery_write(d->fs, ino, a->data, (size_t)a->length, a->offset);
	if (n < 0)
		return (int)n;
	a->written = (uint64_t)n;
	/* written behind the kernel's back: its cached pages and size are stale */
	fuse_lowlevel_notify_inval_inode(d->se, ino, (off_t)a->offset, (off_t)a->length);
	return 0;
}

/*
 * Online poison injection: root (the requesting process's uid as FUSE reports
 * it) on a -o poison_inject mount, checked before the struct (EPERM), then
 * the range (EINVAL), then the mount (EROFS: nothing is written on a
 * read-only mount, not even the emulation file).
 */
static int ioc_inject(struct mfsd *d, fuse_req_t req, struct mendfs_ioc_inject *a)
{
	struct blk_dev_info info;
	uint64_t nr_sectors;
	int ret;

	blk_dev_get_info(d->fs->dev, &info);
	nr_sectors = info.nr_sectors;
	if (!d->poison_inject || fuse_req_ctx(req)->uid != 0)
		return -EPERM;
	if (!ioc_valid(a->version, a->flags, a->reserved, 4) || !a->count ||
	    a->sector >= nr_sectors || a->count > nr_sectors - a->sector)
		return -EINVAL;
	if (d->read_only)
		return -EROFS;
	ret = blk_poison_add(d->fs->dev, a->sector, a->count);
	if (ret)
		logmsg(LOG_ERR, "inject poison at sector %llu count %llu: %s",
		       (unsigned long long)a->sector, (unsigned long long)a->count, strerror(-ret));
	else
		logmsg(LOG_NOTICE, "injected poison at sector %llu count %llu (pid %d)",
		       (unsigned long long)a->sector, (unsigned long long)a->count,
		       (int)fuse_req_ctx(req)->pid);
	return ret;
}

static int ioc_stats(struct mfsd *d, struct mendfs_ioc_stats *a)
{
	struct mfs_stats *fst = &d->fs->stats;
	struct blk_stats st;

	if (!ioc_valid(a->version, a->flags, a->reserved, 4))
		return -EINVAL;
	blk_dev_get_stats(d->fs->dev, &st);
	memset((uint8_t *)a + offsetof(struct mendfs_ioc_stats, reads), 0,
	       sizeof(*a) - offsetof(struct mendfs_ioc_stats, reads));
	a->reads = st.ios[BLK_OP_READ];
	a->writes = st.ios[BLK_OP_WRITE];
	a->write_zeroes = st.ios[BLK_OP_WRITE_ZEROES];
	a->read_bytes = st.bytes[BLK_OP_READ];
	a->write_bytes = st.bytes[BLK_OP_WRITE];
	a->requests = st.requests;
	a->errors = st.errors;
	a->poison_hits = st.poison_hits;
	a->media_errors = st.media_errors;
	a->recovered_sectors = st.recovered_sectors;
	a->poison_cleared = st.poison_cleared;
	a->faults = st.faults;
	a->poison_ranges = blk_poison_count(d->fs->dev);
	a->meta_reads = fst->meta_reads;
	a->meta_writes = fst->meta_writes;
	a->meta_repairs = fst->meta_repairs;
	a->meta_lost = fst->meta_lost;
	a->commits = fst->commits;
	a->journal_blocks = fst->journal_blocks;
	a->checkpoints = fst->checkpoints;
	return 0;
}

/*
 * The recovery ioctls (include/mendfs/ioctl.h, docs/RECOVERY.md): restricted
 * ioctls only, each with its exact struct size in and out.  Recovery read
 * needs the file open for reading, zero-init open for writing.
 */
static void mfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                       struct fuse_file_info *fi, unsigned flags, const void *in_buf,
                       size_t in_bufsz, size_t out_bufsz)
{
	struct mfsd *d = D(req);
	struct mfsd_file *f = (struct mfsd_file *)(uintptr_t)fi->fh;
	size_t size;
	void *a;
	int ret;

	(void)arg;
	switch (cmd) {
	case MENDFS_IOC_RECOVERY_READ:
	case MENDFS_IOC_BADRANGES:
	case MENDFS_IOC_BMAP:
	case MENDFS_IOC_ZEROINIT:
	case MENDFS_IOC_STATS:
	case MENDFS_IOC_INJECT:
	case MENDFS_IOC_RECOVERY_WRITE:
		size = _IOC_SIZE(cmd);
		break;
	default:
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (flags & FUSE_IOCTL_UNRESTRICTED || in_bufsz != size || out_bufsz != size || !f) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	a = malloc(size);
	if (!a) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(a, in_buf, size);
	switch (cmd) {
	case MENDFS_IOC_RECOVERY_READ:
		ret = ioc_recovery_read(d, ino, f, a);
		break;
	case MENDFS_IOC_BADRANGES:
		ret = ioc_badranges(d, ino, a);
		break;
	case MENDFS_IOC_BMAP:
		ret = ioc_bmap(d, ino, a);
		break;
	case MENDFS_IOC_ZEROINIT:
		ret = ioc_zeroinit(d, ino, a, f);
		break;
	case MENDFS_IOC_INJECT:
		ret = ioc_inject(d, req, a);
		break;
	case MENDFS_IOC_RECOVERY_WRITE:
		ret = ioc_recovery_write(d, ino, a, f);
		break;
	default:
		ret = ioc_stats(d, a);
		break;
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_ioctl(req, 0, a, size);
	free(a);
}

static void mfsd_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
                                 struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
                                 struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct mfs *fs = D(req)->fs;
	size_t done = 0;
	ssize_t n = -EINVAL;
	char *buf = NULL;

	(void)fi_in;
	(void)fi_out;
	if (flags)
		goto fail;
	n = -ENOMEM;
	buf = malloc(MFSD_COPY_CHUNK);
	if (!buf)
		goto fail;
	while (done < len) {
		size_t want = len - done < MFSD_COPY_CHUNK ? len - done : MFSD_COPY_CHUNK;
		ssize_t got, put;

		got = mfs_read(fs, ino_in, buf, want, off_in + (off_t)done);
		if (got <= 0) {
			n = got;
			break;
		}
		put = mfs_write(fs, ino_out, buf, (size_t)got, off_out + (off_t)done);
		if (put <= 0) {
			n = put;
			break;
		}
		done += (size_t)put;
		if (put < got)
			break;
	}
	if (!done && n < 0)
		goto fail;
	free(buf);
	fuse_reply_write(req, done);
	return;
fail:
	free(buf);
	fuse_reply_err(req, (int)-n);
}

static const struct fuse_lowlevel_ops mfsd_ops = {
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
        .releasedir = mfsd_releasedir,
        .fsyncdir = mfsd_fsyncdir,
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

/* --- periodic commit ---------------------------------------------------------------------- */

/*
 * Every commit_interval seconds, commit the running transaction (like ext4's
 * commit=): what was written without fsync is durable within about that
 * long.  A commit with nothing to do costs two uncontended locks.
 */
static void *commit_main(void *arg)
{
	struct mfsd *d = arg;
	int last_err = 0;

	pthread_mutex_lock(&d->commit_lock);
	while (!d->commit_stop) {
		struct timespec ts;
		int ret;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += d->commit_interval;
		while (!d->commit_stop &&
		       pthread_cond_timedwait(&d->commit_cond, &d->commit_lock, &ts) != ETIMEDOUT)
			;
		if (d->commit_stop)
			break;
		pthread_mutex_unlock(&d->commit_lock);
		mfs_atime_flush(d->fs); /* lazy atimes join the commit (failures are logged) */
		ret = mfs_txn_commit(d->fs);
		if (ret && ret != last_err)
			logmsg(LOG_ERR, "periodic journal commit failed: %s", strerror(-ret));
		last_err = ret;
		pthread_mutex_lock(&d->commit_lock);
	}
	pthread_mutex_unlock(&d->commit_lock);
	return NULL;
}

static void commit_start(struct mfsd *d)
{
	pthread_condattr_t ca;
	int ret;

	if (!d->commit_interval || d->read_only)
		return;
	pthread_mutex_init(&d->commit_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->commit_cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&d->commit_thread, NULL, commit_main, d);
	if (ret) {
		logmsg(LOG_WARNING, "no periodic commit: %s", strerror(ret));
		return;
	}
	d->commit_started = true;
}

static void commit_stop(struct mfsd *d)
{
	if (!d->commit_started)
		return;
	pthread_mutex_lock(&d->commit_lock);
	d->commit_stop = true;
	pthread_cond_signal(&d->commit_cond);
	pthread_mutex_unlock(&d->commit_lock);
	pthread_join(d->commit_thread, NULL);
	d->commit_started = false;
}

/* --- options ------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: mendfs [-f] [-o OPTS] DEVICE MOUNTPOINT\n"
	           "  -f        stay in the foreground (log to stderr)\n"
	           "  -o OPTS   comma-separated mount options:\n"
	           "            ro, rw, allow_other, backend=pmem|uring|auto, badblocks=PATH,\n"
	           "            poison_inject, writeback, commit=SECONDS, threads=N,\n"
	           "            timeout=SECONDS, debug, fault_inject=N|N+|0 (testing),\n"
	           "            default_permissions (always on), and the generic flags\n"
	           "            atime, relatime, strictatime, noatime, nodiratime, diratime,\n"
	           "            nosuid, suid, nodev, dev, noexec, exec, sync, async, dirsync\n"
	           "  -h        this help; -V  version\n"
	           "See mendfs(8).\n");
}

/* Generic mount flags handed to the kernel through libfuse. */
static const char *const kernel_flags[] = {
        "nosuid", "suid", "nodev", "dev", "noexec", "exec", "sync", "async", "dirsync", NULL,
};

static int kopt_add(struct mfsd_opts *o, const char *opt)
{
	size_t len = strlen(o->kernel_opts);

	if (len + 1 + strlen(opt) + 1 > sizeof(o->kernel_opts))
		return -1;
	snprintf(o->kernel_opts + len, sizeof(o->kernel_opts) - len, ",%s", opt);
	return 0;
}

/* A decimal option value in [lo, hi] into *out; false if it is anything else. */
static bool opt_uint(const char *val, unsigned long lo, unsigned long hi, unsigned *out)
{
	char *end;
	unsigned long n = strtoul(val, &end, 10);

	if (!*val || *end || n < lo || n > hi)
		return false;
	*out = (unsigned)n;
	return true;
}

/* Parse one comma-separated -o list into @o.  Returns 0 or -1 after a message. */
static int parse_opts(struct mfsd_opts *o, char *list)
{
	char *save = NULL, *opt;
	unsigned i;

	for (opt = strtok_r(list, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *val = strchr(opt, '=');
		bool known = false;

		if (val)
			*val++ = '\0';
		if (!strcmp(opt, "ro") && !val) {
			o->read_only = true;
		} else if (!strcmp(opt, "rw") && !val) {
			o->read_only = false;
		} else if (!strcmp(opt, "allow_other") && !val) {
			o->allow_other = true;
		} else if (!strcmp(opt, "default_permissions") && !val) {
			/* always on */
		} else if (!val && mfsd_atime_opt(opt, &o->atime)) {
			/* the daemon applies it; libfuse passes (no)atime on to mount(2) */
			if ((!strcmp(opt, "atime") || !strcmp(opt, "noatime")) &&
			    kopt_add(o, opt)) {
				logmsg(LOG_ERR, "too many mount options");
				return -1;
			}
		} else if (!strcmp(opt, "debug") && !val) {
			o->debug = true;
		} else if (!strcmp(opt, "poison_inject") && !val) {
			o->poison_inject = true;
		} else if (!strcmp(opt, "writeback") && !val) {
			o->writeback = true;
		} else if (!strcmp(opt, "no_writeback") && !val) {
			o->writeback = false;
		} else if (!strcmp(opt, "backend") && val) {
			if (!strcmp(val, "pmem"))
				o->backend = BLK_BACKEND_PMEM;
			else if (!strcmp(val, "uring"))
				o->backend = BLK_BACKEND_URING;
			else if (!strcmp(val, "auto"))
				o->backend = BLK_BACKEND_AUTO;
			else {
				logmsg(LOG_ERR, "backend=%s: expected pmem, uring or auto", val);
				return -1;
			}
		} else if (!strcmp(opt, "fault_inject") && val) {
			o->fault_inject = !mfsd_parse_fault(val, &o->fault_nth, &o->fault_dying);
			if (!o->fault_inject) {
				logmsg(LOG_ERR, "fault_inject=%s: expected N, N+ or 0", val);
				return -1;
			}
		} else if (!strcmp(opt, "badblocks") && val && *val) {
			o->badblocks = val;
		} else if (!strcmp(opt, "threads") && val) {
			if (!opt_uint(val, 1, 1024, &o->threads)) {
				logmsg(LOG_ERR, "threads=%s: expected a number from 1 to 1024",
				       val);
				return -1;
			}
		} else if (!strcmp(opt, "commit") && val) {
			if (!opt_uint(val, 0, 86400, &o->commit)) {
				logmsg(LOG_ERR, "commit=%s: expected seconds from 0 (off) to 86400",
				       val);
				return -1;
			}
		} else if (!strcmp(opt, "timeout") && val) {
			char *end;
			double t = strtod(val, &end);

			if (!*val || *end || t < 0 || t > 86400) {
				logmsg(LOG_ERR, "timeout=%s: expected seconds from 0 to 86400",
				       val);
				return -1;
			}
			o->timeout = t;
		} else {
			for (i = 0; kernel_flags[i] && !known; i++)
				known = !val && !strcmp(opt, kernel_flags[i]);
			if (!known) {
				logmsg(LOG_ERR, "unknown mount option '%s%s%s' (see mendfs(8))",
				       opt, val ? "=" : "", val ? val : "");
				return -1;
			}
			if (kopt_add(o, opt)) {
				logmsg(LOG_ERR, "too many mount options");
				return -1;
			}
		}
	}
	return 0;
}

/* --- start-up ------------------------------------------------------------------------------ */

/*
 * Fork before anything is opened.  The parent waits until the child reports
 * the mount live (a zero byte on the pipe) and exits 0; if the pipe closes
 * without it, the parent exits with the child's status.  Returns the write
 * end of the pipe in the child.
 */
static int fork_and_wait(void)
{
	int pfd[2], status;
	char c;
	pid_t pid;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC)) {
		logmsg(LOG_ERR, "pipe: %s", strerror(errno));
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		logmsg(LOG_ERR, "fork: %s", strerror(errno));
		exit(1);
	}
	if (pid == 0) {
		close(pfd[0]);
		return pfd[1];
	}
	close(pfd[1]);
	do
		n = read(pfd[0], &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && c == 0)
		_exit(0);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	_exit(WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1);
}

/* Daemonized: the core's messages on stderr go to syslog line by line. */
static void *stderr_to_syslog(void *arg)
{
	FILE *f = fdopen((int)(intptr_t)arg, "r");
	char line[1024];

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		syslog(LOG_ERR, "%s", line);
	}
	fclose(f);
	return NULL;
}

static void fuse_log_syslog(enum fuse_log_level level, const char *fmt, va_list ap)
{
	vsyslog((int)level, fmt, ap);
}

/* The mount is live: tell the waiting parent, leave the terminal and the session. */
static void detach(int status_fd)
{
	pthread_t th;
	int nullfd, pfd[2];
	char c = 0;

	openlog("mendfs", LOG_PID, LOG_DAEMON);
	use_syslog = true;
	fuse_set_log_func(fuse_log_syslog);
	if (setsid() < 0)
		logmsg(LOG_WARNING, "setsid: %s", strerror(errno));
	if (chdir("/"))
		logmsg(LOG_WARNING, "chdir /: %s", strerror(errno));
	nullfd = open("/dev/null", O_RDWR);
	if (nullfd >= 0) {
		dup2(nullfd, 0);
		dup2(nullfd, 1);
		dup2(nullfd, 2);
		if (nullfd > 2)
			close(nullfd);
	}
	if (!pipe2(pfd, O_CLOEXEC)) {
		dup2(pfd[1], 2);
		close(pfd[1]);
		if (pthread_create(&th, NULL, stderr_to_syslog, (void *)(intptr_t)pfd[0]) == 0)
			pthread_detach(th);
		else
			close(pfd[0]);
	}
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (write(status_fd, &c, 1) != 1)
		logmsg(LOG_WARNING, "could not signal the parent: %s", strerror(errno));
	close(status_fd);
}

int main(int argc, char **argv)
{
	struct mfsd_opts o = {
	        .threads = 0, .timeout = MFSD_DEFAULT_TIMEOUT, .commit = MFSD_DEFAULT_COMMIT};
	struct mfs_mount_opts mo = {0};
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lcfg = NULL;
	char *optlist = NULL, fuse_opts[2 * PATH_MAX + 1024], err[512], mnt[PATH_MAX];
	char fsname[2 * PATH_MAX];
	char *dev_abs = NULL, *bb_abs = NULL;
	const char *device = NULL, *mountpoint;
	struct fuse_entry_param root;
	unsigned long dropped;
	struct mfsd *d = NULL;
	struct stat st;
	int c, ret, status_fd = -1, exit_code = 1;
	bool live = false;

	while ((c = getopt(argc, argv, "fo:hVd")) != -1) {
		switch (c) {
		case 'f':
			o.foreground = true;
			break;
		case 'd':
			o.debug = true;
			break;
		case 'o': {
			size_t len = optlist ? strlen(optlist) : 0;
			char *n = realloc(optlist, len + strlen(optarg) + 2);

			if (!n) {
				logmsg(LOG_ERR, "out of memory");
				return 1;
			}
			if (len)
				n[len++] = ',';
			strcpy(n + len, optarg);
			optlist = n;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("mendfs 0.1.0 (libfuse %s)\n", fuse_pkgversion());
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 1;
	}
	mountpoint = argv[optind + 1];
	if (optlist && parse_opts(&o, optlist))
		goto out;

	/*
	 * Every path the daemon keeps, absolute before it detaches (and leaves
	 * its working directory): DEVICE, which is also the mount source (fsname)
	 * and names the default DEVICE.badblocks, and badblocks=PATH.
	 */
	if (stat(argv[optind], &st)) {
		logmsg(LOG_ERR, "%s: %s", argv[optind], strerror(errno));
		goto out;
	}
	device = dev_abs = mfsd_abs_path(argv[optind]);
	if (!device) {
		logmsg(LOG_ERR, "%s: %s", argv[optind], strerror(errno));
		goto out;
	}
	if (o.badblocks) {
		bb_abs = mfsd_abs_path(o.badblocks);
		ret = bb_abs ? mfsd_parent_dir_exists(bb_abs) : -errno;
		if (ret) {
			/* the emulation file may be missing, but not its directory */
			logmsg(LOG_ERR, "badblocks=%s: its directory: %s", o.badblocks,
			       strerror(-ret));
			goto out;
		}
		o.badblocks = bb_abs;
	}
	if (!realpath(mountpoint, mnt) || stat(mnt, &st)) {
		logmsg(LOG_ERR, "mount point %s: %s", mountpoint, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		logmsg(LOG_ERR, "mount point %s: %s", mountpoint, strerror(ENOTDIR));
		goto out;
	}

	if (!o.foreground)
		status_fd = fork_and_wait();

	d = calloc(1, sizeof(*d));
	if (!d) {
		logmsg(LOG_ERR, "out of memory");
		goto out;
	}
	pthread_mutex_init(&d->nodes_lock, NULL);
	d->files.next = d->files.prev = &d->files;
	d->timeout = o.timeout;
	d->read_only = o.read_only;
	d->writeback = o.writeback;
	d->commit_interval = o.commit;
	d->poison_inject = o.poison_inject;

	mo.read_only = o.read_only;
	mo.backend = o.backend;
	mo.badblocks = o.badblocks;
	mo.exclusive = true;
	mo.atime = o.atime;
	mo.fault_inject = o.fault_inject;
	mo.fault_nth = o.fault_nth;
	mo.fault_dying = o.fault_dying;
	ret = mfs_mount(device, &mo, &d->fs, err, sizeof(err));
	/* locked by a daemon that was unmounted and is still exiting: wait for it */
	if (ret == -EBUSY && !mfs_dev_wait_exiting(device, MFS_DEV_EXIT_WAIT, "mendfs"))
		ret = mfs_mount(device, &mo, &d->fs, err, sizeof(err));
	if (ret) {
		if (err[0])
			logmsg(LOG_ERR, "%s", err); /* names the device */
		else
			logmsg(LOG_ERR, "cannot mount %s: %s", device, strerror(-ret));
		goto out;
	}
	/* the kernel's root node starts with one lookup: pin the root like any node */
	ret = node_get(d, FUSE_ROOT_ID, &root);
	if (ret) {
		logmsg(LOG_ERR, "%s: root directory: %s", device, strerror(-ret));
		goto unmount;
	}
	if (d->fs->read_only && !o.read_only) {
		logmsg(LOG_WARNING, "%s: mounted read-only (features this version cannot write)",
		       device);
		d->read_only = true;
	}

	/* the mount source: DEVICE, its commas and backslashes escaped for libfuse's -o */
	if (mfsd_opt_escape(device, fsname, sizeof(fsname))) {
		logmsg(LOG_ERR, "%s: path too long", device);
		goto unmount;
	}
	if ((size_t)snprintf(fuse_opts, sizeof(fuse_opts),
	                     "default_permissions,subtype=mendfs,fsname=%s%s%s%s", fsname,
	                     o.allow_other ? ",allow_other" : "", d->read_only ? ",ro" : "",
	                     o.kernel_opts) >= sizeof(fuse_opts)) {
		logmsg(LOG_ERR, "%s: mount options too long", device);
		goto unmount;
	}
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, fuse_opts) || (o.debug && fuse_opt_add_arg(&args, "-d"))) {
		logmsg(LOG_ERR, "out of memory");
		goto unmount;
	}
	d->se = fuse_session_new(&args, &mfsd_ops, sizeof(mfsd_ops), d);
	if (!d->se) {
		logmsg(LOG_ERR, "cannot create the FUSE session");
		goto unmount;
	}
	if (fuse_set_signal_handlers(d->se)) {
		logmsg(LOG_ERR, "cannot install signal handlers");
		goto destroy;
	}
	if (fuse_session_mount(d->se, mnt)) {
		logmsg(LOG_ERR, "cannot mount %s on %s", device, mnt);
		goto handlers;
	}
	if ((ret = mfsd_atime_show(mnt, o.atime)))
		logmsg(LOG_WARNING, "%s: strictatime/nodiratime not shown in the mount flags: %s",
		       mnt, strerror(-ret));
	/* our reads and writes of /dev/fuse, for HANDLE_KILLPRIV_V2 (daemon_io.h) */
	mfsd_io_want_killpriv_v2(!d->read_only);
	if (fuse_session_custom_io(d->se, &mfsd_fuse_io, fuse_session_fd(d->se))) {
		logmsg(LOG_ERR, "cannot set up the FUSE session's I/O");
		goto session_unmount;
	}

	/* before the caller is told the mount is live: an umount(8) right after must find it */
	if (mfsd_utab_register(device, mnt, err, sizeof(err)))
		logmsg(LOG_WARNING,
		       "%s: not recorded in utab for umount(8), which will not wait "
		       "for this daemon: %s",
		       mnt, err);
	if (!o.foreground) {
		detach(status_fd);
		status_fd = -1;
	}
	live = true;
	logmsg(LOG_INFO, "%s mounted on %s%s", device, mnt, d->read_only ? " (read-only)" : "");
	commit_start(d);

	lcfg = fuse_loop_cfg_create();
	if (!lcfg) {
		logmsg(LOG_ERR, "out of memory");
		goto session_unmount;
	}
	if (o.threads)
		fuse_loop_cfg_set_max_threads(lcfg, o.threads);
	fuse_loop_cfg_set_clone_fd(lcfg, 0);
	ret = fuse_session_loop_mt(d->se, lcfg);
	fuse_loop_cfg_destroy(lcfg);
	exit_code = ret < 0 ? 1 : 0;
	if (ret < 0)
		logmsg(LOG_ERR, "session loop: %s", strerror(-ret));

session_unmount:
	fuse_session_unmount(d->se);
	/* the mount is gone: drop its utab record if the unmount did not (fusermount3 -u) */
	if (live && (ret = mfsd_utab_unregister(device, mnt)))
		logmsg(LOG_WARNING, "%s: cannot drop its utab record: %s", mnt, strerror(-ret));
handlers:
	fuse_remove_signal_handlers(d->se);
destroy:
	fuse_session_destroy(d->se);
unmount:
	commit_stop(d);
	dropped = drop_all(d);
	if (o.debug)
		logmsg(LOG_DEBUG, "%lu nodes and open handles left at unmount", dropped);
	ret = mfs_unmount(d->fs);
	if (ret) {
		logmsg(LOG_ERR, "%s: unmount: %s", device, strerror(-ret));
		exit_code = 1;
	} else if (live) {
		logmsg(LOG_INFO, "%s unmounted cleanly", device);
	}
out:
	fuse_opt_free_args(&args);
	if (d) {
		pthread_mutex_destroy(&d->nodes_lock);
		free(d);
	}
	free(optlist);
	free(dev_abs);
	free(bb_abs);
	return exit_code;
}
