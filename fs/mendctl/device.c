/* SPDX-License-Identifier: MIT */
/*
 * mendctl's offline commands on a device or image: show (the superblock, as
 * dumpe2fs -h shows ext4's), label and uuid (read them, or change them as
 * e2label and tune2fs -L / -U do).  The superblock is read with the mount's
 * rule (mfs_super_read: the newest checksummed copy).  A change takes the
 * lock a mounted filesystem's daemon holds (so a mounted filesystem is
 * refused), and writes both copies through mfs_super_write: the primary, a
 * flush, the backup, a flush; a crash between leaves one good copy of each
 * version, and the reader takes the newer.  grow grows the filesystem to its
 * grown device (the core's mfs_grow, under the same lock).  Calls the core
 * and the engine.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "mendfs/blk.h"
#include "mendfs/ioctl.h"
#include "mfs.h"
#include "mfs_devlock.h"
#include "mfs_grow.h"

/* Open @device through the engine; @write: with the daemon's lock (-EBUSY: mounted). */
static int dev_open(const char *device, bool write, struct blk_dev **dev, char *err, size_t errlen)
{
	struct blk_dev_config cfg = {.path = device};
	int ret;

	cfg.flags = write ? BLK_CFG_EXCL : BLK_CFG_READONLY;
	ret = blk_dev_open(&cfg, dev, err, errlen);
	/* held by a daemon that was unmounted and is still exiting: wait for it */
	if (ret == -EBUSY && !mfs_dev_wait_exiting(device, MFS_DEV_EXIT_WAIT, "mendctl"))
		ret = blk_dev_open(&cfg, dev, err, errlen);
	if (ret == -EBUSY)
		snprintf(err, errlen, "%s: in use (mounted, or being checked): unmount it first",
		         device);
	return ret;
}

int mendctl_dev_open(const char *device, bool write, struct mendctl_dev *d, char *err,
                     size_t errlen)
{
	bool force_ro = false, other_bad = false;
	int ret;

	memset(d, 0, sizeof(*d));
	ret = dev_open(device, write, &d->dev, err, errlen);
	if (ret)
		return ret;
	d->sb = aligned_alloc(MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	if (!d->sb) {
		mendctl_dev_close(d);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = mfs_super_read(d->dev, d->sb, &force_ro, &other_bad, err, errlen);
	if (!ret && write && force_ro) {
		snprintf(err, errlen, "%s: has features this version cannot write", device);
		ret = -EROFS;
	}
	if (ret) {
		mendctl_dev_close(d);
		return ret;
	}
	d->other_bad = other_bad;
	return 0;
}

int mendctl_dev_write(struct mendctl_dev *d, char *err, size_t errlen)
{
	struct mfs fs = {.dev = d->dev, .sb = *d->sb};
	int ret = mfs_super_write(&fs);

	if (ret)
		snprintf(err, errlen, "writing the superblock: %s", strerror(-ret));
	else
		*d->sb = fs.sb;
	return ret;
}

void mendctl_dev_close(struct mendctl_dev *d)
{
	if (d->dev)
		blk_dev_close(d->dev);
	free(d->sb);
	memset(d, 0, sizeof(*d));
}

void mendctl_uuid_format(const uint8_t u[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
	         u[13], u[14], u[15]);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int mendctl_uuid_parse(const char *s, uint8_t u[16])
{
	if (!strcmp(s, "random")) {
		if (getrandom(u, 16, 0) != 16)
			return -EIO;
		u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
		u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
		return 0;
	}
	if (strlen(s) != 36)
		return -EINVAL;
	for (int i = 0, b = 0; i < 36; i++) {
		int hi, lo;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -EINVAL;
			continue;
		}
		hi = hexval(s[i]);
		lo = hexval(s[++i]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		u[b++] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

const char *mendctl_state_name(uint32_t state)
{
	if (state & MFS_STATE_ERROR)
		return (state & MFS_STATE_CLEAN) ? "clean with errors" : "not clean with errors";
	return (state & MFS_STATE_CLEAN) ? "clean" : "not clean";
}

/* "metadata_dup xattr_blocks", unknown bits as their number ("ro_compat_bit5"). */
static void features(const struct mfs_superblock *sb, char *out, size_t len)
{
	static const struct {
		const char *name;
		int word; /* 0 compat, 1 ro_compat, 2 incompat */
		uint32_t bit;
	} known[] = {
	        {"metadata_dup", 1, MFS_FEATURE_RO_COMPAT_METADATA_DUP},
	        {"xattr_blocks", 2, MFS_FEATURE_INCOMPAT_XATTR_BLOCKS},
	};
	static const char *const words[] = {"compat", "ro_compat", "incompat"};
	uint32_t w[3] = {sb->feature_compat, sb->feature_ro_compat, sb->feature_incompat};
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (w[known[i].word] & known[i].bit) {
			used += (size_t)snprintf(out + used, len - used, "%s%s", used ? " " : "",
			                         known[i].name);
			w[known[i].word] &= ~known[i].bit;
		}
	}
	for (int k = 0; k < 3; k++)
		for (int b = 0; b < 32 && used < len; b++)
			if (w[k] & (1u << b))
				used += (size_t)snprintf(out + used, len - used, "%s%s_bit%d",
				                         used ? " " : "", words[k], b);
}

static void time_str(int64_t ns, char *out, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (ns <= 0 || !gmtime_r(&t, &tm) || !strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, len, "%s", ns ? "invalid" : "never");
}

void mendctl_sb_print(FILE *f, const char *device, const struct mendctl_dev *d)
{
	const struct mfs_superblock *sb = d->sb;
	char uuid[37], feat[256], mk[32], mnt[32], wr[32];

	mendctl_uuid_format(sb->uuid, uuid);
	features(sb, feat, sizeof(feat));
	time_str(sb->mkfs_time_ns, mk, sizeof(mk));
	time_str(sb->mount_time_ns, mnt, sizeof(mnt));
	time_str(sb->write_time_ns, wr, sizeof(wr));
	fprintf(f, "device:             %s\n", device);
	fprintf(f, "label:              %.63s\n", sb->label);
	fprintf(f, "uuid:               %s\n", uuid);
	fprintf(f, "format version:     %" PRIu32 "\n", sb->version);
	fprintf(f, "features:           %s\n", feat[0] ? feat : "(none)");
	fprintf(f, "state:              %s\n", mendctl_state_name(sb->state));
	fprintf(f, "block size:         %" PRIu32 "\n", sb->block_size);
	fprintf(f, "blocks:             %" PRIu64 "\n", sb->nr_blocks);
	fprintf(f, "data blocks:        %" PRIu64 " at %" PRIu64 "\n", sb->data_len,
	        sb->data_start);
	fprintf(f, "free data blocks:   %" PRIu64 "%s\n", sb->free_blocks,
	        (sb->state & MFS_STATE_CLEAN) ? "" : " (a hint: not clean)");
	fprintf(f, "inodes:             %" PRIu64 "\n", sb->nr_inodes);
	fprintf(f, "free inodes:        %" PRIu64 "\n", sb->free_inodes);
	fprintf(f, "journal:            %" PRIu64 " blocks at %" PRIu64 ", twin at %" PRIu64 "\n",
	        sb->journal_len, sb->journal_start, sb->journal_twin);
	fprintf(f, "meta zone:          %" PRIu64 " blocks at %" PRIu64 ", twin at %" PRIu64 "\n",
	        sb->meta_len, sb->meta_start, sb->meta_twin);
	fprintf(f, "free meta blocks:   %" PRIu64 "\n", sb->free_meta);
	fprintf(f, "mount count:        %" PRIu32 "\n", sb->mount_count);
	fprintf(f, "created:            %s\n", mk);
	fprintf(f, "last mounted:       %s\n", mnt);
	fprintf(f, "last written:       %s\n", wr);
	if (d->other_bad)
		fprintf(f, "note:               the other superblock copy is bad or older "
		           "(fsck.mendfs -y rewrites it)\n");
}

struct json_object *mendctl_sb_json(const char *device, const struct mendctl_dev *d)
{
	const struct mfs_superblock *sb = d->sb;
	struct json_object *o = json_object_new_object();
	char uuid[37], feat[256], label[64];
	int r = 0;

	if (!o)
		return NULL;
	mendctl_uuid_format(sb->uuid, uuid);
	features(sb, feat, sizeof(feat));
	snprintf(label, sizeof(label), "%.63s", sb->label);
	r |= mfs_json_add_name(o, "device", device);
	r |= mfs_json_add_text(o, "label", label);
	r |= mfs_json_add_text(o, "uuid", uuid);
	r |= mfs_json_add_u64(o, "version", sb->version);
	r |= mfs_json_add_text(o, "features", feat);
	r |= mfs_json_add_text(o, "state", mendctl_state_name(sb->state));
	r |= mfs_json_add_bool(o, "clean", sb->state & MFS_STATE_CLEAN);
	r |= mfs_json_add_bool(o, "errors", sb->state & MFS_STATE_ERROR);
	r |= mfs_json_add_u64(o, "block_size", sb->block_size);
	r |= mfs_json_add_u64(o, "blocks", sb->nr_blocks);
	r |= mfs_json_add_u64(o, "data_blocks", sb->data_len);
	r |= mfs_json_add_u64(o, "free_blocks", sb->free_blocks);
	r |= mfs_json_add_u64(o, "inodes", sb->nr_inodes);
	r |= mfs_json_add_u64(o, "free_inodes", sb->free_inodes);
	r |= mfs_json_add_u64(o, "journal_blocks", sb->journal_len);
	r |= mfs_json_add_u64(o, "meta_blocks", sb->meta_len);
	r |= mfs_json_add_u64(o, "free_meta_blocks", sb->free_meta);
	r |= mfs_json_add_u64(o, "mount_count", sb->mount_count);
	r |= mfs_json_add_u64(o, "mkfs_time_ns", (uint64_t)sb->mkfs_time_ns);
	r |= mfs_json_add_u64(o, "mount_time_ns", (uint64_t)sb->mount_time_ns);
	r |= mfs_json_add_u64(o, "write_time_ns", (uint64_t)sb->write_time_ns);
	r |= mfs_json_add_bool(o, "other_copy_bad", d->other_bad);
	if (r) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

int mendctl_grow(const char *device, struct mfs_grow_info *info, char *err, size_t errlen)
{
	struct blk_dev *dev = NULL;
	char why[512] = "";
	int ret = dev_open(device, true, &dev, err, errlen);

	if (ret)
		return ret;
	ret = mfs_grow(dev, info, why, sizeof(why));
	if (ret)
		snprintf(err, errlen, "%s: %s", device, why[0] ? why : strerror(-ret));
	blk_dev_close(dev);
	return ret;
}

/* What each refusal of MENDFS_IOC_GROW means (ioctl_mendfs(2)); the daemon's log has more. */
static const char *grow_why(int err)
{
	switch (err) {
	case EPERM:
		return "only root can grow a mounted filesystem";
	case EROFS:
		return "the filesystem is mounted read-only (or read-only after an error)";
	case EEXIST:
		return "the device did not grow: nothing to do";
	case EOPNOTSUPP:
		return "the device cannot change its size while mounted (devdax, or no room "
		       "reserved in the daemon's mapping): unmount it and run mendctl grow DEVICE";
	case EFBIG:
		return "the device grew past the room reserved at mount (16 times its size then, "
		       "at most 1 TiB more), or shrank: unmount it and run mendctl grow DEVICE";
	case ENOSPC:
		return "the device grew too little for the journal and metadata twins to move, "
		       "or the metadata zone has no room for the new bitmaps (the daemon's log "
		       "says which)";
	case EBUSY:
		return "another growth is running, or changes kept coming: try again";
	case EUCLEAN:
		return "a metadata block is damaged in every copy: unmount and run fsck.mendfs";
	default:
		return NULL;
	}
}

int mendctl_grow_online(const char *mnt, struct mfs_grow_info *info, char *err, size_t errlen)
{
	struct mendfs_ioc_grow a = {.version = MENDFS_IOC_VERSION};
	const char *why;
	int fd, ret;

	memset(info, 0, sizeof(*info));
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		ret = errno;
		snprintf(err, errlen, "open %s: %s", mnt, strerror(ret));
		return -ret;
	}
	ret = ioctl(fd, MENDFS_IOC_GROW, &a) < 0 ? errno : 0;
	close(fd);
	if (ret == ENOTTY || ret == EINVAL) {
		snprintf(err, errlen, "%s: not the mount point of a mendfs filesystem", mnt);
		return -ENOTTY;
	}
	if (ret) {
		why = grow_why(ret);
		snprintf(err, errlen, "%s: %s%s", mnt, why ? why : strerror(ret),
		         why ? "" : " (the daemon's log says why)");
		return -ret;
	}
	info->old_blocks = a.old_blocks;
	info->new_blocks = a.new_blocks;
	info->old_data_len = a.old_data_blocks;
	info->new_data_len = a.data_blocks;
	info->free_blocks = a.free_blocks;
	return 0;
}

struct json_object *mendctl_grow_json(const char *key, const char *what,
                                      const struct mfs_grow_info *g)
{
	struct json_object *o = json_object_new_object();
	int r = 0;

	if (!o)
		return NULL;
	r |= mfs_json_add_name(o, key, what);
	r |= mfs_json_add_u64(o, "old_blocks", g->old_blocks);
	r |= mfs_json_add_u64(o, "new_blocks", g->new_blocks);
	r |= mfs_json_add_u64(o, "old_data_blocks", g->old_data_len);
	r |= mfs_json_add_u64(o, "data_blocks", g->new_data_len);
	r |= mfs_json_add_u64(o, "free_blocks", g->free_blocks);
	r |= mfs_json_add_u64(o, "block_size", MFS_BLOCK_SIZE);
	if (r) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

void mendctl_grow_print(FILE *f, const char *what, const struct mfs_grow_info *g)
{
	fprintf(f,
	        "%s: grown from %" PRIu64 " to %" PRIu64 " blocks of %u bytes; data blocks %" PRIu64
	        " -> %" PRIu64 ", %" PRIu64 " free\n",
	        what, g->old_blocks, g->new_blocks, MFS_BLOCK_SIZE, g->old_data_len,
	        g->new_data_len, g->free_blocks);
}
