/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the pmem backend (blk/pmem.c) through the engine: data round
 * trips (random byte-granular writes against a shadow copy, multi-segment
 * bios, merged plugged bios, a merged request as one pwritev/preadv on an
 * image, write-zeroes, two threads), persistence (FLUSH
 * then close then pread the image; reopen), the durability contract on a
 * page-granular mapping (no msync before FLUSH, FLUSH covers every written
 * byte, FUA syncs its own range: msync is interposed by this program to watch
 * it), read-only devices, direct access, and open errors.  Images live in a
 * temporary directory under /tmp and on /dev/shm.
 */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "blk_internal.h"
#include "check_run.h"

/* The guard tests of test_poison explain this; here it keeps both programs alike. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_segv=0:handle_sigbus=0";
}

/*
 * msync interposed: the executable's definition wins over libc's for the
 * engine and libpmem2 alike.  Records every call so the tests can check when
 * the backend syncs and what it covers.
 */
#define MAX_SYNCS 4096
static struct {
	uintptr_t lo, hi;
} syncs[MAX_SYNCS];
static _Atomic unsigned nr_syncs;

static unsigned syncs_so_far(void)
{
	return atomic_load(&nr_syncs);
}

int msync(void *addr, size_t len, int flags)
{
	unsigned i = atomic_fetch_add(&nr_syncs, 1);

	if (i < MAX_SYNCS) {
		syncs[i].lo = (uintptr_t)addr;
		syncs[i].hi = (uintptr_t)addr + len;
	}
	return (int)syscall(SYS_msync, addr, len, flags);
}

/* fdatasync interposed the same way: the backend's FLUSH of what it pwrite()s. */
static _Atomic unsigned nr_fdatasyncs;

int fdatasync(int fd)
{
	atomic_fetch_add(&nr_fdatasyncs, 1);
	return (int)syscall(SYS_fdatasync, fd);
}

/*
 * pwritev and preadv interposed the same way: a request of several large
 * segments on an image is one call (pmem_rq_fd_io), and these count them.
 */
static _Atomic unsigned nr_pwritev, nr_preadv;

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t pos)
{
	atomic_fetch_add(&nr_pwritev, 1);
	return syscall(SYS_pwritev, fd, iov, cnt, (unsigned long)pos, 0ul);
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t pos)
{
	atomic_fetch_add(&nr_preadv, 1);
	return syscall(SYS_preadv, fd, iov, cnt, (unsigned long)pos, 0ul);
}

/* Is [lo, hi) covered by the msync calls numbered from @first on? */
static bool synced(uintptr_t lo, uintptr_t hi, unsigned first)
{
	unsigned n = atomic_load(&nr_syncs), i;
	bool progress = true;

	ck_assert_uint_le(n, MAX_SYNCS);
	while (lo < hi && progress) {
		progress = false;
		for (i = first; i < n; i++) {
			if (syncs[i].lo <= lo && syncs[i].hi > lo) {
				lo = syncs[i].hi;
				progress = true;
			}
		}
	}
	return lo >= hi;
}

static char tmpdir[64];

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/mendfs-pmem-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	char p[512];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, de->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(tmpdir);
}

static void make_image(const char *path, off_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, size), 0);
	close(fd);
}

static struct blk_dev *open_dev(const char *path, unsigned flags)
{
	struct blk_dev_config cfg = {0};
	struct blk_dev *dev = NULL;
	char err[256] = "";
	int ret;

	cfg.backend = BLK_BACKEND_PMEM;
	cfg.path = path;
	cfg.flags = flags | BLK_CFG_NO_POISON;
	ret = blk_dev_open(&cfg, &dev, err, sizeof(err));
	ck_assert_msg(ret == 0, "open %s: %d %s", path, ret, err);
	return dev;
}

/* Byte-addressed synchronous I/O through one bio. */
static int bio_io(struct blk_dev *dev, enum blk_op op, uint64_t pos, void *buf, uint32_t len,
                  unsigned flags)
{
	struct blk_bio bio;

	blk_bio_init(&bio, op, pos >> BLK_SECTOR_SHIFT, buf, len, NULL, NULL);
	bio.byte_off = (uint16_t)(pos & (BLK_SECTOR_SIZE - 1));
	bio.flags = (uint8_t)flags;
	return blk_submit_bio_wait(dev, &bio);
}

static uint64_t rnd_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void fill_random(unsigned char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)rnd();
}

static void *device_base(struct blk_dev *dev)
{
	void *addr = NULL;
	uint64_t bad;

	ck_assert_int_eq(blk_direct_access(dev, 0, 4096, &addr, &bad), 0);
	return addr;
}

/* Random writes of many sizes at byte offsets, read back against a shadow, then after reopen. */
static void roundtrip(const char *img, size_t size)
{
	unsigned char *shadow = calloc(1, size), *buf = malloc(256 * 1024);
	struct blk_dev *dev;
	unsigned i;

	make_image(img, (off_t)size);
	dev = open_dev(img, 0);
	for (i = 0; i < 400; i++) {
		static const uint32_t sizes[] = {1, 7, 511, 512, 513, 4096, 4097, 65536, 131072};
		uint32_t len = sizes[rnd() % (sizeof(sizes) / sizeof(sizes[0]))];
		uint64_t pos = rnd() % (size - len);

		if (i % 3 == 0)
			pos &= ~(uint64_t)(BLK_SECTOR_SIZE - 1);
		fill_random(buf, len);
		ck_assert_int_eq(bio_io(dev, BLK_OP_WRITE, pos, buf, len, 0), 0);
		memcpy(shadow + pos, buf, len);

		/* read back a random range overlapping it */
		pos = pos > 1000 ? pos - rnd() % 1000 : pos;
		len = (uint32_t)(len + 2000 < size - pos ? len + 2000 : size - pos);
		if (len > 256 * 1024)
			len = 256 * 1024;
		memset(buf, 0xa5, len);
		ck_assert_int_eq(bio_io(dev, BLK_OP_READ, pos, buf, len, 0), 0);
		ck_assert_msg(memcmp(buf, shadow + pos, len) == 0, "iteration %u: mismatch", i);
	}
	ck_assert_int_eq(blk_flush(dev), 0);
	blk_dev_close(dev);

	dev = open_dev(img, 0);
	for (i = 0; i < size / (256 * 1024); i++) {
		ck_assert_int_eq(blk_read(dev, i * 512, buf, 256 * 1024, 0), 0);
		ck_assert(memcmp(buf, shadow + (size_t)i * 256 * 1024, 256 * 1024) == 0);
	}
	blk_dev_close(dev);
	free(shadow);
	free(buf);
}

START_TEST(test_roundtrip_tmp)
{
	char img[128];

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	roundtrip(img, 8 << 20);
	rm_tmpdir();
}
END_TEST

START_TEST(test_roundtrip_shm)
{
	char img[128];

	snprintf(img, sizeof(img), "/dev/shm/mendfs-test-pmem-%d", (int)getpid());
	roundtrip(img, 8 << 20);
	unlink(img);
}
END_TEST

START_TEST(test_multi_segment)
{
	static const size_t segw[] = {100, 412, 4096, 1, 511, 3072};
	static const size_t segr[] = {4096, 7, 2000, 89};
	unsigned char src[8192], dst[8192], back[8192];
	struct iovec iov[8];
	struct blk_bio bio;
	struct blk_dev *dev;
	char img[128];
	size_t off = 0, total = 0;
	unsigned i;

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 1 << 20);
	dev = open_dev(img, 0);
	fill_random(src, sizeof(src));
	for (i = 0; i < 6; i++) {
		iov[i].iov_base = src + off;
		iov[i].iov_len = segw[i];
		off += segw[i];
	}
	total = off; /* 8192 */
	blk_bio_init(&bio, BLK_OP_WRITE, 9, NULL, 0, NULL, NULL);
	bio.iov = iov;
	bio.nr_segs = 6;
	bio.len = (uint32_t)total;
	bio.byte_off = 33;
	ck_assert_int_eq(blk_submit_bio_wait(dev, &bio), 0);
	ck_assert_uint_eq(bio.done, total);

	/* read it with a different segmentation */
	memset(dst, 0, sizeof(dst));
	for (i = 0, off = 0; i < 4; i++) {
		iov[i].iov_base = dst + off;
		iov[i].iov_len = segr[i];
		off += segr[i];
	}
	blk_bio_init(&bio, BLK_OP_READ, 9, NULL, 0, NULL, NULL);
	bio.iov = iov;
	bio.nr_segs = 4;
	bio.len = (uint32_t)off;
	bio.byte_off = 33;
	ck_assert_int_eq(blk_submit_bio_wait(dev, &bio), 0);
	ck_assert(memcmp(dst, src, off) == 0);

	/* and as one buffer */
	ck_assert_int_eq(bio_io(dev, BLK_OP_READ, 9 * 512 + 33, back, (uint32_t)total, 0), 0);
	ck_assert(memcmp(back, src, total) == 0);
	blk_dev_close(dev);
	rm_tmpdir();
}
END_TEST

static _Atomic unsigned plugged_done, plugged_errors;

static void count_end_io(struct blk_bio *bio)
{
	if (bio->status)
		atomic_fetch_add(&plugged_errors, 1);
	atomic_fetch_add(&plugged_done, 1);
}

START_TEST(test_plugged_merge)
{
	enum { N = 16, BS = 4096 };
	static unsigned char src[N * BS], dst[N * BS];
	struct blk_bio bios[N];
	struct blk_stats st;
	struct blk_plug plug;
	struct blk_dev *dev;
	char img[128];
	unsigned i;

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 4 << 20);
	dev = open_dev(img, 0);
	fill_random(src, sizeof(src));

	/* contiguous writes under a plug, submitted out of order: back and front merges */
	blk_start_plug(&plug);
	for (i = 0; i < N; i++) {
		unsigned k = i < N / 2 ? N / 2 + i : N - 1 - i; /* 8..15 then 7..0 */

		blk_bio_init(&bios[i], BLK_OP_WRITE, 64 + k * (BS / 512), src + k * BS, BS,
		             count_end_io, NULL);
		blk_submit_bio(dev, &bios[i]);
	}
	blk_finish_plug(&plug);
	/* synchronous backend: everything ended when the plug was flushed */
	ck_assert_uint_eq(atomic_load(&plugged_done), N);
	ck_assert_uint_eq(atomic_load(&plugged_errors), 0);
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_gt(st.merges_back, 0);
	ck_assert_uint_gt(st.merges_front, 0);
	ck_assert_uint_lt(st.requests, N);

	/* merged plugged reads into separate buffers */
	atomic_store(&plugged_done, 0);
	memset(dst, 0, sizeof(dst));
	blk_start_plug(&plug);
	for (i = 0; i < N; i++) {
		blk_bio_init(&bios[i], BLK_OP_READ, 64 + i * (BS / 512), dst + i * BS, BS,
		             count_end_io, NULL);
		blk_submit_bio(dev, &bios[i]);
	}
	blk_finish_plug(&plug);
	ck_assert_uint_eq(atomic_load(&plugged_done), N);
	ck_assert_uint_eq(atomic_load(&plugged_errors), 0);
	ck_assert(memcmp(dst, src, sizeof(src)) == 0);
	blk_dev_close(dev);
	rm_tmpdir();
}
END_TEST

/*
 * Contiguous bios under a plug, @n of @len bytes each from byte @pos, into
 * one request; checks that the engine made exactly @requests requests.
 */
static void plugged_run(struct blk_dev *dev, enum blk_op op, uint64_t pos, unsigned char *buf,
                        unsigned n, uint32_t len, uint64_t requests)
{
	struct blk_bio bios[16];
	struct blk_stats st0, st1;
	struct blk_plug plug;
	unsigned i;

	ck_assert_uint_le(n, 16);
	atomic_store(&plugged_done, 0);
	atomic_store(&plugged_errors, 0);
	blk_dev_get_stats(dev, &st0);
	blk_start_plug(&plug);
	for (i = 0; i < n; i++) {
		blk_bio_init(&bios[i], op, (pos + (uint64_t)i * len) >> BLK_SECTOR_SHIFT,
		             buf + (size_t)i * len, len, count_end_io, NULL);
		blk_submit_bio(dev, &bios[i]);
	}
	blk_finish_plug(&plug);
	ck_assert_uint_eq(atomic_load(&plugged_done), n);
	ck_assert_uint_eq(atomic_load(&plugged_errors), 0);
	blk_dev_get_stats(dev, &st1);
	ck_assert_uint_eq(st1.requests - st0.requests, requests);
}

/*
 * On an image, a request of several segments of a page or more is one
 * pwritev (of 64 KiB or more, one preadv), with the bytes where they belong;
 * smaller segments still go one by one, through the mapping.
 */
START_TEST(test_fd_batched)
{
	enum { SZ = 128 * 1024 };
	static unsigned char src[SZ], dst[SZ], file[SZ];
	struct blk_dev *dev;
	char img[128];
	int fd;

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 4 << 20);
	dev = open_dev(img, 0); /* requests of up to 128 KiB */
	fill_random(src, sizeof(src));

	/* 8 writes of 16 KiB: one request, one pwritev */
	plugged_run(dev, BLK_OP_WRITE, 1 << 20, src, 8, SZ / 8, 1);
	ck_assert_uint_eq(atomic_load(&nr_pwritev), 1);
	fd = open(img, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, file, SZ, 1 << 20), SZ);
	ck_assert(memcmp(file, src, SZ) == 0);

	/* 2 reads of 64 KiB: one request, one preadv */
	plugged_run(dev, BLK_OP_READ, 1 << 20, dst, 2, SZ / 2, 1);
	ck_assert_uint_eq(atomic_load(&nr_preadv), 1);
	ck_assert(memcmp(dst, src, SZ) == 0);

	/* 8 reads of 16 KiB (below the pread size) and 16 writes of 512 bytes: no vector call */
	memset(dst, 0, sizeof(dst));
	plugged_run(dev, BLK_OP_READ, 1 << 20, dst, 8, SZ / 8, 1);
	ck_assert(memcmp(dst, src, SZ) == 0);
	fill_random(src, 8192);
	plugged_run(dev, BLK_OP_WRITE, 2 << 20, src, 16, 512, 1);
	ck_assert_uint_eq(atomic_load(&nr_pwritev), 1);
	ck_assert_uint_eq(atomic_load(&nr_preadv), 1);
	ck_assert_int_eq(blk_read(dev, (2 << 20) >> BLK_SECTOR_SHIFT, dst, 8192, 0), 0);
	ck_assert(memcmp(dst, src, 8192) == 0);
	close(fd);
	blk_dev_close(dev);
	rm_tmpdir();
}
END_TEST

START_TEST(test_write_zeroes)
{
	static unsigned char src[65536], dst[65536];
	struct blk_bio bio;
	struct blk_dev *dev;
	char img[128];
	unsigned i;

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 1 << 20);
	dev = open_dev(img, 0);
	fill_random(src, sizeof(src));
	ck_assert_int_eq(blk_write(dev, 0, src, sizeof(src), 0), 0);
	/* zero bytes [1000, 1000 + 20000), byte-granular */
	blk_bio_init(&bio, BLK_OP_WRITE_ZEROES, 1000 / 512, NULL, 20000, NULL, NULL);
	bio.byte_off = 1000 % 512;
	ck_assert_int_eq(blk_submit_bio_wait(dev, &bio), 0);
	ck_assert_int_eq(blk_read(dev, 0, dst, sizeof(dst), 0), 0);
	for (i = 0; i < sizeof(dst); i++) {
		unsigned char want = i >= 1000 && i < 21000 ? 0 : src[i];

		ck_assert_msg(dst[i] == want, "byte %u: %u != %u", i, dst[i], want);
	}
	blk_dev_close(dev);
	rm_tmpdir();
}
END_TEST

/*
 * A page-granular image: writes make no msync; FLUSH syncs every written byte
 * (an msync of what went through the mapping, stores of less than a page; an
 * fdatasync for what went through pwrite, a page or more); FUA its own.
 */
START_TEST(test_flush_persists)
{
	static unsigned char src[3 << 20], back[3 << 20];
	struct blk_dev_info info;
	struct blk_dev *dev;
	uintptr_t base;
	unsigned before, fsyncs, i;
	char img[128];
	int fd;

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 4 << 20);
	dev = open_dev(img, 0);
	blk_dev_get_info(dev, &info);
	ck_assert(info.byte_granular);
	ck_assert_uint_eq(info.size, 4 << 20);
	base = (uintptr_t)device_base(dev);
	fill_random(src, sizeof(src));

	before = syncs_so_far();
	fsyncs = atomic_load(&nr_fdatasyncs);
	/*
	 * Scattered pieces: even ones 32 KiB (pwrite), odd ones 2 KiB (through
	 * the mapping), some straddling 64 KiB chunks.
	 */
	for (i = 0; i < 96; i++) {
		unsigned k = (i * 37) % 96;

		ck_assert_int_eq(
		        blk_write(dev, k * 64 + 8, src + k * 32768, k % 2 ? 2048 : 32768, 0), 0);
	}
	/* and a tiny unaligned one past the pieces (they end at 3 MiB + 4 KiB) */
	ck_assert_int_eq(bio_io(dev, BLK_OP_WRITE, 3 * 1024 * 1024 + 8192 + 5, src, 77, 0), 0);
	ck_assert_uint_eq(syncs_so_far(), before);              /* no msync on the write path */
	ck_assert_uint_eq(atomic_load(&nr_fdatasyncs), fsyncs); /* nor fdatasync */

	ck_assert_int_eq(blk_flush(dev), 0);
	ck_assert_uint_gt(syncs_so_far(), before);
	ck_assert_uint_eq(atomic_load(&nr_fdatasyncs), fsyncs + 1); /* the pwrite()s */
	for (i = 1; i < 96; i += 2) {
		uintptr_t lo = base + (uintptr_t)i * 32768 + 8 * 512;

		ck_assert_msg(synced(lo, lo + 2048, before), "piece %u not synced", i);
	}
	ck_assert(synced(base + 3 * 1024 * 1024 + 8197, base + 3 * 1024 * 1024 + 8274, before));
	/* nothing dirty any more: a second FLUSH syncs nothing */
	before = syncs_so_far();
	fsyncs = atomic_load(&nr_fdatasyncs);
	ck_assert_int_eq(blk_flush(dev), 0);
	ck_assert_uint_eq(syncs_so_far(), before);
	ck_assert_uint_eq(atomic_load(&nr_fdatasyncs), fsyncs);

	/* FUA: synced before the bio completes, just its range */
	ck_assert_int_eq(bio_io(dev, BLK_OP_WRITE, 2 * 1024 * 1024 + 100, src, 5000, BLK_BIO_FUA),
	                 0);
	ck_assert(synced(base + 2 * 1024 * 1024 + 100, base + 2 * 1024 * 1024 + 5100, before));
	blk_dev_close(dev);

	/* the image file holds it */
	fd = open(img, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, back, sizeof(back), 8 * 512), (ssize_t)sizeof(back));
	for (i = 0; i < 96; i++) {
		size_t n = i % 2 ? 2048 : 32768;
		size_t o = (size_t)i * 32768, lo = o + 8 * 512, hi = lo + n;

		if (hi > 2 * 1024 * 1024 + 100 && lo < 2 * 1024 * 1024 + 5100)
			continue; /* overwritten by the FUA write */
		ck_assert_msg(memcmp(back + o, src + o, n) == 0, "piece %u", i);
	}
	ck_assert_int_eq(pread(fd, back, 5000, 2 * 1024 * 1024 + 100), 5000);
	ck_assert(memcmp(back, src, 5000) == 0);
	close(fd);
	rm_tmpdir();
}
END_TEST

START_TEST(test_read_only)
{
	unsigned char src[8192], dst[8192];
	struct blk_dev_info info;
	struct blk_dev *dev;
	char img[128];
	int fd;

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 1 << 20);
	fill_random(src, sizeof(src));
	fd = open(img, O_WRONLY);
	ck_assert_int_eq(pwrite(fd, src, sizeof(src), 4096), (ssize_t)sizeof(src));
	close(fd);
	ck_assert_int_eq(chmod(img, 0444), 0); /* root ignores it; the open mode is what counts */

	dev = open_dev(img, BLK_CFG_READONLY);
	blk_dev_get_info(dev, &info);
	ck_assert(info.read_only);
	ck_assert_int_eq(blk_read(dev, 8, dst, sizeof(dst), 0), 0);
	ck_assert(memcmp(dst, src, sizeof(src)) == 0);
	ck_assert_int_eq(blk_write(dev, 8, dst, sizeof(dst), 0), -EROFS);
	ck_assert_int_eq(bio_io(dev, BLK_OP_WRITE_ZEROES, 4096, NULL, 512, 0), -EROFS);
	ck_assert_int_eq(blk_flush(dev), 0);
	/* the backend refuses on its own too (slow path entry) */
	ck_assert_int_eq(dev->ops->write_sync(dev, 4096, dst, 512), -EROFS);
	blk_dev_close(dev);

	fd = open(img, O_RDONLY);
	ck_assert_int_eq(pread(fd, dst, sizeof(dst), 4096), (ssize_t)sizeof(dst));
	ck_assert(memcmp(dst, src, sizeof(src)) == 0);
	close(fd);
	rm_tmpdir();
}
END_TEST

START_TEST(test_direct_access)
{
	unsigned char src[10000];
	struct blk_dev_info info;
	struct blk_dev *dev;
	void *addr = NULL;
	uint64_t bad;
	char img[128];

	make_tmpdir();
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	make_image(img, 1 << 20);
	dev = open_dev(img, 0);
	blk_dev_get_info(dev, &info);
	ck_assert(info.direct_access);
	fill_random(src, sizeof(src));
	ck_assert_int_eq(bio_io(dev, BLK_OP_WRITE, 123457, src, sizeof(src), 0), 0);
	ck_assert_int_eq(blk_direct_access(dev, 123457, sizeof(src), &addr, &bad), 0);
	ck_assert(memcmp(addr, src, sizeof(src)) == 0);
	/* it is the mapping: a write shows through it */
	src[0] ^= 0xff;
	ck_assert_int_eq(bio_io(dev, BLK_OP_WRITE, 123457, src, 1, 0), 0);
	ck_assert_uint_eq(*(unsigned char *)addr, src[0]);
	ck_assert_int_eq(blk_direct_access(dev, (1 << 20) - 10, 11, &addr, &bad), -EINVAL);
	ck_assert_int_eq(blk_direct_access(dev, 1 << 20, 1, &addr, &bad), -EINVAL);
	blk_dev_close(dev);
	rm_tmpdir();
}
END_TEST

static void expect_open_error(const char *path, unsigned flags, int want, const char *needle)
{
	struct blk_dev_config cfg = {0};
	struct blk_dev *dev = NULL;
	char err[256] = "";
	int ret;

	cfg.backend = BLK_BACKEND_PMEM;
	cfg.path = path;
	cfg.flags = flags;
	ret = blk_dev_open(&cfg, &dev, err, sizeof(err));
	ck_assert_msg(ret == want, "%s: got %d (%s), want %d", path, ret, err, want);
	ck_assert_ptr_null(dev);
	ck_assert_msg(strstr(err, path) != NULL, "message '%s' does not name %s", err, path);
	ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
}

START_TEST(test_open_errors)
{
	char p[128];

	make_tmpdir();
	snprintf(p, sizeof(p), "%s/small", tmpdir);
	make_image(p, 4095);
	expect_open_error(p, 0, -EINVAL, "too small");
	make_image(p, 0);
	expect_open_error(p, 0, -EINVAL, "too small");
	expect_open_error(tmpdir, 0, -EINVAL, "regular file or a devdax");
	expect_open_error(tmpdir, BLK_CFG_READONLY, -EINVAL, "regular file or a devdax");
	snprintf(p, sizeof(p), "%s/missing", tmpdir);
	expect_open_error(p, 0, -ENOENT, "No such file");
	/* /dev/null: a character device, not devdax; libpmem2 says why */
	expect_open_error("/dev/null", 0, -EINVAL, "devdax");
	/* exactly 4 KiB is enough */
	snprintf(p, sizeof(p), "%s/small", tmpdir);
	make_image(p, 4096);
	blk_dev_close(open_dev(p, 0));
	rm_tmpdir();
}
END_TEST

struct thr_arg {
	struct blk_dev *dev;
	uint64_t base; /* sector */
	int ok;
};

static void *thr_rw(void *p)
{
	struct thr_arg *a = p;
	unsigned char *src = malloc(1 << 20), *dst = malloc(1 << 20);
	uint64_t st = a->base * 2654435761u + 1;
	unsigned i, j;

	a->ok = 1;
	for (i = 0; i < 20 && a->ok; i++) {
		for (j = 0; j < (1 << 20); j++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			src[j] = (unsigned char)(st >> 56);
		}
		for (j = 0; j < 16; j++)
			if (blk_write(a->dev, a->base + j * 128, src + j * 65536, 65536, 0))
				a->ok = 0;
		if (blk_flush(a->dev) || blk_read(a->dev, a->base, dst, 1 << 20, 0) ||
		    memcmp(src, dst, 1 << 20))
			a->ok = 0;
	}
	free(src);
	free(dst);
	return NULL;
}

START_TEST(test_threads)
{
	struct thr_arg a[2];
	pthread_t t[2];
	struct blk_dev *dev;
	char img[128];
	unsigned i;

	snprintf(img, sizeof(img), "/dev/shm/mendfs-test-pmem-thr-%d", (int)getpid());
	make_image(img, 4 << 20);
	dev = open_dev(img, 0);
	for (i = 0; i < 2; i++) {
		a[i].dev = dev;
		a[i].base = i * 2048;
		ck_assert_int_eq(pthread_create(&t[i], NULL, thr_rw, &a[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(a[i].ok, "thread %u saw wrong data", i);
	}
	blk_dev_close(dev);
	unlink(img);
}
END_TEST

static Suite *pmem_suite(void)
{
	Suite *s = suite_create("pmem");
	TCase *tc = tcase_create("io");
	TCase *tc_dur = tcase_create("durability");
	TCase *tc_open = tcase_create("open");

	tcase_add_test(tc, test_roundtrip_tmp);
	tcase_add_test(tc, test_roundtrip_shm);
	tcase_add_test(tc, test_multi_segment);
	tcase_add_test(tc, test_plugged_merge);
	tcase_add_test(tc, test_fd_batched);
	tcase_add_test(tc, test_write_zeroes);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	tcase_add_test(tc_dur, test_flush_persists);
	suite_add_tcase(s, tc_dur);
	tcase_add_test(tc_open, test_read_only);
	tcase_add_test(tc_open, test_direct_access);
	tcase_add_test(tc_open, test_open_errors);
	suite_add_tcase(s, tc_open);
	return s;
}

int main(void)
{
	return check_run(pmem_suite());
}
