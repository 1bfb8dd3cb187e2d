/* SPDX-License-Identifier: MIT */
/*
 * posix_data.c: the posix program's checks of file data and metadata:
 * sparse files, SEEK_DATA/SEEK_HOLE and fallocate, timestamps, extended
 * attributes, a file beyond 4 GiB, threads and processes writing, ENOSPC
 * (blocks and inodes), a shared mapping, and persistence across a remount.
 */
#include "posix.h"

/* What lseek(fd, off, whence) must return: @precise, or the generic answer under writeback. */
static off_t seek_want(int fd, off_t off, int whence, off_t precise)
{
	struct stat st;

	if (!writeback_mode)
		return precise;
	if (fstat(fd, &st) < 0 || off >= st.st_size)
		return -1;
	return whence == SEEK_DATA ? off : st.st_size;
}

/* --- sparse, SEEK_DATA/HOLE, fallocate ------------------------------------------------- */

static int is_zero(const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

void check_sparse(void)
{
	static char buf[1 << 20];
	struct stat st;
	off_t o;
	int fd = open("sp", O_CREAT | O_RDWR | O_TRUNC, 0644);

	CHECK(fd >= 0, "create sp");
	if (fd < 0)
		return;
	/* data [64K,68K) and [1M,1M+100); holes elsewhere */
	memset(buf, 'a', 4096);
	CHECK(pwrite(fd, buf, 4096, 65536) == 4096 && pwrite(fd, buf, 100, 1 << 20) == 100,
	      "sparse writes");
	CHECK(fstat(fd, &st) == 0 && st.st_size == (1 << 20) + 100 && st.st_blocks < 64,
	      "sparse size and blocks (%lld blocks)", (long long)st.st_blocks);
	CHECK(pread(fd, buf, 65536, 0) == 65536 && is_zero(buf, 65536), "a hole reads zeros");
	o = lseek(fd, 0, SEEK_DATA);
	CHECK(o == seek_want(fd, 0, SEEK_DATA, 65536), "SEEK_DATA from 0: %lld", (long long)o);
	o = lseek(fd, 65536 + 100, SEEK_DATA);
	CHECK(o == seek_want(fd, 65536 + 100, SEEK_DATA, 65536 + 100),
	      "SEEK_DATA inside data: %lld", (long long)o);
	o = lseek(fd, 65536, SEEK_HOLE);
	CHECK(o == seek_want(fd, 65536, SEEK_HOLE, 65536 + 4096), "SEEK_HOLE after data: %lld",
	      (long long)o);
	o = lseek(fd, 100, SEEK_HOLE);
	CHECK(o == seek_want(fd, 100, SEEK_HOLE, 100), "SEEK_HOLE inside a hole: %lld",
	      (long long)o);
	o = lseek(fd, 70000, SEEK_DATA);
	CHECK(writeback_mode ? o == 70000 : o >= 65536 + 4096 && o <= 1 << 20,
	      "SEEK_DATA to the second extent: %lld", (long long)o);
	o = lseek(fd, (1 << 20) + 50, SEEK_HOLE);
	CHECK(o == seek_want(fd, (1 << 20) + 50, SEEK_HOLE, (1 << 20) + 100),
	      "SEEK_HOLE at EOF: %lld", (long long)o);
	ERR(lseek(fd, (1 << 20) + 100, SEEK_DATA), ENXIO, "SEEK_DATA at EOF: ENXIO");
	ERR(lseek(fd, (1 << 20) + 100, SEEK_HOLE), ENXIO, "SEEK_HOLE at EOF: ENXIO");
	/* a hole at the end after ftruncate up */
	CHECK(ftruncate(fd, 4 << 20) == 0, "ftruncate to 4M");
	o = lseek(fd, (1 << 20) + 4096, SEEK_HOLE);
	CHECK(o == seek_want(fd, (1 << 20) + 4096, SEEK_HOLE, (1 << 20) + 4096),
	      "trailing hole: %lld", (long long)o);
	if (!writeback_mode)
		ERR(lseek(fd, (1 << 20) + 4096, SEEK_DATA), ENXIO, "no data in the trailing hole");

	/* fallocate modes */
	CHECK(fallocate(fd, 0, 8 << 20, 65536) == 0 && fstat(fd, &st) == 0 &&
	              st.st_size == (8 << 20) + 65536,
	      "fallocate mode 0 extends the size");
	CHECK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 16 << 20, 65536) == 0 && fstat(fd, &st) == 0 &&
	              st.st_size == (8 << 20) + 65536,
	      "KEEP_SIZE keeps it");
	CHECK(pread(fd, buf, 65536, 8 << 20) == 65536 && is_zero(buf, 65536),
	      "preallocated blocks read zeros");
	memset(buf, 'z', 1 << 20);
	CHECK(pwrite(fd, buf, 1 << 20, 0) == 1 << 20, "fill the first 1M");
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 8192) == 0,
	      "punch [4K,12K)");
	CHECK(pread(fd, buf, 16384, 0) == 16384 && buf[4095] == 'z' && is_zero(buf + 4096, 8192) &&
	              buf[12288] == 'z',
	      "punched range reads zeros, neighbours kept");
	o = lseek(fd, 4096, SEEK_HOLE);
	CHECK(o == seek_want(fd, 4096, SEEK_HOLE, 4096), "SEEK_HOLE finds the punched hole: %lld",
	      (long long)o);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 20000, 3000) == 0 &&
	              pread(fd, buf, 8192, 16384) == 8192 && buf[20000 - 16384 - 1] == 'z' &&
	              is_zero(buf + 20000 - 16384, 3000) && buf[23000 - 16384] == 'z',
	      "partial-block punch zeroes exactly the range");
	CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 100000, 5000) == 0 &&
	              pread(fd, buf, 6000, 99999) == 6000 && buf[0] == 'z' &&
	              is_zero(buf + 1, 5000) && buf[5001] == 'z',
	      "ZERO_RANGE");
	CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (8 << 20) + 60000, 65536) ==
	                      0 &&
	              fstat(fd, &st) == 0 && st.st_size == (8 << 20) + 65536,
	      "ZERO_RANGE|KEEP_SIZE past EOF keeps the size");
	CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE, (9 << 20), 4096) == 0 && fstat(fd, &st) == 0 &&
	              st.st_size == (9 << 20) + 4096,
	      "ZERO_RANGE past EOF extends");
	CHECK((errno = 0, fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096) < 0 &&
	                          (errno == EOPNOTSUPP || errno == EINVAL)),
	      "COLLAPSE_RANGE refused");
	CHECK((errno = 0, fallocate(fd, FALLOC_FL_INSERT_RANGE, 0, 4096) < 0 &&
	                          (errno == EOPNOTSUPP || errno == EINVAL)),
	      "INSERT_RANGE refused");
	/* truncate down into a written block then up: the tail reads zeros */
	CHECK(pwrite(fd, "yyyyyyyyyy", 10, 4990) == 10 && ftruncate(fd, 5000) == 0 &&
	              ftruncate(fd, 20000) == 0 && pread(fd, buf, 20000, 0) == 20000 &&
	              buf[0] == 'z' && buf[4999] == 'y' && is_zero(buf + 5000, 15000),
	      "truncate down then up: zeros past the old EOF");
	close(fd);
	CHECK(unlink("sp") == 0, "unlink sp");
}

/* --- timestamps ------------------------------------------------------------------------ */

static double ts_of(const char *path, int ctime)
{
	struct stat st;

	if (lstat(path, &st))
		return -1;
	return ctime ? st.st_ctim.tv_sec + st.st_ctim.tv_nsec / 1e9
	             : st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
}

/* TOUCHED(what, path, ctime?, statement): the statement moves the time forward */
#define TOUCHED(what, path, c, stmt)                                                               \
	do {                                                                                       \
		double b_ = ts_of(path, c);                                                        \
		usleep(20000);                                                                     \
		stmt;                                                                              \
		CHECK(ts_of(path, c) > b_, "%s updates %s %s", what, path, c ? "ctime" : "mtime"); \
	} while (0)

void check_times(void)
{
	int fd, r = 0;

	CHECK(mkdir("t", 0755) == 0, "mkdir t");
	fd = open("t/f", O_CREAT | O_RDWR, 0644);
	CHECK(fd >= 0, "create t/f");
	TOUCHED("write", "t/f", 0, r = (int)pwrite(fd, "x", 1, 0));
	TOUCHED("write", "t/f", 1, r = (int)pwrite(fd, "x", 1, 0));
	TOUCHED("create", "t", 0, close(open("t/g", O_CREAT | O_WRONLY, 0644)));
	TOUCHED("unlink", "t", 0, r = unlink("t/g"));
	TOUCHED("link", "t/f", 1, r = link("t/f", "t/h"));
	TOUCHED("link", "t", 0, r = link("t/f", "t/h2"));
	TOUCHED("unlink of a link", "t/f", 1, r = unlink("t/h"));
	TOUCHED("rename", "t", 0, r = rename("t/h2", "t/h3"));
	TOUCHED("chmod", "t/f", 1, r = chmod("t/f", 0600));
	TOUCHED("chown", "t/f", 1, r = chown("t/f", 1, 1));
	TOUCHED("setxattr", "t/f", 1, r = setxattr("t/f", "user.a", "1", 1, 0));
	TOUCHED("ftruncate", "t/f", 0, r = ftruncate(fd, 100));
	TOUCHED("ftruncate", "t/f", 1, r = ftruncate(fd, 50));
	TOUCHED("fallocate extending the size", "t/f", 0, r = fallocate(fd, 0, 0, 10000));
	TOUCHED("fallocate extending the size", "t/f", 1, r = fallocate(fd, 0, 0, 20000));
	TOUCHED("fallocate KEEP_SIZE", "t/f", 1, r = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 40000));
	TOUCHED("punch", "t/f", 0,
	        r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
	TOUCHED("mkdir", "t", 0, r = mkdir("t/d", 0755));
	TOUCHED("rmdir", "t", 0, r = rmdir("t/d"));
	TOUCHED("O_TRUNC", "t/f", 0, close(open("t/f", O_WRONLY | O_TRUNC)));
	{
		double b = ts_of("t/h3", 1);

		usleep(20000);
		CHECK(rename("t/h3", "t/h4") == 0 && ts_of("t/h4", 1) > b,
		      "rename updates the inode's ctime");
	}
	(void)r;
	close(fd);
	CHECK(unlink("t/f") == 0 && unlink("t/h4") == 0, "cleanup t");
	/*
	 * Written, closed, unlinked: nobody has it open, so the unlink frees it at
	 * once, while the kernel still holds the inode.  With -o writeback the
	 * kernel then writes back the times it kept (a SETATTR of the freed
	 * inode): that must not fail, or the error reaches the superblock and
	 * syncfs(2) returns it (it returned ENOENT).
	 */
	for (int i = 0; i < 8; i++) {
		fd = open("t/w", O_CREAT | O_WRONLY | O_TRUNC, 0644);
		CHECK(fd >= 0 && write(fd, "data", 4) == 4 && close(fd) == 0, "write t/w (%d)", i);
		CHECK(unlink("t/w") == 0, "unlink t/w (%d)", i);
	}
	fd = open("t", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0 && syncfs(fd) == 0, "syncfs after written files were unlinked: %s",
	      strerror(errno));
	if (fd >= 0)
		close(fd);
	CHECK(rmdir("t") == 0, "rmdir t");
}

/* --- xattr ----------------------------------------------------------------------------- */

void check_xattr(void)
{
	char buf[8192], name[64], val[200];
	ssize_t n;
	int i, ok = 1;

	put_file("x", "", 0, 0644);
	CHECK(mkdir("xd", 0755) == 0, "mkdir xd");
	CHECK(setxattr("xd", "user.dir", "dv", 2, 0) == 0 &&
	              getxattr("xd", "user.dir", buf, 8) == 2,
	      "xattr on a directory");
	CHECK(setxattr("x", "user.empty", "", 0, 0) == 0 &&
	              getxattr("x", "user.empty", buf, 8) == 0,
	      "empty value");
	for (i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "user.attr%03d", i);
		memset(val, 'a' + i % 26, sizeof(val));
		if (setxattr("x", name, val, (size_t)(i * 3), 0))
			ok = 0;
	}
	CHECK(ok, "60 xattrs");
	for (i = 0, ok = 1; i < 60; i++) {
		snprintf(name, sizeof(name), "user.attr%03d", i);
		memset(val, 'a' + i % 26, sizeof(val));
		n = getxattr("x", name, buf, sizeof(buf));
		if (n != i * 3 || memcmp(buf, val, (size_t)n))
			ok = 0;
	}
	CHECK(ok, "60 xattrs read back");
	n = listxattr("x", buf, sizeof(buf));
	CHECK(n == (ssize_t)(61 * sizeof("user.attr000") - 1 + 1 - 2), "listxattr size %zd",
	      n); /* 60 * 15 + "user.empty\0" (11) */
	ERR(listxattr("x", buf, 10), ERANGE, "listxattr small buffer: ERANGE");
	CHECK(setxattr("x", "user.attr005", "new", 3, XATTR_REPLACE) == 0 &&
	              getxattr("x", "user.attr005", buf, 8) == 3 && !memcmp(buf, "new", 3),
	      "XATTR_REPLACE");
	ERR(setxattr("x", "user.attr005", "n", 1, XATTR_CREATE), EEXIST, "XATTR_CREATE: EEXIST");
	ERR(removexattr("x", "user.none"), ENODATA, "remove missing: ENODATA");
	ERR(setxattr("x", "bogus.ns", "1", 1, 0), EOPNOTSUPP, "unknown namespace: EOPNOTSUPP");
	memset(name, 'k', sizeof(name));
	{
		char lname[300];

		memcpy(lname, "user.", 5);
		memset(lname + 5, 'k', 260);
		lname[265] = '\0';
		ERR(setxattr("x", lname, "1", 1, 0), ERANGE, "name above 255 bytes: ERANGE");
	}
	CHECK(setxattr("x", "trusted.t", "T", 1, 0) == 0 && getxattr("x", "trusted.t", buf, 8) == 1,
	      "trusted.* as root");
	for (i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "user.attr%03d", i);
		removexattr("x", name);
	}
	n = listxattr("x", buf, sizeof(buf));
	CHECK(n == (ssize_t)(sizeof("user.empty") + sizeof("trusted.t")), "after removals: %zd", n);
	CHECK(symlink("x", "xl") == 0, "symlink xl");
	ERR(lsetxattr("xl", "user.a", "1", 1, 0), EPERM, "user.* on a symlink: EPERM");
	CHECK(unlink("x") == 0 && unlink("xl") == 0 && rmdir("xd") == 0, "cleanup xattr");
}

/* --- large files ----------------------------------------------------------------------- */

#define BIG_OFF ((off_t)5 << 30) /* 5 GiB, beyond 32-bit offsets */

void check_large(int verify)
{
	char buf[8192], want[8192];
	struct stat st;
	off_t o;
	int fd, i;

	for (i = 0; i < (int)sizeof(want); i++)
		want[i] = (char)(i * 31 + 7);
	fd = open("large", verify ? O_RDONLY : O_CREAT | O_RDWR | O_TRUNC, 0644);
	CHECK(fd >= 0, "open large");
	if (fd < 0)
		return;
	if (!verify) {
		CHECK(pwrite(fd, want, sizeof(want), BIG_OFF - 4096) == (ssize_t)sizeof(want),
		      "write across 5 GiB");
		CHECK(pwrite(fd, want, 10, ((off_t)4 << 30) - 5) == 10,
		      "write across the 4 GiB boundary");
	}
	CHECK(fstat(fd, &st) == 0 && st.st_size == BIG_OFF + 4096, "size %lld",
	      (long long)st.st_size);
	CHECK(pread(fd, buf, sizeof(buf), BIG_OFF - 4096) == (ssize_t)sizeof(buf) &&
	              !memcmp(buf, want, sizeof(buf)),
	      "read across 5 GiB");
	CHECK(pread(fd, buf, 10, ((off_t)4 << 30) - 5) == 10 && !memcmp(buf, want, 10),
	      "read across 4 GiB");
	CHECK(pread(fd, buf, 100, (off_t)3 << 30) == 100 && is_zero(buf, 100), "hole at 3 GiB");
	o = lseek(fd, 0, SEEK_DATA);
	CHECK(writeback_mode ? o == 0 : o >= ((off_t)4 << 30) - 4096 && o <= ((off_t)4 << 30) - 5,
	      "SEEK_DATA %lld", (long long)o);
	CHECK(pread(fd, buf, 100, BIG_OFF + 4096) == 0, "read at EOF");
	if (!verify) {
		close(fd);
		fd = open("large", O_RDWR);
		CHECK(ftruncate(fd, BIG_OFF) == 0 && fstat(fd, &st) == 0 && st.st_size == BIG_OFF,
		      "truncate to 5 GiB");
		CHECK(pwrite(fd, want + 4096, 4096, BIG_OFF) == 4096, "rewrite the tail");
	}
	close(fd);
}

/* --- concurrency ----------------------------------------------------------------------- */

#define CW_THREADS 4
#define CW_CHUNK   12288 /* not a multiple of the block size relative to the stride */
#define CW_ROUNDS  200

struct cw {
	int fd, id, shared, err;
};

static void *writer(void *arg)
{
	struct cw *c = arg;
	char buf[CW_CHUNK];
	int r;

	for (r = 0; r < CW_ROUNDS; r++) {
		off_t off = c->shared ? ((off_t)r * CW_THREADS + c->id) * CW_CHUNK / 2 * 2 + 0
		                      : (off_t)r * CW_CHUNK;

		if (c->shared)
			off = ((off_t)r * CW_THREADS + c->id) * (CW_CHUNK - 1000);
		memset(buf, 'A' + c->id, sizeof(buf));
		buf[0] = (char)r;
		/* on the shared file chunks overlap their neighbours by 1000 bytes */
		if (pwrite(c->fd, buf, c->shared ? CW_CHUNK - 1000 : CW_CHUNK, off) !=
		    (c->shared ? CW_CHUNK - 1000 : CW_CHUNK))
			c->err++;
		if (r % 50 == 0 && fsync(c->fd))
			c->err++;
	}
	return NULL;
}

void check_concurrent(void)
{
	pthread_t t[CW_THREADS];
	struct cw c[CW_THREADS];
	char *buf = malloc(CW_CHUNK), name[32];
	int i, r, fd, bad = 0, errs = 0;

	/* one file, disjoint interleaved ranges */
	fd = open("shared", O_CREAT | O_RDWR | O_TRUNC, 0644);
	CHECK(fd >= 0, "create shared");
	for (i = 0; i < CW_THREADS; i++) {
		c[i] = (struct cw){fd, i, 1, 0};
		pthread_create(&t[i], NULL, writer, &c[i]);
	}
	for (i = 0; i < CW_THREADS; i++) {
		pthread_join(t[i], NULL);
		errs += c[i].err;
	}
	CHECK(errs == 0, "%d writers to one file (%d errors)", CW_THREADS, errs);
	for (r = 0; r < CW_ROUNDS; r++)
		for (i = 0; i < CW_THREADS; i++) {
			off_t off = ((off_t)r * CW_THREADS + i) * (CW_CHUNK - 1000);
			int j;

			if (pread(fd, buf, CW_CHUNK - 1000, off) != CW_CHUNK - 1000 ||
			    buf[0] != (char)r) {
				bad++;
				continue;
			}
			for (j = 1; j < CW_CHUNK - 1000; j++)
				if (buf[j] != 'A' + i) {
					bad++;
					break;
				}
		}
	CHECK(bad == 0, "shared file content (%d bad chunks)", bad);
	close(fd);
	CHECK(unlink("shared") == 0, "unlink shared");

	/* different files */
	for (i = 0; i < CW_THREADS; i++) {
		snprintf(name, sizeof(name), "own%d", i);
		c[i] = (struct cw){open(name, O_CREAT | O_RDWR | O_TRUNC, 0644), i, 0, 0};
		pthread_create(&t[i], NULL, writer, &c[i]);
	}
	for (i = 0, errs = 0; i < CW_THREADS; i++) {
		pthread_join(t[i], NULL);
		errs += c[i].err;
	}
	CHECK(errs == 0, "%d writers to their own files (%d errors)", CW_THREADS, errs);
	for (i = 0, bad = 0; i < CW_THREADS; i++) {
		for (r = 0; r < CW_ROUNDS; r++) {
			int j;

			if (pread(c[i].fd, buf, CW_CHUNK, (off_t)r * CW_CHUNK) != CW_CHUNK ||
			    buf[0] != (char)r) {
				bad++;
				continue;
			}
			for (j = 1; j < CW_CHUNK; j++)
				if (buf[j] != 'A' + i) {
					bad++;
					break;
				}
		}
		close(c[i].fd);
		snprintf(name, sizeof(name), "own%d", i);
		unlink(name);
	}
	CHECK(bad == 0, "own files content (%d bad chunks)", bad);

	/* concurrent appends with O_APPEND: nothing lost */
	fd = open("app", O_CREAT | O_RDWR | O_TRUNC | O_APPEND, 0644);
	{
		pid_t kids[CW_THREADS];
		struct stat st;

		for (i = 0; i < CW_THREADS; i++) {
			kids[i] = fork();
			if (kids[i] == 0) {
				char line[64];
				int k;

				memset(line, '0' + i, sizeof(line));
				line[63] = '\n';
				for (k = 0; k < 250; k++)
					if (write(fd, line, sizeof(line)) != sizeof(line))
						_exit(1);
				_exit(0);
			}
		}
		for (i = 0, errs = 0; i < CW_THREADS; i++) {
			int status;

			waitpid(kids[i], &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				errs++;
		}
		CHECK(errs == 0 && fstat(fd, &st) == 0 && st.st_size == CW_THREADS * 250 * 64,
		      "O_APPEND from %d processes: size %lld", CW_THREADS, (long long)st.st_size);
	}
	close(fd);
	unlink("app");
	free(buf);
}
/* --- ENOSPC ---------------------------------------------------------------------------- */

void check_enospc(void)
{
	static char buf[1 << 20];
	struct statvfs sv0, sv1, sv2;
	long written = 0;
	int fd, i, err = 0;
	ssize_t n;

	memset(buf, 0x5a, sizeof(buf));
	CHECK(statvfs(".", &sv0) == 0, "statvfs");
	fd = open("fill", O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0, "create fill");
	for (;;) {
		n = write(fd, buf, sizeof(buf));
		if (n < 0) {
			err = errno;
			break;
		}
		written += n;
		if (n == 0 || written > (4L << 30))
			break;
	}
	CHECK(err == ENOSPC, "filling ends in ENOSPC after %ld MiB (%s)", written >> 20,
	      strerror(err));
	CHECK(fsync(fd) == 0 || errno == ENOSPC, "fsync of a full fs");
	close(fd);
	CHECK(statvfs(".", &sv1) == 0 && sv1.f_bavail < sv0.f_bavail / 20, "statvfs shows it full");
	fd = open("more", O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd >= 0) {
		errno = 0;
		for (i = 0; i < 64 && write(fd, buf, sizeof(buf)) > 0; i++)
			;
		CHECK(errno == ENOSPC, "a second file also hits ENOSPC");
		close(fd);
		unlink("more");
	}
	CHECK(mkdir("stillok", 0755) == 0 || errno == ENOSPC, "mkdir on a full fs");
	rmdir("stillok");
	CHECK(unlink("fill") == 0, "delete the big file");
	for (i = 0; i < 100; i++) {
		statvfs(".", &sv2);
		if (sv2.f_bfree >= sv0.f_bfree)
			break;
		usleep(100000);
	}
	CHECK(sv2.f_bfree >= sv0.f_bfree, "free blocks back (%llu -> %llu)",
	      (unsigned long long)sv0.f_bfree, (unsigned long long)sv2.f_bfree);
	fd = open("after", O_CREAT | O_RDWR | O_TRUNC, 0644);
	for (i = 0, err = 0; fd >= 0 && i < 16; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			err++;
	CHECK(fd >= 0 && err == 0 && fsync(fd) == 0, "write 16 MiB after the delete");
	{
		static char rb[1 << 20];

		CHECK(pread(fd, rb, sizeof(rb), 15 << 20) == (ssize_t)sizeof(rb) &&
		              !memcmp(rb, buf, sizeof(rb)),
		      "and read it back");
	}
	close(fd);
	CHECK(unlink("after") == 0, "unlink after");
}

static int get_check_n(const char *path, const char *want, size_t n)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0)
		return 0;
	r = read(fd, buf, sizeof(buf));
	close(fd);
	return r == (ssize_t)n && !memcmp(buf, want, n);
}

/* inode exhaustion: create files until ENOSPC, delete them, create as many again */
void check_enospc_inodes(void)
{
	char name[64];
	struct statvfs sv;
	long i, made = 0, again = 0;
	int fd;

	CHECK(mkdir("in", 0755) == 0, "mkdir in");
	for (i = 0; i < 10000000; i++) {
		snprintf(name, sizeof(name), "in/%ld", i);
		fd = open(name, O_CREAT | O_WRONLY, 0644);
		if (fd < 0)
			break;
		close(fd);
		made++;
	}
	CHECK(i < 10000000 && errno == ENOSPC, "inodes run out with ENOSPC after %ld files", made);
	CHECK(statvfs(".", &sv) == 0 && sv.f_ffree == 0, "statvfs: no free inodes (%llu)",
	      (unsigned long long)sv.f_ffree);
	ERR(mkdir("in/d", 0755), ENOSPC, "mkdir without inodes: ENOSPC");
	ERR(symlink("x", "in/s"), ENOSPC, "symlink without inodes: ENOSPC");
	CHECK(link("in/0", "in/hard") == 0 && unlink("in/hard") == 0, "link needs no inode");
	for (i = 0; i < made; i++) {
		snprintf(name, sizeof(name), "in/%ld", i);
		unlink(name);
	}
	/* the daemon frees an inode when the kernel forgets it, a little later */
	for (i = 0; i < 200; i++) {
		if (statvfs(".", &sv) == 0 && sv.f_ffree >= (unsigned long)made)
			break;
		usleep(50000);
	}
	CHECK(sv.f_ffree >= (unsigned long)made, "inodes free again (%llu free)",
	      (unsigned long long)sv.f_ffree);
	for (i = 0; i < made; i++) {
		snprintf(name, sizeof(name), "in/%ld", i);
		fd = open(name, O_CREAT | O_WRONLY, 0644);
		if (fd < 0)
			break;
		close(fd);
		again++;
	}
	CHECK(again == made, "created %ld files again", again);
	for (i = 0; i < made; i++) {
		snprintf(name, sizeof(name), "in/%ld", i);
		unlink(name);
	}
	CHECK(rmdir("in") == 0, "rmdir in");
}

/* a shared writable mapping reaches the file, past-EOF bytes of the last page stay out */
void check_mmap(void)
{
	char buf[20000];
	size_t len = 3 * 4096 + 100;
	char *p;
	int fd = open("mm", O_CREAT | O_RDWR | O_TRUNC, 0644);

	CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0, "create mm");
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED, "mmap shared writable");
	if (p == MAP_FAILED) {
		close(fd);
		return;
	}
	memset(p + 4000, 'm', 200);
	p[len - 1] = 'e';
	CHECK(msync(p, len, MS_SYNC) == 0, "msync");
	munmap(p, len);
	close(fd);
	fd = open("mm", O_RDONLY);
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == (ssize_t)len && buf[4000] == 'm' &&
	              buf[4199] == 'm' && buf[4200] == 0 && buf[len - 1] == 'e' &&
	              is_zero(buf, 4000),
	      "written through the mapping, read back with read(2)");
	if (fd >= 0)
		close(fd);
	CHECK(unlink("mm") == 0, "unlink mm");
}

/* --- persistence ----------------------------------------------------------------------- */

void check_persist(int verify)
{
	static char buf[200000], want[200000];
	struct stat st;
	size_t i;
	int fd;

	for (i = 0; i < sizeof(want); i++)
		want[i] = (char)(i * 17 + i / 5000);
	if (!verify) {
		CHECK(mkdir("ps", 0751) == 0 && mkdir("ps/sub", 0700) == 0, "mkdir ps/sub");
		fd = open("ps/sparse", O_CREAT | O_WRONLY, 0640);
		CHECK(fd >= 0 && pwrite(fd, want, sizeof(want), 3 << 20) == (ssize_t)sizeof(want),
		      "sparse file");
		CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (3 << 20) + 4096,
		                8192) == 0,
		      "punch");
		close(fd);
		put_file("ps/sub/a", want, 5000, 0600);
		CHECK(link("ps/sub/a", "ps/a-link") == 0, "link");
		CHECK(symlink("sub/a", "ps/sym") == 0, "symlink");
		CHECK(chown("ps/sub/a", 123, 456) == 0, "chown");
		CHECK(setxattr("ps/sub", "user.d", "dirattr", 7, 0) == 0, "xattr");
		put_file("ps/gone", "x", 1, 0644);
		CHECK(rename("ps/sub/a", "ps/sub/b") == 0 && unlink("ps/gone") == 0,
		      "rename and unlink");
	}
	CHECK(stat("ps", &st) == 0 && (st.st_mode & 07777) == 0751 && st.st_nlink == 3, "ps");
	fd = open("ps/sparse", O_RDONLY);
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == (3 << 20) + (off_t)sizeof(want) &&
	              (st.st_mode & 07777) == 0640,
	      "sparse size");
	CHECK(pread(fd, buf, sizeof(buf), 3 << 20) == (ssize_t)sizeof(buf) &&
	              !memcmp(buf, want, 4096) && is_zero(buf + 4096, 8192) &&
	              !memcmp(buf + 12288, want + 12288, sizeof(want) - 12288),
	      "sparse content with the punched hole");
	CHECK(lseek(fd, 0, SEEK_DATA) == seek_want(fd, 0, SEEK_DATA, 3 << 20),
	      "hole before the data");
	close(fd);
	CHECK(stat("ps/sub/b", &st) == 0 && st.st_uid == 123 && st.st_gid == 456 &&
	              st.st_nlink == 2 && (st.st_mode & 07777) == 0600,
	      "ps/sub/b attributes");
	CHECK(get_check_n("ps/a-link", want, 5000), "ps/a-link content");
	CHECK(readlink("ps/sym", buf, 100) == 5 && !memcmp(buf, "sub/a", 5), "ps/sym");
	CHECK(getxattr("ps/sub", "user.d", buf, 100) == 7 && !memcmp(buf, "dirattr", 7),
	      "ps/sub xattr");
	CHECK(access("ps/gone", F_OK) < 0 && access("ps/sub/a", F_OK) < 0,
	      "removed names stay gone");
}
