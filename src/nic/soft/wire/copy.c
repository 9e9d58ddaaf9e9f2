/* SPDX-License-Identifier: BSD-3-Clause */
/* copy.c - the target's copy thread: the bytes of a landed rendezvous
 * read go from its bounce buffer into place on a thread of their own, so
 * that the engine thread goes on receiving (the provider's progress, the
 * kernel's copy out of the socket) while they are copied (docs/perf.md,
 * "Where the time goes").
 *
 * A read handed over here is no longer with the provider (giving its peer
 * up skips it) but still counts as in flight (rd_inflight: the key table
 * stays held, no region it writes into goes away) and in its write's
 * p->inflight (no ACK before its bytes are in place). The engine accounts
 * for it when it comes back (tgt.c's wire_rd_reap takes it with
 * wire_copy_take, under the wire's lock), as it does for a read copied on
 * its own thread. A copy is a memcpy of at most RD_PIECE bytes: it ends in
 * bounded time, so whatever waits for in-flight reads (a registration, a
 * reset, the wire's destruction) waits for it. A write the engine forgets
 * (its QP reset or destroyed, a NAK, its requester finished it) has its
 * reads still waiting here skipped, and one being copied lands first
 * (wire_copy_forget): nothing of it lands afterwards. The thread calls
 * nothing of the wire, and neither does this file: tgt.c hands reads over
 * and takes them back. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>

#include "nic/soft/wire/wire_int.h"

#ifdef KINET_HAVE_FABRIC

#define COPY_SPIN_NS 100000ull /* an idle copy thread polls this long, then sleeps */
#define SH_COPY_MIN 131072u    /* the same-host wire's KINET_NET_COPY_MIN when not set */

struct wire_copier {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t cur_cv;         /* cur is done (wire_copy_forget waits for it) */
	struct rdop *todo, *todo_tail; /* handed over, oldest first (mu) */
	struct rdop *cur;              /* being copied now (mu) */
	uint64_t copied;               /* bytes copied, not yet counted in copy_bytes (mu) */
	struct rdop *done;             /* copied, not yet accounted (mu) */
	bool sleeping;                 /* waits on cv (mu) */
	bool stop;                     /* (mu) */
	int out;                       /* handed over, not yet accounted (the engine's) */
	uint64_t forgets;              /* forgets that marked their ops skipped (mu) */
};

static void *copier_main(void *arg)
{
	struct wire_copier *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct rdop *op = c->todo;
		if (!op) {
			if (c->stop)
				break;
			/* poll a while (a stream hands over a read every few
			 * microseconds), then sleep until the engine wakes us */
			uint64_t t0 = kn_now_ns();
			pthread_mutex_unlock(&c->mu);
			while (!__atomic_load_n(&c->todo, __ATOMIC_ACQUIRE) &&
			       !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) &&
			       kn_now_ns() - t0 < COPY_SPIN_NS)
				sched_yield();
			pthread_mutex_lock(&c->mu);
			if (!c->todo && !c->stop) {
				c->sleeping = true;
				pthread_cond_wait(&c->cv, &c->mu);
				c->sleeping = false;
			}
			continue;
		}
		__atomic_store_n(&c->todo, op->next, __ATOMIC_RELEASE);
		if (!op->next)
			c->todo_tail = NULL;
		if (!op->skip) {
			c->cur = op;
			pthread_mutex_unlock(&c->mu);
			memcpy(op->dst, op->bounce, op->len);
			pthread_mutex_lock(&c->mu);
			c->cur = NULL;
			c->copied += op->len;
			pthread_cond_broadcast(&c->cur_cv);
		}
		op->next = c->done;
		__atomic_store_n(&c->done, op, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Copy thread for this wire's reads? Set when the wire is made. */
void wire_copy_setup(struct kinet_wire *w)
{
	const char *mode = KT(NET_COPY_THREAD);
	long long min = (long long)KT(NET_COPY_MIN);
	w->copy_min = min > 0 ? (uint64_t)min : 0;
	/* shm reads are one copy by the kernel, fast: on 16 CPUs 256 KiB and
	 * 1 MiB writes went faster through the thread, 64 KiB ones slower in
	 * one run (hand-over and reap added to each read; within the spread
	 * between runs there, docs/perf.md): small ones stay on the engine */
	const struct kinet_tunable *mt = kinet_tunable_at(KT_ID_NET_COPY_MIN);
	if (w->same_host && mt && !(mt->flags & KINET_TUNABLE_SET))
		w->copy_min = SH_COPY_MIN;
	if (!strcmp(mode, "off")) {
		w->copy_on = false;
		snprintf(w->copy_why, sizeof(w->copy_why), "KINET_NET_COPY_THREAD=off");
	} else if (!strcmp(mode, "on")) {
		w->copy_on = true;
		snprintf(w->copy_why, sizeof(w->copy_why), "KINET_NET_COPY_THREAD=on");
	} else {
		/* a thread of its own only pays where it has a CPU of its own:
		 * the engine, the application and it busy at once */
		cpu_set_t cs;
		int ncpu = sched_getaffinity(0, sizeof(cs), &cs) == 0 ? CPU_COUNT(&cs) : 1;
		w->copy_on = ncpu >= 4;
		snprintf(w->copy_why, sizeof(w->copy_why),
			 "KINET_NET_COPY_THREAD=auto: %d CPU(s) to run on, %s", ncpu,
			 w->copy_on ? "4 or more" : "fewer than 4: copied on the engine thread");
	}
}

/* Starts the thread (the first read it takes): false where it cannot be
 * started, which is said once, and the reads are copied on the engine. */
static bool copier_start(struct kinet_wire *w)
{
	struct wire_copier *c = calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	pthread_cond_init(&c->cur_cv, NULL);
	if (pthread_create(&c->th, NULL, copier_main, c) != 0) {
		pthread_cond_destroy(&c->cur_cv);
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		free(c);
		goto fail;
	}
	kinet_thread_name(c->th, "kn-wire-copy");
	w->cp = c;
	return true;
fail:
	w->copy_on = false;
	snprintf(w->copy_why, sizeof(w->copy_why),
		 "the copy thread could not be started: copied on the engine thread");
	KLOG_WARN("wire: %s", w->copy_why);
	return false;
}

bool wire_copy_give(struct kinet_wire *w, struct rdop *op)
{
	if (!w->copy_on || op->len < w->copy_min || op->dkind != KINET_MEM_HOST)
		return false;
	if (!w->cp && !copier_start(w))
		return false;
	struct wire_copier *c = w->cp;
	op->next = NULL;
	op->skip = false;
	pthread_mutex_lock(&c->mu);
	if (c->todo_tail)
		c->todo_tail->next = op;
	else
		__atomic_store_n(&c->todo, op, __ATOMIC_RELEASE);
	c->todo_tail = op;
	bool wake = c->sleeping;
	pthread_mutex_unlock(&c->mu);
	if (wake)
		pthread_cond_signal(&c->cv);
	c->out++;
	return true;
}

struct rdop *wire_copy_take(struct kinet_wire *w)
{
	struct wire_copier *c = w->cp;
	if (!c || !c->out)
		return NULL;
	if (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE))
		return NULL; /* under way (the engine polls on for KINET_ENGINE_SPIN_US
			      * before its first nap, longer than a copy takes) */
	pthread_mutex_lock(&c->mu);
	struct rdop *op = c->done;
	c->done = NULL;
	w->copy_bytes += c->copied;
	c->copied = 0;
	pthread_mutex_unlock(&c->mu);
	for (struct rdop *o = op; o; o = o->next)
		c->out--;
	return op;
}

void wire_copy_forget(struct kinet_wire *w)
{
	struct wire_copier *c = w->cp;
	if (!c || !c->out)
		return;
	/* op->p is the engine's (this thread's): the copy thread never reads it */
	pthread_mutex_lock(&c->mu);
	for (struct rdop *op = c->todo; op; op = op->next)
		if (!op->p)
			op->skip = true;
	c->forgets++;
	while (c->cur && !c->cur->p)
		pthread_cond_wait(&c->cur_cv, &c->mu); /* a memcpy of at most RD_PIECE bytes */
	pthread_mutex_unlock(&c->mu);
}

uint64_t wire_copy_forgets(struct kinet_wire *w)
{
	struct wire_copier *c = w->cp;
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	uint64_t n = c->forgets;
	pthread_mutex_unlock(&c->mu);
	return n;
}

void wire_copy_stop(struct kinet_wire *w)
{
	struct wire_copier *c = w->cp;
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	__atomic_store_n(&c->stop, true, __ATOMIC_RELEASE);
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->th, NULL); /* it copies what it was handed first */
}

void wire_copy_free(struct kinet_wire *w)
{
	struct wire_copier *c = w->cp;
	if (!c)
		return;
	pthread_cond_destroy(&c->cur_cv);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	w->cp = NULL;
}

#endif /* KINET_HAVE_FABRIC */
