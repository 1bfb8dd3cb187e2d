/* SPDX-License-Identifier: MIT */
/* journal.c: being written. */
