/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * observe.c - what kinet shows of a running QP: per-QP counters, the reason
 * codes of error CQEs, and endpoint states derived from the QP state and
 * the transport (docs/lifecycle.md).
 */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

uint64_t kinet_qp_ctr_get(const kinet_qp *qp, int idx)
{
	return __atomic_load_n(&qp->ctr.own[idx], __ATOMIC_RELAXED) +
	       atomic_load_explicit(&((kinet_qp *)qp)->ctr.shr[idx], memory_order_relaxed);
}

void kinet_qp_count_syndrome(kinet_qp *qp, uint32_t s)
{
	s &= 0xff;
	KINET_QCOUNT(qp, KQ_SYND0 + (s & 63), 1);
	if (s == KN_SYND_WR_FLUSH_ERR) {
		KINET_QCOUNT(qp, KQ_FLUSHED, 1);
		return;
	}
	KINET_QCOUNT(qp, KQ_ERRORS, 1);
	if (s == KN_SYND_TRANSPORT_RETRY_EXC_ERR)
		KINET_QCOUNT(qp, KQ_RETRY_EXC, 1);
}

/* The counters as they stand, without bringing in counts kept elsewhere
 * (kinet_qp_ep_info: a look that must not move the QP between engines). */
static void qp_counters_now(kinet_qp *qp, struct kinet_qp_counters *o)
{
	memset(o, 0, sizeof(*o));
#define G(i) kinet_qp_ctr_get(qp, i)
	o->qpn = qp->qpn;
	o->state = atomic_load(&qp->state);
	o->posted = G(KQ_POSTED);
	o->completed = G(KQ_COMPLETED);
	o->cqes = G(KQ_CQES);
	o->bytes = G(KQ_BYTES);
	o->direct_bytes = G(KQ_DIRECT);
	o->staged_bytes = G(KQ_STAGED);
	o->errors = G(KQ_ERRORS);
	o->flushed = G(KQ_FLUSHED);
	for (int i = 0; i < 64; i++)
		o->by_syndrome[i] = G(KQ_SYND0 + i);
	o->rnr_retries = G(KQ_RNR);
	o->retry_exceeded = G(KQ_RETRY_EXC);
	o->doorbells = G(KQ_DOORBELLS);
	o->db_wqe_words = G(KQ_DB_WQE);
	o->db_pi_words = G(KQ_DB_PI);
	o->db_foreign = G(KQ_DB_FOREIGN);
	o->dbr_only = G(KQ_DBR_ONLY);
	o->bf_wqes = G(KQ_BF_WQES);
	o->bf_mismatch = G(KQ_BF_MISMATCH);
	o->db_not_ready = G(KQ_DB_NOT_READY);
	o->recv_completed = G(KQ_RECV);
	o->recv_bytes = G(KQ_RECV_BYTES);
	o->faults = G(KQ_FAULTS);
	o->host_cqes = G(KQ_HOST_CQES);
#undef G
	if (qp->ctx->ops->qp_counters)
		qp->ctx->ops->qp_counters(qp, o);
	o->outstanding = o->posted > o->completed ? o->posted - o->completed : 0;
}

int kinet_qp_counters(const kinet_qp *cqp, struct kinet_qp_counters *o)
{
	if (!cqp || !o)
		return -EINVAL;
	kinet_qp *qp = (kinet_qp *)cqp;
	if (qp->ctx->ops->counters_sync)
		qp->ctx->ops->counters_sync(qp->ctx);
	qp_counters_now(qp, o);
	return 0;
}

const char *kinet_reason_str(int r)
{
	switch (r) {
	case KINET_REASON_NONE: return "no reason recorded";
	case KINET_REASON_UNKNOWN_KEY: return "unknown key";
	case KINET_REASON_WRONG_PD: return "wrong protection domain";
	case KINET_REASON_OUT_OF_BOUNDS: return "out of the region's bounds";
	case KINET_REASON_ACCESS: return "access flag missing";
	case KINET_REASON_REVOKED: return "region revoked";
	case KINET_REASON_QP_NOT_READY: return "QP not ready (not RTR or RTS)";
	case KINET_REASON_PEER_GONE: return "peer gone or silent";
	case KINET_REASON_MALFORMED: return "malformed WQE";
	case KINET_REASON_LENGTH: return "length: message larger than the buffer or limit";
	case KINET_REASON_RNR: return "receiver not ready (no receive WQE)";
	case KINET_REASON_ALIGNMENT: return "misaligned atomic";
	case KINET_REASON_COPY_FAILED: return "copy to or from GPU memory failed";
	case KINET_REASON_BAD_RESPONSE: return "bad response";
	case KINET_REASON_INJECTED: return "injected fault";
	case KINET_REASON_QP_ACCESS: return "target QP does not allow the access";
	case KINET_REASON_DC_KEY: return "DC access key mismatch";
	case KINET_REASON_FLUSHED: return "flushed (QP in ERR)";
	default: return "vendor syndrome (not a kinet reason)";
	}
}

int kinet_cqe_reason(const struct kn_cqe64 *cqe)
{
	if (!cqe)
		return 0;
	uint8_t op = kn_cqe_opcode(cqe);
	if (op != KN_CQE_REQ_ERR && op != KN_CQE_RESP_ERR)
		return 0;
	return ((const struct kn_err_cqe *)cqe)->vendor_err_synd;
}

const char *kinet_ep_state_str(int s)
{
	switch (s) {
	case KINET_EP_IDLE: return "idle";
	case KINET_EP_CONNECTING: return "connecting";
	case KINET_EP_READY: return "ready";
	case KINET_EP_DEGRADED: return "degraded";
	case KINET_EP_DRAINING: return "draining";
	case KINET_EP_FAILED: return "failed";
	default: return "?";
	}
}

int kinet_qp_ep_info(const kinet_qp *cqp, struct kinet_ep_info *o)
{
	if (!cqp || !o)
		return -EINVAL;
	kinet_qp *qp = (kinet_qp *)cqp;
	memset(o, 0, sizeof(*o));
	struct kinet_qp_counters c;
	qp_counters_now(qp, &c);
	o->qp_state = c.state;
	o->outstanding = c.outstanding;
	o->peer_qpn = qp->peer_qpn;
	o->peer_gen = qp->peer_gen;
	if (qp->ctx->backend == KINET_BACKEND_MLX5) {
		o->engine = KINET_ENGINE_HW;
		snprintf(o->engine_why, sizeof(o->engine_why), "the NIC executes the WQEs");
	}
	switch (c.state) {
	case KINET_QPS_RESET: o->state = KINET_EP_IDLE; break;
	case KINET_QPS_INIT:
	case KINET_QPS_RTR: o->state = KINET_EP_CONNECTING; break;
	case KINET_QPS_RTS: o->state = KINET_EP_READY; break;
	default: o->state = c.outstanding ? KINET_EP_DRAINING : KINET_EP_FAILED; break;
	}
	if (qp->ctx->ops->qp_ep_info)
		qp->ctx->ops->qp_ep_info(qp, o);
	return 0;
}
