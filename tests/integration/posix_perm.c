/* SPDX-License-Identifier: MIT */
/*
 * posix_perm.c: the posix program's permission and ownership checks:
 * perm-prep lays files out as root, perm runs as nobody, perm-root as root
 * afterwards.
 */
#include "posix.h"

/* --- permissions and ownership --------------------------------------------------------- */

#define NOBODY 65534

void perm_prep(void)
{
	CHECK(mkdir("pm", 0755) == 0, "mkdir pm (root, 0755)");
	put_file("pm/rootfile", "secret", 6, 0600);
	put_file("pm/readable", "public", 6, 0644);
	CHECK(mkdir("pm/tmp", 01777) == 0 && chmod("pm/tmp", 01777) == 0, "sticky pm/tmp");
	put_file("pm/tmp/rootfile", "r", 1, 0666);
	CHECK(mkdir("pm/open", 0777) == 0 && chmod("pm/open", 0777) == 0, "pm/open 0777");
	put_file("pm/open/rootfile", "r", 1, 0666);
	CHECK(chmod("pm/open/rootfile", 0666) == 0, "chmod 0666");
	/* setuid/setgid root files anyone may write (write, truncate, open O_TRUNC) */
	put_file("pm/open/suid", "s", 1, 0666);
	CHECK(chmod("pm/open/suid", 06777) == 0 && (mode_of("pm/open/suid") & 07777) == 06777,
	      "setuid+setgid root file 06777");
	put_file("pm/open/suid-trunc", "s", 1, 0666);
	put_file("pm/open/suid-otrunc", "s", 1, 0666);
	CHECK(chmod("pm/open/suid-trunc", 06777) == 0 && chmod("pm/open/suid-otrunc", 06777) == 0,
	      "two more 06777 root files");
	/*
	 * setgid without group exec: not a setgid program, kept on a write by a
	 * member of the file's group, dropped on one by anybody else (Linux 6.2
	 * and later, setattr_should_drop_sgid; perm-test.sh measures ext4)
	 */
	put_file("pm/open/sgid-noexec", "s", 1, 0666);
	CHECK(chmod("pm/open/sgid-noexec", 02666) == 0 &&
	              chown("pm/open/sgid-noexec", 0, NOBODY) == 0,
	      "02666 root file of group nogroup");
	put_file("pm/open/sgid-noexec-root", "s", 1, 0666);
	CHECK(chmod("pm/open/sgid-noexec-root", 02666) == 0, "02666 root file of group root");
	CHECK(mkdir("pm/mine", 0755) == 0 && chown("pm/mine", NOBODY, NOBODY) == 0,
	      "pm/mine owned by nobody");
	/* a setgid directory of group 4321 that anyone may write in */
	CHECK(mkdir("pm/sgdir", 0777) == 0 && chown("pm/sgdir", 0, 4321) == 0 &&
	              chmod("pm/sgdir", 02777) == 0,
	      "setgid dir pm/sgdir (group 4321, 02777)");
	put_file("pm/open/w666", "w", 1, 0666);
	CHECK(chmod("pm/open/w666", 0666) == 0, "pm/open/w666");
	CHECK(mkdir("pm/noexec", 0700) == 0 && chown("pm/noexec", NOBODY, NOBODY) == 0 &&
	              mkdir("pm/noexec/in", 0755) == 0,
	      "pm/noexec");
}

void check_perm(void)
{
	struct stat st;
	int fd;

	CHECK(geteuid() == NOBODY, "running as nobody");
	ERR(open("pm/new", O_CREAT | O_WRONLY, 0644), EACCES, "create in a root 0755 dir: EACCES");
	ERR(mkdir("pm/nd", 0755), EACCES, "mkdir in a root 0755 dir: EACCES");
	ERR(unlink("pm/readable"), EACCES, "unlink in a root 0755 dir: EACCES");
	ERR(rename("pm/readable", "pm/open/r"), EACCES, "rename out of a root dir: EACCES");
	ERR(open("pm/rootfile", O_RDONLY), EACCES, "read a 0600 root file: EACCES");
	ERR(open("pm/readable", O_WRONLY), EACCES, "write a 0644 root file: EACCES");
	CHECK(has_content("pm/readable", "public"), "read a 0644 root file");
	ERR(chmod("pm/readable", 0666), EPERM, "chmod another's file: EPERM");
	ERR(chown("pm/readable", NOBODY, NOBODY), EPERM, "chown another's file: EPERM");
	ERR(chown("pm/mine", 0, -1), EPERM, "give one's dir away: EPERM");
	ERR(chown("pm/mine", -1, 0), EPERM, "chgrp to a group one is not in: EPERM");
	ERR(utimes("pm/readable", NULL), EACCES, "touch another's read-only file: EACCES");
	ERR(truncate("pm/readable", 0), EACCES, "truncate another's file: EACCES");
	ERR(setxattr("pm/readable", "user.a", "1", 1, 0), EACCES, "setxattr on another's file");
	ERR(setxattr("pm/open/rootfile", "trusted.a", "1", 1, 0), EPERM,
	    "trusted.* as a user: EPERM");
	CHECK(stat("pm/noexec/in", &st) == 0, "search an own 0700 dir");
	CHECK(chmod("pm/noexec", 0600) == 0, "owner chmods its dir");
	ERR(stat("pm/noexec/in", &st), EACCES, "search without x: EACCES");
	CHECK(chmod("pm/noexec", 0700) == 0 && stat("pm/noexec/in", &st) == 0, "x restored");

	/* setuid/setgid cleared by a write from a non-owner without CAP_FSETID */
	fd = open("pm/open/suid", O_WRONLY);
	CHECK(fd >= 0, "open the 06777 file for writing");
	if (fd >= 0) {
		CHECK(write(fd, "w", 1) == 1, "write it");
		close(fd);
	}
	CHECK((mode_of("pm/open/suid") & (S_ISUID | S_ISGID)) == 0,
	      "write clears setuid and setgid: mode %o", mode_of("pm/open/suid") & 07777);
	/* and by truncate(2) and open(O_TRUNC) */
	CHECK(truncate("pm/open/suid-trunc", 0) == 0, "truncate a 06777 root file");
	CHECK((mode_of("pm/open/suid-trunc") & (S_ISUID | S_ISGID)) == 0,
	      "truncate clears setuid and setgid: mode %o", mode_of("pm/open/suid-trunc") & 07777);
	fd = open("pm/open/suid-otrunc", O_WRONLY | O_TRUNC);
	CHECK(fd >= 0, "open a 06777 root file with O_TRUNC");
	if (fd >= 0)
		close(fd);
	CHECK((mode_of("pm/open/suid-otrunc") & (S_ISUID | S_ISGID)) == 0,
	      "open(O_TRUNC) clears setuid and setgid: mode %o",
	      mode_of("pm/open/suid-otrunc") & 07777);
	fd = open("pm/open/sgid-noexec", O_WRONLY);
	CHECK(fd >= 0 && write(fd, "w", 1) == 1, "write the 02666 file");
	if (fd >= 0)
		close(fd);
	CHECK((mode_of("pm/open/sgid-noexec") & 07777) == 02666,
	      "setgid without group exec kept on a write by a group member: mode %o",
	      mode_of("pm/open/sgid-noexec") & 07777);
	fd = open("pm/open/sgid-noexec-root", O_WRONLY);
	CHECK(fd >= 0 && write(fd, "w", 1) == 1, "write the 02666 file of group root");
	if (fd >= 0)
		close(fd);
	CHECK((mode_of("pm/open/sgid-noexec-root") & 07777) == 0666,
	      "setgid without group exec dropped on a write by a non-member: mode %o",
	      mode_of("pm/open/sgid-noexec-root") & 07777);

	/* own files: chmod ok, setgid dropped when not in the group */
	put_file("pm/mine/f", "m", 1, 0644);
	CHECK(stat("pm/mine/f", &st) == 0 && st.st_uid == NOBODY && st.st_gid == NOBODY,
	      "new file owned by nobody:nogroup");
	CHECK(chmod("pm/mine/f", 06755) == 0 && (mode_of("pm/mine/f") & 07777) == 06755,
	      "owner sets setuid+setgid (own group)");
	CHECK(chown("pm/mine/f", -1, NOBODY) == 0, "owner chowns to its own group");
	CHECK((mode_of("pm/mine/f") & (S_ISUID | S_ISGID)) == 0,
	      "chown by the owner clears setuid/setgid: %o", mode_of("pm/mine/f") & 07777);
	CHECK(chmod("pm/mine/f", 04755) == 0, "owner sets setuid again (for perm-root)");
	CHECK(chmod("pm/mine/f", 0644) == 0 && chmod("pm/mine/f", 04755) == 0, "chmod again");

	/* a setgid directory hands its group to a non-member's files */
	put_file("pm/sgdir/f", "g", 1, 0644);
	CHECK(stat("pm/sgdir/f", &st) == 0 && st.st_gid == 4321 && st.st_uid == NOBODY,
	      "setgid dir: group inherited by a non-member (%u)", (unsigned)st.st_gid);
	CHECK(mkdir("pm/sgdir/d", 0755) == 0 && stat("pm/sgdir/d", &st) == 0 && st.st_gid == 4321 &&
	              (st.st_mode & S_ISGID),
	      "setgid dir: subdir inherits group and setgid");
	CHECK(chmod("pm/sgdir/f", 02755) == 0 && (mode_of("pm/sgdir/f") & S_ISGID) == 0,
	      "chmod g+s by a non-member of the group drops setgid: %o",
	      mode_of("pm/sgdir/f") & 07777);
	CHECK((fd = open("pm/sgdir/x", O_CREAT | O_WRONLY, 02755)) >= 0 &&
	              (mode_of("pm/sgdir/x") & S_ISGID) == 0,
	      "create with setgid by a non-member drops it: %o", mode_of("pm/sgdir/x") & 07777);
	if (fd >= 0)
		close(fd);
	/* times: anyone with write access may set them to now, only the owner to a value */
	CHECK(utimes("pm/open/w666", NULL) == 0, "touch (now) a writable file of another");
	{
		struct timeval tv[2] = {{1000000, 0}, {1000000, 0}};

		ERR(utimes("pm/open/w666", tv), EPERM,
		    "set explicit times on another's file: EPERM");
		CHECK(utimes("pm/mine", tv) == 0 && stat("pm/mine", &st) == 0 &&
		              st.st_mtime == 1000000,
		      "owner sets explicit times");
	}
	CHECK((fd = open("pm/open/w666", O_WRONLY | O_TRUNC)) >= 0 && fstat(fd, &st) == 0 &&
	              st.st_size == 0,
	      "O_TRUNC on a writable file of another");
	if (fd >= 0)
		close(fd);
	ERR(chmod("pm/open/w666", 0600), EPERM, "chmod a writable file of another: EPERM");
	if (system("grep -qx 1 /proc/sys/fs/protected_hardlinks") == 0)
		ERR(link("pm/rootfile", "pm/open/ln"), EPERM,
		    "hard link to an unreadable file of another (protected_hardlinks): EPERM");

	/* sticky directory */
	put_file("pm/tmp/mine", "n", 1, 0644);
	ERR(unlink("pm/tmp/rootfile"), EPERM, "sticky: unlink another's file: EPERM");
	ERR(rename("pm/tmp/rootfile", "pm/tmp/x"), EPERM, "sticky: rename another's file: EPERM");
	ERR(rename("pm/tmp/mine", "pm/tmp/rootfile"), EPERM,
	    "sticky: rename over another's file: EPERM");
	CHECK(has_content("pm/tmp/rootfile", "r"), "sticky: writable content still writable");
	CHECK(rename("pm/tmp/mine", "pm/tmp/mine2") == 0 && unlink("pm/tmp/mine2") == 0,
	      "sticky: own file renamed and removed");
	/* non-sticky 0777 dir: anyone may remove */
	CHECK(unlink("pm/open/rootfile") == 0, "non-sticky 0777: unlink another's file");
	CHECK(mkdir("pm/open/nd", 0777) == 0, "mkdir in 0777");
	CHECK(stat("pm/open/nd", &st) == 0 && st.st_uid == NOBODY && (st.st_mode & 0777) == 0755,
	      "mkdir applies the umask (%o)", st.st_mode & 0777);
}

void check_perm_root(void)
{
	struct stat st;

	/* root (not the owner) chowns nobody's setuid file: setuid cleared */
	CHECK(stat("pm/mine/f", &st) == 0 && (st.st_mode & 07777) == 04755, "nobody's 04755 file");
	CHECK(chown("pm/mine/f", 0, 0) == 0 && stat("pm/mine/f", &st) == 0 && st.st_uid == 0,
	      "root chowns it");
	CHECK((st.st_mode & S_ISUID) == 0, "chown by a non-owner clears setuid: %o",
	      st.st_mode & 07777);
	/* a setgid file without group exec keeps S_ISGID (mandatory locking bit) on chown */
	CHECK(chmod("pm/mine/f", 02644) == 0 && chown("pm/mine/f", NOBODY, -1) == 0 &&
	              (mode_of("pm/mine/f") & S_ISGID),
	      "chown keeps setgid without group exec");
	/* root writes keep setuid (CAP_FSETID) */
	CHECK(chmod("pm/mine/f", 04755) == 0, "chmod 04755");
	{
		int fd = open("pm/mine/f", O_WRONLY);

		CHECK(fd >= 0 && write(fd, "r", 1) == 1, "root writes");
		if (fd >= 0)
			close(fd);
	}
	CHECK(mode_of("pm/mine/f") & S_ISUID, "a root write keeps setuid");
	/* any write drops security.capability (file capabilities), root's too */
	{
		/* struct vfs_cap_data, revision 2: cap_net_bind_service permitted */
		static const uint32_t cap[5] = {0x02000000, 1u << 10, 0, 0, 0};
		int fd;

		CHECK(setxattr("pm/mine/f", "security.capability", cap, sizeof(cap), 0) == 0,
		      "set security.capability: %s", strerror(errno));
		CHECK(getxattr("pm/mine/f", "security.capability", NULL, 0) == sizeof(cap),
		      "security.capability is there");
		fd = open("pm/mine/f", O_WRONLY);
		CHECK(fd >= 0 && write(fd, "c", 1) == 1, "root writes again");
		if (fd >= 0)
			close(fd);
		ERR(getxattr("pm/mine/f", "security.capability", NULL, 0), ENODATA,
		    "the write dropped security.capability");
	}
	CHECK(system("rm -rf pm") == 0, "cleanup pm");
}
