/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wrap-around: SQ, CQ and RQ far beyond their depth (every WQE verified,
 * every CQE's index and owner bit checked), WQEs of several blocks that
 * wrap the end of the SQ, and the 16-bit wqe_index / doorbell counter
 * wrapping past 65536 on a small QP.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define REG (256u * 1024)

struct wenv {
	struct tu_pair p;
	struct tu_region src, dst, rbuf;
	uint8_t *shadow;
	uint64_t seed;
};

static void wopen(struct wenv *e, const struct kinet_qp_attr *at)
{
	memset(e, 0, sizeof(*e));
	cr_assert_eq(tu_pair_open(&e->p, at), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, REG, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, REG, KINET_ACCESS_ALL, 2), 0);
	cr_assert_eq(tu_region_alloc(&e->rbuf, e->p.pd, REG, KINET_ACCESS_LOCAL_WRITE, 3), 0);
	e->shadow = malloc(REG);
	cr_assert(e->shadow);
	memcpy(e->shadow, e->dst.buf, REG);
	e->seed = 777;
	tu_fail_msg[0] = 0;
}

static void wclose(struct wenv *e)
{
	cr_assert(tu_region_canaries_ok(&e->src) && tu_region_canaries_ok(&e->dst) &&
		  tu_region_canaries_ok(&e->rbuf), "a canary changed");
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_region_free(&e->rbuf);
	tu_pair_close(&e->p);
	free(e->shadow);
}

static int cqe_ok(const kn_qp *q, kn_ticket_t t)
{
	const struct kn_cqe64 *c = knx_cqe_at(q, t);
	TU_CHECK(tu_cqe_op(c) == KN_CQE_REQ, "CQE %llu: opcode %u (%s)", (unsigned long long)t,
		 tu_cqe_op(c), kinet_syndrome_str(tu_cqe_synd(c)));
	TU_CHECK(tu_cqe_idx(c) == (uint16_t)t, "CQE %llu names WQE %u", (unsigned long long)t,
		 tu_cqe_idx(c));
	TU_CHECK((c->op_own & 1) == ((t / q->cq_cqe_cnt) & 1), "owner bit of CQE %llu",
		 (unsigned long long)t);
	return 0;
}

/* 1500 writes in batches of 1..16 on a 16-deep SQ and CQ (almost 100 laps). */
static int sq_cq_wrap_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct wenv *e = arg;
	kn_qp *q = e->p.da;
	TU_CHECK(q->sq_wqe_cnt == 16 && q->cq_cqe_cnt == 16, "depths %u/%u", q->sq_wqe_cnt,
		 q->cq_cqe_cnt);
	int done = 0;
	while (done < 1500) {
		uint32_t k = 1 + (uint32_t)(tu_rand64(&e->seed) % 16);
		kn_ticket_t t;
		TU_CHECK(kn_sq_reserve(q, k, &t) == 0, "reserve %u", k);
		size_t off[16];
		uint32_t len[16];
		for (uint32_t i = 0; i < k; i++) {
			/* disjoint slices of 16 KiB per WQE of the batch */
			len[i] = 1 + (uint32_t)(tu_rand64(&e->seed) % 16000);
			off[i] = i * 16384 + (size_t)(tu_rand64(&e->seed) % (16384 - len[i]));
			tu_fill_random(e->src.buf + off[i], len[i], e->seed);
			kn_prep_write(q, kn_wqe_ptr(q, t + i), t + i, tu_addr(e->src.buf + off[i]),
				      tu_lkey(&e->src), tu_addr(e->dst.buf + off[i]),
				      kinet_mr_rkey(e->dst.mr), len[i]);
		}
		kn_sq_submit(q, t, k);
		TU_CHECK(kn_wait(q, t + k - 1) == 0, "batch at %llu failed: %s", (unsigned long long)t,
			 kinet_syndrome_str(kn_qp_error(q, NULL)));
		for (uint32_t i = 0; i < k; i++) {
			int rc = cqe_ok(q, t + i);
			if (rc)
				return rc;
			TU_CHECK(kn_be32toh(knx_cqe_at(q, t + i)->byte_cnt) == len[i], "byte count");
			memcpy(e->shadow + off[i], e->src.buf + off[i], len[i]);
		}
		TU_CHECK(memcmp(e->dst.buf, e->shadow, REG) == 0, "target after WQE %llu",
			 (unsigned long long)(t + k));
		done += (int)k;
	}
	TU_CHECK(q->st->done >= 1500, "done %llu", (unsigned long long)q->st->done);
	return 0;
}

Test(wrap, sq_and_cq_device_api)
{
	struct wenv e;
	struct kinet_qp_attr at = {.sq_depth = 16};
	wopen(&e, &at);
	cr_assert_eq(kinet_host_exec(1, sq_cq_wrap_fn, &e), 0, "%s", tu_fail_msg);
	wclose(&e);
}

/* A receive queue of 4 over 500 messages, the receive CQ wrapping with it. */
static int rq_wrap_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct wenv *e = arg;
	kn_qp *q = e->p.da, *r = e->p.db;
	TU_CHECK(r->rq_wqe_cnt == 4 && r->rcq_cqe_cnt == 4, "RQ depth %u", r->rq_wqe_cnt);
	for (int i = 0; i < 500; i++) {
		uint32_t len = 1 + (uint32_t)(tu_rand64(&e->seed) % 5000);
		size_t so = (size_t)(tu_rand64(&e->seed) % (REG - len));
		size_t d = (size_t)(i % 4) * 8192;
		tu_fill_random(e->src.buf + so, len, e->seed);
		kn_ticket_t rt, t;
		TU_CHECK(kn_recv_post(r, e->rbuf.buf + d, tu_lkey(&e->rbuf), 8192, &rt) == 0, "post");
		TU_CHECK(rt == (uint64_t)i, "receive ticket %llu", (unsigned long long)rt);
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_send(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf + so), tu_lkey(&e->src), len, 1,
			     (uint32_t)i);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "send %d", i);
		kn_recv_info info;
		TU_CHECK(kn_recv_poll(r, rt, 1, &info) == 0, "receive %d", i);
		TU_CHECK(info.byte_len == len && info.imm == (uint32_t)i, "receive %d: %u bytes, imm %u",
			 i, info.byte_len, info.imm);
		TU_CHECK(memcmp(e->rbuf.buf + d, e->src.buf + so, len) == 0, "message %d", i);
		const struct kn_cqe64 *c = (const struct kn_cqe64 *)(r->rcq + (rt & 3) * KN_CQE_SIZE);
		TU_CHECK((c->op_own & 1) == ((rt / 4) & 1), "owner bit of receive CQE %d", i);
	}
	return 0;
}

Test(wrap, receive_queue)
{
	struct wenv e;
	struct kinet_qp_attr at = {.sq_depth = 8, .rq_depth = 4};
	wopen(&e, &at);
	cr_assert_eq(kinet_host_exec(1, rq_wrap_fn, &e), 0, "%s", tu_fail_msg);
	wclose(&e);
}

/* Raw WQEs of 1 to 4 blocks on a 16-deep SQ: many of them straddle the end
 * of the ring. Each is a write with 1..14 pointer segments. */
Test(wrap, raw_multi_block_wqes_straddle_the_ring)
{
	struct tu_rawpair p;
	cr_assert_eq(tu_rawpair_open(&p, 16, 0), 0);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, p.pd, REG, KINET_ACCESS_LOCAL_WRITE, 5), 0);
	cr_assert_eq(tu_region_alloc(&dst, p.pd, REG, KINET_ACCESS_ALL, 6), 0);
	uint32_t qpn = kinet_qp_num(p.a);
	uint64_t seed = 3;
	uint8_t w[1024];
	int straddled = 0;
	for (int it = 0; it < 1200; it++) {
		int np = 1 + (int)(tu_rand64(&seed) % 14);
		uint32_t d = (uint32_t)(tu_rand64(&seed) % (REG - 64 * 1024));
		memset(w, 0, sizeof(w));
		uint32_t off = 32, total = 0, so[14], len[14];
		for (int i = 0; i < np; i++) {
			len[i] = 1 + (uint32_t)(tu_rand64(&seed) % 4000);
			so[i] = (uint32_t)(tu_rand64(&seed) % (REG - len[i]));
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + off), len[i], tu_lkey(&src),
					tu_addr(src.buf + so[i]));
			off += 16;
			total += len[i];
		}
		kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), tu_addr(dst.buf + d),
				 kinet_mr_rkey(dst.mr));
		kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)p.pi, KN_OPCODE_RDMA_WRITE, 0, qpn,
				KN_WQE_CTRL_CQ_UPDATE, (uint8_t)(off / 16), 0, 0);
		uint32_t nbb = (off + 63) / 64;
		if ((p.pi & 15) + nbb > 16)
			straddled++;
		tu_fill_random(src.buf, REG, seed + (uint64_t)it);
		uint64_t t = tu_post(&p, w, nbb);
		struct kn_cqe64 cqe;
		cr_assert_eq(kinet_cq_poll_wait(p.acq, &cqe, 10000), 0, "no CQE for WQE %d", it);
		cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "WQE %d (%u blocks at %llu): %s", it, nbb,
			     (unsigned long long)t, kinet_syndrome_str(tu_cqe_synd(&cqe)));
		cr_assert_eq(tu_cqe_idx(&cqe), (uint16_t)t);
		cr_assert_eq(kn_be32toh(cqe.byte_cnt), total);
		uint32_t o = d;
		for (int i = 0; i < np; i++) {
			cr_assert_arr_eq(dst.buf + o, src.buf + so[i], len[i], "WQE %d piece %d", it, i);
			o += len[i];
		}
	}
	cr_assert_gt(straddled, 50, "too few WQEs straddled the ring end (%d)", straddled);
	cr_assert(tu_region_canaries_ok(&src) && tu_region_canaries_ok(&dst));
	tu_region_free(&src);
	tu_region_free(&dst);
	tu_rawpair_close(&p);
}

/* The 16-bit WQE index and doorbell counter wrap: 70,000 WQEs (NOPs in
 * batches, a verified write every 97th batch) on a 64-deep QP. */
static int index_wrap_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct wenv *e = arg;
	kn_qp *q = e->p.da;
	uint64_t posted = 0;
	int batch = 0;
	while (posted < 70000) {
		kn_ticket_t t;
		uint32_t k = 32;
		TU_CHECK(kn_sq_reserve(q, k, &t) == 0, "reserve");
		TU_CHECK(t == posted, "ticket %llu", (unsigned long long)t);
		int with_write = (batch++ % 97) == 0 || (t <= 65536 && t + k > 65536);
		size_t off = (size_t)(tu_rand64(&e->seed) % (REG - 4096));
		uint32_t len = 1 + (uint32_t)(tu_rand64(&e->seed) % 4096);
		for (uint32_t i = 0; i < k; i++) {
			if (with_write && i == k / 2) {
				tu_fill_random(e->src.buf + off, len, t);
				kn_prep_write(q, kn_wqe_ptr(q, t + i), t + i, tu_addr(e->src.buf + off),
					      tu_lkey(&e->src), tu_addr(e->dst.buf + off),
					      kinet_mr_rkey(e->dst.mr), len);
			} else {
				kn_prep_nop(q, kn_wqe_ptr(q, t + i), t + i);
			}
		}
		kn_sq_submit(q, t, k);
		TU_CHECK(kn_wait(q, t + k - 1) == 0, "batch at %llu: %s", (unsigned long long)t,
			 kinet_syndrome_str(kn_qp_error(q, NULL)));
		for (uint32_t i = 0; i < k; i++) {
			int rc = cqe_ok(q, t + i);
			if (rc)
				return rc;
		}
		if (with_write) {
			memcpy(e->shadow + off, e->src.buf + off, len);
			TU_CHECK(memcmp(e->dst.buf, e->shadow, REG) == 0, "write at ticket %llu",
				 (unsigned long long)(t + k / 2));
		}
		posted += k;
	}
	TU_CHECK(q->st->done == posted, "done %llu", (unsigned long long)q->st->done);
	return 0;
}

Test(wrap, wqe_index_16_bit_device_api)
{
	struct wenv e;
	struct kinet_qp_attr at = {.sq_depth = 64};
	wopen(&e, &at);
	cr_assert_eq(kinet_host_exec(1, index_wrap_fn, &e), 0, "%s", tu_fail_msg);
	wclose(&e);
}

/* The same through kinet_qp_post_raw / kinet_cq_poll with the doorbell
 * record alone, and with the CPU-proxy doorbell through the device API. */
Test(wrap, wqe_index_16_bit_raw)
{
	struct tu_rawpair p;
	cr_assert_eq(tu_rawpair_open(&p, 32, 0), 0);
	uint32_t qpn = kinet_qp_num(p.a);
	uint8_t w[64];
	uint64_t cq_seen = 0;
	while (p.pi < 66000 + 100) {
		for (int i = 0; i < 32; i++) {
			memset(w, 0, sizeof(w));
			kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)p.pi, KN_OPCODE_NOP, 0, qpn,
					KN_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
			tu_post(&p, w, 1);
		}
		for (int i = 0; i < 32; i++) {
			struct kn_cqe64 cqe;
			cr_assert_eq(tu_poll(p.acq, &cqe, 10000), 0, "CQE %llu",
				     (unsigned long long)cq_seen);
			cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "CQE %llu: %s",
				     (unsigned long long)cq_seen, kinet_syndrome_str(tu_cqe_synd(&cqe)));
			cr_assert_eq(tu_cqe_idx(&cqe), (uint16_t)cq_seen);
			cq_seen++;
		}
	}
	cr_assert_eq(kinet_qp_get_state(p.a), KINET_QPS_RTS);
	tu_rawpair_close(&p);
}

Test(wrap, wqe_index_16_bit_cpu_proxy)
{
	struct wenv e;
	struct kinet_qp_attr at = {.sq_depth = 64, .db_mode = KN_DB_CPU_PROXY};
	wopen(&e, &at);
	cr_assert_eq(kinet_host_exec(1, index_wrap_fn, &e), 0, "%s", tu_fail_msg);
	wclose(&e);
}

/* Two QPs on two engine threads completing into one small shared send CQ:
 * every WQE executes once and gets its CQE, whoever wins the last free
 * CQE slot. Fetch-adds make a second execution visible. */
Test(wrap, shared_send_cq_two_engines)
{
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_cq *cq;
	kinet_qp *x[2], *y[2];
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT, .engine_threads = 2};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	cr_assert_eq(kinet_cq_create(ctx, 2, &cq), 0);
	struct kinet_qp_attr xa = {.sq_depth = 16, .send_cq = cq};
	for (int i = 0; i < 2; i++) /* QP numbers n, n+1: one per engine */
		cr_assert_eq(kinet_qp_create(pd, &xa, &x[i]), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(kinet_qp_create(pd, NULL, &y[i]), 0);
		cr_assert_eq(kinet_qp_connect_local(x[i], y[i]), 0);
	}
	struct tu_region ctr, res;
	cr_assert_eq(tu_region_alloc(&ctr, pd, 64, KINET_ACCESS_ALL, 1), 0);
	cr_assert_eq(tu_region_alloc(&res, pd, 64, KINET_ACCESS_LOCAL_WRITE, 2), 0);
	uint64_t *counter = (uint64_t *)ctr.buf;
	*counter = 0;
	const int per_qp = 20000;
	uint64_t pi[2] = {0, 0};
	int got = 0, posted = 0;
	uint8_t w[64];
	/* bounded: the engines may stop answering (10 s without a CQE) */
	uint64_t last_cqe = kn_now_ns();
	while (got < 2 * per_qp) {
		for (int i = 0; i < 2 && posted < 2 * per_qp; i++) {
			/* keep a few WQEs outstanding on each QP */
			if (pi[i] - (uint64_t)(got / 2) > 6)
				continue;
			memset(w, 0, sizeof(w));
			kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), tu_addr(counter),
					 kinet_mr_rkey(ctr.mr));
			kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), 1, 0);
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, tu_lkey(&res),
					tu_addr(res.buf + 8 * i));
			kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)pi[i], KN_OPCODE_ATOMIC_FA,
					0, kinet_qp_num(x[i]), KN_WQE_CTRL_CQ_UPDATE, 4, 0, 0);
			long long t = kinet_qp_post_raw(x[i], w, 1);
			cr_assert_eq(t, (long long)pi[i], "post: %lld", t);
			pi[i]++;
			posted++;
		}
		struct kn_cqe64 c;
		int rc = kinet_cq_poll(cq, &c);
		if (rc == -EBUSY) {
			cr_assert_lt(kn_now_ns() - last_cqe, 10000000000ull,
				     "no CQE in 10 s: %d of %d, %d WQEs posted", got, 2 * per_qp,
				     posted);
			sched_yield();
			continue;
		}
		cr_assert_eq(rc, 0);
		last_cqe = kn_now_ns();
		cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ, "CQE %d: %s", got,
			     kinet_syndrome_str(tu_cqe_synd(&c)));
		got++;
		if (got % 2000 == 0) /* a check before the end: no counter can run ahead */
			cr_assert_leq(*counter, (uint64_t)posted, "counter %llu after %d posts",
				      (unsigned long long)*counter, posted);
	}
	for (int i = 0; i < 10; i++) {
		struct kn_cqe64 c;
		cr_assert_eq(kinet_cq_poll(cq, &c), -EBUSY, "more CQEs than WQEs");
		sched_yield();
	}
	cr_assert_eq(*counter, (uint64_t)2 * per_qp, "counter %llu: a WQE ran twice or never",
		     (unsigned long long)*counter);
	cr_assert(tu_region_canaries_ok(&ctr) && tu_region_canaries_ok(&res));
	tu_region_free(&ctr);
	tu_region_free(&res);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(kinet_qp_destroy(x[i]), 0);
		cr_assert_eq(kinet_qp_destroy(y[i]), 0);
	}
	cr_assert_eq(kinet_cq_destroy(cq), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}
