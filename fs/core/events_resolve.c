/* SPDX-License-Identifier: MIT */
/*
 * Who owns the bytes of a damage event (mfs_events.h): poisoned sectors
 * mapped to the files whose data they hold, with the byte range of each, and
 * those files to paths.  The core keeps no reverse map (sector -> inode), so
 * this is fsck's damage report done online, for the events pending at one
 * time together: one pass over the inode table (regular files, their written
 * extents as mfs_bmap_extents gives them; it ends early once every damaged
 * sector has an owner), then one walk of the directory tree from the root
 * for the paths, stopped once every owner is named or after
 * RESOLVE_MAX_ENTRIES entries.  It runs only when a reader asks for events
 * that are not yet resolved, never on an I/O path.
 *
 * An event over the data of several files - or of one file's two pieces that
 * are not next to each other in it - becomes several events, one per file
 * and byte range ("pieces", in sector order; events.c numbers them).  The
 * pieces divide the event's sectors among them: each starts at the first
 * sector its file range holds (the first piece at the event's start) and
 * ends where the next begins (the last at the event's end), so sectors no
 * file holds (past a file's end, metadata, free space) stay with the piece
 * before them.  An event no file's data touches stays one event, without an
 * owner.  Calls itable.c, recovery.c and dir.c.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mfs_int.h"
#include "mfs_recovery.h"

#define RESOLVE_MAX_ENTRIES 1000000u /* directory entries one path walk visits at most */
#define RESOLVE_EXTENTS     64u

static bool wants_owner(const struct mfs_event *e)
{
	return (e->kind == MFS_EV_POISON || e->kind == MFS_EV_DATA_CSUM) && !e->ino && e->count;
}

/* Sectors [sector, end) of event @ev hold bytes [offset, offset + length) of @ino. */
struct hit {
	unsigned ev;
	uint64_t ino, sector, end, offset, length;
};

/* Pass 1's state over the @n events @evs. */
struct scan {
	struct mfs_event *evs;
	unsigned n;
	bool first_only; /* mfs_events_owners: name the first owner found in @evs itself */
	uint64_t *owned; /* !first_only: sectors of each event a file holds so far */
	unsigned left;   /* events not wholly owned yet (first_only: with no owner yet) */
	struct hit *v;   /* !first_only: what was found, unordered */
	size_t nr, cap;
	bool nomem;
};

static void hit_add(struct scan *sc, const struct hit *x)
{
	if (sc->nr == sc->cap) {
		size_t cap = sc->cap ? 2 * sc->cap : 64;
		void *v = realloc(sc->v, cap * sizeof(*sc->v));

		if (!v) {
			sc->nomem = true;
			return;
		}
		sc->v = v;
		sc->cap = cap;
	}
	sc->v[sc->nr++] = *x;
}

/* Match one written extent of @ino against the events. */
static void match_extent(struct scan *sc, uint64_t ino, const struct mfs_fextent *x)
{
	uint64_t xs = x->sector, xe = x->sector + (x->length + 511) / 512;

	for (unsigned i = 0; i < sc->n; i++) {
		struct mfs_event *e = &sc->evs[i];
		uint64_t s, end, off, len;

		if (!wants_owner(e) || e->sector >= xe || e->sector + e->count <= xs)
			continue;
		s = e->sector > xs ? e->sector : xs;
		end = e->sector + e->count < xe ? e->sector + e->count : xe;
		off = x->offset + (s - xs) * 512;
		len = (end - s) * 512;
		if (off + len > x->offset + x->length) /* the file ends inside the sector */
			len = x->offset + x->length - off;
		if (sc->first_only) {
			e->ino = ino;
			e->offset = off;
			e->length = len;
			sc->left--;
			continue;
		}
		hit_add(sc, &(struct hit){i, ino, s, end, off, len});
		if (sc->owned[i] < e->count && (sc->owned[i] += end - s) >= e->count)
			sc->left--;
	}
}

/* Pass 1: the inode table, until every event is wholly owned (first_only: named). */
static void resolve_inodes(struct mfs *fs, struct scan *sc)
{
	struct mfs_fextent x[RESOLVE_EXTENTS];
	struct mfs_inode di;
	uint64_t ino;

	for (unsigned i = 0; i < sc->n; i++)
		sc->left += wants_owner(&sc->evs[i]);
	for (ino = MFS_ROOT_INO; ino <= fs->sb.nr_inodes && sc->left && !sc->nomem; ino++) {
		uint64_t start = 0, next;
		unsigned nr, i;
		bool last;

		if (mfs_inode_read(fs, ino, &di) || !S_ISREG(le32toh(di.mode)))
			continue;
		do {
			if (mfs_bmap_extents(fs, ino, start, x, RESOLVE_EXTENTS, &nr, &next, &last))
				break;
			for (i = 0; i < nr && sc->left; i++)
				if (!x[i].unwritten)
					match_extent(sc, ino, &x[i]);
			start = next;
		} while (!last && nr && sc->left);
	}
}

/* Hits by event, then sector (then inode, offset: a damaged map may share sectors). */
static int hit_cmp(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;

	if (x->ev != y->ev)
		return x->ev < y->ev ? -1 : 1;
	if (x->sector != y->sector)
		return x->sector < y->sector ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sort the hits and join those that continue each other on the device and in the file. */
static void hits_sort_join(struct scan *sc)
{
	size_t i, k = 0;

	if (!sc->nr)
		return;
	qsort(sc->v, sc->nr, sizeof(*sc->v), hit_cmp);
	for (i = 1; i < sc->nr; i++) {
		struct hit *p = &sc->v[k], *h = &sc->v[i];

		if (h->ev == p->ev && h->ino == p->ino && h->sector == p->end &&
		    h->offset == p->offset + p->length) {
			p->end = h->end;
			p->length += h->length;
		} else {
			sc->v[++k] = *h;
		}
	}
	sc->nr = k + 1;
}

/* A file the pieces name, and its path once found. */
struct owner {
	uint64_t ino;
	char path[MFS_EVENT_PATH];
};

static int owner_cmp(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static struct owner *owner_find(struct owner *o, size_t n, uint64_t ino)
{
	struct owner key = {.ino = ino};

	return n ? bsearch(&key, o, n, sizeof(*o), owner_cmp) : NULL;
}

/* One directory's entries (names owned), read in full before descending. */
struct dir_list {
	struct {
		char *name;
		uint64_t ino;
		unsigned dtype;
	} * v;
	unsigned n, cap;
};

static int dir_fill(void *arg, const char *name, size_t name_len, uint64_t ino, unsigned dtype,
                    uint64_t next_pos)
{
	struct dir_list *l = arg;

	(void)next_pos;
	if ((name_len == 1 && name[0] == '.') || (name_len == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (l->n == l->cap) {
		unsigned cap = l->cap ? 2 * l->cap : 64;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v)
			return 0; /* skipped: a path not found, no more */
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].name = strndup(name, name_len);
	if (!l->v[l->n].name)
		return 0;
	l->v[l->n].ino = ino;
	l->v[l->n].dtype = dtype;
	l->n++;
	return 0;
}

struct path_walk {
	struct mfs *fs;
	struct owner *own; /* sorted by inode */
	size_t n, want;    /* owners, and those with no path yet */
	unsigned budget;   /* entries left to visit */
	char path[MFS_EVENT_PATH];
};

/* Depth first from @dir, whose path (from the root, "" for it) is in w->path[0 .. len). */
static void walk_dir(struct path_walk *w, uint64_t dir, size_t len)
{
	struct dir_list l = {0};
	unsigned i;

	/* a damaged directory: what could be read is walked */
	(void)mfs_readdir(w->fs, dir, 0, dir_fill, &l);
	for (i = 0; i < l.n; i++) {
		size_t nl = strlen(l.v[i].name);
		bool fits = len + 1 + nl < MFS_EVENT_PATH;
		struct owner *o;

		if (!w->want || !w->budget)
			break;
		w->budget--;
		if (!fits)
			continue; /* longer than an event keeps: <inode N> */
		w->path[len] = '/';
		memcpy(w->path + len + 1, l.v[i].name, nl + 1);
		o = owner_find(w->own, w->n, l.v[i].ino);
		if (o && !o->path[0]) {
			memcpy(o->path, w->path, len + 2 + nl);
			w->want--;
		}
		if (l.v[i].dtype == DT_DIR)
			walk_dir(w, l.v[i].ino, len + 1 + nl);
	}
	for (i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	w->path[len] = '\0';
}

/* Pass 2: the paths of the @n events' owners (left "" where not found). */
static void resolve_paths(struct mfs *fs, struct mfs_event *evs, size_t n)
{
	struct path_walk w = {.fs = fs, .budget = RESOLVE_MAX_ENTRIES};
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		w.n += evs[i].ino && !evs[i].path[0];
	if (!w.n || !(w.own = calloc(w.n, sizeof(*w.own))))
		return; /* nothing to name, or no memory: no paths */
	for (i = 0; i < n; i++)
		if (evs[i].ino && !evs[i].path[0])
			w.own[k++].ino = evs[i].ino;
	qsort(w.own, k, sizeof(*w.own), owner_cmp);
	for (i = 0, w.n = 0; i < k; i++) /* one each */
		if (!w.n || w.own[w.n - 1].ino != w.own[i].ino)
			w.own[w.n++].ino = w.own[i].ino;
	w.want = w.n;
	walk_dir(&w, MFS_ROOT_INO, 0);
	for (i = 0; i < n; i++) {
		struct owner *o =
		        evs[i].ino && !evs[i].path[0] ? owner_find(w.own, w.n, evs[i].ino) : NULL;

		if (o)
			memcpy(evs[i].path, o->path, MFS_EVENT_PATH);
	}
	free(w.own);
}

void mfs_events_owners(struct mfs *fs, struct mfs_event *evs, unsigned n)
{
	struct scan sc = {.evs = evs, .n = n, .first_only = true};

	resolve_inodes(fs, &sc);
}

struct mfs_event *mfs_events_resolve(struct mfs *fs, const struct mfs_event *evs, unsigned n,
                                     size_t *nout)
{
	struct scan sc = {.n = n};
	struct mfs_event *out = NULL;
	size_t i, j, k, m;

	/* a copy pass 1 reads (ino 0 marks the events it is to name) */
	sc.evs = malloc(n * sizeof(*sc.evs));
	sc.owned = calloc(n, sizeof(*sc.owned));
	if (!sc.evs || !sc.owned)
		goto out;
	memcpy(sc.evs, evs, n * sizeof(*evs));
	resolve_inodes(fs, &sc);
	if (sc.nomem)
		goto out;
	hits_sort_join(&sc);
	/* one event per hit; an event with none stays one event, as it was */
	for (i = 0, j = 0, m = 0; i < n; i++) {
		for (k = j; j < sc.nr && sc.v[j].ev == i; j++)
			;
		m += j > k ? j - k : 1;
	}
	out = malloc(m * sizeof(*out));
	if (!out)
		goto out;
	for (i = 0, j = 0, m = 0; i < n; i++) {
		const struct mfs_event *e = &evs[i];

		for (k = j; j < sc.nr && sc.v[j].ev == i; j++)
			;
		if (j == k) {
			out[m] = *e;
			out[m++].resolved = true;
			continue;
		}
		for (size_t p = k; p < j; p++) {
			const struct hit *h = &sc.v[p];
			uint64_t lo = p == k ? e->sector : h->sector, hi = e->sector + e->count;

			if (p + 1 < j) /* up to the next piece (past its own end: shared sectors) */
				hi = sc.v[p + 1].sector > h->end ? sc.v[p + 1].sector : h->end;
			out[m] = *e;
			out[m].resolved = true;
			out[m].sector = lo;
			out[m].count = hi - lo;
			out[m].ino = h->ino;
			out[m].offset = h->offset;
			out[m].length = h->length;
			m++;
		}
	}
	resolve_paths(fs, out, m);
	*nout = m;
out:
	free(sc.evs);
	free(sc.owned);
	free(sc.v);
	return out;
}
