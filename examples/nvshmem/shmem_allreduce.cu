/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shmem_allreduce - a ring all-reduce (sum) of N floats per PE, written
 * against NVSHMEM's API only (kinet/nvshmem/nvshmem.h): the vector is cut
 * into n chunks;
 *  - reduce-scatter, n-1 steps: step s sends chunk (me - s) mod n to the
 *    right neighbour (a block-scope put_signal into its receive buffer) and
 *    adds the chunk that came from the left into its own; afterwards PE me
 *    holds the whole sum of chunk (me + 1) mod n;
 *  - all-gather, n-1 steps: each PE passes the summed chunks around the
 *    ring, straight into the neighbour's vector.
 * The result is checked on the host against a reduction of every PE's
 * input (the same generator), within float rounding.
 *
 * Built with nvcc (a CUDA kernel, one CTA) and for kinet's host executor;
 * run as any kinet job (see shmem_alltoall.cu).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#define CHUNK 2048 /* floats per chunk: N = n * CHUNK */
#define ROUNDS 3
#ifdef __CUDACC__
#define THREADS 256
#else
#define THREADS 8
#endif

struct ring {
	int me, n;
	uint64_t round;
	float *data;   /* symmetric [n*CHUNK]: the input, then the sum */
	float *recv;   /* symmetric [n*CHUNK]: reduce-scatter's landing zone */
	uint64_t *sig; /* symmetric [2n]: one per step */
};

/* Element i of PE p's input in round r: random in [-1, 1). */
static float input(int p, int i, uint64_t r)
{
	uint32_t h = (uint32_t)p * 2654435761u ^ (uint32_t)i * 2246822519u ^ (uint32_t)r * 3266489917u;
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return (float)(h & 0xffffff) / 8388608.0f - 1.0f;
}

__global__ void allreduce(struct ring *a)
{
	int me = a->me, n = a->n, right = (me + 1) % n;
	uint64_t r = a->round;
	size_t bytes = CHUNK * sizeof(float);
	for (int s = 0; s < n - 1; s++) {
		int out = (me - s + n) % n, in = (me - s - 1 + 2 * n) % n;
		/* blocking: the chunk may change (the all-gather overwrites it) once
		 * this returns */
		nvshmemx_putmem_signal_block(a->recv + (size_t)out * CHUNK, a->data + (size_t)out * CHUNK,
					     bytes, &a->sig[s], r, NVSHMEM_SIGNAL_SET, right);
		if (threadIdx.x == 0)
			nvshmem_uint64_wait_until(&a->sig[s], NVSHMEM_CMP_EQ, r);
		__syncthreads();
		for (int i = threadIdx.x; i < CHUNK; i += blockDim.x)
			a->data[(size_t)in * CHUNK + i] += a->recv[(size_t)in * CHUNK + i];
		__syncthreads();
	}
	for (int s = 0; s < n - 1; s++) {
		int out = (me + 1 - s + n) % n;
		nvshmemx_putmem_signal_block(a->data + (size_t)out * CHUNK, a->data + (size_t)out * CHUNK,
					     bytes, &a->sig[n + s], r, NVSHMEM_SIGNAL_SET, right);
		if (threadIdx.x == 0)
			nvshmem_uint64_wait_until(&a->sig[n + s], NVSHMEM_CMP_EQ, r);
		__syncthreads();
	}
	nvshmemx_quiet_block();
}

int main(void)
{
	nvshmem_init();
	int me = nvshmem_my_pe(), n = nvshmem_n_pes();
	size_t len = (size_t)n * CHUNK;
	struct ring h;
	memset(&h, 0, sizeof(h));
	h.me = me;
	h.n = n;
	h.data = (float *)nvshmem_malloc(len * sizeof(float));
	h.recv = (float *)nvshmem_malloc(len * sizeof(float));
	h.sig = (uint64_t *)nvshmem_calloc(2 * (size_t)n, sizeof(uint64_t));
	if (!h.data || !h.recv || !h.sig) {
		fprintf(stderr, "shmem_allreduce: PE %d: nvshmem_malloc failed\n", me);
		return 1;
	}
	struct ring *dev;
	cudaMalloc((void **)&dev, sizeof(*dev));
	float *v = (float *)malloc(len * sizeof(float));
	int bad = 0;
	double worst = 0;
	for (uint64_t r = 1; r <= ROUNDS && !bad; r++) {
		for (size_t i = 0; i < len; i++)
			v[i] = input(me, (int)i, r);
		cudaMemcpy(h.data, v, len * sizeof(float), cudaMemcpyHostToDevice);
		h.round = r;
		cudaMemcpy(dev, &h, sizeof(h), cudaMemcpyHostToDevice);
		nvshmem_barrier_all();
		void *args[] = {&dev};
		dim3 grid = {1, 1, 1}, block = {THREADS, 1, 1};
		if (nvshmemx_collective_launch((const void *)allreduce, grid, block, args, 0, 0)) {
			fprintf(stderr, "shmem_allreduce: PE %d: launch failed\n", me);
			return 1;
		}
		cudaDeviceSynchronize();
		cudaMemcpy(v, h.data, len * sizeof(float), cudaMemcpyDeviceToHost);
		for (size_t i = 0; i < len; i++) {
			double want = 0;
			for (int p = 0; p < n; p++)
				want += input(p, (int)i, r);
			double err = fabs((double)v[i] - want);
			if (err > worst)
				worst = err;
			if (err > 1e-5 * n) {
				fprintf(stderr, "PE %d round %llu: element %zu is %.7g, the sum is %.7g\n",
					me, (unsigned long long)r, i, (double)v[i], want);
				bad = 1;
				break;
			}
		}
		nvshmem_barrier_all();
	}
	if (!bad)
		printf("PE %d of %d: %d rounds of a ring all-reduce of %zu floats, largest error "
		       "%.2g\n", me, n, ROUNDS, len, worst);
	cudaFree(dev);
	free(v);
	nvshmem_free(h.sig);
	nvshmem_free(h.recv);
	nvshmem_free(h.data);
	nvshmem_finalize();
	return bad;
}
