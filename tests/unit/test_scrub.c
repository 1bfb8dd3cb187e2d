/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the scrub's metadata check (fs/core/meta.c,
 * mfs_meta_scrub_block): both copies read from the device whatever the cache
 * holds; a corrupt or poisoned copy rewritten from the good one; both bad
 * lost; a dirty buffer skipped; nothing written read-only; and the cache
 * keeps what it held (the scrubbed block passes through, evicting nothing).
 * Images are sparse files under /tmp built by testfs.h.
 *
 * And whole scrubs (fs/core/scrub.c, scrub_fixed.c: mfs_scrub_step from the
 * start to the end) on images made by the real mkfs.mendfs and mounted with
 * mfs_mount (fixture.h): a byte flipped on the image of a data_csum
 * filesystem is found, counted and named (file, byte range: a data_csum
 * event, BADRANGES), once per mount, and not after an overwrite; a bad
 * superblock copy, either one, is rewritten (metadata_healed event); a live
 * journal block's bad copy is rewritten from its twin, and one with no good
 * copy is checkpointed away, the data it held intact after a remount.
 *
 * A second scrub beside a running one is refused (EBUSY): the rule the
 * daemon's MENDFS_IOC_SCRUB applies (mfs_scrub_owner_claim, _undo,
 * _stepped) with fake processes and a fake clock: the owner's own steps,
 * another's refused while the owner lives and stepped within
 * MFS_SCRUB_OWNER_IDLE_S, taken after it exited or went idle, after the
 * end, an unknown (-1) owner, a failed step that claims nothing.  Through a
 * mount: tests/integration/lib-scrub-test.sh and scrub-test.sh.
 */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "file_util.h"
#include "mfs_recovery.h"
#include "mfs_scrub.h"
#include "testfs.h"
#include "check_run.h"

#define NB 4096 /* 16 MiB */

static uint8_t *bufs(unsigned n)
{
	uint8_t *b = aligned_alloc(MFS_BLOCK_SIZE, (size_t)n * MFS_BLOCK_SIZE);

	ck_assert_ptr_nonnull(b);
	return b;
}

/* A mounted test filesystem with block @val written (both copies) at meta0 + 3. */
static uint64_t setup(struct tfs *t, unsigned max_bufs)
{
	uint64_t blk;

	tfs_create(t, NB, 64, 256, true);
	tfs_mount(t, max_bufs);
	blk = tfs_meta0(t) + 3;
	tfs_put_block(t, blk, MFS_T_BTREE_NODE, 7);
	mfs_meta_forget(&t->fs, blk);
	return blk;
}

static void corrupt(struct tfs *t, uint64_t blk)
{
	uint8_t *raw = bufs(1);

	tfs_read_raw(t, blk, raw);
	raw[2000] ^= 0x10;
	tfs_write_raw(t, blk, raw);
	free(raw);
}

static bool copies_equal_and_valid(struct tfs *t, uint64_t blk)
{
	uint8_t *a = bufs(2);
	bool ok;

	tfs_read_raw(t, blk, a);
	tfs_read_raw(t, mfs_twin(&t->fs, blk), a + MFS_BLOCK_SIZE);
	ok = !memcmp(a, a + MFS_BLOCK_SIZE, MFS_BLOCK_SIZE) && tfs_block_is(a, 7) &&
	     !mfs_block_verify(a, t->fs.seed, MFS_T_BTREE_NODE, blk);
	free(a);
	return ok;
}

START_TEST(test_scrub_clean)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_CLEAN);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 0);
	ck_assert(copies_equal_and_valid(&t, blk));
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_heals_primary_and_twin)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	corrupt(&t, blk);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert(copies_equal_and_valid(&t, blk));
	corrupt(&t, mfs_twin(&t.fs, blk));
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert(copies_equal_and_valid(&t, blk));
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 2);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_CLEAN);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

/* The cached copy is good: the scrub looks at the device all the same. */
START_TEST(test_scrub_reads_device_under_cache)
{
	uint8_t *tmp = bufs(2);
	struct mfs_buf *b;
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	corrupt(&t, blk);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert(copies_equal_and_valid(&t, blk));
	ck_assert(tfs_block_is(b->data, 7));
	mfs_buf_put(b);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_poisoned_copy)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	ck_assert_int_eq(blk_poison_add(t.dev, blk * MFS_SECTORS_PER_BLOCK + 5, 1), 0);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	ck_assert_uint_eq(blk_poison_count(t.dev), 0); /* the whole-block write cleared it */
	ck_assert(copies_equal_and_valid(&t, blk));
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_both_bad_lost)
{
	uint8_t *tmp = bufs(2);
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	corrupt(&t, blk);
	corrupt(&t, mfs_twin(&t.fs, blk));
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_LOST);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_lost), 1);
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_repairs), 0);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

START_TEST(test_scrub_dirty_skipped_readonly_untouched)
{
	uint8_t *tmp = bufs(2), *raw = bufs(1), *before = bufs(1);
	struct mfs_buf *b;
	struct tfs t;
	uint64_t blk = setup(&t, 64);

	/* dirty: the journal will write both copies; nothing read, nothing written */
	ck_assert_int_eq(mfs_meta_read(&t.fs, blk, MFS_T_BTREE_NODE, &b), 0);
	corrupt(&t, blk);
	mfs_lock(&b->lock);
	b->dirty = true;
	mfs_unlock(&b->lock);
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_SKIPPED);
	mfs_lock(&b->lock);
	b->dirty = false;
	mfs_unlock(&b->lock);
	mfs_buf_put(b);
	ck_assert(!copies_equal_and_valid(&t, blk));
	/* read-only: reported, not rewritten */
	tfs_read_raw(&t, blk, before);
	t.fs.read_only = true;
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_BAD);
	tfs_read_raw(&t, blk, raw);
	ck_assert_mem_eq(raw, before, MFS_BLOCK_SIZE);
	t.fs.read_only = false;
	ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, blk, tmp), MFS_SCRUB_HEALED);
	free(tmp);
	free(raw);
	free(before);
	tfs_destroy(&t);
}
END_TEST

/* A full cache keeps its buffers: the scrubbed blocks pass through it. */
START_TEST(test_scrub_evicts_nothing)
{
	uint8_t *tmp = bufs(2);
	struct mfs_buf *b;
	struct tfs t;
	uint64_t m0, i;

	tfs_create(&t, NB, 64, 256, true);
	tfs_mount(&t, 8);
	m0 = tfs_meta0(&t);
	for (i = 0; i < 16; i++) {
		tfs_put_block(&t, m0 + i, MFS_T_BTREE_NODE, i);
		mfs_meta_forget(&t.fs, m0 + i);
	}
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(mfs_meta_read(&t.fs, m0 + i, MFS_T_BTREE_NODE, &b), 0);
		mfs_buf_put(b);
	}
	ck_assert_uint_eq(t.fs.nr_bufs, 8);
	for (i = 8; i < 16; i++)
		ck_assert_int_eq(mfs_meta_scrub_block(&t.fs, m0 + i, tmp), MFS_SCRUB_CLEAN);
	ck_assert_uint_eq(t.fs.nr_bufs, 8);
	/* blocks 0..7 are still cached: reading them reads nothing from the device */
	i = atomic_load(&t.fs.stats.meta_reads);
	for (uint64_t k = 0; k < 8; k++) {
		ck_assert_int_eq(mfs_meta_read(&t.fs, m0 + k, MFS_T_BTREE_NODE, &b), 0);
		ck_assert(tfs_block_is(b->data, k));
		mfs_buf_put(b);
	}
	ck_assert_uint_eq(atomic_load(&t.fs.stats.meta_reads), i);
	free(tmp);
	tfs_destroy(&t);
}
END_TEST

/* A whole scrub of the fixture's filesystem, in small steps; its counts. */
static struct mfs_scrub_counts scrub_all(void)
{
	struct mfs_scrub_cursor cur = {MFS_SCRUB_PHASE_META, 0};
	struct mfs_scrub_counts c;
	unsigned steps = 0;

	memset(&c, 0, sizeof(c));
	while (cur.phase != MFS_SCRUB_PHASE_DONE) {
		ck_assert_int_eq(mfs_scrub_step(fs, &cur, 64, 256 << 10, &c), 0);
		ck_assert_uint_lt(++steps, 100000);
	}
	ck_assert_int_eq(c.refresh_err, 0);
	return c;
}

/* Flip byte @off of the (unmounted) image, as dd would. */
static void flip_image_byte(uint64_t off)
{
	int fd = open(img, O_RDWR);
	uint8_t v;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &v, 1, (off_t)off), 1);
	v ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &v, 1, (off_t)off), 1);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* Flip a byte of device block @blk, behind the mounted filesystem. */
static void flip_device_block(uint64_t blk)
{
	uint8_t *b = bufs(1);

	ck_assert_int_eq(blk_read(fs->dev, blk * MFS_SECTORS_PER_BLOCK, b, MFS_BLOCK_SIZE, 0), 0);
	b[1000] ^= 0x5a;
	ck_assert_int_eq(blk_write(fs->dev, blk * MFS_SECTORS_PER_BLOCK, b, MFS_BLOCK_SIZE, 0), 0);
	free(b);
}

/* Are device blocks @a and @b equal? */
static bool device_blocks_equal(uint64_t a, uint64_t b)
{
	uint8_t *x = bufs(2);
	bool eq;

	ck_assert_int_eq(blk_read(fs->dev, a * MFS_SECTORS_PER_BLOCK, x, MFS_BLOCK_SIZE, 0), 0);
	ck_assert_int_eq(
	        blk_read(fs->dev, b * MFS_SECTORS_PER_BLOCK, x + MFS_BLOCK_SIZE, MFS_BLOCK_SIZE, 0),
	        0);
	eq = !memcmp(x, x + MFS_BLOCK_SIZE, MFS_BLOCK_SIZE);
	free(x);
	return eq;
}

static void expect_healed_event(uint64_t seq, uint64_t bad, uint64_t block)
{
	struct mfs_event ev[4];
	struct mfs_events_pos pos;

	ck_assert_int_eq(mfs_events_read(fs, seq, ev, 4, 0, &pos), 1);
	ck_assert_uint_eq(ev[0].seq, seq);
	ck_assert_uint_eq(ev[0].kind, MFS_EV_META_HEALED);
	ck_assert_uint_eq(ev[0].cause, MFS_EVC_CORRUPT);
	ck_assert_uint_eq(ev[0].sector, bad * MFS_SECTORS_PER_BLOCK);
	ck_assert_uint_eq(ev[0].count, MFS_SECTORS_PER_BLOCK);
	ck_assert_uint_eq(ev[0].block, block);
	ck_assert_uint_eq(ev[0].ino, 0);
}

static void setup_csum(void)
{
	fixture_create("scrub", "-O data_csum", "64M");
}

static void setup_plain(void)
{
	fixture_create("scrub", "", "64M");
}

#define NBLK 16u

/*
 * data_csum: a byte of sector 3 of block 5 of /f flipped on the image while
 * unmounted.  No read touches it: the scrub finds it, once, names /f and
 * bytes [22016, 22528); a clean file beside it is not named; a second scrub
 * counts it again with no second event; after an overwrite nothing.
 */
START_TEST(test_scrub_data_csum_flip)
{
	uint8_t *ref = malloc(NBLK * BS);
	uint64_t f = fixture_file("f"), g = fixture_file("g"), pblk, next;
	struct mfs_scrub_counts c;
	struct mfs_event ev[4];
	struct mfs_events_pos pos;
	struct mfs_frange r[4];
	unsigned nr;
	bool last;

	ck_assert(fs->data_csum);
	fill(ref, NBLK * BS, 5);
	write_all(f, ref, NBLK * BS, 0);
	write_all(g, ref, 4 * BS, 0);
	bmap(f, 5, &pblk, NULL, NULL);
	ck_assert_uint_ne(pblk, 0);
	fixture_umount();
	flip_image_byte(pblk * BS + 3 * 512 + 100);
	fixture_mount(NULL);
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 4, 0, &pos), 0);

	c = scrub_all();
	ck_assert_uint_eq(c.csum_found, 1);
	ck_assert_uint_eq(c.poison_found, 0);
	ck_assert_uint_eq(c.meta_healed + c.meta_bad + c.meta_lost, 0);
	ck_assert_uint_ge(c.data_bytes, (NBLK + 4) * BS);
	ck_assert_uint_gt(c.meta_checked, 0);
	/* named: one data_csum event, file and byte range */
	ck_assert_int_eq(mfs_events_read(fs, 0, ev, 4, 0, &pos), 1);
	ck_assert_uint_eq(ev[0].kind, MFS_EV_DATA_CSUM);
	ck_assert_uint_eq(ev[0].cause, MFS_EVC_CORRUPT);
	ck_assert_uint_eq(ev[0].sector, pblk * MFS_SECTORS_PER_BLOCK + 3);
	ck_assert_uint_eq(ev[0].count, 1);
	ck_assert_uint_eq(ev[0].ino, f);
	ck_assert_str_eq(ev[0].path, "/f");
	ck_assert_uint_eq(ev[0].offset, 22016);
	ck_assert_uint_eq(ev[0].length, 512);
	/* and in the damage report (BADRANGES): exactly it, nothing in g */
	ck_assert_int_eq(mfs_badranges(fs, f, 0, r, 4, &nr, &next, &last), 0);
	ck_assert(last);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(r[0].offset, 22016);
	ck_assert_uint_eq(r[0].length, 512);
	ck_assert_int_eq(mfs_badranges(fs, g, 0, r, 4, &nr, &next, &last), 0);
	ck_assert_uint_eq(nr, 0);
	/* found again, not a new event */
	c = scrub_all();
	ck_assert_uint_eq(c.csum_found, 1);
	ck_assert_int_eq(mfs_events_read(fs, pos.next, ev, 4, 0, &pos), 0);
	/* overwritten: gone */
	write_all(f, ref + 22016, 512, 22016);
	c = scrub_all();
	ck_assert_uint_eq(c.csum_found, 0);
	check_read(f, ref, NBLK * BS, 0);
	free(ref);
}
END_TEST

/* Either superblock copy bad on the device: rewritten, the copies equal again. */
START_TEST(test_scrub_superblock_copies)
{
	uint64_t last = fs->sb.nr_blocks - 1;
	struct mfs_scrub_counts c;

	ck_assert(device_blocks_equal(0, last));
	c = scrub_all();
	ck_assert_uint_eq(c.meta_healed + c.meta_bad + c.meta_lost, 0);
	/* the backup */
	flip_device_block(last);
	ck_assert(!device_blocks_equal(0, last));
	c = scrub_all();
	ck_assert_uint_eq(c.meta_healed, 1);
	ck_assert_uint_eq(c.meta_bad + c.meta_lost, 0);
	ck_assert(device_blocks_equal(0, last));
	expect_healed_event(1, last, 0);
	/* the primary */
	flip_device_block(0);
	c = scrub_all();
	ck_assert_uint_eq(c.meta_healed, 1);
	ck_assert(device_blocks_equal(0, last));
	expect_healed_event(2, 0, 0);
	c = scrub_all();
	ck_assert_uint_eq(c.meta_healed + c.meta_bad + c.meta_lost, 0);
	/* and what was rewritten mounts */
	fixture_remount();
	ck_assert(device_blocks_equal(0, last));
}
END_TEST

/*
 * The live journal (jtail .. jhead): a block's primary copy bad is rewritten
 * from its twin; a block with both copies bad is checkpointed away (replay
 * no longer needs it) and every file written reads back after a remount.
 */
START_TEST(test_scrub_journal)
{
	uint8_t data[BS];
	uint64_t ino[6], blk, twin;
	struct mfs_scrub_counts c;
	char name[16];

	for (unsigned i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "j%u", i);
		ino[i] = fixture_file(name);
		fill(data, BS, i);
		write_all(ino[i], data, BS, 0);
		ck_assert_int_eq(mfs_txn_commit(fs), 0);
	}
	ck_assert_uint_ne(fs->jtail, fs->jhead); /* a live journal to check */
	blk = fs->sb.journal_start + fs->jtail;
	twin = mfs_twin(fs, blk);
	ck_assert_uint_ne(twin, 0);
	ck_assert(device_blocks_equal(blk, twin));
	flip_device_block(blk);
	c = scrub_all();
	ck_assert_uint_eq(c.meta_healed, 1);
	ck_assert_uint_eq(c.meta_bad + c.meta_lost, 0);
	ck_assert(device_blocks_equal(blk, twin));
	expect_healed_event(1, blk, blk);
	/* both copies bad: no good copy, checkpointed */
	ck_assert_uint_eq(fs->sb.journal_start + fs->jtail, blk); /* still live */
	flip_device_block(blk);
	flip_device_block(twin);
	c = scrub_all();
	ck_assert_uint_eq(c.meta_healed, 1);
	ck_assert_uint_eq(c.meta_lost + c.meta_bad, 0);
	ck_assert_uint_eq(fs->jtail, fs->jhead); /* replay needs nothing */
	fixture_remount();
	for (unsigned i = 0; i < 6; i++) {
		fill(data, BS, i);
		check_read(ino[i], data, BS, 0);
	}
}
END_TEST

/* The fake processes of test_scrub_owner: pid 100 + i lives while live[i]. */
static bool live[4];
static unsigned alive_calls;

static bool fake_alive(pid_t pid)
{
	ck_assert_msg(pid >= 100 && pid < 104, "asked about pid %d", (int)pid);
	alive_calls++;
	return live[pid - 100];
}

/* Claim for @pid at @now: 0 or -EBUSY; a refusal changes nothing. */
static int claim(struct mfs_scrub_owner *o, pid_t pid, time_t now)
{
	struct mfs_scrub_owner before = *o, prev = {-7, -7};
	int ret = mfs_scrub_owner_claim(o, pid, now, fake_alive, &prev);

	if (ret) {
		ck_assert_int_eq(ret, -EBUSY);
		ck_assert(o->pid == before.pid && o->at == before.at);
	} else {
		ck_assert(prev.pid == before.pid && prev.at == before.at);
		ck_assert(o->pid == pid && o->at == now);
	}
	return ret;
}

START_TEST(test_scrub_owner)
{
	const time_t idle = MFS_SCRUB_OWNER_IDLE_S, t = 1000;
	struct mfs_scrub_owner o = {0, 0}, prev;

	live[0] = live[1] = live[2] = live[3] = true;
	/* nobody scrubs: the first takes the cursor, and steps again as it likes */
	ck_assert_int_eq(claim(&o, 100, t), 0);
	ck_assert_int_eq(claim(&o, 100, t + 5), 0);
	/* another process beside a live owner: EBUSY, up to the idle limit inclusive */
	ck_assert_int_eq(claim(&o, 101, t + 6), -EBUSY);
	ck_assert_int_eq(claim(&o, 101, t + 5 + idle), -EBUSY);
	/* an unknown caller (outside the pid namespace) too */
	ck_assert_int_eq(claim(&o, -1, t + 6), -EBUSY);
	/* the owner's step answered: still its own, the idle time counts from it */
	mfs_scrub_owner_stepped(&o, 100, false, t + 100);
	ck_assert_int_eq(claim(&o, 101, t + 6 + idle), -EBUSY);
	/* idle past the limit: given up, the next takes it */
	ck_assert_int_eq(claim(&o, 101, t + 101 + idle), 0);
	/* the old owner comes back: now it is the one refused */
	ck_assert_int_eq(claim(&o, 100, t + 102 + idle), -EBUSY);

	/* an owner that exited gives the cursor up at once */
	o = (struct mfs_scrub_owner){102, t};
	live[2] = false;
	alive_calls = 0;
	ck_assert_int_eq(claim(&o, 103, t + 1), 0);
	ck_assert_uint_eq(alive_calls, 1);
	live[2] = true;

	/* the end of a scrub frees the cursor; another process's end does not */
	o = (struct mfs_scrub_owner){100, t};
	mfs_scrub_owner_stepped(&o, 101, true, t + 1);
	ck_assert_int_eq(o.pid, 100);
	ck_assert_int_eq(claim(&o, 101, t + 2), -EBUSY);
	mfs_scrub_owner_stepped(&o, 100, true, t + 3);
	ck_assert_int_eq(o.pid, 0);
	ck_assert_int_eq(claim(&o, 101, t + 4), 0);

	/* an unknown owner (-1): never asked about, busy until idle */
	o = (struct mfs_scrub_owner){-1, t};
	alive_calls = 0;
	ck_assert_int_eq(claim(&o, 100, t + idle), -EBUSY);
	ck_assert_uint_eq(alive_calls, 0);
	ck_assert_int_eq(claim(&o, 100, t + idle + 1), 0);

	/* a failed step claims nothing: the owner before it is back, idle time and all */
	o = (struct mfs_scrub_owner){100, t};
	live[0] = false;
	ck_assert_int_eq(mfs_scrub_owner_claim(&o, 101, t + 10, fake_alive, &prev), 0);
	mfs_scrub_owner_undo(&o, 101, &prev);
	ck_assert(o.pid == 100 && o.at == t);
	/* ... unless the cursor changed hands meanwhile */
	ck_assert_int_eq(mfs_scrub_owner_claim(&o, 101, t + 10, fake_alive, &prev), 0);
	ck_assert_int_eq(claim(&o, 102, t + 11 + idle), 0);
	mfs_scrub_owner_undo(&o, 101, &prev);
	ck_assert(o.pid == 102 && o.at == t + 11 + idle);
}
END_TEST

static Suite *scrub_suite(void)
{
	Suite *s = suite_create("scrub");
	TCase *tc = tcase_create("meta");
	TCase *csum = tcase_create("data_csum"), *fixed = tcase_create("fixed");

	tcase_add_checked_fixture(csum, setup_csum, fixture_teardown);
	tcase_set_timeout(csum, 240);
	tcase_add_test(csum, test_scrub_data_csum_flip);
	suite_add_tcase(s, csum);
	tcase_add_checked_fixture(fixed, setup_plain, fixture_teardown);
	tcase_set_timeout(fixed, 240);
	tcase_add_test(fixed, test_scrub_superblock_copies);
	tcase_add_test(fixed, test_scrub_journal);
	suite_add_tcase(s, fixed);

	tcase_add_test(tc, test_scrub_owner);
	tcase_add_test(tc, test_scrub_clean);
	tcase_add_test(tc, test_scrub_heals_primary_and_twin);
	tcase_add_test(tc, test_scrub_reads_device_under_cache);
	tcase_add_test(tc, test_scrub_poisoned_copy);
	tcase_add_test(tc, test_scrub_both_bad_lost);
	tcase_add_test(tc, test_scrub_dirty_skipped_readonly_untouched);
	tcase_add_test(tc, test_scrub_evicts_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(scrub_suite());
}
