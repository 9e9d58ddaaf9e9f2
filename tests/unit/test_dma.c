/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Copy queues (kinet/dma.h, kinet/device_dma.h) on the software NIC, driven
 * from the host executor: copies of many sizes (random data, byte for byte,
 * the bytes around each copy untouched, canaries), a batch under one
 * doorbell, threads sharing a queue, and the key checks of RDMA: a source
 * key that does not cover the source, a destination without remote write
 * access or outside its region, each completed with the error CQE's
 * syndrome, nothing written, later copies flushed.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/dma.h>
#include <kinet/device_dma.h>
#include "../util/testutil.h"

#define REG (1u << 22)

struct env {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_dma *dma;
	kn_dma *d;
	struct tu_region src, dst;
	uint8_t *shadow;
};

static void env_open(struct env *e, const struct kinet_dma_attr *a)
{
	memset(e, 0, sizeof(*e));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &e->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(e->ctx, &e->pd), 0);
	cr_assert_eq(kinet_dma_create(e->pd, a, &e->dma), 0);
	cr_assert_eq(kinet_dma_device(e->dma, &e->d), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->pd, REG, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->pd, REG,
				     KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE, 2),
		     0);
	e->shadow = malloc(REG);
	cr_assert_not_null(e->shadow);
	memcpy(e->shadow, e->dst.buf, REG);
	tu_fail_msg[0] = 0;
}

static void env_close(struct env *e)
{
	cr_assert_eq(memcmp(e->dst.buf, e->shadow, REG), 0, "the destination has stray bytes");
	cr_assert(tu_region_canaries_ok(&e->src) && tu_region_canaries_ok(&e->dst));
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	free(e->shadow);
	cr_assert_eq(kinet_dma_destroy(e->dma), 0);
	cr_assert_eq(kinet_pd_free(e->pd), 0);
	cr_assert_eq(kinet_close(e->ctx), 0);
}

static uint32_t dkey(struct env *e)
{
	return kinet_mr_rkey(e->dst.mr);
}

Test(dma, copies_of_many_sizes_byte_exact)
{
	struct env e;
	env_open(&e, NULL);
	static const uint32_t sizes[] = {1, 3, 64, 4095, 4097, 65536, 100003, (1u << 21) + 7};
	uint64_t seed = 9;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		uint32_t so = (uint32_t)(tu_rand64(&seed) % (REG - n)),
			 dof = (uint32_t)(tu_rand64(&seed) % (REG - n));
		tu_fill_random(e.src.buf + so, n, seed + i);
		kn_ticket_t t;
		cr_assert_eq(kn_dma_memcpy(e.d, e.dst.buf + dof, dkey(&e), e.src.buf + so,
					   tu_lkey(&e.src), n, &t),
			     0);
		cr_assert_eq(kn_dma_wait(e.d, t), 0, "size %u", n);
		cr_assert_eq(memcmp(e.dst.buf + dof, e.src.buf + so, n), 0, "size %u differs", n);
		memcpy(e.shadow + dof, e.src.buf + so, n);
	}
	cr_assert_eq(kn_dma_memcpy(e.d, e.dst.buf, dkey(&e), e.src.buf, tu_lkey(&e.src),
				   KN_MAX_LEN + 1u, NULL),
		     -EINVAL);
	env_close(&e);
}

Test(dma, batch_one_doorbell)
{
	struct env e;
	struct kinet_dma_attr a = {.depth = 64};
	env_open(&e, &a);
	kn_dma_copy c[64];
	uint64_t seed = 3;
	for (uint32_t i = 0; i < 64; i++) {
		c[i].src = e.src.buf + i * 4096u;
		c[i].dst = e.dst.buf + (63 - i) * 4096u + 5;
		c[i].src_key = tu_lkey(&e.src);
		c[i].dst_key = dkey(&e);
		c[i].len = 1 + (uint32_t)(tu_rand64(&seed) % 4000);
		c[i].rsvd = 0;
	}
	tu_fill_random(e.src.buf, 64 * 4096, 5);
	uint64_t r0 = e.d->q.st->resv;
	kn_ticket_t last;
	cr_assert_eq(kn_dma_memcpy_batch(e.d, c, 65, &last), -EINVAL);
	c[7].len = KN_MAX_LEN + 1u;
	cr_assert_eq(kn_dma_memcpy_batch(e.d, c, 64, &last), -EINVAL);
	cr_assert_eq(e.d->q.st->resv, r0, "a refused batch reserved nothing");
	c[7].len = 100;
	cr_assert_eq(kn_dma_memcpy_batch(e.d, c, 64, &last), 0);
	cr_assert_eq(last, r0 + 63);
	cr_assert_eq(e.d->q.st->rung, r0 + 64, "one doorbell for the whole batch");
	cr_assert_eq(kn_dma_wait(e.d, last), 0);
	for (uint32_t i = 0; i < 64; i++) {
		cr_assert_eq(memcmp(c[i].dst, c[i].src, c[i].len), 0, "copy %u", i);
		memcpy(e.shadow + ((uint8_t *)c[i].dst - e.dst.buf), c[i].src, c[i].len);
	}
	env_close(&e);
}

struct targ {
	struct env *e;
};

static int copier(int tid, int n, void *arg)
{
	(void)n;
	struct env *e = ((struct targ *)arg)->e;
	for (uint32_t i = 0; i < 100; i++) {
		uint32_t off = ((uint32_t)tid * 100 + i) * 1024;
		kn_ticket_t t;
		TU_CHECK(kn_dma_memcpy(e->d, e->dst.buf + off, kinet_mr_rkey(e->dst.mr),
				       e->src.buf + off, tu_lkey(&e->src), 1000, &t) == 0,
			 "post");
	}
	return 0;
}

Test(dma, queue_shared_by_threads)
{
	struct env e;
	struct kinet_dma_attr a = {.depth = 32, .share = KN_SHARE_GPU};
	env_open(&e, &a);
	tu_fill_random(e.src.buf, 4 * 100 * 1024, 11);
	struct targ ta = {&e};
	cr_assert_eq(kinet_host_exec(4, copier, &ta), 0, "%s", tu_fail_msg);
	cr_assert_eq(kn_dma_quiet(e.d), 0);
	for (uint32_t k = 0; k < 400; k++) {
		cr_assert_eq(memcmp(e.dst.buf + k * 1024, e.src.buf + k * 1024, 1000), 0, "copy %u",
			     k);
		memcpy(e.shadow + k * 1024, e.src.buf + k * 1024, 1000);
	}
	env_close(&e);
}

/* A copy that breaks a key check completes in error with the syndrome an
 * RDMA write would get; nothing is written; the queue is in error after. */
Test(dma, key_checks_as_rdma)
{
	struct tu_region ro;
	static const struct {
		int what;
		uint32_t synd;
	} cases[] = {{0, KN_SYND_LOCAL_PROT_ERR},   /* source key wrong */
		     {1, KN_SYND_LOCAL_PROT_ERR},   /* source beyond its region */
		     {2, KN_SYND_REMOTE_ACCESS_ERR}, /* destination without remote write */
		     {3, KN_SYND_REMOTE_ACCESS_ERR}}; /* destination beyond its region */
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct env e;
		env_open(&e, NULL);
		cr_assert_eq(tu_region_alloc(&ro, e.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 4), 0);
		uint8_t *dst = e.dst.buf + 100, *src = e.src.buf;
		uint32_t dk = dkey(&e), sk = tu_lkey(&e.src), len = 2000;
		switch (cases[k].what) {
		case 0: sk ^= 0x700; break;
		case 1: src = e.src.buf + REG - 1000; break;
		case 2: dst = ro.buf; dk = kinet_mr_rkey(ro.mr); break;
		case 3: dst = e.dst.buf + REG - 10; break;
		}
		uint8_t keep[64];
		memcpy(keep, ro.buf, sizeof(keep));
		kn_ticket_t t, t2;
		cr_assert_eq(kn_dma_memcpy(e.d, dst, dk, src, sk, len, &t), 0);
		cr_assert_eq(kn_dma_memcpy(e.d, e.dst.buf, dkey(&e), e.src.buf, tu_lkey(&e.src), 10,
					   &t2),
			     0);
		cr_assert_eq(kn_dma_wait(e.d, t), -EIO, "case %zu", k);
		uint32_t vendor;
		cr_assert_eq(kn_dma_error(e.d, &vendor), cases[k].synd, "case %zu: syndrome 0x%x",
			     k, kn_dma_error(e.d, &vendor));
		cr_assert_eq(kn_dma_wait(e.d, t2), -EIO, "case %zu: the copy behind it is flushed",
			     k);
		cr_assert_eq(kinet_qp_get_state(kinet_dma_qp(e.dma)), KINET_QPS_ERR);
		cr_assert_eq(memcmp(ro.buf, keep, sizeof(keep)), 0);
		cr_assert(tu_region_canaries_ok(&ro));
		tu_region_free(&ro);
		env_close(&e); /* the shadow: nothing landed in dst */
	}
}
