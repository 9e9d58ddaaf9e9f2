/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wqe.c - the software NIC's requester: WQE parsing (never trusting a byte
 * of the queue), local-side protection checks, and CQE writing.
 */
#include <string.h>
#include "nic/soft/soft.h"
#include "nic/soft/rules.h"

/* Local check of one data segment; access 0 = the NIC reads it. */
static uint32_t local_seg(kinet_qp *qp, uint32_t lkey, uint64_t addr, uint64_t len,
			  unsigned access, struct soft_iov *iov)
{
	struct kinet_mr_ref ref;
	if (len == 0) {
		iov->ptr = NULL;
		iov->len = 0;
		iov->kind = KINET_MEM_HOST;
		iov->mr = NULL;
		return 0;
	}
	uint32_t why = soft_mr_check(qp->ctx, qp->pd, lkey, addr, len, access, &ref);
	if (why)
		return SOFT_REASON(KN_SYND_LOCAL_PROT_ERR, why);
	iov->ptr = ref.ptr;
	iov->len = len;
	iov->kind = ref.kind;
	iov->mr = ref.mr;
	return 0;
}

uint32_t soft_parse_wqe(kinet_qp *qp, uint64_t ci, uint32_t avail, struct soft_req *r)
{
	return soft_parse_wqe_bb(qp, ci, avail, NULL, r);
}

uint32_t soft_parse_wqe_bb(kinet_qp *qp, uint64_t ci, uint32_t avail, const uint8_t *bb,
			   struct soft_req *r)
{
	uint32_t mask = qp->sq_cnt - 1;
	const uint8_t *first = bb ? bb : qp->sq + (ci & mask) * KN_SEND_WQE_BB;
	memcpy(r->wqe, first, KN_SEND_WQE_BB);
	r->async_ok = 0;
	r->in_flight = 0;
	r->niov = 0;
	r->total = 0;
	struct kn_rule_wqe dec, *d = &dec;
	kn_rule_ctrl(r->wqe, d);
	r->opcode = d->opcode;
	r->wqe_idx = d->wqe_idx;
	r->signaled = d->signaled;
	r->imm = d->imm;
	if (d->nbb > avail) {
		r->nbb = avail;
		return SOFT_REASON(KN_SYND_LOCAL_QP_OP_ERR, KINET_REASON_MALFORMED); /* cut short */
	}
	r->nbb = d->nbb;
	for (uint32_t i = 1; i < d->nbb; i++)
		memcpy(r->wqe + i * KN_SEND_WQE_BB, qp->sq + ((ci + i) & mask) * KN_SEND_WQE_BB,
		       KN_SEND_WQE_BB);
	/* the format (rules.h, shared with the GPU engine), then the local
	 * segments it decoded, in order: the first failure is reported */
	uint32_t res = qp->dc == KINET_DC_DCI ? kn_rule_decode_dci(r->wqe, (uint16_t)ci, qp->qpn, d)
					     : kn_rule_decode(r->wqe, (uint16_t)ci, qp->qpn, d);
	r->raddr = d->raddr;
	r->rkey = d->rkey;
	r->swap_add = d->swap_add;
	r->compare = d->compare;
	r->swap_mask = d->swap_mask;
	r->compare_mask = d->compare_mask;
	r->atomic_size = d->atomic_size;
	r->wait_index = d->wait_index;
	r->wait_cqn = d->wait_cqn;
	r->dct = d->dct;
	r->dc_key = d->dc_key;
	for (uint32_t i = 0; i < d->nseg; i++) {
		const struct kn_rule_seg *g = &d->seg[i];
		struct soft_iov *iov = &r->iov[i];
		if (g->inl) {
			iov->ptr = r->wqe + g->inl;
			iov->len = g->len;
			iov->kind = KINET_MEM_HOST;
			iov->mr = NULL;
		} else {
			uint32_t s = local_seg(qp, g->lkey, g->addr, g->len, d->access, iov);
			if (s)
				return s;
		}
		r->total += iov->len;
		r->niov++;
	}
	return res;
}

/* The reason of an error without one recorded: what its syndrome implies. */
static uint8_t default_reason(uint32_t synd)
{
	switch (synd) {
	case KN_SYND_WR_FLUSH_ERR: return KINET_REASON_FLUSHED;
	case KN_SYND_TRANSPORT_RETRY_EXC_ERR: return KINET_REASON_PEER_GONE;
	case KN_SYND_RNR_RETRY_EXC_ERR: return KINET_REASON_RNR;
	case KN_SYND_LOCAL_QP_OP_ERR: return KINET_REASON_MALFORMED;
	case KN_SYND_BAD_RESP_ERR: return KINET_REASON_BAD_RESPONSE;
	default: return KINET_REASON_NONE;
	}
}

uint8_t soft_reason_of(uint32_t res)
{
	uint32_t synd = res & 0xff;
	if (synd == KN_SYND_WR_FLUSH_ERR)
		return KINET_REASON_FLUSHED;
	return SOFT_WHY(res) ? (uint8_t)SOFT_WHY(res) : default_reason(synd);
}

static int req_cqe(kinet_qp *qp, const struct soft_req *r, uint32_t res, bool reserved)
{
	struct kn_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	uint32_t syndrome = res & 0xff;
	if (syndrome) {
		struct kn_err_cqe *e = (struct kn_err_cqe *)&cqe;
		e->syndrome = (uint8_t)syndrome;
		e->vendor_err_synd = soft_reason_of(res);
		e->s_wqe_opcode_qpn = kn_htobe32(((uint32_t)r->opcode << 24) | qp->qpn);
		e->wqe_counter = kn_htobe16(r->wqe_idx);
		e->op_own = KN_CQE_REQ_ERR << 4;
	} else {
		cqe.byte_cnt = kn_htobe32((uint32_t)r->total);
		cqe.sop_drop_qpn = kn_htobe32(((uint32_t)r->opcode << 24) | qp->qpn);
		cqe.wqe_counter = kn_htobe16(r->wqe_idx);
		cqe.op_own = KN_CQE_REQ << 4;
	}
	int rc = 0;
	if (reserved)
		soft_cq_push_reserved(qp->scq, &cqe);
	else
		rc = soft_cq_push(qp->scq, &cqe);
	if (rc == 0) {
		KINET_QCOUNT(qp, KQ_CQES, 1);
		if (syndrome) {
			kinet_count_syndrome(qp->ctx, syndrome);
			kinet_qp_count_syndrome(qp, syndrome);
		}
		if (__builtin_expect(kinet_trace_on, 0))
			kinet_trace_cqe(qp, &cqe, r->total);
	}
	return rc;
}

int soft_req_cqe(kinet_qp *qp, const struct soft_req *r, uint32_t syndrome)
{
	return req_cqe(qp, r, syndrome, false);
}

void soft_req_cqe_reserved(kinet_qp *qp, const struct soft_req *r, uint32_t syndrome)
{
	req_cqe(qp, r, syndrome, true);
}

/* Flushes every posted receive WQE of a QP in ERR. Caller holds rq_lock. */
int soft_flush_rq(kinet_qp *qp)
{
	if (!qp->rq_cnt)
		return 0;
	uint16_t pi = (uint16_t)kn_be32toh(__atomic_load_n(&qp->dbrec[KN_RCV_DBR], __ATOMIC_ACQUIRE));
	int n = 0;
	while ((uint16_t)(pi - (uint16_t)soft_qp(qp)->rq_ci) != 0 &&
	       (uint16_t)(pi - (uint16_t)soft_qp(qp)->rq_ci) <= qp->rq_cnt) {
		struct kn_cqe64 cqe;
		memset(&cqe, 0, sizeof(cqe));
		struct kn_err_cqe *e = (struct kn_err_cqe *)&cqe;
		e->syndrome = KN_SYND_WR_FLUSH_ERR;
		e->vendor_err_synd = 0xf9;
		e->s_wqe_opcode_qpn = kn_htobe32(qp->qpn);
		e->wqe_counter = kn_htobe16((uint16_t)soft_qp(qp)->rq_ci);
		e->op_own = KN_CQE_RESP_ERR << 4;
		if (soft_cq_push(qp->rcq, &cqe))
			break;
		kinet_count_syndrome(qp->ctx, KN_SYND_WR_FLUSH_ERR);
		kinet_qp_count_syndrome(qp, KN_SYND_WR_FLUSH_ERR);
		KINET_QCOUNT(qp, KQ_RECV, 1);
		if (__builtin_expect(kinet_trace_on, 0))
			kinet_trace_cqe(qp, &cqe, 0);
		soft_qp(qp)->rq_ci++;
		n++;
	}
	return n;
}
