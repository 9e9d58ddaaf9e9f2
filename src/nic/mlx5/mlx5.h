/* SPDX-License-Identifier: BSD-3-Clause */
/* The mlx5 hardware backend: entry points used by the core. */
#ifndef KINET_NIC_MLX5_H
#define KINET_NIC_MLX5_H
#include "internal.h"

/* 0 when a usable mlx5 device is present; else a negative errno and, in why,
 * the reason (no rdma-core, no device, ...). On success `why` describes the
 * device that would be used. */
int kinet_mlx5_probe(const char *device, char *why, size_t whylen);
int kinet_mlx5_open(kinet_ctx *ctx, const char *device);
void kinet_mlx5_close(kinet_ctx *ctx);
int kinet_mlx5_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr, kinet_qp **out);
int kinet_mlx5_qp_destroy(kinet_qp *qp);
int kinet_mlx5_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote);

/* Protection domains and memory regions of an mlx5 context (called by the
 * core's kinet_pd_alloc/free and kinet_mr_reg/dereg). */
int kinet_mlx5_pd_alloc(kinet_pd *pd);
void kinet_mlx5_pd_free(kinet_pd *pd);
int kinet_mlx5_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out);
int kinet_mlx5_mr_dereg(kinet_mr *mr);

/* ---- endpoint of an mlx5 RC QP: what the remote side needs for RTR ---- */
#define KINET_MLX5_EP_MAGIC 0x354d4e4bu /* "KNM5" */
#define KINET_MLX5_EP_VERSION 1u
struct kinet_mlx5_ep {
	uint32_t magic;   /* KINET_MLX5_EP_MAGIC */
	uint16_t version; /* KINET_MLX5_EP_VERSION */
	uint16_t lid;     /* InfiniBand: the port's LID */
	uint8_t gid[16];  /* RoCE: the GID (IB: the port GID, for routing) */
	uint32_t qpn;
	uint32_t psn;     /* the first PSN this QP sends */
	uint8_t mtu;      /* enum ibv_mtu of the port */
	uint8_t link_layer; /* 1 InfiniBand, 2 Ethernet (ibv values) */
	uint8_t port;
	uint8_t rsvd;
};
/* Fills the endpoint of an mlx5 QP; pass it as kinet_qp_remote.wire_addr
 * (wire_addr_len = sizeof) to connect a QP of another process. */
int kinet_mlx5_qp_endpoint(const kinet_qp *qp, struct kinet_mlx5_ep *ep);

/* ---- selection helpers (pure functions, unit tested) ---- */
enum { KINET_AF_ANY = 0, KINET_AF_IPV4 = 4, KINET_AF_IPV6 = 6 };
/* GID type values as rdma-core's enum ibv_gid_type. */
enum { KINET_GID_IB = 0, KINET_GID_ROCE_V1 = 1, KINET_GID_ROCE_V2 = 2 };
/* Index of the RoCE v2 GID to use for address family `family` in a GID
 * table (gids[i], types[i]), or -1: IPv4 takes an IPv4-mapped GID; IPv6 a
 * global address before a link-local one; ANY prefers IPv4. */
int kinet_mlx5_pick_gid(const uint8_t (*gids)[16], const uint32_t *types, int n, int family);
/* Address family named by a tunable value ("ipv4", "ipv6", "any"), -1 if unknown. */
int kinet_mlx5_family(const char *s);

/* ---- inventory (kinet-info) ---- */
struct kinet_nic_port {
	int port;
	int state;       /* enum ibv_port_state (4: active) */
	int link_layer;  /* 1 InfiniBand, 2 Ethernet */
	int active_mtu;  /* bytes */
	int gid_index;   /* the GID that would be used, -1 none */
	char gid[48];    /* printable */
	uint16_t lid;
};
struct kinet_nic_info {
	char name[64];
	char pci[32];    /* PCI address ("0000:17:00.0"), "" when unknown */
	int mlx5;        /* driven by the mlx5 provider */
	int usable;      /* the backend would take it */
	char why[160];   /* why not usable, or what would be used */
	int nports;
	struct kinet_nic_port port[4];
};
/* Lists the RDMA devices: number found (up to max), or a negative errno
 * with *why (no rdma-core ...). Uses the current function table. */
int kinet_mlx5_list_nics(struct kinet_nic_info *out, int max, char *why, size_t whylen);
/* Name of the function table in use ("rdma-core", the emulation), or NULL. */
const char *kinet_mlx5_ops_name(void);

#endif
