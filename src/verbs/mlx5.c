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

/* Refused, but defined: perftest binds them at load (and uses them only
 * when asked for mlx5 QPs, signature or crypto offloads). */
static int refused(const char *verb)
{
	KLOG_ERR("kinet-verbs: %s is not supported (EOPNOTSUPP)", verb);
	return EOPNOTSUPP;
}

static void *refused_null(const char *verb)
{
	errno = refused(verb);
	return NULL;
}

KV_EXPORT struct ibv_qp *mlx5dv_create_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
					  struct mlx5dv_qp_init_attr *ma)
{
	(void)ctx, (void)a, (void)ma;
	return refused_null("mlx5dv_create_qp");
}

KV_EXPORT struct mlx5dv_mkey *mlx5dv_create_mkey(struct mlx5dv_mkey_init_attr *a)
{
	(void)a;
	return refused_null("mlx5dv_create_mkey");
}

KV_EXPORT int mlx5dv_destroy_mkey(struct mlx5dv_mkey *m)
{
	(void)m;
	return refused("mlx5dv_destroy_mkey");
}

KV_EXPORT struct mlx5dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *q)
{
	(void)q;
	return refused_null("mlx5dv_qp_ex_from_ibv_qp_ex");
}

KV_EXPORT int mlx5dv_crypto_login(struct ibv_context *ctx, struct mlx5dv_crypto_login_attr *a)
{
	(void)ctx, (void)a;
	return refused("mlx5dv_crypto_login");
}

KV_EXPORT struct mlx5dv_dek *mlx5dv_dek_create(struct ibv_context *ctx,
					       struct mlx5dv_dek_init_attr *a)
{
	(void)ctx, (void)a;
	return refused_null("mlx5dv_dek_create");
}

KV_EXPORT int mlx5dv_dek_destroy(struct mlx5dv_dek *d)
{
	(void)d;
	return refused("mlx5dv_dek_destroy");
}
