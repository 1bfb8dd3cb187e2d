/* SPDX-License-Identifier: MIT */
/*
 * The command line and the -o mount options (options.c, mendfs(8)).
 * Called by main; calls the daemon's log only.
 */
#ifndef MENDFS_OPTIONS_H
#define MENDFS_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "mendfs/blk.h"

struct mfsd_opts {
	const char *device, *mountpoint; /* as given */
	bool foreground, debug, read_only, allow_other, poison_inject, writeback;
	bool io_uring;  /* -o io_uring: FUSE over io_uring when the kernel offers it */
	unsigned atime; /* MFS_ATIME_* */
	bool fault_inject, fault_dying; /* -o fault_inject=N[+] (a test knob) */
	uint64_t fault_nth;
	enum blk_backend_type backend;
	const char *badblocks;
	const char *latent; /* latent=PATH: latent poison emulation */
	unsigned threads;
	double timeout;
	unsigned commit;
	char kernel_opts[1024]; /* generic mount flags passed on to libfuse */
	char *optlist;          /* every -o, joined (the strings above point into it) */
};

/*
 * `mendfs [-f] [-o OPTS] DEVICE MOUNTPOINT` into @o.  Returns 0 to mount,
 * 1 if done (-h, -V: exit 0), or -1 after a message (exit 1).  Free with
 * mfsd_opts_free whatever it returns.
 */
int mfsd_parse_args(int argc, char **argv, struct mfsd_opts *o);

void mfsd_opts_free(struct mfsd_opts *o);

#endif
