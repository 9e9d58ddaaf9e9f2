/* SPDX-License-Identifier: BSD-3-Clause */
/* Context (backend choice), protection domains, counters, CQs (consumer side). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/internal.h"

uint32_t kinet_pow2(uint32_t v)
{
	uint32_t p = 1;
	while (p < v && p < (1u << 30))
		p <<= 1;
	return p;
}

const char *kinet_backend_name(int b)
{
	if (b == KINET_BACKEND_AUTO)
		return "auto";
	for (int i = 0; kinet_backends[i]; i++)
		if (kinet_backends[i]->id == b)
			return kinet_backends[i]->name;
	return "unknown";
}

static int backend_from_str(const char *s)
{
	if (!s || !*s || !strcmp(s, "auto"))
		return KINET_BACKEND_AUTO;
	for (int i = 0; kinet_backends[i]; i++)
		if (!strcmp(s, kinet_backends[i]->name))
			return kinet_backends[i]->id;
	return -1;
}

static const struct kinet_backend_ops *backend_by_id(int id)
{
	for (int i = 0; kinet_backends[i]; i++)
		if (kinet_backends[i]->id == id)
			return kinet_backends[i];
	return NULL;
}

int kinet_backend_unsupported(const kinet_ctx *ctx, const char *op)
{
	KLOG_ERR("%s: not supported by the %s backend", op, ctx->ops->name);
	return -EOPNOTSUPP;
}

static _Atomic uint32_t ctx_ids;

/* A context of backend b, or a negative errno (b's open failed). */
static int ctx_open(const struct kinet_backend_ops *b, const struct kinet_ctx_attr *attr,
		    kinet_ctx **out)
{
	kinet_ctx *ctx = calloc(1, b->ctx_size);
	if (!ctx)
		return -ENOMEM;
	ctx->ops = b;
	ctx->backend = b->id;
	ctx->id = atomic_fetch_add(&ctx_ids, 1);
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->qp_lock, NULL);
	ctx->next_pdn = 1;
	int rc = b->open(ctx, attr);
	if (rc) {
		pthread_mutex_destroy(&ctx->lock);
		pthread_mutex_destroy(&ctx->qp_lock);
		free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

int kinet_open(const struct kinet_ctx_attr *attr, kinet_ctx **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (kinet_tun_refused(KT_OPEN, "kinet_open"))
		return -EINVAL;
	/* KINET_FAULT and KINET_TRACE are checked before anything is opened */
	struct kinet_fault_set *env_faults = NULL;
	if (kinet_fault_parse(KT(FAULT), "kinet_open: KINET_FAULT", &env_faults))
		return -EINVAL;
	int trc = kinet_trace_init();
	if (trc) {
		free(env_faults);
		return trc;
	}
	int want = attr ? attr->backend : backend_from_str(KT(BACKEND));
	if (want != KINET_BACKEND_AUTO && !backend_by_id(want)) {
		if (attr)
			KLOG_ERR("kinet_open: unknown backend %d", attr->backend);
		else
			KLOG_ERR("kinet_open: unknown backend KINET_BACKEND=%s",
				 KT(BACKEND));
		return -EINVAL;
	}
	char notes[256] = "";
	int rc = -KINET_ENOBACKEND;
	for (int i = 0; kinet_backends[i]; i++) {
		const struct kinet_backend_ops *b = kinet_backends[i];
		if (want != KINET_BACKEND_AUTO && b->id != want)
			continue;
		char why[200] = "";
		rc = b->probe(attr, why, sizeof(why));
		kinet_ctx *ctx = NULL;
		if (rc == 0) {
			rc = ctx_open(b, attr, &ctx);
			if (rc)
				snprintf(why, sizeof(why), "%s device open failed: %s", b->name,
					 kinet_strerror(rc));
		}
		if (rc == 0) {
			if (want != KINET_BACKEND_AUTO)
				snprintf(ctx->reason, sizeof(ctx->reason), "%.16s: requested (%.200s)",
					 b->name, why);
			else if (notes[0])
				snprintf(ctx->reason, sizeof(ctx->reason), "%.16s: %.230s", b->name,
					 notes);
			else
				snprintf(ctx->reason, sizeof(ctx->reason), "%.16s: %.230s", b->name,
					 why);
			if (notes[0])
				KLOG_INFO("backend auto: %s", ctx->reason);
			if (env_faults && !ctx->ops->fault_set) {
				KLOG_ERR("kinet_open: KINET_FAULT is set and the %s backend has no "
					 "fault injection",
					 ctx->ops->name);
				free(env_faults);
				kinet_close(ctx);
				return -EOPNOTSUPP;
			}
			if (env_faults && (rc = ctx->ops->fault_set(ctx, env_faults))) {
				kinet_close(ctx);
				return rc;
			}
			kinet_stats_ctx_add(ctx);
			*out = ctx;
			return 0;
		}
		if (want != KINET_BACKEND_AUTO) {
			KLOG_ERR("%s backend not available: %s", b->name, why);
			free(env_faults);
			return rc;
		}
		size_t l = strlen(notes);
		snprintf(notes + l, sizeof(notes) - l, "%s%s not available (%s)", l ? "; " : "",
			 b->name, why);
	}
	KLOG_ERR("kinet_open: no usable backend: %s", notes);
	free(env_faults);
	return rc;
}

int kinet_close(kinet_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (atomic_load(&ctx->qps) || atomic_load(&ctx->pds) || atomic_load(&ctx->cqs)) {
		KLOG_WARN("kinet_close: %d QPs, %d protection domains and %d CQs still exist",
			  atomic_load(&ctx->qps), atomic_load(&ctx->pds), atomic_load(&ctx->cqs));
		return -EBUSY;
	}
	kinet_stats_ctx_remove(ctx);
	ctx->ops->close(ctx);
	if (kinet_trace_on)
		kinet_trace_flush();
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->qp_lock);
	free(ctx->stale);
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
	s &= 0xff;
	KINET_COUNT(ctx, c_synd[s & 63], 1);
	if (s == KN_SYND_WR_FLUSH_ERR)
		KINET_COUNT(ctx, c_flushed, 1);
	else
		KINET_COUNT(ctx, c_errors, 1);
}

#define CTR_LD(p) atomic_load_explicit(p, memory_order_relaxed)
#define BLK_LD(f) __atomic_load_n(&b->f, __ATOMIC_RELAXED)

void kinet_ctr_blk_add(const struct kinet_ctr_blk *b, struct kinet_counters *o)
{
	o->wqes += BLK_LD(c_wqes);
	o->bytes += BLK_LD(c_bytes);
	o->cqes += BLK_LD(c_cqes);
	o->errors += BLK_LD(c_errors);
	o->flushed += BLK_LD(c_flushed);
	for (int k = 0; k < 64; k++)
		o->by_syndrome[k] += BLK_LD(c_synd[k]);
	o->doorbells += BLK_LD(c_doorbells);
	o->dbr_only += BLK_LD(c_dbr_only);
	o->bf_wqes += BLK_LD(c_bf_wqes);
	o->staged_bytes += BLK_LD(c_staged);
	o->direct_bytes += BLK_LD(c_direct);
	o->rnr_retries += BLK_LD(c_rnr);
	o->proxy_rings += BLK_LD(c_proxy);
	o->db_wqe_words += BLK_LD(c_db_wqe);
	o->db_pi_words += BLK_LD(c_db_pi);
	o->db_foreign += BLK_LD(c_db_foreign);
	o->bf_mismatch += BLK_LD(c_bf_mismatch);
}

int kinet_ctx_counters(kinet_ctx *ctx, struct kinet_counters *o)
{
	if (!ctx || !o)
		return -EINVAL;
	memset(o, 0, sizeof(*o));
	if (ctx->ops->counters_sync)
		ctx->ops->counters_sync(ctx);
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
	o->db_wqe_words = CTR_LD(&ctx->c_db_wqe);
	o->db_pi_words = CTR_LD(&ctx->c_db_pi);
	o->db_foreign = CTR_LD(&ctx->c_db_foreign);
	o->bf_mismatch = CTR_LD(&ctx->c_bf_mismatch);
	if (ctx->ops->counters)
		ctx->ops->counters(ctx, o);
	return 0;
}

/* ---- protection domains ------------------------------------------------------ */

int kinet_pd_alloc(kinet_ctx *ctx, kinet_pd **out)
{
	if (!ctx || !out)
		return -EINVAL;
	kinet_pd *pd = calloc(1, ctx->ops->pd_size);
	if (!pd)
		return -ENOMEM;
	pd->ctx = ctx;
	pthread_mutex_lock(&ctx->lock);
	pd->pdn = ctx->next_pdn++;
	pthread_mutex_unlock(&ctx->lock);
	if (ctx->ops->pd_alloc) {
		int rc = ctx->ops->pd_alloc(pd);
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
	kinet_ctx *ctx = pd->ctx;
	if (ctx->ops->pd_free)
		ctx->ops->pd_free(pd);
	atomic_fetch_sub(&ctx->pds, 1);
	free(pd);
	return 0;
}

/* ---- completion queues -------------------------------------------------------- */

int kinet_cq_host_init(kinet_cq *cq, uint32_t cnt)
{
	cq->cnt = cnt;
	cq->buf = kinet_queue_alloc((size_t)cnt * KN_CQE_SIZE);
	void *db = kinet_queue_alloc(4096);
	if (!cq->buf || !db) {
		kinet_queue_free(cq->buf, (size_t)cnt * KN_CQE_SIZE);
		kinet_queue_free(db, 4096);
		cq->buf = NULL;
		return -ENOMEM;
	}
	cq->dbrec = db;
	kinet_cq_host_clear(cq);
	return 0;
}

void kinet_cq_host_fini(kinet_cq *cq)
{
	kinet_queue_free(cq->buf, (size_t)cq->cnt * KN_CQE_SIZE);
	kinet_queue_free((void *)cq->dbrec, 4096);
	cq->buf = NULL;
	cq->dbrec = NULL;
}

void kinet_cq_host_clear(kinet_cq *cq)
{
	/* opcode invalid, owner bit 1: a poller that checks only the owner bit
	 * sees no CQE on the first lap (it expects owner 0 there) */
	for (uint32_t i = 0; i < cq->cnt; i++)
		((struct kn_cqe64 *)cq->buf)[i].op_own = (uint8_t)(KN_CQE_INVALID << 4) | 1u;
	cq->host_ci = 0;
	cq->dbrec[0] = 0;
	cq->dbrec[1] = 0;
}

int kinet_cq_create_ex(kinet_ctx *ctx, const struct kinet_cq_attr *attr, kinet_cq **out)
{
	if (!ctx || !attr || !out || attr->depth == 0 || attr->depth > (1u << 22) ||
	    (attr->flags & ~(uint32_t)KINET_CQ_OVERRUN_IGNORE))
		return -EINVAL;
	*out = NULL;
	if (!ctx->ops->cq_create)
		return kinet_backend_unsupported(ctx, "kinet_cq_create");
	kinet_cq *cq = calloc(1, ctx->ops->cq_size);
	if (!cq)
		return -ENOMEM;
	cq->ctx = ctx;
	cq->cnt = kinet_pow2(attr->depth);
	cq->flags = attr->flags;
	int rc = ctx->ops->cq_create(cq);
	if (rc) {
		free(cq);
		return rc;
	}
	atomic_fetch_add(&ctx->cqs, 1);
	*out = cq;
	return 0;
}

int kinet_cq_create(kinet_ctx *ctx, uint32_t depth, kinet_cq **out)
{
	struct kinet_cq_attr a = {.depth = depth};
	return kinet_cq_create_ex(ctx, &a, out);
}

uint32_t kinet_cq_flags(const kinet_cq *cq)
{
	return cq ? cq->flags : 0;
}

int kinet_cq_destroy(kinet_cq *cq)
{
	if (!cq)
		return -EINVAL;
	if (atomic_load(&cq->refs))
		return -EBUSY;
	kinet_ctx *ctx = cq->ctx;
	ctx->ops->cq_destroy(cq);
	atomic_fetch_sub(&ctx->cqs, 1);
	free(cq);
	return 0;
}

uint32_t kinet_cq_depth(const kinet_cq *cq)
{
	return cq ? cq->cnt : 0;
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

/* A send CQE consumed on a QP's dedicated CQ tells how far the NIC has read
 * the SQ (kinet_qp_post_raw's room on backends that report it only so). */
static void note_sq_progress(kinet_qp *qp, const struct kn_cqe64 *c)
{
	uint8_t op = kn_cqe_opcode(c);
	if (op != KN_CQE_REQ && op != KN_CQE_REQ_ERR)
		return;
	uint16_t w = kn_be16toh(c->wqe_counter);
	pthread_mutex_lock(&qp->raw_lock);
	/* the 64-bit index of WQE w: the last raw index with those low bits */
	uint64_t t = qp->raw_pi - (uint16_t)((uint16_t)qp->raw_pi - w);
	if (t < qp->raw_pi && qp->raw_nbb) {
		uint64_t end = t + (qp->raw_nbb[t & (qp->sq_cnt - 1)] ?: 1);
		if (end > qp->raw_ci)
			qp->raw_ci = end;
	}
	pthread_mutex_unlock(&qp->raw_lock);
}

int kinet_cq_poll(kinet_cq *cq, struct kn_cqe64 *out)
{
	int rc = kinet_cq_peek(cq, cq ? cq->host_ci : 0, out);
	if (rc)
		return rc;
	cq->host_ci++;
	__atomic_store_n(&cq->dbrec[0], kn_htobe32((uint32_t)(cq->host_ci & 0xffffff)),
			 __ATOMIC_RELEASE);
	if (cq->sq_owner) {
		note_sq_progress(cq->sq_owner, out);
		KINET_QCOUNT(cq->sq_owner, KQ_HOST_CQES, 1);
	}
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
