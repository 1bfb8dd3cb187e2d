/* SPDX-License-Identifier: MIT */
/*
 * fsx: a data-integrity stress run in the manner of fsx.  Seeded random
 * operations (write, read, truncate, fallocate in every mode, punch, rename,
 * link, unlink, mkdir, rmdir, symlink, chmod, xattrs, fsync, remove a tree;
 * writes and truncates through files kept open while their names change or
 * go; offsets now and then around and beyond 4 GiB) are applied to the same
 * relative paths under MNT (a mendfs mount) and under MIRROR (a directory on
 * tmpfs).  Each operation must give the same result on both sides (same data
 * for reads, same errno for failures); the full trees (names, types, sizes,
 * modes, link counts, contents, user xattrs, symlink targets) are compared every few
 * hundred operations, after each remount (the -r command, run with no file
 * open on the mount) and at the end.  On a mismatch the seed, the failing
 * operation and the last operations are printed and the exit status is 1.
 *
 *   fsx [-d SECONDS] [-s SEED] [-r REMOUNT_CMD] MNT MIRROR
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define NNAMES    5
#define MAXSIZE   (2 << 20) /* usual file extent */
#define BIGSIZE   (6 << 20) /* now and then */
#define HISTORY   32
#define CMP_EVERY 400

static const char *names[NNAMES] = {"a", "b", "c", "d", "e"};
static char mnt[4096], mir[4096];
static uint64_t rng_state;
static long opno;
static char history[HISTORY][160];
static unsigned long seed;
static char *buf1, *buf2;
static int nerrs; /* operations that failed on both sides (same errno) */

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static uint64_t rndn(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(history[opno % HISTORY], sizeof(history[0]), fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	long i;

	printf("FSX MISMATCH (seed %lu, op %ld): ", seed, opno);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\nlast operations:\n");
	for (i = opno - HISTORY + 1; i <= opno; i++)
		if (i >= 0)
			printf("  %6ld %s\n", i, history[i % HISTORY]);
	printf("reproduce with: fsx -s %lu ...\n", seed);
	fflush(stdout);
	exit(1);
}

static void pick_path(char *p, size_t n)
{
	if (rndn(3) == 0)
		snprintf(p, n, "%s", names[rndn(NNAMES)]);
	else
		snprintf(p, n, "%s/%s", names[rndn(NNAMES)], names[rndn(NNAMES)]);
}

static void both(const char *rel, char *a, char *b)
{
	snprintf(a, 8192, "%s/%s", mnt, rel);
	snprintf(b, 8192, "%s/%s", mir, rel);
}

/* result of a call as 0 or -errno */
#define RES(x) ((x) < 0 ? -errno : 0)

static void same(const char *what, int r1, int r2)
{
	if (r1 == r2 && r1)
		nerrs++;
	if (r1 != r2)
		die("%s: mendfs %d (%s), mirror %d (%s)", what, r1, r1 ? strerror(-r1) : "ok", r2,
		    r2 ? strerror(-r2) : "ok");
}

/*
 * Open @a (mendfs) and @b (the mirror) with @flags: the same result on both,
 * or die.  Returns false when both opens failed.
 */
static bool open_both(const char *what, const char *a, const char *b, int flags, int *f1, int *f2)
{
	int r1;

	*f1 = open(a, flags, 0644);
	r1 = RES(*f1);
	*f2 = open(b, flags, 0644);
	same(what, r1, RES(*f2));
	return *f1 >= 0;
}

static void fill(char *b, size_t len)
{
	size_t i;
	uint64_t v = rnd();

	for (i = 0; i < len; i++) {
		if (i % 8 == 0)
			v = rnd() ^ (uint64_t)opno;
		b[i] = (char)(v >> (8 * (i % 8)));
	}
}

static off_t pick_off(void)
{
	if (rndn(300) == 0) /* around and beyond 4 GiB */
		return ((off_t)4 << 30) - (1 << 20) + (off_t)rndn(4 << 20);
	return (off_t)(rndn(20) == 0 ? rndn(BIGSIZE) : rndn(MAXSIZE));
}

static size_t pick_len(void)
{
	switch (rndn(4)) {
	case 0:
		return 1 + rndn(100);
	case 1:
		return 4096 * (1 + rndn(16));
	default:
		return 1 + rndn(256 << 10);
	}
}

/* ---- tree comparison ---- */

/* where the next data of @fd starts at or after @off (@size if none) */
static off_t next_data(int fd, off_t off, off_t size, int whence, const char *p)
{
	off_t r = lseek(fd, off, whence);

	if (r < 0 && errno == ENXIO)
		return size;
	if (r < 0)
		die("lseek %s %lld %d: %s", p, (long long)off, whence, strerror(errno));
	return r;
}

/*
 * Compare the union of both sides' data regions (SEEK_DATA/SEEK_HOLE): where
 * both report a hole, both read zeros; a hole reported wrongly by mendfs is
 * caught where the mirror has data.
 */
static void cmp_file(const char *a, const char *b, off_t size)
{
	int f1 = open(a, O_RDONLY), f2 = open(b, O_RDONLY);
	off_t off = 0, end = 0;

	if (f1 < 0 || f2 < 0)
		die("compare: open %s: %s", f1 < 0 ? a : b, strerror(errno));
	while (off < size) {
		ssize_t n1, n2;
		size_t want;

		if (off >= end) {
			off_t d1 = next_data(f1, off, size, SEEK_DATA, a),
			      d2 = next_data(f2, off, size, SEEK_DATA, b), h1, h2;

			off = d1 < d2 ? d1 : d2;
			if (off >= size)
				break;
			h1 = next_data(f1, off, size, SEEK_HOLE, a);
			h2 = next_data(f2, off, size, SEEK_HOLE, b);
			end = h1 > h2 ? h1 : h2;
		}
		want = end - off > BIGSIZE ? BIGSIZE : (size_t)(end - off);
		n1 = pread(f1, buf1, want, off);
		n2 = pread(f2, buf2, want, off);

		if (n1 != n2 || n1 <= 0)
			die("compare %s: read at %lld: %zd vs %zd", a, (long long)off, n1, n2);
		if (memcmp(buf1, buf2, (size_t)n1)) {
			ssize_t i = 0;

			while (buf1[i] == buf2[i])
				i++;
			die("compare %s: content differs at byte %lld (0x%02x, want 0x%02x)", a,
			    (long long)(off + i), (unsigned char)buf1[i], (unsigned char)buf2[i]);
		}
		off += n1;
	}
	close(f1);
	close(f2);
}

static int cmpstr(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* sorted names of a directory (without . and ..) */
static int list_dir(const char *p, char ***out)
{
	DIR *d = opendir(p);
	struct dirent *de;
	char **v = NULL;
	int n = 0;

	if (!d)
		die("opendir %s: %s", p, strerror(errno));
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		v = realloc(v, sizeof(*v) * (size_t)(n + 1));
		v[n++] = strdup(de->d_name);
	}
	closedir(d);
	if (n)
		qsort(v, (size_t)n, sizeof(*v), cmpstr);
	*out = v;
	return n;
}

static long ncompared;
static void cmp_xattrs(const char *rel, const char *a, const char *b);

static void cmp_tree(const char *rel)
{
	char a[8192], b[8192], sub[4096];
	char **l1, **l2;
	int n1, n2, i;

	both(rel, a, b);
	n1 = list_dir(a, &l1);
	n2 = list_dir(b, &l2);
	for (i = 0; i < n1 || i < n2; i++) {
		if (i >= n1 || i >= n2 || strcmp(l1[i], l2[i]))
			die("compare %s: entries differ: mendfs '%s', mirror '%s'", rel,
			    i < n1 ? l1[i] : "(none)", i < n2 ? l2[i] : "(none)");
	}
	for (i = 0; i < n1; i++) {
		struct stat s1, s2;

		snprintf(sub, sizeof(sub), "%s/%s", rel, l1[i]);
		both(sub, a, b);
		if (lstat(a, &s1) || lstat(b, &s2))
			die("compare: lstat %s: %s", sub, strerror(errno));
		if ((s1.st_mode & S_IFMT) != (s2.st_mode & S_IFMT) ||
		    (s1.st_mode & 07777) != (s2.st_mode & 07777))
			die("compare %s: mode %o vs %o", sub, s1.st_mode, s2.st_mode);
		if (!S_ISDIR(s1.st_mode) && s1.st_nlink != s2.st_nlink)
			die("compare %s: nlink %lu vs %lu", sub, (unsigned long)s1.st_nlink,
			    (unsigned long)s2.st_nlink);
		if (S_ISDIR(s1.st_mode) && s1.st_nlink != s2.st_nlink)
			die("compare %s: dir nlink %lu vs %lu", sub, (unsigned long)s1.st_nlink,
			    (unsigned long)s2.st_nlink);
		if (!S_ISLNK(s1.st_mode))
			cmp_xattrs(sub, a, b);
		if (S_ISREG(s1.st_mode)) {
			if (s1.st_size != s2.st_size)
				die("compare %s: size %lld vs %lld", sub, (long long)s1.st_size,
				    (long long)s2.st_size);
			cmp_file(a, b, s1.st_size);
			ncompared++;
		} else if (S_ISDIR(s1.st_mode)) {
			cmp_tree(sub);
		} else if (S_ISLNK(s1.st_mode)) {
			char t1[4096], t2[4096];
			ssize_t r1 = readlink(a, t1, sizeof(t1)), r2 = readlink(b, t2, sizeof(t2));

			if (r1 != r2 || r1 < 0 || memcmp(t1, t2, (size_t)r1))
				die("compare %s: symlink targets differ", sub);
		}
		free(l1[i]);
	}
	for (i = 0; i < n2; i++)
		free(l2[i]);
	free(l1);
	free(l2);
}

/* ---- operations ---- */

static int rmtree_one(const char *p)
{
	struct stat st;
	char **l, sub[8192];
	int n, i;

	if (lstat(p, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return RES(unlink(p));
	n = list_dir(p, &l);
	for (i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s/%s", p, l[i]);
		rmtree_one(sub);
		free(l[i]);
	}
	free(l);
	return RES(rmdir(p));
}

static void op_write(const char *rel)
{
	char a[8192], b[8192];
	off_t off = pick_off();
	size_t len = pick_len();
	int f1, f2;
	ssize_t n1, n2;

	both(rel, a, b);
	note("write %s off %lld len %zu", rel, (long long)off, len);
	if (!open_both("open for write", a, b, O_WRONLY | O_CREAT, &f1, &f2))
		return;
	fill(buf1, len);
	n1 = pwrite(f1, buf1, len, off);
	n2 = pwrite(f2, buf1, len, off);
	if (n1 != n2)
		die("write %s: %zd vs %zd (%s)", rel, n1, n2, strerror(errno));
	if (rndn(10) == 0) {
		note("write+fsync %s off %lld len %zu", rel, (long long)off, len);
		if (fsync(f1))
			die("fsync %s: %s", rel, strerror(errno));
	}
	close(f1);
	close(f2);
}

static void op_read(const char *rel)
{
	char a[8192], b[8192];
	off_t off = pick_off();
	size_t len = pick_len();
	int f1, f2, r1, r2;
	ssize_t n1, n2;

	both(rel, a, b);
	note("read %s off %lld len %zu", rel, (long long)off, len);
	if (!open_both("open for read", a, b, O_RDONLY, &f1, &f2))
		return;
	n1 = pread(f1, buf1, len, off);
	r1 = RES(n1);
	n2 = pread(f2, buf2, len, off);
	r2 = RES(n2);
	same("read", r1, r2);
	if (n1 != n2 || (n1 > 0 && memcmp(buf1, buf2, (size_t)n1)))
		die("read %s off %lld len %zu: %zd vs %zd bytes or content differs", rel,
		    (long long)off, len, n1, n2);
	close(f1);
	close(f2);
}

static void op_truncate(const char *rel)
{
	char a[8192], b[8192];
	off_t size = rndn(3) ? pick_off() : (off_t)rndn(8192);

	both(rel, a, b);
	note("truncate %s %lld", rel, (long long)size);
	same("truncate", RES(truncate(a, size)), RES(truncate(b, size)));
}

/* tmpfs has no ZERO_RANGE: the mirror writes zeros instead */
static int mirror_zero_range(int fd, int keep, off_t off, off_t len)
{
	struct stat st;
	off_t end;

	if (fstat(fd, &st))
		return -errno;
	end = off + len;
	if (!keep && end > st.st_size) {
		if (ftruncate(fd, end))
			return -errno;
		st.st_size = end;
	}
	/* preallocate beyond EOF like the real thing (no visible effect) */
	if (end > st.st_size)
		end = st.st_size;
	if (end > off) {
		memset(buf2, 0, (size_t)(end - off));
		if (pwrite(fd, buf2, (size_t)(end - off), off) != end - off)
			return -errno;
	}
	return 0;
}

static void op_fallocate(const char *rel)
{
	static const int modes[] = {0,
	                            FALLOC_FL_KEEP_SIZE,
	                            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                            FALLOC_FL_ZERO_RANGE,
	                            FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE};
	int mode = modes[rndn(sizeof(modes) / sizeof(modes[0]))];
	char a[8192], b[8192];
	off_t off = pick_off(), len = (off_t)pick_len();
	int f1, f2, r1, r2;

	both(rel, a, b);
	note("fallocate %s mode %#x off %lld len %lld", rel, mode, (long long)off, (long long)len);
	if (!open_both("open for fallocate", a, b, O_WRONLY, &f1, &f2))
		return;
	r1 = RES(fallocate(f1, mode, off, len));
	if (mode & FALLOC_FL_ZERO_RANGE)
		r2 = mirror_zero_range(f2, mode & FALLOC_FL_KEEP_SIZE, off, len);
	else
		r2 = RES(fallocate(f2, mode, off, len));
	same("fallocate", r1, r2);
	close(f1);
	close(f2);
}

static void op_namespace(void)
{
	char p1[4096], p2[4096], a1[8192], b1[8192], a2[8192], b2[8192];
	int r1, r2;

	pick_path(p1, sizeof(p1));
	pick_path(p2, sizeof(p2));
	both(p1, a1, b1);
	both(p2, a2, b2);
	switch (rndn(8)) {
	case 0:
	case 1:
		note("rename %s %s", p1, p2);
		r1 = RES(rename(a1, a2));
		r2 = RES(rename(b1, b2));
		same("rename", r1, r2);
		break;
	case 2:
		note("link %s %s", p1, p2);
		same("link", RES(link(a1, a2)), RES(link(b1, b2)));
		break;
	case 3:
		note("unlink %s", p1);
		same("unlink", RES(unlink(a1)), RES(unlink(b1)));
		break;
	case 4:
	case 5:
		note("mkdir %s", p1);
		same("mkdir", RES(mkdir(a1, 0755)), RES(mkdir(b1, 0755)));
		break;
	case 6:
		note("rmdir %s", p1);
		same("rmdir", RES(rmdir(a1)), RES(rmdir(b1)));
		break;
	default:
		note("symlink %s -> %s", p1, p2);
		same("symlink", RES(symlink(p2, a1)), RES(symlink(p2, b1)));
		break;
	}
}

static void op_chmod(const char *rel)
{
	char a[8192], b[8192];
	mode_t m = (mode_t)(0600 | rndn(0200));

	both(rel, a, b);
	note("chmod %s %o", rel, m);
	same("chmod", RES(chmod(a, m)), RES(chmod(b, m)));
}

static void op_xattr(const char *rel)
{
	char a[8192], b[8192], name[32], val[256];
	size_t len = rndn(sizeof(val));

	both(rel, a, b);
	snprintf(name, sizeof(name), "user.x%d", (int)rndn(4));
	if (rndn(3) == 0) {
		note("removexattr %s %s", rel, name);
		same("removexattr", RES(lremovexattr(a, name)), RES(lremovexattr(b, name)));
	} else {
		int flags = rndn(4) == 0 ? XATTR_CREATE : rndn(4) == 0 ? XATTR_REPLACE : 0;

		fill(val, len);
		note("setxattr %s %s len %zu flags %d", rel, name, len, flags);
		same("setxattr", RES(lsetxattr(a, name, val, len, flags)),
		     RES(lsetxattr(b, name, val, len, flags)));
	}
}

/* the user.* xattrs of both sides are the same (names and values) */
static void cmp_xattrs(const char *rel, const char *a, const char *b)
{
	char l1[4096], l2[4096], v1[512], v2[512], *n;
	ssize_t n1 = llistxattr(a, l1, sizeof(l1)), n2 = llistxattr(b, l2, sizeof(l2));
	int c1 = 0, c2 = 0;

	if (n1 < 0 || n2 < 0)
		die("compare %s: listxattr: %zd %zd (%s)", rel, n1, n2, strerror(errno));
	for (n = l2; n < l2 + n2; n += strlen(n) + 1)
		if (!strncmp(n, "user.", 5))
			c2++;
	for (n = l1; n < l1 + n1; n += strlen(n) + 1) {
		ssize_t s1, s2;

		if (strncmp(n, "user.", 5))
			continue;
		c1++;
		s1 = lgetxattr(a, n, v1, sizeof(v1));
		s2 = lgetxattr(b, n, v2, sizeof(v2));
		if (s1 != s2 || s1 < 0 || memcmp(v1, v2, (size_t)s1))
			die("compare %s: xattr %s: %zd vs %zd bytes or values differ", rel, n, s1,
			    s2);
	}
	if (c1 != c2)
		die("compare %s: %d vs %d user xattrs", rel, c1, c2);
}

/*
 * Files kept open across operations (their names may be renamed or unlinked
 * meanwhile): written and read through the descriptors, compared in full
 * before they are closed (and all of them before a remount).
 */
#define NKEEP 4
static int keep1[NKEEP] = {-1, -1, -1, -1}, keep2[NKEEP] = {-1, -1, -1, -1};

static void keep_close(int i)
{
	struct stat s1, s2;
	off_t off;

	if (keep1[i] < 0)
		return;
	note("close kept %d", i);
	if (fstat(keep1[i], &s1) || fstat(keep2[i], &s2) || s1.st_size != s2.st_size ||
	    s1.st_nlink != s2.st_nlink)
		die("kept %d: fstat: size %lld vs %lld, nlink %lu vs %lu", i, (long long)s1.st_size,
		    (long long)s2.st_size, (unsigned long)s1.st_nlink, (unsigned long)s2.st_nlink);
	for (off = 0; off < s1.st_size && off < (64 << 20); off += BIGSIZE) {
		ssize_t n1 = pread(keep1[i], buf1, BIGSIZE, off),
		        n2 = pread(keep2[i], buf2, BIGSIZE, off);

		if (n1 != n2 || n1 < 0 || memcmp(buf1, buf2, (size_t)n1))
			die("kept %d: content differs in [%lld, +%zd)", i, (long long)off, n1);
	}
	close(keep1[i]);
	close(keep2[i]);
	keep1[i] = keep2[i] = -1;
}

static void op_keep(const char *rel)
{
	int i = (int)rndn(NKEEP);
	char a[8192], b[8192];

	if (keep1[i] < 0) {
		int r1, r2;

		both(rel, a, b);
		note("open-keep %d %s", i, rel);
		keep1[i] = open(a, O_RDWR);
		r1 = RES(keep1[i]);
		keep2[i] = open(b, O_RDWR);
		r2 = RES(keep2[i]);
		same("open-keep", r1, r2);
		return;
	}
	switch (rndn(4)) {
	case 0:
		keep_close(i);
		break;
	case 1: {
		off_t size = pick_off();

		note("ftruncate kept %d %lld", i, (long long)size);
		same("ftruncate kept", RES(ftruncate(keep1[i], size)),
		     RES(ftruncate(keep2[i], size)));
		break;
	}
	default: {
		off_t off = pick_off();
		size_t len = pick_len();
		ssize_t n1, n2;

		fill(buf1, len);
		note("write kept %d off %lld len %zu", i, (long long)off, len);
		n1 = pwrite(keep1[i], buf1, len, off);
		n2 = pwrite(keep2[i], buf1, len, off);
		if (n1 != n2)
			die("write kept %d: %zd vs %zd (%s)", i, n1, n2, strerror(errno));
		break;
	}
	}
}

static void keep_close_all(void)
{
	int i;

	for (i = 0; i < NKEEP; i++)
		keep_close(i);
}

static void free_space(void)
{
	struct statvfs sv;
	int tries = 0;

	while (statvfs(mnt, &sv) == 0 && sv.f_bavail < sv.f_blocks / 3) {
		if (++tries > 2 * NNAMES) /* the space is held by kept files */
			keep_close_all();
		if (tries > 4 * NNAMES)
			die("no space to free (%llu of %llu blocks free)",
			    (unsigned long long)sv.f_bavail, (unsigned long long)sv.f_blocks);
		char a[8192], b[8192];
		const char *n = names[rndn(NNAMES)];

		both(n, a, b);
		note("rmtree %s (space)", n);
		same("rmtree", rmtree_one(a), rmtree_one(b));
	}
}

static void full_compare(const char *why)
{
	ncompared = 0;
	cmp_tree(".");
	printf("op %ld: trees equal (%s, %ld files)\n", opno, why, ncompared);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	const char *remount = NULL;
	double secs = 30;
	long next_remount, remounts = 0, nok = 0;
	time_t start;
	int c;

	seed = (unsigned long)time(NULL) ^ (unsigned long)getpid() << 16;
	while ((c = getopt(argc, argv, "d:s:r:")) != -1) {
		switch (c) {
		case 'd':
			secs = atof(optarg);
			break;
		case 's':
			seed = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			remount = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2) {
usage:
		fprintf(stderr, "usage: fsx [-d SECONDS] [-s SEED] [-r REMOUNT_CMD] MNT MIRROR\n");
		return 2;
	}
	snprintf(mnt, sizeof(mnt), "%s/fsx", argv[optind]);
	snprintf(mir, sizeof(mir), "%s/fsx", argv[optind + 1]);
	if ((mkdir(mnt, 0755) && errno != EEXIST) || (mkdir(mir, 0755) && errno != EEXIST)) {
		perror("mkdir");
		return 2;
	}
	rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
	buf1 = malloc(BIGSIZE);
	buf2 = malloc(BIGSIZE);
	umask(022);
	printf("fsx: seed %lu, %.0f s, mount %s, mirror %s\n", seed, secs, mnt, mir);
	fflush(stdout);
	if (chdir("/"))
		return 2;
	next_remount = 3000 + (long)rndn(3000);
	start = time(NULL);
	for (opno = 0; difftime(time(NULL), start) < secs; opno++) {
		char p[4096];
		uint64_t k = rndn(100);
		int e0 = nerrs;

		pick_path(p, sizeof(p));
		if (k < 30) {
			free_space();
			op_write(p);
		} else if (k < 45) {
			op_read(p);
		} else if (k < 55) {
			op_truncate(p);
		} else if (k < 67) {
			free_space();
			op_fallocate(p);
		} else if (k < 85) {
			op_namespace();
		} else if (k < 88) {
			op_chmod(p);
		} else if (k < 92) {
			op_xattr(p);
		} else if (k < 96) {
			free_space();
			op_keep(p);
		} else if (k < 97 && rndn(3) == 0) {
			char a[8192], b[8192];

			both(names[rndn(NNAMES)], a, b);
			note("rmtree %s", a + strlen(mnt) + 1);
			same("rmtree", rmtree_one(a), rmtree_one(b));
		} else {
			char a[8192], b[8192];
			int fd;

			both(p, a, b);
			note("fsync %s", p);
			fd = open(a, O_RDONLY);
			if (fd >= 0 && fsync(fd))
				die("fsync %s: %s", p, strerror(errno));
			if (fd >= 0)
				close(fd);
		}
		if (nerrs == e0)
			nok++;
		if (opno % CMP_EVERY == CMP_EVERY - 1)
			full_compare("periodic");
		if (remount && opno >= next_remount) {
			keep_close_all();
			note("remount");
			if (system(remount) != 0)
				die("remount command failed");
			remounts++;
			full_compare("after remount");
			next_remount = opno + 3000 + (long)rndn(3000);
		}
	}
	keep_close_all();
	full_compare("end");
	if (remount) {
		note("final remount");
		if (system(remount) != 0)
			die("remount command failed");
		full_compare("after the final remount");
	}
	printf("fsx: seed %lu: %ld operations (%ld without error), %ld remounts, no mismatch\n",
	       seed, opno, nok, remounts + (remount != NULL));
	return 0;
}
