/* SPDX-License-Identifier: MIT */
/* core.c: placeholder until written. */
