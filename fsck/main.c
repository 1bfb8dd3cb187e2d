/* SPDX-License-Identifier: MIT */
/* fsck.mendfs: see fsck/cli.c and docs/man/fsck.mendfs.8. */
#include "fsck.h"

int main(int argc, char **argv)
{
	return fsck_main(argc, argv);
}
