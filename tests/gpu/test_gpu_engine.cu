/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The software NIC's GPU engine (KINET_GPU_ENGINE=on): puts, gets and
 * atomics from a kernel on GPU memory are executed by the GPU engine
 * (kinet_qp_ep_info says so), byte for byte on random data; a bad key on a
 * QP the GPU engine serves ends in the error CQE the CPU engine writes
 * (same syndrome and reason), then ERR; a revoked region under traffic
 * fails the kernel's next put, never hangs it; the engine exits when idle
 * (cudaDeviceSynchronize returns) and takes the QP again when it is busy;
 * with the WQE trace on, the kernel's records reach the trace.
 */
#include <time.h>
#include "gpu_util.h"
#include "core/trace_fmt.h"

#define N 256u
#define CH 4096u

static void engine_on(void)
{
	setenv("KINET_GPU_ENGINE", "on", 1);
	setenv("KINET_GPU_ENGINE_IDLE_US", "2000", 1);
}

__global__ void put_get_kernel(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint64_t dst,
			       uint32_t rkey, uint8_t *back, uint32_t back_lkey, uint64_t ctr,
			       uint32_t ctr_rkey, uint64_t *res, uint32_t res_lkey, int *rc)
{
	kn_ticket_t t;
	int r = 0;
	for (uint32_t i = 0; i < N && !r; i++) {
		uint32_t len = 1 + (i * 977u) % CH;
		r = kn_put(qp, dst + (uint64_t)i * CH, rkey, src + (size_t)i * CH, lkey, len, &t);
	}
	if (!r)
		r = kn_quiet(qp);
	for (uint32_t i = 0; i < N && !r; i++) {
		uint32_t len = 1 + (i * 977u) % CH;
		r = kn_get(qp, back + (size_t)i * CH, back_lkey, dst + (uint64_t)i * CH, rkey, len,
			   &t);
	}
	if (!r)
		r = kn_quiet(qp);
	uint64_t old = 0, sum = 0;
	for (uint32_t i = 0; i < 16 && !r; i++) {
		r = kn_atomic_fetch_add(qp, ctr, ctr_rkey, i + 1, res, res_lkey, &old);
		if (!r && old != sum)
			r = -1000 - (int)i; /* the old value is wrong */
		sum += i + 1;
	}
	if (!r) {
		r = kn_atomic_compare_swap(qp, ctr, ctr_rkey, sum, 7, res, res_lkey, &old);
		if (!r && old != sum)
			r = -2000;
	}
	*rc = r;
}

__global__ void put_loop_kernel(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint64_t dst,
				uint32_t rkey, uint32_t n, int *rc, uint32_t *done)
{
	kn_ticket_t t;
	int r = 0;
	uint32_t i = 0;
	for (; i < n && !r; i++) {
		r = kn_put(qp, dst + (uint64_t)(i % N) * 64, rkey, src, lkey, 64, &t);
		if (!r)
			r = kn_wait(qp, t);
	}
	*done = i;
	*rc = r;
}

struct fix {
	gu_ctx g;
	gu_buf src, dst, back, ctr, res;
	int *rc;
	uint32_t *done;
};

static void fix_open(fix *f)
{
	engine_on();
	gu_open(&f->g, 1, 256, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1);
	gu_buf_alloc(&f->src, f->g.pd, (size_t)N * CH, 11, 0);
	gu_buf_alloc(&f->dst, f->g.pd, (size_t)N * CH, 12, 0);
	gu_buf_alloc(&f->back, f->g.pd, (size_t)N * CH, 13, 0);
	gu_buf_alloc(&f->ctr, f->g.pd, 8, 14, 0);
	gu_buf_alloc(&f->res, f->g.pd, 8, 15, 0);
	CU(cudaMemset(f->ctr.dev, 0, 8));
	CU(cudaMallocManaged(&f->rc, sizeof(int)));
	CU(cudaMallocManaged(&f->done, sizeof(uint32_t)));
	*f->rc = 1;
	*f->done = 0;
}

static void fix_close(fix *f)
{
	gu_buf_free(&f->src);
	gu_buf_free(&f->dst);
	gu_buf_free(&f->back);
	gu_buf_free(&f->ctr);
	gu_buf_free(&f->res);
	cudaFree(f->rc);
	cudaFree(f->done);
	gu_close(&f->g);
}

static void run_put_get(fix *f)
{
	put_get_kernel<<<1, 1>>>(f->g.d[0], f->src.dev, kinet_mr_lkey(f->src.mr),
				 (uint64_t)(uintptr_t)f->dst.dev, gu_key(&f->dst), f->back.dev,
				 kinet_mr_lkey(f->back.mr), (uint64_t)(uintptr_t)f->ctr.dev,
				 gu_key(&f->ctr), (uint64_t *)f->res.dev, kinet_mr_lkey(f->res.mr),
				 f->rc);
	CU(cudaStreamSynchronize(0));
	if (*f->rc)
		gu_diag(&f->g, 0);
	cr_assert_eq(*f->rc, 0, "kernel rc %d", *f->rc);
	uint8_t *d = (uint8_t *)malloc(f->dst.len), *b = (uint8_t *)malloc(f->back.len);
	gu_buf_read(&f->dst, d);
	gu_buf_read(&f->back, b);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t len = 1 + (i * 977u) % CH;
		size_t o = (size_t)i * CH;
		cr_assert_eq(gu_diff(d + o, f->src.mirror + o, len), -1, "put %u differs", i);
		cr_assert_eq(gu_diff(d + o + len, f->dst.mirror + o + len, CH - len), -1,
			     "put %u wrote past its end", i);
		cr_assert_eq(gu_diff(b + o, f->src.mirror + o, len), -1, "get %u differs", i);
		cr_assert_eq(gu_diff(b + o + len, f->back.mirror + o + len, CH - len), -1,
			     "get %u wrote past its end", i);
	}
	uint64_t c = 0;
	CU(cudaMemcpy(&c, f->ctr.dev, 8, cudaMemcpyDeviceToHost));
	cr_assert_eq(c, 7u, "compare-and-swap did not land: %llu", (unsigned long long)c);
	free(d);
	free(b);
}

Test(gpu_engine, put_get_atomics_on_gpu_engine)
{
	fix f;
	fix_open(&f);
	run_put_get(&f);
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(f.g.a[0], &e), 0);
	/* the kernel is idle now: after its idle time it exits, gives the QP
	 * back with its counts, and a device-wide synchronisation returns */
	CU(cudaDeviceSynchronize());
	cr_assert_eq(kinet_qp_ep_info(f.g.a[0], &e), 0);
	fprintf(stderr, "engine %d, gpu wqes %llu: %s\n", e.engine,
		(unsigned long long)e.gpu_wqes, e.engine_why);
	cr_assert_gt(e.gpu_wqes, 0u, "the GPU engine executed nothing: %s", e.engine_why);
	cr_assert_eq(e.engine, KINET_ENGINE_CPU, "idle: back on the CPU engine");
	/* busy again: taken again, same results */
	CU(cudaMemset(f.ctr.dev, 0, 8));
	uint64_t before = e.gpu_wqes;
	run_put_get(&f);
	CU(cudaDeviceSynchronize());
	cr_assert_eq(kinet_qp_ep_info(f.g.a[0], &e), 0);
	cr_assert_gt(e.gpu_wqes, before, "not taken again");
	fix_close(&f);
}

__global__ void bad_key_kernel(const kn_qp *qp, uint8_t *src, uint32_t lkey, uint64_t dst,
			       uint32_t rkey, int *rc, uint32_t *synd)
{
	kn_ticket_t t;
	int r = 0;
	for (uint32_t i = 0; i < 64 && !r; i++) /* busy: on the GPU engine */
		r = kn_put(qp, dst, rkey, src, lkey, 64, &t);
	if (!r)
		r = kn_quiet(qp);
	if (!r) {
		r = kn_put(qp, dst, rkey ^ 0x55u, src, lkey, 64, &t); /* unknown key */
		if (!r)
			r = kn_wait(qp, t);
	}
	uint32_t vendor = 0;
	*synd = kn_qp_error(qp, &vendor) | (vendor << 8);
	*rc = r;
}

Test(gpu_engine, bad_key_error_cqe)
{
	fix f;
	fix_open(&f);
	uint32_t *synd;
	CU(cudaMallocManaged(&synd, 4));
	*synd = 0;
	bad_key_kernel<<<1, 1>>>(f.g.d[0], f.src.dev, kinet_mr_lkey(f.src.mr),
				 (uint64_t)(uintptr_t)f.dst.dev, gu_key(&f.dst), f.rc, synd);
	CU(cudaStreamSynchronize(0));
	cr_assert_eq(*f.rc, -EIO, "rc %d", *f.rc);
	cr_assert_eq(*synd & 0xff, KN_SYND_REMOTE_ACCESS_ERR, "syndrome 0x%x", *synd & 0xff);
	cr_assert_eq(*synd >> 8, KINET_REASON_UNKNOWN_KEY, "reason %u", *synd >> 8);
	cr_assert_eq(kinet_qp_get_state(f.g.a[0]), KINET_QPS_ERR);
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(f.g.a[0], &e), 0);
	cr_assert_gt(e.gpu_wqes, 0u, "the good puts ran on the GPU engine: %s", e.engine_why);
	cr_assert_eq(e.engine, KINET_ENGINE_CPU);
	cudaFree(synd);
	fix_close(&f);
}

Test(gpu_engine, revoke_under_traffic)
{
	fix f;
	fix_open(&f);
	cudaStream_t s;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	put_loop_kernel<<<1, 1, 0, s>>>(f.g.d[0], f.src.dev, kinet_mr_lkey(f.src.mr),
					(uint64_t)(uintptr_t)f.dst.dev, gu_key(&f.dst), 1u << 30,
					f.rc, f.done);
	/* let it run on the GPU engine, then revoke the target */
	struct kinet_ep_info e;
	for (int i = 0; i < 2000; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
		kinet_qp_ep_info(f.g.a[0], &e);
		if (e.engine == KINET_ENGINE_GPU)
			break;
	}
	cr_assert_eq(e.engine, KINET_ENGINE_GPU, "never taken: %s", e.engine_why);
	cr_assert_eq(kinet_mr_revoke(f.dst.mr), 0);
	CU(cudaStreamSynchronize(s)); /* must end: the kernel's next put fails */
	cr_assert_eq(*f.rc, -EIO, "rc %d after %u puts", *f.rc, *f.done);
	kn_qp_state st;
	cr_assert_eq(kinet_qp_cuda_state_read(f.g.a[0], &st), 0);
	cr_assert_eq(kinet_qp_get_state(f.g.a[0]), KINET_QPS_ERR);
	cudaStreamDestroy(s);
	fix_close(&f);
}

Test(gpu_engine, off_by_default_and_reported)
{
	/* without KINET_GPU_ENGINE the CPU engine serves, and says why */
	gu_ctx g;
	gu_open(&g, 1, 64, KN_DB_GPU, KN_SHARE_EXCLUSIVE, 1);
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(g.a[0], &e), 0);
	cr_assert_eq(e.engine, KINET_ENGINE_CPU);
	cr_assert(strstr(e.engine_why, "KINET_GPU_ENGINE") != NULL, "%s", e.engine_why);
	gu_close(&g);
}

/* The WQE trace with the kernel (KINET_TRACE): the QP is not refused, and
 * the kernel's records reach the trace as the CPU engine's would: one WQE
 * record per WQE it executed (exactly gpu_wqes of them, engine
 * KINET_TR_ENGINE_GPU), the right opcode, length and keys, each CQE after
 * its WQE, times within the run and in the QP's order across both engines
 * (the kernel's %globaltimer converted to the trace's clock). */
Test(gpu_engine, trace_records_from_the_kernel)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char path[80];
	snprintf(path, sizeof(path), "/tmp/kinet-gpu-trace-%lld.ktr",
		 (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
	setenv("KINET_TRACE", path, 1);
	fix f;
	fix_open(&f);
	struct kinet_ep_info e;
	cr_assert_eq(kinet_qp_ep_info(f.g.a[0], &e), 0);
	cr_assert(strstr(e.engine_why, "eligible") != NULL, "refused: %s", e.engine_why);
	uint32_t qpn = kinet_qp_num(f.g.a[0]);
	uint32_t keys[4] = {kinet_mr_lkey(f.src.mr), kinet_mr_lkey(f.back.mr),
			    kinet_mr_lkey(f.res.mr), 0};
	uint32_t rkeys[2] = {gu_key(&f.dst), gu_key(&f.ctr)};
	run_put_get(&f);
	CU(cudaDeviceSynchronize()); /* idle: the kernel exits and gives the QP back */
	cr_assert_eq(kinet_qp_ep_info(f.g.a[0], &e), 0);
	uint64_t gpu_wqes = e.gpu_wqes;
	cr_assert_gt(gpu_wqes, 0u, "the GPU engine executed nothing: %s", e.engine_why);
	fix_close(&f); /* the QPs' destroy reads the rings; the close writes the trace */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t t_close = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	FILE *fp = fopen(path, "rb");
	cr_assert_not_null(fp, "no trace file %s", path);
	struct kinet_trace_hdr h;
	cr_assert_eq(fread(&h, sizeof(h), 1, fp), 1);
	cr_assert_eq(memcmp(h.magic, KINET_TRACE_MAGIC, 8), 0);
	const uint32_t nw = 2 * N + 17; /* puts, gets, 16 fetch-and-adds, a compare-and-swap */
	static struct kinet_trace_rec w[1 << 16], c[1 << 16];
	static uint8_t hw[1 << 16], hc[1 << 16];
	memset(hw, 0, sizeof(hw));
	memset(hc, 0, sizeof(hc));
	uint64_t gw = 0, lost = 0, n_put = 0, n_get = 0, n_at = 0, n_nop = 0;
	struct kinet_trace_rec r;
	while (fread(&r, sizeof(r), 1, fp) == 1) {
		cr_assert_eq(r.qpn, qpn, "a record of QP 0x%x", r.qpn);
		cr_assert(r.t_ns > 0 && r.t_ns <= t_close - h.start_mono_ns,
			  "t_ns %llu outside the run", (unsigned long long)r.t_ns);
		if (r.type == KINET_TR_LOST) {
			lost += r.len;
			continue;
		}
		cr_assert(r.engine == KINET_TR_ENGINE_GPU || r.engine < 64, "engine %u", r.engine);
		if (r.type == KINET_TR_WQE) {
			cr_assert_eq(hw[r.wqe_idx]++, 0, "WQE %u recorded twice", r.wqe_idx);
			w[r.wqe_idx] = r;
			gw += r.engine == KINET_TR_ENGINE_GPU;
			if (r.opcode == KN_OPCODE_RDMA_WRITE) {
				n_put++;
				cr_assert_eq(r.lkey, keys[0]);
				cr_assert_eq(r.rkey, rkeys[0]);
			} else if (r.opcode == KN_OPCODE_RDMA_READ) {
				n_get++;
				cr_assert_eq(r.lkey, keys[1]);
				cr_assert_eq(r.rkey, rkeys[0]);
			} else if (r.opcode == KN_OPCODE_NOP) {
				n_nop++; /* none expected; the device API's, if it posts any */
			} else {
				cr_assert(r.opcode == KN_OPCODE_ATOMIC_FA ||
					  r.opcode == KN_OPCODE_ATOMIC_CS, "opcode 0x%x", r.opcode);
				n_at++;
				cr_assert_eq(r.lkey, keys[2]);
				cr_assert_eq(r.rkey, rkeys[1]);
			}
		} else {
			cr_assert_eq(r.type, KINET_TR_CQE, "type %u", r.type);
			cr_assert_eq(hc[r.wqe_idx]++, 0, "CQE %u recorded twice", r.wqe_idx);
			c[r.wqe_idx] = r;
		}
	}
	fclose(fp);
	remove(path);
	cr_assert_eq(lost, 0u, "%llu records lost", (unsigned long long)lost);
	cr_assert_eq(n_put, N);
	cr_assert_eq(n_get, N);
	cr_assert_eq(n_at, 17u);
	cr_assert_eq(gw, gpu_wqes, "%llu WQE records of the GPU engine, it executed %llu",
		     (unsigned long long)gw, (unsigned long long)gpu_wqes);
	uint64_t tw = 0;
	uint32_t seen = 0;
	for (uint32_t i = 0; i < (1u << 16); i++) {
		if (hc[i])
			cr_assert(hw[i], "CQE %u without its WQE", i);
		if (!hw[i])
			continue;
		seen++;
		cr_assert_geq(w[i].t_ns, tw, "WQE %u taken before the one before it", i);
		tw = w[i].t_ns;
		if (hc[i]) {
			cr_assert_geq(c[i].t_ns, w[i].t_ns, "CQE %u before its WQE", i);
			cr_assert_eq(c[i].len, w[i].len, "CQE %u: byte count", i);
		}
	}
	cr_assert_eq(seen, nw + n_nop);
}
