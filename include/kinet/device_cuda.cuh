/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_cuda.cuh - the device data path at warp and block scope
 * (CUDA only). Include it from .cu files, after or instead of
 * <kinet/device.h>.
 *
 * Warp scope: all 32 lanes of the warp call the same function (a lane with
 * nothing to post passes op == NULL to kn_warp_post); the posting lanes make
 * ONE reservation for all their WQEs, each builds its own WQE(s) in
 * registers and stores them with 16-byte writes, and the lane holding the
 * last WQE rings ONE doorbell (with BlueFlame, the whole last WQE). The
 * functions start with __syncwarp(), so a warp that diverged before the call
 * still makes one call, never two concurrent halves (which an exclusive QP
 * could not take).
 * Block scope: the same for every thread of the CTA, which must all call
 * (the functions use __syncthreads()). A block larger than the SQ is posted
 * in rounds of at most sq_wqe_cnt WQEs, one reservation and one doorbell per
 * round.
 *
 * Sharing (kn_qp.share): exclusive, one warp (warp scope) or one CTA (block
 * scope) owns the QP; CTA-shared and GPU-shared, any number of warps/CTAs of
 * the CTA/grid post concurrently (reservations are atomic, publication is in
 * order through slot_ready, see kinet/device_sq.h).
 *
 * Tickets: each lane gets the ticket of its own (last) WQE. Waiting: use
 * kn_warp_wait / kn_warp_quiet / kn_block_quiet (on an exclusive QP the lanes
 * must not call kn_wait each on their own: one consumer at a time).
 * Returns as the thread-scope calls: 0, -EINVAL, -ETIMEDOUT, -EIO; every
 * participating lane/thread gets the same return value of the reservation.
 * -EINVAL (any lane's op refused by the checks of kn_post: unknown kind, a
 * length over KN_MAX_LEN, an inline payload too large; or an operation with
 * a WQE of two WQEBBs, a SET signal or an 8-byte masked compare-and-swap,
 * which kn_post alone takes): nothing is reserved or written, for the whole
 * warp or block.
 *
 * Operations are the kn_op descriptions of kinet/device_ops.h: kn_warp_post
 * and kn_block_post take one per lane/thread, and each kn_warp_<op> /
 * kn_block_<op> is kn_op_<op> followed by the post, the WQEs built by the
 * same builders as at thread scope.
 */
#ifndef KINET_DEVICE_CUDA_CUH
#define KINET_DEVICE_CUDA_CUH

#if !defined(__CUDACC__)
#error "kinet/device_cuda.cuh is CUDA only: compile with nvcc"
#endif

#include <kinet/device.h>

#define KNX_FULL_WARP 0xffffffffu

static __device__ __forceinline__ uint32_t knx_lane_id(void)
{
	uint32_t l;
	asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
	return l;
}

/* ---- the steps both scopes share ------------------------------------------ */

/* What differs stays in each scope's post: a warp agrees through shuffles
 * (lanes without an op, one reservation), a CTA through shared memory and
 * __syncthreads (every thread posts, in rounds of at most the SQ's depth). */

/* 1 when op can be posted at thread scope only (knx_op_check refuses it, or a
 * WQE of it spans two WQEBBs): warp and block scope refuse it with -EINVAL. */
static __device__ __forceinline__ int knx_op_refused(const kn_qp *qp, const kn_op *op)
{
	return knx_op_check(qp, op) != 0 || knx_op_span(op) != 0;
}

/* Builds this lane's (thread's) checked op, nw WQEs from ticket t, in
 * registers (w0, w1) and stores them in the SQ with 16-byte writes. The
 * ringing lane hands the copy of the last WQE (w1 when nw is 2, else w0) to
 * knx_sq_submit_last: with BlueFlame, the whole WQE. */
static __device__ __forceinline__ void knx_op_store(const kn_qp *qp, const kn_op *op, kn_ticket_t t,
						    uint32_t nw, knx_wqebb *w0, knx_wqebb *w1)
{
	knx_op_build(qp, op, t, w0, w1);
	knx_wqe_store(qp, t, w0);
	if (nw == 2)
		knx_wqe_store(qp, t + 1, w1);
}

/* ---- warp scope ----------------------------------------------------------- */

/* Posts the ops of the lanes that pass one (op == NULL: this lane posts
 * nothing): one reservation, one doorbell. Every lane of the warp calls. */
static __device__ __forceinline__ int kn_warp_post(const kn_qp *qp, const kn_op *op,
						   kn_ticket_t *ticket)
{
	__syncwarp(); /* converge: one call of the whole warp, never two halves */
	uint32_t lane = knx_lane_id();
	if (__any_sync(KNX_FULL_WARP, op && knx_op_refused(qp, op)))
		return -EINVAL;
	uint32_t mask = __ballot_sync(KNX_FULL_WARP, op != NULL);
	if (!mask)
		return 0;
	uint32_t leader = (uint32_t)__ffs(mask) - 1;
	uint32_t lastl = 31u - (uint32_t)__clz(mask);
	uint32_t nw = op ? knx_op_nwqe(op) : 0u;
	/* exclusive prefix sum of the WQE counts: this lane's offset */
	uint32_t incl = nw;
#pragma unroll
	for (int d = 1; d < 32; d <<= 1) {
		uint32_t o = __shfl_up_sync(KNX_FULL_WARP, incl, d);
		if (lane >= (uint32_t)d)
			incl += o;
	}
	uint32_t n = __shfl_sync(KNX_FULL_WARP, incl, 31);
	uint32_t off = incl - nw;
	int rc = 0;
	unsigned long long t0 = 0;
	if (lane == leader) {
		kn_ticket_t t;
		rc = kn_sq_reserve(qp, n, &t);
		t0 = t;
	}
	rc = __shfl_sync(KNX_FULL_WARP, rc, (int)leader);
	t0 = __shfl_sync(KNX_FULL_WARP, t0, (int)leader);
	if (rc)
		return rc;
	kn_ticket_t t = t0 + off;
	knx_wqebb w0 = {}, w1 = {};
	if (op)
		knx_op_store(qp, op, t, nw, &w0, &w1);
	/* __syncwarp orders every lane's WQE before what the ringing lane does
	 * next; its release fence in the ring is cumulative over them */
	__syncwarp();
	if (lane == lastl)
		knx_sq_submit_last(qp, t0, n, nw == 2 ? &w1 : &w0);
	__syncwarp();
	if (ticket)
		*ticket = op ? t + nw - 1 : 0;
	return 0;
}

/* Waits (one lane polls) until the largest ticket of the warp has
 * completed; each lane gets the status of its own ticket (a lane that
 * posted nothing passes 0). Every lane of the warp calls. */
static __device__ __forceinline__ int kn_warp_wait(const kn_qp *qp, kn_ticket_t ticket)
{
	__syncwarp();
	unsigned long long m = ticket;
#pragma unroll
	for (int d = 16; d > 0; d >>= 1) {
		unsigned long long o = __shfl_xor_sync(KNX_FULL_WARP, m, d);
		m = o > m ? o : m;
	}
	int rc = 0;
	if (knx_lane_id() == 0)
		rc = kn_wait(qp, (kn_ticket_t)m);
	rc = __shfl_sync(KNX_FULL_WARP, rc, 0);
	__syncwarp(); /* lane 0's acquire of the CQEs covers the other lanes' reads */
	if (rc == -ETIMEDOUT)
		return rc;
	return kn_ticket_status(qp, ticket);
}

/* Waits for every ticket reserved on the QP so far (one lane polls). Every
 * lane of the warp calls. */
static __device__ __forceinline__ int kn_warp_quiet(const kn_qp *qp)
{
	__syncwarp();
	int rc = 0;
	if (knx_lane_id() == 0)
		rc = kn_quiet(qp);
	rc = __shfl_sync(KNX_FULL_WARP, rc, 0);
	__syncwarp();
	return rc;
}

/* ---- block scope ---------------------------------------------------------- */

static __device__ __forceinline__ uint32_t knx_block_tid(void)
{
	return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/* Posts one op per thread of the CTA: one reservation and one doorbell per
 * round of at most sq_wqe_cnt WQEs. Every thread of the CTA must call. */
static __device__ __forceinline__ int kn_block_post(const kn_qp *qp, const kn_op *op,
						    kn_ticket_t *ticket)
{
	__shared__ unsigned long long knx_s_t;
	__shared__ int knx_s_rc;
	uint32_t tid = knx_block_tid();
	uint32_t nthr = blockDim.x * blockDim.y * blockDim.z;
	uint32_t nw = knx_op_nwqe(op);
	if (__syncthreads_or(knx_op_refused(qp, op)))
		return -EINVAL;
	uint32_t per = qp->sq_wqe_cnt / nw;
	for (uint32_t base = 0; base < nthr; base += per) {
		uint32_t cnt = nthr - base < per ? nthr - base : per;
		if (tid == 0) {
			kn_ticket_t t;
			knx_s_rc = kn_sq_reserve(qp, cnt * nw, &t);
			knx_s_t = t;
		}
		__syncthreads();
		int rc = knx_s_rc;
		kn_ticket_t t0 = knx_s_t;
		if (rc) {
			__syncthreads(); /* everyone has read knx_s_rc */
			return rc;
		}
		knx_wqebb w0 = {}, w1 = {};
		bool mine = tid >= base && tid < base + cnt;
		if (mine) {
			kn_ticket_t t = t0 + (uint64_t)(tid - base) * nw;
			knx_op_store(qp, op, t, nw, &w0, &w1);
			KN_FENCE_REL(); /* before the doorbell another thread rings */
			if (ticket)
				*ticket = t + nw - 1;
		}
		__syncthreads();
		if (tid == base + cnt - 1)
			knx_sq_submit_last(qp, t0, cnt * nw, nw == 2 ? &w1 : &w0);
	}
	return 0;
}

/* Waits for every ticket reserved on the QP so far (thread 0 polls); every
 * thread of the CTA must call and gets the same result. */
static __device__ __forceinline__ int kn_block_quiet(const kn_qp *qp)
{
	__shared__ int knx_s_qrc;
	if (knx_block_tid() == 0)
		knx_s_qrc = kn_quiet(qp);
	__syncthreads();
	int rc = knx_s_qrc;
	__syncthreads(); /* everyone has read it before the next call writes it */
	return rc;
}

/* ---- operations at both scopes -------------------------------------------- */

/* kn_warp_<op> is kn_op_<op> + kn_warp_post, kn_block_<op> kn_op_<op> +
 * kn_block_post; arguments as the thread-scope kn_<op>. KNX_SCOPE_OP(op,
 * (parameters), arguments of kn_op_<op>) defines the pair. */
#define KNX_SCOPE_OP1(scope, name, params, ...)                                                 \
	static __device__ __forceinline__ int kn_##scope##_##name params                       \
	{                                                                                       \
		kn_op op;                                                                       \
		kn_op_##name(&op, __VA_ARGS__);                                                 \
		return kn_##scope##_post(qp, &op, ticket);                                      \
	}
#define KNX_SCOPE_OP(name, params, ...)                                                         \
	KNX_SCOPE_OP1(warp, name, params, __VA_ARGS__)                                          \
	KNX_SCOPE_OP1(block, name, params, __VA_ARGS__)

/* kn_warp_put, kn_block_put */
KNX_SCOPE_OP(put, (const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
		   uint32_t lkey, uint32_t len, kn_ticket_t *ticket),
	     raddr, rkey, laddr, lkey, len)
/* kn_warp_put_inline, kn_block_put_inline */
KNX_SCOPE_OP(put_inline, (const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *src,
			  uint32_t len, kn_ticket_t *ticket),
	     raddr, rkey, src, len)
/* kn_warp_get, kn_block_get */
KNX_SCOPE_OP(get, (const kn_qp *qp, void *laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		   uint32_t len, kn_ticket_t *ticket),
	     laddr, lkey, raddr, rkey, len)
/* kn_warp_put_signal, kn_block_put_signal */
KNX_SCOPE_OP(put_signal, (const kn_qp *qp, uint64_t raddr, uint32_t rkey, const void *laddr,
			  uint32_t lkey, uint32_t len, uint64_t sig_raddr, uint32_t sig_rkey,
			  uint64_t add, kn_ticket_t *ticket),
	     raddr, rkey, laddr, lkey, len, sig_raddr, sig_rkey, add)
/* kn_warp_signal, kn_block_signal */
KNX_SCOPE_OP(signal, (const kn_qp *qp, uint64_t sig_raddr, uint32_t sig_rkey, uint64_t add,
		      kn_ticket_t *ticket),
	     sig_raddr, sig_rkey, add)

#undef KNX_SCOPE_OP
#undef KNX_SCOPE_OP1

#endif /* KINET_DEVICE_CUDA_CUH */
