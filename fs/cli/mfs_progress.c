/* SPDX-License-Identifier: MIT */
/* mfs_progress: a one-line progress bar on a terminal (mfs_progress.h). */
#include "mfs_progress.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void mfs_progress_init(struct mfs_progress *p, int fd, const char *label)
{
	p->fd = isatty(fd) ? fd : -1;
	p->label = label;
	p->shown = -1;
	p->drawn = false;
}

static unsigned columns(int fd)
{
	struct winsize ws;

	if (!ioctl(fd, TIOCGWINSZ, &ws) && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

void mfs_progress_update(struct mfs_progress *p, unsigned long long done, unsigned long long total)
{
	char line[512];
	size_t cols, width, fill, o;
	int permille;

	if (p->fd < 0)
		return;
	if (done > total)
		done = total;
	permille = total ? (int)(done * 1000 / total) : 1000;
	if (permille == p->shown && p->drawn)
		return;
	p->shown = permille;
	/* "\rLABEL: |" bar "| 100.0%": the bar takes what the terminal leaves */
	cols = columns(p->fd);
	o = (size_t)snprintf(line, sizeof(line), "\r%s: |", p->label);
	if (o > sizeof(line) / 2)
		o = sizeof(line) / 2;
	if (cols > sizeof(line) - 16)
		cols = sizeof(line) - 16;
	width = cols > o + 10 + 10 ? cols - o - 10 : 10;
	fill = width * (size_t)permille / 1000;
	memset(line + o, '=', fill);
	memset(line + o + fill, ' ', width - fill);
	o += width;
	o += (size_t)snprintf(line + o, sizeof(line) - o, "| %3d.%d%%", permille / 10,
	                      permille % 10);
	if (write(p->fd, line, o) > 0)
		p->drawn = true;
}

void mfs_progress_clear(struct mfs_progress *p)
{
	/* carriage return, erase to the end of the line (VT100: every terminal) */
	if (p->fd >= 0 && p->drawn && write(p->fd, "\r\033[K", 4) > 0)
		p->drawn = false;
}
