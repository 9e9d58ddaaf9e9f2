/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_ep.c - the wire's libfabric endpoint (one per context): creation
 * and destruction, receive buffers and send descriptors, scatter/gather
 * helpers, sending messages, dropping a peer, and polling the CQ (received
 * messages go to the requester's answers or to the target's queue).
 */

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "nic/soft/wire_int.h"
#if KINET_HAVE_FABRIC

/* ---- endpoint ------------------------------------------------------------ */

void wire_destroy(struct kinet_wire *w)
{
	if (w->ep)
		fi_close(&w->ep->fid);
	if (w->av)
		fi_close(&w->av->fid);
	if (w->cq)
		fi_close(&w->cq->fid);
	if (w->dom)
		fi_close(&w->dom->fid);
	if (w->fab)
		fi_close(&w->fab->fid);
	if (w->info)
		fi_freeinfo(w->info);
	free(w->rxmem);
	free(w->bigmem);
	free(w->txmem);
	free(w->qps);
	free(w->peers);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static int post_rx(struct kinet_wire *w, struct rxbuf *rb)
{
	ssize_t rc = fi_recv(w->ep, rb->buf + HOFF, HSZ + CHUNK, NULL, FI_ADDR_UNSPEC, &rb->fc);
	if (rc == 0)
		return 0;
	if (rc == -FI_EAGAIN) { /* later, from the progress loop */
		rb->next = w->repost;
		w->repost = rb;
		return 0;
	}
	KLOG_ERR("wire: fi_recv: %s", fi_strerror((int)-rc));
	return -EIO;
}

/* A receive buffer is free: posted again at the end of the poll or pass
 * (answers go out first). */
void wire_rx_release(struct kinet_wire *w, struct rxbuf *rb)
{
	rb->executed = 0;
	rb->off = 0;
	rb->next = w->repost;
	w->repost = rb;
}

void wire_repost(struct kinet_wire *w)
{
	while (w->repost) {
		struct rxbuf *rb = w->repost;
		w->repost = rb->next;
		ssize_t rc = fi_recv(w->ep, rb->buf + HOFF, HSZ + CHUNK, NULL, FI_ADDR_UNSPEC,
				     &rb->fc);
		if (rc) {
			rb->next = w->repost;
			w->repost = rb;
			break;
		}
	}
}

/* fi_getinfo for the provider, with RMA when it has it. */
static int wire_info(struct kinet_wire *w, bool rma)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->caps = FI_MSG | (rma ? FI_RMA : 0);
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	/* bounce buffers are not registered; regions the target reads are
	 * (keys and addresses as the provider wants them) */
	hints->domain_attr->mr_mode = rma ? FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT : 0;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->fabric_attr->prov_name = strdup(w->prov);
	int rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &w->info);
	fi_freeinfo(hints);
	if (rc)
		w->info = NULL;
	return rc;
}

static int wire_create(kinet_ctx *ctx, struct kinet_wire **out)
{
	const char *prov = KT(FI_PROVIDER);
	struct kinet_wire *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->wait_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	snprintf(w->prov, sizeof(w->prov), "%s", prov && *prov ? prov : "tcp;ofi_rxm");
	long long tmo = (long long)KT(NET_TIMEOUT_MS);
	w->timeout_ns = (uint64_t)(tmo > 0 ? tmo : 5000) * 1000000ull;
	long long rnr = (long long)KT(RNR_TIMER_US);
	w->rnr_ns = (uint64_t)(rnr > 0 ? rnr : 1) * 1000ull;
	w->ka_ns = w->timeout_ns / 4;
	if (w->ka_ns > 200000000ull)
		w->ka_ns = 200000000ull;
	long long rb = (long long)KT(NET_RNDV_BYTES);
	w->rndv_min = rb > 0 ? (uint64_t)rb : 0;
	uint64_t salt = 0;
	if (getrandom(&salt, sizeof(salt), 0) != (ssize_t)sizeof(salt))
		salt = kn_now_ns();
	w->next_key = (salt << 20) | 1; /* keys of one process are not guessed by chance */

	int rc = wire_info(w, true);
	w->rma = rc == 0;
	if (rc)
		rc = wire_info(w, false); /* messages only: every write goes eager */
	if (rc) {
		KLOG_ERR("wire: libfabric provider \"%s\" (KINET_FI_PROVIDER) not available: %s",
			 w->prov, fi_strerror(-rc));
		wire_destroy(w);
		return -ENODEV;
	}
	if (w->rma) {
		uint64_t mm = w->info->domain_attr->mr_mode;
		w->virt_addr = (mm & FI_MR_VIRT_ADDR) != 0;
		w->prov_key = (mm & FI_MR_PROV_KEY) != 0;
		w->mr_ep = (mm & FI_MR_ENDPOINT) != 0;
		if (mm & (FI_MR_LOCAL | FI_MR_HMEM | FI_MR_ALLOCATED)) {
			/* the wire does not register its own buffers yet */
			fi_freeinfo(w->info);
			w->rma = false;
			if ((rc = wire_info(w, false))) {
				KLOG_ERR("wire: libfabric provider \"%s\": %s", w->prov,
					 fi_strerror(-rc));
				wire_destroy(w);
				return -ENODEV;
			}
		}
	}
	w->inject = w->info->tx_attr->inject_size;
	w->iov_limit = w->info->tx_attr->iov_limit;
	const char *step = "fi_fabric";
	if ((rc = fi_fabric(w->info->fabric_attr, &w->fab, NULL)))
		goto fail;
	step = "fi_domain";
	if ((rc = fi_domain(w->fab, w->info, &w->dom, NULL)))
		goto fail;
	/* a wait fd lets an idle engine sleep until the network has something */
	struct fi_cq_attr cqa = {.size = 4096, .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_FD};
	step = "fi_cq_open";
	if (fi_cq_open(w->dom, &cqa, &w->cq, NULL) == 0) {
		if (fi_control(&w->cq->fid, FI_GETWAIT, &w->wait_fd))
			w->wait_fd = -1;
	} else {
		cqa.wait_obj = FI_WAIT_NONE;
		if ((rc = fi_cq_open(w->dom, &cqa, &w->cq, NULL)))
			goto fail;
	}
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	step = "fi_av_open";
	if ((rc = fi_av_open(w->dom, &ava, &w->av, NULL)))
		goto fail;
	step = "fi_endpoint";
	if ((rc = fi_endpoint(w->dom, w->info, &w->ep, NULL)))
		goto fail;
	step = "fi_ep_bind";
	if ((rc = fi_ep_bind(w->ep, &w->av->fid, 0)) ||
	    (rc = fi_ep_bind(w->ep, &w->cq->fid, FI_TRANSMIT | FI_RECV)))
		goto fail;
	step = "fi_enable";
	if ((rc = fi_enable(w->ep)))
		goto fail;
	w->addr_len = sizeof(w->addr);
	step = "fi_getname";
	if ((rc = fi_getname(&w->ep->fid, w->addr, &w->addr_len)))
		goto fail;
	/* buffers */
	w->rxmem = malloc((size_t)NRX * (HDR + CHUNK));
	w->bigmem = malloc((size_t)NBIG * (HDR + CHUNK));
	w->txmem = calloc(NTX, sizeof(struct txd));
	if (!w->rxmem || !w->bigmem || !w->txmem) {
		wire_destroy(w);
		return -ENOMEM;
	}
	for (int i = 0; i < NBIG; i++)
		w->bigfree[w->nbig++] = w->bigmem + (size_t)i * (HDR + CHUNK);
	struct txd *td = (struct txd *)w->txmem;
	for (int i = NTX - 1; i >= 0; i--) {
		td[i].kind = CTX_TX;
		td[i].next = w->txfree;
		w->txfree = &td[i];
	}
	for (int i = NRD - 1; i >= 0; i--) {
		w->rd[i].kind = CTX_RD;
		w->rd[i].next = w->rdfree;
		w->rdfree = &w->rd[i];
	}
	for (int i = 0; i < NRX; i++) {
		w->rx[i].kind = CTX_RX;
		w->rx[i].buf = w->rxmem + (size_t)i * (HDR + CHUNK);
		if ((rc = post_rx(w, &w->rx[i]))) {
			wire_destroy(w);
			return rc;
		}
	}
	KLOG_INFO("wire: provider %s, fabric %s, domain %s, %s, %s",
		  w->info->fabric_attr->prov_name, w->info->fabric_attr->name,
		  w->info->domain_attr->name,
		  w->rma ? "rendezvous writes (target reads in place)" : "messages only",
		  w->wait_fd >= 0 ? "wait fd" : "no wait fd");
	*out = w;
	return 0;
fail:
	KLOG_ERR("wire: %s: %s", step, fi_strerror(-rc));
	wire_destroy(w);
	return -ENODEV;
}

/* The context's wire, created on first use. */
int wire_get(kinet_ctx *ctx, struct kinet_wire **out)
{
	if (ctx->backend != KINET_BACKEND_SOFT || !soft_ctx(ctx)->nic)
		return -ENOTSUP;
	pthread_mutex_lock(&ctx->lock);
	int rc = 0;
	if (!soft_ctx(ctx)->wire)
		rc = wire_create(ctx, &soft_ctx(ctx)->wire);
	*out = soft_ctx(ctx)->wire;
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

void wire_drop_peer(struct kinet_wire *w, int idx, const char *why)
{
	struct wpeer *p = &w->peers[idx];
	if (p->dead)
		return;
	p->dead = true;
	KLOG_INFO("wire: peer %d dropped (%s)", idx, why);
	fi_av_remove(w->av, &p->fa, 1, 0);
}

/* ---- small pools --------------------------------------------------------- */

struct txd *wire_txd_get(struct kinet_wire *w, const struct wire_qp *wq)
{
	struct txd *t = w->txfree;
	if (!t)
		return NULL;
	w->txfree = t->next;
	t->next = NULL;
	t->big = NULL;
	t->qpn = wq->qp->qpn;
	t->gen = wq->gen;
	return t;
}

void wire_txd_put(struct kinet_wire *w, struct txd *t)
{
	if (t->big)
		w->bigfree[w->nbig++] = t->big;
	t->big = NULL;
	t->next = w->txfree;
	w->txfree = t;
}

static struct wire_qp *wq_find(struct kinet_wire *w, uint32_t qpn)
{
	for (int i = 0; i < w->nqps; i++)
		if (w->qps[i]->qp->qpn == qpn)
			return w->qps[i];
	return NULL;
}

/* ---- scatter/gather helpers -------------------------------------------- */

/* Pieces of [off, off+n) of a list; -1 when more than max are needed. */
int wire_iov_slice(const struct soft_iov *iov, int niov, uint64_t off, uint64_t n,
		   struct soft_iov *out, int max)
{
	int k = 0;
	for (int i = 0; i < niov && n > 0; i++) {
		if (off >= iov[i].len) {
			off -= iov[i].len;
			continue;
		}
		uint64_t take = iov[i].len - off;
		if (take > n)
			take = n;
		if (k == max)
			return -1;
		out[k].ptr = iov[i].ptr + off;
		out[k].len = take;
		out[k].kind = iov[i].kind;
		k++;
		n -= take;
		off = 0;
	}
	return n ? -1 : k;
}

uint64_t wire_gpu_bytes(const struct soft_iov *iov, int n)
{
	uint64_t b = 0;
	for (int i = 0; i < n; i++)
		if (iov[i].kind != KINET_MEM_HOST)
			b += iov[i].len;
	return b;
}

/* ---- sending --------------------------------------------------------------- */

/* A message of header and n payload bytes (host memory) that fits the
 * provider's inject size: no completion, no buffer. 0, -EAGAIN, -ECONNRESET. */
static int send_inject(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		       const void *data, uint32_t n)
{
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	uint8_t b[SMALL];
	m->len = n;
	wire_enc(b, m);
	if (n)
		memcpy(b + HSZ, data, n);
	ssize_t rc = fi_inject(w->ep, b, HSZ + n, wire_peer_fa(w, wq));
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* A header-only control message. */
int wire_send_ctrl(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	if (HSZ <= w->inject)
		return send_inject(w, wq, m, NULL, 0);
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	struct txd *t = wire_txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	m->len = 0;
	wire_enc(t->small, m);
	ssize_t rc = fi_send(w->ep, t->small, HSZ, NULL, wire_peer_fa(w, wq), &t->fc);
	if (rc)
		wire_txd_put(w, t);
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* A message with a payload of n bytes taken from data[] (any memory kind):
 * inject when small, straight from host memory when the pieces allow it,
 * otherwise through a bounce buffer. 0, -EAGAIN (no resources now),
 * -EFAULT (local copy failed) or -ECONNRESET. */
int wire_send_data(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		   const struct soft_iov *data, int nd, uint64_t n)
{
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	m->len = (uint32_t)n;
	if (HSZ + n <= w->inject && HSZ + n <= SMALL) {
		uint8_t b[SMALL];
		struct soft_iov dst = {b, n, KINET_MEM_HOST};
		if (n && soft_copy_iov(&dst, 1, data, nd, n))
			return -EFAULT;
		uint64_t g = wire_gpu_bytes(data, nd);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		return send_inject(w, wq, m, b, (uint32_t)n);
	}
	struct txd *t = wire_txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	wire_enc(t->small + HOFF, m);
	ssize_t rc;
	bool direct = n > SMALL - HDR && nd >= 1 && (size_t)nd + 1 <= w->iov_limit &&
		      wire_gpu_bytes(data, nd) == 0;
	if (direct) {
		struct iovec iov[8];
		iov[0].iov_base = t->small + HOFF;
		iov[0].iov_len = HSZ;
		for (int i = 0; i < nd; i++) {
			iov[i + 1].iov_base = data[i].ptr;
			iov[i + 1].iov_len = data[i].len;
		}
		rc = fi_sendv(w->ep, iov, NULL, (size_t)nd + 1, wire_peer_fa(w, wq), &t->fc);
		if (rc == 0)
			atomic_fetch_add(&w->ctx->c_direct, n);
	} else {
		uint8_t *buf = t->small;
		if (HDR + n > SMALL) {
			if (!w->nbig) {
				wire_txd_put(w, t);
				return -EAGAIN;
			}
			t->big = w->bigfree[--w->nbig];
			buf = t->big;
			memcpy(buf + HOFF, t->small + HOFF, HSZ);
		}
		struct soft_iov dst = {buf + HDR, n, KINET_MEM_HOST};
		if (n && soft_copy_iov(&dst, 1, data, nd, n)) {
			wire_txd_put(w, t);
			return -EFAULT;
		}
		uint64_t g = wire_gpu_bytes(data, nd);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		/* header right before the payload: one contiguous message */
		rc = fi_send(w->ep, buf + HOFF, HSZ + n, NULL, wire_peer_fa(w, wq), &t->fc);
	}
	if (rc) {
		wire_txd_put(w, t);
		if (rc == -FI_EAGAIN)
			return -EAGAIN;
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* ---- receiving -------------------------------------------------------------- */

static void on_rx(struct kinet_wire *w, struct rxbuf *rb, size_t len)
{
	if (len < HSZ)
		goto drop;
	wire_dec(&rb->m, rb->buf + HOFF);
	const struct wmsg *m = &rb->m;
	if (m->len > CHUNK || (size_t)HSZ + m->len != len)
		goto drop; /* malformed */
	struct wire_qp *wq = wq_find(w, m->dst_qpn);
	if (!wq || m->dst_gen != wq->gen)
		goto drop; /* no such QP (any more): as a NIC, drop */
	if (m->type == M_RESP || m->type == M_KA || m->type == M_ACK) {
		if (wq->connected && m->src_qpn == wq->peer_qpn && m->src_gen == wq->peer_gen) {
			wq->last_rx_ns = kn_now_ns();
			if (m->type == M_ACK)
				wire_on_ack(w, wq, m);
			else if (m->type == M_RESP)
				wire_on_resp(w, wq, m, rb->buf + HDR);
			/* the CQEs go out as soon as the answer is read */
			wire_complete(wq);
		}
		goto drop;
	}
	if (m->type != M_REQ && m->type != M_RTS)
		goto drop;
	/* hook (fault injection, kinet_fault_add): a request dropped or corrupted */
	if (soft_ctx(w->ctx)->faults && kinet_soft_fault_rx(wq->qp, m->op, rb->buf + HDR, m->len))
		goto drop;
	/* target: keep it, in message order */
	rb->executed = 0;
	rb->off = 0;
	struct rxbuf **pp = &wq->tq;
	while (*pp && (int32_t)((*pp)->m.msn - m->msn) <= 0)
		pp = &(*pp)->next;
	rb->next = *pp;
	*pp = rb;
	return;
drop:
	wire_rx_release(w, rb);
}

static void fail_by_qpn(struct kinet_wire *w, uint32_t qpn, uint32_t gen, const char *why)
{
	struct wire_qp *wq = wq_find(w, qpn);
	if (!wq || wq->gen != gen || !wq->connected)
		return;
	KLOG_INFO("wire: qp 0x%x: send failed (%s)", qpn, why);
	wire_drop_peer(w, wq->peer, why);
	if (wq->head != wq->tail)
		wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
}

static int ctx_kind(void *op_context)
{
	return *(int *)((uint8_t *)op_context + sizeof(struct fi_context));
}

int wire_poll_cq(struct kinet_wire *w)
{
	int work = 0;
	struct fi_cq_msg_entry ce[16];
	for (int round = 0; round < 8; round++) {
		ssize_t n = fi_cq_read(w->cq, ce, 16);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(w->cq, &err, 0) <= 0)
				break;
			work++;
			if (!err.op_context)
				continue;
			int kind = ctx_kind(err.op_context);
			if (kind == CTX_RX) {
				struct rxbuf *rb = err.op_context;
				if (err.err == FI_ECANCELED)
					continue; /* endpoint closing */
				wire_rx_release(w, rb);
			} else if (kind == CTX_TX) {
				struct txd *t = err.op_context;
				uint32_t qpn = t->qpn, gen = t->gen;
				wire_txd_put(w, t);
				fail_by_qpn(w, qpn, gen, fi_strerror(err.err));
			} else if (kind == CTX_RD) {
				KLOG_DBG("wire: read failed: %s", fi_strerror(err.err));
				wire_rd_done(w, err.op_context, false);
			}
			continue;
		}
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			int kind = ctx_kind(ce[i].op_context);
			if (kind == CTX_RX)
				on_rx(w, ce[i].op_context, ce[i].len);
			else if (kind == CTX_RD)
				wire_rd_done(w, ce[i].op_context, true);
			else
				wire_txd_put(w, ce[i].op_context);
		}
		work += (int)n;
		if (n < 16)
			break;
	}
	wire_repost(w);
	return work;
}

#endif /* KINET_HAVE_FABRIC */
