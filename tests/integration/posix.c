/* SPDX-License-Identifier: MIT */
/*
 * posix: POSIX behaviour checks against a live mendfs mount.  `posix CHECK DIR
 * [ARG]` runs one group of checks inside DIR (on the mount), prints one line
 * per check ("ok ..." or "FAIL ...") and exits 0 if all passed, 1 otherwise.
 * Driven by posix-test.sh, which mounts, drops privileges and remounts:
 *
 *   errors       ENOENT EEXIST ENOTDIR EISDIR ENOTEMPTY EXDEV(ARG: a dir on
 *                another fs) EINVAL ENAMETOOLONG on every namespace operation
 *   links        hard-link counts (files and directories)
 *   rename       rename over existing files and directories, flags
 *   sparse       sparse files, SEEK_DATA/SEEK_HOLE, fallocate modes
 *   times        which operations update mtime and ctime
 *   xattr        extended attributes
 *   large        a file written beyond the 4 GiB offset (and large-verify)
 *   readdir      readdir while deleting every entry read
 *   seekdir      telldir/seekdir at every entry (see check_seekdir)
 *   many         ARG files in one directory: create, list, stat, delete
 *   concurrent   threads writing one file and different files
 *   concurrent-ns  processes racing on one namespace, then its consistency
 *                (ARG "verify": only the consistency, after a remount)
 *   perm-prep    (root) lay out files for perm; perm (as nobody) and
 *   perm-root    (root, after perm) the permission and ownership rules
 *   enospc       fill the filesystem to ENOSPC, delete, write again
 *   enospc-inodes  run out of inodes, delete, create again
 *   mmap         a shared writable mapping
 *   persist / persist-verify   data that must survive unmount/remount
 *
 * This file: the shared helpers and main(); the checks by topic in
 * posix_names.c (names and directories), posix_data.c (file data, times,
 * xattrs, space, persistence) and posix_perm.c (permissions).
 */
#include "posix.h"

int failures, checks;
bool check_quiet;

bool writeback_mode;

void put_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);

	CHECK(fd >= 0, "create %s", path);
	if (fd < 0)
		return;
	CHECK(write(fd, data, len) == (ssize_t)len, "write %s", path);
	CHECK(close(fd) == 0, "close %s", path);
}

int has_content(const char *path, const char *want)
{
	char buf[256];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n == (ssize_t)strlen(want) && !memcmp(buf, want, (size_t)n);
}

mode_t mode_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) ? 0 : st.st_mode;
}

int main(int argc, char **argv)
{
	const char *check, *arg;

	if (argc < 3) {
		fprintf(stderr, "usage: posix CHECK DIR [ARG]\n");
		return 1;
	}
	check = argv[1];
	arg = argc > 3 ? argv[3] : NULL;
	writeback_mode = getenv("MENDFS_OPTS") && strstr(getenv("MENDFS_OPTS"), "writeback");
	if (chdir(argv[2])) {
		perror(argv[2]);
		return 1;
	}
	umask(022);
	if (!strcmp(check, "errors"))
		check_errors(arg);
	else if (!strcmp(check, "links"))
		check_links();
	else if (!strcmp(check, "rename"))
		check_rename();
	else if (!strcmp(check, "sparse"))
		check_sparse();
	else if (!strcmp(check, "times"))
		check_times();
	else if (!strcmp(check, "xattr"))
		check_xattr();
	else if (!strcmp(check, "large"))
		check_large(0);
	else if (!strcmp(check, "large-verify"))
		check_large(1);
	else if (!strcmp(check, "many"))
		check_many(arg ? atol(arg) : 100000);
	else if (!strcmp(check, "readdir"))
		check_readdir();
	else if (!strcmp(check, "seekdir"))
		check_seekdir();
	else if (!strcmp(check, "concurrent"))
		check_concurrent();
	else if (!strcmp(check, "concurrent-ns"))
		check_concurrent_ns(arg);
	else if (!strcmp(check, "perm-prep"))
		perm_prep();
	else if (!strcmp(check, "perm"))
		check_perm();
	else if (!strcmp(check, "perm-root"))
		check_perm_root();
	else if (!strcmp(check, "enospc"))
		check_enospc();
	else if (!strcmp(check, "enospc-inodes"))
		check_enospc_inodes();
	else if (!strcmp(check, "mmap"))
		check_mmap();
	else if (!strcmp(check, "persist"))
		check_persist(0);
	else if (!strcmp(check, "persist-verify"))
		check_persist(1);
	else {
		fprintf(stderr, "posix: unknown check %s\n", check);
		return 1;
	}
	printf("posix %s: %d checks, %d failed\n", check, checks, failures);
	return failures ? 1 : 0;
}
