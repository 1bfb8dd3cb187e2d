/* SPDX-License-Identifier: MIT */
/* super.c: being written. */
