/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What kinet shows of running QPs on the software NIC: per-QP counters
 * (posted, completed, outstanding, bytes direct and staged, errors by
 * syndrome, flushes, RNR waits, doorbells by form), the reason code of
 * every error CQE (which check failed), a doorbell rung before RTS, and the
 * endpoint states of QPs with a local peer.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define LEN 65536

struct env {
	struct tu_pair p;
	struct tu_region src, dst;
};

static void env_open(struct env *e)
{
	struct kinet_qp_attr at = {.sq_depth = 64, .rq_depth = 16};
	cr_assert_eq(tu_pair_open(&e->p, &at), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, LEN, KINET_ACCESS_LOCAL_WRITE, 11), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, LEN, KINET_ACCESS_ALL, 12), 0);
}

static void env_close(struct env *e)
{
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_pair_close(&e->p);
}

static kn_ticket_t post_send(struct env *e, uint32_t len)
{
	kn_ticket_t t = 0;
	cr_assert_eq(kn_sq_reserve(e->p.da, 1, &t), 0);
	kn_prep_send(e->p.da, kn_wqe_ptr(e->p.da, t), t, tu_addr(e->src.buf), tu_lkey(&e->src), len, 0,
		     0);
	kn_sq_submit(e->p.da, t, 1);
	return t;
}

/* Counters once the `posted` WQEs posted have completed: posted ==
 * completed. The GPU engine (KINET_GPU_ENGINE) hands its counts over with the
 * QP when it gives it back (after KINET_GPU_ENGINE_IDLE_US idle): until
 * then posted and completed both lag. */
static void counters_settled(kinet_qp *qp, struct kinet_qp_counters *c, uint64_t posted)
{
	for (int i = 0; i < 2000; i++) {
		cr_assert_eq(kinet_qp_counters(qp, c), 0);
		if (c->outstanding == 0 && c->posted >= posted)
			return;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	cr_assert_fail("qp 0x%x: %llu WQEs still outstanding", kinet_qp_num(qp),
		       (unsigned long long)c->outstanding);
}

Test(observe, qp_counters_count_work_bytes_and_doorbells)
{
	struct env e;
	env_open(&e);
	enum { N = 40 };
	uint64_t sum = 0;
	kn_ticket_t t = 0;
	for (int i = 0; i < N; i++) {
		uint32_t len = 1 + (uint32_t)(i * 997) % 1500;
		cr_assert_eq(kn_put(e.p.da, tu_addr(e.dst.buf + i * 1500), tu_lkey(&e.dst),
				    e.src.buf + i * 1500, tu_lkey(&e.src), len, &t),
			     0);
		sum += len;
	}
	cr_assert_eq(kn_wait(e.p.da, t), 0);
	cr_assert_eq(memcmp(e.dst.buf, e.src.buf, 1), 0);
	struct kinet_qp_counters c;
	counters_settled(e.p.a, &c, N);
	cr_assert_eq(c.qpn, kinet_qp_num(e.p.a));
	cr_assert_eq(c.state, KINET_QPS_RTS);
	cr_assert_eq(c.posted, N);
	cr_assert_eq(c.completed, N);
	cr_assert_eq(c.cqes, N); /* the device API signals every WQE */
	cr_assert_eq(c.bytes, sum);
	cr_assert_eq(c.direct_bytes, sum);
	cr_assert_eq(c.staged_bytes, 0);
	cr_assert_eq(c.errors + c.flushed, 0);
	/* the device API rings with the register word naming its last WQE */
	cr_assert_geq(c.doorbells, 1);
	cr_assert_eq(c.doorbells, c.db_wqe_words + c.db_pi_words + c.db_foreign);
	/* the target QP executed nothing of its own */
	struct kinet_qp_counters cb;
	cr_assert_eq(kinet_qp_counters(e.p.b, &cb), 0);
	cr_assert_eq(cb.posted, 0);
	/* the context's counters agree */
	struct kinet_counters k;
	cr_assert_eq(kinet_ctx_counters(e.p.ctx, &k), 0);
	cr_assert_eq(k.wqes, N);
	cr_assert_eq(k.bytes, sum);
	cr_assert_eq(kinet_qp_counters(NULL, &c), -EINVAL);
	env_close(&e);
}

Test(observe, receives_rnr_and_errors_by_syndrome)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 64, .rq_depth = 16, .rnr_retry = 2};
	cr_assert_eq(tu_pair_open(&e.p, &at), 0);
	cr_assert_eq(tu_region_alloc(&e.src, e.p.pd, LEN, KINET_ACCESS_LOCAL_WRITE, 11), 0);
	cr_assert_eq(tu_region_alloc(&e.dst, e.p.pd, LEN, KINET_ACCESS_ALL, 12), 0);
	/* one send into a posted receive */
	kn_ticket_t rt, t;
	cr_assert_eq(kn_recv_post(e.p.db, e.dst.buf, tu_lkey(&e.dst), 4096, &rt), 0);
	t = post_send(&e, 3000);
	cr_assert_eq(kn_wait(e.p.da, t), 0);
	kn_recv_info ri;
	cr_assert_eq(kn_recv_poll(e.p.db, rt, 1, &ri), 0);
	cr_assert_eq(memcmp(e.dst.buf, e.src.buf, 3000), 0);
	struct kinet_qp_counters cb;
	cr_assert_eq(kinet_qp_counters(e.p.b, &cb), 0);
	cr_assert_eq(cb.recv_completed, 1);
	cr_assert_eq(cb.recv_bytes, 3000);
	/* a send with no receive posted: RNR waits, then RNR retry exceeded;
	 * the write behind it is flushed */
	kn_ticket_t t1, t2;
	t1 = post_send(&e, 64);
	cr_assert_eq(kn_put(e.p.da, tu_addr(e.dst.buf), tu_lkey(&e.dst), e.src.buf, tu_lkey(&e.src),
			    64, &t2),
		     0);
	cr_assert_eq(kn_wait(e.p.da, t1), -EIO);
	uint32_t vendor = 0;
	cr_assert_eq(kn_qp_error(e.p.da, &vendor), KN_SYND_RNR_RETRY_EXC_ERR);
	cr_assert_eq(vendor, KINET_REASON_RNR);
	cr_assert_eq(kn_wait(e.p.da, t2), -EIO);
	struct kinet_qp_counters c;
	counters_settled(e.p.a, &c, 3);
	cr_assert_eq(c.posted, 3);
	cr_assert_eq(c.completed, 3);
	cr_assert_eq(c.rnr_retries, 3, "rnr %llu", (unsigned long long)c.rnr_retries); /* two retries, then the last NAK */
	cr_assert_eq(c.errors, 1);
	cr_assert_eq(c.by_syndrome[KN_SYND_RNR_RETRY_EXC_ERR], 1);
	cr_assert_eq(c.flushed, 1);
	cr_assert_eq(c.by_syndrome[KN_SYND_WR_FLUSH_ERR], 1);
	env_close(&e);
}

/* One bad WQE on a fresh pair; returns (syndrome, reason) seen by a. */
static void one_bad_put(struct env *e, uint64_t raddr, uint32_t rkey, uint32_t lkey,
			uint32_t *synd, uint32_t *why)
{
	kn_ticket_t t;
	cr_assert_eq(kn_put(e->p.da, raddr, rkey, e->src.buf, lkey, 256, &t), 0);
	cr_assert_eq(kn_wait(e->p.da, t), -EIO);
	*why = 0;
	*synd = kn_qp_error(e->p.da, why);
}

static void reconnect(struct env *e)
{
	cr_assert_eq(kinet_qp_modify(e->p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(e->p.b, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_connect_local(e->p.a, e->p.b), 0);
}

Test(observe, error_cqes_say_which_check_failed)
{
	struct env e;
	env_open(&e);
	kinet_pd *pd2;
	cr_assert_eq(kinet_pd_alloc(e.p.ctx, &pd2), 0);
	struct tu_region other, ronly;
	cr_assert_eq(tu_region_alloc(&other, pd2, LEN, KINET_ACCESS_ALL, 13), 0);
	cr_assert_eq(tu_region_alloc(&ronly, e.p.pd, LEN,
				     KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_READ, 14),
		     0);
	uint8_t before[LEN];
	memcpy(before, e.dst.buf, LEN);
	uint32_t s, w;
	uint64_t dst = tu_addr(e.dst.buf);
	uint32_t rk = kinet_mr_rkey(e.dst.mr), lk = tu_lkey(&e.src);
	struct {
		uint64_t raddr;
		uint32_t rkey, lkey, synd, why;
	} cases[] = {
		{dst, rk ^ 0x100, lk, KN_SYND_REMOTE_ACCESS_ERR, KINET_REASON_UNKNOWN_KEY},
		{tu_addr(other.buf), kinet_mr_rkey(other.mr), lk, KN_SYND_REMOTE_ACCESS_ERR,
		 KINET_REASON_WRONG_PD},
		{dst + LEN - 100, rk, lk, KN_SYND_REMOTE_ACCESS_ERR, KINET_REASON_OUT_OF_BOUNDS},
		{tu_addr(ronly.buf), kinet_mr_rkey(ronly.mr), lk, KN_SYND_REMOTE_ACCESS_ERR,
		 KINET_REASON_ACCESS},
		{dst, rk, lk ^ 0x100, KN_SYND_LOCAL_PROT_ERR, KINET_REASON_UNKNOWN_KEY},
		{dst, rk, kinet_mr_lkey(other.mr), KN_SYND_LOCAL_PROT_ERR, KINET_REASON_WRONG_PD},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		one_bad_put(&e, cases[i].raddr, cases[i].rkey, cases[i].lkey, &s, &w);
		cr_assert_eq(s, cases[i].synd, "case %zu: syndrome 0x%x", i, s);
		cr_assert_eq(w, cases[i].why, "case %zu: reason %u (%s)", i, w, kinet_reason_str((int)w));
		cr_assert_str_neq(kinet_reason_str((int)w), kinet_reason_str(0));
		reconnect(&e);
	}
	/* a local segment beyond its region: out of bounds */
	kn_ticket_t t;
	cr_assert_eq(kn_put(e.p.da, dst, rk, e.src.buf + LEN - 10, lk, 256, &t), 0);
	cr_assert_eq(kn_wait(e.p.da, t), -EIO);
	cr_assert_eq(kn_qp_error(e.p.da, &w), KN_SYND_LOCAL_PROT_ERR);
	cr_assert_eq(w, KINET_REASON_OUT_OF_BOUNDS);
	reconnect(&e);
	/* a misaligned atomic */
	cr_assert_eq(kn_sq_reserve(e.p.da, 1, &t), 0);
	kn_prep_atomic_fa(e.p.da, kn_wqe_ptr(e.p.da, t), t, tu_addr(e.src.buf), lk, dst + 4, rk, 1);
	kn_sq_submit(e.p.da, t, 1);
	cr_assert_eq(kn_wait(e.p.da, t), -EIO);
	cr_assert_eq(kn_qp_error(e.p.da, &w), KN_SYND_REMOTE_INVAL_REQ_ERR);
	cr_assert_eq(w, KINET_REASON_ALIGNMENT);
	reconnect(&e);
	/* the target QP not ready: b goes to ERR, a's write fails */
	struct kinet_ep_info ei;
	cr_assert_eq(kinet_qp_ep_info(e.p.a, &ei), 0);
	cr_assert_eq(ei.state, KINET_EP_READY);
	cr_assert_eq(kinet_qp_modify(e.p.b, KINET_QPS_ERR, NULL), 0);
	cr_assert_eq(kinet_qp_ep_info(e.p.a, &ei), 0);
	cr_assert_eq(ei.state, KINET_EP_DEGRADED); /* its peer does not accept */
	one_bad_put(&e, dst, rk, lk, &s, &w);
	cr_assert_eq(s, KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	cr_assert_eq(w, KINET_REASON_QP_NOT_READY);
	/* the flush behind an error says flushed */
	cr_assert_eq(kn_put(e.p.da, dst, rk, e.src.buf, lk, 8, &t), 0);
	cr_assert_eq(kn_wait(e.p.da, t), -EIO);
	cr_assert_eq(kinet_cqe_reason(NULL), 0);
	reconnect(&e);
	/* nothing landed anywhere */
	cr_assert_eq(memcmp(e.dst.buf, before, LEN), 0);
	cr_assert(tu_region_canaries_ok(&e.dst));
	tu_region_free(&other);
	tu_region_free(&ronly);
	cr_assert_eq(kinet_pd_free(pd2), 0);
	env_close(&e);
}

Test(observe, peer_gone_and_flush_reasons_on_raw_cqes)
{
	struct tu_rawpair p;
	cr_assert_eq(tu_rawpair_open(&p, 16, 0), 0);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, p.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 21), 0);
	cr_assert_eq(tu_region_alloc(&dst, p.pd, 4096, KINET_ACCESS_ALL, 22), 0);
	/* b destroyed: a's peer is gone */
	cr_assert_eq(kinet_qp_destroy(p.b), 0);
	p.b = NULL;
	struct kinet_ep_info ei;
	cr_assert_eq(kinet_qp_ep_info(p.a, &ei), 0);
	cr_assert_eq(ei.state, KINET_EP_DEGRADED);
	cr_assert_eq(ei.peer_dead, 1);
	uint8_t w[64];
	for (int i = 0; i < 2; i++) {
		tu_wqe_write(w, (uint16_t)p.pi, kinet_qp_num(p.a), tu_addr(src.buf), tu_lkey(&src),
			     tu_addr(dst.buf), kinet_mr_rkey(dst.mr), 128, 1);
		tu_post(&p, w, 1);
	}
	struct kn_cqe64 c;
	cr_assert_eq(tu_poll(p.acq, &c, 5000), 0);
	cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ_ERR);
	cr_assert_eq(tu_cqe_synd(&c), KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	cr_assert_eq(kinet_cqe_reason(&c), KINET_REASON_PEER_GONE);
	cr_assert_eq(tu_poll(p.acq, &c, 5000), 0);
	cr_assert_eq(tu_cqe_synd(&c), KN_SYND_WR_FLUSH_ERR);
	cr_assert_eq(kinet_cqe_reason(&c), KINET_REASON_FLUSHED);
	cr_assert_eq(kinet_qp_ep_info(p.a, &ei), 0);
	cr_assert_eq(ei.state, KINET_EP_FAILED);
	struct kinet_qp_counters qc;
	cr_assert_eq(kinet_qp_counters(p.a, &qc), 0);
	cr_assert_eq(qc.retry_exceeded, 1);
	tu_region_free(&src);
	tu_region_free(&dst);
	tu_rawpair_close(&p);
}

Test(observe, doorbell_before_rts_is_counted_and_ignored)
{
	kinet_ctx *ctx;
	kinet_pd *pd;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	kinet_qp *a, *b;
	cr_assert_eq(kinet_qp_create(pd, NULL, &a), 0);
	cr_assert_eq(kinet_qp_create(pd, NULL, &b), 0);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, pd, 4096, KINET_ACCESS_LOCAL_WRITE, 31), 0);
	cr_assert_eq(tu_region_alloc(&dst, pd, 4096, KINET_ACCESS_ALL, 32), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_INIT, NULL), 0);
	struct kinet_ep_info ei;
	cr_assert_eq(kinet_qp_ep_info(a, &ei), 0);
	cr_assert_eq(ei.state, KINET_EP_CONNECTING);
	uint8_t w[64];
	tu_wqe_write(w, 0, kinet_qp_num(a), tu_addr(src.buf), tu_lkey(&src), tu_addr(dst.buf),
		     kinet_mr_rkey(dst.mr), 512, 1);
	cr_assert_eq(kinet_qp_post_raw(a, w, 1), 0); /* rung in INIT */
	struct kinet_qp_counters c;
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(kinet_qp_counters(a, &c), 0);
		if (c.db_not_ready)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(c.db_not_ready, 1);
	cr_assert_eq(c.posted, 0);
	cr_assert_eq(memcmp(dst.buf, src.buf, 512) == 0, 0, "the WQE ran before RTS");
	/* once connected, the WQE posted before runs */
	struct kinet_qp_remote ra = {.local = b, .qpn = kinet_qp_num(b)};
	struct kinet_qp_remote rb = {.local = a, .qpn = kinet_qp_num(a)};
	cr_assert_eq(kinet_qp_modify(b, KINET_QPS_INIT, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTR, &ra), 0);
	cr_assert_eq(kinet_qp_modify(b, KINET_QPS_RTR, &rb), 0);
	cr_assert_eq(kinet_qp_modify(b, KINET_QPS_RTS, NULL), 0);
	cr_assert_eq(kinet_qp_modify(a, KINET_QPS_RTS, NULL), 0);
	cr_assert_eq(kinet_qp_ep_info(a, &ei), 0);
	cr_assert_eq(ei.state, KINET_EP_READY);
	struct kn_cqe64 cqe;
	cr_assert_eq(tu_poll(kinet_qp_send_cq(a), &cqe, 5000), 0);
	cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ);
	cr_assert_eq(memcmp(dst.buf, src.buf, 512), 0);
	tu_region_free(&src);
	tu_region_free(&dst);
	cr_assert_eq(kinet_qp_destroy(a), 0);
	cr_assert_eq(kinet_qp_destroy(b), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}
