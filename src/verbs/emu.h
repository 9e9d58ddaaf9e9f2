/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emu.h - the objects of the rdma-core double (emu.c), private to src/verbs:
 * rdma-core's structs first (the handles the program holds), the
 * software-NIC objects behind them. The CPU data path (data.c: post send
 * and receive, poll, completion channels) works on the same objects.
 */
#ifndef KINET_VERBS_EMU_H
#define KINET_VERBS_EMU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nic/mlx5/ops.h"
#include "core/driver.h"
#include "verbs/host.h"
#include "nic/soft/srq.h"
#include "nic/soft/dc.h"

#define EMU_MAXDEV 4
#define EMU_GIDS 8
#define EMU_HOST_GIDS 255 /* the GID table a ConnectX port reports */

struct emu_dev {
	struct ibv_device dev; /* first: the handle rdma-core hands out */
	int index;
	kinet_ctx *soft; /* the software NIC behind this device */
	int opens;
	int link_layer;  /* fixed at first open */
	bool host;       /* kinet-verbs: a port over a host interface (hp) */
	struct kinet_verbs_port hp;
};

/* rdma-core's extended context (struct verbs_context ends with the
 * struct ibv_context the program holds), so that verbs.h's inline functions
 * (ibv_query_port, ibv_query_device_ex, ibv_post_send, ibv_poll_cq, ...)
 * reach the emulation through the context's ops. */
struct emu_ctx {
	struct verbs_context vc;
	struct emu_dev *d;
	bool devx; /* opened with mlx5dv_open_device(DEVX) */
};
static inline struct emu_dev *emu_dev_of(struct ibv_context *ib)
{
	return ((struct emu_ctx *)((uint8_t *)ib - offsetof(struct verbs_context, context)))->d;
}
struct emu_pd {
	struct ibv_pd pd;
	kinet_pd *spd;
	kinet_eth_port *eport; /* raw Ethernet: the software NIC's port (loopback) */
	struct emu_pd *next;
	/* a parent domain (ibv_alloc_parent_domain): the PD it stands for, whose
	 * spd it shares; NULL for a PD. A PD counts its parent domains. */
	struct emu_pd *base;
	unsigned children;
};
struct emu_mr {
	struct ibv_mr mr;
	kinet_mr *smr;
};
struct emu_chan;
struct emu_qp;
struct emu_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cqx; /* an extended CQ (ibv_create_cq_ex): begins as cq */
	};
	kinet_cq *scq;
	uint32_t cqn;
	/* the CPU data path (data.c) */
	pthread_mutex_t lock;     /* ibv_poll_cq: one consumer at a time */
	struct emu_qp *last;      /* the QP of the last CQE polled */
	struct emu_chan *chan;    /* completion channel, or NULL */
	bool armed, pending;      /* ibv_req_notify_cq; an event queued on chan */
	struct emu_cq *arm_next;  /* the watcher's list of armed CQs */
	struct emu_cq *ev_next;   /* the channel's queue of events */
	uint32_t events_read;     /* events ibv_get_cq_event returned (cq.mutex) */
	/* an extended CQ: the completion between start_poll and end_poll */
	bool single;              /* IBV_CREATE_CQ_ATTR_SINGLE_THREADED: no lock */
	struct ibv_wc cur;
	struct emu_cq *all_next;  /* every verbs CQ (emu.c, under its lock) */
};
struct emu_wrx;
struct emu_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qpx; /* an extended QP (ibv_qp_to_qp_ex): qpx.qp_base is qp */
	};
	kinet_qp *sqp;
	struct emu_dev *d;
	struct emu_qp *peer;
	uint32_t rq_psn, sq_psn;
	bool has_rq_psn, has_sq_psn;
	struct emu_qp *next; /* all emulated QPs (peer lookup) */
	/* raw packet QPs: a send queue, or the hashing QP of a receive WQ */
	kinet_eth_txq *etx;
	kinet_cq *etx_own_cq; /* the send queue's own CQ, while the verbs CQ stands in */
	struct emu_wq *rss;
	/* the CPU data path of RC QPs (data.c) */
	struct ibv_qp_cap cap;   /* as created (what ibv_query_qp reports) */
	bool sig_all;            /* sq_sig_all */
	pthread_mutex_t sq_lock, rq_lock;
	uint64_t *sq_wrid;       /* per SQ slot: the WR's id, opcode, WQEBBs */
	uint8_t *sq_wop, *sq_nbb;
	uint64_t *sq_atomic;     /* per SQ slot: an atomic's result address, or 0 */
	uint64_t *sq_seq;        /* per SQ slot: the WR's number */
	_Atomic uint64_t sq_tail; /* WQEBBs known complete (from CQEs) */
	uint64_t sq_wr_head;      /* WRs posted, and known complete: at most */
	_Atomic uint64_t sq_wr_tail; /* cap.max_send_wr outstanding, as mlx5 */
	uint64_t *rq_wrid;
	uint64_t rq_head;
	_Atomic uint64_t rq_tail;
	struct ibv_qp_attr attr; /* the attributes of the modifies so far (ibv_query_qp) */
	bool rv;                 /* qp.qp_num is an entry of the host's rendezvous */
	struct emu_wrx *wrx;     /* an extended QP: the work requests since wr_start */
	struct emu_srq *srq;     /* receives through this SRQ (srq.c), no receive queue */
	uint8_t dc;              /* a DCI (DevX) or DCT (mlx5dv_create_qp): enum kinet_dc_role */
};

/* Shared receive queues (srq.c). */
#define EMU_SRQ_MAX_WR 32767
#define EMU_SRQ_MAX_SGE 31
struct emu_srq {
	struct ibv_srq srq; /* first: the handle the program holds */
	struct emu_srq *next; /* every SRQ (srq.c) */
	kinet_srq *s;
	struct kinet_srq_info info;
	pthread_mutex_t lock; /* head, tail, counter, wrid */
	uint64_t *wrid;       /* per WQE: the posted work request's id */
	uint16_t head, tail;  /* the free list: posts take the head, completions link after the tail */
	uint32_t counter;     /* WQEs posted (the doorbell record) */
	uint32_t max_sge;
};
struct ibv_srq *emu_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *ia);
int emu_destroy_srq(struct ibv_srq *srq);
int emu_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask);
int emu_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a);
int emu_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* A receive completion of WQE idx: its work request's id; the WQE is free again. */
uint64_t emu_srq_complete(struct emu_srq *s, uint16_t idx);
/* An address handle (emu.c): the address vector mlx5dv_init_obj gives. */
struct emu_ah {
	struct ibv_ah ah; /* first: the handle the program holds */
	struct mlx5_wqe_av av;
};

/* The SRQ of device d with this number (mlx5dv_init_obj's srqn), or NULL. */
struct emu_srq *emu_srq_by_num(struct emu_dev *d, uint32_t srqn);

/* rendezvous.c: QP numbers unique on the host, and the software-NIC
 * descriptors of QPs in INIT and later, found by (GID, QP number) from
 * other processes (docs/verbs.md, "Addressing"). */
#define EMU_RV_GIDS 16
int emu_rv_alloc(uint32_t *qpn);
/* Reserves that very number (a DevX QP's, which its WQEs carry): 0, or
 * -EEXIST when a living process holds it. */
int emu_rv_claim(uint32_t qpn);
int emu_rv_publish(uint32_t qpn, const uint8_t (*gids)[16], uint32_t ngid, const void *desc,
		   size_t len);
void emu_rv_release(uint32_t qpn);
/* The descriptor of QP qpn on a device with that GID: its length, or
 * -ENOENT (logged with the reason) after KINET_VERBS_PEER_TIMEOUT_MS. A GID
 * of another host is asked for at that host (ifname: the local interface,
 * the scope of a link-local GID). */
int emu_rv_lookup(uint32_t qpn, const uint8_t gid[16], const char *ifname, void *desc,
		  size_t cap);

/* data.c: the context's data-path ops, the per-QP and per-CQ state of the
 * CPU data path, completion channels. */
void emu_data_ops(struct ibv_context *ib);
int emu_data_qp_init(struct emu_qp *q, const struct ibv_qp_init_attr *ia);
void emu_data_qp_fini(struct emu_qp *q);
/* An RC QP of ibv_create_qp_ex with these send_ops_flags: its ibv_qp_ex
 * functions (wr_start .. wr_complete); 0 or a negative errno. */
int emu_data_qpx_init(struct emu_qp *q, uint64_t send_ops);
struct ibv_qp_ex *emu_qp_to_qp_ex(struct ibv_qp *qp);
void emu_data_qp_reset(struct emu_qp *q);
void emu_data_cq_init(struct emu_cq *c, struct ibv_comp_channel *ch);
void emu_data_cq_fini(struct emu_cq *c);
/* An extended CQ: its ibv_cq_ex functions (start_poll .. read_*). */
void emu_data_cqx_init(struct emu_cq *c, bool single);
struct emu_qp *emu_qp_by_num(struct emu_dev *d, uint32_t qpn);

/* Completion channels (kinet-verbs' ibv_create_comp_channel and the rest). */
struct ibv_comp_channel *emu_chan_create(struct ibv_context *ib);
int emu_chan_destroy(struct ibv_comp_channel *ch);
int emu_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
void emu_ack_cq_events(struct ibv_cq *cq, unsigned int n);
int emu_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init);

#endif
