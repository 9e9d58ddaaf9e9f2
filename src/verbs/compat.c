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
#include <stdbool.h>
#include <stddef.h>
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

/* The rest of rdma-core's private node: no system library loaded beside
 * kinet-verbs calls them on a kinet device, but a provider built against a
 * later rdma-core (libefa of the GPU machines' distribution) links them, and
 * BIND_NOW makes a missing one fail the program at load. */
KV_CMD(__ioctl_final_num_attrs)
KV_CMD(execute_ioctl)
KV_CMD(ibv_cmd_advise_mr)
KV_CMD(ibv_cmd_alloc_dm)
KV_CMD(ibv_cmd_alloc_mw)
KV_CMD(ibv_cmd_attach_mcast)
KV_CMD(ibv_cmd_close_xrcd)
KV_CMD(ibv_cmd_create_counters)
KV_CMD(ibv_cmd_create_cq)
KV_CMD(ibv_cmd_create_flow)
KV_CMD(ibv_cmd_create_flow_action_esp)
KV_CMD(ibv_cmd_create_qp)
KV_CMD(ibv_cmd_create_qp_ex2)
KV_CMD(ibv_cmd_create_rwq_ind_table)
KV_CMD(ibv_cmd_create_srq)
KV_CMD(ibv_cmd_create_srq_ex)
KV_CMD(ibv_cmd_create_wq)
KV_CMD(ibv_cmd_dealloc_mw)
KV_CMD(ibv_cmd_destroy_counters)
KV_CMD(ibv_cmd_destroy_flow)
KV_CMD(ibv_cmd_destroy_flow_action)
KV_CMD(ibv_cmd_destroy_rwq_ind_table)
KV_CMD(ibv_cmd_destroy_srq)
KV_CMD(ibv_cmd_destroy_wq)
KV_CMD(ibv_cmd_detach_mcast)
KV_CMD(ibv_cmd_free_dm)
KV_CMD(ibv_cmd_modify_cq)
KV_CMD(ibv_cmd_modify_flow_action_esp)
KV_CMD(ibv_cmd_modify_qp_ex)
KV_CMD(ibv_cmd_modify_srq)
KV_CMD(ibv_cmd_modify_wq)
KV_CMD(ibv_cmd_open_qp)
KV_CMD(ibv_cmd_open_xrcd)
KV_CMD(ibv_cmd_poll_cq)
KV_CMD(ibv_cmd_post_recv)
KV_CMD(ibv_cmd_post_send)
KV_CMD(ibv_cmd_post_srq_recv)
KV_CMD(ibv_cmd_query_context)
KV_CMD(ibv_cmd_query_device)
KV_CMD(ibv_cmd_query_device_ex)
KV_CMD(ibv_cmd_query_mr)
KV_CMD(ibv_cmd_query_srq)
KV_CMD(ibv_cmd_read_counters)
KV_CMD(ibv_cmd_reg_dm_mr)
KV_CMD(ibv_cmd_req_notify_cq)
KV_CMD(ibv_cmd_rereg_mr)
KV_CMD(ibv_cmd_resize_cq)

KV_EXPORT bool verbs_allow_disassociate_destroy;

KV_EXPORT void *verbs_open_device(void *ibdev, void *private_data)
{
	(void)ibdev, (void)private_data;
	errno = refused("verbs_open_device");
	return NULL;
}

KV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev,
					const char *fnfmt, ...)
{
	(void)buf, (void)size, (void)sysfs_dev, (void)fnfmt;
	errno = refused("ibv_read_ibdev_sysfs_file");
	return -1;
}

KV_EXPORT void verbs_init_cq(void *cq, void *ctx, void *channel, void *cq_context)
{
	(void)cq, (void)ctx, (void)channel, (void)cq_context;
	refused("verbs_init_cq");
}

KV_EXPORT void ibv_get_fw_ver(char *value, size_t len, void *sysfs_dev)
{
	(void)sysfs_dev;
	if (value && len)
		value[0] = 0;
	refused("ibv_get_fw_ver");
}
