/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec_cuda.cu - the CUDA executor of kinet-perf (--executor cuda): every job
 * is one GPU thread.
 *
 * Launch: --ctas CTAs of --cta-threads threads (kinet-perf.c works out the
 * shape from -t, --ctas and --cta-threads); job g is thread
 * blockIdx.x * blockDim.x + threadIdx.x. Every CTA must be resident at once
 * (the jobs meet at barriers): a launch that would not fit is refused.
 *
 * Scope (--scope):
 *   thread  each thread runs perf_body_run() from perf_body.h, the code the
 *           host executor runs on CPU threads (kinet/device.h, thread scope);
 *   warp    the 32 threads of a warp post together: one kn_warp_post per
 *           message number carries the message of every lane (each lane its
 *           own buffers, its own samples), one reservation, one doorbell;
 *           one lane polls the CQ for the warp;
 *   block   the same for all the threads of a CTA (kn_block_post).
 *   At warp and block scope write_bw and write_lat post puts, read_* gets,
 *   atomic_* fetch-adds (KN_OP_FETCH_ADD), put_bw the high-level
 *   kn_warp_put / kn_block_put; send_bw and send_lat are thread scope only
 *   (a receive queue has one consumer: kinet-perf.c refuses the others).
 *
 * QPs (kinet-perf.c sets opts.qp_group and qp_share, setup.c creates them):
 * one per posting agent (thread, warp or CTA) by default, one per CTA shared
 * by its threads (--shared=cta, KN_SHARE_CTA) or one for the whole grid
 * (--shared, KN_SHARE_GPU). Their device descriptors are placed in GPU
 * memory once (kinet_qp_device_cuda) and kept across message sizes, so the
 * tickets go on where the last run left them.
 *
 * Payloads (--mem): host memory pinned and mapped into the GPU, or GPU
 * memory (cudaMalloc, registered with the software NIC, which reaches it by
 * copies). With GPU memory setup.c's host buffers stay the reference: they
 * are copied to the GPU before each size and back after it, so its data
 * check runs unchanged. Across processes (remote.c) the GPU memory is
 * allocated before the descriptors are exchanged (gpu_alloc), the jobs
 * carry its addresses and keys already, and remote.c copies it in and out
 * itself (gpu_copy) at the points of its exchange.
 *
 * Across processes the server's jobs are PERF_ROLE_TARGET jobs: at thread
 * scope perf_body_run (send_lat's and send_bw's receives and replies too); at
 * warp and block scope grp_target_run (write_lat's replies, posted by the
 * group; the other tests give the server no jobs).
 * The client's jobs have no tqp: the server replies.
 *
 * Jobs are copied to GPU memory with their descriptors and (with --mem gpu)
 * addresses and keys replaced, their sample and ticket arrays and the
 * barrier in GPU memory; afterwards the jobs' outcomes and samples are
 * copied back into the host jobs.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet_cuda.h>
#include "perf.h"
#include <kinet/device_cuda.cuh>

/* ---- warp and block scope -------------------------------------------------- */

/* The group that posts together, and how its threads agree. Every member
 * calls each function (warp: all 32 lanes; block: every thread of the CTA).
 * The leader (lane 0, thread 0) is the QP's only CQ consumer in the group, as
 * kn_warp_post / kn_block_post make it the only reserving thread. */
struct warp_grp {
	static __device__ __forceinline__ bool leader() { return knx_lane_id() == 0; }
	static __device__ __forceinline__ bool any(bool p) { return __any_sync(KNX_FULL_WARP, p); }
	static __device__ __forceinline__ bool all(bool p) { return __all_sync(KNX_FULL_WARP, p); }
	/* the leader's v; its reads before (acquired CQEs) are ordered before
	 * the lanes' reads after */
	static __device__ __forceinline__ uint64_t bcast(uint64_t v)
	{
		v = __shfl_sync(KNX_FULL_WARP, (unsigned long long)v, 0);
		__syncwarp();
		return v;
	}
	static __device__ __forceinline__ uint64_t max(uint64_t v)
	{
		unsigned long long m = v;
#pragma unroll
		for (int d = 16; d > 0; d >>= 1) {
			unsigned long long o = __shfl_xor_sync(KNX_FULL_WARP, m, d);
			m = o > m ? o : m;
		}
		return m;
	}
	static __device__ __forceinline__ int post(const kn_qp *qp, const kn_op *op, kn_ticket_t *t)
	{
		return kn_warp_post(qp, op, t);
	}
	static __device__ __forceinline__ int put(const kn_qp *qp, const kn_op *op, kn_ticket_t *t)
	{
		return kn_warp_put(qp, op->raddr, op->rkey, (const void *)(uintptr_t)op->laddr,
				   op->lkey, op->len, t);
	}
	static __device__ __forceinline__ int quiet(const kn_qp *qp) { return kn_warp_quiet(qp); }
};

struct block_grp {
	static __device__ __forceinline__ bool leader() { return threadIdx.x == 0; }
	static __device__ __forceinline__ bool any(bool p) { return __syncthreads_or(p) != 0; }
	static __device__ __forceinline__ bool all(bool p) { return __syncthreads_and(p) != 0; }
	static __device__ __forceinline__ uint64_t bcast(uint64_t v)
	{
		__shared__ unsigned long long s_v;
		if (leader())
			s_v = v;
		__syncthreads();
		v = s_v;
		__syncthreads(); /* read by all before the next call writes it */
		return v;
	}
	static __device__ __forceinline__ uint64_t max(uint64_t v)
	{
		__shared__ unsigned long long s_m;
		if (leader())
			s_m = 0;
		__syncthreads();
		atomicMax(&s_m, (unsigned long long)v);
		__syncthreads();
		v = s_m;
		__syncthreads();
		return v;
	}
	static __device__ __forceinline__ int post(const kn_qp *qp, const kn_op *op, kn_ticket_t *t)
	{
		return kn_block_post(qp, op, t);
	}
	static __device__ __forceinline__ int put(const kn_qp *qp, const kn_op *op, kn_ticket_t *t)
	{
		return kn_block_put(qp, op->raddr, op->rkey, (const void *)(uintptr_t)op->laddr,
				    op->lkey, op->len, t);
	}
	static __device__ __forceinline__ int quiet(const kn_qp *qp) { return kn_block_quiet(qp); }
};

/* Message k of the job, posted by the whole group (each member its own). */
template <class G>
static __device__ int grp_post(struct perf_job *j, uint64_t k, kn_ticket_t *t)
{
	kn_op op = {};
	op.kind = KN_OP_PUT;
	op.len = j->size;
	op.laddr = j->laddr;
	op.lkey = j->lkey;
	op.raddr = j->raddr;
	op.rkey = j->rkey;
	switch (j->test) {
	case PERF_PUT_BW:
		return G::put(j->qp, &op, t);
	case PERF_READ_BW:
	case PERF_READ_LAT:
		op.kind = KN_OP_GET;
		break;
	case PERF_ATOMIC_BW:
	case PERF_ATOMIC_LAT:
		op.kind = KN_OP_FETCH_ADD;
		op.len = 8;
		op.laddr = j->res + (k % j->window) * 8u;
		op.lkey = j->res_lkey;
		op.add = k + 1;
		break;
	default: /* write_bw, write_lat */
		break;
	}
	return G::post(j->qp, &op, t);
}

/* perf_reap for a group: the leader consumes the CQEs, every member checks
 * its own tickets; returns when every member has reaped `upto` messages.
 * The return value is the same in every member (only the members whose
 * ticket failed record the error). */
template <class G>
static __device__ int grp_reap(struct perf_job *j, uint64_t *reaped, uint64_t posted, uint64_t upto)
{
	const kn_qp *qp = j->qp;
	uint64_t t0 = 0;
	unsigned spins = 0;
	for (;;) {
		uint64_t done = G::bcast(G::leader() ? kn_cq_progress(qp) : 0);
		uint64_t now = 0;
		bool bad = false;
		while (*reaped < posted) {
			uint64_t k = *reaped;
			kn_ticket_t t = j->ring[k % j->window];
			if (t >= done)
				break;
			if (kn_ticket_status(qp, t)) {
				bad = true;
				break;
			}
			if (!now)
				j->seen_ns = now = kn_now_ns();
			if (k >= j->warmup)
				j->tcomp[k - j->warmup] = now;
			if (j->test == PERF_ATOMIC_BW)
				perf_check_atomic(j, k);
			*reaped = k + 1;
		}
		if (bad)
			perf_fail(j, qp, -EIO, PERF_STEP_CQE);
		if (G::any(bad))
			return -EIO;
		if (G::all(*reaped >= upto))
			return 0;
		if ((++spins & 255u) == 0 &&
		    G::bcast(G::leader() && perf_timed_out(&t0, j->timeout_ns)))
			return perf_fail(j, qp, -ETIMEDOUT, PERF_STEP_CQE);
		PERF_RELAX(j);
	}
}

/* perf_bw_phase for a group: messages [*k, end), at most `window` of each
 * member in flight. */
template <class G>
static __device__ int grp_bw_phase(struct perf_job *j, uint64_t *k, uint64_t end)
{
	uint64_t posted = *k, reaped = *k;
	int rc;
	while (posted < end) {
		uint64_t now = 0;
		if (G::any(posted - reaped >= j->window)) {
			if ((rc = grp_reap<G>(j, &reaped, posted, posted - j->window + 1)))
				return rc;
			now = j->seen_ns; /* no later than this post, as in perf_bw_phase */
		}
		if (!now)
			now = kn_now_ns();
		kn_ticket_t t;
		if ((rc = grp_post<G>(j, posted, &t)))
			return perf_fail(j, j->qp, rc, PERF_STEP_POST);
		j->ring[posted % j->window] = t;
		if (posted >= j->warmup)
			j->tpost[posted - j->warmup] = now;
		posted++;
	}
	if ((rc = grp_reap<G>(j, &reaped, posted, posted)))
		return rc;
	*k = posted;
	return 0;
}

/* kn_wait for a group: the leader waits for the group's last ticket, each
 * member gets its own ticket's status. */
template <class G>
static __device__ int grp_wait(const kn_qp *qp, kn_ticket_t t)
{
	uint64_t m = G::max(t);
	int rc = (int)(int64_t)G::bcast(G::leader() ? (uint64_t)(int64_t)kn_wait(qp, m) : 0);
	if (rc == -ETIMEDOUT)
		return rc;
	return kn_ticket_status(qp, t);
}

/* perf_wait_byte for a group: until every member's landing byte shows
 * stamp; the leader watches the group's write (ticket t of each member;
 * qp NULL, the same in every member: no write of ours to watch). */
template <class G>
static __device__ int grp_wait_byte(struct perf_job *j, uint64_t addr, uint8_t stamp,
				    const kn_qp *qp, kn_ticket_t t)
{
	volatile const uint8_t *p = (volatile const uint8_t *)(uintptr_t)(addr + j->size - 1);
	uint64_t m = G::max(t);
	uint64_t t0 = 0;
	unsigned spins = 0;
	while (!G::all(*p == stamp)) {
		if ((++spins & 63u) == 0) {
			uint64_t why = 0;
			if (G::leader()) {
				if (qp && kn_test(qp, m) == -EIO)
					why = 1;
				else if (perf_timed_out(&t0, j->timeout_ns))
					why = 2;
			}
			why = G::bcast(why);
			if (why == 1)
				return perf_fail(j, qp, -EIO, PERF_STEP_CQE);
			if (why == 2)
				return perf_fail(j, qp, -ETIMEDOUT, PERF_STEP_ARRIVAL);
		}
		PERF_RELAX(j);
	}
	KN_FENCE_ACQ();
	return 0;
}

/* perf_pingpong for a group: every member's write goes in one post, the
 * target's replies in another. */
/* write_lat's reply: the target's buffer, stamped in its last byte, put back
 * to the requester (the same in every member of a group). */
static __device__ kn_op lat_reply(struct perf_job *j, uint8_t stamp)
{
	((volatile uint8_t *)(uintptr_t)j->t_laddr)[j->size - 1] = stamp;
	kn_op op = {};
	op.kind = KN_OP_PUT;
	op.len = j->size;
	op.laddr = j->t_laddr;
	op.lkey = j->t_lkey;
	op.raddr = j->t_raddr;
	op.rkey = j->t_rkey;
	return op;
}

template <class G>
static __device__ int grp_pingpong(struct perf_job *j, uint64_t k)
{
	uint8_t stamp = (uint8_t)(k % 255u + 1u);
	kn_ticket_t t, u;
	int rc;
	((volatile uint8_t *)(uintptr_t)j->laddr)[j->size - 1] = stamp;
	if ((rc = grp_post<G>(j, k, &t)))
		return perf_fail(j, j->qp, rc, PERF_STEP_POST);
	if (!j->tqp) /* another process replies (the same in every member) */
		return grp_wait_byte<G>(j, j->land, stamp, j->qp, t);
	if ((rc = grp_wait_byte<G>(j, j->t_land, stamp, j->qp, t)))
		return rc;
	kn_op op = lat_reply(j, stamp);
	if ((rc = G::post(j->tqp, &op, &u)))
		return perf_fail(j, j->tqp, rc, PERF_STEP_POST);
	return grp_wait_byte<G>(j, j->land, stamp, j->tqp, u);
}

/* perf_lat_phase for a group: one message of every member at a time. */
template <class G>
static __device__ int grp_lat_phase(struct perf_job *j, uint64_t *k, uint64_t end)
{
	for (; *k < end; (*k)++) {
		uint64_t t0 = kn_now_ns();
		int rc;
		if (j->test == PERF_WRITE_LAT) {
			rc = grp_pingpong<G>(j, *k); /* the same in every member */
		} else {
			kn_ticket_t t;
			if ((rc = grp_post<G>(j, *k, &t)))
				return perf_fail(j, j->qp, rc, PERF_STEP_POST);
			if ((rc = grp_wait<G>(j->qp, t)))
				perf_fail(j, j->qp, rc, PERF_STEP_CQE);
		}
		if (G::any(rc != 0))
			return rc ? rc : -ECANCELED;
		uint64_t t1 = kn_now_ns();
		if (j->test == PERF_ATOMIC_LAT)
			perf_check_atomic(j, *k);
		if (*k >= j->warmup)
			j->tcomp[*k - j->warmup] = t1 - t0;
	}
	return 0;
}

/* perf_body_run for a group: warm-up, barrier, timed phase, barrier, drain.
 * A failure of one member stops the whole group (it posts together). */
template <class G>
static __device__ void grp_body_run(struct perf_job *j)
{
	bool lat = j->test == PERF_WRITE_LAT || j->test == PERF_READ_LAT ||
		   j->test == PERF_ATOMIC_LAT;
	uint64_t k = 0;
	j->rx_posted = j->rx_done = 0;
	j->bad = 0;
	if (!G::any(j->rc != 0))
		(void)(lat ? grp_lat_phase<G>(j, &k, j->warmup) : grp_bw_phase<G>(j, &k, j->warmup));
	perf_barrier(j, 1);
	j->t_begin = kn_now_ns();
	if (!G::any(j->rc != 0))
		(void)(lat ? grp_lat_phase<G>(j, &k, j->warmup + j->iters)
			   : grp_bw_phase<G>(j, &k, j->warmup + j->iters));
	j->t_end = kn_now_ns();
	perf_barrier(j, 2);
	if (G::any(j->rc != 0))
		return;
	int rc = G::quiet(j->qp);
	if (rc)
		perf_fail(j, j->qp, rc, PERF_STEP_CQE);
	if (j->test == PERF_WRITE_LAT && j->tqp && !G::any(j->rc != 0) && (rc = G::quiet(j->tqp)))
		perf_fail(j, j->tqp, rc, PERF_STEP_CQE);
}

/* perf_target_run for a group (the server across processes): write_lat
 * answers each of the initiator's writes once every member's has landed,
 * with one post for the group. No duration runs at warp and block scope:
 * warmup + iters of them. */
template <class G>
static __device__ void grp_target_run(struct perf_job *j)
{
	const kn_qp *tq = j->tqp;
	uint64_t total = j->warmup + j->iters;
	kn_ticket_t u = 0;
	j->bad = 0;
	j->done = 0;
	j->t_begin = kn_now_ns();
	for (uint64_t k = 0; k < total && j->test == PERF_WRITE_LAT; k++) {
		uint8_t stamp = (uint8_t)(k % 255u + 1u);
		if (grp_wait_byte<G>(j, j->t_land, stamp, k ? tq : (const kn_qp *)0, u))
			break;
		kn_op op = lat_reply(j, stamp);
		int rc = G::post(tq, &op, &u);
		if (rc)
			perf_fail(j, tq, rc, PERF_STEP_POST);
		if (G::any(rc != 0))
			break;
		j->done = k + 1;
	}
	if (!G::any(j->rc != 0)) {
		int rc = G::quiet(tq);
		if (rc)
			perf_fail(j, tq, rc, PERF_STEP_CQE);
	}
	j->t_end = kn_now_ns();
}

template <int SCOPE>
static __global__ void cuda_jobs_kernel(struct perf_job *jobs, int n)
{
	int g = blockIdx.x * blockDim.x + threadIdx.x;
	if (SCOPE == PERF_SCOPE_THREAD) {
		if (g < n)
			perf_body_run(&jobs[g]);
	} else if (SCOPE == PERF_SCOPE_WARP) { /* whole CTAs: g < n; one role */
		if (jobs[g].role == PERF_ROLE_TARGET)
			grp_target_run<warp_grp>(&jobs[g]);
		else
			grp_body_run<warp_grp>(&jobs[g]);
	} else {
		if (jobs[g].role == PERF_ROLE_TARGET)
			grp_target_run<block_grp>(&jobs[g]);
		else
			grp_body_run<block_grp>(&jobs[g]);
	}
}

/* ---- host side --------------------------------------------------------------- */

/* What the executor keeps across the sizes of one environment. */
static struct {
	struct perf_env *env;     /* placed for this environment */
	const kn_qp **dqa, **dqb; /* per job: device descriptors of qp, tqp */
	uint8_t *ga, *gb;         /* --mem gpu: the payload buffers */
	kinet_mr *gmra, *gmrb;    /* and their registrations */
	bool pinned_a, pinned_b;  /* --mem host: cudaHostRegister'ed here */
	bool placed;              /* place() ran for env */
} cs;

extern "C" int perf_cuda_usable(void)
{
	return kinet_cuda_available();
}

/* Pins host memory and maps it into the GPU (the pointer stays valid: UVA). */
static int map_host(void *p, size_t len, bool *pinned)
{
	if (!p || !len)
		return 0;
	struct cudaPointerAttributes a;
	if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost)
		return 0; /* already registered */
	cudaGetLastError();
	if (cudaHostRegister(p, len, cudaHostRegisterMapped | cudaHostRegisterPortable) !=
	    cudaSuccess) {
		cudaGetLastError();
		return -ENOMEM;
	}
	*pinned = true;
	return 0;
}

/* The device descriptor of the QP whose host descriptor is h, placed in GPU
 * memory the first time (cache: 2 slots per QP pair). */
static int device_qp(struct perf_env *e, const kn_qp *h, kn_qp **cache, const kn_qp **out)
{
	*out = NULL;
	if (!h)
		return 0;
	for (int i = 0; i < e->nqp; i++)
		for (int side = 0; side < 2; side++) {
			kn_qp **dv = side ? e->db : e->da;
			kinet_qp **qv = side ? e->qb : e->qa;
			if (!dv || !qv || dv[i] != h)
				continue;
			kn_qp **c = &cache[2 * i + side];
			if (!*c) {
				int rc = kinet_qp_device_cuda(qv[i], c);
				if (rc)
					return rc;
			}
			*out = *c;
			return 0;
		}
	return -EINVAL;
}

/* GPU payload buffers of --mem gpu, registered with the NIC. */
static int gpu_buffers(struct perf_env *e)
{
	cudaError_t ce;
	int rc;
	if ((ce = cudaMalloc((void **)&cs.ga, e->buf_len)) != cudaSuccess ||
	    (e->bbuf && (ce = cudaMalloc((void **)&cs.gb, e->buf_len)) != cudaSuccess)) {
		fprintf(stderr, "kinet-perf: --mem gpu: cudaMalloc(%zu bytes): %s\n", e->buf_len,
			cudaGetErrorString(ce));
		cudaGetLastError();
		return -ENOMEM;
	}
	if ((rc = kinet_mr_reg(e->pd, cs.ga, e->buf_len, KINET_ACCESS_ALL, &cs.gmra)) ||
	    (cs.gb && (rc = kinet_mr_reg(e->pd, cs.gb, e->buf_len, KINET_ACCESS_ALL, &cs.gmrb)))) {
		fprintf(stderr, "kinet-perf: --mem gpu: kinet_mr_reg: %s\n", kinet_strerror(rc));
		return rc;
	}
	return 0;
}

/* --mem gpu: where a host buffer address and key of a job lie on the GPU. */
static uint64_t gpu_addr(const struct perf_env *e, uint64_t a)
{
	uint64_t ha = (uint64_t)(uintptr_t)e->abuf, hb = (uint64_t)(uintptr_t)e->bbuf;
	if (e->abuf && a >= ha && a < ha + e->buf_len)
		return (uint64_t)(uintptr_t)cs.ga + (a - ha);
	if (e->bbuf && cs.gb && a >= hb && a < hb + e->buf_len)
		return (uint64_t)(uintptr_t)cs.gb + (a - hb);
	return a;
}

static uint32_t gpu_key(const struct perf_env *e, uint32_t k)
{
	if (e->amr && (k == kinet_mr_lkey(e->amr) || k == kinet_mr_rkey(e->amr)))
		return k == kinet_mr_lkey(e->amr) ? kinet_mr_lkey(cs.gmra) : kinet_mr_rkey(cs.gmra);
	if (e->bmr && cs.gmrb && (k == kinet_mr_lkey(e->bmr) || k == kinet_mr_rkey(e->bmr)))
		return k == kinet_mr_lkey(e->bmr) ? kinet_mr_lkey(cs.gmrb) : kinet_mr_rkey(cs.gmrb);
	return k;
}

static void gpu_job(const struct perf_env *e, struct perf_job *j)
{
	j->laddr = gpu_addr(e, j->laddr);
	j->res = gpu_addr(e, j->res);
	j->land = gpu_addr(e, j->land);
	j->raddr = gpu_addr(e, j->raddr);
	j->t_laddr = gpu_addr(e, j->t_laddr);
	j->t_land = gpu_addr(e, j->t_land);
	j->t_raddr = gpu_addr(e, j->t_raddr);
	j->lkey = gpu_key(e, j->lkey);
	j->res_lkey = gpu_key(e, j->res_lkey);
	j->rkey = gpu_key(e, j->rkey);
	j->t_lkey = gpu_key(e, j->t_lkey);
	j->t_rkey = gpu_key(e, j->t_rkey);
}

/* Places the QPs and the payload memory, the first time for e. */
static int place(struct perf_env *e, const struct perf_job *hj, int n)
{
	const struct perf_opts *o = e->o;
	int rc = 0;
	if (o->mem == PERF_MEM_GPU)
		rc = cs.ga ? 0 : gpu_buffers(e); /* across processes: gpu_alloc did */
	else if (!(rc = map_host(e->abuf, e->buf_len, &cs.pinned_a)))
		rc = map_host(e->bbuf, e->buf_len, &cs.pinned_b);
	if (rc)
		return rc;
	kn_qp **cache = (kn_qp **)calloc((size_t)e->nqp * 2 + 1, sizeof(*cache));
	cs.dqa = (const kn_qp **)calloc((size_t)n, sizeof(*cs.dqa));
	cs.dqb = (const kn_qp **)calloc((size_t)n, sizeof(*cs.dqb));
	if (!cs.dqa || !cs.dqb || !cache) {
		free(cache);
		return -ENOMEM;
	}
	for (int i = 0; i < n && !rc; i++) {
		rc = device_qp(e, hj[i].qp, cache, &cs.dqa[i]);
		if (!rc)
			rc = device_qp(e, hj[i].tqp, cache, &cs.dqb[i]);
	}
	free(cache);
	return rc;
}

/* The kernel of a scope, and whether `ctas` CTAs of `tpc` threads of it fit
 * on the GPU at once. */
static int launch_shape(int scope, int ctas, int tpc, void (**kern)(struct perf_job *, int))
{
	*kern = scope == PERF_SCOPE_WARP    ? cuda_jobs_kernel<PERF_SCOPE_WARP>
		: scope == PERF_SCOPE_BLOCK ? cuda_jobs_kernel<PERF_SCOPE_BLOCK>
					    : cuda_jobs_kernel<PERF_SCOPE_THREAD>;
	int dev = 0, sms = 0, per_sm = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, *kern, tpc, 0) != cudaSuccess) {
		fprintf(stderr, "kinet-perf: --executor cuda: cannot query the GPU: %s\n",
			cudaGetErrorString(cudaGetLastError()));
		return -ENODEV;
	}
	if ((long)per_sm * sms < ctas) {
		fprintf(stderr,
			"kinet-perf: --executor cuda: %d CTAs of %d threads cannot all be resident "
			"(at most %d: %d per SM x %d SMs); the jobs wait for each other at a "
			"barrier: use fewer CTAs or threads per CTA\n",
			ctas, tpc, per_sm * sms, per_sm, sms);
		return -EINVAL;
	}
	return 0;
}

static int cuda_run(struct perf_env *e)
{
	const struct perf_opts *o = e->o;
	if (!kinet_cuda_available()) {
		fprintf(stderr, "kinet-perf: --executor cuda: no usable GPU\n");
		return -ENODEV;
	}
	int n = o->threads;
	int tpc = o->cta_threads > 0 ? o->cta_threads : 1;
	int ctas = o->ctas > 0 ? o->ctas : (n + tpc - 1) / tpc;
	int scope = o->scope;
	if (scope != PERF_SCOPE_THREAD && (long)ctas * tpc != n) {
		fprintf(stderr, "kinet-perf: --scope warp/block: %d jobs are not %d whole CTAs of %d\n",
			n, ctas, tpc);
		return -EINVAL;
	}
	void (*kern)(struct perf_job *, int);
	int rc = launch_shape(scope, ctas, tpc, &kern);
	if (rc)
		return rc;
	size_t ns = (size_t)n * e->cap_iters, nr = (size_t)n * o->qdepth;
	struct perf_job *hj = (struct perf_job *)malloc((size_t)n * sizeof(*hj));
	struct perf_job *dj = NULL;
	uint64_t *dpost = NULL, *dcomp = NULL, *dring = NULL, *dbar = NULL;
	cudaError_t ce = cudaSuccess;
	cudaStream_t st = NULL;
	if (!hj)
		return -ENOMEM;
	memcpy(hj, e->jobs, (size_t)n * sizeof(*hj));
	/* a group posts on one QP, in one role: every member has its QP */
	if (scope != PERF_SCOPE_THREAD)
		for (int i = 0; i < n; i++)
			if (!(hj[i].role == PERF_ROLE_TARGET ? hj[i].tqp : hj[i].qp) ||
			    hj[i].role != hj[0].role) {
				fprintf(stderr, "kinet-perf: --scope warp/block: job %d has no QP "
						"of its role\n",
					i);
				free(hj);
				return -EINVAL;
			}
	if (cs.env != e || !cs.placed) {
		/* cuda_close gives back what place() got, even on failure */
		cs.env = e;
		cs.placed = true;
		if ((rc = place(e, hj, n))) {
			free(hj);
			return rc;
		}
	}
	/* a local pair: the host buffers in and out of GPU memory around the
	 * run, and the jobs' host addresses and keys turned into the GPU
	 * memory's; across processes (no bbuf) remote.c copies at the points
	 * of its exchange and the jobs carry GPU addresses already */
	bool local = e->bbuf != NULL;
	/* The kernel runs on a non-blocking stream: a copy on the legacy default
	 * stream (libfabric's own CUDA copies of GPU payloads it holds,
	 * KINET_FI_HMEM) must not wait for it, since it waits for the network.
	 * So everything it reads goes in on that stream too, in stream order.
	 * A cudaMemcpy from pageable memory returns once the bytes are staged,
	 * before they reach the GPU, and cudaMemset returns at once: the kernel
	 * on another stream met half-copied jobs (garbage keys and addresses
	 * from job 32 on: remote access errors, illegal memory accesses). */
	if ((ce = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) != cudaSuccess)
		goto out;
	if (o->mem == PERF_MEM_GPU && local &&
	    ((ce = cudaMemcpyAsync(cs.ga, e->abuf, e->buf_len, cudaMemcpyHostToDevice, st)) !=
		     cudaSuccess ||
	     (cs.gb && (ce = cudaMemcpyAsync(cs.gb, e->bbuf, e->buf_len, cudaMemcpyHostToDevice,
					     st)) != cudaSuccess)))
		goto out;
	if ((ce = cudaMalloc((void **)&dj, (size_t)n * sizeof(*dj))) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dpost, ns * 8 + 8)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dcomp, ns * 8 + 8)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dring, nr * 8 + 8)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dbar, 64)) != cudaSuccess ||
	    (ce = cudaMemsetAsync(dbar, 0, 64, st)) != cudaSuccess)
		goto out;
	for (int i = 0; i < n; i++) {
		hj[i].qp = cs.dqa[i];
		hj[i].tqp = cs.dqb[i];
		hj[i].tpost = dpost + (size_t)i * e->cap_iters;
		hj[i].tcomp = dcomp + (size_t)i * e->cap_iters;
		hj[i].ring = dring + (size_t)i * o->qdepth;
		hj[i].barrier = dbar;
		if (o->mem == PERF_MEM_GPU && local)
			gpu_job(e, &hj[i]);
	}
	if ((ce = cudaMemcpyAsync(dj, hj, (size_t)n * sizeof(*dj), cudaMemcpyHostToDevice, st)) !=
	    cudaSuccess)
		goto out;
	kern<<<ctas, tpc, 0, st>>>(dj, n);
	if ((ce = cudaGetLastError()) != cudaSuccess || (ce = cudaStreamSynchronize(st)) != cudaSuccess)
		goto out;
	if ((ce = cudaMemcpy(hj, dj, (size_t)n * sizeof(*dj), cudaMemcpyDeviceToHost)) !=
		    cudaSuccess ||
	    (ce = cudaMemcpy(e->tpost, dpost, ns * 8, cudaMemcpyDeviceToHost)) != cudaSuccess ||
	    (ce = cudaMemcpy(e->tcomp, dcomp, ns * 8, cudaMemcpyDeviceToHost)) != cudaSuccess)
		goto out;
	/* GPU payloads back into the host buffers the data check reads */
	if (o->mem == PERF_MEM_GPU && local &&
	    ((ce = cudaMemcpy(e->abuf, cs.ga, e->buf_len, cudaMemcpyDeviceToHost)) != cudaSuccess ||
	     (cs.gb &&
	      (ce = cudaMemcpy(e->bbuf, cs.gb, e->buf_len, cudaMemcpyDeviceToHost)) != cudaSuccess)))
		goto out;
	/* outcomes back into the host jobs, with their host pointers */
	for (int i = 0; i < n; i++) {
		struct perf_job *j = &e->jobs[i];
		j->t_begin = hj[i].t_begin;
		j->t_end = hj[i].t_end;
		j->done = hj[i].done;
		j->lat_sum = hj[i].lat_sum;
		j->seen_ns = hj[i].seen_ns;
		j->rx_posted = hj[i].rx_posted;
		j->rx_done = hj[i].rx_done;
		j->bad = hj[i].bad;
		j->first_bad = hj[i].first_bad;
		j->rc = hj[i].rc;
		j->step = hj[i].step;
		j->syndrome = hj[i].syndrome;
		j->vendor = hj[i].vendor;
	}
out:
	if (ce != cudaSuccess)
		fprintf(stderr, "kinet-perf: --executor cuda: %s\n", cudaGetErrorString(ce));
	if (st)
		cudaStreamDestroy(st);
	cudaFree(dj);
	cudaFree(dpost);
	cudaFree(dcomp);
	cudaFree(dring);
	cudaFree(dbar);
	free(hj);
	return ce == cudaSuccess ? 0 : -EIO;
}

/* Across processes (--mem gpu): this side's payload in GPU memory. */
static int cuda_gpu_alloc(struct perf_env *e, uint64_t *addr, kinet_mr **mr)
{
	if (!kinet_cuda_available()) {
		fprintf(stderr, "kinet-perf: --mem gpu: no usable GPU\n");
		return -ENODEV;
	}
	if (cs.env && cs.env != e)
		return -EBUSY; /* one environment per process */
	cs.env = e; /* cuda_close gives back what gpu_buffers got, even on failure */
	if (!cs.ga) {
		int rc = gpu_buffers(e);
		if (rc)
			return rc;
	}
	*addr = (uint64_t)(uintptr_t)cs.ga;
	*mr = cs.gmra;
	return 0;
}

/* Across processes (--mem gpu): e->abuf into the GPU memory, or back. */
static int cuda_gpu_copy(struct perf_env *e, bool to_gpu)
{
	if (cs.env != e || !cs.ga)
		return -EINVAL;
	/* on a stream of its own, waited for: a cudaMemcpy from pageable memory
	 * returns before the bytes reach the GPU, and the peer's writes, which
	 * the NIC copies in on its own streams, may come right after READY */
	cudaStream_t st = NULL;
	cudaError_t ce = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	if (ce == cudaSuccess)
		ce = to_gpu ? cudaMemcpyAsync(cs.ga, e->abuf, e->buf_len, cudaMemcpyHostToDevice, st)
			    : cudaMemcpyAsync(e->abuf, cs.ga, e->buf_len, cudaMemcpyDeviceToHost, st);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(st);
	if (st)
		cudaStreamDestroy(st);
	if (ce != cudaSuccess) {
		fprintf(stderr, "kinet-perf: --mem gpu: cudaMemcpy: %s\n", cudaGetErrorString(ce));
		cudaGetLastError();
		return -EIO;
	}
	return 0;
}

/* Gives back what cuda_run placed: before perf_env_close. */
static void cuda_close(struct perf_env *e)
{
	if (cs.env != e)
		return;
	for (int i = 0; i < e->nqp; i++) {
		if (e->qa && e->qa[i])
			kinet_qp_device_cuda_release(e->qa[i]);
		if (e->qb && e->qb[i])
			kinet_qp_device_cuda_release(e->qb[i]);
	}
	if (cs.gmra)
		kinet_mr_dereg(cs.gmra);
	if (cs.gmrb)
		kinet_mr_dereg(cs.gmrb);
	cudaFree(cs.ga);
	cudaFree(cs.gb);
	if (cs.pinned_a)
		cudaHostUnregister(e->abuf);
	if (cs.pinned_b)
		cudaHostUnregister(e->bbuf);
	free(cs.dqa);
	free(cs.dqb);
	memset(&cs, 0, sizeof(cs));
}

extern "C" const struct perf_executor perf_exec_cuda = {"cuda", cuda_run, cuda_close,
							cuda_gpu_alloc, cuda_gpu_copy};
