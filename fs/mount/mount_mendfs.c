/* SPDX-License-Identifier: MIT */
/*
 * mount.mendfs: the mount(8) helper for filesystems of type mendfs.
 *
 *   mount.mendfs DEVICE DIR [-sfnv] [-N NS] [-o OPTS] [-t TYPE]
 *
 * mount(8) calls it for `mount -t mendfs DEVICE DIR` and for fstab lines of
 * type mendfs.  It removes the options that only mount(8) and fstab use
 * (defaults, auto, noauto, user, nofail, _netdev, x-*, ...), runs the daemon
 * `mendfs -o OPTS DEVICE DIR` and waits for it: the daemon's first process
 * exits only once the mount is live (0) or after printing why it failed.  The
 * helper returns 0 when the mount is live and 32 (mount failure, as mount(8)
 * defines it) otherwise; 1 for a usage error.
 *
 * mount(8) hands a helper the options that differ from the kernel's defaults
 * only: `suid`, `dev` and `exec` never reach it, while FUSE mounts default to
 * nosuid,nodev.  So that `mount -o suid,dev` and fstab's `defaults` mean what
 * they mean for ext4, the helper run by root asks for suid and dev unless the
 * list says nosuid or nodev (mendfs(8), OPTIONS).
 *
 * The daemon is looked up beside the helper's own executable first (a build
 * directory, or the sbindir both are installed to), then at the installed
 * path, then in PATH.
 *
 * `mount -o remount,ro|rw DIR` runs it as mount.fuse.mendfs (the type the
 * kernel shows) with "remount" among the options: it then talks to the
 * running daemon (MENDFS_IOC_REMOUNT) and changes the kernel's flags with
 * mount(2), in the order that never lets a change through unrecorded.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mendfs/ioctl.h"
#include "mfs_cli.h"

#ifndef MENDFS_DAEMON_PATH
#define MENDFS_DAEMON_PATH "/usr/sbin/mendfs"
#endif

#define EX_USAGE_MOUNT 1
#define EX_FAIL_MOUNT  32

/* Options that mount(8) and fstab use and the filesystem never sees. */
static bool userspace_only(const char *opt)
{
	static const char *const names[] = {
	        "defaults", "auto",   "noauto",  "user", "nouser",  "users", "owner",
	        "group",    "nofail", "_netdev", "loop", "comment", NULL,
	};
	size_t len = strcspn(opt, "=");
	unsigned i;

	if (!strncmp(opt, "x-", 2))
		return true;
	for (i = 0; names[i]; i++)
		if (strlen(names[i]) == len && !strncmp(opt, names[i], len))
			return true;
	return false;
}

/* Is @name one of the comma-separated options of @list? */
static bool has_opt(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
		if (!strncmp(p, name, len) && (p[len] == ',' || !p[len]))
			return true;
	return false;
}

/* Append the options of @list the daemon should see to @out (comma-separated). */
static int filter_opts(char *out, size_t outlen, const char *list)
{
	char *copy = strdup(list), *save = NULL, *opt;
	size_t used = strlen(out);

	if (!copy)
		return -1;
	for (opt = strtok_r(copy, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		int n;

		if (userspace_only(opt))
			continue;
		n = snprintf(out + used, outlen - used, "%s%s", used ? "," : "", opt);
		if (n < 0 || (size_t)n >= outlen - used) {
			free(copy);
			return -1;
		}
		used += (size_t)n;
	}
	free(copy);
	return 0;
}

/* The kernel's flag an option of a remount sets (*set) or clears; false: not one. */
static bool vfs_flag(const char *opt, unsigned long *flag, bool *set)
{
	static const struct {
		const char *on, *off;
		unsigned long flag;
	} flags[] = {
	        {"nosuid", "suid", MS_NOSUID},
	        {"nodev", "dev", MS_NODEV},
	        {"noexec", "exec", MS_NOEXEC},
	        {"noatime", "atime", MS_NOATIME},
	        {"nodiratime", "diratime", MS_NODIRATIME},
	        {"relatime", "norelatime", MS_RELATIME},
	        {"strictatime", "nostrictatime", MS_STRICTATIME},
	};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (!strcmp(opt, flags[i].on) || !strcmp(opt, flags[i].off)) {
			*flag = flags[i].flag;
			*set = !strcmp(opt, flags[i].on);
			return true;
		}
	}
	return false;
}

/* MENDFS_IOC_REMOUNT through @fd; 0 or an errno. */
static int daemon_remount(int fd, bool read_only)
{
	struct mendfs_ioc_remount a = {.version = MENDFS_IOC_VERSION, .read_only = read_only};

	return ioctl(fd, MENDFS_IOC_REMOUNT, &a) ? errno : 0;
}

/*
 * mount -o remount,...: ro and rw switch the filesystem (the daemon makes
 * everything durable and marks it clean before the kernel's read-only flag
 * is the only thing left, and is writable before the kernel lets a write
 * through); the kernel's mount flags (nosuid, noatime, ...) are set as
 * listed.  Other options are those the daemon runs with (mount(8) passes
 * the fstab line again) and are not changed by a remount.
 */
static int remount(const char *dir, const char *list, bool verbose)
{
	struct mendfs_ioc_stats st = {.version = MENDFS_IOC_VERSION};
	unsigned long flags = 0, flag;
	char *copy = strdup(list), *save = NULL, *opt;
	struct statvfs sv;
	bool read_only, set;
	int fd, err;

	if (!copy)
		return EX_FAIL_MOUNT;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstatvfs(fd, &sv)) {
		fprintf(stderr, "mount.mendfs: %s: %s\n", dir, strerror(errno));
		goto fail;
	}
	if (ioctl(fd, MENDFS_IOC_STATS, &st)) {
		fprintf(stderr, "mount.mendfs: %s: not a mendfs mount point (%s)\n", dir,
		        strerror(errno));
		goto fail;
	}
	read_only = sv.f_flag & ST_RDONLY;
	/* what the kernel shows now, changed by the options listed */
	flags |= sv.f_flag & ST_NOSUID ? MS_NOSUID : 0;
	flags |= sv.f_flag & ST_NODEV ? MS_NODEV : 0;
	flags |= sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0;
	flags |= sv.f_flag & ST_NOATIME ? MS_NOATIME : 0;
	flags |= sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0;
	flags |= sv.f_flag & ST_RELATIME ? MS_RELATIME : 0;
	for (opt = strtok_r(copy, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		if (!strcmp(opt, "ro") || !strcmp(opt, "rw")) {
			read_only = opt[1] == 'o';
		} else if (vfs_flag(opt, &flag, &set)) {
			if (flag & (MS_NOATIME | MS_RELATIME | MS_STRICTATIME))
				flags &= ~(MS_NOATIME | MS_RELATIME | MS_STRICTATIME);
			flags = set ? flags | flag : flags & ~flag;
		}
	}
	if (verbose)
		fprintf(stderr, "mount.mendfs: remount %s %s, mount flags %#lx\n", dir,
		        read_only ? "read-only" : "read-write", flags);
	if (!read_only && (err = daemon_remount(fd, false))) {
		fprintf(stderr, "mount.mendfs: %s: the filesystem cannot be made writable: %s%s\n",
		        dir, strerror(err),
		        err == EROFS ? " (mounted read-only, or read-only after an I/O error: "
		                       "unmount it and mount it read-write)"
		                     : "");
		goto fail;
	}
	if (read_only)
		syncfs(fd); /* the kernel's dirty pages reach the daemon before it freezes */
	if (mount(NULL, dir, NULL, MS_REMOUNT | flags | (read_only ? MS_RDONLY : 0), NULL)) {
		err = errno;
		fprintf(stderr, "mount.mendfs: remount of %s: %s%s\n", dir, strerror(err),
		        err == EBUSY && read_only ? " (a file is open for writing)" : "");
		/* made writable for nothing: read-only again, as the kernel still is */
		if (!read_only && (sv.f_flag & ST_RDONLY))
			daemon_remount(fd, true);
		goto fail;
	}
	if (read_only && (err = daemon_remount(fd, true))) {
		fprintf(stderr,
		        "mount.mendfs: %s: read-only, but the filesystem could not be "
		        "marked clean: %s (fsck.mendfs will check it)\n",
		        dir, strerror(err));
		goto fail;
	}
	close(fd);
	free(copy);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(copy);
	return EX_FAIL_MOUNT;
}

/*
 * The daemon: beside this executable (or in the build tree), else the
 * installed path, else "mendfs" in PATH.
 */
static const char *find_daemon(char *buf, size_t len)
{
	/* installed: beside this helper; in a build tree: fs/fuse/ beside fs/mount/ */
	static const char *const rel[] = {"/mendfs", "/../fuse/mendfs"};
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;
	size_t i;

	if (n > 0) {
		buf[n] = '\0';
		slash = strrchr(buf, '/');
		for (i = 0; slash && i < sizeof(rel) / sizeof(rel[0]); i++) {
			if ((size_t)(slash - buf) + strlen(rel[i]) + 1 > len)
				continue;
			strcpy(slash, rel[i]);
			if (!access(buf, X_OK))
				return buf;
		}
	}
	if (!access(MENDFS_DAEMON_PATH, X_OK))
		return MENDFS_DAEMON_PATH;
	return "mendfs";
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mount.mendfs DEVICE DIR [-sfnv] [-o OPTS]\n"
	           "       mount.mendfs -V|--version|--help\n"
	           "Called by mount(8) for type mendfs; see mendfs(8).\n");
}

int main(int argc, char **argv)
{
	char opts[4096] = "", daemon_buf[PATH_MAX];
	const char *daemon, *device, *dir, *remount_opts = NULL;
	bool fake = false, verbose = false;
	char *dargv[7];
	int c, status, n = 0;
	pid_t pid;
	static const struct option lopts[] = {
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};

	while ((c = getopt_long(argc, argv, "o:sfnvN:t:hV", lopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (has_opt(optarg, "remount"))
				remount_opts = optarg;
			if (filter_opts(opts, sizeof(opts), optarg)) {
				fprintf(stderr, "mount.mendfs: option list too long\n");
				return EX_USAGE_MOUNT;
			}
			break;
		case 'f':
			fake = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 's': /* sloppy: the daemon still refuses unknown options */
		case 'n': /* no mtab: the kernel's mount table is the only one */
		case 'N': /* namespace: mount(8) has already entered it */
		case 't': /* mendfs (or fuse.mendfs) */
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			return mfs_cli_version("mount.mendfs");
		default:
			usage(stderr);
			return EX_USAGE_MOUNT;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return EX_USAGE_MOUNT;
	}
	device = argv[optind];
	dir = argv[optind + 1];
	if (remount_opts)
		return fake ? 0 : remount(dir, remount_opts, verbose);
	daemon = find_daemon(daemon_buf, sizeof(daemon_buf));
	/* mount(8)'s defaults, which it does not pass on (only root may mount suid, dev) */
	if (geteuid() == 0 &&
	    ((!has_opt(opts, "nosuid") && filter_opts(opts, sizeof(opts), "suid")) ||
	     (!has_opt(opts, "nodev") && filter_opts(opts, sizeof(opts), "dev")))) {
		fprintf(stderr, "mount.mendfs: option list too long\n");
		return EX_USAGE_MOUNT;
	}

	dargv[n++] = (char *)daemon;
	if (opts[0]) {
		dargv[n++] = "-o";
		dargv[n++] = opts;
	}
	dargv[n++] = (char *)device;
	dargv[n++] = (char *)dir;
	dargv[n] = NULL;
	if (verbose) {
		int i;

		fprintf(stderr, "mount.mendfs:");
		for (i = 0; i < n; i++)
			fprintf(stderr, " %s", dargv[i]);
		fputc('\n', stderr);
	}
	if (fake)
		return 0;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "mount.mendfs: fork: %s\n", strerror(errno));
		return EX_FAIL_MOUNT;
	}
	if (pid == 0) {
		execvp(daemon, dargv);
		fprintf(stderr, "mount.mendfs: cannot run %s: %s\n", daemon, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "mount.mendfs: waitpid: %s\n", strerror(errno));
			return EX_FAIL_MOUNT;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		fprintf(stderr, "mount.mendfs: %s was killed by signal %d\n", daemon,
		        WTERMSIG(status));
	fprintf(stderr, "mount.mendfs: mounting %s on %s failed\n", device, dir);
	return EX_FAIL_MOUNT;
}
