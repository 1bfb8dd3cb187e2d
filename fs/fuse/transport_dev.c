/* SPDX-License-Identifier: MIT */
/*
 * The /dev/fuse transport (transport.h): libfuse's multithreaded session
 * loop, reading and writing the session's /dev/fuse descriptor through the
 * hooks of killpriv.c (custom I/O), one descriptor shared by every worker
 * (no clone_fd).  Calls libfuse, killpriv.c and the daemon's log.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <syslog.h>

#include "daemon.h"
#include "killpriv.h"
#include "transport.h"

static const struct fuse_custom_io dev_io = {
        .read = mfsd_killpriv_read,
        .writev = mfsd_killpriv_writev,
};

static int dev_start(struct mfsd_transport *t)
{
	if (t->tstats)
		atomic_store(&t->tstats->kind, MFSD_TRANSPORT_DEV_FUSE);
	mfsd_killpriv_want(t->killpriv_v2);
	return fuse_session_custom_io(t->se, &dev_io, fuse_session_fd(t->se));
}

int mfsd_dev_loop(struct mfsd_transport *t)
{
	struct fuse_loop_config *lcfg;
	int ret;

	lcfg = fuse_loop_cfg_create();
	if (!lcfg) {
		mfsd_log(LOG_ERR, "out of memory");
		return -ENOMEM;
	}
	if (t->threads)
		fuse_loop_cfg_set_max_threads(lcfg, t->threads);
	fuse_loop_cfg_set_clone_fd(lcfg, 0);
	ret = fuse_session_loop_mt(t->se, lcfg);
	fuse_loop_cfg_destroy(lcfg);
	if (ret < 0) {
		mfsd_log(LOG_ERR, "session loop: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

static void dev_stop(struct mfsd_transport *t)
{
	(void)t; /* the session owns the hooks and the descriptor */
}

const struct mfsd_transport_ops mfsd_transport_dev = {
        .name = "dev",
        .start = dev_start,
        .loop = mfsd_dev_loop,
        .stop = dev_stop,
};
