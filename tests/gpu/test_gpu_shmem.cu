/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The PGAS layer with the CUDA executor: 2 and 4 PEs as processes sharing
 * the machine's GPU(s) (one GPU each when there are enough, else all on
 * GPU 0: run the CUDA MPS daemon for them to run at once), over the
 * same-node path (GPU heaps through CUDA IPC, host heaps through shared
 * memory) and over the software NIC's wire. CUDA kernels issue every
 * operation at thread, warp and block scope; the data is checked byte for
 * byte on random contents, atomics and signals by value; the collectives
 * (thread, warp, block, host and stream forms) against host references;
 * the warpgroup barrier, maxloc, the strided alltoall and 2D team splits.
 * Also the examples' CUDA builds (examples/nvshmem) as jobs.
 *
 * The PEs are forked before any CUDA call of the test process.
 */
#include "gpu_util.h"
#include <signal.h>
#include <math.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <kinet/shmem.h>
#include <kinet/shmem_device.h>
#include <kinet/nvshmem/device_host/nvshmem_tensor.h> /* the tile API (refused) */
#include <kinet/nvshmem/nvshmem.h>

#define MAXPE 8

struct job_shared {
	volatile int addr_ready;
	char addr[128];
	int result[MAXPE];
};
static struct job_shared *js;

#define PK(cond, ...)                                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "[PE %d] %s:%d: %s: ", kinet_shmem_my_pe(), __FILE__,      \
				__LINE__, #cond);                                                  \
			fprintf(stderr, "" __VA_ARGS__);                                           \
			fprintf(stderr, "\n");                                                     \
			return __LINE__;                                                           \
		}                                                                                  \
	} while (0)
#define PCU(x)                                                                                     \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		PK(e_ == cudaSuccess, "%s", cudaGetErrorString(e_));                               \
	} while (0)

static void on_listening(const char *addr, void *arg)
{
	(void)arg;
	snprintf(js->addr, sizeof(js->addr), "%s", addr);
	__atomic_store_n(&js->addr_ready, 1, __ATOMIC_RELEASE);
}

typedef int (*pe_fn)(int me, int n);

static int pe_main(int pe, int n, int p2p, pe_fn fn)
{
	unsetenv("BXFI_MAP");
	setenv("KINET_SHMEM_P2P", p2p ? "1" : "0", 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("KINET_ALLOW_HOST_STAGING", "1", 0); /* the software NIC reaches GPU memory by copies */
	setenv("KINET_SHMEM_TIMEOUT_MS", "20000", 0);
	while (pe && !__atomic_load_n(&js->addr_ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	struct kinet_boot_attr ba;
	memset(&ba, 0, sizeof(ba));
	ba.rank = pe;
	ba.size = n;
	ba.addr = pe == 0 ? "127.0.0.1:0" : js->addr;
	ba.secret = "gpu-shmem";
	ba.timeout_ms = 30000;
	ba.listening = on_listening;
	kinet_boot *b;
	int rc = kinet_boot_init(&ba, &b);
	if (rc)
		return rc;
	int ngpu = 0;
	cudaGetDeviceCount(&ngpu);
	struct kinet_shmem_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.boot = b;
	sa.executor = KINET_SHMEM_EXEC_CUDA;
	sa.heap_size = 64u << 20;
	sa.host_heap_size = 4u << 20;
	sa.backend = KINET_BACKEND_SOFT;
	sa.gpu = ngpu >= n ? pe : 0;
	rc = kinet_shmem_init(&sa);
	if (rc) {
		fprintf(stderr, "[PE %d] kinet_shmem_init: %s\n", pe, kinet_strerror(rc));
		kinet_boot_close(b);
		return rc;
	}
	rc = fn(pe, n);
	int frc = kinet_shmem_finalize();
	kinet_boot_close(b);
	return rc ? rc : frc;
}

static void run_job(int n, int p2p, pe_fn fn)
{
	js = (struct job_shared *)mmap(NULL, sizeof(*js), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(js != MAP_FAILED);
	memset((void *)js, 0, sizeof(*js));
	pid_t pid[MAXPE];
	fflush(NULL);
	for (int pe = 0; pe < n; pe++) {
		pid[pe] = fork();
		cr_assert(pid[pe] >= 0);
		if (pid[pe] == 0) {
			alarm(300);
			int rc = pe_main(pe, n, p2p, fn);
			js->result[pe] = rc;
			_exit(rc ? 1 : 0);
		}
		/* PE 0 publishes its addresses before the others start; one that
		 * dies first (or hangs past its alarm) ends the wait */
		for (int ms = 0; pe == 0 && !__atomic_load_n(&js->addr_ready, __ATOMIC_ACQUIRE);
		     ms++) {
			int st;
			if (waitpid(pid[0], &st, WNOHANG) == pid[0])
				cr_assert_fail("PE 0 ended (status 0x%x) before it published its "
					       "addresses",
					       st);
			cr_assert(ms < 310000, "PE 0 did not publish its addresses in 310 s");
			usleep(1000);
		}
	}
	for (int pe = 0; pe < n; pe++) {
		int st;
		cr_assert_eq(waitpid(pid[pe], &st, 0), pid[pe]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "PE %d of %d (same-node path %s): result %d", pe, n, p2p ? "on" : "off",
			  js->result[pe]);
	}
	munmap(js, sizeof(*js));
}

static uint64_t seed_of(int pe, int what)
{
	return 0x6a09e667ull ^ ((uint64_t)pe << 32) ^ (uint64_t)what * 0x9e3779b9ull;
}

/* ---- every operation from kernels --------------------------------------------------------- */

#define LEN (1u << 20)
#define THR_LEN 100003u /* odd sizes: the unaligned tails of the copies */
#define P_OFF ((THR_LEN + 32u) & ~7u) /* the 8-byte word of p and g, aligned */
#define WARP_LEN 65537u
#define BLK_LEN 333333u

struct ops {
	uint8_t *src, *dst, *got;
	uint64_t *sig;      /* [8] */
	uint64_t *w64;      /* [16] atomics */
	uint32_t *w32;      /* [16] */
	uint64_t *old;      /* [64] fetched values, per atomic (device memory, local) */
	int *errs;
	int me, n;
};

/* CTA 0: thread scope; CTA 1: warp scope; CTA 2: block scope; all to the
 * right neighbour; then put_signal SET (CTA 0) and ADD (CTA 1, 2). */
static __global__ void rma_kernel(struct ops a)
{
	int right = (a.me + 1) % a.n;
	unsigned cta = blockIdx.x, tid = threadIdx.x;
	int rc = 0;
	if (cta == 0 && tid == 0) {
		rc |= kn_shmem_put(a.dst, a.src, THR_LEN, right);
		rc |= kn_shmem_put_nbi(a.dst + THR_LEN, a.src + THR_LEN, 28, right); /* inline */
		rc |= kn_shmem_p(a.dst + P_OFF, 0x1122334455667788ull + (uint64_t)a.me, 8,
				 right);
		rc |= kn_shmem_quiet();
		rc |= kn_shmem_put_signal_nbi(a.dst + THR_LEN + 64, a.src + THR_LEN + 64, 4000,
					      &a.sig[0], 0xabc0 + (uint64_t)a.me, KN_SIG_SET, right);
	}
	if (cta == 1 && tid < 32) {
		rc |= kn_shmem_putmem_warp(a.dst + 200000, a.src + 200000, WARP_LEN, right);
		rc |= kn_shmem_put_signal_nbi_warp(a.dst + 300000, a.src + 300000, 5000, &a.sig[1], 1,
						   KN_SIG_ADD, right);
	}
	if (cta == 2) {
		rc |= kn_shmem_putmem_block(a.dst + 400000 + 3, a.src + 400000 + 3, BLK_LEN, right);
		rc |= kn_shmem_put_signal_block(a.dst + 800000, a.src + 800000, 6000, &a.sig[1], 1,
						KN_SIG_ADD, right);
	}
	if (rc)
		atomicAdd(a.errs, 1);
}

/* One thread: waits for the left neighbour's signals, gets back and checks
 * on the device, every atomic on both sizes against the right neighbour. */
static __global__ void check_kernel(struct ops a)
{
	int right = (a.me + 1) % a.n, left = (a.me + a.n - 1) % a.n;
	int e = 0;
	uint64_t v = 0;
	e |= kn_shmem_signal_wait_until(&a.sig[0], KN_SHMEM_CMP_EQ, 0xabc0 + (uint64_t)left, &v);
	e |= kn_shmem_signal_wait_until(&a.sig[1], KN_SHMEM_CMP_GE, 2, NULL);
	e |= kn_shmem_wait_until(&a.sig[1], KN_SHMEM_CMP_EQ, 2, 8, 0);
	e |= kn_shmem_test(&a.sig[1], KN_SHMEM_CMP_GT, 1, 8, 0) == 1 ? 0 : 1;
	int status[2] = {0, 0};
	uint64_t vals[2] = {0xabc0 + (uint64_t)left, 2};
	e |= kn_shmem_wait_until_all(a.sig, 2, status, KN_SHMEM_CMP_EQ, vals, 1, 8, 0);
	/* g and get from the right neighbour: what this PE put there */
	uint64_t g = 0;
	e |= kn_shmem_g(a.dst + P_OFF, 8, right, &g);
	if (g != 0x1122334455667788ull + (uint64_t)a.me)
		e |= 2;
	e |= kn_shmem_get(a.got, a.dst + 400000 + 3, BLK_LEN, right);
	for (uint32_t i = 0; i < BLK_LEN; i++)
		if (a.got[i] != a.src[400000 + 3 + i]) {
			e |= 4;
			break;
		}
	/* atomics, 8 and 4 bytes, at the right neighbour's words */
	for (int amo = KN_AMO_FETCH_ADD; amo <= KN_AMO_FETCH_XOR; amo++) {
		e |= kn_shmem_atomic(&a.w64[amo], amo, 8, 0x0f0f0000ull + (uint64_t)amo, 7, right,
				     &a.old[amo]);
		e |= kn_shmem_atomic(&a.w32[amo], amo, 4, 0x0f0f00u + (uint64_t)amo, 7, right,
				     &a.old[16 + amo]);
		e |= kn_shmem_atomic(&a.w64[8 + amo], amo, 8, 5, 0, right, (uint64_t *)0);
	}
	e |= kn_shmem_signal_op(&a.sig[2], 40, KN_SIG_ADD, right);
	e |= kn_shmem_signal_op(&a.sig[3], 0x5e7, KN_SIG_SET, right);
	e |= kn_shmem_barrier_all();
	e |= kn_shmem_signal_wait_until(&a.sig[2], KN_SHMEM_CMP_EQ, 40, NULL);
	e |= kn_shmem_signal_wait_until(&a.sig[3], KN_SHMEM_CMP_EQ, 0x5e7, NULL);
	e |= kn_shmem_sync_all();
	if (e)
		atomicAdd(a.errs, 1);
}

static uint64_t ref_amo(int amo, uint64_t old, uint64_t v, uint64_t cmp, uint64_t mask)
{
	old &= mask, v &= mask, cmp &= mask;
	switch (amo) {
	case KN_AMO_FETCH_ADD:
		return (old + v) & mask;
	case KN_AMO_COMPARE_SWAP:
		return old == cmp ? v : old;
	case KN_AMO_SWAP:
		return v;
	case KN_AMO_FETCH:
		return old;
	case KN_AMO_FETCH_AND:
		return old & v;
	case KN_AMO_FETCH_OR:
		return old | v;
	default:
		return old ^ v;
	}
}

static int ops_pe(int me, int n)
{
	struct ops a;
	memset(&a, 0, sizeof(a));
	a.me = me;
	a.n = n;
	a.src = (uint8_t *)kinet_shmem_malloc(LEN);
	a.dst = (uint8_t *)kinet_shmem_calloc(1, LEN);
	a.got = (uint8_t *)kinet_shmem_malloc(LEN);
	a.sig = (uint64_t *)kinet_shmem_calloc(8, 8);
	a.w64 = (uint64_t *)kinet_shmem_malloc(16 * 8);
	a.w32 = (uint32_t *)kinet_shmem_malloc(16 * 4);
	PK(a.src && a.dst && a.got && a.sig && a.w64 && a.w32, "malloc");
	PCU(cudaMalloc((void **)&a.old, 64 * 8));
	PCU(cudaMalloc((void **)&a.errs, sizeof(int)));
	PCU(cudaMemset(a.errs, 0, sizeof(int)));
	uint8_t *h = (uint8_t *)malloc(LEN), *hd = (uint8_t *)malloc(LEN);
	uint64_t w64[16];
	uint32_t w32[16];
	tu_fill_random(h, LEN, seed_of(me, 1));
	tu_fill_random(w64, sizeof(w64), seed_of(me, 2));
	tu_fill_random(w32, sizeof(w32), seed_of(me, 3));
	PCU(cudaMemcpy(a.src, h, LEN, cudaMemcpyHostToDevice));
	PCU(cudaMemcpy(a.w64, w64, sizeof(w64), cudaMemcpyHostToDevice));
	PCU(cudaMemcpy(a.w32, w32, sizeof(w32), cudaMemcpyHostToDevice));
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	rma_kernel<<<3, 128>>>(a);
	PCU(cudaGetLastError());
	PCU(cudaDeviceSynchronize());
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	check_kernel<<<1, 1>>>(a);
	PCU(cudaGetLastError());
	PCU(cudaDeviceSynchronize());
	int errs = -1;
	PCU(cudaMemcpy(&errs, a.errs, sizeof(int), cudaMemcpyDeviceToHost));
	PK(errs == 0, "%d kernel threads saw an error (first: %s)", errs,
	   kinet_strerror(kinet_shmem_error(0)));
	PK(kinet_shmem_barrier_all_on_stream(NULL) == 0, "barrier on the stream");
	PCU(cudaDeviceSynchronize());
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	/* what the left neighbour put here */
	int left = (me + n - 1) % n, right = (me + 1) % n;
	tu_fill_random(h, LEN, seed_of(left, 1));
	PCU(cudaMemcpy(hd, a.dst, LEN, cudaMemcpyDeviceToHost));
	PK(!memcmp(hd, h, THR_LEN + 28), "thread-scope put and inline put");
	uint64_t p;
	memcpy(&p, hd + P_OFF, 8);
	PK(p == 0x1122334455667788ull + (uint64_t)left, "p");
	PK(!memcmp(hd + THR_LEN + 64, h + THR_LEN + 64, 4000), "put_signal SET");
	PK(!memcmp(hd + 200000, h + 200000, WARP_LEN), "warp-scope put");
	PK(!memcmp(hd + 300000, h + 300000, 5000), "warp-scope put_signal");
	PK(!memcmp(hd + 400003, h + 400003, BLK_LEN), "block-scope put");
	PK(!memcmp(hd + 800000, h + 800000, 6000), "block-scope put_signal");
	/* atomics: this PE's words got the left neighbour's atomics */
	uint64_t rw64[16], lw64[16], old[64];
	uint32_t rw32[16], lw32[16];
	PCU(cudaMemcpy(rw64, a.w64, sizeof(rw64), cudaMemcpyDeviceToHost));
	PCU(cudaMemcpy(rw32, a.w32, sizeof(rw32), cudaMemcpyDeviceToHost));
	tu_fill_random(lw64, sizeof(lw64), seed_of(me, 2)); /* the initial words */
	tu_fill_random(lw32, sizeof(lw32), seed_of(me, 3));
	for (int amo = KN_AMO_FETCH_ADD; amo <= KN_AMO_FETCH_XOR; amo++) {
		PK(rw64[amo] == ref_amo(amo, lw64[amo], 0x0f0f0000ull + (uint64_t)amo, 7, ~0ull),
		   "8-byte amo %d", amo);
		PK(rw32[amo] == (uint32_t)ref_amo(amo, lw32[amo], 0x0f0f00u + (uint64_t)amo, 7,
						   0xffffffffull), "4-byte amo %d", amo);
		PK(rw64[8 + amo] == ref_amo(amo, lw64[8 + amo], 5, 0, ~0ull), "non-fetching amo %d",
		   amo);
	}
	/* and this PE's fetches saw the right neighbour's initial words */
	PCU(cudaMemcpy(old, a.old, sizeof(old), cudaMemcpyDeviceToHost));
	tu_fill_random(lw64, sizeof(lw64), seed_of(right, 2));
	tu_fill_random(lw32, sizeof(lw32), seed_of(right, 3));
	for (int amo = KN_AMO_FETCH_ADD; amo <= KN_AMO_FETCH_XOR; amo++)
		PK(old[amo] == lw64[amo] && old[16 + amo] == lw32[amo], "amo %d returned the old word",
		   amo);
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	free(h);
	free(hd);
	cudaFree(a.old);
	cudaFree(a.errs);
	kinet_shmem_free(a.w32);
	kinet_shmem_free(a.w64);
	kinet_shmem_free(a.sig);
	kinet_shmem_free(a.got);
	kinet_shmem_free(a.dst);
	kinet_shmem_free(a.src);
	return 0;
}

Test(gpu_shmem, every_operation_2_pes_ipc_and_wire)
{
	run_job(2, 1, ops_pe);
	run_job(2, 0, ops_pe);
}

Test(gpu_shmem, every_operation_4_pes_ipc_and_wire)
{
	run_job(4, 1, ops_pe);
	run_job(4, 0, ops_pe);
}

/* ---- host-initiated and stream-ordered calls ------------------------------------------------- */

#define HC_LEN 65537u

/* The CUDA executor runs host-called operations as one-thread kernels:
 * put, get, p, g and an atomic from the PEs' main threads, a put_signal and
 * its wait on a stream, team barriers on a stream, and a pageable buffer
 * refused. */
static int host_calls_pe(int me, int n)
{
	int to = (me + 1) % n, from = (me + n - 1) % n;
	uint8_t *buf = (uint8_t *)kinet_shmem_malloc(3 * (size_t)HC_LEN);
	uint64_t *sig = (uint64_t *)kinet_shmem_calloc(4, sizeof(uint64_t));
	uint8_t *h = (uint8_t *)malloc(HC_LEN), *w = (uint8_t *)malloc(HC_LEN);
	PK(buf && sig && h && w, "malloc");
	tu_fill_random(h, HC_LEN, seed_of(me, 40));
	PCU(cudaMemcpy(buf, h, HC_LEN, cudaMemcpyHostToDevice));
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	PK(kinet_shmem_put(buf + HC_LEN, buf, HC_LEN, to) == 0, "host put");
	PK(kinet_shmem_p(&sig[0], 0x1234 + (uint64_t)me, 8, to) == 0, "host p");
	uint64_t old = 0;
	PK(kinet_shmem_atomic(&sig[1], KN_AMO_FETCH_ADD, 8, (uint64_t)me + 1, 0, 0, &old) == 0,
	   "host atomic");
	PK(kinet_shmem_quiet() == 0, "host quiet");
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	PCU(cudaMemcpy(w, buf + HC_LEN, HC_LEN, cudaMemcpyDeviceToHost));
	tu_fill_random(h, HC_LEN, seed_of(from, 40));
	PK(!memcmp(w, h, HC_LEN), "host put from PE %d", from);
	uint64_t g = 0;
	PK(kinet_shmem_g(&sig[0], 8, to, &g) == 0 && g == 0x1234 + (uint64_t)me, "host g: %llx",
	   (unsigned long long)g);
	PK(kinet_shmem_g(&sig[1], 8, 0, &g) == 0 && g == (uint64_t)n * (n + 1) / 2,
	   "the counter: %llu", (unsigned long long)g);
	PK(kinet_shmem_get(buf + 2 * HC_LEN, buf + HC_LEN, HC_LEN, to) == 0, "host get");
	PCU(cudaMemcpy(w, buf + 2 * HC_LEN, HC_LEN, cudaMemcpyDeviceToHost));
	tu_fill_random(h, HC_LEN, seed_of(me, 40));
	PK(!memcmp(w, h, HC_LEN), "host get at PE %d", to);
	/* pageable host memory: refused, nothing done */
	PK(kinet_shmem_put(buf, h, 64, to) == -EINVAL, "a pageable source");
	PK(kinet_shmem_error(1) == -EINVAL, "its error kept");
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	/* on a stream: put_signal, the target waits on its stream */
	cudaStream_t s;
	PCU(cudaStreamCreate(&s));
	PCU(cudaMemsetAsync(buf + HC_LEN, 0, HC_LEN, s));
	PK(kinet_shmem_barrier_on_stream(KINET_SHMEM_TEAM_WORLD, s) == 0, "barrier_on_stream");
	PK(kinet_shmem_put_signal_on_stream(buf + HC_LEN, buf, HC_LEN, &sig[2], 9, KN_SIG_SET, to, 0,
					    s) == 0, "put_signal_on_stream");
	PK(kinet_shmem_signal_wait_until_on_stream(&sig[2], KN_SHMEM_CMP_EQ, 9, s) == 0, "wait");
	PK(kinet_shmem_team_sync_on_stream(KINET_SHMEM_TEAM_WORLD, s) == 0, "team_sync_on_stream");
	PCU(cudaStreamSynchronize(s));
	PCU(cudaMemcpy(w, buf + HC_LEN, HC_LEN, cudaMemcpyDeviceToHost));
	tu_fill_random(h, HC_LEN, seed_of(from, 40));
	PK(!memcmp(w, h, HC_LEN), "put_signal_on_stream from PE %d", from);
	PK(kinet_shmem_g_on_stream(&sig[0], 8, to, &g, s) == 0 && g == 0x1234 + (uint64_t)me,
	   "g_on_stream");
	PK(kinet_shmem_error(0) == 0, "no error kept: %d", kinet_shmem_error(0));
	PCU(cudaStreamDestroy(s));
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	free(w);
	free(h);
	kinet_shmem_free(sig);
	kinet_shmem_free(buf);
	return 0;
}

Test(gpu_shmem, host_initiated_and_stream_calls)
{
	run_job(2, 1, host_calls_pe);
	run_job(2, 0, host_calls_pe);
	run_job(4, 1, host_calls_pe);
	run_job(4, 0, host_calls_pe);
}

/* ---- strided put and get (iput, iget) ------------------------------------------------------ */

#define IS_MARGIN 64u
#define IS_REGION (256u << 10)

struct istr {
	uint8_t *src, *dst; /* symmetric: put's source / get's remote source; the target region */
	ptrdiff_t dst_st, src_st;
	size_t n, dorg, sorg;
	uint32_t es;
	int get, scope, pe;
	int *rc;
};

/* One CTA of 64 threads: scope 0, thread 0 alone; 1, warp 0; 2, the block. */
static __global__ void istr_kernel(struct istr a)
{
	unsigned tid = threadIdx.x;
	void *d = a.dst + a.dorg;
	const void *s = a.src + a.sorg;
	int rc = 0;
	if (a.scope == 0 && tid == 0)
		rc = a.get ? kn_shmem_iget(d, s, a.dst_st, a.src_st, a.n, a.es, a.pe)
			   : kn_shmem_iput(d, s, a.dst_st, a.src_st, a.n, a.es, a.pe);
	else if (a.scope == 1 && tid < 32)
		rc = a.get ? kn_shmem_iget_warp(d, s, a.dst_st, a.src_st, a.n, a.es, a.pe)
			   : kn_shmem_iput_warp(d, s, a.dst_st, a.src_st, a.n, a.es, a.pe);
	else if (a.scope == 2)
		rc = a.get ? kn_shmem_iget_block(d, s, a.dst_st, a.src_st, a.n, a.es, a.pe)
			   : kn_shmem_iput_block(d, s, a.dst_st, a.src_st, a.n, a.es, a.pe);
	if (rc)
		atomicAdd(a.rc, 1);
}

/* Every element size, strides above 1 on both sides and a negative one,
 * nelems 0, 1 and odd, from kernels (thread, warp, block), the host and a
 * stream; put to the right neighbour, get from the left one; the target
 * region checked byte for byte, guard bytes around and between the
 * elements included. */
static int istr_pe(int me, int n)
{
	static const uint32_t ess[] = {1, 2, 4, 8, 16};
	static const ptrdiff_t sts[][2] = {{3, 2}, {1, 4}, {-2, 3}};
	static const size_t ns[] = {0, 1, 37, 1001};
	int to = (me + 1) % n, from = (me + n - 1) % n;
	uint8_t *src = (uint8_t *)kinet_shmem_malloc(IS_REGION);
	uint8_t *dst = (uint8_t *)kinet_shmem_malloc(IS_REGION);
	uint8_t *h = (uint8_t *)malloc(IS_REGION), *g = (uint8_t *)malloc(IS_REGION);
	uint8_t *x = (uint8_t *)malloc(IS_REGION), *w = (uint8_t *)malloc(IS_REGION);
	int *rc = NULL;
	PK(src && dst && h && g && x && w, "malloc");
	PCU(cudaMalloc(&rc, sizeof(int)));
	PCU(cudaMemset(rc, 0, sizeof(int)));
	cudaStream_t s;
	PCU(cudaStreamCreate(&s));
	int round = 0;
	for (int form = 0; form < 5; form++)
		for (int e = 0; e < 5; e++)
			for (int k = 0; k < 3; k++)
				for (int m = 0; m < 4; m++)
					for (int get = 0; get < 2; get++, round++) {
		struct istr a;
		memset(&a, 0, sizeof(a));
		a.src = src, a.dst = dst, a.es = ess[e], a.n = ns[m], a.get = get, a.rc = rc;
		a.dst_st = sts[k][0], a.src_st = sts[k][1], a.pe = get ? from : to;
		size_t dext = a.n ? (size_t)(a.dst_st < 0 ? -a.dst_st : a.dst_st) * (a.n - 1) * a.es : 0;
		size_t sext = a.n ? (size_t)(a.src_st < 0 ? -a.src_st : a.src_st) * (a.n - 1) * a.es : 0;
		a.dorg = IS_MARGIN + (a.dst_st < 0 ? dext : 0);
		a.sorg = IS_MARGIN + (a.src_st < 0 ? sext : 0);
		size_t rlen = 2 * IS_MARGIN + dext + a.es, slen = 2 * IS_MARGIN + sext + a.es;
		PK(rlen <= IS_REGION && slen <= IS_REGION, "case too large");
		tu_fill_random(h, slen, seed_of(me, 1000 + round));
		tu_fill_random(g, rlen, seed_of(me, 5000 + round));
		PCU(cudaMemcpy(src, h, slen, cudaMemcpyHostToDevice));
		PCU(cudaMemcpy(dst, g, rlen, cudaMemcpyHostToDevice));
		PK(kinet_shmem_barrier_all() == 0, "barrier");
		void *d = dst + a.dorg;
		const void *sp = src + a.sorg;
		if (form < 3) {
			a.scope = form;
			istr_kernel<<<1, 64>>>(a);
			PCU(cudaGetLastError());
			PCU(cudaDeviceSynchronize());
		} else if (form == 3) {
			PK((get ? kinet_shmem_iget(d, sp, a.dst_st, a.src_st, a.n, a.es, a.pe)
				: kinet_shmem_iput(d, sp, a.dst_st, a.src_st, a.n, a.es, a.pe)) == 0,
			   "host-initiated");
		} else {
			PK((get ? kinet_shmem_iget_on_stream(d, sp, a.dst_st, a.src_st, a.n, a.es, a.pe, s)
				: kinet_shmem_iput_on_stream(d, sp, a.dst_st, a.src_st, a.n, a.es, a.pe,
							     s)) == 0, "on stream");
			PCU(cudaStreamSynchronize(s));
		}
		PK(kinet_shmem_barrier_all() == 0, "barrier");
		int bad = 0;
		PCU(cudaMemcpy(&bad, rc, sizeof(int), cudaMemcpyDeviceToHost));
		PK(bad == 0 && kinet_shmem_error(0) == 0, "form %d: %d errors, kept %d", form, bad,
		   kinet_shmem_error(0));
		/* the model: the guard, with the sender's (put) or the read PE's (get)
		 * source elements, which both are the left neighbour's */
		tu_fill_random(x, slen, seed_of(from, 1000 + round));
		for (size_t i = 0; i < a.n; i++)
			memcpy(g + a.dorg + (ptrdiff_t)i * a.dst_st * (ptrdiff_t)a.es,
			       x + a.sorg + (ptrdiff_t)i * a.src_st * (ptrdiff_t)a.es, a.es);
		PCU(cudaMemcpy(w, dst, rlen, cudaMemcpyDeviceToHost));
		PK(!memcmp(w, g, rlen), "form %d %s: %zu elements of %u bytes, strides %td/%td", form,
		   get ? "iget" : "iput", a.n, a.es, a.dst_st, a.src_st);
	}
	PCU(cudaStreamDestroy(s));
	PCU(cudaFree(rc));
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	free(w);
	free(x);
	free(g);
	free(h);
	kinet_shmem_free(dst);
	kinet_shmem_free(src);
	return 0;
}

Test(gpu_shmem, strided_iput_iget_every_scope_ipc_and_wire)
{
	run_job(2, 1, istr_pe);
	run_job(2, 0, istr_pe);
}

/* ---- collectives from kernels and from the host ----------------------------------------------- */

#define C_NF 20011u /* floats: several rounds through the scratch */
#define C_NI 1001u  /* int32 */
#define C_NB 777u   /* bytes of fcollect, alltoall blocks, broadcast */
#define C_NX 333u   /* int64 per member of reducescatter */
#define C_ND 101u   /* doubles, reduced on a stream */

struct coll {
	float *sf, *df;
	int32_t *si, *di;
	uint8_t *sb, *db, *ab, *bb;
	int64_t *sx, *dx;
	double *sd, *dd;
	int *errs;
	int me, n;
};

/* One CTA of 64 threads, one collective at a time per PE: thread scope,
 * block scope, warp scope. */
static __global__ void coll_kernel(struct coll c)
{
	unsigned tid = threadIdx.x;
	int rc = 0;
	if (tid == 0)
		rc |= kn_shmem_reduce(KINET_SHMEM_TEAM_WORLD, c.df, c.sf, C_NF, KN_RED_SUM,
				      KN_DT_FLOAT);
	rc |= kn_shmem_coll_block(KN_COLL_REDUCE, KINET_SHMEM_TEAM_WORLD, c.di, c.si, C_NI, 0,
				  KN_RED_MAX, KN_SHMEM_DTYPE(int32_t));
	if (tid < 32)
		rc |= kn_shmem_coll_warp(KN_COLL_FCOLLECT, KINET_SHMEM_TEAM_WORLD, c.db, c.sb, C_NB,
					 0, 0, KN_DT_UINT8);
	rc |= kn_shmem_coll_block(KN_COLL_REDUCESCATTER, KINET_SHMEM_TEAM_WORLD, c.dx, c.sx, C_NX,
				  0, KN_RED_XOR, KN_DT_INT64);
	if (tid < 32)
		rc |= kn_shmem_coll_warp(KN_COLL_ALLTOALL, KINET_SHMEM_TEAM_WORLD, c.ab, c.sb, C_NB,
					 0, 0, KN_DT_UINT8);
	if (rc)
		atomicAdd(c.errs, 1);
}

static int coll_pe(int me, int n)
{
	struct coll c;
	memset(&c, 0, sizeof(c));
	c.me = me;
	c.n = n;
	c.sf = (float *)kinet_shmem_malloc(C_NF * 4);
	c.df = (float *)kinet_shmem_malloc(C_NF * 4);
	c.si = (int32_t *)kinet_shmem_malloc(C_NI * 4);
	c.di = (int32_t *)kinet_shmem_malloc(C_NI * 4);
	c.sb = (uint8_t *)kinet_shmem_malloc((size_t)C_NB * n);
	c.db = (uint8_t *)kinet_shmem_malloc((size_t)C_NB * n);
	c.ab = (uint8_t *)kinet_shmem_malloc((size_t)C_NB * n);
	c.bb = (uint8_t *)kinet_shmem_malloc(C_NB);
	c.sx = (int64_t *)kinet_shmem_malloc((size_t)C_NX * 8 * n);
	c.dx = (int64_t *)kinet_shmem_malloc((size_t)C_NX * 8);
	c.sd = (double *)kinet_shmem_malloc(C_ND * 8);
	c.dd = (double *)kinet_shmem_malloc(C_ND * 8);
	PK(c.sf && c.df && c.si && c.di && c.sb && c.db && c.ab && c.bb && c.sx && c.dx && c.sd &&
	   c.dd, "malloc");
	PCU(cudaMalloc((void **)&c.errs, sizeof(int)));
	PCU(cudaMemset(c.errs, 0, sizeof(int)));
	/* inputs: random, from the PE's seeds (floats and doubles in [0.5, 1.5)) */
	size_t hl = (size_t)C_NF * 4 + (size_t)C_NX * 8 * n + 4096 * 8;
	uint8_t *h = (uint8_t *)malloc(hl), *w = (uint8_t *)malloc(hl), *g = (uint8_t *)malloc(hl);
	PK(h && w && g, "malloc");
#define C_FILL(pe, what, p, cnt, T, flt)                                                        \
	do {                                                                                    \
		tu_fill_random(p, (size_t)(cnt) * sizeof(T), seed_of(pe, what));                \
		if (flt)                                                                        \
			for (size_t i_ = 0; i_ < (size_t)(cnt); i_++)                           \
				((T *)(p))[i_] = (T)(0.5 + (double)((uint8_t *)(p))[i_ * sizeof(T)] / 256.0); \
	} while (0)
	C_FILL(me, 20, h, C_NF, float, 1);
	PCU(cudaMemcpy(c.sf, h, C_NF * 4, cudaMemcpyHostToDevice));
	C_FILL(me, 21, h, C_NI, int32_t, 0);
	PCU(cudaMemcpy(c.si, h, C_NI * 4, cudaMemcpyHostToDevice));
	C_FILL(me, 22, h, C_NB * n, uint8_t, 0);
	PCU(cudaMemcpy(c.sb, h, (size_t)C_NB * n, cudaMemcpyHostToDevice));
	C_FILL(me, 23, h, C_NX * n, int64_t, 0);
	PCU(cudaMemcpy(c.sx, h, (size_t)C_NX * 8 * n, cudaMemcpyHostToDevice));
	C_FILL(me, 24, h, C_ND, double, 1);
	PCU(cudaMemcpy(c.sd, h, C_ND * 8, cudaMemcpyHostToDevice));
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	coll_kernel<<<1, 64>>>(c);
	PCU(cudaGetLastError());
	PCU(cudaDeviceSynchronize());
	/* from the host: a product of doubles on a stream, a broadcast waited for */
	cudaStream_t st;
	PCU(cudaStreamCreate(&st));
	PK(kinet_shmem_coll_on_stream(KN_COLL_REDUCE, KINET_SHMEM_TEAM_WORLD, c.dd, c.sd, C_ND, 0,
				      KN_RED_PROD, KN_DT_DOUBLE, st) == 0, "on stream");
	PCU(cudaStreamSynchronize(st));
	PCU(cudaStreamDestroy(st));
	PK(kinet_shmem_coll(KN_COLL_BROADCAST, KINET_SHMEM_TEAM_WORLD, c.bb, c.sb, C_NB, n - 1, 0,
			    KN_DT_UINT8) == 0, "host broadcast");
	int errs = 0;
	PCU(cudaMemcpy(&errs, c.errs, sizeof(int), cudaMemcpyDeviceToHost));
	PK(errs == 0 && kinet_shmem_error(0) == 0, "%d kernel errors: %s", errs,
	   kinet_strerror(kinet_shmem_error(0)));
	/* sum of floats, in member order */
	float *wf = (float *)w, *xf = (float *)h;
	for (int p = 0; p < n; p++) {
		C_FILL(p, 20, h, C_NF, float, 1);
		for (size_t i = 0; i < C_NF; i++)
			wf[i] = p ? wf[i] + xf[i] : xf[i];
	}
	PCU(cudaMemcpy(g, c.df, C_NF * 4, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < C_NF; i++)
		PK(fabsf(((float *)g)[i] - wf[i]) <= 1e-5f * (1.0f + fabsf(wf[i])),
		   "float sum %zu: %g, want %g", i, ((float *)g)[i], wf[i]);
	/* max of int32 */
	int32_t *wi = (int32_t *)w, *xi = (int32_t *)h;
	for (int p = 0; p < n; p++) {
		C_FILL(p, 21, h, C_NI, int32_t, 0);
		for (size_t i = 0; i < C_NI; i++)
			wi[i] = p && wi[i] > xi[i] ? wi[i] : xi[i];
	}
	PCU(cudaMemcpy(g, c.di, C_NI * 4, cudaMemcpyDeviceToHost));
	PK(!memcmp(g, w, C_NI * 4), "int32 max");
	/* fcollect, alltoall, broadcast of bytes */
	for (int p = 0; p < n; p++) {
		C_FILL(p, 22, h, C_NB * n, uint8_t, 0);
		memcpy(w + (size_t)p * C_NB, h, C_NB);                           /* fcollect */
		memcpy(w + (size_t)(n + p) * C_NB, h + (size_t)me * C_NB, C_NB); /* alltoall */
		if (p == n - 1)
			memcpy(w + (size_t)2 * n * C_NB, h, C_NB); /* broadcast */
	}
	PCU(cudaMemcpy(g, c.db, (size_t)C_NB * n, cudaMemcpyDeviceToHost));
	PK(!memcmp(g, w, (size_t)C_NB * n), "fcollect (warp)");
	PCU(cudaMemcpy(g, c.ab, (size_t)C_NB * n, cudaMemcpyDeviceToHost));
	PK(!memcmp(g, w + (size_t)n * C_NB, (size_t)C_NB * n), "alltoall (warp)");
	PCU(cudaMemcpy(g, c.bb, C_NB, cudaMemcpyDeviceToHost));
	PK(!memcmp(g, w + (size_t)2 * n * C_NB, C_NB), "broadcast (host)");
	/* xor reducescatter of int64: block me of every member */
	int64_t *wx = (int64_t *)w, *xx = (int64_t *)h;
	for (int p = 0; p < n; p++) {
		C_FILL(p, 23, h, C_NX * n, int64_t, 0);
		for (size_t i = 0; i < C_NX; i++)
			wx[i] = p ? wx[i] ^ xx[(size_t)me * C_NX + i] : xx[(size_t)me * C_NX + i];
	}
	PCU(cudaMemcpy(g, c.dx, C_NX * 8, cudaMemcpyDeviceToHost));
	PK(!memcmp(g, w, C_NX * 8), "int64 xor reducescatter (block)");
	/* product of doubles on the stream */
	double *wd = (double *)w, *xd = (double *)h;
	for (int p = 0; p < n; p++) {
		C_FILL(p, 24, h, C_ND, double, 1);
		for (size_t i = 0; i < C_ND; i++)
			wd[i] = p ? wd[i] * xd[i] : xd[i];
	}
	PCU(cudaMemcpy(g, c.dd, C_ND * 8, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < C_ND; i++)
		PK(fabs(((double *)g)[i] - wd[i]) <= 1e-12 * (1.0 + fabs(wd[i])), "double prod %zu",
		   i);
#undef C_FILL
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	free(h);
	free(w);
	free(g);
	cudaFree(c.errs);
	void *blocks[] = {c.dd, c.sd, c.dx, c.sx, c.bb, c.ab, c.db, c.sb, c.di, c.si, c.df, c.sf};
	for (int i = 0; i < 12; i++)
		PK(kinet_shmem_free(blocks[i]) == 0, "free");
	return 0;
}

Test(gpu_shmem, collectives_2_and_4_pes_ipc_and_wire)
{
	run_job(2, 1, coll_pe);
	run_job(2, 0, coll_pe);
	run_job(4, 1, coll_pe);
	run_job(4, 0, coll_pe);
}

/* ---- warpgroup barrier, maxloc, strided alltoall, 2D teams ---------------------------------- */

#define X_ML 1001u  /* maxloc pairs: several chunks of the scratch with 4 PEs */
#define X_AN 37u    /* alltoalls elements per member */
#define X_DS 3      /* its strides: dest, source */
#define X_SS 2
#define X_GUARD 64u /* guard bytes after the alltoalls dest span */

struct xc {
	double2 *sml, *dml;
	int32_t *sa, *da;  /* kernel alltoalls (int32) */
	int64_t *sh, *dh;  /* host-called alltoalls (int64) */
	uint64_t *tok;     /* [MAXPE] tokens put before the warpgroup barrier */
	int *errs, *arrived;
	int me, n;
};

/* One CTA of 256 threads: warpgroup 1 puts its token to every PE and calls
 * the warpgroup barrier, then checks every token and that its 128 threads
 * all came; the CTA then reduces maxloc pairs; thread 0 makes a strided
 * alltoall. */
static __global__ void xc_kernel(struct xc c, uint64_t token)
{
	unsigned tid = threadIdx.x;
	int rc = 0;
	if (tid >= 128) {
		if (tid == 128)
			for (int p = 0; p < c.n; p++)
				nvshmem_uint64_p(c.tok + c.me, token, p);
		atomicAdd(c.arrived, 1);
		rc |= nvshmemx_barrier_warpgroup(NVSHMEM_TEAM_WORLD);
		if (atomicAdd(c.arrived, 0) != 128)
			rc |= 2;
		for (int p = 0; p < c.n; p++)
			if (((volatile uint64_t *)c.tok)[p] != token)
				rc |= 4;
	}
	rc |= nvshmemx_double2_maxloc_reduce_block(NVSHMEM_TEAM_WORLD, c.dml, c.sml, X_ML) ? 8 : 0;
	if (tid == 0)
		rc |= nvshmem_int32_alltoalls(NVSHMEM_TEAM_WORLD, c.da, c.sa, X_DS, X_SS, X_AN) ? 16
											       : 0;
	if (rc)
		atomicOr(c.errs, rc);
}

/* The pairs of PE pe: values from 4 integers (ties), indices below 100. */
static void xc_pairs(double2 *v, int pe)
{
	uint8_t r[2 * X_ML];
	tu_fill_random(r, sizeof(r), seed_of(pe, 80));
	for (size_t i = 0; i < X_ML; i++) {
		v[i].x = (double)(r[2 * i] % 4);
		v[i].y = (double)(r[2 * i + 1] % 100);
	}
}

static int xc_pe(int me, int n)
{
	struct xc c;
	memset(&c, 0, sizeof(c));
	c.me = me;
	c.n = n;
	size_t alen = ((size_t)n * X_AN - 1) * X_DS + 1; /* dest span, elements */
	size_t slen = ((size_t)n * X_AN - 1) * X_SS + 1;
	c.sml = (double2 *)kinet_shmem_malloc(X_ML * sizeof(double2));
	c.dml = (double2 *)kinet_shmem_malloc(X_ML * sizeof(double2) + X_GUARD);
	c.sa = (int32_t *)kinet_shmem_malloc(slen * 4);
	c.da = (int32_t *)kinet_shmem_malloc(alen * 4 + X_GUARD);
	c.sh = (int64_t *)kinet_shmem_malloc(slen * 8);
	c.dh = (int64_t *)kinet_shmem_malloc(alen * 8 + X_GUARD);
	c.tok = (uint64_t *)kinet_shmem_malloc(MAXPE * 8);
	PK(c.sml && c.dml && c.sa && c.da && c.sh && c.dh && c.tok, "malloc");
	PCU(cudaMalloc((void **)&c.errs, 2 * sizeof(int)));
	PCU(cudaMemset(c.errs, 0, 2 * sizeof(int)));
	c.arrived = c.errs + 1;
	size_t hl = alen * 8 + X_GUARD + X_ML * sizeof(double2);
	uint8_t *h = (uint8_t *)malloc(hl), *w = (uint8_t *)malloc(hl), *g = (uint8_t *)malloc(hl);
	PK(h && w && g, "malloc");
	xc_pairs((double2 *)h, me);
	PCU(cudaMemcpy(c.sml, h, X_ML * sizeof(double2), cudaMemcpyHostToDevice));
	PCU(cudaMemset(c.dml, 0xa5, X_ML * sizeof(double2) + X_GUARD));
	tu_fill_random(h, slen * 4, seed_of(me, 81));
	PCU(cudaMemcpy(c.sa, h, slen * 4, cudaMemcpyHostToDevice));
	PCU(cudaMemset(c.da, 0xa5, alen * 4 + X_GUARD));
	tu_fill_random(h, slen * 8, seed_of(me, 82));
	PCU(cudaMemcpy(c.sh, h, slen * 8, cudaMemcpyHostToDevice));
	PCU(cudaMemset(c.dh, 0xa5, alen * 8 + X_GUARD));
	PCU(cudaMemset(c.tok, 0, MAXPE * 8));
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	xc_kernel<<<1, 256>>>(c, 0x7000 + (uint64_t)n);
	PCU(cudaGetLastError());
	PCU(cudaDeviceSynchronize());
	PK(kinet_shmem_alltoalls(KINET_SHMEM_TEAM_WORLD, c.dh, c.sh, X_DS, X_SS, X_AN, 8) == 0,
	   "host alltoalls");
	int errs = 0;
	PCU(cudaMemcpy(&errs, c.errs, sizeof(int), cudaMemcpyDeviceToHost));
	PK(errs == 0 && kinet_shmem_error(0) == 0, "kernel errors %#x: %s", errs,
	   kinet_strerror(kinet_shmem_error(0)));
	/* maxloc: the largest value, ties to the lowest index; the guard after */
	double2 *wm = (double2 *)w, *xm = (double2 *)h;
	for (int p = 0; p < n; p++) {
		xc_pairs(xm, p);
		for (size_t i = 0; i < X_ML; i++)
			if (!p || xm[i].x > wm[i].x || (xm[i].x == wm[i].x && xm[i].y < wm[i].y))
				wm[i] = xm[i];
	}
	memset(w + X_ML * sizeof(double2), 0xa5, X_GUARD);
	PCU(cudaMemcpy(g, c.dml, X_ML * sizeof(double2) + X_GUARD, cudaMemcpyDeviceToHost));
	PK(!memcmp(g, w, X_ML * sizeof(double2) + X_GUARD), "maxloc (block)");
	/* alltoalls: member p's element (me * X_AN + k) * X_SS at (p * X_AN + k) * X_DS,
	 * every other byte of the span and the guard as it was */
	for (int es = 4; es <= 8; es += 4) {
		memset(w, 0xa5, alen * es + X_GUARD);
		for (int p = 0; p < n; p++) {
			tu_fill_random(h, slen * es, seed_of(p, es == 4 ? 81 : 82));
			for (size_t k = 0; k < X_AN; k++)
				memcpy(w + ((size_t)p * X_AN + k) * X_DS * es,
				       h + ((size_t)me * X_AN + k) * X_SS * es, es);
		}
		PCU(cudaMemcpy(g, es == 4 ? (void *)c.da : (void *)c.dh, alen * es + X_GUARD,
			       cudaMemcpyDeviceToHost));
		PK(!memcmp(g, w, alen * es + X_GUARD), "alltoalls of %d-byte elements (%s)", es,
		   es == 4 ? "kernel" : "host");
	}
	/* 2D teams: rows of 2 */
	kinet_shmem_team xt, yt;
	PK(kinet_shmem_team_split_2d(KINET_SHMEM_TEAM_WORLD, 2, &xt, &yt) == 0, "split_2d");
	PK(kinet_shmem_team_n_pes(xt) == (n - me / 2 * 2 < 2 ? 1 : 2) &&
		   kinet_shmem_team_my_pe(xt) == me % 2 &&
		   kinet_shmem_team_n_pes(yt) == (n + 1 - me % 2) / 2 &&
		   kinet_shmem_team_my_pe(yt) == me / 2,
	   "2D teams");
	PK(kinet_shmem_team_destroy(xt) == 0 && kinet_shmem_team_destroy(yt) == 0, "destroy");
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	free(h);
	free(w);
	free(g);
	cudaFree(c.errs);
	void *blocks[] = {c.tok, c.dh, c.sh, c.da, c.sa, c.dml, c.sml};
	for (int i = 0; i < 7; i++)
		PK(kinet_shmem_free(blocks[i]) == 0, "free");
	return 0;
}

Test(gpu_shmem, warpgroup_maxloc_alltoalls_split_2d_ipc_and_wire)
{
	run_job(2, 1, xc_pe);
	run_job(2, 0, xc_pe);
	run_job(3, 1, xc_pe);
	run_job(4, 0, xc_pe);
}

/* ---- the tile API: tensors real, tile collectives refused ---------------------------------- */

#define TILE_N 4096 /* floats: a 4 x 1024 tile */

/* One CTA of 64 threads calls a tile allreduce (block scope), a tile
 * allgather (warp 0) and a collective wait (thread 0); rc[0..2] their
 * results (every caller's, ORed: all -1), rc[3..4] the tensor's shape read
 * back through get<>. */
static __global__ void tile_kernel(float *src, float *dst, int *rc)
{
	auto shp = nvshmemx::make_shape<ConstInt<4>, int>(ConstInt<4>{}, TILE_N / 4);
	auto str = nvshmemx::make_stride<ConstInt<1>, int>(ConstInt<1>{}, get<0>(shp));
	auto lay = nvshmemx::make_layout(shp, str);
	auto s = nvshmemx::Tensor<float, decltype(lay)>(src, lay);
	auto d = nvshmemx::Tensor<float, decltype(lay)>(dst, lay);
	struct none {};
	int a = nvshmemx::tile_sum_allreduce_block<decltype(s), decltype(d), none,
						   nvshmemx::NVLS_TWO_SHOT_PUSH_NBI>(
		NVSHMEM_TEAM_WORLD, s, d, {}, {}, 0, 0);
	atomicOr(&rc[0], a);
	if (threadIdx.x < 32) {
		int b = nvshmemx::tile_allgather_warp<decltype(s), decltype(d), none,
						      nvshmemx::NVLS_ONE_SHOT_PUSH_NBI>(
			NVSHMEM_TEAM_WORLD, s, d, {}, {}, 0);
		atomicOr(&rc[1], b);
	}
	if (threadIdx.x == 0) {
		rc[2] = nvshmemx::tile_collective_wait<nvshmemx::NVLS_ONE_SHOT_PUSH_NBI>(
			NVSHMEM_TEAM_WORLD, 0);
		rc[3] = get<0>(d.shape()) * 10000 + get<1>(d.shape());
		rc[4] = get<0>(d.stride()) * 10000 + get<1>(d.stride());
	}
}

static int tile_pe(int me, int n)
{
	(void)n;
	size_t len = TILE_N * sizeof(float);
	float *src = (float *)kinet_shmem_malloc(len), *dst = (float *)kinet_shmem_malloc(len);
	int *rc = NULL;
	uint8_t *h = (uint8_t *)malloc(2 * len), *w = (uint8_t *)malloc(2 * len);
	PK(src && dst && h && w, "malloc");
	PCU(cudaMalloc(&rc, 5 * sizeof(int)));
	PCU(cudaMemset(rc, 0, 5 * sizeof(int)));
	tu_fill_random(h, 2 * len, seed_of(me, 70));
	PCU(cudaMemcpy(src, h, len, cudaMemcpyHostToDevice));
	PCU(cudaMemcpy(dst, h + len, len, cudaMemcpyHostToDevice));
	PK(kinet_shmem_error(1) == 0, "no error before");
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	tile_kernel<<<1, 64>>>(src, dst, rc);
	PCU(cudaDeviceSynchronize());
	int r[5];
	PCU(cudaMemcpy(r, rc, sizeof(r), cudaMemcpyDeviceToHost));
	PK(r[0] == -1 && r[1] == -1 && r[2] == -1, "refused: %d %d %d", r[0], r[1], r[2]);
	PK(r[3] == 4 * 10000 + TILE_N / 4 && r[4] == 1 * 10000 + 4, "the layout: %d %d", r[3], r[4]);
	PK(kinet_shmem_error(1) == -ENOTSUP, "-ENOTSUP kept");
	/* nothing written: both tensors as they were, byte for byte */
	PCU(cudaMemcpy(w, src, len, cudaMemcpyDeviceToHost));
	PCU(cudaMemcpy(w + len, dst, len, cudaMemcpyDeviceToHost));
	PK(!memcmp(w, h, 2 * len), "the tensors were touched");
	PK(kinet_shmem_barrier_all() == 0, "barrier");
	PCU(cudaFree(rc));
	free(w);
	free(h);
	kinet_shmem_free(dst);
	kinet_shmem_free(src);
	return 0;
}

Test(gpu_shmem, tile_collectives_refused)
{
	run_job(2, 1, tile_pe);
}

/* ---- the examples' CUDA builds ------------------------------------------------------------- */

static void example_job(const char *prog, int n)
{
	char addr[64], size[32];
	snprintf(addr, sizeof(addr), "KINET_BOOT_ADDR=127.0.0.1:%d", 23000 + (int)(getpid() % 20000));
	snprintf(size, sizeof(size), "KINET_BOOT_SIZE=%d", n);
	pid_t pid[MAXPE];
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pid[r] = fork();
		cr_assert(pid[r] >= 0);
		if (pid[r] == 0) {
			char rank[32];
			snprintf(rank, sizeof(rank), "KINET_BOOT_RANK=%d", r);
			unsetenv("BXFI_MAP");
			putenv(addr);
			putenv(size);
			putenv(rank);
			putenv((char *)"KINET_BOOT_SECRET=gpu-ex");
			putenv((char *)"KINET_BACKEND=soft");
			putenv((char *)"KINET_SHMEM_EXEC=cuda");
			putenv((char *)"KINET_ALLOW_HOST_STAGING=1");
			putenv((char *)"FI_TCP_IFACE=lo");
			alarm(300);
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
	}
	for (int r = 0; r < n; r++) {
		int st;
		cr_assert_eq(waitpid(pid[r], &st, 0), pid[r]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s, %d PEs: PE %d ended with %d", prog,
			  n, r, st);
	}
}

Test(gpu_shmem, examples_on_the_gpu)
{
#if defined(KINET_EX_ALLTOALL_CUDA) && defined(KINET_EX_ALLREDUCE_CUDA)
	example_job(KINET_EX_ALLTOALL_CUDA, 2);
	example_job(KINET_EX_ALLTOALL_CUDA, 4);
	example_job(KINET_EX_ALLREDUCE_CUDA, 2);
	example_job(KINET_EX_ALLREDUCE_CUDA, 4);
#else
	cr_skip_test("the examples' CUDA builds are not there");
#endif
}
