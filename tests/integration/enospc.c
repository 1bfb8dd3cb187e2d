/* SPDX-License-Identifier: MIT */
/*
 * enospc: ENOSPC only when the space is truly gone, on a live mendfs mount.
 * `enospc DIR [ROUNDS [MIB [HELD]]]` runs inside DIR (the root of a fresh
 * mount):
 *
 *   1. three threads at once, ROUNDS rounds each (default 15) of the first
 *      two: one writes a file of MIB MiB (default 80) with write() and
 *      fsync, closes and unlinks it; one fallocates MIB MiB, closes and
 *      unlinks; one makes directories with an xattr and a small file in
 *      each and removes them again.  At most HELD * MIB MiB plus a little
 *      are in use at any time, under the free space (checked first): not
 *      one call may fail with ENOSPC.  HELD is 2 (default) when the kernel
 *      releases a closed file at once, 3 with -o writeback: there the
 *      kernel's RELEASE of the preallocator's previous file, sent in the
 *      background after close() returned, queues behind the writer's
 *      writeback WRITEs, so that file's space stays in use meanwhile.
 *      Blocks an unlink frees become usable only when the freeing
 *      transaction commits; a writer short of space must commit and retry
 *      rather than fail.
 *   2. a genuine fill: writing until the space runs out ends in ENOSPC (in
 *      bounded time; from fsync, every 16 MiB, when the kernel caches the
 *      writes: -o writeback), and so does a fallocate larger than what is
 *      left.
 *   3. after unlinking the fill, statfs's free count returns to where it was
 *      before everything (the daemon frees an unlinked file when the kernel
 *      forgets it, a moment after the unlink: polled for up to 10 s).
 *
 * Prints one line per check, exits 0 pass, 1 fail.  No check is timed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"

#define MIB (1L << 20)

static long rounds = 15, big_mib = 80, held = 2;
static atomic_bool meta_stop;

/* What one loop saw: calls made, calls that failed with ENOSPC, other errors. */
struct loop {
	const char *what;
	long calls, enospc, other;
	char first[160]; /* the first failure */
};

static void note(struct loop *l, const char *op, long round, int err)
{
	if (err == ENOSPC)
		l->enospc++;
	else
		l->other++;
	if (!l->first[0])
		snprintf(l->first, sizeof(l->first), "%s, round %ld: %s", op, round, strerror(err));
}

/* Write MIB MiB with 1 MiB write()s and fsync, close, unlink; ROUNDS times. */
static void *writer(void *arg)
{
	struct loop *l = arg;
	char *buf = malloc(MIB);

	memset(buf, 0xa5, MIB);
	for (long r = 0; r < rounds; r++) {
		int fd = open("w", O_CREAT | O_TRUNC | O_WRONLY, 0644);
		long off = 0;

		if (fd < 0) {
			note(l, "open", r, errno);
			continue;
		}
		while (off < big_mib * MIB) {
			ssize_t n = write(fd, buf + off % MIB, (size_t)(MIB - off % MIB));

			l->calls++;
			if (n <= 0) {
				note(l, "write", r, n < 0 ? errno : EIO);
				break;
			}
			off += n;
		}
		l->calls++;
		if (fsync(fd))
			note(l, "fsync", r, errno);
		close(fd);
		if (unlink("w"))
			note(l, "unlink", r, errno);
	}
	free(buf);
	return NULL;
}

/* fallocate MIB MiB, close, unlink; ROUNDS times. */
static void *preallocator(void *arg)
{
	struct loop *l = arg;

	for (long r = 0; r < rounds; r++) {
		int fd = open("f", O_CREAT | O_TRUNC | O_WRONLY, 0644);

		if (fd < 0) {
			note(l, "open", r, errno);
			continue;
		}
		l->calls++;
		if (fallocate(fd, 0, 0, big_mib * MIB))
			note(l, "fallocate", r, errno);
		close(fd);
		if (unlink("f"))
			note(l, "unlink", r, errno);
	}
	return NULL;
}

/* Directories with an xattr and an 8 KiB file, removed 16 at a time, until told to stop. */
static void *namespace(void *arg)
{
	static char small[8192];
	struct loop *l = arg;
	char path[64];
	long i = 0, gone = 0;

	memset(small, 0x3c, sizeof(small));
	if (mkdir("m", 0755))
		note(l, "mkdir m", 0, errno);
	for (; !atomic_load(&meta_stop); i++) {
		int fd;

		snprintf(path, sizeof(path), "m/%ld", i);
		l->calls++;
		if (mkdir(path, 0755)) {
			note(l, "mkdir", i, errno);
			continue;
		}
		l->calls++;
		if (setxattr(path, "user.enospc", small, 200, 0))
			note(l, "setxattr", i, errno);
		snprintf(path, sizeof(path), "m/%ld/f", i);
		l->calls += 2;
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		if (fd < 0) {
			note(l, "create", i, errno);
		} else {
			if (write(fd, small, sizeof(small)) != (ssize_t)sizeof(small))
				note(l, "small write", i, errno);
			close(fd);
		}
		for (; i - gone >= 16; gone++) {
			snprintf(path, sizeof(path), "m/%ld/f", gone);
			unlink(path);
			snprintf(path, sizeof(path), "m/%ld", gone);
			if (rmdir(path))
				note(l, "rmdir", gone, errno);
		}
	}
	for (; gone < i; gone++) {
		snprintf(path, sizeof(path), "m/%ld/f", gone);
		unlink(path);
		snprintf(path, sizeof(path), "m/%ld", gone);
		rmdir(path);
	}
	rmdir("m");
	return NULL;
}

static void report(const struct loop *l)
{
	CHECK(l->enospc == 0 && l->other == 0, "%s: %ld calls, %ld ENOSPC, %ld other errors%s%s",
	      l->what, l->calls, l->enospc, l->other, l->first[0] ? "; first: " : "", l->first);
}

/* Write until the space runs out: ENOSPC, after about as much as was free. */
static void genuine_fill(const struct statvfs *sv0)
{
	char *buf = malloc(MIB);
	long written = 0, cap = (long)(sv0->f_bavail * sv0->f_frsize) + 64 * MIB;
	int fd, err = 0;
	ssize_t n;

	memset(buf, 0x5a, MIB);
	fd = open("fill", O_CREAT | O_TRUNC | O_WRONLY, 0644);
	CHECK(fd >= 0, "create fill");
	while (fd >= 0 && written < cap) {
		n = write(fd, buf, MIB);
		if (n < 0) {
			err = errno;
			break;
		}
		written += n;
		/* with -o writeback the write goes to the page cache: fsync tells */
		if (written % (16 * MIB) == 0 && fsync(fd)) {
			err = errno;
			break;
		}
	}
	CHECK(err == ENOSPC, "a genuine fill ends in ENOSPC after %ld MiB of %llu free (%s)",
	      written / MIB, (unsigned long long)(sv0->f_bavail * sv0->f_frsize / MIB),
	      strerror(err));
	CHECK(written > (long)(sv0->f_bavail * sv0->f_frsize) / 2,
	      "the fill wrote more than half the free space (%ld MiB)", written / MIB);
	if (fd >= 0) {
		int fd2 = open("more", O_CREAT | O_TRUNC | O_WRONLY, 0644);

		errno = 0;
		CHECK(fd2 >= 0 && fallocate(fd2, 0, 0, 64 * MIB) < 0 && errno == ENOSPC,
		      "fallocate of 64 MiB on the full filesystem: ENOSPC");
		if (fd2 >= 0)
			close(fd2);
		unlink("more");
		close(fd);
	}
	CHECK(unlink("fill") == 0, "unlink fill");
	free(buf);
}

int main(int argc, char **argv)
{
	struct loop lw = {.what = "write+fsync+unlink"}, lf = {.what = "fallocate+unlink"},
	            lm = {.what = "mkdir+setxattr+small files"};
	struct statvfs sv0, sv;
	pthread_t tw, tf, tm;
	uint64_t need;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: enospc DIR [ROUNDS [MIB [HELD]]]\n");
		return 1;
	}
	if (argc > 2)
		rounds = atol(argv[2]);
	if (argc > 3)
		big_mib = atol(argv[3]);
	if (argc > 4)
		held = atol(argv[4]);
	if (rounds <= 0 || big_mib <= 0 || held <= 0) {
		fprintf(stderr, "enospc: ROUNDS, MIB and HELD must be positive\n");
		return 1;
	}
	if (chdir(argv[1])) {
		perror(argv[1]);
		return 1;
	}
	if (statvfs(".", &sv0)) {
		perror("statvfs");
		return 1;
	}
	/* HELD big files, the namespace loop's 16 directories and some slack */
	need = (uint64_t)(held * big_mib + 16) * MIB;
	CHECK(sv0.f_bavail * sv0.f_frsize > need, "%llu MiB free, %llu MiB needed at most",
	      (unsigned long long)(sv0.f_bavail * sv0.f_frsize / MIB),
	      (unsigned long long)(need / MIB));
	if (failures)
		return 1;

	if (pthread_create(&tw, NULL, writer, &lw) ||
	    pthread_create(&tf, NULL, preallocator, &lf) ||
	    pthread_create(&tm, NULL, namespace, &lm)) {
		perror("pthread_create");
		return 1;
	}
	pthread_join(tw, NULL);
	pthread_join(tf, NULL);
	atomic_store(&meta_stop, true);
	pthread_join(tm, NULL);
	report(&lw);
	report(&lf);
	report(&lm);

	genuine_fill(&sv0);

	/* the daemon frees an unlinked file when the kernel forgets it, a little later */
	for (i = 0; i < 100; i++) {
		if (statvfs(".", &sv) == 0 && sv.f_bfree >= sv0.f_bfree)
			break;
		usleep(100000);
	}
	CHECK(sv.f_bfree == sv0.f_bfree && sv.f_bavail == sv0.f_bavail,
	      "statfs free blocks back to %llu after the unlinks (%llu)",
	      (unsigned long long)sv0.f_bfree, (unsigned long long)sv.f_bfree);
	printf("enospc: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
