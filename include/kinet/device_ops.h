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

/* The ctrl segment of every device-API WQE (opmod: the extended atomics'
 * operand size, else 0). */
KN_INLINE void knx_ctrl_mod(const kn_qp *qp, void *wqe, kn_ticket_t t, uint8_t opcode,
			    uint8_t opmod, uint8_t ds, uint32_t imm)
{
	struct kn_wqe_ctrl_seg *c = (struct kn_wqe_ctrl_seg *)wqe;
	/* bytes 8-11 zeroed whatever the slot held, as rdma-core's post_send */
	c->dci_stream_channel_id[0] = 0;
	c->dci_stream_channel_id[1] = 0;
	kn_set_ctrl_seg(c, (uint16_t)t, opcode, opmod, qp->qpn, KN_WQE_CTRL_CQ_UPDATE, ds, 0, imm);
}
KN_INLINE void knx_ctrl(const kn_qp *qp, void *wqe, kn_ticket_t t, uint8_t opcode, uint8_t ds,
			uint32_t imm)
{
	knx_ctrl_mod(qp, wqe, t, opcode, 0, ds, imm);
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

/* Extended atomic (opcode KN_OPCODE_ATOMIC_MASKED_CS or _FA) on the `size`
 * (4 or 8) bytes at raddr; the old value lands, big-endian, in the `size`
 * registered bytes at laddr. Masked CS: a = swap, b = compare, c =
 * swap_mask, d = compare_mask; masked FA: a = add, c = field boundary (b, d
 * unused). The 8-byte masked CS takes two WQEBBs: its data segment is the
 * first 16 bytes of w1, the slot of ticket t+1 (kn_wqe_ptr(qp, t + 1): the
 * SQ may wrap between the two); every other form one (w1 untouched). */
KN_INLINE void knx_build_masked(const kn_qp *qp, void *w0, void *w1, kn_ticket_t t, uint8_t opcode,
				uint32_t size, uint64_t laddr, uint32_t lkey, uint64_t raddr,
				uint32_t rkey, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint8_t *w = (uint8_t *)w0;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	uint8_t opmod = size == 4 ? KN_OPMOD_EXT_ATOMIC_4 : KN_OPMOD_EXT_ATOMIC_8;
	if (opcode == KN_OPCODE_ATOMIC_MASKED_CS && size == 8) {
		kn_set_masked_atomic_seg((struct kn_wqe_masked_atomic_seg *)(w + 32), a, b, c, d);
		kn_set_data_seg((struct kn_wqe_data_seg *)w1, 8, lkey, laddr);
		knx_ctrl_mod(qp, w0, t, opcode, opmod, 5, 0);
		return;
	}
	if (opcode == KN_OPCODE_ATOMIC_MASKED_CS)
		kn_set_masked_cs32_seg((struct kn_wqe_masked_cs32_seg *)(w + 32), (uint32_t)a,
				       (uint32_t)b, (uint32_t)c, (uint32_t)d);
	else if (size == 4)
		kn_set_masked_fa32_seg((struct kn_wqe_masked_fa32_seg *)(w + 32), (uint32_t)a,
				       (uint32_t)c);
	else
		kn_set_masked_fa64_seg((struct kn_wqe_masked_fa64_seg *)(w + 32), a, c);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), size, lkey, laddr);
	knx_ctrl_mod(qp, w0, t, opcode, opmod, 4, 0);
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

/* Masked compare-and-swap of size 4 or 8 bytes at raddr (size-aligned): if
 * ((old ^ compare) & compare_mask) == 0 the word becomes (old & ~swap_mask) |
 * (swap & swap_mask); the old value lands big-endian at laddr (size
 * registered bytes). size 4 uses the low 32 bits of every operand and one
 * WQEBB (w1 untouched); size 8 takes two: w0 = the slot of t, w1 = the slot
 * of t+1 (publish both tickets together). -EINVAL (nothing written) for
 * another size. */
KN_INLINE int kn_prep_masked_cs(const kn_qp *qp, void *w0, void *w1, kn_ticket_t t, uint32_t size,
				uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
				uint64_t swap, uint64_t compare, uint64_t swap_mask,
				uint64_t compare_mask)
{
	if (size != 4 && size != 8)
		return -EINVAL;
	knx_build_masked(qp, w0, w1, t, KN_OPCODE_ATOMIC_MASKED_CS, size, laddr, lkey, raddr, rkey,
			 swap, compare, swap_mask, compare_mask);
	return 0;
}

/* Masked fetch-and-add of size 4 or 8 bytes at raddr: the word becomes old +
 * add with no carry out of the bits set in field_boundary (0: a plain add;
 * all ones: exclusive or); the old value lands big-endian at laddr. One
 * WQEBB. -EINVAL for another size. */
KN_INLINE int kn_prep_masked_fa(const kn_qp *qp, void *wqe, kn_ticket_t t, uint32_t size,
				uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
				uint64_t add, uint64_t field_boundary)
{
	if (size != 4 && size != 8)
		return -EINVAL;
	knx_build_masked(qp, wqe, (void *)0, t, KN_OPCODE_ATOMIC_MASKED_FA, size, laddr, lkey,
			 raddr, rkey, add, 0, field_boundary, 0);
	return 0;
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
	KN_OP_MASKED_CS = 7,    /* masked compare-and-swap of `size` bytes (add:
				   swap, compare, swap_mask, compare_mask); the
				   old value lands at laddr */
	KN_OP_MASKED_FA = 8,    /* masked fetch-and-add of `size` bytes (add,
				   swap_mask: the field boundary) */
};

/* What put_signal and signal do to the signal word (kn_op.sig_op). */
enum kn_sig_op {
	KN_SIG_ADD = 0, /* word += add: a fetch-add */
	KN_SIG_SET = 1, /* word = add: an 8-byte masked compare-and-swap with
			   compare_mask 0, swap_mask all ones (two WQEBBs) */
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
	uint64_t add;       /* signal/fetch_add: addend or value; compare_swap,
			       masked CS: swap value; masked FA: addend */
	uint64_t compare;   /* compare_swap, masked CS */
	uint32_t size;      /* masked atomics: 4 or 8 bytes (else 8) */
	uint32_t sig_op;    /* put_signal/signal: enum kn_sig_op */
	uint64_t swap_mask; /* masked CS: swap mask; masked FA: field boundary */
	uint64_t compare_mask; /* masked CS */
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
	op->size = 8;
	op->sig_op = KN_SIG_ADD;
	op->swap_mask = 0;
	op->compare_mask = 0;
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

/* A put, then `sig_op` (enum kn_sig_op) with `value` on the remote 64-bit
 * word sig_raddr: kn_op_put_signal with a choice of ADD or SET. SET makes
 * the second WQE an 8-byte masked compare-and-swap (two WQEBBs: three in
 * all). */
KN_INLINE void kn_op_put_signal_op(kn_op *op, uint64_t raddr, uint32_t rkey, const void *laddr,
				   uint32_t lkey, uint32_t len, uint64_t sig_raddr,
				   uint32_t sig_rkey, uint64_t value, int sig_op)
{
	kn_op_put_signal(op, raddr, rkey, laddr, lkey, len, sig_raddr, sig_rkey, value);
	op->sig_op = (uint32_t)sig_op;
}

/* `sig_op` with `value` on the remote 64-bit word sig_raddr, result
 * discarded: kn_op_signal with a choice of ADD or SET. */
KN_INLINE void kn_op_signal_op(kn_op *op, uint64_t sig_raddr, uint32_t sig_rkey, uint64_t value,
			       int sig_op)
{
	kn_op_signal(op, sig_raddr, sig_rkey, value);
	op->sig_op = (uint32_t)sig_op;
}

/* Masked compare-and-swap of size (4 or 8) bytes at raddr (size-aligned);
 * the old value lands big-endian at res (size registered bytes, res_lkey).
 * See kn_prep_masked_cs. */
KN_INLINE void kn_op_masked_cs(kn_op *op, uint32_t size, uint64_t raddr, uint32_t rkey,
			       uint64_t swap, uint64_t compare, uint64_t swap_mask,
			       uint64_t compare_mask, void *res, uint32_t res_lkey)
{
	knx_op_fill(op, KN_OP_MASKED_CS, size, (uint64_t)(uintptr_t)res, res_lkey, raddr, rkey, 0,
		    0, 0, swap, compare);
	op->size = size;
	op->swap_mask = swap_mask;
	op->compare_mask = compare_mask;
}

/* Masked fetch-and-add of size (4 or 8) bytes at raddr; the old value lands
 * big-endian at res. See kn_prep_masked_fa. */
KN_INLINE void kn_op_masked_fa(kn_op *op, uint32_t size, uint64_t raddr, uint32_t rkey,
			       uint64_t add, uint64_t field_boundary, void *res, uint32_t res_lkey)
{
	knx_op_fill(op, KN_OP_MASKED_FA, size, (uint64_t)(uintptr_t)res, res_lkey, raddr, rkey, 0,
		    0, 0, add, 0);
	op->size = size;
	op->swap_mask = field_boundary;
}

/* The atomic memory operations of a PGAS layer, each on 4 or 8 bytes,
 * mapped onto what the NIC executes (kn_op_amo): */
enum kn_amo {
	KN_AMO_FETCH_ADD = 0,    /* old; word += value (8 bytes: ATOMIC_FA, 4:
				    masked FA) */
	KN_AMO_COMPARE_SWAP = 1, /* old; word = value if old == compare (8 bytes:
				    ATOMIC_CS, 4: masked CS with full masks) */
	KN_AMO_SWAP = 2,         /* old; word = value (masked CS, compare_mask 0) */
	KN_AMO_FETCH = 3,        /* old (masked FA of 0: never a plain read, which
				    could tear against other atomics) */
	KN_AMO_FETCH_AND = 4,    /* old; word &= value (masked CS: swap value into
				    the bits where value is 0) */
	KN_AMO_FETCH_OR = 5,     /* old; word |= value (masked CS: swap value into
				    the bits where value is 1) */
	KN_AMO_FETCH_XOR = 6,    /* old; word ^= value (masked FA, every bit its
				    own field) */
};

/* One kn_amo (value, compare in the low `size` bytes) on the remote word at
 * raddr; the old value lands big-endian at res (size registered bytes). An
 * unknown amo or size leaves op->kind invalid (kn_post refuses it). */
KN_INLINE void kn_op_amo(kn_op *op, int amo, uint32_t size, uint64_t raddr, uint32_t rkey,
			 uint64_t value, uint64_t compare, void *res, uint32_t res_lkey)
{
	uint64_t all = size == 4 ? 0xffffffffull : ~0ull;
	switch (size == 4 || size == 8 ? amo : -1) {
	case KN_AMO_FETCH_ADD:
		if (size == 8)
			kn_op_fetch_add(op, raddr, rkey, value, (uint64_t *)res, res_lkey);
		else
			kn_op_masked_fa(op, size, raddr, rkey, value, 0, res, res_lkey);
		return;
	case KN_AMO_COMPARE_SWAP:
		if (size == 8)
			kn_op_compare_swap(op, raddr, rkey, compare, value, (uint64_t *)res,
					   res_lkey);
		else
			kn_op_masked_cs(op, size, raddr, rkey, value, compare, all, all, res,
					res_lkey);
		return;
	case KN_AMO_SWAP:
		kn_op_masked_cs(op, size, raddr, rkey, value, 0, all, 0, res, res_lkey);
		return;
	case KN_AMO_FETCH:
		kn_op_masked_fa(op, size, raddr, rkey, 0, 0, res, res_lkey);
		return;
	case KN_AMO_FETCH_AND:
		kn_op_masked_cs(op, size, raddr, rkey, value, 0, ~value & all, 0, res, res_lkey);
		return;
	case KN_AMO_FETCH_OR:
		kn_op_masked_cs(op, size, raddr, rkey, value, 0, value & all, 0, res, res_lkey);
		return;
	case KN_AMO_FETCH_XOR:
		kn_op_masked_fa(op, size, raddr, rkey, value, all, res, res_lkey);
		return;
	default:
		knx_op_fill(op, -1, 0, 0, 0, raddr, rkey, 0, 0, 0, 0, 0);
		return;
	}
}

/* 0, or -EINVAL when op cannot be posted on qp (unknown kind, a length the
 * format cannot carry, an inline payload larger than the QP allows, a
 * masked atomic of another size than 4 or 8, an unknown signal op). */
KN_INLINE int knx_op_check(const kn_qp *qp, const kn_op *op)
{
	switch (op->kind) {
	case KN_OP_PUT:
	case KN_OP_GET:
		return op->len > KN_MAX_LEN ? -EINVAL : 0;
	case KN_OP_PUT_SIGNAL:
		return op->len > KN_MAX_LEN || op->sig_op > KN_SIG_SET ? -EINVAL : 0;
	case KN_OP_PUT_INLINE:
		return op->len > KN_MAX_INLINE_WRITE || op->len > qp->max_inline ? -EINVAL : 0;
	case KN_OP_SIGNAL:
		return op->sig_op > KN_SIG_SET ? -EINVAL : 0;
	case KN_OP_FETCH_ADD:
	case KN_OP_COMPARE_SWAP:
		return 0;
	case KN_OP_MASKED_CS:
	case KN_OP_MASKED_FA:
		return op->size == 4 || op->size == 8 ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

/* WQEBBs (tickets) of an operation: a put_signal is two WQEs, the 8-byte
 * masked compare-and-swap (and so a SET signal) two WQEBBs. */
KN_INLINE uint32_t knx_op_nwqe(const kn_op *op)
{
	switch (op->kind) {
	case KN_OP_PUT_SIGNAL:
		return op->sig_op == KN_SIG_SET ? 3u : 2u;
	case KN_OP_SIGNAL:
		return op->sig_op == KN_SIG_SET ? 2u : 1u;
	case KN_OP_MASKED_CS:
		return op->size == 8 ? 2u : 1u;
	default:
		return 1u;
	}
}

/* The tickets of an operation that start a WQE of two WQEBBs (bit i: ticket
 * t+i), for knx_sq_submit_span; 0 when every WQE is one WQEBB. */
KN_INLINE uint32_t knx_op_span(const kn_op *op)
{
	switch (op->kind) {
	case KN_OP_PUT_SIGNAL:
		return op->sig_op == KN_SIG_SET ? 2u : 0u;
	case KN_OP_SIGNAL:
		return op->sig_op == KN_SIG_SET ? 1u : 0u;
	case KN_OP_MASKED_CS:
		return op->size == 8 ? 1u : 0u;
	default:
		return 0u;
	}
}

/* The WQE of a checked op of one WQEBB that is not a signal (put, inline
 * put, get, fetch-add, compare-and-swap) at ticket t into w0. */
KN_INLINE void knx_op_build_1(const kn_qp *qp, const kn_op *op, kn_ticket_t t, void *w0, void *w1)
{
	(void)w1;
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

/* The signal WQE of put_signal / signal at ticket t into w0 (and w1, its
 * second WQEBB, for SET). */
KN_INLINE void knx_build_signal(const kn_qp *qp, const kn_op *op, kn_ticket_t t, void *w0, void *w1)
{
	if (op->sig_op == KN_SIG_SET)
		knx_build_masked(qp, w0, w1, t, KN_OPCODE_ATOMIC_MASKED_CS, 8, qp->scratch_addr,
				 qp->scratch_lkey, op->sig_raddr, op->sig_rkey, op->add, 0, ~0ull, 0);
	else
		knx_build_atomic(qp, w0, t, KN_OPCODE_ATOMIC_FA, qp->scratch_addr,
				 qp->scratch_lkey, op->sig_raddr, op->sig_rkey, op->add, 0);
}

/* Builds the WQE(s) of a checked op at ticket t into w0, w1, w2 (the slots
 * of tickets t, t+1, t+2, as many as knx_op_nwqe says). */
KN_INLINE void knx_op_build3(const kn_qp *qp, const kn_op *op, kn_ticket_t t, void *w0, void *w1,
			     void *w2)
{
	switch (op->kind) {
	case KN_OP_PUT_SIGNAL:
		knx_build_rw(qp, w0, t, KN_OPCODE_RDMA_WRITE, op->laddr, op->lkey, op->raddr,
			     op->rkey, op->len, 0);
		knx_build_signal(qp, op, t + 1, w1, w2);
		return;
	case KN_OP_SIGNAL:
		knx_build_signal(qp, op, t, w0, w1);
		return;
	case KN_OP_MASKED_CS:
		knx_build_masked(qp, w0, w1, t, KN_OPCODE_ATOMIC_MASKED_CS, op->size, op->laddr,
				 op->lkey, op->raddr, op->rkey, op->add, op->compare, op->swap_mask,
				 op->compare_mask);
		return;
	case KN_OP_MASKED_FA:
		knx_build_masked(qp, w0, w1, t, KN_OPCODE_ATOMIC_MASKED_FA, op->size, op->laddr,
				 op->lkey, op->raddr, op->rkey, op->add, 0, op->swap_mask, 0);
		return;
	default:
		break;
	}
	knx_op_build_1(qp, op, t, w0, w1);
}

/* Builds the WQE(s) of a checked op of at most two WQEBBs (every op but a
 * SET put_signal) at ticket t into w0 (and w1, ticket t+1). */
KN_INLINE void knx_op_build(const kn_qp *qp, const kn_op *op, kn_ticket_t t, void *w0, void *w1)
{
	knx_op_build3(qp, op, t, w0, w1, (void *)0);
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
 * reserved or written), reserves its WQEBB(s) (-ETIMEDOUT as kn_sq_reserve),
 * builds, publishes and rings. *ticket (may be NULL) gets its last ticket:
 * wait for it with kn_wait(), or for everything with kn_quiet(). When the
 * last WQE is one of two WQEBBs, the doorbell is its ctrl word (no
 * BlueFlame body: that is for one-WQEBB single posts). */
KN_INLINE int kn_post(const kn_qp *qp, const kn_op *op, kn_ticket_t *ticket)
{
	kn_ticket_t t;
	int rc = knx_op_check(qp, op);
	if (rc)
		return rc;
	uint32_t n = knx_op_nwqe(op);
	uint32_t span = knx_op_span(op);
	rc = kn_sq_reserve(qp, n, &t);
	if (rc)
		return rc;
	KNX_WQE_DECL(w0);
	KNX_WQE_DECL(w1);
	KNX_WQE_DECL(w2);
	knx_op_build3(qp, op, t, KNX_WQE_AT(qp, t, w0), KNX_WQE_AT(qp, t + 1, w1),
		      KNX_WQE_AT(qp, t + 2, w2));
	KNX_WQE_PUT(qp, t, w0);
	if (n >= 2)
		KNX_WQE_PUT(qp, t + 1, w1);
	if (n == 3)
		KNX_WQE_PUT(qp, t + 2, w2);
	/* the doorbell rings with the last WQE's first WQEBB (the C build: NULL,
	 * submit copies it from the SQ before publishing) */
	uint32_t lw = n >= 2 && ((span >> (n - 2)) & 1u) ? n - 2 : n - 1;
	knx_sq_submit_span(qp, t, n, span,
			   lw == 0 ? KNX_WQE_OWN(w0) : lw == 1 ? KNX_WQE_OWN(w1) : KNX_WQE_OWN(w2));
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

KN_INLINE int kn_put_signal_op(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
			       uint32_t lkey, uint32_t len, uint64_t sig_raddr, uint32_t sig_rkey,
			       uint64_t value, int sig_op, kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_put_signal_op(&op, raddr, rkey, laddr, lkey, len, sig_raddr, sig_rkey, value, sig_op);
	return kn_post(qp, &op, ticket);
}

KN_INLINE int kn_signal_op(const kn_qp *qp, uint64_t sig_raddr, uint32_t sig_rkey, uint64_t value,
			   int sig_op, kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_signal_op(&op, sig_raddr, sig_rkey, value, sig_op);
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

/* Blocking kn_amo (kn_op_amo, then kn_wait): *old (may be NULL) gets the old
 * remote value (host order, the low `size` bytes). res/res_lkey: `size`
 * registered bytes where the NIC lands the result. 0, -EINVAL (unknown amo
 * or size: nothing posted), -EIO, -ETIMEDOUT. */
KN_INLINE int kn_atomic(const kn_qp *qp, int amo, uint32_t size, uint64_t raddr, uint32_t rkey,
			uint64_t value, uint64_t compare, void *res, uint32_t res_lkey,
			uint64_t *old)
{
	kn_op op;
	kn_ticket_t t;
	kn_op_amo(&op, amo, size, raddr, rkey, value, compare, res, res_lkey);
	int rc = kn_post(qp, &op, &t);
	if (rc)
		return rc;
	rc = kn_wait(qp, t);
	if (rc == 0 && old) {
		KN_FENCE_ACQ();
		if (size == 4)
			*old = kn_be32toh(*(volatile uint32_t *)res);
		else
			*old = kn_be64toh(*(volatile uint64_t *)res);
	}
	return rc;
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
