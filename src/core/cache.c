/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache.c - the registration cache (kinet/kinet.h, kinet_mr_cache_*).
 *
 * Entries are kept in one list, most recently used first (a lookup walks
 * it: hot ranges are found in the first few); those nobody holds are also
 * in an LRU list that eviction takes from the tail. Host ranges are
 * registered page aligned and watched by the memory monitor (monitor.h):
 * each call first reads the kernel's pending events and drops or marks the
 * entries whose memory went away. GPU ranges are registered whole (the
 * allocation the pointer belongs to) with its buffer id, compared on every
 * hit. An entry held by a get is never evicted nor deregistered: an
 * invalidated one is only marked (KINET_MR_INVALID) and goes at its last
 * put. The monitor never waits for this lock (it only appends to its ring),
 * so registering under it (which stops the software NIC's engines) cannot
 * deadlock against an engine that faults on a watched page.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core/internal.h"
#include "core/monitor.h"

struct cent {
	kinet_mr *mr;
	uintptr_t start, end;
	unsigned access;
	int kind;          /* enum kinet_mem_kind */
	uint64_t buf_id;   /* GPU: the allocation's identity */
	int refs;
	bool invalid;      /* memory went away or was reused: never handed out again */
	bool watched;      /* host: the monitor covers it (else deregistered at last put) */
	struct cent *prev, *next;         /* every entry, most recently used first */
	struct cent *lru_prev, *lru_next; /* entries nobody holds */
};

struct kinet_mr_cache {
	kinet_pd *pd;
	pthread_mutex_t lock;
	size_t max_entries, max_bytes;
	struct cent *head;
	struct cent *lru_head, *lru_tail; /* head: most recently put */
	uint64_t seen;                    /* monitor sequence applied */
	struct kinet_mr_cache_stats st;
	struct kinet_mr_cache *ctx_next;
	bool monitor;
};

static __thread const kinet_mr *dereg_self; /* the region the cache deregisters now */

bool kinet_mr_cache_owns_dereg(const kinet_mr *mr)
{
	return dereg_self == mr;
}

struct kinet_mr_cache *kinet_mr_cache_next(const struct kinet_mr_cache *c)
{
	return c->ctx_next;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void lru_del(kinet_mr_cache *c, struct cent *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else if (c->lru_head == e)
		c->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else if (c->lru_tail == e)
		c->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push(kinet_mr_cache *c, struct cent *e)
{
	e->lru_prev = NULL;
	e->lru_next = c->lru_head;
	if (c->lru_head)
		c->lru_head->lru_prev = e;
	c->lru_head = e;
	if (!c->lru_tail)
		c->lru_tail = e;
}

static void list_del(kinet_mr_cache *c, struct cent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	e->prev = e->next = NULL;
}

static void list_front(kinet_mr_cache *c, struct cent *e)
{
	if (c->head == e)
		return;
	if (e->prev || e->next || c->head == e)
		list_del(c, e);
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
}

/* Deregisters and frees an entry nobody holds (lock held): 0, or the
 * backend's refusal (-EBUSY: work in flight; the entry stays). */
static int ent_drop(kinet_mr_cache *c, struct cent *e)
{
	dereg_self = e->mr;
	int rc = kinet_mr_dereg_now(e->mr);
	dereg_self = NULL;
	if (rc)
		return rc;
	lru_del(c, e);
	list_del(c, e);
	c->st.entries--;
	c->st.bytes -= e->end - e->start;
	free(e);
	return 0;
}

/* Memory [start, end) went away: entries overlapping it (lock held). */
static void invalidate(uintptr_t start, uintptr_t end, void *arg)
{
	kinet_mr_cache *c = arg;
	for (struct cent *e = c->head; e; e = e->next)
		if (e->kind == KINET_MEM_HOST && !e->invalid && e->start < end && start < e->end) {
			e->invalid = true;
			atomic_store(&e->mr->state, KINET_MR_INVALID);
			c->st.invalidations++;
		}
}

/* Applies what the monitor saw since the last call; frees invalidated
 * entries nobody holds (lock held). */
static void apply_events(kinet_mr_cache *c, uint64_t upto)
{
	if (!c->monitor || upto == c->seen)
		return;
	if (!kinet_monitor_ranges(c->seen, upto, invalidate, c)) {
		/* events were lost: nothing watched can be trusted */
		invalidate(0, UINTPTR_MAX, c);
	}
	c->seen = upto;
	for (struct cent *e = c->head, *n; e; e = n) {
		n = e->next;
		if (e->invalid && e->refs == 0)
			ent_drop(c, e);
	}
}

int kinet_mr_cache_create(kinet_pd *pd, const struct kinet_mr_cache_attr *attr,
			  kinet_mr_cache **out)
{
	if (!pd || !out)
		return -EINVAL;
	*out = NULL;
	kinet_mr_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->pd = pd;
	pthread_mutex_init(&c->lock, NULL);
	c->max_entries = attr && attr->max_entries ? attr->max_entries
						   : (size_t)KT(MR_CACHE_ENTRIES);
	c->max_bytes = attr && attr->max_bytes ? attr->max_bytes : (size_t)KT(MR_CACHE_BYTES);
	c->monitor = kinet_monitor_start() == 0;
	c->st.monitor = c->monitor;
	c->seen = kinet_monitor_sync();
	atomic_fetch_add(&pd->refs, 1);
	kinet_ctx *ctx = pd->ctx;
	pthread_mutex_lock(&ctx->qp_lock);
	c->ctx_next = ctx->cache_head;
	ctx->cache_head = c;
	pthread_mutex_unlock(&ctx->qp_lock);
	*out = c;
	return 0;
}

int kinet_mr_cache_destroy(kinet_mr_cache *c)
{
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->st.held) {
		KLOG_WARN("kinet_mr_cache_destroy: %llu regions are still held",
			  (unsigned long long)c->st.held);
		pthread_mutex_unlock(&c->lock);
		return -EBUSY;
	}
	while (c->head) {
		int rc = ent_drop(c, c->head);
		if (rc) {
			pthread_mutex_unlock(&c->lock);
			return rc;
		}
	}
	pthread_mutex_unlock(&c->lock);
	kinet_ctx *ctx = c->pd->ctx;
	pthread_mutex_lock(&ctx->qp_lock);
	for (kinet_mr_cache **pp = &ctx->cache_head; *pp; pp = &(*pp)->ctx_next)
		if (*pp == c) {
			*pp = c->ctx_next;
			break;
		}
	pthread_mutex_unlock(&ctx->qp_lock);
	atomic_fetch_sub(&c->pd->refs, 1);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

static void hist_add(kinet_mr_cache *c, int path, uint64_t ns)
{
	uint64_t us = ns / 1000;
	int b = 0;
	while (b < KINET_MR_CACHE_HIST - 1 && us >= (1ull << b))
		b++;
	c->st.reg_hist[path][b]++;
	c->st.reg_ns[path] += ns;
}

/* Room for one more entry of `bytes`: evicts from the LRU tail (lock held). */
static bool make_room(kinet_mr_cache *c, size_t bytes)
{
	while ((c->st.entries + 1 > c->max_entries || c->st.bytes + bytes > c->max_bytes) &&
	       c->lru_tail) {
		struct cent *e = c->lru_tail;
		if (ent_drop(c, e)) {
			/* work in flight on it (mlx5): it stays; try the next one */
			lru_del(c, e);
			continue;
		}
		c->st.evictions++;
	}
	return c->st.entries + 1 <= c->max_entries && c->st.bytes + bytes <= c->max_bytes;
}

int kinet_mr_cache_get(kinet_mr_cache *c, void *addr, size_t len, unsigned access,
		       kinet_mr **out)
{
	if (!c || !addr || !len || !out || (access & ~KINET_ACCESS_ALL))
		return -EINVAL;
	*out = NULL;
	uintptr_t a = (uintptr_t)addr;
	if (a + len < a)
		return -ERANGE;
	int kind = KINET_MEM_HOST;
	struct kinet_cuda_mem gm;
	memset(&gm, 0, sizeof(gm));
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	if (cu && cu->pointer_kind) {
		int k = cu->pointer_kind(addr);
		if (k >= 0)
			kind = k;
	}
	if (kind == KINET_MEM_CUDA) {
		int rc = cu->mem_info ? cu->mem_info(addr, &gm) : -ENOSYS;
		const char *why = rc ? "its allocation identity is not available"
			: gm.pool ? "it belongs to a CUDA memory pool (cudaMallocAsync): the pool "
				    "reuses addresses and memory without the cache seeing it"
			: gm.vmm ? "it is mapped with cuMemMap: a remap changes the memory behind "
				   "the address without the cache seeing it"
			: gm.managed ? "it is managed memory, which migrates" : NULL;
		if (why) {
			pthread_mutex_lock(&c->lock);
			c->st.refused++;
			pthread_mutex_unlock(&c->lock);
			KLOG_ERR("kinet_mr_cache_get: GPU memory %p+%zu refused: %s; register it with "
				 "kinet_mr_reg and keep it for as long as the memory stays",
				 addr, len, why);
			return -EOPNOTSUPP;
		}
		if (a < gm.base || a + len > gm.base + gm.size)
			return -ERANGE;
	}
	uint64_t seq = kind == KINET_MEM_HOST ? kinet_monitor_sync() : 0;
	pthread_mutex_lock(&c->lock);
	if (kind == KINET_MEM_HOST)
		apply_events(c, seq);
	for (struct cent *e = c->head; e; e = e->next) {
		if (e->invalid || !e->watched || e->kind != kind || e->start > a || a + len > e->end ||
		    (e->access & access) != access)
			continue;
		if (kind == KINET_MEM_CUDA && e->buf_id != gm.buffer_id) {
			/* the address now belongs to another allocation */
			e->invalid = true;
			atomic_store(&e->mr->state, KINET_MR_INVALID);
			c->st.invalidations++;
			continue;
		}
		if (e->refs++ == 0) {
			lru_del(c, e);
			c->st.held++;
		}
		list_front(c, e);
		c->st.hits++;
		*out = e->mr;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	c->st.misses++;
	/* invalidated entries nobody holds go first */
	for (struct cent *e = c->head, *n; e; e = n) {
		n = e->next;
		if (e->invalid && e->refs == 0)
			ent_drop(c, e);
	}
	uintptr_t start, end;
	if (kind == KINET_MEM_CUDA) {
		start = gm.base;
		end = gm.base + gm.size;
	} else {
		uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
		start = a & ~(pg - 1);
		end = (a + len + pg - 1) & ~(pg - 1);
	}
	bool watched = kind == KINET_MEM_HOST && c->monitor && kinet_monitor_watch(start, end) == 0;
	bool keep = kind == KINET_MEM_CUDA || watched;
	if (keep && !make_room(c, end - start)) {
		c->st.refused++;
		KLOG_ERR("kinet_mr_cache_get: %p+%zu: the cache is full (%llu entries, %llu bytes) "
			 "and every entry is held",
			 addr, len, (unsigned long long)c->st.entries,
			 (unsigned long long)c->st.bytes);
		pthread_mutex_unlock(&c->lock);
		return -ENOSPC;
	}
	struct cent *e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	uint64_t t0 = now_ns();
	kinet_mr *mr;
	int rc = kinet_mr_reg(c->pd, (void *)start, end - start, access, &mr);
	if (rc) {
		free(e);
		pthread_mutex_unlock(&c->lock);
		return rc;
	}
	hist_add(c, kind == KINET_MEM_CUDA ? KINET_MR_CACHE_GPU : KINET_MR_CACHE_HOST,
		 now_ns() - t0);
	e->mr = mr;
	e->start = start;
	e->end = end;
	e->access = access;
	e->kind = kind;
	e->buf_id = gm.buffer_id;
	e->refs = 1;
	e->watched = keep;
	/* the events up to seq were applied above: only later ones can name it */
	atomic_store(&mr->mon_seen, seq);
	mr->cache_ent = e;
	list_front(c, e);
	c->st.entries++;
	c->st.bytes += end - start;
	c->st.held++;
	if (!keep)
		c->st.uncached++;
	*out = mr;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int kinet_mr_cache_put(kinet_mr_cache *c, kinet_mr *mr)
{
	if (!c || !mr || !mr->cache_ent)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	struct cent *e = mr->cache_ent;
	bool mine = false;
	for (struct cent *x = c->head; x && !mine; x = x->next)
		mine = x == e;
	if (!mine || e->refs == 0) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	int rc = 0;
	if (--e->refs == 0) {
		c->st.held--;
		if (e->invalid || !e->watched) {
			rc = ent_drop(c, e);
			if (rc) /* work in flight (mlx5): kept, dropped later */
				lru_push(c, e);
			rc = 0;
		} else {
			lru_push(c, e);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int kinet_mr_cache_flush(kinet_mr_cache *c)
{
	if (!c)
		return -EINVAL;
	int n = 0;
	pthread_mutex_lock(&c->lock);
	for (struct cent *e = c->head, *nx; e; e = nx) {
		nx = e->next;
		if (e->refs == 0 && ent_drop(c, e) == 0)
			n++;
	}
	pthread_mutex_unlock(&c->lock);
	return n;
}

int kinet_mr_cache_stats(const kinet_mr_cache *cc, struct kinet_mr_cache_stats *out)
{
	if (!cc || !out)
		return -EINVAL;
	kinet_mr_cache *c = (kinet_mr_cache *)cc;
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

struct overlap {
	uintptr_t start, end;
	bool hit;
};

static void overlap_fn(uintptr_t start, uintptr_t end, void *arg)
{
	struct overlap *o = arg;
	if (start < o->end && end > o->start)
		o->hit = true;
}

bool kinet_cache_mr_gone(kinet_mr *mr)
{
	if (atomic_load_explicit(&mr->state, memory_order_relaxed) == KINET_MR_INVALID)
		return true;
	if (mr->kind != KINET_MEM_HOST)
		return false;
	if (atomic_load_explicit(&mr->mon_gone, memory_order_relaxed))
		return true;
	uint64_t s = kinet_monitor_seq();
	uint64_t seen = atomic_load_explicit(&mr->mon_seen, memory_order_relaxed);
	if (s == seen)
		return false;
	struct overlap o = {(uintptr_t)mr->addr, (uintptr_t)mr->addr + mr->len, false};
	if (!kinet_monitor_ranges(seen, s, overlap_fn, &o))
		o.hit = true; /* ranges lost (the ring wrapped): it may be gone */
	if (o.hit)
		atomic_store(&mr->mon_gone, true);
	else
		atomic_store_explicit(&mr->mon_seen, s, memory_order_relaxed);
	return o.hit;
}
