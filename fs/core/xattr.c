/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes of a locked inode (docs/FORMAT.md §6.2, §7.3, §7.4):
 * the storage under the operations of xattr_ops.c and the ACLs of acl.c.
 * Calls the B+tree and xattr_blocks.c, nothing above them.
 *
 * Small attributes live in the inode's inline area (di.inline_xattr,
 * inline_xattr_len bytes of packed struct mfs_xattr records); the others in
 * the inode's xattr B+tree (MFS_TREE_XATTR), keyed like directory entries:
 * bits 16..62 of XXH3-64(full name, dir_hash_seed) and a 16-bit
 * collision counter.  An attribute lives in exactly one of the two places.
 * A set writes the new record inline when it fits the free inline space
 * (after removing the old record), else in the tree.
 *
 * A record too large for a tree value (4 + name + value > MFS_BT_MAX_VALUE)
 * keeps its value out of line (xattr_blocks.c: metadata blocks named by a
 * reference in the record, MFS_XATTR_F_BLOCKS); the blocks of a value are
 * freed in the transaction that replaces or removes it, or frees the inode
 * (mfs_xattr_release, xattr_blocks.c).
 *
 * Limits, following Linux and ext4: names are "user.", "trusted.",
 * "security." or "system." plus at least one byte (other prefixes
 * -EOPNOTSUPP, an empty suffix -EINVAL), 1..255 bytes in all (-ERANGE
 * otherwise); a value above XATTR_SIZE_MAX (65536) is -E2BIG.  Without the
 * xattr_blocks feature (a filesystem made before it) a value that does not
 * fit a tree value is -ENOSPC.
 *
 * system.posix_acl_access and system.posix_acl_default are stored here like
 * any other name; validating them and keeping the mode in step is acl.c's.
 *
 * Locking: the caller holds ip->lock, shared for get and list, exclusive for
 * set and remove, and for a change a transaction handle (mfs_int.h).
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <xxhash.h>

#include "mfs_int.h"
#include "xattr_blocks.h"

#define XATTR_NAME_MAX_LEN MFS_XATTR_NAME_MAX
#define XATTR_VALUE_MAX    MFS_XATTR_SIZE_MAX
#define INLINE_CAP         ((unsigned)sizeof(((struct mfs_inode *)0)->inline_xattr))

/* Where a found attribute lives. */
struct xloc {
	bool inline_;
	unsigned off;       /* inline: record offset */
	unsigned len;       /* inline: record length */
	uint64_t key;       /* tree: its key */
	uint16_t value_len; /* bytes after the name in the record */
	bool ext;           /* tree: the value is out of line (the record holds a reference) */
	uint32_t size;      /* the value's size */
};

/* The value size a tree record stands for (its reference's, when out of line). */
static uint32_t rec_size(const uint8_t *rec)
{
	uint32_t v;

	if (!(rec_flags(rec) & MFS_XATTR_F_BLOCKS))
		return rec_value_len(rec);
	memcpy(&v, rec + XHDR + rec_name_len(rec), sizeof(v));
	return le32toh(v);
}

static bool has_blocks(const struct mfs *fs)
{
	return fs->sb.feature_incompat & MFS_FEATURE_INCOMPAT_XATTR_BLOCKS;
}

static int check_name(const char *name, size_t *lenp)
{
	static const char *const prefixes[] = {"user.", "trusted.", "security.", "system."};
	size_t len, i;

	if (!name)
		return -EINVAL;
	len = strnlen(name, XATTR_NAME_MAX_LEN + 1);
	if (len == 0 || len > XATTR_NAME_MAX_LEN)
		return -ERANGE;
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (!strncmp(name, prefixes[i], pl)) {
			if (len == pl)
				return -EINVAL;
			*lenp = len;
			return 0;
		}
	}
	return -EOPNOTSUPP;
}

static uint64_t name_base(struct mfs *fs, const char *name, size_t len)
{
	uint64_t h = XXH3_64bits_withSeed(name, len, le64toh(fs->sb.dir_hash_seed)) &
	             0x7fffffffffff0000ull; /* the name-key rule of FORMAT.md */

	return h ? h : 0x10000;
}

static unsigned inline_len(const struct mfs_ino *ip)
{
	return le16toh(ip->di.inline_xattr_len);
}

/*
 * Walk the inline records: @fn is called with each record's offset and length
 * until it returns non-zero.  A record running past the area is -EUCLEAN.
 */
typedef int inline_fn(void *arg, const uint8_t *rec, unsigned off, unsigned len);

static int inline_walk(const struct mfs_ino *ip, inline_fn *fn, void *arg)
{
	const uint8_t *area = ip->di.inline_xattr;
	unsigned used = inline_len(ip), off = 0;
	int ret;

	if (used > INLINE_CAP)
		return -EUCLEAN;
	while (off < used) {
		unsigned len;

		if (used - off < XHDR)
			return -EUCLEAN;
		len = XHDR + rec_name_len(area + off) + rec_value_len(area + off);
		if (rec_name_len(area + off) == 0 || rec_flags(area + off) || len > used - off)
			return -EUCLEAN;
		ret = fn(arg, area + off, off, len);
		if (ret)
			return ret;
		off += len;
	}
	return 0;
}

struct find_arg {
	const char *name;
	size_t name_len;
	struct xloc *loc;
	uint8_t *val; /* tree: the whole record, MFS_BT_MAX_VALUE bytes */
	bool bad;
	/* insertion: lowest free collision counter */
	uint64_t base;
	uint32_t next_free;
	bool found;
};

static int inline_find_fn(void *arg, const uint8_t *rec, unsigned off, unsigned len)
{
	struct find_arg *a = arg;
	if (rec_name_len(rec) != a->name_len || memcmp(rec + XHDR, a->name, a->name_len))
		return 0;
	a->loc->inline_ = true;
	a->loc->off = off;
	a->loc->len = len;
	a->loc->value_len = rec_value_len(rec);
	a->loc->ext = false;
	a->loc->size = rec_value_len(rec);
	a->found = true;
	return 1;
}

static int tree_find_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct find_arg *a = arg;
	const uint8_t *rec = val;

	if ((key & ~0xffffull) != a->base)
		return 1;
	if ((uint32_t)(key & 0xffff) == a->next_free)
		a->next_free++;
	if (!tree_rec_ok(rec, len)) {
		a->bad = true;
		return 1;
	}
	if (a->found || rec_name_len(rec) != a->name_len ||
	    memcmp(rec + XHDR, a->name, a->name_len))
		return 0;
	a->loc->inline_ = false;
	a->loc->key = key;
	a->loc->value_len = rec_value_len(rec);
	a->loc->ext = rec_flags(rec) & MFS_XATTR_F_BLOCKS;
	a->loc->size = rec_size(rec);
	if (a->val)
		memcpy(a->val, val, len);
	a->found = true;
	return 0; /* keep counting collision slots */
}

/*
 * Look @name up: inline, then in the tree.  Returns 0 (found, *loc filled,
 * @rec gets the tree record if not NULL), -ENODATA, or -errno.  *free_slot
 * (if not NULL) gets the lowest unused tree key for the name.
 */
static int xattr_find(struct mfs *fs, struct mfs_ino *ip, const char *name, size_t name_len,
                      struct xloc *loc, uint8_t *rec, uint64_t *free_slot)
{
	struct find_arg a = {.name = name, .name_len = name_len, .loc = loc, .val = rec};
	struct mfs_btree bt = xtree(ip);
	int ret;

	ret = inline_walk(ip, inline_find_fn, &a);
	if (ret < 0)
		return ret;
	if (a.found && !free_slot)
		return 0;
	a.base = name_base(fs, name, name_len);
	if (bt.root) {
		bool was_inline = a.found;

		/*
		 * Keys sharing the base are scanned in order; the first counter
		 * not used is the free slot (keys come sorted, so a gap ends the
		 * run of consecutive counters).
		 */
		ret = mfs_bt_iterate(fs, &bt, a.base, tree_find_fn, &a);
		if (ret < 0)
			return ret;
		if (a.bad)
			return -EUCLEAN;
		if (was_inline)
			a.found = true;
	}
	if (free_slot) {
		if (a.next_free > 0xffff)
			return -ENOSPC;
		*free_slot = a.base | a.next_free;
	}
	return a.found ? 0 : -ENODATA;
}

static void inline_remove(struct mfs_inode *di, unsigned off, unsigned len)
{
	unsigned used = le16toh(di->inline_xattr_len);

	memmove(di->inline_xattr + off, di->inline_xattr + off + len, used - off - len);
	memset(di->inline_xattr + used - len, 0, len);
	di->inline_xattr_len = htole16((uint16_t)(used - len));
}

static void fill_record(uint8_t *rec, const char *name, size_t name_len, const void *value,
                        size_t size, unsigned flags)
{
	uint16_t vl = htole16((uint16_t)size);

	rec[0] = (uint8_t)name_len; /* struct mfs_xattr, written bytewise: rec may be unaligned */
	rec[1] = (uint8_t)flags;
	memcpy(rec + 2, &vl, sizeof(vl));
	memcpy(rec + XHDR, name, name_len);
	if (value && size) /* no value: already in place (an out-of-line value's reference) */
		memcpy(rec + XHDR + name_len, value, size);
}

int mfs_xattr_check_name(const char *name)
{
	size_t len;

	return check_name(name, &len);
}

/* The checks of a set: 0 or -errno; *name_len gets the name's length. */
static int set_check(struct mfs *fs, const char *name, const void *value, size_t size,
                     size_t *name_len)
{
	int ret = check_name(name, name_len);

	if (ret)
		return ret;
	if (size > XATTR_VALUE_MAX)
		return -E2BIG;
	if (size && !value)
		return -EINVAL;
	if (XHDR + *name_len + size > MFS_BT_MAX_VALUE && !has_blocks(fs))
		return -ENOSPC;
	return 0;
}

int mfs_xattr_check_set(struct mfs *fs, const char *name, const void *value, size_t size)
{
	size_t name_len;

	return set_check(fs, name, value, size, &name_len);
}

int mfs_xattr_set_locked(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip, const char *name,
                         const void *value, size_t size, int flags)
{
	uint8_t rec[MFS_BT_MAX_VALUE], old[MFS_BT_MAX_VALUE];
	struct mfs_xval xv = {0};
	struct mfs_inode newdi;
	struct mfs_btree bt;
	struct xloc loc;
	uint64_t slot = 0;
	size_t name_len = 0, reclen;
	uint32_t old_size;
	unsigned old_nr = 0;
	bool exists, ext;
	int ret;

	ret = set_check(fs, name, value, size, &name_len);
	if (ret)
		return ret;
	ret = xattr_find(fs, ip, name, name_len, &loc, old, &slot);
	if (ret && ret != -ENODATA)
		return ret;
	exists = ret == 0;
	if (exists && (flags & XATTR_CREATE))
		return -EEXIST;
	if (!exists && (flags & XATTR_REPLACE))
		return -ENODATA;
	/* the old value's blocks are freed with its record: check them before anything changes */
	if (exists && loc.ext) {
		ret = mfs_xref_check(fs, ip->ino, old + XHDR + name_len, loc.value_len, &old_size,
		                     &old_nr);
		if (ret)
			return ret;
	}

	ext = XHDR + name_len + size > MFS_BT_MAX_VALUE;
	if (ext) {
		ret = mfs_xval_prepare(fs, txn, ip->ino, value, size, rec + XHDR + name_len, &xv);
		if (ret)
			return ret;
		fill_record(rec, name, name_len, NULL, mfs_xref_len(size), MFS_XATTR_F_BLOCKS);
		reclen = XHDR + name_len + mfs_xref_len(size);
	} else {
		fill_record(rec, name, name_len, value, size, 0);
		reclen = XHDR + name_len + size;
	}

	/* build the new inode image; the tree changes first, the inode copy last */
	newdi = ip->di;
	if (exists && loc.inline_)
		inline_remove(&newdi, loc.off, loc.len);
	bt = xtree(ip);
	if (!ext && reclen <= INLINE_CAP - le16toh(newdi.inline_xattr_len)) {
		unsigned used = le16toh(newdi.inline_xattr_len);

		memcpy(newdi.inline_xattr + used, rec, reclen);
		newdi.inline_xattr_len = htole16((uint16_t)(used + reclen));
		ret = 0;
		if (exists && !loc.inline_)
			ret = mfs_bt_delete(fs, txn, &bt, loc.key);
	} else if (exists && !loc.inline_) {
		ret = mfs_bt_update(fs, txn, &bt, loc.key, rec, (uint16_t)reclen);
	} else {
		ret = mfs_bt_insert(fs, txn, &bt, slot, rec, (uint16_t)reclen);
	}
	mfs_xval_finish(fs, txn, &xv, ret == 0);
	newdi.xattr_root = htole64(bt.root);
	newdi.xattr_depth = htole16(bt.depth);
	if (ret) {
		xtree_store(ip, &bt); /* a failed tree op leaves the tree as it was */
		return ret;
	}
	ip->di = newdi;
	/* a failure here leaves the old blocks allocated to nothing: fsck frees them */
	return old_nr ? mfs_xval_free(fs, txn, old + XHDR + name_len, old_nr) : 0;
}

ssize_t mfs_xattr_get_locked(struct mfs *fs, struct mfs_ino *ip, const char *name, void *value,
                             size_t size)
{
	uint8_t rec[MFS_BT_MAX_VALUE];
	struct xloc loc;
	size_t name_len = 0;
	ssize_t ret;

	ret = check_name(name, &name_len);
	if (ret)
		return ret == -EINVAL ? -ENODATA : ret;
	ret = xattr_find(fs, ip, name, name_len, &loc, rec, NULL);
	if (ret)
		return ret;
	if (size == 0 || !value)
		return loc.size; /* a size query */
	if (size < loc.size)
		return -ERANGE;
	if (loc.ext)
		return mfs_xval_read(fs, ip->ino, rec + XHDR + name_len, loc.value_len, value);
	if (loc.inline_)
		memcpy(value, ip->di.inline_xattr + loc.off + XHDR + name_len, loc.value_len);
	else
		memcpy(value, rec + XHDR + name_len, loc.value_len);
	return loc.value_len;
}

struct list_arg {
	char *list;
	size_t size, used;
	bool bad;
};

static void list_add(struct list_arg *a, const uint8_t *rec)
{
	unsigned nl = rec_name_len(rec);

	if (a->size && a->used + nl + 1 <= a->size) {
		memcpy(a->list + a->used, rec + XHDR, nl);
		a->list[a->used + nl] = '\0';
	}
	a->used += nl + 1u;
}

static int list_inline_fn(void *arg, const uint8_t *rec, unsigned off, unsigned len)
{
	(void)off;
	(void)len;
	list_add(arg, rec);
	return 0;
}

static int list_tree_fn(void *arg, uint64_t key, const void *val, uint16_t len)
{
	struct list_arg *a = arg;
	const uint8_t *rec = val;

	(void)key;
	if (!tree_rec_ok(rec, len)) {
		a->bad = true;
		return 1;
	}
	list_add(a, rec);
	return 0;
}

ssize_t mfs_xattr_list_locked(struct mfs *fs, struct mfs_ino *ip, char *list, size_t size)
{
	struct list_arg a = {.list = list, .size = list ? size : 0}; /* NULL: a size query */
	struct mfs_btree bt;
	ssize_t ret;

	ret = inline_walk(ip, list_inline_fn, &a);
	bt = xtree(ip);
	if (!ret && bt.root)
		ret = mfs_bt_iterate(fs, &bt, 0, list_tree_fn, &a);
	if (!ret && a.bad)
		ret = -EUCLEAN;
	if (!ret)
		ret = a.size && a.used > a.size ? -ERANGE : (ssize_t)a.used;
	return ret;
}

int mfs_xattr_remove_locked(struct mfs *fs, struct mfs_txn *txn, struct mfs_ino *ip,
                            const char *name)
{
	uint8_t rec[MFS_BT_MAX_VALUE];
	struct mfs_btree bt;
	struct xloc loc;
	size_t name_len = 0;
	uint32_t size;
	unsigned nr = 0;
	int ret;

	ret = check_name(name, &name_len);
	if (ret)
		return ret == -EINVAL ? -ENODATA : ret;
	ret = xattr_find(fs, ip, name, name_len, &loc, rec, NULL);
	if (ret)
		return ret;
	if (loc.inline_) {
		inline_remove(&ip->di, loc.off, loc.len);
		return 0;
	}
	if (loc.ext) {
		ret = mfs_xref_check(fs, ip->ino, rec + XHDR + name_len, loc.value_len, &size, &nr);
		if (ret)
			return ret;
	}
	bt = xtree(ip);
	ret = mfs_bt_delete(fs, txn, &bt, loc.key);
	xtree_store(ip, &bt);
	if (!ret && nr)
		ret = mfs_xval_free(fs, txn, rec + XHDR + name_len, nr);
	return ret;
}
