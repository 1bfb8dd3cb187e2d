/* SPDX-License-Identifier: MIT */
/*
 * meta-check: helper of the metadata self-healing test (recovery-test.sh meta).
 *
 *   locate IMG INO...        from an unmounted image (include/mendfs/format.h):
 *                            "sb journal_start J journal_len L journal_twin T
 *                            journal_tail O meta_start M meta_twin W" and per inode
 *                            "ino N itable B ext_root E dir_root D xattr_root X"
 *   setx PATH NAME LEN       set xattr NAME to LEN pattern bytes
 *   getx PATH NAME LEN ERR   read it back: the pattern (ERR 0) or the errno ERR (EIO)
 * Exit 0 pass, 1 fail.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mendfs/format.h"

static int die(const char *what)
{
	fprintf(stderr, "meta-check: %s: %s\n", what, strerror(errno));
	return 1;
}

static void read_block(int fd, uint64_t blk, void *buf)
{
	if (pread(fd, buf, MFS_BLOCK_SIZE, (off_t)(blk * MFS_BLOCK_SIZE)) != MFS_BLOCK_SIZE) {
		fprintf(stderr, "meta-check: cannot read block %llu\n", (unsigned long long)blk);
		exit(1);
	}
}

static int locate(const char *img, int n, char **inos)
{
	static struct mfs_superblock sb;
	static uint8_t blk[MFS_BLOCK_SIZE];
	int fd = open(img, O_RDONLY);

	if (fd < 0)
		return die(img);
	read_block(fd, 0, &sb);
	if (le64toh(sb.magic) != MFS_SB_MAGIC) {
		fprintf(stderr, "meta-check: %s: not a mendfs image\n", img);
		return 1;
	}
	printf("sb journal_start %llu journal_len %llu journal_twin %llu journal_tail %llu "
	       "meta_start %llu meta_twin %llu\n",
	       (unsigned long long)le64toh(sb.journal_start),
	       (unsigned long long)le64toh(sb.journal_len),
	       (unsigned long long)le64toh(sb.journal_twin),
	       (unsigned long long)le64toh(sb.journal_tail),
	       (unsigned long long)le64toh(sb.meta_start),
	       (unsigned long long)le64toh(sb.meta_twin));
	for (int i = 0; i < n; i++) {
		uint64_t ino = strtoull(inos[i], NULL, 0), b;
		const struct mfs_inode *di;

		if (!ino || ino > le64toh(sb.nr_inodes)) {
			fprintf(stderr, "meta-check: bad inode number %s\n", inos[i]);
			return 1;
		}
		b = le64toh(sb.inode_table_start) + (ino - 1) / MFS_INODES_PER_BLOCK;
		read_block(fd, b, blk);
		di = (const void *)(blk + sizeof(struct mfs_meta_hdr) +
		                    (ino - 1) % MFS_INODES_PER_BLOCK * MFS_INODE_SIZE);
		printf("ino %llu itable %llu ext_root %llu dir_root %llu xattr_root %llu\n",
		       (unsigned long long)ino, (unsigned long long)b,
		       (unsigned long long)(le32toh(di->iflags) & MFS_IFL_EXTENT_TREE
		                                    ? le64toh(di->ext_root)
		                                    : 0),
		       (unsigned long long)le64toh(di->dir_root),
		       (unsigned long long)le64toh(di->xattr_root));
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static char v[65536 + 16];

	if (argc >= 3 && !strcmp(argv[1], "locate"))
		return locate(argv[2], argc - 3, argv + 3);
	if (argc == 5 && !strcmp(argv[1], "setx")) {
		size_t len = strtoul(argv[4], NULL, 0);

		if (len > 65536)
			return 1;
		for (size_t i = 0; i < len; i++)
			v[i] = (char)('a' + i % 23);
		if (setxattr(argv[2], argv[3], v, len, 0))
			return die("setxattr");
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "getx")) {
		size_t len = strtoul(argv[4], NULL, 0);
		ssize_t r;

		if (len > 65536)
			return 1;
		r = getxattr(argv[2], argv[3], v, len + 16);

		if (!strcmp(argv[5], "EIO")) {
			if (r >= 0 || errno != EIO) {
				fprintf(stderr,
				        "meta-check: getxattr gave %zd (%s), expected EIO\n", r,
				        r < 0 ? strerror(errno) : "success");
				return 1;
			}
			return 0;
		}
		if (r != (ssize_t)len)
			return die("getxattr");
		for (size_t i = 0; i < len; i++)
			if (v[i] != (char)('a' + i % 23)) {
				fprintf(stderr, "meta-check: xattr byte %zu differs\n", i);
				return 1;
			}
		return 0;
	}
	fprintf(stderr, "usage: see the top of tests/integration/meta-check.c\n");
	return 1;
}
