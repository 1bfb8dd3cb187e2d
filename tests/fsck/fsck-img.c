/* SPDX-License-Identifier: MIT */
/*
 * fsck-img: makes, inspects and corrupts mendfs images for the fsck tests
 * (tests/fsck/run-cases.sh).  It links the fs library: files are created with
 * the library (no FUSE), and corruptions are made on the raw device through
 * the engine (fsck-img-raw.c), resealing blocks so that only the intended
 * inconsistency is left.
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
 *   fsck-img acl IMG PATH NAME KIND  stores ACL xattr NAME of KIND (see acl_value) on PATH
 *                                  without the ACL rules; prints where: inline, tree, blocks
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

#include "fsck-img.h"
#include "mfs_recovery.h"

const char *img;

void die(const char *fmt, const char *a, int err)
{
	fprintf(stderr, "fsck-img: ");
	fprintf(stderr, fmt, a);
	if (err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	fputc('\n', stderr);
	exit(2);
}

struct mfs *mnt(bool ro)
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

uint64_t lookup_path(struct mfs *fs, const char *path)
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

uint64_t path_ino(const char *path)
{
	struct mfs *fs = mnt(true);
	uint64_t ino = lookup_path(fs, path);

	mfs_unmount(fs);
	if (!ino)
		die("no such path %s", path, 0);
	return ino;
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

/* Put entry @i of an ACL value in @v. */
static void acl_ent(uint8_t *v, unsigned i, unsigned tag, unsigned perm, uint32_t id)
{
	uint8_t *e = v + MFS_ACL_HDR_SIZE + (size_t)i * MFS_ACL_ENTRY_SIZE;

	e[0] = (uint8_t)tag;
	e[1] = (uint8_t)(tag >> 8);
	e[2] = (uint8_t)perm;
	e[3] = 0;
	for (int k = 0; k < 4; k++)
		e[4 + k] = (uint8_t)(id >> (8 * k));
}

/*
 * An ACL value of @kind into @v (room for 300 entries); returns its size.
 *   minimal    owner, group, other: valid
 *   named      owner, user 1000, group, mask, other: valid
 *   large      owner, 200 named users, group, mask, other: valid, stored out of line
 *   bad-tag    named with the mask's tag 0x40 (unknown)
 *   bad-large  large, its last named user without an id
 *   short      2 bytes (small enough for the inode's inline area)
 */
static size_t acl_value(const char *kind, uint8_t *v)
{
	bool large = !strcmp(kind, "large") || !strcmp(kind, "bad-large");
	unsigned n = 0, users = large ? 200 : 1;

	if (!strcmp(kind, "short")) {
		v[0] = MFS_ACL_VERSION;
		v[1] = 0;
		return 2;
	}
	v[0] = MFS_ACL_VERSION;
	v[1] = v[2] = v[3] = 0;
	acl_ent(v, n++, MFS_ACL_USER_OBJ, 7, MFS_ACL_UNDEFINED_ID);
	if (strcmp(kind, "minimal"))
		for (unsigned i = 0; i < users; i++)
			acl_ent(v, n++, MFS_ACL_USER, 4,
			        !strcmp(kind, "bad-large") && i == users - 1 ? MFS_ACL_UNDEFINED_ID
			                                                     : 1000 + i);
	acl_ent(v, n++, MFS_ACL_GROUP_OBJ, 5, MFS_ACL_UNDEFINED_ID);
	if (strcmp(kind, "minimal"))
		acl_ent(v, n++, !strcmp(kind, "bad-tag") ? 0x40 : MFS_ACL_MASK, 5,
		        MFS_ACL_UNDEFINED_ID);
	acl_ent(v, n++, MFS_ACL_OTHER, 4, MFS_ACL_UNDEFINED_ID);
	if (strcmp(kind, "minimal") && strcmp(kind, "named") && strcmp(kind, "bad-tag") && !large)
		die("unknown ACL kind %s", kind, 0);
	return MFS_ACL_HDR_SIZE + (size_t)n * MFS_ACL_ENTRY_SIZE;
}

/* Store ACL xattr @name of @kind on @path as it is (the xattr layer, not acl.c's rules). */
static int cmd_acl(const char *path, const char *name, const char *kind)
{
	static uint8_t v[MFS_ACL_HDR_SIZE + 300 * MFS_ACL_ENTRY_SIZE];
	size_t size = acl_value(kind, v), nl = strlen(name);
	struct mfs *fs = mnt(false);
	uint64_t ino = lookup_path(fs, path);
	const char *where = "tree";
	struct mfs_txn *txn;
	struct mfs_ino *ip;
	int ret, err;

	if (!ino)
		die("no such path %s", path, 0);
	ret = mfs_iget(fs, ino, &ip);
	if (ret)
		die("iget %s", path, ret);
	pthread_rwlock_wrlock(&ip->lock);
	ret = mfs_txn_begin(fs, &txn);
	if (!ret) {
		ret = mfs_xattr_set_locked(fs, txn, ip, name, v, size, 0);
		if (!ret)
			ret = mfs_inode_write(fs, txn, ip);
		err = mfs_txn_end(txn);
		if (!ret)
			ret = err;
	}
	/* where it went: the inline area holds whole records, name after a 4-byte header */
	for (unsigned off = 0; !ret && off + 4 <= le16toh(ip->di.inline_xattr_len);) {
		const uint8_t *r = ip->di.inline_xattr + off;

		if (r[0] == nl && !memcmp(r + 4, name, nl))
			where = "inline";
		off += 4u + r[0] + (unsigned)(r[2] | r[3] << 8);
	}
	if (4 + nl + size > MFS_BT_MAX_VALUE)
		where = "blocks";
	pthread_rwlock_unlock(&ip->lock);
	mfs_iput(fs, ip);
	if (!ret)
		ret = mfs_unmount(fs);
	if (ret)
		die("setting %s", name, ret);
	printf("%s\n", where);
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
	if (!strcmp(argv[1], "xblock") && argc == 5) /* prints the block and its twin */
		return cmd_xblock(argv[3], (unsigned)atoi(argv[4]));
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
	if (!strcmp(argv[1], "acl") && argc == 6)
		return cmd_acl(argv[3], argv[4], argv[5]);
	if (!strcmp(argv[1], "corrupt") && argc == 4)
		return cmd_corrupt(argv[3]);
	fprintf(stderr, "fsck-img: bad command\n");
	return 2;
}
