/* SPDX-License-Identifier: MIT */
/* mount.c: being written. */
