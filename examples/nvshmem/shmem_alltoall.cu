/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shmem_alltoall - the dispatch/combine all-to-all of a mixture-of-experts
 * layer, written against NVSHMEM's API only (kinet/nvshmem/nvshmem.h):
 * every PE routes a variable number of tokens to the experts of every PE,
 *  1. the counts first: each PE puts its row of the count matrix into every
 *     PE (put_signal, SET to the round), so that everyone can place the
 *     blocks it receives back to back;
 *  2. dispatch: CTA d sends this PE's tokens for PE d in one block-scope
 *     put_signal into its place at PE d (signal SET, per source);
 *  3. the "expert" at PE d transforms what it got from each source (a byte
 *     pattern of its own) and combines: sends it back to its origin, again
 *     one put_signal per source;
 *  4. the host checks every block byte for byte: what arrived from each
 *     source, and what came back from each expert.
 * Three rounds with other counts (zeros included).
 *
 * Built twice: with nvcc (a CUDA kernel; run one process per GPU, or several
 * sharing one GPU under MPS) and with a C compiler for kinet's host
 * executor (the same kernel on CPU threads). Run as any kinet job:
 *   export KINET_BOOT_ADDR=127.0.0.1:7000 KINET_BOOT_SIZE=4 KINET_BOOT_SECRET=s
 *   for r in 0 1 2 3; do KINET_BOOT_RANK=$r ./shmem_alltoall & done; wait
 * or under mpirun: mpirun -np 4 ./shmem_alltoall
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#define TOKEN 96 /* bytes per token */
#define MAXTOK 40 /* most tokens one PE sends one PE */
#define ROUNDS 3
#ifdef __CUDACC__
#define THREADS 128
#else
#define THREADS 8 /* CPU threads per CTA on the host executor */
#endif

struct a2a {
	int me, n;
	uint64_t round;
	int *counts;        /* symmetric [n*n]: row s = tokens PE s sends to each PE */
	uint8_t *send;      /* symmetric: this PE's tokens, grouped by destination */
	uint8_t *recv;      /* symmetric: tokens received, grouped by source */
	uint8_t *out;       /* symmetric: the expert's results, grouped by source */
	uint8_t *back;      /* symmetric: results back from the experts */
	uint64_t *sig_cnt;  /* symmetric [n]: a count row arrived, by source */
	uint64_t *sig_in;   /* symmetric [n]: dispatch arrived, by source */
	uint64_t *sig_back; /* symmetric [n]: combine arrived, by expert */
};

/* Tokens PE s routes to PE d in round r (0 .. MAXTOK). */
static int route(int s, int d, uint64_t r)
{
	uint32_t h = (uint32_t)(s * 7919 + d * 104729 + (int)r * 1299709) * 2654435761u;
	return (int)((h >> 7) % (MAXTOK + 1)) * (int)((h >> 3) % 5 != 0); /* some zero */
}

/* The bytes of token t that PE s sends to PE d in round r. */
static uint8_t token_byte(int s, int d, uint64_t r, int t, int i)
{
	uint32_t h = ((uint32_t)s * 73856093u) ^ ((uint32_t)d * 19349663u) ^
		     ((uint32_t)r * 83492791u) ^ ((uint32_t)t * 2654435761u) ^ ((uint32_t)i * 40503u);
	h ^= h >> 13;
	h *= 0x5bd1e995u;
	return (uint8_t)(h ^ (h >> 15));
}

/* Expert d's transform. */
static __host__ __device__ uint8_t expert(int d, uint8_t b)
{
	return (uint8_t)(b ^ (uint8_t)(0x5a + 17 * d));
}

/* Bytes before block k of a row of counts (k blocks of counts[...] tokens). */
static __device__ size_t before(const int *row, int stride, int k)
{
	size_t s = 0;
	for (int i = 0; i < k; i++)
		s += (size_t)row[i * stride] * TOKEN;
	return s;
}

/* CTA d of every PE: the counts to PE d, the dispatch to PE d, the expert's
 * work on what PE d sent here, the combine back to PE d. */
__global__ void alltoall(struct a2a *a)
{
	int d = (int)blockIdx.x, me = a->me, n = a->n;
	uint64_t r = a->round;
	int *row = a->counts + me * n;
	/* 1. this PE's count row, to PE d */
	nvshmemx_putmem_signal_nbi_block(row, row, (size_t)n * sizeof(int), &a->sig_cnt[me], r,
					 NVSHMEM_SIGNAL_SET, d);
	if (threadIdx.x == 0)
		nvshmem_uint64_wait_until_all(a->sig_cnt, (size_t)n, NULL, NVSHMEM_CMP_EQ, r);
	__syncthreads();
	/* 2. dispatch: my block for d lands after the blocks of PEs 0 .. me-1 there */
	size_t len = (size_t)row[d] * TOKEN;
	size_t src_off = before(row, 1, d);
	size_t dst_off = before(a->counts + d, n, me);
	nvshmemx_putmem_signal_nbi_block(a->recv + dst_off, a->send + src_off, len, &a->sig_in[me],
					 r, NVSHMEM_SIGNAL_SET, d);
	/* 3. the expert here works on what PE d sent */
	if (threadIdx.x == 0)
		nvshmem_uint64_wait_until(&a->sig_in[d], NVSHMEM_CMP_EQ, r);
	__syncthreads();
	size_t in_off = before(a->counts + me, n, d);
	size_t in_len = (size_t)a->counts[d * n + me] * TOKEN;
	for (size_t i = threadIdx.x; i < in_len; i += blockDim.x)
		a->out[in_off + i] = expert(me, a->recv[in_off + i]);
	__syncthreads();
	/* combine: back to PE d, where its block for me started in its send */
	size_t back_off = before(a->counts + d * n, 1, me);
	nvshmemx_putmem_signal_nbi_block(a->back + back_off, a->out + in_off, in_len,
					 &a->sig_back[me], r, NVSHMEM_SIGNAL_SET, d);
	if (threadIdx.x == 0)
		nvshmem_uint64_wait_until(&a->sig_back[d], NVSHMEM_CMP_EQ, r);
	__syncthreads();
	nvshmemx_quiet_block();
}

int main(void)
{
	nvshmem_init();
	int me = nvshmem_my_pe(), n = nvshmem_n_pes();
	size_t cap = (size_t)n * MAXTOK * TOKEN;
	struct a2a h;
	memset(&h, 0, sizeof(h));
	h.me = me;
	h.n = n;
	h.counts = (int *)nvshmem_calloc((size_t)n * n, sizeof(int));
	h.send = (uint8_t *)nvshmem_malloc(cap);
	h.recv = (uint8_t *)nvshmem_malloc(cap);
	h.out = (uint8_t *)nvshmem_malloc(cap);
	h.back = (uint8_t *)nvshmem_malloc(cap);
	h.sig_cnt = (uint64_t *)nvshmem_calloc((size_t)n, 8);
	h.sig_in = (uint64_t *)nvshmem_calloc((size_t)n, 8);
	h.sig_back = (uint64_t *)nvshmem_calloc((size_t)n, 8);
	if (!h.counts || !h.send || !h.recv || !h.out || !h.back || !h.sig_cnt || !h.sig_in ||
	    !h.sig_back) {
		fprintf(stderr, "shmem_alltoall: PE %d: nvshmem_malloc failed\n", me);
		return 1;
	}
	struct a2a *dev;
	cudaMalloc((void **)&dev, sizeof(*dev));
	uint8_t *buf = (uint8_t *)malloc(cap), *got = (uint8_t *)malloc(cap);
	int *row = (int *)malloc((size_t)n * sizeof(int));
	int bad = 0;
	size_t moved = 0;
	for (uint64_t r = 1; r <= ROUNDS && !bad; r++) {
		/* this PE's tokens for every destination, back to back */
		size_t off = 0;
		for (int d = 0; d < n; d++) {
			row[d] = route(me, d, r);
			for (int t = 0; t < row[d]; t++)
				for (int i = 0; i < TOKEN; i++)
					buf[off + (size_t)t * TOKEN + i] = token_byte(me, d, r, t, i);
			off += (size_t)row[d] * TOKEN;
		}
		cudaMemcpy(h.send, buf, off, cudaMemcpyHostToDevice);
		cudaMemcpy(h.counts + me * n, row, (size_t)n * sizeof(int), cudaMemcpyHostToDevice);
		h.round = r;
		cudaMemcpy(dev, &h, sizeof(h), cudaMemcpyHostToDevice);
		nvshmem_barrier_all(); /* every send buffer ready */
		void *args[] = {&dev};
		dim3 grid = {(unsigned)n, 1, 1}, block = {THREADS, 1, 1};
		if (nvshmemx_collective_launch((const void *)alltoall, grid, block, args, 0, 0)) {
			fprintf(stderr, "shmem_alltoall: PE %d: launch failed\n", me);
			return 1;
		}
		cudaDeviceSynchronize();
		nvshmem_barrier_all();
		/* what arrived from each source, in source order */
		cudaMemcpy(got, h.recv, cap, cudaMemcpyDeviceToHost);
		size_t in = 0;
		for (int s = 0; s < n && !bad; s++) {
			int cnt = route(s, me, r);
			for (int t = 0; t < cnt && !bad; t++)
				for (int i = 0; i < TOKEN; i++)
					if (got[in + (size_t)t * TOKEN + i] != token_byte(s, me, r, t, i)) {
						fprintf(stderr, "PE %d round %llu: token %d from PE %d "
							"differs at byte %d\n", me, (unsigned long long)r,
							t, s, i);
						bad = 1;
						break;
					}
			in += (size_t)cnt * TOKEN;
		}
		/* what came back from each expert */
		cudaMemcpy(got, h.back, cap, cudaMemcpyDeviceToHost);
		for (size_t i = 0, d = 0; d < (size_t)n && !bad; d++)
			for (size_t k = 0; k < (size_t)row[d] * TOKEN; k++, i++)
				if (got[i] != expert((int)d, buf[i])) {
					fprintf(stderr, "PE %d round %llu: result from expert %zu differs "
						"at byte %zu\n", me, (unsigned long long)r, d, k);
					bad = 1;
					break;
				}
		moved += off;
		nvshmem_barrier_all(); /* checked before the next round overwrites */
	}
	if (!bad)
		printf("PE %d of %d: %d rounds of all-to-all, %zu bytes dispatched and combined, "
		       "every byte checked\n", me, n, ROUNDS, moved);
	cudaFree(dev);
	free(buf);
	free(got);
	free(row);
	nvshmem_free(h.sig_back);
	nvshmem_free(h.sig_in);
	nvshmem_free(h.sig_cnt);
	nvshmem_free(h.back);
	nvshmem_free(h.out);
	nvshmem_free(h.recv);
	nvshmem_free(h.send);
	nvshmem_free(h.counts);
	nvshmem_finalize();
	return bad;
}
