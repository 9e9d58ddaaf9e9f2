/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_ops.h - the operations of the device data path: WQE builders
 * (kn_prep_*), operation descriptions (kn_op, filled by kn_op_*), and the
 * thread-scope calls that post them (kn_post and its wrappers kn_put,
 * kn_get, ...). Warp and block scope post the same kn_op descriptions
 * (kinet/device_cuda.cuh). Include kinet/device.h rather than this header.
 *
 * One description of each operation, in two layers (as liburing's
 * io_uring_prep_* fill an SQE that any submission path then takes):
 *  - a builder kn_prep_<op>() fills one WQE (its slot in the SQ, or a copy in
 *    registers) from its arguments; low level: the caller reserves the slot
 *    (kn_sq_reserve) and publishes it (kn_sq_submit). Underneath, three
 *    fills do the work for every operation and scope: knx_build_rw (write,
 *    write with immediate, read), knx_build_write_inline, knx_build_atomic;
 *  - kn_op_<op>() fills a kn_op from the same arguments; kn_post() (thread),
 *    kn_warp_post() and kn_block_post() check it, reserve, build its WQE(s)
 *    with the builders and publish them. kn_put(...) is kn_op_put + kn_post,
 *    kn_warp_put(...) kn_op_put + kn_warp_post, and so on.
 *
 * Lengths: a data segment carries at most KN_MAX_LEN (2^31 - 1) bytes (bit
 * 31 of its byte count is the inline flag). Every builder and call that
 * takes a length refuses a longer one with -EINVAL and writes nothing: the
 * calls before they reserve a slot (no ticket is taken), the builders
 * without touching the slot, which the caller still owns and must fill
 * (with kn_prep_nop, say) before publishing it.
 */
#ifndef KINET_DEVICE_OPS_H
#define KINET_DEVICE_OPS_H

#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/device_types.h>
#include <kinet/device_port.h>
#include <kinet/device_sq.h>

/* ---- WQE builders (one 64-byte WQE each) ---------------------------------- */

/* Every builder fills the WQE of ticket t at wqe (kn_wqe_ptr(qp, t), or a
 * 64-byte copy the caller stores there): every segment its ds covers, the
 * ctrl segment signaled (one CQE per WQE). The kn_prep_* return 0, or
 * -EINVAL with nothing written. The knx_build_* underneath fill without
 * checking: kn_post and the warp/block posts use them once an operation has
 * been checked (knx_op_check). */

/* The ctrl segment of every device-API WQE. */
KN_INLINE void knx_ctrl(const kn_qp *qp, void *wqe, kn_ticket_t t, uint8_t opcode, uint8_t ds,
			uint32_t imm)
{
	struct kn_wqe_ctrl_seg *c = (struct kn_wqe_ctrl_seg *)wqe;
	/* bytes 8-11 zeroed whatever the slot held, as rdma-core's post_send */
	c->dci_stream_channel_id[0] = 0;
	c->dci_stream_channel_id[1] = 0;
	kn_set_ctrl_seg(c, (uint16_t)t, opcode, 0, qp->qpn, KN_WQE_CTRL_CQ_UPDATE, ds, 0, imm);
}

/* RDMA write, write with immediate (imm_be: wire order) or read: ctrl,
 * remote address, one data segment of len <= KN_MAX_LEN bytes. */
KN_INLINE void knx_build_rw(const kn_qp *qp, void *wqe, kn_ticket_t t, uint8_t opcode,
			    uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
			    uint32_t len, uint32_t imm_be)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	/* zero bytes: no data segment, as rdma-core posts it (a byte count of 0
	 * in a data segment means 2 GiB to the NIC) */
	if (len)
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), len, lkey, laddr);
	knx_ctrl(qp, wqe, t, opcode, len ? 3 : 2, imm_be);
}

/* RDMA write of len <= KN_MAX_INLINE_WRITE bytes carried in the WQE. */
KN_INLINE void knx_build_write_inline(const kn_qp *qp, void *wqe, kn_ticket_t t,
				      const void *src, uint32_t len, uint64_t raddr,
				      uint32_t rkey)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	if (!len) { /* no inline segment at all, as rdma-core */
		knx_ctrl(qp, wqe, t, KN_OPCODE_RDMA_WRITE, 2, 0);
		return;
	}
	((struct kn_wqe_inl_data_seg *)(w + 32))->byte_count = kn_htobe32(len | KN_INLINE_SEG);
	for (uint32_t i = 0; i < len; i++)
		w[36 + i] = ((const uint8_t *)src)[i];
	knx_ctrl(qp, wqe, t, KN_OPCODE_RDMA_WRITE, (uint8_t)((36 + len + 15) / 16), 0);
}

/* Atomic fetch-add (swap_add: the addend) or compare-and-swap on the 8 bytes
 * at raddr; the old value lands at laddr (8 registered bytes, lkey). */
KN_INLINE void knx_build_atomic(const kn_qp *qp, void *wqe, kn_ticket_t t, uint8_t opcode,
				uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
				uint64_t swap_add, uint64_t compare)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), swap_add, compare);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, lkey, laddr);
	knx_ctrl(qp, wqe, t, opcode, 4, 0);
}

/* NOP: completes (with a CQE) without moving data. */
KN_INLINE void kn_prep_nop(const kn_qp *qp, void *wqe, kn_ticket_t t)
{
	knx_ctrl(qp, wqe, t, KN_OPCODE_NOP, 1, 0);
}

/* RDMA write of len bytes from laddr (lkey) to raddr (rkey). */
KN_INLINE int kn_prep_write(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
			    uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	if (len > KN_MAX_LEN)
		return -EINVAL;
	knx_build_rw(qp, wqe, t, KN_OPCODE_RDMA_WRITE, laddr, lkey, raddr, rkey, len, 0);
	return 0;
}

/* RDMA write with immediate; imm is in host order, consumes a receive WQE. */
KN_INLINE int kn_prep_write_imm(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
				uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len,
				uint32_t imm)
{
	if (len > KN_MAX_LEN)
		return -EINVAL;
	knx_build_rw(qp, wqe, t, KN_OPCODE_RDMA_WRITE_IMM, laddr, lkey, raddr, rkey, len,
		     kn_htobe32(imm));
	return 0;
}

/* RDMA write of len <= KN_MAX_INLINE_WRITE bytes at src, carried in the WQE
 * (src need not be registered). */
KN_INLINE int kn_prep_write_inline(const kn_qp *qp, void *wqe, kn_ticket_t t, const void *src,
				   uint32_t len, uint64_t raddr, uint32_t rkey)
{
	if (len > KN_MAX_INLINE_WRITE)
		return -EINVAL;
	knx_build_write_inline(qp, wqe, t, src, len, raddr, rkey);
	return 0;
}

/* RDMA read of len bytes from raddr (rkey) into laddr (lkey). */
KN_INLINE int kn_prep_read(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
			   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	if (len > KN_MAX_LEN)
		return -EINVAL;
	knx_build_rw(qp, wqe, t, KN_OPCODE_RDMA_READ, laddr, lkey, raddr, rkey, len, 0);
	return 0;
}

/* SEND of len bytes from laddr (with_imm: SEND_IMM carrying imm, host
 * order); consumes a receive WQE of the peer. */
KN_INLINE int kn_prep_send(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
			   uint32_t lkey, uint32_t len, int with_imm, uint32_t imm)
{
	uint8_t *w = (uint8_t *)wqe;
	if (len > KN_MAX_LEN)
		return -EINVAL;
	if (len) /* zero bytes: the ctrl segment alone, as rdma-core */
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + 16), len, lkey, laddr);
	knx_ctrl(qp, wqe, t, with_imm ? KN_OPCODE_SEND_IMM : KN_OPCODE_SEND, len ? 2 : 1,
		 with_imm ? kn_htobe32(imm) : 0);
	return 0;
}

/* Atomic fetch-add of 8 bytes at raddr (8-aligned); the old value lands,
 * big-endian as the NIC returns it, at laddr (8 registered bytes). */
KN_INLINE void kn_prep_atomic_fa(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
				 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	knx_build_atomic(qp, wqe, t, KN_OPCODE_ATOMIC_FA, laddr, lkey, raddr, rkey, add, 0);
}

/* Atomic compare-and-swap: if *raddr == compare then *raddr = swap; the old
 * value lands big-endian at laddr. */
KN_INLINE void kn_prep_atomic_cs(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
				 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t compare,
				 uint64_t swap)
{
	knx_build_atomic(qp, wqe, t, KN_OPCODE_ATOMIC_CS, laddr, lkey, raddr, rkey, swap, compare);
}

/* ---- operation descriptions ---------------------------------------------- */

/* What an operation is, for kn_post / kn_warp_post / kn_block_post. */
enum kn_op_kind {
	KN_OP_PUT = 0,          /* RDMA write (kn_put) */
	KN_OP_PUT_INLINE = 1,   /* RDMA write of bytes carried in the WQE */
	KN_OP_GET = 2,          /* RDMA read (kn_get) */
	KN_OP_PUT_SIGNAL = 3,   /* write, then fetch-add on a signal word: 2 WQEs */
	KN_OP_SIGNAL = 4,       /* fetch-add on a signal word, result discarded */
	KN_OP_FETCH_ADD = 5,    /* remote word += add; its old value lands at laddr */
	KN_OP_COMPARE_SWAP = 6, /* remote word = add if it equals compare; the old
				   value lands at laddr */
};

/* One operation, as the kn_op_* functions fill it (every field; a field an
 * operation does not use is 0). */
typedef struct kn_op {
	int kind;           /* enum kn_op_kind */
	uint32_t len;       /* payload bytes */
	uint64_t laddr;     /* local buffer (put/get/put_signal); fetch_add and
			       compare_swap: their 8-byte result */
	uint32_t lkey;
	uint32_t rkey;
	uint64_t raddr;     /* remote buffer or word */
	const void *src;    /* put_inline: the bytes */
	uint64_t sig_raddr; /* put_signal/signal: remote 64-bit word */
	uint32_t sig_rkey;
	uint64_t add;       /* signal/fetch_add: addend; compare_swap: swap value */
	uint64_t compare;   /* compare_swap */
} kn_op;

/* Fills every field of op (the kn_op_* functions are one call of it each). */
KN_INLINE void knx_op_fill(kn_op *op, int kind, uint32_t len, uint64_t laddr, uint32_t lkey,
			   uint64_t raddr, uint32_t rkey, const void *src, uint64_t sig_raddr,
			   uint32_t sig_rkey, uint64_t add, uint64_t compare)
{
	op->kind = kind;
	op->len = len;
	op->laddr = laddr;
	op->lkey = lkey;
	op->rkey = rkey;
	op->raddr = raddr;
	op->src = src;
	op->sig_raddr = sig_raddr;
	op->sig_rkey = sig_rkey;
	op->add = add;
	op->compare = compare;
}

/* RDMA write of len bytes from laddr (lkey) to raddr (rkey). */
KN_INLINE void kn_op_put(kn_op *op, uint64_t raddr, uint32_t rkey, const void *laddr,
			 uint32_t lkey, uint32_t len)
{
	knx_op_fill(op, KN_OP_PUT, len, (uint64_t)(uintptr_t)laddr, lkey, raddr, rkey, 0, 0, 0,
		    0, 0);
}

/* RDMA write of len <= KN_MAX_INLINE_WRITE (and <= qp->max_inline) bytes at
 * src, copied into the WQE (src need not be registered). */
KN_INLINE void kn_op_put_inline(kn_op *op, uint64_t raddr, uint32_t rkey, const void *src,
				uint32_t len)
{
	knx_op_fill(op, KN_OP_PUT_INLINE, len, 0, 0, raddr, rkey, src, 0, 0, 0, 0);
}

/* RDMA read of len bytes from raddr (rkey) into laddr (lkey). */
KN_INLINE void kn_op_get(kn_op *op, void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
			 uint32_t len)
{
	knx_op_fill(op, KN_OP_GET, len, (uint64_t)(uintptr_t)laddr, lkey, raddr, rkey, 0, 0, 0,
		    0, 0);
}

/* A put, then an atomic add of `add` to the remote 64-bit word sig_raddr
 * (sig_rkey): RC executes them in order, so a reader that sees the signal
 * sees the data. Two WQEs; the ticket is the second's. */
KN_INLINE void kn_op_put_signal(kn_op *op, uint64_t raddr, uint32_t rkey, const void *laddr,
				uint32_t lkey, uint32_t len, uint64_t sig_raddr,
				uint32_t sig_rkey, uint64_t add)
{
	knx_op_fill(op, KN_OP_PUT_SIGNAL, len, (uint64_t)(uintptr_t)laddr, lkey, raddr, rkey, 0,
		    sig_raddr, sig_rkey, add, 0);
}

/* Atomic add of `add` to the remote 64-bit word sig_raddr (result
 * discarded into the QP's scratch word). */
KN_INLINE void kn_op_signal(kn_op *op, uint64_t sig_raddr, uint32_t sig_rkey, uint64_t add)
{
	knx_op_fill(op, KN_OP_SIGNAL, 0, 0, 0, 0, 0, 0, sig_raddr, sig_rkey, add, 0);
}

/* Atomic fetch-add on the remote 64-bit word raddr (8-aligned); the old
 * value lands, big-endian as the NIC returns it, at res (8 registered bytes,
 * res_lkey). */
KN_INLINE void kn_op_fetch_add(kn_op *op, uint64_t raddr, uint32_t rkey, uint64_t add,
			       uint64_t *res, uint32_t res_lkey)
{
	knx_op_fill(op, KN_OP_FETCH_ADD, 8, (uint64_t)(uintptr_t)res, res_lkey, raddr, rkey, 0, 0,
		    0, add, 0);
}

/* Atomic compare-and-swap on the remote 64-bit word raddr: if it equals
 * compare it becomes swap; the old value lands big-endian at res. */
KN_INLINE void kn_op_compare_swap(kn_op *op, uint64_t raddr, uint32_t rkey, uint64_t compare,
				  uint64_t swap, uint64_t *res, uint32_t res_lkey)
{
	knx_op_fill(op, KN_OP_COMPARE_SWAP, 8, (uint64_t)(uintptr_t)res, res_lkey, raddr, rkey, 0,
		    0, 0, swap, compare);
}

/* 0, or -EINVAL when op cannot be posted on qp (unknown kind, a length the
 * format cannot carry, an inline payload larger than the QP allows). */
KN_INLINE int knx_op_check(const kn_qp *qp, const kn_op *op)
{
	switch (op->kind) {
	case KN_OP_PUT:
	case KN_OP_GET:
	case KN_OP_PUT_SIGNAL:
		return op->len > KN_MAX_LEN ? -EINVAL : 0;
	case KN_OP_PUT_INLINE:
		return op->len > KN_MAX_INLINE_WRITE || op->len > qp->max_inline ? -EINVAL : 0;
	case KN_OP_SIGNAL:
	case KN_OP_FETCH_ADD:
	case KN_OP_COMPARE_SWAP:
		return 0;
	default:
		return -EINVAL;
	}
}

/* WQEs of an operation: 2 for put_signal, else 1. */
KN_INLINE uint32_t knx_op_nwqe(const kn_op *op)
{
	return op->kind == KN_OP_PUT_SIGNAL ? 2u : 1u;
}

/* Builds the WQE(s) of a checked op at ticket t into w0 (and w1, ticket t+1). */
KN_INLINE void knx_op_build(const kn_qp *qp, const kn_op *op, kn_ticket_t t, void *w0, void *w1)
{
	switch (op->kind) {
	case KN_OP_PUT:
		knx_build_rw(qp, w0, t, KN_OPCODE_RDMA_WRITE, op->laddr, op->lkey, op->raddr,
			     op->rkey, op->len, 0);
		break;
	case KN_OP_PUT_INLINE:
		knx_build_write_inline(qp, w0, t, op->src, op->len, op->raddr, op->rkey);
		break;
	case KN_OP_GET:
		knx_build_rw(qp, w0, t, KN_OPCODE_RDMA_READ, op->laddr, op->lkey, op->raddr,
			     op->rkey, op->len, 0);
		break;
	case KN_OP_PUT_SIGNAL:
		knx_build_rw(qp, w0, t, KN_OPCODE_RDMA_WRITE, op->laddr, op->lkey, op->raddr,
			     op->rkey, op->len, 0);
		knx_build_atomic(qp, w1, t + 1, KN_OPCODE_ATOMIC_FA, qp->scratch_addr,
				 qp->scratch_lkey, op->sig_raddr, op->sig_rkey, op->add, 0);
		break;
	case KN_OP_SIGNAL:
		knx_build_atomic(qp, w0, t, KN_OPCODE_ATOMIC_FA, qp->scratch_addr,
				 qp->scratch_lkey, op->sig_raddr, op->sig_rkey, op->add, 0);
		break;
	case KN_OP_FETCH_ADD:
		knx_build_atomic(qp, w0, t, KN_OPCODE_ATOMIC_FA, op->laddr, op->lkey, op->raddr,
				 op->rkey, op->add, 0);
		break;
	default: /* KN_OP_COMPARE_SWAP */
		knx_build_atomic(qp, w0, t, KN_OPCODE_ATOMIC_CS, op->laddr, op->lkey, op->raddr,
				 op->rkey, op->add, op->compare);
		break;
	}
}

/* ---- thread scope ----------------------------------------------------------- */

/* Where kn_post builds a WQE: in the SQ slot (C), or in registers, then
 * stored with 16-byte writes and handed to the doorbell (device code). */
#if defined(__CUDA_ARCH__)
#define KNX_WQE_DECL(w) knx_wqebb w##_bb = {}
#define KNX_WQE_AT(qp, t, w) ((void *)&w##_bb)
#define KNX_WQE_PUT(qp, t, w) knx_wqe_store(qp, t, &w##_bb)
#define KNX_WQE_OWN(w) ((const void *)&w##_bb)
#else
#define KNX_WQE_DECL(w) (void)0
#define KNX_WQE_AT(qp, t, w) kn_wqe_ptr(qp, t)
#define KNX_WQE_PUT(qp, t, w) (void)0
#define KNX_WQE_OWN(w) ((const void *)0)
#endif

/* Posts one operation from this thread: checks it (-EINVAL: nothing is
 * reserved or written), reserves its WQE(s) (-ETIMEDOUT as kn_sq_reserve),
 * builds, publishes and rings. *ticket (may be NULL) gets the ticket of its
 * last WQE: wait for it with kn_wait(), or for everything with kn_quiet(). */
KN_INLINE int kn_post(const kn_qp *qp, const kn_op *op, kn_ticket_t *ticket)
{
	kn_ticket_t t;
	int rc = knx_op_check(qp, op);
	if (rc)
		return rc;
	uint32_t n = knx_op_nwqe(op);
	rc = kn_sq_reserve(qp, n, &t);
	if (rc)
		return rc;
	KNX_WQE_DECL(w0);
	KNX_WQE_DECL(w1);
	knx_op_build(qp, op, t, KNX_WQE_AT(qp, t, w0), KNX_WQE_AT(qp, t + 1, w1));
	KNX_WQE_PUT(qp, t, w0);
	if (n == 2)
		KNX_WQE_PUT(qp, t + 1, w1);
	knx_sq_submit_last(qp, t, n, n == 2 ? KNX_WQE_OWN(w1) : KNX_WQE_OWN(w0));
	if (ticket)
		*ticket = t + n - 1;
	return 0;
}

/* The calls below are kn_op_<op> + kn_post (arguments as kn_op_<op>): 0,
 * -EINVAL (refused, nothing posted) or -ETIMEDOUT (SQ full for
 * qp->timeout_ns); *ticket (may be NULL) gets the ticket to wait for. */

KN_INLINE int kn_put(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
		     uint32_t lkey, uint32_t len, kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_put(&op, raddr, rkey, laddr, lkey, len);
	return kn_post(qp, &op, ticket);
}

KN_INLINE int kn_put_inline(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *src,
			    uint32_t len, kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_put_inline(&op, raddr, rkey, src, len);
	return kn_post(qp, &op, ticket);
}

KN_INLINE int kn_get(const kn_qp *qp, void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		     uint32_t len, kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_get(&op, laddr, lkey, raddr, rkey, len);
	return kn_post(qp, &op, ticket);
}

KN_INLINE int kn_signal(const kn_qp *qp, uint64_t sig_raddr, uint32_t sig_rkey, uint64_t add,
			kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_signal(&op, sig_raddr, sig_rkey, add);
	return kn_post(qp, &op, ticket);
}

KN_INLINE int kn_put_signal(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
			    uint32_t lkey, uint32_t len, uint64_t sig_raddr, uint32_t sig_rkey,
			    uint64_t add, kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_put_signal(&op, raddr, rkey, laddr, lkey, len, sig_raddr, sig_rkey, add);
	return kn_post(qp, &op, ticket);
}

/* Posts op (a fetch-add or compare-and-swap) and waits for it; *old (may be
 * NULL) gets the old remote value in host order. */
KN_INLINE int knx_post_wait_old(const kn_qp *qp, const kn_op *op, uint64_t *old)
{
	kn_ticket_t t;
	int rc = kn_post(qp, op, &t);
	if (rc)
		return rc;
	rc = kn_wait(qp, t);
	if (rc == 0 && old) {
		KN_FENCE_ACQ();
		*old = kn_be64toh(*(volatile uint64_t *)(uintptr_t)op->laddr);
	}
	return rc;
}

/* Blocking atomics (kn_op_fetch_add / kn_op_compare_swap, then kn_wait): the
 * old remote value is returned in *old (host order). res/res_lkey: 8
 * registered bytes where the NIC lands the result. 0, -EIO, -ETIMEDOUT. */
KN_INLINE int kn_atomic_fetch_add(const kn_qp *qp, uint64_t raddr, uint32_t rkey, uint64_t add,
				  uint64_t *res, uint32_t res_lkey, uint64_t *old)
{
	kn_op op;
	kn_op_fetch_add(&op, raddr, rkey, add, res, res_lkey);
	return knx_post_wait_old(qp, &op, old);
}

KN_INLINE int kn_atomic_compare_swap(const kn_qp *qp, uint64_t raddr, uint32_t rkey,
				     uint64_t compare, uint64_t swap, uint64_t *res,
				     uint32_t res_lkey, uint64_t *old)
{
	kn_op op;
	kn_op_compare_swap(&op, raddr, rkey, compare, swap, res, res_lkey);
	return knx_post_wait_old(qp, &op, old);
}

/* Waits until the local 64-bit signal word reaches at least `value`, at most
 * timeout_ns: 0 or -ETIMEDOUT. */
KN_INLINE int kn_wait_signal(const volatile uint64_t *sig, uint64_t value, uint64_t timeout_ns)
{
	uint64_t t0 = kn_now_ns();
	unsigned spins = 0;
	while (*sig < value) {
		if ((++spins & 63u) == 0 && kn_now_ns() - t0 > timeout_ns)
			return *sig >= value ? 0 : -ETIMEDOUT;
		KN_PAUSE();
	}
	KN_FENCE_ACQ();
	return 0;
}

#endif /* KINET_DEVICE_OPS_H */
