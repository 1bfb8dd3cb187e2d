/* SPDX-License-Identifier: MIT */
/*
 * fsops: system-call checks on a mounted mendfs.  `fsops CHECK DIR` runs one
 * check inside DIR (a directory on the mount) and exits 0 pass / 1 fail:
 *
 *   basic     create/write/read/stat/unlink, mkdir/rmdir (ENOTEMPTY),
 *             symlink/readlink, link counts, rename (NOREPLACE, EXCHANGE),
 *             xattrs, truncate, fallocate, SEEK_DATA/SEEK_HOLE, readdir of
 *             1000 files, unlinked-but-open files, copy_file_range
 *   populate  write the files that `verify` checks (persistence across mounts)
 *   verify    check them
 *   fsynced   write and fsync a file (before a kill -9)
 *   fsynced-verify  check it after the remount
 *   rofs      on a read-only mount: reads work, every write fails with EROFS
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"

static int xrenameat2(const char *from, const char *to, unsigned flags)
{
	return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

static void put_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	CHECK(fd >= 0, "create %s", path);
	if (fd < 0)
		return;
	CHECK(write(fd, data, len) == (ssize_t)len, "write %s", path);
	CHECK(close(fd) == 0, "close %s", path);
}

static ssize_t get_file(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len);
	close(fd);
	return n;
}

static void check_content(const char *path, const char *want)
{
	char buf[256];
	ssize_t n = get_file(path, buf, sizeof(buf));

	CHECK(n == (ssize_t)strlen(want) && !memcmp(buf, want, (size_t)n), "content of %s", path);
}

static void basic_files(void)
{
	char buf[8192], big[100000];
	struct stat st;
	ssize_t n;
	size_t i;
	int fd;

	put_file("f1", "hello world\n", 12);
	CHECK(stat("f1", &st) == 0 && st.st_size == 12 && S_ISREG(st.st_mode) &&
	              (st.st_mode & 0777) == 0644 && st.st_nlink == 1,
	      "stat f1");
	check_content("f1", "hello world\n");
	/* a bigger file with a pattern, read back at odd offsets */
	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + i / 4096);
	put_file("big", big, sizeof(big));
	fd = open("big", O_RDONLY);
	CHECK(fd >= 0, "open big");
	n = pread(fd, buf, 5000, 4093);
	CHECK(n == 5000 && !memcmp(buf, big + 4093, 5000), "pread big at 4093");
	n = pread(fd, buf, sizeof(buf), sizeof(big) - 10);
	CHECK(n == 10, "short read at EOF: %zd", n);
	close(fd);
	/* O_EXCL on an existing file, O_TRUNC */
	CHECK(open("f1", O_CREAT | O_EXCL | O_WRONLY, 0600) < 0 && errno == EEXIST, "O_EXCL");
	fd = open("big", O_WRONLY | O_TRUNC);
	CHECK(fd >= 0, "O_TRUNC open");
	close(fd);
	CHECK(stat("big", &st) == 0 && st.st_size == 0, "O_TRUNC size %lld", (long long)st.st_size);
	CHECK(unlink("f1") == 0, "unlink f1");
	CHECK(stat("f1", &st) < 0 && errno == ENOENT, "f1 gone");
	CHECK(unlink("f1") < 0 && errno == ENOENT, "unlink twice");
	CHECK(unlink("big") == 0, "unlink big");
}

static void basic_dirs(void)
{
	struct stat st;

	CHECK(mkdir("d", 0755) == 0, "mkdir d");
	CHECK(mkdir("d", 0755) < 0 && errno == EEXIST, "mkdir d twice");
	CHECK(stat("d", &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 2, "stat d nlink %lu",
	      (unsigned long)st.st_nlink);
	CHECK(mkdir("d/sub", 0700) == 0, "mkdir d/sub");
	CHECK(stat("d", &st) == 0 && st.st_nlink == 3, "d nlink with a subdir: %lu",
	      (unsigned long)st.st_nlink);
	put_file("d/sub/x", "x", 1);
	CHECK(rmdir("d/sub") < 0 && errno == ENOTEMPTY, "rmdir non-empty");
	CHECK(rmdir("d/sub/x") < 0 && errno == ENOTDIR, "rmdir a file");
	CHECK(unlink("d/sub") < 0 && (errno == EISDIR || errno == EPERM), "unlink a dir");
	CHECK(unlink("d/sub/x") == 0, "unlink x");
	CHECK(rmdir("d/sub") == 0, "rmdir d/sub");
	CHECK(stat("d", &st) == 0 && st.st_nlink == 2, "d nlink back to 2");
	CHECK(rmdir("d") == 0, "rmdir d");

	/* a setgid directory hands its group down, and its setgid bit to subdirectories */
	CHECK(mkdir("sg", 0755) == 0 && chown("sg", 0, 4321) == 0 && chmod("sg", 02775) == 0,
	      "setgid dir");
	put_file("sg/f", "", 0);
	CHECK(stat("sg/f", &st) == 0 && st.st_gid == 4321, "group inherited: %u",
	      (unsigned)st.st_gid);
	CHECK(mkdir("sg/d", 0755) == 0 && stat("sg/d", &st) == 0 && st.st_gid == 4321 &&
	              (st.st_mode & S_ISGID),
	      "setgid inherited");
	CHECK(unlink("sg/f") == 0 && rmdir("sg/d") == 0 && rmdir("sg") == 0, "cleanup sg");
}

static void basic_links(void)
{
	char buf[PATH_MAX];
	struct stat st, st2;
	char longt[3000];
	ssize_t n;

	CHECK(symlink("target/path", "sl") == 0, "symlink");
	n = readlink("sl", buf, sizeof(buf));
	CHECK(n == 11 && !memcmp(buf, "target/path", 11), "readlink");
	CHECK(lstat("sl", &st) == 0 && S_ISLNK(st.st_mode) && st.st_size == 11, "lstat sl");
	memset(longt, 'a', sizeof(longt) - 1);
	longt[sizeof(longt) - 1] = '\0';
	CHECK(symlink(longt, "sl2") == 0, "long symlink");
	n = readlink("sl2", buf, sizeof(buf));
	CHECK(n == (ssize_t)strlen(longt) && !memcmp(buf, longt, (size_t)n), "long readlink");
	put_file("orig", "data", 4);
	CHECK(symlink("orig", "sl3") == 0 && stat("sl3", &st) == 0 && st.st_size == 4,
	      "follow symlink");

	CHECK(link("orig", "hard") == 0, "link");
	CHECK(stat("orig", &st) == 0 && st.st_nlink == 2, "nlink 2");
	CHECK(stat("hard", &st2) == 0 && st2.st_ino == st.st_ino, "same inode");
	CHECK(link("orig", "hard") < 0 && errno == EEXIST, "link onto existing");
	CHECK(unlink("orig") == 0 && stat("hard", &st) == 0 && st.st_nlink == 1, "nlink 1");
	check_content("hard", "data");
	CHECK(unlink("hard") == 0 && unlink("sl") == 0 && unlink("sl2") == 0 && unlink("sl3") == 0,
	      "cleanup links");
}

static void basic_rename(void)
{
	struct stat st;

	put_file("a", "A", 1);
	put_file("b", "B", 1);
	CHECK(xrenameat2("a", "b", RENAME_NOREPLACE) < 0 && errno == EEXIST, "NOREPLACE");
	CHECK(xrenameat2("a", "b", RENAME_EXCHANGE) == 0, "EXCHANGE");
	check_content("a", "B");
	check_content("b", "A");
	CHECK(xrenameat2("a", "c", RENAME_EXCHANGE) < 0 && errno == ENOENT, "EXCHANGE, no target");
	CHECK(xrenameat2("a", "c", RENAME_NOREPLACE) == 0, "NOREPLACE to a new name");
	CHECK(rename("c", "b") == 0, "rename over");
	check_content("b", "B");
	CHECK(stat("a", &st) < 0 && stat("c", &st) < 0, "old names gone");
	CHECK(mkdir("rd", 0755) == 0 && mkdir("rd/in", 0755) == 0, "mkdir rd/in");
	CHECK(rename("rd", "rd/in/x") < 0 && errno == EINVAL, "rename into own subdir");
	CHECK(rename("b", "rd/in/b") == 0, "rename across dirs");
	check_content("rd/in/b", "B");
	CHECK(mkdir("rd2", 0755) == 0 && rename("rd/in", "rd2/in") == 0, "move a directory");
	CHECK(stat("rd", &st) == 0 && st.st_nlink == 2, "old parent nlink");
	CHECK(stat("rd2", &st) == 0 && st.st_nlink == 3, "new parent nlink");
	CHECK(unlink("rd2/in/b") == 0 && rmdir("rd2/in") == 0 && rmdir("rd2") == 0 &&
	              rmdir("rd") == 0,
	      "cleanup rename");
}

static void basic_xattrs(void)
{
	char buf[4096], big[900], huge[2000];
	ssize_t n;

	put_file("xf", "", 0);
	CHECK(setxattr("xf", "user.one", "1", 1, 0) == 0, "setxattr");
	CHECK(setxattr("xf", "user.one", "x", 1, XATTR_CREATE) < 0 && errno == EEXIST,
	      "XATTR_CREATE");
	CHECK(setxattr("xf", "user.two", "x", 1, XATTR_REPLACE) < 0 && errno == ENODATA,
	      "XATTR_REPLACE");
	memset(big, 'v', sizeof(big));
	/* beyond the inode's inline area, into the xattr tree (values up to ~1 KiB) */
	CHECK(setxattr("xf", "user.big", big, sizeof(big), 0) == 0, "big xattr");
	memset(huge, 'h', sizeof(huge));
	/* beyond a tree record: out of line, up to XATTR_SIZE_MAX */
	CHECK(setxattr("xf", "user.huge", huge, sizeof(huge), 0) == 0, "value out of line");
	CHECK(getxattr("xf", "user.huge", NULL, 0) == (ssize_t)sizeof(huge), "huge size");
	CHECK(removexattr("xf", "user.huge") == 0, "remove huge");
	{
		static char max[65537], got[65536];

		for (size_t i = 0; i < sizeof(max); i++)
			max[i] = (char)(i * 7 + 1);
		CHECK(setxattr("xf", "user.max", max, 65536, 0) == 0, "65536-byte xattr");
		CHECK(getxattr("xf", "user.max", NULL, 0) == 65536, "size query of 65536");
		CHECK(getxattr("xf", "user.max", got, 65535) < 0 && errno == ERANGE, "ERANGE 64K");
		CHECK(getxattr("xf", "user.max", got, sizeof(got)) == 65536 &&
		              !memcmp(got, max, sizeof(got)),
		      "65536-byte value");
		CHECK(setxattr("xf", "user.max", max, sizeof(max), 0) < 0 && errno == E2BIG,
		      "past XATTR_SIZE_MAX");
		/* large -> small -> large */
		CHECK(setxattr("xf", "user.max", "s", 1, XATTR_REPLACE) == 0, "large to small");
		CHECK(getxattr("xf", "user.max", got, sizeof(got)) == 1 && got[0] == 's', "small");
		CHECK(setxattr("xf", "user.max", max + 1, 30000, XATTR_REPLACE) == 0,
		      "small to large");
		CHECK(getxattr("xf", "user.max", got, sizeof(got)) == 30000 &&
		              !memcmp(got, max + 1, 30000),
		      "large again");
		CHECK(removexattr("xf", "user.max") == 0, "remove large");
	}
	n = getxattr("xf", "user.one", buf, sizeof(buf));
	CHECK(n == 1 && buf[0] == '1', "getxattr");
	CHECK(getxattr("xf", "user.big", NULL, 0) == (ssize_t)sizeof(big), "getxattr size");
	n = getxattr("xf", "user.big", buf, sizeof(buf));
	CHECK(n == (ssize_t)sizeof(big) && !memcmp(buf, big, sizeof(big)), "big value");
	CHECK(getxattr("xf", "user.big", buf, 10) < 0 && errno == ERANGE, "ERANGE");
	CHECK(getxattr("xf", "user.none", buf, sizeof(buf)) < 0 && errno == ENODATA, "ENODATA");
	n = listxattr("xf", buf, sizeof(buf));
	CHECK(n == (ssize_t)(sizeof("user.one") + sizeof("user.big")), "listxattr %zd", n);
	CHECK(removexattr("xf", "user.one") == 0, "removexattr");
	CHECK(getxattr("xf", "user.one", buf, sizeof(buf)) < 0 && errno == ENODATA, "removed");
	CHECK(unlink("xf") == 0, "unlink xf");
}

static void basic_sizes(void)
{
	char buf[16384];
	struct stat st;
	off_t off;
	int fd;

	fd = open("sz", O_CREAT | O_RDWR, 0644);
	CHECK(fd >= 0, "create sz");
	CHECK(pwrite(fd, "abc", 3, 0) == 3, "write");
	CHECK(ftruncate(fd, 100000) == 0 && fstat(fd, &st) == 0 && st.st_size == 100000,
	      "ftruncate up");
	memset(buf, 1, sizeof(buf));
	CHECK(pread(fd, buf, 10, 50000) == 10 && !memcmp(buf, "\0\0\0\0\0\0\0\0\0\0", 10),
	      "zeros after extension");
	CHECK(truncate("sz", 2) == 0 && stat("sz", &st) == 0 && st.st_size == 2, "truncate down");
	CHECK(pread(fd, buf, 10, 0) == 2 && !memcmp(buf, "ab", 2), "truncated content");

	/* fallocate and SEEK_DATA / SEEK_HOLE: data at [0, 4K) and [1M, 1M+4K) */
	CHECK(ftruncate(fd, 0) == 0, "truncate 0");
	memset(buf, 'd', 4096);
	CHECK(pwrite(fd, buf, 4096, 0) == 4096, "write block 0");
	CHECK(pwrite(fd, buf, 4096, 1 << 20) == 4096, "write at 1M");
	CHECK(fstat(fd, &st) == 0 && st.st_size == (1 << 20) + 4096, "sparse size");
	off = lseek(fd, 0, SEEK_DATA);
	CHECK(off == 0, "SEEK_DATA 0: %lld", (long long)off);
	off = lseek(fd, 0, SEEK_HOLE);
	CHECK(off == 4096, "SEEK_HOLE 0: %lld", (long long)off);
	off = lseek(fd, 4096, SEEK_DATA);
	CHECK(off == 1 << 20, "SEEK_DATA 4096: %lld", (long long)off);
	off = lseek(fd, (1 << 20) + 4096, SEEK_DATA);
	CHECK(off < 0 && errno == ENXIO, "SEEK_DATA at EOF");
	CHECK(fallocate(fd, 0, 8192, 8192) == 0, "fallocate");
	CHECK(fallocate(fd, FALLOC_FL_KEEP_SIZE, (1 << 20) + 4096, 65536) == 0 &&
	              fstat(fd, &st) == 0 && st.st_size == (1 << 20) + 4096,
	      "fallocate KEEP_SIZE");
	CHECK(pread(fd, buf, 100, 8192) == 100 && !memcmp(buf, "\0\0\0\0\0\0\0\0", 8),
	      "preallocated reads zeros");
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0,
	      "punch hole");
	off = lseek(fd, 0, SEEK_DATA);
	CHECK(off == 1 << 20, "SEEK_DATA after punch: %lld", (long long)off);
	CHECK(fallocate(fd, 0, 3 << 20, 4096) == 0 && fstat(fd, &st) == 0 &&
	              st.st_size == (3 << 20) + 4096,
	      "fallocate extends");
	close(fd);
	CHECK(unlink("sz") == 0, "unlink sz");
}

static void basic_readdir(void)
{
	static char seen[1000];
	char name[64];
	struct dirent *de;
	DIR *dir;
	int i, n = 0, dots = 0;

	CHECK(mkdir("many", 0755) == 0, "mkdir many");
	for (i = 0; i < 1000; i++) {
		int fd;

		snprintf(name, sizeof(name), "many/file-%04d", i);
		fd = open(name, O_CREAT | O_WRONLY, 0644);
		CHECK(fd >= 0, "create %s", name);
		if (fd >= 0)
			close(fd);
	}
	dir = opendir("many");
	CHECK(dir != NULL, "opendir");
	while (dir && (de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
			dots++;
			continue;
		}
		if (sscanf(de->d_name, "file-%d", &i) == 1 && i >= 0 && i < 1000 && !seen[i]) {
			seen[i] = 1;
			n++;
		} else {
			CHECK(0, "unexpected or repeated entry %s", de->d_name);
		}
	}
	if (dir)
		closedir(dir);
	CHECK(n == 1000 && dots == 2, "readdir saw %d entries and %d dots", n, dots);
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "many/file-%04d", i);
		CHECK(unlink(name) == 0, "unlink %s", name);
	}
	CHECK(rmdir("many") == 0, "rmdir many");
}

static void basic_open_unlinked(void)
{
	char buf[16];
	int fd;

	fd = open("tmpf", O_CREAT | O_RDWR, 0600);
	CHECK(fd >= 0, "create tmpf");
	CHECK(write(fd, "still here", 10) == 10, "write tmpf");
	CHECK(unlink("tmpf") == 0, "unlink open file");
	CHECK(pread(fd, buf, sizeof(buf), 0) == 10 && !memcmp(buf, "still here", 10),
	      "read unlinked open file");
	CHECK(pwrite(fd, "!", 1, 10) == 1, "write unlinked open file");
	close(fd);
}

static void basic_copy_range(void)
{
	char buf[20000], out[20000];
	loff_t in_off = 100, out_off = 0;
	ssize_t n;
	int in, outfd;
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i % 251);
	put_file("cin", buf, sizeof(buf));
	in = open("cin", O_RDONLY);
	outfd = open("cout", O_CREAT | O_RDWR, 0644);
	CHECK(in >= 0 && outfd >= 0, "open copy files");
	n = copy_file_range(in, &in_off, outfd, &out_off, 15000, 0);
	CHECK(n == 15000, "copy_file_range %zd", n);
	CHECK(pread(outfd, out, sizeof(out), 0) == 15000 && !memcmp(out, buf + 100, 15000),
	      "copied bytes");
	close(in);
	close(outfd);
	CHECK(unlink("cin") == 0 && unlink("cout") == 0, "cleanup copy");
}

#define XNAMES 500 /* names of 25 bytes: a list of 13 KiB */
#define XACL   300 /* named users in keep/xl's access ACL */

/* keep/xl: a 65536-byte value, XNAMES names and an ACL of XACL + 4 entries. */
static void populate_xattrs(void)
{
	static char max[65536], acl[4 + 8 * (XACL + 4)];
	char *e = acl + 4, name[32];
	unsigned i;

	for (i = 0; i < sizeof(max); i++)
		max[i] = (char)(i * 11 + 3);
	put_file("keep/xl", "", 0);
	CHECK(setxattr("keep/xl", "user.max", max, sizeof(max), 0) == 0, "keep/xl user.max");
	for (i = 0; i < XNAMES; i++) {
		snprintf(name, sizeof(name), "user.name-%05u-abcdefghi", i);
		CHECK(setxattr("keep/xl", name, "v", 1, 0) == 0, "keep/xl %s", name);
	}
	/* Linux's posix_acl_xattr: version 2, then (u16 tag, u16 perm, u32 id) entries */
#define ENT(tag, perm, id)                                                                         \
	do {                                                                                       \
		uint16_t t_ = (tag), p_ = (perm);                                                  \
		uint32_t i_ = (id);                                                                \
		memcpy(e, &t_, 2);                                                                 \
		memcpy(e + 2, &p_, 2);                                                             \
		memcpy(e + 4, &i_, 4);                                                             \
		e += 8;                                                                            \
	} while (0)
	acl[0] = 2;
	ENT(0x01, 6, ~0u);
	for (i = 0; i < XACL; i++)
		ENT(0x02, 4, 2000 + i);
	ENT(0x04, 4, ~0u);
	ENT(0x10, 6, ~0u);
	ENT(0x20, 0, ~0u);
#undef ENT
	CHECK(setxattr("keep/xl", "system.posix_acl_access", acl, sizeof(acl), 0) == 0,
	      "ACL of %u entries", XACL + 4);
}

static void verify_xattrs(void)
{
	static char max[65536], got[65536], list[65536];
	ssize_t n, off;
	unsigned names = 0;

	for (size_t i = 0; i < sizeof(max); i++)
		max[i] = (char)(i * 11 + 3);
	CHECK(getxattr("keep/xl", "user.max", NULL, 0) == 65536, "keep/xl user.max size");
	CHECK(getxattr("keep/xl", "user.max", got, sizeof(got)) == 65536 &&
	              !memcmp(got, max, sizeof(max)),
	      "keep/xl user.max after remount");
	n = llistxattr("keep/xl", NULL, 0);
	CHECK(n > 4096, "llistxattr size %zd", n);
	CHECK(llistxattr("keep/xl", list, (size_t)n - 1) < 0 && errno == ERANGE, "list ERANGE");
	CHECK(llistxattr("keep/xl", list, sizeof(list)) == n, "llistxattr");
	for (off = 0; off < n; off += (ssize_t)strlen(list + off) + 1)
		names += !strncmp(list + off, "user.name-", 10);
	CHECK(names == XNAMES, "%u names listed", names);
	CHECK(getxattr("keep/xl", "system.posix_acl_access", NULL, 0) == 4 + 8 * (XACL + 4),
	      "ACL of %u entries after remount", XACL + 4);
}

static void populate(void)
{
	char big[300000];
	size_t i;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 13);
	CHECK(mkdir("keep", 0750) == 0, "mkdir keep");
	put_file("keep/small", "persistent\n", 11);
	put_file("keep/big", big, sizeof(big));
	CHECK(symlink("small", "keep/link") == 0, "symlink keep/link");
	CHECK(setxattr("keep/small", "user.k", "v1", 2, 0) == 0, "xattr keep/small");
	populate_xattrs();
}

static void verify(void)
{
	char big[300000], buf[300001], v[8];
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 13);
	CHECK(stat("keep", &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0750,
	      "keep dir");
	check_content("keep/small", "persistent\n");
	CHECK(get_file("keep/big", buf, sizeof(buf)) == (ssize_t)sizeof(big) &&
	              !memcmp(buf, big, sizeof(big)),
	      "keep/big");
	CHECK(readlink("keep/link", buf, sizeof(buf)) == 5 && !memcmp(buf, "small", 5),
	      "keep/link");
	CHECK(getxattr("keep/small", "user.k", v, sizeof(v)) == 2 && !memcmp(v, "v1", 2),
	      "keep xattr");
	verify_xattrs();
}

static void fsynced(void)
{
	int fd = open("synced", O_CREAT | O_WRONLY | O_TRUNC, 0644);

	CHECK(fd >= 0, "create synced");
	CHECK(write(fd, "durable data\n", 13) == 13, "write synced");
	CHECK(fsync(fd) == 0, "fsync");
	CHECK(mkdir("synced-dir", 0755) == 0, "mkdir synced-dir");
	fd = open(".", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0 && fsync(fd) == 0, "fsync dir");
	close(fd);
}

static void fsynced_verify(void)
{
	struct stat st;

	check_content("synced", "durable data\n");
	CHECK(stat("synced-dir", &st) == 0 && S_ISDIR(st.st_mode), "synced-dir");
}

static void rofs(void)
{
	struct stat st;
	int fd;

	check_content("keep/small", "persistent\n");
	errno = 0;
	fd = open("new", O_CREAT | O_WRONLY, 0644);
	CHECK(fd < 0 && errno == EROFS, "create on ro");
	CHECK(open("keep/small", O_WRONLY) < 0 && errno == EROFS, "open for write on ro");
	CHECK(mkdir("nd", 0755) < 0 && errno == EROFS, "mkdir on ro");
	CHECK(unlink("keep/small") < 0 && errno == EROFS, "unlink on ro");
	CHECK(rename("keep/small", "keep/s2") < 0 && errno == EROFS, "rename on ro");
	CHECK(truncate("keep/small", 0) < 0 && errno == EROFS, "truncate on ro");
	CHECK(chmod("keep/small", 0600) < 0 && errno == EROFS, "chmod on ro");
	CHECK(setxattr("keep/small", "user.n", "1", 1, 0) < 0 && errno == EROFS, "setxattr on ro");
	CHECK(symlink("x", "sl") < 0 && errno == EROFS, "symlink on ro");
	CHECK(stat("keep/small", &st) == 0 && st.st_size == 11, "unchanged");
}

int main(int argc, char **argv)
{
	const char *check;

	if (argc != 3) {
		fprintf(stderr, "usage: fsops CHECK DIR\n");
		return 1;
	}
	check = argv[1];
	if (chdir(argv[2])) {
		perror(argv[2]);
		return 1;
	}
	umask(022);
	check_quiet = true; /* the failures only: some checks run 1000 times */
	if (!strcmp(check, "basic")) {
		basic_files();
		basic_dirs();
		basic_links();
		basic_rename();
		basic_xattrs();
		basic_sizes();
		basic_readdir();
		basic_open_unlinked();
		basic_copy_range();
	} else if (!strcmp(check, "populate")) {
		populate();
	} else if (!strcmp(check, "verify")) {
		verify();
	} else if (!strcmp(check, "fsynced")) {
		fsynced();
	} else if (!strcmp(check, "fsynced-verify")) {
		fsynced_verify();
	} else if (!strcmp(check, "rofs")) {
		rofs();
	} else {
		fprintf(stderr, "fsops: unknown check %s\n", check);
		return 1;
	}
	if (failures)
		fprintf(stderr, "fsops %s: %d failure(s)\n", check, failures);
	return failures ? 1 : 0;
}
