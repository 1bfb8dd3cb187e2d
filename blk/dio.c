/* SPDX-License-Identifier: MIT */
/*
 * dio.c: O_DIRECT memory alignment and the bounce-buffer copies (see dio.h).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dio.h"

static unsigned blk_dio_page_size(void)
{
	static unsigned page;
	unsigned p = __atomic_load_n(&page, __ATOMIC_RELAXED);

	if (!p) {
		long s = sysconf(_SC_PAGESIZE);

		p = s > 0 && !(s & (s - 1)) ? (unsigned)s : 4096;
		__atomic_store_n(&page, p, __ATOMIC_RELAXED);
	}
	return p;
}

unsigned blk_dio_mem_align(unsigned reported, unsigned lbs)
{
	unsigned a = blk_dio_page_size();

	if (lbs > a)
		a = lbs;
	/* a reported alignment that is not a power of two is ignored: it is nonsense */
	if (reported > a && !(reported & (reported - 1)))
		a = reported;
	return a;
}

void *blk_dio_alloc(unsigned mem_align, size_t len)
{
	unsigned a = blk_dio_mem_align(mem_align, 0);
	void *p;

	if (posix_memalign(&p, a, len ? len : 1))
		return NULL;
	return p;
}

size_t blk_dio_copy_to_iov(const struct iovec *iov, unsigned nr, size_t skip, const void *src,
                           size_t len)
{
	const char *s = src;
	size_t done = 0;
	unsigned i;

	for (i = 0; i < nr && done < len; i++) {
		size_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len - done)
			l = len - done;
		memcpy((char *)iov[i].iov_base + skip, s + done, l);
		done += l;
		skip = 0;
	}
	return done;
}

size_t blk_dio_copy_from_iov(const struct iovec *iov, unsigned nr, void *dst, size_t len)
{
	char *d = dst;
	size_t done = 0;
	unsigned i;

	for (i = 0; i < nr && done < len; i++) {
		size_t l = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;

		memcpy(d + done, iov[i].iov_base, l);
		done += l;
	}
	return done;
}
