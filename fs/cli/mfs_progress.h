/* SPDX-License-Identifier: MIT */
/*
 * mfs_progress: the human progress bar of fsck.mendfs -C 0 and mkfs.mendfs,
 * drawn as e2fsck draws it, on one terminal line rewritten with '\r':
 *
 *   /dev/pmem0: |==========================                    | 56.3%
 *
 * Drawn only when the descriptor is a terminal: into a file or a pipe nothing
 * is written at all (the machine format of fsck -C FD is fsck's own).
 */
#ifndef MENDFS_FS_MFS_PROGRESS_H
#define MENDFS_FS_MFS_PROGRESS_H

#include <stdbool.h>

struct mfs_progress {
	int fd; /* -1: draw nothing (not a terminal) */
	const char *label;
	int shown;  /* the tenth of a percent on screen, -1: none */
	bool drawn; /* a bar is on the current line */
};

/* Starts a bar labelled @label on @fd, or nothing if @fd is not a terminal. */
void mfs_progress_init(struct mfs_progress *p, int fd, const char *label);
/* Shows @done of @total (0 <= done <= total); redraws only when the tenth of a percent changes. */
void mfs_progress_update(struct mfs_progress *p, unsigned long long done, unsigned long long total);
/* Erases the bar, so that a message can be printed on a clean line; the next update redraws. */
void mfs_progress_clear(struct mfs_progress *p);

#endif
