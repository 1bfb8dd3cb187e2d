/* SPDX-License-Identifier: MIT */
/* alloc.c: being written. */
