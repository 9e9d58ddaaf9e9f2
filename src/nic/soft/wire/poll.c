/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * poll.c - the wire's libfabric CQ: polling it, received messages to the
 * requester's answers or to the target's queue, completions of sends and
 * reads; and settling after peers were dropped (the provider let go of
 * them?), with closing and opening the endpoint again (ep_reset) where
 * only that ends what the provider keeps.
 */

#include <stdlib.h>
#include <string.h>
#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

/* ---- receiving -------------------------------------------------------------- */

static void on_rx(struct kinet_wire *w, struct rxbuf *rb, size_t len)
{
	if (len < HSZ)
		goto drop;
	wire_dec(&rb->m, rb->buf + HOFF);
	const struct wmsg *m = &rb->m;
	if (m->len > CHUNK || (size_t)HSZ + m->len != len)
		goto drop; /* malformed */
	if (m->type == M_KA && (m->flags & F_RDFIN)) {
		/* the target reads no more of a requester QP's sources (which
		 * may be gone by now: its holds outlive it) */
		wire_rd_over(w, m);
		goto drop;
	}
	struct wire_qp *wq = wire_wq_find(w, m->dst_qpn);
	if (!wq || m->dst_gen != wq->gen)
		goto drop; /* no such QP (any more): as a NIC, drop */
	if (m->type == M_KA && (m->flags & F_RDREQ)) {
		/* the requester finished requests without our answer: read no
		 * more of them, and say so */
		if (wq->connected && m->src_qpn == wq->peer_qpn && m->src_gen == wq->peer_gen)
			wire_tgt_stop(w, wq, m->seq);
		goto drop;
	}
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
	/* hook (fault injection, kinet_fault_add): a request dropped, corrupted
	 * or delivered twice (a copy replayed once the target served it) */
	int f = soft_ctx(w->ctx)->faults
			? kinet_soft_fault_rx(wq->qp, m->op, rb->buf + HDR, m->len)
			: 0;
	if (f == 1)
		goto drop;
	if (f == 2 && !wq->dup)
		wq->dup = wire_rx_heap_copy(wq, rb); /* NULL: no memory, no duplicate */
	/* target: keep it, in message order; a duplicate (the network's, or
	 * the one above) goes */
	rb->executed = 0;
	rb->off = 0;
	rb->held = true;
	w->rx_held++;
	if (!wire_tq_insert(wq, rb))
		goto drop;
	return;
drop:
	wire_rx_release(w, rb);
}

static void fail_by_qpn(struct kinet_wire *w, uint32_t qpn, uint32_t gen, const char *why);

/* A send is out (ok) or failed: what waited for it goes on. */
static void tx_done(struct kinet_wire *w, struct txd *t, bool ok, int err)
{
	if (t->what == TX_LOST) {
		/* written off, back after all: a descriptor again (its bounce
		 * buffer was replaced: it stays out of the pool) */
		if (t->fence)
			wire_fence_done(w, t->peer, t->seq);
		t->fence = false;
		t->what = TX_PLAIN;
		t->busy = false;
		t->nmr = 0;
		t->big = NULL;
		t->next = w->txfree;
		w->txfree = t;
		return;
	}
	uint8_t what = t->what;
	uint32_t qpn = t->qpn, gen = t->gen, seq = t->seq;
	int peer = t->peer;
	wire_txd_unbusy_qp(w, t);
	wire_txd_put(w, t);
	if (what == TX_FENCE)
		wire_fence_done(w, peer, seq); /* out, or its connection failed */
	if (!ok)
		fail_by_qpn(w, qpn, gen, fi_strerror(err));
}

static void fail_by_qpn(struct kinet_wire *w, uint32_t qpn, uint32_t gen, const char *why)
{
	struct wire_qp *wq = wire_wq_find(w, qpn);
	if (!wq || wq->gen != gen || !wq->connected)
		return;
	KLOG_INFO("wire: qp 0x%x: send failed (%s)", qpn, why);
	wire_drop_peer(w, wq->peer, why);
	if (wq->head != wq->tail)
		wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
}

/* A target read has completed (ok) or failed; one that was given up and
 * has ended after all tells its peer (wire_lost_done). */
static void rd_done(struct kinet_wire *w, struct rdop *op, bool ok)
{
	int lost = wire_rd_done(w, op, ok);
	if (lost >= 0)
		wire_lost_done(w, lost);
}

static int ctx_kind(void *op_context)
{
	return *(int *)((uint8_t *)op_context + sizeof(struct fi_context));
}

int wire_poll_cq(struct kinet_wire *w)
{
	int work = wire_rd_reap(w); /* reads copied into place meanwhile */
	if (!w->cq)
		return work; /* the endpoint stays closed (ep_reset failed) */
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
				tx_done(w, err.op_context, false, err.err);
			} else if (kind == CTX_RD) {
				KLOG_DBG("wire: read failed: %s", fi_strerror(err.err));
				rd_done(w, err.op_context, false);
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
				rd_done(w, ce[i].op_context, true);
			else
				tx_done(w, ce[i].op_context, true, 0);
		}
		work += (int)n;
		if (n < 16)
			break;
	}
	wire_repost(w);
	return work;
}

/* ---- settling, closing and opening the endpoint again ------------------- */

/* May the whole endpoint be closed now? Not with a read answer possibly
 * half received where the provider cannot close under one. */
bool wire_reset_safe(const struct kinet_wire *w)
{
	if (w->close_safe)
		return true;
	if (atomic_load(&w->rd_inflight) > 0)
		return false;
	for (int i = 0; i < w->npeers; i++)
		if (w->peers[i].nlost)
			return false;
	return true;
}

/* Closes the endpoint and opens a new one: every transfer ends with it
 * (the provider closes every connection), whatever it kept. Every QP of the
 * context fails; the context's address changes. For a provider that does
 * not close a removed address's connection (FI_AV_REMOVE_CLEANUP off), and
 * for an address vector that refuses addresses it should take. */
static void ep_reset(struct kinet_wire *w)
{
	w->reset_due = false;
	w->nresets++;
	KLOG_WARN("wire: closing the endpoint and opening a new one (%s): every QP of this "
		  "context fails and its descriptors must be exported again",
		  w->av_cleanup ? "its address vector refuses addresses"
				: "a dropped peer keeps memory and the provider does not close its "
				  "connection: FI_AV_REMOVE_CLEANUP is off");
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		if (wq->connected && wq->head != wq->tail)
			wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, false);
		wire_tq_drop(w, wq);
	}
	for (int i = 0; i < w->npeers; i++) {
		w->peers[i].dead = w->peers[i].removed = w->peers[i].closed = true;
		w->peers[i].settle = w->peers[i].want_close = false;
	}
	wire_regs_close(w);
	wire_ep_close(w);
	/* what the close cancelled: nothing of it is used any more */
	for (int n = 0; n < 100000; n++) {
		struct fi_cq_msg_entry ce[16];
		ssize_t k = fi_cq_read(w->cq, ce, 16);
		if (k == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(w->cq, &err, 0) <= 0)
				break;
			continue;
		}
		if (k <= 0)
			break;
	}
	/* whatever is still in flight never completes now */
	for (int i = 0; i < w->nrdall; i++)
		if (w->rdall[i]->busy)
			rd_done(w, w->rdall[i], false);
	for (int i = 0; i < w->ntxall; i++) {
		struct txd *t = w->txall[i];
		if (t->what == TX_LOST) {
			t->what = TX_PLAIN;
			t->busy = false;
			t->nmr = 0;
			t->big = NULL; /* replaced already */
			t->next = w->txfree;
			w->txfree = t;
		} else if (t->busy) {
			wire_txd_put(w, t);
		}
	}
	wire_holds_release(w, -1);
	for (int i = 0; i < w->npeers; i++)
		w->peers[i].nbusy = w->peers[i].nrd = 0;
	w->repost = NULL;
	w->rx_held = 0;
	for (int i = NRX - 1; i >= 0; i--) {
		w->rx[i].held = false;
		w->rx[i].executed = 0;
		w->rx[i].off = 0;
		w->rx[i].next = w->repost;
		w->repost = &w->rx[i];
	}
	if (w->av)
		fi_close(&w->av->fid);
	w->av = NULL;
	if (w->cq)
		fi_close(&w->cq->fid);
	w->cq = NULL;
	w->wait_fd = -1;
	const char *step;
	int rc = wire_ep_open(w, &step);
	if (rc == 0 && !wire_lregs_open(w)) {
		step = "local descriptors";
		rc = -FI_ENOMEM;
	}
	if (rc) {
		KLOG_ERR("wire: %s: %s: the endpoint stays closed", step, fi_strerror(-rc));
		wire_regs_close(w);
		wire_ep_close(w);
		return;
	}
	wire_repost(w);
}

/* Where no poll of the CQ is under way (the caller holds the lock): checks
 * that the provider let go of the peers removed since the last call, and
 * closes and opens the endpoint again when that is due. A closed
 * connection's reads and most sends come back cancelled; a send the
 * provider will never complete (nothing can reach its memory any more) is
 * written off, and the peer's holds are released. A peer removed without
 * the cleanup keeps what the provider does for it: only closing the
 * endpoint ends that. */
void wire_settle(struct kinet_wire *w)
{
	if (w->drop_check) {
		w->drop_check = false;
		for (int i = 0; i < 64 && wire_poll_cq(w) > 0; i++)
			;
		for (int i = 0; i < w->npeers; i++) {
			struct wpeer *p = &w->peers[i];
			if (!p->settle)
				continue;
			p->settle = false;
			if (p->closed) {
				if (p->nrd) {
					/* a read that was not cancelled: the connection is
					 * not closed after all */
					KLOG_WARN("wire: peer %d: reads still in flight after "
						  "its connection was closed "
						  "(FI_AV_REMOVE_CLEANUP not in effect?)", i);
					w->av_cleanup = false;
					p->closed = false;
				} else {
					/* nothing can reach its sends' memory any more */
					for (int k = 0; k < w->ntxall; k++) {
						struct txd *t = w->txall[k];
						if (t->busy && t->peer == i && t->what != TX_LOST)
							wire_txd_write_off(w, t);
						if (t->busy && t->peer == i)
							t->nmr = 0;
					}
					wire_holds_release(w, i);
					continue;
				}
			}
			bool sends = p->nbusy > 0;
			for (int k = 0; k < w->ntxall && !sends; k++)
				sends = w->txall[k]->busy && w->txall[k]->peer == i;
			if (sends || wire_holds_peer(w, i))
				w->reset_due = true;
		}
	}
	if (w->reset_due && wire_reset_safe(w))
		ep_reset(w);
}

#endif /* KINET_HAVE_FABRIC */
