/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device.h - the device data path, thread scope.
 *
 * Portable C that both a C compiler (host executor: CPU threads) and nvcc
 * (CUDA kernels) accept. A thread reserves send-queue slots, writes mlx5
 * WQEs into them, publishes them in order, rings the doorbell and polls the
 * completion queue, all without calling into the host library.
 *
 * Conventions of this header
 *  - one WQE = one 64-byte basic block (WQEBB). A ticket is the 64-bit,
 *    never-wrapping index of a WQE; its slot is ticket % sq_wqe_cnt and its
 *    16-bit wqe_index is ticket & 0xffff.
 *  - every WQE the device API posts is signaled, and the send CQ is dedicated
 *    and as deep as the SQ, so CQE number t completes WQE number t.
 *  - a slot is reused only once the CQE of its previous occupant has been
 *    consumed: a full SQ waits on completions, nothing is overwritten.
 *  - return values: 0, -EBUSY (not yet), -EIO (error CQE; kn_qp_error() gives
 *    the syndrome), -ETIMEDOUT (qp->timeout_ns elapsed), -EINVAL (bad argument).
 */
#ifndef KINET_DEVICE_H
#define KINET_DEVICE_H

#include <stdint.h>
#include <stddef.h>
#include <kinet/prm.h>

#ifndef EBUSY
#define EBUSY 16
#endif
#ifndef EIO
#define EIO 5
#endif
#ifndef EINVAL
#define EINVAL 22
#endif
#ifndef ETIMEDOUT
#define ETIMEDOUT 110
#endif

/* ---- portability layer: CUDA or C11 threads ----------------------------- */
#if defined(__CUDACC__)
#define KN_DEVICE __host__ __device__ __forceinline__
#else
#define KN_DEVICE static inline
#endif

#if defined(__CUDA_ARCH__)
/* device side: GPU-scope atomics on the QP state (device memory),
 * system-scope fences towards the NIC (queues in host memory or MMIO). */
#define KN_LOAD64(p) (*(volatile uint64_t *)(p))
#define KN_LOAD32(p) (*(volatile uint32_t *)(p))
/* The C build gets acquire loads, release stores and sequentially
 * consistent read-modify-writes from <stdatomic.h> semantics; here the same
 * orderings are spelled in PTX: loads are relaxed (volatile) and acquire
 * explicitly with KN_FENCE_ACQ where the code needs it, stores release,
 * read-modify-writes acq_rel at GPU scope (the state lives in GPU memory),
 * KN_FENCE_SYS a sequentially consistent fence at system scope (the queues
 * are read by the NIC or a CPU thread). docs/ordering.md has the argument. */
#define KN_STORE64(p, v) kn_cu_st_rel64((uint64_t *)(p), (uint64_t)(v))
#define KN_STORE32(p, v) kn_cu_st_rel32((uint32_t *)(p), (uint32_t)(v))
__device__ __forceinline__ void kn_cu_st_rel64(uint64_t *p, uint64_t v)
{
	asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void kn_cu_st_rel32(uint32_t *p, uint32_t v)
{
	asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t kn_cu_fadd64(uint64_t *p, uint64_t v)
{
	uint64_t r;
	asm volatile("atom.acq_rel.gpu.add.u64 %0, [%1], %2;" : "=l"(r) : "l"(p), "l"(v) : "memory");
	return r;
}
__device__ __forceinline__ uint64_t kn_cu_cas64(uint64_t *p, uint64_t o, uint64_t n)
{
	uint64_t r;
	asm volatile("atom.acq_rel.gpu.cas.b64 %0, [%1], %2, %3;"
		     : "=l"(r)
		     : "l"(p), "l"(o), "l"(n)
		     : "memory");
	return r;
}
__device__ __forceinline__ uint64_t kn_cu_max64(uint64_t *p, uint64_t v)
{
	uint64_t r;
	asm volatile("atom.acq_rel.gpu.max.u64 %0, [%1], %2;" : "=l"(r) : "l"(p), "l"(v) : "memory");
	return r;
}
__device__ __forceinline__ uint32_t kn_cu_cas32(uint32_t *p, uint32_t o, uint32_t n)
{
	uint32_t r;
	asm volatile("atom.acq_rel.gpu.cas.b32 %0, [%1], %2, %3;"
		     : "=r"(r)
		     : "l"(p), "r"(o), "r"(n)
		     : "memory");
	return r;
}
#define KN_FADD64(p, v) kn_cu_fadd64((uint64_t *)(p), (uint64_t)(v))
#define KN_CAS64(p, o, n) kn_cu_cas64((uint64_t *)(p), (uint64_t)(o), (uint64_t)(n))
#define KN_MAX64(p, v) kn_cu_max64((uint64_t *)(p), (uint64_t)(v))
#define KN_CAS32(p, o, n) kn_cu_cas32((uint32_t *)(p), (uint32_t)(o), (uint32_t)(n))
#define KN_FENCE_ACQ() asm volatile("fence.acq_rel.sys;" ::: "memory")
#define KN_FENCE_REL() asm volatile("fence.acq_rel.sys;" ::: "memory")
#define KN_FENCE_SYS() asm volatile("fence.sc.sys;" ::: "memory")
#define KN_PAUSE() __nanosleep(64)
KN_DEVICE uint64_t kn_now_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
#else
#include <time.h>
#define KN_LOAD64(p) __atomic_load_n((uint64_t *)(p), __ATOMIC_ACQUIRE)
#define KN_LOAD32(p) __atomic_load_n((uint32_t *)(p), __ATOMIC_ACQUIRE)
#define KN_STORE64(p, v) __atomic_store_n((uint64_t *)(p), (v), __ATOMIC_RELEASE)
#define KN_STORE32(p, v) __atomic_store_n((uint32_t *)(p), (v), __ATOMIC_RELEASE)
#define KN_FADD64(p, v) __atomic_fetch_add((uint64_t *)(p), (uint64_t)(v), __ATOMIC_SEQ_CST)
KN_DEVICE uint64_t kn_cas64_host(uint64_t *p, uint64_t o, uint64_t n)
{
	__atomic_compare_exchange_n(p, &o, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return o;
}
KN_DEVICE uint32_t kn_cas32_host(uint32_t *p, uint32_t o, uint32_t n)
{
	__atomic_compare_exchange_n(p, &o, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return o;
}
KN_DEVICE uint64_t kn_max64_host(uint64_t *p, uint64_t v)
{
	uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
	while (cur < v &&
	       !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
	return cur;
}
#define KN_CAS64(p, o, n) kn_cas64_host((uint64_t *)(p), (o), (n))
#define KN_MAX64(p, v) kn_max64_host((uint64_t *)(p), (v))
#define KN_CAS32(p, o, n) kn_cas32_host((uint32_t *)(p), (o), (n))
#define KN_FENCE_ACQ() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define KN_FENCE_REL() __atomic_thread_fence(__ATOMIC_RELEASE)
#define KN_FENCE_SYS() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#include <sched.h>
/* A spinning host thread gives its CPU away every 64th pause: the host
 * executor may run more threads than there are cores, and the software
 * NIC's engine, a CPU thread too, must still get to run. */
static inline void kn_host_pause(void)
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
#define KN_PAUSE() kn_host_pause()
KN_DEVICE uint64_t kn_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

/* ---- the device descriptor ---------------------------------------------- */

/* Doorbell modes: how a producer tells the NIC about new WQEs. */
enum kn_db_mode {
	KN_DB_AUTO = 0,      /* host-side only: resolved at QP creation */
	KN_DB_GPU = 1,       /* write the doorbell register directly */
	KN_DB_BLUEFLAME = 2, /* write the whole 64-byte WQE into the register:
			      * words 1..7, then the ctrl word; a doorbell
			      * without the WQE writes a ctrl word with ds 0 */
	KN_DB_CPU_PROXY = 3, /* publish the producer index; a CPU thread rings */
};

/* Resource sharing of one QP between device threads. */
enum kn_share {
	KN_SHARE_EXCLUSIVE = 0, /* one thread (or one warp leader) posts */
	KN_SHARE_CTA = 1,       /* threads of one CTA post concurrently */
	KN_SHARE_GPU = 2,       /* any thread of the grid posts concurrently */
};

#define KN_NO_ERROR UINT64_MAX

/* Mutable per-QP state, written only by device code (never by the NIC). */
typedef struct kn_qp_state {
	uint64_t resv;    /* next send ticket to hand out */
	uint64_t ready;   /* every ticket < ready is written and published */
	uint64_t rung;    /* producer value last written to the doorbell */
	uint64_t done;    /* every ticket < done has a consumed CQE */
	uint32_t db_lock; /* held while ringing, keeps the DBR monotonic */
	uint32_t poll_lock;
	uint64_t err_ticket; /* first ticket completed in error, or KN_NO_ERROR */
	uint32_t err_syndrome;
	uint32_t err_vendor;
	uint64_t rq_resv; /* receive queue: next receive ticket */
	uint64_t rq_done; /* every receive ticket < rq_done has been consumed */
	uint64_t pad[6];
} kn_qp_state;

/* Everything device code needs to drive one RC QP. Exported by the host
 * (kinet_qp_device()); plain data, may be copied to GPU memory. */
typedef struct kn_qp {
	uint8_t *sq;               /* sq_wqe_cnt WQEBBs */
	volatile uint32_t *dbrec;  /* [KN_RCV_DBR], [KN_SND_DBR], big-endian */
	volatile uint8_t *db;      /* doorbell / BlueFlame register, 64 bytes */
	volatile uint32_t *cpu_pi; /* KN_DB_CPU_PROXY: producer published here */
	uint8_t *cq;               /* send CQ, cq_cqe_cnt == sq_wqe_cnt */
	volatile uint32_t *cq_dbrec;
	uint8_t *rq;               /* receive queue: data segments */
	uint8_t *rcq;              /* receive CQ, rcq_cqe_cnt == rq_wqe_cnt */
	volatile uint32_t *rcq_dbrec;
	kn_qp_state *st;
	uint64_t *slot_ready; /* shared modes: slot_ready[slot] = ticket + 1 */
	uint64_t scratch_addr; /* 8 registered bytes for discarded atomic results */
	uint64_t timeout_ns;   /* bound on every blocking call */
	uint32_t scratch_lkey;
	uint32_t qpn;
	uint32_t sq_wqe_cnt; /* power of two */
	uint32_t cq_cqe_cnt;
	uint32_t rq_wqe_cnt; /* power of two, 0 when there is no receive queue */
	uint32_t rq_stride;  /* bytes per receive WQE (16 * sge) */
	uint32_t rcq_cqe_cnt;
	uint32_t db_mode; /* enum kn_db_mode, never KN_DB_AUTO */
	uint32_t share;   /* enum kn_share */
	uint32_t max_inline;
	uint32_t backend; /* informative: 1 soft, 2 mlx5 */
	uint32_t flags;
} kn_qp;

typedef uint64_t kn_ticket_t;

/* Largest payload of kn_prep_write_inline / kn_put_inline (one WQEBB). */
#define KN_MAX_INLINE_WRITE 28u
#define KN_MAX_INLINE_SEND 44u

/* ---- low level: send queue ------------------------------------------------ */

KN_DEVICE struct kn_cqe64 *kn_cqe_at(const kn_qp *qp, uint64_t idx)
{
	return (struct kn_cqe64 *)(qp->cq + (size_t)(idx & (qp->cq_cqe_cnt - 1)) * KN_CQE_SIZE);
}

/* A CQE at index idx is there when its opcode is valid and its owner bit
 * matches idx's lap (bit log2(cnt) of idx). */
KN_DEVICE int kn_cqe_ready(const struct kn_cqe64 *cqe, uint64_t idx, uint32_t cnt)
{
	uint8_t op_own = *(volatile const uint8_t *)&cqe->op_own;
	return (op_own >> 4) != KN_CQE_INVALID && (op_own & 1) == ((idx / cnt) & 1);
}

/* Records the first error of the QP (its ticket and syndrome). */
KN_DEVICE void kn_record_error(const kn_qp *qp, uint64_t ticket, const struct kn_cqe64 *cqe)
{
	const struct kn_err_cqe *e = (const struct kn_err_cqe *)cqe;
	uint64_t prev = KN_LOAD64(&qp->st->err_ticket);
	while (ticket < prev) {
		uint64_t seen = KN_CAS64(&qp->st->err_ticket, prev, ticket);
		if (seen == prev) {
			KN_STORE32(&qp->st->err_syndrome, e->syndrome);
			KN_STORE32(&qp->st->err_vendor, e->vendor_err_synd);
			break;
		}
		prev = seen;
	}
}

/* Consumes every CQE that is there, from st->done on. One thread at a time
 * (poll_lock); returns the new done value. Non-blocking. */
KN_DEVICE uint64_t kn_cq_progress(const kn_qp *qp)
{
	kn_qp_state *st = qp->st;
	if (qp->share != KN_SHARE_EXCLUSIVE && KN_CAS32(&st->poll_lock, 0u, 1u) != 0u)
		return KN_LOAD64(&st->done);
	uint64_t done = KN_LOAD64(&st->done);
	uint64_t start = done;
	uint64_t limit = KN_LOAD64(&st->ready);
#if defined(__CUDA_ARCH__)
	/* device code: the CQ is in host memory, each read a PCIe round trip;
	 * read the owner bytes of up to 8 CQEs at once, then one acquire fence
	 * for the batch (it also orders the caller's later reads of payloads) */
	while (done < limit) {
		uint32_t m = limit - done < 8 ? (uint32_t)(limit - done) : 8u;
		uint8_t own[8];
#pragma unroll
		for (uint32_t k = 0; k < 8; k++)
			own[k] = k < m ? *(volatile const uint8_t *)&kn_cqe_at(qp, done + k)->op_own
				       : (uint8_t)(KN_CQE_INVALID << 4);
		uint32_t got = 0;
#pragma unroll
		for (uint32_t k = 0; k < 8; k++) {
			uint64_t i = done + k;
			if (got != k || (own[k] >> 4) == KN_CQE_INVALID ||
			    (own[k] & 1) != ((i / qp->cq_cqe_cnt) & 1))
				continue;
			got++;
		}
		if (!got)
			break;
		KN_FENCE_ACQ();
		for (uint32_t k = 0; k < got; k++) {
			uint8_t op = own[k] >> 4;
			if (op == KN_CQE_REQ_ERR || op == KN_CQE_RESP_ERR)
				kn_record_error(qp, done + k, kn_cqe_at(qp, done + k));
		}
		done += got;
		if (got < m)
			break;
	}
#else
	while (done < limit) {
		struct kn_cqe64 *cqe = kn_cqe_at(qp, done);
		if (!kn_cqe_ready(cqe, done, qp->cq_cqe_cnt))
			break;
		KN_FENCE_ACQ();
		uint8_t op = kn_cqe_opcode(cqe);
		if (op == KN_CQE_REQ_ERR || op == KN_CQE_RESP_ERR)
			kn_record_error(qp, done, cqe);
		done++;
	}
#endif
	if (done != start) {
		/* consumer index for the NIC (CQ overflow protection) */
		*qp->cq_dbrec = kn_htobe32((uint32_t)(done & 0xffffff));
#if defined(__CUDA_ARCH__)
		if (qp->share == KN_SHARE_EXCLUSIVE) {
			st->done = done; /* one consumer: no ordering to publish */
		} else {
			/* the next lock holder's consumer index must reach the NIC
			 * after ours: a GPU-scope release does not order writes to
			 * host memory as the CPU sees them */
			KN_FENCE_REL();
			KN_STORE64(&st->done, done);
		}
#else
		KN_STORE64(&st->done, done);
#endif
	}
	if (qp->share != KN_SHARE_EXCLUSIVE)
		KN_STORE32(&st->poll_lock, 0u);
	return done;
}

/* Status of a ticket whose CQE has been consumed. */
KN_DEVICE int kn_ticket_status(const kn_qp *qp, uint64_t ticket)
{
#if defined(__CUDA_ARCH__)
	/* the caller's load of done acquires err_ticket and the payloads; the
	 * owner of an exclusive QP consumed the CQEs itself, fenced then */
	if (qp->share != KN_SHARE_EXCLUSIVE)
		KN_FENCE_ACQ();
#endif
	return ticket >= KN_LOAD64(&qp->st->err_ticket) ? -EIO : 0;
}

/* Non-blocking test of one ticket: 0 done, -EIO error, -EBUSY not yet. */
KN_DEVICE int kn_test(const kn_qp *qp, kn_ticket_t ticket)
{
	if (ticket < KN_LOAD64(&qp->st->done) || ticket < kn_cq_progress(qp))
		return kn_ticket_status(qp, ticket);
	return -EBUSY;
}

/* Blocking wait for one ticket, bounded by qp->timeout_ns. */
KN_DEVICE int kn_wait(const kn_qp *qp, kn_ticket_t ticket)
{
	uint64_t t0 = 0;
	unsigned spins = 0;
	for (;;) {
		int rc = kn_test(qp, ticket);
		if (rc != -EBUSY)
			return rc;
		if ((++spins & 255u) == 0) {
			uint64_t now = kn_now_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 > qp->timeout_ns)
				return -ETIMEDOUT;
		}
		KN_PAUSE();
	}
}

/* Syndrome (and vendor syndrome) of the QP's first error CQE; 0 if none. */
KN_DEVICE uint32_t kn_qp_error(const kn_qp *qp, uint32_t *vendor)
{
	if (KN_LOAD64(&qp->st->err_ticket) == KN_NO_ERROR)
		return 0;
	if (vendor)
		*vendor = KN_LOAD32(&qp->st->err_vendor);
	return KN_LOAD32(&qp->st->err_syndrome);
}

/* Reserves n consecutive SQ slots and returns the first ticket in *ticket.
 * Waits (bounded) while the SQ is full. In exclusive mode only the owner may
 * call it; in shared modes any thread may. -ETIMEDOUT: nothing is reserved
 * (in shared modes, unless other threads reserved after this one meanwhile:
 * then publication stops at the abandoned tickets and the QP needs a reset). */
KN_DEVICE int kn_sq_reserve(const kn_qp *qp, uint32_t n, kn_ticket_t *ticket)
{
	kn_qp_state *st = qp->st;
	uint64_t t;
	if (n == 0 || n > qp->sq_wqe_cnt)
		return -EINVAL;
	if (qp->share == KN_SHARE_EXCLUSIVE) {
		t = st->resv;
		st->resv = t + n;
	} else {
		t = KN_FADD64(&st->resv, n);
	}
	*ticket = t;
	/* the slots of t .. t+n-1 last held t-cnt .. t+n-1-cnt */
	uint64_t need = t + n - qp->sq_wqe_cnt; /* done must exceed need-1 */
#if defined(__CUDA_ARCH__)
	/* device code: the owner of an exclusive QP is the only writer of done */
	uint64_t d = qp->share == KN_SHARE_EXCLUSIVE ? st->done : KN_LOAD64(&st->done);
	if (t + n <= qp->sq_wqe_cnt || d >= need)
		return 0;
#else
	if (t + n <= qp->sq_wqe_cnt || KN_LOAD64(&st->done) >= need)
		return 0;
#endif
	uint64_t t0 = kn_now_ns();
	while (kn_cq_progress(qp) < need) {
		if (kn_now_ns() - t0 > qp->timeout_ns) {
			/* give the tickets back: a reserved ticket never published
			 * would stop publication (shared modes) or let the NIC run
			 * the slot's previous WQE again (exclusive). In shared modes
			 * this works while nobody has reserved after us. */
			if (qp->share == KN_SHARE_EXCLUSIVE)
				st->resv = t;
			else
				KN_CAS64(&st->resv, t + n, t);
			return -ETIMEDOUT;
		}
		KN_PAUSE();
	}
	return 0;
}

/* Address of the WQE of a ticket. */
KN_DEVICE void *kn_wqe_ptr(const kn_qp *qp, kn_ticket_t ticket)
{
	return qp->sq + (size_t)(ticket & (qp->sq_wqe_cnt - 1)) * KN_SEND_WQE_BB;
}

KN_DEVICE void kn_ctrl(const kn_qp *qp, void *wqe, kn_ticket_t t, uint8_t opcode, uint8_t ds,
		       uint32_t imm)
{
	kn_set_ctrl_seg((struct kn_wqe_ctrl_seg *)wqe, (uint16_t)t, opcode, 0, qp->qpn,
			KN_WQE_CTRL_CQ_UPDATE, ds, 0, imm);
}

KN_DEVICE void kn_prep_nop(const kn_qp *qp, void *wqe, kn_ticket_t t)
{
	kn_ctrl(qp, wqe, t, KN_OPCODE_NOP, 1, 0);
}

/* RDMA write (imm_be != 0 or opcode WRITE_IMM: write with immediate). */
KN_DEVICE void kn_prep_write(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
			     uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), len, lkey, laddr);
	kn_ctrl(qp, wqe, t, KN_OPCODE_RDMA_WRITE, 3, 0);
}

/* RDMA write with immediate; imm is in host order, consumes a receive WQE. */
KN_DEVICE void kn_prep_write_imm(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
				 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len,
				 uint32_t imm)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), len, lkey, laddr);
	kn_ctrl(qp, wqe, t, KN_OPCODE_RDMA_WRITE_IMM, 3, kn_htobe32(imm));
}

/* RDMA write of len <= KN_MAX_INLINE_WRITE bytes carried in the WQE. */
KN_DEVICE int kn_prep_write_inline(const kn_qp *qp, void *wqe, kn_ticket_t t, const void *src,
				   uint32_t len, uint64_t raddr, uint32_t rkey)
{
	uint8_t *w = (uint8_t *)wqe;
	if (len > KN_MAX_INLINE_WRITE)
		return -EINVAL;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	((struct kn_wqe_inl_data_seg *)(w + 32))->byte_count = kn_htobe32(len | KN_INLINE_SEG);
	for (uint32_t i = 0; i < len; i++)
		w[36 + i] = ((const uint8_t *)src)[i];
	kn_ctrl(qp, wqe, t, KN_OPCODE_RDMA_WRITE, (uint8_t)((36 + len + 15) / 16), 0);
	return 0;
}

KN_DEVICE void kn_prep_read(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
			    uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 32), len, lkey, laddr);
	kn_ctrl(qp, wqe, t, KN_OPCODE_RDMA_READ, 3, 0);
}

/* SEND (with_imm: SEND_IMM carrying imm, host order). */
KN_DEVICE void kn_prep_send(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
			    uint32_t lkey, uint32_t len, int with_imm, uint32_t imm)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 16), len, lkey, laddr);
	kn_ctrl(qp, wqe, t, with_imm ? KN_OPCODE_SEND_IMM : KN_OPCODE_SEND, 2,
		with_imm ? kn_htobe32(imm) : 0);
}

/* Atomic fetch-add of 8 bytes at raddr (8-aligned); the old value lands,
 * big-endian as the NIC returns it, at laddr (8 registered bytes). */
KN_DEVICE void kn_prep_atomic_fa(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
				 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), add, 0);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, lkey, laddr);
	kn_ctrl(qp, wqe, t, KN_OPCODE_ATOMIC_FA, 4, 0);
}

/* Atomic compare-and-swap: if *raddr == compare then *raddr = swap; the old
 * value lands big-endian at laddr. */
KN_DEVICE void kn_prep_atomic_cs(const kn_qp *qp, void *wqe, kn_ticket_t t, uint64_t laddr,
				 uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t compare,
				 uint64_t swap)
{
	uint8_t *w = (uint8_t *)wqe;
	kn_set_raddr_seg((struct kn_wqe_raddr_seg *)(w + 16), raddr, rkey);
	kn_set_atomic_seg((struct kn_wqe_atomic_seg *)(w + 32), swap, compare);
	kn_set_data_seg((struct kn_wqe_data_seg *)(w + 48), 8, lkey, laddr);
	kn_ctrl(qp, wqe, t, KN_OPCODE_ATOMIC_CS, 4, 0);
}

/* Rings the doorbell for every WQE below producer p (caller holds db_lock or
 * owns the QP). DBR first, then the register, with the fences between. */
KN_DEVICE void kn_ring(const kn_qp *qp, uint64_t p)
{
	if (qp->db_mode == KN_DB_CPU_PROXY) {
		KN_FENCE_SYS();
		*qp->cpu_pi = (uint32_t)p;
		KN_FENCE_SYS();
		return;
	}
	KN_FENCE_SYS(); /* WQEs visible before the doorbell record */
	qp->dbrec[KN_SND_DBR] = kn_htobe32((uint32_t)(p & 0xffff));
	KN_FENCE_SYS(); /* doorbell record before the register */
	const uint64_t *last = (const uint64_t *)kn_wqe_ptr(qp, p - 1);
	volatile uint64_t *reg = (volatile uint64_t *)qp->db;
	if (qp->db_mode == KN_DB_BLUEFLAME) {
		for (int i = 1; i < 8; i++)
			reg[i] = last[i];
		KN_FENCE_SYS();
		reg[0] = last[0]; /* the ctrl word last: it is the doorbell */
	} else {
		reg[0] = last[0];
	}
	KN_FENCE_SYS();
}

#if defined(__CUDACC__)
/* One 64-byte WQE in registers: device code builds a WQE here and stores it
 * into the SQ with four 16-byte writes (the SQ is host memory across PCIe:
 * one write per field would cost one PCIe write each). */
typedef struct __align__(16) kn_wqebb {
	uint64_t q[8];
} kn_wqebb;

KN_DEVICE void kn_wqe_store(const kn_qp *qp, kn_ticket_t t, const kn_wqebb *w)
{
	uint4 *d = (uint4 *)kn_wqe_ptr(qp, t);
	const uint4 *s = (const uint4 *)w;
	d[0] = s[0];
	d[1] = s[1];
	d[2] = s[2];
	d[3] = s[3];
}
#endif

#if defined(__CUDA_ARCH__)

/* The doorbell word of the WQE before producer p: the first 8 bytes of an
 * mlx5 ctrl segment naming the QP and the WQE index (the NIC reads the rest
 * of the WQE from the SQ), built here instead of being read back from the SQ
 * across PCIe. */
KN_DEVICE uint64_t kn_db_word(const kn_qp *qp, uint64_t p)
{
	uint32_t w0 = kn_htobe32((uint32_t)((p - 1) & 0xffff) << 8);
	uint32_t w1 = kn_htobe32(qp->qpn << 8);
	return (uint64_t)w0 | ((uint64_t)w1 << 32);
}

/* kn_ring for device code. last: the ringer's own copy of WQE p-1 or NULL.
 * BlueFlame writes the whole WQE only when the ringer has it in registers;
 * otherwise the register gets the 8-byte doorbell (as mlx5 drivers do when
 * BlueFlame does not apply). Release fences order the WQEs (this thread's
 * and those it observed published) before the record, the record before the
 * register. */
KN_DEVICE void kn_ring_cu(const kn_qp *qp, uint64_t p, const kn_wqebb *last)
{
	if (qp->db_mode == KN_DB_CPU_PROXY) {
		KN_FENCE_REL();
		*qp->cpu_pi = (uint32_t)p;
		return;
	}
	KN_FENCE_REL();
	qp->dbrec[KN_SND_DBR] = kn_htobe32((uint32_t)(p & 0xffff));
	/* the software NIC takes the record or the register, whichever it sees
	 * first, so only hardware needs the record ordered before the register;
	 * and a BlueFlame body: the NIC trusts its copy of the register only
	 * when no later record is visible after it (docs/ordering.md) */
	if (qp->backend != 1 || (qp->db_mode == KN_DB_BLUEFLAME && last))
		KN_FENCE_REL();
	volatile uint64_t *reg = (volatile uint64_t *)qp->db;
	if (qp->db_mode == KN_DB_BLUEFLAME && last) {
		reg[1] = last->q[1];
		for (int i = 2; i < 8; i += 2)
			asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(reg + i),
				     "l"(last->q[i]), "l"(last->q[i + 1])
				     : "memory");
		KN_FENCE_REL();
		reg[0] = last->q[0]; /* the ctrl word last: it is the doorbell */
	} else {
		reg[0] = last ? last->q[0] : kn_db_word(qp, p);
	}
}
#endif

/* kn_ring, with the caller's own copy of WQE p-1 when it has one (device
 * code: no read-back of the SQ). The C build reads the SQ as before. */
KN_DEVICE void kn_ring_last(const kn_qp *qp, uint64_t p, const void *last)
{
#if defined(__CUDA_ARCH__)
	kn_ring_cu(qp, p, (const kn_wqebb *)last);
#else
	(void)last;
	kn_ring(qp, p);
#endif
}

/* Publishes tickets [t, t+n) and rings the doorbell; last: the caller's own
 * copy of WQE t+n-1 (device code builds WQEs in registers) or NULL. Shared modes: slots are
 * marked ready, and whoever finds the next slot ready advances the in-order
 * "ready" counter past it, so no thread waits for its predecessors; one
 * thread at a time rings, with a value that never goes backwards. */
KN_DEVICE void kn_sq_submit_last(const kn_qp *qp, kn_ticket_t t, uint32_t n, const void *last)
{
	kn_qp_state *st = qp->st;
	if (qp->share == KN_SHARE_EXCLUSIVE) {
#if defined(__CUDA_ARCH__)
		st->ready = t + n; /* read by the owner only */
#else
		KN_STORE64(&st->ready, t + n);
#endif
		kn_ring_last(qp, t + n, last);
		st->rung = t + n;
		return;
	}
	uint64_t mask = qp->sq_wqe_cnt - 1;
	KN_FENCE_REL();
#if defined(__CUDA_ARCH__)
	/* device code. The marks: relaxed stores after the release fence above
	 * (it made our WQEs visible to the NIC), then a GPU-scope full fence
	 * (marks and ready live in GPU memory). The advance: only the thread
	 * whose tickets are at the head (ready in [t, t+n)) advances, over a
	 * run of up to 32 marked slots per compare-and-swap, read 8 at a time,
	 * and goes on after each success; a thread behind the head leaves, and
	 * a failed CAS means another thread advanced and goes on itself. The
	 * full fence after a successful CAS pairs with the one after the marks
	 * (store buffering): either the head sees a new mark or its owner sees
	 * itself at the head. Thousands of threads on one QP then cost a few
	 * atomics per run instead of a contended CAS per slot. */
	for (uint32_t i = 0; i < n; i++)
		*(volatile uint64_t *)&qp->slot_ready[(t + i) & mask] = t + i + 1;
	asm volatile("fence.sc.gpu;" ::: "memory");
	uint64_t r = KN_LOAD64(&st->ready);
	uint64_t h0 = t, h1 = t + n; /* our tickets; then the slot we stand on */
	while (r >= h0 && r < h1) {
		uint64_t e = r;
		for (int chunk = 0; chunk < 4; chunk++) {
			uint64_t v[8];
#pragma unroll
			for (int k = 0; k < 8; k++)
				v[k] = KN_LOAD64(&qp->slot_ready[(e + k) & mask]);
			int k = 0;
#pragma unroll
			for (int j = 0; j < 8; j++)
				if (k == j && v[j] == e + j + 1)
					k++;
			e += k;
			if (k < 8)
				break;
		}
		if (e == r)
			break;
		if (KN_CAS64(&st->ready, r, e) != r)
			break;
		asm volatile("fence.sc.gpu;" ::: "memory");
		r = e;
		h0 = e; /* we now stand at the head */
		h1 = e + 1;
	}
#else
	for (uint32_t i = 0; i < n; i++)
		KN_STORE64(&qp->slot_ready[(t + i) & mask], t + i + 1);
	KN_FENCE_SYS();
	/* advance ready over every consecutive ready slot */
	uint64_t r = KN_LOAD64(&st->ready);
	for (;;) {
		if (KN_LOAD64(&qp->slot_ready[r & mask]) != r + 1)
			break;
		uint64_t seen = KN_CAS64(&st->ready, r, r + 1);
		r = (seen == r) ? r + 1 : seen;
	}
#endif
#if defined(__CUDA_ARCH__)
	/* our advance of ready before our look at rung/db_lock, against the
	 * holder's release of db_lock before its look at ready (store buffering:
	 * both sides need a full fence; the C build's atomics are seq_cst; all
	 * three words are in GPU memory) */
	asm volatile("fence.sc.gpu;" ::: "memory");
#endif
	/* ring: a single ringer at a time, re-checking after release */
	for (;;) {
		uint64_t ready = KN_LOAD64(&st->ready);
		if (KN_LOAD64(&st->rung) >= ready)
			return;
		if (KN_CAS32(&st->db_lock, 0u, 1u) != 0u)
			return; /* the holder re-checks after releasing */
		ready = KN_LOAD64(&st->ready);
		if (ready > st->rung) {
			kn_ring_last(qp, ready, ready == t + n ? last : (const void *)0);
			KN_STORE64(&st->rung, ready);
		}
		KN_FENCE_SYS();
		KN_STORE32(&st->db_lock, 0u);
		KN_FENCE_SYS();
	}
}

/* Publishes tickets [t, t+n) and rings the doorbell (kn_sq_submit_last
 * without a copy of the last WQE). */
KN_DEVICE void kn_sq_submit(const kn_qp *qp, kn_ticket_t t, uint32_t n)
{
	kn_sq_submit_last(qp, t, n, (const void *)0);
}

/* Waits for every ticket reserved so far; 0 or the first error. */
KN_DEVICE int kn_quiet(const kn_qp *qp)
{
	uint64_t last = KN_LOAD64(&qp->st->resv);
	if (last == 0)
		return 0;
	/* tickets reserved but not yet published cannot complete: wait for the
	 * publication of all of them first (bounded by kn_wait's timeout). */
	int rc = kn_wait(qp, last - 1);
	if (rc == -EIO)
		return -EIO;
	return rc;
}

/* ---- high level ------------------------------------------------------------ */

/* Where a high-level call builds its WQE: in the SQ slot (C), or in
 * registers, then stored with 16-byte writes and handed to the doorbell
 * (device code). */
#if defined(__CUDA_ARCH__)
#define KN_WQE_DECL(w) kn_wqebb w##_bb = {}
#define KN_WQE_AT(qp, t, w) ((void *)&w##_bb)
#define KN_WQE_PUT(qp, t, w) kn_wqe_store(qp, t, &w##_bb)
#define KN_WQE_OWN(w) ((const void *)&w##_bb)
#else
#define KN_WQE_DECL(w) (void)0
#define KN_WQE_AT(qp, t, w) kn_wqe_ptr(qp, t)
#define KN_WQE_PUT(qp, t, w) (void)0
#define KN_WQE_OWN(w) ((const void *)0)
#endif

/* Each call posts, rings and returns the ticket of its (last) WQE: wait for
 * it with kn_wait(), or for everything with kn_quiet(). */

KN_DEVICE int kn_put(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
		     uint32_t lkey, uint32_t len, kn_ticket_t *ticket)
{
	kn_ticket_t t;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w);
	kn_prep_write(qp, KN_WQE_AT(qp, t, w), t, (uint64_t)(uintptr_t)laddr, lkey, raddr, rkey,
		      len);
	KN_WQE_PUT(qp, t, w);
	kn_sq_submit_last(qp, t, 1, KN_WQE_OWN(w));
	if (ticket)
		*ticket = t;
	return 0;
}

KN_DEVICE int kn_put_inline(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *src,
			    uint32_t len, kn_ticket_t *ticket)
{
	kn_ticket_t t;
	if (len > KN_MAX_INLINE_WRITE || len > qp->max_inline)
		return -EINVAL;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w);
	kn_prep_write_inline(qp, KN_WQE_AT(qp, t, w), t, src, len, raddr, rkey);
	KN_WQE_PUT(qp, t, w);
	kn_sq_submit_last(qp, t, 1, KN_WQE_OWN(w));
	if (ticket)
		*ticket = t;
	return 0;
}

KN_DEVICE int kn_get(const kn_qp *qp, void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		     uint32_t len, kn_ticket_t *ticket)
{
	kn_ticket_t t;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w);
	kn_prep_read(qp, KN_WQE_AT(qp, t, w), t, (uint64_t)(uintptr_t)laddr, lkey, raddr, rkey,
		     len);
	KN_WQE_PUT(qp, t, w);
	kn_sq_submit_last(qp, t, 1, KN_WQE_OWN(w));
	if (ticket)
		*ticket = t;
	return 0;
}

/* Atomic add of `add` to the remote 64-bit signal word (result discarded). */
KN_DEVICE int kn_signal(const kn_qp *qp, uint64_t sig_raddr, uint32_t sig_rkey, uint64_t add,
			kn_ticket_t *ticket)
{
	kn_ticket_t t;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w);
	kn_prep_atomic_fa(qp, KN_WQE_AT(qp, t, w), t, qp->scratch_addr, qp->scratch_lkey,
			  sig_raddr, sig_rkey, add);
	KN_WQE_PUT(qp, t, w);
	kn_sq_submit_last(qp, t, 1, KN_WQE_OWN(w));
	if (ticket)
		*ticket = t;
	return 0;
}

/* Write, then atomic add on a remote signal word: RC executes them in order,
 * so a reader that sees the signal sees the data. */
KN_DEVICE int kn_put_signal(const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
			    uint32_t lkey, uint32_t len, uint64_t sig_raddr, uint32_t sig_rkey,
			    uint64_t add, kn_ticket_t *ticket)
{
	kn_ticket_t t;
	int rc = kn_sq_reserve(qp, 2, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w0);
	KN_WQE_DECL(w1);
	kn_prep_write(qp, KN_WQE_AT(qp, t, w0), t, (uint64_t)(uintptr_t)laddr, lkey, raddr, rkey,
		      len);
	kn_prep_atomic_fa(qp, KN_WQE_AT(qp, t + 1, w1), t + 1, qp->scratch_addr,
			  qp->scratch_lkey, sig_raddr, sig_rkey, add);
	KN_WQE_PUT(qp, t, w0);
	KN_WQE_PUT(qp, t + 1, w1);
	kn_sq_submit_last(qp, t, 2, KN_WQE_OWN(w1));
	if (ticket)
		*ticket = t + 1;
	return 0;
}

/* Blocking atomics: the old remote value is returned in *old (host order).
 * res/res_lkey: 8 registered bytes where the NIC lands the result. */
KN_DEVICE int kn_atomic_fetch_add(const kn_qp *qp, uint64_t raddr, uint32_t rkey, uint64_t add,
				  uint64_t *res, uint32_t res_lkey, uint64_t *old)
{
	kn_ticket_t t;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w);
	kn_prep_atomic_fa(qp, KN_WQE_AT(qp, t, w), t, (uint64_t)(uintptr_t)res, res_lkey, raddr,
			  rkey, add);
	KN_WQE_PUT(qp, t, w);
	kn_sq_submit_last(qp, t, 1, KN_WQE_OWN(w));
	rc = kn_wait(qp, t);
	if (rc == 0 && old) {
		KN_FENCE_ACQ();
		*old = kn_be64toh(*(volatile uint64_t *)res);
	}
	return rc;
}

KN_DEVICE int kn_atomic_compare_swap(const kn_qp *qp, uint64_t raddr, uint32_t rkey,
				     uint64_t compare, uint64_t swap, uint64_t *res,
				     uint32_t res_lkey, uint64_t *old)
{
	kn_ticket_t t;
	int rc = kn_sq_reserve(qp, 1, &t);
	if (rc)
		return rc;
	KN_WQE_DECL(w);
	kn_prep_atomic_cs(qp, KN_WQE_AT(qp, t, w), t, (uint64_t)(uintptr_t)res, res_lkey, raddr,
			  rkey, compare, swap);
	KN_WQE_PUT(qp, t, w);
	kn_sq_submit_last(qp, t, 1, KN_WQE_OWN(w));
	rc = kn_wait(qp, t);
	if (rc == 0 && old) {
		KN_FENCE_ACQ();
		*old = kn_be64toh(*(volatile uint64_t *)res);
	}
	return rc;
}

/* Waits until the local 64-bit signal word reaches at least `value`, at most
 * timeout_ns: 0 or -ETIMEDOUT. */
KN_DEVICE int kn_wait_signal(const volatile uint64_t *sig, uint64_t value, uint64_t timeout_ns)
{
	uint64_t t0 = kn_now_ns();
	unsigned spins = 0;
	while (*sig < value) {
		if ((++spins & 63u) == 0 && kn_now_ns() - t0 > timeout_ns)
			return *sig >= value ? 0 : -ETIMEDOUT;
		KN_PAUSE();
	}
	KN_FENCE_ACQ();
	return 0;
}

/* ---- receive queue (one consumer: the QP's owner) ------------------------ */

/* What a receive completion said. */
typedef struct kn_recv_info {
	uint32_t byte_len;
	uint32_t imm;     /* host order, when has_imm */
	uint8_t opcode;   /* KN_CQE_RESP_* or KN_CQE_RESP_ERR */
	uint8_t has_imm;
	uint8_t syndrome; /* error CQE only */
	uint8_t rsvd;
} kn_recv_info;

/* Posts one receive buffer; the receive ticket comes back in *ticket. */
KN_DEVICE int kn_recv_post(const kn_qp *qp, void *addr, uint32_t lkey, uint32_t len,
			   kn_ticket_t *ticket)
{
	kn_qp_state *st = qp->st;
	if (!qp->rq_wqe_cnt)
		return -EINVAL;
	uint64_t t = st->rq_resv;
	if (t - KN_LOAD64(&st->rq_done) >= qp->rq_wqe_cnt)
		return -EBUSY; /* every receive slot holds an unconsumed buffer */
	struct kn_wqe_data_seg *seg =
		(struct kn_wqe_data_seg *)(qp->rq + (size_t)(t & (qp->rq_wqe_cnt - 1)) * qp->rq_stride);
	kn_set_data_seg(seg, len, lkey, (uint64_t)(uintptr_t)addr);
	for (uint32_t off = 16; off < qp->rq_stride; off += 16) /* terminate the list */
		kn_set_data_seg(seg + off / 16, 0, 0x100 /* invalid lkey */, 0);
	st->rq_resv = t + 1;
	KN_FENCE_SYS();
	qp->dbrec[KN_RCV_DBR] = kn_htobe32((uint32_t)((t + 1) & 0xffff));
	KN_FENCE_SYS();
	*ticket = t;
	return 0;
}

/* Polls the receive completion of a receive ticket (tickets are consumed in
 * order). blocking: wait up to timeout_ns. 0, -EIO (info->syndrome), -EBUSY,
 * -ETIMEDOUT. */
KN_DEVICE int kn_recv_poll(const kn_qp *qp, kn_ticket_t ticket, int blocking, kn_recv_info *info)
{
	kn_qp_state *st = qp->st;
	if (ticket != st->rq_done)
		return -EINVAL;
	struct kn_cqe64 *cqe =
		(struct kn_cqe64 *)(qp->rcq + (size_t)(ticket & (qp->rcq_cqe_cnt - 1)) * KN_CQE_SIZE);
	uint64_t t0 = 0;
	while (!kn_cqe_ready(cqe, ticket, qp->rcq_cqe_cnt)) {
		if (!blocking)
			return -EBUSY;
		uint64_t now = kn_now_ns();
		if (!t0)
			t0 = now;
		else if (now - t0 > qp->timeout_ns)
			return -ETIMEDOUT;
		KN_PAUSE();
	}
	KN_FENCE_ACQ();
	uint8_t op = kn_cqe_opcode(cqe);
	info->opcode = op;
	info->byte_len = kn_be32toh(cqe->byte_cnt);
	info->has_imm = (op == KN_CQE_RESP_SEND_IMM || op == KN_CQE_RESP_WR_IMM);
	info->imm = info->has_imm ? kn_be32toh(cqe->imm_inval_pkey) : 0;
	info->syndrome = (op == KN_CQE_RESP_ERR || op == KN_CQE_REQ_ERR)
				 ? ((struct kn_err_cqe *)cqe)->syndrome
				 : 0;
	st->rq_done = ticket + 1;
	*qp->rcq_dbrec = kn_htobe32((uint32_t)((ticket + 1) & 0xffffff));
	return info->syndrome ? -EIO : 0;
}

#endif /* KINET_DEVICE_H */
