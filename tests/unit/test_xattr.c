/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/xattr.c on images made by the real mkfs.mendfs
 * ($MKFS_MENDFS), mounted with mfs_mount: inline attributes then the xattr
 * B+tree (many attributes), XATTR_CREATE/XATTR_REPLACE, size queries and
 * -ERANGE, namespaces, name and value limits, remove, list contents, moves
 * between inline and tree on resize, release with the inode, persistence
 * across remounts; values up to XATTR_SIZE_MAX out of line (their metadata
 * blocks counted, freed on replace, remove and unlink), hundreds of names,
 * large ACLs, and the 1 KiB limit of a filesystem without xattr_blocks.
 */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "acl.h"
#include "mfs_ops.h"
#include "fixture.h"

static void setup(void)
{
	fixture_create("xattr", "", "32M");
}

static void check_value(uint64_t ino, const char *name, const void *val, size_t len)
{
	static char buf[70000];
	ssize_t n;

	n = mfs_getxattr(fs, ino, name, NULL, 0);
	ck_assert_msg(n == (ssize_t)len, "%s: size %zd, expected %zu", name, n, len);
	n = mfs_getxattr(fs, ino, name, buf, sizeof(buf));
	ck_assert_msg(n == (ssize_t)len, "%s: %zd", name, n);
	ck_assert(!memcmp(buf, val, len));
}

static void value_of(char *buf, size_t len, unsigned i)
{
	for (size_t k = 0; k < len; k++)
		buf[k] = (char)('a' + (i * 7 + k) % 26);
}

/* Does the NUL-separated @list of @len bytes hold @name? */
static bool listed(const char *list, size_t len, const char *name)
{
	for (size_t off = 0; off < len; off += strlen(list + off) + 1)
		if (!strcmp(list + off, name))
			return true;
	return false;
}

START_TEST(test_inline_then_tree)
{
	uint64_t ino = fixture_file("f");
	struct mfs_inode di;
	char name[64], val[300], *list;
	ssize_t n;
	unsigned i;

	/* small: inline */
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.a", "xy", 2, 0), 0);
	di = fixture_dinode(ino);
	ck_assert_uint_gt(le16toh(di.inline_xattr_len), 0);
	ck_assert_uint_eq(le64toh(di.xattr_root), 0);
	check_value(ino, "user.a", "xy", 2);
	/* larger: the tree */
	value_of(val, 200, 1);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.big", val, 200, 0), 0);
	di = fixture_dinode(ino);
	ck_assert_uint_ne(le64toh(di.xattr_root), 0);
	check_value(ino, "user.big", val, 200);
	check_value(ino, "user.a", "xy", 2);
	/* many: the tree splits */
	for (i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "user.attr-%u", i);
		value_of(val, 50 + i % 200, i);
		ck_assert_int_eq(mfs_setxattr(fs, ino, name, val, 50 + i % 200, XATTR_CREATE), 0);
	}
	di = fixture_dinode(ino);
	ck_assert_uint_gt(le16toh(di.xattr_depth), 0);
	for (i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "user.attr-%u", i);
		value_of(val, 50 + i % 200, i);
		check_value(ino, name, val, 50 + i % 200);
	}
	n = mfs_listxattr(fs, ino, NULL, 0);
	ck_assert_int_gt(n, 0);
	list = malloc((size_t)n);
	ck_assert_int_eq(mfs_listxattr(fs, ino, list, (size_t)n), n);
	ck_assert(listed(list, (size_t)n, "user.a"));
	ck_assert(listed(list, (size_t)n, "user.big"));
	for (i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "user.attr-%u", i);
		ck_assert(listed(list, (size_t)n, name));
	}
	free(list);
	/* remove half, check the rest */
	for (i = 0; i < 400; i += 2) {
		snprintf(name, sizeof(name), "user.attr-%u", i);
		ck_assert_int_eq(mfs_removexattr(fs, ino, name), 0);
	}
	fixture_remount();
	for (i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "user.attr-%u", i);
		value_of(val, 50 + i % 200, i);
		if (i % 2)
			check_value(ino, name, val, 50 + i % 200);
		else
			ck_assert_int_eq(mfs_getxattr(fs, ino, name, val, sizeof(val)), -ENODATA);
	}
	check_value(ino, "user.a", "xy", 2);
}
END_TEST

START_TEST(test_create_replace)
{
	uint64_t ino = fixture_file("f");
	char val[500];

	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "1", 1, XATTR_REPLACE), -ENODATA);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "1", 1, XATTR_CREATE), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "2", 1, XATTR_CREATE), -EEXIST);
	check_value(ino, "user.x", "1", 1);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "22", 2, XATTR_REPLACE), 0);
	check_value(ino, "user.x", "22", 2);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "333", 3, 0), 0);
	check_value(ino, "user.x", "333", 3);
	/* grow into the tree and shrink back inline: one copy at any time */
	value_of(val, 500, 3);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", val, 500, XATTR_REPLACE), 0);
	check_value(ino, "user.x", val, 500);
	ck_assert_uint_eq(le16toh(fixture_dinode(ino).inline_xattr_len), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "4", 1, XATTR_REPLACE), 0);
	check_value(ino, "user.x", "4", 1);
	ck_assert_uint_gt(le16toh(fixture_dinode(ino).inline_xattr_len), 0);
	ck_assert_int_eq(mfs_listxattr(fs, ino, NULL, 0), 7);
	/* empty values */
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.empty", "", 0, 0), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.empty", NULL, 0), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.empty", val, sizeof(val)), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.x", "1", 1, XATTR_CREATE | 0x100), -EINVAL);
}
END_TEST

START_TEST(test_sizes)
{
	uint64_t ino = fixture_file("f");
	char buf[64], list[64];

	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.abc", "hello", 5, 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "trusted.t", "t", 1, 0), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.abc", NULL, 0), 5);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.abc", buf, 4), -ERANGE);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.abc", buf, 5), 5);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.nope", buf, 5), -ENODATA);
	ck_assert_int_eq(mfs_listxattr(fs, ino, NULL, 0), 9 + 10);
	ck_assert_int_eq(mfs_listxattr(fs, ino, list, 18), -ERANGE);
	ck_assert_int_eq(mfs_listxattr(fs, ino, list, sizeof(list)), 19);
	ck_assert(listed(list, 19, "user.abc"));
	ck_assert(listed(list, 19, "trusted.t"));
	/* no attributes: an empty list */
	ino = fixture_file("g");
	ck_assert_int_eq(mfs_listxattr(fs, ino, NULL, 0), 0);
	ck_assert_int_eq(mfs_listxattr(fs, ino, list, sizeof(list)), 0);
}
END_TEST

START_TEST(test_names)
{
	uint64_t ino = fixture_file("f");
	char name[300], val[16];

	ck_assert_int_eq(mfs_setxattr(fs, ino, "trusted.a", "1", 1, 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "security.selinux", "ctx", 3, 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "system.x", "sys", 3, 0), 0);
	/* ACLs are checked (test_acl.c) */
	ck_assert_int_eq(mfs_setxattr(fs, ino, "system.posix_acl_access", "acl", 3, 0), -EINVAL);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.a", "1", 1, 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "os2.a", "1", 1, 0), -EOPNOTSUPP);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "foo", "1", 1, 0), -EOPNOTSUPP);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "foo.bar", val, sizeof(val)), -EOPNOTSUPP);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.", "1", 1, 0), -EINVAL);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "", "1", 1, 0), -ERANGE);
	/* 255 bytes is the limit */
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[255] = 0;
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, "v", 1, 0), 0);
	check_value(ino, name, "v", 1);
	name[255] = 'n';
	name[256] = 0;
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, "v", 1, 0), -ERANGE);
	ck_assert_int_eq(mfs_getxattr(fs, ino, name, val, sizeof(val)), -ERANGE);
	ck_assert_int_eq(mfs_removexattr(fs, ino, name), -ERANGE);
	check_value(ino, "trusted.a", "1", 1);
	check_value(ino, "security.selinux", "ctx", 3);
	check_value(ino, "system.x", "sys", 3);
	/* a name differing only by namespace is another attribute */
	ck_assert_int_eq(mfs_getxattr(fs, ino, "trusted.b", val, sizeof(val)), -ENODATA);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.b", "u", 1, 0), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "trusted.b", val, sizeof(val)), -ENODATA);
}
END_TEST

START_TEST(test_value_limits)
{
	uint64_t ino = fixture_file("f");
	static char big[70000];
	const char *name = "user.v";
	size_t max = MFS_BT_MAX_VALUE - sizeof(struct mfs_xattr) - strlen(name);

	value_of(big, sizeof(big), 9);
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, max, 0), 0);
	check_value(ino, name, big, max);
	/* past a tree value: out of line, up to XATTR_SIZE_MAX */
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, max + 1, 0), 0);
	check_value(ino, name, big, max + 1);
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, 65536, 0), 0);
	check_value(ino, name, big, 65536);
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, 65537, 0), -E2BIG);
	/* the failed set left the old value */
	check_value(ino, name, big, 65536);
}
END_TEST

static uint64_t free_meta(void)
{
	ck_assert_int_eq(mfs_sync(fs), 0);
	return le64toh(fs->sb.free_meta);
}

START_TEST(test_large_values)
{
	static char big[65536], buf[65536];
	uint64_t base0 = free_meta(), ino = fixture_file("f"), base, used;
	const char *name = "user.large";

	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.small", "s", 1, 0), 0);
	base = free_meta();
	value_of(big, sizeof(big), 5);
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, sizeof(big), XATTR_CREATE), 0);
	/* 17 value blocks of 4048 bytes and the tree's root leaf */
	used = base - free_meta();
	ck_assert_uint_eq(used, 17 + 1);
	ck_assert_int_eq(mfs_getxattr(fs, ino, name, NULL, 0), 65536);
	ck_assert_int_eq(mfs_getxattr(fs, ino, name, buf, 65535), -ERANGE);
	ck_assert_int_eq(mfs_listxattr(fs, ino, NULL, 0), sizeof("user.small") + strlen(name) + 1);
	fixture_remount();
	check_value(ino, name, big, sizeof(big));
	check_value(ino, "user.small", "s", 1);
	/* large -> small (inline) -> large -> another size: the old blocks go each time */
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, "x", 1, XATTR_REPLACE), 0);
	ck_assert_uint_eq(free_meta(), base);
	check_value(ino, name, "x", 1);
	value_of(big, sizeof(big), 6);
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, 5000, XATTR_REPLACE), 0);
	ck_assert_uint_eq(base - free_meta(), 2 + 1);
	check_value(ino, name, big, 5000);
	ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, 40000, 0), 0);
	ck_assert_uint_eq(base - free_meta(), 10 + 1);
	fixture_remount();
	check_value(ino, name, big, 40000);
	ck_assert_int_eq(mfs_removexattr(fs, ino, name), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, name, NULL, 0), -ENODATA);
	ck_assert_uint_eq(free_meta(), base);
	/* unlink frees the value blocks with the inode */
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.l1", big, 65536, 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.l2", big, 9000, 0), 0);
	ck_assert_uint_lt(free_meta(), base - 20);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "f"), 0);
	fixture_remount();
	ck_assert_uint_eq(free_meta(), base0); /* the root directory's tree went too */
}
END_TEST

START_TEST(test_many_names)
{
	static char big[20000];
	uint64_t base = free_meta(), ino = fixture_file("f");
	char name[64], *list;
	ssize_t n;
	unsigned i;

	/* 500 names of 25+ bytes (a list of over 13 KiB), every 50th with a large value */
	for (i = 0; i < 500; i++) {
		size_t len = i % 50 ? 8 : 6000 + i;

		snprintf(name, sizeof(name), "user.many-names-%05u-xyz", i);
		value_of(big, len, i);
		ck_assert_int_eq(mfs_setxattr(fs, ino, name, big, len, XATTR_CREATE), 0);
	}
	fixture_remount();
	n = mfs_listxattr(fs, ino, NULL, 0);
	ck_assert_int_eq(n, 500 * (strlen("user.many-names-00000-xyz") + 1));
	list = malloc((size_t)n);
	ck_assert_int_eq(mfs_listxattr(fs, ino, list, (size_t)n - 1), -ERANGE);
	ck_assert_int_eq(mfs_listxattr(fs, ino, list, (size_t)n), n);
	for (i = 0; i < 500; i++) {
		size_t len = i % 50 ? 8 : 6000 + i;

		snprintf(name, sizeof(name), "user.many-names-%05u-xyz", i);
		ck_assert(listed(list, (size_t)n, name));
		value_of(big, len, i);
		check_value(ino, name, big, len);
	}
	free(list);
	ck_assert_uint_eq(fs->sb.orphan_root, 0);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "f"), 0);
	fixture_remount();
	/* freed through the orphan list, which keeps its (empty) root leaf */
	ck_assert_uint_ne(fs->sb.orphan_root, 0);
	ck_assert_uint_eq(free_meta() + 1, base);
}
END_TEST

/* An access ACL of @n named users (plus the owner, group, mask and other entries). */
static size_t big_acl(uint8_t *v, unsigned n)
{
	uint8_t *e = v + MFS_ACL_HDR_SIZE;
	unsigned i;

	memset(v, 0, MFS_ACL_HDR_SIZE);
	v[0] = MFS_ACL_VERSION;
#define ENT(tag, perm, id)                                                                         \
	do {                                                                                       \
		uint32_t id_ = (id);                                                               \
		e[0] = (tag);                                                                      \
		e[1] = 0;                                                                          \
		e[2] = (perm);                                                                     \
		e[3] = 0;                                                                          \
		memcpy(e + 4, &id_, 4);                                                            \
		e += MFS_ACL_ENTRY_SIZE;                                                           \
	} while (0)
	ENT(MFS_ACL_USER_OBJ, 6, MFS_ACL_UNDEFINED_ID);
	for (i = 0; i < n; i++)
		ENT(MFS_ACL_USER, i % 8, 1000 + i);
	ENT(MFS_ACL_GROUP_OBJ, 4, MFS_ACL_UNDEFINED_ID);
	ENT(MFS_ACL_MASK, 7, MFS_ACL_UNDEFINED_ID);
	ENT(MFS_ACL_OTHER, 0, MFS_ACL_UNDEFINED_ID);
#undef ENT
	return (size_t)(e - v);
}

START_TEST(test_large_acl)
{
	static uint8_t acl[65536], got[65536];
	uint64_t ino = fixture_file("f");
	size_t n = big_acl(acl, 4000); /* 32036 bytes */
	struct stat st = {.st_mode = 0640}, out;
	uint64_t d;

	ck_assert_int_eq(mfs_setxattr(fs, ino, MFS_ACL_ACCESS, acl, n, 0), 0);
	fixture_remount();
	ck_assert_int_eq(mfs_getxattr(fs, ino, MFS_ACL_ACCESS, got, sizeof(got)), n);
	ck_assert(!memcmp(got, acl, n));
	/* chmod rewrites the large ACL's mask */
	ck_assert_int_eq(mfs_setattr(fs, ino, &st, MFS_SET_MODE, &out), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, MFS_ACL_ACCESS, got, sizeof(got)), n);
	ck_assert_uint_eq(got[n - 2 * MFS_ACL_ENTRY_SIZE + 2], 4); /* mask = group bits */
	/* a large default ACL is inherited by a new directory (default and access) */
	ck_assert_int_eq(mfs_mkdir(fs, MFS_ROOT_INO, "d", 0755, 0, 0, &out), 0);
	d = out.st_ino;
	ck_assert_int_eq(mfs_setxattr(fs, d, MFS_ACL_DEFAULT, acl, n, 0), 0);
	ck_assert_int_eq(mfs_mkdir(fs, d, "sub", 0777, 0, 0, &out), 0);
	ck_assert_int_eq(mfs_getxattr(fs, out.st_ino, MFS_ACL_DEFAULT, got, sizeof(got)), n);
	ck_assert(!memcmp(got, acl, n));
	ck_assert_int_eq(mfs_getxattr(fs, out.st_ino, MFS_ACL_ACCESS, NULL, 0), n);
}
END_TEST

START_TEST(test_no_feature)
{
	static char big[2000];
	uint64_t ino;

	/* a filesystem made before xattr_blocks keeps values within a tree value */
	fs->sb.feature_incompat &= ~MFS_FEATURE_INCOMPAT_XATTR_BLOCKS;
	ck_assert_int_eq(mfs_super_write(fs), 0);
	fixture_remount();
	ck_assert_uint_eq(fs->sb.feature_incompat & MFS_FEATURE_INCOMPAT_XATTR_BLOCKS, 0);
	ino = fixture_file("f");
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.v", big, sizeof(big), 0), -ENOSPC);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.v", big, 1000, 0), 0);
}
END_TEST

START_TEST(test_remove)
{
	uint64_t ino = fixture_file("f");
	char val[400];

	value_of(val, sizeof(val), 4);
	ck_assert_int_eq(mfs_removexattr(fs, ino, "user.none"), -ENODATA);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.i", "i", 1, 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.t", val, sizeof(val), 0), 0);
	ck_assert_int_eq(mfs_setxattr(fs, ino, "user.j", "j", 1, 0), 0);
	ck_assert_int_eq(mfs_removexattr(fs, ino, "user.i"), 0);
	ck_assert_int_eq(mfs_removexattr(fs, ino, "user.i"), -ENODATA);
	check_value(ino, "user.j", "j", 1);
	ck_assert_int_eq(mfs_removexattr(fs, ino, "user.t"), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.t", NULL, 0), -ENODATA);
	ck_assert_uint_eq(le64toh(fixture_dinode(ino).xattr_root), 0);
	ck_assert_int_eq(mfs_listxattr(fs, ino, NULL, 0), 7);
	ck_assert_int_eq(mfs_removexattr(fs, ino, "user.j"), 0);
	ck_assert_int_eq(mfs_listxattr(fs, ino, NULL, 0), 0);
	ck_assert_uint_eq(le16toh(fixture_dinode(ino).inline_xattr_len), 0);
}
END_TEST

START_TEST(test_persist_and_release)
{
	uint64_t ino = fixture_file("f");
	struct statvfs st0, st1;
	char name[32], val[600];
	unsigned i;

	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "user.p%u", i);
		value_of(val, i % 3 ? 10 : 600, i);
		ck_assert_int_eq(mfs_setxattr(fs, ino, name, val, i % 3 ? 10 : 600, 0), 0);
	}
	ck_assert_int_eq(mfs_setxattr(fs, MFS_ROOT_INO, "user.root", "r", 1, 0), 0);
	fixture_remount();
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "user.p%u", i);
		value_of(val, i % 3 ? 10 : 600, i);
		check_value(ino, name, val, i % 3 ? 10 : 600);
	}
	check_value(MFS_ROOT_INO, "user.root", "r", 1);
	/* read-only: get and list work, changes are -EROFS */
	{
		struct mfs_mount_opts ro = {.read_only = true};
		char err[256];

		ck_assert_int_eq(mfs_unmount(fs), 0);
		ck_assert_int_eq(mfs_mount(img, &ro, &fs, err, sizeof(err)), 0);
		value_of(val, 600, 3);
		check_value(ino, "user.p3", val, 600);
		ck_assert_int_gt(mfs_listxattr(fs, ino, NULL, 0), 0);
		ck_assert_int_eq(mfs_setxattr(fs, ino, "user.new", "n", 1, 0), -EROFS);
		ck_assert_int_eq(mfs_removexattr(fs, ino, "user.p1"), -EROFS);
		fixture_remount();
	}
	/* unlinking the file frees its xattr tree */
	ck_assert_int_eq(mfs_sync(fs), 0);
	ck_assert_int_eq(mfs_statfs(fs, &st0), 0);
	ck_assert_int_eq(mfs_unlink(fs, MFS_ROOT_INO, "f"), 0);
	ck_assert_int_eq(mfs_getxattr(fs, ino, "user.p1", val, sizeof(val)), -ENOENT);
	fixture_remount();
	ck_assert_int_eq(mfs_statfs(fs, &st1), 0);
	ck_assert_uint_eq(st1.f_ffree, st0.f_ffree + 1);
	check_value(MFS_ROOT_INO, "user.root", "r", 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("xattr");
	TCase *tc = tcase_create("xattr");
	tcase_add_checked_fixture(tc, setup, fixture_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_inline_then_tree);
	tcase_add_test(tc, test_create_replace);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_value_limits);
	tcase_add_test(tc, test_large_values);
	tcase_add_test(tc, test_many_names);
	tcase_add_test(tc, test_large_acl);
	tcase_add_test(tc, test_no_feature);
	tcase_add_test(tc, test_remove);
	tcase_add_test(tc, test_persist_and_release);
	suite_add_tcase(s, tc);
	return check_run(s);
}
