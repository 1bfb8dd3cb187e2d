/* SPDX-License-Identifier: MIT */
/* inode.c: being written. */
