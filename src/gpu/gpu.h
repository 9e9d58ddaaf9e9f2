/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu.h - GPU helpers of libkinet, below both backends (src/gpu/mem.c):
 * queue memory, copies between memory kinds, and the hooks of the CUDA
 * module (src/cuda, loaded at run time). The CUDA driver itself is reached
 * only here and in the CUDA module (src/gpu/cudrv.h).
 */
#ifndef KINET_GPU_GPU_H
#define KINET_GPU_GPU_H

#include <stddef.h>
#include <stdint.h>

/* ---- memory helpers (src/gpu/mem.c) ------------------------------------------ */
/* Page-aligned, zeroed memory for queues and doorbell pages. When a GPU is
 * present (CUDA module loaded), it is registered and mapped into the GPU. */
void *kinet_queue_alloc(size_t len);
void kinet_queue_free(void *p, size_t len);

/* Moves n bytes between memories of the given kinds (enum kinet_mem_kind).
 * Host to host is memcpy; anything involving GPU memory goes through the
 * CUDA module. 0 or a negative errno. */
int kinet_mem_copy(void *dst, int dkind, const void *src, int skind, size_t n);

/* What the CUDA driver says of a GPU pointer (kinet_cuda_ops.mem_info). */
struct kinet_cuda_mem {
	uint64_t buffer_id; /* CU_POINTER_ATTRIBUTE_BUFFER_ID: the allocation's identity */
	uintptr_t base;     /* the allocation: [base, base + size) */
	size_t size;
	int pool;           /* from a memory pool (cudaMallocAsync, cuMemAllocFromPool) */
	int vmm;            /* mapped with cuMemMap (virtual memory management) */
	int managed;        /* managed (unified) memory */
	int device;         /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
};

/* An allocation of the CUDA module (kinet_cuda_ops.mem_alloc). */
struct kinet_cuda_alloc {
	void *base;       /* what the allocator returned: give it back to mem_free */
	void *dev_ptr;    /* the GPU's address of base; NULL: none */
	void *host_ptr;   /* the CPU's address of base; NULL: the CPU cannot access it */
	int gpu;          /* the device it belongs to or is mapped into */
	int cpu_in_place; /* managed memory: the CPU reaches it without migration */
};

/* Hooks filled by the CUDA module when it is loaded (src/cuda/). */
struct kinet_cuda_ops {
	int (*copy)(void *dst, int dkind, const void *src, int skind, size_t n);
	int (*atomic64)(void *addr, int op, uint64_t a, uint64_t b, uint64_t *old);
	int (*pointer_kind)(const void *p); /* enum kinet_mem_kind, or -errno */
	int (*host_register)(void *p, size_t len);
	int (*host_unregister)(void *p);
	/* Copies left in flight (the engine keeps several GPU copies going):
	 * copy_async enqueues on the calling thread's stream and returns at once
	 * (the memory on both sides must stay until a later fence completed);
	 * fence records a point after every copy the calling thread enqueued so
	 * far; fence_query: 1 completed (the copies before it are visible to
	 * later kernels and copies), 0 not yet, -EIO a copy failed; fence_wait
	 * blocks until completed (any thread); fence_free gives it back (any
	 * thread). NULL hooks: synchronous copies only. */
	int (*copy_async)(void *dst, int dkind, const void *src, int skind, size_t n);
	int (*fence)(void **f);
	int (*fence_query)(void *f);
	int (*fence_wait)(void *f);
	void (*fence_free)(void *f);
	/* Allocation identity of GPU memory at p (the registration cache checks
	 * it on every hit): 0, or -EINVAL (not GPU memory) / -EIO. NULL: the
	 * module has none (GPU memory is then not cached). */
	int (*mem_info)(const void *p, struct kinet_cuda_mem *out);
	/* The GPU's address of host memory mapped into it: 0, or -ENODEV. */
	int (*dev_addr)(const void *p, void **out);
	/* The software NIC's GPU engine (src/nic/soft/geng.h): launches its
	 * kernel on the control block ctl (host memory from kinet_queue_alloc)
	 * with `warps` warps, returning at once; engine_wait blocks until the
	 * kernel launched last has exited. 0 or a negative errno. */
	int (*engine_launch)(void *ctl, unsigned warps);
	int (*engine_wait)(void);
	/* 1 while the kernel launched last has not exited, 0 when it has, or a
	 * negative errno (it failed). */
	int (*engine_query)(void);
	/* Memory of kinet_mem_alloc (enum kinet_mem_alloc_kind kind; len > 0):
	 * GPU memory, managed memory kept on the GPU and mapped for the CPU, or
	 * pinned host memory mapped into the GPU. 0, -ENOMEM, -EOPNOTSUPP (the
	 * GPU cannot), -EIO (logged). mem_free gives back what mem_alloc made
	 * (base, the same kind): 0 or -EIO. */
	int (*mem_alloc)(int kind, size_t len, struct kinet_cuda_alloc *out);
	int (*mem_free)(int kind, void *base);
};
extern const struct kinet_cuda_ops *kinet_cuda;
/* Tries to load the CUDA module once; returns kinet_cuda (NULL when absent). */
const struct kinet_cuda_ops *kinet_cuda_load(void);
/* Why kinet_cuda_load() returned NULL, in words ("" when it did not): the
 * module is off (KINET_NO_CUDA=1), not loaded (and why), or found no usable
 * GPU. */
const char *kinet_cuda_absent_why(void);

#endif
