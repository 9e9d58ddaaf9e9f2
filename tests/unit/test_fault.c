/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault injection on the software NIC (kinet_fault_add, KINET_FAULT): an
 * error CQE with a chosen syndrome every Nth matching WQE, by QP and
 * opcode; a delay and a CQ that looks full hold the WQE (and those behind
 * it) and then let it run; a silent peer makes the WQE time out with
 * transport retry exceeded; malformed rules are refused with -EINVAL, at
 * kinet_fault_add and (KINET_FAULT) at kinet_open. Wire messages (drop,
 * corrupt): tests/net/test_lifecycle.c.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "../util/testutil.h"

struct env {
	struct tu_pair p;
	struct tu_region src, dst;
};

static void env_open(struct env *e)
{
	struct kinet_qp_attr at = {.sq_depth = 64};
	cr_assert_eq(tu_pair_open(&e->p, &at), 0);
	cr_assert_eq(tu_region_alloc(&e->src, e->p.pd, 65536, KINET_ACCESS_LOCAL_WRITE, 1), 0);
	cr_assert_eq(tu_region_alloc(&e->dst, e->p.pd, 65536, KINET_ACCESS_ALL, 2), 0);
}

static void env_close(struct env *e)
{
	tu_region_free(&e->src);
	tu_region_free(&e->dst);
	tu_pair_close(&e->p);
}

static kn_ticket_t put(struct env *e, int i)
{
	kn_ticket_t t = 0;
	cr_assert_eq(kn_put(e->p.da, tu_addr(e->dst.buf + i * 64), kinet_mr_rkey(e->dst.mr),
			    e->src.buf + i * 64, tu_lkey(&e->src), 64, &t),
		     0);
	return t;
}

Test(fault, error_every_third_write_of_one_qp)
{
	struct env e;
	env_open(&e);
	char spec[128];
	snprintf(spec, sizeof(spec), "action=error,qp=0x%x,op=write,every=3,synd=remote_op",
		 kinet_qp_num(e.p.a));
	cr_assert_eq(kinet_fault_add(e.p.ctx, spec), 1);
	/* a read on the same QP does not match (op=write) */
	kn_ticket_t t;
	cr_assert_eq(kn_get(e.p.da, e.src.buf + 8192, tu_lkey(&e.src), tu_addr(e.dst.buf + 8192),
			    kinet_mr_rkey(e.dst.mr), 64, &t),
		     0);
	cr_assert_eq(kn_wait(e.p.da, t), 0);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 0)), 0);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 1)), 0);
	kn_ticket_t bad = put(&e, 2);
	cr_assert_eq(kn_wait(e.p.da, bad), -EIO);
	uint32_t why = 0;
	cr_assert_eq(kn_qp_error(e.p.da, &why), KN_SYND_REMOTE_OP_ERR);
	cr_assert_eq(why, KINET_REASON_INJECTED);
	cr_assert_eq(kinet_qp_get_state(e.p.a), KINET_QPS_ERR);
	/* the failed write never ran; the two before it did */
	cr_assert_eq(memcmp(e.dst.buf, e.src.buf, 128), 0);
	cr_assert_neq(memcmp(e.dst.buf + 128, e.src.buf + 128, 64), 0);
	struct kinet_qp_counters c;
	cr_assert_eq(kinet_qp_counters(e.p.a, &c), 0);
	cr_assert_eq(c.faults, 1);
	/* other QPs are not touched; clearing removes the rule */
	cr_assert_eq(kinet_fault_clear(e.p.ctx), 0);
	cr_assert_eq(kinet_qp_modify(e.p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(e.p.b, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_connect_local(e.p.a, e.p.b), 0);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(kn_wait(e.p.da, put(&e, i)), 0);
	env_close(&e);
}

Test(fault, count_after_and_probability)
{
	struct env e;
	env_open(&e);
	/* prob=1 fires on every match: after=2 skips two, count=1 stops after one */
	cr_assert_eq(kinet_fault_add(e.p.ctx, "action=error,prob=1,after=2,count=1,synd=0x04"), 1);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 0)), 0);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 1)), 0);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 2)), -EIO);
	cr_assert_eq(kn_qp_error(e.p.da, NULL), KN_SYND_LOCAL_PROT_ERR);
	cr_assert_eq(kinet_qp_modify(e.p.a, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_modify(e.p.b, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_connect_local(e.p.a, e.p.b), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(kn_wait(e.p.da, put(&e, i)), 0, "count=1 fired again");
	env_close(&e);
}

/* delay and cqfull hold the WQE (not complete right after posting, the
 * WQE behind it waits too), then it runs normally. */
static void held(const char *spec)
{
	struct env e;
	env_open(&e);
	cr_assert_eq(kinet_fault_add(e.p.ctx, spec), 1);
	kn_ticket_t t0 = put(&e, 0), t1 = put(&e, 1);
	/* held for 300 ms from when the engine took it: not complete yet */
	struct timespec ts = {0, 20000000};
	nanosleep(&ts, NULL);
	cr_assert_eq(kn_test(e.p.da, t0), -EBUSY);
	cr_assert_eq(kn_test(e.p.da, t1), -EBUSY);
	cr_assert_eq(kn_wait(e.p.da, t1), 0);
	cr_assert_eq(kn_wait(e.p.da, t0), 0);
	cr_assert_eq(memcmp(e.dst.buf, e.src.buf, 128), 0);
	struct kinet_qp_counters c;
	cr_assert_eq(kinet_qp_counters(e.p.a, &c), 0);
	cr_assert_eq(c.faults, 1);
	cr_assert_eq(c.errors, 0);
	env_close(&e);
}

Test(fault, delay_holds_the_wqe) { held("action=delay,us=300000,count=1"); }
Test(fault, cq_looks_full_for_a_while) { held("action=cqfull,us=300000,count=1"); }

Test(fault, silent_peer_times_out)
{
	setenv("KINET_NET_TIMEOUT_MS", "200", 1); /* read at the first tunable */
	struct env e;
	env_open(&e);
	cr_assert_eq(kinet_fault_add(e.p.ctx, "action=silent,op=write,count=1"), 1);
	kn_ticket_t t0 = put(&e, 0), t1 = put(&e, 1);
	cr_assert_eq(kn_wait(e.p.da, t0), -EIO);
	uint32_t why = 0;
	cr_assert_eq(kn_qp_error(e.p.da, &why), KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	cr_assert_eq(why, KINET_REASON_PEER_GONE);
	cr_assert_eq(kn_wait(e.p.da, t1), -EIO); /* flushed */
	cr_assert_neq(memcmp(e.dst.buf, e.src.buf, 64), 0);
	env_close(&e);
}

Test(fault, malformed_rules_refused)
{
	struct env e;
	env_open(&e);
	const char *bad[] = {"",
			     "action=explode",
			     "qp=0x100",
			     "action=error,synd=flush",
			     "action=error,synd=5",
			     "action=error,every=0",
			     "action=error,prob=1.5",
			     "action=error,every=2,prob=0.5",
			     "action=delay,us=-3",
			     "action=error,op=jump",
			     "action=error,qp=banana",
			     "action=error,colour=red",
			     "action=error;action",
			     "action=error,count=0"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(kinet_fault_add(e.p.ctx, bad[i]), -EINVAL, "\"%s\" accepted", bad[i]);
	cr_assert_eq(kinet_fault_add(e.p.ctx, NULL), -EINVAL);
	cr_assert_eq(kinet_fault_add(NULL, "action=error"), -EINVAL);
	/* none of them added anything: traffic flows */
	for (int i = 0; i < 4; i++)
		cr_assert_eq(kn_wait(e.p.da, put(&e, i)), 0);
	cr_assert_eq(kinet_fault_add(e.p.ctx, "action=delay,us=1 ; action=error,op=read"), 2);
	env_close(&e);
}

Test(fault, environment_rules_apply_and_malformed_ones_refuse_open)
{
	setenv("KINET_FAULT", "action=error,op=write,every=2", 1);
	struct env e;
	env_open(&e);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 0)), 0);
	cr_assert_eq(kn_wait(e.p.da, put(&e, 1)), -EIO);
	uint32_t why = 0;
	cr_assert_eq(kn_qp_error(e.p.da, &why), KN_SYND_REMOTE_ACCESS_ERR); /* the default */
	cr_assert_eq(why, KINET_REASON_INJECTED);
	env_close(&e);
}

Test(fault, malformed_environment_refuses_open)
{
	setenv("KINET_FAULT", "action=error,every=zero", 1);
	kinet_ctx *ctx = NULL;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &ctx), -EINVAL);
	cr_assert_null(ctx);
}
