/* SPDX-License-Identifier: BSD-3-Clause */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "testutil.h"

uint64_t tu_rand64(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

void tu_fill_random(void *buf, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	uint8_t *b = buf;
	for (size_t i = 0; i < n; i++) {
		if ((i & 7) == 0)
			tu_rand64(&s);
		b[i] = (uint8_t)(s >> ((i & 7) * 8));
	}
}

int tu_guarded_alloc(struct tu_guarded *g, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (len + pg - 1) / pg * pg;
	g->maplen = body + 2 * pg;
	g->map = mmap(NULL, g->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->map == MAP_FAILED)
		return -1;
	if (mprotect((uint8_t *)g->map + pg, body, PROT_READ | PROT_WRITE))
		return -1;
	/* the region ends exactly at the upper guard page */
	g->ptr = (uint8_t *)g->map + pg + (body - len);
	g->len = len;
	return 0;
}

void tu_guarded_free(struct tu_guarded *g)
{
	if (g->map)
		munmap(g->map, g->maplen);
	g->map = NULL;
}

int tu_pair_open(struct tu_pair *p, const struct kinet_qp_attr *attr)
{
	memset(p, 0, sizeof(*p));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	int rc = kinet_open(&ca, &p->ctx);
	if (rc)
		return rc;
	if ((rc = kinet_pd_alloc(p->ctx, &p->pd)))
		return rc;
	if ((rc = kinet_qp_create(p->pd, attr, &p->a)))
		return rc;
	if ((rc = kinet_qp_create(p->pd, attr, &p->b)))
		return rc;
	if ((rc = kinet_qp_connect_local(p->a, p->b)))
		return rc;
	if ((rc = kinet_qp_device(p->a, &p->da)))
		return rc;
	return kinet_qp_device(p->b, &p->db);
}

void tu_pair_close(struct tu_pair *p)
{
	if (p->a)
		kinet_qp_destroy(p->a);
	if (p->b)
		kinet_qp_destroy(p->b);
	if (p->pd)
		kinet_pd_free(p->pd);
	if (p->ctx)
		kinet_close(p->ctx);
	memset(p, 0, sizeof(*p));
}
