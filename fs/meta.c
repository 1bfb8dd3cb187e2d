/* SPDX-License-Identifier: MIT */
/* meta.c: being written. */
