/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * geng_exec.h - the GPU engine's per-slot logic, written once for its two
 * executors: the kernel (src/cuda/engine.cu, nvcc) and the host executor
 * (geng_host.c, cc: KINET_GPU_ENGINE=host, the same code on a CPU thread,
 * so that the suites exercise it without a GPU). geng.h has the protocol,
 * rules.h the checks both engines share with the CPU engine.
 *
 * Per slot it serves: the doorbells (kn_gx_published), the decode and the
 * checks of one WQE (kn_gx_plan, with a key cache per take: kn_gx_key),
 * its execution, its CQE (kn_gx_cqe_body, op_own after the fence), and the protocol's loads and
 * give-backs (kn_gx_load_slot, kn_gx_give_back, kn_gx_visit,
 * kn_gx_exit_slot); kn_gx_serve is one pass over one slot. With KINET_TRACE
 * (a slot with a trace ring, geng.h) it writes a record for each WQE it
 * takes and each CQE it writes (kn_gx_trace*); without, that costs one
 * branch per WQE.
 *
 * Written for a warp: `lane` is the caller's lane, lane 0 decides and the
 * lanes copy; on the host there is one lane. The few things that differ
 * are the macros below: the fences, the loads and stores of shared words,
 * the lane exchange, the copy, the atomics, and which memory an atomic may
 * touch (the kernel's atomics are atomic with the CPU's only on GPU memory;
 * the host executor's are the CPU engine's own).
 */
#ifndef KINET_SOFT_GENG_EXEC_H
#define KINET_SOFT_GENG_EXEC_H

#include <stdint.h>
#include <stdbool.h>
#include "nic/soft/rules.h"
#include "nic/soft/geng.h"

#define KN_GX_KEYC 4 /* key entries cached per slot (per take) */

/* A slot as its executor keeps it: loaded at the take, then the live state. */
struct kn_gx_slot {
	struct kn_geng_slot s;
	uint32_t gen;
	uint32_t active;
	uint32_t nkc;
	uint32_t cq_ci;                 /* the CQ consumer's index as last read */
	uint64_t tr_ci;                 /* the trace ring's consumer index as last read */
	uint64_t tr_pub, tr_lost_pub;   /* trace_pi and trace_lost as last published */
	struct kn_keyent kc[KN_GX_KEYC]; /* entries looked up since the take (views do
					  * not change while the slot is taken) */
	uint32_t kcside[KN_GX_KEYC];    /* 0 own view, 1 peer's */
};

/* A slot's doorbell record and register words, read ahead (the kernel reads
 * them with the slot's own word, in the same round trip over PCIe). */
struct kn_gx_db {
	uint32_t dbr;
	uint64_t w0, w1;
};

/* One WQE being executed (a warp's, in shared memory on the GPU). */
#define KN_GX_PRE 32u /* WQEBBs read ahead per pass over a slot (one per lane) */

struct kn_gx_warp {
	uint8_t wqe[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	/* the first KN_GX_PRE published WQEBBs of a pass, read at once: one
	 * round trip for the burst instead of one per WQE */
	uint64_t pre[KN_GX_PRE * (KN_SEND_WQE_BB / 8)];
	/* the op_own words of the burst's signaled WQEs (lane 0), stored after
	 * one fence at the burst's end */
	uint64_t *own_word[KN_GENG_BURST];
	uint64_t own_val[KN_GENG_BURST];
	/* their byte counts and indexes (KINET_TRACE: their CQE records) */
	uint32_t own_len[KN_GENG_BURST];
	uint16_t own_idx[KN_GENG_BURST];
	struct kn_rule_wqe d;
	uint64_t lg[KN_RULE_MAX_SGE]; /* local segments: the executor's addresses */
	uint64_t rg;                  /* remote: the executor's address */
	uint32_t decision;            /* 0 execute, else enum kn_geng_why */
	uint32_t target_host;
};

#ifdef __CUDACC__
#define KN_GX static __device__
#define KN_GX_LANES 32u
#define KN_GX_FENCE() __threadfence_system()
#define KN_GX_SYNC() __syncwarp()
#define KN_GX_SHFL(v, l) __shfl_sync(0xffffffffu, (v), (l))
#define KN_GX_LD32(p) (*(const volatile uint32_t *)(p))
#define KN_GX_LD64(p) (*(const volatile uint64_t *)(p))
#define KN_GX_ST32(p, v) (*(volatile uint32_t *)(p) = (v))
#define KN_GX_ST64(p, v) (*(volatile uint64_t *)(p) = (v))
#define KN_GX_FADD64(p, v) \
	((uint64_t)atomicAdd((unsigned long long *)(p), (unsigned long long)(v)))
#define KN_GX_CAS64(p, c, v) \
	((uint64_t)atomicCAS((unsigned long long *)(p), (unsigned long long)(c), \
			     (unsigned long long)(v)))
#define KN_GX_ATOMIC_KIND_OK(kind) ((kind) == 1 /* KINET_MEM_CUDA */)
/* The engine's clock (the trace's records): the GPU's global timer, ns. */
KN_GX uint64_t kn_gx_now(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
#else
#include <string.h>
#include <time.h>
#define KN_GX static inline __attribute__((unused))
#define KN_GX_LANES 1u
/* __threadfence_system: a full fence */
#define KN_GX_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KN_GX_SYNC() ((void)0)
#define KN_GX_SHFL(v, l) (v)
#define KN_GX_LD32(p) __atomic_load_n((const uint32_t *)(uintptr_t)(p), __ATOMIC_ACQUIRE)
#define KN_GX_LD64(p) __atomic_load_n((const uint64_t *)(uintptr_t)(p), __ATOMIC_ACQUIRE)
#define KN_GX_ST32(p, v) __atomic_store_n((uint32_t *)(uintptr_t)(p), (v), __ATOMIC_RELEASE)
#define KN_GX_ST64(p, v) __atomic_store_n((uint64_t *)(uintptr_t)(p), (v), __ATOMIC_RELEASE)
#define KN_GX_FADD64(p, v) __atomic_fetch_add((uint64_t *)(p), (uint64_t)(v), __ATOMIC_SEQ_CST)
KN_GX uint64_t kn_gx_cas64(uint64_t *p, uint64_t c, uint64_t v)
{
	__atomic_compare_exchange_n(p, &c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return c; /* the old value either way */
}
#define KN_GX_CAS64(p, c, v) kn_gx_cas64((uint64_t *)(p), (c), (v))
#define KN_GX_ATOMIC_KIND_OK(kind) ((void)(kind), 1)
/* The engine's clock (the trace's records): CLOCK_MONOTONIC, ns, the
 * trace's own clock. */
KN_GX uint64_t kn_gx_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

/* A key through the slot's cache (lane 0): 0 or the failed check. */
KN_GX uint32_t kn_gx_key(struct kn_gx_slot *g, int side, uint32_t key, uint64_t addr,
			 uint64_t len, unsigned access, uint64_t *gaddr, int *kind)
{
	const struct kn_keyent *e = 0;
	for (uint32_t i = 0; i < g->nkc; i++)
		if (g->kcside[i] == (uint32_t)side && g->kc[i].key == key) {
			e = &g->kc[i];
			break;
		}
	const struct kn_keyent *view =
		(const struct kn_keyent *)(uintptr_t)(side ? g->s.peer_keys : g->s.keys);
	uint32_t cap = side ? g->s.peer_keys_cap : g->s.keys_cap;
	uint64_t pd = side ? g->s.peer_pd : g->s.pd;
	if (!e) {
		uint32_t i = key >> 8;
		if (!i || i >= cap)
			return KINET_REASON_UNKNOWN_KEY;
		struct kn_keyent tmp;
		const uint64_t *src = (const uint64_t *)&view[i];
		uint64_t *dst = (uint64_t *)&tmp;
		for (unsigned w = 0; w < sizeof(tmp) / 8; w++)
			dst[w] = KN_GX_LD64(&src[w]);
		uint32_t slot = g->nkc < KN_GX_KEYC ? g->nkc++ : (key & (KN_GX_KEYC - 1));
		g->kc[slot] = tmp;
		g->kcside[slot] = (uint32_t)side;
		e = &g->kc[slot];
	}
	uint32_t why = kn_rule_keyent(e, pd, key, addr, len, access, gaddr); /* the shared rule */
	*kind = e->kind;
	return why;
}

/* Hands a slot back (lane 0): the live state into the slot, then own. */
KN_GX void kn_gx_give_back(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g, uint32_t why)
{
	struct kn_geng_slot *h = &ctl->slot[i];
	if (g->active) {
		h->sq_ci = g->s.sq_ci;
		h->cq_pi = g->s.cq_pi;
		h->last_ctrl = g->s.last_ctrl;
		h->last_db_word[0] = g->s.last_db_word[0];
		h->last_db_word[1] = g->s.last_db_word[1];
		h->dbr_seen = g->s.dbr_seen;
		h->dbr_target = g->s.dbr_target;
		h->db_target = g->s.db_target;
		h->n_wqes = g->s.n_wqes;
		h->n_bytes = g->s.n_bytes;
		h->n_cqes = g->s.n_cqes;
		h->n_doorbells = g->s.n_doorbells;
		h->n_moved = g->s.n_moved;
		h->n_db_wqe = g->s.n_db_wqe;
		h->n_db_pi = g->s.n_db_pi;
		h->n_db_foreign = g->s.n_db_foreign;
		h->n_dbr_only = g->s.n_dbr_only;
		h->db_form = g->s.db_form;
		/* the trace's records were written before a fence of the pass
		 * that wrote them (kn_gx_serve) */
		if (g->s.trace_cap) {
			KN_GX_ST64(&h->trace_lost, g->s.trace_lost);
			KN_GX_ST64(&h->trace_pi, g->s.trace_pi);
			g->tr_pub = g->s.trace_pi;
			g->tr_lost_pub = g->s.trace_lost;
		}
		KN_GX_ST64(&h->sq_ci_pub, g->s.sq_ci);
	}
	KN_GX_ST32(&h->why, why);
	KN_GX_FENCE();
	KN_GX_ST32(&h->own, (uint32_t)KN_GOWN_BACK);
	KN_GX_FENCE();
	g->active = 0;
}

/* Doorbells (lane 0): WQEBBs published beyond the consumer, from the
 * doorbell record dbr and the register words w0, w1. */
KN_GX uint32_t kn_gx_published(struct kn_gx_slot *g, uint32_t dbr, uint64_t w0, uint64_t w1)
{
	struct kn_geng_slot *s = &g->s;
	uint16_t ci = (uint16_t)s->sq_ci;
	for (uint32_t b = 0; b < s->nregs; b++) {
		uint64_t w = b ? w1 : w0;
		if (w == s->last_db_word[b])
			continue;
		s->last_db_word[b] = w;
		s->n_doorbells++;
		uint16_t p;
		int k = kn_rule_db_word(w, s->qpn, &p);
		if (k < 0) {
			s->n_db_foreign++;
		} else if (k == 0) {
			s->n_db_pi++;
			s->db_form = KN_GTR_DB_PI;
		} else {
			s->n_db_wqe++;
			if (w != s->last_ctrl)
				s->db_form = KN_GTR_DB_WQE;
		}
		if (k == 0 || (k == 1 && w != s->last_ctrl))
			s->db_target = kn_rule_db_offer(s->db_target, ci, p, s->sq_cnt);
	}
	if (dbr != s->dbr_seen) {
		s->dbr_seen = dbr;
		s->dbr_target = (uint16_t)kn_be32toh(dbr) | 0x10000u;
	}
	uint32_t a = kn_rule_db_avail(&s->dbr_target, ci, s->sq_cnt);
	uint32_t b = kn_rule_db_avail(&s->db_target, ci, s->sq_cnt);
	if (a > b) {
		s->n_dbr_only++; /* found through the record alone */
		s->db_form = KN_GTR_DB_DBR;
	}
	return a > b ? a : b;
}

/* The doorbell record and the register words (only lane 0's *dbr counts).
 * On the GPU three lanes read them side by side: one round trip over PCIe. */
KN_GX void kn_gx_doorbells(const struct kn_gx_slot *g, unsigned lane, uint32_t *dbr,
			   uint64_t *w0, uint64_t *w1)
{
#ifdef __CUDACC__
	uint64_t v = 0;
	if (lane == 0)
		v = KN_GX_LD32((const uint32_t *)(uintptr_t)g->s.dbrec + KN_SND_DBR);
	else if (lane == 1)
		v = KN_GX_LD64(g->s.db0);
	else if (lane == 2 && g->s.nregs > 1)
		v = KN_GX_LD64(g->s.db1);
	*w0 = KN_GX_SHFL(v, 1);
	*w1 = KN_GX_SHFL(v, 2);
	*dbr = (uint32_t)v;
#else
	(void)lane;
	*dbr = KN_GX_LD32((const uint32_t *)(uintptr_t)g->s.dbrec + KN_SND_DBR);
	*w0 = KN_GX_LD64(g->s.db0);
	*w1 = g->s.nregs > 1 ? KN_GX_LD64(g->s.db1) : 0;
#endif
}

/* Decodes and checks the WQE in w->wqe (lane 0): sets w->decision. */
KN_GX void kn_gx_plan(struct kn_gx_slot *g, struct kn_gx_warp *w, uint32_t avail)
{
	struct kn_rule_wqe *d = &w->d;
	w->decision = KN_GWHY_ERROR;
	if (d->nbb > avail)
		return;
	if (kn_rule_decode(w->wqe, (uint16_t)g->s.sq_ci, g->s.qpn, d))
		return; /* the CPU engine writes its error CQE */
	if (g->s.fault_ops & (1u << (d->opcode & 31))) {
		w->decision = KN_GWHY_FAULT; /* KINET_FAULT: the CPU engine's rules */
		return;
	}
	switch (d->opcode) {
	case KN_OPCODE_NOP:
	case KN_OPCODE_DUMP:
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_READ:
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA:
		break;
	default:
		w->decision = KN_GWHY_OP;
		return;
	}
	int kind;
	for (uint32_t i = 0; i < d->nseg; i++) {
		const struct kn_rule_seg *s = &d->seg[i];
		if (s->inl) {
			w->lg[i] = (uint64_t)(uintptr_t)(w->wqe + s->inl);
			continue;
		}
		if (s->len == 0) {
			w->lg[i] = 0;
			continue;
		}
		if (kn_gx_key(g, 0, s->lkey, s->addr, s->len, d->access, &w->lg[i], &kind))
			return;
		if (!w->lg[i]) {
			w->decision = KN_GWHY_HOST_MEM;
			return;
		}
	}
	if (d->opcode != KN_OPCODE_NOP && d->opcode != KN_OPCODE_DUMP) {
		bool atomic = d->opcode == KN_OPCODE_ATOMIC_CS || d->opcode == KN_OPCODE_ATOMIC_FA;
		uint64_t len = atomic ? 8 : d->total;
		if (atomic && (d->raddr & 7))
			return;
		if (kn_rule_qp_access(g->s.peer_access, kn_rule_remote_access(d->opcode)))
			return; /* the target QP refuses it: the CPU engine's error CQE */
		if (len == 0) {
			w->rg = 0;
		} else {
			if (kn_gx_key(g, 1, d->rkey, d->raddr, len, kn_rule_remote_access(d->opcode),
				      &w->rg, &kind))
				return;
			if (!w->rg) {
				w->decision = KN_GWHY_HOST_MEM;
				return;
			}
			if (atomic && !KN_GX_ATOMIC_KIND_OK(kind)) {
				w->decision = KN_GWHY_HOST_ATOMIC;
				return;
			}
		}
	}
	w->decision = 0;
}

/* Copies n bytes with the lanes. */
KN_GX void kn_gx_copy(uint64_t dst, uint64_t src, uint64_t n, unsigned lane)
{
#ifdef __CUDACC__
	if (((dst | src) & 15) == 0) {
		uint64_t nv = n / 16;
		uint4 *d = (uint4 *)dst;
		const uint4 *s = (const uint4 *)src;
		for (uint64_t i = lane; i < nv; i += 32)
			d[i] = s[i];
		for (uint64_t i = nv * 16 + lane; i < n; i += 32)
			((uint8_t *)dst)[i] = ((const uint8_t *)src)[i];
	} else if (((dst | src) & 7) == 0) {
		uint64_t nv = n / 8;
		for (uint64_t i = lane; i < nv; i += 32)
			((uint64_t *)dst)[i] = ((const uint64_t *)src)[i];
		for (uint64_t i = nv * 8 + lane; i < n; i += 32)
			((uint8_t *)dst)[i] = ((const uint8_t *)src)[i];
	} else {
		for (uint64_t i = lane; i < n; i += 32)
			((uint8_t *)dst)[i] = ((const uint8_t *)src)[i];
	}
#else
	(void)lane;
	if (n)
		memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
#endif
}

/* Executes the planned WQE with the lanes. */
KN_GX void kn_gx_execute(struct kn_gx_warp *w, unsigned lane)
{
	struct kn_rule_wqe *d = &w->d;
	switch (d->opcode) {
	case KN_OPCODE_RDMA_WRITE: {
		uint64_t off = 0;
		for (uint32_t i = 0; i < d->nseg; i++) {
			kn_gx_copy(w->rg + off, w->lg[i], d->seg[i].len, lane);
			off += d->seg[i].len;
		}
		break;
	}
	case KN_OPCODE_RDMA_READ: {
		uint64_t off = 0;
		for (uint32_t i = 0; i < d->nseg; i++) {
			kn_gx_copy(w->lg[i], w->rg + off, d->seg[i].len, lane);
			off += d->seg[i].len;
		}
		break;
	}
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA:
		if (lane == 0) {
			uint64_t old = d->opcode == KN_OPCODE_ATOMIC_FA
					       ? KN_GX_FADD64(w->rg, d->swap_add)
					       : KN_GX_CAS64(w->rg, d->compare, d->swap_add);
			uint64_t be = kn_htobe64(old); /* the NIC returns big-endian */
			const uint8_t *b = (const uint8_t *)&be;
			uint64_t off = 0;
			for (uint32_t i = 0; i < d->nseg; i++)
				for (uint64_t k = 0; k < d->seg[i].len && off < 8; k++)
					((uint8_t *)(uintptr_t)w->lg[i])[k] = b[off++];
		}
		break;
	default:
		break;
	}
}

/* The success CQE of the WQE being executed (lane 0), in two steps: its
 * body (words 0 to 6, while the lanes move the payload: the slot is free
 * and its owner bit still says so), then, after the fence that also orders
 * the payload, its last word with op_own. Returns that word's address and
 * value. */
KN_GX uint64_t *kn_gx_cqe_body(struct kn_geng_slot *s, const struct kn_rule_wqe *d,
			       uint64_t *last)
{
	uint64_t idx = s->cq_pi++;
	uint32_t cnt = s->cq_cnt;
	struct kn_cqe64 c;
	uint64_t *cw = (uint64_t *)&c;
	for (int k = 0; k < 8; k++)
		cw[k] = 0;
	c.byte_cnt = kn_htobe32((uint32_t)d->total);
	c.sop_drop_qpn = kn_htobe32(((uint32_t)d->opcode << 24) | s->qpn);
	c.wqe_counter = kn_htobe16(d->wqe_idx);
	c.op_own = (uint8_t)((KN_CQE_REQ << 4) | ((idx / cnt) & 1));
	uint64_t *dst = (uint64_t *)(uintptr_t)(s->cq + (idx & (cnt - 1)) * KN_CQE_SIZE);
	for (int k = 0; k < 7; k++)
		KN_GX_ST64(&dst[k], cw[k]);
	s->n_cqes++;
	*last = cw[7];
	return &dst[7];
}

/* Appends a record to the slot's trace ring (lane 0), or counts it lost
 * when the ring is full as the CPU last said: the engine never waits for
 * the CPU's drain. Published by kn_gx_trace_pub, after a fence. */
KN_GX void kn_gx_trace(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g,
			const struct kn_geng_trec *r)
{
	struct kn_geng_slot *s = &g->s;
	if (s->trace_pi - g->tr_ci >= s->trace_cap) {
		/* full as last seen: read the consumer's index again (only then:
		 * a round trip over PCIe) */
		g->tr_ci = KN_GX_LD64(&ctl->slot[i].trace_ci);
		if (s->trace_pi - g->tr_ci >= s->trace_cap) {
			s->trace_lost++;
			return;
		}
	}
	uint64_t *dst = (uint64_t *)(uintptr_t)(s->trace + (s->trace_pi & (s->trace_cap - 1)) *
								 sizeof(struct kn_geng_trec));
	const uint64_t *src = (const uint64_t *)r;
	for (unsigned k = 0; k < sizeof(*r) / 8; k++)
		KN_GX_ST64(&dst[k], src[k]);
	s->trace_pi++;
}

/* The record of the WQE just planned (lane 0), taken at time t. */
KN_GX void kn_gx_trace_wqe(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g,
			   const struct kn_gx_warp *w, uint64_t t)
{
	const struct kn_rule_wqe *d = &w->d;
	struct kn_geng_trec r;
	uint64_t *rw = (uint64_t *)&r;
	for (unsigned k = 0; k < sizeof(r) / 8; k++)
		rw[k] = 0;
	r.t = t;
	r.type = KN_GTR_WQE;
	r.opcode = d->opcode;
	r.wqe_idx = (uint16_t)g->s.sq_ci;
	r.len = (uint32_t)d->total;
	/* as the CPU engine: the first data segment's key, none for inline
	 * data; the remote key of the opcodes that have one */
	if (d->nseg && !d->seg[0].inl)
		r.lkey = d->seg[0].lkey;
	if (d->opcode == KN_OPCODE_RDMA_WRITE || d->opcode == KN_OPCODE_RDMA_READ ||
	    d->opcode == KN_OPCODE_ATOMIC_CS || d->opcode == KN_OPCODE_ATOMIC_FA)
		r.rkey = d->rkey;
	r.db_form = (uint8_t)g->s.db_form;
	kn_gx_trace(ctl, i, g, &r);
}

/* The records of the burst's first n CQEs (lane 0), written now: before
 * the fence that precedes their op_own words. */
KN_GX void kn_gx_trace_cqes(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g,
			    const struct kn_gx_warp *w, uint32_t n)
{
	if (!n)
		return;
	struct kn_geng_trec r;
	uint64_t *rw = (uint64_t *)&r;
	for (unsigned k = 0; k < sizeof(r) / 8; k++)
		rw[k] = 0;
	r.t = kn_gx_now();
	r.type = KN_GTR_CQE;
	r.opcode = KN_CQE_REQ;
	for (uint32_t j = 0; j < n; j++) {
		r.len = w->own_len[j];
		r.wqe_idx = w->own_idx[j];
		kn_gx_trace(ctl, i, g, &r);
	}
}

/* Whether the slot has trace records or losses to publish (lane 0). */
KN_GX uint32_t kn_gx_trace_due(const struct kn_gx_slot *g)
{
	return g->s.trace_cap &&
	       (g->s.trace_pi != g->tr_pub || g->s.trace_lost != g->tr_lost_pub);
}

/* Publishes the ring's producer index and the losses (lane 0), after a
 * fence that ordered the records. */
KN_GX void kn_gx_trace_pub(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g)
{
	KN_GX_ST64(&ctl->slot[i].trace_lost, g->s.trace_lost);
	KN_GX_ST64(&ctl->slot[i].trace_pi, g->s.trace_pi);
	g->tr_pub = g->s.trace_pi;
	g->tr_lost_pub = g->s.trace_lost;
}

/* One pass over slot i (all lanes): the amount of work done. pre: the
 * slot's doorbells as read with its own word this pass (NULL: read here). */
KN_GX int kn_gx_serve(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g, struct kn_gx_warp *w,
		      unsigned lane, const struct kn_gx_db *pre)
{
	uint32_t dbr;
	uint64_t w0, w1;
	if (pre) {
		dbr = pre->dbr;
		w0 = pre->w0;
		w1 = pre->w1;
	} else {
		kn_gx_doorbells(g, lane, &dbr, &w0, &w1);
	}
	uint32_t avail = 0;
	if (lane == 0)
		avail = kn_gx_published(g, dbr, w0, w1);
	avail = KN_GX_SHFL(avail, 0);
	if (!avail)
		return 0;
	int work = 0;
	KN_GX_FENCE(); /* the WQEs after the doorbell that published them */
	uint32_t mask = g->s.sq_cnt - 1;
	const uint64_t *sq = (const uint64_t *)(uintptr_t)g->s.sq;
	/* read ahead: WQEBB b of the burst by lane b, all in one round trip */
	uint64_t base = g->s.sq_ci;
	uint32_t npre = avail < KN_GX_PRE ? avail : KN_GX_PRE;
	for (uint32_t b = lane; b < npre; b += KN_GX_LANES)
		for (uint32_t k = 0; k < 8; k++)
			w->pre[b * 8 + k] = KN_GX_LD64(sq + ((base + b) & mask) * 8 + k);
	KN_GX_SYNC();
	uint32_t npend = 0; /* lane 0: signaled WQEs whose op_own waits */
	for (int n = 0; n < KN_GENG_BURST && avail; n++) {
		uint32_t go = 1;
		if (lane == 0 && !g->s.cq_ignore_overrun &&
		    (((uint32_t)g->s.cq_pi - g->cq_ci) & 0xffffff) >= g->s.cq_cnt) {
			/* full as last seen: read the consumer's index again (only
			 * then: a round trip over PCIe) */
			g->cq_ci = kn_be32toh(KN_GX_LD32(g->s.cq_dbrec)) & 0xffffff;
			if ((((uint32_t)g->s.cq_pi - g->cq_ci) & 0xffffff) >= g->s.cq_cnt)
				go = 0; /* the CQ is full: wait for the consumer */
		}
		if (!KN_GX_SHFL(go, 0))
			break;
		uint64_t off = g->s.sq_ci - base; /* WQEBBs of the burst consumed */
		/* the first WQEBB, 8 bytes a lane: read ahead, or read now */
		for (uint32_t k = lane; k < 8; k += KN_GX_LANES)
			((uint64_t *)w->wqe)[k] =
				off < npre ? w->pre[off * 8 + k]
					   : KN_GX_LD64(sq + (g->s.sq_ci & mask) * 8 + k);
		KN_GX_SYNC();
		uint32_t nbb = 0;
		if (lane == 0) {
			kn_rule_ctrl(w->wqe, &w->d);
			nbb = w->d.nbb <= avail ? w->d.nbb : 0;
		}
		nbb = KN_GX_SHFL(nbb, 0);
		for (uint32_t k = lane + 8; k < nbb * 8; k += KN_GX_LANES) {
			uint64_t bb = off + k / 8;
			((uint64_t *)w->wqe)[k] =
				bb < npre ? w->pre[bb * 8 + (k & 7)]
					  : KN_GX_LD64(sq + ((g->s.sq_ci + k / 8) & mask) * 8 + (k & 7));
		}
		KN_GX_SYNC();
		if (lane == 0)
			kn_gx_plan(g, w, avail);
		KN_GX_SYNC();
		uint32_t dec = w->decision;
		if (dec) {
			if (lane == 0 && g->s.trace_cap)
				kn_gx_trace_cqes(ctl, i, g, w, npend);
			/* the payloads of unsignaled WQEs and the burst's CQE bodies
			 * (and trace records) before their op_own words, and all of
			 * it before the CPU engine's next CQE */
			KN_GX_FENCE();
			KN_GX_SYNC();
			if (lane == 0) {
				for (uint32_t j = 0; j < npend; j++)
					KN_GX_ST64(w->own_word[j], w->own_val[j]);
				if (npend)
					KN_GX_FENCE();
				kn_gx_give_back(ctl, i, g, dec);
			}
			KN_GX_SYNC();
			return work + 1;
		}
		if (lane == 0 && g->s.trace_cap) {
			kn_gx_trace_wqe(ctl, i, g, w, kn_gx_now());
			w->own_len[npend] = (uint32_t)w->d.total;
			w->own_idx[npend] = w->d.wqe_idx;
		}
		if (lane == 0 && w->d.signaled) {
			w->own_word[npend] = kn_gx_cqe_body(&g->s, &w->d, &w->own_val[npend]);
			npend++;
		}
		kn_gx_execute(w, lane);
		if (lane == 0) {
			g->s.last_ctrl = ((const uint64_t *)w->wqe)[0];
			g->s.sq_ci += w->d.nbb;
			g->s.n_wqes++;
			g->s.n_bytes += w->d.total;
			if (w->d.opcode == KN_OPCODE_RDMA_WRITE || w->d.opcode == KN_OPCODE_RDMA_READ)
				g->s.n_moved += w->d.total;
		}
		KN_GX_SYNC();
		avail -= w->d.nbb;
		work++;
	}
	/* every lane's payloads and the CQE bodies before the op_own words: one
	 * fence for the burst (an unsignaled WQE's payload is ordered by the
	 * fence of a later signaled one, or of the give-back) */
	npend = KN_GX_SHFL(npend, 0);
	uint32_t tdue = 0; /* trace records (KINET_TRACE): ordered by the same fence */
	if (g->s.trace_cap) { /* the same for every lane: set at the take */
		if (lane == 0) {
			kn_gx_trace_cqes(ctl, i, g, w, npend);
			tdue = kn_gx_trace_due(g);
		}
		tdue = KN_GX_SHFL(tdue, 0);
	}
	if (npend || tdue) {
		KN_GX_FENCE();
		KN_GX_SYNC();
		if (lane == 0) {
			for (uint32_t j = 0; j < npend; j++)
				KN_GX_ST64(w->own_word[j], w->own_val[j]);
			if (tdue)
				kn_gx_trace_pub(ctl, i, g);
		}
	}
	if (lane == 0 && work)
		KN_GX_ST64(&ctl->slot[i].sq_ci_pub, g->s.sq_ci);
	return work;
}

/* Loads a slot the CPU just handed over (lane 0). A slot stays loaded
 * (active) until its executor gives it back: the CPU takes a slot only from
 * the executor (STOP, then BACK), so an active slot was not taken again. */
KN_GX void kn_gx_load_slot(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g)
{
	if (g->active)
		return;
	KN_GX_FENCE();
	uint32_t gen = KN_GX_LD32(&ctl->slot[i].gen);
	const uint64_t *src = (const uint64_t *)(uintptr_t)&ctl->slot[i];
	uint64_t *dst = (uint64_t *)&g->s;
	for (unsigned k = 0; k < sizeof(g->s) / 8; k++)
		dst[k] = KN_GX_LD64(&src[k]);
	g->gen = gen;
	g->active = 1;
	g->nkc = 0;
	g->cq_ci = kn_be32toh(KN_GX_LD32(g->s.cq_dbrec)) & 0xffffff;
	g->tr_ci = g->s.trace_ci;
	g->tr_pub = g->s.trace_pi;
	g->tr_lost_pub = g->s.trace_lost;
}

/* A slot whose own word (ko) says the executor has it, GPU or STOP (all
 * lanes): loads it, gives it back when asked, else serves it. */
KN_GX int kn_gx_visit(struct kn_geng_ctl *ctl, int k, struct kn_gx_slot *g, uint32_t ko,
		      struct kn_gx_warp *w, unsigned lane, const struct kn_gx_db *pre)
{
	if (ko == KN_GOWN_STOP) {
		KN_GX_FENCE(); /* the lanes' unsignaled payloads before the BACK */
		KN_GX_SYNC();
	}
	bool loaded = true;
	if (lane == 0) {
		loaded = g->active != 0;
		kn_gx_load_slot(ctl, k, g);
		if (ko == KN_GOWN_STOP)
			kn_gx_give_back(ctl, k, g, KN_GWHY_ASKED);
	}
	KN_GX_SYNC();
	if (ko == KN_GOWN_STOP)
		return 1;
	/* doorbells read ahead count only for a slot loaded before them */
	loaded = KN_GX_SHFL(loaded ? 1u : 0u, 0) != 0;
	return kn_gx_serve(ctl, k, g, w, lane, loaded ? pre : 0);
}

/* The executor's exit, after running is 0: a slot it has goes back (a take
 * that raced with the exit sees running 0 and waits for this). */
KN_GX void kn_gx_exit_slot(struct kn_geng_ctl *ctl, int i, struct kn_gx_slot *g)
{
	uint32_t own = KN_GX_LD32(&ctl->slot[i].own);
	if (own == KN_GOWN_GPU || own == KN_GOWN_STOP) {
		KN_GX_FENCE();
		if (g->active && g->gen != KN_GX_LD32(&ctl->slot[i].gen))
			g->active = 0; /* taken again, never loaded: its state stands */
		kn_gx_give_back(ctl, i, g, own == KN_GOWN_STOP ? KN_GWHY_ASKED : KN_GWHY_IDLE);
	}
}

#endif
