/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet-info: what kinet finds on this machine and what it would do.
 *
 *   GPUs (CUDA driver), RDMA NICs (rdma-core), the peer-memory module, the
 *   PCIe distance of each GPU to each NIC (hwloc), for each GPU the backend,
 *   memory path and doorbell mode kinet would choose and why, and the
 *   tunables with their current values. --json prints the same as JSON.
 *   --tunables-md prints the table of docs/tunables.md (generated from the
 *   registry; test_tunables checks that the file holds exactly this).
 *   Around them (platform.c): the NUMA node, driver and firmware of each GPU
 *   and NIC, the BAR1 size of each GPU, ACS on the PCIe path of each GPU-NIC
 *   pair, the IOMMU mode, the kernel, and libfabric (version, providers and
 *   the interfaces they found). What cannot be read says "unknown (why)".
 *
 * The backend and doorbell mode are not guessed: kinet-info opens a context
 * the way an application would (kinet_open(NULL)), creates a QP and
 * registers GPU memory, and reports what happened (--no-trial skips this).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#include "kinet_config.h"
#include "nic/mlx5/mlx5.h"
#include "gpu/cudrv.h"
#include "topo.h"
#include "platform.h"
#if KINET_HAVE_RDMA_HEADERS
#include "nic/mlx5/ops.h"
#endif

#define MAXGPU 16
#define MAXNIC 16

struct trial {
	int done;
	int rc;            /* kinet_open */
	int backend;
	char reason[300];
	int qp_rc;
	int db_mode;
	int mr_rc[MAXGPU]; /* GPU memory registration per GPU */
	int mr_path[MAXGPU];
	int wire_rc;       /* kinet_wire_info (software NIC) */
	struct kinet_wire_info wire;
};

static struct {
	int ngpu;
	char gpu_why[200];
	struct kinet_gpu_info gpu[MAXGPU];
	int nnic;
	char nic_why[300];
	struct kinet_nic_info nic[MAXNIC];
	const char *ops_name;
	int dmabuf_mr; /* rdma-core can register dma-bufs */
	const char *peermem;
	int topo_rc;
	char topo_why[200];
	int dist[MAXGPU][MAXNIC];
	int probe_rc;
	char probe_why[300];
	int staging;
	struct trial t;
	struct platform plat;
	struct plat_dev gdev[MAXGPU], ndev[MAXNIC];
	struct plat_acs acs[MAXGPU][MAXNIC];
} I;

/* ---- gathering ------------------------------------------------------------------ */

static void gather(int trial)
{
	if (kinet_cudrv_load(I.gpu_why, sizeof(I.gpu_why)) == 0) {
		I.ngpu = kinet_cudrv_gpu_count();
		if (I.ngpu > MAXGPU)
			I.ngpu = MAXGPU;
		for (int i = 0; i < I.ngpu; i++)
			kinet_cudrv_gpu_info(i, &I.gpu[i]);
	}
	I.nnic = kinet_mlx5_list_nics(I.nic, MAXNIC, I.nic_why, sizeof(I.nic_why));
	if (I.nnic < 0)
		I.nnic = 0;
	else if (I.nnic == 0 && !I.nic_why[0])
		snprintf(I.nic_why, sizeof(I.nic_why), "no RDMA device found");
	I.ops_name = kinet_mlx5_ops_name();
#if KINET_HAVE_RDMA_HEADERS
	const struct kinet_mlx5_ops *ops = kinet_mlx5_ops_get(NULL, 0);
	I.dmabuf_mr = ops && ops->reg_dmabuf_mr;
#endif
	I.peermem = kinet_peermem_module();
	I.staging = KT(ALLOW_HOST_STAGING);
	I.topo_rc = kinet_topo_load(NULL, I.topo_why, sizeof(I.topo_why));
	for (int n = 0; n < I.nnic; n++)
		if (!I.nic[n].pci[0] && I.topo_rc == 0)
			kinet_topo_osdev_pci(I.nic[n].name, I.nic[n].pci, sizeof(I.nic[n].pci));
	for (int g = 0; g < I.ngpu; g++)
		for (int n = 0; n < I.nnic; n++)
			I.dist[g][n] = I.topo_rc ? -1
						 : kinet_topo_distance(I.gpu[g].pci_bus_id, I.nic[n].pci);
	I.probe_rc = kinet_mlx5_probe(NULL, I.probe_why, sizeof(I.probe_why));
	plat_gather(&I.plat);
	for (int g = 0; g < I.ngpu; g++)
		plat_dev_gather(I.gpu[g].pci_bus_id, NULL, 1, &I.gdev[g]);
	for (int n = 0; n < I.nnic; n++)
		plat_dev_gather(I.nic[n].pci, I.nic[n].name, 0, &I.ndev[n]);
	for (int g = 0; g < I.ngpu; g++)
		for (int n = 0; n < I.nnic; n++)
			plat_acs_gather(&I.gdev[g], &I.ndev[n], &I.acs[g][n]);
	if (!trial)
		return;
	/* open as an application would, and try */
	kinet_ctx *ctx = NULL;
	I.t.done = 1;
	I.t.rc = kinet_open(NULL, &ctx);
	if (I.t.rc)
		return;
	I.t.backend = kinet_ctx_backend(ctx);
	snprintf(I.t.reason, sizeof(I.t.reason), "%s", kinet_ctx_backend_reason(ctx));
	kinet_pd *pd = NULL;
	kinet_qp *qp = NULL;
	I.t.qp_rc = kinet_pd_alloc(ctx, &pd);
	if (!I.t.qp_rc)
		I.t.qp_rc = kinet_qp_create(pd, NULL, &qp);
	if (!I.t.qp_rc)
		I.t.db_mode = kinet_qp_db_mode(qp);
	I.t.wire_rc = kinet_wire_info(ctx, &I.t.wire, sizeof(I.t.wire));
	for (int g = 0; pd && g < I.ngpu; g++) {
		void *p = NULL;
		kinet_mr *mr = NULL;
		I.t.mr_rc[g] = kinet_cudrv_alloc(g, 1 << 20, &p);
		if (!I.t.mr_rc[g])
			I.t.mr_rc[g] = kinet_mr_reg(pd, p, 1 << 20, KINET_ACCESS_ALL, &mr);
		if (!I.t.mr_rc[g]) {
			I.t.mr_path[g] = kinet_mr_path(mr);
			kinet_mr_dereg(mr);
		}
		if (p)
			kinet_cudrv_free(p);
	}
	if (qp)
		kinet_qp_destroy(qp);
	if (pd)
		kinet_pd_free(pd);
	kinet_close(ctx);
}

/* Nearest usable NIC of a GPU (smallest distance; unknown counts last). */
static int nearest_nic(int g)
{
	int best = -1, bd = 99;
	for (int n = 0; n < I.nnic; n++) {
		if (!I.nic[n].usable)
			continue;
		int d = I.dist[g][n] < 0 ? 50 : I.dist[g][n];
		if (d < bd) {
			bd = d;
			best = n;
		}
	}
	return best;
}

static const char *backend_of(void)
{
	if (I.t.done && I.t.rc == 0)
		return kinet_backend_name(I.t.backend);
	return I.probe_rc == 0 ? "mlx5" : "soft";
}

static void backend_why(char *b, size_t l)
{
	if (I.t.done && I.t.rc == 0)
		snprintf(b, l, "%s", I.t.reason);
	else if (I.t.done)
		snprintf(b, l, "kinet_open failed: %s", kinet_strerror(I.t.rc));
	else if (I.probe_rc == 0)
		snprintf(b, l, "mlx5: %s", I.probe_why);
	else
		snprintf(b, l, "soft: mlx5 not available (%s)", I.probe_why);
}

/* The memory path a GPU's memory would take, and why. */
static const char *mem_path(int g, char *why, size_t l)
{
	bool mlx5 = !strcmp(backend_of(), "mlx5");
	if (!mlx5) {
		snprintf(why, l, "the software NIC is a CPU: it copies GPU memory through the host");
		return "staged";
	}
	if (I.gpu[g].dmabuf && I.dmabuf_mr) {
		snprintf(why, l, "the GPU exports dma-bufs and rdma-core registers them");
		return "dmabuf";
	}
	if (I.peermem) {
		snprintf(why, l, "%s is loaded: ibv_reg_mr pins GPU memory%s", I.peermem,
			 I.gpu[g].dmabuf ? "" : " (no dma-buf support)");
		return "peermem";
	}
	snprintf(why, l,
		 "no dma-buf support and no peer-memory module: GPU memory is refused%s",
		 I.staging ? " (host staging is allowed, but only the soft backend stages)" : "");
	return "none";
}

static const char *db_why(int mode)
{
	bool mlx5 = !strcmp(backend_of(), "mlx5");
	switch (mode) {
	case KN_DB_GPU:
		if (!I.ngpu)
			return mlx5 ? "no GPU: the host executor writes the doorbell register itself"
				    : "no GPU: the host executor writes the doorbell page itself";
		return mlx5 ? "the doorbell register (UAR page) is mapped into the GPU, which writes it"
			    : "the doorbell page is host memory mapped into the GPU, which writes it";
	case KN_DB_BLUEFLAME: return "the whole WQE is written into the BlueFlame register";
	case KN_DB_CPU_PROXY:
		return "a CPU thread rings the doorbell for the GPU (the register could not be "
		       "mapped, or KINET_DB_MODE=cpu)";
	default: return "?";
	}
}

/* ---- text ------------------------------------------------------------------------- */

/* Why there is no GPU-NIC pair to look at, or "". */
static void acs_note(char *b, size_t l)
{
	b[0] = 0;
	if (!I.ngpu || !I.nnic)
		snprintf(b, l, "unknown (no GPU-NIC pair here: %d GPU%s, %d NIC%s)", I.ngpu,
			 I.ngpu == 1 ? "" : "s", I.nnic, I.nnic == 1 ? "" : "s");
}

static void print_acs_text(void)
{
	char note[128];
	printf("\n== ACS on the GPU-NIC paths ==\n");
	acs_note(note, sizeof(note));
	if (note[0])
		printf("  %s\n", note);
	for (int g = 0; g < I.ngpu; g++)
		for (int n = 0; n < I.nnic; n++) {
			const struct plat_acs *a = &I.acs[g][n];
			printf("  GPU%d - %s: %s\n", g, I.nic[n].name, a->verdict.s);
			for (int b = 0; b < a->nbr; b++)
				printf("    bridge %s: %s\n", a->br[b], a->br_state[b].s);
		}
}

static void print_platform_text(void)
{
	const struct platform *p = &I.plat;
	printf("\n== platform ==\n");
	printf("  kernel %s\n", p->kernel.s);
	printf("  IOMMU %s; kernel options: %s\n", p->iommu.s, p->iommu_cmdline.s);
	printf("  NVIDIA driver %s\n", p->gpu_driver.s);
	printf("  libfabric %s", p->fi_version.s);
	if (p->fi_built[0])
		printf(" (kinet-info built with %s)", p->fi_built);
	printf("; the wire's provider (KINET_FI_PROVIDER) %s: %s\n", p->fi_wire,
	       p->fi_note.known ? (p->fi_wire_found ? "found" : "not found") : "unknown");
	if (!p->fi_note.known)
		printf("    providers: %s\n", p->fi_note.s);
	else if (!p->nprov)
		printf("    providers: none found\n");
	for (int i = 0; i < p->nprov; i++)
		printf("    %-14s fabric %s, domain %s\n", p->prov[i].prov, p->prov[i].fabric,
		       p->prov[i].domain);
}

static void print_text(void)
{
	printf("kinet %s (built with CUDA=%d libfabric=%d rdma-core-headers=%d hwloc=%d MPI=%d)\n",
	       KINET_VERSION, KINET_HAVE_CUDA, KINET_HAVE_FABRIC, KINET_HAVE_RDMA_HEADERS,
	       KINET_HAVE_HWLOC, KINET_HAVE_MPI);
	printf("\n== GPUs ==\n");
	if (!I.ngpu)
		printf("  none: %s\n", I.gpu_why);
	else
		printf("  CUDA driver %d.%d\n", kinet_cudrv_version() / 1000,
		       (kinet_cudrv_version() % 1000) / 10);
	for (int g = 0; g < I.ngpu; g++) {
		const struct plat_dev *d = &I.gdev[g];
		printf("  GPU %d  %s  pci %s  dma-buf %s  gpudirect-rdma %s\n", g, I.gpu[g].name,
		       I.gpu[g].pci_bus_id, I.gpu[g].dmabuf ? "yes" : "no",
		       I.gpu[g].gdr ? "yes" : "no");
		if (!d->sysfs[0])
			printf("    NUMA node, BAR1, driver, firmware, IOMMU: %s\n", d->numa.s);
		else
			printf("    NUMA node %s; BAR1 %s\n    driver %s; firmware %s\n    IOMMU %s\n",
			       d->numa.s, d->bar1.s, d->driver.s, d->firmware.s, d->iommu_group.s);
	}
	printf("\n== NICs ==\n");
	if (I.ops_name)
		printf("  through %s\n", I.ops_name);
	if (!I.nnic)
		printf("  none: %s\n", I.nic_why);
	for (int n = 0; n < I.nnic; n++) {
		const struct kinet_nic_info *c = &I.nic[n];
		printf("  %s  pci %s  %s  %s\n", c->name, c->pci[0] ? c->pci : "?",
		       c->mlx5 ? "mlx5" : "not mlx5", c->usable ? "usable" : "not usable");
		for (int p = 0; p < c->nports; p++) {
			const struct kinet_nic_port *pp = &c->port[p];
			printf("    port %d  %s  %s  MTU %d", pp->port,
			       pp->state == 4 ? "ACTIVE" : "not active",
			       pp->link_layer == 2 ? "RoCE" : "InfiniBand", pp->active_mtu);
			if (pp->link_layer == 2)
				printf("  GID %d %s\n", pp->gid_index, pp->gid_index >= 0 ? pp->gid : "(none)");
			else
				printf("  LID 0x%x\n", pp->lid);
		}
		printf("    %s\n", c->why);
		const struct plat_dev *d = &I.ndev[n];
		if (!d->sysfs[0])
			printf("    NUMA node, driver, firmware, IOMMU: %s\n", d->numa.s);
		else
			printf("    NUMA node %s; driver %s\n    firmware %s; IOMMU %s\n", d->numa.s,
			       d->driver.s, d->firmware.s, d->iommu_group.s);
	}
	printf("\n== peer memory ==\n  %s\n",
	       I.peermem ? I.peermem : "not loaded (neither nvidia_peermem nor nv_peer_mem)");
	printf("\n== topology (PCIe distance GPU to NIC) ==\n");
	if (I.topo_rc)
		printf("  unavailable: %s\n", I.topo_why);
	else if (!I.ngpu || !I.nnic)
		printf("  hwloc loaded; nothing to relate (%d GPU, %d NIC)\n", I.ngpu, I.nnic);
	else {
		printf("  %-8s", "");
		for (int n = 0; n < I.nnic; n++)
			printf(" %-8s", I.nic[n].name);
		printf("\n");
		for (int g = 0; g < I.ngpu; g++) {
			printf("  GPU%-5d", g);
			for (int n = 0; n < I.nnic; n++)
				printf(" %-8s", kinet_topo_dist_str(I.dist[g][n]));
			printf("\n");
		}
		printf("  PIX one PCIe bridge, PXB several, PHB host bridge, NODE same NUMA node, "
		       "SYS across NUMA nodes\n");
	}
	print_acs_text();
	print_platform_text();
	char why[400], mwhy[200];
	backend_why(why, sizeof(why));
	printf("\n== choice ==\n");
	printf("  backend %s: %s\n", backend_of(), why);
	if (I.t.done && I.t.rc == 0) {
		if (I.t.qp_rc)
			printf("  doorbell: QP creation failed: %s\n", kinet_strerror(I.t.qp_rc));
		else
			printf("  doorbell %s: %s\n", kinet_db_mode_str(I.t.db_mode),
			       db_why(I.t.db_mode));
	}
	if (I.t.done && I.t.rc == 0 && I.t.wire_rc == 0) {
		const struct kinet_wire_info *wi = &I.t.wire;
		printf("  wire: provider %s (fabric %s, domain %s), libfabric %u.%u, %s, %s\n",
		       wi->provider, wi->fabric, wi->domain, wi->fi_version >> 16,
		       wi->fi_version & 0xffff, wi->rma ? "rendezvous writes" : "messages only",
		       wi->local_desc ? "local descriptors" : "no local descriptors needed");
		printf("  wire GPU payloads: %s%s\n",
		       wi->hmem ? "registered with the provider (FI_HMEM_CUDA)" : "staged: ",
		       wi->hmem ? "" : wi->hmem_why);
		printf("  wire peers on this host: %s%s%s\n",
		       wi->same_host[0] ? wi->same_host : "no same-host provider",
		       wi->same_host[0] ? (wi->same_host_hmem ? " (GPU regions registered), "
							       : " (GPU payloads staged), ")
					: ": ",
		       wi->same_host_why);
		if (wi->same_host[0] && !wi->same_host_hmem)
			printf("  wire GPU payloads to peers on this host: staged: %s\n",
			       wi->same_host_hmem_why);
		printf("  wire idle engine: %s\n",
		       wi->cq_wait_fd ? "sleeps on the provider's wait fd (KINET_NET_CQ_WAIT=fd)"
				      : "naps, no wait fd (KINET_NET_CQ_WAIT=none, or the provider "
					"has none)");
		printf("  wire rendezvous data copied into place: %s (%s)\n",
		       wi->copy_thread ? "on a thread of its own" : "on the engine thread",
		       wi->copy_why);
		if (wi->copy_thread)
			printf("  wire reads copied by the engine all the same: under %llu bytes "
			       "(%llu to peers on this host)\n",
			       (unsigned long long)wi->copy_min,
			       (unsigned long long)wi->same_host_copy_min);
	} else if (I.t.done && I.t.rc == 0 && I.t.wire_rc != -ENOTSUP) {
		printf("  wire: cannot be opened: %s\n", kinet_strerror(I.t.wire_rc));
	}
	if (!I.ngpu)
		printf("  no GPU: the host executor drives the queues\n");
	for (int g = 0; g < I.ngpu; g++) {
		const char *mp = mem_path(g, mwhy, sizeof(mwhy));
		int nn = nearest_nic(g);
		printf("  GPU %d: backend %s", g, backend_of());
		if (!strcmp(backend_of(), "mlx5") && nn >= 0)
			printf(" (nearest NIC %s, %s)", I.nic[nn].name,
			       kinet_topo_dist_str(I.dist[g][nn]));
		printf(", memory %s: %s\n", mp, mwhy);
		if (I.t.done && I.t.rc == 0) {
			if (I.t.mr_rc[g])
				printf("    trial: registering 1 MiB of GPU %d memory failed: %s\n", g,
				       kinet_strerror(I.t.mr_rc[g]));
			else
				printf("    trial: 1 MiB of GPU %d memory registered, path %s\n", g,
				       kinet_mr_path_str(I.t.mr_path[g]));
		}
	}
	printf("\n== tunables ==\n");
	kinet_tunables_print(stdout);
}

/* ---- JSON ------------------------------------------------------------------------- */

static void js(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static const char *tunable_type(const struct kinet_tunable *t)
{
	static const char *names[] = {"int", "bool", "size", "duration", "enum", "string"};
	return t->type >= 0 && t->type < 6 ? names[t->type] : "?";
}

/* A table cell: '|' escaped, newlines never occur in the registry. */
static void md(const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			putchar('\\');
		putchar(*s);
	}
}

/* The table of docs/tunables.md, from the registry. */
static void print_tunables_md(void)
{
	printf("| variable | type | default | allowed | if malformed | meaning |\n");
	printf("| --- | --- | --- | --- | --- | --- |\n");
	for (int i = 0; i < kinet_tunable_count(); i++) {
		const struct kinet_tunable *t = kinet_tunable_at(i);
		printf("| `%s` | %s%s%s%s | ", t->name, tunable_type(t), t->unit[0] ? " (" : "",
		       t->unit, t->unit[0] ? ")" : "");
		if (t->def[0]) {
			printf("`");
			md(t->def);
			printf("`");
		} else {
			printf("not set");
		}
		printf(" | ");
		md(t->allowed);
		if (t->refused_by && !strcmp(t->refused_by, "kinet_boot_init"))
			printf(" | `kinet_boot_init`, `kinet_boot_init_env` fail | ");
		else if (t->refused_by)
			printf(" | `%s` fails | ", t->refused_by);
		else
			printf(" | default, with a warning | ");
		md(t->desc);
		printf("%s |\n", (t->flags & KINET_TUNABLE_SECRET) ? " (secret: never shown)" : "");
	}
}

/* The sysfs items of a GPU or NIC. */
static void json_dev(const struct plat_dev *d, int gpu)
{
	printf(", \"numa_node\": ");
	js(d->numa.s);
	printf(", \"driver\": ");
	js(d->driver.s);
	printf(", \"firmware\": ");
	js(d->firmware.s);
	printf(", \"iommu_group\": ");
	js(d->iommu_group.s);
	if (gpu) {
		printf(", \"bar1\": ");
		js(d->bar1.s);
		if (d->bar1_bytes >= 0)
			printf(", \"bar1_bytes\": %lld", d->bar1_bytes);
		else
			printf(", \"bar1_bytes\": null");
	}
}

static void json_platform(void)
{
	const struct platform *p = &I.plat;
	char note[128];
	printf("  \"platform\": {\"kernel\": ");
	js(p->kernel.s);
	printf(", \"iommu\": ");
	js(p->iommu.s);
	printf(", \"iommu_cmdline\": ");
	js(p->iommu_cmdline.s);
	printf(", \"gpu_driver\": ");
	js(p->gpu_driver.s);
	printf(",\n    \"libfabric\": {\"version\": ");
	js(p->fi_version.s);
	printf(", \"built_with\": ");
	js(p->fi_built);
	printf(", \"wire_provider\": ");
	js(p->fi_wire);
	printf(", \"wire_provider_found\": %s, \"note\": ", p->fi_wire_found ? "true" : "false");
	js(p->fi_note.s);
	printf(", \"providers\": [");
	for (int i = 0; i < p->nprov; i++) {
		printf("%s\n      {\"provider\": ", i ? "," : "");
		js(p->prov[i].prov);
		printf(", \"fabric\": ");
		js(p->prov[i].fabric);
		printf(", \"domain\": ");
		js(p->prov[i].domain);
		printf("}");
	}
	printf("]},\n    \"acs_note\": ");
	acs_note(note, sizeof(note));
	js(note);
	printf(", \"acs\": [");
	int first = 1;
	for (int g = 0; g < I.ngpu; g++)
		for (int n = 0; n < I.nnic; n++) {
			const struct plat_acs *a = &I.acs[g][n];
			printf("%s\n      {\"gpu\": %d, \"nic\": ", first ? "" : ",", g);
			js(I.nic[n].name);
			printf(", \"state\": ");
			js(a->verdict.s);
			printf(", \"bridges\": [");
			for (int b = 0; b < a->nbr; b++) {
				printf("%s{\"pci\": ", b ? ", " : "");
				js(a->br[b]);
				printf(", \"acs\": ");
				js(a->br_state[b].s);
				printf("}");
			}
			printf("]}");
			first = 0;
		}
	printf("]}");
}

static void print_json(void)
{
	printf("{\n  \"version\": ");
	js(KINET_VERSION);
	printf(",\n  \"build\": {\"cuda\": %d, \"libfabric\": %d, \"rdma_core_headers\": %d, "
	       "\"hwloc\": %d, \"mpi\": %d},\n",
	       KINET_HAVE_CUDA, KINET_HAVE_FABRIC, KINET_HAVE_RDMA_HEADERS, KINET_HAVE_HWLOC,
	       KINET_HAVE_MPI);
	printf("  \"gpus\": [");
	for (int g = 0; g < I.ngpu; g++) {
		printf("%s\n    {\"index\": %d, \"name\": ", g ? "," : "", g);
		js(I.gpu[g].name);
		printf(", \"pci\": ");
		js(I.gpu[g].pci_bus_id);
		printf(", \"dmabuf\": %s, \"gpudirect_rdma\": %s", I.gpu[g].dmabuf ? "true" : "false",
		       I.gpu[g].gdr ? "true" : "false");
		json_dev(&I.gdev[g], 1);
		printf("}");
	}
	printf("%s],\n  \"gpus_note\": ", I.ngpu ? "\n  " : "");
	js(I.ngpu ? "" : I.gpu_why);
	printf(",\n  \"nics_through\": ");
	js(I.ops_name ? I.ops_name : "");
	printf(",\n  \"nics\": [");
	for (int n = 0; n < I.nnic; n++) {
		const struct kinet_nic_info *c = &I.nic[n];
		printf("%s\n    {\"name\": ", n ? "," : "");
		js(c->name);
		printf(", \"pci\": ");
		js(c->pci);
		printf(", \"mlx5\": %s, \"usable\": %s, \"note\": ", c->mlx5 ? "true" : "false",
		       c->usable ? "true" : "false");
		js(c->why);
		printf(", \"ports\": [");
		for (int p = 0; p < c->nports; p++) {
			const struct kinet_nic_port *pp = &c->port[p];
			printf("%s{\"port\": %d, \"active\": %s, \"link_layer\": ", p ? ", " : "",
			       pp->port, pp->state == 4 ? "true" : "false");
			js(pp->link_layer == 2 ? "roce" : "infiniband");
			printf(", \"mtu\": %d, \"lid\": %u, \"gid_index\": %d, \"gid\": ", pp->active_mtu,
			       pp->lid, pp->gid_index);
			js(pp->gid_index >= 0 ? pp->gid : "");
			printf("}");
		}
		printf("]");
		json_dev(&I.ndev[n], 0);
		printf("}");
	}
	printf("%s],\n  \"nics_note\": ", I.nnic ? "\n  " : "");
	js(I.nnic ? "" : I.nic_why);
	printf(",\n  \"peer_memory\": {\"loaded\": %s, \"module\": ", I.peermem ? "true" : "false");
	js(I.peermem ? I.peermem : "");
	printf("},\n  \"topology\": {\"available\": %s, \"note\": ", I.topo_rc ? "false" : "true");
	js(I.topo_rc ? I.topo_why : "");
	printf(", \"distances\": [");
	int first = 1;
	for (int g = 0; g < I.ngpu; g++)
		for (int n = 0; n < I.nnic; n++) {
			printf("%s{\"gpu\": %d, \"nic\": ", first ? "" : ", ", g);
			js(I.nic[n].name);
			printf(", \"distance\": ");
			js(kinet_topo_dist_str(I.dist[g][n]));
			printf("}");
			first = 0;
		}
	char why[400], mwhy[200];
	backend_why(why, sizeof(why));
	printf("]},\n  \"choice\": {\"backend\": ");
	js(backend_of());
	printf(", \"why\": ");
	js(why);
	printf(", \"trial\": %s", I.t.done ? "true" : "false");
	if (I.t.done && I.t.rc == 0 && I.t.qp_rc == 0) {
		printf(", \"doorbell\": ");
		js(kinet_db_mode_str(I.t.db_mode));
		printf(", \"doorbell_why\": ");
		js(db_why(I.t.db_mode));
	}
	if (I.t.done && I.t.rc == 0 && I.t.wire_rc == 0) {
		const struct kinet_wire_info *wi = &I.t.wire;
		printf(", \"wire\": {\"provider\": ");
		js(wi->provider);
		printf(", \"fabric\": ");
		js(wi->fabric);
		printf(", \"domain\": ");
		js(wi->domain);
		printf(", \"libfabric\": \"%u.%u\", \"rma\": %s, \"mr_mode\": %llu, "
		       "\"local_desc\": %s, \"hmem\": %s, \"hmem_why\": ",
		       wi->fi_version >> 16, wi->fi_version & 0xffff, wi->rma ? "true" : "false",
		       (unsigned long long)wi->mr_mode, wi->local_desc ? "true" : "false",
		       wi->hmem ? "true" : "false");
		js(wi->hmem_why);
		printf(", \"same_host\": ");
		js(wi->same_host);
		printf(", \"same_host_hmem\": %s, \"same_host_hmem_why\": ",
		       wi->same_host_hmem ? "true" : "false");
		js(wi->same_host_hmem_why);
		printf(", \"same_host_why\": ");
		js(wi->same_host_why);
		printf(", \"cq_wait_fd\": %s, \"copy_min\": %llu, \"same_host_copy_min\": %llu",
		       wi->cq_wait_fd ? "true" : "false", (unsigned long long)wi->copy_min,
		       (unsigned long long)wi->same_host_copy_min);
		printf(", \"copy_thread\": %s, \"copy_why\": ", wi->copy_thread ? "true" : "false");
		js(wi->copy_why);
		printf("}");
	}
	printf(", \"gpus\": [");
	for (int g = 0; g < I.ngpu; g++) {
		const char *mp = mem_path(g, mwhy, sizeof(mwhy));
		int nn = nearest_nic(g);
		printf("%s{\"gpu\": %d, \"nic\": ", g ? ", " : "", g);
		js(nn >= 0 && !strcmp(backend_of(), "mlx5") ? I.nic[nn].name : "");
		printf(", \"memory\": ");
		js(mp);
		printf(", \"memory_why\": ");
		js(mwhy);
		if (I.t.done && I.t.rc == 0) {
			printf(", \"memory_trial\": ");
			js(I.t.mr_rc[g] ? kinet_strerror(I.t.mr_rc[g])
					: kinet_mr_path_str(I.t.mr_path[g]));
		}
		printf("}");
	}
	printf("]},\n");
	json_platform();
	printf(",\n  \"tunables\": [");
	for (int i = 0; i < kinet_tunable_count(); i++) {
		const struct kinet_tunable *t = kinet_tunable_at(i);
		printf("%s\n    {\"name\": ", i ? "," : "");
		js(t->name);
		printf(", \"value\": ");
		js(t->value);
		printf(", \"default\": ");
		js(t->def);
		printf(", \"description\": ");
		js(t->desc);
		printf(", \"type\": ");
		js(tunable_type(t));
		printf(", \"unit\": ");
		js(t->unit);
		printf(", \"allowed\": ");
		js(t->allowed);
		printf(", \"set\": %s, \"secret\": %s, \"refused_by\": ",
		       (t->flags & KINET_TUNABLE_SET) ? "true" : "false",
		       (t->flags & KINET_TUNABLE_SECRET) ? "true" : "false");
		if (t->refused_by)
			js(t->refused_by);
		else
			printf("null");
		printf(", \"error\": ");
		if (t->error)
			js(t->error);
		else
			printf("null");
		printf("}");
	}
	printf("\n  ]\n}\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: kinet-info [--json] [--no-trial] | --tunables-md\n"
		   "  GPUs, RDMA NICs, peer memory, GPU-NIC PCIe distances, and the backend,\n"
		   "  memory path and doorbell mode kinet chooses, with the tunables.\n"
		   "  --json      machine-readable output\n"
		   "  --no-trial  do not open a context, create a QP or register GPU memory\n"
		   "  --tunables-md  only the table of tunables, in Markdown (docs/tunables.md)\n");
}

int main(int argc, char **argv)
{
	int json = 0, trial = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--no-trial"))
			trial = 0;
		else if (!strcmp(argv[i], "--tunables-md")) {
			print_tunables_md();
			return 0;
		}
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "kinet-info: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	/* the trial reports its failures itself: only errors are logged */
	if (!(kinet_tunable_get("KINET_LOG")->flags & KINET_TUNABLE_SET))
		kinet_log_set_level(KINET_LOG_ERROR);
	gather(trial);
	if (json)
		print_json();
	else
		print_text();
	kinet_topo_unload();
	return 0;
}
