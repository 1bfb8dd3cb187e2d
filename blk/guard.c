/* SPDX-License-Identifier: MIT */
/* guard.c: placeholder until written. */
