/* SPDX-License-Identifier: MIT */
/*
 * File handles (name_to_handle_at, open_by_handle_at, NFS export).  A FUSE
 * handle is the node id and the low 32 bits of the inode's generation; node
 * ids are inode numbers, so a handle stays valid across forgets and remounts.
 * To resolve one the kernel does not hold, it sends LOOKUP of "." on the
 * handle's node id, and to reconnect a directory, LOOKUP of ".." on it; no
 * path walk sends either (the VFS resolves them itself).  The kernel compares
 * the generation; the daemon must never answer with another inode than the
 * one the number names, nor with one that is deleted.  Called by the LOOKUP
 * handler; calls the core only (fhandle.c).
 */
#ifndef MENDFS_FHANDLE_H
#define MENDFS_FHANDLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct mfs;

/* Is @name "." or "..", i.e. a LOOKUP that only file handles send? */
static inline bool mfsd_export_dots(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/*
 * The inode that "." (@ino itself, of any type) or ".." (the parent of
 * directory @ino) names, for a file handle.  Returns 0 with *st filled,
 * -ESTALE if the inode is free, deleted (nlink 0) or out of range,
 * -ENOTDIR for ".." of a non-directory, or another -errno (-EUCLEAN).
 * Never -ENOENT, which the daemon would cache as a negative entry.
 */
int mfsd_export_lookup(struct mfs *fs, uint64_t ino, const char *name, struct stat *st);

#endif
