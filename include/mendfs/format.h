/* SPDX-License-Identifier: MIT */
/*
 * The mendfs on-disk format, version 1.  docs/FORMAT.md is the specification;
 * this header is its C transcription.  Every field is little-endian and
 * fixed-width; every structure's size is asserted at build time.
 *
 * Byte order: mendfs builds only on little-endian hosts (asserted below),
 * where a field's value in memory is its value on disk.  The core and
 * fsck.mendfs read and write most fields as native integers; mkfs.mendfs and
 * parts of the core convert with le*toh/htole*, which are no-ops there.  A
 * big-endian port must convert every multi-byte field wherever a block is
 * read or written: in fs/core (superblock, metadata headers, journal
 * descriptors and commits, inode slots, B+tree pointers and slots, extents,
 * directory entries, xattr records and references, the roots record), in
 * mkfs/mkfs.c (already converted) and in fsck/ (the passes and io.c).
 *
 * Device layout (4 KiB blocks, 64-bit block numbers):
 *
 *   0                 primary superblock
 *   [journal]         journal_start .. +journal_len
 *   [meta zone]       meta_start .. +meta_len         (inode table, bitmaps, tree nodes)
 *   [data zone]       data_start .. +data_len
 *   [journal twin]    journal_twin ..                 (metadata_dup)
 *   [meta zone twin]  meta_twin ..                    (metadata_dup)
 *   nr_blocks - 1     backup superblock
 *
 * With metadata_dup, metadata block b of the meta zone has its twin at
 * b - meta_start + meta_twin, and journal block j at j - journal_start +
 * journal_twin: the twins live in the last part of the device, far from the
 * primaries, so one damaged region does not take both.
 */
#ifndef MENDFS_FORMAT_H
#define MENDFS_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/stat.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "mendfs builds only on little-endian hosts: its on-disk fields are accessed "
               "without conversion (see the top of include/mendfs/format.h)");

#define MFS_BLOCK_SIZE        4096u
#define MFS_BLOCK_SHIFT       12
#define MFS_SECTORS_PER_BLOCK (MFS_BLOCK_SIZE >> 9)

#define MFS_SB_MAGIC       0x0153464e454d4dULL /* "MMENFS\1" read as little-endian bytes */
#define MFS_META_MAGIC     0x4b4c424du         /* "MBLK" */
#define MFS_FORMAT_VERSION 1

/* Feature bits.  Unknown incompat: refuse to mount.  Unknown ro_compat: mount read-only. */
#define MFS_FEATURE_COMPAT_SUPP            0u
#define MFS_FEATURE_RO_COMPAT_METADATA_DUP (1u << 0) /* every metadata block has a twin */
/* a checksum per 512-byte data sector, in the data checksum table (MFS_T_DATA_CSUM blocks) */
#define MFS_FEATURE_RO_COMPAT_DATA_CSUM (1u << 1)
#define MFS_FEATURE_RO_COMPAT_SUPP                                                                 \
	(MFS_FEATURE_RO_COMPAT_METADATA_DUP | MFS_FEATURE_RO_COMPAT_DATA_CSUM)
/* xattr values too large for a tree leaf are in MFS_T_XATTR_VALUE blocks */
#define MFS_FEATURE_INCOMPAT_XATTR_BLOCKS (1u << 0)
#define MFS_FEATURE_INCOMPAT_SUPP         MFS_FEATURE_INCOMPAT_XATTR_BLOCKS

/* Superblock state */
#define MFS_STATE_CLEAN 1u /* unmounted cleanly: the journal is empty */
#define MFS_STATE_DIRTY 2u /* mounted, or crashed: replay the journal */
#define MFS_STATE_ERROR 4u /* corruption was seen: fsck before trusting */

/* Metadata block types (mfs_meta_hdr.type) */
enum mfs_block_type {
	MFS_T_SUPER = 1,
	MFS_T_INODES = 2,       /* inode table block */
	MFS_T_BITMAP = 3,       /* allocation bitmap block (meta zone, data zone, inodes) */
	MFS_T_BTREE_NODE = 4,   /* B+tree interior node */
	MFS_T_BTREE_LEAF = 5,   /* B+tree leaf */
	MFS_T_JOURNAL_DESC = 6, /* journal descriptor */
	MFS_T_JOURNAL_COMMIT = 7,
	MFS_T_XATTR_VALUE = 8, /* a piece of an out-of-line xattr value (xattr_blocks) */
	MFS_T_DATA_CSUM = 9,   /* a block of the data checksum table (data_csum) */
	MFS_T_MAX
};

/*
 * Header of every metadata block (and of journal descriptor/commit blocks).
 * csum is XXH3-64 (seeded with the superblock's csum_seed) over the whole
 * 4096-byte block with the csum field set to zero.  blocknr is the block's own
 * primary location: a block read from elsewhere (a misdirected write, a twin
 * read back) is recognised.  The superblock is sealed with its own csum_seed.
 */
struct mfs_meta_hdr {
	uint32_t magic;   /* MFS_META_MAGIC */
	uint16_t type;    /* enum mfs_block_type */
	uint16_t level;   /* B+tree: 0 for leaves */
	uint64_t blocknr; /* primary location of this block */
	uint64_t csum;
	uint64_t gen;   /* transaction that last wrote it */
	uint64_t owner; /* inode number owning it, 0 for shared structures */
	uint32_t nr_items;
	uint32_t tree; /* B+tree kind (enum mfs_tree_kind) */
};
_Static_assert(sizeof(struct mfs_meta_hdr) == 48, "mfs_meta_hdr is 48 bytes");

struct mfs_superblock {
	struct mfs_meta_hdr hdr; /* type MFS_T_SUPER; blocknr 0 for both copies */
	uint64_t magic;          /* MFS_SB_MAGIC */
	uint32_t version;        /* MFS_FORMAT_VERSION */
	uint32_t block_size;     /* 4096 */
	uint32_t feature_compat;
	uint32_t feature_ro_compat;
	uint32_t feature_incompat;
	uint32_t state; /* MFS_STATE_* */
	uint8_t uuid[16];
	char label[64]; /* NUL-padded */
	uint64_t csum_seed;
	uint64_t nr_blocks;

	uint64_t journal_start, journal_len, journal_twin; /* twin 0 without metadata_dup */
	uint64_t meta_start, meta_len, meta_twin;
	uint64_t data_start, data_len;

	/* in the meta zone */
	uint64_t inode_table_start, inode_table_blocks;
	uint64_t inode_bitmap_start, inode_bitmap_blocks;
	uint64_t meta_bitmap_start, meta_bitmap_blocks; /* one bit per meta zone block */
	uint64_t data_bitmap_start, data_bitmap_blocks; /* one bit per data zone block */

	uint64_t nr_inodes;
	uint64_t root_ino;
	uint64_t free_blocks; /* data zone; exact after a clean unmount */
	uint64_t free_inodes;
	uint64_t free_meta;

	uint64_t quarantine_root; /* B+tree of poisoned free data extents (0: empty) */
	uint32_t quarantine_depth;
	uint32_t __pad0;
	uint64_t orphan_root; /* B+tree of unlinked-but-open inodes (0: empty) */
	uint32_t orphan_depth;
	uint32_t __pad1;

	uint64_t journal_seq;  /* id of the first transaction replay must look for */
	uint64_t journal_tail; /* its block offset inside the journal area */

	int64_t mkfs_time_ns, mount_time_ns, write_time_ns;
	uint32_t mount_count;
	uint32_t __pad2;
	uint64_t dir_hash_seed;
	uint64_t csum_table_start;  /* data_csum: first block of the table (meta zone), else 0 */
	uint64_t csum_table_blocks; /* data_csum: its blocks, >= ceil(data_len / 126), else 0 */
	uint8_t __reserved[4096 - 448];
};
_Static_assert(sizeof(struct mfs_superblock) == MFS_BLOCK_SIZE, "superblock is one block");

/*
 * Data checksum table (ro_compat data_csum, docs/FORMAT.md §15): blocks of
 * type MFS_T_DATA_CSUM in the meta zone (twinned, journaled).  Data zone block
 * data_start + i has its MFS_SECTORS_PER_BLOCK checksums in table block
 * csum_table_start + i / MFS_CSUM_BLOCKS_PER_TBLOCK, at byte 48 + (i %
 * MFS_CSUM_BLOCKS_PER_TBLOCK) * MFS_CSUM_ENTRY_SIZE: one uint32 per 512-byte
 * sector, the low 32 bits of XXH3_64bits_withSeed(sector, 512, csum_seed).
 */
#define MFS_CSUM_ENTRY_SIZE        (MFS_SECTORS_PER_BLOCK * 4u) /* bytes per data block */
#define MFS_CSUM_BLOCKS_PER_TBLOCK ((MFS_BLOCK_SIZE - 48u) / MFS_CSUM_ENTRY_SIZE) /* 126 */

/*
 * Allocation bitmaps: after the header, bit i (byte 48 + i / 8, bit i % 8, LSB
 * first) of bitmap block k covers item k * MFS_BITMAP_BITS + i; 1 = in use.
 * Bits past the end of the zone are 1.  hdr.nr_items = valid bits in the block.
 */
#define MFS_BITMAP_BITS ((MFS_BLOCK_SIZE - sizeof(struct mfs_meta_hdr)) * 8)

/* Inodes */
#define MFS_ROOT_INO         1ull
#define MFS_INODE_SIZE       256u
#define MFS_INODES_PER_BLOCK ((MFS_BLOCK_SIZE - sizeof(struct mfs_meta_hdr)) / MFS_INODE_SIZE)
#define MFS_INLINE_EXTENTS   4
#define MFS_INLINE_DATA      (MFS_INLINE_EXTENTS * sizeof(struct mfs_extent))

/*
 * Limits (FORMAT.md §12).  A writer refuses to go past them (EFBIG, EMLINK,
 * ENAMETOOLONG, ERANGE, E2BIG); a reader takes a structure past them for
 * corruption (EUCLEAN), and fsck.mendfs checks them.  No extent of a file
 * ends past block MFS_FILE_BLOCKS_MAX.
 */
#define MFS_FILE_SIZE_MAX   (1ull << 50) /* bytes in a file (1 PiB) */
#define MFS_FILE_BLOCKS_MAX (MFS_FILE_SIZE_MAX / MFS_BLOCK_SIZE)
#define MFS_LINK_MAX        65000u /* links of a non-directory */
#define MFS_NAME_MAX        255u   /* bytes in a directory entry name */
#define MFS_SYMLINK_MAX     4095u  /* bytes in a symlink target */
#define MFS_XATTR_NAME_MAX  255u   /* bytes in an xattr name, its prefix included */
#define MFS_BT_MAX_DEPTH    12u    /* B+tree depth */

/* mfs_inode.iflags */
#define MFS_IFL_EXTENT_TREE (1u << 0) /* extents in a B+tree rooted at ext_root */
#define MFS_IFL_INLINE_DATA (1u << 1) /* symlink target inline */
#define MFS_IFL_ORPHAN      (1u << 2) /* on the orphan list */

#define MFS_EXT_UNWRITTEN (1u << 0) /* allocated, reads as zeros (fallocate) */

struct mfs_extent {
	uint64_t lblk; /* first file block */
	uint64_t pblk; /* first device block */
	uint32_t len;  /* blocks */
	uint32_t flags;
};
_Static_assert(sizeof(struct mfs_extent) == 24, "mfs_extent is 24 bytes");

struct mfs_inode {
	uint32_t mode; /* 0: free slot */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size;
	uint64_t blocks; /* allocated data blocks */
	int64_t atime_ns, mtime_ns, ctime_ns, btime_ns;
	uint64_t generation;
	uint32_t iflags;
	uint32_t rdev;
	uint64_t parent;     /* directories: the parent's inode number (for "..") */
	uint64_t ext_root;   /* extent B+tree root (MFS_IFL_EXTENT_TREE) */
	uint64_t dir_root;   /* directories: the entry B+tree root (0: empty) */
	uint64_t xattr_root; /* xattr B+tree root (0: none) */
	uint16_t ext_depth, dir_depth, xattr_depth;
	uint16_t nr_inline; /* inline extents in use, or inline data length */
	uint64_t dir_entries;
	union {
		struct mfs_extent ext[MFS_INLINE_EXTENTS];
		uint8_t data[MFS_INLINE_DATA];
	} u;
	uint16_t inline_xattr_len; /* bytes used in inline_xattr */
	uint8_t inline_xattr[MFS_INODE_SIZE - 226];
};
_Static_assert(sizeof(struct mfs_inode) == MFS_INODE_SIZE, "mfs_inode is 256 bytes");
_Static_assert(offsetof(struct mfs_inode, u) == 128, "inline area at 128");

/*
 * The roots record (FORMAT.md §6.4): in the tail of the first inode table
 * block, after its 15 inodes; the newest quarantine and orphan tree roots
 * (they override the superblock's when the magic matches).
 */
#define MFS_ROOTS_MAGIC 0x53544f4f52534d4dull /* "MMSROOTS" */
#define MFS_ROOTS_OFF   (sizeof(struct mfs_meta_hdr) + MFS_INODES_PER_BLOCK * MFS_INODE_SIZE)
struct mfs_roots_rec {
	uint64_t magic;
	uint64_t quarantine_root;
	uint32_t quarantine_depth;
	uint32_t __pad0;
	uint64_t orphan_root;
	uint32_t orphan_depth;
	uint32_t __pad1;
};
_Static_assert(sizeof(struct mfs_roots_rec) == 40, "roots record is 40 bytes");
_Static_assert(MFS_ROOTS_OFF + sizeof(struct mfs_roots_rec) <= MFS_BLOCK_SIZE,
               "the roots record fits the tail of an inode table block");

/* B+trees: 64-bit keys; interior nodes hold (key, child) pairs, leaves a slotted page. */
enum mfs_tree_kind {
	MFS_TREE_EXTENTS = 1, /* key lblk, value struct mfs_extent */
	MFS_TREE_DIR = 2, /* key (name hash << 16 | collision), value struct mfs_dirent + name */
	MFS_TREE_XATTR =
	        3, /* key (name hash << 16 | collision), value struct mfs_xattr + name + value */
	MFS_TREE_QUARANTINE = 4, /* key pblk, value uint64_t len */
	MFS_TREE_ORPHAN = 5,     /* key ino, no value */
};

struct mfs_bt_ptr {
	uint64_t key; /* lowest key in the child */
	uint64_t child;
};
#define MFS_BT_NODE_MAX ((MFS_BLOCK_SIZE - sizeof(struct mfs_meta_hdr)) / sizeof(struct mfs_bt_ptr))

/* Leaf slot: values are stored from the end of the block downwards. */
struct mfs_bt_slot {
	uint64_t key;
	uint16_t off; /* from the start of the block */
	uint16_t len;
	uint32_t __pad;
};
_Static_assert(sizeof(struct mfs_bt_slot) == 16, "mfs_bt_slot is 16 bytes");
#define MFS_BT_MAX_VALUE 1024u

/*
 * Name keys of directory entries and xattrs: bits 16..62 of the name's hash,
 * and a collision counter in the low 16 bits (FORMAT.md §7.3).
 */
#define MFS_NAME_KEY_MASK 0x7fffffffffff0000ull

struct mfs_dirent {
	uint64_t ino;
	uint8_t type; /* DT_* */
	uint8_t name_len;
	uint8_t name[]; /* not NUL-terminated */
};

struct mfs_xattr {
	uint8_t name_len;
	uint8_t flags; /* MFS_XATTR_F_* */
	uint16_t value_len;
	uint8_t data[]; /* name then value (MFS_XATTR_F_BLOCKS: a struct mfs_xattr_ref) */
};

/*
 * An xattr value stored out of line (feature xattr_blocks): in a tree record
 * with MFS_XATTR_F_BLOCKS, the record's value is this reference, value_len =
 * sizeof(struct mfs_xattr_ref) + 8 * nr_blocks.  Block i is a metadata block
 * of type MFS_T_XATTR_VALUE (owner = the inode, nr_items = its value bytes)
 * holding value bytes [i * MFS_XATTR_BLOCK_BYTES, ...) after its header.
 */
#define MFS_XATTR_F_BLOCKS    0x01u
#define MFS_XATTR_BLOCK_BYTES (MFS_BLOCK_SIZE - sizeof(struct mfs_meta_hdr)) /* 4048 */
#define MFS_XATTR_SIZE_MAX    65536u /* Linux XATTR_SIZE_MAX */
#define MFS_XATTR_REF_BLOCKS                                                                       \
	((MFS_XATTR_SIZE_MAX + MFS_XATTR_BLOCK_BYTES - 1) / MFS_XATTR_BLOCK_BYTES) /* 17 */
struct mfs_xattr_ref {
	uint32_t size;      /* value bytes */
	uint16_t nr_blocks; /* ceil(size / MFS_XATTR_BLOCK_BYTES) */
	uint16_t __pad;
	uint64_t csum;     /* XXH3-64 of the value bytes, seeded with csum_seed */
	uint64_t blocks[]; /* nr_blocks primary locations in the meta zone */
};
_Static_assert(sizeof(struct mfs_xattr_ref) == 16, "mfs_xattr_ref is 16 bytes");
_Static_assert(4 + 255 + sizeof(struct mfs_xattr_ref) + 8 * MFS_XATTR_REF_BLOCKS <=
                       MFS_BT_MAX_VALUE,
               "a reference to the largest value fits a leaf value");

/*
 * Journal: descriptor, the images of the blocks it lists, commit.  A
 * transaction takes consecutive journal blocks (offsets modulo journal_len:
 * it may wrap) starting where the previous one ended: desc, its images,
 * [desc, images ...], commit.  Every csum below is XXH3-64 seeded with
 * csum_seed.  Replay goes by block type after each descriptor's images
 * (another descriptor of the same id, or the commit); next_desc is
 * informative only, since offset 0 is a valid offset.  Ids are consecutive;
 * after a replay journal_seq skips one id past the last transaction applied.
 */
struct mfs_journal_tag {
	uint64_t blocknr; /* primary location of the image that follows */
	uint64_t csum;    /* XXH3-64 (seeded) of the image, 4096 bytes as written */
};
#define MFS_JOURNAL_TAGS                                                                           \
	((MFS_BLOCK_SIZE - sizeof(struct mfs_meta_hdr) - 16) / sizeof(struct mfs_journal_tag))

struct mfs_journal_desc {
	struct mfs_meta_hdr
	        hdr;        /* type MFS_T_JOURNAL_DESC, gen = transaction id, nr_items = tags */
	uint64_t next_desc; /* journal offset of the next descriptor of this transaction, or 0 */
	uint64_t __pad;
	struct mfs_journal_tag tags[MFS_JOURNAL_TAGS];
};
_Static_assert(sizeof(struct mfs_journal_desc) <= MFS_BLOCK_SIZE, "descriptor fits a block");

struct mfs_journal_commit {
	struct mfs_meta_hdr hdr; /* type MFS_T_JOURNAL_COMMIT, gen = transaction id */
	uint64_t nr_blocks;      /* images in the transaction */
	uint64_t txn_csum;       /* XXH3-64 over the tags of every descriptor, in order */
	int64_t commit_time_ns;
};

/* Is @mode's file type one an inode may have (§6)? */
static inline bool mfs_mode_type_valid(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return true;
	}
	return false;
}

/*
 * The twin of block @blk under metadata_dup (see the layout at the top):
 * meta zone and journal blocks have one, anything else none (0).
 */
static inline uint64_t mfs_sb_twin(const struct mfs_superblock *sb, uint64_t blk)
{
	if (blk >= sb->meta_start && blk - sb->meta_start < sb->meta_len)
		return blk - sb->meta_start + sb->meta_twin;
	if (blk >= sb->journal_start && blk - sb->journal_start < sb->journal_len)
		return blk - sb->journal_start + sb->journal_twin;
	return 0;
}

#endif /* MENDFS_FORMAT_H */
