/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench/gpu_bench.cu - GPU-initiated communication through the software NIC,
 * measured on one GPU (bench/gpu.sh runs it and keeps the tables).
 *
 * usage: gpu_bench [section...]   sections: floors lat rate bw pingpong post
 *                                 (default: all, in that order), engines (the
 *                                 engine-thread sweep, host and GPU memory),
 *                                 smfull (which CUDA copies land while a kernel
 *                                 holds every SM)
 * Prints markdown tables. Every figure comes from CUDA events or the GPU's
 * global timer around many iterations (means); warm-up runs come first.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <kinet/kinet.h>
#include <kinet/kinet_cuda.h>
#include <kinet/device_cuda.cuh>

#define CK(x)                                                                               \
	do {                                                                                \
		cudaError_t e_ = (x);                                                       \
		if (e_ != cudaSuccess) {                                                    \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
				cudaGetErrorString(e_));                                    \
			exit(2);                                                            \
		}                                                                           \
	} while (0)
#define KK(x)                                                                               \
	do {                                                                                \
		int r_ = (x);                                                               \
		if (r_) {                                                                   \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,          \
				kinet_strerror(r_));                                        \
			exit(2);                                                            \
		}                                                                           \
	} while (0)
#define LAUNCHED()                                                                          \
	do {                                                                                \
		CK(cudaGetLastError());                                                     \
		CK(cudaDeviceSynchronize());                                                \
	} while (0)

static const int modes[3] = {KN_DB_GPU, KN_DB_BLUEFLAME, KN_DB_CPU_PROXY};

/* ---- set-up ------------------------------------------------------------------ */

struct benv {
	kinet_ctx *ctx;
	kinet_pd *pd;
};

static void env_open(benv *e, int engine_threads)
{
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	ca.engine_threads = engine_threads;
	KK(kinet_open(&ca, &e->ctx));
	KK(kinet_pd_alloc(e->ctx, &e->pd));
}

static void env_close(benv *e)
{
	kinet_pd_free(e->pd);
	kinet_close(e->ctx);
}

struct bqp {
	kinet_qp *a, *b;
	kn_qp *d;  /* a, in GPU memory */
	kn_qp *ha; /* a, host descriptor */
};

/* nq connected pairs a -> b (connect = 0: a stays in RESET, no NIC serves
 * it). All initiators are created first, so that consecutive QP numbers
 * spread them over the engine threads (the engine of a QP is its number
 * modulo the engine count). */
static void qp_open_n(benv *e, bqp *q, int nq, uint32_t sq, int db, int share, int connect,
		      int place)
{
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = sq;
	qa.db_mode = db;
	qa.share = share;
	qa.timeout_ms = 10000;
	for (int i = 0; i < nq; i++)
		KK(kinet_qp_create(e->pd, &qa, &q[i].a));
	for (int i = 0; i < nq; i++)
		KK(kinet_qp_create(e->pd, &qa, &q[i].b));
	for (int i = 0; i < nq; i++) {
		if (connect)
			KK(kinet_qp_connect_local(q[i].a, q[i].b));
		KK(kinet_qp_device(q[i].a, &q[i].ha));
		q[i].d = NULL;
		if (place)
			KK(kinet_qp_device_cuda(q[i].a, &q[i].d));
	}
}

static void qp_open(benv *e, bqp *q, uint32_t sq, int db, int share, int connect, int place)
{
	qp_open_n(e, q, 1, sq, db, share, connect, place);
}

static void qp_close(bqp *q)
{
	if (q->d)
		kinet_qp_device_cuda_release(q->a);
	kinet_qp_destroy(q->a);
	kinet_qp_destroy(q->b);
}

struct bbuf {
	uint8_t *p;
	size_t len;
	int host;
	kinet_mr *mr;
};

static void buf_open(benv *e, bbuf *b, size_t len, int host)
{
	b->len = len;
	b->host = host;
	if (host) {
		CK(cudaHostAlloc((void **)&b->p, len, cudaHostAllocMapped | cudaHostAllocPortable));
		memset(b->p, 0x5a, len);
	} else {
		CK(cudaMalloc((void **)&b->p, len));
		CK(cudaMemset(b->p, 0x5a, len));
	}
	KK(kinet_mr_reg(e->pd, b->p, len, KINET_ACCESS_ALL, &b->mr));
}

static void buf_close(bbuf *b)
{
	kinet_mr_dereg(b->mr);
	if (b->host)
		cudaFreeHost(b->p);
	else
		cudaFree(b->p);
}

static uint64_t addr(const bbuf *b) { return (uint64_t)(uintptr_t)b->p; }
static uint32_t key(const bbuf *b) { return kinet_mr_lkey(b->mr); }

static double host_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void check_rc(const int *drc, int n, const char *what)
{
	int *h = (int *)malloc(n * sizeof(int));
	CK(cudaMemcpy(h, drc, n * sizeof(int), cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++)
		if (h[i]) {
			fprintf(stderr, "%s: thread %d: %s\n", what, i, kinet_strerror(h[i]));
			exit(3);
		}
	free(h);
}

/* ---- floors --------------------------------------------------------------- */

__global__ void rtt_kernel(volatile uint32_t *ping, volatile uint32_t *pong, int n,
			   unsigned long long *ns)
{
	uint64_t t0 = 0;
	for (int i = 1; i <= n; i++) {
		if (i == n / 10 + 1)
			t0 = kn_now_ns(); /* the first tenth warms up */
		*ping = (uint32_t)i;
		while (*pong != (uint32_t)i)
			;
	}
	*ns = kn_now_ns() - t0;
}

struct echo_arg {
	volatile uint32_t *ping, *pong;
	int n;
};

static void *echo_main(void *p)
{
	echo_arg *a = (echo_arg *)p;
	for (int i = 1; i <= a->n; i++) {
		while (__atomic_load_n(a->ping, __ATOMIC_ACQUIRE) != (uint32_t)i)
			;
		__atomic_store_n(a->pong, (uint32_t)i, __ATOMIC_RELEASE);
	}
	return NULL;
}

__global__ void hostwrite_kernel(uint4 *dst, size_t n16)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t step = (size_t)gridDim.x * blockDim.x;
	uint4 v = make_uint4((uint32_t)i, 1, 2, 3);
	for (; i < n16; i += step)
		dst[i] = v;
}

__global__ void empty_kernel(void) {}

/* The pieces of a post, timed alone: a 64-byte WQE (four 16-byte stores)
 * into mapped host memory, then the doorbell record, with the fence
 * variants the data path could use. One thread per CTA, own queue each. */
__global__ void anatomy_kernel(uint4 *sq, uint32_t *dbr, uint64_t *reg, int variant, int n,
			       unsigned long long *ns)
{
	uint4 *my = sq + (size_t)blockIdx.x * 256;
	uint32_t *d = dbr + blockIdx.x * 32;
	uint64_t *r = reg + blockIdx.x * 16;
	uint64_t t0 = kn_now_ns();
	for (int i = 0; i < n; i++) {
		uint4 *w = my + (i & 63) * 4;
		uint4 v = make_uint4(i, 1, 2, 3);
		w[0] = v;
		w[1] = v;
		w[2] = v;
		w[3] = v;
		switch (variant) {
		case 0: /* no fence (unordered: the cost of the stores alone) */
			*(volatile uint32_t *)d = i;
			break;
		case 1: /* release fence, record */
			asm volatile("fence.acq_rel.sys;" ::: "memory");
			*(volatile uint32_t *)d = i;
			break;
		case 2: /* sequentially consistent fence, record */
			asm volatile("fence.sc.sys;" ::: "memory");
			*(volatile uint32_t *)d = i;
			break;
		case 3: /* release store of the record */
			asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(d), "r"(i) : "memory");
			break;
		case 4: /* fence, record, fence, register (hardware order) */
			asm volatile("fence.acq_rel.sys;" ::: "memory");
			*(volatile uint32_t *)d = i;
			asm volatile("fence.acq_rel.sys;" ::: "memory");
			*(volatile uint64_t *)r = i;
			break;
		default: /* fence, record, register (software NIC order) */
			asm volatile("fence.acq_rel.sys;" ::: "memory");
			*(volatile uint32_t *)d = i;
			*(volatile uint64_t *)r = i;
			break;
		}
	}
	if (blockIdx.x == 0)
		*ns = kn_now_ns() - t0;
}

static void anatomy(void)
{
	uint4 *sq;
	uint32_t *dbr;
	uint64_t *reg;
	CK(cudaHostAlloc((void **)&sq, 132 * 256 * 16, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&dbr, 132 * 128, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&reg, 132 * 128, cudaHostAllocMapped));
	unsigned long long *dns;
	CK(cudaMalloc((void **)&dns, 8));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	static const char *names[] = {"WQE + record, no fence", "WQE, fence.acq_rel.sys, record",
				      "WQE, fence.sc.sys, record", "WQE, st.release.sys record",
				      "WQE, fence, record, fence, register",
				      "WQE, fence, record, register"};
	printf("| posting step (64-byte WQE into mapped host memory) | 1 thread: ns per post | 132 CTAs x 1 thread: M posts/s |\n");
	printf("| --- | ---: | ---: |\n");
	for (int v = 0; v < 6; v++) {
		int n = 20000;
		anatomy_kernel<<<1, 1>>>(sq, dbr, reg, v, 1000, dns);
		LAUNCHED();
		anatomy_kernel<<<1, 1>>>(sq, dbr, reg, v, n, dns);
		LAUNCHED();
		unsigned long long ns;
		CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
		CK(cudaEventRecord(e0));
		anatomy_kernel<<<132, 1>>>(sq, dbr, reg, v, n, dns);
		CK(cudaEventRecord(e1));
		LAUNCHED();
		float ms;
		CK(cudaEventElapsedTime(&ms, e0, e1));
		printf("| %s | %.0f | %.1f |\n", names[v], (double)ns / n, 132.0 * n / (ms * 1e3));
	}
	printf("\n");
	cudaFreeHost(sq);
	cudaFreeHost(dbr);
	cudaFreeHost(reg);
	cudaFree(dns);
}

static double g_rtt_us, g_d2d_gbs, g_hostw_gbs, g_ce_small_us, g_launch_us;

static void floors(void)
{
	/* GPU -> CPU -> GPU round trip through mapped host memory */
	uint32_t *flags;
	CK(cudaHostAlloc((void **)&flags, 4096, cudaHostAllocMapped));
	memset(flags, 0, 4096);
	unsigned long long *dns;
	CK(cudaMalloc((void **)&dns, 8));
	int n = 20000;
	echo_arg ea = {flags, flags + 32, n};
	pthread_t th;
	pthread_create(&th, NULL, echo_main, &ea);
	rtt_kernel<<<1, 1>>>(flags, flags + 32, n, dns);
	LAUNCHED();
	pthread_join(th, NULL);
	unsigned long long ns;
	CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
	g_rtt_us = ns / 1e3 / (n - n / 10);
	cudaFreeHost(flags);

	/* GPU writes into host memory (16-byte stores, every SM) */
	size_t hl = 256ull << 20;
	uint4 *hbuf;
	CK(cudaHostAlloc((void **)&hbuf, hl, cudaHostAllocMapped));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	hostwrite_kernel<<<132 * 4, 256>>>(hbuf, hl / 16);
	LAUNCHED();
	CK(cudaEventRecord(e0));
	for (int r = 0; r < 5; r++)
		hostwrite_kernel<<<132 * 4, 256>>>(hbuf, hl / 16);
	CK(cudaEventRecord(e1));
	LAUNCHED();
	float ms;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	g_hostw_gbs = 5.0 * hl / (ms * 1e6);
	cudaFreeHost(hbuf);

	/* device-to-device copy */
	size_t dl = 256ull << 20;
	void *da, *db;
	CK(cudaMalloc(&da, dl));
	CK(cudaMalloc(&db, dl));
	CK(cudaMemcpy(db, da, dl, cudaMemcpyDeviceToDevice));
	CK(cudaEventRecord(e0));
	for (int r = 0; r < 10; r++)
		CK(cudaMemcpyAsync(db, da, dl, cudaMemcpyDeviceToDevice));
	CK(cudaEventRecord(e1));
	LAUNCHED();
	CK(cudaEventElapsedTime(&ms, e0, e1));
	g_d2d_gbs = 10.0 * dl / (ms * 1e6);

	/* what one small NIC operation on GPU memory costs the engine: an 8-byte
	 * copy, or a kernel launch, each followed by a stream synchronize */
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int r = 0; r < 100; r++) {
		CK(cudaMemcpyAsync(db, da, 8, cudaMemcpyDeviceToDevice, s));
		CK(cudaStreamSynchronize(s));
	}
	double t0 = host_now_us();
	for (int r = 0; r < 2000; r++) {
		CK(cudaMemcpyAsync(db, da, 8, cudaMemcpyDeviceToDevice, s));
		CK(cudaStreamSynchronize(s));
	}
	g_ce_small_us = (host_now_us() - t0) / 2000;
	t0 = host_now_us();
	for (int r = 0; r < 2000; r++) {
		empty_kernel<<<1, 1, 0, s>>>();
		CK(cudaStreamSynchronize(s));
	}
	g_launch_us = (host_now_us() - t0) / 2000;
	cudaStreamDestroy(s);
	cudaFree(da);
	cudaFree(db);
	cudaFree(dns);

	printf("#### Floors\n\n");
	printf("| floor | value |\n| --- | ---: |\n");
	printf("| GPU -> CPU -> GPU round trip, mapped host memory (one 4-byte flag each way) | %.2f us |\n",
	       g_rtt_us);
	printf("| GPU write bandwidth into mapped host memory (16-byte stores, all SMs) | %.1f GB/s |\n",
	       g_hostw_gbs);
	printf("| device-to-device cudaMemcpyAsync, 256 MiB (bytes copied / time) | %.0f GB/s |\n",
	       g_d2d_gbs);
	printf("| cudaMemcpyAsync 8 B D2D + cudaStreamSynchronize (host) | %.2f us |\n",
	       g_ce_small_us);
	printf("| empty kernel launch + cudaStreamSynchronize (host) | %.2f us |\n\n", g_launch_us);
	anatomy();
}

/* ---- put + completion latency ----------------------------------------------- */

__global__ void lat_kernel(const kn_qp *dqp, uint8_t *src, uint32_t lkey, uint64_t dst,
			   uint32_t rkey, uint32_t size, int n, unsigned long long *ns, int *rc)
{
	const kn_qp q = *dqp; /* the descriptor by value, in registers */
	const kn_qp *qp = &q;
	uint64_t t0 = 0;
	int warm = n / 10;
	for (int i = 0; i < n + warm; i++) {
		if (i == warm)
			t0 = kn_now_ns();
		kn_ticket_t t;
		int r = kn_put(qp, dst, rkey, src, lkey, size, &t);
		if (!r)
			r = kn_wait(qp, t);
		if (r) {
			*rc = r;
			return;
		}
	}
	*ns = kn_now_ns() - t0;
	*rc = 0;
}

static void lat(void)
{
	printf("#### Put + completion latency, 8 B, thread scope, one persistent thread (descriptor by value)\n\n");
	printf("| doorbell | payload memory | latency | vs round-trip floor |\n| --- | --- | ---: | ---: |\n");
	for (int hm = 1; hm >= 0; hm--)
		for (int m = 0; m < 3; m++) {
			benv e;
			env_open(&e, 1);
			bqp q;
			qp_open(&e, &q, 64, modes[m], KN_SHARE_EXCLUSIVE, 1, 1);
			bbuf src, dst;
			buf_open(&e, &src, 4096, hm);
			buf_open(&e, &dst, 4096, hm);
			unsigned long long *dns;
			int *drc;
			CK(cudaMalloc((void **)&dns, 8));
			CK(cudaMalloc((void **)&drc, 4));
			int n = hm ? 20000 : 5000;
			lat_kernel<<<1, 1>>>(q.d, src.p, key(&src), addr(&dst), key(&dst), 8, n, dns, drc);
			LAUNCHED();
			check_rc(drc, 1, "lat");
			unsigned long long ns;
			CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
			double us = ns / 1e3 / n;
			printf("| %s | %s | %.2f us | %.2fx |\n", kinet_db_mode_str(modes[m]),
			       hm ? "host (pinned)" : "GPU", us, g_rtt_us > 0 ? us / g_rtt_us : 0);
			cudaFree(dns);
			cudaFree(drc);
			buf_close(&src);
			buf_close(&dst);
			qp_close(&q);
			env_close(&e);
		}
	printf("\n");
}

/* ---- message rate vs CTAs ------------------------------------------------------ */

__global__ void rate_kernel(const kn_qp *const *qps, int per_cta, uint8_t *src, uint32_t lkey,
			    uint64_t dst, uint32_t rkey, int iters, int *rc)
{
	const kn_qp *qp = qps[per_cta ? blockIdx.x : 0];
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	int r = 0;
	for (int i = 0; i < iters && !r; i++) {
		kn_ticket_t t;
		r = kn_put(qp, dst + (g % 512) * 8, rkey, src + (g % 512) * 8, lkey, 8, &t);
	}
	int q = kn_quiet(qp);
	rc[g] = r ? r : q;
}

/* WQEs per second of `ctas` CTAs x 32 threads posting 8-byte puts. */
static double rate_run(int ctas, int own, int eng, int hostmem)
{
	benv e;
	env_open(&e, eng);
	int nq = own ? ctas : 1;
	bqp *q = (bqp *)calloc(nq, sizeof(bqp));
	kn_qp **dq = (kn_qp **)calloc(nq, sizeof(kn_qp *));
	qp_open_n(&e, q, nq, 256, KN_DB_GPU, own ? KN_SHARE_CTA : KN_SHARE_GPU, 1, 1);
	for (int i = 0; i < nq; i++)
		dq[i] = q[i].d;
	bbuf src, dst;
	buf_open(&e, &src, 4096, hostmem);
	buf_open(&e, &dst, 4096, hostmem);
	kn_qp **ddq;
	int *drc;
	CK(cudaMalloc((void **)&ddq, nq * sizeof(kn_qp *)));
	CK(cudaMemcpy(ddq, dq, nq * sizeof(kn_qp *), cudaMemcpyHostToDevice));
	int nthr = ctas * 32;
	CK(cudaMalloc((void **)&drc, nthr * sizeof(int)));
	long total = hostmem ? 200000 : 20000;
	int iters = (int)(total / nthr);
	if (iters < 8)
		iters = 8;
	rate_kernel<<<ctas, 32>>>(ddq, own, src.p, key(&src), addr(&dst), key(&dst), 4, drc);
	LAUNCHED();
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventRecord(e0));
	rate_kernel<<<ctas, 32>>>(ddq, own, src.p, key(&src), addr(&dst), key(&dst), iters, drc);
	CK(cudaEventRecord(e1));
	LAUNCHED();
	check_rc(drc, nthr, "rate");
	float ms;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	cudaFree(ddq);
	cudaFree(drc);
	buf_close(&src);
	buf_close(&dst);
	for (int i = 0; i < nq; i++)
		qp_close(&q[i]);
	free(q);
	free(dq);
	env_close(&e);
	return (double)nthr * iters / (ms * 1e3); /* M/s */
}

static void rate(void)
{
	static const int ctas[] = {1, 2, 4, 8, 16, 33, 66, 132};
	printf("#### Message rate, 8-byte puts, 32 threads per CTA, thread scope [M WQE/s]\n\n");
	printf("payload in pinned host memory (the engine's WQE rate) unless noted; doorbell gpu\n\n");
	printf("| CTAs | own QP per CTA, 1 engine | shared QP, 1 engine | own QP, 4 engines | own QP, 1 engine, GPU memory |\n");
	printf("| ---: | ---: | ---: | ---: | ---: |\n");
	for (size_t i = 0; i < sizeof(ctas) / sizeof(ctas[0]); i++) {
		int c = ctas[i];
		double a = rate_run(c, 1, 1, 1), b = rate_run(c, 0, 1, 1), d = rate_run(c, 1, 4, 1);
		double g = rate_run(c, 1, 1, 0);
		printf("| %d | %.2f | %.2f | %.2f | %.3f |\n", c, a, b, d, g);
		fflush(stdout);
	}
	printf("\n| engine threads (KINET_ENGINE_THREADS), 132 CTAs, own QP | M WQE/s |\n| ---: | ---: |\n");
	static const int engs[] = {1, 2, 4, 8, 12};
	for (size_t i = 0; i < sizeof(engs) / sizeof(engs[0]); i++)
		printf("| %d | %.2f |\n", engs[i], rate_run(132, 1, engs[i], 1));
	printf("\n");
}

/* The engine-thread sweep alone (section "engines"): 132 CTAs x 32 threads,
 * own QP per CTA, payload in host memory and in GPU memory. */
static void engines(void)
{
	printf("#### Message rate against engine threads, 132 CTAs x 32 threads, own QP per CTA [M WQE/s]\n\n");
	printf("| engine threads (KINET_ENGINE_THREADS) | host memory | GPU memory |\n| ---: | ---: | ---: |\n");
	static const int engs[] = {1, 2, 4, 8, 12};
	for (size_t i = 0; i < sizeof(engs) / sizeof(engs[0]); i++) {
		double h = rate_run(132, 1, engs[i], 1), g = rate_run(132, 1, engs[i], 0);
		printf("| %d | %.2f | %.3f |\n", engs[i], h, g);
		fflush(stdout);
	}
	printf("\n");
}

/* ---- bandwidth GPU -> GPU ------------------------------------------------------ */

__global__ void bw_kernel(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint64_t dst,
			  uint32_t rkey, uint32_t size, int n, int *rc)
{
	int r = 0;
	for (int i = 0; i < n && !r; i++) {
		kn_ticket_t t;
		r = kn_put(qp, dst, rkey, src, lkey, size, &t);
	}
	int q = kn_quiet(qp);
	*rc = r ? r : q;
}

static void bw(void)
{
	printf("#### Bandwidth GPU buffer -> GPU buffer (one thread posting, 16 puts in flight)\n\n");
	printf("| size | kinet put | cudaMemcpyAsync D2D, back to back | ratio | cudaMemcpyAsync + sync each | ratio |\n");
	printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
	benv e;
	env_open(&e, 1);
	bqp q;
	qp_open(&e, &q, 16, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1, 1);
	size_t maxs = 64ull << 20;
	bbuf src, dst;
	buf_open(&e, &src, maxs, 0);
	buf_open(&e, &dst, maxs, 0);
	int *drc;
	CK(cudaMalloc((void **)&drc, 4));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	static const size_t sizes[] = {8, 64, 512, 4096, 32768, 262144, 1u << 20, 4u << 20,
				       16u << 20, 64u << 20};
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t size = sizes[si];
		int n = (int)((512ull << 20) / size);
		if (n > 4000)
			n = 4000;
		if (n < 32)
			n = 32;
		bw_kernel<<<1, 1>>>(q.d, src.p, key(&src), addr(&dst), key(&dst), (uint32_t)size, 4,
				    drc);
		LAUNCHED();
		CK(cudaEventRecord(e0));
		bw_kernel<<<1, 1>>>(q.d, src.p, key(&src), addr(&dst), key(&dst), (uint32_t)size, n,
				    drc);
		CK(cudaEventRecord(e1));
		LAUNCHED();
		check_rc(drc, 1, "bw");
		float ms;
		CK(cudaEventElapsedTime(&ms, e0, e1));
		double put = (double)size * n / (ms * 1e6);
		CK(cudaEventRecord(e0, s));
		for (int i = 0; i < n; i++)
			CK(cudaMemcpyAsync(dst.p, src.p, size, cudaMemcpyDeviceToDevice, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		double ce = (double)size * n / (ms * 1e6);
		double t0 = host_now_us();
		int ns = n < 2000 ? n : 2000;
		for (int i = 0; i < ns; i++) {
			CK(cudaMemcpyAsync(dst.p, src.p, size, cudaMemcpyDeviceToDevice, s));
			CK(cudaStreamSynchronize(s));
		}
		double ces = (double)size * ns / ((host_now_us() - t0) * 1e3);
		char sz[32];
		if (size >= (1u << 20))
			snprintf(sz, sizeof(sz), "%zu MiB", size >> 20);
		else if (size >= 1024)
			snprintf(sz, sizeof(sz), "%zu KiB", size >> 10);
		else
			snprintf(sz, sizeof(sz), "%zu B", size);
		printf("| %s | %.3f GB/s | %.3f GB/s | %.0f%% | %.3f GB/s | %.0f%% |\n", sz, put, ce,
		       100 * put / ce, ces, 100 * put / ces);
		fflush(stdout);
	}
	cudaStreamDestroy(s);
	cudaFree(drc);
	buf_close(&src);
	buf_close(&dst);
	qp_close(&q);
	env_close(&e);
	printf("\n");
}

/* ---- ping-pong ------------------------------------------------------------- */

/* Block 0 pings through q0 (put + signal into side 1), block 1 answers
 * through q1; each waits for its own signal word. */
__global__ void pingpong_kernel(const kn_qp *q0, const kn_qp *q1, uint8_t *buf0, uint8_t *buf1,
				uint32_t k0, uint32_t k1, uint64_t *sig0, uint64_t *sig1,
				uint32_t sk0, uint32_t sk1, uint32_t size, int n,
				unsigned long long *ns, int *rc)
{
	int me = blockIdx.x;
	const kn_qp q = *(me ? q1 : q0); /* by value, in registers */
	const kn_qp *qp = &q;
	uint8_t *mine = me ? buf1 : buf0;
	uint64_t other = (uint64_t)(uintptr_t)(me ? buf0 : buf1);
	uint32_t lk = me ? k1 : k0, rk = me ? k0 : k1;
	uint64_t *mysig = me ? sig1 : sig0;
	uint64_t osig = (uint64_t)(uintptr_t)(me ? sig0 : sig1);
	uint32_t osk = me ? sk0 : sk1;
	uint64_t t0 = kn_now_ns();
	int warm = n / 10;
	for (int i = 1; i <= n + warm; i++) {
		if (i == warm + 1)
			t0 = kn_now_ns();
		kn_ticket_t t;
		int r = 0;
		if (me == 1)
			r = kn_wait_signal((volatile uint64_t *)mysig, (uint64_t)i, 10000000000ull);
		if (!r)
			r = kn_put_signal(qp, other, rk, mine, lk, size, osig, osk, 1, &t);
		if (!r && me == 0)
			r = kn_wait_signal((volatile uint64_t *)mysig, (uint64_t)i, 10000000000ull);
		if (r) {
			rc[me] = r;
			return;
		}
	}
	if (me == 0)
		*ns = kn_now_ns() - t0;
	rc[me] = kn_quiet(qp);
}

__global__ void touch_kernel(uint8_t *p, int i) { p[0] = (uint8_t)i; }

static void pingpong(void)
{
	printf("#### Ping-pong, half round trip (put + signal one way)\n\n");
	printf("| size | memory | GPU-initiated (persistent kernel, put_signal + wait) | host-initiated (launch, sync, host posts, wait) | ratio |\n");
	printf("| ---: | --- | ---: | ---: | ---: |\n");
	for (int hm = 1; hm >= 0; hm--)
		for (uint32_t size = 8; size <= 65536; size *= 8192) {
			benv e;
			env_open(&e, 1);
			bqp q0, q1;
			qp_open(&e, &q0, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1, 1);
			qp_open(&e, &q1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1, 1);
			bbuf b0, b1, s0, s1;
			buf_open(&e, &b0, 65536, hm);
			buf_open(&e, &b1, 65536, hm);
			buf_open(&e, &s0, 64, hm);
			buf_open(&e, &s1, 64, hm);
			CK(cudaMemset(s0.p, 0, 64));
			CK(cudaMemset(s1.p, 0, 64));
			unsigned long long *dns;
			int *drc;
			CK(cudaMalloc((void **)&dns, 8));
			CK(cudaMalloc((void **)&drc, 8));
			int n = hm ? 5000 : 1000;
			pingpong_kernel<<<2, 1>>>(q0.d, q1.d, b0.p, b1.p, key(&b0), key(&b1),
						  (uint64_t *)s0.p, (uint64_t *)s1.p, key(&s0), key(&s1),
						  size, n, dns, drc);
			LAUNCHED();
			check_rc(drc, 2, "pingpong");
			unsigned long long ns;
			CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
			double gpu_us = ns / 1e3 / n / 2;
			/* host-initiated: the host descriptors of two more QPs */
			bqp h0, h1;
			qp_open(&e, &h0, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1, 0);
			qp_open(&e, &h1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1, 0);
			cudaStream_t st;
			CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
			int hn = n / 2;
			double t0 = 0;
			for (int i = 0; i < hn + hn / 10; i++) {
				if (i == hn / 10)
					t0 = host_now_us();
				for (int side = 0; side < 2; side++) {
					touch_kernel<<<1, 1, 0, st>>>(side ? b1.p : b0.p, i);
					CK(cudaStreamSynchronize(st));
					kn_ticket_t t;
					KK(kn_put(side ? h1.ha : h0.ha, addr(side ? &b0 : &b1),
						  key(side ? &b0 : &b1), side ? b1.p : b0.p,
						  key(side ? &b1 : &b0), size, &t));
					KK(kn_wait(side ? h1.ha : h0.ha, t));
				}
			}
			double host_us = (host_now_us() - t0) / hn / 2;
			printf("| %s | %s | %.2f us | %.2f us | %.2fx |\n", size == 8 ? "8 B" : "64 KiB",
			       hm ? "host (pinned)" : "GPU", gpu_us, host_us, host_us / gpu_us);
			fflush(stdout);
			cudaStreamDestroy(st);
			qp_close(&h0);
			qp_close(&h1);
			cudaFree(dns);
			cudaFree(drc);
			buf_close(&b0);
			buf_close(&b1);
			buf_close(&s0);
			buf_close(&s1);
			qp_close(&q0);
			qp_close(&q1);
			env_close(&e);
		}
	printf("\n");
}

/* ---- posting cost without the NIC -------------------------------------------- */

__global__ void post_kernel(const kn_qp *const *qps, int per_cta, int scope, int iters, int byval)
{
	/* by value: the descriptor in registers, not re-read from global memory
	 * after every fence (a fence at system scope empties the L1) */
	const kn_qp q = *qps[per_cta ? blockIdx.x : 0];
	const kn_qp *qp = byval ? &q : qps[per_cta ? blockIdx.x : 0];
	for (int i = 0; i < iters; i++) {
		kn_ticket_t t;
		if (scope == 0)
			kn_put(qp, 0x1000, 0x101, (const void *)0x2000, 0x101, 8, &t);
		else
			kn_warp_put(qp, 0x1000, 0x101, (const void *)0x2000, 0x101, 8, &t);
	}
}

/* WQEs per second posted by `ctas` x `threads` (scope 0 thread, 1 warp),
 * own QP per CTA or one shared QP; QPs never connected (no NIC reads them)
 * and the device state says every earlier WQE completed. */
static double post_run(int ctas, int threads, int scope, int own, int db, long total, int byval)
{
	benv e;
	env_open(&e, 1);
	int nq = own ? ctas : 1;
	int share = own ? (threads > 1 && scope == 0 ? KN_SHARE_CTA : KN_SHARE_EXCLUSIVE)
			: KN_SHARE_GPU;
	bqp *q = (bqp *)calloc(nq, sizeof(bqp));
	kn_qp **dq = (kn_qp **)calloc(nq, sizeof(kn_qp *));
	qp_open_n(&e, q, nq, own ? 1024 : 32768, db, share, 0, 1);
	for (int i = 0; i < nq; i++) {
		kn_qp_state st;
		memset(&st, 0, sizeof(st));
		st.err_ticket = KN_NO_ERROR;
		st.done = 1ull << 62; /* no completions awaited */
		KK(kinet_qp_cuda_state_write(q[i].a, &st));
		dq[i] = q[i].d;
	}
	kn_qp **ddq;
	CK(cudaMalloc((void **)&ddq, nq * sizeof(kn_qp *)));
	CK(cudaMemcpy(ddq, dq, nq * sizeof(kn_qp *), cudaMemcpyHostToDevice));
	long per_thread = total / ((long)ctas * threads);
	int iters = (int)per_thread;
	if (iters < 4)
		iters = 4;
	post_kernel<<<ctas, threads>>>(ddq, own, scope, 4, byval);
	LAUNCHED();
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventRecord(e0));
	post_kernel<<<ctas, threads>>>(ddq, own, scope, iters, byval);
	CK(cudaEventRecord(e1));
	LAUNCHED();
	float ms;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	cudaFree(ddq);
	for (int i = 0; i < nq; i++)
		qp_close(&q[i]);
	free(q);
	free(dq);
	env_close(&e);
	return (double)ctas * threads * iters / (ms * 1e3);
}

static void post(void)
{
	printf("#### GPU-side posting cost, NIC excluded (SQ in mapped host memory, 64-byte WQEs, no completions awaited) [M WQE/s]\n\n");
	printf("| configuration | reference (a GPU verbs library on this H200, earlier run, not measured here) | kinet, doorbell gpu, descriptor by pointer | kinet, doorbell gpu, by value | kinet, doorbell cpu, by value | best vs reference |\n");
	printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
	struct row {
		const char *name;
		double ref;
		int ctas, threads, scope, own;
		long total;
	} rows[] = {
		{"1 thread, thread scope", 1.1, 1, 1, 0, 1, 200000},
		{"132 CTAs x 1 thread, own QP each", 120, 132, 1, 0, 1, 4000000},
		{"1 warp, warp scope", 42, 1, 32, 1, 1, 2000000},
		{"132 warps, own QP each, warp scope", 736, 132, 32, 1, 1, 40000000},
		{"132 CTAs x 32 threads, ONE shared QP, thread scope", 0.1, 132, 32, 0, 0, 1000000},
		{"132 CTAs x 32 threads, ONE shared QP, warp scope", 38, 132, 32, 1, 0, 10000000},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		row &r = rows[i];
		double p = post_run(r.ctas, r.threads, r.scope, r.own, KN_DB_GPU, r.total, 0);
		double g = post_run(r.ctas, r.threads, r.scope, r.own, KN_DB_GPU, r.total, 1);
		double c = post_run(r.ctas, r.threads, r.scope, r.own, KN_DB_CPU_PROXY, r.total, 1);
		double best = g > c ? g : c;
		best = best > p ? best : p;
		printf("| %s | %.1f | %.2f | %.2f | %.2f | %.2fx |\n", r.name, r.ref, p, g, c,
		       best / r.ref);
		fflush(stdout);
	}
	printf("\n");
}

/* ---- copies while every SM is held (section "smfull") ---------------------------- */

static __global__ void hold_sm(volatile int *stop, int *started, long long max_cycles)
{
	if (threadIdx.x == 0)
		atomicAdd(started, 1);
	long long t0 = clock64();
	while (!*stop && clock64() - t0 < max_cycles)
		;
}

/* Which CUDA copies land while a kernel holds every SM (the CPU engine's
 * copies must: a GPU-initiated program waits for its CQEs with every SM
 * busy). Each kind is issued on a stream of its own while the kernel spins,
 * and waited for up to 1 s; then with one spinning block, as the control. */
static void smfull(void)
{
	printf("#### CUDA copies while a kernel holds SMs (landed within 1 s?)\n\n");
	int dev = 0, nsm = 0, per = 0;
	CK(cudaGetDevice(&dev));
	CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, hold_sm, 1024, 0));
	int *flags;
	CK(cudaHostAlloc((void **)&flags, 64, cudaHostAllocMapped));
	volatile int *stop = flags, *started = flags + 8;
	const size_t big = 1u << 20;
	char *a, *b, *h;
	CK(cudaMalloc((void **)&a, big));
	CK(cudaMalloc((void **)&b, big));
	CK(cudaHostAlloc((void **)&h, big, cudaHostAllocDefault));
	cudaStream_t ks, cs;
	CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
	struct {
		const char *name;
		void *dst;
		const void *src;
		size_t n;
		cudaMemcpyKind kind;
	} c[] = {
		{"GPU to GPU, 8 B", b, a, 8, cudaMemcpyDeviceToDevice},
		{"GPU to GPU, 1 MiB", b, a, big, cudaMemcpyDeviceToDevice},
		{"pinned host to GPU, 8 B", a, h, 8, cudaMemcpyHostToDevice},
		{"GPU to pinned host, 8 B", h, a, 8, cudaMemcpyDeviceToHost},
		{"GPU to pinned host, 1 MiB", h, a, big, cudaMemcpyDeviceToHost},
	};
	printf("| copy | every SM held (%d blocks of 1024 threads) | one block spinning |\n", nsm * per);
	printf("| --- | --- | --- |\n");
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		const char *res[2];
		for (int full = 1; full >= 0; full--) {
			int blocks = full ? nsm * per : 1;
			*stop = 0;
			*started = 0;
			hold_sm<<<blocks, 1024, 0, ks>>>(stop, (int *)started, 4000000000ll);
			double t0 = host_now_us();
			while (*started < blocks && host_now_us() - t0 < 2e6)
				;
			CK(cudaMemcpyAsync(c[i].dst, c[i].src, c[i].n, c[i].kind, cs));
			bool ok = false;
			t0 = host_now_us();
			while (!ok && host_now_us() - t0 < 1e6)
				ok = cudaStreamQuery(cs) == cudaSuccess;
			res[full] = ok ? "landed" : "**did not land**";
			*stop = 1;
			CK(cudaStreamSynchronize(ks));
			CK(cudaStreamSynchronize(cs));
		}
		printf("| %s | %s | %s |\n", c[i].name, res[1], res[0]);
	}
	printf("\n");
	cudaStreamDestroy(ks);
	cudaStreamDestroy(cs);
	cudaFree(a);
	cudaFree(b);
	cudaFreeHost(h);
	cudaFreeHost(flags);
}

int main(int argc, char **argv)
{
	/* GPU payloads on the software NIC are staged: allowed (read at the
	 * first kinet call) */
	setenv("KINET_ALLOW_HOST_STAGING", "1", 0);
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || !kinet_cuda_available()) {
		fprintf(stderr, "gpu_bench: no usable GPU\n");
		return 77;
	}
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, 0));
	printf("GPU: %s, %d SMs\n\n", p.name, p.multiProcessorCount);
	const char *all[] = {"floors", "lat", "rate", "bw", "pingpong", "post"};
	int n = argc > 1 ? argc - 1 : 6;
	for (int i = 0; i < n; i++) {
		const char *s = argc > 1 ? argv[i + 1] : all[i];
		double t0 = host_now_us();
		if (!strcmp(s, "floors"))
			floors();
		else if (!strcmp(s, "lat"))
			lat();
		else if (!strcmp(s, "rate"))
			rate();
		else if (!strcmp(s, "engines"))
			engines();
		else if (!strcmp(s, "bw"))
			bw();
		else if (!strcmp(s, "pingpong"))
			pingpong();
		else if (!strcmp(s, "post"))
			post();
		else if (!strcmp(s, "smfull"))
			smfull();
		else {
			fprintf(stderr, "gpu_bench: unknown section %s\n", s);
			return 1;
		}
		fprintf(stderr, "gpu_bench: %s took %.1f s\n", s, (host_now_us() - t0) / 1e6);
		fflush(stdout);
	}
	return 0;
}
