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
 * Also half and __nv_bfloat16 (2-byte stand-ins with their float
 * conversions) and CUmodule, unless CUDA's own headers for them came first.
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

#include <stdint.h>
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

/* A module of the driver API (nvshmemx_cumodule_init); the host executor
 * has none. */
typedef struct CUmod_st *CUmodule;

/* CUDA's double2 (16 bytes, aligned to 16: maxloc's (value, index) pair). */
typedef struct __attribute__((aligned(16))) double2 {
	double x;
	double y;
} double2;

static inline double2 make_double2(double x, double y)
{
	double2 r;
	r.x = x;
	r.y = y;
	return r;
}

/* ---- the 16-bit floating-point types ---------------------------------------------------------- */

/* half (__half) and __nv_bfloat16 as their 2 bytes (what RMA moves), with
 * the conversions a program needs to make and read them (round to nearest,
 * ties to even, as CUDA's __float2half_rn and __float2bfloat16_rn). Only
 * where CUDA's own <cuda_fp16.h> / <cuda_bf16.h> have not come first. */
#if !defined(__CUDA_FP16_H__) && !defined(KINET_CUDA_HOST_HALF)
#define KINET_CUDA_HOST_HALF 1
typedef struct __half {
	unsigned short __x;
} __half;
typedef __half half;

static inline __half __float2half(float f)
{
	uint32_t x, ax, sign, h;
	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000u;
	ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u) {
		h = 0x7e00u; /* NaN */
	} else if (ax >= 0x47800000u) {
		h = 0x7c00u; /* infinity, or too large */
	} else if (ax < 0x38800000u) { /* below the smallest normal: a subnormal */
		if (ax <= 0x33000000u) {
			h = 0; /* at most half the smallest subnormal: zero (a tie goes to even) */
		} else {
			uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, sh = 126u - e;
			uint32_t rem = m & ((1u << sh) - 1u), mid = 1u << (sh - 1u);
			h = m >> sh;
			if (rem > mid || (rem == mid && (h & 1u)))
				h++;
		}
	} else {
		uint32_t rem = ax & 0x1fffu;
		h = (ax >> 13) - (112u << 10);
		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++; /* may carry into the exponent, up to infinity */
	}
	__half r;
	r.__x = (unsigned short)(sign | h);
	return r;
}

static inline float __half2float(__half a)
{
	uint32_t h = a.__x, sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
	if (e == 0x1fu) {
		x = sign | 0x7f800000u | (m << 13);
	} else if (e) {
		x = sign | ((e + 112u) << 23) | (m << 13);
	} else if (!m) {
		x = sign;
	} else {
		e = 113u;
		while (!(m & 0x400u)) {
			m <<= 1;
			e--;
		}
		x = sign | (e << 23) | ((m & 0x3ffu) << 13);
	}
	float f;
	memcpy(&f, &x, sizeof(f));
	return f;
}
#endif

#if !defined(__CUDA_BF16_H__) && !defined(KINET_CUDA_HOST_BF16)
#define KINET_CUDA_HOST_BF16 1
typedef struct __nv_bfloat16 {
	unsigned short __x;
} __nv_bfloat16;

static inline __nv_bfloat16 __float2bfloat16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	__nv_bfloat16 r;
	if ((x & 0x7fffffffu) > 0x7f800000u)
		r.__x = (unsigned short)((x >> 16) | 0x40u); /* NaN stays NaN */
	else
		r.__x = (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
	return r;
}

static inline float __bfloat162float(__nv_bfloat16 a)
{
	uint32_t x = (uint32_t)a.__x << 16;
	float f;
	memcpy(&f, &x, sizeof(f));
	return f;
}
#endif

#endif /* CUDA's runtime header is not there */
#endif /* KINET_NVSHMEM_CUDA_HOST_H */
