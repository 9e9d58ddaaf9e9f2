/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend.h - how a backend plugs into the core.
 *
 * A backend (src/nic/<name>/) is one table of operations, listed in
 * src/nic/backends.c; kinet_open picks one and the core reaches it only
 * through ctx->ops. The core validates every argument, keeps the state
 * machine, the device descriptor and the objects' lifetimes; a backend
 * builds and runs the queues. Objects: the core allocates each object with
 * the size the backend declares (*_size, at least the core struct), zeroed,
 * and fills the core fields before it calls the backend; a backend embeds
 * the core struct in its own and reaches its part with kinet_container_of.
 *
 * Every operation is optional unless marked required: where a backend has
 * none, the core answers -EOPNOTSUPP with a log line naming the backend and
 * the operation (kinet_backend_unsupported). Backends return 0 or a
 * negative errno, and log what went wrong with the detail only they know.
 */
#ifndef KINET_CORE_BACKEND_H
#define KINET_CORE_BACKEND_H

#include "internal.h"
#include <kinet/eth.h>

struct kinet_fault_set; /* src/core/fault.h */

/* Capabilities (kinet_backend_ops.caps). */
enum {
	KINET_CAP_SHARED_CQ = 1u << 0, /* send/receive CQs created apart and shared by QPs */
	KINET_CAP_RESET_REUSE = 1u << 1, /* a QP may be used again after RESET */
	KINET_CAP_HOST_STAGING = 1u << 2, /* can stage GPU memory through host memory */
};

/* The local end of a QP, for its descriptor (kinet_qp_export). */
struct kinet_qp_local {
	uint64_t gen;          /* generation: changes on every RESET */
	uint64_t node;         /* incarnation of this process */
	char transport[32];    /* "tcp;ofi_rxm" (the wire's provider), "mlx5", ... */
	uint8_t addr[128];     /* what a peer needs to reach the QP */
	size_t addr_len;
	/* a second way in for peers of this host (software NIC: its shm wire);
	 * alt_len 0: none */
	uint64_t host;         /* kinet_host(): which host (and namespaces) this is */
	char alt_transport[16];
	uint8_t alt_addr[128];
	size_t alt_len;
};

struct kinet_qp_info; /* kinet/net.h */

/* The same-host part of a QP descriptor (kinet_qp_desc_parse_alt). */
struct kinet_qp_alt {
	uint64_t host;         /* the writer's kinet_host() */
	char transport[16];    /* "shm" */
	uint8_t addr[128];
	uint32_t len;          /* 0: the descriptor has none */
};
/* Bytes of a QP descriptor with an address of addr_len bytes and a
 * same-host part of alt_len (0: none); the part is only written when the
 * whole fits KINET_QP_DESC_MAX. */
size_t kinet_qp_desc_len(size_t addr_len, size_t alt_len);
/* kinet_qp_desc_parse, and the same-host part (alt->len 0 when absent). */
int kinet_qp_desc_parse_alt(const void *buf, size_t len, struct kinet_qp_info *out,
			    struct kinet_qp_alt *alt);

struct kinet_backend_ops {
	const char *name; /* required: "soft", "mlx5" */
	int id;           /* required: enum kinet_backend */
	int priority;     /* auto picks the usable backend of highest priority */
	unsigned caps;    /* KINET_CAP_* */
	size_t ctx_size, pd_size, mr_size, cq_size, qp_size; /* required: sizes of the objects */

	/* Is the backend usable (device present, libraries loadable)? 0, or a
	 * negative errno with the reason in why; on success why describes what
	 * would be used. Required. */
	int (*probe)(const struct kinet_ctx_attr *attr, char *why, size_t wl);
	/* Opens the backend's part of a context / closes it (no object left). Required. */
	int (*open)(kinet_ctx *ctx, const struct kinet_ctx_attr *attr);
	void (*close)(kinet_ctx *ctx);

	int (*pd_alloc)(kinet_pd *pd);
	void (*pd_free)(kinet_pd *pd);

	/* Registers mr->addr, len, access (validated): sets key, rkey, kind, path. */
	int (*mr_reg)(kinet_mr *mr);
	/* Deregisters; may wait (bounded) or refuse with -EBUSY as its contract says. */
	int (*mr_dereg)(kinet_mr *mr);

	/* A CQ of cq->cnt CQEs (power of two, set by the core). */
	int (*cq_create)(kinet_cq *cq);
	void (*cq_destroy)(kinet_cq *cq);

	/* Builds the queues of a QP (qp->attr holds the validated attributes, the
	 * doorbell mode resolved in qp->db_mode): sets qpn, sq/sq_cnt, rq/rq_cnt/
	 * rq_stride, dbrec, db, cpu_pi, scq/rcq (own_* when it created them),
	 * flags, and may change db_mode (saying why). Required. */
	int (*qp_create)(kinet_qp *qp);
	/* The descriptor is complete: start serving the QP. */
	int (*qp_attach)(kinet_qp *qp);
	/* Stop serving it (nothing of the backend touches it afterwards). */
	void (*qp_detach)(kinet_qp *qp);
	/* Frees what qp_create built. Required. */
	void (*qp_destroy)(kinet_qp *qp);
	/* Moves the QP from `from` to `to` (a legal step, checked by the core;
	 * RTR with the remote end: a local QP or a descriptor). The core sets
	 * qp->state once this returns 0 (unless the backend did). Required. */
	int (*qp_modify)(kinet_qp *qp, int from, int to, const struct kinet_qp_remote *remote);
	/* The local end for a descriptor (kinet_qp_export). */
	int (*qp_local_end)(kinet_qp *qp, struct kinet_qp_local *out);
	/* SQ consumer index as the NIC sees it (WQEBBs it has read), for
	 * kinet_qp_post_raw; NULL: learned from the send CQEs consumed with
	 * kinet_cq_poll, as hardware reports it. */
	uint64_t (*sq_consumed)(kinet_qp *qp);

	/* Adds the backend's own counters to o (kinet_ctx_counters). */
	void (*counters)(kinet_ctx *ctx, struct kinet_counters *o);
	/* Completes a QP's counters (o holds what the core counted: struct
	 * kinet_qp_ctr): what only the backend knows (outstanding work on the
	 * wire, the device state on hardware). */
	void (*qp_counters)(kinet_qp *qp, struct kinet_qp_counters *o);

	/* Revokes a region (kinet_mr_revoke): once this returns no new access
	 * through its keys succeeds and no access that started before is still
	 * moving bytes; the backend then sets mr->state to KINET_MR_REVOKED. */
	int (*mr_revoke)(kinet_mr *mr);
	/* What the transport knows of the QP's peer, for kinet_qp_ep_info: the
	 * core fills state, qp_state and outstanding first; the backend sets
	 * remote, peer_dead and silent_ms (and may change state). */
	void (*qp_ep_info)(kinet_qp *qp, struct kinet_ep_info *o);
	/* Fault injection (kinet_fault_add / KINET_FAULT): the parsed rules
	 * (src/core/fault.h); NULL: the backend has none. */
	int (*fault_set)(kinet_ctx *ctx, struct kinet_fault_set *rules);

	/* ---- Ethernet queues (kinet/eth.h, src/core/eth_core.h) ----
	 * Object sizes (0: the core struct), then the operations; a backend
	 * without eth_port_open has no Ethernet ports. */
	size_t eth_port_size, eth_txq_size, eth_rxq_size, eth_flow_size;
	/* Opens port->attr (validated; ifname in port->ifname): fills port->info
	 * and port->max_frame, logs why when it cannot. */
	int (*eth_port_open)(kinet_eth_port *port);
	void (*eth_port_close)(kinet_eth_port *port);
	/* The port's real-time clock, nanoseconds. */
	int (*eth_port_time)(kinet_eth_port *port, uint64_t *ns);
	/* Builds a send queue of txq->q.attr.sq_depth WQEBBs (a power of two)
	 * with a dedicated send CQ as deep: sets q.qpn, sq, sq_cnt, dbrec, db,
	 * cpu_pi, scq, flags and may lower q.db_mode; desc.inline_hdr at least
	 * what the NIC needs. Not served before eth_txq_start. */
	int (*eth_txq_create)(kinet_eth_txq *txq);
	int (*eth_txq_start)(kinet_eth_txq *txq);
	void (*eth_txq_destroy)(kinet_eth_txq *txq);
	/* Error -> ready, empty (the core resets the device state). */
	int (*eth_txq_reset)(kinet_eth_txq *txq);
	/* WQEBBs the NIC has read (kinet_eth_txq_post_raw); NULL: learned from
	 * the send CQEs consumed with kinet_cq_poll. */
	uint64_t (*eth_txq_consumed)(kinet_eth_txq *txq);
	/* Builds a receive queue of rxq->wqe_cnt WQEs of the geometry set by the
	 * core: sets rqn, wq, wqe_size, dbrec, cq. eth_rxq_start: the core has
	 * written and posted the WQEs (raw queues: none), serve it. */
	int (*eth_rxq_create)(kinet_eth_rxq *rxq);
	int (*eth_rxq_start)(kinet_eth_rxq *rxq);
	void (*eth_rxq_destroy)(kinet_eth_rxq *rxq);
	/* The port's flow list changed (flow added, or about to go: removed from
	 * the list already); under port->lock. */
	int (*eth_flow_create)(kinet_eth_flow *flow);
	void (*eth_flow_destroy)(kinet_eth_flow *flow);
	/* Counters of one queue (txq or rxq) or of the port (both NULL). */
	int (*eth_counters)(kinet_eth_port *port, kinet_eth_txq *txq, kinet_eth_rxq *rxq,
			    struct kinet_eth_counters *out);
};

/* Every backend of this build, highest priority first, NULL-terminated
 * (src/nic/backends.c). */
extern const struct kinet_backend_ops *const kinet_backends[];

/* Logs that backend b lacks operation `op` and returns -EOPNOTSUPP. */
int kinet_backend_unsupported(const kinet_ctx *ctx, const char *op);

#endif
