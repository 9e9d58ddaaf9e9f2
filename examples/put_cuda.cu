/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * put_cuda - RDMA writes posted by a CUDA kernel: 128 GPU threads share one
 * QP (KN_SHARE_GPU); each writes its 4 KiB chunk of a GPU buffer into another
 * GPU buffer with kn_put and waits until all it posted is complete
 * (kn_quiet). The host then checks every byte against the random source.
 *
 *   ./put_cuda      (needs a GPU; KINET_BACKEND=soft|mlx5 picks the NIC)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <cuda_runtime.h>
#include <kinet/device.h>
#include <kinet/kinet.h>
#include <kinet/kinet_cuda.h>
#define BLOCKS 2
#define THREADS 64
#define CHUNK 4096u
#define LEN ((size_t)BLOCKS * THREADS * CHUNK)
#define CHECK(call)                                                                     \
	do {                                                                            \
		int rc_ = (int)(call);                                                  \
		if (rc_) {                                                              \
			fprintf(stderr, "put_cuda: %s: %d (%s)\n", #call, rc_,          \
				rc_ < 0 ? kinet_strerror(rc_) : "CUDA error");          \
			return 1;                                                       \
		}                                                                       \
	} while (0)

__global__ void put_kernel(const kn_qp *qp, const uint8_t *src, uint32_t lkey, uint64_t dst,
			   uint32_t rkey, int *rc)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	kn_ticket_t t;
	int r = kn_put(qp, dst + (uint64_t)i * CHUNK, rkey, src + i * CHUNK, lkey, CHUNK, &t);
	int q = kn_quiet(qp); /* every WQE this thread posted is complete */
	rc[i] = r ? r : q;
}

int main(void)
{
	if (!kinet_cuda_available()) {
		fprintf(stderr, "put_cuda: no usable GPU\n");
		return 2;
	}
	uint8_t *host = (uint8_t *)malloc(LEN), *back = (uint8_t *)malloc(LEN), *src, *dst;
	int *rc, hrc[BLOCKS * THREADS];
	if (!host || !back || getrandom(host, LEN, 0) != (ssize_t)LEN)
		return 1;
	CHECK(cudaMalloc((void **)&src, LEN));
	CHECK(cudaMalloc((void **)&dst, LEN));
	CHECK(cudaMalloc((void **)&rc, sizeof(hrc)));
	CHECK(cudaMemcpy(src, host, LEN, cudaMemcpyHostToDevice));
	CHECK(cudaMemset(dst, 0, LEN));

	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_mr *src_mr, *dst_mr;
	kinet_qp *a, *b;
	kn_qp *d;
	CHECK(kinet_open(NULL, &ctx));
	CHECK(kinet_pd_alloc(ctx, &pd));
	CHECK(kinet_mr_reg(pd, src, LEN, KINET_ACCESS_LOCAL_WRITE, &src_mr));
	CHECK(kinet_mr_reg(pd, dst, LEN, KINET_ACCESS_ALL, &dst_mr));
	struct kinet_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.sq_depth = 256;
	qa.share = KN_SHARE_GPU; /* any thread of the grid may post */
	CHECK(kinet_qp_create(pd, &qa, &a));
	CHECK(kinet_qp_create(pd, &qa, &b));
	CHECK(kinet_qp_connect_local(a, b));
	CHECK(kinet_qp_device_cuda(a, &d)); /* the descriptor, in GPU memory */

	put_kernel<<<BLOCKS, THREADS>>>(d, src, kinet_mr_lkey(src_mr), (uint64_t)(uintptr_t)dst,
				       kinet_mr_rkey(dst_mr), rc);
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaMemcpy(hrc, rc, sizeof(hrc), cudaMemcpyDeviceToHost));
	for (int i = 0; i < BLOCKS * THREADS; i++)
		CHECK(hrc[i]);
	CHECK(cudaMemcpy(back, dst, LEN, cudaMemcpyDeviceToHost));
	if (memcmp(host, back, LEN)) {
		fprintf(stderr, "put_cuda: the destination differs from the source\n");
		return 1;
	}
	printf("put_cuda: %zu bytes written by %d GPU threads, verified\n", LEN, BLOCKS * THREADS);

	CHECK(kinet_qp_device_cuda_release(a));
	CHECK(kinet_qp_destroy(a));
	CHECK(kinet_qp_destroy(b));
	CHECK(kinet_mr_dereg(src_mr));
	CHECK(kinet_mr_dereg(dst_mr));
	CHECK(kinet_pd_free(pd));
	CHECK(kinet_close(ctx));
	cudaFree(src), cudaFree(dst), cudaFree(rc);
	free(host), free(back);
	return 0;
}
