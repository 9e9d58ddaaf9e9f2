/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wqe.c - the software NIC's requester: WQE parsing (never trusting a byte
 * of the queue), local-side protection checks, and CQE writing.
 */
#include <string.h>
#include "nic/soft/soft.h"

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

/* Gather list (data and inline segments) from off to end of the WQE. */
static uint32_t parse_gather(kinet_qp *qp, struct soft_req *r, uint32_t off, uint32_t end,
			     int allow_inline, unsigned access)
{
	r->niov = 0;
	r->total = 0;
	while (off < end) {
		if (r->niov == SOFT_MAX_SGE)
			return SOFT_REASON(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
		uint32_t bc = kn_load_be32(r->wqe + off);
		struct soft_iov *iov = &r->iov[r->niov];
		if (bc & KN_INLINE_SEG) {
			uint32_t len = bc & ~KN_INLINE_SEG;
			if (!allow_inline || len > end - off - 4)
				return KN_SYND_LOCAL_QP_OP_ERR;
			iov->ptr = r->wqe + off + 4;
			iov->len = len;
			iov->kind = KINET_MEM_HOST;
			iov->mr = NULL;
			off += (4 + len + 15) & ~15u;
		} else {
			if (end - off < 16)
				return KN_SYND_LOCAL_QP_OP_ERR;
			uint32_t lkey = kn_load_be32(r->wqe + off + 4);
			uint64_t addr = kn_load_be64(r->wqe + off + 8);
			/* a byte count of 0 means 2^31 bytes (the PRM's data segment) */
			uint64_t len = bc ? bc : 1ull << 31;
			uint32_t s = local_seg(qp, lkey, addr, len, access, iov);
			if (s)
				return s;
			off += 16;
		}
		r->total += iov->len;
		if (r->total > SOFT_MAX_MSG)
			return SOFT_REASON(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
		r->niov++;
	}
	return 0;
}

/* An extended (masked) atomic: ctrl (opmod: the operand size), remote
 * address, operands (16 bytes; 32 for the 8-byte masked compare-and-swap),
 * one data segment of `size` bytes for the old value. */
static uint32_t parse_masked_atomic(kinet_qp *qp, struct soft_req *r, uint32_t end)
{
	uint8_t opmod = kn_wqe_opmod_of((const struct kn_wqe_ctrl_seg *)r->wqe);
	uint32_t size = opmod == KN_OPMOD_EXT_ATOMIC_4 ? 4 : opmod == KN_OPMOD_EXT_ATOMIC_8 ? 8 : 0;
	if (!size)
		return KN_SYND_LOCAL_QP_OP_ERR;
	bool cs = r->opcode == KN_OPCODE_ATOMIC_MASKED_CS;
	uint32_t ops = cs && size == 8 ? 32 : 16;
	if (end != 32 + ops + 16)
		return KN_SYND_LOCAL_QP_OP_ERR;
	const uint8_t *o = r->wqe + 32;
	r->raddr = kn_load_be64(r->wqe + 16);
	r->rkey = kn_load_be32(r->wqe + 24);
	r->atomic_size = (uint8_t)size;
	if (cs && size == 8) {
		r->swap_add = kn_load_be64(o);
		r->compare = kn_load_be64(o + 8);
		r->swap_mask = kn_load_be64(o + 16);
		r->compare_mask = kn_load_be64(o + 24);
	} else if (cs) {
		r->swap_add = kn_load_be32(o);
		r->compare = kn_load_be32(o + 4);
		r->swap_mask = kn_load_be32(o + 8);
		r->compare_mask = kn_load_be32(o + 12);
	} else if (size == 8) {
		r->swap_add = kn_load_be64(o);
		r->swap_mask = kn_load_be64(o + 8);
		r->compare = r->compare_mask = 0;
	} else {
		r->swap_add = kn_load_be32(o);
		r->swap_mask = kn_load_be32(o + 4);
		r->compare = r->compare_mask = 0;
	}
	uint32_t bc = kn_load_be32(r->wqe + 32 + ops);
	if (bc & KN_INLINE_SEG)
		return KN_SYND_LOCAL_QP_OP_ERR;
	if (bc != size)
		return SOFT_REASON(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
	return parse_gather(qp, r, 32 + ops, end, 0, KINET_ACCESS_LOCAL_WRITE);
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
	const struct kn_wqe_ctrl_seg *c = (const struct kn_wqe_ctrl_seg *)r->wqe;
	uint32_t ds = kn_be32toh(c->qpn_ds) & 0x3f;
	uint32_t qpn = kn_be32toh(c->qpn_ds) >> 8;
	r->opcode = kn_wqe_opcode_of(c);
	r->wqe_idx = kn_wqe_index_of(c);
	r->signaled = (c->fm_ce_se & 0x0c) >= KN_WQE_CTRL_CQ_UPDATE;
	r->imm = c->imm;
	r->niov = 0;
	r->total = 0;
	uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
	if (nbb > avail) {
		r->nbb = avail;
		return SOFT_REASON(KN_SYND_LOCAL_QP_OP_ERR, KINET_REASON_MALFORMED); /* cut short */
	}
	r->nbb = nbb;
	for (uint32_t i = 1; i < nbb; i++)
		memcpy(r->wqe + i * KN_SEND_WQE_BB, qp->sq + ((ci + i) & mask) * KN_SEND_WQE_BB,
		       KN_SEND_WQE_BB);
	if (ds == 0 || r->wqe_idx != (uint16_t)ci || qpn != qp->qpn)
		return KN_SYND_LOCAL_QP_OP_ERR;
	uint32_t end = ds * 16;
	switch (r->opcode) {
	case KN_OPCODE_NOP:
		return 0;
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM:
	case KN_OPCODE_RDMA_READ:
		if (end < 32)
			return KN_SYND_LOCAL_QP_OP_ERR;
		r->raddr = kn_load_be64(r->wqe + 16);
		r->rkey = kn_load_be32(r->wqe + 24);
		if (r->opcode == KN_OPCODE_RDMA_READ)
			return parse_gather(qp, r, 32, end, 0, KINET_ACCESS_LOCAL_WRITE);
		return parse_gather(qp, r, 32, end, 1, 0);
	case KN_OPCODE_SEND:
	case KN_OPCODE_SEND_IMM:
		return parse_gather(qp, r, 16, end, 1, 0);
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA: {
		if (end != 64)
			return KN_SYND_LOCAL_QP_OP_ERR;
		r->raddr = kn_load_be64(r->wqe + 16);
		r->rkey = kn_load_be32(r->wqe + 24);
		r->swap_add = kn_load_be64(r->wqe + 32);
		r->compare = kn_load_be64(r->wqe + 40);
		uint32_t bc = kn_load_be32(r->wqe + 48);
		if (bc & KN_INLINE_SEG)
			return KN_SYND_LOCAL_QP_OP_ERR;
		if (bc != 8)
			return SOFT_REASON(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
		uint32_t s = parse_gather(qp, r, 48, 64, 0, KINET_ACCESS_LOCAL_WRITE);
		if (s)
			return s;
		return 0;
	}
	case KN_OPCODE_ATOMIC_MASKED_CS:
	case KN_OPCODE_ATOMIC_MASKED_FA:
		return parse_masked_atomic(qp, r, end);
	default:
		return KN_SYND_LOCAL_QP_OP_ERR;
	}
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
