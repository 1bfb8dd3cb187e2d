/* SPDX-License-Identifier: MIT */
/*
 * recovery-matrix: the recovery semantics of docs/RECOVERY.md on a live
 * mount, driven by online poison injection (MENDFS_IOC_INJECT; the mount
 * needs -o poison_inject).  Driven by recovery-test.sh.
 *
 *   matrix MNT DIR       five poison shapes (a whole block, one sector mid-block,
 *                        one range across two files' blocks, sectors beside a hole,
 *                        the sector at end of file), each poisoned four times and
 *                        repaired four ways (recovery write, zero-init,
 *                        fallocate ZERO_RANGE, whole-sector overwrite); every
 *                        poisoned state checked with read(), mmap (SIGBUS in a
 *                        child), mendfs_preadv2, mendfs_recover and BADRANGES, every
 *                        repair with BADRANGES, BMAP (same blocks) and content.
 *                        Leaves the expected content and block maps in DIR.
 *   verify MNT DIR       after a remount: content and block maps equal DIR's
 *   race MNT SECONDS     readers (O_DIRECT) while sectors are injected under them:
 *                        every read returns the pattern or fails with EIO
 *   fuzz MNT ITERATIONS  random bytes, versions and sizes into every ioctl:
 *                        EINVAL / ENOTTY for malformed ones, never a crash
 *   quarantine MNT DIR   a poisoned file is unlinked; filling the filesystem
 *                        never gets its poisoned block, does get its clean ones
 *   requarantine MNT DIR after a remount: the same, again
 * Exit 0 pass, 1 fail.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "die.h"
#include "mendfs/ioctl.h"
#include "mendfs/recovery.h"

#define BS    4096u
#define SECT  512u
#define MAXX  64
#define MAXF  8
#define MAXSP 4
#define PAGE  4096u

static const char *mnt, *dir;

/*
 * Under AddressSanitizer: a child that touches a poisoned page of its mapping
 * must die of the SIGBUS (check_mmap), not have the sanitizer report it.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "handle_sigbus=0";
}

static uint8_t pat(uint64_t i, unsigned gen)
{
	return (uint8_t)(((i * 2654435761u) >> 13) ^ (i >> 12) ^ (0x5a + gen * 37));
}

static char *path_of(const char *name)
{
	static char buf[8][4096];
	static unsigned k;
	char *p = buf[k++ % 8];

	snprintf(p, 4096, "%s/%s", mnt, name);
	return p;
}

static void want_errno(long r, int err, const char *what)
{
	if (r != -1 || errno != err)
		die("%s: got %ld (%s), expected %s", what, r, r < 0 ? strerror(errno) : "success",
		    strerror(err));
}

/* --- the mount's view ------------------------------------------------------------------ */

struct ext {
	uint64_t offset, length, sector;
};

static unsigned bmap(int fd, struct ext *x, unsigned max)
{
	struct mendfs_ioc_bmap *a = xmalloc(sizeof(*a));
	uint64_t start = 0;
	unsigned n = 0;

	for (;;) {
		memset(a, 0, sizeof(*a));
		a->version = MENDFS_IOC_VERSION;
		a->start = start;
		if (ioctl(fd, MENDFS_IOC_BMAP, a))
			die("BMAP: %s", strerror(errno));
		for (unsigned i = 0; i < a->nr; i++) {
			if (n == max)
				die("more than %u extents", max);
			x[n].offset = a->extents[i].offset;
			x[n].length = a->extents[i].length;
			x[n].sector = a->extents[i].sector;
			n++;
		}
		if (a->last)
			break;
		start = a->next;
	}
	free(a);
	return n;
}

/* The device sector of file byte @off (which must be mapped). */
static uint64_t sector_of(int fd, uint64_t off)
{
	struct ext x[MAXX];
	unsigned n = bmap(fd, x, MAXX);

	for (unsigned i = 0; i < n; i++)
		if (off >= x[i].offset && off < x[i].offset + x[i].length)
			return x[i].sector + (off - x[i].offset) / SECT;
	die("file byte %llu is not mapped", (unsigned long long)off);
}

static void inject(uint64_t sector, uint64_t count)
{
	struct mendfs_ioc_inject a;
	int fd = xopen(mnt, O_RDONLY | O_DIRECTORY);

	memset(&a, 0, sizeof(a));
	a.version = MENDFS_IOC_VERSION;
	a.sector = sector;
	a.count = count;
	if (ioctl(fd, MENDFS_IOC_INJECT, &a))
		die("inject %llu %llu: %s", (unsigned long long)sector, (unsigned long long)count,
		    strerror(errno));
	close(fd);
}

static void daemon_alive(void)
{
	struct mendfs_ioc_stats st;
	int fd = xopen(mnt, O_RDONLY | O_DIRECTORY);

	memset(&st, 0, sizeof(st));
	st.version = MENDFS_IOC_VERSION;
	if (ioctl(fd, MENDFS_IOC_STATS, &st))
		die("the daemon does not answer: %s", strerror(errno));
	close(fd);
}

/* --- the model: a file, its expected bytes and its poisoned ranges ------------------------ */

struct file {
	const char *name;
	uint64_t size;
	uint8_t *exp;
	struct ext map[MAXX];
	unsigned nmap;
};

struct spot {
	struct file *f;
	uint64_t off, len; /* file bytes; whole sectors except at end of file */
};

static void compare(const struct file *f, const uint8_t *buf, uint64_t off, uint64_t len,
                    const struct spot *sp, unsigned nsp, const char *what)
{
	for (uint64_t i = off; i < off + len; i++) {
		uint8_t want = f->exp[i];

		for (unsigned s = 0; s < nsp; s++)
			if (sp[s].f == f && i >= sp[s].off && i < sp[s].off + sp[s].len)
				want = 0;
		if (buf[i - off] != want)
			die("%s: %s byte %llu is %#x, expected %#x", f->name, what,
			    (unsigned long long)i, buf[i - off], want);
	}
}

static void write_file(struct file *f, uint64_t off, uint64_t len, unsigned gen)
{
	int fd = xopen(path_of(f->name), O_WRONLY | O_CREAT);

	for (uint64_t i = off; i < off + len; i++)
		f->exp[i] = pat(i, gen);
	if (pwrite(fd, f->exp + off, len, (off_t)off) != (ssize_t)len)
		die("pwrite %s: %s", f->name, strerror(errno));
	if (fsync(fd))
		die("fsync %s: %s", f->name, strerror(errno));
	close(fd);
}

static void map_save(struct file *f)
{
	int fd = xopen(path_of(f->name), O_RDONLY);

	f->nmap = bmap(fd, f->map, MAXX);
	close(fd);
}

static void map_same(const struct file *f, const char *what)
{
	struct ext x[MAXX];
	int fd = xopen(path_of(f->name), O_RDONLY);
	unsigned n = bmap(fd, x, MAXX);

	close(fd);
	/* the same blocks; the last extent may have grown with the file (EOF case) */
	for (unsigned i = 0; i < n && n == f->nmap; i++)
		if (x[i].offset != f->map[i].offset || x[i].sector != f->map[i].sector ||
		    (i + 1 < n ? x[i].length != f->map[i].length
		               : x[i].length < f->map[i].length ||
		                         (x[i].length + BS - 1) / BS !=
		                                 (f->map[i].length + BS - 1) / BS))
			n = UINT32_MAX;
	if (n != f->nmap)
		die("%s: %s moved: %u extents (first at sector %llu), were %u (first at %llu)",
		    what, f->name, n, n && n < MAXX ? (unsigned long long)x[0].sector : 0, f->nmap,
		    f->nmap ? (unsigned long long)f->map[0].sector : 0);
}

/* BADRANGES of @f equals the spots on it. */
static void badranges_are(const struct file *f, const struct spot *sp, unsigned nsp,
                          const char *what)
{
	struct mendfs_range r[16];
	unsigned n, k = 0;
	int fd = xopen(path_of(f->name), O_RDONLY);

	if (mendfs_badranges(fd, 0, r, 16, &n))
		die("mendfs_badranges %s: %s", f->name, strerror(errno));
	close(fd);
	for (unsigned s = 0; s < nsp; s++) {
		if (sp[s].f != f)
			continue;
		if (k >= n || r[k].offset != sp[s].off || r[k].length != sp[s].len)
			die("%s: %s BADRANGES[%u] is %llu+%llu of %u, expected %llu+%llu", what,
			    f->name, k, k < n ? (unsigned long long)r[k].offset : 0,
			    k < n ? (unsigned long long)r[k].length : 0, n,
			    (unsigned long long)sp[s].off, (unsigned long long)sp[s].len);
		k++;
	}
	if (k != n)
		die("%s: %s has %u poisoned ranges, expected %u (first %llu+%llu)", what, f->name,
		    n, k, (unsigned long long)r[0].offset, (unsigned long long)r[0].length);
}

/* Plain read() from 0: the clean bytes before the first poisoned page, then EIO. */
static void check_read(const struct file *f, uint64_t bad)
{
	uint64_t want = bad / PAGE * PAGE, done = 0;
	uint8_t *buf = xmalloc(f->size);
	int fd = xopen(path_of(f->name), O_RDONLY);

	for (;;) {
		ssize_t n = read(fd, buf + done, f->size - done);

		if (n < 0) {
			if (errno != EIO)
				die("%s: read: %s, expected EIO", f->name, strerror(errno));
			break;
		}
		if (n == 0)
			die("%s: read reached end of file at %llu (poison at %llu)", f->name,
			    (unsigned long long)done, (unsigned long long)bad);
		done += (uint64_t)n;
	}
	if (done != want)
		die("%s: read returned %llu bytes before EIO, expected %llu", f->name,
		    (unsigned long long)done, (unsigned long long)want);
	compare(f, buf, 0, done, NULL, 0, "read");
	free(buf);
	close(fd);
}

/*
 * mmap in a child: the pages before the poisoned one read right, the
 * poisoned one raises SIGBUS (the child dies of it); the daemon lives.
 */
static void check_mmap(const struct file *f, uint64_t bad)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(path_of(f->name), O_RDONLY);
		volatile const uint8_t *p;
		uint64_t i;

		if (fd < 0)
			_exit(2);
		p = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			_exit(3);
		for (i = 0; i < bad / PAGE * PAGE; i++)
			if (p[i] != f->exp[i])
				_exit(4);
		(void)p[bad];
		_exit(0); /* no signal: wrong */
	}
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid: %s", strerror(errno));
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGBUS)
		die("%s: mmap access to poisoned byte %llu: child %s %d, expected SIGBUS", f->name,
		    (unsigned long long)bad, WIFSIGNALED(status) ? "killed by signal" : "exited",
		    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	daemon_alive();
}

/* Recovery reads: every byte, the poisoned ones zero, the zero-filled ranges exact. */
static void check_recovery(const struct file *f, const struct spot *sp, unsigned nsp)
{
	uint8_t *buf = xmalloc(f->size + 100);
	size_t a = f->size / 3 + 1;
	struct iovec iov[2] = {{buf, a}, {buf + a, f->size + 100 - a}};
	struct mendfs_range z[16];
	unsigned n, k = 0;
	int fd = xopen(path_of(f->name), O_RDONLY);
	ssize_t r;

	memset(buf, 0xee, f->size + 100);
	r = mendfs_preadv2(fd, iov, 2, 0, MENDFS_RWF_RECOVERY_DATA);
	if (r != (ssize_t)f->size)
		die("%s: mendfs_preadv2 returned %zd (%s)", f->name, r,
		    r < 0 ? strerror(errno) : "");
	compare(f, buf, 0, f->size, sp, nsp, "mendfs_preadv2");
	r = mendfs_recover(fd, buf, f->size, 0, z, 16, &n);
	if (r != (ssize_t)f->size)
		die("%s: mendfs_recover returned %zd", f->name, r);
	for (unsigned s = 0; s < nsp; s++) {
		if (sp[s].f != f)
			continue;
		if (k >= n || z[k].offset != sp[s].off || z[k].length != sp[s].len)
			die("%s: zero-filled range %u is %llu+%llu, expected %llu+%llu", f->name, k,
			    k < n ? (unsigned long long)z[k].offset : 0,
			    k < n ? (unsigned long long)z[k].length : 0,
			    (unsigned long long)sp[s].off, (unsigned long long)sp[s].len);
		k++;
	}
	if (k != n)
		die("%s: %u zero-filled ranges, expected %u", f->name, n, k);
	free(buf);
	close(fd);
}

static void check_content(const struct file *f, const char *what)
{
	uint8_t *buf = xmalloc(f->size);
	struct stat st;
	int fd = xopen(path_of(f->name), O_RDONLY);
	ssize_t r;

	if (fstat(fd, &st) || (uint64_t)st.st_size != f->size)
		die("%s: %s size %lld, expected %llu", what, f->name, (long long)st.st_size,
		    (unsigned long long)f->size);
	r = pread(fd, buf, f->size, 0);
	if (r != (ssize_t)f->size)
		die("%s: %s read %zd (%s)", what, f->name, r, r < 0 ? strerror(errno) : "short");
	compare(f, buf, 0, f->size, NULL, 0, what);
	free(buf);
	close(fd);
}

/* Poison every spot (device ranges merged: one injection can cover two files). */
static unsigned poison(const struct spot *sp, unsigned nsp)
{
	struct ext r[MAXSP];
	unsigned n = 0;

	for (unsigned s = 0; s < nsp; s++) {
		int fd = xopen(path_of(sp[s].f->name), O_RDONLY);
		uint64_t sec = sector_of(fd, sp[s].off), cnt = (sp[s].len + SECT - 1) / SECT;

		close(fd);
		if (n && r[n - 1].sector + r[n - 1].length == sec)
			r[n - 1].length += cnt;
		else
			r[n++] = (struct ext){0, cnt, sec};
	}
	for (unsigned i = 0; i < n; i++)
		inject(r[i].sector, r[i].length);
	return n;
}

static void check_poisoned(struct file **fs, unsigned nf, const struct spot *sp, unsigned nsp)
{
	for (unsigned i = 0; i < nf; i++) {
		uint64_t bad = UINT64_MAX;

		for (unsigned s = 0; s < nsp; s++)
			if (sp[s].f == fs[i] && sp[s].off < bad)
				bad = sp[s].off;
		badranges_are(fs[i], sp, nsp, "poisoned");
		check_read(fs[i], bad);
		check_mmap(fs[i], bad);
		check_recovery(fs[i], sp, nsp);
	}
}

enum op { OP_RWRITE, OP_ZEROINIT, OP_FALLOC, OP_OVERWRITE, OP_MAX };
static const char *const op_name[] = {"recovery write", "zero-init", "fallocate ZERO_RANGE",
                                      "whole-sector overwrite"};

static void repair(enum op op, const struct spot *s, unsigned gen)
{
	struct file *f = s->f;
	uint64_t end = s->off + s->len, aend = (end + SECT - 1) / SECT * SECT;
	int fd = xopen(path_of(f->name), O_WRONLY);
	uint8_t *buf = xmalloc(aend - s->off + SECT);

	switch (op) {
	case OP_RWRITE: {
		/* from inside the first poisoned sector to inside the last */
		uint64_t a = s->off + 100, b = end - (s->len >= SECT ? 100 : s->len / 3);
		struct iovec iov = {buf, b - a};

		for (uint64_t i = a; i < b; i++)
			buf[i - a] = pat(i, gen);
		want_errno(pwrite(fd, buf, b - a, (off_t)a), EIO,
		           "plain write over part of a poisoned sector");
		if (mendfs_pwritev2(fd, &iov, 1, (off_t)a, MENDFS_RWF_RECOVERY_DATA) !=
		    (ssize_t)(b - a))
			die("%s: recovery write %llu+%llu: %s", f->name, (unsigned long long)a,
			    (unsigned long long)(b - a), strerror(errno));
		memset(f->exp + s->off, 0, s->len);
		memcpy(f->exp + a, buf, b - a);
		break;
	}
	case OP_ZEROINIT:
		if (mendfs_zeroinit(fd, (off_t)s->off, (off_t)(aend - s->off)))
			die("%s: zeroinit: %s", f->name, strerror(errno));
		memset(f->exp + s->off, 0, s->len);
		break;
	case OP_FALLOC:
		/* the exact range: at end of file it ends inside the poisoned sector */
		if (fallocate(fd, FALLOC_FL_ZERO_RANGE, (off_t)s->off, (off_t)s->len))
			die("%s: fallocate ZERO_RANGE %llu+%llu: %s", f->name,
			    (unsigned long long)s->off, (unsigned long long)s->len,
			    strerror(errno));
		memset(f->exp + s->off, 0, s->len);
		break;
	default:
		/* whole sectors: at end of file this extends the file to the sector's end */
		for (uint64_t i = s->off; i < aend; i++)
			buf[i - s->off] = pat(i, gen);
		if (pwrite(fd, buf, aend - s->off, (off_t)s->off) != (ssize_t)(aend - s->off))
			die("%s: overwrite: %s", f->name, strerror(errno));
		if (aend > f->size) {
			f->exp = realloc(f->exp, aend);
			if (!f->exp)
				die("out of memory");
			f->size = aend;
		}
		memcpy(f->exp + s->off, buf, aend - s->off);
		break;
	}
	if (fsync(fd))
		die("fsync: %s", strerror(errno));
	free(buf);
	close(fd);
}

static void save(const struct file *f)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, f->name);
	fd = xopen(p, O_WRONLY | O_CREAT | O_TRUNC);
	if (write(fd, f->exp, f->size) != (ssize_t)f->size)
		die("write %s: %s", p, strerror(errno));
	close(fd);
	snprintf(p, sizeof(p), "%s/%s.map", dir, f->name);
	fd = xopen(p, O_WRONLY | O_CREAT | O_TRUNC);
	if (write(fd, f->map, f->nmap * sizeof(f->map[0])) !=
	    (ssize_t)(f->nmap * sizeof(f->map[0])))
		die("write %s: %s", p, strerror(errno));
	close(fd);
}

static void fill(void);

static struct file files[MAXF];
static unsigned nfiles;

static struct file *new_file(const char *name, uint64_t size)
{
	struct file *f = &files[nfiles++];

	f->name = name;
	f->size = size;
	f->exp = xmalloc(size);
	return f;
}

static void run_case(const char *what, struct spot *sp, unsigned nsp, unsigned want_injections)
{
	struct file *fs[MAXSP];
	unsigned nf = 0;

	for (unsigned s = 0; s < nsp; s++) {
		unsigned i;

		for (i = 0; i < nf && fs[i] != sp[s].f; i++)
			;
		if (i == nf)
			fs[nf++] = sp[s].f;
	}
	for (unsigned op = 0; op < OP_MAX; op++) {
		unsigned n = poison(sp, nsp);

		if (n != want_injections)
			die("%s: %u device ranges poisoned, expected %u", what, n, want_injections);
		check_poisoned(fs, nf, sp, nsp);
		for (unsigned s = 0; s < nsp; s++)
			repair(op, &sp[s], 10 + op);
		for (unsigned i = 0; i < nf; i++) {
			char w[256];

			snprintf(w, sizeof(w), "%s after %s", what, op_name[op]);
			badranges_are(fs[i], NULL, 0, w);
			map_same(fs[i], w);
			check_content(fs[i], w);
		}
	}
	printf("ok %s: read, mmap, preadv2, badranges; %s, %s, %s, %s\n", what, op_name[0],
	       op_name[1], op_name[2], op_name[3]);
}

static void cmd_matrix(void)
{
	struct file *a, *b, *c1, *c2, *d, *e;

	a = new_file("block", 32768);
	write_file(a, 0, a->size, 0);
	b = new_file("sector", 32768);
	write_file(b, 0, b->size, 1);
	/*
	 * span1 and span2 on adjacent device blocks: fill the filesystem, free
	 * 8 contiguous blocks of the filler (committed by fsync), and the two
	 * files can only get those, one after the other.
	 */
	fill();
	{
		struct ext x[MAXX * 4];
		int fd = xopen(path_of("filler"), O_RDWR);
		unsigned n = bmap(fd, x, MAXX * 4), i;

		for (i = 0; i < n && x[i].length < 8 * BS; i++)
			;
		if (i == n)
			die("the filler has no extent of 8 blocks");
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)x[i].offset,
		              8 * BS) ||
		    fsync(fd))
			die("punch the filler: %s", strerror(errno));
		close(fd);
	}
	c1 = new_file("span1", 16384);
	write_file(c1, 0, c1->size, 2);
	c2 = new_file("span2", 16384);
	write_file(c2, 0, c2->size, 3);
	if (unlink(path_of("filler")))
		die("unlink filler: %s", strerror(errno));
	sync();
	d = new_file("hole", 16384);
	write_file(d, 0, 4096, 4);
	write_file(d, 12288, 4096, 4);
	e = new_file("eof", 10000);
	write_file(e, 0, e->size, 5);
	for (unsigned i = 0; i < nfiles; i++)
		map_save(&files[i]);
	if (d->nmap != 2)
		die("hole: %u extents, expected 2 around the hole", d->nmap);

	run_case("a whole block", (struct spot[]){{a, 3 * BS, BS}}, 1, 1);
	run_case("one sector mid-block", (struct spot[]){{b, 2 * BS + 5 * SECT, SECT}}, 1, 1);
	/* the files were written one after the other: span2 starts where span1 ends */
	run_case("one range across two files",
	         (struct spot[]){{c1, c1->size - 2 * SECT, 2 * SECT}, {c2, 0, 2 * SECT}}, 2, 1);
	run_case("sectors beside a hole", (struct spot[]){{d, BS - SECT, SECT}, {d, 3 * BS, SECT}},
	         2, 2);
	run_case("the sector at end of file", (struct spot[]){{e, 9728, 272}}, 1, 1);
	for (unsigned i = 0; i < nfiles; i++)
		save(&files[i]);
}

static void cmd_verify(void)
{
	static const char *const names[] = {"block", "sector", "span1", "span2", "hole", "eof"};

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct file f = {.name = names[i]};
		char p[4096];
		struct stat st;
		int fd;

		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		fd = xopen(p, O_RDONLY);
		if (fstat(fd, &st))
			die("stat %s: %s", p, strerror(errno));
		f.size = (uint64_t)st.st_size;
		f.exp = xmalloc(f.size);
		if (read(fd, f.exp, f.size) != (ssize_t)f.size)
			die("read %s", p);
		close(fd);
		snprintf(p, sizeof(p), "%s/%s.map", dir, names[i]);
		fd = xopen(p, O_RDONLY);
		f.nmap = (unsigned)(read(fd, f.map, sizeof(f.map)) / (ssize_t)sizeof(f.map[0]));
		close(fd);
		check_content(&f, "after the remount");
		map_same(&f, "after the remount");
		badranges_are(&f, NULL, 0, "after the remount");
		free(f.exp);
	}
	printf("ok the repaired files after a remount\n");
}

/* --- poison injected under readers ----------------------------------------------------- */

#define RACE_SIZE (1u << 20)

static volatile bool race_stop;
static const uint8_t *race_exp;

static void *race_reader(void *arg)
{
	const char *path = arg;
	uint8_t *buf;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	long reads = 0, eios = 0;
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0)
		die("open O_DIRECT %s: %s", path, strerror(errno));
	if (posix_memalign((void **)&buf, 4096, 65536))
		die("out of memory");
	while (!race_stop) {
		uint64_t off = (uint64_t)(rand_r(&seed) % (RACE_SIZE / 4096)) * 4096;
		size_t len = (size_t)(rand_r(&seed) % 16 + 1) * 4096;
		ssize_t n;

		if (off + len > RACE_SIZE)
			len = RACE_SIZE - off;
		n = pread(fd, buf, len, (off_t)off);
		if (n < 0) {
			if (errno != EIO)
				die("reader: pread %llu+%zu: %s", (unsigned long long)off, len,
				    strerror(errno));
			eios++;
			continue;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != race_exp[off + (uint64_t)i])
				die("reader: byte %llu is %#x, expected %#x (wrong bytes under "
				    "injection)",
				    (unsigned long long)(off + (uint64_t)i), buf[i],
				    race_exp[off + (uint64_t)i]);
		reads++;
	}
	if (!reads)
		die("reader: no read succeeded");
	printf("reader: %ld reads ok, %ld EIO\n", reads, eios);
	free(buf);
	close(fd);
	return NULL;
}

static void cmd_race(unsigned seconds)
{
	struct file *f = new_file("race", RACE_SIZE);
	struct spot sp[32];
	pthread_t th[2];
	unsigned nsp = 0, seed = 12345;
	int fd;

	write_file(f, 0, f->size, 7);
	race_exp = f->exp;
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, race_reader, path_of("race")))
			die("pthread_create");
	fd = xopen(path_of("race"), O_RDONLY);
	for (unsigned t = 0; t < seconds * 10 && nsp < 32; t++) {
		struct timespec ts = {0, 100 * 1000 * 1000};

		nanosleep(&ts, NULL);
		if (t % 3 == 0) {
			/* one sector of a random block */
			uint64_t off = (uint64_t)(rand_r(&seed) % (RACE_SIZE / SECT)) * SECT;
			unsigned i;

			for (i = 0; i < nsp && sp[i].off != off; i++)
				;
			if (i < nsp)
				continue;
			inject(sector_of(fd, off), 1);
			sp[nsp++] = (struct spot){f, off, SECT};
		}
	}
	race_stop = true;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	close(fd);
	daemon_alive();
	/* BADRANGES lists exactly what was injected */
	for (unsigned i = 1; i < nsp; i++)
		for (unsigned j = i; j > 0 && sp[j - 1].off > sp[j].off; j--) {
			struct spot t = sp[j];

			sp[j] = sp[j - 1];
			sp[j - 1] = t;
		}
	{
		struct spot m[32];
		unsigned nm = 0;

		for (unsigned i = 0; i < nsp; i++) {
			if (nm && m[nm - 1].off + m[nm - 1].len == sp[i].off)
				m[nm - 1].len += SECT;
			else
				m[nm++] = sp[i];
		}
		badranges_are(f, m, nm, "after the race");
		check_recovery(f, m, nm);
	}
	printf("ok %u sectors injected under 2 readers: data or EIO, never wrong bytes\n", nsp);
}

/* --- fuzz ------------------------------------------------------------------------------ */

static const unsigned long cmds[] = {
        MENDFS_IOC_RECOVERY_READ,  MENDFS_IOC_BADRANGES, MENDFS_IOC_BMAP,
        MENDFS_IOC_ZEROINIT,       MENDFS_IOC_STATS,     MENDFS_IOC_INJECT,
        MENDFS_IOC_RECOVERY_WRITE,
};

/* Offsets of the header words in every struct: version, flags at 0; reserved[4] where? */
static size_t reserved_off(unsigned long cmd)
{
	switch (cmd) {
	case MENDFS_IOC_RECOVERY_READ:
		return offsetof(struct mendfs_ioc_recovery_read, reserved);
	case MENDFS_IOC_BADRANGES:
		return offsetof(struct mendfs_ioc_badranges, reserved);
	case MENDFS_IOC_BMAP:
		return offsetof(struct mendfs_ioc_bmap, reserved);
	case MENDFS_IOC_ZEROINIT:
		return offsetof(struct mendfs_ioc_zeroinit, reserved);
	case MENDFS_IOC_STATS:
		return offsetof(struct mendfs_ioc_stats, reserved);
	case MENDFS_IOC_INJECT:
		return offsetof(struct mendfs_ioc_inject, reserved);
	default:
		return offsetof(struct mendfs_ioc_recovery_write, reserved);
	}
}

static void cmd_fuzz(unsigned iters)
{
	static uint8_t buf[16384] __attribute__((aligned(8)));
	unsigned seed = 777, counts[3] = {0, 0, 0};
	int fds[3];

	write_file(new_file("fuzz", 65536), 0, 65536, 9);
	fds[0] = xopen(path_of("fuzz"), O_RDWR);
	fds[1] = xopen(path_of("fuzz"), O_RDONLY);
	fds[2] = xopen(mnt, O_RDONLY | O_DIRECTORY);
	for (unsigned it = 0; it < iters; it++) {
		unsigned kind = (unsigned)rand_r(&seed) % 4, fdi = (unsigned)rand_r(&seed) % 3;
		unsigned long cmd;
		bool valid_header = false, inject_cmd;
		long r;

		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rand_r(&seed);
		if (kind == 0) {
			/* a mendfs number with the wrong size or direction, or another magic */
			unsigned nr = (unsigned)rand_r(&seed) % 10,
			         sz = (unsigned)rand_r(&seed) % 16384;
			unsigned magic = rand_r(&seed) % 2 ? MENDFS_IOC_MAGIC : 0xF6;

			cmd = _IOC((unsigned)rand_r(&seed) % 4, magic, nr, sz);
			for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
				if (cmd == cmds[i])
					cmd ^= 1ul << _IOC_SIZESHIFT; /* not by chance a real one */
			r = ioctl(fds[fdi], cmd, buf);
			if (r != -1 || errno != ENOTTY)
				die("fuzz %u: unknown ioctl %#lx gave %ld (%s), expected ENOTTY",
				    it, cmd, r, r < 0 ? strerror(errno) : "success");
			counts[0]++;
			continue;
		}
		cmd = cmds[(unsigned)rand_r(&seed) % (sizeof(cmds) / sizeof(cmds[0]))];
		inject_cmd = cmd == MENDFS_IOC_INJECT;
		if (kind >= 2) {
			/* a plausible header, random fields after it */
			uint32_t v = MENDFS_IOC_VERSION;

			memcpy(buf, &v, 4);
			if (kind == 3 || rand_r(&seed) % 2) {
				memset(buf + 4, 0, 4);
				memset(buf + reserved_off(cmd), 0, 32);
				valid_header = true;
			}
			/* small offsets and lengths now and then, so some calls do work */
			if (rand_r(&seed) % 2)
				memset(buf + 12, 0, 4), memset(buf + 20, 0, 6);
		}
		if (inject_cmd && valid_header) {
			/* never poison the filesystem for real: a reserved word set */
			buf[reserved_off(cmd) + 8 * ((unsigned)rand_r(&seed) % 4)] |= 1;
			valid_header = false;
		}
		r = ioctl(fds[fdi], cmd, buf);
		if (!valid_header) {
			if (r != -1 || errno != EINVAL)
				die("fuzz %u: malformed ioctl %#lx on fd %u gave %ld (%s), "
				    "expected "
				    "EINVAL",
				    it, cmd, fdi, r, r < 0 ? strerror(errno) : "success");
			counts[1]++;
			continue;
		}
		if (r == -1 && errno != EINVAL && errno != EBADF && errno != EFBIG &&
		    errno != EISDIR && errno != ENOSPC && errno != EIO)
			die("fuzz %u: ioctl %#lx on fd %u gave %s", it, cmd, fdi, strerror(errno));
		counts[2]++;
	}
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	daemon_alive();
	printf("ok %u random ioctls: %u unknown (ENOTTY), %u malformed (EINVAL), %u well formed; "
	       "daemon alive\n",
	       iters, counts[0], counts[1], counts[2]);
}

/* --- quarantine ------------------------------------------------------------------------ */

/* Fill the filesystem with "filler" until ENOSPC. */
static void fill(void)
{
	static uint8_t chunk[1 << 20];
	int fd = xopen(path_of("filler"), O_WRONLY | O_CREAT | O_TRUNC);

	memset(chunk, 0x77, sizeof(chunk));
	for (;;) {
		ssize_t w = write(fd, chunk, sizeof(chunk));

		if (w < 0) {
			if (errno != ENOSPC)
				die("fill: %s", strerror(errno));
			break;
		}
		if (w < (ssize_t)sizeof(chunk)) {
			/* the rest, block by block, until ENOSPC */
			while (write(fd, chunk, BS) == BS)
				;
			if (errno != ENOSPC)
				die("fill: %s", strerror(errno));
			break;
		}
	}
	if (fsync(fd))
		die("fsync filler: %s", strerror(errno));
	close(fd);
}

/* Fill the filesystem; true if the filler's blocks include device block @blk. */
static bool fill_has(uint64_t blk, unsigned *nblk_out)
{
	struct ext x[MAXX * 4];
	unsigned n;
	bool has = false;
	int fd;

	fill();
	fd = xopen(path_of("filler"), O_RDONLY);
	n = bmap(fd, x, MAXX * 4);
	close(fd);
	*nblk_out = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t b0 = x[i].sector / 8,
		         b1 = (x[i].sector * SECT + x[i].length + BS - 1) / BS;

		*nblk_out += (unsigned)(b1 - b0);
		if (blk >= b0 && blk < b1)
			has = true;
	}
	return has;
}

static void cmd_quarantine(bool again)
{
	char p[4096];
	uint64_t blk, clean[7];
	unsigned nblk;
	FILE *st;

	snprintf(p, sizeof(p), "%s/quarantine", dir);
	if (!again) {
		struct file *q = new_file("q", 8 * BS);
		int fd;

		write_file(q, 0, q->size, 8);
		fd = xopen(path_of("q"), O_RDONLY);
		blk = sector_of(fd, 2 * BS) / 8;
		for (unsigned i = 0, k = 0; i < 8; i++)
			if (i != 2)
				clean[k++] = sector_of(fd, (uint64_t)i * BS) / 8;
		close(fd);
		inject(blk * 8 + 1, 1);
		if (unlink(path_of("q")))
			die("unlink q: %s", strerror(errno));
		sync();
		st = fopen(p, "w");
		if (!st)
			die("%s: %s", p, strerror(errno));
		fprintf(st, "%llu\n", (unsigned long long)blk);
		for (unsigned i = 0; i < 7; i++)
			fprintf(st, "%llu\n", (unsigned long long)clean[i]);
		fclose(st);
	} else {
		unsigned long long v;

		st = fopen(p, "r");
		if (!st || fscanf(st, "%llu", &v) != 1)
			die("%s: unreadable", p);
		blk = v;
		for (unsigned i = 0; i < 7; i++) {
			if (fscanf(st, "%llu", &v) != 1)
				die("%s: unreadable", p);
			clean[i] = v;
		}
		fclose(st);
		if (unlink(path_of("filler")))
			die("unlink filler: %s", strerror(errno));
		sync();
	}
	if (fill_has(blk, &nblk))
		die("the filesystem handed out quarantined block %llu", (unsigned long long)blk);
	for (unsigned i = 0; i < 7; i++) {
		/* the clean blocks of the unlinked file were free: a full filesystem uses them */
		int fd = xopen(path_of("filler"), O_RDONLY);
		struct ext x[MAXX * 4];
		unsigned n = bmap(fd, x, MAXX * 4);
		bool found = false;

		close(fd);
		for (unsigned j = 0; j < n && !found; j++)
			found = clean[i] >= x[j].sector / 8 &&
			        clean[i] < (x[j].sector * SECT + x[j].length) / BS;
		if (!found)
			die("clean block %llu of the unlinked file was not reused by the filler",
			    (unsigned long long)clean[i]);
	}
	printf("ok %s: filler of %u blocks holds the 7 clean blocks, never quarantined block "
	       "%llu\n",
	       again ? "after a remount" : "unlinked poisoned file", nblk, (unsigned long long)blk);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 2 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		goto usage;
	mnt = argv[2];
	dir = argc > 3 ? argv[3] : NULL;
	if (!strcmp(cmd, "matrix") && argc == 4)
		cmd_matrix();
	else if (!strcmp(cmd, "verify") && argc == 4)
		cmd_verify();
	else if (!strcmp(cmd, "race") && argc == 4)
		cmd_race((unsigned)atoi(argv[3]));
	else if (!strcmp(cmd, "fuzz") && argc == 4)
		cmd_fuzz((unsigned)atoi(argv[3]));
	else if (!strcmp(cmd, "quarantine") && argc == 4)
		cmd_quarantine(false);
	else if (!strcmp(cmd, "requarantine") && argc == 4)
		cmd_quarantine(true);
	else
		goto usage;
	return 0;
usage:
	fprintf(stderr, "usage: see the top of tests/integration/recovery-matrix.c\n");
	return 1;
}
