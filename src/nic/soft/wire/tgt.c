/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tgt.c - the target side of the wire: the queue of received requests
 * of a QP, run in message order through the responder (soft_resp_*),
 * rendezvous writes (checks, reads into the region, completion; the reads'
 * descriptors, handing landed reads to the copy thread and taking them
 * back, giving up the reads of a dropped peer), answers, cumulative ACKs,
 * keepalives and RNR waits, and copies of waiting requests (their receive
 * buffers go back to every QP).
 */

#include <stdlib.h>
#include <string.h>
#include "nic/soft/wire/wire_int.h"
#if KINET_HAVE_FABRIC

/* ---- target ------------------------------------------------------------------ */

/* Forgets the rendezvous writes of a QP (reset, close, dead peer, after a
 * NAK): reads still in flight land in their bounce buffers and are thrown
 * away, those waiting for the copy thread are skipped, and one it is
 * copying now lands before this returns (wire_copy_forget). */
static void pend_drop(struct kinet_wire *w, struct wire_qp *wq)
{
	if (!wq->pend)
		return;
	for (int i = 0; i < w->nrdall; i++) {
		struct tpend *p = w->rdall[i]->p;
		if (!p)
			continue;
		for (struct tpend *q = wq->pend; q; q = q->next)
			if (q == p) {
				w->rdall[i]->p = NULL;
				break;
			}
	}
	wire_copy_forget(w); /* nothing of them lands later */
	while (wq->pend) {
		struct tpend *p = wq->pend;
		wq->pend = p->next;
		free(p);
	}
	wq->pend_tail = NULL;
}

/* Read descriptor op is free again: back to the list of its size. */
static void rd_put(struct kinet_wire *w, struct rdop *op)
{
	struct rdop **l = op->cap == RD_PIECE ? &w->rdfree : &w->rdfree_small;
	op->next = *l;
	*l = op;
}

/* A free read descriptor for n bytes (n <= RD_PIECE), or NULL: a small one
 * where n fits it (so that writes of up to RD_SMALL have NRD_ALL reads in
 * flight, not NRD), else a large one. */
static struct rdop *rd_get(struct kinet_wire *w, uint64_t n)
{
	struct rdop **l = n <= RD_SMALL && w->rdfree_small ? &w->rdfree_small : &w->rdfree;
	struct rdop *op = *l;
	if (op)
		*l = op->next;
	return op;
}

/* The read descriptors and their bounce buffers. */
bool wire_rd_init(struct kinet_wire *w)
{
	w->rdall = calloc(NRD_ALL, sizeof(*w->rdall));
	if (!w->rdall)
		return false;
	/* touched here, when the wire is made, not by the first large writes:
	 * the first-touch faults of RD_MEM of buffers, taken inside
	 * transfers, cost milliseconds of them (a run of 64 writes of 1 MiB,
	 * the first to fill whole buffers, took about 3800 faults: docs/perf.md) */
	if (!(w->rdmem = malloc(RD_MEM)))
		return false;
	/* a write per page (malloc and a memset to 0 may become a calloc,
	 * which touches nothing) */
	for (size_t i = 0; i < RD_MEM; i += 4096)
		((volatile uint8_t *)w->rdmem)[i] = 0;
	uint8_t *b = w->rdmem;
	for (int i = 0; i < NRD_ALL; i++) {
		struct rdop *op = &w->rd[i];
		op->kind = CTX_RD;
		op->cap = i < NRD ? RD_PIECE : RD_SMALL;
		op->buf = b;
		b += op->cap;
		rd_put(w, op);
		w->rdall[i] = op;
	}
	w->nrdall = NRD_ALL;
	return true;
}

/* Peer idx is dropped: its reads (they cannot be cancelled) are given up.
 * Each stays with the provider (its descriptor and bounce buffer are never
 * reused until the provider completes it, and its bytes are never copied),
 * stops counting as in flight (the key table is let go), and a new
 * descriptor takes its place. */
void wire_rd_give_up(struct kinet_wire *w, int idx)
{
	struct wpeer *pr = &w->peers[idx];
	for (int i = 0; i < w->nrdall; i++) {
		struct rdop *op = w->rdall[i];
		if (!op->busy || op->lost || op->peer != idx)
			continue;
		op->lost = true;
		op->p = NULL;
		w->rd_bytes -= op->len;
		atomic_fetch_sub(&w->rd_inflight, 1);
		pr->nrd--;
		pr->nbusy--;
		pr->nlost++;
		struct rdop *n = calloc(1, sizeof(*n));
		uint8_t *b = n ? malloc(op->cap) : NULL;
		struct rdop **all =
			b ? realloc(w->rdall, (size_t)(w->nrdall + 1) * sizeof(*all)) : NULL;
		if (!all) {
			free(b);
			free(n);
			continue; /* one descriptor fewer */
		}
		w->rdall = all;
		n->kind = CTX_RD;
		n->buf = b;
		n->cap = op->cap;
		if (!wire_lreg_add(w, b, n->cap))
			KLOG_WARN("wire: a replacement read buffer has no local descriptor: reads "
				  "into it fail");
		w->rdall[w->nrdall++] = n;
		rd_put(w, n);
	}
	if (pr->nlost)
		KLOG_WARN("wire: peer %d: %d read(s) given up (they cannot be cancelled here)", idx,
			  pr->nlost);
}

/* Receive buffers run short (more than RX_LOW held by target queues: sends
 * waiting for a receive WQE, requests behind them or behind reads): every
 * request a queue keeps is copied out and its buffer posted again, so that
 * no QP's wait takes the buffers that other QPs' traffic needs. What one QP
 * may keep is bounded (TQ_MAX: a requester keeps within EAGER_OUT beyond its
 * oldest request, wire_pump); one that sends more loses its connection. */
struct rxbuf *wire_rx_heap_copy(struct wire_qp *wq, const struct rxbuf *rb)
{
	size_t n = HDR + rb->m.len;
	struct rxbuf *c = malloc(sizeof(*c));
	uint8_t *b = c ? malloc(n) : NULL;
	if (!b) {
		free(c);
		return NULL;
	}
	*c = *rb;
	c->buf = b;
	c->heap = true;
	c->held = false;
	c->owner = wq;
	c->next = NULL;
	memcpy(b + HOFF, rb->buf + HOFF, HSZ + rb->m.len);
	wq->tq_bytes += n;
	return c;
}

void wire_tq_copy(struct kinet_wire *w)
{
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		for (struct rxbuf **pp = &wq->tq; *pp;) {
			struct rxbuf *rb = *pp;
			if (rb->heap) {
				pp = &rb->next;
				continue;
			}
			size_t n = HDR + rb->m.len;
			if (wq->tq_bytes + n > TQ_MAX) {
				KLOG_WARN("wire: qp 0x%x: more than %llu bytes of requests from "
					  "qp 0x%x wait here (it ignores the flow control): "
					  "connection failed", wq->qp->qpn,
					  (unsigned long long)TQ_MAX, rb->m.src_qpn);
				wq->tgt_failed = true;
				wire_tq_drop(w, wq);
				break;
			}
			struct rxbuf *c = wire_rx_heap_copy(wq, rb);
			if (!c)
				return; /* later */
			c->next = rb->next;
			*pp = c;
			pp = &c->next;
			rb->next = NULL;
			wire_rx_release(w, rb);
		}
	}
}

bool wire_tq_insert(struct wire_qp *wq, struct rxbuf *rb)
{
	if ((int32_t)(rb->m.msn - wq->msn_rx) < 0) {
		KLOG_DBG("wire: qp 0x%x: request %u again (served already): dropped", wq->qp->qpn,
			 rb->m.msn);
		return false;
	}
	struct rxbuf **pp = &wq->tq;
	while (*pp && (int32_t)((*pp)->m.msn - rb->m.msn) < 0)
		pp = &(*pp)->next;
	if (*pp && (*pp)->m.msn == rb->m.msn) {
		KLOG_DBG("wire: qp 0x%x: request %u again (queued already): dropped", wq->qp->qpn,
			 rb->m.msn);
		return false;
	}
	rb->next = *pp;
	*pp = rb;
	return true;
}

/* Queues an F_RDFIN for wq's requester: no read of its sources for
 * requests from seq on (all: of any request) follows (wire_holds_progress
 * sends it). */
static void wire_fin_queue(struct kinet_wire *w, struct wire_qp *wq, uint32_t seq, bool all)
{
	if (!wq->connected || wq->peer < 0 || w->peers[wq->peer].removed)
		return;
	if (w->nfins == w->fcap) {
		int ncap = w->fcap ? 2 * w->fcap : 16;
		struct wfin *f = realloc(w->fins, (size_t)ncap * sizeof(*f));
		if (!f)
			return; /* the requester keeps its sources until it gives up */
		w->fins = f;
		w->fcap = ncap;
	}
	w->fins[w->nfins++] = (struct wfin){.peer = wq->peer, .dst_qpn = wq->peer_qpn,
					    .dst_gen = wq->peer_gen, .src_qpn = wq->qp->qpn,
					    .src_gen = wq->gen, .seq = seq, .all = all};
}

/* The requester finished requests from seq on without our answer (F_RDREQ):
 * their rendezvous writes are forgotten (reads in flight land in their
 * bounce buffers, unused), nothing from seq on runs, and the requester is
 * told so once the reads posted before are on their way. */
void wire_tgt_stop(struct kinet_wire *w, struct wire_qp *wq, uint32_t seq)
{
	if (!wq->stop || (int32_t)(seq - wq->stop_seq) < 0) {
		wq->stop = true;
		wq->stop_seq = seq;
	}
	struct tpend **pp = &wq->pend, *last = NULL;
	while (*pp && (int32_t)((*pp)->seq - wq->stop_seq) < 0) {
		last = *pp;
		pp = &(*pp)->next;
	}
	if (*pp) {
		struct tpend *rest = *pp;
		*pp = NULL;
		wq->pend_tail = last;
		for (int i = 0; i < w->nrdall; i++)
			for (struct tpend *q = rest; q && w->rdall[i]->p; q = q->next)
				if (w->rdall[i]->p == q)
					w->rdall[i]->p = NULL;
		wire_copy_forget(w);
		while (rest) {
			struct tpend *q = rest;
			rest = q->next;
			free(q);
		}
	}
	wire_fin_queue(w, wq, wq->stop_seq, wq->tgt_failed || wq->fin_sent);
}

void wire_tq_drop(struct kinet_wire *w, struct wire_qp *wq)
{
	/* the requester hears that none of its sources is read any more (once
	 * per connection) */
	if (wq->connected && !wq->fin_sent) {
		wire_fin_queue(w, wq, 0, true);
		wq->fin_sent = true;
	}
	while (wq->tq) {
		struct rxbuf *rb = wq->tq;
		wq->tq = rb->next;
		wire_rx_release(w, rb);
	}
	if (wq->dup) {
		wire_rx_release(w, wq->dup);
		wq->dup = NULL;
	}
	pend_drop(w, wq);
	wq->need_ack = false;
	free(wq->asm_buf);
	wq->asm_buf = NULL;
	wq->asm_len = wq->asm_total = 0;
	wq->rnr_count = 0;
	wq->rnr_next_ns = 0;
}

static int answer(struct kinet_wire *w, struct wire_qp *wq, uint32_t seq, uint32_t status,
		  uint64_t a)
{
	struct wmsg m = {.type = M_RESP, .op = (uint8_t)status, .flags = F_FIN,
			 .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn, .dst_gen = wq->peer_gen,
			 .src_gen = wq->gen, .seq = seq, .a = a};
	m.rnr = (uint8_t)SOFT_WHY(status); /* hook (kinet_reason): the check that failed */
	return wire_send_ctrl(w, wq, &m);
}

/* Request seq is done (a write or send: the next ACK covers it). */
static void mark_done(struct wire_qp *wq, uint32_t seq, bool ack)
{
	wq->done_seq = seq;
	if (ack && !wq->need_ack) {
		wq->need_ack = true;
		wq->ack_due_ns = kn_now_ns() + ACK_DELAY_NS;
	}
}

/* The cumulative acknowledgement: every request up to done_seq is done. */
static int flush_ack(struct kinet_wire *w, struct wire_qp *wq)
{
	if (!wq->need_ack)
		return 0;
	struct wmsg m = {.type = M_ACK, .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn,
			 .dst_gen = wq->peer_gen, .src_gen = wq->gen, .seq = wq->done_seq};
	int rc = wire_send_ctrl(w, wq, &m);
	if (rc != -EAGAIN) {
		wq->need_ack = false; /* sent, or nobody left to tell */
		wq->acked_seq = wq->done_seq;
	}
	return rc;
}

/* Keeps the requester's timer alive while a request waits here. */
static void keepalive(struct kinet_wire *w, struct wire_qp *wq)
{
	if (kn_now_ns() - wq->last_tx_ns < w->ka_ns)
		return;
	struct wmsg m = {.type = M_KA, .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn,
			 .dst_gen = wq->peer_gen, .src_gen = wq->gen};
	wire_send_ctrl(w, wq, &m);
}

/* RNR at the target for the request at the head: true while it is to be
 * retried later (*rc is then irrelevant), false when it is answered with
 * *rc (RNR retry exceeded once the requester's budget is spent). */
static bool rnr_wait(struct kinet_wire *w, struct wire_qp *wq, uint8_t budget, int *rc)
{
	uint64_t now = kn_now_ns();
	if (wq->rnr_next_ns && now < wq->rnr_next_ns) {
		keepalive(w, wq);
		return true;
	}
	if (budget == 7 || wq->rnr_count < budget) {
		wq->rnr_count++;
		wq->rnr_next_ns = now + w->rnr_ns;
		atomic_fetch_add(&wq->qp->ctx->c_rnr, 1);
		keepalive(w, wq);
		return true;
	}
	*rc = KN_SYND_RNR_RETRY_EXC_ERR;
	return false;
}

/* Read: sends the data back in chunks. 1 done, 0 later. */
static int tgt_read(struct kinet_wire *w, struct wire_qp *wq, struct rxbuf *rb)
{
	const struct wmsg *rq = &rb->m;
	uint64_t total = rq->b;
	if (total > SOFT_MAX_MSG) {
		rb->executed = 1;
		rb->status = KN_SYND_REMOTE_INVAL_REQ_ERR;
		return 1;
	}
	do {
		uint64_t n = total - rb->off;
		if (n > CHUNK)
			n = CHUNK;
		if (wq->ntxd >= TXQ_MAX)
			return 0; /* one QP's answers do not take every descriptor */
		struct txd *t = wire_txd_get(w, wq);
		if (!t)
			return 0;
		uint8_t *buf = t->small;
		if (HDR + n > SMALL) {
			if (!w->nbig) {
				wire_txd_put(w, t);
				return 0;
			}
			t->big = buf = w->bigfree[--w->nbig];
		}
		struct soft_iov dst = {buf + HDR, n, KINET_MEM_HOST, NULL};
		int rc = soft_resp_read(wq->qp, rq->a + rb->off, rq->rkey, &dst, 1, n);
		if (rc) {
			wire_txd_put(w, t);
			if (rc == SOFT_STALL)
				return 0;
			rb->executed = 1;
			rb->status = (uint32_t)rc;
			return 1;
		}
		bool last = rb->off + n == total;
		struct wmsg m = {.type = M_RESP, .flags = last ? F_FIN : 0, .dst_qpn = wq->peer_qpn,
				 .src_qpn = wq->qp->qpn, .dst_gen = wq->peer_gen, .src_gen = wq->gen,
				 .seq = rq->seq, .len = (uint32_t)n, .a = rb->off};
		wire_enc(buf + HOFF, &m);
		ssize_t s = w->peers[wq->peer].dead || wire_peer_gone(w, wq->peer)
				    ? -FI_ECONNRESET
				    : fi_send(w->ep, buf + HOFF, HSZ + n,
					      wire_ldesc(w, buf + HOFF, HSZ + n), wire_peer_fa(w, wq),
					      &t->fc);
		if (s) {
			wire_txd_put(w, t);
			if (s == -FI_EAGAIN)
				return 0;
			rb->executed = 2; /* nobody to answer: drop */
			return 1;
		}
		wire_txd_busy(w, wq, t);
		wq->last_tx_ns = kn_now_ns();
		rb->off += n;
		if (last) {
			rb->executed = 2; /* answered by the last data message */
			return 1;
		}
	} while (1);
}

/* Executes the eager request at the head of the target queue. 1: done
 * (rb->executed: 1 an answer is due (error, atomic value), 2 none), 0: try
 * again later. */
static int tgt_exec(struct kinet_wire *w, struct wire_qp *wq, struct rxbuf *rb)
{
	kinet_qp *t = wq->qp;
	const struct wmsg *m = &rb->m;
	struct soft_iov src = {rb->buf + HDR, m->len, KINET_MEM_HOST, NULL};
	int rc;
	switch (m->op) {
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM: {
		int imm = m->op == KN_OPCODE_RDMA_WRITE_IMM && (m->flags & F_LAST);
		if (imm && !(m->flags & F_FIRST)) {
			/* the last of several chunks: its receive CQE counts them all */
			rc = soft_resp_write(t, m->a, m->rkey, &src, 1, m->len, 0, 0, wq->peer_qpn);
			if (rc == 0)
				rc = soft_resp_write_imm(t, m->b + m->len, m->imm, wq->peer_qpn);
			break;
		}
		rc = soft_resp_write(t, m->a, m->rkey, &src, 1, m->len, imm, m->imm, wq->peer_qpn);
		break;
	}
	case KN_OPCODE_SEND:
	case KN_OPCODE_SEND_IMM: {
		int imm = m->op == KN_OPCODE_SEND_IMM;
		if ((m->flags & (F_FIRST | F_LAST)) == (F_FIRST | F_LAST)) {
			rc = soft_resp_send(t, &src, 1, m->len, imm, m->imm, wq->peer_qpn);
			break;
		}
		if (m->flags & F_FIRST && !rb->executed) {
			free(wq->asm_buf);
			wq->asm_buf = NULL;
			wq->asm_len = 0;
			wq->asm_total = m->a;
			if (m->a > SOFT_MAX_MSG || !(wq->asm_buf = malloc(m->a ? m->a : 1))) {
				rc = KN_SYND_REMOTE_OP_ERR;
				break;
			}
		}
		if (!(m->flags & F_LAST) || wq->asm_len < wq->asm_total) {
			if (!wq->asm_buf || m->b != wq->asm_len ||
			    wq->asm_len + m->len > wq->asm_total) {
				rc = KN_SYND_REMOTE_INVAL_REQ_ERR;
				break;
			}
			memcpy(wq->asm_buf + wq->asm_len, src.ptr, m->len);
			wq->asm_len += m->len;
			rb->m.len = 0; /* consumed: a retry of the last chunk copies nothing */
		}
		if (!(m->flags & F_LAST)) {
			rc = 0;
			break;
		}
		struct soft_iov whole = {wq->asm_buf, wq->asm_len, KINET_MEM_HOST, NULL};
		rc = soft_resp_send(t, &whole, 1, wq->asm_len, imm, m->imm, wq->peer_qpn);
		if (rc != SOFT_RNR && rc != SOFT_STALL) {
			free(wq->asm_buf);
			wq->asm_buf = NULL;
		}
		break;
	}
	case KN_OPCODE_RDMA_READ:
		return tgt_read(w, wq, rb);
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA: {
		uint64_t v[2] = {0, 0};
		if (m->len != sizeof(v)) {
			rc = KN_SYND_REMOTE_INVAL_REQ_ERR;
			break;
		}
		memcpy(v, src.ptr, sizeof(v));
		rc = soft_resp_atomic(t, m->op, m->a, m->rkey, le64toh(v[0]), le64toh(v[1]),
				      &rb->old);
		break;
	}
	case KN_OPCODE_ATOMIC_MASKED_CS:
	case KN_OPCODE_ATOMIC_MASKED_FA: {
		uint64_t v[5] = {0};
		if (m->len != sizeof(v)) {
			rc = KN_SYND_REMOTE_INVAL_REQ_ERR;
			break;
		}
		memcpy(v, src.ptr, sizeof(v));
		rc = soft_resp_masked_atomic(t, m->op, (uint32_t)le64toh(v[4]), m->a, m->rkey,
					     le64toh(v[0]), le64toh(v[1]), le64toh(v[2]),
					     le64toh(v[3]), &rb->old);
		break;
	}
	default:
		rc = KN_SYND_REMOTE_INVAL_REQ_ERR;
		break;
	}
	if (rc == SOFT_STALL) {
		keepalive(w, wq);
		return 0;
	}
	if (rc == SOFT_RNR && rnr_wait(w, wq, m->rnr, &rc))
		return 0;
	wq->rnr_count = 0;
	wq->rnr_next_ns = 0;
	rb->status = (uint32_t)rc;
	rb->executed = (rc || m->op == KN_OPCODE_ATOMIC_CS || m->op == KN_OPCODE_ATOMIC_FA ||
			m->op == KN_OPCODE_ATOMIC_MASKED_CS || m->op == KN_OPCODE_ATOMIC_MASKED_FA)
			       ? 1 : 2;
	return 1;
}

/* Starts the rendezvous write of the entry at d (at most n bytes): checks
 * it as the responder would (state, the QP's remote write access, rkey,
 * bounds, the region's access) under the key table the engine holds, and
 * queues it; its reads are posted by rd_issue. A request that fails a check is queued too, to be answered
 * with its error in order. Returns the entry's size, 0 when it is
 * malformed (queued as an error: the rest of the message is not looked
 * at), or -1 (no memory: later). */
static int rts_start(struct kinet_wire *w, struct wire_qp *wq, uint8_t rnr, const uint8_t *d,
		     uint32_t n)
{
	kinet_qp *t = wq->qp;
	struct tpend *p = calloc(1, sizeof(*p));
	if (!p)
		return -1;
	uint32_t st = 0, size = 0;
	p->rnr = rnr;
	p->last_ns = kn_now_ns();
	p->epoch = w->epoch;
	if (n < RTSE || d[5] < 1 || d[5] > MAXPC || RTSE + d[5] * PCSZ > n) {
		st = KN_SYND_REMOTE_INVAL_REQ_ERR;
		if (n >= 4)
			memcpy(&p->seq, d, 4);
		p->seq = le32toh(p->seq);
	} else {
		uint32_t v;
		memcpy(&v, d, 4);
		p->seq = le32toh(v);
		p->op = d[4];
		p->np = d[5];
		memcpy(&v, d + 8, 4);
		p->rkey = le32toh(v);
		memcpy(&p->imm, d + 12, 4); /* wire order, as is */
		p->raddr = kn_load_le64(d + 16);
		p->total = kn_load_le64(d + 24);
		size = RTSE + (uint32_t)p->np * PCSZ;
		uint64_t sum = 0;
		for (int i = 0; i < p->np; i++) {
			const uint8_t *q = d + RTSE + i * PCSZ;
			p->pc[i].key = kn_load_le64(q);
			p->pc[i].addr = kn_load_le64(q + 8);
			p->pc[i].len = kn_load_le64(q + 16);
			if (p->pc[i].len > SOFT_MAX_MSG)
				st = KN_SYND_REMOTE_INVAL_REQ_ERR;
			sum += p->pc[i].len;
		}
		if ((p->op != KN_OPCODE_RDMA_WRITE && p->op != KN_OPCODE_RDMA_WRITE_IMM) ||
		    p->total == 0 || p->total > SOFT_MAX_MSG || sum != p->total)
			st = KN_SYND_REMOTE_INVAL_REQ_ERR;
	}
	if (!st) {
		int s = atomic_load(&t->state);
		if (s != KINET_QPS_RTR && s != KINET_QPS_RTS)
			st = KN_SYND_TRANSPORT_RETRY_EXC_ERR; /* as the responder: not accepting */
	}
	if (!st) {
		struct kinet_mr_ref ref;
		uint32_t why = soft_qp_access_check(t, KINET_ACCESS_REMOTE_WRITE);
		if (!why)
			why = soft_mr_check(t->ctx, t->pd, p->rkey, p->raddr, p->total,
					    KINET_ACCESS_REMOTE_WRITE, &ref);
		if (why) {
			st = SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why); /* hook: the failed check */
		} else {
			p->dst = ref.ptr;
			p->dkind = ref.kind;
		}
	}
	p->status = st;
	if (st)
		p->issued = p->total; /* nothing to read */
	if (wq->pend_tail)
		wq->pend_tail->next = p;
	else
		wq->pend = p;
	wq->pend_tail = p;
	return (int)size;
}

/* The key table may have changed since p was checked (its reads were not
 * all posted then): checks the rest again. false: it fails now. */
static bool recheck(struct kinet_wire *w, struct wire_qp *wq, struct tpend *p)
{
	kinet_qp *t = wq->qp;
	int s = atomic_load(&t->state);
	struct kinet_mr_ref ref;
	if (s != KINET_QPS_RTR && s != KINET_QPS_RTS) {
		p->status = KN_SYND_TRANSPORT_RETRY_EXC_ERR;
		return false;
	}
	uint32_t why = soft_qp_access_check(t, KINET_ACCESS_REMOTE_WRITE);
	if (!why)
		why = soft_mr_check(t->ctx, t->pd, p->rkey, p->raddr + p->issued,
				    p->total - p->issued, KINET_ACCESS_REMOTE_WRITE, &ref);
	if (why) {
		p->status = SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why); /* hook: the failed check */
		return false;
	}
	p->dst = ref.ptr - p->issued;
	p->dkind = ref.kind;
	p->epoch = w->epoch;
	return true;
}

/* Posts the reads of the started rendezvous writes, in order, as far as
 * the endpoint's budget allows (none while a key-table writer waits). */
static int rd_issue(struct kinet_wire *w, struct wire_qp *wq)
{
	int work = 0;
	if (w->draining || w->peers[wq->peer].dead || wire_peer_gone(w, wq->peer))
		return 0;
	for (struct tpend *p = wq->pend; p; p = p->next) {
		if (!p->status && p->issued < p->total && p->epoch != w->epoch && !recheck(w, wq, p))
			continue;
		while (!p->status && p->issued < p->total) {
			if (p->ip >= p->np) {
				p->status = KN_SYND_REMOTE_INVAL_REQ_ERR; /* cannot happen: checked */
				break;
			}
			struct wpiece *pc = &p->pc[p->ip];
			if (p->ioff == pc->len) {
				p->ip++;
				p->ioff = 0;
				continue;
			}
			/* into the read's own bounce buffer, copied into place
			 * when it lands */
			uint64_t n = pc->len - p->ioff;
			if (n > RD_PIECE)
				n = RD_PIECE;
			if (w->rd_bytes && w->rd_bytes + n > RD_BYTES)
				return work;
			struct rdop *op = rd_get(w, n);
			if (!op)
				return work;
			uint8_t *bounce = op->buf;
			uint8_t *dst = p->dst + p->issued;
			ssize_t rc = fi_read(w->ep, bounce, n, wire_ldesc(w, bounce, n),
					     wire_peer_fa(w, wq), pc->addr + p->ioff, pc->key,
					     &op->fc);
			if (rc) {
				rd_put(w, op);
				if (rc == -FI_EAGAIN)
					return work;
				KLOG_DBG("wire: qp 0x%x: fi_read: %s", wq->qp->qpn,
					 fi_strerror((int)-rc));
				p->status = KN_SYND_REMOTE_OP_ERR;
				break;
			}
			op->next = NULL;
			op->busy = true;
			op->peer = wq->peer;
			w->peers[wq->peer].nrd++;
			w->peers[wq->peer].nbusy++;
			w->peers[wq->peer].rd_ns = kn_now_ns();
			op->p = p;
			op->bounce = bounce;
			op->dst = dst;
			op->dkind = p->dkind;
			op->len = n;
			uint32_t k = (uint32_t)atomic_fetch_add(&w->rd_inflight, 1) + 1;
			if (k > w->rd_max)
				w->rd_max = k;
			w->rd_bytes += n;
			p->inflight++;
			p->issued += n;
			p->ioff += n;
			p->last_ns = kn_now_ns();
			work++;
		}
	}
	return work;
}

/* Accounts for a read no longer with the provider: copied says its bytes
 * are in place already (the copy thread), else ok ones are copied here. */
static void rd_finish(struct kinet_wire *w, struct rdop *op, bool ok, bool copied)
{
	struct tpend *p = op->p;
	if (p) {
		p->inflight--;
		p->last_ns = kn_now_ns();
		if (!ok) {
			if (!p->status)
				p->status = KN_SYND_REMOTE_OP_ERR; /* the source went away */
		} else if (!copied && kinet_mem_copy(op->dst, op->dkind, op->bounce,
						     KINET_MEM_HOST, op->len)) {
			if (!p->status)
				p->status = KN_SYND_REMOTE_OP_ERR;
		} else {
			atomic_fetch_add(&w->ctx->c_staged, op->len);
			atomic_fetch_add(&w->ctx->c_bytes, op->len);
		}
	}
	op->bounce = NULL;
	op->p = NULL;
	w->rd_bytes -= op->len;
	rd_put(w, op);
	atomic_fetch_sub(&w->rd_inflight, 1);
}

/* A target read has completed (ok) or failed (cancelled with its
 * connection, among others). Returns the peer of a read that was given up
 * and has ended after all (the caller tells wire_lost_done at once), or
 * -1. */
int wire_rd_done(struct kinet_wire *w, struct rdop *op, bool ok)
{
	if (!op->busy)
		return -1;
	op->busy = false;
	if (op->lost) {
		/* given up, back after all: its bytes are not used */
		op->lost = false;
		rd_put(w, op);
		if (op->peer >= 0 && op->peer < w->npeers)
			return op->peer;
		return -1;
	}
	if (op->peer >= 0 && op->peer < w->npeers) {
		struct wpeer *pr = &w->peers[op->peer];
		if (pr->nrd)
			pr->nrd--;
		if (pr->nbusy)
			pr->nbusy--;
		pr->rd_ns = kn_now_ns();
	}
	/* its bytes go into place on the copy thread where there is one; it
	 * stays counted in flight until they are */
	if (ok && op->p && wire_copy_give(w, op))
		return -1;
	rd_finish(w, op, ok, false);
	return -1;
}

/* The reads the copy thread has put in place since the last call are
 * accounted for (wire_copy_take hands them back). The number. */
int wire_rd_reap(struct kinet_wire *w)
{
	struct rdop *op = wire_copy_take(w);
	int n = 0;
	while (op) {
		struct rdop *next = op->next;
		n++;
		rd_finish(w, op, true, true);
		op = next;
	}
	return n;
}

/* Completes the rendezvous writes whose reads have landed, in order: the
 * receive CQE of a write with immediate (RNR as for a send), then the ACK
 * (later, cumulative) or the error answer. */
static int pend_progress(struct kinet_wire *w, struct wire_qp *wq)
{
	int work = 0;
	struct tpend *p;
	while ((p = wq->pend)) {
		if (p->inflight || (!p->status && p->issued < p->total))
			break;
		if (!p->status && p->op == KN_OPCODE_RDMA_WRITE_IMM) {
			int rc = soft_resp_write_imm(wq->qp, p->total, p->imm, wq->peer_qpn);
			if (rc == SOFT_STALL) {
				keepalive(w, wq);
				break;
			}
			if (rc == SOFT_RNR && rnr_wait(w, wq, p->rnr, &rc))
				break;
			wq->rnr_count = 0;
			wq->rnr_next_ns = 0;
			p->status = (uint32_t)rc;
			p->op = KN_OPCODE_RDMA_WRITE; /* its receive part is done */
		}
		if (!p->status) {
			int st = atomic_load(&wq->qp->state);
			if (st != KINET_QPS_RTR && st != KINET_QPS_RTS)
				p->status = KN_SYND_TRANSPORT_RETRY_EXC_ERR; /* as the responder */
		}
		if (p->status) {
			/* earlier successes first, then the NAK; nothing after it runs */
			if (flush_ack(w, wq) == -EAGAIN || answer(w, wq, p->seq, p->status, 0) == -EAGAIN)
				break;
			wq->tgt_failed = true;
			pend_drop(w, wq);
			work++;
			break;
		}
		wq->pend = p->next;
		if (!wq->pend)
			wq->pend_tail = NULL;
		mark_done(wq, p->seq, true);
		free(p);
		work++;
	}
	return work;
}

/* Serves the target side of a QP: in message order, rendezvous writes
 * start (and pipeline), other requests once the reads before them have
 * landed; then the cumulative ACK. */
int wire_serve_target(struct kinet_wire *w, struct wire_qp *wq)
{
	if (!wq->connected)
		return 0; /* the QP is still connecting: the requester waits */
	if (atomic_load(&wq->qp->state) == KINET_QPS_INIT)
		return 0; /* its end is connected, the move to RTR comes next
			   * (soft_qp_modify): requests that came early wait for it
			   * rather than meet a QP that does not accept yet */
	int work = pend_progress(w, wq);
	while (wq->tq) {
		struct rxbuf *rb = wq->tq;
		if (wq->stop && rb->m.src_qpn == wq->peer_qpn && rb->m.src_gen == wq->peer_gen &&
		    rb->m.msn == wq->msn_rx && (int32_t)(rb->m.seq - wq->stop_seq) >= 0)
			wq->tgt_failed = true; /* the requester finished it without us */
		if (rb->m.src_qpn != wq->peer_qpn || rb->m.src_gen != wq->peer_gen ||
		    wq->tgt_failed) {
			wq->tq = rb->next; /* not (or no longer) our connection */
			wire_rx_release(w, rb);
			work++;
			continue;
		}
		if (rb->m.msn != wq->msn_rx)
			break; /* an earlier message is still on its way */
		if (!rb->executed) {
			if (rb->m.type == M_RTS) {
				/* its entries, in order; behind a write with immediate
				 * or an error the next waits */
				bool stop = false;
				while (rb->off < rb->m.len) {
					struct tpend *last = wq->pend_tail;
					if (last && (last->op != KN_OPCODE_RDMA_WRITE || last->status)) {
						stop = true;
						break;
					}
					if (wq->stop && rb->m.len - rb->off >= 4 &&
					    (int32_t)(kn_load_le32(rb->buf + HDR + rb->off) -
						      wq->stop_seq) >= 0) {
						wq->tgt_failed = true; /* finished without us */
						stop = true;
						break;
					}
					int k = rts_start(w, wq, rb->m.rnr, rb->buf + HDR + rb->off,
							  (uint32_t)(rb->m.len - rb->off));
					if (k < 0) {
						stop = true;
						break;
					}
					rb->off = k ? rb->off + (uint64_t)k : rb->m.len;
					work++;
				}
				if (stop)
					break;
				wq->tq = rb->next;
				wq->msn_rx++;
				wire_rx_release(w, rb);
				continue;
			}
			if (wq->pend)
				break; /* RC order: after the writes before it have landed */
			if (!tgt_exec(w, wq, rb))
				break;
		}
		if (rb->executed == 1) {
			if (rb->status && flush_ack(w, wq) == -EAGAIN)
				break;
			int rc = answer(w, wq, rb->m.seq, rb->status, rb->old);
			if (rc == -EAGAIN)
				break;
			if (rb->status)
				wq->tgt_failed = true; /* RC: nothing after a NAK executes */
			else
				mark_done(wq, rb->m.seq, false); /* answered */
		} else if (rb->m.flags & F_LAST) {
			/* a read was answered by its data */
			mark_done(wq, rb->m.seq, rb->m.op != KN_OPCODE_RDMA_READ);
		}
		wq->tq = rb->next;
		wq->msn_rx++;
		wire_rx_release(w, rb);
		work++;
	}
	if (wq->dup && !wq->tq) {
		/* fault injection: the copy arrives now, behind its original */
		struct rxbuf *d = wq->dup;
		wq->dup = NULL;
		if (!wire_tq_insert(wq, d))
			wire_rx_release(w, d);
		work++;
	}
	if (wq->pend) {
		work += rd_issue(w, wq);
		work += pend_progress(w, wq);
		if (wq->pend)
			keepalive(w, wq);
	}
	/* at once when nothing more is landing (a lone request is answered in
	 * this pass); while writes stream in, one ACK covers several */
	if (wq->need_ack && (!wq->pend || wq->done_seq - wq->acked_seq >= ACK_EVERY ||
			     kn_now_ns() >= wq->ack_due_ns))
		flush_ack(w, wq);
	return work;
}

#endif /* KINET_HAVE_FABRIC */
