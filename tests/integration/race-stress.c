/* SPDX-License-Identifier: MIT */
/*
 * race-stress MNT SECONDS [THREADS]: threads hammering one mount at once, for
 * a race detector (ThreadSanitizer) watching the daemon and for the data
 * itself.  Each worker loops over random operations on files shared by all
 * workers and on files of its own: pread, pwrite, ftruncate, fallocate (plain,
 * KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE), fsync, rename, unlink and hard links
 * (so that two names of one inode are unlinked at once, and opens race the
 * unlink that frees an inode nobody has open); one more
 * thread runs the recovery ioctls (recovery read, bad ranges, block map,
 * statistics) on the same files.  Every byte ever written at file offset o is
 * pat(o), whatever the file, so every byte read must be pat(o) or zero (a
 * hole, a truncate, a punch) — whatever the interleaving and the renames.
 * Exit 0 when every check held, 1 with a message otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "mendfs/ioctl.h"

#define SHARED     4
#define OWN        4
#define MAX_SIZE   (4u << 20)
#define MAX_IO     (96u << 10)
#define MAX_THREAD 16

static const char *mnt;
static atomic_bool stop;
static atomic_int failed;
static atomic_ulong nr_ops, nr_ioctls;

static uint8_t pat(uint64_t off)
{
	return (uint8_t)((off * 2654435761u) >> 13) | 1; /* never 0 */
}

static __attribute__((format(printf, 1, 2))) void bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "race-stress: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	atomic_store(&failed, 1);
	atomic_store(&stop, true);
}

static unsigned rnd(unsigned *seed, unsigned n)
{
	return (unsigned)rand_r(seed) % n;
}

static void name_of(char *buf, size_t len, int worker, unsigned i)
{
	if (worker < 0)
		snprintf(buf, len, "%s/shared%u", mnt, i);
	else
		snprintf(buf, len, "%s/w%d-%u", mnt, worker, i);
}

/*
 * Errors a racing namespace operation may cause (the file renamed or unlinked
 * meanwhile).  link(2)'s EEXIST (the new name taken meanwhile) is checked
 * where it is called.
 */
static bool racy(int err)
{
	return err == ENOENT;
}

static void do_write(int fd, unsigned *seed, uint8_t *buf)
{
	uint64_t off = rnd(seed, MAX_SIZE), i;
	size_t len = 1 + rnd(seed, MAX_IO);

	for (i = 0; i < len; i++)
		buf[i] = pat(off + i);
	if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
		bad("pwrite at %llu: %s", (unsigned long long)off, strerror(errno));
}

static void do_read(int fd, unsigned *seed, uint8_t *buf, const char *path)
{
	uint64_t off = rnd(seed, MAX_SIZE), i;
	size_t len = 1 + rnd(seed, MAX_IO);
	ssize_t n = pread(fd, buf, len, (off_t)off);

	if (n < 0) {
		bad("%s: pread at %llu: %s", path, (unsigned long long)off, strerror(errno));
		return;
	}
	for (i = 0; i < (uint64_t)n; i++)
		if (buf[i] && buf[i] != pat(off + i)) {
			bad("%s: wrong byte at offset %llu: 0x%x", path,
			    (unsigned long long)(off + i), buf[i]);
			return;
		}
}

static void do_falloc(int fd, unsigned *seed)
{
	static const int modes[] = {0, FALLOC_FL_KEEP_SIZE,
	                            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                            FALLOC_FL_ZERO_RANGE};
	off_t off = rnd(seed, MAX_SIZE), len = 1 + rnd(seed, MAX_IO);

	if (fallocate(fd, modes[rnd(seed, 4)], off, len) && errno != ENOSPC)
		bad("fallocate at %lld: %s", (long long)off, strerror(errno));
}

static void worker_op(int id, unsigned *seed, uint8_t *buf)
{
	char path[512], path2[512];
	bool shared = rnd(seed, 2);
	unsigned op = rnd(seed, 100);
	int fd;

	name_of(path, sizeof(path), shared ? -1 : id, rnd(seed, shared ? SHARED : OWN));
	if (op < 4) { /* rename within the worker's own files, or shared onto shared */
		name_of(path2, sizeof(path2), shared ? -1 : id, rnd(seed, shared ? SHARED : OWN));
		if (rename(path, path2) && !racy(errno))
			bad("%s: rename: %s", path, strerror(errno));
		return;
	}
	if (op < 7) {
		if (unlink(path) && !racy(errno))
			bad("%s: unlink: %s", path, strerror(errno));
		return;
	}
	if (op < 9) { /* a second name for the same inode, in the same set */
		name_of(path2, sizeof(path2), shared ? -1 : id, rnd(seed, shared ? SHARED : OWN));
		if (link(path, path2) && !racy(errno) && errno != EEXIST)
			bad("%s: link: %s", path, strerror(errno));
		return;
	}
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		if (!racy(errno))
			bad("%s: open: %s", path, strerror(errno));
		return;
	}
	if (op < 45)
		do_write(fd, seed, buf);
	else if (op < 85)
		do_read(fd, seed, buf, path);
	else if (op < 90) {
		if (ftruncate(fd, rnd(seed, MAX_SIZE)))
			bad("%s: ftruncate: %s", path, strerror(errno));
	} else if (op < 97)
		do_falloc(fd, seed);
	else if (fsync(fd))
		bad("%s: fsync: %s", path, strerror(errno));
	close(fd);
	atomic_fetch_add(&nr_ops, 1);
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	unsigned seed = 0x9e3779b9u * (unsigned)(id + 1);
	uint8_t *buf = malloc(MAX_IO);

	if (!buf)
		abort();
	while (!atomic_load(&stop))
		worker_op(id, &seed, buf);
	free(buf);
	return NULL;
}

/* The recovery ioctls on whatever file is there: each must succeed (or the file be gone). */
static void *ioctler(void *arg)
{
	static struct mendfs_ioc_recovery_read rr;
	static struct mendfs_ioc_badranges br;
	static struct mendfs_ioc_bmap bm;
	static struct mendfs_ioc_stats st;
	unsigned seed = 7;
	char path[512];

	(void)arg;
	while (!atomic_load(&stop)) {
		int fd, ret = 0;
		uint64_t i;

		name_of(path, sizeof(path), rnd(&seed, 2) ? -1 : 0, rnd(&seed, SHARED));
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		switch (rnd(&seed, 4)) {
		case 0:
			memset(&rr, 0, sizeof(rr));
			rr.version = MENDFS_IOC_VERSION;
			rr.offset = rnd(&seed, MAX_SIZE);
			rr.length = 1 + rnd(&seed, MENDFS_RR_CHUNK);
			ret = ioctl(fd, MENDFS_IOC_RECOVERY_READ, &rr);
			for (i = 0; !ret && i < rr.bytes; i++)
				if (rr.data[i] && rr.data[i] != pat(rr.offset + i)) {
					bad("%s: recovery read: wrong byte at %llu: 0x%x", path,
					    (unsigned long long)(rr.offset + i), rr.data[i]);
					break;
				}
			break;
		case 1:
			memset(&br, 0, sizeof(br));
			br.version = MENDFS_IOC_VERSION;
			ret = ioctl(fd, MENDFS_IOC_BADRANGES, &br);
			if (!ret && br.nr)
				bad("%s: %u bad ranges on clean media", path, br.nr);
			break;
		case 2:
			memset(&bm, 0, sizeof(bm));
			bm.version = MENDFS_IOC_VERSION;
			bm.start = rnd(&seed, MAX_SIZE);
			ret = ioctl(fd, MENDFS_IOC_BMAP, &bm);
			break;
		default:
			memset(&st, 0, sizeof(st));
			st.version = MENDFS_IOC_VERSION;
			ret = ioctl(fd, MENDFS_IOC_STATS, &st);
		}
		if (ret)
			bad("%s: ioctl: %s", path, strerror(errno));
		close(fd);
		atomic_fetch_add(&nr_ioctls, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREAD + 1];
	int seconds, nr, i;

	if (argc < 3) {
		fprintf(stderr, "usage: race-stress MNT SECONDS [THREADS]\n");
		return 2;
	}
	mnt = argv[1];
	seconds = atoi(argv[2]);
	nr = argc > 3 ? atoi(argv[3]) : 4;
	if (nr < 1 || nr > MAX_THREAD || seconds < 1) {
		fprintf(stderr, "race-stress: 1..%d threads, at least 1 second\n", MAX_THREAD);
		return 2;
	}
	for (i = 0; i < nr; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i))
			return 1;
	if (pthread_create(&th[nr], NULL, ioctler, NULL))
		return 1;
	for (i = 0; i < seconds * 10 && !atomic_load(&stop); i++)
		usleep(100000);
	atomic_store(&stop, true);
	for (i = 0; i <= nr; i++)
		pthread_join(th[i], NULL);
	printf("race-stress: %lu operations, %lu ioctls by %d+1 threads in %d s: %s\n",
	       atomic_load(&nr_ops), atomic_load(&nr_ioctls), nr, seconds,
	       atomic_load(&failed) ? "FAILED" : "ok");
	return atomic_load(&failed) ? 1 : 0;
}
