/* SPDX-License-Identifier: MIT */
/*
 * mendctl: command line of the mendfs recovery interface (docs/man/mendctl.8,
 * docs/RECOVERY.md).  badranges, recover, zeroinit, bmap, inject and stats, each
 * with --json in the shapes of the contract; show, label, uuid and grow on
 * an unmounted device (device.c); events, a stream of lines (events.c);
 * scrub (scrub.c).  Exit 0 on success, 1 on error, 2 on a usage error.
 * Messages go to stderr; with --json stdout gets one object (events: one a
 * line): the result, or on error {"error": MESSAGE, "exit_code": N} and never
 * a result (mfs_json.h), so a result is printed only once the whole command
 * has succeeded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device.h"
#include "events.h"
#include "mendfs/ioctl.h"
#include "mendfs/recovery.h"
#include "mfs_cli.h"
#include "mfs_json.h"
#include "scrub.h"

#define COPY_CHUNK (1u << 20)
/* zero-filled ranges in a chunk: at most every other sector */
#define Z_MAX (COPY_CHUNK / 512 / 2 + 1)

static bool json;
static volatile sig_atomic_t interrupted;

static void print_usage(FILE *f)
{
	fprintf(f, "usage: mendctl [--json] badranges FILE\n"
	           "       mendctl [--json] recover FILE OUT\n"
	           "       mendctl [--json] zeroinit FILE OFF LEN\n"
	           "       mendctl [--json] bmap FILE\n"
	           "       mendctl [--json] inject MOUNTPOINT SECTOR COUNT\n"
	           "       mendctl [--json] stats MOUNTPOINT\n"
	           "       mendctl [--json] scrub MOUNTPOINT [--rate MB/s] [--resume]\n"
	           "       mendctl [--json] show DEVICE\n"
	           "       mendctl [--json] label DEVICE [NEW-LABEL]\n"
	           "       mendctl [--json] uuid DEVICE [NEW-UUID|random]\n"
	           "       mendctl [--json] grow DEVICE|MOUNTPOINT\n"
	           "       mendctl [--json] events MOUNTPOINT [--from SEQ] [--no-follow]\n"
	           "       mendctl -V|--version|-h|--help\n");
}

/* An error: "mendctl: MESSAGE" on stderr, with --json the error object on stdout.  Returns @code.
 */
#define fail_msg(code, ...) mfs_json_fail(json, (code), "mendctl", __VA_ARGS__)

/* "WHAT PATH: strerror(errno)"; returns 1. */
static int fail(const char *what, const char *path)
{
	int err = errno;

	return fail_msg(1, "%s %s: %s", what, path, strerror(err));
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "mendctl: %s\n", msg);
	print_usage(stderr);
	if (json)
		mfs_json_error(stdout, msg, 2, NULL);
	return 2;
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return false;
	*v = strtoull(s, &end, 0);
	return !errno && !*end && *v <= INT64_MAX;
}

/* Print the --json result @obj (NULL: out of memory).  Returns 0 or 1. */
static int put_result(struct json_object *obj)
{
	int ret = mfs_json_print(stdout, obj);

	if (ret == -ENOMEM)
		return fail_msg(1, "out of memory");
	if (ret)
		return fail_msg(1, "writing the result to standard output failed");
	return 0;
}

/* { @key: @val } (NULL when out of memory; @val is dropped then). */
static struct json_object *obj_with(const char *key, struct json_object *val)
{
	struct json_object *o = json_object_new_object();

	if (!o || mfs_json_add(o, key, val)) {
		json_object_put(o);
		if (!o)
			json_object_put(val);
		return NULL;
	}
	return o;
}

/* A growing array of ranges. */
struct rvec {
	struct mendfs_range *v;
	size_t n, cap;
};

/* Append @r (merged into the last range when they touch and @merge).  Returns 0 or -ENOMEM. */
static int rvec_push(struct rvec *rv, struct mendfs_range r, bool merge)
{
	if (merge && rv->n && rv->v[rv->n - 1].offset + rv->v[rv->n - 1].length == r.offset) {
		rv->v[rv->n - 1].length += r.length;
		return 0;
	}
	if (rv->n == rv->cap) {
		size_t cap = rv->cap ? rv->cap * 2 : 64;
		struct mendfs_range *p = realloc(rv->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		rv->v = p;
		rv->cap = cap;
	}
	rv->v[rv->n++] = r;
	return 0;
}

/* [{"offset","length"}...] of @rv (NULL when out of memory). */
static struct json_object *ranges_json(const struct rvec *rv)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; a && i < rv->n; i++) {
		if (mfs_json_add_range(a, rv->v[i].offset, rv->v[i].length)) {
			json_object_put(a);
			return NULL;
		}
	}
	return a;
}

static int cmd_badranges(const char *path)
{
	struct mendfs_range r[256];
	struct rvec rv = {NULL, 0, 0};
	uint64_t start = 0;
	unsigned n;
	int fd = open(path, O_RDONLY), ret = 0;

	if (fd < 0)
		return fail("open", path);
	do {
		if (mendfs_badranges(fd, (off_t)start, r, 256, &n)) {
			ret = fail("badranges", path);
			goto out;
		}
		for (unsigned i = 0; i < n; i++) {
			if (rvec_push(&rv, r[i], false)) {
				ret = fail_msg(1, "out of memory");
				goto out;
			}
		}
		if (n)
			start = r[n - 1].offset + r[n - 1].length;
	} while (n == 256);
	if (json) {
		ret = put_result(obj_with("ranges", ranges_json(&rv)));
	} else {
		for (size_t i = 0; i < rv.n; i++)
			printf("%" PRIu64 " %" PRIu64 "\n", rv.v[i].offset, rv.v[i].length);
	}
out:
	close(fd);
	free(rv.v);
	return ret;
}

static void on_signal(int sig)
{
	interrupted = sig;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR && !interrupted)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/*
 * Where recover writes: a temporary file beside OUT, renamed over OUT once
 * the copy is complete and synced, so that a failure leaves no OUT, or the
 * old OUT untouched; or, for an existing OUT that is not a regular file (a
 * pipe, a character device), OUT itself.
 */
struct outfile {
	const char *name; /* OUT as given */
	char *target;     /* OUT with its symbolic links resolved */
	char *tmp;        /* the temporary file; NULL when writing OUT in place */
	int fd;
};

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Open where OUT is written, refusing OUT that is FILE (@ist).  Returns 0 or the exit code. */
static int out_open(struct outfile *o, const char *in, const struct stat *ist)
{
	struct stat st;
	bool exists = true;
	mode_t mode;
	char *copy;

	if (lstat(o->name, &st)) {
		if (errno != ENOENT)
			return fail("stat", o->name);
		exists = false;
	} else if (S_ISLNK(st.st_mode)) {
		/* write to the file the link names, as open(2) on OUT would */
		if (stat(o->name, &st)) {
			if (errno == ENOENT)
				return fail_msg(1,
				                "recover: %s is a dangling symbolic link: not "
				                "writing through it",
				                o->name);
			return fail("stat", o->name);
		}
		o->target = realpath(o->name, NULL);
		if (!o->target)
			return fail("resolve", o->name);
	}
	if (exists && same_file(&st, ist))
		return fail_msg(1, "recover: %s and %s are the same file: refusing to overwrite it",
		                in, o->name);
	if (exists && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return fail("open", o->name);
	}
	if (!o->target && !(o->target = strdup(o->name)))
		return fail_msg(1, "out of memory");
	/* replacing OUT needs what writing into it would: write permission on it */
	if (exists && faccessat(AT_FDCWD, o->target, W_OK, AT_EACCESS))
		return fail("open", o->name);
	if (exists && !S_ISREG(st.st_mode)) {
		o->fd = open(o->target, O_WRONLY | O_CLOEXEC);
		if (o->fd < 0)
			return fail("open", o->name);
		if (fstat(o->fd, &st))
			return fail("stat", o->name);
		if (same_file(&st, ist))
			return fail_msg(1, "recover: %s and %s are the same file", in, o->name);
		return 0;
	}
	copy = strdup(o->target);
	if (!copy || asprintf(&o->tmp, "%s/.mendctl-recover.XXXXXX", dirname(copy)) < 0) {
		free(copy);
		o->tmp = NULL;
		return fail_msg(1, "out of memory");
	}
	free(copy);
	o->fd = mkostemp(o->tmp, O_CLOEXEC);
	if (o->fd < 0) {
		int err = errno;

		free(o->tmp);
		o->tmp = NULL;
		errno = err;
		return fail("create a temporary file for", o->name);
	}
	if (exists) {
		/* an existing OUT keeps its owner (when allowed) and permissions */
		if (fchown(o->fd, st.st_uid, st.st_gid)) {
			/* not allowed: the copy belongs to the caller */
		}
		mode = st.st_mode & 07777;
	} else {
		mode = umask(0);
		umask(mode);
		mode = 0644 & ~mode;
	}
	if (fchmod(o->fd, mode))
		return fail("chmod", o->tmp);
	return 0;
}

/* The copy is complete: sync it, and rename the temporary file over OUT.  Returns 0 or 1. */
static int out_commit(struct outfile *o)
{
	char *copy;
	int dfd, fd = o->fd, ret = 0;

	o->fd = -1;
	if (fsync(fd) && (errno != EINVAL || o->tmp)) { /* a pipe cannot be synced */
		close(fd);
		return fail("fsync", o->name);
	}
	if (close(fd))
		return fail("close", o->name);
	if (!o->tmp)
		return 0;
	if (rename(o->tmp, o->target))
		return fail("rename the copy to", o->name);
	free(o->tmp);
	o->tmp = NULL;
	/* the rename itself on stable storage */
	copy = strdup(o->target);
	if (!copy)
		return fail_msg(1, "out of memory");
	dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || (fsync(dfd) && errno != EINVAL))
		ret = fail("fsync the directory of", o->name);
	if (dfd >= 0)
		close(dfd);
	free(copy);
	return ret;
}

/* Undo what out_open made: the temporary file goes, OUT is never touched. */
static void out_abort(struct outfile *o)
{
	if (o->fd >= 0)
		close(o->fd);
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->target);
	o->fd = -1;
	o->tmp = o->target = NULL;
}

static int cmd_recover(const char *path, const char *outpath)
{
	struct outfile o = {.name = outpath, .fd = -1};
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: stop a long copy */
	struct mendfs_range *z = NULL;
	struct rvec all = {NULL, 0, 0};
	struct stat ist;
	uint64_t off = 0;
	uint8_t *buf = NULL;
	int in, ret;

	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return fail("open", path);
	if (fstat(in, &ist)) {
		ret = fail("stat", path);
		goto done;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	ret = out_open(&o, path, &ist);
	if (ret)
		goto done;
	ret = 1;
	buf = malloc(COPY_CHUNK);
	z = malloc(Z_MAX * sizeof(*z));
	if (!buf || !z) {
		fail_msg(1, "out of memory");
		goto done;
	}
	for (;;) {
		unsigned n;
		ssize_t got;

		if (interrupted) {
			fail_msg(1, "recover: interrupted by signal %d; %s not written",
			         interrupted, outpath);
			goto done;
		}
		got = mendfs_recover(in, buf, COPY_CHUNK, (off_t)off, z, Z_MAX, &n);
		if (got < 0) {
			fail("recovery read", path);
			goto done;
		}
		for (unsigned i = 0; i < n && i < Z_MAX; i++) {
			if (rvec_push(&all, z[i], true)) {
				fail_msg(1, "out of memory");
				goto done;
			}
		}
		if (write_all(o.fd, buf, (size_t)got)) {
			fail("write", outpath);
			goto done;
		}
		off += (uint64_t)got;
		if ((size_t)got < COPY_CHUNK)
			break;
	}
	if (out_commit(&o))
		goto done;
	if (json) {
		struct json_object *r = json_object_new_object();

		if (r && (mfs_json_add_u64(r, "bytes", off) ||
		          mfs_json_add(r, "zeroed", ranges_json(&all)))) {
			json_object_put(r);
			r = NULL;
		}
		ret = put_result(r);
	} else {
		printf("recovered %" PRIu64 " bytes, %zu zero-filled range%s\n", off, all.n,
		       all.n == 1 ? "" : "s");
		for (size_t i = 0; i < all.n; i++)
			printf("zeroed %" PRIu64 " %" PRIu64 "\n", all.v[i].offset,
			       all.v[i].length);
		ret = 0;
	}
done:
	out_abort(&o);
	close(in);
	free(buf);
	free(z);
	free(all.v);
	return ret;
}

static int cmd_zeroinit(const char *path, const char *offs, const char *lens)
{
	struct json_object *r;
	uint64_t off, len;
	int fd;

	if (!parse_u64(offs, &off) || !parse_u64(lens, &len))
		return fail_msg(2, "zeroinit: OFF and LEN are byte counts");
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return fail("open", path);
	if (mendfs_zeroinit(fd, (off_t)off, (off_t)len)) {
		int err = errno;

		close(fd);
		errno = err;
		return fail("zeroinit", path);
	}
	close(fd);
	if (!json)
		return 0;
	r = json_object_new_object();
	if (r && (mfs_json_add_u64(r, "offset", off) || mfs_json_add_u64(r, "length", len))) {
		json_object_put(r);
		r = NULL;
	}
	return put_result(r);
}

static int cmd_bmap(const char *path)
{
	struct mendfs_ioc_bmap *a = malloc(sizeof(*a));
	struct mendfs_ioc_extent *ext = NULL;
	size_t n = 0, cap = 0;
	uint64_t start = 0;
	int fd, ret = 1;

	if (!a)
		return fail_msg(1, "out of memory");
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		free(a);
		return fail("open", path);
	}
	for (;;) {
		memset(a, 0, sizeof(*a));
		a->version = MENDFS_IOC_VERSION;
		a->start = start;
		if (ioctl(fd, MENDFS_IOC_BMAP, a) < 0) {
			if (errno == ENOTTY)
				errno = EOPNOTSUPP;
			fail("bmap", path);
			goto out;
		}
		for (unsigned i = 0; i < a->nr && i < MENDFS_BMAP_MAX; i++) {
			if (n == cap) {
				size_t c = cap ? cap * 2 : 64;
				struct mendfs_ioc_extent *p = realloc(ext, c * sizeof(*p));

				if (!p) {
					fail_msg(1, "out of memory");
					goto out;
				}
				ext = p;
				cap = c;
			}
			ext[n++] = a->extents[i];
		}
		if (a->last || a->next <= start)
			break;
		start = a->next;
	}
	if (json) {
		struct json_object *arr = json_object_new_array();

		for (size_t i = 0; arr && i < n; i++) {
			struct json_object *x = json_object_new_object();

			if (!x || mfs_json_add_u64(x, "offset", ext[i].offset) ||
			    mfs_json_add_u64(x, "length", ext[i].length) ||
			    mfs_json_add_u64(x, "sector", ext[i].sector) ||
			    mfs_json_add_bool(x, "unwritten",
			                      ext[i].flags & MENDFS_EXTENT_UNWRITTEN) ||
			    json_object_array_add(arr, x)) {
				json_object_put(x);
				json_object_put(arr);
				arr = NULL;
			}
		}
		ret = put_result(obj_with("extents", arr));
	} else {
		for (size_t i = 0; i < n; i++)
			printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "%s\n", ext[i].offset,
			       ext[i].length, ext[i].sector,
			       ext[i].flags & MENDFS_EXTENT_UNWRITTEN ? " unwritten" : "");
		ret = 0;
	}
out:
	close(fd);
	free(ext);
	free(a);
	return ret;
}

static int cmd_inject(const char *path, const char *secs, const char *counts)
{
	struct mendfs_ioc_inject a;
	struct json_object *r;
	uint64_t sector, count;
	int fd;

	if (!parse_u64(secs, &sector) || !parse_u64(counts, &count) || !count)
		return fail_msg(2, "inject: SECTOR and COUNT are sector numbers, COUNT > 0");
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail("open", path);
	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	a.sector = sector;
	a.count = count;
	if (ioctl(fd, MENDFS_IOC_INJECT, &a) < 0) {
		int err = errno;

		close(fd);
		if (err == EPERM)
			return fail_msg(1,
			                "inject %s: %s (inject needs root and a mount with -o "
			                "poison_inject)",
			                path, strerror(err));
		errno = err == ENOTTY ? EOPNOTSUPP : err;
		return fail("inject", path);
	}
	close(fd);
	if (!json)
		return 0;
	r = json_object_new_object();
	if (r && (mfs_json_add_u64(r, "sector", sector) || mfs_json_add_u64(r, "count", count))) {
		json_object_put(r);
		r = NULL;
	}
	return put_result(r);
}

/*
 * The per-queue part of stats: text lines "qN.name value", or the JSON array
 * "queues" added to @r.  A daemon without MENDFS_IOC_QUEUE_STATS (ENOTTY)
 * shows no queues.  Returns 0, or -1 after a message (@r is then freed).
 */
static int stats_queues(int fd, const char *path, struct json_object *r)
{
	struct mendfs_ioc_queue_stats *a = calloc(1, sizeof(*a));
	struct json_object *arr = NULL;
	int ret = -1;

	if (!a) {
		fail("stats", path);
		goto out;
	}
	a->version = MENDFS_IOC_VERSION;
	if (ioctl(fd, MENDFS_IOC_QUEUE_STATS, a) < 0) {
		if (errno == ENOTTY) {
			ret = 0;
			goto out;
		}
		fail("stats", path);
		goto out;
	}
	if (json) {
		arr = json_object_new_array();
		if (!arr || json_object_object_add(r, "queues", arr)) {
			json_object_put(arr);
			errno = ENOMEM;
			fail("stats", path);
			goto out;
		}
	}
	for (uint32_t i = 0; i < a->count && i < MENDFS_QS_MAX_QUEUES; i++) {
		const struct mendfs_ioc_queue_stat *q = &a->q[i];
		const struct {
			const char *name;
			uint64_t v;
		} c[] = {
		        /* named as in mendctl(8) */
		        {"ios", q->ios},
		        {"bytes", q->bytes},
		        {"requests", q->requests},
		        {"merges", q->merges},
		        {"plug_flushes", q->plug_flushes},
		        {"dispatch_batches", q->dispatch_batches},
		        {"tag_waits", q->tag_waits},
		        {"errors", q->errors},
		        {"tags_in_use", q->tags_in_use},
		        {"depth", q->depth},
		        {"contexts", q->nr_ctxs},
		};
		struct json_object *x = NULL;

		if (json) {
			x = json_object_new_object();
			if (!x || mfs_json_add_u64(x, "queue", i) ||
			    json_object_array_add(arr, x)) {
				json_object_put(x);
				errno = ENOMEM;
				fail("stats", path);
				goto out;
			}
		}
		for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
			if (!json) {
				char name[40];

				snprintf(name, sizeof(name), "q%u.%s", i, c[k].name);
				printf("%-18s %" PRIu64 "\n", name, c[k].v);
			} else if (mfs_json_add_u64(x, c[k].name, c[k].v)) {
				errno = ENOMEM;
				fail("stats", path);
				goto out;
			}
		}
	}
	ret = 0;
out:
	free(a);
	if (ret && r)
		json_object_put(r);
	return ret;
}

/* The FUSE transport the daemon reports (MENDFS_TRANSPORT_*). */
static const char *transport_name(uint64_t t)
{
	switch (t) {
	case MENDFS_TRANSPORT_DEV_FUSE:
		return "dev_fuse";
	case MENDFS_TRANSPORT_IO_URING:
		return "io_uring";
	default:
		return "unknown";
	}
}

static int cmd_stats(const char *path)
{
	struct mendfs_ioc_stats a;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail("open", path);
	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	if (ioctl(fd, MENDFS_IOC_STATS, &a) < 0) {
		if (errno == ENOTTY)
			errno = EOPNOTSUPP;
		fail("stats", path);
		close(fd);
		return 1;
	}
	{
		const struct {
			const char *name;
			uint64_t v;
		} c[] = {
		        {"reads", a.reads},
		        {"writes", a.writes},
		        {"write_zeroes", a.write_zeroes},
		        {"read_bytes", a.read_bytes},
		        {"write_bytes", a.write_bytes},
		        {"requests", a.requests},
		        {"errors", a.errors},
		        {"poison_hits", a.poison_hits},
		        {"media_errors", a.media_errors},
		        {"recovered_sectors", a.recovered_sectors},
		        {"poison_cleared", a.poison_cleared},
		        {"faults", a.faults},
		        {"poison_ranges", a.poison_ranges},
		        {"meta_reads", a.meta_reads},
		        {"meta_writes", a.meta_writes},
		        {"meta_repairs", a.meta_repairs},
		        {"meta_lost", a.meta_lost},
		        {"commits", a.commits},
		        {"journal_blocks", a.journal_blocks},
		        {"checkpoints", a.checkpoints},
		        {"ring_requests", a.ring_requests},
		};
		size_t n = sizeof(c) / sizeof(c[0]);
		const char *transport = transport_name(a.transport);
		struct json_object *r;

		int ret;

		if (!json) {
			printf("%-18s %s\n", "transport", transport);
			for (size_t i = 0; i < n; i++)
				printf("%-18s %" PRIu64 "\n", c[i].name, c[i].v);
			ret = stats_queues(fd, path, NULL) ? 1 : 0;
			close(fd);
			return ret;
		}
		r = json_object_new_object();
		if (r &&
		    json_object_object_add(r, "transport", json_object_new_string(transport))) {
			json_object_put(r);
			r = NULL;
		}
		for (size_t i = 0; r && i < n; i++) {
			if (mfs_json_add_u64(r, c[i].name, c[i].v)) {
				json_object_put(r);
				r = NULL;
			}
		}
		if (r && stats_queues(fd, path, r)) {
			close(fd);
			return 1;
		}
		close(fd);
		return put_result(r);
	}
}

/* show DEVICE: the superblock, as dumpe2fs -h shows ext4's. */
static int cmd_show(const char *device)
{
	struct mendctl_dev d;
	char err[512];
	int ret = 0;

	if (mendctl_dev_open(device, false, &d, err, sizeof(err)))
		return fail_msg(1, "%s", err);
	if (json)
		ret = put_result(mendctl_sb_json(device, &d));
	else
		mendctl_sb_print(stdout, device, &d);
	mendctl_dev_close(&d);
	return ret;
}

/*
 * label DEVICE [NEW] and uuid DEVICE [NEW]: print the label or UUID, or set
 * it on an unmounted device (@uuid selects which).
 */
static int cmd_label_uuid(bool uuid, const char *device, const char *set)
{
	struct mendctl_dev d;
	uint8_t u[16];
	char err[512], text[64];

	if (set && !uuid && strlen(set) > 63)
		return usage_error("label '%s' is longer than 63 bytes", set);
	if (set && uuid && mendctl_uuid_parse(set, u))
		return usage_error("'%s' is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) "
		                   "nor 'random'",
		                   set);
	if (mendctl_dev_open(device, set != NULL, &d, err, sizeof(err)))
		return fail_msg(1, "%s", err);
	if (set && uuid) {
		memcpy(d.sb->uuid, u, sizeof(u));
	} else if (set) {
		memset(d.sb->label, 0, sizeof(d.sb->label));
		memcpy(d.sb->label, set, strlen(set));
	}
	if (set && mendctl_dev_write(&d, err, sizeof(err))) {
		mendctl_dev_close(&d);
		return fail_msg(1, "%s: %s", device, err);
	}
	if (uuid)
		mendctl_uuid_format(d.sb->uuid, text);
	else
		snprintf(text, sizeof(text), "%.63s", d.sb->label);
	mendctl_dev_close(&d);
	if (json)
		return put_result(obj_with(uuid ? "uuid" : "label", mfs_json_text(text)));
	if (!set)
		printf("%s\n", text);
	return 0;
}

/*
 * grow DEVICE: grow the filesystem of an unmounted device to the device's
 * size; grow MOUNTPOINT (a directory): ask the daemon to grow it online.
 */
static int cmd_grow(const char *arg)
{
	struct mfs_grow_info g;
	struct stat st;
	char err[1024];
	bool online = stat(arg, &st) == 0 && S_ISDIR(st.st_mode);

	if (online ? mendctl_grow_online(arg, &g, err, sizeof(err))
	           : mendctl_grow(arg, &g, err, sizeof(err)))
		return fail_msg(1, "%s", err);
	if (json)
		return put_result(mendctl_grow_json(online ? "mountpoint" : "device", arg, &g));
	mendctl_grow_print(stdout, arg, &g);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nargs;
		const char *args;
		bool opt; /* one more argument allowed */
	} cmds[] = {
	        {"badranges", 1, "FILE", false},
	        {"recover", 2, "FILE OUT", false},
	        {"zeroinit", 3, "FILE OFF LEN", false},
	        {"bmap", 1, "FILE", false},
	        {"inject", 3, "MOUNTPOINT SECTOR COUNT", false},
	        {"stats", 1, "MOUNTPOINT", false},
	        {"show", 1, "DEVICE", false},
	        {"label", 1, "DEVICE [NEW-LABEL]", true},
	        {"uuid", 1, "DEVICE [NEW-UUID|random]", true},
	        {"grow", 1, "DEVICE|MOUNTPOINT", false},
	        {"events", 1, "MOUNTPOINT [--from SEQ] [--no-follow]", false},
	};
	const char *from = NULL; /* events only: --from SEQ */
	bool no_follow = false;  /* events only */
	uint64_t from_seq = 0;
	const char *arg[4];
	int n = 0, ret;
	size_t c;

	/* --json may appear anywhere: known before any error is reported */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--json"))
			json = true;
	/* scrub has options of its own (scrub.c) */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "scrub"))
			return mendctl_scrub_main(argc, argv, json);
		if (argv[i][0] != '-' || !argv[i][1])
			break;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			continue;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			print_usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version"))
			return mfs_cli_version("mendctl");
		if (!strcmp(argv[i], "--no-follow")) {
			no_follow = true;
			continue;
		}
		if (!strcmp(argv[i], "--from")) {
			if (++i == argc)
				return usage_error("--from needs a sequence number");
			from = argv[i];
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1])
			return usage_error("unrecognized option '%s'", argv[i]);
		if (n == 4)
			return usage_error("too many arguments");
		arg[n++] = argv[i];
	}
	if (n < 1)
		return usage_error("no command given");
	for (c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++)
		if (!strcmp(arg[0], cmds[c].name))
			break;
	if (c == sizeof(cmds) / sizeof(cmds[0]))
		return usage_error("unknown command '%s'", arg[0]);
	if (n - 1 != cmds[c].nargs && !(cmds[c].opt && n - 1 == cmds[c].nargs + 1))
		return usage_error("%s takes %s", cmds[c].name, cmds[c].args);
	if ((from || no_follow) && strcmp(cmds[c].name, "events"))
		return usage_error("--from and --no-follow are options of events");
	if (from && !parse_u64(from, &from_seq))
		return usage_error("--from takes a sequence number, not '%s'", from);
	/* by name: commands added beside it do not move it */
	if (!strcmp(cmds[c].name, "events")) {
		ret = mendctl_events(arg[1], from_seq, !no_follow, json);
		goto out;
	}
	switch (c) {
	case 0:
		ret = cmd_badranges(arg[1]);
		break;
	case 1:
		ret = cmd_recover(arg[1], arg[2]);
		break;
	case 2:
		ret = cmd_zeroinit(arg[1], arg[2], arg[3]);
		break;
	case 3:
		ret = cmd_bmap(arg[1]);
		break;
	case 4:
		ret = cmd_inject(arg[1], arg[2], arg[3]);
		break;
	case 5:
		ret = cmd_stats(arg[1]);
		break;
	case 6:
		ret = cmd_show(arg[1]);
		break;
	case 7:
	case 8:
		ret = cmd_label_uuid(c == 8, arg[1], n > 2 ? arg[2] : NULL);
		break;
	default:
		ret = cmd_grow(arg[1]);
		break;
	}
out:
	if (fflush(stdout) && !ret) {
		fprintf(stderr, "mendctl: writing to standard output: %s\n", strerror(errno));
		ret = 1;
	}
	return ret;
}
