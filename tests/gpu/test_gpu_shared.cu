/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Contention and wrap-around: 132 CTAs x many threads on shared QPs (thread,
 * warp and block scope), one QP per CTA (CTA-shared), and long runs on small
 * SQs that wrap the ring and the 16-bit WQE index many times.
 */
#include "gpu_util.h"

#define SLOT 16u /* bytes per message */

/* Every thread posts `iters` puts of SLOT bytes, each to its own slot. */
__global__ void many_kernel(const kn_qp *const *qps, int per_cta_qp, int scope, uint8_t *src,
			    uint32_t lkey, uint64_t dst, uint32_t rkey, uint32_t iters, int *rc)
{
	const kn_qp *qp = qps[per_cta_qp ? blockIdx.x : 0];
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t nthr = gridDim.x * blockDim.x;
	int r = 0;
	for (uint32_t it = 0; it < iters; it++) {
		size_t slot = (size_t)it * nthr + g;
		kn_ticket_t t;
		int e;
		if (scope == GU_THREAD)
			e = kn_put(qp, dst + slot * SLOT, rkey, src + slot * SLOT, lkey, SLOT, &t);
		else if (scope == GU_WARP)
			e = kn_warp_put(qp, dst + slot * SLOT, rkey, src + slot * SLOT, lkey, SLOT,
					&t);
		else
			e = kn_block_put(qp, dst + slot * SLOT, rkey, src + slot * SLOT, lkey, SLOT,
					 &t);
		if (e && !r)
			r = e;
	}
	int q;
	if (scope == GU_THREAD)
		q = kn_quiet(qp);
	else if (scope == GU_WARP)
		q = kn_warp_quiet(qp);
	else
		q = kn_block_quiet(qp);
	rc[g] = r ? r : q;
}

static void run_many(int scope, int share, int blocks, int threads, uint32_t iters, int eng,
		     int db_mode, size_t smem = 0)
{
	int nqp = share == KN_SHARE_CTA ? blocks : 1;
	struct gu_ctx g;
	gu_open(&g, nqp, 256, db_mode, share, eng);
	size_t nthr = (size_t)blocks * threads;
	size_t len = nthr * iters * SLOT;
	struct gu_buf src, dst;
	gu_buf_alloc(&src, g.pd, len, 5 + scope, 0);
	gu_buf_alloc(&dst, g.pd, len, 6 + scope, 0);
	const kn_qp **dqps;
	int *drc;
	CU(cudaMalloc((void **)&dqps, nqp * sizeof(kn_qp *)));
	CU(cudaMemcpy(dqps, g.d, nqp * sizeof(kn_qp *), cudaMemcpyHostToDevice));
	CU(cudaMalloc((void **)&drc, nthr * sizeof(int)));
	if (smem)
		CU(cudaFuncSetAttribute(many_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
					(int)smem));
	many_kernel<<<blocks, threads, smem>>>(dqps, share == KN_SHARE_CTA, scope, src.dev,
					 kinet_mr_lkey(src.mr), (uint64_t)(uintptr_t)dst.dev,
					 gu_key(&dst), iters, drc);
	CU_SYNC();
	int *rc = (int *)malloc(nthr * sizeof(int));
	CU(cudaMemcpy(rc, drc, nthr * sizeof(int), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < nthr; i++) {
		if (rc[i])
			for (int j = 0; j < nqp && j < 4; j++)
				gu_diag(&g, j);
		cr_assert_eq(rc[i], 0, "thread %zu: %d (%s)", i, rc[i], kinet_strerror(rc[i]));
	}
	uint8_t *back = (uint8_t *)malloc(len);
	gu_buf_read(&dst, back);
	long d = gu_diff(back, src.mirror, len);
	cr_assert_eq(d, -1, "byte %ld (message %ld) differs", d, d / (long)SLOT);
	for (int i = 0; i < nqp; i++) {
		kn_qp_state st;
		cr_assert_eq(kinet_qp_cuda_state_read(g.a[i], &st), 0);
		cr_assert_eq(st.err_ticket, KN_NO_ERROR);
		cr_assert_eq(st.done, st.resv);
		cr_assert_eq(st.ready, st.resv);
		if (nqp == 1)
			cr_assert_eq(st.resv, (uint64_t)nthr * iters);
	}
	free(back);
	free(rc);
	cudaFree(dqps);
	cudaFree(drc);
	gu_buf_free(&src);
	gu_buf_free(&dst);
	gu_close(&g);
}

/* 132 CTAs x 256 threads on ONE QP, thread scope (GPU-shared). */
Test(gpu_shared, grid_thread_scope, .timeout = 300)
{
	run_many(GU_THREAD, KN_SHARE_GPU, 132, gu_quick() ? 64 : 256, gu_quick() ? 1 : 4, 2,
		 KN_DB_GPU);
}

/* 132 CTAs x 8 warps on one QP, warp scope. */
Test(gpu_shared, grid_warp_scope, .timeout = 300)
{
	run_many(GU_WARP, KN_SHARE_GPU, 132, 256, gu_quick() ? 1 : 8, 2, KN_DB_BLUEFLAME);
}

/* 132 CTAs posting at block scope on one QP. */
Test(gpu_shared, grid_block_scope, .timeout = 300)
{
	run_many(GU_BLOCK, KN_SHARE_GPU, 132, 128, gu_quick() ? 1 : 8, 2, KN_DB_CPU_PROXY);
}

/* One QP per CTA, 132 CTAs x 128 threads at thread scope (CTA-shared). */
Test(gpu_shared, cta_shared_qps, .timeout = 300)
{
	run_many(GU_THREAD, KN_SHARE_CTA, 132, 128, gu_quick() ? 1 : 4, 4, KN_DB_GPU);
}

/* One QP per CTA, one CTA per SM holding (nearly) all of its shared memory:
 * the GPU engine's block (KINET_GPU_ENGINE=on) finds no room on any SM
 * until this kernel ends, and this kernel waits for its CQEs. The CPU
 * engine must serve the QPs meanwhile: its copies may not wait for the
 * engine's kernel, which waits for this one. */
Test(gpu_shared, engine_without_room, .timeout = 300)
{
	int dev = 0, nsm = 0, optin = 0;
	CU(cudaGetDevice(&dev));
	CU(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
	CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	cudaFuncAttributes fa;
	CU(cudaFuncGetAttributes(&fa, many_kernel));
	run_many(GU_THREAD, KN_SHARE_CTA, nsm, 32, gu_quick() ? 1 : 8, 4, KN_DB_GPU,
		 (size_t)optin - fa.sharedSizeBytes);
}

/* ---- wrap-around --------------------------------------------------------- */

/* One owner posts n 8-byte puts (value = its index) into a ring of 1024
 * words on a small SQ: the SQ ring wraps n/sq times and the 16-bit WQE index
 * wraps past 65536. */
__global__ void wrap_kernel(const kn_qp *qp, int scope, uint64_t *src, uint32_t lkey, uint64_t dst,
			    uint32_t rkey, uint32_t n, int *rc)
{
	int r = 0;
	if (scope == GU_THREAD) {
		for (uint32_t i = 0; i < n && !r; i++) {
			/* the source word must not change before its put completed: one
			 * source word per SQ slot, rewritten only after a full lap */
			uint64_t *s = src + (i % 2048);
			if (i >= 2048)
				r = kn_wait(qp, i - 2048);
			*s = 0x9e3779b97f4a7c15ull * (i + 1);
			kn_ticket_t t;
			if (!r)
				r = kn_put(qp, dst + (i % 1024) * 8, rkey, s, lkey, 8, &t);
		}
		if (!r)
			r = kn_quiet(qp);
	} else {
		/* every lane calls each warp-scope function; lanes past n post
		 * nothing in the last round */
		uint32_t lane = threadIdx.x;
		for (uint32_t base = 0; base < n; base += 32) {
			uint32_t i = base + lane;
			int w = 0;
			if (base >= 2048)
				w = kn_warp_wait(qp, i < n ? i - 2048 : base - 2048);
			uint64_t *s = src + (i % 2048);
			if (i < n)
				*s = 0x9e3779b97f4a7c15ull * (i + 1);
			kn_op op = {};
			op.kind = KN_OP_PUT;
			op.raddr = dst + (i % 1024) * 8;
			op.rkey = rkey;
			op.laddr = (uint64_t)(uintptr_t)s;
			op.lkey = lkey;
			op.len = 8;
			kn_ticket_t t;
			int e = kn_warp_post(qp, i < n ? &op : NULL, &t);
			int bad = w ? w : e;
			if (__any_sync(0xffffffffu, bad != 0)) {
				r = bad ? bad : -EIO;
				break;
			}
		}
		int q = kn_warp_quiet(qp);
		r = r ? r : q;
	}
	if (r && !*rc)
		*rc = r;
}

static void run_wrap(int scope, uint32_t sq, int db_mode)
{
	uint32_t n = gu_quick() ? 70000 : 140000;
	struct gu_ctx g;
	gu_open(&g, 1, sq, db_mode, KN_SHARE_EXCLUSIVE, 1);
	struct gu_buf src, dst;
	gu_buf_alloc(&src, g.pd, 2048 * 8, 31, 0);
	gu_buf_alloc(&dst, g.pd, 1024 * 8, 32, 0);
	int *drc;
	CU(cudaMalloc((void **)&drc, sizeof(int)));
	CU(cudaMemset(drc, 0, sizeof(int)));
	wrap_kernel<<<1, scope == GU_THREAD ? 1 : 32>>>(g.d[0], scope, (uint64_t *)src.dev,
							kinet_mr_lkey(src.mr),
							(uint64_t)(uintptr_t)dst.dev, gu_key(&dst),
							n, drc);
	CU_SYNC();
	int rc;
	CU(cudaMemcpy(&rc, drc, sizeof(int), cudaMemcpyDeviceToHost));
	if (rc)
		gu_diag(&g, 0);
	cr_assert_eq(rc, 0, "%s", kinet_strerror(rc));
	uint64_t back[1024];
	CU(cudaMemcpy(back, dst.dev, sizeof(back), cudaMemcpyDeviceToHost));
	for (uint32_t w = 0; w < 1024; w++) {
		uint32_t last = n - 1 - ((n - 1 - w) % 1024); /* last i with i % 1024 == w */
		cr_assert_eq(back[w], 0x9e3779b97f4a7c15ull * (last + 1), "word %u", w);
	}
	kn_qp_state st;
	cr_assert_eq(kinet_qp_cuda_state_read(g.a[0], &st), 0);
	cr_assert_eq(st.done, (uint64_t)n);
	cr_assert_eq(st.err_ticket, KN_NO_ERROR);
	cudaFree(drc);
	gu_buf_free(&src);
	gu_buf_free(&dst);
	gu_close(&g);
}

Test(gpu_wrap, thread_scope, .timeout = 300) { run_wrap(GU_THREAD, 16, KN_DB_GPU); }
Test(gpu_wrap, warp_scope, .timeout = 300) { run_wrap(GU_WARP, 64, KN_DB_BLUEFLAME); }
Test(gpu_wrap, thread_scope_cpu_proxy, .timeout = 300)
{
	run_wrap(GU_THREAD, 32, KN_DB_CPU_PROXY);
}
