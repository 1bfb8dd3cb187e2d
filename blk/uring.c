/* SPDX-License-Identifier: MIT */
/* uring.c: placeholder until written. */
