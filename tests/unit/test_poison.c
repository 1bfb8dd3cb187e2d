/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of poison handling (blk/slowpath.c, blk/guard.c and the pmem
 * backend's emulation) through the real engine: an image with a known
 * pattern, an emulation file written by the test, blk_dev_open().
 *
 * Reads: a normal read stops at the first poisoned sector with the exact clean
 * prefix and not one byte more; a recovery read zero-fills exactly the
 * poisoned sectors and reports them.  Writes: whole-sector overwrite and
 * write-zeroes clear (table and file), a partial one fails and touches
 * nothing unless made with recovery, FUA syncs.  Emulation: poisoned pages
 * really fault, clean sectors sharing them stay readable and writable, a page
 * made inaccessible behind the engine's back becomes recorded poison and the
 * process lives.  Guard: catches inside its range, kills outside it, chains
 * to a previous handler.
 *
 * ASan: this program runs with handle_segv=0 and handle_sigbus=0 (see
 * __asan_default_options below), so that the guard sees the same signal
 * dispositions as in the daemon (SIG_DFL before it) and "a fault outside the
 * mapping kills" means killed by the signal, not ASan's exit(1).  Chaining to
 * a previous handler is tested with a handler the test installs itself.
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blk_internal.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_segv=0:handle_sigbus=0";
}

/* fdatasync interposed: the backend must sync what it wrote through the fd. */
static _Atomic unsigned nr_fdatasyncs;

int fdatasync(int fd)
{
	atomic_fetch_add(&nr_fdatasyncs, 1);
	return (int)syscall(SYS_fdatasync, fd);
}

#define IMG_SIZE (1u << 20)
#define PAGE     4096u
#define SECT     BLK_SECTOR_SIZE

struct fix {
	char dir[64];
	char img[128];
	char bb[160];
	unsigned char *pat; /* the image's content at open */
	struct blk_dev *dev;
};

static unsigned char pattern_byte(size_t i)
{
	/* never zero, so a zero-filled byte is always told apart */
	return (unsigned char)(1 + (i * 131 + (i >> 9) * 7) % 255);
}

static void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void dev_open(struct fix *f)
{
	struct blk_dev_config cfg = {0};
	char err[256] = "";
	int ret;

	cfg.backend = BLK_BACKEND_PMEM;
	cfg.path = f->img;
	cfg.badblocks_path = f->bb;
	ret = blk_dev_open(&cfg, &f->dev, err, sizeof(err));
	ck_assert_msg(ret == 0, "open: %d %s", ret, err);
}

/* A 1 MiB image holding the pattern; @bbtext the emulation file (NULL: none). */
static void fix_setup(struct fix *f, const char *bbtext)
{
	size_t i;

	memset(f, 0, sizeof(*f));
	strcpy(f->dir, "/tmp/mendfs-poison-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(f->img, sizeof(f->img), "%s/img", f->dir);
	snprintf(f->bb, sizeof(f->bb), "%s/img.badblocks", f->dir);
	f->pat = malloc(IMG_SIZE);
	for (i = 0; i < IMG_SIZE; i++)
		f->pat[i] = pattern_byte(i);
	write_file(f->img, f->pat, IMG_SIZE);
	if (bbtext)
		write_file(f->bb, bbtext, strlen(bbtext));
	dev_open(f);
}

static void fix_teardown(struct fix *f)
{
	DIR *d;
	struct dirent *de;
	char p[512];

	if (f->dev)
		blk_dev_close(f->dev);
	free(f->pat);
	d = opendir(f->dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", f->dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
}

/* One bio, byte addressed, waited for. */
static int bio_io(struct blk_dev *dev, struct blk_bio *bio, enum blk_op op, uint64_t pos, void *buf,
                  uint32_t len, unsigned flags)
{
	blk_bio_init(bio, op, pos / SECT, buf, len, NULL, NULL);
	bio->byte_off = (uint16_t)(pos % SECT);
	bio->flags = (uint8_t)flags;
	return blk_submit_bio_wait(dev, bio);
}

/* The emulation file as it is on disk now. */
static unsigned read_bb_file(const char *path, struct blk_range *out, unsigned max)
{
	FILE *fp = fopen(path, "r");
	char line[256];
	unsigned n = 0;

	if (!fp)
		return 0;
	while (fgets(line, sizeof(line), fp)) {
		char *p = line;
		unsigned long long s, c;

		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		ck_assert_int_eq(sscanf(p, "%llu %llu", &s, &c), 2);
		ck_assert_uint_lt(n, max);
		out[n].sector = s;
		out[n].nr = c;
		n++;
	}
	fclose(fp);
	return n;
}

static void pread_image(const struct fix *f, void *buf, size_t len, off_t pos)
{
	int fd = open(f->img, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, pos), (ssize_t)len);
	close(fd);
}

static bool all_bytes(const unsigned char *p, size_t len, unsigned char v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

static void get_stats(struct fix *f, struct blk_stats *st)
{
	blk_dev_get_stats(f->dev, st);
}

/* ---- tests that hold in every build ---------------------------------- */

START_TEST(test_table_and_file)
{
	struct blk_range r[8];
	struct fix f;
	unsigned total;

	fix_setup(&f, "# two ranges\n21 1\n\n100 4\n");
	ck_assert_uint_eq(blk_poison_count(f.dev), 2);
	ck_assert_uint_eq(blk_poison_lookup(f.dev, 0, 2048, r, 8, &total), 2);
	ck_assert_uint_eq(r[0].sector, 21);
	ck_assert_uint_eq(r[0].nr, 1);
	ck_assert_uint_eq(r[1].sector, 100);
	ck_assert_uint_eq(r[1].nr, 4);
	ck_assert_int_eq(blk_poison_add(f.dev, 500, 3), 0);
	ck_assert_int_eq(blk_poison_clear(f.dev, 100, 4), 0);
	ck_assert_uint_eq(read_bb_file(f.bb, r, 8), 2);
	ck_assert_uint_eq(r[0].sector, 21);
	ck_assert_uint_eq(r[1].sector, 500);
	ck_assert_uint_eq(r[1].nr, 3);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_clean_roundtrip)
{
	unsigned char buf[3 * PAGE];
	struct blk_stats st;
	struct blk_bio bio;
	struct fix f;

	fix_setup(&f, NULL);
	ck_assert_int_eq(blk_read(f.dev, 8, buf, sizeof(buf), 0), 0);
	ck_assert(memcmp(buf, f.pat + 8 * SECT, sizeof(buf)) == 0);
	memset(buf, 0x3c, sizeof(buf));
	ck_assert_int_eq(blk_write(f.dev, 8, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_WRITE, 8 * SECT + 1, buf, 1, BLK_BIO_FUA), 0);
	ck_assert_int_eq(blk_flush(f.dev), 0);
	get_stats(&f, &st);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(st.poison_hits, 0);
	blk_dev_close(f.dev);
	f.dev = NULL;
	pread_image(&f, buf, sizeof(buf), 8 * SECT);
	ck_assert(all_bytes(buf, sizeof(buf), 0x3c));
	fix_teardown(&f);
}
END_TEST

#if !BLK_POISON_CHECKS
/* Without the checks compiled in, the table is kept but I/O does not consult it. */
START_TEST(test_unchecked_io_ignores_poison)
{
	unsigned char buf[SECT];
	struct fix f;

	fix_setup(&f, "21 1\n");
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	ck_assert_int_eq(blk_read(f.dev, 21, buf, SECT, 0), 0);
	ck_assert(memcmp(buf, f.pat + 21 * SECT, SECT) == 0);
	fix_teardown(&f);
}
END_TEST
#endif

#if BLK_POISON_CHECKS
/* ---- reads ------------------------------------------------------------ */

START_TEST(test_read_stops_at_poison)
{
	static unsigned char buf[8192];
	struct blk_stats st;
	struct blk_bio bio;
	struct fix f;

	fix_setup(&f, "21 1\n");

	/* sectors 16..31: clean 16..20, then poison */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 16 * SECT, buf, 8192, 0), -EIO);
	ck_assert_uint_eq(bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(bio.bad_sector, 21);
	ck_assert_uint_eq(bio.done, 5 * SECT);
	ck_assert(memcmp(buf, f.pat + 16 * SECT, 5 * SECT) == 0);
	ck_assert(all_bytes(buf + 5 * SECT, sizeof(buf) - 5 * SECT, 0xee));

	/* byte-granular start inside sector 18 */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 18 * SECT + 100, buf, 4000, 0), -EIO);
	ck_assert_uint_eq(bio.bad_sector, 21);
	ck_assert_uint_eq(bio.done, 21 * SECT - (18 * SECT + 100));
	ck_assert(memcmp(buf, f.pat + 18 * SECT + 100, bio.done) == 0);
	ck_assert(all_bytes(buf + bio.done, 4000 - bio.done, 0xee));

	/* starting inside the poisoned sector: nothing */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 21 * SECT + 7, buf, 100, 0), -EIO);
	ck_assert_uint_eq(bio.bad_sector, 21);
	ck_assert_uint_eq(bio.done, 0);
	ck_assert(all_bytes(buf, 100, 0xee));

	get_stats(&f, &st);
	ck_assert_uint_eq(st.media_errors, 3);
	ck_assert_uint_eq(st.poison_hits, 3);
	ck_assert_uint_ge(st.errors, 3);
	ck_assert_uint_eq(st.faults, 0);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_recovery_read)
{
	static unsigned char buf[64 * SECT];
	struct blk_range ranges[8];
	struct blk_recovery rec = {.ranges = ranges, .max = 8};
	struct blk_stats st;
	struct blk_bio bio;
	struct fix f;
	size_t i;

	fix_setup(&f, "21 1\n40 3\n63 1\n");
	memset(buf, 0xee, sizeof(buf));
	blk_bio_init(&bio, BLK_OP_READ, 0, buf, sizeof(buf), NULL, NULL);
	bio.flags = BLK_BIO_RECOVERY;
	bio.rec = &rec;
	ck_assert_int_eq(blk_submit_bio_wait(f.dev, &bio), 0);
	ck_assert_uint_eq(bio.done, sizeof(buf));
	ck_assert_uint_eq(rec.nr, 3);
	ck_assert(!rec.truncated);
	ck_assert_uint_eq(rec.zeroed, 5);
	ck_assert_uint_eq(ranges[0].sector, 21);
	ck_assert_uint_eq(ranges[0].nr, 1);
	ck_assert_uint_eq(ranges[1].sector, 40);
	ck_assert_uint_eq(ranges[1].nr, 3);
	ck_assert_uint_eq(ranges[2].sector, 63);
	ck_assert_uint_eq(ranges[2].nr, 1);
	for (i = 0; i < sizeof(buf); i++) {
		size_t s = i / SECT;
		bool poisoned = s == 21 || (s >= 40 && s < 43) || s == 63;

		ck_assert_msg(buf[i] == (poisoned ? 0 : f.pat[i]), "byte %zu", i);
	}
	get_stats(&f, &st);
	ck_assert_uint_eq(st.recovered_sectors, 5);
	ck_assert_uint_eq(st.media_errors, 0);

	/* no record: the data is the same */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 0, buf, sizeof(buf), BLK_BIO_RECOVERY),
	                 0);
	ck_assert(all_bytes(buf + 40 * SECT, 3 * SECT, 0));
	ck_assert(memcmp(buf, f.pat, 21 * SECT) == 0);

	/* a record too small: truncated, the count still whole */
	memset(&rec, 0, sizeof(rec));
	rec.ranges = ranges;
	rec.max = 2;
	blk_bio_init(&bio, BLK_OP_READ, 0, buf, sizeof(buf), NULL, NULL);
	bio.flags = BLK_BIO_RECOVERY;
	bio.rec = &rec;
	ck_assert_int_eq(blk_submit_bio_wait(f.dev, &bio), 0);
	ck_assert_uint_eq(rec.nr, 2);
	ck_assert(rec.truncated);
	ck_assert_uint_eq(rec.zeroed, 5);

	/* byte-granular, starting inside sector 40: ranges clipped to the bio */
	memset(&rec, 0, sizeof(rec));
	rec.ranges = ranges;
	rec.max = 8;
	memset(buf, 0xee, sizeof(buf));
	blk_bio_init(&bio, BLK_OP_READ, 40, buf, 2000, NULL, NULL);
	bio.byte_off = 100;
	bio.flags = BLK_BIO_RECOVERY;
	bio.rec = &rec;
	ck_assert_int_eq(blk_submit_bio_wait(f.dev, &bio), 0);
	ck_assert_uint_eq(rec.nr, 1);
	ck_assert_uint_eq(ranges[0].sector, 40);
	ck_assert_uint_eq(ranges[0].nr, 3);
	ck_assert(all_bytes(buf, 43 * SECT - (40 * SECT + 100), 0));
	ck_assert(memcmp(buf + 43 * SECT - (40 * SECT + 100), f.pat + 43 * SECT,
	                 2000 - (43 * SECT - (40 * SECT + 100))) == 0);
	fix_teardown(&f);
}
END_TEST

/* Plugged recovery reads merged into one request: each bio still gets its own record. */
static _Atomic unsigned ended;

static void count_end(struct blk_bio *bio)
{
	(void)bio;
	atomic_fetch_add(&ended, 1);
}

START_TEST(test_recovery_read_merged)
{
	static unsigned char buf[2][16 * SECT];
	struct blk_range ranges[2][4];
	struct blk_recovery rec[2];
	struct blk_bio bio[2];
	struct blk_plug plug;
	struct fix f;
	unsigned i;

	fix_setup(&f, "21 1\n40 3\n");
	blk_start_plug(&plug);
	for (i = 0; i < 2; i++) {
		memset(&rec[i], 0, sizeof(rec[i]));
		rec[i].ranges = ranges[i];
		rec[i].max = 4;
		blk_bio_init(&bio[i], BLK_OP_READ, 16 + i * 16, buf[i], 16 * SECT, count_end, NULL);
		bio[i].flags = BLK_BIO_RECOVERY;
		bio[i].rec = &rec[i];
		blk_submit_bio(f.dev, &bio[i]);
	}
	blk_finish_plug(&plug);
	ck_assert_uint_eq(atomic_load(&ended), 2);
	ck_assert_uint_eq(bio[0].status, BLK_STS_OK);
	ck_assert_uint_eq(bio[1].status, BLK_STS_OK);
	ck_assert_uint_eq(rec[0].nr, 1);
	ck_assert_uint_eq(ranges[0][0].sector, 21);
	ck_assert_uint_eq(rec[1].nr, 1);
	ck_assert_uint_eq(ranges[1][0].sector, 40);
	ck_assert_uint_eq(ranges[1][0].nr, 3);
	ck_assert(all_bytes(buf[0] + 5 * SECT, SECT, 0));
	ck_assert(memcmp(buf[0], f.pat + 16 * SECT, 5 * SECT) == 0);
	ck_assert(memcmp(buf[1] + 11 * SECT, f.pat + 43 * SECT, 5 * SECT) == 0);
	fix_teardown(&f);
}
END_TEST

/* ---- writes ----------------------------------------------------------- */

START_TEST(test_overwrite_clears)
{
	unsigned char data[8 * PAGE], back[8 * PAGE];
	struct blk_range r[4];
	struct blk_stats st;
	struct fix f;
	void *addr;
	uint64_t bad;

	fix_setup(&f, "21 2\n30 1\n");
	memset(data, 0x5a, sizeof(data));
	ck_assert_int_eq(blk_write(f.dev, 21, data, 2 * SECT, 0), 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	ck_assert_uint_eq(read_bb_file(f.bb, r, 4), 1);
	ck_assert_uint_eq(r[0].sector, 30);
	ck_assert_int_eq(blk_read(f.dev, 16, back, 16 * SECT, 0), -EIO); /* 30 is still bad */
	ck_assert_int_eq(blk_read(f.dev, 21, back, 2 * SECT, 0), 0);
	ck_assert(all_bytes(back, 2 * SECT, 0x5a));

	/* a write spanning clean and poisoned sectors clears what it covers */
	memset(data, 0x6b, sizeof(data));
	ck_assert_int_eq(blk_write(f.dev, 16, data, 2 * PAGE, 0), 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	ck_assert_uint_eq(read_bb_file(f.bb, r, 4), 0);
	ck_assert_int_eq(blk_read(f.dev, 16, back, 2 * PAGE, 0), 0);
	ck_assert(all_bytes(back, 2 * PAGE, 0x6b));
	get_stats(&f, &st);
	ck_assert_uint_eq(st.poison_cleared, 3);
	ck_assert_uint_eq(st.media_errors, 1);

	/* the pages are plain mapping again */
	ck_assert_int_eq(blk_direct_access(f.dev, 16 * SECT, 2 * PAGE, &addr, &bad), 0);
	ck_assert(all_bytes(addr, 2 * PAGE, 0x6b));

	/* and durable */
	ck_assert_int_eq(blk_flush(f.dev), 0);
	blk_dev_close(f.dev);
	f.dev = NULL;
	pread_image(&f, back, 2 * PAGE, 16 * SECT);
	ck_assert(all_bytes(back, 2 * PAGE, 0x6b));
	fix_teardown(&f);
}
END_TEST

/* A write that covers a poisoned sector in part fails and changes nothing. */
START_TEST(test_partial_overwrite_fails)
{
	unsigned char data[2 * SECT], back[4 * SECT];
	struct blk_range r[4];
	struct blk_bio bio;
	struct fix f;

	fix_setup(&f, "21 1\n");
	memset(data, 0x77, sizeof(data));
	/* 100 bytes inside sector 21 */
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_WRITE, 21 * SECT + 50, data, 100, 0), -EIO);
	ck_assert_uint_eq(bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(bio.bad_sector, 21);
	ck_assert_uint_eq(bio.done, 0);
	/* sector 20 whole, then the head of 21 */
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_WRITE, 20 * SECT, data, SECT + 100, 0), -EIO);
	ck_assert_uint_eq(bio.bad_sector, 21);
	/* the tail of 21, then 22 whole */
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_WRITE, 21 * SECT + 500, data, 12 + SECT, 0),
	                 -EIO);
	ck_assert_uint_eq(bio.bad_sector, 21);
	/* write-zeroes the same way */
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_WRITE_ZEROES, 21 * SECT + 1, NULL, 10, 0),
	                 -EIO);
	ck_assert_uint_eq(bio.status, BLK_STS_MEDIA);

	/* untouched: table, file, and every byte of 20..23 */
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	ck_assert_uint_eq(read_bb_file(f.bb, r, 4), 1);
	ck_assert_uint_eq(r[0].sector, 21);
	ck_assert_uint_eq(r[0].nr, 1);
	pread_image(&f, back, sizeof(back), 20 * SECT);
	ck_assert(memcmp(back, f.pat + 20 * SECT, sizeof(back)) == 0);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_partial_overwrite_recovery)
{
	unsigned char data[100], back[4 * SECT];
	struct blk_bio bio;
	struct fix f;
	struct blk_range r[4];

	fix_setup(&f, "21 1\n");
	memset(data, 0x77, sizeof(data));
	ck_assert_int_eq(
	        bio_io(f.dev, &bio, BLK_OP_WRITE, 21 * SECT + 50, data, 100, BLK_BIO_RECOVERY), 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	ck_assert_uint_eq(read_bb_file(f.bb, r, 4), 0);
	ck_assert_int_eq(blk_read(f.dev, 20, back, sizeof(back), 0), 0);
	ck_assert(memcmp(back, f.pat + 20 * SECT, SECT) == 0);                /* 20 untouched */
	ck_assert(all_bytes(back + SECT, 50, 0));                             /* lost: zeros */
	ck_assert(all_bytes(back + SECT + 50, 100, 0x77));                    /* the new bytes */
	ck_assert(all_bytes(back + SECT + 150, SECT - 150, 0));               /* lost: zeros */
	ck_assert(memcmp(back + 2 * SECT, f.pat + 22 * SECT, 2 * SECT) == 0); /* 22, 23 */
	fix_teardown(&f);
}
END_TEST

START_TEST(test_write_zeroes_clears)
{
	unsigned char back[8 * SECT];
	struct blk_stats st;
	struct blk_bio bio;
	struct fix f;

	fix_setup(&f, "30 4\n");
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_WRITE_ZEROES, 28 * SECT, NULL, 8 * SECT, 0), 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	ck_assert_int_eq(blk_read(f.dev, 28, back, sizeof(back), 0), 0);
	ck_assert(all_bytes(back, sizeof(back), 0));
	get_stats(&f, &st);
	ck_assert_uint_eq(st.poison_cleared, 4);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_fua_in_slow_path)
{
	unsigned char data[SECT];
	unsigned before;
	struct fix f;

	fix_setup(&f, "21 1\n");
	memset(data, 0x42, sizeof(data));
	/* sector 17 shares a page with the poison: written through the fd, FUA syncs it */
	before = atomic_load(&nr_fdatasyncs);
	ck_assert_int_eq(blk_write(f.dev, 17, data, SECT, BLK_BIO_FUA), 0);
	ck_assert_uint_gt(atomic_load(&nr_fdatasyncs), before);
	/* a whole-sector overwrite of the poison with FUA */
	before = atomic_load(&nr_fdatasyncs);
	ck_assert_int_eq(blk_write(f.dev, 21, data, SECT, BLK_BIO_FUA), 0);
	ck_assert_uint_gt(atomic_load(&nr_fdatasyncs), before);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	fix_teardown(&f);
}
END_TEST

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

/* A store into a page made read-only behind the engine's back: recorded, then healed. */
START_TEST(test_real_fault_write)
{
	unsigned char data[PAGE], back[PAGE];
	struct blk_stats st;
	struct fix f;
	unsigned char *base;

	fix_setup(&f, NULL);
	base = mapping(&f);
	ck_assert_int_eq(mprotect(base + 6 * PAGE, PAGE, PROT_READ), 0);
	memset(data, 0x24, sizeof(data));
	/* covers the whole page: the recorded poison is cleared by this very write */
	ck_assert_int_eq(blk_write(f.dev, 48, data, PAGE, 0), 0);
	get_stats(&f, &st);
	ck_assert_uint_ge(st.faults, 1);
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
 * A sparse image on a full filesystem: a store through the mapping into a
 * hole faults with SIGBUS (not poison) and the slow path's pwrite reports
 * ENOSPC; a large store (64 KiB and more, written with pwrite on a page-cache
 * mapping) reports ENOSPC directly.  Runs in a child with its own mount
 * namespace holding a 256 KiB tmpfs.  Exit codes name the check that failed.
 */
static void nospc_child(void *arg)
{
	const char *dir = arg;
	static unsigned char buf[32 * 1024], back[32 * 1024], big[64 * 1024];
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
#endif /* BLK_POISON_CHECKS */

static Suite *poison_suite(bool forking)
{
	Suite *s = suite_create("poison");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, test_table_and_file);
	tcase_add_test(tc, test_clean_roundtrip);
#if !BLK_POISON_CHECKS
	tcase_add_test(tc, test_unchecked_io_ignores_poison);
	(void)forking;
#endif
	suite_add_tcase(s, tc);
#if BLK_POISON_CHECKS
	TCase *tc_rd = tcase_create("read");
	TCase *tc_wr = tcase_create("write");
	TCase *tc_emu = tcase_create("emulation");
	TCase *tc_guard = tcase_create("guard");

	tcase_add_test(tc_rd, test_read_stops_at_poison);
	tcase_add_test(tc_rd, test_recovery_read);
	tcase_add_test(tc_rd, test_recovery_read_merged);
	suite_add_tcase(s, tc_rd);
	tcase_add_test(tc_wr, test_overwrite_clears);
	tcase_add_test(tc_wr, test_partial_overwrite_fails);
	tcase_add_test(tc_wr, test_partial_overwrite_recovery);
	tcase_add_test(tc_wr, test_write_zeroes_clears);
	tcase_add_test(tc_wr, test_fua_in_slow_path);
	suite_add_tcase(s, tc_wr);
	tcase_add_test(tc_emu, test_emulated_pages_fault);
	tcase_add_test(tc_emu, test_many_ranges);
	tcase_add_test(tc_emu, test_clean_sectors_share_page);
	tcase_add_test(tc_emu, test_protection_races);
	tcase_add_test(tc_emu, test_real_fault_read);
	tcase_add_test(tc_emu, test_real_fault_in_slow_path);
	tcase_add_test(tc_emu, test_real_fault_write);
	tcase_add_test(tc_emu, test_sparse_image_full_disk);
	suite_add_tcase(s, tc_emu);
	tcase_add_test(tc_guard, test_guard_catches);
	tcase_add_test(tc_guard, test_fault_outside_kills);
	if (forking)
		tcase_add_test(tc_guard, test_guard_chains);
	suite_add_tcase(s, tc_guard);
#endif
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(NULL);
	int failed;

	srunner_add_suite(sr, poison_suite(srunner_fork_status(sr) != CK_NOFORK));
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
