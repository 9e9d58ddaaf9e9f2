/* SPDX-License-Identifier: BSD-3-Clause */
/* Queue pairs: creation, the RC state machine, device descriptor export. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "nic/mlx5/mlx5.h"

const char *kinet_qp_state_str(int s)
{
	switch (s) {
	case KINET_QPS_RESET: return "RESET";
	case KINET_QPS_INIT: return "INIT";
	case KINET_QPS_RTR: return "RTR";
	case KINET_QPS_RTS: return "RTS";
	case KINET_QPS_ERR: return "ERR";
	default: return "?";
	}
}

const char *kinet_db_mode_str(int m)
{
	switch (m) {
	case KN_DB_AUTO: return "auto";
	case KN_DB_GPU: return "gpu";
	case KN_DB_BLUEFLAME: return "blueflame";
	case KN_DB_CPU_PROXY: return "cpu";
	default: return "?";
	}
}

static int resolve_db_mode(int requested)
{
	if (requested != KN_DB_AUTO)
		return requested;
	const char *t = kinet_tunable_str("KINET_DB_MODE");
	if (t && !strcmp(t, "gpu"))
		return KN_DB_GPU;
	if (t && !strcmp(t, "blueflame"))
		return KN_DB_BLUEFLAME;
	if (t && !strcmp(t, "cpu"))
		return KN_DB_CPU_PROXY;
	/* software NIC: the doorbell page is host memory every executor can
	 * write, and the engine takes the doorbell record alone, so the plain
	 * doorbell is the cheapest producer path. */
	return KN_DB_GPU;
}

static int qp_table_insert(kinet_ctx *ctx, kinet_qp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	uint32_t i;
	for (i = 0; i < ctx->qp_cap; i++)
		if (!ctx->qp_tab[i])
			break;
	if (i == ctx->qp_cap) {
		uint32_t ncap = ctx->qp_cap ? ctx->qp_cap * 2 : 64;
		if (ncap > (1u << 23)) {
			pthread_mutex_unlock(&ctx->lock);
			return -ENOMEM;
		}
		kinet_qp **t = realloc(ctx->qp_tab, ncap * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&ctx->lock);
			return -ENOMEM;
		}
		memset(t + ctx->qp_cap, 0, (ncap - ctx->qp_cap) * sizeof(*t));
		ctx->qp_tab = t;
		ctx->qp_cap = ncap;
	}
	ctx->qp_tab[i] = qp;
	qp->qpn = 0x100 + i; /* low QP numbers are reserved on real NICs */
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

kinet_qp *kinet_ctx_qp_lookup(kinet_ctx *ctx, uint32_t qpn)
{
	kinet_qp *qp = NULL;
	pthread_mutex_lock(&ctx->lock);
	if (qpn >= 0x100 && qpn - 0x100 < ctx->qp_cap)
		qp = ctx->qp_tab[qpn - 0x100];
	pthread_mutex_unlock(&ctx->lock);
	return qp;
}

static void qp_free_mem(kinet_qp *qp)
{
	kinet_queue_free(qp->sq, (size_t)qp->sq_cnt * KN_SEND_WQE_BB);
	kinet_queue_free(qp->rq, (size_t)qp->rq_cnt * qp->rq_stride);
	kinet_queue_free(qp->dbrec_page, 4096);
	kinet_queue_free(qp->uar, KN_UAR_PAGE_SIZE);
	free(qp->dstate);
	free(qp->slot_ready);
	free(qp->scratch);
}

static void qp_reset_device_state(kinet_qp *qp)
{
	memset(qp->dstate, 0, sizeof(*qp->dstate));
	qp->dstate->err_ticket = KN_NO_ERROR;
	memset(qp->slot_ready, 0, (size_t)qp->sq_cnt * sizeof(uint64_t));
}

/* Fills the device descriptor from the QP's queues and attributes; db and
 * cpu_pi are where the backend put the doorbell register and the CPU-proxy
 * producer word. */
void kinet_qp_fill_desc(kinet_qp *qp, volatile uint8_t *db, volatile uint32_t *cpu_pi,
			int backend)
{
	kn_qp *d = &qp->desc;
	d->sq = qp->sq;
	d->dbrec = qp->dbrec;
	d->db = db;
	d->cpu_pi = cpu_pi;
	d->cq = qp->scq->buf;
	d->cq_dbrec = qp->scq->dbrec;
	d->cq_cqe_cnt = qp->scq->cnt;
	d->rq = qp->rq;
	d->rcq = qp->rcq ? qp->rcq->buf : NULL;
	d->rcq_dbrec = qp->rcq ? qp->rcq->dbrec : NULL;
	d->rcq_cqe_cnt = qp->rcq ? qp->rcq->cnt : 0;
	d->st = qp->dstate;
	d->slot_ready = qp->slot_ready;
	d->scratch_addr = (uint64_t)(uintptr_t)qp->scratch;
	d->scratch_lkey = qp->scratch_mr->key;
	uint64_t tmo = qp->attr.timeout_ms ? qp->attr.timeout_ms
					   : (uint64_t)kinet_tunable_int("KINET_TIMEOUT_MS");
	d->timeout_ns = tmo * 1000000ull;
	d->qpn = qp->qpn;
	d->sq_wqe_cnt = qp->sq_cnt;
	d->rq_wqe_cnt = qp->rq_cnt;
	d->rq_stride = qp->rq_stride;
	d->db_mode = (uint32_t)qp->db_mode;
	d->share = (uint32_t)qp->attr.share;
	d->max_inline = qp->attr.max_inline;
	d->backend = (uint32_t)backend;
	d->flags = backend == KINET_BACKEND_SOFT ? KN_QP_DB_UNORDERED : 0;
}

int kinet_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr_in, kinet_qp **out)
{
	if (!pd || !out)
		return -EINVAL;
	*out = NULL;
	kinet_ctx *ctx = pd->ctx;
	struct kinet_qp_attr attr;
	if (attr_in)
		attr = *attr_in;
	else
		memset(&attr, 0, sizeof(attr));
	if (!attr.sq_depth)
		attr.sq_depth = (uint32_t)kinet_tunable_int("KINET_SQ_DEPTH");
	if (attr.sq_depth > 32768 || attr.rq_depth > 32768) {
		KLOG_ERR("qp_create: queue depth above 32768 (sq %u, rq %u)", attr.sq_depth,
			 attr.rq_depth);
		return -EINVAL;
	}
	if (attr.max_inline > KN_MAX_INLINE_WRITE) {
		KLOG_ERR("qp_create: max_inline %u above %u", attr.max_inline, KN_MAX_INLINE_WRITE);
		return -EINVAL;
	}
	if (!attr.max_inline)
		attr.max_inline = KN_MAX_INLINE_WRITE;
	if (attr.db_mode < KN_DB_AUTO || attr.db_mode > KN_DB_CPU_PROXY || attr.share < 0 ||
	    attr.share > KN_SHARE_GPU ||
	    (attr.rnr_retry > 7 && attr.rnr_retry != KINET_RNR_RETRY_NONE))
		return -EINVAL;
	/* from here on rnr_retry is the IB count: 0 none, 1..6, 7 forever */
	if (attr.rnr_retry == 0)
		attr.rnr_retry = 7;
	else if (attr.rnr_retry == KINET_RNR_RETRY_NONE)
		attr.rnr_retry = 0;
	if (ctx->backend == KINET_BACKEND_MLX5)
		return kinet_mlx5_qp_create(pd, &attr, out);

	kinet_qp *qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->ctx = ctx;
	qp->pd = pd;
	qp->attr = attr;
	qp->sq_cnt = kinet_pow2(attr.sq_depth < 2 ? 2 : attr.sq_depth);
	qp->rq_cnt = attr.rq_depth ? kinet_pow2(attr.rq_depth) : 0;
	qp->rq_stride = 16;
	qp->db_mode = resolve_db_mode(attr.db_mode);
	pthread_mutex_init(&qp->rq_lock, NULL);
	int rc = -ENOMEM;
	qp->sq = kinet_queue_alloc((size_t)qp->sq_cnt * KN_SEND_WQE_BB);
	qp->dbrec_page = kinet_queue_alloc(4096);
	qp->uar = kinet_queue_alloc(KN_UAR_PAGE_SIZE);
	qp->dstate = calloc(1, sizeof(*qp->dstate));
	qp->slot_ready = calloc(qp->sq_cnt, sizeof(uint64_t));
	qp->scratch = calloc(1, 64);
	if (qp->rq_cnt)
		qp->rq = kinet_queue_alloc((size_t)qp->rq_cnt * qp->rq_stride);
	if (!qp->sq || !qp->dbrec_page || !qp->uar || !qp->dstate || !qp->slot_ready ||
	    !qp->scratch || (qp->rq_cnt && !qp->rq))
		goto fail;
	qp->dbrec = qp->dbrec_page;
	qp_reset_device_state(qp);

	/* completion queues: dedicated ones unless given */
	if (attr.send_cq) {
		qp->scq = attr.send_cq;
	} else {
		rc = kinet_cq_create(ctx, qp->sq_cnt, &qp->scq);
		if (rc)
			goto fail;
		qp->own_scq = true;
	}
	if (qp->rq_cnt) {
		if (attr.recv_cq) {
			qp->rcq = attr.recv_cq;
		} else {
			rc = kinet_cq_create(ctx, qp->rq_cnt, &qp->rcq);
			if (rc)
				goto fail;
			qp->own_rcq = true;
		}
	}
	rc = kinet_mr_reg(pd, qp->scratch, 64, KINET_ACCESS_LOCAL_WRITE, &qp->scratch_mr);
	if (rc)
		goto fail;
	rc = qp_table_insert(ctx, qp);
	if (rc)
		goto fail;
	atomic_fetch_add(&qp->scq->refs, 1);
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->refs, 1);
	atomic_fetch_add(&pd->refs, 1);

	kinet_qp_fill_desc(qp, qp->uar + KN_BF_OFFSET, qp->dbrec + 4, KINET_BACKEND_SOFT);

	rc = kinet_soft_qp_attach(qp);
	if (rc) {
		kinet_qp_destroy(qp);
		return rc;
	}
	KLOG_DBG("qp 0x%x created: sq %u rq %u db %s", qp->qpn, qp->sq_cnt, qp->rq_cnt,
		 kinet_db_mode_str(qp->db_mode));
	*out = qp;
	return 0;
fail:
	if (qp->scratch_mr)
		kinet_mr_dereg(qp->scratch_mr);
	if (qp->own_scq && qp->scq)
		kinet_cq_destroy(qp->scq);
	if (qp->own_rcq && qp->rcq)
		kinet_cq_destroy(qp->rcq);
	qp_free_mem(qp);
	free(qp);
	return rc;
}

int kinet_qp_destroy(kinet_qp *qp)
{
	if (!qp)
		return -EINVAL;
	kinet_ctx *ctx = qp->ctx;
	if (ctx->backend == KINET_BACKEND_MLX5)
		return kinet_mlx5_qp_destroy(qp);
	kinet_soft_qp_detach(qp);
	pthread_mutex_lock(&ctx->lock);
	/* a local peer must forget us */
	for (uint32_t i = 0; i < ctx->qp_cap; i++) {
		kinet_qp *o = ctx->qp_tab[i];
		if (o && o->peer == qp)
			__atomic_store_n(&o->peer, NULL, __ATOMIC_RELEASE);
	}
	if (qp->qpn >= 0x100 && qp->qpn - 0x100 < ctx->qp_cap && ctx->qp_tab[qp->qpn - 0x100] == qp)
		ctx->qp_tab[qp->qpn - 0x100] = NULL;
	pthread_mutex_unlock(&ctx->lock);
	if (qp->scratch_mr)
		kinet_mr_dereg(qp->scratch_mr);
	if (qp->scq)
		atomic_fetch_sub(&qp->scq->refs, 1);
	if (qp->rcq)
		atomic_fetch_sub(&qp->rcq->refs, 1);
	if (qp->own_scq)
		kinet_cq_destroy(qp->scq);
	if (qp->own_rcq)
		kinet_cq_destroy(qp->rcq);
	atomic_fetch_sub(&qp->pd->refs, 1);
	pthread_mutex_destroy(&qp->rq_lock);
	qp_free_mem(qp);
	free(qp);
	return 0;
}

uint32_t kinet_qp_num(const kinet_qp *qp)
{
	return qp ? qp->qpn : 0;
}

int kinet_qp_get_state(const kinet_qp *qp)
{
	return qp ? atomic_load(&((kinet_qp *)qp)->state) : -EINVAL;
}

int kinet_qp_db_mode(const kinet_qp *qp)
{
	return qp ? qp->db_mode : -EINVAL;
}

static bool legal(int from, int to)
{
	if (to == KINET_QPS_RESET || to == KINET_QPS_ERR)
		return true;
	switch (from) {
	case KINET_QPS_RESET: return to == KINET_QPS_INIT;
	case KINET_QPS_INIT: return to == KINET_QPS_INIT || to == KINET_QPS_RTR;
	case KINET_QPS_RTR: return to == KINET_QPS_RTS;
	case KINET_QPS_RTS: return to == KINET_QPS_RTS;
	default: return false;
	}
}

int kinet_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote)
{
	if (!qp)
		return -EINVAL;
	if (qp->ctx->backend == KINET_BACKEND_MLX5)
		return kinet_mlx5_qp_modify(qp, state, remote);
	int from = atomic_load(&qp->state);
	if (!legal(from, state)) {
		KLOG_ERR("qp 0x%x: illegal transition %s -> %s", qp->qpn, kinet_qp_state_str(from),
			 kinet_qp_state_str(state));
		return -EINVAL;
	}
	if (state == KINET_QPS_RTR) {
		if (!remote || (!remote->local && !remote->wire_addr)) {
			KLOG_ERR("qp 0x%x: RTR needs the remote end", qp->qpn);
			return -EINVAL;
		}
		if (remote->local) {
			if (remote->local->ctx != qp->ctx) {
				/* different contexts in one process: still reachable
				 * directly, each side checks its own keys */
			}
			qp->peer = remote->local;
			qp->peer_qpn = remote->local->qpn;
			qp->wire = NULL;
		} else {
			int rc = kinet_soft_wire_connect(qp, remote);
			if (rc)
				return rc;
		}
	}
	if (state == KINET_QPS_RESET)
		qp_reset_device_state(qp);
	int old = atomic_exchange(&qp->state, state);
	kinet_soft_qp_state_changed(qp, old, state);
	return 0;
}

int kinet_qp_connect_local(kinet_qp *a, kinet_qp *b)
{
	if (!a || !b)
		return -EINVAL;
	struct kinet_qp_remote ra = {.local = b, .qpn = b->qpn};
	struct kinet_qp_remote rb = {.local = a, .qpn = a->qpn};
	int rc;
	if ((rc = kinet_qp_modify(a, KINET_QPS_INIT, NULL)) ||
	    (a != b && (rc = kinet_qp_modify(b, KINET_QPS_INIT, NULL))) ||
	    (rc = kinet_qp_modify(a, KINET_QPS_RTR, &ra)) ||
	    (a != b && (rc = kinet_qp_modify(b, KINET_QPS_RTR, &rb))) ||
	    (rc = kinet_qp_modify(a, KINET_QPS_RTS, NULL)) ||
	    (a != b && (rc = kinet_qp_modify(b, KINET_QPS_RTS, NULL))))
		return rc;
	return 0;
}

int kinet_qp_device(kinet_qp *qp, kn_qp **out)
{
	if (!qp || !out)
		return -EINVAL;
	if (qp->scq->cnt != qp->sq_cnt || atomic_load(&qp->scq->refs) != 1) {
		KLOG_ERR("qp 0x%x: the device API needs a dedicated send CQ as deep as the SQ",
			 qp->qpn);
		return -EINVAL;
	}
	if (qp->rcq && (qp->rcq->cnt != qp->rq_cnt || atomic_load(&qp->rcq->refs) != 1)) {
		KLOG_ERR("qp 0x%x: the device API needs a dedicated receive CQ as deep as the RQ",
			 qp->qpn);
		return -EINVAL;
	}
	*out = &qp->desc;
	return 0;
}

long long kinet_qp_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb)
{
	if (!qp || !wqe || nbb == 0 || nbb > KN_MAX_WQE_BBS || nbb > qp->sq_cnt)
		return -EINVAL;
	/* room: judged by the NIC's consumer index */
	uint64_t t0 = kn_now_ns();
	while (qp->host_pi + nbb - atomic_load(&qp->sq_ci_pub) > qp->sq_cnt) {
		if (kn_now_ns() - t0 > qp->desc.timeout_ns)
			return -ETIMEDOUT;
		struct timespec ts = {0, 1000};
		nanosleep(&ts, NULL);
	}
	uint64_t t = qp->host_pi;
	for (uint32_t i = 0; i < nbb; i++)
		memcpy(qp->sq + ((t + i) & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB,
		       (const uint8_t *)wqe + i * KN_SEND_WQE_BB, KN_SEND_WQE_BB);
	qp->host_pi = t + nbb;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&qp->dbrec[KN_SND_DBR], kn_htobe32((uint32_t)(qp->host_pi & 0xffff)),
			 __ATOMIC_RELEASE);
	return (long long)t;
}
