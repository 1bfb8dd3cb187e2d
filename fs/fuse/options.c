/* SPDX-License-Identifier: MIT */
/*
 * The command line and the -o mount options (see options.h): which options
 * the daemon applies itself, which it passes on to the kernel through
 * libfuse, and their checks.  Calls the daemon's log only.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "atime.h"
#include "daemon.h"
#include "mfs_cli.h"
#include "options.h"

/*
 * The value of -o fault_inject (a test knob, mendfs(8)): "N" fails device
 * operation N once, "N+" every operation from N on, "0" only counts.
 * Returns 0, or -1 if it is anything else.
 */
static int parse_fault(const char *val, uint64_t *nth, bool *dying)
{
	char *end;
	unsigned long long n;

	if (*val < '0' || *val > '9')
		return -1;
	errno = 0;
	n = strtoull(val, &end, 10);
	if (errno)
		return -1;
	*dying = *end == '+';
	if ((*end && (*end != '+' || end[1])) || (*dying && !n))
		return -1;
	*nth = n;
	return 0;
}

/*
 * Is @opt an atime option (atime, relatime, strictatime, noatime,
 * nodiratime, diratime)?  If so, apply it to *@flags (MFS_ATIME_*: the last
 * of atime, relatime, strictatime and noatime wins, as with mount(8)).
 */
static bool atime_opt(const char *opt, unsigned *flags)
{
	const unsigned mode = MFS_ATIME_STRICT | MFS_ATIME_NONE;

	if (!strcmp(opt, "atime") || !strcmp(opt, "relatime"))
		*flags &= ~mode; /* "atime": not noatime; Linux's default is relatime */
	else if (!strcmp(opt, "strictatime"))
		*flags = (*flags & ~mode) | MFS_ATIME_STRICT;
	else if (!strcmp(opt, "noatime"))
		*flags = (*flags & ~mode) | MFS_ATIME_NONE;
	else if (!strcmp(opt, "nodiratime"))
		*flags |= MFS_ATIME_NODIRATIME;
	else if (!strcmp(opt, "diratime"))
		*flags &= ~MFS_ATIME_NODIRATIME;
	else
		return false;
	return true;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mendfs [-f] [-o OPTS] DEVICE MOUNTPOINT\n"
	           "  -f        stay in the foreground (log to stderr)\n"
	           "  -o OPTS   comma-separated mount options:\n"
	           "            ro, rw, allow_other, backend=pmem|uring|auto, badblocks=PATH,\n"
	           "            latent=PATH, poison_inject, writeback, io_uring, commit=SECONDS,\n"
	           "            threads=N,"
	           "            timeout=SECONDS, debug, fault_inject=N|N+|0 (testing),\n"
	           "            default_permissions (always on), and the generic flags\n"
	           "            atime, relatime, strictatime, noatime, nodiratime, diratime,\n"
	           "            nosuid, suid, nodev, dev, noexec, exec, sync, async, dirsync\n"
	           "  -h, --help      this help\n"
	           "  -V, --version   print \"mendfs VERSION\"\n"
	           "See mendfs(8).\n");
}

/* Generic mount flags handed to the kernel through libfuse. */
static const char *const kernel_flags[] = {
        "nosuid", "suid", "nodev", "dev", "noexec", "exec", "sync", "async", "dirsync", NULL,
};

static int kopt_add(struct mfsd_opts *o, const char *opt)
{
	size_t len = strlen(o->kernel_opts);

	if (len + 1 + strlen(opt) + 1 > sizeof(o->kernel_opts))
		return -1;
	snprintf(o->kernel_opts + len, sizeof(o->kernel_opts) - len, ",%s", opt);
	return 0;
}

/* A decimal option value in [lo, hi] into *out; false if it is anything else. */
static bool opt_uint(const char *val, unsigned long lo, unsigned long hi, unsigned *out)
{
	char *end;
	unsigned long n = strtoul(val, &end, 10);

	if (!*val || *end || n < lo || n > hi)
		return false;
	*out = (unsigned)n;
	return true;
}

/* Parse one comma-separated -o list into @o.  Returns 0 or -1 after a message. */
static int parse_opts(struct mfsd_opts *o, char *list)
{
	char *save = NULL, *opt;
	unsigned i;

	for (opt = strtok_r(list, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		char *val = strchr(opt, '=');
		bool known = false;

		if (val)
			*val++ = '\0';
		if (!strcmp(opt, "ro") && !val) {
			o->read_only = true;
		} else if (!strcmp(opt, "rw") && !val) {
			o->read_only = false;
		} else if (!strcmp(opt, "allow_other") && !val) {
			o->allow_other = true;
		} else if (!strcmp(opt, "default_permissions") && !val) {
			/* always on */
		} else if (!val && atime_opt(opt, &o->atime)) {
			/* the daemon applies it; libfuse passes (no)atime on to mount(2) */
			if ((!strcmp(opt, "atime") || !strcmp(opt, "noatime")) &&
			    kopt_add(o, opt)) {
				mfsd_log(LOG_ERR, "too many mount options");
				return -1;
			}
		} else if (!strcmp(opt, "debug") && !val) {
			o->debug = true;
		} else if (!strcmp(opt, "poison_inject") && !val) {
			o->poison_inject = true;
		} else if (!strcmp(opt, "writeback") && !val) {
			o->writeback = true;
		} else if (!strcmp(opt, "no_writeback") && !val) {
			o->writeback = false;
		} else if (!strcmp(opt, "io_uring") && !val) {
			o->io_uring = true;
		} else if (!strcmp(opt, "no_io_uring") && !val) {
			o->io_uring = false;
		} else if (!strcmp(opt, "backend") && val) {
			if (!strcmp(val, "pmem"))
				o->backend = BLK_BACKEND_PMEM;
			else if (!strcmp(val, "uring"))
				o->backend = BLK_BACKEND_URING;
			else if (!strcmp(val, "auto"))
				o->backend = BLK_BACKEND_AUTO;
			else {
				mfsd_log(LOG_ERR, "backend=%s: expected pmem, uring or auto", val);
				return -1;
			}
		} else if (!strcmp(opt, "fault_inject") && val) {
			o->fault_inject = !parse_fault(val, &o->fault_nth, &o->fault_dying);
			if (!o->fault_inject) {
				mfsd_log(LOG_ERR, "fault_inject=%s: expected N, N+ or 0", val);
				return -1;
			}
		} else if (!strcmp(opt, "badblocks") && val && *val) {
			o->badblocks = val;
		} else if (!strcmp(opt, "latent") && val && *val) {
			o->latent = val;
		} else if (!strcmp(opt, "threads") && val) {
			if (!opt_uint(val, 1, 1024, &o->threads)) {
				mfsd_log(LOG_ERR, "threads=%s: expected a number from 1 to 1024",
				         val);
				return -1;
			}
		} else if (!strcmp(opt, "commit") && val) {
			if (!opt_uint(val, 0, 86400, &o->commit)) {
				mfsd_log(LOG_ERR,
				         "commit=%s: expected seconds from 0 (off) to 86400", val);
				return -1;
			}
		} else if (!strcmp(opt, "timeout") && val) {
			char *end;
			double t = strtod(val, &end);

			if (!*val || *end || t < 0 || t > 86400) {
				mfsd_log(LOG_ERR, "timeout=%s: expected seconds from 0 to 86400",
				         val);
				return -1;
			}
			o->timeout = t;
		} else {
			for (i = 0; kernel_flags[i] && !known; i++)
				known = !val && !strcmp(opt, kernel_flags[i]);
			if (!known) {
				mfsd_log(LOG_ERR, "unknown mount option '%s%s%s' (see mendfs(8))",
				         opt, val ? "=" : "", val ? val : "");
				return -1;
			}
			if (kopt_add(o, opt)) {
				mfsd_log(LOG_ERR, "too many mount options");
				return -1;
			}
		}
	}
	return 0;
}

int mfsd_parse_args(int argc, char **argv, struct mfsd_opts *o)
{
	static const struct option lopts[] = {
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->timeout = MFSD_DEFAULT_TIMEOUT;
	o->commit = MFSD_DEFAULT_COMMIT;
	while ((c = getopt_long(argc, argv, "fo:hVd", lopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->foreground = true;
			break;
		case 'd':
			o->debug = true;
			break;
		case 'o': {
			size_t len = o->optlist ? strlen(o->optlist) : 0;
			char *n = realloc(o->optlist, len + strlen(optarg) + 2);

			if (!n) {
				mfsd_log(LOG_ERR, "out of memory");
				return -1;
			}
			if (len)
				n[len++] = ',';
			strcpy(n + len, optarg);
			o->optlist = n;
			break;
		}
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			mfs_cli_version("mendfs");
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return -1;
	}
	o->device = argv[optind];
	o->mountpoint = argv[optind + 1];
	if (o->optlist && parse_opts(o, o->optlist))
		return -1;
	return 0;
}

void mfsd_opts_free(struct mfsd_opts *o)
{
	free(o->optlist);
	o->optlist = NULL;
}
