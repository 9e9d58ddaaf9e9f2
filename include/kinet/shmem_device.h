/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/shmem_device.h - the PGAS layer's device operations: put and get,
 * single values, signals, point-to-point synchronisation, atomics, fence,
 * quiet and barriers on the symmetric heaps of kinet/shmem.h, from CUDA
 * kernels and from the host executor (the same portable C as
 * kinet/device.h).
 *
 * A PE's operations to another PE go one of two ways, chosen per peer at
 * kinet_shmem_init():
 *  - load/store: the peer's heaps are mapped into this process (same node:
 *    host heaps through shared memory, GPU heaps through CUDA IPC), and the
 *    operation is a copy or a CPU/GPU atomic through the mapping
 *    (kn_shmem_ptr() returns it);
 *  - the NIC: kinet's RC queue pairs, several per peer (kn_shmem.nqp), each
 *    thread using the one its CTA (or warp, KINET_SHMEM_QP_MAP) maps to, as
 *    mlx5 WQEs through kinet/device.h (atomics as ConnectX's masked atomics
 *    where the plain ones do not fit: kn_op_amo).
 * Operations to this PE itself are loads and stores.
 *
 * Symmetric addresses: a `dest`/`src` on the remote side is the address of
 * the same object in this PE's heap (what kinet_shmem_malloc returned here);
 * it is translated by its offset into the peer's heap. A local buffer of a
 * NIC operation must be in a heap or registered (kinet_shmem_buffer_register),
 * except the source of a put of at most 28 bytes (carried in the WQE).
 *
 * Return values: 0, or a negative errno: -EINVAL (an address outside the
 * heaps or in the layer's own first KN_SHMEM_RESERVED bytes of the device
 * heap, an unregistered local buffer, a bad PE, size or comparison: nothing
 * was done), -ETIMEDOUT (a wait or a full queue past the timeout,
 * kn_shmem.timeout_ns), -EIO (the NIC completed an operation in error, e.g.
 * the peer is gone). The first error of the PE is also kept (kn_shmem_error,
 * kinet_shmem_error on the host) for callers of the NVSHMEM names, which
 * return nothing.
 *
 * Scope: the kn_shmem_* functions here are thread scope. The warp and block
 * forms (kn_shmem_*_warp, *_block: every thread of the group calls, the
 * group moves one buffer together) are in kinet/shmem_device_cuda.cuh for
 * CUDA, and at the end of this header for the host executor (where a warp
 * is 32 consecutive threads of a block of kinet_shmem_host_launch).
 *
 * Ordering: operations of one thread to one PE through the NIC use one RC
 * queue and execute in order; kn_shmem_fence() orders them, without
 * waiting, against what the thread issues next (to every PE),
 * kn_shmem_quiet() waits for their
 * completion (and that of load/store updates). A put_signal's signal is
 * visible only once its data is.
 *
 * Names: kn_shmem_ / KN_SHMEM_ are the API; knx_ is the implementation.
 */
#ifndef KINET_SHMEM_DEVICE_H
#define KINET_SHMEM_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <kinet/device.h>

/* ---- limits and constants -------------------------------------------------- */

#define KN_SHMEM_MAX_TEAMS 32   /* teams alive at once (world, shared, node included) */
#define KN_SHMEM_MAX_ROUNDS 20  /* dissemination rounds: teams of up to 2^20 PEs */
#define KN_SHMEM_MAX_REGS 16    /* kinet_shmem_buffer_register ranges */
#define KN_SHMEM_RING 1024      /* result slots (fetching atomics, g) per PE */
/* Scratch of the collectives (reduce, reducescatter): per team slot, in
 * the layer's reserved bytes below. A reduction moves through it in chunks
 * of KN_SHMEM_COLL_SCRATCH / (team size) bytes per member, so any count
 * fits; a team whose members cannot each have one element of the type is
 * refused (-ENOSPC). */
#define KN_SHMEM_COLL_SCRATCH 32768u
#define KNX_SHMEM_COLL_OFF 65536u
/* Bytes at the start of the device heap that the layer keeps for itself
 * (barrier counters, result slots, the collectives' scratch): the same on
 * every PE. They are a
 * region of their own (keys rkey_own, lkey_own below, used only by the
 * layer's barriers, fences, result slots and collectives); the heap's rkey and lkey
 * cover the rest of the heap, so a WQE with them aimed at these bytes fails
 * at the target's NIC (remote access error, out of the region's bounds). */
#define KN_SHMEM_RESERVED (KNX_SHMEM_COLL_OFF + KN_SHMEM_MAX_TEAMS * KN_SHMEM_COLL_SCRATCH)

/* The two heaps of a PE. */
enum kn_shmem_heap {
	KN_SHMEM_HEAP_DEVICE = 0, /* GPU memory (CUDA executor) or host memory
				     (host executor): kinet_shmem_malloc */
	KN_SHMEM_HEAP_HOST = 1,   /* host memory, mapped into the GPU:
				     kinet_shmem_malloc_host */
};

/* Comparisons of the wait and test calls (OpenSHMEM's values). */
enum kn_shmem_cmp {
	KN_SHMEM_CMP_EQ = 0,
	KN_SHMEM_CMP_NE = 1,
	KN_SHMEM_CMP_GT = 2,
	KN_SHMEM_CMP_LE = 3,
	KN_SHMEM_CMP_LT = 4,
	KN_SHMEM_CMP_GE = 5,
};

/* How a thread picks its QP to a peer (kn_shmem.qp_map). */
enum kn_shmem_qp_map {
	KN_SHMEM_QP_BY_CTA = 0,  /* (linear CTA index) mod nqp */
	KN_SHMEM_QP_BY_WARP = 1, /* (global warp index) mod nqp */
};

/* ---- the state device code reads (filled by kinet_shmem_init) ----------------- */

/* How this PE reaches one peer. */
typedef struct kn_shmem_peer {
	uint64_t base[2];   /* the peer's heaps, as its NIC addresses them (the
			       device heap's start, reserved bytes included) */
	uint32_t rkey[2];   /* the user parts: [base + KN_SHMEM_RESERVED, end) of
			       the device heap, the whole host heap */
	uint32_t local;     /* 1: load/store through map[] */
	uint32_t rkey_own;  /* the device heap's reserved bytes (the layer's) */
	uint8_t *map[2];    /* the peer's heaps mapped here, or NULL */
	kn_qp *qp;          /* nqp QP descriptors (NULL: self, or load/store) */
} kn_shmem_peer;

/* A team: size PEs, world PE of index i at members[i]. */
typedef struct kn_shmem_team {
	int32_t size;       /* 0: the handle names no team */
	int32_t my;         /* this PE's index in it, -1 when not a member */
	uint32_t slot;      /* its barrier counters */
	uint32_t pad;
	const int32_t *members;
} kn_shmem_team;

/* What device code writes (the host never rewrites it while PEs run). */
typedef struct kn_shmem_dyn {
	uint64_t ring_head;  /* result slots handed out */
	uint64_t ring_tail;  /* result slots given back (in order) */
	uint64_t epoch[KN_SHMEM_MAX_TEAMS]; /* barriers done per team */
	int32_t error;       /* the PE's first error (0: none) */
	int32_t pad;
} kn_shmem_dyn;

typedef struct kn_shmem_reg {
	uint64_t base, len;
	uint32_t lkey, pad;
} kn_shmem_reg;

/* One PE's view of the job. Plain data, in GPU memory for CUDA kernels. */
typedef struct kn_shmem {
	int32_t my_pe, n_pes;
	uint32_t nqp;        /* QPs per remote peer */
	uint32_t qp_map;     /* enum kn_shmem_qp_map */
	uint8_t *heap[2];    /* this PE's heaps, as device code addresses them */
	uint64_t heap_len[2];
	uint32_t lkey[2];    /* the user parts, as kn_shmem_peer.rkey */
	uint32_t nregs;
	uint32_t lkey_own;   /* the device heap's reserved bytes (result slots) */
	uint64_t timeout_ns; /* bound on every wait */
	kn_shmem_peer *peers; /* n_pes entries */
	kn_shmem_dyn *dyn;
	kn_shmem_reg regs[KN_SHMEM_MAX_REGS];
	kn_shmem_team team[KN_SHMEM_MAX_TEAMS];
} kn_shmem;

/* Where the barrier counters and result slots are in the device heap. */
#define KNX_SHMEM_SYNC_OFF 0u
#define KNX_SHMEM_RING_OFF (KN_SHMEM_MAX_TEAMS * KN_SHMEM_MAX_ROUNDS * 8u)

/* ---- where device code finds the state ---------------------------------------- */

#if defined(__CUDACC__)
/* One pointer per translation unit, in its device memory; kinet_shmem_init
 * (or a later kinet_shmem_register_module) sets it through the callback
 * that every CUDA translation unit including this header registers at load
 * (a constructor): no relocatable device code needed. */
#include <cuda_runtime_api.h>
static __device__ const kn_shmem *knx_shmem_dev;
extern "C" int kinet_shmem_register_module(void (*set)(const void *state));
static void knx_shmem_set_state(const void *state)
{
	cudaMemcpyToSymbol(knx_shmem_dev, &state, sizeof(state));
}
__attribute__((constructor)) static void knx_shmem_register(void)
{
	kinet_shmem_register_module(knx_shmem_set_state);
}
#else
#ifdef __cplusplus
extern "C" {
#endif
/* The host executor's state (kinet/shmem.h); NULL before kinet_shmem_init. */
const kn_shmem *kinet_shmem_device_state(void);
/* A small index of the calling host thread (its CTA under
 * kinet_shmem_host_launch, else a number taken on first use). */
int kinet_shmem_host_qp_index(void);
/* Barrier of the calling thread's group under kinet_shmem_host_launch:
 * scope 1 its warp (32 consecutive threads of its block), 2 its block, 3
 * its warpgroup (128 consecutive threads of its block: 4 warps; the last
 * one of a block whose size is not a multiple of 128 has the rest). */
void kinet_shmem_host_group_sync(int scope);
/* The calling thread's rank and the size of its group (scope 1, 2 or 3). */
int kinet_shmem_host_group_rank(int scope);
int kinet_shmem_host_group_size(int scope);
/* Every thread of the group calls: returns the value its first thread
 * passed (a barrier of the group included). */
int kinet_shmem_host_group_bcast(int scope, int value);
#ifdef __cplusplus
}
#endif
#endif

KN_INLINE const kn_shmem *knx_sh(void)
{
#if defined(__CUDA_ARCH__)
	return knx_shmem_dev;
#elif defined(__CUDACC__)
	return (const kn_shmem *)0; /* host code of a CUDA TU: not the device state */
#else
	return kinet_shmem_device_state();
#endif
}

/* Records the PE's first error; returns rc. */
KN_INLINE int knx_sh_err(const kn_shmem *sh, int rc)
{
	if (rc && sh && sh->dyn)
		KN_CAS32((uint32_t *)&sh->dyn->error, 0u, (uint32_t)rc);
	return rc;
}

/* ---- who am I ----------------------------------------------------------------- */

KN_INLINE int kn_shmem_my_pe(void)
{
	const kn_shmem *sh = knx_sh();
	return sh ? sh->my_pe : -1;
}

KN_INLINE int kn_shmem_n_pes(void)
{
	const kn_shmem *sh = knx_sh();
	return sh ? sh->n_pes : -1;
}

/* The PE's first error (0: none). */
KN_INLINE int kn_shmem_error(void)
{
	const kn_shmem *sh = knx_sh();
	return sh ? (int)KN_LOAD32(&sh->dyn->error) : -EINVAL;
}

/* ---- addresses ------------------------------------------------------------------ */

/* The heap holding [p, p+len) and the offset of p in it: 0 or 1, or -1. */
KN_INLINE int knx_sh_heap(const kn_shmem *sh, const void *p, uint64_t len, uint64_t *off)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	*off = 0;
	for (int h = 0; h < 2; h++) {
		uint64_t b = (uint64_t)(uintptr_t)sh->heap[h];
		if (sh->heap_len[h] && a >= b && a - b <= sh->heap_len[h] &&
		    len <= sh->heap_len[h] - (a - b)) {
			*off = a - b;
			return h;
		}
	}
	return -1;
}

/* True when [off, off+len) of heap h touches the layer's own bytes (the
 * first KN_SHMEM_RESERVED of the device heap): no user operation reaches
 * them, on any PE. */
KN_INLINE int knx_sh_reserved(int h, uint64_t off)
{
	return h == KN_SHMEM_HEAP_DEVICE && off < KN_SHMEM_RESERVED;
}

/* The lkey of a local buffer (a heap, or a registered range): 0 with *lkey,
 * or -EINVAL. */
KN_INLINE int knx_sh_lkey(const kn_shmem *sh, const void *p, uint64_t len, uint32_t *lkey)
{
	uint64_t off;
	int h = knx_sh_heap(sh, p, len, &off);
	if (h >= 0) {
		if (knx_sh_reserved(h, off))
			return -EINVAL; /* the layer's: not in the heap's user region */
		*lkey = sh->lkey[h];
		return 0;
	}
	uint64_t a = (uint64_t)(uintptr_t)p;
	for (uint32_t i = 0; i < sh->nregs && i < KN_SHMEM_MAX_REGS; i++) {
		const kn_shmem_reg *r = &sh->regs[i];
		if (a >= r->base && a - r->base <= r->len && len <= r->len - (a - r->base)) {
			*lkey = r->lkey;
			return 0;
		}
	}
	return -EINVAL;
}

/* The peer pe, or NULL for a PE out of range. */
KN_INLINE const kn_shmem_peer *knx_sh_peer(const kn_shmem *sh, int pe)
{
	return pe >= 0 && pe < sh->n_pes ? &sh->peers[pe] : (const kn_shmem_peer *)0;
}

/* Direct pointer to the object at symmetric address dest on PE pe, when it
 * is reachable by load/store from here (this PE, or a same-node peer whose
 * heap is mapped); NULL otherwise (also in the layer's reserved bytes). */
KN_INLINE void *kn_shmem_ptr(const void *dest, int pe)
{
	const kn_shmem *sh = knx_sh();
	uint64_t off;
	if (!sh)
		return (void *)0;
	int h = knx_sh_heap(sh, dest, 0, &off);
	const kn_shmem_peer *p = knx_sh_peer(sh, pe);
	if (h < 0 || !p || knx_sh_reserved(h, off))
		return (void *)0;
	if (pe == sh->my_pe)
		return (void *)dest;
	return p->local && p->map[h] ? (void *)(p->map[h] + off) : (void *)0;
}

/* The calling thread's QP index (by CTA or warp). */
KN_INLINE uint32_t knx_sh_qp_index(const kn_shmem *sh)
{
#if defined(__CUDA_ARCH__)
	uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	if (sh->qp_map == KN_SHMEM_QP_BY_WARP) {
		uint32_t nthr = blockDim.x * blockDim.y * blockDim.z;
		uint32_t tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
		return (cta * ((nthr + 31) / 32) + tid / 32) % sh->nqp;
	}
	return cta % sh->nqp;
#elif defined(__CUDACC__)
	(void)sh; /* host code of a CUDA translation unit: never reached with a state */
	return 0;
#else
	return (uint32_t)kinet_shmem_host_qp_index() % sh->nqp;
#endif
}

/* Where an operation on symmetric [dest, dest+len) at PE pe goes. */
typedef struct knx_sh_route {
	const kn_shmem *sh;
	uint8_t *ptr;      /* load/store: the object, here */
	const kn_qp *qp;   /* NIC: the calling thread's QP to pe */
	uint64_t raddr;    /* NIC: the remote address */
	uint32_t rkey;
} knx_sh_route;

/* 0 with *r filled, or -EINVAL (not symmetric, bad PE, not initialised,
 * or, unless own (the layer's barriers), in the layer's reserved bytes). */
KN_INLINE int knx_sh_route_in(const void *dest, uint64_t len, int pe, int own, knx_sh_route *r)
{
	const kn_shmem *sh = knx_sh();
	uint64_t off;
	r->sh = sh;
	r->ptr = (uint8_t *)0;
	r->qp = (const kn_qp *)0;
	r->raddr = 0;
	r->rkey = 0;
	if (!sh)
		return -EINVAL;
	const kn_shmem_peer *p = knx_sh_peer(sh, pe);
	int h = knx_sh_heap(sh, dest, len, &off);
	if (!p || h < 0 || (!own && knx_sh_reserved(h, off)))
		return knx_sh_err(sh, -EINVAL);
	if (pe == sh->my_pe) {
		r->ptr = (uint8_t *)(uintptr_t)dest;
		return 0;
	}
	if (p->local && p->map[h]) {
		r->ptr = p->map[h] + off;
		return 0;
	}
	if (!p->qp)
		return knx_sh_err(sh, -EINVAL);
	r->qp = &p->qp[knx_sh_qp_index(sh)];
	r->raddr = p->base[h] + off;
	/* the layer's own operations on its bytes: their region's key */
	r->rkey = knx_sh_reserved(h, off) ? p->rkey_own : p->rkey[h];
	return 0;
}

/* The route of a user operation: never into the reserved bytes. */
KN_INLINE int knx_sh_route_of(const void *dest, uint64_t len, int pe, knx_sh_route *r)
{
	return knx_sh_route_in(dest, len, pe, 0, r);
}

/* ---- load/store helpers -------------------------------------------------------- */

KN_INLINE void knx_sh_copy(void *dst, const void *src, uint64_t n)
{
	uint8_t *d = (uint8_t *)dst;
	const uint8_t *s = (const uint8_t *)src;
#if defined(__CUDA_ARCH__)
	if (d == s)
		return;
	if ((((uintptr_t)d ^ (uintptr_t)s) & 15u) == 0) /* same offset: bytes to a boundary */
		for (; n && ((uintptr_t)d & 15u); n--)
			*d++ = *s++;
	if ((((uintptr_t)d | (uintptr_t)s) & 15u) == 0) {
		for (; n >= 16; n -= 16, d += 16, s += 16)
			*(uint4 *)d = *(const uint4 *)s;
	} else if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
		for (; n >= 8; n -= 8, d += 8, s += 8)
			*(uint64_t *)d = *(const uint64_t *)s;
	}
	for (; n; n--)
		*d++ = *s++;
#else
	if (d != s)
		__builtin_memmove(d, s, n);
#endif
}

/* Orders this thread's load/store updates of peers' memory before what it
 * does next, as other PEs (CPU or GPU) see it. */
KN_INLINE void knx_sh_fence_mem(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
#else
	KN_FENCE_SYS();
#endif
}

/* 1 when p cannot hold a word of `size` bytes: a size other than 1, 2, 4
 * or 8, or p not aligned to it (one load or store on a mapped peer's word:
 * a GPU faults on a misaligned one). */
KN_INLINE int knx_sh_word_bad(const volatile void *p, uint32_t size)
{
	return (size != 1 && size != 2 && size != 4 && size != 8) || ((uintptr_t)p & (size - 1u));
}

/* Loads of a local word, fresh every time (another PE or the NIC writes it). */
KN_INLINE uint64_t knx_sh_load(const volatile void *p, uint32_t size)
{
	switch (size) {
	case 1:
		return *(const volatile uint8_t *)p;
	case 2:
		return *(const volatile uint16_t *)p;
	case 4:
#if defined(__CUDA_ARCH__)
		return *(const volatile uint32_t *)p;
#else
		return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
#endif
	default:
#if defined(__CUDA_ARCH__)
		return *(const volatile uint64_t *)p;
#else
		return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
#endif
	}
}

/* An atomic of this processor on a word it can address (its own heap, or a
 * peer's through the mapping): returns the old value. amo: enum kn_amo. */
KN_INLINE uint64_t knx_sh_amo_ls(void *p, int amo, uint32_t size, uint64_t v, uint64_t cmp)
{
#if defined(__CUDA_ARCH__)
	if (size == 4) {
		unsigned int *w = (unsigned int *)p, x = (unsigned int)v;
		switch (amo) {
		case KN_AMO_FETCH_ADD:
			return atomicAdd_system(w, x);
		case KN_AMO_COMPARE_SWAP:
			return atomicCAS_system(w, (unsigned int)cmp, x);
		case KN_AMO_SWAP:
			return atomicExch_system(w, x);
		case KN_AMO_FETCH:
			return atomicOr_system(w, 0u);
		case KN_AMO_FETCH_AND:
			return atomicAnd_system(w, x);
		case KN_AMO_FETCH_OR:
			return atomicOr_system(w, x);
		default:
			return atomicXor_system(w, x);
		}
	}
	unsigned long long *w = (unsigned long long *)p, x = v;
	switch (amo) {
	case KN_AMO_FETCH_ADD:
		return atomicAdd_system(w, x);
	case KN_AMO_COMPARE_SWAP:
		return atomicCAS_system(w, (unsigned long long)cmp, x);
	case KN_AMO_SWAP:
		return atomicExch_system(w, x);
	case KN_AMO_FETCH:
		return atomicOr_system(w, 0ull);
	case KN_AMO_FETCH_AND:
		return atomicAnd_system(w, x);
	case KN_AMO_FETCH_OR:
		return atomicOr_system(w, x);
	default:
		return atomicXor_system(w, x);
	}
#else
	if (size == 4) {
		uint32_t *w = (uint32_t *)p, x = (uint32_t)v, c = (uint32_t)cmp;
		switch (amo) {
		case KN_AMO_FETCH_ADD:
			return __atomic_fetch_add(w, x, __ATOMIC_SEQ_CST);
		case KN_AMO_COMPARE_SWAP:
			__atomic_compare_exchange_n(w, &c, x, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			return c;
		case KN_AMO_SWAP:
			return __atomic_exchange_n(w, x, __ATOMIC_SEQ_CST);
		case KN_AMO_FETCH:
			return __atomic_load_n(w, __ATOMIC_SEQ_CST);
		case KN_AMO_FETCH_AND:
			return __atomic_fetch_and(w, x, __ATOMIC_SEQ_CST);
		case KN_AMO_FETCH_OR:
			return __atomic_fetch_or(w, x, __ATOMIC_SEQ_CST);
		default:
			return __atomic_fetch_xor(w, x, __ATOMIC_SEQ_CST);
		}
	}
	uint64_t *w = (uint64_t *)p;
	switch (amo) {
	case KN_AMO_FETCH_ADD:
		return __atomic_fetch_add(w, v, __ATOMIC_SEQ_CST);
	case KN_AMO_COMPARE_SWAP:
		__atomic_compare_exchange_n(w, &cmp, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		return cmp;
	case KN_AMO_SWAP:
		return __atomic_exchange_n(w, v, __ATOMIC_SEQ_CST);
	case KN_AMO_FETCH:
		return __atomic_load_n(w, __ATOMIC_SEQ_CST);
	case KN_AMO_FETCH_AND:
		return __atomic_fetch_and(w, v, __ATOMIC_SEQ_CST);
	case KN_AMO_FETCH_OR:
		return __atomic_fetch_or(w, v, __ATOMIC_SEQ_CST);
	default:
		return __atomic_fetch_xor(w, v, __ATOMIC_SEQ_CST);
	}
#endif
}

/* ---- result slots (fetching atomics, g) ------------------------------------------ */

/* Takes a slot of the PE's result ring (waiting while all are in use): 0
 * with *slot and *idx, or -ETIMEDOUT. Slots are given back in the order
 * they were taken (knx_sh_slot_put), so none is reused while its result may
 * still be read. */
KN_INLINE int knx_sh_slot_get(const kn_shmem *sh, uint64_t **slot, uint64_t *idx)
{
	kn_shmem_dyn *d = sh->dyn;
	uint64_t i = KN_FADD64(&d->ring_head, 1);
	uint64_t t0 = 0;
	unsigned spins = 0;
	while (i - KN_LOAD64(&d->ring_tail) >= KN_SHMEM_RING) {
		if ((++spins & 255u) == 0) {
			uint64_t now = kn_now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 > sh->timeout_ns)
				return -ETIMEDOUT; /* the slot stays taken: later ones wait */
		}
		KN_PAUSE();
	}
	*idx = i;
	*slot = (uint64_t *)(sh->heap[KN_SHMEM_HEAP_DEVICE] + KNX_SHMEM_RING_OFF) + (i % KN_SHMEM_RING);
	return 0;
}

KN_INLINE void knx_sh_slot_put(const kn_shmem *sh, uint64_t idx)
{
	kn_shmem_dyn *d = sh->dyn;
	uint64_t t0 = kn_now_ns();
	while (KN_LOAD64(&d->ring_tail) != idx) {
		if (kn_now_ns() - t0 > 4 * sh->timeout_ns)
			break; /* an earlier slot was abandoned: pass it */
		KN_PAUSE();
	}
	KN_CAS64(&d->ring_tail, idx, idx + 1);
}

/* ---- put and get ---------------------------------------------------------------- */

/* One WQE carries at most this much (the software NIC's largest message). */
#define KNX_SHMEM_CHUNK (1u << 30)

/* Posts the writes of [src, src+n) to r, the last one a put_signal when
 * sig_raddr != 0. *last gets the ticket to wait for. */
KN_INLINE int knx_sh_put_nic(const knx_sh_route *r, const void *src, uint64_t n,
			     uint64_t sig_raddr, uint32_t sig_rkey, uint64_t signal, int sig_op,
			     kn_ticket_t *last)
{
	uint32_t lkey = 0;
	int inl = n <= KN_MAX_INLINE_WRITE && n <= r->qp->max_inline && !sig_raddr;
	if (!inl && knx_sh_lkey(r->sh, src, n, &lkey))
		return -EINVAL;
	if (inl)
		return kn_put_inline(r->qp, r->raddr, r->rkey, src, (uint32_t)n, last);
	uint64_t done = 0;
	do {
		uint64_t c = n - done > KNX_SHMEM_CHUNK ? KNX_SHMEM_CHUNK : n - done;
		kn_op op;
		if (sig_raddr && done + c == n)
			kn_op_put_signal_op(&op, r->raddr + done, r->rkey, (const uint8_t *)src + done,
					    lkey, (uint32_t)c, sig_raddr, sig_rkey, signal, sig_op);
		else
			kn_op_put(&op, r->raddr + done, r->rkey, (const uint8_t *)src + done, lkey,
				  (uint32_t)c);
		int rc = kn_post(r->qp, &op, last);
		if (rc)
			return rc;
		done += c;
	} while (done < n);
	return 0;
}

/* Non-blocking put of n bytes from local src to symmetric dest on PE pe:
 * returns once it is posted (load/store: done); complete at kn_shmem_quiet.
 * src must not change until then (NIC). */
KN_INLINE int kn_shmem_put_nbi(void *dest, const void *src, size_t n, int pe)
{
	knx_sh_route r;
	int rc = knx_sh_route_of(dest, n, pe, &r);
	if (rc || n == 0)
		return rc;
	if (r.ptr) {
		knx_sh_copy(r.ptr, src, n);
		return 0;
	}
	kn_ticket_t t;
	return knx_sh_err(r.sh, knx_sh_put_nic(&r, src, n, 0, 0, 0, 0, &t));
}

/* Blocking put: returns once src may be reused (the NIC's completion of the
 * write; load/store: the copy done). Visible at the target at the latest
 * after kn_shmem_quiet. */
KN_INLINE int kn_shmem_put(void *dest, const void *src, size_t n, int pe)
{
	knx_sh_route r;
	int rc = knx_sh_route_of(dest, n, pe, &r);
	if (rc || n == 0)
		return rc;
	if (r.ptr) {
		knx_sh_copy(r.ptr, src, n);
		return 0;
	}
	kn_ticket_t t;
	rc = knx_sh_put_nic(&r, src, n, 0, 0, 0, 0, &t);
	if (!rc)
		rc = kn_wait(r.qp, t);
	return knx_sh_err(r.sh, rc);
}

/* Non-blocking get of n bytes from symmetric src on PE pe into local dest
 * (a heap or a registered buffer when it goes through the NIC): dest holds
 * them after kn_shmem_quiet. */
KN_INLINE int kn_shmem_get_nbi(void *dest, const void *src, size_t n, int pe)
{
	knx_sh_route r;
	int rc = knx_sh_route_of(src, n, pe, &r);
	if (rc || n == 0)
		return rc;
	if (r.ptr) {
		knx_sh_copy(dest, r.ptr, n);
		return 0;
	}
	uint32_t lkey;
	if (knx_sh_lkey(r.sh, dest, n, &lkey))
		return knx_sh_err(r.sh, -EINVAL);
	uint64_t done = 0;
	kn_ticket_t t;
	do {
		uint64_t c = n - done > KNX_SHMEM_CHUNK ? KNX_SHMEM_CHUNK : n - done;
		rc = kn_get(r.qp, (uint8_t *)dest + done, lkey, r.raddr + done, r.rkey, (uint32_t)c,
			    &t);
		if (rc)
			return knx_sh_err(r.sh, rc);
		done += c;
	} while (done < n);
	return 0;
}

/* Blocking get: dest holds the bytes when it returns. */
KN_INLINE int kn_shmem_get(void *dest, const void *src, size_t n, int pe)
{
	knx_sh_route r;
	int rc = knx_sh_route_of(src, n, pe, &r);
	if (rc || n == 0)
		return rc;
	if (r.ptr) {
		knx_sh_copy(dest, r.ptr, n);
		return 0;
	}
	uint32_t lkey;
	if (knx_sh_lkey(r.sh, dest, n, &lkey))
		return knx_sh_err(r.sh, -EINVAL);
	uint64_t done = 0;
	kn_ticket_t t = 0;
	do {
		uint64_t c = n - done > KNX_SHMEM_CHUNK ? KNX_SHMEM_CHUNK : n - done;
		rc = kn_get(r.qp, (uint8_t *)dest + done, lkey, r.raddr + done, r.rkey, (uint32_t)c,
			    &t);
		if (rc)
			return knx_sh_err(r.sh, rc);
		done += c;
	} while (done < n);
	rc = kn_wait(r.qp, t);
	if (!rc)
		KN_FENCE_ACQ();
	return knx_sh_err(r.sh, rc);
}

/* p: stores the `size` (1, 2, 4 or 8) low bytes of value at symmetric dest
 * on PE pe (a put of a value, non-blocking: the value is in the WQE). dest
 * is aligned to size (a typed word, as NVSHMEM's p): -EINVAL otherwise, on
 * every path (a mapped peer's word is one store). */
KN_INLINE int kn_shmem_p(void *dest, uint64_t value, uint32_t size, int pe)
{
	knx_sh_route r;
	if (knx_sh_word_bad(dest, size))
		return knx_sh_err(knx_sh(), -EINVAL);
	int rc = knx_sh_route_of(dest, size, pe, &r);
	if (rc)
		return rc;
	uint8_t b[8];
	for (uint32_t i = 0; i < 8; i++)
		b[i] = (uint8_t)(value >> (8 * i)); /* little-endian, as the word in memory */
	if (r.ptr) {
		switch (size) {
		case 1:
			*(volatile uint8_t *)r.ptr = (uint8_t)value;
			break;
		case 2:
			*(volatile uint16_t *)r.ptr = (uint16_t)value;
			break;
		case 4:
			*(volatile uint32_t *)r.ptr = (uint32_t)value;
			break;
		default:
			*(volatile uint64_t *)r.ptr = value;
			break;
		}
		return 0;
	}
	return knx_sh_err(r.sh, kn_put_inline(r.qp, r.raddr, r.rkey, b, size, (kn_ticket_t *)0));
}

/* g: the `size` bytes at symmetric src on PE pe, into *out (zero-extended);
 * src aligned to size, as for p. */
KN_INLINE int kn_shmem_g(const void *src, uint32_t size, int pe, uint64_t *out)
{
	knx_sh_route r;
	if (knx_sh_word_bad(src, size))
		return knx_sh_err(knx_sh(), -EINVAL);
	int rc = knx_sh_route_of(src, size, pe, &r);
	if (rc)
		return rc;
	if (r.ptr) {
		*out = knx_sh_load(r.ptr, size);
		return 0;
	}
	uint64_t *slot, idx;
	rc = knx_sh_slot_get(r.sh, &slot, &idx);
	if (rc)
		return knx_sh_err(r.sh, rc);
	kn_ticket_t t;
	rc = kn_get(r.qp, slot, r.sh->lkey_own, r.raddr, r.rkey, size, &t);
	if (!rc)
		rc = kn_wait(r.qp, t);
	if (!rc) {
		KN_FENCE_ACQ();
		*out = knx_sh_load(slot, size);
	}
	knx_sh_slot_put(r.sh, idx);
	return knx_sh_err(r.sh, rc);
}

/* ---- strided put and get (iput, iget) ------------------------------------------------ */

/* The bytes a strided array of n elements of es bytes, stride st elements,
 * spans from its first element: *lo (<= 0, a negative stride runs
 * downwards) and *len. -EINVAL: es not 1, 2, 4, 8 or 16, or a span that
 * overflows. */
KN_INLINE int knx_sh_span(ptrdiff_t st, size_t n, uint32_t es, int64_t *lo, uint64_t *len)
{
	*lo = 0;
	*len = 0;
	if (es != 1 && es != 2 && es != 4 && es != 8 && es != 16)
		return -EINVAL;
	if (n == 0)
		return 0;
	uint64_t a = st < 0 ? (uint64_t)0 - (uint64_t)st : (uint64_t)st;
	if (n > 1 && a > ((UINT64_C(1) << 62) / es) / (uint64_t)(n - 1))
		return -EINVAL;
	uint64_t ext = a * (uint64_t)(n - 1) * es;
	*lo = st < 0 ? -(int64_t)ext : 0;
	*len = ext + es;
	return 0;
}

/* Element i's byte offset from the array's first element. */
KN_INLINE int64_t knx_sh_elem(ptrdiff_t st, size_t i, uint32_t es)
{
	return (int64_t)st * (int64_t)i * (int64_t)es;
}

/* The checks of a strided put (get: 1, a strided get) and the route of its
 * remote span: 0 with *r (and the spans' lowest offsets), or -EINVAL
 * (kept as the PE's error). */
KN_INLINE int knx_sh_istride_route(int get, const void *dest, const void *src, ptrdiff_t dst,
				   ptrdiff_t sst, size_t n, uint32_t es, int pe, int64_t *dlo,
				   int64_t *slo, knx_sh_route *r)
{
	uint64_t dlen, slen;
	r->ptr = (uint8_t *)0;
	r->qp = (const kn_qp *)0;
	if (knx_sh_span(dst, n, es, dlo, &dlen) || knx_sh_span(sst, n, es, slo, &slen))
		return knx_sh_err(knx_sh(), -EINVAL);
	return get ? knx_sh_route_of((const uint8_t *)src + *slo, slen, pe, r)
		   : knx_sh_route_of((const uint8_t *)dest + *dlo, dlen, pe, r);
}

/* The element copies of a strided put (get 0: local src's elements to p)
 * or get (get 1: p's elements to local dest) with a peer load/store
 * reaches, p its span's lowest byte (dlo, slo: the spans' lowest offsets,
 * as knx_sh_istride_route gives them): elements first, first + step, ...
 * below n, in that order. One thread makes them all (first 0, step 1); a
 * group's thread k of g makes its share (first k, step g). */
KN_INLINE void knx_sh_istride_copy(int get, void *dest, const void *src, uint8_t *p,
				   ptrdiff_t dst, ptrdiff_t sst, int64_t dlo, int64_t slo,
				   uint32_t es, size_t first, size_t step, size_t n)
{
	for (size_t i = first; i < n; i += step) {
		if (get)
			knx_sh_copy((uint8_t *)dest + knx_sh_elem(dst, i, es),
				    p + (knx_sh_elem(sst, i, es) - slo), es);
		else
			knx_sh_copy(p + (knx_sh_elem(dst, i, es) - dlo),
				    (const uint8_t *)src + knx_sh_elem(sst, i, es), es);
	}
}

/* Strided put (OpenSHMEM's iput): element i (es bytes: 1, 2, 4, 8 or 16) of
 * local src at src + i*sst*es goes to symmetric dest + i*dst*es on PE pe,
 * for i in [0, nelems). Strides count elements and may be 0 or negative
 * (the elements are written in order i = 0, 1, ...). Blocking as
 * kn_shmem_put: src may be reused when it returns. Through the NIC each
 * element is an inline write (its bytes travel in the WQE). -EINVAL: a bad
 * element size, a span that overflows, or a dest span outside a heap (or
 * in the reserved bytes): nothing is written. */
KN_INLINE int kn_shmem_iput(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			    size_t nelems, uint32_t es, int pe)
{
	int64_t dlo, slo;
	knx_sh_route r;
	int rc = knx_sh_istride_route(0, dest, src, dst, sst, nelems, es, pe, &dlo, &slo, &r);
	if (rc || nelems == 0)
		return rc;
	const uint8_t *s = (const uint8_t *)src;
	if (r.ptr) {
		knx_sh_istride_copy(0, dest, src, r.ptr, dst, sst, dlo, slo, es, 0, 1, nelems);
		return 0;
	}
	kn_ticket_t t = 0;
	knx_sh_route e = r;
	for (size_t i = 0; i < nelems && !rc; i++) {
		e.raddr = r.raddr + (uint64_t)(knx_sh_elem(dst, i, es) - dlo);
		rc = knx_sh_put_nic(&e, s + knx_sh_elem(sst, i, es), es, 0, 0, 0, 0, &t);
	}
	if (!rc)
		rc = kn_wait(r.qp, t);
	return knx_sh_err(r.sh, rc);
}

/* Strided get (iget): element i of symmetric src + i*sst*es on PE pe goes
 * to local dest + i*dst*es (a heap or a registered buffer when it goes
 * through the NIC: one read per element). dest holds them when it returns.
 * Errors as kn_shmem_iput. */
KN_INLINE int kn_shmem_iget(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			    size_t nelems, uint32_t es, int pe)
{
	int64_t dlo, slo;
	uint64_t dlen;
	knx_sh_route r;
	int rc = knx_sh_istride_route(1, dest, src, dst, sst, nelems, es, pe, &dlo, &slo, &r);
	if (rc || nelems == 0)
		return rc;
	dlen = (uint64_t)(knx_sh_elem(dst, nelems - 1, es) < 0 ? -knx_sh_elem(dst, nelems - 1, es)
							       : knx_sh_elem(dst, nelems - 1, es)) + es;
	uint8_t *d = (uint8_t *)dest;
	if (r.ptr) {
		knx_sh_istride_copy(1, dest, src, r.ptr, dst, sst, dlo, slo, es, 0, 1, nelems);
		return 0;
	}
	uint32_t lkey;
	if (knx_sh_lkey(r.sh, d + dlo, dlen, &lkey))
		return knx_sh_err(r.sh, -EINVAL);
	kn_ticket_t t = 0;
	for (size_t i = 0; i < nelems && !rc; i++)
		rc = kn_get(r.qp, d + knx_sh_elem(dst, i, es), lkey,
			    r.raddr + (uint64_t)(knx_sh_elem(sst, i, es) - slo), r.rkey, es, &t);
	if (!rc)
		rc = kn_wait(r.qp, t);
	if (!rc)
		KN_FENCE_ACQ();
	return knx_sh_err(r.sh, rc);
}

/* ---- signals ---------------------------------------------------------------------- */

/* put_signal, non-blocking: the put, then sig_op (KN_SIG_SET or KN_SIG_ADD)
 * with `signal` on the 64-bit symmetric word sig_addr at PE pe, visible
 * only once the data is. */
KN_INLINE int kn_shmem_put_signal_nbi(void *dest, const void *src, size_t n, uint64_t *sig_addr,
				      uint64_t signal, int sig_op, int pe)
{
	knx_sh_route r, s;
	if (sig_op != KN_SIG_SET && sig_op != KN_SIG_ADD)
		return knx_sh_err(knx_sh(), -EINVAL);
	int rc = knx_sh_route_of(dest, n, pe, &r);
	if (!rc)
		rc = knx_sh_route_of(sig_addr, 8, pe, &s);
	if (rc)
		return rc;
	if (((uintptr_t)sig_addr & 7u) || (!r.ptr) != (!s.ptr))
		return knx_sh_err(r.sh, -EINVAL);
	if (r.ptr) {
		knx_sh_copy(r.ptr, src, n);
		knx_sh_fence_mem();
		knx_sh_amo_ls(s.ptr, sig_op == KN_SIG_SET ? KN_AMO_SWAP : KN_AMO_FETCH_ADD, 8, signal,
			      0);
		return 0;
	}
	kn_ticket_t t;
	if (n == 0)
		return knx_sh_err(r.sh, kn_signal_op(s.qp, s.raddr, s.rkey, signal, sig_op, &t));
	return knx_sh_err(r.sh, knx_sh_put_nic(&r, src, n, s.raddr, s.rkey, signal, sig_op, &t));
}

/* put_signal, blocking: returns once src may be reused. */
KN_INLINE int kn_shmem_put_signal(void *dest, const void *src, size_t n, uint64_t *sig_addr,
				  uint64_t signal, int sig_op, int pe)
{
	knx_sh_route r;
	int rc = kn_shmem_put_signal_nbi(dest, src, n, sig_addr, signal, sig_op, pe);
	if (rc || knx_sh_route_of(dest, n, pe, &r) || r.ptr)
		return rc;
	return knx_sh_err(r.sh, kn_quiet(r.qp));
}

/* signal_op; own: the layer's own word (a barrier counter). */
KN_INLINE int knx_sh_signal_op_in(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe,
				  int own)
{
	knx_sh_route s;
	if (sig_op != KN_SIG_SET && sig_op != KN_SIG_ADD)
		return knx_sh_err(knx_sh(), -EINVAL);
	int rc = knx_sh_route_in(sig_addr, 8, pe, own, &s);
	if (rc)
		return rc;
	if ((uintptr_t)sig_addr & 7u)
		return knx_sh_err(s.sh, -EINVAL);
	if (s.ptr) {
		knx_sh_amo_ls(s.ptr, sig_op == KN_SIG_SET ? KN_AMO_SWAP : KN_AMO_FETCH_ADD, 8, signal,
			      0);
		return 0;
	}
	return knx_sh_err(s.sh, kn_signal_op(s.qp, s.raddr, s.rkey, signal, sig_op,
					     (kn_ticket_t *)0));
}

/* sig_op with `signal` on the 64-bit symmetric word sig_addr at PE pe
 * (non-blocking). */
KN_INLINE int kn_shmem_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	return knx_sh_signal_op_in(sig_addr, signal, sig_op, pe, 0);
}

/* The local signal word's value (an atomic read). */
KN_INLINE uint64_t kn_shmem_signal_fetch(const uint64_t *sig_addr)
{
	uint64_t v = knx_sh_load(sig_addr, 8);
	KN_FENCE_ACQ();
	return v;
}

/* ---- point-to-point synchronisation -------------------------------------------- */

/* a cmp b, as signed (sgn) or unsigned values of `size` bytes; -1 for an
 * unknown comparison. */
KN_INLINE int knx_sh_cmp(int cmp, uint64_t a, uint64_t b, uint32_t size, int sgn)
{
	int64_t sa = 0, sb = 0;
	if (sgn) {
		uint32_t sh = 64u - 8u * size;
		sa = (int64_t)(a << sh) >> sh;
		sb = (int64_t)(b << sh) >> sh;
	}
	switch (cmp) {
	case KN_SHMEM_CMP_EQ:
		return a == b;
	case KN_SHMEM_CMP_NE:
		return a != b;
	case KN_SHMEM_CMP_GT:
		return sgn ? sa > sb : a > b;
	case KN_SHMEM_CMP_GE:
		return sgn ? sa >= sb : a >= b;
	case KN_SHMEM_CMP_LT:
		return sgn ? sa < sb : a < b;
	case KN_SHMEM_CMP_LE:
		return sgn ? sa <= sb : a <= b;
	default:
		return -1;
	}
}

KN_INLINE uint64_t knx_sh_trunc(uint64_t v, uint32_t size)
{
	return size == 8 ? v : v & ((1ull << (8 * size)) - 1);
}

/* 1 when the local symmetric variable ivar (`size` bytes: 1, 2, 4, 8;
 * signed when sgn; aligned to its size) compares true against value, 0 when
 * not; -EINVAL for a bad comparison, size or alignment. */
KN_INLINE int kn_shmem_test(const void *ivar, int cmp, uint64_t value, uint32_t size, int sgn)
{
	if (knx_sh_word_bad(ivar, size))
		return knx_sh_err(knx_sh(), -EINVAL);
	int c = knx_sh_cmp(cmp, knx_sh_load(ivar, size), knx_sh_trunc(value, size), size, sgn);
	if (c < 0)
		return knx_sh_err(knx_sh(), -EINVAL);
	if (c)
		KN_FENCE_ACQ(); /* what was written before the value is visible */
	return c;
}

/* Waits until kn_shmem_test(ivar, ...) is true: 0, -ETIMEDOUT, -EINVAL. */
KN_INLINE int kn_shmem_wait_until(const void *ivar, int cmp, uint64_t value, uint32_t size, int sgn)
{
	uint64_t t0 = 0;
	unsigned spins = 0;
	for (;;) {
		int c = kn_shmem_test(ivar, cmp, value, size, sgn);
		if (c)
			return c < 0 ? c : 0;
		if ((++spins & 255u) == 0) {
			uint64_t now = kn_now_ns();
			const kn_shmem *sh = knx_sh();
			if (!t0)
				t0 = now;
			else if (sh && now - t0 > sh->timeout_ns)
				return knx_sh_err(sh, -ETIMEDOUT);
		}
		KN_PAUSE();
	}
}

/* The _all/_any/_some forms over nelems variables ivars[0..nelems) of
 * `size` bytes each; status (may be NULL): nonzero entries are excluded.
 * values: one value for all (vector 0) or one per variable (vector 1). */

/* 1 when every included variable compares true (or none is included). */
KN_INLINE int kn_shmem_test_all(const void *ivars, size_t nelems, const int *status, int cmp,
				const uint64_t *values, int vector, uint32_t size, int sgn)
{
	for (size_t i = 0; i < nelems; i++) {
		if (status && status[i])
			continue;
		int c = kn_shmem_test((const uint8_t *)ivars + i * size, cmp, values[vector ? i : 0],
				      size, sgn);
		if (c <= 0)
			return c;
	}
	return 1;
}

/* The index of an included variable that compares true, or SIZE_MAX when
 * none does (or none is included); *err gets -EINVAL for bad arguments. */
KN_INLINE size_t kn_shmem_test_any(const void *ivars, size_t nelems, const int *status, int cmp,
				   const uint64_t *values, int vector, uint32_t size, int sgn,
				   int *err)
{
	*err = 0;
	for (size_t i = 0; i < nelems; i++) {
		if (status && status[i])
			continue;
		int c = kn_shmem_test((const uint8_t *)ivars + i * size, cmp, values[vector ? i : 0],
				      size, sgn);
		if (c < 0) {
			*err = c;
			return SIZE_MAX;
		}
		if (c)
			return i;
	}
	return SIZE_MAX;
}

/* The indices of every included variable that compares true, into indices
 * (capacity nelems); returns how many (0: none). */
KN_INLINE size_t kn_shmem_test_some(const void *ivars, size_t nelems, size_t *indices,
				    const int *status, int cmp, const uint64_t *values, int vector,
				    uint32_t size, int sgn, int *err)
{
	size_t n = 0;
	*err = 0;
	for (size_t i = 0; i < nelems; i++) {
		if (status && status[i])
			continue;
		int c = kn_shmem_test((const uint8_t *)ivars + i * size, cmp, values[vector ? i : 0],
				      size, sgn);
		if (c < 0) {
			*err = c;
			return 0;
		}
		if (c)
			indices[n++] = i;
	}
	return n;
}

/* Waits for every included variable (0, -ETIMEDOUT, -EINVAL). */
KN_INLINE int kn_shmem_wait_until_all(const void *ivars, size_t nelems, const int *status, int cmp,
				      const uint64_t *values, int vector, uint32_t size, int sgn)
{
	uint64_t t0 = kn_now_ns();
	for (;;) {
		int c = kn_shmem_test_all(ivars, nelems, status, cmp, values, vector, size, sgn);
		if (c)
			return c < 0 ? c : 0;
		const kn_shmem *sh = knx_sh();
		if (sh && kn_now_ns() - t0 > sh->timeout_ns)
			return knx_sh_err(sh, -ETIMEDOUT);
		KN_PAUSE();
	}
}

/* Waits for one included variable: its index into *index; 0, -ETIMEDOUT,
 * -EINVAL; with no variable included, 0 and *index = SIZE_MAX at once. */
KN_INLINE int kn_shmem_wait_until_any(const void *ivars, size_t nelems, const int *status, int cmp,
				      const uint64_t *values, int vector, uint32_t size, int sgn,
				      size_t *index)
{
	uint64_t t0 = kn_now_ns();
	size_t incl = 0;
	for (size_t i = 0; i < nelems; i++)
		incl += !(status && status[i]);
	*index = SIZE_MAX;
	if (!incl)
		return 0;
	for (;;) {
		int err;
		size_t i = kn_shmem_test_any(ivars, nelems, status, cmp, values, vector, size, sgn,
					     &err);
		if (err)
			return knx_sh_err(knx_sh(), err);
		if (i != SIZE_MAX) {
			*index = i;
			return 0;
		}
		const kn_shmem *sh = knx_sh();
		if (sh && kn_now_ns() - t0 > sh->timeout_ns)
			return knx_sh_err(sh, -ETIMEDOUT);
		KN_PAUSE();
	}
}

/* Waits for at least one included variable; the indices of all that
 * compare true go to indices, their number to *count. 0, -ETIMEDOUT,
 * -EINVAL; none included: 0 and *count 0 at once. */
KN_INLINE int kn_shmem_wait_until_some(const void *ivars, size_t nelems, size_t *indices,
				       const int *status, int cmp, const uint64_t *values,
				       int vector, uint32_t size, int sgn, size_t *count)
{
	uint64_t t0 = kn_now_ns();
	size_t incl = 0;
	for (size_t i = 0; i < nelems; i++)
		incl += !(status && status[i]);
	*count = 0;
	if (!incl)
		return 0;
	for (;;) {
		int err;
		size_t n = kn_shmem_test_some(ivars, nelems, indices, status, cmp, values, vector,
					      size, sgn, &err);
		if (err)
			return knx_sh_err(knx_sh(), err);
		if (n) {
			*count = n;
			return 0;
		}
		const kn_shmem *sh = knx_sh();
		if (sh && kn_now_ns() - t0 > sh->timeout_ns)
			return knx_sh_err(sh, -ETIMEDOUT);
		KN_PAUSE();
	}
}

/* Waits until the local 64-bit signal word compares true against value;
 * *out (may be NULL) gets the value that satisfied it. 0, -ETIMEDOUT. */
KN_INLINE int kn_shmem_signal_wait_until(const uint64_t *sig_addr, int cmp, uint64_t value,
					 uint64_t *out)
{
	int rc = kn_shmem_wait_until(sig_addr, cmp, value, 8, 0);
	if (out)
		*out = knx_sh_load(sig_addr, 8);
	return rc;
}

/* ---- ordering and completion -------------------------------------------------------- */

/* Waits for every operation this thread's QPs carry (the NIC's completion)
 * and orders its load/store updates: they are complete and visible at
 * their targets when it returns. 0, or the first error. */
KN_INLINE int kn_shmem_quiet(void)
{
	const kn_shmem *sh = knx_sh();
	if (!sh)
		return -EINVAL;
	int rc = 0;
	uint32_t q = knx_sh_qp_index(sh);
	for (int pe = 0; pe < sh->n_pes; pe++) {
		const kn_shmem_peer *p = &sh->peers[pe];
		if (p->qp) {
			int r = kn_quiet(&p->qp[q]);
			if (r && !rc)
				rc = r;
		}
	}
	knx_sh_fence_mem();
	return knx_sh_err(sh, rc);
}

/* Orders this thread's puts, signals and atomics to each PE: those issued
 * before are delivered before those issued after; it waits for nothing.
 * Through the NIC, on the thread's queue to every peer with work still
 * outstanding, it posts an empty RDMA write with the fence bit
 * (KN_WQE_CTRL_FENCE): a ConnectX holds it, and the queue behind it, until
 * the WQEs before it have completed; the software NIC's wire executes it,
 * and what follows it, only once the writes before it have landed (its
 * rendezvous writes are read in parallel and could otherwise overtake each
 * other). Load/store updates get a system-scope fence. 0, or the error of
 * a post (a full queue past the timeout). */
KN_INLINE int kn_shmem_fence(void)
{
	const kn_shmem *sh = knx_sh();
	if (!sh)
		return -EINVAL;
	int rc = 0;
	uint32_t q = knx_sh_qp_index(sh);
	for (int pe = 0; pe < sh->n_pes; pe++) {
		const kn_shmem_peer *p = &sh->peers[pe];
		if (!p->qp)
			continue;
		const kn_qp *qp = &p->qp[q];
		if (KN_LOAD64(&qp->st->done) >= KN_LOAD64(&qp->st->resv))
			continue; /* nothing in flight to order behind */
		kn_ticket_t t;
		int r = kn_sq_reserve(qp, 1, &t);
		if (r) {
			rc = rc ? rc : r;
			continue;
		}
		void *w = kn_wqe_ptr(qp, t);
		knx_build_rw(qp, w, t, KN_OPCODE_RDMA_WRITE, 0, 0, p->base[KN_SHMEM_HEAP_DEVICE],
			     p->rkey_own, 0, 0);
		((struct kn_wqe_ctrl_seg *)w)->fm_ce_se |= KN_WQE_CTRL_FENCE;
		kn_sq_submit(qp, t, 1);
	}
	knx_sh_fence_mem();
	return knx_sh_err(sh, rc);
}

/* ---- atomics -------------------------------------------------------------------------- */

/* amo (enum kn_amo) with value (and compare) on the `size`-byte (4 or 8)
 * symmetric word dest at PE pe; *old (may be NULL) gets the old value. A
 * fetching call (old != NULL) waits for the result; otherwise it returns
 * once posted (complete at quiet). Atomic with respect to the other atomics
 * on the word that come the same way (the NIC's, or load/store ones); the
 * software NIC's atomics on host memory are CPU atomics, so there the two
 * ways mix too. */
KN_INLINE int kn_shmem_atomic(void *dest, int amo, uint32_t size, uint64_t value, uint64_t compare,
			      int pe, uint64_t *old)
{
	knx_sh_route r;
	if ((size != 4 && size != 8) || amo < KN_AMO_FETCH_ADD || amo > KN_AMO_FETCH_XOR)
		return knx_sh_err(knx_sh(), -EINVAL);
	int rc = knx_sh_route_of(dest, size, pe, &r);
	if (rc)
		return rc;
	if ((uintptr_t)dest & (size - 1))
		return knx_sh_err(r.sh, -EINVAL);
	if (r.ptr) {
		uint64_t o = knx_sh_amo_ls(r.ptr, amo, size, value, compare);
		if (old)
			*old = size == 4 ? (uint32_t)o : o;
		return 0;
	}
	if (!old) {
		kn_op op;
		kn_op_amo(&op, amo, size, r.raddr, r.rkey, value, compare,
			  (void *)(uintptr_t)r.qp->scratch_addr, r.qp->scratch_lkey);
		return knx_sh_err(r.sh, kn_post(r.qp, &op, (kn_ticket_t *)0));
	}
	uint64_t *slot, idx;
	rc = knx_sh_slot_get(r.sh, &slot, &idx);
	if (rc)
		return knx_sh_err(r.sh, rc);
	rc = kn_atomic(r.qp, amo, size, r.raddr, r.rkey, value, compare, slot, r.sh->lkey_own,
		       old);
	knx_sh_slot_put(r.sh, idx);
	return knx_sh_err(r.sh, rc);
}

/* ---- barriers ------------------------------------------------------------------------ */

/* The barrier counter (round k of team slot s) in a device heap. */
KN_INLINE uint64_t knx_sh_sync_off(uint32_t slot, uint32_t k)
{
	return KNX_SHMEM_SYNC_OFF + ((uint64_t)slot * KN_SHMEM_MAX_ROUNDS + k) * 8u;
}

/* Synchronises the members of team (a dissemination barrier: round k
 * signals member my + 2^k and waits for member my - 2^k), without waiting
 * for earlier operations. One thread of each member PE calls. 0,
 * -ETIMEDOUT (a member did not come: the barrier is then broken for this
 * team), -EINVAL (not a member), -EIO. */
KN_INLINE int kn_shmem_team_sync(int team)
{
	const kn_shmem *sh = knx_sh();
	if (!sh || team < 0 || team >= KN_SHMEM_MAX_TEAMS)
		return knx_sh_err(sh, -EINVAL);
	const kn_shmem_team *t = &sh->team[team];
	if (t->size <= 0 || t->my < 0)
		return knx_sh_err(sh, -EINVAL);
	if (t->size == 1)
		return 0;
	uint64_t e = KN_FADD64(&sh->dyn->epoch[team], 1) + 1;
	uint8_t *mine = sh->heap[KN_SHMEM_HEAP_DEVICE];
	for (uint32_t k = 0; k < KN_SHMEM_MAX_ROUNDS && (1 << k) < t->size; k++) {
		int to = t->members[(t->my + (1 << k)) % t->size];
		uint64_t off = knx_sh_sync_off(t->slot, k);
		int rc;
		if (to == sh->my_pe) {
			knx_sh_amo_ls(mine + off, KN_AMO_FETCH_ADD, 8, 1, 0);
			rc = 0;
		} else {
			rc = knx_sh_signal_op_in((uint64_t *)(mine + off), 1, KN_SIG_ADD, to, 1);
		}
		if (!rc)
			rc = kn_shmem_wait_until(mine + off, KN_SHMEM_CMP_GE, e, 8, 0);
		if (rc)
			return knx_sh_err(sh, rc);
	}
	return 0;
}

/* A team barrier: kn_shmem_quiet, then kn_shmem_team_sync. */
KN_INLINE int kn_shmem_barrier(int team)
{
	int rc = kn_shmem_quiet();
	if (rc)
		return rc;
	return kn_shmem_team_sync(team);
}

/* Every PE: barrier_all completes this thread's operations first (quiet),
 * sync_all does not. Team 0 is the world. */
KN_INLINE int kn_shmem_barrier_all(void)
{
	return kn_shmem_barrier(0);
}

KN_INLINE int kn_shmem_sync_all(void)
{
	return kn_shmem_team_sync(0);
}

/* ---- teams, device side ------------------------------------------------------------------ */

KN_INLINE int kn_shmem_team_my_pe(int team)
{
	const kn_shmem *sh = knx_sh();
	if (!sh || team < 0 || team >= KN_SHMEM_MAX_TEAMS || sh->team[team].size <= 0)
		return -1;
	return sh->team[team].my;
}

KN_INLINE int kn_shmem_team_n_pes(int team)
{
	const kn_shmem *sh = knx_sh();
	if (!sh || team < 0 || team >= KN_SHMEM_MAX_TEAMS || sh->team[team].size <= 0)
		return -1;
	return sh->team[team].size;
}

/* The index in dst_team of the PE of index pe in src_team, or -1. */
KN_INLINE int kn_shmem_team_translate_pe(int src_team, int pe, int dst_team)
{
	const kn_shmem *sh = knx_sh();
	if (!sh || src_team < 0 || src_team >= KN_SHMEM_MAX_TEAMS || dst_team < 0 ||
	    dst_team >= KN_SHMEM_MAX_TEAMS)
		return -1;
	const kn_shmem_team *s = &sh->team[src_team], *d = &sh->team[dst_team];
	if (s->size <= 0 || d->size <= 0 || pe < 0 || pe >= s->size)
		return -1;
	int w = s->members[pe];
	for (int i = 0; i < d->size; i++)
		if (d->members[i] == w)
			return i;
	return -1;
}

/* ---- collectives ------------------------------------------------------------------------ */
/* NVSHMEM's team collectives, built on the operations above: every member
 * of the team calls with the same arguments (one thread per PE; the group
 * forms let one thread of the group call). Each one:
 *  - broadcast: root's nelems elements of src go to dest on every member
 *    (root's own dest included; dest == src on root is allowed);
 *  - fcollect: member i's nelems elements land at dest + i * nelems on
 *    every member (dest holds size * nelems; it must not overlap src);
 *  - alltoall: block j of member i's src (nelems elements each) lands as
 *    block i of member j's dest (both hold size * nelems; no overlap);
 *  - reduce: dest gets op over every member's src, element by element
 *    (dest == src is allowed, any other overlap is not);
 *  - reducescatter: src holds size blocks of nelems elements; member i's
 *    dest gets op over block i of every member's src (dest == src allowed).
 * KN_RED_MAXLOC (type KN_DT_DOUBLE2 only, and only with it): each element
 * is a pair, x a value and y its index (both doubles, as CUDA's double2);
 * the result is the pair of the largest value, of the lowest index among
 * pairs of that value (whichever member has it), a NaN value losing to
 * any number; element by element for nelems pairs.
 * The data moves with puts (load/store or the NIC) between two team
 * barriers (quiet + team sync), the first so that no member writes into a
 * peer still reading its buffers. A reduction gathers every member's part
 * into the team's scratch (KN_SHMEM_COLL_SCRATCH bytes per team slot, in
 * the reserved bytes) one chunk at a time, then combines the parts in
 * member order, so every member computes the same result (floats
 * included). Collectives of different teams may run at once (their
 * scratch and barriers are apart); two of one team may not.
 * Returns 0, or -EINVAL (a bad team, this PE not in it, a bad root, op or
 * type, a buffer outside the heaps or overlapping another, a size that
 * overflows), -ENOSPC (a team too large for the scratch), or what a put, a
 * quiet or the barrier returns (-ETIMEDOUT, -EIO). nelems 0: 0 at once. */

enum kn_shmem_coll {
	KN_COLL_BROADCAST = 0,
	KN_COLL_FCOLLECT = 1,
	KN_COLL_ALLTOALL = 2,
	KN_COLL_REDUCE = 3,
	KN_COLL_REDUCESCATTER = 4,
};

/* Reduction operators (and, or, xor on integer types only). */
enum kn_shmem_red_op {
	KN_RED_AND = 0,
	KN_RED_OR = 1,
	KN_RED_XOR = 2,
	KN_RED_MIN = 3,
	KN_RED_MAX = 4,
	KN_RED_SUM = 5,
	KN_RED_PROD = 6,
	KN_RED_MAXLOC = 7, /* KN_DT_DOUBLE2 only: (value, index) pairs, below */
};

/* Element types of the collectives (by size, sign and kind). */
enum kn_shmem_dtype {
	KN_DT_INT8 = 0,
	KN_DT_UINT8 = 1,
	KN_DT_INT16 = 2,
	KN_DT_UINT16 = 3,
	KN_DT_INT32 = 4,
	KN_DT_UINT32 = 5,
	KN_DT_INT64 = 6,
	KN_DT_UINT64 = 7,
	KN_DT_FLOAT = 8,
	KN_DT_DOUBLE = 9,
	KN_DT_HALF = 10, /* IEEE binary16 (CUDA's half), as its 2 bytes */
	KN_DT_BF16 = 11, /* bfloat16 (CUDA's __nv_bfloat16), as its 2 bytes */
	KN_DT_DOUBLE2 = 12, /* CUDA's double2: x and y, 16 bytes; KN_RED_MAXLOC's */
	KN_DT_COUNT = 13,
};

/* The kn_shmem_dtype of a C type (a constant expression): float and
 * double by kind, the integers by size and sign. */
#define KN_SHMEM_DTYPE(T)                                                                  \
	((T)0.5 != (T)0 ? (sizeof(T) == 4 ? KN_DT_FLOAT : KN_DT_DOUBLE)                    \
			: (sizeof(T) == 1   ? 0                                            \
			   : sizeof(T) == 2 ? 2                                            \
			   : sizeof(T) == 4 ? 4                                            \
					    : 6) +                                         \
				  ((T)-1 > (T)1 ? 1 : 0))

KN_INLINE uint32_t knx_sh_dt_size(int dt)
{
	return dt == KN_DT_FLOAT ? 4u : dt == KN_DT_DOUBLE ? 8u : dt == KN_DT_DOUBLE2 ? 16u
			     : dt >= KN_DT_HALF ? 2u : 1u << ((uint32_t)dt / 2u);
}

/* 1 for the floating types (no bitwise operators). */
KN_INLINE int knx_sh_dt_float(int dt)
{
	return dt >= KN_DT_FLOAT;
}

/* A float's bits, and back. */
KN_INLINE uint32_t knx_sh_fbits(float f)
{
#if defined(__CUDA_ARCH__)
	return __float_as_uint(f);
#else
	uint32_t u;
	__builtin_memcpy(&u, &f, 4);
	return u;
#endif
}
KN_INLINE float knx_sh_bitsf(uint32_t u)
{
#if defined(__CUDA_ARCH__)
	return __uint_as_float(u);
#else
	float f;
	__builtin_memcpy(&f, &u, 4);
	return f;
#endif
}

/* binary16 to float (exact), float to binary16 (to nearest, ties to even;
 * overflow to infinity; a NaN stays a quiet NaN). */
KN_INLINE float knx_sh_h2f(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1fu)
		return knx_sh_bitsf(s | 0x7f800000u | (m << 13));
	if (e)
		return knx_sh_bitsf(s | ((e + 112u) << 23) | (m << 13));
	if (!m)
		return knx_sh_bitsf(s);
	e = 113u; /* a subnormal: normalise */
	while (!(m & 0x400u)) {
		m <<= 1;
		e--;
	}
	return knx_sh_bitsf(s | (e << 23) | ((m & 0x3ffu) << 13));
}
KN_INLINE uint16_t knx_sh_f2h(float f)
{
	uint32_t x = knx_sh_fbits(f), s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u) /* 65520 and above, infinity: infinity */
		return (uint16_t)(s | 0x7c00u);
	if (a >= 0x38800000u) { /* a normal binary16 */
		uint32_t r = a - 0x38000000u, h = r >> 13, rem = r & 0x1fffu;
		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++;
		return (uint16_t)(s | h);
	}
	if (a <= 0x33000000u) /* at most 2^-25: zero (a tie goes to even) */
		return (uint16_t)s;
	uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, sh = 126u - e;
	uint32_t h = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
	if (rem > half || (rem == half && (h & 1u)))
		h++;
	return (uint16_t)(s | h);
}
/* bfloat16: the high half of a float (rounded to nearest, ties to even). */
KN_INLINE float knx_sh_b2f(uint16_t b)
{
	return knx_sh_bitsf((uint32_t)b << 16);
}
KN_INLINE uint16_t knx_sh_f2b(float f)
{
	uint32_t x = knx_sh_fbits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

/* Loads of the scratch that peers wrote: fresh from memory on a GPU (its
 * L1 may still hold the previous chunk). */
#if defined(__CUDA_ARCH__)
#define KNX_SH_FRESH volatile
#else
#define KNX_SH_FRESH
#endif

#define KNX_SH_RED_INT(T, UT)                                                              \
	do {                                                                               \
		T *a_ = (T *)acc;                                                          \
		const KNX_SH_FRESH T *b_ = (const KNX_SH_FRESH T *)x;                      \
		for (size_t i_ = 0; i_ < n; i_++) {                                        \
			T v_ = b_[i_];                                                     \
			switch (op) {                                                      \
			case KN_RED_AND:                                                   \
				a_[i_] = (T)(a_[i_] & v_);                                 \
				break;                                                     \
			case KN_RED_OR:                                                    \
				a_[i_] = (T)(a_[i_] | v_);                                 \
				break;                                                     \
			case KN_RED_XOR:                                                   \
				a_[i_] = (T)(a_[i_] ^ v_);                                 \
				break;                                                     \
			case KN_RED_MIN:                                                   \
				a_[i_] = v_ < a_[i_] ? v_ : a_[i_];                        \
				break;                                                     \
			case KN_RED_MAX:                                                   \
				a_[i_] = v_ > a_[i_] ? v_ : a_[i_];                        \
				break;                                                     \
			case KN_RED_SUM:                                                   \
				a_[i_] = (T)((UT)a_[i_] + (UT)v_);                         \
				break;                                                     \
			default:                                                           \
				a_[i_] = (T)((UT)a_[i_] * (UT)v_);                         \
				break;                                                     \
			}                                                                  \
		}                                                                          \
	} while (0)

#define KNX_SH_RED_FLT(T)                                                                  \
	do {                                                                               \
		T *a_ = (T *)acc;                                                          \
		const KNX_SH_FRESH T *b_ = (const KNX_SH_FRESH T *)x;                      \
		for (size_t i_ = 0; i_ < n; i_++) {                                        \
			T v_ = b_[i_];                                                     \
			switch (op) {                                                      \
			case KN_RED_MIN:                                                   \
				a_[i_] = v_ < a_[i_] ? v_ : a_[i_];                        \
				break;                                                     \
			case KN_RED_MAX:                                                   \
				a_[i_] = v_ > a_[i_] ? v_ : a_[i_];                        \
				break;                                                     \
			case KN_RED_SUM:                                                   \
				a_[i_] = a_[i_] + v_;                                      \
				break;                                                     \
			default:                                                           \
				a_[i_] = a_[i_] * v_;                                      \
				break;                                                     \
			}                                                                  \
		}                                                                          \
	} while (0)

#define KNX_SH_RED_16(TOF, FROMF)                                                          \
	do {                                                                               \
		uint16_t *a_ = (uint16_t *)acc;                                            \
		const KNX_SH_FRESH uint16_t *b_ = (const KNX_SH_FRESH uint16_t *)x;        \
		for (size_t i_ = 0; i_ < n; i_++) {                                        \
			float u_ = TOF(a_[i_]), v_ = TOF(b_[i_]), r_;                      \
			switch (op) {                                                      \
			case KN_RED_MIN:                                                   \
				r_ = v_ < u_ ? v_ : u_;                                    \
				break;                                                     \
			case KN_RED_MAX:                                                   \
				r_ = v_ > u_ ? v_ : u_;                                    \
				break;                                                     \
			case KN_RED_SUM:                                                   \
				r_ = u_ + v_;                                              \
				break;                                                     \
			default:                                                           \
				r_ = u_ * v_;                                              \
				break;                                                     \
			}                                                                  \
			a_[i_] = FROMF(r_);                                                \
		}                                                                          \
	} while (0)

/* acc[i] = acc[i] op x[i] for n elements of type dt (op and dt checked).
 * Integer sums and products wrap (computed unsigned, at least 32 bits);
 * half and bfloat16 are combined in float and rounded back at each step. */
#if defined(__CUDACC__)
static __host__ __device__ __noinline__
#else
static __attribute__((noinline, unused))
#endif
void knx_sh_combine(void *acc, const void *x, size_t n, int op, int dt)
{
	switch (dt) {
	case KN_DT_DOUBLE2: { /* KN_RED_MAXLOC, the only operator of pairs */
		double *a = (double *)acc;
		const KNX_SH_FRESH double *b = (const KNX_SH_FRESH double *)x;
		for (size_t i = 0; i < n; i++) {
			double v = b[2 * i], k = b[2 * i + 1], u = a[2 * i];
			/* the larger value; a tie: the lower index; NaN loses to any number */
			if (v > u || (v == u && k < a[2 * i + 1]) || (u != u && v == v)) {
				a[2 * i] = v;
				a[2 * i + 1] = k;
			}
		}
		break;
	}
	case KN_DT_INT8:
		KNX_SH_RED_INT(int8_t, uint32_t);
		break;
	case KN_DT_UINT8:
		KNX_SH_RED_INT(uint8_t, uint32_t);
		break;
	case KN_DT_INT16:
		KNX_SH_RED_INT(int16_t, uint32_t);
		break;
	case KN_DT_UINT16:
		KNX_SH_RED_INT(uint16_t, uint32_t);
		break;
	case KN_DT_INT32:
		KNX_SH_RED_INT(int32_t, uint32_t);
		break;
	case KN_DT_UINT32:
		KNX_SH_RED_INT(uint32_t, uint32_t);
		break;
	case KN_DT_INT64:
		KNX_SH_RED_INT(int64_t, uint64_t);
		break;
	case KN_DT_UINT64:
		KNX_SH_RED_INT(uint64_t, uint64_t);
		break;
	case KN_DT_FLOAT:
		KNX_SH_RED_FLT(float);
		break;
	case KN_DT_HALF:
		KNX_SH_RED_16(knx_sh_h2f, knx_sh_f2h);
		break;
	case KN_DT_BF16:
		KNX_SH_RED_16(knx_sh_b2f, knx_sh_f2b);
		break;
	default:
		KNX_SH_RED_FLT(double);
		break;
	}
}

/* Copies n bytes that peers wrote (the scratch) to dst. */
KN_INLINE void knx_sh_copy_fresh(void *dst, const void *src, size_t n)
{
#if defined(__CUDA_ARCH__)
	uint8_t *d = (uint8_t *)dst;
	const volatile uint8_t *s = (const volatile uint8_t *)src;
	if ((((uintptr_t)d | (uintptr_t)s) & 7u) == 0) {
		for (; n >= 8; n -= 8, d += 8, s += 8)
			*(uint64_t *)d = *(const volatile uint64_t *)s;
	}
	for (; n; n--)
		*d++ = *s++;
#else
	__builtin_memcpy(dst, src, n);
#endif
}

/* Puts [src, src+n) to symmetric dst at PE pe without waiting (load/store,
 * or WQEs completed by the next quiet); own: dst is in the layer's bytes. */
KN_INLINE int knx_sh_coll_put(void *dst, const void *src, size_t n, int pe, int own)
{
	knx_sh_route r;
	int rc = knx_sh_route_in(dst, n, pe, own, &r);
	if (rc)
		return rc;
	if (r.ptr) {
		knx_sh_copy(r.ptr, src, n);
		return 0;
	}
	kn_ticket_t t;
	return knx_sh_put_nic(&r, src, n, 0, 0, 0, 0, &t);
}

/* The collectives' barrier: this thread's puts complete, then the team's. */
KN_INLINE int knx_sh_coll_sync(int team)
{
	int rc = kn_shmem_quiet();
	return rc ? rc : kn_shmem_team_sync(team);
}

/* 1 when [a, a+an) and [b, b+bn) share a byte. */
KN_INLINE int knx_sh_overlap(const void *a, size_t an, const void *b, size_t bn)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return an && bn && x < y + bn && y < x + an;
}

/* 1 when [p, p+n) is in a heap's user part (symmetric). */
KN_INLINE int knx_sh_sym(const kn_shmem *sh, const void *p, size_t n)
{
	uint64_t off;
	int h = knx_sh_heap(sh, p, n, &off);
	return h >= 0 && !knx_sh_reserved(h, off);
}

/* The collectives are one function per translation unit, not inlined into
 * every NVSHMEM name that calls them. */
#if defined(__CUDACC__)
#define KNX_SH_OUTLINE static __host__ __device__ __noinline__ __attribute__((unused))
#else
#define KNX_SH_OUTLINE static __attribute__((noinline, unused))
#endif

/* One collective (enum kn_shmem_coll) of nelems elements of type dt over
 * team; root: broadcast's root (an index in the team), op: the reduction's
 * (enum kn_shmem_red_op). Thread scope: one thread of each member calls. */
KNX_SH_OUTLINE int kn_shmem_coll(int coll, int team, void *dest, const void *src, size_t nelems,
			    int root, int op, int dt)
{
	const kn_shmem *sh = knx_sh();
	if (!sh || team < 0 || team >= KN_SHMEM_MAX_TEAMS || coll < KN_COLL_BROADCAST ||
	    coll > KN_COLL_REDUCESCATTER || dt < 0 || dt >= KN_DT_COUNT)
		return knx_sh_err(sh, -EINVAL);
	const kn_shmem_team *t = &sh->team[team];
	if (t->size <= 0 || t->my < 0)
		return knx_sh_err(sh, -EINVAL);
	int red = coll == KN_COLL_REDUCE || coll == KN_COLL_REDUCESCATTER;
	if (red && (op < KN_RED_AND || op > KN_RED_MAXLOC ||
		    (op <= KN_RED_XOR && knx_sh_dt_float(dt)) ||
		    ((op == KN_RED_MAXLOC) != (dt == KN_DT_DOUBLE2))))
		return knx_sh_err(sh, -EINVAL);
	if (coll == KN_COLL_BROADCAST && (root < 0 || root >= t->size))
		return knx_sh_err(sh, -EINVAL);
	size_t esz = knx_sh_dt_size(dt), size = (size_t)t->size, my = (size_t)t->my;
	if (nelems > (size_t)-1 / esz / size)
		return knx_sh_err(sh, -EINVAL);
	size_t len = nelems * esz; /* one member's block */
	size_t slen = coll == KN_COLL_ALLTOALL || coll == KN_COLL_REDUCESCATTER ? len * size : len;
	size_t dlen = coll == KN_COLL_ALLTOALL || coll == KN_COLL_FCOLLECT ? len * size : len;
	if (!nelems)
		return 0;
	int src_used = coll != KN_COLL_BROADCAST || (int)my == root;
	if (!knx_sh_sym(sh, dest, dlen) || (src_used && !knx_sh_sym(sh, src, slen)))
		return knx_sh_err(sh, -EINVAL);
	if (src_used && knx_sh_overlap(dest, dlen, src, slen) &&
	    (coll == KN_COLL_FCOLLECT || coll == KN_COLL_ALLTOALL || dest != src))
		return knx_sh_err(sh, -EINVAL);
	const uint8_t *s = (const uint8_t *)src;
	uint8_t *d = (uint8_t *)dest;
	int rc = knx_sh_coll_sync(team);
	if (rc)
		return rc;
	if (!red) {
		for (size_t k = 0; k < size && !rc; k++) {
			size_t j = (my + k) % size;
			int pe = t->members[j];
			if (coll == KN_COLL_BROADCAST) {
				if ((int)my != root)
					break;
				rc = knx_sh_coll_put(d, s, len, pe, 0);
			} else if (coll == KN_COLL_FCOLLECT) {
				rc = knx_sh_coll_put(d + my * len, s, len, pe, 0);
			} else {
				rc = knx_sh_coll_put(d + my * len, s + j * len, len, pe, 0);
			}
		}
		if (rc) {
			kn_shmem_quiet();
			return knx_sh_err(sh, rc);
		}
		return knx_sh_coll_sync(team);
	}
	/* a reduction: chunks through the scratch, each member's part at its
	 * index, combined in member order */
	size_t per = (KN_SHMEM_COLL_SCRATCH / size) & ~(size_t)15;
	if (per < esz)
		return knx_sh_err(sh, -ENOSPC);
	size_t cmax = per / esz;
	uint8_t *scr = sh->heap[KN_SHMEM_HEAP_DEVICE] + KNX_SHMEM_COLL_OFF +
		       (size_t)t->slot * KN_SHMEM_COLL_SCRATCH;
	for (size_t off = 0; off < nelems; off += cmax) {
		size_t c = nelems - off < cmax ? nelems - off : cmax;
		if (off)
			rc = knx_sh_coll_sync(team); /* every member is done with the last chunk */
		for (size_t k = 0; k < size && !rc; k++) {
			size_t j = (my + k) % size;
			size_t from = (coll == KN_COLL_REDUCESCATTER ? j * nelems : 0) + off;
			rc = knx_sh_coll_put(scr + my * per, s + from * esz, c * esz,
					     t->members[j], 1);
		}
		if (rc) {
			kn_shmem_quiet();
			return knx_sh_err(sh, rc);
		}
		rc = knx_sh_coll_sync(team);
		if (rc)
			return rc;
		uint8_t *out = d + off * esz;
		knx_sh_copy_fresh(out, scr, c * esz);
		for (size_t p = 1; p < size; p++)
			knx_sh_combine(out, scr + p * per, c, op, dt);
	}
	return 0;
}

KN_INLINE int kn_shmem_broadcast(int team, void *dest, const void *src, size_t nbytes, int root)
{
	return kn_shmem_coll(KN_COLL_BROADCAST, team, dest, src, nbytes, root, 0, KN_DT_UINT8);
}
KN_INLINE int kn_shmem_fcollect(int team, void *dest, const void *src, size_t nbytes)
{
	return kn_shmem_coll(KN_COLL_FCOLLECT, team, dest, src, nbytes, 0, 0, KN_DT_UINT8);
}
KN_INLINE int kn_shmem_alltoall(int team, void *dest, const void *src, size_t nbytes)
{
	return kn_shmem_coll(KN_COLL_ALLTOALL, team, dest, src, nbytes, 0, 0, KN_DT_UINT8);
}
KN_INLINE int kn_shmem_reduce(int team, void *dest, const void *src, size_t nreduce, int op,
			      int dt)
{
	return kn_shmem_coll(KN_COLL_REDUCE, team, dest, src, nreduce, 0, op, dt);
}
KN_INLINE int kn_shmem_reducescatter(int team, void *dest, const void *src, size_t nreduce,
				     int op, int dt)
{
	return kn_shmem_coll(KN_COLL_REDUCESCATTER, team, dest, src, nreduce, 0, op, dt);
}

/* Strided alltoall (OpenSHMEM's alltoalls): as alltoall, with strides.
 * Element k of block j of member i's src, at src + (j*nelems + k)*sst*es,
 * lands at dest + (i*nelems + k)*dst*es on member j, for j in [0, size) and
 * k in [0, nelems); es: the element's bytes (1, 2, 4, 8 or 16); dst and
 * sst count elements and must be at least 1. Both spans, ((size*nelems -
 * 1)*stride + 1)*es bytes, are symmetric and do not overlap. Between two
 * team barriers, as the others; each block is a strided put
 * (kn_shmem_iput). -EINVAL (nothing written): a bad team, this PE not in
 * it, a bad element size, a stride below 1, a span outside the heaps, in
 * their reserved bytes, overlapping the other or overflowing. nelems 0: 0
 * at once. Thread scope: one thread of each member calls. */
KNX_SH_OUTLINE int kn_shmem_alltoalls(int team, void *dest, const void *src, ptrdiff_t dst,
				 ptrdiff_t sst, size_t nelems, uint32_t es)
{
	const kn_shmem *sh = knx_sh();
	if (!sh || team < 0 || team >= KN_SHMEM_MAX_TEAMS || dst < 1 || sst < 1)
		return knx_sh_err(sh, -EINVAL);
	const kn_shmem_team *t = &sh->team[team];
	if (t->size <= 0 || t->my < 0)
		return knx_sh_err(sh, -EINVAL);
	size_t size = (size_t)t->size, my = (size_t)t->my;
	if (nelems > (size_t)-1 / size)
		return knx_sh_err(sh, -EINVAL);
	int64_t lo;
	uint64_t dlen, slen;
	if (knx_sh_span(dst, nelems * size, es, &lo, &dlen) ||
	    knx_sh_span(sst, nelems * size, es, &lo, &slen))
		return knx_sh_err(sh, -EINVAL);
	if (!nelems)
		return 0;
	if (!knx_sh_sym(sh, dest, dlen) || !knx_sh_sym(sh, src, slen) ||
	    knx_sh_overlap(dest, dlen, src, slen))
		return knx_sh_err(sh, -EINVAL);
	const uint8_t *s = (const uint8_t *)src;
	uint8_t *d = (uint8_t *)dest + (uint64_t)my * nelems * (uint64_t)dst * es;
	int rc = knx_sh_coll_sync(team);
	if (rc)
		return rc;
	for (size_t k = 0; k < size && !rc; k++) {
		size_t j = (my + k) % size;
		rc = kn_shmem_iput(d, s + (uint64_t)j * nelems * (uint64_t)sst * es, dst, sst,
				   nelems, es, t->members[j]);
	}
	if (rc) {
		kn_shmem_quiet();
		return knx_sh_err(sh, rc);
	}
	return knx_sh_coll_sync(team);
}

/* ---- group scope on the host executor ----------------------------------------------------- */
/* Warp (scope 1), block (scope 2) and warpgroup (scope 3) forms for
 * kinet_shmem_host_launch: every
 * thread of the group calls; the group's first thread issues the operation
 * (its load/store copies are shared out among the threads); everyone gets
 * its result. CUDA: kinet/shmem_device_cuda.cuh. */
#if !defined(__CUDACC__)

/* Cooperative put: each thread copies a slice when load/store reaches dest;
 * through the NIC the leader posts. */
KN_INLINE int knx_sh_put_grp(int scope, void *dest, const void *src, size_t n, int pe, int nbi)
{
	int r = kinet_shmem_host_group_rank(scope), g = kinet_shmem_host_group_size(scope);
	void *p = kn_shmem_ptr(dest, pe);
	int rc = 0;
	kinet_shmem_host_group_sync(scope);
	if (p) {
		size_t per = (n + (size_t)g - 1) / (size_t)g, a = per * (size_t)r;
		if (a < n)
			knx_sh_copy((uint8_t *)p + a, (const uint8_t *)src + a,
				    n - a < per ? n - a : per);
	} else if (r == 0) {
		rc = nbi ? kn_shmem_put_nbi(dest, src, n, pe) : kn_shmem_put(dest, src, n, pe);
	}
	return kinet_shmem_host_group_bcast(scope, rc);
}

KN_INLINE int knx_sh_get_grp(int scope, void *dest, const void *src, size_t n, int pe, int nbi)
{
	int r = kinet_shmem_host_group_rank(scope), g = kinet_shmem_host_group_size(scope);
	void *p = kn_shmem_ptr(src, pe);
	int rc = 0;
	kinet_shmem_host_group_sync(scope);
	if (p) {
		size_t per = (n + (size_t)g - 1) / (size_t)g, a = per * (size_t)r;
		if (a < n)
			knx_sh_copy((uint8_t *)dest + a, (const uint8_t *)p + a,
				    n - a < per ? n - a : per);
	} else if (r == 0) {
		rc = nbi ? kn_shmem_get_nbi(dest, src, n, pe) : kn_shmem_get(dest, src, n, pe);
	}
	return kinet_shmem_host_group_bcast(scope, rc);
}

KN_INLINE int knx_sh_put_signal_grp(int scope, void *dest, const void *src, size_t n,
				    uint64_t *sig, uint64_t signal, int sig_op, int pe, int nbi)
{
	int r = kinet_shmem_host_group_rank(scope), g = kinet_shmem_host_group_size(scope);
	void *p = kn_shmem_ptr(dest, pe);
	int rc = 0;
	kinet_shmem_host_group_sync(scope);
	if (p) {
		size_t per = (n + (size_t)g - 1) / (size_t)g, a = per * (size_t)r;
		if (a < n)
			knx_sh_copy((uint8_t *)p + a, (const uint8_t *)src + a,
				    n - a < per ? n - a : per);
		knx_sh_fence_mem();
		kinet_shmem_host_group_sync(scope);
		if (r == 0)
			rc = kn_shmem_signal_op(sig, signal, sig_op, pe);
	} else if (r == 0) {
		rc = nbi ? kn_shmem_put_signal_nbi(dest, src, n, sig, signal, sig_op, pe)
			 : kn_shmem_put_signal(dest, src, n, sig, signal, sig_op, pe);
	}
	return kinet_shmem_host_group_bcast(scope, rc);
}

/* Strided put and get of a group: to a peer load/store reaches, thread k
 * copies elements k, k + group size, ...; through the NIC the group's
 * first thread posts them all. */
KN_INLINE int knx_sh_istride_grp(int scope, int get, void *dest, const void *src, ptrdiff_t dst,
				 ptrdiff_t sst, size_t n, uint32_t es, int pe)
{
	int r = kinet_shmem_host_group_rank(scope), g = kinet_shmem_host_group_size(scope);
	knx_sh_route rt;
	int64_t dlo, slo;
	int rc = knx_sh_istride_route(get, dest, src, dst, sst, n, es, pe, &dlo, &slo, &rt);
	kinet_shmem_host_group_sync(scope);
	if (!rc && n && rt.ptr) {
		knx_sh_istride_copy(get, dest, src, rt.ptr, dst, sst, dlo, slo, es, (size_t)r,
				    (size_t)g, n);
	} else if (!rc && n && r == 0) {
		rc = get ? kn_shmem_iget(dest, src, dst, sst, n, es, pe)
			 : kn_shmem_iput(dest, src, dst, sst, n, es, pe);
	}
	return kinet_shmem_host_group_bcast(scope, rc);
}

KN_INLINE int kn_shmem_iput_warp(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				 uint32_t es, int pe)
{
	return knx_sh_istride_grp(1, 0, d, s, dst, sst, n, es, pe);
}
KN_INLINE int kn_shmem_iput_block(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				  uint32_t es, int pe)
{
	return knx_sh_istride_grp(2, 0, d, s, dst, sst, n, es, pe);
}
KN_INLINE int kn_shmem_iget_warp(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				 uint32_t es, int pe)
{
	return knx_sh_istride_grp(1, 1, d, s, dst, sst, n, es, pe);
}
KN_INLINE int kn_shmem_iget_block(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, size_t n,
				  uint32_t es, int pe)
{
	return knx_sh_istride_grp(2, 1, d, s, dst, sst, n, es, pe);
}

/* One thread of the group makes the call, the group waits for it and gets
 * its result. */
#define KNX_SH_GRP_ONE(scope, call)                                                        \
	do {                                                                               \
		int rc_ = 0;                                                               \
		kinet_shmem_host_group_sync(scope);                                        \
		if (kinet_shmem_host_group_rank(scope) == 0)                               \
			rc_ = (call);                                                      \
		return kinet_shmem_host_group_bcast(scope, rc_);                           \
	} while (0)

KN_INLINE int kn_shmem_putmem_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(1, d, s, n, pe, 0);
}
KN_INLINE int kn_shmem_putmem_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(2, d, s, n, pe, 0);
}
KN_INLINE int kn_shmem_putmem_nbi_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(1, d, s, n, pe, 1);
}
KN_INLINE int kn_shmem_putmem_nbi_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_put_grp(2, d, s, n, pe, 1);
}
KN_INLINE int kn_shmem_getmem_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(1, d, s, n, pe, 0);
}
KN_INLINE int kn_shmem_getmem_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(2, d, s, n, pe, 0);
}
KN_INLINE int kn_shmem_getmem_nbi_warp(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(1, d, s, n, pe, 1);
}
KN_INLINE int kn_shmem_getmem_nbi_block(void *d, const void *s, size_t n, int pe)
{
	return knx_sh_get_grp(2, d, s, n, pe, 1);
}
KN_INLINE int kn_shmem_put_signal_warp(void *d, const void *s, size_t n, uint64_t *sig,
				       uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(1, d, s, n, sig, v, op, pe, 0);
}
KN_INLINE int kn_shmem_put_signal_block(void *d, const void *s, size_t n, uint64_t *sig,
					uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(2, d, s, n, sig, v, op, pe, 0);
}
KN_INLINE int kn_shmem_put_signal_nbi_warp(void *d, const void *s, size_t n, uint64_t *sig,
					   uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(1, d, s, n, sig, v, op, pe, 1);
}
KN_INLINE int kn_shmem_put_signal_nbi_block(void *d, const void *s, size_t n, uint64_t *sig,
					    uint64_t v, int op, int pe)
{
	return knx_sh_put_signal_grp(2, d, s, n, sig, v, op, pe, 1);
}
KN_INLINE int kn_shmem_quiet_warp(void)
{
	KNX_SH_GRP_ONE(1, kn_shmem_quiet());
}
KN_INLINE int kn_shmem_quiet_block(void)
{
	KNX_SH_GRP_ONE(2, kn_shmem_quiet());
}
KN_INLINE int kn_shmem_barrier_all_warp(void)
{
	KNX_SH_GRP_ONE(1, kn_shmem_barrier_all());
}
KN_INLINE int kn_shmem_barrier_all_block(void)
{
	KNX_SH_GRP_ONE(2, kn_shmem_barrier_all());
}
KN_INLINE int kn_shmem_sync_all_warp(void)
{
	KNX_SH_GRP_ONE(1, kn_shmem_sync_all());
}
KN_INLINE int kn_shmem_sync_all_block(void)
{
	KNX_SH_GRP_ONE(2, kn_shmem_sync_all());
}
KN_INLINE int kn_shmem_barrier_warp(int team)
{
	KNX_SH_GRP_ONE(1, kn_shmem_barrier(team));
}
KN_INLINE int kn_shmem_barrier_block(int team)
{
	KNX_SH_GRP_ONE(2, kn_shmem_barrier(team));
}
/* Every thread of a warpgroup (4 warps, kinet_shmem_host_group_sync) calls. */
KN_INLINE int kn_shmem_barrier_warpgroup(int team)
{
	KNX_SH_GRP_ONE(3, kn_shmem_barrier(team));
}
KN_INLINE int kn_shmem_team_sync_warp(int team)
{
	KNX_SH_GRP_ONE(1, kn_shmem_team_sync(team));
}
KN_INLINE int kn_shmem_team_sync_block(int team)
{
	KNX_SH_GRP_ONE(2, kn_shmem_team_sync(team));
}
/* The collectives' group forms: the group's first thread runs the
 * collective, the group waits for it and gets its result. */
KN_INLINE int kn_shmem_coll_warp(int coll, int team, void *dest, const void *src, size_t nelems,
				 int root, int op, int dt)
{
	KNX_SH_GRP_ONE(1, kn_shmem_coll(coll, team, dest, src, nelems, root, op, dt));
}
KN_INLINE int kn_shmem_coll_block(int coll, int team, void *dest, const void *src, size_t nelems,
				  int root, int op, int dt)
{
	KNX_SH_GRP_ONE(2, kn_shmem_coll(coll, team, dest, src, nelems, root, op, dt));
}

#endif /* !__CUDACC__ */

#if defined(__CUDACC__)
#include <kinet/shmem_device_cuda.cuh>
#endif

#endif /* KINET_SHMEM_DEVICE_H */
