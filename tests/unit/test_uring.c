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
 *
 * This file: the targets, the helpers and main(); uring_io.c: round trips,
 * write zeroes, threads, fixed buffers, modes, short transfers, the
 * synchronous calls and sub-page memory; uring_fault.c: the failing disk
 * served over /dev/fuse and the tests that use it.
 */
#include "uring.h"
#include "check_run.h"

const char *target_names[T_MAX] = {"tmp-file", "shm-file", "ramfs-file", "loop", "zram", "loop-4k"};
char target_paths[T_MAX][256];
char workdir[128];
static char ramfs_dir[192];
static bool ramfs_mounted;
static int zram_id = -1; /* the zram device we added, or -1 */
/* --- helpers ------------------------------------------------------------ */

uint64_t rng_state;

uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

uint64_t rnd_r(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

void fill_random(void *buf, size_t len, uint64_t *s)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			rnd_r(s);
		p[i] = (unsigned char)(*s >> ((i & 7) * 8));
	}
}

void *xalloc(size_t len)
{
	void *p = NULL;

	ck_assert_int_eq(posix_memalign(&p, 4096, len), 0);
	memset(p, 0, len);
	return p;
}

void waiter_init(struct waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
}

void waiter_end_io(struct blk_bio *bio)
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

unsigned waiter_done(struct waiter *w)
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
int waiter_wait(struct blk_dev *dev, struct waiter *w, unsigned n, bool polled,
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

int open_dev(const char *path, unsigned flags, unsigned nr_hw, unsigned depth,
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

struct blk_dev *xopen(int t, unsigned flags, unsigned nr_hw, unsigned depth)
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

unsigned dev_lbs(struct blk_dev *dev)
{
	struct blk_dev_info info;

	blk_dev_get_info(dev, &info);
	return info.logical_block_size;
}

/* Synchronous read/write of a large range in max-size pieces. */
void rw_range(struct blk_dev *dev, int op, uint64_t pos, void *buf, size_t len)
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

void check_equal(const void *got, const void *want, size_t len, const char *what)
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

/*
 * Set @tb up over [pos, pos + len) with memory @mem split into up to 3
 * segments.  With @aligned the split points are multiples of @lbs (the
 * direct path); otherwise they are odd (the bounce path).
 */
void tbio_setup(struct tbio *tb, int op, uint64_t pos, char *mem, uint32_t len, unsigned lbs,
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
int fd_is_direct(const char *path)
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
int uring_user_bufs(void)
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
	TCase *tc_open = tcase_create("open");
	TCase *tc_rt = tcase_create("roundtrip");
	TCase *tc_threads = tcase_create("threads");
	TCase *tc_faults;

	tcase_set_timeout(tc_rt, 120);
	tcase_set_timeout(tc_threads, 120);
	uring_io_add(tc_open, tc_rt, tc_threads);
	tc_faults = uring_fault_tcase();
	suite_add_tcase(s, tc_open);
	suite_add_tcase(s, tc_rt);
	suite_add_tcase(s, tc_faults);
	suite_add_tcase(s, tc_threads);
	return s;
}

int main(void)
{
	int ret;

	if (geteuid() != 0) {
		/* exit 77: meson's skip; a failure in CI */
		fprintf(stderr, "test_uring: cannot run: needs root (loop devices, zram, ramfs)\n");
		return test_strict() ? 1 : 77;
	}
	setup_targets();
	ret = check_run(uring_suite());
	teardown_targets();
	return ret;
}
