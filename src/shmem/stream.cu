/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stream.cu - device work the host enqueues on a CUDA stream
 * (kinet_shmem_barrier_all_on_stream and friends): a kernel of one thread
 * running the device call. This translation unit registers its own copy of
 * the state pointer, as every CUDA one including kinet/shmem_device.h does.
 */
#include <errno.h>
#include <kinet/kinet.h>
#include <kinet/shmem_device.h>

extern "C" void kinet_log(int level, const char *fmt, ...);
extern "C" int shm_cuda_stream_op(void *stream, int op);

static __global__ void shm_stream_kernel(int op, int *rc)
{
	int r;
	switch (op) {
	case 0:
		r = kn_shmem_barrier_all();
		break;
	case 1:
		r = kn_shmem_sync_all();
		break;
	default:
		r = kn_shmem_quiet();
		break;
	}
	if (rc)
		*rc = r;
}

extern "C" int shm_cuda_stream_op(void *stream, int op)
{
	shm_stream_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(op, NULL);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess) {
		kinet_log(KINET_LOG_ERROR, "shmem: cuda: launching the stream operation: %s",
			  cudaGetErrorString(e));
		return -EIO;
	}
	return 0;
}
