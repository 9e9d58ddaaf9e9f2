/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A target QP's own remote-access flags (kinet_qp_attr.remote_access, ibv's
 * qp_access_flags), on regions that allow everything. For a target QP that
 * allows writes only, and for one that allows nothing, each case first runs
 * the operations the QP allows (their data checked), then one it refuses,
 * then writes after it, and checks:
 *  - exactly one error CQE for the refused WQE: remote access error, reason
 *    KINET_REASON_QP_ACCESS, the requester QP in ERR;
 *  - every later WQE is flushed;
 *  - the target region and the local result region are byte for byte what
 *    the allowed operations left (random contents), canaries intact;
 *  - the target QP stays RTS, as for a region's access error.
 * QPs without the field (0) and with every flag given allow everything.
 * Run also with KINET_GPU_ENGINE=host (test_qp_access.geng_host).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

#define RLEN 65536
#define W_LEN 777
#define R_LEN 500

enum op { OP_NONE, OP_WRITE, OP_READ, OP_FA, OP_CS };

struct aenv {
	struct tu_pair p;
	struct tu_region src; /* LOCAL_WRITE: what writes send */
	struct tu_region dst; /* every access: the target */
	struct tu_region res; /* LOCAL_WRITE: where reads and atomic results land */
	uint8_t *want_dst, *want_res; /* what they must hold */
	enum op allowed[3];
	enum op bad;
};

static void aenv_open(struct aenv *e, uint32_t remote_access, uint64_t seed)
{
	memset(e, 0, sizeof(*e));
	struct kinet_qp_attr at = {.sq_depth = 32, .remote_access = remote_access};
	cr_assert_eq(tu_pair_open(&e->p, &at), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, RLEN, KINET_ACCESS_LOCAL_WRITE, seed), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, RLEN, KINET_ACCESS_ALL, seed + 1), 0);
	cr_assert_eq(tu_region_alloc(&e->res, e->p.pd, RLEN, KINET_ACCESS_LOCAL_WRITE, seed + 2), 0);
	e->want_dst = malloc(RLEN);
	e->want_res = malloc(RLEN);
	cr_assert(e->want_dst && e->want_res);
	memcpy(e->want_dst, e->dst.buf, RLEN);
	memcpy(e->want_res, e->res.buf, RLEN);
	tu_fail_msg[0] = 0;
}

static void aenv_close(struct aenv *e)
{
	cr_assert(tu_region_canaries_ok(&e->src), "canary of src changed");
	cr_assert(tu_region_canaries_ok(&e->dst), "canary of dst changed");
	cr_assert(tu_region_canaries_ok(&e->res), "canary of res changed");
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_region_free(&e->res);
	free(e->want_dst);
	free(e->want_res);
	tu_pair_close(&e->p);
}

/* Operation op at slot k (distinct ranges per slot). */
static int post_op(struct aenv *e, enum op op, int k, kn_ticket_t *t)
{
	kn_qp *q = e->p.da;
	uint32_t rkey = kinet_mr_rkey(e->dst.mr);
	uint64_t off = 4096 * (uint64_t)k;
	int rc;
	switch (op) {
	case OP_WRITE:
		return kn_put(q, tu_addr(e->dst.buf + off), rkey, e->src.buf + off, tu_lkey(&e->src),
			      W_LEN, t);
	case OP_READ:
		return kn_get(q, e->res.buf + off, tu_lkey(&e->res), tu_addr(e->dst.buf + off), rkey,
			      R_LEN, t);
	case OP_FA:
	case OP_CS:
		if ((rc = kn_sq_reserve(q, 1, t)))
			return rc;
		if (op == OP_FA) {
			kn_prep_atomic_fa(q, kn_wqe_ptr(q, *t), *t, tu_addr(e->res.buf + off),
					  tu_lkey(&e->res), tu_addr(e->dst.buf + off), rkey,
					  0x1234567);
		} else {
			/* compare with the current value: it would swap if allowed */
			uint64_t cur;
			memcpy(&cur, e->dst.buf + off, 8);
			kn_prep_atomic_cs(q, kn_wqe_ptr(q, *t), *t, tu_addr(e->res.buf + off),
					  tu_lkey(&e->res), tu_addr(e->dst.buf + off), rkey, cur,
					  ~cur);
		}
		kn_sq_submit(q, *t, 1);
		return 0;
	default:
		return -EINVAL;
	}
}

/* What a successful op at slot k leaves in want_dst / want_res. */
static void expect_op(struct aenv *e, enum op op, int k)
{
	uint64_t off = 4096 * (uint64_t)k;
	uint64_t old, nv;
	switch (op) {
	case OP_WRITE:
		memcpy(e->want_dst + off, e->src.buf + off, W_LEN);
		break;
	case OP_READ:
		memcpy(e->want_res + off, e->want_dst + off, R_LEN);
		break;
	case OP_FA:
	case OP_CS:
		memcpy(&old, e->want_dst + off, 8);
		nv = op == OP_FA ? old + 0x1234567 : ~old;
		memcpy(e->want_dst + off, &nv, 8);
		old = __builtin_bswap64(old); /* the NIC returns it big-endian */
		memcpy(e->want_res + off, &old, 8);
		break;
	default:
		break;
	}
}

static int case_fn(int tid, int n, void *arg)
{
	(void)tid, (void)n;
	struct aenv *e = arg;
	kn_qp *q = e->p.da;
	kn_ticket_t t;
	int k = 0;
	for (int i = 0; i < 3 && e->allowed[i] != OP_NONE; i++, k++) {
		TU_CHECK(post_op(e, e->allowed[i], k, &t) == 0, "posting allowed op %d", i);
		int rc = kn_wait(q, t);
		TU_CHECK(rc == 0, "allowed op %d (%d): %d, syndrome %s", i, e->allowed[i], rc,
			 kinet_syndrome_str(kn_qp_error(q, NULL)));
	}
	if (e->bad == OP_NONE)
		return 0;
	kn_ticket_t bad;
	TU_CHECK(post_op(e, e->bad, k, &bad) == 0, "posting the refused op");
	int rc = kn_wait(q, bad);
	TU_CHECK(rc == -EIO, "refused op: kn_wait returned %d", rc);
	TU_CHECK(kinet_qp_get_state(e->p.a) == KINET_QPS_ERR, "requester state %s",
		 kinet_qp_state_str(kinet_qp_get_state(e->p.a)));
	uint32_t vendor = 0xdead;
	uint32_t s = kn_qp_error(q, &vendor);
	TU_CHECK(s == KN_SYND_REMOTE_ACCESS_ERR, "syndrome 0x%x (%s)", s, kinet_syndrome_str(s));
	TU_CHECK(vendor == KINET_REASON_QP_ACCESS, "reason %u (%s)", vendor,
		 kinet_reason_str((int)vendor));
	const struct kn_cqe64 *c = knx_cqe_at(q, bad);
	TU_CHECK(tu_cqe_op(c) == KN_CQE_REQ_ERR && tu_cqe_synd(c) == KN_SYND_REMOTE_ACCESS_ERR,
		 "CQE opcode %u syndrome 0x%x", tu_cqe_op(c), tu_cqe_synd(c));
	TU_CHECK(tu_cqe_idx(c) == (uint16_t)bad, "error CQE names WQE %u", tu_cqe_idx(c));
	TU_CHECK(kinet_cqe_reason(c) == KINET_REASON_QP_ACCESS, "CQE reason %d",
		 kinet_cqe_reason(c));
	/* writes after it: flushed, nothing lands */
	for (int i = 0; i < 4; i++) {
		TU_CHECK(post_op(e, OP_WRITE, k + 1 + i, &t) == 0, "write after the error");
		TU_CHECK(kn_wait(q, t) == -EIO, "WQE %d after the error", i);
		c = knx_cqe_at(q, t);
		TU_CHECK(tu_cqe_op(c) == KN_CQE_REQ_ERR && tu_cqe_synd(c) == KN_SYND_WR_FLUSH_ERR,
			 "WQE after the error: opcode %u syndrome 0x%x", tu_cqe_op(c),
			 tu_cqe_synd(c));
	}
	TU_CHECK(kn_qp_error(q, NULL) == KN_SYND_REMOTE_ACCESS_ERR, "the first error stays");
	TU_CHECK(kinet_qp_get_state(e->p.b) == KINET_QPS_RTS, "target state %s",
		 kinet_qp_state_str(kinet_qp_get_state(e->p.b)));
	return 0;
}

static void run(uint32_t remote_access, enum op a0, enum op a1, enum op a2, enum op bad,
		uint64_t seed)
{
	struct aenv e;
	aenv_open(&e, remote_access, seed);
	e.allowed[0] = a0;
	e.allowed[1] = a1;
	e.allowed[2] = a2;
	e.bad = bad;
	cr_assert_eq(kinet_host_exec(1, case_fn, &e), 0, "%s", tu_fail_msg);
	for (int i = 0; i < 3; i++)
		expect_op(&e, e.allowed[i], i);
	cr_assert_arr_eq(e.dst.buf, e.want_dst, RLEN, "the target region");
	cr_assert_arr_eq(e.res.buf, e.want_res, RLEN, "the local result region");
	struct kinet_counters k;
	cr_assert_eq(kinet_ctx_counters(e.p.ctx, &k), 0);
	if (bad != OP_NONE) {
		cr_assert_eq(k.errors, 1, "error CQEs %llu", (unsigned long long)k.errors);
		cr_assert_eq(k.by_syndrome[KN_SYND_REMOTE_ACCESS_ERR], 1);
		cr_assert_geq(k.flushed, 4);
	} else {
		cr_assert_eq(k.errors, 0, "error CQEs %llu", (unsigned long long)k.errors);
	}
	aenv_close(&e);
}

#define SET KINET_QP_ACCESS_SET
#define WR KINET_ACCESS_REMOTE_WRITE
#define RD KINET_ACCESS_REMOTE_READ
#define AT KINET_ACCESS_REMOTE_ATOMIC

/* a target QP that allows writes only */
Test(qp_access, write_only_refuses_read)
{
	run(SET | WR, OP_WRITE, OP_NONE, OP_NONE, OP_READ, 10);
}
Test(qp_access, write_only_refuses_fetch_add)
{
	run(SET | WR, OP_WRITE, OP_NONE, OP_NONE, OP_FA, 11);
}
Test(qp_access, write_only_refuses_compare_swap)
{
	run(SET | WR | KINET_ACCESS_LOCAL_WRITE, OP_WRITE, OP_NONE, OP_NONE, OP_CS, 12);
}
/* one that allows nothing */
Test(qp_access, none_refuses_write)
{
	run(SET, OP_NONE, OP_NONE, OP_NONE, OP_WRITE, 20);
}
Test(qp_access, none_refuses_read)
{
	run(SET, OP_NONE, OP_NONE, OP_NONE, OP_READ, 21);
}
Test(qp_access, none_refuses_fetch_add)
{
	run(SET, OP_NONE, OP_NONE, OP_NONE, OP_FA, 22);
}
/* read and atomic but no write */
Test(qp_access, read_atomic_refuses_write)
{
	run(SET | RD | AT, OP_READ, OP_FA, OP_CS, OP_WRITE, 30);
}
/* every flag given, and the field left 0: everything, as before */
Test(qp_access, all_given_allows_everything)
{
	run(SET | WR | RD | AT, OP_WRITE, OP_READ, OP_FA, OP_NONE, 40);
}
Test(qp_access, unset_allows_everything)
{
	run(0, OP_WRITE, OP_READ, OP_CS, OP_NONE, 41);
}

/* bits that are not access flags: refused at creation */
Test(qp_access, unknown_bits_refused)
{
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp = NULL;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	struct kinet_qp_attr at = {.remote_access = SET | 0x100};
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL);
	cr_assert_null(qp);
	at.remote_access = 0x10;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), -EINVAL);
	at.remote_access = SET | WR;
	cr_assert_eq(kinet_qp_create(pd, &at, &qp), 0);
	cr_assert_eq(kinet_qp_destroy(qp), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}
