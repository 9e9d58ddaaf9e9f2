/* SPDX-License-Identifier: BSD-3-Clause */
/* Kernels of libkinet_cuda.so: initialisation of device QP state. */
#include <kinet/device.h>
#include "cuda_priv.h"

static __global__ void kn_state_init_kernel(kn_qp_state *st, uint64_t *slot_ready, uint32_t n)
{
	uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i == 0) {
		kn_qp_state z = {};
		z.err_ticket = KN_NO_ERROR;
		*st = z;
	}
	for (; i < n; i += gridDim.x * blockDim.x)
		slot_ready[i] = 0;
}

extern "C" cudaError_t kinet_cuda_launch_state_init(void *state, uint32_t n, cudaStream_t s)
{
	kn_qp_state *st = (kn_qp_state *)state;
	kn_state_init_kernel<<<(n + 255) / 256 + 1, 256, 0, s>>>(st, (uint64_t *)(st + 1), n);
	return cudaGetLastError();
}

/* Loads the module's kernels now. With lazy loading (the CUDA default),
 * the first launch of a kernel loads it, and loading may wait for the
 * kernels running on the device: a launch from an engine thread while a
 * persistent kernel waits for the engine would deadlock. */
extern "C" cudaError_t kinet_cuda_preload(void)
{
	cudaFuncAttributes a;
	return cudaFuncGetAttributes(&a, kn_state_init_kernel);
}
