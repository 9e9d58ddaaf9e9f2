/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receiver not ready at one QP must not starve the other QPs of the target
 * context. A target process T has three QPs in one context: two to process
 * A, one to process C. A posts more sends on its first QP than the target
 * has receive buffers (some of them in several chunks, more than a QP may
 * have in flight at the target: those wait at the requester), none of which
 * finds a receive WQE. Meanwhile A's second QP (the same peer) and C's QP
 * (an independent process) write, read and send to T, checked byte for
 * byte; then T posts the receives and every waiting send lands, in order.
 * And the same on the requester's side: a peer that stops under a large
 * eager write does not keep the send resources the requester's other QPs
 * need.
 */
#define _GNU_SOURCE /* setns */
#include <sys/mman.h>
#include <criterion/criterion.h>
#include "test_wire_common.h"

static void need_wire(void)
{
	int w = tw_have_wire();
	if (w == 77)
		cr_skip_test("this build has no libfabric wire (or its provider is missing)");
	cr_assert_eq(w, 0, "a context with a wire endpoint could not be opened");
}

#define NS 48            /* waiting sends: more than the target's receive buffers */
#define T_LEN (16u << 20)
#define A_LEN (16u << 20)
#define C_LEN (4u << 20)
#define SEED_T 10u
#define SEED_A 11u
#define SEED_C 12u

static uint32_t send_len(int i)
{
	return i % 6 == 5 ? (1u << 20) : 2000u + 13u * (uint32_t)i; /* 1 MiB ones: 4 chunks */
}
static uint32_t send_off(int i)
{
	uint32_t o = 0;
	for (int j = 0; j < i; j++)
		o += send_len(j);
	return o;
}

struct side {
	kinet_ctx *ctx;
	kinet_pd *pd;
	uint8_t *buf;
	size_t len;
	kinet_mr *mr;
};

static void side_open(struct side *s, size_t len, uint64_t seed)
{
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	CK0(kinet_open(&ca, &s->ctx));
	CK0(kinet_pd_alloc(s->ctx, &s->pd));
	s->len = len;
	s->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(s->buf != MAP_FAILED);
	tu_fill_random(s->buf, len, seed);
	CK0(kinet_mr_reg(s->pd, s->buf, len, KINET_ACCESS_ALL, &s->mr));
}

static void side_close(struct side *s)
{
	CK0(kinet_mr_dereg(s->mr));
	CK0(kinet_pd_free(s->pd));
	CK0(kinet_close(s->ctx));
	CK(munmap(s->buf, s->len) == 0);
}

/* Exchanges region descriptors over fd. */
static struct kinet_mr_info mr_xchg(struct side *s, int fd)
{
	uint8_t mine[KINET_MR_DESC_SIZE], theirs[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(s->mr, mine, sizeof(mine)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, mine, sizeof(mine), theirs, sizeof(theirs)) == KINET_MR_DESC_SIZE);
	struct kinet_mr_info mi;
	CK0(kinet_mr_desc_parse(theirs, sizeof(theirs), &mi));
	return mi;
}

/* A QP connected to the one the other end of fd creates at the same time. */
static kinet_qp *qp_link(struct side *s, int fd, kn_qp **d)
{
	kinet_qp *qp = tw_qp_link(s->pd, fd);
	CK0(kinet_qp_device(qp, d));
	return qp;
}

/* The traffic of a QP that must keep working: into T's area at toff, a
 * rendezvous write, a small write, a send (T has a receive for it); a
 * read from T at roff, checked here. */
static void traffic(struct side *s, kn_qp *d, struct kinet_mr_info *t, uint32_t soff,
		    uint32_t toff, uint32_t roff, uint32_t loff)
{
	uint32_t lkey = kinet_mr_lkey(s->mr);
	kn_ticket_t w1, w2, r, sd;
	CK0(kn_put(d, t->addr + toff, t->rkey, s->buf + soff + 5, lkey, 200000, &w1));
	CK0(kn_put(d, t->addr + toff + 300000, t->rkey, s->buf + soff + 999, lkey, 300, &w2));
	CK0(kn_get(d, s->buf + loff, lkey, t->addr + roff, t->rkey, 150000, &r));
	CK0(kn_sq_reserve(d, 1, &sd));
	kn_prep_send(d, kn_wqe_ptr(d, sd), sd, tu_addr(s->buf + soff + 4000), lkey, 3000, 1, 0x77);
	kn_sq_submit(d, sd, 1);
	CK0(kn_wait(d, w1));
	CK0(kn_wait(d, w2));
	CK0(kn_wait(d, r));
	CK0(kn_wait(d, sd));
	uint8_t *m = malloc(T_LEN);
	tu_fill_random(m, T_LEN, SEED_T);
	CK(memcmp(s->buf + loff, m + roff, 150000) == 0);
	free(m);
}

/* T's check of what a traffic() call left in its area at toff. */
static void traffic_check(struct side *s, uint32_t toff, uint64_t seed, uint32_t soff)
{
	uint8_t *m = malloc(A_LEN);
	tu_fill_random(m, A_LEN, seed);
	CK(memcmp(s->buf + toff, m + soff + 5, 200000) == 0);
	CK(memcmp(s->buf + toff + 300000, m + soff + 999, 300) == 0);
	CK(memcmp(s->buf + toff + 400000, m + soff + 4000, 3000) == 0);
	free(m);
}

static int t_main(int fa, int fc, void *arg)
{
	(void)arg;
	struct side s;
	side_open(&s, T_LEN, SEED_T);
	mr_xchg(&s, fa);
	mr_xchg(&s, fc);
	kn_qp *d1, *d2, *dc;
	kinet_qp *q1 = qp_link(&s, fa, &d1), *q2 = qp_link(&s, fa, &d2), *qc = qp_link(&s, fc, &dc);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	CK(tw_sync(fa, 1) == 1); /* A has posted its sends on its first QP */
	uint64_t end = tw_ms() + 10000;
	struct kinet_counters c;
	do {
		tw_sleep_ms(20);
		CK0(kinet_ctx_counters(s.ctx, &c));
	} while (c.rnr_retries < 100 && tw_ms() < end);
	CK(c.rnr_retries >= 100);
	tw_sleep_ms(300); /* everything A could send has arrived and waits */
	/* receives for the others' sends, then let them go */
	kn_ticket_t r2, rc;
	CK0(kn_recv_post(d2, s.buf + (12u << 20) + 400000, lkey, 3000, &r2));
	CK0(kn_recv_post(dc, s.buf + (13u << 20) + 400000, lkey, 3000, &rc));
	CK(tw_sync(fa, 2) == 2);
	CK(tw_sync(fc, 2) == 2);
	kn_recv_info info;
	CK0(kn_recv_poll(d2, r2, 1, &info));
	CK(info.byte_len == 3000 && info.has_imm && info.imm == 0x77);
	CK0(kn_recv_poll(dc, rc, 1, &info));
	CK(info.byte_len == 3000 && info.has_imm && info.imm == 0x77);
	CK(tw_sync(fa, 3) == 3);
	CK(tw_sync(fc, 3) == 3);
	traffic_check(&s, 12u << 20, SEED_A, 13u << 20);
	traffic_check(&s, 13u << 20, SEED_C, 1u << 20);
	/* the waiting sends: receives now, each exactly its size */
	kn_ticket_t rt[NS];
	for (int i = 0; i < NS; i++)
		CK0(kn_recv_post(d1, s.buf + send_off(i), lkey, send_len(i), &rt[i]));
	uint8_t *m = malloc(A_LEN);
	tu_fill_random(m, A_LEN, SEED_A);
	for (int i = 0; i < NS; i++) {
		CK0(kn_recv_poll(d1, rt[i], 1, &info));
		CK(info.byte_len == send_len(i));
		CK(memcmp(s.buf + send_off(i), m + send_off(i), send_len(i)) == 0);
	}
	free(m);
	CK(tw_sync(fa, 4) == 4);
	CK(tw_sync(fc, 4) == 4);
	CK0(kinet_qp_destroy(q1));
	CK0(kinet_qp_destroy(q2));
	CK0(kinet_qp_destroy(qc));
	side_close(&s);
	return 0;
}

static int a_main(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct side s;
	side_open(&s, A_LEN, SEED_A);
	struct kinet_mr_info t = mr_xchg(&s, fd);
	kn_qp *d1, *d2;
	kinet_qp *q1 = qp_link(&s, fd, &d1), *q2 = qp_link(&s, fd, &d2);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	kn_ticket_t st[NS];
	for (int i = 0; i < NS; i++) {
		CK0(kn_sq_reserve(d1, 1, &st[i]));
		kn_prep_send(d1, kn_wqe_ptr(d1, st[i]), st[i], tu_addr(s.buf + send_off(i)), lkey,
			     send_len(i), 0, 0);
		kn_sq_submit(d1, st[i], 1);
	}
	CK(tw_sync(fd, 1) == 1);
	CK(tw_sync(fd, 2) == 2);
	traffic(&s, d2, &t, 13u << 20, 12u << 20, 14u << 20, 15u << 20);
	CK(tw_sync(fd, 3) == 3);
	for (int i = 0; i < NS; i++)
		CK0(kn_wait(d1, st[i]));
	CK(tw_sync(fd, 4) == 4);
	CK0(kinet_qp_destroy(q1));
	CK0(kinet_qp_destroy(q2));
	side_close(&s);
	return 0;
}

static int c_main(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct side s;
	side_open(&s, C_LEN, SEED_C);
	struct kinet_mr_info t = mr_xchg(&s, fd);
	kn_qp *d;
	kinet_qp *q = qp_link(&s, fd, &d);
	CK(tw_sync(fd, 2) == 2);
	traffic(&s, d, &t, 1u << 20, 13u << 20, (14u << 20) + 100007, 3u << 20);
	CK(tw_sync(fd, 3) == 3);
	CK(tw_sync(fd, 4) == 4);
	CK0(kinet_qp_destroy(q));
	side_close(&s);
	return 0;
}

Test(wire_rnr, waiting_sends_do_not_starve_other_qps)
{
	need_wire();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_proc p[3] = {{.fn = t_main}, {.fn = a_main}, {.fn = c_main}};
	tw_run(p, 3, links, 2, NULL, 90000);
	cr_assert(tw_exited_ok(&p[0]), "target: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "requester on the same peer: status 0x%x", p[1].status);
	cr_assert(tw_exited_ok(&p[2]), "independent requester: status 0x%x", p[2].status);
}

/* ---- a silent peer does not keep the send resources of the context ---------------- */

#define HUGE_LEN (160u << 20) /* more chunks than the context has send descriptors */

/* A: one QP to B, stopped, with a huge eager write outstanding to it; the
 * other QP, to C, moves data meanwhile (checked byte for byte). */
static int h_a(int fb, int fc, void *arg)
{
	(void)arg;
	setenv("KINET_NET_RNDV_BYTES", "0", 1); /* eager: chunks straight from memory */
	struct side s;
	side_open(&s, A_LEN, SEED_A);
	struct kinet_mr_info tb = mr_xchg(&s, fb), tc = mr_xchg(&s, fc);
	kn_qp *db, *dc;
	kinet_qp *qb = qp_link(&s, fb, &db), *qc = qp_link(&s, fc, &dc);
	uint8_t *huge = mmap(NULL, HUGE_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			     -1, 0);
	CK(huge != MAP_FAILED);
	kinet_mr *hm;
	CK0(kinet_mr_reg(s.pd, huge, HUGE_LEN, KINET_ACCESS_LOCAL_WRITE, &hm));
	long long pid = tw_sync(fb, 0);
	CK(pid > 0);
	/* the connection is up, then B stops */
	kn_ticket_t t;
	CK0(kn_get(db, s.buf, kinet_mr_lkey(s.mr), tb.addr, tb.rkey, 64, &t));
	CK0(kn_wait(db, t));
	CK(kill((pid_t)pid, SIGSTOP) == 0);
	kn_ticket_t big;
	CK0(kn_put(db, tb.addr, tb.rkey, huge, kinet_mr_lkey(hm), (uint32_t)(4u << 20), &big));
	for (int i = 0; i < 39; i++) /* 160 MiB in 40 writes of 4 MiB */
		CK0(kn_put(db, tb.addr, tb.rkey, huge + (size_t)(i + 1) * (4u << 20),
			   kinet_mr_lkey(hm), 4u << 20, &big));
	tw_sleep_ms(200); /* they are handed to the provider */
	traffic(&s, dc, &tc, 13u << 20, 12u << 20, 14u << 20, 15u << 20);
	CK(tw_sync(fc, 3) == 3);
	CK(kn_wait(db, big) == -EIO); /* B never answered */
	CK(kill((pid_t)pid, SIGKILL) == 0);
	CK0(kinet_qp_destroy(qb));
	CK0(kinet_qp_destroy(qc));
	int rc = kinet_mr_dereg(hm);
	CK(rc == 0);
	CK(munmap(huge, HUGE_LEN) == 0);
	side_close(&s);
	return 0;
}

static int h_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct side s;
	side_open(&s, T_LEN, SEED_T);
	mr_xchg(&s, fd);
	kn_qp *d;
	qp_link(&s, fd, &d);
	CK(tw_sync(fd, (long long)getpid()) == 0);
	for (int i = 0; i < 6000; i++) /* stopped, then killed */
		tw_sleep_ms(10);
	return 1;
}

static int h_c(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct side s;
	side_open(&s, T_LEN, SEED_T);
	mr_xchg(&s, fd);
	kn_qp *d;
	kinet_qp *q = qp_link(&s, fd, &d);
	kn_ticket_t r;
	CK0(kn_recv_post(d, s.buf + (12u << 20) + 400000, kinet_mr_lkey(s.mr), 3000, &r));
	kn_recv_info info;
	CK0(kn_recv_poll(d, r, 1, &info));
	CK(info.byte_len == 3000);
	CK(tw_sync(fd, 3) == 3);
	traffic_check(&s, 12u << 20, SEED_A, 13u << 20);
	CK0(kinet_qp_destroy(q));
	side_close(&s);
	return 0;
}

Test(wire_rnr, silent_peer_does_not_starve_other_qps)
{
	need_wire();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_proc p[3] = {{.fn = h_a}, {.fn = h_b}, {.fn = h_c}};
	tw_run(p, 3, links, 2, NULL, 90000);
	cr_assert(tw_exited_ok(&p[0]), "requester: status 0x%x", p[0].status);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "the silent peer was to be killed: status 0x%x", p[1].status);
	cr_assert(tw_exited_ok(&p[2]), "the other peer: status 0x%x", p[2].status);
}
