/* SPDX-License-Identifier: MIT */
/*
 * uring.h: what the three files of test_uring share: the includes, the
 * layout of the test devices, the targets main() sets up, the helpers
 * (random data, waiters, opening a target, synchronous ranges, bios with
 * their own segments, what the process has open) and the test cases of
 * uring_io.c and uring_fault.c.
 */
#ifndef MENDFS_TESTS_URING_H
#define MENDFS_TESTS_URING_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blk_internal.h"
#include "cannot_run.h"
#include "mendfs/blk.h"

#define MiB           (1024u * 1024)
#define FILE_SIZE     (40 * MiB)
#define LOOP_SIZE     (64 * MiB)
#define REGION        (8 * MiB) /* round-trip region at the start of the device */
#define ZERO_AT       (8 * MiB) /* WRITE_ZEROES test range */
#define ZERO_LEN      (12 * MiB)
#define THREAD_AT     (24 * MiB) /* thread tests: 2 MiB per thread from here */
#define THREAD_REGION (2 * MiB)

enum target_kind { T_TMP, T_SHM, T_RAMFS, T_LOOP, T_ZRAM, T_LOOP4K, T_MAX };

/* The targets, set up by main() in test_uring.c before the tests run. */
extern const char *target_names[T_MAX];
extern char target_paths[T_MAX][256];
extern char workdir[128];

/* The state of rnd(); a test seeds it. */
extern uint64_t rng_state;
uint64_t rnd(void);
uint64_t rnd_r(uint64_t *s);
void fill_random(void *buf, size_t len, uint64_t *s);
/* malloc that fails the test when there is no memory. */
void *xalloc(size_t len);

/* Completion counter shared by the bios of one waiter. */
struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned done;
	unsigned errors;
	uint8_t first_err;
};

void waiter_init(struct waiter *w);
/* The bios' end_io: counts one completion on their waiter. */
void waiter_end_io(struct blk_bio *bio);
unsigned waiter_done(struct waiter *w);
/*
 * Wait for @n completions.  Polled devices make progress only when someone
 * polls, so poll; the sum of what blk_poll() reported is added to *polled.
 * Returns a negative value if blk_poll() failed.
 */
int waiter_wait(struct blk_dev *dev, struct waiter *w, unsigned n, bool polled,
                uint64_t *polled_sum);
/* Open @path with the uring backend; returns what blk_dev_open() returns. */
int open_dev(const char *path, unsigned flags, unsigned nr_hw, unsigned depth,
             struct blk_dev **devp, char *err, size_t errlen);
/* Open target @t; fails the test when it cannot. */
struct blk_dev *xopen(int t, unsigned flags, unsigned nr_hw, unsigned depth);
/* The device's logical block size. */
unsigned dev_lbs(struct blk_dev *dev);
/* Synchronous read/write of a large range in max-size pieces. */
void rw_range(struct blk_dev *dev, int op, uint64_t pos, void *buf, size_t len);
/* Fails the test at the first byte of @got that differs from @want. */
void check_equal(const void *got, const void *want, size_t len, const char *what);

/* A bio with its own segment array. */
struct tbio {
	struct blk_bio bio;
	struct iovec iov[8];
};

/*
 * Set @tb up over [pos, pos + len) with memory @mem split into up to 3
 * segments.  With @aligned the split points are multiples of @lbs (the
 * direct path); otherwise they are odd (the bounce path).
 */
void tbio_setup(struct tbio *tb, int op, uint64_t pos, char *mem, uint32_t len, unsigned lbs,
                bool aligned, struct waiter *w);
/* Is the device's fd in this process open with O_DIRECT?  -1: no fd found. */
int fd_is_direct(const char *path);
/* Sum of "UserBufs:" over this process's io_uring fds; -1 when none reports it. */
int uring_user_bufs(void);

/* uring_io.c: adds its tests to the test cases "open", "roundtrip", "threads". */
void uring_io_add(TCase *open, TCase *roundtrip, TCase *threads);
/* uring_fault.c: the test case "faults". */
TCase *uring_fault_tcase(void);

#endif /* MENDFS_TESTS_URING_H */
