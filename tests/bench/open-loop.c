/* SPDX-License-Identifier: MIT */
/*
 * open-loop PATH N: open(PATH, O_RDONLY) and close it N times; prints the
 * mean wall time of one open+close in nanoseconds.  Run by open-cost.sh as
 * root and as an unprivileged user.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec a, b;
	long n;

	if (argc != 3 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: open-loop PATH N\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		int fd = open(argv[1], O_RDONLY);

		if (fd < 0) {
			perror(argv[1]);
			return 1;
		}
		close(fd);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.0f\n",
	       ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
	return 0;
}
