/* SPDX-License-Identifier: MIT */
/*
 * salvage: copy a file from mendfs to anywhere, every recoverable byte of it.
 *
 *   salvage FILE OUT
 *
 * Reads FILE with mendfs_preadv2(..., MENDFS_RWF_RECOVERY_DATA): poisoned
 * 512-byte sectors come back as zeros instead of failing the read with EIO.
 * Then prints the byte ranges that were zero-filled, from mendfs_badranges(),
 * one "zero-filled OFFSET LENGTH" line each, and a summary.  Exit 0 when the
 * copy is complete (with or without zero-filled ranges), 1 on error.
 *
 * OUT must not exist yet: a salvage never writes over anything, FILE least of
 * all.  A copy that fails midway is removed, so no partial OUT is left.
 *
 * Build: cc salvage.c $(pkg-config --cflags --libs mendfs)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mendfs/recovery.h>

#define CHUNK (1 << 20)

static const char *created; /* OUT, once this program has created it */

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "salvage: %s %s: %s\n", what, path, strerror(errno));
	if (created)
		unlink(created); /* no partial copy left behind */
	return 1;
}

int main(int argc, char **argv)
{
	static char buf[CHUNK];
	struct mendfs_range r[64];
	uint64_t off = 0, lost = 0;
	unsigned n;
	int in, out;

	if (argc != 3) {
		fprintf(stderr, "usage: salvage FILE OUT\n");
		return 2;
	}
	in = open(argv[1], O_RDONLY);
	if (in < 0)
		return fail("open", argv[1]);
	out = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (out < 0)
		return fail("create", argv[2]); /* EEXIST: OUT (maybe FILE itself) is kept */
	created = argv[2];

	/* 1. every byte up to the end of file; poisoned sectors read as zeros */
	for (;;) {
		struct iovec iov = {buf, CHUNK};
		ssize_t got = mendfs_preadv2(in, &iov, 1, (off_t)off, MENDFS_RWF_RECOVERY_DATA);

		if (got < 0)
			return fail("recovery read of", argv[1]); /* EOPNOTSUPP: not on mendfs */
		if (got == 0)
			break;
		if (write(out, buf, (size_t)got) != got)
			return fail("write", argv[2]);
		off += (uint64_t)got;
	}
	if (fsync(out) || close(out))
		return fail("fsync", argv[2]);

	/* 2. which bytes were lost: the poison map, 64 ranges per call */
	for (uint64_t from = 0;; from = r[n - 1].offset + r[n - 1].length) {
		if (mendfs_badranges(in, (off_t)from, r, 64, &n))
			return fail("poison map of", argv[1]);
		for (unsigned i = 0; i < n; i++) {
			printf("zero-filled %" PRIu64 " %" PRIu64 "\n", r[i].offset, r[i].length);
			lost += r[i].length;
		}
		if (n < 64)
			break;
	}
	printf("salvaged %" PRIu64 " bytes of %s, %" PRIu64 " zero-filled\n", off, argv[1], lost);
	close(in);
	return 0;
}
