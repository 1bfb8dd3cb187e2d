/* SPDX-License-Identifier: MIT */
/*
 * Per-sector data checksums (feature data_csum, docs/FORMAT.md §15,
 * docs/design/core.md): one 32-bit XXH3 checksum per 512-byte sector of a
 * data zone block, in the checksum table (MFS_T_DATA_CSUM metadata blocks of
 * the meta zone: twinned and journaled like every other metadata block).
 *
 * The core does the checks; the engine knows nothing of them.  Every caller
 * tests fs->data_csum once and calls in here only when it is set, so the data
 * path with the feature off pays one predictable branch.
 *
 * Writers store the checksums of what they write in the transaction that
 * covers the write (mfs_csum_set*), before it ends.  Readers verify
 * (mfs_csum_read_blocks, which replaces mfs_file_read_blocks' body): a sector
 * that does not match is treated as poison: -EIO for a normal read; a
 * recovery read zero-fills it and reports its device sectors in the
 * struct blk_recovery as the engine does for poison.
 */
#ifndef MENDFS_FS_CSUM_H
#define MENDFS_FS_CSUM_H

#include "mfs_int.h"

/*
 * Make fs->csum_secret, XXH3's secret derived from sb.csum_seed, once per
 * mount (mfs_mount, before any checksum is computed).
 */
void mfs_csum_init(struct mfs *fs);
/* The checksum of one 512-byte sector as the table stores it (mfs_csum_init done). */
uint32_t mfs_csum_sector(const struct mfs *fs, const void *sector);
/*
 * The AVX-512 (before AVX2) or AVX2 hash is in use (x86-64 CPUs that have
 * AVX-512F or AVX2, chosen at load).  Tests clear them to check the other
 * paths; nothing else writes them.
 */
extern bool mfs_csum_avx2, mfs_csum_avx512;

/*
 * The metadata checksums' hash, XXH3_64bits_withSeed of a 4096-byte block
 * (FORMAT.md §3, §8: the same values), compiled in csum.c with the vector
 * loop of the CPU (AVX-512, AVX2 or SSE2) instead of a call into the shared
 * library: for the journal's seals and tags and the buffer cache's checks,
 * whatever the features.
 */
uint64_t mfs_csum_hash4k(const void *block, uint64_t seed);
/* mfs_block_seal (super.c) with mfs_csum_hash4k: the same value in hdr->csum. */
void mfs_csum_meta_seal(void *block, uint64_t seed);
/* mfs_block_verify (super.c) with mfs_csum_hash4k: the same checks.  0 or -EUCLEAN. */
int mfs_csum_meta_verify(const void *block, uint64_t seed, uint16_t type, uint64_t blocknr);

/*
 * Store in @txn the checksums of @nsect sectors from sector @s (0..7) of data
 * zone block @pblk on, computed from @data (the bytes of those sectors).
 * Returns 0 or -errno.
 */
int mfs_csum_set_sectors(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, unsigned s,
                         unsigned nsect, const void *data);
/* The same for @nblk whole blocks from @pblk, whose contents are @data. */
int mfs_csum_set(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, const void *data,
                 uint64_t nblk);
/*
 * Device sectors [sector, sector + nr) of the data zone were zeroed in place
 * (truncate, fallocate ZERO_RANGE, zero-init): store the checksum of a zero
 * sector for them, in the running transaction if this thread holds a handle,
 * else in a transaction of its own.  Returns 0 or -errno.
 */
int mfs_csum_zeroed(struct mfs *fs, uint64_t sector, uint64_t nr);

/*
 * Store the checksums of @nsect sectors from sector @s of block @pblk as they
 * are on the device now (read back: after a write by units of poison), in
 * the running or an own transaction like mfs_csum_zeroed.  0 or -errno.
 */
int mfs_csum_refresh(struct mfs *fs, uint64_t pblk, unsigned s, unsigned nsect);
/*
 * Zero bytes [from, to) of block @pblk, whose contents (read without error)
 * are in @blk, by sectors: -EIO if a damaged sector is covered only in part;
 * the checksums of the sectors written are stored.  0 or -errno.
 */
int mfs_csum_zero_in_block(struct mfs *fs, uint64_t pblk, uint8_t *blk, unsigned from, unsigned to);

/*
 * Bitmask (bit i: sector i) of the sectors of block @pblk whose contents
 * @data do not match the table.  Returns >= 0 or -errno (the table block
 * unreadable).
 */
int mfs_csum_bad_mask(struct mfs *fs, uint64_t pblk, const void *data);
/*
 * The same for the @nblk blocks from @pblk, contents @data: @masks[k] for
 * block @pblk + k, one table lookup per table block (126 data blocks).
 * Returns 0 or -errno (a table block unreadable: @masks partly filled).
 */
int mfs_csum_bad_masks(struct mfs *fs, uint64_t pblk, const void *data, uint64_t nblk,
                       uint8_t *masks);

/*
 * mfs_file_read_blocks for data_csum (same contract): reads the blocks,
 * verifies every sector read, -EIO on a mismatch, or with BLK_BIO_RECOVERY
 * zero-fills it and adds its sectors to @rec.
 */
ssize_t mfs_csum_read_blocks(struct mfs *fs, struct mfs_ino *ip, void *buf, size_t len,
                             uint64_t off, unsigned bio_flags, struct blk_recovery *rec);

/*
 * The zero-copy read's check (read.c): do the @nblk whole blocks from
 * @pblk, which the device mapping holds at @addr (from blk_direct_access),
 * all match the table?  Hashed where they lie, under the engine's fault
 * guard (blk_direct_load).  0 yes; 1 no; -EFAULT a load faulted; other
 * -errno when the table cannot be read.  Posts no event and records
 * nothing: the caller reads such a range through the engine
 * (mfs_csum_read_blocks), which reports what it finds.
 */
int mfs_csum_check_mapped(struct mfs *fs, uint64_t pblk, const void *addr, uint64_t nblk);

/*
 * Damaged sectors of data zone block @pblk, as a bitmask: poisoned (the
 * engine's table) or failing their checksum (the block is read, poisoned
 * sectors zero-filled).  Returns >= 0 or -errno.
 */
int mfs_csum_block_damage(struct mfs *fs, uint64_t pblk);

/*
 * mfs_csum_block_damage for the @nblk (1..BIO_MAX_BLOCKS) blocks from @pblk:
 * read in one recovery bio into @buf (@nblk blocks), checked with one table
 * lookup per table block; @masks[k] for block @pblk + k.  Mismatches post
 * their events as a single block's check does.  0 or -errno.
 */
int mfs_csum_run_damage(struct mfs *fs, uint64_t pblk, uint64_t nblk, uint8_t *buf, uint8_t *masks);

/*
 * Sectors of data zone block @pblk failing their checksum (poisoned ones
 * excluded), as a bitmask; each posts a data_csum event (once per sector
 * and mount).  The scrub's confirmation of a mismatch.  >= 0 or -errno.
 */
int mfs_csum_block_verify(struct mfs *fs, uint64_t pblk);

/*
 * The partial write of bytes [from, to) of block @pblk, whose current contents
 * (read without error) are in @blk: if a sector of the block fails its
 * checksum, the write goes by sectors like a write over poison
 * (docs/RECOVERY.md): -EIO if the range covers such a sector only in part
 * (nothing written), else the sectors the range touches are written from
 * @blk with @data copied in, and their checksums stored in @txn; returns 1
 * (done: the caller must not write the block).  0: no sector the range does
 * not cover whole is damaged (those are the only ones checked: the others
 * are overwritten), the caller writes the block as usual and stores the
 * checksums of the sectors the range touches only (mfs_csum_set_sectors):
 * the others match the table, checked here under the caller's exclusive
 * ip->lock.  -errno on other errors.
 */
int mfs_csum_edge_write(struct mfs *fs, struct mfs_txn *txn, uint64_t pblk, uint8_t *blk,
                        unsigned from, unsigned to, const void *data);

#endif /* MENDFS_FS_CSUM_H */
