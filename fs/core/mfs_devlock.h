/* SPDX-License-Identifier: MIT */
/*
 * The device lock, seen from outside the daemon that holds it (devlock.c).
 *
 * A mendfs daemon holds an exclusive flock on DEVICE from mount until it has
 * written the filesystem out and closed the device (blk_dev_open's
 * BLK_CFG_EXCL); mkfs.mendfs and fsck.mendfs take the same lock.  After an
 * unmount the kernel lets the daemon finish on its own, so for a moment the
 * lock is held while DEVICE is no longer mounted.  These calls tell the two
 * cases apart and wait, bounded, for the second: mkfs.mendfs, fsck.mendfs,
 * the daemon and umount.fuse.mendfs use them.
 */
#ifndef MENDFS_FS_MFS_DEVLOCK_H
#define MENDFS_FS_MFS_DEVLOCK_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Seconds mkfs.mendfs, fsck.mendfs and the daemon wait for an exiting daemon. */
#define MFS_DEV_EXIT_WAIT 10u

/*
 * The process holding an exclusive flock on @device, from /proc/locks.
 * Returns its pid, 0 if no such lock is listed (none, or its holder is in a
 * pid namespace this process cannot see), or -errno (@device cannot be
 * stat'ed, no /proc/locks).
 */
pid_t mfs_dev_lock_holder(const char *device);

/*
 * Probe the lock: open @device read-only, try a shared flock without
 * blocking, close.  Returns 0 if no exclusive lock is held, -EBUSY if one is,
 * or -errno from open.
 */
int mfs_dev_lock_probe(const char *device);

/*
 * Is @device the source of a mendfs mount (fuse.mendfs, fuseblk.mendfs)?  The
 * mount table of this process is read, and that of @holder (if > 0) when it
 * lives in another mount namespace.  A source names @device if it is the same
 * string or the same file.  Returns 1 or 0.
 */
int mfs_dev_mounted(const char *device, pid_t holder);

/*
 * Wait for a daemon that is exiting.  Call it when @device's lock was found
 * held: if @device is not mounted, say once on stderr "PROG: waiting for the
 * mendfs daemon that still holds DEVICE to exit" and wait up to @seconds for
 * the lock to go.  Returns 0 once the lock is free (or @device cannot be
 * opened: the caller's own open says why), -EBUSY at once if @device is
 * mounted, or if it is mounted again or still locked when the time is up.
 */
int mfs_dev_wait_exiting(const char *device, unsigned seconds, const char *prog);

/*
 * The next entry of a mountinfo file (proc(5)): mount point and source
 * unescaped (\040 and the like), the filesystem type and the device number
 * (major:minor).  Returns true while there is one.  For umount.fuse.mendfs.
 */
struct mfs_mountinfo {
	char *line; /* getline buffer */
	size_t cap;
	const char *target, *fstype, *source;
	unsigned major, minor;
};
bool mfs_mountinfo_next(FILE *f, struct mfs_mountinfo *mi);
/* Free what mfs_mountinfo_next kept, for a caller that stops before the end. */
void mfs_mountinfo_free(struct mfs_mountinfo *mi);
/* Is it a mendfs mount (type fuse.mendfs or fuseblk.mendfs)? */
bool mfs_mountinfo_is_mendfs(const struct mfs_mountinfo *mi);

#endif /* MENDFS_FS_MFS_DEVLOCK_H */
