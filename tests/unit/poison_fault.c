/* SPDX-License-Identifier: MIT */
/*
 * poison_fault.c: test_poison's "emulation" and "guard" test cases.
 * Emulation: poisoned pages really fault, clean sectors sharing them stay
 * readable and writable, a page made inaccessible behind the engine's back
 * becomes recorded poison and the process lives, a sparse image on a full
 * disk; blk_direct_load's guarded loads.  Guard: catches inside its range,
 * kills outside it, chains to a previous handler.  Only in builds with BLK_POISON_CHECKS.
 */
#include "poison.h"

#if BLK_POISON_CHECKS

/* ---- emulation --------------------------------------------------------- */

/* Touch @addr in a child: 0 if it could, else the signal that killed it. */
static int probe(const volatile unsigned char *addr)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit rl = {0, 0};

		setrlimit(RLIMIT_CORE, &rl);
		(void)*addr;
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return WTERMSIG(status);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status) ? -1 : 0;
}

static unsigned char *mapping(struct fix *f)
{
	void *addr = NULL;
	uint64_t bad;

	ck_assert_int_eq(blk_direct_access(f->dev, 0, PAGE, &addr, &bad), 0);
	return addr;
}

START_TEST(test_emulated_pages_fault)
{
	struct fix f;
	unsigned char *base;
	void *addr;
	uint64_t bad = 0;

	fix_setup(&f, "21 1\n");
	base = mapping(&f);
	ck_assert_int_eq(probe(base + 2 * PAGE + 10), SIGSEGV); /* page of sector 21 */
	ck_assert_int_eq(probe(base + 2 * PAGE - 1), 0);        /* the page before */
	ck_assert_int_eq(probe(base + 3 * PAGE), 0);            /* the page after */
	/* no direct access to a clean sector of that page either, nor to the bad one */
	ck_assert_int_ne(blk_direct_access(f.dev, 16 * SECT, SECT, &addr, &bad), 0);
	ck_assert_int_eq(blk_direct_access(f.dev, 21 * SECT, SECT, &addr, &bad), -EIO);
	ck_assert_uint_eq(bad, 21);

	/* clearing one of two poisoned sectors of a page keeps it protected */
	ck_assert_int_eq(blk_poison_add(f.dev, 22, 1), 0);
	ck_assert_int_eq(blk_write(f.dev, 21, f.pat, SECT, 0), 0);
	ck_assert_int_eq(probe(base + 2 * PAGE + 10), SIGSEGV);
	ck_assert_int_eq(blk_write(f.dev, 22, f.pat, SECT, 0), 0);
	ck_assert_int_eq(probe(base + 2 * PAGE + 10), 0);
	ck_assert_uint_eq(base[2 * PAGE + 21 * SECT % PAGE], f.pat[0]);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_many_ranges)
{
	static unsigned char buf[200 * PAGE];
	struct blk_range ranges[200];
	struct blk_recovery rec = {.ranges = ranges, .max = 200};
	struct blk_stats st;
	struct blk_bio bio;
	char text[4096];
	struct fix f;
	size_t i, n = 0;
	unsigned k;

	/* 100 ranges, one sector in every other page: more than the backend looks up at once */
	for (k = 0; k < 100; k++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%u 1\n", k * 16 + 3 + k % 5);
	fix_setup(&f, text);
	for (k = 0; k < 200; k++) {
		void *addr;
		uint64_t bad;
		int ret = blk_direct_access(f.dev, (uint64_t)k * PAGE, PAGE, &addr, &bad);

		ck_assert_msg((ret != 0) == (k % 2 == 0), "page %u: %d", k, ret);
	}
	blk_bio_init(&bio, BLK_OP_READ, 0, buf, sizeof(buf), NULL, NULL);
	bio.flags = BLK_BIO_RECOVERY;
	bio.rec = &rec;
	ck_assert_int_eq(blk_submit_bio_wait(f.dev, &bio), 0);
	ck_assert_uint_eq(rec.nr, 100);
	for (i = 0; i < sizeof(buf); i++) {
		size_t s = i / SECT;
		bool poisoned = s % 16 == 3 + (s / 16) % 5 && s / 16 < 100;

		ck_assert_msg(buf[i] == (poisoned ? 0 : f.pat[i]), "byte %zu", i);
	}
	/* the clean pages between read on the fast path, without a fault */
	ck_assert_int_eq(blk_read(f.dev, 8, buf, PAGE, 0), 0);
	ck_assert(memcmp(buf, f.pat + PAGE, PAGE) == 0);
	get_stats(&f, &st);
	ck_assert_uint_eq(st.faults, 0);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_clean_sectors_share_page)
{
	unsigned char buf[PAGE], data[SECT];
	struct blk_stats st;
	struct blk_bio bio;
	unsigned before;
	struct fix f;

	fix_setup(&f, "21 1\n");
	ck_assert_int_eq(blk_read(f.dev, 16, buf, 5 * SECT, 0), 0);
	ck_assert(memcmp(buf, f.pat + 16 * SECT, 5 * SECT) == 0);
	ck_assert_int_eq(blk_read(f.dev, 22, buf, 2 * SECT, 0), 0);
	ck_assert(memcmp(buf, f.pat + 22 * SECT, 2 * SECT) == 0);
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 20 * SECT + 3, buf, SECT - 3, 0), 0);
	ck_assert(memcmp(buf, f.pat + 20 * SECT + 3, SECT - 3) == 0);

	/* write a clean sector of the protected page, read it back, make it durable */
	memset(data, 0x99, sizeof(data));
	ck_assert_int_eq(blk_write(f.dev, 17, data, SECT, 0), 0);
	ck_assert_int_eq(blk_read(f.dev, 16, buf, 5 * SECT, 0), 0);
	ck_assert(memcmp(buf, f.pat + 16 * SECT, SECT) == 0);
	ck_assert(all_bytes(buf + SECT, SECT, 0x99));
	before = atomic_load(&nr_fdatasyncs);
	ck_assert_int_eq(blk_flush(f.dev), 0);
	ck_assert_uint_gt(atomic_load(&nr_fdatasyncs), before);
	get_stats(&f, &st);
	ck_assert_uint_eq(st.faults, 0); /* the backend saw the protection coming */
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	blk_dev_close(f.dev);
	f.dev = NULL;
	pread_image(&f, buf, SECT, 17 * SECT);
	ck_assert(all_bytes(buf, SECT, 0x99));
	fix_teardown(&f);
}
END_TEST

/*
 * Poison comes and goes on sector 21 while two threads read and write the
 * clean sectors of the same page: their loads race with the page's
 * protection changing under them.  No clean I/O may fail, no byte may be
 * wrong, and no poison may be invented (the fault path must tell its own
 * emulation from lost media).
 */
struct race {
	struct fix *f;
	atomic_bool stop;
	_Atomic unsigned bad_io, bad_data, ios;
};

static void *race_reader(void *p)
{
	struct race *r = p;
	unsigned char buf[5 * SECT];

	while (!atomic_load(&r->stop)) {
		if (blk_read(r->f->dev, 16, buf, sizeof(buf), 0))
			atomic_fetch_add(&r->bad_io, 1);
		else if (memcmp(buf, r->f->pat + 16 * SECT, sizeof(buf)))
			atomic_fetch_add(&r->bad_data, 1);
		atomic_fetch_add(&r->ios, 1);
	}
	return NULL;
}

static void *race_writer(void *p)
{
	struct race *r = p;
	unsigned char buf[2 * SECT];

	while (!atomic_load(&r->stop)) {
		/* rewrite sectors 22..23 with what they hold */
		if (blk_write(r->f->dev, 22, r->f->pat + 22 * SECT, sizeof(buf), 0) ||
		    blk_read(r->f->dev, 22, buf, sizeof(buf), 0))
			atomic_fetch_add(&r->bad_io, 1);
		else if (memcmp(buf, r->f->pat + 22 * SECT, sizeof(buf)))
			atomic_fetch_add(&r->bad_data, 1);
		atomic_fetch_add(&r->ios, 1);
	}
	return NULL;
}

START_TEST(test_protection_races)
{
	struct race r = {0};
	unsigned i, ios, bad_io, bad_data;
	pthread_t t[2];
	struct fix f;

	fix_setup(&f, NULL);
	r.f = &f;
	ck_assert_int_eq(pthread_create(&t[0], NULL, race_reader, &r), 0);
	ck_assert_int_eq(pthread_create(&t[1], NULL, race_writer, &r), 0);
	for (i = 0; i < 150; i++) {
		ck_assert_int_eq(blk_poison_add(f.dev, 21, 1), 0);
		ck_assert_int_eq(blk_poison_clear(f.dev, 21, 1), 0);
	}
	atomic_store(&r.stop, true);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	ios = atomic_load(&r.ios);
	bad_io = atomic_load(&r.bad_io);
	bad_data = atomic_load(&r.bad_data);
	ck_assert_uint_gt(ios, 0);
	ck_assert_msg(bad_io == 0, "%u of %u clean I/Os failed", bad_io, ios);
	ck_assert_msg(bad_data == 0, "%u of %u clean I/Os saw wrong data", bad_data, ios);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	fix_teardown(&f);
}
END_TEST

/* A page made inaccessible behind the engine's back: a real fault, caught. */
START_TEST(test_real_fault_read)
{
	static unsigned char buf[4 * PAGE], data[PAGE];
	struct blk_range r[4];
	struct blk_stats st;
	struct blk_bio bio;
	struct fix f;
	unsigned char *base;

	fix_setup(&f, NULL);
	base = mapping(&f);
	ck_assert_int_eq(mprotect(base + 5 * PAGE, PAGE, PROT_NONE), 0);

	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 4 * PAGE, buf, sizeof(buf), 0), -EIO);
	ck_assert_uint_eq(bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(bio.bad_sector, 40);
	ck_assert_uint_eq(bio.done, PAGE);
	ck_assert(memcmp(buf, f.pat + 4 * PAGE, PAGE) == 0);
	ck_assert(all_bytes(buf + PAGE, sizeof(buf) - PAGE, 0xee));
	get_stats(&f, &st);
	ck_assert_uint_ge(st.faults, 1);

	/* now known: in the table and in the file */
	ck_assert_uint_eq(blk_poison_lookup(f.dev, 0, 2048, r, 4, NULL), 1);
	ck_assert_uint_eq(r[0].sector, 40);
	ck_assert_uint_eq(r[0].nr, 8);
	ck_assert_uint_eq(read_bb_file(f.bb, r, 4), 1);
	ck_assert_uint_eq(r[0].sector, 40);
	ck_assert_uint_eq(r[0].nr, 8);

	/* overwriting the page heals it, and it is accessible again */
	memset(data, 0x31, sizeof(data));
	ck_assert_int_eq(blk_write(f.dev, 40, data, PAGE, 0), 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	ck_assert_int_eq(probe(base + 5 * PAGE), 0);
	ck_assert(all_bytes(base + 5 * PAGE, PAGE, 0x31));
	fix_teardown(&f);
}
END_TEST

/* blk_direct_load's callback: sum the bytes (a load from every page), count the calls. */
static int sum_bytes(const void *addr, size_t len, void *arg)
{
	const volatile unsigned char *p = addr;
	unsigned long *sum = arg;

	for (size_t i = 0; i < len; i++)
		sum[0] += p[i];
	sum[1]++;
	return 7;
}

/*
 * blk_direct_load: loads from a clean range run and return the callback's
 * result; a fault inside the range (a page made inaccessible behind the
 * engine's back) returns -EFAULT with the process alive, records nothing,
 * and leaves the guard disarmed (the next load runs as before).
 */
START_TEST(test_direct_load)
{
	unsigned long sum[2] = {0, 0}, want = 0;
	struct blk_stats st;
	struct fix f;
	unsigned char *base;

	fix_setup(&f, NULL);
	base = mapping(&f);
	for (size_t i = 0; i < 4 * PAGE; i++)
		want += f.pat[i];
	ck_assert_int_eq(blk_direct_load(f.dev, base, 4 * PAGE, sum_bytes, sum), 7);
	ck_assert_uint_eq(sum[0], want);
	ck_assert_uint_eq(sum[1], 1);

	ck_assert_int_eq(mprotect(base + 5 * PAGE, PAGE, PROT_NONE), 0);
	ck_assert_int_eq(blk_direct_load(f.dev, base + 4 * PAGE, 2 * PAGE, sum_bytes, sum),
	                 -EFAULT);
	ck_assert_uint_eq(sum[1], 1); /* the callback never returned */
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	get_stats(&f, &st);
	ck_assert_uint_eq(st.faults, 0);
	/* the guard was disarmed: the next load runs as before */
	sum[0] = 0;
	ck_assert_int_eq(blk_direct_load(f.dev, base, 4 * PAGE, sum_bytes, sum), 7);
	ck_assert_uint_eq(sum[0], want);
	ck_assert_uint_eq(sum[1], 2);
	ck_assert_int_eq(mprotect(base + 5 * PAGE, PAGE, PROT_READ | PROT_WRITE), 0);
	fix_teardown(&f);
}
END_TEST

/* Unknown poison met by the slow path itself (read_sync) during a recovery read. */
START_TEST(test_real_fault_in_slow_path)
{
	static unsigned char buf[64 * SECT];
	struct blk_range ranges[8];
	struct blk_recovery rec = {.ranges = ranges, .max = 8};
	struct blk_bio bio;
	struct fix f;
	size_t i;

	fix_setup(&f, "21 1\n");
	ck_assert_int_eq(mprotect(mapping(&f) + 5 * PAGE, PAGE, PROT_NONE), 0);
	blk_bio_init(&bio, BLK_OP_READ, 0, buf, sizeof(buf), NULL, NULL);
	bio.flags = BLK_BIO_RECOVERY;
	bio.rec = &rec;
	ck_assert_int_eq(blk_submit_bio_wait(f.dev, &bio), 0);
	ck_assert_uint_eq(rec.nr, 2);
	ck_assert_uint_eq(ranges[0].sector, 21);
	ck_assert_uint_eq(ranges[0].nr, 1);
	ck_assert_uint_eq(ranges[1].sector, 40);
	ck_assert_uint_eq(ranges[1].nr, 8);
	ck_assert_uint_eq(rec.zeroed, 9);
	for (i = 0; i < sizeof(buf); i++) {
		size_t s = i / SECT;
		bool poisoned = s == 21 || (s >= 40 && s < 48);

		ck_assert_msg(buf[i] == (poisoned ? 0 : f.pat[i]), "byte %zu", i);
	}
	fix_teardown(&f);
}
END_TEST

/*
 * A store into a page made read-only behind the engine's back.  A store of a
 * page goes through pwrite(2) on an image (the mapping is not touched): it
 * succeeds and records nothing.  A smaller store goes through the mapping,
 * faults, and the page's sectors are recorded as poison but the ones it
 * wrote (the slow path redoes it through the descriptor); a whole-page store
 * then heals the rest.
 */
START_TEST(test_real_fault_write)
{
	unsigned char data[PAGE], back[PAGE];
	struct blk_stats st;
	struct fix f;
	unsigned char *base;

	fix_setup(&f, NULL);
	base = mapping(&f);
	ck_assert_int_eq(mprotect(base + 5 * PAGE, 2 * PAGE, PROT_READ), 0);
	memset(data, 0x24, sizeof(data));
	/* a page: through the descriptor, no fault */
	ck_assert_int_eq(blk_write(f.dev, 40, data, PAGE, 0), 0);
	get_stats(&f, &st);
	ck_assert_uint_eq(st.faults, 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	ck_assert_int_eq(blk_read(f.dev, 40, back, PAGE, 0), 0);
	ck_assert(all_bytes(back, PAGE, 0x24));
	/* a sector: through the mapping, which faults */
	ck_assert_int_eq(blk_write(f.dev, 48, data, SECT, 0), 0);
	get_stats(&f, &st);
	ck_assert_uint_ge(st.faults, 1);
	ck_assert_uint_eq(blk_poison_count(f.dev), 1); /* one range: sectors 49-55 */
	ck_assert_int_eq(blk_read(f.dev, 48, back, SECT, 0), 0);
	ck_assert(all_bytes(back, SECT, 0x24));
	ck_assert_int_eq(blk_read(f.dev, 49, back, SECT, 0), -EIO);
	ck_assert_int_eq(blk_read(f.dev, 55, back, SECT, 0), -EIO);
	/* the whole page: the recorded poison is cleared by this very write */
	ck_assert_int_eq(blk_write(f.dev, 48, data, PAGE, 0), 0);
	get_stats(&f, &st);
	ck_assert_uint_eq(st.poison_cleared, 8);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	ck_assert_int_eq(blk_read(f.dev, 48, back, PAGE, 0), 0);
	ck_assert(all_bytes(back, PAGE, 0x24));
	/* the engine restored read/write access when it cleared the poison (else this store
	 * would kill the test) */
	base[6 * PAGE] = 0x25;
	ck_assert_int_eq(blk_read(f.dev, 48, back, 1, 0), 0);
	ck_assert_uint_eq(back[0], 0x25);
	fix_teardown(&f);
}
END_TEST

/* ---- the guard --------------------------------------------------------- */

START_TEST(test_guard_catches)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *map = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	                 -1, 0);
	char path[] = "/tmp/mendfs-guard-XXXXXX";
	volatile int caught = 0;
	struct blk_guard g;
	char *fmap;
	int i, fd;

	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
	ck_assert_int_eq(blk_guard_install(), 0);
	for (i = 0; i < 3; i++) {
		if (BLK_GUARD_FAULTED(&g)) {
			caught++;
			ck_assert_ptr_eq(g.fault_addr, map + pg + 8 * i);
			ck_assert_int_eq(g.fault_signo, SIGSEGV);
			ck_assert_int_eq(g.fault_code, SEGV_ACCERR);
			ck_assert_uint_eq(g.fault_lsb, 12);
			continue;
		}
		blk_guard_arm(&g, map, (size_t)pg * 2);
		map[0] = 1; /* fine */
		(void)*(volatile char *)(map + pg + 8 * i);
		blk_guard_disarm(&g);
		ck_abort_msg("no fault");
	}
	ck_assert_int_eq(caught, 3);

	/* SIGBUS: a shared file mapping past the end of its file */
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, pg), 0);
	fmap = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(fmap, MAP_FAILED);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	caught = 0;
	if (BLK_GUARD_FAULTED(&g)) {
		caught = 1;
		ck_assert_int_eq(g.fault_signo, SIGBUS);
		ck_assert_int_eq(g.fault_code, BUS_ADRERR);
		ck_assert_ptr_eq(g.fault_addr, fmap + 100);
	} else {
		blk_guard_arm(&g, fmap, (size_t)pg);
		(void)*(volatile char *)(fmap + 100);
		blk_guard_disarm(&g);
	}
	ck_assert_int_eq(caught, 1);
	munmap(fmap, (size_t)pg);
	close(fd);
	unlink(path);
	munmap(map, (size_t)pg * 2);
}
END_TEST

/* An address outside any device mapping that faults: a PROT_NONE page of our own. */
static volatile int *outside;

static void make_outside(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	outside = p;
}

/* Run @fn in a child; return how it ended: exit code, or 1000 + signal. */
static int in_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit rl = {0, 0};

		setrlimit(RLIMIT_CORE, &rl);
		fn(arg);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) ? 1000 + WTERMSIG(status) : WEXITSTATUS(status);
}

/*
 * A sparse image on a full filesystem: a store through the mapping (less than
 * a page) into a hole faults with SIGBUS (not poison) and the slow path's
 * pwrite reports ENOSPC; a store of a page or more (written with pwrite on a
 * page-cache mapping) reports ENOSPC directly.  Runs in a child with its own
 * mount namespace holding a 256 KiB tmpfs, which the 64 KiB chunks the
 * mapping's stores populate fill after a few.  Exit codes name the check that
 * failed.
 */
static void nospc_child(void *arg)
{
	const char *dir = arg;
	static unsigned char buf[2 * 1024], back[2 * 1024], big[64 * 1024];
	struct blk_dev_config cfg = {0};
	struct blk_dev *dev;
	struct blk_stats st;
	char img[128], err[256];
	unsigned i, ok = 0, nospc = 0;
	int fd, ret;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=256k") < 0)
		_exit(10);
	snprintf(img, sizeof(img), "%s/img", dir);
	fd = open(img, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		_exit(11);
	close(fd);
	cfg.backend = BLK_BACKEND_PMEM;
	cfg.path = img;
	cfg.flags = BLK_CFG_NO_POISON;
	if (blk_dev_open(&cfg, &dev, err, sizeof(err)))
		_exit(12);
	for (i = 0; i < 16; i++) {
		memset(buf, (int)(i + 1), sizeof(buf));
		ret = blk_write(dev, i * 128, buf, sizeof(buf), 0);
		if (ret == 0)
			ok++;
		else if (ret == -ENOSPC)
			nospc++;
		else
			_exit(13);
	}
	if (!ok || !nospc)
		_exit(14);
	for (i = 0; i < ok; i++) {
		if (blk_read(dev, i * 128, back, sizeof(back), 0) ||
		    !all_bytes(back, sizeof(back), (unsigned char)(i + 1)))
			_exit(15);
	}
	blk_dev_get_stats(dev, &st);
	if (st.faults == 0 || blk_poison_count(dev) != 0)
		_exit(16); /* the fault was seen, and not taken for poison */
	/* the disk is full: a large store fails cleanly too, without a fault */
	memset(big, 0x5a, sizeof(big));
	if (blk_write(dev, 14 * 128 + 64, big, sizeof(big), 0) != -ENOSPC)
		_exit(17);
	if (blk_poison_count(dev) != 0)
		_exit(18);
	blk_dev_close(dev);
	umount(dir);
	_exit(0);
}

START_TEST(test_sparse_image_full_disk)
{
	char dir[] = "/tmp/mendfs-nospc-XXXXXX";

	int ret;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ret = in_child(nospc_child, dir);
	ck_assert_int_eq(rmdir(dir), 0); /* the mount died with the child's namespace */
	ck_assert_int_eq(ret, 0);
}
END_TEST

static void fault_outside_armed(void *arg)
{
	struct blk_guard g;

	if (BLK_GUARD_FAULTED(&g))
		_exit(2);                 /* swallowed: wrong */
	blk_guard_arm(&g, arg, IMG_SIZE); /* over the device mapping */
	*outside = 1;
	_exit(3);
}

static void fault_outside_unarmed(void *arg)
{
	(void)arg;
	*outside = 1;
	_exit(3);
}

static void sigbus_sent(void *arg)
{
	(void)arg;
	kill(getpid(), SIGBUS);
	_exit(3);
}

START_TEST(test_fault_outside_kills)
{
	struct fix f;

	make_outside();
	fix_setup(&f, NULL); /* the guard is installed by the open */
	ck_assert_int_eq(in_child(fault_outside_armed, mapping(&f)), 1000 + SIGSEGV);
	ck_assert_int_eq(in_child(fault_outside_unarmed, &f), 1000 + SIGSEGV);
	ck_assert_int_eq(in_child(sigbus_sent, &f), 1000 + SIGBUS);
	/* and the parent still works */
	ck_assert_int_eq(blk_read(f.dev, 0, f.pat, SECT, 0), 0);
	fix_teardown(&f);
}
END_TEST

static void siginfo_handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	_exit(sig == SIGSEGV && si->si_addr == (void *)outside ? 42 : 4);
}

static void plain_handler(int sig)
{
	_exit(sig == SIGSEGV ? 43 : 4);
}

static void chain_child(void *arg)
{
	bool with_siginfo = arg != NULL;
	struct sigaction sa, cur;

	memset(&sa, 0, sizeof(sa));
	if (with_siginfo) {
		sa.sa_sigaction = siginfo_handler;
		sa.sa_flags = SA_SIGINFO;
	} else {
		sa.sa_handler = plain_handler;
	}
	sigaction(SIGSEGV, &sa, NULL);
	if (blk_guard_install())
		_exit(5);
	sigaction(SIGSEGV, NULL, &cur);
	if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction == siginfo_handler)
		_exit(6); /* the guard was already installed in this process: cannot test */
	*outside = 1;
	_exit(3);
}

/* SIGBUS ignored before the guard: a sent one stays ignored, a real fault still kills. */
static void ignored_child(void *arg)
{
	char path[] = "/tmp/mendfs-guard-XXXXXX";
	volatile char *map;
	int fd;

	signal(SIGBUS, SIG_IGN);
	if (blk_guard_install())
		_exit(5);
	kill(getpid(), SIGBUS);
	if (arg)
		_exit(44); /* survived the sent signal */
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, 4096) < 0)
		_exit(7);
	map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	unlink(path);
	if (map == MAP_FAILED || ftruncate(fd, 0) < 0)
		_exit(8);
	(void)*map; /* past the end of the file: SIGBUS */
	_exit(3);
}

/* Runs only in fork mode, where this test's process has not installed the guard yet. */
START_TEST(test_guard_chains)
{
	ck_assert_int_eq(in_child(ignored_child, (void *)1), 44);
	ck_assert_int_eq(in_child(ignored_child, NULL), 1000 + SIGBUS);
	make_outside();
	ck_assert_int_eq(in_child(chain_child, (void *)1), 42);
	ck_assert_int_eq(in_child(chain_child, NULL), 43);
}
END_TEST

void poison_fault_add(Suite *s, bool forking)
{
	TCase *tc_emu = tcase_create("emulation");
	TCase *tc_guard = tcase_create("guard");

	tcase_add_test(tc_emu, test_emulated_pages_fault);
	tcase_add_test(tc_emu, test_many_ranges);
	tcase_add_test(tc_emu, test_clean_sectors_share_page);
	tcase_add_test(tc_emu, test_protection_races);
	tcase_add_test(tc_emu, test_real_fault_read);
	tcase_add_test(tc_emu, test_direct_load);
	tcase_add_test(tc_emu, test_real_fault_in_slow_path);
	tcase_add_test(tc_emu, test_real_fault_write);
	tcase_add_test(tc_emu, test_sparse_image_full_disk);
	suite_add_tcase(s, tc_emu);
	tcase_add_test(tc_guard, test_guard_catches);
	tcase_add_test(tc_guard, test_fault_outside_kills);
	if (forking)
		tcase_add_test(tc_guard, test_guard_chains);
	suite_add_tcase(s, tc_guard);
}
#endif /* BLK_POISON_CHECKS */
