/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Protection and error semantics of the software NIC. Each case posts two
 * good writes, then one bad WQE through the device API, then five good
 * writes, and checks:
 *  - the good writes before it landed; the bad one gets an error CQE with
 *    the expected syndrome, kn_wait -> -EIO, kn_qp_error() -> syndrome;
 *  - every later WQE completes with WR_FLUSH_ERR and the QP is in ERR;
 *  - responder-side cases: the receive CQE's syndrome, the target QP in
 *    ERR, its other posted receives flushed;
 *  - nothing changed in any region except the two good writes (every
 *    region has canaries next to its edges and guard pages beyond);
 *  - counters; and the QPs are usable again after RESET -> RTS.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define RLEN 65536
#define NREG 9

struct penv {
	struct tu_pair p;
	kinet_pd *pd2;
	union {
		struct {
			struct tu_region src;      /* LOCAL_WRITE */
			struct tu_region dst;      /* every access */
			struct tu_region lonly;    /* LOCAL_WRITE, nothing remote */
			struct tu_region rdonly;   /* REMOTE_READ only (no local write) */
			struct tu_region noatomic; /* local write, remote read and write */
			struct tu_region rbuf;     /* receive buffers */
			struct tu_region other;    /* every access, but in another PD */
			struct tu_region gone;     /* every access, deregistered */
			struct tu_region res;      /* LOCAL_WRITE: atomic results */
		};
		struct tu_region reg[NREG];
	};
	uint8_t *orig[NREG];
	uint32_t gone_key;
	kn_ticket_t rt[2]; /* receives posted on b, when the case wants them */
	int with_recv;
};

static void penv_open(struct penv *e, uint32_t rnr_retry)
{
	memset(e, 0, sizeof(*e));
	struct kinet_qp_attr at = {.sq_depth = 16, .rq_depth = 4, .rnr_retry = rnr_retry};
	cr_assert_eq(tu_pair_open(&e->p, &at), 0);
	cr_assert_eq(kinet_pd_alloc(e->p.ctx, &e->pd2), 0);
	const unsigned acc[NREG] = {
		KINET_ACCESS_LOCAL_WRITE,
		KINET_ACCESS_ALL,
		KINET_ACCESS_LOCAL_WRITE,
		KINET_ACCESS_REMOTE_READ,
		KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE | KINET_ACCESS_REMOTE_READ,
		KINET_ACCESS_LOCAL_WRITE,
		KINET_ACCESS_ALL,
		KINET_ACCESS_ALL,
		KINET_ACCESS_LOCAL_WRITE,
	};
	for (int i = 0; i < NREG; i++) {
		kinet_pd *pd = (&e->reg[i] == &e->other) ? e->pd2 : e->p.pd;
		cr_assert_eq(tu_region_alloc(&e->reg[i], pd, RLEN, acc[i], 100 + (uint64_t)i), 0);
		e->orig[i] = malloc(RLEN);
		cr_assert(e->orig[i]);
		memcpy(e->orig[i], e->reg[i].buf, RLEN);
	}
	e->gone_key = tu_lkey(&e->gone);
	cr_assert_eq(kinet_mr_dereg(e->gone.mr), 0);
	e->gone.mr = NULL;
	tu_fail_msg[0] = 0;
}

static void penv_close(struct penv *e)
{
	for (int i = 0; i < NREG; i++) {
		cr_assert(tu_region_canaries_ok(&e->reg[i]), "canary of region %d changed", i);
		tu_region_free(&e->reg[i]);
		free(e->orig[i]);
	}
	cr_assert_eq(kinet_pd_free(e->pd2), 0);
	tu_pair_close(&e->p);
}

#define A(e) ((e)->p.da)
#define RK(r) kinet_mr_rkey((r).mr)

/* ---- the bad WQEs ------------------------------------------------------------- */

typedef int (*bad_fn)(struct penv *e, kn_ticket_t *t);

static int post_write(struct penv *e, uint64_t laddr, uint32_t lkey, uint64_t raddr,
		      uint32_t rkey, uint32_t len, kn_ticket_t *t)
{
	return kn_put(A(e), raddr, rkey, (const void *)(uintptr_t)laddr, lkey, len, t);
}

static int post_read(struct penv *e, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		     uint32_t len, kn_ticket_t *t)
{
	return kn_get(A(e), (void *)(uintptr_t)laddr, lkey, raddr, rkey, len, t);
}

static int post_fa(struct penv *e, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		   kn_ticket_t *t)
{
	kn_qp *q = A(e);
	int rc = kn_sq_reserve(q, 1, t);
	if (rc)
		return rc;
	kn_prep_atomic_fa(q, kn_wqe_ptr(q, *t), *t, laddr, lkey, raddr, rkey, 0x1111);
	kn_sq_submit(q, *t, 1);
	return 0;
}

static int post_cs(struct penv *e, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		   kn_ticket_t *t)
{
	kn_qp *q = A(e);
	int rc = kn_sq_reserve(q, 1, t);
	if (rc)
		return rc;
	/* compare with the current value: it would swap if allowed */
	uint64_t cur = 0;
	if (raddr >= tu_addr(e->dst.buf) && raddr + 8 <= tu_addr(e->dst.buf + RLEN))
		memcpy(&cur, (void *)(uintptr_t)raddr, 8);
	kn_prep_atomic_cs(q, kn_wqe_ptr(q, *t), *t, laddr, lkey, raddr, rkey, cur, ~cur);
	kn_sq_submit(q, *t, 1);
	return 0;
}

static int post_send(struct penv *e, uint32_t len, kn_ticket_t *t)
{
	kn_qp *q = A(e);
	int rc = kn_sq_reserve(q, 1, t);
	if (rc)
		return rc;
	kn_prep_send(q, kn_wqe_ptr(q, *t), *t, tu_addr(e->src.buf), tu_lkey(&e->src), len, 0, 0);
	kn_sq_submit(q, *t, 1);
	return 0;
}

/* A valid write WQE, changed by `mutate` before it is published. */
static int post_mutated(struct penv *e, void (*mutate)(struct penv *, uint8_t *, kn_ticket_t),
			kn_ticket_t *t)
{
	kn_qp *q = A(e);
	int rc = kn_sq_reserve(q, 1, t);
	if (rc)
		return rc;
	uint8_t *w = kn_wqe_ptr(q, *t);
	kn_prep_write(q, w, *t, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf + 1000),
		      RK(e->dst), 100);
	mutate(e, w, *t);
	kn_sq_submit(q, *t, 1);
	return 0;
}

static void set_ctrl(uint8_t *w, kn_ticket_t idx, uint8_t opcode, uint32_t qpn, uint8_t ds)
{
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)idx, opcode, 0, qpn,
			KN_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
}

static void m_opcode07(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, 0x07, A(e)->qpn, 3);
}
static void m_opcode_send_inval(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, KN_OPCODE_SEND_INVAL, A(e)->qpn, 3);
}
static void m_opcode_ff(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, 0xff, A(e)->qpn, 3);
}
static void m_ds0(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, KN_OPCODE_RDMA_WRITE, A(e)->qpn, 0);
}
static void m_ds1_write(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, KN_OPCODE_RDMA_WRITE, A(e)->qpn, 1);
}
static void m_ds3_atomic(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, KN_OPCODE_ATOMIC_FA, A(e)->qpn, 3);
}
static void m_index(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t + 1, KN_OPCODE_RDMA_WRITE, A(e)->qpn, 3);
}
static void m_index_wrapped(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	/* right slot, wrong lap */
	set_ctrl(w, t + A(e)->sq_wqe_cnt, KN_OPCODE_RDMA_WRITE, A(e)->qpn, 3);
}
static void m_qpn(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	set_ctrl(w, t, KN_OPCODE_RDMA_WRITE, kinet_qp_num(e->p.b), 3);
}
static void m_inline_too_long(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	/* an inline segment claiming more bytes than the WQE holds */
	*(uint32_t *)(w + 32) = kn_htobe32(200 | KN_INLINE_SEG);
	set_ctrl(w, t, KN_OPCODE_RDMA_WRITE, A(e)->qpn, 4);
}
static void m_atomic_len(struct penv *e, uint8_t *w, kn_ticket_t t)
{
	kn_prep_atomic_fa(A(e), w, t, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->dst.buf),
			  RK(e->dst), 1);
	*(uint32_t *)(w + 48) = kn_htobe32(4); /* result of 4 bytes */
}

#define MUT(name, fn) \
	static int name(struct penv *e, kn_ticket_t *t) { return post_mutated(e, fn, t); }
MUT(b_opcode07, m_opcode07)
MUT(b_opcode_send_inval, m_opcode_send_inval)
MUT(b_opcode_ff, m_opcode_ff)
MUT(b_ds0, m_ds0)
MUT(b_ds1_write, m_ds1_write)
MUT(b_ds3_atomic, m_ds3_atomic)
MUT(b_index, m_index)
MUT(b_index_wrapped, m_index_wrapped)
MUT(b_qpn, m_qpn)
MUT(b_inline_too_long, m_inline_too_long)
MUT(b_atomic_len, m_atomic_len)

/* local side */
static int b_bad_lkey(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src) ^ 0x5500, tu_addr(e->dst.buf),
			  RK(e->dst), 64, t);
}
static int b_invalid_lkey(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), 0x100, tu_addr(e->dst.buf), RK(e->dst), 64, t);
}
static int b_lkey_tag(struct penv *e, kn_ticket_t *t)
{
	/* right index, wrong tag */
	uint32_t k = tu_lkey(&e->src), tag = k & 0xff;
	uint32_t other = tag == 0xff ? 1 : tag + 1;
	return post_write(e, tu_addr(e->src.buf), (k & ~0xffu) | other, tu_addr(e->dst.buf),
			  RK(e->dst), 64, t);
}
static int b_local_before(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf) - 1, tu_lkey(&e->src), tu_addr(e->dst.buf),
			  RK(e->dst), 64, t);
}
static int b_local_after(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf + RLEN - 63), tu_lkey(&e->src), tu_addr(e->dst.buf),
			  RK(e->dst), 64, t);
}
static int b_local_huge(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf), RK(e->dst),
			  0x7fffffff, t);
}
static int b_read_into_readonly(struct penv *e, kn_ticket_t *t)
{
	/* READ lands in a region without LOCAL_WRITE */
	return post_read(e, tu_addr(e->rdonly.buf), tu_lkey(&e->rdonly), tu_addr(e->dst.buf),
			 RK(e->dst), 256, t);
}
static int b_read_past_local_end(struct penv *e, kn_ticket_t *t)
{
	return post_read(e, tu_addr(e->res.buf + RLEN - 100), tu_lkey(&e->res), tu_addr(e->dst.buf),
			 RK(e->dst), 101, t);
}
static int b_atomic_result_readonly(struct penv *e, kn_ticket_t *t)
{
	return post_fa(e, tu_addr(e->rdonly.buf), tu_lkey(&e->rdonly), tu_addr(e->dst.buf + 64),
		       RK(e->dst), t);
}
static int b_atomic_result_out(struct penv *e, kn_ticket_t *t)
{
	return post_cs(e, tu_addr(e->res.buf + RLEN - 4), tu_lkey(&e->res), tu_addr(e->dst.buf + 64),
		       RK(e->dst), t);
}
static int b_lkey_other_pd(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->other.buf), tu_lkey(&e->other), tu_addr(e->dst.buf),
			  RK(e->dst), 64, t);
}
static int b_lkey_deregistered(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->gone.buf), e->gone_key, tu_addr(e->dst.buf), RK(e->dst), 64,
			  t);
}
static int b_read_lkey_deregistered(struct penv *e, kn_ticket_t *t)
{
	return post_read(e, tu_addr(e->gone.buf), e->gone_key, tu_addr(e->dst.buf), RK(e->dst), 64,
			 t);
}

/* remote side */
static int b_bad_rkey(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf),
			  RK(e->dst) ^ 0x3300, 64, t);
}
static int b_rkey_past_end(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf + RLEN - 99),
			  RK(e->dst), 100, t);
}
static int b_rkey_before(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf) - 1,
			  RK(e->dst), 100, t);
}
static int b_rkey_wrap(struct penv *e, kn_ticket_t *t)
{
	/* an address whose end wraps around 2^64 */
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), UINT64_MAX - 10, RK(e->dst), 64,
			  t);
}
static int b_read_past_end(struct penv *e, kn_ticket_t *t)
{
	return post_read(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->dst.buf + RLEN - 10),
			 RK(e->dst), 11, t);
}
static int b_no_remote_write(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->rdonly.buf),
			  RK(e->rdonly), 64, t);
}
static int b_no_remote_write_local_only(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->lonly.buf),
			  RK(e->lonly), 64, t);
}
static int b_no_remote_read(struct penv *e, kn_ticket_t *t)
{
	return post_read(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->lonly.buf),
			 RK(e->lonly), 64, t);
}
static int b_no_remote_atomic(struct penv *e, kn_ticket_t *t)
{
	return post_fa(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->noatomic.buf + 8),
		       RK(e->noatomic), t);
}
static int b_cs_no_remote_atomic(struct penv *e, kn_ticket_t *t)
{
	return post_cs(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->noatomic.buf + 8),
		       RK(e->noatomic), t);
}
static int b_atomic_past_end(struct penv *e, kn_ticket_t *t)
{
	return post_fa(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->dst.buf + RLEN),
		       RK(e->dst), t);
}
static int b_rkey_other_pd(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->other.buf),
			  RK(e->other), 64, t);
}
static int b_rkey_deregistered(struct penv *e, kn_ticket_t *t)
{
	return post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->gone.buf),
			  e->gone_key, 64, t);
}
static int b_atomic_misaligned(struct penv *e, kn_ticket_t *t)
{
	return post_fa(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->dst.buf + 12),
		       RK(e->dst), t);
}
static int b_cs_misaligned(struct penv *e, kn_ticket_t *t)
{
	return post_cs(e, tu_addr(e->res.buf), tu_lkey(&e->res), tu_addr(e->dst.buf + 1), RK(e->dst),
		       t);
}

/* receive side */
static int b_send_too_long(struct penv *e, kn_ticket_t *t)
{
	/* the first receive buffer is 1000 bytes */
	return post_send(e, 1001, t);
}
static int b_send_bad_recv_lkey(struct penv *e, kn_ticket_t *t)
{
	return post_send(e, 100, t);
}
static int b_rnr(struct penv *e, kn_ticket_t *t)
{
	return post_send(e, 100, t); /* no receive posted */
}
static int b_write_imm_rnr(struct penv *e, kn_ticket_t *t)
{
	kn_qp *q = A(e);
	int rc = kn_sq_reserve(q, 1, t);
	if (rc)
		return rc;
	kn_prep_write_imm(q, kn_wqe_ptr(q, *t), *t, tu_addr(e->src.buf), tu_lkey(&e->src),
			  tu_addr(e->dst.buf + 5000), RK(e->dst), 100, 7);
	kn_sq_submit(q, *t, 1);
	return 0;
}

/* ---- the common check ------------------------------------------------------------ */

enum recv_setup {
	RECV_NONE,      /* no receive posted on b */
	RECV_SMALL,     /* two receives: 1000 bytes, then 4096 */
	RECV_BAD_LKEY,  /* two receives: the first with an lkey that does not exist */
};

struct pcase {
	bad_fn post;
	uint32_t synd;       /* requester's error CQE */
	enum recv_setup recv;
	uint32_t recv_synd;  /* b's receive CQE (0: b stays RTS) */
	uint32_t rnr_retry;
};

struct prun {
	struct penv *e;
	const struct pcase *c;
};

static int case_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct prun *pr = arg;
	struct penv *e = pr->e;
	const struct pcase *c = pr->c;
	kn_qp *q = A(e), *rq = e->p.db;
	/* receives on b */
	if (c->recv == RECV_SMALL) {
		TU_CHECK(kn_recv_post(rq, e->rbuf.buf, tu_lkey(&e->rbuf), 1000, &e->rt[0]) == 0, "recv");
		TU_CHECK(kn_recv_post(rq, e->rbuf.buf + 8192, tu_lkey(&e->rbuf), 4096, &e->rt[1]) == 0,
			 "recv");
	} else if (c->recv == RECV_BAD_LKEY) {
		TU_CHECK(kn_recv_post(rq, e->rbuf.buf, tu_lkey(&e->rbuf) ^ 0x4400, 1000, &e->rt[0]) == 0,
			 "recv");
		TU_CHECK(kn_recv_post(rq, e->rbuf.buf + 8192, tu_lkey(&e->rbuf), 4096, &e->rt[1]) == 0,
			 "recv");
	}
	/* two good writes */
	kn_ticket_t t;
	for (int i = 0; i < 2; i++) {
		TU_CHECK(post_write(e, tu_addr(e->src.buf + 20000 + i * 1000), tu_lkey(&e->src),
				    tu_addr(e->dst.buf + 20000 + i * 1000), RK(e->dst), 777, &t) == 0,
			 "good write");
		TU_CHECK(kn_wait(q, t) == 0, "good write %d before the error", i);
	}
	/* the bad one */
	kn_ticket_t bad;
	TU_CHECK(c->post(e, &bad) == 0, "posting the bad WQE");
	int rc = kn_wait(q, bad);
	TU_CHECK(rc == -EIO, "bad WQE: kn_wait returned %d (%s)", rc, kinet_strerror(rc));
	/* whoever sees the error CQE sees the QP in ERR */
	TU_CHECK(kinet_qp_get_state(e->p.a) == KINET_QPS_ERR, "error CQE before ERR (state %s)",
		 kinet_qp_state_str(kinet_qp_get_state(e->p.a)));
	uint32_t vendor = 0xdead;
	uint32_t s = kn_qp_error(q, &vendor);
	TU_CHECK(s == c->synd, "syndrome 0x%x (%s), expected 0x%x (%s)", s, kinet_syndrome_str(s),
		 c->synd, kinet_syndrome_str(c->synd));
	TU_CHECK(vendor != 0xdead, "vendor syndrome not returned");
	const struct kn_cqe64 *cq = knx_cqe_at(q, bad);
	TU_CHECK(tu_cqe_op(cq) == KN_CQE_REQ_ERR, "CQE opcode %u", tu_cqe_op(cq));
	TU_CHECK(tu_cqe_synd(cq) == c->synd, "CQE syndrome 0x%x", tu_cqe_synd(cq));
	TU_CHECK(tu_cqe_idx(cq) == (uint16_t)bad, "error CQE names WQE %u, expected %u",
		 tu_cqe_idx(cq), (uint16_t)bad);
	const struct kn_err_cqe *ec = (const struct kn_err_cqe *)cq;
	TU_CHECK((kn_be32toh(ec->s_wqe_opcode_qpn) & 0xffffff) == q->qpn, "error CQE qpn");
	/* five good writes after it: flushed, nothing lands */
	for (int i = 0; i < 5; i++) {
		TU_CHECK(post_write(e, tu_addr(e->src.buf + 30000 + i * 1000), tu_lkey(&e->src),
				    tu_addr(e->dst.buf + 30000 + i * 1000), RK(e->dst), 500, &t) == 0,
			 "write after the error");
		rc = kn_wait(q, t);
		TU_CHECK(rc == -EIO, "WQE after the error: %d", rc);
		cq = knx_cqe_at(q, t);
		TU_CHECK(tu_cqe_op(cq) == KN_CQE_REQ_ERR && tu_cqe_synd(cq) == KN_SYND_WR_FLUSH_ERR,
			 "WQE after the error: opcode %u syndrome 0x%x", tu_cqe_op(cq),
			 tu_cqe_synd(cq));
		TU_CHECK(tu_cqe_idx(cq) == (uint16_t)t, "flush CQE index");
	}
	TU_CHECK(kn_quiet(q) == -EIO, "quiet after an error");
	TU_CHECK(kn_qp_error(q, NULL) == c->synd, "the first error stays recorded");
	TU_CHECK(kinet_qp_get_state(e->p.a) == KINET_QPS_ERR, "requester state %s",
		 kinet_qp_state_str(kinet_qp_get_state(e->p.a)));
	/* the responder */
	if (c->recv_synd) {
		kn_recv_info info;
		rc = kn_recv_poll(rq, e->rt[0], 1, &info);
		TU_CHECK(rc == -EIO, "receive CQE: %d", rc);
		TU_CHECK(kinet_qp_get_state(e->p.b) == KINET_QPS_ERR,
			 "receive error CQE before ERR (state %s)",
			 kinet_qp_state_str(kinet_qp_get_state(e->p.b)));
		TU_CHECK(info.opcode == KN_CQE_RESP_ERR && info.syndrome == c->recv_synd,
			 "receive CQE opcode %u syndrome 0x%x (%s), expected 0x%x", info.opcode,
			 info.syndrome, kinet_syndrome_str(info.syndrome), c->recv_synd);
		rc = kn_recv_poll(rq, e->rt[1], 1, &info);
		TU_CHECK(rc == -EIO && info.syndrome == KN_SYND_WR_FLUSH_ERR,
			 "second receive not flushed: %d, syndrome 0x%x", rc, info.syndrome);
		TU_CHECK(kinet_qp_get_state(e->p.b) == KINET_QPS_ERR, "responder state %s",
			 kinet_qp_state_str(kinet_qp_get_state(e->p.b)));
	} else {
		TU_CHECK(kinet_qp_get_state(e->p.b) == KINET_QPS_RTS, "responder state %s",
			 kinet_qp_state_str(kinet_qp_get_state(e->p.b)));
		if (c->recv != RECV_NONE) {
			kn_recv_info info;
			TU_CHECK(kn_recv_poll(rq, e->rt[0], 0, &info) == -EBUSY,
				 "a receive was consumed");
		}
	}
	return 0;
}

/* After RESET -> INIT -> RTR -> RTS both QPs work again from ticket 0. */
static int reuse_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct penv *e = arg;
	kn_qp *q = A(e);
	TU_CHECK(q->st->resv == 0 && q->st->done == 0 && kn_qp_error(q, NULL) == 0,
		 "device state not reset");
	for (int i = 0; i < 40; i++) { /* more than the SQ depth: slots reused */
		kn_ticket_t t;
		TU_CHECK(post_write(e, tu_addr(e->src.buf + 40000), tu_lkey(&e->src),
				    tu_addr(e->dst.buf + 40000), RK(e->dst), 3000, &t) == 0, "put");
		TU_CHECK(t == (uint64_t)i, "ticket %llu after reset", (unsigned long long)t);
		TU_CHECK(kn_wait(q, t) == 0, "write %d after reset: %s", i,
			 kinet_syndrome_str(kn_qp_error(q, NULL)));
	}
	kn_ticket_t rt, t;
	TU_CHECK(kn_recv_post(e->p.db, e->rbuf.buf + 50000, tu_lkey(&e->rbuf), 100, &rt) == 0,
		 "recv after reset");
	TU_CHECK(rt == 0, "receive ticket after reset");
	TU_CHECK(post_send(e, 100, &t) == 0 && kn_wait(q, t) == 0, "send after reset");
	kn_recv_info info;
	TU_CHECK(kn_recv_poll(e->p.db, rt, 1, &info) == 0 && info.byte_len == 100,
		 "receive after reset");
	return 0;
}

static void run_case(const struct pcase *c)
{
	struct penv e;
	penv_open(&e, c->rnr_retry ? c->rnr_retry : 7);
	struct prun pr = {&e, c};
	cr_assert_eq(kinet_host_exec(1, case_fn, &pr), 0, "%s", tu_fail_msg);

	/* nothing changed but the two good writes */
	memcpy(e.orig[1] + 20000, e.src.buf + 20000, 777);
	memcpy(e.orig[1] + 21000, e.src.buf + 21000, 777);
	for (int i = 0; i < NREG; i++) {
		cr_assert(tu_region_canaries_ok(&e.reg[i]), "canary of region %d changed", i);
		cr_assert_arr_eq(e.reg[i].buf, e.orig[i], RLEN, "region %d changed", i);
	}
	struct kinet_counters k;
	cr_assert_eq(kinet_ctx_counters(e.p.ctx, &k), 0);
	cr_assert_eq(k.by_syndrome[c->synd], 1, "counter of syndrome 0x%x: %llu", c->synd,
		     (unsigned long long)k.by_syndrome[c->synd]);
	cr_assert_eq(k.errors, c->recv_synd ? 2 : 1, "error counter %llu",
		     (unsigned long long)k.errors);
	cr_assert_geq(k.flushed, 5);
	cr_assert_eq(k.wqes, 2, "executed WQEs %llu", (unsigned long long)k.wqes);
	if (c->synd == KN_SYND_RNR_RETRY_EXC_ERR)
		cr_assert_eq(k.rnr_retries,
			     (c->rnr_retry == KINET_RNR_RETRY_NONE ? 0 : c->rnr_retry) + 1,
			     "RNR retries %llu",
			     (unsigned long long)k.rnr_retries);

	/* reusable after RESET */
	cr_assert_eq(kinet_qp_modify(e.p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(e.p.b, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_get_state(e.p.a), KINET_QPS_RESET);
	cr_assert_eq(kinet_qp_connect_local(e.p.a, e.p.b), 0);
	cr_assert_eq(kinet_host_exec(1, reuse_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_arr_eq(e.dst.buf + 40000, e.src.buf + 40000, 3000);
	cr_assert_arr_eq(e.rbuf.buf + 50000, e.src.buf, 100);
	penv_close(&e);
}

#define CASE(name, fn, s, ...)                                                \
	Test(prot, name)                                                      \
	{                                                                     \
		const struct pcase c = {.post = fn, .synd = s, __VA_ARGS__}; \
		run_case(&c);                                                 \
	}

/* local protection */
CASE(bad_lkey, b_bad_lkey, KN_SYND_LOCAL_PROT_ERR)
CASE(invalid_lkey_0x100, b_invalid_lkey, KN_SYND_LOCAL_PROT_ERR)
CASE(lkey_wrong_tag, b_lkey_tag, KN_SYND_LOCAL_PROT_ERR)
CASE(local_bounds_before, b_local_before, KN_SYND_LOCAL_PROT_ERR)
CASE(local_bounds_after, b_local_after, KN_SYND_LOCAL_PROT_ERR)
CASE(local_bounds_huge, b_local_huge, KN_SYND_LOCAL_PROT_ERR)
CASE(read_target_without_local_write, b_read_into_readonly, KN_SYND_LOCAL_PROT_ERR)
CASE(read_past_local_end, b_read_past_local_end, KN_SYND_LOCAL_PROT_ERR)
CASE(atomic_result_without_local_write, b_atomic_result_readonly, KN_SYND_LOCAL_PROT_ERR)
CASE(atomic_result_out_of_bounds, b_atomic_result_out, KN_SYND_LOCAL_PROT_ERR)
CASE(lkey_of_other_pd, b_lkey_other_pd, KN_SYND_LOCAL_PROT_ERR)
CASE(lkey_deregistered, b_lkey_deregistered, KN_SYND_LOCAL_PROT_ERR)
CASE(read_lkey_deregistered, b_read_lkey_deregistered, KN_SYND_LOCAL_PROT_ERR)
/* remote access */
CASE(bad_rkey, b_bad_rkey, KN_SYND_REMOTE_ACCESS_ERR)
CASE(rkey_bounds_past_end, b_rkey_past_end, KN_SYND_REMOTE_ACCESS_ERR)
CASE(rkey_bounds_before, b_rkey_before, KN_SYND_REMOTE_ACCESS_ERR)
CASE(rkey_address_wraps, b_rkey_wrap, KN_SYND_REMOTE_ACCESS_ERR)
CASE(read_past_remote_end, b_read_past_end, KN_SYND_REMOTE_ACCESS_ERR)
CASE(write_without_remote_write, b_no_remote_write, KN_SYND_REMOTE_ACCESS_ERR)
CASE(write_to_local_only_region, b_no_remote_write_local_only, KN_SYND_REMOTE_ACCESS_ERR)
CASE(read_without_remote_read, b_no_remote_read, KN_SYND_REMOTE_ACCESS_ERR)
CASE(fetch_add_without_remote_atomic, b_no_remote_atomic, KN_SYND_REMOTE_ACCESS_ERR)
CASE(compare_swap_without_remote_atomic, b_cs_no_remote_atomic, KN_SYND_REMOTE_ACCESS_ERR)
CASE(atomic_past_remote_end, b_atomic_past_end, KN_SYND_REMOTE_ACCESS_ERR)
CASE(rkey_of_other_pd, b_rkey_other_pd, KN_SYND_REMOTE_ACCESS_ERR)
CASE(rkey_deregistered, b_rkey_deregistered, KN_SYND_REMOTE_ACCESS_ERR)
/* remote invalid request */
CASE(fetch_add_misaligned, b_atomic_misaligned, KN_SYND_REMOTE_INVAL_REQ_ERR)
CASE(compare_swap_misaligned, b_cs_misaligned, KN_SYND_REMOTE_INVAL_REQ_ERR)
/* receive side */
CASE(send_longer_than_receive_buffer, b_send_too_long, KN_SYND_REMOTE_INVAL_REQ_ERR,
     .recv = RECV_SMALL, .recv_synd = KN_SYND_LOCAL_LENGTH_ERR)
CASE(send_to_bad_receive_lkey, b_send_bad_recv_lkey, KN_SYND_REMOTE_OP_ERR,
     .recv = RECV_BAD_LKEY, .recv_synd = KN_SYND_LOCAL_PROT_ERR)
CASE(rnr_retry_exceeded_send, b_rnr, KN_SYND_RNR_RETRY_EXC_ERR, .rnr_retry = 3)
CASE(rnr_retry_exceeded_once, b_rnr, KN_SYND_RNR_RETRY_EXC_ERR, .rnr_retry = 1)
CASE(rnr_no_retry, b_rnr, KN_SYND_RNR_RETRY_EXC_ERR, .rnr_retry = KINET_RNR_RETRY_NONE)
CASE(rnr_retry_exceeded_write_imm, b_write_imm_rnr, KN_SYND_RNR_RETRY_EXC_ERR, .rnr_retry = 6)
/* malformed WQEs */
CASE(unknown_opcode_07, b_opcode07, KN_SYND_LOCAL_QP_OP_ERR)
CASE(unsupported_opcode_send_inval, b_opcode_send_inval, KN_SYND_LOCAL_QP_OP_ERR)
CASE(unknown_opcode_ff, b_opcode_ff, KN_SYND_LOCAL_QP_OP_ERR)
CASE(ds_zero, b_ds0, KN_SYND_LOCAL_QP_OP_ERR)
CASE(ds_too_small_for_write, b_ds1_write, KN_SYND_LOCAL_QP_OP_ERR)
CASE(ds_wrong_for_atomic, b_ds3_atomic, KN_SYND_LOCAL_QP_OP_ERR)
CASE(wrong_wqe_index, b_index, KN_SYND_LOCAL_QP_OP_ERR)
CASE(wqe_index_of_another_lap, b_index_wrapped, KN_SYND_LOCAL_QP_OP_ERR)
CASE(wrong_qpn, b_qpn, KN_SYND_LOCAL_QP_OP_ERR)
CASE(inline_longer_than_wqe, b_inline_too_long, KN_SYND_LOCAL_QP_OP_ERR)
CASE(atomic_result_length_not_8, b_atomic_len, KN_SYND_LOCAL_LENGTH_ERR)

/* a few classes again with requester and responder on two engine threads */
#define CASE2(name, fn, s, ...)                                               \
	Test(prot, name##_two_engines)                                        \
	{                                                                     \
		tu_engine_threads = 2;                                        \
		const struct pcase c = {.post = fn, .synd = s, __VA_ARGS__}; \
		run_case(&c);                                                 \
	}
CASE2(bad_rkey, b_bad_rkey, KN_SYND_REMOTE_ACCESS_ERR)
CASE2(bad_lkey, b_bad_lkey, KN_SYND_LOCAL_PROT_ERR)
CASE2(send_longer_than_receive_buffer, b_send_too_long, KN_SYND_REMOTE_INVAL_REQ_ERR,
      .recv = RECV_SMALL, .recv_synd = KN_SYND_LOCAL_LENGTH_ERR)
CASE2(send_to_bad_receive_lkey, b_send_bad_recv_lkey, KN_SYND_REMOTE_OP_ERR,
      .recv = RECV_BAD_LKEY, .recv_synd = KN_SYND_LOCAL_PROT_ERR)
CASE2(rnr_retry_exceeded_send, b_rnr, KN_SYND_RNR_RETRY_EXC_ERR, .rnr_retry = 2)

/* Moving a QP to ERR by hand flushes what is outstanding, and RESET clears. */
static int manual_err_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct penv *e = arg;
	kn_qp *q = A(e);
	kn_ticket_t t;
	TU_CHECK(post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf),
			    RK(e->dst), 100, &t) == 0 && kn_wait(q, t) == 0, "write");
	TU_CHECK(kinet_qp_modify(e->p.a, KINET_QPS_ERR, NULL) == 0, "to ERR");
	for (int i = 0; i < 20; i++) {
		TU_CHECK(post_write(e, tu_addr(e->src.buf + 100), tu_lkey(&e->src),
				    tu_addr(e->dst.buf + 100), RK(e->dst), 100, &t) == 0, "post");
		TU_CHECK(kn_wait(q, t) == -EIO, "WQE %d on a QP in ERR", i);
		TU_CHECK(tu_cqe_synd(knx_cqe_at(q, t)) == KN_SYND_WR_FLUSH_ERR, "flush syndrome");
	}
	TU_CHECK(kn_qp_error(q, NULL) == KN_SYND_WR_FLUSH_ERR, "first error: flush");
	return 0;
}

Test(prot, modify_to_err_flushes)
{
	struct penv e;
	penv_open(&e, 7);
	cr_assert_eq(kinet_host_exec(1, manual_err_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_arr_eq(e.dst.buf + 100, e.orig[1] + 100, 100, "a flushed write landed");
	cr_assert_eq(kinet_qp_modify(e.p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(e.p.b, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_connect_local(e.p.a, e.p.b), 0);
	cr_assert_eq(kinet_host_exec(1, reuse_fn, &e), 0, "%s", tu_fail_msg);
	penv_close(&e);
}

/* A target QP that is not ready for traffic (INIT): the requester gets an
 * error, nothing lands. */
static int not_ready_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct penv *e = arg;
	kn_ticket_t t;
	TU_CHECK(post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf),
			    RK(e->dst), 100, &t) == 0, "post");
	int rc = kn_wait(A(e), t);
	TU_CHECK(rc == -EIO, "write to a target in RESET: %d", rc);
	TU_CHECK(kn_qp_error(A(e), NULL) != 0, "no syndrome");
	return 0;
}

Test(prot, target_not_ready)
{
	struct penv e;
	penv_open(&e, 7);
	cr_assert_eq(kinet_qp_modify(e.p.b, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_host_exec(1, not_ready_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_arr_eq(e.dst.buf, e.orig[1], RLEN);
	penv_close(&e);
}

/* The peer QP destroyed: nobody answers, the requester gets a transport
 * retry error and nothing lands. */
static int peer_gone_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct penv *e = arg;
	kn_ticket_t t;
	TU_CHECK(post_write(e, tu_addr(e->src.buf), tu_lkey(&e->src), tu_addr(e->dst.buf),
			    RK(e->dst), 100, &t) == 0, "post");
	TU_CHECK(kn_wait(A(e), t) == -EIO, "write to a destroyed peer");
	TU_CHECK(kn_qp_error(A(e), NULL) == KN_SYND_TRANSPORT_RETRY_EXC_ERR, "syndrome %s",
		 kinet_syndrome_str(kn_qp_error(A(e), NULL)));
	return 0;
}

Test(prot, peer_destroyed)
{
	struct penv e;
	penv_open(&e, 7);
	cr_assert_eq(kinet_qp_destroy(e.p.b), 0);
	e.p.b = NULL;
	cr_assert_eq(kinet_host_exec(1, peer_gone_fn, &e), 0, "%s", tu_fail_msg);
	cr_assert_arr_eq(e.dst.buf, e.orig[1], RLEN);
	penv_close(&e);
}

/* A WQE that claims the index of another lap is refused when the doorbell
 * record runs it; the register word that names it (its ctrl word), seen by
 * the engine only afterwards, must not read as a whole lap of WQEs beyond
 * the consumer: no flush CQEs (they would wrap the CQ over the error CQE).
 * The late word is forced here: the register is cleared, then given the
 * WQE's ctrl word again once the error CQE is in. */
static int late_word_fn(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	struct penv *e = arg;
	kn_qp *q = A(e);
	kn_ticket_t t, bad;
	TU_CHECK(post_write(e, tu_addr(e->src.buf + 20000), tu_lkey(&e->src),
			    tu_addr(e->dst.buf + 20000), RK(e->dst), 777, &t) == 0 &&
			 kn_wait(q, t) == 0,
		 "good write");
	TU_CHECK(b_index_wrapped(e, &bad) == 0, "posting the WQE of another lap");
	TU_CHECK(kn_wait(q, bad) == -EIO, "its error CQE");
	uint64_t ctrl;
	memcpy(&ctrl, kn_wqe_ptr(q, bad), 8);
	for (unsigned b = 0; b < (q->bf_alt ? 2u : 1u); b++) {
		volatile uint64_t *reg = (volatile uint64_t *)(q->db + (b ? q->bf_alt : 0u));
		*reg = 0;
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL); /* the engine sees the cleared register */
		*reg = ctrl;
		nanosleep(&ts, NULL); /* and then the word again */
	}
	const struct kn_cqe64 *cq = knx_cqe_at(q, bad);
	TU_CHECK(tu_cqe_synd(cq) == KN_SYND_LOCAL_QP_OP_ERR, "error CQE now has syndrome 0x%x",
		 tu_cqe_synd(cq));
	return 0;
}

Test(prot, late_register_word_of_a_refused_wqe)
{
	struct penv e;
	penv_open(&e, 7);
	cr_assert_eq(kinet_host_exec(1, late_word_fn, &e), 0, "%s", tu_fail_msg);
	struct kinet_qp_counters qc;
	cr_assert_eq(kinet_qp_counters(e.p.a, &qc), 0);
	cr_assert_eq(qc.flushed, 0, "flush CQEs after the late word: %llu",
		     (unsigned long long)qc.flushed);
	cr_assert_eq(qc.errors, 1, "error CQEs: %llu", (unsigned long long)qc.errors);
	penv_close(&e);
}
