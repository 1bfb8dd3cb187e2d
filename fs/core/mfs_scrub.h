/* SPDX-License-Identifier: MIT */
/*
 * Online scrub of a mounted filesystem (scrub.c; docs/design/core.md §3.13a, "Scrub"):
 * bounded steps over the meta zone, then the data zone, each continuing
 * from a cursor the caller keeps.  A step verifies both copies of each
 * in-use metadata block and rewrites a bad copy from the good one
 * (mfs_meta_scrub_block), or reads allocated data blocks through the block
 * engine, which turns latent poison into recorded poison as any read does.
 * It holds no lock across blocks: a metadata block's content lock for its
 * two reads, a bitmap block's for a copy of its bits.
 */
#ifndef MENDFS_FS_MFS_SCRUB_H
#define MENDFS_FS_MFS_SCRUB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "mfs.h"

enum mfs_scrub_phase {
	MFS_SCRUB_PHASE_META = 0, /* pos: block of the meta zone, from meta_start */
	MFS_SCRUB_PHASE_DATA = 1, /* pos: block of the data zone, from data_start */
	MFS_SCRUB_PHASE_DONE = 2,
};

struct mfs_scrub_cursor {
	uint32_t phase; /* enum mfs_scrub_phase */
	uint64_t pos;
};

/* What one step did (added to, not reset). */
struct mfs_scrub_counts {
	uint64_t meta_checked, meta_healed, meta_bad, meta_lost, meta_skipped;
	uint64_t data_bytes;   /* read */
	uint64_t poison_found; /* sectors that became poison during the reads */
	uint64_t csum_found;   /* data_csum: file sectors failing their checksum */
	int refresh_err;       /* the start's blk_dev_refresh_badblocks failed: -errno */
};

/* Default and largest budgets of a step. */
#define MFS_SCRUB_META_DEFAULT 256u
#define MFS_SCRUB_DATA_DEFAULT (4u << 20)

/*
 * One step from @cur: check up to @meta_blocks metadata blocks or read up to
 * @data_bytes of data (whichever phase the cursor is in; a step ends where
 * its phase ends), then advance @cur.  A step from the very start (metadata
 * phase, pos 0) first asks the device's badblocks sources again
 * (blk_dev_refresh_badblocks: devdax poison found by the kernel since the
 * mount, new lines of the emulation file); what they add counts in
 * poison_found, a failure in refresh_err (the step goes on), and checks the
 * superblock copies and the live journal (mfs_scrub_fixed).  Returns 0,
 * -EINVAL for a cursor outside the filesystem, or -ENOMEM.
 */
int mfs_scrub_step(struct mfs *fs, struct mfs_scrub_cursor *cur, uint64_t meta_blocks,
                   uint64_t data_bytes, struct mfs_scrub_counts *c);

/*
 * The superblock's two copies and the live journal's blocks (scrub_fixed.c),
 * counted with the metadata blocks in @c; the first step does it.  Returns 0
 * or -ENOMEM.
 */
int mfs_scrub_fixed(struct mfs *fs, struct mfs_scrub_counts *c);

/*
 * One scrub at a time (the daemon's MENDFS_IOC_SCRUB): the cursor belongs to
 * the process whose step was answered last, from its first step until it
 * reaches the end.  Another process's step while that one lives and
 * stepped within MFS_SCRUB_OWNER_IDLE_S is refused (-EBUSY), so that two
 * scrubs never move one cursor and each report half a scrub; an owner that
 * exited or went idle gives the cursor up.  The caller serialises the calls
 * on one struct mfs_scrub_owner (the daemon: a mutex).
 */
struct mfs_scrub_owner {
	pid_t pid; /* the scrubbing process (thread group): 0 none, -1 unknown */
	time_t at; /* CLOCK_MONOTONIC seconds of its last step */
};

#define MFS_SCRUB_OWNER_IDLE_S 600 /* an owner silent longer than this has given up */

/*
 * Process @pid (-1: outside the caller's pid namespace, unknown) asks to
 * step at @now: -EBUSY if another owner holds the cursor: it stepped within
 * MFS_SCRUB_OWNER_IDLE_S and @alive(its pid) says it lives (an unknown
 * owner, -1, counts as alive until idle; @alive is never asked about it).
 * Else 0: @pid owns the cursor from now on, *@prev is the owner before it
 * (for mfs_scrub_owner_undo).  A process asking again is its own owner.
 */
int mfs_scrub_owner_claim(struct mfs_scrub_owner *o, pid_t pid, time_t now, bool (*alive)(pid_t),
                          struct mfs_scrub_owner *prev);
/* @pid's step failed: it claims nothing, the owner before it (@prev) is back. */
void mfs_scrub_owner_undo(struct mfs_scrub_owner *o, pid_t pid, const struct mfs_scrub_owner *prev);
/* @pid's step was answered at @now; @done: it reached the end, the next scrub may start. */
void mfs_scrub_owner_stepped(struct mfs_scrub_owner *o, pid_t pid, bool done, time_t now);

#endif
