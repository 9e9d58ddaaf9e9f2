/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU copies left in flight by the software NIC's engine, without a GPU: the
 * CUDA module's hooks are replaced by a stand-in whose "GPU memory" is a host
 * buffer and whose asynchronous copies land only when the test opens a gate
 * (or when someone waits for them). Checks: no CQE before its data landed,
 * CQEs in WQE order, other WQEs wait for the copies in flight, a region's
 * removal and a QP's destruction wait for them, a failed copy completes in
 * error in order.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/internal.h"
#include "../util/testutil.h"

/* ---- the stand-in CUDA module ------------------------------------------------ */

#define GPU_MEM (1u << 20)
#define QMAX 65536

static uint8_t *g_gpu; /* [g_gpu, g_gpu + GPU_MEM) is "GPU memory" */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pend {
	void *dst;
	const void *src;
	size_t n;
} g_q[QMAX];
static uint64_t g_enq, g_landed; /* copies enqueued, landed (in order) */
static uint64_t g_gate;          /* fences up to this copy count may complete */
static bool g_fail;              /* fences report a failed copy */

struct fk_fence {
	uint64_t seq; /* copies before it */
};

static bool in_gpu(const void *p)
{
	return (const uint8_t *)p >= g_gpu && (const uint8_t *)p < g_gpu + GPU_MEM;
}

static void land_upto(uint64_t seq) /* g_lock held */
{
	for (; g_landed < seq; g_landed++) {
		struct pend *c = &g_q[g_landed % QMAX];
		memmove(c->dst, c->src, c->n);
	}
}

/* Synchronous hooks run after everything enqueued before (one stream). */
static int fk_copy(void *dst, int dkind, const void *src, int skind, size_t n)
{
	(void)dkind, (void)skind;
	pthread_mutex_lock(&g_lock);
	land_upto(g_enq);
	memmove(dst, src, n);
	pthread_mutex_unlock(&g_lock);
	return 0;
}

static int fk_atomic64(void *addr, int op, uint64_t a, uint64_t b, uint64_t *old)
{
	pthread_mutex_lock(&g_lock);
	land_upto(g_enq);
	uint64_t v;
	memcpy(&v, addr, 8);
	uint64_t nv = op == KN_OPCODE_ATOMIC_FA ? v + a : (v == b ? a : v);
	memcpy(addr, &nv, 8);
	*old = v;
	pthread_mutex_unlock(&g_lock);
	return 0;
}

static int fk_kind(const void *p)
{
	return in_gpu(p) ? KINET_MEM_CUDA : KINET_MEM_HOST;
}

static int fk_copy_async(void *dst, int dkind, const void *src, int skind, size_t n)
{
	(void)dkind, (void)skind;
	pthread_mutex_lock(&g_lock);
	int rc = g_enq - g_landed < QMAX ? 0 : -ENOMEM;
	if (!rc)
		g_q[g_enq++ % QMAX] = (struct pend){dst, src, n};
	pthread_mutex_unlock(&g_lock);
	return rc;
}

static int fk_fence(void **f)
{
	struct fk_fence *x = malloc(sizeof(*x));
	if (!x)
		return -EIO;
	pthread_mutex_lock(&g_lock);
	x->seq = g_enq;
	pthread_mutex_unlock(&g_lock);
	*f = x;
	return 0;
}

static int fk_fence_query(void *f)
{
	struct fk_fence *x = f;
	pthread_mutex_lock(&g_lock);
	int rc = 0;
	if (x->seq <= g_gate) {
		land_upto(x->seq);
		rc = g_fail ? -EIO : 1;
	}
	pthread_mutex_unlock(&g_lock);
	return rc;
}

static int fk_fence_wait(void *f)
{
	struct fk_fence *x = f;
	pthread_mutex_lock(&g_lock);
	land_upto(x->seq);
	int rc = g_fail ? -EIO : 0;
	pthread_mutex_unlock(&g_lock);
	return rc;
}

static void fk_fence_free(void *f)
{
	free(f);
}

static const struct kinet_cuda_ops fk_ops = {
	.copy = fk_copy,
	.atomic64 = fk_atomic64,
	.pointer_kind = fk_kind,
	.copy_async = fk_copy_async,
	.fence = fk_fence,
	.fence_query = fk_fence_query,
	.fence_wait = fk_fence_wait,
	.fence_free = fk_fence_free,
};

static void gate(uint64_t v)
{
	pthread_mutex_lock(&g_lock);
	g_gate = v;
	pthread_mutex_unlock(&g_lock);
}

/* ---- environment ---------------------------------------------------------------- */

#define N 24
#define SLOT 4096

struct env {
	struct tu_pair p;
	uint8_t *gsrc, *gdst; /* in "GPU memory" */
	kinet_mr *msrc, *mdst;
	struct tu_region hsrc, hdst; /* host memory */
	uint8_t shadow[N * SLOT];
};

static void env_open(struct env *e)
{
	unsetenv("KINET_NO_CUDA");
	/* the software NIC reaches GPU memory only by staging: allowed here (read
	 * once, at the first tunable: each test runs in a process of its own) */
	setenv("KINET_ALLOW_HOST_STAGING", "1", 1);
	kinet_cuda_load(); /* the real module (if any) is looked for once, then replaced */
	g_gpu = aligned_alloc(4096, GPU_MEM);
	cr_assert_not_null(g_gpu);
	g_enq = g_landed = 0;
	g_gate = 0;
	g_fail = false;
	kinet_cuda = &fk_ops;
	memset(e, 0, sizeof(*e));
	struct kinet_qp_attr at = {.sq_depth = 64};
	cr_assert_eq(tu_pair_open(&e->p, &at), 0);
	e->gsrc = g_gpu;
	e->gdst = g_gpu + GPU_MEM / 2;
	tu_fill_random(e->gsrc, N * SLOT, 31);
	tu_fill_random(e->gdst, N * SLOT, 32);
	memcpy(e->shadow, e->gdst, N * SLOT);
	cr_assert_eq(kinet_mr_reg(e->p.pd, e->gsrc, N * SLOT, KINET_ACCESS_LOCAL_WRITE, &e->msrc), 0);
	cr_assert_eq(kinet_mr_reg(e->p.pd, e->gdst, N * SLOT, KINET_ACCESS_ALL, &e->mdst), 0);
	cr_assert_eq(kinet_mr_kind(e->msrc), KINET_MEM_CUDA);
	cr_assert_eq(tu_region_alloc(&e->hsrc, e->p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 33), 0);
	cr_assert_eq(tu_region_alloc(&e->hdst, e->p.pd, 4096, KINET_ACCESS_ALL, 34), 0);
}

static void env_close(struct env *e)
{
	tu_region_free(&e->hsrc);
	tu_region_free(&e->hdst);
	if (e->msrc)
		kinet_mr_dereg(e->msrc);
	if (e->mdst)
		kinet_mr_dereg(e->mdst);
	tu_pair_close(&e->p);
	kinet_cuda = NULL;
	free(g_gpu);
	g_gpu = NULL;
}

static uint64_t executed(struct env *e)
{
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(e->p.ctx, &c), 0);
	return c.wqes;
}

/* Waits (at most 10 s) until the engine has executed n WQEs. */
static void wait_executed(struct env *e, uint64_t n)
{
	for (int i = 0; i < 100000 && executed(e) < n; i++) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(executed(e), n);
}

static const struct kn_cqe64 *cqe_at(struct env *e, uint64_t i)
{
	return (const struct kn_cqe64 *)(e->p.da->cq + (i % e->p.da->cq_cqe_cnt) * KN_CQE_SIZE);
}

static bool cqe_ready(struct env *e, uint64_t i)
{
	bool r = kn_cqe_ready(cqe_at(e, i), i, e->p.da->cq_cqe_cnt);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return r;
}

static uint32_t len_of(uint64_t i)
{
	return 1 + (uint32_t)((i * 2654435761u) % SLOT);
}

/* N puts GPU -> GPU, each its own slot and length. */
static void post_gpu_puts(struct env *e)
{
	for (uint64_t i = 0; i < N; i++) {
		kn_ticket_t t;
		cr_assert_eq(kn_put(e->p.da, tu_addr(e->gdst + i * SLOT), kinet_mr_rkey(e->mdst),
				    e->gsrc + i * SLOT, kinet_mr_lkey(e->msrc), len_of(i), &t),
			     0);
		cr_assert_eq(t, i);
		memcpy(e->shadow + i * SLOT, e->gsrc + i * SLOT, len_of(i));
	}
}

/* ---- tests ---------------------------------------------------------------------- */

Test(gpu_inflight, cqe_only_once_the_data_landed)
{
	struct env e;
	env_open(&e);
	uint8_t before[N * SLOT];
	memcpy(before, e.gdst, sizeof(before));
	post_gpu_puts(&e);
	wait_executed(&e, N);
	/* executed, copies enqueued, none landed: no CQE, no byte */
	for (uint64_t i = 0; i < N; i++)
		cr_assert(!cqe_ready(&e, i), "CQE %llu before its copy landed", (unsigned long long)i);
	cr_assert_eq(memcmp(e.gdst, before, sizeof(before)), 0);
	cr_assert_gt(g_enq, 0);
	gate(UINT64_MAX);
	for (uint64_t i = 0; i < N; i++) {
		for (int k = 0; k < 1000000 && !cqe_ready(&e, i); k++)
			sched_yield();
		cr_assert(cqe_ready(&e, i), "no CQE %llu", (unsigned long long)i);
		cr_assert_eq(tu_cqe_op(cqe_at(&e, i)), KN_CQE_REQ);
		cr_assert_eq(tu_cqe_idx(cqe_at(&e, i)), (uint16_t)i, "CQEs out of WQE order");
		cr_assert_eq(memcmp(e.gdst + i * SLOT, e.gsrc + i * SLOT, len_of(i)), 0,
			     "CQE %llu seen, its data not there", (unsigned long long)i);
	}
	cr_assert_eq(kn_wait(e.p.da, N - 1), 0);
	cr_assert_eq(memcmp(e.gdst, e.shadow, N * SLOT), 0);
	env_close(&e);
}

/* A write to host memory and an atomic after copies in flight: neither
 * may take effect (nor complete) before those copies landed and completed. */
Test(gpu_inflight, other_wqes_wait_for_the_copies)
{
	struct env e;
	env_open(&e);
	post_gpu_puts(&e);
	uint8_t hbefore[64];
	memcpy(hbefore, e.hdst.buf, 64);
	kn_ticket_t tw, ta;
	cr_assert_eq(kn_put(e.p.da, tu_addr(e.hdst.buf), kinet_mr_rkey(e.hdst.mr), e.hsrc.buf,
			    tu_lkey(&e.hsrc), 64, &tw),
		     0);
	uint64_t word0, word1;
	memcpy(&word0, e.hdst.buf + 128, 8);
	cr_assert_eq(kn_signal(e.p.da, tu_addr(e.hdst.buf + 128), kinet_mr_rkey(e.hdst.mr), 5, &ta),
		     0);
	wait_executed(&e, N);
	cr_assert_eq(memcmp(e.hdst.buf, hbefore, 64), 0, "host write ran before the copies");
	memcpy(&word1, e.hdst.buf + 128, 8);
	cr_assert_eq(word1, word0, "atomic ran before the copies");
	for (uint64_t i = 0; i <= ta; i++)
		cr_assert(!cqe_ready(&e, i), "CQE %llu before the copies landed",
			  (unsigned long long)i);
	gate(UINT64_MAX);
	cr_assert_eq(kn_wait(e.p.da, ta), 0);
	for (uint64_t i = 0; i <= ta; i++)
		cr_assert_eq(tu_cqe_idx(cqe_at(&e, i)), (uint16_t)i, "CQEs out of WQE order");
	cr_assert_eq(memcmp(e.hdst.buf, e.hsrc.buf, 64), 0);
	memcpy(&word1, e.hdst.buf + 128, 8);
	cr_assert_eq(word1, word0 + 5);
	cr_assert_eq(memcmp(e.gdst, e.shadow, N * SLOT), 0);
	env_close(&e);
}

/* Removing the target region while copies into it are in flight: the
 * removal returns only once they landed (the memory may be freed next). */
Test(gpu_inflight, dereg_waits_for_the_copies)
{
	struct env e;
	env_open(&e);
	uint8_t before[N * SLOT];
	memcpy(before, e.gdst, sizeof(before));
	post_gpu_puts(&e);
	wait_executed(&e, N);
	cr_assert_eq(memcmp(e.gdst, before, sizeof(before)), 0);
	cr_assert_eq(kinet_mr_dereg(e.mdst), 0);
	e.mdst = NULL;
	cr_assert_eq(memcmp(e.gdst, e.shadow, N * SLOT), 0, "dereg returned before the copies landed");
	gate(UINT64_MAX);
	cr_assert_eq(kn_wait(e.p.da, N - 1), 0);
	env_close(&e);
}

/* Destroying the QPs with copies in flight: the copies land, nothing hangs
 * or leaks. */
Test(gpu_inflight, destroy_with_copies_in_flight)
{
	struct env e;
	env_open(&e);
	post_gpu_puts(&e);
	wait_executed(&e, N);
	cr_assert(!cqe_ready(&e, 0));
	kinet_mr_dereg(e.msrc);
	kinet_mr_dereg(e.mdst);
	e.msrc = e.mdst = NULL;
	tu_region_free(&e.hsrc);
	tu_region_free(&e.hdst);
	tu_pair_close(&e.p);
	cr_assert_eq(memcmp(e.gdst, e.shadow, N * SLOT), 0);
	kinet_cuda = NULL;
	free(g_gpu);
	g_gpu = NULL;
}

/* A copy that fails: the oldest WQE in flight completes with a remote
 * operation error (the QP in ERR), everything after it is flushed, in order. */
Test(gpu_inflight, failed_copy_completes_in_error_in_order)
{
	struct env e;
	env_open(&e);
	post_gpu_puts(&e);
	wait_executed(&e, N);
	pthread_mutex_lock(&g_lock);
	g_fail = true;
	g_gate = UINT64_MAX;
	pthread_mutex_unlock(&g_lock);
	cr_assert_eq(kn_wait(e.p.da, N - 1), -EIO);
	cr_assert_eq(e.p.da->st->err_ticket, 0);
	cr_assert_eq(e.p.da->st->err_syndrome, KN_SYND_REMOTE_OP_ERR);
	cr_assert_eq(kinet_qp_get_state(e.p.a), KINET_QPS_ERR);
	for (uint64_t i = 1; i < N; i++) {
		cr_assert_eq(tu_cqe_idx(cqe_at(&e, i)), (uint16_t)i, "CQEs out of WQE order");
		cr_assert_eq(tu_cqe_synd(cqe_at(&e, i)), KN_SYND_WR_FLUSH_ERR);
	}
	pthread_mutex_lock(&g_lock);
	g_fail = false;
	pthread_mutex_unlock(&g_lock);
	env_close(&e);
}

/* Without KINET_ALLOW_HOST_STAGING, GPU memory is refused by the software
 * NIC (its only path is staging), and host memory still registers. */
Test(gpu_inflight, gpu_memory_refused_unless_staging_allowed)
{
	unsetenv("KINET_NO_CUDA");
	unsetenv("KINET_ALLOW_HOST_STAGING");
	kinet_cuda_load();
	g_gpu = aligned_alloc(4096, GPU_MEM);
	cr_assert_not_null(g_gpu);
	kinet_cuda = &fk_ops;
	struct tu_pair p;
	cr_assert_eq(tu_pair_open(&p, NULL), 0);
	kinet_mr *mr = NULL;
	cr_assert_eq(kinet_mr_reg(p.pd, g_gpu, 4096, KINET_ACCESS_ALL, &mr), -EOPNOTSUPP);
	cr_assert_null(mr);
	struct tu_region h;
	cr_assert_eq(tu_region_alloc(&h, p.pd, 4096, KINET_ACCESS_ALL, 35), 0);
	cr_assert_eq(kinet_mr_path(h.mr), KINET_MR_PATH_HOST);
	tu_region_free(&h);
	tu_pair_close(&p);
	kinet_cuda = NULL;
	free(g_gpu);
	g_gpu = NULL;
}

/* Allowed, the path is reported as staged. */
Test(gpu_inflight, staged_path_reported)
{
	struct env e;
	env_open(&e);
	cr_assert_eq(kinet_mr_path(e.msrc), KINET_MR_PATH_STAGED);
	cr_assert_str_eq(kinet_mr_path_str(kinet_mr_path(e.msrc)), "staged");
	env_close(&e);
}
