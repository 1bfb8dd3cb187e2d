/* SPDX-License-Identifier: MIT */
/*
 * test_devlock: the device lock seen from outside (fs/core/devlock.c): mountinfo
 * parsing (escapes, optional fields, malformed lines), the lock probe and
 * the holder from /proc/locks, and mfs_dev_wait_exiting: no wait for a free
 * device, a wait announced on stderr that ends when the holder lets go, and
 * -EBUSY when the holder keeps it.  Exits 0 when every test passes.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mfs_devlock.h"
#include "check_run.h"

START_TEST(test_mountinfo_parse)
{
	static const char text[] =
	        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	        "garbage\n"
	        "45 22 0:40 / /mnt/a\\040b rw,nosuid - fuse.mendfs /srv/x\\134y\\040z.img "
	        "rw,user_id=0\n"
	        "46 22 0:41 / /mnt/c rw shared:2 master:3 - fuseblk.mendfs /dev/nvme0n1 rw\n"
	        "47 22 0:42 / /mnt/d rw - fuse.sshfs host:/ rw\n";
	struct mfs_mountinfo mi = {0};
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");

	ck_assert_ptr_nonnull(f);
	ck_assert(mfs_mountinfo_next(f, &mi));
	ck_assert_str_eq(mi.target, "/");
	ck_assert_str_eq(mi.fstype, "ext4");
	ck_assert_str_eq(mi.source, "/dev/sda1");
	ck_assert_uint_eq(mi.major, 8);
	ck_assert_uint_eq(mi.minor, 1);
	ck_assert(!mfs_mountinfo_is_mendfs(&mi));
	/* the malformed line is skipped */
	ck_assert(mfs_mountinfo_next(f, &mi));
	ck_assert_str_eq(mi.target, "/mnt/a b");
	ck_assert_str_eq(mi.source, "/srv/x\\y z.img");
	ck_assert_uint_eq(mi.minor, 40);
	ck_assert(mfs_mountinfo_is_mendfs(&mi));
	ck_assert(mfs_mountinfo_next(f, &mi));
	ck_assert_str_eq(mi.target, "/mnt/c");
	ck_assert_str_eq(mi.fstype, "fuseblk.mendfs");
	ck_assert(mfs_mountinfo_is_mendfs(&mi));
	ck_assert(mfs_mountinfo_next(f, &mi));
	ck_assert(!mfs_mountinfo_is_mendfs(&mi));
	ck_assert(!mfs_mountinfo_next(f, &mi));
	ck_assert_ptr_null(mi.line);
	fclose(f);
}
END_TEST

static char path[64];

static void file_setup(void)
{
	int fd;

	strcpy(path, "/tmp/test_devlock.XXXXXX");
	fd = mkstemp(path);

	if (fd < 0) {
		perror("mkstemp");
		exit(1);
	}
	close(fd);
}

static void file_teardown(void)
{
	unlink(path);
}

/* A child that holds an exclusive flock on @path until a byte arrives on *release. */
static pid_t hold_lock(int *release)
{
	int go[2], stop[2];
	pid_t pid;
	char c;

	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(stop), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(path, O_RDONLY);

		if (fd < 0 || flock(fd, LOCK_EX) || write(go[1], "x", 1) != 1)
			_exit(1);
		if (read(stop[0], &c, 1) < 0)
			_exit(1);
		_exit(0); /* the lock goes with the process */
	}
	close(go[1]);
	close(stop[0]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	close(go[0]);
	*release = stop[1];
	return pid;
}

static void reap(pid_t pid, int release)
{
	int status;

	if (write(release, "x", 1) != 1)
		ck_abort_msg("cannot release the holder");
	close(release);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(test_probe_and_holder)
{
	int release;
	pid_t pid;

	ck_assert_int_eq(mfs_dev_lock_probe(path), 0);
	ck_assert_int_eq(mfs_dev_lock_holder(path), 0);
	ck_assert_int_eq(mfs_dev_lock_probe("/nonexistent/dev"), -ENOENT);
	ck_assert_int_eq(mfs_dev_lock_holder("/nonexistent/dev"), -ENOENT);
	pid = hold_lock(&release);
	ck_assert_int_eq(mfs_dev_lock_probe(path), -EBUSY);
	ck_assert_int_eq(mfs_dev_lock_holder(path), pid);
	ck_assert_int_eq(mfs_dev_mounted(path, pid), 0); /* locked, not mounted */
	/* the probe takes the lock shared and drops it: the holder keeps its own */
	ck_assert_int_eq(mfs_dev_lock_probe(path), -EBUSY);
	reap(pid, release);
	ck_assert_int_eq(mfs_dev_lock_probe(path), 0);
	ck_assert_int_eq(mfs_dev_lock_holder(path), 0);
}
END_TEST

struct watcher {
	int fd;      /* read end of the pipe that is stderr */
	int release; /* the holder's release pipe */
	char seen[512];
};

/* Let the holder go once the wait has been announced on stderr. */
static void *watch(void *arg)
{
	struct watcher *w = arg;
	size_t n = 0;
	ssize_t got;

	while (n < sizeof(w->seen) - 1 &&
	       (got = read(w->fd, w->seen + n, sizeof(w->seen) - 1 - n)) > 0) {
		n += (size_t)got;
		w->seen[n] = '\0';
		if (strchr(w->seen, '\n'))
			break;
	}
	if (write(w->release, "x", 1) != 1)
		return NULL;
	return NULL;
}

START_TEST(test_wait_exiting)
{
	struct watcher w = {0};
	int pfd[2], saved, release, status;
	pthread_t th;
	pid_t pid;

	/* free: no wait, no message */
	ck_assert_int_eq(mfs_dev_wait_exiting(path, 10, "test"), 0);
	/* held, and kept: -EBUSY once the time is up (0 s here) */
	pid = hold_lock(&release);
	ck_assert_int_eq(mfs_dev_wait_exiting(path, 0, "test"), -EBUSY);
	/* held by a process that lets go once the wait is announced: 0 */
	ck_assert_int_eq(pipe(pfd), 0);
	saved = dup(2);
	ck_assert_int_eq(dup2(pfd[1], 2), 2);
	close(pfd[1]);
	w.fd = pfd[0];
	w.release = release;
	ck_assert_int_eq(pthread_create(&th, NULL, watch, &w), 0);
	ck_assert_int_eq(mfs_dev_wait_exiting(path, 60, "test"), 0);
	dup2(saved, 2);
	close(saved);
	pthread_join(th, NULL);
	close(pfd[0]);
	close(release);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(strstr(w.seen, "test: waiting for the mendfs daemon that still holds ") &&
	                      strstr(w.seen, path),
	              "message: %s", w.seen);
	ck_assert_int_eq(mfs_dev_lock_probe(path), 0);
}
END_TEST

static Suite *devlock_suite(void)
{
	Suite *s = suite_create("devlock");
	TCase *tc;

	tc = tcase_create("mountinfo");
	tcase_add_test(tc, test_mountinfo_parse);
	suite_add_tcase(s, tc);

	tc = tcase_create("lock");
	tcase_add_checked_fixture(tc, file_setup, file_teardown);
	tcase_add_test(tc, test_probe_and_holder);
	tcase_add_test(tc, test_wait_exiting);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(devlock_suite());
}
