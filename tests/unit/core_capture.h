/* SPDX-License-Identifier: MIT */
/*
 * core_capture.h: what the engine core tests (test_core*.c) share: waiting
 * without timing assertions, test bios that count their completions, and the
 * "capture" backend that keeps the requests it is given in a test-owned list
 * so that the test completes them itself, as a backend would
 * (core_capture.c).  Also the test cases the suite is made of, which each
 * test_core_*.c file fills.  Internal headers are fair game here.
 */
#ifndef MENDFS_TESTS_CORE_CAPTURE_H
#define MENDFS_TESTS_CORE_CAPTURE_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "blk_internal.h"

#define KIB           1024u
#define TEST_BUF_SIZE (256 * 1024)

/* The null and capture backends never touch data. */
extern char test_buf[TEST_BUF_SIZE];

/* The test cases of suite "core", in the order core_suite() adds them to the suite. */
struct core_tcases {
	TCase *basic; /* "submit" */
	TCase *plug;  /* "plug" */
	TCase *merge; /* "merge" */
	TCase *comp;  /* "completion" */
	TCase *mt;    /* "threads" */
	TCase *feat;  /* "features" */
	TCase *bugs;  /* "regressions" */
};

/* Each adds the tests of its file to @tc (test_core_<name>.c). */
void core_submit_tests(struct core_tcases *tc);
void core_plug_tests(struct core_tcases *tc);
void core_complete_tests(struct core_tcases *tc);
void core_threads_tests(struct core_tcases *tc);
void core_dispatch_tests(struct core_tcases *tc);

/* --- waiting without timing assertions ------------------------------------ */

/* Poll @pred for at most @secs seconds (a bound that fails the test, not a measurement). */
bool wait_until(bool (*pred)(void *), void *arg, unsigned secs);
/* pthread_timedjoin_np() with a bound of @secs seconds: 0, or ETIMEDOUT. */
int join_within(pthread_t th, unsigned secs);

/* --- bios ----------------------------------------------------------------- */

struct tbio {
	struct blk_bio bio; /* first: end_io casts back */
	_Atomic unsigned ends;
	unsigned end_seq; /* global completion order, from 1 */
	struct iovec iov[8];
};

extern _Atomic unsigned end_counter;

void t_end_io(struct blk_bio *bio);
void tb_init(struct tbio *t, enum blk_op op, uint64_t sector, uint32_t len);
/* A bio of @nsegs equal segments. */
void tb_init_segs(struct tbio *t, enum blk_op op, uint64_t sector, uint32_t len, unsigned nsegs);
unsigned tb_ends(struct tbio *t);

/* --- devices and the capture backend -------------------------------------- */

#define NULLCFG(...) ((struct blk_dev_config){.backend = BLK_BACKEND_NULL, __VA_ARGS__})

/* blk_dev_open(@cfg), which must succeed. */
struct blk_dev *dev_open(struct blk_dev_config cfg);

#define CAP_MAX 4096

struct cap_state {
	pthread_mutex_t lock;
	struct blk_request *rqs[CAP_MAX]; /* every request received, in order */
	unsigned nr;                      /* received */
	unsigned done;                    /* rqs[0..done) completed by the test */
	unsigned calls;                   /* queue_rqs() calls */
	unsigned call_sizes[CAP_MAX];     /* requests per call */
};

extern struct cap_state cap;
extern const struct blk_backend_ops cap_ops;

struct blk_request *cap_queue_rqs(struct blk_hw_queue *hctx, struct blk_request *list,
                                  struct blk_comp_batch *cb);
int cap_init_hctx(struct blk_hw_queue *hctx);
void cap_exit_hctx(struct blk_hw_queue *hctx);
void cap_close(struct blk_dev *dev);
void dev_set_ops(struct blk_dev *dev, const struct blk_backend_ops *ops);
/* A null device whose requests are kept by the test instead of completed. */
struct blk_dev *cap_open(struct blk_dev_config cfg);
unsigned cap_nr(void);
unsigned cap_calls(void);
struct blk_request *cap_rq(unsigned i);
/* Complete every captured request not yet completed with @sts, in one batch. */
unsigned cap_complete_all(enum blk_status sts);
bool dev_idle(struct blk_dev *dev);
unsigned rq_nr_bios(struct blk_request *rq);
/* Submit @n bios under one plug and finish it; returns the requests captured by this call. */
unsigned plug_submit(struct blk_dev *dev, struct tbio *t, unsigned n);

/* Submits a->n bios of a->t to a->dev, from a thread of its own. */
struct hctx1_arg {
	struct blk_dev *dev;
	struct tbio *t;
	unsigned n;
};

void *submit_thread(void *p);

#endif /* MENDFS_TESTS_CORE_CAPTURE_H */
