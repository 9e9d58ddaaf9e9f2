/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec_host.c - the host executor of kinet-perf: every job on a CPU thread
 * (kinet_host_exec), running perf_body_run() from perf_body.h, the same code
 * a CUDA executor runs in a kernel. Also the memcpy baseline.
 */
#include <string.h>
#include "perf.h"

static int host_job(int tid, int nthreads, void *arg)
{
	(void)nthreads;
	struct perf_env *e = arg;
	perf_body_run(&e->jobs[tid]);
	return 0; /* outcomes are in the jobs */
}

static int host_run(struct perf_env *e)
{
	return kinet_host_exec(e->o->threads, host_job, e);
}

const struct perf_executor perf_exec_host = {
	.name = "host",
	.run = host_run,
};

/* The baseline: the same message sizes, iterations and threads, each
 * "message" a plain memcpy from the thread's source to its destination. */
static void memcpy_phase(struct perf_job *j, uint64_t from, uint64_t to)
{
	void *dst = (void *)(uintptr_t)j->raddr;
	const void *src = (const void *)(uintptr_t)j->laddr;
	for (uint64_t k = from; k < to; k++) {
		uint64_t t0 = kn_now_ns();
		memcpy(dst, src, j->size);
		/* keep the copy: the compiler may not drop or merge it */
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		if (k >= j->warmup) {
			j->tpost[k - j->warmup] = t0;
			j->tcomp[k - j->warmup] = kn_now_ns();
		}
	}
}

static int memcpy_job(int tid, int nthreads, void *arg)
{
	(void)nthreads;
	struct perf_env *e = arg;
	struct perf_job *j = &e->jobs[tid];
	memcpy_phase(j, 0, j->warmup);
	perf_barrier(j, 1);
	j->t_begin = kn_now_ns();
	memcpy_phase(j, j->warmup, j->warmup + j->iters);
	j->t_end = kn_now_ns();
	perf_barrier(j, 2);
	return 0;
}

int perf_memcpy_run(struct perf_env *e)
{
	return kinet_host_exec(e->o->threads, memcpy_job, e);
}
