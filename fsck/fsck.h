/* SPDX-License-Identifier: MIT */
/*
 * fsck.mendfs internals.  The checker runs in rounds; each round is a set of
 * passes over the raw metadata (modelled on e2fsck):
 *
 *   pass0_super.c    superblock copies, journal replay, the roots record
 *   pass1_inodes.c   inode table, inodes, extent maps, xattrs, directory trees
 *                    (every metadata block verified, twins compared, blocks
 *                    claimed once)
 *   pass1_xattr.c    xattr tree entries and out-of-line values
 *   pass2_dirs.c     directory entries against the inodes they name, parents
 *   pass3_connect.c  reachability from the root, loops, /lost+found
 *   pass4_links.c    link counts
 *   pass5_space.c    bitmaps, free counters, quarantine and orphan trees
 *   damage.c         poisoned sectors -> their owners (from metadata only)
 *   repair.c         repairs that rebuild trees, made through the fs library
 *   cli.c            options, the rounds, the text report, exit status
 *   json.c           the --json report, the error object, fsck_fatal()
 *   io.c, btwalk.c   verified reads of both copies, the checking B+tree walker
 *   problem.c        the problem table and fsck_fix_problem()
 *
 * Every problem is a code in problem.c; fsck_fix_problem() is the one place that
 * decides, from -n/-p/-y, whether it is fixed.  Fixes that rewrite single
 * blocks (twins, superblock, inodes, bitmaps) are made in place during the
 * passes, both copies; fixes that change a B+tree are queued and made after
 * the passes through the fs library (mounted, journaled), and the round is
 * repeated until one finds nothing to fix.
 */
#ifndef MENDFS_FSCK_FSCK_H
#define MENDFS_FSCK_FSCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include "mfs.h"
#include "mfs_progress.h"

/* Sizes of the format (include/mendfs/format.h) the passes parse by hand */
#define DIRENT_HDR ((unsigned)offsetof(struct mfs_dirent, name)) /* 10 */
#define XHDR       ((unsigned)sizeof(struct mfs_xattr))          /* 4 */
#define SPB        MFS_SECTORS_PER_BLOCK

/* fsck(8) exit bits */
#define FSCK_OK          0
#define FSCK_CORRECTED   1
#define FSCK_UNCORRECTED 4
#define FSCK_ERROR       8
#define FSCK_USAGE       16
#define FSCK_CANCELED    32

enum fsck_mode {
	MODE_ASK,   /* interactive (stdin a terminal, no -n/-p/-y) */
	MODE_NO,    /* -n: change nothing */
	MODE_PREEN, /* -p: fix what is safe, leave the rest */
	MODE_YES,   /* -y: fix everything possible */
};

/* --- problems (problem.c) ---------------------------------------------------------- */

enum pr_code {
	PR_SB_COPY_BAD,
	PR_SB_COPIES_DIFFER,
	PR_SB_ERROR_STATE,
	PR_JOURNAL_REPLAY,
	PR_ROOTS_BAD,
	PR_META_COPY_BAD,
	PR_META_LOST,
	PR_META_DUP,
	PR_ITABLE_HDR,
	PR_INODE_BAD,
	PR_INODE_BLOCKS,
	PR_INODE_FIELD,
	PR_EXTENT_BAD,
	PR_EXTENT_DUP,
	PR_TREE_BAD,
	PR_XATTR_BAD,
	PR_XATTR_VALUE,
	PR_FILE_SIZE,
	PR_ACL_BAD,
	PR_DIRENT_BAD,
	PR_DIRENT_INO,
	PR_DIRENT_TYPE,
	PR_DIR_HARDLINK,
	PR_DIR_PARENT,
	PR_DIR_ENTRIES,
	PR_LINK_MAX,
	PR_ROOT_BAD,
	PR_UNREACHABLE,
	PR_NO_LPF,
	PR_NLINK,
	PR_BITMAP_HDR,
	PR_BITMAP_DIFF,
	PR_SB_COUNTERS,
	PR_QUAR_BAD,
	PR_QUAR_CLEAN,
	PR_QUAR_MISSING,
	PR_ORPHAN_BAD,
	PR_ORPHAN_PENDING,
	PR_ORPHAN_TRUNCATE,
	PR_JOURNAL_POISON,
	PR_DAMAGED_DATA,
	PR_MAX
};

/* Problem flags */
#define PRF_PREEN  (1u << 0) /* safe to fix under -p */
#define PRF_NOFIX  (1u << 1) /* never fixed by an answer (only by its option) */
#define PRF_DATA   (1u << 2) /* damaged file data, not a metadata error */
#define PRF_LATENT (1u << 3) /* no inconsistency (pending work): not a metadata error */

struct fsck_pr_desc {
	enum pr_code code;
	const char *id;   /* stable: F<pass><nn> */
	const char *name; /* PR_... */
	unsigned flags;
	const char *fix; /* what a yes does (also in the man page) */
};

const struct fsck_pr_desc *fsck_pr_desc(enum pr_code code);

/* --- the checker ------------------------------------------------------------------- */

/* What owns a block of the meta zone (meta_owner[]). */
#define OWN_NONE       0ull
#define OWN_FIXED      1ull /* bitmaps, inode table */
#define OWN_QUARANTINE 2ull /* quarantine tree node */
#define OWN_ORPHAN     3ull /* orphan tree node */
/* kind 0 xattr value block, 1 extent tree, 2 directory tree, 3 xattr tree */
#define OWN_INODE(ino, kind) (((uint64_t)(ino) << 2) | (kind))
#define OWN_IS_INODE(o)      ((o) >= 4)
/* Data zone owners (fsck_data_owner()): an inode number, or */
#define DOWN_QUARANTINE UINT64_MAX

/* Inode states in round state */
enum ist {
	IST_FREE = 0,
	IST_OK,
	IST_BAD, /* cleared (or to be cleared): treated as free */
};

struct fsck_inode {
	uint32_t mode;
	uint32_t nlink;    /* on disk */
	uint32_t refs;     /* directory entries naming it (reachable or not) */
	uint32_t subdirs;  /* directories: subdirectory entries */
	uint64_t parent;   /* directories: the parent field on disk */
	uint64_t found_in; /* directories: the (first) directory holding an entry for it */
	uint8_t state;     /* enum ist */
	bool reachable;
	bool orphan;      /* in the orphan tree */
	bool orphan_flag; /* MFS_IFL_ORPHAN set on disk */
	bool reconnect;   /* to be linked into /lost+found */
	bool damaged;
	bool dir_rebuild; /* directory tree damaged: rebuild from its good entries */
	bool unattached;  /* unreachable and left so (not fixed) */
	uint64_t size;
	uint64_t dir_entries; /* on disk */
	uint64_t dent_first;  /* its entries: dents[dent_first .. + dent_count) */
	uint64_t dent_count;
	uint64_t name_dent; /* 1 + the entry that names it in the tree (pass 3), 0: none */
};

struct fsck_dirent {
	uint64_t dir, ino, key;
	uint32_t name_off;
	uint8_t name_len, type;
	bool bad;    /* ignored: names nothing valid (removed when fixed) */
	bool keeper; /* the entry that links a directory into the tree */
};

/* A B+tree entry kept for a rebuild. */
struct fsck_ent {
	uint64_t key;
	uint16_t len;
	uint8_t *val;
};

/* A tree to rebuild from its good entries (repair.c). */
struct fsck_rebuild {
	uint64_t owner; /* inode, or 0 for quarantine / orphan */
	uint16_t kind;
	struct fsck_ent *ents;
	size_t n;
};

struct fsck_range {
	uint64_t ino, off, len;
};

/* A block as journal replay would leave it (sorted by blk, one per block). */
struct fsck_ovl {
	uint64_t blk, seq;
	uint8_t *img;
};

/* Data of shared blocks to write into new blocks of their second owner. */
struct fsck_clone {
	uint64_t ino, off, len;
	uint8_t *data;
};

struct fsck_problem {
	enum pr_code code;
	unsigned round;
	bool fixed;
	char *msg;
};

struct fsck_ctx {
	/* options */
	const char *device;
	enum fsck_mode mode;
	bool force, json, zero_damaged, verbose;
	int progress_fd;
	struct mfs_progress bar; /* -C 0: the bar on a terminal (fd -1: none) */
	bool cancelled;
	char fatal[512]; /* why the run ended in error (fsck_fatal), for --json */

	/* device */
	struct blk_dev *dev;
	int lock_fd; /* holds the device lock (not with -n), -1 */
	uint64_t dev_blocks;
	bool read_only;
	struct mfs_superblock sb; /* the chosen copy; written back by pass 0 fixes */
	uint64_t seed;
	bool dup;
	uint64_t q_root, o_root; /* tree roots (from the roots record when present) */
	uint32_t q_depth, o_depth;
	bool roots_rec; /* the record exists */

	/* poison (sorted, merged) */
	struct blk_range *poison;
	unsigned npoison;

	/* round state */
	unsigned round;
	struct fsck_inode *ino;          /* [nr_inodes + 1] */
	uint64_t *meta_owner;            /* [meta_len] */
	uint64_t *data_used, *data_quar; /* claims.c: bits per data zone block */
	struct fsck_claim *claims;
	size_t nclaims, cap_claims;
	struct fsck_dirent *dents;
	size_t ndents, cap_dents;
	char *names;
	size_t names_len, names_cap;
	struct fsck_rebuild *rebuilds;
	size_t nrebuilds, cap_rebuilds;
	struct fsck_range *quar_add; /* poisoned free data blocks (ino unused) */
	size_t nquar_add, cap_quar_add;
	struct fsck_range *quar_rel; /* clean quarantine entries to release */
	size_t nquar_rel, cap_quar_rel;
	struct fsck_range *quar_zero; /* --zero-damaged: poisoned quarantined blocks to clear */
	size_t nquar_zero, cap_quar_zero;
	struct fsck_clone *clones; /* PR_EXTENT_DUP copies */
	size_t nclones, cap_clones;
	struct fsck_range *zero; /* damaged ranges to zero-init (--zero-damaged) */
	size_t nzero, cap_zero;
	uint64_t lpf;         /* /lost+found inode, 0 if none */
	bool need_lpf;        /* some inode needs reconnecting */
	bool need_library;    /* repair.c has work (or orphans to free) */
	bool preen_stopped;   /* -p met a problem it may not fix */
	unsigned round_fixes; /* fixes made this round */
	unsigned round_unfixed;
	unsigned declined;    /* structural problems left unfixed: bitmaps then only gain bits */
	bool lpf_created;     /* repair.c made /lost+found */
	bool replay_pending;  /* -n: the journal needs replaying */
	struct fsck_ovl *ovl; /* -n with replay pending: the replayed blocks, in memory */
	size_t novl, cap_ovl;
	struct fsck_range *zeroed; /* ranges zeroed by --zero-damaged (all rounds) */
	size_t nzeroed, cap_zeroed;

	/* totals over all rounds (reported) */
	unsigned fixed_total;
	struct fsck_problem *problems; /* the last round's problems */
	size_t nproblems, cap_problems;
	uint64_t files, dirs, blocks_used, inodes_used, meta_used;

	/* damage report (last round) */
	struct fsck_range *damage; /* file ranges, sorted by ino, offset */
	size_t ndamage, cap_damage;
	size_t ncsum_damage; /* data_csum: sectors of file data failing their checksum */
	uint64_t csum_tblk;  /* data_csum: the table block in csum_tbuf (0: none) */
	uint8_t *csum_tbuf;
	char **meta_damage; /* lines */
	size_t nmeta_damage, cap_meta_damage;
	struct fsck_range *xdamage; /* lines of xattr value blocks: ino, off = line index */
	size_t nxdamage, cap_xdamage;
	char **free_damage;
	size_t nfree_damage, cap_free_damage;
	bool zeroed_any;
};

/*
 * Report a problem and decide whether to fix it.  Returns true when the
 * caller must make the fix.  The message is printed (or kept for --json).
 */
bool fsck_fix_problem(struct fsck_ctx *ctx, enum pr_code code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* A fix that was decided but failed: count it as left uncorrected. */
void fsck_fix_failed(struct fsck_ctx *ctx, enum pr_code code, int err);
void fsck_log(struct fsck_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsck_progress(struct fsck_ctx *ctx, int pass, uint64_t cur, uint64_t max);
/* Set by SIGINT/SIGTERM: the passes stop at the next progress point (exit 32). */
extern volatile sig_atomic_t fsck_cancel;

/* --- --json and errors that end the run (json.c) -------------------------------------- */

/* "fsck.mendfs: MESSAGE" on stderr, the first one kept as the --json error. */
void fsck_fatal(struct fsck_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* With --json, print the error object {"error", "exit_code", "device"}.  Returns @exit_code. */
int fsck_exit_error(struct fsck_ctx *ctx, int exit_code);
/* Print the --json report.  Returns 0, -ENOMEM or -EIO. */
int fsck_json_report(struct fsck_ctx *ctx, unsigned meta_errors, unsigned damaged_files,
                     int exit_code);

/* --- I/O (io.c) -------------------------------------------------------------------- */

int fsck_open(struct fsck_ctx *ctx, char *err, size_t errlen);
/* Take a fresh copy of the engine's poison table (writes clear poison). */
int fsck_poison_load(struct fsck_ctx *ctx);
void fsck_close(struct fsck_ctx *ctx);
bool fsck_poisoned(struct fsck_ctx *ctx, uint64_t blk, uint64_t nblocks);
/* Index of the first range of the (sorted) poison table that ends after @sector. */
unsigned fsck_poison_after(const struct fsck_ctx *ctx, uint64_t sector);
uint64_t fsck_twin(const struct fsck_ctx *ctx, uint64_t blk);
bool fsck_in_meta_zone(const struct fsck_ctx *ctx, uint64_t blk);
bool fsck_in_data_zone(const struct fsck_ctx *ctx, uint64_t blk, uint64_t len);
/*
 * Read metadata block @blk (primary location), expected @type: both copies
 * are checked; a bad copy with a good twin is reported (PR_META_COPY_BAD)
 * and rewritten from it when decided.  @what names the structure.  Returns 0,
 * -EUCLEAN (both copies bad: reported as PR_META_LOST unless @quiet) or
 * -errno.
 */
int fsck_meta_read(struct fsck_ctx *ctx, uint64_t blk, uint16_t type, void *buf, const char *what);
/* Seal @buf (a block for primary location @blk) and write both copies. */
int fsck_meta_write(struct fsck_ctx *ctx, uint64_t blk, void *buf);
int fsck_sb_write(struct fsck_ctx *ctx);
int fsck_inode_read(struct fsck_ctx *ctx, uint64_t ino, struct mfs_inode *di);
int fsck_inode_write(struct fsck_ctx *ctx, uint64_t ino, const struct mfs_inode *di);
uint64_t fsck_name_key(const struct fsck_ctx *ctx, const void *name, size_t len);

/* --- data zone claims (claims.c) ---------------------------------------------------- */

struct fsck_claim;
int fsck_data_claims_init(struct fsck_ctx *ctx);
void fsck_data_claims_free(struct fsck_ctx *ctx);
bool fsck_data_is_used(const struct fsck_ctx *ctx, uint64_t idx);
bool fsck_data_is_quarantined(const struct fsck_ctx *ctx, uint64_t idx);
/* Mark data zone blocks [idx, idx + len) used by @owner (an inode or DOWN_QUARANTINE). */
int fsck_data_claim(struct fsck_ctx *ctx, uint64_t idx, uint64_t len, uint64_t owner);
/* The first claimer of block @idx (0: free); searches the claims: for reports only. */
uint64_t fsck_data_owner(const struct fsck_ctx *ctx, uint64_t idx);

/* --- B+tree walker (btwalk.c) -------------------------------------------------------- */

/*
 * Entry callback: ENT_OK keeps the entry; ENT_DROP rejects it and the fix
 * (a rebuild without it) was decided; ENT_BAD rejects it, not fixed.
 */
enum { ENT_OK = 0, ENT_DROP = 1, ENT_BAD = 2 };
typedef int fsck_ent_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val,
                        uint16_t len);
/* Walk results */
enum { WALK_OK = 0, WALK_FIX = 1, WALK_BAD = 2 };
/*
 * Walk the tree, checking every node (FORMAT.md §7) and claiming its block
 * for @own.  WALK_OK: sound (every node valid, every entry accepted).
 * WALK_FIX: damaged and a rebuild was decided: the good entries are in
 * @keep (when not NULL) and the caller queues the rebuild.  WALK_BAD:
 * damaged, left as it is.
 */
int fsck_bt_walk(struct fsck_ctx *ctx, uint64_t root, unsigned depth, uint16_t kind, uint64_t owner,
                 uint64_t own, const char *what, fsck_ent_fn *fn, void *arg,
                 struct fsck_rebuild *keep);
void fsck_rebuild_free(struct fsck_rebuild *rb);
int fsck_keep_ent(struct fsck_rebuild *rb, uint64_t key, const uint8_t *val, uint16_t len);
void fsck_queue_rebuild(struct fsck_ctx *ctx, struct fsck_rebuild *rb);
/* What a meta_owner[] value names ("extent tree", "xattr value", ...). */
const char *fsck_own_kind(uint64_t own);

/* --- passes -------------------------------------------------------------------------- */

int fsck_pass0_super(struct fsck_ctx *ctx); /* returns FSCK_* bits for fatal ends, else 0 */
int fsck_pass0_roots(struct fsck_ctx *ctx);
int fsck_pass0_roots_store(struct fsck_ctx *ctx);
void fsck_ovl_free(struct fsck_ctx *ctx);
int fsck_pass1_inodes(struct fsck_ctx *ctx);
/* The xattr tree entry callback of pass 1 (pass1_xattr.c); @arg points to the inode number. */
int fsck_xattr_tree_fn(struct fsck_ctx *ctx, void *arg, uint64_t key, const uint8_t *val,
                       uint16_t len);
/*
 * Check xattr @name (@nl bytes) of inode @ino (of @mode), value @val of @vl
 * bytes, against the core's ACL rules (mfs_acl_check) if it is an ACL.
 * Returns true when it is bad and its removal was decided (F0114).
 */
bool fsck_xattr_acl_bad(struct fsck_ctx *ctx, uint64_t ino, uint32_t mode, const uint8_t *name,
                        unsigned nl, const void *val, size_t vl);
/*
 * Can the filesystem get and remove an xattr of this name (user., trusted.,
 * security., system. and at least one byte; no NUL byte)?
 */
bool fsck_xattr_name_ok(const uint8_t *name, unsigned len);
int fsck_pass2_dirs(struct fsck_ctx *ctx);
int fsck_pass3_connect(struct fsck_ctx *ctx);
void fsck_queue_dir_rebuilds(struct fsck_ctx *ctx);
int fsck_pass4_links(struct fsck_ctx *ctx);
int fsck_pass5_space(struct fsck_ctx *ctx);
int fsck_damage_scan(struct fsck_ctx *ctx, bool replay_pending);
void fsck_damage_report(struct fsck_ctx *ctx, FILE *out);
/* Record the poisoned part of a written extent (pass 1). */
void fsck_damage_extent(struct fsck_ctx *ctx, uint64_t ino, uint64_t size, uint64_t lblk,
                        uint64_t pblk, uint64_t len);
int fsck_repair_library(struct fsck_ctx *ctx);
/* Path of @ino from the root ("<inode N>" when unreachable), malloc'ed. */
char *fsck_path(struct fsck_ctx *ctx, uint64_t ino);
/* fsck_path() escaped for the human report, as `ls -b` shows it (mfs_name_escape). */
char *fsck_path_shown(struct fsck_ctx *ctx, uint64_t ino);

/* The program (cli.c): options, rounds, report.  Returns the fsck(8) exit status. */
int fsck_main(int argc, char **argv);

/* vectors */
int fsck_vec_grow(void **v, size_t *cap, size_t n, size_t size);
#define VEC_PUSH(ctx_v, ctx_n, ctx_cap, item)                                                      \
	(fsck_vec_grow((void **)&(ctx_v), &(ctx_cap), (ctx_n) + 1, sizeof(*(ctx_v)))               \
	         ? -1                                                                              \
	         : ((ctx_v)[(ctx_n)++] = (item), 0))

#endif /* MENDFS_FSCK_FSCK_H */
