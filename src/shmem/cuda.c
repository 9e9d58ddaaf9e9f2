/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda.c - the CUDA runtime calls of the layer: GPU heap, CUDA IPC of GPU
 * heaps between the processes of a node, host memory registration, copies
 * of the device state. libkinet_shmem links the CUDA runtime (statically)
 * when the build has CUDA (KINET_SHMEM_CUDA); without it every call says
 * -ENOSYS and the CUDA executor is refused at init.
 */
#include <errno.h>
#include <string.h>
#include "shmem/shmem_int.h"

#if KINET_SHMEM_CUDA
#include <cuda_runtime_api.h>

static int cu_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	SHLOG_ERR("cuda: %s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int shm_cuda_usable(int gpu)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
		cudaGetLastError();
		return 0;
	}
	return gpu < n;
}

int shm_cuda_select(int gpu)
{
	if (gpu >= 0)
		return cu_err(cudaSetDevice(gpu), "cudaSetDevice");
	return cu_err(cudaFree(0), "creating the CUDA context");
}

int shm_cuda_alloc(size_t len, void **out)
{
	*out = NULL;
	return cu_err(cudaMalloc(out, len), "cudaMalloc");
}

void shm_cuda_free(void *p)
{
	if (p)
		cudaFree(p);
}

int shm_cuda_memset(void *p, int v, size_t len)
{
	int rc = cu_err(cudaMemset(p, v, len), "cudaMemset");
	if (!rc)
		rc = cu_err(cudaDeviceSynchronize(), "cudaMemset (sync)");
	return rc;
}

/* Returns once the bytes are on the GPU: a cudaMemcpy from pageable memory
 * returns once they are staged, and kernels on non-blocking streams (or the
 * NIC's copies, on streams of their own) do not wait for the legacy stream's
 * rest of it. */
int shm_cuda_copy_to(void *dev, const void *host, size_t len)
{
	int rc = cu_err(cudaMemcpy(dev, host, len, cudaMemcpyHostToDevice), "copy to the GPU");
	if (!rc)
		rc = cu_err(cudaStreamSynchronize(cudaStreamLegacy), "copy to the GPU (sync)");
	return rc;
}

int shm_cuda_copy_from(void *host, const void *dev, size_t len)
{
	return cu_err(cudaMemcpy(host, dev, len, cudaMemcpyDeviceToHost), "copy from the GPU");
}

int shm_cuda_ipc_get(void *dev, uint8_t handle[SHM_IPC_HANDLE])
{
	cudaIpcMemHandle_t h;
	_Static_assert(sizeof(h) <= SHM_IPC_HANDLE, "CUDA IPC handle size");
	int rc = cu_err(cudaIpcGetMemHandle(&h, dev), "cudaIpcGetMemHandle");
	if (!rc) {
		memset(handle, 0, SHM_IPC_HANDLE);
		memcpy(handle, &h, sizeof(h));
	}
	return rc;
}

int shm_cuda_ipc_open(const uint8_t handle[SHM_IPC_HANDLE], void **out)
{
	cudaIpcMemHandle_t h;
	memcpy(&h, handle, sizeof(h));
	*out = NULL;
	return cu_err(cudaIpcOpenMemHandle(out, h, cudaIpcMemLazyEnablePeerAccess),
		      "cudaIpcOpenMemHandle");
}

void shm_cuda_ipc_close(void *p)
{
	if (p)
		cudaIpcCloseMemHandle(p);
}

int shm_cuda_host_register(void *p, size_t len)
{
	int rc = cu_err(cudaHostRegister(p, len, cudaHostRegisterPortable | cudaHostRegisterMapped),
			"cudaHostRegister");
	if (rc)
		return rc;
	/* device code uses the host address (unified addressing) */
	void *d = NULL;
	rc = cu_err(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer");
	if (!rc && d != p) {
		SHLOG_ERR("cuda: host memory is seen by the GPU at another address (no unified "
			  "addressing): not supported");
		cudaHostUnregister(p);
		return -ENOTSUP;
	}
	return rc;
}

void shm_cuda_host_unregister(void *p)
{
	if (p)
		cudaHostUnregister(p);
}

#else /* no CUDA in this build */

int shm_cuda_usable(int gpu)
{
	(void)gpu;
	return 0;
}
int shm_cuda_select(int gpu)
{
	(void)gpu;
	return -ENOSYS;
}
int shm_cuda_alloc(size_t len, void **out)
{
	(void)len;
	*out = NULL;
	return -ENOSYS;
}
void shm_cuda_free(void *p)
{
	(void)p;
}
int shm_cuda_memset(void *p, int v, size_t len)
{
	(void)p, (void)v, (void)len;
	return -ENOSYS;
}
int shm_cuda_copy_to(void *dev, const void *host, size_t len)
{
	(void)dev, (void)host, (void)len;
	return -ENOSYS;
}
int shm_cuda_copy_from(void *host, const void *dev, size_t len)
{
	(void)dev, (void)host, (void)len;
	return -ENOSYS;
}
int shm_cuda_ipc_get(void *dev, uint8_t handle[SHM_IPC_HANDLE])
{
	(void)dev, (void)handle;
	return -ENOSYS;
}
int shm_cuda_ipc_open(const uint8_t handle[SHM_IPC_HANDLE], void **out)
{
	(void)handle;
	*out = NULL;
	return -ENOSYS;
}
void shm_cuda_ipc_close(void *p)
{
	(void)p;
}
int shm_cuda_host_register(void *p, size_t len)
{
	(void)p, (void)len;
	return -ENOSYS;
}
void shm_cuda_host_unregister(void *p)
{
	(void)p;
}
int shm_cuda_stream_op(void *stream, int op)
{
	(void)stream, (void)op;
	return -ENOSYS;
}

#endif
