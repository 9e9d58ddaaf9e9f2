/* SPDX-License-Identifier: BSD-3-Clause */
/* Context, protection domains, CQs, QPs, state machine, export. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "nic/mlx5/mlx5.h"

uint32_t kinet_pow2(uint32_t v)
{
	uint32_t p = 1;
	while (p < v && p < (1u << 30))
		p <<= 1;
	return p;
}

const char *kinet_backend_name(int b)
{
	switch (b) {
	case KINET_BACKEND_AUTO: return "auto";
	case KINET_BACKEND_SOFT: return "soft";
	case KINET_BACKEND_MLX5: return "mlx5";
	default: return "unknown";
	}
}

static int backend_from_str(const char *s)
{
	if (!s || !*s || !strcmp(s, "auto"))
		return KINET_BACKEND_AUTO;
	if (!strcmp(s, "soft"))
		return KINET_BACKEND_SOFT;
	if (!strcmp(s, "mlx5"))
		return KINET_BACKEND_MLX5;
	return -1;
}

int kinet_open(const struct kinet_ctx_attr *attr, kinet_ctx **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (kinet_tun_refused(KT_OPEN, "kinet_open"))
		return -EINVAL;
	int backend = attr ? attr->backend : backend_from_str(KT(BACKEND));
	if (backend < KINET_BACKEND_AUTO || backend > KINET_BACKEND_MLX5) {
		if (attr)
			KLOG_ERR("kinet_open: unknown backend %d", attr->backend);
		else
			KLOG_ERR("kinet_open: unknown backend KINET_BACKEND=%s",
				 KT(BACKEND));
		return -EINVAL;
	}
	kinet_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	pthread_mutex_init(&ctx->lock, NULL);
	/* writers first: engines re-take the read side after every pass */
	pthread_rwlockattr_t rwa;
	pthread_rwlockattr_init(&rwa);
	pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ctx->mr_lock, &rwa);
	pthread_rwlockattr_destroy(&rwa);
	ctx->mr_tag = (uint32_t)time(NULL) & 0xff;
	ctx->next_pdn = 1;
	int rc = 0;
	if (backend == KINET_BACKEND_AUTO || backend == KINET_BACKEND_MLX5) {
		char why[200];
		rc = kinet_mlx5_probe(attr ? attr->device : NULL, why, sizeof(why));
		if (rc == 0) {
			rc = kinet_mlx5_open(ctx, attr ? attr->device : NULL);
			if (rc == 0) {
				ctx->backend = KINET_BACKEND_MLX5;
				snprintf(ctx->reason, sizeof(ctx->reason), "mlx5: %s", why);
			} else {
				snprintf(why, sizeof(why), "mlx5 device open failed: %s",
					 kinet_strerror(rc));
			}
		}
		if (rc != 0 && backend == KINET_BACKEND_MLX5) {
			KLOG_ERR("mlx5 backend not available: %s", why);
			kinet_close(ctx);
			return rc;
		}
		if (rc != 0) {
			snprintf(ctx->reason, sizeof(ctx->reason),
				 "soft: mlx5 not available (%s)", why);
			KLOG_INFO("backend auto: %s", ctx->reason);
		}
	}
	if (ctx->backend != KINET_BACKEND_MLX5) {
		if (backend == KINET_BACKEND_SOFT)
			snprintf(ctx->reason, sizeof(ctx->reason), "soft: requested");
		ctx->backend = KINET_BACKEND_SOFT;
		rc = kinet_soft_open(ctx, attr && attr->engine_threads > 0
						  ? attr->engine_threads
						  : (int)KT(ENGINE_THREADS));
		if (rc) {
			kinet_close(ctx);
			return rc;
		}
	}
	*out = ctx;
	return 0;
}

int kinet_close(kinet_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	for (uint32_t i = 0; i < ctx->qp_cap; i++)
		if (ctx->qp_tab[i]) {
			KLOG_WARN("kinet_close: QP 0x%x still exists", ctx->qp_tab[i]->qpn);
			return -EBUSY;
		}
	if (atomic_load(&ctx->pds) || atomic_load(&ctx->cqs)) {
		KLOG_WARN("kinet_close: %d protection domains and %d CQs still exist",
			  atomic_load(&ctx->pds), atomic_load(&ctx->cqs));
		return -EBUSY;
	}
	if (ctx->nic)
		kinet_soft_close(ctx);
	if (ctx->mlx5)
		kinet_mlx5_close(ctx);
	free(ctx->mr_tab);
	free(ctx->qp_tab);
	pthread_rwlock_destroy(&ctx->mr_lock);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
	return 0;
}

int kinet_ctx_backend(const kinet_ctx *ctx)
{
	return ctx ? ctx->backend : -EINVAL;
}

const char *kinet_ctx_backend_reason(const kinet_ctx *ctx)
{
	return ctx ? ctx->reason : "";
}

__thread struct kinet_ctr_blk *kinet_ctr_self __attribute__((tls_model("initial-exec")));

void kinet_count_syndrome(kinet_ctx *ctx, uint32_t s)
{
	KINET_COUNT(ctx, c_synd[s & 63], 1);
	if (s == KN_SYND_WR_FLUSH_ERR)
		KINET_COUNT(ctx, c_flushed, 1);
	else
		KINET_COUNT(ctx, c_errors, 1);
}

#define CTR_LD(p) atomic_load_explicit(p, memory_order_relaxed)

int kinet_ctx_counters(kinet_ctx *ctx, struct kinet_counters *o)
{
	if (!ctx || !o)
		return -EINVAL;
	memset(o, 0, sizeof(*o));
	o->wqes = CTR_LD(&ctx->c_wqes);
	o->bytes = CTR_LD(&ctx->c_bytes);
	o->cqes = CTR_LD(&ctx->c_cqes);
	o->errors = CTR_LD(&ctx->c_errors);
	o->flushed = CTR_LD(&ctx->c_flushed);
	for (int i = 0; i < 64; i++)
		o->by_syndrome[i] = CTR_LD(&ctx->c_synd[i]);
	o->doorbells = CTR_LD(&ctx->c_doorbells);
	o->dbr_only = CTR_LD(&ctx->c_dbr_only);
	o->bf_wqes = CTR_LD(&ctx->c_bf_wqes);
	o->staged_bytes = CTR_LD(&ctx->c_staged);
	o->direct_bytes = CTR_LD(&ctx->c_direct);
	o->rnr_retries = CTR_LD(&ctx->c_rnr);
	o->proxy_rings = CTR_LD(&ctx->c_proxy);
	if (ctx->nic)
		kinet_soft_counters_add(ctx, o); /* the engines' own blocks */
	return 0;
}

/* ---- protection domains ------------------------------------------------------ */

int kinet_pd_alloc(kinet_ctx *ctx, kinet_pd **out)
{
	if (!ctx || !out)
		return -EINVAL;
	kinet_pd *pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->ctx = ctx;
	pthread_mutex_lock(&ctx->lock);
	pd->pdn = ctx->next_pdn++;
	pthread_mutex_unlock(&ctx->lock);
	if (ctx->backend == KINET_BACKEND_MLX5) {
		int rc = kinet_mlx5_pd_alloc(pd);
		if (rc) {
			free(pd);
			return rc;
		}
	}
	atomic_fetch_add(&ctx->pds, 1);
	*out = pd;
	return 0;
}

int kinet_pd_free(kinet_pd *pd)
{
	if (!pd)
		return -EINVAL;
	if (atomic_load(&pd->refs)) {
		KLOG_WARN("kinet_pd_free: %d regions or QPs still use PD %u", atomic_load(&pd->refs),
			  pd->pdn);
		return -EBUSY;
	}
	if (pd->ctx->backend == KINET_BACKEND_MLX5)
		kinet_mlx5_pd_free(pd);
	atomic_fetch_sub(&pd->ctx->pds, 1);
	free(pd);
	return 0;
}

/* ---- completion queues -------------------------------------------------------- */

int kinet_cq_create(kinet_ctx *ctx, uint32_t depth, kinet_cq **out)
{
	if (!ctx || !out || depth == 0 || depth > (1u << 22))
		return -EINVAL;
	kinet_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->ctx = ctx;
	cq->cnt = kinet_pow2(depth);
	cq->buf = kinet_queue_alloc((size_t)cq->cnt * KN_CQE_SIZE);
	cq->dbrec_page = kinet_queue_alloc(4096);
	if (!cq->buf || !cq->dbrec_page) {
		kinet_queue_free(cq->buf, (size_t)cq->cnt * KN_CQE_SIZE);
		kinet_queue_free(cq->dbrec_page, 4096);
		free(cq);
		return -ENOMEM;
	}
	cq->dbrec = cq->dbrec_page;
	for (uint32_t i = 0; i < cq->cnt; i++)
		((struct kn_cqe64 *)cq->buf)[i].op_own = KN_CQE_INVALID << 4;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	atomic_fetch_add(&ctx->cqs, 1);
	*out = cq;
	return 0;
}

int kinet_cq_destroy(kinet_cq *cq)
{
	if (!cq)
		return -EINVAL;
	if (atomic_load(&cq->refs))
		return -EBUSY;
	kinet_queue_free(cq->buf, (size_t)cq->cnt * KN_CQE_SIZE);
	kinet_queue_free(cq->dbrec_page, 4096);
	pthread_spin_destroy(&cq->lock);
	atomic_fetch_sub(&cq->ctx->cqs, 1);
	free(cq);
	return 0;
}

void kinet_cq_reset(kinet_cq *cq)
{
	pthread_spin_lock(&cq->lock);
	for (uint32_t i = 0; i < cq->cnt; i++)
		((struct kn_cqe64 *)cq->buf)[i].op_own = KN_CQE_INVALID << 4;
	cq->pi = 0;
	cq->host_ci = 0;
	cq->dbrec[0] = 0;
	cq->dbrec[1] = 0;
	pthread_spin_unlock(&cq->lock);
}

uint32_t kinet_cq_depth(const kinet_cq *cq)
{
	return cq ? cq->cnt : 0;
}

uint32_t kinet_cq_space(kinet_cq *cq)
{
	uint32_t ci = kn_be32toh(__atomic_load_n(&cq->dbrec[0], __ATOMIC_ACQUIRE)) & 0xffffff;
	uint32_t used = (((uint32_t)cq->pi - ci) & 0xffffff) + cq->reserved;
	return used >= cq->cnt ? 0 : cq->cnt - used;
}

int kinet_cq_reserve(kinet_cq *cq)
{
	pthread_spin_lock(&cq->lock);
	int rc = kinet_cq_space(cq) ? 0 : -EAGAIN;
	if (!rc)
		cq->reserved++;
	pthread_spin_unlock(&cq->lock);
	return rc;
}

void kinet_cq_unreserve(kinet_cq *cq)
{
	pthread_spin_lock(&cq->lock);
	cq->reserved--;
	pthread_spin_unlock(&cq->lock);
}

/* Writes the CQE at the producer index (lock held, a slot known free). */
static void cq_write(kinet_cq *cq, struct kn_cqe64 *cqe)
{
	uint64_t idx = cq->pi++;
	struct kn_cqe64 *dst = (struct kn_cqe64 *)(cq->buf + (idx & (cq->cnt - 1)) * KN_CQE_SIZE);
	uint8_t op_own = (uint8_t)((cqe->op_own & 0xfe) | ((idx / cq->cnt) & 1));
	memcpy(dst, cqe, KN_CQE_SIZE - 1);
	__atomic_store_n(&dst->op_own, op_own, __ATOMIC_RELEASE);
}

int kinet_cq_push(kinet_cq *cq, struct kn_cqe64 *cqe)
{
	pthread_spin_lock(&cq->lock);
	if (kinet_cq_space(cq) == 0) {
		pthread_spin_unlock(&cq->lock);
		return -EAGAIN;
	}
	cq_write(cq, cqe);
	pthread_spin_unlock(&cq->lock);
	KINET_COUNT(cq->ctx, c_cqes, 1);
	return 0;
}

void kinet_cq_push_reserved(kinet_cq *cq, struct kn_cqe64 *cqe)
{
	pthread_spin_lock(&cq->lock);
	cq->reserved--;
	cq_write(cq, cqe);
	pthread_spin_unlock(&cq->lock);
	KINET_COUNT(cq->ctx, c_cqes, 1);
}

int kinet_cq_peek(kinet_cq *cq, uint64_t idx, struct kn_cqe64 *out)
{
	if (!cq || !out)
		return -EINVAL;
	struct kn_cqe64 *c = (struct kn_cqe64 *)(cq->buf + (idx & (cq->cnt - 1)) * KN_CQE_SIZE);
	if (!kn_cqe_ready(c, idx, cq->cnt))
		return -EBUSY;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	memcpy(out, c, sizeof(*out));
	return 0;
}

int kinet_cq_poll(kinet_cq *cq, struct kn_cqe64 *out)
{
	int rc = kinet_cq_peek(cq, cq ? cq->host_ci : 0, out);
	if (rc)
		return rc;
	cq->host_ci++;
	__atomic_store_n(&cq->dbrec[0], kn_htobe32((uint32_t)(cq->host_ci & 0xffffff)),
			 __ATOMIC_RELEASE);
	return 0;
}

int kinet_cq_poll_wait(kinet_cq *cq, struct kn_cqe64 *out, int timeout_ms)
{
	uint64_t t0 = kn_now_ns();
	for (;;) {
		int rc = kinet_cq_poll(cq, out);
		if (rc != -EBUSY)
			return rc;
		if (kn_now_ns() - t0 > (uint64_t)timeout_ms * 1000000ull)
			return -ETIMEDOUT;
		struct timespec ts = {0, 2000};
		nanosleep(&ts, NULL);
	}
}
