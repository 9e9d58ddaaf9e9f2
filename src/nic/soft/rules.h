/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rules.h - the software NIC's rules, written once for both engines: the
 * CPU engine (engine.c, wqe.c, keytab.c: cc) and the GPU engine
 * (src/cuda/engine.cu: nvcc) call the same functions.
 *
 *  - kn_rule_region: does a region grant an access to a range (key, PD,
 *    revocation, access flags, bounds, in that order)?
 *  - kn_rule_keyview: the same against the key table's flat view, the copy
 *    of the table the GPU reads (struct kn_keyent, kept by keytab.c).
 *  - kn_rule_qp_access: does the target QP allow a remote access (its
 *    remote_access flags, ibv's qp_access_flags)?
 *  - kn_rule_decode: the format of a send WQE (ctrl, remote address,
 *    atomic operands, gather list), never trusting a byte; the protection
 *    checks of its local segments are the caller's, against its table;
 *    kn_rule_decode_dci: a DCI's, with the address vector naming its DCT.
 *  - kn_rule_db_*: what a doorbell register word names.
 *
 * Pure functions of their arguments (KN_INLINE: host and device code under
 * nvcc, static inline elsewhere); tests/unit/test_rules.c runs them on the
 * host, and the CPU engine's whole suite runs through them.
 */
#ifndef KINET_SOFT_RULES_H
#define KINET_SOFT_RULES_H

#include <stdint.h>
#include <kinet/prm.h>
#include <kinet/kinet.h>

/* A result: a KN_SYND_* syndrome, with the failed check (enum kinet_reason)
 * in bits 16..23 when there is one (soft.h's SOFT_REASON is the same). */
#define KN_RULE(synd, why) ((uint32_t)(synd) | ((uint32_t)(why) << 16))
#define KN_RULE_MAX_SGE 64u
#define KN_RULE_MAX_MSG (1ull << 30) /* largest message (1 GiB) */

/* Does the region [base, base + rlen) with access flags `granted` allow
 * `access` (0: local read) to [addr, addr + len)? known: the key names a
 * live region; pd_ok: it belongs to the caller's PD (or any PD was asked).
 * 0, or the failed check (enum kinet_reason). */
KN_INLINE uint32_t kn_rule_region(int known, int pd_ok, int revoked, unsigned granted,
				  uint64_t base, uint64_t rlen, uint64_t addr, uint64_t len,
				  unsigned access)
{
	if (!known)
		return KINET_REASON_UNKNOWN_KEY;
	if (!pd_ok)
		return KINET_REASON_WRONG_PD;
	if (revoked)
		return KINET_REASON_REVOKED;
	if ((granted & access) != access)
		return KINET_REASON_ACCESS;
	if (addr < base || len > rlen || addr - base > rlen - len)
		return KINET_REASON_OUT_OF_BOUNDS;
	return 0;
}

/* One slot of a key table's view (keytab.c keeps it in memory the GPU can
 * read: written only while no engine runs). key 0: an empty slot. */
struct kn_keyent {
	uint64_t base, len;
	uint64_t gbase;  /* the GPU's address of base; 0: the GPU cannot reach it */
	uint64_t pd;     /* the protection domain's identity */
	uint32_t key;
	uint32_t access; /* KINET_ACCESS_* */
	uint32_t revoked;
	int32_t kind;    /* enum kinet_mem_kind */
};

/* kn_rule_region against one entry e of a view (NULL: no such slot). On
 * success, *gaddr is the GPU's address of addr (0 when unreachable). */
KN_INLINE uint32_t kn_rule_keyent(const struct kn_keyent *e, uint64_t pd, uint32_t key,
				  uint64_t addr, uint64_t len, unsigned access, uint64_t *gaddr)
{
	int known = e && e->key == key;
	uint32_t why = kn_rule_region(known, known && (!pd || e->pd == pd), known && e->revoked,
				      known ? e->access : 0, known ? e->base : 0,
				      known ? e->len : 0, addr, len, access);
	if (why)
		return why;
	*gaddr = e->gbase ? e->gbase + (addr - e->base) : 0;
	return 0;
}

/* The same against a whole view: key = slot << 8 | tag; pd 0: any PD. */
KN_INLINE uint32_t kn_rule_keyview(const struct kn_keyent *v, uint32_t cap, uint64_t pd,
				   uint32_t key, uint64_t addr, uint64_t len, unsigned access,
				   uint64_t *gaddr)
{
	uint32_t i = key >> 8;
	return kn_rule_keyent(i && i < cap ? &v[i] : (const struct kn_keyent *)0, pd, key, addr,
			      len, access, gaddr);
}

/* A decoded send WQE: the format only, nothing checked against a table. */
struct kn_rule_seg {
	uint32_t lkey;
	uint32_t inl; /* inline data: its offset in the WQE (0: a data segment) */
	uint64_t addr, len;
};
struct kn_rule_wqe {
	uint8_t opcode, signaled, atomic_size;
	uint16_t wqe_idx;
	uint32_t ds;      /* 16-byte units */
	uint32_t nbb;     /* WQEBBs (1 when ds is 0) */
	uint32_t imm;     /* wire order */
	uint64_t raddr;
	uint32_t rkey;
	uint64_t swap_add, compare, swap_mask, compare_mask;
	unsigned access;  /* what the local segments need (0: the NIC reads them) */
	uint32_t wait_index, wait_cqn; /* WAIT: the CQE index (24 bits) and its CQ */
	uint32_t dct;     /* a DCI's remote operation: the DCT its address vector names */
	uint64_t dc_key;  /* and the access key it presents (host order) */
	uint32_t nseg;    /* segments decoded before the result (all, on success) */
	uint64_t total;   /* their bytes */
	struct kn_rule_seg seg[KN_RULE_MAX_SGE];
};

/* The ctrl segment: opcode, index, ds, size in WQEBBs. */
KN_INLINE void kn_rule_ctrl(const uint8_t *wqe, struct kn_rule_wqe *d)
{
	const struct kn_wqe_ctrl_seg *c = (const struct kn_wqe_ctrl_seg *)wqe;
	d->ds = kn_be32toh(c->qpn_ds) & 0x3f;
	d->opcode = kn_wqe_opcode_of(c);
	d->wqe_idx = kn_wqe_index_of(c);
	d->signaled = (c->fm_ce_se & 0x0c) >= KN_WQE_CTRL_CQ_UPDATE;
	d->imm = c->imm;
	d->nbb = d->ds ? (d->ds * 16 + 63) / 64 : 1;
	d->nseg = 0;
	d->total = 0;
	d->access = 0;
	d->atomic_size = 0;
	d->raddr = 0;
	d->rkey = 0;
	d->swap_add = d->compare = d->swap_mask = d->compare_mask = 0;
	d->wait_index = d->wait_cqn = 0;
	d->dct = 0;
	d->dc_key = 0;
}

/* Gather list from off to end. */
KN_INLINE uint32_t kn_rule_gather(const uint8_t *wqe, struct kn_rule_wqe *d, uint32_t off,
				  uint32_t end, int allow_inline)
{
	while (off < end) {
		if (d->nseg == KN_RULE_MAX_SGE)
			return KN_RULE(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
		uint32_t bc = kn_load_be32(wqe + off);
		struct kn_rule_seg *s = &d->seg[d->nseg];
		if (bc & KN_INLINE_SEG) {
			uint32_t len = bc & ~KN_INLINE_SEG;
			if (!allow_inline || len > end - off - 4)
				return KN_SYND_LOCAL_QP_OP_ERR;
			s->inl = off + 4;
			s->lkey = 0;
			s->addr = 0;
			s->len = len;
			off += (4 + len + 15) & ~15u;
		} else {
			if (end - off < 16)
				return KN_SYND_LOCAL_QP_OP_ERR;
			s->inl = 0;
			s->lkey = kn_load_be32(wqe + off + 4);
			s->addr = kn_load_be64(wqe + off + 8);
			/* a byte count of 0 means 2^31 bytes (the PRM's data segment) */
			s->len = bc ? bc : 1ull << 31;
			off += 16;
		}
		d->total += s->len;
		d->nseg++;
		if (d->total > KN_RULE_MAX_MSG) /* after this segment's own check */
			return KN_RULE(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
	}
	return 0;
}

/* Masked atomics: ctrl (opmod: the operand size), remote address, operands
 * (16 bytes; 32 for the 8-byte masked compare-and-swap), one data segment
 * of `size` bytes for the old value; h: the bytes of an address vector
 * between ctrl and the rest (a DCI's), 0 otherwise. */
KN_INLINE uint32_t kn_rule_masked(const uint8_t *wqe, struct kn_rule_wqe *d, uint32_t h,
				  uint32_t end)
{
	uint8_t opmod = kn_wqe_opmod_of((const struct kn_wqe_ctrl_seg *)wqe);
	uint32_t size = opmod == KN_OPMOD_EXT_ATOMIC_4 ? 4 : opmod == KN_OPMOD_EXT_ATOMIC_8 ? 8 : 0;
	if (!size)
		return KN_SYND_LOCAL_QP_OP_ERR;
	int cs = d->opcode == KN_OPCODE_ATOMIC_MASKED_CS;
	uint32_t ops = cs && size == 8 ? 32 : 16;
	if (end != h + 32 + ops + 16)
		return KN_SYND_LOCAL_QP_OP_ERR;
	const uint8_t *o = wqe + h + 32;
	d->raddr = kn_load_be64(wqe + h + 16);
	d->rkey = kn_load_be32(wqe + h + 24);
	d->atomic_size = (uint8_t)size;
	if (cs && size == 8) {
		d->swap_add = kn_load_be64(o);
		d->compare = kn_load_be64(o + 8);
		d->swap_mask = kn_load_be64(o + 16);
		d->compare_mask = kn_load_be64(o + 24);
	} else if (cs) {
		d->swap_add = kn_load_be32(o);
		d->compare = kn_load_be32(o + 4);
		d->swap_mask = kn_load_be32(o + 8);
		d->compare_mask = kn_load_be32(o + 12);
	} else if (size == 8) {
		d->swap_add = kn_load_be64(o);
		d->swap_mask = kn_load_be64(o + 8);
		d->compare = d->compare_mask = 0;
	} else {
		d->swap_add = kn_load_be32(o);
		d->swap_mask = kn_load_be32(o + 4);
		d->compare = d->compare_mask = 0;
	}
	uint32_t bc = kn_load_be32(wqe + h + 32 + ops);
	if (bc & KN_INLINE_SEG)
		return KN_SYND_LOCAL_QP_OP_ERR;
	if (bc != size)
		return KN_RULE(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
	d->access = KINET_ACCESS_LOCAL_WRITE;
	return kn_rule_gather(wqe, d, h + 32 + ops, end, 0);
}

/* The remote access an opcode needs (0: none, NOP). */
KN_INLINE unsigned kn_rule_remote_access(uint8_t opcode)
{
	switch (opcode) {
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM:
		return KINET_ACCESS_REMOTE_WRITE;
	case KN_OPCODE_RDMA_READ:
		return KINET_ACCESS_REMOTE_READ;
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA:
	case KN_OPCODE_ATOMIC_MASKED_CS:
	case KN_OPCODE_ATOMIC_MASKED_FA:
		return KINET_ACCESS_REMOTE_ATOMIC;
	default:
		return 0;
	}
}

/* Decodes the whole WQE (nbb WQEBBs, contiguous at wqe) that the consumer
 * index ci of QP qpn names; kn_rule_ctrl ran first. Returns 0, or a result
 * for an error CQE that stands only once the local segments 0 .. nseg - 1
 * passed their checks (a NIC checks them in order: the first failure is
 * the one reported). h: the bytes of an address vector after ctrl (a
 * DCI's remote operation, kn_rule_decode_dci), 0 for an RC QP's WQE. */
KN_INLINE uint32_t kn_rule_decode_at(const uint8_t *wqe, uint16_t ci, uint32_t qpn,
				     struct kn_rule_wqe *d, uint32_t h)
{
	const struct kn_wqe_ctrl_seg *c = (const struct kn_wqe_ctrl_seg *)wqe;
	if (d->ds == 0 || d->wqe_idx != ci || (kn_be32toh(c->qpn_ds) >> 8) != qpn)
		return KN_SYND_LOCAL_QP_OP_ERR;
	uint32_t end = d->ds * 16;
	switch (d->opcode) {
	case KN_OPCODE_NOP:
		return 0;
	case KN_OPCODE_DUMP:
		/* local buffers only, read and discarded: their keys are checked */
		return kn_rule_gather(wqe, d, h + 16, end, 0);
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM:
	case KN_OPCODE_RDMA_READ:
		if (end < h + 32)
			return KN_SYND_LOCAL_QP_OP_ERR;
		d->raddr = kn_load_be64(wqe + h + 16);
		d->rkey = kn_load_be32(wqe + h + 24);
		if (d->opcode == KN_OPCODE_RDMA_READ) {
			d->access = KINET_ACCESS_LOCAL_WRITE;
			return kn_rule_gather(wqe, d, h + 32, end, 0);
		}
		return kn_rule_gather(wqe, d, h + 32, end, 1);
	case KN_OPCODE_SEND:
	case KN_OPCODE_SEND_IMM:
		return kn_rule_gather(wqe, d, h + 16, end, 1);
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA: {
		if (end != h + 64)
			return KN_SYND_LOCAL_QP_OP_ERR;
		d->raddr = kn_load_be64(wqe + h + 16);
		d->rkey = kn_load_be32(wqe + h + 24);
		d->swap_add = kn_load_be64(wqe + h + 32);
		d->compare = kn_load_be64(wqe + h + 40);
		uint32_t bc = kn_load_be32(wqe + h + 48);
		if (bc & KN_INLINE_SEG)
			return KN_SYND_LOCAL_QP_OP_ERR;
		if (bc != 8)
			return KN_RULE(KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH);
		d->access = KINET_ACCESS_LOCAL_WRITE;
		return kn_rule_gather(wqe, d, h + 48, h + 64, 0);
	}
	case KN_OPCODE_ATOMIC_MASKED_CS:
	case KN_OPCODE_ATOMIC_MASKED_FA:
		return kn_rule_masked(wqe, d, h, end);
	case KN_OPCODE_WAIT:
		/* cross-channel WAIT on a CQ (opmod 0; the clock form is the
		 * Ethernet queues'): ctrl, then 8 reserved bytes, the CQE index
		 * (max_index) and the CQ's number. The queue holds until that
		 * CQE of the CQ is written; the caller checks that */
		if (h || kn_wqe_opmod_of(c) != 0 || end != 32)
			return KN_SYND_LOCAL_QP_OP_ERR;
		d->wait_index = kn_load_be32(wqe + 24) & 0xffffff;
		d->wait_cqn = kn_load_be32(wqe + 28) & 0xffffff;
		return 0;
	default:
		return KN_SYND_LOCAL_QP_OP_ERR;
	}
}

/* Does a DCI's WQE of this opcode reach a target, and so carry an address
 * vector (write, read, atomics, send)? Local ones (NOP, DUMP, WAIT) do not. */
KN_INLINE int kn_rule_dc_addressed(uint8_t opcode)
{
	return kn_rule_remote_access(opcode) || opcode == KN_OPCODE_SEND ||
	       opcode == KN_OPCODE_SEND_IMM;
}

/* An RC QP's WQE. */
KN_INLINE uint32_t kn_rule_decode(const uint8_t *wqe, uint16_t ci, uint32_t qpn,
				  struct kn_rule_wqe *d)
{
	return kn_rule_decode_at(wqe, ci, qpn, d, 0);
}

/* A DCI's WQE (dynamically connected transport): an operation that reaches
 * a target (write, read, atomics, send) carries an address vector between
 * ctrl and the rest: the DCT's access key (8 bytes), then dqp_dct (its bit
 * 31: the whole 48-byte vector follows; clear: the 16-byte compact form),
 * whose low 24 bits are the DCT's number. Local operations (NOP, DUMP,
 * WAIT) carry none. d->dct and d->dc_key name the target. */
KN_INLINE uint32_t kn_rule_decode_dci(const uint8_t *wqe, uint16_t ci, uint32_t qpn,
				      struct kn_rule_wqe *d)
{
	uint32_t h = 0;
	if (kn_rule_dc_addressed(d->opcode)) {
		if (d->ds * 16 < 32)
			return KN_RULE(KN_SYND_LOCAL_QP_OP_ERR, KINET_REASON_MALFORMED);
		d->dc_key = kn_load_be64(wqe + 16);
		uint32_t dq = kn_load_be32(wqe + 24);
		d->dct = dq & 0xffffff;
		h = (dq >> 31) ? 48 : 16;
		if (d->ds * 16 < 16 + h)
			return KN_RULE(KN_SYND_LOCAL_QP_OP_ERR, KINET_REASON_MALFORMED);
	}
	return kn_rule_decode_at(wqe, ci, qpn, d, h);
}

/* Does a target QP whose kinet_qp_attr.remote_access is `qp_access` allow
 * the remote access `need` (kn_rule_remote_access)? Without
 * KINET_QP_ACCESS_SET the QP allows every access. 0, or
 * KINET_REASON_QP_ACCESS. Checked before the region (rkey) is. */
KN_INLINE uint32_t kn_rule_qp_access(uint32_t qp_access, unsigned need)
{
	unsigned granted = (qp_access & KINET_QP_ACCESS_SET) ? qp_access : KINET_ACCESS_ALL;
	return (granted & need) == need ? 0 : KINET_REASON_QP_ACCESS;
}

/* ---- doorbells (docs/hardware.md, "Producer conventions") ---------------- */

/* What an 8-byte register word names for QP qpn: -1 another QP's word; 0 a
 * producer index (*p: ds 0, the next index); 1 the ctrl word of the last
 * WQE (*p: the index past its WQEBBs). */
KN_INLINE int kn_rule_db_word(uint64_t w, uint32_t qpn, uint16_t *p)
{
	uint32_t a = (uint32_t)w, c = (uint32_t)(w >> 32); /* little-endian words */
	uint32_t opmod_idx_op = kn_be32toh(a), qpn_ds = kn_be32toh(c);
	if ((qpn_ds >> 8) != qpn)
		return -1;
	uint16_t idx = (uint16_t)(opmod_idx_op >> 8);
	uint32_t ds = qpn_ds & 0x3f;
	if (ds == 0) {
		*p = idx;
		return 0;
	}
	*p = (uint16_t)(idx + (ds * 16 + 63) / 64);
	return 1;
}

/* Offers producer index p to a target (bit 16: valid): kept when it names
 * more WQEBBs beyond the consumer ci than the target does, within cnt. */
KN_INLINE uint32_t kn_rule_db_offer(uint32_t target, uint16_t ci, uint16_t p, uint32_t cnt)
{
	uint32_t d = (uint16_t)(p - ci);
	if (d == 0 || d > cnt)
		return target; /* names nothing new, or not a sane producer */
	if (target & 0x10000u) {
		uint32_t d0 = (uint16_t)((uint16_t)target - ci);
		if (d0 != 0 && d0 <= cnt && d0 > d)
			return target;
	}
	return (uint32_t)p | 0x10000u;
}

/* WQEBBs a target names beyond ci (0: none; the target is then forgotten). */
KN_INLINE uint32_t kn_rule_db_avail(uint32_t *target, uint16_t ci, uint32_t cnt)
{
	if (!(*target & 0x10000u))
		return 0;
	uint32_t d = (uint16_t)((uint16_t)*target - ci);
	if (d == 0 || d > cnt) {
		*target = 0;
		return 0;
	}
	return d;
}

#endif
