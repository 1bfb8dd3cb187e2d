/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of poison handling (blk/slowpath.c, blk/guard.c and the pmem
 * backend's emulation) through the real engine: an image with a known
 * pattern, an emulation file written by the test, blk_dev_open().
 *
 * This file: the table, reads and writes; poison_fault.c: emulation and the
 * guard.  Reads: a normal read stops at the first poisoned sector with the
 * exact clean prefix and not one byte more; a recovery read zero-fills exactly the
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
#include "poison.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_segv=0:handle_sigbus=0";
}

/* fdatasync interposed: the backend must sync what it wrote through the fd. */
_Atomic unsigned nr_fdatasyncs;

int fdatasync(int fd)
{
	atomic_fetch_add(&nr_fdatasyncs, 1);
	return (int)syscall(SYS_fdatasync, fd);
}

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

void fix_setup(struct fix *f, const char *bbtext)
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

void fix_teardown(struct fix *f)
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

int bio_io(struct blk_dev *dev, struct blk_bio *bio, enum blk_op op, uint64_t pos, void *buf,
           uint32_t len, unsigned flags)
{
	blk_bio_init(bio, op, pos / SECT, buf, len, NULL, NULL);
	bio->byte_off = (uint16_t)(pos % SECT);
	bio->flags = (uint8_t)flags;
	return blk_submit_bio_wait(dev, bio);
}

unsigned read_bb_file(const char *path, struct blk_range *out, unsigned max)
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

void pread_image(const struct fix *f, void *buf, size_t len, off_t pos)
{
	int fd = open(f->img, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, pos), (ssize_t)len);
	close(fd);
}

bool all_bytes(const unsigned char *p, size_t len, unsigned char v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

void get_stats(struct fix *f, struct blk_stats *st)
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

/*
 * Reads of 64 KiB or more on an image are pread(2)s of its page cache, not
 * loads through the mapping (pmem_load): the poison check before them is all
 * that stops them.  Known poison deep inside such a read, and latent poison
 * planted in a later range, still fail it at the first bad sector.
 */
START_TEST(test_large_read_stops_at_poison)
{
	static unsigned char buf[256 * 1024];
	struct blk_stats st;
	struct blk_bio bio;
	struct fix f;
	unsigned i;

	fix_setup(&f, "700 2\n");
	/* 128 KiB of clean sectors: one bio, read whole */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 0, buf, 128 * 1024, 0), 0);
	ck_assert(memcmp(buf, f.pat, 128 * 1024) == 0);
	/* 256 KiB from sector 512: poison at 700, 188 sectors in */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(bio_io(f.dev, &bio, BLK_OP_READ, 512 * SECT, buf, sizeof(buf), 0), -EIO);
	ck_assert_uint_eq(bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(bio.bad_sector, 700);
	ck_assert_uint_eq(bio.done, 188 * SECT);
	ck_assert(memcmp(buf, f.pat + 512 * SECT, 188 * SECT) == 0);
	ck_assert(all_bytes(buf + 188 * SECT, sizeof(buf) - 188 * SECT, 0xee));
	/* a recovery read of the same range: every clean byte, zeros for 700-701 */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(
	        bio_io(f.dev, &bio, BLK_OP_READ, 512 * SECT, buf, sizeof(buf), BLK_BIO_RECOVERY),
	        0);
	for (i = 0; i < sizeof(buf) / SECT; i++) {
		if (512 + i == 700 || 512 + i == 701)
			ck_assert(all_bytes(buf + i * SECT, SECT, 0));
		else
			ck_assert_msg(memcmp(buf + i * SECT, f.pat + (512 + i) * SECT, SECT) == 0,
			              "sector %u", 512 + i);
	}
	get_stats(&f, &st);
	ck_assert_uint_eq(st.poison_hits, 2);
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

	tcase_add_test(tc_rd, test_read_stops_at_poison);
	tcase_add_test(tc_rd, test_large_read_stops_at_poison);
	tcase_add_test(tc_rd, test_recovery_read);
	tcase_add_test(tc_rd, test_recovery_read_merged);
	suite_add_tcase(s, tc_rd);
	tcase_add_test(tc_wr, test_overwrite_clears);
	tcase_add_test(tc_wr, test_partial_overwrite_fails);
	tcase_add_test(tc_wr, test_partial_overwrite_recovery);
	tcase_add_test(tc_wr, test_write_zeroes_clears);
	tcase_add_test(tc_wr, test_fua_in_slow_path);
	suite_add_tcase(s, tc_wr);
	poison_fault_add(s, forking);
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
