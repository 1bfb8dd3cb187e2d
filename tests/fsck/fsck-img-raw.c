/* SPDX-License-Identifier: MIT */
/*
 * fsck-img's raw side (the commands are listed in fsck-img.c): the image
 * opened through the block engine without mounting it, blocks read, changed
 * and resealed (mfs_block_seal) so that each corruption leaves exactly the
 * inconsistency its fsck case wants.  Lookups go through the fs library
 * first (fsck-img.c's mnt and lookup_path).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsck-img.h"

struct raw {
	struct blk_dev *dev;
	struct mfs_superblock sb;
	uint64_t dev_blocks;
	uint8_t *buf;
};

static void raw_open(struct raw *r)
{
	struct blk_dev_config cfg = {.path = img};
	struct blk_dev_info info;
	char err[256];
	bool ro, other;
	int ret = blk_dev_open(&cfg, &r->dev, err, sizeof(err));

	if (ret)
		die("open: %s", err, ret);
	blk_dev_get_info(r->dev, &info);
	r->dev_blocks = info.size / MFS_BLOCK_SIZE;
	ret = mfs_super_read(r->dev, &r->sb, &ro, &other, err, sizeof(err));
	if (ret)
		die("superblock: %s", err, ret);
	if (posix_memalign((void **)&r->buf, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE))
		die("%s", "ENOMEM", ENOMEM);
}

static void raw_close(struct raw *r)
{
	blk_flush(r->dev);
	blk_dev_close(r->dev);
	free(r->buf);
}

static uint64_t twin_of(struct raw *r, uint64_t b)
{
	if (b >= r->sb.meta_start && b < r->sb.meta_start + r->sb.meta_len)
		return b - r->sb.meta_start + r->sb.meta_twin;
	if (b >= r->sb.journal_start && b < r->sb.journal_start + r->sb.journal_len)
		return b - r->sb.journal_start + r->sb.journal_twin;
	return 0;
}

static void raw_read(struct raw *r, uint64_t b)
{
	int ret = blk_read(r->dev, b * SPB, r->buf, MFS_BLOCK_SIZE, 0);

	if (ret)
		die("read block %s", "", ret);
}

/* Write r->buf to @b: @seal reseals it; @copies 1 = primary only, 2 = both, 3 = twin only. */
static void raw_write(struct raw *r, uint64_t b, bool seal, int copies)
{
	uint64_t t = twin_of(r, b);
	int ret = 0;

	if (seal)
		mfs_block_seal(r->buf, r->sb.csum_seed);
	if (copies != 3)
		ret = blk_write(r->dev, b * SPB, r->buf, MFS_BLOCK_SIZE, 0);
	if (!ret && copies >= 2 && t)
		ret = blk_write(r->dev, t * SPB, r->buf, MFS_BLOCK_SIZE, 0);
	if (ret)
		die("write block %s", "", ret);
}

static void sb_write(struct raw *r, int copies, int64_t time_delta)
{
	r->sb.write_time_ns += time_delta;
	mfs_block_seal(&r->sb, r->sb.csum_seed);
	if (copies & 1)
		blk_write(r->dev, 0, &r->sb, MFS_BLOCK_SIZE, 0);
	if (copies & 2)
		blk_write(r->dev, (r->dev_blocks - 1) * SPB, &r->sb, MFS_BLOCK_SIZE, 0);
}

static uint64_t ino_blk(struct raw *r, uint64_t ino, size_t *off)
{
	*off = sizeof(struct mfs_meta_hdr) + ((ino - 1) % MFS_INODES_PER_BLOCK) * MFS_INODE_SIZE;
	return r->sb.inode_table_start + (ino - 1) / MFS_INODES_PER_BLOCK;
}

static struct mfs_inode *raw_inode(struct raw *r, uint64_t ino, uint64_t *blk)
{
	size_t off;

	*blk = ino_blk(r, ino, &off);
	raw_read(r, *blk);
	return (struct mfs_inode *)(r->buf + off);
}

/* First leaf of a tree (leftmost descent). */
static uint64_t first_leaf(struct raw *r, uint64_t root, unsigned depth)
{
	uint64_t b = root;

	if (!root)
		die("%s", "no tree there", 0);
	for (unsigned l = depth; l > 0; l--) {
		raw_read(r, b);
		b = ((struct mfs_bt_ptr *)(r->buf + sizeof(struct mfs_meta_hdr)))[0].child;
	}
	raw_read(r, b);
	return b;
}

/* The leaf slot (in r->buf) of the dirent named @name in directory @dir; the leaf's block. */
static struct mfs_bt_slot *find_dirent(struct raw *r, uint64_t dir, const char *name,
                                       uint64_t *leaf)
{
	uint64_t blk;
	struct mfs_inode di = *raw_inode(r, dir, &blk);
	size_t nl = strlen(name);

	if (di.dir_depth)
		die("find_dirent: %s is in a deep directory", name, 0);
	*leaf = first_leaf(r, di.dir_root, 0);
	for (unsigned i = 0; i < ((struct mfs_meta_hdr *)r->buf)->nr_items; i++) {
		struct mfs_bt_slot *s = (struct mfs_bt_slot *)(r->buf + 48) + i;

		if (s->len == 10 + nl && !memcmp(r->buf + s->off + 10, name, nl))
			return s;
	}
	die("no entry %s", name, 0);
	return NULL;
}

/*
 * Take the entry @name out of the root directory's leaf (the root is one leaf:
 * find_dirent checks, so no parent key to keep) and lower its entry count.
 */
static void drop_root_dirent(struct raw *r, const char *name)
{
	uint64_t blk;
	struct mfs_bt_slot *s = find_dirent(r, MFS_ROOT_INO, name, &blk);
	struct mfs_meta_hdr *h = (struct mfs_meta_hdr *)r->buf;
	unsigned i = (unsigned)(s - (struct mfs_bt_slot *)(r->buf + 48));
	struct mfs_inode *di;

	memmove(s, s + 1, (h->nr_items - i - 1) * sizeof(*s));
	h->nr_items--;
	memset((struct mfs_bt_slot *)(r->buf + 48) + h->nr_items, 0, sizeof(*s));
	raw_write(r, blk, true, 2);
	di = raw_inode(r, MFS_ROOT_INO, &blk);
	di->dir_entries--;
	raw_write(r, blk, true, 2);
}

static void poison_file(const char *line)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s.badblocks", img);
	f = fopen(path, "a");
	if (!f)
		die("open %s", path, errno);
	fprintf(f, "%s\n", line);
	fclose(f);
}

/* Block @i of @path's out-of-line xattr values. */
static uint64_t xblock(const char *path, unsigned i)
{
	struct mfs *fs = mnt(true);
	uint64_t *v = NULL, b = 0;
	struct mfs_ino *ip;
	size_t n = 0;

	if (mfs_iget(fs, lookup_path(fs, path), &ip) == 0) {
		if (mfs_xattr_blocks(fs, ip, &v, &n) == 0 && i < n)
			b = v[i];
		mfs_iput(fs, ip);
	}
	free(v);
	mfs_unmount(fs);
	if (!b)
		die("no xattr value block in %s", path, 0);
	return b;
}

int cmd_corrupt(const char *cs)
{
	struct raw r;
	uint64_t blk, ino = 0;
	struct mfs_inode *di;
	size_t off;

	/* lookups first (they mount), then raw changes */
	uint64_t hello = path_ino("/hello.txt"), data = path_ino("/dir/sub/data.bin");
	uint64_t frag = path_ino("/dir/frag.bin"), other = path_ino("/dir/other.bin");
	uint64_t dir = path_ino("/dir"), sub = path_ino("/dir/sub"), lonely = path_ino("/lonely");
	uint64_t many = path_ino("/many");
	uint64_t xb = xblock("/hello.txt", 0);

	if (!strcmp(cs, "symlink-block")) { /* a symlink whose target is file data */
		struct mfs *fs = mnt(false);
		char target[200];
		struct stat st;
		int ret;

		memset(target, 'a', sizeof(target) - 1);
		target[sizeof(target) - 1] = '\0';
		ret = mfs_symlink(fs, MFS_ROOT_INO, "longlink", target, 0, 0, &st);
		if (!ret)
			ret = mfs_unmount(fs);
		if (ret)
			die("symlink %s", "/longlink", ret);
		ino = st.st_ino;
	}
	if (!strcmp(cs, "link-max")) { /* /hard1 with the most links: 2 + 64998 in /links */
		struct mfs *fs = mnt(false);
		uint64_t hard = lookup_path(fs, "/hard1");
		char name[16];
		struct stat st;
		int ret = mfs_mkdir(fs, MFS_ROOT_INO, "links", 0755, 0, 0, &st);
		uint64_t links = st.st_ino;

		for (unsigned i = 0; !ret && i < MFS_LINK_MAX - 2; i++) {
			snprintf(name, sizeof(name), "l%05u", i);
			ret = mfs_link(fs, hard, links, name, &st);
		}
		if (!ret)
			ret = mfs_unmount(fs);
		if (ret)
			die("links %s", "/links", ret);
		ino = hard;
	}
	raw_open(&r);
	if (!strcmp(cs, "symlink-block")) { /* F0105: readlink would find no block */
		di = raw_inode(&r, ino, &blk);
		if (di->nr_inline != 1)
			die("%s: expected one inline extent", "/longlink", 0);
		di->u.ext[0].flags |= MFS_EXT_UNWRITTEN;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "sb-primary")) { /* F0001 */
		raw_read(&r, 0);
		r.buf[200] ^= 0xff;
		blk_write(r.dev, 0, r.buf, MFS_BLOCK_SIZE, 0);
	} else if (!strcmp(cs, "sb-differ")) { /* F0002 */
		snprintf(r.sb.label, sizeof(r.sb.label), "stale");
		sb_write(&r, 2, -1000);
	} else if (!strcmp(cs, "sb-error")) { /* F0003 */
		r.sb.state |= MFS_STATE_ERROR;
		sb_write(&r, 3, 0);
	} else if (!strcmp(cs, "roots-bad")) { /* F0005 */
		raw_read(&r, r.sb.inode_table_start);
		uint64_t *rec = (uint64_t *)(r.buf + 48 + 15 * 256);
		rec[0] = 0x53544f4f52534d4dull;
		rec[3] = r.dev_blocks + 100; /* orphan root */
		raw_write(&r, r.sb.inode_table_start, true, 2);
	} else if (!strcmp(cs, "journal-poison")) { /* F0006 */
		char l[64];

		snprintf(l, sizeof(l), "%llu 8",
		         (unsigned long long)((r.sb.journal_start + 5) * SPB));
		poison_file(l);
	} else if (!strcmp(cs, "meta-copy")) { /* F0101 */
		raw_read(&r, r.sb.inode_table_start);
		r.buf[300] ^= 0x5a;
		raw_write(&r, r.sb.inode_table_start, false, 1);
	} else if (!strcmp(cs, "meta-poison")) { /* F0101 through poison */
		char l[64];

		ino_blk(&r, hello, &off);
		snprintf(l, sizeof(l), "%llu 1",
		         (unsigned long long)(ino_blk(&r, hello, &off) * SPB + 3));
		poison_file(l);
	} else if (!strcmp(cs, "meta-lost")) { /* F0102: a leaf of /many, both copies */
		di = raw_inode(&r, many, &blk);
		uint64_t root = di->dir_root;
		unsigned depth = di->dir_depth;

		blk = first_leaf(&r, root, depth);
		r.buf[100] ^= 0xff;
		raw_write(&r, blk, false, 2);
	} else if (!strcmp(cs, "meta-dup")) { /* F0103: lonely's xattr tree is data.bin's */
		di = raw_inode(&r, data, &blk);
		uint64_t xr = di->xattr_root;

		di = raw_inode(&r, lonely, &blk);
		di->xattr_root = xr;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "itable-hdr")) { /* F0104 */
		raw_read(&r, r.sb.inode_table_start + 1);
		((struct mfs_meta_hdr *)r.buf)->nr_items = 14;
		raw_write(&r, r.sb.inode_table_start + 1, true, 2);
	} else if (!strcmp(cs, "inode-bad")) { /* F0105 */
		di = raw_inode(&r, lonely, &blk);
		di->mode = 0170644;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "inode-blocks")) { /* F0106 */
		di = raw_inode(&r, hello, &blk);
		di->blocks += 5;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "inode-field")) { /* F0107 */
		di = raw_inode(&r, hello, &blk);
		di->parent = 7;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "extent-bad")) { /* F0108 */
		di = raw_inode(&r, lonely, &blk);
		di->u.ext[0].pblk = r.dev_blocks + 10;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "file-size")) { /* F0113: a size past the largest file size */
		di = raw_inode(&r, lonely, &blk);
		di->size = MFS_FILE_SIZE_MAX + 1;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "extent-past-max")) { /* F0113: other.bin's extent straddles it */
		di = raw_inode(&r, other, &blk);
		if (di->nr_inline != 1 || di->u.ext[0].len < 2)
			die("%s: expected one inline extent of several blocks", "/dir/other.bin",
			    0);
		di->u.ext[0].lblk = MFS_FILE_BLOCKS_MAX - 1;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "extent-dup")) { /* F0109: lonely's extent on hello's block */
		di = raw_inode(&r, hello, &blk);
		uint64_t p = di->u.ext[0].pblk;

		di = raw_inode(&r, lonely, &blk);
		di->u.ext[0].pblk = p;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "tree-bad")) { /* F0110: frag.bin's extent leaf out of order */
		di = raw_inode(&r, frag, &blk);
		uint64_t root = di->ext_root;
		unsigned depth = di->ext_depth;

		blk = first_leaf(&r, root, depth);
		struct mfs_bt_slot *s = (struct mfs_bt_slot *)(r.buf + 48);
		uint64_t k = s[1].key;
		s[1].key = s[2].key;
		s[2].key = k;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "xattr-bad")) { /* F0111 */
		di = raw_inode(&r, hello, &blk);
		di->inline_xattr[0] = 0; /* name_len 0 */
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "xattr-name")) { /* F0111: user.a becomes xser.a */
		di = raw_inode(&r, hello, &blk);
		if (memcmp(di->inline_xattr + 4, "user.a", 6))
			die("%s: user.a is not the first inline xattr", "/hello.txt", 0);
		di->inline_xattr[4] = 'x';
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "xattr-nul")) { /* F0111: user.a becomes "user.\0" */
		di = raw_inode(&r, hello, &blk);
		if (memcmp(di->inline_xattr + 4, "user.a", 6))
			die("%s: user.a is not the first inline xattr", "/hello.txt", 0);
		di->inline_xattr[9] = 0;
		raw_write(&r, blk, true, 2);
	} else if (!strncmp(cs, "xattr-value-", 12)) { /* F0112: hello's user.large */
		struct mfs_meta_hdr *h = (struct mfs_meta_hdr *)r.buf;

		raw_read(&r, xb);
		if (!strcmp(cs, "xattr-value-csum")) /* a valid block, a wrong value */
			r.buf[1000] ^= 1;
		else if (!strcmp(cs, "xattr-value-owner"))
			h->owner = lonely;
		else if (!strcmp(cs, "xattr-value-lost")) /* both copies fail their checksum */
			r.buf[1000] ^= 1;
		else
			die("unknown case %s", cs, 0);
		raw_write(&r, xb, strcmp(cs, "xattr-value-lost") != 0, 2);
	} else if (!strcmp(cs, "xattr-shared")) { /* F0112: data.bin's value names hello's block */
		uint64_t leaf = first_leaf(&r, raw_inode(&r, data, &blk)->xattr_root, 0);

		for (unsigned i = 0; i < ((struct mfs_meta_hdr *)r.buf)->nr_items; i++) {
			struct mfs_bt_slot *s = (struct mfs_bt_slot *)(r.buf + 48) + i;
			uint8_t *rec = r.buf + s->off;

			if (rec[1] &
			    MFS_XATTR_F_BLOCKS) /* the first block after the 16-byte ref header */
				memcpy(rec + 4 + rec[0] + 16, &xb, 8);
		}
		raw_write(&r, leaf, true, 2);
	} else if (!strcmp(cs, "xattr-leak")) { /* F0502: data.bin's xattr tree dropped */
		di = raw_inode(&r, data, &blk);
		di->xattr_root = 0;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dirent-bad")) { /* F0201: a name no longer matching its key */
		struct mfs_bt_slot *s = find_dirent(&r, dir, "victim2", &blk);

		r.buf[s->off + 10] = 'V';
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dirent-ino")) { /* F0202: entry naming a free inode */
		struct mfs_bt_slot *s = find_dirent(&r, dir, "victim2", &blk);
		uint64_t freeino = r.sb.nr_inodes - 1;

		memcpy(r.buf + s->off, &freeino, 8);
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dirent-type")) { /* F0203 */
		struct mfs_bt_slot *s = find_dirent(&r, dir, "victim2", &blk);

		r.buf[s->off + 8] = 2;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dir-hardlink")) { /* F0204: /lonely's entry names /dir/sub */
		struct mfs_bt_slot *s = find_dirent(&r, MFS_ROOT_INO, "lonely", &blk);

		memcpy(r.buf + s->off, &sub, 8);
		r.buf[s->off + 8] = 4;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "link-max")) { /* F0207: /lonely's entry names /hard1 too */
		struct mfs_bt_slot *s = find_dirent(&r, MFS_ROOT_INO, "lonely", &blk);

		memcpy(r.buf + s->off, &ino, 8);
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dir-parent")) { /* F0205 */
		di = raw_inode(&r, sub, &blk);
		di->parent = 1;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dir-parent-range")) { /* F0205: a parent past the inode table */
		di = raw_inode(&r, sub, &blk);
		di->parent = r.sb.nr_inodes + 5;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "mode-bits")) { /* F0107: bits beyond S_IFMT | 07777 */
		di = raw_inode(&r, hello, &blk);
		di->mode |= 0x10000000u;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dir-entries")) { /* F0206 */
		di = raw_inode(&r, dir, &blk);
		di->dir_entries += 3;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "root-bad")) { /* F0301 */
		di = raw_inode(&r, MFS_ROOT_INO, &blk);
		di->mode = 0;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "unreachable")) { /* F0302, F0303: /lonely's entry removed */
		drop_root_dirent(&r, "lonely");
	} else if (!strcmp(cs, "dir-loop")) { /* F0302: /dir and /dir/sub only reach each other */
		struct mfs_bt_slot *s;

		drop_root_dirent(&r, "dir");
		di = raw_inode(&r, MFS_ROOT_INO, &blk);
		di->nlink--;
		raw_write(&r, blk, true, 2);
		/* sub's entry data.bin now names /dir, whose parent becomes sub */
		s = find_dirent(&r, sub, "data.bin", &blk);
		memcpy(r.buf + s->off, &dir, 8);
		r.buf[s->off + 8] = 4;
		raw_write(&r, blk, true, 2);
		di = raw_inode(&r, dir, &blk);
		di->parent = sub;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "nlink")) { /* F0401 */
		di = raw_inode(&r, hello, &blk);
		di->nlink = 5;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "bitmap-hdr")) { /* F0501 */
		raw_read(&r, r.sb.data_bitmap_start);
		((struct mfs_meta_hdr *)r.buf)->nr_items = 7;
		raw_write(&r, r.sb.data_bitmap_start, true, 2);
	} else if (!strcmp(cs, "bitmap-diff")) { /* F0502: hello's first block marked free */
		di = raw_inode(&r, hello, &blk);
		uint64_t bit = di->u.ext[0].pblk - r.sb.data_start;
		uint64_t bmb = r.sb.data_bitmap_start + bit / MFS_BITMAP_BITS;

		raw_read(&r, bmb);
		bit %= MFS_BITMAP_BITS;
		r.buf[48 + bit / 8] &= (uint8_t) ~(1u << (bit % 8));
		raw_write(&r, bmb, true, 2);
	} else if (!strcmp(cs, "sb-counters")) { /* F0503 */
		r.sb.free_blocks += 10;
		sb_write(&r, 3, 0);
	} else if (!strcmp(cs, "quar-bad")) { /* F0504: the quarantine entry runs off the zone */
		uint64_t q = r.sb.quarantine_root, len;

		raw_read(&r, r.sb.inode_table_start);
		if (*(uint64_t *)(r.buf + 48 + 15 * 256) == 0x53544f4f52534d4dull)
			q = *(uint64_t *)(r.buf + 48 + 15 * 256 + 8);
		if (!q)
			die("%s", "no quarantine tree", 0);
		raw_read(&r, q);
		struct mfs_bt_slot *s = (struct mfs_bt_slot *)(r.buf + 48);
		len = r.sb.data_len + 5;
		memcpy(r.buf + s[0].off, &len, 8);
		raw_write(&r, q, true, 2);
	} else if (!strcmp(cs, "quar-clean")) { /* F0505: the poison is gone */
		char path[4096];

		snprintf(path, sizeof(path), "%s.badblocks", img);
		unlink(path);
	} else if (!strcmp(cs, "quar-missing")) { /* F0506: a free data block poisoned */
		char l[64];

		snprintf(l, sizeof(l), "%llu 2",
		         (unsigned long long)((r.sb.data_start + r.sb.data_len - 3) * SPB + 1));
		poison_file(l);
	} else if (!strcmp(cs, "orphan-flag")) { /* F0507 */
		di = raw_inode(&r, hello, &blk);
		di->iflags |= MFS_IFL_ORPHAN;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "other-copy")) { /* F0101 on a B+tree node's twin */
		di = raw_inode(&r, frag, &blk);
		uint64_t root = di->ext_root;

		raw_read(&r, root);
		r.buf[2000] ^= 1;
		raw_write(&r, root, false, 3);
	} else {
		die("unknown case %s", cs, 0);
	}
	(void)ino;
	(void)other;
	raw_close(&r);
	return 0;
}

/* A sector inside a free data block near the end of the data zone. */
int cmd_free_sector(void)
{
	struct raw r;

	raw_open(&r);
	printf("%llu\n", (unsigned long long)((r.sb.data_start + r.sb.data_len - 5) * SPB + 4));
	raw_close(&r);
	return 0;
}

int cmd_xblock(const char *path, unsigned i)
{
	struct raw r;
	uint64_t b = xblock(path, i);

	raw_open(&r);
	printf("%llu %llu\n", (unsigned long long)b, (unsigned long long)twin_of(&r, b));
	raw_close(&r);
	return 0;
}
