/* SPDX-License-Identifier: MIT */
/*
 * crash_workload.c: the crash test's workload (step 2 in crash_test.c) and
 * its in-memory model: the files with their changes and fsync'ed versions,
 * the directories and names, the operations with the log length at their
 * start and end, and the fsync/sync events the checks hold the images to.
 */
#include "crash.h"

struct mfile *files;
unsigned nfiles;
static unsigned capfiles;
struct mdir *dirs;
unsigned ndirs;
static unsigned capdirs;
struct mentry *ents;
static unsigned nents, capents;
struct op *ops;
unsigned nops, capops;
struct event *evs;
unsigned nevs;
static unsigned capevs;
struct snap **snaps;
unsigned nsnaps;
static unsigned capsnaps;
static unsigned name_ctr;
static int fsync_file; /* the file of the last fsync op (or fragmented file made) */
unsigned frag_made, frag_freed;
struct mfs_ino *held[MAX_HELD];
int held_kind[MAX_HELD];
unsigned nheld;

void held_drop(unsigned t)
{
	if (held_kind[t] != HELD_PIN)
		mfs_iput(wfs, held[t]);
	if (held_kind[t] != HELD_OPEN)
		mfs_iunpin(wfs, held[t]);
	held[t] = held[nheld - 1];
	held_kind[t] = held_kind[nheld - 1];
	nheld--;
}

struct mfs *wfs;

/* Record a change of file @f: bytes [lo, hi) of its new content, or its freeing. */
static void file_mod(int f, size_t lstart, size_t lo, size_t hi, bool freed)
{
	struct mfile *mf = &files[f];
	struct fmod *m;

	GROW(mf->mods, mf->nmods, mf->capmods);
	m = &mf->mods[mf->nmods++];
	m->lstart = lstart;
	m->lo = lo;
	m->hi = hi > lo ? hi : lo;
	m->size = mf->size;
	m->freed = freed;
	m->data = xmalloc(m->hi - m->lo);
	if (m->hi > m->lo)
		memcpy(m->data, mf->data + lo, m->hi - m->lo);
}

static void file_changed(int f, size_t lstart)
{
	unsigned i;

	files[f].snap = NULL;
	for (i = 0; i < nevs; i++)
		if (evs[i].file == f && evs[i].next_mod == SIZE_MAX)
			evs[i].next_mod = lstart;
}

void record_event(int f, size_t F)
{
	struct mfile *mf = &files[f];
	struct event *e;

	if (!mf->snap) {
		struct snap *s = xmalloc(sizeof(*s));

		s->size = mf->size;
		s->data = xmalloc(mf->size);
		if (mf->size)
			memcpy(s->data, mf->data, mf->size);
		GROW(snaps, nsnaps, capsnaps);
		snaps[nsnaps++] = s;
		mf->snap = s;
	}
	GROW(evs, nevs, capevs);
	e = &evs[nevs++];
	e->file = f;
	e->F = F;
	e->next_mod = SIZE_MAX;
	e->op = nops - 1;
	e->mod0 = mf->nmods;
	e->snap = mf->snap;
}

static void file_reserve(struct mfile *mf, size_t size)
{
	if (size > mf->cap) {
		size_t cap = mf->cap ? mf->cap : 4096;

		while (cap < size)
			cap *= 2;
		mf->data = xrealloc(mf->data, cap);
		memset(mf->data + mf->cap, 0, cap - mf->cap);
		mf->cap = cap;
	}
}

static int pick_entry(enum ekind kind)
{
	unsigned n = 0, i, k;

	for (i = 0; i < nents; i++)
		if (ents[i].live && ents[i].kind == kind)
			n++;
	if (!n)
		return -1;
	k = rnd(n);
	for (i = 0; i < nents; i++)
		if (ents[i].live && ents[i].kind == kind && k-- == 0)
			return (int)i;
	return -1;
}

static int pick_dir(void)
{
	unsigned n = 0, i, k;

	for (i = 0; i < ndirs; i++)
		n += dirs[i].live;
	k = rnd(n);
	for (i = 0; i < ndirs; i++)
		if (dirs[i].live && k-- == 0)
			return (int)i;
	return 0;
}

static int pick_any_file(void)
{
	unsigned n = 0, i, k;

	for (i = 0; i < nfiles; i++)
		n += files[i].live;
	if (!n)
		return -1;
	k = rnd(n);
	for (i = 0; i < nfiles; i++)
		if (files[i].live && k-- == 0)
			return (int)i;
	return -1;
}

/* A live file, mostly not one of the long-name batches (so that data piles up in fewer files). */
static int pick_file(void)
{
	int f = -1, tries;

	for (tries = 0; tries < 8; tries++) {
		f = pick_any_file();
		if (f < 0 || !files[f].batch)
			break;
	}
	return f;
}

/* Bytes of every live file (an upper bound of the data blocks they use). */
static size_t live_bytes(void)
{
	size_t n = 0;
	unsigned i;

	for (i = 0; i < nfiles; i++)
		if (files[i].live)
			n += files[i].size;
	return n;
}

/* Is dir @a the same as or an ancestor of dir @b? */
static bool dir_ancestor(int a, int b)
{
	for (;;) {
		if (a == b)
			return true;
		if (b == 0)
			return false;
		b = dirs[b].parent;
	}
}

static bool dir_empty(int d)
{
	unsigned i;

	for (i = 0; i < nents; i++)
		if (ents[i].live && ents[i].dir == d)
			return false;
	return true;
}

static int entry_of_dir(int d)
{
	unsigned i;

	for (i = 0; i < nents; i++)
		if (ents[i].live && ents[i].kind == E_DIR && ents[i].idx == d)
			return (int)i;
	return -1;
}

static int add_entry(int dir, const char *name, enum ekind kind, int idx)
{
	struct mentry *e;

	GROW(ents, nents, capents);
	e = &ents[nents];
	e->dir = dir;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->kind = kind;
	e->idx = idx;
	e->live = true;
	return (int)nents++;
}

#define CHK(call, ...)                                                                             \
	do {                                                                                       \
		long _r = (long)(call);                                                            \
		if (_r < 0)                                                                        \
			die("workload op %u: %s failed: %s (" __VA_ARGS__ ")", nops - 1, #call,    \
			    strerror((int)-_r));                                                   \
	} while (0)

/* Drop one name of file @f; the file is freed with its last name. */
static void file_unlinked(int f, size_t lstart)
{
	if (--files[f].nlinks == 0) {
		files[f].live = false;
		file_mod(f, lstart, 0, 0, true);
		file_changed(f, lstart);
	}
}

/*
 * A large xattr value: 8 bytes of seed, 4 of length, then a stream from the
 * seed, so that a value read back at a crash point proves itself whole (never
 * pieces of two values, never a torn block).
 */
static void xval_fill(uint8_t *v, uint32_t len, uint64_t seed)
{
	uint64_t st = seed;

	memcpy(v, &seed, 8);
	memcpy(v + 8, &len, 4);
	for (uint32_t i = 12; i < len; i++)
		v[i] = (uint8_t)rng_next(&st);
}

bool xval_ok(const uint8_t *v, uint32_t len)
{
	static uint8_t want[65536];
	uint64_t seed;
	uint32_t l;

	if (len < 12)
		return false;
	memcpy(&seed, v, 8);
	memcpy(&l, v + 8, 4);
	if (l != len)
		return false;
	xval_fill(want, len, seed);
	return !memcmp(want, v, len);
}

#define XLARGE_BLOCKS 120 /* out-of-line value blocks the live files keep below (meta zone) */

/*
 * Set (XATTR_SIZE_MAX at most; a new value or a replacement) or remove an
 * out-of-line xattr of file @f, or of a file that has one (case 20), then
 * fsync: the commit carrying it falls inside the op.
 */
static bool xattr_large_op(int f)
{
	static uint8_t val[65536];
	struct op *op = &ops[nops - 1];
	unsigned which = rnd(2), blocks = 0, g, start = rnd(nfiles);
	uint32_t len = rnd(2) ? 1025 + rnd(8000) : 1025 + rnd(65536 - 1025 + 1);
	bool remove = false;
	struct mfile *mf;
	char name[16];

	for (g = 0; g < nfiles; g++)
		if (files[g].live)
			blocks += (files[g].xlarge[0] + 4047) / 4048 +
			          (files[g].xlarge[1] + 4047) / 4048;
	if (rnd(2) == 0 || blocks + 17 > XLARGE_BLOCKS)
		for (g = 0; g < nfiles; g++) {
			unsigned h = (start + g) % nfiles;

			if (files[h].live && files[h].xlarge[which]) {
				f = (int)h;
				remove = true;
				break;
			}
		}
	if (!remove && blocks + 17 > XLARGE_BLOCKS)
		return false;
	mf = &files[f];
	snprintf(name, sizeof(name), "user.L%u", which);
	if (remove) {
		CHK(mfs_removexattr(wfs, mf->ino, name), "removexattr large");
		CHK(mfs_fsync(wfs, mf->ino, false), "fsync");
		snprintf(op->desc, sizeof(op->desc), "removexattr %s (%u bytes) on ino %" PRIu64,
		         name, mf->xlarge[which], mf->ino);
		mf->xlarge[which] = 0;
		op->xlarge = 2;
		return true;
	}
	xval_fill(val, len, rng_next(&wl_rng));
	CHK(mfs_setxattr(wfs, mf->ino, name, val, len, 0), "setxattr large");
	CHK(mfs_fsync(wfs, mf->ino, false), "fsync");
	snprintf(op->desc, sizeof(op->desc), "setxattr %s (%u bytes, was %u) on ino %" PRIu64, name,
	         len, mf->xlarge[which], mf->ino);
	mf->xlarge[which] = len;
	op->xlarge = 1;
	return true;
}

/* One workload operation.  Returns false when it did nothing (picked again). */
static bool do_op(unsigned kind, size_t lstart)
{
	struct op *op = &ops[nops - 1];
	char name[NAME_MAX_];
	struct stat st;
	int d, e, f, t;

	switch (kind) {
	case 0: /* create */
	case 1: {
		struct mfile *mf;

		d = pick_dir();
		snprintf(name, sizeof(name), "f%u", name_ctr++);
		CHK(mfs_mknod(wfs, dirs[d].ino, name, S_IFREG | 0644, 0, 0, 0, &st), "create");
		GROW(files, nfiles, capfiles);
		mf = &files[nfiles];
		memset(mf, 0, sizeof(*mf));
		mf->ino = st.st_ino;
		mf->nlinks = 1;
		mf->live = true;
		add_entry(d, name, E_FILE, (int)nfiles++);
		snprintf(op->desc, sizeof(op->desc),
		         "create %s in dir ino %" PRIu64 " -> ino %" PRIu64, name, dirs[d].ino,
		         (uint64_t)st.st_ino);
		return true;
	}
	case 2: { /* mkdir */
		struct mdir *md;

		if (ndirs >= 12)
			return false;
		d = pick_dir();
		snprintf(name, sizeof(name), "d%u", name_ctr++);
		CHK(mfs_mkdir(wfs, dirs[d].ino, name, 0755, 0, 0, &st), "mkdir");
		GROW(dirs, ndirs, capdirs);
		md = &dirs[ndirs];
		md->ino = st.st_ino;
		md->parent = d;
		md->live = true;
		add_entry(d, name, E_DIR, (int)ndirs++);
		snprintf(op->desc, sizeof(op->desc),
		         "mkdir %s in dir ino %" PRIu64 " -> ino %" PRIu64, name, dirs[d].ino,
		         (uint64_t)st.st_ino);
		return true;
	}
	case 3: /* write a random range */
	case 4:
	case 5:
	case 6: {
		struct mfile *mf;
		size_t off, len, i, lo;
		uint8_t *buf;
		ssize_t n;

		if ((f = pick_file()) < 0)
			return false;
		mf = &files[f];
		if (kind != 6 && live_bytes() > LIVE_MAX)
			return false; /* keep well clear of ENOSPC: overwrite, truncate, unlink */
		if (kind == 6 && mf->size > 0) { /* overwrite inside the file */
			off = rnd((unsigned)mf->size);
			len = 1 + rnd((unsigned)(mf->size - off));
			if (len > P.max_write)
				len = P.max_write;
		} else {
			off = rnd(P.max_file);
			len = 1 + rnd(P.max_write);
			if (rnd(3) == 0) /* block aligned */
				off &= ~(size_t)(MFS_BLOCK_SIZE - 1);
		}
		buf = xmalloc(len);
		for (i = 0; i < len; i++)
			buf[i] = (uint8_t)(rng_next(&wl_rng) | 1);
		n = mfs_write(wfs, mf->ino, buf, len, (off_t)off);
		if (n != (ssize_t)len)
			die("workload op %u: mfs_write ino %" PRIu64 " %zu@%zu returned %zd",
			    nops - 1, mf->ino, len, off, n);
		file_reserve(mf, off + len);
		memcpy(mf->data + off, buf, len);
		lo = off < mf->size ? off : mf->size; /* a gap past the old EOF reads zeros */
		if (off + len > mf->size)
			mf->size = off + len;
		free(buf);
		file_mod(f, lstart, lo, off + len, false);
		file_changed(f, lstart);
		snprintf(op->desc, sizeof(op->desc), "write ino %" PRIu64 " [%zu, +%zu)", mf->ino,
		         off, len);
		return true;
	}
	case 7: { /* truncate */
		struct mfile *mf;
		size_t size, i;

		if ((f = pick_file()) < 0)
			return false;
		mf = &files[f];
		size = rnd(2) ? rnd((unsigned)mf->size + 1) : rnd(P.max_file);
		if (rnd(3) == 0)
			size &= ~(size_t)(MFS_BLOCK_SIZE - 1);
		memset(&st, 0, sizeof(st));
		st.st_size = (off_t)size;
		CHK(mfs_setattr(wfs, mf->ino, &st, MFS_SET_SIZE, &st), "truncate");
		file_reserve(mf, size > mf->size ? size : mf->size);
		if (size < mf->size)
			memset(mf->data + size, 0, mf->size - size);
		i = mf->size;
		mf->size = size;
		file_mod(f, lstart, i, size, false); /* growing: the new bytes read zeros */
		file_changed(f, lstart);
		snprintf(op->desc, sizeof(op->desc), "truncate ino %" PRIu64 " to %zu", mf->ino,
		         size);
		return true;
	}
	case 8: /* fsync */
	case 9:
		if ((f = pick_file()) < 0)
			return false;
		CHK(mfs_fsync(wfs, files[f].ino, rnd(2)), "fsync");
		fsync_file = f;
		snprintf(op->desc, sizeof(op->desc), "fsync ino %" PRIu64, files[f].ino);
		return true; /* the event is recorded by the caller, with the log length after */
	case 10:             /* rename a file, maybe over another */
		if ((e = pick_entry(E_FILE)) < 0)
			return false;
		d = pick_dir();
		t = rnd(3) == 0 ? pick_entry(E_FILE) : -1;
		if (t >= 0 && t != e && ents[t].idx != ents[e].idx) {
			CHK(mfs_rename(wfs, dirs[ents[e].dir].ino, ents[e].name,
			               dirs[ents[t].dir].ino, ents[t].name, 0),
			    "rename over");
			snprintf(op->desc, sizeof(op->desc),
			         "rename %s (ino %" PRIu64 ") over %s (ino %" PRIu64 ")",
			         ents[e].name, files[ents[e].idx].ino, ents[t].name,
			         files[ents[t].idx].ino);
			ents[t].live = false;
			file_unlinked(ents[t].idx, lstart);
			ents[e].dir = ents[t].dir;
			memcpy(ents[e].name, ents[t].name, sizeof(ents[e].name));
			return true;
		}
		snprintf(name, sizeof(name), "r%u", name_ctr++);
		CHK(mfs_rename(wfs, dirs[ents[e].dir].ino, ents[e].name, dirs[d].ino, name, 0),
		    "rename");
		snprintf(op->desc, sizeof(op->desc),
		         "rename %s (ino %" PRIu64 ") to %s in dir ino %" PRIu64, ents[e].name,
		         files[ents[e].idx].ino, name, dirs[d].ino);
		ents[e].dir = d;
		snprintf(ents[e].name, sizeof(ents[e].name), "%s", name);
		return true;
	case 11: /* rename a directory */
		if (ndirs < 2)
			return false;
		e = pick_entry(E_DIR);
		if (e < 0)
			return false;
		d = pick_dir();
		if (dir_ancestor(ents[e].idx, d))
			return false;
		snprintf(name, sizeof(name), "m%u", name_ctr++);
		CHK(mfs_rename(wfs, dirs[ents[e].dir].ino, ents[e].name, dirs[d].ino, name, 0),
		    "rename dir");
		snprintf(op->desc, sizeof(op->desc),
		         "rename dir %s (ino %" PRIu64 ") to %s in dir ino %" PRIu64, ents[e].name,
		         dirs[ents[e].idx].ino, name, dirs[d].ino);
		ents[e].dir = d;
		dirs[ents[e].idx].parent = d;
		snprintf(ents[e].name, sizeof(ents[e].name), "%s", name);
		return true;
	case 12: /* unlink */
	case 13:
		if ((e = pick_entry(rnd(4) ? E_FILE : E_SYMLINK)) < 0)
			return false;
		CHK(mfs_unlink(wfs, dirs[ents[e].dir].ino, ents[e].name), "unlink");
		snprintf(op->desc, sizeof(op->desc), "unlink %s in dir ino %" PRIu64, ents[e].name,
		         dirs[ents[e].dir].ino);
		ents[e].live = false;
		if (ents[e].kind == E_FILE)
			file_unlinked(ents[e].idx, lstart);
		return true;
	case 14: /* hard link */
		if ((f = pick_file()) < 0)
			return false;
		d = pick_dir();
		snprintf(name, sizeof(name), "l%u", name_ctr++);
		CHK(mfs_link(wfs, files[f].ino, dirs[d].ino, name, &st), "link");
		snprintf(op->desc, sizeof(op->desc),
		         "link ino %" PRIu64 " as %s in dir ino %" PRIu64, files[f].ino, name,
		         dirs[d].ino);
		files[f].nlinks++;
		add_entry(d, name, E_FILE, f);
		return true;
	case 15: /* symlink */
		d = pick_dir();
		snprintf(name, sizeof(name), "s%u", name_ctr++);
		CHK(mfs_symlink(wfs, dirs[d].ino, name, "../some/target", 0, 0, &st), "symlink");
		snprintf(op->desc, sizeof(op->desc), "symlink %s in dir ino %" PRIu64, name,
		         dirs[d].ino);
		add_entry(d, name, E_SYMLINK, -1);
		return true;
	case 16: /* rmdir */
		for (d = 1; d < (int)ndirs; d++)
			if (dirs[d].live && dir_empty(d) && rnd(2))
				break;
		if (d >= (int)ndirs)
			return false;
		e = entry_of_dir(d);
		CHK(mfs_rmdir(wfs, dirs[ents[e].dir].ino, ents[e].name), "rmdir");
		snprintf(op->desc, sizeof(op->desc), "rmdir %s (ino %" PRIu64 ")", ents[e].name,
		         dirs[d].ino);
		ents[e].live = false;
		dirs[d].live = false;
		return true;
	case 17: /* sync */
		CHK(mfs_sync(wfs), "sync");
		CHK(blk_flush(wfs->dev), "flush");
		snprintf(op->desc, sizeof(op->desc), "sync");
		return true;
	case 18: { /* a batch of empty files with long names: directory tree splits */
		unsigned i, n = 4 + rnd(12);

		if (nfiles > 4000 || rnd(2))
			return false;
		d = rnd(2) ? 0 : pick_dir(); /* the root often: it grows deep */
		for (i = 0; i < n; i++) {
			struct mfile *mf;

			snprintf(name, sizeof(name), "b%u-%.90s", name_ctr++,
			         "................................................................."
			         "......."
			         "..................");
			CHK(mfs_mknod(wfs, dirs[d].ino, name, S_IFREG | 0600, 0, 0, 0, &st),
			    "batch create");
			GROW(files, nfiles, capfiles);
			mf = &files[nfiles];
			memset(mf, 0, sizeof(*mf));
			mf->batch = true;
			mf->ino = st.st_ino;
			mf->nlinks = 1;
			mf->live = true;
			add_entry(d, name, E_FILE, (int)nfiles++);
		}
		snprintf(op->desc, sizeof(op->desc), "create %u long names in dir ino %" PRIu64, n,
		         dirs[d].ino);
		return true;
	}
	case 20: { /* an xattr (inline, then the xattr tree): checked for structure only */
		uint8_t val[400];
		unsigned len = 1 + rnd(sizeof(val)), i;

		if ((f = pick_file()) < 0)
			return false;
		if (rnd(2) == 0)
			return xattr_large_op(f);
		for (i = 0; i < len; i++)
			val[i] = (uint8_t)rnd(256);
		snprintf(name, sizeof(name), "user.x%u", rnd(8));
		CHK(mfs_setxattr(wfs, files[f].ino, name, val, len, 0), "setxattr");
		snprintf(op->desc, sizeof(op->desc), "setxattr %s (%u bytes) on ino %" PRIu64, name,
		         len, files[f].ino);
		return true;
	}
	case 21: { /* punch a hole */
		struct mfile *mf;
		size_t off, len;

		if ((f = pick_file()) < 0 || files[f].size == 0)
			return false;
		mf = &files[f];
		off = rnd((unsigned)mf->size);
		len = 1 + rnd((unsigned)(mf->size - off));
		if (rnd(2)) { /* block aligned */
			off &= ~(size_t)(MFS_BLOCK_SIZE - 1);
			len = (len + MFS_BLOCK_SIZE - 1) & ~(size_t)(MFS_BLOCK_SIZE - 1);
		}
		CHK(mfs_fallocate(wfs, mf->ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		                  (off_t)off, (off_t)len),
		    "punch hole");
		if (off + len > mf->size)
			len = mf->size - off;
		memset(mf->data + off, 0, len);
		file_mod(f, lstart, off, off + len, false);
		file_changed(f, lstart);
		snprintf(op->desc, sizeof(op->desc), "punch ino %" PRIu64 " [%zu, +%zu)", mf->ino,
		         off, len);
		return true;
	}
	case 22: { /* unlink a file held open (orphan list) or only pinned (freed at once) */
		static const char *const how[] = {"held open", "pinned", "held open and pinned"};
		struct mfs_ino *ip, *ip2;
		int kind = (int)rnd(3);

		if (nheld == MAX_HELD || (e = pick_entry(E_FILE)) < 0 ||
		    files[ents[e].idx].nlinks != 1)
			return false;
		f = ents[e].idx;
		CHK(mfs_iget(wfs, files[f].ino, &ip), "iget");
		if (kind != HELD_OPEN) { /* a kernel lookup: the daemon's pin */
			CHK(mfs_iget(wfs, files[f].ino, &ip2), "iget");
			mfs_ipin(wfs, ip2);
			if (kind == HELD_PIN)
				mfs_iput(wfs, ip);
		}
		CHK(mfs_unlink(wfs, dirs[ents[e].dir].ino, ents[e].name), "unlink held");
		held[nheld] = ip;
		held_kind[nheld++] = kind;
		ents[e].live = false;
		file_unlinked(f, lstart);
		snprintf(op->desc, sizeof(op->desc), "unlink %s (ino %" PRIu64 ") %s", ents[e].name,
		         files[f].ino, how[kind]);
		return true;
	}
	case 23: /* close (freed unless pinned only) or forget a held file */
		if (!nheld)
			return false;
		t = (int)rnd(nheld);
		if (held_kind[t] == HELD_BOTH) {
			snprintf(op->desc, sizeof(op->desc), "close unlinked pinned ino %" PRIu64,
			         held[t]->ino);
			mfs_iput(wfs, held[t]);
			held_kind[t] = HELD_PIN;
			return true;
		}
		snprintf(op->desc, sizeof(op->desc), "%s unlinked ino %" PRIu64,
		         held_kind[t] == HELD_PIN ? "forget" : "close", held[t]->ino);
		held_drop((unsigned)t);
		return true;
	case 24: { /* a fragmented file: frag_ext one-block extents at every other block, fsync'ed
		    */
		struct mfile *mf;
		uint8_t blk[MFS_BLOCK_SIZE];
		unsigned j, i;

		d = pick_dir();
		snprintf(name, sizeof(name), "frag%u", name_ctr++);
		CHK(mfs_mknod(wfs, dirs[d].ino, name, S_IFREG | 0644, 0, 0, 0, &st), "create");
		GROW(files, nfiles, capfiles);
		f = (int)nfiles;
		mf = &files[nfiles];
		memset(mf, 0, sizeof(*mf));
		mf->ino = st.st_ino;
		mf->nlinks = 1;
		mf->live = true;
		mf->frag = true;
		add_entry(d, name, E_FILE, (int)nfiles++);
		for (j = 0; j < P.frag_ext; j++) {
			size_t off = (size_t)j * 2 * MFS_BLOCK_SIZE;

			for (i = 0; i < MFS_BLOCK_SIZE; i++)
				blk[i] = (uint8_t)(rng_next(&wl_rng) | 1);
			if (mfs_write(wfs, mf->ino, blk, MFS_BLOCK_SIZE, (off_t)off) !=
			    MFS_BLOCK_SIZE)
				die("workload op %u: fragmented write failed", nops - 1);
			file_reserve(mf, off + MFS_BLOCK_SIZE);
			memcpy(mf->data + off, blk, MFS_BLOCK_SIZE);
			i = (unsigned)mf->size; /* the gap past the old EOF reads zeros */
			mf->size = off + MFS_BLOCK_SIZE;
			file_mod(f, lstart, i, off + MFS_BLOCK_SIZE, false);
		}
		file_changed(f, lstart);
		CHK(mfs_fsync(wfs, mf->ino, false), "fsync");
		fsync_file = f;
		frag_made++;
		snprintf(op->desc, sizeof(op->desc),
		         "fragmented file %s (ino %" PRIu64 ", %u extents) in dir ino %" PRIu64
		         ", fsync",
		         name, mf->ino, P.frag_ext, dirs[d].ino);
		return true;
	}
	case 25: { /* free most of a fragmented file, one extent per transaction */
		struct mfile *mf = NULL;
		unsigned how = frag_freed % 4;
		size_t size = 0, off, len;

		for (f = (int)nfiles - 1; f >= 0; f--)
			if (files[f].live && files[f].frag)
				break;
		if (f < 0)
			return false;
		mf = &files[f];
		mf->frag = false;
		for (e = 0; e < (int)nents; e++)
			if (ents[e].live && ents[e].kind == E_FILE && ents[e].idx == f)
				break;
		if (how == 1 && (e == (int)nents || mf->nlinks != 1))
			how = 0;
		if (how == 2 && mf->size < 4 * MFS_BLOCK_SIZE)
			how = 3;
		wfs->txn_step_blocks = FRAG_STEP_BLOCKS;
		switch (how) {
		case 0: /* truncate into the first quarter */
		case 3: /* truncate to 0 */
			if (how == 0)
				size = rnd((unsigned)mf->size / 4 + 1);
			memset(&st, 0, sizeof(st));
			st.st_size = (off_t)size;
			CHK(mfs_setattr(wfs, mf->ino, &st, MFS_SET_SIZE, &st), "truncate");
			if (size < mf->size)
				memset(mf->data + size, 0, mf->size - size);
			mf->size = size;
			file_mod(f, lstart, size, size, false);
			file_changed(f, lstart);
			snprintf(op->desc, sizeof(op->desc),
			         "truncate fragmented ino %" PRIu64 " to %zu in steps", mf->ino,
			         size);
			break;
		case 1: /* unlink: freed in steps at the unlink's last reference */
			CHK(mfs_unlink(wfs, dirs[ents[e].dir].ino, ents[e].name), "unlink");
			ents[e].live = false;
			file_unlinked(f, lstart);
			snprintf(op->desc, sizeof(op->desc),
			         "unlink fragmented %s (ino %" PRIu64 "), freed in steps",
			         ents[e].name, mf->ino);
			break;
		default: /* punch all but the first and last extents */
			off = 2 * MFS_BLOCK_SIZE - 100;
			len = mf->size - MFS_BLOCK_SIZE - off;
			CHK(mfs_fallocate(wfs, mf->ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			                  (off_t)off, (off_t)len),
			    "punch hole");
			memset(mf->data + off, 0, len);
			file_mod(f, lstart, off, off + len, false);
			file_changed(f, lstart);
			snprintf(op->desc, sizeof(op->desc),
			         "punch fragmented ino %" PRIu64 " [%zu, +%zu) in steps", mf->ino,
			         off, len);
			break;
		}
		wfs->txn_step_blocks = 0;
		frag_freed++;
		return true;
	}
	case 19: { /* unlink a batch of names of one directory: merges */
		unsigned i, n = 0, want = 4 + rnd(12);

		if (rnd(2))
			return false;
		d = rnd(2) ? 0 : pick_dir();
		for (i = 0; i < nents && n < want; i++) {
			e = (int)i;
			if (!ents[e].live || ents[e].dir != d || ents[e].kind != E_FILE ||
			    rnd(3) == 0)
				continue;
			CHK(mfs_unlink(wfs, dirs[d].ino, ents[e].name), "batch unlink");
			ents[e].live = false;
			file_unlinked(ents[e].idx, lstart);
			n++;
		}
		if (!n)
			return false;
		snprintf(op->desc, sizeof(op->desc), "unlink %u names in dir ino %" PRIu64, n,
		         dirs[d].ino);
		return true;
	}
	}
	return false;
}

void run_workload(void)
{
	unsigned i, kind;

	GROW(dirs, ndirs, capdirs);
	dirs[ndirs++] = (struct mdir){.ino = MFS_ROOT_INO, .parent = 0, .live = true};
	for (i = 0; i < P.ops; i++) {
		size_t lstart = nlog;
		struct op *op;

		GROW(ops, nops, capops);
		op = &ops[nops++];
		op->lstart = lstart;
		op->desc[0] = 0;
		op->xlarge = 0;
		/* a fragmented file now and then, most of it freed a few ops later */
		if (i % P.frag_every == P.frag_every / 4 && do_op(24, lstart))
			kind = 24;
		else if (i % P.frag_every == P.frag_every / 4 + 3 && do_op(25, lstart))
			kind = 25;
		else
			do {
				kind = rnd(24);
			} while (!do_op(kind, lstart));
		op->lend = nlog;
		op->kind = kind;
		if (getenv("CRASH_TRACE")) {
			size_t k;

			printf("op %u: %s (log [%zu, %zu))\n", nops - 1, op->desc, op->lstart,
			       op->lend);
			for (k = op->lstart; k < op->lend; k++)
				printf("    log %zu: %s block %" PRIu64 " +%u bytes\n", k,
				       wlog[k].op == BLK_OP_FLUSH ? "flush" : "write",
				       wlog[k].pos / MFS_BLOCK_SIZE, wlog[k].len);
		}
		if (kind == 8 || kind == 9 || kind == 24)
			record_event(fsync_file, nlog);
		else if (kind == 17) {
			unsigned f;

			for (f = 0; f < nfiles; f++)
				if (files[f].live)
					record_event((int)f, nlog);
		}
	}
}
