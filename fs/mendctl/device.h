/* SPDX-License-Identifier: MIT */
/*
 * mendctl's offline commands (device.c): the superblock of an unmounted
 * device or image, read and printed (show), and its label and UUID changed.
 * mendctl.c parses the command line and prints errors; this file reads and
 * writes the superblock through the core (mfs_super_read, mfs_super_write).
 */
#ifndef MENDFS_MENDCTL_DEVICE_H
#define MENDFS_MENDCTL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mendfs/format.h"
#include "mfs_grow.h"
#include "mfs_json.h"

struct blk_dev;

struct mendctl_dev {
	struct blk_dev *dev;
	struct mfs_superblock *sb; /* the copy the mount would use */
	bool other_bad;            /* the other copy is unreadable, invalid or older */
};

/*
 * Open @device and read its superblock.  @write: take the daemon's lock
 * (waiting for a daemon that is exiting; -EBUSY if mounted) and refuse a
 * filesystem with features this version cannot write (-EROFS).  On error
 * @err says why and nothing is left open.
 */
int mendctl_dev_open(const char *device, bool write, struct mendctl_dev *d, char *err,
                     size_t errlen);
/* Write d->sb as both superblock copies (newer write time); @err says why not. */
int mendctl_dev_write(struct mendctl_dev *d, char *err, size_t errlen);
void mendctl_dev_close(struct mendctl_dev *d);

/*
 * grow: take the lock (-EBUSY: mounted) and grow the filesystem on @device
 * to the device's size (mfs_grow, its errors).  @err says why not.
 */
int mendctl_grow(const char *device, struct mfs_grow_info *info, char *err, size_t errlen);
/*
 * grow MOUNTPOINT: MENDFS_IOC_GROW through the mounted filesystem's
 * directory @mnt (the daemon grows it online).  0, or -errno with @err
 * saying why (-ENOTTY: not a mendfs).
 */
int mendctl_grow_online(const char *mnt, struct mfs_grow_info *info, char *err, size_t errlen);
/* @what is the device or the mount point, named @key ("device", "mountpoint") in JSON. */
void mendctl_grow_print(FILE *f, const char *what, const struct mfs_grow_info *g);
struct json_object *mendctl_grow_json(const char *key, const char *what,
                                      const struct mfs_grow_info *g);

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (36 characters and a NUL). */
void mendctl_uuid_format(const uint8_t u[16], char out[37]);
/* Parse that form, or "random" (a new RFC 4122 version 4 UUID).  0 or -EINVAL. */
int mendctl_uuid_parse(const char *s, uint8_t u[16]);
/* "clean", "not clean", with " with errors" when the error bit is set. */
const char *mendctl_state_name(uint32_t state);

/* The superblock for people (show) and as the JSON object of show --json. */
void mendctl_sb_print(FILE *f, const char *device, const struct mendctl_dev *d);
struct json_object *mendctl_sb_json(const char *device, const struct mendctl_dev *d);

#endif
