/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c - the software NIC's wire to QPs in other processes: the entry
 * points the engine calls (wire.h: posting, progress, the target's pass,
 * the idle wait), the QP lifecycle (local end, connect, reset, close) and,
 * in a build without libfabric, their stubs. The protocol and how the
 * files share the work: wire_int.h.
 */

#define _GNU_SOURCE /* ppoll */
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>
#include <kinet/net.h>
#include "nic/soft/wire_int.h"

#if KINET_HAVE_FABRIC

/* ---- engine entry points ---------------------------------------------------- */

bool kinet_wire_can_post(kinet_qp *qp)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	return wq && !wq->failed && wq->tail - wq->head < WIN;
}

int kinet_wire_post(kinet_qp *qp, struct soft_req *r)
{
	struct kinet_wire *w = soft_qp(qp)->wire;
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (!w || !wq)
		return KN_SYND_TRANSPORT_RETRY_EXC_ERR;
	pthread_mutex_lock(&w->lock);
	struct wreq *e = wire_ent(wq, wq->tail);
	struct soft_req *d = &e->r;
	/* copy what the wire needs; inline data points into r->wqe */
	d->opcode = r->opcode;
	d->signaled = r->signaled;
	d->wqe_idx = r->wqe_idx;
	d->nbb = r->nbb;
	d->raddr = r->raddr;
	d->rkey = r->rkey;
	d->imm = r->imm;
	d->swap_add = r->swap_add;
	d->compare = r->compare;
	d->swap_mask = r->swap_mask;
	d->compare_mask = r->compare_mask;
	d->atomic_size = r->atomic_size;
	d->total = r->total;
	d->niov = r->niov;
	bool inl = false;
	for (int i = 0; i < r->niov; i++) {
		d->iov[i] = r->iov[i];
		if (r->iov[i].ptr >= r->wqe && r->iov[i].ptr < r->wqe + sizeof(r->wqe)) {
			d->iov[i].ptr = d->wqe + (r->iov[i].ptr - r->wqe);
			inl = true;
		}
	}
	if (inl)
		memcpy(d->wqe, r->wqe, (size_t)r->nbb * KN_SEND_WQE_BB);
	e->sent = e->got = 0;
	e->started = false;
	e->fin = false;
	e->done = r->opcode == KN_OPCODE_NOP;
	e->rndv = false;
	e->nmr = 0;
	e->status = 0;
	if (wq->failed) {
		e->done = true;
		e->status = KN_SYND_WR_FLUSH_ERR;
	}
	if (wq->head == wq->tail)
		wq->busy_since_ns = kn_now_ns();
	wq->tail++;
	wire_pump(w, wq, true); /* out on this very pass (rendezvous: the next) */
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int kinet_wire_progress(kinet_qp *qp)
{
	struct kinet_wire *w = soft_qp(qp)->wire;
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (!w || !wq)
		return 0;
	/* the endpoint itself is polled once per engine pass, by
	 * kinet_wire_ctx_progress, which also writes CQEs as answers arrive */
	if (__atomic_load_n(&wq->head, __ATOMIC_RELAXED) == wq->tail)
		return 0; /* nothing outstanding (only this engine adds to tail) */
	pthread_mutex_lock(&w->lock);
	int work = 0;
	if (atomic_load(&qp->state) == KINET_QPS_ERR && !wq->failed && wq->head != wq->tail) {
		/* moved to ERR from outside: flush what is outstanding */
		wq->failed = true;
		for (uint32_t s = wq->head; s != wq->tail; s++) {
			wire_ent(wq, s)->done = true;
			wire_ent(wq, s)->status = KN_SYND_WR_FLUSH_ERR;
		}
		wq->txn = wq->tail;
	}
	if (!wq->failed && wq->head != wq->tail) {
		if (w->peers[wq->peer].dead) {
			wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, false);
		} else {
			uint64_t ref = wq->last_rx_ns > wq->busy_since_ns ? wq->last_rx_ns
									 : wq->busy_since_ns;
			if (kn_now_ns() - ref > w->timeout_ns) {
				KLOG_WARN("wire: qp 0x%x: no answer from qp 0x%x for %llu ms",
					  qp->qpn, wq->peer_qpn,
					  (unsigned long long)(w->timeout_ns / 1000000ull));
				wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
			}
		}
	}
	work += wire_pump(w, wq, false);
	work += wire_complete(wq);
	pthread_mutex_unlock(&w->lock);
	return work;
}

bool kinet_wire_drained(kinet_qp *qp)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	return !wq || wq->head == wq->tail;
}

bool kinet_wire_pinned(kinet_ctx *ctx)
{
	struct kinet_wire *w = __atomic_load_n(&soft_ctx(ctx)->wire, __ATOMIC_ACQUIRE);
	return w && atomic_load(&w->rd_inflight) > 0;
}

/* Does a writer wait for the context's key table? (The caller holds it for
 * reading; with writers preferred, another read lock is refused then.) */
static bool writer_waiting(kinet_ctx *ctx)
{
	if (pthread_rwlock_tryrdlock(&soft_ctx(ctx)->keys.lock) != 0)
		return true;
	pthread_rwlock_unlock(&soft_ctx(ctx)->keys.lock);
	return false;
}

int kinet_wire_ctx_progress(kinet_ctx *ctx)
{
	struct kinet_wire *w = __atomic_load_n(&soft_ctx(ctx)->wire, __ATOMIC_ACQUIRE);
	if (!w || pthread_mutex_trylock(&w->lock))
		return 0;
	/* reads in flight pin the key table; a writer waiting for it (region
	 * registration or removal) gets it once they have landed: no new reads
	 * until a pass has ended with none in flight (the engines let go of
	 * the table then) */
	if (atomic_load(&w->rd_inflight) == 0) {
		w->draining = false;
		w->epoch++; /* the table may have changed since the last pass */
	}
	int work = wire_poll_cq(w);
	if (!w->draining && atomic_load(&w->rd_inflight) > 0 && writer_waiting(ctx))
		w->draining = true;
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		if (!wq->tq && !wq->pend && !wq->need_ack)
			continue;
		if (wq->connected && w->peers[wq->peer].dead) {
			wire_tq_drop(w, wq);
			continue;
		}
		if (wq->pend && wq->pend->inflight &&
		    kn_now_ns() - wq->pend->last_ns > w->timeout_ns) {
			KLOG_WARN("wire: qp 0x%x: reads from qp 0x%x stalled for %llu ms", wq->qp->qpn,
				  wq->peer_qpn, (unsigned long long)(w->timeout_ns / 1000000ull));
			wire_drop_peer(w, wq->peer, "reads stalled");
			wire_tq_drop(w, wq);
			continue;
		}
		work += wire_serve_target(w, wq);
	}
	wire_repost(w);
	pthread_mutex_unlock(&w->lock);
	return work;
}

int kinet_wire_ctx_wait(kinet_ctx *ctx, uint64_t ns)
{
	struct kinet_wire *w = __atomic_load_n(&soft_ctx(ctx)->wire, __ATOMIC_ACQUIRE);
	if (!w || w->wait_fd < 0)
		return -ENOSYS;
	if (pthread_mutex_trylock(&w->lock))
		return 0; /* another engine is at it: do not sleep */
	struct fid *f = &w->cq->fid;
	int rc = fi_trywait(w->fab, &f, 1);
	pthread_mutex_unlock(&w->lock);
	if (rc != FI_SUCCESS)
		return 0; /* something to read now */
	struct pollfd pf = {.fd = w->wait_fd, .events = POLLIN};
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	ppoll(&pf, 1, &ts, NULL);
	return 0;
}

/* ---- QP lifecycle --------------------------------------------------------------- */

static uint32_t new_gen(void)
{
	uint32_t g = 0;
	if (getrandom(&g, sizeof(g), 0) != (ssize_t)sizeof(g))
		g = (uint32_t)kn_now_ns();
	return g ? g : 1;
}

static int wq_get(struct kinet_wire *w, kinet_qp *qp, struct wire_qp **out)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	if (wq) {
		*out = wq;
		return 0;
	}
	wq = calloc(1, sizeof(*wq));
	if (!wq)
		return -ENOMEM;
	wq->win = calloc(WIN, sizeof(struct wreq));
	if (!wq->win) {
		free(wq);
		return -ENOMEM;
	}
	if (w->nqps == w->qcap) {
		int ncap = w->qcap ? 2 * w->qcap : 16;
		struct wire_qp **t = realloc(w->qps, (size_t)ncap * sizeof(*t));
		if (!t) {
			free(wq->win);
			free(wq);
			return -ENOMEM;
		}
		w->qps = t;
		w->qcap = ncap;
	}
	wq->qp = qp;
	wq->gen = new_gen();
	wq->peer = -1;
	w->qps[w->nqps++] = wq;
	soft_qp(qp)->wire_ep = wq;
	*out = wq;
	return 0;
}

static void peer_unref(struct kinet_wire *w, struct wire_qp *wq)
{
	if (wq->peer < 0)
		return;
	struct wpeer *p = &w->peers[wq->peer];
	if (--p->refs == 0 && !p->dead) {
		/* keep the address (and the provider's connection) for reuse */
	}
	wq->peer = -1;
}

/* Closes the source registrations of every outstanding request. */
static void wq_unreg_all(struct wire_qp *wq)
{
	for (uint32_t s = wq->head; s != wq->tail; s++)
		if (wire_ent(wq, s)->nmr)
			wire_wreq_unreg(wire_ent(wq, s));
}

static void wq_reset(struct kinet_wire *w, struct wire_qp *wq)
{
	wire_tq_drop(w, wq);
	wq_unreg_all(wq);
	peer_unref(w, wq);
	wq->connected = false;
	wq->head = wq->txn = wq->tail = 0;
	wq->msn_tx = wq->msn_rx = 0;
	wq->failed = false;
	wq->tgt_failed = false;
	wq->gen = new_gen();
}

int kinet_wire_local_end(kinet_qp *qp, struct kinet_qp_local *out)
{
	struct kinet_wire *w;
	int rc = wire_get(qp->ctx, &w);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	struct wire_qp *wq;
	rc = wq_get(w, qp, &wq);
	if (rc == 0 && w->addr_len > sizeof(out->addr))
		rc = -EOVERFLOW;
	if (rc == 0) {
		out->gen = wq->gen;
		snprintf(out->transport, sizeof(out->transport), "%s", w->prov);
		memcpy(out->addr, w->addr, w->addr_len);
		out->addr_len = w->addr_len;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* remote->wire_addr holds the peer's QP descriptor (kinet/net.h). */
int kinet_soft_wire_connect(kinet_qp *qp, const struct kinet_qp_remote *remote)
{
	struct kinet_qp_info pi;
	int rc = kinet_qp_desc_parse(remote->wire_addr, remote->wire_addr_len, &pi);
	if (rc)
		return rc;
	struct kinet_wire *w;
	if ((rc = wire_get(qp->ctx, &w)))
		return rc;
	if (strcmp(pi.provider, w->prov)) {
		KLOG_ERR("qp 0x%x: the peer uses libfabric provider \"%s\", this process \"%s\" "
			 "(KINET_FI_PROVIDER must match)", qp->qpn, pi.provider, w->prov);
		return -EPROTO;
	}
	pthread_mutex_lock(&w->lock);
	struct wire_qp *wq;
	if ((rc = wq_get(w, qp, &wq)))
		goto out;
	if (wq->connected) {
		KLOG_ERR("qp 0x%x: already connected (reset it first)", qp->qpn);
		rc = -EINVAL;
		goto out;
	}
	int idx = -1;
	for (int i = 0; i < w->npeers; i++)
		if (!w->peers[i].dead && w->peers[i].len == pi.addr_len &&
		    !memcmp(w->peers[i].addr, pi.addr, pi.addr_len)) {
			idx = i;
			break;
		}
	if (idx < 0) {
		for (int i = 0; i < w->npeers; i++)
			if (w->peers[i].dead && w->peers[i].refs == 0) {
				idx = i; /* reuse the slot */
				break;
			}
		if (idx < 0) {
			struct wpeer *np = realloc(w->peers, (size_t)(w->npeers + 1) * sizeof(*np));
			if (!np) {
				rc = -ENOMEM;
				goto out;
			}
			w->peers = np;
			idx = w->npeers++;
		}
		struct wpeer *p = &w->peers[idx];
		memset(p, 0, sizeof(*p));
		memcpy(p->addr, pi.addr, pi.addr_len);
		p->len = pi.addr_len;
		if (fi_av_insert(w->av, pi.addr, 1, &p->fa, 0, NULL) != 1) {
			KLOG_ERR("qp 0x%x: the peer's wire address is not usable here", qp->qpn);
			p->dead = true;
			rc = -EINVAL;
			goto out;
		}
	}
	w->peers[idx].refs++;
	wq->peer = idx;
	wq->peer_qpn = pi.qpn;
	wq->peer_gen = (uint32_t)pi.gen;
	wq->head = wq->txn = wq->tail = 0;
	wq->msn_tx = wq->msn_rx = 0;
	wq->failed = wq->tgt_failed = false;
	wq->need_ack = false;
	wq->done_seq = wq->acked_seq = (uint32_t)-1; /* before request 0 */
	wq->last_rx_ns = wq->last_tx_ns = kn_now_ns();
	wq->connected = true;
	soft_qp(qp)->peer = NULL;
	qp->peer_qpn = pi.qpn;
	__atomic_store_n(&soft_qp(qp)->wire, w, __ATOMIC_RELEASE);
	KLOG_DBG("qp 0x%x: connected to qp 0x%x over %s", qp->qpn, pi.qpn, w->prov);
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void kinet_wire_qp_reset(kinet_qp *qp)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	struct kinet_wire *w = soft_ctx(qp->ctx)->wire;
	if (!wq || !w)
		return;
	pthread_mutex_lock(&w->lock);
	wq_reset(w, wq);
	pthread_mutex_unlock(&w->lock);
}

void kinet_wire_qp_close(kinet_qp *qp)
{
	struct wire_qp *wq = soft_qp(qp)->wire_ep;
	struct kinet_wire *w = soft_ctx(qp->ctx)->wire;
	if (!wq || !w)
		return;
	pthread_mutex_lock(&w->lock);
	if (wq->head != wq->tail && wq->connected)
		wire_drop_peer(w, wq->peer, "QP destroyed with requests outstanding");
	wire_tq_drop(w, wq);
	wq_unreg_all(wq);
	peer_unref(w, wq);
	for (int i = 0; i < w->nqps; i++)
		if (w->qps[i] == wq) {
			w->qps[i] = w->qps[--w->nqps];
			break;
		}
	pthread_mutex_unlock(&w->lock);
	soft_qp(qp)->wire_ep = NULL;
	soft_qp(qp)->wire = NULL;
	free(wq->win);
	free(wq);
}

void kinet_wire_ctx_close(kinet_ctx *ctx)
{
	struct kinet_wire *w = soft_ctx(ctx)->wire;
	if (!w)
		return;
	soft_ctx(ctx)->wire = NULL;
	wire_destroy(w);
}

#endif
