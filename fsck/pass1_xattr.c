/* SPDX-License-Identifier: MIT */
/*
 * Pass 1, xattrs (FORMAT.md §7.4, §7.5): the entries of an inode's xattr
 * tree, called by the tree walker for each entry of a sound leaf, and the
 * ACL check of inline xattrs too.
 *
 *  - framing: lengths add up, known flags, the key is the name's key;
 *  - an out-of-line value: its reference (sizes, blocks in the meta zone),
 *    then every block read through fsck_meta_read (both copies, twin
 *    repairs, poison recorded for the damage report), of type
 *    MFS_T_XATTR_VALUE, owned by the inode, holding its piece, not claimed
 *    by anything else, and the whole value against the reference's
 *    checksum.  A sound value claims its blocks (OWN_INODE(ino, 0)); a bad
 *    one is removed (F0112) and its blocks, claimed by nothing, are freed by
 *    pass 5.  Left in place (not fixed), it claims what it names, so that
 *    pass 5 frees nothing still referenced;
 *  - an ACL (system.posix_acl_access, system.posix_acl_default), wherever
 *    its value is (inline, in the tree, out of line): the core's own rules
 *    (mfs_acl_check): well formed, no default ACL on a non-directory, no ACL
 *    on a symlink.  A bad one is removed (F0114; its out-of-line blocks are
 *    freed by pass 5).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fsck.h"

#define REF_HDR ((unsigned)sizeof(struct mfs_xattr_ref))
#define PIECE   ((uint32_t)MFS_XATTR_BLOCK_BYTES)

static uint64_t ref_block(const uint8_t *ref, unsigned i)
{
	uint64_t b;

	memcpy(&b, ref + REF_HDR + 8u * i, sizeof(b));
	return b;
}

/* The poison lines fsck_meta_read added since @from name the file in the damage report. */
static void note_damage(struct fsck_ctx *ctx, uint64_t ino, size_t from)
{
	for (size_t k = from; k < ctx->nmeta_damage; k++) {
		struct fsck_range r = {.ino = ino, .off = k};

		if (VEC_PUSH(ctx->xdamage, ctx->nxdamage, ctx->cap_xdamage, r))
			return;
	}
}

/* Claim for @ino the blocks @ref names that nothing else claims (a value left as it is). */
static void claim_rest(struct fsck_ctx *ctx, uint64_t ino, const uint8_t *ref, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++) {
		uint64_t b = ref_block(ref, i);

		if (fsck_in_meta_zone(ctx, b) &&
		    ctx->meta_owner[b - ctx->sb.meta_start] == OWN_NONE)
			ctx->meta_owner[b - ctx->sb.meta_start] = OWN_INODE(ino, 0);
	}
}

/*
 * Check the value an out-of-line record names.  NULL when sound (*valp gets
 * the value, *sizep its size: free it; its blocks are not claimed yet), else
 * why not, in @why.
 */
static const char *check_value(struct fsck_ctx *ctx, uint64_t ino, const uint8_t *name, unsigned nl,
                               const uint8_t *ref, unsigned rlen, char *why, size_t whylen,
                               unsigned *nrp, uint8_t **valp, uint32_t *sizep)
{
	struct mfs_xattr_ref r;
	uint8_t *val = NULL, *blk = NULL;
	const char *bad = NULL;
	char what[320];
	unsigned i;

	*nrp = 0;
	if (!(ctx->sb.feature_incompat & MFS_FEATURE_INCOMPAT_XATTR_BLOCKS))
		return "an out-of-line value without the xattr_blocks feature";
	if (rlen < REF_HDR)
		return "a malformed value reference";
	memcpy(&r, ref, REF_HDR);
	if (r.size == 0 || r.size > MFS_XATTR_SIZE_MAX ||
	    r.nr_blocks != (r.size + PIECE - 1) / PIECE || rlen != REF_HDR + 8u * r.nr_blocks)
		return "a malformed value reference";
	*nrp = r.nr_blocks;
	val = malloc(r.size);
	if (!val || posix_memalign((void **)&blk, MFS_BLOCK_SIZE, MFS_BLOCK_SIZE)) {
		free(val);
		return "no memory to check it";
	}
	for (i = 0; i < r.nr_blocks && !bad; i++) {
		uint64_t b = ref_block(ref, i), o;
		uint32_t n = r.size - i * PIECE < PIECE ? r.size - i * PIECE : PIECE;
		const struct mfs_meta_hdr *hdr = (const void *)blk;
		size_t from = ctx->nmeta_damage;
		int ret;

		bad = why;
		if (!fsck_in_meta_zone(ctx, b)) {
			snprintf(why, whylen, "value block %llu is outside the meta zone",
			         (unsigned long long)b);
			break;
		}
		o = ctx->meta_owner[b - ctx->sb.meta_start];
		for (unsigned k = 0; k < i && o == OWN_NONE; k++)
			if (ref_block(ref, k) == b)
				o = OWN_INODE(ino, 0);
		if (o != OWN_NONE) {
			snprintf(why, whylen,
			         "value block %llu is also claimed by the %s of %s %llu",
			         (unsigned long long)b, fsck_own_kind(o),
			         OWN_IS_INODE(o) ? "inode" : "owner",
			         (unsigned long long)(OWN_IS_INODE(o) ? o >> 2 : 0));
			break;
		}
		snprintf(what, sizeof(what), "xattr %.*s of inode %llu, value block %u of %u",
		         (int)nl, (const char *)name, (unsigned long long)ino, i + 1, r.nr_blocks);
		ret = fsck_meta_read(ctx, b, MFS_T_XATTR_VALUE, blk, what);
		note_damage(ctx, ino, from);
		if (ret) {
			snprintf(why, whylen, "value block %llu is lost: both copies %s",
			         (unsigned long long)b,
			         ret == -EIO ? "unreadable or poisoned" : "corrupt");
			break;
		}
		if (hdr->owner != ino || hdr->nr_items != n) {
			snprintf(why, whylen,
			         "value block %llu belongs to inode %llu and holds %u bytes "
			         "(expected %u)",
			         (unsigned long long)b, (unsigned long long)hdr->owner,
			         hdr->nr_items, n);
			break;
		}
		memcpy(val + (size_t)i * PIECE, blk + sizeof(*hdr), n);
		bad = NULL;
	}
	if (!bad && XXH3_64bits_withSeed(val, r.size, ctx->seed) != r.csum) {
		snprintf(why, whylen, "the value (%u bytes) fails its checksum", r.size);
		bad = why;
	}
	free(blk);
	if (bad) {
		free(val);
		return bad;
	}
	*valp = val;
	*sizep = r.size;
	return NULL;
}

bool fsck_xattr_acl_bad(struct fsck_ctx *ctx, uint64_t ino, uint32_t mode, const uint8_t *name,
                        unsigned nl, const void *val, size_t vl)
{
	char nm[256];
	const char *why;
	int type;

	if (nl >= sizeof(nm) || memchr(name, 0, nl))
		return false;
	memcpy(nm, name, nl);
	nm[nl] = '\0';
	type = mfs_acl_type(nm);
	if (!type || !mfs_acl_check(val, vl, type, mode, &why))
		return false;
	return fsck_fix_problem(ctx, PR_ACL_BAD, "inode %llu (%s): %s (%zu bytes): %s: remove it",
	                        (unsigned long long)ino,
	                        S_ISDIR(mode)   ? "directory"
	                        : S_ISLNK(mode) ? "symlink"
	                        : S_ISREG(mode) ? "regular file"
	                                        : "special file",
	                        nm, vl, why);
}

bool fsck_xattr_name_ok(const uint8_t *name, unsigned len)
{
	static const char *const prefixes[] = {"user.", "trusted.", "security.", "system."};

	/* names are C strings to the filesystem: a NUL inside one names another xattr */
	if (memchr(name, 0, len))
		return false;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (len > pl && !memcmp(name, prefixes[i], pl))
			return true;
	}
	return false;
}

int fsck_xattr_tree_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val,
                       uint16_t len)
{
	uint64_t ino = *(uint64_t *)arg;
	uint32_t mode = ctx->ino[ino].mode, size = 0;
	uint8_t *value = NULL;
	unsigned nl = len >= XHDR ? val[0] : 0, flags = len >= XHDR ? val[1] : 0,
	         vl = len >= XHDR ? (unsigned)(val[2] | val[3] << 8) : 0, nr;
	const char *bad;
	char why[200];

	if (len < XHDR || nl == 0 || XHDR + nl + vl != len || (flags & ~MFS_XATTR_F_BLOCKS) ||
	    (key & MFS_NAME_KEY_MASK) != fsck_name_key(ctx, val + XHDR, nl)) {
		bool fix = fsck_fix_problem(
		        ctx, PR_XATTR_BAD,
		        "inode %llu: xattr tree entry %#llx is malformed (%u bytes) or "
		        "its key does not match its name",
		        (unsigned long long)ino, (unsigned long long)key, len);
		return fix ? ENT_DROP : ENT_BAD;
	}
	if (!fsck_xattr_name_ok(val + XHDR, nl) &&
	    fsck_fix_problem(ctx, PR_XATTR_BAD,
	                     "inode %llu: xattr %.*s has no namespace the filesystem knows "
	                     "(user., trusted., security., system. and a name) or a NUL "
	                     "byte in its name: remove it",
	                     (unsigned long long)ino, (int)nl, (const char *)val + XHDR))
		return ENT_DROP;
	if (!(flags & MFS_XATTR_F_BLOCKS))
		return fsck_xattr_acl_bad(ctx, ino, mode, val + XHDR, nl, val + XHDR + nl, vl)
		               ? ENT_DROP
		               : ENT_OK;
	bad = check_value(ctx, ino, val + XHDR, nl, val + XHDR + nl, vl, why, sizeof(why), &nr,
	                  &value, &size);
	if (!bad) {
		bool drop = fsck_xattr_acl_bad(ctx, ino, mode, val + XHDR, nl, value, size);

		free(value);
		if (drop) /* its blocks, claimed by nothing, are freed by pass 5 */
			return ENT_DROP;
		claim_rest(ctx, ino, val + XHDR + nl, nr);
		return ENT_OK;
	}
	if (fsck_fix_problem(ctx, PR_XATTR_VALUE, "inode %llu: xattr %.*s: %s: remove the xattr",
	                     (unsigned long long)ino, (int)nl, (const char *)val + XHDR, bad))
		return ENT_DROP;
	if (vl >= REF_HDR + 8u * nr)
		claim_rest(ctx, ino, val + XHDR + nl, nr);
	return ENT_BAD;
}
