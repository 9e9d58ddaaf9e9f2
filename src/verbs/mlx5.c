/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlx5.c - kinet-verbs' libmlx5.so.1: rdma-core's direct verbs (mlx5dv) for
 * kinet devices, through the double's table that libibverbs.so.1 holds
 * (kinet_verbs_ops). What is offered so far: the device query, opening a
 * device (DevX too), mlx5dv_init_obj (the software NIC's own queues,
 * doorbell records and registers) and DevX general commands
 * (QUERY_HCA_CAP, vport and GID queries). docs/verbs.md.
 */
#include <errno.h>
#include "nic/mlx5/ops.h"
#include "core/driver.h"

#define KV_EXPORT __attribute__((visibility("default")))

const struct kinet_mlx5_ops *kinet_verbs_ops(void);

KV_EXPORT bool mlx5dv_is_supported(struct ibv_device *dev)
{
	return dev && kinet_verbs_ops()->mlx5dv_is_supported(dev);
}

KV_EXPORT struct ibv_context *mlx5dv_open_device(struct ibv_device *dev,
						 struct mlx5dv_context_attr *attr)
{
	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	return kinet_verbs_ops()->mlx5dv_open_device(dev, attr);
}

KV_EXPORT int mlx5dv_query_device(struct ibv_context *ctx, struct mlx5dv_context *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	return kinet_verbs_ops()->mlx5dv_query_device(ctx, attr);
}

KV_EXPORT int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t types)
{
	if (!obj)
		return EINVAL;
	return kinet_verbs_ops()->mlx5dv_init_obj(obj, types);
}

KV_EXPORT int mlx5dv_devx_general_cmd(struct ibv_context *ctx, const void *in, size_t inlen,
				      void *out, size_t outlen)
{
	if (!ctx || !in || !out)
		return EINVAL;
	return kinet_verbs_ops()->devx_general_cmd(ctx, in, inlen, out, outlen);
}
