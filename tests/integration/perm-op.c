/* SPDX-License-Identifier: MIT */
/*
 * perm-op: one system call on one file, for perm-test.sh, which runs the same
 * operations as several users on ext4 and on mendfs and compares the modes
 * and ACLs they leave.  `perm-op OP PATH [ARG]` prints "OP ok" or "OP ERRNO"
 * (the errno's name) and exits 0; only bad usage exits 2.
 *
 *   append PATH        open(O_WRONLY|O_APPEND), write 2 bytes
 *   dio PATH           open(O_WRONLY|O_DIRECT), write 4096 bytes at 0
 *   mmap PATH          store a byte through a shared mapping, msync
 *   ftruncate PATH N   open(O_WRONLY), ftruncate to N
 *   truncate PATH N    truncate(2) to N
 *   otrunc PATH        open(O_WRONLY|O_TRUNC)
 *   fallocate PATH     fallocate(0, 0, 8192)
 *   copy PATH SRC      copy_file_range of SRC's first 2 bytes to PATH at 0
 *   chown PATH U G     chown(2); -1 leaves the owner or group as it is
 *   read PATH          open(O_RDONLY) and read
 *   mode PATH          "cached MODE stat MODE": first the mode the kernel has
 *                      cached (statx(STATX_MODE) asks for nothing a FUSE
 *                      mount must fetch while the attributes are valid), then
 *                      the mode stat(2) gets
 *   mk PATH MODE U G   a new 2-byte file of mode MODE (octal) owned by U:G
 *   xattrs PATH        the names of PATH's extended attributes, sorted
 *   setxattr PATH HEX  set system.posix_acl_access to the bytes HEX
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static int report(const char *op, int ret)
{
	if (ret < 0)
		printf("%s %s\n", op, strerrorname_np(errno));
	else
		printf("%s ok\n", op);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_xattrs(const char *path)
{
	char buf[4096], *names[256];
	ssize_t n = llistxattr(path, buf, sizeof(buf));
	int cnt = 0;

	if (n < 0)
		return report("xattrs", -1);
	for (char *p = buf; p < buf + n && cnt < 256; p += strlen(p) + 1)
		names[cnt++] = p;
	qsort(names, (size_t)cnt, sizeof(names[0]), cmp_str);
	printf("xattrs");
	for (int i = 0; i < cnt; i++)
		printf(" %s", names[i]);
	printf("\n");
	return 0;
}

static int set_hex(const char *path, const char *hex)
{
	unsigned char val[1024];
	size_t len = strlen(hex) / 2, i;

	if (strlen(hex) % 2 || len > sizeof(val))
		return 2;
	for (i = 0; i < len; i++) {
		unsigned b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return 2;
		val[i] = (unsigned char)b;
	}
	return report("setxattr", setxattr(path, "system.posix_acl_access", val, len, 0));
}

int main(int argc, char **argv)
{
	const char *op, *path, *arg;
	static char page[4096] __attribute__((aligned(4096)));
	struct statx sx;
	char buf[64];
	int fd, ret;

	if (argc < 3) {
		fprintf(stderr, "usage: perm-op OP PATH [ARG]\n");
		return 2;
	}
	op = argv[1];
	path = argv[2];
	arg = argc > 3 ? argv[3] : NULL;
	if (!strcmp(op, "append")) {
		fd = open(path, O_WRONLY | O_APPEND);
		ret = fd < 0 ? fd : (int)write(fd, "y\n", 2);
	} else if (!strcmp(op, "dio")) {
		memset(page, 'd', sizeof(page));
		fd = open(path, O_WRONLY | O_DIRECT);
		ret = fd < 0 ? fd : (int)pwrite(fd, page, sizeof(page), 0);
	} else if (!strcmp(op, "mmap")) {
		char *p = MAP_FAILED;

		fd = open(path, O_RDWR);
		if (fd >= 0)
			p = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ret = p == MAP_FAILED ? -1 : 0;
		if (!ret) {
			p[0] = 'm';
			ret = msync(p, 1, MS_SYNC);
			munmap(p, 1);
		}
	} else if (!strcmp(op, "ftruncate") && arg) {
		fd = open(path, O_WRONLY);
		ret = fd < 0 ? fd : ftruncate(fd, atol(arg));
	} else if (!strcmp(op, "truncate") && arg) {
		fd = -1;
		ret = truncate(path, atol(arg));
	} else if (!strcmp(op, "otrunc")) {
		fd = open(path, O_WRONLY | O_TRUNC);
		ret = fd;
	} else if (!strcmp(op, "fallocate")) {
		fd = open(path, O_WRONLY);
		ret = fd < 0 ? fd : fallocate(fd, 0, 0, 8192);
	} else if (!strcmp(op, "copy") && arg) {
		int in = open(arg, O_RDONLY);
		loff_t off_in = 0, off_out = 0;

		fd = in < 0 ? in : open(path, O_WRONLY);
		ret = fd < 0 ? fd : (int)copy_file_range(in, &off_in, fd, &off_out, 2, 0);
		if (in >= 0)
			close(in);
	} else if (!strcmp(op, "chown") && argc > 4) {
		fd = -1;
		ret = chown(path, (uid_t)atol(arg), (gid_t)atol(argv[4]));
	} else if (!strcmp(op, "read")) {
		fd = open(path, O_RDONLY);
		ret = fd < 0 ? fd : (int)read(fd, buf, sizeof(buf));
	} else if (!strcmp(op, "mode")) {
		struct stat st;

		if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MODE, &sx) || lstat(path, &st))
			return report("mode", -1);
		printf("cached %o stat %o\n", sx.stx_mode & 07777, st.st_mode & 07777);
		return 0;
	} else if (!strcmp(op, "mk") && argc > 5) {
		unlink(path);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		ret = fd < 0 ? fd : (int)write(fd, "s\n", 2);
		if (ret >= 0)
			ret = fchown(fd, (uid_t)atol(argv[4]), (gid_t)atol(argv[5]));
		if (ret >= 0)
			ret = fchmod(fd, (mode_t)strtoul(arg, NULL, 8));
		if (ret < 0) {
			perror(path);
			return 1;
		}
		close(fd);
		return 0;
	} else if (!strcmp(op, "xattrs")) {
		return list_xattrs(path);
	} else if (!strcmp(op, "setxattr") && arg) {
		return set_hex(path, arg);
	} else {
		fprintf(stderr, "perm-op: unknown operation %s\n", op);
		return 2;
	}
	report(op, ret);
	if (fd >= 0)
		close(fd);
	return 0;
}
