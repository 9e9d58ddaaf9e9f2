/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * BlueFlame doorbells on the software NIC: a WQE written whole into the
 * doorbell register is executed from the register's copy when that copy
 * equals the SQ slot (counters.bf_wqes); a copy that differs from the SQ (a
 * torn write, or a producer whose two copies disagree: the SQ slot holds
 * another valid WQE here, so the data shows which copy ran) is counted in
 * bf_mismatch and the SQ's WQE runs; so does the SQ's WQE when the register
 * holds an older body (a doorbell without one).
 */
#include <criterion/criterion.h>
#include <string.h>
#include "../util/testutil.h"

#define DEPTH 16
#define REGION 65536
#define LEN 256

struct bf_env {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_cq *cq; /* send CQ of a, polled with kinet_cq_poll */
	kinet_qp *a, *b;
	kn_qp *da;
	struct tu_region src, dst;
};

/* QPs in RESET: the caller may prepare queues before bf_connect. */
static void bf_open(struct bf_env *e)
{
	memset(e, 0, sizeof(*e));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT, .engine_threads = 1};
	cr_assert_eq(kinet_open(&ca, &e->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(e->ctx, &e->pd), 0);
	cr_assert_eq(kinet_cq_create(e->ctx, DEPTH, &e->cq), 0);
	struct kinet_qp_attr qa = {.sq_depth = DEPTH, .db_mode = KN_DB_BLUEFLAME, .send_cq = e->cq};
	cr_assert_eq(kinet_qp_create(e->pd, &qa, &e->a), 0);
	struct kinet_qp_attr qb = {.sq_depth = DEPTH};
	cr_assert_eq(kinet_qp_create(e->pd, &qb, &e->b), 0);
	cr_assert_eq(kinet_qp_db_mode(e->a), KN_DB_BLUEFLAME);
	cr_assert_eq(kinet_qp_device(e->a, &e->da), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->pd, REGION, KINET_ACCESS_LOCAL_WRITE, 11), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->pd, REGION, KINET_ACCESS_ALL, 12), 0);
}

static void bf_connect(struct bf_env *e)
{
	cr_assert_eq(kinet_qp_connect_local(e->a, e->b), 0);
}

static void bf_close(struct bf_env *e)
{
	cr_assert(tu_region_canaries_ok(&e->src));
	cr_assert(tu_region_canaries_ok(&e->dst));
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	cr_assert_eq(kinet_qp_destroy(e->a), 0);
	cr_assert_eq(kinet_qp_destroy(e->b), 0);
	cr_assert_eq(kinet_cq_destroy(e->cq), 0);
	cr_assert_eq(kinet_pd_free(e->pd), 0);
	cr_assert_eq(kinet_close(e->ctx), 0);
}

/* A 64-byte RDMA write WQE with index t: LEN bytes src+so -> dst+doff. */
static void mk_write(struct bf_env *e, uint8_t w[64], uint64_t t, size_t so, size_t doff)
{
	memset(w, 0, 64);
	kn_prep_write(e->da, w, t, tu_addr(e->src.buf + so), tu_lkey(&e->src),
		      tu_addr(e->dst.buf + doff), kinet_mr_rkey(e->dst.mr), LEN);
}

/* What device code does in BlueFlame mode: words 1..7, then the ctrl word. */
static void reg_write(struct bf_env *e, const uint8_t w[64])
{
	volatile uint64_t *reg = (volatile uint64_t *)e->da->db;
	uint64_t q[8];
	memcpy(q, w, 64);
	for (int i = 1; i < 8; i++)
		reg[i] = q[i];
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	reg[0] = q[0];
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static uint64_t bf_count(struct bf_env *e)
{
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(e->ctx, &c), 0);
	return c.bf_wqes;
}

static void expect_cqe(struct bf_env *e, uint64_t t)
{
	struct kn_cqe64 c;
	cr_assert_eq(tu_poll(e->cq, &c, 10000), 0, "no CQE for WQE %llu", (unsigned long long)t);
	cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ, "WQE %llu: error CQE, syndrome 0x%x",
		     (unsigned long long)t, tu_cqe_synd(&c));
	cr_assert_eq(tu_cqe_idx(&c), (uint16_t)t);
}

/* Offsets of WQE i: the SQ copy and the register copy name different
 * source and target pieces. */
static size_t off_sq_src(uint64_t i) { return (i % 32) * 2 * LEN; }
static size_t off_bf_src(uint64_t i) { return (i % 32) * 2 * LEN + LEN; }
static size_t off_sq_dst(uint64_t i) { return 16384 + (i % 32) * 2 * LEN; }
static size_t off_bf_dst(uint64_t i) { return 32768 + (i % 32) * 2 * LEN; }

static uint64_t bf_mismatches(struct bf_env *e)
{
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(e->ctx, &c), 0);
	return c.bf_mismatch;
}

/* Every doorbell is a whole WQE in the register (the record is not
 * written, the register alone is a doorbell), the SQ slot holds the same
 * WQE: the register's copy runs. */
Test(blueflame, register_copy_is_executed)
{
	struct bf_env e;
	bf_open(&e);
	bf_connect(&e);
	uint8_t shadow[REGION];
	memcpy(shadow, e.dst.buf, REGION);
	uint64_t bf0 = bf_count(&e);
	const int n = 3 * DEPTH + 5; /* wraps the SQ */
	for (uint64_t t = 0; t < (uint64_t)n; t++) {
		/* fresh data each time, so a stale copy would show */
		tu_fill_random(e.src.buf, REGION, 100 + t);
		uint8_t w[64];
		mk_write(&e, w, t, off_bf_src(t), off_bf_dst(t));
		memcpy(kn_wqe_ptr(e.da, t), w, 64);
		reg_write(&e, w);
		expect_cqe(&e, t);
		memcpy(shadow + off_bf_dst(t), e.src.buf + off_bf_src(t), LEN);
		cr_assert_eq(memcmp(e.dst.buf, shadow, REGION), 0,
			     "WQE %llu: the target differs from the WQE's write",
			     (unsigned long long)t);
	}
	cr_assert_eq(bf_count(&e) - bf0, (uint64_t)n);
	cr_assert_eq(bf_mismatches(&e), 0);
	bf_close(&e);
}

/* The register's copy differs from the SQ slot's WQE: the SQ's WQE runs, and
 * the refused copy is counted. */
Test(blueflame, register_copy_differing_from_sq_is_refused)
{
	struct bf_env e;
	bf_open(&e);
	bf_connect(&e);
	uint8_t shadow[REGION];
	memcpy(shadow, e.dst.buf, REGION);
	uint64_t bf0 = bf_count(&e), mm0 = bf_mismatches(&e);
	const int n = 3 * DEPTH + 5;
	for (uint64_t t = 0; t < (uint64_t)n; t++) {
		tu_fill_random(e.src.buf, REGION, 300 + t);
		uint8_t wsq[64], wbf[64];
		mk_write(&e, wsq, t, off_sq_src(t), off_sq_dst(t));
		mk_write(&e, wbf, t, off_bf_src(t), off_bf_dst(t));
		memcpy(kn_wqe_ptr(e.da, t), wsq, 64);
		reg_write(&e, wbf);
		expect_cqe(&e, t);
		memcpy(shadow + off_sq_dst(t), e.src.buf + off_sq_src(t), LEN);
		cr_assert_eq(memcmp(e.dst.buf, shadow, REGION), 0,
			     "WQE %llu: the target differs from the SQ copy's write",
			     (unsigned long long)t);
	}
	cr_assert_eq(bf_count(&e), bf0);
	cr_assert_eq(bf_mismatches(&e) - mm0, (uint64_t)n);
	bf_close(&e);
}

/* The register names WQE 0, but the record already says 2: a later ringer
 * may have been writing the register meanwhile, so the copy is not trusted
 * and both WQEs come from the SQ. */
Test(blueflame, later_doorbell_falls_back_to_sq)
{
	struct bf_env e;
	bf_open(&e);
	uint8_t shadow[REGION];
	memcpy(shadow, e.dst.buf, REGION);
	uint8_t w[64];
	for (uint64_t t = 0; t < 2; t++) {
		mk_write(&e, w, t, off_sq_src(t), off_sq_dst(t));
		memcpy(kn_wqe_ptr(e.da, t), w, 64);
	}
	mk_write(&e, w, 0, off_bf_src(0), off_bf_dst(0));
	reg_write(&e, w);
	e.da->dbrec[KN_SND_DBR] = kn_htobe32(2);
	uint64_t bf0 = bf_count(&e);
	bf_connect(&e); /* the engine sees record and register together */
	for (uint64_t t = 0; t < 2; t++) {
		expect_cqe(&e, t);
		memcpy(shadow + off_sq_dst(t), e.src.buf + off_sq_src(t), LEN);
	}
	cr_assert_eq(memcmp(e.dst.buf, shadow, REGION), 0, "only the SQ's WQEs may have run");
	cr_assert_eq(bf_count(&e), bf0);
	bf_close(&e);
}

/* A doorbell without a body (a word with ds 0 naming the next producer
 * index, as device code writes when the ringer does not hold the last WQE)
 * over the body of an earlier WQE: the old body must not run again; the SQ
 * has the WQE. */
Test(blueflame, doorbell_without_body_uses_sq)
{
	struct bf_env e;
	bf_open(&e);
	bf_connect(&e);
	uint8_t shadow[REGION];
	memcpy(shadow, e.dst.buf, REGION);
	uint64_t bf0 = bf_count(&e);
	uint8_t w[64];
	mk_write(&e, w, 0, off_bf_src(0), off_bf_dst(0));
	memcpy(kn_wqe_ptr(e.da, 0), w, 64);
	reg_write(&e, w);
	expect_cqe(&e, 0);
	memcpy(shadow + off_bf_dst(0), e.src.buf + off_bf_src(0), LEN);
	cr_assert_eq(bf_count(&e) - bf0, 1);
	/* new source bytes: running the old body again would change its target */
	tu_fill_random(e.src.buf, REGION, 7777);
	mk_write(&e, w, 1, off_sq_src(1), off_sq_dst(1));
	memcpy(kn_wqe_ptr(e.da, 1), w, 64);
	uint64_t word = 0;
	uint32_t w0 = kn_htobe32(2u << 8), w1 = kn_htobe32(kinet_qp_num(e.a) << 8); /* ds 0 */
	memcpy(&word, &w0, 4);
	memcpy((uint8_t *)&word + 4, &w1, 4);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint64_t *)e.da->db = word;
	expect_cqe(&e, 1);
	memcpy(shadow + off_sq_dst(1), e.src.buf + off_sq_src(1), LEN);
	cr_assert_eq(memcmp(e.dst.buf, shadow, REGION), 0,
		     "the SQ's WQE 1 ran, and nothing else");
	cr_assert_eq(bf_count(&e) - bf0, 1);
	bf_close(&e);
}

/* Several threads on one shared BlueFlame QP: ringers overwrite each other's
 * register writes while the engine copies them. Every WQE writes its own
 * random bytes to its own place, so a torn copy taken for a WQE would put
 * wrong bytes somewhere. */
struct storm {
	struct tu_pair p;
	struct tu_region src, dst;
};

static int storm_fn(int tid, int n, void *arg)
{
	(void)n;
	struct storm *s = arg;
	for (uint32_t i = 0; i < 2000; i++) {
		size_t off = ((size_t)tid * 2000 + i) * 8;
		kn_ticket_t t;
		TU_CHECK(kn_put(s->p.da, tu_addr(s->dst.buf + off), kinet_mr_rkey(s->dst.mr),
				s->src.buf + off, tu_lkey(&s->src), 8,
				&t) == 0,
			 "put %u", i);
	}
	int rc = kn_quiet(s->p.da);
	uint32_t vend = 0;
	TU_CHECK(rc == 0, "quiet: %d, syndrome 0x%x (vendor 0x%x)", rc, kn_qp_error(s->p.da, &vend),
		 vend);
	return 0;
}

Test(blueflame, shared_qp_ringers_race)
{
	struct storm s;
	struct kinet_qp_attr at = {.sq_depth = 64, .db_mode = KN_DB_BLUEFLAME,
				   .share = KN_SHARE_GPU};
	cr_assert_eq(tu_pair_open(&s.p, &at), 0);
	const int nt = 4;
	size_t len = (size_t)nt * 2000 * 8;
	cr_assert_eq(tu_region_alloc(&s.src, s.p.pd, len, KINET_ACCESS_LOCAL_WRITE, 21), 0);
	cr_assert_eq(tu_region_alloc(&s.dst, s.p.pd, len, KINET_ACCESS_ALL, 22), 0);
	int rc = kinet_host_exec(nt, storm_fn, &s);
	cr_assert_eq(rc, 0, "%s", tu_fail_msg);
	cr_assert_eq(memcmp(s.src.buf, s.dst.buf, len), 0, "a WQE ran with bytes of another");
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(s.p.ctx, &c), 0);
	cr_assert_leq(c.bf_wqes, c.wqes);
	cr_assert(tu_region_canaries_ok(&s.dst));
	tu_region_free(&s.src);
	tu_region_free(&s.dst);
	tu_pair_close(&s.p);
}

/* Many ringers on a shared QP with a short SQ: a slot is consumed and
 * written again by another thread within microseconds of being published.
 * A ringer that read its doorbell word (or BlueFlame body) back from the SQ
 * after publishing could then name a WQE that is not published yet; the
 * engine would run a stale slot (an error CQE, or another WQE's bytes).
 * The ringer's own copy, taken before publishing, never does. */
static void short_sq_storm(int db_mode)
{
	struct storm s;
	struct kinet_qp_attr at = {.sq_depth = 4, .db_mode = db_mode, .share = KN_SHARE_GPU};
	cr_assert_eq(tu_pair_open(&s.p, &at), 0);
	const int nt = 4;
	size_t len = (size_t)nt * 2000 * 8;
	cr_assert_eq(tu_region_alloc(&s.src, s.p.pd, len, KINET_ACCESS_LOCAL_WRITE, 31), 0);
	cr_assert_eq(tu_region_alloc(&s.dst, s.p.pd, len, KINET_ACCESS_ALL, 32), 0);
	for (int round = 0; round < 10; round++) {
		tu_fill_random(s.src.buf, len, 40 + (uint64_t)round);
		int rc = kinet_host_exec(nt, storm_fn, &s);
		cr_assert_eq(rc, 0, "round %d: %s", round, tu_fail_msg);
		cr_assert_eq(memcmp(s.src.buf, s.dst.buf, len), 0, "round %d: a WQE ran wrong", round);
	}
	cr_assert(tu_region_canaries_ok(&s.dst));
	tu_region_free(&s.src);
	tu_region_free(&s.dst);
	tu_pair_close(&s.p);
}

Test(blueflame, short_sq_ringers_blueflame) { short_sq_storm(KN_DB_BLUEFLAME); }
Test(blueflame, short_sq_ringers_doorbell) { short_sq_storm(KN_DB_GPU); }

/* kinet's own producer on the software NIC: rings alternate between the
 * UAR's two registers, BlueFlame writes the whole WQE for single-WQE posts
 * only (a two-WQE post rings the last WQE's ctrl word), the doorbell mode
 * writes 8 bytes. */
static int rings_fn(int tid, int n, void *arg)
{
	(void)tid;
	(void)n;
	struct bf_env *e = arg;
	return tu_check_rings(e->da, e->src.buf, tu_lkey(&e->src), e->dst.buf,
			      kinet_mr_rkey(e->dst.mr), (uint64_t *)(e->dst.buf + REGION - 64),
			      kinet_mr_rkey(e->dst.mr), 3 * DEPTH);
}

static void rings_case(int db_mode)
{
	struct tu_pair p;
	struct kinet_qp_attr at = {.sq_depth = DEPTH, .db_mode = db_mode};
	cr_assert_eq(tu_pair_open(&p, &at), 0);
	cr_assert_eq(p.da->bf_alt, KN_BF_SIZE, "the software NIC's two registers");
	struct bf_env e = {.ctx = p.ctx, .pd = p.pd, .da = p.da};
	cr_assert_eq(tu_region_alloc(&e.src, p.pd, REGION, KINET_ACCESS_LOCAL_WRITE, 51), 0);
	cr_assert_eq(tu_region_alloc(&e.dst, p.pd, REGION, KINET_ACCESS_ALL, 52), 0);
	uint64_t bf0 = bf_count(&e), mm0 = bf_mismatches(&e);
	int rc = kinet_host_exec(1, rings_fn, &e);
	cr_assert_eq(rc, 0, "%s", tu_fail_msg);
	/* the GPU engine (KINET_GPU_ENGINE) runs WQEs from the SQ, never from
	 * the register copies, and hands its counts over when it gives the QP
	 * back */
	uint64_t gpu = tu_engine_settle(p.a, 5000);
	cr_assert_neq(gpu, UINT64_MAX, "the GPU engine kept the QP");
	uint64_t bf = bf_count(&e) - bf0, mm = bf_mismatches(&e) - mm0;
	if (db_mode == KN_DB_BLUEFLAME && gpu) {
		cr_assert_leq(bf + mm, 3 * DEPTH + 1);
	} else if (db_mode == KN_DB_BLUEFLAME) {
		/* ascending stores: the engine may look before the body has
		 * landed, and then runs the SQ's copy; the sentinel the check
		 * leaves in words 1..7 before the two-WQE post is a body that
		 * differs from the SQ: one refusal more */
		cr_assert_gt(bf, 0, "no register copy was ever used");
		cr_assert_leq(bf + mm, 3 * DEPTH + 1, "bf %llu mm %llu", (unsigned long long)bf, (unsigned long long)mm);
	} else {
		cr_assert_eq(bf, 0);
	}
	cr_assert(tu_region_canaries_ok(&e.dst));
	tu_region_free(&e.src);
	tu_region_free(&e.dst);
	tu_pair_close(&p);
}

Test(blueflame, rings_alternate_blueflame) { rings_case(KN_DB_BLUEFLAME); }
Test(blueflame, rings_alternate_doorbell) { rings_case(KN_DB_GPU); }
