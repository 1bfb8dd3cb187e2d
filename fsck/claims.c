/* SPDX-License-Identifier: MIT */
/*
 * Who uses each data zone block, in memory linear in metadata: two bits per
 * block (used, quarantined) and the list of claims (one per extent or
 * quarantine entry, in the order they were made).  The owner of a block is
 * only ever needed to name it in a report (a block claimed twice, an
 * overlapping quarantine entry): the list is searched then, which is rare.
 */
#include <errno.h>
#include <stdlib.h>

#include "fsck.h"

struct fsck_claim {
	uint64_t idx, len; /* data zone blocks [idx, idx + len) */
	uint64_t owner;    /* inode, or DOWN_QUARANTINE */
};

int fsck_data_claims_init(struct fsck_ctx *ctx)
{
	uint64_t words = (ctx->sb.data_len + 63) / 64 + 1;

	ctx->data_used = calloc(words, sizeof(uint64_t));
	ctx->data_quar = calloc(words, sizeof(uint64_t));
	return ctx->data_used && ctx->data_quar ? 0 : -ENOMEM;
}

void fsck_data_claims_free(struct fsck_ctx *ctx)
{
	free(ctx->data_used);
	free(ctx->data_quar);
	free(ctx->claims);
	ctx->data_used = ctx->data_quar = NULL;
	ctx->claims = NULL;
	ctx->nclaims = ctx->cap_claims = 0;
}

bool fsck_data_is_used(const struct fsck_ctx *ctx, uint64_t idx)
{
	return ctx->data_used[idx / 64] >> (idx % 64) & 1;
}

bool fsck_data_is_quarantined(const struct fsck_ctx *ctx, uint64_t idx)
{
	return ctx->data_quar[idx / 64] >> (idx % 64) & 1;
}

int fsck_data_claim(struct fsck_ctx *ctx, uint64_t idx, uint64_t len, uint64_t owner)
{
	struct fsck_claim c = {.idx = idx, .len = len, .owner = owner};

	for (uint64_t i = idx; i < idx + len; i++) {
		ctx->data_used[i / 64] |= 1ull << (i % 64);
		if (owner == DOWN_QUARANTINE)
			ctx->data_quar[i / 64] |= 1ull << (i % 64);
	}
	return VEC_PUSH(ctx->claims, ctx->nclaims, ctx->cap_claims, c) ? -ENOMEM : 0;
}

uint64_t fsck_data_owner(const struct fsck_ctx *ctx, uint64_t idx)
{
	if (!fsck_data_is_used(ctx, idx))
		return 0;
	for (size_t i = 0; i < ctx->nclaims; i++)
		if (idx >= ctx->claims[i].idx && idx - ctx->claims[i].idx < ctx->claims[i].len)
			return ctx->claims[i].owner;
	return fsck_data_is_quarantined(ctx, idx) ? DOWN_QUARANTINE : 0;
}
