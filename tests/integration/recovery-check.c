/* SPDX-License-Identifier: MIT */
/*
 * recovery-check: system-call side of the recovery integration tests
 * (recovery-test.sh).  Files hold a known pattern (byte i = pat(i)); every
 * check compares with that pattern, zeros in the given byte ranges.
 *
 *   pattern FILE SIZE                  write the pattern
 *   read FILE SIZE BADOFF              plain read(): the clean prefix up to BADOFF's page, then EIO
 *   preadv2 FILE SIZE [OFF LEN]...     recovery read: full length, zeros exactly in the ranges
 *   verify FILE SIZE [OFF LEN]...      plain read of the whole file equals the expectation
 *   salvage OUT SIZE [OFF LEN]...      write the expected salvage copy to OUT
 *   overwrite FILE OFF LEN             pwrite the pattern over [OFF, OFF + LEN)
 *   rwrite FILE OFF LEN                plain pwrite -> EIO, then mendfs_pwritev2 with the flag
 *                                      on O_WRONLY (EBADF on O_RDONLY)
 *   hostile FILE                       malformed ioctl structs -> EINVAL, wrong open mode -> EBADF
 *   notmendfs FILE                     a file elsewhere: EOPNOTSUPP with the flag, preadv without
 *   inject MNT SECTOR COUNT ERR        MENDFS_IOC_INJECT on the mount point: 0 or the errno ERR
 *                                      (EPERM, EINVAL, EROFS)
 *   injhostile MNT DEVSECTORS          malformed / out-of-range inject structs -> EINVAL
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "die.h"
#include "mendfs/ioctl.h"
#include "mendfs/recovery.h"

#define MAXR 64

static struct mendfs_range zr[MAXR];
static unsigned nzr;

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(((i * 2654435761u) >> 13) ^ (i >> 12) ^ 0x5a);
}

static uint64_t num(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (*end || !*s)
		die("bad number '%s'", s);
	return v;
}

static void ranges(int argc, char **argv, int from)
{
	if ((argc - from) % 2 || (argc - from) / 2 > MAXR)
		die("ranges come in OFF LEN pairs");
	for (int i = from; i < argc; i += 2) {
		zr[nzr].offset = num(argv[i]);
		zr[nzr].length = num(argv[i + 1]);
		nzr++;
	}
}

static uint8_t expect(uint64_t i)
{
	for (unsigned r = 0; r < nzr; r++)
		if (i >= zr[r].offset && i < zr[r].offset + zr[r].length)
			return 0;
	return pat(i);
}

static void compare(const uint8_t *buf, uint64_t off, uint64_t len, const char *what)
{
	for (uint64_t i = 0; i < len; i++)
		if (buf[i] != expect(off + i))
			die("%s: byte %llu is %#x, expected %#x", what,
			    (unsigned long long)(off + i), buf[i], expect(off + i));
}

static void write_pattern(int fd, uint64_t off, uint64_t len, bool zeros)
{
	uint8_t *buf = xmalloc(len);

	for (uint64_t i = 0; i < len; i++)
		buf[i] = zeros ? expect(off + i) : pat(off + i);
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		die("pwrite: %s", strerror(errno));
	free(buf);
}

static void read_whole(int fd, uint8_t *buf, uint64_t size, const char *what)
{
	uint64_t done = 0;

	while (done < size) {
		ssize_t n = pread(fd, buf + done, size - done, (off_t)done);

		if (n <= 0)
			die("%s: read at %llu: %s", what, (unsigned long long)done,
			    n ? strerror(errno) : "end of file");
		done += (uint64_t)n;
	}
}

/* Plain reads: the clean prefix up to the poisoned page, then EIO. */
static void check_read(const char *path, uint64_t size, uint64_t bad)
{
	uint64_t want = bad / 4096 * 4096, done = 0;
	uint8_t *buf = xmalloc(size);
	int fd = xopen(path, O_RDONLY);

	for (;;) {
		ssize_t n = read(fd, buf + done, size - done);

		if (n < 0) {
			if (errno != EIO)
				die("read: %s, expected EIO", strerror(errno));
			break;
		}
		if (n == 0)
			die("read reached end of file at %llu (poison at %llu)",
			    (unsigned long long)done, (unsigned long long)bad);
		done += (uint64_t)n;
	}
	if (done != want)
		die("read returned %llu bytes before EIO, expected %llu", (unsigned long long)done,
		    (unsigned long long)want);
	compare(buf, 0, done, "read");
	free(buf);
	close(fd);
}

/* Recovery read in three iovecs of odd sizes, then mendfs_recover for the ranges. */
static void check_preadv2(const char *path, uint64_t size)
{
	uint8_t *buf = xmalloc(size + 8);
	struct mendfs_range got[MAXR];
	size_t a = size / 3 + 1, b = size / 5 + 7;
	struct iovec iov[3] = {{buf, a}, {buf + a, b}, {buf + a + b, size + 8 - a - b}};
	int fd = xopen(path, O_RDONLY);
	unsigned n;
	ssize_t r;

	memset(buf, 0xee, size + 8);
	r = mendfs_preadv2(fd, iov, 3, 0, MENDFS_RWF_RECOVERY_DATA);
	if (r != (ssize_t)size)
		die("mendfs_preadv2 returned %zd (%s), expected %llu", r,
		    r < 0 ? strerror(errno) : "", (unsigned long long)size);
	compare(buf, 0, size, "mendfs_preadv2");
	memset(buf, 0xee, size);
	r = mendfs_recover(fd, buf, size + 8, 0, got, MAXR, &n);
	if (r != (ssize_t)size)
		die("mendfs_recover returned %zd", r);
	compare(buf, 0, size, "mendfs_recover");
	if (n != nzr)
		die("mendfs_recover reported %u zero-filled ranges, expected %u", n, nzr);
	for (unsigned i = 0; i < n; i++)
		if (got[i].offset != zr[i].offset || got[i].length != zr[i].length)
			die("zero-filled range %u is %llu+%llu, expected %llu+%llu", i,
			    (unsigned long long)got[i].offset, (unsigned long long)got[i].length,
			    (unsigned long long)zr[i].offset, (unsigned long long)zr[i].length);
	/* a read from inside the file past its end stops at the end */
	r = mendfs_preadv2(fd, iov, 3, (off_t)size - 1, MENDFS_RWF_RECOVERY_DATA);
	if (r != 1)
		die("mendfs_preadv2 at the last byte returned %zd", r);
	free(buf);
	close(fd);
}

static void check_verify(const char *path, uint64_t size)
{
	uint8_t *buf = xmalloc(size);
	int fd = xopen(path, O_RDONLY);

	read_whole(fd, buf, size, "verify");
	compare(buf, 0, size, "verify");
	free(buf);
	close(fd);
}

static void want_errno(long r, int err, const char *what)
{
	if (r != -1 || errno != err)
		die("%s: got %ld (%s), expected %s", what, r, r < 0 ? strerror(errno) : "success",
		    strerror(err));
}

static void check_rwrite(const char *path, uint64_t off, uint64_t len)
{
	uint8_t *buf = xmalloc(len);
	struct iovec iov = {buf, len};
	int fd = xopen(path, O_WRONLY), rfd = xopen(path, O_RDONLY);
	ssize_t r;

	for (uint64_t i = 0; i < len; i++)
		buf[i] = pat(off + i);
	r = pwrite(fd, buf, len, (off_t)off);
	if (r >= 0 || errno != EIO)
		die("a plain write over part of a poisoned sector gave %zd (%s), expected EIO", r,
		    r < 0 ? strerror(errno) : "success");
	/* the recovery write needs a handle open for writing, not for reading */
	want_errno(mendfs_pwritev2(rfd, &iov, 1, (off_t)off, MENDFS_RWF_RECOVERY_DATA), EBADF,
	           "recovery write on O_RDONLY");
	r = mendfs_pwritev2(fd, &iov, 1, (off_t)off, MENDFS_RWF_RECOVERY_DATA);
	if (r != (ssize_t)len)
		die("mendfs_pwritev2 returned %zd (%s)", r, r < 0 ? strerror(errno) : "");
	free(buf);
	close(fd);
	close(rfd);
}

static void check_hostile(const char *path)
{
	struct mendfs_ioc_recovery_read *rr = (void *)xmalloc(sizeof(*rr));
	struct mendfs_ioc_badranges br;
	struct mendfs_ioc_bmap *bm = (void *)xmalloc(sizeof(*bm));
	struct mendfs_ioc_zeroinit zi;
	struct mendfs_ioc_stats st;
	int fd = xopen(path, O_RDONLY), wfd = xopen(path, O_WRONLY);

#define RR(field, val, what)                                                                       \
	do {                                                                                       \
		memset(rr, 0, sizeof(*rr));                                                        \
		rr->version = MENDFS_IOC_VERSION;                                                  \
		rr->length = 512;                                                                  \
		rr->field = val;                                                                   \
		want_errno(ioctl(fd, MENDFS_IOC_RECOVERY_READ, rr), EINVAL, what);                 \
	} while (0)
	RR(version, 0, "recovery read version 0");
	RR(version, 99, "recovery read version 99");
	RR(flags, 1, "recovery read flags");
	RR(length, 0, "recovery read length 0");
	RR(length, MENDFS_RR_CHUNK + 1, "recovery read length above the chunk");
	RR(length, UINT64_MAX, "recovery read huge length");
	RR(offset, UINT64_MAX - 100, "recovery read overflowing offset");
	RR(offset, (uint64_t)INT64_MAX, "recovery read offset past the largest file");
	RR(reserved[3], 1, "recovery read reserved");
	memset(rr, 0, sizeof(*rr));
	rr->version = MENDFS_IOC_VERSION;
	rr->length = 512;
	want_errno(ioctl(wfd, MENDFS_IOC_RECOVERY_READ, rr), EBADF, "recovery read on O_WRONLY");

	memset(&br, 0, sizeof(br));
	br.version = 2;
	want_errno(ioctl(fd, MENDFS_IOC_BADRANGES, &br), EINVAL, "badranges version 2");
	br.version = MENDFS_IOC_VERSION;
	br.start = UINT64_MAX;
	want_errno(ioctl(fd, MENDFS_IOC_BADRANGES, &br), EINVAL, "badranges huge start");
	memset(bm, 0, sizeof(*bm));
	bm->version = MENDFS_IOC_VERSION;
	bm->reserved[0] = 7;
	want_errno(ioctl(fd, MENDFS_IOC_BMAP, bm), EINVAL, "bmap reserved");

	memset(&zi, 0, sizeof(zi));
	zi.version = MENDFS_IOC_VERSION;
	zi.offset = 100;
	zi.length = 512;
	want_errno(ioctl(wfd, MENDFS_IOC_ZEROINIT, &zi), EINVAL, "zeroinit partial sector");
	zi.offset = 512;
	zi.length = 0;
	want_errno(ioctl(wfd, MENDFS_IOC_ZEROINIT, &zi), EINVAL, "zeroinit length 0");
	zi.offset = UINT64_MAX - 511;
	zi.length = 1024;
	want_errno(ioctl(wfd, MENDFS_IOC_ZEROINIT, &zi), EINVAL, "zeroinit overflowing offset");
	zi.offset = 0;
	zi.length = 512;
	want_errno(ioctl(fd, MENDFS_IOC_ZEROINIT, &zi), EBADF, "zeroinit on O_RDONLY");
	want_errno(mendfs_zeroinit(wfd, 1, 512), EINVAL, "mendfs_zeroinit partial sector");

	{
		struct mendfs_ioc_recovery_write *rw = (void *)xmalloc(sizeof(*rw));

#define RW(field, val, what)                                                                       \
	do {                                                                                       \
		memset(rw, 0, sizeof(*rw));                                                        \
		rw->version = MENDFS_IOC_VERSION;                                                  \
		rw->offset = 100;                                                                  \
		rw->length = 10;                                                                   \
		rw->field = val;                                                                   \
		want_errno(ioctl(wfd, MENDFS_IOC_RECOVERY_WRITE, rw), EINVAL, what);               \
	} while (0)
		RW(version, 0, "recovery write version 0");
		RW(flags, 2, "recovery write flags");
		RW(length, 0, "recovery write length 0");
		RW(length, MENDFS_RW_CHUNK + 1, "recovery write length above the chunk");
		RW(offset, UINT64_MAX - 5, "recovery write overflowing offset");
		RW(offset, (uint64_t)INT64_MAX - 5, "recovery write past the largest file");
		RW(reserved[0], 1, "recovery write reserved");
		memset(rw, 0, sizeof(*rw));
		rw->version = MENDFS_IOC_VERSION;
		rw->length = 10;
		want_errno(ioctl(fd, MENDFS_IOC_RECOVERY_WRITE, rw), EBADF,
		           "recovery write on O_RDONLY");
		free(rw);
	}

	memset(&st, 0, sizeof(st));
	st.version = MENDFS_IOC_VERSION;
	st.spare[0] = 1; /* output field: ignored on input */
	st.flags = 4;
	want_errno(ioctl(fd, MENDFS_IOC_STATS, &st), EINVAL, "stats flags");
	{
		struct mendfs_ioc_queue_stats *qs = (void *)xmalloc(sizeof(*qs));

#define QS(field, val, what)                                                                       \
	do {                                                                                       \
		memset(qs, 0, sizeof(*qs));                                                        \
		qs->version = MENDFS_IOC_VERSION;                                                  \
		qs->field = val;                                                                   \
		want_errno(ioctl(fd, MENDFS_IOC_QUEUE_STATS, qs), EINVAL, what);                   \
	} while (0)
		QS(version, 0, "queue stats version 0");
		QS(flags, 1, "queue stats flags");
		QS(reserved[2], 1, "queue stats reserved");
		QS(count, UINT32_MAX, "queue stats count on input");
		QS(nr_queues, 1000, "queue stats nr_queues on input");
		QS(entry_size, 1, "queue stats entry_size on input");
		QS(pad, 1, "queue stats pad");
		memset(qs, 0, sizeof(*qs));
		qs->version = MENDFS_IOC_VERSION;
		if (ioctl(fd, MENDFS_IOC_QUEUE_STATS, qs) || !qs->count ||
		    qs->count > MENDFS_QS_MAX_QUEUES || qs->count > qs->nr_queues ||
		    qs->entry_size != sizeof(qs->q[0]) || !qs->q[0].depth)
			die("queue stats: %s, count %u of %u, entry %u", strerror(errno), qs->count,
			    qs->nr_queues, qs->entry_size);
		free(qs);
	}
	/* an ioctl number mendfs does not define */
	want_errno(ioctl(fd, _IOWR(MENDFS_IOC_MAGIC, 99, struct mendfs_ioc_zeroinit), &zi), ENOTTY,
	           "unknown ioctl");

	/* still alive and answering */
	memset(rr, 0, sizeof(*rr));
	rr->version = MENDFS_IOC_VERSION;
	rr->length = 512;
	if (ioctl(fd, MENDFS_IOC_RECOVERY_READ, rr) || rr->bytes != 512)
		die("a valid recovery read after the hostile ones failed: %s", strerror(errno));
	free(rr);
	free(bm);
	close(fd);
	close(wfd);
}

static void check_notmendfs(const char *path)
{
	uint8_t buf[100];
	struct iovec iov = {buf, sizeof(buf)};
	struct mendfs_range r;
	unsigned n;
	int fd = xopen(path, O_RDWR | O_CREAT | O_TRUNC);

	write_pattern(fd, 0, sizeof(buf), false);
	want_errno(mendfs_preadv2(fd, &iov, 1, 0, MENDFS_RWF_RECOVERY_DATA), EOPNOTSUPP,
	           "mendfs_preadv2 with the flag off mendfs");
	want_errno(mendfs_badranges(fd, 0, &r, 1, &n), EOPNOTSUPP, "mendfs_badranges off mendfs");
	want_errno(mendfs_zeroinit(fd, 0, 512), EOPNOTSUPP, "mendfs_zeroinit off mendfs");
	want_errno(mendfs_pwritev2(fd, &iov, 1, 0, MENDFS_RWF_RECOVERY_DATA), EOPNOTSUPP,
	           "mendfs_pwritev2 with the flag off mendfs (unaligned)");
	{
		uint8_t sect[512];
		struct iovec siov = {sect, sizeof(sect)};

		memset(sect, 0, sizeof(sect));
		want_errno(mendfs_pwritev2(fd, &siov, 1, 512, MENDFS_RWF_RECOVERY_DATA), EOPNOTSUPP,
		           "mendfs_pwritev2 with the flag off mendfs (whole sector)");
	}
	memset(buf, 0, sizeof(buf));
	if (mendfs_preadv2(fd, &iov, 1, 0, 0) != (ssize_t)sizeof(buf))
		die("mendfs_preadv2 flags 0 off mendfs: %s", strerror(errno));
	compare(buf, 0, sizeof(buf), "mendfs_preadv2 flags 0");
	if (mendfs_pwritev2(fd, &iov, 1, 200, 0) != (ssize_t)sizeof(buf))
		die("mendfs_pwritev2 flags 0 off mendfs: %s", strerror(errno));
	want_errno(mendfs_preadv2(fd, &iov, 1, 0, 0x80), EINVAL, "mendfs_preadv2 unknown flag");
	close(fd);
}

static int errno_of(const char *name)
{
	static const struct {
		const char *name;
		int err;
	} t[] = {{"0", 0},         {"EPERM", EPERM}, {"EINVAL", EINVAL}, {"EROFS", EROFS},
	         {"EBADF", EBADF}, {"EIO", EIO},     {"ENOTTY", ENOTTY}};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(name, t[i].name))
			return t[i].err;
	die("unknown errno name %s", name);
}

static int inject(int fd, uint64_t sector, uint64_t count)
{
	struct mendfs_ioc_inject a;

	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	a.sector = sector;
	a.count = count;
	return ioctl(fd, MENDFS_IOC_INJECT, &a);
}

static void check_inject(const char *mnt, uint64_t sector, uint64_t count, int err)
{
	int fd = xopen(mnt, O_RDONLY | O_DIRECTORY);
	int r = inject(fd, sector, count);

	if (err)
		want_errno(r, err, "inject");
	else if (r)
		die("inject %llu %llu: %s", (unsigned long long)sector, (unsigned long long)count,
		    strerror(errno));
	close(fd);
}

static void check_injhostile(const char *mnt, uint64_t nsec)
{
	struct mendfs_ioc_inject a;
	int fd = xopen(mnt, O_RDONLY | O_DIRECTORY);

	want_errno(inject(fd, 8, 0), EINVAL, "inject count 0");
	want_errno(inject(fd, nsec, 1), EINVAL, "inject at the device's end");
	want_errno(inject(fd, nsec - 1, 2), EINVAL, "inject across the device's end");
	want_errno(inject(fd, UINT64_MAX, 1), EINVAL, "inject sector 2^64-1");
	want_errno(inject(fd, 8, UINT64_MAX), EINVAL, "inject count 2^64-1");
	want_errno(inject(fd, UINT64_MAX - 1, 4), EINVAL, "inject overflowing range");
	want_errno(inject(fd, 1ull << 55, 1ull << 55), EINVAL, "inject far past the end");
	memset(&a, 0, sizeof(a));
	a.version = 2;
	a.sector = 8;
	a.count = 1;
	want_errno(ioctl(fd, MENDFS_IOC_INJECT, &a), EINVAL, "inject version 2");
	a.version = MENDFS_IOC_VERSION;
	a.flags = 1;
	want_errno(ioctl(fd, MENDFS_IOC_INJECT, &a), EINVAL, "inject flags");
	a.flags = 0;
	a.reserved[2] = 1;
	want_errno(ioctl(fd, MENDFS_IOC_INJECT, &a), EINVAL, "inject reserved");
	/* a size that is not the struct's: a different ioctl number */
	{
		uint8_t big[2 * sizeof(a)];

		memset(big, 0, sizeof(big));
		memcpy(big, &a, sizeof(a));
		want_errno(ioctl(fd, _IOWR(MENDFS_IOC_MAGIC, 6, struct mendfs_ioc_inject[2]), big),
		           ENOTTY, "inject with the wrong size");
	}
	close(fd);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 2 ? argv[1] : "", *path = argc > 2 ? argv[2] : "";

	if (!strcmp(cmd, "pattern") && argc == 4) {
		int fd = xopen(path, O_WRONLY | O_CREAT | O_TRUNC);

		write_pattern(fd, 0, num(argv[3]), false);
		if (fsync(fd))
			die("fsync: %s", strerror(errno));
		close(fd);
	} else if (!strcmp(cmd, "read") && argc == 5) {
		check_read(path, num(argv[3]), num(argv[4]));
	} else if (!strcmp(cmd, "preadv2") && argc >= 4) {
		ranges(argc, argv, 4);
		check_preadv2(path, num(argv[3]));
	} else if (!strcmp(cmd, "verify") && argc >= 4) {
		ranges(argc, argv, 4);
		check_verify(path, num(argv[3]));
	} else if (!strcmp(cmd, "salvage") && argc >= 4) {
		int fd = xopen(path, O_WRONLY | O_CREAT | O_TRUNC);

		ranges(argc, argv, 4);
		write_pattern(fd, 0, num(argv[3]), true);
		close(fd);
	} else if (!strcmp(cmd, "overwrite") && argc == 5) {
		int fd = xopen(path, O_WRONLY);

		write_pattern(fd, num(argv[3]), num(argv[4]), false);
		close(fd);
	} else if (!strcmp(cmd, "rwrite") && argc == 5) {
		check_rwrite(path, num(argv[3]), num(argv[4]));
	} else if (!strcmp(cmd, "hostile") && argc == 3) {
		check_hostile(path);
	} else if (!strcmp(cmd, "inject") && argc == 6) {
		check_inject(path, num(argv[3]), num(argv[4]), errno_of(argv[5]));
	} else if (!strcmp(cmd, "injhostile") && argc == 4) {
		check_injhostile(path, num(argv[3]));
	} else if (!strcmp(cmd, "notmendfs") && argc == 3) {
		check_notmendfs(path);
	} else {
		fprintf(stderr, "usage: see the top of tests/integration/recovery-check.c\n");
		return 1;
	}
	return 0;
}
