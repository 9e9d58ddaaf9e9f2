/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Software-NIC memory keys: unpredictable per context and slow to recur.
 * A key names one region for at least 255 * 1024 registrations of its
 * context (src/nic/soft/keytab.h), two contexts (or processes) start from
 * different keys, and a program that uses its own region's key for a peer's
 * buffer gets the remote access error, not a silent success.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static kinet_ctx *soft_ctx_open(void)
{
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	return ctx;
}

/* One region registered and deregistered over and over: no key comes back
 * within 255 * 1024 registrations, none is mlx5's invalid lkey or has tag 0. */
Test(keys, slow_to_recur)
{
	enum { N = 255 * 1024 };
	kinet_ctx *ctx = soft_ctx_open();
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	uint8_t buf[64];
	/* a few regions stay registered meanwhile, as in a real program */
	kinet_mr *keep[8];
	for (int i = 0; i < 8; i++)
		cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), KINET_ACCESS_ALL, &keep[i]), 0);
	uint32_t *k = malloc(N * sizeof(*k));
	cr_assert_not_null(k);
	for (int i = 0; i < N; i++) {
		kinet_mr *mr;
		cr_assert_eq(kinet_mr_reg(pd, buf, sizeof(buf), KINET_ACCESS_ALL, &mr), 0);
		k[i] = kinet_mr_lkey(mr);
		cr_assert_eq(kinet_mr_rkey(mr), k[i]);
		cr_assert_neq(k[i] & 0xff, 0u, "tag 0 in key 0x%x", k[i]);
		cr_assert_geq(k[i] >> 8, 1u);
		cr_assert_eq(kinet_mr_dereg(mr), 0);
	}
	for (int i = 0; i < 8; i++) {
		for (int j = 0; j < N; j++)
			cr_assert_neq(k[j], kinet_mr_lkey(keep[i]), "a live region's key was reused");
		cr_assert_eq(kinet_mr_dereg(keep[i]), 0);
	}
	qsort(k, N, sizeof(*k), cmp_u32);
	for (int i = 1; i < N; i++)
		cr_assert_neq(k[i], k[i - 1], "key 0x%x came back within %d registrations", k[i], N);
	free(k);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

/* The first region of every context gets its own key (a process is one
 * context or more: processes differ the same way). */
Test(keys, differ_between_contexts)
{
	enum { N = 8 };
	kinet_ctx *c[N];
	kinet_pd *pd[N];
	kinet_mr *mr[N];
	uint8_t buf[64];
	for (int i = 0; i < N; i++) {
		c[i] = soft_ctx_open();
		cr_assert_eq(kinet_pd_alloc(c[i], &pd[i]), 0);
		cr_assert_eq(kinet_mr_reg(pd[i], buf, sizeof(buf), KINET_ACCESS_ALL, &mr[i]), 0);
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			cr_assert_neq(kinet_mr_rkey(mr[i]), kinet_mr_rkey(mr[j]),
				      "contexts %d and %d start with the same key 0x%x", i, j,
				      kinet_mr_rkey(mr[i]));
	for (int i = 0; i < N; i++) {
		cr_assert_eq(kinet_mr_dereg(mr[i]), 0);
		cr_assert_eq(kinet_pd_free(pd[i]), 0);
		cr_assert_eq(kinet_close(c[i]), 0);
	}
}

/* A write to a peer's buffer with one's own region's key fails with the
 * remote access error and leaves the buffer as it was. */
Test(keys, own_rkey_for_peer_buffer_refused)
{
	kinet_ctx *ca = soft_ctx_open(), *cb = soft_ctx_open();
	kinet_pd *pa, *pb;
	cr_assert_eq(kinet_pd_alloc(ca, &pa), 0);
	cr_assert_eq(kinet_pd_alloc(cb, &pb), 0);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, pa, 512, KINET_ACCESS_ALL, 71), 0);
	cr_assert_eq(tu_region_alloc(&dst, pb, 512, KINET_ACCESS_ALL, 72), 0);
	cr_assert_neq(kinet_mr_rkey(src.mr), kinet_mr_rkey(dst.mr));
	kinet_qp *a, *b;
	kn_qp *da;
	cr_assert_eq(kinet_qp_create(pa, NULL, &a), 0);
	cr_assert_eq(kinet_qp_create(pb, NULL, &b), 0);
	cr_assert_eq(kinet_qp_connect_local(a, b), 0);
	cr_assert_eq(kinet_qp_device(a, &da), 0);
	uint8_t before[512];
	memcpy(before, dst.buf, sizeof(before));
	kn_ticket_t t;
	cr_assert_eq(kn_put(da, tu_addr(dst.buf), kinet_mr_rkey(src.mr) /* the wrong key */,
			    src.buf, tu_lkey(&src), 512, &t),
		     0);
	cr_assert_eq(kn_wait(da, t), -EIO);
	cr_assert_eq(kn_qp_error(da, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	cr_assert_eq(memcmp(dst.buf, before, sizeof(before)), 0);
	cr_assert(tu_region_canaries_ok(&dst));
	cr_assert_eq(kinet_qp_destroy(a), 0);
	cr_assert_eq(kinet_qp_destroy(b), 0);
	tu_region_free(&src);
	tu_region_free(&dst);
	cr_assert_eq(kinet_pd_free(pa), 0);
	cr_assert_eq(kinet_pd_free(pb), 0);
	cr_assert_eq(kinet_close(ca), 0);
	cr_assert_eq(kinet_close(cb), 0);
}
