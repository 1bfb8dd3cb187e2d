/* SPDX-License-Identifier: MIT */
/*
 * Tag allocation: a bitmap of busy tags split into words that each sit on
 * their own cache line, so threads allocating through different hints touch
 * different lines.  A tag indexes the hardware queue's static request array
 * (blk_tag_to_rq() is an array index).  Batch allocation claims up to a whole
 * word with one atomic OR; completion frees whole words with one atomic AND.
 *
 * Waiting: when the map is full a submitter sleeps on a futex (wake_seq); the
 * freeing side wakes only when someone announced itself in 'waiters', so the
 * common path pays one load.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "blk_internal.h"

static unsigned blk_tags_bits_per_word(unsigned depth)
{
	/*
	 * Spread small maps over several words (lines) so concurrent
	 * allocators rarely meet, but keep words big enough that a plug's
	 * batch (32) usually comes from one word.
	 */
	unsigned bits = 64;

	while (bits > 32 && depth / bits < 4)
		bits >>= 1;
	return bits;
}

int blk_tags_init(struct blk_tags *tags, unsigned depth)
{
	unsigned w;

	if (depth == 0 || depth > BLK_MAX_DEPTH)
		return -EINVAL;
	memset(tags, 0, sizeof(*tags));
	tags->depth = depth;
	tags->bits_per_word = blk_tags_bits_per_word(depth);
	tags->shift = __builtin_ctz(tags->bits_per_word);
	tags->nr_words = (depth + tags->bits_per_word - 1) >> tags->shift;
	tags->words = aligned_alloc(BLK_CACHELINE, sizeof(*tags->words) * tags->nr_words);
	tags->rqs = aligned_alloc(BLK_CACHELINE, sizeof(*tags->rqs) * depth);
	if (!tags->words || !tags->rqs) {
		free(tags->words);
		free(tags->rqs);
		return -ENOMEM;
	}
	memset(tags->words, 0, sizeof(*tags->words) * tags->nr_words);
	memset(tags->rqs, 0, sizeof(*tags->rqs) * depth);
	for (w = 0; w < tags->nr_words; w++) {
		unsigned bits = depth - (w << tags->shift);

		if (bits > tags->bits_per_word)
			bits = tags->bits_per_word;
		tags->words[w].valid = bits == 64 ? ~0ull : (1ull << bits) - 1;
		atomic_init(&tags->words[w].busy, 0);
	}
	for (w = 0; w < depth; w++)
		tags->rqs[w].tag = (uint16_t)w;
	atomic_init(&tags->waiters, 0);
	atomic_init(&tags->wake_seq, 0);
	return 0;
}

void blk_tags_exit(struct blk_tags *tags)
{
	free(tags->words);
	free(tags->rqs);
	tags->words = NULL;
	tags->rqs = NULL;
}

/* Claim the lowest free bit of word @w.  Returns the bit or -1. */
static inline int blk_tag_word_get(struct blk_tag_word *word)
{
	uint64_t busy = atomic_load_explicit(&word->busy, memory_order_relaxed);

	for (;;) {
		uint64_t free_bits = ~busy & word->valid;
		uint64_t bit;

		if (!free_bits)
			return -1;
		bit = free_bits & -free_bits;
		busy = atomic_fetch_or_explicit(&word->busy, bit, memory_order_acquire);
		if (likely(!(busy & bit)))
			return __builtin_ctzll(bit);
		/* lost the race for that bit: busy now holds the fresh word */
	}
}

int blk_tag_get(struct blk_tags *tags, unsigned *hint)
{
	unsigned w = *hint, i;

	if (unlikely(w >= tags->nr_words))
		w = 0;
	for (i = 0; i < tags->nr_words; i++) {
		int bit = blk_tag_word_get(&tags->words[w]);

		if (likely(bit >= 0)) {
			*hint = w;
			return (int)(w << tags->shift) + bit;
		}
		if (++w == tags->nr_words)
			w = 0;
	}
	return -1;
}

uint64_t blk_tag_get_batch(struct blk_tags *tags, unsigned *hint, unsigned nr, unsigned *offset)
{
	unsigned w = *hint, i;

	if (unlikely(w >= tags->nr_words))
		w = 0;
	for (i = 0; i < tags->nr_words; i++) {
		struct blk_tag_word *word = &tags->words[w];
		uint64_t busy = atomic_load_explicit(&word->busy, memory_order_relaxed);
		uint64_t free_bits = ~busy & word->valid;

		if (free_bits) {
			uint64_t want = 0, got;
			unsigned n = 0;

			/* the lowest @nr free bits */
			while (free_bits && n < nr) {
				want |= free_bits & -free_bits;
				free_bits &= free_bits - 1;
				n++;
			}
			busy = atomic_fetch_or_explicit(&word->busy, want, memory_order_acquire);
			got = want & ~busy;
			if (got) {
				*hint = w;
				*offset = w << tags->shift;
				return got;
			}
		}
		if (++w == tags->nr_words)
			w = 0;
	}
	return 0;
}

void blk_tags_wake(struct blk_tags *tags)
{
	atomic_fetch_add_explicit(&tags->wake_seq, 1, memory_order_seq_cst);
	blk_futex(&tags->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
}

void blk_tags_wait(struct blk_tags *tags, uint32_t seq)
{
	blk_futex(&tags->wake_seq, FUTEX_WAIT, seq, NULL);
}

void blk_tags_put_mask(struct blk_tags *tags, unsigned w, uint64_t mask)
{
	/*
	 * seq_cst so that the release of the bits is ordered before the load
	 * of 'waiters': a waiter increments 'waiters' and then retries the
	 * allocation, so either it sees our bits or we see it.
	 */
	atomic_fetch_and_explicit(&tags->words[w].busy, ~mask, memory_order_seq_cst);
	if (unlikely(atomic_load_explicit(&tags->waiters, memory_order_seq_cst)))
		blk_tags_wake(tags);
}

void blk_tag_put(struct blk_tags *tags, unsigned tag)
{
	blk_tags_put_mask(tags, tag >> tags->shift, 1ull << (tag & (tags->bits_per_word - 1)));
}

bool blk_tags_idle(const struct blk_tags *tags)
{
	unsigned w;

	for (w = 0; w < tags->nr_words; w++)
		if (atomic_load_explicit(&tags->words[w].busy, memory_order_acquire))
			return false;
	return true;
}

unsigned blk_tags_busy(const struct blk_tags *tags)
{
	unsigned w, n = 0;

	for (w = 0; w < tags->nr_words; w++)
		n += (unsigned)__builtin_popcountll(
		        atomic_load_explicit(&tags->words[w].busy, memory_order_relaxed) &
		        tags->words[w].valid);
	return n;
}
