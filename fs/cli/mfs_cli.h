/* SPDX-License-Identifier: MIT */
/*
 * mfs_cli: what every installed program answers the same way, as e2fsprogs
 * and util-linux do: `-V`/`--version` prints "NAME VERSION" on stdout, and a
 * getopt error names the option it is about.  MENDFS_VERSION is the meson
 * project version (meson.build), the one place it is written.
 */
#ifndef MENDFS_FS_MFS_CLI_H
#define MENDFS_FS_MFS_CLI_H

#include <stddef.h>

/* Prints "@prog VERSION" on stdout.  Returns 0. */
int mfs_cli_version(const char *prog);

/*
 * After getopt()/getopt_long() returned '?' with opterr = 0: writes into @buf
 * what went wrong, naming the option ("unrecognized option '--bogus'",
 * "invalid option -- 'x'", "option -L needs an argument").  @optstring is the
 * one given to getopt.  Returns @buf.
 */
const char *mfs_cli_optmsg(char *buf, size_t len, char **argv, const char *optstring);

#endif
