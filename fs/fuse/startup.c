/* SPDX-License-Identifier: MIT */
/*
 * startup.c: paths, the mount source, the mount flags, fork and detach, and
 * the utab record of a mount (startup.h).  Calls libc, mount(8) (for utab)
 * and the daemon's log.
 *
 * Why a utab record: for `umount /abs/dir` libmount learns the filesystem
 * type from statfs(2) unless utab holds a record for the directory, and
 * statfs says only "fuse" (no subtype), so umount(8) would look for
 * /sbin/umount.fuse and never run umount.fuse.mendfs: the kernel unmounts
 * and returns before the daemon has written anything out.  With a record
 * carrying helper=fuse.mendfs, umount(8) reads the mount table and runs
 * /sbin/umount.fuse.mendfs "independently of UID" (umount(8), EXTERNAL
 * HELPERS), and removes the record when the helper succeeds.  The record is
 * made with `mount --fake` (as fusermount3 records its mounts where mtab is
 * a file), which writes utab under libmount's own lock; mount(8) never
 * touches the mounted filesystem for it.  The daemon drops the record
 * itself if the mount went another way (mfsd_utab_unregister).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atime.h"
#include "daemon.h"
#include "startup.h"

extern char **environ;

#define UTAB_DEFAULT   "/run/mount/utab" /* libmount's, LIBMOUNT_UTAB overrides */
#define UTAB_HELPER    "helper=fuse.mendfs"
#define UTAB_WAIT_SECS 10 /* for mount --fake */

char *mfsd_abs_path(const char *path)
{
	char cwd[PATH_MAX], *out;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	while (path[0] == '.' && path[1] == '/') {
		path += 2;
		while (*path == '/')
			path++;
	}
	if (!*path || !strcmp(path, "."))
		return strdup(cwd);
	if (asprintf(&out, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", path) < 0)
		return NULL;
	return out;
}

int mfsd_parent_dir_exists(const char *path)
{
	char *dir = strdup(path), *slash;
	struct stat st;
	int ret = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	if (stat(dir, &st))
		ret = -errno;
	else if (!S_ISDIR(st.st_mode))
		ret = -ENOTDIR;
	free(dir);
	return ret;
}

int mfsd_opt_escape(const char *s, char *out, size_t len)
{
	size_t n = 0;

	for (; *s; s++) {
		if (n + 3 > len)
			return -1;
		if (*s == ',' || *s == '\\')
			out[n++] = '\\';
		out[n++] = *s;
	}
	out[n] = '\0';
	return 0;
}

/* libmount's mangling of a utab field: space, tab, newline and '\' as \ooo. */
static char *mangle(const char *s)
{
	char *out = malloc(strlen(s) * 4 + 1), *d = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			d += sprintf(d, "\\%03o", (unsigned char)*s);
		else
			*d++ = *s;
	}
	*d = '\0';
	return out;
}

static const char *utab_path(void)
{
	const char *path = getenv("LIBMOUNT_UTAB");

	return path && *path ? path : UTAB_DEFAULT;
}

/* "SRC=... TARGET=... " of our record (after an "ID=N " libmount may put first). */
static char *utab_key(const char *source, const char *target)
{
	char *src = mangle(source), *tgt = mangle(target), *key = NULL;

	if (!src || !tgt || asprintf(&key, "SRC=%s TARGET=%s ", src, tgt) < 0)
		key = NULL;
	free(src);
	free(tgt);
	return key;
}

static bool utab_line_ours(const char *line, const char *key)
{
	return strstr(line, key) && strstr(line, " OPTS=" UTAB_HELPER);
}

/* Does utab already hold our record for @source on @target (a remount of both)? */
static bool utab_has(const char *source, const char *target)
{
	char *key = utab_key(source, target), *line = NULL;
	FILE *f = key ? fopen(utab_path(), "re") : NULL;
	bool found = false;
	size_t cap = 0;

	while (f && !found && getline(&line, &cap, f) > 0)
		found = utab_line_ours(line, key);
	if (f)
		fclose(f);
	free(line);
	free(key);
	return found;
}

int mfsd_utab_register(const char *source, const char *target, char *err, size_t errlen)
{
	char *argv[] = {
	        "mount", "--fake",    "--no-canonicalize", "-i",           "-t", "fuse.mendfs",
	        "-o",    UTAB_HELPER, (char *)source,      (char *)target, NULL};
	const char *prog = access("/bin/mount", X_OK) ? "mount" : "/bin/mount";
	posix_spawn_file_actions_t fa;
	struct timespec t0, t;
	int ret, status;
	pid_t pid, got;

	err[0] = '\0';
	if (geteuid() != 0 || utab_has(source, target))
		return 0; /* utab is root's; a record is there already */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
	ret = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (ret) {
		snprintf(err, errlen, "cannot run mount: %s", strerror(ret));
		return -ret;
	}
	/* bounded: mount(8) has no reason to touch the filesystem, but if it did, it would
	 * wait for this daemon, whose session loop is not running yet */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((got = waitpid(pid, &status, WNOHANG)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= UTAB_WAIT_SECS) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			snprintf(err, errlen, "mount --fake did not return in %d s",
			         UTAB_WAIT_SECS);
			return -ETIMEDOUT;
		}
		usleep(2000);
	}
	if (got < 0) {
		ret = -errno;
		snprintf(err, errlen, "waitpid: %s", strerror(errno));
		return ret;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(err, errlen, "mount --fake failed (status %d)",
		         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return -EIO;
	}
	return 0;
}

/*
 * The record is dropped by umount(8) after its helper; an unmount that went
 * another way (fusermount3 -u, a signal to the daemon, umount(2)) leaves it.
 * So at exit the daemon drops it itself, as libmount would: under libmount's
 * lock (flock on utab.lock), the file rewritten without our line and renamed
 * into place.  Called while the daemon still holds its device, so no other
 * daemon can have recorded the same source meanwhile.
 */
int mfsd_utab_unregister(const char *source, const char *target)
{
	const char *path = utab_path();
	char *key = NULL, *line = NULL, *lock = NULL, *tmp = NULL;
	bool dropped = false;
	int lock_fd = -1, fd, ret = 0;
	FILE *in = NULL, *out;
	size_t cap = 0;

	if (geteuid() != 0 || !utab_has(source, target))
		return 0;
	key = utab_key(source, target);
	if (!key || asprintf(&lock, "%s.lock", path) < 0) {
		lock = NULL; /* asprintf leaves it undefined on failure */
		ret = -ENOMEM;
		goto out;
	}
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL; /* lock is freed at out */
		ret = -ENOMEM;
		goto out;
	}
	lock_fd = open(lock, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
		ret = -errno;
		goto out;
	}
	in = fopen(path, "re");
	if (!in) {
		ret = -errno;
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	out = fdopen(fd, "w");
	if (!out) {
		ret = -errno;
		close(fd);
		goto out_unlink;
	}
	while (getline(&line, &cap, in) > 0) {
		if (!dropped && utab_line_ours(line, key))
			dropped = true; /* the first: a second is another mount's */
		else
			fputs(line, out);
	}
	if (fflush(out) || fchmod(fd, 0644))
		ret = -errno;
	if (fclose(out) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (!ret)
		goto out;
out_unlink:
	unlink(tmp);
out:
	if (in)
		fclose(in);
	if (lock_fd >= 0)
		close(lock_fd); /* unlocks */
	free(line);
	free(lock);
	free(tmp);
	free(key);
	return ret;
}

int mfsd_atime_show(const char *mnt, unsigned flags)
{
	struct mount_attr attr = {0};

	if (flags & MFS_ATIME_STRICT) {
		attr.attr_clr = MOUNT_ATTR__ATIME; /* required to change the atime mode */
		attr.attr_set = MOUNT_ATTR_STRICTATIME;
	}
	if ((flags & MFS_ATIME_NODIRATIME) && !(flags & MFS_ATIME_NONE))
		attr.attr_set |= MOUNT_ATTR_NODIRATIME;
	if (!attr.attr_set && !attr.attr_clr)
		return 0;
	if (syscall(SYS_mount_setattr, AT_FDCWD, mnt, 0, &attr, sizeof(attr)))
		return -errno;
	return 0;
}

/* The child reports the mount live with a zero byte on the pipe. */
int mfsd_fork_and_wait(void)
{
	int pfd[2], status;
	char c;
	pid_t pid;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC)) {
		mfsd_log(LOG_ERR, "pipe: %s", strerror(errno));
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		mfsd_log(LOG_ERR, "fork: %s", strerror(errno));
		exit(1);
	}
	if (pid == 0) {
		close(pfd[0]);
		return pfd[1];
	}
	close(pfd[1]);
	do
		n = read(pfd[0], &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && c == 0)
		_exit(0);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	_exit(WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1);
}

/* Daemonized: the core's messages on stderr go to syslog line by line. */
static void *stderr_to_syslog(void *arg)
{
	FILE *f = fdopen((int)(intptr_t)arg, "r");
	char line[1024];

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		mfsd_log(LOG_ERR, "%s", line);
	}
	fclose(f);
	return NULL;
}

void mfsd_detach(int status_fd)
{
	pthread_t th;
	int nullfd, pfd[2];
	char c = 0;

	mfsd_log_to_syslog();
	if (setsid() < 0)
		mfsd_log(LOG_WARNING, "setsid: %s", strerror(errno));
	if (chdir("/"))
		mfsd_log(LOG_WARNING, "chdir /: %s", strerror(errno));
	nullfd = open("/dev/null", O_RDWR);
	if (nullfd >= 0) {
		dup2(nullfd, 0);
		dup2(nullfd, 1);
		dup2(nullfd, 2);
		if (nullfd > 2)
			close(nullfd);
	}
	if (!pipe2(pfd, O_CLOEXEC)) {
		dup2(pfd[1], 2);
		close(pfd[1]);
		if (pthread_create(&th, NULL, stderr_to_syslog, (void *)(intptr_t)pfd[0]) == 0)
			pthread_detach(th);
		else
			close(pfd[0]);
	}
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (write(status_fd, &c, 1) != 1)
		mfsd_log(LOG_WARNING, "could not signal the parent: %s", strerror(errno));
	close(status_fd);
}
