/* SPDX-License-Identifier: MIT */
/*
 * Bio helpers: initialisation and copies between a bio's segments and linear
 * memory (backends' bounce paths, the poison slow path).  Calls nothing.
 */
#include <string.h>

#include "blk_internal.h"

void blk_bio_init(struct blk_bio *bio, enum blk_op op, uint64_t sector, void *buf, uint32_t len,
                  blk_end_io_fn *end_io, void *private)
{
	__blk_bio_init(bio, op, sector, buf, len, end_io, private);
}

/* Walk @bio's segments from byte @skip, calling @fn on each piece. */
#define BLK_BIO_WALK(bio, skip, len, seg_base, seg_len, body)                                      \
	do {                                                                                       \
		size_t __skip = (skip), __left = (len);                                            \
		for (unsigned __i = 0; __i < (bio)->nr_segs && __left; __i++) {                    \
			size_t __l = (bio)->iov[__i].iov_len;                                      \
			if (__skip >= __l) {                                                       \
				__skip -= __l;                                                     \
				continue;                                                          \
			}                                                                          \
			char *seg_base = (char *)(bio)->iov[__i].iov_base + __skip;                \
			size_t seg_len = __l - __skip < __left ? __l - __skip : __left;            \
			__skip = 0;                                                                \
			body;                                                                      \
			__left -= seg_len;                                                         \
		}                                                                                  \
	} while (0)

void blk_bio_copy_to(struct blk_bio *bio, size_t skip, const void *src, size_t len)
{
	const char *s = src;

	BLK_BIO_WALK(bio, skip, len, base, l, {
		memcpy(base, s, l);
		s += l;
	});
}

void blk_bio_copy_from(const struct blk_bio *bio, size_t skip, void *dst, size_t len)
{
	char *d = dst;

	BLK_BIO_WALK(bio, skip, len, base, l, {
		memcpy(d, base, l);
		d += l;
	});
}

void blk_bio_zero(struct blk_bio *bio, size_t skip, size_t len)
{
	BLK_BIO_WALK(bio, skip, len, base, l, memset(base, 0, l));
}
