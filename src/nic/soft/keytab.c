/* SPDX-License-Identifier: BSD-3-Clause */
/* The key table (keytab.h). */
#include <stdlib.h>
#include <string.h>
#include "nic/soft/keytab.h"

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
	return 0;
}

void kinet_keytab_remove(struct kinet_keytab *kt, kinet_mr *mr)
{
	uint32_t i = mr->key >> 8;
	if (i == 0 || i >= kt->cap || kt->tab[i] != mr)
		return;
	kt->tab[i] = NULL;
	fifo_push(kt, i); /* behind every slot freed before it */
}

int kinet_keytab_check(const struct kinet_keytab *kt, const kinet_pd *pd, uint32_t key,
		       uint64_t addr, uint64_t len, unsigned access, struct kinet_mr_ref *out)
{
	uint32_t i = key >> 8;
	if (i == 0 || i >= kt->cap)
		return KINET_REASON_UNKNOWN_KEY;
	kinet_mr *mr = kt->tab[i];
	if (!mr || mr->key != key)
		return KINET_REASON_UNKNOWN_KEY;
	if (pd && mr->pd != pd)
		return KINET_REASON_WRONG_PD;
	if (atomic_load_explicit(&mr->state, memory_order_relaxed) == KINET_MR_REVOKED)
		return KINET_REASON_REVOKED;
	if ((mr->access & access) != access)
		return KINET_REASON_ACCESS;
	uint64_t base = (uint64_t)(uintptr_t)mr->addr;
	if (addr < base || len > mr->len || addr - base > mr->len - len)
		return KINET_REASON_OUT_OF_BOUNDS;
	out->ptr = (uint8_t *)(uintptr_t)addr;
	out->kind = mr->kind;
	out->mr = mr;
	return 0;
}
