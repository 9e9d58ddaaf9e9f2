/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_int.h - private to the wire (src/nic/soft/wire/): the protocol
 * (constants, message header and its encoding, rendezvous entries) and the
 * structures the files of the wire share. The wire carries RC QPs of
 * different processes over libfabric (FI_EP_RDM, FI_MSG and, where the
 * provider has it, FI_RMA; provider KINET_FI_PROVIDER, tcp;ofi_rxm by
 * default).
 *
 * One endpoint per wire carries every QP of the wire. A context has one wire
 * for the network (KINET_FI_PROVIDER) and, while that is not set, one over
 * shm for peers in other processes of this host (KINET_FI_SAME_HOST); a QP
 * is connected over one of them, chosen at connect from both descriptors
 * (wire.c, pick_wire), and everything below is per wire. Each message
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
 * fi_read (into bounce buffers of its own, copied into the checked
 * destination as they land: a read that can never be cancelled must be
 * given up without it ever writing into a region). Everything else is eager:
 * writes and sends in chunks of at most CHUNK bytes (straight from host
 * memory with fi_sendv when the pieces allow it, otherwise through a bounce
 * buffer, through kinet_mem_copy for GPU memory), reads and atomics as one
 * request. Flow control: beyond its oldest unfinished request, a QP has at
 * most EAGER_OUT bytes of eager payload sent and not acknowledged (the
 * target's memory for the requests one QP keeps waiting stays bounded).
 * CQEs are written in WQE order as soon as the answer is read (a write
 * completes only after it was placed).
 *
 * Memory the provider still uses: a send straight from user memory until
 * its completion, a rendezvous source until the target answered for it or
 * (it ended without an answer: a flush, a local failure, a timeout) the
 * target said it reads it no more (its keys stay open until then: struct
 * whold) and a fence is out.
 * kinet_mr_dereg fails the requests that would still touch the region and
 * waits for those (kinet_wire_mr_gone), then, after KINET_NET_TIMEOUT_MS,
 * closes the connection of the peer that keeps it.
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
 * requester's timer alive. Requests that wait do not keep receive buffers
 * when those run short: they are copied out (wire_tq_copy).
 *
 * Failures: a requester that hears nothing from its peer for
 * KINET_NET_TIMEOUT_MS while requests are outstanding (dead process, broken
 * connection, network down), or whose sends fail, completes the oldest
 * outstanding WQE with transport retry exceeded, flushes the others and
 * moves the QP to ERR. A target whose reads make no progress for as long
 * drops the peer: its reads are given up (the key table is let go). A
 * dropped peer's QPs all fail; its connection is left to the provider (a
 * later connect reuses it, or a fresh one), unless memory it keeps must be
 * released (wire_close_peer).
 *
 * Files: the wire's files and what each holds are named, in the order of
 * their layers, above the functions they share (below); the descriptors
 * are the core's (src/core/desc.c).
 */

#ifndef KINET_WIRE_INT_H
#define KINET_WIRE_INT_H
#include "nic/soft/wire/wire.h"

#if KINET_HAVE_FABRIC
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <endian.h>
#include <string.h>

#define CHUNK (256u * 1024u) /* largest payload of one message */
#define HDR 64u              /* payload offset in a buffer; the header ends there */
#define NRX 32               /* receive buffers posted */
#define NTX 512              /* send descriptors */
#define TXQ_MAX 64           /* of them, in flight for one QP (its data, its read answers) */
#define NBIG 16              /* bounce buffers of HDR + CHUNK */
#define SMALL 1024u          /* inline buffer of a send descriptor (HDR + 960) */
#define WIN 64u              /* outstanding requests per QP */
#define MAXPC 8              /* source pieces of a rendezvous write (24 bytes each) */
#define PCSZ 24u
#define RTSE 32u             /* fixed part of a rendezvous entry in an RTS message */
#define RTS_MAX (SMALL - HDR) /* payload of one RTS message (its entries) */
#define RD_PIECE (1u << 20)  /* largest target read: the size of its bounce buffer */
#define NRD 16               /* target reads of up to RD_PIECE in flight per endpoint */
#define RD_SMALL (64u << 10) /* a read of at most this takes a small descriptor first */
#define NRD_SMALL 48         /* small descriptors: with NRD, 64 writes of 64 KiB in flight */
#define NRD_ALL (NRD + NRD_SMALL)
#define RD_MEM ((size_t)NRD * RD_PIECE + (size_t)NRD_SMALL * RD_SMALL) /* their buffers */
#define RD_BYTES (16u << 20) /* bytes of target reads in flight per endpoint */
#define ACK_EVERY 16u        /* while writes are landing: an ACK per this many, */
#define ACK_DELAY_NS 50000u  /* or once the oldest unacknowledged is this old */
#define TX_IOV 7             /* payload pieces of one send straight from user memory */
#define EAGER_OUT (4u << 20) /* eager bytes a QP may have sent beyond its oldest request */
#define RX_LOW (NRX / 2)     /* receive buffers held by target queues before they are copied */
/* what the target queue of one QP may hold in copies: the limit above, a chunk
 * of its oldest request, and a small message per request of the window */
#define TQ_MAX ((uint64_t)EAGER_OUT + 2u * CHUNK + (uint64_t)WIN * SMALL)

enum { M_REQ = 1, M_RESP = 2, M_KA = 3, M_ACK = 4, M_RTS = 5 };
/* Flags. A keepalive (M_KA) with F_RDREQ asks the target QP to read no
 * rendezvous source of requests from seq on (the requester finished them
 * without the target's answer) and to say so; one with F_RDFIN is that word:
 * no read of the requester's sources for requests from seq on (F_ALL: of any
 * request) is posted after this message. The provider sends in order, so
 * every read the target posted before comes first: once it has been served,
 * the requester can close the source's keys without a late read meeting an
 * unknown key (tcp closes the connection then, failing every QP on it). */
enum { F_FIRST = 1, F_LAST = 2, F_FIN = 4, F_RDREQ = 8, F_RDFIN = 16, F_ALL = 32 };

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

static inline void wire_enc(uint8_t *p, const struct wmsg *m)
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

static inline void wire_dec(struct wmsg *m, const uint8_t *p)
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
 * the target QP's queue, then it is posted again. When receive buffers run
 * short, a waiting request is copied out of its buffer (heap: the copy, freed
 * once done) and the buffer posted again: no QP's waiting requests can take
 * the buffers every other QP needs. */
struct rxbuf {
	struct fi_context fc;
	int kind;
	struct rxbuf *next;
	uint8_t *buf;
	bool heap;        /* a copy kept by a target queue, not a posted buffer */
	bool held;        /* a posted buffer kept by a target queue */
	struct wire_qp *owner; /* heap: the queue it counts against */
	struct wmsg m;
	int executed;     /* target: done, the answer is still to be sent */
	uint32_t status;  /* its result */
	uint64_t old;     /* atomic result */
	uint64_t off;     /* read: bytes already sent back */
};

enum { TX_PLAIN, TX_DIRECT, TX_FENCE, TX_LOST };

/* A send in flight; names its QP by number and generation, never by pointer
 * (the QP may be gone when the completion arrives). A send straight from
 * user memory (TX_DIRECT) keeps the regions it reads until its completion:
 * deregistration waits for them (kinet_wire_mr_gone). A fence (TX_FENCE,
 * seq: its id) is a keepalive sent with a completion: the provider sends in
 * order, so once it is out, so is every read answer it queued before it. A
 * send of a dropped peer, which the provider may never complete, is written
 * off (TX_LOST): not reused before its completion, replaced by a new one;
 * the regions it sends from stay held until then or until its connection is
 * closed. */
struct txd {
	struct fi_context fc;
	int kind;
	struct txd *next;
	bool busy;      /* with the provider: completion not seen yet */
	uint8_t what;   /* TX_* */
	bool fence;     /* TX_LOST: it was a fence (seq), whose completion still counts */
	int peer;       /* index in w->peers */
	uint32_t qpn, gen;
	uint32_t seq;   /* TX_FENCE: its id */
	int nmr;
	kinet_mr *mr[TX_IOV]; /* TX_DIRECT: the regions of its payload */
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

/* A target read in flight. p is NULL once its request was dropped (its
 * bytes land in its bounce buffer and are not copied; the key table stays
 * held until the provider has completed it). Read through its own bounce buffer (buf),
 * copied into the region when it lands: a read of a silent peer can be given
 * up (lost: never reused until the provider completes it, its bytes never
 * copied), which the provider cannot do for it (no cancel of reads; closing
 * the connection under a read answer is not safe with libfabric 1.17's
 * tcp, and leaves a paused peer with a stale connection). */
struct rdop {
	struct fi_context fc;
	int kind;
	struct rdop *next;
	bool busy;       /* with the provider */
	bool lost;       /* given up */
	int peer;        /* index in w->peers */
	uint8_t *buf;    /* its bounce buffer (cap bytes) */
	uint32_t cap;    /* RD_PIECE, or RD_SMALL for a small descriptor */
	struct tpend *p;
	uint8_t *bounce; /* staging for a destination that is not host memory */
	uint8_t *dst;
	int dkind;
	uint64_t len;
	bool skip;       /* with the copy thread, which no longer copies its bytes:
			  * its write was forgotten (copy.c, the copier's lock) */
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
	uint64_t eager;    /* its payload counted in wq->eager_out */
	uint32_t seq;      /* its request number */
	uint32_t status;
	int nmr;
	struct fid_mr *mr[MAXPC];
	struct wpiece pc[MAXPC];
};

/* Memory the provider may still read for a peer after a request ended
 * without the target's answer: a rendezvous source. Its keys stay open
 * (H_OPEN) until the target says it reads no more of it (F_RDFIN, asked for
 * with F_RDREQ, or an error answer of its QP): a read that arrived after
 * the keys were closed would make the provider close the connection. Then
 * the keys are closed and a fence is sent (H_FENCE): once it is out (H_SENT,
 * wire_fence_done), so is every read answer queued before it, and the hold
 * is released. Released at once when the connection is closed.
 * kinet_mr_dereg waits for it. */
enum { H_OPEN, H_FENCE, H_SENT };
struct whold {
	kinet_mr *mr[MAXPC];
	int nmr;
	struct fid_mr *key[MAXPC]; /* H_OPEN: the source's keys, still open */
	int nkey;
	int peer;
	uint32_t qpn, gen;           /* the requester QP */
	uint32_t peer_qpn, peer_gen; /* its target QP */
	uint32_t seq;                /* the request */
	uint8_t st;                  /* H_* */
	bool asked;                  /* H_OPEN: F_RDREQ sent */
	uint32_t fence;              /* H_SENT: the fence that releases it */
};

/* An F_RDFIN still to be sent (the provider had no room for it). */
struct wfin {
	int peer;
	uint32_t dst_qpn, dst_gen, src_qpn, src_gen, seq;
	bool all;
};

struct wpeer {
	uint8_t addr[128];
	size_t len;
	fi_addr_t fa;
	bool dead;
	int refs;
	int nrd;          /* target reads in flight from it */
	int nbusy;        /* sends and reads in flight to it */
	int nlost;        /* reads given up (the provider still has them) */
	uint64_t rd_ns;   /* last progress of those reads */
	bool settle;      /* dropped: see that the provider let go of it */
	bool want_close;  /* its connection is to be closed once that is safe */
	bool removed;     /* dropped and out of the address vector */
	bool closed;      /* removed with FI_AV_REMOVE_CLEANUP: its connection is closed */
	/* shm: the peer's process, which nothing is sent to once it has ended
	 * (wire_peer_gone) */
	int pid;          /* 0: not known (network wire) */
	int pidfd;        /* a pidfd of it, -1: none (kill(pid, 0) instead) */
	bool gone;        /* it has ended */
	uint64_t live_ns; /* when that was last checked */
};

/* A buffer of the wire's own registered with the provider for local use:
 * its descriptor goes with every operation on it where the provider asks
 * for them (FI_MR_LOCAL) or KINET_FI_MR_LOCAL=1. */
struct wlreg {
	uint8_t *p;
	size_t n;
	struct fid_mr *mr;
	void *desc;
};

/* A user region registered with the provider (wire_mr_desc): GPU memory as
 * FI_HMEM_CUDA (the provider moves it itself), host memory where local
 * descriptors are needed. Closed when the region is deregistered, once the
 * provider let go of it (kinet_wire_mr_gone). */
struct wmreg {
	kinet_mr *mr;
	struct fid_mr *fmr;
	void *desc;
};

struct wire_qp {
	kinet_qp *qp;
	struct kinet_wire *w;
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
	bool cut;           /* a request failed locally: what is posted now is flushed */
	bool rd_all;        /* the target reads none of its sources any more (F_RDFIN) */
	bool rd_part;       /* ... none from request rd_from on */
	uint32_t rd_from;
	uint64_t eager_out; /* eager payload sent for requests not done */
	int ntxd;           /* send descriptors in flight (TXQ_MAX) */
	/* target */
	struct rxbuf *tq;   /* received requests, by message number */
	struct rxbuf *dup;  /* fault injection: a copy of a request, delivered again once
			     * the target has served what it had (a heap copy) */
	uint64_t tq_bytes;  /* of them, in copies */
	uint32_t msn_rx;
	bool tgt_failed;    /* answered an error: drop the rest of this connection */
	bool stop;          /* asked to read nothing from request stop_seq on (F_RDREQ) */
	uint32_t stop_seq;
	bool fin_sent;      /* F_RDFIN (F_ALL) sent for this connection */
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
	bool same_host;     /* the context's wire to peers of this host (shm) */
	uint8_t addr[128];
	size_t addr_len;
	size_t inject, iov_limit;
	bool rma;           /* FI_RMA: rendezvous writes */
	bool virt_addr;     /* FI_MR_VIRT_ADDR: reads name virtual addresses */
	bool prov_key;      /* FI_MR_PROV_KEY: the provider picks keys */
	bool mr_ep;         /* FI_MR_ENDPOINT: regions are bound to the endpoint */
	bool mr_local;      /* FI_MR_LOCAL (or KINET_FI_MR_LOCAL=1): local descriptors */
	bool hmem;          /* FI_HMEM: GPU memory can be registered with the provider */
	bool hmem_off;      /* ... but a registration failed: GPU memory is staged */
	char hmem_why[160]; /* why GPU memory is staged (hmem_off, or no FI_HMEM) */
	struct wlreg *lregs; /* the wire's own buffers, registered (mr_local) */
	int nlregs, lcap;
	int lreg_rc;        /* the provider's answer to the last refused one */
	struct wmreg *mregs; /* user regions registered with the provider */
	int nmregs, mcap;
	uint64_t n_desc, n_nodesc, n_hmem_bytes, n_hmem_regs, n_hmem_fail;
	uint64_t rndv_min;  /* writes from this size on go by rendezvous (0: never) */
	uint64_t next_key;
	int wait_fd;        /* readable when the endpoint has something (-1: none) */
	struct rxbuf rx[NRX];
	uint8_t *rxmem, *bigmem, *txmem;
	struct txd *txfree;
	struct txd **txall; /* every send descriptor (the pool and its replacements) */
	int ntxall;
	void **extra;       /* replacements, freed with the endpoint */
	size_t *extra_len;  /* their sizes */
	int nextra;
	uint8_t *bigfree[NBIG];
	int nbig;
	struct rxbuf *repost; /* receive buffers to post again */
	int rx_held;        /* receive buffers held by target queues */
	bool av_cleanup;    /* removing an address closes its connection (FI_AV_REMOVE_CLEANUP) */
	int av_used;        /* addresses inserted into the vector since it opened, less those
			     * removed (shm: none are) */
	bool av_full_said;  /* the same-host wire said its vector is near full */
	bool close_safe;    /* the provider can close a connection under a read answer */
	bool conn;          /* the provider keeps a connection per peer (rxm): messages still
			     * go to a dropped peer (wire_send_peer); elsewhere (shm,
			     * udp;ofi_rxd) nothing is sent to a dropped peer */
	struct rdop **rdall; /* every read descriptor (NRD_ALL and replacements of lost ones) */
	int nrdall;
	struct whold *holds;
	int nholds, hcap;
	uint32_t fence_id;  /* the last fence sent */
	struct wfin *fins;  /* F_RDFIN messages still to be sent */
	int nfins, fcap;
	bool drop_check;    /* a peer was dropped: see that its transfers were cancelled */
	bool reset_due;     /* the endpoint is to be closed and opened again */
	int nresets;
	struct rdop rd[NRD_ALL];
	struct rdop *rdfree;       /* free descriptors of RD_PIECE bytes */
	struct rdop *rdfree_small; /* free descriptors of RD_SMALL bytes */
	uint8_t *rdmem;     /* the bounce buffers of rd[] (RD_MEM bytes) */
	_Atomic int rd_inflight; /* reads in flight (kinet_wire_pinned), those being
				  * copied into place by the copy thread included */
	uint64_t rd_bytes;
	uint32_t rd_max;         /* most reads in flight at once (kinet_wire_info) */
	struct wire_copier *cp; /* the copy thread (copy.c), once started */
	bool copy_on;           /* landed reads go to it (KINET_NET_COPY_THREAD) */
	uint64_t copy_min;      /* ... those of at least this many bytes */
	char copy_why[96];      /* why it is on or off */
	uint64_t copy_bytes;    /* bytes it has copied into place */
	bool draining;      /* a key-table writer waits: no new reads */
	uint64_t epoch;     /* bumped whenever the key table may have changed */
	struct wire_qp **qps;
	int nqps, qcap;
	struct wpeer *peers;
	int npeers;
	uint64_t timeout_ns, rnr_ns, ka_ns;
	uint64_t live_sweep_ns; /* shm: when its peers' processes were last checked
				 * (every LIVE_SWEEP_NS) */
};
#define LIVE_SWEEP_NS 1000000ull

static inline struct wreq *wire_ent(const struct wire_qp *wq, uint32_t seq)
{
	return &wq->win[seq & (WIN - 1)];
}

static inline fi_addr_t wire_peer_fa(struct kinet_wire *w, const struct wire_qp *wq)
{
	return w->peers[wq->peer].fa;
}

/* ---- the files and the calls between them -------------------------------
 *
 * The wire's files, top to bottom. Calls go one way: each file calls only
 * what the files below it define, never one above it (tests/util/layering.sh
 * checks it on the objects: test_layering). Where a lower file has news for
 * a higher one, it hands it back instead of calling up: wire_rd_done
 * returns the peer of a given-up read that ended, wire_copy_take the reads
 * the copy thread has put in place.
 *
 *   wire.c  a wire's creation and destruction, the entry points the engine
 *           calls (wire.h), the QP lifecycle, deregistration with work in
 *           flight; it defines nothing for the other files
 *   poll.c  polling the libfabric CQ (received messages to the requester's
 *           answers or the target's queue, completions of sends and reads),
 *           settling dropped peers, closing and opening the endpoint again
 *   req.c   requester: window, rendezvous, pump, CQEs, failure, holds and
 *           fences, answers
 *   peer.c  dropping a peer, closing its connection
 *   tgt.c   target: the queue served in message order, rendezvous reads,
 *           answers and ACKs, RNR waits, copies of waiting requests
 *   copy.c  the target's copy thread
 *   ep.c    the endpoint: opening and closing it, receive buffers, send
 *           descriptors, scatter/gather helpers, sending
 *   reg.c   registrations with the provider
 *   shm.c   the shm endpoints' names, the regions ended processes left
 *
 * What they share is hidden: not exported from the library, calls between
 * the files stay direct. */
#pragma GCC visibility push(hidden)

/* poll.c */
/* Polls the CQ: received messages, completions of sends and reads (and
 * reads the copy thread has put in place). The work done. */
int wire_poll_cq(struct kinet_wire *w);
/* Where no poll is under way: checks that the provider let go of the peers
 * removed, closes and opens the endpoint again when that is due. */
void wire_settle(struct kinet_wire *w);
/* May the whole endpoint be closed now (no read answer possibly half
 * received where the provider cannot close under one)? */
bool wire_reset_safe(const struct kinet_wire *w);

/* req.c */
void wire_wreq_unreg(struct wreq *e);
void wire_finish(struct wire_qp *wq, struct wreq *e, uint32_t status, bool answered);
void wire_fail_qp(struct kinet_wire *w, struct wire_qp *wq, uint32_t synd, bool transport);
int wire_holds_progress(struct kinet_wire *w);
void wire_fence_done(struct kinet_wire *w, int peer, uint32_t id);
void wire_rd_over(struct kinet_wire *w, const struct wmsg *m);
void wire_holds_release(struct kinet_wire *w, int idx);
bool wire_holds_peer(const struct kinet_wire *w, int idx);
bool wire_holds_mr(const struct kinet_wire *w, const kinet_mr *mr, int *peer);
int wire_fail_mr(struct kinet_wire *w, struct wire_qp *wq, const kinet_mr *mr);
int wire_pump(struct kinet_wire *w, struct wire_qp *wq, bool posting);
int wire_complete(struct wire_qp *wq);
void wire_on_ack(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m);
void wire_on_resp(struct kinet_wire *w, struct wire_qp *wq, const struct wmsg *m,
		  const uint8_t *data);

/* peer.c */
/* Drops peer idx (why: for the log): its reads and sends are given up. */
void wire_drop_peer(struct kinet_wire *w, int idx, const char *why);
/* Closes the connection to dropped peer idx (the provider lets go of what
 * it keeps for it); false: not now (a read of it may be half answered). */
bool wire_close_peer(struct kinet_wire *w, int idx);
/* A given-up read of peer idx has ended after all (wire_rd_done said so). */
void wire_lost_done(struct kinet_wire *w, int idx);

/* tgt.c */
void wire_tq_drop(struct kinet_wire *w, struct wire_qp *wq);
/* Queues a received request in message order; false (the caller releases
 * it) when it is a duplicate: its number is behind the next one expected,
 * or a request of that number is queued already. */
bool wire_tq_insert(struct wire_qp *wq, struct rxbuf *rb);
void wire_tgt_stop(struct kinet_wire *w, struct wire_qp *wq, uint32_t seq);
void wire_tq_copy(struct kinet_wire *w);
/* A copy of received request rb on the heap, counted against wq's
 * tq_bytes (wire_rx_release frees it); NULL without memory. */
struct rxbuf *wire_rx_heap_copy(struct wire_qp *wq, const struct rxbuf *rb);
int wire_serve_target(struct kinet_wire *w, struct wire_qp *wq);
/* A target read completed or failed: the peer of a given-up read that
 * ended after all (the caller tells wire_lost_done), or -1. */
int wire_rd_done(struct kinet_wire *w, struct rdop *op, bool ok);
/* Accounts for the reads the copy thread has put in place (the CQ poll,
 * and the wire's destruction once the thread has stopped). The number. */
int wire_rd_reap(struct kinet_wire *w);
void wire_rd_give_up(struct kinet_wire *w, int idx);
bool wire_rd_init(struct kinet_wire *w);

/* copy.c */
void wire_copy_setup(struct kinet_wire *w);
bool wire_copy_give(struct kinet_wire *w, struct rdop *op);
/* The reads it has copied into place since the last call, linked by next
 * (their bytes counted in copy_bytes), for wire_rd_reap; NULL: none. */
struct rdop *wire_copy_take(struct kinet_wire *w);
/* writes were forgotten (the p of their reads set NULL): the copy thread
 * copies none of their bytes any more; one it is copying now has landed
 * when this returns */
void wire_copy_forget(struct kinet_wire *w);
/* Forgets that have marked what waits for the copy thread as skipped (a
 * test waits for one before it lets the copy under way finish). */
uint64_t wire_copy_forgets(struct kinet_wire *w);
/* Stops the thread: it copies what it was handed first (then wire_rd_reap
 * accounts for those, and wire_copy_free frees it). */
void wire_copy_stop(struct kinet_wire *w);
void wire_copy_free(struct kinet_wire *w);

/* ep.c */
int wire_errno(int fi_rc);
/* Opens the CQ, the address vector and the endpoint (at creation, and
 * again after wire_ep_close); *step names what failed. */
int wire_ep_open(struct kinet_wire *w, const char **step);
void wire_ep_close(struct kinet_wire *w);
int wire_post_rx(struct kinet_wire *w, struct rxbuf *rb);
void wire_rx_release(struct kinet_wire *w, struct rxbuf *rb);
void wire_repost(struct kinet_wire *w);
struct txd *wire_txd_get(struct kinet_wire *w, const struct wire_qp *wq);
void wire_txd_put(struct kinet_wire *w, struct txd *t);
void wire_txd_busy(struct kinet_wire *w, struct wire_qp *wq, struct txd *t);
/* The QP that sent t has one descriptor fewer in flight. */
void wire_txd_unbusy_qp(struct kinet_wire *w, const struct txd *t);
/* A send of a dropped peer, which the provider may never complete, leaves
 * the pool; a new descriptor takes its place. */
void wire_txd_write_off(struct kinet_wire *w, struct txd *t);
int wire_iov_slice(const struct soft_iov *iov, int niov, uint64_t off, uint64_t n,
		   struct soft_iov *out, int max);
uint64_t wire_gpu_bytes(const struct soft_iov *iov, int n);
/* Has the process of peer idx ended (same-host peers, whose pid is known)?
 * A send to it would take its queue's lock in its shm region, which it may
 * have died holding (libfabric's shm then spins for ever): nothing is sent
 * to a peer for which this is true. Checked again at most every 2 us;
 * true once, true for good (logged then). */
bool wire_peer_gone(struct kinet_wire *w, int idx);
int wire_send_ctrl(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m);
int wire_send_peer(struct kinet_wire *w, int idx, struct wmsg *m, uint8_t what, uint32_t id);
struct wire_qp *wire_wq_find(struct kinet_wire *w, uint32_t qpn);
bool wire_txd_uses(const struct kinet_wire *w, const kinet_mr *mr, int *peer);
int wire_send_data(struct kinet_wire *w, struct wire_qp *wq, struct wmsg *m,
		   const struct soft_iov *data, int nd, uint64_t n);

/* reg.c */
/* Registers one of the wire's own buffers for local use (mr_local); false
 * when the provider refuses it (logged). */
bool wire_lreg_add(struct kinet_wire *w, void *p, size_t n);
/* The local descriptor of the wire's own buffer [p, p + n): NULL where none
 * is needed; with mr_local, one not found is counted (n_nodesc) and logged. */
void *wire_ldesc(struct kinet_wire *w, const void *p, size_t n);
/* A user region registered with the provider, for sends straight from it
 * (GPU memory as FI_HMEM_CUDA, or host memory under mr_local): its entry,
 * or NULL when it cannot be (GPU memory is then staged: hmem_off). */
struct wmreg *wire_mr_desc(struct kinet_wire *w, kinet_mr *mr);
/* Registers [p, p + n) with the provider (access, key): GPU memory of
 * region gpu as FI_HMEM_CUDA, host memory when gpu is NULL. A libfabric
 * return code. */
int wire_reg(struct kinet_wire *w, void *p, size_t n, uint64_t access, const kinet_mr *gpu,
	     uint64_t key, struct fid_mr **out);
/* Closes the provider registration of a deregistered region. */
void wire_mr_unreg(struct kinet_wire *w, const kinet_mr *mr);
/* Every buffer of the wire's own registered (mr_local), after the endpoint
 * opened; false when one is refused. */
bool wire_lregs_open(struct kinet_wire *w);
/* Closes every registration bound to the endpoint, before it closes. */
void wire_regs_close(struct kinet_wire *w);
/* Does the provider take GPU memory as FI_HMEM_CUDA (a trial before the
 * endpoint opens)? false says why in w->hmem_why. */
bool wire_hmem_probe(struct kinet_wire *w);

/* shm.c */
/* Serialises the library's shm endpoint creation with wire_shm_clear_stale. */
void wire_shm_lock(bool on);
/* Names this process's shm endpoints (info->src_addr, before fi_endpoint):
 * "fi_shm://<pid>.<PID namespace>.<node>", to which the provider adds
 * ":<uid>:<n>". Unique to this process, unlike the provider's own
 * "fi_shm://<pid>": a later process that gets our pid has another name, so
 * a peer that knew us does not reach it through our mapping. 0 or -ENOMEM. */
int wire_shm_name(struct fi_info *info);
/* Removes /dev/shm regions of that form, of our user and PID namespace,
 * whose process has ended (its pid is gone, or it is ours with another
 * node), and of the provider's own form with our pid older than this
 * process, that no endpoint of this process maps (those named with our pid:
 * more than 10 s old): left by a process that was killed or ended with _exit.
 * Their paths go to names (cap bytes, ", " between). The number removed.
 * Once per process (later calls: 0); call with wire_shm_lock held. */
int wire_shm_clear_stale(char *names, size_t cap);
/* The pid in an shm address (fi_shm://<pid>.... or fi_shm://<pid>:...), 0
 * when it is not one. */
int wire_shm_addr_pid(const uint8_t *addr, size_t len);
/* A pidfd of process pid (for wire_shm_pid_ended), -1 where the kernel has
 * none or pid is gone already (*gone then). */
int wire_shm_pid_open(int pid, bool *gone);
/* Has process pid (fd: its pidfd, or -1) ended? A zombie has. Without a
 * pidfd, only once it was reaped. */
bool wire_shm_pid_ended(int fd, int pid);
/* Records the region of a new shm endpoint (its address, fi_shm://<name>):
 * removed at exit if still open then. */
void wire_shm_region_add(const uint8_t *addr, size_t len);
/* ... and forgets it when the endpoint closes (libfabric removes the region
 * then; a later region of that name is not ours). */
void wire_shm_region_del(const uint8_t *addr, size_t len);

#pragma GCC visibility pop
#endif /* KINET_HAVE_FABRIC */
#endif
