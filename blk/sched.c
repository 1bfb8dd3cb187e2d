/* SPDX-License-Identifier: MIT */
/*
 * The "deadline" scheduler: requests wait in a sector-sorted list and a FIFO;
 * dispatch takes batches in ascending sector order (a one-way elevator that
 * restarts from the lowest sector), unless the oldest request has waited past
 * its deadline, in which case the batch starts there.  Requests know they are
 * scheduled by RQF_ELV, set when the scheduler is attached, so devices without
 * a scheduler never look here.  A pull model, as blk-mq's elevators: dispatch.c
 * inserts requests and takes batches; nothing here issues I/O.  Calls nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blk_internal.h"

#define BLK_ELV_BATCH           16
#define BLK_ELV_READ_EXPIRE_NS  (500ull * 1000 * 1000)
#define BLK_ELV_WRITE_EXPIRE_NS (5000ull * 1000 * 1000)

struct blk_elevator {
	pthread_mutex_t lock;
	struct blk_request *sorted; /* by sector, linked by elv_next */
	struct blk_request *fifo_head, *fifo_tail;
	uint64_t next_sector; /* elevator position */
	unsigned queued;
};

uint64_t blk_elv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct blk_elevator *blk_elv_alloc(const char *name)
{
	struct blk_elevator *elv;

	if (strcmp(name, "deadline"))
		return NULL;
	elv = calloc(1, sizeof(*elv));
	if (elv)
		pthread_mutex_init(&elv->lock, NULL);
	return elv;
}

void blk_elv_free(struct blk_elevator *elv)
{
	if (!elv)
		return;
	pthread_mutex_destroy(&elv->lock);
	free(elv);
}

static void blk_elv_add_rq(struct blk_elevator *elv, struct blk_request *rq, uint64_t now)
{
	struct blk_request **pp = &elv->sorted;

	while (*pp && (*pp)->sector <= rq->sector)
		pp = &(*pp)->elv_next;
	rq->elv_next = *pp;
	*pp = rq;

	rq->deadline_ns =
	        now + (rq->op == BLK_OP_READ ? BLK_ELV_READ_EXPIRE_NS : BLK_ELV_WRITE_EXPIRE_NS);
	rq->fifo_next = NULL;
	if (elv->fifo_tail)
		elv->fifo_tail->fifo_next = rq;
	else
		elv->fifo_head = rq;
	elv->fifo_tail = rq;
	elv->queued++;
}

static void blk_elv_unlink(struct blk_elevator *elv, struct blk_request *rq)
{
	struct blk_request **pp;

	for (pp = &elv->sorted; *pp != rq; pp = &(*pp)->elv_next)
		;
	*pp = rq->elv_next;
	for (pp = &elv->fifo_head; *pp != rq; pp = &(*pp)->fifo_next)
		;
	*pp = rq->fifo_next;
	if (elv->fifo_tail == rq) {
		struct blk_request *t = elv->fifo_head;

		while (t && t->fifo_next)
			t = t->fifo_next;
		elv->fifo_tail = t;
	}
	elv->queued--;
}

/* Pick the next batch (linked by rq_next, in dispatch order). */
static struct blk_request *blk_elv_next_batch(struct blk_elevator *elv, uint64_t now)
{
	struct blk_request *start, *rq, *head = NULL, **tailp = &head;
	unsigned n = 0;

	if (!elv->sorted)
		return NULL;
	if (elv->fifo_head && elv->fifo_head->deadline_ns <= now) {
		start = elv->fifo_head; /* expired: serve the oldest first */
	} else {
		for (start = elv->sorted; start && start->sector < elv->next_sector;
		     start = start->elv_next)
			;
		if (!start)
			start = elv->sorted; /* wrap: one-way elevator */
	}
	for (rq = start; rq && n < BLK_ELV_BATCH; n++) {
		struct blk_request *next = rq->elv_next;

		blk_elv_unlink(elv, rq);
		rq->rq_next = NULL;
		*tailp = rq;
		tailp = &rq->rq_next;
		elv->next_sector = rq->sector + (rq->len >> BLK_SECTOR_SHIFT);
		rq = next;
	}
	return head;
}

struct blk_request *blk_elv_insert(struct blk_elevator *elv, struct blk_request *list, uint64_t now)
{
	struct blk_request *rq, *next, *batch;

	pthread_mutex_lock(&elv->lock);
	for (rq = list; rq; rq = next) {
		next = rq->rq_next;
		blk_elv_add_rq(elv, rq, now);
	}
	batch = blk_elv_next_batch(elv, now);
	pthread_mutex_unlock(&elv->lock);
	return batch;
}

struct blk_request *blk_elv_next(struct blk_elevator *elv, uint64_t now)
{
	struct blk_request *batch;

	pthread_mutex_lock(&elv->lock);
	batch = blk_elv_next_batch(elv, now);
	pthread_mutex_unlock(&elv->lock);
	return batch;
}
