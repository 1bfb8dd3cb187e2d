/* SPDX-License-Identifier: MIT */
/*
 * Metadata checksums and the superblock.
 *
 * Checksums: XXH3-64 seeded with the superblock's csum_seed over the whole
 * 4096-byte block, the header's csum field counted as zero.  The superblock itself is
 * sealed with its own csum_seed field.
 *
 * The superblock lives at block 0 (primary) and at the device's last block
 * (backup); both carry blocknr 0.  Reading takes the valid copy with the
 * newest write_time_ns (primary on a tie); a copy that sits on poison, fails
 * its checksum or has no magic is invalid.  If the chosen copy then fails
 * validation (a field out of range), the other checksummed copy is used when
 * it passes (logged).  Writing seals one image and writes
 * the primary, flushes, then the backup, flushes: a crash tears at most one
 * copy.
 *
 * In-memory structures are the on-disk little-endian layout: this file (and
 * the rest of fs/) is built for little-endian hosts only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "mfs.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "mendfs keeps on-disk structures in memory as they are: little-endian hosts only"
#endif

#define CSUM_OFF offsetof(struct mfs_meta_hdr, csum)

/* --- checksums ------------------------------------------------------------ */

uint64_t mfs_block_csum(const void *block, uint64_t seed)
{
	/* a copy with the csum zeroed: cheaper than the hash itself, and the block stays const */
	uint64_t tmp[MFS_BLOCK_SIZE / sizeof(uint64_t)];

	memcpy(tmp, block, MFS_BLOCK_SIZE);
	tmp[CSUM_OFF / sizeof(uint64_t)] = 0;
	return XXH3_64bits_withSeed(tmp, MFS_BLOCK_SIZE, seed);
}

void mfs_block_seal(void *block, uint64_t seed)
{
	struct mfs_meta_hdr *hdr = block;

	hdr->csum = mfs_block_csum(block, seed);
}

int mfs_block_verify(const void *block, uint64_t seed, uint16_t type, uint64_t blocknr)
{
	const struct mfs_meta_hdr *hdr = block;

	if (hdr->magic != MFS_META_MAGIC)
		return -EUCLEAN;
	if (type && hdr->type != type)
		return -EUCLEAN;
	if (hdr->blocknr != blocknr)
		return -EUCLEAN;
	if (hdr->csum != mfs_block_csum(block, seed))
		return -EUCLEAN;
	return 0;
}

/* --- superblock --------------------------------------------------------------- */

/* [start, start + len) inside [lo, hi), without overflow. */
static bool range_in(uint64_t start, uint64_t len, uint64_t lo, uint64_t hi)
{
	return len <= hi - lo && start >= lo && start - lo <= hi - lo - len;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static uint64_t bits_in(uint64_t blocks)
{
	return blocks > UINT64_MAX / (8ull * MFS_BLOCK_SIZE) ? UINT64_MAX
	                                                     : blocks * 8ull * MFS_BLOCK_SIZE;
}

struct sb_zone {
	const char *name;
	uint64_t start, len;
};

/*
 * Everything but the checksum: version, features, geometry against the
 * device's @dev_blocks.  Returns 0, -EOPNOTSUPP (unknown incompat feature) or
 * -EINVAL, with a message.
 */
static int sb_validate(const struct mfs_superblock *sb, uint64_t dev_blocks, bool *force_ro,
                       char *err, size_t errlen)
{
	bool dup = sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_METADATA_DUP;
	bool csum = sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM;
	struct sb_zone z[5], in[5];
	unsigned nz = 0, nin = 4, i, j;
	uint32_t unknown;

	if (sb->magic != MFS_SB_MAGIC) {
		blk_err(err, errlen, "bad superblock magic %#llx", (unsigned long long)sb->magic);
		return -EINVAL;
	}
	if (sb->version != MFS_FORMAT_VERSION) {
		blk_err(err, errlen, "format version %u is not supported (this is version %u)",
		        sb->version, MFS_FORMAT_VERSION);
		return -EOPNOTSUPP;
	}
	if (sb->block_size != MFS_BLOCK_SIZE) {
		blk_err(err, errlen, "block size %u is not supported (only %u)", sb->block_size,
		        MFS_BLOCK_SIZE);
		return -EINVAL;
	}
	unknown = sb->feature_incompat & ~MFS_FEATURE_INCOMPAT_SUPP;
	if (unknown) {
		blk_err(err, errlen, "unknown incompatible feature bit %d (incompat %#x): refusing",
		        __builtin_ctz(unknown), sb->feature_incompat);
		return -EOPNOTSUPP;
	}
	if (sb->nr_blocks < dev_blocks) {
		blk_err(err, errlen,
		        "filesystem size is %llu blocks but the device has %llu: if the device "
		        "grew, run 'mendctl grow DEVICE' to grow the filesystem to it (else: wrong "
		        "device)",
		        (unsigned long long)sb->nr_blocks, (unsigned long long)dev_blocks);
		return -EINVAL;
	}
	if (sb->nr_blocks > dev_blocks) {
		blk_err(err, errlen,
		        "filesystem size is %llu blocks but the device has %llu: wrong device, "
		        "or the device shrank (mendfs cannot shrink: restore its size)",
		        (unsigned long long)sb->nr_blocks, (unsigned long long)dev_blocks);
		return -EINVAL;
	}
	if (sb->journal_len < 3 || sb->meta_len == 0) {
		blk_err(err, errlen, "journal (%llu blocks) or metadata zone (%llu) too small",
		        (unsigned long long)sb->journal_len, (unsigned long long)sb->meta_len);
		return -EINVAL;
	}
	if (dup != (sb->journal_twin != 0 && sb->meta_twin != 0)) {
		blk_err(err, errlen, "metadata_dup is %s but the twin zones are at %llu and %llu",
		        dup ? "on" : "off", (unsigned long long)sb->journal_twin,
		        (unsigned long long)sb->meta_twin);
		return -EINVAL;
	}
	z[nz++] = (struct sb_zone){"journal", sb->journal_start, sb->journal_len};
	z[nz++] = (struct sb_zone){"metadata zone", sb->meta_start, sb->meta_len};
	z[nz++] = (struct sb_zone){"data zone", sb->data_start, sb->data_len};
	if (dup) {
		z[nz++] = (struct sb_zone){"journal twin", sb->journal_twin, sb->journal_len};
		z[nz++] = (struct sb_zone){"metadata twin", sb->meta_twin, sb->meta_len};
	}
	for (i = 0; i < nz; i++) {
		/* blocks 0 and nr_blocks - 1 are the superblocks */
		if (!range_in(z[i].start, z[i].len, 1, dev_blocks - 1)) {
			blk_err(err, errlen,
			        "%s [%llu, +%llu) lies outside the device (%llu blocks)", z[i].name,
			        (unsigned long long)z[i].start, (unsigned long long)z[i].len,
			        (unsigned long long)dev_blocks);
			return -EINVAL;
		}
		for (j = 0; j < i; j++)
			if (ranges_overlap(z[i].start, z[i].len, z[j].start, z[j].len)) {
				blk_err(err, errlen, "%s and %s overlap", z[j].name, z[i].name);
				return -EINVAL;
			}
	}
	in[0] = (struct sb_zone){"inode table", sb->inode_table_start, sb->inode_table_blocks};
	in[1] = (struct sb_zone){"inode bitmap", sb->inode_bitmap_start, sb->inode_bitmap_blocks};
	in[2] = (struct sb_zone){"metadata bitmap", sb->meta_bitmap_start, sb->meta_bitmap_blocks};
	in[3] = (struct sb_zone){"data bitmap", sb->data_bitmap_start, sb->data_bitmap_blocks};
	if (csum) {
		in[nin++] = (struct sb_zone){"data checksum table", sb->csum_table_start,
		                             sb->csum_table_blocks};
		if (sb->csum_table_blocks <
		    (sb->data_len + MFS_CSUM_BLOCKS_PER_TBLOCK - 1) / MFS_CSUM_BLOCKS_PER_TBLOCK) {
			blk_err(err, errlen,
			        "data checksum table of %llu blocks cannot cover %llu data blocks",
			        (unsigned long long)sb->csum_table_blocks,
			        (unsigned long long)sb->data_len);
			return -EINVAL;
		}
	}
	for (i = 0; i < nin; i++) {
		if (!in[i].len || !range_in(in[i].start, in[i].len, sb->meta_start,
		                            sb->meta_start + sb->meta_len)) {
			blk_err(err, errlen, "%s [%llu, +%llu) is not inside the metadata zone",
			        in[i].name, (unsigned long long)in[i].start,
			        (unsigned long long)in[i].len);
			return -EINVAL;
		}
		for (j = 0; j < i; j++)
			if (ranges_overlap(in[i].start, in[i].len, in[j].start, in[j].len)) {
				blk_err(err, errlen, "%s and %s overlap", in[j].name, in[i].name);
				return -EINVAL;
			}
	}
	if (sb->nr_inodes == 0 || sb->inode_table_blocks < (sb->nr_inodes + MFS_INODES_PER_BLOCK -
	                                                    1) / MFS_INODES_PER_BLOCK) {
		blk_err(err, errlen, "inode table of %llu blocks cannot hold %llu inodes",
		        (unsigned long long)sb->inode_table_blocks,
		        (unsigned long long)sb->nr_inodes);
		return -EINVAL;
	}
	if (bits_in(sb->inode_bitmap_blocks) < sb->nr_inodes ||
	    bits_in(sb->meta_bitmap_blocks) < sb->meta_len ||
	    bits_in(sb->data_bitmap_blocks) < sb->data_len) {
		blk_err(err, errlen, "an allocation bitmap is too small for its zone");
		return -EINVAL;
	}
	if (sb->free_blocks > sb->data_len || sb->free_inodes > sb->nr_inodes ||
	    sb->free_meta > sb->meta_len) {
		blk_err(err, errlen, "free counts exceed their zones");
		return -EINVAL;
	}
	if (sb->journal_tail >= sb->journal_len) {
		blk_err(err, errlen, "journal tail %llu beyond the journal (%llu blocks)",
		        (unsigned long long)sb->journal_tail, (unsigned long long)sb->journal_len);
		return -EINVAL;
	}
	if (sb->feature_ro_compat & ~MFS_FEATURE_RO_COMPAT_SUPP)
		*force_ro = true;
	return 0;
}

enum sb_copy_state {
	SB_OK,
	SB_MEDIA,   /* unreadable */
	SB_NOMAGIC, /* not a mendfs superblock */
	SB_CORRUPT, /* magic, but wrong type/location/checksum */
};

static const char *const sb_state_name[] = {
        [SB_OK] = "valid",
        [SB_MEDIA] = "media error",
        [SB_NOMAGIC] = "no magic",
        [SB_CORRUPT] = "checksum mismatch",
};

static enum sb_copy_state sb_read_copy(struct blk_dev *dev, uint64_t blk, struct mfs_superblock *sb)
{
	int ret = blk_read(dev, blk * MFS_SECTORS_PER_BLOCK, sb, MFS_BLOCK_SIZE, 0);

	if (ret)
		return SB_MEDIA;
	if (sb->hdr.magic != MFS_META_MAGIC && sb->magic != MFS_SB_MAGIC)
		return SB_NOMAGIC;
	if (mfs_block_verify(sb, sb->csum_seed, MFS_T_SUPER, 0))
		return SB_CORRUPT;
	return SB_OK;
}

/* mfs_super_read() for a filesystem of @nblocks (the backup copy at @nblocks - 1). */
static int sb_read(struct blk_dev *dev, uint64_t nblocks, struct mfs_superblock *sb, bool *force_ro,
                   bool *other_bad, char *err, size_t errlen)
{
	struct mfs_superblock *copy[2] = {NULL, NULL};
	enum sb_copy_state st[2];
	uint64_t where[2];
	int ret, best, i;
	bool ro = false;

	*force_ro = false;
	*other_bad = false;
	where[0] = 0;
	where[1] = nblocks - 1;
	for (i = 0; i < 2; i++) {
		if (posix_memalign((void **)&copy[i], MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
			ret = -ENOMEM;
			goto out;
		}
		st[i] = sb_read_copy(dev, where[i], copy[i]);
	}

	/* the newest checksummed copy decides; primary on a tie */
	best = -1;
	if (st[0] == SB_OK)
		best = 0;
	if (st[1] == SB_OK && (best < 0 || copy[1]->write_time_ns > copy[0]->write_time_ns))
		best = 1;
	if (best < 0) {
		if (st[0] == SB_NOMAGIC && st[1] == SB_NOMAGIC) {
			blk_err(err, errlen,
			        "not a mendfs filesystem (no superblock magic at "
			        "block 0 or %llu)",
			        (unsigned long long)where[1]);
			ret = -EINVAL;
		} else if (st[0] == SB_CORRUPT || st[1] == SB_CORRUPT) {
			blk_err(err, errlen,
			        "mendfs superblock corrupt: primary (block 0): %s, backup (block "
			        "%llu): %s",
			        sb_state_name[st[0]], (unsigned long long)where[1],
			        sb_state_name[st[1]]);
			ret = -EUCLEAN;
		} else {
			blk_err(err, errlen,
			        "no readable superblock: primary (block 0): %s, backup (block "
			        "%llu): "
			        "%s",
			        sb_state_name[st[0]], (unsigned long long)where[1],
			        sb_state_name[st[1]]);
			ret = -EIO;
		}
		goto out;
	}
	ret = sb_validate(copy[best], nblocks, &ro, err, errlen);
	if (ret == -EINVAL && st[!best] == SB_OK) {
		/*
		 * The newest checksummed copy is out of range: the other one, if it
		 * passes, is used (FORMAT.md §4.2).  It is at most one superblock
		 * write older (both are written in turn, primary first, and journal
		 * space is reused only after both), so its journal position still
		 * names transactions that replay correctly.  The bad copy is
		 * rewritten by the next superblock write (a read-write mount's own).
		 */
		char why[256], other[256] = "";
		bool ro2 = false;
		int r2;

		snprintf(why, sizeof(why), "%s", err && errlen ? err : "invalid");
		r2 = sb_validate(copy[!best], nblocks, &ro2, other, sizeof(other));
		if (r2 == 0) {
			fprintf(stderr,
			        "mendfs: superblock: the %s copy (block %llu) is invalid (%s): "
			        "using the %s copy (block %llu)\n",
			        best ? "backup" : "primary", (unsigned long long)where[best], why,
			        best ? "primary" : "backup", (unsigned long long)where[!best]);
			best = !best;
			ro = ro2;
			ret = 0;
			if (err && errlen)
				err[0] = '\0';
		} else {
			blk_err(err, errlen,
			        "both superblock copies are invalid: %s (block %llu): %s; %s "
			        "(block "
			        "%llu): %s",
			        best ? "backup" : "primary", (unsigned long long)where[best], why,
			        best ? "primary" : "backup", (unsigned long long)where[!best],
			        other);
		}
	}
	if (ret)
		goto out;
	*other_bad = st[!best] != SB_OK || memcmp(copy[0], copy[1], MFS_BLOCK_SIZE) != 0;
	*force_ro = ro;
	memcpy(sb, copy[best], sizeof(*sb));
out:
	free(copy[0]);
	free(copy[1]);
	return ret;
}

int mfs_super_read(struct blk_dev *dev, struct mfs_superblock *sb, bool *force_ro, bool *other_bad,
                   char *err, size_t errlen)
{
	struct blk_dev_info info;

	blk_dev_get_info(dev, &info);
	if (info.size / MFS_BLOCK_SIZE < 8) {
		blk_err(err, errlen, "device too small for mendfs (%llu bytes)",
		        (unsigned long long)info.size);
		return -EINVAL;
	}
	return sb_read(dev, info.size / MFS_BLOCK_SIZE, sb, force_ro, other_bad, err, errlen);
}

int mfs_super_read_size(struct blk_dev *dev, uint64_t fs_blocks, struct mfs_superblock *sb,
                        bool *force_ro, bool *other_bad, char *err, size_t errlen)
{
	struct blk_dev_info info;

	blk_dev_get_info(dev, &info);
	if (fs_blocks < 8 || fs_blocks > info.size / MFS_BLOCK_SIZE) {
		blk_err(err, errlen,
		        "a filesystem of %llu blocks does not fit the device (%llu bytes)",
		        (unsigned long long)fs_blocks, (unsigned long long)info.size);
		return -EINVAL;
	}
	return sb_read(dev, fs_blocks, sb, force_ro, other_bad, err, errlen);
}

int mfs_super_write(struct mfs *fs)
{
	struct mfs_superblock *img;
	int64_t now;
	int ret;

	if (fs->read_only)
		return -EROFS;
	if (posix_memalign((void **)&img, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	now = mfs_now_ns();
	/* strictly newer than what is on disk, so a reader prefers this copy */
	if (now <= fs->sb.write_time_ns)
		now = fs->sb.write_time_ns + 1;
	fs->sb.write_time_ns = now;
	fs->sb.hdr.magic = MFS_META_MAGIC;
	fs->sb.hdr.type = MFS_T_SUPER;
	fs->sb.hdr.blocknr = 0;
	memcpy(img, &fs->sb, MFS_BLOCK_SIZE);
	mfs_block_seal(img, img->csum_seed);
	fs->sb.hdr.csum = img->hdr.csum;

	ret = blk_write(fs->dev, 0, img, MFS_BLOCK_SIZE, 0);
	if (!ret)
		ret = blk_flush(fs->dev);
	if (!ret)
		ret = blk_write(fs->dev, (fs->sb.nr_blocks - 1) * MFS_SECTORS_PER_BLOCK, img,
		                MFS_BLOCK_SIZE, 0);
	if (!ret)
		ret = blk_flush(fs->dev);
	free(img);
	return ret;
}

int mfs_super_validate(const struct mfs_superblock *sb, uint64_t dev_blocks, bool *force_ro,
                       char *err, size_t errlen)
{
	*force_ro = false;
	return sb_validate(sb, dev_blocks, force_ro, err, errlen);
}
