/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * init.c - joining the job: context, heaps, same-node mappings, the QPs to
 * every other peer, the device state; and the teardown.
 *
 * Order of kinet_shmem_init (every step collective where it exchanges):
 *  1. the bootstrap (given, or kinet_boot_init_env), the executor;
 *  2. a context and PD; both heaps allocated and registered once;
 *  3. allgather of every PE's record (host, boot id, executor, heap sizes,
 *     region descriptors, the shared-memory names / CUDA IPC handle of its
 *     heaps): agreement checked, nodes found, same-node heaps mapped;
 *  4. a barrier, then each PE unlinks its shared-memory objects (every local
 *     peer has them open: nothing is left in /dev/shm);
 *  5. KINET_SHMEM_QPS QPs to every peer the NIC reaches, their descriptors
 *     allgathered, each connected to its twin on the peer;
 *  6. the device state built and placed (GPU memory for CUDA), the predefined
 *     teams, the registered CUDA modules told, a last barrier.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include "shmem/shmem_int.h"
#if KINET_SHMEM_CUDA
#include <kinet/kinet_cuda.h>
#endif

struct shm_state shm_g;

#define INFO_MAGIC 0x4b4e5348u /* "KNSH" */
#define INFO_VERSION 2u /* 2: the reserved bytes are a region of their own */

/* What every PE tells the others at init (fixed size, little-endian hosts). */
struct pe_info {
	uint32_t magic, version;
	int32_t exec, nqp, p2p, pid;
	uint64_t heap_len[2];
	char host[64];
	char boot_id[40];
	char shm_name[2][64];
	uint8_t mr[2][KINET_MR_DESC_SIZE]; /* the user parts */
	uint8_t mr_own[KINET_MR_DESC_SIZE]; /* the device heap's reserved bytes */
	uint8_t ipc[SHM_IPC_HANDLE];
};

/* One QP descriptor of the table each PE contributes. */
struct qp_entry {
	uint32_t len;
	uint8_t d[KINET_QP_DESC_MAX];
};

/* ---- tunables ------------------------------------------------------------------------ */

static const char *const shm_tunables[] = {
	"KINET_SHMEM_EXEC",      "KINET_SHMEM_HEAP_SIZE", "KINET_SHMEM_HOST_HEAP_SIZE",
	"KINET_SHMEM_QPS",       "KINET_SHMEM_QP_MAP",    "KINET_SHMEM_P2P",
	"KINET_SHMEM_TIMEOUT_MS",
};

/* 0, or -EINVAL when one of the layer's tunables is malformed (as
 * kinet_open would refuse it: say so first, naming it). */
static int tunables_ok(void)
{
	for (size_t i = 0; i < sizeof(shm_tunables) / sizeof(shm_tunables[0]); i++) {
		const struct kinet_tunable *t = kinet_tunable_get(shm_tunables[i]);
		if (!t) {
			SHLOG_ERR("libkinet does not know %s: libkinet_shmem of another release?",
				  shm_tunables[i]);
			return -EINVAL;
		}
		if (t->error) {
			SHLOG_ERR("init refused: %s", t->error);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- memory of the heaps ------------------------------------------------------------ */

static int shm_create(struct shm_heap *h, int which, size_t len)
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)h;
	snprintf(h->shm_name, sizeof(h->shm_name), "/kinet-shmem-%d-%016llx-%d", (int)getpid(),
		 (unsigned long long)r, which);
	int fd = shm_open(h->shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		int e = -errno;
		SHLOG_ERR("shm_open(%s): %s", h->shm_name, strerror(errno));
		h->shm_name[0] = 0;
		return e;
	}
	int rc = 0;
	if (ftruncate(fd, (off_t)len) != 0) {
		rc = -errno;
		SHLOG_ERR("ftruncate(%s, %zu): %s", h->shm_name, len, strerror(errno));
	} else {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			rc = -errno;
			SHLOG_ERR("mmap of %zu bytes: %s", len, strerror(errno));
		} else {
			h->base = p;
			h->len = len;
			h->kind = KINET_MEM_HOST;
		}
	}
	close(fd);
	if (rc) {
		shm_unlink(h->shm_name);
		h->shm_name[0] = 0;
	}
	return rc;
}

static void *shm_map_peer(const char *name, size_t len)
{
	int fd = shm_open(name, O_RDWR, 0);
	if (fd < 0) {
		SHLOG_ERR("cannot open a local peer's heap (%s): %s", name, strerror(errno));
		return NULL;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		SHLOG_ERR("cannot map a local peer's heap (%s, %zu bytes): %s", name, len,
			  strerror(errno));
		return NULL;
	}
	return p;
}

static void heap_unlink(struct shm_heap *h)
{
	if (h->shm_name[0] && !h->shm_unlinked) {
		shm_unlink(h->shm_name);
		h->shm_unlinked = true;
	}
}

static int heaps_create(size_t dev_len, size_t host_len)
{
	struct shm_heap *d = &shm_g.heap[KN_SHMEM_HEAP_DEVICE], *h = &shm_g.heap[KN_SHMEM_HEAP_HOST];
	int rc;
	if (shm_g.exec == KINET_SHMEM_EXEC_CUDA) {
		void *p;
		rc = shm_cuda_alloc(dev_len, &p);
		if (rc)
			return rc;
		d->base = p;
		d->len = dev_len;
		d->kind = KINET_MEM_CUDA;
		rc = shm_cuda_memset(p, 0, KN_SHMEM_RESERVED);
	} else {
		rc = shm_create(d, 0, dev_len);
		if (!rc)
			memset(d->base, 0, KN_SHMEM_RESERVED);
	}
	if (rc)
		return rc;
	rc = shm_create(h, 1, host_len);
	if (!rc && shm_g.exec == KINET_SHMEM_EXEC_CUDA)
		rc = shm_cuda_host_register(h->base, host_len);
	if (rc)
		return rc;
	/* The device heap is two regions: the layer's reserved bytes, whose keys
	 * only its own operations use, and the user part, whose keys every user
	 * operation and export carries. A WQE with the user key aimed at the
	 * reserved bytes is then out of its region's bounds at the target's NIC
	 * (the API refuses such addresses before that: knx_sh_reserved). */
	rc = kinet_mr_reg(shm_g.pd, d->base, KN_SHMEM_RESERVED, KINET_ACCESS_ALL, &d->mr_own);
	if (rc) {
		SHLOG_ERR("registering the device heap's reserved bytes: %s", kinet_strerror(rc));
		return rc;
	}
	for (int i = 0; i < 2; i++) {
		size_t skip = i == KN_SHMEM_HEAP_DEVICE ? KN_SHMEM_RESERVED : 0;
		rc = kinet_mr_reg(shm_g.pd, shm_g.heap[i].base + skip, shm_g.heap[i].len - skip,
				  KINET_ACCESS_ALL, &shm_g.heap[i].mr);
		if (rc) {
			SHLOG_ERR("registering the %s heap (%zu bytes): %s", i ? "host" : "device",
				  (size_t)shm_g.heap[i].len, kinet_strerror(rc));
			return rc;
		}
		if (kinet_mr_path(shm_g.heap[i].mr) == KINET_MR_PATH_STAGED)
			SHLOG_INFO("the %s heap is reached by the NIC through host staging",
				   i ? "host" : "device");
		rc = shm_heap_init(&shm_g.heap[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the records --------------------------------------------------------------------- */

static void read_boot_id(char *out, size_t cap)
{
	snprintf(out, cap, "unknown");
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f)
		return;
	if (fgets(out, (int)cap, f))
		out[strcspn(out, "\n")] = 0;
	fclose(f);
}

static int fill_info(struct pe_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->magic = INFO_MAGIC;
	pi->version = INFO_VERSION;
	pi->exec = shm_g.exec;
	pi->nqp = (int32_t)shm_g.nqp;
	pi->p2p = shm_g.p2p;
	pi->pid = (int32_t)getpid();
	gethostname(pi->host, sizeof(pi->host) - 1);
	read_boot_id(pi->boot_id, sizeof(pi->boot_id));
	for (int i = 0; i < 2; i++) {
		pi->heap_len[i] = shm_g.heap[i].len;
		snprintf(pi->shm_name[i], sizeof(pi->shm_name[i]), "%s", shm_g.heap[i].shm_name);
		int n = kinet_mr_export(shm_g.heap[i].mr, pi->mr[i], sizeof(pi->mr[i]));
		if (n < 0)
			return n;
	}
	int n = kinet_mr_export(shm_g.heap[KN_SHMEM_HEAP_DEVICE].mr_own, pi->mr_own,
				sizeof(pi->mr_own));
	if (n < 0)
		return n;
	if (shm_g.exec == KINET_SHMEM_EXEC_CUDA)
		return shm_cuda_ipc_get(shm_g.heap[0].base, pi->ipc);
	return 0;
}

/* Every PE checks the others' records: the same version, executor, QP count,
 * same-node setting and heap sizes, or every PE fails naming the first one
 * that differs (they all see the same records). */
static int check_infos(const struct pe_info *all)
{
	const struct pe_info *a = &all[0];
	for (int p = 0; p < shm_g.n; p++) {
		const struct pe_info *b = &all[p];
		if (b->magic != INFO_MAGIC || b->version != INFO_VERSION) {
			SHLOG_ERR("PE %d speaks another version of the layer (record %08x v%u)", p,
				  b->magic, b->version);
			return -EPROTO;
		}
		if (b->exec != a->exec || b->nqp != a->nqp || b->p2p != a->p2p ||
		    b->heap_len[0] != a->heap_len[0] || b->heap_len[1] != a->heap_len[1]) {
			SHLOG_ERR("PE %d and PE 0 disagree: executor %s / %s, QPs per peer %d / %d, "
				  "same-node load/store %d / %d, heaps %llu+%llu / %llu+%llu bytes "
				  "(every PE needs the same KINET_SHMEM_* settings)",
				  p, b->exec == KINET_SHMEM_EXEC_CUDA ? "cuda" : "host",
				  a->exec == KINET_SHMEM_EXEC_CUDA ? "cuda" : "host", b->nqp, a->nqp,
				  b->p2p, a->p2p, (unsigned long long)b->heap_len[0],
				  (unsigned long long)b->heap_len[1], (unsigned long long)a->heap_len[0],
				  (unsigned long long)a->heap_len[1]);
			return -EINVAL;
		}
	}
	return 0;
}

static bool same_node(const struct pe_info *a, const struct pe_info *b)
{
	return !strncmp(a->host, b->host, sizeof(a->host)) &&
	       !strncmp(a->boot_id, b->boot_id, sizeof(a->boot_id));
}

/* Nodes, the peers' addresses and keys, the local mappings. */
static int peers_setup(const struct pe_info *all)
{
	int n = shm_g.n, me = shm_g.me;
	if (n <= 0 || me < 0 || me >= n)
		return -EINVAL;
	shm_g.peers = calloc((size_t)n, sizeof(*shm_g.peers));
	if (!shm_g.peers)
		return -ENOMEM;
	int nodes = 0;
	for (int p = 0; p < n; p++) {
		int q;
		for (q = 0; q < p && !same_node(&all[p], &all[q]); q++)
			;
		shm_g.peers[p].node = q < p ? shm_g.peers[q].node : nodes++;
	}
	shm_g.node = shm_g.peers[me].node;
	shm_g.local_n = 0;
	for (int p = 0; p < n; p++) {
		struct shm_peer *sp = &shm_g.peers[p];
		if (sp->node == shm_g.node) {
			if (p == me)
				shm_g.local_pe = shm_g.local_n;
			shm_g.local_n++;
		}
		for (int h = 0; h < 2; h++) {
			struct kinet_mr_info mi;
			int rc = kinet_mr_desc_parse(all[p].mr[h], sizeof(all[p].mr[h]), &mi);
			if (rc) {
				SHLOG_ERR("PE %d's region descriptor: %s", p, kinet_strerror(rc));
				return rc;
			}
			sp->base[h] = mi.addr;
			sp->rkey[h] = mi.rkey;
		}
		/* the device heap starts at its reserved bytes, the user region after them */
		struct kinet_mr_info mo;
		int rc = kinet_mr_desc_parse(all[p].mr_own, sizeof(all[p].mr_own), &mo);
		if (!rc && (mo.addr + KN_SHMEM_RESERVED != sp->base[KN_SHMEM_HEAP_DEVICE] ||
			    mo.len != KN_SHMEM_RESERVED))
			rc = -EPROTO;
		if (rc) {
			SHLOG_ERR("PE %d's reserved region descriptor: %s", p, kinet_strerror(rc));
			return rc;
		}
		sp->base[KN_SHMEM_HEAP_DEVICE] = mo.addr;
		sp->rkey_own = mo.rkey;
		if (p == me || sp->node != shm_g.node || !shm_g.p2p)
			continue;
		sp->local = true;
		for (int h = 0; h < 2; h++) {
			size_t len = (size_t)all[p].heap_len[h];
			if (h == 0 && shm_g.exec == KINET_SHMEM_EXEC_CUDA) {
				void *m;
				int rc = shm_cuda_ipc_open(all[p].ipc, &m);
				if (rc) {
					SHLOG_ERR("PE %d is on this node but its GPU heap cannot be "
						  "mapped (CUDA IPC): set KINET_SHMEM_P2P=0 to reach it "
						  "through the NIC", p);
					return rc;
				}
				sp->map[0] = m;
				continue;
			}
			sp->map[h] = shm_map_peer(all[p].shm_name[h], len);
			if (!sp->map[h])
				return -EIO;
			sp->map_len[h] = len;
			if (shm_g.exec == KINET_SHMEM_EXEC_CUDA) {
				int rc = shm_cuda_host_register(sp->map[h], len);
				if (rc)
					return rc;
				sp->host_registered = true;
			}
		}
	}
	SHLOG_INFO("PE %d of %d: node %d of %d, %d PE(s) there, same-node load/store %s", me, n,
		   shm_g.node, nodes, shm_g.local_n, shm_g.p2p ? "on" : "off");
	return 0;
}

/* ---- the QPs ------------------------------------------------------------------------------ */

static bool by_nic(int p)
{
	return p != shm_g.me && !shm_g.peers[p].local;
}

static int qps_setup(void)
{
	int n = shm_g.n, me = shm_g.me, k = (int)shm_g.nqp;
	size_t cnt = (size_t)n * (size_t)k;
	struct qp_entry *mine = calloc(cnt, sizeof(*mine));
	struct qp_entry *all = calloc(cnt * (size_t)n, sizeof(*all));
	int rc = mine && all ? 0 : -ENOMEM;
	int need = 0;
	for (int p = 0; p < n && !rc; p++) {
		if (!by_nic(p))
			continue;
		need = 1;
		struct shm_peer *sp = &shm_g.peers[p];
		sp->qps = calloc((size_t)k, sizeof(*sp->qps));
		if (!sp->qps) {
			rc = -ENOMEM;
			break;
		}
		for (int q = 0; q < k && !rc; q++) {
			struct kinet_qp_attr a = {.share = KN_SHARE_GPU};
			rc = kinet_qp_create(shm_g.pd, &a, &sp->qps[q]);
			if (rc) {
				SHLOG_ERR("creating a QP to PE %d: %s", p, kinet_strerror(rc));
				break;
			}
			int len = kinet_qp_export(sp->qps[q], mine[p * k + q].d, KINET_QP_DESC_MAX);
			if (len < 0) {
				rc = len;
				SHLOG_ERR("PE %d is on another node (or load/store is off) and the NIC "
					  "cannot reach it: exporting a QP: %s", p, kinet_strerror(rc));
				break;
			}
			mine[p * k + q].len = (uint32_t)len;
		}
	}
	/* collective even when this PE needs no QP: the others may */
	int arc = kinet_boot_allgather(shm_g.boot, mine, all, cnt * sizeof(*mine));
	if (!rc)
		rc = arc;
	for (int p = 0; p < n && !rc; p++) {
		if (!by_nic(p))
			continue;
		for (int q = 0; q < k && !rc; q++) {
			const struct qp_entry *e = &all[(size_t)p * cnt + (size_t)me * k + q];
			rc = kinet_qp_connect_remote(shm_g.peers[p].qps[q], e->d, e->len);
			if (rc)
				SHLOG_ERR("connecting QP %d to PE %d: %s", q, p, kinet_strerror(rc));
		}
	}
	if (!rc && need)
		SHLOG_DBG("%d QP(s) to each of the peers the NIC reaches", k);
	free(mine);
	free(all);
	return rc;
}

/* ---- the device state ------------------------------------------------------------------------ */

/* Copies the host image of the state where device code reads it. */
int shm_push_state(void)
{
	if (shm_g.exec != KINET_SHMEM_EXEC_CUDA)
		return 0;
	return shm_cuda_copy_to(shm_g.dev, &shm_g.host, sizeof(shm_g.host));
}

static int state_build(void)
{
	int n = shm_g.n, k = (int)shm_g.nqp;
	bool cuda = shm_g.exec == KINET_SHMEM_EXEC_CUDA;
	kn_shmem *s = &shm_g.host;
	memset(s, 0, sizeof(*s));
	s->my_pe = shm_g.me;
	s->n_pes = n;
	s->nqp = shm_g.nqp;
	s->qp_map = shm_g.qp_map;
	s->timeout_ns = shm_g.timeout_ns;
	for (int h = 0; h < 2; h++) {
		s->heap[h] = shm_g.heap[h].base;
		s->heap_len[h] = shm_g.heap[h].len;
		s->lkey[h] = kinet_mr_lkey(shm_g.heap[h].mr);
	}
	s->lkey_own = kinet_mr_lkey(shm_g.heap[KN_SHMEM_HEAP_DEVICE].mr_own);
	/* the QP descriptors, by value, and the peers */
	size_t cnt = (size_t)n * (size_t)k;
	kn_qp *qps = calloc(cnt, sizeof(*qps));
	kn_shmem_peer *peers = calloc((size_t)n, sizeof(*peers));
	int rc = qps && peers ? 0 : -ENOMEM;
	for (int p = 0; p < n && !rc; p++) {
		struct shm_peer *sp = &shm_g.peers[p];
		for (int h = 0; h < 2; h++) {
			peers[p].base[h] = sp->base[h];
			peers[p].rkey[h] = sp->rkey[h];
			peers[p].map[h] = sp->map[h];
		}
		peers[p].rkey_own = sp->rkey_own;
		peers[p].local = sp->local;
		if (!sp->qps)
			continue;
		for (int q = 0; q < k && !rc; q++) {
			if (cuda) {
#if KINET_SHMEM_CUDA
				kn_qp *d;
				rc = kinet_qp_device_cuda(sp->qps[q], &d);
				if (!rc)
					rc = kinet_qp_device_cuda_desc(sp->qps[q], &qps[p * k + q]);
#else
				rc = -ENOSYS;
#endif
			} else {
				kn_qp *d;
				rc = kinet_qp_device(sp->qps[q], &d);
				if (!rc)
					qps[p * k + q] = *d;
			}
			if (rc)
				SHLOG_ERR("placing the descriptor of a QP to PE %d: %s", p,
					  kinet_strerror(rc));
		}
	}
	if (!rc && cuda) {
		void *d;
		rc = shm_cuda_alloc(cnt * sizeof(*qps) + 64, &d);
		if (!rc) {
			shm_g.dqps = d;
			rc = shm_cuda_copy_to(d, qps, cnt * sizeof(*qps));
		}
		if (!rc)
			rc = shm_cuda_alloc((size_t)n * sizeof(*peers), &d);
		if (!rc) {
			shm_g.dpeers = d;
			rc = shm_cuda_alloc(sizeof(kn_shmem_dyn), &d);
		}
		if (!rc) {
			shm_g.ddyn = d;
			rc = shm_cuda_memset(d, 0, sizeof(kn_shmem_dyn));
		}
		if (!rc)
			rc = shm_cuda_alloc(sizeof(kn_shmem), &d);
		if (!rc)
			shm_g.dev = d;
	} else if (!rc) {
		shm_g.dqps = qps;
		shm_g.dpeers = peers;
		qps = NULL;
		peers = NULL;
		memset(&shm_g.hdyn, 0, sizeof(shm_g.hdyn));
		shm_g.ddyn = &shm_g.hdyn;
		shm_g.dev = &shm_g.host;
	}
	if (!rc) {
		kn_shmem_peer *pp = cuda ? peers : shm_g.dpeers;
		for (int p = 0; p < n; p++)
			if (shm_g.peers[p].qps)
				pp[p].qp = shm_g.dqps + (size_t)p * k;
		if (cuda)
			rc = shm_cuda_copy_to(shm_g.dpeers, peers, (size_t)n * sizeof(*peers));
	}
	free(qps);
	free(peers);
	if (rc)
		return rc;
	s->peers = shm_g.dpeers;
	s->dyn = shm_g.ddyn;
	return 0;
}

/* ---- teardown ----------------------------------------------------------------------------------- */

static void teardown(void)
{
	bool cuda = shm_g.exec == KINET_SHMEM_EXEC_CUDA;
	shm_modules_set(NULL);
	shm_cuda_cumodules_set(NULL);
	shm_teams_fini();
	if (shm_g.peers) {
		for (int p = 0; p < shm_g.n; p++) {
			struct shm_peer *sp = &shm_g.peers[p];
			for (uint32_t q = 0; sp->qps && q < shm_g.nqp; q++) {
				if (!sp->qps[q])
					continue;
#if KINET_SHMEM_CUDA
				if (cuda)
					kinet_qp_device_cuda_release(sp->qps[q]);
#endif
				kinet_qp_destroy(sp->qps[q]);
			}
			free(sp->qps);
			if (sp->map[0] && cuda)
				shm_cuda_ipc_close(sp->map[0]);
			for (int h = 0; h < 2; h++) {
				if (!sp->map_len[h])
					continue;
				if (sp->host_registered && h == 1)
					shm_cuda_host_unregister(sp->map[h]);
				munmap(sp->map[h], sp->map_len[h]);
			}
		}
		free(shm_g.peers);
	}
	for (int i = 0; i < KN_SHMEM_MAX_REGS; i++)
		if (shm_g.regs[i].mr)
			kinet_mr_dereg(shm_g.regs[i].mr);
	if (cuda) {
		shm_cuda_free(shm_g.dqps);
		shm_cuda_free(shm_g.dpeers);
		shm_cuda_free(shm_g.ddyn);
		shm_cuda_free(shm_g.dev);
	} else {
		free(shm_g.dqps);
		free(shm_g.dpeers);
	}
	for (int h = 0; h < 2; h++) {
		struct shm_heap *hp = &shm_g.heap[h];
		if (hp->mr)
			kinet_mr_dereg(hp->mr);
		if (hp->mr_own)
			kinet_mr_dereg(hp->mr_own);
		shm_heap_fini(hp);
		if (hp->base && hp->kind == KINET_MEM_CUDA) {
			shm_cuda_free(hp->base);
		} else if (hp->base) {
			if (cuda && h == 1)
				shm_cuda_host_unregister(hp->base);
			munmap(hp->base, hp->len);
		}
		heap_unlink(hp);
	}
	if (shm_g.pd)
		kinet_pd_free(shm_g.pd);
	if (shm_g.ctx)
		kinet_close(shm_g.ctx);
	if (shm_g.own_boot)
		kinet_boot_close(shm_g.boot);
	memset(&shm_g, 0, sizeof(shm_g));
}

/* Every PE's result of a step: 0 when all succeeded, else this PE's error
 * or -ECANCELED (another PE failed: it logged why). Collective. */
int shm_all_ok(int rc)
{
	int32_t *all = calloc((size_t)shm_g.n, sizeof(*all));
	if (!all)
		return rc ? rc : -ENOMEM;
	int32_t mine = rc;
	int grc = kinet_boot_allgather(shm_g.boot, &mine, all, sizeof(mine));
	if (!rc && grc)
		rc = grc;
	for (int p = 0; p < shm_g.n && !rc && !grc; p++)
		if (all[p]) {
			SHLOG_ERR("PE %d failed (%s): giving up", p, kinet_strerror(all[p]));
			rc = -ECANCELED;
		}
	free(all);
	return rc;
}

/* ---- the API ---------------------------------------------------------------------------------- */

int kinet_shmem_init(const struct kinet_shmem_attr *attr)
{
	return shm_init_with(attr, NULL);
}

int shm_init_with(const struct kinet_shmem_attr *attr, kinet_boot *own)
{
	struct kinet_shmem_attr a;
	memset(&a, 0, sizeof(a));
	a.gpu = -1;
	if (attr)
		a = *attr;
	int rc = 0;
	if (shm_g.up)
		rc = -EALREADY;
	else if (tunables_ok())
		rc = -EINVAL;
	else if (a.executor < KINET_SHMEM_EXEC_AUTO || a.executor > KINET_SHMEM_EXEC_CUDA) {
		SHLOG_ERR("init: unknown executor %d", a.executor);
		rc = -EINVAL;
	}
	if (rc) {
		if (own)
			kinet_boot_close(own);
		return rc;
	}
	memset(&shm_g, 0, sizeof(shm_g));
	if (own) {
		shm_g.boot = own;
		shm_g.own_boot = true;
	} else if (a.boot) {
		shm_g.boot = a.boot;
	} else {
		rc = kinet_boot_init_env(&shm_g.boot);
		if (rc) {
			SHLOG_ERR("init: joining the job: %s", kinet_strerror(rc));
			memset(&shm_g, 0, sizeof(shm_g));
			return rc;
		}
		shm_g.own_boot = true;
	}
	shm_g.me = kinet_boot_rank(shm_g.boot);
	shm_g.n = kinet_boot_size(shm_g.boot);
	shm_g.nqp = (uint32_t)kinet_tunable_int("KINET_SHMEM_QPS");
	shm_g.qp_map = (uint32_t)kinet_tunable_int("KINET_SHMEM_QP_MAP");
	shm_g.p2p = kinet_tunable_int("KINET_SHMEM_P2P") != 0;
	shm_g.timeout_ns = (uint64_t)kinet_tunable_int("KINET_SHMEM_TIMEOUT_MS") * 1000000ull;
	shm_g.gpu = a.gpu;
	int exec = a.executor ? a.executor : (int)kinet_tunable_int("KINET_SHMEM_EXEC");
	if (exec == KINET_SHMEM_EXEC_AUTO)
		exec = shm_cuda_usable(a.gpu) ? KINET_SHMEM_EXEC_CUDA : KINET_SHMEM_EXEC_HOST;
	if (exec == KINET_SHMEM_EXEC_CUDA && !shm_cuda_usable(a.gpu)) {
		SHLOG_ERR("init: the CUDA executor was asked for, but %s",
#if KINET_SHMEM_CUDA
			  "no usable GPU is there"
#else
			  "libkinet_shmem was built without CUDA"
#endif
		);
		rc = -ENODEV;
		goto fail;
	}
	shm_g.exec = exec;
	if (exec == KINET_SHMEM_EXEC_CUDA && (rc = shm_cuda_select(a.gpu)))
		goto fail;
	size_t dev_len = a.heap_size ? a.heap_size : (size_t)kinet_tunable_int("KINET_SHMEM_HEAP_SIZE");
	size_t host_len = a.host_heap_size ? a.host_heap_size
					   : (size_t)kinet_tunable_int("KINET_SHMEM_HOST_HEAP_SIZE");
	dev_len = (dev_len + 4095) & ~(size_t)4095;
	host_len = (host_len + 4095) & ~(size_t)4095;
	if (dev_len < 2 * (size_t)KN_SHMEM_RESERVED || host_len < 4096) {
		SHLOG_ERR("init: heaps of %zu and %zu bytes are too small (device heap at least "
			  "%u)", dev_len, host_len, 2 * KN_SHMEM_RESERVED);
		rc = -EINVAL;
		goto fail;
	}
	struct kinet_ctx_attr ca = {.backend = a.backend};
	rc = kinet_open(&ca, &shm_g.ctx);
	if (!rc)
		rc = kinet_pd_alloc(shm_g.ctx, &shm_g.pd);
	if (rc) {
		SHLOG_ERR("init: opening the NIC: %s", kinet_strerror(rc));
		goto fail;
	}
	rc = heaps_create(dev_len, host_len);
	/* the records, even after a local failure: the others must not wait */
	struct pe_info mine;
	if (!rc)
		rc = fill_info(&mine);
	if (rc)
		memset(&mine, 0, sizeof(mine)); /* a zero record fails every PE's check */
	struct pe_info *all = calloc((size_t)shm_g.n, sizeof(*all));
	if (!all) {
		rc = -ENOMEM;
		goto fail;
	}
	int grc = kinet_boot_allgather(shm_g.boot, &mine, all, sizeof(mine));
	if (!rc)
		rc = grc;
	if (!rc)
		rc = check_infos(all);
	if (!rc)
		rc = peers_setup(all);
	free(all);
	/* everyone has mapped (or failed): the shared-memory names can go */
	rc = shm_all_ok(rc);
	heap_unlink(&shm_g.heap[0]);
	heap_unlink(&shm_g.heap[1]);
	if (rc)
		goto fail;
	rc = shm_all_ok(qps_setup());
	if (!rc)
		rc = state_build();
	if (!rc)
		rc = shm_teams_init();
	if (!rc)
		rc = shm_push_state();
	rc = shm_all_ok(rc);
	if (rc)
		goto fail;
	shm_g.up = true;
	shm_modules_set(shm_g.dev);
	shm_cuda_cumodules_set(shm_g.dev);
	SHLOG_INFO("PE %d of %d ready: %s executor, heaps %zu + %zu bytes, %u QP(s) per remote peer",
		   shm_g.me, shm_g.n, exec == KINET_SHMEM_EXEC_CUDA ? "CUDA" : "host", dev_len,
		   host_len, shm_g.nqp);
	return 0;
fail:
	teardown();
	return rc;
}

int kinet_shmem_finalize(void)
{
	if (!shm_g.up)
		return -EINVAL;
	int rc = kinet_boot_barrier(shm_g.boot);
	if (rc)
		SHLOG_WARN("finalize: the barrier failed (%s): a peer is gone; freeing anyway",
			   kinet_strerror(rc));
	teardown();
	return rc;
}

int kinet_shmem_initialized(void)
{
	return shm_g.up ? 1 : 0;
}

int kinet_shmem_my_pe(void)
{
	return shm_g.up ? shm_g.me : -1;
}

int kinet_shmem_n_pes(void)
{
	return shm_g.up ? shm_g.n : -1;
}

int kinet_shmem_executor(void)
{
	return shm_g.up ? shm_g.exec : -1;
}

kinet_ctx *kinet_shmem_ctx(void)
{
	return shm_g.up ? shm_g.ctx : NULL;
}

kinet_pd *kinet_shmem_pd(void)
{
	return shm_g.up ? shm_g.pd : NULL;
}

const struct kn_shmem *kinet_shmem_device_state(void)
{
	return shm_g.up ? shm_g.dev : NULL;
}

int kinet_shmem_error(int clear)
{
	if (!shm_g.up)
		return -EINVAL;
	int32_t e = 0;
	if (shm_g.exec == KINET_SHMEM_EXEC_CUDA) {
		if (shm_cuda_copy_from(&e, &shm_g.ddyn->error, sizeof(e)))
			return -EIO;
		if (clear && e) {
			int32_t z = 0;
			shm_cuda_copy_to(&shm_g.ddyn->error, &z, sizeof(z));
		}
	} else {
		e = __atomic_load_n(&shm_g.hdyn.error, __ATOMIC_ACQUIRE);
		if (clear)
			__atomic_store_n(&shm_g.hdyn.error, 0, __ATOMIC_RELEASE);
	}
	if (!e)
		e = shm_g.host_error;
	if (clear)
		shm_g.host_error = 0;
	return e;
}

int kinet_shmem_node_of(int pe)
{
	return shm_g.up && pe >= 0 && pe < shm_g.n ? shm_g.peers[pe].node : -1;
}

int kinet_shmem_local_pe(void)
{
	return shm_g.up ? shm_g.local_pe : -1;
}

int kinet_shmem_local_n_pes(void)
{
	return shm_g.up ? shm_g.local_n : -1;
}

int kinet_shmem_pe_mapped(int pe)
{
	if (!shm_g.up || pe < 0 || pe >= shm_g.n)
		return -1;
	return pe == shm_g.me || shm_g.peers[pe].local;
}

int kinet_shmem_barrier_all(void)
{
	if (!shm_g.up)
		return -EINVAL;
	/* The layer's own barrier on the world (kinet_shmem_barrier: on the
	 * PE's stream or this thread), not the bootstrap's: every PE leaves it
	 * within one poll of the last arrival, as NVSHMEM's host barrier does.
	 * Over the bootstrap the PE that releases the others left tens of
	 * microseconds first, and NVSHMEM's atomic ping-pong perftest, which
	 * resets its flag after the barrier while its peer's first atomic is
	 * already on the way, lost that atomic and hung. */
	return kinet_shmem_barrier(KINET_SHMEM_TEAM_WORLD);
}
