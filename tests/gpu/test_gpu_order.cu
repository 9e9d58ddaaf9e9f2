/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Error paths from kernels (bad keys give -EIO with the syndrome, never a
 * hang; an unconnected QP times out) and the ordering contract of
 * docs/ordering.md: a kernel that sees a CQE, or the signal word of
 * put_signal, and then reads the payload never sees stale data.
 */
#include "gpu_util.h"

/* ---- errors --------------------------------------------------------------- */

struct err_out {
	int rc_bad, rc_after, rc_wait_after;
	uint32_t synd, vendor;
	int warp_rc[32];
};

__global__ void bad_rkey_kernel(const kn_qp *qp, int scope, uint8_t *src, uint32_t lkey,
				uint64_t dst, uint32_t rkey, uint32_t bad_lkey, err_out *o)
{
	kn_ticket_t t;
	if (scope == GU_THREAD) {
		/* a wrong rkey: remote access error */
		int rc = kn_put(qp, dst, rkey ^ 0x55, src, lkey, 64, &t);
		if (!rc)
			rc = kn_wait(qp, t);
		o->rc_bad = rc;
		o->synd = kn_qp_error(qp, &o->vendor);
		/* the QP is in error: later WQEs are flushed */
		rc = kn_put(qp, dst, rkey, src, lkey, 64, &t);
		o->rc_after = rc;
		o->rc_wait_after = rc ? rc : kn_wait(qp, t);
	} else {
		/* warp scope, lane 7 carries a bad lkey: every lane gets -EIO */
		uint32_t lane = threadIdx.x;
		int rc = kn_warp_put(qp, dst + lane * 64, rkey, src + lane * 64,
				     lane == 7 ? bad_lkey : lkey, 64, &t);
		if (!rc)
			rc = kn_warp_wait(qp, t);
		int q = kn_warp_quiet(qp);
		o->warp_rc[lane] = rc ? rc : q;
		if (lane == 0)
			o->synd = kn_qp_error(qp, &o->vendor);
	}
}

static void run_bad(int scope)
{
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1);
	struct gu_buf src, dst;
	gu_buf_alloc(&src, g.pd, 4096, 41, 0);
	gu_buf_alloc(&dst, g.pd, 4096, 42, 0);
	err_out *o, ho;
	CU(cudaMalloc((void **)&o, sizeof(*o)));
	CU(cudaMemset(o, 0x55, sizeof(*o)));
	bad_rkey_kernel<<<1, scope == GU_THREAD ? 1 : 32>>>(
		g.d[0], scope, src.dev, kinet_mr_lkey(src.mr), (uint64_t)(uintptr_t)dst.dev,
		gu_key(&dst), kinet_mr_lkey(src.mr) + 0x1000, o);
	CU_SYNC();
	CU(cudaMemcpy(&ho, o, sizeof(ho), cudaMemcpyDeviceToHost));
	if (scope == GU_THREAD) {
		cr_assert_eq(ho.rc_bad, -EIO, "bad rkey: %d", ho.rc_bad);
		cr_assert_eq(ho.synd, KN_SYND_REMOTE_ACCESS_ERR, "syndrome 0x%x", ho.synd);
		cr_assert_eq(ho.rc_after, 0);
		cr_assert_eq(ho.rc_wait_after, -EIO, "after the error: %d", ho.rc_wait_after);
	} else {
		for (int l = 0; l < 32; l++)
			cr_assert_eq(ho.warp_rc[l], -EIO, "lane %d: %d", l, ho.warp_rc[l]);
		cr_assert_eq(ho.synd, KN_SYND_LOCAL_PROT_ERR, "syndrome 0x%x", ho.synd);
	}
	/* the destination is untouched */
	uint8_t back[4096];
	gu_buf_read(&dst, back);
	if (scope == GU_THREAD)
		cr_assert_eq(gu_diff(back, dst.mirror, 4096), -1);
	cudaFree(o);
	gu_buf_free(&src);
	gu_buf_free(&dst);
	gu_close(&g);
}

Test(gpu_errors, bad_rkey_thread, .timeout = 60) { run_bad(GU_THREAD); }
Test(gpu_errors, bad_lkey_warp, .timeout = 60) { run_bad(GU_WARP); }

__global__ void timeout_kernel(const kn_qp *qp, uint64_t *src, uint32_t lkey, uint64_t dst,
			       uint32_t rkey, int *rc, uint64_t *ns)
{
	kn_ticket_t t;
	uint64_t t0 = kn_now_ns();
	int r = kn_put(qp, dst, rkey, src, lkey, 8, &t);
	*rc = r ? r : kn_wait(qp, t);
	*ns = kn_now_ns() - t0;
}

/* A QP nobody serves (never connected): the kernel gets -ETIMEDOUT. */
Test(gpu_errors, unconnected_times_out, .timeout = 60)
{
	cr_assert_eq(kinet_cuda_available(), 1);
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = 16;
	qa.timeout_ms = 300;
	cr_assert_eq(kinet_qp_create(pd, &qa, &qp), 0);
	kn_qp *d;
	cr_assert_eq(kinet_qp_device_cuda(qp, &d), 0);
	struct gu_buf b;
	gu_buf_alloc(&b, pd, 64, 3, 0);
	int *rc, hrc;
	uint64_t *ns, hns;
	CU(cudaMalloc((void **)&rc, sizeof(int)));
	CU(cudaMalloc((void **)&ns, sizeof(uint64_t)));
	timeout_kernel<<<1, 1>>>(d, (uint64_t *)b.dev, kinet_mr_lkey(b.mr),
				 (uint64_t)(uintptr_t)b.dev + 32, gu_key(&b), rc, ns);
	CU_SYNC();
	CU(cudaMemcpy(&hrc, rc, sizeof(int), cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(&hns, ns, sizeof(hns), cudaMemcpyDeviceToHost));
	cr_assert_eq(hrc, -ETIMEDOUT, "rc %d", hrc);
	cr_assert_geq(hns, 300000000ull);
	cudaFree(rc);
	cudaFree(ns);
	gu_buf_free(&b);
	kinet_qp_device_cuda_release(qp);
	kinet_qp_destroy(qp);
	kinet_pd_free(pd);
	kinet_close(ctx);
}

/* ---- ordering ------------------------------------------------------------- */

#define OWORDS 64 /* 512-byte payload */

/* Same kernel: write a fresh source, put it, wait for the CQE, read the
 * destination (which this SM read one iteration earlier, so a stale copy
 * could sit in its L1) and compare. */
__global__ void cqe_order_kernel(const kn_qp *qp, uint64_t *src, uint32_t lkey, uint64_t *dst,
				 uint32_t rkey, uint32_t iters, unsigned *stale, int *rc)
{
	uint64_t sum = 0;
	for (uint32_t it = 0; it < iters; it++) {
		for (int w = 0; w < OWORDS; w++)
			src[w] = ((uint64_t)it << 32) | (uint32_t)w;
		kn_ticket_t t;
		int r = kn_put(qp, (uint64_t)(uintptr_t)dst, rkey, src, lkey, OWORDS * 8, &t);
		if (!r)
			r = kn_wait(qp, t);
		if (r) {
			*rc = r;
			return;
		}
		for (int w = 0; w < OWORDS; w++) {
			uint64_t v = dst[w]; /* plain load */
			sum += v;
			if (v != (((uint64_t)it << 32) | (uint32_t)w))
				atomicAdd(stale, 1u);
		}
	}
	if (sum == 42)
		*rc = 1; /* keeps the loads */
}

Test(gpu_order, cqe_then_payload, .timeout = 120)
{
	for (int m = 0; m < 3; m++) {
		struct gu_ctx g;
		gu_open(&g, 1, 64, gu_modes[m], KN_SHARE_EXCLUSIVE, 1);
		struct gu_buf src, dst;
		gu_buf_alloc(&src, g.pd, OWORDS * 8, 51, 0);
		gu_buf_alloc(&dst, g.pd, OWORDS * 8, 52, 0);
		unsigned *stale, hstale;
		int *rc, hrc;
		CU(cudaMalloc((void **)&stale, sizeof(unsigned)));
		CU(cudaMalloc((void **)&rc, sizeof(int)));
		CU(cudaMemset(stale, 0, sizeof(unsigned)));
		CU(cudaMemset(rc, 0, sizeof(int)));
		cqe_order_kernel<<<1, 1>>>(g.d[0], (uint64_t *)src.dev, kinet_mr_lkey(src.mr),
					   (uint64_t *)dst.dev, gu_key(&dst),
					   gu_quick() ? 200 : 2000, stale, rc);
		CU_SYNC();
		CU(cudaMemcpy(&hrc, rc, sizeof(int), cudaMemcpyDeviceToHost));
		CU(cudaMemcpy(&hstale, stale, sizeof(unsigned), cudaMemcpyDeviceToHost));
		cr_assert_eq(hrc, 0, "db %s: rc %d", kinet_db_mode_str(gu_modes[m]), hrc);
		cr_assert_eq(hstale, 0u, "db %s: %u stale words", kinet_db_mode_str(gu_modes[m]),
			     hstale);
		cudaFree(stale);
		cudaFree(rc);
		gu_buf_free(&src);
		gu_buf_free(&dst);
		gu_close(&g);
	}
}

#define NSLOT 16

/* Producer: for k = 1..iters, fill slot k % NSLOT with pattern k and
 * put_signal it (signal += 1), after the consumer acknowledged k - NSLOT. */
__global__ void producer_kernel(const kn_qp *qp, uint64_t *src, uint32_t lkey, uint64_t dst,
				uint32_t rkey, uint64_t sig, uint32_t sig_rkey,
				volatile uint64_t *ack, uint32_t iters, int *rc)
{
	for (uint32_t k = 1; k <= iters; k++) {
		uint64_t t0 = kn_now_ns();
		while (k > NSLOT && *ack < k - NSLOT) {
			if (kn_now_ns() - t0 > 5000000000ull) {
				*rc = -ETIMEDOUT;
				return;
			}
		}
		uint64_t *s = src + (size_t)(k % NSLOT) * OWORDS;
		/* the source slot's previous put completed: waited below */
		for (int w = 0; w < OWORDS; w++)
			s[w] = ((uint64_t)k << 32) | (uint32_t)(w * 7);
		kn_ticket_t t;
		int r = kn_put_signal(qp, dst + (uint64_t)(k % NSLOT) * OWORDS * 8, rkey, s, lkey,
				      OWORDS * 8, sig, sig_rkey, 1, &t);
		if (!r)
			r = kn_wait(qp, t);
		if (r) {
			*rc = r;
			return;
		}
	}
}

/* Consumer (another kernel, another stream): waits for signal >= k, reads
 * slot k % NSLOT with plain loads, counts stale words, acknowledges k. */
__global__ void consumer_kernel(const uint64_t *sig, const uint64_t *dst, uint64_t *ack,
				uint32_t iters, unsigned *stale, int *rc)
{
	for (uint32_t k = 1; k <= iters; k++) {
		if (kn_wait_signal((const volatile uint64_t *)sig, k, 5000000000ull)) {
			*rc = -ETIMEDOUT;
			return;
		}
		const uint64_t *d = dst + (size_t)(k % NSLOT) * OWORDS;
		for (int w = 0; w < OWORDS; w++)
			if (d[w] != (((uint64_t)k << 32) | (uint32_t)(w * 7)))
				(*stale)++;
		__threadfence();
		*(volatile uint64_t *)ack = k;
	}
}

Test(gpu_order, signal_then_payload, .timeout = 120)
{
	for (int m = 0; m < 3; m++) {
		struct gu_ctx g;
		gu_open(&g, 1, 64, gu_modes[m], KN_SHARE_EXCLUSIVE, 1);
		struct gu_buf src, dst, sig;
		gu_buf_alloc(&src, g.pd, NSLOT * OWORDS * 8, 61, 0);
		gu_buf_alloc(&dst, g.pd, NSLOT * OWORDS * 8, 62, 0);
		gu_buf_alloc(&sig, g.pd, 64, 63, 0);
		CU(cudaMemset(sig.dev, 0, 64));
		uint64_t *ack;
		unsigned *stale, hstale;
		int *rc, hrc[2];
		CU(cudaMalloc((void **)&ack, 8));
		CU(cudaMemset(ack, 0, 8));
		CU(cudaMalloc((void **)&stale, sizeof(unsigned)));
		CU(cudaMalloc((void **)&rc, 2 * sizeof(int)));
		CU(cudaMemset(stale, 0, sizeof(unsigned)));
		CU(cudaMemset(rc, 0, 2 * sizeof(int)));
		uint32_t iters = gu_quick() ? 200 : 3000;
		/* both kernels run at once and wait for each other: load them
		 * before either starts (lazy loading may wait for running kernels) */
		cudaFuncAttributes fa;
		CU(cudaFuncGetAttributes(&fa, producer_kernel));
		CU(cudaFuncGetAttributes(&fa, consumer_kernel));
		cudaStream_t s1, s2;
		CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
		CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
		/* the kernels' streams do not wait for the legacy stream's memsets */
		CU(cudaDeviceSynchronize());
		consumer_kernel<<<1, 1, 0, s2>>>((const uint64_t *)sig.dev, (const uint64_t *)dst.dev,
						 ack, iters, stale, &rc[1]);
		producer_kernel<<<1, 1, 0, s1>>>(g.d[0], (uint64_t *)src.dev, kinet_mr_lkey(src.mr),
						 (uint64_t)(uintptr_t)dst.dev, gu_key(&dst),
						 (uint64_t)(uintptr_t)sig.dev, gu_key(&sig), ack,
						 iters, &rc[0]);
		CU_SYNC();
		CU(cudaMemcpy(hrc, rc, sizeof(hrc), cudaMemcpyDeviceToHost));
		CU(cudaMemcpy(&hstale, stale, sizeof(unsigned), cudaMemcpyDeviceToHost));
		const char *mn = kinet_db_mode_str(gu_modes[m]);
		if (hrc[0] || hrc[1])
			gu_diag(&g, 0);
		cr_assert_eq(hrc[0], 0, "db %s: producer %d", mn, hrc[0]);
		cr_assert_eq(hrc[1], 0, "db %s: consumer %d", mn, hrc[1]);
		cr_assert_eq(hstale, 0u, "db %s: %u stale words", mn, hstale);
		cudaStreamDestroy(s1);
		cudaStreamDestroy(s2);
		cudaFree(ack);
		cudaFree(stale);
		cudaFree(rc);
		gu_buf_free(&src);
		gu_buf_free(&dst);
		gu_buf_free(&sig);
		gu_close(&g);
	}
}
