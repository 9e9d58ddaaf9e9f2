/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The wire's rendezvous writes (large writes from host memory: the target
 * checks them, then reads the data straight into place) on loopback: every
 * target-side check (key, bounds, access) with RC flushing after the
 * error; RC order between rendezvous writes and what follows them (a read
 * sees them, a receive CQE implies them), also with rendezvous off; writes
 * with immediate (byte count, RNR, two pieces); a region deregistered and unmapped under
 * incoming writes; a requester killed while the target reads from it.
 */
#define _GNU_SOURCE /* setns */
#include <sys/mman.h>
#include <criterion/criterion.h>
#include "test_wire_common.h"

static const int one_link[][2] = {{0, 1}};

/* Bytes placed by reads of rendezvous writes: in place, or through bounce
 * buffers where the provider cannot cancel a read (libfabric before 1.18). */
static uint64_t direct_bytes(struct tw_side *s)
{
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s->ctx, &c));
	return c.direct_bytes + c.staged_bytes;
}

/* A write (or write with immediate) gathered from n pieces of this side's
 * buffer: pieces[i] = {offset, length}. Returns its ticket. */
static kn_ticket_t post_write_sge(struct tw_side *s, const uint32_t (*pieces)[2], int n,
				  uint64_t roff, int with_imm, uint32_t imm)
{
	uint8_t w[4 * KN_SEND_WQE_BB];
	memset(w, 0, sizeof(w));
	uint32_t ds = 2 + (uint32_t)n;
	uint32_t nbb = (ds * 16 + KN_SEND_WQE_BB - 1) / KN_SEND_WQE_BB;
	CK(nbb <= 4);
	kn_ticket_t t;
	CK0(kn_sq_reserve(s->d, nbb, &t));
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), s->peer.addr + roff, s->peer.rkey);
	for (int i = 0; i < n; i++)
		kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32 + 16 * i), pieces[i][1],
				kinet_mr_lkey(s->mr), (uint64_t)(uintptr_t)(s->buf + pieces[i][0]));
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, (uint16_t)t,
			with_imm ? KN_OPCODE_RDMA_WRITE_IMM : KN_OPCODE_RDMA_WRITE, 0, s->d->qpn,
			KN_WQE_CTRL_CQ_UPDATE, (uint8_t)ds, 0, with_imm ? kn_htobe32(imm) : 0);
	for (uint32_t i = 0; i < nbb; i++)
		memcpy(kn_wqe_ptr(s->d, t + i), w + i * KN_SEND_WQE_BB, KN_SEND_WQE_BB);
	kn_sq_submit(s->d, t, nbb);
	return t + nbb - 1; /* the ticket that completes with it */
}

/* ---- target-side checks ------------------------------------------------------------- */

#define RO_LEN (256u << 10)

static int prot_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint8_t rod[KINET_MR_DESC_SIZE];
	struct kinet_mr_info ro;
	CK(tw_xchg(fd, "", 0, rod, sizeof(rod)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(rod, sizeof(rod), &ro));
	uint32_t lkey = kinet_mr_lkey(s.mr);
	/* 1: past the end of the region, between two good writes: the first
	 * lands, the bad one fails, the last is flushed */
	kn_ticket_t t0 = tw_post_write(&s, TW_Q, TW_P, 100000, 0, 0);
	kn_ticket_t t1 = tw_post_write(&s, TW_Q, s.peer.len - 65536 + 8, 65536, 0, 0);
	kn_ticket_t t2 = tw_post_write(&s, TW_Q, TW_P + 200000, 300000, 0, 0);
	CK0(kn_wait(s.d, t0));
	tw_expect_fail(&s, t1, KN_SYND_REMOTE_ACCESS_ERR);
	CK(kn_wait(s.d, t2) == -EIO);
	CK(tw_sync(fd, 1) == 1); /* b checks what landed */
	CK(tw_sync(fd, 2) == 2);
	/* 2: a key that names no region */
	tw_qp_new(&s);
	kn_ticket_t t;
	CK0(kn_put(s.d, s.peer.addr, s.peer.rkey + 0x100, s.buf + TW_Q, lkey, 70000, &t));
	tw_expect_fail(&s, t, KN_SYND_REMOTE_ACCESS_ERR);
	/* 3: a region without remote write access, then one that starts before
	 * the region (a good write pipelined in front of each) */
	tw_qp_new(&s);
	t0 = tw_post_write(&s, TW_Q, TW_P, 65536, 0, 0);
	CK0(kn_put(s.d, ro.addr, ro.rkey, s.buf + TW_Q, lkey, 131072, &t));
	CK0(kn_wait(s.d, t0));
	tw_expect_fail(&s, t, KN_SYND_REMOTE_ACCESS_ERR);
	tw_qp_new(&s);
	t0 = tw_post_write(&s, TW_Q, TW_P, 65536, 0, 0);
	CK0(kn_put(s.d, s.peer.addr - 4096, s.peer.rkey, s.buf + TW_Q, lkey, 65536, &t));
	CK0(kn_wait(s.d, t0));
	tw_expect_fail(&s, t, KN_SYND_REMOTE_ACCESS_ERR);
	CK(tw_sync(fd, 3) == 3);
	tw_close(&s);
	return 0;
}

static int prot_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint8_t *ro = malloc(RO_LEN);
	CK(ro);
	tu_fill_random(ro, RO_LEN, 3);
	kinet_mr *romr;
	CK0(kinet_mr_reg(s.pd, ro, RO_LEN, KINET_ACCESS_LOCAL_WRITE | KINET_ACCESS_REMOTE_READ,
			 &romr));
	uint8_t rod[KINET_MR_DESC_SIZE], dummy[4];
	CK(kinet_mr_export(romr, rod, sizeof(rod)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, rod, sizeof(rod), dummy, sizeof(dummy)) == 0);
	CK(tw_sync(fd, 1) == 1);
	uint8_t *a = malloc(TW_LEN), *mine = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(mine, TW_LEN, 2);
	/* the first write landed (read by the target), nothing else changed */
	CK(memcmp(s.buf + TW_P, a + TW_Q, 100000) == 0);
	CK(memcmp(s.buf + 100000, mine + 100000, TW_LEN - 100000) == 0);
	CK(direct_bytes(&s) >= 100000);
	CK(tw_sync(fd, 2) == 2);
	tw_qp_new(&s); /* 2 */
	tw_qp_new(&s); /* 3 */
	tw_qp_new(&s);
	CK(tw_sync(fd, 3) == 3);
	uint8_t *exp = malloc(RO_LEN);
	tu_fill_random(exp, RO_LEN, 3);
	CK(memcmp(ro, exp, RO_LEN) == 0); /* the read-only region is intact */
	CK(memcmp(s.buf + 100000, mine + 100000, TW_LEN - 100000) == 0);
	free(exp);
	free(a);
	free(mine);
	CK0(kinet_mr_dereg(romr));
	free(ro);
	tw_close(&s);
	return 0;
}

Test(wire_rndv, target_checks_and_flush)
{
	tw_need_wire();
	struct tw_proc p[2] = {{.fn = prot_a}, {.fn = prot_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* ---- RC order and writes with immediate --------------------------------------------- */

#define NW 24
static uint32_t ord_len(int i)
{
	return 32768u + (uint32_t)i * 37000u; /* 32 KiB .. ~880 KiB */
}
static uint32_t ord_dst(int i)
{
	return (uint32_t)i * 40000u % (1u << 20); /* overlapping: the later one wins */
}
static const uint32_t sge2[2][2] = {{TW_Q + 7, 20000}, {TW_Q + 100000, 80001}};
#define IMM_BIG 700000u
#define IMM_OFF (1u << 20)
#define SGE2_OFF (IMM_OFF + IMM_BIG)
#define SGE2_LEN 100001u
#define SMALL_OFF (TW_S + 100000u)

/* What b's P area must hold after a's writes (from a's Q, seed 1). */
static void ord_model(uint8_t *m)
{
	uint8_t *a = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(m, TW_LEN, 2);
	for (int i = 0; i < NW; i++)
		memcpy(m + TW_P + ord_dst(i), a + TW_Q + (uint32_t)i * 1000u, ord_len(i));
	memcpy(m + TW_P + IMM_OFF, a + TW_Q + 3, IMM_BIG);
	uint32_t o = SGE2_OFF;
	for (int i = 0; i < 2; i++) {
		memcpy(m + TW_P + o, a + sge2[i][0], sge2[i][1]);
		o += sge2[i][1];
	}
	memcpy(m + SMALL_OFF, a + TW_Q + 5, 8);
	memcpy(m + TW_S, a + TW_Q + 11, 5000); /* the send */
	free(a);
}

/* arg: ORD_EAGER: rendezvous off (every write eager, large ones in chunks);
 * ORD_COPY_ON, ORD_COPY_OFF: the target copies landed reads into place on
 * its copy thread (every read, KINET_NET_COPY_MIN=0), or on its engine */
#define ORD_EAGER ((void *)1)
#define ORD_COPY_ON ((void *)2)
#define ORD_COPY_OFF ((void *)3)
/* The target's copy thread as arg asks (ORD_COPY_ON, ORD_COPY_OFF; other
 * args leave the defaults), before its context opens. */
static void copy_mode(void *arg)
{
	if (arg == ORD_COPY_ON || arg == ORD_COPY_OFF) {
		setenv("KINET_NET_COPY_THREAD", arg == ORD_COPY_ON ? "on" : "off", 1);
		setenv("KINET_NET_COPY_MIN", "0", 1);
	}
}
static int ord_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	if (arg == ORD_EAGER)
		setenv("KINET_NET_RNDV_BYTES", "0", 1);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	CK(tw_sync(fd, 1) == 1); /* b has posted its receives */
	for (int i = 0; i < NW; i++)
		tw_post_write(&s, TW_Q + (uint32_t)i * 1000u, TW_P + ord_dst(i), ord_len(i), 0, 0);
	/* a read of what the writes just wrote sees them (RC) */
	kn_ticket_t r;
	CK0(kn_get(s.d, s.buf + TW_L, lkey, s.peer.addr + TW_P, s.peer.rkey, 400000, &r));
	/* a small write and a send behind large writes: b checks, on the
	 * receive CQE, that everything before it is in place */
	kn_ticket_t t;
	CK0(kn_put(s.d, s.peer.addr + SMALL_OFF, s.peer.rkey, s.buf + TW_Q + 5, lkey, 8, &t));
	tw_post_send(&s, TW_Q + 11, 5000, 1, 0x5eed);
	/* writes with immediate: one piece (eager: in chunks), two pieces */
	tw_post_write(&s, TW_Q + 3, TW_P + IMM_OFF, IMM_BIG, 1, 0xabc);
	kn_ticket_t last = post_write_sge(&s, sge2, 2, TW_P + SGE2_OFF, 1, 0x222);
	CK0(kn_wait(s.d, r));
	CK0(kn_wait(s.d, last));
	CK0(kn_quiet(s.d));
	uint8_t *m = malloc(TW_LEN);
	ord_model(m);
	CK(memcmp(s.buf + TW_L, m + TW_P, 400000) == 0);
	free(m);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

static int ord_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	copy_mode(arg);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	kn_ticket_t rt[3];
	for (int i = 0; i < 3; i++)
		CK0(kn_recv_post(s.d, s.buf + TW_S + (uint32_t)i * 8192u, lkey, 8192, &rt[i]));
	CK(tw_sync(fd, 1) == 1);
	uint8_t *m = malloc(TW_LEN);
	ord_model(m);
	kn_recv_info info;
	CK0(kn_recv_poll(s.d, rt[0], 1, &info));
	CK(info.opcode == KN_CQE_RESP_SEND_IMM && info.byte_len == 5000 && info.imm == 0x5eed);
	/* the send came after every large write and the small one */
	CK(memcmp(s.buf + TW_P, m + TW_P, 1u << 20) == 0);
	uint8_t *a = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	CK(memcmp(s.buf + SMALL_OFF, a + TW_Q + 5, 8) == 0);
	CK(memcmp(s.buf + TW_S, a + TW_Q + 11, 5000) == 0);
	free(a);
	CK0(kn_recv_poll(s.d, rt[1], 1, &info));
	CK(info.opcode == KN_CQE_RESP_WR_IMM && info.byte_len == IMM_BIG && info.imm == 0xabc);
	CK(memcmp(s.buf + TW_P + IMM_OFF, m + TW_P + IMM_OFF, IMM_BIG) == 0);
	CK0(kn_recv_poll(s.d, rt[2], 1, &info));
	CK(info.opcode == KN_CQE_RESP_WR_IMM && info.byte_len == SGE2_LEN && info.imm == 0x222);
	CK(memcmp(s.buf + TW_P + SGE2_OFF, m + TW_P + SGE2_OFF, SGE2_LEN) == 0);
	CK(tw_sync(fd, 2) == 2);
	CK(memcmp(s.buf, m, TW_LEN) == 0); /* and nothing else changed */
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s.ctx, &c));
	CK(c.errors == 0);
	free(m);
	if (arg == ORD_COPY_ON || arg == ORD_COPY_OFF) {
		/* every rendezvous byte went through the copy thread, or none */
		uint64_t rv = IMM_BIG + SGE2_LEN;
		for (int i = 0; i < NW; i++)
			rv += ord_len(i);
		struct kinet_wire_info wi;
		CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
		if (arg == ORD_COPY_ON)
			CK(wi.copy_thread == 1 && wi.copy_thread_bytes == rv &&
			   strstr(wi.copy_why, "KINET_NET_COPY_THREAD=on"));
		else
			CK(wi.copy_thread == 0 && wi.copy_thread_bytes == 0 &&
			   strstr(wi.copy_why, "KINET_NET_COPY_THREAD=off"));
	}
	tw_close(&s);
	return 0;
}

Test(wire_rndv, rc_order_and_immediate)
{
	tw_need_wire();
	struct tw_proc p[2] = {{.fn = ord_a}, {.fn = ord_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* The same with rendezvous off at the requester (KINET_NET_RNDV_BYTES=0):
 * the eager path, a write with immediate in several chunks. */
Test(wire_rndv, rc_order_and_immediate_eager)
{
	tw_need_wire();
	struct tw_proc p[2] = {{.fn = ord_a}, {.fn = ord_b}};
	tw_run(p, 2, one_link, 1, ORD_EAGER, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* The same with the target's copy thread (KINET_NET_COPY_THREAD=on): the
 * overlapping writes land in order, the receive CQEs and the ACKs come after
 * their bytes are in place, and kinet_wire_info counts every rendezvous byte
 * as copied by it; off: none. */
Test(wire_rndv, rc_order_and_immediate_copy_thread)
{
	tw_need_wire();
	void *mode[2] = {ORD_COPY_ON, ORD_COPY_OFF};
	for (int k = 0; k < 2; k++) {
		struct tw_proc p[2] = {{.fn = ord_a}, {.fn = ord_b}};
		tw_run(p, 2, one_link, 1, mode[k], 60000);
		cr_assert(tw_exited_ok(&p[0]), "%s: side a: status 0x%x", k ? "off" : "on",
			  p[0].status);
		cr_assert(tw_exited_ok(&p[1]), "%s: side b: status 0x%x", k ? "off" : "on",
			  p[1].status);
	}
}

/* Many rendezvous writes of at most 64 KiB, with larger ones among them, to
 * overlapping places: the target reads more than 16 of them at once (its
 * small read descriptors; 16 descriptors of 1 MiB before), never more than
 * 64, and every byte lands in RC order (the later write wins). arg:
 * ORD_COPY_ON or ORD_COPY_OFF: the target's copy thread, or its engine,
 * copies into place. */
#define MW_FIRST 64 /* writes of 64 KiB, one doorbell */
#define MW_N 240
static uint32_t mw_len(int i)
{
	if (i < MW_FIRST)
		return 65536u;
	return i % 8 == 7 ? 150000u + (uint32_t)i * 997u : 32768u + (uint32_t)i * 7919u % 32769u;
}
static uint32_t mw_src(int i)
{
	return TW_Q + (uint32_t)i * 4099u % (512u << 10);
}
static uint32_t mw_dst(int i)
{
	return TW_P + (uint32_t)i * 23456u % (1536u << 10);
}

static int mw_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	kn_ticket_t t;
	CK0(kn_sq_reserve(s.d, MW_FIRST, &t));
	for (int i = 0; i < MW_FIRST; i++)
		kn_prep_write(s.d, kn_wqe_ptr(s.d, t + (kn_ticket_t)i), t + (kn_ticket_t)i,
			      (uint64_t)(uintptr_t)(s.buf + mw_src(i)), lkey,
			      s.peer.addr + mw_dst(i), s.peer.rkey, mw_len(i));
	kn_sq_submit(s.d, t, MW_FIRST);
	kn_ticket_t last = t + MW_FIRST - 1;
	for (int i = MW_FIRST; i < MW_N; i++)
		last = tw_post_write(&s, mw_src(i), mw_dst(i), mw_len(i), 0, 0);
	CK0(kn_wait(s.d, last));
	CK0(kn_quiet(s.d));
	CK(tw_sync(fd, 1) == 1);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

static int mw_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	copy_mode(arg);
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	CK(tw_sync(fd, 1) == 1);
	uint8_t *a = malloc(TW_LEN), *m = malloc(TW_LEN);
	CK(a && m);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(m, TW_LEN, 2);
	for (int i = 0; i < MW_N; i++)
		memcpy(m + mw_dst(i), a + mw_src(i), mw_len(i));
	CK(memcmp(s.buf, m, TW_LEN) == 0);
	struct kinet_wire_info wi;
	CK0(kinet_wire_info(s.ctx, &wi, sizeof(wi)));
	if (wi.reads_max <= 16 || wi.reads_max > 64) {
		fprintf(stderr, "reads in flight at most %u (expected 17 to 64)\n", wi.reads_max);
		CK(0);
	}
	CK(wi.copy_thread == (arg == ORD_COPY_ON));
	struct kinet_counters c;
	CK0(kinet_ctx_counters(s.ctx, &c));
	CK(c.errors == 0);
	free(a);
	free(m);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

Test(wire_rndv, small_writes_many_reads_at_once)
{
	tw_need_wire();
	void *mode[2] = {ORD_COPY_OFF, ORD_COPY_ON};
	for (int k = 0; k < 2; k++) {
		struct tw_proc p[2] = {{.fn = mw_a}, {.fn = mw_b}};
		tw_run(p, 2, one_link, 1, mode[k], 60000);
		cr_assert(tw_exited_ok(&p[0]), "copy thread %s: side a: status 0x%x",
			  k ? "on" : "off", p[0].status);
		cr_assert(tw_exited_ok(&p[1]), "copy thread %s: side b: status 0x%x",
			  k ? "on" : "off", p[1].status);
	}
}

/* a: a large write with immediate finds no receive WQE: rnr_retry 1 gives
 * RNR retry exceeded; rnr_retry 7 waits (longer than the network timeout)
 * until b posts one, and a write behind it waits too. */
static int rnr_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open2(&s, fd, TW_LEN, 1, 1);
	kn_ticket_t t = tw_post_write(&s, TW_Q, TW_P, 200000, 1, 1);
	tw_expect_fail(&s, t, KN_SYND_RNR_RETRY_EXC_ERR);
	CK(tw_sync(fd, 1) == 1);
	s.rnr_retry = 7;
	tw_qp_new(&s);
	kn_ticket_t t1 = tw_post_write(&s, TW_Q + 1, TW_P, 300000, 1, 2);
	kn_ticket_t t2 = tw_post_write(&s, TW_Q + 2, TW_P + 400000, 65536, 0, 0);
	CK(tw_sync(fd, 2) == 2);
	CK0(kn_wait(s.d, t1));
	CK0(kn_wait(s.d, t2));
	CK(tw_sync(fd, 3) == 3);
	tw_close(&s);
	return 0;
}

static int rnr_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open2(&s, fd, TW_LEN, 2, 1);
	CK(tw_sync(fd, 1) == 1);
	s.rnr_retry = 7;
	tw_qp_new(&s);
	CK(tw_sync(fd, 2) == 2);
	tw_sleep_ms(tw_net_ms() + 1000); /* longer than KINET_NET_TIMEOUT_MS */
	uint8_t *a = malloc(TW_LEN), *mine = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	tu_fill_random(mine, TW_LEN, 2);
	/* the write behind the waiting one has not landed */
	CK(memcmp(s.buf + TW_P + 400000, mine + TW_P + 400000, 65536) == 0);
	kn_ticket_t rt;
	CK0(kn_recv_post(s.d, s.buf + TW_S, kinet_mr_lkey(s.mr), 64, &rt));
	kn_recv_info info;
	CK0(kn_recv_poll(s.d, rt, 1, &info));
	CK(info.opcode == KN_CQE_RESP_WR_IMM && info.byte_len == 300000 && info.imm == 2);
	CK(memcmp(s.buf + TW_P, a + TW_Q + 1, 300000) == 0);
	CK(tw_sync(fd, 3) == 3);
	CK(memcmp(s.buf + TW_P + 400000, a + TW_Q + 2, 65536) == 0);
	free(a);
	free(mine);
	tw_close(&s);
	return 0;
}

Test(wire_rndv, immediate_receiver_not_ready)
{
	tw_need_wire();
	struct tw_proc p[2] = {{.fn = rnr_a}, {.fn = rnr_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* ---- a region goes away under incoming writes ------------------------------------------ */

#define UM_LEN (8u << 20)
#define UM_WIN 64

/* a streams large writes into b's second region until one fails (however
 * fast the provider, the region goes away under them); b deregisters and
 * unmaps it meanwhile (a placement after that would kill b). Every write
 * before the first failure landed, every one after it fails. */
static int unmap_a(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint8_t d[KINET_MR_DESC_SIZE];
	struct kinet_mr_info um;
	CK(tw_xchg(fd, "", 0, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(d, sizeof(d), &um));
	uint32_t lkey = kinet_mr_lkey(s.mr);
	kn_ticket_t t[UM_WIN];
	CK(tw_sync(fd, 1) == 1);
	int posted = 0, waited = 0, first_err = -1;
	uint64_t end = tw_ms() + 20000;
	while (waited < posted || (first_err < 0 && tw_ms() < end)) {
		if (first_err < 0 && posted - waited < UM_WIN &&
		    kn_put(s.d, um.addr + (uint64_t)(posted % 8) * (1u << 20), um.rkey,
			   s.buf + (uint32_t)(posted % 3) * (1u << 20), lkey, 1u << 20,
			   &t[posted % UM_WIN]) == 0) {
			posted++;
			continue;
		}
		if (waited == posted)
			continue; /* the send queue is full of WQEs not yet taken */
		int rc = kn_wait(s.d, t[waited % UM_WIN]);
		CK(rc == 0 || rc == -EIO);
		if (rc && first_err < 0) {
			first_err = waited;
			CK(kn_qp_error(s.d, NULL) == KN_SYND_REMOTE_ACCESS_ERR);
		}
		CK(first_err < 0 || rc == -EIO);
		waited++;
	}
	fprintf(stderr, "[unmap] %d of %d writes landed before the region went away\n",
		first_err, posted);
	CK(first_err >= 0);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

static int unmap_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint8_t *um = mmap(NULL, UM_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(um != MAP_FAILED);
	kinet_mr *mr;
	CK0(kinet_mr_reg(s.pd, um, UM_LEN, KINET_ACCESS_ALL, &mr));
	uint8_t d[KINET_MR_DESC_SIZE], dummy[4];
	CK(kinet_mr_export(mr, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, d, sizeof(d), dummy, sizeof(dummy)) == 0);
	CK(tw_sync(fd, 1) == 1);
	/* wait until data arrives, then take the region away */
	uint64_t end = tw_ms() + 20000;
	while (direct_bytes(&s) < (4u << 20) && tw_ms() < end)
		tw_sleep_ms(1);
	uint64_t t0 = tw_ms();
	CK0(kinet_mr_dereg(mr));
	uint64_t dt = tw_ms() - t0;
	fprintf(stderr, "[unmap] the region was removed in %llu ms\n", (unsigned long long)dt);
	CK(dt < 3000); /* the writer waited for reads in flight only */
	CK(munmap(um, UM_LEN) == 0);
	CK(tw_sync(fd, 2) == 2);
	tw_close(&s);
	return 0;
}

Test(wire_rndv, region_removed_under_writes)
{
	tw_need_wire();
	struct tw_proc p[2] = {{.fn = unmap_a}, {.fn = unmap_b}};
	tw_run(p, 2, one_link, 1, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(tw_exited_ok(&p[1]), "side b: status 0x%x", p[1].status);
}

/* ---- the requester dies while the target reads from it ---------------------------------- */

/* b streams large writes into a; a kills b mid-stream, then removes and
 * unmaps its region (bounded: the reads in flight fail or time out) and
 * serves c. */
static int kill_a(int fd, int fd2, void *arg)
{
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 1);
	uint8_t *um = mmap(NULL, UM_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(um != MAP_FAILED);
	kinet_mr *mr;
	CK0(kinet_mr_reg(s.pd, um, UM_LEN, KINET_ACCESS_ALL, &mr));
	uint8_t d[KINET_MR_DESC_SIZE], dummy[4];
	CK(kinet_mr_export(mr, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd, d, sizeof(d), dummy, sizeof(dummy)) == 0);
	long long pid = tw_sync(fd, 0);
	CK(pid > 0);
	uint64_t end = tw_ms() + 20000;
	while (direct_bytes(&s) < (4u << 20) && tw_ms() < end)
		tw_sleep_ms(1);
	CK(kill((pid_t)pid, SIGKILL) == 0);
	uint64_t t0 = tw_ms();
	CK0(kinet_mr_dereg(mr));
	uint64_t dt = tw_ms() - t0;
	fprintf(stderr, "[kill] region removed %llu ms after the requester died\n",
		(unsigned long long)dt);
	CK(dt < 2 * tw_net_ms() + 1000);
	CK(munmap(um, UM_LEN) == 0);
	/* a new QP to c: a large write each way */
	s.fd = fd2;
	uint8_t mine[KINET_MR_DESC_SIZE], theirs[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(s.mr, mine, sizeof(mine)) == KINET_MR_DESC_SIZE);
	CK(tw_xchg(fd2, mine, sizeof(mine), theirs, sizeof(theirs)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(theirs, sizeof(theirs), &s.peer));
	tw_qp_new(&s);
	CK0(kn_wait(s.d, tw_post_write(&s, TW_Q, TW_P, 500000, 0, 0)));
	CK(tw_sync(fd2, 1) == 1);
	uint8_t *c = malloc(TW_LEN);
	tu_fill_random(c, TW_LEN, 3);
	CK(memcmp(s.buf + TW_P + 600000, c + TW_Q, 400000) == 0);
	free(c);
	tw_close(&s);
	return 0;
}

static int kill_b(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 2);
	uint8_t d[KINET_MR_DESC_SIZE];
	struct kinet_mr_info um;
	CK(tw_xchg(fd, "", 0, d, sizeof(d)) == KINET_MR_DESC_SIZE);
	CK0(kinet_mr_desc_parse(d, sizeof(d), &um));
	CK(tw_sync(fd, (long long)getpid()) == 0);
	uint32_t lkey = kinet_mr_lkey(s.mr);
	for (int i = 0;; i++) { /* until killed */
		kn_ticket_t t;
		CK0(kn_put(s.d, um.addr + (uint64_t)(i % 8) * (1u << 20), um.rkey,
			   s.buf + (uint32_t)(i % 3) * (1u << 20), lkey, 1u << 20, &t));
		if (i > 100000)
			break;
	}
	return 1;
}

static int kill_c(int fd, int fd2, void *arg)
{
	(void)fd2;
	(void)arg;
	struct tw_side s;
	tw_open(&s, fd, TW_LEN, 3); /* waits for a to come back */
	CK0(kn_wait(s.d, tw_post_write(&s, TW_Q, TW_P + 600000, 400000, 0, 0)));
	CK(tw_sync(fd, 1) == 1);
	uint8_t *a = malloc(TW_LEN);
	tu_fill_random(a, TW_LEN, 1);
	CK(memcmp(s.buf + TW_P, a + TW_Q, 500000) == 0);
	free(a);
	tw_close(&s);
	return 0;
}

Test(wire_rndv, requester_killed_while_target_reads)
{
	tw_need_wire();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_proc p[3] = {{.fn = kill_a}, {.fn = kill_b}, {.fn = kill_c}};
	tw_run(p, 3, links, 2, NULL, 60000);
	cr_assert(tw_exited_ok(&p[0]), "side a: status 0x%x", p[0].status);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "side b was to be killed: status 0x%x", p[1].status);
	cr_assert(tw_exited_ok(&p[2]), "side c: status 0x%x", p[2].status);
}

/* ---- the requester goes silent while the target reads from it --------------------------- */

/* b is stopped (SIGSTOP) while a reads its rendezvous writes: a drops it
 * after KINET_NET_TIMEOUT_MS, its reads end, and every control call of a
 * returns within that bound (plus a margin); nothing lands in the region
 * after its deregistration returned, even once b runs again; a then serves
 * c. */
static void silent(struct tw_silent *a)
{
	tw_need_wire();
	static const int links[][2] = {{0, 1}, {0, 2}};
	struct tw_proc p[3] = {{.fn = tw_silent_t}, {.fn = tw_silent_b}, {.fn = tw_silent_c}};
	tw_run(p, a->close_first ? 2 : 3, links, a->close_first ? 1 : 2, a, 60000);
	cr_assert(tw_exited_ok(&p[0]), "target: status 0x%x", p[0].status);
	cr_assert(WIFSIGNALED(p[1].status) && WTERMSIG(p[1].status) == SIGKILL,
		  "the requester was to be killed: status 0x%x", p[1].status);
	if (!a->close_first)
		cr_assert(tw_exited_ok(&p[2]), "the other peer: status 0x%x", p[2].status);
}

Test(wire_rndv, silent_requester_control_calls_bounded)
{
	struct tw_silent a = {0};
	silent(&a);
}

Test(wire_rndv, silent_requester_teardown_bounded)
{
	struct tw_silent a = {.close_first = 1};
	silent(&a);
}

/* The same where the provider does not close a connection when its address
 * is removed (FI_AV_REMOVE_CLEANUP=0): the wire closes its endpoint
 * instead. */
Test(wire_rndv, silent_requester_without_av_cleanup)
{
	struct tw_silent a = {.no_av_cleanup = 1};
	silent(&a);
}
