/* SPDX-License-Identifier: MIT */
/* xattr.c: being written. */
