// SPDX-License-Identifier: MIT
//
// mount-time IMAGE [ROUNDS] [crash]
//
// Wall-clock time of mfs_mount() and mfs_unmount() of IMAGE (the library
// calls the daemon makes, without FUSE), ROUNDS times (default 3).  One line
// per round:  mount SECONDS unmount SECONDS free_blocks N
// With "crash" each round ends with a simulated crash (mfs_crash: nothing
// written) instead of an unmount, so every mount after the first finds the
// superblock DIRTY and recounts the bitmaps.
// Used by tests/bench/mount-time.sh.  Exit 0, or 1 when a mount fails.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mfs_int.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	int crash = argc > 3 && strcmp(argv[3], "crash") == 0;

	if (argc < 2 || rounds < 1) {
		fprintf(stderr, "usage: mount-time IMAGE [ROUNDS]\n");
		return 2;
	}
	for (int r = 0; r < rounds; r++) {
		struct mfs_mount_opts o = {0};
		struct statvfs st;
		struct mfs *fs;
		char err[256];
		double t0 = now(), t1, t2;
		int ret = mfs_mount(argv[1], &o, &fs, err, sizeof(err));

		t1 = now();
		if (ret) {
			fprintf(stderr, "mount-time: %s\n", err);
			return 1;
		}
		mfs_statfs(fs, &st);
		if (crash) {
			mfs_crash(fs);
			ret = 0;
		} else {
			ret = mfs_unmount(fs);
		}
		t2 = now();
		if (ret) {
			fprintf(stderr, "mount-time: unmount failed: %d\n", ret);
			return 1;
		}
		printf("mount %.3f unmount %.3f free_blocks %llu\n", t1 - t0, t2 - t1,
		       (unsigned long long)st.f_bfree);
		fflush(stdout);
	}
	return 0;
}
