/* SPDX-License-Identifier: MIT */
/*
 * mendctl: command line of the mendfs recovery interface (docs/man/mendctl.8,
 * ARCHITECTURE.md §5).  badranges, recover, zeroinit, bmap, inject and stats, each
 * with --json in the shapes of the contract.  Exit 0 on success, 1 on error,
 * 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "mendfs/ioctl.h"
#include "mendfs/recovery.h"

#define COPY_CHUNK (1u << 20)
/* zero-filled ranges in a chunk: at most every other sector */
#define Z_MAX (COPY_CHUNK / 512 / 2 + 1)

static bool json;

static int usage(void)
{
	fprintf(stderr, "usage: mendctl [--json] badranges FILE\n"
	                "       mendctl [--json] recover FILE OUT\n"
	                "       mendctl [--json] zeroinit FILE OFF LEN\n"
	                "       mendctl [--json] bmap FILE\n"
	                "       mendctl [--json] inject MOUNTPOINT SECTOR COUNT\n"
	                "       mendctl [--json] stats MOUNTPOINT\n");
	return 2;
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "mendctl: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return false;
	*v = strtoull(s, &end, 0);
	return !errno && !*end && *v <= INT64_MAX;
}

static int cmd_badranges(const char *path)
{
	struct mendfs_range r[256];
	uint64_t start = 0;
	bool first = true;
	unsigned n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail("open", path);
	if (json)
		printf("{\"ranges\":[");
	do {
		if (mendfs_badranges(fd, (off_t)start, r, 256, &n)) {
			if (json)
				printf("]}\n");
			close(fd);
			return fail("badranges", path);
		}
		for (unsigned i = 0; i < n; i++) {
			if (json)
				printf("%s{\"offset\":%" PRIu64 ",\"length\":%" PRIu64 "}",
				       first ? "" : ",", r[i].offset, r[i].length);
			else
				printf("%" PRIu64 " %" PRIu64 "\n", r[i].offset, r[i].length);
			first = false;
		}
		if (n)
			start = r[n - 1].offset + r[n - 1].length;
	} while (n == 256);
	if (json)
		printf("]}\n");
	close(fd);
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int cmd_recover(const char *path, const char *outpath)
{
	struct mendfs_range *all = NULL, *z = NULL;
	size_t nall = 0, cap = 0;
	uint64_t off = 0;
	uint8_t *buf;
	int in, out, ret = 1;

	in = open(path, O_RDONLY);
	if (in < 0)
		return fail("open", path);
	out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0) {
		close(in);
		return fail("open", outpath);
	}
	buf = malloc(COPY_CHUNK);
	z = malloc(Z_MAX * sizeof(*z));
	if (!buf || !z) {
		fail("recover", path);
		goto done;
	}
	for (;;) {
		unsigned n;
		ssize_t got = mendfs_recover(in, buf, COPY_CHUNK, (off_t)off, z, Z_MAX, &n);

		if (got < 0) {
			fail("recovery read", path);
			goto done;
		}
		for (unsigned i = 0; i < n && i < Z_MAX; i++) {
			if (nall && all[nall - 1].offset + all[nall - 1].length == z[i].offset) {
				all[nall - 1].length += z[i].length;
				continue;
			}
			if (nall == cap) {
				struct mendfs_range *p;

				cap = cap ? cap * 2 : 64;
				p = realloc(all, cap * sizeof(*all));
				if (!p) {
					fail("recover", path);
					goto done;
				}
				all = p;
			}
			all[nall++] = z[i];
		}
		if (write_all(out, buf, (size_t)got)) {
			fail("write", outpath);
			goto done;
		}
		off += (uint64_t)got;
		if ((size_t)got < COPY_CHUNK)
			break;
	}
	if (fsync(out)) {
		fail("fsync", outpath);
		goto done;
	}
	if (json) {
		printf("{\"bytes\":%" PRIu64 ",\"zeroed\":[", off);
		for (size_t i = 0; i < nall; i++)
			printf("%s{\"offset\":%" PRIu64 ",\"length\":%" PRIu64 "}", i ? "," : "",
			       all[i].offset, all[i].length);
		printf("]}\n");
	} else {
		printf("recovered %" PRIu64 " bytes, %zu zero-filled range%s\n", off, nall,
		       nall == 1 ? "" : "s");
		for (size_t i = 0; i < nall; i++)
			printf("zeroed %" PRIu64 " %" PRIu64 "\n", all[i].offset, all[i].length);
	}
	ret = 0;
done:
	if (close(out) && !ret)
		ret = fail("close", outpath);
	close(in);
	free(buf);
	free(z);
	free(all);
	return ret;
}

static int cmd_zeroinit(const char *path, const char *offs, const char *lens)
{
	uint64_t off, len;
	int fd;

	if (!parse_u64(offs, &off) || !parse_u64(lens, &len)) {
		fprintf(stderr, "mendctl: zeroinit: OFF and LEN are byte counts\n");
		return 2;
	}
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return fail("open", path);
	if (mendfs_zeroinit(fd, (off_t)off, (off_t)len)) {
		close(fd);
		return fail("zeroinit", path);
	}
	close(fd);
	if (json)
		printf("{\"offset\":%" PRIu64 ",\"length\":%" PRIu64 "}\n", off, len);
	return 0;
}

static int cmd_bmap(const char *path)
{
	struct mendfs_ioc_bmap *a = malloc(sizeof(*a));
	uint64_t start = 0;
	bool first = true;
	int fd, ret = 1;

	if (!a)
		return fail("bmap", path);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		free(a);
		return fail("open", path);
	}
	if (json)
		printf("{\"extents\":[");
	for (;;) {
		memset(a, 0, sizeof(*a));
		a->version = MENDFS_IOC_VERSION;
		a->start = start;
		if (ioctl(fd, MENDFS_IOC_BMAP, a) < 0) {
			if (errno == ENOTTY)
				errno = EOPNOTSUPP;
			fail("bmap", path);
			break;
		}
		for (unsigned i = 0; i < a->nr && i < MENDFS_BMAP_MAX; i++) {
			const struct mendfs_ioc_extent *x = &a->extents[i];
			bool unw = x->flags & MENDFS_EXTENT_UNWRITTEN;

			if (json)
				printf("%s{\"offset\":%" PRIu64 ",\"length\":%" PRIu64
				       ",\"sector\":%" PRIu64 ",\"unwritten\":%s}",
				       first ? "" : ",", x->offset, x->length, x->sector,
				       unw ? "true" : "false");
			else
				printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "%s\n", x->offset,
				       x->length, x->sector, unw ? " unwritten" : "");
			first = false;
		}
		if (a->last || a->next <= start) {
			ret = 0;
			break;
		}
		start = a->next;
	}
	if (json)
		printf("]}\n");
	close(fd);
	free(a);
	return ret;
}

static int cmd_inject(const char *path, const char *secs, const char *counts)
{
	struct mendfs_ioc_inject a;
	uint64_t sector, count;
	int fd;

	if (!parse_u64(secs, &sector) || !parse_u64(counts, &count) || !count) {
		fprintf(stderr,
		        "mendctl: inject: SECTOR and COUNT are sector numbers, COUNT > 0\n");
		return 2;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail("open", path);
	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	a.sector = sector;
	a.count = count;
	if (ioctl(fd, MENDFS_IOC_INJECT, &a) < 0) {
		int err = errno;

		close(fd);
		errno = err == ENOTTY ? EOPNOTSUPP : err;
		fail("inject", path);
		if (err == EPERM)
			fprintf(stderr,
			        "mendctl: inject needs root and a mount with -o poison_inject\n");
		return 1;
	}
	close(fd);
	if (json)
		printf("{\"sector\":%" PRIu64 ",\"count\":%" PRIu64 "}\n", sector, count);
	return 0;
}

static int cmd_stats(const char *path)
{
	struct mendfs_ioc_stats a;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail("open", path);
	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	if (ioctl(fd, MENDFS_IOC_STATS, &a) < 0) {
		if (errno == ENOTTY)
			errno = EOPNOTSUPP;
		close(fd);
		return fail("stats", path);
	}
	close(fd);
	{
		const struct {
			const char *name;
			uint64_t v;
		} c[] = {
		        {"reads", a.reads},
		        {"writes", a.writes},
		        {"write_zeroes", a.write_zeroes},
		        {"read_bytes", a.read_bytes},
		        {"write_bytes", a.write_bytes},
		        {"requests", a.requests},
		        {"errors", a.errors},
		        {"poison_hits", a.poison_hits},
		        {"media_errors", a.media_errors},
		        {"recovered_sectors", a.recovered_sectors},
		        {"poison_cleared", a.poison_cleared},
		        {"faults", a.faults},
		        {"poison_ranges", a.poison_ranges},
		        {"meta_reads", a.meta_reads},
		        {"meta_writes", a.meta_writes},
		        {"meta_repairs", a.meta_repairs},
		        {"meta_lost", a.meta_lost},
		        {"commits", a.commits},
		        {"journal_blocks", a.journal_blocks},
		        {"checkpoints", a.checkpoints},
		};
		size_t n = sizeof(c) / sizeof(c[0]);

		if (json)
			putchar('{');
		for (size_t i = 0; i < n; i++) {
			if (json)
				printf("%s\"%s\":%" PRIu64, i ? "," : "", c[i].name, c[i].v);
			else
				printf("%-18s %" PRIu64 "\n", c[i].name, c[i].v);
		}
		if (json)
			printf("}\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *arg[4];
	int n = 0, ret;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage();
			return 0;
		} else if (n < 4)
			arg[n++] = argv[i];
		else
			return usage();
	}
	if (n < 1)
		return usage();
	if (!strcmp(arg[0], "badranges") && n == 2)
		ret = cmd_badranges(arg[1]);
	else if (!strcmp(arg[0], "recover") && n == 3)
		ret = cmd_recover(arg[1], arg[2]);
	else if (!strcmp(arg[0], "zeroinit") && n == 4)
		ret = cmd_zeroinit(arg[1], arg[2], arg[3]);
	else if (!strcmp(arg[0], "bmap") && n == 2)
		ret = cmd_bmap(arg[1]);
	else if (!strcmp(arg[0], "inject") && n == 4)
		ret = cmd_inject(arg[1], arg[2], arg[3]);
	else if (!strcmp(arg[0], "stats") && n == 2)
		ret = cmd_stats(arg[1]);
	else
		return usage();
	if (fflush(stdout))
		return 1;
	return ret;
}
