/* SPDX-License-Identifier: MIT */
/*
 * mendctl scrub MOUNTPOINT [--json] [--rate MB/s] [--resume] (mendctl(8)).
 *
 * The daemon does the checking, one bounded step per MENDFS_IOC_SCRUB call:
 * every in-use metadata block's two copies (a bad one rewritten from the
 * good one), then every allocated data block read through the block engine
 * (latent poison met becomes recorded poison).  Between steps this file
 * draws the progress bar (a terminal only), keeps to --rate by sleeping, and
 * stops on SIGINT/SIGTERM/SIGHUP, saying where; the daemon remembers that
 * cursor for --resume.
 *
 * The damage report is then built here, by walking the mounted tree (nftw,
 * not crossing mounts) and asking MENDFS_IOC_BADRANGES of each regular file:
 * the paths come from the walk, and the daemon needs no path lookup of its
 * own (docs/design/core.md §3.13a, "Scrub").  It is printed as fsck.mendfs prints its
 * report, and with --json in the shape of fsck.mendfs --json.
 *
 * Exit codes: 0 nothing damaged, 1 error, 2 usage, 4 damaged files or
 * metadata left bad, 16 another scrub of the filesystem is running (EBUSY
 * from the daemon, ioctl_scrub.c), 32 interrupted (resumable).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mendfs/ioctl.h"
#include "mendfs/recovery.h"
#include "mfs_json.h"
#include "mfs_progress.h"
#include "scrub.h"

#define EXIT_DAMAGED     4
#define EXIT_BUSY        16 /* another process's scrub holds the cursor */
#define EXIT_INTERRUPTED 32
#define MIB              1048576.0

static volatile sig_atomic_t stop;
static bool json;

static void on_signal(int sig)
{
	stop = sig;
}

/* Totals of the whole run. */
struct totals {
	uint64_t meta_checked, meta_healed, meta_lost, meta_bad, meta_skipped;
	uint64_t data_bytes, poison_found, csum_found;
	uint32_t phase;
	uint64_t pos, meta_total, data_total;
};

#define fail_msg(code, ...) mfs_json_fail(json, (code), "mendctl", __VA_ARGS__)

static int usage(const char *msg)
{
	fprintf(stderr,
	        "mendctl: %s\nusage: mendctl scrub MOUNTPOINT [--json] [--rate MB/s] [--resume]\n",
	        msg);
	if (json)
		mfs_json_error(stdout, msg, 2, NULL);
	return 2;
}

/* --- the damage report ------------------------------------------------------------ */

struct dfile {
	char *path; /* from the filesystem root, "/..." */
	uint64_t ino;
	struct mendfs_range *r;
	size_t nr;
};

static struct {
	const char *root;
	size_t rootlen;
	struct dfile *v;
	size_t n, cap;
	uint64_t *seen; /* inodes already asked (hard links) */
	size_t nseen, capseen;
	int err; /* first -errno of the walk */
} walk;

static bool seen_add(uint64_t ino)
{
	for (size_t i = 0; i < walk.nseen; i++)
		if (walk.seen[i] == ino)
			return false;
	if (walk.nseen == walk.capseen) {
		size_t cap = walk.capseen ? walk.capseen * 2 : 256;
		uint64_t *p = realloc(walk.seen, cap * sizeof(*p));

		if (!p)
			return true; /* a second look at a hard link is harmless */
		walk.seen = p;
		walk.capseen = cap;
	}
	walk.seen[walk.nseen++] = ino;
	return true;
}

/* The poisoned ranges of the file at @fpath into walk.v.  0 or -errno. */
static int file_ranges(const char *fpath, const struct stat *st)
{
	struct mendfs_range buf[256], *all = NULL;
	size_t nall = 0;
	uint64_t start = 0;
	unsigned n;
	int fd = open(fpath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	do {
		struct mendfs_range *p;

		if (mendfs_badranges(fd, (off_t)start, buf, 256, &n)) {
			int err = -errno;

			close(fd);
			free(all);
			return err;
		}
		if (!n)
			break;
		p = realloc(all, (nall + n) * sizeof(*p));
		if (!p) {
			close(fd);
			free(all);
			return -ENOMEM;
		}
		all = p;
		memcpy(all + nall, buf, n * sizeof(*buf));
		nall += n;
		start = buf[n - 1].offset + buf[n - 1].length;
	} while (n == 256);
	close(fd);
	if (!nall)
		return 0;
	if (walk.n == walk.cap) {
		size_t cap = walk.cap ? walk.cap * 2 : 16;
		struct dfile *p = realloc(walk.v, cap * sizeof(*p));

		if (!p) {
			free(all);
			return -ENOMEM;
		}
		walk.v = p;
		walk.cap = cap;
	}
	/* the path from the filesystem root: the mount point is "/" */
	if (asprintf(&walk.v[walk.n].path, "/%s",
	             fpath[walk.rootlen] == '/' ? fpath + walk.rootlen + 1 : "") < 0) {
		free(all);
		return -ENOMEM;
	}
	walk.v[walk.n].ino = st->st_ino;
	walk.v[walk.n].r = all;
	walk.v[walk.n].nr = nall;
	walk.n++;
	return 0;
}

static int walk_one(const char *fpath, const struct stat *st, int type, struct FTW *ftw)
{
	int ret;

	(void)ftw;
	if (stop)
		return 1;
	if (type != FTW_F || !S_ISREG(st->st_mode) || !seen_add(st->st_ino))
		return 0;
	ret = file_ranges(fpath, st);
	if (ret) {
		fprintf(stderr, "mendctl: scrub: %s: %s\n", fpath, strerror(-ret));
		if (!walk.err)
			walk.err = ret;
		return ret == -ENOMEM;
	}
	return 0;
}

static int dfile_cmp(const void *a, const void *b)
{
	const struct dfile *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void walk_free(void)
{
	for (size_t i = 0; i < walk.n; i++) {
		free(walk.v[i].path);
		free(walk.v[i].r);
	}
	free(walk.v);
	free(walk.seen);
}

/* fsck.mendfs's report (fsck/damage.c, fsck_damage_report), for a mounted tree. */
static void report_print(const struct totals *t)
{
	size_t nranges = 0;

	for (size_t i = 0; i < walk.n; i++)
		nranges += walk.v[i].nr;
	if (!walk.n && !t->meta_lost && !t->meta_bad)
		return;
	printf("Damage report (%zu poisoned range%s):\n", nranges, nranges == 1 ? "" : "s");
	for (size_t i = 0; i < walk.n; i++) {
		char *shown = mfs_name_escape(walk.v[i].path);

		for (size_t j = 0; j < walk.v[i].nr; j++) {
			const struct mendfs_range *r = &walk.v[i].r[j];

			printf("  %s: bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 " bytes) damaged\n",
			       shown ? shown : "?", r->offset, r->offset + r->length - 1,
			       r->length);
		}
		free(shown);
	}
	if (t->meta_lost)
		printf("  metadata: %" PRIu64 " block%s with no valid copy left (the daemon's log "
		       "names them)\n",
		       t->meta_lost, t->meta_lost == 1 ? "" : "s");
	if (t->meta_bad)
		printf("  metadata: %" PRIu64 " block%s with one bad copy not rewritten (read-only "
		       "mount, or the rewrite failed)\n",
		       t->meta_bad, t->meta_bad == 1 ? "" : "s");
}

static int counts_json(struct json_object *o, const struct totals *t)
{
	int ret = mfs_json_add_u64(o, "metadata_checked", t->meta_checked);

	if (!ret)
		ret = mfs_json_add_u64(o, "metadata_healed", t->meta_healed);
	if (!ret)
		ret = mfs_json_add_u64(o, "metadata_lost", t->meta_lost);
	if (!ret)
		ret = mfs_json_add_u64(o, "metadata_unhealed", t->meta_bad);
	if (!ret)
		ret = mfs_json_add_u64(o, "metadata_skipped", t->meta_skipped);
	if (!ret)
		ret = mfs_json_add_u64(o, "data_bytes", t->data_bytes);
	if (!ret)
		ret = mfs_json_add_u64(o, "poison_found", t->poison_found);
	if (!ret)
		ret = mfs_json_add_u64(o, "checksum_mismatches", t->csum_found);
	return ret;
}

/* fsck.mendfs --json's shape: damaged_files, metadata_errors, repaired, exit_code. */
static int report_json(const char *mnt, const struct totals *t, int code)
{
	struct json_object *o = json_object_new_object(), *files = json_object_new_array();
	int ret = o && files ? 0 : -ENOMEM;

	for (size_t i = 0; !ret && i < walk.n; i++) {
		struct json_object *f = json_object_new_object(), *rs = json_object_new_array();

		ret = f && rs ? 0 : -ENOMEM;
		for (size_t j = 0; !ret && j < walk.v[i].nr; j++)
			ret = mfs_json_add_range(rs, walk.v[i].r[j].offset, walk.v[i].r[j].length);
		if (!ret)
			ret = mfs_json_add_name(f, "path", walk.v[i].path);
		if (!ret)
			ret = mfs_json_add_u64(f, "ino", walk.v[i].ino);
		if (!ret) {
			ret = mfs_json_add(f, "ranges", rs);
			rs = NULL;
		}
		if (!ret && json_object_array_add(files, f))
			ret = -ENOMEM;
		if (ret) {
			json_object_put(f);
			json_object_put(rs);
		}
	}
	if (!ret)
		ret = mfs_json_add_name(o, "mountpoint", mnt);
	if (!ret) {
		ret = mfs_json_add(o, "damaged_files", files);
		files = NULL;
	}
	if (!ret)
		ret = mfs_json_add_u64(o, "metadata_errors", t->meta_lost + t->meta_bad);
	if (!ret)
		ret = mfs_json_add_u64(o, "repaired", t->meta_healed);
	if (!ret)
		ret = mfs_json_add_int(o, "exit_code", code);
	if (!ret)
		ret = mfs_json_add_u64(o, "damaged_file_count", walk.n);
	if (!ret)
		ret = counts_json(o, t);
	if (!ret)
		ret = mfs_json_add_bool(o, "done", true);
	json_object_put(files);
	if (ret) {
		json_object_put(o);
		return fail_msg(1, "out of memory");
	}
	if (mfs_json_print(stdout, o))
		return fail_msg(1, "writing the result to standard output failed");
	return code;
}

/* --- the scrub loop ----------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *phase_name(uint32_t phase)
{
	return phase == MENDFS_SCRUB_META   ? "metadata"
	       : phase == MENDFS_SCRUB_DATA ? "data"
	                                    : "done";
}

/* Sleep until @bytes at @rate bytes/s since @t0 is due (or a signal comes). */
static void rate_wait(double t0, double bytes, double rate)
{
	double due = t0 + bytes / rate, wait = due - now_s();

	if (wait > 0) {
		struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};

		nanosleep(&ts, NULL); /* EINTR: the loop looks at stop */
	}
}

static int interrupted_report(const char *mnt, const struct totals *t)
{
	char msg[512];

	if (t->phase == MENDFS_SCRUB_DONE)
		snprintf(msg, sizeof(msg),
		         "scrub of %s finished, interrupted while listing the damaged files "
		         "(`mendctl badranges FILE` names a file's)",
		         mnt);
	else
		snprintf(msg, sizeof(msg),
		         "scrub of %s interrupted in the %s phase at block %" PRIu64 " of %" PRIu64
		         "; `mendctl scrub --resume %s` continues from there",
		         mnt, phase_name(t->phase), t->pos,
		         t->phase == MENDFS_SCRUB_META ? t->meta_total : t->data_total, mnt);
	fprintf(stderr, "mendctl: %s\n", msg);
	if (json) {
		struct json_object *extra = json_object_new_object();

		if (extra && (mfs_json_add_text(extra, "phase", phase_name(t->phase)) ||
		              mfs_json_add_u64(extra, "position", t->pos) ||
		              mfs_json_add_bool(extra, "done", false) || counts_json(extra, t))) {
			json_object_put(extra);
			extra = NULL;
		}
		mfs_json_error(stdout, msg, EXIT_INTERRUPTED, extra);
	}
	return EXIT_INTERRUPTED;
}

static int scrub(const char *mnt, double rate, bool resume)
{
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: a sleep ends */
	struct mendfs_ioc_scrub a;
	struct mfs_progress bar;
	struct totals t;
	double t0 = now_s();
	uint64_t data_budget = 0, meta_budget = 0;
	int fd, code;

	memset(&t, 0, sizeof(t));
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail_msg(1, "open %s: %s", mnt, strerror(errno));
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (rate > 0) {
		/* about four steps a second, so that the pace is even */
		data_budget = (uint64_t)(rate / 4);
		if (data_budget < 65536)
			data_budget = 65536;
		if (data_budget > (4u << 20))
			data_budget = 4u << 20;
		meta_budget = data_budget / (2 * 4096);
		if (meta_budget < 8)
			meta_budget = 8;
		if (meta_budget > 256)
			meta_budget = 256;
	}
	mfs_progress_init(&bar, STDERR_FILENO, mnt);
	t.phase = MENDFS_SCRUB_META;
	for (bool first = true;; first = false) {
		memset(&a, 0, sizeof(a));
		a.version = MENDFS_IOC_VERSION;
		a.flags = first && resume ? MENDFS_SCRUB_RESUME : 0;
		a.phase = t.phase;
		a.pos = t.pos;
		a.meta_budget = meta_budget;
		a.data_budget = data_budget;
		if (ioctl(fd, MENDFS_IOC_SCRUB, &a) < 0) {
			int err = errno == ENOTTY ? EOPNOTSUPP : errno;

			mfs_progress_clear(&bar);
			close(fd);
			if (err == EBUSY)
				return fail_msg(
				        EXIT_BUSY,
				        "scrub %s: another scrub of this filesystem is running "
				        "(%s); try again when it is done",
				        mnt, strerror(err));
			return fail_msg(1, "scrub %s: %s", mnt, strerror(err));
		}
		t.meta_checked += a.meta_checked;
		t.meta_healed += a.meta_healed;
		t.meta_lost += a.meta_lost;
		t.meta_bad += a.meta_bad;
		t.meta_skipped += a.meta_skipped;
		t.data_bytes += a.data_bytes;
		t.poison_found += a.poison_found;
		t.csum_found += a.csum_found;
		t.phase = a.phase;
		t.pos = a.pos;
		t.meta_total = a.meta_total;
		t.data_total = a.data_total;
		mfs_progress_update(&bar,
		                    a.done                         ? a.meta_total + a.data_total
		                    : a.phase == MENDFS_SCRUB_META ? a.pos
		                                                   : a.meta_total + a.pos,
		                    a.meta_total + a.data_total);
		if (a.done)
			break;
		if (rate > 0 && !stop)
			rate_wait(t0, (double)t.data_bytes + (double)t.meta_checked * 8192, rate);
		if (stop) {
			mfs_progress_clear(&bar);
			close(fd);
			return interrupted_report(mnt, &t);
		}
	}
	mfs_progress_clear(&bar);
	close(fd);
	walk.root = mnt;
	walk.rootlen = strlen(mnt);
	while (walk.rootlen > 1 && mnt[walk.rootlen - 1] == '/')
		walk.rootlen--;
	if (nftw(mnt, walk_one, 32, FTW_PHYS | FTW_MOUNT) < 0)
		walk.err = -errno;
	if (stop) {
		walk_free();
		return interrupted_report(mnt, &t);
	}
	if (walk.err) {
		walk_free();
		return fail_msg(1, "scrub %s: listing damaged files: %s", mnt, strerror(-walk.err));
	}
	if (walk.n) /* qsort's array may not be NULL, even empty */
		qsort(walk.v, walk.n, sizeof(*walk.v), dfile_cmp);
	code = walk.n || t.meta_lost || t.meta_bad ? EXIT_DAMAGED : 0;
	if (json) {
		code = report_json(mnt, &t, code);
	} else {
		printf("%s: %" PRIu64 " metadata blocks checked (%" PRIu64 " healed, %" PRIu64
		       " lost, %" PRIu64 " busy), %.1f MiB of data read, %" PRIu64
		       " new poisoned sectors, %" PRIu64
		       " sectors failing their checksum, %.1f s\n",
		       mnt, t.meta_checked, t.meta_healed, t.meta_lost, t.meta_skipped,
		       (double)t.data_bytes / MIB, t.poison_found, t.csum_found, now_s() - t0);
		report_print(&t);
	}
	walk_free();
	return code;
}

int mendctl_scrub_main(int argc, char **argv, bool want_json)
{
	const char *mnt = NULL;
	bool resume = false, seen_cmd = false;
	double rate = 0;

	json = want_json;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			continue;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: mendctl scrub MOUNTPOINT [--json] [--rate MB/s] "
			       "[--resume]\n");
			return 0;
		}
		if (!strcmp(argv[i], "--resume")) {
			resume = true;
		} else if (!strcmp(argv[i], "--rate") || !strncmp(argv[i], "--rate=", 7)) {
			const char *v =
			        argv[i][6] == '=' ? argv[i] + 7 : (i + 1 < argc ? argv[++i] : NULL);
			char *end;

			if (!v)
				return usage("--rate needs a value (MB/s)");
			errno = 0;
			rate = strtod(v, &end);
			if (errno || end == v || *end || !(rate > 0) || rate > 1e6)
				return usage("--rate takes a number of MB/s above 0");
			rate *= MIB;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			char msg[300];

			snprintf(msg, sizeof(msg), "unrecognized option '%s'", argv[i]);
			return usage(msg);
		} else if (!seen_cmd) {
			seen_cmd = true; /* "scrub" */
		} else if (!mnt) {
			mnt = argv[i];
		} else {
			return usage("scrub takes MOUNTPOINT");
		}
	}
	if (!mnt)
		return usage("scrub takes MOUNTPOINT");
	return scrub(mnt, rate, resume);
}
