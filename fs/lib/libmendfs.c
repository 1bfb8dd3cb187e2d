/* SPDX-License-Identifier: MIT */
/*
 * libmendfs: the client side of the mendfs recovery ioctls
 * (include/mendfs/recovery.h over include/mendfs/ioctl.h).  Recovery reads
 * move at most MENDFS_RR_CHUNK bytes per ioctl (FUSE restricted ioctls carry
 * fixed-size structs), so the library loops and scatters into the caller's
 * iovecs.  A file that is not on mendfs answers the ioctls with ENOTTY (or
 * EINVAL/ENOSYS on some filesystems): that becomes EOPNOTSUPP.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mendfs/ioctl.h"
#include "mendfs/recovery.h"

/*
 * The largest unit of poison: the 4 KiB logical block of a 4Kn device (512
 * bytes on pmem).  A write in whole units clears poison as a plain write; one
 * with ends inside a unit must go through the recovery write, which zeroes
 * the lost bytes around it (a plain write there fails with EIO).
 */
#define UNIT_MAX 4096u

/* errno of a first ioctl that means "not a mendfs file" */
static bool not_mendfs(int err)
{
	return err == ENOTTY || err == EINVAL || err == ENOSYS || err == EOPNOTSUPP;
}

/* True when @fd is on mendfs (a STATS ioctl answers); else false with errno EOPNOTSUPP. */
static bool is_mendfs(int fd)
{
	struct mendfs_ioc_stats probe;

	memset(&probe, 0, sizeof(probe));
	probe.version = MENDFS_IOC_VERSION;
	if (ioctl(fd, MENDFS_IOC_STATS, &probe) == 0)
		return true;
	if (not_mendfs(errno))
		errno = EOPNOTSUPP;
	return false;
}

static int iov_total(const struct iovec *iov, int iovcnt, size_t *total)
{
	size_t t = 0;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov)) {
		errno = EINVAL;
		return -1;
	}
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - t) {
			errno = EINVAL;
			return -1;
		}
		t += iov[i].iov_len;
	}
	*total = t;
	return 0;
}

/* Copy @len bytes from @src into the iovecs at byte @pos of their concatenation. */
static void scatter(const struct iovec *iov, int iovcnt, size_t pos, const uint8_t *src, size_t len)
{
	for (int i = 0; i < iovcnt && len; i++) {
		size_t n;

		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		memcpy((uint8_t *)iov[i].iov_base + pos, src, n);
		src += n;
		len -= n;
		pos = 0;
	}
}

/*
 * The recovery read loop: @len bytes at @off into the iovecs (or @buf when
 * @iov is NULL), zero-filled ranges to @zeroed (*nz counts them all).
 */
static ssize_t recovery_read(int fd, const struct iovec *iov, int iovcnt, void *buf, size_t len,
                             off_t off, struct mendfs_range *zeroed, unsigned max, unsigned *nz)
{
	struct mendfs_ioc_recovery_read *a;
	struct mendfs_range last = {0, 0};
	size_t done = 0;
	unsigned count = 0;

	if (off < 0 || (uint64_t)off > (uint64_t)INT64_MAX - len) {
		errno = EINVAL;
		return -1;
	}
	a = malloc(sizeof(*a));
	if (!a)
		return -1;
	while (done < len) {
		size_t want = len - done < MENDFS_RR_CHUNK ? len - done : MENDFS_RR_CHUNK;

		memset(a, 0, offsetof(struct mendfs_ioc_recovery_read, zeroed));
		a->version = MENDFS_IOC_VERSION;
		a->offset = (uint64_t)off + done;
		a->length = want;
		if (ioctl(fd, MENDFS_IOC_RECOVERY_READ, a) < 0) {
			int err = errno;

			free(a);
			errno = done == 0 && not_mendfs(err) ? EOPNOTSUPP : err;
			return -1;
		}
		if (a->bytes > want || a->nr_zeroed > MENDFS_RR_MAX_RANGES || a->truncated) {
			/* a chunk has 24 sectors: at most 12 separate ranges fit in 16 */
			free(a);
			errno = EIO;
			return -1;
		}
		if (iov)
			scatter(iov, iovcnt, done, a->data, a->bytes);
		else
			memcpy((uint8_t *)buf + done, a->data, a->bytes);
		for (unsigned i = 0; i < a->nr_zeroed; i++) {
			struct mendfs_range r = {a->zeroed[i].offset, a->zeroed[i].length};

			if (count && last.offset + last.length == r.offset) {
				last.length += r.length;
			} else {
				if (count && zeroed && count - 1 < max)
					zeroed[count - 1] = last;
				last = r;
				count++;
			}
		}
		done += a->bytes;
		if (a->bytes < want)
			break;
	}
	if (count && zeroed && count - 1 < max)
		zeroed[count - 1] = last;
	if (nz)
		*nz = count;
	free(a);
	return (ssize_t)done;
}

ssize_t mendfs_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
	size_t total;

	if (flags & ~MENDFS_RWF_RECOVERY_DATA) {
		errno = EINVAL;
		return -1;
	}
	if (!flags)
		return preadv(fd, iov, iovcnt, off);
	if (iov_total(iov, iovcnt, &total))
		return -1;
	if (!total) {
		struct mendfs_range r;
		unsigned n;
		char b;

		/* probe, so a zero-length read on a non-mendfs file also reports EOPNOTSUPP */
		return recovery_read(fd, NULL, 0, &b, 1, off, &r, 1, &n) < 0 ? -1 : 0;
	}
	return recovery_read(fd, iov, iovcnt, NULL, total, off, NULL, 0, NULL);
}

ssize_t mendfs_recover(int fd, void *buf, size_t len, off_t off, struct mendfs_range *zeroed,
                       unsigned max, unsigned *n)
{
	if (len > SSIZE_MAX || (len && !buf)) {
		errno = EINVAL;
		return -1;
	}
	return recovery_read(fd, NULL, 0, buf, len, off, zeroed, max, n);
}

/* Gather @len bytes at byte @pos of the iovecs' concatenation into @dst. */
static void gather(uint8_t *dst, const struct iovec *iov, int iovcnt, size_t pos, size_t len)
{
	for (int i = 0; i < iovcnt && len; i++) {
		size_t n;

		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		memcpy(dst, (const uint8_t *)iov[i].iov_base + pos, n);
		dst += n;
		len -= n;
		pos = 0;
	}
}

/*
 * The recovery write loop: MENDFS_IOC_RECOVERY_WRITE over chunks whose inner
 * boundaries are on UNIT_MAX boundaries, so only the write's own ends can
 * cover a unit of poison in part.
 */
static ssize_t recovery_write(int fd, const struct iovec *iov, int iovcnt, size_t total,
                              uint64_t start)
{
	struct mendfs_ioc_recovery_write *a = malloc(sizeof(*a));
	size_t done = 0;

	if (!a)
		return -1;
	while (done < total) {
		uint64_t pos = start + done, cend = pos + MENDFS_RW_CHUNK;
		size_t want;

		if (cend >= start + total)
			cend = start + total;
		else if (cend / UNIT_MAX * UNIT_MAX > pos)
			cend = cend / UNIT_MAX * UNIT_MAX;
		want = (size_t)(cend - pos);
		memset(a, 0, offsetof(struct mendfs_ioc_recovery_write, data));
		a->version = MENDFS_IOC_VERSION;
		a->offset = pos;
		a->length = want;
		gather(a->data, iov, iovcnt, done, want);
		if (ioctl(fd, MENDFS_IOC_RECOVERY_WRITE, a) < 0) {
			int err = errno;

			free(a);
			if (done)
				return (ssize_t)done;
			errno = err; /* is_mendfs() answered: a real error */
			return -1;
		}
		if (a->written > want) {
			free(a);
			errno = EIO;
			return -1;
		}
		done += a->written;
		if (a->written < want)
			break;
	}
	free(a);
	return (ssize_t)done;
}

ssize_t mendfs_pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
	size_t total;

	if (flags & ~MENDFS_RWF_RECOVERY_DATA) {
		errno = EINVAL;
		return -1;
	}
	if (!flags)
		return pwritev(fd, iov, iovcnt, off);
	if (iov_total(iov, iovcnt, &total))
		return -1;
	if (off < 0 || (uint64_t)off > (uint64_t)INT64_MAX - total) {
		errno = EINVAL;
		return -1;
	}
	if (!is_mendfs(fd))
		return -1;
	if (!total)
		return 0;
	if ((uint64_t)off % UNIT_MAX == 0 && total % UNIT_MAX == 0)
		return pwritev(fd, iov, iovcnt, off); /* whole units clear poison */
	return recovery_write(fd, iov, iovcnt, total, (uint64_t)off);
}

int mendfs_badranges(int fd, off_t start, struct mendfs_range *out, unsigned max, unsigned *n)
{
	struct mendfs_ioc_badranges *a;
	uint64_t from;
	unsigned cnt = 0;
	bool first = true;

	if (start < 0 || !n || (max && !out)) {
		errno = EINVAL;
		return -1;
	}
	a = malloc(sizeof(*a));
	if (!a)
		return -1;
	from = (uint64_t)start;
	while (cnt < max) {
		memset(a, 0, offsetof(struct mendfs_ioc_badranges, ranges));
		a->version = MENDFS_IOC_VERSION;
		a->start = from;
		if (ioctl(fd, MENDFS_IOC_BADRANGES, a) < 0) {
			int err = errno;

			free(a);
			errno = first && not_mendfs(err) ? EOPNOTSUPP : err;
			return -1;
		}
		first = false;
		for (unsigned i = 0; i < a->nr && i < MENDFS_BADRANGES_MAX; i++) {
			if (cnt == max) {
				a->last = 0;
				break;
			}
			out[cnt].offset = a->ranges[i].offset;
			out[cnt].length = a->ranges[i].length;
			cnt++;
		}
		if (a->last || a->next <= from)
			break;
		from = a->next;
	}
	free(a);
	*n = cnt;
	return 0;
}

int mendfs_zeroinit(int fd, off_t off, off_t len)
{
	struct mendfs_ioc_zeroinit a;

	if (off < 0 || len <= 0) {
		errno = EINVAL;
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	a.offset = (uint64_t)off;
	a.length = (uint64_t)len;
	if (ioctl(fd, MENDFS_IOC_ZEROINIT, &a) < 0) {
		if (errno == ENOTTY || errno == ENOSYS)
			errno = EOPNOTSUPP;
		return -1;
	}
	return 0;
}

/* --- scrub and damage events ------------------------------------------------------ */

int mendfs_scrub_step(int fd, struct mendfs_scrub *st)
{
	struct mendfs_ioc_scrub a;

	if (!st || st->phase > MENDFS_SCRUB_DONE || (st->flags & ~MENDFS_SCRUB_RESUME)) {
		errno = EINVAL;
		return -1;
	}
	if (st->phase == MENDFS_SCRUB_DONE && !(st->flags & MENDFS_SCRUB_RESUME))
		return 1;
	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	a.flags = st->flags;
	a.phase = st->phase;
	a.pos = st->pos;
	a.meta_budget = st->meta_budget;
	a.data_budget = st->data_budget;
	if (ioctl(fd, MENDFS_IOC_SCRUB, &a) < 0) {
		if (errno == ENOTTY || errno == ENOSYS)
			errno = EOPNOTSUPP;
		return -1;
	}
	st->flags = 0;
	st->phase = a.phase;
	st->pos = a.pos;
	st->meta_checked += a.meta_checked;
	st->meta_healed += a.meta_healed;
	st->meta_lost += a.meta_lost;
	st->meta_unhealed += a.meta_bad;
	st->meta_skipped += a.meta_skipped;
	st->data_bytes += a.data_bytes;
	st->poison_found += a.poison_found;
	st->csum_found += a.csum_found;
	st->meta_total = a.meta_total;
	st->data_total = a.data_total;
	return a.done ? 1 : 0;
}

int mendfs_scrub(int fd, struct mendfs_scrub *st)
{
	int ret;

	while (!(ret = mendfs_scrub_step(fd, st)))
		;
	return ret < 0 ? -1 : 0;
}

int mendfs_events_read(int fd, uint64_t from, struct mendfs_ioc_event *out, unsigned max,
                       unsigned wait_ms, uint64_t *next, uint64_t *lost)
{
	struct mendfs_ioc_events *a;
	unsigned cnt = 0;

	if ((max && !out) || !next || wait_ms > MENDFS_EV_WAIT_MAX) {
		errno = EINVAL;
		return -1;
	}
	a = malloc(sizeof(*a));
	if (!a)
		return -1;
	if (lost)
		*lost = 0;
	*next = from;
	/* batches of MENDFS_EV_MAX; only the first may wait */
	do {
		memset(a, 0, offsetof(struct mendfs_ioc_events, ev));
		a->version = MENDFS_IOC_VERSION;
		a->from_seq = *next;
		a->wait_ms = cnt ? 0 : wait_ms;
		if (ioctl(fd, MENDFS_IOC_EVENTS, a) < 0) {
			int err = errno;

			free(a);
			if (cnt) /* what was read stands; the error comes again next time */
				return (int)cnt;
			errno = not_mendfs(err) && err != EINVAL ? EOPNOTSUPP : err;
			return -1;
		}
		if (lost && !cnt)
			*lost = a->lost;
		for (unsigned i = 0; i < a->nr && i < MENDFS_EV_MAX && cnt < max; i++)
			out[cnt++] = a->ev[i];
		/* go on from the last one kept: the rest of a full batch comes again */
		*next = cnt ? out[cnt - 1].seq + 1 : a->nr ? *next : a->next_seq;
	} while (a->nr == MENDFS_EV_MAX && cnt < max);
	free(a);
	return (int)cnt;
}
