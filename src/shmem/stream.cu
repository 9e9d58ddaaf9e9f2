/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stream.cu - device work that host code asks for, with the CUDA executor:
 * a kernel of one thread running the device call (src/shmem/op.h), on the
 * caller's stream (kinet_shmem_*_on_stream) or on the layer's own stream,
 * waited for (host-initiated calls: kinet_shmem_put, _get, ...). This
 * translation unit registers its own copy of the state pointer, as every
 * CUDA one including kinet/shmem_device.h does.
 */
#include <errno.h>
#include <pthread.h>
#include <kinet/kinet.h>
#include <kinet/shmem_device.h>
#include "shmem/op.h"

extern "C" void kinet_log(int level, const char *fmt, ...);

/* What a waited-for kernel hands back (pinned host memory). */
struct shm_op_result {
	int32_t rc;
	int32_t pad;
	uint64_t value;
};

static __global__ void shm_op_kernel(struct shm_op op, struct shm_op_result *res)
{
	uint64_t v = 0;
	int rc = shm_op_run(&op, &v);
	if (res) {
		res->value = v;
		res->rc = rc;
		__threadfence_system();
	}
}

static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t own_stream;
static struct shm_op_result *own_res; /* pinned, mapped */

static int cu_fail(const char *what, cudaError_t e)
{
	kinet_log(KINET_LOG_ERROR, "shmem: cuda: %s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

extern "C" int shm_cuda_op(const struct shm_op *op, void *stream, int own, int sync,
			   uint64_t *out)
{
	cudaError_t e;
	pthread_mutex_lock(&own_lock);
	if (!own_res) {
		void *p = NULL;
		if ((e = cudaHostAlloc(&p, sizeof(*own_res), cudaHostAllocMapped |
							       cudaHostAllocPortable)) != cudaSuccess) {
			pthread_mutex_unlock(&own_lock);
			return cu_fail("allocating the result of a host-initiated operation", e);
		}
		own_res = (struct shm_op_result *)p;
	}
	if (own && !own_stream &&
	    (e = cudaStreamCreateWithFlags(&own_stream, cudaStreamNonBlocking)) != cudaSuccess) {
		pthread_mutex_unlock(&own_lock);
		return cu_fail("creating the stream of host-initiated operations", e);
	}
	cudaStream_t s = own ? own_stream : (cudaStream_t)stream;
	struct shm_op_result *res = sync ? own_res : (struct shm_op_result *)0;
	if (res) {
		res->rc = -EINPROGRESS;
		res->value = 0;
	}
	shm_op_kernel<<<1, 1, 0, s>>>(*op, res);
	e = cudaGetLastError();
	if (e != cudaSuccess) {
		pthread_mutex_unlock(&own_lock);
		return cu_fail("launching the operation", e);
	}
	int rc = 0;
	if (sync) {
		e = cudaStreamSynchronize(s);
		if (e != cudaSuccess)
			rc = cu_fail("waiting for the operation", e);
		else
			rc = res->rc;
		if (out)
			*out = res->value;
	}
	pthread_mutex_unlock(&own_lock);
	return rc;
}

extern "C" int shm_cuda_reachable(const void *p, uint64_t len)
{
	(void)len;
	cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, p);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return a.type != cudaMemoryTypeUnregistered;
}
