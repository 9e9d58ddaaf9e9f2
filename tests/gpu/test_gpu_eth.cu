/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ethernet and copy queues from CUDA kernels (label gpu): on the software
 * NIC's loopback port, frames sent at thread, warp and block scope (frames
 * in GPU memory and in mapped host memory) are received by a warp-scope and
 * a block-scope receive kernel, into mapped host buffers and into GPU
 * memory, and checked byte for byte; send at a time from a kernel; copies
 * host to GPU, GPU to host, GPU to GPU and host to host at thread, warp and
 * block scope, and a batch, byte for byte; a semaphore ring between a
 * receive kernel and the CPU.
 */
#include "gpu_util.h"
#include <kinet/eth.h>
#include <kinet/dma.h>
#include <kinet/sem.h>
#include <kinet/device_eth.cuh>
#include <kinet/device_dma.cuh>
#include <kinet/device_sem.h>
extern "C" {
#include "../util/ethutil.h"
}

#define SLOT 2048u
#define NFR 256u

struct eth_env {
	kinet_ctx *ctx;
	kinet_pd *pd;
	kinet_eth_port *port;
	kinet_eth_txq *txq;
	kn_eth_txq *dtq;
	struct gu_buf fr; /* the frames, SLOT apart */
	uint32_t len[NFR];
};

static void eth_open(struct eth_env *e, int frames_on_host, int share)
{
	memset(e, 0, sizeof(*e));
	cr_assert_eq(kinet_cuda_available(), 1, "no usable GPU");
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	cr_assert_eq(kinet_open(&ca, &e->ctx), 0);
	cr_assert_eq(kinet_pd_alloc(e->ctx, &e->pd), 0);
	struct kinet_eth_port_attr pa;
	memset(&pa, 0, sizeof(pa));
	pa.driver = KINET_ETH_DRIVER_LOOPBACK;
	cr_assert_eq(kinet_eth_port_open(e->pd, &pa, &e->port), 0);
	struct kinet_eth_txq_attr ta;
	memset(&ta, 0, sizeof(ta));
	ta.depth = 256;
	ta.share = share;
	ta.timeout_ms = 5000;
	cr_assert_eq(kinet_eth_txq_create(e->port, &ta, &e->txq), 0);
	cr_assert_eq(kinet_eth_txq_device_cuda(e->txq, &e->dtq), 0);
	/* frames built on the host, copied where the kernels send them from */
	gu_buf_alloc(&e->fr, e->pd, (size_t)NFR * SLOT, 1, frames_on_host);
	struct te_flow f;
	te_flow_v4(&f, 1, 2, 1234, 4000);
	uint64_t seed = 5;
	for (uint32_t i = 0; i < NFR; i++)
		e->len[i] = te_frame(e->fr.mirror + (size_t)i * SLOT, &f,
				     20 + (uint32_t)(tu_rand64(&seed) % 1400), i + 1, 0, 0);
	CU(cudaMemcpy(e->fr.dev, e->fr.mirror, e->fr.len, cudaMemcpyDefault));
}

static void eth_close(struct eth_env *e)
{
	gu_buf_free(&e->fr);
	cr_assert_eq(kinet_eth_txq_device_cuda_release(e->txq), 0);
	cr_assert_eq(kinet_eth_txq_destroy(e->txq), 0);
	cr_assert_eq(kinet_eth_port_close(e->port), 0);
	cr_assert_eq(kinet_pd_free(e->pd), 0);
	cr_assert_eq(kinet_close(e->ctx), 0);
}

struct send_args {
	const kn_eth_txq *tq;
	const uint8_t *fr;
	uint32_t lkey;
	const uint32_t *len;
	int scope;
	int *rc;
};

__global__ void send_kernel(send_args a, uint32_t n)
{
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	if (g >= n)
		return;
	int rc;
	kn_ticket_t t;
	const uint8_t *f = a.fr + (size_t)g * SLOT;
	if (a.scope == GU_THREAD) {
		rc = kn_eth_send(a.tq, f, a.lkey, a.len[g], 0, &t);
		int q = kn_eth_txq_quiet(a.tq);
		rc = rc ? rc : q;
	} else if (a.scope == GU_WARP) {
		rc = kn_warp_eth_send(a.tq, f, a.lkey, a.len[g], 0, &t);
		int q = kn_warp_quiet(&a.tq->q);
		rc = rc ? rc : q;
	} else {
		rc = kn_block_eth_send(a.tq, f, a.lkey, a.len[g], 0, &t);
		int q = kn_block_quiet(&a.tq->q);
		rc = rc ? rc : q;
	}
	a.rc[g] = rc;
}

/* One warp (or block) receives n packets and copies each into out. */
__global__ void recv_kernel(const kn_eth_rxq *rq, uint8_t *out, uint32_t *lens, uint32_t n,
			    int block, int *rc)
{
	__shared__ kn_eth_pkt pk[32];
	uint32_t got = 0, idle = 0;
	int r = 0;
	/* the loop's condition is the same in every lane (got, k are broadcast) */
	while (got < n && idle < 10000) {
		uint32_t k = 0;
		uint32_t want = n - got < 32 ? n - got : 32;
		r = block ? kn_block_eth_recv(rq, pk, want, 1000000, &k)
			  : kn_warp_eth_recv(rq, pk, want, 1000000, &k);
		if (r)
			break;
		uint32_t tid = block ? threadIdx.x : (threadIdx.x & 31u);
		uint32_t nthr = block ? blockDim.x : 32u;
		for (uint32_t i = 0; i < k; i++) {
			for (uint32_t b = tid; b < pk[i].len; b += nthr)
				out[(size_t)(got + i) * SLOT + b] = pk[i].data[b];
			if (tid == 0)
				lens[got + i] = pk[i].len;
		}
		if (k)
			r = block ? kn_block_eth_release(rq, pk[k - 1].ticket + 1)
				  : kn_warp_eth_release(rq, pk[k - 1].ticket + 1);
		idle = k ? 0 : idle + 1; /* rounds of 1 ms without a packet */
		got += k;
	}
	if (threadIdx.x == 0)
		*rc = r ? r : (got == n ? 0 : -ETIMEDOUT);
}

static void send_recv_case(int scope, int frames_on_host, int rx_gpu, int block_rx)
{
	struct eth_env e;
	eth_open(&e, frames_on_host, scope == GU_THREAD ? KN_SHARE_GPU : KN_SHARE_EXCLUSIVE);
	uint32_t n = scope == GU_THREAD ? 64 : scope == GU_WARP ? 32 : 128;
	/* the receive queue: buffers in GPU memory or mapped host memory */
	void *rbuf = NULL;
	kinet_mr *rmr = NULL;
	struct kinet_eth_rxq_attr ra;
	memset(&ra, 0, sizeof(ra));
	ra.depth = 256;
	if (rx_gpu) {
		CU(cudaMalloc(&rbuf, 256 * 2048));
		cr_assert_eq(kinet_mr_reg(e.pd, rbuf, 256 * 2048, KINET_ACCESS_LOCAL_WRITE, &rmr),
			     0);
		ra.buf = rbuf;
		ra.mr = rmr;
	}
	kinet_eth_rxq *r;
	cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r), 0);
	struct kinet_eth_match def;
	memset(&def, 0, sizeof(def));
	kinet_eth_flow *fl;
	cr_assert_eq(kinet_eth_flow_create(r, &def, &fl), 0);
	kn_eth_rxq *drq;
	cr_assert_eq(kinet_eth_rxq_device_cuda(r, &drq), 0);
	uint32_t *dlen, *rlens;
	int *drc, *rrc;
	uint8_t *out;
	CU(cudaMalloc((void **)&dlen, NFR * 4));
	CU(cudaMemcpy(dlen, e.len, NFR * 4, cudaMemcpyHostToDevice));
	CU(cudaMalloc((void **)&drc, NFR * sizeof(int)));
	CU(cudaMalloc((void **)&rrc, sizeof(int)));
	CU(cudaMalloc((void **)&rlens, NFR * 4));
	CU(cudaMalloc((void **)&out, (size_t)NFR * SLOT));
	send_args a = {e.dtq, e.fr.dev, kinet_mr_lkey(e.fr.mr), dlen, scope, drc};
	/* whole warps: thread scope 2 blocks of 32 on a GPU-shared queue, one warp,
	 * one block of 128 on an exclusive one */
	uint32_t blocks = scope == GU_THREAD ? 2 : 1;
	send_kernel<<<blocks, n / blocks>>>(a, n);
	CU_SYNC();
	int hrc[NFR];
	CU(cudaMemcpy(hrc, drc, n * sizeof(int), cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++)
		cr_assert_eq(hrc[i], 0, "send scope %s: frame %u: %d", gu_scope_name[scope], i,
			     hrc[i]);
	recv_kernel<<<1, block_rx ? 128 : 32>>>(drq, out, rlens, n, block_rx, rrc);
	CU_SYNC();
	int rr;
	CU(cudaMemcpy(&rr, rrc, sizeof(int), cudaMemcpyDeviceToHost));
	cr_assert_eq(rr, 0, "receive: %d", rr);
	uint8_t *hout = (uint8_t *)malloc((size_t)NFR * SLOT);
	uint32_t hl[NFR];
	CU(cudaMemcpy(hout, out, (size_t)n * SLOT, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(hl, rlens, n * 4, cudaMemcpyDeviceToHost));
	/* a shared queue may interleave the senders: match each by its bytes */
	for (uint32_t i = 0; i < n; i++) {
		bool found = false;
		for (uint32_t j = 0; j < n && !found; j++)
			found = hl[i] == e.len[j] && !memcmp(hout + (size_t)i * SLOT,
							     e.fr.mirror + (size_t)j * SLOT, hl[i]);
		cr_assert(found, "received frame %u (%u bytes) was not sent", i, hl[i]);
		if (scope != GU_THREAD)
			cr_assert_eq(hl[i], e.len[i], "frame %u out of order", i);
	}
	free(hout);
	cudaFree(dlen);
	cudaFree(drc);
	cudaFree(rrc);
	cudaFree(rlens);
	cudaFree(out);
	cr_assert_eq(kinet_eth_rxq_device_cuda_release(r), 0);
	cr_assert_eq(kinet_eth_flow_destroy(fl), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r), 0);
	if (rmr)
		kinet_mr_dereg(rmr);
	if (rbuf)
		cudaFree(rbuf);
	eth_close(&e);
}

Test(gpu_eth, thread_scope_send_frames_on_host_warp_receive)
{
	send_recv_case(GU_THREAD, 1, 0, 0);
}

Test(gpu_eth, warp_scope_send_frames_in_gpu_memory_block_receive_into_gpu)
{
	send_recv_case(GU_WARP, 0, 1, 1);
}

Test(gpu_eth, block_scope_send_warp_receive_into_gpu)
{
	send_recv_case(GU_BLOCK, 0, 1, 0);
}

__global__ void send_at_kernel(const kn_eth_txq *tq, const uint8_t *f, uint32_t lkey,
			       uint32_t len, uint64_t when, int *rc)
{
	kn_ticket_t t;
	int r = kn_eth_send_at(tq, when, f, lkey, len, 0, &t);
	*rc = r ? r : kn_eth_txq_wait(tq, t);
}

Test(gpu_eth, send_at_time_from_a_kernel)
{
	struct eth_env e;
	eth_open(&e, 1, KN_SHARE_EXCLUSIVE);
	struct kinet_eth_rxq_attr ra;
	memset(&ra, 0, sizeof(ra));
	ra.depth = 16;
	kinet_eth_rxq *r;
	cr_assert_eq(kinet_eth_rxq_create(e.port, &ra, &r), 0);
	struct kinet_eth_match def;
	memset(&def, 0, sizeof(def));
	kinet_eth_flow *fl;
	cr_assert_eq(kinet_eth_flow_create(r, &def, &fl), 0);
	kn_eth_rxq *hq;
	cr_assert_eq(kinet_eth_rxq_device(r, &hq), 0);
	uint64_t now;
	cr_assert_eq(kinet_eth_port_time(e.port, &now), 0);
	int *drc;
	CU(cudaMalloc((void **)&drc, sizeof(int)));
	send_at_kernel<<<1, 1>>>(e.dtq, e.fr.dev, kinet_mr_lkey(e.fr.mr), e.len[0], now + 20000000,
				 drc);
	CU_SYNC();
	int rc;
	CU(cudaMemcpy(&rc, drc, sizeof(int), cudaMemcpyDeviceToHost));
	cr_assert_eq(rc, 0);
	kn_eth_pkt p;
	uint32_t k = 0;
	cr_assert_eq(kn_eth_recv(hq, &p, 1, 1000000000ull, &k), 0); /* read on the host */
	cr_assert_eq(k, 1);
	cr_assert_eq(memcmp(p.data, e.fr.mirror, e.len[0]), 0);
	cr_assert(p.ts_ns >= now + 20000000);
	cudaFree(drc);
	cr_assert_eq(kinet_eth_flow_destroy(fl), 0);
	cr_assert_eq(kinet_eth_rxq_destroy(r), 0);
	eth_close(&e);
}

/* ---- copy queues -------------------------------------------------------------- */

__global__ void dma_kernel(const kn_dma *d, uint8_t *dst, uint32_t dkey, const uint8_t *src,
			   uint32_t skey, uint32_t chunk, int scope, int *rc)
{
	uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
	kn_ticket_t t;
	uint32_t len = 1 + (g * 977u) % chunk;
	int r;
	if (scope == GU_THREAD) {
		r = kn_dma_memcpy(d, dst + (size_t)g * chunk, dkey, src + (size_t)g * chunk, skey,
				  len, &t);
		int w = r ? 0 : kn_dma_wait(d, t);
		r = r ? r : w;
	} else if (scope == GU_WARP) {
		r = kn_warp_dma_memcpy(d, dst + (size_t)g * chunk, dkey, src + (size_t)g * chunk,
				       skey, len, &t);
		int w = kn_warp_dma_wait(d, t);
		r = r ? r : w;
	} else {
		r = kn_block_dma_memcpy(d, dst + (size_t)g * chunk, dkey, src + (size_t)g * chunk,
					skey, len, &t);
		int q = kn_block_dma_quiet(d);
		r = r ? r : q;
	}
	rc[g] = r;
}

__global__ void dma_batch_kernel(const kn_dma *d, const kn_dma_copy *c, uint32_t n, int *rc)
{
	kn_ticket_t last;
	int r = kn_dma_memcpy_batch(d, c, n, &last);
	*rc = r ? r : kn_dma_wait(d, last);
}

static void dma_case(int src_host, int dst_host, int scope)
{
	cr_assert_eq(kinet_cuda_available(), 1, "no usable GPU");
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	kinet_pd *pd;
	cr_assert_eq(kinet_pd_alloc(ctx, &pd), 0);
	struct kinet_dma_attr da;
	memset(&da, 0, sizeof(da));
	da.depth = 64;
	/* thread scope: 2 blocks share the queue; warp scope: the 2 warps of a
	 * block; block scope: the block owns it */
	da.share = scope == GU_THREAD ? KN_SHARE_GPU : scope == GU_WARP ? KN_SHARE_CTA
									 : KN_SHARE_EXCLUSIVE;
	da.timeout_ms = 5000;
	kinet_dma *dma;
	kn_dma *dd;
	cr_assert_eq(kinet_dma_create(pd, &da, &dma), 0);
	cr_assert_eq(kinet_dma_device_cuda(dma, &dd), 0);
	const uint32_t n = 64, chunk = 8192;
	struct gu_buf s, d;
	gu_buf_alloc(&s, pd, (size_t)n * chunk, 31, src_host);
	gu_buf_alloc(&d, pd, (size_t)n * chunk, 32, dst_host);
	int *drc;
	CU(cudaMalloc((void **)&drc, n * sizeof(int)));
	uint32_t blocks = scope == GU_THREAD ? 2 : 1;
	dma_kernel<<<blocks, n / blocks>>>(
		dd, d.dev, gu_key(&d), s.dev, kinet_mr_lkey(s.mr), chunk, scope, drc);
	CU_SYNC();
	int hrc[64];
	CU(cudaMemcpy(hrc, drc, sizeof(hrc), cudaMemcpyDeviceToHost));
	uint8_t *back = (uint8_t *)malloc(d.len);
	gu_buf_read(&d, back);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(hrc[i], 0, "copy %u: %d", i, hrc[i]);
		uint32_t len = 1 + (i * 977u) % chunk;
		size_t off = (size_t)i * chunk;
		cr_assert_eq(gu_diff(back + off, s.mirror + off, len), -1, "copy %u differs", i);
		cr_assert_eq(gu_diff(back + off + len, d.mirror + off + len, chunk - len), -1,
			     "copy %u wrote past its end", i);
	}
	/* a batch: every chunk back over the first half */
	kn_dma_copy hc[32];
	for (uint32_t i = 0; i < 32; i++) {
		hc[i].dst = d.dev + (size_t)i * chunk;
		hc[i].src = s.dev + (size_t)(i + 32) * chunk;
		hc[i].dst_key = gu_key(&d);
		hc[i].src_key = kinet_mr_lkey(s.mr);
		hc[i].len = chunk;
		hc[i].rsvd = 0;
	}
	kn_dma_copy *dc;
	CU(cudaMalloc((void **)&dc, sizeof(hc)));
	CU(cudaMemcpy(dc, hc, sizeof(hc), cudaMemcpyHostToDevice));
	dma_batch_kernel<<<1, 1>>>(dd, dc, 32, drc);
	CU_SYNC();
	CU(cudaMemcpy(hrc, drc, sizeof(int), cudaMemcpyDeviceToHost));
	cr_assert_eq(hrc[0], 0);
	gu_buf_read(&d, back);
	cr_assert_eq(gu_diff(back, s.mirror + 32 * chunk, 32 * chunk), -1, "the batch differs");
	free(back);
	cudaFree(dc);
	cudaFree(drc);
	gu_buf_free(&s);
	gu_buf_free(&d);
	cr_assert_eq(kinet_dma_device_cuda_release(dma), 0);
	cr_assert_eq(kinet_dma_destroy(dma), 0);
	cr_assert_eq(kinet_pd_free(pd), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}

Test(gpu_dma, host_to_gpu_thread_scope)
{
	dma_case(1, 0, GU_THREAD);
}
Test(gpu_dma, gpu_to_host_warp_scope)
{
	dma_case(0, 1, GU_WARP);
}
Test(gpu_dma, gpu_to_gpu_block_scope)
{
	dma_case(0, 0, GU_BLOCK);
}
Test(gpu_dma, host_to_host_warp_scope)
{
	dma_case(1, 1, GU_WARP);
}

/* ---- a semaphore ring from a kernel to the CPU ------------------------------------ */

__global__ void sem_kernel(kn_sem s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (kn_sem_wait(&s, i, KN_SEM_FREE, 5000000000ull))
			return;
		uint64_t *p = (uint64_t *)kn_sem_item(&s, i);
		p[0] = i * 3 + 1;
		p[1] = ~(uint64_t)i;
		kn_sem_set(&s, i, KN_SEM_READY);
	}
}

Test(gpu_sem, kernel_hands_items_to_the_cpu)
{
	cr_assert_eq(kinet_cuda_available(), 1, "no usable GPU");
	kinet_ctx *ctx;
	struct kinet_ctx_attr ca;
	memset(&ca, 0, sizeof(ca));
	ca.backend = KINET_BACKEND_SOFT;
	cr_assert_eq(kinet_open(&ca, &ctx), 0);
	kinet_sem *sem;
	cr_assert_eq(kinet_sem_create(ctx, 8, 16, &sem), 0);
	kn_sem *hs, ds;
	cr_assert_eq(kinet_sem_device(sem, &hs), 0);
	cr_assert_eq(kinet_sem_device_cuda(sem, &ds), 0);
	const uint32_t n = 1000;
	sem_kernel<<<1, 1>>>(ds, n);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(kn_sem_wait(hs, i, KN_SEM_READY, 5000000000ull), 0, "item %u", i);
		uint64_t *p = (uint64_t *)kn_sem_item(hs, i);
		cr_assert_eq(p[0], i * 3 + 1);
		cr_assert_eq(p[1], ~(uint64_t)i);
		kn_sem_set(hs, i, KN_SEM_FREE);
	}
	CU_SYNC();
	cr_assert_eq(kinet_sem_destroy(sem), 0);
	cr_assert_eq(kinet_close(ctx), 0);
}
