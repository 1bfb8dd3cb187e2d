/* SPDX-License-Identifier: MIT */
/*
 * fhandle: file handles on a live mendfs mount (name_to_handle_at,
 * open_by_handle_at: what NFS export and handle-based backup tools use).
 * `fhandle make MNT STATE` lays out a tree, saves the handles of a regular
 * file, directories and a file in a subdirectory to STATE and reopens them
 * by handle, with the kernel's inodes cached and after it dropped them
 * (drop_caches: the kernel then asks the daemon with LOOKUP "." and
 * reconnects directories through LOOKUP ".."); a deleted file's handle, the
 * same handle after its inode number went to a new file, and forged handles
 * give ESTALE.  `fhandle check MNT STATE`, after posix-test.sh remounted,
 * reopens the saved handles on the new mount, follows a directory that was
 * renamed, then deletes a file and a directory: only their handles go stale.
 * Prints "ok ..." or "FAIL ..." per check; exits 0 if all passed, 1 if not,
 * 77 if the kernel refuses handles on this mount (EOPNOTSUPP).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "check.h"

#define HANDLE_MAX 64 /* FUSE handles are 12 bytes (24 with the parent) */

/* One saved handle: what it names and what reopening it must find. */
struct rec {
	char path[64]; /* relative to the mount; "" for the root */
	uint64_t ino, parent_ino;
	bool dir;
	int type;
	unsigned bytes;
	unsigned char h[HANDLE_MAX];
};

static const char *mnt;
static int mount_fd = -1;

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	exit(1);
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	/* 2: dentries and inodes, so the kernel forgets the nodes and must ask again */
	if (fd < 0 || write(fd, "2", 1) != 1)
		die("drop_caches");
	close(fd);
}

static struct file_handle *fh_of(const struct rec *r)
{
	static union {
		struct file_handle fh;
		unsigned char buf[sizeof(struct file_handle) + HANDLE_MAX];
	} u;

	u.fh.handle_bytes = r->bytes;
	u.fh.handle_type = r->type;
	memcpy(u.fh.f_handle, r->h, r->bytes);
	return &u.fh;
}

static void content_of(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "content of %s\n", path);
}

static int fd_at(const char *path, int flags)
{
	char full[PATH_MAX];

	snprintf(full, sizeof(full), "%s/%s", mnt, path);
	return open(full, flags, 0644);
}

static void make_file(const char *path)
{
	char want[128];
	int fd = fd_at(path, O_WRONLY | O_CREAT | O_EXCL);

	content_of(path, want, sizeof(want));
	if (fd < 0 || write(fd, want, strlen(want)) != (ssize_t)strlen(want) || close(fd))
		die(path);
}

static void make_dir(const char *path)
{
	char full[PATH_MAX];

	snprintf(full, sizeof(full), "%s/%s", mnt, path);
	if (mkdir(full, 0755))
		die(path);
}

/* Fill @r with the handle of @path; exits 77 if the mount does not give handles. */
static void save(struct rec *r, const char *path)
{
	union {
		struct file_handle fh;
		unsigned char buf[sizeof(struct file_handle) + HANDLE_MAX];
	} u;
	char full[PATH_MAX], parent[PATH_MAX], *slash;
	struct stat st;
	int mid;

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s", path);
	snprintf(full, sizeof(full), "%s/%s", mnt, path);
	u.fh.handle_bytes = HANDLE_MAX;
	if (name_to_handle_at(AT_FDCWD, full, &u.fh, &mid, 0)) {
		if (errno == EOPNOTSUPP) {
			printf("skip: name_to_handle_at: %s\n", strerror(errno));
			exit(77);
		}
		die(full);
	}
	r->type = u.fh.handle_type;
	r->bytes = u.fh.handle_bytes;
	memcpy(r->h, u.fh.f_handle, r->bytes);
	if (stat(full, &st))
		die(full);
	r->ino = st.st_ino;
	r->dir = S_ISDIR(st.st_mode);
	snprintf(parent, sizeof(parent), "%s", full);
	slash = strrchr(parent, '/');
	*slash = 0;
	if (stat(*path ? parent : full, &st))
		die(parent);
	r->parent_ino = st.st_ino;
}

/*
 * Reopen @r by its handle as @path (where it is now) and check that it is
 * the same inode: content for a file; for a directory, the path the kernel
 * rebuilt (through LOOKUP "..") and its "..".
 */
static void reopen(const struct rec *r, const char *path, const char *stage)
{
	char want[128], got[PATH_MAX], full[PATH_MAX], link[64];
	struct stat st;
	ssize_t n;
	int fd, pfd;

	fd = open_by_handle_at(mount_fd, fh_of(r), O_RDONLY | (r->dir ? O_DIRECTORY : 0));
	CHECK(fd >= 0, "%s: open_by_handle_at(/%s)", stage, path);
	if (fd < 0)
		return;
	CHECK(!fstat(fd, &st) && st.st_ino == r->ino, "%s: /%s is inode %llu", stage, path,
	      (unsigned long long)r->ino);
	if (!r->dir) {
		content_of(r->path, want, sizeof(want));
		n = pread(fd, got, sizeof(got) - 1, 0);
		got[n > 0 ? n : 0] = 0;
		CHECK(!strcmp(got, want), "%s: /%s reads its content", stage, path);
		close(fd);
		return;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = 0;
	snprintf(full, sizeof(full), "%s%s%s", mnt, *path ? "/" : "", path);
	CHECK(!strcmp(got, full), "%s: /%s reconnected (path %s)", stage, path, got);
	if (!*path) { /* the root's ".." leaves the mount */
		close(fd);
		return;
	}
	pfd = openat(fd, "..", O_RDONLY | O_DIRECTORY);
	CHECK(pfd >= 0 && !fstat(pfd, &st) && st.st_ino == r->parent_ino,
	      "%s: /%s/.. is inode %llu", stage, path, (unsigned long long)r->parent_ino);
	if (pfd >= 0)
		close(pfd);
	close(fd);
}

static void stale(const struct rec *r, const char *what, const char *stage)
{
	int fd = open_by_handle_at(mount_fd, fh_of(r), O_RDONLY);

	CHECK(fd < 0 && errno == ESTALE, "%s: %s: ESTALE", stage, what);
	if (fd >= 0)
		close(fd);
}

/* Wait (5 s at most) until the filesystem has @ffree free inodes again. */
static void wait_ffree(unsigned long ffree)
{
	struct statvfs sv;
	int i;

	for (i = 0; i < 500; i++) {
		if (statvfs(mnt, &sv))
			die("statvfs");
		if (sv.f_ffree >= ffree)
			return;
		usleep(10000);
	}
}

enum { R_ROOT, R_F, R_D, R_SUB, R_G, R_VICTIM, R_NR };

static void check_all(struct rec *recs, const char *stage)
{
	int i;

	for (i = 0; i < R_VICTIM; i++)
		reopen(&recs[i], recs[i].path, stage);
}

/* A deleted file: its handle, and the same handle once its inode number is reused. */
static void check_deleted(struct rec *victim)
{
	struct statvfs sv;
	struct rec fresh;
	char name[32];
	int i;

	make_file("victim");
	save(victim, "victim");
	reopen(victim, "victim", "before unlink");
	if (statvfs(mnt, &sv))
		die("statvfs");
	if (unlinkat(mount_fd, "victim", 0))
		die("unlink victim");
	stale(victim, "deleted file", "cached");
	drop_caches();
	stale(victim, "deleted file", "after drop_caches");

	/* the allocator moves on: create until the number comes round again */
	wait_ffree(sv.f_ffree + 1);
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "reuse%d", i);
		make_file(name);
		save(&fresh, name);
		if (fresh.ino == victim->ino)
			break;
	}
	CHECK(fresh.ino == victim->ino, "inode %llu reused by /%s", (unsigned long long)victim->ino,
	      name);
	CHECK(memcmp(fresh.h, victim->h, fresh.bytes), "the new file has another handle");
	stale(victim, "deleted file's handle, number reused", "cached");
	drop_caches();
	stale(victim, "deleted file's handle, number reused", "after drop_caches");
	reopen(&fresh, name, "reused number");
}

/* Handles nobody was given: a wrong generation, a number past the inode table. */
static void check_forged(const struct rec *f)
{
	struct rec r = *f;
	uint32_t w;

	/* FILEID_INO64_GEN: node id (high, low 32 bits), generation */
	CHECK(r.bytes >= 12, "handle of /%s has %u bytes", f->path, r.bytes);
	memcpy(&w, r.h + 8, 4);
	w++;
	memcpy(r.h + 8, &w, 4);
	stale(&r, "wrong generation", "cached");
	r = *f;
	w = 0x7fffffff;
	memcpy(r.h + 4, &w, 4);
	stale(&r, "inode number out of range", "forged");
	drop_caches();
	r = *f;
	memcpy(&w, r.h + 8, 4);
	w++;
	memcpy(r.h + 8, &w, 4);
	stale(&r, "wrong generation", "after drop_caches");
}

static void do_make(const char *state)
{
	struct rec recs[R_NR];
	FILE *f;

	make_file("f");
	make_dir("d");
	make_dir("d/sub");
	make_file("d/sub/g");
	save(&recs[R_ROOT], "");
	save(&recs[R_F], "f");
	save(&recs[R_D], "d");
	save(&recs[R_SUB], "d/sub");
	save(&recs[R_G], "d/sub/g");
	check_all(recs, "cached");
	drop_caches();
	check_all(recs, "after drop_caches");
	check_deleted(&recs[R_VICTIM]);
	check_forged(&recs[R_F]);

	f = fopen(state, "w");
	if (!f || fwrite(recs, sizeof(recs), 1, f) != 1 || fclose(f))
		die(state);
}

static void do_check(const char *state)
{
	struct rec recs[R_NR];
	char full[PATH_MAX], to[PATH_MAX];
	FILE *f;

	f = fopen(state, "r");
	if (!f || fread(recs, sizeof(recs), 1, f) != 1)
		die(state);
	fclose(f);
	check_all(recs, "after remount");
	stale(&recs[R_VICTIM], "deleted file", "after remount");
	drop_caches();
	check_all(recs, "after remount and drop_caches");

	/* a renamed directory: its handle follows it, and ".." is the new parent */
	snprintf(full, sizeof(full), "%s/d/sub", mnt);
	snprintf(to, sizeof(to), "%s/moved", mnt);
	if (rename(full, to))
		die("rename d/sub moved");
	recs[R_SUB].parent_ino = recs[R_ROOT].ino;
	drop_caches();
	reopen(&recs[R_SUB], "moved", "after rename");
	reopen(&recs[R_G], "moved/g", "after rename");

	/* deleted: only these handles go stale */
	if (unlinkat(mount_fd, "f", 0) || unlinkat(mount_fd, "moved/g", 0) ||
	    unlinkat(mount_fd, "moved", AT_REMOVEDIR))
		die("delete f, moved/g, moved");
	stale(&recs[R_F], "deleted file", "cached");
	stale(&recs[R_SUB], "deleted directory", "cached");
	stale(&recs[R_G], "deleted file in a deleted directory", "cached");
	drop_caches();
	stale(&recs[R_F], "deleted file", "after drop_caches");
	stale(&recs[R_SUB], "deleted directory", "after drop_caches");
	reopen(&recs[R_ROOT], "", "after deletes");
	reopen(&recs[R_D], "d", "after deletes");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4 || (strcmp(argv[1], "make") && strcmp(argv[1], "check"))) {
		fprintf(stderr, "usage: fhandle make|check MNT STATE\n");
		return 2;
	}
	mnt = realpath(argv[2], NULL); /* /proc/self/fd links are absolute */
	if (!mnt)
		die(argv[2]);
	mount_fd = open(mnt, O_RDONLY | O_DIRECTORY);
	if (mount_fd < 0)
		die(mnt);
	if (!strcmp(argv[1], "make"))
		do_make(argv[3]);
	else
		do_check(argv[3]);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
