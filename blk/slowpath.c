/* SPDX-License-Identifier: MIT */
/* slowpath.c: placeholder until written. */
