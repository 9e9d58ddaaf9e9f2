/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_port.h - the portability layer of the device data path: the
 * loads, stores, fences, atomics, pause and clock it is written with, mapped
 * to PTX under nvcc (device code) and to the GCC/Clang __atomic builtins (the
 * C11 memory model) everywhere else (the host executor). Portable device
 * code (kinet/device.h, tools/perf/perf_body.h) uses only these.
 *
 * Public: KN_LOAD32/64 (acquire loads), KN_STORE32/64 (release stores),
 * KN_FADD64, KN_CAS32/64 (read-modify-writes returning the old value),
 * KN_FENCE_ACQ/REL/SYS, the barriers toward the NIC KN_BAR_WQE_DBR,
 * KN_BAR_DBR_REG, KN_BAR_REG_FLUSH and KN_BAR_CQE_DATA, KN_PAUSE() and
 * kn_now_ns(). The knx_ functions behind
 * them are not API.
 *
 * Orderings. The C build gets acquire loads, release stores and sequentially
 * consistent read-modify-writes and fences. Device code spells the same
 * orderings in PTX: loads are relaxed (volatile) and acquire explicitly with
 * KN_FENCE_ACQ where the code needs it, stores release, read-modify-writes
 * acq_rel at GPU scope (the QP state lives in GPU memory), KN_FENCE_SYS a
 * sequentially consistent fence at system scope (the queues are read by the
 * NIC or a CPU thread). docs/ordering.md has the argument.
 */
#ifndef KINET_DEVICE_PORT_H
#define KINET_DEVICE_PORT_H

#include <errno.h> /* the device calls return -EBUSY, -EIO, -EINVAL, -ETIMEDOUT */
#include <stdint.h>
#include <kinet/prm.h> /* KN_INLINE */

#if defined(__CUDA_ARCH__)

#define KN_LOAD64(p) (*(volatile uint64_t *)(p))
#define KN_LOAD32(p) (*(volatile uint32_t *)(p))
#define KN_STORE64(p, v) knx_st_rel64((uint64_t *)(p), (uint64_t)(v))
#define KN_STORE32(p, v) knx_st_rel32((uint32_t *)(p), (uint32_t)(v))
#define KN_FADD64(p, v) knx_fadd64((uint64_t *)(p), (uint64_t)(v))
#define KN_CAS64(p, o, n) knx_cas64((uint64_t *)(p), (uint64_t)(o), (uint64_t)(n))
#define KN_CAS32(p, o, n) knx_cas32((uint32_t *)(p), (uint32_t)(o), (uint32_t)(n))
#define KN_FENCE_ACQ() asm volatile("fence.acq_rel.sys;" ::: "memory")
#define KN_FENCE_REL() asm volatile("fence.acq_rel.sys;" ::: "memory")
#define KN_FENCE_SYS() asm volatile("fence.sc.sys;" ::: "memory")
#define KN_PAUSE() __nanosleep(64)
/* the barriers toward the NIC (meaning: the host section below) */
#define KN_BAR_WQE_DBR() asm volatile("fence.acq_rel.sys;" ::: "memory")
#define KN_BAR_DBR_REG() asm volatile("fence.acq_rel.sys;" ::: "memory")
#define KN_BAR_REG_FLUSH() asm volatile("" ::: "memory") /* the next ring's fences order it */
#define KN_BAR_CQE_DATA() asm volatile("fence.acq_rel.sys;" ::: "memory")

__device__ __forceinline__ void knx_st_rel64(uint64_t *p, uint64_t v)
{
	asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void knx_st_rel32(uint32_t *p, uint32_t v)
{
	asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t knx_fadd64(uint64_t *p, uint64_t v)
{
	uint64_t r;
	asm volatile("atom.acq_rel.gpu.add.u64 %0, [%1], %2;"
		     : "=l"(r)
		     : "l"(p), "l"(v)
		     : "memory");
	return r;
}
__device__ __forceinline__ uint64_t knx_cas64(uint64_t *p, uint64_t o, uint64_t n)
{
	uint64_t r;
	asm volatile("atom.acq_rel.gpu.cas.b64 %0, [%1], %2, %3;"
		     : "=l"(r)
		     : "l"(p), "l"(o), "l"(n)
		     : "memory");
	return r;
}
__device__ __forceinline__ uint32_t knx_cas32(uint32_t *p, uint32_t o, uint32_t n)
{
	uint32_t r;
	asm volatile("atom.acq_rel.gpu.cas.b32 %0, [%1], %2, %3;"
		     : "=r"(r)
		     : "l"(p), "r"(o), "r"(n)
		     : "memory");
	return r;
}

/* Nanoseconds of a clock that never goes backwards (the GPU's global timer;
 * CLOCK_MONOTONIC on the host): for timeouts and benchmarks. */
KN_INLINE uint64_t kn_now_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

#else /* host: C or C++ */

#include <sched.h>
#include <time.h>

#define KN_LOAD64(p) __atomic_load_n((uint64_t *)(p), __ATOMIC_ACQUIRE)
#define KN_LOAD32(p) __atomic_load_n((uint32_t *)(p), __ATOMIC_ACQUIRE)
#define KN_STORE64(p, v) __atomic_store_n((uint64_t *)(p), (v), __ATOMIC_RELEASE)
#define KN_STORE32(p, v) __atomic_store_n((uint32_t *)(p), (v), __ATOMIC_RELEASE)
#define KN_FADD64(p, v) __atomic_fetch_add((uint64_t *)(p), (uint64_t)(v), __ATOMIC_SEQ_CST)
#define KN_CAS64(p, o, n) knx_cas64((uint64_t *)(p), (o), (n))
#define KN_CAS32(p, o, n) knx_cas32((uint32_t *)(p), (o), (n))
#define KN_FENCE_ACQ() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define KN_FENCE_REL() __atomic_thread_fence(__ATOMIC_RELEASE)
#define KN_FENCE_SYS() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KN_PAUSE() knx_pause()

/* Barriers toward the NIC, named by what they order. The NIC is a device
 * (a ConnectX: DMA reads of the queues, MMIO writes to its register) or the
 * software NIC's engine (a CPU thread); each barrier is the instruction the
 * verbs library's mlx5 provider uses for the same purpose, which orders for
 * both observers (docs/ordering.md, "Host barriers"):
 *  KN_BAR_WQE_DBR    WQE stores before the doorbell record store, both to
 *                    memory the NIC reads: x86 compiler barrier (stores are
 *                    not reordered with stores), aarch64 dmb oshst;
 *  KN_BAR_DBR_REG    the record (and the WQEs) before the first store to the
 *                    register, which may be write-combined MMIO: x86 sfence,
 *                    aarch64 dsb st;
 *  KN_BAR_REG_FLUSH  after the register stores: flushes the write-combining
 *                    buffer (a BlueFlame write leaves as one burst) and keeps
 *                    the stores before whatever follows: x86 sfence, aarch64
 *                    dsb st;
 *  KN_BAR_CQE_DATA   a CQE's owner byte read before the rest of the CQE and
 *                    the data it completes: x86 lfence, aarch64 dmb oshld.
 * Elsewhere: a sequentially consistent fence for each. */
#if defined(__x86_64__) || defined(__i386__)
#define KN_BAR_WQE_DBR() __asm__ __volatile__("" ::: "memory")
#define KN_BAR_DBR_REG() __asm__ __volatile__("sfence" ::: "memory")
#define KN_BAR_REG_FLUSH() __asm__ __volatile__("sfence" ::: "memory")
#define KN_BAR_CQE_DATA() __asm__ __volatile__("lfence" ::: "memory")
#elif defined(__aarch64__)
#define KN_BAR_WQE_DBR() __asm__ __volatile__("dmb oshst" ::: "memory")
#define KN_BAR_DBR_REG() __asm__ __volatile__("dsb st" ::: "memory")
#define KN_BAR_REG_FLUSH() __asm__ __volatile__("dsb st" ::: "memory")
#define KN_BAR_CQE_DATA() __asm__ __volatile__("dmb oshld" ::: "memory")
#else
#define KN_BAR_WQE_DBR() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KN_BAR_DBR_REG() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KN_BAR_REG_FLUSH() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KN_BAR_CQE_DATA() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

KN_INLINE uint64_t knx_cas64(uint64_t *p, uint64_t o, uint64_t n)
{
	__atomic_compare_exchange_n(p, &o, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return o;
}
KN_INLINE uint32_t knx_cas32(uint32_t *p, uint32_t o, uint32_t n)
{
	__atomic_compare_exchange_n(p, &o, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return o;
}

/* A spinning host thread gives its CPU away every 64th pause: the host
 * executor may run more threads than there are cores, and the software
 * NIC's engine, a CPU thread too, must still get to run. */
KN_INLINE void knx_pause(void)
{
	static __thread unsigned spins;
	if ((++spins & 63u) == 0) {
		sched_yield();
		return;
	}
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#if !defined(CLOCK_MONOTONIC)
/* A strict ISO C mode (-std=c99/c11 without _POSIX_C_SOURCE) hides the POSIX
 * clocks of <time.h>; the C library still has them (struct timespec comes
 * with <sched.h>). Linux numbers its monotonic clock 1. */
extern int clock_gettime(int clock, struct timespec *ts);
#define KNX_CLOCK_MONOTONIC 1
#else
#define KNX_CLOCK_MONOTONIC CLOCK_MONOTONIC
#endif

/* Nanoseconds of a clock that never goes backwards (CLOCK_MONOTONIC on the
 * host; the GPU's global timer on the device): for timeouts and benchmarks. */
KN_INLINE uint64_t kn_now_ns(void)
{
	struct timespec ts;
	clock_gettime(KNX_CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* __CUDA_ARCH__ */

#endif /* KINET_DEVICE_PORT_H */
