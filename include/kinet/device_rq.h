/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_rq.h - the receive path of the device data path: posting
 * receive buffers and polling their completions (for SENDs and writes with
 * immediate of the peer). One consumer per QP: the QP's owner, whatever its
 * sharing mode. Include kinet/device.h rather than this header.
 */
#ifndef KINET_DEVICE_RQ_H
#define KINET_DEVICE_RQ_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/device_types.h>
#include <kinet/device_port.h>

/* What a receive completion said. */
typedef struct kn_recv_info {
	uint32_t byte_len;
	uint32_t imm;     /* host order, when has_imm */
	uint8_t opcode;   /* KN_CQE_RESP_* or KN_CQE_RESP_ERR */
	uint8_t has_imm;
	uint8_t syndrome; /* error CQE only */
	uint8_t rsvd;
} kn_recv_info;

/* Posts one receive buffer of len bytes at addr (lkey, local write); the
 * receive ticket comes back in *ticket. 0, -EBUSY (every receive slot holds
 * a buffer not consumed yet), -EINVAL (no receive queue, len > KN_MAX_LEN:
 * nothing is posted). */
KN_INLINE int kn_recv_post(const kn_qp *qp, void *addr, uint32_t lkey, uint32_t len,
			   kn_ticket_t *ticket)
{
	kn_qp_state *st = qp->st;
	if (!qp->rq_wqe_cnt || len > KN_MAX_LEN)
		return -EINVAL;
	uint64_t t = st->rq_resv;
	if (t - KN_LOAD64(&st->rq_done) >= qp->rq_wqe_cnt)
		return -EBUSY; /* every receive slot holds an unconsumed buffer */
	uint8_t *slot = qp->rq + (size_t)(t & (qp->rq_wqe_cnt - 1)) * qp->rq_stride;
	struct kn_wqe_data_seg *seg = (struct kn_wqe_data_seg *)slot;
	/* zero bytes: the list is its terminator alone, as rdma-core posts it (a
	 * byte count of 0 in a data segment means 2 GiB) */
	uint32_t off = 0;
	if (len) {
		kn_set_data_seg(seg, len, lkey, (uint64_t)(uintptr_t)addr);
		off = 16;
	}
	for (; off < qp->rq_stride; off += 16) /* terminate the list */
		kn_set_data_seg(seg + off / 16, 0, KN_INVALID_LKEY, 0);
	st->rq_resv = t + 1;
	KN_BAR_WQE_DBR();
	qp->dbrec[KN_RCV_DBR] = kn_htobe32((uint32_t)((t + 1) & 0xffff));
	/* a send posted after this receive rings after it: that ring's first
	 * barrier orders this record before its own */
	*ticket = t;
	return 0;
}

/* Polls the receive completion of a receive ticket; tickets are consumed in
 * order (-EINVAL: not the next one). blocking: wait up to qp->timeout_ns.
 * 0, -EIO (error CQE: info->syndrome), -EBUSY, -ETIMEDOUT. */
KN_INLINE int kn_recv_poll(const kn_qp *qp, kn_ticket_t ticket, int blocking, kn_recv_info *info)
{
	kn_qp_state *st = qp->st;
	if (ticket != st->rq_done)
		return -EINVAL;
	uint8_t *slot = qp->rcq + (size_t)(ticket & (qp->rcq_cqe_cnt - 1)) * KN_CQE_SIZE;
	struct kn_cqe64 *cqe = (struct kn_cqe64 *)slot;
	uint64_t t0 = 0;
	while (!kn_cqe_ready(cqe, ticket, qp->rcq_cqe_cnt)) {
		if (!blocking)
			return -EBUSY;
		uint64_t now = kn_now_ns();
		if (!t0)
			t0 = now;
		else if (now - t0 > qp->timeout_ns)
			return -ETIMEDOUT;
		KN_PAUSE();
	}
	KN_BAR_CQE_DATA();
	uint8_t op = kn_cqe_opcode(cqe);
	info->opcode = op;
	info->byte_len = kn_be32toh(cqe->byte_cnt);
	info->has_imm = (op == KN_CQE_RESP_SEND_IMM || op == KN_CQE_RESP_WR_IMM);
	info->imm = info->has_imm ? kn_be32toh(cqe->imm_inval_pkey) : 0;
	info->syndrome = (op == KN_CQE_RESP_ERR || op == KN_CQE_REQ_ERR)
				 ? ((struct kn_err_cqe *)cqe)->syndrome
				 : 0;
	st->rq_done = ticket + 1;
	*qp->rcq_dbrec = kn_htobe32((uint32_t)((ticket + 1) & 0xffffff));
	return info->syndrome ? -EIO : 0;
}

#endif /* KINET_DEVICE_RQ_H */
