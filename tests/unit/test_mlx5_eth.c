/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw Ethernet on the mlx5 backend, without a ConnectX NIC: the function
 * table is the emulated rdma-core of emu.c, whose raw packet QPs, receive
 * WQs, indirection tables, hashing QPs and flow rules are the software
 * NIC's Ethernet queues on a loopback port. The backend builds its queues
 * with verbs and mlx5dv exactly as on hardware, the unchanged device code
 * sends and receives, frames are checked byte for byte. Also copy queues on
 * the mlx5 backend (a loopback RC QP), and what the emulation refuses.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "kinet_config.h"
#include <kinet/eth.h>
#include <kinet/dma.h>
#include <kinet/device_eth.h>
#include <kinet/device_dma.h>
#include "../util/testutil.h"
#include "../util/ethutil.h"

#if KINET_HAVE_RDMA_HEADERS
#include "nic/mlx5/ops.h"
#include "nic/mlx5/mlx5.h"

#define SLOT 2048u

static void emulate(int link_layer)
{
	struct kinet_mlx5_emu_cfg c = {
		.ndev = 1,
		.link_layer = link_layer,
		.devx = 1,
		.max_qp_wr = 32768,
	};
	kinet_mlx5_emu_set_cfg(&c);
	kinet_mlx5_set_ops(kinet_mlx5_emu_ops());
	kinet_mlx5_emu_calls_reset();
}

struct env {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_eth_port *port;
	struct kinet_eth_port_info info;
	kinet_eth_txq *txq;
	kn_eth_txq *tq;
	struct tu_region txb;
};

static void env_open(struct env *e)
{
	memset(e, 0, sizeof(*e));
	emulate(IBV_LINK_LAYER_ETHERNET);
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	cr_assert_eq(kinet_open(&ca, &e->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(e->ctx, &e->pd), 0);
	struct kinet_eth_port_attr pa = {0};
	cr_assert_eq(kinet_eth_port_open(e->pd, &pa, &e->port), 0);
	cr_assert_eq(kinet_eth_port_info(e->port, &e->info), 0);
	cr_assert_eq(e->info.driver, KINET_ETH_DRIVER_MLX5);
	cr_assert_str_eq(e->info.ifname, "mlx5_0:1");
	/* GID 0 of the emulated device is fe80::0202:c9ff:fe00:1: MAC 00:02:c9:00:00:01 */
	static const uint8_t mac[6] = {0x00, 0x02, 0xc9, 0x00, 0x00, 0x01};
	cr_assert_arr_eq(e->info.mac, mac, 6);
	cr_assert_eq(kinet_eth_txq_create(e->port, NULL, &e->txq), 0);
	cr_assert_eq(kinet_eth_txq_device(e->txq, &e->tq), 0);
	cr_assert_eq(e->tq->inline_hdr, KN_ETH_L2_INLINE_HEADER_SIZE, "every ConnectX takes 18");
	cr_assert_eq(e->tq->q.backend, KINET_BACKEND_MLX5);
	cr_assert_eq(e->tq->q.flags & KN_QP_DB_UNORDERED, 0, "hardware doorbell order");
	cr_assert_eq(tu_region_alloc(&e->txb, e->pd, 256 * SLOT, KINET_ACCESS_LOCAL_WRITE, 21), 0);
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
	kinet_mlx5_set_ops(NULL);
}

static uint8_t *frame_at(struct env *e, uint32_t i)
{
	return e->txb.buf + (size_t)(i % 256) * SLOT;
}

static uint32_t recv_n(const kn_eth_rxq *rq, kn_eth_pkt *pk, uint32_t n)
{
	uint32_t got = 0;
	uint64_t t0 = kn_now_ns();
	while (got < n && kn_now_ns() - t0 < 10000000000ull) {
		uint32_t k = 0;
		cr_assert_eq(kn_eth_recv(rq, pk + got, n - got, 1000000, &k), 0);
		got += k;
	}
	return got;
}

static void send_wait(struct env *e, const void *f, uint32_t len)
{
	kn_ticket_t t;
	cr_assert_eq(kn_eth_send(e->tq, f, tu_lkey(&e->txb), len, 0, &t), 0);
	cr_assert_eq(kn_eth_txq_wait(e->tq, t), 0);
}

static void round_trip(struct env *e, const kn_eth_rxq *rq, uint32_t count, uint32_t maxp,
		       uint16_t dport, uint64_t seed)
{
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 1000, dport);
	memcpy(f.dmac, e->info.mac, 6);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t len = te_frame(frame_at(e, i), &f,
					20 + (uint32_t)(tu_rand64(&seed) % maxp), seed, 0, 0);
		send_wait(e, frame_at(e, i), len);
		kn_eth_pkt p;
		cr_assert_eq(recv_n(rq, &p, 1), 1, "frame %u", i);
		cr_assert_eq(p.len, len);
		cr_assert_eq(memcmp(p.data, frame_at(e, i), len), 0, "frame %u differs", i);
		cr_assert_eq(p.flags & KN_ETH_RX_CSUM_BAD, 0);
		cr_assert(p.flags & KN_ETH_RX_UDP);
		cr_assert_eq(kn_eth_release(rq, p.ticket + 1), 0);
	}
}

Test(mlx5_eth, raw_packet_queues_cyclic_and_striding)
{
	struct env e;
	env_open(&e);
	struct kinet_eth_rxq_attr ra = {.depth = 16, .pkt_size = 2048};
	kinet_eth_rxq *r;
	kn_eth_rxq *rq;
	cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r), 0);
	cr_assert_eq(kinet_eth_rxq_device(r, &rq), 0);
	struct kinet_eth_match m = {.fields =
					    KINET_ETH_MATCH_IP_PROTO | KINET_ETH_MATCH_L4_DST_PORT,
				    .ip_proto = 17,
				    .l4_dst_port = 7000};
	kinet_eth_flow *fl;
	cr_assert_eq(kinet_eth_flow_create(r, &m, &fl), 0);
	cr_assert_eq(kinet_mlx5_emu_calls("create_wq"), 1);
	cr_assert_eq(kinet_mlx5_emu_calls("create_rwq_ind_table"), 1);
	cr_assert_eq(kinet_mlx5_emu_calls("create_qp_ex"), 1);
	cr_assert_eq(kinet_mlx5_emu_calls("create_flow"), 2, "UDP, either IP version: two rules");
	round_trip(&e, rq, 100, 1400, 7000, 5);
	/* striding: 4 WQEs of 8 strides of 256 bytes, through many wraps */
	struct kinet_eth_rxq_attr sa = {.depth = 4,
					.mode = KINET_ETH_RXQ_STRIDING,
					.log_stride = 8,
					.log_strides = 3};
	kinet_eth_rxq *r2;
	kn_eth_rxq *rq2;
	cr_assert_eq(kinet_eth_rxq_create(e.port, &sa, &r2), 0);
	cr_assert_eq(kinet_eth_rxq_device(r2, &rq2), 0);
	cr_assert_eq(rq2->wqe_size, 32);
	struct kinet_eth_match m2 = m;
	m2.l4_dst_port = 7001;
	kinet_eth_flow *fl2;
	cr_assert_eq(kinet_eth_flow_create(r2, &m2, &fl2), 0);
	round_trip(&e, rq2, 200, 1450, 7001, 6);
	cr_assert_eq(kinet_eth_flow_destroy(fl2), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r2), 0);
	cr_assert_eq(kinet_eth_flow_destroy(fl), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r), 0);
	env_close(&e);
}

/* The match written as verbs flow specs, read back by the emulation:
 * every field, a protocol without an IP version (two rules), the default. */
Test(mlx5_eth, flow_rules_every_field)
{
	struct env e;
	env_open(&e);
	struct kinet_eth_rxq_attr ra = {.depth = 8};
	kinet_eth_rxq *r[4];
	kn_eth_rxq *q[4];
	kinet_eth_flow *fl[4];
	struct kinet_eth_match ms[4];
	memset(ms, 0, sizeof(ms));
	ms[0].fields =
		KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_IP_PROTO | KINET_ETH_MATCH_L4_DST_PORT;
	const uint8_t ip[4] = {10, 9, 2, 2};
	memcpy(ms[0].ip_dst, ip, 4);
	ms[0].ip_proto = 17;
	ms[0].l4_dst_port = 53;
	ms[1].fields = KINET_ETH_MATCH_IP_PROTO; /* ICMP, whichever IP version */
	ms[1].ip_proto = 1;
	ms[1].priority = 1;
	ms[2].fields = KINET_ETH_MATCH_DST_MAC | KINET_ETH_MATCH_ETHERTYPE;
	memcpy(ms[2].dst_mac, e.info.mac, 6);
	ms[2].ethertype = 0x88b5;
	ms[2].priority = 2;
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r[i]), 0);
		cr_assert_eq(kinet_eth_rxq_device(r[i], &q[i]), 0);
		cr_assert_eq(kinet_eth_flow_create(r[i], &ms[i], &fl[i]), 0, "flow %d", i);
	}
	cr_assert_eq(kinet_mlx5_emu_calls("create_flow"), 5, "the ICMP match takes two rules");
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 9, 53);
	memcpy(f.dmac, e.info.mac, 6);
	uint32_t len[4];
	len[0] = te_frame(frame_at(&e, 0), &f, 40, 1, 0, 0); /* UDP 10.9.2.2:53 -> 0 */
	uint8_t *ic = frame_at(&e, 1);                     /* ICMP -> 1 */
	len[1] = te_frame(ic, &f, 40, 2, 0, 0);
	ic[23] = 1;
	len[2] = te_raw_frame(frame_at(&e, 2), e.info.mac, 0x88b5, 60, 3); /* -> 2 */
	f.dport = 54;
	len[3] = te_frame(frame_at(&e, 3), &f, 40, 4, 0, 0); /* nobody's rule: default -> 3 */
	for (int i = 0; i < 4; i++)
		send_wait(&e, frame_at(&e, (uint32_t)i), len[i]);
	for (int i = 0; i < 4; i++) {
		kn_eth_pkt p;
		cr_assert_eq(recv_n(q[i], &p, 1), 1, "queue %d", i);
		cr_assert_eq(p.len, len[i]);
		cr_assert_eq(memcmp(p.data, frame_at(&e, (uint32_t)i), len[i]), 0);
		uint32_t k = 1;
		cr_assert_eq(kn_eth_recv(q[i], &p, 1, 0, &k), 0);
		cr_assert_eq(k, 0, "queue %d got a second frame", i);
	}
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(kinet_eth_flow_destroy(fl[i]), 0);
		cr_assert_eq(kinet_eth_rxq_destroy(r[i]), 0);
	}
	env_close(&e);
}

Test(mlx5_eth, malformed_raw_wqe_error_cqe_and_reset)
{
	struct env e;
	env_open(&e);
	struct kinet_eth_rxq_attr ra = {.depth = 8};
	kinet_eth_rxq *r;
	kn_eth_rxq *rq;
	cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r), 0);
	cr_assert_eq(kinet_eth_rxq_device(r, &rq), 0);
	struct kinet_eth_match def = {0};
	kinet_eth_flow *fl;
	cr_assert_eq(kinet_eth_flow_create(r, &def, &fl), 0);
	/* a send WQE whose data segment names a key that does not exist */
	uint8_t w[64];
	memset(w, 0, sizeof(w));
	kn_eth_txq bad = *e.tq;
	cr_assert_eq(
		kn_prep_eth_send(&bad, w, 0, frame_at(&e, 0), tu_lkey(&e.txb) ^ 0x3300, 100, 0), 0);
	cr_assert_eq(kinet_eth_txq_post_raw(e.txq, w, 1), 0);
	struct kn_cqe64 c;
	cr_assert_eq(tu_poll(kinet_eth_txq_cq(e.txq), &c, 10000), 0);
	cr_assert_eq(tu_cqe_op(&c), KN_CQE_REQ_ERR);
	cr_assert_eq(tu_cqe_synd(&c), KN_SYND_LOCAL_PROT_ERR);
	cr_assert_eq(kinet_eth_txq_counters(e.txq, &(struct kinet_eth_counters){0}), -EOPNOTSUPP);
	cr_assert_eq(kinet_eth_flow_destroy(fl), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r), 0);
	env_close(&e);
}

/* What the emulation checks, asked directly: verbs calls kinet never makes. */
Test(mlx5_eth, emulation_refuses_what_hardware_would)
{
	emulate(IBV_LINK_LAYER_ETHERNET);
	const struct kinet_mlx5_ops *o = kinet_mlx5_emu_ops();
	int n = 0;
	struct ibv_device **l = o->get_device_list(&n);
	cr_assert_eq(n, 1);
	struct ibv_context *ib = o->open_device(l[0]);
	cr_assert_not_null(ib);
	struct ibv_pd *pd = o->alloc_pd(ib);
	struct ibv_cq *cq = o->create_cq(ib, 63, NULL, NULL, 0);
	cr_assert(pd && cq);
	/* a raw packet QP with a receive queue: not here (a WQ receives) */
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET};
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	cr_assert_null(o->create_qp(pd, &ia));
	/* striding beyond the device's limits */
	struct ibv_wq_init_attr wa = {.wq_type = IBV_WQT_RQ, .max_wr = 8, .max_sge = 1, .pd = pd,
				      .cq = cq};
	struct mlx5dv_wq_init_attr dv = {.comp_mask = MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ};
	dv.striding_rq_attrs.single_stride_log_num_of_bytes = 5;
	dv.striding_rq_attrs.single_wqe_log_num_of_strides = 6;
	cr_assert_null(o->mlx5dv_create_wq(ib, &wa, &dv));
	/* a good WQ, a table, a hashing QP */
	struct ibv_wq *wq = o->create_wq(ib, &wa);
	cr_assert_not_null(wq);
	struct ibv_rwq_ind_table_init_attr ta = {.log_ind_tbl_size = 1, .ind_tbl = &wq};
	cr_assert_null(o->create_rwq_ind_table(ib, &ta), "tables of one WQ only");
	ta.log_ind_tbl_size = 0;
	struct ibv_rwq_ind_table *ind = o->create_rwq_ind_table(ib, &ta);
	cr_assert_not_null(ind);
	uint8_t key[40] = {1};
	struct ibv_qp_init_attr_ex qa = {.qp_type = IBV_QPT_RAW_PACKET,
					 .comp_mask = IBV_QP_INIT_ATTR_PD |
						      IBV_QP_INIT_ATTR_IND_TABLE |
						      IBV_QP_INIT_ATTR_RX_HASH,
					 .pd = pd,
					 .rwq_ind_tbl = ind};
	qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
	qa.rx_hash_conf.rx_hash_key_len = 40;
	qa.rx_hash_conf.rx_hash_key = key;
	qa.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4;
	cr_assert_null(o->create_qp_ex(ib, &qa), "another RSS key");
	static uint8_t std[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
				  0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
				  0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
				  0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
	qa.rx_hash_conf.rx_hash_key = std;
	struct ibv_qp *rss = o->create_qp_ex(ib, &qa);
	cr_assert_not_null(rss);
	/* flow rules: a partial mask, a spec of the wrong size, L4 without L3 */
	struct {
		struct ibv_flow_attr a;
		struct ibv_flow_spec_ipv4 ip;
		struct ibv_flow_spec_tcp_udp udp;
	} fr; /* every part 4-aligned: no padding between them */
	memset(&fr, 0, sizeof(fr));
	fr.a.type = IBV_FLOW_ATTR_NORMAL;
	fr.a.port = 1;
	fr.a.size = sizeof(fr);
	fr.a.num_of_specs = 2;
	fr.ip.type = IBV_FLOW_SPEC_IPV4;
	fr.ip.size = sizeof(fr.ip);
	fr.ip.mask.dst_ip = 0x00ffffff; /* a /24 */
	fr.udp.type = IBV_FLOW_SPEC_UDP;
	fr.udp.size = sizeof(fr.udp);
	cr_assert_null(o->create_flow(rss, &fr.a));
	fr.ip.mask.dst_ip = 0xffffffff;
	fr.ip.size = 4;
	cr_assert_null(o->create_flow(rss, &fr.a));
	fr.ip.size = sizeof(fr.ip);
	fr.udp.mask.src_port = 0xffff;
	cr_assert_null(o->create_flow(rss, &fr.a), "source ports are not matched");
	fr.udp.mask.src_port = 0;
	fr.a.size = sizeof(fr) - 2;
	cr_assert_null(o->create_flow(rss, &fr.a));
	fr.a.size = sizeof(fr);
	struct ibv_flow *good = o->create_flow(rss, &fr.a);
	cr_assert_not_null(good);
	cr_assert_eq(o->destroy_flow(good), 0);
	cr_assert_eq(o->destroy_qp(rss), 0);
	cr_assert_eq(o->destroy_rwq_ind_table(ind), 0);
	cr_assert_eq(o->destroy_wq(wq), 0);
	cr_assert_eq(o->destroy_cq(cq), 0);
	cr_assert_eq(o->dealloc_pd(pd), 0);
	cr_assert_eq(o->close_device(ib), 0);
	o->free_device_list(l);
	kinet_mlx5_set_ops(NULL);
}

Test(mlx5_eth, infiniband_port_refused)
{
	emulate(IBV_LINK_LAYER_INFINIBAND);
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	kinet_eth_port *p;
	struct kinet_eth_port_attr pa = {0};
	cr_assert_eq(kinet_eth_port_open(pd, &pa, &p), -EOPNOTSUPP);
	struct kinet_eth_port_attr pl = {.driver = KINET_ETH_DRIVER_LOOPBACK};
	cr_assert_eq(kinet_eth_port_open(pd, &pl, &p), -EINVAL);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
	kinet_mlx5_set_ops(NULL);
}

/* A copy queue on the mlx5 backend: a loopback RC QP on the (emulated) NIC. */
Test(mlx5_eth, dma_copies_on_a_loopback_qp)
{
	emulate(IBV_LINK_LAYER_ETHERNET);
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca = {.backend = KINET_BACKEND_MLX5};
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	kinet_dma *dma;
	kn_dma *d;
	cr_assert_eq(kinet_dma_create(pd, NULL, &dma), 0);
	cr_assert_eq(kinet_dma_device(dma, &d), 0);
	cr_assert_eq(d->q.backend, KINET_BACKEND_MLX5);
	struct tu_region src, dst;
	cr_assert_eq(tu_region_alloc(&src, pd, 1 << 20, KINET_ACCESS_LOCAL_WRITE, 3), 0);
	cr_assert_eq(tu_region_alloc(&dst, pd, 1 << 20, KINET_ACCESS_ALL, 4), 0);
	uint64_t seed = 8;
	for (int i = 0; i < 20; i++) {
		uint32_t n = 1 + (uint32_t)(tu_rand64(&seed) % (1 << 19));
		uint32_t so = (uint32_t)(tu_rand64(&seed) % ((1 << 20) - n));
		kn_ticket_t t;
		cr_assert_eq(kn_dma_memcpy(d, dst.buf + (1 << 20) - n, kinet_mr_rkey(dst.mr),
					   src.buf + so, tu_lkey(&src), n, &t),
			     0);
		cr_assert_eq(kn_dma_wait(d, t), 0);
		cr_assert_eq(memcmp(dst.buf + (1 << 20) - n, src.buf + so, n), 0, "copy %d", i);
	}
	cr_assert(tu_region_canaries_ok(&src) && tu_region_canaries_ok(&dst));
	tu_region_free(&src);
	tu_region_free(&dst);
	cr_assert_eq(kinet_dma_destroy(dma), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
	kinet_mlx5_set_ops(NULL);
}

#else
Test(mlx5_eth, no_rdma_headers)
{
	cr_skip_test("built without the rdma-core headers");
}
#endif
