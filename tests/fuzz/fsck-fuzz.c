/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for fsck.mendfs: the fuzzer's bytes are a list of
 * mutations applied to a small valid image (superblock, inode table,
 * bitmap and B+tree blocks: directories, extents, xattrs, quarantine), each
 * optionally resealed so that it passes the checksum and reaches the deeper
 * checks, optionally applied to the twin copy as well, plus poisoned sectors
 * in the emulation file.  fsck runs in-process with -n, then -y
 * --zero-damaged twice (with $FSCK_FUZZ_STRICT the second must exit 0).  It must never crash
 * (ASan), hang (libFuzzer -timeout), exit with a status outside fsck(8)'s, or change the image's
 * size (a write outside the device).
 *
 * The template image: $FSCK_FUZZ_TEMPLATE (made by tests/fuzz/run-fuzz.sh
 * or fuzz-corpus.sh: mkfs.mendfs 16M + fsck-img populate).  The working copy
 * lives in $FSCK_FUZZ_DIR (default /dev/shm).
 *
 * Built with clang -fsanitize=fuzzer,address (meson -Dfuzzer=true), or with
 * -DFUZZ_REPLAY as a plain program that replays corpus files (the default
 * test suite runs tests/fuzz/corpus/ through it).
 *
 * Input: records of 8 bytes
 *   [0]     target: index into the interesting blocks (0xff: a poison record)
 *   [1..2]  byte offset in the block (little-endian, mod 4096)
 *   [3]     value
 *   [4]     flags: bit 0 reseal, bit 1 twin too, bit 2 set (else xor),
 *           bit 3 write a 32-bit value [3],[5],[6],[7] at offset & ~3
 *   [5..7]  more value bytes
 * poison record: sector = le32([1..4]) mod sectors, count = 1 + [5] % 16
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsck.h"

#define BS  MFS_BLOCK_SIZE
#define REC 8

static uint8_t *tmpl;
static size_t tmpl_size;
static char img[256], bb[300];
static uint64_t *targets;
static size_t ntargets;
static struct mfs_superblock sb;

static void fatal(const char *what)
{
	fprintf(stderr, "fsck-fuzz: %s: %s\n", what, strerror(errno));
	abort();
}

static void add_target(uint64_t b)
{
	targets = realloc(targets, (ntargets + 1) * sizeof(*targets));
	if (!targets)
		fatal("realloc");
	targets[ntargets++] = b;
}

static void setup(void)
{
	const char *t = getenv("FSCK_FUZZ_TEMPLATE"), *dir = getenv("FSCK_FUZZ_DIR");
	struct stat st;
	int fd;

	if (tmpl)
		return;
	if (!t)
		t = "fsck-fuzz-template.img";
	fd = open(t, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		fatal(t);
	tmpl_size = (size_t)st.st_size;
	tmpl = malloc(tmpl_size);
	if (!tmpl || pread(fd, tmpl, tmpl_size, 0) != (ssize_t)tmpl_size)
		fatal("reading the template");
	close(fd);
	memcpy(&sb, tmpl, sizeof(sb));
	snprintf(img, sizeof(img), "%s/fsck-fuzz-%d.img", dir ? dir : "/dev/shm", (int)getpid());
	snprintf(bb, sizeof(bb), "%s.badblocks", img);

	/* interesting blocks: both superblocks, the fixed part, every used meta zone block */
	add_target(0);
	add_target(tmpl_size / BS - 1);
	for (uint64_t b = 0; b < sb.meta_len && sb.meta_start + b < tmpl_size / BS; b++) {
		uint64_t bmb = sb.meta_bitmap_start + b / MFS_BITMAP_BITS;
		const uint8_t *bits = tmpl + bmb * BS + sizeof(struct mfs_meta_hdr);
		uint64_t i = b % MFS_BITMAP_BITS;

		if (bmb * BS + BS > tmpl_size)
			break;
		if (bits[i / 8] >> (i % 8) & 1)
			add_target(sb.meta_start + b);
	}
	/* journal blocks near the tail */
	for (uint64_t j = 0; j < 4 && j < sb.journal_len; j++)
		add_target(sb.journal_start + j);
	/* fsck prints its report: keep stdout quiet */
	if (!getenv("FSCK_FUZZ_VERBOSE")) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			close(null);
		}
	}
}

static uint64_t twin(uint64_t b)
{
	if (!(sb.feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP))
		return 0;
	if (b >= sb.meta_start && b < sb.meta_start + sb.meta_len)
		return b - sb.meta_start + sb.meta_twin;
	if (b >= sb.journal_start && b < sb.journal_start + sb.journal_len)
		return b - sb.journal_start + sb.journal_twin;
	return 0;
}

static void mutate_block(uint8_t *image, uint64_t b, const uint8_t *r)
{
	uint8_t *blk = image + b * BS;
	unsigned off = (unsigned)(r[1] | r[2] << 8) % BS;
	uint64_t t;

	if (r[4] & 8) {
		uint32_t v = (uint32_t)r[3] | (uint32_t)r[5] << 8 | (uint32_t)r[6] << 16 |
		             (uint32_t)r[7] << 24;

		memcpy(blk + (off & ~3u), &v, 4);
	} else if (r[4] & 4) {
		blk[off] = r[3];
	} else {
		blk[off] ^= r[3] ? r[3] : 0x80;
	}
	if (r[4] & 1) /* reseal: the superblock with its own seed field, as written */
		mfs_block_seal(blk, b == 0 || b == tmpl_size / BS - 1
		                            ? ((struct mfs_superblock *)blk)->csum_seed
		                            : sb.csum_seed);
	t = twin(b);
	if ((r[4] & 2) && t && t * BS + BS <= tmpl_size)
		memcpy(image + t * BS, blk, BS);
}

static int run(const char *mode, const char *opt)
{
	char *argv[] = {"fsck.mendfs", (char *)mode, img, NULL, NULL};
	int ret;

	if (opt) {
		argv[2] = (char *)opt;
		argv[3] = img;
	}
	ret = fsck_main(opt ? 4 : 3, argv);

	if (ret & ~(FSCK_CORRECTED | FSCK_UNCORRECTED | FSCK_ERROR)) {
		fprintf(stderr, "fsck-fuzz: fsck.mendfs %s exited %d\n", mode, ret);
		abort();
	}
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool strict = getenv("FSCK_FUZZ_STRICT") != NULL;
	uint8_t *image;
	FILE *bbf = NULL;
	struct stat st;
	int fd, ret, first, second;

	setup();
	image = malloc(tmpl_size);
	if (!image)
		fatal("malloc");
	memcpy(image, tmpl, tmpl_size);
	unlink(bb);
	for (size_t i = 0; i + REC <= size && i < 64 * REC; i += REC) {
		const uint8_t *r = data + i;

		if (r[0] == 0xff) {
			uint32_t s = (uint32_t)r[1] | (uint32_t)r[2] << 8 | (uint32_t)r[3] << 16 |
			             (uint32_t)r[4] << 24;

			if (!bbf)
				bbf = fopen(bb, "w");
			if (bbf)
				fprintf(bbf, "%llu %u\n",
				        (unsigned long long)(s % (tmpl_size / 512)), 1 + r[5] % 16);
			continue;
		}
		mutate_block(image, targets[r[0] % ntargets], r);
	}
	if (bbf)
		fclose(bbf);
	fd = open(img, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || pwrite(fd, image, tmpl_size, 0) != (ssize_t)tmpl_size)
		fatal(img);
	close(fd);
	free(image);

	first = run("-n", NULL);
	ret = run("-y", "--zero-damaged");
	second = run("-y", "--zero-damaged");
	/*
	 * FSCK_FUZZ_STRICT: the second repair finds nothing (e2fsck's rule), unless
	 * there is no filesystem to repair at all (8 every time: no valid superblock).
	 */
	if (strict && second != 0 &&
	    !(first == FSCK_ERROR && ret == FSCK_ERROR && second == FSCK_ERROR)) {
		fprintf(stderr, "fsck-fuzz: fsck -n, -y, -y exited %d, %d, %d\n", first, ret,
		        second);
		abort();
	}

	if (stat(img, &st) || (size_t)st.st_size != tmpl_size) {
		fprintf(stderr, "fsck-fuzz: the image changed size (%lld, was %zu)\n",
		        (long long)st.st_size, tmpl_size);
		abort();
	}
	unlink(img);
	unlink(bb);
	return 0;
}

#ifdef FUZZ_REPLAY
/* Replay corpus files given as arguments (no libFuzzer): the regression suite. */
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		uint8_t buf[64 * REC];
		FILE *f = fopen(argv[i], "rb");
		size_t n;

		if (!f)
			fatal(argv[i]);
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		fprintf(stderr, "fsck-fuzz: replaying %s (%zu bytes)\n", argv[i], n);
		LLVMFuzzerTestOneInput(buf, n);
	}
	return 0;
}
#endif
