/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/shmem_device_cuda.cuh - the PGAS layer's warp and block forms for
 * CUDA kernels (kinet/shmem_device.h includes it under nvcc; the host
 * executor's forms are at the end of that header).
 *
 * NVSHMEM's meaning of the cooperative forms: every thread of the warp
 * (kn_shmem_*_warp), of the warpgroup (kn_shmem_barrier_warpgroup: 4
 * consecutive warps) or of the CTA (kn_shmem_*_block) calls with the same
 * arguments, and the group moves ONE buffer together. To a peer reached by
 * load/store the threads copy interleaved 16-byte pieces of it (coalesced);
 * through the NIC the group's first thread posts the WQEs (the NIC moves
 * the bytes; one doorbell). Every thread returns the same result. The calls
 * start and end with the group's barrier (__syncwarp, a named barrier, __syncthreads), so
 * the source is complete when the copy starts and the group may reuse it
 * (blocking forms) when the call returns.
 */
#ifndef KINET_SHMEM_DEVICE_CUDA_CUH
#define KINET_SHMEM_DEVICE_CUDA_CUH

#if !defined(__CUDACC__)
#error "kinet/shmem_device_cuda.cuh is CUDA only: compile with nvcc"
#endif

#include <kinet/shmem_device.h>

#define KNX_SH_WARP 1
#define KNX_SH_BLOCK 2
#define KNX_SH_WARPGROUP 3 /* 4 consecutive warps (128 threads) of the CTA */

/* The group's barrier. A warpgroup's is the named barrier 1 + its index in
 * the CTA (barrier 0 is __syncthreads'; a CTA of 1024 threads has 8
 * warpgroups) for its threads rounded up to whole warps (the last
 * warpgroup of a CTA whose size is not a multiple of 128 has the rest). */
static __device__ __forceinline__ void knx_sh_grp_sync(int scope)
{
	if (scope == KNX_SH_WARP) {
		__syncwarp();
	} else if (scope == KNX_SH_WARPGROUP) {
		uint32_t n = blockDim.x * blockDim.y * blockDim.z;
		uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
		uint32_t g = tid / 128u, in = n - g * 128u < 128u ? n - g * 128u : 128u;
		in = (in + 31u) & ~31u;
		asm volatile("bar.sync %0, %1;" : : "r"(1u + g), "r"(in) : "memory");
	} else {
		__syncthreads();
	}
}

static __device__ __forceinline__ uint32_t knx_sh_grp_rank(int scope)
{
	uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
	return scope == KNX_SH_WARP ? (tid & 31u) : scope == KNX_SH_WARPGROUP ? (tid & 127u) : tid;
}

static __device__ __forceinline__ uint32_t knx_sh_grp_size(int scope)
{
	uint32_t n = blockDim.x * blockDim.y * blockDim.z;
	if (scope == KNX_SH_BLOCK)
		return n;
	uint32_t gs = scope == KNX_SH_WARPGROUP ? 128u : 32u;
	uint32_t tid = knx_sh_grp_rank(KNX_SH_BLOCK), w = tid / gs;
	return n - w * gs < gs ? n - w * gs : gs;
}

/* The group's first thread's value, seen by every thread (a barrier). */
static __device__ __forceinline__ int knx_sh_grp_bcast(int scope, int v)
{
	if (scope == KNX_SH_WARP) {
		uint32_t mask = __activemask();
		return __shfl_sync(mask, v, 0);
	}
	if (scope == KNX_SH_WARPGROUP) {
		__shared__ int knx_sh_bcast_wg[8]; /* one per warpgroup of a CTA */
		uint32_t g = knx_sh_grp_rank(KNX_SH_BLOCK) / 128u;
		if (knx_sh_grp_rank(scope) == 0)
			knx_sh_bcast_wg[g] = v;
		knx_sh_grp_sync(scope);
		int r = knx_sh_bcast_wg[g];
		knx_sh_grp_sync(scope); /* read before the next broadcast writes */
		return r;
	}
	__shared__ int knx_sh_bcast_word;
	if (knx_sh_grp_rank(scope) == 0)
		knx_sh_bcast_word = v;
	__syncthreads();
	int r = knx_sh_bcast_word;
	__syncthreads(); /* read before the next broadcast writes */
	return r;
}

/* The group copies n bytes, interleaved: when both ends have the same
 * offset in 16 bytes, the bytes up to a 16-byte boundary, then 16-byte
 * pieces, then the tail; else bytes. */
static __device__ __forceinline__ void knx_sh_grp_copy(int scope, void *dst, const void *src,
						       size_t n)
{
	uint32_t r = knx_sh_grp_rank(scope), g = knx_sh_grp_size(scope);
	uint8_t *d = (uint8_t *)dst;
	const uint8_t *s = (const uint8_t *)src;
	size_t done = 0;
	if ((((uintptr_t)d ^ (uintptr_t)s) & 15u) == 0) {
		size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
		if (head > n)
			head = n;
		for (size_t i = r; i < head; i += g)
			d[i] = s[i];
		size_t nv = (n - head) / 16;
		uint4 *dv = (uint4 *)(d + head);
		const uint4 *sv = (const uint4 *)(s + head);
		for (size_t i = r; i < nv; i += g)
			dv[i] = sv[i];
		done = head + nv * 16;
	}
	for (size_t i = done + r; i < n; i += g)
		d[i] = s[i];
}

static __device__ __forceinline__ int knx_sh_put_grp(int scope, void *dest, const void *src,
						     size_t n, int pe, int nbi)
{
	knx_sh_grp_sync(scope);
	void *p = kn_shmem_ptr(dest, pe);
	int rc = 0;
	if (p)
		knx_sh_grp_copy(scope, p, src, n);
	else if (knx_sh_grp_rank(scope) == 0)
		rc = nbi ? kn_shmem_put_nbi(dest, src, n, pe) : kn_shmem_put(dest, src, n, pe);
	knx_sh_grp_sync(scope);
	return knx_sh_grp_bcast(scope, rc);
}

static __device__ __forceinline__ int knx_sh_get_grp(int scope, void *dest, const void *src,
						     size_t n, int pe, int nbi)
{
	knx_sh_grp_sync(scope);
	void *p = kn_shmem_ptr(src, pe);
	int rc = 0;
	if (p)
		knx_sh_grp_copy(scope, dest, p, n);
	else if (knx_sh_grp_rank(scope) == 0)
		rc = nbi ? kn_shmem_get_nbi(dest, src, n, pe) : kn_shmem_get(dest, src, n, pe);
	knx_sh_grp_sync(scope);
	return knx_sh_grp_bcast(scope, rc);
}

static __device__ __forceinline__ int knx_sh_put_signal_grp(int scope, void *dest, const void *src,
							    size_t n, uint64_t *sig, uint64_t v,
							    int op, int pe, int nbi)
{
	knx_sh_grp_sync(scope);
	void *p = kn_shmem_ptr(dest, pe);
	int rc = 0;
	if (p) {
		knx_sh_grp_copy(scope, p, src, n);
		__threadfence_system(); /* every thread's part before the signal */
		knx_sh_grp_sync(scope);
		if (knx_sh_grp_rank(scope) == 0)
			rc = kn_shmem_signal_op(sig, v, op, pe);
	} else if (knx_sh_grp_rank(scope) == 0) {
		rc = nbi ? kn_shmem_put_signal_nbi(dest, src, n, sig, v, op, pe)
			 : kn_shmem_put_signal(dest, src, n, sig, v, op, pe);
	}
	knx_sh_grp_sync(scope);
	return knx_sh_grp_bcast(scope, rc);
}

/* Strided put and get of a group: to a peer load/store reaches, thread k
 * copies elements k, k + group size, ...; through the NIC the group's
 * first thread posts them all. */
static __device__ __forceinline__ int knx_sh_istride_grp(int scope, int get, void *dest,
							 const void *src, ptrdiff_t dst,
							 ptrdiff_t sst, size_t n, uint32_t es,
							 int pe)
{
	knx_sh_route rt;
	int64_t dlo, slo;
	knx_sh_grp_sync(scope);
	int rc = knx_sh_istride_route(get, dest, src, dst, sst, n, es, pe, &dlo, &slo, &rt);
	uint32_t r = knx_sh_grp_rank(scope), g = knx_sh_grp_size(scope);
	if (!rc && n && rt.ptr) {
		knx_sh_istride_copy(get, dest, src, rt.ptr, dst, sst, dlo, slo, es, r, g, n);
	} else if (!rc && n && r == 0) {
		rc = get ? kn_shmem_iget(dest, src, dst, sst, n, es, pe)
			 : kn_shmem_iput(dest, src, dst, sst, n, es, pe);
	}
	knx_sh_grp_sync(scope);
	return knx_sh_grp_bcast(scope, rc);
}
/* One thread of the group makes the call; everyone gets its result. */
#define KNX_SH_GRP_ONE(scope, call)                                                        \
	do {                                                                               \
		int rc_ = 0;                                                               \
		knx_sh_grp_sync(scope);                                                    \
		if (knx_sh_grp_rank(scope) == 0)                                           \
			rc_ = (call);                                                      \
		knx_sh_grp_sync(scope);                                                    \
		return knx_sh_grp_bcast(scope, rc_);                                       \
	} while (0)

#define KNX_SH_DEV static __device__ __forceinline__

KNX_SH_DEV int kn_shmem_iput_warp(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				  uint32_t es, int pe)
{
	return knx_sh_istride_grp(KNX_SH_WARP, 0, d, s, dst, sst, n, es, pe);
}
KNX_SH_DEV int kn_shmem_iput_block(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				   uint32_t es, int pe)
{
	return knx_sh_istride_grp(KNX_SH_BLOCK, 0, d, s, dst, sst, n, es, pe);
}
KNX_SH_DEV int kn_shmem_iget_warp(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				  uint32_t es, int pe)
{
	return knx_sh_istride_grp(KNX_SH_WARP, 1, d, s, dst, sst, n, es, pe);
}
KNX_SH_DEV int kn_shmem_iget_block(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				   uint32_t es, int pe)
{
	return knx_sh_istride_grp(KNX_SH_BLOCK, 1, d, s, dst, sst, n, es, pe);
}
KNX_SH_DEV int kn_shmem_putmem_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(KNX_SH_WARP, d, s, n, pe, 0);
}
KNX_SH_DEV int kn_shmem_putmem_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(KNX_SH_BLOCK, d, s, n, pe, 0);
}
KNX_SH_DEV int kn_shmem_putmem_nbi_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(KNX_SH_WARP, d, s, n, pe, 1);
}
KNX_SH_DEV int kn_shmem_putmem_nbi_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(KNX_SH_BLOCK, d, s, n, pe, 1);
}
KNX_SH_DEV int kn_shmem_getmem_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(KNX_SH_WARP, d, s, n, pe, 0);
}
KNX_SH_DEV int kn_shmem_getmem_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(KNX_SH_BLOCK, d, s, n, pe, 0);
}
KNX_SH_DEV int kn_shmem_getmem_nbi_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(KNX_SH_WARP, d, s, n, pe, 1);
}
KNX_SH_DEV int kn_shmem_getmem_nbi_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(KNX_SH_BLOCK, d, s, n, pe, 1);
}
KNX_SH_DEV int kn_shmem_put_signal_warp(void *d, const void *s, size_t n, uint64_t *sig, uint64_t v,
					int op, int pe)
{
	return knx_sh_put_signal_grp(KNX_SH_WARP, d, s, n, sig, v, op, pe, 0);
}
KNX_SH_DEV int kn_shmem_put_signal_block(void *d, const void *s, size_t n, uint64_t *sig,
					 uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(KNX_SH_BLOCK, d, s, n, sig, v, op, pe, 0);
}
KNX_SH_DEV int kn_shmem_put_signal_nbi_warp(void *d, const void *s, size_t n, uint64_t *sig,
					    uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(KNX_SH_WARP, d, s, n, sig, v, op, pe, 1);
}
KNX_SH_DEV int kn_shmem_put_signal_nbi_block(void *d, const void *s, size_t n, uint64_t *sig,
					     uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(KNX_SH_BLOCK, d, s, n, sig, v, op, pe, 1);
}
KNX_SH_DEV int kn_shmem_quiet_warp(void)
{
	KNX_SH_GRP_ONE(KNX_SH_WARP, kn_shmem_quiet());
}
KNX_SH_DEV int kn_shmem_quiet_block(void)
{
	KNX_SH_GRP_ONE(KNX_SH_BLOCK, kn_shmem_quiet());
}
KNX_SH_DEV int kn_shmem_barrier_all_warp(void)
{
	KNX_SH_GRP_ONE(KNX_SH_WARP, kn_shmem_barrier_all());
}
KNX_SH_DEV int kn_shmem_barrier_all_block(void)
{
	KNX_SH_GRP_ONE(KNX_SH_BLOCK, kn_shmem_barrier_all());
}
KNX_SH_DEV int kn_shmem_sync_all_warp(void)
{
	KNX_SH_GRP_ONE(KNX_SH_WARP, kn_shmem_sync_all());
}
KNX_SH_DEV int kn_shmem_sync_all_block(void)
{
	KNX_SH_GRP_ONE(KNX_SH_BLOCK, kn_shmem_sync_all());
}
KNX_SH_DEV int kn_shmem_barrier_warp(int team)
{
	KNX_SH_GRP_ONE(KNX_SH_WARP, kn_shmem_barrier(team));
}
KNX_SH_DEV int kn_shmem_barrier_block(int team)
{
	KNX_SH_GRP_ONE(KNX_SH_BLOCK, kn_shmem_barrier(team));
}
/* Every thread of a warpgroup (4 consecutive warps of the CTA) calls. */
KNX_SH_DEV int kn_shmem_barrier_warpgroup(int team)
{
	KNX_SH_GRP_ONE(KNX_SH_WARPGROUP, kn_shmem_barrier(team));
}
KNX_SH_DEV int kn_shmem_team_sync_warp(int team)
{
	KNX_SH_GRP_ONE(KNX_SH_WARP, kn_shmem_team_sync(team));
}
KNX_SH_DEV int kn_shmem_team_sync_block(int team)
{
	KNX_SH_GRP_ONE(KNX_SH_BLOCK, kn_shmem_team_sync(team));
}
/* The collectives (kn_shmem_coll): the group's first thread runs it, the
 * group waits and gets its result. */
KNX_SH_DEV int kn_shmem_coll_warp(int coll, int team, void *dest, const void *src, size_t nelems,
				  int root, int op, int dt)
{
	KNX_SH_GRP_ONE(KNX_SH_WARP, kn_shmem_coll(coll, team, dest, src, nelems, root, op, dt));
}
KNX_SH_DEV int kn_shmem_coll_block(int coll, int team, void *dest, const void *src,
				   size_t nelems, int root, int op, int dt)
{
	KNX_SH_GRP_ONE(KNX_SH_BLOCK, kn_shmem_coll(coll, team, dest, src, nelems, root, op, dt));
}

#endif /* KINET_SHMEM_DEVICE_CUDA_CUH */
