// SPDX-License-Identifier: MIT
//
// fs-meta-rates DIR NFILES LIMIT_SECONDS [create|unlink]
//
// Metadata rates for tests/bench/fs-figures.sh: in DIR (one directory, which
// must exist), create NFILES empty files (open O_CREAT|O_EXCL + close), then
// stat(2) each, then unlink(2) each.  The create and unlink phases end with
// fsync(2) of the directory and syncfs(2), inside the timing (syncfs alone
// does not reach a FUSE daemon).  Before the stat phase the caller's dentry and
// inode caches are dropped (echo 2 > /proc/sys/vm/drop_caches) when running as
// root, so that every stat reaches the filesystem.
//
// With "create" only the create phase runs (tests/bench/uring-cpu.sh); with
// "unlink" only the unlink phase, of the NFILES files an earlier "create" run
// made (tests/bench/op-time.sh).
//
// A phase that runs past LIMIT_SECONDS stops there; the later phases then work
// on the files that were created.  Output, one line per phase:
//   PHASE FILES_DONE SECONDS OPS_PER_SECOND COMPLETE(0|1)
// Exit 0, or 1 on the first failed system call (named on stderr).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void name_of(char *buf, size_t len, long i)
{
	snprintf(buf, len, "f%07ld", i);
}

/*
 * Make a phase durable: fsync(2) of the directory, then syncfs(2).  syncfs
 * alone never reaches a FUSE daemon (Linux forwards it to virtiofs only), so
 * for the FUSE filesystems it is the directory's fsync (FSYNCDIR) that counts.
 */
static int durable(int dfd, const char *phase)
{
	if (fsync(dfd)) {
		fprintf(stderr, "fsync of the directory after %s: %s\n", phase, strerror(errno));
		return 1;
	}
	if (syncfs(dfd)) {
		fprintf(stderr, "syncfs after %s: %s\n", phase, strerror(errno));
		return 1;
	}
	return 0;
}

static void drop_dcache(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	if (fd < 0)
		return;
	sync();
	if (write(fd, "2\n", 2) != 2)
		perror("drop_caches");
	close(fd);
}

static void report(const char *phase, long done, double secs, int complete)
{
	printf("%s %ld %.3f %.0f %d\n", phase, done, secs, secs > 0 ? done / secs : 0.0, complete);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char name[32];
	struct stat st;
	long n, i, made;
	double limit, t0, t;
	int dfd, fd;

	const char *only = argc == 5 ? argv[4] : NULL;

	if (argc != 4 && !(argc == 5 && (!strcmp(only, "create") || !strcmp(only, "unlink")))) {
		fprintf(stderr, "usage: %s DIR NFILES LIMIT_SECONDS [create|unlink]\n", argv[0]);
		return 2;
	}
	n = atol(argv[2]);
	limit = atof(argv[3]);
	dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dfd < 0 || n <= 0 || limit <= 0) {
		fprintf(stderr, "%s: bad directory or arguments: %s\n", argv[0],
		        dfd < 0 ? strerror(errno) : "NFILES and LIMIT must be > 0");
		return 2;
	}

	if (only && !strcmp(only, "unlink")) {
		made = n;
		goto unlink;
	}
	t0 = now();
	for (i = 0; i < n; i++) {
		name_of(name, sizeof(name), i);
		fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "create %s (file %ld): %s\n", name, i, strerror(errno));
			return 1;
		}
		if (close(fd)) {
			fprintf(stderr, "close %s: %s\n", name, strerror(errno));
			return 1;
		}
		if ((i & 255) == 255 && now() - t0 > limit) {
			i++;
			break;
		}
	}
	made = i;
	if (durable(dfd, "create"))
		return 1;
	t = now() - t0;
	report("create", made, t, made == n);
	if (only)
		return 0;

	drop_dcache();
	t0 = now();
	for (i = 0; i < made; i++) {
		name_of(name, sizeof(name), i);
		if (fstatat(dfd, name, &st, 0)) {
			fprintf(stderr, "stat %s: %s\n", name, strerror(errno));
			return 1;
		}
		if (!S_ISREG(st.st_mode) || st.st_size != 0) {
			fprintf(stderr, "stat %s: not an empty regular file\n", name);
			return 1;
		}
		if ((i & 255) == 255 && now() - t0 > limit) {
			i++;
			break;
		}
	}
	t = now() - t0;
	report("stat", i, t, i == n);

unlink:
	t0 = now();
	for (i = 0; i < made; i++) {
		name_of(name, sizeof(name), i);
		if (unlinkat(dfd, name, 0)) {
			fprintf(stderr, "unlink %s: %s\n", name, strerror(errno));
			return 1;
		}
		if ((i & 255) == 255 && now() - t0 > limit) {
			i++;
			break;
		}
	}
	if (durable(dfd, "unlink"))
		return 1;
	t = now() - t0;
	report("unlink", i, t, i == n);
	close(dfd);
	return 0;
}
