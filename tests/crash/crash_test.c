/* SPDX-License-Identifier: MIT */
/*
 * The crash test of the filesystem core (fs/): every device write of a
 * deterministic workload is recorded through the engine's write tap
 * (blk_dev_set_write_tap, like dm-log-writes), then every crash point is
 * rebuilt as an image, mounted (mount runs journal replay) and checked.
 *
 *  1. mkfs.mendfs ($MKFS_MENDFS) makes a small sparse image on /dev/shm; it is
 *     mounted with mfs_mount() and, the device being idle right after mount,
 *     the tap is attached.  The base image is read back at that moment (after
 *     the mount's own superblock write), so base + log is exactly what the
 *     device saw.  No mount option was needed.
 *  2. A seeded workload (creates, mkdirs, symlinks, hard links, random writes
 *     and overwrites, truncates, hole punches, xattrs (a third of them large
 *     values, 1 KiB to 64 KiB out of line, set, replaced or removed),
 *     renames of files and
 *     directories, unlinks, rmdirs, batches of long names that split and merge
 *     directory trees, unlinks of files held open (orphans), pinned as the daemon pins
 *     what the kernel knows (freed at once), or both, fsyncs of single
 *     files, syncs of the whole fs, and the final unmount) runs against an
 *     in-memory model.  Every 100 ops (300 in --long) it also makes a
 *     fragmented file (40 one-block extents at every other block, 150 in
 *     --long: an extent tree with an interior node) and fsyncs it, and 3 ops
 *     later truncates it into its first quarter or to 0, unlinks it, or
 *     punches all but its ends, with the step bound (txn_step_blocks) below
 *     one unit's cost: one extent per transaction, so that crash points fall
 *     between the steps and the mount must finish the truncate or the free
 *     from the orphan list (docs/design/core.md §3).  The run prints how many
 *     crash points fall inside those ops and at how many the mount finished
 *     an orphan.  Each operation records the log length when it starts
 *     and ends; each fsync (and sync, for every file) records the file's
 *     content when it returned.
 *  3. Prefix mode: for every k in 0..N the image is base + the first k logged
 *     writes (FLUSH entries are markers).
 *  4. Epoch mode (a volatile write cache): for every FLUSH at index f, the
 *     image is base + every write before f + a random subset of the 4 KiB
 *     pieces of the writes between f and the next FLUSH, applied in log order
 *     (so a later write to the same block may land without an earlier one).
 *
 * A crash point has a bound c: log entries at indices < c may have reached
 * the device (prefix mode: c = k; epoch mode: c = the next FLUSH's index).
 * At each crash point the image must mount, then:
 *  - structure: a walk from the root; every entry resolves (mfs_lookup and
 *    mfs_getattr) to an inode of a valid type whose dirent type matches;
 *    readdir lists "." and ".." first (".." = the parent) and every name
 *    once; a directory is reached once, has nlink = 2 + subdirectories and
 *    dir_entries = its entries; a non-directory has nlink = the entries
 *    naming it; extents lie in the data zone, do not overlap within or across
 *    files, add up to the inode's blocks and are set in the data bitmap; the
 *    data bitmap has no other bit set (the quarantine is empty here); the
 *    free-block count (statfs, recounted from the bitmap) is data_len minus
 *    the blocks used; the inode bitmap holds exactly the reachable inodes;
 *    the orphan tree is empty (mount processed it); the meta zone holds
 *    the B+tree blocks of every reachable inode (each used once, right level
 *    and kind) and the blocks of its out-of-line xattr values (of their type,
 *    used once) plus the fixed part, exactly as the meta bitmap says; every
 *    large xattr value reads back whole (one value as set, never a mix);
 *  - durability: for every file, take its last fsync (or sync, or the final
 *    unmount) that returned at log length F <= c.  If no operation that
 *    changes the file's content or frees it (write, truncate, unlinking its
 *    last name, being replaced by a rename) started before c after that
 *    fsync, the file must be reachable and hold exactly the fsync'ed data and
 *    size.
 *    A file changed after its fsync inside the window (and not freed) is
 *    checked per byte instead (check_mixed): its size is the fsync'ed one or
 *    one it had after a change, and each byte holds its value in the fsync'ed
 *    version or after one of the changes.  Versions may mix byte by byte
 *    because overwrites in place are not atomic.  (This check found blocks
 *    reused before their free committed: see the regression note above
 *    known_bug().)
 *  then it must unmount cleanly.  The working image is reset between crash
 *  points by copying back only the blocks that differ from the expected
 *  state (kept in memory), so a crash point costs one mount, not an image
 *  copy.
 *
 * With --data-csum the image is made with mkfs.mendfs -O data_csum (docs/FORMAT.md
 * §15): every read of the checks above is checked against the data checksums,
 * so committed data must never fail its checksum (a false mismatch fails the
 * read: -EIO), and in a file changed since its fsync a sector may fail only
 * where a change wrote (check_mixed: the recovery read zero-fills it; every
 * other byte must hold one of its versions).
 *
 * Usage: crash_test [--long] [--data-csum] [--strict] [--seed N] [--ops N]; CRASH_TRACE=1
 * prints the workload and its log.  The short run is the 'crash'
 * suite (part of the default `meson test`), the long one the 'long' suite.
 * Prints "crash points checked: N".  A failure prints the crash point, the
 * failing check and the workload step, and keeps the pre-mount image in
 * /tmp/mendfs-crash-fail.img.
 *
 * This file: the parameters, the write log, the crash points (prefix and
 * epoch modes) and main(); crash_workload.c: the workload and its model;
 * crash_check.c: the checks after each mount; crash.h: what they share.
 */
#include "crash.h"

/* --- parameters --------------------------------------------------------------------- */

struct params P = {.ops = 400,
                   .subsets = 3,
                   .max_file = 160 << 10,
                   .max_write = 20 << 10,
                   .frag_ext = 40,
                   .frag_every = 100};

size_t size_cap(void)
{
	size_t a = (size_t)P.max_file * 2, b = (size_t)P.frag_ext * 2 * MFS_BLOCK_SIZE;

	return a > b ? a : b;
}

/* --- PRNG (splitmix64) ---------------------------------------------------------------- */

uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

uint64_t wl_rng;

unsigned rnd(unsigned n)
{
	return (unsigned)rng_below(&wl_rng, n);
}

/* --- errors ------------------------------------------------------------------------- */

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "crash_test: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

/* --- the write log -------------------------------------------------------------------- */

struct lentry *wlog;
size_t nlog;
static size_t caplog;

static void tap_fn(void *priv, const struct blk_bio *bio)
{
	struct lentry *e;
	size_t off = 0;
	unsigned i;

	(void)priv;
	GROW(wlog, nlog, caplog);
	e = &wlog[nlog++];
	e->op = bio->op;
	e->pos = blk_bio_pos(bio);
	e->len = bio->op == BLK_OP_FLUSH ? 0 : bio->len;
	e->data = NULL;
	if (bio->op == BLK_OP_WRITE) {
		e->data = xmalloc(bio->len);
		for (i = 0; i < bio->nr_segs && off < bio->len; i++) {
			size_t n = bio->iov[i].iov_len;

			if (n > bio->len - off)
				n = bio->len - off;
			memcpy(e->data + off, bio->iov[i].iov_base, n);
			off += n;
		}
	}
}

/* Apply [pos, pos + len) of entry @e (clipped to it) to @img. */
static void apply_part(uint8_t *img, const struct lentry *e, uint64_t pos, uint64_t len)
{
	if (e->op == BLK_OP_FLUSH)
		return;
	if (pos + len > IMG_SIZE)
		die("logged write beyond the image: %" PRIu64 "+%" PRIu64, pos, len);
	if (e->op == BLK_OP_WRITE_ZEROES)
		memset(img + pos, 0, len);
	else
		memcpy(img + pos, e->data + (pos - e->pos), len);
}

static void apply(uint8_t *img, const struct lentry *e)
{
	apply_part(img, e, e->pos, e->len);
}

/* --- the crash points ----------------------------------------------------------------- */

static char img[PATH_MAX], failimg[] = "/tmp/mendfs-crash-fail.img";
static uint8_t *map;  /* the working image, shared with the mounts (pmem backend) */
static uint8_t *want; /* the expected pre-mount image of the current prefix */
static uint8_t *base; /* the image when the tap was attached */
static unsigned long long checked, failures, restored_blocks, frag_points, free_points;
static unsigned long long xset_points, xrm_points; /* inside large xattr sets and removes */
static unsigned long long orphan_freed_points, orphan_trunc_points;

/* Copy back the blocks of the working image that differ from @want. */
static void restore(void)
{
	size_t b;

	for (b = 0; b < IMG_SIZE; b += MFS_BLOCK_SIZE)
		if (memcmp(map + b, want + b, MFS_BLOCK_SIZE)) {
			memcpy(map + b, want + b, MFS_BLOCK_SIZE);
			restored_blocks++;
		}
}

static const char *step_at(size_t idx, char *buf, size_t len)
{
	unsigned i;

	for (i = 0; i < nops; i++)
		if (ops[i].lstart <= idx && idx < ops[i].lend) {
			snprintf(buf, len, "op %u: %s (log [%zu, %zu))", i, ops[i].desc,
			         ops[i].lstart, ops[i].lend);
			return buf;
		}
	snprintf(buf, len, "%s", idx == SIZE_MAX ? "before the first op" : "between ops");
	return buf;
}

/* Mount the working image (as it is now) and check it for bound @c. */
static void check_point(size_t c, const char *where, size_t last_idx)
{
	struct mfs_mount_opts o = {.cache_blocks = 4096};
	char err[256] = "", step[520];
	uint8_t *kind = NULL;
	struct mfs *fs;
	int ret;

	cerr[0] = 0;
	known[0] = 0;
	checked++;
	for (unsigned i = 0; last_idx != SIZE_MAX && i < nops; i++)
		if (ops[i].lstart <= last_idx && last_idx < ops[i].lend) {
			frag_points += ops[i].kind == 24 || ops[i].kind == 25;
			free_points += ops[i].kind == 25;
			xset_points += ops[i].xlarge == 1;
			xrm_points += ops[i].xlarge == 2;
			break;
		}
	ret = mfs_mount(img, &o, &fs, err, sizeof(err));
	if (ret) {
		fail("mount failed: %s (%s)", strerror(-ret), err);
	} else {
		orphan_freed_points += atomic_load(&fs->stats.orphans_freed) > 0;
		orphan_trunc_points += atomic_load(&fs->stats.orphans_truncated) > 0;
		ret = check_structure(fs, &kind);
		if (!ret)
			ret = check_durability(fs, c, kind);
		free(kind);
		if (mfs_unmount(fs) && !ret)
			ret = fail("unmount failed");
	}
	if (known[0] && !cerr[0]) {
		if (known_points++ < 3)
			fprintf(stderr,
			        "KNOWN BUG (blocks reused before their free commits) at crash "
			        "point %s "
			        "(bound %zu of %zu log entries)\n  check: %s\n  workload step: "
			        "%s\n",
			        where, c, nlog, known, step_at(last_idx, step, sizeof(step)));
	}
	if (!cerr[0])
		return;
	failures++;
	fprintf(stderr,
	        "FAIL crash point %s (bound %zu of %zu log entries)\n  check: %s\n  workload step: "
	        "%s\n",
	        where, c, nlog, cerr, step_at(last_idx, step, sizeof(step)));
}

/* Save the pre-mount image of a failing crash point. */
static void save_failing(void)
{
	FILE *f = fopen(failimg, "w");

	if (f) {
		if (fwrite(map, 1, IMG_SIZE, f) != IMG_SIZE)
			fprintf(stderr, "crash_test: could not save %s\n", failimg);
		fclose(f);
		fprintf(stderr, "  image before mount: %s\n", failimg);
	}
}

static void prefix_mode(void)
{
	char where[64];
	size_t k;

	for (k = 0; k <= nlog && failures < 3; k++) {
		unsigned long long before = failures;

		if (k > 0) {
			apply(want, &wlog[k - 1]);
			apply(map, &wlog[k - 1]);
		}
		snprintf(where, sizeof(where), "prefix k=%zu", k);
		check_point(k, where, k ? k - 1 : SIZE_MAX);
		restore();
		if (failures != before && failures == 1)
			save_failing(); /* restore() left exactly the pre-mount image */
	}
}

struct piece {
	size_t e;
	uint64_t pos, len;
};

static void epoch_mode(void)
{
	struct piece *pc = NULL;
	unsigned npc = 0, cappc = 0, s;
	uint64_t srng = P.seed ^ 0x5eedf00dull;
	size_t f, f2, k, applied = 0;
	char where[96];

	for (f = 0; f < nlog && failures < 3; f++) {
		if (wlog[f].op != BLK_OP_FLUSH)
			continue;
		for (; applied < f; applied++) {
			apply(want, &wlog[applied]);
			apply(map, &wlog[applied]);
		}
		for (f2 = f + 1; f2 < nlog && wlog[f2].op != BLK_OP_FLUSH; f2++)
			;
		if (f2 == f + 1)
			continue; /* an empty epoch: the prefix covers it */
		npc = 0;
		for (k = f + 1; k < f2; k++) {
			uint64_t p = wlog[k].pos, end = wlog[k].pos + wlog[k].len;

			while (p < end) {
				uint64_t next = (p / MFS_BLOCK_SIZE + 1) * MFS_BLOCK_SIZE;

				if (next > end)
					next = end;
				GROW(pc, npc, cappc);
				pc[npc++] = (struct piece){.e = k, .pos = p, .len = next - p};
				p = next;
			}
		}
		for (s = 0; s < P.subsets && failures < 3; s++) {
			uint64_t sub_seed = srng;
			unsigned pct = 20 + (unsigned)rng_below(&srng, 61), i, taken = 0;
			size_t last = f;

			for (i = 0; i < npc; i++)
				if (rng_below(&srng, 100) < pct) {
					apply_part(map, &wlog[pc[i].e], pc[i].pos, pc[i].len);
					taken++;
					last = pc[i].e;
				}
			snprintf(where, sizeof(where),
			         "epoch after flush %zu: %u of %u pieces (subset %u, seed %#" PRIx64
			         ")",
			         f, taken, npc, s, sub_seed);
			check_point(f2, where, last);
			if (cerr[0] && failures == 1) {
				restore();
				srng = sub_seed;
				pct = 20 + (unsigned)rng_below(&srng, 61);
				for (i = 0; i < npc; i++)
					if (rng_below(&srng, 100) < pct)
						apply_part(map, &wlog[pc[i].e], pc[i].pos,
						           pc[i].len);
				save_failing();
			}
			restore();
		}
	}
	free(pc);
}

/* --- setup ------------------------------------------------------------------------------ */

static void run_mkfs(const char *path)
{
	const char *env = getenv("MKFS_MENDFS");
	char mkfs[PATH_MAX], self[PATH_MAX], cmd[PATH_MAX * 3];
	ssize_t n;

	if (env && *env) {
		snprintf(mkfs, sizeof(mkfs), "%s", env);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			die("readlink /proc/self/exe");
		self[n] = 0;
		snprintf(mkfs, sizeof(mkfs), "%s/../../mkfs/mkfs.mendfs", dirname(self));
	}
	snprintf(cmd, sizeof(cmd), "'%s' -q -f %s'%s' %u", mkfs, P.data_csum ? "-O data_csum " : "",
	         path, IMG_SIZE);
	if (system(cmd) != 0)
		die("mkfs failed: %s", cmd);
}

int main(int argc, char **argv)
{
	char dir[] = "/dev/shm/mendfs-crash-XXXXXX", err[256] = "", cmd[PATH_MAX + 16];
	struct timespec t0, t1, t2;
	size_t nflush = 0, k;
	uint64_t commits, checkpoints;
	unsigned end_trees = 0;
	unsigned long long prefix_points;
	int i, fd, ret;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--long")) {
			P.ops = 3000;
			P.subsets = 8;
			P.max_file = 256 << 10;
			P.max_write = 40 << 10;
			P.frag_ext = 150;
			P.frag_every = 300;
		} else if (!strcmp(argv[i], "--data-csum")) {
			P.data_csum = true;
		} else if (!strcmp(argv[i], "--strict")) {
			strict = true;
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			P.seed = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
			P.ops = (unsigned)strtoul(argv[++i], NULL, 0);
		} else {
			die("usage: crash_test [--long] [--data-csum] [--strict] [--seed N] [--ops "
			    "N]");
		}
	}
	if (!P.seed)
		P.seed = 0x6d656e64;
	wl_rng = P.seed;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "/tmp/mendfs-crash-XXXXXX");
		if (!mkdtemp(dir))
			die("mkdtemp: %s", strerror(errno));
	}
	snprintf(img, sizeof(img), "%s/img", dir);
	run_mkfs(img);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	/* 1-2: mount, attach the tap while the device is idle, take the base, run */
	ret = mfs_mount(img, NULL, &wfs, err, sizeof(err));
	if (ret)
		die("mount of the fresh image: %s", err);
	ret = blk_dev_set_write_tap(wfs->dev, tap_fn, NULL);
	if (ret)
		die("attaching the write tap: %s", strerror(-ret));
	fd = open(img, O_RDWR);
	if (fd < 0)
		die("open %s: %s", img, strerror(errno));
	want = xmalloc(IMG_SIZE);
	base = xmalloc(IMG_SIZE);
	if (pread(fd, base, IMG_SIZE, 0) != (ssize_t)IMG_SIZE)
		die("reading the base image");
	memcpy(want, base, IMG_SIZE);
	run_workload();
	{
		/* the final unmount is the last step: a sync of every file */
		size_t lstart = nlog;
		unsigned f;

		GROW(ops, nops, capops);
		ops[nops++] = (struct op){.lstart = lstart, .desc = "close, unmount"};
		while (nheld)
			held_drop(nheld - 1);
		for (f = 0; f < nfiles; f++) {
			struct mfs_ino *ip;

			if (files[f].live && !mfs_iget(wfs, files[f].ino, &ip)) {
				end_trees += !!(ip->di.iflags & MFS_IFL_EXTENT_TREE);
				mfs_iput(wfs, ip);
			}
		}
		commits = atomic_load(&wfs->stats.commits);
		checkpoints = atomic_load(&wfs->stats.checkpoints);
		ret = mfs_unmount(wfs);
		if (ret)
			die("workload unmount: %s", strerror(-ret));
		ops[nops - 1].lend = nlog;
		for (f = 0; f < nfiles; f++)
			if (files[f].live)
				record_event((int)f, nlog);
	}
	for (k = 0; k < nlog; k++)
		nflush += wlog[k].op == BLK_OP_FLUSH;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("workload: seed %#" PRIx64 ", %u ops, %u files, %u dirs, %u fsync/sync events, "
	       "%zu logged writes (%zu flushes), %" PRIu64 " commits, %" PRIu64
	       " checkpoints before the unmount, %u files with an extent tree at the end, %.1fs\n",
	       P.seed, nops, nfiles, ndirs, nevs, nlog, nflush, commits, checkpoints, end_trees,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);

	/* 3: the working image back to the base, mapped */
	if (pwrite(fd, want, IMG_SIZE, 0) != (ssize_t)IMG_SIZE)
		die("resetting the image");
	map = mmap(NULL, IMG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	close(fd);
	prefix_mode();
	prefix_points = checked;
	clock_gettime(CLOCK_MONOTONIC, &t2);
	printf("prefix mode: %llu crash points, %.1fs\n", prefix_points,
	       (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) / 1e9);

	/* 4: the volatile write cache: restart from the base */
	if (!failures) {
		memcpy(want, base, IMG_SIZE);
		restore(); /* the working image back to the base */
		epoch_mode();
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("epoch mode: %llu crash points (%u subsets per flush epoch), %.1fs\n",
	       checked - prefix_points, P.subsets,
	       (double)(t1.tv_sec - t2.tv_sec) + (double)(t1.tv_nsec - t2.tv_nsec) / 1e9);
	printf("crash points checked: %llu (%llu inside the %u fragmented-file ops: %u made, %u "
	       "freed in steps, %llu inside the frees)\n",
	       checked, frag_points, frag_made + frag_freed, frag_made, frag_freed, free_points);
	printf("crash points whose mount finished orphans: %llu freeing an inode, %llu completing "
	       "a truncate\n",
	       orphan_freed_points, orphan_trunc_points);
	if (P.data_csum)
		printf("data_csum: %llu sectors failed their checksum where an uncommitted change "
		       "wrote (detected, zero-filled by the recovery read), none elsewhere\n",
		       csum_torn_sectors);
	{
		unsigned xs = 0, xr = 0;

		for (unsigned i = 0; i < nops; i++) {
			xs += ops[i].xlarge == 1;
			xr += ops[i].xlarge == 2;
		}
		printf("large xattrs (out of line): %u sets, %u removes; crash points inside them: "
		       "%llu, %llu; values read back whole: %llu\n",
		       xs, xr, xset_points, xrm_points, xlarge_values);
		if (strict && (!xs || !xr || !xset_points || !xrm_points || !xlarge_values)) {
			printf("FAIL: the workload made no crash point inside large xattr ops\n");
			failures++;
		}
	}
	if (known_points)
		printf("crash points showing the KNOWN BUG (blocks reused before their free "
		       "commits, "
		       "see check_mixed; fatal with --strict): %llu\n",
		       known_points);
	printf("fsync'ed files asserted exactly: %llu, as a mix of versions: %llu; files with an "
	       "extent tree seen: %llu; B+tree interior nodes seen: %llu; blocks restored between "
	       "crash points: %llu\n",
	       files_asserted, mixed_asserted, tree_files, tree_nodes, restored_blocks);

	munmap(map, IMG_SIZE);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "crash_test: could not remove %s\n", dir);
	for (k = 0; k < nlog; k++)
		free(wlog[k].data);
	free(wlog);
	for (i = 0; i < (int)nsnaps; i++) {
		free(snaps[i]->data);
		free(snaps[i]);
	}
	free(snaps);
	for (i = 0; i < (int)nfiles; i++) {
		unsigned m;

		for (m = 0; m < files[i].nmods; m++)
			free(files[i].mods[m].data);
		free(files[i].mods);
		free(files[i].data);
	}
	free(files);
	free(dirs);
	free(ents);
	free(ops);
	free(evs);
	free(want);
	free(base);
	if (failures) {
		printf("%llu failing crash point%s\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	return 0;
}
