/* SPDX-License-Identifier: MIT */
/*
 * badblocks_files.c: test_badblocks' "files" test case: the poison table's
 * emulation file (good files, units, one test per malformed line, missing and
 * unreadable files, store/load round trip, atomic replacement) and the real
 * badblocks sources (libpmem2 on a plain file, other files, sysfs trees, loop
 * devices).
 */
#include "badblocks.h"

static char tmpdir[] = "/tmp/test_badblocks.XXXXXX";

static void tmpdir_setup(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(1);
	}
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void tmpdir_teardown(void)
{
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
	return buf;
}

static void write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void write_str(const char *path, const char *data)
{
	write_file(path, data, strlen(data));
}
/* ------------------------------------------------------------------- file */

START_TEST(test_file_good)
{
	static const char text[] = "# mendfs test: comments, blanks, overlaps\n"
	                           "\n"
	                           "   \t \n"
	                           "100 8\n"
	                           "   # an indented comment\n"
	                           "\t200\t16\t  \n"
	                           "104 10\n"
	                           "114 1\n"
	                           "0 1\n"
	                           "300  5\r\n"
	                           "18446744073709551614 1\n"
	                           "1000 24";
	struct blk_badblocks bb;
	char path[256], err[256] = "";

	tmp_path(path, sizeof(path), "good.badblocks");
	write_str(path, text);
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 50, 1), 0); /* a load adds to the table */
	ck_assert_int_eq(blk_bb_file_load(&bb, path, 0, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	EXPECT(&bb, R(0, 1), R(50, 1), R(100, 15), R(200, 16), R(300, 5), R(1000, 24),
	       R(UINT64_MAX - 1, 1));
	blk_bb_destroy(&bb);

	/* within a device of 1024 sectors, the last range ends exactly at the end */
	write_str(path, "0 1\n1000 24\n");
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_file_load(&bb, path, 1024, err, sizeof(err)), 0);
	EXPECT(&bb, R(0, 1), R(1000, 24));
	blk_bb_destroy(&bb);
}
END_TEST

/* A unit of poison of 8 sectors (a 4 KiB logical block): every range is widened to it. */
START_TEST(test_unit)
{
	struct blk_badblocks bb;
	char path[256], err[256] = "";

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 3, 1), 0);
	ck_assert_int_eq(blk_bb_add(&bb, 21, 2), 0);
	blk_bb_set_unit(&bb, 8); /* widens what is there: [0, 8), [16, 24) */
	EXPECT(&bb, R(0, 8), R(16, 8));
	ck_assert_int_eq(blk_bb_add(&bb, 43, 1), 0); /* one sector: its whole unit */
	ck_assert_int_eq(blk_bb_add(&bb, 62, 3), 0); /* across a boundary: two units */
	EXPECT(&bb, R(0, 8), R(16, 8), R(40, 8), R(56, 16));
	ck_assert_int_eq(blk_bb_clear(&bb, 17, 1), 0); /* part of a unit clears it whole */
	EXPECT(&bb, R(0, 8), R(40, 8), R(56, 16));
	ck_assert_int_eq(blk_bb_add(&bb, UINT64_MAX - 3, 3), 0); /* saturates at the end */
	EXPECT(&bb, R(0, 8), R(40, 8), R(56, 16), R(UINT64_MAX - 7, 7));
	ck_assert_int_eq(blk_bb_clear(&bb, 0, UINT64_MAX), 0);
	expect_table(&bb, NULL, 0);
	blk_bb_set_unit(&bb, 3); /* not a power of two: ignored */
	ck_assert_int_eq(blk_bb_add(&bb, 9, 1), 0);
	EXPECT(&bb, R(8, 8));
	blk_bb_destroy(&bb);

	/* the emulation file's ranges too, within a device of 1024 sectors */
	tmp_path(path, sizeof(path), "unit.badblocks");
	write_str(path, "5 1\n1017 1\n100 20\n");
	blk_bb_init(&bb);
	blk_bb_set_unit(&bb, 8);
	ck_assert_int_eq(blk_bb_file_load(&bb, path, 1024, err, sizeof(err)), 0);
	EXPECT(&bb, R(0, 8), R(96, 24), R(1016, 8));
	blk_bb_destroy(&bb);
}
END_TEST

struct bad_case {
	const char *text;
	size_t len; /* 0: strlen(text) */
	uint64_t nr_sectors;
	unsigned line;
	const char *msg;
};

static const struct bad_case bad_cases[] = {
        {"0 8\n# c\nabc 5\n", 0, 0, 3, "expected 'SECTOR COUNT'"},
        {"\n\n100\n", 0, 0, 3, "expected 'SECTOR COUNT'"},
        {"100   \n", 0, 0, 1, "expected 'SECTOR COUNT'"},
        {"100x 8\n", 0, 0, 1, "expected 'SECTOR COUNT'"},
        {"-1 8\n", 0, 0, 1, "expected 'SECTOR COUNT'"},
        {"+1 8\n", 0, 0, 1, "expected 'SECTOR COUNT'"},
        {"100,8\n", 0, 0, 1, "expected 'SECTOR COUNT'"},
        {"0x10 8\n", 0, 0, 1, "expected 'SECTOR COUNT'"},
        {"1 1\n100 -8\n", 0, 0, 2, "expected 'SECTOR COUNT'"},
        {"1 1\n\n100 \0 8\n", 12, 0, 3, "expected 'SECTOR COUNT'"},
        {"1 1\n100 0\n", 0, 0, 2, "count must be positive"},
        {"1 2\n3 4\n99999999999999999999 1\n", 0, 0, 3, "number out of range"},
        {"1 18446744073709551616\n", 0, 0, 1, "number out of range"},
        {"5 18446744073709551615\n", 0, 0, 1, "number out of range"},
        {"18446744073709551615 1\n", 0, 0, 1, "wraps around"},
        {"100 8\n2000 100\n", 0, 2048, 2, "range 2000+100 ends beyond the device (2048 sectors)"},
        {"2048 1\n", 0, 2048, 1, "range 2048+1 ends beyond the device (2048 sectors)"},
        {"100 8 x\n", 0, 0, 1, "trailing garbage 'x'"},
        {"100 8x\n", 0, 0, 1, "trailing garbage 'x'"},
        {"100 8 9\n", 0, 0, 1, "trailing garbage '9'"},
        {"#\n#\n#\n100\t8 # note  \n", 0, 0, 4, "trailing garbage '# note'"},
        {"1 1\n1 2 3", 0, 0, 2, "trailing garbage '3'"},
        {"1 1 \x01\xff\n", 0, 0, 1,
         "trailing garbage '?"
         "?'"},
};

START_TEST(test_file_bad_line)
{
	const struct bad_case *bc = &bad_cases[_i];
	struct blk_badblocks bb;
	char path[256], err[512] = "", where[300];

	tmp_path(path, sizeof(path), "bad.badblocks");
	write_file(path, bc->text, bc->len ? bc->len : strlen(bc->text));
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 7, 7), 0);
	ck_assert_int_eq(blk_bb_file_load(&bb, path, bc->nr_sectors, err, sizeof(err)), -EINVAL);
	snprintf(where, sizeof(where), "%s:%u: ", path, bc->line);
	ck_assert_msg(strncmp(err, where, strlen(where)) == 0, "case %d: '%s' does not start '%s'",
	              _i, err, where);
	ck_assert_msg(strstr(err, bc->msg), "case %d: '%s' lacks '%s'", _i, err, bc->msg);
	/* a failed load changes nothing, even where earlier lines were good */
	EXPECT(&bb, R(7, 7));
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_file_missing_and_unreadable)
{
	struct blk_badblocks bb;
	char path[256], err[256] = "";

	blk_bb_init(&bb);
	tmp_path(path, sizeof(path), "does-not-exist.badblocks");
	ck_assert_int_eq(blk_bb_file_load(&bb, path, 100, err, sizeof(err)), 0);
	expect_table(&bb, NULL, 0);
	/* a directory is not a badblocks file */
	ck_assert_int_eq(blk_bb_file_load(&bb, tmpdir, 0, err, sizeof(err)), -EISDIR);
	ck_assert_ptr_nonnull(strstr(err, tmpdir));
	/* a path through a regular file */
	tmp_path(path, sizeof(path), "plain");
	write_str(path, "1 1\n");
	strcat(path, "/x");
	ck_assert_int_eq(blk_bb_file_load(&bb, path, 0, err, sizeof(err)), -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(err, path));
	/* an empty file is an empty table; NULL err is allowed */
	tmp_path(path, sizeof(path), "empty");
	write_str(path, "");
	ck_assert_int_eq(blk_bb_file_load(&bb, path, 0, NULL, 0), 0);
	expect_table(&bb, NULL, 0);
	blk_bb_destroy(&bb);
}
END_TEST

static char *read_all(const char *path)
{
	struct stat st;
	char *buf;
	FILE *f = fopen(path, "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fstat(fileno(f), &st), 0);
	buf = calloc(1, (size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	return buf;
}

START_TEST(test_file_roundtrip)
{
	struct blk_badblocks bb, bb2;
	struct blk_range *a, *b;
	char path[256], err[256] = "", *text;
	int na, nb;

	tmp_path(path, sizeof(path), "rt.badblocks");
	blk_bb_init(&bb);
	for (unsigned i = 0; i < 5000; i++)
		ck_assert_int_eq(blk_bb_add(&bb, rng() % 10000000, 1 + rng() % 64), 0);
	ck_assert_int_eq(blk_bb_add(&bb, UINT64_MAX - 3, 3), 0);
	ck_assert_int_eq(blk_bb_file_store(&bb, path), 0);

	text = read_all(path);
	ck_assert_msg(strncmp(text,
	                      "# mendfs badblocks emulation: SECTOR COUNT (512-byte sectors)\n",
	                      62) == 0,
	              "header: %.80s", text);
	ck_assert_ptr_nonnull(strstr(text, "\n18446744073709551612 3\n"));
	free(text);

	blk_bb_init(&bb2);
	ck_assert_int_eq(blk_bb_file_load(&bb2, path, 0, err, sizeof(err)), 0);
	na = blk_bb_snapshot(&bb, &a);
	nb = blk_bb_snapshot(&bb2, &b);
	ck_assert_int_gt(na, 1000);
	ck_assert_int_eq(na, nb);
	ck_assert_mem_eq(a, b, (size_t)na * sizeof(*a));
	free(a);
	free(b);
	blk_bb_destroy(&bb2);

	/* clearing everything is stored too: a later load sees the clearance */
	ck_assert_int_eq(blk_bb_clear(&bb, 0, UINT64_MAX), 0);
	ck_assert_int_eq(blk_bb_file_store(&bb, path), 0);
	text = read_all(path);
	ck_assert_str_eq(text, "# mendfs badblocks emulation: SECTOR COUNT (512-byte sectors)\n");
	free(text);
	blk_bb_init(&bb2);
	ck_assert_int_eq(blk_bb_file_load(&bb2, path, 0, err, sizeof(err)), 0);
	expect_table(&bb2, NULL, 0);
	blk_bb_destroy(&bb2);
	blk_bb_destroy(&bb);
}
END_TEST

static unsigned count_tmp_files(void)
{
	struct dirent *de;
	unsigned n = 0;
	DIR *d = opendir(tmpdir);

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".tmp."))
			n++;
	closedir(d);
	return n;
}

START_TEST(test_file_store_atomic)
{
	struct blk_badblocks bb;
	char path[256], alias[256], *text;
	struct stat st1, st2, lst;

	tmp_path(path, sizeof(path), "atomic.badblocks");
	tmp_path(alias, sizeof(alias), "atomic.hardlink");
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_add(&bb, 10, 2), 0);
	ck_assert_int_eq(blk_bb_file_store(&bb, path), 0);
	ck_assert_int_eq(stat(path, &st1), 0);
	ck_assert_int_eq(chmod(path, 0600), 0);
	/* a second name for the old file: it must keep the old content */
	ck_assert_int_eq(link(path, alias), 0);

	ck_assert_int_eq(blk_bb_add(&bb, 20, 3), 0);
	ck_assert_int_eq(blk_bb_file_store(&bb, path), 0);
	ck_assert_int_eq(stat(path, &st2), 0);
	ck_assert_uint_ne(st1.st_ino, st2.st_ino); /* replaced by rename, not rewritten */
	ck_assert_uint_eq(st2.st_mode & 07777, 0600);
	ck_assert_uint_eq(count_tmp_files(), 0);
	ck_assert_int_eq(stat(alias, &lst), 0);
	ck_assert_uint_eq(lst.st_ino, st1.st_ino);
	text = read_all(alias);
	ck_assert_ptr_nonnull(strstr(text, "\n10 2\n"));
	ck_assert_ptr_null(strstr(text, "\n20 3\n"));
	free(text);
	text = read_all(path);
	ck_assert_ptr_nonnull(strstr(text, "\n10 2\n20 3\n"));
	free(text);

	/* a store that cannot create its temporary file fails cleanly */
	tmp_path(path, sizeof(path), "no-such-dir/x.badblocks");
	ck_assert_int_eq(blk_bb_file_store(&bb, path), -ENOENT);
	ck_assert_uint_eq(count_tmp_files(), 0);
	blk_bb_destroy(&bb);
}
END_TEST

/* ---------------------------------------------------------------- sources */

START_TEST(test_sources_regular_file)
{
	struct blk_badblocks bb;
	char path[256], errpath[256], err[256] = "", *noise;
	int fd, saved, errfd, ret;

	tmp_path(path, sizeof(path), "image");
	tmp_path(errpath, sizeof(errpath), "stderr");
	fd = open(path, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	blk_bb_init(&bb);

	/* nothing may reach stderr: a plain file simply has no badblocks */
	fflush(stderr);
	saved = dup(2);
	errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(errfd, 0);
	dup2(errfd, 2);
	ret = blk_bb_load_sources(&bb, fd, path, err, sizeof(err));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(errfd);

	ck_assert_int_eq(ret, 0);
	expect_table(&bb, NULL, 0);
	noise = read_all(errpath);
	ck_assert_msg(noise[0] == '\0', "stderr: %s", noise);
	free(noise);
	close(fd);

	/* read-only opens work the same way */
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(blk_bb_load_sources(&bb, fd, path, err, sizeof(err)), 0);
	close(fd);
	expect_table(&bb, NULL, 0);
	blk_bb_destroy(&bb);
}
END_TEST

START_TEST(test_sources_other_files)
{
	struct blk_badblocks bb;
	char err[256] = "";
	int fd, p[2];

	blk_bb_init(&bb);
	/* a character device that is not devdax */
	fd = open("/dev/null", O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(blk_bb_load_sources(&bb, fd, "/dev/null", err, sizeof(err)), 0);
	close(fd);
	/* neither a file nor a device */
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(blk_bb_load_sources(&bb, p[0], "pipe", err, sizeof(err)), 0);
	close(p[0]);
	close(p[1]);
	expect_table(&bb, NULL, 0);
	/* a closed descriptor is an error, with a message naming the device */
	ck_assert_int_eq(blk_bb_load_sources(&bb, p[0], "closed-fd", err, sizeof(err)), -EBADF);
	ck_assert_ptr_nonnull(strstr(err, "closed-fd"));
	blk_bb_destroy(&bb);
}
END_TEST

static void mkdir_p(const char *path)
{
	ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
}

START_TEST(test_sources_sysfs_tree)
{
	struct blk_badblocks bb;
	char disk[256], part[300], file[400], pmem[256], err[512] = "";

	/* a fake sysfs disk with a partition [90, 1090) */
	tmp_path(disk, sizeof(disk), "sys-disk0");
	mkdir_p(disk);
	snprintf(part, sizeof(part), "%s/disk0p1", disk);
	mkdir_p(part);
	snprintf(file, sizeof(file), "%s/badblocks", disk);
	write_str(file, "10 5\n85 10\n100 20\n1085 10\n5000 8\n");
	snprintf(file, sizeof(file), "%s/partition", part);
	write_str(file, "1\n");
	snprintf(file, sizeof(file), "%s/start", part);
	write_str(file, "90\n");
	snprintf(file, sizeof(file), "%s/size", part);
	write_str(file, "1000\n");

	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, disk, err, sizeof(err)), 0);
	EXPECT(&bb, R(10, 5), R(85, 10), R(100, 20), R(1085, 10), R(5000, 8));
	blk_bb_destroy(&bb);

	/* the partition sees its part of the disk's list, shifted to its start */
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, part, err, sizeof(err)), 0);
	EXPECT(&bb, R(0, 5), R(10, 20), R(995, 5));
	blk_bb_destroy(&bb);

	/* an empty partition holds nothing */
	snprintf(file, sizeof(file), "%s/size", part);
	write_str(file, "0\n");
	blk_bb_init(&bb);
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, part, err, sizeof(err)), 0);
	expect_table(&bb, NULL, 0);
	/* a partition whose start cannot be read is an error */
	snprintf(file, sizeof(file), "%s/start", part);
	write_str(file, "ninety\n");
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, part, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "disk0p1"));
	/* a malformed list names its line */
	snprintf(file, sizeof(file), "%s/badblocks", disk);
	write_str(file, "10 5\nten 5\n");
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, disk, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "/badblocks:2: "));
	/* no list at all: a driver without badblocks */
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, disk, err, sizeof(err)), 0);
	expect_table(&bb, NULL, 0);
	/* a pmem disk without the file falls back to libndctl, which knows no such device */
	tmp_path(pmem, sizeof(pmem), "pmem7");
	mkdir_p(pmem);
	ck_assert_int_eq(blk_bb_load_sysfs(&bb, pmem, err, sizeof(err)), 0);
	expect_table(&bb, NULL, 0);
	blk_bb_destroy(&bb);
}
END_TEST

/* Run a shell command, returning its first output line (without newline) or NULL. */
static char *run_line(const char *cmd, char *buf, size_t len)
{
	FILE *p = popen(cmd, "r");
	char *line;

	if (!p)
		return NULL;
	line = fgets(buf, (int)len, p);
	if (pclose(p) != 0 || !line)
		return NULL;
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static bool can_use_loop(void)
{
	if (geteuid() != 0 || access("/dev/loop-control", F_OK) != 0) {
		cannot_run("loop device test: needs root and /dev/loop-control");
		return false;
	}
	return true;
}

/*
 * Give @dev one partition, sectors [2048, 2048 + 4096), with BLKPG: it needs no
 * partition table parser in the kernel.
 */
static int add_partition(const char *dev)
{
	struct blkpg_partition part = {.start = 2048ll * 512, .length = 4096ll * 512, .pno = 1};
	struct blkpg_ioctl_arg arg = {
	        .op = BLKPG_ADD_PARTITION, .datalen = sizeof(part), .data = &part};
	int fd = open(dev, O_RDWR), ret;

	if (fd < 0)
		return -errno;
	ret = ioctl(fd, BLKPG, &arg) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

START_TEST(test_sources_loop_device)
{
	char image[256], cmd[600], dev[128], part[160], err[512] = "";
	int ret_dev = -1, ret_part = -1, nr_dev = -1, nr_part = -1, ret_add, have_part = 0;
	struct blk_badblocks bb;
	struct stat st;
	int fd;

	if (!can_use_loop())
		return;
	tmp_path(image, sizeof(image), "loop.img");
	fd = open(image, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8 << 20), 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "losetup -f --show -P '%s' 2>/dev/null", image);
	ck_assert_msg(run_line(cmd, dev, sizeof(dev)), "losetup failed");
	snprintf(part, sizeof(part), "%sp1", dev);
	ret_add = add_partition(dev);

	/* everything up to the detach records results; assertions come after */
	blk_bb_init(&bb);
	fd = open(dev, O_RDONLY);
	if (fd >= 0) {
		ret_dev = blk_bb_load_sources(&bb, fd, dev, err, sizeof(err));
		nr_dev = (int)atomic_load(&bb.nr);
		close(fd);
	}
	if (ret_add == 0)
		have_part = stat(part, &st) == 0 && S_ISBLK(st.st_mode);
	if (have_part) {
		fd = open(part, O_RDONLY);
		if (fd >= 0) {
			ret_part = blk_bb_load_sources(&bb, fd, part, err, sizeof(err));
			nr_part = (int)atomic_load(&bb.nr);
			close(fd);
		}
	}
	blk_bb_destroy(&bb);
	snprintf(cmd, sizeof(cmd), "losetup -d '%s'", dev);
	ck_assert_int_eq(system(cmd), 0);

	ck_assert_msg(ret_dev == 0, "%s: %d (%s)", dev, ret_dev, err);
	ck_assert_int_eq(nr_dev, 0);
	ck_assert_msg(ret_add == 0, "BLKPG_ADD_PARTITION on %s: %s", dev, strerror(-ret_add));
	ck_assert_msg(have_part, "%s did not appear", part);
	ck_assert_msg(ret_part == 0, "%s: %d (%s)", part, ret_part, err);
	ck_assert_int_eq(nr_part, 0);
}
END_TEST
TCase *badblocks_files_tcase(void)
{
	TCase *tc = tcase_create("files");

	tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
	tcase_add_test(tc, test_file_good);
	tcase_add_test(tc, test_unit);
	tcase_add_loop_test(tc, test_file_bad_line, 0,
	                    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, test_file_missing_and_unreadable);
	tcase_add_test(tc, test_file_roundtrip);
	tcase_add_test(tc, test_file_store_atomic);
	tcase_add_test(tc, test_sources_regular_file);
	tcase_add_test(tc, test_sources_other_files);
	tcase_add_test(tc, test_sources_sysfs_tree);
	tcase_add_test(tc, test_sources_loop_device);
	return tc;
}
