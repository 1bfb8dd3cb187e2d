/* SPDX-License-Identifier: MIT */
/*
 * stat-loop PATH N: stat(PATH) N times (tests/bench/lookup-insns.sh).  On a
 * mount with timeout=0 each stat revalidates every component of PATH with a
 * LOOKUP and fetches the attributes with a GETATTR.  Exit 0, or 1 on the
 * first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
	struct stat st;
	long n;

	if (argc != 3 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: stat-loop PATH N\n");
		return 2;
	}
	for (long i = 0; i < n; i++) {
		if (stat(argv[1], &st)) {
			perror(argv[1]);
			return 1;
		}
	}
	return 0;
}
