/* SPDX-License-Identifier: MIT */
/* badblocks.c: placeholder until written. */
