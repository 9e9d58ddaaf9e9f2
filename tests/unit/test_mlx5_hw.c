/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mlx5 backend on a real ConnectX NIC, driven by the host executor:
 * opt-in with KINET_MLX5_HW=1 (skipped otherwise, so it passes in CI where
 * there is no NIC). It is step 3 of docs/hardware.md: the NIC executes the
 * WQEs the device code writes, from host-memory queues, rung from the CPU.
 * With a GPU it also writes into GPU memory registered by dma-buf or peer
 * memory and reads it back through the CUDA driver (GPUDirect RDMA without
 * a kernel). KINET_MLX5_QUEUES=devx with a GPU puts the queues in GPU memory,
 * which the host executor cannot touch: run that case with KINET_NO_CUDA=1.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "kinet_config.h"
#include "../util/testutil.h"
#include "nic/mlx5/mlx5.h"
#include "gpu/cudrv.h"

struct hw {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *a, *b;
	kn_qp *da, *db;
};

static void hw_open(struct hw *h, const struct kinet_qp_attr *qa)
{
	if (!getenv("KINET_MLX5_HW"))
		cr_skip_test("set KINET_MLX5_HW=1 on a machine with a ConnectX NIC");
	const char *q = getenv("KINET_MLX5_QUEUES");
	if (q && strcmp(q, "verbs") && kinet_cudrv_gpu_count() > 0)
		cr_skip_test("DevX queues would be in GPU memory: add KINET_NO_CUDA=1");
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	int rc = kinet_open(&ca, &h->ctx);
	cr_assert_eq(rc, 0, "mlx5 backend: %s", kinet_strerror(rc));
	cr_log_info("%s", kinet_ctx_backend_reason(h->ctx));
	cr_assert_eq(kinet_pd_alloc(h->ctx, &h->pd), 0);
	cr_assert_eq(kinet_qp_create(h->pd, qa, &h->a), 0);
	cr_assert_eq(kinet_qp_create(h->pd, qa, &h->b), 0);
	cr_assert_eq(kinet_qp_connect_local(h->a, h->b), 0);
	cr_assert_eq(kinet_qp_device(h->a, &h->da), 0);
	cr_assert_eq(kinet_qp_device(h->b, &h->db), 0);
	cr_log_info("doorbell mode %s", kinet_db_mode_str(kinet_qp_db_mode(h->a)));
}

static void hw_close(struct hw *h)
{
	cr_assert_eq(kinet_qp_destroy(h->a), 0);
	cr_assert_eq(kinet_qp_destroy(h->b), 0);
	cr_assert_eq(kinet_pd_free(h->pd), 0);
	cr_assert_eq(kinet_close(h->ctx), 0);
}

Test(mlx5_hw, put_get_sizes)
{
	struct hw h;
	hw_open(&h, NULL);
	size_t max = 1 << 22;
	uint8_t *src = malloc(max), *dst = malloc(max), *back = malloc(max);
	kinet_mr *ms, *md, *mb;
	cr_assert_eq(kinet_mr_reg(h.pd, src, max, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(h.pd, dst, max, KINET_ACCESS_ALL, &md), 0);
	cr_assert_eq(kinet_mr_reg(h.pd, back, max, KINET_ACCESS_LOCAL_WRITE, &mb), 0);
	for (size_t n = 1; n <= max; n *= 4) {
		tu_fill_random(src, n, n);
		tu_fill_random(dst, n, n + 1);
		tu_fill_random(back, n, n + 2);
		kn_ticket_t t;
		cr_assert_eq(kn_put(h.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
				    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
		cr_assert_eq(kn_wait(h.da, t), 0, "put %zu: syndrome 0x%x", n, kn_qp_error(h.da, NULL));
		cr_assert_eq(memcmp(src, dst, n), 0, "put %zu", n);
		cr_assert_eq(kn_get(h.da, back, kinet_mr_lkey(mb), (uint64_t)(uintptr_t)dst,
				    kinet_mr_rkey(md), (uint32_t)n, &t), 0);
		cr_assert_eq(kn_wait(h.da, t), 0, "get %zu", n);
		cr_assert_eq(memcmp(src, back, n), 0, "get %zu", n);
	}
	/* many small writes: the SQ and CQ wrap */
	for (int i = 0; i < 5000; i++)
		cr_assert_eq(kn_put(h.da, (uint64_t)(uintptr_t)(dst + (i % 1024) * 64),
				    kinet_mr_rkey(md), src + (i % 1024) * 64, kinet_mr_lkey(ms), 64,
				    NULL), 0);
	cr_assert_eq(kn_quiet(h.da), 0);
	cr_assert_eq(memcmp(src, dst, 65536), 0);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	kinet_mr_dereg(mb);
	free(src);
	free(dst);
	free(back);
	hw_close(&h);
}

Test(mlx5_hw, atomics_send_and_errors)
{
	struct hw h;
	struct kinet_qp_attr qa = {.sq_depth = 64, .rq_depth = 16};
	hw_open(&h, &qa);
	uint64_t *word = aligned_alloc(64, 64), *res = aligned_alloc(64, 64);
	*word = 5;
	kinet_mr *mw, *mres;
	cr_assert_eq(kinet_mr_reg(h.pd, word, 64, KINET_ACCESS_ALL, &mw), 0);
	cr_assert_eq(kinet_mr_reg(h.pd, res, 64, KINET_ACCESS_LOCAL_WRITE, &mres), 0);
	uint64_t old;
	cr_assert_eq(kn_atomic_fetch_add(h.da, (uint64_t)(uintptr_t)word, kinet_mr_rkey(mw), 10,
					 res, kinet_mr_lkey(mres), &old), 0);
	cr_assert_eq(old, 5u);
	cr_assert_eq(kn_atomic_compare_swap(h.da, (uint64_t)(uintptr_t)word, kinet_mr_rkey(mw), 15,
					    99, res, kinet_mr_lkey(mres), &old), 0);
	cr_assert_eq(*word, 99u);
	size_t n = 3000;
	uint8_t *src = malloc(n), *dst = malloc(n);
	tu_fill_random(src, n, 7);
	kinet_mr *ms, *md;
	cr_assert_eq(kinet_mr_reg(h.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	cr_assert_eq(kinet_mr_reg(h.pd, dst, n, KINET_ACCESS_LOCAL_WRITE, &md), 0);
	kn_ticket_t rt, t;
	cr_assert_eq(kn_recv_post(h.db, dst, kinet_mr_lkey(md), (uint32_t)n, &rt), 0);
	cr_assert_eq(kn_sq_reserve(h.da, 1, &t), 0);
	kn_prep_send(h.da, kn_wqe_ptr(h.da, t), t, (uint64_t)(uintptr_t)src, kinet_mr_lkey(ms),
		     (uint32_t)n, 1, 0x1234);
	kn_sq_submit(h.da, t, 1);
	cr_assert_eq(kn_wait(h.da, t), 0);
	kn_recv_info info;
	cr_assert_eq(kn_recv_poll(h.db, rt, 1, &info), 0);
	cr_assert_eq(info.imm, 0x1234u);
	cr_assert_eq(memcmp(src, dst, n), 0);
	/* dst has no remote access: the NIC answers with the IB error */
	cr_assert_eq(kn_put(h.da, (uint64_t)(uintptr_t)dst, kinet_mr_rkey(md), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(h.da, t), -EIO);
	cr_assert_eq(kn_qp_error(h.da, NULL), KN_SYND_REMOTE_ACCESS_ERR);
	kinet_mr_dereg(mw);
	kinet_mr_dereg(mres);
	kinet_mr_dereg(ms);
	kinet_mr_dereg(md);
	free(word);
	free(res);
	free(src);
	free(dst);
	hw_close(&h);
}

Test(mlx5_hw, writes_into_gpu_memory)
{
	struct hw h;
	hw_open(&h, NULL);
	if (kinet_cudrv_gpu_count() == 0) {
		hw_close(&h);
		cr_skip_test("no GPU");
	}
	size_t n = 1 << 20;
	void *gpu;
	cr_assert_eq(kinet_cudrv_alloc(0, n, &gpu), 0);
	uint8_t *src = malloc(n), *back = malloc(n);
	tu_fill_random(src, n, 99);
	kinet_mr *mg, *ms;
	int rc = kinet_mr_reg(h.pd, gpu, n, KINET_ACCESS_ALL, &mg);
	cr_assert_eq(rc, 0, "GPU memory registration: %s", kinet_strerror(rc));
	int path = kinet_mr_path(mg);
	cr_log_info("GPU memory registered by %s", kinet_mr_path_str(path));
	cr_assert(path == KINET_MR_PATH_DMABUF || path == KINET_MR_PATH_PEERMEM);
	cr_assert_eq(kinet_mr_reg(h.pd, src, n, KINET_ACCESS_LOCAL_WRITE, &ms), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(h.da, (uint64_t)(uintptr_t)gpu, kinet_mr_rkey(mg), src,
			    kinet_mr_lkey(ms), (uint32_t)n, &t), 0);
	cr_assert_eq(kn_wait(h.da, t), 0);
	cr_assert_eq(kinet_cudrv_read(back, gpu, n), 0);
	cr_assert_eq(memcmp(src, back, n), 0, "the NIC's write into GPU memory differs");
	kinet_mr_dereg(mg);
	kinet_mr_dereg(ms);
	kinet_cudrv_free(gpu);
	free(src);
	free(back);
	hw_close(&h);
}
