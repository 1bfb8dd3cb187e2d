/* SPDX-License-Identifier: MIT */
/* tags.c: placeholder until written. */
