/* SPDX-License-Identifier: MIT */
/*
 * mendctl events (see events.h; docs/man/mendctl.8).  Calls the daemon's
 * MENDFS_IOC_EVENTS with a one-second wait while following, so a follower
 * wakes at most once a second when nothing happens; it ends on SIGINT or
 * SIGTERM (exit 0) and when the mount point no longer shows the mount it
 * opened (umount -l or fusermount3 -u -z: exit 0, and its descriptor, the
 * last reference, goes so the daemon exits).  Events the daemon's ring
 * dropped before they were read are one "lost" line.
 */
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "events.h"
#include "mendfs/ioctl.h"
#include "mfs_json.h"

static volatile sig_atomic_t ev_stop;

static void ev_on_signal(int sig)
{
	(void)sig;
	ev_stop = 1;
}

static const char *kind_name(uint32_t k)
{
	return k == MENDFS_EV_POISON        ? "poison"
	       : k == MENDFS_EV_META_HEALED ? "metadata_healed"
	       : k == MENDFS_EV_META_LOST   ? "metadata_lost"
	       : k == MENDFS_EV_DATA_CSUM   ? "data_csum"
	                                    : "unknown";
}

static const char *cause_name(uint32_t c)
{
	static const char *const n[] = {"unknown",     "read_error", "latent",   "injected",
	                                "media_error", "corrupt",    "badblocks"};

	return c < sizeof(n) / sizeof(n[0]) ? n[c] : "unknown";
}

/* The mount's source (the device) from /proc/self/mounts, or NULL. */
static char *mount_source(const char *mnt)
{
	char real[4096], *src = NULL;
	struct mntent *m;
	FILE *f;

	if (!realpath(mnt, real))
		return NULL;
	f = setmntent("/proc/self/mounts", "r");
	if (!f)
		return NULL;
	while ((m = getmntent(f))) /* the last one mounted there is the one seen */
		if (!strcmp(m->mnt_dir, real)) {
			free(src);
			src = strdup(m->mnt_fsname);
		}
	endmntent(f);
	return src;
}

/* "2026-12-06T02:42:27.123456789Z" */
static void fmt_time(int64_t ns, char *out, size_t len)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	size_t n;

	gmtime_r(&s, &tm);
	n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, len - n, ".%09lldZ", (long long)(ns % 1000000000));
}

static int print_json(const struct mendfs_ioc_event *e, const char *dev)
{
	struct json_object *o = json_object_new_object();
	char t[64];

	fmt_time(e->time_ns, t, sizeof(t));
	if (!o || mfs_json_add_u64(o, "seq", e->seq) || mfs_json_add_text(o, "time", t) ||
	    mfs_json_add_text(o, "kind", kind_name(e->kind)) ||
	    mfs_json_add_text(o, "cause", cause_name(e->cause)) ||
	    (dev && mfs_json_add_name(o, "device", dev)) ||
	    mfs_json_add_u64(o, "sector", e->sector) || mfs_json_add_u64(o, "count", e->count))
		goto nomem;
	if (e->kind != MENDFS_EV_POISON && e->kind != MENDFS_EV_DATA_CSUM &&
	    mfs_json_add_u64(o, "block", e->block))
		goto nomem;
	if (e->ino &&
	    (mfs_json_add_u64(o, "ino", e->ino) ||
	     (e->path[0] && mfs_json_add_name(o, "path", e->path)) ||
	     mfs_json_add_u64(o, "offset", e->offset) || mfs_json_add_u64(o, "length", e->length)))
		goto nomem;
	return mfs_json_print(stdout, o);
nomem:
	if (o)
		json_object_put(o);
	return -ENOMEM;
}

static void print_text(const struct mendfs_ioc_event *e, const char *dev)
{
	unsigned long long s = e->sector, last = e->sector + e->count - 1;
	char t[64];

	fmt_time(e->time_ns, t, sizeof(t));
	printf("%llu %s %s (%s) %s sectors %llu-%llu", (unsigned long long)e->seq, t,
	       kind_name(e->kind), cause_name(e->cause), dev ? dev : "-", s, last);
	if (e->kind != MENDFS_EV_POISON && e->kind != MENDFS_EV_DATA_CSUM)
		printf(" block %llu", (unsigned long long)e->block);
	if (e->ino) {
		if (e->path[0])
			printf(": %s (inode %llu)", e->path, (unsigned long long)e->ino);
		else
			printf(": <inode %llu>", (unsigned long long)e->ino);
		printf(" bytes %llu+%llu", (unsigned long long)e->offset,
		       (unsigned long long)e->length);
	}
	putchar('\n');
}

static void print_lost(uint64_t lost, uint64_t oldest, bool json)
{
	if (json) {
		struct json_object *o = json_object_new_object();

		if (o && !mfs_json_add_u64(o, "lost", lost) &&
		    !mfs_json_add_u64(o, "oldest_seq", oldest))
			mfs_json_print(stdout, o);
		else if (o)
			json_object_put(o);
	} else {
		printf("lost %llu events (dropped by the daemon's ring; it holds seq %llu on)\n",
		       (unsigned long long)lost, (unsigned long long)oldest);
	}
}

static int ev_fail(bool json, const char *fmt, const char *mnt, int err)
{
	return mfs_json_fail(json, 1, "mendctl", fmt, mnt, strerror(err));
}

/* Is @mnt still the mount @fd was opened on? */
static bool still_mounted(int fd, const char *mnt)
{
	struct stat a, b;

	return !fstat(fd, &a) && !stat(mnt, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int mendctl_events(const char *mnt, uint64_t from, bool follow, bool json)
{
	struct sigaction sa = {.sa_handler = ev_on_signal}; /* no SA_RESTART */
	struct mendfs_ioc_events *a;
	bool warned = false;
	char *dev;
	int fd, ret = 0;

	fd = open(mnt, O_RDONLY);
	if (fd < 0)
		return ev_fail(json, "open %s: %s", mnt, errno);
	a = calloc(1, sizeof(*a));
	if (!a) {
		close(fd);
		return ev_fail(json, "events %s: %s", mnt, ENOMEM);
	}
	dev = mount_source(mnt);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!ev_stop) {
		memset(a, 0, sizeof(*a));
		a->version = MENDFS_IOC_VERSION;
		a->from_seq = from;
		a->wait_ms = follow ? 1000 : 0;
		if (ioctl(fd, MENDFS_IOC_EVENTS, a) < 0) {
			int err = errno;

			if (err == EINTR)
				continue; /* ev_stop is set, or it was another signal */
			if (err == EPERM) {
				ret = ev_fail(json, "events %s: %s (events need root)", mnt, err);
			} else {
				ret = ev_fail(json, "events %s: %s", mnt,
				              err == ENOTTY ? EOPNOTSUPP : err);
			}
			break;
		}
		if (a->lost)
			print_lost(a->lost, a->oldest_seq, json);
		if (from > a->head_seq && !warned) {
			fprintf(stderr,
			        "mendctl: %s: seq %llu not reached yet (the next event is %llu; "
			        "was it remounted?)\n",
			        mnt, (unsigned long long)from, (unsigned long long)a->head_seq);
			warned = true;
		}
		for (uint32_t i = 0; i < a->nr && i < MENDFS_EV_MAX; i++) {
			a->ev[i].path[MENDFS_EV_PATH - 1] = '\0';
			if (json)
				print_json(&a->ev[i], dev);
			else
				print_text(&a->ev[i], dev);
		}
		from = a->next_seq;
		if (fflush(stdout)) {
			ret = ev_fail(json, "%s: writing to standard output: %s", mnt, errno);
			break;
		}
		if (!a->nr && !follow)
			break;
		if (!a->nr && !still_mounted(fd, mnt)) {
			fprintf(stderr, "mendctl: %s was unmounted\n", mnt);
			break;
		}
	}
	free(dev);
	free(a);
	close(fd);
	return ret;
}
