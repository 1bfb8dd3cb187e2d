/* SPDX-License-Identifier: MIT */
/*
 * POSIX ACLs: validation and the mode/ACL rules of Linux's fs/posix_acl.c
 * (posix_acl_valid, posix_acl_equiv_mode, posix_acl_chmod,
 * posix_acl_create), on the xattr values themselves, and their use on
 * inodes (new inodes, chmod, setxattr).  See acl.h.  Above the xattr
 * storage (it calls xattr.c's _locked functions, nothing else of the core)
 * and below the operations that use it: xattr_ops.c, namei.c, attr.c.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "acl.h"
#include "mfs_int.h"

#define RWX 07u

/* Entry @i of an ACL value (unaligned little-endian fields). */
static unsigned ent_tag(const uint8_t *v, size_t i)
{
	const uint8_t *e = v + MFS_ACL_HDR_SIZE + i * MFS_ACL_ENTRY_SIZE;

	return (unsigned)e[0] | (unsigned)e[1] << 8;
}

static unsigned ent_perm(const uint8_t *v, size_t i)
{
	const uint8_t *e = v + MFS_ACL_HDR_SIZE + i * MFS_ACL_ENTRY_SIZE;

	return (unsigned)e[2] | (unsigned)e[3] << 8;
}

static uint32_t ent_id(const uint8_t *v, size_t i)
{
	const uint8_t *e = v + MFS_ACL_HDR_SIZE + i * MFS_ACL_ENTRY_SIZE;

	return (uint32_t)e[4] | (uint32_t)e[5] << 8 | (uint32_t)e[6] << 16 | (uint32_t)e[7] << 24;
}

static void ent_set_perm(uint8_t *v, size_t i, unsigned perm)
{
	uint8_t *e = v + MFS_ACL_HDR_SIZE + i * MFS_ACL_ENTRY_SIZE;

	e[2] = (uint8_t)perm;
	e[3] = 0;
}

static size_t ent_count(size_t size)
{
	return (size - MFS_ACL_HDR_SIZE) / MFS_ACL_ENTRY_SIZE;
}

int mfs_acl_type(const char *name)
{
	if (!strcmp(name, MFS_ACL_ACCESS))
		return MFS_ACL_TYPE_ACCESS;
	if (!strcmp(name, MFS_ACL_DEFAULT))
		return MFS_ACL_TYPE_DEFAULT;
	return 0;
}

/* posix_acl_valid(): 0, or -EINVAL with the rule broken in *why. */
static int acl_valid(const void *value, size_t size, const char **why)
{
	/* states of posix_acl_valid(): what may come next */
	enum { USER_OBJ, USER, GROUP, OTHER, DONE } state = USER_OBJ;
	const uint8_t *v = value;
	bool needs_mask = false;
	size_t i, n;

	if (!v || size < MFS_ACL_HDR_SIZE + MFS_ACL_ENTRY_SIZE ||
	    (size - MFS_ACL_HDR_SIZE) % MFS_ACL_ENTRY_SIZE) {
		*why = "its size is not a 4-byte header and one or more 8-byte entries";
		return -EINVAL;
	}
	if (((uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24) !=
	    MFS_ACL_VERSION) {
		*why = "its version is not 2";
		return -EINVAL;
	}
	n = ent_count(size);
	for (i = 0; i < n; i++) {
		if (ent_perm(v, i) & ~RWX) {
			*why = "an entry has permission bits beyond rwx";
			return -EINVAL;
		}
		*why = "its entries are out of order, repeated or missing";
		switch (ent_tag(v, i)) {
		case MFS_ACL_USER_OBJ:
			if (state != USER_OBJ)
				return -EINVAL;
			state = USER;
			break;
		case MFS_ACL_USER:
		case MFS_ACL_GROUP:
			if (state != (ent_tag(v, i) == MFS_ACL_USER ? USER : GROUP))
				return -EINVAL;
			if (ent_id(v, i) == MFS_ACL_UNDEFINED_ID) {
				*why = "a named entry has no id";
				return -EINVAL;
			}
			needs_mask = true;
			break;
		case MFS_ACL_GROUP_OBJ:
			if (state != USER)
				return -EINVAL;
			state = GROUP;
			break;
		case MFS_ACL_MASK:
			if (state != GROUP)
				return -EINVAL;
			state = OTHER;
			break;
		case MFS_ACL_OTHER:
			if (state != OTHER && !(state == GROUP && !needs_mask)) {
				if (state == GROUP)
					*why = "it has named entries but no mask entry";
				return -EINVAL;
			}
			state = DONE;
			break;
		default:
			*why = "an entry has an unknown tag";
			return -EINVAL;
		}
	}
	if (state != DONE)
		return -EINVAL;
	*why = NULL;
	return 0;
}

int mfs_acl_valid(const void *value, size_t size)
{
	const char *why;

	return acl_valid(value, size, &why);
}

int mfs_acl_check(const void *value, size_t size, int type, uint32_t mode, const char **why)
{
	const char *dummy;
	int ret;

	if (!why)
		why = &dummy;
	if (S_ISLNK(mode)) {
		*why = "a symlink has no ACLs";
		return -EOPNOTSUPP;
	}
	ret = acl_valid(value, size, why);
	if (ret)
		return ret;
	if (type == MFS_ACL_TYPE_DEFAULT && !S_ISDIR(mode)) {
		*why = "a default ACL is only for a directory";
		return -EACCES;
	}
	return 0;
}

int mfs_acl_equiv_mode(const void *value, size_t size, uint32_t *mode)
{
	const uint8_t *v = value;
	uint32_t m = 0;
	int not_equiv = 0;
	size_t i, n = ent_count(size);

	for (i = 0; i < n; i++) {
		unsigned perm = ent_perm(v, i) & RWX;

		switch (ent_tag(v, i)) {
		case MFS_ACL_USER_OBJ:
			m |= perm << 6;
			break;
		case MFS_ACL_GROUP_OBJ:
			m |= perm << 3;
			break;
		case MFS_ACL_OTHER:
			m |= perm;
			break;
		case MFS_ACL_MASK: /* after the group entry: the mask is the group class */
			m = (m & ~(RWX << 3)) | perm << 3;
			not_equiv = 1;
			break;
		default: /* named users and groups */
			not_equiv = 1;
			break;
		}
	}
	*mode = (*mode & ~0777u) | m;
	return not_equiv;
}

/* The entry that holds the group class: the mask, or the group entry if there is no mask. */
static size_t group_class(const uint8_t *v, size_t n)
{
	size_t i, group = n;

	for (i = 0; i < n; i++) {
		if (ent_tag(v, i) == MFS_ACL_MASK)
			return i;
		if (ent_tag(v, i) == MFS_ACL_GROUP_OBJ)
			group = i;
	}
	return group;
}

void mfs_acl_chmod(void *value, size_t size, uint32_t mode)
{
	uint8_t *v = value;
	size_t i, n = ent_count(size), g = group_class(v, n);

	for (i = 0; i < n; i++) {
		if (ent_tag(v, i) == MFS_ACL_USER_OBJ)
			ent_set_perm(v, i, (mode >> 6) & RWX);
		else if (ent_tag(v, i) == MFS_ACL_OTHER)
			ent_set_perm(v, i, mode & RWX);
	}
	if (g < n)
		ent_set_perm(v, g, (mode >> 3) & RWX);
}

int mfs_acl_create_masq(void *value, size_t size, uint32_t *mode)
{
	uint8_t *v = value;
	uint32_t m = *mode;
	size_t i, n = ent_count(size), g = group_class(v, n);
	int not_equiv = 0;

	for (i = 0; i < n; i++) {
		unsigned perm = ent_perm(v, i);

		switch (ent_tag(v, i)) {
		case MFS_ACL_USER_OBJ:
			perm &= (m >> 6) & RWX;
			ent_set_perm(v, i, perm);
			m = (m & ~(RWX << 6)) | perm << 6;
			break;
		case MFS_ACL_OTHER:
			perm &= m & RWX;
			ent_set_perm(v, i, perm);
			m = (m & ~RWX) | perm;
			break;
		case MFS_ACL_GROUP_OBJ:
			break;
		default: /* named entries and the mask */
			not_equiv = 1;
			break;
		}
	}
	if (g < n) {
		unsigned perm = ent_perm(v, g) & ((m >> 3) & RWX);

		ent_set_perm(v, g, perm);
		m = (m & ~(RWX << 3)) | perm << 3;
	}
	*mode = (*mode & ~0777u) | (m & 0777u);
	return not_equiv;
}

/* --- ACLs of inodes --------------------------------------------------------------- */

static int acl_corrupt(const struct mfs_ino *ip, const char *name)
{
	fprintf(stderr, "mendfs: inode %llu: malformed %s\n", (unsigned long long)ip->ino, name);
	return -EUCLEAN;
}

/*
 * The ACL @name of @ip, of up to XATTR_SIZE_MAX bytes: *aclp gets a buffer of
 * its own (free it), *np its size.  Returns 0, -ENODATA or -errno.
 */
static int acl_get(struct mfs *fs, struct mfs_ino *ip, const char *name, uint8_t **aclp, size_t *np)
{
	ssize_t n = mfs_xattr_get_locked(fs, ip, name, NULL, 0);
	uint8_t *acl;

	if (n < 0)
		return (int)n;
	acl = malloc(n ? (size_t)n : 1);
	if (!acl)
		return -ENOMEM;
	/* the inode lock is held: the size cannot change in between */
	n = mfs_xattr_get_locked(fs, ip, name, acl, (size_t)n);
	if (n < 0) {
		free(acl);
		return (int)n;
	}
	*aclp = acl;
	*np = (size_t)n;
	return 0;
}

int mfs_acl_inherit(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *dp, struct mfs_ino *ip,
                    mode_t umask)
{
	uint32_t mode = le32toh(ip->di.mode);
	uint8_t *acl = NULL;
	size_t n = 0;
	int ret = 0;

	if (S_ISLNK(mode))
		return 0;
	ret = acl_get(fs, dp, MFS_ACL_DEFAULT, &acl, &n);
	if (ret == -ENODATA) {
		ip->di.mode = htole32(mode & ~((uint32_t)umask & 0777u));
		return 0;
	}
	if (ret)
		return ret;
	if (mfs_acl_valid(acl, n)) {
		free(acl);
		return acl_corrupt(dp, MFS_ACL_DEFAULT);
	}
	if (S_ISDIR(mode))
		ret = mfs_xattr_set_locked(fs, txn, ip, MFS_ACL_DEFAULT, acl, n, XATTR_CREATE);
	if (!ret && mfs_acl_create_masq(acl, n, &mode))
		ret = mfs_xattr_set_locked(fs, txn, ip, MFS_ACL_ACCESS, acl, n, XATTR_CREATE);
	if (!ret)
		ip->di.mode = htole32(mode);
	free(acl);
	return ret;
}

int mfs_acl_update_chmod(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip)
{
	uint32_t mode = le32toh(ip->di.mode);
	uint8_t *acl = NULL;
	size_t n = 0;
	int ret;

	if (S_ISLNK(mode))
		return 0;
	ret = acl_get(fs, ip, MFS_ACL_ACCESS, &acl, &n);
	if (ret == -ENODATA)
		return 0;
	if (ret)
		return ret;
	if (mfs_acl_valid(acl, n))
		ret = acl_corrupt(ip, MFS_ACL_ACCESS);
	if (!ret) {
		mfs_acl_chmod(acl, n, mode);
		ret = mfs_xattr_set_locked(fs, txn, ip, MFS_ACL_ACCESS, acl, n, XATTR_REPLACE);
	}
	free(acl);
	return ret;
}

int mfs_acl_set(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, int type,
                const void *value, size_t size, int flags, bool kill_sgid)
{
	uint32_t mode = le32toh(ip->di.mode);
	int ret;

	ret = mfs_acl_check(value, size, type, mode, NULL);
	if (ret)
		return ret;
	if (type == MFS_ACL_TYPE_DEFAULT)
		return mfs_xattr_set_locked(fs, txn, ip, MFS_ACL_DEFAULT, value, size, flags);
	if (mfs_acl_equiv_mode(value, size, &mode)) {
		ret = mfs_xattr_set_locked(fs, txn, ip, MFS_ACL_ACCESS, value, size, flags);
	} else {
		/* the mode says it all: no ACL (as ext4, whatever the flags) */
		ret = mfs_xattr_remove_locked(fs, txn, ip, MFS_ACL_ACCESS);
		if (ret == -ENODATA)
			ret = 0;
	}
	if (kill_sgid)
		mode &= ~(uint32_t)S_ISGID;
	if (!ret)
		ip->di.mode = htole32(mode);
	return ret;
}
