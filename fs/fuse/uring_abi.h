/* SPDX-License-Identifier: MIT */
/*
 * The kernel's ABI for FUSE over io_uring (protocol 7.42, Linux 6.14), as
 * the kernel's <linux/fuse.h> defines it; Debian's headers predate it, so it
 * is spelled out here, with its sizes checked.  Only transport_uring.c
 * includes it.
 *
 * A ring entry is two buffers the daemon registers: the headers
 * (struct fuse_uring_req_header) and a payload of at least the negotiated
 * maximum request size.  A request arrives as: in_out = struct
 * fuse_in_header, op_in = the opcode's fixed argument (in_header.len minus
 * the header minus the payload bytes long, possibly empty), the rest of the
 * request in the payload (ring_ent_in_out.payload_sz bytes).  The reply is
 * in_out = struct fuse_out_header and every reply argument in the payload.
 * IORING_OP_URING_CMD on the /dev/fuse descriptor, with 128-byte SQEs whose
 * command area holds struct fuse_uring_cmd_req: REGISTER (addr = the two
 * iovecs, len = 2) hands an entry to queue qid; COMMIT_AND_FETCH (commit_id
 * from the request) sends the reply and hands the entry back.
 */
#ifndef MENDFS_URING_ABI_H
#define MENDFS_URING_ABI_H

#include <stdint.h>

#define MFSD_FUSE_OVER_IO_URING_MINOR 42         /* first protocol minor with it */
#define MFSD_FUSE_OVER_IO_URING_FLAG2 (1u << 9)  /* FUSE_OVER_IO_URING: bit 41 = flags2 bit 9 */
#define MFSD_FUSE_INIT_EXT            (1u << 30) /* FUSE_INIT_EXT: flags2 is valid */
#define MFSD_FUSE_URING_IN_OUT_SZ     128u
#define MFSD_FUSE_URING_OP_IN_OUT_SZ  128u

enum mfsd_fuse_uring_cmd {
	MFSD_FUSE_IO_URING_CMD_INVALID = 0,
	MFSD_FUSE_IO_URING_CMD_REGISTER = 1,
	MFSD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

struct mfsd_fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's: given back in COMMIT_AND_FETCH */
	uint32_t payload_sz; /* bytes of the payload used */
	uint32_t padding;
	uint64_t reserved;
};

struct mfsd_fuse_uring_req_header {
	char in_out[MFSD_FUSE_URING_IN_OUT_SZ]; /* fuse_in_header / fuse_out_header */
	char op_in[MFSD_FUSE_URING_OP_IN_OUT_SZ];
	struct mfsd_fuse_uring_ent_in_out ring_ent_in_out;
};

struct mfsd_fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct mfsd_fuse_uring_ent_in_out) == 32, "FUSE io_uring ABI");
_Static_assert(sizeof(struct mfsd_fuse_uring_req_header) == 288, "FUSE io_uring ABI");
_Static_assert(sizeof(struct mfsd_fuse_uring_cmd_req) == 24, "FUSE io_uring ABI");

#endif
