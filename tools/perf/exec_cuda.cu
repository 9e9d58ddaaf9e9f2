/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec_cuda.cu - the CUDA executor of kinet-perf (--executor cuda): every job
 * is one GPU thread running perf_body_run() from perf_body.h, the code the
 * host executor runs on CPU threads.
 *
 * Jobs are copied to GPU memory with their QP descriptors replaced by device
 * ones (kinet_qp_device_cuda, placed once per QP and kept across message
 * sizes, so the tickets go on where the last run left them), their sample
 * and ticket arrays and the barrier in GPU memory; afterwards the jobs'
 * outcomes and samples are copied back into the host jobs. The payload
 * buffers stay where setup.c put them (host memory) and are mapped into the
 * GPU (the atomic tests and write_lat read them from the kernel).
 *
 * Launch shape: KINET_PERF_CTA_THREADS threads per CTA (default 1: one CTA
 * per job), as many CTAs as it takes for -t jobs.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <kinet/kinet_cuda.h>
#include "perf.h"

static __global__ void cuda_jobs_kernel(struct perf_job *jobs, int n)
{
	int g = blockIdx.x * blockDim.x + threadIdx.x;
	if (g < n)
		perf_body_run(&jobs[g]);
}

/* Maps host memory into the GPU once (the pointer stays valid: UVA). */
static int map_host(void *p, size_t len)
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
			if ((side ? e->db[i] : e->da[i]) != h)
				continue;
			kn_qp **c = &cache[2 * i + side];
			if (!*c) {
				int rc = kinet_qp_device_cuda(side ? e->qb[i] : e->qa[i], c);
				if (rc)
					return rc;
			}
			*out = *c;
			return 0;
		}
	return -EINVAL;
}

static int cuda_run(struct perf_env *e)
{
	if (!kinet_cuda_available()) {
		fprintf(stderr, "kinet-perf: --executor cuda: no usable GPU\n");
		return -ENODEV;
	}
	int n = e->o->threads;
	const char *v = getenv("KINET_PERF_CTA_THREADS");
	int tpc = v && atoi(v) > 0 ? atoi(v) : 1;
	if (tpc > 1024)
		tpc = 1024;
	int rc = map_host(e->abuf, e->buf_len);
	if (!rc)
		rc = map_host(e->bbuf, e->buf_len);
	if (rc)
		return rc;
	size_t ns = (size_t)n * e->cap_iters, nr = (size_t)n * e->o->qdepth;
	struct perf_job *hj = (struct perf_job *)malloc((size_t)n * sizeof(*hj));
	struct perf_job *dj = NULL;
	uint64_t *dpost = NULL, *dcomp = NULL, *dring = NULL, *dbar = NULL;
	cudaError_t ce = cudaSuccess;
	if (!hj)
		return -ENOMEM;
	memcpy(hj, e->jobs, (size_t)n * sizeof(*hj));
	/* placed once per QP: kinet_qp_device_cuda re-initialises the state, so
	 * only on the first run of this environment */
	static struct perf_env *placed_env;
	static const kn_qp **dqa, **dqb;
	if (placed_env != e) {
		kn_qp **cache = (kn_qp **)calloc((size_t)e->nqp * 2, sizeof(*cache));
		free(dqa);
		free(dqb);
		dqa = (const kn_qp **)calloc((size_t)n, sizeof(*dqa));
		dqb = (const kn_qp **)calloc((size_t)n, sizeof(*dqb));
		if (!dqa || !dqb || !cache) {
			free(cache);
			free(hj);
			return -ENOMEM;
		}
		for (int i = 0; i < n && !rc; i++) {
			rc = device_qp(e, hj[i].qp, cache, &dqa[i]);
			if (!rc)
				rc = device_qp(e, hj[i].tqp, cache, &dqb[i]);
		}
		free(cache);
		if (rc) {
			free(hj);
			return rc;
		}
		placed_env = e;
	}
	if ((ce = cudaMalloc((void **)&dj, (size_t)n * sizeof(*dj))) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dpost, ns * 8 + 8)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dcomp, ns * 8 + 8)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dring, nr * 8 + 8)) != cudaSuccess ||
	    (ce = cudaMalloc((void **)&dbar, 64)) != cudaSuccess ||
	    (ce = cudaMemset(dbar, 0, 64)) != cudaSuccess)
		goto out;
	for (int i = 0; i < n; i++) {
		hj[i].qp = dqa[i];
		hj[i].tqp = dqb[i];
		hj[i].tpost = dpost + (size_t)i * e->cap_iters;
		hj[i].tcomp = dcomp + (size_t)i * e->cap_iters;
		hj[i].ring = dring + (size_t)i * e->o->qdepth;
		hj[i].barrier = dbar;
	}
	if ((ce = cudaMemcpy(dj, hj, (size_t)n * sizeof(*dj), cudaMemcpyHostToDevice)) !=
	    cudaSuccess)
		goto out;
	cuda_jobs_kernel<<<(n + tpc - 1) / tpc, tpc>>>(dj, n);
	if ((ce = cudaGetLastError()) != cudaSuccess || (ce = cudaDeviceSynchronize()) != cudaSuccess)
		goto out;
	if ((ce = cudaMemcpy(hj, dj, (size_t)n * sizeof(*dj), cudaMemcpyDeviceToHost)) !=
		    cudaSuccess ||
	    (ce = cudaMemcpy(e->tpost, dpost, ns * 8, cudaMemcpyDeviceToHost)) != cudaSuccess ||
	    (ce = cudaMemcpy(e->tcomp, dcomp, ns * 8, cudaMemcpyDeviceToHost)) != cudaSuccess)
		goto out;
	/* outcomes back into the host jobs, with their host pointers */
	for (int i = 0; i < n; i++) {
		struct perf_job *j = &e->jobs[i];
		j->t_begin = hj[i].t_begin;
		j->t_end = hj[i].t_end;
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
	cudaFree(dj);
	cudaFree(dpost);
	cudaFree(dcomp);
	cudaFree(dring);
	cudaFree(dbar);
	free(hj);
	return ce == cudaSuccess ? 0 : -EIO;
}

extern "C" const struct perf_executor perf_exec_cuda = {"cuda", cuda_run};
