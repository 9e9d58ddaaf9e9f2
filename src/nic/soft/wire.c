/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c - the software NIC's wire: RC QPs of different processes over
 * libfabric (FI_EP_RDM, FI_MSG; provider KINET_FI_PROVIDER, tcp;ofi_rxm by
 * default).
 *
 * One endpoint per context carries every QP of the context. Each message
 * starts with a header naming the target QP, both QP generations (stale or
 * stray messages are dropped) and a per-connection message number; the
 * target executes a connection's messages strictly in that order.
 *
 * Requester: kinet_wire_post() queues a parsed WQE in the QP's window and
 * sends it: writes and sends in chunks of at most CHUNK bytes (straight from
 * host memory with fi_sendv when the pieces allow it, otherwise copied into
 * a bounce buffer, through kinet_mem_copy for GPU memory), reads and atomics
 * as one request. kinet_wire_progress() writes the CQEs in WQE order once
 * the target has answered (a write completes only after it was placed).
 *
 * Target: kinet_wire_ctx_progress() polls the endpoint and runs each request
 * through the same responder functions as a local peer (soft_resp_*: rkey,
 * bounds, access, placement, receive queue), then answers. A send that
 * finds no receive WQE is retried every KINET_RNR_TIMER_US up to the
 * requester's rnr_retry (7: forever), then answered with RNR retry exceeded;
 * meanwhile the target keeps the requester's timer alive.
 *
 * Failures: a requester that hears nothing from its peer for
 * KINET_NET_TIMEOUT_MS while requests are outstanding (dead process, broken
 * connection, network down), or whose sends fail, completes the oldest
 * outstanding WQE with transport retry exceeded, flushes the others and
 * moves the QP to ERR. The peer's address is then dropped from the address
 * vector (closing the provider's connection and whatever it still queued),
 * so a later connect starts afresh.
 */
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/random.h>
#include <unistd.h>
#include <kinet/net.h>
#include "nic/soft/wire.h"

static uint64_t node_nonce;
static pthread_once_t node_once = PTHREAD_ONCE_INIT;

static void node_init(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = kn_now_ns() ^ ((uint64_t)getpid() << 32);
	node_nonce = v ? v : 1;
}

uint64_t kinet_wire_node(void)
{
	pthread_once(&node_once, node_init);
	return node_nonce;
}

#if KINET_HAVE_FABRIC
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define CHUNK (256u * 1024u) /* largest payload of one message */
#define HDR 64u              /* payload offset in a buffer; the header ends there */
#define NRX 32               /* receive buffers posted */
#define NTX 512              /* send descriptors */
#define NBIG 16              /* bounce buffers of HDR + CHUNK */
#define SMALL 256u           /* inline buffer of a send descriptor (HDR + 192) */
#define WIN 64u              /* outstanding requests per QP */

enum { M_REQ = 1, M_RESP = 2, M_KA = 3 };
enum { F_FIRST = 1, F_LAST = 2, F_FIN = 4 };

/* Message header, little-endian on the wire. */
struct wmsg {
	uint8_t type;  /* M_* */
	uint8_t op;    /* REQ: KN_OPCODE_*; RESP: syndrome (0: success) */
	uint8_t rnr;   /* REQ: requester's rnr_retry */
	uint8_t flags; /* F_* */
	uint32_t dst_qpn, src_qpn;
	uint32_t dst_gen, src_gen;
	uint32_t msn; /* REQ: message number on the connection */
	uint32_t seq; /* request number (REQ and RESP) */
	uint32_t len; /* payload bytes after the header */
	uint64_t a;   /* REQ: remote address of this chunk (send: total); RESP: offset / old value */
	uint64_t b;   /* REQ: offset of this chunk (read: total length) */
	uint32_t rkey, imm;
};
_Static_assert(sizeof(struct wmsg) == 56, "wire header is 56 bytes");
#define HSZ ((uint32_t)sizeof(struct wmsg))
#define HOFF (HDR - HSZ) /* where the header starts in a buffer */

static void enc(uint8_t *p, const struct wmsg *m)
{
	struct wmsg x = *m;
	x.dst_qpn = htole32(m->dst_qpn);
	x.src_qpn = htole32(m->src_qpn);
	x.dst_gen = htole32(m->dst_gen);
	x.src_gen = htole32(m->src_gen);
	x.msn = htole32(m->msn);
	x.seq = htole32(m->seq);
	x.len = htole32(m->len);
	x.a = htole64(m->a);
	x.b = htole64(m->b);
	x.rkey = htole32(m->rkey);
	x.imm = m->imm; /* already in wire (big-endian) order, carried as is */
	memcpy(p, &x, sizeof(x));
}

static void dec(struct wmsg *m, const uint8_t *p)
{
	memcpy(m, p, sizeof(*m));
	m->dst_qpn = le32toh(m->dst_qpn);
	m->src_qpn = le32toh(m->src_qpn);
	m->dst_gen = le32toh(m->dst_gen);
	m->src_gen = le32toh(m->src_gen);
	m->msn = le32toh(m->msn);
	m->seq = le32toh(m->seq);
	m->len = le32toh(m->len);
	m->a = le64toh(m->a);
	m->b = le64toh(m->b);
	m->rkey = le32toh(m->rkey);
}

enum { CTX_RX = 1, CTX_TX = 2 };

/* A posted receive buffer; while a request waits at the target it stays in
 * the target QP's queue, then it is posted again. */
struct rxbuf {
	struct fi_context fc;
	int kind;
	struct rxbuf *next;
	uint8_t *buf;
	struct wmsg m;
	int executed;     /* target: done, the answer is still to be sent */
	uint32_t status;  /* its result */
	uint64_t old;     /* atomic result */
	uint64_t off;     /* read: bytes already sent back */
};

/* A send in flight; names its QP by number and generation, never by pointer
 * (the QP may be gone when the completion arrives). */
struct txd {
	struct fi_context fc;
	int kind;
	struct txd *next;
	uint32_t qpn, gen;
	uint8_t *big; /* bounce buffer taken, if any */
	uint8_t small[SMALL];
};

/* One outstanding request of a requester QP. */
struct wreq {
	struct soft_req r; /* header fields and r.iov[0..niov) only; r.wqe when inline */
	uint64_t sent;     /* payload bytes sent */
	uint64_t got;      /* read: bytes received */
	bool started;      /* first message sent */
	bool fin;          /* read: final answer seen (data may still be on its way) */
	bool done;
	uint32_t status;
};

struct wpeer {
	uint8_t addr[128];
	size_t len;
	fi_addr_t fa;
	bool dead;
	int refs;
};

struct wire_qp {
	kinet_qp *qp;
	uint32_t gen;
	bool connected;
	int peer;           /* index in w->peers */
	uint32_t peer_qpn, peer_gen;
	/* requester */
	struct wreq *win;   /* WIN entries */
	uint32_t head, txn, tail; /* oldest incomplete, next to send, next free */
	uint32_t msn_tx;
	uint64_t last_rx_ns, busy_since_ns;
	bool failed;        /* error seen: everything outstanding is failing */
	/* target */
	struct rxbuf *tq;   /* received requests, by message number */
	uint32_t msn_rx;
	bool tgt_failed;    /* answered an error: drop the rest of this connection */
	uint8_t *asm_buf;   /* send reassembly */
	uint64_t asm_len, asm_total;
	uint32_t rnr_count;
	uint64_t rnr_next_ns;
	uint64_t last_tx_ns;
};

struct kinet_wire {
	kinet_ctx *ctx;
	pthread_mutex_t lock;
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	char prov[32];
	uint8_t addr[128];
	size_t addr_len;
	size_t inject, iov_limit;
	struct rxbuf rx[NRX];
	uint8_t *rxmem, *bigmem, *txmem;
	struct txd *txfree;
	uint8_t *bigfree[NBIG];
	int nbig;
	struct rxbuf *repost; /* receive buffers to post again */
	struct wire_qp **qps;
	int nqps, qcap;
	struct wpeer *peers;
	int npeers;
	uint64_t timeout_ns, rnr_ns, ka_ns;
};

static uint32_t new_gen(void)
{
	uint32_t g = 0;
	if (getrandom(&g, sizeof(g), 0) != (ssize_t)sizeof(g))
		g = (uint32_t)kn_now_ns();
	return g ? g : 1;
}

/* ---- endpoint ------------------------------------------------------------ */

static void wire_destroy(struct kinet_wire *w)
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

static int wire_create(kinet_ctx *ctx, struct kinet_wire **out)
{
	const char *prov = kinet_tunable_str("KINET_FI_PROVIDER");
	struct kinet_wire *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	pthread_mutex_init(&w->lock, NULL);
	snprintf(w->prov, sizeof(w->prov), "%s", prov && *prov ? prov : "tcp;ofi_rxm");
	long long tmo = kinet_tunable_int("KINET_NET_TIMEOUT_MS");
	w->timeout_ns = (uint64_t)(tmo > 0 ? tmo : 5000) * 1000000ull;
	long long rnr = kinet_tunable_int("KINET_RNR_TIMER_US");
	w->rnr_ns = (uint64_t)(rnr > 0 ? rnr : 1) * 1000ull;
	w->ka_ns = w->timeout_ns / 4;
	if (w->ka_ns > 200000000ull)
		w->ka_ns = 200000000ull;

	struct fi_info *hints = fi_allocinfo();
	if (!hints) {
		wire_destroy(w);
		return -ENOMEM;
	}
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->mr_mode = 0; /* bounce buffers are not registered */
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->fabric_attr->prov_name = strdup(w->prov);
	int rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &w->info);
	fi_freeinfo(hints);
	if (rc) {
		KLOG_ERR("wire: libfabric provider \"%s\" (KINET_FI_PROVIDER) not available: %s",
			 w->prov, fi_strerror(-rc));
		w->info = NULL;
		wire_destroy(w);
		return -ENODEV;
	}
	w->inject = w->info->tx_attr->inject_size;
	w->iov_limit = w->info->tx_attr->iov_limit;
	const char *step = "fi_fabric";
	if ((rc = fi_fabric(w->info->fabric_attr, &w->fab, NULL)))
		goto fail;
	step = "fi_domain";
	if ((rc = fi_domain(w->fab, w->info, &w->dom, NULL)))
		goto fail;
	struct fi_cq_attr cqa = {.size = 4096, .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_NONE};
	step = "fi_cq_open";
	if ((rc = fi_cq_open(w->dom, &cqa, &w->cq, NULL)))
		goto fail;
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
	for (int i = 0; i < NRX; i++) {
		w->rx[i].kind = CTX_RX;
		w->rx[i].buf = w->rxmem + (size_t)i * (HDR + CHUNK);
		if ((rc = post_rx(w, &w->rx[i]))) {
			wire_destroy(w);
			return rc;
		}
	}
	KLOG_INFO("wire: provider %s, fabric %s, domain %s", w->info->fabric_attr->prov_name,
		  w->info->fabric_attr->name, w->info->domain_attr->name);
	*out = w;
	return 0;
fail:
	KLOG_ERR("wire: %s: %s", step, fi_strerror(-rc));
	wire_destroy(w);
	return -ENODEV;
}

/* The context's wire, created on first use. */
static int wire_get(kinet_ctx *ctx, struct kinet_wire **out)
{
	if (ctx->backend != KINET_BACKEND_SOFT || !ctx->nic)
		return -ENOTSUP;
	pthread_mutex_lock(&ctx->lock);
	int rc = 0;
	if (!ctx->wire)
		rc = wire_create(ctx, &ctx->wire);
	*out = ctx->wire;
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

/* ---- small pools --------------------------------------------------------- */

static struct txd *txd_get(struct kinet_wire *w, const struct wire_qp *wq)
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

static void txd_put(struct kinet_wire *w, struct txd *t)
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
static int iov_slice(const struct soft_iov *iov, int niov, uint64_t off, uint64_t n,
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

static uint64_t gpu_bytes(const struct soft_iov *iov, int n)
{
	uint64_t b = 0;
	for (int i = 0; i < n; i++)
		if (iov[i].kind != KINET_MEM_HOST)
			b += iov[i].len;
	return b;
}

/* ---- sending --------------------------------------------------------------- */

static fi_addr_t peer_fa(struct kinet_wire *w, const struct wire_qp *wq)
{
	return w->peers[wq->peer].fa;
}

/* A header-only control message (inject: no completion, no buffer). */
static int send_ctrl(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	uint8_t b[sizeof(struct wmsg)];
	enc(b, m);
	ssize_t rc;
	if (sizeof(b) <= w->inject) {
		rc = fi_inject(w->ep, b, sizeof(b), peer_fa(w, wq));
	} else {
		struct txd *t = txd_get(w, wq);
		if (!t)
			return -EAGAIN;
		memcpy(t->small, b, sizeof(b));
		rc = fi_send(w->ep, t->small, sizeof(b), NULL, peer_fa(w, wq), &t->fc);
		if (rc)
			txd_put(w, t);
	}
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
 * straight from host memory when the pieces allow it, otherwise through a
 * bounce buffer. 0, -EAGAIN (no resources now) or -ECONNRESET. */
static int send_data(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		     const struct soft_iov *data, int nd, uint64_t n)
{
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	m->len = (uint32_t)n;
	if (n == 0 && sizeof(struct wmsg) <= w->inject)
		return send_ctrl(w, wq, m);
	struct txd *t = txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	enc(t->small + HOFF, m);
	ssize_t rc;
	bool direct = n > SMALL - HDR && nd >= 1 && (size_t)nd + 1 <= w->iov_limit &&
		      gpu_bytes(data, nd) == 0;
	if (direct) {
		struct iovec iov[8];
		iov[0].iov_base = t->small + HOFF;
		iov[0].iov_len = HSZ;
		for (int i = 0; i < nd; i++) {
			iov[i + 1].iov_base = data[i].ptr;
			iov[i + 1].iov_len = data[i].len;
		}
		rc = fi_sendv(w->ep, iov, NULL, (size_t)nd + 1, peer_fa(w, wq), &t->fc);
		if (rc == 0)
			atomic_fetch_add(&w->ctx->c_direct, n);
	} else {
		uint8_t *buf = t->small;
		if (HDR + n > SMALL) {
			if (!w->nbig) {
				txd_put(w, t);
				return -EAGAIN;
			}
			t->big = w->bigfree[--w->nbig];
			buf = t->big;
			memcpy(buf + HOFF, t->small + HOFF, HSZ);
		}
		struct soft_iov dst = {buf + HDR, n, KINET_MEM_HOST};
		if (n && soft_copy_iov(&dst, 1, data, nd, n)) {
			txd_put(w, t);
			return -EFAULT;
		}
		uint64_t g = gpu_bytes(data, nd);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		/* header right before the payload: one contiguous message */
		rc = fi_send(w->ep, buf + HOFF, HSZ + n, NULL, peer_fa(w, wq), &t->fc);
	}
	if (rc) {
		txd_put(w, t);
		if (rc == -FI_EAGAIN)
			return -EAGAIN;
		KLOG_DBG("wire: send to qp 0x%x: %s", wq->peer_qpn, fi_strerror((int)-rc));
		return -ECONNRESET;
	}
	wq->last_tx_ns = kn_now_ns();
	return 0;
}

/* ---- requester ----------------------------------------------------------- */

static struct wreq *ent(struct wire_qp *wq, uint32_t seq)
{
	return &wq->win[seq & (WIN - 1)];
}

static void drop_peer(struct kinet_wire *w, int idx, const char *why)
{
	struct wpeer *p = &w->peers[idx];
	if (p->dead)
		return;
	p->dead = true;
	KLOG_INFO("wire: peer %d dropped (%s)", idx, why);
	fi_av_remove(w->av, &p->fa, 1, 0);
}

/* Fails the QP's outstanding requests: the oldest unfinished one gets synd,
 * every later one a flush; the CQEs follow in order from wire_complete. */
static void fail_qp(struct kinet_wire *w, struct wire_qp *wq, uint32_t synd, bool transport)
{
	if (wq->failed)
		return;
	wq->failed = true;
	bool first = true;
	for (uint32_t s = wq->head; s != wq->tail; s++) {
		struct wreq *e = ent(wq, s);
		if (first && !e->done) {
			e->done = true;
			e->status = synd;
			first = false;
		} else if (!first) {
			e->done = true;
			e->status = KN_SYND_WR_FLUSH_ERR;
		}
	}
	wq->txn = wq->tail;
	if (transport && wq->connected)
		drop_peer(w, wq->peer, "no answer");
}

/* Sends what is queued on this QP, in order. */
static int pump(struct kinet_wire *w, struct wire_qp *wq)
{
	int work = 0;
	while (wq->txn != wq->tail && !wq->failed) {
		struct wreq *e = ent(wq, wq->txn);
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
		switch (r->opcode) {
		case KN_OPCODE_RDMA_WRITE:
		case KN_OPCODE_RDMA_WRITE_IMM:
		case KN_OPCODE_SEND:
		case KN_OPCODE_SEND_IMM: {
			uint64_t n = r->total - e->sent;
			if (n > CHUNK)
				n = CHUNK;
			bool send = r->opcode == KN_OPCODE_SEND || r->opcode == KN_OPCODE_SEND_IMM;
			m.flags = (uint8_t)((e->sent == 0 ? F_FIRST : 0) |
					    (e->sent + n == r->total ? F_LAST : 0));
			m.a = send ? r->total : r->raddr + e->sent;
			m.b = e->sent;
			struct soft_iov piece[SOFT_MAX_SGE];
			int np = iov_slice(r->iov, r->niov, e->sent, n, piece, SOFT_MAX_SGE);
			if (np < 0) {
				rc = -EFAULT;
				break;
			}
			rc = send_data(w, wq, &m, piece, np, n);
			if (rc == 0) {
				e->sent += n;
				all = e->sent == r->total;
			}
			break;
		}
		case KN_OPCODE_RDMA_READ:
			m.flags = F_FIRST | F_LAST;
			m.a = r->raddr;
			m.b = r->total;
			rc = send_data(w, wq, &m, NULL, 0, 0);
			break;
		case KN_OPCODE_ATOMIC_CS:
		case KN_OPCODE_ATOMIC_FA: {
			uint64_t v[2] = {htole64(r->swap_add), htole64(r->compare)};
			struct soft_iov piece = {(uint8_t *)v, sizeof(v), KINET_MEM_HOST};
			m.flags = F_FIRST | F_LAST;
			m.a = r->raddr;
			rc = send_data(w, wq, &m, &piece, 1, sizeof(v));
			break;
		}
		default:
			e->done = true;
			e->status = KN_SYND_LOCAL_QP_OP_ERR;
			wq->txn++;
			continue;
		}
		if (rc == -EAGAIN)
			break;
		if (rc) {
			fail_qp(w, wq, rc == -EFAULT ? KN_SYND_LOCAL_PROT_ERR
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
static int wire_complete(struct wire_qp *wq)
{
	kinet_qp *qp = wq->qp;
	int work = 0;
	while (wq->head != wq->tail) {
		struct wreq *e = ent(wq, wq->head);
		if (!e->done)
			break;
		if (e->status) {
			if (!wq->failed) {
				wq->failed = true;
				for (uint32_t s = wq->head + 1; s != wq->tail; s++) {
					ent(wq, s)->done = true;
					ent(wq, s)->status = KN_SYND_WR_FLUSH_ERR;
				}
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

/* ---- target ------------------------------------------------------------------ */

static void rx_release(struct kinet_wire *w, struct rxbuf *rb)
{
	rb->executed = 0;
	rb->off = 0;
	post_rx(w, rb);
}

static void tq_drop(struct kinet_wire *w, struct wire_qp *wq)
{
	while (wq->tq) {
		struct rxbuf *rb = wq->tq;
		wq->tq = rb->next;
		rx_release(w, rb);
	}
	free(wq->asm_buf);
	wq->asm_buf = NULL;
	wq->asm_len = wq->asm_total = 0;
	wq->rnr_count = 0;
	wq->rnr_next_ns = 0;
}

static int answer(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *rq,
		  uint32_t status, uint64_t a)
{
	struct wmsg m = {.type = M_RESP, .op = (uint8_t)status, .flags = F_FIN,
			 .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn, .dst_gen = wq->peer_gen,
			 .src_gen = wq->gen, .seq = rq->seq, .a = a};
	return send_ctrl(w, wq, &m);
}

/* Keeps the requester's timer alive while a request waits here. */
static void keepalive(struct kinet_wire *w, struct wire_qp *wq)
{
	if (kn_now_ns() - wq->last_tx_ns < w->ka_ns)
		return;
	struct wmsg m = {.type = M_KA, .dst_qpn = wq->peer_qpn, .src_qpn = wq->qp->qpn,
			 .dst_gen = wq->peer_gen, .src_gen = wq->gen};
	send_ctrl(w, wq, &m);
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
		struct txd *t = txd_get(w, wq);
		if (!t)
			return 0;
		uint8_t *buf = t->small;
		if (HDR + n > SMALL) {
			if (!w->nbig) {
				txd_put(w, t);
				return 0;
			}
			t->big = buf = w->bigfree[--w->nbig];
		}
		struct soft_iov dst = {buf + HDR, n, KINET_MEM_HOST};
		int rc = soft_resp_read(wq->qp, rq->a + rb->off, rq->rkey, &dst, 1, n);
		if (rc) {
			txd_put(w, t);
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
		enc(buf + HOFF, &m);
		ssize_t s = w->peers[wq->peer].dead
				    ? -FI_ECONNRESET
				    : fi_send(w->ep, buf + HOFF, HSZ + n, NULL, peer_fa(w, wq), &t->fc);
		if (s) {
			txd_put(w, t);
			if (s == -FI_EAGAIN)
				return 0;
			rb->executed = 2; /* nobody to answer: drop */
			return 1;
		}
		wq->last_tx_ns = kn_now_ns();
		rb->off += n;
		if (last) {
			rb->executed = 2; /* answered by the last data message */
			return 1;
		}
	} while (1);
}

/* Executes the request at the head of the target queue. 1: done (answer
 * prepared in rb->executed/status), 0: try again later. */
static int tgt_exec(struct kinet_wire *w, struct wire_qp *wq, struct rxbuf *rb)
{
	kinet_qp *t = wq->qp;
	const struct wmsg *m = &rb->m;
	struct soft_iov src = {rb->buf + HDR, m->len, KINET_MEM_HOST};
	int rc;
	bool need_answer = (m->flags & F_LAST) != 0;
	switch (m->op) {
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM: {
		int imm = m->op == KN_OPCODE_RDMA_WRITE_IMM && (m->flags & F_LAST);
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
				need_answer = true;
				break;
			}
		}
		if (!(m->flags & F_LAST) || wq->asm_len < wq->asm_total) {
			if (!wq->asm_buf || m->b != wq->asm_len ||
			    wq->asm_len + m->len > wq->asm_total) {
				rc = KN_SYND_REMOTE_INVAL_REQ_ERR;
				need_answer = true;
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
		struct soft_iov whole = {wq->asm_buf, wq->asm_len, KINET_MEM_HOST};
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
	default:
		rc = KN_SYND_REMOTE_INVAL_REQ_ERR;
		break;
	}
	if (rc == SOFT_STALL) {
		keepalive(w, wq);
		return 0;
	}
	if (rc == SOFT_RNR) {
		uint64_t now = kn_now_ns();
		if (wq->rnr_next_ns && now < wq->rnr_next_ns) {
			keepalive(w, wq);
			return 0;
		}
		if (m->rnr == 7 || wq->rnr_count < m->rnr) {
			wq->rnr_count++;
			wq->rnr_next_ns = now + w->rnr_ns;
			atomic_fetch_add(&t->ctx->c_rnr, 1);
			keepalive(w, wq);
			return 0;
		}
		rc = KN_SYND_RNR_RETRY_EXC_ERR;
	}
	wq->rnr_count = 0;
	wq->rnr_next_ns = 0;
	rb->status = (uint32_t)rc;
	rb->executed = (rc || need_answer) ? 1 : 2;
	return 1;
}

/* Serves the target queue of a QP in message order. */
static int serve_target(struct kinet_wire *w, struct wire_qp *wq)
{
	int work = 0;
	while (wq->tq) {
		struct rxbuf *rb = wq->tq;
		if (!wq->connected)
			break; /* the QP is still connecting: the requester waits */
		if (rb->m.src_qpn != wq->peer_qpn || rb->m.src_gen != wq->peer_gen ||
		    wq->tgt_failed) {
			wq->tq = rb->next; /* not (or no longer) our connection */
			rx_release(w, rb);
			work++;
			continue;
		}
		if (rb->m.msn != wq->msn_rx)
			break; /* an earlier message is still on its way */
		if (!rb->executed && !tgt_exec(w, wq, rb))
			break;
		if (rb->executed == 1) {
			int rc = answer(w, wq, &rb->m, rb->status, rb->old);
			if (rc == -EAGAIN)
				break;
			if (rb->status)
				wq->tgt_failed = true; /* RC: nothing after a NAK executes */
		}
		wq->tq = rb->next;
		wq->msn_rx++;
		rx_release(w, rb);
		work++;
	}
	return work;
}

/* ---- receiving -------------------------------------------------------------- */

static void on_resp(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m,
		    const uint8_t *data)
{
	wq->last_rx_ns = kn_now_ns();
	if (m->type == M_KA)
		return;
	uint32_t k = m->seq - wq->head;
	if (k >= wq->tail - wq->head)
		return; /* not outstanding (late answer after a flush) */
	struct wreq *e = ent(wq, m->seq);
	if (e->done)
		return;
	struct soft_req *r = &e->r;
	if (m->len) {
		struct soft_iov piece[SOFT_MAX_SGE];
		int np = -1;
		if (r->opcode == KN_OPCODE_RDMA_READ && m->a + m->len <= r->total)
			np = iov_slice(r->iov, r->niov, m->a, m->len, piece, SOFT_MAX_SGE);
		struct soft_iov src = {(uint8_t *)data, m->len, KINET_MEM_HOST};
		if (np < 0) {
			e->done = true;
			e->status = KN_SYND_BAD_RESP_ERR;
			return;
		}
		if (soft_copy_iov(piece, np, &src, 1, m->len)) {
			e->done = true;
			e->status = KN_SYND_LOCAL_PROT_ERR;
			return;
		}
		uint64_t g = gpu_bytes(piece, np);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		e->got += m->len;
	}
	if (m->flags & F_FIN) {
		e->fin = true;
		if (m->op) {
			e->done = true;
			e->status = m->op;
			return;
		}
	}
	if (!e->fin)
		return;
	if (r->opcode == KN_OPCODE_RDMA_READ) {
		/* chunks may complete out of order: done once every byte is in */
		if (e->got < r->total)
			return;
		e->done = true;
		if (e->got != r->total)
			e->status = KN_SYND_BAD_RESP_ERR;
		else
			atomic_fetch_add(&w->ctx->c_bytes, r->total);
		return;
	}
	e->done = true;
	e->status = 0;
	if (r->opcode == KN_OPCODE_ATOMIC_CS || r->opcode == KN_OPCODE_ATOMIC_FA) {
		uint64_t be = kn_htobe64(m->a); /* the NIC returns big-endian */
		struct soft_iov src = {(uint8_t *)&be, 8, KINET_MEM_HOST};
		if (soft_copy_iov(r->iov, r->niov, &src, 1, 8))
			e->status = KN_SYND_LOCAL_PROT_ERR;
	} else {
		atomic_fetch_add(&w->ctx->c_bytes, r->total);
	}
}

static void on_rx(struct kinet_wire *w, struct rxbuf *rb, size_t len)
{
	if (len < HSZ)
		goto drop;
	dec(&rb->m, rb->buf + HOFF);
	const struct wmsg *m = &rb->m;
	if (m->len > CHUNK || (size_t)HSZ + m->len != len)
		goto drop; /* malformed */
	struct wire_qp *wq = wq_find(w, m->dst_qpn);
	if (!wq || m->dst_gen != wq->gen)
		goto drop; /* no such QP (any more): as a NIC, drop */
	if (m->type == M_RESP || m->type == M_KA) {
		if (wq->connected && m->src_qpn == wq->peer_qpn && m->src_gen == wq->peer_gen)
			on_resp(w, wq, m, rb->buf + HDR);
		goto drop;
	}
	if (m->type != M_REQ)
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
	rx_release(w, rb);
}

static void fail_by_qpn(struct kinet_wire *w, uint32_t qpn, uint32_t gen, const char *why)
{
	struct wire_qp *wq = wq_find(w, qpn);
	if (!wq || wq->gen != gen || !wq->connected)
		return;
	KLOG_INFO("wire: qp 0x%x: send failed (%s)", qpn, why);
	drop_peer(w, wq->peer, why);
	if (wq->head != wq->tail)
		fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
}

static int poll_cq(struct kinet_wire *w)
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
			int kind = *(int *)((uint8_t *)err.op_context + sizeof(struct fi_context));
			if (kind == CTX_RX) {
				struct rxbuf *rb = err.op_context;
				if (err.err == FI_ECANCELED)
					continue; /* endpoint closing */
				rx_release(w, rb);
			} else if (kind == CTX_TX) {
				struct txd *t = err.op_context;
				uint32_t qpn = t->qpn, gen = t->gen;
				txd_put(w, t);
				fail_by_qpn(w, qpn, gen, fi_strerror(err.err));
			}
			continue;
		}
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			int kind = *(int *)((uint8_t *)ce[i].op_context + sizeof(struct fi_context));
			if (kind == CTX_RX)
				on_rx(w, ce[i].op_context, ce[i].len);
			else
				txd_put(w, ce[i].op_context);
		}
		work += (int)n;
		if (n < 16)
			break;
	}
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
	return work;
}

/* ---- engine entry points ---------------------------------------------------- */

bool kinet_wire_can_post(kinet_qp *qp)
{
	struct wire_qp *wq = qp->wire_ep;
	return wq && !wq->failed && wq->tail - wq->head < WIN;
}

int kinet_wire_post(kinet_qp *qp, struct soft_req *r)
{
	struct kinet_wire *w = qp->wire;
	struct wire_qp *wq = qp->wire_ep;
	if (!w || !wq)
		return KN_SYND_TRANSPORT_RETRY_EXC_ERR;
	pthread_mutex_lock(&w->lock);
	struct wreq *e = ent(wq, wq->tail);
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
	e->status = 0;
	if (wq->failed) {
		e->done = true;
		e->status = KN_SYND_WR_FLUSH_ERR;
	}
	if (wq->head == wq->tail)
		wq->busy_since_ns = kn_now_ns();
	wq->tail++;
	pump(w, wq);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int kinet_wire_progress(kinet_qp *qp)
{
	struct kinet_wire *w = qp->wire;
	struct wire_qp *wq = qp->wire_ep;
	if (!w || !wq)
		return 0;
	pthread_mutex_lock(&w->lock);
	int work = poll_cq(w);
	if (atomic_load(&qp->state) == KINET_QPS_ERR && !wq->failed && wq->head != wq->tail) {
		/* moved to ERR from outside: flush what is outstanding */
		wq->failed = true;
		for (uint32_t s = wq->head; s != wq->tail; s++) {
			ent(wq, s)->done = true;
			ent(wq, s)->status = KN_SYND_WR_FLUSH_ERR;
		}
		wq->txn = wq->tail;
	}
	if (!wq->failed && wq->head != wq->tail) {
		if (w->peers[wq->peer].dead) {
			fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, false);
		} else {
			uint64_t ref = wq->last_rx_ns > wq->busy_since_ns ? wq->last_rx_ns
									 : wq->busy_since_ns;
			if (kn_now_ns() - ref > w->timeout_ns) {
				KLOG_WARN("wire: qp 0x%x: no answer from qp 0x%x for %llu ms",
					  qp->qpn, wq->peer_qpn,
					  (unsigned long long)(w->timeout_ns / 1000000ull));
				fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
			}
		}
	}
	work += pump(w, wq);
	work += wire_complete(wq);
	pthread_mutex_unlock(&w->lock);
	return work;
}

bool kinet_wire_drained(kinet_qp *qp)
{
	struct wire_qp *wq = qp->wire_ep;
	return !wq || wq->head == wq->tail;
}

int kinet_wire_ctx_progress(kinet_ctx *ctx)
{
	struct kinet_wire *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
	if (!w || pthread_mutex_trylock(&w->lock))
		return 0;
	int work = poll_cq(w);
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		if (wq->tq) {
			if (wq->connected && w->peers[wq->peer].dead)
				tq_drop(w, wq);
			else
				work += serve_target(w, wq);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return work;
}

/* ---- QP lifecycle --------------------------------------------------------------- */

static int wq_get(struct kinet_wire *w, kinet_qp *qp, struct wire_qp **out)
{
	struct wire_qp *wq = qp->wire_ep;
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
	qp->wire_ep = wq;
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

static void wq_reset(struct kinet_wire *w, struct wire_qp *wq)
{
	tq_drop(w, wq);
	peer_unref(w, wq);
	wq->connected = false;
	wq->head = wq->txn = wq->tail = 0;
	wq->msn_tx = wq->msn_rx = 0;
	wq->failed = false;
	wq->tgt_failed = false;
	wq->gen = new_gen();
}

int kinet_wire_local_end(kinet_qp *qp, struct kinet_wire_local *out)
{
	struct kinet_wire *w;
	int rc = wire_get(qp->ctx, &w);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	struct wire_qp *wq;
	rc = wq_get(w, qp, &wq);
	if (rc == 0) {
		out->qpn = qp->qpn;
		out->gen = wq->gen;
		out->node = kinet_wire_node();
		out->provider = w->prov;
		out->addr = w->addr;
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
	wq->last_rx_ns = wq->last_tx_ns = kn_now_ns();
	wq->connected = true;
	qp->peer = NULL;
	qp->peer_qpn = pi.qpn;
	__atomic_store_n(&qp->wire, w, __ATOMIC_RELEASE);
	KLOG_DBG("qp 0x%x: connected to qp 0x%x over %s", qp->qpn, pi.qpn, w->prov);
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void kinet_wire_qp_reset(kinet_qp *qp)
{
	struct wire_qp *wq = qp->wire_ep;
	struct kinet_wire *w = qp->ctx->wire;
	if (!wq || !w)
		return;
	pthread_mutex_lock(&w->lock);
	wq_reset(w, wq);
	pthread_mutex_unlock(&w->lock);
}

void kinet_wire_qp_close(kinet_qp *qp)
{
	struct wire_qp *wq = qp->wire_ep;
	struct kinet_wire *w = qp->ctx->wire;
	if (!wq || !w)
		return;
	pthread_mutex_lock(&w->lock);
	if (wq->head != wq->tail && wq->connected)
		drop_peer(w, wq->peer, "QP destroyed with requests outstanding");
	tq_drop(w, wq);
	peer_unref(w, wq);
	for (int i = 0; i < w->nqps; i++)
		if (w->qps[i] == wq) {
			w->qps[i] = w->qps[--w->nqps];
			break;
		}
	pthread_mutex_unlock(&w->lock);
	qp->wire_ep = NULL;
	qp->wire = NULL;
	free(wq->win);
	free(wq);
}

void kinet_wire_ctx_close(kinet_ctx *ctx)
{
	struct kinet_wire *w = ctx->wire;
	if (!w)
		return;
	ctx->wire = NULL;
	wire_destroy(w);
}

#else /* no libfabric in this build */

bool kinet_wire_can_post(kinet_qp *qp)
{
	(void)qp;
	return false;
}

int kinet_wire_post(kinet_qp *qp, struct soft_req *r)
{
	(void)qp;
	(void)r;
	return KN_SYND_TRANSPORT_RETRY_EXC_ERR;
}

int kinet_wire_progress(kinet_qp *qp)
{
	(void)qp;
	return 0;
}

bool kinet_wire_drained(kinet_qp *qp)
{
	(void)qp;
	return true;
}

void kinet_wire_qp_reset(kinet_qp *qp)
{
	(void)qp;
}

void kinet_wire_qp_close(kinet_qp *qp)
{
	(void)qp;
}

int kinet_wire_ctx_progress(kinet_ctx *ctx)
{
	(void)ctx;
	return 0;
}

void kinet_wire_ctx_close(kinet_ctx *ctx)
{
	(void)ctx;
}

int kinet_wire_local_end(kinet_qp *qp, struct kinet_wire_local *out)
{
	(void)qp;
	(void)out;
	KLOG_ERR("QP descriptors need the wire, and this build has no libfabric");
	return -ENOSYS;
}

int kinet_soft_wire_connect(kinet_qp *qp, const struct kinet_qp_remote *remote)
{
	(void)qp;
	(void)remote;
	KLOG_ERR("connecting to another process needs the wire, and this build has no libfabric");
	return -ENOSYS;
}
#endif
