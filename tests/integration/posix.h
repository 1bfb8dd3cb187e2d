/* SPDX-License-Identifier: MIT */
/*
 * posix.h: what the files of the posix program share: the includes, the
 * CHECK counters (one set for the program, defined in posix.c), ERR, the
 * writeback flag, the file helpers and the groups of checks each file runs.
 */
#ifndef MENDFS_TESTS_POSIX_H
#define MENDFS_TESTS_POSIX_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define CHECK_SHARED_COUNTERS
#include "check.h"

/* ERR(call, E): the call fails with errno E */
#define ERR(call, E, ...) CHECK((errno = 0, (call) < 0 && errno == (E)), __VA_ARGS__)

/*
 * Mounted with -o writeback ($MENDFS_OPTS): the daemon cannot see the kernel's
 * dirty pages, so it leaves SEEK_DATA/SEEK_HOLE to the kernel's generic
 * answer (all of the file is data, the only hole is at EOF).
 */
extern bool writeback_mode;

/* Create @path with @mode holding @data (checked). */
void put_file(const char *path, const void *data, size_t len, mode_t mode);
/* 1 if @path holds exactly the string @want, else 0. */
int has_content(const char *path, const char *want);
/* The lstat mode of @path, 0 if it has none. */
mode_t mode_of(const char *path);

/* posix_names.c: errors, links, rename, many files, readdir, seekdir, concurrent-ns */
void check_errors(const char *other);
void check_links(void);
void check_rename(void);
void check_many(long count);
void check_readdir(void);
void check_seekdir(void);
void check_concurrent_ns(const char *arg);

/* posix_data.c: sparse, times, xattr, large, concurrent, enospc, mmap, persist */
void check_sparse(void);
void check_times(void);
void check_xattr(void);
void check_large(int verify);
void check_concurrent(void);
void check_enospc(void);
void check_enospc_inodes(void);
void check_mmap(void);
void check_persist(int verify);

/* posix_perm.c: permissions and ownership */
void perm_prep(void);
void check_perm(void);
void check_perm_root(void);

#endif /* MENDFS_TESTS_POSIX_H */
