/* SPDX-License-Identifier: MIT */
/*
 * devlock.c: is DEVICE mounted, who holds its lock, and a bounded wait for a
 * daemon that was unmounted but has not finished yet (mfs_devlock.h).
 *
 * The lock is the daemon's flock on DEVICE (blk_dev_open's BLK_CFG_EXCL): it
 * goes when the daemon has written the filesystem out and closed the device,
 * or when the daemon dies.  The mount tables are the kernel's
 * (/proc/PID/mountinfo); /proc/locks names the holder of a lock.  Nothing
 * here takes the lock for longer than a probe.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "mfs_devlock.h"

#define DEVLOCK_POLL_US 20000 /* between probes of a held lock */

pid_t mfs_dev_lock_holder(const char *device)
{
	char *line = NULL, kind[32], mode[32], rw[32];
	unsigned maj, min;
	unsigned long ino;
	size_t cap = 0;
	struct stat st;
	pid_t holder = 0;
	FILE *f;
	int pid;

	if (stat(device, &st))
		return -errno;
	f = fopen("/proc/locks", "re");
	if (!f)
		return -errno;
	/* "1: FLOCK  ADVISORY  WRITE 8528 fe:00:10953326 0 EOF"; waiters have "->" */
	while (getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%*d: %31s %31s %31s %d %x:%x:%lu", kind, mode, rw, &pid, &maj,
		           &min, &ino) != 7)
			continue;
		if (strcmp(kind, "FLOCK") || strcmp(rw, "WRITE") || pid <= 0)
			continue;
		if (maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino) {
			holder = pid;
			break;
		}
	}
	free(line);
	fclose(f);
	return holder;
}

int mfs_dev_lock_probe(const char *device)
{
	int fd = open(device, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret = 0;

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0)
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
	close(fd); /* drops the shared lock */
	return ret;
}

/* Undo mountinfo's octal escapes (space, tab, newline, backslash) in place. */
static void unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

/*
 * "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the
 * fifth field is the mount point; after the "-" come type, source, options.
 */
bool mfs_mountinfo_next(FILE *f, struct mfs_mountinfo *mi)
{
	while (getline(&mi->line, &mi->cap, f) > 0) {
		char *save = NULL, *tok, *field[5];
		unsigned i;

		mi->line[strcspn(mi->line, "\n")] = '\0';
		for (i = 0, tok = strtok_r(mi->line, " ", &save); tok && i < 5;
		     tok = strtok_r(NULL, " ", &save))
			field[i++] = tok;
		if (i < 5 || sscanf(field[2], "%u:%u", &mi->major, &mi->minor) != 2)
			continue;
		while (tok && strcmp(tok, "-"))
			tok = strtok_r(NULL, " ", &save);
		mi->fstype = strtok_r(NULL, " ", &save);
		mi->source = strtok_r(NULL, " ", &save);
		if (!tok || !mi->fstype || !mi->source)
			continue;
		unescape(field[4]);
		unescape((char *)mi->source);
		mi->target = field[4];
		return true;
	}
	mfs_mountinfo_free(mi);
	return false;
}

void mfs_mountinfo_free(struct mfs_mountinfo *mi)
{
	free(mi->line);
	mi->line = NULL;
	mi->cap = 0;
}

bool mfs_mountinfo_is_mendfs(const struct mfs_mountinfo *mi)
{
	return !strcmp(mi->fstype, "fuse.mendfs") || !strcmp(mi->fstype, "fuseblk.mendfs");
}

/* Do @a (stat'ed as @st) and @b name the same device or image? */
static bool same_file(const char *a, const struct stat *st, const char *b)
{
	struct stat bst;

	if (!strcmp(a, b))
		return true;
	if (!st || b[0] != '/' || stat(b, &bst))
		return false;
	if ((S_ISBLK(st->st_mode) && S_ISBLK(bst.st_mode)) ||
	    (S_ISCHR(st->st_mode) && S_ISCHR(bst.st_mode)))
		return st->st_rdev == bst.st_rdev;
	return st->st_dev == bst.st_dev && st->st_ino == bst.st_ino;
}

static bool mounted_in(const char *mountinfo, const char *device, const struct stat *st)
{
	struct mfs_mountinfo mi = {0};
	bool found = false;
	FILE *f = fopen(mountinfo, "re");

	if (!f)
		return false;
	while (!found && mfs_mountinfo_next(f, &mi))
		found = mfs_mountinfo_is_mendfs(&mi) && same_file(device, st, mi.source);
	mfs_mountinfo_free(&mi);
	fclose(f);
	return found;
}

int mfs_dev_mounted(const char *device, pid_t holder)
{
	char self_ns[64] = "", ns[64] = "", path[64];
	struct stat st;
	bool have_st = stat(device, &st) == 0;
	ssize_t n;

	if (mounted_in("/proc/self/mountinfo", device, have_st ? &st : NULL))
		return 1;
	if (holder <= 0)
		return 0;
	/* the daemon may have mounted in a mount namespace of its own */
	n = readlink("/proc/self/ns/mnt", self_ns, sizeof(self_ns) - 1);
	if (n > 0)
		self_ns[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)holder);
	n = readlink(path, ns, sizeof(ns) - 1);
	if (n <= 0 || (ns[n] = '\0', !strcmp(ns, self_ns)))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)holder);
	return mounted_in(path, device, have_st ? &st : NULL);
}

static double elapsed(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

int mfs_dev_wait_exiting(const char *device, unsigned seconds, const char *prog)
{
	struct timespec t0;
	unsigned polls = 0;

	if (mfs_dev_mounted(device, mfs_dev_lock_holder(device)))
		return -EBUSY; /* really in use: no waiting */
	if (mfs_dev_lock_probe(device) != -EBUSY)
		return 0;
	if (!seconds)
		return -EBUSY;
	fprintf(stderr,
	        "%s: waiting for the mendfs daemon that still holds %s to exit (up to %u s)\n",
	        prog, device, seconds);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (elapsed(&t0) < seconds) {
		usleep(DEVLOCK_POLL_US);
		if (mfs_dev_lock_probe(device) != -EBUSY)
			return 0;
		/* mounted again meanwhile: in use after all */
		if (++polls % 25 == 0 && mfs_dev_mounted(device, mfs_dev_lock_holder(device)))
			return -EBUSY;
	}
	return -EBUSY;
}
