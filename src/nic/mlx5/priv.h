/* SPDX-License-Identifier: BSD-3-Clause */
/* State of the mlx5 backend shared by backend.c and devx.c. */
#ifndef KINET_MLX5_PRIV_H
#define KINET_MLX5_PRIV_H

#include "nic/mlx5/ops.h"
#include "nic/mlx5/mlx5.h"
#include "core/driver.h"

#if KINET_HAVE_RDMA_HEADERS

struct m5_page {
	uintptr_t addr;
	int refs;
	bool owned; /* registered by us (else it was registered already) */
};

/* An mlx5 context (embeds the core's). */
struct m5 {
	kinet_ctx c;
	const struct kinet_mlx5_ops *ops;
	struct ibv_context *ib;
	char name[64];
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	int gpu; /* 1: a GPU is present, queues and doorbell must be mapped */
	bool devx;     /* queues are DevX objects (KINET_MLX5_QUEUES) */
	uint32_t eqn;  /* DevX: the event queue of our CQs */
	/* DevX: what QUERY_HCA_CAP said (drives the PRM fields kinet sets) */
	struct {
		uint32_t log_max_msg;     /* qpc.log_msg_max */
		uint32_t qp_ts_format;    /* KINET_PRM_TS_CAP_* of RC QPs */
		uint32_t bf_size;         /* bytes of one BlueFlame buffer, 0: none */
		bool cq_oi;               /* CQs with overrun ignore */
	} cap;
	pthread_mutex_t lock;
	struct m5_page *pages; /* pages mapped into the GPU, refcounted */
	int npages, pcap;
	kinet_qp **qps; /* every QP (close check, CPU proxy) */
	int nqps, qcap;
	kinet_qp **ethq; /* Ethernet send queues' SQs (the CPU proxy rings them too) */
	int nethq, ethcap;
	/* CPU proxy */
	pthread_t proxy_th;
	bool proxy_started;
	atomic_bool proxy_stop;
	uint64_t spin_ns, sleep_ns;
};

struct m5_pd {
	kinet_pd p;
	struct ibv_pd *ipd;
};

struct m5_mr {
	kinet_mr m;
	struct ibv_mr *imr;
};

struct m5_qp {
	kinet_qp q;
	uint64_t gen; /* generation of its descriptors (new on every RESET) */
	struct ibv_qp *ibqp;
	struct ibv_cq *ibscq, *ibrcq;
	kinet_cq scq, rcq; /* views of the verbs CQs for the core */
	uint32_t psn;
	uint8_t *bf_reg;
	uint32_t bf_size;
	uint32_t *cpu_pi_page;
	/* ranges mapped into the GPU (unmapped on destroy) */
	struct {
		void *p;
		size_t len;
		int io;
	} maps[10];
	int nmaps;
	/* DevX: one allocation [WQ (RQ then SQ) | send CQ | receive CQ | DBRs] */
	bool devx;
	bool on_gpu; /* that memory is GPU memory */
	uint8_t *qmem;
	size_t qlen;
	struct mlx5dv_devx_umem *umem;
	struct mlx5dv_devx_uar *uar;
	struct mlx5dv_devx_obj *oqp, *oscq, *orcq;
};

static inline struct m5 *m5_of(kinet_ctx *c)
{
	return kinet_container_of(c, struct m5, c);
}
static inline struct m5_qp *m5_qp(kinet_qp *q)
{
	return kinet_container_of(q, struct m5_qp, q);
}
static inline struct ibv_pd *m5_ipd(kinet_pd *p)
{
	return kinet_container_of(p, struct m5_pd, p)->ipd;
}

/* Maps [p, p+len) into the GPU page by page (refcounted); records it on x. */
int kinet_m5_range_map(struct m5 *m, struct m5_qp *x, void *p, size_t len, int io);
/* A kinet_cq view of a CQ buffer (not owned by the core). */
void kinet_m5_cq_view(kinet_cq *v, kinet_ctx *ctx, uint8_t *buf, uint32_t cnt,
		      volatile uint32_t *dbrec);

/* Unmaps what kinet_m5_range_map recorded on x (caller holds m->lock). */
void kinet_m5_range_unmap_all(struct m5 *m, struct m5_qp *x);
/* Starts the CPU proxy thread (caller does not hold m->lock). */
int kinet_m5_proxy_start(struct m5 *m);

/* Raw Ethernet (eth.c): the objects (each embeds the core's) and the
 * backend's Ethernet operations. */
struct m5_eth_port {
	struct kinet_eth_port p;
	uint8_t port;
};
struct m5_eth_txq {
	struct kinet_eth_txq t;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	kinet_cq cqv;  /* a view of the send CQ for the core */
	struct m5_qp maps; /* the ranges mapped into the GPU (maps/nmaps only) */
	uint32_t *cpu_pi_page;
};
struct m5_eth_rxq {
	struct kinet_eth_rxq r;
	struct ibv_cq *cq;
	struct ibv_wq *wq;
	struct ibv_rwq_ind_table *ind;
	struct ibv_qp *qp; /* RX hash QP over the table: the flows' target */
	kinet_cq cqv;
	struct m5_qp maps;
};
struct m5_eth_flow {
	struct kinet_eth_flow f;
	struct ibv_flow *fl[2]; /* an IP protocol without an IP version: one rule per version */
};
int kinet_m5_eth_port_open(kinet_eth_port *p);
void kinet_m5_eth_port_close(kinet_eth_port *p);
int kinet_m5_eth_port_time(kinet_eth_port *p, uint64_t *ns);
int kinet_m5_eth_txq_create(kinet_eth_txq *t);
int kinet_m5_eth_txq_start(kinet_eth_txq *t);
void kinet_m5_eth_txq_destroy(kinet_eth_txq *t);
int kinet_m5_eth_rxq_create(kinet_eth_rxq *r);
void kinet_m5_eth_rxq_destroy(kinet_eth_rxq *r);
int kinet_m5_eth_flow_create(kinet_eth_flow *f);
void kinet_m5_eth_flow_destroy(kinet_eth_flow *f);

/* DevX (devx.c) */
int kinet_m5_devx_open(struct m5 *m);
int kinet_m5_devx_create(struct m5 *m, kinet_qp *qp, struct m5_qp *x, uint32_t sq_cnt,
			 uint32_t rq_cnt);
/* from -> to with the remote endpoint (RTR). */
int kinet_m5_devx_modify(struct m5 *m, kinet_qp *qp, struct m5_qp *x, int to,
			 const struct kinet_mlx5_ep *ep);
void kinet_m5_devx_release(struct m5 *m, struct m5_qp *x);

#endif
#endif
