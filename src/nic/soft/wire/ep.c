/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ep.c - the wire's libfabric endpoint (one per wire): opening and
 * closing it, receive buffers, send descriptors (and the replacements of
 * those a dropped peer keeps), scatter/gather helpers, sending messages.
 */

#include <stdlib.h>
#include <string.h>
#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

/* ---- endpoint ------------------------------------------------------------ */

/* A libfabric return code as the errno it means: libfabric's codes below
 * FI_ERRNO_OFFSET are errno values (FI_ENOMEM is ENOMEM, ...); its own
 * (truncation, no EQ bound, "other" ...) say that the provider is not
 * usable here. */
int wire_errno(int fi_rc)
{
	int e = fi_rc < 0 ? -fi_rc : fi_rc;
	if (e == 0)
		return 0;
	return e < FI_ERRNO_OFFSET ? -e : -ENODEV;
}

/* Closes the endpoint; its shm region's name is forgotten first (libfabric
 * removes the region at the close; a later one of that name is not ours). */
void wire_ep_close(struct kinet_wire *w)
{
	if (w->ep) {
		wire_shm_region_del(w->addr, w->addr_len);
		fi_close(&w->ep->fid);
	}
	w->ep = NULL;
}

int wire_post_rx(struct kinet_wire *w, struct rxbuf *rb)
{
	ssize_t rc = fi_recv(w->ep, rb->buf + HOFF, HSZ + CHUNK,
			     wire_ldesc(w, rb->buf + HOFF, HSZ + CHUNK), FI_ADDR_UNSPEC, &rb->fc);
	if (rc == 0)
		return 0;
	if (rc == -FI_EAGAIN) { /* later, from the progress loop */
		rb->next = w->repost;
		w->repost = rb;
		return 0;
	}
	KLOG_ERR("wire: fi_recv: %s", fi_strerror((int)-rc));
	return wire_errno((int)rc);
}

/* A received message is done with: a receive buffer is posted again at the
 * end of the poll or pass (answers go out first), a copy is freed. */
void wire_rx_release(struct kinet_wire *w, struct rxbuf *rb)
{
	if (rb->heap) {
		rb->owner->tq_bytes -= HDR + rb->m.len;
		free(rb->buf);
		free(rb);
		return;
	}
	if (rb->held) {
		rb->held = false;
		w->rx_held--;
	}
	rb->executed = 0;
	rb->off = 0;
	rb->next = w->repost;
	w->repost = rb;
}

void wire_repost(struct kinet_wire *w)
{
	if (!w->ep)
		return;
	while (w->repost) {
		struct rxbuf *rb = w->repost;
		w->repost = rb->next;
		ssize_t rc = fi_recv(w->ep, rb->buf + HOFF, HSZ + CHUNK,
				     wire_ldesc(w, rb->buf + HOFF, HSZ + CHUNK), FI_ADDR_UNSPEC,
				     &rb->fc);
		if (rc) {
			rb->next = w->repost;
			w->repost = rb;
			break;
		}
	}
}

/* The CQ, the address vector and the endpoint, bound and enabled, and our
 * address: at creation, and again after the endpoint was closed (ep_reset:
 * rxm leaves a closed endpoint's wait callback in its CQ, which must go
 * with it). */
static int ep_open_once(struct kinet_wire *w, const char **step)
{
	int rc;
	/* a wait fd lets an idle engine sleep until the network has something;
	 * with it rxm keeps the tcp sockets in an epoll set, and every round
	 * trip costs 2 to 3 us more than without (KINET_NET_CQ_WAIT=none,
	 * libfabric 1.17, docs/perf.md) */
	struct fi_cq_attr cqa = {.size = 4096, .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_FD};
	*step = "fi_cq_open";
	if (strcmp(KT(NET_CQ_WAIT), "none") && fi_cq_open(w->dom, &cqa, &w->cq, NULL) == 0) {
		if (fi_control(&w->cq->fid, FI_GETWAIT, &w->wait_fd))
			w->wait_fd = -1;
	} else {
		w->wait_fd = -1;
		cqa.wait_obj = FI_WAIT_NONE;
		if ((rc = fi_cq_open(w->dom, &cqa, &w->cq, NULL)))
			return rc;
	}
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	*step = "fi_av_open";
	if ((rc = fi_av_open(w->dom, &ava, &w->av, NULL)))
		return rc;
	w->av_used = 0;
	w->av_full_said = false; /* a new vector: room again */
	*step = "fi_endpoint";
	if ((rc = fi_endpoint(w->dom, w->info, &w->ep, NULL)))
		return rc;
	*step = "fi_ep_bind";
	if ((rc = fi_ep_bind(w->ep, &w->av->fid, 0)) ||
	    (rc = fi_ep_bind(w->ep, &w->cq->fid, FI_TRANSMIT | FI_RECV)))
		return rc;
	*step = "fi_enable";
	if ((rc = fi_enable(w->ep)))
		return rc;
	w->addr_len = sizeof(w->addr);
	*step = "fi_getname";
	if ((rc = fi_getname(&w->ep->fid, w->addr, &w->addr_len)))
		return rc;
	return 0;
}

/* ep_open_once; on shm, with our own name (wire_shm_name), after the regions
 * that ended processes left in /dev/shm are removed (the first time). */
int wire_ep_open(struct kinet_wire *w, const char **step)
{
	const char *pn = w->info->fabric_attr->prov_name;
	bool shm = pn && !strcmp(pn, "shm");
	if (!shm)
		return ep_open_once(w, step);
	*step = "naming the shm endpoint";
	int rc = wire_shm_name(w->info);
	if (rc)
		return -FI_ENOMEM;
	wire_shm_lock(true);
	char names[512];
	int n = wire_shm_clear_stale(names, sizeof(names));
	if (n)
		KLOG_INFO("wire: removed %d shm region(s) of processes that have ended: %s", n,
			  names);
	rc = ep_open_once(w, step);
	wire_shm_lock(false);
	if (rc == 0)
		wire_shm_region_add(w->addr, w->addr_len); /* removed at exit if still open */
	return rc;
}

/* ---- small pools --------------------------------------------------------- */

/* A replacement buffer (room reserved in w->extra): kept until the wire
 * is destroyed, registered for local descriptors. */
static void extra_add(struct kinet_wire *w, void *p, size_t n)
{
	w->extra_len[w->nextra] = n;
	w->extra[w->nextra++] = p;
	if (!wire_lreg_add(w, p, n))
		KLOG_WARN("wire: a replacement buffer has no local descriptor: operations on it "
			  "fail");
}

/* Takes a send of a dropped peer, which the provider may never complete,
 * out of the pool (a late completion puts it back) and puts a new one in
 * its place. The regions it sends from stay held (t->mr) until then or
 * until its connection is closed. */
void wire_txd_write_off(struct kinet_wire *w, struct txd *t)
{
	if (t->peer >= 0 && t->peer < w->npeers)
		w->peers[t->peer].nbusy--;
	wire_txd_unbusy_qp(w, t);
	t->fence = t->what == TX_FENCE;
	t->what = TX_LOST;
	struct txd *n = calloc(1, sizeof(*n));
	struct txd **all = n ? realloc(w->txall, (size_t)(w->ntxall + 1) * sizeof(*all)) : NULL;
	void **ex = all ? realloc(w->extra, (size_t)(w->nextra + 2) * sizeof(*ex)) : NULL;
	if (all)
		w->txall = all;
	if (ex)
		w->extra = ex;
	size_t *el = ex ? realloc(w->extra_len, (size_t)(w->nextra + 2) * sizeof(*el)) : NULL;
	if (el)
		w->extra_len = el;
	if (!el) {
		free(n);
		return; /* the pool is one smaller */
	}
	n->kind = CTX_TX;
	w->txall[w->ntxall++] = n;
	extra_add(w, n, sizeof(*n));
	n->next = w->txfree;
	w->txfree = n;
	if (t->big) {
		/* its bounce buffer stays with it: another one for the pool */
		uint8_t *b = malloc(HDR + CHUNK);
		if (b) {
			extra_add(w, b, HDR + CHUNK);
			w->bigfree[w->nbig++] = b;
		}
	}
}

struct txd *wire_txd_get(struct kinet_wire *w, const struct wire_qp *wq)
{
	struct txd *t = w->txfree;
	if (!t)
		return NULL;
	w->txfree = t->next;
	t->next = NULL;
	t->big = NULL;
	t->busy = false;
	t->what = TX_PLAIN;
	t->nmr = 0;
	t->peer = wq->peer;
	t->qpn = wq->qp->qpn;
	t->gen = wq->gen;
	return t;
}

/* Marks a descriptor as handed to the provider (fi_send* succeeded) for
 * wq, which has one more in flight. */
void wire_txd_busy(struct kinet_wire *w, struct wire_qp *wq, struct txd *t)
{
	t->busy = true;
	if (t->peer >= 0)
		w->peers[t->peer].nbusy++;
	wq->ntxd++;
}

/* The QP that sent t has one descriptor fewer in flight. */
void wire_txd_unbusy_qp(struct kinet_wire *w, const struct txd *t)
{
	struct wire_qp *wq = wire_wq_find(w, t->qpn);
	if (wq && wq->gen == t->gen && wq->ntxd)
		wq->ntxd--;
}

void wire_txd_put(struct kinet_wire *w, struct txd *t)
{
	if (t->busy && t->peer >= 0 && t->peer < w->npeers)
		w->peers[t->peer].nbusy--;
	t->busy = false;
	t->nmr = 0;
	if (t->big)
		w->bigfree[w->nbig++] = t->big;
	t->big = NULL;
	t->next = w->txfree;
	w->txfree = t;
}

bool wire_txd_uses(const struct kinet_wire *w, const kinet_mr *mr, int *peer)
{
	for (int i = 0; i < w->ntxall; i++) {
		const struct txd *t = w->txall[i];
		if (!t->busy || (t->what != TX_DIRECT && t->what != TX_LOST))
			continue;
		for (int k = 0; k < t->nmr; k++)
			if (t->mr[k] == mr) {
				*peer = t->peer;
				return true;
			}
	}
	return false;
}

struct wire_qp *wire_wq_find(struct kinet_wire *w, uint32_t qpn)
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
		out[k].mr = iov[i].mr;
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

#define LIVE_CHECK_NS 2000ull /* a pidfd poll costs about 0.5 us: not on every send */

bool wire_peer_gone(struct kinet_wire *w, int idx)
{
	struct wpeer *p = &w->peers[idx];
	if (p->gone)
		return true;
	if (!p->pid)
		return false;
	uint64_t now = kn_now_ns();
	if (now - p->live_ns < LIVE_CHECK_NS)
		return false;
	p->live_ns = now;
	if (!wire_shm_pid_ended(p->pidfd, p->pid))
		return false;
	p->gone = true;
	KLOG_INFO("wire: peer %d: its process (pid %d) has ended: nothing more is sent to it",
		  idx, p->pid);
	return true;
}

/* A message of header and n payload bytes (host memory) that fits the
 * provider's inject size: no completion, no buffer. 0, -EAGAIN, -ECONNRESET. */
static int send_inject(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		       const void *data, uint32_t n)
{
	if (w->peers[wq->peer].dead || !w->ep || wire_peer_gone(w, wq->peer))
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

/* A header-only message with a send descriptor (a completion). */
static int send_ctrl_txd(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	const struct wpeer *p = &w->peers[wq->peer];
	if (p->dead || p->removed || !w->ep || wire_peer_gone(w, wq->peer))
		return -ECONNRESET;
	struct txd *t = wire_txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	m->len = 0;
	wire_enc(t->small, m);
	ssize_t rc = fi_send(w->ep, t->small, HSZ, wire_ldesc(w, t->small, HSZ), wire_peer_fa(w, wq),
			     &t->fc);
	if (rc)
		wire_txd_put(w, t);
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wire_txd_busy(w, wq, t);
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* A header-only control message. */
int wire_send_ctrl(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	if (HSZ <= w->inject)
		return send_inject(w, wq, m, NULL, 0);
	return send_ctrl_txd(w, wq, m);
}

/* A header-only message to peer idx, of no QP of ours (the holds, F_RDFIN):
 * where the provider has connections (w->conn) it also goes to a dropped
 * peer whose connection is still there (it fails at once on a broken one);
 * elsewhere a dropped peer gets nothing (-ECONNRESET: its holds wait for
 * the endpoint to close, wire_settle). TX_FENCE: a fence, id, with a
 * completion (wire_fence_done once it is out); TX_PLAIN: injected when it
 * fits. 0, -EAGAIN or -ECONNRESET. */
int wire_send_peer(struct kinet_wire *w, int idx, struct wmsg *m, uint8_t what, uint32_t id)
{
	const struct wpeer *p = &w->peers[idx];
	if (p->removed || !w->ep || (p->dead && !w->conn) || wire_peer_gone(w, idx))
		return -ECONNRESET;
	m->len = 0;
	ssize_t rc;
	if (what == TX_PLAIN && HSZ <= w->inject) {
		uint8_t b[HSZ];
		wire_enc(b, m);
		rc = fi_inject(w->ep, b, HSZ, p->fa);
	} else {
		struct txd *t = w->txfree;
		if (!t)
			return -EAGAIN;
		w->txfree = t->next;
		t->next = NULL;
		t->big = NULL;
		t->nmr = 0;
		t->peer = idx;
		t->qpn = t->gen = 0; /* of no QP */
		wire_enc(t->small, m);
		rc = fi_send(w->ep, t->small, HSZ, wire_ldesc(w, t->small, HSZ), p->fa, &t->fc);
		if (rc) {
			t->busy = false;
			wire_txd_put(w, t);
		} else {
			t->what = what;
			t->seq = id;
			t->busy = true;
			w->peers[idx].nbusy++;
		}
	}
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc) {
		KLOG_DBG("wire: send to peer %d: %s", idx, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	return 0;
}

/* A message with a payload of n bytes taken from data[] (any memory kind):
 * inject when small, straight from host memory when the pieces allow it,
 * otherwise through a bounce buffer. 0, -EAGAIN (no resources now),
 * -EFAULT (local copy failed) or -ECONNRESET. */
int wire_send_data(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		   const struct soft_iov *data, int nd, uint64_t n)
{
	if (w->peers[wq->peer].dead || !w->ep || wire_peer_gone(w, wq->peer))
		return -ECONNRESET;
	m->len = (uint32_t)n;
	if (HSZ + n <= w->inject && HSZ + n <= SMALL) {
		uint8_t b[SMALL];
		struct soft_iov dst = {b, n, KINET_MEM_HOST, NULL};
		if (n && soft_copy_iov(&dst, 1, data, nd, n))
			return -EFAULT;
		uint64_t g = wire_gpu_bytes(data, nd);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		return send_inject(w, wq, m, b, (uint32_t)n);
	}
	/* one QP does not take every descriptor (a silent peer's queued sends
	 * would starve the others): at most TXQ_MAX in flight each */
	if (wq->ntxd >= TXQ_MAX)
		return -EAGAIN;
	struct txd *t = wire_txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	wire_enc(t->small + HOFF, m);
	ssize_t rc;
	uint64_t g = wire_gpu_bytes(data, nd);
	/* straight from user memory: host memory, and GPU memory the provider
	 * took (FI_HMEM); with local descriptors, regions registered with it
	 * (the region of a piece is alive: deregistration fails this request
	 * under the wire's lock before it returns) */
	bool direct = n > SMALL - HDR && nd >= 1 && (size_t)nd + 1 <= w->iov_limit &&
		      m->type == M_REQ;
	void *desc[TX_IOV + 1];
	for (int i = 0; direct && i < nd; i++) {
		desc[i + 1] = NULL;
		if (data[i].kind != KINET_MEM_HOST || w->mr_local) {
			struct wmreg *mg = data[i].mr ? wire_mr_desc(w, data[i].mr) : NULL;
			if (!mg || (data[i].kind != KINET_MEM_HOST) != (mg->mr->kind == KINET_MEM_CUDA))
				direct = false;
			else
				desc[i + 1] = mg->desc;
		}
	}
	if (direct) {
		struct iovec iov[TX_IOV + 1];
		iov[0].iov_base = t->small + HOFF;
		iov[0].iov_len = HSZ;
		desc[0] = wire_ldesc(w, t->small + HOFF, HSZ);
		for (int i = 0; i < nd; i++) {
			iov[i + 1].iov_base = data[i].ptr;
			iov[i + 1].iov_len = data[i].len;
		}
		rc = fi_sendv(w->ep, iov, desc, (size_t)nd + 1, wire_peer_fa(w, wq), &t->fc);
		if (rc == 0) {
			atomic_fetch_add(&w->ctx->c_direct, n);
			w->n_hmem_bytes += g;
			/* the provider reads these regions until the completion: the
			 * request does not complete before it, deregistration waits */
			t->what = TX_DIRECT;
			for (int i = 0; i < nd; i++) {
				int k = 0;
				while (k < t->nmr && t->mr[k] != data[i].mr)
					k++;
				if (k == t->nmr && data[i].mr)
					t->mr[t->nmr++] = data[i].mr;
			}
		}
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
		struct soft_iov dst = {buf + HDR, n, KINET_MEM_HOST, NULL};
		if (n && soft_copy_iov(&dst, 1, data, nd, n)) {
			wire_txd_put(w, t);
			return -EFAULT;
		}
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		/* header right before the payload: one contiguous message */
		rc = fi_send(w->ep, buf + HOFF, HSZ + n, wire_ldesc(w, buf + HOFF, HSZ + n),
			     wire_peer_fa(w, wq), &t->fc);
	}
	if (rc) {
		wire_txd_put(w, t);
		if (rc == -FI_EAGAIN)
			return -EAGAIN;
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wire_txd_busy(w, wq, t);
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

#endif /* KINET_HAVE_FABRIC */
