/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * req.c - the requester side of the wire: the QP's window of
 * outstanding requests, rendezvous writes (registration of the source, RTS
 * messages), sending in order (pump, within the eager flow-control limit),
 * CQEs in WQE order, failure of a QP and of the requests on a deregistered
 * region, holds on rendezvous sources and the fences that release them, and
 * the answers that complete requests (ACKs, responses).
 */

#include <stdlib.h>
#include <string.h>
#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

/* ---- requester ----------------------------------------------------------- */

static bool is_write_or_send(uint8_t op)
{
	return op == KN_OPCODE_RDMA_WRITE || op == KN_OPCODE_RDMA_WRITE_IMM ||
	       op == KN_OPCODE_SEND || op == KN_OPCODE_SEND_IMM;
}

/* Closes the registrations of a rendezvous write: from then on the target
 * can no longer read its source (done before its CQE, whatever the result). */
void wire_wreq_unreg(struct wreq *e)
{
	for (int i = 0; i < e->nmr; i++)
		fi_close(&e->mr[i]->fid);
	e->nmr = 0;
	e->rndv = false;
}

/* Registers the source pieces of a large write from host memory (or GPU
 * memory the provider takes) for the target to read. true: go by
 * rendezvous; false: eager. */
static bool rndv_prepare(struct kinet_wire *w, struct wreq *e)
{
	const struct soft_req *r = &e->r;
	if (!w->rma || !w->rndv_min || r->total < w->rndv_min || r->niov > MAXPC || r->niov < 1 ||
	    (r->opcode != KN_OPCODE_RDMA_WRITE && r->opcode != KN_OPCODE_RDMA_WRITE_IMM))
		return false;
	for (int i = 0; i < r->niov; i++) {
		if (r->iov[i].ptr >= r->wqe && r->iov[i].ptr < r->wqe + sizeof(r->wqe))
			return false; /* inline data: eager */
		/* GPU memory only where the provider takes it (FI_HMEM) */
		if (r->iov[i].kind != KINET_MEM_HOST &&
		    (!r->iov[i].mr || r->iov[i].mr->kind != KINET_MEM_CUDA ||
		     !wire_mr_desc(w, r->iov[i].mr)))
			return false;
	}
	e->nmr = 0;
	int k = 0;
	for (int i = 0; i < r->niov; i++) {
		if (!r->iov[i].len)
			continue;
		struct fid_mr *mr;
		uint64_t key = w->next_key++;
		int rc = wire_reg(w, r->iov[i].ptr, r->iov[i].len, FI_REMOTE_READ,
				  r->iov[i].kind != KINET_MEM_HOST ? r->iov[i].mr : NULL, key, &mr);
		if (rc) {
			KLOG_DBG("wire: fi_mr_reg: %s (eager instead)", fi_strerror(-rc));
			wire_wreq_unreg(e);
			return false;
		}
		e->mr[e->nmr++] = mr;
		e->pc[k].key = w->prov_key ? fi_mr_key(mr) : key;
		e->pc[k].addr = w->virt_addr ? (uint64_t)(uintptr_t)r->iov[i].ptr : 0;
		e->pc[k].len = r->iov[i].len;
		k++;
	}
	e->rndv = true;
	w->n_hmem_bytes += wire_gpu_bytes(r->iov, r->niov); /* the provider reads GPU memory */
	return true;
}

static bool uses_mr(const struct wreq *e, const kinet_mr *mr)
{
	for (int i = 0; i < e->r.niov; i++)
		if (e->r.iov[i].mr == mr)
			return true;
	return false;
}

/* Has the target said it reads no source of request seq any more? */
static bool rd_over(const struct wire_qp *wq, uint32_t seq)
{
	return wq->rd_all || (wq->rd_part && (int32_t)(seq - wq->rd_from) >= 0);
}

static void hold_close_keys(struct whold *h)
{
	for (int i = 0; i < h->nkey; i++)
		fi_close(&h->key[i]->fid);
	h->nkey = 0;
}

/* A rendezvous source the target may still be reading (its request ended
 * without the target's answer): held until the target has said it reads it
 * no more (its keys stay open until then, H_OPEN) and a fence of its
 * connection is out, or the connection is closed. open: the keys of e go
 * with the hold; otherwise they are closed already (the target said so). */
static void hold_add(struct kinet_wire *w, struct wire_qp *wq, struct wreq *e, bool open)
{
	if (w->nholds == w->hcap) {
		int ncap = w->hcap ? 2 * w->hcap : 16;
		struct whold *h = realloc(w->holds, (size_t)ncap * sizeof(*h));
		if (!h) {
			/* no memory to remember it: only closing the connection is sure */
			wire_wreq_unreg(e);
			wire_drop_peer(w, wq->peer, "out of memory");
			wire_close_peer(w, wq->peer);
			return;
		}
		w->holds = h;
		w->hcap = ncap;
	}
	struct whold *h = &w->holds[w->nholds++];
	memset(h, 0, sizeof(*h));
	for (int i = 0; i < e->r.niov && h->nmr < MAXPC; i++) {
		int k = 0;
		while (k < h->nmr && h->mr[k] != e->r.iov[i].mr)
			k++;
		if (k == h->nmr && e->r.iov[i].mr)
			h->mr[h->nmr++] = e->r.iov[i].mr;
	}
	if (open) {
		for (int i = 0; i < e->nmr; i++)
			h->key[i] = e->mr[i];
		h->nkey = e->nmr;
		e->nmr = 0;
		e->rndv = false;
	}
	h->st = open ? H_OPEN : H_FENCE;
	h->peer = wq->peer;
	h->qpn = wq->qp->qpn;
	h->gen = wq->gen;
	h->peer_qpn = wq->peer_qpn;
	h->peer_gen = wq->peer_gen;
	h->seq = e->seq;
}

/* Request e is done with status. answered: by the target's answer for it
 * (an ACK covering it, its response or NAK: the target's reads of it are
 * over). Otherwise (a flush, a local failure) the target may still be
 * reading a rendezvous source: it is held, its keys open, until the target
 * says it reads it no more (wire_holds_progress asks). The CQE does not
 * wait for it: only a success claims the bytes, and a success is answered. */
void wire_finish(struct wire_qp *wq, struct wreq *e, uint32_t status, bool answered)
{
	if (e->done)
		return;
	e->done = true;
	e->status = status;
	wq->eager_out -= e->eager;
	e->eager = 0;
	if (e->nmr) {
		bool reading = e->started && !answered;
		if (reading && !rd_over(wq, e->seq)) {
			hold_add(wq->w, wq, e, true);
		} else {
			wire_wreq_unreg(e);
			if (reading)
				hold_add(wq->w, wq, e, false);
		}
	}
}

/* Drives the holds: asks the target of each source still open to stop
 * reading it (one F_RDREQ per QP, from its oldest such request on), sends
 * the fences of those whose keys are closed (one per peer), and sends the
 * F_RDFIN messages the target side owes. Holds of a peer without a
 * connection wait for wire_settle (released once it is closed). */
int wire_holds_progress(struct kinet_wire *w)
{
	int work = 0;
	for (int i = 0; i < w->nfins;) {
		struct wfin *f = &w->fins[i];
		struct wmsg m = {.type = M_KA, .flags = (uint8_t)(F_RDFIN | (f->all ? F_ALL : 0)),
				 .dst_qpn = f->dst_qpn, .src_qpn = f->src_qpn, .dst_gen = f->dst_gen,
				 .src_gen = f->src_gen, .seq = f->seq};
		int rc = f->peer < w->npeers && !w->peers[f->peer].removed
				 ? wire_send_peer(w, f->peer, &m, TX_PLAIN, 0)
				 : -ECONNRESET;
		if (rc == -EAGAIN) {
			i++;
			continue;
		}
		w->fins[i] = w->fins[--w->nfins]; /* sent, or nobody to tell */
		work++;
	}
	for (int i = 0; i < w->nholds; i++) {
		struct whold *h = &w->holds[i];
		if (w->peers[h->peer].removed)
			continue;
		if (h->st == H_OPEN && !h->asked) {
			struct wmsg m = {.type = M_KA, .flags = F_RDREQ, .dst_qpn = h->peer_qpn,
					 .src_qpn = h->qpn, .dst_gen = h->peer_gen, .src_gen = h->gen,
					 .seq = h->seq};
			for (int k = 0; k < w->nholds; k++) {
				struct whold *o = &w->holds[k];
				if (o->st == H_OPEN && !o->asked && o->qpn == h->qpn &&
				    o->gen == h->gen && (int32_t)(o->seq - m.seq) < 0)
					m.seq = o->seq;
			}
			int rc = wire_send_peer(w, h->peer, &m, TX_PLAIN, 0);
			if (rc == -EAGAIN)
				continue;
			/* sent; or the connection is broken (nothing of it reaches us) */
			for (int k = 0; k < w->nholds; k++) {
				struct whold *o = &w->holds[k];
				if (o->st == H_OPEN && o->qpn == h->qpn && o->gen == h->gen &&
				    (int32_t)(o->seq - m.seq) >= 0)
					o->asked = true;
			}
			work++;
		} else if (h->st == H_FENCE) {
			uint32_t id = w->fence_id + 1;
			struct wmsg m = {.type = M_KA}; /* to no QP: the target drops it */
			if (wire_send_peer(w, h->peer, &m, TX_FENCE, id) == -EAGAIN)
				continue;
			w->fence_id = id;
			for (int k = 0; k < w->nholds; k++)
				if (w->holds[k].st == H_FENCE && w->holds[k].peer == h->peer) {
					w->holds[k].st = H_SENT;
					w->holds[k].fence = id;
				}
			work++;
		}
	}
	return work;
}

/* The target has said it reads no source of the requester QP m->dst_qpn
 * (m->dst_gen) from request m->seq on (F_ALL: none): the keys of those
 * holds are closed, their fences follow. */
void wire_rd_over(struct kinet_wire *w, const struct wmsg *m)
{
	bool all = (m->flags & F_ALL) != 0;
	for (int i = 0; i < w->nholds; i++) {
		struct whold *h = &w->holds[i];
		if (h->st != H_OPEN || h->qpn != m->dst_qpn || h->gen != m->dst_gen ||
		    h->peer_qpn != m->src_qpn || h->peer_gen != m->src_gen)
			continue;
		if (!all && (int32_t)(h->seq - m->seq) < 0)
			continue;
		hold_close_keys(h);
		h->st = H_FENCE;
	}
	struct wire_qp *wq = wire_wq_find(w, m->dst_qpn);
	if (!wq || wq->gen != m->dst_gen || !wq->connected || wq->peer_qpn != m->src_qpn ||
	    wq->peer_gen != m->src_gen)
		return;
	if (all) {
		wq->rd_all = true;
	} else if (!wq->rd_part || (int32_t)(m->seq - wq->rd_from) < 0) {
		wq->rd_part = true;
		wq->rd_from = m->seq;
	}
}

/* Fence id to peer is out (or failed with its connection): the holds it
 * covers are released (fences of one connection go out in order). */
void wire_fence_done(struct kinet_wire *w, int peer, uint32_t id)
{
	for (int i = 0; i < w->nholds;) {
		struct whold *h = &w->holds[i];
		if (h->st == H_SENT && h->peer == peer && (int32_t)(id - h->fence) >= 0)
			*h = w->holds[--w->nholds];
		else
			i++;
	}
}

/* The connection to peer idx (idx < 0: every peer) is closed: its holds
 * are released. */
void wire_holds_release(struct kinet_wire *w, int idx)
{
	for (int i = 0; i < w->nholds;) {
		if (idx < 0 || w->holds[i].peer == idx) {
			hold_close_keys(&w->holds[i]);
			w->holds[i] = w->holds[--w->nholds];
		} else {
			i++;
		}
	}
}

bool wire_holds_peer(const struct kinet_wire *w, int idx)
{
	for (int i = 0; i < w->nholds; i++)
		if (w->holds[i].peer == idx)
			return true;
	return false;
}

/* Is mr held for a rendezvous source (*peer: whose)? */
bool wire_holds_mr(const struct kinet_wire *w, const kinet_mr *mr, int *peer)
{
	for (int i = 0; i < w->nholds; i++)
		for (int k = 0; k < w->holds[i].nmr; k++)
			if (w->holds[i].mr[k] == mr) {
				*peer = w->holds[i].peer;
				return true;
			}
	return false;
}

/* A region goes away (kinet_mr_dereg; no new request can name it): the
 * oldest unfinished request of wq that uses it fails with the local
 * protection error and everything after it is flushed (RC), so no answer
 * is copied into it and nothing more is sent from it; what the provider
 * still does with it (a send straight from it, a rendezvous source) ends by
 * itself, with a fence or with its connection (kinet_wire_mr_gone waits).
 * Returns the number of requests failed (0 or 1). */
int wire_fail_mr(struct kinet_wire *w, struct wire_qp *wq, const kinet_mr *mr)
{
	(void)w; /* the holds it makes are driven by wire_holds_progress */
	for (uint32_t s = wq->head; s != wq->tail; s++) {
		struct wreq *e = wire_ent(wq, s);
		if (e->done || !uses_mr(e, mr))
			continue;
		KLOG_DBG("wire: qp 0x%x: WQE %u uses a region being deregistered: it fails",
			 wq->qp->qpn, e->r.wqe_idx);
		wire_finish(wq, e, SOFT_REASON(KN_SYND_LOCAL_PROT_ERR, KINET_REASON_UNKNOWN_KEY), false);
		for (uint32_t t = s + 1; t != wq->tail; t++)
			wire_finish(wq, wire_ent(wq, t), KN_SYND_WR_FLUSH_ERR, false);
		wq->cut = true; /* what is posted from now on is flushed too */
		return 1;
	}
	return 0;
}

/* Fails the QP's outstanding requests: the oldest unfinished one gets synd,
 * every later one a flush; the CQEs follow in order from wire_complete. */
void wire_fail_qp(struct kinet_wire *w, struct wire_qp *wq, uint32_t synd, bool transport)
{
	if (wq->failed)
		return;
	wq->failed = true;
	bool first = true;
	for (uint32_t s = wq->head; s != wq->tail; s++) {
		struct wreq *e = wire_ent(wq, s);
		if (first && !e->done) {
			wire_finish(wq, e, synd, false);
			first = false;
		} else if (!first) {
			wire_finish(wq, e, KN_SYND_WR_FLUSH_ERR, false);
		}
	}
	wq->txn = wq->tail;
	if (transport && wq->connected)
		wire_drop_peer(w, wq->peer, "no answer");
}

/* Is every request before seq done? (The oldest unfinished request is
 * always sent in full, whatever the flow-control limit.) */
static bool oldest_open(const struct wire_qp *wq, uint32_t seq)
{
	for (uint32_t s = wq->head; s != seq; s++)
		if (!wire_ent(wq, s)->done)
			return false;
	return true;
}

/* Is the request a rendezvous write not yet sent (registered now if it
 * was not)? */
static bool rndv_next(struct kinet_wire *w, struct wreq *e)
{
	return !e->done && e->sent == 0 &&
	       (e->r.opcode == KN_OPCODE_RDMA_WRITE || e->r.opcode == KN_OPCODE_RDMA_WRITE_IMM) &&
	       (e->rndv || rndv_prepare(w, e));
}

/* One RTS message for the rendezvous writes from txn on (as many as fit). */
static int send_rts(struct kinet_wire *w, struct wire_qp *wq)
{
	uint8_t buf[RTS_MAX];
	uint32_t n = 0, k = 0;
	for (uint32_t s = wq->txn; s != wq->tail; s++) {
		struct wreq *e = wire_ent(wq, s);
		if (k && !rndv_next(w, e))
			break;
		uint32_t size = RTSE + (uint32_t)e->nmr * PCSZ;
		if (n + size > RTS_MAX)
			break;
		uint8_t *d = buf + n;
		uint32_t v = htole32(s);
		memcpy(d, &v, 4);
		d[4] = e->r.opcode;
		d[5] = (uint8_t)e->nmr;
		d[6] = d[7] = 0;
		v = htole32(e->r.rkey);
		memcpy(d + 8, &v, 4);
		memcpy(d + 12, &e->r.imm, 4);
		kn_store_le64(d + 16, e->r.raddr);
		kn_store_le64(d + 24, e->r.total);
		for (int i = 0; i < e->nmr; i++) {
			kn_store_le64(d + RTSE + i * PCSZ, e->pc[i].key);
			kn_store_le64(d + RTSE + i * PCSZ + 8, e->pc[i].addr);
			kn_store_le64(d + RTSE + i * PCSZ + 16, e->pc[i].len);
		}
		n += size;
		k++;
	}
	struct wmsg m = {.type = M_RTS, .rnr = (uint8_t)wq->qp->attr.rnr_retry,
			 .flags = F_FIRST | F_LAST, .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn,
			 .dst_gen = wq->peer_gen, .src_gen = wq->gen, .msn = wq->msn_tx,
			 .seq = wq->txn, .a = k};
	struct soft_iov piece = {buf, n, KINET_MEM_HOST, NULL};
	int rc = wire_send_data(w, wq, &m, &piece, 1, n); /* copied: n <= SMALL - HDR */
	if (rc)
		return rc;
	for (uint32_t i = 0; i < k; i++) {
		struct wreq *e = wire_ent(wq, wq->txn++);
		e->sent = e->r.total;
		e->started = true;
	}
	wq->msn_tx++;
	return 0;
}

/* Sends what is queued on this QP, in order. Called from kinet_wire_post
 * (posting), rendezvous writes wait for the QP's next progress call: the
 * engine parses a burst of WQEs in between, and one RTS message then
 * carries all of them. */
int wire_pump(struct kinet_wire *w, struct wire_qp *wq, bool posting)
{
	int work = 0;
	while (wq->txn != wq->tail && !wq->failed) {
		struct wreq *e = wire_ent(wq, wq->txn);
		if (e->done) { /* completes without the wire (NOP) */
			wq->txn++;
			continue;
		}
		struct soft_req *r = &e->r;
		struct wmsg m = {.type = M_REQ, .op = r->opcode, .rnr = (uint8_t)wq->qp->attr.rnr_retry,
				 .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn,
				 .dst_gen = wq->peer_gen, .src_gen = wq->gen, .msn = wq->msn_tx,
				 .seq = wq->txn, .rkey = r->rkey, .imm = r->imm};
		int rc;
		bool all = true;
		if (rndv_next(w, e)) {
			/* rendezvous: the keys of the pieces; the target reads */
			if (posting)
				break;
			rc = send_rts(w, wq);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				wire_fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
				break;
			}
			work++;
			continue;
		}
		switch (r->opcode) {
		case KN_OPCODE_RDMA_WRITE:
		case KN_OPCODE_RDMA_WRITE_IMM:
		case KN_OPCODE_SEND:
		case KN_OPCODE_SEND_IMM: {
			uint64_t n = r->total - e->sent;
			if (n > CHUNK)
				n = CHUNK;
			/* flow control: beyond the oldest unfinished request, at most
			 * EAGER_OUT bytes of eager payload wait at the target (its
			 * memory for one QP stays bounded); more waits for ACKs here */
			if (wq->eager_out + n > EAGER_OUT && !oldest_open(wq, wq->txn)) {
				rc = -EAGAIN;
				break;
			}
			bool send = r->opcode == KN_OPCODE_SEND || r->opcode == KN_OPCODE_SEND_IMM;
			m.flags = (uint8_t)((e->sent == 0 ? F_FIRST : 0) |
					    (e->sent + n == r->total ? F_LAST : 0));
			m.a = send ? r->total : r->raddr + e->sent;
			m.b = e->sent;
			struct soft_iov piece[SOFT_MAX_SGE];
			int np = wire_iov_slice(r->iov, r->niov, e->sent, n, piece, SOFT_MAX_SGE);
			if (np < 0) {
				rc = -EFAULT;
				break;
			}
			rc = wire_send_data(w, wq, &m, piece, np, n);
			if (rc == 0) {
				e->sent += n;
				e->eager += n;
				wq->eager_out += n;
				all = e->sent == r->total;
			}
			break;
		}
		case KN_OPCODE_RDMA_READ:
			m.flags = F_FIRST | F_LAST;
			m.a = r->raddr;
			m.b = r->total;
			rc = wire_send_data(w, wq, &m, NULL, 0, 0);
			break;
		case KN_OPCODE_ATOMIC_CS:
		case KN_OPCODE_ATOMIC_FA: {
			uint64_t v[2] = {htole64(r->swap_add), htole64(r->compare)};
			struct soft_iov piece = {(uint8_t *)v, sizeof(v), KINET_MEM_HOST, NULL};
			m.flags = F_FIRST | F_LAST;
			m.a = r->raddr;
			rc = wire_send_data(w, wq, &m, &piece, 1, sizeof(v));
			break;
		}
		case KN_OPCODE_ATOMIC_MASKED_CS:
		case KN_OPCODE_ATOMIC_MASKED_FA: {
			/* the operands of the extended atomics and their size */
			uint64_t v[5] = {htole64(r->swap_add), htole64(r->compare),
					 htole64(r->swap_mask), htole64(r->compare_mask),
					 htole64(r->atomic_size)};
			struct soft_iov piece = {(uint8_t *)v, sizeof(v), KINET_MEM_HOST, NULL};
			m.flags = F_FIRST | F_LAST;
			m.a = r->raddr;
			rc = wire_send_data(w, wq, &m, &piece, 1, sizeof(v));
			break;
		}
		default:
			wire_finish(wq, e, KN_SYND_LOCAL_QP_OP_ERR, false);
			wq->txn++;
			continue;
		}
		if (rc == -EAGAIN)
			break;
		if (rc) {
			wire_fail_qp(w, wq, rc == -EFAULT ? KN_SYND_LOCAL_PROT_ERR
						     : KN_SYND_TRANSPORT_RETRY_EXC_ERR,
				rc != -EFAULT);
			break;
		}
		wq->msn_tx++;
		e->started = true;
		work++;
		if (all)
			wq->txn++;
	}
	return work;
}

/* Writes the CQEs of finished requests, strictly in order. */
int wire_complete(struct wire_qp *wq)
{
	kinet_qp *qp = wq->qp;
	int work = 0;
	while (wq->head != wq->tail) {
		struct wreq *e = wire_ent(wq, wq->head);
		if (!e->done)
			break;
		/* the target can no longer read the source once the CQE is out */
		if (e->nmr)
			wire_wreq_unreg(e);
		if (e->status) {
			if (!wq->failed) {
				wq->failed = true;
				for (uint32_t s = wq->head + 1; s != wq->tail; s++)
					wire_finish(wq, wire_ent(wq, s), KN_SYND_WR_FLUSH_ERR,
						    false);
				wq->txn = wq->tail;
			}
			/* ERR before the error CQE: whoever sees the CQE sees ERR */
			int old = atomic_exchange(&qp->state, KINET_QPS_ERR);
			if (old != KINET_QPS_ERR)
				KLOG_DBG("qp 0x%x: WQE %u: %s; %s -> ERR", qp->qpn, e->r.wqe_idx,
					 kinet_syndrome_str(e->status), kinet_qp_state_str(old));
			if (soft_req_cqe(qp, &e->r, e->status))
				break; /* CQ full: later */
		} else if (e->r.signaled) {
			if (soft_req_cqe(qp, &e->r, 0))
				break;
		}
		wq->head++;
		work++;
	}
	return work;
}

/* ---- receiving -------------------------------------------------------------- */

/* ACK: every write and send up to m->seq (sent in full) is done. Reads and
 * atomics complete by their own answers, which come first (FI_ORDER_SAS). */
void wire_on_ack(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m)
{
	uint32_t n = m->seq - wq->head + 1; /* requests covered, from head */
	if (n > wq->tail - wq->head)
		return; /* covers nothing outstanding (late, after a flush) */
	for (uint32_t s = wq->head; s != wq->head + n; s++) {
		if ((int32_t)(s - wq->txn) >= 0)
			break; /* not sent in full: cannot be done */
		struct wreq *e = wire_ent(wq, s);
		if (e->done || !is_write_or_send(e->r.opcode))
			continue;
		wire_finish(wq, e, 0, true);
		atomic_fetch_add(&w->ctx->c_bytes, e->r.total);
	}
}

void wire_on_resp(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m,
		  const uint8_t *data)
{
	uint32_t k = m->seq - wq->head;
	if (k >= wq->tail - wq->head)
		return; /* not outstanding (late answer after a flush) */
	struct wreq *e = wire_ent(wq, m->seq);
	if (e->done)
		return;
	struct soft_req *r = &e->r;
	if (m->len) {
		struct soft_iov piece[SOFT_MAX_SGE];
		int np = -1;
		if (r->opcode == KN_OPCODE_RDMA_READ && m->a + m->len <= r->total)
			np = wire_iov_slice(r->iov, r->niov, m->a, m->len, piece, SOFT_MAX_SGE);
		struct soft_iov src = {(uint8_t *)data, m->len, KINET_MEM_HOST, NULL};
		if (np < 0) {
			wire_finish(wq, e, KN_SYND_BAD_RESP_ERR, true);
			return;
		}
		if (soft_copy_iov(piece, np, &src, 1, m->len)) {
			wire_finish(wq, e, KN_SYND_LOCAL_PROT_ERR, true);
			return;
		}
		uint64_t g = wire_gpu_bytes(piece, np);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		e->got += m->len;
	}
	if (m->flags & F_FIN) {
		e->fin = true;
		if (m->op) {
			/* after an error answer the target reads nothing more of this
			 * connection (RC: nothing after a NAK executes) */
			struct wmsg f = {.flags = F_RDFIN | F_ALL, .dst_qpn = wq->qp->qpn,
					 .dst_gen = wq->gen, .src_qpn = wq->peer_qpn,
					 .src_gen = wq->peer_gen};
			wire_rd_over(w, &f);
			wire_finish(wq, e, SOFT_REASON(m->op, m->rnr), true); /* the target's reason */
			return;
		}
	}
	if (!e->fin)
		return;
	if (r->opcode == KN_OPCODE_RDMA_READ) {
		/* chunks may complete out of order: done once every byte is in */
		if (e->got < r->total)
			return;
		if (e->got != r->total) {
			wire_finish(wq, e, KN_SYND_BAD_RESP_ERR, true);
			return;
		}
		wire_finish(wq, e, 0, true);
		atomic_fetch_add(&w->ctx->c_bytes, r->total);
		return;
	}
	uint32_t st = 0;
	if (r->opcode == KN_OPCODE_ATOMIC_MASKED_CS || r->opcode == KN_OPCODE_ATOMIC_MASKED_FA) {
		uint8_t be[8]; /* the NIC returns big-endian, in the operand size */
		if (r->atomic_size == 4)
			kn_store_be32(be, (uint32_t)m->a);
		else
			kn_store_be64(be, m->a);
		struct soft_iov src = {be, r->atomic_size, KINET_MEM_HOST, NULL};
		if (soft_copy_iov(r->iov, r->niov, &src, 1, r->atomic_size))
			st = KN_SYND_LOCAL_PROT_ERR;
	} else if (r->opcode == KN_OPCODE_ATOMIC_CS || r->opcode == KN_OPCODE_ATOMIC_FA) {
		uint64_t be = kn_htobe64(m->a); /* the NIC returns big-endian */
		struct soft_iov src = {(uint8_t *)&be, 8, KINET_MEM_HOST, NULL};
		if (soft_copy_iov(r->iov, r->niov, &src, 1, 8))
			st = KN_SYND_LOCAL_PROT_ERR;
	} else {
		atomic_fetch_add(&w->ctx->c_bytes, r->total);
	}
	wire_finish(wq, e, st, true);
}

#endif /* KINET_HAVE_FABRIC */
