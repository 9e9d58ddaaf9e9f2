/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * emu.c - an emulated rdma-core whose objects are backed by the software NIC.
 *
 * This is the double that lets the mlx5 backend's whole host path (probe,
 * open, registration, queue creation, mlx5dv exposure, GPU mapping,
 * INIT/RTR/RTS, descriptor export, CPU proxy) run where there is no
 * ConnectX NIC. It returns rdma-core's own structs (from the installed
 * headers): the QP that "rdma-core" creates is a software-NIC QP,
 * mlx5dv_init_obj hands out that QP's real SQ buffer, doorbell record,
 * doorbell register and CQ buffers, modify-QP drives its states and checks
 * the attribute masks the IB specification requires, ibv_reg_mr returns the
 * software NIC's keys. WQEs the device code writes are executed by the
 * software NIC engine, so data moves and CQEs arrive as on hardware.
 *
 * Sizing mirrors the mlx5 provider (a CQ of cqe entries has the next power
 * of two above cqe; an RC send WQE reserves room for ctrl, raddr and atomic
 * segments). Where the emulation is stricter than hardware (an unknown
 * destination GID or QP, a PSN mismatch fail at modify time instead of
 * timing out later) it says so in the log.
 *
 * Installed by kinet_mlx5_set_ops(kinet_mlx5_emu_ops()) or with
 * KINET_MLX5_EMULATE=1.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "nic/mlx5/ops.h"
#include "nic/mlx5/mlx5.h"
#include "gpu/cudrv.h"
#include "nic/mlx5/ifc.h"
#include "core/driver.h"
#include "gpu/gpu.h" /* kinet_eth_txq_qp */
#include "verbs/host.h"

#if KINET_HAVE_RDMA_HEADERS

#include "verbs/emu.h"
#include <kinet/net.h>

/* A receive WQ: a raw receive queue of the software NIC's port. */
struct emu_wq {
	struct ibv_wq wq;
	kinet_eth_rxq *rx;
	kinet_cq *own_cq;
};
struct emu_ind {
	struct ibv_rwq_ind_table t;
	struct emu_wq *wq;
};
struct emu_flow {
	struct ibv_flow flow;
	kinet_eth_flow *f;
};

static pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_dev devs[EMU_MAXDEV];
static struct emu_qp *all_qps;
static struct emu_pd *all_pds;
static struct emu_cq *all_cqs; /* verbs CQs, for a DevX QP that names one */
static uint32_t next_cqn = 0x40;
static struct kinet_mlx5_emu_cfg cfg = {
	.ndev = 2,
	.link_layer = IBV_LINK_LAYER_ETHERNET,
	.devx = 1,
	.max_qp_wr = 32768,
};

/* Bytes of one BlueFlame buffer: half of 2^log_bf_reg_size, as a device
 * reports it (the UAR's two registers are that far apart). */
static uint32_t emu_bf_size(void)
{
	uint32_t lbf = cfg.log_bf_reg_size ? (uint32_t)cfg.log_bf_reg_size : 9;
	return (1u << lbf) / 2;
}

/* ---- call counters ---------------------------------------------------------- */

static const char *call_names[] = {
	"get_device_list", "open_device",  "close_device",   "query_device", "query_port",
	"query_gid_ex",    "alloc_pd",     "dealloc_pd",     "reg_mr",       "reg_dmabuf_mr",
	"dereg_mr",        "create_cq",    "create_cq_ex", "destroy_cq",   "create_qp",
	"modify_qp",       "destroy_qp",      "mlx5dv_init_obj", "gpu_map",     "gpu_unmap",    "dmabuf_fd",
	"devx_obj_create", "devx_obj_modify", "devx_obj_destroy", "devx_umem_reg",
	"devx_umem_reg_dmabuf", "devx_alloc_uar", "devx_general_cmd", "create_wq", "create_flow",
	"create_qp_ex", "create_rwq_ind_table", "devx_obj_query", "alloc_parent_domain",
};
#define NCALLS ((int)(sizeof(call_names) / sizeof(call_names[0])))
static _Atomic unsigned call_count[NCALLS];

static void called(const char *name)
{
	for (int i = 0; i < NCALLS; i++)
		if (!strcmp(call_names[i], name)) {
			atomic_fetch_add(&call_count[i], 1);
			return;
		}
}

unsigned kinet_mlx5_emu_calls(const char *name)
{
	for (int i = 0; i < NCALLS; i++)
		if (!strcmp(call_names[i], name))
			return atomic_load(&call_count[i]);
	return 0;
}

void kinet_mlx5_emu_calls_reset(void)
{
	for (int i = 0; i < NCALLS; i++)
		atomic_store(&call_count[i], 0);
}

/* ---- configuration, emulated GPU memory ------------------------------------ */

void kinet_mlx5_emu_get_cfg(struct kinet_mlx5_emu_cfg *c)
{
	pthread_mutex_lock(&emu_lock);
	*c = cfg;
	pthread_mutex_unlock(&emu_lock);
}

static bool cfg_explicit;

void kinet_mlx5_emu_set_cfg(const struct kinet_mlx5_emu_cfg *c)
{
	pthread_mutex_lock(&emu_lock);
	cfg_explicit = true;
	cfg = *c;
	if (cfg.ndev > EMU_MAXDEV)
		cfg.ndev = EMU_MAXDEV;
	if (cfg.ndev < 0)
		cfg.ndev = 0;
	if (cfg.max_qp_wr <= 0)
		cfg.max_qp_wr = 32768;
	pthread_mutex_unlock(&emu_lock);
}

static struct {
	uintptr_t lo, hi;
} gpu_ranges[16];
static int ngpu_ranges;

int kinet_mlx5_emu_gpu_range(void *p, size_t len)
{
	pthread_mutex_lock(&emu_lock);
	if (ngpu_ranges == 16) {
		pthread_mutex_unlock(&emu_lock);
		return -ENOSPC;
	}
	gpu_ranges[ngpu_ranges].lo = (uintptr_t)p;
	gpu_ranges[ngpu_ranges].hi = (uintptr_t)p + len;
	ngpu_ranges++;
	pthread_mutex_unlock(&emu_lock);
	return 0;
}

static void gpu_range_remove(void *p)
{
	pthread_mutex_lock(&emu_lock);
	for (int i = 0; i < ngpu_ranges; i++)
		if (gpu_ranges[i].lo == (uintptr_t)p) {
			gpu_ranges[i] = gpu_ranges[--ngpu_ranges];
			break;
		}
	pthread_mutex_unlock(&emu_lock);
}

void kinet_mlx5_emu_gpu_range_clear(void)
{
	pthread_mutex_lock(&emu_lock);
	ngpu_ranges = 0;
	pthread_mutex_unlock(&emu_lock);
}

static bool is_gpu(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	bool r = false;
	pthread_mutex_lock(&emu_lock);
	for (int i = 0; i < ngpu_ranges; i++)
		if (a >= gpu_ranges[i].lo && a + len <= gpu_ranges[i].hi)
			r = true;
	pthread_mutex_unlock(&emu_lock);
	return r;
}

/* dma-buf fds handed out by emu_dmabuf_fd: fd -> the first byte it covers */
static struct {
	int fd;
	uintptr_t base;
	size_t len;
} dmabufs[16];

int kinet_mlx5_emu_counters(int dev, struct kinet_counters *out)
{
	if (dev < 0 || dev >= EMU_MAXDEV || !out)
		return -EINVAL;
	pthread_mutex_lock(&emu_lock);
	int rc = devs[dev].soft ? kinet_ctx_counters(devs[dev].soft, out) : -ENODEV;
	pthread_mutex_unlock(&emu_lock);
	return rc;
}

/* ---- devices and ports ----------------------------------------------------------- */

/* kinet-verbs: the host's interfaces, once (emu_lock held). */
static int host_scan(void)
{
	static int scanned;
	if (scanned)
		return scanned;
	struct kinet_verbs_port p[EMU_MAXDEV];
	int n = kinet_verbs_host_ports(p, EMU_MAXDEV);
	if (n < 0) {
		KLOG_ERR("kinet-verbs: no network interface to stand a RoCE port on: %s",
			 strerror(-n));
		return n;
	}
	for (int i = 0; i < n; i++) {
		devs[i].host = true;
		devs[i].hp = p[i];
	}
	cfg.ndev = n;
	cfg.link_layer = IBV_LINK_LAYER_ETHERNET;
	scanned = n;
	return n;
}

static struct ibv_device **emu_get_device_list(int *num)
{
	called("get_device_list");
	pthread_mutex_lock(&emu_lock);
	if (cfg.host && host_scan() < 0) {
		pthread_mutex_unlock(&emu_lock);
		errno = ENODEV;
		return NULL;
	}
	int n = cfg.ndev;
	struct ibv_device **l = calloc((size_t)n + 1, sizeof(*l));
	if (!l) {
		pthread_mutex_unlock(&emu_lock);
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		struct emu_dev *d = &devs[i];
		if (!d->dev.name[0] && d->host) {
			d->index = i;
			d->dev.node_type = IBV_NODE_CA;
			d->dev.transport_type = IBV_TRANSPORT_IB;
			snprintf(d->dev.name, sizeof(d->dev.name), "kinet%d", i);
			snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", i);
			snprintf(d->dev.dev_path, sizeof(d->dev.dev_path),
				 "/sys/class/infiniband_verbs/uverbs%d", i);
			snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path),
				 "/sys/class/infiniband/kinet%d", i);
		}
		if (!d->dev.name[0]) {
			d->index = i;
			d->dev.node_type = IBV_NODE_CA;
			d->dev.transport_type = IBV_TRANSPORT_IB;
			snprintf(d->dev.name, sizeof(d->dev.name), "mlx5_%d", i);
			snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", i);
		}
		l[i] = &d->dev;
	}
	pthread_mutex_unlock(&emu_lock);
	if (num)
		*num = n;
	return l;
}

static void emu_free_device_list(struct ibv_device **l)
{
	free(l);
}

static const char *emu_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

static bool emu_is_supported(struct ibv_device *dev)
{
	(void)dev;
	return true;
}

static struct emu_ctx *ctx_of(struct ibv_context *ib)
{
	return (struct emu_ctx *)((uint8_t *)ib - offsetof(struct verbs_context, context));
}

static void ctx_ops(struct emu_ctx *c);

static struct ibv_context *emu_open_device(struct ibv_device *dev)
{
	called("open_device");
	struct emu_dev *d = (struct emu_dev *)dev;
	struct emu_ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&emu_lock);
	if (!d->soft) {
		struct kinet_ctx_attr a = {.backend = KINET_BACKEND_SOFT, .engine_threads = 1};
		int rc = kinet_open(&a, &d->soft);
		if (rc) {
			pthread_mutex_unlock(&emu_lock);
			free(c);
			errno = -rc;
			return NULL;
		}
		d->link_layer = cfg.link_layer;
	}
	d->opens++;
	pthread_mutex_unlock(&emu_lock);
	struct ibv_context *ib = &c->vc.context;
	ib->device = dev;
	ib->num_comp_vectors = 1;
	/* a context's cmd_fd is a descriptor that programs dup() to share the
	 * context (ibv_import_device, which is refused): an open descriptor
	 * that no command goes through, closed with the context */
	ib->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	ib->async_fd = -1;
	pthread_mutex_init(&ib->mutex, NULL);
	ctx_ops(c);
	c->d = d;
	/* kinet-verbs: a DevX context, as rdma-core 44 opens one (above) */
	c->devx = cfg.host;
	return ib;
}

static int emu_close_device(struct ibv_context *ib)
{
	called("close_device");
	struct emu_ctx *c = ctx_of(ib);
	struct emu_dev *d = c->d;
	pthread_mutex_lock(&emu_lock);
	if (--d->opens == 0) {
		if (kinet_close(d->soft) == 0)
			d->soft = NULL;
		else
			KLOG_WARN("emulated %s: objects still open, its software NIC stays", d->dev.name);
	}
	pthread_mutex_unlock(&emu_lock);
	if (ib->cmd_fd >= 0)
		close(ib->cmd_fd);
	free(c);
	return 0;
}

static struct emu_dev *dev_of(struct ibv_context *ib)
{
	return ctx_of(ib)->d;
}

static int emu_query_device(struct ibv_context *ib, struct ibv_device_attr *a)
{
	called("query_device");
	struct emu_dev *d = dev_of(ib);
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "kinet-emulation");
	a->node_guid = kn_htobe64(0x0002c90300000000ull | (uint64_t)d->index);
	a->max_mr_size = ~0ull;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0x02c9;
	a->max_qp = 1 << 17;
	a->max_qp_wr = cfg.max_qp_wr;
	a->max_sge = 30;
	a->max_sge_rd = 30;
	a->max_srq = 1 << 16;
	a->max_srq_wr = EMU_SRQ_MAX_WR;
	a->max_srq_sge = EMU_SRQ_MAX_SGE;
	a->max_cq = 1 << 16;
	a->max_cqe = (1 << 22) - 1;
	a->max_mr = 1 << 16;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->max_res_rd_atom = 1 << 20;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 128;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = 1;
	if (d->host) {
		/* a ConnectX-6 Dx's identity (vendor part 4125), kinet's firmware
		 * string, the GUIDs from the interface's MAC as mlx5 derives them;
		 * capability flags only for what kinet-verbs does */
		uint8_t g[8];
		kinet_verbs_eui64(d->hp.mac, g);
		uint64_t guid = 0;
		for (int i = 0; i < 8; i++)
			guid = guid << 8 | g[i];
		snprintf(a->fw_ver, sizeof(a->fw_ver), "kinet-%s", kinet_version(NULL, NULL, NULL));
		a->node_guid = kn_htobe64(guid);
		a->sys_image_guid = a->node_guid;
		a->vendor_part_id = 4125;
		a->max_qp_wr = cfg.max_qp_wr;
		a->max_sge_rd = 30;
		a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
				      IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_PORT_ACTIVE_EVENT |
				      IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN;
		a->max_pkeys = 1;
	}
	return 0;
}

static int emu_query_port(struct ibv_context *ib, uint8_t port, struct ibv_port_attr *a)
{
	called("query_port");
	struct emu_dev *d = dev_of(ib);
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	bool eth = d->link_layer == IBV_LINK_LAYER_ETHERNET;
	a->state = cfg.port_down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = eth ? IBV_MTU_1024 : IBV_MTU_4096;
	a->gid_tbl_len = EMU_GIDS;
	a->max_msg_sz = 1u << 30;
	a->pkey_tbl_len = 128;
	a->lid = eth ? 0 : (uint16_t)(0x10 + d->index);
	a->active_width = 2;
	a->active_speed = 64;
	a->phys_state = cfg.port_down ? 3 : 5;
	a->link_layer = (uint8_t)d->link_layer;
	if (d->host) {
		/* RoCE: the largest IB MTU the interface's MTU carries with the
		 * RoCE v2 headers (IP, UDP, BTH and the rest: up to 70 bytes) */
		int room = d->hp.mtu - 70;
		enum ibv_mtu m = IBV_MTU_256;
		if (room >= 4096)
			m = IBV_MTU_4096;
		else if (room >= 2048)
			m = IBV_MTU_2048;
		else if (room >= 1024)
			m = IBV_MTU_1024;
		else if (room >= 512)
			m = IBV_MTU_512;
		a->active_mtu = m;
		a->gid_tbl_len = EMU_HOST_GIDS;
		a->pkey_tbl_len = 1;
		a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
		a->max_vl_num = 4;
		a->active_width = 2;  /* 4X */
		a->active_speed = 32; /* 25 Gb/s a lane: 100 Gb/s */
	}
	return 0;
}

/* The emulated GID table. RoCE: link-local v1/v2, IPv4-mapped v1/v2 (10.77.0.i+1),
 * a global IPv6 v2 (fd00:77::i+1). InfiniBand: the port GID only. */
static int gid_entry(const struct emu_dev *d, uint32_t index, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->gid_index = index;
	e->port_num = 1;
	uint8_t *g = e->gid.raw;
	if (d->host) {
		if (index >= 2 * (uint32_t)d->hp.naddr)
			return ENODATA;
		memcpy(g, d->hp.addr[index / 2], 16);
		e->gid_type = index % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
		e->ndev_ifindex = if_nametoindex(d->hp.ifname);
		return 0;
	}
	if (d->link_layer != IBV_LINK_LAYER_ETHERNET) {
		if (index != 0)
			return ENODATA;
		g[0] = 0xfe;
		g[1] = 0x80;
		g[8] = 0x00;
		g[9] = 0x02;
		g[10] = 0xc9;
		g[11] = 0x03;
		g[15] = (uint8_t)(d->index + 1);
		e->gid_type = IBV_GID_TYPE_IB;
		return 0;
	}
	switch (index) {
	case 0:
	case 1:
		g[0] = 0xfe;
		g[1] = 0x80;
		g[8] = 0x02;
		g[9] = 0x02;
		g[10] = 0xc9;
		g[11] = 0xff;
		g[12] = 0xfe;
		g[15] = (uint8_t)(d->index + 1);
		e->gid_type = index == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
		return 0;
	case 2:
	case 3:
		g[10] = 0xff;
		g[11] = 0xff;
		g[12] = 10;
		g[13] = 77;
		g[14] = 0;
		g[15] = (uint8_t)(d->index + 1);
		e->gid_type = index == 2 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
		return 0;
	case 4:
		g[0] = 0xfd;
		g[1] = 0x00;
		g[2] = 0x00;
		g[3] = 0x77;
		g[15] = (uint8_t)(d->index + 1);
		e->gid_type = IBV_GID_TYPE_ROCE_V2;
		return 0;
	default: return ENODATA;
	}
}

/* Entries of a device's GID table that may hold a GID. */
static uint32_t gid_count(const struct emu_dev *d)
{
	return d->host ? 2 * (uint32_t)d->hp.naddr : EMU_GIDS;
}

static int emu_query_gid_ex(struct ibv_context *ib, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *e)
{
	called("query_gid_ex");
	if (port != 1 || index >= (dev_of(ib)->host ? EMU_HOST_GIDS : EMU_GIDS))
		return EINVAL;
	return gid_entry(dev_of(ib), index, e);
}

/* ---- protection domains and memory ----------------------------------------------- */

static struct ibv_pd *emu_alloc_pd(struct ibv_context *ib)
{
	called("alloc_pd");
	struct emu_pd *p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = kinet_pd_alloc(dev_of(ib)->soft, &p->spd);
	if (rc) {
		free(p);
		errno = -rc;
		return NULL;
	}
	p->pd.context = ib;
	p->pd.handle = p->spd->pdn;
	pthread_mutex_lock(&emu_lock);
	p->next = all_pds;
	all_pds = p;
	pthread_mutex_unlock(&emu_lock);
	return &p->pd;
}

/* ibv_alloc_parent_domain: a PD's stand-in, which objects are made on as
 * on the PD itself (the same protection domain). kinet has no thread
 * domains and allocates its queues itself: a thread domain, or allocators
 * to call, are refused (EOPNOTSUPP) rather than ignored. */
static struct ibv_pd *emu_alloc_parent_domain(struct ibv_context *ib,
					      struct ibv_parent_domain_init_attr *attr)
{
	called("alloc_parent_domain");
	if (!attr || !attr->pd || attr->pd->context != ib) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->td || (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS)) {
		KLOG_ERR("kinet-verbs: ibv_alloc_parent_domain: %s not supported (EOPNOTSUPP)",
			 attr->td ? "a thread domain is" : "custom allocators are");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & ~(uint32_t)IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) {
		errno = EINVAL;
		return NULL;
	}
	struct emu_pd *base = (struct emu_pd *)attr->pd;
	if (base->base) /* a parent domain's parent domain stands for its PD */
		base = base->base;
	struct emu_pd *p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = ib;
	p->pd.handle = base->pd.handle;
	p->spd = base->spd;
	p->base = base;
	pthread_mutex_lock(&emu_lock);
	base->children++;
	pthread_mutex_unlock(&emu_lock);
	return &p->pd;
}

static int emu_dealloc_pd(struct ibv_pd *pd)
{
	called("dealloc_pd");
	struct emu_pd *p = (struct emu_pd *)pd;
	if (p->base) { /* a parent domain: the PD stays */
		pthread_mutex_lock(&emu_lock);
		p->base->children--;
		pthread_mutex_unlock(&emu_lock);
		free(p);
		return 0;
	}
	pthread_mutex_lock(&emu_lock);
	unsigned children = p->children;
	pthread_mutex_unlock(&emu_lock);
	if (children)
		return EBUSY; /* parent domains stand for it */
	if (p->eport) {
		int rc = kinet_eth_port_close(p->eport);
		if (rc)
			return -rc; /* raw queues still exist */
		p->eport = NULL;
	}
	int rc = kinet_pd_free(p->spd);
	if (rc)
		return -rc;
	pthread_mutex_lock(&emu_lock);
	for (struct emu_pd **pp = &all_pds; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	pthread_mutex_unlock(&emu_lock);
	free(p);
	return 0;
}

static struct ibv_mr *mr_make(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct emu_pd *p = (struct emu_pd *)pd;
	struct emu_mr *m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	/* optional access flags (relaxed ordering, ...) are hints */
	int rc = kinet_mr_reg(p->spd, addr, len, (unsigned)access & KINET_ACCESS_ALL, &m->smr);
	if (rc) {
		free(m);
		errno = -rc;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.handle = m->smr->key;
	m->mr.lkey = kinet_mr_lkey(m->smr);
	m->mr.rkey = kinet_mr_rkey(m->smr);
	return &m->mr;
}

static int emu_mem_kind(const void *p);
static int emu_peermem_loaded(void);

static struct ibv_mr *emu_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	called("reg_mr");
	if (emu_mem_kind(addr) == KINET_MEM_CUDA && !emu_peermem_loaded()) {
		/* without the peer-memory module the kernel cannot pin GPU memory */
		errno = EFAULT;
		return NULL;
	}
	return mr_make(pd, addr, len, access);
}

static struct ibv_mr *emu_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access)
{
	called("reg_dmabuf_mr");
	uintptr_t base = 0;
	size_t span = 0;
	pthread_mutex_lock(&emu_lock);
	for (int i = 0; i < 16; i++)
		if (dmabufs[i].fd == fd && dmabufs[i].len) {
			base = dmabufs[i].base;
			span = dmabufs[i].len;
			dmabufs[i].len = 0;
			dmabufs[i].fd = -1;
			break;
		}
	pthread_mutex_unlock(&emu_lock);
	if (!span) {
		errno = EBADF; /* not a dma-buf */
		return NULL;
	}
	if (offset + len > span || base + offset != iova) {
		/* kinet maps a dma-buf at the GPU address it came from */
		KLOG_ERR("emulated reg_dmabuf_mr: offset %llu len %zu outside the dma-buf, or iova "
			 "0x%llx != address",
			 (unsigned long long)offset, len, (unsigned long long)iova);
		errno = EINVAL;
		return NULL;
	}
	return mr_make(pd, (void *)(base + offset), len, access);
}

static int emu_dereg_mr(struct ibv_mr *mr)
{
	called("dereg_mr");
	struct emu_mr *m = (struct emu_mr *)mr;
	int rc = kinet_mr_dereg(m->smr);
	if (rc)
		return -rc;
	free(m);
	return 0;
}

/* ---- completion queues and queue pairs ----------------------------------------------- */

static struct ibv_cq *emu_cq_new(struct ibv_context *ib, int cqe, void *user,
				 struct ibv_comp_channel *ch, uint32_t flags);

static struct ibv_cq *emu_create_cq(struct ibv_context *ib, int cqe, void *user,
				    struct ibv_comp_channel *ch, int vec)
{
	called("create_cq");
	if (vec < 0 || vec >= ib->num_comp_vectors) {
		KLOG_ERR("kinet-verbs: ibv_create_cq: completion vector %d (the device has %d) "
			 "(EINVAL)",
			 vec, ib->num_comp_vectors);
		errno = EINVAL;
		return NULL;
	}
	return emu_cq_new(ib, cqe, user, ch, 0);
}

/* ibv_create_cq_ex with the overrun-ignore flag: the software NIC's CQ then
 * writes CQEs without looking at the consumer index, as the device does. */
static struct ibv_cq *emu_create_cq_oi(struct ibv_context *ib, int cqe)
{
	called("create_cq_ex");
	return emu_cq_new(ib, cqe, NULL, NULL, KINET_CQ_OVERRUN_IGNORE);
}

/* ibv_create_cq_ex (verbs.h's inline, through the context): a CQ whose
 * completions are also read through its ibv_cq_ex functions (data.c). The
 * work-completion fields of IBV_WC_STANDARD_FLAGS are offered; timestamps,
 * CVLAN, flow tag, tag matching and parent domains are refused. */
static struct ibv_cq_ex *emu_create_cq_ex(struct ibv_context *ib, struct ibv_cq_init_attr_ex *a)
{
	called("create_cq_ex");
	const uint32_t known_flags =
		IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	if (!a) {
		errno = EINVAL;
		return NULL;
	}
	if (a->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) {
		KLOG_ERR("kinet-verbs: ibv_create_cq_ex: wc_flags 0x%" PRIx64 " beyond the standard "
			 "ones (0x%x): completion timestamps, CVLAN, flow tag and tag matching are "
			 "not supported (EOPNOTSUPP)",
			 (uint64_t)a->wc_flags, (unsigned)IBV_WC_STANDARD_FLAGS);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		KLOG_ERR("kinet-verbs: ibv_create_cq_ex: parent domains are not supported "
			 "(EOPNOTSUPP)");
		errno = EOPNOTSUPP;
		return NULL;
	}
	uint32_t flags = a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS ? a->flags : 0;
	if (flags & ~known_flags) {
		KLOG_ERR("kinet-verbs: ibv_create_cq_ex: flags 0x%x not supported (EOPNOTSUPP)",
			 flags & ~known_flags);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->comp_vector >= (uint32_t)ib->num_comp_vectors) {
		KLOG_ERR("kinet-verbs: ibv_create_cq_ex: completion vector %u (the device has %d) "
			 "(EINVAL)",
			 a->comp_vector, ib->num_comp_vectors);
		errno = EINVAL;
		return NULL;
	}
	if (a->cqe == 0 || a->cqe >= (1u << 22)) {
		KLOG_ERR("kinet-verbs: ibv_create_cq_ex: %u entries (1 .. %u)", a->cqe,
			 (1u << 22) - 1);
		errno = EINVAL;
		return NULL;
	}
	struct ibv_cq *cq = emu_cq_new(ib, (int)a->cqe, a->cq_context, a->channel,
				       flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN
					       ? KINET_CQ_OVERRUN_IGNORE
					       : 0);
	if (!cq)
		return NULL;
	struct emu_cq *c = (struct emu_cq *)cq;
	emu_data_cqx_init(c, flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	return &c->cqx;
}

static struct ibv_cq *emu_cq_new(struct ibv_context *ib, int cqe, void *user,
				 struct ibv_comp_channel *ch, uint32_t flags)
{
	if (cqe <= 0 || cqe >= (1 << 22) || (ch && ch->context != ib)) {
		if (ch && ch->context != ib)
			KLOG_ERR("kinet-verbs: ibv_create_cq: a completion channel of another "
				 "context (EINVAL)");
		else
			KLOG_ERR("kinet-verbs: ibv_create_cq: %d entries (1 .. %d) (EINVAL)", cqe,
				 (1 << 22) - 1);
		errno = EINVAL;
		return NULL;
	}
	struct emu_cq *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	/* as the mlx5 provider: one spare entry, rounded up to a power of two */
	struct kinet_cq_attr ca = {.depth = kinet_pow2((uint32_t)cqe + 1), .flags = flags};
	int rc = kinet_cq_create_ex(dev_of(ib)->soft, &ca, &c->scq);
	if (rc) {
		free(c);
		errno = -rc;
		return NULL;
	}
	c->cq.context = ib;
	c->cq.cq_context = user;
	c->cq.cqe = (int)c->scq->cnt - 1;
	pthread_mutex_lock(&emu_lock);
	c->cqn = next_cqn++;
	__atomic_store_n(&c->scq->num, c->cqn, __ATOMIC_RELEASE); /* WAIT WQEs name it */
	c->all_next = all_cqs;
	all_cqs = c;
	pthread_mutex_unlock(&emu_lock);
	c->cq.handle = c->cqn;
	emu_data_cq_init(c, ch);
	return &c->cq;
}

static int emu_destroy_cq(struct ibv_cq *cq)
{
	called("destroy_cq");
	struct emu_cq *c = (struct emu_cq *)cq;
	if (atomic_load(&c->scq->refs) > 0)
		return EBUSY; /* QPs still use it */
	emu_data_cq_fini(c); /* disarmed, its events gone, the events read acknowledged */
	int rc = kinet_cq_destroy(c->scq);
	if (rc)
		return -rc;
	pthread_mutex_lock(&emu_lock);
	for (struct emu_cq **pp = &all_cqs; *pp; pp = &(*pp)->all_next)
		if (*pp == c) {
			*pp = c->all_next;
			break;
		}
	pthread_mutex_unlock(&emu_lock);
	free(c);
	return 0;
}

static struct ibv_qp *emu_create_raw_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia);

static struct ibv_qp *emu_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	called("create_qp");
	struct emu_pd *p = (struct emu_pd *)pd;
	if (ia && ia->qp_type == IBV_QPT_RAW_PACKET)
		return emu_create_raw_qp(pd, ia);
	if (!ia || ia->qp_type != IBV_QPT_RC || !ia->send_cq || !ia->recv_cq ||
	    (ia->srq && ia->srq->context != pd->context) ||
	    ia->cap.max_send_wr == 0 || ia->cap.max_send_wr > (uint32_t)cfg.max_qp_wr ||
	    ia->cap.max_recv_wr > (uint32_t)cfg.max_qp_wr || ia->send_cq->context != pd->context ||
	    ia->recv_cq->context != pd->context) {
		errno = EINVAL;
		return NULL;
	}
	if (ia->cap.max_send_sge > 30 || ia->cap.max_recv_sge > 30 ||
	    ia->cap.max_inline_data > 512) {
		KLOG_ERR("emulated create_qp: at most 30 send SGEs, 30 receive SGEs, 512 inline "
			 "bytes (EINVAL)");
		errno = EINVAL;
		return NULL;
	}
	/* the mlx5 provider's send WQE size for RC: ctrl + raddr + atomic,
	 * then the larger of the inline data and the gather list */
	uint32_t inl = ia->cap.max_inline_data ? (4 + ia->cap.max_inline_data + 15) / 16 * 16 : 0;
	uint32_t sge = ia->cap.max_send_sge * 16;
	uint32_t wqe = 16 + 32 + (inl > sge ? inl : sge);
	uint32_t nbb = (wqe + KN_SEND_WQE_BB - 1) / KN_SEND_WQE_BB;
	uint32_t sq_cnt = kinet_pow2(ia->cap.max_send_wr * nbb);
	/* with an SRQ, the QP has no receive queue of its own (max_recv_wr and
	 * max_recv_sge are ignored, as on mlx5) */
	uint32_t rq_cnt = ia->cap.max_recv_wr && !ia->srq ? kinet_pow2(ia->cap.max_recv_wr) : 0;
	struct emu_qp *q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	struct kinet_qp_attr a = {
		.sq_depth = sq_cnt,
		.rq_depth = rq_cnt,
		.send_cq = ((struct emu_cq *)ia->send_cq)->scq,
		.recv_cq = rq_cnt ? ((struct emu_cq *)ia->recv_cq)->scq : NULL,
		.db_mode = KN_DB_GPU, /* the engine watches the doorbell record and register */
		.rnr_retry = 7,
		/* a receive WQE of a data segment per scatter entry, as the mlx5
		 * provider sizes it */
		.rq_sge = ia->cap.max_recv_sge ? ia->cap.max_recv_sge : 1,
	};
	int rc = kinet_qp_create(p->spd, &a, &q->sqp);
	if (rc) {
		free(q);
		errno = -rc;
		return NULL;
	}
	if (ia->srq) {
		q->srq = (struct emu_srq *)ia->srq;
		rc = kinet_qp_set_srq(q->sqp, q->srq->s, ((struct emu_cq *)ia->recv_cq)->scq);
		if (rc) {
			kinet_qp_destroy(q->sqp);
			free(q);
			errno = -rc;
			return NULL;
		}
		q->qp.srq = ia->srq;
		ia->cap.max_recv_sge = 0;
	}
	q->d = dev_of(pd->context);
	q->qp.context = pd->context;
	q->qp.qp_context = ia->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.qp_num = q->sqp->qpn;
	if (cfg.host) {
		/* kinet-verbs: a number unique on the host, which peers in other
		 * processes find the QP by (rendezvous.c) */
		uint32_t n;
		if ((rc = emu_rv_alloc(&n))) {
			kinet_qp_destroy(q->sqp);
			free(q);
			errno = -rc;
			return NULL;
		}
		q->qp.qp_num = n;
		q->rv = true;
	}
	q->qp.handle = q->qp.qp_num;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	q->sqp->bf_alt = emu_bf_size(); /* the device's two registers */
	ia->cap.max_send_wr = sq_cnt / nbb;
	ia->cap.max_recv_wr = rq_cnt;
	if (rq_cnt) /* the WQE's room: a power of two of data segments */
		ia->cap.max_recv_sge = q->sqp->rq_stride / 16;
	if (emu_data_qp_init(q, ia)) {
		if (q->rv)
			emu_rv_release(q->qp.qp_num);
		kinet_qp_destroy(q->sqp);
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&emu_lock);
	q->next = all_qps;
	all_qps = q;
	pthread_mutex_unlock(&emu_lock);
	return &q->qp;
}

static int emu_destroy_raw_qp(struct emu_qp *q);

static int emu_destroy_qp(struct ibv_qp *qp)
{
	called("destroy_qp");
	struct emu_qp *q = (struct emu_qp *)qp;
	if (qp->qp_type == IBV_QPT_RAW_PACKET)
		return emu_destroy_raw_qp(q);
	pthread_mutex_lock(&emu_lock);
	for (struct emu_qp **pp = &all_qps; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	for (struct emu_qp *o = all_qps; o; o = o->next)
		if (o->peer == q)
			o->peer = NULL;
	pthread_mutex_unlock(&emu_lock);
	int rc = kinet_qp_destroy(q->sqp);
	if (rc)
		return -rc;
	if (q->rv)
		emu_rv_release(q->qp.qp_num);
	emu_data_qp_fini(q);
	free(q);
	return 0;
}

struct emu_qp *emu_qp_by_num(struct emu_dev *d, uint32_t qpn)
{
	pthread_mutex_lock(&emu_lock);
	struct emu_qp *q = all_qps;
	while (q && ((q->sqp ? q->sqp->qpn : q->qp.qp_num) != qpn || q->d != d))
		q = q->next;
	pthread_mutex_unlock(&emu_lock);
	return q;
}

/* The QP that an address vector and QP number designate, or NULL. */
static struct emu_qp *find_dest(const struct emu_dev *self, const struct ibv_ah_attr *ah,
				uint32_t qpn)
{
	for (struct emu_qp *o = all_qps; o; o = o->next) {
		if (o->qp.qp_num != qpn)
			continue;
		const struct emu_dev *d = o->d;
		if (d->link_layer != self->link_layer)
			continue;
		if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
			for (uint32_t i = 0; i < gid_count(d); i++) {
				struct ibv_gid_entry e;
				if (gid_entry(d, i, &e) == 0 && !memcmp(e.gid.raw, ah->grh.dgid.raw, 16))
					return o;
			}
		} else if (ah->dlid == 0x10 + d->index) {
			return o;
		}
	}
	return NULL;
}

/* Attribute masks each transition requires (IB specification, modify QP);
 * a DC QP's (rdma-core's DCT and DCI): no remote end, a DCT stops at RTR. */
static int required_mask_dc(int dc, int from, int to)
{
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return IBV_QP_STATE;
	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT)
		return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		       (dc == KINET_DC_DCT ? IBV_QP_ACCESS_FLAGS : 0);
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR)
		return IBV_QP_STATE | IBV_QP_PATH_MTU |
		       (dc == KINET_DC_DCT ? IBV_QP_AV | IBV_QP_MIN_RNR_TIMER : 0);
	if (dc == KINET_DC_DCI && from == IBV_QPS_RTR && to == IBV_QPS_RTS)
		return IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (dc == KINET_DC_DCI && from == IBV_QPS_RTS && to == IBV_QPS_RTS)
		return IBV_QP_STATE;
	return -1;
}

static int required_mask(int from, int to)
{
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return IBV_QP_STATE;
	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT)
		return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	if (from == IBV_QPS_INIT && to == IBV_QPS_INIT)
		return IBV_QP_STATE;
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR)
		return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS)
		return IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (from == IBV_QPS_RTS && to == IBV_QPS_RTS)
		return IBV_QP_STATE;
	return -1;
}

/* Publishes the software-NIC descriptor of a QP that entered INIT under its
 * host-unique number and its device's GIDs (rendezvous.c). A QP that cannot
 * be published still reaches QPs of its own process; peers elsewhere then
 * fail their RTR with the reason. */
static void rv_publish(struct emu_qp *q)
{
	uint8_t desc[KINET_QP_DESC_MAX], gids[EMU_RV_GIDS][16];
	int n = kinet_qp_export(q->sqp, desc, sizeof(desc));
	if (n < 0) {
		KLOG_ERR("kinet-verbs: QP 0x%x cannot be reached from other processes: its "
			 "descriptor: %s", q->qp.qp_num, strerror(-n));
		return;
	}
	uint32_t ng = 0;
	for (uint32_t i = 0; i < gid_count(q->d) && ng < EMU_RV_GIDS; i++) {
		struct ibv_gid_entry e;
		static const uint8_t zero[16];
		if (gid_entry(q->d, i, &e) == 0 && memcmp(e.gid.raw, zero, 16) &&
		    (ng == 0 || memcmp(gids[ng - 1], e.gid.raw, 16))) /* v1 and v2 alike */
			memcpy(gids[ng++], e.gid.raw, 16);
	}
	emu_rv_publish(q->qp.qp_num, (const uint8_t(*)[16])gids, ng, desc, (size_t)n);
}

static int modify_fail(struct emu_qp *q, const char *what)
{
	KLOG_ERR("emulated modify_qp 0x%x: %s", q->qp.qp_num, what);
	return EINVAL;
}

static int emu_modify_raw_qp(struct emu_qp *q, struct ibv_qp_attr *a, int mask);

static int emu_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	called("modify_qp");
	struct emu_qp *q = (struct emu_qp *)qp;
	if (qp->qp_type == IBV_QPT_RAW_PACKET)
		return emu_modify_raw_qp(q, a, mask);
	if (!(mask & IBV_QP_STATE))
		return modify_fail(q, "IBV_QP_STATE missing");
	int from = (int)q->qp.state, to = (int)a->qp_state;
	int need = q->dc ? required_mask_dc(q->dc, from, to) : required_mask(from, to);
	if (need < 0)
		return modify_fail(q, "illegal transition");
	if ((mask & need) != need)
		return modify_fail(q, "attributes the transition requires are missing");
	struct ibv_port_attr pa;
	emu_query_port(qp->context, 1, &pa);
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return modify_fail(q, "no such port");
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > pa.active_mtu))
		return modify_fail(q, "path MTU above the port's active MTU");
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return modify_fail(q, "timeout above 31");
	if (((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) ||
	    ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7))
		return modify_fail(q, "retry counts above 7");
	if (((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > 16) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > 16))
		return modify_fail(q, "read/atomic depth above the device's 16");
	if ((mask & (IBV_QP_RQ_PSN | IBV_QP_SQ_PSN)) &&
	    (((mask & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffff) ||
	     ((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffff)))
		return modify_fail(q, "PSN wider than 24 bits");
	struct kinet_qp_remote remote = {0};
	uint8_t rdesc[KINET_QP_DESC_MAX];
	struct kinet_qp_info rinfo;
	int rc0;
	pthread_mutex_lock(&emu_lock);
	struct emu_qp *dest = NULL;
	if (to == IBV_QPS_RTR && !q->dc) {
		const struct ibv_ah_attr *ah = &a->ah_attr;
		if (q->d->link_layer == IBV_LINK_LAYER_ETHERNET) {
			struct ibv_gid_entry e;
			if (!ah->is_global || ah->grh.sgid_index >= gid_count(q->d) ||
			    gid_entry(q->d, ah->grh.sgid_index, &e) ||
			    e.gid_type == IBV_GID_TYPE_IB) {
				pthread_mutex_unlock(&emu_lock);
				return modify_fail(q, "RoCE needs a GRH with a valid RoCE source GID");
			}
		} else if (ah->dlid == 0) {
			pthread_mutex_unlock(&emu_lock);
			return modify_fail(q, "InfiniBand needs the destination LID");
		}
		if (ah->port_num != 1) {
			pthread_mutex_unlock(&emu_lock);
			return modify_fail(q, "address vector names no valid port");
		}
		dest = find_dest(q->d, ah, a->dest_qp_num);
		if (!dest && q->rv && q->d->link_layer == IBV_LINK_LAYER_ETHERNET) {
			/* a QP of another process of this host, found by (GID, QPN)
			 * in the rendezvous folder: connected over the wire */
			pthread_mutex_unlock(&emu_lock);
			int n = emu_rv_lookup(a->dest_qp_num, ah->grh.dgid.raw,
					      q->d->host ? q->d->hp.ifname : NULL, rdesc,
					      sizeof(rdesc));
			if (n < 0) {
				KLOG_ERR("emulated modify_qp 0x%x: no peer QP 0x%x (%s)",
					 q->qp.qp_num, a->dest_qp_num, strerror(-n));
				return -n;
			}
			if ((rc0 = kinet_qp_desc_parse(rdesc, (size_t)n, &rinfo))) {
				KLOG_ERR("emulated modify_qp 0x%x: the entry of QP 0x%x: %s",
					 q->qp.qp_num, a->dest_qp_num, strerror(-rc0));
				return -rc0;
			}
			remote.qpn = rinfo.qpn;
			remote.wire_addr = rdesc;
			remote.wire_addr_len = (size_t)n;
			pthread_mutex_lock(&emu_lock);
		} else if (!dest) {
			pthread_mutex_unlock(&emu_lock);
			/* hardware would only time out later (retry exceeded) */
			return modify_fail(q, "no QP at that destination (address, QP number)");
		} else {
			if (dest->has_sq_psn && dest->sq_psn != a->rq_psn) {
				pthread_mutex_unlock(&emu_lock);
				return modify_fail(q, "expected PSN differs from the peer's send PSN");
			}
			remote.local = dest->sqp;
			remote.qpn = dest->sqp->qpn;
		}
	}
	if (to == IBV_QPS_RTS && from == IBV_QPS_RTR && q->peer && q->peer->has_rq_psn &&
	    q->peer->peer == q && q->peer->rq_psn != a->sq_psn) {
		pthread_mutex_unlock(&emu_lock);
		return modify_fail(q, "send PSN differs from what the peer expects");
	}
	pthread_mutex_unlock(&emu_lock);
	/* the remote accesses the QP serves as a target: in place before the
	 * state change, whose recall of the GPU engine makes it see them */
	uint32_t old_access = __atomic_load_n(&q->sqp->attr.remote_access, __ATOMIC_RELAXED);
	if (mask & IBV_QP_ACCESS_FLAGS)
		__atomic_store_n(&q->sqp->attr.remote_access,
				 KINET_QP_ACCESS_SET |
					 (a->qp_access_flags &
					  (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_ATOMIC)),
				 __ATOMIC_RELAXED);
	int rc = kinet_qp_modify(q->sqp, to, to == IBV_QPS_RTR && !q->dc ? &remote : NULL);
	if (rc) {
		__atomic_store_n(&q->sqp->attr.remote_access, old_access, __ATOMIC_RELAXED);
		return -rc;
	}
	if (to == IBV_QPS_RTR && remote.wire_addr) {
		/* as kinet_qp_connect_remote records its peer */
		q->sqp->peer_node = rinfo.node;
		q->sqp->peer_gen = rinfo.gen;
		q->sqp->remote_connected = true;
	}
	if (q->rv && !q->dc && from == IBV_QPS_RESET && to == IBV_QPS_INIT)
		rv_publish(q);
	else if (q->rv && to == IBV_QPS_RESET)
		emu_rv_publish(q->qp.qp_num, NULL, 0, NULL, 0); /* a new generation: not yet */
	pthread_mutex_lock(&emu_lock);
	if (to == IBV_QPS_RTR) {
		q->peer = dest;
		q->rq_psn = a->rq_psn;
		q->has_rq_psn = true;
	}
	if (to == IBV_QPS_RTS && (mask & IBV_QP_SQ_PSN)) {
		q->sq_psn = a->sq_psn;
		q->has_sq_psn = true;
	}
	if (mask & IBV_QP_RNR_RETRY)
		q->sqp->attr.rnr_retry = a->rnr_retry;
	if (to == IBV_QPS_RESET) {
		q->peer = NULL;
		q->has_rq_psn = q->has_sq_psn = false;
	}
	q->qp.state = (enum ibv_qp_state)to;
	/* what ibv_query_qp reports */
	if (mask & IBV_QP_PKEY_INDEX)
		q->attr.pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		q->attr.port_num = a->port_num;
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->attr.qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_AV)
		q->attr.ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		q->attr.path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		q->attr.dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		q->attr.rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->attr.sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->attr.max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		q->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->attr.rnr_retry = a->rnr_retry;
	pthread_mutex_unlock(&emu_lock);
	if (to == IBV_QPS_RESET)
		emu_data_qp_reset(q);
	return 0;
}

/* ---- mlx5 direct verbs ---------------------------------------------------------------- */

static int emu_init_obj(struct mlx5dv_obj *obj, uint64_t types)
{
	called("mlx5dv_init_obj");
	if (types & ~(uint64_t)(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_PD | MLX5DV_OBJ_RWQ |
				MLX5DV_OBJ_SRQ | MLX5DV_OBJ_AH))
		return EOPNOTSUPP;
	if (types & MLX5DV_OBJ_AH) {
		/* the address vector a datagram segment would carry */
		obj->ah.out->av = &((struct emu_ah *)obj->ah.in)->av;
		obj->ah.out->comp_mask = 0;
	}
	if (types & MLX5DV_OBJ_SRQ) {
		/* the queue as the provider keeps it: the program may post itself */
		struct emu_srq *q = (struct emu_srq *)obj->srq.in;
		struct mlx5dv_srq *o = obj->srq.out;
		uint64_t want = o->comp_mask;
		memset(o, 0, sizeof(*o));
		pthread_mutex_lock(&q->lock);
		o->buf = q->info.buf;
		o->dbrec = (__be32 *)q->info.dbrec;
		o->stride = q->info.stride;
		o->head = q->head;
		o->tail = q->tail;
		pthread_mutex_unlock(&q->lock);
		if (want & MLX5DV_SRQ_MASK_SRQN) {
			o->srqn = q->info.srqn;
			o->comp_mask = MLX5DV_SRQ_MASK_SRQN;
		}
	}
	if (types & MLX5DV_OBJ_RWQ) {
		struct emu_wq *w = (struct emu_wq *)obj->rwq.in;
		struct kinet_eth_rxq_ring rg;
		if (kinet_eth_rxq_ring(w->rx, &rg))
			return EINVAL;
		struct mlx5dv_rwq *o = obj->rwq.out;
		memset(o, 0, sizeof(*o));
		o->buf = rg.wq;
		o->dbrec = (__be32 *)rg.dbrec;
		o->wqe_cnt = rg.wqe_cnt;
		o->stride = rg.wqe_size;
	}
	if ((types & MLX5DV_OBJ_QP) &&
	    ((struct emu_qp *)obj->qp.in)->qp.qp_type == IBV_QPT_RAW_PACKET) {
		struct emu_qp *q = (struct emu_qp *)obj->qp.in;
		struct mlx5dv_qp *o = obj->qp.out;
		uint64_t want = o->comp_mask;
		memset(o, 0, sizeof(*o));
		if (!q->etx)
			return EINVAL; /* a hashing QP has no queues of its own */
		kinet_qp *s = kinet_eth_txq_qp(q->etx);
		o->dbrec = (__be32 *)s->dbrec;
		o->sq.buf = s->sq;
		o->sq.wqe_cnt = s->sq_cnt;
		o->sq.stride = KN_SEND_WQE_BB;
		o->bf.reg = (void *)s->db;
		o->bf.size = 0; /* no BlueFlame on the emulated raw queues */
		if (want & MLX5DV_QP_MASK_RAW_QP_HANDLES) {
			o->sqn = s->qpn;
			o->tisn = 0x7000 + (s->qpn & 0xfff);
			o->comp_mask = MLX5DV_QP_MASK_RAW_QP_HANDLES;
		}
		types &= ~(uint64_t)MLX5DV_OBJ_QP;
	}
	if (types & MLX5DV_OBJ_QP) {
		struct emu_qp *q = (struct emu_qp *)obj->qp.in;
		struct mlx5dv_qp *o = obj->qp.out;
		kinet_qp *s = q->sqp;
		memset(o, 0, sizeof(*o));
		o->dbrec = (__be32 *)s->dbrec;
		o->sq.buf = s->sq;
		o->sq.wqe_cnt = s->sq_cnt;
		o->sq.stride = KN_SEND_WQE_BB;
		o->rq.buf = s->rq;
		o->rq.wqe_cnt = s->rq_cnt;
		o->rq.stride = s->rq_stride;
		o->bf.reg = (void *)s->db;
		o->bf.size = emu_bf_size();
	}
	if (types & MLX5DV_OBJ_CQ) {
		struct emu_cq *c = (struct emu_cq *)obj->cq.in;
		struct mlx5dv_cq *o = obj->cq.out;
		memset(o, 0, sizeof(*o));
		o->buf = c->scq->buf;
		o->dbrec = (__be32 *)c->scq->dbrec;
		o->cqe_cnt = c->scq->cnt;
		o->cqe_size = KN_CQE_SIZE;
		o->cqn = c->cqn;
	}
	if (types & MLX5DV_OBJ_PD) {
		struct emu_pd *p = (struct emu_pd *)obj->pd.in;
		obj->pd.out->pdn = p->spd->pdn;
		obj->pd.out->comp_mask = 0;
	}
	return 0;
}


/* ---- raw Ethernet ---------------------------------------------------------------------
 * Raw packet QPs, receive WQs, indirection tables, hashing QPs and flow
 * rules, backed by a software-NIC Ethernet port of the PD (its loopback
 * driver: every frame a send queue of the device sends comes back to the
 * device's flows, as a ConnectX with local loopback on). A send-only raw
 * packet QP is a software-NIC send queue, a WQ a raw receive queue (the
 * caller writes its WQEs); the verbs CQ given stands in for the queue's own
 * while it exists. Checked as verbs and the kernel would: QP types and
 * capabilities, the state machine of raw packet QPs, the striding
 * parameters against the device's limits, indirection tables (of one WQ
 * here, stricter than hardware), the hash (Toeplitz with the standard key
 * only), every flow spec's type, size and masks (full masks or none). */

#define EMU_RAW_MAX_WR 32768u

static kinet_eth_port *pd_port(struct emu_pd *p)
{
	if (p->base) /* a parent domain: its PD's port */
		p = p->base;
	pthread_mutex_lock(&emu_lock);
	if (!p->eport) {
		struct kinet_eth_port_attr a;
		memset(&a, 0, sizeof(a));
		a.driver = KINET_ETH_DRIVER_LOOPBACK;
		a.mtu = 1500;
		if (kinet_eth_port_open(p->spd, &a, &p->eport))
			p->eport = NULL;
	}
	kinet_eth_port *e = p->eport;
	pthread_mutex_unlock(&emu_lock);
	return e;
}

/* Puts the verbs CQ in place of a queue's own (and back: swap again). */
static void cq_swap(kinet_cq **slot, kinet_cq **keep, kinet_cq *with)
{
	atomic_fetch_add(&with->refs, 1);
	atomic_fetch_sub(&(*slot)->refs, 1);
	*keep = *slot;
	__atomic_store_n(slot, with, __ATOMIC_RELEASE);
}

static struct ibv_qp *raw_fail(int e, const char *what)
{
	KLOG_ERR("emulated raw packet QP: %s", what);
	errno = e;
	return NULL;
}

static struct ibv_qp *emu_create_raw_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct emu_pd *p = (struct emu_pd *)pd;
	if (!ia->send_cq || ia->send_cq->context != pd->context || ia->srq)
		return raw_fail(EINVAL, "needs a send CQ of the same context and no SRQ");
	if (ia->cap.max_recv_wr || ia->cap.max_recv_sge)
		return raw_fail(EINVAL, "the emulation's raw packet QPs send only (receive "
					"through a WQ, an indirection table and a hashing QP)");
	if (ia->cap.max_send_wr == 0 || ia->cap.max_send_wr > EMU_RAW_MAX_WR ||
	    ia->cap.max_send_sge > 30 || ia->cap.max_inline_data > 512)
		return raw_fail(EINVAL, "capabilities beyond the device's");
	kinet_eth_port *port = pd_port(p);
	if (!port)
		return raw_fail(ENOMEM, "no Ethernet port behind the device");
	/* the mlx5 provider's raw send WQE: ctrl + eth (16 inline bytes) + the
	 * gather list */
	uint32_t wqe = 16 + 32 + ia->cap.max_send_sge * 16;
	uint32_t nbb = (wqe + KN_SEND_WQE_BB - 1) / KN_SEND_WQE_BB;
	struct kinet_eth_txq_attr ta;
	memset(&ta, 0, sizeof(ta));
	ta.depth = kinet_pow2(ia->cap.max_send_wr * nbb);
	ta.db_mode = KN_DB_GPU;
	struct emu_qp *q = calloc(1, sizeof(*q));
	if (!q)
		return raw_fail(ENOMEM, "no memory");
	if (kinet_eth_txq_create(port, &ta, &q->etx)) {
		free(q);
		return raw_fail(ENOMEM, "no send queue");
	}
	kinet_qp *s = kinet_eth_txq_qp(q->etx);
	struct emu_cq *c = (struct emu_cq *)ia->send_cq;
	if (c->scq->cnt < s->sq_cnt) {
		kinet_eth_txq_destroy(q->etx);
		free(q);
		return raw_fail(EINVAL, "the send CQ is smaller than the send queue");
	}
	cq_swap(&s->scq, &q->etx_own_cq, c->scq);
	q->d = dev_of(pd->context);
	q->qp.context = pd->context;
	q->qp.qp_context = ia->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.qp_num = s->qpn;
	q->qp.handle = s->qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RAW_PACKET;
	ia->cap.max_send_wr = s->sq_cnt / nbb;
	return &q->qp;
}

/* ibv_create_qp_ex: a raw packet QP hashing into an indirection table. */
static struct ibv_qp *emu_create_rc_qp_ex(struct ibv_context *ib, struct ibv_qp_init_attr_ex *a);
static struct ibv_qp *rc_fail(int e, const char *what);

static struct ibv_qp *emu_create_qp_ex(struct ibv_context *ib, struct ibv_qp_init_attr_ex *a)
{
	called("create_qp_ex");
	if (a && a->qp_type == IBV_QPT_RC)
		return emu_create_rc_qp_ex(ib, a);
	if (!a)
		return rc_fail(EINVAL, "ibv_create_qp_ex: no attributes (EINVAL)");
	if (a->qp_type != IBV_QPT_RAW_PACKET) {
		KLOG_ERR("kinet-verbs: ibv_create_qp_ex of QP type %d: only RC QPs are supported "
			 "(EOPNOTSUPP)",
			 (int)a->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE))
		return raw_fail(EOPNOTSUPP, "ibv_create_qp_ex: a raw packet QP without an "
					    "indirection table is not supported (EOPNOTSUPP)");
	const uint32_t need = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE |
			      IBV_QP_INIT_ATTR_RX_HASH;
	if (!a || a->qp_type != IBV_QPT_RAW_PACKET || (a->comp_mask & need) != need ||
	    (a->comp_mask & ~need) || !a->pd || a->pd->context != ib || !a->rwq_ind_tbl)
		return raw_fail(EINVAL, "ibv_create_qp_ex: only a raw packet QP with a PD, an "
					"indirection table and an RX hash");
	const struct ibv_rx_hash_conf *h = &a->rx_hash_conf;
	static const uint8_t std_key[40] = {
		0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
		0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
		0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
	};
	if (h->rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ || h->rx_hash_key_len != 40 ||
	    !h->rx_hash_key || memcmp(h->rx_hash_key, std_key, 40) ||
	    (h->rx_hash_fields_mask & ~(uint64_t)0xffu))
		return raw_fail(EINVAL,
				"the RX hash: Toeplitz over IP addresses and ports, with the "
				"standard key (what the software NIC computes)");
	struct emu_qp *q = calloc(1, sizeof(*q));
	if (!q)
		return raw_fail(ENOMEM, "no memory");
	q->rss = ((struct emu_ind *)a->rwq_ind_tbl)->wq;
	q->d = dev_of(ib);
	q->qp.context = ib;
	q->qp.pd = a->pd;
	pthread_mutex_lock(&emu_lock);
	q->qp.qp_num = next_cqn++;
	pthread_mutex_unlock(&emu_lock);
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RAW_PACKET;
	return &q->qp;
}

/* ibv_create_qp_ex of an RC QP: ibv_create_qp's QP, extended (its
 * ibv_qp_ex builders, data.c) when send_ops_flags are given. */
static struct ibv_qp *rc_fail(int e, const char *what)
{
	KLOG_ERR("kinet-verbs: %s", what);
	errno = e;
	return NULL;
}

static struct ibv_qp *emu_create_rc_qp_ex(struct ibv_context *ib, struct ibv_qp_init_attr_ex *a)
{
	const uint32_t ok = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			    IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ib)
		return rc_fail(EINVAL, "ibv_create_qp_ex: an RC QP needs a PD of this context");
	if ((a->comp_mask & ~ok) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) && a->max_tso_header))
		return rc_fail(EOPNOTSUPP, "ibv_create_qp_ex: an RC QP takes a PD, an SRQ and "
					    "send_ops_flags only (no create flags, TSO, XRC or RSS)");
	bool ex = a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	/* ibv_qp_init_attr is the start of ibv_qp_init_attr_ex (the caps come back there) */
	struct ibv_qp *qp = emu_create_qp(a->pd, (struct ibv_qp_init_attr *)a);
	if (!qp || !ex)
		return qp;
	int rc = emu_data_qpx_init((struct emu_qp *)qp, a->send_ops_flags);
	if (rc) {
		emu_destroy_qp(qp);
		errno = -rc;
		return NULL;
	}
	return qp;
}

/* mlx5dv_create_qp: a DCT, the target side of the dynamically connected
 * transport (nic/soft/dc.h): a PD, an SRQ whose WQEs take its sends, the
 * CQ of their completions and the access key DCIs must present. A DCI is
 * made with DevX (CREATE_QP, st DCI); with no mlx5 attributes the QP is
 * ibv_create_qp_ex's. */
static struct ibv_qp *emu_dv_create_qp(struct ibv_context *ib, struct ibv_qp_init_attr_ex *a,
				       struct mlx5dv_qp_init_attr *dv)
{
	called("mlx5dv_create_qp");
	if (!a)
		return rc_fail(EINVAL, "mlx5dv_create_qp: no attributes (EINVAL)");
	if (!dv || dv->comp_mask == 0)
		return emu_create_qp_ex(ib, a);
	if (dv->comp_mask != MLX5DV_QP_INIT_ATTR_MASK_DC)
		return rc_fail(EOPNOTSUPP, "mlx5dv_create_qp: of the mlx5 attributes, only the DC "
					    "type is supported (no create flags, send ops or DCI "
					    "streams) (EOPNOTSUPP)");
	if (dv->dc_init_attr.dc_type != MLX5DV_DCTYPE_DCT)
		return rc_fail(EOPNOTSUPP, "mlx5dv_create_qp: a DCI is made with DevX (CREATE_QP "
					    "of st DCI), not here (EOPNOTSUPP)");
	if (a->qp_type != IBV_QPT_DRIVER || !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != ib || (a->comp_mask & ~(uint32_t)IBV_QP_INIT_ATTR_PD))
		return rc_fail(EINVAL, "mlx5dv_create_qp: a DCT is of type IBV_QPT_DRIVER with a "
				       "PD of this context and nothing else in comp_mask (EINVAL)");
	if (!a->srq || a->srq->context != ib || !a->recv_cq || a->recv_cq->context != ib ||
	    (a->send_cq && a->send_cq->context != ib))
		return rc_fail(EINVAL, "mlx5dv_create_qp: a DCT needs an SRQ and a receive CQ of "
				       "this context (EINVAL)");
	struct emu_pd *p = (struct emu_pd *)a->pd;
	struct emu_qp *q = calloc(1, sizeof(*q));
	if (!q)
		return rc_fail(ENOMEM, "mlx5dv_create_qp: no memory");
	/* no send queue of its own: the smallest the software NIC makes */
	struct kinet_qp_attr qa = {
		.sq_depth = 1,
		.send_cq = ((struct emu_cq *)a->recv_cq)->scq,
		.db_mode = KN_DB_GPU,
		.rnr_retry = 7,
	};
	int rc = kinet_qp_create(p->spd, &qa, &q->sqp);
	if (!rc && (rc = kinet_qp_set_srq(q->sqp, ((struct emu_srq *)a->srq)->s,
					  ((struct emu_cq *)a->recv_cq)->scq)) == 0)
		rc = kinet_qp_set_dc(q->sqp, KINET_DC_DCT, dv->dc_init_attr.dct_access_key);
	if (rc) {
		if (q->sqp)
			kinet_qp_destroy(q->sqp);
		free(q);
		return rc_fail(-rc, "mlx5dv_create_qp: the software NIC refused the DCT");
	}
	q->srq = (struct emu_srq *)a->srq;
	q->dc = KINET_DC_DCT;
	q->d = dev_of(ib);
	q->qp.context = ib;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = a->pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.srq = a->srq;
	/* the number DCIs name in their address vectors: the software NIC's,
	 * which it finds the DCT by */
	q->qp.qp_num = q->sqp->qpn;
	q->qp.handle = q->qp.qp_num;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_DRIVER;
	pthread_mutex_lock(&emu_lock);
	q->next = all_qps;
	all_qps = q;
	pthread_mutex_unlock(&emu_lock);
	return &q->qp;
}

static int emu_destroy_raw_qp(struct emu_qp *q)
{
	if (q->etx) {
		kinet_qp *s = kinet_eth_txq_qp(q->etx);
		kinet_cq *verbs_cq;
		cq_swap(&s->scq, &verbs_cq, q->etx_own_cq);
		int rc = kinet_eth_txq_destroy(q->etx);
		if (rc)
			return -rc;
	}
	free(q);
	return 0;
}

/* The states of a raw packet QP: RESET -> INIT (port), INIT -> RTR -> RTS. */
static int emu_modify_raw_qp(struct emu_qp *q, struct ibv_qp_attr *a, int mask)
{
	int from = (int)q->qp.state, to = (int)a->qp_state;
	if (!(mask & IBV_QP_STATE))
		return modify_fail(q, "IBV_QP_STATE missing");
	bool ok = to == IBV_QPS_RESET || to == IBV_QPS_ERR ||
		  (from == IBV_QPS_RESET && to == IBV_QPS_INIT && (mask & IBV_QP_PORT) &&
		   a->port_num == 1) ||
		  (from == IBV_QPS_INIT && to == IBV_QPS_RTR) ||
		  (from == IBV_QPS_RTR && to == IBV_QPS_RTS);
	if (!ok)
		return modify_fail(q,
				   "raw packet QP: an illegal transition, or INIT without port 1");
	if (q->etx && (to == IBV_QPS_RESET || (from == IBV_QPS_ERR && to != IBV_QPS_ERR)))
		kinet_eth_txq_reset(q->etx);
	q->qp.state = (enum ibv_qp_state)to;
	return 0;
}

static struct ibv_wq *wq_new(struct ibv_context *ib, struct ibv_wq_init_attr *a, int striding,
			     uint32_t log_stride, uint32_t log_strides)
{
	if (!a || a->wq_type != IBV_WQT_RQ || a->max_wr == 0 || a->max_wr > EMU_RAW_MAX_WR ||
	    a->max_sge != 1 || !a->pd || !a->cq || a->pd->context != ib || a->cq->context != ib ||
	    (a->comp_mask & ~(uint32_t)IBV_WQ_INIT_ATTR_FLAGS) ||
	    ((a->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && a->create_flags)) {
		KLOG_ERR("emulated create_wq: a receive WQ of 1 .. %u WQEs of one SGE, with a PD "
			 "and a CQ of this context, no flags",
			 EMU_RAW_MAX_WR);
		errno = EINVAL;
		return NULL;
	}
	kinet_eth_port *port = pd_port((struct emu_pd *)a->pd);
	struct emu_wq *w = calloc(1, sizeof(*w));
	if (!w || !port) {
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	struct kinet_eth_rxq_attr ra;
	memset(&ra, 0, sizeof(ra));
	ra.depth = kinet_pow2(a->max_wr);
	ra.flags = KINET_ETH_RXQ_RAW;
	if (striding) {
		ra.mode = KINET_ETH_RXQ_STRIDING;
		ra.log_stride = log_stride;
		ra.log_strides = log_strides;
	}
	if (kinet_eth_rxq_create(port, &ra, &w->rx)) {
		free(w);
		errno = EINVAL;
		return NULL;
	}
	struct kinet_eth_rxq_ring rg;
	kinet_eth_rxq_ring(w->rx, &rg);
	struct emu_cq *c = (struct emu_cq *)a->cq;
	kinet_cq **slot = &w->rx->cq;
	if (c->scq->cnt < rg.wqe_cnt) {
		kinet_eth_rxq_destroy(w->rx);
		free(w);
		KLOG_ERR("emulated create_wq: the CQ is smaller than the WQ");
		errno = EINVAL;
		return NULL;
	}
	cq_swap(slot, &w->own_cq, c->scq);
	w->wq.context = ib;
	w->wq.wq_context = a->wq_context;
	w->wq.pd = a->pd;
	w->wq.cq = a->cq;
	w->wq.wq_num = rg.rqn;
	w->wq.handle = rg.rqn;
	w->wq.state = IBV_WQS_RESET;
	w->wq.wq_type = IBV_WQT_RQ;
	a->max_wr = rg.wqe_cnt;
	return &w->wq;
}

static struct ibv_wq *emu_create_wq(struct ibv_context *ib, struct ibv_wq_init_attr *a)
{
	called("create_wq");
	return wq_new(ib, a, 0, 0, 0);
}

/* The striding receive limits the emulated device reports (a ConnectX-6's). */
#define EMU_STRIDE_LOG_MIN 6u
#define EMU_STRIDE_LOG_MAX 13u
#define EMU_STRIDES_LOG_MIN 3u
#define EMU_STRIDES_LOG_MAX 16u

static struct ibv_wq *emu_dv_create_wq(struct ibv_context *ib, struct ibv_wq_init_attr *a,
				       struct mlx5dv_wq_init_attr *dv)
{
	called("create_wq");
	if (!dv || !(dv->comp_mask & MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ))
		return wq_new(ib, a, 0, 0, 0);
	const struct mlx5dv_striding_rq_init_attr *s = &dv->striding_rq_attrs;
	if (s->single_stride_log_num_of_bytes < EMU_STRIDE_LOG_MIN ||
	    s->single_stride_log_num_of_bytes > EMU_STRIDE_LOG_MAX ||
	    s->single_wqe_log_num_of_strides < EMU_STRIDES_LOG_MIN ||
	    s->single_wqe_log_num_of_strides > EMU_STRIDES_LOG_MAX || s->two_byte_shift_en) {
		KLOG_ERR("emulated mlx5dv_create_wq: striding parameters outside the device's "
			 "limits (or two-byte shift, which the emulation lacks)");
		errno = EINVAL;
		return NULL;
	}
	return wq_new(ib, a, 1, s->single_stride_log_num_of_bytes,
		      s->single_wqe_log_num_of_strides);
}

static int emu_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	if (!(a->attr_mask & IBV_WQ_ATTR_STATE) || a->wq_state > IBV_WQS_ERR ||
	    (a->attr_mask & ~(uint32_t)(IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE)))
		return EINVAL;
	if ((a->attr_mask & IBV_WQ_ATTR_CURR_STATE) && a->curr_wq_state != wq->state)
		return EINVAL;
	wq->state = a->wq_state;
	return 0;
}

static int emu_destroy_wq(struct ibv_wq *wq)
{
	struct emu_wq *w = (struct emu_wq *)wq;
	kinet_cq *verbs_cq;
	cq_swap(&w->rx->cq, &verbs_cq, w->own_cq);
	int rc = kinet_eth_rxq_destroy(w->rx);
	if (rc) {
		cq_swap(&w->rx->cq, &w->own_cq, verbs_cq);
		return -rc;
	}
	free(w);
	return 0;
}

static struct ibv_rwq_ind_table *emu_create_ind(struct ibv_context *ib,
						struct ibv_rwq_ind_table_init_attr *a)
{
	called("create_rwq_ind_table");
	if (!a || a->log_ind_tbl_size != 0 || !a->ind_tbl || !a->ind_tbl[0] || a->comp_mask ||
	    a->ind_tbl[0]->context != ib) {
		KLOG_ERR("emulated create_rwq_ind_table: tables of one WQ of this context only");
		errno = EINVAL;
		return NULL;
	}
	struct emu_ind *t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->wq = (struct emu_wq *)a->ind_tbl[0];
	t->t.context = ib;
	pthread_mutex_lock(&emu_lock);
	t->t.ind_tbl_num = (int)next_cqn++;
	pthread_mutex_unlock(&emu_lock);
	return &t->t;
}

static int emu_destroy_ind(struct ibv_rwq_ind_table *t)
{
	free(t);
	return 0;
}

static bool all_ff(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0xff)
			return false;
	return true;
}
static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* A mask field: all ones (matched), zero (not), anything else refused. */
#define MASKED(field, out_bit)                                                       \
	do {                                                                         \
		if (all_ff(&(field), sizeof(field)))                                 \
			m.fields |= (out_bit);                                       \
		else if (!all_zero(&(field), sizeof(field)))                         \
			return flow_fail("a partial mask (the emulation matches whole fields)"); \
	} while (0)

static struct ibv_flow *flow_fail(const char *what)
{
	KLOG_ERR("emulated ibv_create_flow: %s", what);
	errno = EINVAL;
	return NULL;
}

static struct ibv_flow *emu_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	called("create_flow");
	struct emu_qp *q = (struct emu_qp *)qp;
	if (qp->qp_type != IBV_QPT_RAW_PACKET || !q->rss)
		return flow_fail("the QP is not a hashing raw packet QP");
	if (a->comp_mask || a->type != IBV_FLOW_ATTR_NORMAL || a->port != 1 || a->flags ||
	    a->priority > 7 || a->size < sizeof(*a))
		return flow_fail("attributes: a normal rule of port 1, priority 0 .. 7, no flags");
	struct kinet_eth_match m;
	memset(&m, 0, sizeof(m));
	m.priority = a->priority;
	const uint8_t *p = (const uint8_t *)(a + 1), *end = (const uint8_t *)a + a->size;
	int l3 = 0;
	for (int i = 0; i < a->num_of_specs; i++) {
		/* the specs follow the attributes unpadded (4-byte aligned, as
		 * the kernel takes them): read each through an aligned copy */
		if (p + 8 > end)
			return flow_fail("a spec beyond the rule's size");
		struct ibv_flow_spec spc;
		size_t avail = (size_t)(end - p);
		memset(&spc, 0, sizeof(spc));
		memcpy(&spc, p, avail < sizeof(spc) ? avail : sizeof(spc));
		const struct ibv_flow_spec *sp = &spc;
		if (p + sp->hdr.size > end)
			return flow_fail("a spec beyond the rule's size");
		switch (sp->hdr.type) {
		case IBV_FLOW_SPEC_ETH: {
			const struct ibv_flow_spec_eth *e = &sp->eth;
			if (sp->hdr.size != sizeof(*e) || !all_zero(e->mask.src_mac, 6) ||
			    e->mask.vlan_tag)
				return flow_fail("Ethernet spec: its size, or a source MAC / VLAN");
			MASKED(e->mask.dst_mac, KINET_ETH_MATCH_DST_MAC);
			MASKED(e->mask.ether_type, KINET_ETH_MATCH_ETHERTYPE);
			memcpy(m.dst_mac, e->val.dst_mac, 6);
			m.ethertype = kn_be16toh(e->val.ether_type);
			break;
		}
		case IBV_FLOW_SPEC_IPV4: {
			const struct ibv_flow_spec_ipv4 *v = &sp->ipv4;
			if (sp->hdr.size != sizeof(*v) || v->mask.src_ip)
				return flow_fail("IPv4 spec: its size, or a source match");
			MASKED(v->mask.dst_ip, KINET_ETH_MATCH_IPV4_DST);
			memcpy(m.ip_dst, &v->val.dst_ip, 4);
			l3 = 4;
			break;
		}
		case IBV_FLOW_SPEC_IPV4_EXT: {
			const struct ibv_flow_spec_ipv4_ext *v = &sp->ipv4_ext;
			if (sp->hdr.size != sizeof(*v) || v->mask.src_ip || v->mask.tos ||
			    v->mask.ttl || v->mask.flags)
				return flow_fail(
					"IPv4 spec: its size, or a source / TOS / TTL match");
			MASKED(v->mask.dst_ip, KINET_ETH_MATCH_IPV4_DST);
			memcpy(m.ip_dst, &v->val.dst_ip, 4);
			MASKED(v->mask.proto, KINET_ETH_MATCH_IP_PROTO);
			m.ip_proto = v->val.proto;
			l3 = 4;
			break;
		}
		case IBV_FLOW_SPEC_IPV6: {
			const struct ibv_flow_spec_ipv6 *v = &sp->ipv6;
			if (sp->hdr.size != sizeof(*v) || !all_zero(v->mask.src_ip, 16) ||
			    v->mask.flow_label || v->mask.traffic_class || v->mask.hop_limit)
				return flow_fail("IPv6 spec: its size, or a source / label match");
			MASKED(v->mask.dst_ip, KINET_ETH_MATCH_IPV6_DST);
			memcpy(m.ip_dst, v->val.dst_ip, 16);
			MASKED(v->mask.next_hdr, KINET_ETH_MATCH_IP_PROTO);
			m.ip_proto = v->val.next_hdr;
			l3 = 6;
			break;
		}
		case IBV_FLOW_SPEC_TCP:
		case IBV_FLOW_SPEC_UDP: {
			const struct ibv_flow_spec_tcp_udp *t = &sp->tcp_udp;
			if (sp->hdr.size != sizeof(*t) || t->mask.src_port)
				return flow_fail("TCP/UDP spec: its size, or a source port match");
			if (!l3)
				return flow_fail("a TCP/UDP spec without an IP spec before it");
			m.fields |= KINET_ETH_MATCH_IP_PROTO;
			m.ip_proto = sp->hdr.type == IBV_FLOW_SPEC_TCP ? 6 : 17;
			MASKED(t->mask.dst_port, KINET_ETH_MATCH_L4_DST_PORT);
			m.l4_dst_port = kn_be16toh(t->val.dst_port);
			break;
		}
		default:
			return flow_fail("a spec type the emulation does not take");
		}
		p += sp->hdr.size;
	}
	if (p != end)
		return flow_fail("the rule's size disagrees with its specs");
	/* an IP spec matching no field still says which IP version */
	if (l3 && !(m.fields & (KINET_ETH_MATCH_IPV4_DST | KINET_ETH_MATCH_IPV6_DST)) &&
	    !(m.fields & KINET_ETH_MATCH_ETHERTYPE)) {
		m.fields |= KINET_ETH_MATCH_ETHERTYPE;
		m.ethertype = l3 == 4 ? 0x0800 : 0x86dd;
	}
	struct emu_flow *f = calloc(1, sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = kinet_eth_flow_create(q->rss->rx, &m, &f->f);
	if (rc) {
		free(f);
		errno = -rc;
		return NULL;
	}
	f->flow.context = qp->context;
	return &f->flow;
}

static int emu_destroy_flow(struct ibv_flow *fl)
{
	struct emu_flow *f = (struct emu_flow *)fl;
	int rc = kinet_eth_flow_destroy(f->f);
	if (rc)
		return -rc;
	free(f);
	return 0;
}

static int emu_dv_query_device(struct ibv_context *ib, struct mlx5dv_context *a)
{
	(void)ib;
	uint64_t want = a->comp_mask;
	memset(a, 0, sizeof(*a));
	a->version = 1;
	if (want & MLX5DV_CONTEXT_MASK_STRIDING_RQ) {
		a->comp_mask |= MLX5DV_CONTEXT_MASK_STRIDING_RQ;
		a->striding_rq_caps.min_single_stride_log_num_of_bytes = EMU_STRIDE_LOG_MIN;
		a->striding_rq_caps.max_single_stride_log_num_of_bytes = EMU_STRIDE_LOG_MAX;
		a->striding_rq_caps.min_single_wqe_log_num_of_strides = EMU_STRIDES_LOG_MIN;
		a->striding_rq_caps.max_single_wqe_log_num_of_strides = EMU_STRIDES_LOG_MAX;
		a->striding_rq_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
	}
	return 0;
}

/* ---- the GPU side --------------------------------------------------------------------- */

static bool real_gpu(void)
{
	return cfg.gpu == KINET_EMU_GPU_REAL;
}

static int emu_gpu_count(void)
{
	if (real_gpu())
		return kinet_cudrv_gpu_count();
	return cfg.gpu ? 1 : 0;
}

static int emu_gpu_map(void *p, size_t len, int io, void **devp)
{
	called("gpu_map");
	if (!cfg.gpu)
		return -ENODEV;
	if (io && cfg.gpu_map_fails)
		return -EIO;
	if (real_gpu())
		return kinet_cudrv_map(p, len, io, devp);
	*devp = p; /* unified addressing: the GPU sees the host address */
	return 0;
}

static int emu_gpu_unmap(void *p)
{
	called("gpu_unmap");
	return real_gpu() ? kinet_cudrv_unmap(p) : 0;
}

static int emu_dmabuf_supported(void)
{
	if (real_gpu()) {
		struct kinet_gpu_info g;
		return kinet_cudrv_gpu_info(0, &g) == 0 && g.dmabuf;
	}
	return cfg.gpu && cfg.dmabuf;
}

/* Real GPU memory (the emulation runs on a GPU machine) or emulated. */
static int emu_mem_kind(const void *p)
{
	if (is_gpu(p, 1))
		return KINET_MEM_CUDA;
	if (real_gpu()) {
		const struct kinet_cuda_ops *cu = kinet_cuda_load();
		int k = cu && cu->pointer_kind ? cu->pointer_kind(p) : kinet_cudrv_mem_kind(p);
		return k < 0 ? KINET_MEM_HOST : k;
	}
	return KINET_MEM_HOST;
}

static int record_dmabuf(int f, uintptr_t base, size_t span)
{
	pthread_mutex_lock(&emu_lock);
	int slot = -1;
	for (int i = 0; i < 16; i++)
		if (!dmabufs[i].len || dmabufs[i].fd == f) {
			slot = i;
			break;
		}
	if (slot >= 0) {
		dmabufs[slot].fd = f;
		dmabufs[slot].base = base;
		dmabufs[slot].len = span;
	}
	pthread_mutex_unlock(&emu_lock);
	return slot < 0 ? -ENOSPC : 0;
}

static int emu_dmabuf_fd(void *p, size_t len, int *fd, uint64_t *offset)
{
	called("dmabuf_fd");
	if (real_gpu() && !is_gpu(p, len)) {
		/* a real dma-buf of real GPU memory; remember where it starts */
		int rc = kinet_cudrv_dmabuf_fd(p, len, fd, offset);
		if (rc)
			return rc;
		uintptr_t base = (uintptr_t)p - *offset;
		rc = record_dmabuf(*fd, base, ((uintptr_t)p + len - base + 4095) & ~(size_t)4095);
		if (rc)
			close(*fd);
		return rc;
	}
	if (!cfg.gpu || !cfg.dmabuf || !is_gpu(p, len))
		return -ENOTSUP;
	uintptr_t base = (uintptr_t)p & ~(uintptr_t)4095;
	int f = eventfd(0, EFD_CLOEXEC); /* a real descriptor the caller closes */
	if (f < 0)
		return -errno;
	int rc = record_dmabuf(f, base, ((uintptr_t)p + len - base + 4095) & ~(size_t)4095);
	if (rc) {
		close(f);
		return rc;
	}
	*fd = f;
	*offset = (uint64_t)((uintptr_t)p - base);
	return 0;
}

static int emu_peermem_loaded(void)
{
	return real_gpu() ? kinet_peermem_loaded() : cfg.peermem;
}

/* Queue memory "on the GPU": the software NIC is a CPU and must reach it, so
 * it is host memory, declared GPU memory (emulated GPU) or mapped into the
 * real GPU (kinet_queue_alloc). */
static struct {
	void *p;
	size_t len;
} qallocs[64];

static int emu_gpu_alloc(size_t len, void **p)
{
	if (!cfg.gpu)
		return -ENODEV;
	size_t sz = (len + 4095) & ~(size_t)4095;
	if (real_gpu()) {
		*p = kinet_queue_alloc(sz);
		if (!*p)
			return -ENOMEM;
		pthread_mutex_lock(&emu_lock);
		for (int i = 0; i < 64; i++)
			if (!qallocs[i].p) {
				qallocs[i].p = *p;
				qallocs[i].len = sz;
				break;
			}
		pthread_mutex_unlock(&emu_lock);
		return 0;
	}
	*p = aligned_alloc(4096, sz);
	if (!*p)
		return -ENOMEM;
	int rc = kinet_mlx5_emu_gpu_range(*p, sz);
	if (rc) {
		free(*p);
		return rc;
	}
	return 0;
}

static int emu_gpu_free(void *p)
{
	if (real_gpu()) {
		size_t len = 0;
		pthread_mutex_lock(&emu_lock);
		for (int i = 0; i < 64; i++)
			if (qallocs[i].p == p) {
				len = qallocs[i].len;
				qallocs[i].p = NULL;
				break;
			}
		pthread_mutex_unlock(&emu_lock);
		kinet_queue_free(p, len ? len : 4096);
	} else {
		gpu_range_remove(p);
		free(p);
	}
	return 0;
}

static int emu_gpu_memset(void *p, int v, size_t n)
{
	memset(p, v, n);
	return 0;
}

static int emu_gpu_read(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

static int emu_gpu_write(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

/* ---- DevX: PRM commands decoded with the same field tables ------------------- */

struct emu_umem {
	struct mlx5dv_devx_umem u;
	struct emu_dev *d;
	uint8_t *addr;
	size_t size;
	int refs; /* DevX objects whose queues or records lie in it (emu_lock) */
	struct emu_umem *next;
};

struct emu_uar {
	struct mlx5dv_devx_uar u;
	struct emu_dev *d;
	uint8_t *page;
	int refs;   /* QPs whose doorbell register it is (emu_lock) */
	bool freed; /* mlx5dv_devx_free_uar came while QPs used it */
	struct emu_uar *next;
};

#define KINET_EMU_QPC_BYTES 232 /* the QP context: 0x740 bits */
#define KINET_EMU_QPC_AT 24      /* its byte offset in CREATE_QP, modify and QUERY_QP */

/* Completes rdma-core's opaque type for the objects of the emulation. */
struct mlx5dv_devx_obj {
	int type; /* 1 CQ, 2 QP */
	struct emu_dev *d;
	struct ibv_context *ib;
	uint32_t num;
	kinet_cq *scq; /* CQ: a software-NIC CQ whose buffers are the umem's */
	uint8_t *orig_buf;
	volatile uint32_t *orig_dbrec;
	struct emu_qp *q; /* QP: an emulated QP whose queues are the umem's */
	uint8_t *orig_sq, *orig_rq;
	volatile uint8_t *orig_db;
	volatile uint32_t *orig_qdbr;
	struct emu_umem *um[2]; /* the umems of its queue and of its doorbell record */
	struct emu_uar *uar;    /* QP: the UAR of its doorbell register */
	/* QP: its context as created and as the modifies so far set it (QUERY_QP) */
	uint8_t qpc0[KINET_EMU_QPC_BYTES], qpc[KINET_EMU_QPC_BYTES];
	struct mlx5dv_devx_obj *next;
};

static struct emu_umem *umems;
static struct emu_uar *uars;
static struct mlx5dv_devx_obj *dobjs;
static uint32_t next_umem = 0x1000, next_uar_page = 0x20;
#define EMU_EQN 5

static bool devx_ctx(struct ibv_context *ib)
{
	return ctx_of(ib)->devx && cfg.devx;
}

static struct ibv_context *emu_dv_open_device(struct ibv_device *dev,
					      struct mlx5dv_context_attr *attr)
{
	if (!cfg.devx && attr && (attr->flags & MLX5DV_CONTEXT_FLAGS_DEVX)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_context *ib = emu_open_device(dev);
	/* kinet-verbs: rdma-core 44's mlx5 provider asks for a DevX context
	 * whatever the flags (and ibv_open_device too), and gets one where the
	 * kernel allows it: kinet's device allows it */
	if (ib && attr)
		ctx_of(ib)->devx = (attr->flags & MLX5DV_CONTEXT_FLAGS_DEVX) != 0 || cfg.host;
	return ib;
}

static int emu_devx_query_eqn(struct ibv_context *ib, uint32_t vector, uint32_t *eqn)
{
	if (!devx_ctx(ib) || vector != 0)
		return EOPNOTSUPP;
	*eqn = EMU_EQN;
	return 0;
}

static struct mlx5dv_devx_umem *umem_make(struct ibv_context *ib, void *addr, size_t size)
{
	called("devx_umem_reg");
	struct emu_umem *u = calloc(1, sizeof(*u));
	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->d = dev_of(ib);
	u->addr = addr;
	u->size = size;
	pthread_mutex_lock(&emu_lock);
	u->u.umem_id = next_umem++;
	u->next = umems;
	umems = u;
	pthread_mutex_unlock(&emu_lock);
	return &u->u;
}

static struct mlx5dv_devx_umem *emu_umem_reg(struct ibv_context *ib, void *addr, size_t size,
					     uint32_t access)
{
	(void)access;
	if (!devx_ctx(ib) || !addr || !size) {
		errno = !devx_ctx(ib) ? EOPNOTSUPP : EINVAL;
		KLOG_ERR("DevX umem_reg: %s", !devx_ctx(ib) ? "the context was not opened for DevX"
							   : "no address or no size");
		return NULL;
	}
	if (cfg.host && kinet_cudrv_mem_kind(addr) == KINET_MEM_CUDA) {
		/* kinet-verbs: the software NIC's CPU engine reads queues and
		 * doorbell records with the CPU, and the GPU engine takes a QP
		 * over only from it; neither reads a queue in GPU memory */
		KLOG_ERR("kinet-verbs: mlx5dv_devx_umem_reg: %p is GPU memory; the software NIC "
			 "serves DevX queues and doorbell records in host memory only (EOPNOTSUPP)",
			 addr);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (emu_mem_kind(addr) == KINET_MEM_CUDA && !emu_peermem_loaded()) {
		errno = EFAULT; /* GPU memory without peer memory */
		return NULL;
	}
	return umem_make(ib, addr, size);
}

static struct mlx5dv_devx_umem *emu_umem_reg_ex(struct ibv_context *ib,
						struct mlx5dv_devx_umem_in *in)
{
	if (!(in->comp_mask & MLX5DV_UMEM_MASK_DMABUF))
		return emu_umem_reg(ib, in->addr, in->size, in->access);
	if (!devx_ctx(ib) || cfg.host) {
		/* kinet-verbs: a dma-buf is GPU memory, whose queues the
		 * software NIC cannot read (emu_umem_reg) */
		KLOG_ERR("DevX umem_reg_ex: %s (EOPNOTSUPP)",
			 !devx_ctx(ib) ? "the context was not opened for DevX"
				       : "a dma-buf umem: the software NIC serves DevX queues and "
					 "doorbell records in host memory only");
		errno = EOPNOTSUPP;
		return NULL;
	}
	uintptr_t base = 0;
	size_t span = 0;
	pthread_mutex_lock(&emu_lock);
	for (int i = 0; i < 16; i++)
		if (dmabufs[i].fd == in->dmabuf_fd && dmabufs[i].len) {
			base = dmabufs[i].base;
			span = dmabufs[i].len;
			dmabufs[i].len = 0;
			dmabufs[i].fd = -1;
			break;
		}
	pthread_mutex_unlock(&emu_lock);
	called("devx_umem_reg_dmabuf");
	uintptr_t a = (uintptr_t)in->addr;
	if (!span || a < base || a + in->size > base + span) {
		errno = !span ? EBADF : EINVAL;
		return NULL;
	}
	return umem_make(ib, in->addr, in->size);
}

static int emu_umem_dereg(struct mlx5dv_devx_umem *um)
{
	struct emu_umem *u = (struct emu_umem *)um;
	pthread_mutex_lock(&emu_lock);
	if (u->refs) {
		pthread_mutex_unlock(&emu_lock);
		KLOG_ERR("DevX umem_dereg: umem 0x%x holds the queues of %d object(s) (EBUSY)",
			 u->u.umem_id, u->refs);
		return EBUSY;
	}
	for (struct emu_umem **pp = &umems; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	pthread_mutex_unlock(&emu_lock);
	free(u);
	return 0;
}

static struct mlx5dv_devx_uar *emu_alloc_uar(struct ibv_context *ib, uint32_t flags)
{
	unsigned bit = flags == KINET_UAR_ALLOC_BF ? 1u
		       : flags == KINET_UAR_ALLOC_NC ? 2u
		       : flags == KINET_UAR_ALLOC_NC_DEDICATED ? 4u
							 : 0u;
	called("devx_alloc_uar");
	if (!devx_ctx(ib) || !bit || (cfg.uar_refuse & bit)) {
		errno = !devx_ctx(ib) ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	struct emu_uar *u = calloc(1, sizeof(*u));
	uint8_t *page = kinet_queue_alloc(KN_UAR_PAGE_SIZE);
	if (!u || !page) {
		free(u);
		kinet_queue_free(page, KN_UAR_PAGE_SIZE);
		errno = ENOMEM;
		return NULL;
	}
	u->d = dev_of(ib);
	u->page = page;
	u->u.base_addr = page;
	u->u.reg_addr = page + KN_BF_OFFSET;
	pthread_mutex_lock(&emu_lock);
	u->u.page_id = next_uar_page++;
	u->next = uars;
	uars = u;
	pthread_mutex_unlock(&emu_lock);
	return &u->u;
}

static void emu_free_uar(struct mlx5dv_devx_uar *uar)
{
	struct emu_uar *u = (struct emu_uar *)uar;
	pthread_mutex_lock(&emu_lock);
	for (struct emu_uar **pp = &uars; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	int refs = u->refs;
	u->freed = refs > 0;
	pthread_mutex_unlock(&emu_lock);
	if (refs) {
		/* the software NIC reads the register while the QPs live: the
		 * page goes with the last of them (no command names it now) */
		KLOG_WARN("emulated DevX: UAR page 0x%x freed while %d QP(s) ring it; it stays "
			  "until they are destroyed", u->u.page_id, refs);
		return;
	}
	kinet_queue_free(u->page, KN_UAR_PAGE_SIZE);
	free(u);
}

static void uar_unref(struct emu_uar *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&emu_lock);
	bool last = --u->refs == 0 && u->freed;
	pthread_mutex_unlock(&emu_lock);
	if (last) {
		kinet_queue_free(u->page, KN_UAR_PAGE_SIZE);
		free(u);
	}
}

/* Lookups (emu_lock held). */
static uint8_t *umem_at(struct emu_dev *d, uint64_t id, uint64_t off, size_t len,
		       struct emu_umem **um)
{
	for (struct emu_umem *u = umems; u; u = u->next)
		if (u->u.umem_id == id && u->d == d) {
			*um = u;
			return off <= u->size && len <= u->size - off ? u->addr + off : NULL;
		}
	return NULL;
}

static struct emu_uar *uar_of(struct emu_dev *d, uint64_t page)
{
	for (struct emu_uar *u = uars; u; u = u->next)
		if (u->u.page_id == page && u->d == d)
			return u;
	return NULL;
}

static struct mlx5dv_devx_obj *cq_of(struct emu_dev *d, uint64_t cqn)
{
	for (struct mlx5dv_devx_obj *o = dobjs; o; o = o->next)
		if (o->type == 1 && o->num == cqn && o->d == d)
			return o;
	return NULL;
}

/* A verbs CQ of d by its number (mlx5dv_init_obj's cqn; emu_lock held). */
static kinet_cq *verbs_cq_of(struct emu_dev *d, uint32_t cqn)
{
	for (struct emu_cq *c = all_cqs; c; c = c->all_next)
		if (c->cqn == cqn && dev_of(c->cq.context) == d)
			return c->scq;
	return NULL;
}

static struct emu_pd *pd_of(struct emu_dev *d, uint64_t pdn)
{
	for (struct emu_pd *p = all_pds; p; p = p->next)
		if (p->spd->pdn == pdn && dev_of(p->pd.context) == d)
			return p;
	return NULL;
}

/* A refused command: status and syndrome in the output, as firmware does. */
static void *cmd_fail(void *out, size_t outlen, const char *what)
{
	KLOG_ERR("emulated DevX: %s", what);
	if (outlen >= 8) {
		memset(out, 0, 8);
		kinet_prm_set(&kinet_prm_cmd_out, out, "status", 0x3); /* bad parameter */
		kinet_prm_set(&kinet_prm_cmd_out, out, "syndrome", 0x4b1e0001);
	}
	errno = EREMOTEIO;
	return NULL;
}

/* The same for a command whose caller returns an error number. */
static int cmd_refuse(void *out, size_t outlen, const char *what)
{
	cmd_fail(out, outlen, what);
	return EREMOTEIO;
}

static uint64_t get_field(const struct kinet_prm_layout *l, const void *buf, const char *name)
{
	uint64_t v = 0;
	kinet_prm_get(l, buf, name, &v);
	return v;
}

#define GET(l, buf, name) get_field(&l, buf, name)

/* The capabilities the emulated device reports, as the PRM encodes them. */
static uint32_t emu_ts_cap(void)
{
	return cfg.ts_cap == 1   ? KINET_PRM_TS_CAP_FREE_RUNNING
	       : cfg.ts_cap == 2 ? KINET_PRM_TS_CAP_REAL_TIME
				 : KINET_PRM_TS_CAP_BOTH;
}
static uint32_t emu_log_max_msg(void) { return cfg.log_max_msg ? (uint32_t)cfg.log_max_msg : 30; }

/* Would firmware take a QP with this qpc.ts_format? */
static bool emu_ts_ok(uint64_t f)
{
	uint32_t cap = emu_ts_cap();
	if (f == KINET_PRM_TS_DEFAULT)
		return true;
	if (f == KINET_PRM_TS_FREE_RUNNING)
		return cap != KINET_PRM_TS_CAP_REAL_TIME;
	if (f == KINET_PRM_TS_REAL_TIME)
		return cap != KINET_PRM_TS_CAP_FREE_RUNNING;
	return false;
}

/* QUERY_ROCE_ADDRESS: entry roce_address_index of the port's GID table as
 * the NIC holds it (the GID, its RoCE version and L3 type, no VLAN, and the
 * MAC kinet-verbs gives that GID: the one a peer's ibv_create_ah resolves,
 * emu_mac). An entry of the table that holds no GID reads as zeros, as an
 * unset entry of a NIC's table does; an index past the table, a port other
 * than the one, or an InfiniBand port is refused. */
static void emu_mac(const uint8_t *gid, uint8_t mac[6]);
static int query_roce_address(const struct emu_dev *d, const void *in, size_t inlen, void *out,
			      size_t outlen)
{
	const struct kinet_prm_layout *L = &kinet_prm_query_roce_address_out;
	if (inlen < kinet_prm_bytes(&kinet_prm_query_roce_address_in) ||
	    outlen < kinet_prm_bytes(L))
		return cmd_refuse(out, outlen, "QUERY_ROCE_ADDRESS: a short input or output");
	uint64_t idx = GET(kinet_prm_query_roce_address_in, in, "roce_address_index");
	uint64_t port = GET(kinet_prm_query_roce_address_in, in, "vhca_port_num");
	uint32_t len = d->host ? EMU_HOST_GIDS : EMU_GIDS;
	if (d->link_layer != IBV_LINK_LAYER_ETHERNET)
		return cmd_refuse(out, outlen, "QUERY_ROCE_ADDRESS: the port is InfiniBand, "
					       "it has no RoCE addresses");
	if (port > 1)
		return cmd_refuse(out, outlen, "QUERY_ROCE_ADDRESS: the device has one port "
					       "(vhca_port_num 0 or 1)");
	if (idx >= len) {
		char why[96];
		snprintf(why, sizeof(why),
			 "QUERY_ROCE_ADDRESS: roce_address_index %llu past the GID table of %u",
			 (unsigned long long)idx, len);
		return cmd_refuse(out, outlen, why);
	}
	memset(out, 0, kinet_prm_bytes(L));
	struct ibv_gid_entry e;
	if (gid_entry(d, (uint32_t)idx, &e))
		return 0; /* an unset entry */
	uint8_t mac[6];
	emu_mac(e.gid.raw, mac);
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	kinet_prm_set_bytes(L, out, "roce_address.source_l3_address", e.gid.raw, 16);
	kinet_prm_set(L, out, "roce_address.source_mac_47_32", (uint64_t)mac[0] << 8 | mac[1]);
	kinet_prm_set(L, out, "roce_address.source_mac_31_0",
		      (uint64_t)mac[2] << 24 | (uint64_t)mac[3] << 16 | (uint64_t)mac[4] << 8 | mac[5]);
	kinet_prm_set(L, out, "roce_address.roce_l3_type",
		      memcmp(e.gid.raw, v4, 12) ? KINET_PRM_ROCE_L3_IPV6 : KINET_PRM_ROCE_L3_IPV4);
	kinet_prm_set(L, out, "roce_address.roce_version",
		      e.gid_type == IBV_GID_TYPE_ROCE_V2 ? KINET_PRM_ROCE_VERSION_2
							 : KINET_PRM_ROCE_VERSION_1);
	return 0;
}

static int emu_devx_general_cmd(struct ibv_context *ib, const void *in, size_t inlen,
				void *out, size_t outlen)
{
	called("devx_general_cmd");
	if (inlen < 16) {
		KLOG_ERR("DevX general_cmd: a short command (EINVAL)");
		errno = EINVAL;
		return EINVAL;
	}
	uint64_t op = GET(kinet_prm_query_hca_cap_in, in, "opcode");
	uint64_t mod = GET(kinet_prm_query_hca_cap_in, in, "op_mod");
	/* QUERY_HCA_CAP is on the kernel's list of commands any context may
	 * send (it runs them with the device's own DevX uid); the others need
	 * a context opened for DevX, as the kernel's EINVAL says */
	if (!devx_ctx(ib) && op != KINET_PRM_OP_QUERY_HCA_CAP) {
		KLOG_ERR("DevX general_cmd: opcode 0x%x on a context not opened for DevX "
			 "(mlx5dv_open_device with MLX5DV_CONTEXT_FLAGS_DEVX) (EINVAL)",
			 (unsigned)op);
		errno = EINVAL;
		return EINVAL;
	}
	/* commands that make or change objects are the kernel's to refuse as
	 * general commands (EINVAL) before any firmware sees them */
	if ((op >= 0x400 && op <= 0x40f) || (op >= 0x500 && op <= 0x51f) ||
	    (op >= 0x700 && op <= 0x70f)) { /* CQ, QP and SRQ commands */
		KLOG_ERR("DevX general_cmd: opcode 0x%x makes or changes an object: "
			 "mlx5dv_devx_obj_create and _modify take it (EINVAL)",
			 (unsigned)op);
		errno = EINVAL;
		return EINVAL;
	}
	if (op == KINET_PRM_OP_QUERY_ROCE_ADDRESS)
		return query_roce_address(dev_of(ib), in, inlen, out, outlen);
	size_t need = kinet_prm_bytes(&kinet_prm_query_hca_cap_out);
	if (op != KINET_PRM_OP_QUERY_HCA_CAP || outlen < need)
		return cmd_refuse(out, outlen, "general command: only QUERY_HCA_CAP and "
						 "QUERY_ROCE_ADDRESS, with a full output");
	memset(out, 0, need);
	uint32_t type = (uint32_t)(mod >> 1);
	const struct kinet_prm_layout *L = &kinet_prm_query_hca_cap_out;
	if (type == KINET_PRM_CAP_GENERAL) {
		uint32_t lbf = cfg.log_bf_reg_size ? (uint32_t)cfg.log_bf_reg_size : 9;
		kinet_prm_set(L, out, "capability.log_max_qp_sz", 15);
		/* the largest WQEs the software NIC executes: a send WQE of 63
		 * 16-byte units (the ctrl segment's ds), a receive WQE of
		 * KINET_MAX_RQ_SGE data segments; SRQs as ibv_query_device says */
		kinet_prm_set(L, out, "capability.max_wqe_sz_sq", 63 * 16);
		kinet_prm_set(L, out, "capability.max_wqe_sz_rq", 16 * KINET_MAX_RQ_SGE);
		kinet_prm_set(L, out, "capability.log_max_srq_sz", 15);
		kinet_prm_set(L, out, "capability.log_max_srq", 16);
		kinet_prm_set(L, out, "capability.log_max_cq_sz", 22);
		kinet_prm_set(L, out, "capability.log_max_msg", emu_log_max_msg());
		/* the port's kind, as IBGDA and GPUNetIO read it */
		kinet_prm_set(L, out, "capability.port_type",
			      dev_of(ib)->link_layer == IBV_LINK_LAYER_ETHERNET ? 1 : 0);
		kinet_prm_set(L, out, "capability.num_ports", 1);
		kinet_prm_set(L, out, "capability.cqe_version", 1); /* IBGDA requires 1 */
		kinet_prm_set(L, out, "capability.cq_oi", cfg.no_cq_oi ? 0 : 1);
		kinet_prm_set(L, out, "capability.rc", 1);
		kinet_prm_set(L, out, "capability.bf", 1);
		kinet_prm_set(L, out, "capability.log_bf_reg_size", lbf);
		kinet_prm_set(L, out, "capability.sq_ts_format", emu_ts_cap());
		kinet_prm_set(L, out, "capability.rq_ts_format", emu_ts_cap());
	} else if (type == KINET_PRM_CAP_ATOMIC) {
		/* what the software NIC executes on RC QPs: compare-and-swap and
		 * fetch-and-add, plain and masked, of 4 and 8 bytes, on words in
		 * host byte order (IBV_ATOMIC_HCA). The DC sizes are the same:
		 * NVSHMEM's IBGDA requires both of any NIC, RC-only use included,
		 * and refused this one while atomic_size_dc was 0 (H100,
		 * 2026-12-07). DC is served within a context only (nic/soft/dc.h):
		 * the general caps' dct bit stays 0, so that a stack choosing its
		 * transport by it takes RC, which reaches every peer. */
		const struct kinet_prm_layout *A = &kinet_prm_query_atomic_cap_out;
		kinet_prm_set(A, out, "capability.atomic_operations", 0xf);
		kinet_prm_set(A, out, "capability.atomic_size_qp", 0x4 | 0x8);
		kinet_prm_set(A, out, "capability.atomic_size_dc", 0x4 | 0x8);
		kinet_prm_set(A, out, "capability.supported_atomic_req_8B_endianness_mode_1", 1);
		kinet_prm_set(A, out, "capability.atomic_req_8B_endianness_mode", 1);
	} else if (type == KINET_PRM_CAP_ROCE) {
		const struct kinet_prm_layout *R = &kinet_prm_query_roce_cap_out;
		kinet_prm_set(R, out, "capability.qp_ts_format", emu_ts_cap());
		if (dev_of(ib)->link_layer == IBV_LINK_LAYER_ETHERNET) {
			/* what QUERY_ROCE_ADDRESS answers from: v1 and v2, IPv4 and
			 * IPv6 GIDs, the GID table's length (GPUNetIO bounds the
			 * source GID index by it), RoCE v2's UDP ports */
			kinet_prm_set(R, out, "capability.roce_version", 0x1 | 0x4);
			kinet_prm_set(R, out, "capability.l3_type", 0x2 | 0x4);
			kinet_prm_set(R, out, "capability.roce_address_table_size",
				      dev_of(ib)->host ? EMU_HOST_GIDS : EMU_GIDS);
			kinet_prm_set(R, out, "capability.r_roce_dest_udp_port", 4791);
			kinet_prm_set(R, out, "capability.r_roce_min_src_udp_port", 0xc000);
			kinet_prm_set(R, out, "capability.r_roce_max_src_udp_port", 0xffff);
		}
	} else if (type == KINET_PRM_CAP_NIC_FLOW_TABLE || type == KINET_PRM_CAP_DEVICE_MEMORY) {
		/* features the software NIC lacks (flow steering and its packet
		 * reformat, device memory and MEMIC): a page of zeros says so, as
		 * a ConnectX without them answers */
	} else {
		return cmd_refuse(out, outlen,
				  "QUERY_HCA_CAP: a capability type the emulation lacks");
	}
	return 0;
}


static void umem_unref(struct emu_umem *a, struct emu_umem *b)
{
	pthread_mutex_lock(&emu_lock);
	if (a)
		a->refs--;
	if (b)
		b->refs--;
	pthread_mutex_unlock(&emu_lock);
}

static struct mlx5dv_devx_obj *devx_create_cq(struct ibv_context *ib, const void *in,
					      void *out, size_t outlen)
{
	struct emu_dev *d = dev_of(ib);
	const struct kinet_prm_layout *L = &kinet_prm_create_cq_in;
	uint64_t lg = GET(kinet_prm_create_cq_in, in, "cq_context.log_cq_size");
	/* log_page_size (the umem's pages as a NIC translates them) is not
	 * looked at: the software NIC reads the program's virtual addresses */
	/* a collapsed CQ (cc: every CQE in slot 0, which IBGDA polls by its
	 * wqe_counter) never waits for its consumer: overrun ignore with it */
	bool cc = GET(kinet_prm_create_cq_in, in, "cq_context.cc");
	if (cc && !GET(kinet_prm_create_cq_in, in, "cq_context.oi"))
		return cmd_fail(out, outlen, "CREATE_CQ: a collapsed CQ (cc) needs overrun ignore "
					     "(oi): its one slot is written over");
	if (GET(kinet_prm_create_cq_in, in, "cq_context.cqe_sz") != KINET_PRM_CQE_SIZE_64 ||
	    lg > 22 || GET(kinet_prm_create_cq_in, in, "cq_context.c_eqn") != EMU_EQN ||
	    !GET(kinet_prm_create_cq_in, in, "cq_umem_valid") ||
	    !GET(kinet_prm_create_cq_in, in, "cq_context.dbr_umem_valid"))
		return cmd_fail(out, outlen, "CREATE_CQ: bad CQ context (size, CQE size, EQ, umems)");
	uint32_t cnt = 1u << lg;
	struct emu_umem *ub = NULL, *ud = NULL;
	pthread_mutex_lock(&emu_lock);
	uint8_t *buf = umem_at(d, GET(kinet_prm_create_cq_in, in, "cq_umem_id"),
			       GET(kinet_prm_create_cq_in, in, "cq_umem_offset"),
			       (size_t)cnt * KN_CQE_SIZE, &ub);
	uint8_t *dbr = umem_at(d, GET(kinet_prm_create_cq_in, in, "cq_context.dbr_umem_id"),
			       GET(kinet_prm_create_cq_in, in, "cq_context.dbr_addr"), 8, &ud);
	struct emu_uar *uar = uar_of(d, GET(kinet_prm_create_cq_in, in, "cq_context.uar_page"));
	if (buf && ((uintptr_t)buf & (KN_CQE_SIZE - 1))) {
		pthread_mutex_unlock(&emu_lock);
		return cmd_fail(out, outlen, "CREATE_CQ: the CQ buffer (umem address plus "
					     "cq_umem_offset) is not 64-byte aligned");
	}
	if (buf && dbr && uar) {
		ub->refs++; /* held until the CQ is destroyed */
		ud->refs++;
	}
	pthread_mutex_unlock(&emu_lock);
	(void)L;
	if (!buf || !dbr || !uar) {
		/* which of the three, with the numbers the command named */
		char why[160];
		if (!buf)
			snprintf(why, sizeof(why), "CREATE_CQ: the CQ buffer: umem %llu unknown, or "
				 "%u CQEs from offset %llu beyond it",
				 (unsigned long long)GET(kinet_prm_create_cq_in, in, "cq_umem_id"), cnt,
				 (unsigned long long)GET(kinet_prm_create_cq_in, in, "cq_umem_offset"));
		else if (!dbr)
			snprintf(why, sizeof(why), "CREATE_CQ: the doorbell record: umem %llu unknown, "
				 "or offset %llu beyond it",
				 (unsigned long long)GET(kinet_prm_create_cq_in, in,
							 "cq_context.dbr_umem_id"),
				 (unsigned long long)GET(kinet_prm_create_cq_in, in,
							 "cq_context.dbr_addr"));
		else
			snprintf(why, sizeof(why), "CREATE_CQ: UAR page %llu unknown",
				 (unsigned long long)GET(kinet_prm_create_cq_in, in,
							 "cq_context.uar_page"));
		return cmd_fail(out, outlen, why);
	}
	struct mlx5dv_devx_obj *o = calloc(1, sizeof(*o));
	struct kinet_cq_attr ca = {.depth = cnt};
	if (GET(kinet_prm_create_cq_in, in, "cq_context.oi")) {
		if (cfg.no_cq_oi) {
			free(o);
			umem_unref(ub, ud);
			return cmd_fail(out, outlen, "CREATE_CQ: overrun ignore is not supported");
		}
		ca.flags = KINET_CQ_OVERRUN_IGNORE;
	}
	if (!o || kinet_cq_create_ex(d->soft, &ca, &o->scq)) {
		free(o);
		umem_unref(ub, ud);
		return cmd_fail(out, outlen, "CREATE_CQ: no resources");
	}
	if (cc)
		o->scq->flags |= KINET_CQF_COLLAPSED;
	o->um[0] = ub;
	o->um[1] = ud;
	/* the software NIC writes its CQEs into the umem (initialised by the user) */
	o->orig_buf = o->scq->buf;
	o->orig_dbrec = o->scq->dbrec;
	o->scq->buf = buf;
	o->scq->dbrec = (volatile uint32_t *)dbr;
	o->type = 1;
	o->d = d;
	o->ib = ib;
	pthread_mutex_lock(&emu_lock);
	o->num = next_cqn++;
	__atomic_store_n(&o->scq->num, o->num, __ATOMIC_RELEASE); /* WAIT WQEs name it */
	o->next = dobjs;
	dobjs = o;
	pthread_mutex_unlock(&emu_lock);
	memset(out, 0, outlen);
	kinet_prm_set(&kinet_prm_create_cq_out, out, "cqn", o->num);
	return o;
}

static struct mlx5dv_devx_obj *devx_create_qp(struct ibv_context *ib, const void *in,
					      void *out, size_t outlen)
{
	struct emu_dev *d = dev_of(ib);
#define Q(name) GET(kinet_prm_create_qp_in, in, name)
	/* pm_state is not looked at: there is no alternate path to migrate to
	 * (GPUNetIO leaves it 0 here and sets it in RST2INIT) */
	uint64_t st = Q("qpc.st");
	if ((st != KINET_PRM_QPC_ST_RC && st != KINET_PRM_QPC_ST_DCI) || !Q("wq_umem_valid") ||
	    !Q("qpc.dbr_umem_valid"))
		return cmd_fail(out, outlen, "CREATE_QP: not an RC QP or a DCI with umem queues");
	uint64_t rq_type = Q("qpc.rq_type");
	if (rq_type != KINET_PRM_QPC_RQ_REGULAR && rq_type != KINET_PRM_QPC_RQ_ZERO_SIZE &&
	    rq_type != KINET_PRM_QPC_RQ_SRQ)
		return cmd_fail(out, outlen, "CREATE_QP: unsupported receive queue type (XRC)");
	/* receives through an SRQ of ibv_create_srq (its number from
	 * mlx5dv_init_obj), completions in the CQ of cqn_rcv */
	struct emu_srq *srq = NULL;
	if (rq_type == KINET_PRM_QPC_RQ_SRQ &&
	    !(srq = emu_srq_by_num(d, (uint32_t)Q("qpc.srqn_rmpn_xrqn"))))
		return cmd_fail(out, outlen, "CREATE_QP: the SRQ of srqn_rmpn_xrqn is unknown");
	if (rq_type == KINET_PRM_QPC_RQ_REGULAR && Q("qpc.log_rq_stride") != 0)
		return cmd_fail(out, outlen, "CREATE_QP: the emulation has 16-byte receive WQEs");
	if (!emu_ts_ok(Q("qpc.ts_format")))
		return cmd_fail(out, outlen,
				"CREATE_QP: a timestamp format the device does not support");
	uint32_t sq_cnt = 1u << Q("qpc.log_sq_size");
	uint32_t rq_cnt = rq_type == KINET_PRM_QPC_RQ_REGULAR ? 1u << Q("qpc.log_rq_size") : 0;
	size_t rq_bytes = (size_t)rq_cnt * 16;
	struct emu_umem *uw = NULL, *ud = NULL;
	pthread_mutex_lock(&emu_lock);
	uint8_t *wq = umem_at(d, Q("wq_umem_id"), Q("wq_umem_offset"),
			      rq_bytes + (size_t)sq_cnt * KN_SEND_WQE_BB, &uw);
	uint8_t *dbr = umem_at(d, Q("qpc.dbr_umem_id"), Q("qpc.dbr_addr"), 8, &ud);
	struct emu_uar *uar = uar_of(d, Q("qpc.uar_page"));
	struct emu_pd *pd = pd_of(d, Q("qpc.pd"));
	struct mlx5dv_devx_obj *scq = cq_of(d, Q("qpc.cqn_snd"));
	struct mlx5dv_devx_obj *rcq = rq_cnt ? cq_of(d, Q("qpc.cqn_rcv")) : scq;
	/* an SRQ's completions: a DevX CQ, or a verbs CQ (IBGDA's) */
	kinet_cq *srq_cq = NULL;
	if (srq) {
		struct mlx5dv_devx_obj *x = cq_of(d, Q("qpc.cqn_rcv"));
		srq_cq = x ? x->scq : verbs_cq_of(d, (uint32_t)Q("qpc.cqn_rcv"));
	}
	bool ok = wq && dbr && uar && pd && scq && rcq && (!srq || srq_cq);
	if (ok) {
		uw->refs++; /* held until the QP is destroyed */
		ud->refs++;
		uar->refs++;
	}
	pthread_mutex_unlock(&emu_lock);
#undef Q
	if (!ok)
		return cmd_fail(out, outlen,
				"CREATE_QP: work queue, doorbell record, UAR, PD or CQ unknown (or "
				"the queue is beyond its umem)");
	struct emu_qp *q = calloc(1, sizeof(*q));
	struct mlx5dv_devx_obj *o = calloc(1, sizeof(*o));
	struct kinet_qp_attr a = {
		.sq_depth = sq_cnt,
		.rq_depth = rq_cnt,
		.send_cq = scq->scq,
		.recv_cq = rq_cnt ? rcq->scq : NULL,
		.db_mode = KN_DB_GPU,
		.rnr_retry = 7,
	};
	int rc = !q || !o ? -ENOMEM : kinet_qp_create(pd->spd, &a, &q->sqp);
	if (!rc && cfg.host) {
		/* kinet-verbs: the program writes this number into its WQEs and
		 * gives it to its peer, which finds the QP by it in the host's
		 * rendezvous folder: the software NIC's number must be free on the
		 * host. Numbers other processes hold are skipped by keeping their
		 * QPs until one is free, then dropping them. */
		kinet_qp *held[64];
		int nheld = 0;
		while ((rc = emu_rv_claim(q->sqp->qpn)) == -EEXIST && nheld < 64) {
			held[nheld++] = q->sqp;
			if ((rc = kinet_qp_create(pd->spd, &a, &q->sqp))) {
				q->sqp = NULL;
				break;
			}
		}
		if (rc && q->sqp)
			kinet_qp_destroy(q->sqp);
		while (nheld)
			kinet_qp_destroy(held[--nheld]);
		q->rv = rc == 0;
		if (rc == -EEXIST)
			rc = -ENOSPC;
	}
	if (rc) {
		free(q);
		free(o);
		umem_unref(uw, ud);
		uar_unref(uar);
		KLOG_ERR("emulated DevX CREATE_QP: %s", strerror(-rc));
		return cmd_fail(out, outlen, "CREATE_QP: no resources (or no QP number free on "
					     "the host)");
	}
	q->dc = st == KINET_PRM_QPC_ST_DCI ? KINET_DC_DCI : KINET_DC_NONE;
	const char *refused = NULL;
	if (q->dc && kinet_qp_set_dc(q->sqp, KINET_DC_DCI, 0))
		refused = "CREATE_QP: the software NIC refused the DCI";
	else if (srq && kinet_qp_set_srq(q->sqp, srq->s, srq_cq))
		refused = "CREATE_QP: the SRQ and receive CQ cannot serve it";
	if (refused) {
		if (q->rv)
			emu_rv_release(q->sqp->qpn);
		kinet_qp_destroy(q->sqp);
		free(q);
		free(o);
		umem_unref(uw, ud);
		uar_unref(uar);
		return cmd_fail(out, outlen, refused);
	}
	q->srq = srq;
	kinet_qp *s = q->sqp;
	/* the QP is in RESET: its engine does not look at it yet */
	o->orig_sq = s->sq;
	o->orig_rq = s->rq;
	o->orig_db = s->db;
	o->orig_qdbr = s->dbrec;
	s->sq = wq + rq_bytes;
	s->rq = rq_cnt ? wq : NULL;
	s->dbrec = (volatile uint32_t *)dbr;
	s->db = (uint8_t *)uar->page + KN_BF_OFFSET;
	s->bf_alt = emu_bf_size(); /* the device's two registers */
	q->d = d;
	q->qp.context = ib;
	q->qp.qp_num = s->qpn;
	q->qp.handle = s->qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	o->type = 2;
	o->d = d;
	o->ib = ib;
	o->q = q;
	o->num = s->qpn;
	o->um[0] = uw;
	o->um[1] = ud;
	o->uar = uar;
	memcpy(o->qpc0, (const uint8_t *)in + KINET_EMU_QPC_AT, KINET_EMU_QPC_BYTES);
	memcpy(o->qpc, o->qpc0, KINET_EMU_QPC_BYTES);
	pthread_mutex_lock(&emu_lock);
	q->next = all_qps;
	all_qps = q;
	o->next = dobjs;
	dobjs = o;
	pthread_mutex_unlock(&emu_lock);
	memset(out, 0, outlen);
	kinet_prm_set(&kinet_prm_create_qp_out, out, "qpn", o->num);
	return o;
}

static struct mlx5dv_devx_obj *emu_devx_obj_create(struct ibv_context *ib, const void *in,
						   size_t inlen, void *out, size_t outlen)
{
	called("devx_obj_create");
	if (!devx_ctx(ib)) {
		KLOG_ERR("DevX obj_create: the context was not opened for DevX "
			 "(mlx5dv_open_device with MLX5DV_CONTEXT_FLAGS_DEVX) (EOPNOTSUPP)");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (inlen < kinet_prm_bytes(&kinet_prm_qpn_in) || outlen < 16)
		return cmd_fail(out, outlen, "command or output too short");
	uint64_t op = GET(kinet_prm_qpn_in, in, "opcode");
	if (op == KINET_PRM_OP_CREATE_CQ && inlen >= kinet_prm_bytes(&kinet_prm_create_cq_in))
		return devx_create_cq(ib, in, out, outlen);
	if (op == KINET_PRM_OP_CREATE_QP && inlen >= kinet_prm_bytes(&kinet_prm_create_qp_in))
		return devx_create_qp(ib, in, out, outlen);
	return cmd_fail(out, outlen, "unsupported or truncated object command");
}

/* The MAC the emulation "resolves" for a GID: 02:00 and its last 4 bytes. */
static void emu_mac(const uint8_t *gid, uint8_t mac[6])
{
	mac[0] = 0x02;
	mac[1] = 0x00;
	memcpy(mac + 2, gid + 12, 4);
}

static int emu_resolve_l2(struct ibv_context *ib, struct ibv_ah_attr *ah, uint8_t mac[6],
			  uint16_t *vid)
{
	(void)ib;
	if (!ah->is_global)
		return EINVAL;
	emu_mac(ah->grh.dgid.raw, mac);
	*vid = 0xffff;
	return 0;
}

/* Address handles: what a program learns of a destination with
 * ibv_create_ah and mlx5dv_init_obj (IBGDA and GPUNetIO take the next hop's
 * MAC and the GID for their INIT2RTR from its address vector). There are no
 * UD QPs to send with one. On RoCE every address is global; the MAC is the
 * one emu_resolve_l2 gives (kinet-verbs finds peers by GID and QP number,
 * and does not look at it). */
static void *ah_fail(const char *why)
{
	KLOG_ERR("kinet-verbs: ibv_create_ah: %s (EINVAL)", why);
	errno = EINVAL;
	return NULL;
}

static struct ibv_ah *emu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	called("create_ah");
	if (!pd || !a)
		return ah_fail("no PD or attributes");
	struct emu_dev *d = dev_of(pd->context);
	if (a->port_num != 1)
		return ah_fail("the device has one port, 1");
	if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
		struct ibv_gid_entry e;
		if (!a->is_global)
			return ah_fail("a RoCE address is global (is_global and a GRH)");
		pthread_mutex_lock(&emu_lock);
		bool ok = a->grh.sgid_index < gid_count(d) && !gid_entry(d, a->grh.sgid_index, &e) &&
			  e.gid_type != IBV_GID_TYPE_IB;
		pthread_mutex_unlock(&emu_lock);
		if (!ok)
			return ah_fail("the source GID index names no RoCE GID of the port");
	} else if (!a->dlid) {
		return ah_fail("an InfiniBand address needs the destination LID");
	}
	struct emu_ah *h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	h->ah.context = pd->context;
	h->ah.pd = pd;
	h->av.rlid = kn_htobe16(a->dlid);
	h->av.stat_rate_sl = (uint8_t)(a->sl & 0xf);
	if (a->is_global) {
		memcpy(h->av.rgid, a->grh.dgid.raw, 16);
		h->av.tclass = a->grh.traffic_class;
		h->av.hop_limit = a->grh.hop_limit;
		h->av.grh_gid_fl = kn_htobe32((1u << 30) | ((uint32_t)a->grh.sgid_index << 20) |
					      (a->grh.flow_label & 0xfffff));
		uint16_t vid;
		emu_resolve_l2(pd->context, a, h->av.rmac, &vid);
	}
	return &h->ah;
}

static int emu_destroy_ah(struct ibv_ah *ah)
{
	called("destroy_ah");
	if (!ah)
		return EINVAL;
	free(ah);
	return 0;
}

/* Modify QP commands become the verbs transition of the same QP, so the
 * emulation checks both paths the same way. */
static void qpc_record(struct mlx5dv_devx_obj *o, uint64_t op, const void *in);

static int emu_devx_obj_modify(struct mlx5dv_devx_obj *o, const void *in, size_t inlen,
			       void *out, size_t outlen)
{
	called("devx_obj_modify");
	if (!o || !in || !out) {
		errno = EINVAL;
		return EINVAL;
	}
	if (o->type != 2 || inlen < kinet_prm_bytes(&kinet_prm_qpn_in) || outlen < 16)
		return cmd_refuse(out, outlen, "modify: not a QP, or a short command");
	uint64_t op = GET(kinet_prm_qpn_in, in, "opcode");
	if (GET(kinet_prm_qpn_in, in, "qpn") != o->num)
		return cmd_refuse(out, outlen, "modify: the command names another QP");
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	int mask = IBV_QP_STATE;
	const struct kinet_prm_layout *M = &kinet_prm_modify_qp_in;
	bool full = inlen >= kinet_prm_bytes(M);
#define P(name) GET(kinet_prm_modify_qp_in, in, name)
	switch (op) {
	case KINET_PRM_OP_RST2INIT_QP:
		if (!full)
			break;
		a.qp_state = IBV_QPS_INIT;
		a.port_num = (uint8_t)P("qpc.primary_address_path.vhca_port_num");
		a.pkey_index = (uint16_t)P("qpc.primary_address_path.pkey_index");
		a.qp_access_flags = (P("qpc.rwe") ? IBV_ACCESS_REMOTE_WRITE : 0) |
				    (P("qpc.rre") ? IBV_ACCESS_REMOTE_READ : 0) |
				    (P("qpc.rae") ? IBV_ACCESS_REMOTE_ATOMIC : 0);
		mask |= IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
		break;
	case KINET_PRM_OP_INIT2RTR_QP: {
		if (!full)
			break;
		if (P("qpc.log_msg_max") == 0 || P("qpc.log_msg_max") > emu_log_max_msg())
			return cmd_refuse(out, outlen, "INIT2RTR: log_msg_max beyond the device's "
							 "log_max_msg");
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = (enum ibv_mtu)P("qpc.mtu");
		a.dest_qp_num = (uint32_t)P("qpc.remote_qpn");
		a.rq_psn = (uint32_t)P("qpc.next_rcv_psn");
		a.max_dest_rd_atomic = (uint8_t)(1u << P("qpc.log_rra_max"));
		a.min_rnr_timer = (uint8_t)P("qpc.min_rnr_nak");
		a.ah_attr.is_global = (uint8_t)P("qpc.primary_address_path.grh");
		a.ah_attr.dlid = (uint16_t)P("qpc.primary_address_path.rlid");
		a.ah_attr.port_num = (uint8_t)P("qpc.primary_address_path.vhca_port_num");
		/* RoCE: every packet has a GRH, so a ConnectX does not look at
		 * the grh bit (IBGDA and GPUNetIO set it only on InfiniBand); the
		 * port was given in RST2INIT (0 here: that one) */
		if (o->d->link_layer == IBV_LINK_LAYER_ETHERNET)
			a.ah_attr.is_global = 1;
		if (!a.ah_attr.port_num)
			a.ah_attr.port_num = o->q->attr.port_num ? o->q->attr.port_num : 1;
		a.ah_attr.grh.sgid_index = (uint8_t)P("qpc.primary_address_path.src_addr_index");
		a.ah_attr.grh.hop_limit = (uint8_t)P("qpc.primary_address_path.hop_limit");
		kinet_prm_get_bytes(M, in, "qpc.primary_address_path.rgid_rip",
				    a.ah_attr.grh.dgid.raw, 16);
		/* kinet-verbs (cfg.host) finds the peer by GID and QP number
		 * alone, whatever next hop's MAC the program resolved */
		if (o->d->link_layer == IBV_LINK_LAYER_ETHERNET && !cfg.host && !o->q->dc) {
			uint8_t mac[6], want[6];
			uint64_t hi = P("qpc.primary_address_path.rmac_47_32");
			uint64_t lo = P("qpc.primary_address_path.rmac_31_0");
			mac[0] = (uint8_t)(hi >> 8);
			mac[1] = (uint8_t)hi;
			for (int i = 0; i < 4; i++)
				mac[2 + i] = (uint8_t)(lo >> (24 - 8 * i));
			emu_mac(a.ah_attr.grh.dgid.raw, want);
			if (memcmp(mac, want, 6) ||
			    !P("qpc.primary_address_path.udp_sport"))
				return cmd_refuse(out, outlen, "INIT2RTR: RoCE needs the next hop's "
								 "MAC and a UDP source port");
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	}
	case KINET_PRM_OP_RTR2RTS_QP:
		if (!full)
			break;
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = (uint32_t)P("qpc.next_send_psn");
		a.timeout = (uint8_t)P("qpc.primary_address_path.ack_timeout");
		a.retry_cnt = (uint8_t)P("qpc.retry_count");
		a.rnr_retry = (uint8_t)P("qpc.rnr_retry");
		a.max_rd_atomic = (uint8_t)(1u << P("qpc.log_sra_max"));
		mask |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	case KINET_PRM_OP_2ERR_QP: a.qp_state = IBV_QPS_ERR; break;
	case KINET_PRM_OP_2RST_QP: a.qp_state = IBV_QPS_RESET; break;
	default:
		return cmd_refuse(out, outlen, "modify: unsupported opcode");
	}
#undef P
	if (a.qp_state == IBV_QPS_RESET && op != KINET_PRM_OP_2RST_QP)
		return cmd_refuse(out, outlen, "modify: truncated command");
	int rc = emu_modify_qp(&o->q->qp, &a, mask);
	memset(out, 0, outlen);
	if (rc) {
		cmd_fail(out, outlen, "modify: the transition was refused");
		return cfg.host ? EREMOTEIO : rc;
	}
	qpc_record(o, op, in);
	return 0;
}

/* What QUERY_QP reports: the context as created, with what each transition
 * set since (the fields of its command), and the state the NIC holds. */
static void qpc_copy(struct mlx5dv_devx_obj *o, const uint8_t *qpc, const char *const *names)
{
	for (; *names; names++) {
		uint64_t v = 0;
		kinet_prm_get(&kinet_prm_qpc, qpc, *names, &v);
		kinet_prm_set(&kinet_prm_qpc, o->qpc, *names, v);
	}
}

static void qpc_record(struct mlx5dv_devx_obj *o, uint64_t op, const void *in)
{
	static const char *const init[] = {
		"rwe", "rre", "rae", "atomic_mode", "primary_address_path.vhca_port_num",
		"primary_address_path.pkey_index", NULL};
	static const char *const rtr[] = {
		"mtu", "log_msg_max", "remote_qpn", "next_rcv_psn", "log_rra_max", "min_rnr_nak", NULL};
	static const char *const rts[] = {
		"next_send_psn", "primary_address_path.ack_timeout", "retry_count", "rnr_retry",
		"log_sra_max", NULL};
	const uint8_t *qpc = (const uint8_t *)in + KINET_EMU_QPC_AT;
	uint32_t at, w;
	pthread_mutex_lock(&emu_lock);
	switch (op) {
	case KINET_PRM_OP_RST2INIT_QP: qpc_copy(o, qpc, init); break;
	case KINET_PRM_OP_INIT2RTR_QP:
		/* the whole primary address path (GID, MAC, UDP port, ...) */
		if (kinet_prm_find(&kinet_prm_qpc, "primary_address_path", &at, &w) == 0)
			memcpy(o->qpc + at / 8, qpc + at / 8, w / 8);
		qpc_copy(o, qpc, rtr);
		break;
	case KINET_PRM_OP_RTR2RTS_QP: qpc_copy(o, qpc, rts); break;
	case KINET_PRM_OP_2RST_QP: memcpy(o->qpc, o->qpc0, sizeof(o->qpc)); break;
	default: break;
	}
	pthread_mutex_unlock(&emu_lock);
}

static int emu_devx_obj_query(struct mlx5dv_devx_obj *o, const void *in, size_t inlen,
			      void *out, size_t outlen)
{
	called("devx_obj_query");
	if (!o || !in || !out) {
		errno = EINVAL;
		return EINVAL;
	}
	if (inlen < kinet_prm_bytes(&kinet_prm_qpn_in) || outlen < 16)
		return cmd_refuse(out, outlen, "query: a short command or output");
	uint64_t op = GET(kinet_prm_qpn_in, in, "opcode");
	if (o->type != 2 || op != KINET_PRM_OP_QUERY_QP)
		return cmd_refuse(out, outlen, "query: only QUERY_QP of a QP object");
	if (GET(kinet_prm_qpn_in, in, "qpn") != o->num)
		return cmd_refuse(out, outlen, "QUERY_QP: the command names another QP");
	if (outlen < kinet_prm_bytes(&kinet_prm_query_qp_out))
		return cmd_refuse(out, outlen,
				  "QUERY_QP: the output is shorter than the QP context");
	memset(out, 0, outlen);
	uint8_t *qpc = (uint8_t *)out + KINET_EMU_QPC_AT;
	pthread_mutex_lock(&emu_lock);
	memcpy(qpc, o->qpc, KINET_EMU_QPC_BYTES);
	pthread_mutex_unlock(&emu_lock);
	/* the state the NIC holds: an error CQE moves the QP to ERR on its own
	 * (KINET_QPS_* are the PRM's qpc.state values) */
	kinet_prm_set(&kinet_prm_qpc, qpc, "state", (uint64_t)kinet_qp_get_state(o->q->sqp));
	return 0;
}

static int emu_devx_obj_destroy(struct mlx5dv_devx_obj *o)
{
	called("devx_obj_destroy");
	if (!o) {
		errno = EINVAL;
		return EINVAL;
	}
	pthread_mutex_lock(&emu_lock);
	if (o->type == 1 && atomic_load(&o->scq->refs) > 0) {
		pthread_mutex_unlock(&emu_lock);
		KLOG_ERR("emulated DevX: CQ 0x%x is the CQ of a QP: destroy the QP first (EBUSY)",
			 o->num);
		return EBUSY;
	}
	for (struct mlx5dv_devx_obj **pp = &dobjs; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	pthread_mutex_unlock(&emu_lock);
	if (o->type == 1) {
		o->scq->buf = o->orig_buf;
		o->scq->dbrec = o->orig_dbrec;
		int rc = kinet_cq_destroy(o->scq);
		if (rc)
			return -rc;
		umem_unref(o->um[0], o->um[1]);
	} else {
		kinet_qp *s = o->q->sqp;
		/* quiesce the QP before its queues go back to their owner */
		kinet_qp_modify(s, KINET_QPS_RESET, NULL);
		s->sq = o->orig_sq;
		s->rq = o->orig_rq;
		s->db = o->orig_db;
		s->dbrec = o->orig_qdbr;
		int rc = emu_destroy_qp(&o->q->qp);
		if (rc)
			return rc;
		umem_unref(o->um[0], o->um[1]);
		uar_unref(o->uar);
	}
	free(o);
	return 0;
}

/* ---- the context's ops (verbs.h's inline functions) ----------------------------------- */

static int emu_vquery_port(struct ibv_context *ib, uint8_t port, struct ibv_port_attr *a,
			   size_t len)
{
	struct ibv_port_attr pa;
	int rc = emu_query_port(ib, port, &pa);
	if (rc)
		return rc;
	memset(a, 0, len);
	memcpy(a, &pa, len < sizeof(pa) ? len : sizeof(pa));
	return 0;
}

static int emu_vquery_device_ex(struct ibv_context *ib, const struct ibv_query_device_ex_input *in,
				struct ibv_device_attr_ex *a, size_t len)
{
	if ((in && in->comp_mask) || len < sizeof(a->orig_attr))
		return EINVAL;
	struct ibv_device_attr_ex x;
	memset(&x, 0, sizeof(x));
	int rc = emu_query_device(ib, &x.orig_attr);
	if (rc)
		return rc;
	x.max_dm_size = 0;
	x.phys_port_cnt_ex = x.orig_attr.phys_port_cnt;
	memset(a, 0, len);
	memcpy(a, &x, len < sizeof(x) ? len : sizeof(x));
	return 0;
}

/* A verb the emulation does not offer: EOPNOTSUPP, and a log line naming it. */
static int refuse(const char *verb)
{
	KLOG_ERR("kinet-verbs: %s is not supported (EOPNOTSUPP)", verb);
	return EOPNOTSUPP;
}

static struct ibv_mw *emu_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	(void)pd, (void)type;
	errno = refuse("ibv_alloc_mw");
	return NULL;
}

static int emu_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	(void)qp, (void)mw, (void)b;
	return refuse("ibv_bind_mw");
}

static int emu_dealloc_mw(struct ibv_mw *mw)
{
	(void)mw;
	return refuse("ibv_dealloc_mw");
}

/* Lays the context out as rdma-core's verbs_context: the extended ABI
 * marker, its size, and the ops the inline functions call. */
static void ctx_ops(struct emu_ctx *c)
{
	struct ibv_context *ib = &c->vc.context;
	ib->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vc.sz = sizeof(c->vc);
	c->vc.query_port = emu_vquery_port;
	c->vc.query_device_ex = emu_vquery_device_ex;
	c->vc.create_qp_ex = emu_create_qp_ex; /* ibv_create_qp_ex beyond a PD alone */
	c->vc.create_cq_ex = emu_create_cq_ex;
	c->vc.alloc_parent_domain = emu_alloc_parent_domain;
	emu_data_ops(ib); /* poll_cq, req_notify_cq, post_send, post_recv (data.c) */
	ib->ops.post_srq_recv = emu_post_srq_recv; /* srq.c */
	ib->ops.alloc_mw = emu_alloc_mw;
	ib->ops.bind_mw = emu_bind_mw;
	ib->ops.dealloc_mw = emu_dealloc_mw;
}

int kinet_mlx5_emu_dev_port(struct ibv_device *dev, struct kinet_verbs_port *out)
{
	pthread_mutex_lock(&emu_lock);
	int rc = -ENODEV;
	for (int i = 0; i < EMU_MAXDEV; i++)
		if (dev == &devs[i].dev && devs[i].host) {
			*out = devs[i].hp;
			rc = 0;
		}
	pthread_mutex_unlock(&emu_lock);
	return rc;
}

int kinet_mlx5_emu_gid_version(unsigned n, unsigned port, unsigned index)
{
	if (port != 1 || index >= EMU_HOST_GIDS)
		return -ENOENT;
	pthread_mutex_lock(&emu_lock);
	int rc = -ENOENT;
	if (cfg.host && host_scan() > 0 && n < (unsigned)cfg.ndev && devs[n].host) {
		struct ibv_gid_entry e;
		rc = gid_entry(&devs[n], index, &e);
		rc = rc == ENODATA ? 0 : rc ? -rc : e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2 : 1;
	}
	pthread_mutex_unlock(&emu_lock);
	return rc;
}

static const struct kinet_mlx5_ops emu_ops = {
	.name = "emulated rdma-core (software NIC)",
	.get_device_list = emu_get_device_list,
	.free_device_list = emu_free_device_list,
	.get_device_name = emu_get_device_name,
	.open_device = emu_open_device,
	.close_device = emu_close_device,
	.query_device = emu_query_device,
	.query_port = emu_query_port,
	.query_gid_ex = emu_query_gid_ex,
	.alloc_pd = emu_alloc_pd,
	.dealloc_pd = emu_dealloc_pd,
	.reg_mr = emu_reg_mr,
	.reg_dmabuf_mr = emu_reg_dmabuf_mr,
	.dereg_mr = emu_dereg_mr,
	.create_cq = emu_create_cq,
	.create_cq_oi = emu_create_cq_oi,
	.destroy_cq = emu_destroy_cq,
	.create_qp = emu_create_qp,
	.modify_qp = emu_modify_qp,
	.destroy_qp = emu_destroy_qp,
	.create_srq = emu_create_srq,
	.modify_srq = emu_modify_srq,
	.query_srq = emu_query_srq,
	.destroy_srq = emu_destroy_srq,
	.create_ah = emu_create_ah,
	.destroy_ah = emu_destroy_ah,
	.mlx5dv_is_supported = emu_is_supported,
	.mlx5dv_init_obj = emu_init_obj,
	.mlx5dv_open_device = emu_dv_open_device,
	.devx_umem_reg = emu_umem_reg,
	.devx_umem_reg_ex = emu_umem_reg_ex,
	.devx_umem_dereg = emu_umem_dereg,
	.devx_alloc_uar = emu_alloc_uar,
	.devx_free_uar = emu_free_uar,
	.devx_obj_create = emu_devx_obj_create,
	.devx_obj_modify = emu_devx_obj_modify,
	.devx_obj_destroy = emu_devx_obj_destroy,
	.devx_obj_query = emu_devx_obj_query,
	.devx_query_eqn = emu_devx_query_eqn,
	.devx_general_cmd = emu_devx_general_cmd,
	.resolve_eth_l2_from_gid = emu_resolve_l2,
	.create_wq = emu_create_wq,
	.modify_wq = emu_modify_wq,
	.destroy_wq = emu_destroy_wq,
	.create_rwq_ind_table = emu_create_ind,
	.destroy_rwq_ind_table = emu_destroy_ind,
	.create_qp_ex = emu_create_qp_ex,
	.create_flow = emu_create_flow,
	.destroy_flow = emu_destroy_flow,
	.mlx5dv_create_wq = emu_dv_create_wq,
	.mlx5dv_create_qp = emu_dv_create_qp,
	.mlx5dv_query_device = emu_dv_query_device,
	.gpu_count = emu_gpu_count,
	.dmabuf_supported = emu_dmabuf_supported,
	.mem_kind = emu_mem_kind,
	.dmabuf_fd = emu_dmabuf_fd,
	.gpu_map = emu_gpu_map,
	.gpu_unmap = emu_gpu_unmap,
	.peermem_loaded = emu_peermem_loaded,
	.gpu_alloc = emu_gpu_alloc,
	.gpu_free = emu_gpu_free,
	.gpu_memset = emu_gpu_memset,
	.gpu_read = emu_gpu_read,
	.gpu_write = emu_gpu_write,
};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Installed through KINET_MLX5_EMULATE=1 on a GPU machine: use the GPU. */
static void env_defaults(void)
{
	pthread_mutex_lock(&emu_lock);
	bool expl = cfg_explicit;
	pthread_mutex_unlock(&emu_lock);
	if (!expl && kinet_cudrv_gpu_count() > 0) {
		pthread_mutex_lock(&emu_lock);
		if (!cfg_explicit)
			cfg.gpu = KINET_EMU_GPU_REAL;
		pthread_mutex_unlock(&emu_lock);
	}
}

const struct kinet_mlx5_ops *kinet_mlx5_emu_ops(void)
{
	pthread_once(&env_once, env_defaults);
	return &emu_ops;
}

#endif /* KINET_HAVE_RDMA_HEADERS */
