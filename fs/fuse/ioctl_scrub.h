/* SPDX-License-Identifier: MIT */
/*
 * MENDFS_IOC_SCRUB (ioctl_scrub.c): one step of the core's online scrub
 * (mfs_scrub.h) for ops_ioctl.c's table, with the cursor --resume continues
 * from kept in the daemon.
 */
#ifndef MENDFS_FUSE_IOCTL_SCRUB_H
#define MENDFS_FUSE_IOCTL_SCRUB_H

#include "daemon.h"

/* @arg is a struct mendfs_ioc_scrub, checked and answered in place.  Returns 0 or -errno. */
int mfsd_ioc_scrub(struct mfsd *d, fuse_req_t req, void *arg);

#endif
