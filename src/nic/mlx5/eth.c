/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth.c - raw Ethernet on a ConnectX port (kinet/eth.h over the mlx5
 * backend), with verbs and mlx5dv as rdma-core offers them:
 *   - a send queue is a raw-packet QP with its send CQ, exposed through
 *     mlx5dv_init_obj (SQ buffer, doorbell record, BlueFlame register); its
 *     WQEs are the device API's Ethernet WQEs, each with the first 18 bytes
 *     of the frame inline (what every ConnectX takes);
 *   - a receive queue is a receive WQ (cyclic, or striding through
 *     mlx5dv_create_wq) with its CQ, an indirection table of that one WQ and
 *     a raw-packet QP hashing into it (Toeplitz, IP addresses and ports: the
 *     CQE's RSS hash), the target of the flow rules;
 *   - a flow is ibv_create_flow on that QP, the match written as verbs flow
 *     specs (Ethernet, IPv4/IPv6, TCP/UDP).
 * Queues live in host memory and are mapped into the GPU as the RC path's
 * verbs queues are; the buffers are the core's, registered with ibv_reg_mr.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nic/mlx5/priv.h"

#if KINET_HAVE_RDMA_HEADERS

static struct m5_eth_port *mport(kinet_eth_port *p)
{
	return kinet_container_of(p, struct m5_eth_port, p);
}

/* ---- ports --------------------------------------------------------------------------- */

int kinet_m5_eth_port_open(kinet_eth_port *pp)
{
	struct m5 *m = m5_of(pp->ctx);
	struct m5_eth_port *p = mport(pp);
	int drv = pp->attr.driver;
	if (drv != KINET_ETH_DRIVER_AUTO && drv != KINET_ETH_DRIVER_MLX5) {
		KLOG_ERR(
			"eth_port_open: the %s driver belongs to the software NIC; this context is "
			"mlx5 %s (KINET_BACKEND=soft for it)",
			kinet_eth_driver_str(drv), m->name);
		return -EINVAL;
	}
	if (!m->ops->create_wq || !m->ops->create_flow || !m->ops->create_qp_ex) {
		KLOG_ERR("mlx5 %s: %s has no raw Ethernet verbs", m->name, m->ops->name);
		return -EOPNOTSUPP;
	}
	uint8_t port = (uint8_t)(pp->attr.port ? pp->attr.port : m->port);
	struct ibv_port_attr pa;
	if (m->ops->query_port(m->ib, port, &pa)) {
		KLOG_ERR("mlx5 %s: no port %u", m->name, port);
		return -ENODEV;
	}
	if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
		KLOG_ERR("mlx5 %s port %u is InfiniBand: raw Ethernet needs an Ethernet port",
			 m->name, port);
		return -EOPNOTSUPP;
	}
	if (pa.state != IBV_PORT_ACTIVE) {
		KLOG_ERR("mlx5 %s port %u is not active", m->name, port);
		return -ENODEV;
	}
	/* the port's MAC: GID 0 is the link-local address made from it (EUI-64) */
	struct ibv_gid_entry g;
	memset(&g, 0, sizeof(g));
	if (m->ops->query_gid_ex(m->ib, port, 0, &g) == 0 && g.gid.raw[0] == 0xfe &&
	    g.gid.raw[11] == 0xff && g.gid.raw[12] == 0xfe) {
		const uint8_t *e = g.gid.raw + 8;
		uint8_t mac[6] = {(uint8_t)(e[0] ^ 0x02), e[1], e[2], e[5], e[6], e[7]};
		memcpy(pp->info.mac, mac, 6);
	}
	p->port = port;
	pp->info.driver = KINET_ETH_DRIVER_MLX5;
	pp->info.mtu = pp->attr.mtu ? pp->attr.mtu : 1500;
	pp->info.ifindex = 0;
	snprintf(pp->info.ifname, sizeof(pp->info.ifname), "%.24s:%u", m->name, port);
	snprintf(pp->info.mode, sizeof(pp->info.mode),
		 "ConnectX raw packet queues (verbs) with flow steering, via %.60s", m->ops->name);
	pp->max_frame = pp->info.mtu + 18;
	return 0;
}

void kinet_m5_eth_port_close(kinet_eth_port *p)
{
	(void)p;
}

int kinet_m5_eth_port_time(kinet_eth_port *p, uint64_t *ns)
{
	/* the NIC's real-time clock follows the system's (PTP keeps them together) */
	(void)p;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return 0;
}

/* ---- mapping into the GPU -------------------------------------------------------------- */

static int map(struct m5 *m, struct m5_qp *x, void *p, size_t len, int io)
{
	if (!m->gpu)
		return 0;
	pthread_mutex_lock(&m->lock);
	int rc = kinet_m5_range_map(m, x, p, len, io);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static void unmap(struct m5 *m, struct m5_qp *x)
{
	pthread_mutex_lock(&m->lock);
	kinet_m5_range_unmap_all(m, x);
	pthread_mutex_unlock(&m->lock);
}

static int cq_new(struct m5 *m, uint32_t cnt, struct ibv_cq **cq, kinet_cq *view, kinet_ctx *ctx)
{
	errno = 0;
	*cq = m->ops->create_cq(m->ib, (int)cnt - 1, NULL, NULL, 0);
	if (!*cq) {
		int e = errno ? errno : ENOMEM;
		KLOG_ERR("mlx5 %s: ibv_create_cq(%u): %s", m->name, cnt, strerror(e));
		return -e;
	}
	struct mlx5dv_cq dcq;
	memset(&dcq, 0, sizeof(dcq));
	struct mlx5dv_obj obj;
	memset(&obj, 0, sizeof(obj));
	obj.cq.in = *cq;
	obj.cq.out = &dcq;
	int rc = m->ops->mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ);
	if (rc || dcq.cqe_size != KN_CQE_SIZE) {
		KLOG_ERR("mlx5 %s: mlx5dv_init_obj(CQ): %s (CQE size %u)", m->name,
			 rc ? strerror(rc > 0 ? rc : EIO) : "", dcq.cqe_size);
		return rc ? -EIO : -EPROTO;
	}
	kinet_m5_cq_view(view, ctx, dcq.buf, dcq.cqe_cnt, dcq.dbrec);
	kinet_cq_host_clear(view);
	return 0;
}

/* ---- send queues ------------------------------------------------------------------------ */

static struct m5_eth_txq *mtxq(kinet_eth_txq *t)
{
	return kinet_container_of(t, struct m5_eth_txq, t);
}

static int qp_to_rts(struct m5 *m, struct ibv_qp *qp, uint8_t port)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	int rc = m->ops->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT);
	if (!rc) {
		a.qp_state = IBV_QPS_RTR;
		rc = m->ops->modify_qp(qp, &a, IBV_QP_STATE);
	}
	if (!rc) {
		a.qp_state = IBV_QPS_RTS;
		rc = m->ops->modify_qp(qp, &a, IBV_QP_STATE);
	}
	return rc;
}

int kinet_m5_eth_txq_create(kinet_eth_txq *t)
{
	struct m5 *m = m5_of(t->port->ctx);
	struct m5_eth_txq *x = mtxq(t);
	kinet_qp *q = &t->q;
	uint32_t cnt = q->attr.sq_depth;
	if (cnt > (uint32_t)m->dattr.max_qp_wr) {
		KLOG_ERR("mlx5 %s: send queue depth %u above the device's %d", m->name, cnt,
			 m->dattr.max_qp_wr);
		return -EINVAL;
	}
	int rc = cq_new(m, cnt, &x->cq, &x->cqv, t->port->ctx);
	if (rc)
		return rc;
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = x->cq;
	ia.qp_type = IBV_QPT_RAW_PACKET;
	ia.cap.max_send_wr = cnt;
	ia.cap.max_send_sge = 1;
	errno = 0;
	x->qp = m->ops->create_qp(m5_ipd(q->pd), &ia);
	if (!x->qp) {
		rc = errno ? -errno : -ENOMEM;
		KLOG_ERR("mlx5 %s: raw packet QP: %s%s", m->name, kinet_strerror(rc),
			 rc == -EPERM ? " (needs CAP_NET_RAW)" : "");
		return rc;
	}
	struct mlx5dv_qp dq;
	memset(&dq, 0, sizeof(dq));
	dq.comp_mask = MLX5DV_QP_MASK_RAW_QP_HANDLES;
	struct mlx5dv_obj obj;
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = x->qp;
	obj.qp.out = &dq;
	rc = m->ops->mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP);
	if (rc || dq.sq.stride != KN_SEND_WQE_BB || dq.sq.wqe_cnt < cnt ||
	    dq.sq.wqe_cnt > x->cqv.cnt) {
		KLOG_ERR("mlx5 %s: raw packet QP: SQ of %u x %u B for %u WQEs, CQ %u (%s)", m->name,
			 dq.sq.wqe_cnt, dq.sq.stride, cnt, x->cqv.cnt, rc ? "init_obj failed" : "");
		return -EPROTO;
	}
	if ((rc = qp_to_rts(m, x->qp, mport(t->port)->port))) {
		KLOG_ERR("mlx5 %s: raw packet QP to RTS: %s", m->name, strerror(rc > 0 ? rc : EIO));
		return rc > 0 ? -rc : -EIO;
	}
	q->qpn = (dq.comp_mask & MLX5DV_QP_MASK_RAW_QP_HANDLES) && dq.sqn ? dq.sqn : x->qp->qp_num;
	q->sq = dq.sq.buf;
	q->sq_cnt = dq.sq.wqe_cnt;
	q->dbrec = dq.dbrec;
	q->db = dq.bf.reg;
	q->bf_alt = dq.bf.size; /* rings alternate between the two buffers */
	q->scq = &x->cqv;
	q->flags = KINET_QPF_HW_DOORBELL;
	if (x->cqv.cnt != q->sq_cnt) {
		/* the device API needs CQE t for WQE t: a CQ as deep as the SQ */
		KLOG_ERR("mlx5 %s: the send CQ has %u entries, the SQ %u", m->name, x->cqv.cnt,
			 q->sq_cnt);
		return -EPROTO;
	}
	/* every ConnectX takes 18 inline bytes (ConnectX-4 needs them) */
	t->desc.inline_hdr = KN_ETH_L2_INLINE_HEADER_SIZE;
	x->cpu_pi_page = kinet_queue_alloc(4096);
	if (!x->cpu_pi_page)
		return -ENOMEM;
	q->cpu_pi = x->cpu_pi_page;
	bool uar = true;
	if ((rc = map(m, &x->maps, q->sq, (size_t)q->sq_cnt * KN_SEND_WQE_BB, 0)) ||
	    (rc = map(m, &x->maps, (void *)q->dbrec, 8, 0)) ||
	    (rc = map(m, &x->maps, x->cqv.buf, (size_t)x->cqv.cnt * KN_CQE_SIZE, 0)) ||
	    (rc = map(m, &x->maps, (void *)x->cqv.dbrec, 8, 0)) ||
	    (rc = map(m, &x->maps, x->cpu_pi_page, 4, 0))) {
		KLOG_ERR("mlx5 %s: the send queue cannot be mapped into the GPU (%s)", m->name,
			 kinet_strerror(rc));
		return rc;
	}
	uint8_t *page = (uint8_t *)((uintptr_t)q->db & ~(uintptr_t)(KN_UAR_PAGE_SIZE - 1));
	if (m->gpu && map(m, &x->maps, page, KN_UAR_PAGE_SIZE, 1))
		uar = false;
	if (q->db_mode == KN_DB_BLUEFLAME && dq.bf.size < KN_SEND_WQE_BB)
		q->db_mode = KN_DB_GPU;
	if (!uar && q->db_mode != KN_DB_CPU_PROXY) {
		KLOG_INFO("mlx5 %s: eth txq 0x%x: the doorbell register cannot be mapped into the "
			  "GPU: a CPU thread rings (mode cpu)",
			  m->name, q->qpn);
		q->db_mode = KN_DB_CPU_PROXY;
	}
	return 0;
}

int kinet_m5_eth_txq_start(kinet_eth_txq *t)
{
	struct m5 *m = m5_of(t->port->ctx);
	if (t->q.db_mode != KN_DB_CPU_PROXY)
		return 0;
	pthread_mutex_lock(&m->lock);
	if (m->nethq == m->ethcap) {
		int n = m->ethcap ? m->ethcap * 2 : 8;
		kinet_qp **v = realloc(m->ethq, (size_t)n * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&m->lock);
			return -ENOMEM;
		}
		m->ethq = v;
		m->ethcap = n;
	}
	m->ethq[m->nethq++] = &t->q;
	pthread_mutex_unlock(&m->lock);
	return kinet_m5_proxy_start(m);
}

void kinet_m5_eth_txq_destroy(kinet_eth_txq *t)
{
	struct m5 *m = m5_of(t->port->ctx);
	struct m5_eth_txq *x = mtxq(t);
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < m->nethq; i++)
		if (m->ethq[i] == &t->q) {
			m->ethq[i] = m->ethq[--m->nethq];
			break;
		}
	pthread_mutex_unlock(&m->lock);
	unmap(m, &x->maps);
	if (x->qp && m->ops->destroy_qp(x->qp))
		KLOG_WARN("mlx5 %s: destroying a raw packet QP failed", m->name);
	if (x->cq && m->ops->destroy_cq(x->cq))
		KLOG_WARN("mlx5 %s: destroying a send CQ failed", m->name);
	kinet_queue_free(x->cpu_pi_page, 4096);
	x->qp = NULL;
	x->cq = NULL;
	x->cpu_pi_page = NULL;
}

/* ---- receive queues ---------------------------------------------------------------------- */

static struct m5_eth_rxq *mrxq(kinet_eth_rxq *r)
{
	return kinet_container_of(r, struct m5_eth_rxq, r);
}

/* The RSS key: the one of the Microsoft RSS verification suite. */
static uint8_t rss_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

int kinet_m5_eth_rxq_create(kinet_eth_rxq *r)
{
	struct m5 *m = m5_of(r->port->ctx);
	struct m5_eth_rxq *x = mrxq(r);
	const struct kinet_mlx5_ops *o = m->ops;
	bool striding = r->attr.mode == KINET_ETH_RXQ_STRIDING;
	if (striding) {
		struct mlx5dv_context dc;
		memset(&dc, 0, sizeof(dc));
		dc.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ;
		if (!o->mlx5dv_create_wq || !o->mlx5dv_query_device ||
		    o->mlx5dv_query_device(m->ib, &dc) ||
		    !(dc.comp_mask & MLX5DV_CONTEXT_MASK_STRIDING_RQ)) {
			KLOG_ERR("mlx5 %s: no striding receive queues (rdma-core or the device)",
				 m->name);
			return -EOPNOTSUPP;
		}
		const struct mlx5dv_striding_rq_caps *c = &dc.striding_rq_caps;
		if (r->attr.log_stride < c->min_single_stride_log_num_of_bytes ||
		    r->attr.log_stride > c->max_single_stride_log_num_of_bytes ||
		    r->attr.log_strides < c->min_single_wqe_log_num_of_strides ||
		    r->attr.log_strides > c->max_single_wqe_log_num_of_strides) {
			KLOG_ERR("mlx5 %s: striding WQEs of 2^%u strides of 2^%u bytes: the device "
				 "takes 2^%u .. 2^%u strides of 2^%u .. 2^%u bytes",
				 m->name, r->attr.log_strides, r->attr.log_stride,
				 c->min_single_wqe_log_num_of_strides,
				 c->max_single_wqe_log_num_of_strides,
				 c->min_single_stride_log_num_of_bytes,
				 c->max_single_stride_log_num_of_bytes);
			return -EINVAL;
		}
	}
	uint64_t cqes = (uint64_t)r->wqe_cnt * (r->strides + (r->strides > 1));
	int rc = cq_new(m, (uint32_t)(cqes > 65536 ? 65536 : cqes), &x->cq, &x->cqv, r->port->ctx);
	if (rc)
		return rc;
	struct ibv_wq_init_attr wa;
	memset(&wa, 0, sizeof(wa));
	wa.wq_type = IBV_WQT_RQ;
	wa.max_wr = r->wqe_cnt;
	wa.max_sge = 1;
	wa.pd = m5_ipd(r->port->pd);
	wa.cq = x->cq;
	errno = 0;
	if (striding) {
		struct mlx5dv_wq_init_attr dv;
		memset(&dv, 0, sizeof(dv));
		dv.comp_mask = MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ;
		dv.striding_rq_attrs.single_stride_log_num_of_bytes = r->attr.log_stride;
		dv.striding_rq_attrs.single_wqe_log_num_of_strides = r->attr.log_strides;
		dv.striding_rq_attrs.two_byte_shift_en = 0;
		x->wq = o->mlx5dv_create_wq(m->ib, &wa, &dv);
	} else {
		x->wq = o->create_wq(m->ib, &wa);
	}
	if (!x->wq) {
		rc = errno ? -errno : -ENOMEM;
		KLOG_ERR("mlx5 %s: receive WQ: %s", m->name, kinet_strerror(rc));
		return rc;
	}
	struct mlx5dv_rwq dw;
	memset(&dw, 0, sizeof(dw));
	struct mlx5dv_obj obj;
	memset(&obj, 0, sizeof(obj));
	obj.rwq.in = x->wq;
	obj.rwq.out = &dw;
	rc = o->mlx5dv_init_obj(&obj, MLX5DV_OBJ_RWQ);
	uint32_t want = striding ? 32u : 16u;
	if (rc || dw.wqe_cnt != r->wqe_cnt || dw.stride != want) {
		KLOG_ERR("mlx5 %s: receive WQ of %u x %u B, wanted %u x %u", m->name, dw.wqe_cnt,
			 dw.stride, r->wqe_cnt, want);
		return -EPROTO;
	}
	struct ibv_wq_attr wm;
	memset(&wm, 0, sizeof(wm));
	wm.attr_mask = IBV_WQ_ATTR_STATE;
	wm.wq_state = IBV_WQS_RDY;
	if ((rc = o->modify_wq(x->wq, &wm))) {
		KLOG_ERR("mlx5 %s: receive WQ to ready: %s", m->name, strerror(rc > 0 ? rc : EIO));
		return -EIO;
	}
	struct ibv_rwq_ind_table_init_attr ta;
	memset(&ta, 0, sizeof(ta));
	ta.log_ind_tbl_size = 0;
	ta.ind_tbl = &x->wq;
	x->ind = o->create_rwq_ind_table(m->ib, &ta);
	struct ibv_qp_init_attr_ex qa;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RAW_PACKET;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	qa.pd = wa.pd;
	qa.rwq_ind_tbl = x->ind;
	qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
	qa.rx_hash_conf.rx_hash_key_len = sizeof(rss_key);
	qa.rx_hash_conf.rx_hash_key = rss_key;
	qa.rx_hash_conf.rx_hash_fields_mask =
		IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
		IBV_RX_HASH_DST_PORT_UDP;
	if (x->ind)
		x->qp = o->create_qp_ex(m->ib, &qa);
	if (!x->ind || !x->qp) {
		rc = errno ? -errno : -ENOMEM;
		KLOG_ERR("mlx5 %s: the hashing QP of a receive queue: %s", m->name,
			 kinet_strerror(rc));
		return rc;
	}
	r->rqn = x->wq->wq_num;
	r->wq = dw.buf;
	r->wqe_size = dw.stride;
	r->dbrec = dw.dbrec;
	r->cq = &x->cqv;
	if ((rc = map(m, &x->maps, r->wq, (size_t)r->wqe_cnt * r->wqe_size, 0)) ||
	    (rc = map(m, &x->maps, (void *)r->dbrec, 8, 0)) ||
	    (rc = map(m, &x->maps, x->cqv.buf, (size_t)x->cqv.cnt * KN_CQE_SIZE, 0)) ||
	    (rc = map(m, &x->maps, (void *)x->cqv.dbrec, 8, 0))) {
		KLOG_ERR("mlx5 %s: the receive queue cannot be mapped into the GPU (%s)", m->name,
			 kinet_strerror(rc));
		return rc;
	}
	return 0;
}

void kinet_m5_eth_rxq_destroy(kinet_eth_rxq *r)
{
	struct m5 *m = m5_of(r->port->ctx);
	struct m5_eth_rxq *x = mrxq(r);
	const struct kinet_mlx5_ops *o = m->ops;
	unmap(m, &x->maps);
	if (x->qp && o->destroy_qp(x->qp))
		KLOG_WARN("mlx5 %s: destroying a hashing QP failed", m->name);
	if (x->ind && o->destroy_rwq_ind_table(x->ind))
		KLOG_WARN("mlx5 %s: destroying an indirection table failed", m->name);
	if (x->wq && o->destroy_wq(x->wq))
		KLOG_WARN("mlx5 %s: destroying a receive WQ failed", m->name);
	if (x->cq && o->destroy_cq(x->cq))
		KLOG_WARN("mlx5 %s: destroying a receive CQ failed", m->name);
	x->qp = NULL;
	x->ind = NULL;
	x->wq = NULL;
	x->cq = NULL;
}

/* ---- flows ------------------------------------------------------------------------------------ */

/* A verbs flow rule: attributes and up to three specs, as ibv_create_flow reads them. */
struct rule {
	struct ibv_flow_attr attr;
	uint8_t specs[sizeof(struct ibv_flow_spec_eth) + sizeof(struct ibv_flow_spec_ipv6) +
		      sizeof(struct ibv_flow_spec_tcp_udp)];
};

static void *spec_add(struct rule *r, size_t *at, enum ibv_flow_spec_type type, size_t size)
{
	uint8_t *p = r->specs + *at;
	memset(p, 0, size);
	/* every spec starts with type and size; the specs follow the attributes
	 * unpadded, 4-byte aligned (the union struct ibv_flow_spec wants 8) */
	struct ibv_flow_spec_eth *s = (struct ibv_flow_spec_eth *)(void *)p;
	s->type = type;
	s->size = (uint16_t)size;
	*at += size;
	r->attr.num_of_specs++;
	return p;
}

/* The rule of match m for IP version v (4, 6, 0: the match names none). */
static void rule_build(struct rule *r, const struct kinet_eth_match *m, int v, uint8_t port)
{
	memset(r, 0, sizeof(*r));
	r->attr.type = IBV_FLOW_ATTR_NORMAL;
	r->attr.port = port;
	/* verbs: 0 is tried first; a few levels, the default flow last */
	r->attr.priority = (uint16_t)(!m->fields        ? 7
				      : m->priority < 0 ? 0
				      : m->priority > 6 ? 6
							: m->priority);
	size_t at = 0;
	uint32_t f = m->fields;
	if (f & (KINET_ETH_MATCH_DST_MAC | KINET_ETH_MATCH_ETHERTYPE)) {
		struct ibv_flow_spec_eth *e = spec_add(r, &at, IBV_FLOW_SPEC_ETH, sizeof(*e));
		if (f & KINET_ETH_MATCH_DST_MAC) {
			memcpy(e->val.dst_mac, m->dst_mac, 6);
			memset(e->mask.dst_mac, 0xff, 6);
		}
		if (f & KINET_ETH_MATCH_ETHERTYPE) {
			e->val.ether_type = kn_htobe16(m->ethertype);
			e->mask.ether_type = 0xffff;
		}
	}
	bool l4 = (f & KINET_ETH_MATCH_IP_PROTO) && (m->ip_proto == 6 || m->ip_proto == 17);
	bool proto = (f & KINET_ETH_MATCH_IP_PROTO) && !l4;
	if (v == 4) {
		struct ibv_flow_spec_ipv4_ext *s =
			spec_add(r, &at, IBV_FLOW_SPEC_IPV4_EXT, sizeof(*s));
		if (f & KINET_ETH_MATCH_IPV4_DST) {
			memcpy(&s->val.dst_ip, m->ip_dst, 4);
			s->mask.dst_ip = 0xffffffffu;
		}
		if (proto) {
			s->val.proto = m->ip_proto;
			s->mask.proto = 0xff;
		}
	} else if (v == 6) {
		struct ibv_flow_spec_ipv6 *s = spec_add(r, &at, IBV_FLOW_SPEC_IPV6, sizeof(*s));
		if (f & KINET_ETH_MATCH_IPV6_DST) {
			memcpy(s->val.dst_ip, m->ip_dst, 16);
			memset(s->mask.dst_ip, 0xff, 16);
		}
		if (proto) {
			s->val.next_hdr = m->ip_proto;
			s->mask.next_hdr = 0xff;
		}
	}
	if (l4) {
		struct ibv_flow_spec_tcp_udp *s =
			spec_add(r, &at, m->ip_proto == 6 ? IBV_FLOW_SPEC_TCP : IBV_FLOW_SPEC_UDP,
				 sizeof(*s));
		if (f & KINET_ETH_MATCH_L4_DST_PORT) {
			s->val.dst_port = kn_htobe16(m->l4_dst_port);
			s->mask.dst_port = 0xffff;
		}
	}
	r->attr.size = (uint16_t)(sizeof(r->attr) + at);
}

int kinet_m5_eth_flow_create(kinet_eth_flow *ff)
{
	struct m5_eth_flow *x = kinet_container_of(ff, struct m5_eth_flow, f);
	struct m5 *m = m5_of(ff->rxq->port->ctx);
	struct m5_eth_rxq *q = mrxq(ff->rxq);
	const struct kinet_eth_match *mt = &ff->m;
	uint8_t port = mport(ff->rxq->port)->port;
	/* the IP version the match implies: one rule; none, with an IP
	 * protocol or an IP EtherType: a rule per version */
	int vs[2] = {0, 0}, n = 1;
	if (mt->fields & KINET_ETH_MATCH_IPV4_DST)
		vs[0] = 4;
	else if (mt->fields & KINET_ETH_MATCH_IPV6_DST)
		vs[0] = 6;
	else if ((mt->fields & KINET_ETH_MATCH_ETHERTYPE) && mt->ethertype == 0x0800)
		vs[0] = 4;
	else if ((mt->fields & KINET_ETH_MATCH_ETHERTYPE) && mt->ethertype == 0x86dd)
		vs[0] = 6;
	else if (mt->fields & KINET_ETH_MATCH_IP_PROTO) {
		vs[0] = 4;
		vs[1] = 6;
		n = 2;
	}
	for (int i = 0; i < n; i++) {
		struct rule r;
		rule_build(&r, mt, vs[i], port);
		errno = 0;
		x->fl[i] = m->ops->create_flow(q->qp, &r.attr);
		if (!x->fl[i]) {
			int e = errno ? errno : EINVAL;
			KLOG_ERR("mlx5 %s: ibv_create_flow: %s", m->name, strerror(e));
			if (i)
				m->ops->destroy_flow(x->fl[0]);
			x->fl[0] = NULL;
			return -e;
		}
	}
	return 0;
}

void kinet_m5_eth_flow_destroy(kinet_eth_flow *ff)
{
	struct m5_eth_flow *x = kinet_container_of(ff, struct m5_eth_flow, f);
	struct m5 *m = m5_of(ff->rxq->port->ctx);
	for (int i = 0; i < 2; i++)
		if (x->fl[i] && m->ops->destroy_flow(x->fl[i]))
			KLOG_WARN("mlx5 %s: ibv_destroy_flow failed", m->name);
	x->fl[0] = x->fl[1] = NULL;
}

#endif /* KINET_HAVE_RDMA_HEADERS */
