/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resp.c - the software NIC's responder: checks rkey, bounds and access on
 * the target QP as a NIC would, places the data, consumes receive WQEs and
 * writes the receive CQEs.
 */
#include <string.h>
#include "nic/soft/soft.h"
#include "nic/soft/dc.h"
#include "nic/soft/rules.h"

static pthread_mutex_t gpu_atomic_lock = PTHREAD_MUTEX_INITIALIZER;

/* soft_exec_local of a request with async_ok: GPU-to-GPU pieces are only
 * enqueued (copy_async), and cp_enqueued says that one was. */
static __thread bool cp_async __attribute__((tls_model("initial-exec")));
static __thread bool cp_enqueued __attribute__((tls_model("initial-exec")));

static int copy_piece(void *dst, int dkind, const void *src, int skind, size_t n)
{
	if (cp_async && dkind == KINET_MEM_CUDA && skind == KINET_MEM_CUDA) {
		int rc = kinet_cuda->copy_async(dst, dkind, src, skind, n);
		if (rc == 0)
			cp_enqueued = true;
		return rc;
	}
	return kinet_mem_copy(dst, dkind, src, skind, n);
}

int soft_copy_iov(const struct soft_iov *dst, int ndst, const struct soft_iov *src, int nsrc,
		  uint64_t total)
{
	int di = 0, si = 0;
	uint64_t doff = 0, soff = 0;
	while (total > 0) {
		while (di < ndst && doff == dst[di].len) {
			di++;
			doff = 0;
		}
		while (si < nsrc && soff == src[si].len) {
			si++;
			soff = 0;
		}
		if (di == ndst || si == nsrc)
			return -ERANGE;
		uint64_t n = dst[di].len - doff;
		if (src[si].len - soff < n)
			n = src[si].len - soff;
		if (n > total)
			n = total;
		int rc = copy_piece(dst[di].ptr + doff, dst[di].kind, src[si].ptr + soff,
				    src[si].kind, n);
		if (rc)
			return rc;
		doff += n;
		soff += n;
		total -= n;
	}
	return 0;
}

static bool accepting(kinet_qp *t)
{
	int s = atomic_load(&t->state);
	return s == KINET_QPS_RTR || s == KINET_QPS_RTS;
}

/* rdlock the target's key table unless the caller's engine holds it (same
 * ctx). Only tried: two engines of two contexts must never wait on each
 * other's table (the caller retries the WQE later). */
static bool tgt_lock(kinet_qp *t, kinet_ctx *held)
{
	return t->ctx == held || pthread_rwlock_tryrdlock(&soft_ctx(t->ctx)->keys.lock) == 0;
}
static void tgt_unlock(kinet_qp *t, kinet_ctx *held)
{
	if (t->ctx != held)
		pthread_rwlock_unlock(&soft_ctx(t->ctx)->keys.lock);
}

/* The engine thread's context, whose key table it holds (NULL: none). */
static __thread kinet_ctx *held_ctx;
void soft_resp_set_held(kinet_ctx *ctx)
{
	held_ctx = ctx;
}

__thread bool soft_moved_staged __attribute__((tls_model("initial-exec")));

/* Bytes moved between a and b: direct between host memories, staged when
 * either side is GPU memory (the software NIC reaches it by CUDA copies). */
static void count_move(kinet_ctx *ctx, const struct soft_iov *a, int na, int bkind,
		       uint64_t total)
{
	int k = bkind; /* KINET_MEM_HOST is 0; an empty piece is host memory */
	for (int i = 0; i < na; i++)
		k |= a[i].kind;
	bool gpu = k != KINET_MEM_HOST;
	KINET_COUNT(ctx, c_bytes, total);
	if (gpu)
		KINET_COUNT(ctx, c_staged, total);
	else
		KINET_COUNT(ctx, c_direct, total);
	soft_moved_staged |= gpu;
}

/* Responder error on the receive side: QP to ERR, then the receive CQE with
 * the syndrome (whoever sees the CQE sees ERR) into the slot take_recv
 * reserved. */
static void resp_fail(kinet_qp *t, uint32_t synd, uint8_t why, uint32_t src_qpn)
{
	struct kn_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	struct kn_err_cqe *e = (struct kn_err_cqe *)&cqe;
	e->syndrome = (uint8_t)synd;
	e->vendor_err_synd = why;
	e->s_wqe_opcode_qpn = kn_htobe32(t->qpn);
	e->wqe_counter = kn_htobe16(soft_qp(t)->rwqe);
	e->op_own = KN_CQE_RESP_ERR << 4;
	(void)src_qpn;
	atomic_store(&t->state, KINET_QPS_ERR);
	soft_cq_push_reserved(t->rcq, &cqe);
	kinet_count_syndrome(t->ctx, synd);
	kinet_qp_count_syndrome(t, synd);
	KINET_QCOUNT(t, KQ_RECV, 1);
	KLOG_DBG("qp 0x%x: receive WQE %u%s: %s (%s), from qp 0x%x", t->qpn,
		 (unsigned)soft_qp(t)->rwqe, soft_qp(t)->srq ? " of its SRQ" : "",
		 kinet_syndrome_str(synd), kinet_reason_str(why), src_qpn);
	if (__builtin_expect(kinet_trace_on, 0))
		kinet_trace_cqe(t, &cqe, 0);
	if (!soft_qp(t)->srq)
		soft_qp(t)->rq_ci++;
}

/* Takes the next receive WQE of t (rq_lock held): scatter list into iov.
 * Returns 0, SOFT_RNR, SOFT_STALL, or a responder syndrome already reported.
 * On 0 a receive CQE slot is reserved: the caller ends with recv_cqe or
 * resp_fail. */
static int take_recv(kinet_qp *t, struct soft_iov *iov, int *niov, uint64_t *cap, uint32_t src_qpn)
{
	struct soft_qp *sq = soft_qp(t);
	const uint8_t *w;
	uint32_t first, stride;
	const kinet_pd *pd = t->pd;
	if (sq->srq) {
		/* the CQE slot first: a WQE taken from the SRQ is this QP's */
		if (soft_cq_reserve(t->rcq))
			return SOFT_STALL;
		if (soft_srq_take(sq->srq, &sq->rwqe, &w)) {
			soft_cq_unreserve(t->rcq);
			return SOFT_RNR;
		}
		first = 16; /* after the next segment */
		stride = sq->srq->stride;
		pd = sq->srq->pd;
	} else {
		if (!t->rq_cnt)
			return SOFT_RNR;
		uint16_t pi =
			(uint16_t)kn_be32toh(__atomic_load_n(&t->dbrec[KN_RCV_DBR], __ATOMIC_ACQUIRE));
		uint16_t avail = (uint16_t)(pi - (uint16_t)sq->rq_ci);
		if (avail == 0 || avail > t->rq_cnt)
			return SOFT_RNR;
		if (soft_cq_reserve(t->rcq)) /* the receive CQ may be shared: reserve */
			return SOFT_STALL;
		w = t->rq + (sq->rq_ci & (t->rq_cnt - 1)) * t->rq_stride;
		sq->rwqe = (uint16_t)sq->rq_ci;
		first = 0;
		stride = t->rq_stride;
	}
	*niov = 0;
	*cap = 0;
	for (uint32_t off = first; off + 16 <= stride; off += 16) {
		uint32_t bc, lkey;
		uint64_t addr;
		memcpy(&bc, w + off, 4);
		memcpy(&lkey, w + off + 4, 4);
		memcpy(&addr, w + off + 8, 8);
		bc = kn_be32toh(bc);
		lkey = kn_be32toh(lkey);
		addr = kn_be64toh(addr);
		if (lkey == KN_INVALID_LKEY) /* ends the list */
			break;
		/* a byte count of 0 means 2^31 bytes (the PRM's data segment) */
		uint64_t len = bc ? bc : 1ull << 31;
		struct kinet_mr_ref ref;
		uint32_t why = soft_mr_check(t->ctx, pd, lkey, addr, len, KINET_ACCESS_LOCAL_WRITE,
					     &ref);
		if (why) {
			resp_fail(t, KN_SYND_LOCAL_PROT_ERR, (uint8_t)why, src_qpn);
			return SOFT_REASON(KN_SYND_REMOTE_OP_ERR, why);
		}
		iov[*niov].ptr = ref.ptr;
		iov[*niov].len = len;
		iov[*niov].kind = ref.kind;
		(*niov)++;
		*cap += len;
	}
	return 0;
}

static void recv_cqe(kinet_qp *t, uint8_t op, uint64_t total, int with_imm, uint32_t imm,
		     uint32_t src_qpn)
{
	struct kn_cqe64 cqe;
	memset(&cqe, 0, sizeof(cqe));
	cqe.byte_cnt = kn_htobe32((uint32_t)total);
	cqe.imm_inval_pkey = with_imm ? imm : 0;
	cqe.flags_rqpn = kn_htobe32(src_qpn & 0xffffff);
	cqe.sop_drop_qpn = kn_htobe32(t->qpn & 0xffffff);
	cqe.wqe_counter = kn_htobe16(soft_qp(t)->rwqe);
	cqe.op_own = (uint8_t)(op << 4);
	soft_cq_push_reserved(t->rcq, &cqe); /* reserved by take_recv */
	KINET_QCOUNT(t, KQ_RECV, 1);
	KINET_QCOUNT(t, KQ_RECV_BYTES, total);
	if (__builtin_expect(kinet_trace_on, 0))
		kinet_trace_cqe(t, &cqe, total);
	if (!soft_qp(t)->srq)
		soft_qp(t)->rq_ci++;
}

int soft_resp_write(kinet_qp *t, uint64_t raddr, uint32_t rkey, const struct soft_iov *src,
		    int niov, uint64_t total, int with_imm, uint32_t imm, uint32_t src_qpn)
{
	if (!accepting(t))
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_QP_NOT_READY);
	uint32_t why = soft_qp_access_check(t, KINET_ACCESS_REMOTE_WRITE);
	if (why)
		return SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
	int rc = 0;
	struct kinet_mr_ref ref = {0};
	if (!tgt_lock(t, held_ctx))
		return SOFT_STALL;
	why = total ? soft_mr_check(t->ctx, t->pd, rkey, raddr, total, KINET_ACCESS_REMOTE_WRITE,
				    &ref)
		    : 0;
	if (why) {
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
		goto out;
	}
	if (with_imm) {
		pthread_mutex_lock(&soft_qp(t)->rq_lock);
		struct soft_iov riov[SOFT_MAX_SGE];
		int rn;
		uint64_t cap;
		rc = take_recv(t, riov, &rn, &cap, src_qpn);
		if (rc) {
			pthread_mutex_unlock(&soft_qp(t)->rq_lock);
			goto out;
		}
	}
	if (total) {
		struct soft_iov dst = {ref.ptr, total, ref.kind, NULL};
		if (soft_copy_iov(&dst, 1, src, niov, total))
			rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
		else
			count_move(t->ctx, src, niov, ref.kind, total);
	}
	if (with_imm) {
		recv_cqe(t, KN_CQE_RESP_WR_IMM, total, 1, imm, src_qpn);
		pthread_mutex_unlock(&soft_qp(t)->rq_lock);
	}
out:
	tgt_unlock(t, held_ctx);
	return rc;
}

int soft_resp_write_imm(kinet_qp *t, uint64_t len, uint32_t imm, uint32_t src_qpn)
{
	if (!accepting(t))
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_QP_NOT_READY);
	if (!tgt_lock(t, held_ctx))
		return SOFT_STALL;
	pthread_mutex_lock(&soft_qp(t)->rq_lock);
	struct soft_iov riov[SOFT_MAX_SGE];
	int rn;
	uint64_t cap;
	int rc = take_recv(t, riov, &rn, &cap, src_qpn);
	if (rc == 0)
		recv_cqe(t, KN_CQE_RESP_WR_IMM, len, 1, imm, src_qpn);
	pthread_mutex_unlock(&soft_qp(t)->rq_lock);
	tgt_unlock(t, held_ctx);
	return rc;
}

int soft_resp_read(kinet_qp *t, uint64_t raddr, uint32_t rkey, const struct soft_iov *dst,
		   int niov, uint64_t total)
{
	if (!accepting(t))
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_QP_NOT_READY);
	uint32_t why = soft_qp_access_check(t, KINET_ACCESS_REMOTE_READ);
	if (why)
		return SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
	int rc = 0;
	struct kinet_mr_ref ref = {0};
	if (!tgt_lock(t, held_ctx))
		return SOFT_STALL;
	why = total ? soft_mr_check(t->ctx, t->pd, rkey, raddr, total, KINET_ACCESS_REMOTE_READ,
				    &ref)
		    : 0;
	if (why) {
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
		goto out;
	}
	if (total) {
		struct soft_iov src = {ref.ptr, total, ref.kind, NULL};
		if (soft_copy_iov(dst, niov, &src, 1, total))
			rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
		else
			count_move(t->ctx, dst, niov, ref.kind, total);
	}
out:
	tgt_unlock(t, held_ctx);
	return rc;
}

int soft_resp_atomic(kinet_qp *t, uint8_t opcode, uint64_t raddr, uint32_t rkey,
		     uint64_t swap_add, uint64_t compare, uint64_t *old)
{
	if (!accepting(t))
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_QP_NOT_READY);
	uint32_t why = soft_qp_access_check(t, KINET_ACCESS_REMOTE_ATOMIC);
	if (why)
		return SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
	if (raddr & 7)
		return SOFT_REASON(KN_SYND_REMOTE_INVAL_REQ_ERR, KINET_REASON_ALIGNMENT);
	int rc = 0;
	struct kinet_mr_ref ref;
	if (!tgt_lock(t, held_ctx))
		return SOFT_STALL;
	why = soft_mr_check(t->ctx, t->pd, rkey, raddr, 8, KINET_ACCESS_REMOTE_ATOMIC, &ref);
	if (why) {
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
		goto out;
	}
	if (ref.kind == KINET_MEM_HOST) {
		uint64_t *p = (uint64_t *)ref.ptr;
		if (opcode == KN_OPCODE_ATOMIC_FA) {
			*old = __atomic_fetch_add(p, swap_add, __ATOMIC_SEQ_CST);
		} else {
			uint64_t expect = compare;
			__atomic_compare_exchange_n(p, &expect, swap_add, 0, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
			*old = expect;
		}
	} else if (kinet_cuda && kinet_cuda->atomic64) {
		/* GPU memory: NIC atomics are atomic with respect to each other */
		pthread_mutex_lock(&gpu_atomic_lock);
		if (kinet_cuda->atomic64(ref.ptr, opcode, swap_add, compare, old))
			rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
		pthread_mutex_unlock(&gpu_atomic_lock);
	} else {
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
	}
out:
	tgt_unlock(t, held_ctx);
	return rc;
}

bool soft_masked_apply(uint8_t opcode, uint32_t size, uint64_t old, uint64_t a, uint64_t b,
		       uint64_t c, uint64_t d, uint64_t *nv)
{
	uint64_t all = size == 4 ? 0xffffffffull : ~0ull;
	old &= all;
	if (opcode == KN_OPCODE_ATOMIC_MASKED_CS) {
		if ((old ^ b) & d & all)
			return false;
		*nv = ((old & ~c) | (a & c)) & all;
		return true;
	}
	/* masked fetch-and-add: the bits set in the boundary c end a field; add
	 * with those bits cleared (no carry leaves a field), then put back the
	 * top bit of each field: its own sum with the carry that reached it */
	uint64_t h = c & all;
	uint64_t sum = ((old & ~h) + (a & ~h)) & all;
	*nv = (sum & ~h) | ((old ^ a ^ sum) & h);
	return true;
}

/* A masked atomic on host memory: the CPU's compare-and-swap in a loop (an
 * atomic read-modify-write: no other atomic, of the NIC or of a CPU thread,
 * can slip in between), or a plain fetch-add where that is what it is. */
static uint64_t masked_host(void *p, uint8_t opcode, uint32_t size, uint64_t a, uint64_t b,
			    uint64_t c, uint64_t d)
{
	uint64_t nv;
	if (opcode == KN_OPCODE_ATOMIC_MASKED_FA && c == 0)
		return size == 4 ? __atomic_fetch_add((uint32_t *)p, (uint32_t)a, __ATOMIC_SEQ_CST)
				 : __atomic_fetch_add((uint64_t *)p, a, __ATOMIC_SEQ_CST);
	if (size == 4) {
		uint32_t *w = p, o = __atomic_load_n(w, __ATOMIC_RELAXED);
		while (soft_masked_apply(opcode, 4, o, a, b, c, d, &nv) &&
		       !__atomic_compare_exchange_n(w, &o, (uint32_t)nv, 1, __ATOMIC_SEQ_CST,
						    __ATOMIC_RELAXED))
			;
		return o;
	}
	uint64_t *w = p, o = __atomic_load_n(w, __ATOMIC_RELAXED);
	while (soft_masked_apply(opcode, 8, o, a, b, c, d, &nv) &&
	       !__atomic_compare_exchange_n(w, &o, nv, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
	return o;
}

int soft_resp_masked_atomic(kinet_qp *t, uint8_t opcode, uint32_t size, uint64_t raddr,
			    uint32_t rkey, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
			    uint64_t *old)
{
	if (!accepting(t))
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_QP_NOT_READY);
	if (size != 4 && size != 8)
		return SOFT_REASON(KN_SYND_REMOTE_INVAL_REQ_ERR, KINET_REASON_MALFORMED);
	if (opcode != KN_OPCODE_ATOMIC_MASKED_CS && opcode != KN_OPCODE_ATOMIC_MASKED_FA)
		return SOFT_REASON(KN_SYND_REMOTE_INVAL_REQ_ERR, KINET_REASON_MALFORMED);
	uint32_t why = soft_qp_access_check(t, KINET_ACCESS_REMOTE_ATOMIC);
	if (why)
		return SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
	if (raddr & (size - 1))
		return SOFT_REASON(KN_SYND_REMOTE_INVAL_REQ_ERR, KINET_REASON_ALIGNMENT);
	int rc = 0;
	struct kinet_mr_ref ref;
	if (!tgt_lock(t, held_ctx))
		return SOFT_STALL;
	why = soft_mr_check(t->ctx, t->pd, rkey, raddr, size, KINET_ACCESS_REMOTE_ATOMIC,
				     &ref);
	if (why) {
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
		goto out;
	}
	if (ref.kind == KINET_MEM_HOST) {
		*old = masked_host(ref.ptr, opcode, size, a, b, c, d);
	} else {
		/* GPU memory: read, compute, write back with the copy engine,
		 * under the lock every NIC atomic on GPU memory takes */
		uint64_t v = 0, nv;
		pthread_mutex_lock(&gpu_atomic_lock);
		if (kinet_mem_copy(&v, KINET_MEM_HOST, ref.ptr, ref.kind, size)) {
			rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
		} else {
			if (soft_masked_apply(opcode, size, v, a, b, c, d, &nv) && nv != v &&
			    kinet_mem_copy(ref.ptr, ref.kind, &nv, KINET_MEM_HOST, size))
				rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
			*old = v;
		}
		pthread_mutex_unlock(&gpu_atomic_lock);
	}
out:
	tgt_unlock(t, held_ctx);
	return rc;
}

int soft_resp_send(kinet_qp *t, const struct soft_iov *src, int niov, uint64_t total,
		   int with_imm, uint32_t imm, uint32_t src_qpn)
{
	if (!accepting(t))
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_QP_NOT_READY);
	int rc;
	if (!tgt_lock(t, held_ctx))
		return SOFT_STALL;
	pthread_mutex_lock(&soft_qp(t)->rq_lock);
	struct soft_iov riov[SOFT_MAX_SGE];
	int rn;
	uint64_t cap;
	rc = take_recv(t, riov, &rn, &cap, src_qpn);
	if (rc)
		goto out;
	if (total > cap) {
		resp_fail(t, KN_SYND_LOCAL_LENGTH_ERR, KINET_REASON_LENGTH, src_qpn);
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_INVAL_REQ_ERR, KINET_REASON_LENGTH);
		goto out;
	}
	if (total && soft_copy_iov(riov, rn, src, niov, total)) {
		resp_fail(t, KN_SYND_LOCAL_PROT_ERR, KINET_REASON_COPY_FAILED, src_qpn);
		rc = (int)SOFT_REASON(KN_SYND_REMOTE_OP_ERR, KINET_REASON_COPY_FAILED);
		goto out;
	}
	bool gpu_dst = false;
	for (int i = 0; i < rn; i++)
		gpu_dst |= riov[i].kind != KINET_MEM_HOST;
	count_move(t->ctx, src, niov, gpu_dst ? KINET_MEM_CUDA : KINET_MEM_HOST, total);
	recv_cqe(t, with_imm ? KN_CQE_RESP_SEND_IMM : KN_CQE_RESP_SEND, total, with_imm, imm, src_qpn);
out:
	pthread_mutex_unlock(&soft_qp(t)->rq_lock);
	tgt_unlock(t, held_ctx);
	return rc;
}

static int exec_local(kinet_qp *qp, kinet_qp *t, struct soft_req *r);

/* A masked atomic against a same-process peer: the old value lands,
 * big-endian as the NIC returns it, in the request's `size` bytes. */
static int exec_masked(kinet_qp *t, struct soft_req *r)
{
	uint64_t old = 0;
	int rc = soft_resp_masked_atomic(t, r->opcode, r->atomic_size, r->raddr, r->rkey,
					 r->swap_add, r->compare, r->swap_mask, r->compare_mask,
					 &old);
	if (rc)
		return rc;
	uint8_t be[8];
	if (r->atomic_size == 4)
		kn_store_be32(be, (uint32_t)old);
	else
		kn_store_be64(be, old);
	struct soft_iov src = {be, r->atomic_size, KINET_MEM_HOST, NULL};
	if (soft_copy_iov(r->iov, r->niov, &src, 1, r->atomic_size))
		return KN_SYND_LOCAL_PROT_ERR;
	return 0;
}

int soft_exec_local(kinet_qp *qp, struct soft_req *r)
{
	kinet_qp *t = __atomic_load_n(&soft_qp(qp)->peer, __ATOMIC_ACQUIRE);
	if (qp->dc == KINET_DC_DCI) {
		/* the target this WQE names (dc.h); the local operations the
		 * decoder admits (NOP, DUMP, WAIT) need none and move nothing */
		if (!kn_rule_dc_addressed(r->opcode))
			return 0;
		uint32_t why;
		t = soft_dct_find(qp->ctx, r->dct, r->dc_key, &why);
		if (!t) {
			KLOG_DBG("dci 0x%x: WQE %u: DCT 0x%x: %s", qp->qpn, r->wqe_idx, r->dct,
				 kinet_reason_str((int)why));
			/* a DCT that does not answer: as hardware, whose requests
			 * go unanswered, after its retries */
			return why == KINET_REASON_PEER_GONE
				       ? SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, why)
				       : SOFT_REASON(KN_SYND_REMOTE_ACCESS_ERR, why);
		}
	}
	if (!t) /* nobody answers */
		return SOFT_REASON(KN_SYND_TRANSPORT_RETRY_EXC_ERR, KINET_REASON_PEER_GONE);
	r->in_flight = 0;
	/* same context only: a writer of the key table waits for the copies in
	 * flight of its own context's engines */
	if (!r->async_ok || t->ctx != qp->ctx || !kinet_cuda || !kinet_cuda->copy_async)
		return exec_local(qp, t, r);
	cp_async = true;
	cp_enqueued = false;
	int rc = exec_local(qp, t, r);
	cp_async = false;
	r->in_flight = cp_enqueued;
	return rc;
}

static int exec_local(kinet_qp *qp, kinet_qp *t, struct soft_req *r)
{
	switch (r->opcode) {
	case KN_OPCODE_NOP:
	case KN_OPCODE_DUMP: /* its buffers were checked: nothing moves */
	case KN_OPCODE_WAIT: /* the engine held it until its CQE was written */
		return 0;
	case KN_OPCODE_RDMA_WRITE:
	case KN_OPCODE_RDMA_WRITE_IMM:
		return soft_resp_write(t, r->raddr, r->rkey, r->iov, r->niov, r->total,
				       r->opcode == KN_OPCODE_RDMA_WRITE_IMM, r->imm, qp->qpn);
	case KN_OPCODE_RDMA_READ:
		return soft_resp_read(t, r->raddr, r->rkey, r->iov, r->niov, r->total);
	case KN_OPCODE_SEND:
	case KN_OPCODE_SEND_IMM:
		return soft_resp_send(t, r->iov, r->niov, r->total, r->opcode == KN_OPCODE_SEND_IMM,
				      r->imm, qp->qpn);
	case KN_OPCODE_ATOMIC_CS:
	case KN_OPCODE_ATOMIC_FA: {
		uint64_t old = 0;
		int rc = soft_resp_atomic(t, r->opcode, r->raddr, r->rkey, r->swap_add, r->compare,
					  &old);
		if (rc)
			return rc;
		uint64_t be = kn_htobe64(old); /* the NIC returns big-endian */
		struct soft_iov src = {(uint8_t *)&be, 8, KINET_MEM_HOST, NULL};
		if (soft_copy_iov(r->iov, r->niov, &src, 1, 8))
			return SOFT_REASON(KN_SYND_LOCAL_PROT_ERR, KINET_REASON_COPY_FAILED);
		return 0;
	}
	case KN_OPCODE_ATOMIC_MASKED_CS:
	case KN_OPCODE_ATOMIC_MASKED_FA:
		return exec_masked(t, r);
	default:
		return KN_SYND_LOCAL_QP_OP_ERR;
	}
}
