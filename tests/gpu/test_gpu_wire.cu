/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU payloads between two processes over the software NIC's wire: regions
 * in GPU memory on both sides, a rendezvous write, an eager write, a send
 * into a GPU receive buffer and a read, verified byte for byte on random
 * contents. The path is checked against what the wire says
 * (kinet_wire_info): GPU memory registered with the provider (FI_HMEM_CUDA,
 * kinet_mr_path "fabric", GPU bytes sent by the provider) where it takes
 * it, staged otherwise, with the reason. KINET_TEST_EXPECT_HMEM=1 makes the
 * first a requirement for the sender (a libfabric built with CUDA, shm);
 * =0 the second.
 *
 * Each side is its own process, forked before anything initialises CUDA
 * (the test process never does); they talk over a socketpair.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <kinet/net.h>
#include "gpu_util.h"

#define W_LEN (8u << 20)
#define W_RNDV 0u               /* a -> b: 2 MiB write (rendezvous where the provider has RMA) */
#define W_RNDV_LEN (2u << 20)
#define W_EAGER (3u << 20)      /* a -> b: 20000-byte write (eager: below KINET_NET_RNDV_BYTES) */
#define W_EAGER_LEN 20000u
#define W_SEND (4u << 20)       /* a -> b: 200 KiB send into b's receive at W_RECV */
#define W_SEND_LEN (200u << 10)
#define W_RECV (5u << 20)
#define W_READ (6u << 20)       /* a reads 300 KiB of b's at W_READ into its own W_READ */
#define W_READ_LEN (300u << 10)

static int io(int fd, void *p, size_t n, int wr)
{
	uint8_t *b = (uint8_t *)p;
	while (n) {
		ssize_t k = wr ? write(fd, b, n) : read(fd, b, n);
		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static void xchg(int fd, const void *mine, void *theirs, uint32_t n)
{
	CK(io(fd, (void *)mine, n, 1) == 0);
	CK(io(fd, theirs, n, 0) == 0);
}

static void sync_fd(int fd)
{
	int v = 1, o = 0;
	xchg(fd, &v, &o, sizeof(v));
	CK(o == 1);
}

static void wait_ok(kn_qp *d, kn_ticket_t t)
{
	CK(kn_wait(d, t) == 0);
}

/* One side; seed 1 is the requester (a), seed 2 the target (b). */
static int side(int fd, uint64_t seed)
{
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	kinet_ctx *ctx;
	kinet_pd *pd;
	CK(kinet_open(&ca, &ctx) == 0);
	CK(kinet_pd_alloc(ctx, &pd) == 0);
	uint8_t *host = (uint8_t *)malloc(W_LEN), *peer = (uint8_t *)malloc(W_LEN);
	CK(host && peer);
	tu_fill_random(host, W_LEN, seed);
	tu_fill_random(peer, W_LEN, 3 - seed);
	uint8_t *dev = NULL;
	CK(cudaMalloc((void **)&dev, W_LEN) == cudaSuccess);
	CK(cudaMemcpy(dev, host, W_LEN, cudaMemcpyHostToDevice) == cudaSuccess);
	kinet_mr *mr;
	CK(kinet_mr_reg(pd, dev, W_LEN, KINET_ACCESS_ALL, &mr) == 0);
	CK(kinet_mr_kind(mr) == KINET_MEM_CUDA);
	CK(kinet_mr_path(mr) == KINET_MR_PATH_STAGED);
	uint8_t mine[KINET_MR_DESC_SIZE], theirs[KINET_MR_DESC_SIZE];
	CK(kinet_mr_export(mr, mine, sizeof(mine)) == KINET_MR_DESC_SIZE);
	xchg(fd, mine, theirs, KINET_MR_DESC_SIZE);
	struct kinet_mr_info pm;
	CK(kinet_mr_desc_parse(theirs, sizeof(theirs), &pm) == 0);
	kinet_qp *qp;
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = 64;
	qa.rq_depth = 16;
	CK(kinet_qp_create(pd, &qa, &qp) == 0);
	char qd[KINET_QP_DESC_MAX], qt[KINET_QP_DESC_MAX];
	int n = kinet_qp_export(qp, qd, sizeof(qd));
	CK(n > 0);
	uint32_t nn = (uint32_t)n, tn = 0;
	xchg(fd, &nn, &tn, sizeof(nn));
	CK(tn <= sizeof(qt));
	CK(io(fd, qd, nn, 1) == 0 && io(fd, qt, tn, 0) == 0);
	CK(kinet_qp_connect_remote(qp, qt, tn) == 0);
	kn_qp *d;
	CK(kinet_qp_device(qp, &d) == 0);
	uint32_t lkey = kinet_mr_lkey(mr);
	kn_ticket_t rt = 0;
	if (seed == 2)
		CK(kn_recv_post(d, dev + W_RECV, lkey, W_SEND_LEN, &rt) == 0);
	sync_fd(fd);
	if (seed == 1) {
		kn_ticket_t t;
		CK(kn_put(d, pm.addr + W_RNDV, pm.rkey, dev + W_RNDV, lkey, W_RNDV_LEN, &t) == 0);
		CK(kn_put(d, pm.addr + W_EAGER, pm.rkey, dev + W_EAGER, lkey, W_EAGER_LEN, &t) ==
		    0);
		CK(kn_sq_reserve(d, 1, &t) == 0);
		kn_prep_send(d, kn_wqe_ptr(d, t), t, (uint64_t)(uintptr_t)(dev + W_SEND), lkey,
			     W_SEND_LEN, 0, 0);
		kn_sq_submit(d, t, 1);
		CK(kn_get(d, dev + W_READ, lkey, pm.addr + W_READ, pm.rkey, W_READ_LEN, &t) == 0);
		wait_ok(d, t);
		CK(kn_quiet(d) == 0);
		/* the read landed in GPU memory */
		memcpy(host + W_READ, peer + W_READ, W_READ_LEN);
	} else {
		kn_recv_info ri;
		CK(kn_recv_poll(d, rt, 1, &ri) == 0);
		CK(ri.byte_len == W_SEND_LEN);
		memcpy(host + W_RNDV, peer + W_RNDV, W_RNDV_LEN);
		memcpy(host + W_EAGER, peer + W_EAGER, W_EAGER_LEN);
		memcpy(host + W_RECV, peer + W_SEND, W_SEND_LEN);
	}
	sync_fd(fd); /* both done: every write placed */
	uint8_t *got = (uint8_t *)malloc(W_LEN);
	CK(got);
	CK(cudaMemcpy(got, dev, W_LEN, cudaMemcpyDeviceToHost) == cudaSuccess);
	for (size_t i = 0; i < W_LEN; i++)
		if (got[i] != host[i]) {
			fprintf(stderr, "[pid %d] byte %zu differs: %02x, expected %02x\n",
				(int)getpid(), i, got[i], host[i]);
			CK(0);
		}
	struct kinet_wire_info wi;
	CK(kinet_wire_info(ctx, &wi, sizeof(wi)) == 0);
	/* the provider the QP took: shm for this peer of the same host while
	 * KINET_FI_PROVIDER is not set (KINET_FI_SAME_HOST), else the network's */
	CK(wi.qps_net + wi.qps_same_host == 1);
	if (wi.qps_same_host) {
		wi.hmem = wi.same_host_hmem;
		memcpy(wi.hmem_why, wi.same_host_hmem_why, sizeof(wi.hmem_why));
	}
	struct kinet_counters c;
	CK(kinet_ctx_counters(ctx, &c) == 0);
	fprintf(stderr,
		"[pid %d side %c] provider %s, libfabric %u.%u, rma %d, hmem %d (%s), path %s, "
		"GPU regions registered %llu, refused %llu, GPU bytes sent by the provider %llu, "
		"staged bytes %llu, direct bytes %llu\n",
		(int)getpid(), seed == 1 ? 'a' : 'b', wi.qps_same_host ? wi.same_host : wi.provider,
		wi.fi_version >> 16,
		wi.fi_version & 0xffff, wi.rma, wi.hmem, wi.hmem ? "-" : wi.hmem_why,
		kinet_mr_path_str(kinet_mr_path(mr)), (unsigned long long)wi.hmem_regs,
		(unsigned long long)wi.hmem_refused, (unsigned long long)wi.hmem_bytes,
		(unsigned long long)c.staged_bytes, (unsigned long long)c.direct_bytes);
	const char *ex = getenv("KINET_TEST_EXPECT_HMEM");
	if (wi.hmem && seed == 1) {
		/* a sent from GPU memory: the provider took it */
		CK(kinet_mr_path(mr) == KINET_MR_PATH_FABRIC);
		CK(wi.hmem_regs >= 1 && wi.hmem_bytes >= W_EAGER_LEN);
	}
	if (!wi.hmem) {
		CK(kinet_mr_path(mr) == KINET_MR_PATH_STAGED);
		CK(wi.hmem_why[0] != 0);
		CK(c.staged_bytes > 0);
	}
	/* what the sender found (the target sends from no GPU region: its
	 * provider is never asked to take one) */
	if (seed == 1 && ex && !strcmp(ex, "1")) {
		CK(wi.hmem == 1);
		/* eager write and send, and the rendezvous source where there is RMA */
		CK(wi.hmem_bytes >= W_EAGER_LEN + W_SEND_LEN + (wi.rma ? W_RNDV_LEN : 0));
	}
	if (seed == 1 && ex && !strcmp(ex, "0"))
		CK(wi.hmem == 0);
	CK(c.errors == 0);
	sync_fd(fd);
	CK(kinet_qp_destroy(qp) == 0);
	CK(kinet_mr_dereg(mr) == 0);
	CK(kinet_pd_free(pd) == 0);
	CK(kinet_close(ctx) == 0);
	cudaFree(dev);
	free(host);
	free(peer);
	free(got);
	return 0;
}

static void run_pair(void)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid_t pa = fork();
	if (pa == 0) {
		close(sv[1]);
		alarm(120);
		_exit(side(sv[0], 1));
	}
	pid_t pb = fork();
	if (pb == 0) {
		close(sv[0]);
		alarm(120);
		_exit(side(sv[1], 2));
	}
	close(sv[0]);
	close(sv[1]);
	int sa = 0, sb = 0;
	waitpid(pa, &sa, 0);
	waitpid(pb, &sb, 0);
	cr_assert(WIFEXITED(sa) && WEXITSTATUS(sa) == 0, "side a: status 0x%x", sa);
	cr_assert(WIFEXITED(sb) && WEXITSTATUS(sb) == 0, "side b: status 0x%x", sb);
}

/* Runs the pair with KINET_FI_HMEM=hm (and the expectation ex, NULL: the
 * caller's), the caller's environment restored afterwards. */
static void run_with(const char *hm, const char *ex)
{
	const char *names[2] = {"KINET_FI_HMEM", "KINET_TEST_EXPECT_HMEM"};
	const char *vals[2] = {hm, ex};
	char *keep[2];
	for (int i = 0; i < 2; i++) {
		const char *v = getenv(names[i]);
		keep[i] = v ? strdup(v) : NULL;
		if (vals[i])
			setenv(names[i], vals[i], 1);
	}
	run_pair();
	for (int i = 0; i < 2; i++) {
		if (keep[i])
			setenv(names[i], keep[i], 1);
		else
			unsetenv(names[i]);
		free(keep[i]);
	}
}

/* The provider may take GPU memory (KINET_FI_HMEM=auto): it does or not,
 * and the path and counters say which. */
Test(gpu_wire, gpu_payloads_between_processes)
{
	run_with("auto", NULL);
}

/* The same with FI_HMEM off: staged, and said so. */
Test(gpu_wire, gpu_payloads_staged_when_fi_hmem_is_off)
{
	run_with("off", "0");
}
