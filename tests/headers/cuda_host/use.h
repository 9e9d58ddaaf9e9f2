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
	cudaStreamSynchronize(stream);
	nvshmem_barrier_all();
	nvshmem_free(sym);
	cudaStreamDestroy(stream);
	nvshmem_finalize();
	return (e == cudaSuccess ? 0 : 1) + rc;
}
#endif
