/* SPDX-License-Identifier: MIT */
/*
 * Work that may wait, off the thread that received it (offload.h).  Calls
 * pthreads only.
 */
#include <errno.h>
#include <stdlib.h>

#include "offload.h"

struct mfsd_offload_work {
	struct mfsd_offload_work *next;
	struct mfsd_offload *o;
	void (*fn)(void *);
	void *arg;
};

int mfsd_offload_init(struct mfsd_offload *o, unsigned max)
{
	*o = (struct mfsd_offload){.max = max ? max : 1};
	if (pthread_mutex_init(&o->lock, NULL))
		return -ENOMEM;
	if (pthread_cond_init(&o->work, NULL)) {
		pthread_mutex_destroy(&o->lock);
		return -ENOMEM;
	}
	if (pthread_cond_init(&o->gone, NULL)) {
		pthread_cond_destroy(&o->work);
		pthread_mutex_destroy(&o->lock);
		return -ENOMEM;
	}
	return 0;
}

/* A thread ends (o->lock held): the last one wakes destroy. */
static void thread_end(struct mfsd_offload *o)
{
	if (--o->threads == 0)
		pthread_cond_broadcast(&o->gone);
}

static void *pool_thread(void *arg)
{
	struct mfsd_offload *o = arg;

	pthread_mutex_lock(&o->lock);
	for (;;) {
		struct mfsd_offload_work *w;

		while (!o->head && !o->stop) {
			o->idle++;
			pthread_cond_wait(&o->work, &o->lock);
			o->idle--;
		}
		w = o->head;
		if (!w)
			break; /* stop, and nothing left */
		o->head = w->next;
		if (!o->head)
			o->tail = NULL;
		pthread_mutex_unlock(&o->lock);
		w->fn(w->arg);
		free(w);
		pthread_mutex_lock(&o->lock);
	}
	o->pool--;
	thread_end(o);
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

static void *own_thread(void *arg)
{
	struct mfsd_offload_work *w = arg;
	struct mfsd_offload *o = w->o;

	w->fn(w->arg);
	free(w);
	pthread_mutex_lock(&o->lock);
	thread_end(o);
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/* A detached thread running @fn(@arg); 0 or its errno. */
static int spawn(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t th;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

int mfsd_offload_run(struct mfsd_offload *o, void (*fn)(void *), void *arg, bool own)
{
	struct mfsd_offload_work *w = malloc(sizeof(*w));
	int ret = 0;

	if (!w)
		return ENOMEM;
	*w = (struct mfsd_offload_work){.o = o, .fn = fn, .arg = arg};
	pthread_mutex_lock(&o->lock);
	if (own) {
		o->threads++;
		ret = spawn(own_thread, w);
		if (ret) {
			thread_end(o);
			free(w);
		}
		pthread_mutex_unlock(&o->lock);
		return ret;
	}
	if (!o->idle && o->pool < o->max) {
		o->threads++;
		o->pool++;
		ret = spawn(pool_thread, o);
		if (ret) {
			o->pool--;
			thread_end(o);
			if (!o->pool) { /* nobody would run it */
				pthread_mutex_unlock(&o->lock);
				free(w);
				return ret;
			}
			ret = 0; /* the pool's busy threads will */
		}
	}
	if (o->tail)
		o->tail->next = w;
	else
		o->head = w;
	o->tail = w;
	if (o->idle)
		pthread_cond_signal(&o->work);
	pthread_mutex_unlock(&o->lock);
	return 0;
}

void mfsd_offload_destroy(struct mfsd_offload *o)
{
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	pthread_cond_broadcast(&o->work);
	while (o->threads)
		pthread_cond_wait(&o->gone, &o->lock);
	pthread_mutex_unlock(&o->lock);
	pthread_cond_destroy(&o->gone);
	pthread_cond_destroy(&o->work);
	pthread_mutex_destroy(&o->lock);
}
