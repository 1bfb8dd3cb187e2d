/* SPDX-License-Identifier: MIT */
/*
 * Who owns the bytes of a damage event (mfs_events.h): poisoned sectors
 * mapped to a file and its byte range, and that file to a path.  The core
 * keeps no reverse map (sector -> inode), so this is fsck's damage report
 * done online, for the events pending at one time together: one pass over
 * the inode table (regular files, their written extents as
 * mfs_bmap_extents gives them), then one walk of the directory tree from
 * the root for the paths, stopped once every owner is named or after
 * RESOLVE_MAX_ENTRIES entries.  It runs only when a reader asks for events
 * that are not yet resolved, never on an I/O path.  A range over several
 * files names the first one found; metadata and free blocks name no file.
 * Calls itable.c, recovery.c and dir.c.
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
	return (e->kind == MFS_EV_POISON || e->kind == MFS_EV_DATA_CSUM) && !e->ino;
}

/* Match one extent of @ino against the pending events; returns how many it named. */
static unsigned match_extent(uint64_t ino, const struct mfs_fextent *x, struct mfs_event *evs,
                             unsigned n)
{
	uint64_t xs = x->sector, xe = x->sector + (x->length + 511) / 512;
	unsigned i, found = 0;

	for (i = 0; i < n; i++) {
		struct mfs_event *e = &evs[i];
		uint64_t s, end, off, len;

		if (!wants_owner(e) || e->sector >= xe || e->sector + e->count <= xs)
			continue;
		s = e->sector > xs ? e->sector : xs;
		end = e->sector + e->count < xe ? e->sector + e->count : xe;
		off = x->offset + (s - xs) * 512;
		len = (end - s) * 512;
		if (off + len > x->offset + x->length) /* the file ends inside the sector */
			len = x->offset + x->length - off;
		e->ino = ino;
		e->offset = off;
		e->length = len;
		found++;
	}
	return found;
}

/* Pass 1: the inode table; @want events still have no owner. */
static void resolve_inodes(struct mfs *fs, struct mfs_event *evs, unsigned n, unsigned want)
{
	struct mfs_fextent x[RESOLVE_EXTENTS];
	struct mfs_inode di;
	uint64_t ino;

	for (ino = MFS_ROOT_INO; ino <= fs->sb.nr_inodes && want; ino++) {
		uint64_t start = 0, next;
		unsigned nr, i;
		bool last;

		if (mfs_inode_read(fs, ino, &di) || !S_ISREG(le32toh(di.mode)))
			continue;
		do {
			if (mfs_bmap_extents(fs, ino, start, x, RESOLVE_EXTENTS, &nr, &next, &last))
				break;
			for (i = 0; i < nr && want; i++)
				if (!x[i].unwritten) {
					unsigned f = match_extent(ino, &x[i], evs, n);

					want = f < want ? want - f : 0;
				}
			start = next;
		} while (!last && nr && want);
	}
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
	struct mfs_event *evs;
	unsigned n, want; /* events with an owner and no path yet */
	unsigned budget;  /* entries left to visit */
	char path[MFS_EVENT_PATH];
};

/* Depth first from @dir, whose path (from the root, "" for it) is in w->path[0 .. len). */
static void walk_dir(struct path_walk *w, uint64_t dir, size_t len)
{
	struct dir_list l = {0};
	unsigned i, j;

	/* a damaged directory: what could be read is walked */
	(void)mfs_readdir(w->fs, dir, 0, dir_fill, &l);
	for (i = 0; i < l.n; i++) {
		size_t nl = strlen(l.v[i].name);
		bool fits = len + 1 + nl < MFS_EVENT_PATH;

		if (!w->want || !w->budget)
			break;
		w->budget--;
		if (!fits)
			continue; /* longer than an event keeps: <inode N> */
		w->path[len] = '/';
		memcpy(w->path + len + 1, l.v[i].name, nl + 1);
		for (j = 0; j < w->n; j++)
			if (w->evs[j].ino == l.v[i].ino && !w->evs[j].path[0]) {
				memcpy(w->evs[j].path, w->path, len + 2 + nl);
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

void mfs_events_owners(struct mfs *fs, struct mfs_event *evs, unsigned n)
{
	unsigned i, want = 0;

	for (i = 0; i < n; i++)
		want += wants_owner(&evs[i]);
	if (want)
		resolve_inodes(fs, evs, n, want);
}

void mfs_events_resolve(struct mfs *fs, struct mfs_event *evs, unsigned n)
{
	struct path_walk w = {.fs = fs, .evs = evs, .n = n, .budget = RESOLVE_MAX_ENTRIES};
	unsigned i, want = 0;

	for (i = 0; i < n; i++) {
		evs[i].resolved = true;
		want += wants_owner(&evs[i]);
	}
	if (!want)
		return;
	resolve_inodes(fs, evs, n, want);
	for (i = 0; i < n; i++)
		w.want += evs[i].ino && !evs[i].path[0];
	if (w.want)
		walk_dir(&w, MFS_ROOT_INO, 0);
}
