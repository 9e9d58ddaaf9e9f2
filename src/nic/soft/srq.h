/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nic/soft/srq.h - shared receive queues of the software NIC, for
 * kinet-verbs (ibv_create_srq, and the SRQ a DevX QP names).
 *
 * The queue is the PRM's: a ring of cnt WQEs of stride bytes, each a 16-byte
 * "next" segment (next_wqe_index, big-endian, at byte 2) and data segments
 * (a KN_INVALID_LKEY ends the list), and a doorbell record whose word 0 is
 * the number of WQEs posted (big-endian, as mlx5_post_srq_recv writes it).
 * The NIC starts at WQE 0 and follows next_wqe_index from each WQE it takes;
 * the receive CQE's wqe_counter is the index of the WQE taken (srqn_uidx
 * stays 0, as in every CQE of the software NIC: with cqe_version 1 a
 * ConnectX writes the QP's user_index there). A QP that receives through an SRQ takes its
 * receives from there in arrival order, whichever QP of the SRQ they come to.
 */
#ifndef KINET_NIC_SOFT_SRQ_H
#define KINET_NIC_SOFT_SRQ_H

#include "core/driver.h"

typedef struct kinet_srq kinet_srq;

struct kinet_srq_info {
	uint8_t *buf;             /* cnt * stride bytes, zeroed, the list linked 0 -> 1 -> .. */
	uint32_t cnt, stride;     /* WQEs (a power of two) and bytes per WQE (16 * 2^k) */
	volatile uint32_t *dbrec; /* word 0: WQEs posted (big-endian) */
	uint32_t srqn;
};

/* An SRQ of pd's context (the software NIC only: -EOPNOTSUPP elsewhere)
 * with room for max_wr posted WQEs (1 .. 32767; cnt is the next power of
 * two above max_wr: one WQE is always the free list's tail) of max_sge
 * scatter entries (1 .. KINET_MAX_RQ_SGE). */
int kinet_srq_create(kinet_pd *pd, uint32_t max_wr, uint32_t max_sge, kinet_srq **out,
		     struct kinet_srq_info *info);
/* -EBUSY while a QP receives through it. */
int kinet_srq_destroy(kinet_srq *srq);
/* Makes a QP in RESET of the same context, created without a receive queue,
 * receive through srq, with its receive completions in rcq. */
int kinet_qp_set_srq(kinet_qp *qp, kinet_srq *srq, kinet_cq *rcq);

#endif
