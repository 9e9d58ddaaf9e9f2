/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c - the software NIC's wire: RC QPs of different processes over
 * libfabric (FI_EP_RDM, FI_MSG and, where the provider has it, FI_RMA;
 * provider KINET_FI_PROVIDER, tcp;ofi_rxm by default).
 *
 * One endpoint per context carries every QP of the context. Each message
 * starts with a header naming the target QP, both QP generations (stale or
 * stray messages are dropped) and a per-connection message number; the
 * target starts a connection's requests strictly in that order.
 *
 * Requester: kinet_wire_post() queues a parsed WQE in the QP's window and
 * sends it on the spot. Large RDMA writes from host memory (at least
 * KINET_NET_RNDV_BYTES, in at most MAXPC pieces) go by rendezvous: the
 * requester registers its source pieces with libfabric (remote read only, a
 * fresh key per request, closed before the CQE) and sends their keys; the
 * target checks rkey, bounds and access itself, then reads the data with
 * fi_read straight into the checked destination (no bounce buffer, no
 * copy). Everything else is eager: writes and sends in
 * chunks of at most CHUNK bytes (straight from host memory with fi_sendv
 * when the pieces allow it, otherwise through a bounce buffer, through
 * kinet_mem_copy for GPU memory), reads and atomics as one request. CQEs
 * are written in WQE order as soon as the answer is read (a write
 * completes only after it was placed).
 *
 * Target: kinet_wire_ctx_progress() polls the endpoint and runs each request
 * through the same responder functions as a local peer (soft_resp_*: rkey,
 * bounds, access, placement, receive queue). Rendezvous writes are checked
 * when they start and pipeline (several reads in flight); anything else
 * waits until the reads before it have landed, so RC order holds (a receive
 * CQE, a read or an atomic sees every earlier write). Successes are
 * acknowledged cumulatively, RC style: one ACK names the last request done
 * and covers every earlier one, sent at the end of each pass (at once when
 * idle, one for many under load); errors are answered at once (NAK) and end
 * the connection. While reads into a region are in flight, the engines keep
 * the context's key table (kinet_wire_pinned): a region cannot be
 * deregistered under a placement; a waiting writer stops new reads until
 * those in flight have landed. A send that finds no receive WQE is retried
 * every KINET_RNR_TIMER_US up to the requester's rnr_retry (7: forever),
 * then answered with RNR retry exceeded; meanwhile the target keeps the
 * requester's timer alive.
 *
 * Failures: a requester that hears nothing from its peer for
 * KINET_NET_TIMEOUT_MS while requests are outstanding (dead process, broken
 * connection, network down), or whose sends fail, completes the oldest
 * outstanding WQE with transport retry exceeded, flushes the others and
 * moves the QP to ERR. A target whose reads make no progress for as long
 * drops the connection. The peer's address is then dropped from the
 * address vector (closing the provider's connection and whatever it still
 * queued), so a later connect starts afresh.
 */
#define _GNU_SOURCE /* ppoll */
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <poll.h>
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
#include <rdma/fi_rma.h>

#define CHUNK (256u * 1024u) /* largest payload of one message */
#define HDR 64u              /* payload offset in a buffer; the header ends there */
#define NRX 32               /* receive buffers posted */
#define NTX 512              /* send descriptors */
#define NBIG 16              /* bounce buffers of HDR + CHUNK */
#define SMALL 1024u          /* inline buffer of a send descriptor (HDR + 960) */
#define WIN 64u              /* outstanding requests per QP */
#define MAXPC 8              /* source pieces of a rendezvous write (24 bytes each) */
#define PCSZ 24u
#define RTSE 32u             /* fixed part of a rendezvous entry in an RTS message */
#define RTS_MAX (SMALL - HDR) /* payload of one RTS message (its entries) */
#define RD_MAX (4u << 20)    /* largest read the target posts */
#define NRD 64               /* target reads in flight per endpoint */
#define RD_BYTES (16u << 20) /* bytes of target reads in flight per endpoint */
#define ACK_EVERY 16u        /* while writes are landing: an ACK per this many, */
#define ACK_DELAY_NS 50000u  /* or once the oldest unacknowledged is this old */

enum { M_REQ = 1, M_RESP = 2, M_KA = 3, M_ACK = 4, M_RTS = 5 };
enum { F_FIRST = 1, F_LAST = 2, F_FIN = 4 };

/* Message header, little-endian on the wire. */
struct wmsg {
	uint8_t type;  /* M_* */
	uint8_t op;    /* REQ, RTS: KN_OPCODE_*; RESP: syndrome (0: success) */
	uint8_t rnr;   /* REQ, RTS: requester's rnr_retry */
	uint8_t flags; /* F_* */
	uint32_t dst_qpn, src_qpn;
	uint32_t dst_gen, src_gen;
	uint32_t msn; /* REQ, RTS: message number on the connection */
	uint32_t seq; /* request number (REQ, RTS, RESP); ACK: last request done */
	uint32_t len; /* payload bytes after the header (RTS: its entries) */
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

/* A source piece of a rendezvous write: where the target reads it. An RTS
 * message carries one or more rendezvous writes of a QP, in order, each an
 * entry of RTSE bytes (seq u32, opcode u8, pieces u8, 2 zero bytes, rkey
 * u32, imm u32 (wire order), remote address u64, length u64) followed by
 * its pieces (key, address, length: u64 each), little-endian. */
struct wpiece {
	uint64_t key, addr, len;
};

enum { CTX_RX = 1, CTX_TX = 2, CTX_RD = 3 };

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

/* Target: a rendezvous write that has started (checked), in request order;
 * done once every read has landed (and, with immediate, the receive CQE is
 * written). */
struct tpend {
	struct tpend *next;
	uint32_t seq;
	uint8_t op, rnr;
	uint32_t status; /* 0, or the syndrome to answer */
	uint32_t imm, rkey;
	uint64_t raddr, total;
	uint8_t *dst;    /* the checked destination */
	int dkind;
	uint64_t epoch;  /* w->epoch of the check */
	int np;
	struct wpiece pc[MAXPC];
	int ip;          /* reads posted up to piece ip, offset ioff */
	uint64_t ioff;
	uint64_t issued; /* bytes asked for */
	int inflight;    /* reads in flight */
	uint64_t last_ns; /* last progress (a read posted or landed) */
};

/* A target read in flight. p is NULL once its request was dropped (the
 * bytes still land in the checked region: the key table stays held). */
struct rdop {
	struct fi_context fc;
	int kind;
	struct rdop *next;
	struct tpend *p;
	uint8_t *bounce; /* staging for a destination that is not host memory */
	uint8_t *dst;
	int dkind;
	uint64_t len;
};

/* One outstanding request of a requester QP. */
struct wreq {
	struct soft_req r; /* header fields and r.iov[0..niov) only; r.wqe when inline */
	uint64_t sent;     /* payload bytes sent */
	uint64_t got;      /* read: bytes received */
	bool started;      /* first message sent */
	bool fin;          /* read: final answer seen (data may still be on its way) */
	bool done;
	bool rndv;         /* by rendezvous: mr[] registered for the target to read */
	uint32_t status;
	int nmr;
	struct fid_mr *mr[MAXPC];
	struct wpiece pc[MAXPC];
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
	struct tpend *pend, *pend_tail; /* rendezvous writes started, in order */
	uint32_t done_seq;  /* last request done (answered by the next ACK) */
	uint32_t acked_seq; /* last one acknowledged */
	bool need_ack;
	uint64_t ack_due_ns;
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
	bool rma;           /* FI_RMA: rendezvous writes */
	bool virt_addr;     /* FI_MR_VIRT_ADDR: reads name virtual addresses */
	bool prov_key;      /* FI_MR_PROV_KEY: the provider picks keys */
	bool mr_ep;         /* FI_MR_ENDPOINT: regions are bound to the endpoint */
	uint64_t rndv_min;  /* writes from this size on go by rendezvous (0: never) */
	uint64_t next_key;
	int wait_fd;        /* readable when the endpoint has something (-1: none) */
	struct rxbuf rx[NRX];
	uint8_t *rxmem, *bigmem, *txmem;
	struct txd *txfree;
	uint8_t *bigfree[NBIG];
	int nbig;
	struct rxbuf *repost; /* receive buffers to post again */
	struct rdop rd[NRD];
	struct rdop *rdfree;
	_Atomic int rd_inflight; /* reads in flight (kinet_wire_pinned) */
	uint64_t rd_bytes;
	bool draining;      /* a key-table writer waits: no new reads */
	uint64_t epoch;     /* bumped whenever the key table may have changed */
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
	const char *prov = kinet_tunable_str("KINET_FI_PROVIDER");
	struct kinet_wire *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->wait_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	snprintf(w->prov, sizeof(w->prov), "%s", prov && *prov ? prov : "tcp;ofi_rxm");
	long long tmo = kinet_tunable_int("KINET_NET_TIMEOUT_MS");
	w->timeout_ns = (uint64_t)(tmo > 0 ? tmo : 5000) * 1000000ull;
	long long rnr = kinet_tunable_int("KINET_RNR_TIMER_US");
	w->rnr_ns = (uint64_t)(rnr > 0 ? rnr : 1) * 1000ull;
	w->ka_ns = w->timeout_ns / 4;
	if (w->ka_ns > 200000000ull)
		w->ka_ns = 200000000ull;
	long long rb = kinet_tunable_int("KINET_NET_RNDV_BYTES");
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

/* A message of header and n payload bytes (host memory) that fits the
 * provider's inject size: no completion, no buffer. 0, -EAGAIN, -ECONNRESET. */
static int send_inject(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		       const void *data, uint32_t n)
{
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	uint8_t b[SMALL];
	m->len = n;
	enc(b, m);
	if (n)
		memcpy(b + HSZ, data, n);
	ssize_t rc = fi_inject(w->ep, b, HSZ + n, peer_fa(w, wq));
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
static int send_ctrl(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m)
{
	if (HSZ <= w->inject)
		return send_inject(w, wq, m, NULL, 0);
	if (w->peers[wq->peer].dead)
		return -ECONNRESET;
	struct txd *t = txd_get(w, wq);
	if (!t)
		return -EAGAIN;
	m->len = 0;
	enc(t->small, m);
	ssize_t rc = fi_send(w->ep, t->small, HSZ, NULL, peer_fa(w, wq), &t->fc);
	if (rc)
		txd_put(w, t);
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
static int send_data(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
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
		uint64_t g = gpu_bytes(data, nd);
		if (g)
			atomic_fetch_add(&w->ctx->c_staged, g);
		return send_inject(w, wq, m, b, (uint32_t)n);
	}
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

/* Closes the registrations of a rendezvous write: from then on the target
 * can no longer read its source (done before its CQE, whatever the result). */
static void wreq_unreg(struct wreq *e)
{
	for (int i = 0; i < e->nmr; i++)
		fi_close(&e->mr[i]->fid);
	e->nmr = 0;
	e->rndv = false;
}

/* Registers the source pieces of a large write from host memory for the
 * target to read. true: go by rendezvous; false: eager. */
static bool rndv_prepare(struct kinet_wire *w, struct wreq *e)
{
	const struct soft_req *r = &e->r;
	if (!w->rma || !w->rndv_min || r->total < w->rndv_min || r->niov > MAXPC || r->niov < 1 ||
	    (r->opcode != KN_OPCODE_RDMA_WRITE && r->opcode != KN_OPCODE_RDMA_WRITE_IMM))
		return false;
	for (int i = 0; i < r->niov; i++)
		if (r->iov[i].kind != KINET_MEM_HOST ||
		    (r->iov[i].ptr >= r->wqe && r->iov[i].ptr < r->wqe + sizeof(r->wqe)))
			return false; /* GPU memory or inline data: eager */
	e->nmr = 0;
	int k = 0;
	for (int i = 0; i < r->niov; i++) {
		if (!r->iov[i].len)
			continue;
		struct fid_mr *mr;
		uint64_t key = w->next_key++;
		int rc = fi_mr_reg(w->dom, r->iov[i].ptr, r->iov[i].len, FI_REMOTE_READ, 0, key, 0,
				   &mr, NULL);
		if (rc == 0 && w->mr_ep) {
			rc = fi_mr_bind(mr, &w->ep->fid, 0);
			if (rc == 0)
				rc = fi_mr_enable(mr);
			if (rc)
				fi_close(&mr->fid);
		}
		if (rc) {
			KLOG_DBG("wire: fi_mr_reg: %s (eager instead)", fi_strerror(-rc));
			wreq_unreg(e);
			return false;
		}
		e->mr[e->nmr++] = mr;
		e->pc[k].key = w->prov_key ? fi_mr_key(mr) : key;
		e->pc[k].addr = w->virt_addr ? (uint64_t)(uintptr_t)r->iov[i].ptr : 0;
		e->pc[k].len = r->iov[i].len;
		k++;
	}
	e->rndv = true;
	return true;
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
		struct wreq *e = ent(wq, s);
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
	struct soft_iov piece = {buf, n, KINET_MEM_HOST};
	int rc = send_data(w, wq, &m, &piece, 1, n); /* copied: n <= SMALL - HDR */
	if (rc)
		return rc;
	for (uint32_t i = 0; i < k; i++) {
		struct wreq *e = ent(wq, wq->txn++);
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
static int pump(struct kinet_wire *w, struct wire_qp *wq, bool posting)
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
		if (rndv_next(w, e)) {
			/* rendezvous: the keys of the pieces; the target reads */
			if (posting)
				break;
			rc = send_rts(w, wq);
			if (rc == -EAGAIN)
				break;
			if (rc) {
				fail_qp(w, wq, KN_SYND_TRANSPORT_RETRY_EXC_ERR, true);
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
		/* the target can no longer read the source once the CQE is out */
		if (e->nmr)
			wreq_unreg(e);
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

/* A receive buffer is free: posted again at the end of the poll or pass
 * (answers go out first). */
static void rx_release(struct kinet_wire *w, struct rxbuf *rb)
{
	rb->executed = 0;
	rb->off = 0;
	rb->next = w->repost;
	w->repost = rb;
}

static void repost(struct kinet_wire *w)
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

/* Forgets the rendezvous writes of a QP (reset, close, dead peer, after a
 * NAK): reads still in flight land in their checked region and are then
 * thrown away. */
static void pend_drop(struct kinet_wire *w, struct wire_qp *wq)
{
	if (!wq->pend)
		return;
	for (int i = 0; i < NRD; i++) {
		struct tpend *p = w->rd[i].p;
		if (!p)
			continue;
		for (struct tpend *q = wq->pend; q; q = q->next)
			if (q == p) {
				w->rd[i].p = NULL;
				break;
			}
	}
	while (wq->pend) {
		struct tpend *p = wq->pend;
		wq->pend = p->next;
		free(p);
	}
	wq->pend_tail = NULL;
}

static void tq_drop(struct kinet_wire *w, struct wire_qp *wq)
{
	while (wq->tq) {
		struct rxbuf *rb = wq->tq;
		wq->tq = rb->next;
		rx_release(w, rb);
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
	return send_ctrl(w, wq, &m);
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
	int rc = send_ctrl(w, wq, &m);
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
	send_ctrl(w, wq, &m);
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

/* Executes the eager request at the head of the target queue. 1: done
 * (rb->executed: 1 an answer is due (error, atomic value), 2 none), 0: try
 * again later. */
static int tgt_exec(struct kinet_wire *w, struct wire_qp *wq, struct rxbuf *rb)
{
	kinet_qp *t = wq->qp;
	const struct wmsg *m = &rb->m;
	struct soft_iov src = {rb->buf + HDR, m->len, KINET_MEM_HOST};
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
	if (rc == SOFT_RNR && rnr_wait(w, wq, m->rnr, &rc))
		return 0;
	wq->rnr_count = 0;
	wq->rnr_next_ns = 0;
	rb->status = (uint32_t)rc;
	rb->executed = (rc || m->op == KN_OPCODE_ATOMIC_CS || m->op == KN_OPCODE_ATOMIC_FA) ? 1 : 2;
	return 1;
}

/* Starts the rendezvous write of the entry at d (at most n bytes): checks
 * it as the responder would (state, rkey, bounds, remote write access)
 * under the key table the engine holds, and queues it; its reads are posted
 * by rd_issue. A request that fails a check is queued too, to be answered
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
		if (kinet_mr_check(t->ctx, t->pd, p->rkey, p->raddr, p->total,
				   KINET_ACCESS_REMOTE_WRITE, &ref)) {
			st = KN_SYND_REMOTE_ACCESS_ERR;
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
	if (kinet_mr_check(t->ctx, t->pd, p->rkey, p->raddr + p->issued, p->total - p->issued,
			   KINET_ACCESS_REMOTE_WRITE, &ref)) {
		p->status = KN_SYND_REMOTE_ACCESS_ERR;
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
	if (w->draining || w->peers[wq->peer].dead)
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
			bool host = p->dkind == KINET_MEM_HOST;
			uint64_t n = pc->len - p->ioff;
			uint64_t lim = host ? RD_MAX : CHUNK;
			if (n > lim)
				n = lim;
			if (!w->rdfree || (w->rd_bytes && w->rd_bytes + n > RD_BYTES))
				return work;
			uint8_t *bounce = NULL;
			if (!host) {
				if (!w->nbig)
					return work;
				bounce = w->bigfree[--w->nbig];
			}
			struct rdop *op = w->rdfree;
			uint8_t *dst = p->dst + p->issued;
			ssize_t rc = fi_read(w->ep, bounce ? bounce : dst, n, NULL, peer_fa(w, wq),
					     pc->addr + p->ioff, pc->key, &op->fc);
			if (rc) {
				if (bounce)
					w->bigfree[w->nbig++] = bounce;
				if (rc == -FI_EAGAIN)
					return work;
				KLOG_DBG("wire: qp 0x%x: fi_read: %s", wq->qp->qpn,
					 fi_strerror((int)-rc));
				p->status = KN_SYND_REMOTE_OP_ERR;
				break;
			}
			w->rdfree = op->next;
			op->next = NULL;
			op->p = p;
			op->bounce = bounce;
			op->dst = dst;
			op->dkind = p->dkind;
			op->len = n;
			atomic_fetch_add(&w->rd_inflight, 1);
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

/* A target read has completed (ok) or failed. */
static void rd_done(struct kinet_wire *w, struct rdop *op, bool ok)
{
	struct tpend *p = op->p;
	if (p) {
		p->inflight--;
		p->last_ns = kn_now_ns();
		if (!ok) {
			if (!p->status)
				p->status = KN_SYND_REMOTE_OP_ERR; /* the source went away */
		} else if (op->bounce) {
			if (kinet_mem_copy(op->dst, op->dkind, op->bounce, KINET_MEM_HOST,
					   op->len)) {
				if (!p->status)
					p->status = KN_SYND_REMOTE_OP_ERR;
			} else {
				atomic_fetch_add(&w->ctx->c_staged, op->len);
				atomic_fetch_add(&w->ctx->c_bytes, op->len);
			}
		} else {
			atomic_fetch_add(&w->ctx->c_direct, op->len);
			atomic_fetch_add(&w->ctx->c_bytes, op->len);
		}
	}
	if (op->bounce)
		w->bigfree[w->nbig++] = op->bounce;
	op->bounce = NULL;
	op->p = NULL;
	w->rd_bytes -= op->len;
	op->next = w->rdfree;
	w->rdfree = op;
	atomic_fetch_sub(&w->rd_inflight, 1);
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
static int serve_target(struct kinet_wire *w, struct wire_qp *wq)
{
	if (!wq->connected)
		return 0; /* the QP is still connecting: the requester waits */
	int work = pend_progress(w, wq);
	while (wq->tq) {
		struct rxbuf *rb = wq->tq;
		if (rb->m.src_qpn != wq->peer_qpn || rb->m.src_gen != wq->peer_gen ||
		    wq->tgt_failed) {
			wq->tq = rb->next; /* not (or no longer) our connection */
			rx_release(w, rb);
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
				rx_release(w, rb);
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
		rx_release(w, rb);
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

/* ---- receiving -------------------------------------------------------------- */

static bool is_write_or_send(uint8_t op)
{
	return op == KN_OPCODE_RDMA_WRITE || op == KN_OPCODE_RDMA_WRITE_IMM ||
	       op == KN_OPCODE_SEND || op == KN_OPCODE_SEND_IMM;
}

/* ACK: every write and send up to m->seq (sent in full) is done. Reads and
 * atomics complete by their own answers, which come first (FI_ORDER_SAS). */
static void on_ack(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m)
{
	uint32_t n = m->seq - wq->head + 1; /* requests covered, from head */
	if (n > wq->tail - wq->head)
		return; /* covers nothing outstanding (late, after a flush) */
	for (uint32_t s = wq->head; s != wq->head + n; s++) {
		if ((int32_t)(s - wq->txn) >= 0)
			break; /* not sent in full: cannot be done */
		struct wreq *e = ent(wq, s);
		if (e->done || !is_write_or_send(e->r.opcode))
			continue;
		e->done = true;
		e->status = 0;
		atomic_fetch_add(&w->ctx->c_bytes, e->r.total);
	}
}

static void on_resp(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m,
		    const uint8_t *data)
{
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
	if (m->type == M_RESP || m->type == M_KA || m->type == M_ACK) {
		if (wq->connected && m->src_qpn == wq->peer_qpn && m->src_gen == wq->peer_gen) {
			wq->last_rx_ns = kn_now_ns();
			if (m->type == M_ACK)
				on_ack(w, wq, m);
			else if (m->type == M_RESP)
				on_resp(w, wq, m, rb->buf + HDR);
			/* the CQEs go out as soon as the answer is read */
			wire_complete(wq);
		}
		goto drop;
	}
	if (m->type != M_REQ && m->type != M_RTS)
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

static int ctx_kind(void *op_context)
{
	return *(int *)((uint8_t *)op_context + sizeof(struct fi_context));
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
			int kind = ctx_kind(err.op_context);
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
				txd_put(w, ce[i].op_context);
		}
		work += (int)n;
		if (n < 16)
			break;
	}
	repost(w);
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
	pump(w, wq, true); /* out on this very pass (rendezvous: the next) */
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int kinet_wire_progress(kinet_qp *qp)
{
	struct kinet_wire *w = qp->wire;
	struct wire_qp *wq = qp->wire_ep;
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
	work += pump(w, wq, false);
	work += wire_complete(wq);
	pthread_mutex_unlock(&w->lock);
	return work;
}

bool kinet_wire_drained(kinet_qp *qp)
{
	struct wire_qp *wq = qp->wire_ep;
	return !wq || wq->head == wq->tail;
}

bool kinet_wire_pinned(kinet_ctx *ctx)
{
	struct kinet_wire *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
	return w && atomic_load(&w->rd_inflight) > 0;
}

/* Does a writer wait for the context's key table? (The caller holds it for
 * reading; with writers preferred, another read lock is refused then.) */
static bool writer_waiting(kinet_ctx *ctx)
{
	if (pthread_rwlock_tryrdlock(&ctx->mr_lock) != 0)
		return true;
	pthread_rwlock_unlock(&ctx->mr_lock);
	return false;
}

int kinet_wire_ctx_progress(kinet_ctx *ctx)
{
	struct kinet_wire *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
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
	int work = poll_cq(w);
	if (!w->draining && atomic_load(&w->rd_inflight) > 0 && writer_waiting(ctx))
		w->draining = true;
	for (int i = 0; i < w->nqps; i++) {
		struct wire_qp *wq = w->qps[i];
		if (!wq->tq && !wq->pend && !wq->need_ack)
			continue;
		if (wq->connected && w->peers[wq->peer].dead) {
			tq_drop(w, wq);
			continue;
		}
		if (wq->pend && wq->pend->inflight &&
		    kn_now_ns() - wq->pend->last_ns > w->timeout_ns) {
			KLOG_WARN("wire: qp 0x%x: reads from qp 0x%x stalled for %llu ms", wq->qp->qpn,
				  wq->peer_qpn, (unsigned long long)(w->timeout_ns / 1000000ull));
			drop_peer(w, wq->peer, "reads stalled");
			tq_drop(w, wq);
			continue;
		}
		work += serve_target(w, wq);
	}
	repost(w);
	pthread_mutex_unlock(&w->lock);
	return work;
}

int kinet_wire_ctx_wait(kinet_ctx *ctx, uint64_t ns)
{
	struct kinet_wire *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
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

/* Closes the source registrations of every outstanding request. */
static void wq_unreg_all(struct wire_qp *wq)
{
	for (uint32_t s = wq->head; s != wq->tail; s++)
		if (ent(wq, s)->nmr)
			wreq_unreg(ent(wq, s));
}

static void wq_reset(struct kinet_wire *w, struct wire_qp *wq)
{
	tq_drop(w, wq);
	wq_unreg_all(wq);
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
	wq->need_ack = false;
	wq->done_seq = wq->acked_seq = (uint32_t)-1; /* before request 0 */
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
	wq_unreg_all(wq);
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

bool kinet_wire_pinned(kinet_ctx *ctx)
{
	(void)ctx;
	return false;
}

int kinet_wire_ctx_wait(kinet_ctx *ctx, uint64_t ns)
{
	(void)ctx;
	(void)ns;
	return -ENOSYS;
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
