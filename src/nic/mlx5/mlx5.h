/* SPDX-License-Identifier: BSD-3-Clause */
/* The mlx5 hardware backend: entry points used by the core. */
#ifndef KINET_NIC_MLX5_H
#define KINET_NIC_MLX5_H
#include "internal.h"

/* 0 when a usable mlx5 device is present; else a negative errno and, in why,
 * the reason (no rdma-core, no device, ...). */
int kinet_mlx5_probe(const char *device, char *why, size_t whylen);
int kinet_mlx5_open(kinet_ctx *ctx, const char *device);
void kinet_mlx5_close(kinet_ctx *ctx);
int kinet_mlx5_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr, kinet_qp **out);
int kinet_mlx5_qp_destroy(kinet_qp *qp);
int kinet_mlx5_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote);
#endif
