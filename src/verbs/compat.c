/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat.c - symbols of rdma-core's libibverbs that the system's libraries
 * loaded with libkinet link against: libfabric pulls in librdmacm and the
 * efa provider (libefa), which bind every symbol at load (BIND_NOW), so
 * libibverbs.so.1 must define them. None of them has a meaning on a kinet
 * device: the kernel-ABI copies, ECE, and rdma-core's provider interface
 * (IBVERBS_PRIVATE_34: a provider registering itself is ignored, so only
 * kinet devices are listed). Each call is refused with a log line.
 */
#include <errno.h>
#include <stdarg.h>
#include "nic/mlx5/ops.h"
#include "core/driver.h"

#define KV_EXPORT __attribute__((visibility("default")))

static int refused(const char *verb)
{
	KLOG_ERR("kinet-verbs: %s is not supported (EOPNOTSUPP)", verb);
	return EOPNOTSUPP;
}

/* rdma-core's kernel-ABI converters (librdmacm) */
KV_EXPORT void ibv_copy_ah_attr_from_kern(void *dst, const void *src)
{
	(void)dst, (void)src;
	refused("ibv_copy_ah_attr_from_kern");
}

KV_EXPORT void ibv_copy_qp_attr_from_kern(void *dst, const void *src)
{
	(void)dst, (void)src;
	refused("ibv_copy_qp_attr_from_kern");
}

KV_EXPORT void ibv_copy_path_rec_from_kern(void *dst, const void *src)
{
	(void)dst, (void)src;
	refused("ibv_copy_path_rec_from_kern");
}

KV_EXPORT void ibv_copy_path_rec_to_kern(void *dst, const void *src)
{
	(void)dst, (void)src;
	refused("ibv_copy_path_rec_to_kern");
}

KV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return refused("ibv_set_ece");
}

KV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return refused("ibv_query_ece");
}

/* rdma-core's provider interface (IBVERBS_PRIVATE_34) */
KV_EXPORT void verbs_register_driver_34(const void *ops)
{
	(void)ops; /* kinet-verbs has no providers: only kinet devices exist */
}

KV_EXPORT void verbs_set_ops(void *vctx, const void *ops)
{
	(void)vctx, (void)ops;
	refused("verbs_set_ops");
}

KV_EXPORT void *_verbs_init_and_alloc_context(void *dev, int fd, size_t size, void *ctx_offset,
					      uint32_t driver_id)
{
	(void)dev, (void)fd, (void)size, (void)ctx_offset, (void)driver_id;
	errno = refused("_verbs_init_and_alloc_context");
	return NULL;
}

KV_EXPORT void verbs_uninit_context(void *vctx)
{
	(void)vctx;
	refused("verbs_uninit_context");
}

KV_EXPORT void __verbs_log(void *ctx, const char *fmt, ...)
{
	(void)ctx, (void)fmt;
}

/* ibv_cmd_*: the commands a provider sends to the kernel */
#define KV_CMD(name)                                                                           \
	KV_EXPORT int name(void)                                                               \
	{                                                                                      \
		return refused(#name);                                                         \
	}
KV_CMD(ibv_cmd_alloc_pd)
KV_CMD(ibv_cmd_create_ah)
KV_CMD(ibv_cmd_create_cq_ex)
KV_CMD(ibv_cmd_create_qp_ex)
KV_CMD(ibv_cmd_dealloc_pd)
KV_CMD(ibv_cmd_dereg_mr)
KV_CMD(ibv_cmd_destroy_ah)
KV_CMD(ibv_cmd_destroy_cq)
KV_CMD(ibv_cmd_destroy_qp)
KV_CMD(ibv_cmd_get_context)
KV_CMD(ibv_cmd_modify_qp)
KV_CMD(ibv_cmd_query_device_any)
KV_CMD(ibv_cmd_query_port)
KV_CMD(ibv_cmd_query_qp)
KV_CMD(ibv_cmd_reg_dmabuf_mr)
KV_CMD(ibv_cmd_reg_mr)
