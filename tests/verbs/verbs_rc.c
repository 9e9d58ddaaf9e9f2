/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verbs_rc.c - an RDMA program written against rdma-core's verbs.h alone
 * (no kinet header), linked with the system's libibverbs and run under
 * kinet-run (test_verbs_rc): it opens kinet0 and drives two RC QPs of one
 * process, connected to each other with the usual INIT/RTR/RTS modifies
 * (the other QP's GID, QP number and PSN), through the CPU data path:
 * RDMA write, write with immediate, read, send, send with immediate, both
 * atomics, inline data, unsignaled work requests, a full send queue, a
 * completion channel, a bad rkey (remote access error, then flushes), a
 * target QP whose qp_access_flags refuse a write, read or atomic, parent
 * domains (ibv_alloc_parent_domain), a shared receive queue under two QPs (ibv_create_srq, ibv_post_srq_recv), and
 * extended QPs (ibv_create_qp_ex, ibv_qp_to_qp_ex, every ibv_wr_* builder)
 * and extended CQs (ibv_create_cq_ex, read through ibv_start_poll ..
 * ibv_end_poll and the ibv_wc_read_* functions).
 * Data is random and checked byte for byte, every work completion's fields
 * are checked. Without a kinet device (the system's rdma-core) it fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#define BUF (1 << 20)
#define DEPTH 64

#define VT_WHO "verbs_rc"
#include "verbs_check.h"

struct side {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t psn;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_index;
static enum ibv_mtu mtu;
static uint32_t recv_sge = 1; /* max_recv_sge of the QPs make_side_ops creates */
static struct ibv_srq *side_srq; /* the SRQ they receive through (NULL: their own RQ) */

/* One work completion within 5 s. */
static struct ibv_wc wait_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "%s: ibv_poll_cq returned %d", what, n);
		if (n == 1)
			return wc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 5, "%s: no completion within 5 s", what);
		usleep(10);
	}
}

/* No further completion (within 50 ms). */
static void no_wc(struct ibv_cq *cq, const char *what)
{
	usleep(50000);
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);
	CHECK(n == 0, "%s: an unexpected completion (wr_id %" PRIu64 ", status %s)", what,
	      wc.wr_id, ibv_wc_status_str(wc.status));
}

static void expect_wc(const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, uint32_t qpn, const char *what)
{
	CHECK(wc->status == st, "%s: status %s (%d), expected %s", what,
	      ibv_wc_status_str(wc->status), wc->status, ibv_wc_status_str(st));
	CHECK(wc->wr_id == wr_id, "%s: wr_id %" PRIu64 ", expected %" PRIu64, what, wc->wr_id,
	      wr_id);
	if (st == IBV_WC_SUCCESS)
		CHECK(wc->opcode == op, "%s: opcode %d, expected %d", what, wc->opcode, op);
	CHECK(wc->qp_num == qpn, "%s: qp_num 0x%x, expected 0x%x", what, wc->qp_num, qpn);
}

/* ops: 0 for ibv_create_qp, else ibv_create_qp_ex with these send_ops_flags */
static void make_side_ops(struct side *s, struct ibv_cq *scq, struct ibv_cq *rcq, uint64_t ops)
{
	s->buf = aligned_alloc(4096, BUF);
	CHECK(s->buf, "no memory");
	fill(s->buf, BUF);
	s->mr = ibv_reg_mr(pd, s->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(s->mr, "ibv_reg_mr: %s", strerror(errno));
	s->scq = scq;
	s->rcq = rcq;
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = {.max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 4,
			.max_recv_sge = recv_sge, .max_inline_data = 128},
		.qp_type = IBV_QPT_RC,
		.srq = side_srq,
	};
	if (ops) {
		struct ibv_qp_init_attr_ex ix = {
			.send_cq = scq,
			.recv_cq = rcq,
			.cap = ia.cap,
			.qp_type = IBV_QPT_RC,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = pd,
			.send_ops_flags = ops,
			.srq = side_srq,
		};
		s->qp = ibv_create_qp_ex(ctx, &ix);
		CHECK(s->qp, "ibv_create_qp_ex: %s", strerror(errno));
	} else {
		s->qp = ibv_create_qp(pd, &ia);
		CHECK(s->qp, "ibv_create_qp: %s", strerror(errno));
	}
	s->psn = (uint32_t)rnd() & 0xffffff;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_CAP, &qi) == 0, "ibv_query_qp");
	CHECK(a.qp_state == IBV_QPS_RESET, "a new QP is in state %d", a.qp_state);
	/* through an SRQ, a QP has no receive queue of its own */
	bool rq_ok = side_srq ? qi.cap.max_recv_wr == 0 && qi.srq == side_srq
			      : qi.cap.max_recv_wr >= DEPTH && qi.cap.max_recv_sge >= recv_sge &&
					qi.cap.max_recv_sge < 2 * recv_sge;
	CHECK(qi.cap.max_send_wr >= DEPTH && rq_ok && qi.cap.max_send_sge == 4 &&
		      qi.cap.max_inline_data >= 128 && a.cap.max_inline_data >= 128,
	      "ibv_query_qp caps: send_wr %u recv_wr %u send_sge %u recv_sge %u inline %u",
	      qi.cap.max_send_wr, qi.cap.max_recv_wr, qi.cap.max_send_sge, qi.cap.max_recv_sge,
	      qi.cap.max_inline_data);
	CHECK(qi.send_cq == scq && qi.recv_cq == rcq && qi.qp_type == IBV_QPT_RC,
	      "ibv_query_qp: CQs or type");
}

static void make_side(struct side *s, struct ibv_cq *scq, struct ibv_cq *rcq)
{
	make_side_ops(s, scq, rcq, 0);
}

/* INIT with these qp_access_flags, RTR toward the peer (its GID, QP number,
 * PSN). */
static void connect_access(struct side *s, const struct side *peer, unsigned access)
{
	vt_rc_init_rtr(s->qp, access, mtu, peer->qp->qp_num, peer->psn, &gid, gid_index, 1);
}

/* INIT (every remote access), RTR toward the peer. */
static void connect_to(struct side *s, const struct side *peer)
{
	connect_access(s, peer,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
}

static void to_rts(struct side *s)
{
	vt_rc_rts(s->qp, s->psn);
}

static void post_send(struct side *s, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(s->qp, wr, &bad);
	CHECK(rc == 0, "%s: ibv_post_send: %s", what, strerror(rc));
}

static void post_recv(struct side *s, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge g = {.addr = (uintptr_t)(s->buf + off), .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &g, .num_sge = 1}, *bad = NULL;
	int rc = ibv_post_recv(s->qp, &wr, &bad);
	CHECK(rc == 0, "ibv_post_recv: %s", strerror(rc));
}

static uint32_t rlen(uint32_t max)
{
	return 1 + (uint32_t)(rnd() % max);
}

/* A target QP's qp_access_flags, on regions that allow every access: with
 * only IBV_ACCESS_REMOTE_WRITE (and LOCAL_WRITE) a write lands and a
 * fetch-and-add fails; with none a write and a read fail. A refused request
 * completes with IBV_WC_REM_ACCESS_ERR, the one after it flushes, the
 * requester QP is in ERR, and neither side's buffer changes. */
static void qp_access_case(unsigned access, bool write_ok, enum ibv_wr_opcode bad_op)
{
	struct ibv_cq *ca = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	struct ibv_cq *cb = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	CHECK(ca && cb, "ibv_create_cq: %s", strerror(errno));
	struct side A, B;
	make_side(&A, ca, ca);
	make_side(&B, cb, cb);
	connect_to(&A, &B);
	connect_access(&B, &A, access);
	to_rts(&A);
	to_rts(&B);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(B.qp, &qa, IBV_QP_ACCESS_FLAGS, &qi) == 0 &&
		      qa.qp_access_flags == access,
	      "ibv_query_qp: qp_access_flags 0x%x, 0x%x set", qa.qp_access_flags, access);
	uint32_t qpn = A.qp->qp_num;
	if (write_ok) {
		struct ibv_sge g = {(uintptr_t)A.buf, 3000, A.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &g, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED};
		wr.wr.rdma.remote_addr = (uintptr_t)B.buf;
		wr.wr.rdma.rkey = B.mr->rkey;
		post_send(&A, &wr, "allowed write");
		struct ibv_wc wc = wait_wc(ca, "allowed write");
		expect_wc(&wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qpn, "allowed write");
		CHECK(!memcmp(B.buf, A.buf, 3000), "allowed write: data");
	}
	uint8_t *ka = malloc(BUF), *kb = malloc(BUF);
	CHECK(ka && kb, "no memory");
	memcpy(ka, A.buf, BUF);
	memcpy(kb, B.buf, BUF);
	/* the refused request, then a write that would be allowed on its own */
	struct ibv_sge gb = {(uintptr_t)(A.buf + 65536), bad_op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 2048,
			     A.mr->lkey};
	struct ibv_send_wr bad = {.wr_id = 2, .sg_list = &gb, .num_sge = 1, .opcode = bad_op,
				  .send_flags = IBV_SEND_SIGNALED};
	if (bad_op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		bad.wr.atomic.remote_addr = (uintptr_t)(B.buf + 65536);
		bad.wr.atomic.rkey = B.mr->rkey;
		bad.wr.atomic.compare_add = 5;
	} else {
		bad.wr.rdma.remote_addr = (uintptr_t)(B.buf + 65536);
		bad.wr.rdma.rkey = B.mr->rkey;
	}
	struct ibv_sge gn = {(uintptr_t)(A.buf + 131072), 1000, A.mr->lkey};
	struct ibv_send_wr next = {.wr_id = 3, .sg_list = &gn, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	next.wr.rdma.remote_addr = (uintptr_t)(B.buf + 131072);
	next.wr.rdma.rkey = B.mr->rkey;
	bad.next = &next;
	post_send(&A, &bad, "refused request");
	struct ibv_wc wc = wait_wc(ca, "refused request");
	expect_wc(&wc, 2, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, qpn, "refused request");
	wc = wait_wc(ca, "after the refused request");
	expect_wc(&wc, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qpn, "after the refused request");
	no_wc(ca, "refused request");
	CHECK(ibv_query_qp(A.qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR,
	      "after a remote access error the QP is in state %d, not ERR", qa.qp_state);
	CHECK(!memcmp(A.buf, ka, BUF), "the requester's buffer changed");
	CHECK(!memcmp(B.buf, kb, BUF), "the target's buffer changed");
	free(ka);
	free(kb);
	CHECK(ibv_destroy_qp(A.qp) == 0 && ibv_destroy_qp(B.qp) == 0, "ibv_destroy_qp (access)");
	CHECK(ibv_dereg_mr(A.mr) == 0 && ibv_dereg_mr(B.mr) == 0, "ibv_dereg_mr (access)");
	CHECK(ibv_destroy_cq(ca) == 0 && ibv_destroy_cq(cb) == 0, "ibv_destroy_cq (access)");
	free(A.buf);
	free(B.buf);
}

static void test_qp_access(void)
{
	qp_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true,
		       IBV_WR_ATOMIC_FETCH_AND_ADD);
	qp_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true, IBV_WR_RDMA_READ);
	qp_access_case(0, false, IBV_WR_RDMA_WRITE);
	qp_access_case(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, false, IBV_WR_RDMA_WRITE);
	printf("verbs_rc: a target QP's qp_access_flags ok\n");
}

/* ibv_alloc_parent_domain (NVSHMEM's IBGDA makes its DC target's SRQ on
 * one): QPs, MRs, CQs and an SRQ made on a parent domain of the PD move
 * data as on the PD (a write checked byte for byte, a read refused by the
 * target's access flags); an MR of the parent domain serves a QP of the PD
 * (one protection domain); the PD cannot be freed while a parent domain
 * stands for it (EBUSY); a thread domain or custom allocators are refused
 * (EOPNOTSUPP), a missing PD is EINVAL. */
static void test_parent_domain(void)
{
	struct ibv_pd *base = pd;
	struct ibv_parent_domain_init_attr pa = {.pd = base};
	struct ibv_pd *pd2 = ibv_alloc_parent_domain(ctx, &pa);
	CHECK(pd2, "ibv_alloc_parent_domain: %s", strerror(errno));
	CHECK(pd2 != base && pd2->context == ctx, "the parent domain is the PD itself");
	pd = pd2; /* the case makes its QPs and MRs on pd */
	qp_access_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, true, IBV_WR_RDMA_READ);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd2, &sa);
	CHECK(srq, "ibv_create_srq on a parent domain: %s", strerror(errno));
	/* an MR of the parent domain, a QP of the PD: one protection domain */
	static uint8_t src[4096], dst[4096];
	fill(src, sizeof(src));
	memset(dst, 0, sizeof(dst));
	struct ibv_mr *ms = ibv_reg_mr(pd2, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(ms, "ibv_reg_mr on a parent domain: %s", strerror(errno));
	pd = base;
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq: %s", strerror(errno));
	struct side A, B;
	make_side(&A, cq, cq);
	make_side(&B, cq, cq);
	connect_to(&A, &B);
	connect_to(&B, &A);
	to_rts(&A);
	to_rts(&B);
	struct ibv_mr *md = ibv_reg_mr(pd2, dst, sizeof(dst),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(md, "ibv_reg_mr on a parent domain: %s", strerror(errno));
	struct ibv_sge g = {(uintptr_t)src, sizeof(src), ms->lkey};
	struct ibv_send_wr wr = {.wr_id = 7, .sg_list = &g, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = md->rkey;
	post_send(&A, &wr, "write between a PD's QPs with a parent domain's MRs");
	struct ibv_wc wc = wait_wc(cq, "write with a parent domain's MRs");
	expect_wc(&wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, A.qp->qp_num,
		  "write with a parent domain's MRs");
	CHECK(!memcmp(src, dst, sizeof(src)), "write with a parent domain's MRs: data");
	CHECK(ibv_destroy_qp(A.qp) == 0 && ibv_destroy_qp(B.qp) == 0, "ibv_destroy_qp");
	CHECK(ibv_dereg_mr(A.mr) == 0 && ibv_dereg_mr(B.mr) == 0 && ibv_dereg_mr(ms) == 0 &&
		      ibv_dereg_mr(md) == 0,
	      "ibv_dereg_mr");
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_srq(srq) == 0, "ibv_destroy_cq, _srq");
	free(A.buf);
	free(B.buf);
	int rc = ibv_dealloc_pd(base);
	CHECK(rc == EBUSY, "ibv_dealloc_pd of a PD with a parent domain: %d, not EBUSY", rc);
	CHECK(ibv_dealloc_pd(pd2) == 0, "ibv_dealloc_pd of the parent domain");
	struct ibv_parent_domain_init_attr bad = {.pd = base,
						  .comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS};
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &bad) && errno == EOPNOTSUPP,
	      "ibv_alloc_parent_domain with allocators: errno %d, not EOPNOTSUPP", errno);
	struct ibv_parent_domain_init_attr none = {.pd = NULL};
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &none) && errno == EINVAL,
	      "ibv_alloc_parent_domain without a PD: errno %d, not EINVAL", errno);
	printf("verbs_rc: parent domains ok\n");
}

/* Receives of several scatter entries (rdma-core's test_qp asks for up to
 * max_sge / 2 of them): a send lands across the entries in order, each
 * filled before the next, random data checked byte for byte, and nothing
 * written past the message; more entries than max_recv_sge is EINVAL. */
static void test_recv_sge(void)
{
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0, "ibv_query_device");
	recv_sge = 2 + (uint32_t)(rnd() % (uint32_t)(da.max_sge - 1)); /* 2 .. max_sge */
	struct ibv_cq *ce = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	struct ibv_cq *cf = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	CHECK(ce && cf, "ibv_create_cq: %s", strerror(errno));
	struct side E, F;
	make_side(&E, ce, ce);
	make_side(&F, cf, cf);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(F.qp, &qa, IBV_QP_CAP, &qi) == 0, "ibv_query_qp");
	uint32_t nmax = qi.cap.max_recv_sge;
	connect_to(&E, &F);
	connect_to(&F, &E);
	to_rts(&E);
	to_rts(&F);
	printf("verbs_rc: receives of up to %u scatter entries (asked %u)\n", nmax, recv_sge);
	uint8_t *msg = malloc(BUF / 2);
	CHECK(msg, "no memory");
	for (int it = 0; it < 40; it++) {
		/* n pieces in a random order over F's buffer, each apart from
		 * the others, a few of them empty */
		uint32_t n = 1 + (uint32_t)(rnd() % nmax), cap = 0;
		struct ibv_sge g[64];
		uint32_t slot = BUF / 2 / nmax;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t len = rnd() % 8 == 0 ? 0 : rlen(slot / 2);
			/* slot n-1-i: the pieces lie in the reverse order of the list */
			uint32_t at = (n - 1 - i) * slot + (uint32_t)(rnd() % (slot / 2));
			g[i] = (struct ibv_sge){.addr = (uintptr_t)(F.buf + at), .length = len,
						.lkey = F.mr->lkey};
			cap += len;
		}
		if (!cap) {
			g[0].length = 1;
			cap = 1;
		}
		fill(F.buf, BUF / 2);
		memcpy(F.buf + BUF / 2, F.buf, BUF / 2); /* F's reference copy, above */
		uint32_t mlen = 1 + (uint32_t)(rnd() % cap);
		fill(msg, mlen);
		memcpy(E.buf, msg, mlen);
		struct ibv_recv_wr rw = {.wr_id = 500 + (uint64_t)it, .sg_list = g,
					 .num_sge = (int)n}, *rbad = NULL;
		CHECK(ibv_post_recv(F.qp, &rw, &rbad) == 0, "ibv_post_recv of %u entries", n);
		struct ibv_sge sg = {.addr = (uintptr_t)E.buf, .length = mlen, .lkey = E.mr->lkey};
		struct ibv_send_wr sw = {.wr_id = 600 + (uint64_t)it, .sg_list = &sg, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
		post_send(&E, &sw, "send into several entries");
		struct ibv_wc wc = wait_wc(ce, "send into several entries");
		expect_wc(&wc, 600 + (uint64_t)it, IBV_WC_SUCCESS, IBV_WC_SEND, E.qp->qp_num,
			  "send into several entries");
		wc = wait_wc(cf, "receive of several entries");
		expect_wc(&wc, 500 + (uint64_t)it, IBV_WC_SUCCESS, IBV_WC_RECV, F.qp->qp_num,
			  "receive of several entries");
		CHECK(wc.byte_len == mlen, "receive of several entries: byte_len %u, sent %u",
		      wc.byte_len, mlen);
		/* expected: the reference with the message laid over the pieces */
		uint32_t done = 0;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t take = g[i].length < mlen - done ? g[i].length : mlen - done;
			size_t at = (size_t)((uint8_t *)(uintptr_t)g[i].addr - F.buf);
			memcpy(F.buf + BUF / 2 + at, msg + done, take);
			done += take;
		}
		CHECK(!memcmp(F.buf, F.buf + BUF / 2, BUF / 2),
		      "receive of %u entries, %u bytes: the data differs from the pieces'", n,
		      mlen);
	}
	/* one entry more than the QP holds */
	struct ibv_sge many[65];
	for (uint32_t i = 0; i <= nmax; i++)
		many[i] = (struct ibv_sge){
			.addr = (uintptr_t)F.buf, .length = 8, .lkey = F.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = many, .num_sge = (int)nmax + 1};
	struct ibv_recv_wr *rbad = NULL;
	CHECK(ibv_post_recv(F.qp, &rw, &rbad) == EINVAL && rbad == &rw,
	      "ibv_post_recv of %u entries on a QP of %u: not EINVAL", nmax + 1, nmax);
	free(msg);
	CHECK(ibv_destroy_qp(E.qp) == 0 && ibv_destroy_qp(F.qp) == 0, "ibv_destroy_qp (sge)");
	CHECK(ibv_dereg_mr(E.mr) == 0 && ibv_dereg_mr(F.mr) == 0, "ibv_dereg_mr (sge)");
	CHECK(ibv_destroy_cq(ce) == 0 && ibv_destroy_cq(cf) == 0, "ibv_destroy_cq (sge)");
	free(E.buf);
	free(F.buf);
	recv_sge = 1;
}

/* Shared receive queues: two RC QPs receive through one SRQ from two
 * senders. Receives are taken in the order they were posted, whichever QP
 * the message comes to; each completion names the receiving QP and its
 * posted work request, with the data in that request's buffer; laps of the
 * queue as completed WQEs are posted again; a full SRQ refuses with ENOMEM
 * and names the request; a bad key in a posted receive fails the QP it
 * comes to, and the other goes on; an SRQ in use cannot be destroyed. */
#define SRQ_SLOT 4096

/* A signaled send of len bytes of s's buffer, completed on scq, and its
 * receive through the SRQ on r, completed on rcq with work request rwr. */
static void srq_exchange(struct side *s, struct ibv_cq *scq, struct side *r, struct ibv_cq *rcq,
			 uint64_t swr, uint32_t len, uint64_t rwr, const char *what)
{
	struct ibv_sge sg = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr sw = {.wr_id = swr, .sg_list = &sg, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	post_send(s, &sw, what);
	struct ibv_wc wc = wait_wc(scq, what);
	expect_wc(&wc, swr, IBV_WC_SUCCESS, IBV_WC_SEND, s->qp->qp_num, what);
	wc = wait_wc(rcq, what);
	expect_wc(&wc, rwr, IBV_WC_SUCCESS, IBV_WC_RECV, r->qp->qp_num, what);
	CHECK(wc.byte_len == len, "%s: byte_len %u, sent %u", what, wc.byte_len, len);
}

static void test_srq(void)
{
	struct ibv_device_attr da;
	CHECK(ibv_query_device(ctx, &da) == 0, "ibv_query_device");
	CHECK(da.max_srq > 0 && da.max_srq_wr >= 1024 && da.max_srq_sge >= 1,
	      "SRQ limits: max_srq %d, max_srq_wr %d, max_srq_sge %d", da.max_srq, da.max_srq_wr,
	      da.max_srq_sge);
	struct ibv_srq_init_attr bad[] = {
		{.attr = {.max_wr = 0, .max_sge = 1}},
		{.attr = {.max_wr = (uint32_t)da.max_srq_wr + 1, .max_sge = 1}},
		{.attr = {.max_wr = 4, .max_sge = 0}},
		{.attr = {.max_wr = 4, .max_sge = (uint32_t)da.max_srq_sge + 1}},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		CHECK(!ibv_create_srq(pd, &bad[i]) && errno == EINVAL,
		      "ibv_create_srq of %u WQEs, %u entries: errno %d", bad[i].attr.max_wr,
		      bad[i].attr.max_sge, errno);
	}
	uint32_t want = 8 + (uint32_t)(rnd() % 60);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = want, .max_sge = 2}};
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq, "ibv_create_srq: %s", strerror(errno));
	uint32_t max = sa.attr.max_wr;
	CHECK(max >= want && max < 4 * want && sa.attr.max_sge >= 2,
	      "ibv_create_srq: %u WQEs of %u entries (asked %u of 2)", max, sa.attr.max_sge, want);
	struct ibv_srq_attr qa;
	CHECK(ibv_query_srq(srq, &qa) == 0 && qa.max_wr == max && qa.max_sge == sa.attr.max_sge,
	      "ibv_query_srq");
	qa.srq_limit = 2;
	CHECK(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT) == EOPNOTSUPP,
	      "ibv_modify_srq of the limit: not EOPNOTSUPP");
	struct ibv_cq *scq = ibv_create_cq(ctx, 4 * DEPTH, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 4 * DEPTH, NULL, NULL, 0);
	CHECK(scq && rcq, "ibv_create_cq: %s", strerror(errno));
	struct side R[2], S[2];
	for (int i = 0; i < 2; i++) {
		make_side(&S[i], scq, scq);
		side_srq = srq;
		make_side(&R[i], scq, rcq);
		side_srq = NULL;
		connect_to(&S[i], &R[i]);
		connect_to(&R[i], &S[i]);
		to_rts(&S[i]);
		to_rts(&R[i]);
	}
	/* a QP of an SRQ has no receive queue to post to */
	struct ibv_sge g0 = {.addr = (uintptr_t)R[0].buf, .length = 8, .lkey = R[0].mr->lkey};
	struct ibv_recv_wr w0 = {.wr_id = 1, .sg_list = &g0, .num_sge = 1}, *rbad = NULL;
	CHECK(ibv_post_recv(R[0].qp, &w0, &rbad) == EINVAL && rbad == &w0,
	      "ibv_post_recv on a QP of an SRQ: not EINVAL");
	/* the receive buffers: a slot per WQE of R[0]'s region, two pieces each */
	uint32_t nslot = max + 1;
	CHECK(2 * (size_t)nslot * SRQ_SLOT <= BUF, "too many slots");
	uint64_t *fifo = calloc(4 * (size_t)max + 8, sizeof(*fifo)); /* wr_ids in post order */
	CHECK(fifo, "no memory");
	size_t fh = 0, ft = 0;
	uint64_t next_id = 7000;
	/* posts one receive per free slot, as one list: with max + 1 the last
	 * does not fit */
	struct ibv_recv_wr *wl = calloc(nslot, sizeof(*wl));
	struct ibv_sge *gl = calloc(2 * (size_t)nslot, sizeof(*gl));
	CHECK(wl && gl, "no memory");
	for (uint32_t k = 0; k < nslot; k++) {
		uint8_t *at = R[0].buf + (size_t)k * 2 * SRQ_SLOT;
		gl[2 * k] = (struct ibv_sge){.addr = (uintptr_t)at, .length = SRQ_SLOT / 2,
					     .lkey = R[0].mr->lkey};
		gl[2 * k + 1] = (struct ibv_sge){.addr = (uintptr_t)(at + SRQ_SLOT),
						 .length = SRQ_SLOT / 2, .lkey = R[0].mr->lkey};
		wl[k] = (struct ibv_recv_wr){.wr_id = next_id + k, .sg_list = &gl[2 * k],
					     .num_sge = 2, .next = k + 1 < nslot ? &wl[k + 1] : NULL};
	}
	rbad = NULL;
	int rc = ibv_post_srq_recv(srq, wl, &rbad);
	CHECK(rc == ENOMEM && rbad == &wl[max],
	      "ibv_post_srq_recv of %u WQEs into %u: %d, bad_wr %td", nslot, max, rc,
	      rbad ? rbad - wl : -1);
	for (uint32_t k = 0; k < max; k++)
		fifo[ft++] = next_id + k;
	next_id += nslot;
	/* laps: messages from either sender, the receive taken in post order */
	uint8_t *msg = malloc(SRQ_SLOT);
	CHECK(msg, "no memory");
	uint32_t laps = 3 * max + (uint32_t)(rnd() % max), got[2] = {0, 0};
	for (uint32_t m = 0; m < laps; m++) {
		int i = (int)(rnd() % 2);
		uint32_t len = rlen(SRQ_SLOT);
		fill(msg, len);
		memcpy(S[i].buf, msg, len);
		struct ibv_sge sg = {.addr = (uintptr_t)S[i].buf, .length = len,
				     .lkey = S[i].mr->lkey};
		struct ibv_send_wr sw = {.wr_id = 100 + m, .sg_list = &sg, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
		post_send(&S[i], &sw, "send to an SRQ");
		struct ibv_wc wc = wait_wc(scq, "send to an SRQ");
		expect_wc(&wc, 100 + m, IBV_WC_SUCCESS, IBV_WC_SEND, S[i].qp->qp_num,
			  "send to an SRQ");
		uint64_t id = fifo[fh++ % (4 * (size_t)max + 8)];
		wc = wait_wc(rcq, "receive through an SRQ");
		expect_wc(&wc, id, IBV_WC_SUCCESS, IBV_WC_RECV, R[i].qp->qp_num,
			  "receive through an SRQ");
		CHECK(wc.byte_len == len && wc.src_qp == S[i].qp->qp_num,
		      "receive through an SRQ: byte_len %u (sent %u), src_qp 0x%x", wc.byte_len,
		      len, wc.src_qp);
		/* the slot of wr_id id: two pieces */
		uint32_t k = (uint32_t)((id - 7000) % nslot);
		const uint8_t *at = R[0].buf + (size_t)k * 2 * SRQ_SLOT;
		uint32_t a = len < SRQ_SLOT / 2 ? len : SRQ_SLOT / 2;
		CHECK(!memcmp(at, msg, a) && !memcmp(at + SRQ_SLOT, msg + a, len - a),
		      "message %u (%u bytes) differs in the buffers of wr_id %" PRIu64, m, len, id);
		got[i]++;
		/* the slot again, with a new id */
		struct ibv_sge gp[2] = {
			{.addr = (uintptr_t)at, .length = SRQ_SLOT / 2, .lkey = R[0].mr->lkey},
			{.addr = (uintptr_t)(at + SRQ_SLOT), .length = SRQ_SLOT / 2,
			 .lkey = R[0].mr->lkey}};
		uint64_t nid = 7000 + (id - 7000) + nslot * (1 + m / nslot + 1);
		struct ibv_recv_wr rw = {.wr_id = nid, .sg_list = gp, .num_sge = 2};
		CHECK(ibv_post_srq_recv(srq, &rw, &rbad) == 0, "ibv_post_srq_recv again");
		fifo[ft++ % (4 * (size_t)max + 8)] = nid;
	}
	CHECK(got[0] && got[1], "both QPs received (%u, %u)", got[0], got[1]);
	printf("verbs_rc: SRQ of %u WQEs: %u messages over two QPs (%u, %u)\n", max, laps, got[0],
	       got[1]);
	errno = 0;
	CHECK(ibv_destroy_srq(srq) == EBUSY, "ibv_destroy_srq while QPs use it: not EBUSY");
	/* a receive with a bad key, and S[0]'s message comes to it */
	/* S[1] takes every posted receive; then the SRQ is empty */
	while (fh < ft)
		srq_exchange(&S[1], scq, &R[1], rcq, 50, 8, fifo[fh++ % (4 * (size_t)max + 8)],
			     "drain");
	no_wc(rcq, "an empty SRQ");
	uint8_t before[64];
	memcpy(before, R[0].buf, sizeof(before));
	struct ibv_sge gb = {.addr = (uintptr_t)R[0].buf, .length = 64,
			     .lkey = R[0].mr->lkey ^ 0x5a5a00u};
	struct ibv_recv_wr rb = {.wr_id = 99, .sg_list = &gb, .num_sge = 1};
	CHECK(ibv_post_srq_recv(srq, &rb, &rbad) == 0, "ibv_post_srq_recv (bad key)");
	struct ibv_sge sg0 = {.addr = (uintptr_t)S[0].buf, .length = 64, .lkey = S[0].mr->lkey};
	struct ibv_send_wr sw0 = {.wr_id = 52, .sg_list = &sg0, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	post_send(&S[0], &sw0, "to a bad key");
	struct ibv_wc wc = wait_wc(rcq, "a receive with a bad key");
	expect_wc(&wc, 99, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, R[0].qp->qp_num,
		  "a receive with a bad key");
	wc = wait_wc(scq, "a send to a bad key");
	CHECK(wc.wr_id == 52 && wc.status != IBV_WC_SUCCESS,
	      "a send to a bad key: wr_id %" PRIu64 " status %s", wc.wr_id,
	      ibv_wc_status_str(wc.status));
	CHECK(!memcmp(before, R[0].buf, sizeof(before)), "a receive with a bad key wrote");
	/* R[1] goes on through the same SRQ */
	struct ibv_sge gg = {.addr = (uintptr_t)R[1].buf, .length = 64, .lkey = R[1].mr->lkey};
	struct ibv_recv_wr rg = {.wr_id = 98, .sg_list = &gg, .num_sge = 1};
	CHECK(ibv_post_srq_recv(srq, &rg, &rbad) == 0, "ibv_post_srq_recv (after an error)");
	fill(S[1].buf, 64);
	srq_exchange(&S[1], scq, &R[1], rcq, 53, 64, 98, "after an error");
	CHECK(!memcmp(R[1].buf, S[1].buf, 64), "receive after an error: data differs");
	free(msg);
	free(fifo);
	free(wl);
	free(gl);
	for (int i = 0; i < 2; i++) {
		CHECK(ibv_destroy_qp(S[i].qp) == 0 && ibv_destroy_qp(R[i].qp) == 0,
		      "ibv_destroy_qp (srq)");
		CHECK(ibv_dereg_mr(S[i].mr) == 0 && ibv_dereg_mr(R[i].mr) == 0, "ibv_dereg_mr (srq)");
		free(S[i].buf);
		free(R[i].buf);
	}
	CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq");
	CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(rcq) == 0, "ibv_destroy_cq (srq)");
}

/* Extended QPs (ibv_create_qp_ex with send_ops_flags, ibv_qp_to_qp_ex):
 * every wr_* builder on random data, checked byte for byte, with the
 * completions' fields; several WRs in one wr_start .. wr_complete, wr_abort,
 * and a batch that fails whole. */
static void test_qpx(void)
{
	const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct ibv_cq *cc = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	struct ibv_cq *cd = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	CHECK(cc && cd, "ibv_create_cq: %s", strerror(errno));
	/* an operation kinet-verbs does not offer is refused at creation */
	struct ibv_qp_init_attr_ex bx = {
		.send_cq = cc, .recv_cq = cc, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW,
	};
	errno = 0;
	CHECK(!ibv_create_qp_ex(ctx, &bx) && errno == EOPNOTSUPP,
	      "ibv_create_qp_ex with bind MW: not refused with EOPNOTSUPP (errno %d)", errno);
	/* other QP types are refused as not supported (EOPNOTSUPP, which
	 * rdma-core's tests skip on), whatever else the attributes ask, as
	 * ibv_create_qp refuses them; so is a raw packet QP without RSS */
	const enum ibv_qp_type other[] = {IBV_QPT_UD, IBV_QPT_UC, IBV_QPT_XRC_SEND,
					  IBV_QPT_XRC_RECV, IBV_QPT_RAW_PACKET};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		struct ibv_qp_init_attr_ex ox = {
			.send_cq = cc, .recv_cq = cc, .qp_type = other[i],
			.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				.max_recv_sge = 1 + (uint32_t)(rnd() % 8)},
			/* more than a PD, so that verbs.h's ibv_create_qp_ex does
			 * not hand it to ibv_create_qp */
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, .pd = pd,
		};
		errno = 0;
		CHECK(!ibv_create_qp_ex(ctx, &ox) && errno == EOPNOTSUPP,
		      "ibv_create_qp_ex of QP type %d: errno %d, not EOPNOTSUPP", (int)other[i],
		      errno);
		struct ibv_qp_init_attr oi = {
			.send_cq = cc, .recv_cq = cc, .qp_type = other[i], .cap = ox.cap,
		};
		errno = 0;
		CHECK(!ibv_create_qp(pd, &oi) && errno == EOPNOTSUPP,
		      "ibv_create_qp of QP type %d: errno %d, not EOPNOTSUPP", (int)other[i],
		      errno);
	}
	struct side C, D;
	make_side_ops(&C, cc, cc, ops);
	make_side_ops(&D, cd, cd, ops);
	uint32_t qc = C.qp->qp_num, qd = D.qp->qp_num;
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(C.qp), *y = ibv_qp_to_qp_ex(D.qp);
	CHECK(x && y && &x->qp_base == C.qp && &y->qp_base == D.qp,
	      "ibv_qp_to_qp_ex of an extended QP: %s", strerror(errno));
	connect_to(&C, &D);
	connect_to(&D, &C);
	to_rts(&C);
	to_rts(&D);
	uint8_t *ref = malloc(BUF);
	CHECK(ref, "no memory");

	for (int it = 0; it < 40; it++) {
		int op = it % 10;
		uint32_t l1 = rlen(30000), l2 = rlen(30000), l3 = rlen(3000);
		uint32_t src = (uint32_t)(rnd() % 4096), dst = (uint32_t)(rnd() % 4096);
		uint64_t id = 20000 + (uint64_t)it;
		uint32_t imm = (uint32_t)rnd();
		fill(C.buf + src, l1 + l2 + l3 + 300);
		fill(D.buf, 200000);
		struct ibv_sge g[3] = {
			{(uintptr_t)(C.buf + src), l1, C.mr->lkey},
			{(uintptr_t)(C.buf + src + l1 + 100), l2, C.mr->lkey},
			{(uintptr_t)(C.buf + src + l1 + l2 + 200), l3, C.mr->lkey},
		};
		memcpy(ref, (void *)(uintptr_t)g[0].addr, l1);
		memcpy(ref + l1, (void *)(uintptr_t)g[1].addr, l2);
		memcpy(ref + l1 + l2, (void *)(uintptr_t)g[2].addr, l3);
		uint32_t len = l1 + l2 + l3;
		uint64_t *word = (uint64_t *)(D.buf + 300000 + 8 * (rnd() % 100));
		uint64_t *old = (uint64_t *)(C.buf + 600000);
		uint64_t before = *word, arg = rnd(), swp = rnd();
		uint8_t inl[128];
		uint32_t il1 = rlen(60), il2 = rlen(60);
		fill(inl, sizeof(inl));
		enum ibv_wc_opcode wop = IBV_WC_RDMA_WRITE;
		bool recv = false;
		if (op == 3 || op == 4 || op == 9)
			post_recv(&D, id + 100000, 0, 100000), recv = true;
		if (op == 1)
			post_recv(&D, id + 100000, 0, 16), recv = true;
		*old = rnd();
		ibv_wr_start(x);
		x->wr_id = id;
		x->wr_flags = IBV_SEND_SIGNALED;
		switch (op) {
		case 0: /* write, a gather list */
			ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)(D.buf + dst));
			ibv_wr_set_sge_list(x, 3, g);
			break;
		case 1: /* write with immediate, one entry */
			ibv_wr_rdma_write_imm(x, D.mr->rkey, (uintptr_t)(D.buf + 100000 + dst),
					      htonl(imm));
			ibv_wr_set_sge(x, g[0].lkey, g[0].addr, l1);
			len = l1;
			break;
		case 2: /* read from D into C's two entries */
			ibv_wr_rdma_read(x, D.mr->rkey, (uintptr_t)(D.buf + dst));
			g[0].addr = (uintptr_t)(C.buf + 200000);
			g[1].addr = (uintptr_t)(C.buf + 400000);
			ibv_wr_set_sge_list(x, 2, g);
			len = l1 + l2;
			wop = IBV_WC_RDMA_READ;
			break;
		case 3: /* send, a gather list */
			ibv_wr_send(x);
			ibv_wr_set_sge_list(x, 3, g);
			wop = IBV_WC_SEND;
			break;
		case 4: /* send with immediate */
			ibv_wr_send_imm(x, htonl(imm));
			ibv_wr_set_sge(x, g[1].lkey, g[1].addr, l2);
			memcpy(ref, (void *)(uintptr_t)g[1].addr, l2);
			len = l2;
			wop = IBV_WC_SEND;
			break;
		case 5: /* compare-and-swap that matches */
		case 6: /* one that does not */
			ibv_wr_atomic_cmp_swp(x, D.mr->rkey, (uintptr_t)word,
					      op == 5 ? before : before ^ 1, swp);
			ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)old, 8);
			len = 8;
			wop = IBV_WC_COMP_SWAP;
			break;
		case 7: /* fetch-and-add */
			ibv_wr_atomic_fetch_add(x, D.mr->rkey, (uintptr_t)word, arg);
			ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)old, 8);
			len = 8;
			wop = IBV_WC_FETCH_ADD;
			break;
		case 8: /* inline write: the data is copied when set */
			ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)(D.buf + dst));
			ibv_wr_set_inline_data(x, inl, il1);
			memcpy(ref, inl, il1);
			len = il1;
			break;
		default: /* inline send from a list of two buffers */
		{
			struct ibv_data_buf b[2] = {{inl, il1}, {inl + 64, il2}};
			ibv_wr_send(x);
			ibv_wr_set_inline_data_list(x, 2, b);
			memcpy(ref, inl, il1);
			memcpy(ref + il1, inl + 64, il2);
			len = il1 + il2;
			wop = IBV_WC_SEND;
		}
		}
		fill(inl, sizeof(inl)); /* inline data was taken already */
		int rc = ibv_wr_complete(x);
		CHECK(rc == 0, "qpx op %d: ibv_wr_complete: %s", op, strerror(rc));
		struct ibv_wc wc = wait_wc(cc, "qpx");
		expect_wc(&wc, id, IBV_WC_SUCCESS, wop, qc, "qpx");
		if (op == 2 || wop == IBV_WC_COMP_SWAP || wop == IBV_WC_FETCH_ADD)
			CHECK(wc.byte_len == len, "qpx op %d: byte_len %u, expected %u", op,
			      wc.byte_len, len);
		if (recv) {
			wc = wait_wc(cd, "qpx (responder)");
			expect_wc(&wc, id + 100000, IBV_WC_SUCCESS,
				  op == 1 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, qd,
				  "qpx (responder)");
			CHECK(wc.byte_len == len && wc.src_qp == qc,
			      "qpx op %d (responder): byte_len %u (%u), src_qp 0x%x", op, wc.byte_len,
			      len, wc.src_qp);
			bool wimm = op == 1 || op == 4;
			CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == wimm &&
				      (!wimm || ntohl(wc.imm_data) == imm),
			      "qpx op %d: immediate flag 0x%x, imm 0x%x (0x%x)", op, wc.wc_flags,
			      ntohl(wc.imm_data), imm);
		}
		switch (op) {
		case 0:
		case 8: CHECK(!memcmp(D.buf + dst, ref, len), "qpx op %d: data differs", op); break;
		case 1:
			CHECK(!memcmp(D.buf + 100000 + dst, ref, len), "qpx write imm: data differs");
			break;
		case 2:
			CHECK(!memcmp(C.buf + 200000, D.buf + dst, l1) &&
				      !memcmp(C.buf + 400000, D.buf + dst + l1, l2),
			      "qpx read: data differs");
			break;
		case 3:
		case 4:
		case 9: CHECK(!memcmp(D.buf, ref, len), "qpx send op %d: data differs", op); break;
		default: {
			uint64_t want = op == 7 ? before + arg : op == 5 ? swp : before;
			CHECK(*old == before && *word == want,
			      "qpx atomic op %d: old 0x%" PRIx64 " (0x%" PRIx64 "), word 0x%" PRIx64
			      " (0x%" PRIx64 ")",
			      op, *old, before, *word, want);
		}
		}
	}
	printf("verbs_rc: extended QP, every wr_* builder ok\n");

	/* several WRs in one batch: unsignaled ones complete with the last */
	for (int it = 0; it < 50; it++) {
		uint32_t len[6], off[6];
		ibv_wr_start(x);
		for (int k = 0; k < 6; k++) {
			len[k] = rlen(4096), off[k] = 800000 + (uint32_t)k * 4096;
			fill(C.buf + off[k], len[k]);
			x->wr_id = 30000 + (uint64_t)it * 6 + k;
			x->wr_flags = k == 5 ? IBV_SEND_SIGNALED : 0;
			ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)(D.buf + off[k]));
			ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)(C.buf + off[k]), len[k]);
		}
		int rc = ibv_wr_complete(x);
		CHECK(rc == 0, "qpx batch: ibv_wr_complete: %s", strerror(rc));
		struct ibv_wc wc = wait_wc(cc, "qpx batch");
		expect_wc(&wc, 30000 + (uint64_t)it * 6 + 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qc,
			  "qpx batch");
		for (int k = 0; k < 6; k++)
			CHECK(!memcmp(D.buf + off[k], C.buf + off[k], len[k]),
			      "qpx batch: data of WR %d differs", k);
	}
	no_wc(cc, "qpx batch");
	printf("verbs_rc: extended QP, batches ok\n");

	/* wr_abort: nothing posted; a batch with a bad WR fails whole
	 * (EINVAL) and posts none of it; more WRs than the SQ holds: ENOMEM */
	fill(C.buf, 4096);
	memcpy(ref, D.buf, 4096);
	ibv_wr_start(x);
	x->wr_id = 40000;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)D.buf);
	ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)C.buf, 4096);
	ibv_wr_abort(x);
	ibv_wr_start(x);
	x->wr_id = 40001;
	ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)D.buf);
	ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)C.buf, 4096);
	x->wr_id = 40002;
	ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)D.buf);
	struct ibv_sge many[5] = {{(uintptr_t)C.buf, 8, C.mr->lkey}};
	for (int k = 1; k < 5; k++)
		many[k] = many[0];
	ibv_wr_set_sge_list(x, 5, many); /* max_send_sge is 4 */
	int rc = ibv_wr_complete(x);
	CHECK(rc == EINVAL, "qpx: a WR with too many SGEs: wr_complete %d, expected EINVAL", rc);
	/* caught when the WQEs are built (an atomic's local buffer is 8 bytes) */
	ibv_wr_start(x);
	x->wr_id = 40003;
	ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)D.buf);
	ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)C.buf, 4096);
	x->wr_id = 40004;
	ibv_wr_atomic_fetch_add(x, D.mr->rkey, (uintptr_t)(D.buf + 8192), 1);
	ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)(C.buf + 8192), 4);
	rc = ibv_wr_complete(x);
	CHECK(rc == EINVAL, "qpx: an atomic with a 4-byte buffer: wr_complete %d, expected EINVAL",
	      rc);
	ibv_wr_start(x);
	for (int k = 0; k <= 4 * DEPTH; k++) {
		x->wr_id = 41000 + (uint64_t)k;
		ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)D.buf);
		ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)C.buf, 4096);
	}
	rc = ibv_wr_complete(x);
	CHECK(rc == ENOMEM, "qpx: more WRs than the SQ holds: wr_complete %d, expected ENOMEM",
	      rc);
	no_wc(cc, "qpx abort and failed batches");
	CHECK(!memcmp(D.buf, ref, 4096), "qpx: an aborted or failed batch wrote data");
	/* the QP still works */
	ibv_wr_start(x);
	x->wr_id = 42000;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, D.mr->rkey, (uintptr_t)D.buf);
	ibv_wr_set_sge(x, C.mr->lkey, (uintptr_t)C.buf, 4096);
	CHECK(ibv_wr_complete(x) == 0, "qpx after failed batches: wr_complete");
	struct ibv_wc wc = wait_wc(cc, "qpx after failed batches");
	expect_wc(&wc, 42000, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qc, "qpx after failed batches");
	CHECK(!memcmp(D.buf, C.buf, 4096), "qpx after failed batches: data differs");
	printf("verbs_rc: extended QP, abort and failed batches ok\n");

	CHECK(ibv_destroy_qp(C.qp) == 0 && ibv_destroy_qp(D.qp) == 0, "ibv_destroy_qp (qpx)");
	CHECK(ibv_dereg_mr(C.mr) == 0 && ibv_dereg_mr(D.mr) == 0, "ibv_dereg_mr (qpx)");
	CHECK(ibv_destroy_cq(cc) == 0 && ibv_destroy_cq(cd) == 0, "ibv_destroy_cq (qpx)");
	free(C.buf);
	free(D.buf);
	free(ref);
}

/* One completion of an extended CQ, read through its functions (verbs.h's
 * ibv_start_poll .. ibv_end_poll and ibv_wc_read_*), as a struct ibv_wc;
 * within 5 s. */
static struct ibv_wc cqx_read(struct ibv_cq_ex *cq)
{
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = cq->wr_id;
	wc.status = cq->status;
	wc.opcode = ibv_wc_read_opcode(cq);
	wc.vendor_err = ibv_wc_read_vendor_err(cq);
	wc.byte_len = ibv_wc_read_byte_len(cq);
	wc.wc_flags = ibv_wc_read_wc_flags(cq);
	wc.imm_data = ibv_wc_read_imm_data(cq);
	wc.qp_num = ibv_wc_read_qp_num(cq);
	wc.src_qp = ibv_wc_read_src_qp(cq);
	wc.slid = (uint16_t)ibv_wc_read_slid(cq);
	wc.sl = ibv_wc_read_sl(cq);
	wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
	return wc;
}

/* n completions of cq: one ibv_start_poll, then ibv_next_poll for each
 * further one (waiting for it while the poll is open, as a program may),
 * ibv_end_poll; within 5 s. */
static void cqx_poll(struct ibv_cq_ex *cq, struct ibv_wc *wc, int n, const char *what)
{
	struct ibv_poll_cq_attr pa = {.comp_mask = 0};
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc;
	while ((rc = ibv_start_poll(cq, &pa)) == ENOENT) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 5, "%s: no completion within 5 s", what);
		usleep(10);
	}
	CHECK(rc == 0, "%s: ibv_start_poll: %s", what, strerror(rc));
	wc[0] = cqx_read(cq);
	for (int k = 1; k < n; k++) {
		while ((rc = ibv_next_poll(cq)) == ENOENT) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			CHECK(t.tv_sec - t0.tv_sec < 5, "%s: completion %d of %d not within 5 s",
			      what, k + 1, n);
			usleep(10);
		}
		CHECK(rc == 0, "%s: ibv_next_poll: %s", what, strerror(rc));
		wc[k] = cqx_read(cq);
	}
	ibv_end_poll(cq);
}

/* Extended CQs (ibv_create_cq_ex): what they refuse, then two RC QPs whose
 * completions are read through the CQ's functions: batches of random work
 * requests on random data, every field of every completion checked, the
 * data byte for byte; ibv_poll_cq on the same CQ, a completion channel, and
 * a remote access error with its flush. */
static void test_cqx(void)
{
	const uint64_t std = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
			     IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			     IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
			     IBV_WC_EX_WITH_DLID_PATH_BITS;
	struct ibv_cq_init_attr_ex bad = {.cqe = 16,
					  .wc_flags = std | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &bad) && errno == EOPNOTSUPP,
	      "ibv_create_cq_ex with completion timestamps: not refused with EOPNOTSUPP "
	      "(errno %d)", errno);
	bad = (struct ibv_cq_init_attr_ex){.cqe = 0, .wc_flags = std};
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &bad) && errno == EINVAL,
	      "ibv_create_cq_ex of 0 entries: not refused with EINVAL (errno %d)", errno);
	bad = (struct ibv_cq_init_attr_ex){.cqe = 16, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					   .flags = 1u << 7};
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &bad) && errno == EOPNOTSUPP,
	      "ibv_create_cq_ex with an unknown flag: not refused with EOPNOTSUPP (errno %d)",
	      errno);

	/* the flags offered: ignore overrun (the CQ then needs no consumer index) */
	struct ibv_cq_init_attr_ex oi = {.cqe = 16, .wc_flags = std,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					 .flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN};
	struct ibv_cq_ex *xo = ibv_create_cq_ex(ctx, &oi);
	CHECK(xo && ibv_destroy_cq(ibv_cq_ex_to_cq(xo)) == 0,
	      "ibv_create_cq_ex with ignore overrun: %s", strerror(errno));
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel: %s", strerror(errno));
	int tag;
	struct ibv_cq_init_attr_ex ea = {.cqe = 2 * DEPTH, .wc_flags = std};
	struct ibv_cq_init_attr_ex eb = {.cqe = 2 * DEPTH, .cq_context = &tag, .channel = ch,
					 .wc_flags = std,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					 .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED};
	struct ibv_cq_ex *xa = ibv_create_cq_ex(ctx, &ea), *xb = ibv_create_cq_ex(ctx, &eb);
	CHECK(xa && xb, "ibv_create_cq_ex: %s", strerror(errno));
	struct ibv_cq *ca = ibv_cq_ex_to_cq(xa), *cb = ibv_cq_ex_to_cq(xb);
	CHECK(ca->context == ctx && cb->cq_context == &tag && cb->channel == ch &&
		      ca->cqe >= 2 * DEPTH,
	      "an extended CQ's fields: context %p, cq_context %p, channel %p, cqe %d",
	      (void *)ca->context, cb->cq_context, (void *)cb->channel, ca->cqe);
	struct ibv_poll_cq_attr pa = {.comp_mask = 0};
	CHECK(ibv_start_poll(xa, &pa) == ENOENT, "ibv_start_poll of an empty CQ: not ENOENT");
	pa.comp_mask = 1;
	CHECK(ibv_start_poll(xa, &pa) == EINVAL, "ibv_start_poll with a comp_mask: not EINVAL");

	struct side A, B;
	make_side(&A, ca, ca);
	make_side(&B, cb, cb);
	uint32_t qa = A.qp->qp_num, qb = B.qp->qp_num;
	connect_to(&A, &B);
	connect_to(&B, &A);
	to_rts(&A);
	to_rts(&B);

	/* batches of up to 8 work requests of A, every one signaled; B's
	 * receives complete on B's CQ */
	enum { NB = 8, SLOT = 65536 };
	uint8_t *ref = malloc((size_t)NB * SLOT);
	CHECK(ref, "no memory");
	for (int it = 0; it < 40; it++) {
		int n = 1 + (int)(rnd() % NB), nr = 0;
		struct ibv_send_wr wr[NB];
		struct ibv_sge g[NB];
		struct {
			enum ibv_wc_opcode op;
			uint32_t len, imm;
			bool recv, withimm;
			uint64_t *word, before, want;
		} e[NB];
		uint64_t rid[NB];
		memset(wr, 0, sizeof(wr));
		memset(e, 0, sizeof(e));
		for (int k = 0; k < n; k++) {
			uint32_t len = rlen(SLOT - 64), off = (uint32_t)k * SLOT;
			uint8_t *src = A.buf + off, *dst = B.buf + off;
			fill(src, len);
			fill(dst, len);
			memcpy(ref + off, src, len);
			g[k] = (struct ibv_sge){(uintptr_t)src, len, A.mr->lkey};
			wr[k] = (struct ibv_send_wr){.wr_id = rnd(), .next = k + 1 < n ? &wr[k + 1] : NULL,
						     .sg_list = &g[k], .num_sge = 1,
						     .send_flags = IBV_SEND_SIGNALED};
			wr[k].wr.rdma.remote_addr = (uintptr_t)dst;
			wr[k].wr.rdma.rkey = B.mr->rkey;
			e[k].len = len;
			e[k].imm = (uint32_t)rnd();
			switch (rnd() % 6) {
			case 0:
				wr[k].opcode = IBV_WR_RDMA_WRITE;
				e[k].op = IBV_WC_RDMA_WRITE;
				break;
			case 1:
				wr[k].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				wr[k].imm_data = htonl(e[k].imm);
				e[k].op = IBV_WC_RDMA_WRITE;
				e[k].recv = e[k].withimm = true;
				break;
			case 2: /* read back what B has at dst into src */
				wr[k].opcode = IBV_WR_RDMA_READ;
				memcpy(ref + off, dst, len);
				e[k].op = IBV_WC_RDMA_READ;
				break;
			case 3:
			case 4:
				wr[k].opcode = (rnd() & 1) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
				wr[k].imm_data = htonl(e[k].imm);
				e[k].op = IBV_WC_SEND;
				e[k].recv = true;
				e[k].withimm = wr[k].opcode == IBV_WR_SEND_WITH_IMM;
				break;
			default: /* fetch-and-add on a word of B's slot */
				e[k].word = (uint64_t *)dst;
				e[k].before = *e[k].word;
				e[k].want = e[k].before + (uint64_t)e[k].imm;
				wr[k].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
				wr[k].wr.atomic.remote_addr = (uintptr_t)dst;
				wr[k].wr.atomic.rkey = B.mr->rkey;
				wr[k].wr.atomic.compare_add = e[k].imm;
				g[k].length = 8;
				e[k].len = 8;
				e[k].op = IBV_WC_FETCH_ADD;
			}
			if (e[k].recv) {
				/* a receive into B's slot, for the send's data or the
				 * write's immediate */
				rid[nr] = rnd();
				post_recv(&B, rid[nr], off, SLOT);
				nr++;
			}
		}
		post_send(&A, wr, "cqx");
		struct ibv_wc w[NB], r[NB];
		cqx_poll(xa, w, n, "cqx (requester)");
		if (nr)
			cqx_poll(xb, r, nr, "cqx (responder)");
		for (int k = 0, j = 0; k < n; k++) {
			uint32_t off = (uint32_t)k * SLOT;
			expect_wc(&w[k], wr[k].wr_id, IBV_WC_SUCCESS, e[k].op, qa, "cqx");
			CHECK(w[k].vendor_err == 0 && (w[k].wc_flags & IBV_WC_WITH_IMM) == 0,
			      "cqx: requester vendor_err %u, wc_flags 0x%x", w[k].vendor_err,
			      w[k].wc_flags);
			if (e[k].op == IBV_WC_RDMA_READ || e[k].op == IBV_WC_FETCH_ADD)
				CHECK(w[k].byte_len == e[k].len, "cqx: byte_len %u, expected %u",
				      w[k].byte_len, e[k].len);
			if (e[k].op == IBV_WC_FETCH_ADD) {
				uint64_t got;
				memcpy(&got, A.buf + off, 8);
				CHECK(got == e[k].before && *e[k].word == e[k].want,
				      "cqx: fetch-and-add: old 0x%" PRIx64 " (0x%" PRIx64
				      "), word 0x%" PRIx64 " (0x%" PRIx64 ")",
				      got, e[k].before, *e[k].word, e[k].want);
			} else if (e[k].op == IBV_WC_RDMA_READ) {
				CHECK(!memcmp(A.buf + off, ref + off, e[k].len), "cqx: read: data differs");
			} else {
				CHECK(!memcmp(B.buf + off, ref + off, e[k].len),
				      "cqx: opcode %d: data differs", e[k].op);
			}
			if (!e[k].recv)
				continue;
			struct ibv_wc *rw = &r[j];
			bool wimm = e[k].op == IBV_WC_RDMA_WRITE;
			expect_wc(rw, rid[j], IBV_WC_SUCCESS,
				  wimm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, qb, "cqx (responder)");
			CHECK(rw->byte_len == e[k].len && rw->src_qp == qa &&
				      !!(rw->wc_flags & IBV_WC_WITH_IMM) == e[k].withimm &&
				      (!e[k].withimm || ntohl(rw->imm_data) == e[k].imm) &&
				      rw->vendor_err == 0 && rw->slid == 0 && rw->sl == 0 &&
				      rw->dlid_path_bits == 0,
			      "cqx (responder): byte_len %u (%u), src_qp 0x%x (0x%x), wc_flags 0x%x, "
			      "imm 0x%x (0x%x)",
			      rw->byte_len, e[k].len, rw->src_qp, qa, rw->wc_flags, ntohl(rw->imm_data),
			      e[k].imm);
			j++;
		}
	}
	no_wc(ca, "cqx");
	no_wc(cb, "cqx");
	printf("verbs_rc: extended CQs: batches ok\n");

	/* ibv_poll_cq reads an extended CQ too */
	struct ibv_sge g1 = {(uintptr_t)A.buf, 64, A.mr->lkey};
	struct ibv_send_wr w1 = {.wr_id = 31000, .sg_list = &g1, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	w1.wr.rdma.remote_addr = (uintptr_t)B.buf;
	w1.wr.rdma.rkey = B.mr->rkey;
	post_send(&A, &w1, "cqx ibv_poll_cq");
	struct ibv_wc wc = wait_wc(ca, "cqx ibv_poll_cq");
	expect_wc(&wc, 31000, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qa, "cqx ibv_poll_cq");

	/* a completion channel of an extended CQ */
	CHECK(ibv_req_notify_cq(cb, 0) == 0, "ibv_req_notify_cq of an extended CQ");
	post_recv(&B, 31001, 0, 64);
	w1.wr_id = 31002;
	w1.opcode = IBV_WR_SEND;
	post_send(&A, &w1, "cqx channel");
	struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&pf, 1, 5000) == 1, "cqx: channel fd not readable within 5 s");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cb && ev_ctx == &tag,
	      "cqx: the event names another CQ");
	ibv_ack_cq_events(ev_cq, 1);
	struct ibv_wc two[2];
	cqx_poll(xb, two, 1, "cqx channel (responder)");
	expect_wc(&two[0], 31001, IBV_WC_SUCCESS, IBV_WC_RECV, qb, "cqx channel");
	cqx_poll(xa, two, 1, "cqx channel (requester)");
	expect_wc(&two[0], 31002, IBV_WC_SUCCESS, IBV_WC_SEND, qa, "cqx channel");

	/* a bad rkey: the error and the flush after it, read from the CQ */
	struct ibv_send_wr e2 = w1;
	e2.wr_id = 31004;
	e2.opcode = IBV_WR_RDMA_WRITE;
	struct ibv_send_wr e1 = e2;
	e1.wr_id = 31003;
	e1.next = &e2;
	e1.wr.rdma.rkey = B.mr->rkey ^ 0x5a5a00;
	post_send(&A, &e1, "cqx bad rkey");
	cqx_poll(xa, two, 2, "cqx bad rkey");
	expect_wc(&two[0], 31003, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, qa, "cqx bad rkey");
	expect_wc(&two[1], 31004, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qa, "cqx flush");
	no_wc(ca, "cqx after the error");
	printf("verbs_rc: extended CQs: ibv_poll_cq, channel, errors ok\n");

	CHECK(ibv_destroy_qp(A.qp) == 0 && ibv_destroy_qp(B.qp) == 0, "cqx: ibv_destroy_qp");
	CHECK(ibv_dereg_mr(A.mr) == 0 && ibv_dereg_mr(B.mr) == 0, "cqx: ibv_dereg_mr");
	CHECK(ibv_destroy_cq(ca) == 0 && ibv_destroy_cq(cb) == 0, "cqx: ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "cqx: ibv_destroy_comp_channel");
	free(A.buf);
	free(B.buf);
	free(ref);
}

int main(void)
{
	vt_seed("VERBS_RC_SEED");
	ctx = vt_open_kinet("kinet", NULL);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port");
	mtu = pa.active_mtu;
	gid_index = 1; /* RoCE v2 of the default GID */
	CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0, "ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");

	/* what rdma-core's own tests check of the attributes (pyverbs'
	 * test_device, test_cq): the extended port count is the port count,
	 * and a CQ of too many entries or on a vector the device lacks is
	 * EINVAL */
	struct ibv_device_attr_ex dax;
	CHECK(ibv_query_device_ex(ctx, NULL, &dax) == 0, "ibv_query_device_ex");
	CHECK(dax.phys_port_cnt_ex == dax.orig_attr.phys_port_cnt && dax.phys_port_cnt_ex == 1,
	      "phys_port_cnt_ex %u, phys_port_cnt %u", dax.phys_port_cnt_ex,
	      dax.orig_attr.phys_port_cnt);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, dax.orig_attr.max_cqe + 1, NULL, NULL, 0) && errno == EINVAL,
	      "ibv_create_cq of max_cqe + 1 entries: errno %d", errno);
	int bad_vec[] = {ctx->num_comp_vectors, ctx->num_comp_vectors + 1, -1};
	for (size_t i = 0; i < sizeof(bad_vec) / sizeof(bad_vec[0]); i++) {
		errno = 0;
		CHECK(!ibv_create_cq(ctx, 16, NULL, NULL, bad_vec[i]) && errno == EINVAL,
		      "ibv_create_cq on vector %d of %d: errno %d", bad_vec[i],
		      ctx->num_comp_vectors, errno);
		struct ibv_cq_init_attr_ex cxa = {.cqe = 16, .comp_vector = (uint32_t)bad_vec[i]};
		errno = 0;
		CHECK(!ibv_create_cq_ex(ctx, &cxa) && errno == EINVAL,
		      "ibv_create_cq_ex on vector %d: errno %d", bad_vec[i], errno);
	}
	struct ibv_cq *cq_last = ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors - 1);
	CHECK(cq_last, "ibv_create_cq on the last vector: %s", strerror(errno));
	CHECK(ibv_destroy_cq(cq_last) == 0, "ibv_destroy_cq");
	/* ibv_rereg_mr is refused the way rdma-core fails it: a negative
	 * ibv_rereg_mr_err_code and errno (pyverbs' test_mr skips on
	 * EOPNOTSUPP); the MR is left as it was */
	static uint8_t rr_buf[4096];
	struct ibv_mr *rr = ibv_reg_mr(pd, rr_buf, sizeof(rr_buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(rr, "ibv_reg_mr: %s", strerror(errno));
	uint32_t rr_lkey = rr->lkey;
	errno = 0;
	int rrc = ibv_rereg_mr(rr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(rrc == IBV_REREG_MR_ERR_CMD && errno == EOPNOTSUPP,
	      "ibv_rereg_mr: %d, errno %d (want %d, EOPNOTSUPP)", rrc, errno,
	      IBV_REREG_MR_ERR_CMD);
	errno = 0;
	rrc = ibv_rereg_mr(rr, IBV_REREG_MR_FLAGS_SUPPORTED << 1, NULL, NULL, 0, 0);
	CHECK(rrc == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "ibv_rereg_mr with an unknown flag: %d, errno %d", rrc, errno);
	errno = 0;
	rrc = ibv_rereg_mr(rr, 0, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rrc == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "ibv_rereg_mr of an access without CHANGE_ACCESS: %d, errno %d", rrc, errno);
	CHECK(rr->lkey == rr_lkey && rr->addr == rr_buf, "ibv_rereg_mr changed the MR");
	CHECK(ibv_dereg_mr(rr) == 0, "ibv_dereg_mr");
	/* the context's cmd_fd is an open descriptor that can be duplicated
	 * (pyverbs' test_shared_pd does, to import the context), and the
	 * import is refused with EOPNOTSUPP */
	CHECK(ctx->cmd_fd >= 0 && fcntl(ctx->cmd_fd, F_GETFD) >= 0, "cmd_fd %d is not open",
	      ctx->cmd_fd);
	int cmd_dup = dup(ctx->cmd_fd);
	CHECK(cmd_dup >= 0, "dup(cmd_fd): %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_import_device(cmd_dup) && errno == EOPNOTSUPP,
	      "ibv_import_device: errno %d, not EOPNOTSUPP", errno);
	close(cmd_dup);

	/* A: one CQ for sends and receives; B: a send CQ, and a receive CQ
	 * with a completion channel */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel: %s", strerror(errno));
	int cq_ctx_tag;
	struct ibv_cq *cqa = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0);
	struct ibv_cq *cqbs = ibv_create_cq(ctx, DEPTH, NULL, NULL, 0);
	struct ibv_cq *cqbr = ibv_create_cq(ctx, DEPTH, &cq_ctx_tag, ch, 0);
	CHECK(cqa && cqbs && cqbr, "ibv_create_cq: %s", strerror(errno));
	struct side A, B;
	make_side(&A, cqa, cqa);
	make_side(&B, cqbs, cqbr);
	uint32_t qa = A.qp->qp_num, qb = B.qp->qp_num;
	connect_to(&A, &B);
	connect_to(&B, &A);
	to_rts(&A);
	to_rts(&B);
	struct ibv_qp_attr qa_attr;
	struct ibv_qp_init_attr qa_init;
	CHECK(ibv_query_qp(A.qp, &qa_attr, IBV_QP_STATE, &qa_init) == 0 &&
		      qa_attr.qp_state == IBV_QPS_RTS && qa_attr.dest_qp_num == qb &&
		      qa_attr.sq_psn == A.psn && qa_attr.rq_psn == B.psn,
	      "ibv_query_qp after RTS: state %d, dest 0x%x", qa_attr.qp_state,
	      qa_attr.dest_qp_num);

	uint8_t *ref = malloc(BUF);
	CHECK(ref, "no memory");

	/* RDMA write, 3 local segments, into B */
	for (int it = 0; it < 20; it++) {
		uint32_t l1 = rlen(8192), l2 = rlen(70000), l3 = rlen(3000);
		uint32_t src = (uint32_t)(rnd() % 4096), dst = (uint32_t)(rnd() % 4096);
		fill(A.buf + src, l1 + l2 + l3 + 300);
		struct ibv_sge g[3] = {
			{(uintptr_t)(A.buf + src), l1, A.mr->lkey},
			{(uintptr_t)(A.buf + src + l1 + 100), l2, A.mr->lkey},
			{(uintptr_t)(A.buf + src + l1 + l2 + 200), l3, A.mr->lkey},
		};
		memcpy(ref, (void *)(uintptr_t)g[0].addr, l1);
		memcpy(ref + l1, (void *)(uintptr_t)g[1].addr, l2);
		memcpy(ref + l1 + l2, (void *)(uintptr_t)g[2].addr, l3);
		struct ibv_send_wr wr = {.wr_id = 1000 + it, .sg_list = g, .num_sge = 3,
					 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
		wr.wr.rdma.remote_addr = (uintptr_t)(B.buf + dst);
		wr.wr.rdma.rkey = B.mr->rkey;
		post_send(&A, &wr, "write");
		struct ibv_wc wc = wait_wc(cqa, "write");
		expect_wc(&wc, 1000 + it, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qa, "write");
		CHECK(!memcmp(B.buf + dst, ref, l1 + l2 + l3), "write: data differs (%u bytes)",
		      l1 + l2 + l3);
	}
	printf("verbs_rc: RDMA write ok\n");

	/* write with immediate: consumes a receive of B, which says the length,
	 * the immediate and the source QP */
	for (int it = 0; it < 10; it++) {
		uint32_t len = rlen(100000), dst = (uint32_t)(rnd() % 65536);
		fill(A.buf, len);
		post_recv(&B, 2000 + it, 0, 16);
		struct ibv_sge g = {(uintptr_t)A.buf, len, A.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 2100 + it, .sg_list = &g, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					 .send_flags = IBV_SEND_SIGNALED};
		uint32_t imm = (uint32_t)rnd();
		wr.imm_data = htonl(imm);
		wr.wr.rdma.remote_addr = (uintptr_t)(B.buf + 65536 + dst);
		wr.wr.rdma.rkey = B.mr->rkey;
		post_send(&A, &wr, "write imm");
		struct ibv_wc wc = wait_wc(cqa, "write imm (requester)");
		expect_wc(&wc, 2100 + it, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qa, "write imm");
		wc = wait_wc(cqbr, "write imm (responder)");
		expect_wc(&wc, 2000 + it, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, qb,
			  "write imm (responder)");
		CHECK(wc.byte_len == len && (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == imm &&
			      wc.src_qp == qa,
		      "write imm: byte_len %u (%u), flags 0x%x, imm 0x%x (0x%x), src_qp 0x%x",
		      wc.byte_len, len, wc.wc_flags, ntohl(wc.imm_data), imm, wc.src_qp);
		CHECK(!memcmp(B.buf + 65536 + dst, A.buf, len), "write imm: data differs");
	}
	printf("verbs_rc: RDMA write with immediate ok\n");

	/* RDMA read from B into A, two local segments */
	for (int it = 0; it < 10; it++) {
		uint32_t l1 = rlen(50000), l2 = rlen(50000), src = (uint32_t)(rnd() % 4096);
		fill(B.buf + src, l1 + l2);
		struct ibv_sge g[2] = {{(uintptr_t)(A.buf + 200000), l1, A.mr->lkey},
				       {(uintptr_t)(A.buf + 400000), l2, A.mr->lkey}};
		struct ibv_send_wr wr = {.wr_id = 3000 + it, .sg_list = g, .num_sge = 2,
					 .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED};
		wr.wr.rdma.remote_addr = (uintptr_t)(B.buf + src);
		wr.wr.rdma.rkey = B.mr->rkey;
		post_send(&A, &wr, "read");
		struct ibv_wc wc = wait_wc(cqa, "read");
		expect_wc(&wc, 3000 + it, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, qa, "read");
		CHECK(wc.byte_len == l1 + l2, "read: byte_len %u, expected %u", wc.byte_len, l1 + l2);
		CHECK(!memcmp(A.buf + 200000, B.buf + src, l1) &&
			      !memcmp(A.buf + 400000, B.buf + src + l1, l2),
		      "read: data differs");
	}
	printf("verbs_rc: RDMA read ok\n");

	/* send and send with immediate, A to B (and B to A, whose receive
	 * completions share A's CQ with its sends) */
	for (int it = 0; it < 20; it++) {
		bool imm = it & 1;
		struct side *s = it % 4 < 2 ? &A : &B, *r = s == &A ? &B : &A;
		uint32_t l1 = rlen(20000), l2 = rlen(20000);
		fill(s->buf + 500000, l1 + l2);
		post_recv(r, 4000 + it, 600000, l1 + l2 + (uint32_t)(rnd() % 100));
		struct ibv_sge g[2] = {{(uintptr_t)(s->buf + 500000), l1, s->mr->lkey},
				       {(uintptr_t)(s->buf + 500000 + l1), l2, s->mr->lkey}};
		uint32_t iv = (uint32_t)rnd();
		struct ibv_send_wr wr = {.wr_id = 4100 + it, .sg_list = g, .num_sge = 2,
					 .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(iv)};
		post_send(s, &wr, "send");
		struct ibv_wc wc = wait_wc(s->scq, "send (requester)");
		expect_wc(&wc, 4100 + it, IBV_WC_SUCCESS, IBV_WC_SEND, s->qp->qp_num, "send");
		wc = wait_wc(r->rcq, "send (responder)");
		expect_wc(&wc, 4000 + it, IBV_WC_SUCCESS, IBV_WC_RECV, r->qp->qp_num,
			  "send (responder)");
		CHECK(wc.byte_len == l1 + l2 && wc.src_qp == s->qp->qp_num,
		      "send: byte_len %u (%u), src_qp 0x%x", wc.byte_len, l1 + l2, wc.src_qp);
		CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == imm && (!imm || ntohl(wc.imm_data) == iv),
		      "send: immediate flag 0x%x, imm 0x%x (0x%x)", wc.wc_flags, ntohl(wc.imm_data),
		      iv);
		CHECK(!memcmp(r->buf + 600000, s->buf + 500000, l1 + l2), "send: data differs");
	}
	printf("verbs_rc: send and send with immediate ok\n");

	/* atomics on a word of B: the old value comes back to A */
	uint64_t *word = (uint64_t *)(B.buf + 8 * (rnd() % 1000)), *old = (uint64_t *)(A.buf + 64);
	for (int it = 0; it < 20; it++) {
		uint64_t before = *word, add = rnd();
		bool fa = it % 3 == 0;
		bool hit = it % 3 == 1;
		uint64_t cmp = hit ? before : before ^ 1, swp = rnd();
		struct ibv_sge g = {(uintptr_t)old, 8, A.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 5000 + it, .sg_list = &g, .num_sge = 1,
					 .opcode = fa ? IBV_WR_ATOMIC_FETCH_AND_ADD
						      : IBV_WR_ATOMIC_CMP_AND_SWP,
					 .send_flags = IBV_SEND_SIGNALED};
		wr.wr.atomic.remote_addr = (uintptr_t)word;
		wr.wr.atomic.rkey = B.mr->rkey;
		wr.wr.atomic.compare_add = fa ? add : cmp;
		wr.wr.atomic.swap = swp;
		*old = rnd();
		post_send(&A, &wr, "atomic");
		struct ibv_wc wc = wait_wc(cqa, "atomic");
		expect_wc(&wc, 5000 + it, IBV_WC_SUCCESS, fa ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP,
			  qa, "atomic");
		CHECK(wc.byte_len == 8, "atomic: byte_len %u", wc.byte_len);
		CHECK(*old == before, "atomic: old value 0x%" PRIx64 ", expected 0x%" PRIx64, *old,
		      before);
		uint64_t want = fa ? before + add : hit ? swp : before;
		CHECK(*word == want, "atomic %s: word 0x%" PRIx64 ", expected 0x%" PRIx64,
		      fa ? "fetch-add" : hit ? "compare-swap (equal)" : "compare-swap (differs)",
		      *word, want);
	}
	printf("verbs_rc: atomics ok\n");

	/* inline write and send: the data is taken at post time (the source
	 * changes right after) */
	for (int it = 0; it < 20; it++) {
		bool send = it & 1;
		uint32_t l1 = rlen(64), l2 = rlen(64);
		uint8_t src[128];
		fill(src, sizeof(src));
		memcpy(ref, src, l1 + l2);
		struct ibv_sge g[2] = {{(uintptr_t)src, l1, 0}, {(uintptr_t)(src + 64), l2, 0}};
		memcpy(ref + l1, src + 64, l2);
		if (send)
			post_recv(&B, 6000 + it, 700000, 128);
		struct ibv_send_wr wr = {.wr_id = 6100 + it, .sg_list = g, .num_sge = 2,
					 .opcode = send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
		wr.wr.rdma.remote_addr = (uintptr_t)(B.buf + 700000);
		wr.wr.rdma.rkey = B.mr->rkey;
		post_send(&A, &wr, "inline");
		fill(src, sizeof(src));
		struct ibv_wc wc = wait_wc(cqa, "inline");
		expect_wc(&wc, 6100 + it, IBV_WC_SUCCESS, send ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, qa,
			  "inline");
		if (send) {
			wc = wait_wc(cqbr, "inline send (responder)");
			expect_wc(&wc, 6000 + it, IBV_WC_SUCCESS, IBV_WC_RECV, qb, "inline send");
			CHECK(wc.byte_len == l1 + l2, "inline send: byte_len %u", wc.byte_len);
		}
		CHECK(!memcmp(B.buf + 700000, ref, l1 + l2), "inline: data differs");
	}
	struct ibv_sge big = {(uintptr_t)A.buf, 129, 0};
	struct ibv_send_wr bw = {.wr_id = 1, .sg_list = &big, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_INLINE};
	bw.wr.rdma.remote_addr = (uintptr_t)B.buf;
	bw.wr.rdma.rkey = B.mr->rkey;
	struct ibv_send_wr *bad = NULL;
	CHECK(ibv_post_send(A.qp, &bw, &bad) == EINVAL && bad == &bw,
	      "inline data beyond max_inline_data was not refused with EINVAL");
	printf("verbs_rc: inline data ok\n");

	/* unsignaled writes complete with the next signaled one; many laps of
	 * the send queue */
	for (int it = 0; it < 300; it++) {
		struct ibv_sge g[4];
		struct ibv_send_wr wr[4];
		for (int k = 0; k < 4; k++) {
			uint32_t len = rlen(2048), off = (uint32_t)(it % 8) * 8192 + (uint32_t)k * 2048;
			fill(A.buf + 800000 + off, len);
			g[k] = (struct ibv_sge){(uintptr_t)(A.buf + 800000 + off), len, A.mr->lkey};
			wr[k] = (struct ibv_send_wr){.wr_id = 7000 + (uint64_t)it * 4 + k,
						     .next = k < 3 ? &wr[k + 1] : NULL,
						     .sg_list = &g[k], .num_sge = 1,
						     .opcode = IBV_WR_RDMA_WRITE,
						     .send_flags = k == 3 ? IBV_SEND_SIGNALED : 0};
			wr[k].wr.rdma.remote_addr = (uintptr_t)(B.buf + 800000 + off);
			wr[k].wr.rdma.rkey = B.mr->rkey;
		}
		post_send(&A, wr, "unsignaled");
		struct ibv_wc wc = wait_wc(cqa, "unsignaled");
		expect_wc(&wc, 7000 + (uint64_t)it * 4 + 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qa,
			  "unsignaled (the signaled WR's completion only)");
		for (int k = 0; k < 4; k++)
			CHECK(!memcmp(B.buf + (g[k].addr - (uintptr_t)A.buf), (void *)(uintptr_t)g[k].addr,
				      g[k].length),
			      "unsignaled: data of WR %d differs", k);
	}
	no_wc(cqa, "unsignaled");
	printf("verbs_rc: unsignaled work requests ok\n");

	/* a full send queue: ENOMEM for the WR past the queue, bad_wr at it */
	struct ibv_qp_init_attr cur;
	struct ibv_qp_attr ca;
	ibv_query_qp(A.qp, &ca, IBV_QP_CAP, &cur);
	uint32_t depth = cur.cap.max_send_wr;
	struct ibv_send_wr *wl = calloc(depth + 1, sizeof(*wl));
	struct ibv_sge one = {(uintptr_t)A.buf, 8, A.mr->lkey};
	for (uint32_t k = 0; k <= depth; k++) {
		wl[k] = (struct ibv_send_wr){.wr_id = 8000 + k, .next = k < depth ? &wl[k + 1] : NULL,
					     .sg_list = &one, .num_sge = 1,
					     .opcode = IBV_WR_RDMA_WRITE,
					     .send_flags = k == depth - 1 ? IBV_SEND_SIGNALED : 0};
		wl[k].wr.rdma.remote_addr = (uintptr_t)B.buf;
		wl[k].wr.rdma.rkey = B.mr->rkey;
	}
	bad = NULL;
	int rc = ibv_post_send(A.qp, wl, &bad);
	CHECK(rc == ENOMEM && bad == &wl[depth], "a full SQ: rc %d, bad_wr %td (expected ENOMEM at %u)",
	      rc, bad ? bad - wl : -1, depth);
	struct ibv_wc wc = wait_wc(cqa, "full SQ");
	expect_wc(&wc, 8000 + depth - 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qa, "full SQ");
	free(wl);
	printf("verbs_rc: a full send queue ok (%u WRs)\n", depth);

	/* the completion channel: armed, the fd becomes readable when a
	 * completion arrives, and the event names the CQ */
	struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
	CHECK(poll(&pf, 1, 0) == 0, "channel fd readable before any event");
	int fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN,
	      "ibv_get_cq_event without an event on a non-blocking channel: errno %d", errno);
	fcntl(ch->fd, F_SETFL, fl);
	for (int it = 0; it < 5; it++) {
		CHECK(ibv_req_notify_cq(cqbr, 0) == 0, "ibv_req_notify_cq");
		usleep(20000);
		CHECK(poll(&pf, 1, 0) == 0, "channel fd readable with no completion");
		uint32_t len = rlen(4096);
		fill(A.buf, len);
		post_recv(&B, 9000 + it, 0, 4096);
		struct ibv_sge g = {(uintptr_t)A.buf, len, A.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 9100 + it, .sg_list = &g, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
		post_send(&A, &wr, "send (channel)");
		CHECK(poll(&pf, 1, 5000) == 1, "channel fd not readable within 5 s of a completion");
		CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event: %s",
		      strerror(errno));
		CHECK(ev_cq == cqbr && ev_ctx == &cq_ctx_tag, "the event names another CQ");
		ibv_ack_cq_events(ev_cq, 1);
		CHECK(poll(&pf, 1, 0) == 0, "channel fd still readable after the event was read");
		wc = wait_wc(cqbr, "channel");
		expect_wc(&wc, 9000 + it, IBV_WC_SUCCESS, IBV_WC_RECV, qb, "channel");
		CHECK(wc.byte_len == len && !memcmp(B.buf, A.buf, len), "channel: data");
		wc = wait_wc(cqa, "channel (requester)");
		expect_wc(&wc, 9100 + it, IBV_WC_SUCCESS, IBV_WC_SEND, qa, "channel (requester)");
	}
	printf("verbs_rc: completion channel ok\n");

	/* a bad rkey: remote access error, then every WR left and the posted
	 * receives flush, and the QP is in ERR */
	post_recv(&A, 10000, 0, 64);
	struct ibv_sge g2 = {(uintptr_t)A.buf, 64, A.mr->lkey};
	struct ibv_send_wr e2 = {.wr_id = 10002, .sg_list = &g2, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
	e2.wr.rdma.remote_addr = (uintptr_t)B.buf;
	e2.wr.rdma.rkey = B.mr->rkey;
	struct ibv_send_wr e1 = e2;
	e1.wr_id = 10001;
	e1.next = &e2;
	e1.wr.rdma.rkey = B.mr->rkey ^ 0x5a5a00;
	post_send(&A, &e1, "bad rkey");
	struct ibv_wc w3[3];
	for (int k = 0; k < 3; k++)
		w3[k] = wait_wc(cqa, "bad rkey");
	/* the receive's flush may come before or between the send completions */
	int si = 0;
	bool rflushed = false;
	for (int k = 0; k < 3; k++) {
		if (w3[k].wr_id == 10000) {
			CHECK(w3[k].status == IBV_WC_WR_FLUSH_ERR && w3[k].qp_num == qa,
			      "the receive: status %s", ibv_wc_status_str(w3[k].status));
			rflushed = true;
			continue;
		}
		if (si == 0)
			expect_wc(&w3[k], 10001, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, qa, "bad rkey");
		else
			expect_wc(&w3[k], 10002, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qa,
				  "after the error");
		si++;
	}
	CHECK(rflushed && si == 2, "bad rkey: completions missing");
	CHECK(ibv_query_qp(A.qp, &qa_attr, IBV_QP_STATE, &qa_init) == 0 &&
		      qa_attr.qp_state == IBV_QPS_ERR,
	      "after a remote access error the QP is in state %d, not ERR", qa_attr.qp_state);
	/* posting to a QP in ERR completes with a flush */
	e2.wr_id = 10003;
	e2.next = NULL;
	post_send(&A, &e2, "post in ERR");
	wc = wait_wc(cqa, "post in ERR");
	expect_wc(&wc, 10003, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qa, "post in ERR");
	printf("verbs_rc: remote access error and flushes ok\n");

	/* a QP of ibv_create_qp has no extended form */
	errno = 0;
	CHECK(!ibv_qp_to_qp_ex(A.qp) && errno == EOPNOTSUPP,
	      "ibv_qp_to_qp_ex of a QP of ibv_create_qp: not NULL with EOPNOTSUPP");
	test_qpx();
	test_cqx();
	test_recv_sge();
	test_srq();
	test_qp_access();
	test_parent_domain();

	/* teardown, in rdma-core's order; a CQ with QPs refuses to go */
	CHECK(ibv_destroy_cq(cqa) != 0, "a CQ in use was destroyed");
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "a channel in use was destroyed");
	CHECK(ibv_destroy_qp(A.qp) == 0 && ibv_destroy_qp(B.qp) == 0, "ibv_destroy_qp");
	CHECK(ibv_dereg_mr(A.mr) == 0 && ibv_dereg_mr(B.mr) == 0, "ibv_dereg_mr");
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqbs) == 0 && ibv_destroy_cq(cqbr) == 0,
	      "ibv_destroy_cq");
	CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	free(A.buf);
	free(B.buf);
	free(ref);
	printf("verbs_rc: all passed\n");
	return 0;
}
