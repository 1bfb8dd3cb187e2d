/* SPDX-License-Identifier: MIT */
/* sched.c: placeholder until written. */
