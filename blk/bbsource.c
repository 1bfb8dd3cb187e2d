/* SPDX-License-Identifier: MIT */
/* bbsource.c: placeholder until written. */
