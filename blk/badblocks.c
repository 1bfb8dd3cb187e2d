/* SPDX-License-Identifier: MIT */
/*
 * badblocks.c: the device's poison table and its emulation file.
 *
 * The table is a sorted array of non-overlapping, non-adjacent sector ranges
 * (adjacent ones are coalesced), so "is [s, s + n) poisoned" is one binary
 * search.  Readers share bb->lock, add/clear take it for writing; bb->nr is
 * the count, stored with release semantics after every change so that the I/O
 * fast path can ask blk_bb_empty() without taking the lock.
 *
 * The emulation file uses the kernel's sysfs badblocks format: one
 * "SECTOR COUNT" pair per line, blank lines and '#' comments allowed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blk_internal.h"

#define BB_MIN_CAP     16u
#define BB_FILE_HEADER "# mendfs badblocks emulation: SECTOR COUNT (512-byte sectors)\n"
#define BB_LINE_MAX    42 /* two 20-digit numbers, a space, a newline */
#define BB_GARBAGE_MAX 32 /* bytes of a bad line quoted in an error */

static inline uint64_t bb_end(const struct blk_range *r)
{
	return r->sector + r->nr;
}

/* Count of ranges; the caller holds bb->lock (either way). */
static inline uint32_t __bb_nr(struct blk_badblocks *bb)
{
	return atomic_load_explicit(&bb->nr, memory_order_relaxed);
}

/* Publish a new count; the caller holds bb->lock for writing. */
static inline void __bb_publish(struct blk_badblocks *bb, uint32_t nr)
{
	/* bounds before the count: a reader that sees this count sees these bounds */
	atomic_store_explicit(&bb->lo, nr ? bb->ranges[0].sector : UINT64_MAX,
	                      memory_order_relaxed);
	atomic_store_explicit(&bb->hi, nr ? bb_end(&bb->ranges[nr - 1]) : 0, memory_order_relaxed);
	atomic_store_explicit(&bb->nr, nr, memory_order_release);
}

/* First index whose range ends after @sector (n if none).  Ends are sorted too. */
static inline uint32_t bb_first_end_after(const struct blk_range *r, uint32_t n, uint64_t sector)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (bb_end(&r[mid]) > sector)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

unsigned blk_range_find(const struct blk_range *r, unsigned n, uint64_t sector)
{
	return bb_first_end_after(r, n, sector);
}

/* The same over the table; the caller holds bb->lock. */
static inline uint32_t __bb_first_end_after(const struct blk_badblocks *bb, uint32_t n,
                                            uint64_t sector)
{
	return bb_first_end_after(bb->ranges, n, sector);
}

/* First index whose range starts at or after @sector (n if none). */
static uint32_t __bb_first_start_from(const struct blk_badblocks *bb, uint32_t n, uint64_t sector)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (bb->ranges[mid].sector >= sector)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int __bb_reserve(struct blk_badblocks *bb, uint64_t need)
{
	struct blk_range *ranges;
	uint64_t cap;

	if (need <= bb->cap)
		return 0;
	if (unlikely(need > UINT32_MAX))
		return -ENOMEM;
	cap = bb->cap ? bb->cap : BB_MIN_CAP;
	while (cap < need)
		cap *= 2;
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	ranges = realloc(bb->ranges, cap * sizeof(*ranges));
	if (unlikely(!ranges))
		return -ENOMEM;
	bb->ranges = ranges;
	bb->cap = (uint32_t)cap;
	return 0;
}

/* --- the summary (lock-free lookups) ---------------------------------------------- */

#define BB_SUMMARY_CHUNKS    65536u
#define BB_SUMMARY_MIN_SHIFT 15u /* 16 MiB chunks at least */
#define BB_SUMMARY_SCAN_MAX  64u /* a query over more chunks takes the lock */

static inline void bb_summary_bit(struct blk_badblocks *bb, uint64_t c, bool set)
{
	uint64_t bit = 1ull << (c % 64);

	if (set)
		atomic_fetch_or_explicit(&bb->summary[c / 64], bit, memory_order_release);
	else
		atomic_fetch_and_explicit(&bb->summary[c / 64], ~bit, memory_order_release);
}

/*
 * Chunks [*c0, *c1] of [sector, end), clipped to the summary: its last chunk
 * stands for everything past the size it was made for (a device that grew
 * while open, blk_dev_resize).
 */
static inline void bb_summary_span(const struct blk_badblocks *bb, uint64_t sector, uint64_t end,
                                   uint64_t *c0, uint64_t *c1)
{
	*c0 = sector >> bb->summary_shift;
	*c1 = (end - 1) >> bb->summary_shift;
	if (*c1 >= bb->summary_chunks)
		*c1 = bb->summary_chunks - 1;
	if (*c0 > *c1)
		*c0 = *c1;
}

/* Before [sector, end) goes in (bb->lock held for writing). */
static void __bb_summary_mark(struct blk_badblocks *bb, uint64_t sector, uint64_t end)
{
	uint64_t c, c0, c1;

	if (!bb->summary || end <= sector)
		return;
	bb_summary_span(bb, sector, end, &c0, &c1);
	for (c = c0; c <= c1; c++)
		bb_summary_bit(bb, c, true);
}

/* After ranges of [sector, end) went: clear the chunks no range touches any more. */
static void __bb_summary_refresh(struct blk_badblocks *bb, uint64_t sector, uint64_t end)
{
	uint32_t n = __bb_nr(bb);
	uint64_t c, c0, c1;

	if (!bb->summary || end <= sector)
		return;
	bb_summary_span(bb, sector, end, &c0, &c1);
	for (c = c0; c <= c1; c++) {
		uint64_t cs = c << bb->summary_shift, ce = cs + (1ull << bb->summary_shift);

		if (c == bb->summary_chunks - 1)
			ce = UINT64_MAX; /* the last chunk: to the end */
		uint32_t i = __bb_first_end_after(bb, n, cs);

		if (i == n || bb->ranges[i].sector >= ce)
			bb_summary_bit(bb, c, false);
	}
}

/* Every bit from the ranges (bb->lock held for writing). */
static void __bb_summary_rebuild(struct blk_badblocks *bb)
{
	uint32_t n = __bb_nr(bb), i;

	if (!bb->summary)
		return;
	for (uint64_t w = 0; w < (bb->summary_chunks + 63) / 64; w++)
		atomic_store_explicit(&bb->summary[w], 0, memory_order_relaxed);
	for (i = 0; i < n; i++)
		__bb_summary_mark(bb, bb->ranges[i].sector, bb_end(&bb->ranges[i]));
}

/* May [sector, end) meet poison?  No lock: false only when no chunk of it holds any. */
static inline bool bb_summary_may_hit(struct blk_badblocks *bb, uint64_t sector, uint64_t end)
{
	uint64_t c, c0, c1;

	if (!bb->summary)
		return true;
	bb_summary_span(bb, sector, end, &c0, &c1);
	if (c1 - c0 >= BB_SUMMARY_SCAN_MAX)
		return true;
	for (c = c0; c <= c1; c++)
		if (atomic_load_explicit(&bb->summary[c / 64], memory_order_acquire) &
		    (1ull << (c % 64)))
			return true;
	return false;
}

int blk_bb_set_size(struct blk_badblocks *bb, uint64_t nr_sectors)
{
	uint32_t shift = BB_SUMMARY_MIN_SHIFT;
	_Atomic uint64_t *s;
	uint64_t chunks;

	while ((nr_sectors >> shift) >= BB_SUMMARY_CHUNKS)
		shift++;
	chunks = (nr_sectors >> shift) + 1;
	s = calloc((chunks + 63) / 64, sizeof(*s));
	if (unlikely(!s))
		return -ENOMEM;
	pthread_rwlock_wrlock(&bb->lock);
	free(bb->summary);
	bb->summary = s;
	bb->summary_shift = shift;
	bb->summary_chunks = chunks;
	__bb_summary_rebuild(bb);
	pthread_rwlock_unlock(&bb->lock);
	return 0;
}

void blk_bb_init(struct blk_badblocks *bb)
{
	pthread_rwlockattr_t attr;

	atomic_init(&bb->nr, 0);
	atomic_init(&bb->lo, UINT64_MAX);
	atomic_init(&bb->hi, 0);
	bb->ranges = NULL;
	bb->cap = 0;
	bb->unit = 1;
	bb->summary = NULL;
	bb->summary_shift = 0;
	bb->summary_chunks = 0;
	/*
	 * Poison changes are rare and must not wait behind a steady stream of
	 * lookups from every submitting thread: prefer writers.
	 */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&bb->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
}

void blk_bb_destroy(struct blk_badblocks *bb)
{
	pthread_rwlock_destroy(&bb->lock);
	free(bb->ranges);
	bb->ranges = NULL;
	bb->cap = 0;
	free(bb->summary);
	bb->summary = NULL;
	atomic_store_explicit(&bb->nr, 0, memory_order_release);
}

/* Widen [*sector, *end) to whole units of poison (an end that would overflow saturates). */
static inline void bb_round(uint32_t unit, uint64_t *sector, uint64_t *end)
{
	uint64_t m = (uint64_t)unit - 1;

	if (likely(unit <= 1))
		return;
	*sector &= ~m;
	*end = *end > UINT64_MAX - m ? UINT64_MAX : (*end + m) & ~m;
}

/*
 * Set the unit of poison to @unit sectors (a power of two) and widen the
 * ranges already in the table to it.  Called at open, before any I/O.
 */
void blk_bb_set_unit(struct blk_badblocks *bb, uint32_t unit)
{
	uint32_t n, i, out = 0;

	if (!unit || (unit & (unit - 1)))
		return;
	pthread_rwlock_wrlock(&bb->lock);
	bb->unit = unit;
	n = __bb_nr(bb);
	for (i = 0; i < n; i++) {
		uint64_t s = bb->ranges[i].sector, e = bb_end(&bb->ranges[i]);

		bb_round(unit, &s, &e);
		if (out && bb_end(&bb->ranges[out - 1]) >= s) {
			if (e > bb_end(&bb->ranges[out - 1]))
				bb->ranges[out - 1].nr = e - bb->ranges[out - 1].sector;
			continue;
		}
		bb->ranges[out].sector = s;
		bb->ranges[out].nr = e - s;
		out++;
	}
	if (n)
		__bb_publish(bb, out);
	__bb_summary_rebuild(bb);
	pthread_rwlock_unlock(&bb->lock);
}

int blk_bb_add(struct blk_badblocks *bb, uint64_t sector, uint64_t nr)
{
	uint64_t end = sector + nr;
	uint32_t n, i, j;
	int ret = 0;

	if (unlikely(nr == 0))
		return 0;
	if (unlikely(end < sector))
		return -EINVAL;

	pthread_rwlock_wrlock(&bb->lock);
	bb_round(bb->unit, &sector, &end);
	nr = end - sector;
	__bb_summary_mark(bb, sector, end); /* before the range: a lock-free lookup must see it */
	n = __bb_nr(bb);
	/* ranges [i, j) overlap or touch [sector, end): they all merge into one */
	i = sector ? __bb_first_end_after(bb, n, sector - 1) : 0;
	j = end == UINT64_MAX ? n : __bb_first_start_from(bb, n, end + 1);
	if (i == j) {
		ret = __bb_reserve(bb, (uint64_t)n + 1);
		if (unlikely(ret))
			goto out_unlock;
		memmove(&bb->ranges[i + 1], &bb->ranges[i], (n - i) * sizeof(bb->ranges[0]));
		bb->ranges[i].sector = sector;
		bb->ranges[i].nr = nr;
		__bb_publish(bb, n + 1);
		goto out_unlock;
	}
	if (bb->ranges[i].sector < sector)
		sector = bb->ranges[i].sector;
	if (bb_end(&bb->ranges[j - 1]) > end)
		end = bb_end(&bb->ranges[j - 1]);
	bb->ranges[i].sector = sector;
	bb->ranges[i].nr = end - sector;
	if (j - i > 1)
		memmove(&bb->ranges[i + 1], &bb->ranges[j], (n - j) * sizeof(bb->ranges[0]));
	/* always: a range that grew at either end of the table moves lo or hi */
	__bb_publish(bb, n - (j - i - 1));
out_unlock:
	pthread_rwlock_unlock(&bb->lock);
	return ret;
}

int blk_bb_clear(struct blk_badblocks *bb, uint64_t sector, uint64_t nr)
{
	uint64_t end = sector + nr, old_end;
	uint32_t n, i, j, del_lo, del_hi;
	int ret = 0;

	if (unlikely(nr == 0))
		return 0;
	if (unlikely(end < sector))
		return -EINVAL;

	pthread_rwlock_wrlock(&bb->lock);
	bb_round(bb->unit, &sector, &end);
	n = __bb_nr(bb);
	/* ranges [i, j) intersect [sector, end) */
	i = __bb_first_end_after(bb, n, sector);
	j = __bb_first_start_from(bb, n, end);
	if (i >= j)
		goto out_unlock;

	old_end = bb_end(&bb->ranges[i]);
	if (j - i == 1 && bb->ranges[i].sector < sector && old_end > end) {
		/* a hole in the middle of one range: split it in two */
		ret = __bb_reserve(bb, (uint64_t)n + 1);
		if (unlikely(ret))
			goto out_unlock;
		memmove(&bb->ranges[i + 2], &bb->ranges[i + 1],
		        (n - i - 1) * sizeof(bb->ranges[0]));
		bb->ranges[i + 1].sector = end;
		bb->ranges[i + 1].nr = old_end - end;
		bb->ranges[i].nr = sector - bb->ranges[i].sector;
		__bb_publish(bb, n + 1);
		goto out_unlock;
	}

	/* trim the edge ranges, drop those entirely covered */
	del_lo = i;
	del_hi = j;
	if (bb->ranges[i].sector < sector) {
		bb->ranges[i].nr = sector - bb->ranges[i].sector;
		del_lo = i + 1;
	}
	old_end = bb_end(&bb->ranges[j - 1]);
	if (old_end > end) {
		bb->ranges[j - 1].sector = end;
		bb->ranges[j - 1].nr = old_end - end;
		del_hi = j - 1;
	}
	if (del_hi > del_lo) {
		memmove(&bb->ranges[del_lo], &bb->ranges[del_hi],
		        (n - del_hi) * sizeof(bb->ranges[0]));
		__bb_publish(bb, n - (del_hi - del_lo));
	}
out_unlock:
	__bb_summary_refresh(bb, sector, end);
	pthread_rwlock_unlock(&bb->lock);
	return ret;
}

/* End of [sector, sector + nr), saturated: queries past the last sector are clipped. */
static inline uint64_t bb_query_end(uint64_t sector, uint64_t nr)
{
	uint64_t end = sector + nr;

	return end < sector ? UINT64_MAX : end;
}

bool blk_bb_check(struct blk_badblocks *bb, uint64_t sector, uint64_t nr, uint64_t *first)
{
	uint64_t end = bb_query_end(sector, nr);
	bool hit;
	uint32_t i;

	if (nr == 0 || blk_bb_empty(bb))
		return false;
	/* Poison far from the I/O (the common case once a table is non-empty): no lock. */
	if (end <= atomic_load_explicit(&bb->lo, memory_order_relaxed) ||
	    sector >= atomic_load_explicit(&bb->hi, memory_order_relaxed) ||
	    !bb_summary_may_hit(bb, sector, end))
		return false;

	pthread_rwlock_rdlock(&bb->lock);
	i = __bb_first_end_after(bb, __bb_nr(bb), sector);
	hit = i < __bb_nr(bb) && bb->ranges[i].sector < end;
	if (hit && first)
		*first = bb->ranges[i].sector > sector ? bb->ranges[i].sector : sector;
	pthread_rwlock_unlock(&bb->lock);
	return hit;
}

unsigned blk_bb_lookup(struct blk_badblocks *bb, uint64_t sector, uint64_t nr,
                       struct blk_range *out, unsigned max, unsigned *total)
{
	uint64_t end = bb_query_end(sector, nr);
	unsigned count = 0, all = 0;
	uint32_t n, i, j;

	if (nr == 0 || blk_bb_empty(bb))
		goto out;

	pthread_rwlock_rdlock(&bb->lock);
	n = __bb_nr(bb);
	i = __bb_first_end_after(bb, n, sector);
	j = __bb_first_start_from(bb, n, end);
	all = j > i ? j - i : 0;
	for (; i < j && count < max; i++, count++) {
		uint64_t s = bb->ranges[i].sector, e = bb_end(&bb->ranges[i]);

		if (s < sector)
			s = sector;
		if (e > end)
			e = end;
		out[count].sector = s;
		out[count].nr = e - s;
	}
	pthread_rwlock_unlock(&bb->lock);
out:
	if (total)
		*total = all;
	return count;
}

int blk_bb_snapshot(struct blk_badblocks *bb, struct blk_range **out)
{
	struct blk_range *copy = NULL;
	uint32_t n;

	pthread_rwlock_rdlock(&bb->lock);
	n = __bb_nr(bb);
	if (unlikely(n > INT32_MAX)) {
		pthread_rwlock_unlock(&bb->lock);
		return -EOVERFLOW;
	}
	if (n) {
		copy = malloc(n * sizeof(*copy));
		if (unlikely(!copy)) {
			pthread_rwlock_unlock(&bb->lock);
			return -ENOMEM;
		}
		memcpy(copy, bb->ranges, n * sizeof(*copy));
	}
	pthread_rwlock_unlock(&bb->lock);
	*out = copy;
	return (int)n;
}

/* Append @r to out[0, *n), coalescing it with the last range when they overlap or touch. */
static void bb_push_merged(struct blk_range *out, uint32_t *n, const struct blk_range *r)
{
	struct blk_range *last = *n ? &out[*n - 1] : NULL;

	if (last && r->sector <= bb_end(last)) {
		if (bb_end(r) > bb_end(last))
			last->nr = bb_end(r) - last->sector;
		return;
	}
	out[(*n)++] = *r;
}

/*
 * Add @nadd ranges, sorted by sector (they may overlap), in one pass: the new
 * table is built beside the old one and swapped in, so that the table changes
 * all at once or not at all.
 */
static int bb_add_sorted(struct blk_badblocks *bb, const struct blk_range *add, size_t nadd)
{
	struct blk_range *merged;
	uint32_t n, a = 0, count = 0;
	uint64_t want;
	size_t b = 0;

	if (!nadd)
		return 0;
	pthread_rwlock_wrlock(&bb->lock);
	n = __bb_nr(bb);
	want = (uint64_t)n + nadd;
	if (unlikely(want > UINT32_MAX)) {
		pthread_rwlock_unlock(&bb->lock);
		return -ENOMEM;
	}
	if (want < BB_MIN_CAP)
		want = BB_MIN_CAP;
	merged = malloc(want * sizeof(*merged));
	if (unlikely(!merged)) {
		pthread_rwlock_unlock(&bb->lock);
		return -ENOMEM;
	}
	for (b = 0; b < nadd; b++) /* before the ranges: a lock-free lookup must see them */
		__bb_summary_mark(bb, add[b].sector, bb_end(&add[b]));
	b = 0;
	while (a < n || b < nadd) {
		if (b == nadd || (a < n && bb->ranges[a].sector <= add[b].sector))
			bb_push_merged(merged, &count, &bb->ranges[a++]);
		else
			bb_push_merged(merged, &count, &add[b++]);
	}
	free(bb->ranges);
	bb->ranges = merged;
	bb->cap = (uint32_t)want;
	__bb_publish(bb, count);
	pthread_rwlock_unlock(&bb->lock);
	return 0;
}

static int bb_range_cmp(const void *pa, const void *pb)
{
	const struct blk_range *a = pa, *b = pb;

	if (a->sector != b->sector)
		return a->sector < b->sector ? -1 : 1;
	return 0;
}

static inline bool bb_isblank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static inline bool bb_isdigit(char c)
{
	return c >= '0' && c <= '9';
}

/* Parse a decimal number at *p.  Returns false when it does not fit in 64 bits. */
static bool bb_parse_u64(const char **p, const char *end, uint64_t *val)
{
	uint64_t v = 0;
	const char *s = *p;

	for (; s < end && bb_isdigit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*p = s;
	*val = v;
	return true;
}

/* Quote the start of @s (at most BB_GARBAGE_MAX bytes, without trailing blanks), printable. */
static void bb_quote(char *dst, size_t dstlen, const char *s, const char *end)
{
	size_t n = 0;

	while (end > s && bb_isblank(end[-1]))
		end--;
	for (; s < end && n + 4 < dstlen && n < BB_GARBAGE_MAX; s++)
		dst[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	if (s < end && n + 4 <= dstlen) {
		memcpy(&dst[n], "...", 3);
		n += 3;
	}
	dst[n] = '\0';
}

/*
 * Parse one line (without its newline).  Returns 0 with *have set when the
 * line holds a range, 0 with *have clear for blanks and comments, or -EINVAL
 * with the reason in @msg.
 */
static int bb_parse_line(const char *s, size_t len, uint64_t nr_sectors, struct blk_range *r,
                         bool *have, char *msg, size_t msglen)
{
	const char *end = s + len;
	char quoted[BB_GARBAGE_MAX + 8];

	*have = false;
	while (s < end && bb_isblank(*s))
		s++;
	if (s == end || *s == '#')
		return 0;

	if (!bb_isdigit(*s))
		goto expected;
	if (!bb_parse_u64(&s, end, &r->sector))
		goto range;
	if (s == end || !bb_isblank(*s))
		goto expected;
	while (s < end && bb_isblank(*s))
		s++;
	if (s == end || !bb_isdigit(*s))
		goto expected;
	if (!bb_parse_u64(&s, end, &r->nr))
		goto range;
	while (s < end && bb_isblank(*s))
		s++;
	if (s < end) {
		bb_quote(quoted, sizeof(quoted), s, end);
		snprintf(msg, msglen, "trailing garbage '%s'", quoted);
		return -EINVAL;
	}

	if (r->nr == 0) {
		snprintf(msg, msglen, "count must be positive");
		return -EINVAL;
	}
	if (r->sector + r->nr < r->sector) {
		snprintf(msg, msglen, "number out of range: %" PRIu64 "+%" PRIu64 " wraps around",
		         r->sector, r->nr);
		return -EINVAL;
	}
	if (nr_sectors && r->sector + r->nr > nr_sectors) {
		snprintf(msg, msglen,
		         "range %" PRIu64 "+%" PRIu64 " ends beyond the device (%" PRIu64
		         " sectors)",
		         r->sector, r->nr, nr_sectors);
		return -EINVAL;
	}
	*have = true;
	return 0;

expected:
	snprintf(msg, msglen, "expected 'SECTOR COUNT'");
	return -EINVAL;
range:
	snprintf(msg, msglen, "number out of range");
	return -EINVAL;
}

int blk_bb_file_load(struct blk_badblocks *bb, const char *path, uint64_t nr_sectors, char *err,
                     size_t errlen)
{
	struct blk_range *vec = NULL, r, *grown;
	size_t nvec = 0, capvec = 0, linecap = 0, lineno = 0;
	char *line = NULL, msg[160];
	struct stat st;
	ssize_t len;
	bool have;
	FILE *f;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* no file: no emulated poison */
		ret = -errno;
		blk_err(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (unlikely(fstat(fd, &st) < 0)) {
		ret = -errno;
		blk_err(err, errlen, "%s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	if (unlikely(S_ISDIR(st.st_mode))) {
		blk_err(err, errlen, "%s: %s", path, strerror(EISDIR));
		close(fd);
		return -EISDIR;
	}
	f = fdopen(fd, "r");
	if (unlikely(!f)) {
		ret = -errno;
		blk_err(err, errlen, "%s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}

	for (;;) {
		errno = 0;
		len = getline(&line, &linecap, f);
		if (len < 0) {
			if (unlikely(!feof(f))) {
				ret = errno ? -errno : -EIO;
				blk_err(err, errlen, "%s:%zu: %s", path, lineno + 1,
				        strerror(-ret));
				goto out;
			}
			break;
		}
		lineno++;
		if (len && line[len - 1] == '\n')
			len--;
		ret = bb_parse_line(line, (size_t)len, nr_sectors, &r, &have, msg, sizeof(msg));
		if (unlikely(ret)) {
			blk_err(err, errlen, "%s:%zu: %s", path, lineno, msg);
			goto out;
		}
		if (!have)
			continue;
		if (nvec == capvec) {
			capvec = capvec ? capvec * 2 : 64;
			grown = realloc(vec, capvec * sizeof(*vec));
			if (unlikely(!grown)) {
				ret = -ENOMEM;
				blk_err(err, errlen, "%s:%zu: %s", path, lineno, strerror(ENOMEM));
				goto out;
			}
			vec = grown;
		}
		if (bb->unit > 1) {
			uint64_t e = bb_end(&r);

			bb_round(bb->unit, &r.sector, &e);
			r.nr = e - r.sector;
		}
		vec[nvec++] = r;
	}

	if (nvec) {
		qsort(vec, nvec, sizeof(*vec), bb_range_cmp);
		ret = bb_add_sorted(bb, vec, nvec);
		if (unlikely(ret))
			blk_err(err, errlen, "%s: %s", path, strerror(-ret));
	}
out:
	free(line);
	free(vec);
	fclose(f);
	return ret;
}

static int bb_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int bb_fsync_parent(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (unlikely(!copy))
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (unlikely(fd < 0))
		return -errno;
	/* EINVAL: the file system cannot sync directories; the rename is all it offers */
	if (unlikely(fsync(fd) < 0 && errno != EINVAL))
		ret = -errno;
	close(fd);
	return ret;
}

int blk_bb_file_store(struct blk_badblocks *bb, const char *path)
{
	size_t len, size, tmplen = strlen(path) + 32;
	struct stat st;
	char *buf, *tmp;
	mode_t mode = 0644;
	bool keep_mode;
	uint32_t n, i;
	int fd, ret;

	pthread_rwlock_rdlock(&bb->lock);
	n = __bb_nr(bb);
	size = sizeof(BB_FILE_HEADER) + (size_t)n * BB_LINE_MAX;
	buf = malloc(size);
	if (unlikely(!buf)) {
		pthread_rwlock_unlock(&bb->lock);
		return -ENOMEM;
	}
	len = sizeof(BB_FILE_HEADER) - 1;
	memcpy(buf, BB_FILE_HEADER, len);
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, size - len, "%" PRIu64 " %" PRIu64 "\n",
		                        bb->ranges[i].sector, bb->ranges[i].nr);
	pthread_rwlock_unlock(&bb->lock);

	tmp = malloc(tmplen);
	if (unlikely(!tmp)) {
		ret = -ENOMEM;
		goto out_free_buf;
	}
	snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
	/* the replacement keeps the permissions of the file it replaces */
	keep_mode = stat(path, &st) == 0 && S_ISREG(st.st_mode);
	if (keep_mode)
		mode = st.st_mode & 07777;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (unlikely(fd < 0)) {
		ret = -errno;
		goto out_free_tmp;
	}
	if (keep_mode && unlikely(fchmod(fd, mode) < 0)) {
		ret = -errno;
		goto out_close;
	}
	ret = bb_write_all(fd, buf, len);
	if (unlikely(ret))
		goto out_close;
	if (unlikely(fsync(fd) < 0)) {
		ret = -errno;
		goto out_close;
	}
	if (unlikely(close(fd) < 0)) {
		ret = -errno;
		goto out_unlink;
	}
	if (unlikely(rename(tmp, path) < 0)) {
		ret = -errno;
		goto out_unlink;
	}
	ret = bb_fsync_parent(path);
	goto out_free_tmp;

out_close:
	close(fd);
out_unlink:
	unlink(tmp);
out_free_tmp:
	free(tmp);
out_free_buf:
	free(buf);
	return ret;
}
