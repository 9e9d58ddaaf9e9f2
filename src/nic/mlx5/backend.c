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

#if !KINET_HAVE_RDMA_HEADERS

/* Built without rdma-core headers: the backend reports itself absent. */
int kinet_mlx5_probe(const char *device, char *why, size_t whylen)
{
	(void)device;
	snprintf(why, whylen, "kinet was built without the rdma-core headers");
	return -ENODEV;
}
int kinet_mlx5_open(kinet_ctx *ctx, const char *device)
{
	(void)ctx;
	(void)device;
	return -ENODEV;
}
void kinet_mlx5_close(kinet_ctx *ctx) { (void)ctx; }
int kinet_mlx5_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr, kinet_qp **out)
{
	(void)pd;
	(void)attr;
	(void)out;
	return -ENODEV;
}
int kinet_mlx5_qp_destroy(kinet_qp *qp) { (void)qp; return -ENODEV; }
int kinet_mlx5_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote)
{
	(void)qp;
	(void)state;
	(void)remote;
	return -ENODEV;
}
int kinet_mlx5_pd_alloc(kinet_pd *pd) { (void)pd; return -ENODEV; }
void kinet_mlx5_pd_free(kinet_pd *pd) { (void)pd; }
int kinet_mlx5_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out)
{
	(void)pd;
	(void)addr;
	(void)len;
	(void)access;
	(void)out;
	return -ENODEV;
}
int kinet_mlx5_mr_dereg(kinet_mr *mr) { (void)mr; return -ENODEV; }
int kinet_mlx5_qp_endpoint(const kinet_qp *qp, struct kinet_mlx5_ep *ep)
{
	(void)qp;
	(void)ep;
	return -ENODEV;
}
int kinet_mlx5_list_nics(struct kinet_nic_info *out, int max, char *why, size_t whylen)
{
	(void)out;
	(void)max;
	snprintf(why, whylen, "kinet was built without the rdma-core headers");
	return -ENODEV;
}
const char *kinet_mlx5_ops_name(void) { return NULL; }

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

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	nanosleep(&ts, NULL);
}

/* One ring: the producer index the device published in cpu_pi goes to the
 * doorbell record, then the first 8 bytes of the last WQE to the register. */
static int proxy_ring(kinet_qp *qp)
{
	struct m5_qp *x = qp->engine_priv;
	uint32_t pi = __atomic_load_n(qp->desc.cpu_pi, __ATOMIC_ACQUIRE);
	if (pi == x->proxy_seen)
		return 0;
	x->proxy_seen = pi;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t dbr = kn_htobe32(pi & 0xffff);
	uint64_t w = 0;
	const uint8_t *last = qp->sq + (size_t)((pi - 1) & (qp->sq_cnt - 1)) * KN_SEND_WQE_BB;
	if (x->on_gpu) {
		/* DevX queues in GPU memory: reach them through the driver */
		const struct kinet_mlx5_ops *ops = ((struct m5 *)qp->ctx->mlx5)->ops;
		if (ops->gpu_write((void *)&qp->desc.dbrec[KN_SND_DBR], &dbr, 4) ||
		    ops->gpu_read(&w, last, 8)) {
			KLOG_ERR("qp 0x%x: the CPU proxy cannot reach the queues in GPU memory",
				 qp->qpn);
			return 0;
		}
	} else {
		__atomic_store_n(&qp->desc.dbrec[KN_SND_DBR], dbr, __ATOMIC_RELEASE);
		memcpy(&w, last, 8);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint64_t *)x->bf_reg = w;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	atomic_fetch_add(&qp->ctx->c_proxy, 1);
	return 1;
}

static void *proxy_main(void *arg)
{
	kinet_ctx *ctx = arg;
	struct m5 *m = ctx->mlx5;
	uint64_t last = kn_now_ns(), nap = 1000;
	while (!atomic_load(&m->proxy_stop)) {
		int work = 0;
		pthread_mutex_lock(&m->lock);
		for (int i = 0; i < m->nqps; i++)
			if (m->qps[i]->db_mode == KN_DB_CPU_PROXY)
				work += proxy_ring(m->qps[i]);
		pthread_mutex_unlock(&m->lock);
		if (work) {
			last = kn_now_ns();
			nap = 1000;
			continue;
		}
		if (kn_now_ns() - last < m->spin_ns) {
			for (int i = 0; i < 64; i++)
				KN_PAUSE();
			continue;
		}
		sleep_ns(nap);
		nap = nap * 2 > m->sleep_ns ? m->sleep_ns : nap * 2;
	}
	return NULL;
}

static int proxy_start(kinet_ctx *ctx)
{
	struct m5 *m = ctx->mlx5;
	if (m->proxy_started)
		return 0;
	atomic_store(&m->proxy_stop, false);
	if (pthread_create(&m->proxy_th, NULL, proxy_main, ctx))
		return -EAGAIN;
	m->proxy_started = true;
	KLOG_INFO("mlx5 %s: CPU doorbell proxy thread started", m->name);
	return 0;
}

/* ---- context ---------------------------------------------------------------- */

int kinet_mlx5_open(kinet_ctx *ctx, const char *device)
{
	char why[200] = "";
	const struct kinet_mlx5_ops *ops = kinet_mlx5_ops_get(why, sizeof(why));
	if (!ops)
		return -ENODEV;
	struct m5 *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	struct m5_sel sel;
	const char *qm = KT(MLX5_QUEUES);
	int want_devx = qm && !strcmp(qm, "devx") ? 2 : qm && !strcmp(qm, "auto") ? 1 : 0;
	if (qm && !want_devx && strcmp(qm, "verbs")) {
		KLOG_ERR("mlx5: KINET_MLX5_QUEUES must be verbs, devx or auto (not %s)", qm);
		free(m);
		return -EINVAL;
	}
	int rc = find_device(ops, device, true, want_devx > 0, &m->ib, &m->dattr, &sel, m->name,
			     sizeof(m->name), why, sizeof(why));
	if (rc) {
		KLOG_ERR("mlx5: %s", why);
		free(m);
		return rc;
	}
	m->ops = ops;
	m->port = sel.port;
	m->pattr = sel.pattr;
	m->gid_index = sel.gid_index;
	m->gid = sel.gid;
	m->gpu = ops->gpu_count && ops->gpu_count() > 0 && ops->gpu_map && ops->gpu_unmap;
	m->spin_ns = KT(ENGINE_SPIN_US) * 1000ull;
	m->sleep_ns = KT(ENGINE_SLEEP_US) * 1000ull;
	if (m->sleep_ns < 1000)
		m->sleep_ns = 1000;
	pthread_mutex_init(&m->lock, NULL);
	/* queues: DevX objects (fast path; auto: only with a GPU to put them in) */
	if (want_devx == 2 || (want_devx == 1 && m->gpu)) {
		rc = kinet_m5_devx_open(m);
		if (rc && want_devx == 2) {
			ops->close_device(m->ib);
			pthread_mutex_destroy(&m->lock);
			free(m);
			return rc;
		}
		if (rc)
			KLOG_INFO("mlx5 %s: DevX unavailable (%s): verbs queues", m->name,
				  kinet_strerror(rc));
	}
	ctx->mlx5 = m;
	describe(why, sizeof(why), ops, m->name, &sel);
	KLOG_INFO("mlx5: %s%s, %s queues", why, m->gpu ? "" : " (no GPU: host executor)",
		  m->devx ? "DevX" : "verbs");
	return 0;
}

void kinet_mlx5_close(kinet_ctx *ctx)
{
	struct m5 *m = ctx->mlx5;
	if (!m)
		return;
	if (m->proxy_started) {
		atomic_store(&m->proxy_stop, true);
		pthread_join(m->proxy_th, NULL);
		m->proxy_started = false;
	}
	if (m->nqps) {
		KLOG_ERR("mlx5 %s: closing with %d QP(s) still open: device left open", m->name,
			 m->nqps);
		return;
	}
	m->ops->close_device(m->ib);
	pthread_mutex_destroy(&m->lock);
	free(m->pages);
	free(m->qps);
	free(m);
	ctx->mlx5 = NULL;
}

/* ---- protection domains and memory ----------------------------------------- */

int kinet_mlx5_pd_alloc(kinet_pd *pd)
{
	struct m5 *m = pd->ctx->mlx5;
	errno = 0;
	struct ibv_pd *ipd = m->ops->alloc_pd(m->ib);
	if (!ipd) {
		int e = errno ? errno : ENOMEM;
		KLOG_ERR("mlx5 %s: ibv_alloc_pd: %s", m->name, strerror(e));
		return -e;
	}
	pd->priv = ipd;
	return 0;
}

void kinet_mlx5_pd_free(kinet_pd *pd)
{
	struct m5 *m = pd->ctx->mlx5;
	if (pd->priv && m->ops->dealloc_pd(pd->priv))
		KLOG_WARN("mlx5 %s: ibv_dealloc_pd failed", m->name);
	pd->priv = NULL;
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

int kinet_mlx5_mr_reg(kinet_pd *pd, void *addr, size_t len, unsigned access, kinet_mr **out)
{
	struct m5 *m = pd->ctx->mlx5;
	const struct kinet_mlx5_ops *ops = m->ops;
	int kind = ops->mem_kind ? ops->mem_kind(addr) : KINET_MEM_HOST;
	if (kind < 0)
		kind = KINET_MEM_HOST;
	int acc = (int)access; /* kinet_access values equal ibv_access_flags */
	int path = KINET_MR_PATH_HOST;
	struct ibv_mr *imr;
	char why[256] = "";
	if (kind == KINET_MEM_CUDA) {
		imr = reg_gpu(m, pd->priv, addr, len, acc, &path, why, sizeof(why));
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
		imr = ops->reg_mr(pd->priv, addr, len, acc);
		if (!imr) {
			int e = errno ? errno : EIO;
			KLOG_ERR("mlx5 %s: ibv_reg_mr(%p, %zu): %s", m->name, addr, len, strerror(e));
			return -e;
		}
	}
	kinet_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		ops->dereg_mr(imr);
		return -ENOMEM;
	}
	mr->pd = pd;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	mr->key = imr->lkey;
	mr->rkey = imr->rkey;
	mr->kind = kind;
	mr->path = path;
	mr->priv = imr;
	atomic_fetch_add(&pd->refs, 1);
	KLOG_DBG("mlx5 %s: region %p+%zu %s lkey 0x%x rkey 0x%x", m->name, addr, len,
		 kinet_mr_path_str(path), imr->lkey, imr->rkey);
	*out = mr;
	return 0;
}

int kinet_mlx5_mr_dereg(kinet_mr *mr)
{
	struct m5 *m = mr->pd->ctx->mlx5;
	int rc = m->ops->dereg_mr(mr->priv);
	if (rc) {
		rc = err_of(rc);
		KLOG_ERR("mlx5 %s: ibv_dereg_mr: %s", m->name, kinet_strerror(rc));
		return rc;
	}
	atomic_fetch_sub(&mr->pd->refs, 1);
	free(mr);
	return 0;
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
	pthread_spin_init(&v->lock, PTHREAD_PROCESS_PRIVATE);
	atomic_store(&v->refs, 1);
}

static void qp_release(struct m5 *m, kinet_qp *qp)
{
	struct m5_qp *x = qp->engine_priv;
	if (!x)
		return;
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < x->nmaps; i++)
		range_unmap(m, x->maps[i].p, x->maps[i].len);
	x->nmaps = 0;
	pthread_mutex_unlock(&m->lock);
	if (x->devx)
		kinet_m5_devx_release(m, x);
	if (x->ibqp && m->ops->destroy_qp(x->ibqp))
		KLOG_WARN("mlx5 %s: ibv_destroy_qp failed", m->name);
	if (x->ibscq && m->ops->destroy_cq(x->ibscq))
		KLOG_WARN("mlx5 %s: ibv_destroy_cq failed", m->name);
	if (x->ibrcq && m->ops->destroy_cq(x->ibrcq))
		KLOG_WARN("mlx5 %s: ibv_destroy_cq failed", m->name);
	if (qp->scq == &x->scq)
		pthread_spin_destroy(&x->scq.lock);
	if (qp->rcq == &x->rcq)
		pthread_spin_destroy(&x->rcq.lock);
	kinet_queue_free(x->cpu_pi_page, 4096);
	if (qp->scratch_mr)
		kinet_mlx5_mr_dereg(qp->scratch_mr);
	free(qp->scratch);
	free(qp->dstate);
	free(qp->slot_ready);
	free(x);
	qp->engine_priv = NULL;
}

/* Creates the verbs CQs and QP and exposes them; sizes are retried once so
 * that the send CQ has exactly as many CQEs as the SQ has WQEBBs. */
static int create_queues(struct m5 *m, kinet_qp *qp, struct m5_qp *x, struct ibv_pd *ipd,
			 uint32_t sq_cnt, uint32_t rq_cnt, struct mlx5dv_qp *dq,
			 struct mlx5dv_cq *dscq, struct mlx5dv_cq *drcq)
{
	const struct kinet_mlx5_ops *ops = m->ops;
	for (int attempt = 0; attempt < 3; attempt++) {
		/* the mlx5 provider allocates a power of two >= cqe + 1 entries */
		errno = 0;
		x->ibscq = ops->create_cq(m->ib, (int)sq_cnt - 1, NULL, NULL, 0);
		if (!x->ibscq)
			goto verbs_fail;
		if (rq_cnt) {
			x->ibrcq = ops->create_cq(m->ib, (int)rq_cnt - 1, NULL, NULL, 0);
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
	(void)qp;
	return -e;
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

static int resolve_db_mode(int req)
{
	if (req != KN_DB_AUTO)
		return req;
	const char *t = KT(DB_MODE);
	if (t && !strcmp(t, "blueflame"))
		return KN_DB_BLUEFLAME;
	if (t && !strcmp(t, "cpu"))
		return KN_DB_CPU_PROXY;
	return KN_DB_GPU; /* auto, gpu */
}

int kinet_mlx5_qp_create(kinet_pd *pd, const struct kinet_qp_attr *attr, kinet_qp **out)
{
	kinet_ctx *ctx = pd->ctx;
	struct m5 *m = ctx->mlx5;
	if (attr->send_cq || attr->recv_cq) {
		KLOG_ERR("mlx5 %s: QPs create their own CQs (the device API needs dedicated ones); "
			 "pass send_cq = recv_cq = NULL",
			 m->name);
		return -EOPNOTSUPP;
	}
	uint32_t sq_cnt = kinet_pow2(attr->sq_depth < 2 ? 2 : attr->sq_depth);
	uint32_t rq_cnt = attr->rq_depth ? kinet_pow2(attr->rq_depth < 2 ? 2 : attr->rq_depth) : 0;
	if (sq_cnt > (uint32_t)m->dattr.max_qp_wr || rq_cnt > (uint32_t)m->dattr.max_qp_wr ||
	    sq_cnt > (uint32_t)m->dattr.max_cqe) {
		KLOG_ERR("mlx5 %s: queue depth above the device limit (%d WRs, %d CQEs)", m->name,
			 m->dattr.max_qp_wr, m->dattr.max_cqe);
		return -EINVAL;
	}
	kinet_qp *qp = calloc(1, sizeof(*qp));
	struct m5_qp *x = calloc(1, sizeof(*x));
	if (!qp || !x) {
		free(qp);
		free(x);
		return -ENOMEM;
	}
	qp->ctx = ctx;
	qp->pd = pd;
	qp->attr = *attr;
	qp->engine_priv = x;
	pthread_mutex_init(&qp->rq_lock, NULL);
	struct mlx5dv_qp dq;
	struct mlx5dv_cq dscq, drcq;
	memset(&dq, 0, sizeof(dq));
	memset(&dscq, 0, sizeof(dscq));
	memset(&drcq, 0, sizeof(drcq));
	int rc;
	if (m->devx) {
		/* the fast path: DevX objects, queues in GPU memory when there is a GPU */
		rc = kinet_m5_devx_create(m, qp, x, pd, sq_cnt, rq_cnt);
		if (rc)
			goto fail;
	} else {
		rc = create_queues(m, qp, x, pd->priv, sq_cnt, rq_cnt, &dq, &dscq, &drcq);
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
	}
	qp->uar = (uint8_t *)((uintptr_t)x->bf_reg & ~(uintptr_t)(KN_UAR_PAGE_SIZE - 1));
	qp->scq = &x->scq;
	if (qp->rq_cnt)
		qp->rcq = &x->rcq;
	/* a random first PSN per QP (24 bits) */
	x->psn = (uint32_t)((kn_now_ns() ^ ((uint64_t)qp->qpn * 0x9e3779b97f4a7c15ull)) & 0xffffff);

	rc = -ENOMEM;
	qp->dstate = calloc(1, sizeof(*qp->dstate));
	qp->slot_ready = calloc(qp->sq_cnt, sizeof(uint64_t));
	qp->scratch = calloc(1, 64);
	x->cpu_pi_page = kinet_queue_alloc(4096);
	if (!qp->dstate || !qp->slot_ready || !qp->scratch || !x->cpu_pi_page)
		goto fail;
	qp->dstate->err_ticket = KN_NO_ERROR;
	rc = kinet_mlx5_mr_reg(pd, qp->scratch, 64, KINET_ACCESS_LOCAL_WRITE, &qp->scratch_mr);
	if (rc)
		goto fail;

	/* the GPU must reach the queues; the doorbell register is optional
	 * (without it a CPU thread rings for the GPU) */
	bool uar_mapped = true;
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
		if (!rc && kinet_m5_range_map(m, x, qp->uar, KN_UAR_PAGE_SIZE, 1) != 0)
			uar_mapped = false;
		pthread_mutex_unlock(&m->lock);
		if (rc) {
			KLOG_ERR("mlx5 %s: QP 0x%x: the queues cannot be mapped into the GPU (%s)",
				 m->name, qp->qpn, kinet_strerror(rc));
			goto fail;
		}
	}

	int want = resolve_db_mode(attr->db_mode);
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

	/* the descriptor is complete before the proxy can see the QP */
	kinet_qp_fill_desc(qp, x->bf_reg, x->cpu_pi_page, KINET_BACKEND_MLX5);
	pthread_mutex_lock(&m->lock);
	if (m->nqps == m->qcap) {
		int ncap = m->qcap ? m->qcap * 2 : 16;
		kinet_qp **t = realloc(m->qps, (size_t)ncap * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&m->lock);
			rc = -ENOMEM;
			goto fail;
		}
		m->qps = t;
		m->qcap = ncap;
	}
	m->qps[m->nqps++] = qp;
	pthread_mutex_unlock(&m->lock);
	if (mode == KN_DB_CPU_PROXY && (rc = proxy_start(ctx)) != 0) {
		qps_remove(m, qp);
		goto fail;
	}
	atomic_fetch_add(&pd->refs, 1);

	KLOG_DBG("mlx5 %s: QP 0x%x: SQ %u, RQ %u x %u B, CQ %u, doorbell %s%s", m->name, qp->qpn,
		 qp->sq_cnt, qp->rq_cnt, qp->rq_stride, qp->scq->cnt, kinet_db_mode_str(mode),
		 m->gpu ? " (mapped into the GPU)" : "");
	*out = qp;
	return 0;
fail:
	qp_release(m, qp);
	pthread_mutex_destroy(&qp->rq_lock);
	free(qp);
	return rc;
}

int kinet_mlx5_qp_destroy(kinet_qp *qp)
{
	struct m5 *m = qp->ctx->mlx5;
	qps_remove(m, qp);
	qp_release(m, qp);
	atomic_fetch_sub(&qp->pd->refs, 1);
	pthread_mutex_destroy(&qp->rq_lock);
	free(qp);
	return 0;
}

int kinet_mlx5_qp_endpoint(const kinet_qp *qp, struct kinet_mlx5_ep *ep)
{
	if (!qp || !ep || qp->ctx->backend != KINET_BACKEND_MLX5)
		return -EINVAL;
	const struct m5 *m = qp->ctx->mlx5;
	const struct m5_qp *x = qp->engine_priv;
	memset(ep, 0, sizeof(*ep));
	ep->magic = KINET_MLX5_EP_MAGIC;
	ep->version = KINET_MLX5_EP_VERSION;
	ep->lid = m->pattr.lid;
	memcpy(ep->gid, m->gid.raw, 16);
	ep->qpn = qp->qpn;
	ep->psn = x->psn;
	ep->mtu = (uint8_t)m->pattr.active_mtu;
	ep->link_layer = m->pattr.link_layer;
	ep->port = m->port;
	return 0;
}

static bool legal(int from, int to)
{
	if (to == KINET_QPS_RESET || to == KINET_QPS_ERR)
		return true;
	switch (from) {
	case KINET_QPS_RESET: return to == KINET_QPS_INIT;
	case KINET_QPS_INIT: return to == KINET_QPS_INIT || to == KINET_QPS_RTR;
	case KINET_QPS_RTR: return to == KINET_QPS_RTS;
	case KINET_QPS_RTS: return to == KINET_QPS_RTS;
	default: return false;
	}
}

static int remote_ep(kinet_qp *qp, const struct kinet_qp_remote *r, struct kinet_mlx5_ep *ep)
{
	if (!r) {
		KLOG_ERR("qp 0x%x: RTR needs the remote end", qp->qpn);
		return -EINVAL;
	}
	if (r->local) {
		if (r->local->ctx->backend != KINET_BACKEND_MLX5) {
			KLOG_ERR("qp 0x%x: the remote QP is not an mlx5 QP", qp->qpn);
			return -EINVAL;
		}
		return kinet_mlx5_qp_endpoint(r->local, ep);
	}
	if (!r->wire_addr || r->wire_addr_len != sizeof(*ep)) {
		KLOG_ERR("qp 0x%x: RTR needs the remote QP or its mlx5 endpoint (%zu bytes)",
			 qp->qpn, sizeof(*ep));
		return -EINVAL;
	}
	memcpy(ep, r->wire_addr, sizeof(*ep));
	if (ep->magic != KINET_MLX5_EP_MAGIC) {
		KLOG_ERR("qp 0x%x: the remote endpoint is not an mlx5 endpoint", qp->qpn);
		return -EINVAL;
	}
	if (ep->version != KINET_MLX5_EP_VERSION) {
		KLOG_ERR("qp 0x%x: mlx5 endpoint version %u, expected %u", qp->qpn, ep->version,
			 KINET_MLX5_EP_VERSION);
		return -KINET_EVERSION;
	}
	return 0;
}

static uint8_t clamp_rd_atomic(int dev)
{
	return (uint8_t)(dev < 1 ? 1 : dev > 16 ? 16 : dev);
}

int kinet_mlx5_qp_modify(kinet_qp *qp, int state, const struct kinet_qp_remote *remote)
{
	struct m5 *m = qp->ctx->mlx5;
	struct m5_qp *x = qp->engine_priv;
	int from = atomic_load(&qp->state);
	if (!legal(from, state)) {
		KLOG_ERR("qp 0x%x: illegal transition %s -> %s", qp->qpn, kinet_qp_state_str(from),
			 kinet_qp_state_str(state));
		return -EINVAL;
	}
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	int mask = IBV_QP_STATE;
	struct kinet_mlx5_ep ep;
	memset(&ep, 0, sizeof(ep));
	switch (state) {
	case KINET_QPS_INIT:
		if (from == KINET_QPS_RESET && (x->used || qp->dstate->resv)) {
			/* hardware keeps its CQ index across a QP reset, and the
			 * device API numbers CQEs from the QP's first WQE */
			KLOG_ERR("qp 0x%x: an mlx5 QP cannot be reused after RESET: create a new one",
				 qp->qpn);
			return -EOPNOTSUPP;
		}
		a.qp_state = IBV_QPS_INIT;
		a.pkey_index = 0;
		a.port_num = m->port;
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
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
	if (state == KINET_QPS_RTR)
		qp->peer_qpn = ep.qpn;
	if (state == KINET_QPS_RESET) {
		if (qp->dstate->resv)
			x->used = true;
		memset(qp->dstate, 0, sizeof(*qp->dstate));
		qp->dstate->err_ticket = KN_NO_ERROR;
		memset(qp->slot_ready, 0, (size_t)qp->sq_cnt * sizeof(uint64_t));
	}
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

#endif /* KINET_HAVE_RDMA_HEADERS */
