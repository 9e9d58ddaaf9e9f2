/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every opcode end to end through the software NIC, driven by the device API
 * on the host executor: random data, verified byte for byte (atomics by
 * value), with a shadow copy of every target region so that bytes outside
 * the intended range are checked too, and canaries around every region.
 * Also raw multi-segment WQEs (gather/scatter lists, inline pieces, WQEs
 * that wrap the SQ) and the three doorbell modes.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define MiB (1u << 20)
#define REGION (4 * MiB + 4096)
#define TMO_NS 10000000000ull

static const uint32_t sizes[] = {1, 2, 7, 63, 64, 65, 1000, 4095, 4097, 65537, MiB + 13, 4 * MiB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct env {
	struct tu_pair p;
	struct tu_region src;  /* a's local source */
	struct tu_region dst;  /* b's target: every access */
	struct tu_region back; /* a's local landing zone (read, atomic results) */
	struct tu_region rbuf; /* b's receive buffers */
	uint8_t *dst_shadow, *back_shadow, *rbuf_shadow;
	uint64_t seed;
};

static void env_open(struct env *e, const struct kinet_qp_attr *attr)
{
	memset(e, 0, sizeof(*e));
	cr_assert_eq(tu_pair_open(&e->p, attr), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, REGION, KINET_ACCESS_LOCAL_WRITE, 11), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, REGION, KINET_ACCESS_ALL, 12), 0);
	cr_assert_eq(tu_region_alloc(&e->back, e->p.pd, REGION, KINET_ACCESS_LOCAL_WRITE, 13), 0);
	cr_assert_eq(tu_region_alloc(&e->rbuf, e->p.pd, REGION, KINET_ACCESS_LOCAL_WRITE, 14), 0);
	e->dst_shadow = malloc(REGION);
	e->back_shadow = malloc(REGION);
	e->rbuf_shadow = malloc(REGION);
	cr_assert(e->dst_shadow && e->back_shadow && e->rbuf_shadow);
	memcpy(e->dst_shadow, e->dst.buf, REGION);
	memcpy(e->back_shadow, e->back.buf, REGION);
	memcpy(e->rbuf_shadow, e->rbuf.buf, REGION);
	e->seed = 0x5151;
	tu_fail_msg[0] = 0;
}

static void env_close(struct env *e)
{
	cr_assert(tu_region_canaries_ok(&e->src), "canary of src changed");
	cr_assert(tu_region_canaries_ok(&e->dst), "canary of dst changed");
	cr_assert(tu_region_canaries_ok(&e->back), "canary of back changed");
	cr_assert(tu_region_canaries_ok(&e->rbuf), "canary of rbuf changed");
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_region_free(&e->back);
	tu_region_free(&e->rbuf);
	tu_pair_close(&e->p);
	free(e->dst_shadow);
	free(e->back_shadow);
	free(e->rbuf_shadow);
}

static void run(int nthreads, kinet_host_fn fn, struct env *e)
{
	int rc = kinet_host_exec(nthreads, fn, e);
	cr_assert_eq(rc, 0, "host executor: %s", tu_fail_msg);
}

/* The CQE of a ticket whose completion has been consumed: still in place
 * until its slot is reused. */
static int check_req_cqe(const kn_qp *q, kn_ticket_t t, uint8_t opcode, int64_t bytes)
{
	const struct kn_cqe64 *c = knx_cqe_at(q, t);
	TU_CHECK(tu_cqe_op(c) == KN_CQE_REQ, "ticket %llu: CQE opcode %u", (unsigned long long)t,
		 tu_cqe_op(c));
	TU_CHECK(tu_cqe_idx(c) == (uint16_t)t, "CQE wqe_counter %u for ticket %llu", tu_cqe_idx(c),
		 (unsigned long long)t);
	TU_CHECK((c->op_own & 1) == ((t / q->cq_cqe_cnt) & 1), "owner bit of CQE %llu",
		 (unsigned long long)t);
	uint32_t sq = kn_be32toh(c->sop_drop_qpn);
	TU_CHECK((sq & 0xffffff) == q->qpn, "CQE qpn 0x%x, QP 0x%x", sq & 0xffffff, q->qpn);
	TU_CHECK(sq >> 24 == opcode, "CQE names opcode 0x%x, expected 0x%x", sq >> 24, opcode);
	if (bytes >= 0)
		TU_CHECK(kn_be32toh(c->byte_cnt) == (uint32_t)bytes, "CQE byte count %u, expected %lld",
			 kn_be32toh(c->byte_cnt), (long long)bytes);
	return 0;
}

static size_t rnd_off(struct env *e, size_t len)
{
	return (size_t)(tu_rand64(&e->seed) % (REGION - len + 1));
}

/* ---- NOP ------------------------------------------------------------------- */

static int nop_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int i = 0; i < 100; i++) {
		kn_ticket_t t;
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_nop(q, kn_wqe_ptr(q, t), t);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "nop %d failed", i);
		int rc = check_req_cqe(q, t, KN_OPCODE_NOP, 0);
		if (rc)
			return rc;
	}
	/* a batch of NOPs published with one doorbell */
	kn_ticket_t t;
	TU_CHECK(kn_sq_reserve(q, 16, &t) == 0, "reserve 16");
	for (int i = 0; i < 16; i++)
		kn_prep_nop(q, kn_wqe_ptr(q, t + i), t + i);
	kn_sq_submit(q, t, 16);
	TU_CHECK(kn_quiet(q) == 0, "quiet");
	for (int i = 0; i < 16; i++) {
		int rc = check_req_cqe(q, t + i, KN_OPCODE_NOP, 0);
		if (rc)
			return rc;
	}
	return 0;
}

Test(ops, nop)
{
	struct env e;
	env_open(&e, NULL);
	run(1, nop_fn, &e);
	cr_assert_arr_eq(e.dst.buf, e.dst_shadow, REGION);
	env_close(&e);
}

/* ---- RDMA WRITE ------------------------------------------------------------- */

static int write_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < NSIZES; i++) {
			uint32_t len = sizes[i];
			size_t so = rnd_off(e, len), d = rnd_off(e, len);
			tu_fill_random(e->src.buf + so, len, e->seed + i);
			kn_ticket_t t;
			TU_CHECK(kn_put(q, tu_addr(e->dst.buf + d), kinet_mr_rkey(e->dst.mr),
					e->src.buf + so, tu_lkey(&e->src), len, &t) == 0, "put");
			TU_CHECK(kn_wait(q, t) == 0, "write of %u bytes failed: %s", len,
				 kinet_syndrome_str(kn_qp_error(q, NULL)));
			int rc = check_req_cqe(q, t, KN_OPCODE_RDMA_WRITE, len);
			if (rc)
				return rc;
			memcpy(e->dst_shadow + d, e->src.buf + so, len);
			TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0,
				 "target differs after a write of %u bytes at %zu", len, d);
		}
	return 0;
}

Test(ops, rdma_write_sizes)
{
	struct env e;
	env_open(&e, NULL);
	run(1, write_fn, &e);
	env_close(&e);
}

/* Source and target in the same region, overlapping: the WQE completes and
 * nothing outside the target range changes. */
static int overlap_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int i = 0; i < 200; i++) {
		uint32_t len = 1 + (uint32_t)(tu_rand64(&e->seed) % 20000);
		size_t so = rnd_off(e, len + 40000) + 20000;
		size_t d = so + (size_t)((int64_t)(tu_rand64(&e->seed) % 2001) - 1000);
		kn_ticket_t t;
		if (i & 1)
			TU_CHECK(kn_put(q, tu_addr(e->dst.buf + d), kinet_mr_rkey(e->dst.mr),
					e->dst.buf + so, tu_lkey(&e->dst), len, &t) == 0, "put");
		else
			TU_CHECK(kn_get(q, e->dst.buf + d, tu_lkey(&e->dst), tu_addr(e->dst.buf + so),
					kinet_mr_rkey(e->dst.mr), len, &t) == 0, "get");
		TU_CHECK(kn_wait(q, t) == 0, "overlapping copy of %u bytes", len);
		memcpy(e->dst_shadow + d, e->dst.buf + d, len);
		TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0,
			 "bytes outside an overlapping copy changed");
	}
	return 0;
}

Test(ops, overlapping_source_and_target)
{
	struct env e;
	env_open(&e, NULL);
	run(1, overlap_fn, &e);
	env_close(&e);
}

/* ---- RDMA WRITE with immediate ---------------------------------------------- */

static int write_imm_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da, *rq = e->p.db;
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t len = sizes[i];
		size_t so = rnd_off(e, len), d = rnd_off(e, len);
		tu_fill_random(e->src.buf + so, len, e->seed + 50 + i);
		/* the receive WQE is consumed; its buffer is not written */
		kn_ticket_t rt, t;
		TU_CHECK(kn_recv_post(rq, e->rbuf.buf, tu_lkey(&e->rbuf), 4096, &rt) == 0, "recv post");
		uint32_t imm = (uint32_t)tu_rand64(&e->seed);
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_write_imm(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf + so), tu_lkey(&e->src),
				  tu_addr(e->dst.buf + d), kinet_mr_rkey(e->dst.mr), len, imm);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "write_imm of %u bytes failed", len);
		int rc = check_req_cqe(q, t, KN_OPCODE_RDMA_WRITE_IMM, len);
		if (rc)
			return rc;
		kn_recv_info info;
		TU_CHECK(kn_recv_poll(rq, rt, 1, &info) == 0, "receive CQE of write_imm");
		TU_CHECK(info.opcode == KN_CQE_RESP_WR_IMM, "receive opcode %u", info.opcode);
		TU_CHECK(info.has_imm && info.imm == imm, "imm 0x%x, expected 0x%x", info.imm, imm);
		TU_CHECK(info.byte_len == len, "receive byte count %u, expected %u", info.byte_len, len);
		const struct kn_cqe64 *rc64 = (const struct kn_cqe64 *)(rq->rcq +
			(rt & (rq->rcq_cqe_cnt - 1)) * KN_CQE_SIZE);
		TU_CHECK((kn_be32toh(rc64->flags_rqpn) & 0xffffff) == q->qpn, "receive CQE source QP");
		TU_CHECK(tu_cqe_idx(rc64) == (uint16_t)rt, "receive CQE wqe_counter");
		memcpy(e->dst_shadow + d, e->src.buf + so, len);
		TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "target differs (%u bytes)",
			 len);
		TU_CHECK(memcmp(e->rbuf.buf, e->rbuf_shadow, REGION) == 0,
			 "write_imm wrote into the receive buffer");
	}
	return 0;
}

Test(ops, rdma_write_imm)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 64, .rq_depth = 16};
	env_open(&e, &at);
	run(1, write_imm_fn, &e);
	env_close(&e);
}

/* ---- inline write, every length ------------------------------------------------ */

static int inline_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int round = 0; round < 3; round++)
		for (uint32_t len = 1; len <= KN_MAX_INLINE_WRITE; len++) {
			uint8_t val[KN_MAX_INLINE_WRITE];
			tu_fill_random(val, len, e->seed + len * 7 + (uint64_t)round);
			size_t d = rnd_off(e, len);
			kn_ticket_t t;
			TU_CHECK(kn_put_inline(q, tu_addr(e->dst.buf + d), kinet_mr_rkey(e->dst.mr), val,
					       len, &t) == 0, "put_inline %u", len);
			/* the caller's buffer may change right away: the value is in the WQE */
			uint8_t keep[KN_MAX_INLINE_WRITE];
			memcpy(keep, val, len);
			memset(val, 0, sizeof(val));
			TU_CHECK(kn_wait(q, t) == 0, "inline write of %u bytes failed", len);
			int rc = check_req_cqe(q, t, KN_OPCODE_RDMA_WRITE, len);
			if (rc)
				return rc;
			memcpy(e->dst_shadow + d, keep, len);
			TU_CHECK(memcmp(e->dst.buf + (d > 64 ? d - 64 : 0),
					e->dst_shadow + (d > 64 ? d - 64 : 0), 200) == 0,
				 "inline write of %u bytes at %zu", len, d);
		}
	TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "target differs");
	uint8_t big[64] = {1};
	TU_CHECK(kn_put_inline(q, tu_addr(e->dst.buf), kinet_mr_rkey(e->dst.mr), big,
			       KN_MAX_INLINE_WRITE + 1, NULL) == -EINVAL, "oversized inline accepted");
	return 0;
}

Test(ops, inline_write_every_length)
{
	struct env e;
	env_open(&e, NULL);
	run(1, inline_fn, &e);
	env_close(&e);
}

static int small_inline_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint8_t v[12];
	tu_fill_random(v, sizeof(v), 4);
	TU_CHECK(q->max_inline == 8, "max_inline %u", q->max_inline);
	TU_CHECK(kn_put_inline(q, tu_addr(e->dst.buf), kinet_mr_rkey(e->dst.mr), v, 9, NULL) ==
			 -EINVAL, "9 bytes inline on a QP with max_inline 8");
	kn_ticket_t t;
	TU_CHECK(kn_put_inline(q, tu_addr(e->dst.buf), kinet_mr_rkey(e->dst.mr), v, 8, &t) == 0,
		 "8 bytes inline");
	TU_CHECK(kn_wait(q, t) == 0, "wait");
	TU_CHECK(memcmp(e->dst.buf, v, 8) == 0, "inline data");
	TU_CHECK(memcmp(e->dst.buf + 8, e->dst_shadow + 8, 64) == 0, "bytes after the inline data");
	return 0;
}

Test(ops, inline_limit_of_qp)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 16, .max_inline = 8};
	env_open(&e, &at);
	run(1, small_inline_fn, &e);
	env_close(&e);
}

/* ---- RDMA READ ------------------------------------------------------------------- */

static int read_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < NSIZES; i++) {
			uint32_t len = sizes[i];
			size_t so = rnd_off(e, len), d = rnd_off(e, len);
			/* fresh random bytes at the remote source */
			tu_fill_random(e->dst.buf + so, len, e->seed + 300 + i);
			memcpy(e->dst_shadow + so, e->dst.buf + so, len);
			kn_ticket_t t;
			TU_CHECK(kn_get(q, e->back.buf + d, tu_lkey(&e->back), tu_addr(e->dst.buf + so),
					kinet_mr_rkey(e->dst.mr), len, &t) == 0, "get");
			TU_CHECK(kn_wait(q, t) == 0, "read of %u bytes failed: %s", len,
				 kinet_syndrome_str(kn_qp_error(q, NULL)));
			int rc = check_req_cqe(q, t, KN_OPCODE_RDMA_READ, len);
			if (rc)
				return rc;
			memcpy(e->back_shadow + d, e->dst.buf + so, len);
			TU_CHECK(memcmp(e->back.buf, e->back_shadow, REGION) == 0,
				 "local landing zone differs after a read of %u bytes", len);
			TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0,
				 "a read changed the remote region");
		}
	return 0;
}

Test(ops, rdma_read_sizes)
{
	struct env e;
	env_open(&e, NULL);
	run(1, read_fn, &e);
	env_close(&e);
}

/* ---- SEND / SEND_IMM --------------------------------------------------------- */

static int send_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da, *rq = e->p.db;
	for (int with_imm = 0; with_imm < 2; with_imm++)
		for (size_t i = 0; i < NSIZES; i++) {
			uint32_t len = sizes[i];
			/* receive buffer as large as the message or a little larger */
			uint32_t cap = len + (uint32_t)(tu_rand64(&e->seed) % 3) * 17;
			if (cap > REGION)
				cap = REGION;
			size_t so = rnd_off(e, len), d = rnd_off(e, cap);
			tu_fill_random(e->src.buf + so, len, e->seed + 600 + i);
			kn_ticket_t rt, t;
			TU_CHECK(kn_recv_post(rq, e->rbuf.buf + d, tu_lkey(&e->rbuf), cap, &rt) == 0,
				 "recv post");
			uint32_t imm = (uint32_t)tu_rand64(&e->seed);
			TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
			kn_prep_send(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf + so), tu_lkey(&e->src),
				     len, with_imm, imm);
			kn_sq_submit(q, t, 1);
			TU_CHECK(kn_wait(q, t) == 0, "send of %u bytes failed: %s", len,
				 kinet_syndrome_str(kn_qp_error(q, NULL)));
			int rc = check_req_cqe(q, t, with_imm ? KN_OPCODE_SEND_IMM : KN_OPCODE_SEND, len);
			if (rc)
				return rc;
			kn_recv_info info;
			TU_CHECK(kn_recv_poll(rq, rt, 1, &info) == 0, "receive completion");
			TU_CHECK(info.opcode == (with_imm ? KN_CQE_RESP_SEND_IMM : KN_CQE_RESP_SEND),
				 "receive opcode %u", info.opcode);
			TU_CHECK(info.byte_len == len, "received %u bytes, sent %u", info.byte_len, len);
			TU_CHECK(info.has_imm == with_imm, "has_imm");
			if (with_imm)
				TU_CHECK(info.imm == imm, "imm 0x%x, expected 0x%x", info.imm, imm);
			memcpy(e->rbuf_shadow + d, e->src.buf + so, len);
			TU_CHECK(memcmp(e->rbuf.buf, e->rbuf_shadow, REGION) == 0,
				 "receive region differs after a send of %u bytes", len);
		}
	TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "sends touched dst");
	return 0;
}

Test(ops, send_and_send_imm)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 64, .rq_depth = 16};
	env_open(&e, &at);
	run(1, send_fn, &e);
	env_close(&e);
}

/* Many receives outstanding at once, consumed in order. */
static int send_many_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da, *rq = e->p.db;
	for (int round = 0; round < 20; round++) {
		kn_ticket_t rt[16], t[16];
		uint32_t len[16];
		size_t so[16];
		for (int i = 0; i < 16; i++) {
			TU_CHECK(kn_recv_post(rq, e->rbuf.buf + (size_t)i * 8192, tu_lkey(&e->rbuf), 8192,
					      &rt[i]) == 0, "recv post %d", i);
		}
		kn_ticket_t extra;
		TU_CHECK(kn_recv_post(rq, e->rbuf.buf, tu_lkey(&e->rbuf), 1, &extra) == -EBUSY,
			 "a 17th receive on a 16-deep RQ was accepted");
		for (int i = 0; i < 16; i++) {
			/* sources never overlap: a send may still be in flight */
			len[i] = 1 + (uint32_t)(tu_rand64(&e->seed) % 8192);
			so[i] = (size_t)i * 8192 + (size_t)(tu_rand64(&e->seed) % (8192 - len[i] + 1));
			tu_fill_random(e->src.buf + so[i], len[i], e->seed + (uint64_t)i);
			TU_CHECK(kn_sq_reserve(q, 1, &t[i]) == 0, "reserve");
			kn_prep_send(q, kn_wqe_ptr(q, t[i]), t[i], tu_addr(e->src.buf + so[i]),
				     tu_lkey(&e->src), len[i], i & 1, (uint32_t)i);
			kn_sq_submit(q, t[i], 1);
		}
		TU_CHECK(kn_quiet(q) == 0, "quiet");
		for (int i = 0; i < 16; i++) {
			kn_recv_info info;
			TU_CHECK(kn_recv_poll(rq, rt[i], 1, &info) == 0, "receive %d", i);
			TU_CHECK(info.byte_len == len[i], "length of message %d", i);
			TU_CHECK(memcmp(e->rbuf.buf + (size_t)i * 8192, e->src.buf + so[i], len[i]) == 0,
				 "message %d", i);
			if (i & 1)
				TU_CHECK(info.has_imm && info.imm == (uint32_t)i, "imm of message %d", i);
		}
	}
	return 0;
}

Test(ops, send_many_outstanding_receives)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 64, .rq_depth = 16};
	env_open(&e, &at);
	run(1, send_many_fn, &e);
	env_close(&e);
}

/* ---- atomics ---------------------------------------------------------------------- */

static int atomic_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	for (int i = 0; i < 200; i++) {
		size_t off = (tu_rand64(&e->seed) % (REGION / 8)) * 8;
		uint64_t *w = (uint64_t *)(e->dst.buf + off);
		uint64_t v0 = *w, add = tu_rand64(&e->seed);
		size_t ro = (tu_rand64(&e->seed) % (REGION / 8)) * 8;
		uint64_t *res = (uint64_t *)(e->back.buf + ro);
		kn_ticket_t t;
		/* low level: the old value lands big-endian at the local address */
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_atomic_fa(q, kn_wqe_ptr(q, t), t, tu_addr(res), tu_lkey(&e->back), tu_addr(w),
				  rkey, add);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "fetch-add failed");
		int rc = check_req_cqe(q, t, KN_OPCODE_ATOMIC_FA, 8);
		if (rc)
			return rc;
		TU_CHECK(kn_be64toh(*res) == v0, "FA result 0x%llx, expected 0x%llx",
			 (unsigned long long)kn_be64toh(*res), (unsigned long long)v0);
		TU_CHECK(*w == v0 + add, "FA: remote 0x%llx", (unsigned long long)*w);
		/* compare-and-swap that matches */
		uint64_t sw = tu_rand64(&e->seed);
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_atomic_cs(q, kn_wqe_ptr(q, t), t, tu_addr(res), tu_lkey(&e->back), tu_addr(w),
				  rkey, v0 + add, sw);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "compare-swap failed");
		if ((rc = check_req_cqe(q, t, KN_OPCODE_ATOMIC_CS, 8)))
			return rc;
		TU_CHECK(kn_be64toh(*res) == v0 + add, "CS result");
		TU_CHECK(*w == sw, "CS did not swap");
		/* one that does not match: nothing changes, the old value comes back */
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_atomic_cs(q, kn_wqe_ptr(q, t), t, tu_addr(res), tu_lkey(&e->back), tu_addr(w),
				  rkey, sw ^ 1, ~sw);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "failing compare-swap must still complete");
		TU_CHECK(kn_be64toh(*res) == sw, "failing CS result");
		TU_CHECK(*w == sw, "failing CS swapped");
		memcpy(e->back_shadow + ro, res, 8);
		memcpy(e->dst_shadow + off, w, 8);
	}
	TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "atomics wrote elsewhere");
	TU_CHECK(memcmp(e->back.buf, e->back_shadow, REGION) == 0, "results landed elsewhere");
	return 0;
}

Test(ops, atomics_low_level)
{
	struct env e;
	env_open(&e, NULL);
	run(1, atomic_fn, &e);
	env_close(&e);
}

static int atomic_hl_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	uint64_t *res = (uint64_t *)e->back.buf;
	for (int i = 0; i < 200; i++) {
		uint64_t *w = (uint64_t *)(e->dst.buf + (tu_rand64(&e->seed) % (REGION / 8)) * 8);
		uint64_t v0 = *w, add = tu_rand64(&e->seed), old = 0;
		TU_CHECK(kn_atomic_fetch_add(q, tu_addr(w), rkey, add, res, tu_lkey(&e->back), &old) == 0,
			 "fetch_add");
		TU_CHECK(old == v0 && *w == v0 + add, "fetch_add by value");
		uint64_t sw = tu_rand64(&e->seed);
		TU_CHECK(kn_atomic_compare_swap(q, tu_addr(w), rkey, v0 + add + 1, sw, res,
						tu_lkey(&e->back), &old) == 0, "compare_swap (fails)");
		TU_CHECK(old == v0 + add && *w == v0 + add, "failing compare_swap changed the word");
		TU_CHECK(kn_atomic_compare_swap(q, tu_addr(w), rkey, v0 + add, sw, res,
						tu_lkey(&e->back), &old) == 0, "compare_swap");
		TU_CHECK(old == v0 + add && *w == sw, "compare_swap by value");
	}
	/* a counter: 1000 adds of 3 from zero */
	uint64_t *ctr = (uint64_t *)(e->dst.buf + 4096);
	*ctr = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t old;
		TU_CHECK(kn_atomic_fetch_add(q, tu_addr(ctr), rkey, 3, res, tu_lkey(&e->back), &old) == 0,
			 "add");
		TU_CHECK(old == (uint64_t)i * 3, "counter %llu at step %d", (unsigned long long)old, i);
	}
	TU_CHECK(*ctr == 3000, "counter");
	return 0;
}

Test(ops, atomics_high_level)
{
	struct env e;
	env_open(&e, NULL);
	run(1, atomic_hl_fn, &e);
	env_close(&e);
}

/* ---- put_signal, signal, wait_signal, quiet ------------------------------------- */

#define ROUNDS 48
#define CHUNK 65536

static uint32_t round_len(int r)
{
	static const uint32_t l[] = {1, 3, 64, 511, 4096, 9999, 65535, 65536};
	return l[r % 8];
}

/* thread 0 writes chunk r, then signals r+1; thread 1 waits for the signal
 * and checks chunk r, which is never written again. */
static int put_signal_fn(int tid, int n, void *arg)
{
	(void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	volatile uint64_t *sig = (volatile uint64_t *)(e->dst.buf + REGION - 8);
	if (tid == 0) {
		for (int r = 0; r < ROUNDS; r++) {
			kn_ticket_t t;
			TU_CHECK(kn_put_signal(q, tu_addr(e->dst.buf + (size_t)r * CHUNK),
					       kinet_mr_rkey(e->dst.mr), e->src.buf + (size_t)r * CHUNK,
					       tu_lkey(&e->src), round_len(r), tu_addr(sig),
					       kinet_mr_rkey(e->dst.mr), 1, &t) == 0, "put_signal");
			if (r % 5 == 0)
				TU_CHECK(kn_wait(q, t) == 0, "put_signal %d", r);
		}
		TU_CHECK(kn_quiet(q) == 0, "quiet");
		return 0;
	}
	for (int r = 0; r < ROUNDS; r++) {
		TU_CHECK(kn_wait_signal(sig, (uint64_t)r + 1, TMO_NS) == 0, "signal %d never came", r);
		TU_CHECK(memcmp(e->dst.buf + (size_t)r * CHUNK, e->src.buf + (size_t)r * CHUNK,
				round_len(r)) == 0, "signal %d seen before its data", r);
	}
	return 0;
}

Test(ops, put_signal_and_wait_signal)
{
	struct env e;
	env_open(&e, NULL);
	*(uint64_t *)(e.dst.buf + REGION - 8) = 0;
	run(2, put_signal_fn, &e);
	for (int r = 0; r < ROUNDS; r++)
		memcpy(e.dst_shadow + (size_t)r * CHUNK, e.src.buf + (size_t)r * CHUNK, round_len(r));
	*(uint64_t *)(e.dst_shadow + REGION - 8) = ROUNDS;
	cr_assert_arr_eq(e.dst.buf, e.dst_shadow, REGION);
	env_close(&e);
}

static int signal_fn(int tid, int n, void *arg)
{
	(void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	volatile uint64_t *sig = (volatile uint64_t *)(e->dst.buf + 8);
	if (tid == 0) {
		for (int i = 0; i < 500; i++)
			TU_CHECK(kn_signal(q, tu_addr(sig), kinet_mr_rkey(e->dst.mr), 7, NULL) == 0,
				 "signal");
		TU_CHECK(kn_quiet(q) == 0, "quiet");
		return 0;
	}
	TU_CHECK(kn_wait_signal(sig, 3500, TMO_NS) == 0, "signals did not add up");
	return 0;
}

Test(ops, signal_adds)
{
	struct env e;
	env_open(&e, NULL);
	volatile uint64_t *sig = (volatile uint64_t *)(e.dst.buf + 8);
	*sig = 0;
	run(2, signal_fn, &e);
	cr_assert_eq(*sig, 3500);
	/* a value never reached: -ETIMEDOUT after the (short) bound */
	cr_assert_eq(kn_wait_signal(sig, 3501, 2000000), -ETIMEDOUT);
	cr_assert_eq(kn_wait_signal(sig, 3500, 0), 0);
	env_close(&e);
}

static int quiet_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	TU_CHECK(kn_quiet(q) == 0, "quiet on an idle QP");
	for (int round = 0; round < 3; round++) {
		/* 300 writes (SQ of 64: the reservations wait on completions), no waits */
		for (int i = 0; i < 300; i++) {
			uint32_t len = 1 + (uint32_t)(tu_rand64(&e->seed) % 12000);
			size_t off = (size_t)i * 12288 + (size_t)round;
			tu_fill_random(e->src.buf + off, len, e->seed + (uint64_t)i);
			TU_CHECK(kn_put(q, tu_addr(e->dst.buf + off), kinet_mr_rkey(e->dst.mr),
					e->src.buf + off, tu_lkey(&e->src), len, NULL) == 0, "put %d", i);
			memcpy(e->dst_shadow + off, e->src.buf + off, len);
		}
		TU_CHECK(kn_quiet(q) == 0, "quiet");
		TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "after quiet, round %d",
			 round);
	}
	return 0;
}

Test(ops, quiet)
{
	struct env e;
	env_open(&e, NULL);
	run(1, quiet_fn, &e);
	env_close(&e);
}

/* ---- doorbell modes ----------------------------------------------------------------- */

static int db_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int i = 0; i < 300; i++) {
		uint32_t len = 1 + (uint32_t)(tu_rand64(&e->seed) % 5000);
		size_t so = rnd_off(e, len), d = rnd_off(e, len);
		tu_fill_random(e->src.buf + so, len, e->seed);
		kn_ticket_t t;
		if (i % 3 == 2) {
			/* several WQEs, one doorbell */
			TU_CHECK(kn_sq_reserve(q, 3, &t) == 0, "reserve 3");
			kn_prep_nop(q, kn_wqe_ptr(q, t), t);
			kn_prep_write(q, kn_wqe_ptr(q, t + 1), t + 1, tu_addr(e->src.buf + so),
				      tu_lkey(&e->src), tu_addr(e->dst.buf + d), kinet_mr_rkey(e->dst.mr),
				      len);
			kn_prep_nop(q, kn_wqe_ptr(q, t + 2), t + 2);
			kn_sq_submit(q, t, 3);
			t += 2;
		} else {
			TU_CHECK(kn_put(q, tu_addr(e->dst.buf + d), kinet_mr_rkey(e->dst.mr),
					e->src.buf + so, tu_lkey(&e->src), len, &t) == 0, "put");
		}
		TU_CHECK(kn_wait(q, t) == 0, "write %d (mode %u)", i, q->db_mode);
		memcpy(e->dst_shadow + d, e->src.buf + so, len);
		TU_CHECK(memcmp(e->dst.buf + d, e->dst_shadow + d, len) == 0, "write %d", i);
	}
	TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "target");
	return 0;
}

static void db_mode_case(int mode)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 32, .db_mode = mode};
	env_open(&e, &at);
	cr_assert_eq(kinet_qp_db_mode(e.p.a), mode);
	cr_assert_eq((int)e.p.da->db_mode, mode);
	run(1, db_fn, &e);
	struct kinet_counters c;
	cr_assert_eq(kinet_ctx_counters(e.p.ctx, &c), 0);
	if (mode == KN_DB_CPU_PROXY)
		cr_assert_gt(c.proxy_rings, 0, "the CPU proxy never rang");
	else
		cr_assert_eq(c.proxy_rings, 0);
	env_close(&e);
}

Test(ops, doorbell_gpu)
{
	db_mode_case(KN_DB_GPU);
}

Test(ops, doorbell_blueflame)
{
	db_mode_case(KN_DB_BLUEFLAME);
}

Test(ops, doorbell_cpu_proxy)
{
	db_mode_case(KN_DB_CPU_PROXY);
}

/* The doorbell register alone (no doorbell record update) gets WQEs executed. */
static int reg_only_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	for (int round = 0; round < 40; round++) {
		uint32_t k = 1 + (uint32_t)round % 5;
		kn_ticket_t t;
		TU_CHECK(kn_sq_reserve(q, k, &t) == 0, "reserve");
		size_t d[5];
		uint32_t len[5];
		for (uint32_t i = 0; i < k; i++) {
			len[i] = 1 + (uint32_t)(tu_rand64(&e->seed) % 3000);
			d[i] = rnd_off(e, len[i]);
			tu_fill_random(e->src.buf + d[i], len[i], e->seed);
			kn_prep_write(q, kn_wqe_ptr(q, t + i), t + i, tu_addr(e->src.buf + d[i]),
				      tu_lkey(&e->src), tu_addr(e->dst.buf + d[i]),
				      kinet_mr_rkey(e->dst.mr), len[i]);
		}
		KN_STORE64(&q->st->ready, t + k);
		KN_FENCE_SYS();
		*(volatile uint64_t *)q->db = *(const uint64_t *)kn_wqe_ptr(q, t + k - 1);
		KN_FENCE_SYS();
		q->st->rung = t + k;
		TU_CHECK(kn_wait(q, t + k - 1) == 0, "register-only doorbell, round %d", round);
		for (uint32_t i = 0; i < k; i++) {
			memcpy(e->dst_shadow + d[i], e->src.buf + d[i], len[i]);
			TU_CHECK(memcmp(e->dst.buf + d[i], e->src.buf + d[i], len[i]) == 0, "write %u", i);
		}
	}
	TU_CHECK(q->dbrec[KN_SND_DBR] == 0, "the doorbell record was written");
	TU_CHECK(memcmp(e->dst.buf, e->dst_shadow, REGION) == 0, "target");
	return 0;
}

Test(ops, doorbell_register_only)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 16, .db_mode = KN_DB_GPU};
	env_open(&e, &at);
	run(1, reg_only_fn, &e);
	env_close(&e);
}

/* ---- raw multi-segment WQEs ------------------------------------------------------------ */

struct raw_env {
	struct tu_rawpair p;
	struct tu_region src, dst, back, rbuf;
	uint64_t seed;
};

static void raw_open(struct raw_env *r, uint32_t sq_depth)
{
	memset(r, 0, sizeof(*r));
	cr_assert_eq(tu_rawpair_open(&r->p, sq_depth, 16), 0);
	cr_assert_eq(tu_region_alloc(&r->src, r->p.pd, MiB, KINET_ACCESS_LOCAL_WRITE, 21), 0);
	cr_assert_eq(tu_region_alloc(&r->dst, r->p.pd, MiB, KINET_ACCESS_ALL, 22), 0);
	cr_assert_eq(tu_region_alloc(&r->back, r->p.pd, MiB, KINET_ACCESS_LOCAL_WRITE, 23), 0);
	cr_assert_eq(tu_region_alloc(&r->rbuf, r->p.pd, MiB, KINET_ACCESS_LOCAL_WRITE, 24), 0);
	r->seed = 99;
}

static void raw_close(struct raw_env *r)
{
	cr_assert(tu_region_canaries_ok(&r->src) && tu_region_canaries_ok(&r->dst) &&
		  tu_region_canaries_ok(&r->back) && tu_region_canaries_ok(&r->rbuf));
	tu_region_free(&r->src);
	tu_region_free(&r->dst);
	tu_region_free(&r->back);
	tu_region_free(&r->rbuf);
	tu_rawpair_close(&r->p);
}

/* Builds a WQE: ctrl, [raddr], then pieces, each a pointer segment into
 * `reg` (or an inline segment carrying bytes of reg). Returns nbb. */
struct piece {
	uint32_t off, len;
	int inl;
};

static uint32_t build(uint8_t *w, uint64_t idx, uint32_t qpn, uint8_t opcode, int with_raddr,
		      uint64_t raddr, uint32_t rkey, const struct tu_region *reg,
		      const struct piece *pc, int np, uint32_t imm)
{
	memset(w, 0, 1024);
	uint32_t off = 16;
	if (with_raddr) {
		kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
		off = 32;
	}
	for (int i = 0; i < np; i++) {
		if (pc[i].inl) {
			*(uint32_t *)(w + off) = kn_htobe32(pc[i].len | KN_INLINE_SEG);
			memcpy(w + off + 4, reg->buf + pc[i].off, pc[i].len);
			off += (4 + pc[i].len + 15) & ~15u;
		} else {
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + off), pc[i].len, tu_lkey(reg),
					tu_addr(reg->buf + pc[i].off));
			off += 16;
		}
	}
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)idx, opcode, 0, qpn,
			KN_WQE_CTRL_CQ_UPDATE, (uint8_t)(off / 16), 0, imm);
	return (off + 63) / 64;
}

/* Random list of np pieces in [0, MiB) that do not overlap. */
static uint32_t pieces(struct raw_env *r, struct piece *pc, int np, int allow_inline)
{
	uint32_t total = 0;
	uint32_t slot = MiB / (uint32_t)np;
	for (int i = 0; i < np; i++) {
		pc[i].inl = allow_inline && (tu_rand64(&r->seed) % 4 == 0);
		uint32_t maxl = pc[i].inl ? 28 : slot / 2; /* 16 pieces fit in 63 ds */
		pc[i].len = 1 + (uint32_t)(tu_rand64(&r->seed) % maxl);
		pc[i].off = (uint32_t)i * slot + (uint32_t)(tu_rand64(&r->seed) % (slot - pc[i].len));
		total += pc[i].len;
	}
	return total;
}

Test(ops, raw_gather_write_send_and_scatter_read)
{
	struct raw_env r;
	raw_open(&r, 8); /* a small SQ: multi-block WQEs wrap its end */
	uint32_t qpn = kinet_qp_num(r.p.a);
	uint8_t w[1024];
	uint8_t *expect = malloc(MiB);
	cr_assert(expect);
	for (int it = 0; it < 300; it++) {
		struct piece pc[16];
		int np = 1 + (int)(tu_rand64(&r.seed) % 16);
		int kind = it % 3;
		tu_fill_random(r.src.buf, MiB, r.seed);
		struct kn_cqe64 cqe;
		if (kind == 0) { /* RDMA write with a gather list (inline pieces too) */
			uint32_t total = pieces(&r, pc, np, 1);
			uint32_t d = (uint32_t)(tu_rand64(&r.seed) % (MiB - total));
			uint32_t nbb = build(w, r.p.pi, qpn, KN_OPCODE_RDMA_WRITE, 1,
					     tu_addr(r.dst.buf + d), kinet_mr_rkey(r.dst.mr), &r.src, pc,
					     np, 0);
			uint64_t t = tu_post(&r.p, w, nbb);
			cr_assert_eq(kinet_cq_poll_wait(r.p.acq, &cqe, 10000), 0);
			cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "write: syndrome %s",
				     kinet_syndrome_str(tu_cqe_synd(&cqe)));
			cr_assert_eq(tu_cqe_idx(&cqe), (uint16_t)t);
			cr_assert_eq(kn_be32toh(cqe.byte_cnt), total);
			uint32_t o = d;
			for (int i = 0; i < np; i++) {
				cr_assert_arr_eq(r.dst.buf + o, r.src.buf + pc[i].off, pc[i].len,
						 "piece %d of %d", i, np);
				o += pc[i].len;
			}
		} else if (kind == 1) { /* send with a gather list into one receive buffer */
			uint32_t total = pieces(&r, pc, np, 1);
			uint32_t d = (uint32_t)(tu_rand64(&r.seed) % (MiB - total));
			memcpy(expect, r.rbuf.buf, MiB);
			kn_ticket_t rt;
			cr_assert_eq(kn_recv_post(r.p.db, r.rbuf.buf + d, tu_lkey(&r.rbuf), total, &rt), 0);
			uint32_t imm = (uint32_t)it;
			uint32_t nbb = build(w, r.p.pi, qpn, KN_OPCODE_SEND_IMM, 0, 0, 0, &r.src, pc, np,
					     kn_htobe32(imm));
			uint64_t t = tu_post(&r.p, w, nbb);
			cr_assert_eq(kinet_cq_poll_wait(r.p.acq, &cqe, 10000), 0);
			cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "send: syndrome %s",
				     kinet_syndrome_str(tu_cqe_synd(&cqe)));
			cr_assert_eq(tu_cqe_idx(&cqe), (uint16_t)t);
			kn_recv_info info;
			cr_assert_eq(kn_recv_poll(r.p.db, rt, 1, &info), 0);
			cr_assert_eq(info.byte_len, total);
			cr_assert(info.has_imm && info.imm == imm);
			uint32_t o = d;
			for (int i = 0; i < np; i++) {
				memcpy(expect + o, r.src.buf + pc[i].off, pc[i].len);
				o += pc[i].len;
			}
			cr_assert_arr_eq(r.rbuf.buf, expect, MiB, "receive buffer after send %d", it);
		} else { /* read into a scatter list */
			uint32_t total = pieces(&r, pc, np, 0);
			uint32_t s = (uint32_t)(tu_rand64(&r.seed) % (MiB - total));
			tu_fill_random(r.dst.buf + s, total, r.seed + 1);
			memcpy(expect, r.back.buf, MiB);
			uint32_t nbb = build(w, r.p.pi, qpn, KN_OPCODE_RDMA_READ, 1,
					     tu_addr(r.dst.buf + s), kinet_mr_rkey(r.dst.mr), &r.back,
					     pc, np, 0);
			uint64_t t = tu_post(&r.p, w, nbb);
			cr_assert_eq(kinet_cq_poll_wait(r.p.acq, &cqe, 10000), 0);
			cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ, "read: syndrome %s",
				     kinet_syndrome_str(tu_cqe_synd(&cqe)));
			cr_assert_eq(tu_cqe_idx(&cqe), (uint16_t)t);
			cr_assert_eq(kn_be32toh(cqe.byte_cnt), total);
			uint32_t o = s;
			for (int i = 0; i < np; i++) {
				memcpy(expect + pc[i].off, r.dst.buf + o, pc[i].len);
				o += pc[i].len;
			}
			cr_assert_arr_eq(r.back.buf, expect, MiB, "scatter list after read %d", it);
		}
	}
	free(expect);
	raw_close(&r);
}

/* Unsignaled WQEs complete silently; the next signaled one reports. */
Test(ops, raw_unsignaled)
{
	struct raw_env r;
	raw_open(&r, 16);
	uint32_t qpn = kinet_qp_num(r.p.a);
	uint8_t w[1024];
	for (int it = 0; it < 50; it++) {
		struct piece pc = {.off = (uint32_t)it * 1000, .len = 999, .inl = 0};
		uint64_t first = r.p.pi;
		for (int i = 0; i < 5; i++) {
			uint32_t nbb = build(w, r.p.pi, qpn, KN_OPCODE_RDMA_WRITE, 1,
					     tu_addr(r.dst.buf + (size_t)i * 100000 + (size_t)it * 1000),
					     kinet_mr_rkey(r.dst.mr), &r.src, &pc, 1, 0);
			if (i < 4)
				((struct kn_wqe_ctrl_seg *)w)->fm_ce_se = 0;
			tu_post(&r.p, w, nbb);
		}
		struct kn_cqe64 cqe;
		cr_assert_eq(kinet_cq_poll_wait(r.p.acq, &cqe, 10000), 0);
		cr_assert_eq(tu_cqe_op(&cqe), KN_CQE_REQ);
		cr_assert_eq(tu_cqe_idx(&cqe), (uint16_t)(first + 4), "the CQE names the signaled WQE");
		cr_assert_eq(kinet_cq_poll(r.p.acq, &cqe), -EBUSY, "unsignaled WQEs wrote CQEs");
		for (int i = 0; i < 5; i++)
			cr_assert_arr_eq(r.dst.buf + (size_t)i * 100000 + (size_t)it * 1000,
					 r.src.buf + (size_t)it * 1000, 999);
	}
	raw_close(&r);
}

/* ---- zero-length operations and argument checks ---------------------------------- */

static int zero_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da, *rq = e->p.db;
	kn_ticket_t t, rt;
	TU_CHECK(kn_put(q, tu_addr(e->dst.buf + 10), kinet_mr_rkey(e->dst.mr), e->src.buf,
			tu_lkey(&e->src), 0, &t) == 0 && kn_wait(q, t) == 0, "zero-length write");
	TU_CHECK(check_req_cqe(q, t, KN_OPCODE_RDMA_WRITE, 0) == 0, "CQE");
	TU_CHECK(kn_get(q, e->back.buf, tu_lkey(&e->back), tu_addr(e->dst.buf + 10),
			kinet_mr_rkey(e->dst.mr), 0, &t) == 0 && kn_wait(q, t) == 0, "zero-length read");
	/* a zero-length send consumes a receive and says 0 bytes */
	TU_CHECK(kn_recv_post(rq, e->rbuf.buf, tu_lkey(&e->rbuf), 100, &rt) == 0, "recv");
	TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
	kn_prep_send(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf), tu_lkey(&e->src), 0, 1, 0xabc);
	kn_sq_submit(q, t, 1);
	TU_CHECK(kn_wait(q, t) == 0, "zero-length send");
	kn_recv_info info;
	TU_CHECK(kn_recv_poll(rq, rt, 1, &info) == 0, "receive of a zero-length send");
	TU_CHECK(info.byte_len == 0 && info.has_imm && info.imm == 0xabc, "zero-length receive: %u",
		 info.byte_len);
	/* write with immediate and no data: the immediate alone */
	TU_CHECK(kn_recv_post(rq, e->rbuf.buf, tu_lkey(&e->rbuf), 100, &rt) == 0, "recv");
	TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
	kn_prep_write_imm(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf), tu_lkey(&e->src),
			  tu_addr(e->dst.buf), kinet_mr_rkey(e->dst.mr), 0, 0x12345678);
	kn_sq_submit(q, t, 1);
	TU_CHECK(kn_wait(q, t) == 0, "zero-length write with immediate");
	TU_CHECK(kn_recv_poll(rq, rt, 1, &info) == 0, "its receive");
	TU_CHECK(info.opcode == KN_CQE_RESP_WR_IMM && info.imm == 0x12345678 && info.byte_len == 0,
		 "immediate alone");
	/* argument checks of the device API */
	TU_CHECK(kn_sq_reserve(q, 0, &t) == -EINVAL, "reserve 0");
	TU_CHECK(kn_sq_reserve(q, q->sq_wqe_cnt + 1, &t) == -EINVAL, "reserve more than the SQ");
	TU_CHECK(kn_recv_poll(rq, rt + 5, 0, &info) == -EINVAL, "poll of a future receive ticket");
	TU_CHECK(kn_recv_poll(rq, rt + 1, 0, &info) == -EBUSY, "poll of the next, unposted receive");
	TU_CHECK(kn_recv_post(q, e->rbuf.buf, tu_lkey(&e->rbuf), 100, &rt) == -EINVAL,
		 "receive on a QP without a receive queue");
	TU_CHECK(kn_test(q, q->st->resv + 3) == -EBUSY, "test of a ticket not yet handed out");
	TU_CHECK(kn_quiet(q) == 0, "quiet");
	return 0;
}

Test(ops, zero_length_and_argument_checks)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 16, .rq_depth = 4};
	/* a without a receive queue, connected to a b2 with one */
	env_open(&e, &(struct kinet_qp_attr){.sq_depth = 16});
	kinet_qp *b2;
	cr_assert_eq(kinet_qp_create(e.p.pd, &at, &b2), 0);
	cr_assert_eq(kinet_qp_modify(e.p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_connect_local(e.p.a, b2), 0);
	cr_assert_eq(kinet_qp_device(b2, &e.p.db), 0);
	run(1, zero_fn, &e);
	cr_assert_arr_eq(e.dst.buf, e.dst_shadow, REGION, "zero-length writes changed bytes");
	cr_assert_arr_eq(e.back.buf, e.back_shadow, REGION, "a zero-length read changed bytes");
	cr_assert_arr_eq(e.rbuf.buf, e.rbuf_shadow, REGION, "a zero-length send changed bytes");
	cr_assert_eq(kinet_qp_destroy(b2), 0);
	env_close(&e);
}

/* A QP connected to itself (loopback): write, read, send to its own
 * receive queue, atomics. */
static int loop_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct env *e = arg;
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	for (int i = 0; i < 50; i++) {
		uint32_t len = 1 + (uint32_t)(tu_rand64(&e->seed) % 30000);
		size_t so = rnd_off(e, len), d = rnd_off(e, len);
		tu_fill_random(e->src.buf + so, len, e->seed);
		kn_ticket_t t, rt;
		TU_CHECK(kn_put(q, tu_addr(e->dst.buf + d), rkey, e->src.buf + so, tu_lkey(&e->src),
				len, &t) == 0 && kn_wait(q, t) == 0, "loopback write");
		TU_CHECK(memcmp(e->dst.buf + d, e->src.buf + so, len) == 0, "loopback write data");
		TU_CHECK(kn_get(q, e->back.buf + so, tu_lkey(&e->back), tu_addr(e->dst.buf + d), rkey,
				len, &t) == 0 && kn_wait(q, t) == 0, "loopback read");
		TU_CHECK(memcmp(e->back.buf + so, e->src.buf + so, len) == 0, "loopback read data");
		TU_CHECK(kn_recv_post(q, e->rbuf.buf + d, tu_lkey(&e->rbuf), len, &rt) == 0, "recv");
		TU_CHECK(kn_sq_reserve(q, 1, &t) == 0, "reserve");
		kn_prep_send(q, kn_wqe_ptr(q, t), t, tu_addr(e->src.buf + so), tu_lkey(&e->src), len, 0,
			     0);
		kn_sq_submit(q, t, 1);
		TU_CHECK(kn_wait(q, t) == 0, "loopback send");
		kn_recv_info info;
		TU_CHECK(kn_recv_poll(q, rt, 1, &info) == 0 && info.byte_len == len, "loopback receive");
		TU_CHECK(memcmp(e->rbuf.buf + d, e->src.buf + so, len) == 0, "loopback send data");
		uint64_t old, *w = (uint64_t *)(e->dst.buf + (d & ~(size_t)7));
		uint64_t v = *w;
		TU_CHECK(kn_atomic_fetch_add(q, tu_addr(w), rkey, 5, (uint64_t *)e->back.buf,
					     tu_lkey(&e->back), &old) == 0 && old == v && *w == v + 5,
			 "loopback fetch-add");
	}
	return 0;
}

Test(ops, loopback_qp)
{
	struct env e;
	struct kinet_qp_attr at = {.sq_depth = 16, .rq_depth = 4};
	env_open(&e, &at);
	kinet_qp *l;
	cr_assert_eq(kinet_qp_create(e.p.pd, &at, &l), 0);
	cr_assert_eq(kinet_qp_connect_local(l, l), 0);
	cr_assert_eq(kinet_qp_get_state(l), KINET_QPS_RTS);
	cr_assert_eq(kinet_qp_device(l, &e.p.da), 0);
	run(1, loop_fn, &e);
	cr_assert_eq(kinet_qp_destroy(l), 0);
	env_close(&e);
}
