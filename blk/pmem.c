/* SPDX-License-Identifier: MIT */
/* pmem.c: placeholder until written. */
