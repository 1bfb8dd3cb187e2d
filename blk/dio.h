/* SPDX-License-Identifier: MIT */
/*
 * dio.h: what memory and ranges O_DIRECT may be given, and the bounce-buffer
 * copies for memory that does not qualify (used by the uring backend).
 *
 * The rule: every buffer handed to the kernel under O_DIRECT starts at a
 * multiple of max(logical block size, page size, the alignment the kernel
 * reports) and every segment's length is a multiple of the logical block
 * size.  The alignment the kernel reports (STATX_DIOALIGN, the queue's
 * dma_alignment) is not enough: zram advertises 512 bytes but reads whole
 * pages into the pages of a buffer that is not page aligned, writing before
 * and past it.  Memory that breaks the rule goes through an aligned bounce
 * buffer; memory that keeps it is used as it is (the fast path).
 */
#ifndef MENDFS_BLK_DIO_H
#define MENDFS_BLK_DIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * The largest logical block size a block device may have.  mendfs reads and
 * writes 4 KiB blocks, and counts on a block write not touching its
 * neighbours: a device with larger logical blocks would read-modify-write
 * them (or refuse the I/O), so it is refused at open.
 */
#define BLK_DIO_MAX_LBS 4096u

/* The memory alignment for O_DIRECT: max(@reported, @lbs, page size); a power of two. */
unsigned blk_dio_mem_align(unsigned reported, unsigned lbs);

/* @len bytes aligned to @mem_align (at least a page), or NULL. */
void *blk_dio_alloc(unsigned mem_align, size_t len);

/* May O_DIRECT take @buf for @len bytes as it is? */
static inline bool blk_dio_buf_ok(const void *buf, size_t len, unsigned mem_align, unsigned lbs)
{
	return !(((uintptr_t)buf & (mem_align - 1)) | (len & (lbs - 1)));
}

/* ... and every segment of @iov?  (The position is the caller's: the core aligns it.) */
static inline bool blk_dio_iov_ok(const struct iovec *iov, unsigned nr, unsigned mem_align,
                                  unsigned lbs)
{
	uintptr_t bits = 0;
	unsigned i;

	for (i = 0; i < nr; i++)
		bits |= ((uintptr_t)iov[i].iov_base & (mem_align - 1)) |
		        (iov[i].iov_len & (lbs - 1));
	return !bits;
}

/*
 * Copy @len bytes of @src into the memory @iov describes, from its byte @skip
 * on; stops at the end of @iov, whatever @len says (never past the caller's
 * memory).  Returns the bytes copied.
 */
size_t blk_dio_copy_to_iov(const struct iovec *iov, unsigned nr, size_t skip, const void *src,
                           size_t len);
/* Copy the first @len bytes of the memory @iov describes (at most all of it) to @dst. */
size_t blk_dio_copy_from_iov(const struct iovec *iov, unsigned nr, void *dst, size_t len);

#endif
