/* SPDX-License-Identifier: MIT */
/*
 * uring_fault.c: test_uring's "faults" test case: media errors, transient
 * errors, short reads and the synchronous calls, against a disk this program
 * serves itself over /dev/fuse and fails on demand.
 */
#include "uring.h"
/* --- a disk that fails on demand: a file served over /dev/fuse ---------- */

/*
 * A 4 MiB in-memory disk exported as "disk" on a FUSE mount, served with the
 * raw protocol by a child process (FOPEN_DIRECT_IO: every read of the backend
 * reaches the server as is).  Reads touching a bad range fail with EIO like a
 * bad sector; fail_next fails the next reads wherever they are (a transient
 * error); short_reads makes the next reads return half.  No fallocate.
 *
 * The server is a separate process that dies with the test (PDEATHSIG), and
 * the test never holds /dev/fuse: a test that fails and exits must not wait
 * on a FUSE request that only its own dead thread could answer.
 *
 * Short reads: io_uring retries a short read on a regular file inside the
 * kernel, so the server answers that retry with 0 bytes (end of file) and
 * the short count reaches the backend.  (Short writes cannot be tested this
 * way: FUSE's async direct write does not advance ki_pos, so the kernel's own
 * retry rewrites the same offset.)
 */
#define FDISK_SIZE (4 * MiB)

struct fdisk {
	pid_t server;
	char mnt[200];
	char path[256];
	char *data;                    /* shared with the server */
	uint64_t bad_lo[2], bad_hi[2]; /* byte ranges that fail reads */
	_Atomic unsigned fail_next, short_reads;
	_Atomic bool eof_next; /* answer the kernel's retry of a short read with 0 */
	_Atomic unsigned eio_replies, short_replies, reads;
};

static void fdisk_reply(int fd, uint64_t unique, int error, const void *p, size_t len)
{
	struct fuse_out_header oh;
	struct iovec iov[2];

	if (error)
		len = 0;
	oh.len = (uint32_t)(sizeof(oh) + len);
	oh.error = error;
	oh.unique = unique;
	iov[0].iov_base = &oh;
	iov[0].iov_len = sizeof(oh);
	iov[1].iov_base = (void *)p;
	iov[1].iov_len = len;
	if (writev(fd, iov, len ? 2 : 1) < 0 && errno != ENOENT)
		perror("test_uring: fuse reply");
}

static void fdisk_attr(struct fuse_attr *a, uint64_t nodeid)
{
	memset(a, 0, sizeof(*a));
	a->ino = nodeid;
	a->blksize = 4096;
	if (nodeid == FUSE_ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0600;
		a->nlink = 1;
		a->size = FDISK_SIZE;
		a->blocks = FDISK_SIZE / 512;
	}
}

static bool fdisk_is_bad(struct fdisk *d, uint64_t off, uint64_t len)
{
	unsigned i;

	for (i = 0; i < 2; i++)
		if (d->bad_hi[i] > d->bad_lo[i] && off < d->bad_hi[i] && off + len > d->bad_lo[i])
			return true;
	return false;
}

static void fdisk_read(struct fdisk *d, int fd, const struct fuse_in_header *ih,
                       const struct fuse_read_in *r)
{
	uint64_t off = r->offset;
	uint32_t size = r->size;
	int err = 0;

	d->reads++;
	if (off >= FDISK_SIZE)
		size = 0;
	else if (off + size > FDISK_SIZE)
		size = (uint32_t)(FDISK_SIZE - off);
	if (d->fail_next) {
		d->fail_next--;
		err = -EIO;
	} else if (fdisk_is_bad(d, off, size)) {
		err = -EIO;
	} else if (d->eof_next) {
		d->eof_next = false;
		size = 0;
	} else if (d->short_reads && size > 4096) {
		d->short_reads--;
		d->short_replies++;
		d->eof_next = true;
		size = (size / 2) & ~4095u;
	}
	if (err)
		d->eio_replies++;
	fdisk_reply(fd, ih->unique, err, d->data + off, size);
}

/* The server loop: until the mount goes away (read fails with ENODEV). */
static void fdisk_serve(struct fdisk *d, int fd)
{
	const size_t bufsz = 1024 * 1024 + 4096;
	char *buf = malloc(bufsz);

	while (buf) {
		ssize_t n = read(fd, buf, bufsz);
		struct fuse_in_header *ih = (struct fuse_in_header *)buf;
		void *in = buf + sizeof(*ih);

		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
				continue;
			break;
		}
		switch (ih->opcode) {
		case FUSE_INIT: {
			struct fuse_init_out out;

			memset(&out, 0, sizeof(out));
			out.major = FUSE_KERNEL_VERSION;
			out.minor = FUSE_KERNEL_MINOR_VERSION;
			out.max_readahead = ((struct fuse_init_in *)in)->max_readahead;
			out.max_write = 128 * 1024;
			out.max_background = 64;
			out.congestion_threshold = 48;
			out.time_gran = 1;
			fdisk_reply(fd, ih->unique, 0, &out, sizeof(out));
			break;
		}
		case FUSE_LOOKUP:
			if (ih->nodeid == FUSE_ROOT_ID && !strcmp(in, "disk")) {
				struct fuse_entry_out e;

				memset(&e, 0, sizeof(e));
				e.nodeid = 2;
				e.generation = 1;
				e.entry_valid = e.attr_valid = 3600;
				fdisk_attr(&e.attr, 2);
				fdisk_reply(fd, ih->unique, 0, &e, sizeof(e));
			} else {
				fdisk_reply(fd, ih->unique, -ENOENT, NULL, 0);
			}
			break;
		case FUSE_GETATTR:
		case FUSE_SETATTR: {
			struct fuse_attr_out o;

			memset(&o, 0, sizeof(o));
			o.attr_valid = 3600;
			fdisk_attr(&o.attr, ih->nodeid);
			fdisk_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_OPEN: {
			struct fuse_open_out o;

			memset(&o, 0, sizeof(o));
			o.fh = 1;
			o.open_flags = FOPEN_DIRECT_IO;
			fdisk_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_READ:
			fdisk_read(d, fd, ih, in);
			break;
		case FUSE_WRITE: {
			struct fuse_write_in *w = in;
			struct fuse_write_out o;

			memset(&o, 0, sizeof(o));
			if (w->offset >= FDISK_SIZE || w->size > FDISK_SIZE - w->offset) {
				fdisk_reply(fd, ih->unique, -ENOSPC, NULL, 0);
				break;
			}
			memcpy(d->data + w->offset, w + 1, w->size);
			o.size = w->size;
			fdisk_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_FLUSH:
		case FUSE_RELEASE:
		case FUSE_FSYNC:
		case FUSE_ACCESS:
		case FUSE_DESTROY:
			fdisk_reply(fd, ih->unique, 0, NULL, 0);
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break; /* no reply */
		default:
			fdisk_reply(fd, ih->unique, -ENOSYS, NULL, 0);
		}
	}
	free(buf);
}

static struct fdisk *fdisk_start(void)
{
	struct fdisk *d;
	pid_t parent = getpid(), pid;
	uint64_t seed = 4242;
	int pfd[2], err = 0;

	d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(d, MAP_FAILED);
	memset(d, 0, sizeof(*d));
	d->data = mmap(NULL, FDISK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(d->data, MAP_FAILED);
	fill_random(d->data, FDISK_SIZE, &seed);
	snprintf(d->mnt, sizeof(d->mnt), "%s/fuse", workdir);
	snprintf(d->path, sizeof(d->path), "%s/disk", d->mnt);
	while (umount2(d->mnt, MNT_DETACH) == 0)
		; /* left by an earlier test that failed */
	ck_assert_msg(mkdir(d->mnt, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", d->mnt,
	              strerror(errno));
	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork(); /* not into d->server: the child would write 0 there, d is shared */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char opts[128];
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(pfd[0]);
		fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
		snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
		if (fd < 0 || mount("mendblk-fault", d->mnt, "fuse.mendblk-fault",
		                    MS_NOSUID | MS_NODEV, opts) < 0)
			err = errno;
		if (write(pfd[1], &err, sizeof(err)) != sizeof(err) || err)
			_exit(1);
		close(pfd[1]);
		fdisk_serve(d, fd);
		_exit(0);
	}
	d->server = pid;
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &err, sizeof(err)), sizeof(err));
	close(pfd[0]);
	ck_assert_msg(err == 0, "mount fuse on %s: %s", d->mnt, strerror(err));
	return d;
}

static void fdisk_stop(struct fdisk *d)
{
	int ret = umount2(d->mnt, 0), err = errno, st = 0;

	if (ret) {
		kill(d->server, SIGKILL);
		umount2(d->mnt, MNT_DETACH);
	}
	ck_assert_int_eq(waitpid(d->server, &st, 0), d->server);
	ck_assert_msg(ret == 0, "umount %s: %s", d->mnt, strerror(err));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fuse server ended with %d", st);
	rmdir(d->mnt);
	munmap(d->data, FDISK_SIZE);
	munmap(d, sizeof(*d));
}

static struct blk_dev *fdisk_open(struct fdisk *d, unsigned flags)
{
	struct blk_dev *dev = NULL;
	char err[512] = "";
	int ret = open_dev(d->path, flags, 1, 16, &dev, err, sizeof(err));

	ck_assert_msg(ret == 0, "open %s: %d: %s", d->path, ret, err);
	ck_assert_uint_eq(dev_lbs(dev), 512);
	ck_assert_int_eq(fd_is_direct(d->path), 1);
	return dev;
}

/* Bios over [sector, +len) split into three segments cut at @cuts (bytes). */
static void seg3(struct tbio *tb, int op, uint64_t sector, char *mem, uint32_t len, uint32_t cut1,
                 uint32_t cut2, struct waiter *w, unsigned flags)
{
	memset(tb, 0, sizeof(*tb));
	tb->bio.op = (uint8_t)op;
	tb->bio.sector = sector;
	tb->bio.len = len;
	tb->bio.flags = (uint8_t)flags;
	tb->bio.end_io = waiter_end_io;
	tb->bio.private = w;
	tb->bio.iov = tb->iov;
	tb->iov[0] = (struct iovec){mem, cut1};
	tb->iov[1] = (struct iovec){mem + cut1, cut2 - cut1};
	tb->iov[2] = (struct iovec){mem + cut2, len - cut2};
	tb->bio.nr_segs = 3;
}

/*
 * A read meets a bad sector the engine did not know about: the merged
 * request fails as a whole, the backend probes block by block, the first
 * bio completes, the second fails naming sector 1000 with the clean bytes
 * before it delivered, and the sector is now in the poison table.
 */
START_TEST(test_media_error)
{
	bool polled = _i & 1;
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, polled ? BLK_CFG_POLLED : 0);
	char *mem = xalloc(256 * 1024);
	struct blk_range r[4];
	struct blk_recovery rec;
	struct blk_stats st;
	struct tbio a, b;
	struct blk_plug plug;
	struct waiter w;

	d->bad_lo[0] = 1000 * 512;
	d->bad_hi[0] = 1001 * 512;
	d->bad_lo[1] = 1500 * 512;
	d->bad_hi[1] = 1501 * 512;
	waiter_init(&w);
	seg3(&a, BLK_OP_READ, 768, mem, 64 * 1024, 8192, 40960, &w, 0);
	seg3(&b, BLK_OP_READ, 896, mem + 64 * 1024, 64 * 1024, 20480, 45056, &w, 0);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a.bio);
	blk_submit_bio(dev, &b.bio);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_uint_gt(d->eio_replies, 0);
	ck_assert_uint_eq(a.bio.status, BLK_STS_OK);
	ck_assert_uint_eq(a.bio.done, 64 * 1024);
	ck_assert_uint_eq(b.bio.status, BLK_STS_MEDIA);
	ck_assert_uint_eq(b.bio.bad_sector, 1000);
	ck_assert_uint_eq(b.bio.done, (1000 - 896) * 512);
	check_equal(mem, d->data + 768 * 512, 64 * 1024 + (1000 - 896) * 512, "clean prefix");
	blk_dev_get_stats(dev, &st);
	ck_assert_uint_eq(st.media_errors, 1);
	/* recorded: the table now holds the sector */
	ck_assert_uint_eq(blk_poison_lookup(dev, 0, 8192, r, 4, NULL), 1);
	ck_assert_uint_eq(r[0].sector, 1000);
	ck_assert_uint_eq(r[0].nr, 1);

	/* known poison now: the same answer through the engine's slow path */
	memset(mem, 0, 64 * 1024);
	ck_assert_int_eq(blk_read(dev, 896, mem, 64 * 1024, 0), -EIO);

	/* a recovery read over an unknown bad sector: zero-filled, reported */
	memset(&rec, 0, sizeof(rec));
	rec.ranges = r;
	rec.max = 4;
	memset(mem, 0xee, 32 * 1024);
	seg3(&a, BLK_OP_READ, 1472, mem, 32 * 1024, 4096, 16384, &w, BLK_BIO_RECOVERY);
	a.bio.rec = &rec;
	blk_submit_bio(dev, &a.bio);
	ck_assert_int_eq(waiter_wait(dev, &w, 3, polled, NULL), 0);
	ck_assert_uint_eq(a.bio.status, BLK_STS_OK);
	ck_assert_uint_eq(rec.zeroed, 1);
	ck_assert_uint_eq(rec.nr, 1);
	ck_assert_uint_eq(r[0].sector, 1500);
	check_equal(mem, d->data + 1472 * 512, (1500 - 1472) * 512, "recovery prefix");
	check_equal(mem + (1501 - 1472) * 512, d->data + 1501 * 512, (1536 - 1501) * 512,
	            "recovery suffix");
	for (unsigned i = 0; i < 512; i++)
		ck_assert_int_eq(mem[(1500 - 1472) * 512 + i], 0);
	ck_assert_uint_eq(blk_poison_count(dev), 2);
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/* A read fails once and not again: the probe reads it all, the bios complete. */
START_TEST(test_transient_error)
{
	bool polled = _i & 1;
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, polled ? BLK_CFG_POLLED : 0);
	char *mem = xalloc(128 * 1024);
	struct tbio a, b;
	struct blk_plug plug;
	struct waiter w;

	waiter_init(&w);
	d->fail_next = 1;
	seg3(&a, BLK_OP_READ, 64, mem, 64 * 1024, 512, 33280, &w, 0);
	seg3(&b, BLK_OP_READ, 192, mem + 64 * 1024, 64 * 1024, 61440, 64512, &w, 0);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a.bio);
	blk_submit_bio(dev, &b.bio);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_uint_eq(d->eio_replies, 1);
	ck_assert_uint_eq(a.bio.status, BLK_STS_OK);
	ck_assert_uint_eq(b.bio.status, BLK_STS_OK);
	check_equal(mem, d->data + 64 * 512, 128 * 1024, "after a transient error");
	ck_assert_uint_eq(blk_poison_count(dev), 0);
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/*
 * Reads that return half: the backend completes what moved and re-issues
 * the rest, from the middle of a bio and of a segment, on the direct path
 * and through the bounce buffer.
 */
START_TEST(test_short_reads)
{
	bool polled = _i & 1, unaligned = _i & 2;
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, polled ? BLK_CFG_POLLED : 0);
	char *mem = xalloc(128 * 1024 + 8), *g = unaligned ? mem + 5 : mem;
	struct tbio a, b;
	struct blk_plug plug;
	struct waiter w;
	unsigned reads0;

	waiter_init(&w);
	reads0 = d->reads;
	d->short_reads = 3;
	seg3(&a, BLK_OP_READ, 2048, g, 64 * 1024, 61440, 62464, &w, 0);
	seg3(&b, BLK_OP_READ, 2176, g + 64 * 1024, 64 * 1024, 8192, 40960, &w, 0);
	blk_start_plug(&plug);
	blk_submit_bio(dev, &a.bio);
	blk_submit_bio(dev, &b.bio);
	blk_finish_plug(&plug);
	ck_assert_int_eq(waiter_wait(dev, &w, 2, polled, NULL), 0);
	ck_assert_msg(w.errors == 0, "short reads: status %u", w.first_err);
	ck_assert_uint_eq(d->short_reads, 0);
	ck_assert_uint_eq(d->short_replies, 3);
	/* 128K: 64K, retry 0; rest 64K: 32K, retry 0; 32K: 16K, retry 0; 16K */
	ck_assert_uint_eq(d->reads - reads0, 7);
	ck_assert_uint_eq(a.bio.done, a.bio.len);
	ck_assert_uint_eq(b.bio.done, b.bio.len);
	check_equal(g, d->data + 2048 * 512, 128 * 1024, "after short reads");
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

/* The synchronous path of the poison code: read_sync and write_sync directly. */
START_TEST(test_sync_fuse)
{
	struct fdisk *d = fdisk_start();
	struct blk_dev *dev = fdisk_open(d, 0);
	char *mem = xalloc(16384), *buf = mem + 3;
	uint64_t bad = 0;

	d->bad_lo[0] = 1000 * 512;
	d->bad_hi[0] = 1001 * 512;
	/* clean, unaligned position and memory */
	ck_assert_int_eq(dev->ops->read_sync(dev, 990 * 512 + 7, buf, 4000, &bad), 0);
	check_equal(buf, d->data + 990 * 512 + 7, 4000, "read_sync");
	/* across the bad sector: -EIO naming it, aligned and not */
	ck_assert_int_eq(dev->ops->read_sync(dev, 996 * 512, mem, 8192, &bad), -EIO);
	ck_assert_uint_eq(bad, 1000);
	bad = 0;
	ck_assert_int_eq(dev->ops->read_sync(dev, 999 * 512 + 100, buf, 1000, &bad), -EIO);
	ck_assert_uint_eq(bad, 1000);
	/* read-modify-write of partial blocks */
	memset(buf, 0x77, 3000);
	ck_assert_int_eq(dev->ops->write_sync(dev, 3000 * 512 + 300, buf, 3000), 0);
	for (unsigned i = 0; i < 3000; i++)
		ck_assert_int_eq((unsigned char)d->data[3000 * 512 + 300 + i], 0x77);
	ck_assert_int_eq(dev->ops->flush_sync(dev), 0);
	ck_assert_int_eq(dev->ops->clear_poison(dev, 1000, 1), 0);
	blk_dev_close(dev);
	fdisk_stop(d);
	free(mem);
}
END_TEST

TCase *uring_fault_tcase(void)
{
	TCase *tc = tcase_create("faults");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_media_error, 0, 2);
	tcase_add_loop_test(tc, test_transient_error, 0, 2);
	tcase_add_loop_test(tc, test_short_reads, 0, 4);
	tcase_add_test(tc, test_sync_fuse);
	return tc;
}
