/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ethernet queues of the software NIC on its loopback port (every frame
 * sent is received by the port's flows), driven by the device API on the
 * host executor: byte-exact delivery of random frames, the CQE's flags, hash
 * and timestamp, flow steering (every match field, priorities, the default
 * flow), cyclic and striding receive queues through many wraps (fillers,
 * frames over the stride), bursts under one doorbell, send at a time
 * (ordering and no earlier than asked), checksum offloads, and the
 * malformed input list: runts, frames over the MTU or the buffer, bad
 * checksums, unknown EtherTypes, send WQEs whose fields lie (each: the
 * syndrome, the counter, the queue in error, flushes, recovery), receive
 * WQEs outside their region; buffers guarded by canaries throughout.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <kinet/eth.h>
#include <kinet/device_eth.h>
#include <kinet/sem.h>
#include <kinet/device_sem.h>
#include "../util/testutil.h"
#include "../util/ethutil.h"

void kinet_soft_eth_inject(kinet_eth_port *port, const void *frame, uint32_t len);

#define TMO_NS 10000000000ull
#define SLOT 2048u

struct env {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_eth_port *port;
	kinet_eth_txq *txq;
	kn_eth_txq *tq;
	struct tu_region txb; /* frames to send, SLOT bytes apart */
	uint8_t mac[6];
};

static void env_open(struct env *e, const struct kinet_eth_txq_attr *ta, uint32_t mtu)
{
	memset(e, 0, sizeof(*e));
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_SOFT};
	cr_assert_eq(kinet_open(&ca, &e->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(e->ctx, &e->pd), 0);
	struct kinet_eth_port_attr pa = {.driver = KINET_ETH_DRIVER_LOOPBACK, .mtu = mtu};
	cr_assert_eq(kinet_eth_port_open(e->pd, &pa, &e->port), 0);
	struct kinet_eth_port_info info;
	cr_assert_eq(kinet_eth_port_info(e->port, &info), 0);
	cr_assert_eq(info.driver, KINET_ETH_DRIVER_LOOPBACK);
	memcpy(e->mac, info.mac, 6);
	cr_assert_eq(kinet_eth_txq_create(e->port, ta, &e->txq), 0);
	cr_assert_eq(kinet_eth_txq_device(e->txq, &e->tq), 0);
	cr_assert_eq(tu_region_alloc(&e->txb, e->pd, 512 * SLOT, KINET_ACCESS_LOCAL_WRITE, 77), 0);
	tu_fail_msg[0] = 0;
}

static void env_close(struct env *e)
{
	cr_assert(tu_region_canaries_ok(&e->txb));
	tu_region_free(&e->txb);
	cr_assert_eq(kinet_eth_txq_destroy(e->txq), 0);
	cr_assert_eq(kinet_eth_port_close(e->port), 0);
	cr_assert_eq(kinet_pd_free(e->pd), 0);
	cr_assert_eq(kinet_close(e->ctx), 0);
}

static uint8_t *frame_at(struct env *e, uint32_t i)
{
	return e->txb.buf + (size_t)(i % 512) * SLOT;
}

/* A receive queue with one flow (m NULL: the default flow). */
static kinet_eth_rxq *rxq_new(struct env *e, const struct kinet_eth_rxq_attr *a,
			      const struct kinet_eth_match *m, kinet_eth_flow **flow,
			      kn_eth_rxq **dq)
{
	kinet_eth_rxq *r;
	cr_assert_eq(kinet_eth_rxq_create(e->port, a, &r), 0);
	cr_assert_eq(kinet_eth_rxq_device(r, dq), 0);
	struct kinet_eth_match def = {0};
	cr_assert_eq(kinet_eth_flow_create(r, m ? m : &def, flow), 0);
	return r;
}

static void rxq_del(kinet_eth_rxq *r, kinet_eth_flow *f)
{
	if (f)
		cr_assert_eq(kinet_eth_flow_destroy(f), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r), 0);
}

/* Receives exactly n packets (bounded): returns how many came. */
static uint32_t recv_n(const kn_eth_rxq *rq, kn_eth_pkt *pk, uint32_t n)
{
	uint32_t got = 0;
	uint64_t t0 = kn_now_ns();
	while (got < n && kn_now_ns() - t0 < TMO_NS) {
		uint32_t k = 0;
		cr_assert_eq(kn_eth_recv(rq, pk + got, n - got, 1000000, &k), 0);
		got += k;
	}
	return got;
}

/* Nothing more is there. The loopback port places a frame before it writes
 * the send CQE, so once a send has completed its frame is in. */
static void recv_none(const kn_eth_rxq *rq)
{
	kn_eth_pkt p;
	uint32_t k = 9;
	cr_assert_eq(kn_eth_recv(rq, &p, 1, 0, &k), 0);
	cr_assert_eq(k, 0, "an unexpected packet of %u bytes", p.len);
}

static void send_wait(struct env *e, const void *f, uint32_t len, uint32_t flags)
{
	kn_ticket_t t;
	cr_assert_eq(kn_eth_send(e->tq, f, tu_lkey(&e->txb), len, flags, &t), 0);
	cr_assert_eq(kn_eth_txq_wait(e->tq, t), 0);
}

static const uint32_t good_udp4 =
	KN_ETH_RX_L2_OK | KN_ETH_RX_L3_OK | KN_ETH_RX_L4_OK | KN_ETH_RX_IPV4 | KN_ETH_RX_UDP;

static struct kinet_eth_match udp_port(uint16_t port)
{
	struct kinet_eth_match m = {.fields =
					    KINET_ETH_MATCH_IP_PROTO | KINET_ETH_MATCH_L4_DST_PORT,
				    .ip_proto = 17,
				    .l4_dst_port = port};
	return m;
}

Test(eth, loopback_frames_byte_exact_with_flags_hash_and_time)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 64, .pkt_size = 2048};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	struct kinet_eth_match m = udp_port(4000);
	kinet_eth_rxq *r = rxq_new(&e, &ra, &m, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 1234, 4000);
	uint32_t hash = te_rss_hash(&f);
	uint64_t seed = 1, bytes = 0;
	uint32_t lens[32];
	kn_eth_pkt pk[32];
	for (int round = 0; round < 10; round++) {
		uint64_t t_before;
		cr_assert_eq(kinet_eth_port_time(e.port, &t_before), 0);
		for (uint32_t i = 0; i < 32; i++) {
			uint32_t plen = (uint32_t)(tu_rand64(&seed) % 1400);
			lens[i] = te_frame(frame_at(&e, i), &f, plen, seed, 0, 0);
			bytes += lens[i];
			kn_ticket_t t;
			cr_assert_eq(
				kn_eth_send(e.tq, frame_at(&e, i), tu_lkey(&e.txb), lens[i], 0, &t),
				0);
		}
		cr_assert_eq(kn_eth_txq_quiet(e.tq), 0);
		cr_assert_eq(recv_n(rq, pk, 32), 32);
		uint64_t t_after;
		cr_assert_eq(kinet_eth_port_time(e.port, &t_after), 0);
		for (uint32_t i = 0; i < 32; i++) {
			cr_assert_eq(pk[i].len, lens[i], "round %d frame %u: %u bytes, sent %u",
				     round, i, pk[i].len, lens[i]);
			cr_assert_eq(memcmp(pk[i].data, frame_at(&e, i), lens[i]), 0,
				     "round %d frame %u differs", round, i);
			cr_assert_eq(pk[i].flags, good_udp4, "flags 0x%x", pk[i].flags);
			cr_assert_eq(pk[i].hash, hash, "hash 0x%x, expected 0x%x", pk[i].hash,
				     hash);
			cr_assert(pk[i].ts_ns >= t_before && pk[i].ts_ns <= t_after);
			cr_assert(pk[i].data >= rq->buf &&
				  pk[i].data + pk[i].len <=
					  rq->buf + (size_t)rq->wqe_cnt * rq->wqe_bytes);
		}
		cr_assert_eq(kn_eth_release(rq, pk[31].ticket + 1), 0);
	}
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.packets, 320);
	cr_assert_eq(c.bytes, bytes);
	cr_assert_eq(c.csum_bad, 0);
	cr_assert_eq(kinet_eth_txq_counters(e.txq, &c), 0);
	cr_assert_eq(c.packets, 320);
	cr_assert_eq(c.bytes, bytes);
	rxq_del(r, fl);
	env_close(&e);
}

/* Microsoft's RSS verification values: the hash the NIC writes is the
 * standard Toeplitz hash. */
Test(eth, rss_hash_is_the_standard_toeplitz_hash)
{
	struct te_flow f;
	memset(&f, 0, sizeof(f));
	const uint8_t s[4] = {66, 9, 149, 187}, d[4] = {161, 142, 100, 80};
	memcpy(f.sip, s, 4);
	memcpy(f.dip, d, 4);
	f.sport = 2794;
	f.dport = 1766;
	cr_assert_eq(te_rss_hash(&f), 0x51ccc178u);
	/* and the NIC's own, on a frame of that flow */
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 8};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	memcpy(f.dmac, e.mac, 6);
	f.proto = 6;
	uint32_t len = te_frame(frame_at(&e, 0), &f, 100, 5, 0, 0);
	send_wait(&e, frame_at(&e, 0), len, 0);
	kn_eth_pkt p;
	cr_assert_eq(recv_n(rq, &p, 1), 1);
	cr_assert_eq(p.hash, 0x51ccc178u, "0x%x", p.hash);
	cr_assert(p.flags & KN_ETH_RX_TCP);
	rxq_del(r, fl);
	env_close(&e);
}

Test(eth, steering_every_field_priority_default_unmatched)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 16};
	kn_eth_rxq *q[5];
	kinet_eth_rxq *r[5];
	kinet_eth_flow *fl[5];
	struct kinet_eth_match m0 = udp_port(5001);
	m0.priority = 0;
	struct kinet_eth_match m1 = {.fields = KINET_ETH_MATCH_IPV4_DST, .priority = 1};
	const uint8_t ip7[4] = {10, 9, 7, 2};
	memcpy(m1.ip_dst, ip7, 4);
	const uint8_t macx[6] = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
	struct kinet_eth_match m2 = {.fields = KINET_ETH_MATCH_DST_MAC, .priority = 2};
	memcpy(m2.dst_mac, macx, 6);
	struct kinet_eth_match m3 = {.fields = KINET_ETH_MATCH_ETHERTYPE, .ethertype = 0x88b5,
				     .priority = 2};
	/* created out of order: the priority decides, not the age */
	r[1] = rxq_new(&e, &ra, &m1, &fl[1], &q[1]);
	r[0] = rxq_new(&e, &ra, &m0, &fl[0], &q[0]);
	r[2] = rxq_new(&e, &ra, &m2, &fl[2], &q[2]);
	r[3] = rxq_new(&e, &ra, &m3, &fl[3], &q[3]);
	r[4] = rxq_new(&e, &ra, NULL, &fl[4], &q[4]);
	/* bad matches */
	kinet_eth_flow *bad;
	struct kinet_eth_match b1 = {.fields = KINET_ETH_MATCH_L4_DST_PORT, .l4_dst_port = 1};
	cr_assert_eq(kinet_eth_flow_create(r[0], &b1, &bad), -EINVAL);
	struct kinet_eth_match b2 = {.fields = KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_IPV6_DST};
	cr_assert_eq(kinet_eth_flow_create(r[0], &b2, &bad), -EINVAL);
	struct kinet_eth_match b3 = {.fields = KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_ETHERTYPE,
				     .ethertype = 0x86dd};
	cr_assert_eq(kinet_eth_flow_create(r[0], &b3, &bad), -EINVAL);
	struct kinet_eth_match b4 = {0};
	cr_assert_eq(kinet_eth_flow_create(r[0], &b4, &bad), -EEXIST);
	cr_assert_eq(kinet_eth_rxq_destroy(r[0]), -EBUSY);

	/* frames and where each must go */
	struct {
		int q;
		uint32_t len;
	} want[8];
	int nw = 0;
	struct te_flow f;
	uint8_t *fr;
	te_flow_v4(&f, 1, 7, 99, 5001); /* UDP 5001 to 10.9.7.2: rule 0 before rule 1 */
	fr = frame_at(&e, nw);
	want[nw].q = 0, want[nw].len = te_frame(fr, &f, 33, 1, 0, 0), nw++;
	te_flow_v4(&f, 1, 7, 99, 6000); /* other port, 10.9.7.2: rule 1 */
	fr = frame_at(&e, nw);
	want[nw].q = 1, want[nw].len = te_frame(fr, &f, 34, 2, 0, 0), nw++;
	te_flow_v4(&f, 1, 8, 99, 6000); /* to MAC x */
	memcpy(f.dmac, macx, 6);
	fr = frame_at(&e, nw);
	want[nw].q = 2, want[nw].len = te_frame(fr, &f, 35, 3, 0, 0), nw++;
	fr = frame_at(&e, nw); /* an EtherType the NIC does not parse */
	want[nw].q = 3, want[nw].len = te_raw_frame(fr, e.mac, 0x88b5, 100, 4), nw++;
	te_flow_v4(&f, 1, 8, 99, 6000); /* TCP elsewhere: the default flow */
	f.proto = 6;
	fr = frame_at(&e, nw);
	want[nw].q = 4, want[nw].len = te_frame(fr, &f, 36, 5, 0, 0), nw++;
	te_flow_v4(&f, 1, 8, 99, 5001); /* IPv6, UDP 5001: rule 0 too */
	f.v6 = 1;
	f.dip[15] = 3;
	fr = frame_at(&e, nw);
	want[nw].q = 0, want[nw].len = te_frame(fr, &f, 37, 6, 0, 0), nw++;
	for (int i = 0; i < nw; i++)
		send_wait(&e, frame_at(&e, (uint32_t)i), want[i].len, 0);
	for (int i = 0; i < nw; i++) {
		kn_eth_pkt p;
		cr_assert_eq(recv_n(q[want[i].q], &p, 1), 1, "frame %d did not reach queue %d", i,
			     want[i].q);
		cr_assert_eq(p.len, want[i].len);
		cr_assert_eq(memcmp(p.data, frame_at(&e, (uint32_t)i), p.len), 0);
		if (i == 3)
			cr_assert_eq(p.flags, KN_ETH_RX_L2_OK, "unknown EtherType: flags 0x%x",
				     p.flags);
		if (i == 5)
			cr_assert_eq(p.flags & (KN_ETH_RX_IPV6 | KN_ETH_RX_UDP | KN_ETH_RX_L4_OK),
				     KN_ETH_RX_IPV6 | KN_ETH_RX_UDP | KN_ETH_RX_L4_OK);
		cr_assert_eq(kn_eth_release(q[want[i].q], p.ticket + 1), 0);
	}
	for (int i = 0; i < 5; i++)
		recv_none(q[i]);
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_rxq_counters(r[3], &c), 0);
	cr_assert_eq(c.no_l3, 1);
	/* without the default flow, the TCP frame is nobody's */
	cr_assert_eq(kinet_eth_flow_destroy(fl[4]), 0);
	fl[4] = NULL;
	send_wait(&e, frame_at(&e, 4), want[4].len, 0);
	cr_assert_eq(kinet_eth_port_counters(e.port, &c), 0);
	cr_assert_eq(c.unmatched, 1);
	recv_none(q[4]);
	for (int i = 0; i < 5; i++)
		rxq_del(r[i], fl[i]);
	env_close(&e);
}

/* A cyclic queue of 4 WQEs through 200 frames: every wrap of the receive
 * queue, its CQ and the 16-bit counters' low bits. */
Test(eth, cyclic_queue_wraps)
{
	struct env e;
	struct kinet_eth_txq_attr ta = {.depth = 8};
	env_open(&e, &ta, 0);
	struct tu_region rb;
	cr_assert_eq(tu_region_alloc(&rb, e.pd, 4 * 256, KINET_ACCESS_LOCAL_WRITE, 9), 0);
	struct kinet_eth_rxq_attr ra = {.depth = 4, .pkt_size = 256, .buf = rb.buf, .mr = rb.mr};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 3, 4, 10, 20);
	uint64_t seed = 3;
	for (uint32_t i = 0; i < 200; i++) {
		uint32_t plen = (uint32_t)(tu_rand64(&seed) % 200);
		uint32_t len = te_frame(frame_at(&e, i), &f, plen, seed, 0, 0);
		send_wait(&e, frame_at(&e, i), len, 0);
		kn_eth_pkt p;
		cr_assert_eq(recv_n(rq, &p, 1), 1, "frame %u", i);
		cr_assert_eq(p.ticket, i);
		cr_assert_eq(p.data, rb.buf + (i % 4) * 256u, "frame %u in the wrong buffer", i);
		cr_assert_eq(p.len, len);
		cr_assert_eq(memcmp(p.data, frame_at(&e, i), len), 0, "frame %u differs", i);
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
	}
	cr_assert(tu_region_canaries_ok(&rb));
	rxq_del(r, fl);
	tu_region_free(&rb);
	env_close(&e);
}

/* A striding queue of 4 WQEs x 8 strides of 128 bytes through 300 frames
 * of 1 to 8 strides: packets in consecutive strides, fillers where a frame
 * does not fit the strides left, WQEs given back only when every packet in
 * them is released, frames over a whole WQE dropped. */
Test(eth, striding_queue_wraps_with_fillers)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct tu_region rb;
	cr_assert_eq(tu_region_alloc(&rb, e.pd, 4 * 1024, KINET_ACCESS_LOCAL_WRITE, 19), 0);
	struct kinet_eth_rxq_attr ra = {.depth = 4,
					.mode = KINET_ETH_RXQ_STRIDING,
					.log_stride = 7,
					.log_strides = 3,
					.buf = rb.buf,
					.mr = rb.mr};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	cr_assert_eq(rq->strides, 8);
	cr_assert_eq(rq->stride_bytes, 128);
	struct te_flow f;
	te_flow_v4(&f, 5, 6, 10, 20);
	uint64_t seed = 7;
	uint32_t sent = 0, fillers_seen = 0;
	uint32_t strides_in_wqe = 0;
	for (uint32_t i = 0; i < 300; i++) {
		uint32_t plen = 20 + (uint32_t)(tu_rand64(&seed) % 950); /* 62 .. 1011 bytes */
		uint32_t len = te_frame(frame_at(&e, i), &f, plen, seed, 0, 0);
		send_wait(&e, frame_at(&e, i), len, 0);
		kn_eth_pkt p;
		cr_assert_eq(recv_n(rq, &p, 1), 1, "frame %u", i);
		cr_assert_eq(p.len, len);
		cr_assert_eq(memcmp(p.data, frame_at(&e, i), len), 0, "frame %u differs", i);
		uint32_t need = (len + 127) / 128;
		if (strides_in_wqe + need > 8) {
			fillers_seen++;
			strides_in_wqe = 0;
		}
		size_t off = (size_t)(p.data - rb.buf);
		cr_assert_eq(off % 1024, strides_in_wqe * 128u,
			     "frame %u at stride %zu, expected %u", i, (off % 1024) / 128,
			     strides_in_wqe);
		cr_assert(off + len <= (off / 1024 + 1) * 1024, "frame %u crosses its WQE", i);
		strides_in_wqe = (strides_in_wqe + need) % 8;
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
		sent++;
	}
	cr_assert_gt(fillers_seen, 10);
	/* a frame larger than a whole WQE: dropped, counted, nothing written */
	struct kinet_eth_counters c0, c1;
	cr_assert_eq(kinet_eth_rxq_counters(r, &c0), 0);
	uint32_t big = te_frame(frame_at(&e, 0), &f, 1100, 1, 0, 0);
	send_wait(&e, frame_at(&e, 0), big, 0);
	recv_none(rq);
	cr_assert_eq(kinet_eth_rxq_counters(r, &c1), 0);
	cr_assert_eq(c1.drops[KINET_ETH_DROP_TOO_LONG], c0.drops[KINET_ETH_DROP_TOO_LONG] + 1);
	cr_assert_eq(c1.packets, sent);
	cr_assert(tu_region_canaries_ok(&rb));
	rxq_del(r, fl);
	tu_region_free(&rb);
	env_close(&e);
}

/* Packets held (not released) keep their WQEs: a striding WQE goes back
 * only once its last packet is released; meanwhile frames find no WQE. */
Test(eth, release_order_and_no_buffer_drops)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 2, .mode = KINET_ETH_RXQ_STRIDING,
					.log_stride = 8, .log_strides = 3};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 5, 6, 10, 20);
	/* 16 frames of one stride fill both WQEs; the 17th finds none */
	for (uint32_t i = 0; i < 17; i++)
		send_wait(&e, frame_at(&e, i), te_frame(frame_at(&e, i), &f, 100, i + 1, 0, 0), 0);
	kn_eth_pkt p[17];
	cr_assert_eq(recv_n(rq, p, 16), 16);
	recv_none(rq);
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.drops[KINET_ETH_DROP_NO_WQE], 1);
	/* releasing 7 of the first WQE's 8 packets gives nothing back */
	cr_assert_eq(kn_eth_release(rq, p[6].ticket + 1), 0);
	cr_assert_eq(rq->st->posted, 2);
	cr_assert_eq(kn_eth_release(rq, p[7].ticket + 1), 0);
	cr_assert_eq(rq->st->posted, 3);
	cr_assert_eq(kn_eth_release(rq, p[15].ticket + 100), -EINVAL);
	/* the packets still held are intact */
	for (uint32_t i = 8; i < 16; i++)
		cr_assert_eq(memcmp(p[i].data, frame_at(&e, i), p[i].len), 0);
	send_wait(&e, frame_at(&e, 20), te_frame(frame_at(&e, 20), &f, 100, 21, 0, 0), 0);
	cr_assert_eq(recv_n(rq, p, 1), 1);
	cr_assert_eq(memcmp(p[0].data, frame_at(&e, 20), p[0].len), 0);
	rxq_del(r, fl);
	env_close(&e);
}

Test(eth, burst_one_reservation_one_doorbell)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 64};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 3, 4);
	kn_eth_frame fr[48];
	for (uint32_t i = 0; i < 48; i++) {
		fr[i].data = frame_at(&e, i);
		fr[i].lkey = tu_lkey(&e.txb);
		fr[i].len = te_frame(frame_at(&e, i), &f, 50 + i * 7, i + 100, 0, 0);
		fr[i].flags = 0;
	}
	/* one frame refused: nothing reserved, nothing posted */
	uint64_t resv = e.tq->q.st->resv;
	uint32_t keep = fr[20].len;
	fr[20].len = 10;
	kn_ticket_t last;
	cr_assert_eq(kn_eth_send_burst(e.tq, fr, 48, &last), -EINVAL);
	cr_assert_eq(e.tq->q.st->resv, resv);
	fr[20].len = keep;
	cr_assert_eq(kn_eth_send_burst(e.tq, fr, 48, &last), 0);
	cr_assert_eq(last, resv + 47);
	/* the doorbell named the last WQE once: record and rung at the end */
	cr_assert_eq(e.tq->q.st->rung, resv + 48);
	cr_assert_eq(kn_be32toh(e.tq->q.dbrec[KN_SND_DBR]) & 0xffff, (resv + 48) & 0xffff);
	cr_assert_eq(kn_eth_txq_wait(e.tq, last), 0);
	kn_eth_pkt p[48];
	cr_assert_eq(recv_n(rq, p, 48), 48);
	for (uint32_t i = 0; i < 48; i++) {
		cr_assert_eq(p[i].len, fr[i].len, "frame %u out of order", i);
		cr_assert_eq(memcmp(p[i].data, fr[i].data, fr[i].len), 0);
	}
	cr_assert_eq(kn_eth_send_burst(e.tq, fr, 0, &last), -EINVAL);
	cr_assert_eq(kn_eth_send_burst(e.tq, fr, e.tq->q.sq_wqe_cnt + 1, &last), -EINVAL);
	rxq_del(r, fl);
	env_close(&e);
}

/* A frame sent at a time leaves no earlier than that time; the queue stays
 * in order (frames behind it wait for it, even one asked for earlier). */
Test(eth, send_at_time_ordering)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 16};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 3, 4);
	uint32_t len[3];
	for (uint32_t i = 0; i < 3; i++)
		len[i] = te_frame(frame_at(&e, i), &f, 60 + i, 40 + i, 0, 0);
	uint64_t t0;
	cr_assert_eq(kinet_eth_port_time(e.port, &t0), 0);
	uint32_t lk = tu_lkey(&e.txb);
	kn_ticket_t ta, tb, tc;
	cr_assert_eq(kn_eth_send_at(e.tq, t0 + 30000000, frame_at(&e, 0), lk, len[0], 0, &ta), 0);
	cr_assert_eq(kn_eth_send(e.tq, frame_at(&e, 1), lk, len[1], 0, &tb), 0);
	cr_assert_eq(kn_eth_send_at(e.tq, t0 + 5000000, frame_at(&e, 2), lk, len[2], 0, &tc), 0);
	cr_assert_eq(tb, ta + 1);
	cr_assert_eq(tc, tb + 2);
	cr_assert_eq(kn_eth_txq_wait(e.tq, tc), 0);
	kn_eth_pkt p[3];
	cr_assert_eq(recv_n(rq, p, 3), 3);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(p[i].len, len[i], "frame %u out of order", i);
		cr_assert_eq(memcmp(p[i].data, frame_at(&e, i), len[i]), 0);
	}
	cr_assert(p[0].ts_ns >= t0 + 30000000, "frame 0 arrived %lld ns before its time",
		  (long long)(t0 + 30000000 - p[0].ts_ns));
	cr_assert(p[1].ts_ns >= p[0].ts_ns && p[2].ts_ns >= p[1].ts_ns);
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_txq_counters(e.txq, &c), 0);
	cr_assert_eq(c.tx_waits, 2);
	cr_assert_eq(c.packets, 3);
	rxq_del(r, fl);
	env_close(&e);
}

Test(eth, checksum_offloads_ipv4_ipv6_udp_tcp)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 16};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	for (int v = 0; v < 4; v++) {
		struct te_flow f;
		te_flow_v4(&f, 1, 2, 3, 4);
		f.proto = (v & 1) ? 6 : 17;
		f.v6 = v >= 2;
		uint8_t ref[2048];
		uint32_t len = te_frame(ref, &f, 301, 50 + (uint64_t)v, 0, 0);
		uint8_t *s = frame_at(&e, (uint32_t)v);
		memcpy(s, ref, len);
		uint32_t l4 = f.v6 ? 54 : 34, at = f.proto == 6 ? 16 : 6;
		if (!f.v6)
			s[24] = s[25] = 0; /* IPv4 header checksum */
		s[l4 + at] = s[l4 + at + 1] = 0;
		send_wait(&e, s, len, KN_ETH_TX_CSUM_L3 | KN_ETH_TX_CSUM_L4);
		kn_eth_pkt p;
		cr_assert_eq(recv_n(rq, &p, 1), 1);
		cr_assert_eq(p.len, len);
		cr_assert_eq(memcmp(p.data, ref, len), 0, "case %d: the NIC's checksums differ", v);
		cr_assert(p.flags & KN_ETH_RX_L4_OK);
		cr_assert(!(p.flags & KN_ETH_RX_CSUM_BAD));
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
	}
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_txq_counters(e.txq, &c), 0);
	cr_assert_eq(c.tx_csum, 4);
	rxq_del(r, fl);
	env_close(&e);
}

Test(eth, inline_headers_and_doorbell_modes)
{
	static const struct {
		uint32_t inl;
		int db;
	} cases[] = {{KN_ETH_L2_INLINE_HEADER_SIZE, KN_DB_GPU},
		     {0, KN_DB_BLUEFLAME},
		     {KN_ETH_L2_INLINE_HEADER_SIZE, KN_DB_CPU_PROXY}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct env e;
		struct kinet_eth_txq_attr ta = {.inline_hdr = cases[k].inl, .db_mode = cases[k].db};
		env_open(&e, &ta, 0);
		cr_assert_eq(e.tq->inline_hdr, cases[k].inl);
		struct kinet_eth_rxq_attr ra = {.depth = 64};
		kinet_eth_flow *fl;
		kn_eth_rxq *rq;
		kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
		struct te_flow f;
		te_flow_v4(&f, 1, 2, 3, 4);
		for (uint32_t i = 0; i < 40; i++) {
			uint32_t len = te_frame(frame_at(&e, i), &f, i * 13, i + 1, 0, 0);
			send_wait(&e, frame_at(&e, i), len, 0);
			kn_eth_pkt p;
			cr_assert_eq(recv_n(rq, &p, 1), 1, "case %zu frame %u", k, i);
			cr_assert_eq(p.len, len);
			cr_assert_eq(memcmp(p.data, frame_at(&e, i), len), 0);
			cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
		}
		/* shorter than the inline header: refused before anything is posted */
		kn_ticket_t t;
		cr_assert_eq(kn_eth_send(e.tq, frame_at(&e, 0), tu_lkey(&e.txb), 13, 0, &t),
			     -EINVAL);
		rxq_del(r, fl);
		env_close(&e);
	}
}

/* Several host threads share one send queue (GPU sharing mode). */
struct shared_arg {
	struct env *e;
	uint32_t per;
};

static int shared_sender(int tid, int n, void *arg)
{
	(void)n;
	struct shared_arg *a = arg;
	struct te_flow f;
	te_flow_v4(&f, 1, 2, (uint16_t)(1000 + tid), 4);
	for (uint32_t i = 0; i < a->per; i++) {
		uint32_t slot = (uint32_t)tid * a->per + i;
		uint8_t *fr = frame_at(a->e, slot);
		uint32_t len = te_frame(fr, &f, 40, slot + 1, 0, 0);
		fr[len - 1] = (uint8_t)i; /* its place in the thread's order (payload) */
		kn_ticket_t t;
		TU_CHECK(kn_eth_send(a->e->tq, fr, tu_lkey(&a->e->txb), len, KN_ETH_TX_CSUM_L4,
				     &t) == 0,
			 "send");
	}
	return 0;
}

Test(eth, send_queue_shared_by_threads)
{
	struct env e;
	struct kinet_eth_txq_attr ta = {.depth = 64, .share = KN_SHARE_GPU};
	env_open(&e, &ta, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 256};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct shared_arg a = {&e, 50};
	cr_assert_eq(kinet_host_exec(4, shared_sender, &a), 0, "%s", tu_fail_msg);
	cr_assert_eq(kn_eth_txq_quiet(e.tq), 0);
	kn_eth_pkt p[200];
	cr_assert_eq(recv_n(rq, p, 200), 200);
	uint32_t next[4] = {0};
	for (uint32_t i = 0; i < 200; i++) {
		uint32_t tid = (uint32_t)(p[i].data[34] << 8 | p[i].data[35]) - 1000;
		cr_assert_lt(tid, 4u);
		cr_assert_eq(p[i].data[p[i].len - 1], (uint8_t)next[tid], "thread %u out of order",
			     tid);
		uint32_t slot = tid * 50 + next[tid]++;
		cr_assert_eq(p[i].flags & KN_ETH_RX_CSUM_BAD, 0);
		/* the frame as sent, but for the UDP checksum the NIC wrote */
		uint8_t *s = frame_at(&e, slot);
		cr_assert_eq(memcmp(p[i].data, s, 40), 0);
		cr_assert_eq(memcmp(p[i].data + 42, s + 42, p[i].len - 42), 0);
	}
	rxq_del(r, fl);
	env_close(&e);
}

/* ---- malformed input --------------------------------------------------------- */

Test(eth, malformed_frames_runt_oversize_too_long_bad_checksums)
{
	struct env e;
	env_open(&e, NULL, 1500);
	struct tu_region rb;
	cr_assert_eq(tu_region_alloc(&rb, e.pd, 8 * 256, KINET_ACCESS_LOCAL_WRITE, 29), 0);
	struct kinet_eth_rxq_attr ra = {.depth = 8, .pkt_size = 256, .buf = rb.buf, .mr = rb.mr};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct kinet_eth_counters c;
	/* a runt: dropped at the port */
	uint8_t runt[13];
	tu_fill_random(runt, sizeof(runt), 5);
	kinet_soft_eth_inject(e.port, runt, sizeof(runt));
	cr_assert_eq(kinet_eth_port_counters(e.port, &c), 0);
	cr_assert_eq(c.drops[KINET_ETH_DROP_RUNT], 1);
	/* over the MTU (1518-byte frames at most): dropped, counted */
	static uint8_t big[1600];
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 3, 4);
	uint32_t blen = te_frame(big, &f, 1600 - 42, 6, 0, 0);
	kinet_soft_eth_inject(e.port, big, blen);
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.drops[KINET_ETH_DROP_OVERSIZE], 1);
	/* larger than the 256-byte buffer: an error CQE consuming the WQE */
	uint32_t len = te_frame(frame_at(&e, 0), &f, 300, 7, 0, 0);
	send_wait(&e, frame_at(&e, 0), len, 0);
	len = te_frame(frame_at(&e, 1), &f, 150, 8, 0, 0);
	send_wait(&e, frame_at(&e, 1), len, 0);
	kn_eth_pkt p;
	cr_assert_eq(recv_n(rq, &p, 1), 1);
	cr_assert_eq(p.ticket, 1, "the error CQE is not a packet");
	cr_assert_eq(p.data, rb.buf + 256, "the next frame takes the next WQE");
	cr_assert_eq(memcmp(p.data, frame_at(&e, 1), len), 0);
	uint32_t synd = 0;
	cr_assert_eq(kn_eth_rxq_errors(rq, &synd), 1);
	cr_assert_eq(synd, KN_SYND_LOCAL_LENGTH_ERR);
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.drops[KINET_ETH_DROP_TOO_LONG], 1);
	/* bad IPv4 header and UDP checksums: delivered, flagged, counted */
	len = te_frame(frame_at(&e, 2), &f, 100, 9, 1, 0);
	send_wait(&e, frame_at(&e, 2), len, 0);
	cr_assert_eq(recv_n(rq, &p, 1), 1);
	cr_assert_eq(memcmp(p.data, frame_at(&e, 2), len), 0);
	cr_assert(!(p.flags & KN_ETH_RX_L3_OK) && (p.flags & KN_ETH_RX_CSUM_BAD));
	len = te_frame(frame_at(&e, 3), &f, 100, 10, 0, 1);
	send_wait(&e, frame_at(&e, 3), len, 0);
	cr_assert_eq(recv_n(rq, &p, 1), 1);
	cr_assert((p.flags & KN_ETH_RX_L3_OK) && !(p.flags & KN_ETH_RX_L4_OK) &&
		  (p.flags & KN_ETH_RX_CSUM_BAD));
	/* an IPv4 header whose total length lies (longer than the frame): not
	 * parsed as IPv4 */
	len = te_frame(frame_at(&e, 4), &f, 100, 11, 0, 0);
	frame_at(&e, 4)[16] = 0x05; /* total length 1280+ */
	send_wait(&e, frame_at(&e, 4), len, 0);
	cr_assert_eq(recv_n(rq, &p, 1), 1);
	cr_assert_eq(memcmp(p.data, frame_at(&e, 4), len), 0);
	cr_assert_eq(p.flags, KN_ETH_RX_L2_OK, "flags 0x%x", p.flags);
	cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.csum_bad, 2);
	cr_assert_eq(c.packets, 4);
	cr_assert(tu_region_canaries_ok(&rb));
	rxq_del(r, fl);
	tu_region_free(&rb);
	env_close(&e);
}

/* The device loop of the examples and docs/ethernet.md: receive what is
 * there, hand each packet to check(), give everything back with
 * kn_eth_release(rq, pk[n - 1].ticket + 1) when a packet came. Returns the
 * packets received (at most want, within 2 s). */
static uint32_t recv_docs_pattern(const kn_eth_rxq *rq, kn_eth_pkt *out, uint32_t want)
{
	uint32_t got = 0;
	uint64_t t0 = kn_now_ns();
	while (got < want && kn_now_ns() - t0 < 2000000000ull) {
		kn_eth_pkt pk[4];
		uint32_t n = 0;
		cr_assert_eq(kn_eth_recv_any(rq, pk, 4, 1000000, &n), 0);
		for (uint32_t i = 0; i < n && got < want; i++)
			out[got++] = pk[i];
		if (n)
			cr_assert_eq(kn_eth_release(rq, pk[n - 1].ticket + 1), 0);
	}
	return got;
}

/* Frames too long for a cyclic queue's buffers consume WQEs with error
 * CQEs. A run of them longer than the queue, received with the documented
 * pattern (which releases only when a packet came), must not wedge the
 * queue: the frames after them arrive, byte for byte. Also with packets
 * held while the errors come, released afterwards. */
Test(eth, cyclic_too_long_frames_do_not_wedge_the_queue)
{
	struct env e;
	env_open(&e, NULL, 1500);
	struct kinet_eth_rxq_attr ra = {.depth = 8, .pkt_size = 256};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 3, 4, 5, 6);
	uint64_t seed = 0x5eed;
	kn_eth_pkt p[8];
	uint32_t too_long = 0;
	/* three queues' worth of frames over the buffer, the receiver polling */
	for (uint32_t i = 0; i < 3 * 8 + 3; i++, too_long++) {
		uint32_t len = te_frame(frame_at(&e, i), &f, 300 + i, tu_rand64(&seed), 0, 0);
		send_wait(&e, frame_at(&e, i), len, 0);
		uint32_t n = 9;
		cr_assert_eq(kn_eth_recv(rq, p, 8, 0, &n), 0);
		cr_assert_eq(n, 0, "an error CQE is not a packet");
	}
	/* then frames that fit: every one arrives intact */
	for (uint32_t i = 0; i < 20; i++) {
		uint8_t *fr = frame_at(&e, 100 + i);
		uint32_t len = te_frame(fr, &f, 1 + (uint32_t)(tu_rand64(&seed) % 200),
					tu_rand64(&seed), 0, 0);
		send_wait(&e, fr, len, 0);
		cr_assert_eq(recv_docs_pattern(rq, p, 1), 1, "frame %u after %u too long lost", i,
			     too_long);
		cr_assert_eq(p[0].len, len);
		cr_assert_eq(memcmp(p[0].data, fr, len), 0, "frame %u differs", i);
	}
	/* a packet held while more too-long frames come, released afterwards */
	uint8_t *fr = frame_at(&e, 200);
	uint32_t len = te_frame(fr, &f, 120, tu_rand64(&seed), 0, 0);
	send_wait(&e, fr, len, 0);
	uint32_t n = 0;
	cr_assert_eq(kn_eth_recv(rq, p, 1, TMO_NS, &n), 0);
	cr_assert_eq(n, 1);
	kn_eth_pkt held = p[0];
	for (uint32_t i = 0; i < 7; i++, too_long++) {
		uint32_t l = te_frame(frame_at(&e, 300 + i), &f, 400, tu_rand64(&seed), 0, 0);
		send_wait(&e, frame_at(&e, 300 + i), l, 0);
		cr_assert_eq(kn_eth_recv(rq, p, 8, 0, &n), 0);
		cr_assert_eq(n, 0);
	}
	cr_assert_eq(memcmp(held.data, fr, len), 0);
	cr_assert_eq(kn_eth_release(rq, held.ticket + 1), 0);
	for (uint32_t i = 0; i < 20; i++) {
		uint8_t *g = frame_at(&e, 400 + i);
		uint32_t l = te_frame(g, &f, 1 + (uint32_t)(tu_rand64(&seed) % 200),
				      tu_rand64(&seed), 0, 0);
		send_wait(&e, g, l, 0);
		cr_assert_eq(recv_docs_pattern(rq, p, 1), 1, "frame %u after the held one lost", i);
		cr_assert_eq(memcmp(p[0].data, g, l), 0, "frame %u differs", i);
	}
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.drops[KINET_ETH_DROP_TOO_LONG], too_long);
	cr_assert_eq(c.drops[KINET_ETH_DROP_NO_WQE], 0);
	cr_assert_eq(c.packets, 41);
	cr_assert_eq(kn_eth_rxq_errors(rq, NULL), too_long);
	rxq_del(r, fl);
	env_close(&e);
}

/* The log, captured: how many messages (lines) contain a string. */
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static char cap_buf[16384];
static void cap_log(int level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	pthread_mutex_lock(&cap_mu);
	size_t l = strlen(cap_buf);
	snprintf(cap_buf + l, sizeof(cap_buf) - l, "%s\n", msg);
	pthread_mutex_unlock(&cap_mu);
}
static void cap_start(void)
{
	cap_buf[0] = 0;
	kinet_log_set_callback(cap_log, NULL);
}
static int cap_count(const char *what)
{
	int n = 0;
	pthread_mutex_lock(&cap_mu);
	for (const char *s = cap_buf; (s = strstr(s, what)); n++) {
		s = strchr(s, '\n'); /* the next message */
		if (!s)
			break;
	}
	pthread_mutex_unlock(&cap_mu);
	return n;
}

/* A bad TCP/UDP checksum is said once per port, at the first, with what
 * fixes the usual cause (a peer leaving checksums to offload); the frames
 * are still delivered flagged and counted. */
Test(eth, bad_checksum_said_once_with_the_fix)
{
	struct env e;
	env_open(&e, NULL, 1500);
	struct kinet_eth_rxq_attr ra = {.depth = 16};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	struct te_flow f;
	te_flow_v4(&f, 7, 8, 9, 10);
	cap_start();
	kn_eth_pkt p;
	for (uint32_t i = 0; i < 2; i++) {
		uint32_t len = te_frame(frame_at(&e, i), &f, 64 + i, 70 + i, 0, 0);
		send_wait(&e, frame_at(&e, i), len, 0);
		cr_assert_eq(recv_n(rq, &p, 1), 1);
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
	}
	cr_assert_eq(cap_count("checksum"), 0, "said of good frames:\n%s", cap_buf);
	for (uint32_t i = 0; i < 4; i++) {
		uint32_t len = te_frame(frame_at(&e, i), &f, 100 + i, 80 + i, 0, 1);
		send_wait(&e, frame_at(&e, i), len, 0);
		cr_assert_eq(recv_n(rq, &p, 1), 1);
		cr_assert(p.flags & KN_ETH_RX_CSUM_BAD);
		cr_assert_eq(memcmp(p.data, frame_at(&e, i), len), 0);
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
	}
	kinet_log_set_callback(NULL, NULL);
	cr_assert_eq(cap_count("checksum"), 1, "not said exactly once:\n%s", cap_buf);
	cr_assert_eq(cap_count("ethtool -K"), 1, "no fix given:\n%s", cap_buf);
	cr_assert(strstr(cap_buf, "tx off"), "%s", cap_buf);
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.csum_bad, 4);
	rxq_del(r, fl);
	env_close(&e);
}

/* An interface that does not exist is said to be so, whatever the driver,
 * with no hint of a fallback that could not help. */
Test(eth, no_such_interface_said_so)
{
	struct env e;
	env_open(&e, NULL, 0);
	const int drivers[] = {KINET_ETH_DRIVER_AUTO, KINET_ETH_DRIVER_XDP,
			       KINET_ETH_DRIVER_PACKET};
	for (int i = 0; i < 3; i++) {
		cap_start();
		kinet_eth_port *p2 = NULL;
		struct kinet_eth_port_attr pa = {.driver = drivers[i], .ifname = "nosuch0"};
		cr_assert_eq(kinet_eth_port_open(e.pd, &pa, &p2), -ENODEV, "driver %d", drivers[i]);
		cr_assert_null(p2);
		kinet_log_set_callback(NULL, NULL);
		cr_assert(strstr(cap_buf, "nosuch0: no such interface"), "driver %d:\n%s",
			  drivers[i], cap_buf);
		cr_assert_null(strstr(cap_buf, "FALLBACK"), "driver %d:\n%s", drivers[i], cap_buf);
		cr_assert_null(strstr(cap_buf, "AF_XDP unavailable"), "driver %d:\n%s", drivers[i],
			       cap_buf);
	}
	env_close(&e);
}

/* Without privileges AF_PACKET cannot be had either: no hint of the
 * fallback, but what is needed. Root drops to nobody for this. */
Test(eth, unprivileged_no_fallback_hint_that_cannot_work)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (to drop its privileges)");
	struct env e;
	env_open(&e, NULL, 0);
	cr_assert_eq(setresgid(65534, 65534, 65534), 0);
	cr_assert_eq(setresuid(65534, 65534, 65534), 0);
	cap_start();
	kinet_eth_port *p2 = NULL;
	struct kinet_eth_port_attr pa = {.ifname = "lo"};
	int rc = kinet_eth_port_open(e.pd, &pa, &p2);
	kinet_log_set_callback(NULL, NULL);
	cr_assert_lt(rc, 0, "a port without privileges");
	cr_assert_null(strstr(cap_buf, "KINET_ETH_FALLBACK=packet would"), "%s", cap_buf);
	cr_assert(strstr(cap_buf, "CAP_NET_RAW"), "%s", cap_buf);
	env_close(&e);
}

/* A receive queue whose WQEs the test writes (raw): a buffer outside its
 * region, or a WQE marked inline, completes with an error CQE. */
Test(eth, malformed_receive_wqes)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct tu_region rb;
	cr_assert_eq(tu_region_alloc(&rb, e.pd, 4096, KINET_ACCESS_LOCAL_WRITE, 39), 0);
	struct kinet_eth_rxq_attr ra = {.depth = 8, .flags = KINET_ETH_RXQ_RAW};
	kinet_eth_rxq *r;
	cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r), 0);
	kn_eth_rxq *dq;
	cr_assert_eq(kinet_eth_rxq_device(r, &dq), -EINVAL);
	struct kinet_eth_match def = {0};
	kinet_eth_flow *fl;
	cr_assert_eq(kinet_eth_flow_create(r, &def, &fl), 0);
	struct kinet_eth_rxq_ring ring;
	cr_assert_eq(kinet_eth_rxq_ring(r, &ring), 0);
	cr_assert_eq(ring.wqe_cnt, 8);
	cr_assert_eq(ring.wqe_size, 16);
	volatile uint32_t *dbr = ring.dbrec;
	kinet_cq *cq = ring.cq;
	struct kn_wqe_data_seg *w = (struct kn_wqe_data_seg *)ring.wq;
	kn_set_data_seg(&w[0], 1024, tu_lkey(&rb), tu_addr(rb.buf) + 3500); /* past the end */
	kn_set_data_seg(&w[1], 1024 | KN_INLINE_SEG, tu_lkey(&rb), tu_addr(rb.buf));
	kn_set_data_seg(&w[2], 1024, 0x12345600, tu_addr(rb.buf)); /* no such key */
	kn_set_data_seg(&w[3], 1024, tu_lkey(&rb), tu_addr(rb.buf) + 1000); /* good */
	/* a byte count of 0: 2 GiB, as the NIC reads it (the frame fits) */
	kn_set_data_seg(&w[4], 0, tu_lkey(&rb), tu_addr(rb.buf) + 2000);
	/* the terminator alone: an empty scatter list (the frame does not fit) */
	kn_set_data_seg(&w[5], 0, KN_INVALID_LKEY, 0);
	__atomic_store_n(&dbr[0], kn_htobe32(6), __ATOMIC_RELEASE);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 3, 4);
	uint32_t len = 0;
	for (uint32_t i = 0; i < 6; i++) {
		len = te_frame(frame_at(&e, i), &f, 700, i + 60, 0, 0);
		send_wait(&e, frame_at(&e, i), len, 0);
	}
	static const uint8_t want[6] = {KN_SYND_LOCAL_PROT_ERR, KN_SYND_LOCAL_QP_OP_ERR,
					KN_SYND_LOCAL_PROT_ERR, 0, 0, KN_SYND_LOCAL_LENGTH_ERR};
	for (int i = 0; i < 6; i++) {
		struct kn_cqe64 c;
		cr_assert_eq(tu_poll(cq, &c, 10000), 0);
		cr_assert_eq(tu_cqe_idx(&c), i);
		if (want[i]) {
			cr_assert_eq(tu_cqe_op(&c), KN_CQE_RESP_ERR, "WQE %d", i);
			cr_assert_eq(tu_cqe_synd(&c), want[i], "WQE %d: syndrome 0x%x", i,
				     tu_cqe_synd(&c));
		} else {
			cr_assert_eq(tu_cqe_op(&c), KN_CQE_RESP_SEND);
			cr_assert_eq(kn_be32toh(c.byte_cnt), len);
		}
	}
	cr_assert_eq(memcmp(rb.buf + 1000, frame_at(&e, 3), len), 0);
	cr_assert_eq(memcmp(rb.buf + 2000, frame_at(&e, 4), len), 0);
	cr_assert(tu_region_canaries_ok(&rb));
	struct kinet_eth_counters cc;
	cr_assert_eq(kinet_eth_rxq_counters(r, &cc), 0);
	cr_assert_eq(cc.drops[KINET_ETH_DROP_PROTECTION], 3);
	cr_assert_eq(cc.drops[KINET_ETH_DROP_TOO_LONG], 1);
	rxq_del(r, fl);
	tu_region_free(&rb);
	env_close(&e);
}

/* A raw send WQE: ctrl + eth segment (ihs inline bytes) + one data segment. */
static void raw_send(uint8_t *w, uint16_t idx, uint32_t qpn, uint32_t ihs, const uint8_t *frame,
		     uint32_t lkey, uint32_t len)
{
	memset(w, 0, 128);
	uint32_t doff = kn_eth_wqe_dseg_offset(ihs);
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, idx, KN_OPCODE_SEND, 0, qpn,
			KN_WQE_CTRL_CQ_UPDATE, (uint8_t)((doff + 16) / 16), 0, 0);
	struct kn_wqe_eth_seg *es = (struct kn_wqe_eth_seg *)(w + 16);
	es->inline_hdr_sz = kn_htobe16((uint16_t)ihs);
	memcpy(w + 30, frame, ihs);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + doff), len - ihs, lkey,
			(uint64_t)(uintptr_t)(frame + ihs));
}

Test(eth, malformed_send_wqes_error_cqe_flush_and_reset)
{
	struct env e;
	struct kinet_eth_txq_attr ta = {.depth = 16};
	env_open(&e, &ta, 1500);
	struct kinet_eth_rxq_attr ra = {.depth = 16};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	kinet_cq *cq = kinet_eth_txq_cq(e.txq);
	uint32_t qpn = e.tq->q.qpn, lk = tu_lkey(&e.txb);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 3, 4);
	uint8_t *fr = frame_at(&e, 0);
	uint32_t len = te_frame(fr, &f, 200, 70, 0, 0);
	enum { IDX, INLINE, LKEY, BOUNDS, RUNT, HUGE, ZERO, OPCODE, MSS, WAITOP, NCASE };
	static const uint8_t synd[NCASE] = {
		KN_SYND_LOCAL_QP_OP_ERR,  KN_SYND_LOCAL_QP_OP_ERR,  KN_SYND_LOCAL_PROT_ERR,
		KN_SYND_LOCAL_PROT_ERR,	  KN_SYND_LOCAL_LENGTH_ERR, KN_SYND_LOCAL_LENGTH_ERR,
		KN_SYND_LOCAL_LENGTH_ERR, KN_SYND_LOCAL_QP_OP_ERR,  KN_SYND_LOCAL_QP_OP_ERR,
		KN_SYND_LOCAL_QP_OP_ERR};
	static const int txe[NCASE] = {
		KINET_ETH_TXE_MALFORMED, KINET_ETH_TXE_MALFORMED, KINET_ETH_TXE_PROTECTION,
		KINET_ETH_TXE_PROTECTION, KINET_ETH_TXE_LENGTH,	   KINET_ETH_TXE_LENGTH,
		KINET_ETH_TXE_LENGTH,	 KINET_ETH_TXE_MALFORMED, KINET_ETH_TXE_MALFORMED,
		KINET_ETH_TXE_MALFORMED};
	uint64_t expect[KINET_ETH_TXE_MAX] = {0};
	for (int k = 0; k < NCASE; k++) {
		uint8_t w[128];
		uint32_t nbb = 1;
		raw_send(w, 0, qpn, 0, fr, lk, len);
		switch (k) {
		case IDX:
			kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 5, KN_OPCODE_SEND, 0, qpn,
					KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
			break;
		case INLINE: /* 200 inline bytes said, one WQEBB there */
			((struct kn_wqe_eth_seg *)(w + 16))->inline_hdr_sz = kn_htobe16(200);
			break;
		case LKEY:
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), len, lk ^ 0x5500,
					tu_addr(fr));
			break;
		case BOUNDS:
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), 1000, lk,
					tu_addr(e.txb.buf) + 512 * SLOT - 100);
			break;
		case RUNT:
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), 10, lk, tu_addr(fr));
			break;
		case HUGE:
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), 1519, lk, tu_addr(fr));
			break;
		case ZERO: /* a byte count of 0 is 2 GiB, as the NIC reads it */
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), 0, lk, tu_addr(fr));
			break;
		case OPCODE:
			kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, 0, KN_OPCODE_RDMA_WRITE, 0,
					qpn, KN_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
			break;
		case MSS:
			((struct kn_wqe_eth_seg *)(w + 16))->mss = kn_htobe16(1400);
			break;
		case WAITOP: {
			kn_prep_eth_wait(e.tq, w, 0, 0);
			((struct kn_wqe_wait_seg *)(w + 16))->operation = kn_htobe32(1);
			break;
		}
		}
		cr_assert_eq(kinet_eth_txq_post_raw(e.txq, w, nbb), 0, "case %d", k);
		/* a good WQE behind it: flushed */
		raw_send(w, 1, qpn, 0, fr, lk, len);
		cr_assert_eq(kinet_eth_txq_post_raw(e.txq, w, 1), 1);
		struct kn_cqe64 c;
		cr_assert_eq(tu_poll(cq, &c, 10000), 0);
		cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ_ERR, "case %d: opcode %u", k, tu_cqe_op(&c));
		cr_assert_eq(tu_cqe_synd(&c), synd[k], "case %d: syndrome 0x%x", k,
			     tu_cqe_synd(&c));
		cr_assert_eq(tu_cqe_idx(&c), 0);
		cr_assert_eq(tu_poll(cq, &c, 10000), 0);
		cr_assert_eq(tu_cqe_synd(&c), KN_SYND_WR_FLUSH_ERR);
		cr_assert_eq(tu_cqe_idx(&c), 1);
		cr_assert_eq(kinet_eth_txq_in_error(e.txq), 1);
		struct kinet_eth_counters cc;
		cr_assert_eq(kinet_eth_txq_counters(e.txq, &cc), 0);
		expect[txe[k]]++;
		for (int x = 0; x < KINET_ETH_TXE_FLUSHED; x++)
			cr_assert_eq(cc.tx_errors[x], expect[x], "case %d: counter %d", k, x);
		cr_assert_eq(cc.tx_errors[KINET_ETH_TXE_FLUSHED], (uint64_t)k + 1);
		recv_none(rq);
		/* recovery: the queue is ready and empty, and sends */
		cr_assert_eq(kinet_eth_txq_reset(e.txq), 0);
		cr_assert_eq(kinet_eth_txq_in_error(e.txq), 0);
		raw_send(w, 0, qpn, k & 1 ? KN_ETH_L2_INLINE_HEADER_SIZE : 0, fr, lk, len);
		cr_assert_eq(kinet_eth_txq_post_raw(e.txq, w, 1), 0);
		cr_assert_eq(tu_poll(cq, &c, 10000), 0);
		cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ, "case %d: after the reset", k);
		cr_assert_eq(kn_be32toh(c.byte_cnt), len);
		kn_eth_pkt p;
		cr_assert_eq(recv_n(rq, &p, 1), 1);
		cr_assert_eq(p.len, len);
		cr_assert_eq(memcmp(p.data, fr, len), 0);
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
		cr_assert_eq(kinet_eth_txq_reset(e.txq), 0);
	}
	cr_assert(tu_region_canaries_ok(&e.txb));
	rxq_del(r, fl);
	env_close(&e);
}

Test(eth, bad_arguments)
{
	struct env e;
	env_open(&e, NULL, 0);
	kinet_eth_rxq *r;
	kinet_eth_txq *t;
	struct kinet_eth_rxq_attr ra = {.pkt_size = 100};
	cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r), -EINVAL);
	struct kinet_eth_rxq_attr rb = {.mode = KINET_ETH_RXQ_STRIDING, .log_stride = 5};
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rb, &r), -EINVAL);
	struct kinet_eth_rxq_attr rc = {.depth = 40000};
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rc, &r), -EINVAL);
	/* a buffer outside its region: one WQE before the start, or an end that
	 * wraps past 2^64 (its end, wrapped, lands inside) */
	struct kinet_eth_rxq_attr rd = {
		.depth = 16, .pkt_size = SLOT, .buf = e.txb.buf - SLOT, .mr = e.txb.mr};
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rd, &r), -EINVAL);
	cr_assert_null(r);
	rd.buf = (void *)(uintptr_t)(UINTPTR_MAX - SLOT + 1);
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rd, &r), -EINVAL);
	rd.buf = e.txb.buf + e.txb.len; /* empty from there */
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rd, &r), -EINVAL);
	rd.buf = e.txb.buf + e.txb.len - 16 * SLOT + 64; /* 64 bytes short */
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rd, &r), -EINVAL);
	rd.buf = e.txb.buf + e.txb.len - 16 * SLOT; /* exactly its end */
	cr_assert_eq(kinet_eth_rxq_create(e.port, &rd, &r), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r), 0);
	struct kinet_eth_txq_attr ta = {.inline_hdr = 7};
	cr_assert_eq(kinet_eth_txq_create(e.port, &ta, &t), -EINVAL);
	kinet_eth_port *p2;
	struct kinet_eth_port_attr pa = {.driver = KINET_ETH_DRIVER_XDP,
					 .ifname = "kn-no-such-if"};
	cr_assert_lt(kinet_eth_port_open(e.pd, &pa, &p2), 0);
	struct kinet_eth_port_attr pb = {.driver = KINET_ETH_DRIVER_PACKET};
	cr_assert_eq(kinet_eth_port_open(e.pd, &pb, &p2), -EINVAL);
	cr_assert_eq(kinet_eth_port_close(e.port), -EBUSY);
	cr_assert_eq(kinet_pd_free(e.pd), -EBUSY);
	/* device calls refuse before posting anything */
	kn_ticket_t tk;
	cr_assert_eq(kn_eth_send(e.tq, e.txb.buf, tu_lkey(&e.txb), 1519 + 4, 0, &tk), -EINVAL);
	cr_assert_eq(kn_eth_send(e.tq, e.txb.buf, tu_lkey(&e.txb), 60, 0x80, &tk), -EINVAL);
	cr_assert_eq(e.tq->q.st->resv, 0);
	env_close(&e);
}

/* ---- semaphore rings ------------------------------------------------------------ */

/* Two host-executor threads as two kernels: the receiver hands each batch of
 * packets to the worker through a semaphore ring (pointers, lengths, the
 * last ticket), the worker checks every packet against what was sent and
 * marks the item done, the receiver gives the buffers back in order once
 * their item is done. */
struct batch {
	uint32_t n, rsvd;
	uint64_t last;
	uint8_t *data[8];
	uint32_t len[8];
};

struct sem_arg {
	struct env *e;
	const kn_eth_rxq *rq;
	const kn_sem *sem;
	uint32_t total;
	uint32_t checked;
	volatile int stop; /* set by whichever side failed: the others end too */
	uint32_t slow_us;  /* the worker's time per item */
};

/* Every wait in this test is bounded: a side that fails says so and the
 * others stop, so a failure is a message, never a hang. */
#define SEM_WAIT_NS 30000000000ull

/* Hands the oldest item's receive buffers back once the worker is done with
 * it, and frees the item. */
static int sem_reclaim(struct sem_arg *a, uint32_t oldest)
{
	const kn_sem *s = a->sem;
	struct batch *b = kn_sem_item(s, oldest);
	TU_CHECK(kn_eth_release(a->rq, b->last + 1) == 0, "release");
	kn_sem_set(s, oldest, KN_SEM_FREE);
	return 0;
}

static int sem_receiver(struct sem_arg *a)
{
	const kn_sem *s = a->sem;
	uint32_t got = 0, item = 0, oldest = 0;
	while (got < a->total) {
		TU_CHECK(!a->stop, "the worker failed");
		/* reclaim done items in order: their buffers go back */
		while (oldest < item && kn_sem_get(s, oldest) == KN_SEM_DONE) {
			int rc = sem_reclaim(a, oldest);
			if (rc)
				return rc;
			oldest++;
		}
		if (item - oldest == s->count) {
			/* the ring is full: the worker frees the oldest item */
			TU_CHECK(kn_sem_wait(s, oldest, KN_SEM_DONE, SEM_WAIT_NS) == 0,
				 "item %u not done in 30 s (ring full)", oldest);
			continue;
		}
		kn_eth_pkt pk[8];
		uint32_t k = 0;
		TU_CHECK(kn_eth_recv(a->rq, pk, 8, 1000000, &k) == 0, "recv");
		if (!k)
			continue;
		TU_CHECK(kn_sem_get(s, item) == KN_SEM_FREE, "item %u not free", item);
		struct batch *b = kn_sem_item(s, item);
		b->n = k;
		b->last = pk[k - 1].ticket;
		for (uint32_t i = 0; i < k; i++) {
			b->data[i] = pk[i].data;
			b->len[i] = pk[i].len;
		}
		kn_sem_set(s, item, KN_SEM_READY);
		item++;
		got += k;
	}
	/* the last items may still be with the worker, the ring full: the item
	 * after them shares a slot with the oldest, so they are reclaimed
	 * before the end is said there */
	while (oldest < item) {
		TU_CHECK(kn_sem_wait(s, oldest, KN_SEM_DONE, SEM_WAIT_NS) == 0,
			 "item %u not done in 30 s (end)", oldest);
		int rc = sem_reclaim(a, oldest);
		if (rc)
			return rc;
		oldest++;
	}
	TU_CHECK(kn_sem_get(s, item) == KN_SEM_FREE, "end item %u not free", item);
	kn_sem_set(s, item, KN_SEM_EXIT);
	return 0;
}

static int sem_worker(struct sem_arg *a)
{
	const kn_sem *s = a->sem;
	for (uint32_t item = 0;; item++) {
		uint64_t t0 = kn_now_ns();
		for (;;) {
			uint32_t st = kn_sem_get(s, item);
			if (st == KN_SEM_READY)
				break;
			if (st == KN_SEM_EXIT)
				return 0;
			TU_CHECK(!a->stop, "the receiver failed");
			TU_CHECK(kn_now_ns() - t0 < SEM_WAIT_NS, "item %u not ready in 30 s", item);
			KN_PAUSE();
		}
		if (a->slow_us)
			usleep(a->slow_us);
		struct batch *b = kn_sem_item(s, item);
		for (uint32_t i = 0; i < b->n; i++) {
			/* the frame's number, the first payload byte */
			uint32_t idx = b->data[i][14 + 20 + 8];
			TU_CHECK(idx == a->checked % 256, "frame %u out of order (%u)", a->checked,
				 idx);
			TU_CHECK(memcmp(b->data[i], frame_at(a->e, a->checked), b->len[i]) == 0,
				 "frame %u differs", a->checked);
			a->checked++;
		}
		kn_sem_set(s, item, KN_SEM_DONE);
	}
}

static int sem_fn(int tid, int n, void *arg)
{
	(void)n;
	struct sem_arg *a = arg;
	int rc = tid == 0 ? sem_receiver(a) : sem_worker(a);
	if (rc)
		a->stop = 1;
	return rc;
}

/* The receiver and the worker on two host-executor threads. */
static void *sem_threads(void *arg)
{
	struct run {
		struct sem_arg *a;
		int rc;
	} *ru = arg;
	ru->rc = kinet_host_exec(2, sem_fn, ru->a);
	return NULL;
}

/* A slow worker keeps the ring full, to the last item. */
static void sem_case(uint32_t slow_us)
{
	struct env e;
	env_open(&e, NULL, 0);
	struct kinet_eth_rxq_attr ra = {.depth = 32};
	kinet_eth_flow *fl;
	kn_eth_rxq *rq;
	kinet_eth_rxq *r = rxq_new(&e, &ra, NULL, &fl, &rq);
	kinet_sem *sem, *bad;
	kn_sem *ds;
	cr_assert_eq(kinet_sem_create(e.ctx, 4, sizeof(struct batch), &sem), 0);
	cr_assert_eq(kinet_sem_device(sem, &ds), 0);
	cr_assert_eq(ds->count, 4);
	cr_assert_eq(kinet_sem_create(e.ctx, 0, 8, &bad), -EINVAL);
	cr_assert_eq(kinet_sem_create(e.ctx, 4, 5000, &bad), -EINVAL);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 3, 4);
	uint32_t len[200];
	for (uint32_t i = 0; i < 200; i++) {
		uint8_t *fr = frame_at(&e, i);
		len[i] = te_frame(fr, &f, 20 + i, i + 1, 0, 0);
		/* after the checksum: the receiver flags it, no matter */
		fr[14 + 20 + 8] = (uint8_t)i;
	}
	struct sem_arg a = {&e, rq, ds, 200, 0, 0, slow_us};
	pthread_t th;
	struct run {
		struct sem_arg *a;
		int rc;
	} ru = {&a, -1};
	cr_assert_eq(pthread_create(&th, NULL, sem_threads, &ru), 0);
	/* this thread sends, never more than the receive queue holds */
	for (uint32_t i = 0; i < 200 && !a.stop; i++) {
		while (i - KN_LOAD64(&rq->st->released) >= 32 && !a.stop)
			KN_PAUSE();
		if (!a.stop)
			send_wait(&e, frame_at(&e, i), len[i], 0);
	}
	pthread_join(th, NULL);
	cr_assert_eq(ru.rc, 0, "%s", tu_fail_msg);
	cr_assert_eq(a.checked, 200);
	struct kinet_eth_counters c;
	cr_assert_eq(kinet_eth_rxq_counters(r, &c), 0);
	cr_assert_eq(c.drops[KINET_ETH_DROP_NO_WQE], 0);
	cr_assert_eq(kinet_sem_destroy(sem), 0);
	rxq_del(r, fl);
	env_close(&e);
}

Test(eth, semaphore_ring_hands_batches_between_threads)
{
	sem_case(0);
}

/* The receiver has the last batches in a full ring when it is done: it
 * reclaims them before it says the end in the slot the oldest shares. */
Test(eth, semaphore_ring_ends_with_the_ring_full)
{
	sem_case(2000);
}
