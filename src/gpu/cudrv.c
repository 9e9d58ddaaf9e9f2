/* SPDX-License-Identifier: BSD-3-Clause */
/* CUDA driver API reached through dlopen (see cudrv.h). The types and
 * constant values below are those of the driver's public cuda.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ctype.h>
#include "core/driver.h"
#include "gpu/cudrv.h"

typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_devptr;

enum {
	CU_OK = 0,
	CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CU_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
	CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED = 116,
	CU_ATTR_DMA_BUF_SUPPORTED = 124,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_MEMORYTYPE_DEVICE = 2,
	CU_MEMHOSTREGISTER_PORTABLE = 0x1,
	CU_MEMHOSTREGISTER_DEVICEMAP = 0x2,
	CU_MEMHOSTREGISTER_IOMEMORY = 0x4,
	CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1,
};

static struct {
	void *h;
	int ok;
	char why[160];
	int version;
	int ngpu;
	cu_result (*init)(unsigned);
	cu_result (*driver_version)(int *);
	cu_result (*device_count)(int *);
	cu_result (*device_get)(cu_device *, int);
	cu_result (*device_name)(char *, int, cu_device);
	cu_result (*device_attr)(int *, int, cu_device);
	cu_result (*device_pci)(char *, int, cu_device);
	cu_result (*pointer_attr)(void *, int, cu_devptr);
	cu_result (*range_handle)(void *, cu_devptr, size_t, int, unsigned long long);
	cu_result (*host_register)(void *, size_t, unsigned);
	cu_result (*host_unregister)(void *);
	cu_result (*host_devptr)(cu_devptr *, void *, unsigned);
	cu_result (*ctx_get)(cu_context *);
	cu_result (*ctx_set)(cu_context);
	cu_result (*primary_retain)(cu_context *, cu_device);
	cu_result (*mem_alloc)(cu_devptr *, size_t);
	cu_result (*mem_free)(cu_devptr);
	cu_result (*memset8)(cu_devptr, unsigned char, size_t);
	cu_result (*dtoh)(void *, cu_devptr, size_t);
	cu_result (*htod)(cu_devptr, const void *, size_t);
	cu_result (*module_global)(cu_devptr *, size_t *, void *, const char *);
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

#define SYM(field, name)                                                           \
	do {                                                                       \
		*(void **)&cu.field = dlsym(cu.h, name);                           \
		if (!cu.field) {                                                   \
			snprintf(cu.why, sizeof(cu.why), "libcuda.so.1 lacks %s", name); \
			return;                                                    \
		}                                                                  \
	} while (0)

static void cu_load_once(void)
{
	if (KT(NO_CUDA)) {
		snprintf(cu.why, sizeof(cu.why), "CUDA disabled (KINET_NO_CUDA)");
		return;
	}
	cu.h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu.h) {
		snprintf(cu.why, sizeof(cu.why), "no CUDA driver (libcuda.so.1 not found)");
		return;
	}
	SYM(init, "cuInit");
	SYM(driver_version, "cuDriverGetVersion");
	SYM(device_count, "cuDeviceGetCount");
	SYM(device_get, "cuDeviceGet");
	SYM(device_name, "cuDeviceGetName");
	SYM(device_attr, "cuDeviceGetAttribute");
	SYM(device_pci, "cuDeviceGetPCIBusId");
	SYM(pointer_attr, "cuPointerGetAttribute");
	SYM(host_register, "cuMemHostRegister_v2");
	SYM(host_unregister, "cuMemHostUnregister");
	SYM(host_devptr, "cuMemHostGetDevicePointer_v2");
	SYM(ctx_get, "cuCtxGetCurrent");
	SYM(ctx_set, "cuCtxSetCurrent");
	SYM(primary_retain, "cuDevicePrimaryCtxRetain");
	SYM(mem_alloc, "cuMemAlloc_v2");
	SYM(mem_free, "cuMemFree_v2");
	SYM(memset8, "cuMemsetD8_v2");
	SYM(dtoh, "cuMemcpyDtoH_v2");
	SYM(htod, "cuMemcpyHtoD_v2");
	/* CUDA 11.7+: absent on older drivers, dma-buf is then unavailable */
	*(void **)&cu.range_handle = dlsym(cu.h, "cuMemGetHandleForAddressRange");
	/* kinet-shmem's modules (nvshmemx_cumodule_init) only */
	*(void **)&cu.module_global = dlsym(cu.h, "cuModuleGetGlobal_v2");
	cu_result r = cu.init(0);
	if (r != CU_OK) {
		snprintf(cu.why, sizeof(cu.why), "cuInit failed (CUDA error %d)", r);
		return;
	}
	cu.driver_version(&cu.version);
	if (cu.device_count(&cu.ngpu) != CU_OK)
		cu.ngpu = 0;
	if (cu.ngpu == 0) {
		snprintf(cu.why, sizeof(cu.why), "CUDA driver %d.%d, no GPU", cu.version / 1000,
			 (cu.version % 1000) / 10);
		return;
	}
	cu.ok = 1;
}

int kinet_cudrv_load(char *why, size_t whylen)
{
	pthread_once(&cu_once, cu_load_once);
	if (!cu.ok) {
		if (why && whylen)
			snprintf(why, whylen, "%s", cu.why);
		return -ENODEV;
	}
	return 0;
}

int kinet_cudrv_version(void)
{
	pthread_once(&cu_once, cu_load_once);
	return cu.version;
}

int kinet_cudrv_gpu_count(void)
{
	return kinet_cudrv_load(NULL, 0) ? 0 : cu.ngpu;
}

int kinet_cudrv_gpu_info(int ordinal, struct kinet_gpu_info *o)
{
	if (!o || kinet_cudrv_load(NULL, 0))
		return -ENODEV;
	if (ordinal < 0 || ordinal >= cu.ngpu)
		return -EINVAL;
	memset(o, 0, sizeof(*o));
	cu_device d;
	if (cu.device_get(&d, ordinal) != CU_OK)
		return -EIO;
	o->ordinal = ordinal;
	if (cu.device_name(o->name, (int)sizeof(o->name), d) != CU_OK)
		snprintf(o->name, sizeof(o->name), "GPU %d", ordinal);
	if (cu.device_pci(o->pci_bus_id, (int)sizeof(o->pci_bus_id), d) == CU_OK)
		for (char *c = o->pci_bus_id; *c; c++)
			*c = (char)tolower((unsigned char)*c);
	int v = 0;
	o->dmabuf = cu.range_handle && cu.device_attr(&v, CU_ATTR_DMA_BUF_SUPPORTED, d) == CU_OK
			    ? v
			    : 0;
	v = 0;
	o->gdr = cu.device_attr(&v, CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED, d) == CU_OK ? v : 0;
	v = 0;
	o->host_ptr_same =
		cu.device_attr(&v, CU_ATTR_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, d) == CU_OK ? v
												: 0;
	return 0;
}

int kinet_cudrv_mem_kind(const void *p)
{
	if (kinet_cudrv_load(NULL, 0))
		return KINET_MEM_HOST;
	unsigned int type = 0;
	if (cu.pointer_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			    (cu_devptr)(uintptr_t)p) == CU_OK &&
	    type == CU_MEMORYTYPE_DEVICE)
		return KINET_MEM_CUDA;
	return KINET_MEM_HOST;
}

int kinet_cudrv_dmabuf_fd(void *p, size_t len, int *fd, uint64_t *offset)
{
	if (kinet_cudrv_load(NULL, 0))
		return -ENODEV;
	if (!cu.range_handle)
		return -ENOTSUP;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t base = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	size_t span = (((uintptr_t)p + len + pg - 1) & ~(uintptr_t)(pg - 1)) - base;
	int h = -1;
	cu_result r = cu.range_handle(&h, (cu_devptr)base, span, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
				      0);
	if (r != CU_OK || h < 0) {
		KLOG_DBG("cuMemGetHandleForAddressRange(%p, %zu): CUDA error %d", (void *)base, span,
			 r);
		return -ENOTSUP;
	}
	*fd = h;
	*offset = (uint64_t)((uintptr_t)p - base);
	return 0;
}

/* The driver API needs a current context: the caller's, else GPU 0's
 * primary context. */
static int ensure_ctx(void)
{
	cu_context c = NULL;
	if (cu.ctx_get(&c) == CU_OK && c)
		return 0;
	cu_device d;
	if (cu.device_get(&d, 0) != CU_OK || cu.primary_retain(&c, d) != CU_OK ||
	    cu.ctx_set(c) != CU_OK)
		return -EIO;
	return 0;
}

int kinet_cudrv_map(void *p, size_t len, int io, void **devp)
{
	if (kinet_cudrv_load(NULL, 0))
		return -ENODEV;
	if (ensure_ctx())
		return -EIO;
	unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
	if (io)
		flags |= CU_MEMHOSTREGISTER_IOMEMORY;
	cu_result r = cu.host_register(p, len, flags);
	if (r != CU_OK && r != CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
		KLOG_DBG("cuMemHostRegister(%p, %zu, io=%d): CUDA error %d", p, len, io, r);
		return -EIO;
	}
	cu_devptr d = 0;
	if (cu.host_devptr(&d, p, 0) != CU_OK) {
		if (r == CU_OK)
			cu.host_unregister(p);
		return -EIO;
	}
	*devp = (void *)(uintptr_t)d;
	return r == CU_ERROR_HOST_MEMORY_ALREADY_REGISTERED ? 1 : 0;
}

int kinet_cudrv_unmap(void *p)
{
	if (kinet_cudrv_load(NULL, 0))
		return -ENODEV;
	return cu.host_unregister(p) == CU_OK ? 0 : -EIO;
}

const char *kinet_peermem_module(void)
{
	if (access("/sys/module/nvidia_peermem", F_OK) == 0)
		return "nvidia_peermem";
	if (access("/sys/module/nv_peer_mem", F_OK) == 0)
		return "nv_peer_mem";
	return NULL;
}

int kinet_peermem_loaded(void)
{
	return kinet_peermem_module() != NULL;
}

int kinet_cudrv_alloc(int ordinal, size_t len, void **out)
{
	if (kinet_cudrv_load(NULL, 0))
		return -ENODEV;
	if (ordinal < 0 || ordinal >= cu.ngpu || !out)
		return -EINVAL;
	cu_device d;
	cu_context c;
	if (cu.device_get(&d, ordinal) != CU_OK || cu.primary_retain(&c, d) != CU_OK ||
	    cu.ctx_set(c) != CU_OK)
		return -EIO;
	cu_devptr p = 0;
	if (cu.mem_alloc(&p, len) != CU_OK)
		return -ENOMEM;
	*out = (void *)(uintptr_t)p;
	return 0;
}

int kinet_cudrv_free(void *p)
{
	if (kinet_cudrv_load(NULL, 0))
		return -ENODEV;
	return cu.mem_free((cu_devptr)(uintptr_t)p) == CU_OK ? 0 : -EIO;
}

int kinet_cudrv_memset(void *p, int v, size_t n)
{
	if (kinet_cudrv_load(NULL, 0) || ensure_ctx())
		return -ENODEV;
	return cu.memset8((cu_devptr)(uintptr_t)p, (unsigned char)v, n) == CU_OK ? 0 : -EIO;
}

int kinet_cudrv_read(void *dst, const void *src, size_t n)
{
	if (kinet_cudrv_load(NULL, 0) || ensure_ctx())
		return -ENODEV;
	return cu.dtoh(dst, (cu_devptr)(uintptr_t)src, n) == CU_OK ? 0 : -EIO;
}

int kinet_cudrv_write(void *dst, const void *src, size_t n)
{
	if (kinet_cudrv_load(NULL, 0) || ensure_ctx())
		return -ENODEV;
	return cu.htod((cu_devptr)(uintptr_t)dst, src, n) == CU_OK ? 0 : -EIO;
}

int kinet_cudrv_module_global(void *module, const char *name, uint64_t *dptr, size_t *bytes)
{
	if (!module || !name || !dptr || !bytes)
		return -EINVAL;
	int rc = kinet_cudrv_load(NULL, 0);
	if (rc)
		return rc;
	if (!cu.module_global)
		return -ENOSYS;
	cu_devptr d = 0;
	size_t n = 0;
	cu_result r = cu.module_global(&d, &n, module, name);
	if (r != CU_OK)
		return -ENOENT;
	*dptr = (uint64_t)d;
	*bytes = n;
	return 0;
}
