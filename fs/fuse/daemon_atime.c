/* SPDX-License-Identifier: MIT */
/*
 * The atime mount options and their mount flags (see daemon_atime.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon_atime.h"

bool mfsd_atime_opt(const char *opt, unsigned *flags)
{
	const unsigned mode = MFS_ATIME_STRICT | MFS_ATIME_NONE;

	if (!strcmp(opt, "atime") || !strcmp(opt, "relatime"))
		*flags &= ~mode; /* "atime": not noatime; Linux's default is relatime */
	else if (!strcmp(opt, "strictatime"))
		*flags = (*flags & ~mode) | MFS_ATIME_STRICT;
	else if (!strcmp(opt, "noatime"))
		*flags = (*flags & ~mode) | MFS_ATIME_NONE;
	else if (!strcmp(opt, "nodiratime"))
		*flags |= MFS_ATIME_NODIRATIME;
	else if (!strcmp(opt, "diratime"))
		*flags &= ~MFS_ATIME_NODIRATIME;
	else
		return false;
	return true;
}

int mfsd_atime_show(const char *mnt, unsigned flags)
{
	struct mount_attr attr = {0};

	if (flags & MFS_ATIME_STRICT) {
		attr.attr_clr = MOUNT_ATTR__ATIME; /* required to change the atime mode */
		attr.attr_set = MOUNT_ATTR_STRICTATIME;
	}
	if ((flags & MFS_ATIME_NODIRATIME) && !(flags & MFS_ATIME_NONE))
		attr.attr_set |= MOUNT_ATTR_NODIRATIME;
	if (!attr.attr_set && !attr.attr_clr)
		return 0;
	if (syscall(SYS_mount_setattr, AT_FDCWD, mnt, 0, &attr, sizeof(attr)))
		return -errno;
	return 0;
}
