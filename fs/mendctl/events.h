/* SPDX-License-Identifier: MIT */
/*
 * mendctl events (events.c): a mount's damage events (MENDFS_IOC_EVENTS),
 * printed from a sequence number on and then followed until interrupted or
 * until the mount goes away.
 */
#ifndef MENDFS_MENDCTL_EVENTS_H
#define MENDFS_MENDCTL_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Print the events of the mount at @mnt from @from (0: the oldest held),
 * one line each (@json: one JSON object each); @follow: then wait for new
 * ones until SIGINT/SIGTERM or the unmount.  Errors go to stderr (and as
 * the error object to stdout with @json).  Returns the exit code: 0, or 1.
 */
int mendctl_events(const char *mnt, uint64_t from, bool follow, bool json);

#endif
