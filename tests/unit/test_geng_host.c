/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU engine's code on a CPU thread (KINET_GPU_ENGINE=host): it really
 * serves the WQEs (kinet_qp_ep_info: engine GPU_HOST, gpu_wqes), the data
 * lands, and every give-back ends as on the CPU engine, each WQE completed
 * exactly once: a bad WQE in the middle of a stream (its error CQE from the
 * CPU engine, then flushes), a move to ERR while the GPU engine has the QP,
 * and a key revoked while it has it.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../util/testutil.h"

#define DEPTH 256
#define RLEN (1u << 20)

static void gh_env(void)
{
	setenv("KINET_GPU_ENGINE", "host", 1);
	/* the executor stays while a case runs (it exits after this long idle) */
	setenv("KINET_GPU_ENGINE_IDLE_US", "10000000", 1);
}

struct gh {
	struct tu_rawpair p; /* acq: a's own send CQ (the GPU engine serves only such QPs) */
	struct tu_region src, dst;
	uint8_t *orig; /* dst as allocated */
	uint32_t qpn;
	uint64_t s;
};

static void gh_open(struct gh *g, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	cr_assert_eq(tu_rawpair_open(&g->p, DEPTH, 0), 0);
	cr_assert_eq(kinet_qp_send_cq(g->p.a), g->p.acq, "a's own send CQ expected");
	cr_assert_eq(tu_region_alloc(&g->src, g->p.pd, RLEN, KINET_ACCESS_LOCAL_WRITE, seed), 0);
	cr_assert_eq(tu_region_alloc(&g->dst, g->p.pd, RLEN, KINET_ACCESS_ALL, seed + 1), 0);
	g->orig = malloc(RLEN);
	cr_assert(g->orig);
	memcpy(g->orig, g->dst.buf, RLEN);
	g->qpn = kinet_qp_num(g->p.a);
	g->s = seed;
}

static void gh_close(struct gh *g)
{
	cr_assert(tu_region_canaries_ok(&g->src));
	cr_assert(tu_region_canaries_ok(&g->dst));
	tu_region_free(&g->src);
	tu_region_free(&g->dst);
	free(g->orig);
	tu_rawpair_close(&g->p);
}

/* WQE t writes len(t) bytes from src + off(t) to dst + off(t): distinct
 * ranges per ticket, so each landed write is checked on its own. */
static uint32_t w_len(uint64_t t) { return 1 + (uint32_t)((t * 2654435761u) % 2000); }
static uint64_t w_off(uint64_t t) { return (t % 512) * 2048; }

static uint64_t post_write(struct gh *g, uint32_t rkey)
{
	uint8_t w[64];
	uint64_t t = g->p.pi;
	tu_wqe_write(w, (uint16_t)t, g->qpn, tu_addr(g->src.buf + w_off(t)), tu_lkey(&g->src),
		     tu_addr(g->dst.buf + w_off(t)), rkey, w_len(t), 1);
	return tu_post(&g->p, w, 1);
}

static void expect_cqe(struct gh *g, uint64_t t, uint8_t synd)
{
	struct kn_cqe64 c;
	cr_assert_eq(tu_poll(g->p.acq, &c, 10000), 0, "no CQE for WQE %llu",
		     (unsigned long long)t);
	if (!synd) {
		cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ, "WQE %llu: op %u syndrome 0x%x",
			     (unsigned long long)t, tu_cqe_op(&c), tu_cqe_synd(&c));
	} else {
		cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ_ERR, "WQE %llu: op %u, error expected",
			     (unsigned long long)t, tu_cqe_op(&c));
		cr_assert_eq(tu_cqe_synd(&c), synd, "WQE %llu: syndrome 0x%x, 0x%x expected",
			     (unsigned long long)t, tu_cqe_synd(&c), synd);
	}
	cr_assert_eq(tu_cqe_idx(&c), (uint16_t)t, "CQE of WQE %u, %llu expected", tu_cqe_idx(&c),
		     (unsigned long long)t);
}

/* Nothing more on the CQ: every WQE completed once. */
static void expect_no_more(struct gh *g)
{
	struct kn_cqe64 c;
	int rc = tu_poll(g->p.acq, &c, 200);
	cr_assert_eq(rc, -ETIMEDOUT, "an extra CQE: WQE %u, op %u, syndrome 0x%x",
		     tu_cqe_idx(&c), tu_cqe_op(&c), tu_cqe_synd(&c));
}

static int landed(struct gh *g, uint64_t t)
{
	return memcmp(g->dst.buf + w_off(t), g->src.buf + w_off(t), w_len(t)) == 0;
}

static int untouched(struct gh *g, uint64_t t)
{
	return memcmp(g->dst.buf + w_off(t), g->orig + w_off(t), w_len(t)) == 0;
}

static struct kinet_ep_info info(struct gh *g)
{
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(g->p.a, &e), 0);
	return e;
}

/* n good writes, each completed and checked; returns once the host executor
 * has the QP (it takes it between two WQEs of a busy QP). */
static void warm_up(struct gh *g, int n)
{
	int seen = 0;
	for (int i = 0; i < n || !seen; i++) {
		cr_assert_lt(i, 20000, "the host executor never took the QP: %s",
			     info(g).engine_why);
		uint64_t t = post_write(g, tu_lkey(&g->dst));
		expect_cqe(g, t, 0);
		cr_assert(landed(g, t), "WQE %llu: data", (unsigned long long)t);
		seen |= info(g).engine == KINET_ENGINE_GPU_HOST;
	}
	cr_assert_eq(info(g).engine, KINET_ENGINE_GPU_HOST, "%s", info(g).engine_why);
}

TestSuite(geng_host, .init = gh_env);

/* The host executor serves the WQEs: engine and counts reported, data right. */
Test(geng_host, serves)
{
	struct gh g;
	gh_open(&g, 11);
	struct kinet_ep_info e = info(&g);
	cr_assert(strstr(e.engine_why, "CPU thread") != NULL, "eligible expected: %s",
		  e.engine_why);
	warm_up(&g, 50);
	uint64_t before = info(&g).gpu_wqes;
	/* bursts of 64 (more than one pass of the executor), then their CQEs */
	for (int b = 0; b < 8; b++) {
		uint64_t t0 = g.p.pi;
		for (int i = 0; i < 64; i++)
			post_write(&g, tu_lkey(&g.dst));
		for (uint64_t t = t0; t < t0 + 64; t++)
			expect_cqe(&g, t, 0);
		for (uint64_t t = t0; t < t0 + 64; t++)
			cr_assert(landed(&g, t), "WQE %llu: data", (unsigned long long)t);
	}
	expect_no_more(&g);
	/* counts handed over with the QP: take it back (ERR) and read them */
	cr_assert_eq(kinet_qp_modify(g.p.a, KINET_QPS_ERR, NULL), 0);
	e = info(&g);
	cr_assert_eq(e.engine, KINET_ENGINE_CPU);
	cr_assert_geq(e.gpu_wqes, before + 8 * 64, "gpu_wqes %llu, at least %llu expected",
		      (unsigned long long)e.gpu_wqes, (unsigned long long)(before + 8 * 64));
	struct kinet_qp_counters qc;
	cr_assert_eq(kinet_qp_counters(g.p.a, &qc), 0);
	gh_close(&g);
}

/* Counters read while the GPU engine holds the QP are exact: each read
 * brings the engine's counts in (the QP is asked back, then taken again
 * with its next busy pass), as the CPU engine's counts are at any time. */
Test(geng_host, counters_exact_while_held)
{
	struct gh g;
	gh_open(&g, 21);
	warm_up(&g, 20);
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(info(&g).engine, KINET_ENGINE_GPU_HOST, "%s", info(&g).engine_why);
		struct kinet_qp_counters q0, q1;
		struct kinet_counters c0, c1;
		cr_assert_eq(kinet_qp_counters(g.p.a, &q0), 0);
		cr_assert_eq(kinet_ctx_counters(g.p.ctx, &c0), 0);
		uint64_t t0 = g.p.pi, bytes = 0;
		int n = 40 + 30 * round;
		for (int i = 0; i < n; i++) {
			bytes += w_len(g.p.pi);
			post_write(&g, tu_lkey(&g.dst));
		}
		for (uint64_t t = t0; t < t0 + (uint64_t)n; t++)
			expect_cqe(&g, t, 0);
		for (uint64_t t = t0; t < t0 + (uint64_t)n; t++)
			cr_assert(landed(&g, t), "WQE %llu: data", (unsigned long long)t);
		/* no settling wait: the counters at once */
		cr_assert_eq(kinet_qp_counters(g.p.a, &q1), 0);
		cr_assert_eq(kinet_ctx_counters(g.p.ctx, &c1), 0);
		cr_assert_eq(q1.completed - q0.completed, (uint64_t)n,
			     "round %d: %llu completed of %d", round,
			     (unsigned long long)(q1.completed - q0.completed), n);
		cr_assert_eq(q1.cqes - q0.cqes, (uint64_t)n, "round %d: cqes", round);
		cr_assert_eq(q1.bytes - q0.bytes, bytes, "round %d: bytes %llu of %llu", round,
			     (unsigned long long)(q1.bytes - q0.bytes), (unsigned long long)bytes);
		cr_assert_eq(c1.wqes - c0.wqes, (uint64_t)n, "round %d: context wqes %llu of %d",
			     round, (unsigned long long)(c1.wqes - c0.wqes), n);
		cr_assert_eq(c1.bytes - c0.bytes, bytes, "round %d: context bytes", round);
		/* and the QP goes back to the executor with its next WQEs */
		warm_up(&g, 1);
	}
	expect_no_more(&g);
	gh_close(&g);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* RDMA read of len(t) bytes from dst + off(t) into src + off(t). */
static uint64_t post_read(struct gh *g)
{
	uint8_t w[64];
	uint64_t t = g->p.pi;
	tu_wqe_write(w, (uint16_t)t, g->qpn, tu_addr(g->src.buf + w_off(t)), tu_lkey(&g->src),
		     tu_addr(g->dst.buf + w_off(t)), tu_lkey(&g->dst), w_len(t), 1);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)t, KN_OPCODE_RDMA_READ, 0, g->qpn,
			KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	return tu_post(&g->p, w, 1);
}

/* KINET_FAULT rules apply to a QP the GPU engine serves, added before or
 * while it holds the QP: the WQEs a rule may match go to the CPU engine,
 * which applies the rule exactly as when it serves the QP alone (after=2,
 * count=1: the third read fails, injected), the others stay on the GPU
 * engine. A delay rule holds a write and the WQEs behind it, in order. */
Test(geng_host, fault_rules_apply_while_held)
{
	struct gh g;
	gh_open(&g, 31);
	warm_up(&g, 20);
	/* a delay on the next write: it and the reads behind it complete late, in order */
	cr_assert_eq(kinet_fault_add(g.p.ctx, "action=delay,op=write,us=3000,count=1"), 1);
	uint64_t ns = mono_ns();
	uint64_t t0 = post_write(&g, tu_lkey(&g.dst));
	uint64_t t1 = post_write(&g, tu_lkey(&g.dst));
	uint64_t t2 = post_read(&g);
	expect_cqe(&g, t0, 0);
	uint64_t took = mono_ns() - ns;
	cr_assert_geq(took, 2900000ull, "the delayed write completed after %llu ns",
		      (unsigned long long)took);
	expect_cqe(&g, t1, 0);
	expect_cqe(&g, t2, 0);
	cr_assert(landed(&g, t0) && landed(&g, t1));
	cr_assert(landed(&g, t2), "read %llu: data", (unsigned long long)t2);
	/* the writes go back to the GPU engine once the rule is spent */
	warm_up(&g, 1);
	uint64_t gw = info(&g).gpu_wqes;
	/* an error on the third read from now */
	cr_assert_eq(kinet_fault_add(g.p.ctx, "action=error,op=read,after=2,count=1,synd=remote_op"),
		     1);
	uint64_t r[3], w[6];
	for (int i = 0; i < 3; i++) {
		/* one at a time: the QP goes back to the GPU engine between reads */
		w[2 * i] = post_write(&g, tu_lkey(&g.dst));
		expect_cqe(&g, w[2 * i], 0);
		w[2 * i + 1] = post_write(&g, tu_lkey(&g.dst));
		expect_cqe(&g, w[2 * i + 1], 0);
		r[i] = post_read(&g);
		expect_cqe(&g, r[i], i < 2 ? 0 : KN_SYND_REMOTE_OP_ERR);
	}
	expect_no_more(&g);
	for (int i = 0; i < 6; i++)
		cr_assert(landed(&g, w[i]), "write %d: data", i);
	cr_assert(landed(&g, r[0]) && landed(&g, r[1]));
	struct kinet_qp_counters qc;
	cr_assert_eq(kinet_qp_counters(g.p.a, &qc), 0);
	cr_assert_eq(qc.faults, 2, "faults %llu, 2 injected", (unsigned long long)qc.faults);
	/* writes between the reads ran on the GPU engine */
	cr_assert_gt(info(&g).gpu_wqes, gw, "gpu_wqes %llu: none since the rule",
		     (unsigned long long)info(&g).gpu_wqes);
	gh_close(&g);
}

/* A bad WQE in the middle of a stream the host executor serves: it gives the
 * QP back there; the CPU engine writes the error CQE and flushes the rest. */
Test(geng_host, bad_wqe_mid_stream)
{
	struct gh g;
	gh_open(&g, 22);
	warm_up(&g, 20);
	uint64_t g0 = info(&g).gpu_wqes;
	memcpy(g.orig, g.dst.buf, RLEN); /* what the warm-up left */
	uint64_t t0 = g.p.pi;
	for (int i = 0; i < 30; i++)
		post_write(&g, tu_lkey(&g.dst));
	uint64_t bad = post_write(&g, tu_lkey(&g.dst) ^ 0x80); /* a wrong tag: unknown key */
	for (int i = 0; i < 10; i++)
		post_write(&g, tu_lkey(&g.dst));
	for (uint64_t t = t0; t < bad; t++)
		expect_cqe(&g, t, 0);
	expect_cqe(&g, bad, KN_SYND_REMOTE_ACCESS_ERR);
	for (uint64_t t = bad + 1; t < g.p.pi; t++)
		expect_cqe(&g, t, KN_SYND_WR_FLUSH_ERR);
	expect_no_more(&g);
	for (uint64_t t = t0; t < bad; t++)
		cr_assert(landed(&g, t), "WQE %llu: data", (unsigned long long)t);
	for (uint64_t t = bad; t < g.p.pi; t++)
		cr_assert(untouched(&g, t), "WQE %llu wrote after the error", (unsigned long long)t);
	struct kinet_ep_info e = info(&g);
	cr_assert_eq(e.qp_state, KINET_QPS_ERR);
	cr_assert_eq(e.engine, KINET_ENGINE_CPU);
	/* the good WQEs before it ran on the host executor, which gave it back */
	cr_assert_geq(e.gpu_wqes, g0 + (bad - t0), "gpu_wqes %llu: the WQEs before the bad "
		      "one on the GPU engine expected", (unsigned long long)e.gpu_wqes);
	/* usable again */
	cr_assert_eq(tu_rawpair_reconnect(&g.p), 0);
	uint64_t t = post_write(&g, tu_lkey(&g.dst));
	expect_cqe(&g, t, 0);
	cr_assert(landed(&g, t));
	gh_close(&g);
}

/* A move to ERR while the host executor has the QP and WQEs are in the
 * queue: each completes exactly once, successes first, then flushes. */
Test(geng_host, modify_to_err_while_taken)
{
	struct gh g;
	gh_open(&g, 33);
	for (int round = 0; round < 5; round++) {
		warm_up(&g, 20);
		uint64_t t0 = g.p.pi;
		for (int i = 0; i < 200; i++)
			post_write(&g, tu_lkey(&g.dst));
		cr_assert_eq(kinet_qp_modify(g.p.a, KINET_QPS_ERR, NULL), 0);
		bool flushing = false;
		for (uint64_t t = t0; t < g.p.pi; t++) {
			struct kn_cqe64 c;
			cr_assert_eq(tu_poll(g.p.acq, &c, 10000), 0, "no CQE for WQE %llu",
				     (unsigned long long)t);
			cr_assert_eq(tu_cqe_idx(&c), (uint16_t)t, "CQE of WQE %u, %llu expected",
				     tu_cqe_idx(&c), (unsigned long long)t);
			if (tu_cqe_op(&c) == KN_CQE_REQ) {
				cr_assert(!flushing, "WQE %llu succeeded after a flush",
					  (unsigned long long)t);
				cr_assert(landed(&g, t), "WQE %llu: data", (unsigned long long)t);
			} else {
				cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ_ERR);
				cr_assert_eq(tu_cqe_synd(&c), KN_SYND_WR_FLUSH_ERR,
					     "WQE %llu: syndrome 0x%x", (unsigned long long)t,
					     tu_cqe_synd(&c));
				flushing = true;
			}
		}
		expect_no_more(&g);
		/* WQEs posted after the move to ERR are flushed, never executed
		 * (nor is the QP handed to the GPU engine again in ERR) */
		memcpy(g.orig, g.dst.buf, RLEN);
		uint64_t t1 = g.p.pi;
		for (int i = 0; i < 5; i++)
			post_write(&g, tu_lkey(&g.dst));
		for (uint64_t t = t1; t < g.p.pi; t++)
			expect_cqe(&g, t, KN_SYND_WR_FLUSH_ERR);
		expect_no_more(&g);
		cr_assert_eq(memcmp(g.dst.buf, g.orig, RLEN), 0, "a write after ERR landed");
		cr_assert_eq(info(&g).engine, KINET_ENGINE_CPU, "%s", info(&g).engine_why);
		cr_assert_eq(tu_rawpair_reconnect(&g.p), 0);
	}
	gh_close(&g);
}

/* A key revoked while the host executor has the QP: the next WQE naming it
 * fails once (remote access), the ones behind it are flushed. */
Test(geng_host, revoke_while_taken)
{
	struct gh g;
	gh_open(&g, 44);
	warm_up(&g, 20);
	cr_assert_eq(kinet_mr_revoke(g.dst.mr), 0);
	memcpy(g.orig, g.dst.buf, RLEN); /* what the writes so far left */
	uint64_t bad = post_write(&g, tu_lkey(&g.dst));
	for (int i = 0; i < 10; i++)
		post_write(&g, tu_lkey(&g.dst));
	expect_cqe(&g, bad, KN_SYND_REMOTE_ACCESS_ERR);
	for (uint64_t t = bad + 1; t < g.p.pi; t++)
		expect_cqe(&g, t, KN_SYND_WR_FLUSH_ERR);
	expect_no_more(&g);
	cr_assert_eq(memcmp(g.dst.buf, g.orig, RLEN), 0, "a revoked region was written");
	cr_assert_eq(info(&g).qp_state, KINET_QPS_ERR);
	gh_close(&g);
}
