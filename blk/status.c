/* SPDX-License-Identifier: MIT */
/*
 * Status codes and error strings: the table that maps a blk_status to an
 * errno and a name, the reverse mapping backends use, and blk_err() for the
 * "what went wrong" messages of open and load paths.  Calls nothing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "blk_internal.h"

void blk_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const struct {
	int err;
	const char *name;
} blk_status_table[BLK_STS_MAX] = {
        [BLK_STS_OK] = {0, "ok"},
        [BLK_STS_MEDIA] = {EIO, "media error"},
        [BLK_STS_IOERR] = {EIO, "I/O error"},
        [BLK_STS_NOSPC] = {ENOSPC, "no space"},
        [BLK_STS_INVAL] = {EINVAL, "invalid request"},
        [BLK_STS_NOTSUPP] = {EOPNOTSUPP, "not supported"},
        [BLK_STS_ROFS] = {EROFS, "read-only device"},
};

int blk_status_to_errno(enum blk_status sts)
{
	if ((unsigned)sts >= BLK_STS_MAX)
		return EIO;
	return blk_status_table[sts].err;
}

const char *blk_status_name(enum blk_status sts)
{
	if ((unsigned)sts >= BLK_STS_MAX)
		return "unknown";
	return blk_status_table[sts].name;
}

int blk_errno_to_status(int err)
{
	switch (err) {
	case 0:
		return BLK_STS_OK;
	case ENOSPC:
	case EDQUOT:
		return BLK_STS_NOSPC;
	case EINVAL:
		return BLK_STS_INVAL;
	case EOPNOTSUPP:
		return BLK_STS_NOTSUPP;
	case EROFS:
		return BLK_STS_ROFS;
	default:
		return BLK_STS_IOERR;
	}
}
