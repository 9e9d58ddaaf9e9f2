/* SPDX-License-Identifier: BSD-3-Clause */
/* What a host file of an NVSHMEM program does with both headers: CUDA's
 * types and calls (not kinet's stand-ins) next to NVSHMEM's host calls. */
#ifndef KINET_TEST_CUDA_HOST_USE_H
#define KINET_TEST_CUDA_HOST_USE_H
#if defined(threadIdx) || !defined(CUDART_VERSION)
#error "kinet's CUDA stand-ins were defined instead of CUDA's runtime"
#endif

int kinet_test_host_part(void *kernel);
int kinet_test_host_part(void *kernel)
{
	nvshmem_init();
	int me = nvshmem_my_pe(), n = nvshmem_n_pes();
	cudaStream_t stream;
	if (cudaStreamCreate(&stream) != cudaSuccess)
		return 1;
	int *sym = (int *)nvshmem_malloc(sizeof(int) * (size_t)n);
	int host = me;
	cudaError_t e = cudaMemcpyAsync(sym, &host, sizeof(host), cudaMemcpyHostToDevice, stream);
	dim3 grid(1), block(32, 1, 1);
	void *args[] = {&sym};
	int rc = nvshmemx_collective_launch(kernel, grid, block, args, 0, stream);
	nvshmemx_barrier_all_on_stream(stream);
	/* CUDA's half and __nv_bfloat16 (not kinet's stand-ins), host-called
	 * and stream-ordered RMA */
	half *h = (half *)nvshmem_malloc(sizeof(half) * 2);
	__nv_bfloat16 *bf = (__nv_bfloat16 *)nvshmem_malloc(sizeof(__nv_bfloat16) * 2);
	nvshmem_half_p(h, __float2half(1.5f), (me + 1) % n);
	nvshmem_bfloat16_put(bf, bf + 1, 1, (me + 1) % n);
	nvshmemx_half_put_on_stream(h, h + 1, 1, (me + 1) % n, stream);
	nvshmemx_barrier_on_stream(NVSHMEM_TEAM_WORLD, stream);
	nvshmem_quiet();
	float back = __half2float(nvshmem_half_g(h, (me + 1) % n)) +
		     __bfloat162float(nvshmem_bfloat16_g(bf, (me + 1) % n));
	cudaStreamSynchronize(stream);
	nvshmem_barrier_all();
	nvshmem_free(bf);
	nvshmem_free(h);
	nvshmem_free(sym);
	cudaStreamDestroy(stream);
	nvshmem_finalize();
	return (e == cudaSuccess ? 0 : 1) + rc + (back > 0.0f ? 0 : 1);
}
#endif
