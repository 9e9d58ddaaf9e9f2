/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth.c - Ethernet queues (kinet/eth.h), the core's part: argument checks,
 * object lifetimes, the send queue's device descriptor and state, receive
 * buffers and their WQEs, the ordered list of flows of a port. The queues
 * themselves are the backend's (src/core/driver.h, "Ethernet queues").
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/internal.h"

const char *kinet_eth_driver_str(int d)
{
	switch (d) {
	case KINET_ETH_DRIVER_AUTO: return "auto";
	case KINET_ETH_DRIVER_XDP: return "xdp";
	case KINET_ETH_DRIVER_PACKET: return "packet";
	case KINET_ETH_DRIVER_LOOPBACK: return "loopback";
	case KINET_ETH_DRIVER_MLX5: return "mlx5";
	default: return "?";
	}
}

static size_t osize(size_t backend, size_t core)
{
	return backend > core ? backend : core;
}

/* ---- ports ---------------------------------------------------------------------- */

int kinet_eth_port_open(kinet_pd *pd, const struct kinet_eth_port_attr *attr,
			kinet_eth_port **out)
{
	if (!pd || !attr || !out)
		return -EINVAL;
	*out = NULL;
	kinet_ctx *ctx = pd->ctx;
	const struct kinet_backend_ops *ops = ctx->ops;
	if (!ops->eth_port_open)
		return kinet_backend_unsupported(ctx, "Ethernet ports (kinet_eth_port_open)");
	if (attr->driver < KINET_ETH_DRIVER_AUTO || attr->driver > KINET_ETH_DRIVER_MLX5) {
		KLOG_ERR("eth_port_open: unknown driver %d", attr->driver);
		return -EINVAL;
	}
	if (attr->ifname && strlen(attr->ifname) >= 16) {
		KLOG_ERR("eth_port_open: interface name \"%s\" longer than 15 characters",
			 attr->ifname);
		return -EINVAL;
	}
	if (attr->mtu && (attr->mtu < 68 || attr->mtu > 65535)) {
		KLOG_ERR("eth_port_open: MTU %u outside 68 .. 65535", attr->mtu);
		return -EINVAL;
	}
	kinet_eth_port *p = calloc(1, osize(ops->eth_port_size, sizeof(*p)));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->pd = pd;
	p->attr = *attr;
	if (attr->ifname)
		snprintf(p->ifname, sizeof(p->ifname), "%s", attr->ifname);
	p->attr.ifname = attr->ifname ? p->ifname : NULL;
	pthread_mutex_init(&p->lock, NULL);
	int rc = ops->eth_port_open(p);
	if (rc) {
		pthread_mutex_destroy(&p->lock);
		free(p);
		return rc;
	}
	atomic_fetch_add(&pd->refs, 1);
	KLOG_INFO("eth port %s: %s, MTU %u", p->info.ifname, p->info.mode, p->info.mtu);
	*out = p;
	return 0;
}

int kinet_eth_port_close(kinet_eth_port *p)
{
	if (!p)
		return -EINVAL;
	if (atomic_load(&p->queues)) {
		KLOG_WARN("eth_port_close: %d queues of port %s still exist",
			  atomic_load(&p->queues), p->info.ifname);
		return -EBUSY;
	}
	p->ctx->ops->eth_port_close(p);
	atomic_fetch_sub(&p->pd->refs, 1);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return 0;
}

int kinet_eth_port_info(const kinet_eth_port *p, struct kinet_eth_port_info *out)
{
	if (!p || !out)
		return -EINVAL;
	*out = p->info;
	return 0;
}

int kinet_eth_port_time(kinet_eth_port *p, uint64_t *ns)
{
	if (!p || !ns)
		return -EINVAL;
	if (!p->ctx->ops->eth_port_time)
		return kinet_backend_unsupported(p->ctx, "kinet_eth_port_time");
	return p->ctx->ops->eth_port_time(p, ns);
}

/* ---- counters --------------------------------------------------------------------- */

static int counters(kinet_eth_port *p, kinet_eth_txq *t, kinet_eth_rxq *r,
		    struct kinet_eth_counters *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!p->ctx->ops->eth_counters)
		return kinet_backend_unsupported(p->ctx, "per-queue Ethernet counters");
	return p->ctx->ops->eth_counters(p, t, r, out);
}

int kinet_eth_txq_counters(const kinet_eth_txq *t, struct kinet_eth_counters *out)
{
	if (!t)
		return -EINVAL;
	return counters(t->port, (kinet_eth_txq *)t, NULL, out);
}

int kinet_eth_rxq_counters(const kinet_eth_rxq *r, struct kinet_eth_counters *out)
{
	if (!r)
		return -EINVAL;
	return counters(r->port, NULL, (kinet_eth_rxq *)r, out);
}

int kinet_eth_port_counters(const kinet_eth_port *p, struct kinet_eth_counters *out)
{
	if (!p)
		return -EINVAL;
	return counters((kinet_eth_port *)p, NULL, NULL, out);
}

/* ---- send queues --------------------------------------------------------------------- */

/* The kn_qp part of the descriptor: an SQ and its send CQ, nothing else. */
static void txq_fill_desc(kinet_eth_txq *t)
{
	kinet_qp *q = &t->q;
	kn_qp *d = &t->desc.q;
	memset(d, 0, sizeof(*d));
	d->sq = q->sq;
	d->dbrec = q->dbrec;
	d->db = q->db;
	d->bf_alt = q->bf_alt;
	d->cpu_pi = q->cpu_pi;
	d->cq = q->scq->buf;
	d->cq_dbrec = q->scq->dbrec;
	d->cq_cqe_cnt = q->scq->cnt;
	d->st = q->dstate;
	d->slot_ready = q->slot_ready;
	d->scratch_lkey = 0x100; /* none: an Ethernet SQ has no atomics */
	uint64_t tmo = t->attr.timeout_ms ? t->attr.timeout_ms : (uint64_t)KT(TIMEOUT_MS);
	d->timeout_ns = tmo * 1000000ull;
	d->qpn = q->qpn;
	d->sq_wqe_cnt = q->sq_cnt;
	d->db_mode = (uint32_t)q->db_mode;
	d->share = (uint32_t)t->attr.share;
	d->backend = (uint32_t)q->ctx->backend;
	d->flags = (q->flags & KINET_QPF_HW_DOORBELL) ? 0 : KN_QP_DB_UNORDERED;
	q->desc = *d; /* kinet_qp_device() of q (CUDA placement) sees the same */
	t->desc.max_frame = t->port->max_frame;
	t->desc.flags = 0;
}

static void txq_free(kinet_eth_txq *t)
{
	free(t->q.dstate);
	free(t->q.slot_ready);
	free(t->q.raw_nbb);
	pthread_mutex_destroy(&t->q.raw_lock);
	free(t);
}

int kinet_eth_txq_create(kinet_eth_port *p, const struct kinet_eth_txq_attr *attr,
			 kinet_eth_txq **out)
{
	if (!p || !out)
		return -EINVAL;
	*out = NULL;
	struct kinet_eth_txq_attr a;
	if (attr)
		a = *attr;
	else
		memset(&a, 0, sizeof(a));
	if (!a.depth)
		a.depth = 256;
	if (a.depth > 32768 ||
	    (a.inline_hdr != 0 && a.inline_hdr != KN_ETH_L2_INLINE_HEADER_SIZE) ||
	    a.db_mode < KN_DB_AUTO || a.db_mode > KN_DB_CPU_PROXY || a.share < KN_SHARE_EXCLUSIVE ||
	    a.share > KN_SHARE_GPU) {
		KLOG_ERR("eth_txq_create: depth %u (at most 32768), inline_hdr %u (0 or %u), "
			 "db_mode %d, share %d",
			 a.depth, a.inline_hdr, KN_ETH_L2_INLINE_HEADER_SIZE, a.db_mode, a.share);
		return -EINVAL;
	}
	kinet_ctx *ctx = p->ctx;
	const struct kinet_backend_ops *ops = ctx->ops;
	kinet_eth_txq *t = calloc(1, osize(ops->eth_txq_size, sizeof(*t)));
	if (!t)
		return -ENOMEM;
	t->port = p;
	t->attr = a;
	kinet_qp *q = &t->q;
	q->ctx = ctx;
	q->pd = p->pd;
	q->attr.sq_depth = kinet_pow2(a.depth < 2 ? 2 : a.depth);
	q->attr.db_mode = a.db_mode;
	q->attr.share = a.share;
	q->attr.timeout_ms = a.timeout_ms;
	q->db_mode = kinet_db_mode_resolve(a.db_mode);
	pthread_mutex_init(&q->raw_lock, NULL);
	t->desc.inline_hdr = a.inline_hdr;
	int rc = ops->eth_txq_create(t);
	if (rc) {
		txq_free(t);
		return rc;
	}
	rc = -ENOMEM;
	q->dstate = calloc(1, sizeof(*q->dstate));
	q->slot_ready = calloc(q->sq_cnt, sizeof(uint64_t));
	q->raw_nbb = calloc(q->sq_cnt, 1);
	if (!q->dstate || !q->slot_ready || !q->raw_nbb)
		goto fail;
	kinet_qp_reset_device_state(q);
	atomic_fetch_add(&q->scq->refs, 1);
	q->scq->sq_owner = q;
	txq_fill_desc(t);
	atomic_store(&q->state, KINET_QPS_RTS);
	rc = ops->eth_txq_start ? ops->eth_txq_start(t) : 0;
	if (rc) {
		atomic_fetch_sub(&q->scq->refs, 1);
		goto fail;
	}
	atomic_fetch_add(&p->queues, 1);
	KLOG_DBG("eth txq 0x%x on %s: %u WQEBBs, inline %u, doorbell %s", q->qpn, p->info.ifname,
		 q->sq_cnt, t->desc.inline_hdr, kinet_db_mode_str(q->db_mode));
	*out = t;
	return 0;
fail:
	ops->eth_txq_destroy(t);
	txq_free(t);
	return rc;
}

int kinet_eth_txq_destroy(kinet_eth_txq *t)
{
	if (!t)
		return -EINVAL;
	kinet_eth_port *p = t->port;
	atomic_fetch_sub(&t->q.scq->refs, 1);
	t->q.scq->sq_owner = NULL;
	p->ctx->ops->eth_txq_destroy(t);
	atomic_fetch_sub(&p->queues, 1);
	txq_free(t);
	return 0;
}

int kinet_eth_txq_device(kinet_eth_txq *t, struct kn_eth_txq **out)
{
	if (!t || !out)
		return -EINVAL;
	*out = &t->desc;
	return 0;
}

/* For the CUDA module: the SQ of a send queue as a QP (kinet_qp_device_cuda). */
kinet_qp *kinet_eth_txq_qp(kinet_eth_txq *t)
{
	return t ? &t->q : NULL;
}

int kinet_eth_txq_reset(kinet_eth_txq *t)
{
	if (!t)
		return -EINVAL;
	kinet_ctx *ctx = t->port->ctx;
	if (!ctx->ops->eth_txq_reset)
		return kinet_backend_unsupported(ctx, "kinet_eth_txq_reset");
	int rc = ctx->ops->eth_txq_reset(t);
	if (rc)
		return rc;
	kinet_qp *q = &t->q;
	kinet_qp_reset_device_state(q);
	pthread_mutex_lock(&q->raw_lock);
	q->raw_pi = q->raw_ci = 0;
	memset(q->raw_nbb, 0, q->sq_cnt);
	pthread_mutex_unlock(&q->raw_lock);
	atomic_store(&q->state, KINET_QPS_RTS);
	return 0;
}

int kinet_eth_txq_in_error(const kinet_eth_txq *t)
{
	if (!t)
		return -EINVAL;
	return atomic_load(&((kinet_eth_txq *)t)->q.state) == KINET_QPS_ERR;
}

kinet_cq *kinet_eth_txq_cq(const kinet_eth_txq *t)
{
	return t ? t->q.scq : NULL;
}

/* The NIC's consumer index of the queue (caller holds raw_lock). */
static uint64_t txq_consumed(void *arg)
{
	kinet_eth_txq *t = arg;
	const struct kinet_backend_ops *ops = t->q.ctx->ops;
	return ops->eth_txq_consumed ? ops->eth_txq_consumed(t) : t->q.raw_ci;
}

long long kinet_eth_txq_post_raw(kinet_eth_txq *t, const void *wqe, uint32_t nbb)
{
	if (!t || !wqe || nbb == 0 || nbb > KN_MAX_WQE_BBS || nbb > t->q.sq_cnt)
		return -EINVAL;
	if (t->q.flags & KINET_QPF_QUEUES_ON_GPU) {
		KLOG_ERR("eth txq 0x%x: its queue is in GPU memory: no raw posting from the host",
			 t->q.qpn);
		return -EOPNOTSUPP;
	}
	long long tk = kinet_sq_post_raw(&t->q, wqe, nbb, t->desc.q.timeout_ns, txq_consumed, t);
	if (tk == -ETIMEDOUT)
		KLOG_ERR("eth txq 0x%x: kinet_eth_txq_post_raw: the queue stayed full", t->q.qpn);
	return tk;
}

/* ---- receive queues -------------------------------------------------------------- */

static int rxq_attr_check(const kinet_eth_port *p, struct kinet_eth_rxq_attr *a)
{
	if (!a->depth)
		a->depth = 256;
	if (a->depth > 32768 || a->mode < KINET_ETH_RXQ_CYCLIC ||
	    a->mode > KINET_ETH_RXQ_STRIDING || (a->flags & ~(uint32_t)KINET_ETH_RXQ_RAW)) {
		KLOG_ERR("eth_rxq_create: depth %u (at most 32768), mode %d, flags 0x%x", a->depth,
			 a->mode, a->flags);
		return -EINVAL;
	}
	if (a->mode == KINET_ETH_RXQ_CYCLIC) {
		if (!a->pkt_size)
			a->pkt_size = 2048;
		if (a->pkt_size < 64 || a->pkt_size > 65536 || (a->pkt_size & 63)) {
			KLOG_ERR("eth_rxq_create: pkt_size %u: a multiple of 64 in 64 .. 65536",
				 a->pkt_size);
			return -EINVAL;
		}
	} else {
		if (!a->log_stride)
			a->log_stride = 11;
		if (!a->log_strides)
			a->log_strides = 6;
		if (a->log_stride < 6 || a->log_stride > 13 || a->log_strides < 3 ||
		    a->log_strides > 16 || a->log_stride + a->log_strides > 24) {
			KLOG_ERR("eth_rxq_create: log_stride %u (6 .. 13), log_strides %u "
				 "(3 .. 16), at most 16 MiB per WQE",
				 a->log_stride, a->log_strides);
			return -EINVAL;
		}
	}
	if ((a->flags & KINET_ETH_RXQ_RAW) && a->buf) {
		KLOG_ERR("eth_rxq_create: a raw queue has no kinet buffers (buf must be NULL)");
		return -EINVAL;
	}
	if (a->buf && (!a->mr || a->mr->pd != p->pd)) {
		KLOG_ERR("eth_rxq_create: buf needs its region (mr) in the port's "
			 "protection domain");
		return -EINVAL;
	}
	return 0;
}

static void rxq_fill_desc(kinet_eth_rxq *r)
{
	kn_eth_rxq *d = &r->desc;
	memset(d, 0, sizeof(*d));
	d->wq = r->wq;
	d->dbrec = r->dbrec;
	d->cq = r->cq->buf;
	d->cq_dbrec = r->cq->dbrec;
	d->st = r->st;
	d->fin = r->fin;
	d->buf = r->buf;
	uint64_t tmo = r->attr.timeout_ms ? r->attr.timeout_ms : (uint64_t)KT(TIMEOUT_MS);
	d->timeout_ns = tmo * 1000000ull;
	d->buf_lkey = r->mr ? r->mr->key : 0x100;
	d->wqe_cnt = r->wqe_cnt;
	d->cqe_cnt = r->cq->cnt;
	d->wqe_size = r->wqe_size;
	d->wqe_bytes = r->wqe_bytes;
	d->stride_bytes = r->stride_bytes;
	d->strides = r->strides;
	d->mode = (uint32_t)r->attr.mode;
	d->rqn = r->rqn;
}

/* Writes every receive WQE (buffer slot i for WQE i) and posts them all. */
static void rxq_post_all(kinet_eth_rxq *r)
{
	uint32_t lkey = r->mr->key;
	for (uint32_t i = 0; i < r->wqe_cnt; i++) {
		uint8_t *w = r->wq + (size_t)i * r->wqe_size;
		uint64_t addr = (uint64_t)(uintptr_t)(r->buf + (size_t)i * r->wqe_bytes);
		if (r->attr.mode == KINET_ETH_RXQ_STRIDING) {
			memset(w, 0, sizeof(struct kn_wqe_srq_next_seg));
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + 16), r->wqe_bytes, lkey,
					addr);
		} else {
			kn_set_data_seg((struct kn_wqe_data_seg *)w, r->wqe_bytes, lkey, addr);
		}
	}
	r->st->posted = r->wqe_cnt;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&r->dbrec[0], kn_htobe32(r->wqe_cnt & 0xffff), __ATOMIC_RELEASE);
}

static void rxq_free(kinet_eth_rxq *r)
{
	if (r->own_mr && r->mr && kinet_mr_dereg(r->mr))
		KLOG_WARN("eth rxq 0x%x: its buffer region could not be deregistered", r->rqn);
	if (r->own_buf)
		kinet_queue_free(r->buf, r->buf_len);
	free(r->st);
	free(r->fin);
	free(r);
}

int kinet_eth_rxq_create(kinet_eth_port *p, const struct kinet_eth_rxq_attr *attr,
			 kinet_eth_rxq **out)
{
	if (!p || !out)
		return -EINVAL;
	*out = NULL;
	struct kinet_eth_rxq_attr a;
	if (attr)
		a = *attr;
	else
		memset(&a, 0, sizeof(a));
	int rc = rxq_attr_check(p, &a);
	if (rc)
		return rc;
	const struct kinet_backend_ops *ops = p->ctx->ops;
	kinet_eth_rxq *r = calloc(1, osize(ops->eth_rxq_size, sizeof(*r)));
	if (!r)
		return -ENOMEM;
	r->port = p;
	r->attr = a;
	r->wqe_cnt = kinet_pow2(a.depth < 2 ? 2 : a.depth);
	if (a.mode == KINET_ETH_RXQ_STRIDING) {
		r->stride_bytes = 1u << a.log_stride;
		r->strides = 1u << a.log_strides;
		r->wqe_bytes = r->stride_bytes * r->strides;
	} else {
		r->stride_bytes = r->wqe_bytes = a.pkt_size;
		r->strides = 1;
	}
	r->buf_len = (size_t)r->wqe_cnt * r->wqe_bytes;
	if (r->buf_len > (1ull << 30)) {
		KLOG_ERR("eth_rxq_create: %zu bytes of buffers (at most 1 GiB)", r->buf_len);
		free(r);
		return -EINVAL;
	}
	if (a.buf) {
		/* [buf, buf + buf_len) inside [addr, addr + len), without wrapping: the
		 * start is checked, and the end as an offset from the region's start */
		uintptr_t b = (uintptr_t)a.buf, base = (uintptr_t)a.mr->addr;
		if (b < base || b - base > a.mr->len) {
			KLOG_ERR("eth_rxq_create: buf %p lies outside its region [%p, +%zu)",
				 a.buf, a.mr->addr, (size_t)a.mr->len);
			free(r);
			return -EINVAL;
		}
		if (r->buf_len > a.mr->len - (b - base)) {
			KLOG_ERR("eth_rxq_create: the region of buf holds %zu bytes from it, "
				 "the queue needs %zu",
				 (size_t)(a.mr->len - (b - base)), r->buf_len);
			free(r);
			return -EINVAL;
		}
	}
	r->st = calloc(1, sizeof(*r->st));
	r->fin = a.mode == KINET_ETH_RXQ_STRIDING ? calloc(r->wqe_cnt, sizeof(uint64_t)) : NULL;
	if (!r->st || (a.mode == KINET_ETH_RXQ_STRIDING && !r->fin)) {
		rxq_free(r);
		return -ENOMEM;
	}
	rc = ops->eth_rxq_create(r);
	if (rc) {
		rxq_free(r);
		return rc;
	}
	if (!(a.flags & KINET_ETH_RXQ_RAW)) {
		if (a.buf) {
			r->buf = a.buf;
			r->mr = a.mr;
		} else {
			r->buf = kinet_queue_alloc(r->buf_len);
			r->own_buf = r->buf != NULL;
			rc = r->buf ? kinet_mr_reg(p->pd, r->buf, r->buf_len,
						   KINET_ACCESS_LOCAL_WRITE, &r->mr)
				    : -ENOMEM;
			r->own_mr = rc == 0;
		}
		if (rc)
			goto fail;
		rxq_post_all(r);
	}
	rxq_fill_desc(r);
	atomic_fetch_add(&r->cq->refs, 1);
	rc = ops->eth_rxq_start ? ops->eth_rxq_start(r) : 0;
	if (rc) {
		atomic_fetch_sub(&r->cq->refs, 1);
		goto fail;
	}
	atomic_fetch_add(&p->queues, 1);
	KLOG_DBG("eth rxq 0x%x on %s: %u WQEs x %u B (%s, %u stride(s) of %u B)", r->rqn,
		 p->info.ifname, r->wqe_cnt, r->wqe_bytes,
		 a.mode == KINET_ETH_RXQ_STRIDING ? "striding" : "cyclic", r->strides,
		 r->stride_bytes);
	*out = r;
	return 0;
fail:
	ops->eth_rxq_destroy(r);
	rxq_free(r);
	return rc;
}

int kinet_eth_rxq_destroy(kinet_eth_rxq *r)
{
	if (!r)
		return -EINVAL;
	if (atomic_load(&r->flows)) {
		KLOG_WARN("eth_rxq_destroy: %d flows still steer into rxq 0x%x",
			  atomic_load(&r->flows), r->rqn);
		return -EBUSY;
	}
	kinet_eth_port *p = r->port;
	atomic_fetch_sub(&r->cq->refs, 1);
	p->ctx->ops->eth_rxq_destroy(r);
	atomic_fetch_sub(&p->queues, 1);
	rxq_free(r);
	return 0;
}

int kinet_eth_rxq_device(kinet_eth_rxq *r, struct kn_eth_rxq **out)
{
	if (!r || !out)
		return -EINVAL;
	if (r->attr.flags & KINET_ETH_RXQ_RAW) {
		KLOG_ERR("eth rxq 0x%x: a raw queue has no kinet buffers for the device calls",
			 r->rqn);
		return -EINVAL;
	}
	*out = &r->desc;
	return 0;
}

int kinet_eth_rxq_ring(kinet_eth_rxq *r, struct kinet_eth_rxq_ring *out)
{
	if (!r || !out)
		return -EINVAL;
	out->wq = r->wq;
	out->wqe_cnt = r->wqe_cnt;
	out->wqe_size = r->wqe_size;
	out->dbrec = r->dbrec;
	out->cq = r->cq;
	out->rqn = r->rqn;
	out->wqe_bytes = r->wqe_bytes;
	out->stride_bytes = r->stride_bytes;
	out->strides = r->strides;
	return 0;
}

/* ---- flows ------------------------------------------------------------------------- */

static int match_check(const struct kinet_eth_match *m)
{
	const uint32_t known = KINET_ETH_MATCH_DST_MAC | KINET_ETH_MATCH_ETHERTYPE |
			       KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_IPV6_DST |
			       KINET_ETH_MATCH_IP_PROTO | KINET_ETH_MATCH_L4_DST_PORT;
	uint32_t f = m->fields;
	const char *why = NULL;
	bool v4 = f & KINET_ETH_MATCH_IPV4_DST, v6 = f & KINET_ETH_MATCH_IPV6_DST;
	bool et = f & KINET_ETH_MATCH_ETHERTYPE;
	if (f & ~known)
		why = "unknown match fields";
	else if (v4 && v6)
		why = "IPv4 and IPv6 destinations together";
	else if (et && v4 && m->ethertype != 0x0800)
		why = "an IPv4 destination with an EtherType other than 0x0800";
	else if (et && v6 && m->ethertype != 0x86dd)
		why = "an IPv6 destination with an EtherType other than 0x86dd";
	else if (et && (f & KINET_ETH_MATCH_IP_PROTO) && m->ethertype != 0x0800 &&
		 m->ethertype != 0x86dd)
		why = "an IP protocol with an EtherType that is not IP";
	else if ((f & KINET_ETH_MATCH_L4_DST_PORT) &&
		 (!(f & KINET_ETH_MATCH_IP_PROTO) || (m->ip_proto != 6 && m->ip_proto != 17)))
		why = "a destination port without IP protocol TCP (6) or UDP (17)";
	if (why) {
		KLOG_ERR("eth_flow_create: %s", why);
		return -EINVAL;
	}
	return 0;
}

int kinet_eth_flow_create(kinet_eth_rxq *r, const struct kinet_eth_match *m,
			  kinet_eth_flow **out)
{
	if (!r || !m || !out)
		return -EINVAL;
	*out = NULL;
	int rc = match_check(m);
	if (rc)
		return rc;
	kinet_eth_port *p = r->port;
	const struct kinet_backend_ops *ops = p->ctx->ops;
	if (!ops->eth_flow_create)
		return kinet_backend_unsupported(p->ctx, "kinet_eth_flow_create");
	kinet_eth_flow *f = calloc(1, osize(ops->eth_flow_size, sizeof(*f)));
	if (!f)
		return -ENOMEM;
	f->rxq = r;
	f->m = *m;
	pthread_mutex_lock(&p->lock);
	if (p->nflows >= KINET_ETH_MAX_FLOWS) {
		pthread_mutex_unlock(&p->lock);
		free(f);
		KLOG_ERR("eth_flow_create: port %s has %u flows already", p->info.ifname,
			 p->nflows);
		return -ENOSPC;
	}
	/* in the order they are tried: priority, then age; the default last */
	kinet_eth_flow **pp = &p->flows;
	for (; *pp; pp = &(*pp)->next) {
		const struct kinet_eth_match *o = &(*pp)->m;
		if (!m->fields && !o->fields) {
			pthread_mutex_unlock(&p->lock);
			free(f);
			KLOG_ERR("eth_flow_create: port %s has a default flow already",
				 p->info.ifname);
			return -EEXIST;
		}
		if (m->fields && (!o->fields || o->priority > m->priority))
			break;
	}
	if (!m->fields)
		while (*pp)
			pp = &(*pp)->next;
	f->seq = ++p->flow_seq;
	f->next = *pp;
	*pp = f;
	p->nflows++;
	rc = ops->eth_flow_create(f);
	if (rc) {
		*pp = f->next;
		p->nflows--;
		pthread_mutex_unlock(&p->lock);
		free(f);
		return rc;
	}
	atomic_fetch_add(&r->flows, 1);
	pthread_mutex_unlock(&p->lock);
	*out = f;
	return 0;
}

int kinet_eth_flow_destroy(kinet_eth_flow *f)
{
	if (!f)
		return -EINVAL;
	kinet_eth_port *p = f->rxq->port;
	pthread_mutex_lock(&p->lock);
	for (kinet_eth_flow **pp = &p->flows; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			p->nflows--;
			break;
		}
	p->ctx->ops->eth_flow_destroy(f);
	atomic_fetch_sub(&f->rxq->flows, 1);
	pthread_mutex_unlock(&p->lock);
	free(f);
	return 0;
}
