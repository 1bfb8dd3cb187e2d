/* SPDX-License-Identifier: MIT */
/*
 * fsck-img: makes, inspects and corrupts mendfs images for the fsck tests
 * (tests/fsck/run-cases.sh).  It links the fs library: files are created with
 * the library (no FUSE), and corruptions are made on the raw device through
 * the engine, resealing blocks so that only the intended inconsistency is
 * left.
 *
 *   fsck-img populate IMG          files, directories, xattrs, links, a quarantine entry
 *   fsck-img verify IMG [SKIP...]  every populated file has its content (except SKIP paths)
 *   fsck-img ino IMG PATH          inode number
 *   fsck-img file IMG PATH SIZE    a new file of SIZE bytes (any name bytes: the JSON tests)
 *   fsck-img sector IMG PATH LBLK  first device sector of file block LBLK
 *   fsck-img getxattr IMG PATH NAME
 *   fsck-img xblock IMG PATH I     block I of PATH's out-of-line xattr values, and its twin
 *   fsck-img free-sector IMG       a sector of a free data block
 *   fsck-img cmp IMG A B LEN       exit 0 when the first LEN bytes of A and B are equal
 *   fsck-img many IMG N            N files in directories of 1000 (the speed figure)
 *   fsck-img orphan IMG            leaves an orphan (unlinked while open) and crashes
 *   fsck-img orphan-trunc IMG      leaves a truncate cut short (an orphan with links) and crashes
 *   fsck-img journal IMG           leaves committed transactions in the journal and crashes
 *   fsck-img corrupt IMG CASE      see corrupt_cases[]
 *   fsck-img meta-block IMG WHAT   prints a metadata block number (inode-table, dir-leaf:PATH)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mfs_int.h"
#include "mfs_recovery.h"

#define SPB MFS_SECTORS_PER_BLOCK

static const char *img;

static void die(const char *fmt, const char *a, int err)
{
	fprintf(stderr, "fsck-img: ");
	fprintf(stderr, fmt, a);
	if (err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	fputc('\n', stderr);
	exit(2);
}

static struct mfs *mnt(bool ro)
{
	struct mfs_mount_opts mo = {.read_only = ro};
	struct mfs *fs;
	char err[512];
	int ret = mfs_mount(img, &mo, &fs, err, sizeof(err));

	if (ret)
		die("mount: %s", err, ret);
	return fs;
}

/* Deterministic content: byte i of a file with seed s. */
static uint8_t pat(unsigned s, uint64_t i)
{
	uint64_t x = (i / 7 + 1) * 0x9e3779b97f4a7c15ull ^ s * 0xc2b2ae3d27d4eb4full;

	return (uint8_t)(x >> 29 ^ i);
}

struct pfile {
	const char *path;
	unsigned seed;
	uint64_t size;
	bool sparse; /* only even blocks written: one extent each, so an extent tree */
};

/* The populated files (regular), their content seeds and sizes. */
static const struct pfile files[] = {
        {"/hello.txt", 1, 10000, false},
        {"/dir/sub/data.bin", 2, 200 * 1024, false},
        {"/dir/frag.bin", 3, 47 * 4096, true},
        {"/dir/other.bin", 4, 24 * 4096, false},
        {"/hard1", 5, 5000, false},
        {"/lonely", 6, 3000, false},
        {"/dir/victim2", 7, 8192, false},
};

static uint64_t lookup_path(struct mfs *fs, const char *path)
{
	char buf[1024], *save = NULL, *tok;
	uint64_t ino = MFS_ROOT_INO;
	struct stat st;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		int ret = mfs_lookup(fs, ino, tok, &st);

		if (ret)
			return 0;
		ino = st.st_ino;
	}
	return ino;
}

static uint64_t create_file(struct mfs *fs, const char *path, mode_t mode)
{
	char buf[1024], *slash;
	uint64_t dir;
	struct stat st;
	int ret;

	snprintf(buf, sizeof(buf), "%s", path);
	slash = strrchr(buf, '/');
	*slash = '\0';
	dir = buf[0] ? lookup_path(fs, buf) : MFS_ROOT_INO;
	if (!dir)
		die("no directory for %s", path, 0);
	if (S_ISDIR(mode))
		ret = mfs_mkdir(fs, dir, slash + 1, mode & 07777, 0, 0, &st);
	else
		ret = mfs_mknod(fs, dir, slash + 1, mode, 0, 0, 0, &st);
	if (ret)
		die("create %s", path, ret);
	return st.st_ino;
}

static void write_pat(struct mfs *fs, uint64_t ino, unsigned seed, uint64_t off, uint64_t len)
{
	uint8_t *b = malloc(len);

	for (uint64_t i = 0; i < len; i++)
		b[i] = pat(seed, off + i);
	if (mfs_write(fs, ino, b, len, (off_t)off) != (ssize_t)len)
		die("write inode %s", "", EIO);
	free(b);
}

static int cmd_populate(void)
{
	struct mfs *fs = mnt(false);
	uint64_t ino[8], frag, other, hard, victim;
	static char large[20000];
	char name[64], big[200];
	struct stat st;
	int ret;

	create_file(fs, "/dir", S_IFDIR | 0755);
	create_file(fs, "/dir/sub", S_IFDIR | 0755);
	create_file(fs, "/many", S_IFDIR | 0755);
	ino[0] = create_file(fs, "/hello.txt", S_IFREG | 0644);
	write_pat(fs, ino[0], 1, 0, 10000);
	ino[1] = create_file(fs, "/dir/sub/data.bin", S_IFREG | 0644);
	write_pat(fs, ino[1], 2, 0, 200 * 1024);
	/* every other block of frag.bin: 24 extents, so an extent tree */
	frag = create_file(fs, "/dir/frag.bin", S_IFREG | 0644);
	other = create_file(fs, "/dir/other.bin", S_IFREG | 0644);
	for (uint64_t i = 0; i < 24; i++) {
		write_pat(fs, frag, 3, 2 * i * 4096, 4096);
		write_pat(fs, other, 4, i * 4096, 4096);
	}
	hard = create_file(fs, "/hard1", S_IFREG | 0644);
	write_pat(fs, hard, 5, 0, 5000);
	ret = mfs_link(fs, hard, lookup_path(fs, "/dir"), "hard2", &st);
	if (ret)
		die("link %s", "/dir/hard2", ret);
	ino[2] = create_file(fs, "/lonely", S_IFREG | 0644);
	write_pat(fs, ino[2], 6, 0, 3000);
	ino[3] = create_file(fs, "/dir/victim2", S_IFREG | 0644);
	write_pat(fs, ino[3], 7, 0, 8192);
	ret = mfs_symlink(fs, MFS_ROOT_INO, "link", "dir/sub/data.bin", 0, 0, &st);
	if (ret)
		die("symlink %s", "/link", ret);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "/many/f%03d", i);
		create_file(fs, name, S_IFREG | 0600);
	}
	ret = mfs_setxattr(fs, ino[0], "user.a", "1", 1, 0);
	memset(big, 'x', sizeof(big));
	if (!ret)
		ret = mfs_setxattr(fs, ino[1], "user.big", big, sizeof(big), 0);
	if (!ret)
		ret = mfs_setxattr(fs, ino[2], "user.big", big, sizeof(big), 0);
	/* out-of-line values: 5 blocks on hello.txt, 3 on data.bin */
	for (uint64_t i = 0; i < sizeof(large); i++)
		large[i] = (char)pat(9, i);
	if (!ret)
		ret = mfs_setxattr(fs, ino[0], "user.large", large, sizeof(large), 0);
	if (!ret)
		ret = mfs_setxattr(fs, ino[1], "user.large", large, 9000, 0);
	if (ret)
		die("setxattr %s", "", ret);

	/* a quarantine entry: a file whose block is poisoned, then unlinked */
	victim = create_file(fs, "/victim", S_IFREG | 0644);
	write_pat(fs, victim, 8, 0, 3 * 4096);
	mfs_sync(fs);
	{
		struct mfs_ino *ip;
		uint64_t pblk, count;
		bool unw;

		ret = mfs_iget(fs, victim, &ip);
		if (!ret)
			ret = mfs_bmap(fs, ip, 1, &pblk, &count, &unw);
		if (!ret)
			ret = blk_poison_add(fs->dev, pblk * SPB + 2, 1);
		mfs_iput(fs, ip);
	}
	if (!ret)
		ret = mfs_unlink(fs, MFS_ROOT_INO, "victim");
	if (ret)
		die("victim %s", "", ret);
	ret = mfs_unmount(fs);
	if (ret)
		die("unmount %s", "", ret);
	return 0;
}

/* Is @path's content exempt?  "~PATH": only its content (it must exist with its size). */
static bool skipped(const char *path, int nskip, char **skip)
{
	for (int i = 0; i < nskip; i++) {
		size_t l = strlen(skip[i]);

		if (skip[i][0] == '~')
			continue;

		if (!strcmp(path, skip[i]) ||
		    (l && skip[i][l - 1] == '*' && !strncmp(path, skip[i], l - 1)))
			return true;
	}
	return false;
}

static int cmd_verify(int nskip, char **skip)
{
	struct mfs *fs = mnt(true);
	int bad = 0;

	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		const struct pfile *pf = &files[f];
		uint64_t ino;
		uint8_t *b;
		ssize_t n;
		struct stat st;

		if (skipped(pf->path, nskip, skip))
			continue;
		ino = lookup_path(fs, pf->path);
		if (!ino || mfs_getattr(fs, ino, &st)) {
			fprintf(stderr, "verify: %s is missing\n", pf->path);
			bad++;
			continue;
		}
		if ((uint64_t)st.st_size != pf->size) {
			fprintf(stderr, "verify: %s has %lld bytes, expected %llu\n", pf->path,
			        (long long)st.st_size, (unsigned long long)pf->size);
			bad++;
			continue;
		}
		for (int i = 0; i < nskip; i++)
			if (skip[i][0] == '~' && !strcmp(skip[i] + 1, pf->path))
				goto next; /* exists with its size: content exempt */
		b = malloc(pf->size);
		n = mfs_read(fs, ino, b, pf->size, 0);
		if (n != (ssize_t)pf->size) {
			fprintf(stderr, "verify: reading %s: %zd\n", pf->path, n);
			bad++;
		} else {
			for (uint64_t i = 0; i < pf->size; i++)
				if (b[i] != (pf->sparse && (i / 4096) % 2 ? 0 : pat(pf->seed, i))) {
					fprintf(stderr, "verify: %s differs at byte %llu\n",
					        pf->path, (unsigned long long)i);
					bad++;
					break;
				}
		}
		free(b);
next:;
	}
	if (!skipped("/link", nskip, skip)) {
		char t[64] = "";
		uint64_t ino = lookup_path(fs, "/link");

		if (!ino || mfs_readlink(fs, ino, t, sizeof(t) - 1) != 16 ||
		    strcmp(t, "dir/sub/data.bin")) {
			fprintf(stderr, "verify: /link is wrong ('%s')\n", t);
			bad++;
		}
	}
	if (!skipped("/many/*", nskip, skip)) {
		char name[32];

		for (int i = 0; i < 300; i++) {
			snprintf(name, sizeof(name), "/many/f%03d", i);
			if (!lookup_path(fs, name)) {
				fprintf(stderr, "verify: %s is missing\n", name);
				bad++;
				break;
			}
		}
	}
	if (!skipped("/dir/hard2", nskip, skip) && !skipped("/hard1", nskip, skip)) {
		struct stat st;
		uint64_t a = lookup_path(fs, "/hard1"), b = lookup_path(fs, "/dir/hard2");

		if (!a || a != b || mfs_getattr(fs, a, &st) || st.st_nlink != 2) {
			fprintf(stderr, "verify: hard links wrong\n");
			bad++;
		}
	}
	if (!skipped("xattr", nskip, skip)) {
		char v[256];
		uint64_t ino = lookup_path(fs, "/hello.txt");

		if (!ino || mfs_getxattr(fs, ino, "user.a", v, sizeof(v)) != 1 || v[0] != '1') {
			fprintf(stderr, "verify: xattr user.a of /hello.txt is wrong\n");
			bad++;
		}
		ino = lookup_path(fs, "/dir/sub/data.bin");
		if (!ino || mfs_getxattr(fs, ino, "user.big", v, sizeof(v)) != 200) {
			fprintf(stderr, "verify: xattr user.big of /dir/sub/data.bin is wrong\n");
			bad++;
		}
		if (!skipped("large", nskip, skip)) {
			static char l[20000];
			ssize_t n;

			ino = lookup_path(fs, "/hello.txt");
			n = ino ? mfs_getxattr(fs, ino, "user.large", l, sizeof(l)) : -ENOENT;
			for (ssize_t i = 0; i < n && n == (ssize_t)sizeof(l); i++)
				n = l[i] == (char)pat(9, (uint64_t)i) ? n : -EBADMSG;
			if (n != (ssize_t)sizeof(l)) {
				fprintf(stderr, "verify: xattr user.large of /hello.txt: %zd\n", n);
				bad++;
			}
		}
	}
	mfs_unmount(fs);
	return bad ? 1 : 0;
}

/* --- raw access ---------------------------------------------------------------------- */

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

static uint64_t path_ino(const char *path)
{
	struct mfs *fs = mnt(true);
	uint64_t ino = lookup_path(fs, path);

	mfs_unmount(fs);
	if (!ino)
		die("no such path %s", path, 0);
	return ino;
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

static int cmd_corrupt(const char *cs)
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
		struct mfs_bt_slot *s = find_dirent(&r, MFS_ROOT_INO, "lonely", &blk);
		struct mfs_meta_hdr *h = (struct mfs_meta_hdr *)r.buf;
		unsigned i = (unsigned)(s - (struct mfs_bt_slot *)(r.buf + 48));

		memmove(s, s + 1, (h->nr_items - i - 1) * sizeof(*s));
		h->nr_items--;
		memset((struct mfs_bt_slot *)(r.buf + 48) + h->nr_items, 0, sizeof(*s));
		/* the root directory is one leaf (find_dirent checks): no parent key to keep */
		raw_write(&r, blk, true, 2);
		di = raw_inode(&r, MFS_ROOT_INO, &blk);
		di->dir_entries--;
		raw_write(&r, blk, true, 2);
	} else if (!strcmp(cs, "dir-loop")) { /* F0302: /dir and /dir/sub only reach each other */
		struct mfs_bt_slot *s = find_dirent(&r, MFS_ROOT_INO, "dir", &blk);
		struct mfs_meta_hdr *h = (struct mfs_meta_hdr *)r.buf;
		unsigned i = (unsigned)(s - (struct mfs_bt_slot *)(r.buf + 48));

		memmove(s, s + 1, (h->nr_items - i - 1) * sizeof(*s));
		h->nr_items--;
		memset((struct mfs_bt_slot *)(r.buf + 48) + h->nr_items, 0, sizeof(*s));
		raw_write(&r, blk, true, 2);
		di = raw_inode(&r, MFS_ROOT_INO, &blk);
		di->dir_entries--;
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

static int cmd_sector(const char *path, uint64_t lblk)
{
	struct mfs *fs = mnt(true);
	uint64_t ino = lookup_path(fs, path), pblk = 0, count;
	struct mfs_ino *ip;
	bool unw;
	int ret;

	if (!ino)
		die("no such path %s", path, 0);
	ret = mfs_iget(fs, ino, &ip);
	if (!ret)
		ret = mfs_bmap(fs, ip, lblk, &pblk, &count, &unw);
	if (!ret)
		mfs_iput(fs, ip);
	mfs_unmount(fs);
	if (ret || !pblk)
		die("bmap %s", path, ret ? ret : ENOENT);
	printf("%llu\n", (unsigned long long)(pblk * SPB));
	return 0;
}

static int cmd_getxattr(const char *path, const char *name)
{
	struct mfs *fs = mnt(true);
	uint64_t ino = lookup_path(fs, path);
	char v[2048];
	ssize_t n;

	if (!ino)
		die("no such path %s", path, 0);
	n = mfs_getxattr(fs, ino, name, v, sizeof(v) - 1);
	mfs_unmount(fs);
	if (n < 0)
		return 1;
	fwrite(v, 1, (size_t)n, stdout);
	return 0;
}

/* An orphan: unlinked while a reference is held, then a crash. */
static int cmd_orphan(void)
{
	struct mfs *fs = mnt(false);
	uint64_t ino = create_file(fs, "/ghost", S_IFREG | 0644);
	struct mfs_ino *ip;
	int ret;

	write_pat(fs, ino, 9, 0, 20000);
	ret = mfs_iget(fs, ino, &ip);
	if (!ret)
		ret = mfs_unlink(fs, MFS_ROOT_INO, "ghost");
	if (!ret)
		ret = mfs_sync(fs);
	if (ret)
		die("orphan %s", "", ret);
	mfs_crash(fs); /* the reference dies with the process */
	return 0;
}

/*
 * A truncate cut short (FORMAT.md §10): a file of 96 one-block extents is
 * truncated to one block in small steps, the journal fails a commit part-way
 * (fs->commit_fail_after, as an I/O error would), and the process crashes:
 * the device holds the new size, the orphan entry and some of the frees.
 */
static int cmd_orphan_trunc(void)
{
	struct mfs *fs = mnt(false);
	uint64_t ino = create_file(fs, "/cut", S_IFREG | 0644);
	struct mfs_ino *ip;
	int ret;

	for (unsigned i = 0; i < 96; i++)
		write_pat(fs, ino, 12, (uint64_t)i * 2 * 4096, 4096);
	ret = mfs_sync(fs);
	if (ret)
		die("sync %s", "", ret);
	fs->txn_step_blocks = 16;
	fs->commit_fail_after = 3;
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		die("iget %s", "/cut", ret);
	pthread_rwlock_wrlock(&ip->lock);
	ret = mfs_truncate(fs, ip, 4096);
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	if (ret != -EIO)
		die("truncate %s: expected EIO from the failed commit", "/cut", ret ? ret : EINVAL);
	mfs_crash(fs);
	return 0;
}

/* Committed transactions left in the journal: a crash after a sync. */
static int cmd_journal(void)
{
	struct mfs *fs = mnt(false);
	uint64_t ino = create_file(fs, "/journaled", S_IFREG | 0644);
	int ret;

	write_pat(fs, ino, 10, 0, 4096);
	ret = mfs_sync(fs);
	if (ret)
		die("sync %s", "", ret);
	mfs_crash(fs);
	return 0;
}

/* A sector inside a free data block near the end of the data zone. */
static int cmd_free_sector(void)
{
	struct raw r;

	raw_open(&r);
	printf("%llu\n", (unsigned long long)((r.sb.data_start + r.sb.data_len - 5) * SPB + 4));
	raw_close(&r);
	return 0;
}

/* Are the first @len bytes of two files equal? */
static int cmd_cmp(const char *a, const char *b, size_t len)
{
	struct mfs *fs = mnt(true);
	uint64_t ia = lookup_path(fs, a), ib = lookup_path(fs, b);
	uint8_t *x = malloc(len), *y = malloc(len);
	int ret = 1;

	if (ia && ib && mfs_read(fs, ia, x, len, 0) == (ssize_t)len &&
	    mfs_read(fs, ib, y, len, 0) == (ssize_t)len && !memcmp(x, y, len))
		ret = 0;
	mfs_unmount(fs);
	free(x);
	free(y);
	return ret;
}

/* @n files (every 10th with 4 KiB of data) in directories of 1000: the speed figure. */
static int cmd_many(uint64_t n)
{
	struct mfs *fs = mnt(false);
	uint64_t dir = 0;
	char name[32];
	uint8_t blk[4096];
	struct stat st;
	int ret = 0;

	memset(blk, 0x5a, sizeof(blk));
	for (uint64_t i = 0; i < n && !ret; i++) {
		if (i % 1000 == 0) {
			snprintf(name, sizeof(name), "d%06llu", (unsigned long long)(i / 1000));
			ret = mfs_mkdir(fs, MFS_ROOT_INO, name, 0755, 0, 0, &st);
			dir = st.st_ino;
		}
		snprintf(name, sizeof(name), "f%06llu", (unsigned long long)i);
		if (!ret)
			ret = mfs_mknod(fs, dir, name, S_IFREG | 0644, 0, 0, 0, &st);
		if (!ret && i % 10 == 0 && mfs_write(fs, st.st_ino, blk, sizeof(blk), 0) != 4096)
			ret = -EIO;
		if (!ret && i % 20000 == 19999)
			ret = mfs_sync(fs);
	}
	if (ret)
		die("many %s", "", ret);
	return mfs_unmount(fs) ? 1 : 0;
}

static int cmd_file(const char *path, uint64_t size)
{
	struct mfs *fs = mnt(false);

	write_pat(fs, create_file(fs, path, S_IFREG | 0644), 11, 0, size);
	return mfs_unmount(fs) ? 1 : 0;
}

static int cmd_ino(const char *path)
{
	printf("%llu\n", (unsigned long long)path_ino(path));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fsck-img CMD IMG ...\n");
		return 2;
	}
	img = argv[2];
	if (!strcmp(argv[1], "populate"))
		return cmd_populate();
	if (!strcmp(argv[1], "verify"))
		return cmd_verify(argc - 3, argv + 3);
	if (!strcmp(argv[1], "file") && argc == 5)
		return cmd_file(argv[3], strtoull(argv[4], NULL, 0));
	if (!strcmp(argv[1], "ino") && argc == 4)
		return cmd_ino(argv[3]);
	if (!strcmp(argv[1], "sector") && argc == 5)
		return cmd_sector(argv[3], strtoull(argv[4], NULL, 0));
	if (!strcmp(argv[1], "getxattr") && argc == 5)
		return cmd_getxattr(argv[3], argv[4]);
	if (!strcmp(argv[1], "xblock") && argc == 5) { /* prints the block and its twin */
		struct raw r;
		uint64_t b = xblock(argv[3], (unsigned)atoi(argv[4]));

		raw_open(&r);
		printf("%llu %llu\n", (unsigned long long)b, (unsigned long long)twin_of(&r, b));
		raw_close(&r);
		return 0;
	}
	if (!strcmp(argv[1], "cmp") && argc == 6)
		return cmd_cmp(argv[3], argv[4], strtoul(argv[5], NULL, 0));
	if (!strcmp(argv[1], "many") && argc == 4)
		return cmd_many(strtoull(argv[3], NULL, 0));
	if (!strcmp(argv[1], "free-sector"))
		return cmd_free_sector();
	if (!strcmp(argv[1], "orphan"))
		return cmd_orphan();
	if (!strcmp(argv[1], "orphan-trunc"))
		return cmd_orphan_trunc();
	if (!strcmp(argv[1], "journal"))
		return cmd_journal();
	if (!strcmp(argv[1], "corrupt") && argc == 4)
		return cmd_corrupt(argv[3]);
	fprintf(stderr, "fsck-img: bad command\n");
	return 2;
}
