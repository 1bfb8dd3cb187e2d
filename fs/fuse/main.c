/* SPDX-License-Identifier: MIT */
/*
 * mendfs: the FUSE daemon.  `mendfs [-f] [-o OPTS] DEVICE MOUNTPOINT` mounts
 * the filesystem on DEVICE with the libfuse3 low-level API and serves it
 * through a transport (transport.h) that hands each request to the ops table
 * (ops.h).  main puts the pieces together and calls every one of them
 * (daemon.h lists them); nothing calls main.
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
 * for this daemon to finish (startup.c).  Once live the child detaches
 * (setsid, stdio to /dev/null) and its stderr, where the core logs, is
 * forwarded to syslog.
 *
 * Shutdown: unmount (umount, fusermount3 -u), SIGTERM, SIGINT or SIGHUP end
 * the transport's loop; the daemon then unmounts the FUSE session if still
 * mounted, drops every reference it holds (freeing unlinked inodes) and calls
 * mfs_unmount, which commits, checkpoints and marks the filesystem clean, and
 * closes the device: its lock goes, which is what umount.fuse.mendfs waits
 * for.
 *
 * Permissions are the kernel's (default_permissions), POSIX ACLs included
 * (FUSE_CAP_POSIX_ACL; the core keeps them, fs/core/acl.h).  The daemon's
 * share is to clear setuid/setgid as ext4 does when the kernel asks (suid.h)
 * and to pass the creator's umask to the core (DONT_MASK).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>

#include "daemon.h"
#include "mfs_devlock.h"
#include "mfs_ops.h"
#include "ops.h"
#include "options.h"
#include "startup.h"
#include "transport.h"

/*
 * The file option NAME=*@path made absolute into *@owned (it need not exist,
 * its directory must).  Returns 0, or -1 after saying why.
 */
static int abs_file_option(const char *name, const char **path, char **owned)
{
	int ret;

	if (!*path)
		return 0;
	*owned = mfsd_abs_path(*path);
	ret = *owned ? mfsd_parent_dir_exists(*owned) : -errno;
	if (ret) {
		mfsd_log(LOG_ERR, "%s=%s: its directory: %s", name, *path, strerror(-ret));
		return -1;
	}
	*path = *owned;
	return 0;
}

/*
 * The engine's hardware queues: one per FUSE worker thread, plus the main
 * thread's (mount, unmount) and the commit thread's, so that no two threads
 * that submit I/O at once share a submission queue (docs/design/daemon.md §4).
 */
static unsigned mfsd_hw_queues(unsigned threads, bool io_uring)
{
	unsigned n = (threads ? threads : MFSD_DEFAULT_THREADS) + 2;

	if (io_uring) /* and one per ring thread */
		n += mfsd_uring_nr_queues();
	return n < BLK_MAX_HW_QUEUES ? n : BLK_MAX_HW_QUEUES;
}

int main(int argc, char **argv)
{
	struct mfsd_opts o;
	struct mfs_mount_opts mo = {0};
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct mfsd_transport t = {0};
	char fuse_opts[2 * PATH_MAX + 1024], err[512], mnt[PATH_MAX];
	char fsname[2 * PATH_MAX];
	char *dev_abs = NULL, *bb_abs = NULL, *latent_abs = NULL;
	const char *device = NULL;
	struct fuse_entry_param root;
	unsigned long dropped;
	struct mfsd *d = NULL;
	struct stat st;
	int ret, status_fd = -1, exit_code = 1;
	bool live = false;

	ret = mfsd_parse_args(argc, argv, &o);
	if (ret) {
		mfsd_opts_free(&o);
		return ret > 0 ? 0 : 1;
	}

	/*
	 * Every path the daemon keeps, absolute before it detaches (and leaves
	 * its working directory): DEVICE, which is also the mount source (fsname)
	 * and names the default DEVICE.badblocks, badblocks=PATH and latent=PATH.
	 */
	if (stat(o.device, &st)) {
		mfsd_log(LOG_ERR, "%s: %s", o.device, strerror(errno));
		goto out;
	}
	device = dev_abs = mfsd_abs_path(o.device);
	if (!device) {
		mfsd_log(LOG_ERR, "%s: %s", o.device, strerror(errno));
		goto out;
	}
	if (abs_file_option("badblocks", &o.badblocks, &bb_abs) ||
	    abs_file_option("latent", &o.latent, &latent_abs))
		goto out;
	if (!realpath(o.mountpoint, mnt) || stat(mnt, &st)) {
		mfsd_log(LOG_ERR, "mount point %s: %s", o.mountpoint, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		mfsd_log(LOG_ERR, "mount point %s: %s", o.mountpoint, strerror(ENOTDIR));
		goto out;
	}

	if (!o.foreground)
		status_fd = mfsd_fork_and_wait();

	d = calloc(1, sizeof(*d));
	if (!d) {
		mfsd_log(LOG_ERR, "out of memory");
		goto out;
	}
	mfsd_nodes_init(&d->nodes);
	d->timeout = o.timeout;
	d->read_only = o.read_only;
	d->writeback = o.writeback;
	d->poison_inject = o.poison_inject;

	mo.read_only = o.read_only;
	mo.backend = o.backend;
	mo.badblocks = o.badblocks;
	mo.latent = o.latent;
	mo.exclusive = true;
	mo.atime = o.atime;
	mo.hw_queues = mfsd_hw_queues(o.threads, o.io_uring);
	mo.fault_inject = o.fault_inject;
	mo.fault_nth = o.fault_nth;
	mo.fault_dying = o.fault_dying;
	ret = mfs_mount(device, &mo, &d->fs, err, sizeof(err));
	/* locked by a daemon that was unmounted and is still exiting: wait for it */
	if (ret == -EBUSY && !mfs_dev_wait_exiting(device, MFS_DEV_EXIT_WAIT, "mendfs"))
		ret = mfs_mount(device, &mo, &d->fs, err, sizeof(err));
	if (ret) {
		if (err[0])
			mfsd_log(LOG_ERR, "%s", err); /* names the device */
		else
			mfsd_log(LOG_ERR, "cannot mount %s: %s", device, strerror(-ret));
		goto out;
	}
	/* the kernel's root node starts with one lookup: pin the root like any node */
	ret = mfsd_node_get(d, FUSE_ROOT_ID, &root);
	if (ret) {
		mfsd_log(LOG_ERR, "%s: root directory: %s", device, strerror(-ret));
		goto unmount;
	}
	if (d->fs->read_only && !o.read_only) {
		mfsd_log(LOG_WARNING, "%s: mounted read-only (features this version cannot write)",
		         device);
		d->read_only = true;
	}

	/* the mount source: DEVICE, its commas and backslashes escaped for libfuse's -o */
	if (mfsd_opt_escape(device, fsname, sizeof(fsname))) {
		mfsd_log(LOG_ERR, "%s: path too long", device);
		goto unmount;
	}
	if ((size_t)snprintf(fuse_opts, sizeof(fuse_opts),
	                     "default_permissions,subtype=mendfs,fsname=%s%s%s%s", fsname,
	                     o.allow_other ? ",allow_other" : "", d->read_only ? ",ro" : "",
	                     o.kernel_opts) >= sizeof(fuse_opts)) {
		mfsd_log(LOG_ERR, "%s: mount options too long", device);
		goto unmount;
	}
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, fuse_opts) || (o.debug && fuse_opt_add_arg(&args, "-d"))) {
		mfsd_log(LOG_ERR, "out of memory");
		goto unmount;
	}
	d->se = fuse_session_new(&args, &mfsd_ops, sizeof(mfsd_ops), d);
	if (!d->se) {
		mfsd_log(LOG_ERR, "cannot create the FUSE session");
		goto unmount;
	}
	if (fuse_set_signal_handlers(d->se)) {
		mfsd_log(LOG_ERR, "cannot install signal handlers");
		goto destroy;
	}
	if (fuse_session_mount(d->se, mnt)) {
		mfsd_log(LOG_ERR, "cannot mount %s on %s", device, mnt);
		goto handlers;
	}
	if ((ret = mfsd_atime_show(mnt, o.atime)))
		mfsd_log(LOG_WARNING, "%s: strictatime/nodiratime not shown in the mount flags: %s",
		         mnt, strerror(-ret));
	t.se = d->se;
	t.ops = o.io_uring ? &mfsd_transport_uring : &mfsd_transport_dev;
	t.tstats = &d->tstats;
	d->tstats.t = &t;
	t.threads = o.threads;
	t.killpriv_v2 = !d->read_only;
	/* -o debug: every request through libfuse, which prints it */
	t.fast = o.debug ? NULL : mfsd_fast_request;
	t.fast_arg = d;
	if (t.ops->start(&t)) {
		mfsd_log(LOG_ERR, "cannot set up the FUSE session's I/O");
		goto session_unmount;
	}

	/* before the caller is told the mount is live: an umount(8) right after must find it */
	if (mfsd_utab_register(device, mnt, err, sizeof(err)))
		mfsd_log(LOG_WARNING,
		         "%s: not recorded in utab for umount(8), which will not wait "
		         "for this daemon: %s",
		         mnt, err);
	if (!o.foreground) {
		mfsd_detach(status_fd);
		status_fd = -1;
	}
	live = true;
	mfsd_log(LOG_INFO, "%s mounted on %s%s", device, mnt, d->read_only ? " (read-only)" : "");
	mfsd_commit_start(&d->commit, d->fs, d->read_only ? 0 : o.commit);
	mfsd_evlog_start(&d->evlog, d->fs);

	exit_code = t.ops->loop(&t) < 0 ? 1 : 0;
	t.ops->stop(&t);

session_unmount:
	fuse_session_unmount(d->se);
	/* the mount is gone: drop its utab record if the unmount did not (fusermount3 -u) */
	if (live && (ret = mfsd_utab_unregister(device, mnt)))
		mfsd_log(LOG_WARNING, "%s: cannot drop its utab record: %s", mnt, strerror(-ret));
handlers:
	fuse_remove_signal_handlers(d->se);
destroy:
	fuse_session_destroy(d->se);
unmount:
	mfsd_evlog_stop(&d->evlog);
	mfsd_commit_stop(&d->commit);
	dropped = mfsd_drop_all(d);
	if (o.debug)
		mfsd_log(LOG_DEBUG, "%lu nodes and open handles left at unmount", dropped);
	ret = mfs_unmount(d->fs);
	if (ret) {
		mfsd_log(LOG_ERR, "%s: unmount: %s", device, strerror(-ret));
		exit_code = 1;
	} else if (live) {
		mfsd_log(LOG_INFO, "%s unmounted cleanly", device);
	}
out:
	fuse_opt_free_args(&args);
	if (d) {
		mfsd_nodes_destroy(&d->nodes);
		free(d);
	}
	mfsd_opts_free(&o);
	free(dev_abs);
	free(bb_abs);
	free(latent_abs);
	return exit_code;
}
