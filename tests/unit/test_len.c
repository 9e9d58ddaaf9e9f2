/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lengths an mlx5 data segment cannot carry. Bit 31 of a data segment's
 * byte count is the inline flag: a put of 2^31 + 8 bytes written into one
 * would make the NIC send 8 bytes of the WQE itself (the source lkey and the
 * high half of the source address) as inline data. Every device call and
 * builder that takes a length refuses 2^31 and more with -EINVAL, takes no
 * ticket and writes nothing into the queues; the QP stays usable.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define N 4096
#define SQ 16

/* Lengths with bit 31 set: 2^31 + 8 (the case that leaked WQE bytes), 2^31,
 * 2^31 + 28 (the largest inline payload of a WQEBB), 2^32 - 1. */
static const uint32_t bad_len[] = {0x80000008u, 0x80000000u, 0x8000001cu, 0xffffffffu};
#define NBAD (sizeof(bad_len) / sizeof(bad_len[0]))

struct env {
	struct tu_pair p;
	struct tu_region src, dst, sig;
	uint8_t dst_before[N];
};

static void env_open(struct env *e, uint64_t seed)
{
	struct kinet_qp_attr qa = {.sq_depth = SQ, .rq_depth = 4};
	cr_assert_eq(tu_pair_open(&e->p, &qa), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, N, KINET_ACCESS_LOCAL_WRITE, seed), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, N, KINET_ACCESS_ALL, seed + 1), 0);
	cr_assert_eq(tu_region_alloc(&e->sig, e->p.pd, 8, KINET_ACCESS_ALL, seed + 2), 0);
	memcpy(e->dst_before, e->dst.buf, N);
}

static void env_close(struct env *e)
{
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_region_free(&e->sig);
	tu_pair_close(&e->p);
}

/* Everything a refused call must leave alone: the send and receive queues,
 * the doorbell records and the QP's device state. */
struct snap {
	uint8_t sq[SQ * KN_SEND_WQE_BB];
	uint8_t rq[4 * 16];
	uint32_t dbrec[2];
	kn_qp_state st;
};

static void take(const kn_qp *d, struct snap *s)
{
	memcpy(s->sq, d->sq, sizeof(s->sq));
	size_t rq = (size_t)d->rq_wqe_cnt * d->rq_stride;
	cr_assert(rq <= sizeof(s->rq));
	memcpy(s->rq, d->rq, rq);
	s->dbrec[0] = d->dbrec[0];
	s->dbrec[1] = d->dbrec[1];
	memcpy(&s->st, d->st, sizeof(s->st));
}

static void same(const kn_qp *d, const struct snap *s, const char *what, uint32_t len)
{
	struct snap now;
	memset(&now, 0, sizeof(now));
	take(d, &now);
	cr_assert_eq(memcmp(now.sq, s->sq, sizeof(s->sq)), 0, "%s(%#x) wrote into the SQ", what,
		     len);
	cr_assert_eq(memcmp(now.rq, s->rq, sizeof(s->rq)), 0, "%s(%#x) wrote into the RQ", what,
		     len);
	cr_assert(now.dbrec[0] == s->dbrec[0] && now.dbrec[1] == s->dbrec[1],
		  "%s(%#x) rang a doorbell record", what, len);
	cr_assert_eq(memcmp(&now.st, &s->st, sizeof(s->st)), 0,
		     "%s(%#x) changed the QP state (a ticket was taken)", what, len);
}

/* The QP still works after refusals: a put of random bytes lands byte for
 * byte, with the ticket that follows the last one taken before. */
static void still_works(struct env *e, uint64_t expect_ticket)
{
	kn_ticket_t t = ~0ull;
	tu_fill_random(e->src.buf, N, expect_ticket + 77);
	cr_assert_eq(kn_put(e->p.da, tu_addr(e->dst.buf), kinet_mr_rkey(e->dst.mr), e->src.buf,
			    tu_lkey(&e->src), N, &t),
		     0);
	cr_assert_eq(t, expect_ticket, "a refused call took a ticket");
	cr_assert_eq(kn_wait(e->p.da, t), 0, "syndrome 0x%x", kn_qp_error(e->p.da, NULL));
	cr_assert_eq(memcmp(e->dst.buf, e->src.buf, N), 0);
	cr_assert(tu_region_canaries_ok(&e->dst));
	memcpy(e->dst_before, e->dst.buf, N);
}

/* kn_put of a length with bit 31 set. Before the check, 2^31 + 8 was taken:
 * the NIC read the data segment as an inline one of 8 bytes and wrote the
 * WQE's own lkey and high address half to the target, with a success CQE. */
Test(len, put_bit31_refused)
{
	struct env e;
	env_open(&e, 11);
	const kn_qp *d = e.p.da;
	for (unsigned i = 0; i < NBAD; i++) {
		struct snap s;
		take(d, &s);
		kn_ticket_t t = ~0ull;
		int rc = kn_put(d, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
				tu_lkey(&e.src), bad_len[i], &t);
		if (rc == 0) {
			/* what the target got, for the report */
			int done = kn_wait(d, t);
			uint32_t leak[2] = {kn_htobe32(tu_lkey(&e.src)),
					    kn_htobe32((uint32_t)(tu_addr(e.src.buf) >> 32))};
			int got_wqe = bad_len[i] == 0x80000008u && memcmp(e.dst.buf, leak, 8) == 0;
			cr_assert_fail("kn_put(%#x) returned 0 (completion %d)%s", bad_len[i], done,
				got_wqe ? ": the target received WQE bytes (lkey, high address)"
					: "");
		}
		cr_assert_eq(rc, -EINVAL, "kn_put(%#x): %d", bad_len[i], rc);
		cr_assert_eq(t, ~0ull, "kn_put(%#x) wrote a ticket", bad_len[i]);
		same(d, &s, "kn_put", bad_len[i]);
		cr_assert_eq(memcmp(e.dst.buf, e.dst_before, N), 0);
	}
	still_works(&e, 0);
	/* the largest length a data segment carries is not refused by the
	 * device API: the NIC checks it against the 4 KiB source region and
	 * answers with a local protection error, writing nothing */
	kn_ticket_t t;
	cr_assert_eq(kn_put(d, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
			    tu_lkey(&e.src), KN_MAX_LEN, &t),
		     0);
	cr_assert_eq(kn_wait(d, t), -EIO);
	cr_assert_eq(kn_qp_error(d, NULL), KN_SYND_LOCAL_PROT_ERR);
	cr_assert_eq(memcmp(e.dst.buf, e.dst_before, N), 0);
	env_close(&e);
}

/* The other calls that take a length: kn_get, kn_put_signal, kn_recv_post,
 * and kn_post with the same operations. */
Test(len, calls_bit31_refused)
{
	struct env e;
	env_open(&e, 21);
	const kn_qp *d = e.p.da;
	uint64_t sig0;
	memcpy(&sig0, e.sig.buf, 8);
	for (unsigned i = 0; i < NBAD; i++) {
		uint32_t len = bad_len[i];
		struct snap s;
		kn_ticket_t t = ~0ull;
		take(d, &s);
		cr_assert_eq(kn_get(d, e.src.buf, tu_lkey(&e.src), tu_addr(e.dst.buf),
				    kinet_mr_rkey(e.dst.mr), len, &t),
			     -EINVAL, "kn_get(%#x)", len);
		same(d, &s, "kn_get", len);
		cr_assert_eq(kn_put_signal(d, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
					   tu_lkey(&e.src), len, tu_addr(e.sig.buf),
					   kinet_mr_rkey(e.sig.mr), 1, &t),
			     -EINVAL, "kn_put_signal(%#x)", len);
		same(d, &s, "kn_put_signal", len);
		kn_op op[3];
		kn_op_put(&op[0], tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
			  tu_lkey(&e.src), len);
		kn_op_get(&op[1], e.src.buf, tu_lkey(&e.src), tu_addr(e.dst.buf),
			  kinet_mr_rkey(e.dst.mr), len);
		kn_op_put_signal(&op[2], tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
				 tu_lkey(&e.src), len, tu_addr(e.sig.buf), kinet_mr_rkey(e.sig.mr),
				 1);
		for (int k = 0; k < 3; k++) {
			cr_assert_eq(kn_post(d, &op[k], &t), -EINVAL, "kn_post(kind %d, %#x)",
				     op[k].kind, len);
			same(d, &s, "kn_post", len);
		}
		cr_assert_eq(t, ~0ull);
		/* the receive side: the peer's receive queue */
		struct snap r;
		take(e.p.db, &r);
		cr_assert_eq(kn_recv_post(e.p.db, e.dst.buf, tu_lkey(&e.dst), len, &t), -EINVAL,
			     "kn_recv_post(%#x)", len);
		same(e.p.db, &r, "kn_recv_post", len);
		cr_assert_eq(t, ~0ull);
	}
	uint64_t sig1;
	memcpy(&sig1, e.sig.buf, 8);
	cr_assert_eq(sig1, sig0, "a refused put_signal signalled");
	cr_assert_eq(memcmp(e.dst.buf, e.dst_before, N), 0);
	still_works(&e, 0);
	env_close(&e);
}

/* The builders: -EINVAL and the caller's slot untouched; the caller fills it
 * with something else (a NOP) and the QP goes on. */
Test(len, builders_bit31_refused)
{
	struct env e;
	env_open(&e, 31);
	const kn_qp *d = e.p.da;
	uint64_t next = 0;
	for (unsigned i = 0; i < NBAD; i++) {
		uint32_t len = bad_len[i];
		kn_ticket_t t;
		cr_assert_eq(kn_sq_reserve(d, 1, &t), 0);
		cr_assert_eq(t, next);
		uint8_t *w = (uint8_t *)kn_wqe_ptr(d, t);
		uint8_t before[KN_SEND_WQE_BB];
		tu_fill_random(w, KN_SEND_WQE_BB, 100 + i);
		memcpy(before, w, KN_SEND_WQE_BB);
		uint64_t la = tu_addr(e.src.buf), ra = tu_addr(e.dst.buf);
		uint32_t lk = tu_lkey(&e.src), rk = kinet_mr_rkey(e.dst.mr);
		cr_assert_eq(kn_prep_write(d, w, t, la, lk, ra, rk, len), -EINVAL);
		cr_assert_eq(memcmp(w, before, KN_SEND_WQE_BB), 0, "kn_prep_write(%#x)", len);
		cr_assert_eq(kn_prep_write_imm(d, w, t, la, lk, ra, rk, len, 7), -EINVAL);
		cr_assert_eq(memcmp(w, before, KN_SEND_WQE_BB), 0, "kn_prep_write_imm(%#x)", len);
		cr_assert_eq(kn_prep_read(d, w, t, la, lk, ra, rk, len), -EINVAL);
		cr_assert_eq(memcmp(w, before, KN_SEND_WQE_BB), 0, "kn_prep_read(%#x)", len);
		cr_assert_eq(kn_prep_send(d, w, t, la, lk, len, 1, 7), -EINVAL);
		cr_assert_eq(memcmp(w, before, KN_SEND_WQE_BB), 0, "kn_prep_send(%#x)", len);
		cr_assert_eq(kn_prep_write_inline(d, w, t, e.src.buf, len, ra, rk), -EINVAL);
		cr_assert_eq(memcmp(w, before, KN_SEND_WQE_BB), 0, "kn_prep_write_inline(%#x)",
			     len);
		kn_prep_nop(d, w, t);
		kn_sq_submit(d, t, 1);
		cr_assert_eq(kn_wait(d, t), 0);
		next = t + 1;
	}
	cr_assert_eq(memcmp(e.dst.buf, e.dst_before, N), 0);
	still_works(&e, next);
	env_close(&e);
}

/* kn_post refuses what it cannot build (unknown kind, an inline payload over
 * the QP's limit) the same way. */
Test(len, post_refuses_bad_ops)
{
	struct env e;
	env_open(&e, 41);
	const kn_qp *d = e.p.da;
	struct snap s;
	take(d, &s);
	kn_op op;
	kn_ticket_t t = ~0ull;
	kn_op_put(&op, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf, tu_lkey(&e.src), 8);
	op.kind = 99;
	cr_assert_eq(kn_post(d, &op, &t), -EINVAL);
	op.kind = -1;
	cr_assert_eq(kn_post(d, &op, &t), -EINVAL);
	kn_op_put_inline(&op, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
			 KN_MAX_INLINE_WRITE + 1);
	cr_assert_eq(kn_post(d, &op, &t), -EINVAL);
	cr_assert_eq(kn_put_inline(d, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
				   d->max_inline + 1, &t),
		     -EINVAL);
	same(d, &s, "kn_post", 0);
	cr_assert_eq(t, ~0ull);
	/* and posts what it can: an inline put of random bytes */
	tu_fill_random(e.src.buf, KN_MAX_INLINE_WRITE, 5);
	kn_op_put_inline(&op, tu_addr(e.dst.buf), kinet_mr_rkey(e.dst.mr), e.src.buf,
			 KN_MAX_INLINE_WRITE);
	cr_assert_eq(kn_post(d, &op, &t), 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(kn_wait(d, t), 0);
	cr_assert_eq(memcmp(e.dst.buf, e.src.buf, KN_MAX_INLINE_WRITE), 0);
	env_close(&e);
}
