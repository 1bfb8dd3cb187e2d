/* SPDX-License-Identifier: MIT */
/* namei.c: being written. */
