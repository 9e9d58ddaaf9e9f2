/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ops.h - the one function table through which the mlx5 backend reaches
 * rdma-core (libibverbs.so.1, libmlx5.so.1) and the GPU driver.
 *
 * Nothing in the backend calls rdma-core by symbol: the real table is filled
 * with dlopen/dlsym at run time (loader.c), so libkinet neither links against
 * rdma-core nor needs it installed. A test, or KINET_MLX5_EMULATE=1, installs
 * another table instead: the emulated rdma-core of emu.c, whose objects are
 * backed by the software NIC, lets the whole host path of the backend run on
 * a machine without a ConnectX NIC.
 *
 * Entries follow rdma-core's signatures exactly (they are rdma-core's own
 * types, from its installed headers). A few entries are small adapters where
 * rdma-core only offers a static inline wrapper (query_port, query_gid_ex).
 */
#ifndef KINET_MLX5_OPS_H
#define KINET_MLX5_OPS_H

#include "core/driver.h"
#include "gpu/gpu.h"

#if KINET_HAVE_RDMA_HEADERS
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

/* DevX UAR allocation types (mlx5dv.h of rdma-core 45 added the dedicated
 * one; older headers lack it, the value is then simply refused at run time
 * and the next type is tried). */
#define KINET_UAR_ALLOC_BF 0x0u
#define KINET_UAR_ALLOC_NC 0x1u
#ifdef MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED
#define KINET_UAR_ALLOC_NC_DEDICATED ((uint32_t)MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED)
#else
#define KINET_UAR_ALLOC_NC_DEDICATED (1u << 31)
#endif

struct kinet_mlx5_ops {
	const char *name; /* "rdma-core" or the name of a double */

	/* ---- libibverbs ---- */
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ib);
	int (*query_device)(struct ibv_context *ib, struct ibv_device_attr *attr);
	/* adapter: the full struct ibv_port_attr, as the inline ibv_query_port */
	int (*query_port)(struct ibv_context *ib, uint8_t port, struct ibv_port_attr *attr);
	/* adapter: one GID table entry with its type (RoCE v1/v2, IB) */
	int (*query_gid_ex)(struct ibv_context *ib, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *entry);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ib);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ib, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	/* adapter: a CQ created with the overrun-ignore flag (ibv_create_cq_ex,
	 * IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN), as a plain struct ibv_cq; NULL with
	 * errno when the provider cannot */
	struct ibv_cq *(*create_cq_oi)(struct ibv_context *ib, int cqe);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	/* shared receive queues (kinet-verbs; NULL in the rdma-core table) */
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);
	/* address handles (kinet-verbs; NULL in the rdma-core table) */
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	int (*destroy_ah)(struct ibv_ah *ah);
	/* RoCE: the next hop's MAC for a destination GID (DevX needs it) */
	int (*resolve_eth_l2_from_gid)(struct ibv_context *ib, struct ibv_ah_attr *attr,
				       uint8_t eth_mac[6], uint16_t *vid);

	/* ---- raw Ethernet (kinet/eth.h) ---- */
	/* adapters over rdma-core's inline wrappers: a receive WQ (ibv_create_wq),
	 * its state (ibv_modify_wq), an indirection table, a QP with the RX hash
	 * of such a table (ibv_create_qp_ex), flow steering rules */
	struct ibv_wq *(*create_wq)(struct ibv_context *ib, struct ibv_wq_init_attr *attr);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *attr);
	int (*destroy_wq)(struct ibv_wq *wq);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(struct ibv_context *ib,
							  struct ibv_rwq_ind_table_init_attr *a);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *t);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *ib, struct ibv_qp_init_attr_ex *attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp, struct ibv_flow_attr *attr);
	int (*destroy_flow)(struct ibv_flow *flow);
	/* libmlx5: a striding (multi-packet) receive WQ; the device's limits */
	struct ibv_wq *(*mlx5dv_create_wq)(struct ibv_context *ib, struct ibv_wq_init_attr *attr,
					   struct mlx5dv_wq_init_attr *dv);
	int (*mlx5dv_query_device)(struct ibv_context *ib, struct mlx5dv_context *attr);
	/* libmlx5: a QP with mlx5 attributes (kinet-verbs: a DCT) */
	struct ibv_qp *(*mlx5dv_create_qp)(struct ibv_context *ib, struct ibv_qp_init_attr_ex *attr,
					   struct mlx5dv_qp_init_attr *dv);

	/* ---- libmlx5 (direct verbs, DevX) ---- */
	bool (*mlx5dv_is_supported)(struct ibv_device *dev);
	struct ibv_context *(*mlx5dv_open_device)(struct ibv_device *dev,
						  struct mlx5dv_context_attr *attr);
	int (*mlx5dv_init_obj)(struct mlx5dv_obj *obj, uint64_t obj_type);
	struct mlx5dv_devx_umem *(*devx_umem_reg)(struct ibv_context *ib, void *addr, size_t size,
						  uint32_t access);
	struct mlx5dv_devx_umem *(*devx_umem_reg_ex)(struct ibv_context *ib,
						     struct mlx5dv_devx_umem_in *in);
	int (*devx_umem_dereg)(struct mlx5dv_devx_umem *umem);
	struct mlx5dv_devx_uar *(*devx_alloc_uar)(struct ibv_context *ib, uint32_t flags);
	void (*devx_free_uar)(struct mlx5dv_devx_uar *uar);
	struct mlx5dv_devx_obj *(*devx_obj_create)(struct ibv_context *ib, const void *in,
						   size_t inlen, void *out, size_t outlen);
	int (*devx_obj_modify)(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
			       void *out, size_t outlen);
	int (*devx_obj_destroy)(struct mlx5dv_devx_obj *obj);
	int (*devx_obj_query)(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
			      void *out, size_t outlen);
	int (*devx_query_eqn)(struct ibv_context *ib, uint32_t vector, uint32_t *eqn);
	int (*devx_general_cmd)(struct ibv_context *ib, const void *in, size_t inlen, void *out,
				size_t outlen);

	/* ---- the GPU side (CUDA driver, cudrv.c) ---- */
	/* Number of GPUs (0: the host executor is the only producer). */
	int (*gpu_count)(void);
	/* 1 when GPU memory can be exported as a dma-buf (driver and GPU). */
	int (*dmabuf_supported)(void);
	/* enum kinet_mem_kind of an address, or -errno. */
	int (*mem_kind)(const void *p);
	/* A dma-buf fd covering [p, p+len): *fd and the offset of p inside it.
	 * -ENOTSUP when the driver or the GPU cannot export one. */
	int (*dmabuf_fd)(void *p, size_t len, int *fd, uint64_t *offset);
	/* Maps host pages (io: MMIO, e.g. a UAR) into the GPU; *devp is the GPU's
	 * address of p. 0 (mapped now), 1 (it already was: do not unmap), or
	 * -ENODEV when there is no GPU (host executor only), -EIO. */
	int (*gpu_map)(void *p, size_t len, int io, void **devp);
	int (*gpu_unmap)(void *p);
	/* 1 when the peer-memory kernel module is loaded, else 0. */
	int (*peermem_loaded)(void);
	/* GPU memory for DevX queues (page aligned), and byte access to it from
	 * the host (initialisation, the CPU proxy). */
	int (*gpu_alloc)(size_t len, void **p);
	int (*gpu_free)(void *p);
	int (*gpu_memset)(void *p, int v, size_t n);
	int (*gpu_read)(void *dst, const void *src, size_t n);
	int (*gpu_write)(void *dst, const void *src, size_t n);
};

/* Installs a function table for contexts opened from now on (tests, the
 * emulation). NULL returns to the real rdma-core. */
void kinet_mlx5_set_ops(const struct kinet_mlx5_ops *ops);

/* The table in use: the installed one, the emulation when
 * KINET_MLX5_EMULATE=1, else the real rdma-core (loaded on first call).
 * NULL when rdma-core cannot be loaded; *why says why. */
const struct kinet_mlx5_ops *kinet_mlx5_ops_get(char *why, size_t whylen);

/* The real rdma-core table (NULL and *why when it cannot be loaded). */
const struct kinet_mlx5_ops *kinet_mlx5_real_ops(char *why, size_t whylen);

/* ---- the emulated rdma-core (emu.c), backed by the software NIC ---- */

/* What the emulation pretends to have. Tests change it between contexts. */
struct kinet_mlx5_emu_cfg {
	int ndev;          /* emulated devices (0: none), at most 4 */
	int link_layer;    /* IBV_LINK_LAYER_ETHERNET (RoCE) or _INFINIBAND */
	int port_down;     /* every port reports IBV_PORT_DOWN */
	int gpu;           /* 0 none, 1 an emulated GPU (gpu_map maps host pages as
			    * they are), 2 the real GPU through the CUDA driver
			    * (default with KINET_MLX5_EMULATE=1 on a GPU machine) */
	int gpu_map_fails; /* gpu_map answers -EIO (no GPU mapping of the UAR) */
	int dmabuf;        /* dma-buf export of emulated GPU memory works */
	int peermem;       /* ibv_reg_mr accepts emulated GPU memory */
	int devx;          /* DevX commands are accepted */
	unsigned uar_refuse; /* UAR allocation types refused: bit 0 BF, 1 NC, 2 NC dedicated */
	int max_qp_wr;     /* device limit reported by query_device */
	/* DevX capabilities (QUERY_HCA_CAP); 0 keeps the default of a ConnectX-6/7 */
	int ts_cap;        /* QP timestamps: 0 both formats, 1 free running only,
			    * 2 real time only (firmware refuses the others) */
	int no_cq_oi;      /* 1: CQs with overrun ignore are refused */
	int log_max_msg;   /* 0: 30 (1 GiB messages) */
	int log_bf_reg_size; /* 0: 9 (two BlueFlame buffers of 256 bytes) */
	/* kinet-verbs (src/verbs/ibverbs.c): devices kinet0.. over the host's
	 * Ethernet interfaces, one RoCE port each, GIDs from their addresses,
	 * MTU from theirs (ndev is then the number of interfaces) */
	int host;
};

const struct kinet_mlx5_ops *kinet_mlx5_emu_ops(void);
/* kinet-verbs: the host interface behind a device of the list (cfg.host),
 * as src/verbs/host.h describes it; -ENODEV for another device. */
struct kinet_verbs_port;
int kinet_mlx5_emu_dev_port(struct ibv_device *dev, struct kinet_verbs_port *out);
/* kinet-verbs' sysfs answer (src/verbs/sysfs.c): the RoCE version, 1 or 2,
 * of GID entry index of host device kinet<n> on port 1; 0 for an entry of
 * the table that holds no GID; -ENOENT for no such device, port or entry.
 * The device list is scanned if it was not yet. */
int kinet_mlx5_emu_gid_version(unsigned n, unsigned port, unsigned index);
#define KINET_EMU_GPU_REAL 2
/* Reads / replaces the emulation's configuration (defaults: 2 RoCE devices,
 * active ports, no GPU or the real one, DevX on). */
void kinet_mlx5_emu_get_cfg(struct kinet_mlx5_emu_cfg *cfg);
void kinet_mlx5_emu_set_cfg(const struct kinet_mlx5_emu_cfg *cfg);
/* Declares [p, p+len) of host memory to be "GPU memory" for the emulation
 * (mem_kind answers KINET_MEM_CUDA): exercises the GPU registration paths
 * without a GPU. Returns 0, -ENOSPC when the table is full. */
int kinet_mlx5_emu_gpu_range(void *p, size_t len);
void kinet_mlx5_emu_gpu_range_clear(void);
/* Counters of the software NIC behind emulated device `dev` (0 ..). */
int kinet_mlx5_emu_counters(int dev, struct kinet_counters *out);
/* Calls made to the emulation, by name (e.g. "mlx5dv_init_obj"). */
unsigned kinet_mlx5_emu_calls(const char *name);
void kinet_mlx5_emu_calls_reset(void);

#endif /* KINET_HAVE_RDMA_HEADERS */
#endif
