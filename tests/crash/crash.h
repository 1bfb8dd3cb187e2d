/* SPDX-License-Identifier: MIT */
/*
 * crash.h: what the three files of the crash test share (see crash_test.c
 * for what the test does): the includes, the parameters, the random numbers,
 * the errors, the write log, the model of the workload (crash_workload.c)
 * and the checks after each mount (crash_check.c).
 */
#ifndef MENDFS_TESTS_CRASH_H
#define MENDFS_TESTS_CRASH_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mfs_int.h"
#include "mfs_recovery.h"

#define IMG_SIZE  (32u << 20)
#define NAME_MAX_ 128
#define LIVE_MAX  (IMG_SIZE / 2) /* file bytes the workload keeps below (no ENOSPC) */

/* --- parameters (crash_test.c) ------------------------------------------------------ */

struct params {
	unsigned ops;        /* workload operations */
	unsigned subsets;    /* random subsets per flush epoch */
	unsigned max_file;   /* bytes a write may reach */
	unsigned max_write;  /* bytes per write */
	unsigned frag_ext;   /* extents of a fragmented file (ops 24, 25) */
	unsigned frag_every; /* ops between two fragmented files */
	uint64_t seed;
	bool data_csum; /* --data-csum: mkfs -O data_csum */
};
/* data_csum: sectors a recovery read zero-filled in files changed since their fsync */
extern unsigned long long csum_torn_sectors;
extern struct params P;

/*
 * Bound of a step of a multi-transaction free (mfs_txn_step_limit) while the
 * workload frees a fragmented file: below one unit's worst case, so that
 * every extent goes in a transaction of its own.
 */
#define FRAG_STEP_BLOCKS 8u

/* Largest size a file reaches (buffers of the checks). */
size_t size_cap(void);

/* --- PRNG (splitmix64), errors (crash_test.c) ------------------------------------------ */

uint64_t rng_next(uint64_t *s);
/* The workload's random state, seeded from P.seed. */
extern uint64_t wl_rng;
/* A number below @n from wl_rng. */
unsigned rnd(unsigned n);

/* Print "crash_test: " and the message on stderr, exit 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);

#define GROW(arr, n, cap)                                                                          \
	do {                                                                                       \
		if ((n) == (cap)) {                                                                \
			(cap) = (cap) ? (cap)*2 : 64;                                              \
			(arr) = xrealloc((arr), (size_t)(cap) * sizeof(*(arr)));                   \
		}                                                                                  \
	} while (0)

/* --- the write log (crash_test.c) ------------------------------------------------------ */

struct lentry {
	uint8_t op;    /* BLK_OP_WRITE, BLK_OP_WRITE_ZEROES, BLK_OP_FLUSH */
	uint64_t pos;  /* bytes */
	uint32_t len;  /* bytes */
	uint8_t *data; /* WRITE only */
};

extern struct lentry *wlog;
extern size_t nlog;

/* --- the model of the workload (crash_workload.c) -------------------------------------- */

struct snap {
	uint8_t *data;
	size_t size;
};

/* A change of a file after which bytes [lo, hi) hold data (a copy) and the size is size. */
struct fmod {
	size_t lstart;
	size_t lo, hi, size;
	uint8_t *data;
	bool freed; /* the file lost its last name */
};

struct mfile {
	uint64_t ino;
	struct fmod *mods;
	unsigned nmods, capmods;
	uint8_t *data;
	size_t size, cap;
	unsigned nlinks;
	bool live;
	bool batch;         /* one of the long-name batch: picked less for data operations */
	bool frag;          /* made fragmented by op 24, not freed by op 25 yet */
	uint32_t xlarge[2]; /* sizes of its out-of-line xattrs user.L0, user.L1 (0: none) */
	struct snap *snap;  /* content at the last fsync/sync if unchanged since, else NULL */
};

struct mdir {
	uint64_t ino;
	int parent;
	bool live;
};

enum ekind { E_FILE, E_DIR, E_SYMLINK };

struct mentry {
	int dir;
	char name[NAME_MAX_];
	enum ekind kind;
	int idx; /* file or dir index */
	bool live;
};

struct op {
	size_t lstart, lend; /* log length before and after */
	unsigned kind;
	unsigned xlarge; /* a large xattr op: 1 set, 2 remove */
	char desc[400];
};

struct event {
	int file;
	size_t F;        /* log length when the fsync returned */
	size_t next_mod; /* lstart of the first later change of the file (SIZE_MAX: none) */
	unsigned op;
	unsigned mod0; /* files[file].mods[mod0 ...] came after it */
	struct snap *snap;
};

extern struct mfile *files;
extern unsigned nfiles;
extern struct mdir *dirs;
extern unsigned ndirs;
extern struct mentry *ents;
extern struct op *ops;
extern unsigned nops, capops;
extern struct event *evs;
extern unsigned nevs;
extern struct snap **snaps;
extern unsigned nsnaps;
extern unsigned frag_made, frag_freed;
#define MAX_HELD 4
extern struct mfs_ino *held[MAX_HELD]; /* unlinked files still referenced */
/*
 * How each is held: HELD_OPEN a user (an open file: the orphan path), HELD_PIN
 * a pin only (the kernel knows it, nobody has it open: freed by the unlink's
 * transaction), HELD_BOTH (freed when the user goes, the pin stays).
 */
enum { HELD_OPEN, HELD_PIN, HELD_BOTH };
extern int held_kind[MAX_HELD];
extern unsigned nheld;
/* Drop what held[@t] holds (close and forget) and take it off the list. */
void held_drop(unsigned t);
extern struct mfs *wfs; /* the workload's mount */

/* Record that file @f was synced when the log had @F entries. */
void record_event(int f, size_t F);
/* Does a large xattr value of @len bytes read back whole (one value as set)? */
bool xval_ok(const uint8_t *v, uint32_t len);
/* Run the seeded workload against wfs and the model (step 2). */
void run_workload(void);

/* --- checks (crash_check.c) ------------------------------------------------------------ */

extern char cerr[512]; /* the first failing check */
extern unsigned long long files_asserted, mixed_asserted, tree_files, tree_nodes;
/* Keep the first failure's message in cerr; returns -1. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern unsigned long long xlarge_values; /* out-of-line xattr values read back whole */
/* Fail the run on a byte found in none of a file's versions (always true now). */
extern bool strict;
extern char known[512];
extern unsigned long long known_points;

/* The structural walk.  0 or -1 with cerr set. */
int check_structure(struct mfs *fs, uint8_t **kind_out);
/* Files whose last fsync before the bound @c was not followed by a change before @c. */
int check_durability(struct mfs *fs, size_t c, const uint8_t *kind);

#endif /* MENDFS_TESTS_CRASH_H */
