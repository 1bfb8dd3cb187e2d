/* SPDX-License-Identifier: MIT */
/*
 * posix_names.c: the posix program's checks of names and directories:
 * errors of every namespace operation, hard-link counts, rename, many files
 * in one directory, readdir while deleting, telldir/seekdir, and processes
 * racing on one namespace.
 */
#include "posix.h"

static int xrenameat2(const char *from, const char *to, unsigned flags)
{
	return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

static nlink_t nlink_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) ? 0 : st.st_nlink;
}

/* --- errors ---------------------------------------------------------------------------- */

void check_errors(const char *other)
{
	char longname[300], path[PATH_MAX];
	struct stat st;
	int fd;

	CHECK(mkdir("e", 0755) == 0 && chdir("e") == 0, "mkdir e");
	put_file("f", "x", 1, 0644);
	CHECK(mkdir("d", 0755) == 0 && mkdir("full", 0755) == 0, "mkdir d full");
	put_file("full/x", "x", 1, 0644);

	/* ENOENT */
	ERR(open("nope", O_RDONLY), ENOENT, "open missing: ENOENT");
	ERR(stat("nope/x", &st), ENOENT, "stat under a missing dir: ENOENT");
	ERR(open("nope/x", O_CREAT | O_WRONLY, 0644), ENOENT, "create under a missing dir: ENOENT");
	ERR(unlink("nope"), ENOENT, "unlink missing: ENOENT");
	ERR(rmdir("nope"), ENOENT, "rmdir missing: ENOENT");
	ERR(rename("nope", "n2"), ENOENT, "rename missing: ENOENT");
	ERR(link("nope", "n2"), ENOENT, "link missing: ENOENT");
	ERR(mkdir("nope/d", 0755), ENOENT, "mkdir under a missing dir: ENOENT");
	ERR(symlink("t", "nope/s"), ENOENT, "symlink under a missing dir: ENOENT");
	ERR(truncate("nope", 0), ENOENT, "truncate missing: ENOENT");
	ERR(chmod("nope", 0644), ENOENT, "chmod missing: ENOENT");
	ERR(readlink("nope", path, sizeof(path)), ENOENT, "readlink missing: ENOENT");
	ERR(getxattr("nope", "user.a", path, 10), ENOENT, "getxattr missing: ENOENT");
	CHECK(symlink("nope", "dangling") == 0, "dangling symlink");
	ERR(open("dangling", O_RDONLY), ENOENT, "open dangling symlink: ENOENT");
	ERR(readlink("f", path, sizeof(path)), EINVAL, "readlink a file: EINVAL");

	/* EEXIST */
	ERR(mkdir("f", 0755), EEXIST, "mkdir over a file: EEXIST");
	ERR(mkdir("d", 0755), EEXIST, "mkdir over a dir: EEXIST");
	ERR(open("f", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST, "O_EXCL: EEXIST");
	ERR(open("dangling", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST,
	    "O_EXCL on a dangling symlink: EEXIST");
	ERR(link("f", "d"), EEXIST, "link onto a dir: EEXIST");
	ERR(symlink("t", "f"), EEXIST, "symlink over a file: EEXIST");
	ERR(mknod("f", S_IFIFO | 0644, 0), EEXIST, "mknod over a file: EEXIST");
	ERR(xrenameat2("f", "d", RENAME_NOREPLACE), EEXIST, "RENAME_NOREPLACE: EEXIST");

	/* ENOTDIR */
	ERR(open("f/x", O_RDONLY), ENOTDIR, "open f/x: ENOTDIR");
	ERR(open("f/x", O_CREAT | O_WRONLY, 0644), ENOTDIR, "create f/x: ENOTDIR");
	ERR(mkdir("f/x", 0755), ENOTDIR, "mkdir f/x: ENOTDIR");
	ERR(rmdir("f"), ENOTDIR, "rmdir a file: ENOTDIR");
	ERR(open("f", O_RDONLY | O_DIRECTORY), ENOTDIR, "O_DIRECTORY on a file: ENOTDIR");
	ERR(rename("d", "f"), ENOTDIR, "rename a dir over a file: ENOTDIR");
	ERR(rename("f/", "g"), ENOTDIR, "rename f/: ENOTDIR");
	CHECK(opendir("f") == NULL && errno == ENOTDIR, "opendir a file: ENOTDIR");

	/* EISDIR */
	ERR(open("d", O_WRONLY), EISDIR, "open a dir for writing: EISDIR");
	ERR(open("d", O_RDWR), EISDIR, "open a dir O_RDWR: EISDIR");
	ERR(unlink("d"), EISDIR, "unlink a dir: EISDIR");
	ERR(rename("f", "d"), EISDIR, "rename a file over a dir: EISDIR");
	ERR(truncate("d", 0), EISDIR, "truncate a dir: EISDIR");
	fd = open("d", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0, "open d read-only");
	if (fd >= 0) {
		char b[4];

		ERR(read(fd, b, sizeof(b)), EISDIR, "read a dir: EISDIR");
		close(fd);
	}

	/* ENOTEMPTY */
	ERR(rmdir("full"), ENOTEMPTY, "rmdir non-empty: ENOTEMPTY");
	CHECK((errno = 0, rename("d", "full") < 0 && (errno == ENOTEMPTY || errno == EEXIST)),
	      "rename a dir over a non-empty dir: ENOTEMPTY");

	/* EXDEV: to another filesystem */
	if (other) {
		snprintf(path, sizeof(path), "%s/xdev", other);
		ERR(rename("f", path), EXDEV, "rename to another fs: EXDEV");
		ERR(link("f", path), EXDEV, "link to another fs: EXDEV");
		CHECK(has_content("f", "x"), "f still there after EXDEV");
	}

	/* EINVAL */
	CHECK(mkdir("d/sub", 0755) == 0, "mkdir d/sub");
	ERR(rename("d", "d/sub/x"), EINVAL, "rename a dir into its own subdir: EINVAL");
	ERR(rename("d", "d/x"), EINVAL, "rename a dir into itself: EINVAL");
	ERR(rename(".", "x"), EBUSY, "rename .: EBUSY");
	ERR(rename("d/sub/..", "x"), EBUSY, "rename ..: EBUSY");
	ERR(rmdir("."), EINVAL, "rmdir .: EINVAL");
	ERR(rmdir("d/sub/.."), ENOTEMPTY, "rmdir ..: ENOTEMPTY");
	ERR(xrenameat2("f", "d", RENAME_NOREPLACE | RENAME_EXCHANGE), EINVAL,
	    "NOREPLACE|EXCHANGE: EINVAL");
	ERR(xrenameat2("f", "g", 0x80000), EINVAL, "unknown rename flag: EINVAL");
	ERR(xrenameat2("d", "d/sub", RENAME_EXCHANGE), EINVAL,
	    "exchange a dir with its subdir: EINVAL");
	fd = open("f", O_RDWR);
	CHECK(fd >= 0, "open f");
	if (fd >= 0) {
		ERR(ftruncate(fd, -1), EINVAL, "negative ftruncate: EINVAL");
		ERR(lseek(fd, -1, SEEK_SET), EINVAL, "negative lseek: EINVAL");
		ERR(fallocate(fd, 0, 0, 0), EINVAL, "fallocate length 0: EINVAL");
		ERR(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP,
		    "PUNCH_HOLE without KEEP_SIZE: EOPNOTSUPP");
		close(fd);
	}
	CHECK(rename("f", "f") == 0 && has_content("f", "x"), "rename onto itself is a no-op");

	/* ENAMETOOLONG */
	memset(longname, 'n', 255);
	longname[255] = '\0';
	fd = open(longname, O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0, "create a 255-byte name");
	if (fd >= 0)
		close(fd);
	CHECK(stat(longname, &st) == 0, "stat a 255-byte name");
	CHECK(unlink(longname) == 0, "unlink a 255-byte name");
	longname[255] = 'n';
	longname[256] = '\0';
	ERR(open(longname, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG,
	    "create 256 bytes: ENAMETOOLONG");
	ERR(mkdir(longname, 0755), ENAMETOOLONG, "mkdir 256: ENAMETOOLONG");
	ERR(stat(longname, &st), ENAMETOOLONG, "stat 256: ENAMETOOLONG");
	ERR(rename("f", longname), ENAMETOOLONG, "rename to 256: ENAMETOOLONG");
	ERR(link("f", longname), ENAMETOOLONG, "link to 256: ENAMETOOLONG");
	ERR(symlink("f", longname), ENAMETOOLONG, "symlink named 256: ENAMETOOLONG");

	/* cleanup */
	CHECK(unlink("f") == 0 && unlink("dangling") == 0 && unlink("full/x") == 0 &&
	              rmdir("full") == 0 && rmdir("d/sub") == 0 && rmdir("d") == 0,
	      "cleanup errors");
	CHECK(chdir("..") == 0 && rmdir("e") == 0, "rmdir e");
}

/* --- links ----------------------------------------------------------------------------- */

void check_links(void)
{
	char name[32];
	struct stat st1, st2;
	int i;

	CHECK(mkdir("l", 0755) == 0 && chdir("l") == 0, "mkdir l");
	put_file("a", "data", 4, 0644);
	CHECK(nlink_of("a") == 1, "new file nlink 1");
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "h%d", i);
		if (link("a", name))
			break;
	}
	CHECK(i == 20 && nlink_of("a") == 21, "20 links: nlink %lu", (unsigned long)nlink_of("a"));
	CHECK(stat("a", &st1) == 0 && stat("h7", &st2) == 0 && st1.st_ino == st2.st_ino &&
	              st1.st_ctime >= st2.st_ctime,
	      "links share the inode");
	for (i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "h%d", i);
		unlink(name);
	}
	CHECK(nlink_of("h19") == 11, "after 10 unlinks: nlink %lu", (unsigned long)nlink_of("h19"));
	CHECK(unlink("a") == 0 && has_content("h15", "data"), "content through a remaining link");
	CHECK(rename("h10", "h11") == 0 && nlink_of("h11") == 10 && nlink_of("h10") == 10,
	      "rename onto another link of the same inode does nothing: nlink %lu",
	      (unsigned long)nlink_of("h11"));
	CHECK(mkdir("dd", 0755) == 0 && nlink_of("dd") == 2, "new dir nlink 2");
	CHECK(mkdir("dd/a", 0755) == 0 && mkdir("dd/b", 0755) == 0 && nlink_of("dd") == 4,
	      "dir with 2 subdirs nlink 4");
	put_file("dd/f", "", 0, 0644);
	CHECK(nlink_of("dd") == 4, "a file does not count in the dir's nlink");
	ERR(link("dd", "dd2"), EPERM, "hard link to a dir: EPERM");
	CHECK(symlink("a", "s") == 0 && link("s", "s2") == 0 && nlink_of("s") == 2,
	      "hard link to a symlink (not followed)");
	CHECK(unlink("s") == 0 && unlink("s2") == 0, "unlink symlinks");
	/* an open file keeps its data with nlink 0 */
	{
		int fd = open("h12", O_RDONLY);
		struct stat st;

		for (i = 10; i < 20; i++) {
			snprintf(name, sizeof(name), "h%d", i);
			unlink(name);
		}
		CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink == 0,
		      "fstat nlink 0 after unlink");
		if (fd >= 0)
			close(fd);
	}
	CHECK(unlink("dd/f") == 0 && rmdir("dd/a") == 0 && nlink_of("dd") == 3 &&
	              rmdir("dd/b") == 0 && nlink_of("dd") == 2 && rmdir("dd") == 0,
	      "nlink drops with rmdir");
	CHECK(chdir("..") == 0 && rmdir("l") == 0, "rmdir l");
}

/* --- rename ---------------------------------------------------------------------------- */

void check_rename(void)
{
	struct stat st, st2;
	ino_t ino;

	CHECK(mkdir("r", 0755) == 0 && chdir("r") == 0, "mkdir r");
	put_file("a", "A", 1, 0644);
	put_file("b", "B", 1, 0644);
	CHECK(link("b", "b2") == 0, "link b b2");
	stat("a", &st);
	ino = st.st_ino;
	CHECK(rename("a", "b") == 0 && has_content("b", "A"), "rename a file over a file");
	CHECK(stat("b", &st) == 0 && st.st_ino == ino && nlink_of("b2") == 1 &&
	              has_content("b2", "B"),
	      "the replaced file lost one link");
	ERR(stat("a", &st), ENOENT, "old name gone");
	/* over an empty directory */
	CHECK(mkdir("d1", 0755) == 0 && mkdir("d2", 0755) == 0 && mkdir("d1/in", 0755) == 0,
	      "mkdir d1 d2");
	put_file("d1/in/f", "F", 1, 0644);
	CHECK(nlink_of(".") == 4, "parent nlink 4");
	CHECK(rename("d1", "d2") == 0 && has_content("d2/in/f", "F"),
	      "rename a dir over an empty dir");
	CHECK(nlink_of(".") == 3, "parent nlink 3 after the replace: %lu",
	      (unsigned long)nlink_of("."));
	CHECK(stat("d2/in/..", &st) == 0 && stat("d2", &st2) == 0 && st.st_ino == st2.st_ino,
	      ".. follows");
	/* moving a directory updates both parents and its .. */
	CHECK(mkdir("p", 0755) == 0, "mkdir p");
	CHECK(rename("d2/in", "p/in") == 0 && nlink_of("d2") == 2 && nlink_of("p") == 3,
	      "move a dir: parents' nlink");
	CHECK(stat("p/in/..", &st) == 0 && stat("p", &st2) == 0 && st.st_ino == st2.st_ino,
	      "moved dir's .. is the new parent");
	/* exchange a file and a directory */
	CHECK(xrenameat2("b", "d2", RENAME_EXCHANGE) == 0 && S_ISDIR(mode_of("b")) &&
	              has_content("d2", "A"),
	      "RENAME_EXCHANGE file <-> dir");
	CHECK(xrenameat2("b", "d2", RENAME_EXCHANGE) == 0, "exchange back");
	/* exchange directories in different parents */
	CHECK(mkdir("q", 0755) == 0 && mkdir("q/x", 0755) == 0 && mkdir("q/x/y", 0755) == 0,
	      "mkdir q/x/y");
	CHECK(xrenameat2("q/x", "p/in", RENAME_EXCHANGE) == 0 && has_content("q/x/f", "F") &&
	              S_ISDIR(mode_of("p/in/y")),
	      "exchange dirs across parents");
	CHECK(nlink_of("p") == 3 && nlink_of("q") == 3, "nlinks unchanged by the exchange");
	CHECK(stat("p/in/y/../..", &st) == 0 && stat("p", &st2) == 0 && st.st_ino == st2.st_ino,
	      "exchanged dir's .. is updated");
	/* a symlink is renamed, not its target */
	CHECK(symlink("b", "sl") == 0 && rename("sl", "sl2") == 0 && S_ISLNK(mode_of("sl2")) &&
	              has_content("b", "A"),
	      "rename a symlink");
	/* the replaced file stays readable while open */
	{
		int fd;
		char c = 0;

		put_file("v", "V", 1, 0644);
		fd = open("v", O_RDONLY);
		CHECK(rename("b", "v") == 0 && fd >= 0 && pread(fd, &c, 1, 0) == 1 && c == 'V',
		      "a replaced open file is still readable");
		if (fd >= 0)
			close(fd);
	}
	/* rename updates ctime */
	stat("v", &st);
	sleep(1);
	CHECK(rename("v", "w") == 0 && stat("w", &st2) == 0 && st2.st_ctime >= st.st_ctime,
	      "ctime after rename");
	CHECK(unlink("w") == 0 && unlink("b2") == 0 && unlink("sl2") == 0 && rmdir("d2") == 0 &&
	              unlink("q/x/f") == 0 && rmdir("q/x") == 0 && rmdir("p/in/y") == 0 &&
	              rmdir("p/in") == 0 && rmdir("p") == 0 && rmdir("q") == 0,
	      "cleanup rename");
	CHECK(chdir("..") == 0 && rmdir("r") == 0, "rmdir r");
}

/* --- many files ------------------------------------------------------------------------ */

void check_many(long count)
{
	char name[64];
	unsigned char *seen = calloc((size_t)count, 1);
	struct dirent *de;
	struct stat st;
	long i, n = 0, bad = 0;
	DIR *dir;
	int fd;

	CHECK(mkdir("many", 0755) == 0 && chdir("many") == 0, "mkdir many");
	for (i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%07ld", i);
		fd = open(name, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0) {
			bad++;
			continue;
		}
		if (i % 1000 == 0 && write(fd, name, strlen(name)) != (ssize_t)strlen(name))
			bad++;
		close(fd);
	}
	CHECK(bad == 0, "create %ld files (%ld failed)", count, bad);
	dir = opendir(".");
	bad = 0;
	while (dir && (errno = 0, de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (sscanf(de->d_name, "file-with-a-longish-name-%ld", &i) == 1 && i >= 0 &&
		    i < count && !seen[i]) {
			seen[i] = 1;
			n++;
		} else {
			bad++;
		}
	}
	CHECK(dir && errno == 0, "readdir to the end");
	if (dir)
		closedir(dir);
	CHECK(n == count && bad == 0, "readdir listed %ld of %ld (%ld unexpected or repeated)", n,
	      count, bad);
	for (i = 0, bad = 0; i < count; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%07ld", i);
		if (stat(name, &st) || !S_ISREG(st.st_mode) ||
		    st.st_size != (i % 1000 == 0 ? (off_t)strlen(name) : 0))
			bad++;
	}
	CHECK(bad == 0, "stat every file (%ld bad)", bad);
	CHECK(stat("file-with-a-longish-name-x", &st) < 0 && errno == ENOENT,
	      "lookup a missing name");
	for (i = 0, bad = 0; i < count; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%07ld", i);
		if (unlink(name))
			bad++;
	}
	CHECK(bad == 0, "delete every file (%ld failed)", bad);
	dir = opendir(".");
	n = 0;
	while (dir && (de = readdir(dir)))
		n++;
	if (dir)
		closedir(dir);
	CHECK(n == 2, "empty again (%ld entries)", n);
	CHECK(chdir("..") == 0 && rmdir("many") == 0, "rmdir many");
	free(seen);
}

/* readdir while its entries are deleted, and telldir/seekdir */
void check_readdir(void)
{
	static char seen[3000];
	struct dirent *de;
	char name[300];
	int i, n = 0, dup = 0;
	DIR *d;

	CHECK(mkdir("rd", 0755) == 0, "mkdir rd");
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "rd/%d", i);
		close(open(name, O_CREAT | O_WRONLY, 0644));
	}
	d = opendir("rd");
	CHECK(d != NULL, "opendir rd");
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		i = atoi(de->d_name);
		if (i < 0 || i >= 3000 || seen[i])
			dup++;
		else
			seen[i] = 1;
		n++;
		snprintf(name, sizeof(name), "rd/%s", de->d_name);
		unlink(name);
	}
	if (d)
		closedir(d);
	CHECK(n == 3000 && dup == 0, "deleting each entry as it is read: %d seen, %d repeated", n,
	      dup);
	CHECK(system("rm -rf rd") == 0, "rm -rf rd");
}

/*
 * telldir/seekdir at every entry of a 100-entry directory.  Regression: the
 * daemon's readdir cookies are the entries' B+tree keys, which used the top
 * 48 bits of a 64-bit name hash, so about half had bit 63 set; as off_t they
 * were negative and the kernel's lseek on the directory (seekdir) failed with
 * EINVAL.  Name keys now keep bit 63 clear (docs/FORMAT.md).
 */
void check_seekdir(void)
{
	struct dirent *de;
	char name[300];
	int i, k = 0, bad = 0;
	long pos[128];
	DIR *d;

	CHECK(mkdir("rd", 0755) == 0, "mkdir rd");
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "rd/%d", i);
		close(open(name, O_CREAT | O_WRONLY, 0644));
	}
	d = opendir("rd");
	while (d && k < 128 && (de = readdir(d)))
		pos[k++] = telldir(d);
	for (i = 0; d && i < k - 1; i++) {
		int left = 0;

		seekdir(d, pos[i]);
		errno = 0;
		while (readdir(d))
			left++;
		if (left != k - 1 - i) {
			if (bad++ < 3)
				printf("  seekdir to the cookie after entry %d (%#lx): %d entries "
				       "after it, not %d (%s)\n",
				       i, (unsigned long)pos[i], left, k - 1 - i, strerror(errno));
		}
	}
	if (d)
		closedir(d);
	CHECK(k == 102 && bad == 0, "seekdir to each of %d telldir positions (%d wrong)", k, bad);
	CHECK(system("rm -rf rd") == 0, "rm -rf rd");
}

/*
 * Processes racing on one small namespace (rename, link, unlink, mkdir, rmdir,
 * create); afterwards (and after a remount: ARG "verify") every entry must be
 * reachable, every directory's nlink 2 + its subdirectories and every file's
 * nlink the number of its names.
 */
#define NS_PROCS 4
#define NS_NAMES 6

static void ns_path(char *p, size_t n, unsigned *seedp)
{
	static const char *nm[NS_NAMES] = {"a", "b", "c", "d", "e", "f"};

	if (rand_r(seedp) % 3 == 0)
		snprintf(p, n, "ns/%s", nm[rand_r(seedp) % NS_NAMES]);
	else
		snprintf(p, n, "ns/%s/%s", nm[rand_r(seedp) % NS_NAMES],
		         nm[rand_r(seedp) % NS_NAMES]);
}

struct nsino {
	ino_t ino;
	nlink_t nlink;
	int names;
};

static int ns_walk(const char *dir, struct nsino *tab, int *ntab)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int subdirs = 0, bad = 0, i;
	DIR *d = opendir(dir);

	if (!d)
		return 1;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		if (lstat(sub, &st)) {
			printf("  %s listed but lstat fails: %s\n", sub, strerror(errno));
			bad++;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			subdirs++;
			bad += ns_walk(sub, tab, ntab);
			continue;
		}
		for (i = 0; i < *ntab && tab[i].ino != st.st_ino; i++)
			;
		if (i == *ntab && *ntab < 4096)
			tab[(*ntab)++] = (struct nsino){st.st_ino, st.st_nlink, 0};
		if (i < *ntab)
			tab[i].names++;
	}
	closedir(d);
	if (lstat(dir, &st) || st.st_nlink != (nlink_t)(2 + subdirs)) {
		printf("  %s: nlink %lu with %d subdirectories\n", dir, (unsigned long)st.st_nlink,
		       subdirs);
		bad++;
	}
	return bad;
}

void check_concurrent_ns(const char *arg)
{
	static struct nsino tab[4096];
	int i, ntab = 0, bad, errs = 0;

	if (!arg || strcmp(arg, "verify")) {
		pid_t kids[NS_PROCS];

		CHECK(mkdir("ns", 0755) == 0, "mkdir ns");
		for (i = 0; i < NS_PROCS; i++) {
			kids[i] = fork();
			if (kids[i] == 0) {
				unsigned seedv = (unsigned)getpid();
				char p1[PATH_MAX], p2[PATH_MAX];
				int k, fd;

				for (k = 0; k < 3000; k++) {
					ns_path(p1, sizeof(p1), &seedv);
					ns_path(p2, sizeof(p2), &seedv);
					switch (rand_r(&seedv) % 7) {
					case 0:
					case 1:
						rename(p1, p2);
						break;
					case 2:
						link(p1, p2);
						break;
					case 3:
						unlink(p1);
						break;
					case 4:
						mkdir(p1, 0755);
						break;
					case 5:
						rmdir(p1);
						break;
					default:
						fd = open(p1, O_CREAT | O_WRONLY, 0644);
						if (fd >= 0) {
							if (write(fd, p1, strlen(p1)) < 0)
								_exit(2);
							close(fd);
						}
					}
				}
				_exit(0);
			}
		}
		for (i = 0; i < NS_PROCS; i++) {
			int status;

			waitpid(kids[i], &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				errs++;
		}
		CHECK(errs == 0, "%d processes racing on one namespace", NS_PROCS);
	}
	bad = ns_walk("ns", tab, &ntab);
	for (i = 0; i < ntab; i++)
		if (tab[i].nlink != (nlink_t)tab[i].names) {
			printf("  inode %lu: nlink %lu, %d names\n", (unsigned long)tab[i].ino,
			       (unsigned long)tab[i].nlink, tab[i].names);
			bad++;
		}
	CHECK(bad == 0, "namespace consistent after the race (%d files, %d problems)", ntab, bad);
}
