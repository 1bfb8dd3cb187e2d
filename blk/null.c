/* SPDX-License-Identifier: MIT */
/* null.c: placeholder until written. */
