/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlx5.c - kinet-verbs' libmlx5.so.1: rdma-core's direct verbs (mlx5dv) for
 * kinet devices, through the double's table that libibverbs.so.1 holds
 * (kinet_verbs_ops). What is offered so far: the device query, opening a
 * device (DevX too), mlx5dv_init_obj (the software NIC's own queues,
 * doorbell records and registers), DevX general commands (QUERY_HCA_CAP),
 * and DevX objects: umem registration, UARs, CREATE_CQ, CREATE_QP (RC) and
 * its state changes, QUERY_QP, whose queues the program writes and the
 * software NIC executes from its umem. docs/verbs.md.
 */
#include <errno.h>
#include <string.h>
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

/* ---- DevX objects ---- */

/* rdma-core returns these with errno set; a NULL handle is EINVAL here
 * (rdma-core would crash on it). */
static void *bad_null(const char *verb)
{
	KLOG_ERR("kinet-verbs: %s: a NULL argument (EINVAL)", verb);
	errno = EINVAL;
	return NULL;
}

KV_EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg(struct ibv_context *ctx, void *addr,
							size_t size, uint32_t access)
{
	if (!ctx)
		return bad_null("mlx5dv_devx_umem_reg");
	return kinet_verbs_ops()->devx_umem_reg(ctx, addr, size, access);
}

KV_EXPORT struct mlx5dv_devx_umem *mlx5dv_devx_umem_reg_ex(struct ibv_context *ctx,
							   struct mlx5dv_devx_umem_in *in)
{
	if (!ctx || !in)
		return bad_null("mlx5dv_devx_umem_reg_ex");
	return kinet_verbs_ops()->devx_umem_reg_ex(ctx, in);
}

KV_EXPORT int mlx5dv_devx_umem_dereg(struct mlx5dv_devx_umem *umem)
{
	if (!umem) {
		bad_null("mlx5dv_devx_umem_dereg");
		return EINVAL;
	}
	return kinet_verbs_ops()->devx_umem_dereg(umem);
}

KV_EXPORT struct mlx5dv_devx_uar *mlx5dv_devx_alloc_uar(struct ibv_context *ctx, uint32_t flags)
{
	if (!ctx)
		return bad_null("mlx5dv_devx_alloc_uar");
	return kinet_verbs_ops()->devx_alloc_uar(ctx, flags);
}

KV_EXPORT void mlx5dv_devx_free_uar(struct mlx5dv_devx_uar *uar)
{
	if (uar)
		kinet_verbs_ops()->devx_free_uar(uar);
}

KV_EXPORT int mlx5dv_devx_query_eqn(struct ibv_context *ctx, uint32_t vector, uint32_t *eqn)
{
	if (!ctx || !eqn)
		return EINVAL;
	int rc = kinet_verbs_ops()->devx_query_eqn(ctx, vector, eqn);
	if (rc)
		KLOG_ERR("kinet-verbs: mlx5dv_devx_query_eqn: vector %u: %s (a DevX context has "
			 "one completion vector, 0)", vector, strerror(rc));
	return rc;
}

KV_EXPORT struct mlx5dv_devx_obj *mlx5dv_devx_obj_create(struct ibv_context *ctx, const void *in,
							 size_t inlen, void *out, size_t outlen)
{
	if (!ctx || !in || !out)
		return bad_null("mlx5dv_devx_obj_create");
	return kinet_verbs_ops()->devx_obj_create(ctx, in, inlen, out, outlen);
}

KV_EXPORT int mlx5dv_devx_obj_modify(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				     void *out, size_t outlen)
{
	return kinet_verbs_ops()->devx_obj_modify(obj, in, inlen, out, outlen);
}

KV_EXPORT int mlx5dv_devx_obj_query(struct mlx5dv_devx_obj *obj, const void *in, size_t inlen,
				    void *out, size_t outlen)
{
	return kinet_verbs_ops()->devx_obj_query(obj, in, inlen, out, outlen);
}

KV_EXPORT int mlx5dv_devx_obj_destroy(struct mlx5dv_devx_obj *obj)
{
	return kinet_verbs_ops()->devx_obj_destroy(obj);
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
