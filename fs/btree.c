/* SPDX-License-Identifier: MIT */
/* btree.c: being written. */
