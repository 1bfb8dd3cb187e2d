/* SPDX-License-Identifier: MIT */
/* file.c: being written. */
