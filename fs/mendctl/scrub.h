/* SPDX-License-Identifier: MIT */
/*
 * mendctl scrub (scrub.c): check a mounted filesystem online through
 * MENDFS_IOC_SCRUB, then report the damaged files as fsck.mendfs does.
 */
#ifndef MENDFS_MENDCTL_SCRUB_H
#define MENDFS_MENDCTL_SCRUB_H

#include <stdbool.h>

/*
 * `mendctl scrub MOUNTPOINT [--json] [--rate MB/s] [--resume]`: @argv as
 * main's, "scrub" among them (@json: --json was given).  Returns the exit
 * code: 0 clean, 1 error, 2 usage, 4 damage found, 32 interrupted.
 */
int mendctl_scrub_main(int argc, char **argv, bool json);

#endif
