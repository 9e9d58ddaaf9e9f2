/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench/shmem_bench.cu - the PGAS layer's figures (bench/shmem.sh runs it as
 * a job of kinet PEs, docs/perf.md keeps the tables): PE 0 measures, the
 * others are targets or the far end of a ping-pong. Sections:
 *   rate      put message rate at 8 bytes against CTAs, and put bandwidth
 *             against message size, GPU-initiated (kn_shmem_put_nbi from
 *             every CTA, QPs chosen by CTA) against the same puts handed to
 *             a CPU proxy thread (the kernel writes {offset, length} into a
 *             ring in mapped host memory; the thread posts them on its own
 *             QPs), in the same run
 *   lat       blocking put and get latency against size (one thread)
 *   pingpong  8-byte put_signal ping-pong between PE 0 and PE 1
 *   a2a       an all-to-all of n blocks (put_signal each), every PE, time
 *   p2p       same-node bandwidth: a block-scope put through the CUDA IPC
 *             mapping against cudaMemcpy between the two mappings
 * usage: shmem_bench [section...] (all by default). Run with 2 or more PEs
 * (KINET_BOOT_*: see bench/shmem.sh); rate, lat, pingpong and a2a measure
 * the NIC with KINET_SHMEM_P2P=0, p2p needs it on (1).
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <kinet/kinet.h>
#include <kinet/net.h>
#include <kinet/boot.h>
#include <kinet/shmem.h>
#include <kinet/shmem_device.h>

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "shmem_bench: %s: %s\n", #x, cudaGetErrorString(e_));      \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define KK(x)                                                                                      \
	do {                                                                                       \
		int r_ = (x);                                                                      \
		if (r_) {                                                                          \
			fprintf(stderr, "shmem_bench: %s: %s\n", #x, kinet_strerror(r_));          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static int g_me, g_n;
static kinet_boot *g_boot;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

#define BUF (64u << 20)

/* ---- GPU-initiated puts ------------------------------------------------------------------- */

static __global__ void put_kernel(uint8_t *dst, const uint8_t *src, uint32_t len, int iters, int pe,
				  int *err)
{
	if (threadIdx.x)
		return;
	size_t off = ((size_t)blockIdx.x * len) % (BUF - len);
	int rc = 0;
	for (int i = 0; i < iters && !rc; i++)
		rc = kn_shmem_put_nbi(dst + off, src + off, len, pe);
	if (!rc)
		rc = kn_shmem_quiet();
	if (rc)
		atomicExch(err, rc);
}

/* ---- the CPU proxy ------------------------------------------------------------------------ */

#define RING 256
struct req {
	volatile uint64_t seq; /* written last; 0: empty */
	volatile uint64_t off;
	volatile uint32_t len, pad;
};

struct proxy {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_qp *qp[8];
	kn_qp *d[8];
	kinet_mr *mr;
	struct kinet_mr_info peer;
	struct req *ring;          /* [ctas][RING], mapped host memory */
	volatile uint64_t *head;   /* [ctas]: consumed, the GPU reads it */
	uint8_t *buf;
	int ctas, iters;
	volatile int stop, done;
	pthread_t th;
};

/* The proxy's own context and QPs to the peer (8), its heap buffer registered
 * there; descriptors through the bootstrap. Every PE calls. */
static void proxy_open(struct proxy *p, uint8_t *buf, int peer)
{
	memset(p, 0, sizeof(*p));
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = kinet_ctx_backend(kinet_shmem_ctx());
	KK(kinet_open(&ca, &p->ctx));
	KK(kinet_pd_alloc(p->ctx, &p->pd));
	KK(kinet_mr_reg(p->pd, buf, BUF, KINET_ACCESS_ALL, &p->mr));
	p->buf = buf;
	struct blob {
		uint8_t mr[KINET_MR_DESC_SIZE];
		uint32_t len[8];
		uint8_t qp[8][KINET_QP_DESC_MAX];
	} mine, *all = (struct blob *)calloc((size_t)g_n, sizeof(struct blob));
	memset(&mine, 0, sizeof(mine));
	KK(kinet_mr_export(p->mr, mine.mr, sizeof(mine.mr)) == KINET_MR_DESC_SIZE ? 0 : -EIO);
	for (int q = 0; q < 8; q++) {
		struct kinet_qp_attr a;
		memset(&a, 0, sizeof(a));
		a.sq_depth = 1024;
		KK(kinet_qp_create(p->pd, &a, &p->qp[q]));
		int n = kinet_qp_export(p->qp[q], mine.qp[q], KINET_QP_DESC_MAX);
		KK(n > 0 ? 0 : n);
		mine.len[q] = (uint32_t)n;
	}
	KK(kinet_boot_allgather(g_boot, &mine, all, sizeof(mine)));
	KK(kinet_mr_desc_parse(all[peer].mr, sizeof(all[peer].mr), &p->peer));
	/* PE 0 and its peer connect to each other; other PEs keep theirs idle */
	if (g_me == 0 || peer == 0)
		for (int q = 0; q < 8; q++) {
			KK(kinet_qp_connect_remote(p->qp[q], all[peer].qp[q], all[peer].len[q]));
			KK(kinet_qp_device(p->qp[q], &p->d[q]));
		}
	free(all);
	CK(cudaHostAlloc((void **)&p->ring, 256 * RING * sizeof(struct req), cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&p->head, 256 * sizeof(uint64_t), cudaHostAllocMapped));
}

static void proxy_close(struct proxy *p)
{
	for (int q = 0; q < 8; q++)
		kinet_qp_destroy(p->qp[q]);
	kinet_mr_dereg(p->mr);
	kinet_pd_free(p->pd);
	kinet_close(p->ctx);
	cudaFreeHost(p->ring);
	cudaFreeHost((void *)p->head);
}

/* The CPU thread: takes every CTA's requests in order and posts them (CTA c
 * on QP c % 8), then quiets and says done. */
static void *proxy_main(void *arg)
{
	struct proxy *p = (struct proxy *)arg;
	uint64_t *next = (uint64_t *)calloc((size_t)p->ctas, 8);
	long left = (long)p->ctas * p->iters;
	uint32_t lkey = kinet_mr_lkey(p->mr);
	while (left > 0 && !p->stop) {
		for (int c = 0; c < p->ctas; c++) {
			struct req *r = &p->ring[(size_t)c * RING + next[c] % RING];
			if (r->seq != next[c] + 1)
				continue;
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			const kn_qp *q = p->d[c % 8];
			kn_put(q, p->peer.addr + r->off, p->peer.rkey, p->buf + r->off, lkey, r->len, NULL);
			next[c]++;
			__atomic_store_n((uint64_t *)&p->head[c], next[c], __ATOMIC_RELEASE);
			left--;
		}
	}
	for (int q = 0; q < 8; q++)
		kn_quiet(p->d[q]);
	free(next);
	__atomic_store_n((int *)&p->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The kernel side of the proxy: each CTA's thread 0 hands its puts over. */
static __global__ void proxy_kernel(struct req *ring, volatile uint64_t *head, uint32_t len,
				    int iters)
{
	if (threadIdx.x)
		return;
	struct req *mine = ring + (size_t)blockIdx.x * RING;
	size_t off = ((size_t)blockIdx.x * len) % (BUF - len);
	for (int i = 0; i < iters; i++) {
		while ((uint64_t)i - head[blockIdx.x] >= RING)
			; /* the ring is full: the proxy is behind */
		struct req *r = &mine[i % RING];
		r->off = off;
		r->len = len;
		__threadfence_system();
		r->seq = (uint64_t)i + 1;
	}
}

/* Time of `iters` puts of len from each of ctas CTAs, seconds. */
static double run_gpu(uint8_t *buf, uint32_t len, int ctas, int iters, int *derr)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventRecord(a));
	put_kernel<<<ctas, 32>>>(buf, buf, len, iters, 1, derr);
	CK(cudaEventRecord(b));
	CK(cudaEventSynchronize(b));
	CK(cudaGetLastError());
	float ms;
	CK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return ms / 1e3;
}

static double run_proxy(struct proxy *p, uint32_t len, int ctas, int iters)
{
	memset(p->ring, 0, (size_t)ctas * RING * sizeof(struct req));
	memset((void *)p->head, 0, (size_t)ctas * 8);
	p->ctas = ctas;
	p->iters = iters;
	p->done = 0;
	p->stop = 0;
	double t0 = now_us();
	pthread_create(&p->th, NULL, proxy_main, p);
	proxy_kernel<<<ctas, 32>>>(p->ring, p->head, len, iters);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	pthread_join(p->th, NULL);
	return (now_us() - t0) / 1e6;
}

static void section_rate(uint8_t *buf)
{
	int *derr;
	CK(cudaMalloc((void **)&derr, sizeof(int)));
	CK(cudaMemset(derr, 0, sizeof(int)));
	struct proxy px;
	proxy_open(&px, buf, g_me == 0 ? 1 : 0);
	if (g_me == 0) {
		static const int ctas[] = {1, 2, 8, 32, 64, 128};
		printf("\n#### Put message rate, 8 bytes, against CTAs (PE 0 -> PE 1)\n\n");
		printf("| CTAs | GPU-initiated (Mmsg/s) | CPU proxy (Mmsg/s) | ratio |\n");
		printf("|---:|---:|---:|---:|\n");
		for (size_t i = 0; i < sizeof(ctas) / sizeof(ctas[0]); i++) {
			int it = 20000 / ctas[i] + 200;
			run_gpu(buf, 8, ctas[i], 50, derr); /* warm-up */
			double g = (double)ctas[i] * it / run_gpu(buf, 8, ctas[i], it, derr) / 1e6;
			double c = (double)ctas[i] * it / run_proxy(&px, 8, ctas[i], it) / 1e6;
			printf("| %d | %.2f | %.2f | %.2f |\n", ctas[i], g, c, g / c);
			fflush(stdout);
		}
		static const uint32_t sizes[] = {8, 64, 512, 4096, 32768, 262144, 1u << 20};
		printf("\n#### Put bandwidth against size, 32 CTAs (PE 0 -> PE 1)\n\n");
		printf("| size (bytes) | GPU-initiated (GB/s) | CPU proxy (GB/s) | GPU (Mmsg/s) | "
		       "proxy (Mmsg/s) |\n");
		printf("|---:|---:|---:|---:|---:|\n");
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			int it = sizes[i] >= 262144 ? 20 : sizes[i] >= 32768 ? 100 : 400;
			double tg = run_gpu(buf, sizes[i], 32, it, derr);
			double tc = run_proxy(&px, sizes[i], 32, it);
			double m = 32.0 * it;
			printf("| %u | %.2f | %.2f | %.3f | %.3f |\n", sizes[i], m * sizes[i] / tg / 1e9,
			       m * sizes[i] / tc / 1e9, m / tg / 1e6, m / tc / 1e6);
			fflush(stdout);
		}
		int e = 0;
		CK(cudaMemcpy(&e, derr, sizeof(int), cudaMemcpyDeviceToHost));
		if (e)
			printf("\n(a put failed in the kernel: %s)\n", kinet_strerror(e));
	}
	KK(kinet_boot_barrier(g_boot));
	proxy_close(&px);
	cudaFree(derr);
}

/* ---- latency, ping-pong ---------------------------------------------------------------------- */

static __global__ void lat_kernel(uint8_t *buf, uint32_t len, int iters, int get, unsigned long long *ns)
{
	unsigned long long t0 = kn_now_ns();
	for (int i = 0; i < iters; i++) {
		if (get)
			kn_shmem_get(buf + BUF / 2, buf, len, 1);
		else
			kn_shmem_put(buf, buf + BUF / 2, len, 1);
	}
	if (!get)
		kn_shmem_quiet();
	*ns = kn_now_ns() - t0;
}

static __global__ void pingpong_kernel(uint8_t *buf, uint64_t *sig, int iters, int me,
				       unsigned long long *ns)
{
	int peer = me ^ 1;
	unsigned long long t0 = kn_now_ns();
	for (int i = 1; i <= iters; i++) {
		if (me == 0) {
			kn_shmem_put_signal_nbi(buf, buf + 64, 8, sig, (uint64_t)i, KN_SIG_SET, peer);
			kn_shmem_signal_wait_until(sig, KN_SHMEM_CMP_EQ, (uint64_t)i, NULL);
		} else {
			kn_shmem_signal_wait_until(sig, KN_SHMEM_CMP_EQ, (uint64_t)i, NULL);
			kn_shmem_put_signal_nbi(buf, buf + 64, 8, sig, (uint64_t)i, KN_SIG_SET, peer);
		}
	}
	*ns = kn_now_ns() - t0;
}

static void section_lat(uint8_t *buf, uint64_t *sig)
{
	unsigned long long *dns, ns;
	CK(cudaMalloc((void **)&dns, sizeof(*dns)));
	if (g_me == 0) {
		static const uint32_t sizes[] = {8, 64, 512, 4096, 65536};
		printf("\n#### Put and get latency, one thread (PE 0 -> PE 1)\n\n");
		printf("| size (bytes) | put (us) | get (us) |\n|---:|---:|---:|\n");
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			double r[2];
			for (int g = 0; g < 2; g++) {
				lat_kernel<<<1, 1>>>(buf, sizes[i], 20, g, dns);
				lat_kernel<<<1, 1>>>(buf, sizes[i], 500, g, dns);
				CK(cudaDeviceSynchronize());
				CK(cudaMemcpy(&ns, dns, sizeof(ns), cudaMemcpyDeviceToHost));
				r[g] = ns / 500.0 / 1e3;
			}
			printf("| %u | %.2f | %.2f |\n", sizes[i], r[0], r[1]);
		}
	}
	KK(kinet_boot_barrier(g_boot));
	if (g_me < 2) {
		CK(cudaMemset(sig, 0, 8));
		KK(kinet_boot_barrier(g_boot));
		pingpong_kernel<<<1, 1>>>(buf, sig, 2000, g_me, dns);
		CK(cudaDeviceSynchronize());
		CK(cudaMemcpy(&ns, dns, sizeof(ns), cudaMemcpyDeviceToHost));
		if (g_me == 0)
			printf("\n#### Signal ping-pong (8-byte put_signal SET, PE 0 <-> PE 1)\n\n"
			       "| half round trip (us) |\n|---:|\n| %.2f |\n", ns / 2000.0 / 2 / 1e3);
	} else {
		KK(kinet_boot_barrier(g_boot));
	}
	KK(kinet_boot_barrier(g_boot));
	cudaFree(dns);
}

/* ---- all-to-all ------------------------------------------------------------------------------- */

/* CTA d sends this PE's block for PE d (block-scope put_signal), then waits
 * for PE d's block here. */
static __global__ void a2a_kernel(uint8_t *recv, const uint8_t *send, uint64_t *sig, size_t blk,
				  uint64_t round, int me)
{
	int d = (int)blockIdx.x;
	kn_shmem_put_signal_nbi_block(recv + (size_t)me * blk, send + (size_t)d * blk, blk, &sig[me],
				      round, KN_SIG_SET, d);
	if (threadIdx.x == 0)
		kn_shmem_signal_wait_until(&sig[d], KN_SHMEM_CMP_EQ, round, NULL);
	__syncthreads();
	kn_shmem_quiet_block();
}

static void section_a2a(uint8_t *buf, uint64_t *sig)
{
	static const size_t blks[] = {1024, 16384, 262144, 1u << 20};
	if (g_me == 0) {
		printf("\n#### All-to-all of %d PEs, one put_signal per pair (time on PE 0)\n\n", g_n);
		printf("| block (bytes) | time (us) | bytes per PE out (GB/s) |\n|---:|---:|---:|\n");
	}
	uint64_t round = 0;
	for (size_t i = 0; i < sizeof(blks) / sizeof(blks[0]); i++) {
		size_t blk = blks[i];
		if (blk * g_n * 2 > BUF)
			break;
		double best = 1e30;
		for (int rep = 0; rep < 10; rep++) {
			round++;
			KK(kinet_boot_barrier(g_boot));
			cudaEvent_t a, b;
			CK(cudaEventCreate(&a));
			CK(cudaEventCreate(&b));
			CK(cudaEventRecord(a));
			a2a_kernel<<<g_n, 256>>>(buf + BUF / 2, buf, sig, blk, round, g_me);
			CK(cudaEventRecord(b));
			CK(cudaEventSynchronize(b));
			float ms;
			CK(cudaEventElapsedTime(&ms, a, b));
			if (rep && ms * 1e3 < best)
				best = ms * 1e3;
			cudaEventDestroy(a);
			cudaEventDestroy(b);
		}
		if (g_me == 0)
			printf("| %zu | %.1f | %.2f |\n", blk, best, blk * (g_n - 1) / best / 1e3);
	}
	KK(kinet_boot_barrier(g_boot));
}

/* ---- same-node load/store ----------------------------------------------------------------- */

static __global__ void p2p_kernel(uint8_t *dst, const uint8_t *src, size_t len, int pe, int iters)
{
	/* 16-byte aligned pieces, the last CTA takes the rest */
	size_t per = (len / gridDim.x) & ~(size_t)15, off = blockIdx.x * per;
	size_t n = blockIdx.x + 1 == gridDim.x ? len - off : per;
	for (int i = 0; i < iters; i++)
		kn_shmem_putmem_nbi_block(dst + off, src + off, n, pe);
}

static void section_p2p(uint8_t *buf)
{
	if (g_me == 0) {
		uint8_t *peer = (uint8_t *)kinet_shmem_ptr(buf + BUF / 2, 1);
		if (!peer) {
			printf("\n(p2p: PE 1 is not mapped here: run with KINET_SHMEM_P2P=1 on one node)\n");
		} else {
			static const size_t sizes[] = {1u << 20, 4u << 20, 16u << 20, 32u << 20};
			printf("\n#### Same-node bandwidth, PE 0 -> PE 1 through the CUDA IPC mapping\n\n");
			printf("| size (bytes) | block-scope put, 132 CTAs (GB/s) | cudaMemcpy (GB/s) | "
			       "ratio |\n|---:|---:|---:|---:|\n");
			for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
				size_t len = sizes[i];
				int it = 20;
				cudaEvent_t a, b;
				CK(cudaEventCreate(&a));
				CK(cudaEventCreate(&b));
				p2p_kernel<<<132, 512>>>(buf + BUF / 2, buf, len, 1, 2);
				CK(cudaEventRecord(a));
				p2p_kernel<<<132, 512>>>(buf + BUF / 2, buf, len, 1, it);
				CK(cudaEventRecord(b));
				CK(cudaEventSynchronize(b));
				float ms_k, ms_c;
				CK(cudaEventElapsedTime(&ms_k, a, b));
				CK(cudaEventRecord(a));
				for (int k = 0; k < it; k++)
					CK(cudaMemcpyAsync(peer, buf, len, cudaMemcpyDeviceToDevice, 0));
				CK(cudaEventRecord(b));
				CK(cudaEventSynchronize(b));
				CK(cudaEventElapsedTime(&ms_c, a, b));
				double gk = (double)len * it / (ms_k / 1e3) / 1e9;
				double gc = (double)len * it / (ms_c / 1e3) / 1e9;
				printf("| %zu | %.1f | %.1f | %.2f |\n", len, gk, gc, gk / gc);
				cudaEventDestroy(a);
				cudaEventDestroy(b);
			}
		}
	}
	KK(kinet_boot_barrier(g_boot));
}

int main(int argc, char **argv)
{
	KK(kinet_boot_init_env(&g_boot));
	g_me = kinet_boot_rank(g_boot);
	g_n = kinet_boot_size(g_boot);
	if (g_n < 2) {
		fprintf(stderr, "shmem_bench: needs 2 or more PEs (KINET_BOOT_SIZE)\n");
		return 2;
	}
	struct kinet_shmem_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.boot = g_boot;
	sa.executor = KINET_SHMEM_EXEC_CUDA;
	sa.heap_size = 2 * (size_t)BUF;
	sa.gpu = -1;
	KK(kinet_shmem_init(&sa));
	uint8_t *buf = (uint8_t *)kinet_shmem_malloc(BUF);
	uint64_t *sig = (uint64_t *)kinet_shmem_calloc(64, 8);
	if (!buf || !sig) {
		fprintf(stderr, "shmem_bench: kinet_shmem_malloc failed\n");
		return 1;
	}
	CK(cudaMemset(buf, 0x5a, BUF));
	KK(kinet_boot_barrier(g_boot));
	const char *all[] = {"rate", "lat", "a2a", "p2p"};
	int ns = argc > 1 ? argc - 1 : 4;
	for (int i = 0; i < ns; i++) {
		const char *s = argc > 1 ? argv[i + 1] : all[i];
		double t0 = now_us();
		if (!strcmp(s, "rate"))
			section_rate(buf);
		else if (!strcmp(s, "lat") || !strcmp(s, "pingpong"))
			section_lat(buf, sig);
		else if (!strcmp(s, "a2a"))
			section_a2a(buf, sig + 8);
		else if (!strcmp(s, "p2p"))
			section_p2p(buf);
		else {
			fprintf(stderr, "shmem_bench: unknown section %s\n", s);
			return 2;
		}
		if (g_me == 0)
			fprintf(stderr, "shmem_bench: %s took %.1f s\n", s, (now_us() - t0) / 1e6);
	}
	if (g_me == 0 && kinet_shmem_error(0))
		printf("\n(device code recorded an error: %s)\n", kinet_strerror(kinet_shmem_error(0)));
	kinet_shmem_free(sig);
	kinet_shmem_free(buf);
	kinet_shmem_finalize();
	kinet_boot_close(g_boot);
	return 0;
}
