/* SPDX-License-Identifier: MIT */
/*
 * test_uring: the io_uring backend on real targets (root required).
 *
 * Targets: an image in /tmp (O_DIRECT), one in /dev/shm (tmpfs), one on a
 * ramfs mount (O_DIRECT refused: buffered fallback), a loop device over a
 * /tmp image, a zram device of its own (4 KiB logical blocks), and a loop device with
 * 4 KiB logical blocks (losetup -b 4096).  main() sets them up
 * before the tests run (each in its own forked child) and tears them down
 * afterwards whatever the results.  Every data path is checked byte for
 * byte against a shadow copy.  Media errors, transient errors and short
 * transfers come from a disk this program serves itself over /dev/fuse (no
 * dm, null_blk or fault injection needed).  Exit 0 pass, 1 fail.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blk_internal.h"
#include "cannot_run.h"
#include "mendfs/blk.h"

#define MiB           (1024u * 1024)
#define FILE_SIZE     (40 * MiB)
#define LOOP_SIZE     (64 * MiB)
#define REGION        (8 * MiB) /* round-trip region at the start of the device */
#define ZERO_AT       (8 * MiB) /* WRITE_ZEROES test range */
#define ZERO_LEN      (12 * MiB)
#define THREAD_AT     (24 * MiB) /* thread tests: 2 MiB per thread from here */
#define THREAD_REGION (2 * MiB)

enum target_kind { T_TMP, T_SHM, T_RAMFS, T_LOOP, T_ZRAM, T_LOOP4K, T_MAX };

static const char *target_names[T_MAX] = {"tmp-file", "shm-file", "ramfs-file",
                                          "loop",     "zram",     "loop-4k"};
static char target_paths[T_MAX][256];
static char workdir[128];
static char ramfs_dir[192];
static bool ramfs_mounted;
static int zram_id = -1; /* the zram device we added, or -1 */

/* --- helpers ------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static uint64_t rnd_r(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void fill_random(void *buf, size_t len, uint64_t *s)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			rnd_r(s);
		p[i] = (unsigned char)(*s >> ((i & 7) * 8));
	}
}

static void *xalloc(size_t len)
{
	void *p = NULL;

	ck_assert_int_eq(posix_memalign(&p, 4096, len), 0);
	memset(p, 0, len);
	return p;
}

/* Completion counter shared by the bios of one waiter. */
struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned done;
	unsigned errors;
	uint8_t first_err;
};

static void waiter_init(struct waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
}

static void waiter_end_io(struct blk_bio *bio)
{
	struct waiter *w = bio->private;

	pthread_mutex_lock(&w->lock);
	if (bio->status) {
		if (!w->errors)
			w->first_err = bio->status;
		w->errors++;
	}
	w->done++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static unsigned waiter_done(struct waiter *w)
{
	unsigned d;

	pthread_mutex_lock(&w->lock);
	d = w->done;
	pthread_mutex_unlock(&w->lock);
	return d;
}

/*
 * Wait for @n completions.  Polled devices make progress only when someone
 * polls, so poll; the sum of what blk_poll() reported is added to *polled.
 * Returns a negative value if blk_poll() failed.
 */
static int waiter_wait(struct blk_dev *dev, struct waiter *w, unsigned n, bool polled,
                       uint64_t *polled_sum)
{
	if (polled) {
		while (waiter_done(w) < n) {
			int r = blk_poll(dev, 1);

			if (r < 0)
				return r;
			if (polled_sum)
				*polled_sum += (uint64_t)r;
		}
		return 0;
	}
	pthread_mutex_lock(&w->lock);
	while (w->done < n)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static int open_dev(const char *path, unsigned flags, unsigned nr_hw, unsigned depth,
                    struct blk_dev **devp, char *err, size_t errlen)
{
	struct blk_dev_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.backend = BLK_BACKEND_URING;
	cfg.path = path;
	cfg.flags = flags | BLK_CFG_NO_POISON;
	cfg.nr_hw_queues = nr_hw;
	cfg.queue_depth = depth;
	return blk_dev_open(&cfg, devp, err, errlen);
}

static struct blk_dev *xopen(int t, unsigned flags, unsigned nr_hw, unsigned depth)
{
	struct blk_dev *dev = NULL;
	char err[512] = "";
	int ret;

	ck_assert_msg(target_paths[t][0], "target %s was not set up (see the log above)",
	              target_names[t]);
	ret = open_dev(target_paths[t], flags, nr_hw, depth, &dev, err, sizeof(err));
	ck_assert_msg(ret == 0, "open %s (%s): %d: %s", target_names[t], target_paths[t], ret, err);
	return dev;
}

static unsigned dev_lbs(struct blk_dev *dev)
{
	struct blk_dev_info info;

	blk_dev_get_info(dev, &info);
	return info.logical_block_size;
}

/* Synchronous read/write of a large range in max-size pieces. */
static void rw_range(struct blk_dev *dev, int op, uint64_t pos, void *buf, size_t len)
{
	size_t off;

	for (off = 0; off < len; off += 128 * 1024) {
		uint32_t n = (uint32_t)(len - off < 128 * 1024 ? len - off : 128 * 1024);
		int ret = op == BLK_OP_READ
		                  ? blk_read(dev, (pos + off) >> 9, (char *)buf + off, n, 0)
		                  : blk_write(dev, (pos + off) >> 9, (char *)buf + off, n, 0);

		ck_assert_msg(ret == 0, "%s at %llu: %d", op == BLK_OP_READ ? "read" : "write",
		              (unsigned long long)(pos + off), ret);
	}
}

static void check_equal(const void *got, const void *want, size_t len, const char *what)
{
	const unsigned char *g = got, *w = want;
	size_t i;

	if (!memcmp(got, want, len))
		return;
	for (i = 0; i < len && g[i] == w[i]; i++)
		;
	ck_abort_msg("%s: data differs at byte %zu of %zu (got %02x want %02x)", what, i, len, g[i],
	             w[i]);
}

/* A bio with its own segment array. */
struct tbio {
	struct blk_bio bio;
	struct iovec iov[8];
};

/*
 * Set @tb up over [pos, pos + len) with memory @mem split into up to 3
 * segments.  With @aligned the split points are multiples of @lbs (the
 * direct path); otherwise they are odd (the bounce path).
 */
static void tbio_setup(struct tbio *tb, int op, uint64_t pos, char *mem, uint32_t len, unsigned lbs,
                       bool aligned, struct waiter *w)
{
	unsigned nsegs = 1 + (unsigned)(rnd() % 3), i;
	uint32_t left = len, cut;

	memset(tb, 0, sizeof(*tb));
	tb->bio.op = (uint8_t)op;
	tb->bio.sector = pos >> 9;
	tb->bio.len = len;
	tb->bio.end_io = waiter_end_io;
	tb->bio.private = w;
	tb->bio.iov = tb->iov;
	for (i = 0; i < nsegs && left; i++) {
		if (i == nsegs - 1) {
			cut = left;
		} else if (aligned) {
			cut = (uint32_t)(1 + rnd() % (left / lbs)) * lbs;
		} else {
			cut = (uint32_t)(1 + rnd() % left);
		}
		if (cut > left)
			cut = left;
		tb->iov[i].iov_base = mem;
		tb->iov[i].iov_len = cut;
		mem += cut;
		left -= cut;
	}
	tb->bio.nr_segs = (uint16_t)i;
}

/* Is the device's fd in this process open with O_DIRECT?  -1: no fd found. */
static int fd_is_direct(const char *path)
{
	char real[PATH_MAX], link[PATH_MAX], p[320];
	struct dirent *de;
	int found = -1;
	DIR *d;

	if (!realpath(path, real))
		return -1;
	d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		ssize_t n;
		FILE *f;
		char line[256];

		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		n = readlink(p, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, real))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fdinfo/%s", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long flags;

			if (sscanf(line, "flags: %lo", &flags) == 1) {
				/* the device fd is the one opened for writing */
				if ((flags & O_ACCMODE) == O_RDWR)
					found = (flags & O_DIRECT) ? 1 : 0;
			}
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

/* Sum of "UserBufs:" over this process's io_uring fds; -1 when none reports it. */
static int uring_user_bufs(void)
{
	char link[64], p[320], line[256];
	struct dirent *de;
	int total = -1;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		ssize_t n;
		FILE *f;

		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		n = readlink(p, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (!strstr(link, "io_uring"))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fdinfo/%s", de->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned v;

			if (sscanf(line, "UserBufs: %u", &v) == 1)
				total = (total < 0 ? 0 : total) + (int)v;
		}
		fclose(f);
	}
	closedir(d);
	return total;
}

/* --- round trips -------------------------------------------------------- */

/*
 * Fill the region, then rounds of random writes (several contiguous bios
 * per slot under a plug: merged multi-segment requests), then read it all
 * back with other segmentations, then again after a reopen.
 */
static void roundtrip(int t, unsigned flags, bool aligned)
{
	bool polled = flags & BLK_CFG_POLLED;
	struct blk_dev *dev = xopen(t, flags, 1, 64);
	unsigned lbs = dev_lbs(dev), nslots = REGION / (64 * 1024), round, i;
	char *shadow = xalloc(REGION), *src = xalloc(REGION + 64), *dst = xalloc(REGION + 64);
	struct tbio *tbs = calloc(REGION / 4096, sizeof(*tbs));
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)t, polled_sum = 0;
	unsigned *slots = calloc(nslots, sizeof(*slots));
	struct blk_stats st;
	struct blk_plug plug;
	struct waiter w;
	unsigned nb, ndone;

	/* misaligned memory for the bounce path: a few bytes off */
	char *s = aligned ? src : src + 1, *dd = aligned ? dst : dst + 3;

	ck_assert_ptr_nonnull(tbs);
	ck_assert_ptr_nonnull(slots);
	rng_state = seed;

	/* initial fill: 64 KiB bios, contiguous, under one plug */
	fill_random(shadow, REGION, &seed);
	memcpy(s, shadow, REGION);
	waiter_init(&w);
	nb = 0;
	blk_start_plug(&plug);
	for (i = 0; i < REGION / (64 * 1024); i++, nb++) {
		tbio_setup(&tbs[nb], BLK_OP_WRITE, (uint64_t)i * 64 * 1024, s + i * 64 * 1024,
		           64 * 1024, lbs, aligned, &w);
		blk_submit_bio(dev, &tbs[nb].bio);
	}
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, nb, polled, &polled_sum), 0);
	ck_assert_msg(w.errors == 0, "initial fill: %u errors, first status %u", w.errors,
	              w.first_err);
	ndone = nb;

	for (round = 0; round < 4; round++) {
		unsigned used = 0;

		/* distinct slots: no two writes of a round overlap */
		for (i = 0; i < nslots; i++)
			slots[i] = i;
		for (i = nslots - 1; i > 0; i--) {
			unsigned j = (unsigned)(rnd() % (i + 1)), x = slots[i];

			slots[i] = slots[j];
			slots[j] = x;
		}
		nb = 0;
		blk_start_plug(&plug);
		for (i = 0; i < 48; i++) {
			uint64_t base = (uint64_t)slots[i] * 64 * 1024;
			uint32_t len = (uint32_t)(1 + rnd() % (64 * 1024 / lbs)) * lbs;
			uint64_t pos = base + (rnd() % ((64 * 1024 - len) / lbs + 1)) * lbs;
			unsigned parts = 1 + (unsigned)(rnd() % 4), k;
			uint32_t left = len;
			char *m = s + used;

			fill_random(m, len, &seed);
			memcpy(shadow + pos, m, len);
			for (k = 0; k < parts && left; k++) {
				uint32_t l = k == parts - 1
				                     ? left
				                     : (uint32_t)(1 + rnd() % (left / lbs)) * lbs;

				if (l > left)
					l = left;
				tbio_setup(&tbs[nb], BLK_OP_WRITE, pos, m, l, lbs, aligned, &w);
				blk_submit_bio(dev, &tbs[nb].bio);
				nb++;
				pos += l;
				m += l;
				left -= l;
			}
			used += len;
		}
		blk_finish_plug(&plug);
		ck_assert_int_eq(waiter_wait(dev, &w, ndone + nb, polled, &polled_sum), 0);
		ndone += nb;
		ck_assert_msg(w.errors == 0, "round %u: %u errors, first status %u", round,
		              w.errors, w.first_err);
	}
	ck_assert_int_eq(blk_flush(dev), 0);

	/* read back: 96 KiB bios under a plug (they merge up to 128 KiB) */
	memset(dd, 0xa5, REGION);
	nb = 0;
	blk_start_plug(&plug);
	for (i = 0; i < REGION; i += 96 * 1024, nb++) {
		uint32_t len = REGION - i < 96 * 1024 ? REGION - i : 96 * 1024;

		tbio_setup(&tbs[nb], BLK_OP_READ, i, dd + i, len, lbs, aligned, &w);
		blk_submit_bio(dev, &tbs[nb].bio);
	}
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, ndone + nb, polled, &polled_sum), 0);
	ndone += nb;
	ck_assert_msg(w.errors == 0, "read back: %u errors, first status %u", w.errors,
	              w.first_err);
	check_equal(dd, shadow, REGION, "read back");

	blk_dev_get_stats(dev, &st);
	ck_assert_msg(st.merges_back + st.merges_front > 0,
	              "no bio merged: multi-bio path untested");
	ck_assert_uint_lt(st.requests, st.ios[BLK_OP_READ] + st.ios[BLK_OP_WRITE]);
	ck_assert_uint_eq(st.errors, 0);
	if (polled) {
		/* our blk_poll() calls reaped requests (the core polls too while
		 * it waits for tags or for blk_flush) */
		ck_assert_uint_gt(polled_sum, 0);
		ck_assert_uint_le(polled_sum, st.requests);
	}
	blk_dev_close(dev);

	/* and once more from a fresh open */
	dev = xopen(t, flags, 1, 64);
	memset(dst, 0, REGION);
	rw_range(dev, BLK_OP_READ, 0, dst, REGION);
	check_equal(dst, shadow, REGION, "read after reopen");
	blk_dev_close(dev);
	free(shadow);
	free(src);
	free(dst);
	free(tbs);
	free(slots);
}

START_TEST(test_roundtrip_thread)
{
	roundtrip(_i, 0, true);
}
END_TEST

START_TEST(test_roundtrip_polled)
{
	roundtrip(_i, BLK_CFG_POLLED, true);
}
END_TEST

START_TEST(test_roundtrip_unaligned)
{
	/* user memory one byte off and odd segment sizes: the bounce buffer */
	roundtrip(_i, _i & 1 ? BLK_CFG_POLLED : 0, false);
}
END_TEST

/* --- flush and write zeroes --------------------------------------------- */

static void zeroes(int t, unsigned flags)
{
	bool polled = flags & BLK_CFG_POLLED;
	struct blk_dev *dev = xopen(t, flags, 1, 32);
	const size_t span = ZERO_LEN + 2 * MiB; /* 1 MiB of context each side */
	const uint64_t at = ZERO_AT - MiB;
	char *pat = xalloc(span), *got = xalloc(span);
	uint64_t seed = 77 + (uint64_t)t;
	struct blk_bio zb, fb, fz;
	struct waiter w;

	fill_random(pat, span, &seed);
	rw_range(dev, BLK_OP_WRITE, at, pat, span);
	ck_assert_int_eq(blk_flush(dev), 0);

	/* 12 MiB of zeroes in one bio (more than one SQE moves without FALLOCATE),
	 * a FUA zeroing of 64 KiB near the end, then a FLUSH */
	waiter_init(&w);
	blk_bio_init(&zb, BLK_OP_WRITE_ZEROES, ZERO_AT >> 9, NULL, ZERO_LEN - 2 * MiB,
	             waiter_end_io, &w);
	blk_bio_init(&fz, BLK_OP_WRITE_ZEROES, (ZERO_AT + ZERO_LEN - MiB) >> 9, NULL, 64 * 1024,
	             waiter_end_io, &w);
	fz.flags = BLK_BIO_FUA;
	blk_submit_bio(dev, &zb);
	blk_submit_bio(dev, &fz);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_msg(w.errors == 0, "write zeroes: status %u", w.first_err);
	blk_bio_init(&fb, BLK_OP_FLUSH, 0, NULL, 0, waiter_end_io, &w);
	blk_submit_bio(dev, &fb);
	ck_assert_int_eq(waiter_wait(dev, &w, 3, polled, NULL), 0);
	ck_assert_msg(w.errors == 0, "flush: status %u", w.first_err);
	ck_assert_uint_eq(zb.done, zb.len);
	ck_assert_uint_eq(fz.done, fz.len);

	/* a FUA write lands too */
	memset(pat + (ZERO_AT + ZERO_LEN - 2 * MiB - at), 0x5a, 4096);
	ck_assert_int_eq(blk_write(dev, (ZERO_AT + ZERO_LEN - 2 * MiB) >> 9,
	                           pat + (ZERO_AT + ZERO_LEN - 2 * MiB - at), 4096, BLK_BIO_FUA),
	                 0);

	memset(pat + (ZERO_AT - at), 0, ZERO_LEN - 2 * MiB);
	memset(pat + (ZERO_AT + ZERO_LEN - MiB - at), 0, 64 * 1024);
	blk_dev_close(dev);

	dev = xopen(t, flags, 1, 32);
	rw_range(dev, BLK_OP_READ, at, got, span);
	check_equal(got, pat, span, "after write zeroes");
	blk_dev_close(dev);
	free(pat);
	free(got);
}

START_TEST(test_zeroes_thread)
{
	zeroes(_i, 0);
}
END_TEST

START_TEST(test_zeroes_polled)
{
	zeroes(_i, BLK_CFG_POLLED);
}
END_TEST

/* --- several threads ---------------------------------------------------- */

struct worker {
	struct blk_dev *dev;
	pthread_t th;
	unsigned id;
	unsigned lbs;
	bool polled;
	unsigned rounds, per_round; /* bios in flight per round */
	uint64_t region;            /* device offset of its 2 MiB */
	int failed;                 /* 0 ok; else a line number */
	char msg[160];
	pthread_barrier_t *start;
};

#define WFAIL(wk, ...)                                                                             \
	do {                                                                                       \
		snprintf((wk)->msg, sizeof((wk)->msg), __VA_ARGS__);                               \
		(wk)->failed = __LINE__;                                                           \
		goto out;                                                                          \
	} while (0)

/* Rounds of per_round bios to distinct 32 KiB slots of its region, then a read-back. */
static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	const unsigned nslots = THREAD_REGION / (32 * 1024);
	char *shadow = NULL, *mem = NULL, *rd = NULL;
	struct tbio *tbs = NULL;
	uint64_t s = 0x1234567ull * (wk->id + 1);
	unsigned r, i, total = 0;
	struct waiter w;

	waiter_init(&w);
	if (posix_memalign((void **)&shadow, 4096, THREAD_REGION) ||
	    posix_memalign((void **)&mem, 4096, (size_t)wk->per_round * 32 * 1024) ||
	    posix_memalign((void **)&rd, 4096, THREAD_REGION) ||
	    !(tbs = calloc(wk->per_round > 64 ? wk->per_round : 64, sizeof(*tbs))))
		WFAIL(wk, "out of memory");
	pthread_barrier_wait(wk->start);

	/* known content first */
	fill_random(shadow, THREAD_REGION, &s);
	for (i = 0; i < THREAD_REGION; i += 128 * 1024) {
		int ret = blk_write(wk->dev, (wk->region + i) >> 9, shadow + i, 128 * 1024, 0);

		if (ret)
			WFAIL(wk, "thread %u: initial write: %d", wk->id, ret);
	}
	for (r = 0; r < wk->rounds; r++) {
		/* an odd step (>= 3) over a power-of-two slot count: distinct slots, never
		 * adjacent, so no two bios merge and a plugged round holds per_round tags */
		unsigned slot0 = (unsigned)(rnd_r(&s) % nslots),
		         step = 3 + 2 * (unsigned)(rnd_r(&s) % 7);
		struct blk_plug plug;

		if (r & 1)
			blk_start_plug(&plug);
		for (i = 0; i < wk->per_round; i++) {
			uint64_t off = (uint64_t)((slot0 + i * step) % nslots) * 32 * 1024;
			uint32_t len = (uint32_t)(1 + rnd_r(&s) % (32 * 1024 / wk->lbs)) * wk->lbs;
			char *m = mem + (size_t)i * 32 * 1024;

			fill_random(m, len, &s);
			memcpy(shadow + off, m, len);
			memset(&tbs[i], 0, sizeof(tbs[i]));
			blk_bio_init(&tbs[i].bio, BLK_OP_WRITE, (wk->region + off) >> 9, m, len,
			             waiter_end_io, &w);
			blk_submit_bio(wk->dev, &tbs[i].bio);
		}
		if (r & 1)
			blk_finish_plug(&plug);
		total += wk->per_round;
		if (waiter_wait(wk->dev, &w, total, wk->polled, NULL) < 0)
			WFAIL(wk, "thread %u: blk_poll failed", wk->id);
		if (w.errors)
			WFAIL(wk, "thread %u: round %u: %u errors, status %u", wk->id, r, w.errors,
			      w.first_err);
	}
	/* read back in 64 KiB bios, all in flight at once */
	memset(rd, 0, THREAD_REGION);
	for (i = 0; i < THREAD_REGION / (64 * 1024); i++) {
		memset(&tbs[i], 0, sizeof(tbs[i]));
		blk_bio_init(&tbs[i].bio, BLK_OP_READ, (wk->region + (uint64_t)i * 64 * 1024) >> 9,
		             rd + (size_t)i * 64 * 1024, 64 * 1024, waiter_end_io, &w);
		blk_submit_bio(wk->dev, &tbs[i].bio);
	}
	total += THREAD_REGION / (64 * 1024);
	if (waiter_wait(wk->dev, &w, total, wk->polled, NULL) < 0)
		WFAIL(wk, "thread %u: blk_poll failed", wk->id);
	if (w.errors)
		WFAIL(wk, "thread %u: read back: %u errors", wk->id, w.errors);
	if (memcmp(rd, shadow, THREAD_REGION)) {
		for (i = 0; i < THREAD_REGION && rd[i] == shadow[i]; i++)
			;
		WFAIL(wk, "thread %u: data differs at byte %u of its region", wk->id, i);
	}
out:
	free(shadow);
	free(mem);
	free(rd);
	free(tbs);
	return NULL;
}

static void run_workers(int t, unsigned flags, unsigned nr_hw, unsigned depth, unsigned nthreads,
                        unsigned rounds, unsigned per_round)
{
	struct blk_dev *dev = xopen(t, flags, nr_hw, depth);
	struct worker wk[8];
	pthread_barrier_t start;
	struct blk_stats st;
	unsigned i;

	ck_assert_uint_le(nthreads, 8);
	pthread_barrier_init(&start, NULL, nthreads);
	for (i = 0; i < nthreads; i++) {
		memset(&wk[i], 0, sizeof(wk[i]));
		wk[i].dev = dev;
		wk[i].id = i;
		wk[i].lbs = dev_lbs(dev);
		wk[i].polled = flags & BLK_CFG_POLLED;
		wk[i].rounds = rounds;
		wk[i].per_round = per_round;
		wk[i].region = THREAD_AT + (uint64_t)i * THREAD_REGION;
		wk[i].start = &start;
		ck_assert_int_eq(pthread_create(&wk[i].th, NULL, worker_main, &wk[i]), 0);
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(wk[i].th, NULL);
	for (i = 0; i < nthreads; i++)
		ck_assert_msg(!wk[i].failed, "%s (%s): %s", target_names[t],
		              flags & BLK_CFG_POLLED ? "polled" : "thread", wk[i].msg);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(st.ios[BLK_OP_WRITE],
	                  nthreads * (rounds * per_round + THREAD_REGION / (128 * 1024)));
	if (depth < per_round)
		ck_assert_msg(st.tag_waits > 0, "depth %u never ran out",
		              depth); /* plugged rounds */
	pthread_barrier_destroy(&start);
	blk_dev_close(dev);
}

START_TEST(test_threads_one_queue)
{
	/* _i: target * 2 + polled */
	run_workers(_i / 2, _i & 1 ? BLK_CFG_POLLED : 0, 1, 64, 2, 24, 16);
}
END_TEST

START_TEST(test_threads_two_queues)
{
	run_workers(_i / 2, _i & 1 ? BLK_CFG_POLLED : 0, 2, 64, 2, 24, 16);
}
END_TEST

START_TEST(test_depth_exhaustion)
{
	/* 4 tags, 4 threads with 16 bios each in flight: 64 wanted at once */
	run_workers(_i / 2, _i & 1 ? BLK_CFG_POLLED : 0, 1, 4, 4, 8, 16);
}
END_TEST

/* --- fixed buffers ------------------------------------------------------ */

START_TEST(test_fixed_buffers)
{
	bool polled = _i & 1;
	struct blk_dev *dev = xopen(_i / 2, polled ? BLK_CFG_POLLED : 0, 2, 32);
	char *reg = xalloc(4 * MiB), *small = xalloc(16 * 4096);
	uint64_t seed = 99;
	int before = uring_user_bufs(), ret, i;

	ck_assert_int_eq(blk_dev_register_buffer(dev, reg, 4 * MiB), 0);
	if (before >= 0)
		ck_assert_int_eq(uring_user_bufs(), before + 2); /* one per ring */
	/* write from the registered buffer, read into it elsewhere */
	fill_random(reg, 2 * MiB, &seed);
	rw_range(dev, BLK_OP_WRITE, 0, reg, 2 * MiB);
	rw_range(dev, BLK_OP_READ, 0, reg + 2 * MiB, 2 * MiB);
	check_equal(reg + 2 * MiB, reg, 2 * MiB, "fixed buffers");
	/* a range straddling the end of the region falls back to plain I/O */
	ck_assert_int_eq(blk_read(dev, 0, reg + 4 * MiB - 64 * 1024, 64 * 1024, 0), 0);

	/* up to 16 regions, re-registered as a set each time; the 17th is refused */
	for (i = 1; i < 16; i++)
		ck_assert_int_eq(blk_dev_register_buffer(dev, small + (size_t)(i - 1) * 4096, 4096),
		                 0);
	if (before >= 0)
		ck_assert_int_eq(uring_user_bufs(), before + 32);
	ret = blk_dev_register_buffer(dev, small + 15 * 4096, 4096);
	ck_assert_int_eq(ret, -ENOSPC);
	ck_assert_int_eq(blk_dev_register_buffer(dev, NULL, 4096), -EINVAL);
	/* still working, and still right */
	memset(reg + 2 * MiB, 0, 2 * MiB);
	rw_range(dev, BLK_OP_READ, 0, reg + 2 * MiB, 2 * MiB);
	check_equal(reg + 2 * MiB, reg, 2 * MiB, "fixed buffers after re-registration");
	blk_dev_close(dev);
	free(reg);
	free(small);
}
END_TEST

/* --- modes, read-only, errors ------------------------------------------- */

START_TEST(test_direct_mode)
{
	struct blk_dev *dev;
	int direct;

	dev = xopen(_i, 0, 1, 8);
	direct = fd_is_direct(target_paths[_i]);
	ck_assert_msg(direct >= 0, "%s: the device fd was not found", target_names[_i]);
	switch (_i) {
	case T_RAMFS:
		/* ramfs refuses O_DIRECT: the backend must have fallen back */
		ck_assert_msg(direct == 0, "ramfs: O_DIRECT should have been refused");
		break;
	case T_SHM:
		/* tmpfs takes O_DIRECT since Linux 6.6, refuses it before: both are fine */
		break;
	default:
		ck_assert_msg(direct == 1, "%s: not opened with O_DIRECT", target_names[_i]);
	}
	blk_dev_close(dev);

	dev = xopen(_i, BLK_CFG_NO_DIRECT, 1, 8);
	ck_assert_int_eq(fd_is_direct(target_paths[_i]), 0);
	blk_dev_close(dev);
}
END_TEST

START_TEST(test_buffered_roundtrip)
{
	/* BLK_CFG_NO_DIRECT on every target, thread and polled */
	roundtrip(_i / 2, BLK_CFG_NO_DIRECT | (_i & 1 ? BLK_CFG_POLLED : 0), true);
}
END_TEST

START_TEST(test_read_only)
{
	struct blk_dev *dev = xopen(_i, 0, 1, 8);
	char *buf = xalloc(64 * 1024), *got = xalloc(64 * 1024);
	struct blk_dev_info info;
	uint64_t seed = 5;
	struct blk_bio zb;
	struct waiter w;

	fill_random(buf, 64 * 1024, &seed);
	ck_assert_int_eq(blk_write(dev, 2048, buf, 64 * 1024, 0), 0);
	ck_assert_int_eq(blk_flush(dev), 0);
	blk_dev_close(dev);

	dev = xopen(_i, BLK_CFG_READONLY, 1, 8);
	blk_dev_get_info(dev, &info);
	ck_assert(info.read_only);
	ck_assert_int_eq(blk_read(dev, 2048, got, 64 * 1024, 0), 0);
	check_equal(got, buf, 64 * 1024, "read-only read");
	ck_assert_int_eq(blk_write(dev, 2048, got, 4096, 0), -EROFS);
	waiter_init(&w);
	blk_bio_init(&zb, BLK_OP_WRITE_ZEROES, 2048, NULL, 4096, waiter_end_io, &w);
	blk_submit_bio(dev, &zb);
	ck_assert_int_eq(waiter_wait(dev, &w, 1, false, NULL), 0);
	ck_assert_uint_eq(zb.status, BLK_STS_ROFS);
	blk_dev_close(dev);

	/* nothing changed */
	dev = xopen(_i, 0, 1, 8);
	ck_assert_int_eq(blk_read(dev, 2048, got, 64 * 1024, 0), 0);
	check_equal(got, buf, 64 * 1024, "after read-only open");
	blk_dev_close(dev);
	free(buf);
	free(got);
}
END_TEST

START_TEST(test_open_errors)
{
	char path[300], err[512];
	struct blk_dev *dev = NULL;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/no-such-device", workdir);
	err[0] = '\0';
	ret = open_dev(path, 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -ENOENT);
	ck_assert_ptr_null(dev);
	ck_assert_msg(strstr(err, path) && strstr(err, "no such"), "message: '%s'", err);

	err[0] = '\0';
	ret = open_dev(workdir, 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -EISDIR);
	ck_assert_msg(strstr(err, "directory"), "message: '%s'", err);

	err[0] = '\0';
	ret = open_dev("/dev/null", 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -ENOTBLK);
	ck_assert_msg(strstr(err, "character device"), "message: '%s'", err);

	snprintf(path, sizeof(path), "%s/tiny.img", workdir);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 3000), 0);
	close(fd);
	err[0] = '\0';
	ret = open_dev(path, 0, 1, 8, &dev, err, sizeof(err));
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_msg(strstr(err, "too small") && strstr(err, "3000"), "message: '%s'", err);
	unlink(path);
	ck_assert_ptr_null(dev);
}
END_TEST

/* --- short transfers ---------------------------------------------------- */

/*
 * Shrink the image under an open device: a read across the new end returns
 * short, the backend completes the prefix and re-issues the rest, which then
 * reads nothing and fails.  The bio before the end completes; the one across
 * it fails with exactly the bytes that were read counted in bio->done.
 */
START_TEST(test_short_read)
{
	bool unaligned = _i & 1, polled = _i & 2;
	char path[300];
	struct blk_dev *dev = NULL;
	char err[512], *pat = xalloc(256 * 1024), *mem = xalloc(256 * 1024 + 8);
	char *got = unaligned ? mem + 1 : mem;
	uint64_t seed = 3, end = 4 * MiB;
	struct blk_bio a, b;
	struct blk_plug plug;
	struct waiter w;
	int fd;

	snprintf(path, sizeof(path), "%s/short.img", workdir);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8 * MiB), 0);
	ck_assert_int_eq(open_dev(path, polled ? BLK_CFG_POLLED : 0, 1, 8, &dev, err, sizeof(err)),
	                 0);
	fill_random(pat, 256 * 1024, &seed);
	ck_assert_int_eq(blk_write(dev, (end - 64 * 1024) >> 9, pat, 128 * 1024, 0), 0);
	/* the file now ends 8 KiB into the second bio */
	ck_assert_int_eq(ftruncate(fd, (off_t)end + 8192), 0);

	waiter_init(&w);
	/* contiguous under a plug: one request of 128 KiB, 72 KiB of it readable */
	blk_bio_init(&a, BLK_OP_READ, (end - 64 * 1024) >> 9, got, 64 * 1024, waiter_end_io, &w);
	blk_bio_init(&b, BLK_OP_READ, end >> 9, got + 64 * 1024, 64 * 1024, waiter_end_io, &w);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a);
	blk_submit_bio(dev, &b);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_uint_eq(a.status, BLK_STS_OK);
	ck_assert_uint_eq(a.done, a.len);
	ck_assert_uint_eq(b.status, BLK_STS_IOERR);
	ck_assert_uint_eq(b.done, 8192);
	check_equal(got, pat, 64 * 1024 + 8192, "short read prefix");
	blk_dev_close(dev);
	close(fd);
	unlink(path);
	free(pat);
	free(mem);
}
END_TEST

/* --- a disk that fails on demand: a file served over /dev/fuse ---------- */

/*
 * A 4 MiB in-memory disk exported as "disk" on a FUSE mount, served with the
 * raw protocol by a child process (FOPEN_DIRECT_IO: every read of the backend
 * reaches the server as is).  Reads touching a bad range fail with EIO like a
 * bad sector; fail_next fails the next reads wherever they are (a transient
 * error); short_reads makes the next reads return half.  No fallocate.
 *
 * The server is a separate process that dies with the test (PDEATHSIG), and
 * the test never holds /dev/fuse: a test that fails and exits must not wait
 * on a FUSE request that only its own dead thread could answer.
 *
 * Short reads: io_uring retries a short read on a regular file inside the
 * kernel, so the server answers that retry with 0 bytes (end of file) and
 * the short count reaches the backend.  (Short writes cannot be tested this
 * way: FUSE's async direct write does not advance ki_pos, so the kernel's own
 * retry rewrites the same offset.)
 */
#define FDISK_SIZE (4 * MiB)

struct fdisk {
	pid_t server;
	char mnt[200];
	char path[256];
	char *data;                    /* shared with the server */
	uint64_t bad_lo[2], bad_hi[2]; /* byte ranges that fail reads */
	_Atomic unsigned fail_next, short_reads;
	_Atomic bool eof_next; /* answer the kernel's retry of a short read with 0 */
	_Atomic unsigned eio_replies, short_replies, reads;
};

static void fdisk_reply(int fd, uint64_t unique, int error, const void *p, size_t len)
{
	struct fuse_out_header oh;
	struct iovec iov[2];

	if (error)
		len = 0;
	oh.len = (uint32_t)(sizeof(oh) + len);
	oh.error = error;
	oh.unique = unique;
	iov[0].iov_base = &oh;
	iov[0].iov_len = sizeof(oh);
	iov[1].iov_base = (void *)p;
	iov[1].iov_len = len;
	if (writev(fd, iov, len ? 2 : 1) < 0 && errno != ENOENT)
		perror("test_uring: fuse reply");
}

static void fdisk_attr(struct fuse_attr *a, uint64_t nodeid)
{
	memset(a, 0, sizeof(*a));
	a->ino = nodeid;
	a->blksize = 4096;
	if (nodeid == FUSE_ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0600;
		a->nlink = 1;
		a->size = FDISK_SIZE;
		a->blocks = FDISK_SIZE / 512;
	}
}

static bool fdisk_is_bad(struct fdisk *d, uint64_t off, uint64_t len)
{
	unsigned i;

	for (i = 0; i < 2; i++)
		if (d->bad_hi[i] > d->bad_lo[i] && off < d->bad_hi[i] && off + len > d->bad_lo[i])
			return true;
	return false;
}

static void fdisk_read(struct fdisk *d, int fd, const struct fuse_in_header *ih,
                       const struct fuse_read_in *r)
{
	uint64_t off = r->offset;
	uint32_t size = r->size;
	int err = 0;

	d->reads++;
	if (off >= FDISK_SIZE)
		size = 0;
	else if (off + size > FDISK_SIZE)
		size = (uint32_t)(FDISK_SIZE - off);
	if (d->fail_next) {
		d->fail_next--;
		err = -EIO;
	} else if (fdisk_is_bad(d, off, size)) {
		err = -EIO;
	} else if (d->eof_next) {
		d->eof_next = false;
		size = 0;
	} else if (d->short_reads && size > 4096) {
		d->short_reads--;
		d->short_replies++;
		d->eof_next = true;
		size = (size / 2) & ~4095u;
	}
	if (err)
		d->eio_replies++;
	fdisk_reply(fd, ih->unique, err, d->data + off, size);
}

/* The server loop: until the mount goes away (read fails with ENODEV). */
static void fdisk_serve(struct fdisk *d, int fd)
{
	const size_t bufsz = 1024 * 1024 + 4096;
	char *buf = malloc(bufsz);

	while (buf) {
		ssize_t n = read(fd, buf, bufsz);
		struct fuse_in_header *ih = (struct fuse_in_header *)buf;
		void *in = buf + sizeof(*ih);

		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
				continue;
			break;
		}
		switch (ih->opcode) {
		case FUSE_INIT: {
			struct fuse_init_out out;

			memset(&out, 0, sizeof(out));
			out.major = FUSE_KERNEL_VERSION;
			out.minor = FUSE_KERNEL_MINOR_VERSION;
			out.max_readahead = ((struct fuse_init_in *)in)->max_readahead;
			out.max_write = 128 * 1024;
			out.max_background = 64;
			out.congestion_threshold = 48;
			out.time_gran = 1;
			fdisk_reply(fd, ih->unique, 0, &out, sizeof(out));
			break;
		}
		case FUSE_LOOKUP:
			if (ih->nodeid == FUSE_ROOT_ID && !strcmp(in, "disk")) {
				struct fuse_entry_out e;

				memset(&e, 0, sizeof(e));
				e.nodeid = 2;
				e.generation = 1;
				e.entry_valid = e.attr_valid = 3600;
				fdisk_attr(&e.attr, 2);
				fdisk_reply(fd, ih->unique, 0, &e, sizeof(e));
			} else {
				fdisk_reply(fd, ih->unique, -ENOENT, NULL, 0);
			}
			break;
		case FUSE_GETATTR:
		case FUSE_SETATTR: {
			struct fuse_attr_out o;

			memset(&o, 0, sizeof(o));
			o.attr_valid = 3600;
			fdisk_attr(&o.attr, ih->nodeid);
			fdisk_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_OPEN: {
			struct fuse_open_out o;

			memset(&o, 0, sizeof(o));
			o.fh = 1;
			o.open_flags = FOPEN_DIRECT_IO;
			fdisk_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_READ:
			fdisk_read(d, fd, ih, in);
			break;
		case FUSE_WRITE: {
			struct fuse_write_in *w = in;
			struct fuse_write_out o;

			memset(&o, 0, sizeof(o));
			if (w->offset >= FDISK_SIZE || w->size > FDISK_SIZE - w->offset) {
				fdisk_reply(fd, ih->unique, -ENOSPC, NULL, 0);
				break;
			}
			memcpy(d->data + w->offset, w + 1, w->size);
			o.size = w->size;
			fdisk_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_FLUSH:
		case FUSE_RELEASE:
		case FUSE_FSYNC:
		case FUSE_ACCESS:
		case FUSE_DESTROY:
			fdisk_reply(fd, ih->unique, 0, NULL, 0);
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break; /* no reply */
		default:
			fdisk_reply(fd, ih->unique, -ENOSYS, NULL, 0);
		}
	}
	free(buf);
}

static struct fdisk *fdisk_start(void)
{
	struct fdisk *d;
	pid_t parent = getpid(), pid;
	uint64_t seed = 4242;
	int pfd[2], err = 0;

	d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(d, MAP_FAILED);
	memset(d, 0, sizeof(*d));
	d->data = mmap(NULL, FDISK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(d->data, MAP_FAILED);
	fill_random(d->data, FDISK_SIZE, &seed);
	snprintf(d->mnt, sizeof(d->mnt), "%s/fuse", workdir);
	snprintf(d->path, sizeof(d->path), "%s/disk", d->mnt);
	while (umount2(d->mnt, MNT_DETACH) == 0)
		; /* left by an earlier test that failed */
	ck_assert_msg(mkdir(d->mnt, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", d->mnt,
	              strerror(errno));
	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork(); /* not into d->server: the child would write 0 there, d is shared */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char opts[128];
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(pfd[0]);
		fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
		snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
		if (fd < 0 || mount("mendblk-fault", d->mnt, "fuse.mendblk-fault",
		                    MS_NOSUID | MS_NODEV, opts) < 0)
			err = errno;
		if (write(pfd[1], &err, sizeof(err)) != sizeof(err) || err)
			_exit(1);
		close(pfd[1]);
		fdisk_serve(d, fd);
		_exit(0);
	}
	d->server = pid;
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &err, sizeof(err)), sizeof(err));
	close(pfd[0]);
	ck_assert_msg(err == 0, "mount fuse on %s: %s", d->mnt, strerror(err));
	return d;
}

static void fdisk_stop(struct fdisk *d)
{
	int ret = umount2(d->mnt, 0), err = errno, st = 0;

	if (ret) {
		kill(d->server, SIGKILL);
		umount2(d->mnt, MNT_DETACH);
	}
	ck_assert_int_eq(waitpid(d->server, &st, 0), d->server);
	ck_assert_msg(ret == 0, "umount %s: %s", d->mnt, strerror(err));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fuse server ended with %d", st);
	rmdir(d->mnt);
	munmap(d->data, FDISK_SIZE);
	munmap(d, sizeof(*d));
}

static struct blk_dev *fdisk_open(struct fdisk *d, unsigned flags)
{
	struct blk_dev *dev = NULL;
	char err[512] = "";
	int ret = open_dev(d->path, flags, 1, 16, &dev, err, sizeof(err));

	ck_assert_msg(ret == 0, "open %s: %d: %s", d->path, ret, err);
	ck_assert_uint_eq(dev_lbs(dev), 512);
	ck_assert_int_eq(fd_is_direct(d->path), 1);
	return dev;
}

/* Bios over [sector, +len) split into three segments cut at @cuts (bytes). */
static void seg3(struct tbio *tb, int op, uint64_t sector, char *mem, uint32_t len, uint32_t cut1,
                 uint32_t cut2, struct waiter *w, unsigned flags)
{
	memset(tb, 0, sizeof(*tb));
	tb->bio.op = (uint8_t)op;
	tb->bio.sector = sector;
	tb->bio.len = len;
	tb->bio.flags = (uint8_t)flags;
	tb->bio.end_io = waiter_end_io;
	tb->bio.private = w;
	tb->bio.iov = tb->iov;
	tb->iov[0] = (struct iovec){mem, cut1};
	tb->iov[1] = (struct iovec){mem + cut1, cut2 - cut1};
	tb->iov[2] = (struct iovec){mem + cut2, len - cut2};
	tb->bio.nr_segs = 3;
}

/*
 * A read meets a bad sector the engine did not know about: the merged
 * request fails as a whole, the backend probes block by block, the first
 * bio completes, the second fails naming sector 1000 with the clean bytes
 * before it delivered, and the sector is now in the poison table.
 */
START_TEST(test_media_error)
{
	bool polled = _i & 1;
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, polled ? BLK_CFG_POLLED : 0);
	char *mem = xalloc(256 * 1024);
	struct blk_range r[4];
	struct blk_recovery rec;
	struct blk_stats st;
	struct tbio a, b;
	struct blk_plug plug;
	struct waiter w;

	d->bad_lo[0] = 1000 * 512;
	d->bad_hi[0] = 1001 * 512;
	d->bad_lo[1] = 1500 * 512;
	d->bad_hi[1] = 1501 * 512;
	waiter_init(&w);
	seg3(&a, BLK_OP_READ, 768, mem, 64 * 1024, 8192, 40960, &w, 0);
	seg3(&b, BLK_OP_READ, 896, mem + 64 * 1024, 64 * 1024, 20480, 45056, &w, 0);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a.bio);
	blk_submit_bio(dev, &b.bio);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_uint_gt(d->eio_replies, 0);
	ck_assert_uint_eq(a.bio.status, BLK_STS_OK);
	ck_assert_uint_eq(a.bio.done, 64 * 1024);
	ck_assert_uint_eq(b.bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(b.bio.bad_sector, 1000);
	ck_assert_uint_eq(b.bio.done, (1000 - 896) * 512);
	check_equal(mem, d->data + 768 * 512, 64 * 1024 + (1000 - 896) * 512, "clean prefix");
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.media_errors, 1);
	/* recorded: the table now holds the sector */
	ck_assert_uint_eq(blk_poison_lookup(dev, 0, 8192, r, 4, NULL), 1);
	ck_assert_uint_eq(r[0].sector, 1000);
	ck_assert_uint_eq(r[0].nr, 1);

	/* known poison now: the same answer through the engine's slow path */
	memset(mem, 0, 64 * 1024);
	ck_assert_int_eq(blk_read(dev, 896, mem, 64 * 1024, 0), -EIO);

	/* a recovery read over an unknown bad sector: zero-filled, reported */
	memset(&rec, 0, sizeof(rec));
	rec.ranges = r;
	rec.max = 4;
	memset(mem, 0xee, 32 * 1024);
	seg3(&a, BLK_OP_READ, 1472, mem, 32 * 1024, 4096, 16384, &w, BLK_BIO_RECOVERY);
	a.bio.rec = &rec;
	blk_submit_bio(dev, &a.bio);
	ck_assert_int_eq(waiter_wait(dev, &w, 3, polled, NULL), 0);
	ck_assert_uint_eq(a.bio.status, BLK_STS_OK);
	ck_assert_uint_eq(rec.zeroed, 1);
	ck_assert_uint_eq(rec.nr, 1);
	ck_assert_uint_eq(r[0].sector, 1500);
	check_equal(mem, d->data + 1472 * 512, (1500 - 1472) * 512, "recovery prefix");
	check_equal(mem + (1501 - 1472) * 512, d->data + 1501 * 512, (1536 - 1501) * 512,
	            "recovery suffix");
	for (unsigned i = 0; i < 512; i++)
		ck_assert_int_eq(mem[(1500 - 1472) * 512 + i], 0);
	ck_assert_uint_eq(blk_poison_count(dev), 2);
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/* A read fails once and not again: the probe reads it all, the bios complete. */
START_TEST(test_transient_error)
{
	bool polled = _i & 1;
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, polled ? BLK_CFG_POLLED : 0);
	char *mem = xalloc(128 * 1024);
	struct tbio a, b;
	struct blk_plug plug;
	struct waiter w;

	waiter_init(&w);
	d->fail_next = 1;
	seg3(&a, BLK_OP_READ, 64, mem, 64 * 1024, 512, 33280, &w, 0);
	seg3(&b, BLK_OP_READ, 192, mem + 64 * 1024, 64 * 1024, 61440, 64512, &w, 0);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a.bio);
	blk_submit_bio(dev, &b.bio);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_uint_eq(d->eio_replies, 1);
	ck_assert_uint_eq(a.bio.status, BLK_STS_OK);
	ck_assert_uint_eq(b.bio.status, BLK_STS_OK);
	check_equal(mem, d->data + 64 * 512, 128 * 1024, "after a transient error");
	ck_assert_uint_eq(blk_poison_count(dev), 0);
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/*
 * Reads that return half: the backend completes what moved and re-issues
 * the rest, from the middle of a bio and of a segment, on the direct path
 * and through the bounce buffer.
 */
START_TEST(test_short_reads)
{
	bool polled = _i & 1, unaligned = _i & 2;
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, polled ? BLK_CFG_POLLED : 0);
	char *mem = xalloc(128 * 1024 + 8), *g = unaligned ? mem + 5 : mem;
	struct tbio a, b;
	struct blk_plug plug;
	struct waiter w;
	unsigned reads0;

	waiter_init(&w);
	reads0 = d->reads;
	d->short_reads = 3;
	seg3(&a, BLK_OP_READ, 2048, g, 64 * 1024, 61440, 62464, &w, 0);
	seg3(&b, BLK_OP_READ, 2176, g + 64 * 1024, 64 * 1024, 8192, 40960, &w, 0);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a.bio);
	blk_submit_bio(dev, &b.bio);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_msg(w.errors == 0, "short reads: status %u", w.first_err);
	ck_assert_uint_eq(d->short_reads, 0);
	ck_assert_uint_eq(d->short_replies, 3);
	/* 128K: 64K, retry 0; rest 64K: 32K, retry 0; 32K: 16K, retry 0; 16K */
	ck_assert_uint_eq(d->reads - reads0, 7);
	ck_assert_uint_eq(a.bio.done, a.bio.len);
	ck_assert_uint_eq(b.bio.done, b.bio.len);
	check_equal(g, d->data + 2048 * 512, 128 * 1024, "after short reads");
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/* The synchronous path of the poison code: read_sync and write_sync directly. */
START_TEST(test_sync_fuse)
{
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, 0);
	char *mem = xalloc(16384), *buf = mem + 3;
	uint64_t bad = 0;

	d->bad_lo[0] = 1000 * 512;
	d->bad_hi[0] = 1001 * 512;
	/* clean, unaligned position and memory */
	ck_assert_int_eq(dev->ops->read_sync(dev, 990 * 512 + 7, buf, 4000, &bad), 0);
	check_equal(buf, d->data + 990 * 512 + 7, 4000, "read_sync");
	/* across the bad sector: -EIO naming it, aligned and not */
	ck_assert_int_eq(dev->ops->read_sync(dev, 996 * 512, mem, 8192, &bad), -EIO);
	ck_assert_uint_eq(bad, 1000);
	bad = 0;
	ck_assert_int_eq(dev->ops->read_sync(dev, 999 * 512 + 100, buf, 1000, &bad), -EIO);
	ck_assert_uint_eq(bad, 1000);
	/* read-modify-write of partial blocks */
	memset(buf, 0x77, 3000);
	ck_assert_int_eq(dev->ops->write_sync(dev, 3000 * 512 + 300, buf, 3000), 0);
	for (unsigned i = 0; i < 3000; i++)
		ck_assert_int_eq((unsigned char)d->data[3000 * 512 + 300 + i], 0x77);
	ck_assert_int_eq(dev->ops->flush_sync(dev), 0);
	ck_assert_int_eq(dev->ops->clear_poison(dev, 1000, 1), 0);
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/* read_sync/write_sync on every target: unaligned ranges and memory. */
START_TEST(test_sync_io)
{
	struct blk_dev *dev = xopen(_i, 0, 1, 8);
	char *pat = xalloc(64 * 1024), *got = xalloc(64 * 1024 + 16), *b = got + 9;
	uint64_t seed = 21 + (uint64_t)_i, bad = 0;

	fill_random(pat, 64 * 1024, &seed);
	rw_range(dev, BLK_OP_WRITE, 1 * MiB, pat, 64 * 1024);
	ck_assert_int_eq(dev->ops->read_sync(dev, 1 * MiB + 777, b, 20000, &bad), 0);
	check_equal(b, pat + 777, 20000, "read_sync");
	memset(b, 0x3c, 5000);
	memset(pat + 4096 + 513, 0x3c, 5000);
	ck_assert_int_eq(dev->ops->write_sync(dev, 1 * MiB + 4096 + 513, b, 5000), 0);
	ck_assert_int_eq(dev->ops->flush_sync(dev), 0);
	memset(got, 0, 64 * 1024);
	rw_range(dev, BLK_OP_READ, 1 * MiB, got, 64 * 1024);
	check_equal(got, pat, 64 * 1024, "after write_sync");
	blk_dev_close(dev);
	free(pat);
	free(got);
}
END_TEST

/*
 * Memory that is 512-byte aligned (and lbs-multiple segments) but not page
 * aligned, which zram (4 KiB blocks, dma alignment 512) must not be given:
 * it reads whole pages into the pages of such a buffer, before and past it.
 * Async bios (one and several segments), read_sync and writes from such
 * memory must move exactly the asked bytes: guard bytes on both sides.
 */
#define SUB_LEN   (64u * 1024)
#define SUB_AT    (1 * MiB)
#define SUB_GUARD 0xa7

/* Every byte of [big, big + total) outside the @n segments still holds the guard. */
static void check_guards(const unsigned char *big, size_t total, const struct iovec *seg,
                         unsigned n, const char *what, unsigned moff)
{
	size_t i;
	unsigned j;

	for (i = 0; i < total; i++) {
		for (j = 0; j < n; j++) {
			size_t s0 = (size_t)((const unsigned char *)seg[j].iov_base - big);

			if (i >= s0 && i < s0 + seg[j].iov_len)
				break;
		}
		if (j < n)
			continue;
		ck_assert_msg(big[i] == SUB_GUARD,
		              "%s (memory at page offset %u): byte %zu of the area, outside the "
		              "buffer, overwritten",
		              what, moff, i);
	}
}

START_TEST(test_subpage_memory)
{
	static const unsigned offs[] = {512, 1024, 2048, 3584, 8};
	bool polled = _i & 1;
	int t = _i / 2;
	struct blk_dev *dev = xopen(t, polled ? BLK_CFG_POLLED : 0, 1, 16);
	unsigned lbs = dev_lbs(dev), k;
	size_t total = SUB_LEN + 3 * 4096;
	unsigned char *pat = xalloc(SUB_LEN), *got = xalloc(SUB_LEN), *big = xalloc(total);
	uint64_t seed = 77 + (uint64_t)_i, bad = 0;

	fill_random(pat, SUB_LEN, &seed);
	rw_range(dev, BLK_OP_WRITE, SUB_AT, pat, SUB_LEN);
	for (k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		unsigned off = offs[k];
		unsigned char *buf = big + off;
		struct tbio tb;
		struct waiter w;
		uint32_t cut = (SUB_LEN / 4 / lbs) * lbs;

		/* one bio, one segment */
		memset(big, SUB_GUARD, total);
		ck_assert_int_eq(blk_read(dev, SUB_AT >> 9, buf, SUB_LEN, 0), 0);
		check_guards(big, total, &(struct iovec){buf, SUB_LEN}, 1, "read", off);
		check_equal(buf, pat, SUB_LEN, "read into sub-page memory");

		/* one bio, three segments of whole blocks, most starting off a page */
		memset(big, SUB_GUARD, total);
		memset(&tb, 0, sizeof(tb));
		waiter_init(&w);
		tb.bio.op = BLK_OP_READ;
		tb.bio.sector = SUB_AT >> 9;
		tb.bio.len = SUB_LEN;
		tb.bio.end_io = waiter_end_io;
		tb.bio.private = &w;
		tb.bio.iov = tb.iov;
		tb.bio.nr_segs = 3;
		tb.iov[0] = (struct iovec){buf, cut};
		tb.iov[1] = (struct iovec){buf + cut + 512, cut};
		tb.iov[2] = (struct iovec){buf + 2 * cut + 1024, SUB_LEN - 2 * cut};
		blk_submit_bio(dev, &tb.bio);
		ck_assert_int_eq(waiter_wait(dev, &w, 1, polled, NULL), 0);
		ck_assert_msg(w.errors == 0, "3-segment read: status %u", w.first_err);
		check_equal(tb.iov[0].iov_base, pat, cut, "segment 0");
		check_equal(tb.iov[1].iov_base, pat + cut, cut, "segment 1");
		check_equal(tb.iov[2].iov_base, pat + 2 * cut, SUB_LEN - 2 * cut, "segment 2");
		check_guards(big, total, tb.iov, 3, "3-segment read", off);

		/* the synchronous path */
		memset(big, SUB_GUARD, total);
		ck_assert_int_eq(dev->ops->read_sync(dev, SUB_AT, buf, SUB_LEN, &bad), 0);
		check_guards(big, total, &(struct iovec){buf, SUB_LEN}, 1, "read_sync", off);
		check_equal(buf, pat, SUB_LEN, "read_sync into sub-page memory");

		/* a write from such memory stores exactly its bytes */
		fill_random(pat, SUB_LEN, &seed);
		memset(big, SUB_GUARD, total);
		memcpy(buf, pat, SUB_LEN);
		ck_assert_int_eq(blk_write(dev, SUB_AT >> 9, buf, SUB_LEN, 0), 0);
		check_guards(big, total, &(struct iovec){buf, SUB_LEN}, 1, "write", off);
		memset(got, 0, SUB_LEN);
		rw_range(dev, BLK_OP_READ, SUB_AT, got, SUB_LEN);
		check_equal(got, pat, SUB_LEN, "written from sub-page memory");
	}
	blk_dev_close(dev);
	free(pat);
	free(got);
	free(big);
}
END_TEST

/* --- setup and teardown of the targets (parent process) ----------------- */

static int run(const char *cmd, char *out, size_t outlen)
{
	FILE *p = popen(cmd, "r");
	size_t n = 0;
	int st;

	if (!p)
		return -1;
	if (out) {
		n = fread(out, 1, outlen - 1, p);
		out[n] = '\0';
		while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
			out[--n] = '\0';
	}
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int make_image(const char *path, off_t size)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);

	if (fd < 0 || ftruncate(fd, size) < 0) {
		fprintf(stderr, "test_uring: %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int write_sysfs(const char *path, const char *val)
{
	FILE *f = fopen(path, "w");
	int ret;

	if (!f)
		return -errno;
	ret = fputs(val, f) < 0 ? -EIO : 0;
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	return ret;
}

static void setup_targets(void)
{
	char img[256], out[256], cmd[512];
	FILE *f;

	snprintf(workdir, sizeof(workdir), "/tmp/mendblk-uring-XXXXXX");
	if (!mkdtemp(workdir)) {
		perror("test_uring: mkdtemp");
		exit(1);
	}
	snprintf(target_paths[T_TMP], sizeof(target_paths[0]), "%s/image", workdir);
	if (make_image(target_paths[T_TMP], FILE_SIZE))
		target_paths[T_TMP][0] = '\0';

	snprintf(target_paths[T_SHM], sizeof(target_paths[0]), "/dev/shm/mendblk-uring-%d.img",
	         (int)getpid());
	if (make_image(target_paths[T_SHM], FILE_SIZE))
		target_paths[T_SHM][0] = '\0';

	snprintf(ramfs_dir, sizeof(ramfs_dir), "%s/ramfs", workdir);
	if (mkdir(ramfs_dir, 0700) == 0 && mount("none", ramfs_dir, "ramfs", 0, "mode=0700") == 0) {
		ramfs_mounted = true;
		snprintf(target_paths[T_RAMFS], sizeof(target_paths[0]), "%s/image", ramfs_dir);
		if (make_image(target_paths[T_RAMFS], FILE_SIZE))
			target_paths[T_RAMFS][0] = '\0';
	} else {
		fprintf(stderr, "test_uring: cannot mount ramfs on %s: %s\n", ramfs_dir,
		        strerror(errno));
	}

	snprintf(img, sizeof(img), "%s/loop-backing.img", workdir);
	if (make_image(img, LOOP_SIZE) == 0) {
		snprintf(cmd, sizeof(cmd), "losetup -f --show '%s'", img);
		if (run(cmd, out, sizeof(out)) == 0 && !strncmp(out, "/dev/loop", 9))
			snprintf(target_paths[T_LOOP], sizeof(target_paths[0]), "%s", out);
		else
			fprintf(stderr, "test_uring: losetup failed: %s\n", out);
	}
	snprintf(img, sizeof(img), "%s/loop4k-backing.img", workdir);
	if (make_image(img, LOOP_SIZE) == 0) {
		snprintf(cmd, sizeof(cmd), "losetup -f --show -b 4096 '%s'", img);
		if (run(cmd, out, sizeof(out)) == 0 && !strncmp(out, "/dev/loop", 9))
			snprintf(target_paths[T_LOOP4K], sizeof(target_paths[0]), "%s", out);
		else
			fprintf(stderr, "test_uring: losetup -b 4096 failed: %s\n", out);
	}

	/*
	 * A zram device of our own (hot_add), never one that exists already: it
	 * may be someone's swap, or another test's device.
	 */
	f = fopen("/sys/class/zram-control/hot_add", "r");
	if (f) {
		if (fscanf(f, "%d", &zram_id) != 1)
			zram_id = -1;
		fclose(f);
	}
	if (zram_id >= 0) {
		char path[128];
		int ret;

		snprintf(path, sizeof(path), "/sys/block/zram%d/disksize", zram_id);
		ret = write_sysfs(path, "256M");
		if (ret)
			fprintf(stderr, "test_uring: cannot size zram%d: %s\n", zram_id,
			        strerror(-ret));
		else
			snprintf(target_paths[T_ZRAM], sizeof(target_paths[0]), "/dev/zram%d",
			         zram_id);
	} else {
		fprintf(stderr, "test_uring: cannot add a zram device (zram module loaded?)\n");
	}
}

static void teardown_targets(void)
{
	char cmd[512], path[300];

	for (int t = T_LOOP; t < T_MAX; t++) {
		if ((t != T_LOOP && t != T_LOOP4K) || !target_paths[t][0])
			continue;
		snprintf(cmd, sizeof(cmd), "losetup -d '%s'", target_paths[t]);
		if (run(cmd, NULL, 0) != 0)
			fprintf(stderr, "test_uring: %s failed\n", cmd);
	}
	if (zram_id >= 0) {
		char id[16];

		snprintf(id, sizeof(id), "%d", zram_id);
		if (write_sysfs("/sys/class/zram-control/hot_remove", id))
			fprintf(stderr, "test_uring: cannot remove zram%d\n", zram_id);
	}
	if (target_paths[T_SHM][0])
		unlink(target_paths[T_SHM]);
	/* tests that died with the fault disk mounted (mounts stack: take them all) */
	snprintf(path, sizeof(path), "%s/fuse", workdir);
	while (umount2(path, MNT_DETACH) == 0)
		;
	rmdir(path);
	if (ramfs_mounted) {
		umount2(ramfs_dir, MNT_DETACH);
		rmdir(ramfs_dir);
	}
	if (target_paths[T_TMP][0])
		unlink(target_paths[T_TMP]);
	snprintf(path, sizeof(path), "%s/loop-backing.img", workdir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/loop4k-backing.img", workdir);
	unlink(path);
	rmdir(workdir);
}

static Suite *uring_suite(void)
{
	Suite *s = suite_create("uring");
	TCase *tc;

	tc = tcase_create("open");
	tcase_add_test(tc, test_open_errors);
	tcase_add_loop_test(tc, test_direct_mode, 0, T_MAX);
	suite_add_tcase(s, tc);

	tc = tcase_create("roundtrip");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_roundtrip_thread, 0, T_MAX);
	tcase_add_loop_test(tc, test_roundtrip_polled, 0, T_MAX);
	tcase_add_loop_test(tc, test_roundtrip_unaligned, 0, T_MAX);
	tcase_add_loop_test(tc, test_buffered_roundtrip, 0, 2 * T_MAX);
	tcase_add_loop_test(tc, test_zeroes_thread, 0, T_MAX);
	tcase_add_loop_test(tc, test_zeroes_polled, 0, T_MAX);
	tcase_add_loop_test(tc, test_read_only, 0, T_MAX);
	tcase_add_loop_test(tc, test_fixed_buffers, 0, 2 * T_MAX);
	tcase_add_loop_test(tc, test_short_read, 0, 4);
	tcase_add_loop_test(tc, test_sync_io, 0, T_MAX);
	tcase_add_loop_test(tc, test_subpage_memory, 0, 2 * T_MAX);
	suite_add_tcase(s, tc);

	tc = tcase_create("faults");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_media_error, 0, 2);
	tcase_add_loop_test(tc, test_transient_error, 0, 2);
	tcase_add_loop_test(tc, test_short_reads, 0, 4);
	tcase_add_test(tc, test_sync_fuse);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_threads_one_queue, 0, 2 * T_MAX);
	tcase_add_loop_test(tc, test_threads_two_queues, 0, 2 * T_MAX);
	tcase_add_loop_test(tc, test_depth_exhaustion, 0, 2 * T_MAX);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		/* exit 77: meson's skip; a failure in CI */
		fprintf(stderr, "test_uring: cannot run: needs root (loop devices, zram, ramfs)\n");
		return test_strict() ? 1 : 77;
	}
	setup_targets();
	sr = srunner_create(uring_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	teardown_targets();
	return failed ? 1 : 0;
}
