/* SPDX-License-Identifier: BSD-3-Clause */
/* rdma-core loaded at run time: the real function table (see ops.h). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nic/mlx5/ops.h"
#include "gpu/cudrv.h"

#if KINET_HAVE_RDMA_HEADERS

static struct kinet_mlx5_ops real = {.name = "rdma-core"};
static char real_why[200];
static bool real_ok;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static const struct kinet_mlx5_ops *_Atomic installed;

/* exported symbols behind rdma-core's static inline wrappers */
static int (*sym_compat_query_port)(struct ibv_context *, uint8_t, void *);
static int (*sym_query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
static int (*sym_query_gid_ex)(struct ibv_context *, uint32_t, uint32_t, struct ibv_gid_entry *,
			       uint32_t, size_t);

/* ibv_query_port is a macro around an inline that calls the provider
 * through the extended context, falling back to the exported compat
 * symbol; the same here, with the symbol from dlsym. */
static int real_query_port(struct ibv_context *ib, uint8_t port, struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ib, query_port);
	if (vctx)
		return vctx->query_port(ib, port, attr, sizeof(*attr));
	memset(attr, 0, sizeof(*attr));
	return sym_compat_query_port(ib, port, attr);
}

/* GID type from sysfs, for rdma-core older than 1.11 (no _ibv_query_gid_ex). */
static int sysfs_gid_type(struct ibv_context *ib, uint32_t port, uint32_t index)
{
	char path[512], buf[64] = "";
	snprintf(path, sizeof(path), "%s/ports/%u/gid_attrs/types/%u", ib->device->ibdev_path,
		 port, index);
	FILE *f = fopen(path, "r");
	if (!f)
		return IBV_GID_TYPE_IB;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	if (strstr(buf, "v2"))
		return IBV_GID_TYPE_ROCE_V2;
	if (strstr(buf, "RoCE"))
		return IBV_GID_TYPE_ROCE_V1;
	return IBV_GID_TYPE_IB;
}

static int real_query_gid_ex(struct ibv_context *ib, uint32_t port, uint32_t index,
			     struct ibv_gid_entry *e)
{
	if (sym_query_gid_ex)
		return sym_query_gid_ex(ib, port, index, e, 0, sizeof(*e));
	memset(e, 0, sizeof(*e));
	int rc = sym_query_gid(ib, (uint8_t)port, (int)index, &e->gid);
	if (rc)
		return rc;
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = (uint32_t)sysfs_gid_type(ib, port, index);
	return 0;
}

/* ibv_create_cq_ex is an inline that calls the provider through the
 * extended context; the same here. */
static struct ibv_cq *real_create_cq_oi(struct ibv_context *ib, int cqe)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ib, create_cq_ex);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_cq_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	a.cqe = (uint32_t)cqe;
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	struct ibv_cq_ex *cq = vctx->create_cq_ex(ib, &a);
	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

/* The raw Ethernet verbs are inlines over the context's ops: the same here. */
static struct ibv_wq *real_create_wq(struct ibv_context *ib, struct ibv_wq_init_attr *a)
{
	return ibv_create_wq(ib, a);
}
static int real_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	return ibv_modify_wq(wq, a);
}
static int real_destroy_wq(struct ibv_wq *wq)
{
	return ibv_destroy_wq(wq);
}
static struct ibv_rwq_ind_table *real_create_ind(struct ibv_context *ib,
						 struct ibv_rwq_ind_table_init_attr *a)
{
	return ibv_create_rwq_ind_table(ib, a);
}
static int real_destroy_ind(struct ibv_rwq_ind_table *t)
{
	return ibv_destroy_rwq_ind_table(t);
}
static struct ibv_qp *real_create_qp_ex(struct ibv_context *ib, struct ibv_qp_init_attr_ex *a)
{
	/* (not the inline: for a plain PD mask it calls ibv_create_qp by symbol) */
	struct verbs_context *vctx = verbs_get_ctx_op(ib, create_qp_ex);
	if (!vctx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return vctx->create_qp_ex(ib, a);
}
static struct ibv_flow *real_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	return ibv_create_flow(qp, a);
}
static int real_destroy_flow(struct ibv_flow *f)
{
	return ibv_destroy_flow(f);
}

static int real_dmabuf_supported(void)
{
	int n = kinet_cudrv_gpu_count();
	for (int i = 0; i < n; i++) {
		struct kinet_gpu_info g;
		if (kinet_cudrv_gpu_info(i, &g) == 0 && g.dmabuf)
			return 1;
	}
	return 0;
}

/* DevX queue memory on the GPU the CUDA module uses (GPU 0 otherwise). */
static int real_gpu_alloc(size_t len, void **p)
{
	return kinet_cudrv_alloc(0, len, p);
}

static int real_mem_kind(const void *p)
{
	const struct kinet_cuda_ops *cu = kinet_cuda_load();
	if (cu && cu->pointer_kind) {
		int k = cu->pointer_kind(p);
		if (k >= 0)
			return k;
	}
	return kinet_cudrv_mem_kind(p);
}

#define NEED(h, field, name)                                                              \
	do {                                                                              \
		*(void **)&real.field = dlsym(h, name);                                   \
		if (!real.field) {                                                        \
			snprintf(real_why, sizeof(real_why), "rdma-core lacks %s", name); \
			return;                                                           \
		}                                                                         \
	} while (0)
#define MAY(h, field, name) (*(void **)&real.field = dlsym(h, name))

static void real_load(void)
{
	void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!v) {
		snprintf(real_why, sizeof(real_why), "rdma-core not installed (libibverbs.so.1: %s)",
			 dlerror());
		return;
	}
	void *m = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!m) {
		snprintf(real_why, sizeof(real_why),
			 "rdma-core's mlx5 provider not installed (libmlx5.so.1: %s)", dlerror());
		dlclose(v);
		return;
	}
	NEED(v, get_device_list, "ibv_get_device_list");
	NEED(v, free_device_list, "ibv_free_device_list");
	NEED(v, get_device_name, "ibv_get_device_name");
	NEED(v, open_device, "ibv_open_device");
	NEED(v, close_device, "ibv_close_device");
	NEED(v, query_device, "ibv_query_device");
	NEED(v, alloc_pd, "ibv_alloc_pd");
	NEED(v, dealloc_pd, "ibv_dealloc_pd");
	NEED(v, reg_mr, "ibv_reg_mr");
	MAY(v, reg_dmabuf_mr, "ibv_reg_dmabuf_mr"); /* rdma-core 34+ */
	NEED(v, dereg_mr, "ibv_dereg_mr");
	NEED(v, create_cq, "ibv_create_cq");
	NEED(v, destroy_cq, "ibv_destroy_cq");
	real.create_cq_oi = real_create_cq_oi;
	NEED(v, create_qp, "ibv_create_qp");
	NEED(v, modify_qp, "ibv_modify_qp");
	NEED(v, destroy_qp, "ibv_destroy_qp");
	MAY(v, resolve_eth_l2_from_gid, "ibv_resolve_eth_l2_from_gid");
	*(void **)&sym_compat_query_port = dlsym(v, "ibv_query_port");
	*(void **)&sym_query_gid = dlsym(v, "ibv_query_gid");
	*(void **)&sym_query_gid_ex = dlsym(v, "_ibv_query_gid_ex");
	if (!sym_compat_query_port || !sym_query_gid) {
		snprintf(real_why, sizeof(real_why), "rdma-core lacks ibv_query_port/ibv_query_gid");
		return;
	}
	real.query_port = real_query_port;
	real.query_gid_ex = real_query_gid_ex;
	real.create_wq = real_create_wq;
	real.modify_wq = real_modify_wq;
	real.destroy_wq = real_destroy_wq;
	real.create_rwq_ind_table = real_create_ind;
	real.destroy_rwq_ind_table = real_destroy_ind;
	real.create_qp_ex = real_create_qp_ex;
	real.create_flow = real_create_flow;
	real.destroy_flow = real_destroy_flow;
	NEED(m, mlx5dv_init_obj, "mlx5dv_init_obj");
	MAY(m, mlx5dv_create_wq, "mlx5dv_create_wq");
	MAY(m, mlx5dv_create_qp, "mlx5dv_create_qp");
	MAY(m, mlx5dv_query_device, "mlx5dv_query_device");
	MAY(m, mlx5dv_is_supported, "mlx5dv_is_supported");
	MAY(m, mlx5dv_open_device, "mlx5dv_open_device");
	MAY(m, devx_umem_reg, "mlx5dv_devx_umem_reg");
	MAY(m, devx_umem_reg_ex, "mlx5dv_devx_umem_reg_ex");
	MAY(m, devx_umem_dereg, "mlx5dv_devx_umem_dereg");
	MAY(m, devx_alloc_uar, "mlx5dv_devx_alloc_uar");
	MAY(m, devx_free_uar, "mlx5dv_devx_free_uar");
	MAY(m, devx_obj_create, "mlx5dv_devx_obj_create");
	MAY(m, devx_obj_modify, "mlx5dv_devx_obj_modify");
	MAY(m, devx_obj_destroy, "mlx5dv_devx_obj_destroy");
	MAY(m, devx_obj_query, "mlx5dv_devx_obj_query");
	MAY(m, devx_query_eqn, "mlx5dv_devx_query_eqn");
	MAY(m, devx_general_cmd, "mlx5dv_devx_general_cmd");
	real.gpu_count = kinet_cudrv_gpu_count;
	real.dmabuf_supported = real_dmabuf_supported;
	real.mem_kind = real_mem_kind;
	real.dmabuf_fd = kinet_cudrv_dmabuf_fd;
	real.gpu_map = kinet_cudrv_map;
	real.gpu_unmap = kinet_cudrv_unmap;
	real.peermem_loaded = kinet_peermem_loaded;
	real.gpu_alloc = real_gpu_alloc;
	real.gpu_free = kinet_cudrv_free;
	real.gpu_memset = kinet_cudrv_memset;
	real.gpu_read = kinet_cudrv_read;
	real.gpu_write = kinet_cudrv_write;
	real_ok = true; /* the libraries stay loaded for the process */
}

const struct kinet_mlx5_ops *kinet_mlx5_real_ops(char *why, size_t whylen)
{
	pthread_once(&real_once, real_load);
	if (!real_ok) {
		if (why && whylen)
			snprintf(why, whylen, "%s", real_why);
		return NULL;
	}
	return &real;
}

void kinet_mlx5_set_ops(const struct kinet_mlx5_ops *ops)
{
	atomic_store(&installed, ops);
}

/* The emulation lives in its own module (KINET_MLX5EMU_MODULE, beside this
 * library), loaded on first use; a test that links it installs its table
 * with kinet_mlx5_set_ops instead. */
static const struct kinet_mlx5_ops *emu;
static char emu_why[300];
static pthread_once_t emu_once = PTHREAD_ONCE_INIT;

static void emu_load(void)
{
	void *h = kinet_module_open(KINET_MLX5EMU_MODULE, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(emu_why, sizeof(emu_why),
			 "KINET_MLX5_EMULATE=1 but the emulation module cannot be loaded (%s)",
			 dlerror());
		return;
	}
	const struct kinet_mlx5_ops *(*get)(void) =
		(const struct kinet_mlx5_ops *(*)(void))dlsym(h, "kinet_mlx5_emu_ops");
	if (!get) {
		snprintf(emu_why, sizeof(emu_why), "%s has no kinet_mlx5_emu_ops",
			 KINET_MLX5EMU_MODULE);
		return;
	}
	emu = get(); /* the module stays loaded for the process */
}

const struct kinet_mlx5_ops *kinet_mlx5_ops_get(char *why, size_t whylen)
{
	const struct kinet_mlx5_ops *o = atomic_load(&installed);
	if (o)
		return o;
	if (KT(MLX5_EMULATE)) {
		pthread_once(&emu_once, emu_load);
		if (!emu && why && whylen)
			snprintf(why, whylen, "%s", emu_why);
		return emu;
	}
	return kinet_mlx5_real_ops(why, whylen);
}

#endif /* KINET_HAVE_RDMA_HEADERS */
