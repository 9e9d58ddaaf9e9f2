/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared QPs: 8 host-executor threads posting to one QP (KN_SHARE_GPU and
 * KN_SHARE_CTA), each writing its own random region, every byte verified;
 * a shared atomic counter; a full SQ that blocks and then proceeds, both
 * with many posting threads on a tiny SQ and with a target that is not
 * ready (no receive buffer) until the test decides so.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define NT 8
#define PER (256u * 1024) /* bytes of each thread's region */

struct senv {
	struct tu_pair p;
	struct tu_region src, dst, back;
	uint64_t *counter; /* in dst, past the threads' regions */
	int round;
	int ops;             /* about this many WQEs per thread per round */
	uint64_t adds[NT];   /* fetch-adds of each thread on the counter */
};

static void sopen(struct senv *e, const struct kinet_qp_attr *at)
{
	memset(e, 0, sizeof(*e));
	cr_assert_eq(tu_pair_open(&e->p, at), 0);
	size_t len = (size_t)NT * PER + 4096;
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, len, KINET_ACCESS_LOCAL_WRITE, 31), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, len, KINET_ACCESS_ALL, 32), 0);
	cr_assert_eq(tu_region_alloc(&e->back, e->p.pd, len, KINET_ACCESS_LOCAL_WRITE, 33), 0);
	e->counter = (uint64_t *)(e->dst.buf + (size_t)NT * PER);
	*e->counter = 0;
	tu_fail_msg[0] = 0;
}

static void sclose(struct senv *e)
{
	cr_assert(tu_region_canaries_ok(&e->src) && tu_region_canaries_ok(&e->dst) &&
		  tu_region_canaries_ok(&e->back), "a canary changed");
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_region_free(&e->back);
	tu_pair_close(&e->p);
}

/* Each thread covers its region of dst with writes of random sizes (inline
 * ones too), adds to the shared counter, reads a part back, and checks. */
static int region_fn(int tid, int n, void *arg)
{
	(void)n;
	struct senv *e = arg;
	kn_qp *q = e->p.da;
	uint64_t seed = (uint64_t)tid * 1000003 + (uint64_t)e->round * 17 + 1;
	uint8_t *src = e->src.buf + (size_t)tid * PER, *dst = e->dst.buf + (size_t)tid * PER;
	uint8_t *back = e->back.buf + (size_t)tid * PER;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	tu_fill_random(src, PER, seed);
	size_t off = 0;
	int nops = 0;
	kn_ticket_t last = 0;
	while (off < PER) {
		uint32_t len = 1 + (uint32_t)(tu_rand64(&seed) % (2 * PER / (uint32_t)e->ops));
		if (len > PER - off)
			len = (uint32_t)(PER - off);
		int rc;
		if (len <= KN_MAX_INLINE_WRITE && (tu_rand64(&seed) & 1))
			rc = kn_put_inline(q, tu_addr(dst + off), rkey, src + off, len, &last);
		else
			rc = kn_put(q, tu_addr(dst + off), rkey, src + off, tu_lkey(&e->src), len, &last);
		TU_CHECK(rc == 0, "thread %d: put: %d", tid, rc);
		if (++nops % 7 == 0) {
			uint64_t old;
			TU_CHECK(kn_atomic_fetch_add(q, tu_addr(e->counter), rkey, 1,
						     (uint64_t *)(back + PER - 8), tu_lkey(&e->back),
						     &old) == 0, "thread %d: fetch-add", tid);
			e->adds[tid]++;
		}
		if (nops % 13 == 0)
			TU_CHECK(kn_wait(q, last) == 0, "thread %d: wait", tid);
		off += len;
	}
	TU_CHECK(kn_wait(q, last) == 0, "thread %d: last put", tid);
	/* the region, read back through the same shared QP */
	kn_ticket_t t;
	TU_CHECK(kn_get(q, back, tu_lkey(&e->back), tu_addr(dst), rkey, PER - 8, &t) == 0,
		 "thread %d: get", tid);
	TU_CHECK(kn_wait(q, t) == 0, "thread %d: get failed", tid);
	TU_CHECK(memcmp(back, src, PER - 8) == 0, "thread %d: read back differs", tid);
	TU_CHECK(kn_quiet(q) == 0, "thread %d: quiet", tid);
	return 0;
}

static void shared_case(int share, uint32_t sq_depth, int ops, int rounds)
{
	struct senv e;
	struct kinet_qp_attr at = {.sq_depth = sq_depth, .share = share};
	sopen(&e, &at);
	e.ops = ops;
	cr_assert_eq(e.p.da->share, (uint32_t)share);
	for (e.round = 0; e.round < rounds; e.round++) {
		cr_assert_eq(kinet_host_exec(NT, region_fn, &e), 0, "round %d: %s", e.round,
			     tu_fail_msg);
		uint64_t expected = 0;
		for (int t = 0; t < NT; t++)
			expected += e.adds[t];
		for (int t = 0; t < NT; t++)
			cr_assert_arr_eq(e.dst.buf + (size_t)t * PER, e.src.buf + (size_t)t * PER, PER,
					 "round %d: region of thread %d differs", e.round, t);
		cr_assert_eq(*e.counter, expected, "shared counter %llu, expected %llu",
			     (unsigned long long)*e.counter, (unsigned long long)expected);
		cr_assert_gt(expected, 0);
	}
	kn_qp *q = e.p.da;
	cr_assert_eq(q->st->resv, q->st->ready, "reserved %llu, published %llu",
		     (unsigned long long)q->st->resv, (unsigned long long)q->st->ready);
	cr_assert_eq(q->st->done, q->st->resv);
	cr_assert_eq(kn_qp_error(q, NULL), 0);
	sclose(&e);
}

Test(shared, gpu_scope_8_threads)
{
	shared_case(KN_SHARE_GPU, 64, 64, 3);
}

Test(shared, cta_scope_8_threads)
{
	shared_case(KN_SHARE_CTA, 64, 64, 2);
}

/* requester and responder on two engine threads */
Test(shared, gpu_scope_8_threads_two_engines)
{
	tu_engine_threads = 2;
	shared_case(KN_SHARE_GPU, 32, 64, 2);
}

/* sq_depth 4, 8 threads: nearly every reservation finds the SQ full. */
Test(shared, full_sq_blocks_then_proceeds)
{
	shared_case(KN_SHARE_GPU, 4, 200, 2);
}

/* put_signal reserves two slots at once, on an SQ of 2 (two slots, always
 * full) and of 4, from 4 threads. */
struct psenv {
	struct senv e;
	volatile uint64_t *sig;
};

static int put_signal_fn(int tid, int n, void *arg)
{
	(void)n;
	struct psenv *ps = arg;
	struct senv *e = &ps->e;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	uint64_t seed = (uint64_t)tid + 5;
	uint8_t *src = e->src.buf + (size_t)tid * PER, *dst = e->dst.buf + (size_t)tid * PER;
	tu_fill_random(src, PER, seed);
	for (int i = 0; i < 100; i++) {
		uint32_t len = PER / 100;
		TU_CHECK(kn_put_signal(q, tu_addr(dst + (size_t)i * len), rkey, src + (size_t)i * len,
				       tu_lkey(&e->src), len, tu_addr(ps->sig), rkey, 1, NULL) == 0,
			 "thread %d: put_signal %d", tid, i);
	}
	TU_CHECK(kn_quiet(q) == 0, "thread %d: quiet", tid);
	TU_CHECK(memcmp(dst, src, (PER / 100) * 100) == 0, "thread %d: data", tid);
	return 0;
}

static void put_signal_case(uint32_t depth)
{
	struct psenv ps;
	struct kinet_qp_attr at = {.sq_depth = depth, .share = KN_SHARE_GPU};
	sopen(&ps.e, &at);
	ps.sig = ps.e.counter;
	cr_assert_eq(kinet_host_exec(4, put_signal_fn, &ps), 0, "%s", tu_fail_msg);
	cr_assert_eq(*ps.sig, 400);
	sclose(&ps.e);
}

Test(shared, put_signal_pairs_on_tiny_sq)
{
	put_signal_case(2);
	put_signal_case(4);
}

/* A target that is not ready: the receiver posts no buffer until the sender
 * is blocked on a full SQ (sq_depth 4, sends waiting for receive buffers,
 * RNR retried forever). Then buffers come one by one and everything
 * proceeds, in order, byte for byte. Nothing here depends on timing: the
 * sends cannot complete before their receive buffers exist. */
struct rnrenv {
	struct tu_pair p;
	struct tu_region src, rbuf;
	int nmsg;
};

#define MSG 3000

static int rnr_fn(int tid, int n, void *arg)
{
	(void)n;
	struct rnrenv *e = arg;
	kn_qp *q = e->p.da, *r = e->p.db;
	if (tid == 0) { /* sender */
		for (int i = 0; i < e->nmsg; i++) {
			kn_ticket_t t;
			TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve %d", i);
			kn_prep_send(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf + (size_t)i * MSG),
				     tu_lkey(&e->src), MSG - (uint32_t)i, 1, (uint32_t)i);
			kn_sq_submit(q, t, 1);
		}
		TU_CHECK(kn_quiet(q) == 0, "quiet: %s", kinet_syndrome_str(kn_qp_error(q, NULL)));
		return 0;
	}
	/* receiver: wait until the sender is inside its 5th reservation */
	uint64_t t0 = kn_now_ns();
	while (KN_LOAD64(&q->st->resv) < 5) {
		TU_CHECK(kn_now_ns() - t0 < 10000000000ull, "sender never filled the SQ");
		sched_yield();
	}
	/* a full SQ and no receive buffer: nothing completed, nothing published
	 * beyond the 4 slots */
	TU_CHECK(kn_test(q, 0) == -EBUSY, "a send completed without a receive buffer");
	TU_CHECK(KN_LOAD64(&q->st->ready) == 4, "published %llu WQEs on an SQ of 4",
		 (unsigned long long)KN_LOAD64(&q->st->ready));
	for (int i = 0; i < e->nmsg; i++) {
		kn_ticket_t rt;
		TU_CHECK(kn_recv_post(r, e->rbuf.buf + (size_t)i * MSG, tu_lkey(&e->rbuf), MSG, &rt) == 0,
			 "recv post %d", i);
		kn_recv_info info;
		TU_CHECK(kn_recv_poll(r, rt, 1, &info) == 0, "receive %d", i);
		TU_CHECK(info.imm == (uint32_t)i && info.byte_len == MSG - (uint32_t)i,
			 "message %d: imm %u, %u bytes", i, info.imm, info.byte_len);
		TU_CHECK(memcmp(e->rbuf.buf + (size_t)i * MSG, e->src.buf + (size_t)i * MSG,
				MSG - (size_t)i) == 0, "message %d", i);
	}
	return 0;
}

Test(shared, slow_target_full_sq)
{
	struct rnrenv e;
	memset(&e, 0, sizeof(e));
	e.nmsg = 40;
	struct kinet_qp_attr at = {.sq_depth = 4, .rq_depth = 2, .rnr_retry = 7};
	cr_assert_eq(tu_pair_open(&e.p, &at), 0);
	cr_assert_eq(tu_region_alloc(&e.src, e.p.pd, (size_t)e.nmsg * MSG, KINET_ACCESS_LOCAL_WRITE,
				     41), 0);
	cr_assert_eq(tu_region_alloc(&e.rbuf, e.p.pd, (size_t)e.nmsg * MSG, KINET_ACCESS_LOCAL_WRITE,
				     42), 0);
	tu_fail_msg[0] = 0;
	cr_assert_eq(kinet_host_exec(2, rnr_fn, &e), 0, "%s", tu_fail_msg);
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(e.p.ctx, &c), 0);
	cr_assert_gt(c.rnr_retries, 0, "the sender never met a receiver that was not ready");
	cr_assert_eq(c.errors, 0);
	cr_assert(tu_region_canaries_ok(&e.src) && tu_region_canaries_ok(&e.rbuf));
	tu_region_free(&e.src);
	tu_region_free(&e.rbuf);
	tu_pair_close(&e.p);
}
