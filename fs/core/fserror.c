/* SPDX-License-Identifier: MIT */
/*
 * What an I/O error does to a mounted filesystem (docs/design/core.md §3, "I/O errors", the
 * ERROR BEHAVIOUR of mendfs(8)), like ext4's errors=remount-ro:
 *
 *  - a failed metadata write or flush (journal commit, checkpoint,
 *    superblock), and a metadata read that fails (both copies) inside an
 *    open transaction handle, whose operation may already have changed
 *    other blocks in memory, turn the filesystem read-only: the journal is
 *    aborted, nothing more is written (not even at unmount), the call that
 *    met the error gets -EIO, later modifying calls -EROFS, fsync and sync
 *    -EIO (what they were to make durable no longer can be), reads go on;
 *    the device keeps the last committed transaction, which replay applies
 *    at the next mount;
 *  - a failed data read or write, and a metadata read outside a handle,
 *    fail only their call with -EIO: the filesystem stays writable.
 *
 * fs->error is set once, before fs->read_only, so that a reader that sees
 * read_only also sees why.  This is the lowest layer of the core: it calls
 * nothing of mendfs.  The journal checks fs->error itself (no handle begins,
 * no transaction commits after it is set), and the buffer cache reads
 * mfs_txn_depth, kept here, to tell whether an operation may be half done.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mfs.h"

__thread unsigned mfs_txn_depth;

void mfs_fs_error(struct mfs *fs, int err, const char *what)
{
	int none = 0;

	if (!atomic_compare_exchange_strong(&fs->error, &none, -EIO))
		return;
	__atomic_store_n(&fs->read_only, true, __ATOMIC_RELEASE);
	fprintf(stderr,
	        "mendfs: %s: %s: %s: the filesystem is read-only until unmounted (the device "
	        "keeps the last committed transaction)\n",
	        fs->device ? fs->device : "device", what, strerror(err < 0 ? -err : err));
}
