/* SPDX-License-Identifier: MIT */
/*
 * Device access for fsck.mendfs, all through the block engine: open (read-only
 * for -n, with the daemon's exclusive lock otherwise), the poison table, and
 * verified metadata reads that compare both copies of a block.  Nothing here
 * reads a poisoned sector: the poison table is consulted first and such a
 * copy counts as bad without touching the media.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "fsck.h"
#include "mfs_devlock.h"

static int poison_cmp(const void *a, const void *b)
{
	const struct blk_range *x = a, *y = b;

	return x->sector < y->sector ? -1 : x->sector > y->sector;
}

int fsck_open(struct fsck_ctx *ctx, char *err, size_t errlen)
{
	struct blk_dev_config cfg = {0};
	struct blk_dev_info info;
	int ret, waited = 0;

	/*
	 * The daemon's lock (blk_dev_open's BLK_CFG_EXCL: flock on the device),
	 * taken once on a descriptor of our own and held until fsck ends, so that
	 * no mount slips in while fsck reopens the device for library repairs.
	 */
	if (!ctx->read_only && ctx->lock_fd < 0) {
		ctx->lock_fd = open(ctx->device, O_RDONLY | O_CLOEXEC);
		/* held by a daemon that is exiting (unmounted, not done yet): wait for it */
		while (ctx->lock_fd >= 0 && flock(ctx->lock_fd, LOCK_EX | LOCK_NB) < 0) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			if (ret == -EBUSY && !waited++ &&
			    !mfs_dev_wait_exiting(ctx->device, MFS_DEV_EXIT_WAIT, "fsck.mendfs"))
				continue;
			close(ctx->lock_fd);
			ctx->lock_fd = -1;
			snprintf(err, errlen, "%s: %s", ctx->device,
			         ret == -EBUSY ? "device is in use by another process"
			                       : strerror(-ret));
			return ret;
		}
		/* a device that cannot be opened: blk_dev_open says why */
	} else if (ctx->read_only) {
		pid_t holder;

		/*
		 * -n takes no lock, but would read a filesystem an exiting daemon
		 * still writes: wait for it.  Decided by probing the lock itself
		 * (mfs_dev_wait_exiting), not by finding its holder in /proc/locks,
		 * which names the device and inode as the kernel sees them and can
		 * miss (a stat(2) of DEVICE may report another st_dev).
		 */
		mfs_dev_wait_exiting(ctx->device, MFS_DEV_EXIT_WAIT, "fsck.mendfs");
		holder = mfs_dev_lock_holder(ctx->device);
		/* as e2fsck: checked while the daemon writes, the report may not hold */
		if (mfs_dev_mounted(ctx->device, holder > 0 ? holder : 0))
			fprintf(stderr,
			        "fsck.mendfs: warning: %s is mounted; the daemon writes it while "
			        "it "
			        "is checked, so the results may be inaccurate\n",
			        ctx->device);
	}
	cfg.path = ctx->device;
	cfg.flags = ctx->read_only ? BLK_CFG_READONLY : 0;
	ret = blk_dev_open(&cfg, &ctx->dev, err, errlen);
	if (ret) {
		ctx->dev = NULL;
		return ret;
	}
	blk_dev_get_info(ctx->dev, &info);
	ctx->dev_blocks = info.size / MFS_BLOCK_SIZE;
	ret = fsck_poison_load(ctx);
	if (ret) {
		blk_dev_close(ctx->dev);
		ctx->dev = NULL;
	}
	return ret;
}

int fsck_poison_load(struct fsck_ctx *ctx)
{
	struct blk_dev_info info;
	unsigned total = 0, n;

	blk_dev_get_info(ctx->dev, &info);
	blk_poison_lookup(ctx->dev, 0, info.nr_sectors, NULL, 0, &total);
	free(ctx->poison);
	ctx->poison = NULL;
	ctx->npoison = 0;
	if (!total)
		return 0;
	ctx->poison = calloc(total, sizeof(*ctx->poison));
	if (!ctx->poison)
		return -ENOMEM;
	n = blk_poison_lookup(ctx->dev, 0, info.nr_sectors, ctx->poison, total, NULL);
	qsort(ctx->poison, n, sizeof(*ctx->poison), poison_cmp);
	ctx->npoison = n;
	return 0;
}

void fsck_close(struct fsck_ctx *ctx)
{
	if (!ctx->dev)
		return;
	if (!ctx->read_only)
		blk_flush(ctx->dev);
	blk_dev_close(ctx->dev);
	ctx->dev = NULL;
}

unsigned fsck_poison_after(const struct fsck_ctx *ctx, uint64_t sector)
{
	return blk_range_find(ctx->poison, ctx->npoison, sector);
}

/* Does any sector of blocks [blk, blk + n) sit on poison?  From the table, not the media. */
bool fsck_poisoned(struct fsck_ctx *ctx, uint64_t blk, uint64_t nblocks)
{
	unsigned i = fsck_poison_after(ctx, blk * SPB);

	return i < ctx->npoison && ctx->poison[i].sector < (blk + nblocks) * SPB;
}

uint64_t fsck_twin(const struct fsck_ctx *ctx, uint64_t blk)
{
	return ctx->dup ? mfs_sb_twin(&ctx->sb, blk) : 0;
}

bool fsck_in_meta_zone(const struct fsck_ctx *ctx, uint64_t blk)
{
	return blk >= ctx->sb.meta_start && blk - ctx->sb.meta_start < ctx->sb.meta_len;
}

bool fsck_in_data_zone(const struct fsck_ctx *ctx, uint64_t blk, uint64_t len)
{
	uint64_t s = ctx->sb.data_start, n = ctx->sb.data_len;

	return len >= 1 && blk >= s && blk - s < n && len <= n - (blk - s);
}

enum copy_state { COPY_OK, COPY_POISON, COPY_IOERR, COPY_CORRUPT };
static const char *const copy_state_name[] = {"valid", "poisoned", "unreadable",
                                              "corrupt (magic, type, location or checksum)"};

static enum copy_state read_copy(struct fsck_ctx *ctx, uint64_t where, uint64_t blk, uint16_t type,
                                 void *buf)
{
	if (where + 1 > ctx->dev_blocks)
		return COPY_IOERR;
	if (fsck_poisoned(ctx, where, 1))
		return COPY_POISON;
	if (blk_read(ctx->dev, where * SPB, buf, MFS_BLOCK_SIZE, 0))
		return COPY_IOERR;
	if (mfs_block_verify(buf, ctx->seed, type, blk))
		return COPY_CORRUPT;
	return COPY_OK;
}

static int write_block(struct fsck_ctx *ctx, uint64_t where, const void *buf)
{
	if (ctx->read_only)
		return -EROFS;
	if (where == 0 && buf != (const void *)&ctx->sb)
		return -EINVAL; /* only the superblock code writes block 0 */
	if (where + 1 > ctx->dev_blocks)
		return -EINVAL;
	return blk_write(ctx->dev, where * SPB, buf, MFS_BLOCK_SIZE, 0);
}

static int add_line(char ***v, size_t *n, size_t *cap, char *line)
{
	if (!line)
		return -ENOMEM;
	if (fsck_vec_grow((void **)v, cap, *n + 1, sizeof(**v))) {
		free(line);
		return -ENOMEM;
	}
	(*v)[(*n)++] = line;
	return 0;
}

static void meta_damage_line(struct fsck_ctx *ctx, const char *what, uint64_t blk, bool primary,
                             uint64_t where, bool twin_ok, bool repaired)
{
	char *line = NULL;

	if (asprintf(&line, "%s (block %llu): %s copy (block %llu) poisoned; %s%s", what,
	             (unsigned long long)blk, primary ? "primary" : "twin",
	             (unsigned long long)where,
	             !ctx->dup ? "no twin (metadata_dup off)"
	             : twin_ok ? "the other copy is intact"
	                       : "the other copy is bad too",
	             repaired ? "; repaired from it" : "") < 0)
		line = NULL;
	add_line(&ctx->meta_damage, &ctx->nmeta_damage, &ctx->cap_meta_damage, line);
}

int fsck_meta_read(struct fsck_ctx *ctx, uint64_t blk, uint16_t type, void *buf, const char *what)
{
	uint8_t *tbuf = NULL;
	enum copy_state sp, st = COPY_CORRUPT;
	uint64_t twin = fsck_twin(ctx, blk);
	int ret = 0;

	if (ctx->novl) {
		/* -n with a journal to replay: the block as replay would write it (both copies) */
		size_t lo = 0, hi = ctx->novl;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (ctx->ovl[mid].blk < blk)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ctx->novl && ctx->ovl[lo].blk == blk) {
			memcpy(buf, ctx->ovl[lo].img, MFS_BLOCK_SIZE);
			return mfs_block_verify(buf, ctx->seed, type, blk) ? -EUCLEAN : 0;
		}
	}
	sp = read_copy(ctx, blk, blk, type, buf);
	if (!twin) {
		if (sp == COPY_POISON && what)
			meta_damage_line(ctx, what, blk, true, blk, false, false);
		return sp == COPY_OK ? 0 : sp == COPY_CORRUPT ? -EUCLEAN : -EIO;
	}
	if (posix_memalign((void **)&tbuf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	st = read_copy(ctx, twin, blk, type, tbuf);

	if (sp == COPY_OK && st == COPY_OK) {
		const struct mfs_meta_hdr *hp = buf, *ht = (const void *)tbuf;

		if (memcmp(buf, tbuf, MFS_BLOCK_SIZE) && what) {
			/* both sealed but different: the newer transaction wins */
			bool twin_newer = ht->gen > hp->gen;

			if (fsck_fix_problem(
			            ctx, PR_META_COPY_BAD,
			            "%s (block %llu): the copies differ (generation %llu at "
			            "block %llu, %llu at block %llu): keep the newer",
			            what, (unsigned long long)blk, (unsigned long long)hp->gen,
			            (unsigned long long)blk, (unsigned long long)ht->gen,
			            (unsigned long long)twin)) {
				if (twin_newer)
					memcpy(buf, tbuf, MFS_BLOCK_SIZE);
				ret = write_block(ctx, twin_newer ? blk : twin, buf);
				if (ret)
					fsck_fix_failed(ctx, PR_META_COPY_BAD, ret);
				ret = 0;
			} else if (twin_newer) {
				memcpy(buf, tbuf, MFS_BLOCK_SIZE);
			}
		}
		goto out;
	}
	if (sp == COPY_OK || st == COPY_OK) {
		bool good_primary = sp == COPY_OK;
		uint64_t bad = good_primary ? twin : blk;
		enum copy_state bs = good_primary ? st : sp;
		bool fixed = false;

		if (!good_primary)
			memcpy(buf, tbuf, MFS_BLOCK_SIZE);
		if (what) {
			if (fsck_fix_problem(
			            ctx, PR_META_COPY_BAD,
			            "%s (block %llu): %s copy (block %llu) is %s, its twin (block "
			            "%llu) is intact",
			            what, (unsigned long long)blk,
			            good_primary ? "twin" : "primary", (unsigned long long)bad,
			            copy_state_name[bs],
			            (unsigned long long)(good_primary ? blk : twin))) {
				ret = write_block(ctx, bad, buf);
				if (ret)
					fsck_fix_failed(ctx, PR_META_COPY_BAD, ret);
				fixed = !ret;
				ret = 0;
			}
			if (bs == COPY_POISON)
				meta_damage_line(ctx, what, blk, !good_primary, bad, true, fixed);
		}
		goto out;
	}
	/* both bad */
	if (what) {
		if (sp == COPY_POISON)
			meta_damage_line(ctx, what, blk, true, blk, false, false);
		if (st == COPY_POISON)
			meta_damage_line(ctx, what, blk, false, twin, false, false);
	}
	ret = (sp == COPY_CORRUPT || st == COPY_CORRUPT) ? -EUCLEAN : -EIO;
out:
	free(tbuf);
	return ret;
}

int fsck_meta_write(struct fsck_ctx *ctx, uint64_t blk, void *buf)
{
	uint64_t twin = fsck_twin(ctx, blk);
	int ret;

	if (!fsck_in_meta_zone(ctx, blk))
		return -EINVAL;
	mfs_block_seal(buf, ctx->seed);
	ret = write_block(ctx, blk, buf);
	if (!ret && twin)
		ret = write_block(ctx, twin, buf);
	return ret;
}

int fsck_sb_write(struct fsck_ctx *ctx)
{
	struct mfs_superblock *sb = &ctx->sb, *img;
	int64_t now;
	int ret;

	if (ctx->read_only)
		return -EROFS;
	if (ctx->roots_rec) {
		/* the journaled roots record wins (FORMAT.md §6.4): make both agree */
		sb->quarantine_root = ctx->q_root;
		sb->quarantine_depth = ctx->q_depth;
		sb->orphan_root = ctx->o_root;
		sb->orphan_depth = ctx->o_depth;
	}
	now = mfs_now_ns();
	sb->write_time_ns = now > sb->write_time_ns ? now : sb->write_time_ns + 1;
	sb->hdr.blocknr = 0;
	mfs_block_seal(sb, sb->csum_seed);
	/* an aligned copy: O_DIRECT backends (uring on block devices) need one */
	if (posix_memalign((void **)&img, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	memcpy(img, sb, MFS_BLOCK_SIZE);
	ret = blk_write(ctx->dev, 0, img, MFS_BLOCK_SIZE, 0);
	if (!ret)
		ret = blk_flush(ctx->dev);
	if (!ret)
		ret = blk_write(ctx->dev, (ctx->dev_blocks - 1) * SPB, img, MFS_BLOCK_SIZE, 0);
	if (!ret)
		ret = blk_flush(ctx->dev);
	free(img);
	return ret;
}

static void inode_loc(const struct fsck_ctx *ctx, uint64_t ino, uint64_t *blk, size_t *off)
{
	*blk = ctx->sb.inode_table_start + (ino - 1) / MFS_INODES_PER_BLOCK;
	*off = sizeof(struct mfs_meta_hdr) +
	       (size_t)((ino - 1) % MFS_INODES_PER_BLOCK) * MFS_INODE_SIZE;
}

/*
 * Read the inode table block holding inode @ino (for writing it: @write):
 * *bufp (free it) gets the block, *blk its location, *off the inode's offset.
 */
static int inode_block(struct fsck_ctx *ctx, uint64_t ino, bool write, uint8_t **bufp,
                       uint64_t *blk, size_t *off)
{
	int ret;

	if (ino == 0 || ino > ctx->sb.nr_inodes)
		return -EINVAL;
	if (write && ctx->read_only)
		return -EROFS;
	if (posix_memalign((void **)bufp, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		return -ENOMEM;
	inode_loc(ctx, ino, blk, off);
	ret = fsck_meta_read(ctx, *blk, MFS_T_INODES, *bufp, NULL);
	if (ret)
		free(*bufp);
	return ret;
}

int fsck_inode_read(struct fsck_ctx *ctx, uint64_t ino, struct mfs_inode *di)
{
	uint8_t *buf;
	uint64_t blk;
	size_t off;
	int ret = inode_block(ctx, ino, false, &buf, &blk, &off);

	if (ret)
		return ret;
	memcpy(di, buf + off, sizeof(*di));
	free(buf);
	return 0;
}

int fsck_inode_write(struct fsck_ctx *ctx, uint64_t ino, const struct mfs_inode *di)
{
	uint8_t *buf;
	uint64_t blk;
	size_t off;
	int ret = inode_block(ctx, ino, true, &buf, &blk, &off);

	if (ret)
		return ret;
	memcpy(buf + off, di, sizeof(*di));
	ret = fsck_meta_write(ctx, blk, buf);
	free(buf);
	return ret;
}

uint64_t fsck_name_key(const struct fsck_ctx *ctx, const void *name, size_t len)
{
	uint64_t h = XXH3_64bits_withSeed(name, len, ctx->sb.dir_hash_seed) & MFS_NAME_KEY_MASK;

	return h ? h : 0x10000ull;
}
