/* SPDX-License-Identifier: MIT */
/*
 * btree_mock.c: the in-memory mock of the metadata layer the B+tree tests
 * run on (blocks in a hash table, a meta allocator counting live blocks, a
 * transaction that checks the content lock is held on every mfs_txn_dirty),
 * the tree code compiled again against it, and the layer a test runs on.
 * btree_mock.h is its interface.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree_mock.h"

/* --- the mock metadata layer --------------------------------------------------------- */

struct mock_blk {
	struct mfs_buf buf;
	struct mock_blk *next;
	uint8_t data[MFS_BLOCK_SIZE] __attribute__((aligned(64)));
};

struct mock_state mock = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int mock_txn_obj;
#define MOCK_TXN ((struct mfs_txn *)&mock_txn_obj)

static void mock_error(const char *what, uint64_t blocknr)
{
	fprintf(stderr, "mock: %s (block %llu)\n", what, (unsigned long long)blocknr);
	mock.errors++;
}

static struct mock_blk **mock_slot(uint64_t blocknr)
{
	struct mock_blk **pp = &mock.tab[(blocknr * 0x9e3779b97f4a7c15ull) >> 46];

	while (*pp && (*pp)->buf.blocknr != blocknr)
		pp = &(*pp)->next;
	return pp;
}

static const struct mfs_bt_alloc mock_bt_alloc;

void mock_init(struct mfs *fs)
{
	memset(fs, 0, sizeof(*fs));
	fs->bt_alloc = &mock_bt_alloc;
	fs->sb.meta_start = MOCK_META_START;
	fs->sb.meta_len = MOCK_META_LEN;
	mock.tab = calloc(MOCK_HASH, sizeof(*mock.tab));
	mock.inuse = calloc(MOCK_META_LEN, 1);
	mock.freelist = malloc(MOCK_META_LEN * sizeof(*mock.freelist));
	T_ASSERT(mock.tab && mock.inuse && mock.freelist);
	mock.nfree = 0;
	mock.next = MOCK_META_START;
	mock.live = mock.refs = mock.errors = mock.fail_in = 0;
	mock.dirties = 0;
}

void mock_fini(void)
{
	unsigned i;

	for (i = 0; i < MOCK_HASH; i++) {
		while (mock.tab[i]) {
			struct mock_blk *mb = mock.tab[i];

			mock.tab[i] = mb->next;
			mfs_lock_destroy(&mb->buf.lock);
			free(mb);
		}
	}
	free(mock.tab);
	free(mock.inuse);
	free(mock.freelist);
	mock.tab = NULL;
}

MOCK_LINKAGE int MOCK(meta_read)(struct mfs *fs, uint64_t blocknr, uint16_t type,
                                 struct mfs_buf **bp)
{
	struct mock_blk *mb;
	struct mfs_meta_hdr *hdr;
	int ret = 0;

	(void)fs;
	pthread_mutex_lock(&mock.lock);
	mock.reads++;
	mb = *mock_slot(blocknr);
	if (!mb) {
		/* never written: what a device would return is not a metadata block */
		ret = -EUCLEAN;
	} else {
		hdr = (struct mfs_meta_hdr *)mb->data;
		if (hdr->magic != MFS_META_MAGIC || hdr->blocknr != blocknr ||
		    (type && hdr->type != type))
			ret = -EUCLEAN;
	}
	if (!ret) {
		atomic_fetch_add(&mb->buf.ref, 1);
		mock.refs++;
		*bp = &mb->buf;
	}
	pthread_mutex_unlock(&mock.lock);
	return ret;
}

/* mfs_meta_read_locked(): the read, then the content lock, as meta.c does in one step */
MOCK_LINKAGE int MOCK(meta_read_locked)(struct mfs *fs, uint64_t blocknr, uint16_t type,
                                        struct mfs_buf **bp)
{
	int ret = MOCK(meta_read)(fs, blocknr, type, bp);

	if (!ret)
		mfs_lock(&(*bp)->lock);
	return ret;
}

MOCK_LINKAGE int MOCK(meta_new)(struct mfs *fs, uint64_t blocknr, uint16_t type, uint64_t owner,
                                struct mfs_buf **bp)
{
	struct mock_blk **pp, *mb;
	struct mfs_meta_hdr *hdr;

	(void)fs;
	pthread_mutex_lock(&mock.lock);
	pp = mock_slot(blocknr);
	mb = *pp;
	if (!mb) {
		mb = aligned_alloc(64, sizeof(*mb));
		T_ASSERT(mb);
		memset(&mb->buf, 0, sizeof(mb->buf));
		mfs_lock_init(&mb->buf.lock);
		mb->buf.blocknr = blocknr;
		mb->buf.data = mb->data;
		mb->next = NULL;
		*pp = mb;
	}
	if (blocknr < MOCK_META_START || !mock.inuse[blocknr - MOCK_META_START])
		mock_error("meta_new of an unallocated block", blocknr);
	memset(mb->data, 0, MFS_BLOCK_SIZE);
	hdr = (struct mfs_meta_hdr *)mb->data;
	hdr->magic = MFS_META_MAGIC;
	hdr->type = type;
	hdr->blocknr = blocknr;
	hdr->owner = owner;
	mb->buf.type = type;
	mb->buf.uptodate = true;
	mb->buf.bt_checked = false;
	atomic_fetch_add(&mb->buf.ref, 1);
	mock.refs++;
	*bp = &mb->buf;
	pthread_mutex_unlock(&mock.lock);
	return 0;
}

MOCK_LINKAGE void MOCK(buf_put)(struct mfs_buf *b)
{
	pthread_mutex_lock(&mock.lock);
	if (atomic_fetch_sub(&b->ref, 1) <= 0)
		mock_error("reference count below zero", b->blocknr);
	mock.refs--;
	pthread_mutex_unlock(&mock.lock);
}

MOCK_LINKAGE void MOCK(meta_forget)(struct mfs *fs, uint64_t blocknr)
{
	struct mock_blk **pp, *mb;

	(void)fs;
	pthread_mutex_lock(&mock.lock);
	pp = mock_slot(blocknr);
	mb = *pp;
	if (mb && atomic_load(&mb->buf.ref) != 0)
		mock_error("forget of a referenced block", blocknr);
	if (mb) {
		*pp = mb->next;
		mfs_lock_destroy(&mb->buf.lock);
		free(mb);
	}
	pthread_mutex_unlock(&mock.lock);
}

MOCK_LINKAGE void MOCK(txn_dirty)(struct mfs_txn *txn, struct mfs_buf *b)
{
	if (mfs_trylock(&b->lock)) {
		mfs_unlock(&b->lock);
		mock_error("txn_dirty without the content lock", b->blocknr);
	}
	pthread_mutex_lock(&mock.lock);
	if (txn != MOCK_TXN)
		mock_error("dirty in a foreign transaction", b->blocknr);
	if (!mock.inuse[b->blocknr - MOCK_META_START])
		mock_error("dirty of a free block", b->blocknr);
	b->dirty = true;
	mock.dirties++;
	pthread_mutex_unlock(&mock.lock);
}

MOCK_LINKAGE int MOCK(alloc_meta)(struct mfs *fs, struct mfs_txn *txn, uint64_t *blocknr)
{
	int ret = 0;

	(void)fs;
	(void)txn;
	pthread_mutex_lock(&mock.lock);
	if (mock.fail_in > 0 && --mock.fail_in == 0)
		ret = -ENOSPC;
	else if (mock.nfree)
		*blocknr = mock.freelist[--mock.nfree];
	else if (mock.next < MOCK_META_START + MOCK_META_LEN)
		*blocknr = mock.next++;
	else
		ret = -ENOSPC;
	if (!ret) {
		mock.inuse[*blocknr - MOCK_META_START] = 1;
		mock.live++;
	}
	pthread_mutex_unlock(&mock.lock);
	return ret;
}

MOCK_LINKAGE int MOCK(free_meta)(struct mfs *fs, struct mfs_txn *txn, uint64_t blocknr)
{
	int ret = 0;

	(void)fs;
	(void)txn;
	pthread_mutex_lock(&mock.lock);
	if (blocknr < MOCK_META_START || blocknr - MOCK_META_START >= MOCK_META_LEN ||
	    !mock.inuse[blocknr - MOCK_META_START]) {
		mock_error("free of a free block", blocknr);
		ret = -EINVAL;
	} else {
		mock.inuse[blocknr - MOCK_META_START] = 0;
		mock.freelist[mock.nfree++] = blocknr;
		mock.live--;
	}
	pthread_mutex_unlock(&mock.lock);
	return ret;
}

/* The trees get their node blocks through fs->bt_alloc. */
static const struct mfs_bt_alloc mock_bt_alloc = {.alloc = MOCK(alloc_meta),
                                                  .free = MOCK(free_meta)};

/*
 * Under meson the test also links the real layer, so the code under test is
 * compiled a second time here, calling the mock and renamed mock_bt_*.
 */
#ifndef MFS_BTREE_MOCK
/* a checked node is checked again: the tree keeps its nodes valid (btree_node.c) */
#define MFS_BT_VERIFY_CHECKED

#define mfs_meta_read        mock_meta_read
#define mfs_meta_read_locked mock_meta_read_locked
#define mfs_meta_new         mock_meta_new
#define mfs_buf_put          mock_buf_put
#define mfs_meta_forget      mock_meta_forget
#define mfs_txn_dirty        mock_txn_dirty
#define mfs_bt_lookup        mock_bt_lookup
#define mfs_bt_lookup_le     mock_bt_lookup_le
#define mfs_bt_lookup_ge     mock_bt_lookup_ge
#define mfs_bt_lookup_around mock_bt_lookup_around
#define mfs_bt_lookup_near   mock_bt_lookup_near
#define mfs_bt_insert        mock_bt_insert
#define mfs_bt_insert_near   mock_bt_insert_near
#define mfs_bt_update        mock_bt_update
#define mfs_bt_delete        mock_bt_delete
#define mfs_bt_iterate       mock_bt_iterate
#define mfs_bt_destroy       mock_bt_destroy
#define MFS_BT_SHARED        static /* the tree's shared helpers: this unit's own copies */
#include "btree_node.c"
#include "btree.c"
#include "btree_delete.c"
#include "btree_insert.c"
#undef mfs_meta_read
#undef mfs_meta_read_locked
#undef mfs_meta_new
#undef mfs_buf_put
#undef mfs_meta_forget
#undef mfs_txn_dirty
#undef mfs_bt_lookup
#undef mfs_bt_lookup_le
#undef mfs_bt_lookup_ge
#undef mfs_bt_lookup_around
#undef mfs_bt_lookup_near
#undef mfs_bt_insert
#undef mfs_bt_insert_near
#undef mfs_bt_update
#undef mfs_bt_delete
#undef mfs_bt_iterate
#undef mfs_bt_destroy
#define BT(name) mock_bt_##name
#else
#define BT(name) mfs_bt_##name
#endif

/* --- the layer a test runs on ------------------------------------------------------------ */

const struct layer mock_layer = {
        BT(lookup),        BT(lookup_le),   BT(insert),      BT(update),    BT(delete),
        BT(iterate),       BT(destroy),     MOCK(meta_read), MOCK(buf_put), BT(lookup_ge),
        BT(lookup_around), BT(lookup_near), BT(insert_near),
};

const struct layer *L = &mock_layer;
struct mfs mock_fs;
struct mfs *fs;
struct mfs_txn *txn;

void mock_setup(void)
{
	mock_init(&mock_fs);
	fs = &mock_fs;
	txn = MOCK_TXN;
	L = &mock_layer;
}

void mock_teardown(void)
{
	mock_fini();
}

/* Every reference returned, no contract violation. */
void mock_clean(void)
{
	T_IEQ(mock.refs, 0);
	T_IEQ(mock.errors, 0);
}
