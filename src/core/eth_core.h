/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eth_core.h - the core objects of Ethernet queues (kinet/eth.h), shared by
 * src/core/eth.c and the backends, which embed them in objects of their own
 * (the sizes in struct kinet_backend_ops) as for QPs.
 *
 * Split of the work: the core checks every argument, owns the lifetimes,
 * the device descriptors and state, the receive buffers (allocated and
 * registered through the backend's mr_reg) and the receive WQEs that point
 * at them, and the list of flows of a port (in the order they are tried);
 * the backend builds the queues and serves them (the software NIC's port
 * thread, a ConnectX).
 */
#ifndef KINET_CORE_ETH_H
#define KINET_CORE_ETH_H

#include <kinet/eth.h>
#include <kinet/device_eth.h>
#include "internal.h"

struct kinet_eth_port {
	kinet_ctx *ctx;
	kinet_pd *pd;
	struct kinet_eth_port_attr attr; /* attr.ifname points at ifname below */
	char ifname[32];
	struct kinet_eth_port_info info; /* filled by the backend's open */
	uint32_t max_frame;              /* Ethernet header + MTU (+ a VLAN tag) */
	atomic_int queues;               /* send and receive queues of the port */
	pthread_mutex_t lock;            /* the flows below */
	kinet_eth_flow *flows;           /* in the order they are tried */
	uint32_t nflows;
	uint64_t flow_seq;
};

struct kinet_eth_txq {
	kinet_eth_port *port;
	struct kinet_eth_txq_attr attr;
	/* The SQ as the core sees a QP (never in the context's QP list, never
	 * given to kinet_qp_* calls that change it): sq, sq_cnt, dbrec, db,
	 * cpu_pi, scq, db_mode, flags, qpn set by the backend; dstate,
	 * slot_ready, desc, raw_* by the core. */
	kinet_qp q;
	kn_eth_txq desc;
};

struct kinet_eth_rxq {
	kinet_eth_port *port;
	struct kinet_eth_rxq_attr attr;
	/* the queues, set by the backend's create */
	uint32_t rqn;
	uint8_t *wq;               /* wqe_cnt x wqe_size bytes */
	uint32_t wqe_cnt, wqe_size;
	volatile uint32_t *dbrec;  /* [0]: the receive producer */
	kinet_cq *cq;              /* as deep as the queue (at least) */
	/* geometry, set by the core before the backend's create */
	uint32_t wqe_bytes, stride_bytes, strides;
	/* buffers and device side, set by the core */
	uint8_t *buf;
	size_t buf_len;
	kinet_mr *mr;
	bool own_buf, own_mr;
	kn_eth_rxq desc;
	kn_eth_rxq_state *st;
	uint64_t *fin;
	atomic_int flows;
};

struct kinet_eth_flow {
	kinet_eth_rxq *rxq;
	struct kinet_eth_match m;
	uint64_t seq;
	kinet_eth_flow *next; /* the port's list */
};

/* The SQ of a send queue as a QP, for the CUDA module's placement
 * (kinet_qp_device_cuda; private node of the version script). */
kinet_qp *kinet_eth_txq_qp(kinet_eth_txq *txq);

/* Largest number of flows a port takes (the software NIC's steering table). */
#define KINET_ETH_MAX_FLOWS 64

#endif
