/* SPDX-License-Identifier: MIT */
/*
 * Latent poison emulation (blk/dispatch.c's latent filter, blk/poison.c)
 * through the real engine, on the pmem and the uring backend: an image with
 * a known pattern and a latent file written by the test.
 *
 * A latent sector is in no table until a read touches it; that read fails
 * with EIO at it and records it as poison (table and emulation file), and the
 * latent file forgets it.  A read beside it finds nothing.  A write over it
 * first makes it good.  Direct access to it fails as poison does.  A latent
 * file that names sectors past the device is refused at open.  A line added
 * to the emulation file after open is found by blk_dev_refresh_badblocks.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blk_internal.h"
#include "check_run.h"

#define IMG_SIZE (1u << 20)
#define SECT     BLK_SECTOR_SIZE

struct fix {
	char dir[64];
	char img[128];
	char bb[160];
	char latent[160];
	unsigned char *pat;
	struct blk_dev *dev;
};

static const enum blk_backend_type backends[] = {BLK_BACKEND_PMEM, BLK_BACKEND_URING};

static void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* The lines of @path that are not comments, joined ("" if none or missing). */
static void read_lines(const char *path, char *out, size_t len)
{
	char line[128];
	size_t used = 0;
	FILE *f = fopen(path, "r");

	out[0] = '\0';
	while (f && fgets(line, sizeof(line), f))
		if (line[0] != '#')
			used += (size_t)snprintf(out + used, len - used, "%s", line);
	if (f)
		fclose(f);
}

static int fix_open(struct fix *f, enum blk_backend_type backend, char *err, size_t errlen)
{
	struct blk_dev_config cfg = {0};

	cfg.backend = backend;
	cfg.path = f->img;
	cfg.badblocks_path = f->bb;
	cfg.latent_path = f->latent;
	cfg.flags = backend == BLK_BACKEND_URING ? BLK_CFG_NO_DIRECT : 0;
	return blk_dev_open(&cfg, &f->dev, err, errlen);
}

/* A 1 MiB image holding the pattern, the latent file @latent. */
static void fix_setup(struct fix *f, enum blk_backend_type backend, const char *latent)
{
	char err[256] = "";
	int ret;

	memset(f, 0, sizeof(*f));
	strcpy(f->dir, "/tmp/mendfs-latent-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(f->img, sizeof(f->img), "%s/img", f->dir);
	snprintf(f->bb, sizeof(f->bb), "%s/img.badblocks", f->dir);
	snprintf(f->latent, sizeof(f->latent), "%s/img.latent", f->dir);
	f->pat = malloc(IMG_SIZE);
	ck_assert_ptr_nonnull(f->pat);
	for (size_t i = 0; i < IMG_SIZE; i++)
		f->pat[i] = (unsigned char)(1 + (i * 131 + (i >> 9) * 7) % 255);
	write_file(f->img, f->pat, IMG_SIZE);
	write_file(f->latent, latent, strlen(latent));
	ret = fix_open(f, backend, err, sizeof(err));
	ck_assert_msg(ret == 0, "open: %d %s", ret, err);
}

static void fix_teardown(struct fix *f)
{
	struct dirent *de;
	char p[512];
	DIR *d;

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

START_TEST(test_read_finds)
{
	unsigned char *buf = aligned_alloc(4096, 4096);
	struct blk_range r;
	char lines[256];
	struct fix f;
	unsigned n;

	fix_setup(&f, backends[_i], "# planted\n21 1\n");
	ck_assert_uint_eq(blk_poison_count(f.dev), 0); /* latent: in no table */
	/* a read beside it (page 0) finds nothing */
	ck_assert_int_eq(blk_read(f.dev, 0, buf, 4096, 0), 0);
	ck_assert_mem_eq(buf, f.pat, 4096);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	/* the read that touches it fails and records it */
	ck_assert_int_eq(blk_read(f.dev, 16, buf, 4096, 0), -EIO);
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	n = blk_poison_lookup(f.dev, 0, IMG_SIZE / SECT, &r, 1, NULL);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(r.sector, 21);
	ck_assert_uint_eq(r.nr, 1);
	read_lines(f.bb, lines, sizeof(lines));
	ck_assert_str_eq(lines, "21 1\n");
	read_lines(f.latent, lines, sizeof(lines));
	ck_assert_str_eq(lines, "");
	/* from now on it is poison like any other: a recovery read zero-fills just it */
	memset(buf, 0xee, 4096);
	ck_assert_int_eq(blk_read(f.dev, 16, buf, 4096, BLK_BIO_RECOVERY), 0);
	ck_assert_mem_eq(buf, f.pat + 16 * SECT, 5 * SECT);
	for (unsigned i = 5 * SECT; i < 6 * SECT; i++)
		ck_assert_uint_eq(buf[i], 0);
	ck_assert_mem_eq(buf + 6 * SECT, f.pat + 22 * SECT, 2 * SECT);
	/* and it outlives the device */
	blk_dev_close(f.dev);
	f.dev = NULL;
	{
		char err[256] = "";

		ck_assert_int_eq(fix_open(&f, backends[_i], err, sizeof(err)), 0);
	}
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	free(buf);
	fix_teardown(&f);
}
END_TEST

/* The notifier's calls during a refresh. */
static struct {
	unsigned calls;
	uint64_t sector, nr;
	enum blk_poison_cause cause;
} seen;

static void note(void *priv, uint64_t sector, uint64_t nr, enum blk_poison_cause cause)
{
	(void)priv;
	seen.calls++;
	seen.sector = sector;
	seen.nr = nr;
	seen.cause = cause;
}

/*
 * blk_dev_refresh_badblocks: a line added to the emulation file after open
 * becomes poison (notifier: only the new part, cause SOURCE), a second call
 * adds nothing, a malformed file fails with -EINVAL and changes nothing.
 */
START_TEST(test_refresh)
{
	unsigned char *buf = aligned_alloc(4096, 4096);
	uint64_t added = 99;
	struct fix f;

	fix_setup(&f, backends[_i], "");
	write_file(f.bb, "8 1\n", 4);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0); /* read at open only */
	blk_dev_set_poison_notify(f.dev, note, NULL);
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(blk_dev_refresh_badblocks(f.dev, &added), 0);
	ck_assert_uint_eq(added, 1);
	ck_assert_uint_eq(seen.calls, 1);
	ck_assert_uint_eq(seen.sector, 8);
	ck_assert_uint_eq(seen.nr, 1);
	ck_assert_int_eq(seen.cause, BLK_POISON_SOURCE);
	ck_assert_int_eq(blk_read(f.dev, 8, buf, 4096, 0), -EIO);
	/* the list grows around what is known: only the new sectors are news */
	write_file(f.bb, "6 4\n40 2\n", 9);
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(blk_dev_refresh_badblocks(f.dev, &added), 0);
	ck_assert_uint_eq(added, 5);
	ck_assert_uint_eq(blk_poison_count(f.dev), 2);
	ck_assert_uint_eq(seen.calls, 3); /* 6, 9, 40..41 */
	ck_assert_uint_eq(seen.sector, 40);
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(blk_dev_refresh_badblocks(f.dev, &added), 0);
	ck_assert_uint_eq(added, 0);
	ck_assert_uint_eq(seen.calls, 0);
	/* a malformed file: an error, the table as it was */
	write_file(f.bb, "6 4\nforty\n", 10);
	ck_assert_int_eq(blk_dev_refresh_badblocks(f.dev, &added), -EINVAL);
	ck_assert_uint_eq(added, 0);
	ck_assert_uint_eq(blk_poison_count(f.dev), 2);
	ck_assert_uint_eq(seen.calls, 0);
	blk_dev_set_poison_notify(f.dev, NULL, NULL);
	free(buf);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_write_heals)
{
	unsigned char *buf = aligned_alloc(4096, 4096), *back = aligned_alloc(4096, 4096);
	char lines[256];
	struct fix f;

	fix_setup(&f, backends[_i], "40 2\n100 1\n");
	memset(buf, 0x5a, 4096);
	/* a write over both sectors of the first range: good again */
	ck_assert_int_eq(blk_write(f.dev, 40, buf, 1024, 0), 0);
	read_lines(f.latent, lines, sizeof(lines));
	ck_assert_str_eq(lines, "100 1\n");
	ck_assert_int_eq(blk_read(f.dev, 40, back, 1024, 0), 0);
	ck_assert_mem_eq(back, buf, 1024);
	ck_assert_uint_eq(blk_poison_count(f.dev), 0);
	/* the other one is still there for the next read */
	ck_assert_int_eq(blk_read(f.dev, 96, back, 4096, 0), -EIO);
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	free(buf);
	free(back);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_direct_access)
{
	uint64_t bad = 0;
	void *addr;
	struct fix f;

	fix_setup(&f, BLK_BACKEND_PMEM, "30 1\n");
	ck_assert_int_eq(blk_direct_access(f.dev, 0, 4096, &addr, &bad), 0);
	ck_assert_int_eq(blk_direct_access(f.dev, 30 * SECT - 100, 200, &addr, &bad), -EIO);
	ck_assert_uint_eq(bad, 30);
	ck_assert_uint_eq(blk_poison_count(f.dev), 1);
	fix_teardown(&f);
}
END_TEST

START_TEST(test_past_the_end)
{
	char err[256] = "", text[64];
	struct fix f;

	fix_setup(&f, BLK_BACKEND_PMEM, "");
	blk_dev_close(f.dev);
	f.dev = NULL;
	snprintf(text, sizeof(text), "%u 8\n", IMG_SIZE / SECT - 4);
	write_file(f.latent, text, strlen(text));
	ck_assert_int_eq(fix_open(&f, BLK_BACKEND_PMEM, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "img.latent") != NULL, "the error does not name the file: %s",
	              err);
	f.dev = NULL;
	fix_teardown(&f);
}
END_TEST

static Suite *latent_suite(void)
{
	Suite *s = suite_create("latent");
	TCase *tc = tcase_create("latent");

	tcase_add_loop_test(tc, test_read_finds, 0, 2);
	tcase_add_loop_test(tc, test_write_heals, 0, 2);
	tcase_add_loop_test(tc, test_refresh, 0, 2);
	tcase_add_test(tc, test_direct_access);
	tcase_add_test(tc, test_past_the_end);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(latent_suite());
}
