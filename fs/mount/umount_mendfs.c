/* SPDX-License-Identifier: MIT */
/*
 * umount.fuse.mendfs: the umount(8) helper for mendfs mounts.
 *
 *   umount.fuse.mendfs DIR [-flnrv] [-t TYPE] [-N NAMESPACE]
 *
 * For a FUSE mount on anything but a fuseblk block device the kernel does not
 * wait for the daemon: umount(2) returns at once and the daemon commits,
 * checkpoints and closes the device afterwards.  umount(8) runs
 * /sbin/umount.fuse.mendfs for mounts of type fuse.mendfs (libmount tries
 * /sbin/umount.TYPE, then /sbin/umount.fuse for a type with a subtype), so
 * this helper unmounts DIR and then waits until the daemon has finished: the
 * daemon holds an flock on its device (the mount source) until it has
 * written everything and closed it, and then exits.  So `umount DIR` returns
 * only once the filesystem is clean on the device and DEVICE is free for
 * fsck.mendfs, mkfs.mendfs or the next mount.
 *
 * Options, as umount(8) passes them: -l lazy (MNT_DETACH; the filesystem
 * lives on while it is busy, so there is nothing to wait for), -f force
 * (MNT_FORCE: the kernel aborts the FUSE connection; the daemon still writes
 * out what it has), -r remount read-only if DIR is busy, -v verbose; -n, -t
 * are accepted and ignored; -N enters a mount namespace first.
 *
 * Exit status as umount(8): 0 done, 1 usage, 2 system error, 32 the unmount
 * failed, or the daemon still held its device after MFS_UMOUNT_WAIT seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mfs_cli.h"
#include "mfs_devlock.h"

#define PROG "umount.fuse.mendfs"

#define EX_OK      0
#define EX_USAGE_U 1
#define EX_SYSERR  2
#define EX_FAIL    32

#define UMOUNT_REMOUNTED (-1) /* do_umount: busy, remounted read-only (-r) */

#define MFS_UMOUNT_WAIT   60 /* seconds at most for the daemon to finish */
#define MFS_UMOUNT_SAY    2  /* seconds before saying that we wait */
#define MFS_UMOUNT_POLLUS 10000

struct opts {
	bool lazy, force, remount_ro, verbose;
};

/* The mount on @dir (the last one: the one on top), its source and type. */
struct target {
	char source[PATH_MAX];
	bool found, mendfs;
	unsigned major, minor;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " DIR [-flnrv] [-t TYPE] [-N NAMESPACE]\n"
	           "       " PROG " -V|--version|--help\n"
	           "Run by umount(8) for mounts of type fuse.mendfs: unmounts DIR and waits\n"
	           "until the mendfs daemon has finished.  See mount.mendfs(8).\n");
}

static int find_mount(const char *dir, struct target *t)
{
	struct mfs_mountinfo mi = {0};
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (mfs_mountinfo_next(f, &mi)) {
		if (strcmp(mi.target, dir))
			continue;
		t->found = true;
		t->mendfs = mfs_mountinfo_is_mendfs(&mi);
		t->major = mi.major;
		t->minor = mi.minor;
		snprintf(t->source, sizeof(t->source), "%s", mi.source);
	}
	fclose(f);
	return 0;
}

/* Has process @pid ended (gone, or a zombie nobody has reaped yet)? */
static bool pid_ended(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* "PID (COMM) STATE ..." */
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * The FUSE connection of a mount, /sys/fs/fuse/connections/DEV (fusectl),
 * lives as long as its superblock: if it survives our unmount, the
 * filesystem is still mounted elsewhere (another mount namespace, a lazily
 * detached copy) and the daemon goes on serving it.  -1: fusectl is not
 * mounted, nothing can be told.
 */
static int conn_alive(const struct target *t)
{
	char path[96];
	struct stat st;

	if (stat("/sys/fs/fuse/connections", &st) || !S_ISDIR(st.st_mode))
		return -1;
	snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u", t->major << 20 | t->minor);
	return stat(path, &st) == 0; /* always 0 where fusectl is not mounted */
}

/* Not root: umount(2) is refused, fusermount3 unmounts a user's own FUSE mount. */
static int run_fusermount(const char *dir, bool lazy)
{
	char *argv[6] = {"fusermount3", "-u"};
	int status, n = 2;
	pid_t pid;

	if (lazy)
		argv[n++] = "-z";
	argv[n++] = "--";
	argv[n++] = (char *)dir;
	argv[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, PROG ": cannot run fusermount3: %s\n", strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

/* umount2 as the options say.  Returns EX_OK, UMOUNT_REMOUNTED or EX_FAIL after a message. */
static int do_umount(const char *dir, const struct opts *o)
{
	int flags = (o->lazy ? MNT_DETACH : 0) | (o->force ? MNT_FORCE : 0), err;

	if (umount2(dir, flags) == 0)
		return EX_OK;
	err = errno;
	if (err == EPERM && geteuid() != 0) {
		if (run_fusermount(dir, o->lazy) == 0)
			return EX_OK;
		return EX_FAIL; /* fusermount3 said why */
	}
	if (err == EBUSY && o->remount_ro) {
		if (mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0) {
			fprintf(stderr, PROG ": %s busy; remounted read-only\n", dir);
			return UMOUNT_REMOUNTED;
		}
		fprintf(stderr, PROG ": %s: cannot remount read-only: %s\n", dir, strerror(errno));
		return EX_FAIL;
	}
	fprintf(stderr, PROG ": %s: %s\n", dir,
	        err == EINVAL  ? "not mounted"
	        : err == EBUSY ? "target is busy"
	                       : strerror(err));
	return EX_FAIL;
}

/*
 * After the unmount: wait until @device's lock is gone (the daemon has
 * written everything out and closed it), then until the daemon @pid (if
 * known) has exited.  Returns an exit status.
 */
static int wait_daemon(const char *dir, const char *device, pid_t pid, const struct opts *o)
{
	struct timespec t0;
	bool said = false, locked = true;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (locked) {
			int ret = mfs_dev_lock_probe(device);

			/* free; or gone (an image deleted): the pid is all there is left */
			if (ret != -EBUSY)
				locked = false;
			/* mounted again: the lock is a new daemon's, ours has let go */
			else if (mfs_dev_mounted(device, 0))
				locked = false;
		}
		if (!locked && (pid <= 0 || pid_ended(pid)))
			break;
		if (since(&t0) >= MFS_UMOUNT_WAIT) {
			if (locked)
				fprintf(stderr,
				        PROG ": %s is unmounted, but the mendfs daemon still "
				             "holds %s after %d s\n",
				        dir, device, MFS_UMOUNT_WAIT);
			else
				fprintf(stderr,
				        PROG ": %s is unmounted, but the mendfs daemon (pid %d) "
				             "still runs after %d s\n",
				        dir, (int)pid, MFS_UMOUNT_WAIT);
			return EX_FAIL;
		}
		if (!said && since(&t0) >= MFS_UMOUNT_SAY) {
			fprintf(stderr, PROG ": waiting for the mendfs daemon to finish with %s\n",
			        device);
			said = true;
		}
		usleep(MFS_UMOUNT_POLLUS);
	}
	if (o->verbose)
		printf(PROG ": %s unmounted; the mendfs daemon has finished with %s\n", dir,
		       device);
	return EX_OK;
}

static int enter_namespace(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNS))
		ret = -errno;
	close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct target t = {0};
	char dirbuf[PATH_MAX];
	const char *dir, *ns = NULL;
	pid_t pid = 0;
	int c, ret, alive = -1;
	static const struct option lopts[] = {
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};

	while ((c = getopt_long(argc, argv, "flnrvt:N:hV", lopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o.force = true;
			break;
		case 'l':
			o.lazy = true;
			break;
		case 'r':
			o.remount_ro = true;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'n': /* no mtab: the kernel's table is the only one */
		case 't': /* fuse.mendfs */
			break;
		case 'N':
			ns = optarg;
			break;
		case 'h':
			usage(stdout);
			return EX_OK;
		case 'V':
			return mfs_cli_version(PROG);
		default:
			usage(stderr);
			return EX_USAGE_U;
		}
	}
	if (argc - optind != 1) {
		usage(stderr);
		return EX_USAGE_U;
	}
	if (ns && (ret = enter_namespace(ns))) {
		fprintf(stderr, PROG ": mount namespace %s: %s\n", ns, strerror(-ret));
		return EX_SYSERR;
	}
	dir = argv[optind];
	if (dir[0] != '/') { /* run by hand: umount(8) passes the mount table's path */
		if (!realpath(dir, dirbuf)) {
			fprintf(stderr, PROG ": %s: %s\n", dir, strerror(errno));
			return EX_FAIL;
		}
		dir = dirbuf;
	}

	ret = find_mount(dir, &t);
	if (ret) {
		fprintf(stderr, PROG ": /proc/self/mountinfo: %s\n", strerror(-ret));
		return EX_SYSERR;
	}
	if (!t.found) {
		fprintf(stderr, PROG ": %s: not mounted\n", dir);
		return EX_FAIL;
	}
	if (t.mendfs && t.source[0] == '/') {
		pid = mfs_dev_lock_holder(t.source);
		if (pid < 0)
			pid = 0;
		alive = conn_alive(&t);
	}

	ret = do_umount(dir, &o);
	if (ret == UMOUNT_REMOUNTED)
		return EX_OK; /* still mounted: the daemon goes on */
	if (ret != EX_OK)
		return ret;
	if (!t.mendfs)
		return EX_OK; /* not ours: unmounted, nothing to wait for */
	if (o.lazy) {
		if (o.verbose)
			printf(PROG ": %s detached (lazy: the daemon finishes when it is no "
			            "longer busy)\n",
			       dir);
		return EX_OK;
	}
	if (t.source[0] != '/') {
		fprintf(stderr,
		        PROG ": %s unmounted, but its source '%s' names no device: "
		             "not waiting for the daemon\n",
		        dir, t.source);
		return EX_OK;
	}
	if (alive == 1 && conn_alive(&t) == 1) {
		fprintf(stderr,
		        PROG ": %s unmounted here, but %s is still mounted elsewhere (another "
		             "mount namespace): its daemon goes on\n",
		        dir, t.source);
		return EX_OK;
	}
	return wait_daemon(dir, t.source, pid, &o);
}
