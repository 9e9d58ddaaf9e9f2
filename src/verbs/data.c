/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * data.c - the CPU data path of the rdma-core double: ibv_post_send,
 * ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq, which verbs.h's inline
 * functions reach through the context's ops, and completion channels.
 *
 * As the mlx5 provider does it: a work request becomes an mlx5 WQE in the
 * software NIC's SQ (built with prm.h's segment builders) and the doorbell
 * record is rung (kinet_qp_post_raw); a receive becomes a data segment in the
 * RQ and the receive doorbell record. The engine executes the WQEs and
 * writes mlx5 CQEs, which ibv_poll_cq turns into struct ibv_wc: the WR's id
 * and opcode from the slot its CQE names (wqe_counter), the status from the
 * error syndrome, byte count, immediate and source QP from the CQE. An
 * unsignaled WR completes silently with the next signaled one after it, as
 * on a ConnectX; after an error every WR left completes with a flush error.
 *
 * Extended QPs (ibv_qp_ex): the wr_* builders stage ibv_send_wr lists
 * between wr_start and wr_complete, which posts them through the same path
 * as ibv_post_send, all or nothing, as the mlx5 provider does.
 *
 * Completion events: ibv_req_notify_cq arms a CQ; a watcher thread (started
 * by the first arm) looks at the armed CQs every EMU_WATCH_US and queues an
 * event on the CQ's channel once the CQ holds a CQE not polled yet, which
 * makes the channel's fd readable. Solicited-only arms fire on any CQE (more
 * events than hardware gives, never fewer).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "verbs/emu.h"

#if KINET_HAVE_RDMA_HEADERS

#define EMU_WATCH_US 20 /* how often the watcher looks at armed CQs */

static struct emu_cq *cq_of(struct ibv_cq *cq)
{
	return (struct emu_cq *)cq;
}
static struct emu_qp *qp_of(struct ibv_qp *qp)
{
	return (struct emu_qp *)qp;
}

/* The work requests between wr_start and wr_complete, as ibv_send_wr lists
 * (wr_complete posts them with post_list: the WQEs are built once, by
 * build_send, as ibv_post_send builds them). Inline data is copied when it
 * is set, as the provider does, into inl. Only the thread that called
 * wr_start uses it until wr_complete or wr_abort (the API's contract). */
struct emu_wrx {
	uint64_t ops;            /* the send_ops_flags the QP was created with */
	struct ibv_send_wr *wr;  /* wr[0..n): the work requests so far */
	struct ibv_sge *sge;     /* nsge entries per work request */
	uint32_t nsge;
	size_t *inl_at;          /* per work request: its inline data's offset in inl */
	uint32_t n, cap;
	uint8_t *inl;            /* inline data copied */
	size_t inl_len, inl_cap;
	int err;                 /* the first error since wr_start (wr_complete returns it) */
	bool open;               /* between wr_start and wr_complete/wr_abort */
};

/* ---- per-QP state ------------------------------------------------------------------- */

int emu_data_qp_init(struct emu_qp *q, const struct ibv_qp_init_attr *ia)
{
	kinet_qp *s = q->sqp;
	q->cap = ia->cap;
	q->sig_all = ia->sq_sig_all != 0;
	q->sq_wrid = calloc(s->sq_cnt, sizeof(*q->sq_wrid));
	q->sq_wop = calloc(s->sq_cnt, 1);
	q->sq_nbb = calloc(s->sq_cnt, 1);
	q->sq_atomic = calloc(s->sq_cnt, sizeof(*q->sq_atomic));
	q->sq_seq = calloc(s->sq_cnt, sizeof(*q->sq_seq));
	q->rq_wrid = calloc(s->rq_cnt ? s->rq_cnt : 1, sizeof(*q->rq_wrid));
	if (!q->sq_wrid || !q->sq_wop || !q->sq_nbb || !q->sq_atomic || !q->sq_seq ||
	    !q->rq_wrid) {
		emu_data_qp_fini(q);
		return -ENOMEM;
	}
	pthread_mutex_init(&q->sq_lock, NULL);
	pthread_mutex_init(&q->rq_lock, NULL);
	return 0;
}

void emu_data_qp_fini(struct emu_qp *q)
{
	if (!q->sq_wrid && !q->rq_wrid)
		return; /* a DevX or raw packet QP: no CPU data path */
	if (q->wrx) {
		free(q->wrx->wr);
		free(q->wrx->sge);
		free(q->wrx->inl_at);
		free(q->wrx->inl);
		free(q->wrx);
		q->wrx = NULL;
	}
	free(q->sq_wrid);
	free(q->sq_wop);
	free(q->sq_nbb);
	free(q->sq_atomic);
	free(q->sq_seq);
	q->sq_seq = NULL;
	free(q->rq_wrid);
	q->sq_wrid = q->rq_wrid = q->sq_atomic = NULL;
	q->sq_wop = q->sq_nbb = NULL;
	/* a CQ's memo of the last QP polled must not outlive it */
	struct emu_cq *cqs[2] = {cq_of(q->qp.send_cq), cq_of(q->qp.recv_cq)};
	for (int i = 0; i < 2; i++)
		if (cqs[i]) {
			pthread_mutex_lock(&cqs[i]->lock);
			if (cqs[i]->last == q)
				cqs[i]->last = NULL;
			pthread_mutex_unlock(&cqs[i]->lock);
		}
}

/* RESET: the queues start over (the core resets the SQ's producer). */
void emu_data_qp_reset(struct emu_qp *q)
{
	if (!q->sq_wrid)
		return;
	pthread_mutex_lock(&q->sq_lock);
	atomic_store(&q->sq_tail, 0);
	q->sq_wr_head = 0;
	atomic_store(&q->sq_wr_tail, 0);
	pthread_mutex_unlock(&q->sq_lock);
	pthread_mutex_lock(&q->rq_lock);
	q->rq_head = 0;
	atomic_store(&q->rq_tail, 0);
	pthread_mutex_unlock(&q->rq_lock);
}

/* ---- ibv_post_send ---------------------------------------------------------------------- */

static int post_fail(struct emu_qp *q, int err, const char *what)
{
	KLOG_ERR("kinet-verbs: ibv_post_send on QP 0x%x: %s", q->qp.qp_num, what);
	return err;
}

/* Builds the WQE of one work request at w (up to KN_MAX_WQE_BBS blocks,
 * zeroed), its index idx; returns its WQEBBs, or 0 and *err. */
static uint32_t build_send(struct emu_qp *q, const struct ibv_send_wr *wr, uint16_t idx,
			   uint8_t *w, int *err, uint8_t *wc_op)
{
	uint8_t op;
	bool raddr = false, atomic = false;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
		op = KN_OPCODE_RDMA_WRITE, raddr = true, *wc_op = IBV_WC_RDMA_WRITE;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		op = KN_OPCODE_RDMA_WRITE_IMM, raddr = true, *wc_op = IBV_WC_RDMA_WRITE;
		break;
	case IBV_WR_SEND: op = KN_OPCODE_SEND, *wc_op = IBV_WC_SEND; break;
	case IBV_WR_SEND_WITH_IMM: op = KN_OPCODE_SEND_IMM, *wc_op = IBV_WC_SEND; break;
	case IBV_WR_RDMA_READ:
		op = KN_OPCODE_RDMA_READ, raddr = true, *wc_op = IBV_WC_RDMA_READ;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		op = KN_OPCODE_ATOMIC_CS, raddr = atomic = true, *wc_op = IBV_WC_COMP_SWAP;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		op = KN_OPCODE_ATOMIC_FA, raddr = atomic = true, *wc_op = IBV_WC_FETCH_ADD;
		break;
	default:
		*err = post_fail(q, EINVAL, "an opcode kinet-verbs does not offer (send with "
					    "invalidate, local invalidate, memory windows, TSO)");
		return 0;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list)) {
		*err = post_fail(q, EINVAL, "more scatter/gather entries than the QP's max_send_sge");
		return 0;
	}
	uint32_t off = 16;
	if (raddr) {
		uint64_t ra = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
		uint32_t rk = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
		kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + off), ra, rk);
		off += 16;
	}
	if (atomic) {
		if (wr->num_sge != 1 || wr->sg_list[0].length != 8) {
			*err = post_fail(q, EINVAL, "an atomic takes one 8-byte local buffer");
			return 0;
		}
		bool cs = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
		kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + off),
				  cs ? wr->wr.atomic.swap : wr->wr.atomic.compare_add,
				  cs ? wr->wr.atomic.compare_add : 0);
		off += 16;
	}
	uint64_t total = 0;
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > KN_MAX_LEN) {
		*err = post_fail(q, EINVAL, "a message longer than 2^31 - 1 bytes");
		return 0;
	}
	bool inl = (wr->send_flags & IBV_SEND_INLINE) && !atomic && op != KN_OPCODE_RDMA_READ;
	if (inl) {
		if (total > q->cap.max_inline_data) {
			*err = post_fail(q, EINVAL, "inline data beyond the QP's max_inline_data");
			return 0;
		}
		if (total) {
			uint32_t at = off + 4;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(w + at, (const void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				at += wr->sg_list[i].length;
			}
			kn_store_be32(w + off, (uint32_t)total | KN_INLINE_SEG);
			off = (at + 15) & ~15u;
		}
	} else {
		for (int i = 0; i < wr->num_sge; i++) {
			const struct ibv_sge *g = &wr->sg_list[i];
			if (!g->length)
				continue; /* as rdma-core: a zero-length entry is no segment */
			kn_set_data_seg((struct kn_wqe_data_seg *)(w + off), g->length, g->lkey,
					g->addr);
			off += 16;
		}
	}
	uint8_t fm = 0;
	if ((wr->send_flags & IBV_SEND_SIGNALED) || q->sig_all)
		fm |= KN_WQE_CTRL_CQ_UPDATE;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		fm |= KN_WQE_CTRL_SOLICITED;
	if (wr->send_flags & IBV_SEND_FENCE)
		fm |= KN_WQE_CTRL_FENCE;
	uint32_t imm = (op == KN_OPCODE_RDMA_WRITE_IMM || op == KN_OPCODE_SEND_IMM) ? wr->imm_data
										    : 0;
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)w, idx, op, 0, q->sqp->qpn, fm,
			(uint8_t)(off / 16), 0, imm);
	return (off + KN_SEND_WQE_BB - 1) / KN_SEND_WQE_BB;
}

/* Posts the list wr on q: each WQE built and rung in turn (the first that
 * fails stops the list, *bad at it). whole: none is posted unless all fit
 * and build (an extended QP's wr_complete, which posts all or nothing). */
static int post_list(struct emu_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad,
		     bool whole)
{
	struct ibv_qp *ibqp = &q->qp;
	int err = 0;
	if (ibqp->qp_type != IBV_QPT_RC || !q->sq_wrid) {
		*bad = wr;
		return post_fail(q, EOPNOTSUPP, "the QP has no CPU send path (RC QPs of ibv_create_qp)");
	}
	int st = ibqp->state;
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
		*bad = wr;
		return post_fail(q, EINVAL, "the QP is not ready to send (RTS or a later state)");
	}
	kinet_qp *s = q->sqp;
	uint8_t w[KN_MAX_WQE_BBS * KN_SEND_WQE_BB];
	pthread_mutex_lock(&q->sq_lock);
	if (whole) {
		/* a dry run: every WQE builds, and all fit in the SQ together */
		uint64_t pi = s->raw_pi, nwr = 0;
		for (struct ibv_send_wr *x = wr; x; x = x->next, nwr++) {
			memset(w, 0, sizeof(w));
			uint8_t wop = 0;
			uint32_t nbb = build_send(q, x, (uint16_t)pi, w, &err, &wop);
			if (!nbb)
				break;
			pi += nbb;
			if (q->sq_wr_head + nwr + 1 - atomic_load(&q->sq_wr_tail) >
				    q->cap.max_send_wr ||
			    pi - atomic_load(&q->sq_tail) > s->sq_cnt) {
				err = post_fail(q, ENOMEM, "wr_complete: the work requests do not "
							   "fit in the send queue");
				break;
			}
		}
		if (err) {
			pthread_mutex_unlock(&q->sq_lock);
			*bad = wr;
			return err;
		}
	}
	for (; wr; wr = wr->next) {
		uint64_t pi = s->raw_pi; /* only this path posts on the QP (sq_lock) */
		memset(w, 0, sizeof(w));
		uint8_t wop = 0;
		uint32_t nbb = build_send(q, wr, (uint16_t)pi, w, &err, &wop);
		if (!nbb)
			break;
		if (q->sq_wr_head - atomic_load(&q->sq_wr_tail) >= q->cap.max_send_wr ||
		    pi + nbb - atomic_load(&q->sq_tail) > s->sq_cnt) {
			err = ENOMEM; /* the send queue is full (as the provider says it) */
			break;
		}
		uint32_t slot = (uint32_t)(pi & (s->sq_cnt - 1));
		q->sq_wrid[slot] = wr->wr_id;
		q->sq_wop[slot] = wop;
		q->sq_nbb[slot] = (uint8_t)nbb;
		q->sq_seq[slot] = q->sq_wr_head;
		q->sq_atomic[slot] = (wop == IBV_WC_COMP_SWAP || wop == IBV_WC_FETCH_ADD)
					     ? wr->sg_list[0].addr
					     : 0;
		long long t = kinet_qp_post_raw(s, w, nbb);
		if (t < 0) {
			err = post_fail(q, (int)-t, "the software NIC refused the WQE");
			break;
		}
		q->sq_wr_head++;
	}
	pthread_mutex_unlock(&q->sq_lock);
	if (err)
		*bad = wr;
	return err;
}

static int emu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return post_list(qp_of(ibqp), wr, bad, false);
}

/* ---- extended QPs: ibv_qp_ex's work request builders ---------------------------------- */

static struct emu_qp *qpx_of(struct ibv_qp_ex *x)
{
	return (struct emu_qp *)x;
}

static void wrx_fail(struct emu_qp *q, int err, const char *what)
{
	struct emu_wrx *x = q->wrx;
	if (x->err)
		return; /* the batch failed already: one line for it */
	KLOG_ERR("kinet-verbs: extended QP 0x%x: %s", q->qp.qp_num, what);
	x->err = err;
}

/* The work request being built (the last one begun), or NULL with the
 * error recorded when none is. */
static struct ibv_send_wr *wrx_cur(struct emu_qp *q, const char *verb)
{
	struct emu_wrx *x = q->wrx;
	if (!x->open || !x->n) {
		char m[96];
		snprintf(m, sizeof(m), "%s without a work request begun (wr_start, then wr_<op>)",
			 verb);
		wrx_fail(q, EINVAL, m);
		return NULL;
	}
	return &x->wr[x->n - 1];
}

/* Begins a work request: op, with the QP's wr_id and wr_flags now. */
static struct ibv_send_wr *wrx_begin(struct ibv_qp_ex *ibx, enum ibv_wr_opcode op, uint64_t flag,
				     const char *verb)
{
	struct emu_qp *q = qpx_of(ibx);
	struct emu_wrx *x = q->wrx;
	char m[128];
	if (!x->open) {
		snprintf(m, sizeof(m), "%s outside wr_start .. wr_complete", verb);
		wrx_fail(q, EINVAL, m);
		return NULL;
	}
	if (!(x->ops & flag)) {
		snprintf(m, sizeof(m), "%s, which the QP's send_ops_flags did not ask for", verb);
		wrx_fail(q, EINVAL, m);
		return NULL;
	}
	if (x->n == x->cap) {
		if (x->cap >= q->cap.max_send_wr) {
			wrx_fail(q, ENOMEM, "more work requests than the QP's max_send_wr");
			return NULL;
		}
		uint32_t nc = x->cap ? x->cap * 2 : 16;
		if (nc > q->cap.max_send_wr)
			nc = q->cap.max_send_wr;
		struct ibv_send_wr *w = realloc(x->wr, nc * sizeof(*w));
		if (w)
			x->wr = w;
		struct ibv_sge *g = realloc(x->sge, (size_t)nc * x->nsge * sizeof(*g));
		if (g)
			x->sge = g;
		size_t *ia = realloc(x->inl_at, nc * sizeof(*ia));
		if (ia)
			x->inl_at = ia;
		if (!w || !g || !ia) {
			wrx_fail(q, ENOMEM, "no memory for the work requests");
			return NULL;
		}
		x->cap = nc;
	}
	struct ibv_send_wr *wr = &x->wr[x->n++];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = ibx->wr_id;
	wr->opcode = op;
	/* inline data is wr_set_inline_data's, whatever the flags say */
	wr->send_flags = ibx->wr_flags & ~(unsigned int)IBV_SEND_INLINE;
	x->inl_at[x->n - 1] = SIZE_MAX;
	return wr;
}

static void qx_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w =
		wrx_begin(x, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, "wr_rdma_write");
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr;
}

static void qx_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct ibv_send_wr *w = wrx_begin(x, IBV_WR_RDMA_WRITE_WITH_IMM,
					  IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, "wr_rdma_write_imm");
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr, w->imm_data = imm;
}

static void qx_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr)
{
	struct ibv_send_wr *w =
		wrx_begin(x, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, "wr_rdma_read");
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = raddr;
}

static void qx_send(struct ibv_qp_ex *x)
{
	wrx_begin(x, IBV_WR_SEND, IBV_QP_EX_WITH_SEND, "wr_send");
}

static void qx_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct ibv_send_wr *w =
		wrx_begin(x, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM, "wr_send_imm");
	if (w)
		w->imm_data = imm;
}

static void qx_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, uint64_t compare,
		       uint64_t swap)
{
	struct ibv_send_wr *w = wrx_begin(x, IBV_WR_ATOMIC_CMP_AND_SWP,
					  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, "wr_atomic_cmp_swp");
	if (w) {
		w->wr.atomic.rkey = rkey, w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.compare_add = compare, w->wr.atomic.swap = swap;
	}
}

static void qx_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	struct ibv_send_wr *w = wrx_begin(x, IBV_WR_ATOMIC_FETCH_AND_ADD,
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, "wr_atomic_fetch_add");
	if (w)
		w->wr.atomic.rkey = rkey, w->wr.atomic.remote_addr = raddr,
		w->wr.atomic.compare_add = add;
}

static void qx_set_sge_list(struct ibv_qp_ex *ibx, size_t n, const struct ibv_sge *sg)
{
	struct emu_qp *q = qpx_of(ibx);
	struct emu_wrx *x = q->wrx;
	struct ibv_send_wr *w = wrx_cur(q, "wr_set_sge_list");
	if (!w)
		return;
	if (n > x->nsge || n > q->cap.max_send_sge || (n && !sg)) {
		wrx_fail(q, EINVAL, "wr_set_sge_list: more entries than the QP's max_send_sge");
		return;
	}
	struct ibv_sge *g = &x->sge[(size_t)(x->n - 1) * x->nsge];
	if (n)
		memcpy(g, sg, n * sizeof(*g));
	w->num_sge = (int)n;
	w->send_flags &= ~(unsigned int)IBV_SEND_INLINE;
	x->inl_at[x->n - 1] = SIZE_MAX;
}

static void qx_set_sge(struct ibv_qp_ex *ibx, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct ibv_sge g = {.addr = addr, .length = len, .lkey = lkey};
	qx_set_sge_list(ibx, 1, &g);
}

static void qx_set_inline_list(struct ibv_qp_ex *ibx, size_t n, const struct ibv_data_buf *b)
{
	struct emu_qp *q = qpx_of(ibx);
	struct emu_wrx *x = q->wrx;
	struct ibv_send_wr *w = wrx_cur(q, "wr_set_inline_data_list");
	if (!w)
		return;
	if (n && !b) {
		wrx_fail(q, EINVAL, "wr_set_inline_data_list: no buffer list");
		return;
	}
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += b[i].length;
	if (total > q->cap.max_inline_data) {
		wrx_fail(q, EINVAL, "wr_set_inline_data: more than the QP's max_inline_data");
		return;
	}
	if (x->inl_len + total > x->inl_cap) {
		size_t nc = x->inl_cap ? x->inl_cap : 4096;
		while (nc < x->inl_len + total)
			nc *= 2;
		uint8_t *p = realloc(x->inl, nc);
		if (!p) {
			wrx_fail(q, ENOMEM, "no memory for the inline data");
			return;
		}
		x->inl = p, x->inl_cap = nc;
	}
	size_t at = x->inl_len;
	for (size_t i = 0; i < n; i++)
		if (b[i].length) {
			memcpy(x->inl + x->inl_len, b[i].addr, b[i].length);
			x->inl_len += b[i].length;
		}
	/* one gather entry over the copy; its address is set at wr_complete
	 * (inl may move until then) */
	struct ibv_sge *g = &x->sge[(size_t)(x->n - 1) * x->nsge];
	g->length = (uint32_t)total;
	g->lkey = 0;
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
	x->inl_at[x->n - 1] = at;
}

static void qx_set_inline(struct ibv_qp_ex *ibx, void *addr, size_t len)
{
	struct ibv_data_buf b = {.addr = addr, .length = len};
	qx_set_inline_list(ibx, 1, &b);
}

static void wrx_reset(struct emu_wrx *x)
{
	x->n = 0;
	x->inl_len = 0;
	x->err = 0;
	x->open = false;
}

static void qx_start(struct ibv_qp_ex *ibx)
{
	struct emu_qp *q = qpx_of(ibx);
	wrx_reset(q->wrx);
	q->wrx->open = true;
}

static void qx_abort(struct ibv_qp_ex *ibx)
{
	wrx_reset(qpx_of(ibx)->wrx);
}

static int qx_complete(struct ibv_qp_ex *ibx)
{
	struct emu_qp *q = qpx_of(ibx);
	struct emu_wrx *x = q->wrx;
	if (!x->open) {
		wrx_fail(q, EINVAL, "wr_complete without wr_start");
		int e = x->err;
		x->err = 0;
		return e;
	}
	int err = x->err;
	if (!err && x->n) {
		for (uint32_t i = 0; i < x->n; i++) {
			struct ibv_send_wr *w = &x->wr[i];
			w->sg_list = &x->sge[(size_t)i * x->nsge];
			if (x->inl_at[i] != SIZE_MAX)
				w->sg_list[0].addr = (uintptr_t)(x->inl + x->inl_at[i]);
			w->next = i + 1 < x->n ? &x->wr[i + 1] : NULL;
		}
		struct ibv_send_wr *bad = NULL;
		err = post_list(q, x->wr, &bad, true);
	}
	wrx_reset(x);
	return err;
}

/* The builders of what kinet-verbs does not offer (refused at creation, so
 * only a program that calls them anyway gets here): an error, not a crash. */
static void qx_refuse(struct ibv_qp_ex *ibx, const char *verb)
{
	char m[96];
	snprintf(m, sizeof(m), "%s is not supported", verb);
	wrx_fail(qpx_of(ibx), EOPNOTSUPP, m);
}
static void qx_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bi)
{
	(void)mw, (void)rkey, (void)bi;
	qx_refuse(x, "wr_bind_mw");
}
static void qx_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	(void)rkey;
	qx_refuse(x, "wr_local_inv");
}
static void qx_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	(void)rkey;
	qx_refuse(x, "wr_send_inv");
}
static void qx_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t sz, uint16_t mss)
{
	(void)hdr, (void)sz, (void)mss;
	qx_refuse(x, "wr_send_tso");
}
static void qx_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	(void)ah, (void)qpn, (void)qkey;
	qx_refuse(x, "wr_set_ud_addr");
}
static void qx_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	(void)srqn;
	qx_refuse(x, "wr_set_xrc_srqn");
}
static void qx_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, const void *v)
{
	(void)rkey, (void)raddr, (void)v;
	qx_refuse(x, "wr_atomic_write");
}

#define EMU_QPX_OPS                                                                         \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                             \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

int emu_data_qpx_init(struct emu_qp *q, uint64_t send_ops)
{
	if (send_ops & ~(uint64_t)EMU_QPX_OPS) {
		KLOG_ERR("kinet-verbs: ibv_create_qp_ex: send_ops_flags 0x%llx: only RDMA write "
			 "(with immediate), read, send (with immediate), compare-and-swap and "
			 "fetch-and-add are supported (EOPNOTSUPP)",
			 (unsigned long long)send_ops);
		return -EOPNOTSUPP;
	}
	struct emu_wrx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->ops = send_ops;
	x->nsge = q->cap.max_send_sge ? q->cap.max_send_sge : 1;
	q->wrx = x;
	struct ibv_qp_ex *e = &q->qpx;
	e->comp_mask = 0;
	e->wr_atomic_cmp_swp = qx_cmp_swp;
	e->wr_atomic_fetch_add = qx_fetch_add;
	e->wr_bind_mw = qx_bind_mw;
	e->wr_local_inv = qx_local_inv;
	e->wr_rdma_read = qx_rdma_read;
	e->wr_rdma_write = qx_rdma_write;
	e->wr_rdma_write_imm = qx_rdma_write_imm;
	e->wr_send = qx_send;
	e->wr_send_imm = qx_send_imm;
	e->wr_send_inv = qx_send_inv;
	e->wr_send_tso = qx_send_tso;
	e->wr_set_ud_addr = qx_ud_addr;
	e->wr_set_xrc_srqn = qx_xrc_srqn;
	e->wr_set_inline_data = qx_set_inline;
	e->wr_set_inline_data_list = qx_set_inline_list;
	e->wr_set_sge = qx_set_sge;
	e->wr_set_sge_list = qx_set_sge_list;
	e->wr_start = qx_start;
	e->wr_complete = qx_complete;
	e->wr_abort = qx_abort;
	e->wr_atomic_write = qx_atomic_write;
	return 0;
}

struct ibv_qp_ex *emu_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct emu_qp *q = qp_of(qp);
	return q->wrx ? &q->qpx : NULL;
}

/* ---- ibv_post_recv ---------------------------------------------------------------------- */

static int emu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct emu_qp *q = qp_of(ibqp);
	kinet_qp *s = q->sqp;
	int err = 0;
	if (ibqp->qp_type != IBV_QPT_RC || !q->rq_wrid || !s->rq_cnt) {
		*bad = wr;
		KLOG_ERR("kinet-verbs: ibv_post_recv on QP 0x%x: it has no receive queue%s",
			 ibqp->qp_num, q->srq ? " (it receives through its SRQ: ibv_post_srq_recv)" : "");
		return EINVAL;
	}
	if (ibqp->state == IBV_QPS_RESET) {
		*bad = wr;
		KLOG_ERR("kinet-verbs: ibv_post_recv on QP 0x%x in RESET", ibqp->qp_num);
		return EINVAL;
	}
	pthread_mutex_lock(&q->rq_lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > s->rq_stride / 16 ||
		    (wr->num_sge && !wr->sg_list)) {
			KLOG_ERR("kinet-verbs: ibv_post_recv on QP 0x%x: more scatter entries than "
				 "the QP's max_recv_sge",
				 ibqp->qp_num);
			err = EINVAL;
			break;
		}
		if (q->rq_head - atomic_load(&q->rq_tail) >= s->rq_cnt) {
			err = ENOMEM; /* the receive queue is full */
			break;
		}
		uint32_t slot = (uint32_t)(q->rq_head & (s->rq_cnt - 1));
		uint8_t *seg = s->rq + (size_t)slot * s->rq_stride;
		uint32_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			if (!wr->sg_list[i].length)
				continue;
			kn_set_data_seg((struct kn_wqe_data_seg *)(seg + off), wr->sg_list[i].length,
					wr->sg_list[i].lkey, wr->sg_list[i].addr);
			off += 16;
		}
		for (; off < s->rq_stride; off += 16) /* the list ends here */
			kn_set_data_seg((struct kn_wqe_data_seg *)(seg + off), 0, KN_INVALID_LKEY, 0);
		q->rq_wrid[slot] = wr->wr_id;
		q->rq_head++;
	}
	/* the WQEs before the record that publishes them */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->dbrec[KN_RCV_DBR], kn_htobe32((uint32_t)(q->rq_head & 0xffff)),
			 __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->rq_lock);
	if (err)
		*bad = wr;
	return err;
}

/* ---- ibv_poll_cq ------------------------------------------------------------------------ */

/* An error syndrome as the mlx5 provider reports it. */
static enum ibv_wc_status wc_status(uint8_t synd)
{
	switch (synd) {
	case KN_SYND_LOCAL_LENGTH_ERR: return IBV_WC_LOC_LEN_ERR;
	case KN_SYND_LOCAL_QP_OP_ERR: return IBV_WC_LOC_QP_OP_ERR;
	case KN_SYND_LOCAL_PROT_ERR: return IBV_WC_LOC_PROT_ERR;
	case KN_SYND_WR_FLUSH_ERR: return IBV_WC_WR_FLUSH_ERR;
	case KN_SYND_MW_BIND_ERR: return IBV_WC_MW_BIND_ERR;
	case KN_SYND_BAD_RESP_ERR: return IBV_WC_BAD_RESP_ERR;
	case KN_SYND_LOCAL_ACCESS_ERR: return IBV_WC_LOC_ACCESS_ERR;
	case KN_SYND_REMOTE_INVAL_REQ_ERR: return IBV_WC_REM_INV_REQ_ERR;
	case KN_SYND_REMOTE_ACCESS_ERR: return IBV_WC_REM_ACCESS_ERR;
	case KN_SYND_REMOTE_OP_ERR: return IBV_WC_REM_OP_ERR;
	case KN_SYND_TRANSPORT_RETRY_EXC_ERR: return IBV_WC_RETRY_EXC_ERR;
	case KN_SYND_RNR_RETRY_EXC_ERR: return IBV_WC_RNR_RETRY_EXC_ERR;
	case KN_SYND_REMOTE_ABORTED_ERR: return IBV_WC_REM_ABORT_ERR;
	default: return IBV_WC_GENERAL_ERR;
	}
}

/* The old values of the atomics among the WQEs from..to (done): the NIC
 * writes them big-endian, as the PRM's responder returns them; a ConnectX
 * whose driver reports IBV_ATOMIC_HCA writes them in host order (its 8-byte
 * atomic endianness mode), and so do these, before the program sees the
 * completion. */
static void atomic_results(struct emu_qp *q, uint64_t from, uint64_t to)
{
	uint32_t cnt = q->sqp->sq_cnt;
	for (uint64_t i = from; i <= to && i - from < cnt;) {
		uint32_t slot = (uint32_t)(i & (cnt - 1));
		if (q->sq_atomic[slot]) {
			uint64_t *p = (uint64_t *)(uintptr_t)q->sq_atomic[slot];
			*p = kn_be64toh(*p);
			q->sq_atomic[slot] = 0;
		}
		i += q->sq_nbb[slot] ? q->sq_nbb[slot] : 1;
	}
}

/* Turns one CQE into *wc; false for a CQE of a QP that is gone (skipped). */
static bool cqe_to_wc(struct emu_cq *c, const struct kn_cqe64 *e, struct ibv_wc *wc)
{
	uint8_t op = kn_cqe_opcode(e);
	/* the software NIC's QP number (s_wqe_opcode_qpn in errors), which is not
	 * the verbs QP number when that is the host's (rendezvous.c) */
	uint32_t qpn = kn_be32toh(e->sop_drop_qpn) & 0xffffff;
	uint16_t ctr = kn_be16toh(e->wqe_counter);
	struct emu_qp *q = c->last;
	if (!q || q->sqp->qpn != qpn) {
		q = emu_qp_by_num(emu_dev_of(c->cq.context), qpn);
		/* a DevX QP has no work requests here, but its SRQ's receives do */
		if (!q || (!q->sq_wrid && !q->srq)) {
			KLOG_WARN("kinet-verbs: a CQE of QP 0x%x, which is gone: dropped", qpn);
			return false;
		}
		c->last = q;
	}
	kinet_qp *s = q->sqp;
	memset(wc, 0, sizeof(*wc));
	wc->qp_num = q->qp.qp_num;
	bool err = op == KN_CQE_REQ_ERR || op == KN_CQE_RESP_ERR;
	if (err) {
		const struct kn_err_cqe *x = (const struct kn_err_cqe *)e;
		wc->status = wc_status(x->syndrome);
		wc->vendor_err = x->vendor_err_synd;
	} else {
		wc->status = IBV_WC_SUCCESS;
		wc->byte_len = kn_be32toh(e->byte_cnt);
	}
	if (op == KN_CQE_REQ || op == KN_CQE_REQ_ERR) {
		uint32_t slot = ctr & (s->sq_cnt - 1);
		wc->wr_id = q->sq_wrid[slot];
		wc->opcode = (enum ibv_wc_opcode)q->sq_wop[slot];
		if (!err && (wc->opcode == IBV_WC_COMP_SWAP || wc->opcode == IBV_WC_FETCH_ADD))
			wc->byte_len = 8;
		/* this WQE and every unsignaled one before it are done */
		uint64_t tail = atomic_load(&q->sq_tail);
		uint64_t at = tail + (uint16_t)(ctr - (uint16_t)tail);
		if (!err)
			atomic_results(q, tail, at);
		atomic_store(&q->sq_tail, at + q->sq_nbb[slot]);
		atomic_store(&q->sq_wr_tail, q->sq_seq[slot] + 1);
		return true;
	}
	if (q->srq) {
		/* the CQE names the SRQ's WQE, free again from now on */
		wc->wr_id = emu_srq_complete(q->srq, ctr);
	} else {
		uint32_t slot = ctr & (s->rq_cnt - 1);
		wc->wr_id = q->rq_wrid[slot];
		uint64_t tail = atomic_load(&q->rq_tail);
		atomic_store(&q->rq_tail, tail + (uint16_t)(ctr - (uint16_t)tail) + 1);
	}
	wc->opcode = op == KN_CQE_RESP_WR_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	if (!err) {
		/* RC: the connected QP, by its verbs number (the CQE has the
		 * software NIC's) */
		wc->src_qp = q->attr.dest_qp_num;
		if (op == KN_CQE_RESP_WR_IMM || op == KN_CQE_RESP_SEND_IMM) {
			wc->wc_flags |= IBV_WC_WITH_IMM;
			wc->imm_data = e->imm_inval_pkey; /* network order, as the CQE has it */
		}
	}
	return true;
}

static int emu_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct emu_cq *c = cq_of(ibcq);
	if (n < 0 || (n && !wc))
		return -EINVAL;
	int got = 0;
	pthread_mutex_lock(&c->lock);
	while (got < n) {
		struct kn_cqe64 e;
		if (kinet_cq_poll(c->scq, &e))
			break; /* none yet */
		if (cqe_to_wc(c, &e, &wc[got]))
			got++;
	}
	pthread_mutex_unlock(&c->lock);
	return got;
}

/* ---- extended CQs (ibv_cq_ex) -------------------------------------------------------------- */

/* verbs.h's ibv_start_poll .. ibv_end_poll call these through the CQ: the
 * poll holds the CQ's lock from a start_poll that found a completion to its
 * end_poll (none when the CQ was created single-threaded), as the mlx5
 * provider does; each completion is turned into a struct ibv_wc once, which
 * the read functions read. */
static struct emu_cq *cqx_of(struct ibv_cq_ex *cq)
{
	return (struct emu_cq *)cq;
}

/* The next completion into c->cur, its status and wr_id into the CQ:
 * 0, or ENOENT when there is none. */
static int cqx_next(struct emu_cq *c)
{
	struct kn_cqe64 e;
	for (;;) {
		if (kinet_cq_poll(c->scq, &e))
			return ENOENT;
		if (cqe_to_wc(c, &e, &c->cur))
			break;
	}
	c->cqx.status = c->cur.status;
	c->cqx.wr_id = c->cur.wr_id;
	return 0;
}

static int cqx_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	struct emu_cq *c = cqx_of(cq);
	if (!attr || attr->comp_mask) {
		KLOG_ERR("kinet-verbs: ibv_start_poll: comp_mask 0x%x (none is defined)",
			 attr ? attr->comp_mask : 0);
		return EINVAL;
	}
	if (!c->single)
		pthread_mutex_lock(&c->lock);
	int rc = cqx_next(c);
	if (rc && !c->single)
		pthread_mutex_unlock(&c->lock); /* ENOENT: no end_poll follows */
	return rc;
}

static int cqx_next_poll(struct ibv_cq_ex *cq)
{
	return cqx_next(cqx_of(cq));
}

static void cqx_end_poll(struct ibv_cq_ex *cq)
{
	struct emu_cq *c = cqx_of(cq);
	if (!c->single)
		pthread_mutex_unlock(&c->lock);
}

static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.opcode;
}
static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.vendor_err;
}
static uint32_t cqx_read_byte_len(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.byte_len;
}
static __be32 cqx_read_imm_data(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.imm_data;
}
static uint32_t cqx_read_qp_num(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.qp_num;
}
static uint32_t cqx_read_src_qp(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.src_qp;
}
static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.wc_flags;
}
/* RoCE: no LIDs, service level 0 */
static uint32_t cqx_read_slid(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.slid;
}
static uint8_t cqx_read_sl(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.sl;
}
static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *cq)
{
	return cqx_of(cq)->cur.dlid_path_bits;
}

void emu_data_cqx_init(struct emu_cq *c, bool single)
{
	struct ibv_cq_ex *x = &c->cqx;
	c->single = single;
	x->start_poll = cqx_start_poll;
	x->next_poll = cqx_next_poll;
	x->end_poll = cqx_end_poll;
	x->read_opcode = cqx_read_opcode;
	x->read_vendor_err = cqx_read_vendor_err;
	x->read_byte_len = cqx_read_byte_len;
	x->read_imm_data = cqx_read_imm_data;
	x->read_qp_num = cqx_read_qp_num;
	x->read_src_qp = cqx_read_src_qp;
	x->read_wc_flags = cqx_read_wc_flags;
	x->read_slid = cqx_read_slid;
	x->read_sl = cqx_read_sl;
	x->read_dlid_path_bits = cqx_read_dlid_path_bits;
	/* completion timestamps, CVLAN, flow tag, tag matching: refused at
	 * creation (their read functions stay NULL, as the provider leaves the
	 * ones not asked for) */
}

/* ---- completion events ------------------------------------------------------------------- */

struct emu_chan {
	struct ibv_comp_channel ch; /* first: the handle the program holds */
	struct emu_cq *head, *tail; /* CQs with an event not read yet */
};

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond = PTHREAD_COND_INITIALIZER;
static struct emu_cq *armed; /* the armed CQs (watch_lock) */
static bool watching;

/* Queues an event of c on its channel (watch_lock held): the fd becomes
 * readable. The eventfd's count is non-zero exactly while events wait. */
static void chan_push(struct emu_cq *c)
{
	struct emu_chan *h = c->chan;
	c->pending = true;
	c->ev_next = NULL;
	if (h->tail)
		h->tail->ev_next = c;
	else
		h->head = c;
	h->tail = c;
	uint64_t one = 1;
	if (write(h->ch.fd, &one, sizeof(one)) != sizeof(one))
		KLOG_ERR("kinet-verbs: completion channel: cannot signal its fd: %s",
			 strerror(errno));
}

/* Removes c's queued event, if any (watch_lock held). */
static void chan_drop(struct emu_cq *c)
{
	struct emu_chan *h = c->chan;
	if (!c->pending)
		return;
	struct emu_cq *prev = NULL;
	for (struct emu_cq *o = h->head; o; prev = o, o = o->ev_next)
		if (o == c) {
			if (prev)
				prev->ev_next = o->ev_next;
			else
				h->head = o->ev_next;
			if (h->tail == o)
				h->tail = prev;
			break;
		}
	c->pending = false;
	if (!h->head) {
		uint64_t v;
		if (read(h->ch.fd, &v, sizeof(v)) < 0)
			KLOG_DBG("kinet-verbs: completion channel drain: %s", strerror(errno));
	}
}

static void *watcher(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&watch_lock);
	for (;;) {
		while (!armed)
			pthread_cond_wait(&watch_cond, &watch_lock);
		struct emu_cq **pp = &armed;
		while (*pp) {
			struct emu_cq *c = *pp;
			struct kn_cqe64 e;
			uint64_t ci = __atomic_load_n(&c->scq->host_ci, __ATOMIC_RELAXED);
			if (kinet_cq_peek(c->scq, ci, &e) == 0) {
				*pp = c->arm_next; /* fired: disarmed */
				c->armed = false;
				chan_push(c);
			} else {
				pp = &c->arm_next;
			}
		}
		pthread_mutex_unlock(&watch_lock);
		struct timespec ts = {0, EMU_WATCH_US * 1000};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&watch_lock);
	}
	return NULL;
}

static int emu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	(void)solicited_only; /* any CQE fires: never fewer events than asked for */
	struct emu_cq *c = cq_of(ibcq);
	if (!c->chan)
		return 0; /* no channel to report to: nothing to do, as on hardware */
	pthread_mutex_lock(&watch_lock);
	if (!watching) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &a, watcher, NULL);
		pthread_attr_destroy(&a);
		if (rc) {
			pthread_mutex_unlock(&watch_lock);
			KLOG_ERR("kinet-verbs: ibv_req_notify_cq: no thread to watch CQs: %s",
				 strerror(rc));
			return rc;
		}
		watching = true;
	}
	if (!c->armed && !c->pending) {
		c->armed = true;
		c->arm_next = armed;
		armed = c;
		pthread_cond_signal(&watch_cond);
	}
	pthread_mutex_unlock(&watch_lock);
	return 0;
}

void emu_data_cq_init(struct emu_cq *c, struct ibv_comp_channel *ch)
{
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->cq.mutex, NULL);
	pthread_cond_init(&c->cq.cond, NULL);
	if (ch) {
		c->chan = (struct emu_chan *)ch;
		c->cq.channel = ch;
		pthread_mutex_lock(&watch_lock);
		ch->refcnt++;
		pthread_mutex_unlock(&watch_lock);
	}
}

/* Before the CQ goes: disarmed, its event not read dropped, and, as
 * rdma-core's ibv_destroy_cq, waits until every event read was acknowledged. */
void emu_data_cq_fini(struct emu_cq *c)
{
	if (c->chan) {
		pthread_mutex_lock(&watch_lock);
		for (struct emu_cq **pp = &armed; *pp; pp = &(*pp)->arm_next)
			if (*pp == c) {
				*pp = c->arm_next;
				break;
			}
		c->armed = false;
		chan_drop(c);
		c->chan->ch.refcnt--;
		pthread_mutex_unlock(&watch_lock);
		pthread_mutex_lock(&c->cq.mutex);
		while (c->cq.comp_events_completed < c->events_read)
			pthread_cond_wait(&c->cq.cond, &c->cq.mutex);
		pthread_mutex_unlock(&c->cq.mutex);
	}
	pthread_mutex_destroy(&c->lock);
}

struct ibv_comp_channel *emu_chan_create(struct ibv_context *ib)
{
	struct emu_chan *h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	h->ch.context = ib;
	h->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (h->ch.fd < 0) {
		int e = errno;
		free(h);
		errno = e;
		return NULL;
	}
	return &h->ch;
}

int emu_chan_destroy(struct ibv_comp_channel *ch)
{
	pthread_mutex_lock(&watch_lock);
	int refs = ch->refcnt;
	pthread_mutex_unlock(&watch_lock);
	if (refs)
		return EBUSY; /* CQs still report to it */
	close(ch->fd);
	free(ch);
	return 0;
}

int emu_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	struct emu_chan *h = (struct emu_chan *)ch;
	for (;;) {
		pthread_mutex_lock(&watch_lock);
		struct emu_cq *c = h->head;
		if (c) {
			chan_drop(c);
			pthread_mutex_lock(&c->cq.mutex);
			c->events_read++;
			pthread_mutex_unlock(&c->cq.mutex);
			pthread_mutex_unlock(&watch_lock);
			*cq = &c->cq;
			*cq_context = c->cq.cq_context;
			return 0;
		}
		pthread_mutex_unlock(&watch_lock);
		int fl = fcntl(ch->fd, F_GETFL);
		if (fl >= 0 && (fl & O_NONBLOCK)) {
			errno = EAGAIN; /* as a read of the kernel's channel would say */
			return -1;
		}
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

void emu_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += n;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- ibv_query_qp ---------------------------------------------------------------------- */

int emu_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	(void)mask; /* every attribute is filled, as the mlx5 provider does */
	struct emu_qp *q = qp_of(ibqp);
	memset(init, 0, sizeof(*init));
	if (q->sq_wrid) {
		*attr = q->attr;
		init->cap = q->cap;
		init->sq_sig_all = q->sig_all;
		attr->cap = q->cap;
	} else {
		memset(attr, 0, sizeof(*attr));
	}
	/* the state the NIC holds: an error moves the QP to ERR on its own */
	int st = q->sqp ? kinet_qp_get_state(q->sqp) : (int)ibqp->state;
	attr->qp_state = (enum ibv_qp_state)st;
	attr->cur_qp_state = attr->qp_state;
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->qp_type = ibqp->qp_type;
	return 0;
}

void emu_data_ops(struct ibv_context *ib)
{
	ib->ops.poll_cq = emu_poll_cq;
	ib->ops.req_notify_cq = emu_req_notify_cq;
	ib->ops.post_send = emu_post_send;
	ib->ops.post_recv = emu_post_recv;
}

#endif /* KINET_HAVE_RDMA_HEADERS */
