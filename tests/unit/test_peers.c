/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers in the same process but in different contexts (kinet_qp_connect_local
 * across contexts is supported): destroying one end while the other end's
 * engine is moving data must never let that engine touch the freed QP (the
 * ASan run of this suite reports any such access), and the survivor's later
 * work fails as against a peer that went away (transport retry exceeded).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../util/testutil.h"

#define LEN 4096u

struct side {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp;
	kn_qp *d;
	struct tu_region src, dst;
};

static void side_open(struct side *s, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &s->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(s->ctx, &s->pd), 0);
	cr_assert_eq(kinet_qp_create(s->pd, NULL, &s->qp), 0);
	cr_assert_eq(kinet_qp_device(s->qp, &s->d), 0);
	cr_assert_eq(tu_region_alloc(&s->src, s->pd, LEN, KINET_ACCESS_LOCAL_WRITE, seed), 0);
	cr_assert_eq(tu_region_alloc(&s->dst, s->pd, LEN,
				     KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_WRITE, seed + 1),
		     0);
}

static void side_close(struct side *s)
{
	if (s->qp)
		cr_assert_eq(kinet_qp_destroy(s->qp), 0);
	tu_region_free(&s->src);
	tu_region_free(&s->dst);
	cr_assert_eq(kinet_pd_free(s->pd), 0);
	cr_assert_eq(kinet_close(s->ctx), 0);
}

/* A thread that keeps writing from `from` into `to`'s dst until stopped;
 * counts successes and remembers the first error. */
struct pump {
	struct side *from, *to;
	atomic_bool stop;
	atomic_long ok;
	atomic_int err; /* first non-zero kn_wait/kn_put result */
	pthread_t th;
};

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	while (!atomic_load(&p->stop)) {
		kn_ticket_t t;
		int rc = kn_put(p->from->d, tu_addr(p->to->dst.buf), kinet_mr_rkey(p->to->dst.mr),
				p->from->src.buf, tu_lkey(&p->from->src), LEN, &t);
		if (rc == 0)
			rc = kn_wait(p->from->d, t);
		if (rc) {
			int zero = 0;
			atomic_compare_exchange_strong(&p->err, &zero, rc);
			break;
		}
		atomic_fetch_add(&p->ok, 1);
	}
	return NULL;
}

static void wait_ok(struct pump *p, long n)
{
	for (int i = 0; i < 10000 && atomic_load(&p->ok) < n && !atomic_load(&p->err); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	cr_assert_geq(atomic_load(&p->ok), n, "no traffic (error %d)", atomic_load(&p->err));
}

/* Destroys one end while both ends write to each other. */
static void destroy_under_traffic(int victim)
{
	struct side s[2];
	side_open(&s[0], 11);
	side_open(&s[1], 22);
	cr_assert_eq(kinet_qp_connect_local(s[0].qp, s[1].qp), 0);
	struct pump p[2] = {{.from = &s[0], .to = &s[1]}, {.from = &s[1], .to = &s[0]}};
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&p[i].th, NULL, pump_main, &p[i]), 0);
	wait_ok(&p[0], 50);
	wait_ok(&p[1], 50);
	/* the victim's own writer stops first (its QP is about to go away) */
	int other = 1 - victim;
	atomic_store(&p[victim].stop, true);
	pthread_join(p[victim].th, NULL);
	cr_assert_eq(atomic_load(&p[victim].err), 0);
	cr_assert_eq(kinet_qp_destroy(s[victim].qp), 0);
	s[victim].qp = NULL;
	/* the survivor keeps writing at a peer that is gone: its next writes fail
	 * (transport retry exceeded, QP to ERR), and nothing reaches freed memory.
	 * Bounded: a survivor whose writes go on succeeding is stopped after 30 s
	 * (each of its waits is bounded by the QP's timeout) */
	for (int i = 0; i < 30000 && !atomic_load(&p[other].err); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	atomic_store(&p[other].stop, true);
	pthread_join(p[other].th, NULL);
	cr_assert_eq(atomic_load(&p[other].err), -EIO,
		     "writes at a destroyed peer: %d (0: still succeeding after 30 s)",
		     atomic_load(&p[other].err));
	cr_assert_eq(kn_qp_error(s[other].d, NULL), KN_SYND_TRANSPORT_RETRY_EXC_ERR);
	cr_assert_eq(kinet_qp_get_state(s[other].qp), KINET_QPS_ERR);
	/* what landed before is byte for byte the writers' data */
	cr_assert_eq(memcmp(s[1].dst.buf, s[0].src.buf, LEN), 0);
	cr_assert_eq(memcmp(s[0].dst.buf, s[1].src.buf, LEN), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert(tu_region_canaries_ok(&s[i].src));
		cr_assert(tu_region_canaries_ok(&s[i].dst));
	}
	side_close(&s[0]);
	side_close(&s[1]);
}

Test(peers, cross_context_destroy_target_under_traffic) { destroy_under_traffic(1); }
Test(peers, cross_context_destroy_requester_under_traffic) { destroy_under_traffic(0); }

/* The survivor can be reset and connected to a new peer in the other context. */
Test(peers, cross_context_reconnect_after_destroy)
{
	struct side s[2];
	side_open(&s[0], 31);
	side_open(&s[1], 41);
	cr_assert_eq(kinet_qp_connect_local(s[0].qp, s[1].qp), 0);
	cr_assert_eq(kinet_qp_destroy(s[1].qp), 0);
	cr_assert_eq(kinet_qp_create(s[1].pd, NULL, &s[1].qp), 0);
	cr_assert_eq(kinet_qp_device(s[1].qp, &s[1].d), 0);
	cr_assert_eq(kinet_qp_modify(s[0].qp, KINET_QPS_RESET, NULL), 0);
	cr_assert_eq(kinet_qp_connect_local(s[0].qp, s[1].qp), 0);
	kn_ticket_t t;
	cr_assert_eq(kn_put(s[0].d, tu_addr(s[1].dst.buf), kinet_mr_rkey(s[1].dst.mr), s[0].src.buf,
			    tu_lkey(&s[0].src), LEN, &t),
		     0);
	cr_assert_eq(kn_wait(s[0].d, t), 0);
	cr_assert_eq(memcmp(s[1].dst.buf, s[0].src.buf, LEN), 0);
	side_close(&s[0]);
	side_close(&s[1]);
}

/* Many QPs of one context point at one QP of another; destroying that one
 * reaches all of them. */
Test(peers, many_referrers_across_contexts)
{
	struct side t;
	side_open(&t, 51);
	struct side s;
	side_open(&s, 61);
	enum { N = 16 };
	kinet_qp *q[N];
	kn_qp *d[N];
	struct kinet_qp_remote r = {.local = t.qp, .qpn = kinet_qp_num(t.qp)};
	cr_assert_eq(kinet_qp_modify(t.qp, KINET_QPS_INIT, NULL), 0);
	struct kinet_qp_remote back = {.local = s.qp, .qpn = kinet_qp_num(s.qp)};
	cr_assert_eq(kinet_qp_modify(t.qp, KINET_QPS_RTR, &back), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(kinet_qp_create(s.pd, NULL, &q[i]), 0);
		cr_assert_eq(kinet_qp_device(q[i], &d[i]), 0);
		cr_assert_eq(kinet_qp_modify(q[i], KINET_QPS_INIT, NULL), 0);
		cr_assert_eq(kinet_qp_modify(q[i], KINET_QPS_RTR, &r), 0);
		cr_assert_eq(kinet_qp_modify(q[i], KINET_QPS_RTS, NULL), 0);
		kn_ticket_t tk;
		cr_assert_eq(kn_put(d[i], tu_addr(t.dst.buf), kinet_mr_rkey(t.dst.mr), s.src.buf,
				    tu_lkey(&s.src), LEN, &tk),
			     0);
		cr_assert_eq(kn_wait(d[i], tk), 0);
	}
	cr_assert_eq(memcmp(t.dst.buf, s.src.buf, LEN), 0);
	cr_assert_eq(kinet_qp_destroy(t.qp), 0);
	t.qp = NULL;
	for (int i = 0; i < N; i++) {
		kn_ticket_t tk;
		cr_assert_eq(kn_put(d[i], tu_addr(t.dst.buf), kinet_mr_rkey(t.dst.mr), s.src.buf,
				    tu_lkey(&s.src), LEN, &tk),
			     0);
		cr_assert_eq(kn_wait(d[i], tk), -EIO);
		cr_assert_eq(kn_qp_error(d[i], NULL), KN_SYND_TRANSPORT_RETRY_EXC_ERR);
		cr_assert_eq(kinet_qp_destroy(q[i]), 0);
	}
	side_close(&s);
	side_close(&t);
}
