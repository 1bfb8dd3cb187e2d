// SPDX-License-Identifier: MIT
/*
 * Small helpers every layer of the core uses: the error message formatter of
 * the functions that take (err, errlen).  It calls nothing of mendfs.
 */
#include <stdarg.h>
#include <stdio.h>

#include "mfs.h"

void mfs_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
