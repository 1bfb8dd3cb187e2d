/* SPDX-License-Identifier: MIT */
/*
 * mkfs.mendfs: write an empty mendfs (format v1, docs/FORMAT.md) on a device
 * or an image file.
 *
 *   mkfs.mendfs [-f] [-q] [-L LABEL] [-N INODES] DEVICE [SIZE]
 *
 * Steps: parse; create or size the image (SIZE); open through the block
 * engine; compute the layout (FORMAT.md "How mkfs sizes the areas"); refuse
 * a device holding a mendfs or what libblkid finds (without -f), or poison under a
 * fixed area; write the zeroed journal, bitmaps, inode table and root inode,
 * each with its twin; write the backup then the primary superblock; flush.
 * Exit 0 on success, 1 on any error, with "mkfs.mendfs: DEVICE: what" on
 * stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <blkid.h>

#include "mfs.h"
#include "mfs_cli.h"
#include "mfs_devlock.h"
#include "mfs_layout.h"
#include "mfs_progress.h"

#define PROG "mkfs.mendfs"
#define USAGE                                                                                      \
	"usage: mkfs.mendfs [-f|-F] [-q] [-L LABEL] [-N INODES] [-J JSIZE] [-O FEATURE[,...]]\n"   \
	"                   DEVICE [SIZE]\n"                                                       \
	"       mkfs.mendfs -V|--version|--help\n"

#define MKFS_MIN_SIZE     MFS_LAYOUT_MIN_BYTES /* smallest device accepted */
#define MKFS_PROGRESS_MIN (1ull << 30) /* a progress bar from this size on (a terminal only) */
#define MKFS_JOURNAL_MIN  MFS_LAYOUT_JOURNAL_MIN
#define MKFS_JOURNAL_MAX  MFS_LAYOUT_JOURNAL_MAX
#define MKFS_MIN_INODES   MFS_LAYOUT_MIN_INODES
#define MKFS_CHUNK        256u /* blocks per write */

struct mkfs_opts {
	bool force, quiet;
	const char *label;
	uint64_t inodes;      /* 0: default */
	uint64_t journal_len; /* blocks, 0: default */
	bool data_csum;       /* -O data_csum */
	const char *device;
	uint64_t size; /* 0: not given */
};

static const char *g_device = NULL;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The bar on stdout while the areas are written (fd -1: none). */
static struct mfs_progress g_bar = {.fd = -1};
static uint64_t g_bar_done, g_bar_total;

/* @n more blocks written. */
static void progress(uint64_t n)
{
	g_bar_done += n;
	mfs_progress_update(&g_bar, g_bar_done, g_bar_total);
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	mfs_progress_clear(&g_bar);
	if (g_device)
		fprintf(stderr, PROG ": %s: ", g_device);
	else
		fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "512M", "4G", "1048576", K/M/G/T (powers of 1024, optional "iB"/"B"). 0 on error. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
		end += strlen(end);
	if (*end || v == 0)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_args(int argc, char **argv, struct mkfs_opts *o)
{
	static const char optstring[] = "+fFqL:N:J:O:hV";
	static const struct option lopts[] = {
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	char msg[256];
	int c;

	memset(o, 0, sizeof(*o));
	opterr = 0;
	while ((c = getopt_long(argc, argv, optstring, lopts, NULL)) != -1) {
		switch (c) {
		case 'f':
		case 'F': /* mke2fs's spelling */
			o->force = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'L':
			if (strlen(optarg) > sizeof(((struct mfs_superblock *)0)->label) - 1) {
				fail("label '%s' is longer than 63 bytes", optarg);
				return -EINVAL;
			}
			o->label = optarg;
			break;
		case 'N': {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || *end || optarg[0] < '0' || optarg[0] > '9') {
				fail("invalid number of inodes '%s'", optarg);
				return -EINVAL;
			}
			if (v < MKFS_MIN_INODES) {
				fail("-N %s: at least %llu inodes are needed", optarg,
				     (unsigned long long)MKFS_MIN_INODES);
				return -EINVAL;
			}
			o->inodes = v;
			break;
		}
		case 'J': {
			uint64_t bytes;

			if (parse_size(optarg, &bytes) || bytes % MFS_BLOCK_SIZE ||
			    bytes / MFS_BLOCK_SIZE < MKFS_JOURNAL_MIN ||
			    bytes / MFS_BLOCK_SIZE > MKFS_JOURNAL_MAX) {
				fail("invalid journal size '%s' (1M to 128M, whole 4 KiB blocks)",
				     optarg);
				return -EINVAL;
			}
			o->journal_len = bytes / MFS_BLOCK_SIZE;
			break;
		}
		case 'O': {
			char *list = strdup(optarg), *save = NULL, *f;

			if (!list) {
				fail("out of memory");
				return -ENOMEM;
			}
			for (f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
				if (!strcmp(f, "data_csum")) {
					o->data_csum = true;
				} else if (!strcmp(f, "^data_csum")) {
					o->data_csum = false;
				} else {
					fail("unknown feature '%s' (known: data_csum)", f);
					free(list);
					return -EINVAL;
				}
			}
			free(list);
			break;
		}
		case 'h':
			fputs(USAGE, stdout);
			exit(0);
		case 'V':
			exit(mfs_cli_version("mkfs.mendfs"));
		case '?':
		default:
			fail("%s", mfs_cli_optmsg(msg, sizeof(msg), argv, optstring));
			fputs(USAGE, stderr);
			return -EINVAL;
		}
	}
	if (optind >= argc || argc - optind > 2) {
		fail(optind >= argc ? "no DEVICE given" : "too many arguments");
		fputs(USAGE, stderr);
		return -EINVAL;
	}
	o->device = argv[optind];
	g_device = o->device;
	if (argc - optind == 2 && parse_size(argv[optind + 1], &o->size)) {
		fail("invalid size '%s' (a number of bytes, or with K, M, G or T)",
		     argv[optind + 1]);
		return -EINVAL;
	}
	return 0;
}

/*
 * SIZE given: create the image, or grow it, or shrink it (only an empty file,
 * or with -f).  *created says whether the file is new (removed on failure).
 */
static int prepare_image(const struct mkfs_opts *o, bool *created)
{
	struct stat st;
	int fd, ret = 0;

	*created = false;
	if (!o->size)
		return 0;
	if (o->size < MKFS_MIN_SIZE) {
		/* before touching the file: a refused size must not have shrunk it */
		fail("size %" PRIu64 " bytes is too small, the minimum is 16 MiB (%llu bytes)",
		     o->size, (unsigned long long)MKFS_MIN_SIZE);
		return -ENOSPC;
	}
	if (stat(o->device, &st) == 0) {
		if (!S_ISREG(st.st_mode)) {
			fail("SIZE applies to image files only; this is not a regular file");
			return -EINVAL;
		}
		if ((uint64_t)st.st_size == o->size)
			return 0;
		if ((uint64_t)st.st_size > o->size && st.st_size > 0 && !o->force) {
			fail("would shrink the image from %lld to %" PRIu64
			     " bytes; use -f to do it anyway",
			     (long long)st.st_size, o->size);
			return -EEXIST;
		}
		fd = open(o->device, O_WRONLY | O_CLOEXEC);
	} else if (errno == ENOENT) {
		fd = open(o->device, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0)
			*created = true;
	} else {
		fail("%s", strerror(errno));
		return -errno;
	}
	if (fd < 0) {
		ret = -errno;
		fail("cannot open: %s", strerror(errno));
		return ret;
	}
	if (ftruncate(fd, (off_t)o->size) < 0) {
		ret = -errno;
		fail("cannot set the size to %" PRIu64 " bytes: %s", o->size, strerror(errno));
	}
	close(fd);
	return ret;
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * A mendfs superblock (primary or backup) on the device: libblkid does not
 * know mendfs.  Read through the engine (poison-safe).  Returns its name or
 * NULL, *err = 0 or -errno.
 */
static const char *find_mendfs(struct blk_dev *dev, uint64_t nr_blocks, uint8_t *buf, int *err)
{
	*err = blk_read(dev, 0, buf, MFS_BLOCK_SIZE, BLK_BIO_RECOVERY);
	if (*err)
		return NULL;
	if (le64(buf + offsetof(struct mfs_superblock, magic)) == MFS_SB_MAGIC)
		return "a mendfs filesystem (primary superblock)";
	*err = blk_read(dev, (nr_blocks - 1) * MFS_SECTORS_PER_BLOCK, buf, MFS_BLOCK_SIZE,
	                BLK_BIO_RECOVERY);
	if (*err)
		return NULL;
	if (le64(buf + offsetof(struct mfs_superblock, magic)) == MFS_SB_MAGIC)
		return "a mendfs filesystem (backup superblock)";
	return NULL;
}

/* Appends ` NAME="VALUE"` of the current probe result, if it has NAME. */
static void add_value(blkid_probe pr, const char *name, char *out, size_t len)
{
	const char *v;
	size_t o = strlen(out);

	if (!blkid_probe_lookup_value(pr, name, &v, NULL) && v[0] && o < len)
		snprintf(out + o, len - o, " %s=\"%s\"", name, v);
}

/*
 * Every signature libblkid knows on @path (as wipefs lists them): filesystems,
 * RAID members, LVM physical volumes, crypto headers, swap, partition tables.
 * Writes them into @out as blkid prints them (TYPE="ext4" LABEL="x" UUID="…",
 * PTTYPE="dos"), "; " between two.  Returns how many, or -errno when the
 * device cannot be probed.
 */
static int find_blkid(const char *path, char *out, size_t len)
{
	blkid_probe pr;
	int n = 0;

	out[0] = '\0';
	pr = blkid_new_probe_from_filename(path);
	if (!pr)
		return errno ? -errno : -EIO;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL |
	                                              BLKID_SUBLKS_UUID | BLKID_SUBLKS_BADCSUM);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	while (blkid_do_probe(pr) == 0) {
		size_t o = strlen(out);

		if (o + 1 >= len)
			break;
		if (n++)
			snprintf(out + o, len - o, ";");
		if (!blkid_probe_has_value(pr, "TYPE")) {
			add_value(pr, "PTTYPE", out, len);
			add_value(pr, "PTUUID", out, len);
		} else {
			add_value(pr, "TYPE", out, len);
			add_value(pr, "LABEL", out, len);
			add_value(pr, "UUID", out, len);
		}
	}
	blkid_free_probe(pr);
	return n;
}

/* Fixed areas: poison under any of them refuses the device. */
static int check_poison(struct blk_dev *dev, const struct mfs_layout *l, uint64_t *data_poison)
{
	const struct {
		const char *what;
		uint64_t start, len;
	} area[] = {
	        {"the primary superblock", 0, 1},
	        {"the backup superblock", l->nr_blocks - 1, 1},
	        {"the journal", l->journal_start, l->journal_len},
	        {"the journal twin", l->journal_twin, l->journal_len},
	        {"the meta zone's bitmaps and inode table", l->meta_start, l->meta_fixed},
	        {"the twin of the meta zone's bitmaps and inode table", l->meta_twin,
	         l->meta_fixed},
	};
	struct blk_range r;
	unsigned total;

	for (size_t i = 0; i < sizeof(area) / sizeof(area[0]); i++) {
		if (blk_poison_lookup(dev, area[i].start * MFS_SECTORS_PER_BLOCK,
		                      area[i].len * MFS_SECTORS_PER_BLOCK, &r, 1, &total)) {
			fail("poisoned sectors %" PRIu64 "-%" PRIu64
			     " lie under %s (blocks %" PRIu64 "-%" PRIu64
			     "); clear the poison or use another device",
			     r.sector, r.sector + r.nr - 1, area[i].what, area[i].start,
			     area[i].start + area[i].len - 1);
			return -EIO;
		}
	}
	*data_poison = 0;
	blk_poison_lookup(dev, l->data_start * MFS_SECTORS_PER_BLOCK,
	                  l->data_len * MFS_SECTORS_PER_BLOCK, &r, 0, &total);
	*data_poison = total;
	return 0;
}

static void hdr_init(void *block, uint16_t type, uint64_t blocknr, uint32_t nr_items)
{
	struct mfs_meta_hdr *h = block;

	memset(block, 0, MFS_BLOCK_SIZE);
	h->magic = htole32(MFS_META_MAGIC);
	h->type = htole16(type);
	h->blocknr = htole64(blocknr);
	h->nr_items = htole32(nr_items);
}

/* Write @nr blocks at primary @blk and at its twin (@twin_off added, 0: none). */
static int write_both(struct blk_dev *dev, uint64_t blk, uint64_t twin, const void *buf,
                      uint64_t nr)
{
	int ret;

	ret = blk_write(dev, blk * MFS_SECTORS_PER_BLOCK, buf, (uint32_t)(nr * MFS_BLOCK_SIZE), 0);
	if (!ret && twin)
		ret = blk_write(dev, twin * MFS_SECTORS_PER_BLOCK, buf,
		                (uint32_t)(nr * MFS_BLOCK_SIZE), 0);
	if (ret)
		fail("write at block %" PRIu64 ": %s", blk, strerror(-ret));
	return ret;
}

static int flush(struct blk_dev *dev)
{
	int ret = blk_flush(dev);

	if (ret)
		fail("flush: %s", strerror(-ret));
	return ret;
}

static int zero_area(struct blk_dev *dev, uint64_t blk, uint64_t nr)
{
	struct blk_bio bio;
	int ret;

	/* One bio per 64 MiB (below BLK_BIO_MAX_BYTES). */
	while (nr) {
		uint64_t n = nr > 16384 ? 16384 : nr;

		blk_bio_init(&bio, BLK_OP_WRITE_ZEROES, blk * MFS_SECTORS_PER_BLOCK, NULL,
		             (uint32_t)(n * MFS_BLOCK_SIZE), NULL, NULL);
		ret = blk_submit_bio_wait(dev, &bio);
		if (ret) {
			fail("zeroing blocks %" PRIu64 "-%" PRIu64 ": %s", blk, blk + n - 1,
			     strerror(-ret));
			return ret;
		}
		blk += n;
		nr -= n;
	}
	return 0;
}

/*
 * Write a bitmap of @items bits at @start (@nblocks blocks), the first @used
 * bits set, padding bits set.
 */
static int write_bitmap(struct blk_dev *dev, const struct mfs_layout *l, uint64_t seed,
                        uint8_t *buf, uint64_t start, uint64_t nblocks, uint64_t items,
                        uint64_t used)
{
	for (uint64_t k = 0; k < nblocks;) {
		uint64_t n = nblocks - k > MKFS_CHUNK ? MKFS_CHUNK : nblocks - k;

		for (uint64_t j = 0; j < n; j++) {
			uint8_t *b = buf + j * MFS_BLOCK_SIZE;
			uint64_t first = (k + j) * MFS_BITMAP_BITS;

			mfs_bitmap_block_init(b, start + k + j, k + j, items);
			for (uint64_t i = 0; i < MFS_BITMAP_BITS && first + i < used; i++)
				mfs_bitmap_block_set(b, i);
			mfs_block_seal(b, seed);
		}
		if (write_both(dev, start + k, l->meta_twin + (start + k - l->meta_start), buf, n))
			return -EIO;
		k += n;
	}
	return 0;
}

static int write_inode_table(struct blk_dev *dev, const struct mfs_layout *l, uint64_t seed,
                             uint8_t *buf, int64_t now, uint64_t generation)
{
	for (uint64_t k = 0; k < l->inode_table_blocks;) {
		uint64_t n = l->inode_table_blocks - k > MKFS_CHUNK ? MKFS_CHUNK
		                                                    : l->inode_table_blocks - k;

		for (uint64_t j = 0; j < n; j++) {
			uint8_t *b = buf + j * MFS_BLOCK_SIZE;

			hdr_init(b, MFS_T_INODES, l->inode_table_start + k + j,
			         MFS_INODES_PER_BLOCK);
			if (k + j == 0) {
				/* ino 1, the root: slot 0 of the first block */
				struct mfs_inode *root =
				        (struct mfs_inode *)(b + sizeof(struct mfs_meta_hdr));

				root->mode = htole32(040755);
				root->nlink = htole32(2);
				root->uid = htole32((uint32_t)getuid());
				root->gid = htole32((uint32_t)getgid());
				root->atime_ns = root->mtime_ns = root->ctime_ns = root->btime_ns =
				        (int64_t)htole64((uint64_t)now);
				root->generation = htole64(generation);
				root->parent = htole64(MFS_ROOT_INO);
			}
			mfs_block_seal(b, seed);
		}
		if (write_both(dev, l->inode_table_start + k,
		               l->meta_twin + (l->inode_table_start + k - l->meta_start), buf, n))
			return -EIO;
		k += n;
		progress(n);
	}
	return 0;
}

static void fill_super(struct mfs_superblock *sb, const struct mfs_layout *l,
                       const struct mkfs_opts *o, const uint64_t rnd[5], int64_t now)
{
	memset(sb, 0, sizeof(*sb));
	hdr_init(sb, MFS_T_SUPER, 0, 0);
	sb->magic = htole64(MFS_SB_MAGIC);
	sb->version = htole32(MFS_FORMAT_VERSION);
	sb->block_size = htole32(MFS_BLOCK_SIZE);
	sb->feature_compat = htole32(0);
	sb->feature_ro_compat = htole32(MFS_FEATURE_RO_COMPAT_METADATA_DUP |
	                                (o->data_csum ? MFS_FEATURE_RO_COMPAT_DATA_CSUM : 0));
	sb->feature_incompat = htole32(MFS_FEATURE_INCOMPAT_XATTR_BLOCKS);
	sb->state = htole32(MFS_STATE_CLEAN);
	memcpy(sb->uuid, rnd, 16);
	sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40); /* version 4 */
	sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	if (o->label)
		memcpy(sb->label, o->label, strlen(o->label));
	sb->csum_seed = htole64(rnd[2]);
	sb->nr_blocks = htole64(l->nr_blocks);
	sb->journal_start = htole64(l->journal_start);
	sb->journal_len = htole64(l->journal_len);
	sb->journal_twin = htole64(l->journal_twin);
	sb->meta_start = htole64(l->meta_start);
	sb->meta_len = htole64(l->meta_len);
	sb->meta_twin = htole64(l->meta_twin);
	sb->data_start = htole64(l->data_start);
	sb->data_len = htole64(l->data_len);
	sb->inode_table_start = htole64(l->inode_table_start);
	sb->inode_table_blocks = htole64(l->inode_table_blocks);
	sb->inode_bitmap_start = htole64(l->inode_bitmap_start);
	sb->inode_bitmap_blocks = htole64(l->inode_bitmap_blocks);
	sb->meta_bitmap_start = htole64(l->meta_bitmap_start);
	sb->meta_bitmap_blocks = htole64(l->meta_bitmap_blocks);
	sb->data_bitmap_start = htole64(l->data_bitmap_start);
	sb->data_bitmap_blocks = htole64(l->data_bitmap_blocks);
	sb->nr_inodes = htole64(l->nr_inodes);
	sb->root_ino = htole64(MFS_ROOT_INO);
	sb->free_blocks = htole64(l->data_len);
	sb->free_inodes = htole64(l->nr_inodes - 1);
	sb->free_meta = htole64(l->meta_len - l->meta_fixed);
	sb->journal_seq = htole64(1);
	sb->journal_tail = htole64(0);
	sb->mkfs_time_ns = (int64_t)htole64((uint64_t)now);
	sb->write_time_ns = (int64_t)htole64((uint64_t)now);
	sb->dir_hash_seed = htole64(rnd[3]);
	sb->csum_table_start = htole64(l->csum_table_start);
	sb->csum_table_blocks = htole64(l->csum_table_blocks);
}

/* The data checksum table (data_csum): type-9 blocks, every entry 0 (no block written yet). */
static int write_csum_table(struct blk_dev *dev, const struct mfs_layout *l, uint64_t seed,
                            uint8_t *buf)
{
	for (uint64_t k = 0; k < l->csum_table_blocks;) {
		uint64_t n = l->csum_table_blocks - k > MKFS_CHUNK ? MKFS_CHUNK
		                                                   : l->csum_table_blocks - k;

		memset(buf, 0, (size_t)n * MFS_BLOCK_SIZE);
		for (uint64_t j = 0; j < n; j++) {
			uint8_t *b = buf + j * MFS_BLOCK_SIZE;

			hdr_init(b, MFS_T_DATA_CSUM, l->csum_table_start + k + j, 0);
			mfs_block_seal(b, seed);
		}
		if (write_both(dev, l->csum_table_start + k,
		               l->meta_twin + (l->csum_table_start + k - l->meta_start), buf, n))
			return -EIO;
		k += n;
		progress(n);
	}
	return 0;
}

static int get_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void human(uint64_t bytes, char *out, size_t len)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

static void print_summary(const struct mkfs_opts *o, const struct blk_dev_info *info,
                          const struct mfs_layout *l, const struct mfs_superblock *sb,
                          uint64_t data_poison)
{
	char h1[32], h2[32], h3[32], h4[32];
	const uint8_t *u = sb->uuid;

	human(info->size, h1, sizeof(h1));
	human(l->journal_len * MFS_BLOCK_SIZE, h2, sizeof(h2));
	human(l->meta_len * MFS_BLOCK_SIZE, h3, sizeof(h3));
	human(l->data_len * MFS_BLOCK_SIZE, h4, sizeof(h4));
	printf("device:       %s (%s backend)\n", o->device, info->backend_name);
	printf("size:         %" PRIu64 " bytes (%s)\n", info->size, h1);
	printf("blocks:       %" PRIu64 " of %u bytes\n", l->nr_blocks, MFS_BLOCK_SIZE);
	printf("inodes:       %" PRIu64 "\n", l->nr_inodes);
	printf("journal:      %" PRIu64 " blocks (%s) at %" PRIu64 ", twin at %" PRIu64 "\n",
	       l->journal_len, h2, l->journal_start, l->journal_twin);
	printf("meta zone:    %" PRIu64 " blocks (%s) at %" PRIu64 ", twin at %" PRIu64 "\n",
	       l->meta_len, h3, l->meta_start, l->meta_twin);
	printf("data blocks:  %" PRIu64 " (%s) at %" PRIu64 "\n", l->data_len, h4, l->data_start);
	if (data_poison)
		printf("poison:       %" PRIu64
		       " poisoned ranges in the data zone (never allocated)\n",
		       data_poison);
	printf("uuid:         "
	       "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
	       u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
	       u[13], u[14], u[15]);
	printf("label:        %s\n", o->label ? o->label : "");
	if (l->csum_table_blocks)
		printf("data_csum:    checksum table of %" PRIu64 " blocks at %" PRIu64 "\n",
		       l->csum_table_blocks, l->csum_table_start);
}

/*
 * The daemon's lock on DEVICE (blk_dev_open's BLK_CFG_EXCL: flock), taken on
 * a descriptor of our own before the image is sized and held until mkfs
 * ends, so that neither the sizing nor the format touches a mounted device.
 * A lock held by a daemon that is still exiting is waited for
 * (mfs_dev_wait_exiting).  Returns the descriptor, -ENOENT if DEVICE does
 * not exist yet, -EBUSY after a message, or another -errno from open (then
 * blk_dev_open reports it and takes the lock).
 */
static int mkfs_lock(const char *device)
{
	int fd = open(device, O_RDONLY | O_CLOEXEC), ret;
	bool waited = false;

	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		if (ret == -EBUSY && !waited) {
			waited = true;
			if (!mfs_dev_wait_exiting(device, MFS_DEV_EXIT_WAIT, PROG))
				continue;
		}
		close(fd);
		fail("%s", ret == -EBUSY ? "device is in use by another process" : strerror(-ret));
		return -EBUSY;
	}
	return fd;
}

static int mkfs_run(const struct mkfs_opts *o, bool locked)
{
	struct blk_dev_config cfg = {
	        .backend = BLK_BACKEND_AUTO, .path = o->device, .flags = locked ? 0 : BLK_CFG_EXCL};
	struct blk_dev_info info;
	struct blk_dev *dev = NULL;
	struct mfs_layout l;
	struct mfs_superblock *sb = NULL;
	uint8_t *buf = NULL;
	const char *sig;
	struct stat st;
	uint64_t rnd[5], seed, data_poison = 0;
	int64_t now;
	char err[256];
	int ret;

	ret = blk_dev_open(&cfg, &dev, err, sizeof(err));
	if (ret) {
		fprintf(stderr, PROG ": %s\n", err[0] ? err : strerror(-ret));
		return ret;
	}
	blk_dev_get_info(dev, &info);
	if (info.read_only) {
		fail("device is read-only");
		ret = -EROFS;
		goto out;
	}
	if (info.size < MKFS_MIN_SIZE) {
		fail("device too small: %" PRIu64 " bytes, the minimum is 16 MiB (%llu bytes)",
		     info.size, (unsigned long long)MKFS_MIN_SIZE);
		ret = -ENOSPC;
		goto out;
	}
	ret = mfs_layout_compute(info.size / MFS_BLOCK_SIZE, o->inodes, o->journal_len,
	                         o->data_csum, &l);
	if (ret) {
		fail("%" PRIu64 " inodes do not fit on a device of %" PRIu64
		     " bytes; use a smaller -N",
		     o->inodes, info.size);
		goto out;
	}
	buf = aligned_alloc(MFS_BLOCK_SIZE, (size_t)MKFS_CHUNK * MFS_BLOCK_SIZE);
	sb = aligned_alloc(MFS_BLOCK_SIZE, sizeof(*sb));
	if (!buf || !sb) {
		fail("out of memory");
		ret = -ENOMEM;
		goto out;
	}

	sig = find_mendfs(dev, l.nr_blocks, buf, &ret);
	if (ret) {
		fail("cannot read the device: %s", strerror(-ret));
		goto out;
	}
	if (sig && !o->force) {
		fail("contains %s; use -f to overwrite it", sig);
		ret = -EEXIST;
		goto out;
	}
	/* libblkid probes block devices and images; not a device DAX character device */
	if (!o->force && !stat(o->device, &st) && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		char found[1024];

		ret = find_blkid(o->device, found, sizeof(found));
		if (ret < 0) {
			fail("cannot probe the device for signatures (libblkid): %s",
			     strerror(-ret));
			goto out;
		}
		if (ret > 0) {
			fail("contains a signature libblkid knows:%s; use -f to overwrite it",
			     found);
			ret = -EEXIST;
			goto out;
		}
	}
	ret = check_poison(dev, &l, &data_poison);
	if (ret)
		goto out;

	ret = get_random(rnd, sizeof(rnd));
	if (ret) {
		fail("getrandom: %s", strerror(-ret));
		goto out;
	}
	seed = rnd[2];
	now = mfs_now_ns();

	/* Invalidate the old superblocks first: a crash in between leaves no half-made fs. */
	memset(buf, 0, MFS_BLOCK_SIZE);
	ret = write_both(dev, 0, l.nr_blocks - 1, buf, 1);
	if (ret)
		goto out;
	if (!o->quiet && info.size >= MKFS_PROGRESS_MIN)
		mfs_progress_init(&g_bar, STDOUT_FILENO, o->device);
	g_bar_total = 2 * l.journal_len + l.meta_bitmap_blocks + l.inode_bitmap_blocks +
	              l.data_bitmap_blocks + l.inode_table_blocks + l.csum_table_blocks + 1;
	ret = zero_area(dev, l.journal_start, l.journal_len);
	progress(l.journal_len);
	if (!ret)
		ret = zero_area(dev, l.journal_twin, l.journal_len);
	progress(l.journal_len);
	if (ret)
		goto out;
	ret = write_bitmap(dev, &l, seed, buf, l.meta_bitmap_start, l.meta_bitmap_blocks,
	                   l.meta_len, l.meta_fixed);
	if (!ret)
		ret = write_bitmap(dev, &l, seed, buf, l.inode_bitmap_start, l.inode_bitmap_blocks,
		                   l.nr_inodes, 1);
	if (!ret)
		ret = write_bitmap(dev, &l, seed, buf, l.data_bitmap_start, l.data_bitmap_blocks,
		                   l.data_len, 0);
	progress(l.meta_bitmap_blocks + l.inode_bitmap_blocks + l.data_bitmap_blocks);
	if (!ret)
		ret = write_inode_table(dev, &l, seed, buf, now, rnd[4]);
	if (!ret)
		ret = write_csum_table(dev, &l, seed, buf);
	if (ret)
		goto out;
	ret = flush(dev);
	if (ret)
		goto out;

	fill_super(sb, &l, o, rnd, now);
	mfs_block_seal(sb, seed);
	ret = write_both(dev, l.nr_blocks - 1, 0, sb, 1);
	if (!ret)
		ret = write_both(dev, 0, 0, sb, 1);
	if (ret)
		goto out;
	ret = flush(dev);
	if (ret)
		goto out;
	progress(1);
	mfs_progress_clear(&g_bar);
	if (!o->quiet)
		print_summary(o, &info, &l, sb, data_poison);
out:
	free(buf);
	free(sb);
	blk_dev_close(dev);
	return ret;
}

int main(int argc, char **argv)
{
	struct mkfs_opts o;
	bool created = false;
	int ret, lock_fd;

	if (parse_args(argc, argv, &o))
		return 1;
	lock_fd = mkfs_lock(o.device);
	if (lock_fd == -EBUSY)
		return 1;
	if (prepare_image(&o, &created)) {
		if (lock_fd >= 0)
			close(lock_fd);
		return 1;
	}
	if (lock_fd == -ENOENT) { /* created just now */
		lock_fd = mkfs_lock(o.device);
		if (lock_fd == -EBUSY) {
			if (created)
				unlink(o.device);
			return 1;
		}
	}
	ret = mkfs_run(&o, lock_fd >= 0);
	if (ret && created)
		unlink(o.device);
	if (lock_fd >= 0)
		close(lock_fd);
	return ret ? 1 : 0;
}
