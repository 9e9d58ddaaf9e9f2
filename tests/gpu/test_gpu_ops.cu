/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every device-API opcode (put, put inline, get, put_signal, signal,
 * atomics) from CUDA kernels, at thread, warp and block scope, exclusive and
 * shared QPs, under each doorbell mode, checked byte for byte on random data
 * in GPU memory (and host memory).
 */
#include "gpu_util.h"

#define CHUNK 4096u

struct ops_args {
	const kn_qp *qp;
	int scope; /* enum gu_scope */
	int share; /* enum kn_share */
	int kind;  /* enum kn_op_kind */
	uint8_t *local;
	uint32_t lkey;
	uint64_t remote;
	uint32_t rkey;
	uint64_t sig;
	uint32_t sig_rkey;
	int *rc; /* one per slot */
};

/* Length of slot i's message. */
__host__ __device__ static uint32_t op_len(int kind, uint32_t i)
{
	if (kind == KN_OP_PUT_INLINE)
		return 1 + i % KN_MAX_INLINE_WRITE;
	return 1 + (i * 977u + (uint32_t)kind * 13u) % CHUNK;
}

__device__ static kn_op make_op(const ops_args *a, uint32_t i)
{
	kn_op op = {};
	op.kind = a->kind;
	op.len = op_len(a->kind, i);
	op.laddr = (uint64_t)(uintptr_t)(a->local + (size_t)i * CHUNK);
	op.lkey = a->lkey;
	op.raddr = a->remote + (uint64_t)i * CHUNK;
	op.rkey = a->rkey;
	op.src = a->local + (size_t)i * CHUNK;
	op.sig_raddr = a->sig;
	op.sig_rkey = a->sig_rkey;
	op.add = i + 1;
	return op;
}

/* Thread scope through the high-level thread-scope calls. */
__device__ static int thread_op(const kn_qp *qp, const kn_op *op)
{
	kn_ticket_t t;
	switch (op->kind) {
	case KN_OP_PUT:
		return kn_put(qp, op->raddr, op->rkey, (const void *)op->laddr, op->lkey, op->len, &t);
	case KN_OP_PUT_INLINE:
		return kn_put_inline(qp, op->raddr, op->rkey, op->src, op->len, &t);
	case KN_OP_GET:
		return kn_get(qp, (void *)op->laddr, op->lkey, op->raddr, op->rkey, op->len, &t);
	case KN_OP_PUT_SIGNAL:
		return kn_put_signal(qp, op->raddr, op->rkey, (const void *)op->laddr, op->lkey,
				     op->len, op->sig_raddr, op->sig_rkey, op->add, &t);
	default:
		return kn_signal(qp, op->sig_raddr, op->sig_rkey, op->add, &t);
	}
}

__global__ void ops_kernel(ops_args a, uint32_t nslots)
{
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	int rc = 0;
	if (a.scope == GU_THREAD && a.share == KN_SHARE_EXCLUSIVE) {
		/* one owner thread posts every slot */
		if (g != 0)
			return;
		for (uint32_t i = 0; i < nslots && !rc; i++) {
			kn_op op = make_op(&a, i);
			rc = thread_op(a.qp, &op);
		}
		if (!rc)
			rc = kn_quiet(a.qp);
		for (uint32_t i = 0; i < nslots; i++)
			a.rc[i] = rc;
		return;
	}
	kn_op op = make_op(&a, g);
	if (a.scope == GU_THREAD) {
		rc = thread_op(a.qp, &op);
		int q = kn_quiet(a.qp);
		rc = rc ? rc : q;
	} else if (a.scope == GU_WARP) {
		kn_ticket_t t;
		rc = kn_warp_post(a.qp, &op, &t);
		int w = kn_warp_wait(a.qp, t);
		int q = kn_warp_quiet(a.qp);
		rc = rc ? rc : (w ? w : q);
	} else {
		kn_ticket_t t;
		rc = kn_block_post(a.qp, &op, &t);
		int q = kn_block_quiet(a.qp);
		rc = rc ? rc : q;
	}
	a.rc[g] = rc;
}

struct combo {
	int scope, share, blocks, threads;
};
static const combo combos[] = {
	{GU_THREAD, KN_SHARE_EXCLUSIVE, 1, 1},  {GU_THREAD, KN_SHARE_GPU, 2, 64},
	{GU_WARP, KN_SHARE_EXCLUSIVE, 1, 32},   {GU_WARP, KN_SHARE_CTA, 1, 64},
	{GU_WARP, KN_SHARE_GPU, 2, 64},         {GU_BLOCK, KN_SHARE_EXCLUSIVE, 1, 64},
	{GU_BLOCK, KN_SHARE_GPU, 2, 64},
};
static const char *const share_name[] = {"exclusive", "cta", "gpu"};

/* Runs one opcode over every doorbell mode and scope/sharing combination. */
static void run_kind(int kind, int remote_host)
{
	const uint32_t nslots = 128; /* the most any combination uses */
	for (int m = 0; m < 3; m++) {
		for (size_t c = 0; c < sizeof(combos) / sizeof(combos[0]); c++) {
			const combo &cb = combos[c];
			uint32_t used = cb.scope == GU_THREAD && cb.share == KN_SHARE_EXCLUSIVE
						? 64
						: (uint32_t)(cb.blocks * cb.threads);
			struct gu_ctx g;
			gu_open(&g, 1, 64, gu_modes[m], cb.share, 1);
			uint64_t seed = 1000 + (uint64_t)kind * 100 + (uint64_t)m * 10 + c;
			struct gu_buf loc, rem, sig;
			gu_buf_alloc(&loc, g.pd, (size_t)nslots * CHUNK, seed, 0);
			gu_buf_alloc(&rem, g.pd, (size_t)nslots * CHUNK, seed + 7, remote_host);
			gu_buf_alloc(&sig, g.pd, 64, seed + 11, 0);
			int *drc;
			CU(cudaMalloc((void **)&drc, nslots * sizeof(int)));
			CU(cudaMemset(drc, 0x7f, nslots * sizeof(int)));
			ops_args a;
			memset(&a, 0, sizeof(a));
			a.qp = g.d[0];
			a.scope = cb.scope;
			a.share = cb.share;
			a.kind = kind;
			a.local = loc.dev;
			a.lkey = kinet_mr_lkey(loc.mr);
			a.remote = (uint64_t)(uintptr_t)rem.dev;
			a.rkey = gu_key(&rem);
			a.sig = (uint64_t)(uintptr_t)sig.dev;
			a.sig_rkey = gu_key(&sig);
			a.rc = drc;
			ops_kernel<<<cb.blocks, cb.threads>>>(a, used);
			CU_SYNC();
			char where[160];
			snprintf(where, sizeof(where), "op %d, db %s, %s scope, %s QP", kind,
				 kinet_db_mode_str(gu_modes[m]), gu_scope_name[cb.scope],
				 share_name[cb.share]);
			int hrc[nslots];
			CU(cudaMemcpy(hrc, drc, sizeof(hrc), cudaMemcpyDeviceToHost));
			for (uint32_t i = 0; i < used; i++) {
				if (hrc[i])
					gu_diag(&g, 0);
				cr_assert_eq(hrc[i], 0, "%s: slot %u returned %d", where, i, hrc[i]);
			}
			uint8_t *lback = (uint8_t *)malloc(loc.len), *rback = (uint8_t *)malloc(rem.len);
			gu_buf_read(&loc, lback);
			gu_buf_read(&rem, rback);
			for (uint32_t i = 0; i < nslots; i++) {
				size_t off = (size_t)i * CHUNK;
				uint32_t len = i < used ? op_len(kind, i) : 0;
				if (kind == KN_OP_SIGNAL)
					len = 0;
				if (kind == KN_OP_GET) {
					/* local slot = remote bytes, then untouched */
					long d = gu_diff(lback + off, rem.mirror + off, len);
					cr_assert_eq(d, -1, "%s: slot %u byte %ld", where, i, d);
					d = gu_diff(lback + off + len, loc.mirror + off + len, CHUNK - len);
					cr_assert_eq(d, -1, "%s: slot %u written past %u", where, i, len);
					d = gu_diff(rback + off, rem.mirror + off, CHUNK);
					cr_assert_eq(d, -1, "%s: remote slot %u changed", where, i);
				} else {
					long d = gu_diff(rback + off, loc.mirror + off, len);
					cr_assert_eq(d, -1, "%s: slot %u byte %ld", where, i, d);
					d = gu_diff(rback + off + len, rem.mirror + off + len, CHUNK - len);
					cr_assert_eq(d, -1, "%s: slot %u written past %u", where, i, len);
				}
			}
			uint64_t s0, s1;
			memcpy(&s0, sig.mirror, 8);
			CU(cudaMemcpy(&s1, sig.dev, 8, cudaMemcpyDeviceToHost));
			uint64_t want = s0;
			if (kind == KN_OP_PUT_SIGNAL || kind == KN_OP_SIGNAL)
				want += (uint64_t)used * (used + 1) / 2;
			cr_assert_eq(s1, want, "%s: signal %llx, want %llx", where,
				     (unsigned long long)s1, (unsigned long long)want);
			/* the doorbell mode was the one in use */
			struct kinet_counters k;
			cr_assert_eq(kinet_ctx_counters(g.ctx, &k), 0);
			if (gu_modes[m] == KN_DB_CPU_PROXY)
				cr_assert_gt(k.proxy_rings, 0, "%s: no CPU-proxy ring", where);
			else
				cr_assert_eq(k.proxy_rings, 0, "%s: CPU proxy used", where);
			cr_assert_gt(k.doorbells, 0, "%s: no doorbell register write", where);
			kn_qp_state st;
			cr_assert_eq(kinet_qp_cuda_state_read(g.a[0], &st), 0);
			cr_assert_eq(st.err_ticket, KN_NO_ERROR, "%s", where);
			cr_assert_eq(st.done, st.resv, "%s: done %llu resv %llu", where,
				     (unsigned long long)st.done, (unsigned long long)st.resv);
			free(lback);
			free(rback);
			cudaFree(drc);
			gu_buf_free(&loc);
			gu_buf_free(&rem);
			gu_buf_free(&sig);
			gu_close(&g);
		}
	}
}

Test(gpu_ops, put, .timeout = 120) { run_kind(KN_OP_PUT, 0); }
Test(gpu_ops, put_inline, .timeout = 120) { run_kind(KN_OP_PUT_INLINE, 0); }
Test(gpu_ops, get, .timeout = 120) { run_kind(KN_OP_GET, 0); }
Test(gpu_ops, put_signal, .timeout = 120) { run_kind(KN_OP_PUT_SIGNAL, 0); }
Test(gpu_ops, signal, .timeout = 120) { run_kind(KN_OP_SIGNAL, 0); }
/* GPU memory to and from pinned host memory */
Test(gpu_ops, put_to_host, .timeout = 120) { run_kind(KN_OP_PUT, 1); }
Test(gpu_ops, get_from_host, .timeout = 120) { run_kind(KN_OP_GET, 1); }

/* Fetch-add and compare-swap from many threads on one word in GPU memory:
 * the NIC's atomics are atomic with respect to each other, and each thread
 * gets a distinct old value. */
__global__ void atomics_kernel(const kn_qp *qp, uint64_t word, uint32_t rkey, uint64_t *res,
			       uint32_t res_lkey, uint64_t *olds, int *rc, int cas)
{
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t old = 0;
	int r;
	if (!cas) {
		r = kn_atomic_fetch_add(qp, word, rkey, 1, res + g, res_lkey, &old);
	} else {
		/* CAS loop: increment with compare-and-swap until it wins */
		uint64_t cur = 0;
		r = kn_atomic_fetch_add(qp, word, rkey, 0, res + g, res_lkey, &cur);
		for (int i = 0; !r && i < 100000; i++) {
			r = kn_atomic_compare_swap(qp, word, rkey, cur, cur + 1, res + g, res_lkey,
						   &old);
			if (r || old == cur)
				break;
			cur = old;
		}
	}
	olds[g] = old;
	rc[g] = r;
}

static void run_atomics(int cas)
{
	const int nb = 2, nt = 32, n = nb * nt;
	struct gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_GPU, 1);
	struct gu_buf word, res;
	gu_buf_alloc(&word, g.pd, 64, 77 + cas, 0);
	gu_buf_alloc(&res, g.pd, (size_t)n * 8, 78, 0);
	uint64_t base;
	memcpy(&base, word.mirror, 8);
	uint64_t *dolds;
	int *drc;
	CU(cudaMalloc((void **)&dolds, n * 8));
	CU(cudaMalloc((void **)&drc, n * sizeof(int)));
	atomics_kernel<<<nb, nt>>>(g.d[0], (uint64_t)(uintptr_t)word.dev, gu_key(&word),
				   (uint64_t *)res.dev, kinet_mr_lkey(res.mr), dolds, drc, cas);
	CU_SYNC();
	uint64_t olds[n], fin;
	int rc[n];
	CU(cudaMemcpy(olds, dolds, sizeof(olds), cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(rc, drc, sizeof(rc), cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(&fin, word.dev, 8, cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++) {
		if (rc[i])
			gu_diag(&g, 0);
		cr_assert_eq(rc[i], 0, "thread %d: %d", i, rc[i]);
	}
	cr_assert_eq(fin, base + (uint64_t)n, "final %llx base %llx", (unsigned long long)fin,
		     (unsigned long long)base);
	/* every old value in [base, base+n) exactly once */
	static uint8_t seen[64];
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < n; i++) {
		if (rc[i])
			gu_diag(&g, 0);
		cr_assert_eq(rc[i], 0, "thread %d: %d", i, rc[i]);
		uint64_t k = olds[i] - base;
		cr_assert_lt(k, (uint64_t)n, "thread %d old %llx", i, (unsigned long long)olds[i]);
		cr_assert_eq(seen[k], 0, "old value %llu twice", (unsigned long long)k);
		seen[k] = 1;
	}
	cudaFree(dolds);
	cudaFree(drc);
	gu_buf_free(&word);
	gu_buf_free(&res);
	gu_close(&g);
}

Test(gpu_ops, atomic_fetch_add, .timeout = 120) { run_atomics(0); }
Test(gpu_ops, atomic_compare_swap, .timeout = 120) { run_atomics(1); }

/* A length a data segment cannot carry (bit 31 is its inline flag): at
 * thread scope the call is refused; at warp and block scope one lane's bad
 * length refuses the whole post. Every caller gets -EINVAL, no ticket is
 * taken, nothing reaches the SQ or the target. */
__global__ void badlen_kernel(ops_args a, uint32_t bad)
{
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	kn_op op = make_op(&a, g);
	if (a.scope == GU_THREAD || g % 32 == bad) /* one lane of every warp */
		op.len = 0x80000000u | op.len;
	kn_ticket_t t = ~0ull;
	int rc;
	if (a.scope == GU_THREAD)
		rc = kn_post(a.qp, &op, &t);
	else if (a.scope == GU_WARP)
		rc = kn_warp_post(a.qp, &op, &t);
	else
		rc = kn_block_post(a.qp, &op, &t);
	a.rc[g] = rc == -EINVAL && t == ~0ull ? 0 : (rc ? rc : 1);
}

static void run_badlen(int kind)
{
	const uint32_t n = 64;
	for (int scope = GU_THREAD; scope <= GU_BLOCK; scope++) {
		struct gu_ctx g;
		gu_open(&g, 1, 64, KN_DB_GPU, scope == GU_BLOCK ? KN_SHARE_EXCLUSIVE : KN_SHARE_CTA,
			1);
		struct gu_buf loc, rem, sig;
		gu_buf_alloc(&loc, g.pd, (size_t)n * CHUNK, 500 + scope, 0);
		gu_buf_alloc(&rem, g.pd, (size_t)n * CHUNK, 510 + scope, 0);
		gu_buf_alloc(&sig, g.pd, 64, 520 + scope, 0);
		kn_qp *h;
		cr_assert_eq(kinet_qp_device(g.a[0], &h), 0);
		size_t sqb = (size_t)h->sq_wqe_cnt * KN_SEND_WQE_BB;
		uint8_t *sq0 = (uint8_t *)malloc(sqb);
		memcpy(sq0, h->sq, sqb);
		int *drc;
		CU(cudaMalloc((void **)&drc, n * sizeof(int)));
		ops_args a;
		memset(&a, 0, sizeof(a));
		a.qp = g.d[0];
		a.scope = scope;
		a.kind = kind;
		a.local = loc.dev;
		a.lkey = kinet_mr_lkey(loc.mr);
		a.remote = (uint64_t)(uintptr_t)rem.dev;
		a.rkey = gu_key(&rem);
		a.sig = (uint64_t)(uintptr_t)sig.dev;
		a.sig_rkey = gu_key(&sig);
		a.rc = drc;
		badlen_kernel<<<1, n>>>(a, 5);
		CU_SYNC();
		int hrc[n];
		CU(cudaMemcpy(hrc, drc, sizeof(hrc), cudaMemcpyDeviceToHost));
		for (uint32_t i = 0; i < n; i++)
			cr_assert_eq(hrc[i], 0,
				     "op %d, %s scope, slot %u: %d (want -EINVAL, no ticket)", kind,
				     gu_scope_name[scope], i, hrc[i]);
		kn_qp_state st;
		cr_assert_eq(kinet_qp_cuda_state_read(g.a[0], &st), 0);
		cr_assert_eq(st.resv, 0, "%s scope: a ticket was taken", gu_scope_name[scope]);
		cr_assert_eq(memcmp(sq0, h->sq, sqb), 0, "%s scope: the SQ was written",
			     gu_scope_name[scope]);
		uint8_t *rback = (uint8_t *)malloc(rem.len);
		gu_buf_read(&rem, rback);
		cr_assert_eq(gu_diff(rback, rem.mirror, rem.len), -1, "%s scope: target written",
			     gu_scope_name[scope]);
		free(rback);
		free(sq0);
		cudaFree(drc);
		gu_buf_free(&loc);
		gu_buf_free(&rem);
		gu_buf_free(&sig);
		gu_close(&g);
	}
}

Test(gpu_ops, put_bit31_refused, .timeout = 120) { run_badlen(KN_OP_PUT); }
Test(gpu_ops, get_bit31_refused, .timeout = 120) { run_badlen(KN_OP_GET); }
Test(gpu_ops, put_signal_bit31_refused, .timeout = 120) { run_badlen(KN_OP_PUT_SIGNAL); }
