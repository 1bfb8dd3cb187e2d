/* SPDX-License-Identifier: MIT */
/*
 * The workload of the fault loop (fault-loop.sh), on a mounted mendfs:
 *
 *   faultload run MNT MANIFEST     create, write, fsync, setxattr, rename,
 *                                  unlink; MANIFEST lists what must survive
 *   faultload verify MNT MANIFEST  check it after a remount
 *
 * run goes on after errors (to exercise a filesystem that turned read-only)
 * and fails (exit 1) only on an errno an I/O error must not produce: every
 * failing call must fail with EIO or EROFS, or ENOENT/ENOTDIR for a name
 * whose creation failed.  A file enters the manifest when its creation,
 * every write and an fsync succeeded (mendfs's fsync commits the whole
 * journal, its name included); a rename tried on it afterwards lets either
 * name hold it unless the rename and an fsync of its directory succeeded;
 * its xattr is expected when setxattr and an fsync succeeded.  verify checks
 * that exactly one of a file's names exists, with exactly its content, and
 * the xattr: "every file fsync'ed before the fault is intact".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NFILES 5
#define MAXLEN (NFILES * 4096 + 123)

struct entry {
	char name[2][64]; /* possible names (name[1] empty: one) */
	unsigned seed, len;
	char xattr[32]; /* expected user.fl value, or empty */
	bool gone_ok;   /* an unlink was tried: it may be gone */
};

static const char *mnt;
static int bad; /* unexpected errnos seen */
static unsigned nerr;

static void fill(unsigned char *buf, unsigned seed, unsigned len)
{
	unsigned i, x = seed * 2654435761u + 1;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
}

/* A failed call: note its errno, complain about one an I/O error must not cause. */
static void failed(const char *what, const char *name, int err, bool missing_ok)
{
	nerr++;
	if (err == EIO || err == EROFS || (missing_ok && (err == ENOENT || err == ENOTDIR)))
		return;
	fprintf(stderr, "faultload: %s %s: unexpected error %s\n", what, name, strerror(err));
	bad = 1;
}

static char *path(char *buf, const char *name)
{
	snprintf(buf, 4096, "%s/%s", mnt, name);
	return buf;
}

/* Create @name with @len bytes of @seed; fsync if asked.  Returns 1 if all succeeded. */
static int make_file(const char *name, unsigned seed, unsigned len, bool do_fsync, bool missing_ok)
{
	static unsigned char buf[MAXLEN];
	char p[4096];
	unsigned off = 0;
	int fd, ok = 1;

	fd = open(path(p, name), O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0) {
		failed("create", name, errno, missing_ok);
		return 0;
	}
	fill(buf, seed, len);
	/* two writes: a whole-block one and a partial tail */
	while (off < len) {
		unsigned n = off == 0 && len > 8192 ? 8192 : len - off;
		ssize_t w = pwrite(fd, buf + off, n, off);

		if (w != (ssize_t)n) {
			failed("write", name, w < 0 ? errno : EIO, false);
			ok = 0;
			break;
		}
		off += n;
	}
	if (do_fsync && fsync(fd)) {
		failed("fsync", name, errno, false);
		ok = 0;
	}
	if (close(fd)) {
		failed("close", name, errno, false);
		ok = 0;
	}
	return ok && do_fsync;
}

static int fsync_path(const char *name, bool missing_ok)
{
	char p[4096];
	int fd = open(path(p, name), O_RDONLY), ret = 0;

	if (fd < 0) {
		failed("open", name, errno, missing_ok);
		return -1;
	}
	if (fsync(fd)) {
		failed("fsync", name, errno, false);
		ret = -1;
	}
	close(fd);
	return ret;
}

static int run(const char *manifest)
{
	struct entry e[NFILES + 1];
	unsigned n = 0, i;
	bool dir_ok;
	char p[4096], q[4096];
	FILE *f;

	memset(e, 0, sizeof(e));
	dir_ok = mkdir(path(p, "d"), 0755) == 0;
	if (!dir_ok)
		failed("mkdir", "d", errno, false);
	for (i = 0; i < NFILES; i++) {
		char name[64];
		unsigned len = i == 0 ? 100 : i * 4096 + 123 * (i % 2);

		snprintf(name, sizeof(name), "d/f%u", i);
		if (make_file(name, i + 1, len, true, !dir_ok)) {
			snprintf(e[n].name[0], sizeof(e[n].name[0]), "%s", name);
			e[n].seed = i + 1;
			e[n].len = len;
			n++;
		}
	}
	/* an xattr on the first file that made it */
	if (n) {
		static const char val[] = "fault-loop-xattr";

		if (setxattr(path(p, e[0].name[0]), "user.fl", val, sizeof(val) - 1, 0))
			failed("setxattr", e[0].name[0], errno, false);
		else if (!fsync_path(e[0].name[0], false))
			snprintf(e[0].xattr, sizeof(e[0].xattr), "%s", val);
	}
	/* rename the second: either name until the rename and a directory fsync succeed */
	if (n > 1) {
		struct entry *r = &e[1];

		snprintf(r->name[1], sizeof(r->name[1]), "d/renamed");
		if (rename(path(p, r->name[0]), path(q, r->name[1])))
			failed("rename", r->name[0], errno, false);
		else if (!fsync_path("d", false)) {
			memcpy(r->name[0], r->name[1], sizeof(r->name[0]));
			r->name[1][0] = '\0';
		}
	}
	/* a file that comes and goes, and one never fsync'ed */
	make_file("d/tmp", 99, 4096, false, !dir_ok);
	if (unlink(path(p, "d/tmp")))
		failed("unlink", "d/tmp", errno, true);
	make_file("loose", 98, 5000, false, false);
	/* unlink the third: gone or intact */
	if (n > 2) {
		e[2].gone_ok = true;
		if (unlink(path(p, e[2].name[0])))
			failed("unlink", e[2].name[0], errno, false);
	}

	f = fopen(manifest, "w");
	if (!f) {
		perror(manifest);
		return 1;
	}
	for (i = 0; i < n; i++)
		fprintf(f, "%s %s %u %u %s %d\n", e[i].name[0],
		        e[i].name[1][0] ? e[i].name[1] : "-", e[i].seed, e[i].len,
		        e[i].xattr[0] ? e[i].xattr : "-", e[i].gone_ok);
	if (fclose(f)) {
		perror(manifest);
		return 1;
	}
	printf("faultload: %u failed calls, %u files fsync'ed\n", nerr, n);
	return bad;
}

/* 1 if @name holds exactly @len bytes of @seed, 0 if it does not exist; complains otherwise. */
static int check_file(const char *name, unsigned seed, unsigned len, const char *xattr)
{
	static unsigned char want[MAXLEN], got[MAXLEN + 1];
	char p[4096], xv[64];
	ssize_t r;
	int fd;

	fd = open(path(p, name), O_RDONLY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "faultload: open %s: %s\n", name, strerror(errno));
		return -1;
	}
	fill(want, seed, len);
	r = pread(fd, got, sizeof(got), 0);
	close(fd);
	if (r != (ssize_t)len || memcmp(want, got, len)) {
		fprintf(stderr, "faultload: %s: fsync'ed content lost (read %zd of %u bytes%s)\n",
		        name, r, len, r == (ssize_t)len ? ", differing" : "");
		return -1;
	}
	if (strcmp(xattr, "-")) {
		r = getxattr(p, "user.fl", xv, sizeof(xv) - 1);
		if (r < 0 || (size_t)r != strlen(xattr) || memcmp(xv, xattr, (size_t)r)) {
			fprintf(stderr, "faultload: %s: fsync'ed xattr lost (%s)\n", name,
			        r < 0 ? strerror(errno) : "differs");
			return -1;
		}
	}
	return 1;
}

static int verify(const char *manifest)
{
	char n0[64], n1[64], xattr[64];
	unsigned seed, len, files = 0;
	FILE *f = fopen(manifest, "r");
	int ret = 0, gone_ok;

	if (!f) {
		perror(manifest);
		return 1;
	}
	while (fscanf(f, "%63s %63s %u %u %63s %d", n0, n1, &seed, &len, xattr, &gone_ok) == 6) {
		int a = check_file(n0, seed, len, xattr);
		int b = strcmp(n1, "-") ? check_file(n1, seed, len, xattr) : 0;

		if (a < 0 || b < 0 || a + b > 1 || (a + b == 0 && !gone_ok)) {
			if (a >= 0 && b >= 0)
				fprintf(stderr, "faultload: %s%s%s: %s\n", n0,
				        b || a ? " and " : "", b || a ? n1 : "",
				        a + b ? "both exist" : "missing");
			ret = 1;
		}
		files++;
	}
	fclose(f);
	if (!ret)
		printf("faultload: %u fsync'ed files intact\n", files);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: faultload run|verify MNT MANIFEST\n");
		return 2;
	}
	mnt = argv[2];
	if (!strcmp(argv[1], "run"))
		return run(argv[3]);
	if (!strcmp(argv[1], "verify"))
		return verify(argv[3]);
	fprintf(stderr, "faultload: unknown command %s\n", argv[1]);
	return 2;
}
