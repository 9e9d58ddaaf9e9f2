/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kinet/device_eth.cuh - Ethernet queues at warp and block scope (CUDA
 * only): the thread-scope calls of kinet/device_eth.h with the lanes of a
 * warp, or the threads of a CTA, cooperating. Include it from .cu files.
 *
 * Send: every lane (thread) that passes a frame gets one WQE of ONE
 * reservation, builds it in registers, stores it with 16-byte writes, and
 * the lane holding the last WQE rings ONE doorbell for all (BlueFlame: the
 * whole last WQE). Warp scope: lanes with data == NULL send nothing. Block
 * scope: every thread sends one frame; a block larger than the queue sends
 * in rounds of at most its depth, one doorbell per round.
 * Receive: one lane (thread 0) polls the CQ and fills the caller's array,
 * which the whole warp (block) then reads: pass shared memory, or global
 * memory the group can read. Release: one lane (thread 0) gives the buffers
 * back. One consumer per receive queue: one warp or one block.
 *
 * Every lane (thread) of the warp (CTA) must call; each gets the same
 * return value (-EINVAL: some lane's frame refused, nothing posted).
 */
#ifndef KINET_DEVICE_ETH_CUH
#define KINET_DEVICE_ETH_CUH

#if !defined(__CUDACC__)
#error "kinet/device_eth.cuh is CUDA only: compile with nvcc"
#endif

#include <kinet/device_cuda.cuh>
#include <kinet/device_eth.h>

/* ---- warp scope ------------------------------------------------------------ */

/* Sends the frames of the lanes that pass one; *ticket gets each lane's own
 * ticket (0 for a lane that sent nothing). */
static __device__ __forceinline__ int kn_warp_eth_send(const kn_eth_txq *txq, const void *data,
						       uint32_t lkey, uint32_t len, uint32_t flags,
						       kn_ticket_t *ticket)
{
	__syncwarp();
	const kn_qp *qp = &txq->q;
	uint32_t lane = knx_lane_id();
	bool has = data != NULL;
	if (__any_sync(KNX_FULL_WARP, has && knx_eth_check(txq, len, flags) != 0))
		return -EINVAL;
	uint32_t mask = __ballot_sync(KNX_FULL_WARP, has);
	if (!mask)
		return 0;
	uint32_t leader = (uint32_t)__ffs(mask) - 1;
	uint32_t lastl = 31u - (uint32_t)__clz(mask);
	uint32_t n = (uint32_t)__popc(mask);
	uint32_t off = (uint32_t)__popc(mask & ((1u << lane) - 1u));
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
	knx_wqebb w = {};
	if (has) {
		knx_build_eth_send(txq, &w, t, data, lkey, len, flags);
		knx_wqe_store(qp, t, &w);
	}
	__syncwarp(); /* every lane's WQE before the ringing lane's fences */
	if (lane == lastl)
		knx_sq_submit_last(qp, t0, n, &w);
	__syncwarp();
	if (ticket)
		*ticket = has ? t : 0;
	return 0;
}

/* Receives up to max packets into pkts (visible to the warp); *n the same
 * in every lane. */
static __device__ __forceinline__ int kn_warp_eth_recv(const kn_eth_rxq *rxq, kn_eth_pkt *pkts,
						       uint32_t max, uint64_t timeout_ns,
						       uint32_t *n)
{
	__syncwarp();
	int rc = 0;
	uint32_t got = 0;
	if (knx_lane_id() == 0)
		rc = kn_eth_recv(rxq, pkts, max, timeout_ns, &got);
	rc = __shfl_sync(KNX_FULL_WARP, rc, 0);
	got = __shfl_sync(KNX_FULL_WARP, got, 0);
	__syncwarp(); /* lane 0's writes to pkts, and its acquire, before the others read */
	*n = got;
	return rc;
}

/* Gives the buffers of every packet before upto back (after every lane is
 * done with them). */
static __device__ __forceinline__ int kn_warp_eth_release(const kn_eth_rxq *rxq, kn_ticket_t upto)
{
	__syncwarp();
	int rc = 0;
	if (knx_lane_id() == 0)
		rc = kn_eth_release(rxq, upto);
	return __shfl_sync(KNX_FULL_WARP, rc, 0);
}

/* ---- block scope ----------------------------------------------------------- */

/* Every thread of the CTA sends one frame: one reservation and one doorbell
 * per round of at most the queue's depth. *ticket: each thread's own. */
static __device__ __forceinline__ int kn_block_eth_send(const kn_eth_txq *txq, const void *data,
							uint32_t lkey, uint32_t len, uint32_t flags,
							kn_ticket_t *ticket)
{
	__shared__ unsigned long long knx_s_et;
	__shared__ int knx_s_erc;
	const kn_qp *qp = &txq->q;
	uint32_t tid = knx_block_tid();
	uint32_t nthr = blockDim.x * blockDim.y * blockDim.z;
	if (__syncthreads_or(knx_eth_check(txq, len, flags) != 0))
		return -EINVAL;
	uint32_t per = qp->sq_wqe_cnt;
	for (uint32_t base = 0; base < nthr; base += per) {
		uint32_t cnt = nthr - base < per ? nthr - base : per;
		if (tid == 0) {
			kn_ticket_t t;
			knx_s_erc = kn_sq_reserve(qp, cnt, &t);
			knx_s_et = t;
		}
		__syncthreads();
		int rc = knx_s_erc;
		kn_ticket_t t0 = knx_s_et;
		if (rc) {
			__syncthreads();
			return rc;
		}
		knx_wqebb w = {};
		bool mine = tid >= base && tid < base + cnt;
		if (mine) {
			kn_ticket_t t = t0 + (tid - base);
			knx_build_eth_send(txq, &w, t, data, lkey, len, flags);
			knx_wqe_store(qp, t, &w);
			KN_FENCE_REL(); /* before the doorbell another thread rings */
			if (ticket)
				*ticket = t;
		}
		__syncthreads();
		if (tid == base + cnt - 1)
			knx_sq_submit_last(qp, t0, cnt, &w);
	}
	return 0;
}

/* Thread 0 receives up to max packets into pkts (visible to the CTA: shared
 * memory); every thread gets *n. */
static __device__ __forceinline__ int kn_block_eth_recv(const kn_eth_rxq *rxq, kn_eth_pkt *pkts,
							uint32_t max, uint64_t timeout_ns,
							uint32_t *n)
{
	__shared__ uint32_t knx_s_en;
	__shared__ int knx_s_errc;
	if (knx_block_tid() == 0) {
		uint32_t got = 0;
		knx_s_errc = kn_eth_recv(rxq, pkts, max, timeout_ns, &got);
		knx_s_en = got;
	}
	__syncthreads();
	int rc = knx_s_errc;
	*n = knx_s_en;
	__syncthreads(); /* read before the next call writes them */
	return rc;
}

static __device__ __forceinline__ int kn_block_eth_release(const kn_eth_rxq *rxq, kn_ticket_t upto)
{
	__shared__ int knx_s_relrc;
	__syncthreads(); /* every thread is done with the packets */
	if (knx_block_tid() == 0)
		knx_s_relrc = kn_eth_release(rxq, upto);
	__syncthreads();
	int rc = knx_s_relrc;
	__syncthreads();
	return rc;
}

#endif /* KINET_DEVICE_ETH_CUH */
