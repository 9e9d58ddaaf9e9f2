/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soft.h - the software NIC: engine threads that serve doorbells, parse mlx5
 * WQEs, check every access against the key table and write CQEs.
 *
 * The engine is split into a requester (parses a WQE of the QP it serves,
 * resolves the local side) and a responder (checks and executes the remote
 * side against the target QP). For a peer in the same process the requester
 * calls the responder directly; the wire (another process) carries the same
 * request to the remote engine, which calls the same responder functions.
 */
#ifndef KINET_SOFT_H
#define KINET_SOFT_H

#include "internal.h"

#define SOFT_MAX_SGE 64
#define SOFT_MAX_MSG (1ull << 30) /* largest message (1 GiB) */

/* One piece of a gather or scatter list, already checked and translated. */
struct soft_iov {
	uint8_t *ptr;
	uint64_t len;
	int kind; /* enum kinet_mem_kind */
};

/* A parsed send WQE. */
struct soft_req {
	uint8_t opcode;    /* KN_OPCODE_* */
	uint8_t signaled;
	uint16_t wqe_idx;
	uint32_t nbb;      /* WQEBBs it occupies */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t imm;      /* wire order */
	uint64_t swap_add, compare;
	uint64_t total;    /* payload bytes */
	uint8_t async_ok;  /* in: GPU-to-GPU copies may be left in flight (engine) */
	uint8_t in_flight; /* out: soft_exec_local left a copy in flight */
	int niov;
	struct soft_iov iov[SOFT_MAX_SGE]; /* local gather (write/send) or scatter (read/atomic) */
	const uint8_t *inl[SOFT_MAX_SGE]; /* inline data pieces point into wqe (iov.kind host) */
	uint8_t wqe[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
};

/* Responder results: 0 done, a KN_SYND_* for the requester's error CQE, or
 * SOFT_RNR when the target has no receive WQE (retry later). */
#define SOFT_RNR 0x100
#define SOFT_STALL 0x200 /* target CQ full: retry later, no retry counted */

/* Responder side, for the target QP `t` (RTR or RTS). Called by the local
 * requester or by the wire on behalf of a remote one. src/dst iovs are the
 * requester's local memory (or wire staging buffers). */
int soft_resp_write(kinet_qp *t, uint64_t raddr, uint32_t rkey, const struct soft_iov *src,
		    int niov, uint64_t total, int with_imm, uint32_t imm, uint32_t src_qpn);
/* The receive side of an RDMA write with immediate whose payload the caller
 * has placed already (the wire: a write in chunks, or read in place): takes
 * a receive WQE and writes its CQE with byte count len. 0, SOFT_RNR,
 * SOFT_STALL, or a syndrome for the requester. */
int soft_resp_write_imm(kinet_qp *t, uint64_t len, uint32_t imm, uint32_t src_qpn);
int soft_resp_read(kinet_qp *t, uint64_t raddr, uint32_t rkey, const struct soft_iov *dst,
		   int niov, uint64_t total);
int soft_resp_atomic(kinet_qp *t, uint8_t opcode, uint64_t raddr, uint32_t rkey,
		     uint64_t swap_add, uint64_t compare, uint64_t *old);
int soft_resp_send(kinet_qp *t, const struct soft_iov *src, int niov, uint64_t total,
		   int with_imm, uint32_t imm, uint32_t src_qpn);
/* Scatter/gather copy between two lists of equal total length. */
int soft_copy_iov(const struct soft_iov *dst, int ndst, const struct soft_iov *src, int nsrc,
		  uint64_t total);

/* Completion writers. soft_req_cqe: -EAGAIN when the send CQ is full;
 * soft_req_cqe_reserved: into a slot reserved with kinet_cq_reserve. */
int soft_req_cqe(kinet_qp *qp, const struct soft_req *r, uint32_t syndrome);
void soft_req_cqe_reserved(kinet_qp *qp, const struct soft_req *r, uint32_t syndrome);
int soft_flush_rq(kinet_qp *qp);

/* Parses the WQE at the QP's consumer index (avail BBs published). Returns
 * 0, or a KN_SYND_* (the WQE is malformed or its local side invalid); r->nbb
 * is always set to how many BBs to consume. */
uint32_t soft_parse_wqe(kinet_qp *qp, uint64_t ci, uint32_t avail, struct soft_req *r);
/* The same, with the first WQEBB taken from bb (a BlueFlame copy of it, 64
 * bytes) instead of the SQ; bb NULL: the SQ. */
uint32_t soft_parse_wqe_bb(kinet_qp *qp, uint64_t ci, uint32_t avail, const uint8_t *bb,
			   struct soft_req *r);

/* Executes a parsed request against a same-process peer. With r->async_ok,
 * copies between GPU buffers are only enqueued (kinet_cuda->copy_async) and
 * r->in_flight says so: the caller completes the WQE once a later fence of
 * its thread has completed. */
int soft_exec_local(kinet_qp *qp, struct soft_req *r);

#endif
