/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers of the GPU tests (CUDA, Criterion). */
#ifndef KINET_GPU_UTIL_H
#define KINET_GPU_UTIL_H

#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet.h>
#include <kinet/kinet_cuda.h>
#include <kinet/device_cuda.cuh>
#include "gpu_need.h"
extern "C" {
#include "../util/testutil.h"
}

#define CU(x)                                                                              \
	do {                                                                               \
		cudaError_t e_ = (x);                                                      \
		cr_assert_eq(e_, cudaSuccess, "%s: %s", #x, cudaGetErrorString(e_));       \
	} while (0)

/* Launch check: the launch itself, then the kernel's completion. */
#define CU_SYNC()                                                                          \
	do {                                                                               \
		CU(cudaGetLastError());                                                    \
		CU(cudaDeviceSynchronize());                                               \
	} while (0)

/* The software NIC reaches GPU memory only by staging (CUDA copies), which
 * must be allowed: set before the first kinet call of the program reads
 * the tunables (a test that checks the refusal unsets it in its own
 * process first). */
__attribute__((constructor)) static void gu_allow_staging(void)
{
	setenv("KINET_ALLOW_HOST_STAGING", "1", 0);
}

/* Smaller problem sizes under compute-sanitizer (KN_GPU_QUICK=1). */
static inline int gu_quick(void)
{
	const char *v = getenv("KN_GPU_QUICK");
	return v && *v && *v != '0';
}

enum gu_scope { GU_THREAD = 0, GU_WARP = 1, GU_BLOCK = 2 };
static const char *const gu_scope_name[] = {"thread", "warp", "block"};
static const int gu_modes[3] = {KN_DB_GPU, KN_DB_BLUEFLAME, KN_DB_CPU_PROXY};

/* A context with n connected local QP pairs a[i] -> b[i]; the a side is
 * placed in GPU memory (d[i]). */
struct gu_ctx {
	kinet_ctx *ctx;
	kinet_pd *pd;
	int n;
	kinet_qp **a, **b;
	kn_qp **d;
};

static inline void gu_open(struct gu_ctx *g, int n, uint32_t sq_depth, int db_mode, int share,
			   int engine_threads)
{
	memset(g, 0, sizeof(*g));
	cr_assert_eq(kinet_cuda_available(), 1, "no usable GPU");
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	ca.engine_threads = engine_threads;
	cr_assert_eq(kinet_open(&ca, &g->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(g->ctx, &g->pd), 0);
	g->n = n;
	g->a = (kinet_qp **)calloc((size_t)n, sizeof(*g->a));
	g->b = (kinet_qp **)calloc((size_t)n, sizeof(*g->b));
	g->d = (kn_qp **)calloc((size_t)n, sizeof(*g->d));
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = sq_depth;
	qa.db_mode = db_mode;
	qa.share = share;
	qa.timeout_ms = 5000;
	for (int i = 0; i < n; i++) {
		cr_assert_eq(kinet_qp_create(g->pd, &qa, &g->a[i]), 0);
		cr_assert_eq(kinet_qp_create(g->pd, &qa, &g->b[i]), 0);
		cr_assert_eq(kinet_qp_connect_local(g->a[i], g->b[i]), 0);
		cr_assert_eq(kinet_qp_device_cuda(g->a[i], &g->d[i]), 0);
		cr_assert_eq(kinet_qp_db_mode(g->a[i]), db_mode);
	}
}

static inline void gu_close(struct gu_ctx *g)
{
	for (int i = 0; i < g->n; i++) {
		kinet_qp_device_cuda_release(g->a[i]);
		kinet_qp_destroy(g->a[i]);
		kinet_qp_destroy(g->b[i]);
	}
	free(g->a);
	free(g->b);
	free(g->d);
	kinet_pd_free(g->pd);
	kinet_close(g->ctx);
	memset(g, 0, sizeof(*g));
}

/* Prints what the QP a[i] looks like from both sides (after a failure). */
static inline void gu_diag(const struct gu_ctx *g, int i)
{
	kn_qp_state st;
	memset(&st, 0, sizeof(st));
	kinet_qp_cuda_state_read(g->a[i], &st);
	kn_qp *h = NULL;
	kinet_qp_device(g->a[i], &h);
	struct kinet_counters k;
	memset(&k, 0, sizeof(k));
	kinet_ctx_counters(g->ctx, &k);
	uint32_t dbr = h ? kn_be32toh(h->dbrec[KN_SND_DBR]) : 0;
	uint64_t reg = h ? *(volatile uint64_t *)h->db : 0;
	uint32_t cqci = h ? kn_be32toh(*h->cq_dbrec) : 0;
	uint8_t own = h ? knx_cqe_at(h, st.done)->op_own : 0;
	fprintf(stderr,
		"qp %u (%s): resv %llu ready %llu rung %llu done %llu err %llx db_lock %u "
		"poll_lock %u | dbr %u reg idx %u cq ci %u op_own[done] 0x%x | wqes %llu "
		"cqes %llu doorbells %llu dbr_only %llu errors %llu flushed %llu\n",
		kinet_qp_num(g->a[i]), kinet_qp_state_str(kinet_qp_get_state(g->a[i])),
		(unsigned long long)st.resv, (unsigned long long)st.ready,
		(unsigned long long)st.rung, (unsigned long long)st.done,
		(unsigned long long)st.err_ticket, st.db_lock, st.poll_lock, dbr,
		(unsigned)(kn_be32toh((uint32_t)reg) >> 8), cqci, own,
		(unsigned long long)k.wqes, (unsigned long long)k.cqes,
		(unsigned long long)k.doorbells, (unsigned long long)k.dbr_only,
		(unsigned long long)k.errors, (unsigned long long)k.flushed);
}

/* A registered buffer in GPU memory (or pinned host memory, host=1) with
 * random contents and a host mirror. */
struct gu_buf {
	uint8_t *dev; /* what the NIC and the kernels use */
	uint8_t *mirror;
	size_t len;
	int host;
	kinet_mr *mr;
};

static inline void gu_buf_alloc(struct gu_buf *b, kinet_pd *pd, size_t len, uint64_t seed,
				int host)
{
	memset(b, 0, sizeof(*b));
	b->len = len;
	b->host = host;
	b->mirror = (uint8_t *)malloc(len);
	cr_assert_not_null(b->mirror);
	tu_fill_random(b->mirror, len, seed);
	if (host) {
		CU(cudaHostAlloc((void **)&b->dev, len, cudaHostAllocMapped | cudaHostAllocPortable));
		memcpy(b->dev, b->mirror, len);
	} else {
		CU(cudaMalloc((void **)&b->dev, len));
		CU(cudaMemcpy(b->dev, b->mirror, len, cudaMemcpyHostToDevice));
	}
	cr_assert_eq(kinet_mr_reg(pd, b->dev, len, KINET_ACCESS_ALL, &b->mr), 0);
	cr_assert_eq(kinet_mr_kind(b->mr), host ? KINET_MEM_HOST : KINET_MEM_CUDA);
}

/* Reads the buffer back into out (len bytes). */
static inline void gu_buf_read(const struct gu_buf *b, void *out)
{
	CU(cudaMemcpy(out, b->dev, b->len, cudaMemcpyDefault));
}

static inline void gu_buf_free(struct gu_buf *b)
{
	kinet_mr_dereg(b->mr);
	if (b->host)
		cudaFreeHost(b->dev);
	else
		cudaFree(b->dev);
	free(b->mirror);
	memset(b, 0, sizeof(*b));
}

static inline uint32_t gu_key(const struct gu_buf *b)
{
	return kinet_mr_rkey(b->mr);
}

/* First differing offset of two byte arrays, or -1. */
static inline long gu_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

#endif
