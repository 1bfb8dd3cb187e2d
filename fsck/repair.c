/* SPDX-License-Identifier: MIT */
/*
 * Repairs made through the fs library, after the passes of a round: the
 * filesystem is mounted (exclusive, journaled), which also runs the library's
 * orphan processing, and then
 *
 *  - damaged trees are rebuilt from their good entries (a new tree; the old
 *    blocks are left to the next round's bitmap check),
 *  - files that shared blocks with another get a copy of that data in new
 *    blocks,
 *  - unreachable inodes are linked into /lost+found (created if needed),
 *  - the quarantine gains poisoned free blocks and releases clean ones,
 *  - with --zero-damaged, damaged file ranges are zero-initialised in place
 *    (mfs_zeroinit: poison cleared, no reallocation) and recorded in the
 *    file's trusted.mendfs.lost xattr.
 *
 * Single blocks (twins, inodes, bitmaps, the superblock) are fixed by the
 * passes themselves; everything that changes a B+tree comes here, so trees
 * are only ever changed by the same code the daemon runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsck.h"
#include "mfs_recovery.h"

#define REBUILD_BATCH 256 /* tree inserts per transaction */
#define LOST_XATTR    "trusted.mendfs.lost"
#define LOST_MAX      1000 /* value bytes: the xattr must fit a tree leaf value */

static int rebuild_inode_tree(struct mfs *fs, const struct fsck_rebuild *rb)
{
	struct mfs_btree bt = {.kind = rb->kind, .owner = rb->owner};
	uint64_t blocks = 0, inserted = 0;
	struct mfs_ino *ip;
	size_t i = 0;
	int ret;

	ret = mfs_iget(fs, rb->owner, &ip);
	if (ret)
		return ret;
	pthread_rwlock_wrlock(&ip->lock);
	do {
		struct mfs_txn *txn;
		size_t end = i + REBUILD_BATCH < rb->n ? i + REBUILD_BATCH : rb->n;
		int r;

		ret = mfs_txn_begin(fs, &txn);
		if (ret)
			break;
		for (; i < end && !ret; i++) {
			ret = mfs_bt_insert(fs, txn, &bt, rb->ents[i].key, rb->ents[i].val,
			                    rb->ents[i].len);
			if (ret == -EEXIST) { /* a key salvaged twice: the first stays */
				ret = 0;
				continue;
			}
			if (!ret)
				inserted++;
			if (!ret && rb->kind == MFS_TREE_EXTENTS) {
				struct mfs_extent e;

				memcpy(&e, rb->ents[i].val, sizeof(e));
				blocks += e.len;
			}
		}
		switch (rb->kind) {
		case MFS_TREE_EXTENTS:
			/* nothing left: no tree at all (a file of holes), never a root of 0 */
			ip->di.ext_root = bt.root;
			ip->di.ext_depth = bt.depth;
			if (bt.root)
				ip->di.iflags |= MFS_IFL_EXTENT_TREE;
			else
				ip->di.iflags &= ~MFS_IFL_EXTENT_TREE;
			ip->di.nr_inline = 0;
			ip->di.blocks = blocks;
			break;
		case MFS_TREE_DIR:
			ip->di.dir_root = bt.root;
			ip->di.dir_depth = bt.depth;
			ip->di.dir_entries = inserted;
			break;
		case MFS_TREE_XATTR:
			ip->di.xattr_root = bt.root;
			ip->di.xattr_depth = bt.depth;
			break;
		}
		r = mfs_inode_write(fs, txn, ip);
		ret = ret ? ret : r;
		r = mfs_txn_end(txn);
		ret = ret ? ret : r;
	} while (!ret && i < rb->n);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	return ret;
}

/*
 * Insert @e into a tree whose root the superblock holds, as the core does: the
 * root goes to the roots record in the same transaction (FORMAT.md §6.4), and
 * the orphan tree keeps its root leaf once it has one (MFS_BT_KEEP_ROOT, as in
 * the core's orphan code).  An orphan entry carries no value.
 */
static int shared_tree_insert(struct mfs *fs, struct mfs_txn *txn, uint16_t kind,
                              const struct fsck_ent *e)
{
	bool orphan = kind == MFS_TREE_ORPHAN;
	uint64_t *root = orphan ? &fs->sb.orphan_root : &fs->sb.quarantine_root;
	uint32_t *depth = orphan ? &fs->sb.orphan_depth : &fs->sb.quarantine_depth;
	struct mfs_btree bt = {.root = *root,
	                       .depth = (uint16_t)*depth,
	                       .kind = kind,
	                       .flags = orphan ? MFS_BT_KEEP_ROOT : 0};
	int ret, r;

	pthread_mutex_lock(&fs->super_lock);
	ret = orphan ? mfs_bt_insert(fs, txn, &bt, e->key, NULL, 0)
	             : mfs_bt_insert(fs, txn, &bt, e->key, e->val, e->len);
	*root = bt.root;
	*depth = bt.depth;
	r = mfs_super_roots_log(fs, txn);
	pthread_mutex_unlock(&fs->super_lock);
	return ret ? ret : r;
}

static int rebuild_shared_tree(struct mfs *fs, const struct fsck_rebuild *rb)
{
	struct mfs_txn *txn;
	int ret, r;

	ret = mfs_txn_begin(fs, &txn);
	if (ret)
		return ret;
	for (size_t i = 0; i < rb->n && !ret; i++) {
		ret = shared_tree_insert(fs, txn, rb->kind, &rb->ents[i]);
		if (ret == -EEXIST)
			ret = 0;
	}
	r = mfs_txn_end(txn);
	return ret ? ret : r;
}

static int quarantine_add(struct mfs *fs, uint64_t start, uint64_t len)
{
	struct fsck_rebuild rb = {.kind = MFS_TREE_QUARANTINE};
	struct fsck_ent e = {.key = start, .len = sizeof(uint64_t), .val = (uint8_t *)&len};

	rb.ents = &e;
	rb.n = 1;
	return rebuild_shared_tree(fs, &rb);
}

/* Link @ino into /lost+found as #ino. */
static int reconnect(struct fsck_ctx *ctx, struct mfs *fs, uint64_t lpf, uint64_t ino)
{
	uint8_t val[10 + 32];
	char name[32];
	int nl = snprintf(name, sizeof(name), "#%llu", (unsigned long long)ino);
	uint64_t base = fsck_name_key(ctx, name, (size_t)nl), key = 0;
	struct mfs_ino *dp, *ip;
	struct mfs_txn *txn;
	struct mfs_btree bt;
	bool isdir;
	int ret, r;

	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		return ret;
	isdir = S_ISDIR(ip->di.mode);
	ret = mfs_iget(fs, lpf, &dp);
	if (ret) {
		mfs_iput(fs, ip);
		return ret;
	}
	memcpy(val, &ino, 8);
	val[8] = (uint8_t)((ip->di.mode & S_IFMT) >> 12);
	val[9] = (uint8_t)nl;
	memcpy(val + 10, name, (size_t)nl);

	pthread_rwlock_wrlock(&dp->lock);
	bt = (struct mfs_btree){.root = dp->di.dir_root,
	                        .depth = dp->di.dir_depth,
	                        .kind = MFS_TREE_DIR,
	                        .owner = lpf};
	for (uint64_t c = 0; c <= 0xffff; c++) {
		uint8_t tmp[MFS_BT_MAX_VALUE];
		uint16_t len = sizeof(tmp);

		r = mfs_bt_lookup(fs, &bt, base | c, tmp, &len);
		if (r == -ENOENT) {
			key = base | c;
			break;
		}
		if (r) {
			ret = r;
			break;
		}
		if (len == 10 + nl && !memcmp(tmp + 10, name, (size_t)nl)) {
			ret = -EEXIST;
			break;
		}
	}
	if (!ret && !key)
		ret = -ENOSPC;
	if (!ret)
		ret = mfs_txn_begin(fs, &txn);
	if (!ret) {
		ret = mfs_bt_insert(fs, txn, &bt, key, val, (uint16_t)(10 + nl));
		dp->di.dir_root = bt.root;
		dp->di.dir_depth = bt.depth;
		if (!ret) {
			dp->di.dir_entries++;
			if (isdir && ctx->lpf_created)
				dp->di.nlink++; /* pass 4 counted it when /lost+found existed */
		}
		r = mfs_inode_write(fs, txn, dp);
		ret = ret ? ret : r;
		r = mfs_txn_end(txn);
		ret = ret ? ret : r;
	}
	pthread_rwlock_unlock(&dp->lock);
	mfs_iput(fs, dp);

	if (!ret && isdir) {
		pthread_rwlock_wrlock(&ip->lock);
		ret = mfs_txn_begin(fs, &txn);
		if (!ret) {
			ip->di.parent = lpf;
			ret = mfs_inode_write(fs, txn, ip);
			r = mfs_txn_end(txn);
			ret = ret ? ret : r;
		}
		pthread_rwlock_unlock(&ip->lock);
	}
	mfs_iput(fs, ip);
	return ret;
}

/* Zero-init the damaged ranges of one file and record them in trusted.mendfs.lost. */
/* Write zeros over device blocks [blk, blk + n): clears their poison. */
static int zero_blocks_raw(struct mfs *fs, uint64_t blk, uint64_t n)
{
	uint64_t sector = blk * MFS_SECTORS_PER_BLOCK, nr = n * MFS_SECTORS_PER_BLOCK;

	while (nr) {
		uint64_t k = nr < 2048 ? nr : 2048; /* 1 MiB per bio */
		struct blk_bio bio;
		int ret;

		blk_bio_init(&bio, BLK_OP_WRITE_ZEROES, sector, NULL, (uint32_t)(k * 512), NULL,
		             NULL);
		ret = blk_submit_bio_wait(fs->dev, &bio);
		if (ret)
			return ret;
		sector += k;
		nr -= k;
	}
	return 0;
}

static int zero_file(struct mfs *fs, const struct fsck_range *z, size_t n)
{
	char *val;
	ssize_t old;
	size_t len, extra = 0;
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++)
		ret = mfs_zeroinit(fs, z[i].ino, z[i].off, z[i].len);
	if (ret)
		return ret;
	val = malloc(LOST_MAX + 64);
	if (!val)
		return -ENOMEM;
	old = mfs_getxattr(fs, z[0].ino, LOST_XATTR, val, LOST_MAX);
	if (old == -ENODATA || old < 0)
		old = 0;
	len = (size_t)old;
	for (size_t i = 0; i < n; i++) {
		char line[48];
		int l = snprintf(line, sizeof(line), "%llu %llu\n", (unsigned long long)z[i].off,
		                 (unsigned long long)z[i].len);

		if (len + (size_t)l > LOST_MAX - 24) {
			extra++;
			continue;
		}
		memcpy(val + len, line, (size_t)l);
		len += (size_t)l;
	}
	if (extra)
		len += (size_t)snprintf(val + len, 64, "+%zu more\n", extra);
	ret = mfs_setxattr(fs, z[0].ino, LOST_XATTR, val, len, 0);
	free(val);
	return ret;
}

int fsck_repair_library(struct fsck_ctx *ctx)
{
	/* not exclusive: fsck holds the device lock itself; the counters of a filesystem
	 * being repaired are not trusted (the library recounts them) */
	struct mfs_mount_opts mo = {.recount = true};
	struct mfs *fs = NULL;
	char err[512] = "";
	size_t i, j;
	int ret, r;

	ret = mfs_mount(ctx->device, &mo, &fs, err, sizeof(err));
	if (ret) {
		fsck_log(ctx, "fsck.mendfs: mounting %s for repairs failed: %s\n", ctx->device,
		         err[0] ? err : strerror(-ret));
		ctx->round_unfixed++;
		return ret;
	}

	for (i = 0; i < ctx->nrebuilds; i++) {
		const struct fsck_rebuild *rb = &ctx->rebuilds[i];

		r = rb->owner ? rebuild_inode_tree(fs, rb) : rebuild_shared_tree(fs, rb);
		if (r) {
			fsck_log(ctx, "rebuilding tree %u of inode %llu failed: %s\n", rb->kind,
			         (unsigned long long)rb->owner, strerror(-r));
			fsck_fix_failed(ctx, PR_TREE_BAD, r);
		}
	}

	/* shared blocks: the second owner gets its own copy (after its extent went) */
	for (i = 0; i < ctx->nclones; i++) {
		const struct fsck_clone *c = &ctx->clones[i];
		ssize_t n = mfs_write(fs, c->ino, c->data, c->len, (off_t)c->off);

		if (n != (ssize_t)c->len) {
			fsck_log(ctx,
			         "inode %llu: writing the copy of its shared blocks failed: %s\n",
			         (unsigned long long)c->ino, strerror(n < 0 ? (int)-n : EIO));
			fsck_fix_failed(ctx, PR_EXTENT_DUP, n < 0 ? (int)n : -EIO);
		}
	}

	if (ctx->need_lpf) {
		uint64_t lpf = ctx->lpf;

		if (!lpf) {
			struct stat st;

			r = mfs_mkdir(fs, MFS_ROOT_INO, "lost+found", 0700, 0, 0, &st);
			if (r == -EEXIST)
				r = mfs_lookup(fs, MFS_ROOT_INO, "lost+found", &st);
			else if (!r)
				ctx->lpf_created = true;
			if (r) {
				fsck_log(ctx, "creating /lost+found failed: %s\n", strerror(-r));
				fsck_fix_failed(ctx, PR_NO_LPF, r);
			} else {
				lpf = st.st_ino;
			}
		}
		for (uint64_t ino = 1; lpf && ino <= ctx->sb.nr_inodes; ino++) {
			if (!ctx->ino[ino].reconnect)
				continue;
			r = reconnect(ctx, fs, lpf, ino);
			if (r) {
				fsck_log(ctx, "linking inode %llu into /lost+found failed: %s\n",
				         (unsigned long long)ino, strerror(-r));
				fsck_fix_failed(ctx, PR_UNREACHABLE, r);
			}
		}
	}

	for (i = 0; i < ctx->nquar_add; i++) {
		r = quarantine_add(fs, ctx->quar_add[i].off, ctx->quar_add[i].len);
		if (r)
			fsck_fix_failed(ctx, PR_QUAR_MISSING, r);
	}
	for (i = 0; i < ctx->nquar_zero; i++) {
		struct fsck_range *q = &ctx->quar_zero[i];

		/* whole blocks of zeros: the engine clears the poison as it writes */
		r = zero_blocks_raw(fs, q->off, q->len);
		if (!r) /* in bounded steps, its own handles */
			r = mfs_quarantine_release(fs, q->off, q->len);
		if (r)
			fsck_fix_failed(ctx, PR_QUAR_CLEAN, r);
	}
	for (i = 0; i < ctx->nquar_rel; i++) {
		r = mfs_quarantine_release(fs, ctx->quar_rel[i].off, ctx->quar_rel[i].len);
		if (r)
			fsck_fix_failed(ctx, PR_QUAR_CLEAN, r);
	}

	for (i = 0; i < ctx->nzero; i = j) {
		for (j = i; j < ctx->nzero && ctx->zero[j].ino == ctx->zero[i].ino; j++)
			;
		r = zero_file(fs, &ctx->zero[i], j - i);
		if (r) {
			fsck_log(ctx, "zeroing the damaged ranges of inode %llu failed: %s\n",
			         (unsigned long long)ctx->zero[i].ino, strerror(-r));
			fsck_fix_failed(ctx, PR_DAMAGED_DATA, r);
		} else {
			ctx->zeroed_any = true;
		}
	}

	ret = mfs_unmount(fs);
	if (ret)
		fsck_log(ctx, "fsck.mendfs: unmounting after repairs: %s\n", strerror(-ret));
	return ret;
}
