/* SPDX-License-Identifier: MIT */
/*
 * The crash test of `mendctl grow` (mfs_grow, fs/core/grow.c): every device
 * write of a grow is recorded through the engine's write tap (as
 * crash_test.c does), then every crash point is rebuilt and checked.
 *
 *  1. mkfs.mendfs ($MKFS_MENDFS) makes a 32 MiB image; mfs_mount() fills it
 *     (directories, files of patterned data, fragmented ones with many
 *     extents, small and large xattrs), and it is unmounted clean.  The
 *     image file is extended to 160 MiB (the data bitmap then needs two
 *     blocks instead of one: it is relocated, and so is the meta bitmap).
 *  2. The device is opened through the engine, the tap attached, mfs_grow()
 *     run: the log of its writes and flushes is the crash model.
 *  3. Prefix mode: for every k, the image is the grown file + the first k
 *     logged writes.  Epoch mode (a volatile write cache): for every flush,
 *     everything before the previous flush + a random subset of the writes
 *     of the epoch, several times.
 *  4. Each crash point must be the old or the new filesystem:
 *     - mfs_super_read() on the grown device succeeds: the new one.  It has
 *       the new size; fsck.mendfs -n ($FSCK_MENDFS) is clean, except between
 *       the two superblock writes (backup at the new end written, primary
 *       still old), where fsck -n must report the stale copy (exit 4) and fsck -p (preen: it fixes
 * only the superblock copy, F0001) must succeed first; then it mounts, every file reads back as
 *       written, and fsck -n is still clean after the unmount.
 *     - else the old one: its superblock at block 0 has the old size; a copy
 *       cut to the old size passes fsck -n and mounts with every file
 *       intact; and grow, run again on a copy of the crash image, completes
 *       and leaves a clean, mountable filesystem of the new size.
 *  The run prints how many points were of each kind; both kinds must occur.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mendfs/blk.h"
#include "mfs.h"
#include "mfs_grow.h"
#include "mfs_ops.h"

#define OLD_SIZE   (32ull << 20)
#define NEW_SIZE   (160ull << 20)
#define NFILES     24
#define EPOCH_RUNS 8

struct lentry {
	int op;
	uint64_t pos, len;
	uint8_t *data;
};

static struct lentry *wlog;
static size_t nlog, caplog;
static char dir[] = "/tmp/mendfs-grow-crash-XXXXXX";
static char img[300], work[300], small[300], again[300];
static const char *fsck_path;
static unsigned long long points, old_points, new_points, torn_points;

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "grow_crash: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (images kept in %s)\n", dir);
	exit(1);
}

static void tap_fn(void *priv, const struct blk_bio *bio)
{
	struct lentry *e;
	size_t off = 0;

	(void)priv;
	if (nlog == caplog) {
		caplog = caplog ? caplog * 2 : 64;
		wlog = realloc(wlog, caplog * sizeof(*wlog));
		if (!wlog)
			die("out of memory");
	}
	e = &wlog[nlog++];
	e->op = bio->op;
	e->pos = blk_bio_pos(bio);
	e->len = bio->op == BLK_OP_FLUSH ? 0 : bio->len;
	e->data = NULL;
	if (bio->op == BLK_OP_WRITE) {
		e->data = malloc(bio->len);
		if (!e->data)
			die("out of memory");
		for (unsigned i = 0; i < bio->nr_segs && off < bio->len; i++) {
			size_t n = bio->iov[i].iov_len;

			if (n > bio->len - off)
				n = bio->len - off;
			memcpy(e->data + off, bio->iov[i].iov_base, n);
			off += n;
		}
	}
}

/* The byte at @off of file @i: a pattern of its own. */
static uint8_t pat(unsigned i, uint64_t off)
{
	return (uint8_t)((off * 131 + i * 7 + off / 4096) ^ (i << 3));
}

static uint64_t file_size(unsigned i)
{
	return (uint64_t)(i % 6) * 37000 + (i % 4 == 0 ? 600000 : 1000);
}

static void fill(void)
{
	struct mfs_mount_opts o = {0};
	struct mfs *fs;
	struct stat st, dst;
	char err[256], name[64];
	uint8_t *buf = malloc(1 << 20), *xv = malloc(20000);
	int ret;

	if (!buf || !xv)
		die("out of memory");
	ret = mfs_mount(img, &o, &fs, err, sizeof(err));
	if (ret)
		die("mount to fill: %s", err);
	if (mfs_mkdir(fs, MFS_ROOT_INO, "d", 0755, 0, 0, &dst))
		die("mkdir");
	for (unsigned i = 0; i < NFILES; i++) {
		struct mfs_new_inode ni = {.mode = S_IFREG | 0644};
		uint64_t sz = file_size(i);

		snprintf(name, sizeof(name), "f%u", i);
		ret = mfs_create(fs, i % 2 ? dst.st_ino : MFS_ROOT_INO, name, &ni, &st);
		if (ret)
			die("create %s: %s", name, strerror(-ret));
		for (uint64_t off = 0; off < sz; off++)
			buf[off] = pat(i, off);
		if (i % 5 == 3) { /* fragmented: every other block first, then the rest */
			for (uint64_t b = 0; b * 4096 < sz; b += 2)
				mfs_write(fs, st.st_ino, buf + b * 4096,
				          sz - b * 4096 < 4096 ? sz - b * 4096 : 4096,
				          (off_t)(b * 4096));
			mfs_sync(fs);
		}
		if (mfs_write(fs, st.st_ino, buf, sz, 0) != (ssize_t)sz)
			die("write %s", name);
		memset(xv, 'a' + i % 26, 20000);
		if (mfs_setxattr(fs, st.st_ino, "user.x", xv, i % 3 == 0 ? 20000 : 40, 0))
			die("setxattr %s", name);
	}
	ret = mfs_unmount(fs);
	if (ret)
		die("unmount after filling: %s", strerror(-ret));
	free(buf);
	free(xv);
}

/* Mount @path, read every file back; the message or NULL. */
static const char *verify_files(const char *path)
{
	static char msg[512];
	struct mfs_mount_opts o = {.cache_blocks = 1024};
	struct mfs *fs;
	struct stat dst, st;
	char name[64];
	uint8_t *buf = malloc(1 << 20), x[20000];
	int ret;

	if (!buf)
		die("out of memory");
	ret = mfs_mount(path, &o, &fs, msg, sizeof(msg));
	if (ret) {
		free(buf);
		return msg;
	}
	msg[0] = '\0';
	if (mfs_lookup(fs, MFS_ROOT_INO, "d", &dst))
		snprintf(msg, sizeof(msg), "directory d lost");
	for (unsigned i = 0; !msg[0] && i < NFILES; i++) {
		uint64_t sz = file_size(i);

		snprintf(name, sizeof(name), "f%u", i);
		if (mfs_lookup(fs, i % 2 ? dst.st_ino : MFS_ROOT_INO, name, &st) ||
		    (uint64_t)st.st_size != sz ||
		    mfs_read(fs, st.st_ino, buf, sz, 0) != (ssize_t)sz) {
			snprintf(msg, sizeof(msg), "file %s lost or short", name);
			break;
		}
		for (uint64_t off = 0; off < sz; off++)
			if (buf[off] != pat(i, off)) {
				snprintf(msg, sizeof(msg), "file %s differs at byte %" PRIu64, name,
				         off);
				break;
			}
		if (!msg[0] &&
		    (mfs_getxattr(fs, st.st_ino, "user.x", x, sizeof(x)) != (i % 3 ? 40 : 20000) ||
		     x[39] != 'a' + i % 26))
			snprintf(msg, sizeof(msg), "xattr of %s lost", name);
	}
	ret = mfs_unmount(fs);
	if (!msg[0] && ret)
		snprintf(msg, sizeof(msg), "unmount: %s", strerror(-ret));
	free(buf);
	return msg[0] ? msg : NULL;
}

static int run_fsck(const char *opt, const char *path)
{
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' %s '%s' >'%s/fsck.out' 2>&1", fsck_path, opt, path, dir);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void copy_file(const char *from, const char *to, uint64_t size)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s' && truncate -s %" PRIu64 " '%s'",
	         from, to, size, to);
	if (system(cmd))
		die("copying %s", from);
}

static int grow_dev(const char *path, bool tap, char *err, size_t errlen)
{
	struct blk_dev_config cfg = {.path = path, .flags = BLK_CFG_EXCL};
	struct mfs_grow_info info;
	struct blk_dev *dev;
	int ret = blk_dev_open(&cfg, &dev, err, errlen);

	if (ret)
		return ret;
	if (tap && (ret = blk_dev_set_write_tap(dev, tap_fn, NULL)))
		die("attaching the tap: %s", strerror(-ret));
	ret = mfs_grow(dev, &info, err, errlen);
	if (tap)
		blk_dev_set_write_tap(dev, NULL, NULL);
	blk_dev_close(dev);
	if (!ret && info.new_blocks != NEW_SIZE / MFS_BLOCK_SIZE)
		die("grew to %" PRIu64 " blocks", info.new_blocks);
	return ret;
}

/* The superblock a mount of the grown @path would use, or -errno. */
static int read_sb(const char *path, struct mfs_superblock *sb)
{
	struct blk_dev_config cfg = {.path = path, .flags = BLK_CFG_READONLY};
	struct blk_dev *dev;
	bool ro, other_bad;
	char err[512];
	int ret = blk_dev_open(&cfg, &dev, err, sizeof(err));

	if (ret)
		die("open %s: %s", path, err);
	ret = mfs_super_read(dev, sb, &ro, &other_bad, err, sizeof(err));
	if (ret) /* the old filesystem: block 0 as it is */
		ret = blk_read(dev, 0, sb, MFS_BLOCK_SIZE, 0) ?: -EINVAL;
	blk_dev_close(dev);
	return ret == -EINVAL ? 1 : ret;
}

static void check_point(const char *what)
{
	struct mfs_superblock *sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	char err[512] = "";
	const char *m;
	int ret, r;

	points++;
	ret = read_sb(work, sb);
	if (ret < 0)
		die("%s: superblock: %s", what, strerror(-ret));
	if (ret == 0) { /* the new filesystem */
		int fd = open(work, O_RDONLY);
		uint64_t primary_blocks = 0;

		new_points++;
		if (sb->nr_blocks != NEW_SIZE / MFS_BLOCK_SIZE)
			die("%s: new superblock with %" PRIu64 " blocks", what, sb->nr_blocks);
		if (fd < 0 || pread(fd, err, 256, 0) != 256)
			die("%s: reading block 0", what);
		memcpy(&primary_blocks, err + offsetof(struct mfs_superblock, nr_blocks), 8);
		close(fd);
		copy_file(work, again, NEW_SIZE);
		if (primary_blocks != sb->nr_blocks) {
			torn_points++;
			r = run_fsck("-n", again);
			if (r != 4)
				die("%s: between the superblock writes, fsck -n exits %d, not 4 "
				    "(the "
				    "stale primary copy unseen)",
				    what, r);
			r = run_fsck("-p", again);
			if (r > 1)
				die("%s: between the superblock writes, fsck -p exits %d", what, r);
		}
		r = run_fsck("-n", again);
		if (r)
			die("%s: new size: fsck -n exits %d (see %s/fsck.out)", what, r, dir);
		m = verify_files(again);
		if (m)
			die("%s: new size: %s", what, m);
		r = run_fsck("-n", again);
		if (r)
			die("%s: new size, after a mount: fsck -n exits %d", what, r);
	} else { /* the old one */
		old_points++;
		if (sb->nr_blocks != OLD_SIZE / MFS_BLOCK_SIZE)
			die("%s: old superblock with %" PRIu64 " blocks", what, sb->nr_blocks);
		copy_file(work, small, OLD_SIZE);
		r = run_fsck("-n", small);
		if (r)
			die("%s: old size: fsck -n exits %d (see %s/fsck.out)", what, r, dir);
		m = verify_files(small);
		if (m)
			die("%s: old size: %s", what, m);
		copy_file(work, again, NEW_SIZE);
		ret = grow_dev(again, false, err, sizeof(err));
		if (ret)
			die("%s: grow again: %s", what, err);
		r = run_fsck("-n", again);
		if (r)
			die("%s: grown again: fsck -n exits %d", what, r);
		m = verify_files(again);
		if (m)
			die("%s: grown again: %s", what, m);
	}
	free(sb);
}

static void apply(int fd, const struct lentry *e)
{
	if (e->op == BLK_OP_FLUSH)
		return;
	if (e->op == BLK_OP_WRITE_ZEROES) {
		uint8_t *z = calloc(1, e->len);

		if (!z || pwrite(fd, z, e->len, (off_t)e->pos) != (ssize_t)e->len)
			die("applying a write");
		free(z);
		return;
	}
	if (pwrite(fd, e->data, e->len, (off_t)e->pos) != (ssize_t)e->len)
		die("applying a write");
}

int main(void)
{
	char cmd[1024], what[128], err[512];
	const char *mkfs = getenv("MKFS_MENDFS");
	size_t flush_prev = 0;
	int fd, ret;

	fsck_path = getenv("FSCK_MENDFS");
	if (!mkfs || !fsck_path)
		die("MKFS_MENDFS and FSCK_MENDFS must name the programs");
	if (!mkdtemp(dir))
		die("mkdtemp: %s", strerror(errno));
	snprintf(img, sizeof(img), "%s/base.img", dir);
	snprintf(work, sizeof(work), "%s/work.img", dir);
	snprintf(small, sizeof(small), "%s/small.img", dir);
	snprintf(again, sizeof(again), "%s/again.img", dir);
	snprintf(cmd, sizeof(cmd), "'%s' -q '%s' %llu", mkfs, img, OLD_SIZE);
	if (system(cmd))
		die("mkfs failed");
	fill();
	if (truncate(img, NEW_SIZE))
		die("truncate: %s", strerror(errno));

	/* the log: grow a copy with the tap */
	copy_file(img, work, NEW_SIZE);
	ret = grow_dev(work, true, err, sizeof(err));
	if (ret)
		die("grow: %s", err);
	printf("grow: %zu log entries\n", nlog);

	/* prefix mode */
	copy_file(img, work, NEW_SIZE);
	fd = open(work, O_WRONLY);
	if (fd < 0)
		die("open: %s", strerror(errno));
	for (size_t k = 0; k <= nlog; k++) {
		if (k && wlog[k - 1].op == BLK_OP_FLUSH)
			continue; /* same image as the point before */
		snprintf(what, sizeof(what), "prefix %zu/%zu", k, nlog);
		check_point(what);
		if (k < nlog)
			apply(fd, &wlog[k]);
	}
	close(fd);

	/* epoch mode */
	srand(18);
	for (size_t f = 0; f < nlog; f++) {
		if (wlog[f].op != BLK_OP_FLUSH)
			continue;
		for (int run = 0; run < EPOCH_RUNS; run++) {
			copy_file(img, work, NEW_SIZE);
			fd = open(work, O_WRONLY);
			if (fd < 0)
				die("open: %s", strerror(errno));
			for (size_t i = 0; i < f; i++)
				if (i < flush_prev || rand() % 2)
					apply(fd, &wlog[i]);
			close(fd);
			snprintf(what, sizeof(what), "epoch ending at flush %zu, run %d", f, run);
			check_point(what);
		}
		flush_prev = f;
	}
	printf("grow: %llu crash points checked: %llu old, %llu new (%llu between the superblock "
	       "writes)\n",
	       points, old_points, new_points, torn_points);
	if (!old_points || !new_points || !torn_points)
		die("expected both the old and the new filesystem among the points");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? 1 : 0;
}
