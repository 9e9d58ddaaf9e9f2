/* SPDX-License-Identifier: BSD-3-Clause */
/* The key table (keytab.h). */
#include <stdlib.h>
#include <string.h>
#include "nic/soft/keytab.h"
#include "nic/soft/soft.h"
#include "gpu/gpu.h"

static void view_set(struct kinet_keytab *kt, uint32_t i, const kinet_mr *mr);

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: only the order of fresh slots depends on it */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int kinet_keytab_init(struct kinet_keytab *kt)
{
	memset(kt, 0, sizeof(*kt));
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&kt->lock, &a);
	pthread_rwlockattr_destroy(&a);
	uint8_t r[9];
	kinet_random(r, sizeof(r));
	kt->step = (uint8_t)(r[0] | 1u);
	memcpy(&kt->rng, r + 1, 8);
	return 0;
}

void kinet_keytab_fini(struct kinet_keytab *kt)
{
	free(kt->tab);
	free(kt->tag);
	free(kt->fifo);
	if (kt->view)
		kinet_queue_free(kt->view, kt->vbytes);
	pthread_rwlock_destroy(&kt->lock);
}

static void fifo_push(struct kinet_keytab *kt, uint32_t i)
{
	kt->fifo[(kt->fhead + kt->nfree) % kt->cap] = i;
	kt->nfree++;
}

/* Doubles the table; the new slots join the free FIFO in a random order,
 * each with a random first tag. */
static int grow(struct kinet_keytab *kt)
{
	uint32_t ocap = kt->cap, ncap = ocap ? ocap * 2 : 2 * KINET_KEYTAB_MIN_FREE;
	if (ncap > (1u << 24))
		return -ENOMEM;
	kinet_mr **t = calloc(ncap, sizeof(*t));
	uint8_t *tg = calloc(ncap, 1);
	uint32_t *f = calloc(ncap, sizeof(*f));
	if (!t || !tg || !f) {
		free(t);
		free(tg);
		free(f);
		return -ENOMEM;
	}
	if (ocap) {
		memcpy(t, kt->tab, ocap * sizeof(*t));
		memcpy(tg, kt->tag, ocap);
		for (uint32_t k = 0; k < kt->nfree; k++)
			f[k] = kt->fifo[(kt->fhead + k) % ocap];
	}
	free(kt->tab);
	free(kt->tag);
	free(kt->fifo);
	kt->tab = t;
	kt->tag = tg;
	kt->fifo = f;
	kt->fhead = 0;
	kt->cap = ncap;
	uint32_t first = ocap ? ocap : 1; /* slot 0 is never used */
	uint32_t n = ncap - first;
	uint32_t *order = malloc(n * sizeof(*order));
	if (!order)
		return -ENOMEM; /* the table is larger, nothing new is free yet */
	for (uint32_t k = 0; k < n; k++)
		order[k] = first + k;
	for (uint32_t k = n - 1; k > 0; k--) {
		uint32_t j = (uint32_t)(rng_next(&kt->rng) % (k + 1));
		uint32_t x = order[k];
		order[k] = order[j];
		order[j] = x;
	}
	for (uint32_t k = 0; k < n; k++) {
		kt->tag[order[k]] = (uint8_t)rng_next(&kt->rng);
		fifo_push(kt, order[k]);
	}
	free(order);
	return 0;
}

int kinet_keytab_insert(struct kinet_keytab *kt, kinet_mr *mr)
{
	if (kt->nfree <= KINET_KEYTAB_MIN_FREE && grow(kt) && kt->nfree == 0)
		return -ENOMEM;
	uint32_t i = kt->fifo[kt->fhead];
	kt->fhead = (kt->fhead + 1) % kt->cap;
	kt->nfree--;
	uint8_t tag = (uint8_t)(kt->tag[i] + kt->step);
	if (!tag)
		tag = (uint8_t)(tag + kt->step); /* never 0: key 0x100 is mlx5's invalid lkey */
	kt->tag[i] = tag;
	mr->key = (i << 8) | tag;
	mr->rkey = mr->key;
	kt->tab[i] = mr;
	if (kt->view && kt->vcap != kt->cap && kinet_keytab_view_enable(kt))
		KLOG_ERR("soft: the GPU engine's key view could not grow: its QPs stay on the CPU");
	view_set(kt, i, mr);
	return 0;
}

void kinet_keytab_remove(struct kinet_keytab *kt, kinet_mr *mr)
{
	uint32_t i = mr->key >> 8;
	if (i == 0 || i >= kt->cap || kt->tab[i] != mr)
		return;
	kt->tab[i] = NULL;
	view_set(kt, i, NULL);
	fifo_push(kt, i); /* behind every slot freed before it */
}

int kinet_keytab_check(const struct kinet_keytab *kt, const kinet_pd *pd, uint32_t key,
		       uint64_t addr, uint64_t len, unsigned access, struct kinet_mr_ref *out)
{
	uint32_t i = key >> 8;
	kinet_mr *mr = i && i < kt->cap ? kt->tab[i] : NULL;
	int known = mr && mr->key == key;
	/* the rule the GPU engine applies too (rules.h) */
	uint32_t why = kn_rule_region(
		known, known && (!pd || mr->pd == pd),
		known && atomic_load_explicit(&mr->state, memory_order_relaxed) == KINET_MR_REVOKED,
		known ? mr->access : 0, known ? (uint64_t)(uintptr_t)mr->addr : 0,
		known ? mr->len : 0, addr, len, access);
	if (why)
		return (int)why;
	out->ptr = (uint8_t *)(uintptr_t)addr;
	out->kind = mr->kind;
	out->mr = mr;
	return 0;
}

/* ---- the view (rules.h's struct kn_keyent), for the GPU engine ---------- */

static void view_set(struct kinet_keytab *kt, uint32_t i, const kinet_mr *mr)
{
	if (!kt->view || i >= kt->vcap)
		return;
	struct kn_keyent *e = &kt->view[i];
	if (!mr) {
		memset(e, 0, sizeof(*e));
		return;
	}
	e->base = (uint64_t)(uintptr_t)mr->addr;
	e->len = mr->len;
	e->pd = (uint64_t)(uintptr_t)mr->pd;
	e->access = mr->access;
	e->kind = mr->kind;
	e->revoked = atomic_load(&mr->state) == KINET_MR_REVOKED;
	e->gbase = 0;
	if (kinet_geng_host()) {
		/* the host executor (KINET_GPU_ENGINE=host): host memory is its own
		 * address space, GPU memory out of its reach; cached host memory
		 * as below */
		if (mr->kind != KINET_MEM_CUDA && !mr->cache_ent)
			e->gbase = e->base;
	} else if (mr->kind == KINET_MEM_CUDA) {
		e->gbase = e->base; /* unified addressing */
	} else if (mr->cache_ent) {
		/* cached host memory may be unmapped under its key: the CPU
		 * engine checks the monitor before each access (kinet_cache_mr_gone) */
	} else if (kinet_cuda && kinet_cuda->dev_addr) {
		void *d = NULL;
		if (kinet_cuda->dev_addr(mr->addr, &d) == 0 && d)
			e->gbase = (uint64_t)(uintptr_t)d;
	}
	e->key = mr->key;
}

int kinet_keytab_view_enable(struct kinet_keytab *kt)
{
	if (kt->view && kt->vcap == kt->cap)
		return 0;
	uint32_t cap = kt->cap ? kt->cap : 1;
	size_t bytes = ((size_t)cap * sizeof(struct kn_keyent) + 4095) & ~(size_t)4095;
	struct kn_keyent *v = kinet_queue_alloc(bytes);
	if (!v)
		return -ENOMEM;
	struct kn_keyent *old = kt->view;
	size_t obytes = kt->vbytes;
	kt->view = v;
	kt->vcap = cap;
	kt->vbytes = bytes;
	for (uint32_t i = 1; i < kt->cap; i++)
		if (kt->tab[i])
			view_set(kt, i, kt->tab[i]);
	if (old)
		kinet_queue_free(old, obytes);
	return 0;
}

void kinet_keytab_view_update(struct kinet_keytab *kt, const kinet_mr *mr)
{
	uint32_t i = mr->key >> 8;
	if (i && i < kt->cap && kt->tab[i] == mr)
		view_set(kt, i, mr);
}
