/* SPDX-License-Identifier: MIT */
/*
 * The caller's groups and CAP_FSETID from /proc (see daemon_cred.h).  The
 * pid of a FUSE request is that of the calling thread, in the daemon's pid
 * namespace; /proc/PID/status answers for any thread id.  A thread that has
 * gone counts as outside every group and without the capability, so what
 * depends on it errs on the side of dropping setgid.
 */
#include "daemon_cred.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP_FSETID_BIT 4 /* <linux/capability.h> */

/* The value of line "@key:" of /proc/@pid/status (malloc'ed), or NULL if absent or unreadable. */
static char *status_line(pid_t pid, const char *key)
{
	char path[64], *line = NULL, *val = NULL;
	size_t klen = strlen(key), cap = 0;
	FILE *f;

	if (pid <= 0)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			val = strdup(line + klen + 1);
			break;
		}
	}
	free(line);
	fclose(f);
	return val;
}

bool mfsd_cred_fsetid(pid_t pid)
{
	char *val = status_line(pid, "CapEff");
	uint64_t caps;

	if (!val)
		return false;
	caps = strtoull(val, NULL, 16);
	free(val);
	return (caps >> CAP_FSETID_BIT) & 1;
}

bool mfsd_cred_in_group(pid_t pid, gid_t fsgid, gid_t gid)
{
	char *val, *p, *end;
	bool in = false;

	if (fsgid == gid)
		return true;
	val = status_line(pid, "Groups");
	if (!val)
		return false;
	for (p = val;; p = end) {
		unsigned long g = strtoul(p, &end, 10);

		if (end == p)
			break;
		if ((gid_t)g == gid) {
			in = true;
			break;
		}
	}
	free(val);
	return in;
}
