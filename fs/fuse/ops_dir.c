/* SPDX-License-Identifier: MIT */
/*
 * The handlers of open directories (ops.h): opendir, readdir and readdirplus
 * (whose entries take lookup references, node_table.h); a directory is
 * released and synced as a file is (mfsd_release, mfsd_fsync).  Calls the
 * node table, the core and libfuse.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

void mfsd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret;

	ret = mfs_getattr(D(req)->fs, ino, &st);
	if (!ret && !S_ISDIR(st.st_mode))
		ret = -ENOTDIR;
	if (!ret)
		ret = mfsd_file_open(D(req), ino, fi);
	if (ret)
		goto fail;
	fuse_reply_open(req, fi);
	return;
fail:
	fuse_reply_err(req, -ret);
}

/* readdir: entries straight into the reply buffer. */
struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
};

static int fill_dir(void *arg, const char *name, size_t name_len, uint64_t ino, unsigned dtype,
                    uint64_t next_pos)
{
	struct dirbuf *db = arg;
	struct stat st = {.st_ino = ino, .st_mode = (mode_t)(dtype << 12)};
	char nm[NAME_MAX + 1];
	size_t n;

	if (name_len > NAME_MAX)
		name_len = NAME_MAX;
	memcpy(nm, name, name_len);
	nm[name_len] = '\0';
	n = fuse_add_direntry(db->req, db->buf + db->used, db->size - db->used, nm, &st,
	                      (off_t)next_pos);
	if (n > db->size - db->used)
		return 1; /* full: this entry comes first next time */
	db->used += n;
	return 0;
}

void mfsd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct dirbuf db = {.req = req, .size = size};
	struct mfsd_file *f = mfsd_file_of(fi);
	int ret = -ENOMEM;

	mfsd_accessed(D(req)->fs, f->ip, f->flags);
	db.buf = malloc(size ? size : 1);
	if (!db.buf)
		goto fail;
	ret = mfs_readdir(D(req)->fs, ino, (uint64_t)off, fill_dir, &db);
	if (ret && !db.used)
		goto fail;
	fuse_reply_buf(req, db.buf, db.used);
	free(db.buf);
	return;
fail:
	free(db.buf);
	fuse_reply_err(req, -ret);
}

/*
 * readdirplus: entries are collected under the directory's lock (as many as
 * the reply can hold), each with a reference to its inode taken there, while
 * the directory still names it (as LOOKUP does: an unlink and a create
 * meanwhile cannot hand the kernel a reused number); then each is pinned and
 * its attributes read outside the lock: every entry returned, except "." and
 * "..", takes a lookup reference.
 */
struct plus_ent {
	uint64_t ino, next_pos;
	struct mfs_ino *ip; /* the reference, or NULL: "." and "..", or err */
	int err;            /* why no reference (-ENOENT: a dot entry) */
	char name[NAME_MAX + 1];
};

struct plusbuf {
	fuse_req_t req;
	struct mfs *fs;
	size_t size, used;
	struct plus_ent *ents;
	size_t n, cap;
	int err;
};

static int collect_plus(void *arg, const char *name, size_t name_len, uint64_t ino, unsigned dtype,
                        uint64_t next_pos)
{
	struct plusbuf *pb = arg;
	struct plus_ent *pe;
	size_t need;

	(void)dtype;
	if (name_len > NAME_MAX)
		name_len = NAME_MAX;
	if (pb->n == pb->cap) {
		size_t cap = pb->cap ? pb->cap * 2 : 64;
		struct plus_ent *v = realloc(pb->ents, cap * sizeof(*v));

		if (!v) {
			pb->err = -ENOMEM;
			return 1;
		}
		pb->ents = v;
		pb->cap = cap;
	}
	pe = &pb->ents[pb->n];
	memcpy(pe->name, name, name_len);
	pe->name[name_len] = '\0';
	need = fuse_add_direntry_plus(pb->req, NULL, 0, pe->name, NULL, 0);
	if (need > pb->size - pb->used)
		return 1;
	pe->ino = ino;
	pe->next_pos = next_pos;
	pe->ip = NULL;
	pe->err = -ENOENT;
	if (strcmp(pe->name, ".") && strcmp(pe->name, ".."))
		pe->err = mfs_iget(pb->fs, ino, &pe->ip);
	pb->used += need;
	pb->n++;
	return 0;
}

/* Drop the references of entries @from on, not replied. */
static void put_plus(struct plusbuf *pb, size_t from)
{
	for (size_t i = from; i < pb->n; i++)
		if (pb->ents[i].ip)
			mfs_iput(pb->fs, pb->ents[i].ip);
}

void mfsd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
	struct mfsd *d = D(req);
	struct plusbuf pb = {.req = req, .fs = d->fs, .size = size};
	size_t i = 0, used = 0;
	struct mfsd_file *f = mfsd_file_of(fi);
	char *buf = NULL;
	int ret;

	mfsd_accessed(d->fs, f->ip, f->flags);
	ret = mfs_readdir(d->fs, ino, (uint64_t)off, collect_plus, &pb);
	if (!ret)
		ret = pb.err;
	if (ret && !pb.n)
		goto fail;
	ret = -ENOMEM;
	buf = malloc(size ? size : 1);
	if (!buf)
		goto fail;
	for (; i < pb.n; i++) {
		struct plus_ent *pe = &pb.ents[i];
		struct fuse_entry_param e;

		/* the node takes over the entry's reference, even when it fails */
		ret = pe->ip ? mfsd_node_attach(d, pe->ip, &e) : pe->err;
		pe->ip = NULL;
		if (ret == -ENOENT) {
			/*
			 * "." and "..", or an inode the core no longer has
			 * (skipping it could leave an empty reply, read as the
			 * end of the directory): a name without attributes, which
			 * takes no lookup reference (node id 0).
			 */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = pe->ino;
			e.attr.st_mode =
			        !strcmp(pe->name, ".") || !strcmp(pe->name, "..") ? S_IFDIR : 0;
		} else if (ret) {
			if (!used)
				goto fail;
			break;
		}
		used += fuse_add_direntry_plus(req, buf + used, size - used, pe->name, &e,
		                               (off_t)pe->next_pos);
	}
	put_plus(&pb, i);
	fuse_reply_buf(req, buf, used);
	free(buf);
	free(pb.ents);
	return;
fail:
	put_plus(&pb, i);
	free(buf);
	free(pb.ents);
	fuse_reply_err(req, -ret);
}
