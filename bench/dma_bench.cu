/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench/dma_bench.cu - copies posted by a CUDA kernel on a kinet copy queue
 * (kn_dma_memcpy_batch, completion by CQE) against cudaMemcpyAsync of the
 * same sizes and directions, in one run on one GPU (bench/dma.sh runs it).
 *
 * usage: dma_bench [backend] [MiB]   backend: soft (default) or mlx5;
 *                                    MiB: bytes moved per measurement (256)
 * For each direction (host->GPU, GPU->host, GPU->GPU, host->host; host
 * memory is pinned and mapped) and size (8 B .. 16 MiB): one thread of one
 * block posts the copies in batches of up to 16, waiting for the last of
 * each batch before the next (so that up to 16 are in flight), until MiB
 * have moved; cudaMemcpyAsync issues the same copies on one stream. Both
 * are timed with CUDA events (kinet: around the kernel, so the posting is
 * in), after a warm-up; the destination is checked byte for byte against
 * the random source after each. Prints a markdown table: GB/s and
 * microseconds per copy of both, and the ratio kinet / CUDA.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet.h>
#include <kinet/dma.h>
#include <kinet/kinet_cuda.h>
#include <kinet/device_dma.cuh>

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

#define BATCH 16u
#define MAXSIZE (16u << 20)

struct dbuf {
	uint8_t *p;
	size_t len;
	int host;
	kinet_mr *mr;
};

static void dbuf_open(kinet_pd *pd, dbuf *b, size_t len, int host)
{
	b->len = len;
	b->host = host;
	if (host)
		CK(cudaHostAlloc((void **)&b->p, len, cudaHostAllocMapped | cudaHostAllocPortable));
	else
		CK(cudaMalloc((void **)&b->p, len));
	KK(kinet_mr_reg(pd, b->p, len, KINET_ACCESS_ALL, &b->mr));
}

static void dbuf_close(dbuf *b)
{
	kinet_mr_dereg(b->mr);
	if (b->host)
		cudaFreeHost(b->p);
	else
		cudaFree(b->p);
}

/* Copies count x size bytes, copy i from src + (i % slots) * size to the same
 * offset of dst, in batches of BATCH. */
__global__ void copy_kernel(const kn_dma *d, uint8_t *dst, uint32_t dkey, const uint8_t *src,
			    uint32_t skey, uint32_t size, uint32_t slots, uint32_t count, int *rc)
{
	kn_dma_copy c[BATCH];
	int r = 0;
	for (uint32_t i = 0; i < count && !r;) {
		uint32_t n = count - i < BATCH ? count - i : BATCH;
		for (uint32_t k = 0; k < n; k++) {
			size_t off = (size_t)((i + k) % slots) * size;
			c[k].dst = dst + off;
			c[k].src = src + off;
			c[k].dst_key = dkey;
			c[k].src_key = skey;
			c[k].len = size;
			c[k].rsvd = 0;
		}
		kn_ticket_t last;
		r = kn_dma_memcpy_batch(d, c, n, &last);
		if (!r)
			r = kn_dma_wait(d, last);
		i += n;
	}
	*rc = r;
}

static int check(const dbuf *dst, const uint8_t *want, size_t len)
{
	uint8_t *back = (uint8_t *)malloc(len);
	CK(cudaMemcpy(back, dst->p, len, cudaMemcpyDefault));
	int bad = memcmp(back, want, len) != 0;
	free(back);
	return bad;
}

int main(int argc, char **argv)
{
	/* the software NIC copies GPU memory with CUDA copies of its engines
	 * (a staged path, refused unless allowed; read at the first kinet call) */
	setenv("KINET_ALLOW_HOST_STAGING", "1", 0);
	const char *backend = argc > 1 ? argv[1] : "soft";
	size_t total = (size_t)(argc > 2 ? atoi(argv[2]) : 256) << 20;
	if (!kinet_cuda_available()) {
		fprintf(stderr, "dma_bench: no usable GPU\n");
		return 2;
	}
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = strcmp(backend, "mlx5") ? KINET_BACKEND_SOFT : KINET_BACKEND_MLX5;
	kinet_ctx *ctx;
	kinet_pd *pd;
	KK(kinet_open(&ca, &ctx));
	KK(kinet_pd_alloc(ctx, &pd));
	struct kinet_dma_attr da;
	memset(&da, 0, sizeof(da));
	da.depth = 64;
	da.share = KN_SHARE_EXCLUSIVE;
	da.timeout_ms = 10000;
	kinet_dma *dma;
	kn_dma *dd;
	KK(kinet_dma_create(pd, &da, &dma));
	KK(kinet_dma_device_cuda(dma, &dd));

	/* the source is random, the destination reset before every measurement */
	size_t blen = 2 * (size_t)MAXSIZE;
	uint8_t *pattern = (uint8_t *)malloc(blen);
	srand(12345);
	for (size_t i = 0; i < blen; i++)
		pattern[i] = (uint8_t)rand();
	dbuf hs, hd, gs, gd;
	dbuf_open(pd, &hs, blen, 1);
	dbuf_open(pd, &hd, blen, 1);
	dbuf_open(pd, &gs, blen, 0);
	dbuf_open(pd, &gd, blen, 0);
	CK(cudaMemcpy(hs.p, pattern, blen, cudaMemcpyDefault));
	CK(cudaMemcpy(gs.p, pattern, blen, cudaMemcpyDefault));
	/* from pageable memory the copy may still be running: the kernels below
	 * go on a non-blocking stream, which does not wait for it */
	CK(cudaDeviceSynchronize());
	int *drc;
	CK(cudaMalloc((void **)&drc, sizeof(int)));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));

	struct {
		const char *name;
		dbuf *src, *dst;
	} dirs[4] = {{"host->GPU", &hs, &gd}, {"GPU->host", &gs, &hd}, {"GPU->GPU", &gs, &gd},
		     {"host->host", &hs, &hd}};
	const uint32_t sizes[] = {8, 4096, 65536, 1u << 20, MAXSIZE};
	printf("#### Copies from a kernel (kinet copy queue, %s backend) against "
	       "cudaMemcpyAsync\n\n",
	       backend);
	printf("| direction | size | kinet GB/s | kinet us/copy | cudaMemcpyAsync GB/s | "
	       "cudaMemcpyAsync us/copy | kinet / CUDA (bandwidth) |\n");
	printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	int failed = 0;
	for (int di = 0; di < 4; di++) {
		dbuf *src = dirs[di].src, *dst = dirs[di].dst;
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			uint32_t size = sizes[si];
			uint32_t slots =
				(uint32_t)(blen / size) < 64 ? (uint32_t)(blen / size) : 64;
			size_t span = (size_t)slots * size;
			uint32_t count = (uint32_t)(total / size);
			if (count < 2 * BATCH)
				count = 2 * BATCH;
			if (count > 100000)
				count = 100000; /* the small sizes: enough for a rate */
			float ms_k = 0, ms_c = 0;
			for (int pass = 0; pass < 2; pass++) { /* a warm-up, then the measurement */
				uint32_t n = pass ? count : 2 * BATCH;
				/* the slots this pass wrote (a warm-up may write fewer) */
				size_t wrote = (size_t)(n < slots ? n : slots) * size;
				CK(cudaMemsetAsync(dst->p, 0, span, s)); /* ordered on s */
				CK(cudaEventRecord(e0, s));
				copy_kernel<<<1, 1, 0, s>>>(dd, dst->p, kinet_mr_rkey(dst->mr),
							    src->p, kinet_mr_lkey(src->mr), size,
							    slots, n, drc);
				CK(cudaEventRecord(e1, s));
				CK(cudaStreamSynchronize(s));
				CK(cudaGetLastError());
				int hrc;
				CK(cudaMemcpy(&hrc, drc, sizeof(int), cudaMemcpyDeviceToHost));
				if (hrc) {
					fprintf(stderr, "dma_bench: %s %u B: %s\n", dirs[di].name,
						size, kinet_strerror(hrc));
					return 1;
				}
				CK(cudaEventElapsedTime(&ms_k, e0, e1));
				if (check(dst, pattern, wrote)) {
					fprintf(stderr,
						"dma_bench: %s %u B: kinet's copy differs\n",
						dirs[di].name, size);
					failed = 1;
				}
				CK(cudaMemsetAsync(dst->p, 0, span, s)); /* ordered on s */
				CK(cudaEventRecord(e0, s));
				for (uint32_t i = 0; i < n; i++) {
					size_t off = (size_t)(i % slots) * size;
					CK(cudaMemcpyAsync(dst->p + off, src->p + off, size,
							   cudaMemcpyDefault, s));
				}
				CK(cudaEventRecord(e1, s));
				CK(cudaStreamSynchronize(s));
				CK(cudaEventElapsedTime(&ms_c, e0, e1));
				if (check(dst, pattern, wrote)) {
					fprintf(stderr,
						"dma_bench: %s %u B: cudaMemcpyAsync differs\n",
						dirs[di].name, size);
					failed = 1;
				}
			}
			double bytes = (double)count * size;
			double gk = bytes / (ms_k * 1e6), gc = bytes / (ms_c * 1e6);
			printf("| %s | %u | %.2f | %.2f | %.2f | %.2f | %.2f |\n", dirs[di].name,
			       size, gk, ms_k * 1e3 / count, gc, ms_c * 1e3 / count, gk / gc);
		}
	}
	printf("\n");
	cudaFree(drc);
	cudaStreamDestroy(s);
	KK(kinet_dma_device_cuda_release(dma));
	KK(kinet_dma_destroy(dma));
	dbuf_close(&hs);
	dbuf_close(&hd);
	dbuf_close(&gs);
	dbuf_close(&gd);
	free(pattern);
	KK(kinet_pd_free(pd));
	KK(kinet_close(ctx));
	return failed;
}
