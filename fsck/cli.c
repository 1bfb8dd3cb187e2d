/* SPDX-License-Identifier: MIT */
/*
 * fsck_main(): the whole of fsck.mendfs (main.c only calls it, the fuzz
 * target runs it in-process).  It checks and repairs a mendfs filesystem and report every file
 * damaged by media poison (docs/man/fsck.mendfs.8).
 *
 *   fsck.mendfs [-n|-p|-y] [-f] [-C FD] [--json] [--zero-damaged] DEVICE
 *
 * Runs the passes (fsck.h) in rounds: a round that fixed something is
 * followed by another that checks the result, until one finds nothing to
 * fix (at most MAX_ROUNDS).  Exit status: the fsck(8) bits, or'ed: 1 errors
 * corrected, 4 errors left (damaged file data counts), 8 operational error,
 * 16 usage, 32 cancelled.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsck.h"
#include "mfs_cli.h"

#define MAX_ROUNDS 6

static void on_signal(int sig)
{
	(void)sig;
	fsck_cancel = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: fsck.mendfs [-n|-p|-y] [-f] [-C FD] [--json] [--zero-damaged] DEVICE\n"
	        "  -n              check only: open read-only, change nothing\n"
	        "  -p, -a          fix what is safe without questions, leave the rest (exit 4)\n"
	        "  -y              fix everything that can be fixed\n"
	        "  -f              force a full check (fsck.mendfs always checks everything)\n"
	        "  -C FD           progress lines \"PASS DONE TOTAL DEVICE\" on FD; -C 0: a\n"
	        "                  progress bar on the terminal (none if not a terminal)\n"
	        "  --json          print the report as one JSON object\n"
	        "  --zero-damaged  with -y: zero-init damaged file ranges in place, clear their\n"
	        "                  poison, record the loss in trusted.mendfs.lost\n"
	        "  -V, --version   print \"fsck.mendfs VERSION\"; --help: this text\n");
}

static void round_reset(struct fsck_ctx *ctx)
{
	free(ctx->ino);
	free(ctx->meta_owner);
	fsck_data_claims_free(ctx);
	free(ctx->dents);
	free(ctx->names);
	for (size_t i = 0; i < ctx->nrebuilds; i++)
		fsck_rebuild_free(&ctx->rebuilds[i]);
	free(ctx->rebuilds);
	for (size_t i = 0; i < ctx->nclones; i++)
		free(ctx->clones[i].data);
	free(ctx->clones);
	ctx->clones = NULL;
	ctx->nclones = ctx->cap_clones = 0;
	free(ctx->quar_add);
	free(ctx->quar_rel);
	free(ctx->quar_zero);
	free(ctx->zero);
	free(ctx->damage);
	free(ctx->csum_tbuf);
	ctx->csum_tbuf = NULL;
	for (size_t i = 0; i < ctx->nmeta_damage; i++)
		free(ctx->meta_damage[i]);
	free(ctx->meta_damage);
	free(ctx->xdamage);
	ctx->xdamage = NULL;
	ctx->nxdamage = ctx->cap_xdamage = 0;
	for (size_t i = 0; i < ctx->nfree_damage; i++)
		free(ctx->free_damage[i]);
	free(ctx->free_damage);
	ctx->ino = NULL;
	ctx->meta_owner = NULL;
	ctx->dents = NULL;
	ctx->ndents = ctx->cap_dents = 0;
	ctx->names = NULL;
	ctx->names_len = ctx->names_cap = 0;
	ctx->rebuilds = NULL;
	ctx->nrebuilds = ctx->cap_rebuilds = 0;
	ctx->quar_add = ctx->quar_rel = ctx->quar_zero = ctx->zero = ctx->damage = NULL;
	ctx->nquar_add = ctx->cap_quar_add = ctx->nquar_rel = ctx->cap_quar_rel = 0;
	ctx->nquar_zero = ctx->cap_quar_zero = 0;
	ctx->nzero = ctx->cap_zero = ctx->ndamage = ctx->cap_damage = 0;
	ctx->ncsum_damage = 0;
	ctx->csum_tblk = 0;
	ctx->meta_damage = ctx->free_damage = NULL;
	ctx->nmeta_damage = ctx->cap_meta_damage = ctx->nfree_damage = ctx->cap_free_damage = 0;
	ctx->lpf = 0;
	ctx->need_lpf = ctx->need_library = ctx->preen_stopped = ctx->lpf_created = false;
	ctx->replay_pending = false;
	fsck_ovl_free(ctx);
	ctx->roots_rec = false;
	ctx->round_fixes = ctx->round_unfixed = ctx->declined = 0;
	ctx->files = ctx->dirs = ctx->blocks_used = ctx->inodes_used = ctx->meta_used = 0;
}

static int round_alloc(struct fsck_ctx *ctx)
{
	const struct mfs_superblock *sb = &ctx->sb;

	ctx->ino = calloc(sb->nr_inodes + 1, sizeof(*ctx->ino));
	ctx->meta_owner = calloc(sb->meta_len ? sb->meta_len : 1, sizeof(*ctx->meta_owner));
	if (!ctx->ino || !ctx->meta_owner || fsck_data_claims_init(ctx))
		return -ENOMEM;
	/* the fixed part of the meta zone: bitmaps, inode table (pass 1), data checksum table */
	for (uint64_t b = 0; b < sb->meta_bitmap_blocks; b++)
		ctx->meta_owner[sb->meta_bitmap_start - sb->meta_start + b] = OWN_FIXED;
	for (uint64_t b = 0; b < sb->inode_bitmap_blocks; b++)
		ctx->meta_owner[sb->inode_bitmap_start - sb->meta_start + b] = OWN_FIXED;
	for (uint64_t b = 0; b < sb->data_bitmap_blocks; b++)
		ctx->meta_owner[sb->data_bitmap_start - sb->meta_start + b] = OWN_FIXED;
	if (sb->feature_ro_compat & MFS_FEATURE_RO_COMPAT_DATA_CSUM) /* the data checksum table */
		for (uint64_t b = 0; b < sb->csum_table_blocks; b++)
			ctx->meta_owner[sb->csum_table_start - sb->meta_start + b] = OWN_FIXED;
	return 0;
}

/* One round of passes.  Returns 0, or FSCK_ERROR when the check cannot go on. */
static int run_round(struct fsck_ctx *ctx)
{
	int r;

	round_reset(ctx);
	if (fsck_poison_load(ctx)) {
		fsck_fatal(ctx, "%s: out of memory", ctx->device);
		return FSCK_ERROR;
	}
	r = fsck_pass0_super(ctx);
	if (r)
		return r;
	if (round_alloc(ctx)) {
		fsck_fatal(ctx, "%s: out of memory", ctx->device);
		return FSCK_ERROR;
	}
	if (fsck_pass0_roots(ctx) || fsck_pass1_inodes(ctx) || fsck_pass2_dirs(ctx) ||
	    fsck_pass3_connect(ctx) || fsck_pass4_links(ctx) || fsck_pass5_space(ctx) ||
	    fsck_damage_scan(ctx, ctx->replay_pending)) {
		if (ctx->cancelled)
			return FSCK_CANCELED;
		fsck_fatal(ctx, "%s: the check failed (out of memory or I/O error)", ctx->device);
		return FSCK_ERROR;
	}
	return 0;
}

/* Is --json (or an abbreviation getopt takes) among the options?  Known before any error. */
static bool json_option(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		size_t n = strlen(argv[i]);

		if (n >= 3 && !strncmp(argv[i], "--json", n))
			return true;
	}
	return false;
}

static void ctx_free(struct fsck_ctx *ctx)
{
	round_reset(ctx);
	for (size_t i = 0; i < ctx->nproblems; i++)
		free(ctx->problems[i].msg);
	free(ctx->problems);
	free(ctx->poison);
	free(ctx->zeroed);
	if (ctx->lock_fd >= 0)
		close(ctx->lock_fd); /* releases the device lock */
	ctx->lock_fd = -1;
}

int fsck_main(int argc, char **argv)
{
	static const struct option lopts[] = {
	        {"json", no_argument, NULL, 'J'},
	        {"zero-damaged", no_argument, NULL, 'Z'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	static const char optstring[] = "npayfvC:hV";
	struct fsck_ctx ctx = {
	        .mode = MODE_ASK, .progress_fd = -1, .lock_fd = -1, .bar = {.fd = -1}};
	unsigned modes = 0, meta_errors = 0, damaged_files = 0;
	char err[512] = "", msg[256];
	int c, ret, exit_code = 0;
	struct sigaction sa = {.sa_handler = on_signal};

	fsck_cancel = 0;
	ctx.json = json_option(argc, argv);
	optind = 0; /* a full getopt reset: fsck_main may run more than once */
	opterr = 0;
	while ((c = getopt_long(argc, argv, optstring, lopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			ctx.mode = MODE_NO;
			modes++;
			break;
		case 'p':
		case 'a':
			ctx.mode = MODE_PREEN;
			modes++;
			break;
		case 'y':
			ctx.mode = MODE_YES;
			modes++;
			break;
		case 'f':
			ctx.force = true;
			break;
		case 'v':
			ctx.verbose = true;
			break;
		case 'C': {
			char *end;
			long fd = strtol(optarg, &end, 10);

			if (*optarg == '\0' || *end || fd < 0 || fd > 65535) {
				fsck_fatal(&ctx, "-C needs a file descriptor number, not '%s'",
				           optarg);
				return fsck_exit_error(&ctx, FSCK_USAGE);
			}
			ctx.progress_fd = (int)fd;
			break;
		}
		case 'J':
			ctx.json = true;
			break;
		case 'Z':
			ctx.zero_damaged = true;
			break;
		case 'h':
			usage(stdout);
			return FSCK_OK;
		case 'V':
			return mfs_cli_version("fsck.mendfs");
		default:
			fsck_fatal(&ctx, "%s", mfs_cli_optmsg(msg, sizeof(msg), argv, optstring));
			usage(stderr);
			return fsck_exit_error(&ctx, FSCK_USAGE);
		}
	}
	if (modes > 1) {
		fsck_fatal(&ctx, "only one of -n, -p and -y may be given");
		return fsck_exit_error(&ctx, FSCK_USAGE);
	}
	if (optind + 1 != argc) {
		fsck_fatal(&ctx, "%s",
		           optind >= argc ? "no device given" : "more than one device given");
		usage(stderr);
		return fsck_exit_error(&ctx, FSCK_USAGE);
	}
	if (ctx.zero_damaged && ctx.mode != MODE_YES) {
		fsck_fatal(&ctx, "--zero-damaged discards data: it needs -y");
		return fsck_exit_error(&ctx, FSCK_USAGE);
	}
	ctx.device = argv[optind];
	if (ctx.progress_fd == 0) /* the report's stream, if it is a terminal */
		mfs_progress_init(&ctx.bar, ctx.json ? STDERR_FILENO : STDOUT_FILENO, ctx.device);
	if (ctx.mode == MODE_ASK && !isatty(STDIN_FILENO)) {
		fsck_fatal(&ctx, "interactive repairs need a terminal: give -n, -p or -y");
		return fsck_exit_error(&ctx, FSCK_ERROR);
	}
	ctx.read_only = ctx.mode == MODE_NO;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ret = fsck_open(&ctx, err, sizeof(err));
	if (ret == -EBUSY) {
		fsck_fatal(&ctx,
		           "%s is in use (mounted: the mendfs daemon holds its lock); "
		           "refusing to repair it (-n checks it read-only)",
		           ctx.device);
		return fsck_exit_error(&ctx, FSCK_ERROR);
	}
	if (ret) {
		fsck_fatal(&ctx, "%s", err[0] ? err : strerror(-ret));
		ctx_free(&ctx);
		return fsck_exit_error(&ctx, FSCK_ERROR);
	}

	for (ctx.round = 1;; ctx.round++) {
		ret = run_round(&ctx);
		if (fsck_cancel || ctx.cancelled) {
			ret = FSCK_CANCELED;
			break;
		}
		if (ret)
			break;
		if (ctx.round == 1) {
			for (size_t i = 0; i < ctx.nproblems; i++)
				if (!(fsck_pr_desc(ctx.problems[i].code)->flags &
				      (PRF_DATA | PRF_LATENT)))
					meta_errors++;
		}
		if (ctx.read_only || ctx.round_fixes == 0)
			break;
		if (ctx.need_library) {
			fsck_close(&ctx);
			fsck_repair_library(&ctx);
			for (size_t i = 0; i < ctx.nzero; i++)
				VEC_PUSH(ctx.zeroed, ctx.nzeroed, ctx.cap_zeroed, ctx.zero[i]);
			ret = fsck_open(&ctx, err, sizeof(err));
			if (ret) {
				fsck_fatal(&ctx, "reopening %s: %s", ctx.device,
				           err[0] ? err : strerror(-ret));
				ctx.fixed_total += ctx.round_fixes;
				ret = FSCK_ERROR;
				break;
			}
		}
		/* fixes that failed in the library were taken back: nothing gained, stop */
		ctx.fixed_total += ctx.round_fixes;
		if (ctx.round_fixes == 0)
			break;
		if (ctx.round == MAX_ROUNDS) {
			fsck_log(&ctx, "fsck.mendfs: %s: still finding problems after %d rounds\n",
			         ctx.device, MAX_ROUNDS);
			ctx.round_unfixed++;
			break;
		}
		if (!ctx.json)
			fsck_log(&ctx, "Round %u: checking the repairs\n", ctx.round + 1);
	}
	if (ret) {
		fsck_close(&ctx);
		if (ret == FSCK_CANCELED)
			fsck_fatal(&ctx, "%s: cancelled", ctx.device);
		exit_code = ret | (ctx.fixed_total ? FSCK_CORRECTED : 0);
		ctx_free(&ctx);
		return fsck_exit_error(&ctx, exit_code);
	}

	/*
	 * The final state: clean when nothing is left, marked in error when
	 * problems were left.  An error state set by the daemon is cleared only
	 * by a run that leaves nothing (F0003).
	 */
	if ((ctx.sb.state & MFS_STATE_ERROR) && (ctx.read_only || ctx.declined == 0)) {
		if (fsck_fix_problem(
		            &ctx, PR_SB_ERROR_STATE,
		            "superblock: the error state is set (the filesystem saw corruption)"))
			ctx.fixed_total++;
		else if (!ctx.read_only)
			ctx.declined++;
	}
	if (!ctx.read_only) {
		uint32_t state = ctx.sb.state;

		if (ctx.declined == 0 && !ctx.replay_pending)
			state = MFS_STATE_CLEAN;
		else if (ctx.declined)
			state |= MFS_STATE_ERROR;
		if (state != ctx.sb.state) {
			ctx.sb.state = state;
			if (state == MFS_STATE_CLEAN) {
				/* exact after a clean unmount (FORMAT.md §4): the recount of pass 5
				 */
				ctx.sb.free_blocks = ctx.sb.data_len - ctx.blocks_used;
				ctx.sb.free_inodes = ctx.sb.nr_inodes - ctx.inodes_used;
				ctx.sb.free_meta = ctx.sb.meta_len - ctx.meta_used;
			}
			ret = fsck_sb_write(&ctx);
			if (ret)
				fsck_fatal(&ctx, "%s: writing the superblock: %s", ctx.device,
				           strerror(-ret));
		}
	}
	mfs_progress_clear(&ctx.bar);
	for (uint64_t ino = 1; ino <= ctx.sb.nr_inodes; ino++)
		damaged_files += ctx.ino[ino].damaged;

	exit_code =
	        (ctx.fixed_total ? FSCK_CORRECTED : 0) | (ctx.round_unfixed ? FSCK_UNCORRECTED : 0);
	if (ctx.fatal[0]) /* the superblock write failed */
		exit_code |= FSCK_ERROR;
	if (ctx.json) {
		/* a report only for a run that ended without an operational error */
		ret = ctx.fatal[0] ? 0
		                   : fsck_json_report(&ctx, meta_errors, damaged_files, exit_code);
		if (ret) {
			fsck_fatal(&ctx, "%s: printing the JSON report: %s", ctx.device,
			           strerror(-ret));
			exit_code |= FSCK_ERROR;
		}
		if (ctx.fatal[0])
			fsck_exit_error(&ctx, exit_code);
	} else {
		fsck_damage_report(&ctx, stdout);
		for (size_t i = 0; i < ctx.nzeroed; i++) {
			char *path = fsck_path_shown(&ctx, ctx.zeroed[i].ino);

			printf("%s  %s: bytes %llu-%llu zero-initialised (recorded in "
			       "trusted.mendfs.lost)\n",
			       i ? "" : "Zeroed by --zero-damaged:\n", path ? path : "?",
			       (unsigned long long)ctx.zeroed[i].off,
			       (unsigned long long)(ctx.zeroed[i].off + ctx.zeroed[i].len - 1));
			free(path);
		}
		if (ctx.fixed_total)
			printf("\n***** FILE SYSTEM WAS MODIFIED *****\n");
		printf("%s: %llu files, %llu directories, %llu/%llu blocks used, %u damaged "
		       "file%s%s\n",
		       ctx.device, (unsigned long long)ctx.files, (unsigned long long)ctx.dirs,
		       (unsigned long long)ctx.blocks_used, (unsigned long long)ctx.sb.data_len,
		       damaged_files, damaged_files == 1 ? "" : "s",
		       ctx.round_unfixed ? " (problems left: see above)" : "");
	}
	fsck_close(&ctx);
	ctx_free(&ctx);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "fsck.mendfs: %s: writing the report failed\n", ctx.device);
		exit_code |= FSCK_ERROR;
	}
	return exit_code;
}
