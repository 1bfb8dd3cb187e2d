/* SPDX-License-Identifier: MIT */
/*
 * Setuid and setgid (see suid.h): the caller's groups and CAP_FSETID from
 * /proc, and the SETATTR's share of clearing the bits.  The pid of a FUSE
 * request is that of the calling thread, in the daemon's pid namespace;
 * /proc/PID/status answers for any thread id.  A thread that has gone counts
 * as outside every group and without the capability, so what depends on it
 * errs on the side of dropping setgid.  Calls the core (mfs_getattr), libc
 * and libfuse.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfs_ops.h"
#include "suid.h"

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

/* Does thread @pid hold CAP_FSETID?  Unreadable (gone): false. */
static bool cred_fsetid(pid_t pid)
{
	char *val = status_line(pid, "CapEff");
	uint64_t caps;

	if (!val)
		return false;
	caps = strtoull(val, NULL, 16);
	free(val);
	return (caps >> CAP_FSETID_BIT) & 1;
}

/* Is thread @pid, of filesystem gid @fsgid, a member of group @gid?  Unreadable: false. */
static bool cred_in_group(pid_t pid, gid_t fsgid, gid_t gid)
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

bool mfsd_drops_sgid(fuse_req_t req, gid_t gid, bool no_fsetid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (cred_in_group(ctx->pid, ctx->gid, gid))
		return false;
	return no_fsetid || !cred_fsetid(ctx->pid);
}

/*
 * The setuid/setgid part of a SETATTR (HANDLE_KILLPRIV_V2).  The kernel sends
 * FATTR_KILL_SUIDGID with every chown of a non-directory and with a truncate
 * by a caller without CAP_FSETID.  Before a write, fallocate or
 * copy_file_range by such a caller to a file with a bit to clear, its
 * file_remove_privs() sends a SETATTR that sets nothing (FUSE drops its kill
 * bits), and takes the mode of the reply.  Each clears setuid, and setgid if
 * group-executable (the core), and setgid without group exec if the caller is
 * outside the file's group and lacks CAP_FSETID (MFS_SET_KILL_SGID here).  An
 * empty SETATTR from a caller with CAP_FSETID comes of a write that drops
 * security.capability, or of chown(f, -1, -1): both leave the mode alone
 * here, though ext4 clears setuid on the second.
 */
int mfsd_setattr_kill(fuse_req_t req, fuse_ino_t ino, int to_set, unsigned *valid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat st;
	int ret;

	/* "nothing": with -o writeback the kernel sends the ctime of a chown(f, -1, -1) */
	to_set &= ~FUSE_SET_ATTR_CTIME;
	if (to_set && !(to_set & FUSE_SET_ATTR_KILL_SUID))
		return 0;
	ret = mfs_getattr(D(req)->fs, ino, &st);
	if (ret || !(st.st_mode & (S_ISUID | S_ISGID)) || S_ISDIR(st.st_mode))
		return ret;
	if (!to_set) {
		if (!S_ISREG(st.st_mode) || cred_fsetid(ctx->pid))
			return 0;
		*valid |= MFS_SET_KILL_SUIDGID;
	}
	/* a chown says nothing of the caller's capabilities, a truncate does */
	if (mfsd_sgid_noexec(st.st_mode) &&
	    mfsd_drops_sgid(req, st.st_gid, !(to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))))
		*valid |= MFS_SET_KILL_SGID;
	return 0;
}
