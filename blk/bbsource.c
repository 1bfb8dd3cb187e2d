/* SPDX-License-Identifier: MIT */
/*
 * bbsource.c: real poison sources, loaded into the table when a device opens.
 *
 *   devdax character device, regular file  -> libpmem2 badblocks (bytes, rounded
 *                                             outward to sectors); a source that
 *                                             cannot have badblocks has none
 *   block device                           -> /sys/dev/block/MAJ:MIN badblocks
 *                                             (a partition: the disk's list, clipped
 *                                             and shifted by the partition start);
 *                                             pmemN without that file -> libndctl
 *
 * A missing source is not an error: most devices have none.
 *
 * blk_dev_refresh_badblocks() (poison.c) asks them again on an open device.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <libpmem2.h>
#include <ndctl/libndctl.h>

#include "blk_internal.h"

/*
 * Clip the disk range [*sector, *sector + *nr) to the partition [start,
 * start + size) (size 0: the whole disk) and make it partition relative.
 * Returns false when nothing is left.
 */
static bool bb_clip(uint64_t *sector, uint64_t *nr, uint64_t start, uint64_t size)
{
	uint64_t s = *sector, e = *sector + *nr, pend = size ? start + size : UINT64_MAX;

	if (e < s)
		e = UINT64_MAX;
	if (pend < start)
		pend = UINT64_MAX;
	if (s < start)
		s = start;
	if (e > pend)
		e = pend;
	if (s >= e)
		return false;
	*sector = s - start;
	*nr = e - s;
	return true;
}

static int bb_add_clipped(struct blk_badblocks *bb, uint64_t sector, uint64_t nr, uint64_t start,
                          uint64_t size)
{
	if (!bb_clip(&sector, &nr, start, size))
		return 0;
	return blk_bb_add(bb, sector, nr);
}

/* libpmem2 answers that say "this source cannot have badblocks", not "it failed". */
static bool bb_pmem2_unsupported(int ret)
{
	switch (ret) {
	case PMEM2_E_NOSUPP:
	case PMEM2_E_INVALID_FILE_TYPE: /* a character device that is not devdax */
	case PMEM2_E_SOURCE_TYPE_NOT_SUPPORTED:
	case PMEM2_E_DAX_REGION_NOT_FOUND: /* devdax not backed by an nvdimm region */
	case -EOPNOTSUPP:                  /* no extent map (FIEMAP) on this file system */
	case -ENOTTY:
		return true;
	default:
		return false;
	}
}

/* libpmem2 returns -errno or its own codes (below PMEM2_E_UNKNOWN). */
static int bb_pmem2_errno(int ret)
{
	if (ret > PMEM2_E_UNKNOWN)
		return ret;
	switch (ret) {
	case PMEM2_E_NO_ACCESS:
		return -EACCES;
	case PMEM2_E_INVALID_FILE_HANDLE:
	case PMEM2_E_FILE_DESCRIPTOR_NOT_SET:
		return -EBADF;
	default:
		return -EIO;
	}
}

static int bb_load_pmem2(struct blk_badblocks *bb, int fd, const char *path, char *err,
                         size_t errlen)
{
	struct pmem2_badblock_context *bbctx;
	struct pmem2_source *src;
	struct pmem2_badblock b;
	int ret;

	ret = pmem2_source_from_fd(&src, fd);
	if (ret) {
		if (bb_pmem2_unsupported(ret))
			return 0;
		blk_err(err, errlen, "%s: libpmem2 source: %s", path, pmem2_errormsg());
		return bb_pmem2_errno(ret);
	}
	ret = pmem2_badblock_context_new(&bbctx, src);
	if (ret) {
		if (bb_pmem2_unsupported(ret)) {
			ret = 0;
			goto out_source;
		}
		blk_err(err, errlen, "%s: libpmem2 badblocks: %s", path, pmem2_errormsg());
		ret = bb_pmem2_errno(ret);
		goto out_source;
	}

	while ((ret = pmem2_badblock_next(bbctx, &b)) == 0) {
		/* bytes from the start of the source; a partly bad sector is a bad sector */
		uint64_t first = b.offset >> BLK_SECTOR_SHIFT;
		uint64_t end = (uint64_t)b.offset + b.length;

		if (!b.length)
			continue;
		end = end < b.offset ? UINT64_MAX >> BLK_SECTOR_SHIFT
		                     : (end >> BLK_SECTOR_SHIFT) + !!(end & (BLK_SECTOR_SIZE - 1));
		ret = blk_bb_add(bb, first, end - first);
		if (unlikely(ret)) {
			blk_err(err, errlen, "%s: poison table: %s", path, strerror(-ret));
			goto out_context;
		}
	}
	if (ret == PMEM2_E_NO_BAD_BLOCK_FOUND || ret == PMEM2_E_NOSUPP) {
		ret = 0; /* the end of the list */
	} else {
		blk_err(err, errlen, "%s: libpmem2 badblocks: %s", path, pmem2_errormsg());
		ret = bb_pmem2_errno(ret);
	}
out_context:
	pmem2_badblock_context_delete(&bbctx);
out_source:
	pmem2_source_delete(&src);
	return ret;
}

static void bb_ndctl_quiet(struct ndctl_ctx *ctx, int priority, const char *file, int line,
                           const char *fn, const char *format, va_list args)
{
	/* libndctl logs errors to stderr by default; a missing source is not one */
	(void)ctx;
	(void)priority;
	(void)file;
	(void)line;
	(void)fn;
	(void)format;
	(void)args;
}

/* The block device of a namespace: its own, or that of the pfn (fsdax) claiming it. */
static bool bb_ndns_is(struct ndctl_namespace *ndns, const char *name)
{
	struct ndctl_pfn *pfn = ndctl_namespace_get_pfn(ndns);
	const char *bdev;

	bdev = pfn ? ndctl_pfn_get_block_device(pfn) : ndctl_namespace_get_block_device(ndns);
	return bdev && strcmp(bdev, name) == 0;
}

/*
 * Poison of the namespace behind a pmem block device: the namespace's list
 * (sectors from the block device start) and the region's (sectors from the
 * region start) over the part the namespace's data occupies.
 */
static int bb_ndctl_namespace(struct blk_badblocks *bb, struct ndctl_region *region,
                              struct ndctl_namespace *ndns, uint64_t start, uint64_t size)
{
	struct ndctl_pfn *pfn = ndctl_namespace_get_pfn(ndns);
	unsigned long long ns_res, ns_size, rg_res;
	uint64_t ns_first, ns_nr, s, n;
	struct badblock *b;
	int ret;

	ndctl_namespace_badblock_foreach(ndns, b)
	{
		ret = bb_add_clipped(bb, b->offset, b->len, start, size);
		if (unlikely(ret))
			return ret;
	}

	ns_res = pfn ? ndctl_pfn_get_resource(pfn) : ndctl_namespace_get_resource(ndns);
	ns_size = pfn ? ndctl_pfn_get_size(pfn) : ndctl_namespace_get_size(ndns);
	rg_res = ndctl_region_get_resource(region);
	if (ns_res == ULLONG_MAX || ns_size == ULLONG_MAX || rg_res == ULLONG_MAX ||
	    ns_res < rg_res)
		return 0; /* cannot place the namespace in its region (not privileged) */
	ns_first = (ns_res - rg_res) >> BLK_SECTOR_SHIFT;
	ns_nr = ns_size >> BLK_SECTOR_SHIFT;

	ndctl_region_badblock_foreach(region, b)
	{
		s = b->offset;
		n = b->len;
		if (!bb_clip(&s, &n, ns_first, ns_nr))
			continue;
		ret = bb_add_clipped(bb, s, n, start, size);
		if (unlikely(ret))
			return ret;
	}
	return 0;
}

/* An fsdax block device (pmemN) without a sysfs badblocks file: ask libndctl. */
static int bb_load_ndctl(struct blk_badblocks *bb, const char *name, uint64_t start, uint64_t size,
                         char *err, size_t errlen)
{
	struct ndctl_namespace *ndns;
	struct ndctl_region *region;
	struct ndctl_bus *bus;
	struct ndctl_ctx *ctx;
	int ret = 0;

	if (ndctl_new(&ctx) < 0)
		return 0; /* no nvdimm support here: no source */
	ndctl_set_log_fn(ctx, bb_ndctl_quiet);
	ndctl_bus_foreach(ctx, bus)
	{
		ndctl_region_foreach(bus, region)
		{
			ndctl_namespace_foreach(region, ndns)
			{
				if (!bb_ndns_is(ndns, name))
					continue;
				ret = bb_ndctl_namespace(bb, region, ndns, start, size);
				if (unlikely(ret))
					blk_err(err, errlen, "%s: poison table: %s", name,
					        strerror(-ret));
				goto out;
			}
		}
	}
out:
	ndctl_unref(ctx);
	return ret;
}

/* Read a sysfs attribute holding one decimal number. */
static int bb_sysfs_u64(const char *dir, const char *attr, uint64_t *val)
{
	char path[PATH_MAX], buf[32], *end;
	ssize_t n;
	int fd;

	if (unlikely(snprintf(path, sizeof(path), "%s/%s", dir, attr) >= (int)sizeof(path)))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (unlikely(n < 0))
		return (int)n;
	buf[n] = '\0';
	if (unlikely(!isdigit((unsigned char)buf[0])))
		return -EINVAL;
	errno = 0;
	*val = strtoull(buf, &end, 10);
	if (unlikely(errno || (*end && *end != '\n')))
		return -EINVAL;
	return 0;
}

int blk_bb_load_sysfs(struct blk_badblocks *bb, const char *devdir, char *err, size_t errlen)
{
	char disk[PATH_MAX], file[PATH_MAX], *parent, *name;
	struct blk_badblocks tmp;
	struct blk_range *ranges;
	uint64_t start = 0, size = 0;
	struct stat st;
	int ret, i, n;

	if (unlikely(strlen(devdir) >= sizeof(disk)))
		return -ENAMETOOLONG;
	strcpy(disk, devdir);
	if (unlikely(snprintf(file, sizeof(file), "%s/partition", devdir) >= (int)sizeof(file)))
		return -ENAMETOOLONG;
	if (access(file, F_OK) == 0) {
		/* a partition: poison is listed by its disk, in disk sectors */
		ret = bb_sysfs_u64(devdir, "start", &start);
		if (!ret)
			ret = bb_sysfs_u64(devdir, "size", &size);
		if (unlikely(ret)) {
			blk_err(err, errlen, "%s: partition start/size: %s", devdir,
			        strerror(-ret));
			return ret;
		}
		if (!size)
			return 0; /* an empty partition holds no poison */
		parent = dirname(disk);
		memmove(disk, parent, strlen(parent) + 1);
	}
	if (unlikely(snprintf(file, sizeof(file), "%s/badblocks", disk) >= (int)sizeof(file)))
		return -ENAMETOOLONG;

	if (stat(file, &st) < 0) {
		if (unlikely(errno != ENOENT)) {
			ret = -errno;
			blk_err(err, errlen, "%s: %s", file, strerror(-ret));
			return ret;
		}
		name = basename(disk);
		if (strncmp(name, "pmem", 4) == 0 && isdigit((unsigned char)name[4]))
			return bb_load_ndctl(bb, name, start, size, err, errlen);
		return 0; /* this driver keeps no badblocks list */
	}

	blk_bb_init(&tmp);
	ret = blk_bb_file_load(&tmp, file, 0, err, errlen);
	if (unlikely(ret))
		goto out;
	n = blk_bb_snapshot(&tmp, &ranges);
	if (unlikely(n < 0)) {
		ret = n;
		blk_err(err, errlen, "%s: %s", file, strerror(-ret));
		goto out;
	}
	for (i = 0; i < n && !ret; i++)
		ret = bb_add_clipped(bb, ranges[i].sector, ranges[i].nr, start, size);
	if (unlikely(ret))
		blk_err(err, errlen, "%s: poison table: %s", file, strerror(-ret));
	free(ranges);
out:
	blk_bb_destroy(&tmp);
	return ret;
}

int blk_bb_load_sources(struct blk_badblocks *bb, int fd, const char *path, char *err,
                        size_t errlen)
{
	char link[64], devdir[PATH_MAX];
	struct stat st;
	int ret;

	if (unlikely(fstat(fd, &st) < 0)) {
		ret = -errno;
		blk_err(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (S_ISCHR(st.st_mode) || S_ISREG(st.st_mode))
		return bb_load_pmem2(bb, fd, path, err, errlen);
	if (!S_ISBLK(st.st_mode))
		return 0;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (!realpath(link, devdir)) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0; /* no sysfs (a container): no source */
		ret = -errno;
		blk_err(err, errlen, "%s: %s: %s", path, link, strerror(-ret));
		return ret;
	}
	return blk_bb_load_sysfs(bb, devdir, err, errlen);
}
