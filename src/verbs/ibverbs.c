/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ibverbs.c - kinet-verbs' libibverbs.so.1: rdma-core's verbs ABI (its
 * soname, its symbol versions, its structs from the installed headers) over
 * the rdma-core double of emu.c, whose objects are software-NIC objects.
 *
 * The devices are kinet0.. over the host's Ethernet interfaces (host.c):
 * one RoCE v2 port each, GIDs from the interface's addresses. The context
 * is rdma-core's struct verbs_context (emu.c), so verbs.h's inline
 * functions reach kinet through its ops. A verb kinet-verbs does not offer
 * fails with EOPNOTSUPP (or NULL and errno EOPNOTSUPP) and a log line naming
 * it. docs/verbs.md says what is offered and what is refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* dladdr */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <string.h>
#include <unistd.h>
#include "nic/mlx5/ops.h"
#include "core/driver.h"
#include "verbs/host.h"
#include "verbs/emu.h"
#include "verbs/dmabuf.h"

/* verbs.h turns these into inline wrappers; here they are the symbols */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define KV_EXPORT __attribute__((visibility("default")))

static const struct kinet_mlx5_ops *the_ops;

static void ops_init(void)
{
	struct kinet_mlx5_emu_cfg c;
	kinet_mlx5_emu_get_cfg(&c);
	c.host = 1;
	c.gpu = 0;
	kinet_mlx5_emu_set_cfg(&c);
	the_ops = kinet_mlx5_emu_ops();
}

/* The double's table, set up for kinet-verbs (host devices) on first use;
 * libmlx5.so.1 reaches it here too. */
KV_EXPORT const struct kinet_mlx5_ops *kinet_verbs_ops(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, ops_init);
	return the_ops;
}

#define ops kinet_verbs_ops

/* libkinet_sysfs.so's question (src/verbs/sysfs.c): what
 * /sys/class/infiniband/kinet<dev>/ports/<port>/gid_attrs/types/<index>
 * would say. The RoCE version 1 or 2, 0 for an entry without a GID, -ENOENT
 * for no such file. */
KV_EXPORT int kinet_verbs_gid_version(unsigned dev, unsigned port, unsigned index)
{
	(void)ops();
	return kinet_mlx5_emu_gid_version(dev, port, index);
}

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

/* ---- devices ------------------------------------------------------------------------ */

/* Is this call made from within libfabric? The software NIC reaches QPs of
 * other processes over libfabric, whose verbs and efa providers look for
 * RDMA devices (through libibverbs.so.1, here kinet-verbs, directly or
 * through librdmacm) when libfabric starts, whatever FI_PROVIDER says: they
 * must find none, or kinet would run on itself (and wait on the context that
 * kinet holds while it starts libfabric). */
static bool called_from_libfabric(void)
{
	void *frames[48];
	int n = backtrace(frames, 48);
	for (int i = 1; i < n; i++) {
		Dl_info di;
		if (dladdr(frames[i], &di) && di.dli_fname && strstr(di.dli_fname, "libfabric.so"))
			return true;
	}
	return false;
}

KV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	if (called_from_libfabric()) {
		struct ibv_device **none = calloc(1, sizeof(*none));
		if (num)
			*num = 0;
		if (!none)
			errno = ENOMEM;
		return none;
	}
	int n = 0;
	struct ibv_device **l = ops()->get_device_list(&n);
	if (num)
		*num = l ? n : 0;
	return l;
}

KV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	if (list)
		ops()->free_device_list(list);
}

KV_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev ? dev->name : NULL;
}

KV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
	struct kinet_verbs_port p;
	if (!dev || kinet_mlx5_emu_dev_port(dev, &p))
		return 0;
	uint8_t g[8];
	kinet_verbs_eui64(p.mac, g);
	__be64 v;
	memcpy(&v, g, 8);
	return v;
}

KV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	return ops()->open_device(dev);
}

KV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	return ctx ? ops()->close_device(ctx) : EINVAL;
}

KV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	return ops()->query_device(ctx, attr);
}

/* The symbol behind verbs.h's fallback: rdma-core's older, shorter struct
 * (up to link_layer and one byte after it). */
KV_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			     struct _compat_ibv_port_attr *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	struct ibv_port_attr a;
	int rc = ops()->query_port(ctx, port, &a);
	if (rc)
		return rc;
	memcpy(attr, &a, offsetof(struct ibv_port_attr, flags) + 1);
	return 0;
}

KV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
	if (!ctx || !entry || flags || size < sizeof(*entry))
		return EINVAL;
	return ops()->query_gid_ex(ctx, port, index, entry);
}

KV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				       size_t max, uint32_t flags, size_t size)
{
	if (!ctx || !entries || flags || size < sizeof(*entries))
		return -EINVAL;
	struct ibv_device_attr da;
	int rc = ops()->query_device(ctx, &da);
	if (rc)
		return -rc;
	size_t n = 0;
	for (uint32_t p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		if ((rc = ops()->query_port(ctx, (uint8_t)p, &pa)))
			return -rc;
		for (int i = 0; i < pa.gid_tbl_len; i++) {
			struct ibv_gid_entry e;
			if (ops()->query_gid_ex(ctx, p, (uint32_t)i, &e))
				continue; /* an empty entry */
			if (n == max)
				return -EINVAL;
			memcpy((uint8_t *)entries + n * size, &e, sizeof(e));
			n++;
		}
	}
	return (ssize_t)n;
}

/* An empty entry of the table reads as the zero GID, as in rdma-core. */
KV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	if (!ctx || !gid || index < 0)
		return -1;
	struct ibv_gid_entry e;
	int rc = ops()->query_gid_ex(ctx, port, (uint32_t)index, &e);
	if (rc == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (rc) {
		errno = rc;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

/* rdma-core's private node (IBVERBS_PRIVATE_34), which its own utilities use;
 * the type as its sysfs names it (rdma-core's driver.h, not installed):
 * 0 "IB/RoCE v1", 1 "RoCE v2". */
enum { IBV_GID_TYPE_SYSFS_IB_ROCE_V1, IBV_GID_TYPE_SYSFS_ROCE_V2 };

KV_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
				 int *type)
{
	struct ibv_gid_entry e;
	int rc = ops()->query_gid_ex(ctx, port, index, &e);
	if (rc == ENODATA) {
		/* rdma-core: an empty entry has the type of its slot */
		*type = index % 2 ? IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (rc) {
		errno = rc;
		return -1;
	}
	*type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? IBV_GID_TYPE_SYSFS_ROCE_V2
						    : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

KV_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	if (!ctx || !pkey || port != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff); /* RoCE: the default partition only */
	return 0;
}

KV_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	if (!ctx || port != 1 || (be16toh(pkey) & 0x7fff) != 0x7fff)
		return -1;
	return 0;
}

/* sysfs files of a kinet device, answered as its sysfs would be; other
 * paths are read as rdma-core reads them. */
KV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	if (!dir || !file || !buf || !size)
		return -1;
	const char *kd = "/sys/class/infiniband/kinet";
	if (!strncmp(dir, kd, strlen(kd))) {
		const char *v = NULL;
		if (!strcmp(file, "board_id"))
			v = "KINET_SOFT_NIC";
		else if (!strcmp(file, "node_type"))
			v = "1: CA";
		else if (!strcmp(file, "hca_type"))
			v = "kinet";
		if (!v) {
			errno = ENOENT;
			return -1;
		}
		snprintf(buf, size, "%s", v);
		return (int)strlen(buf);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n <= 0)
		return -1;
	if ((size_t)n == size)
		n--;
	buf[n] = 0;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	return (int)n;
}

/* rdma-core's is const char *ibv_get_sysfs_path(void) (librdmacm calls it
 * so when libfabric probes its verbs provider) */
KV_EXPORT const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

KV_EXPORT int ibv_fork_init(void)
{
	return 0; /* software NIC memory needs no pinning against fork */
}

KV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

KV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

KV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

/* ---- asynchronous events: none are raised ---------------------------------------------- */

KV_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	(void)ctx, (void)ev;
	errno = refused("ibv_get_async_event");
	return -1;
}

KV_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

/* ---- PDs and memory ------------------------------------------------------------------- */

KV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	return ops()->alloc_pd(ctx);
}

KV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return pd ? ops()->dealloc_pd(pd) : EINVAL;
}

KV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	return ops()->reg_mr(pd, addr, len, access);
}

KV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len,
					  uint64_t iova, unsigned int access)
{
	if (iova != (uintptr_t)addr)
		return refused_null("ibv_reg_mr_iova2 with an iova other than the address");
	return ibv_reg_mr(pd, addr, len, (int)access);
}

KV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len,
					 uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, len, iova, (unsigned)access);
}

/* A dma-buf of GPU memory that CUDA exported, registered at the CUDA
 * address it came from (the iova: perftest and NCCL pass it), as ibv_reg_mr
 * registers a CUDA pointer; anything else is refused as rdma-core's kernel
 * refuses it (EBADF, EINVAL), or EOPNOTSUPP where the software NIC cannot
 * reach the memory (dmabuf.c). fd stays the program's: kinet reaches the
 * memory by its address and keeps no descriptor. */
KV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
					   uint64_t iova, int fd, int access)
{
	/* the access flags the kernel takes for a dma-buf MR; the optional
	 * ones are hints, as in ibv_reg_mr */
	const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			       IBV_ACCESS_OPTIONAL_RANGE;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t pmask = page > 0 ? (uint64_t)page - 1 : 4095;
	if (!pd || (offset & pmask) != (iova & pmask) || ((unsigned)access & ~known)) {
		KLOG_ERR("kinet-verbs: ibv_reg_dmabuf_mr: %s (EINVAL)",
			 !pd ? "no PD"
			 : ((unsigned)access & ~known)
				 ? "access flags beyond local/remote write, remote read and atomic"
				 : "offset and iova differ within a page");
		errno = EINVAL;
		return NULL;
	}
	struct kv_dmabuf d;
	int rc = kv_dmabuf_probe(fd, &d);
	if (!rc) {
		const struct kinet_cuda_ops *cu = kinet_cuda_load();
		rc = kv_dmabuf_check(&d, fd, offset, len, iova, cu,
				     "no usable CUDA driver or GPU, or KINET_NO_CUDA=1");
	}
	if (rc) {
		errno = -rc;
		return NULL;
	}
	/* the software NIC's registration of CUDA memory (staged through CUDA
	 * copies, KINET_ALLOW_HOST_STAGING); no peer-memory module is needed
	 * for a dma-buf, and kinet-verbs' double asks for none */
	struct ibv_mr *mr = ops()->reg_mr(pd, (void *)(uintptr_t)iova, len,
					  access & ~IBV_ACCESS_OPTIONAL_RANGE);
	if (!mr)
		return NULL;
	mr->addr = (void *)(uintptr_t)offset; /* what rdma-core reports for a dma-buf MR */
	mr->length = len;
	return mr;
}

KV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t len, int access)
{
	/* rdma-core's return convention: a negative enum ibv_rereg_mr_err_code
	 * and errno; bad input is IBV_REREG_MR_ERR_INPUT (EINVAL), and the
	 * refusal the command's failure (IBV_REREG_MR_ERR_CMD, EOPNOTSUPP) */
	(void)pd;
	if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!len || !addr)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		KLOG_ERR("kinet-verbs: ibv_rereg_mr: bad arguments (flags 0x%x, access 0x%x) "
			 "(EINVAL)",
			 (unsigned)flags, (unsigned)access);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	errno = refused("ibv_rereg_mr");
	return IBV_REREG_MR_ERR_CMD;
}

/* Sharing objects between processes through the kernel's command fd:
 * kinet devices have no such fd, so nothing can be imported (rdma-core's
 * own answer on a device whose driver cannot, EOPNOTSUPP). */
KV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	return refused_null("ibv_import_device");
}

KV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	(void)ctx, (void)pd_handle;
	return refused_null("ibv_import_pd");
}

KV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
	(void)refused("ibv_unimport_pd");
}

KV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd, (void)mr_handle;
	return refused_null("ibv_import_mr");
}

KV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
	(void)refused("ibv_unimport_mr");
}

KV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	(void)ctx, (void)dm_handle;
	return refused_null("ibv_import_dm");
}

KV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
	(void)refused("ibv_unimport_dm");
}

KV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return mr ? ops()->dereg_mr(mr) : EINVAL;
}

/* ---- CQs and completion channels ----------------------------------------------------- */

KV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	return emu_chan_create(ctx);
}

KV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	return ch ? emu_chan_destroy(ch) : EINVAL;
}

KV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *ch, int vector)
{
	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	return ops()->create_cq(ctx, cqe, cq_context, ch, vector);
}

KV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq, (void)cqe;
	return refused("ibv_resize_cq");
}

KV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	return cq ? ops()->destroy_cq(cq) : EINVAL;
}

KV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	if (!ch || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	return emu_get_cq_event(ch, cq, cq_context);
}

KV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n)
{
	if (cq)
		emu_ack_cq_events(cq, n);
}

/* ---- QPs ------------------------------------------------------------------------------ */

KV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->qp_type != IBV_QPT_RC)
		return refused_null("ibv_create_qp of a type other than RC");
	return ops()->create_qp(pd, attr);
}

KV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	return qp && attr ? ops()->modify_qp(qp, attr, mask) : EINVAL;
}

/* Whether an RDMA write's data lands in order: 0 (not promised), as
 * rdma-core answers for a provider that does not say; a reader polls the
 * completion before looking at the data. */
KV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					 uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}

KV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init)
{
	if (!qp || !attr || !init)
		return EINVAL;
	return emu_query_qp(qp, attr, mask, init);
}

KV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	return qp ? ops()->destroy_qp(qp) : EINVAL;
}

/* As rdma-core's: the extended QP of one created by ibv_create_qp_ex with
 * send_ops_flags, NULL for any other (errno EOPNOTSUPP and a log line). */
KV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	if (!qp) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp_ex *x = emu_qp_to_qp_ex(qp);
	if (!x)
		return refused_null("ibv_qp_to_qp_ex of a QP not created by ibv_create_qp_ex "
				    "with send_ops_flags");
	return x;
}

/* ---- shared receive queues (srq.c) ------------------------------------------------------ */

KV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	if (!pd || !a) {
		errno = EINVAL;
		return NULL;
	}
	if (!ops()->create_srq)
		return refused_null("ibv_create_srq");
	return ops()->create_srq(pd, a);
}

KV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
	if (!srq || !a)
		return EINVAL;
	if (!ops()->modify_srq)
		return refused("ibv_modify_srq");
	return ops()->modify_srq(srq, a, mask);
}

KV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
	if (!srq || !a)
		return EINVAL;
	if (!ops()->query_srq)
		return refused("ibv_query_srq");
	return ops()->query_srq(srq, a);
}

KV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	if (!srq)
		return EINVAL;
	if (!ops()->destroy_srq)
		return refused("ibv_destroy_srq");
	return ops()->destroy_srq(srq);
}

/* ---- address handles (emu.c); refused: multicast ------------------------------------------ */

KV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	if (!pd || !a) {
		errno = EINVAL;
		return NULL;
	}
	if (!ops()->create_ah)
		return refused_null("ibv_create_ah");
	return ops()->create_ah(pd, a);
}

KV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
				  struct ibv_grh *grh, struct ibv_ah_attr *a)
{
	(void)ctx, (void)port, (void)wc, (void)grh, (void)a;
	return refused("ibv_init_ah_from_wc");
}

KV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port)
{
	(void)pd, (void)wc, (void)grh, (void)port;
	return refused_null("ibv_create_ah_from_wc");
}

KV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	if (!ah)
		return EINVAL;
	if (!ops()->destroy_ah)
		return refused("ibv_destroy_ah");
	return ops()->destroy_ah(ah);
}

KV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return refused("ibv_attach_mcast");
}

KV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return refused("ibv_detach_mcast");
}

/* ---- strings and rates ------------------------------------------------------------------ */

KV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {"CA", "switch", "router", "iWARP NIC", "usNIC",
					"usNIC UDP", "unspecified"};
	return t >= IBV_NODE_CA && t <= IBV_NODE_UNSPECIFIED ? s[t - IBV_NODE_CA] : "unknown";
}

KV_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	static const char *const n[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					"PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "unknown";
}

KV_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const n[] = {
		"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
		"local access violation work queue error", "communication established",
		"send queue drained", "path migrated", "path migration request error",
		"local catastrophic error", "port active", "port error", "LID change",
		"P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
		"last WQE reached", "client reregistration", "GID table change", "WQ fatal"};
	return (unsigned)e < sizeof(n) / sizeof(n[0]) ? n[e] : "unknown";
}

KV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const n[] = {
		"success", "local length error", "local QP operation error",
		"local EE context operation error", "local protection error", "Work Request Flushed Error",
		"memory management operation error", "bad response error", "local access error",
		"remote invalid request error", "remote access error", "remote operation error",
		"transport retry counter exceeded", "RNR retry counter exceeded",
		"local RDD violation error", "remote invalid RD request", "aborted error",
		"invalid EE context number", "invalid EE context state", "fatal error",
		"response timeout error", "general error", "TM error", "TM rendezvous incomplete"};
	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "unknown";
}

KV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	switch (rate) {
	case IBV_RATE_2_5_GBPS: return 1;
	case IBV_RATE_5_GBPS: return 2;
	case IBV_RATE_10_GBPS: return 4;
	case IBV_RATE_20_GBPS: return 8;
	case IBV_RATE_30_GBPS: return 12;
	case IBV_RATE_40_GBPS: return 16;
	case IBV_RATE_60_GBPS: return 24;
	case IBV_RATE_80_GBPS: return 32;
	case IBV_RATE_120_GBPS: return 48;
	default: return -1;
	}
}

KV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_120_GBPS; r++)
		if (ibv_rate_to_mult((enum ibv_rate)r) == mult)
			return (enum ibv_rate)r;
	return IBV_RATE_MAX;
}

static const struct {
	enum ibv_rate r;
	int mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 2500},   {IBV_RATE_5_GBPS, 5000},     {IBV_RATE_10_GBPS, 10000},
	{IBV_RATE_14_GBPS, 14062},   {IBV_RATE_20_GBPS, 20000},   {IBV_RATE_25_GBPS, 25781},
	{IBV_RATE_30_GBPS, 30000},   {IBV_RATE_40_GBPS, 40000},   {IBV_RATE_50_GBPS, 53125},
	{IBV_RATE_56_GBPS, 56250},   {IBV_RATE_60_GBPS, 60000},   {IBV_RATE_80_GBPS, 80000},
	{IBV_RATE_100_GBPS, 103125}, {IBV_RATE_112_GBPS, 112500}, {IBV_RATE_120_GBPS, 120000},
	{IBV_RATE_168_GBPS, 168750}, {IBV_RATE_200_GBPS, 206250}, {IBV_RATE_300_GBPS, 309375},
	{IBV_RATE_400_GBPS, 412500}, {IBV_RATE_600_GBPS, 618750},
};

KV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].r == rate)
			return rates[i].mbps;
	return -1;
}

KV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
		if (rates[i].mbps == mbps)
			return rates[i].r;
	return IBV_RATE_MAX;
}

KV_EXPORT int ibv_get_device_index(struct ibv_device *dev)
{
	struct kinet_verbs_port p;
	if (!dev || kinet_mlx5_emu_dev_port(dev, &p))
		return -1;
	return atoi(dev->name + strlen("kinet"));
}
