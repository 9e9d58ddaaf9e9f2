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
#include "shmem/op.h"
#include "gpu/cudrv.h"

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

/* ---- modules loaded with the driver API (kinet_shmem_cumodule_init) ---- */

/* The state pointer of kinet/shmem_device.h in a module: a static
 * __device__ variable of each translation unit, by its mangled name. */
#define CUMOD_SYMBOL "_ZL13knx_shmem_dev"
#define MAX_CUMODULES 64
static void *cumods[MAX_CUMODULES];
static int ncumods;

/* Sets mod's state pointer: 0, -EINVAL (no such symbol), -EIO. */
static int cumod_set(void *mod, const void *state)
{
	uint64_t d = 0;
	size_t n = 0;
	int r = kinet_cudrv_module_global(mod, CUMOD_SYMBOL, &d, &n);
	if (r == -ENOSYS || r == -ENODEV) {
		SHLOG_ERR("cumodule_init: the CUDA driver cannot look up a module's globals (%s)",
			  kinet_strerror(r));
		return -EIO;
	}
	if (r || n != sizeof(state)) {
		SHLOG_ERR("cumodule_init: module %p has no kinet device state (%s not found, "
			  "error %d): was it compiled from code that includes "
			  "kinet/shmem_device.h (or nvshmem.h)?", mod, CUMOD_SYMBOL, r);
		return -EINVAL;
	}
	return cu_err(cudaMemcpy((void *)(uintptr_t)d, &state, sizeof(state),
				 cudaMemcpyHostToDevice), "setting a module's state pointer");
}

void shm_cuda_cumodules_set(const void *state)
{
	for (int i = 0; i < ncumods; i++)
		cumod_set(cumods[i], state);
}

int kinet_shmem_cumodule_init(void *module)
{
	if (!module) {
		SHLOG_ERR("cumodule_init: no module (NULL)");
		return -EINVAL;
	}
	if (!shm_g.up || shm_g.exec != KINET_SHMEM_EXEC_CUDA) {
		SHLOG_ERR("cumodule_init: %s", shm_g.up ? "not the CUDA executor: a host-executor "
				"program has no CUDA modules" : "the layer is not initialised");
		return shm_g.up ? -ENOTSUP : -EINVAL;
	}
	for (int i = 0; i < ncumods; i++)
		if (cumods[i] == module)
			return cumod_set(module, shm_g.dev);
	if (ncumods == MAX_CUMODULES) {
		SHLOG_ERR("cumodule_init: %d modules already", MAX_CUMODULES);
		return -ENOSPC;
	}
	int rc = cumod_set(module, shm_g.dev);
	if (!rc)
		cumods[ncumods++] = module;
	return rc;
}

int kinet_shmem_cumodule_finalize(void *module)
{
	for (int i = 0; i < ncumods; i++)
		if (cumods[i] == module) {
			cumod_set(module, NULL);
			cumods[i] = cumods[--ncumods];
			return 0;
		}
	SHLOG_ERR("cumodule_finalize: module %p was not initialised", module);
	return -EINVAL;
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
int shm_cuda_op(const struct shm_op *op, void *stream, int own, int sync, uint64_t *out)
{
	(void)op, (void)stream, (void)own, (void)sync, (void)out;
	return -ENOSYS;
}
int shm_cuda_reachable(const void *p, uint64_t len)
{
	(void)p, (void)len;
	return -ENOSYS;
}
void shm_cuda_cumodules_set(const void *state)
{
	(void)state;
}
int kinet_shmem_cumodule_init(void *module)
{
	SHLOG_ERR("cumodule_init: %s", module ? "libkinet_shmem was built without CUDA: there "
		  "are no CUDA modules to set up" : "no module (NULL)");
	return module ? -ENOTSUP : -EINVAL;
}
int kinet_shmem_cumodule_finalize(void *module)
{
	(void)module;
	SHLOG_ERR("cumodule_finalize: libkinet_shmem was built without CUDA");
	return -ENOTSUP;
}

#endif
