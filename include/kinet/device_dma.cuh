/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_dma.cuh - copy queues at warp and block scope (CUDA only):
 * the lanes of a warp (threads of a CTA) post their copies with one
 * reservation and one doorbell (kn_warp_post / kn_block_post of
 * kinet/device_cuda.cuh on the queue's loopback QP). Every lane (thread)
 * must call; warp scope: a lane with src == NULL posts nothing.
 */
#ifndef KINET_DEVICE_DMA_CUH
#define KINET_DEVICE_DMA_CUH

#if !defined(__CUDACC__)
#error "kinet/device_dma.cuh is CUDA only: compile with nvcc"
#endif

#include <kinet/device_cuda.cuh>
#include <kinet/device_dma.h>

static __device__ __forceinline__ int kn_warp_dma_memcpy(const kn_dma *d, void *dst,
							 uint32_t dst_key, const void *src,
							 uint32_t src_key, uint32_t len,
							 kn_ticket_t *ticket)
{
	kn_op op;
	kn_op_put(&op, (uint64_t)(uintptr_t)dst, dst_key, src, src_key, len);
	return kn_warp_post(&d->q, src ? &op : NULL, ticket);
}

static __device__ __forceinline__ int kn_block_dma_memcpy(const kn_dma *d, void *dst,
							  uint32_t dst_key, const void *src,
							  uint32_t src_key, uint32_t len,
							  kn_ticket_t *ticket)
{
	return kn_block_put(&d->q, (uint64_t)(uintptr_t)dst, dst_key, src, src_key, len, ticket);
}

/* Waits for every lane's copy (one lane polls); each lane gets its status. */
static __device__ __forceinline__ int kn_warp_dma_wait(const kn_dma *d, kn_ticket_t ticket)
{
	return kn_warp_wait(&d->q, ticket);
}

static __device__ __forceinline__ int kn_warp_dma_quiet(const kn_dma *d)
{
	return kn_warp_quiet(&d->q);
}

static __device__ __forceinline__ int kn_block_dma_quiet(const kn_dma *d)
{
	return kn_block_quiet(&d->q);
}

#endif /* KINET_DEVICE_DMA_CUH */
