/* SPDX-License-Identifier: MIT */
/* mfs_cli: --version and getopt error messages shared by the installed programs. */
#include "mfs_cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

int mfs_cli_version(const char *prog)
{
	printf("%s %s\n", prog, MENDFS_VERSION);
	return 0;
}

const char *mfs_cli_optmsg(char *buf, size_t len, char **argv, const char *optstring)
{
	const char *p = optopt ? strchr(optstring, optopt) : NULL;

	if (!optopt) /* a long option getopt_long does not know, or without its argument */
		snprintf(buf, len, "unrecognized option '%s'", argv[optind - 1]);
	else if (p && p[1] == ':')
		snprintf(buf, len, "option -%c needs an argument", optopt);
	else
		snprintf(buf, len, "invalid option -- '%c'", optopt);
	return buf;
}
