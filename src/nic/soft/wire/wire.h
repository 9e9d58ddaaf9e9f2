/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h - the software NIC's wire to QPs in other processes.
 *
 * Contract with the engine (engine.c): for a QP whose peer is remote
 * (soft_qp(qp)->wire != NULL), the engine parses and checks each WQE
 * locally, then calls kinet_wire_post(); the wire carries the request, the remote engine
 * runs the responder (soft_resp_*), and the answer comes back. The wire
 * writes the requester's CQEs strictly in WQE order (under its lock) from
 * kinet_wire_progress(), which the engine calls on every pass of the QP (in
 * RTS and in ERR), and as soon as answers are read. The endpoint is polled
 * and the target side served by kinet_wire_ctx_progress(), which every
 * engine calls once per pass of its loop (holding the context's key table
 * like for its QPs).
 */
#ifndef KINET_WIRE_H
#define KINET_WIRE_H
#include "nic/soft/soft.h"

/* What the wire knows of a QP's connection (kinet_wire_qp_status), for the
 * endpoint state and the counters. */
struct kinet_wire_status {
	bool connected;
	bool peer_dead;       /* the peer's address was dropped (failure) */
	uint64_t outstanding; /* requests in the window (posted, not completed) */
	uint64_t silent_ns;   /* outstanding work and nothing heard for this long */
	uint64_t timeout_ns;  /* KINET_NET_TIMEOUT_MS */
	bool rnr_waiting;     /* a request of the peer waits here for a receive WQE */
};

#if KINET_HAVE_FABRIC
/* The QP's connection as the wire sees it: 0, or -ENOENT (no wire end). */
int kinet_wire_qp_status(kinet_qp *qp, struct kinet_wire_status *st);
/* Room for one more outstanding request on this QP? */
bool kinet_wire_can_post(kinet_qp *qp);
/* Hands a parsed request to the wire: 0 (it completes later, in order, even
 * when it fails), or a KN_SYND_* to complete it in error now (only when
 * nothing is outstanding). */
int kinet_wire_post(kinet_qp *qp, struct soft_req *r);
/* Drives the wire for this QP: completes finished requests in order, times
 * out dead peers; in ERR, flushes what is outstanding. Returns the work done. */
int kinet_wire_progress(kinet_qp *qp);
/* Nothing outstanding on the wire for this QP (the engine flushes the rest
 * of the SQ of a QP in ERR only then, to keep CQEs in WQE order). */
bool kinet_wire_drained(kinet_qp *qp);
/* The QP goes to RESET: forget outstanding requests, take a new generation. */
void kinet_wire_qp_reset(kinet_qp *qp);
/* The QP goes away: fail what is outstanding, release the endpoint. */
void kinet_wire_qp_close(kinet_qp *qp);

/* Context level: progress of the endpoint and service of incoming requests
 * (target side). Returns the work done. */
int kinet_wire_ctx_progress(kinet_ctx *ctx);
/* Direct placements in flight: the target reads rendezvous writes straight
 * into regions it has checked. While true, an engine keeps the context's
 * key table (its lock, for reading) across its passes, so that no region is
 * deregistered under a placement; the wire starts no new reads while a
 * writer waits for the table, and checks again what it started before the
 * table could change. */
bool kinet_wire_pinned(kinet_ctx *ctx);
/* A region has left the key table (kinet_mr_dereg): requests on the wire
 * that would still read or write it fail (local protection error), and this
 * returns once the provider no longer touches it, at most about
 * KINET_NET_TIMEOUT_MS later (the peers that keep it are then dropped).
 * Called without the engines stopped: they complete what it waits for. */
int kinet_wire_mr_gone(kinet_ctx *ctx, kinet_mr *mr);
/* An idle engine's nap: returns when the endpoint has something to read or
 * after ns; -ENOSYS when the context has no wire (or no wait object): the
 * caller sleeps instead. */
int kinet_wire_ctx_wait(kinet_ctx *ctx, uint64_t ns);
/* Context close (engines stopped): closes the endpoint. */
void kinet_wire_ctx_close(kinet_ctx *ctx);

/* Local end of a QP for its descriptor (kinet_qp_export): generation,
 * provider and endpoint address; creates the context's endpoint on first
 * use. Returns 0 or a negative errno. */
int kinet_wire_local_end(kinet_qp *qp, struct kinet_qp_local *out);
/* RTR of a QP whose peer is in another process: remote->wire_addr holds the
 * peer's descriptor (kinet/net.h). */
int kinet_soft_wire_connect(kinet_qp *qp, const struct kinet_qp_remote *remote);

#else
static inline int kinet_wire_qp_status(kinet_qp *qp, struct kinet_wire_status *st)
{
	(void)qp;
	(void)st;
	return -ENOENT;
}
/* A build without libfabric has no wire: no QP ever gets one (the backend
 * refuses descriptors and remote peers), so what the engine asks of it per
 * pass is always nothing. */
static inline bool kinet_wire_can_post(kinet_qp *qp) { (void)qp; return false; }
static inline int kinet_wire_post(kinet_qp *qp, struct soft_req *r)
{
	(void)qp;
	(void)r;
	return KN_SYND_TRANSPORT_RETRY_EXC_ERR;
}
static inline int kinet_wire_progress(kinet_qp *qp) { (void)qp; return 0; }
static inline bool kinet_wire_drained(kinet_qp *qp) { (void)qp; return true; }
static inline void kinet_wire_qp_reset(kinet_qp *qp) { (void)qp; }
static inline void kinet_wire_qp_close(kinet_qp *qp) { (void)qp; }
static inline int kinet_wire_ctx_progress(kinet_ctx *ctx) { (void)ctx; return 0; }
static inline bool kinet_wire_pinned(kinet_ctx *ctx) { (void)ctx; return false; }
static inline int kinet_wire_mr_gone(kinet_ctx *ctx, kinet_mr *mr)
{
	(void)ctx;
	(void)mr;
	return 0;
}
static inline int kinet_wire_ctx_wait(kinet_ctx *ctx, uint64_t ns)
{
	(void)ctx;
	(void)ns;
	return -ENOSYS;
}
static inline void kinet_wire_ctx_close(kinet_ctx *ctx) { (void)ctx; }
#endif
#endif
