/* SPDX-License-Identifier: MIT */
/*
 * mendblk-bench: drive the block engine as hard as it goes and print IOPS,
 * CPU nanoseconds per I/O and IOPS per core.
 *
 * Each thread keeps --depth bios in flight, submitting them --batch at a time
 * under a plug (so tags come in one batch allocation and the backend sees one
 * dispatch per batch), and reaps completions itself on async backends.  Knobs
 * turn merging, the scheduler, a QoS policy and a non-empty poison table on
 * and off, so each feature's cost on the fast path can be measured.
 * --baseline memcpy replaces the engine with a plain memcpy loop over the same
 * pmem mapping: the ceiling the pmem backend is compared with.
 *
 * The default run is the ideal case: each thread its own queue, one I/O
 * size, an empty poison table.  --profile fs looks like the filesystem
 * instead: every thread on one shared hardware queue (as the daemon's FUSE
 * workers are today), a poison table of 1024 entries spread over the I/O span
 * (so every batch is looked up in it; the I/O itself steers clear of them),
 * mixed sizes (--bs-mix: 4 KiB to 128 KiB, mostly 4 KiB), depth 32 and
 * batches of 8.  --poison-entries N and --bs-mix also work alone.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mendfs/blk.h"

#ifndef BLK_POISON_CHECKS
#define BLK_POISON_CHECKS 1
#endif

enum bench_rw { RW_RANDREAD, RW_RANDWRITE, RW_READ, RW_WRITE };

struct bench_opts {
	enum blk_backend_type backend;
	const char *path;
	enum bench_rw rw;
	unsigned bs, depth, batch, threads, queues;
	double seconds;
	uint64_t ios_per_thread; /* fixed work instead of a duration (for callgrind) */
	uint64_t size;           /* null device size / I/O span */
	bool json, nomerge, qos, poison, pin, memcpy_baseline, completion_thread;
	bool bs_mix;             /* sizes from mix_units[] (in units of bs) per I/O */
	unsigned poison_entries; /* poisoned blocks spread over the span, avoided by the I/O */
	uint64_t stride; /* with poison_entries: block stride - 1 of every stride is poisoned */
	const char *sched;
};

/* --bs-mix: I/O sizes in units of --bs, drawn uniformly (4 KiB units: 60 % 4 KiB, ...). */
static const unsigned mix_units[20] = {1, 1, 1, 1, 1, 1, 1, 1,  1,  1,
                                       1, 1, 2, 2, 2, 4, 4, 16, 16, 32};
#define MIX_MAX 32u

struct bench_thread;

struct bench_io {
	struct blk_bio bio;
	struct bench_thread *t;
	struct bench_io *next_free;
};

struct bench_thread {
	pthread_t tid;
	unsigned index;
	struct blk_dev *dev;
	const struct bench_opts *o;
	struct bench_io *ios;
	struct bench_io *free_list;
	struct bench_io *_Atomic returned; /* completion-thread mode: pushed by end_io */
	char *buf;
	uint64_t nr_blocks;
	uint64_t rng;
	uint64_t seq_next;
	_Atomic uint64_t done;
	_Atomic unsigned inflight;
	uint64_t errors;
	char *map; /* memcpy baseline */
	int err;
} __attribute__((aligned(64)));

static _Atomic int bench_stop;
static _Atomic unsigned bench_ready;
static _Atomic uint64_t qos_inflight;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

static inline uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The first block of the next I/O of @units blocks; never a poisoned block (--poison-entries). */
static inline uint64_t next_block(struct bench_thread *t, unsigned units)
{
	uint64_t stride = t->o->stride, b;

	if (t->o->rw == RW_RANDREAD || t->o->rw == RW_RANDWRITE) {
		if (!stride)
			return xorshift(&t->rng) % (t->nr_blocks - units + 1);
		/* inside one stride, below its last (poisoned) block */
		b = xorshift(&t->rng);
		return (b % (t->nr_blocks / stride)) * stride + (b >> 32) % (stride - units);
	}
	if (t->seq_next + units > t->nr_blocks)
		t->seq_next = 0;
	if (stride && (t->seq_next % stride) + units > stride - 1)
		t->seq_next += stride - t->seq_next % stride;
	if (t->seq_next + units > t->nr_blocks)
		t->seq_next = 0;
	b = t->seq_next;
	t->seq_next += units;
	return b;
}

/* A QoS policy that only counts what is in flight: the cost of the hook itself. */
static void qos_throttle(void *priv, struct blk_bio *bio)
{
	(void)priv, (void)bio;
	atomic_fetch_add_explicit(&qos_inflight, 1, memory_order_relaxed);
}

static void qos_done(void *priv, struct blk_bio *bio)
{
	(void)priv, (void)bio;
	atomic_fetch_sub_explicit(&qos_inflight, 1, memory_order_relaxed);
}

static const struct blk_qos_ops bench_qos = {qos_throttle, qos_done};

static void bench_end_io(struct blk_bio *bio)
{
	struct bench_io *io = (struct bench_io *)bio;
	struct bench_thread *t = io->t;

	if (bio->status)
		t->errors++;
	if (t->o->completion_thread) {
		/* completions arrive on another thread: a single-consumer stack */
		struct bench_io *head = atomic_load_explicit(&t->returned, memory_order_relaxed);

		atomic_fetch_add_explicit(&t->done, 1, memory_order_relaxed);
		do
			io->next_free = head;
		while (!atomic_compare_exchange_weak_explicit(
		        &t->returned, &head, io, memory_order_release, memory_order_relaxed));
		atomic_fetch_sub_explicit(&t->inflight, 1, memory_order_release);
		return;
	}
	atomic_store_explicit(&t->done, atomic_load_explicit(&t->done, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
	atomic_store_explicit(&t->inflight,
	                      atomic_load_explicit(&t->inflight, memory_order_relaxed) - 1,
	                      memory_order_relaxed);
	io->next_free = t->free_list;
	t->free_list = io;
}

/* The CPUs the process was started on (taskset): threads are pinned inside them. */
static cpu_set_t bench_cpus;

/*
 * Pin thread @index to the index-th CPU of bench_cpus (round robin), so that
 * `taskset -c 1 mendblk-bench` runs on CPU 1 as `taskset -c 1 fio` does.
 * Threads the kernel creates for ours (io-wq workers) inherit the pin.
 */
static void pin_thread(unsigned index)
{
	unsigned n = (unsigned)CPU_COUNT(&bench_cpus), cpu, seen = 0;
	cpu_set_t set;

	if (!n)
		return;
	index %= n;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &bench_cpus))
			continue;
		if (seen++ == index)
			break;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static bool thread_should_stop(struct bench_thread *t)
{
	if (t->o->ios_per_thread)
		return atomic_load_explicit(&t->done, memory_order_relaxed) >= t->o->ios_per_thread;
	return atomic_load_explicit(&bench_stop, memory_order_relaxed);
}

static void *memcpy_thread(void *arg)
{
	struct bench_thread *t = arg;
	const struct bench_opts *o = t->o;
	bool write = o->rw == RW_RANDWRITE || o->rw == RW_WRITE;
	uint64_t n = 0;

	if (o->pin)
		pin_thread(t->index);
	atomic_fetch_add(&bench_ready, 1);
	while (!thread_should_stop(t)) {
		for (unsigned i = 0; i < o->batch; i++) {
			char *p = t->map + next_block(t, 1) * o->bs;
			char *b = t->buf + (n++ % o->depth) * o->bs;

			if (write)
				memcpy(p, b, o->bs);
			else
				memcpy(b, p, o->bs);
		}
		atomic_store_explicit(&t->done, n, memory_order_relaxed);
	}
	return NULL;
}

static void *bench_thread_fn(void *arg)
{
	struct bench_thread *t = arg;
	const struct bench_opts *o = t->o;
	enum blk_op op = (o->rw == RW_RANDWRITE || o->rw == RW_WRITE) ? BLK_OP_WRITE : BLK_OP_READ;
	unsigned sectors_per_block = o->bs >> BLK_SECTOR_SHIFT;
	bool async = o->backend == BLK_BACKEND_URING;

	if (o->pin)
		pin_thread(t->index);
	for (unsigned i = 0; i < o->depth; i++) {
		struct bench_io *io = &t->ios[i];

		blk_bio_init(&io->bio, op, 0,
		             t->buf + (size_t)i * o->bs * (o->bs_mix ? MIX_MAX : 1), o->bs,
		             bench_end_io, NULL);
		io->t = t;
		io->next_free = t->free_list;
		t->free_list = io;
	}
	atomic_fetch_add(&bench_ready, 1);
	while (!thread_should_stop(t)) {
		unsigned room = o->depth - atomic_load_explicit(&t->inflight, memory_order_acquire);
		unsigned n = room < o->batch ? room : o->batch;
		struct blk_plug plug;

		if (n) {
			blk_start_plug_nr_ios(&plug, (unsigned short)n);
			for (unsigned i = 0; i < n; i++) {
				struct bench_io *io;
				unsigned units;

				if (!t->free_list)
					t->free_list = atomic_exchange_explicit(
					        &t->returned, NULL, memory_order_acquire);
				if (!t->free_list) {
					n = i;
					break;
				}
				io = t->free_list;
				t->free_list = io->next_free;
				units = o->bs_mix ? mix_units[xorshift(&t->rng) % 20] : 1;
				io->bio.sector = next_block(t, units) * sectors_per_block;
				io->bio.iov = &io->bio.inline_iov;
				io->bio.nr_segs = 1;
				io->bio.len = o->bs * units;
				io->bio.inline_iov.iov_len = io->bio.len;
				io->bio.flags = 0;
				atomic_fetch_add_explicit(&t->inflight, 1, memory_order_relaxed);
				blk_submit_bio(t->dev, &io->bio);
			}
			blk_finish_plug(&plug);
		}
		if (async && !o->completion_thread) {
			unsigned inflight =
			        atomic_load_explicit(&t->inflight, memory_order_relaxed);
			int ret = blk_poll(t->dev, inflight + o->batch > o->depth ? 1 : 0);

			if (ret < 0) {
				t->err = ret;
				break;
			}
		} else if (o->completion_thread) {
			while (!t->free_list &&
			       !atomic_load_explicit(&t->returned, memory_order_acquire) &&
			       !thread_should_stop(t))
				sched_yield();
		}
	}
	/* drain */
	while (atomic_load(&t->inflight)) {
		if (async && !o->completion_thread)
			blk_poll(t->dev, 1);
		else
			sched_yield();
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: mendblk-bench --backend null|pmem|uring [--path P] "
	        "[--rw randread|randwrite|read|write]\n"
	        "         [--bs N] [--depth N] [--batch N] [--threads N] [--seconds S] [--json]\n"
	        "         [--queues N] [--size BYTES] [--nomerge] [--sched deadline] [--qos]\n"
	        "         [--poison] [--no-pin] [--ios N] [--completion-thread] "
	        "[--baseline memcpy]\n"
	        "         [--poison-entries N] [--bs-mix] [--profile ideal|fs]\n");
}

static uint64_t parse_size(const char *s, bool *ok)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	*ok = end != s;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10, end++;
		break;
	case 'm':
	case 'M':
		v <<= 20, end++;
		break;
	case 'g':
	case 'G':
		v <<= 30, end++;
		break;
	case 't':
	case 'T':
		v <<= 40, end++;
		break;
	}
	if (*end)
		*ok = false;
	return v;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	static const struct option lopts[] = {
	        {"backend", required_argument, NULL, 'b'},
	        {"path", required_argument, NULL, 'p'},
	        {"rw", required_argument, NULL, 'r'},
	        {"bs", required_argument, NULL, 's'},
	        {"depth", required_argument, NULL, 'd'},
	        {"batch", required_argument, NULL, 'B'},
	        {"threads", required_argument, NULL, 't'},
	        {"seconds", required_argument, NULL, 'S'},
	        {"json", no_argument, NULL, 'j'},
	        {"queues", required_argument, NULL, 'q'},
	        {"size", required_argument, NULL, 'z'},
	        {"nomerge", no_argument, NULL, 'M'},
	        {"sched", required_argument, NULL, 'e'},
	        {"qos", no_argument, NULL, 'Q'},
	        {"poison", no_argument, NULL, 'P'},
	        {"no-pin", no_argument, NULL, 'N'},
	        {"ios", required_argument, NULL, 'i'},
	        {"completion-thread", no_argument, NULL, 'C'},
	        {"baseline", required_argument, NULL, 'L'},
	        {"poison-entries", required_argument, NULL, 'E'},
	        {"bs-mix", no_argument, NULL, 'X'},
	        {"profile", required_argument, NULL, 'F'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	bool ok = true, has_backend = false;
	int c;

	*o = (struct bench_opts){.rw = RW_RANDREAD,
	                         .bs = 4096,
	                         .depth = 128,
	                         .batch = 32,
	                         .threads = 1,
	                         .seconds = 5,
	                         .pin = true};
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			has_backend = true;
			if (!strcmp(optarg, "null"))
				o->backend = BLK_BACKEND_NULL;
			else if (!strcmp(optarg, "pmem"))
				o->backend = BLK_BACKEND_PMEM;
			else if (!strcmp(optarg, "uring"))
				o->backend = BLK_BACKEND_URING;
			else
				ok = false;
			break;
		case 'p':
			o->path = optarg;
			break;
		case 'r':
			if (!strcmp(optarg, "randread"))
				o->rw = RW_RANDREAD;
			else if (!strcmp(optarg, "randwrite"))
				o->rw = RW_RANDWRITE;
			else if (!strcmp(optarg, "read"))
				o->rw = RW_READ;
			else if (!strcmp(optarg, "write"))
				o->rw = RW_WRITE;
			else
				ok = false;
			break;
		case 's':
			o->bs = (unsigned)parse_size(optarg, &ok);
			break;
		case 'd':
			o->depth = (unsigned)atoi(optarg);
			break;
		case 'B':
			o->batch = (unsigned)atoi(optarg);
			break;
		case 't':
			o->threads = (unsigned)atoi(optarg);
			break;
		case 'S':
			o->seconds = atof(optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->queues = (unsigned)atoi(optarg);
			break;
		case 'z':
			o->size = parse_size(optarg, &ok);
			break;
		case 'M':
			o->nomerge = true;
			break;
		case 'e':
			o->sched = optarg;
			break;
		case 'Q':
			o->qos = true;
			break;
		case 'P':
			o->poison = true;
			break;
		case 'N':
			o->pin = false;
			break;
		case 'i':
			o->ios_per_thread = strtoull(optarg, NULL, 10);
			break;
		case 'C':
			o->completion_thread = true;
			break;
		case 'L':
			if (strcmp(optarg, "memcpy"))
				ok = false;
			o->memcpy_baseline = true;
			break;
		case 'E':
			o->poison_entries = (unsigned)atoi(optarg);
			break;
		case 'X':
			o->bs_mix = true;
			break;
		case 'F':
			/* fs: what the filesystem does today; ideal: the defaults */
			if (!strcmp(optarg, "fs")) {
				o->queues = 1;
				o->poison_entries = 1024;
				o->bs_mix = true;
				o->depth = 32;
				o->batch = 8;
			} else if (strcmp(optarg, "ideal")) {
				ok = false;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			ok = false;
		}
	}
	if (!ok || optind != argc || !has_backend) {
		usage(stderr);
		return -1;
	}
	if (o->bs < 512 || o->bs % 512 || o->depth < 1 || o->depth > 4096 || o->batch < 1 ||
	    o->threads < 1 || o->threads > 64 || o->seconds <= 0 ||
	    (o->backend != BLK_BACKEND_NULL && !o->path) ||
	    (o->memcpy_baseline && o->backend != BLK_BACKEND_PMEM)) {
		fprintf(stderr, "mendblk-bench: invalid option combination "
		                "(bs multiple of 512, depth 1..4096, threads 1..64, a --path for "
		                "pmem/uring, --baseline only with pmem)\n");
		return -1;
	}
	if (o->batch > o->depth)
		o->batch = o->depth;
	if (o->backend == BLK_BACKEND_URING && o->completion_thread)
		o->batch = o->batch > o->depth / 2 ? o->depth / 2 : o->batch;
	return 0;
}

static const char *rw_name(enum bench_rw rw)
{
	static const char *n[] = {"randread", "randwrite", "read", "write"};

	return n[rw];
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct blk_dev_config cfg = {0};
	struct blk_dev_info info;
	struct blk_stats st;
	struct blk_dev *dev;
	struct bench_thread *threads;
	char err[256] = "";
	uint64_t t0, t1, c0, c1, total = 0, errors = 0, span;
	int ret;

	if (parse_args(argc, argv, &o))
		return 2;
	if (sched_getaffinity(0, sizeof(bench_cpus), &bench_cpus) != 0)
		CPU_ZERO(&bench_cpus);
	cfg.backend = o.backend;
	cfg.path = o.path;
	cfg.size = o.backend == BLK_BACKEND_NULL ? (o.size ? o.size : 1ull << 40) : 0;
	cfg.nr_hw_queues = o.queues ? o.queues : o.threads;
	/* enough tags for every thread's depth on a shared queue */
	cfg.queue_depth = o.depth * ((o.threads + cfg.nr_hw_queues - 1) / cfg.nr_hw_queues);
	if (cfg.queue_depth > 4096)
		cfg.queue_depth = 4096;
	cfg.flags = (o.nomerge ? BLK_CFG_NOMERGE : 0) | (o.completion_thread ? 0 : BLK_CFG_POLLED);
	cfg.scheduler = o.sched;
	ret = blk_dev_open(&cfg, &dev, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "mendblk-bench: %s\n", err[0] ? err : strerror(-ret));
		return 1;
	}
	blk_dev_get_info(dev, &info);
	span = o.size && o.size < info.size ? o.size : info.size;
	if (o.poison_entries) {
		/* one poisoned block at the end of every stride of the span; next_block avoids them
		 */
		uint64_t blocks = span / o.bs;

		o.stride = blocks / o.poison_entries;
		if (o.stride < (o.bs_mix ? MIX_MAX : 1) + 2) {
			fprintf(stderr, "mendblk-bench: too many poison entries for the span\n");
			return 1;
		}
		for (uint64_t j = 0; j < o.poison_entries; j++) {
			uint32_t spb = o.bs >> BLK_SECTOR_SHIFT;

			ret = blk_poison_add(dev, (j * o.stride + o.stride - 1) * spb, spb);
			if (ret) {
				fprintf(stderr, "mendblk-bench: cannot add poison: %s\n",
				        strerror(-ret));
				return 1;
			}
		}
	}
	if (o.poison) {
		/* poison far from the I/O: the last 4 KiB; I/O stays below it */
		ret = blk_poison_add(dev, info.nr_sectors - 8, 8);
		if (ret) {
			fprintf(stderr, "mendblk-bench: cannot add poison: %s\n", strerror(-ret));
			return 1;
		}
		if (span > info.size - 8192)
			span = info.size - 8192;
	}
	if (o.qos)
		blk_dev_set_qos(dev, &bench_qos, NULL);

	threads = aligned_alloc(64, sizeof(*threads) * o.threads);
	memset(threads, 0, sizeof(*threads) * o.threads);
	for (unsigned i = 0; i < o.threads; i++) {
		struct bench_thread *t = &threads[i];

		t->index = i;
		t->dev = dev;
		t->o = &o;
		t->nr_blocks = span / o.bs;
		t->rng = 0x9e3779b97f4a7c15ull * (i + 1);
		t->seq_next = t->nr_blocks / o.threads * i;
		t->ios = calloc(o.depth, sizeof(*t->ios));
		if (posix_memalign((void **)&t->buf, 4096,
		                   (size_t)o.depth * o.bs * (o.bs_mix ? MIX_MAX : 1)) ||
		    !t->ios) {
			fprintf(stderr, "mendblk-bench: out of memory\n");
			return 1;
		}
		memset(t->buf, 0xa5, (size_t)o.depth * o.bs * (o.bs_mix ? MIX_MAX : 1));
		blk_dev_register_buffer(dev, t->buf,
		                        (size_t)o.depth * o.bs * (o.bs_mix ? MIX_MAX : 1));
		if (o.memcpy_baseline) {
			void *addr;

			ret = blk_direct_access(dev, 0, info.size, &addr, NULL);
			if (ret) {
				fprintf(stderr, "mendblk-bench: no mapping for the baseline: %s\n",
				        strerror(-ret));
				return 1;
			}
			t->map = addr;
		}
		if (t->nr_blocks < (o.bs_mix ? MIX_MAX : 1)) {
			fprintf(stderr, "mendblk-bench: device too small for bs %u\n", o.bs);
			return 1;
		}
	}
	for (unsigned i = 0; i < o.threads; i++)
		pthread_create(&threads[i].tid, NULL,
		               o.memcpy_baseline ? memcpy_thread : bench_thread_fn, &threads[i]);
	while (atomic_load(&bench_ready) < o.threads)
		sched_yield();
	t0 = now_ns();
	c0 = cpu_ns();
	if (!o.ios_per_thread) {
		struct timespec ts = {(time_t)o.seconds,
		                      (long)((o.seconds - (double)(time_t)o.seconds) * 1e9)};

		nanosleep(&ts, NULL);
		atomic_store(&bench_stop, 1);
	}
	for (unsigned i = 0; i < o.threads; i++) {
		pthread_join(threads[i].tid, NULL);
		total += atomic_load(&threads[i].done);
		errors += threads[i].errors;
		if (threads[i].err)
			fprintf(stderr, "mendblk-bench: thread %u: %s\n", i,
			        strerror(-threads[i].err));
	}
	t1 = now_ns();
	c1 = cpu_ns();
	blk_dev_get_stats(dev, &st);
	blk_dev_close(dev);

	double wall = (double)(t1 - t0) / 1e9, cpu = (double)(c1 - c0) / 1e9;
	double iops = (double)total / wall, ns_per_io = cpu * 1e9 / (double)total;
	double per_core = (double)total / cpu;

	if (o.json) {
		printf("{\"backend\": \"%s\", \"baseline\": %s, \"rw\": \"%s\", \"bs\": %u, "
		       "\"depth\": %u, \"batch\": %u, \"threads\": %u, \"queues\": %u, "
		       "\"merge\": %s, \"sched\": \"%s\", \"qos\": %s, \"poison\": %s, "
		       "\"poison_checks\": %s, \"ios\": %" PRIu64 ", \"errors\": %" PRIu64 ", "
		       "\"wall_seconds\": %.3f, \"cpu_seconds\": %.3f, \"iops\": %.0f, "
		       "\"ns_per_io\": %.2f, \"iops_per_core\": %.0f, \"merges\": %" PRIu64
		       ", \"plug_flushes\": %" PRIu64 ", \"tag_waits\": %" PRIu64
		       ", \"poison_entries\": %u, \"bs_mix\": %s}\n",
		       info.backend_name, o.memcpy_baseline ? "\"memcpy\"" : "null", rw_name(o.rw),
		       o.bs, o.depth, o.batch, o.threads, info.nr_hw_queues,
		       o.nomerge ? "false" : "true", o.sched ? o.sched : "none",
		       o.qos ? "true" : "false", o.poison ? "true" : "false",
		       BLK_POISON_CHECKS ? "true" : "false", total, errors, wall, cpu, iops,
		       ns_per_io, per_core, st.merges_back + st.merges_front, st.plug_flushes,
		       st.tag_waits, o.poison_entries, o.bs_mix ? "true" : "false");
	} else {
		printf("backend=%s%s rw=%s bs=%u depth=%u batch=%u threads=%u queues=%u merge=%s "
		       "sched=%s qos=%s poison=%s poison_checks=%s poison_entries=%u bs_mix=%s\n",
		       info.backend_name, o.memcpy_baseline ? " (memcpy baseline)" : "",
		       rw_name(o.rw), o.bs, o.depth, o.batch, o.threads, info.nr_hw_queues,
		       o.nomerge ? "off" : "on", o.sched ? o.sched : "none", o.qos ? "on" : "off",
		       o.poison ? "on" : "off", BLK_POISON_CHECKS ? "on" : "off", o.poison_entries,
		       o.bs_mix ? "on" : "off");
		printf("ios=%" PRIu64 " errors=%" PRIu64 " wall=%.3fs cpu=%.3fs merges=%" PRIu64
		       " plug_flushes=%" PRIu64 " tag_waits=%" PRIu64 "\n",
		       total, errors, wall, cpu, st.merges_back + st.merges_front, st.plug_flushes,
		       st.tag_waits);
		printf("IOPS: %.0f  ns/IO: %.2f  IOPS/core: %.0f\n", iops, ns_per_io, per_core);
	}
	return errors ? 1 : 0;
}
