/* SPDX-License-Identifier: BSD-3-Clause */
/* The mlx5 hardware backend: entry points used by the core. */
#ifndef KINET_NIC_MLX5_H
#define KINET_NIC_MLX5_H
#include "core/driver.h"
#include "gpu/gpu.h"

/* 0 when a usable mlx5 device is present; else a negative errno and, in why,
 * the reason (no rdma-core, no device, ...). On success `why` describes the
 * device that would be used. (The backend's probe; kinet-info asks too.) */
int kinet_mlx5_probe(const char *device, char *why, size_t whylen);

/* ---- what a peer needs to connect to an mlx5 RC QP (RTR) ----
 * Carried in the QP descriptor (kinet/net.h, transport "mlx5") as
 * KINET_MLX5_EP_BYTES bytes, big-endian: lid u16 | gid[16] | qpn u32 |
 * psn u32 | mtu u8 | link_layer u8 | port u8. */
#define KINET_MLX5_TRANSPORT "mlx5"
#define KINET_MLX5_EP_BYTES 29u
struct kinet_mlx5_ep {
	uint16_t lid;       /* InfiniBand: the port's LID */
	uint8_t gid[16];    /* RoCE: the GID (IB: the port GID, for routing) */
	uint32_t qpn;
	uint32_t psn;       /* the first PSN this QP sends */
	uint8_t mtu;        /* enum ibv_mtu of the port */
	uint8_t link_layer; /* 1 InfiniBand, 2 Ethernet (ibv values) */
	uint8_t port;
};
/* The endpoint of an mlx5 QP: 0 or -EINVAL (not an mlx5 QP). */
int kinet_mlx5_qp_endpoint(const kinet_qp *qp, struct kinet_mlx5_ep *ep);
/* Serialised form (the descriptor's address) and back: 0, or -EPROTO. */
void kinet_mlx5_ep_encode(const struct kinet_mlx5_ep *ep, uint8_t out[KINET_MLX5_EP_BYTES]);
int kinet_mlx5_ep_decode(const uint8_t *in, size_t len, struct kinet_mlx5_ep *ep);

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
