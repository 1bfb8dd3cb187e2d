/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of fs/core/acl.c: the ACL xattr format (what is valid, what is not),
 * the mode an ACL gives, chmod and the mask, the masking of a new inode's
 * default ACL; then, on an image made by the real mkfs.mendfs, the ACLs of
 * inodes: setxattr sets the mode (an ACL equal to a mode is not stored),
 * chmod rewrites the ACL, new files, directories and nodes inherit the
 * default ACL while the umask applies only without one, symlinks get none,
 * setgid cleared on request, everything still there after a remount; and
 * the setgid rules of MFS_SET_KILL_SGID and MFS_WRITE_KILL_SGID.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "acl.h"
#include "mfs_ops.h"
#include "fixture.h"

/* --- ACL values -------------------------------------------------------------------- */

struct ent {
	unsigned tag, perm;
	uint32_t id;
};

#define U_OBJ(p)                                                                                   \
	{                                                                                          \
		MFS_ACL_USER_OBJ, p, MFS_ACL_UNDEFINED_ID                                          \
	}
#define USER(i, p)                                                                                 \
	{                                                                                          \
		MFS_ACL_USER, p, i                                                                 \
	}
#define G_OBJ(p)                                                                                   \
	{                                                                                          \
		MFS_ACL_GROUP_OBJ, p, MFS_ACL_UNDEFINED_ID                                         \
	}
#define GRP(i, p)                                                                                  \
	{                                                                                          \
		MFS_ACL_GROUP, p, i                                                                \
	}
#define MASK(p)                                                                                    \
	{                                                                                          \
		MFS_ACL_MASK, p, MFS_ACL_UNDEFINED_ID                                              \
	}
#define OTHER(p)                                                                                   \
	{                                                                                          \
		MFS_ACL_OTHER, p, MFS_ACL_UNDEFINED_ID                                             \
	}

/* Encode @n entries as an xattr value into @buf; returns its size. */
static size_t acl_make(uint8_t *buf, const struct ent *e, size_t n)
{
	size_t i;

	buf[0] = MFS_ACL_VERSION;
	buf[1] = buf[2] = buf[3] = 0;
	for (i = 0; i < n; i++) {
		uint8_t *p = buf + MFS_ACL_HDR_SIZE + i * MFS_ACL_ENTRY_SIZE;

		p[0] = (uint8_t)e[i].tag;
		p[1] = (uint8_t)(e[i].tag >> 8);
		p[2] = (uint8_t)e[i].perm;
		p[3] = (uint8_t)(e[i].perm >> 8);
		p[4] = (uint8_t)e[i].id;
		p[5] = (uint8_t)(e[i].id >> 8);
		p[6] = (uint8_t)(e[i].id >> 16);
		p[7] = (uint8_t)(e[i].id >> 24);
	}
	return MFS_ACL_HDR_SIZE + n * MFS_ACL_ENTRY_SIZE;
}

#define MAKE(buf, ...)                                                                             \
	acl_make(buf, (const struct ent[]){__VA_ARGS__},                                           \
	         sizeof((const struct ent[]){__VA_ARGS__}) / sizeof(struct ent))

static unsigned perm_of(const uint8_t *v, size_t size, unsigned tag)
{
	for (size_t off = MFS_ACL_HDR_SIZE; off < size; off += MFS_ACL_ENTRY_SIZE)
		if (v[off] == tag)
			return v[off + 2];
	return 0xff;
}

START_TEST(test_valid)
{
	uint8_t v[256];
	size_t n;

	n = MAKE(v, U_OBJ(6), G_OBJ(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), 0);
	n = MAKE(v, U_OBJ(7), USER(65534, 4), USER(1000, 6), G_OBJ(5), GRP(10, 7), MASK(7),
	         OTHER(0));
	ck_assert_int_eq(mfs_acl_valid(v, n), 0); /* the kernel does not sort ids either */
	n = MAKE(v, U_OBJ(6), G_OBJ(4), MASK(4), OTHER(4)); /* a mask without named entries */
	ck_assert_int_eq(mfs_acl_valid(v, n), 0);

	/* version, size, count */
	n = MAKE(v, U_OBJ(6), G_OBJ(4), OTHER(4));
	v[0] = 1;
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	v[0] = 2;
	v[3] = 1;
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	v[3] = 0;
	ck_assert_int_eq(mfs_acl_valid(v, n - 1), -EINVAL);
	ck_assert_int_eq(mfs_acl_valid(v, n + 3), -EINVAL);
	ck_assert_int_eq(mfs_acl_valid(v, MFS_ACL_HDR_SIZE), -EINVAL);
	ck_assert_int_eq(mfs_acl_valid(v, 2), -EINVAL);
	ck_assert_int_eq(mfs_acl_valid(NULL, 0), -EINVAL);
	/* permissions beyond rwx, unknown tags */
	n = MAKE(v, U_OBJ(8), G_OBJ(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), G_OBJ(4), {0x40, 4, 0}, OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	/* order and number of the entries */
	n = MAKE(v, G_OBJ(4), U_OBJ(6), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), U_OBJ(6), G_OBJ(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), G_OBJ(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), G_OBJ(4), OTHER(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), G_OBJ(4), USER(5, 4), MASK(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	/* named entries need a mask and an id */
	n = MAKE(v, U_OBJ(6), USER(5, 4), G_OBJ(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), USER(MFS_ACL_UNDEFINED_ID, 4), G_OBJ(4), MASK(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
	n = MAKE(v, U_OBJ(6), G_OBJ(4), GRP(MFS_ACL_UNDEFINED_ID, 4), MASK(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_valid(v, n), -EINVAL);
}
END_TEST

START_TEST(test_equiv_mode)
{
	uint8_t v[256];
	uint32_t mode;
	size_t n;

	n = MAKE(v, U_OBJ(6), G_OBJ(4), OTHER(0));
	mode = S_IFREG | 04777;
	ck_assert_int_eq(mfs_acl_equiv_mode(v, n, &mode), 0);
	ck_assert_uint_eq(mode, S_IFREG | 04640); /* type and setuid kept */
	/* the mask is the group class */
	n = MAKE(v, U_OBJ(7), USER(65534, 7), G_OBJ(1), MASK(5), OTHER(4));
	mode = S_IFREG;
	ck_assert_int_eq(mfs_acl_equiv_mode(v, n, &mode), 1);
	ck_assert_uint_eq(mode, S_IFREG | 0754);
	n = MAKE(v, U_OBJ(6), G_OBJ(4), MASK(4), OTHER(4));
	ck_assert_int_eq(mfs_acl_equiv_mode(v, n, &mode), 1);
}
END_TEST

START_TEST(test_chmod)
{
	uint8_t v[256];
	size_t n;

	/* with a mask: the mask follows the group bits, the group entry stays */
	n = MAKE(v, U_OBJ(6), USER(65534, 4), G_OBJ(0), MASK(4), OTHER(0));
	mfs_acl_chmod(v, n, S_IFREG | 0751);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_USER_OBJ), 7);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_USER), 4);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_GROUP_OBJ), 0);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_MASK), 5);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_OTHER), 1);
	ck_assert_int_eq(mfs_acl_valid(v, n), 0);
	/* without: the group entry does */
	n = MAKE(v, U_OBJ(6), G_OBJ(4), OTHER(4));
	mfs_acl_chmod(v, n, 0702);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_USER_OBJ), 7);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_GROUP_OBJ), 0);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_OTHER), 2);
}
END_TEST

START_TEST(test_create_masq)
{
	uint8_t v[256];
	uint32_t mode;
	size_t n;

	/* setfacl -d -m u:65534:rwx,g::rx,o::- on ext4, then creat(0666): -rw-rw---- */
	n = MAKE(v, U_OBJ(7), USER(65534, 7), G_OBJ(5), MASK(7), OTHER(0));
	mode = S_IFREG | 0666;
	ck_assert_int_eq(mfs_acl_create_masq(v, n, &mode), 1);
	ck_assert_uint_eq(mode, S_IFREG | 0660);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_USER_OBJ), 6);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_USER), 7); /* named entries unchanged */
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_GROUP_OBJ), 5);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_MASK), 6);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_OTHER), 0);
	/* mkdir(0700): mask and other masked to nothing */
	n = MAKE(v, U_OBJ(7), USER(65534, 7), G_OBJ(5), MASK(7), OTHER(0));
	mode = S_IFDIR | 02700;
	ck_assert_int_eq(mfs_acl_create_masq(v, n, &mode), 1);
	ck_assert_uint_eq(mode, S_IFDIR | 02700);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_MASK), 0);
	/* base entries only: the mode alone, the group entry masked */
	n = MAKE(v, U_OBJ(7), G_OBJ(5), OTHER(4));
	mode = S_IFREG | 0666;
	ck_assert_int_eq(mfs_acl_create_masq(v, n, &mode), 0);
	ck_assert_uint_eq(mode, S_IFREG | 0644);
	ck_assert_uint_eq(perm_of(v, n, MFS_ACL_GROUP_OBJ), 4);
}
END_TEST

/* --- ACLs of inodes ---------------------------------------------------------------- */

static void setup(void)
{
	fixture_create("acl", "", "32M");
}

static uint64_t make(uint64_t parent, const char *name, mode_t mode, mode_t umask)
{
	struct mfs_new_inode ni = {.mode = mode, .uid = 1000, .gid = 1000, .umask = umask};
	struct stat st;
	int ret;

	if (S_ISLNK(mode))
		ni.target = "target";
	ret = mfs_create(fs, parent, name, &ni, &st);
	ck_assert_msg(ret == 0, "create %s: %d", name, ret);
	return st.st_ino;
}

static mode_t mode_of(uint64_t ino)
{
	struct stat st;

	ck_assert_int_eq(mfs_getattr(fs, ino, &st), 0);
	return st.st_mode;
}

static ssize_t get_acl(uint64_t ino, const char *name, uint8_t *buf)
{
	return mfs_getxattr(fs, ino, name, buf, 1024);
}

START_TEST(test_setxattr_mode)
{
	uint64_t f = make(MFS_ROOT_INO, "f", S_IFREG | 02770, 0);
	uint8_t v[256], got[1024];
	size_t n;

	/* a named entry: stored, the mode's group bits are the mask */
	n = MAKE(v, U_OBJ(6), USER(65534, 4), G_OBJ(0), MASK(4), OTHER(0));
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n, 0), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 02640);
	ck_assert_int_eq(get_acl(f, MFS_ACL_ACCESS, got), (ssize_t)n);
	ck_assert(!memcmp(got, v, n));
	/* an ACL equal to a mode: the mode, and no ACL left */
	n = MAKE(v, U_OBJ(7), G_OBJ(5), OTHER(1));
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n, 0), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 02751);
	ck_assert_int_eq(get_acl(f, MFS_ACL_ACCESS, got), -ENODATA);
	/* and again, with nothing to remove */
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n, 0), 0);
	/* the caller outside the group: setgid goes */
	n = MAKE(v, U_OBJ(7), USER(5, 7), G_OBJ(5), MASK(7), OTHER(1));
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n, MFS_XATTR_KILL_SGID), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0771);
	/* malformed values, a default ACL on a file, ACLs on a symlink */
	v[0] = 3;
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n, 0), -EINVAL);
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_DEFAULT, v, n, 0), -EINVAL);
	v[0] = 2;
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n - 2, 0), -EINVAL);
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, NULL, 0, 0), -EINVAL);
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_DEFAULT, v, n, 0), -EACCES);
	ck_assert_int_eq(
	        mfs_setxattr(fs, make(MFS_ROOT_INO, "l", S_IFLNK, 0), MFS_ACL_ACCESS, v, n, 0),
	        -EOPNOTSUPP);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0771); /* none of them changed anything */
	ck_assert_int_eq(get_acl(f, MFS_ACL_ACCESS, got), (ssize_t)n);
}
END_TEST

START_TEST(test_chmod_rewrites)
{
	uint64_t f = make(MFS_ROOT_INO, "f", S_IFREG | 0600, 0);
	struct stat attr = {.st_mode = 0750};
	uint8_t v[256], got[1024];
	size_t n;

	n = MAKE(v, U_OBJ(6), USER(65534, 4), G_OBJ(0), MASK(4), OTHER(0));
	ck_assert_int_eq(mfs_setxattr(fs, f, MFS_ACL_ACCESS, v, n, 0), 0);
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_MODE, NULL), 0);
	ck_assert_int_eq(get_acl(f, MFS_ACL_ACCESS, got), (ssize_t)n);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_USER_OBJ), 7);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_USER), 4);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_GROUP_OBJ), 0);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_MASK), 5);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_OTHER), 0);
	/* no ACL: chmod is a chmod */
	ck_assert_int_eq(mfs_setattr(fs, make(MFS_ROOT_INO, "g", S_IFREG | 0600, 0), &attr,
	                             MFS_SET_MODE, NULL),
	                 0);
}
END_TEST

START_TEST(test_inherit)
{
	uint64_t d = make(MFS_ROOT_INO, "d", S_IFDIR | 0755, 022), f, sub, fifo, ln, plain;
	uint8_t def[256], got[1024];
	size_t n;

	/* without a default ACL the umask applies */
	plain = make(d, "plain", S_IFREG | 0666, 027);
	ck_assert_uint_eq(mode_of(plain), S_IFREG | 0640);
	ck_assert_int_eq(get_acl(plain, MFS_ACL_ACCESS, got), -ENODATA);
	ck_assert_uint_eq(mode_of(d), S_IFDIR | 0755);

	n = MAKE(def, U_OBJ(7), USER(65534, 7), G_OBJ(5), MASK(7), OTHER(0));
	ck_assert_int_eq(mfs_setxattr(fs, d, MFS_ACL_DEFAULT, def, n, 0), 0);
	ck_assert_uint_eq(mode_of(d), S_IFDIR | 0755); /* a default ACL leaves the mode */

	/* with one the umask does not: the ACL masks the mode asked for */
	f = make(d, "f", S_IFREG | 0666, 077);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0660);
	ck_assert_int_eq(get_acl(f, MFS_ACL_ACCESS, got), (ssize_t)n);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_USER_OBJ), 6);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_MASK), 6);
	ck_assert_int_eq(get_acl(f, MFS_ACL_DEFAULT, got), -ENODATA);
	/* a directory gets it twice; its children inherit from it in turn */
	sub = make(d, "sub", S_IFDIR | 02777, 077);
	ck_assert_uint_eq(mode_of(sub), S_IFDIR | 02770);
	ck_assert_int_eq(get_acl(sub, MFS_ACL_DEFAULT, got), (ssize_t)n);
	ck_assert(!memcmp(got, def, n));
	ck_assert_int_eq(get_acl(sub, MFS_ACL_ACCESS, got), (ssize_t)n);
	ck_assert_uint_eq(perm_of(got, n, MFS_ACL_MASK), 7);
	ck_assert_uint_eq(mode_of(make(sub, "deep", S_IFREG | 0640, 0)), S_IFREG | 0640);
	/* nodes too, symlinks not */
	fifo = make(d, "fifo", S_IFIFO | 0644, 0);
	ck_assert_uint_eq(mode_of(fifo), S_IFIFO | 0640);
	ck_assert_int_eq(get_acl(fifo, MFS_ACL_ACCESS, got), (ssize_t)n);
	ln = make(d, "ln", S_IFLNK, 077);
	ck_assert_uint_eq(mode_of(ln), S_IFLNK | 0777);
	ck_assert_int_eq(get_acl(ln, MFS_ACL_ACCESS, got), -ENODATA);
	/* the old wrappers inherit as well (umask 0) */
	{
		struct stat st;

		ck_assert_int_eq(mfs_mknod(fs, d, "m", S_IFREG | 0604, 0, 0, 0, &st), 0);
		ck_assert_uint_eq(st.st_mode, S_IFREG | 0600);
	}

	/* all of it on disk */
	fixture_remount();
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0660);
	ck_assert_int_eq(get_acl(sub, MFS_ACL_DEFAULT, got), (ssize_t)n);
	ck_assert(!memcmp(got, def, n));
	/* inodes with ACLs (an xattr tree) go like any other */
	ck_assert_int_eq(mfs_unlink(fs, d, "f"), 0);
	ck_assert_int_eq(mfs_unlink(fs, sub, "deep"), 0);
	ck_assert_int_eq(mfs_rmdir(fs, d, "sub"), 0);
	fixture_remount();
	ck_assert_int_eq(mfs_getattr(fs, f, &(struct stat){0}), -ENOENT);
}
END_TEST

START_TEST(test_kill_sgid)
{
	uint64_t f = make(MFS_ROOT_INO, "f", S_IFREG | 06745, 0);
	struct stat attr = {0};

	/* write: setuid always, setgid without group exec only with MFS_WRITE_KILL_SGID */
	ck_assert_int_eq(mfs_write_flags(fs, f, "x", 1, 0, MFS_WRITE_KILL_SUIDGID), 1);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 02745);
	ck_assert_int_eq(
	        mfs_write_flags(fs, f, "x", 1, 0, MFS_WRITE_KILL_SUIDGID | MFS_WRITE_KILL_SGID), 1);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0745);
	/* setattr: the same with MFS_SET_KILL_SGID, on its own it does nothing */
	attr.st_mode = 02745;
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_MODE, NULL), 0);
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_KILL_SGID, NULL), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 02745);
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_KILL_SUIDGID, NULL), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 02745);
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_KILL_SUIDGID | MFS_SET_KILL_SGID, NULL),
	                 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0745);
	/* chown keeps it unless asked */
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_MODE, NULL), 0);
	attr.st_uid = 5;
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_UID, NULL), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 02745);
	ck_assert_int_eq(mfs_setattr(fs, f, &attr, MFS_SET_UID | MFS_SET_KILL_SGID, NULL), 0);
	ck_assert_uint_eq(mode_of(f), S_IFREG | 0745);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("acl");
	TCase *tv = tcase_create("values"), *ti = tcase_create("inodes");

	tcase_add_test(tv, test_valid);
	tcase_add_test(tv, test_equiv_mode);
	tcase_add_test(tv, test_chmod);
	tcase_add_test(tv, test_create_masq);
	suite_add_tcase(s, tv);
	tcase_add_checked_fixture(ti, setup, fixture_teardown);
	tcase_set_timeout(ti, 120);
	tcase_add_test(ti, test_setxattr_mode);
	tcase_add_test(ti, test_chmod_rewrites);
	tcase_add_test(ti, test_inherit);
	tcase_add_test(ti, test_kill_sgid);
	suite_add_tcase(s, ti);
	return check_run(s);
}
