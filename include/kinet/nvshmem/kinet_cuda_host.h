/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/nvshmem/kinet_cuda_host.h - what an NVSHMEM program built for kinet's
 * host executor (a C or C++ compiler, no nvcc) finds of CUDA: the launch
 * qualifiers (empty), dim3 and cudaStream_t, threadIdx/blockIdx/blockDim/
 * gridDim and __syncthreads/__syncwarp for the threads of
 * nvshmemx_collective_launch (kinet_shmem_host_launch), and the few runtime
 * calls such programs use around their kernels (cudaMalloc, cudaMemcpy,
 * cudaMemset, synchronisation: host memory, done at once). kinet/nvshmem/
 * nvshmem.h includes it when the compiler is not nvcc; nvcc programs get the
 * real CUDA headers instead.
 *
 * With CUDA's own runtime header in the translation unit (<cuda_runtime.h>
 * included before, __CUDA_RUNTIME_H__ or CUDART_VERSION defined) this header
 * stands aside and defines nothing: the program's CUDA names are CUDA's.
 * nvshmem.h takes CUDA's header instead of this one whenever it is on the
 * include path (so a host .cpp of a CUDA program may include it after
 * nvshmem.h too), unless the program defines KINET_NVSHMEM_HOST_EXECUTOR.
 *
 * Not provided: __shared__ (per-CTA memory; a kernel that needs it is CUDA
 * only), the atomics and intrinsics of device code, streams that run
 * anything asynchronously.
 */
#ifndef KINET_NVSHMEM_CUDA_HOST_H
#define KINET_NVSHMEM_CUDA_HOST_H

#if defined(__CUDACC__)
#error "kinet/nvshmem/kinet_cuda_host.h is for host-executor builds (not nvcc)"
#endif

#if !defined(__CUDA_RUNTIME_H__) && !defined(CUDART_VERSION)

#include <stdlib.h>
#include <string.h>
#include <kinet/shmem.h>
#include <kinet/device_port.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

typedef struct kinet_shmem_dim3 dim3;
typedef void *cudaStream_t;
typedef int cudaError_t;
#define cudaSuccess 0
#define cudaErrorMemoryAllocation 2
#define cudaErrorInvalidValue 1

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

/* The calling thread's place in its launch. */
#define threadIdx (kinet_shmem_host_self()->thread_idx)
#define blockIdx (kinet_shmem_host_self()->block_idx)
#define blockDim (kinet_shmem_host_self()->block_dim)
#define gridDim (kinet_shmem_host_self()->grid_dim)
#define warpSize 32
#define __syncthreads() kinet_shmem_host_group_sync(2)
#define __syncwarp() kinet_shmem_host_group_sync(1)
#define __threadfence() KN_FENCE_SYS()
#define __threadfence_system() KN_FENCE_SYS()

static inline cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n)
{
	return cudaMalloc(p, n);
}
static inline cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}
static inline cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	(void)k;
	memmove(dst, src, n);
	return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
					  enum cudaMemcpyKind k, cudaStream_t s)
{
	(void)s;
	return cudaMemcpy(dst, src, n, k);
}
static inline cudaError_t cudaMemset(void *p, int v, size_t n)
{
	memset(p, v, n);
	return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	*s = NULL;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d)
{
	(void)d;
	return cudaSuccess;
}
static inline cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}
static inline const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "error";
}

#endif /* CUDA's runtime header is not there */
#endif /* KINET_NVSHMEM_CUDA_HOST_H */
