/* SPDX-License-Identifier: BSD-3-Clause */
/* Queue pairs: validation, the RC state machine, the device descriptor and
 * state, host-side posting. The queues themselves are the backend's. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/internal.h"

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

int kinet_db_mode_resolve(int requested)
{
	if (requested != KN_DB_AUTO)
		return requested;
	const char *t = KT(DB_MODE);
	if (t && !strcmp(t, "blueflame"))
		return KN_DB_BLUEFLAME;
	if (t && !strcmp(t, "cpu"))
		return KN_DB_CPU_PROXY;
	/* auto, gpu: the plain doorbell. On the software NIC the doorbell page is
	 * host memory every executor can write and the engine takes the record
	 * alone; on hardware a backend that cannot map the register into the GPU
	 * changes it to cpu. */
	return KN_DB_GPU;
}

bool kinet_qp_legal(int from, int to)
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

void kinet_qp_reset_device_state(kinet_qp *qp)
{
	memset(qp->dstate, 0, sizeof(*qp->dstate));
	qp->dstate->err_ticket = KN_NO_ERROR;
	memset(qp->slot_ready, 0, (size_t)qp->sq_cnt * sizeof(uint64_t));
}

void kinet_qp_fill_desc(kinet_qp *qp)
{
	kn_qp *d = &qp->desc;
	d->sq = qp->sq;
	d->dbrec = qp->dbrec;
	d->db = qp->db;
	d->bf_alt = qp->bf_alt;
	d->cpu_pi = qp->cpu_pi;
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
					   : (uint64_t)KT(TIMEOUT_MS);
	d->timeout_ns = tmo * 1000000ull;
	d->qpn = qp->qpn;
	d->sq_wqe_cnt = qp->sq_cnt;
	d->rq_wqe_cnt = qp->rq_cnt;
	d->rq_stride = qp->rq_stride;
	d->db_mode = (uint32_t)qp->db_mode;
	d->share = (uint32_t)qp->attr.share;
	d->max_inline = qp->attr.max_inline;
	d->backend = (uint32_t)qp->ctx->backend;
	/* a NIC that takes the record or the register, whichever it sees first,
	 * needs no fence between them (device code skips it) */
	d->flags = (qp->flags & KINET_QPF_HW_DOORBELL) ? 0 : KN_QP_DB_UNORDERED;
}

/* Validates and completes the attributes (defaults, IB encodings). */
static int qp_attr_check(kinet_ctx *ctx, const struct kinet_qp_attr *in, struct kinet_qp_attr *a)
{
	if (in)
		*a = *in;
	else
		memset(a, 0, sizeof(*a));
	if (!a->sq_depth)
		a->sq_depth = (uint32_t)KT(SQ_DEPTH);
	if (a->sq_depth > 32768 || a->rq_depth > 32768) {
		KLOG_ERR("qp_create: queue depth above 32768 (sq %u, rq %u)", a->sq_depth,
			 a->rq_depth);
		return -EINVAL;
	}
	if (!a->rq_sge)
		a->rq_sge = 1;
	if (a->rq_sge > KINET_MAX_RQ_SGE) {
		KLOG_ERR("qp_create: %u receive scatter entries, above %u", a->rq_sge,
			 KINET_MAX_RQ_SGE);
		return -EINVAL;
	}
	if (a->remote_access & ~(KINET_QP_ACCESS_SET | KINET_ACCESS_ALL)) {
		KLOG_ERR("qp_create: remote_access 0x%x has bits other than KINET_QP_ACCESS_SET "
			 "and KINET_ACCESS_*", a->remote_access);
		return -EINVAL;
	}
	if (a->max_inline > KN_MAX_INLINE_WRITE) {
		KLOG_ERR("qp_create: max_inline %u above %u", a->max_inline, KN_MAX_INLINE_WRITE);
		return -EINVAL;
	}
	if (!a->max_inline)
		a->max_inline = KN_MAX_INLINE_WRITE;
	if (a->db_mode < KN_DB_AUTO || a->db_mode > KN_DB_CPU_PROXY || a->share < 0 ||
	    a->share > KN_SHARE_GPU ||
	    (a->rnr_retry > 7 && a->rnr_retry != KINET_RNR_RETRY_NONE))
		return -EINVAL;
	if ((a->send_cq && a->send_cq->ctx != ctx) || (a->recv_cq && a->recv_cq->ctx != ctx)) {
		KLOG_ERR("qp_create: a CQ of another context");
		return -EINVAL;
	}
	if (a->cq_flags & ~(uint32_t)KINET_CQ_OVERRUN_IGNORE) {
		KLOG_ERR("qp_create: unknown CQ flags 0x%x", a->cq_flags);
		return -EINVAL;
	}
	if (a->cq_flags && a->send_cq && (a->recv_cq || !a->rq_depth)) {
		KLOG_ERR("qp_create: cq_flags apply to the CQs the QP creates, and it creates none");
		return -EINVAL;
	}
	if ((a->send_cq || a->recv_cq) && !(ctx->ops->caps & KINET_CAP_SHARED_CQ)) {
		KLOG_ERR("qp_create: the %s backend creates each QP's CQs itself (the device API "
			 "needs dedicated ones): pass send_cq = recv_cq = NULL",
			 ctx->ops->name);
		return -EOPNOTSUPP;
	}
	/* from here on rnr_retry is the IB count: 0 none, 1..6, 7 forever */
	if (a->rnr_retry == 0)
		a->rnr_retry = 7;
	else if (a->rnr_retry == KINET_RNR_RETRY_NONE)
		a->rnr_retry = 0;
	return 0;
}

/* Device state, scratch word and descriptor: the same for every backend. */
static int qp_common_init(kinet_qp *qp)
{
	qp->dstate = calloc(1, sizeof(*qp->dstate));
	qp->slot_ready = calloc(qp->sq_cnt, sizeof(uint64_t));
	qp->raw_nbb = calloc(qp->sq_cnt, 1);
	qp->scratch = calloc(1, 64);
	if (!qp->dstate || !qp->slot_ready || !qp->raw_nbb || !qp->scratch)
		return -ENOMEM;
	kinet_qp_reset_device_state(qp);
	int rc = kinet_mr_reg(qp->pd, qp->scratch, 64, KINET_ACCESS_LOCAL_WRITE, &qp->scratch_mr);
	if (rc)
		return rc;
	qp->scratch_mr->internal = true;
	if (qp->own_scq || !(qp->ctx->ops->caps & KINET_CAP_SHARED_CQ))
		qp->scq->sq_owner = qp; /* dedicated: its CQEs tell how far the NIC read */
	kinet_qp_fill_desc(qp);
	return 0;
}

static void qp_common_fini(kinet_qp *qp)
{
	if (qp->scratch_mr && kinet_mr_dereg(qp->scratch_mr))
		KLOG_WARN("qp 0x%x: its scratch region could not be deregistered", qp->qpn);
	qp->scratch_mr = NULL;
	free(qp->dstate);
	free(qp->slot_ready);
	free(qp->raw_nbb);
	free(qp->scratch);
	qp->dstate = NULL;
	qp->slot_ready = NULL;
	qp->raw_nbb = NULL;
	qp->scratch = NULL;
}

/* The end of a QP whose backend no longer serves it. */
static void qp_destroy_common(kinet_qp *qp)
{
	kinet_ctx *ctx = qp->ctx;
	if (qp->scq)
		atomic_fetch_sub(&qp->scq->refs, 1);
	if (qp->rcq)
		atomic_fetch_sub(&qp->rcq->refs, 1);
	ctx->ops->qp_destroy(qp);
	atomic_fetch_sub(&qp->pd->refs, 1);
	atomic_fetch_sub(&ctx->qps, 1);
	pthread_mutex_destroy(&qp->raw_lock);
	free(qp);
}

int kinet_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr_in, kinet_qp **out)
{
	if (!pd || !out)
		return -EINVAL;
	*out = NULL;
	kinet_ctx *ctx = pd->ctx;
	const struct kinet_backend_ops *ops = ctx->ops;
	struct kinet_qp_attr attr;
	int rc = qp_attr_check(ctx, attr_in, &attr);
	if (rc)
		return rc;
	/* 64-byte aligned: the counter block its engine writes has lines of its own */
	size_t sz = (ops->qp_size + 63) & ~(size_t)63;
	kinet_qp *qp = aligned_alloc(64, sz);
	if (!qp)
		return -ENOMEM;
	memset(qp, 0, sz);
	qp->ctx = ctx;
	qp->pd = pd;
	qp->attr = attr;
	qp->db_mode = kinet_db_mode_resolve(attr.db_mode);
	pthread_mutex_init(&qp->raw_lock, NULL);
	rc = ops->qp_create(qp);
	if (rc) {
		pthread_mutex_destroy(&qp->raw_lock);
		free(qp);
		return rc;
	}
	if (qp->scq)
		atomic_fetch_add(&qp->scq->refs, 1);
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->refs, 1);
	atomic_fetch_add(&pd->refs, 1);
	atomic_fetch_add(&ctx->qps, 1);
	rc = qp_common_init(qp);
	if (rc == 0 && ops->qp_attach)
		rc = ops->qp_attach(qp);
	if (rc) {
		qp_common_fini(qp);
		qp_destroy_common(qp);
		return rc;
	}
	KLOG_DBG("qp 0x%x created (%s): sq %u rq %u db %s", qp->qpn, ops->name, qp->sq_cnt,
		 qp->rq_cnt, kinet_db_mode_str(qp->db_mode));
	pthread_mutex_lock(&ctx->qp_lock);
	qp->ctx_next = ctx->qp_head;
	if (ctx->qp_head)
		ctx->qp_head->ctx_pprev = &qp->ctx_next;
	ctx->qp_head = qp;
	qp->ctx_pprev = &ctx->qp_head;
	pthread_mutex_unlock(&ctx->qp_lock);
	*out = qp;
	return 0;
}

int kinet_qp_destroy(kinet_qp *qp)
{
	if (!qp)
		return -EINVAL;
	pthread_mutex_lock(&qp->ctx->qp_lock);
	if (qp->ctx_pprev) {
		*qp->ctx_pprev = qp->ctx_next;
		if (qp->ctx_next)
			qp->ctx_next->ctx_pprev = qp->ctx_pprev;
	}
	pthread_mutex_unlock(&qp->ctx->qp_lock);
	kinet_qp_forget_peer(qp);
	if (qp->ctx->ops->qp_detach)
		qp->ctx->ops->qp_detach(qp);
	qp_common_fini(qp);
	qp_destroy_common(qp);
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

kinet_cq *kinet_qp_send_cq(const kinet_qp *qp)
{
	return qp ? qp->scq : NULL;
}

kinet_cq *kinet_qp_recv_cq(const kinet_qp *qp)
{
	return qp ? qp->rcq : NULL;
}

int kinet_qp_db_mode(const kinet_qp *qp)
{
	return qp ? qp->db_mode : -EINVAL;
}

int kinet_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote)
{
	if (!qp)
		return -EINVAL;
	int from = atomic_load(&qp->state);
	if (!kinet_qp_legal(from, state)) {
		KLOG_ERR("qp 0x%x: illegal transition %s -> %s", qp->qpn, kinet_qp_state_str(from),
			 kinet_qp_state_str(state));
		return -EINVAL;
	}
	if (state == KINET_QPS_RTR && !qp->dc) { /* a DC QP has no remote end */
		if (!remote || (!remote->local && !remote->wire_addr)) {
			KLOG_ERR("qp 0x%x: RTR needs the remote end", qp->qpn);
			return -EINVAL;
		}
		if (remote->local && remote->local->ctx->ops != qp->ctx->ops) {
			KLOG_ERR("qp 0x%x: the remote QP 0x%x belongs to the %s backend, this one to "
				 "%s",
				 qp->qpn, remote->local->qpn, remote->local->ctx->ops->name,
				 qp->ctx->ops->name);
			return -EINVAL;
		}
	}
	if (state == KINET_QPS_INIT && from == KINET_QPS_RESET &&
	    !(qp->ctx->ops->caps & KINET_CAP_RESET_REUSE) &&
	    ((qp->flags & KINET_QPF_USED) || qp->dstate->resv)) {
		/* hardware keeps its CQ index across a QP reset, and the device
		 * API numbers CQEs from the QP's first WQE */
		KLOG_ERR("qp 0x%x: a %s QP cannot be reused after RESET: create a new one",
			 qp->qpn, qp->ctx->ops->name);
		return -EOPNOTSUPP;
	}
	int rc = qp->ctx->ops->qp_modify(qp, from, state, remote);
	if (rc)
		return rc;
	if (state == KINET_QPS_RTR && !qp->dc)
		qp->peer_qpn = remote->local ? remote->local->qpn : remote->qpn;
	if (state == KINET_QPS_RESET) {
		kinet_qp_forget_peer(qp);
		if (qp->dstate->resv || qp->raw_pi)
			qp->flags |= KINET_QPF_USED;
		kinet_qp_reset_device_state(qp);
		pthread_mutex_lock(&qp->raw_lock);
		qp->raw_pi = qp->raw_ci = 0;
		memset(qp->raw_nbb, 0, qp->sq_cnt);
		pthread_mutex_unlock(&qp->raw_lock);
	}
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

/* The NIC's SQ consumer index, as far as the host can know it. */
static uint64_t sq_consumed(void *arg)
{
	kinet_qp *qp = arg;
	if (qp->ctx->ops->sq_consumed)
		return qp->ctx->ops->sq_consumed(qp);
	return qp->raw_ci; /* caller holds raw_lock */
}

long long kinet_sq_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb, uint64_t timeout_ns,
			    uint64_t (*consumed)(void *obj), void *obj)
{
	pthread_mutex_lock(&qp->raw_lock);
	/* room: judged by the NIC's consumer index (where the backend has no
	 * view of it, by the send CQEs consumed with kinet_cq_poll) */
	uint64_t t0 = kn_now_ns();
	while (qp->raw_pi + nbb - consumed(obj) > qp->sq_cnt) {
		if (kn_now_ns() - t0 > timeout_ns) {
			pthread_mutex_unlock(&qp->raw_lock);
			return -ETIMEDOUT;
		}
		pthread_mutex_unlock(&qp->raw_lock);
		struct timespec ts = {0, 1000};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&qp->raw_lock);
	}
	uint64_t t = qp->raw_pi;
	for (uint32_t i = 0; i < nbb; i++)
		memcpy(qp->sq + ((t + i) & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB,
		       (const uint8_t *)wqe + i * KN_SEND_WQE_BB, KN_SEND_WQE_BB);
	qp->raw_nbb[t & (qp->sq_cnt - 1)] = (uint8_t)nbb;
	qp->raw_pi = t + nbb;
	/* WQE before the record; on hardware, as rdma-core rings, the record
	 * before the register, which gets the first 8 bytes of the WQE's ctrl
	 * (the software NIC serves the record alone: a raw WQE may be malformed
	 * on purpose, and the record says exactly what was posted) */
	KN_BAR_WQE_DBR();
	__atomic_store_n(&qp->dbrec[KN_SND_DBR], kn_htobe32((uint32_t)(qp->raw_pi & 0xffff)),
			 __ATOMIC_RELAXED);
	if (qp->flags & KINET_QPF_HW_DOORBELL) {
		uint64_t w;
		memcpy(&w, wqe, 8); /* the caller's copy: the slot may be reused by now */
		KN_BAR_DBR_REG();
		*(volatile uint64_t *)(qp->db + qp->raw_bf_off) = w;
		KN_BAR_REG_FLUSH();
		qp->raw_bf_off ^= qp->bf_alt; /* the two registers in turn */
	}
	pthread_mutex_unlock(&qp->raw_lock);
	return (long long)t;
}

long long kinet_qp_post_raw(kinet_qp *qp, const void *wqe, uint32_t nbb)
{
	if (!qp || !wqe || nbb == 0 || nbb > KN_MAX_WQE_BBS || nbb > qp->sq_cnt)
		return -EINVAL;
	if (qp->flags & KINET_QPF_QUEUES_ON_GPU) {
		KLOG_ERR("qp 0x%x: kinet_qp_post_raw writes the SQ from the host, and this QP's "
			 "queues are in GPU memory (KINET_MLX5_QUEUES=verbs keeps them in host "
			 "memory)",
			 qp->qpn);
		return -EOPNOTSUPP;
	}
	long long t = kinet_sq_post_raw(qp, wqe, nbb, qp->desc.timeout_ns, sq_consumed, qp);
	if (t == -ETIMEDOUT)
		KLOG_ERR("qp 0x%x: kinet_qp_post_raw: the SQ stayed full for %llu ms%s", qp->qpn,
			 (unsigned long long)(qp->desc.timeout_ns / 1000000),
			 qp->ctx->ops->sq_consumed
				 ? ""
				 : " (room is learned from send CQEs consumed with "
				   "kinet_cq_poll: sign a WQE at least once per SQ depth)");
	return t;
}
