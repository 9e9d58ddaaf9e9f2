/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend.c - the mlx5 backend: device discovery, protection domains,
 * memory registration (dma-buf, peer memory), RC QPs built with verbs and
 * exposed through mlx5dv, the mapping of queues and doorbell into the GPU,
 * connection (INIT, RTR, RTS) and the device descriptor.
 *
 * Every rdma-core and GPU driver call goes through the function table of
 * ops.h. The device descriptor it exports is the one the software NIC
 * exports: device code does not know which backend runs its WQEs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include "nic/mlx5/mlx5.h"
#include "nic/mlx5/ops.h"
#include "nic/mlx5/priv.h"
#include "core/driver.h"
#include <kinet/net.h>

/* ---- selection helpers (no rdma-core needed) ---------------------------- */

static bool gid_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return false;
	return true;
}

static bool gid_v4mapped(const uint8_t *g)
{
	for (int i = 0; i < 10; i++)
		if (g[i])
			return false;
	return g[10] == 0xff && g[11] == 0xff;
}

static bool gid_linklocal(const uint8_t *g)
{
	return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

int kinet_mlx5_pick_gid(const uint8_t (*gids)[16], const uint32_t *types, int n, int family)
{
	int v4 = -1, v6 = -1, v6ll = -1;
	for (int i = 0; i < n; i++) {
		if (types[i] != KINET_GID_ROCE_V2 || gid_zero(gids[i]))
			continue;
		if (gid_v4mapped(gids[i])) {
			if (v4 < 0)
				v4 = i;
		} else if (gid_linklocal(gids[i])) {
			if (v6ll < 0)
				v6ll = i;
		} else if (v6 < 0) {
			v6 = i;
		}
	}
	int best6 = v6 >= 0 ? v6 : v6ll;
	switch (family) {
	case KINET_AF_IPV4: return v4;
	case KINET_AF_IPV6: return best6;
	default: return v4 >= 0 ? v4 : best6;
	}
}

int kinet_mlx5_family(const char *s)
{
	if (!s || !*s || !strcmp(s, "any"))
		return KINET_AF_ANY;
	if (!strcmp(s, "ipv4"))
		return KINET_AF_IPV4;
	if (!strcmp(s, "ipv6"))
		return KINET_AF_IPV6;
	return -1;
}

void kinet_mlx5_ep_encode(const struct kinet_mlx5_ep *ep, uint8_t out[KINET_MLX5_EP_BYTES])
{
	uint16_t lid = kn_htobe16(ep->lid);
	uint32_t qpn = kn_htobe32(ep->qpn), psn = kn_htobe32(ep->psn);
	memcpy(out, &lid, 2);
	memcpy(out + 2, ep->gid, 16);
	memcpy(out + 18, &qpn, 4);
	memcpy(out + 22, &psn, 4);
	out[26] = ep->mtu;
	out[27] = ep->link_layer;
	out[28] = ep->port;
}

int kinet_mlx5_ep_decode(const uint8_t *in, size_t len, struct kinet_mlx5_ep *ep)
{
	if (len != KINET_MLX5_EP_BYTES)
		return -EPROTO;
	uint16_t lid;
	uint32_t qpn, psn;
	memcpy(&lid, in, 2);
	memcpy(ep->gid, in + 2, 16);
	memcpy(&qpn, in + 18, 4);
	memcpy(&psn, in + 22, 4);
	ep->lid = kn_be16toh(lid);
	ep->qpn = kn_be32toh(qpn) & 0xffffff;
	ep->psn = kn_be32toh(psn) & 0xffffff;
	ep->mtu = in[26];
	ep->link_layer = in[27];
	ep->port = in[28];
	if (!ep->qpn || ep->mtu < 1 || ep->mtu > 5 || (ep->link_layer != 1 && ep->link_layer != 2))
		return -EPROTO;
	return 0;
}

#if !KINET_HAVE_RDMA_HEADERS

/* Built without rdma-core headers: the backend reports itself absent. */
int kinet_mlx5_probe(const char *device, char *why, size_t whylen)
{
	(void)device;
	snprintf(why, whylen, "kinet was built without the rdma-core headers");
	return -ENODEV;
}

static int m5_probe(const struct kinet_ctx_attr *attr, char *why, size_t wl)
{
	return kinet_mlx5_probe(attr ? attr->device : NULL, why, wl);
}

int kinet_mlx5_qp_endpoint(const kinet_qp *qp, struct kinet_mlx5_ep *ep)
{
	(void)qp;
	(void)ep;
	return -EINVAL;
}

int kinet_mlx5_list_nics(struct kinet_nic_info *out, int max, char *why, size_t whylen)
{
	(void)out;
	(void)max;
	snprintf(why, whylen, "kinet was built without the rdma-core headers");
	return -ENODEV;
}
const char *kinet_mlx5_ops_name(void) { return NULL; }

/* Never opened (the probe refuses): only the table's required entries. */
const struct kinet_backend_ops kinet_mlx5_backend = {
	.name = "mlx5",
	.id = KINET_BACKEND_MLX5,
	.priority = 10,
	.ctx_size = sizeof(kinet_ctx),
	.pd_size = sizeof(kinet_pd),
	.mr_size = sizeof(kinet_mr),
	.cq_size = sizeof(kinet_cq),
	.qp_size = sizeof(kinet_qp),
	.probe = m5_probe,
};

#else

static int err_of(int rc)
{
	/* verbs return a positive errno, or -1 with errno set */
	if (rc > 0)
		return -rc;
	return errno ? -errno : -EIO;
}

static int mtu_bytes(int mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128 << mtu : 0;
}

static void gid_str(const union ibv_gid *g, char *buf, size_t len)
{
	if (gid_v4mapped(g->raw))
		snprintf(buf, len, "::ffff:%u.%u.%u.%u", g->raw[12], g->raw[13], g->raw[14],
			 g->raw[15]);
	else if (!inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

const char *kinet_mlx5_ops_name(void)
{
	const struct kinet_mlx5_ops *o = kinet_mlx5_ops_get(NULL, 0);
	return o ? o->name : NULL;
}

/* ---- device and port selection ------------------------------------------ */

struct m5_sel {
	uint8_t port;
	struct ibv_port_attr pattr;
	int gid_index;
	union ibv_gid gid;
};

/* Picks the GID of a port: the tunable index, else by link layer (IB: 0;
 * RoCE: a v2 GID of the configured address family). */
static int select_gid(const struct kinet_mlx5_ops *ops, struct ibv_context *ib, uint8_t port,
		      const struct ibv_port_attr *pa, int *idx, union ibv_gid *gid, char *why,
		      size_t wl)
{
	long long want = KT(MLX5_GID_INDEX);
	int n = pa->gid_tbl_len > 256 ? 256 : pa->gid_tbl_len;
	struct ibv_gid_entry e;
	if (want >= 0) {
		if (want >= n || ops->query_gid_ex(ib, port, (uint32_t)want, &e)) {
			snprintf(why, wl, "port %u: GID index %lld (KINET_MLX5_GID_INDEX) unusable",
				 port, want);
			return -ENODEV;
		}
		*idx = (int)want;
		*gid = e.gid;
		return 0;
	}
	if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) {
		if (ops->query_gid_ex(ib, port, 0, &e)) {
			memset(&e, 0, sizeof(e));
		}
		*idx = 0;
		*gid = e.gid;
		return 0;
	}
	int fam = kinet_mlx5_family(KT(MLX5_ADDR_FAMILY));
	if (fam < 0) {
		snprintf(why, wl, "KINET_MLX5_ADDR_FAMILY must be ipv4, ipv6 or any");
		return -EINVAL;
	}
	uint8_t(*gids)[16] = calloc((size_t)(n ? n : 1), 16);
	uint32_t *types = calloc((size_t)(n ? n : 1), sizeof(uint32_t));
	if (!gids || !types) {
		free(gids);
		free(types);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		if (ops->query_gid_ex(ib, port, (uint32_t)i, &e) == 0) {
			memcpy(gids[i], e.gid.raw, 16);
			types[i] = e.gid_type;
		} else {
			types[i] = UINT32_MAX; /* empty slot */
		}
	}
	int i = kinet_mlx5_pick_gid((const uint8_t(*)[16])gids, types, n, fam);
	if (i >= 0) {
		*idx = i;
		memcpy(gid->raw, gids[i], 16);
	}
	free(gids);
	free(types);
	if (i < 0) {
		snprintf(why, wl, "port %u: no RoCE v2 GID for address family %s", port,
			 KT(MLX5_ADDR_FAMILY));
		return -ENODEV;
	}
	return 0;
}

/* First usable port (or KINET_MLX5_PORT): active, with a usable GID. */
static int select_port(const struct kinet_mlx5_ops *ops, struct ibv_context *ib,
		       const struct ibv_device_attr *da, struct m5_sel *s, char *why, size_t wl)
{
	long long want = KT(MLX5_PORT);
	char last[160] = "no port";
	for (int p = 1; p <= da->phys_port_cnt; p++) {
		if (want > 0 && p != want)
			continue;
		struct ibv_port_attr pa;
		if (ops->query_port(ib, (uint8_t)p, &pa)) {
			snprintf(last, sizeof(last), "port %d: query failed", p);
			continue;
		}
		if (pa.state != IBV_PORT_ACTIVE) {
			snprintf(last, sizeof(last), "port %d is not active (state %d)", p, pa.state);
			continue;
		}
		if (select_gid(ops, ib, (uint8_t)p, &pa, &s->gid_index, &s->gid, last,
			       sizeof(last)))
			continue;
		s->port = (uint8_t)p;
		s->pattr = pa;
		return 0;
	}
	if (want > 0 && want > da->phys_port_cnt)
		snprintf(last, sizeof(last), "no port %lld (KINET_MLX5_PORT)", want);
	snprintf(why, wl, "%s", last);
	return -ENODEV;
}

static void describe(char *why, size_t wl, const struct kinet_mlx5_ops *ops, const char *name,
		     const struct m5_sel *s)
{
	char g[48];
	gid_str(&s->gid, g, sizeof(g));
	if (s->pattr.link_layer == IBV_LINK_LAYER_ETHERNET)
		snprintf(why, wl, "%s port %u, RoCE v2 GID %d (%s), MTU %d, via %s", name, s->port,
			 s->gid_index, g, mtu_bytes(s->pattr.active_mtu), ops->name);
	else
		snprintf(why, wl, "%s port %u, InfiniBand LID 0x%x, MTU %d, via %s", name, s->port,
			 s->pattr.lid, mtu_bytes(s->pattr.active_mtu), ops->name);
}

/* Finds the device: the named one (argument, KINET_MLX5_DEVICE) or the first
 * mlx5 device with a usable port. On success with keep, *ibp stays open. */
static int find_device(const struct kinet_mlx5_ops *ops, const char *device, bool keep,
		       bool devx, struct ibv_context **ibp, struct ibv_device_attr *dattr,
		       struct m5_sel *sel, char *name, size_t namelen, char *why, size_t wl)
{
	if (!device || !*device) {
		device = KT(MLX5_DEVICE);
		if (device && !*device)
			device = NULL;
	}
	int n = 0;
	errno = 0;
	struct ibv_device **list = ops->get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			ops->free_device_list(list);
		else if (errno)
			snprintf(why, wl, "no RDMA device found (%s: %s)", ops->name, strerror(errno));
		if (list || !errno)
			snprintf(why, wl, "no RDMA device found (%s)", ops->name);
		return -ENODEV;
	}
	char notes[400] = "";
	int rc = -ENODEV;
	for (int i = 0; i < n; i++) {
		const char *dn = ops->get_device_name(list[i]);
		if (!dn)
			continue;
		if (device && strcmp(device, dn))
			continue;
		char note[240] = "";
		if (ops->mlx5dv_is_supported && !ops->mlx5dv_is_supported(list[i])) {
			snprintf(note, sizeof(note), "%s: not an mlx5 device", dn);
		} else {
			struct ibv_context *ib = NULL;
			if (keep && devx && ops->mlx5dv_open_device) {
				/* a DevX-enabled context serves verbs as well */
				struct mlx5dv_context_attr ca = {.flags = MLX5DV_CONTEXT_FLAGS_DEVX};
				ib = ops->mlx5dv_open_device(list[i], &ca);
				if (!ib)
					KLOG_INFO("mlx5 %s: no DevX context (%s)", dn,
						  strerror(errno ? errno : EIO));
			}
			if (!ib)
				ib = ops->open_device(list[i]);
			struct ibv_device_attr da;
			if (!ib) {
				snprintf(note, sizeof(note), "%s: cannot open (%s)", dn,
					 strerror(errno ? errno : EIO));
			} else if (ops->query_device(ib, &da)) {
				snprintf(note, sizeof(note), "%s: query failed", dn);
				ops->close_device(ib);
			} else {
				char pw[160];
				if (select_port(ops, ib, &da, sel, pw, sizeof(pw)) == 0) {
					snprintf(name, namelen, "%s", dn);
					*dattr = da;
					if (keep)
						*ibp = ib;
					else
						ops->close_device(ib);
					rc = 0;
					break;
				}
				snprintf(note, sizeof(note), "%s: %s", dn, pw);
				ops->close_device(ib);
			}
		}
		size_t l = strlen(notes);
		snprintf(notes + l, sizeof(notes) - l, "%s%s", l ? "; " : "", note);
	}
	ops->free_device_list(list);
	if (rc) {
		if (device && !notes[0])
			snprintf(why, wl, "no RDMA device named %s", device);
		else
			snprintf(why, wl, "%s", notes[0] ? notes : "no usable mlx5 device");
	}
	return rc;
}

/* Can GPU memory be registered with the NIC? (dma-buf or peer memory) */
static bool gpu_direct_possible(const struct kinet_mlx5_ops *ops)
{
	if (ops->peermem_loaded && ops->peermem_loaded())
		return true;
	return ops->reg_dmabuf_mr && ops->dmabuf_fd && ops->dmabuf_supported &&
	       ops->dmabuf_supported();
}

int kinet_mlx5_probe(const char *device, char *why, size_t whylen)
{
	char w[200] = "";
	const struct kinet_mlx5_ops *ops = kinet_mlx5_ops_get(w, sizeof(w));
	if (!ops) {
		snprintf(why, whylen, "%s", w);
		return -ENODEV;
	}
	struct ibv_device_attr da;
	struct m5_sel sel;
	char name[64];
	int rc = find_device(ops, device, false, false, NULL, &da, &sel, name, sizeof(name), why,
			     whylen);
	if (rc)
		return rc;
	/* with a GPU that the NIC cannot reach and host staging allowed, the
	 * software NIC (which stages) is the better choice */
	bool gpu = ops->gpu_count && ops->gpu_count() > 0;
	if (gpu && !gpu_direct_possible(ops) && KT(ALLOW_HOST_STAGING)) {
		snprintf(why, whylen,
			 "%s cannot reach GPU memory (no dma-buf export, no peer-memory module) "
			 "and host staging is allowed: the software NIC stages",
			 name);
		return -ENODEV;
	}
	describe(why, whylen, ops, name, &sel);
	return 0;
}

/* ---- the CPU proxy: rings the doorbell for QPs in doorbell mode cpu ------- */

/* DevX queues in GPU memory: the proxy reaches them through the driver
 * (the ops table's GPU entries; one table per process). */
static const struct kinet_qmem_io *qmem_io(const struct m5 *m)
{
	static struct kinet_qmem_io io;
	io.read = m->ops->gpu_read;
	io.write = m->ops->gpu_write;
	return &io;
}

static void *proxy_main(void *arg)
{
	struct m5 *m = arg;
	struct kinet_idle idle;
	kinet_idle_init(&idle, m->spin_ns, m->sleep_ns);
	while (!atomic_load(&m->proxy_stop)) {
		int work = 0;
		pthread_mutex_lock(&m->lock);
		for (int i = 0; i < m->nqps; i++) {
			kinet_qp *qp = m->qps[i];
			if (qp->db_mode == KN_DB_CPU_PROXY)
				work += kinet_proxy_ring(qp, m5_qp(qp)->on_gpu ? qmem_io(m) : NULL);
		}
		for (int i = 0; i < m->nethq; i++) /* Ethernet send queues: host memory */
			work += kinet_proxy_ring(m->ethq[i], NULL);
		pthread_mutex_unlock(&m->lock);
		uint64_t nap = kinet_idle_next(&idle, work > 0);
		if (nap)
			kinet_sleep_ns(nap);
		else if (!work)
			for (int i = 0; i < 64; i++)
				KN_PAUSE();
	}
	return NULL;
}

int kinet_m5_proxy_start(struct m5 *m)
{
	if (m->proxy_started)
		return 0;
	atomic_store(&m->proxy_stop, false);
	if (pthread_create(&m->proxy_th, NULL, proxy_main, m))
		return -EAGAIN;
	kinet_thread_name(m->proxy_th, "kn-mlx5-proxy");
	m->proxy_started = true;
	KLOG_INFO("mlx5 %s: CPU doorbell proxy thread started", m->name);
	return 0;
}

/* ---- context ---------------------------------------------------------------- */

static int m5_probe(const struct kinet_ctx_attr *attr, char *why, size_t wl)
{
	return kinet_mlx5_probe(attr ? attr->device : NULL, why, wl);
}

static int m5_open(kinet_ctx *ctx, const struct kinet_ctx_attr *attr)
{
	const char *device = attr ? attr->device : NULL;
	char why[200] = "";
	const struct kinet_mlx5_ops *ops = kinet_mlx5_ops_get(why, sizeof(why));
	if (!ops)
		return -ENODEV;
	struct m5 *m = m5_of(ctx);
	struct m5_sel sel;
	const char *qm = KT(MLX5_QUEUES);
	int want_devx = qm && !strcmp(qm, "devx") ? 2 : qm && !strcmp(qm, "auto") ? 1 : 0;
	if (qm && !want_devx && strcmp(qm, "verbs")) {
		KLOG_ERR("mlx5: KINET_MLX5_QUEUES must be verbs, devx or auto (not %s)", qm);
		return -EINVAL;
	}
	int rc = find_device(ops, device, true, want_devx > 0, &m->ib, &m->dattr, &sel, m->name,
			     sizeof(m->name), why, sizeof(why));
	if (rc) {
		KLOG_ERR("mlx5: %s", why);
		return rc;
	}
	m->ops = ops;
	m->port = sel.port;
	m->pattr = sel.pattr;
	m->gid_index = sel.gid_index;
	m->gid = sel.gid;
	m->gpu = ops->gpu_count && ops->gpu_count() > 0 && ops->gpu_map && ops->gpu_unmap;
	m->spin_ns = (uint64_t)KT(ENGINE_SPIN_US) * 1000ull;
	m->sleep_ns = (uint64_t)KT(ENGINE_SLEEP_US) * 1000ull;
	pthread_mutex_init(&m->lock, NULL);
	/* queues: DevX objects (fast path; auto: only with a GPU to put them in) */
	if (want_devx == 2 || (want_devx == 1 && m->gpu)) {
		rc = kinet_m5_devx_open(m);
		if (rc && want_devx == 2) {
			ops->close_device(m->ib);
			pthread_mutex_destroy(&m->lock);
			return rc;
		}
		if (rc)
			KLOG_INFO("mlx5 %s: DevX unavailable (%s): verbs queues", m->name,
				  kinet_strerror(rc));
	}
	describe(why, sizeof(why), ops, m->name, &sel);
	KLOG_INFO("mlx5: %s%s, %s queues", why, m->gpu ? "" : " (no GPU: host executor)",
		  m->devx ? "DevX" : "verbs");
	return 0;
}

static void m5_close(kinet_ctx *ctx)
{
	struct m5 *m = m5_of(ctx);
	if (m->proxy_started) {
		atomic_store(&m->proxy_stop, true);
		pthread_join(m->proxy_th, NULL);
		m->proxy_started = false;
	}
	m->ops->close_device(m->ib);
	pthread_mutex_destroy(&m->lock);
	free(m->pages);
	free(m->qps);
	free(m->ethq);
}

/* ---- protection domains and memory ----------------------------------------- */

static int m5_pd_alloc(kinet_pd *pd)
{
	struct m5 *m = m5_of(pd->ctx);
	errno = 0;
	struct ibv_pd *ipd = m->ops->alloc_pd(m->ib);
	if (!ipd) {
		int e = errno ? errno : ENOMEM;
		KLOG_ERR("mlx5 %s: ibv_alloc_pd: %s", m->name, strerror(e));
		return -e;
	}
	kinet_container_of(pd, struct m5_pd, p)->ipd = ipd;
	return 0;
}

static void m5_pd_free(kinet_pd *pd)
{
	struct m5 *m = m5_of(pd->ctx);
	struct m5_pd *p = kinet_container_of(pd, struct m5_pd, p);
	if (p->ipd && m->ops->dealloc_pd(p->ipd))
		KLOG_WARN("mlx5 %s: ibv_dealloc_pd failed", m->name);
	p->ipd = NULL;
}

/* GPU memory: dma-buf first, then the peer-memory path. */
static struct ibv_mr *reg_gpu(struct m5 *m, struct ibv_pd *ipd, void *addr, size_t len, int acc,
			      int *path, char *why, size_t wl)
{
	const struct kinet_mlx5_ops *ops = m->ops;
	struct ibv_mr *imr = NULL;
	char dm[96] = "no dma-buf support in rdma-core or the GPU driver";
	if (ops->reg_dmabuf_mr && ops->dmabuf_fd) {
		int fd = -1;
		uint64_t off = 0;
		int rc = ops->dmabuf_fd(addr, len, &fd, &off);
		if (rc == 0) {
			errno = 0;
			imr = ops->reg_dmabuf_mr(ipd, off, len, (uint64_t)(uintptr_t)addr, fd, acc);
			int e = errno;
			close(fd); /* the region keeps its own reference */
			if (imr) {
				*path = KINET_MR_PATH_DMABUF;
				return imr;
			}
			snprintf(dm, sizeof(dm), "ibv_reg_dmabuf_mr: %s", strerror(e ? e : EIO));
		} else {
			snprintf(dm, sizeof(dm), "no dma-buf export (%s)", kinet_strerror(rc));
		}
	}
	errno = 0;
	imr = ops->reg_mr(ipd, addr, len, acc);
	if (imr) {
		*path = KINET_MR_PATH_PEERMEM;
		return imr;
	}
	int e = errno ? errno : EIO;
	snprintf(why, wl, "%s; peer memory: ibv_reg_mr: %s%s", dm, strerror(e),
		 ops->peermem_loaded && ops->peermem_loaded() ? ""
							       : " (no peer-memory module loaded)");
	return NULL;
}

static int m5_mr_reg(kinet_mr *mr)
{
	kinet_pd *pd = mr->pd;
	struct m5 *m = m5_of(pd->ctx);
	const struct kinet_mlx5_ops *ops = m->ops;
	void *addr = mr->addr;
	size_t len = mr->len;
	int kind = ops->mem_kind ? ops->mem_kind(addr) : KINET_MEM_HOST;
	if (kind < 0)
		kind = KINET_MEM_HOST;
	int acc = (int)mr->access; /* kinet_access values equal ibv_access_flags */
	int path = KINET_MR_PATH_HOST;
	struct ibv_mr *imr;
	char why[256] = "";
	if (kind == KINET_MEM_CUDA) {
		imr = reg_gpu(m, m5_ipd(pd), addr, len, acc, &path, why, sizeof(why));
		if (!imr) {
			if (KT(ALLOW_HOST_STAGING))
				KLOG_ERR("mlx5 %s: GPU memory %p+%zu cannot be registered (%s). "
					 "Host staging needs a CPU on the data path, which only "
					 "the soft backend has: use KINET_BACKEND=soft",
					 m->name, addr, len, why);
			else
				KLOG_ERR("mlx5 %s: GPU memory %p+%zu cannot be registered (%s); "
					 "refused (KINET_ALLOW_HOST_STAGING=0)",
					 m->name, addr, len, why);
			return -EOPNOTSUPP;
		}
	} else {
		errno = 0;
		imr = ops->reg_mr(m5_ipd(pd), addr, len, acc);
		if (!imr) {
			int e = errno ? errno : EIO;
			KLOG_ERR("mlx5 %s: ibv_reg_mr(%p, %zu): %s", m->name, addr, len, strerror(e));
			return -e;
		}
	}
	mr->key = imr->lkey;
	mr->rkey = imr->rkey;
	mr->kind = kind;
	mr->path = path;
	kinet_container_of(mr, struct m5_mr, m)->imr = imr;
	KLOG_DBG("mlx5 %s: region %p+%zu %s lkey 0x%x rkey 0x%x", m->name, addr, len,
		 kinet_mr_path_str(path), imr->lkey, imr->rkey);
	return 0;
}

/* Work the host knows is in flight on a QP: device-API WQEs (every one is
 * signaled) posted on the host executor whose CQEs have not been consumed.
 * QPs driven from the GPU keep their state in GPU memory, and unsignaled
 * WQEs of kinet_qp_post_raw are never reported: neither is seen here. */
static uint64_t host_outstanding(const kinet_qp *qp)
{
	if (qp->dstate && qp->dstate->ready > qp->dstate->done)
		return qp->dstate->ready - qp->dstate->done;
	return 0;
}

static int m5_mr_dereg(kinet_mr *mr)
{
	struct m5 *m = m5_of(mr->pd->ctx);
	struct m5_mr *x = kinet_container_of(mr, struct m5_mr, m);
	if (!x->imr)
		return 0; /* revoked: the NIC forgot it already */
	/* a ConnectX fails the WQEs that name a key deregistered under them,
	 * and the library cannot tell which region a WQE names: refuse while a
	 * QP of the region's PD has work in flight (docs/lifecycle.md) */
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < m->nqps && !mr->internal; i++) {
		kinet_qp *qp = m->qps[i];
		uint64_t o = qp->pd == mr->pd ? host_outstanding(qp) : 0;
		if (o) {
			pthread_mutex_unlock(&m->lock);
			KLOG_ERR("mlx5 %s: region %p+%zu not deregistered: QP 0x%x of its PD has %llu "
				 "WQEs in flight (consume their CQEs first)",
				 m->name, mr->addr, mr->len, qp->qpn, (unsigned long long)o);
			return -EBUSY;
		}
	}
	pthread_mutex_unlock(&m->lock);
	int rc = m->ops->dereg_mr(x->imr);
	if (rc) {
		rc = err_of(rc);
		KLOG_ERR("mlx5 %s: ibv_dereg_mr: %s", m->name, kinet_strerror(rc));
		return rc;
	}
	x->imr = NULL;
	return 0;
}

/* Revoke: the memory key is invalidated in the NIC now (the DMA in progress
 * completes first: the driver's deregistration waits for it); the kinet
 * region keeps its keys, unusable, until kinet_mr_dereg. */
static int m5_mr_revoke(kinet_mr *mr)
{
	struct m5 *m = m5_of(mr->pd->ctx);
	struct m5_mr *x = kinet_container_of(mr, struct m5_mr, m);
	if (!x->imr)
		return 0;
	int rc = m->ops->dereg_mr(x->imr);
	if (rc) {
		rc = err_of(rc);
		KLOG_ERR("mlx5 %s: revoke: ibv_dereg_mr: %s", m->name, kinet_strerror(rc));
		return rc;
	}
	x->imr = NULL;
	return 0;
}

/* What the library maintains for an mlx5 QP: the host's view of the device
 * state and of kinet_qp_post_raw; everything about bytes, doorbells,
 * retries and errors on the wire is the NIC's (port counters). */
static void m5_qp_counters(kinet_qp *qp, struct kinet_qp_counters *o)
{
	if (qp->dstate) {
		o->posted += qp->dstate->ready;
		o->completed += qp->dstate->done;
		if (qp->dstate->err_ticket != KN_NO_ERROR) {
			uint32_t s = qp->dstate->err_syndrome & 63;
			o->by_syndrome[s] += 1;
			if (s == KN_SYND_WR_FLUSH_ERR)
				o->flushed += 1;
			else
				o->errors += 1;
		}
	}
	o->posted += qp->raw_pi;
	o->completed += qp->raw_ci;
	o->cqes = o->host_cqes;
}

/* The context's counters: its QPs' host-side figures added up (WQEs posted,
 * CQEs consumed, first errors); the rest is the NIC's port counters. */
static void m5_counters(kinet_ctx *ctx, struct kinet_counters *o)
{
	struct m5 *m = m5_of(ctx);
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < m->nqps; i++) {
		struct kinet_qp_counters q;
		kinet_qp_counters(m->qps[i], &q);
		o->wqes += q.posted;
		o->cqes += q.cqes;
		o->errors += q.errors;
		o->flushed += q.flushed;
		for (int k = 0; k < 64; k++)
			o->by_syndrome[k] += q.by_syndrome[k];
	}
	pthread_mutex_unlock(&m->lock);
}

/* ---- mapping queue memory and the doorbell into the GPU -------------------- */

/* Pages are mapped one by one and refcounted: rdma-core places the doorbell
 * records (and UAR registers) of several QPs in one page. */
static int page_map(struct m5 *m, uintptr_t pg, int io)
{
	for (int i = 0; i < m->npages; i++)
		if (m->pages[i].addr == pg) {
			m->pages[i].refs++;
			return 0;
		}
	if (m->npages == m->pcap) {
		int ncap = m->pcap ? m->pcap * 2 : 64;
		struct m5_page *t = realloc(m->pages, (size_t)ncap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		m->pages = t;
		m->pcap = ncap;
	}
	void *dev = NULL;
	int rc = m->ops->gpu_map((void *)pg, KN_UAR_PAGE_SIZE, io, &dev);
	if (rc < 0)
		return rc;
	/* the CUDA module translates host to GPU addresses when it copies a
	 * descriptor to the GPU (kinet_qp_device_cuda), so they may differ */
	if (dev != (void *)pg)
		KLOG_DBG("mlx5 %s: page %p is at GPU address %p", m->name, (void *)pg, dev);
	m->pages[m->npages++] = (struct m5_page){pg, 1, rc == 0};
	return 0;
}

static void page_unmap(struct m5 *m, uintptr_t pg)
{
	for (int i = 0; i < m->npages; i++)
		if (m->pages[i].addr == pg) {
			if (--m->pages[i].refs == 0) {
				if (m->pages[i].owned)
					m->ops->gpu_unmap((void *)pg);
				m->pages[i] = m->pages[--m->npages];
			}
			return;
		}
}

static void range_unmap(struct m5 *m, void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(KN_UAR_PAGE_SIZE - 1);
	for (; a < (uintptr_t)p + len; a += KN_UAR_PAGE_SIZE)
		page_unmap(m, a);
}

int kinet_m5_range_map(struct m5 *m, struct m5_qp *x, void *p, size_t len, int io)
{
	if (!p || !len)
		return 0;
	if (x->nmaps == (int)(sizeof(x->maps) / sizeof(x->maps[0])))
		return -ENOSPC;
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(KN_UAR_PAGE_SIZE - 1);
	for (; a < (uintptr_t)p + len; a += KN_UAR_PAGE_SIZE) {
		int rc = page_map(m, a, io);
		if (rc) {
			if (a > ((uintptr_t)p & ~(uintptr_t)(KN_UAR_PAGE_SIZE - 1)))
				range_unmap(m, p, a - (uintptr_t)p);
			return rc;
		}
	}
	x->maps[x->nmaps].p = p;
	x->maps[x->nmaps].len = len;
	x->maps[x->nmaps].io = io;
	x->nmaps++;
	return 0;
}

/* ---- queue pairs -------------------------------------------------------------- */

void kinet_m5_cq_view(kinet_cq *v, kinet_ctx *ctx, uint8_t *buf, uint32_t cnt,
		      volatile uint32_t *dbrec)
{
	memset(v, 0, sizeof(*v));
	v->ctx = ctx;
	v->buf = buf;
	v->cnt = cnt;
	v->dbrec = dbrec;
}

static void qps_remove(struct m5 *m, kinet_qp *qp)
{
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < m->nqps; i++)
		if (m->qps[i] == qp) {
			m->qps[i] = m->qps[--m->nqps];
			break;
		}
	pthread_mutex_unlock(&m->lock);
}

void kinet_m5_range_unmap_all(struct m5 *m, struct m5_qp *x)
{
	for (int i = 0; i < x->nmaps; i++)
		range_unmap(m, x->maps[i].p, x->maps[i].len);
	x->nmaps = 0;
}

/* Frees what m5_qp_create built (any part of it). */
static void m5_qp_destroy(kinet_qp *qp)
{
	struct m5 *m = m5_of(qp->ctx);
	struct m5_qp *x = m5_qp(qp);
	pthread_mutex_lock(&m->lock);
	kinet_m5_range_unmap_all(m, x);
	pthread_mutex_unlock(&m->lock);
	if (x->devx)
		kinet_m5_devx_release(m, x);
	if (x->ibqp && m->ops->destroy_qp(x->ibqp))
		KLOG_WARN("mlx5 %s: ibv_destroy_qp failed", m->name);
	if (x->ibscq && m->ops->destroy_cq(x->ibscq))
		KLOG_WARN("mlx5 %s: ibv_destroy_cq failed", m->name);
	if (x->ibrcq && m->ops->destroy_cq(x->ibrcq))
		KLOG_WARN("mlx5 %s: ibv_destroy_cq failed", m->name);
	x->ibqp = NULL;
	x->ibscq = x->ibrcq = NULL;
	kinet_queue_free(x->cpu_pi_page, 4096);
	x->cpu_pi_page = NULL;
}

/* Creates the verbs CQs and QP and exposes them; sizes are retried once so
 * that the send CQ has exactly as many CQEs as the SQ has WQEBBs. */
static int create_queues(struct m5 *m, struct m5_qp *x, struct ibv_pd *ipd,
			 uint32_t sq_cnt, uint32_t rq_cnt, struct mlx5dv_qp *dq,
			 struct mlx5dv_cq *dscq, struct mlx5dv_cq *drcq)
{
	const struct kinet_mlx5_ops *ops = m->ops;
	bool oi = x->q.attr.cq_flags & KINET_CQ_OVERRUN_IGNORE;
	if (oi && !ops->create_cq_oi) {
		KLOG_ERR("mlx5 %s: CQs with overrun ignore need ibv_create_cq_ex (%s has none)",
			 m->name, ops->name);
		return -EOPNOTSUPP;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		/* the mlx5 provider allocates a power of two >= cqe + 1 entries */
		errno = 0;
		x->ibscq = oi ? ops->create_cq_oi(m->ib, (int)sq_cnt - 1)
			      : ops->create_cq(m->ib, (int)sq_cnt - 1, NULL, NULL, 0);
		if (!x->ibscq)
			goto verbs_fail;
		if (rq_cnt) {
			x->ibrcq = oi ? ops->create_cq_oi(m->ib, (int)rq_cnt - 1)
				      : ops->create_cq(m->ib, (int)rq_cnt - 1, NULL, NULL, 0);
			if (!x->ibrcq)
				goto verbs_fail;
		}
		struct ibv_qp_init_attr ia;
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = x->ibscq;
		ia.recv_cq = x->ibrcq ? x->ibrcq : x->ibscq;
		ia.qp_type = IBV_QPT_RC;
		ia.sq_sig_all = 0; /* the WQEs ask for their CQE themselves */
		ia.cap.max_send_wr = sq_cnt;
		ia.cap.max_recv_wr = rq_cnt;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = rq_cnt ? 1 : 0;
		ia.cap.max_inline_data = 0; /* one WQEBB per work request */
		x->ibqp = ops->create_qp(ipd, &ia);
		if (!x->ibqp)
			goto verbs_fail;
		struct mlx5dv_obj obj;
		memset(&obj, 0, sizeof(obj));
		obj.qp.in = x->ibqp;
		obj.qp.out = dq;
		obj.cq.in = x->ibscq;
		obj.cq.out = dscq;
		int rc = ops->mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ);
		if (rc == 0 && x->ibrcq) {
			memset(&obj, 0, sizeof(obj));
			obj.cq.in = x->ibrcq;
			obj.cq.out = drcq;
			rc = ops->mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ);
		}
		if (rc) {
			KLOG_ERR("mlx5 %s: mlx5dv_init_obj: %s", m->name,
				 kinet_strerror(err_of(rc)));
			return err_of(rc);
		}
		if (dq->sq.stride != KN_SEND_WQE_BB || dscq->cqe_size != KN_CQE_SIZE ||
		    (x->ibrcq && drcq->cqe_size != KN_CQE_SIZE)) {
			KLOG_ERR("mlx5 %s: unexpected queue formats (SQ stride %u, CQE size %u): "
				 "is MLX5_CQE_SIZE set?",
				 m->name, dq->sq.stride, dscq->cqe_size);
			return -EPROTO;
		}
		bool sq_ok = dq->sq.wqe_cnt == dscq->cqe_cnt;
		bool rq_ok = !rq_cnt || dq->rq.wqe_cnt == drcq->cqe_cnt;
		if (sq_ok && rq_ok)
			return 0;
		KLOG_DBG("mlx5 %s: SQ %u WQEBBs / CQ %u, RQ %u / CQ %u: resizing", m->name,
			 dq->sq.wqe_cnt, dscq->cqe_cnt, dq->rq.wqe_cnt, rq_cnt ? drcq->cqe_cnt : 0);
		sq_cnt = dq->sq.wqe_cnt;
		rq_cnt = rq_cnt ? dq->rq.wqe_cnt : 0;
		ops->destroy_qp(x->ibqp);
		ops->destroy_cq(x->ibscq);
		if (x->ibrcq)
			ops->destroy_cq(x->ibrcq);
		x->ibqp = NULL;
		x->ibscq = x->ibrcq = NULL;
	}
	KLOG_ERR("mlx5 %s: cannot size the CQs as the queues", m->name);
	return -EINVAL;
verbs_fail:;
	int e = errno ? errno : ENOMEM;
	KLOG_ERR("mlx5 %s: creating the %s failed: %s", m->name,
		 !x->ibscq ? "send CQ" : (rq_cnt && !x->ibrcq) ? "receive CQ" : "QP", strerror(e));
	return -e;
}

static int m5_qp_create(kinet_qp *qp)
{
	kinet_ctx *ctx = qp->ctx;
	struct m5 *m = m5_of(ctx);
	struct m5_qp *x = m5_qp(qp);
	const struct kinet_qp_attr *attr = &qp->attr;
	uint32_t sq_cnt = kinet_pow2(attr->sq_depth < 2 ? 2 : attr->sq_depth);
	uint32_t rq_cnt = attr->rq_depth ? kinet_pow2(attr->rq_depth < 2 ? 2 : attr->rq_depth) : 0;
	if (attr->rq_sge > 1) {
		KLOG_ERR("mlx5 %s: %u receive scatter entries: this backend's receive WQEs "
			 "hold one (EOPNOTSUPP)",
			 m->name, attr->rq_sge);
		return -EOPNOTSUPP;
	}
	if (sq_cnt > (uint32_t)m->dattr.max_qp_wr || rq_cnt > (uint32_t)m->dattr.max_qp_wr ||
	    sq_cnt > (uint32_t)m->dattr.max_cqe) {
		KLOG_ERR("mlx5 %s: queue depth above the device limit (%d WRs, %d CQEs)", m->name,
			 m->dattr.max_qp_wr, m->dattr.max_cqe);
		return -EINVAL;
	}
	struct mlx5dv_qp dq;
	struct mlx5dv_cq dscq, drcq;
	memset(&dq, 0, sizeof(dq));
	memset(&dscq, 0, sizeof(dscq));
	memset(&drcq, 0, sizeof(drcq));
	int rc;
	if (m->devx) {
		/* the fast path: DevX objects, queues in GPU memory when there is a GPU */
		rc = kinet_m5_devx_create(m, qp, x, sq_cnt, rq_cnt);
		if (rc)
			goto fail;
	} else {
		rc = create_queues(m, x, m5_ipd(qp->pd), sq_cnt, rq_cnt, &dq, &dscq, &drcq);
		if (rc)
			goto fail;
		qp->qpn = x->ibqp->qp_num;
		qp->sq = dq.sq.buf;
		qp->sq_cnt = dq.sq.wqe_cnt;
		qp->rq = rq_cnt ? dq.rq.buf : NULL;
		qp->rq_cnt = rq_cnt ? dq.rq.wqe_cnt : 0;
		qp->rq_stride = rq_cnt ? dq.rq.stride : 16;
		qp->dbrec = dq.dbrec;
		x->bf_reg = dq.bf.reg;
		x->bf_size = dq.bf.size;
		kinet_m5_cq_view(&x->scq, ctx, dscq.buf, dscq.cqe_cnt, dscq.dbrec);
		if (rq_cnt)
			kinet_m5_cq_view(&x->rcq, ctx, drcq.buf, drcq.cqe_cnt, drcq.dbrec);
		/* every CQE invalid with owner 1 (0xF1), as for the software NIC: a
		 * poller that checks only the owner bit sees nothing on lap 0 */
		kinet_cq_host_clear(&x->scq);
		if (rq_cnt)
			kinet_cq_host_clear(&x->rcq);
	}
	x->scq.flags = qp->attr.cq_flags;
	x->rcq.flags = qp->attr.cq_flags;
	if (x->on_gpu)
		qp->flags |= KINET_QPF_QUEUES_ON_GPU;
	qp->flags |= KINET_QPF_HW_DOORBELL;
	uint8_t *uar = (uint8_t *)((uintptr_t)x->bf_reg & ~(uintptr_t)(KN_UAR_PAGE_SIZE - 1));
	qp->db = x->bf_reg;
	qp->bf_alt = x->bf_size; /* rings alternate between the two buffers */
	qp->scq = &x->scq;
	if (qp->rq_cnt)
		qp->rcq = &x->rcq;
	/* a random first PSN per QP (24 bits), a random generation */
	kinet_random(&x->psn, sizeof(x->psn));
	x->psn &= 0xffffff;
	kinet_random(&x->gen, sizeof(x->gen));

	rc = -ENOMEM;
	x->cpu_pi_page = kinet_queue_alloc(4096);
	if (!x->cpu_pi_page)
		goto fail;
	qp->cpu_pi = x->cpu_pi_page;

	/* the GPU must reach the queues; the doorbell register is optional
	 * (without it a CPU thread rings for the GPU) */
	bool uar_mapped = true;
	rc = 0;
	if (m->gpu) {
		pthread_mutex_lock(&m->lock);
		/* the CPU proxy's producer word (kinet_queue_alloc maps it already
		 * when the CUDA module is loaded) */
		rc = kinet_m5_range_map(m, x, x->cpu_pi_page, 4, 0);
		if (x->on_gpu) /* DevX queues in GPU memory: nothing else to map */
			goto map_uar;
		if (!rc)
			rc = kinet_m5_range_map(m, x, qp->sq, (size_t)qp->sq_cnt * KN_SEND_WQE_BB, 0);
		if (!rc && qp->rq)
			rc = kinet_m5_range_map(m, x, qp->rq, (size_t)qp->rq_cnt * qp->rq_stride, 0);
		if (!rc)
			rc = kinet_m5_range_map(m, x, (void *)qp->dbrec, 8, 0);
		if (!rc)
			rc = kinet_m5_range_map(m, x, x->scq.buf, (size_t)x->scq.cnt * KN_CQE_SIZE, 0);
		if (!rc)
			rc = kinet_m5_range_map(m, x, (void *)x->scq.dbrec, 8, 0);
		if (!rc && qp->rcq)
			rc = kinet_m5_range_map(m, x, x->rcq.buf, (size_t)x->rcq.cnt * KN_CQE_SIZE, 0);
		if (!rc && qp->rcq)
			rc = kinet_m5_range_map(m, x, (void *)x->rcq.dbrec, 8, 0);
	map_uar:
		if (!rc && kinet_m5_range_map(m, x, uar, KN_UAR_PAGE_SIZE, 1) != 0)
			uar_mapped = false;
		pthread_mutex_unlock(&m->lock);
		if (rc) {
			KLOG_ERR("mlx5 %s: QP 0x%x: the queues cannot be mapped into the GPU (%s)",
				 m->name, qp->qpn, kinet_strerror(rc));
			goto fail;
		}
	}

	int want = qp->db_mode;
	int mode = want;
	if (mode == KN_DB_BLUEFLAME && x->bf_size < KN_SEND_WQE_BB) {
		KLOG_WARN("mlx5 %s: QP 0x%x: no BlueFlame register (size %u): plain doorbell",
			  m->name, qp->qpn, x->bf_size);
		mode = KN_DB_GPU;
	}
	if (mode != KN_DB_CPU_PROXY && !uar_mapped) {
		mode = KN_DB_CPU_PROXY;
		if (attr->db_mode != KN_DB_AUTO)
			KLOG_WARN("mlx5 %s: QP 0x%x: doorbell register not mappable into the GPU: "
				  "%s doorbell unavailable, a CPU thread rings instead (mode cpu)",
				  m->name, qp->qpn, kinet_db_mode_str(want));
		else
			KLOG_INFO("mlx5 %s: QP 0x%x: doorbell register not mappable into the GPU: "
				  "a CPU thread rings the doorbell (mode cpu)",
				  m->name, qp->qpn);
	}
	qp->db_mode = mode;
	return 0;
fail:
	m5_qp_destroy(qp);
	return rc;
}

/* The descriptor is complete: the proxy may see the QP. */
static int m5_qp_attach(kinet_qp *qp)
{
	struct m5 *m = m5_of(qp->ctx);
	pthread_mutex_lock(&m->lock);
	if (m->nqps == m->qcap) {
		int ncap = m->qcap ? m->qcap * 2 : 16;
		kinet_qp **t = realloc(m->qps, (size_t)ncap * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&m->lock);
			return -ENOMEM;
		}
		m->qps = t;
		m->qcap = ncap;
	}
	m->qps[m->nqps++] = qp;
	pthread_mutex_unlock(&m->lock);
	int rc = qp->db_mode == KN_DB_CPU_PROXY ? kinet_m5_proxy_start(m) : 0;
	if (rc)
		qps_remove(m, qp);
	KLOG_DBG("mlx5 %s: QP 0x%x: SQ %u, RQ %u x %u B, CQ %u, doorbell %s%s", m->name, qp->qpn,
		 qp->sq_cnt, qp->rq_cnt, qp->rq_stride, qp->scq->cnt, kinet_db_mode_str(qp->db_mode),
		 m->gpu ? " (mapped into the GPU)" : "");
	return rc;
}

static void m5_qp_detach(kinet_qp *qp)
{
	qps_remove(m5_of(qp->ctx), qp);
}

int kinet_mlx5_qp_endpoint(const kinet_qp *qp, struct kinet_mlx5_ep *ep)
{
	if (!qp || !ep || qp->ctx->backend != KINET_BACKEND_MLX5)
		return -EINVAL;
	const struct m5 *m = m5_of(qp->ctx);
	const struct m5_qp *x = m5_qp((kinet_qp *)qp);
	memset(ep, 0, sizeof(*ep));
	ep->lid = m->pattr.lid;
	memcpy(ep->gid, m->gid.raw, 16);
	ep->qpn = qp->qpn;
	ep->psn = x->psn;
	ep->mtu = (uint8_t)m->pattr.active_mtu;
	ep->link_layer = m->pattr.link_layer;
	ep->port = m->port;
	return 0;
}

static int m5_qp_local_end(kinet_qp *qp, struct kinet_qp_local *out)
{
	struct kinet_mlx5_ep ep;
	int rc = kinet_mlx5_qp_endpoint(qp, &ep);
	if (rc)
		return rc;
	out->gen = m5_qp(qp)->gen;
	snprintf(out->transport, sizeof(out->transport), "%s", KINET_MLX5_TRANSPORT);
	kinet_mlx5_ep_encode(&ep, out->addr);
	out->addr_len = KINET_MLX5_EP_BYTES;
	return 0;
}

/* The remote end for RTR: a QP of this process, or its descriptor. */
static int remote_ep(kinet_qp *qp, const struct kinet_qp_remote *r, struct kinet_mlx5_ep *ep)
{
	if (r->local)
		return kinet_mlx5_qp_endpoint(r->local, ep);
	struct kinet_qp_info pi;
	int rc = kinet_qp_desc_parse(r->wire_addr, r->wire_addr_len, &pi);
	if (rc)
		return rc;
	if (strcmp(pi.provider, KINET_MLX5_TRANSPORT)) {
		KLOG_ERR("qp 0x%x: the peer's descriptor is for transport \"%s\", not an mlx5 QP",
			 qp->qpn, pi.provider);
		return -EPROTO;
	}
	if (kinet_mlx5_ep_decode(pi.addr, pi.addr_len, ep) || ep->qpn != pi.qpn) {
		KLOG_ERR("qp 0x%x: the peer's mlx5 addressing is malformed", qp->qpn);
		return -EPROTO;
	}
	return 0;
}

static uint8_t clamp_rd_atomic(int dev)
{
	return (uint8_t)(dev < 1 ? 1 : dev > 16 ? 16 : dev);
}

static int m5_qp_modify(kinet_qp *qp, int from, int state, const struct kinet_qp_remote *remote)
{
	struct m5 *m = m5_of(qp->ctx);
	struct m5_qp *x = m5_qp(qp);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	int mask = IBV_QP_STATE;
	struct kinet_mlx5_ep ep;
	memset(&ep, 0, sizeof(ep));
	switch (state) {
	case KINET_QPS_INIT:
		a.qp_state = IBV_QPS_INIT;
		a.pkey_index = 0;
		a.port_num = m->port;
		/* kinet_access values equal ibv_access_flags */
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | (int)kinet_qp_remote_allowed(qp);
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case KINET_QPS_RTR: {
		int rc = remote_ep(qp, remote, &ep);
		if (rc)
			return rc;
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = (enum ibv_mtu)(ep.mtu && ep.mtu < m->pattr.active_mtu
						    ? ep.mtu
						    : m->pattr.active_mtu);
		a.dest_qp_num = ep.qpn;
		a.rq_psn = ep.psn;
		a.max_dest_rd_atomic = clamp_rd_atomic(m->dattr.max_qp_rd_atom);
		a.min_rnr_timer = 12; /* 0.64 ms */
		a.ah_attr.port_num = m->port;
		if (m->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
			a.ah_attr.is_global = 1;
			memcpy(a.ah_attr.grh.dgid.raw, ep.gid, 16);
			a.ah_attr.grh.sgid_index = (uint8_t)m->gid_index;
			a.ah_attr.grh.hop_limit = 64;
		} else {
			a.ah_attr.dlid = ep.lid;
		}
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	}
	case KINET_QPS_RTS:
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = x->psn;
		a.timeout = (uint8_t)KT(MLX5_ACK_TIMEOUT);
		a.retry_cnt = 7;
		a.rnr_retry = (uint8_t)qp->attr.rnr_retry;
		a.max_rd_atomic = clamp_rd_atomic(m->dattr.max_qp_init_rd_atom);
		mask |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	case KINET_QPS_ERR: a.qp_state = IBV_QPS_ERR; break;
	case KINET_QPS_RESET: a.qp_state = IBV_QPS_RESET; break;
	default: return -EINVAL;
	}
	if (from == KINET_QPS_RTS && state == KINET_QPS_RTS)
		mask = IBV_QP_STATE; /* nothing to change */
	errno = 0;
	int rc;
	if (x->devx)
		rc = (from == state) ? 0 : kinet_m5_devx_modify(m, qp, x, state, &ep);
	else
		rc = m->ops->modify_qp(x->ibqp, &a, mask);
	if (rc) {
		rc = x->devx ? rc : err_of(rc);
		KLOG_ERR("mlx5 %s: qp 0x%x: %s -> %s: %s", m->name, qp->qpn,
			 kinet_qp_state_str(from), kinet_qp_state_str(state), kinet_strerror(rc));
		return rc;
	}
	if (state == KINET_QPS_RESET)
		kinet_random(&x->gen, sizeof(x->gen));
	atomic_store(&qp->state, state);
	KLOG_DBG("mlx5 %s: qp 0x%x: %s -> %s", m->name, qp->qpn, kinet_qp_state_str(from),
		 kinet_qp_state_str(state));
	return 0;
}

/* ---- inventory ------------------------------------------------------------------- */

static void pci_of(struct ibv_device *dev, char *out, size_t len)
{
	out[0] = 0;
	if (!dev->ibdev_path[0])
		return;
	char p[IBV_SYSFS_PATH_MAX + 16], real[4096];
	snprintf(p, sizeof(p), "%s/device", dev->ibdev_path);
	if (!realpath(p, real))
		return;
	const char *b = strrchr(real, '/');
	snprintf(out, len, "%.31s", b ? b + 1 : real); /* a PCI address: 12 characters */
}

int kinet_mlx5_list_nics(struct kinet_nic_info *out, int max, char *why, size_t whylen)
{
	const struct kinet_mlx5_ops *ops = kinet_mlx5_ops_get(why, whylen);
	if (!ops)
		return -ENODEV;
	int n = 0;
	errno = 0;
	struct ibv_device **list = ops->get_device_list(&n);
	if (!list) {
		snprintf(why, whylen, "no RDMA device found (ibv_get_device_list: %s)",
			 strerror(errno ? errno : EIO));
		return 0;
	}
	if (n == 0)
		snprintf(why, whylen, "no RDMA device found (%s)", ops->name);
	int k = 0;
	for (int i = 0; i < n && k < max; i++) {
		struct kinet_nic_info *o = &out[k++];
		memset(o, 0, sizeof(*o));
		const char *dn = ops->get_device_name(list[i]);
		snprintf(o->name, sizeof(o->name), "%s", dn ? dn : "?");
		pci_of(list[i], o->pci, sizeof(o->pci));
		o->mlx5 = !ops->mlx5dv_is_supported || ops->mlx5dv_is_supported(list[i]);
		struct ibv_context *ib = ops->open_device(list[i]);
		struct ibv_device_attr da;
		if (!ib || ops->query_device(ib, &da)) {
			snprintf(o->why, sizeof(o->why), "cannot open or query");
			if (ib)
				ops->close_device(ib);
			continue;
		}
		for (int p = 1; p <= da.phys_port_cnt && o->nports < 4; p++) {
			struct kinet_nic_port *np = &o->port[o->nports++];
			struct ibv_port_attr pa;
			np->port = p;
			np->gid_index = -1;
			if (ops->query_port(ib, (uint8_t)p, &pa))
				continue;
			np->state = pa.state;
			np->link_layer = pa.link_layer;
			np->active_mtu = mtu_bytes(pa.active_mtu);
			np->lid = pa.lid;
			union ibv_gid g;
			char w[160];
			if (select_gid(ops, ib, (uint8_t)p, &pa, &np->gid_index, &g, w, sizeof(w)) == 0)
				gid_str(&g, np->gid, sizeof(np->gid));
			else
				np->gid_index = -1;
		}
		struct m5_sel sel;
		if (!o->mlx5)
			snprintf(o->why, sizeof(o->why), "not an mlx5 device");
		else if (select_port(ops, ib, &da, &sel, o->why, sizeof(o->why)) == 0) {
			o->usable = 1;
			describe(o->why, sizeof(o->why), ops, o->name, &sel);
		}
		ops->close_device(ib);
	}
	ops->free_device_list(list);
	return k;
}

const struct kinet_backend_ops kinet_mlx5_backend = {
	.name = "mlx5",
	.id = KINET_BACKEND_MLX5,
	.priority = 10,
	.caps = 0, /* dedicated CQs, no reuse after RESET, no staging */
	.ctx_size = sizeof(struct m5),
	.pd_size = sizeof(struct m5_pd),
	.mr_size = sizeof(struct m5_mr),
	.cq_size = sizeof(kinet_cq),
	.qp_size = sizeof(struct m5_qp),
	.probe = m5_probe,
	.open = m5_open,
	.close = m5_close,
	.pd_alloc = m5_pd_alloc,
	.pd_free = m5_pd_free,
	.mr_reg = m5_mr_reg,
	.mr_dereg = m5_mr_dereg,
	.mr_revoke = m5_mr_revoke,
	.qp_counters = m5_qp_counters,
	.counters = m5_counters,
	.qp_create = m5_qp_create,
	.qp_attach = m5_qp_attach,
	.qp_detach = m5_qp_detach,
	.qp_destroy = m5_qp_destroy,
	.qp_modify = m5_qp_modify,
	.qp_local_end = m5_qp_local_end,
	/* raw Ethernet (eth.c) */
	.eth_port_size = sizeof(struct m5_eth_port),
	.eth_txq_size = sizeof(struct m5_eth_txq),
	.eth_rxq_size = sizeof(struct m5_eth_rxq),
	.eth_flow_size = sizeof(struct m5_eth_flow),
	.eth_port_open = kinet_m5_eth_port_open,
	.eth_port_close = kinet_m5_eth_port_close,
	.eth_port_time = kinet_m5_eth_port_time,
	.eth_txq_create = kinet_m5_eth_txq_create,
	.eth_txq_start = kinet_m5_eth_txq_start,
	.eth_txq_destroy = kinet_m5_eth_txq_destroy,
	.eth_rxq_create = kinet_m5_eth_rxq_create,
	.eth_rxq_destroy = kinet_m5_eth_rxq_destroy,
	.eth_flow_create = kinet_m5_eth_flow_create,
	.eth_flow_destroy = kinet_m5_eth_flow_destroy,
};

#endif /* KINET_HAVE_RDMA_HEADERS */
